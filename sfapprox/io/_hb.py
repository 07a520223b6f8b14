"""Harwell-Boeing / Rutherford-Boeing reader (scipy.io.hb_read).

scipy's reader handles assembled real *unsymmetric* files only.  Symmetric
(``RSA``) and skew-symmetric (``RZA``) files store one triangle; we present
them to scipy as ``RUA`` (the body layout is identical) and expand the
triangle ourselves.
"""

from __future__ import annotations

import re

import numpy as np
import scipy.io
import scipy.sparse as sp

from .._validation import check_memory, check_sparse_structure
from ..formats import counted
from ._common import Options, ReadResult, Source, check_order, one_line, sparse_array_asked, split_cost


class _TextFile:
    """A str read as scipy's ``hb_read`` reads a file (``read(n)``, ``readline()``), by slices of it: an
    ``io.StringIO`` of the text held it a second time, 4 bytes a character (benchmarks/results/text_memory.md:
    the reader peaked at 9.8 times a file's bytes, over its check)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def read(self, size: int = -1) -> str:
        """Up to ``size`` characters from here (the rest for a negative one)."""
        end = len(self._text) if size is None or size < 0 else self._pos + size
        out = self._text[self._pos:end]
        self._pos += len(out)
        return out

    def readline(self) -> str:
        """The rest of the line from here, its ``"\\n"`` included ("" at the end)."""
        end = self._text.find("\n", self._pos)
        return self.read(-1 if end < 0 else end + 1 - self._pos)


#: Peak bytes a line of a Harwell-Boeing file takes beside its text and strings (:func:`split_cost`, which
#: the lines joined again for scipy's reader fit in: the text is let go first): the matrix's arrays, and a
#: symmetric one's expansion (benchmarks/results/text_memory.md: a 7.7 MB RSA file of 103,633 lines peaked at
#: 34.5 MB traced, 37.3 MB RSS, against split_cost's 31.3 MB), with margin.
_HB_LINE_BYTES = 100


def hb_cost(data: bytes, lines: int) -> int:
    """Peak bytes of reading a Harwell-Boeing file: :func:`split_cost` and :data:`_HB_LINE_BYTES` a line."""
    return split_cost(data, lines) + _HB_LINE_BYTES * lines


def _parse_header(src: Source, lines: list[str]) -> tuple[str, int, int, int]:
    """(mxtype, nrow, ncol, nnz) from header line 3."""
    if len(lines) < 4:
        raise src.fail("not a Harwell-Boeing file (header needs 4 lines)")
    mxtype = lines[2][:3].upper()
    fields = lines[2][3:].split()
    try:
        nrow, ncol, nnz = (int(x) for x in fields[:3])
    except ValueError:
        raise src.fail(f"not a Harwell-Boeing file (line 3 should give type, rows, cols, nonzeros: {lines[2].strip()[:60]!r})") from None
    if len(mxtype) != 3 or mxtype[0] not in "RCPI" or mxtype[1] not in "USHZR" or mxtype[2] not in "AE":
        raise src.fail(f"not a Harwell-Boeing file (unknown matrix type {mxtype!r} on line 3)")
    return mxtype, nrow, ncol, nnz


def _fortran_exponents(src: Source, lines: list[str], notes: list[str]) -> None:
    """Rewrite a value format ``(3D25.16)`` and its values ``1.0D+00`` with ``E`` in place: Fortran writes
    double precision so, and scipy's reader knows neither (a traceback for the format, "unmatched data"
    for the values)."""
    counts = [lines[1][k:k + 14].strip() for k in (14, 28, 42, 56)]
    if not all(c.isdigit() for c in counts[:3]):
        return  # scipy's reader says what is wrong with line 2
    ptrcrd, indcrd, valcrd = (int(c) for c in counts[:3])
    rhscrd = int(counts[3]) if counts[3].isdigit() else 0
    start = 4 + (rhscrd > 0) + ptrcrd + indcrd
    # (fewer lines than line 2 declares is not refused here: a file whose VALCRD is over its lines but that
    # holds every value is read, as scipy reads it; one that lacks values is refused where scipy finds it)
    fmt = lines[3][32:52]
    values = range(start, min(start + valcrd, len(lines)))
    written = re.search(r"\d[dD]\d", fmt) is not None or any(re.search(r"\d[dD][+-]?\d", lines[k]) for k in values)
    if not written:
        return
    lines[3] = lines[3][:32] + re.sub(r"(\d)[dD](\d)", r"\1E\2", fmt) + lines[3][52:]
    for k in values:  # (value lines hold numbers only)
        lines[k] = lines[k].translate(_D_TO_E)
    notes.append("values written with a Fortran 'D' exponent (1.0D+00) read as 1.0E+00")


#: Fortran's exponent letters, as scipy's reader (numpy) reads them.
_D_TO_E = str.maketrans("dD", "EE")


def _expand(L: sp.csr_array, skew: bool, notes: list[str], kind: str) -> sp.csr_array:
    """Expand one stored triangle to the full (skew-)symmetric matrix."""
    coo = L.tocoo()
    off = coo.row != coo.col
    lower = (coo.row[off] > coo.col[off]).all()
    upper = (coo.row[off] < coo.col[off]).all()
    if off.any() and not (lower or upper):
        notes.append(f"{kind} type but both triangles are stored: kept as stored")
        return L
    sign = -1.0 if skew else 1.0
    full = L + sign * sp.csr_array(sp.triu(L, 1) if upper else sp.tril(L, -1)).T
    full = sp.csr_array(full)
    full.sum_duplicates()
    notes.append(f"{kind} storage expanded: {L.nnz:,} stored -> {counted(full.nnz, 'entry', 'entries')}")
    return full


def read_hb(src: Source, opts: Options) -> ReadResult:
    """Reader for format "hb" (``.rb``, ``.rua``, ``.rsa``, ``.rza``, ``.hb``)."""
    # LF line ends: a CR left on a fixed-width line overflows its fields (scipy warns, "key is > 8 characters");
    # the lines are joined with them for scipy's reader once the header is read (and the text let go)
    lines = src.read_text(hb_cost).splitlines()
    mxtype, nrow, ncol, nnz = _parse_header(src, lines)
    if mxtype[0] == "C":
        raise src.fail("complex matrices are not supported")
    if mxtype[1] == "H":
        raise src.fail("complex (Hermitian) matrices are not supported")
    if mxtype[0] == "P":
        raise src.fail(
            "pattern-only Harwell-Boeing files are not supported (scipy's reader needs values)",
            "convert it to Matrix Market (.mtx)",
        )
    if mxtype[2] == "E":
        raise src.fail("elemental (unassembled) Harwell-Boeing files are not supported", "assemble it first")
    if nrow != ncol:
        raise src.fail(f"matrix is not square ({nrow:,} x {ncol:,})", "only square matrices can be approximated")
    check_order(nrow, src, sparse=True)
    check_memory(
        2 * 16 * nnz * (2 if mxtype[1] in "SZ" else 1) + 8 * nrow,
        what=f"{src.display}: sparse {nrow:,} x {ncol:,} matrix with {counted(nnz, 'stored entry', 'stored entries')}",
        limit=opts.max_memory_bytes,
    )
    symmetric = mxtype[1] in "SZ"
    if symmetric:
        lines[2] = lines[2][:1] + "U" + lines[2][2:]
    notes: list[str] = [f"Harwell-Boeing type {mxtype}"]
    _fortran_exponents(src, lines, notes)
    fortran_format = lines[3].strip()[:60]  # (for a message: the lines go before scipy reads)
    lines.append("")  # the last line's end too
    body = _TextFile("\n".join(lines))
    del lines  # the joined text is what scipy reads: the lines' strings, as large, go first
    with src.guard():
        try:
            M = scipy.io.hb_read(body, **sparse_array_asked(scipy.io.hb_read))
        except ValueError as exc:
            if "same size" not in str(exc):
                raise
            raise src.fail("file is truncated: it holds fewer row indices or values than line 3 declares "
                           "nonzeros", "copy or write it again") from None
        except SyntaxError as exc:  # scipy's BadFortranFormat (a private class): the guard let it through
            raise src.fail(f"line 4: unreadable Fortran format ({one_line(exc)}) in {fortran_format!r}",
                           "scipy's reader takes I, E (and D) formats, e.g. (8I10) (4E20.12)") from None
    del body
    # Pointers and row indices come straight from the file: check them before
    # scipy's conversion trusts them.
    check_sparse_structure(M, source=src.display)
    A = sp.csr_array(M, dtype=np.float64)
    A.sum_duplicates()
    if symmetric:
        kind = "skew-symmetric" if mxtype[1] == "Z" else "symmetric"
        A = _expand(A, mxtype[1] == "Z", notes, kind)
    return ReadResult(A, "hb", notes)
