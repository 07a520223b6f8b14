"""The results file of a batch: one JSON line per (matrix, method), never half a line.

A line is built whole in memory (ending in ``"\\n"``) and written with a single
``os.write`` on a file opened with ``O_APPEND``, then fsync'ed, so even a
``kill -9`` never leaves half a line behind a complete one; a trailing
incomplete line (from a crash inside the write) is ignored when reading and
cut away when a run resumes.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import OutputError, atomic_path, os_cause, write_advice
from .._errors import ParameterError
from ..formats import counted, jsonable
from .._validation import format_bytes

__all__ = [
    "RESULTS_FILE",
    "RECORD_FORMAT",
    "RECORD_VERSION",
    "DONE_STATUSES",
    "MEASURES",
    "FILE_MISSING",
    "encode_record",
    "ResultsWriter",
    "ResultsFile",
    "read_results",
    "repair_results",
    "supersede_results",
    "record_problem",
]

RESULTS_FILE = "results.jsonl"
RECORD_FORMAT = "sfapprox-batch-record"
RECORD_VERSION = 1

#: Statuses that count as finished: resuming skips these pairs.
DONE_STATUSES = ("ok", "not applicable")
#: Every status a line may have (the others: a fit that failed, a matrix that could not be had).
STATUSES = ("ok", "not applicable", "failed", "unavailable", "interrupted")
#: The recorded settings that say what a line measures (not how hard it tried): a line made with
#: another one is another experiment, redone rather than skipped by a batch (a resume with --budget 0.1
#: over lines at 'sf' used to compute nothing and report the old numbers), and never ranked beside the
#: others in a report.
MEASURES = ("budget", "protocol", "count_indices")

#: ``reason`` of an ``unavailable`` record whose file was neither present nor downloadable.
FILE_MISSING = "file missing"


def encode_record(record: dict[str, Any]) -> bytes:
    """One complete line: compact JSON (no NaN) plus ``"\\n"``, UTF-8.

    Parameters
    ----------
    record : dict
        A batch record (made JSON-ready by :func:`~sfapprox.formats.jsonable`).

    Returns
    -------
    bytes
    """
    return (json.dumps(jsonable(record), allow_nan=False, ensure_ascii=False) + "\n").encode("utf-8")


class ResultsWriter:
    """Appends whole lines to a results file: one ``os.write`` per line, then fsync.

    ``O_APPEND`` puts every write at the current end of the file, and a line
    is never split over two writes, so a killed process leaves complete lines
    plus at most one partial tail (which :func:`read_results` ignores).

    Parameters
    ----------
    path : str or os.PathLike
        The results file (created when missing, appended to otherwise).

    Attributes
    ----------
    path : Path
        The results file.

    Raises
    ------
    OutputError
        When the file cannot be opened for writing.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._error("cannot be opened for writing", exc) from exc

    def write(self, record: dict[str, Any]) -> None:
        """Append one line; on failure (full disk) nothing of it stays and :class:`~sfapprox._atomic.OutputError` says so.

        Parameters
        ----------
        record : dict
            The record (:func:`encode_record`).
        """
        data = encode_record(record)
        try:
            self._append(data)
            os.fsync(self._fd)
        except OSError as exc:
            raise self._error("could not append a line", exc) from exc

    def _append(self, data: bytes) -> None:
        """Append ``data`` whole, or cut off what went in of it and raise the OSError that stopped it.

        A short write is no error of its own: the OS writes what fits and says why with the next write,
        so the rest is written again to learn the cause (a full disk, a file over the file system's or
        this process's largest file: "No space left" was said of both).
        """
        written = os.write(self._fd, data)
        while written < len(data):
            try:
                done = os.write(self._fd, data[written:])
            except OSError as exc:
                cause = exc
            else:
                written += done
                if done:
                    continue
                cause = OSError(errno.ENOSPC, "No space left on device")  # nothing written, and no reason given
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
            raise OSError(cause.errno, f"{os_cause(cause)} (only {format_bytes(written)} of "
                                       f"{format_bytes(len(data))} written)") from cause

    def _error(self, what: str, exc: OSError):
        cause = exc.strerror or str(exc)
        advice = write_advice(exc.errno, self.path.parent)
        if advice is not None:
            cause += f"; {advice}"
        return OutputError(f"{self.path}: {what} ({cause}); the complete lines already there are kept, "
                           "run the same command again to resume", self.path, exc.errno)

    def close(self) -> None:
        """Close the file (again: nothing)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class ResultsFile:
    """Parsed results: complete valid records, numbers of bad complete lines (and why), partial tail bytes.

    Attributes
    ----------
    records : list of dict
        The complete, valid records, in file order.
    bad_lines : list of int
        Line numbers (1-based) of complete lines that are not valid records.
    tail_bytes : int
        Bytes of an incomplete last line (0: none).
    problems : dict of int to str
        Why each bad line is bad, by line number.
    unterminated : bool
        The last line is a whole, valid record without its newline (a file edited by hand and saved
        without one): it is among ``records``, not an incomplete line, and a repair ends it.
    tail : bytes
        The incomplete last line itself (empty: none).
    tail_line : int
        Its line number (0: none).
    """

    records: list[dict[str, Any]]
    bad_lines: list[int]
    tail_bytes: int
    problems: dict[int, str] = field(default_factory=dict)
    unterminated: bool = False
    tail: bytes = b""
    tail_line: int = 0

    def skipped(self) -> dict[int, str]:
        """The complete lines that are not valid records, by number, with why (what a report says it left out)."""
        return {number: self.problems.get(number, "invalid") for number in self.bad_lines}

    def left_out(self) -> dict[int, str]:
        """Every line left out, by number, with why: :meth:`skipped`'s, then the incomplete last line (a
        report said only "skipped N bytes" of it on stderr, and its files ranked the rows it is missing
        from without a sign)."""
        out = self.skipped()
        if self.tail_bytes:
            out[self.tail_line] = f"{format_bytes(self.tail_bytes)} of an incomplete last line{_tail_pair(self.tail)}"
        return out

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The last record of each (matrix, method)."""
        return {(r["matrix"], r["method"]): r for r in self.records}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_number(value: Any) -> bool:
    """A finite int or float (not a bool; an edited integer too large for a float is not finite)."""
    if not _number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _measure(value: Any) -> bool:
    """A finite number >= 0, as an error or a time is (an edited 1e400 integer, -5 or NaN is not)."""
    return finite_number(value) and value >= 0


