"""Matrix Market reader (scipy.io), with the header-stripped SuiteSparse variant."""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Callable, Iterator

import scipy.io
import scipy.sparse as sp

from .._validation import check_memory
from ._common import Options, ReadResult, Source, check_order, decode_text, one_line, parse_float
from ._text import read_ijv

_BANNER = "%%matrixmarket"

#: A data line holding a second value: "<token><blanks><token>", comments excepted.
_SECOND_VALUE = re.compile(rb"(?m)^[ \t]*[^%\s][^\r\n]*?[ \t]+\S")

#: A data line with a character no integer has ("1.5", "1e3", "nan"), comments excepted.
_NOT_INTEGER = re.compile(rb"(?m)^[ \t]*[^%\s][^\r\n]*?[^0-9+\-\s]")


@contextlib.contextmanager
def _mm_errors(src: Source) -> Iterator[None]:
    """scipy's ValueErrors name the line; keep them, under our one-line prefix.

    fast_matrix_market reports a size beyond int64 as OverflowError.
    """
    with src.guard():
        try:
            yield
        except (ValueError, OverflowError) as exc:
            raise src.fail(f"invalid Matrix Market file ({one_line(exc)})") from None


def _first_data_line(text: str) -> str:
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(("%", "#")):
            return s
    return ""


def _read_headerless(src: Source, opts: Options) -> ReadResult:
    """A ``.mtx`` without banner: SuiteSparse-stripped ``i j value`` lines."""
    text = src.read_text()
    first = _first_data_line(text)
    if not first or any(parse_float(t) is None for t in first.replace(",", " ").split()):
        raise src.fail(
            "not a Matrix Market file (no %%MatrixMarket header) and not 'i j value' lines either",
            "check the file or pass format=",
        )
    result = read_ijv(src, opts, text=text)
    result.notes.insert(0, "no %%MatrixMarket header: read as header-less 'i j value' triplets")
    return result


def _body_start(data: bytes) -> int:
    """Offset of the first line after the size line (banner, comments and blank lines skipped)."""
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[pos:end].strip()
        pos = end + 1
        if line and not line.startswith(b"%"):
            break
    return pos


def _refuse_line(src: Source, data: bytes, match: re.Match, what: str, hint: str) -> None:
    line_no = data.count(b"\n", 0, match.start()) + 1
    shown = data[match.start():match.end() + 20].split(b"\n")[0].decode("latin-1").strip()
    raise src.fail(f"line {line_no}: {what}, got {shown[:40]!r}", hint)


def _check_body(src: Source, fmt: str, field: str) -> None:
    """Refuse bodies that scipy would misread, before it reads them.

    * "array" files hold one value per line; scipy 1.17 (fast_matrix_market)
      silently drops the extra values of a line (and, at the end of a file,
      reads past its buffer).
    * "integer" files hold integers; scipy reads "1.5" or "1e200" as 1.

    One regex pass over the bytes, with no Python object per line.
    """
    if fmt != "array" and field != "integer":
        return
    data = src.read_bytes()
    start = _body_start(data)
    if fmt == "array":
        match = _SECOND_VALUE.search(data, start)
        if match is not None:
            _refuse_line(src, data, match, "an array-format Matrix Market file holds one value per line",
                         "check the file (coordinate format has 'i j value' lines)")
    if field == "integer":
        match = _NOT_INTEGER.search(data, start)
        if match is not None:
            _refuse_line(src, data, match, "the header declares an integer field but the line holds a non-integer",
                         "declare the field 'real' in the %%MatrixMarket line")


def _scipy_input(src: Source) -> Callable[[], str | io.BytesIO]:
    """What scipy reads (a fresh one per call): the path, or the bytes ending in a newline.

    scipy 1.17's reader (fast_matrix_market) reads past the end of its buffer
    when the last line has no newline and holds anything it skips (a value
    after a pattern entry, "1.5" for an integer field, ...): a segfault.  Such
    files, and ``.gz`` files (decompressed here, under the memory limit, rather
    than by scipy), are handed over as bytes with a newline added.
    """
    if not src.gz:
        with src.guard(), open(src.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return lambda: os.fspath(src.path)
    data = src.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    return lambda: io.BytesIO(data)


def read_mtx(src: Source, opts: Options) -> ReadResult:
    """Reader for format "mtx" (``.mtx``, ``.mtx.gz``); header checked before reading."""
    head = decode_text(src.head(256), src)
    if not head.lstrip().lower().startswith(_BANNER):
        return _read_headerless(src, opts)
    target = _scipy_input(src)
    with _mm_errors(src):
        rows, cols, entries, fmt, field, symmetry = scipy.io.mminfo(target())
    if field == "complex" or symmetry == "hermitian":
        raise src.fail("complex matrices are not supported", "only real, integer and pattern fields")
    if rows == 0 or cols == 0:
        # Checked here, not left to check_square_matrix: scipy's reader dies
        # with SIGFPE on an empty "array" matrix (scipy 1.17).
        raise src.fail(f"matrix is empty ({rows} x {cols})")
    if rows != cols:
        # Also keeps a non-square symmetric "array" file (a segfault in scipy's
        # reader) away from scipy.
        raise src.fail(
            f"matrix is not square ({rows} x {cols})",
            "only square matrices can be approximated",
        )
    check_order(rows, src)
    if fmt == "array":
        # scipy's parse plus our float64 copy.
        check_memory(2 * 8 * rows * cols, what=f"{src.display}: dense {rows} x {cols} array", limit=opts.max_memory)
    else:
        # (row, col, value) at 8 bytes each, twice for symmetric storage, plus the CSR copy.
        factor = 2 if symmetry != "general" else 1
        check_memory(
            2 * 24 * factor * entries + 8 * rows,
            what=f"{src.display}: sparse {rows} x {cols} matrix with {entries} stored entries",
            limit=opts.max_memory,
        )
    _check_body(src, fmt, field)
    with _mm_errors(src):
        M = scipy.io.mmread(target())
    notes: list[str] = []
    if sp.issparse(M):
        M = sp.csr_array(M)
        M.sum_duplicates()
        if symmetry in ("symmetric", "skew-symmetric"):
            notes.append(f"{symmetry} storage expanded: {entries} stored -> {M.nnz} entries")
    elif symmetry in ("symmetric", "skew-symmetric"):
        notes.append(f"{symmetry} storage expanded (dense array)")
    if field == "pattern":
        notes.append("pattern matrix: stored entries set to 1.0")
    return ReadResult(M, "mtx", notes)
