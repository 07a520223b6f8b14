"""One batch per output folder: an exclusive lock that says who holds it.

Two batches writing to one folder (a command started twice, two cluster jobs)
would both run every pair and append duplicate lines.  :func:`folder_lock`
takes an exclusive lock on ``OUT/.sfapprox-batch.lock`` (``flock`` through
the ``filelock`` package: the kernel releases it when the holder dies, even
by ``kill -9``, so a lock is never stale) and writes who holds it
(pid, host, start time, command) to ``OUT/.sfapprox-batch.holder.json``.  A
second batch refuses at once, naming the holder, or waits for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._atomic import resolved_path
from .._errors import SfapproxError, parameter

__all__ = ["LOCK_FILE", "HOLDER_FILE", "FolderBusyError", "folder_lock", "read_holder", "running_holder",
           "describe_holder"]

LOCK_FILE = ".sfapprox-batch.lock"
HOLDER_FILE = ".sfapprox-batch.holder.json"

#: Locks this process holds, by folder: taking one again (run_batch inside the CLI's hold) nests.
_held: dict[str, Any] = {}


class FolderBusyError(SfapproxError):
    """Another process holds a batch folder's lock.

    Parameters
    ----------
    message : str
        One line: the folder and who holds it.
    folder : Path
        The folder.
    holder : dict
        What the holder wrote about itself.

    Attributes
    ----------
    folder : Path
        The batch output folder.
    holder : dict
        What the holder wrote about itself (``pid``, ``host``, ``started``,
        ``command``); empty when it could not be read.
    """

    def __init__(self, message: str, folder: Path, holder: dict[str, Any]):
        super().__init__(message)
        self.folder = folder
        self.holder = holder


def read_holder(folder: str | os.PathLike) -> dict[str, Any]:
    """What the lock's holder wrote about itself (empty when absent or unreadable).

    Parameters
    ----------
    folder : str or os.PathLike
        The batch output folder.

    Returns
    -------
    dict
        ``pid``, ``host``, ``started``, ``command`` as written.
    """
    try:
        data = json.loads((Path(folder) / HOLDER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def running_holder(folder: str | os.PathLike) -> dict[str, Any]:
    """What the batch using ``folder`` now wrote about itself; empty when none is.

    For a reader of the folder (``report``), which must not take the lock even for a moment (a batch
    starting then would be refused).  The holder file alone is no proof: a batch killed outright
    leaves it behind, so one whose process no longer runs on this host is none.  One on another host
    cannot be checked from here and counts as running.

    Parameters
    ----------
    folder : str or os.PathLike
        The batch output folder.

    Returns
    -------
    dict
        As :func:`read_holder`.
    """
    from .._atomic import process_gone

    holder = read_holder(folder)
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname() and os.name == "posix":
        # this process's own (the batch it runs) is none other; nor is a pid that is no number
        if not isinstance(pid, int) or pid == os.getpid() or process_gone(pid):
            return {}
    return holder


def describe_holder(holder: dict[str, Any]) -> str:
    """``"pid 4242 on node07, started 2026-01-02 10:00:00 UTC: sfapprox batch m.toml --out-dir runs/t1"``.

    Parameters
    ----------
    holder : dict
        What :func:`read_holder` returned; empty gives ``"holder unknown"``.
    """
    if not holder:
        return "holder unknown"
    text = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
    if holder.get("started"):
        text += f", started {holder['started']}"
    if holder.get("command"):
        text += f": {holder['command']}"
    return text


def _me() -> dict[str, Any]:
    command = " ".join(["sfapprox" if i == 0 and a.endswith(("sfapprox", "__main__.py")) else a
                        for i, a in enumerate(sys.argv)])
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": command[:300],
    }


@contextlib.contextmanager
def folder_lock(
    folder: str | os.PathLike,
    *,
    wait: bool | float = False,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the exclusive lock of a batch output folder (which must exist) for the block.

    Parameters
    ----------
    folder : path
        The batch output folder.
    wait : bool or float, default=False
        False: refuse at once when another process holds the lock; True: wait
        as long as it takes; a number: wait at most that many seconds.
    on_wait : callable, optional
        Called once with a description of the holder when this call has to
        wait (for a "waiting for ..." message).

    Raises
    ------
    FolderBusyError
        When the lock is held elsewhere and ``wait`` does not allow waiting
        (long enough).  One line naming the folder and the holder.
    """
    from filelock import FileLock, Timeout

    folder = Path(folder)
    key = str(resolved_path(folder))  # a loop of links: one line, not 3.11's RuntimeError (3.13 let it pass)
    if key in _held:  # this process holds it already: nest
        yield
        return
    lock = FileLock(str(folder / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        # who holds it, never a batch killed outright before it (its file stays until the holder writes its own)
        holder = running_holder(folder)
        if wait is False or (wait is not True and float(wait) <= 0):
            raise _busy(folder, holder, None) from None
        if on_wait is not None:
            on_wait(describe_holder(holder))
        start = time.monotonic()
        try:
            lock.acquire(timeout=-1 if wait is True else float(wait), poll_interval=0.2)
        except Timeout:
            raise _busy(folder, running_holder(folder), time.monotonic() - start) from None
    _held[key] = lock
    try:
        _write_holder(folder)
        yield
    finally:
        del _held[key]
        with contextlib.suppress(OSError):
            (folder / HOLDER_FILE).unlink()
        lock.release()


def _write_holder(folder: Path) -> None:
    # Who holds the lock is information, not a condition: a failure to say it is no error.
    tmp = folder / f".{HOLDER_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(_me()) + "\n", encoding="utf-8")
        os.replace(tmp, folder / HOLDER_FILE)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _busy(folder: Path, holder: dict[str, Any], waited: float | None) -> FolderBusyError:
    if waited is None:
        hint = f"wait for it to end, or pass {parameter('wait', True)} to start when it does"  # (run_batch's, the CLI's)
    else:
        hint = f"still busy after waiting {waited:.0f} s"
    return FolderBusyError(f"{folder}: another batch is using this folder ({describe_holder(holder)}); {hint}",
                           folder, holder)
