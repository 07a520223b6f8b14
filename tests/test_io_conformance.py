"""Matrix Market conformance: where scipy.io.mmread reads a real square matrix, we read the same.

The corpus is written here: small matrices in every layout scipy reads
(coordinate/array; real/integer/pattern; general/symmetric/skew-symmetric/
hermitian-real), each in the byte variants real files come in (comments and
blank lines, a byte-order mark, CRLF and CR-only line ends, a one-percent or
upper-case banner, leading spaces, no final newline, gzip/bzip2/xz).

For every file: if scipy reads it, our matrix equals scipy's exactly; if scipy
refuses it (a BOM, CR-only line ends, an upper-case banner), ours equals what
scipy reads from the plain file.  The second half is the other direction: files
that scipy reads *silently wrong* (a decimal comma read as 0, a Fortran
exponent dropped, a value in a pattern file ignored, int64 sums wrapping) are
refused with their line number, or read right.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sfapprox import InputError, load_matrix
from sfapprox.io._common import sparse_array_asked

N = 6


def _dense(M) -> np.ndarray:
    return np.asarray(M.toarray() if sp.issparse(M) else M, dtype=np.float64)


def _number(x: float, k: int) -> str:
    """Varied spellings of a float, all valid Matrix Market reals."""
    return (repr(float(x)), f"{x:.6e}", f"{x:.17g}", f"{x:.6E}")[k % 4]


def _matrix(kind: str, rng) -> np.ndarray:
    A = np.where(rng.random((N, N)) < 0.4, rng.normal(size=(N, N)) * 10, 0.0)
    A = np.vectorize(lambda v: float(f"{v:.3f}"))(A)  # exact in every spelling below
    if kind == "integer":
        A = np.round(A * 1000)
        A[0, 0] = 2.0**40  # beyond int32
    if kind == "pattern":
        A = (A != 0).astype(float)
    return A


def _write(fmt: str, field: str, symmetry: str, rng) -> tuple[str, np.ndarray]:
    """A Matrix Market text and the matrix it holds (built by hand: we control every byte)."""
    A = _matrix(field, rng)
    if symmetry in ("symmetric", "hermitian"):
        A = np.tril(A) + np.tril(A, -1).T
    elif symmetry == "skew-symmetric":
        A = np.tril(A, -1) - np.tril(A, -1).T
    lines = [f"%%MatrixMarket matrix {fmt} {field} {symmetry}", "% written by the conformance test"]
    stored = (lambda i, j: i >= j) if symmetry in ("symmetric", "hermitian") else \
        (lambda i, j: i > j) if symmetry == "skew-symmetric" else (lambda i, j: True)
    value = (lambda v, k: str(int(v))) if field == "integer" else _number
    if fmt == "coordinate":
        entries = [(i, j) for j in range(N) for i in range(N) if A[i, j] != 0 and stored(i, j)]
        lines.append(f"{N} {N} {len(entries)}")
        for k, (i, j) in enumerate(entries):
            tail = "" if field == "pattern" else " " + value(A[i, j], k)
            lines.append(f"{i + 1} {j + 1}{tail}")
    else:
        lines.append(f"{N} {N}")
        lines += [value(A[i, j], i + j) for j in range(N) for i in range(N) if stored(i, j)]
    return "\n".join(lines) + "\n", A


LAYOUTS = [
    ("coordinate", "real", "general"),
    ("coordinate", "real", "symmetric"),
    ("coordinate", "real", "skew-symmetric"),
    ("coordinate", "real", "hermitian"),
    ("coordinate", "integer", "general"),
    ("coordinate", "integer", "symmetric"),
    ("coordinate", "pattern", "general"),
    ("coordinate", "pattern", "symmetric"),
    ("array", "real", "general"),
    ("array", "real", "symmetric"),
    ("array", "real", "skew-symmetric"),
    ("array", "integer", "general"),
]


def _comments_and_blanks(text: str) -> str:
    lines = text.splitlines()
    out = [lines[0], "", "%", "%  more comments", ""] + [lines[1], lines[2], "", "% between entries"]
    for k, line in enumerate(lines[3:]):
        out += [line] + (["", "   ", "% c"] if k % 3 == 0 else [])
    return "\n".join(out) + "\n\n"


def _leading_spaces(text: str) -> str:
    return "\n".join(("  \t" if k % 2 else " ") + line for k, line in enumerate(text.splitlines())) + "\n"


VARIANTS = {
    "plain": lambda t: t.encode(),
    "comments_blank_lines": lambda t: _comments_and_blanks(t).encode(),
    "bom": lambda t: b"\xef\xbb\xbf" + t.encode(),
    "crlf": lambda t: t.replace("\n", "\r\n").encode(),
    "cr_only": lambda t: t.replace("\n", "\r").encode(),
    "one_percent_banner": lambda t: t[1:].encode(),
    "upper_case_banner": lambda t: t.replace(t.splitlines()[0], t.splitlines()[0].upper(), 1).encode(),
    "leading_spaces": lambda t: _leading_spaces(t).encode(),
    "blank_lines_before_banner": lambda t: ("\n\n" + t).encode(),
    "no_final_newline": lambda t: t.rstrip("\n").encode(),
}
COMPRESSIONS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def _scipy(data: bytes) -> np.ndarray | None:
    """scipy's reading of ``data``, or None when scipy refuses it."""
    try:
        # spmatrix=False where scipy takes it: 1.18 warns on every read that does not say
        return _dense(scipy.io.mmread(io.BytesIO(data if data.endswith(b"\n") else data + b"\n"),
                                      **sparse_array_asked(scipy.io.mmread)))
    except (ValueError, OverflowError):
        return None


