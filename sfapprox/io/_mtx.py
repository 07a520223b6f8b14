"""Matrix Market reader: our own header and body checks, scipy.io for the parse.

A file named ``.mtx`` (``.mtx.gz``, ``.mtx.bz2``, ``.mtx.xz``) is Matrix
Market.  The header is parsed here, before anything is allocated, and is
accepted as the permissive readers accept it: a UTF-8 byte-order mark, blank
lines or spaces before the banner, a one-percent ``%MatrixMarket`` banner, any
letter case, CR-only, LF or CRLF line endings; ``real hermitian`` (for real
values, symmetric).  Anything else is refused with its line number: a
damaged banner is never "repaired" into header-less triplets (an identity
matrix whose size line ``3 3 3`` became an entry would load with A[3,3] = 4).

The body is checked line by line (one regex pass over the bytes) before
scipy reads it, because scipy 1.17's reader (fast_matrix_market) silently
reads the leading number of a token and drops the rest: ``0,25`` becomes 0,
``1.5D+03`` becomes 1.5, ``0x10`` becomes 0, a fourth value or a value in a
pattern file is dropped.  Integer fields are summed in float64 (duplicate
entries of 6e18 would wrap around in int64).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import mmap
import re
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import numpy as np
import scipy.io
import scipy.sparse as sp

from .._errors import parameter
from .._validation import check_memory, format_bytes
from ..formats import counted
from ._common import (Options, ReadResult, Source, check_order, decode_text, one_line, sparse_array_asked,
                      utf16_encoding)

#: Bytes of the file read to find the header (banner, comments, size line);
#: a longer header is parsed from the whole file.
_HEAD_BYTES = 1 << 16

_OBJECTS = ("matrix",)
_FORMATS = ("coordinate", "array")
_FIELDS = ("real", "double", "integer", "pattern", "complex")
_SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")

_BANNER = re.compile(r"^%+[ \t]*matrixmarket\b(.*)$", re.IGNORECASE)
_EXAMPLE = "'%%MatrixMarket matrix coordinate real general'"

# One line of the body, by kind.  Possessive quantifiers and atomic groups:
# no backtracking, so a hostile line costs linear time, and a 55 MB body is
# checked in about twice the time scipy takes to parse it.
_INDEX = rb"\d++"
_REAL = (rb"(?>[+-]?+(?>\d++(?>\.\d*+)?+|\.\d++)(?>[eE][+-]?+\d++)?+"
         rb"|[+-]?+(?>[nN][aA][nN]|[iI][nN][fF](?>[iI][nN][iI][tT][yY])?+))")
_INTEGER = rb"[+-]?+\d++"
_SEP = rb"[ \t]++"
_LINE_PATTERNS = {
    ("coordinate", "real"): _INDEX + _SEP + _INDEX + _SEP + _REAL,
    ("coordinate", "integer"): _INDEX + _SEP + _INDEX + _SEP + _INTEGER,
    ("coordinate", "pattern"): _INDEX + _SEP + _INDEX,
    ("array", "real"): _REAL,
    ("array", "integer"): _INTEGER,
}


def _body_regexes(fmt: str, field: str) -> tuple[re.Pattern, re.Pattern]:
    """(run of plain entry lines, one valid line of any kind) for a canonical body.

    The first matches the common case fast; the second also takes blank
    lines and entries followed by a ``%`` comment.  (Comment lines were
    blanked and line ends made LF by :func:`_canonical`.)
    """
    good = _LINE_PATTERNS[(fmt, field)]
    run = re.compile(rb"(?>[ \t]*+" + good + rb"[ \t]*+\n)*+")
    line = re.compile(rb"[ \t]*+(?>" + good + rb"(?>[ \t]++%[^\n]*+)?+)?+[ \t]*+(?:\n|\Z)")
    return run, line


@dataclass
class _Header:
    """The header as parsed: banner fields, size, and where the body starts."""

    fmt: str
    field: str
    symmetry: str
    rows: int
    cols: int
    entries: int | None
    body_offset: int  # offset in the file's bytes of the line after the size line
    body_line: int  # its line number
    notes: list[str]


@contextlib.contextmanager
def _mm_errors(src: Source, field: str | None = None) -> Iterator[None]:
    """scipy's ValueErrors name the line; keep them, under our one-line prefix.

    fast_matrix_market reports a value beyond int64 as OverflowError (scipy's own reader "Integer
    out of range"): in an integer file, what to do is read it as real numbers.
    """
    with src.guard():
        try:
            yield
        except (ValueError, OverflowError) as exc:
            text = one_line(exc)
            beyond = field == "integer" and (isinstance(exc, OverflowError) or "out of range" in text.lower())
            hint = ("where it is a value beyond 64 bits (not an index), declare the field 'real' in the first line "
                    "to read it as a floating-point number" if beyond else None)
            if "index out of bounds" in text.lower():  # scipy says no more: a 0 (0-based file) or a lying size line
                hint = ("Matrix Market indices run from 1 to the size line's rows and columns: check the size line, "
                        "or, for a file written with 0-based indices, add 1 to every index")
            raise src.fail(f"invalid Matrix Market file ({text})", hint) from None


def _split_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, line) pairs; lines end at LF, CRLF or a lone CR."""
    out = []
    for match in re.finditer(rb"[^\r\n]*(?:\r\n|\r|\n|$)", data):
        if match.start() == len(data) and match.group() == b"":
            break
        out.append((match.start(), match.group().rstrip(b"\r\n")))
    return out


def _looks_like_triplets(lines: list[tuple[int, bytes]]) -> bool:
    """True when the first data lines are clean ``i j [value]`` numbers."""
    seen = 0
    for _, raw in lines[:50]:
        s = raw.strip()
        if not s:
            continue
        tokens = s.split()
        if len(tokens) not in (2, 3) or not all(re.fullmatch(_INDEX, t) for t in tokens[:2]):
            return False
        if len(tokens) == 3 and not re.fullmatch(_REAL, tokens[2]):
            return False
        seen += 1
    return seen > 0


def _refuse_headerless(src: Source, lines: list[tuple[int, bytes]], line_no: int, first: str) -> None:
    if _looks_like_triplets(lines):
        # A careful user expects a file named .mtx to be Matrix Market.  A
        # file with no banner at all may be header-stripped triplets (some
        # SuiteSparse copies are), or a Matrix Market file whose header was
        # lost, in which case its size line would be read as an entry: say
        # which reading we would need, and let the user choose it.
        raise src.fail(
            f"line {line_no}: no %%MatrixMarket banner, so not a Matrix Market file; "
            f"it holds header-less 'i j value' lines ({first[:40]!r})",
            f"read them as triplets with {parameter('format', 'ijv')}",
        )
    raise src.fail(
        f"line {line_no}: not a Matrix Market file: expected the banner {_EXAMPLE}, got {first[:50]!r}",
        f"check the file or pass {parameter('format')}",
    )


def _parse_banner(src: Source, line_no: int, text: str, notes: list[str]) -> tuple[str, str, str]:
    stripped = text.strip()
    match = _BANNER.match(stripped)
    if match is None:
        raise src.fail(
            f"line {line_no}: damaged or missing Matrix Market banner: expected {_EXAMPLE}, got {stripped[:60]!r}",
            "fix the first line of the file",
        )
    tokens = [t.lower() for t in match.group(1).split()]
    if len(tokens) != 4:
        raise src.fail(
            f"line {line_no}: damaged Matrix Market banner: expected 4 words after %%MatrixMarket "
            f"(object format field symmetry, e.g. {_EXAMPLE}), got {stripped[:60]!r}"
        )
    obj, fmt, field, symmetry = tokens
    for value, allowed, what in ((obj, _OBJECTS, "object"), (fmt, _FORMATS, "format"),
                                 (field, _FIELDS, "field"), (symmetry, _SYMMETRIES, "symmetry")):
        if value not in allowed:
            raise src.fail(
                f"line {line_no}: damaged Matrix Market banner: unknown {what} {value!r} "
                f"(one of {', '.join(allowed)}), in {stripped[:60]!r}"
            )
    if field == "complex":
        raise src.fail("complex matrices are not supported (only real, integer and pattern fields)",
                       "write its real part (or its absolute values) to a real Matrix Market file")
    if field == "pattern" and fmt == "array":
        raise src.fail(f"line {line_no}: invalid banner: a pattern matrix must be in coordinate format")
    if not stripped.startswith("%%MatrixMarket"):
        written = stripped[: match.start(1)].strip()
        notes.append(f"Matrix Market banner written {written!r}: read as '%%MatrixMarket'")
    if field == "double":
        field = "real"  # written by some tools; the same as real
    if symmetry == "hermitian":
        # Legal, and for real values the same as symmetric (A = Aᴴ = Aᵀ).
        symmetry = "symmetric"
        notes.append("real hermitian: read as symmetric (for real values they are the same)")
    return fmt, field, symmetry


def _parse_size(src: Source, line_no: int, text: str, fmt: str) -> tuple[int, int, int | None]:
    tokens = text.split()
    want = 3 if fmt == "coordinate" else 2
    shape = "'rows cols entries'" if fmt == "coordinate" else "'rows cols'"
    if len(tokens) != want or not all(re.fullmatch(rb"\d+", t.encode()) for t in tokens):
        raise src.fail(
            f"line {line_no}: Invalid integer size line {text.strip()[:60]!r}: a {fmt} Matrix Market file "
            f"needs {shape} (non-negative integers) after the banner and comments"
        )
    numbers = [int(t) for t in tokens]
    return numbers[0], numbers[1], (numbers[2] if fmt == "coordinate" else None)


def _parse_header(src: Source, data: bytes, complete: bool) -> _Header | None:
    """Parse banner and size line from ``data`` (the file's start); None if the size line is not in it."""
    notes: list[str] = []
    start = 0
    if data.startswith(b"\xef\xbb\xbf"):
        start = 3
        notes.append("UTF-8 byte-order mark skipped")
    lines = _split_lines(data[start:])
    if not complete and lines:
        lines = lines[:-1]  # the last line of a partial read may be cut
    line_iter = iter(enumerate(lines, start=1))
    banner = None
    for line_no, (_, raw) in line_iter:
        if raw.strip():
            banner = (line_no, decode_text(raw, src))
            break
    if banner is None:
        if not complete:
            return None
        raise src.fail("no Matrix Market banner: the file holds only blank lines")
    line_no, text = banner
    if not text.lstrip().startswith("%"):
        _refuse_headerless(src, lines, line_no, text.strip())
    fmt, field, symmetry = _parse_banner(src, line_no, text, notes)
    for line_no, (offset, raw) in line_iter:
        s = raw.strip()
        if not s or s.startswith(b"%"):
            continue
        rows, cols, entries = _parse_size(src, line_no, decode_text(raw, src), fmt)
        body = start + offset + len(raw)
        body += 2 if data[body:body + 2] == b"\r\n" else 1 if data[body:body + 1] in (b"\r", b"\n") else 0
        if b"\r" in data[start:body] and b"\n" not in data[start:body]:
            notes.append("CR line endings (classic Mac OS) read as line breaks")
        return _Header(fmt, field, symmetry, rows, cols, entries, body, line_no + 1, notes)
    if not complete:
        return None
    raise src.fail("Premature EOF: the file ends before its size line ('rows cols entries')")


def _check_sizes(src: Source, h: _Header, opts: Options) -> None:
    """Refuse, from the header, what cannot be loaded, before anything is allocated."""
    if h.rows == 0 or h.cols == 0:
        # scipy's reader dies with SIGFPE on an empty "array" matrix (scipy 1.17).
        raise src.fail(f"matrix is empty ({h.rows:,} x {h.cols:,})",
                       "there is nothing to approximate: give a matrix of at least 1 x 1")
    if h.rows != h.cols:
        # Also keeps a non-square symmetric "array" file (a segfault in scipy's reader) away from scipy.
        raise src.fail(f"matrix is not square ({h.rows:,} x {h.cols:,})", "only square matrices can be approximated")
    check_order(h.rows, src, sparse=h.fmt != "array")
    if h.fmt == "array":
        check_memory(_parse_bytes(h), what=f"{src.display}: dense {h.rows:,} x {h.cols:,} array", limit=opts.max_memory_bytes)
    else:
        check_memory(_parse_bytes(h),
                     what=f"{src.display}: sparse {h.rows:,} x {h.cols:,} matrix with {counted(h.entries, 'stored entry', 'stored entries')}",
                     limit=opts.max_memory_bytes)


def _parse_bytes(h: _Header) -> int:
    """What scipy's parse and our float64 copy hold: a dense array twice; or (row, col, value) at 8
    bytes each, twice for symmetric storage, plus the CSR copy."""
    if h.fmt == "array":
        return 2 * 8 * h.rows * h.cols
    factor = 2 if h.symmetry != "general" else 1
    return 2 * 24 * factor * h.entries + 8 * h.rows


#: Copies of the text a rewrite to canonical bytes holds at its peak: the file's (decompressed) text,
#: kept by its Source, the canonical copy, and the copy a line-end or comment rewrite makes of it.
CANONICAL_COPIES = 3


def _bad_line_message(line: str, fmt: str, field: str) -> tuple[str, str | None]:
    """What is wrong with a body line that failed the check, and a hint."""
    tokens = line.split()
    if fmt == "array":
        if len(tokens) > 1:
            return ("an array-format Matrix Market file holds one value per line",
                    "check the file (coordinate format has 'i j value' lines)")
        want, layout = 1, "one value per line"
    elif field == "pattern":
        want, layout = 2, "'i j' (a pattern file has no values)"
    else:
        want, layout = 3, f"'i j value' with {'an integer' if field == 'integer' else 'a real'} value"
    if len(tokens) != want:
        hint = "declare the field 'real' in the %%MatrixMarket line" if field == "pattern" and len(tokens) == 3 else None
        return f"expected {layout}", hint
    if fmt == "coordinate" and not all(re.fullmatch(_INDEX, t.encode()) for t in tokens[:2]):
        return "row and column indices must be positive integers", None
    value = tokens[-1].encode()
    if field == "integer":
        if re.fullmatch(_REAL, value):
            return ("the header declares an integer field but the line holds a non-integer",
                    "declare the field 'real' in the %%MatrixMarket line")
        return "Invalid integer value", None
    if re.fullmatch(rb"[+-]?\d+,\d+", value):
        return "Invalid floating-point value (a decimal comma?)", "Matrix Market numbers use a decimal point"
    if re.fullmatch(rb"[+-]?(?:\d+(?:\.\d*)?|\.\d+)[dDqQ][+-]?\d+", value):
        return "Invalid floating-point value (a Fortran 'D' exponent)", "write the exponent with 'E' (1.5E+03)"
    return "Invalid floating-point value", None


#: A comment line in the body (the standard allows comments only before the size line).
_BODY_COMMENT = re.compile(rb"^[ \t]*%[^\n]*", re.MULTILINE)


def _canonical(data: bytes, h: _Header) -> tuple[bytes, int]:
    """The bytes scipy reads, and where their body starts.

    A canonical banner and size line on the lines where the file has them
    (comment lines pad the header, so scipy's line numbers are the file's),
    then the body with LF line ends, comment lines blanked, and a final
    newline.  scipy 1.17's reader refuses a byte-order mark, one-percent
    banners, CR-only line ends and comments after the size line (which the
    permissive readers skip), and reads past the end of its buffer when the
    last line has no newline and holds anything it skips (a segfault).
    """
    size = f"{h.rows} {h.cols}" + (f" {h.entries}" if h.entries is not None else "")
    pad = "%\n" * max(h.body_line - 3, 0)
    head = _banner(h) + f"{pad}{size}\n".encode()
    out = b"".join([head, memoryview(data)[h.body_offset:], b"" if data.endswith((b"\n", b"\r")) else b"\n"])
    if b"\r" in out:
        out = out.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if out.find(b"%", len(head)) >= 0 and _BODY_COMMENT.search(out, len(head)):  # find: a fast scan
        out = out[: len(head)] + _BODY_COMMENT.sub(b"", out[len(head):])
    if _plus_signs(out, len(head) - 1):
        out = out[: len(head)] + _PLUS_SIGN.sub(rb"\1", out[len(head):])
    return out, len(head)


#: A number's explicit plus sign (``1 1 +7``; not an exponent's, ``1e+02``), which C's strtod and the
#: Matrix Market writers' printf("%+g") use and scipy 1.17's reader refuses ("Invalid floating-point value").
#: Only a sign before a number's first digit, point or letter goes: ``++7`` and ``+-7`` stay as written,
#: for the body's check to refuse by its line (stripped once, ``+-7`` was read as -7 and ``++7`` left
#: scipy's "Invalid floating-point value").
_PLUS_SIGN = re.compile(rb"(^|[ \t])\+(?=[0-9.nNiI])", re.MULTILINE)


def _plus_signs(data, start: int) -> bool:
    """Whether a token after ``start`` (a line end or blank before it) may start with ``+``: a scan for ``+``
    (memchr's speed: a file without one, the common case, costs 0.025 s per 100 MB), then, where there is one
    (an exponent's, ``1e+02``, or a sign), one pass from it over pairs of bytes for a ``+`` after a blank,
    tab, line end or other control byte (a superset: a ``+`` after ``\\r`` or ``\\f`` costs only the rewrite,
    which changes nothing there, and the body's check refuses the line).  It was three ``find``s of
    ``b" +"``, ``b"\\t+"``, ``b"\\n+"``, needles starting with a blank, each scanned at a tenth of memchr's
    speed: 0.5 s on 124 MB of ``%.6e`` values, this 0.06 s."""
    first = data.find(b"+", start)
    if first < 0:
        return False
    return _blank_then_plus(np.frombuffer(data, dtype=np.uint8), max(first - 1, start))


#: Bytes compared at a time by :func:`_blank_then_plus`: its temporaries stay in cache (256 KiB: 0.06 s
#: per 124 MB; one block of 16 MiB, out of cache, 0.4 s).
_PAIR_BLOCK = 1 << 18


def _blank_then_plus(octets: np.ndarray, start: int) -> bool:
    """Whether some byte at or after ``start`` is a blank or control byte (at most 32) followed by ``+`` (43)."""
    for at in range(start, len(octets) - 1, _PAIR_BLOCK):
        block = octets[at:at + _PAIR_BLOCK + 1]
        if ((block[1:] == 43) & (block[:-1] <= 32)).any():
            return True
    return False


def _check_body(src: Source, data, start: int, h: _Header) -> None:
    """Refuse the first body line that is not an entry (or blank), naming its line.

    ``data`` is canonical (LF line ends, no comment lines in the body): bytes
    or a memory map of a file that already is.
    """
    run, line = _body_regexes(h.fmt, h.field)
    pos, end = start, len(data)
    while True:
        pos = run.match(data, pos).end()
        if pos >= end:
            return
        match = line.match(data, pos)
        if match is None or match.end() == pos:
            break
        pos = match.end()
    # Line numbers are the file's: _canonical keeps the header's line count.
    line_no = data[:pos].count(b"\n") + 1
    stop = data.find(b"\n", pos)
    text = data[pos:stop if stop >= 0 else end][:200].decode("latin-1").strip()
    what, hint = _bad_line_message(text, h.fmt, h.field)
    raise src.fail(f"line {line_no}: {what}, got {text[:40]!r}", hint)


def _banner(h: _Header) -> bytes:
    return f"%%MatrixMarket matrix {h.fmt} {h.field} {h.symmetry}\n".encode()


def _already_canonical(data, h: _Header) -> bool:
    """True when scipy can read the file as it is: what :func:`_canonical` would change is absent."""
    banner = _banner(h)
    return (data[: len(banner)] == banner and data[-1:] == b"\n" and data.find(b"\r") < 0
            and data.find(b"%", h.body_offset) < 0 and not _plus_signs(data, h.body_offset - 1))


@contextlib.contextmanager
def _scipy_source(src: Source, h: _Header) -> Iterator[BinaryIO]:
    """What scipy reads, its body checked first: the file itself, open, or canonical bytes.

    A plain uncompressed file is checked through a read-only memory map and
    read by scipy from the open file, so no copy of it is held in memory; any
    other file is rewritten by :func:`_canonical` (one copy).  scipy gets the
    file open, not its path: it passes a path on as UTF-8 text, which a name
    that is not UTF-8 (a Latin-1 byte in it) cannot be.
    """
    if not src.compressed:
        with src.guard():
            fh = open(src.path, "rb")
        with fh:
            with src.guard(), mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                plain = _already_canonical(mapped, h)
                if plain:
                    _check_body(src, mapped, h.body_offset, h)
            if plain:
                yield fh
                return
    text = src.read_bytes()
    # Checked again now that the text's size is known: its copies, then the parse, the text still held.
    check_memory(CANONICAL_COPIES * len(text) + _parse_bytes(h), limit=src.max_memory,
                 what=f"{src.display}: parsing {format_bytes(len(text))} of text into a {h.rows:,} x {h.cols:,} matrix")
    data, start = _canonical(text, h)
    del text  # the Source keeps its own reference; this frame's is not needed
    _check_body(src, data, start, h)
    yield io.BytesIO(data)


def _refuse_nonfinite(src: Source, M, h: _Header) -> None:
    """Refuse a NaN or infinite value (``nan``, ``inf``, ``1e999``) by the file's line and the entry's row and
    column as written (1-based), as the text readers name a bad cell; the matrix's check named numpy's
    0-based index, which a reader of the file had to translate.  One pass (a sum: NaN and infinities carry
    through it) in the common case; the positions, and the line, only for the error."""
    values = M.data[: h.entries] if sp.issparse(M) else M  # a coordinate file's entries, in its order
    if values.dtype.kind != "f":
        return
    with np.errstate(over="ignore", invalid="ignore"):  # finite values whose sum overflows: checked below
        if np.isfinite(values.sum()):
            return
    if sp.issparse(M):
        bad = np.flatnonzero(~np.isfinite(values))
        if not bad.size:
            return
        k, count = int(bad[0]), int(bad.size)
        row, col = int(M.row[k]), int(M.col[k])
    else:
        stored = _stored_values(M, h.symmetry)
        bad = np.flatnonzero(~np.isfinite(stored.ravel(order="F")))
        if not bad.size:
            return
        k, count = _stored_index(int(bad[0]), h), int(bad.size)
        col, row = divmod(int(bad[0]), h.rows)
    line_no, token = _entry_line(src, h, k)
    removal = "remove its line and lower the size line's entry count" if h.fmt == "coordinate" else None
    raise src.fail(f"line {line_no}: the value {token!r} of the entry at row {row + 1}, column {col + 1} is not a "
                   f"finite number ({counted(count, 'NaN/Inf value')} in the file)",
                   "every entry needs a finite number: replace it" + (f" or {removal}" if removal else ""))


def _stored_values(M: np.ndarray, symmetry: str) -> np.ndarray:
    """A dense array's values where its file stores them: all of it, or (symmetric) the lower triangle, or
    (skew-symmetric) below the diagonal; NaN-free elsewhere, so that a mirrored value is not counted twice."""
    if symmetry == "general":
        return M
    lower = np.tril(np.ones(M.shape, dtype=bool), 0 if symmetry == "symmetric" else -1)
    return np.where(lower, M, 0.0)


def _stored_index(flat: int, h: _Header) -> int:
    """Which value of an array file (0-based, in the file's column-major order) holds the position ``flat``
    of the column-major array, counting only the positions its symmetry stores."""
    col, row = divmod(flat, h.rows)
    if h.symmetry == "general":
        return flat
    skip = 0 if h.symmetry == "symmetric" else 1  # skew-symmetric: no diagonal stored
    per_col = h.rows - skip  # values stored in column 0; one fewer in each next column
    return col * per_col - col * (col - 1) // 2 + (row - col - skip)


def _entry_line(src: Source, h: _Header, k: int) -> tuple[int, str]:
    """The file's line number of the ``k``-th (0-based) entry line of the body, and the value written on it."""
    data, start = _canonical(src.read_bytes(), h)  # line numbers are the file's: see _canonical
    lines = re.finditer(rb"^[ \t]*+[^ \t\n][^\n]*+", memoryview(data)[start:], re.MULTILINE)
    match = next(itertools.islice(lines, k, None))
    line_no = data.count(b"\n", 0, start + match.start()) + 1
    return line_no, match.group().split(b"%", 1)[0].split()[-1].decode("latin-1")


def _to_float(M, h: _Header, src: Source, notes: list[str]):
    """float64 CSR (or ndarray), duplicates summed in float64, with notes."""
    if not sp.issparse(M):
        return np.asarray(M, dtype=np.float64)
    coo = sp.coo_array(M)
    # Cast before summing duplicates: integer entries summed in int64 wrap
    # around (two entries of 6e18 would give -6.4e18).
    coo = sp.coo_array((coo.data.astype(np.float64), (coo.row, coo.col)), shape=coo.shape)
    A = coo.tocsr()
    A.sum_duplicates()
    repeated = coo.nnz - A.nnz
    if repeated:
        notes.append(f"{counted(repeated, 'repeated entry', 'repeated entries')} summed")
    if h.symmetry == "skew-symmetric":
        diag = A.diagonal()
        if np.any(diag != 0):
            k = int(np.flatnonzero(diag)[0])
            raise src.fail(
                f"skew-symmetric file stores a nonzero diagonal entry (row {k + 1}, value {diag[k]:g}); "
                "a skew-symmetric matrix has a zero diagonal",
                "declare the symmetry 'general' if the matrix is not skew-symmetric",
            )
    return sp.csr_array(A)


def read_mtx(src: Source, opts: Options) -> ReadResult:
    """Reader for format "mtx" (``.mtx``, ``.mtx.gz``, ``.mtx.bz2``, ``.mtx.xz``)."""
    head = src.head(_HEAD_BYTES)
    if not head:
        raise src.fail("file is empty after decompression")
    codec = utf16_encoding(head)
    if codec is not None:  # scipy reads the bytes: half of them NUL, every line "invalid"
        raise src.fail(f"is {codec.upper()} text (what Windows tools save as 'Unicode'); Matrix Market files are ASCII",
                       "save it as UTF-8 or ASCII (e.g. iconv -f UTF-16 -t UTF-8)")
    decode_text(head[:65536], src)  # refuses binary files (NUL bytes) with one line
    header = _parse_header(src, head, complete=len(head) < _HEAD_BYTES)
    if header is None:  # a header longer than the head: parse it from the whole file
        header = _parse_header(src, src.read_bytes(), complete=True)
    _check_sizes(src, header, opts)
    with _scipy_source(src, header) as target, _mm_errors(src, header.field):
        M = scipy.io.mmread(target, **sparse_array_asked(scipy.io.mmread))
    _refuse_nonfinite(src, M, header)
    notes = list(header.notes)
    M = _to_float(M, header, src, notes)
    if header.symmetry in ("symmetric", "skew-symmetric"):
        if sp.issparse(M):
            notes.append(f"{header.symmetry} storage expanded: {header.entries:,} stored -> {counted(M.nnz, 'entry', 'entries')}")
        else:
            notes.append(f"{header.symmetry} storage expanded (dense array)")
    if header.field == "pattern":
        notes.append("pattern matrix: stored entries set to 1.0")
    return ReadResult(M, "mtx", notes)