#: Type checks of a record's fields beyond the three required strings (None is always allowed).
_FIELD_CHECKS: dict[str, tuple[str, Any]] = {
    "category": ("a string", lambda v: isinstance(v, str)),
    "n": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "nnz": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "budget": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "fro_error": ("a finite number >= 0", _measure),
    "rel_error": ("a finite number >= 0", _measure),
    "seconds": ("a finite number >= 0", _measure),
    "params": ("a table", lambda v: isinstance(v, dict)),
    "settings": ("a table", lambda v: isinstance(v, dict)),
    "matrix_info": ("a table", lambda v: isinstance(v, dict)),
    "reference": ("a table of numbers", lambda v: isinstance(v, dict) and all(_number(x) for x in v.values())),
    "factors": ("a string", lambda v: isinstance(v, str)),
    "error": ("a string", lambda v: isinstance(v, str)),
    "reason": ("a string", lambda v: isinstance(v, str)),
}


def record_problem(record: Any) -> str | None:
    """Why a parsed line is not a usable record (None when it is).

    Checks the types of the fields that readers use, not only that the
    required ones are there: ``matrix``, ``method`` and ``status`` must be
    strings; the optional fields, when present and not null, must have their
    type (a number for ``fro_error``, a table for ``reference``, ...).

    Parameters
    ----------
    record : object
        A parsed JSON line.

    Returns
    -------
    str or None

    Examples
    --------
    >>> record_problem({"matrix": ["a"], "method": "sf", "status": "ok"})
    "field 'matrix' must be a non-empty string, got list"
    """
    if not isinstance(record, dict):
        return f"not a JSON object (a {type(record).__name__})"
    for key in ("matrix", "method", "status"):
        if key not in record:
            return f"no field {key!r}"
        if not isinstance(record[key], str) or not record[key]:
            got = "an empty string" if record[key] == "" else type(record[key]).__name__
            return f"field {key!r} must be a non-empty string, got {got}"
    for key, (kind, ok) in _FIELD_CHECKS.items():
        value = record.get(key)
        if value is not None and not ok(value):
            got = type(value).__name__ if not _number(value) else _shown(value)
            return f"field {key!r} must be {kind}, got {got}"
    # A line of another format or a later version of this one is not read as ours (its fields may
    # mean something else); lines without them (written before they were recorded) are.
    if record.get("format", RECORD_FORMAT) != RECORD_FORMAT:
        return f"field 'format' must be {RECORD_FORMAT!r}, got {record['format']!r}"
    version = record.get("version", RECORD_VERSION)
    whole = isinstance(version, int) and not isinstance(version, bool)
    if whole and version > RECORD_VERSION:
        return (f"field 'version' must be at most {RECORD_VERSION} (this sfapprox's records), got {version!r}; "
                "a newer sfapprox wrote it")
    if not (whole and version >= 1):  # 0, -1 or "1": an edit, not a newer sfapprox (it said so of them all)
        return f"field 'version' must be a whole number from 1 to {RECORD_VERSION}, got {version!r}"
    for key in ("matrix", "method"):  # (a control character would reach the terminal raw: ESC sequences)
        if any(ord(c) < 32 or ord(c) == 127 for c in record[key]):
            return f"field {key!r} holds a control character"
    if record["status"] not in STATUSES:  # an edited "OK" was shown as a status of its own
        return f"field 'status' must be one of {', '.join(map(repr, STATUSES))}, got {record['status']!r}"
    if record["status"] == "ok" and "fro_error" not in record:
        # a finished line without its error was skipped by every resume and ranked nowhere, silently
        # (null stays: JSON has no NaN, and a writer turns one into null)
        return "an 'ok' line must have its fro_error"
    return None