@pytest.mark.parametrize("layout", LAYOUTS, ids=["-".join(x) for x in LAYOUTS])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_we_read_what_scipy_reads(tmp_path, layout, variant):
    rng = np.random.default_rng(abs(hash((layout, variant))) % 2**32)
    text, A = _write(*layout, rng)
    data = VARIANTS[variant](text)
    path = tmp_path / "m.mtx"
    path.write_bytes(data)
    ours = load_matrix(path).to_dense()
    theirs = _scipy(data)
    if theirs is None:  # scipy refuses this variant: compare with its reading of the plain file
        theirs = _scipy(text.encode())
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, A)  # and both hold the matrix that was written


@pytest.mark.parametrize("suffix", list(COMPRESSIONS))
@pytest.mark.parametrize("layout", LAYOUTS[:3] + LAYOUTS[8:9], ids=["-".join(x) for x in LAYOUTS[:3] + LAYOUTS[8:9]])
def test_compressed(tmp_path, layout, suffix):
    text, A = _write(*layout, np.random.default_rng(7))
    path = tmp_path / f"m.mtx{suffix}"
    path.write_bytes(COMPRESSIONS[suffix](text.encode()))
    m = load_matrix(path)
    np.testing.assert_array_equal(m.to_dense(), _scipy(text.encode()))
    assert (m.name, m.format) == ("m", "mtx")
    assert m.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # of the bytes as stored


@pytest.mark.parametrize("suffix, name", [(".gz", "gzip"), (".bz2", "bzip2"), (".xz", "xz")])
def test_corrupt_compressed_refused_in_one_line(tmp_path, suffix, name):
    path = tmp_path / f"bad.mtx{suffix}"
    path.write_bytes(b"this is not compressed data at all")
    with pytest.raises(InputError, match=f"bad.mtx{suffix}: not a valid {name} file"):
        load_matrix(path)
    good = COMPRESSIONS[suffix](("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1\n" * 50).encode())
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError, match=f"not a valid {name} file"):
        load_matrix(path)


