"""Writing files so that a reader never sees half of one: temporary file, fsync, rename.

Every file sfapprox writes (JSON, tables, factors, plots, downloads) goes
through :func:`atomic_path` (pooch's habit): the data is written to a
temporary file in the destination folder, flushed to disk, and only then
renamed onto the target.  A crash, Ctrl-C or full disk while writing
leaves the old file (or nothing) in place and no temporary behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._errors import SfapproxError

__all__ = ["atomic_path", "write_text", "write_json"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, force: bool = True, make_parents: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it into place only on success.

    With ``force=False`` an existing file is an error raised before anything
    is written.  ``make_parents`` creates the destination folder (caches).
    """
    target = Path(path)
    if target.exists() and not force:
        raise SfapproxError(f"{target}: already exists; use --force to overwrite it")
    parent = target.parent if str(target.parent) else Path(".")
    if make_parents:
        parent.mkdir(parents=True, exist_ok=True)
    if not parent.is_dir():
        raise SfapproxError(f"{target}: folder {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp creates the file 0600; give it the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(tmp)  # the rename must not land before the data on a crash
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _umask() -> int:
    # Linux reports the umask without changing it (os.umask would, for a moment, in every thread).
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text(path: str | os.PathLike, text: str, *, force: bool = True) -> None:
    """Write ``text`` (UTF-8), atomically."""
    with atomic_path(path, force=force) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, data: Any, *, force: bool = True) -> None:
    """Write ``data`` as indented JSON (NaN as null), atomically."""
    from .formats import jsonable

    write_text(path, json.dumps(jsonable(data), indent=2) + "\n", force=force)
