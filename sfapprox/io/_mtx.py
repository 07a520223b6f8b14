"""Matrix Market reader (scipy.io), with the header-stripped SuiteSparse variant."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import scipy.io
import scipy.sparse as sp

from .._validation import check_memory
from ._common import Options, ReadResult, Source, check_order, decode_text, one_line, parse_float
from ._text import read_ijv

_BANNER = "%%matrixmarket"


@contextlib.contextmanager
def _mm_errors(src: Source) -> Iterator[None]:
    """scipy's ValueErrors name the line; keep them, under our one-line prefix."""
    with src.guard():
        try:
            yield
        except ValueError as exc:
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


def read_mtx(src: Source, opts: Options) -> ReadResult:
    """Reader for format "mtx" (``.mtx``, ``.mtx.gz``); header checked before reading."""
    head = decode_text(src.head(256), src)
    if not head.lstrip().lower().startswith(_BANNER):
        return _read_headerless(src, opts)
    # scipy opens ".gz" (and ".bz2") by suffix itself.
    target = os.fspath(src.path)
    with _mm_errors(src):
        rows, cols, entries, fmt, field, symmetry = scipy.io.mminfo(target)
    if field == "complex" or symmetry == "hermitian":
        raise src.fail("complex matrices are not supported", "only real, integer and pattern fields")
    if rows != cols:
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
    with _mm_errors(src):
        M = scipy.io.mmread(target)
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