def test_other_formats_compressed_too(tmp_path):
    path = tmp_path / "g.net.xz"
    path.write_bytes(lzma.compress(b"*Vertices 3\n*Edges\n1 2\n2 3\n"))
    assert load_matrix(path).nnz == 4
    path = tmp_path / "t.csv.bz2"
    path.write_bytes(bz2.compress(b"1,2\n3,4\n"))
    np.testing.assert_array_equal(load_matrix(path).matrix, [[1, 2], [3, 4]])


# ---------------------------------------------------------------------------
# files that scipy reads silently wrong: refused with the line number, or read right
# ---------------------------------------------------------------------------

MM = "%%MatrixMarket matrix coordinate real general\n"
IDENTITY_BODY = "3 3 3\n1 1 1\n2 2 1\n3 3 1\n"

SILENTLY_WRONG = [
    # (file text, what scipy reads at (0, 0) instead of the file's value, our refusal)
    (MM + "2 2 1\n1 1 0,25\n", 0.0, r"line 3: Invalid floating-point value \(a decimal comma\?\), got '1 1 0,25'; "
                                     r"Matrix Market numbers use a decimal point"),
    (MM + "2 2 1\n1 1 1.5D+03\n", 1.5, r"line 3: Invalid floating-point value \(a Fortran 'D' exponent\)"),
    (MM + "2 2 1\n1 1 0x10\n", 0.0, r"line 3: Invalid floating-point value, got '1 1 0x10'"),
    (MM + "2 2 1\n1 1 5abc\n", 5.0, r"line 3: Invalid floating-point value"),
    (MM + "2 2 1\n1 1 1_000\n", 1.0, r"line 3: Invalid floating-point value"),
    (MM + "2 2 1\n1 1 1.0 2.0\n", 1.0, r"line 3: expected 'i j value' with a real value, got '1 1 1.0 2.0'"),
    ("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 7\n", 1.0,
     r"line 3: expected 'i j' \(a pattern file has no values\)"),
    ("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 2.5\n", 2.0,
     r"line 3: the header declares an integer field but the line holds a non-integer"),
    ("%%MatrixMarket matrix array real general\n1 1\n7 8\n", 7.0, r"line 3: an array-format Matrix Market file holds one value per line"),
    ("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 2\n1 1 4\n2 1 1\n", 4.0,
     r"skew-symmetric file stores a nonzero diagonal entry \(row 1, value 4\)"),
]


@pytest.mark.parametrize("text, scipy_value, match", SILENTLY_WRONG, ids=range(len(SILENTLY_WRONG)))
def test_what_scipy_misreads_is_refused_with_the_line(tmp_path, text, scipy_value, match):
    theirs = _scipy(text.encode())
    assert theirs is not None and theirs[0, 0] == scipy_value  # documents scipy 1.17's silent reading
    path = tmp_path / "w.mtx"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_integer_duplicates_summed_in_float(tmp_path):
    # Two entries of 6e18 sum to 1.2e19 > 2^63: scipy's int64 sum wraps to -6.4e18.
    text = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 6000000000000000000\n1 1 6000000000000000000\n"
    assert _scipy(text.encode())[0, 0] < 0
    path = tmp_path / "i.mtx"
    path.write_text(text)
    m = load_matrix(path)
    assert m.to_dense()[0, 0] == 1.2e19
    assert "1 repeated entry summed" in m.notes


def test_one_percent_banner_identity_is_the_identity(tmp_path):
    # The case: read as header-less triplets, the size line became an entry (A[3,3] = 4).
    path = tmp_path / "eye.mtx"
    path.write_text("%MatrixMarket matrix coordinate real general\n" + IDENTITY_BODY)
    m = load_matrix(path)
    np.testing.assert_array_equal(m.to_dense(), np.eye(3))
    assert "Matrix Market banner written '%MatrixMarket': read as '%%MatrixMarket'" in m.notes