def _shown(value: float) -> str:
    """A number for a message, short even for an edited 10**400."""
    text = repr(value)
    return text if len(text) <= 24 else text[:12] + "..." + f" ({counted(len(text), 'digit')})"


def results_file_of(path: str | os.PathLike) -> Path:
    """The results file ``path`` names: ``path`` itself, or a batch output folder's ``results.jsonl``
    (a folder named ``results.jsonl`` is itself, for the caller to refuse)."""
    path = Path(path)
    return path / RESULTS_FILE if path.is_dir() and path.name != RESULTS_FILE else path


def read_results(path: str | os.PathLike) -> ResultsFile:
    """Read a results file, skipping a trailing incomplete line and invalid lines.

    A line is invalid when it is not JSON or not a usable record
    (:func:`record_problem`); ``problems`` says why, by line number.

    Parameters
    ----------
    path : str or os.PathLike
        The results file, or a batch's output folder (its ``results.jsonl``, as
        :func:`~sfapprox.datasets.build_report` takes it); a missing one reads as empty.

    Returns
    -------
    ResultsFile

    Raises
    ------
    ParameterError
        If ``path`` is no path (None), or a folder named ``results.jsonl``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = p.write_bytes(b'{"matrix": "a", "method": "sf", "status": "ok", "fro_error": 1.0}\\n{"matrix": "b", "me')
    >>> r = read_results(p)
    >>> len(r.records), r.tail_bytes
    (1, 19)
    """
    if not isinstance(path, (str, os.PathLike)):  # Path(None) was a raw TypeError
        raise ParameterError(f"path must be a results file or a batch's output folder (a str or pathlib.Path), "
                             f"got {type(path).__name__}")
    given = Path(path)
    path = results_file_of(given)  # run_batch's out_dir: IsADirectoryError before
    if not path.exists():
        return ResultsFile([], [], 0)
    if path.is_dir():  # a folder named results.jsonl: "Is a directory" from deep inside
        if path != given:  # (the output folder was given: asking for it again would not help)
            raise ParameterError(f"{path}: is a folder, where the batch output folder {given} keeps its results "
                                 "file; move or rename that folder")
        raise ParameterError(f"{path}: is a folder, not a batch's results file; give the results file or the batch's "
                             "output folder")
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n")
    records, bad, problems = [], [], {}
    if complete or data.startswith(b"\n"):
        for number, line in enumerate(complete.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except UnicodeDecodeError:  # said "not valid JSON" of a line an editor saved as Latin-1 or UTF-16
                problem = "not UTF-8 text (saved in another encoding?); a batch writes UTF-8"
            except (json.JSONDecodeError, RecursionError):
                problem = "not valid JSON"
            else:
                problem = record_problem(record)
            if problem is None:
                records.append(record)
            else:
                bad.append(number)
                problems[number] = problem
    last = _whole_record(tail)
    if last is not None:  # a crash inside the one write leaves no valid record: this one was edited
        records.append(last)
        return ResultsFile(records, bad, 0, problems, unterminated=True)
    return ResultsFile(records, bad, len(tail), problems, tail=tail, tail_line=data.count(b"\n") + 1 if tail else 0)


#: A field's text at the start of a cut line: which pair it was is all that can be read of it.
_TEXT_FIELD = {key: re.compile(rb'"' + key.encode() + rb'"\s*:\s*"([^"\\\x00-\x1f]{1,200})"')
               for key in ("matrix", "method")}


def _tail_pair(tail: bytes) -> str:
    """``" (strike/sf, by what is left of it)"`` when the cut line still names its matrix and method, else ""."""
    found = [_TEXT_FIELD[key].search(tail) for key in ("matrix", "method")]
    if not all(found):
        return ""
    matrix, method = (m.group(1).decode("utf-8", "replace") for m in found)
    return f" ({matrix}/{method}, by what is left of it)"


def _whole_record(line: bytes) -> dict[str, Any] | None:
    """``line`` as a valid record, else None (not JSON, not a usable record, or empty)."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    return record if record_problem(record) is None else None


def supersede_results(path: str | os.PathLike, keys: set[tuple[str, str]]) -> int:
    """Keep one line of each ``(matrix, method)`` in ``keys``, the newest (an interrupted one only where
    no other is left): the lines a run redid are replaced once their new lines are written, never
    before (an interrupted ``--redo`` removed every finished line and wrote none).  Rewritten atomically;
    returns the lines removed.

    Parameters
    ----------
    path : str or os.PathLike
        The results file.
    keys : set of (str, str)
        The pairs this run recomputed.

    Returns
    -------
    int
    """
    path = Path(path)
    parsed = read_results(path)
    keep_at: dict[tuple[str, str], int] = {}
    for i, record in enumerate(parsed.records):
        key = (record["matrix"], record["method"])
        if key in keys and (record.get("status") != "interrupted" or key not in keep_at):
            keep_at[key] = i
    kept = [r for i, r in enumerate(parsed.records)
            if (r["matrix"], r["method"]) not in keys or keep_at[(r["matrix"], r["method"])] == i]
    removed = len(parsed.records) - len(kept)
    if removed or parsed.bad_lines or parsed.tail_bytes:
        if parsed.bad_lines:
            set_aside(path, parsed.bad_lines)
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"".join(encode_record(r) for r in kept))
    return removed


def set_aside(path: str | os.PathLike, numbers: list[int]) -> Path:
    """Append the results file's lines ``numbers`` (1-based) to ``<file>.rejected`` beside it, before a
    rewrite leaves them out: a line this version cannot read (a newer version's, one edited by hand)
    was deleted for good.  Returns the file they went to.

    Parameters
    ----------
    path : str or os.PathLike
        The results file.
    numbers : list of int
        The lines to keep aside (:func:`read_results`' ``bad_lines``).

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    aside = path.with_name(path.name + ".rejected")
    lines = path.read_bytes().split(b"\n")
    kept = aside.read_bytes() if aside.exists() else b""
    with atomic_path(aside) as tmp:
        tmp.write_bytes(kept + b"".join(lines[n - 1] + b"\n" for n in numbers if 0 < n <= len(lines)))
    return aside


def repair_results(path: str | os.PathLike, drop: AbstractSet[tuple[str, str]] = frozenset(),
                   fields: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Make the results file hold only complete, valid lines not in ``drop``, each matrix's lines with
    ``fields``' values.

    A partial tail alone is truncated in place; invalid lines, lines to
    drop or lines to give new fields make the file be rewritten atomically.
    Returns what was done, for the user.

    Parameters
    ----------
    path : str or os.PathLike
        The results file.
    drop : set of (str, str), default=frozenset()
        ``(matrix, method)`` pairs whose lines are removed (to be recomputed).
    fields : dict of str to dict, optional
        Matrix name -> the fields its lines must have: what a manifest says of an entry without
        changing what was measured (its category, its reference figures), which a resume that
        skipped the pairs left as they were.

    Returns
    -------
    list of str
        One sentence per change made (empty: nothing to repair).
    """
    path = Path(path)
    parsed = read_results(path)
    keep = [r for r in parsed.records if (r["matrix"], r["method"]) not in drop]
    done: list[str] = []
    restamped = 0
    for i, record in enumerate(keep):
        wanted = (fields or {}).get(record["matrix"], {})
        if any(record.get(key) != value for key, value in wanted.items()):
            keep[i] = {**record, **wanted}
            restamped += 1
    if parsed.tail_bytes:
        done.append(f"cut an incomplete last line ({format_bytes(parsed.tail_bytes)})")
    if parsed.unterminated:  # the next line appended would have been glued to it
        done.append("ended the last line, which had no newline")
    if parsed.bad_lines:
        aside = set_aside(path, parsed.bad_lines)
        done.append(f"moved {len(parsed.bad_lines)} line(s) it cannot read to {aside.name}: {parsed.bad_lines[:5]}")
    if len(keep) != len(parsed.records):
        done.append(f"removed {len(parsed.records) - len(keep)} line(s) to recompute")
    if restamped:
        done.append(f"{restamped} line(s) given their entry's category and reference figures as the manifest "
                    "now says")
    if parsed.bad_lines or len(keep) != len(parsed.records) or restamped or parsed.unterminated:
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"".join(encode_record(r) for r in keep))
    elif parsed.tail_bytes:
        os.truncate(path, path.stat().st_size - parsed.tail_bytes)
    return done
