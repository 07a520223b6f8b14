"""The results file of a batch: one JSON line per (matrix, method), never half a line.

A line is built whole in memory (ending in ``"\\n"``) and written with a single
``os.write`` on a file opened with ``O_APPEND``, then fsync'ed, so even a
``kill -9`` never leaves half a line behind a complete one; a trailing
incomplete line (from a crash inside the write) is ignored when reading and
cut away when a run resumes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..formats import jsonable

__all__ = [
    "RESULTS_FILE",
    "RECORD_FORMAT",
    "RECORD_VERSION",
    "DONE_STATUSES",
    "encode_record",
    "ResultsWriter",
    "ResultsFile",
    "read_results",
    "repair_results",
]

RESULTS_FILE = "results.jsonl"
RECORD_FORMAT = "sfapprox-batch-record"
RECORD_VERSION = 1

#: Statuses that count as finished: resuming skips these pairs.
DONE_STATUSES = ("ok", "not applicable")


def encode_record(record: dict[str, Any]) -> bytes:
    """One complete line: compact JSON (no NaN) plus ``"\\n"``, UTF-8."""
    return (json.dumps(jsonable(record), allow_nan=False, ensure_ascii=False) + "\n").encode("utf-8")


class ResultsWriter:
    """Appends whole lines to a results file: one ``os.write`` per line, then fsync.

    ``O_APPEND`` puts every write at the current end of the file, and a line
    is never split over two writes, so a killed process leaves complete lines
    plus at most one partial tail (which :func:`read_results` ignores).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        data = encode_record(record)
        written = os.write(self._fd, data)
        if written != len(data):  # disk full: a short write; cut it back off
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
            raise OSError(f"{self.path}: short write ({written} of {len(data)} bytes); is the disk full?")
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class ResultsFile:
    """Parsed results: complete valid records, numbers of bad complete lines, partial tail bytes."""

    records: list[dict[str, Any]]
    bad_lines: list[int]
    tail_bytes: int

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The last record of each (matrix, method)."""
        return {(r["matrix"], r["method"]): r for r in self.records}


def read_results(path: str | os.PathLike) -> ResultsFile:
    """Read a results file, skipping a trailing incomplete line and invalid lines.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = p.write_bytes(b'{"matrix": "a", "method": "sf", "status": "ok"}\\n{"matrix": "b", "me')
    >>> r = read_results(p)
    >>> len(r.records), r.tail_bytes
    (1, 19)
    """
    path = Path(path)
    if not path.exists():
        return ResultsFile([], [], 0)
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n")
    records, bad = [], []
    if complete or data.startswith(b"\n"):
        for number, line in enumerate(complete.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                bad.append(number)
                continue
            if isinstance(record, dict) and {"matrix", "method", "status"} <= set(record):
                records.append(record)
            else:
                bad.append(number)
    return ResultsFile(records, bad, len(tail))


def repair_results(path: str | os.PathLike, drop: set[tuple[str, str]] = frozenset()) -> list[str]:
    """Make the results file hold only complete, valid lines not in ``drop``.

    A partial tail alone is truncated in place; invalid lines or lines to
    drop make the file be rewritten atomically.  Returns what was done, for
    the user.
    """
    from .._atomic import atomic_path

    path = Path(path)
    parsed = read_results(path)
    keep = [r for r in parsed.records if (r["matrix"], r["method"]) not in drop]
    done: list[str] = []
    if parsed.tail_bytes:
        done.append(f"cut an incomplete last line ({parsed.tail_bytes} bytes)")
    if parsed.bad_lines:
        done.append(f"removed {len(parsed.bad_lines)} invalid line(s): {parsed.bad_lines[:5]}")
    if len(keep) != len(parsed.records):
        done.append(f"removed {len(parsed.records) - len(keep)} line(s) to recompute")
    if parsed.bad_lines or len(keep) != len(parsed.records):
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"".join(encode_record(r) for r in keep))
    elif parsed.tail_bytes:
        os.truncate(path, path.stat().st_size - parsed.tail_bytes)
    return done