@pytest.mark.parametrize("banner, match", [
    ("%%MatrixMarkt matrix coordinate real general", r"line 1: damaged or missing Matrix Market banner"),
    ("%%MatrixMarket matrix cordinate real general", r"line 1: damaged Matrix Market banner: unknown format 'cordinate'"),
    ("%%MatrixMarket matrix coordinate real", r"line 1: damaged Matrix Market banner: expected 4 words"),
    ("%%MatrixMarket vector coordinate real general", r"line 1: damaged Matrix Market banner: unknown object 'vector'"),
    ("% a comment before the banner", r"line 1: damaged or missing Matrix Market banner"),
])
def test_damaged_banner_refused_not_read_as_triplets(tmp_path, banner, match):
    # Before: a misspelled banner loaded the identity as a zero matrix.
    path = tmp_path / "eye.mtx"
    path.write_text(banner + "\n" + IDENTITY_BODY)
    with pytest.raises(InputError, match=match):
        load_matrix(path)


def test_real_hermitian_is_symmetric(tmp_path):
    path = tmp_path / "h.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real hermitian\n2 2 2\n1 1 1\n2 1 3\n")
    m = load_matrix(path)
    np.testing.assert_array_equal(m.to_dense(), [[1, 3], [3, 0]])
    assert any("real hermitian: read as symmetric" in n for n in m.notes)


def test_complex_hermitian_still_refused(tmp_path):
    path = tmp_path / "c.mtx"
    path.write_text("%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 1 0\n")
    with pytest.raises(InputError, match="complex matrices are not supported"):
        load_matrix(path)


def test_bom_crlf_and_cr_notes(tmp_path):
    path = tmp_path / "b.mtx"
    path.write_bytes(b"\xef\xbb\xbf" + (MM + IDENTITY_BODY).replace("\n", "\r").encode())
    m = load_matrix(path)
    np.testing.assert_array_equal(m.to_dense(), np.eye(3))
    assert "UTF-8 byte-order mark skipped" in m.notes
    assert "CR line endings (classic Mac OS) read as line breaks" in m.notes


def test_comments_in_the_body_are_skipped(tmp_path):
    # The standard has comments only before the size line; scipy 1.17 refuses
    # them after it, the permissive readers skip them.
    path = tmp_path / "c.mtx"
    path.write_text(MM + "3 3 3\n1 1 1\n% a comment\n2 2 1\n  %another\n3 3 1\n")
    np.testing.assert_array_equal(load_matrix(path).to_dense(), np.eye(3))


def test_scipy_line_numbers_are_the_files(tmp_path):
    # Errors scipy finds (counts, bounds) name the file's line, whatever the header held.
    path = tmp_path / "c.mtx"
    path.write_bytes(b"\xef\xbb\xbf\n" + (MM + "% one\n% two\n\n3 3 2\n1 1 1\n% c\n9 9 1\n").encode())
    with pytest.raises(InputError, match=r"Line 9: Row index out of bounds"):
        load_matrix(path)


def test_line_numbers_count_cr_only_lines(tmp_path):
    path = tmp_path / "b.mtx"
    path.write_bytes((MM + "% c\n\n3 3 2\n1 1 1\n2 2 0,5\n").replace("\n", "\r").encode())
    with pytest.raises(InputError, match="line 6: Invalid floating-point value"):
        load_matrix(path)


def test_long_comment_header_beyond_the_first_read(tmp_path):
    # The header is looked for in the first 64 KiB; a longer comment block is read in full.
    path = tmp_path / "long.mtx"
    path.write_text(MM + ("% " + "x" * 78 + "\n") * 20_000 + IDENTITY_BODY)
    np.testing.assert_array_equal(load_matrix(path).to_dense(), np.eye(3))


def test_hostile_long_token_is_linear(tmp_path):
    # A line of 10^6 digits and a letter: the body check must not backtrack quadratically.
    path = tmp_path / "long.mtx"
    path.write_text(MM + "1 1 1\n1 1 " + "1" * 1_000_000 + "x\n")
    with pytest.raises(InputError, match="line 3: Invalid floating-point value"):
        load_matrix(path)
