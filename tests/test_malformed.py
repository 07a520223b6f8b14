"""A corpus of malformed and hostile input files, each run through ``sfapprox info``.

Every file must give exit code 2 and exactly one line on stderr, starting with
"error:", naming the file and the problem, and no traceback (``--debug``
shows one).  Resource bombs (headers declaring giant matrices) must be refused
before anything of that size is allocated, with the estimate and the limit.
The files are written by the tests, so the corpus documents itself.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io
from PIL import Image
from scipy.sparse import random_array
from typer.testing import CliRunner

from sfapprox.cli import app

runner = CliRunner()

MM = "%%MatrixMarket matrix coordinate real general\n"


# ---------------------------------------------------------------------------
# writers for the less obvious files
# ---------------------------------------------------------------------------


def _npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def _npy_header(shape: tuple[int, ...]) -> bytes:
    """A .npy header declaring ``shape`` with (almost) no data behind it."""
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (127 - 10 - len(header)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 16


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose IHDR declares ``width x height`` pixels, with a tiny body."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 8)) + chunk(b"IEND", b"")


def _png(path: Path) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _npz_corrupt_sparse(path: Path) -> None:
    """A scipy save_npz file whose CSR column index 7 lies outside the 3 x 3 shape."""
    _zip(path, {
        "format.npy": _npy_bytes(np.array("csr")),
        "shape.npy": _npy_bytes(np.array([3, 3])),
        "data.npy": _npy_bytes(np.ones(3)),
        "indices.npy": _npy_bytes(np.array([0, 7, 2], dtype=np.int32)),
        "indptr.npy": _npy_bytes(np.array([0, 1, 2, 3], dtype=np.int32)),
    })


def _npz_giant_coo(path: Path) -> None:
    """A save_npz COO file of shape 2e9 x 2e9 holding a single entry."""
    _zip(path, {
        "format.npy": _npy_bytes(np.array("coo")),
        "shape.npy": _npy_bytes(np.array([2_000_000_000, 2_000_000_000])),
        "data.npy": _npy_bytes(np.ones(1)),
        "row.npy": _npy_bytes(np.zeros(1, dtype=np.int64)),
        "col.npy": _npy_bytes(np.zeros(1, dtype=np.int64)),
    })


def _mat73_sparse(path: Path, rows: int, ir: list[int]) -> None:
    """A MATLAB v7.3 (HDF5) sparse variable A with the given row count and row indices."""
    with h5py.File(path, "w") as f:
        g = f.create_group("A")
        g.attrs["MATLAB_class"] = np.bytes_("double")
        g.attrs["MATLAB_sparse"] = np.uint64(rows)
        g["jc"] = np.arange(len(ir) + 1, dtype=np.uint64)
        g["ir"] = np.asarray(ir, dtype=np.uint64)
        g["data"] = np.ones(len(ir))


def _hb(pointers: str, rows: str) -> str:
    """A 3 x 3 Harwell-Boeing (RUA) file with the given pointer and row-index lines."""
    return (
        "Corrupt                                                                 0       \n"
        "             3             1             1             1\n"
        "RUA                        3             3             3             0\n"
        "(40I2)          (40I2)          (3E25.16)           \n"
        f"{pointers}\n{rows}\n"
        "  1.0000000000000000E+00  1.0000000000000000E+00  1.0000000000000000E+00\n"
    )


def _mat73_external(path: Path) -> None:
    """A MATLAB v7.3 variable whose bytes live in another local file (external storage)."""
    other = path.with_name("not_named_by_the_user.bin")
    other.write_bytes(np.arange(4.0).tobytes())
    with h5py.File(path, "w", userblock_size=512) as f:
        d = f.create_dataset("A", shape=(2, 2), dtype="<f8", external=[(str(other), 0, 32)])
        d.attrs["MATLAB_class"] = np.bytes_("double")


def _mat73_external_link(path: Path) -> None:
    other = path.with_name("other.h5")
    with h5py.File(other, "w") as f:
        f["A"] = np.eye(2)
    with h5py.File(path, "w", userblock_size=512) as f:
        f["A"] = h5py.ExternalLink(str(other), "/A")


def _text_mat(path: Path) -> None:
    scipy.io.savemat(path, {"rect": np.ones((2, 3)), "label": "not a matrix"})


def _directory(path: Path) -> None:
    path.mkdir()


def _truncated_gzip() -> bytes:
    return gzip.compress((MM + "3 3 3\n1 1 1\n2 2 2\n3 3 3\n").encode())[:-12]


# ---------------------------------------------------------------------------
# the corpus: file name, content (None: no file; callable: writes the path),
# and a fragment the message must contain
# ---------------------------------------------------------------------------

CORPUS = [
    ("missing.mtx", None, "no such file"),
    ("folder.mtx", _directory, "is a folder, not a matrix file"),
    ("data.xyz", "1 2\n3 4\n", "unknown file type"),
    ("empty.mtx", "", "file is empty"),
    ("blank.csv", "\n   \n\n", "no data rows"),
    ("garbage.mtx", bytes(range(256)) * 4, "binary file"),
    ("corrupt.mtx.gz", b"this is not gzip data", "not a valid gzip file"),
    ("truncated.mtx.gz", _truncated_gzip(), "not a valid gzip file"),
    ("truncated.mtx", MM + "3 3 3\n1 1 1.0\n", "Truncated file"),
    ("header_only.mtx", MM, "Premature EOF"),
    ("counts_mismatch.mtx", MM + "3 3 1\n1 1 1\n2 2 2\n3 3 3\n", "Too many lines"),
    ("size_line_text.mtx", MM + "three 3 1\n1 1 1\n", "Invalid integer"),
    ("index_out_of_range.mtx", MM + "3 3 1\n9 9 1.0\n", "out of bounds"),
    ("complex.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1.0 2.0\n", "complex"),
    ("not_square.mtx", MM + "2 3 1\n1 1 1\n", "not square (2 x 3)"),
    ("nan_entry.mtx", MM + "2 2 1\n1 2 nan\n", "NaN/Inf"),
    ("garbage_value.mtx", MM + "2 2 1\n1 1 abc\n", "Invalid floating-point"),
    ("array_short.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", "Truncated file"),
    # Both kill scipy 1.17's reader (SIGFPE, segfault): refused from the header first.
    ("empty_array.mtx", "%%MatrixMarket matrix array real general\n0 0\n", "matrix is empty (0 x 0)"),
    ("symmetric_rect_array.mtx", "%%MatrixMarket matrix array real symmetric\n2 3\n" + "1\n" * 10, "not square"),
    ("array_two_per_line.mtx", "%%MatrixMarket matrix array real general\n2 2\n1 2\n3 4\n", "one value per line"),
    ("integer_fraction.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n",
     "declares an integer field"),
    ("non_numeric.csv", "1,2\n3,x\n", "line 2, column 2: non-numeric cell 'x'"),
    ("ragged.csv", "1,2,3\n4,5\n6,7,8\n", "ragged rows"),
    ("infinite.csv", "1,inf\n2,3\n", "NaN/Inf"),
    ("overflowing.csv", "1e999,1\n1,1\n", "NaN/Inf"),
    ("rectangular.csv", "1,2,3\n4,5,6\n", "not square (2 x 3)"),
    ("huge_values.csv", "1e200,1\n1,1\n", "values too large"),
    ("tiny_values.csv", "1e-170,0\n0,1e-170\n", "values too small"),
    ("nul_bytes.tsv", b"1\t2\n\x00\x00\x00\n", "binary file"),
    ("vector.npy", _npy_bytes(np.arange(4.0)), "must be 2-D"),
    ("cube.npy", _npy_bytes(np.zeros((2, 2, 2))), "must be 2-D"),
    ("pickled.npy", _npy_bytes(np.array([[1, None], [None, 1]], dtype=object), allow_pickle=True), "pickle"),
    ("complex.npy", _npy_bytes(np.eye(2) * 1j), "complex"),
    ("strings.npy", _npy_bytes(np.array([["a", "b"], ["c", "d"]])), "non-numeric dtype"),
    ("truncated.npy", _npy_bytes(np.eye(20))[:300], "it is truncated"),
    ("garbage.npy", b"NUMPY? no, just text\n" * 10, "not a valid .npy array"),
    ("not_a_zip.npz", b"PK but not really a zip file", "not a valid .npz"),
    ("pickled.npz", lambda p: _zip(p, {"a.npy": _npy_bytes(np.array([[None]], dtype=object), allow_pickle=True)}), "pickle"),
    ("corrupt_sparse.npz", _npz_corrupt_sparse, "column index 7 out of range 0..2"),
    ("no_square_variable.mat", _text_mat, "no square numeric variable"),
    ("garbage.mat", b"MATLAB 5.0 MAT-file? " + bytes(range(200)), "not a readable MATLAB file"),
    ("corrupt_sparse_v73.mat", lambda p: _mat73_sparse(p, 3, [0, 7, 1]), "row index 7 out of range 0..2"),
    ("no_vertices.net", "*Arcs\n1 2\n", "'*Vertices n'"),
    ("prose.net", "this is not a network\n", "'*Vertices n'"),
    ("vertex_out_of_range.net", "*Vertices 3\n*Edges\n1 4\n", "vertex id 4 is out of range 1..3"),
    ("negative_vertices.net", "*Vertices -3\n", "needs at least one vertex"),
    ("nan_weight.net", "*Vertices 2\n*Arcs\n1 2 nan\n", "not finite"),
    ("negative_index.ijv", "1 2 1.0\n-1 2 3.0\n", "non-negative integers"),
    ("fractional_index.edges", "1.5 2\n", "non-negative integers"),
    ("garbage.rua", "just\nsome\nwords\nhere\n", "not a Harwell-Boeing file"),
    ("corrupt_index.rua", _hb(" 1 2 3 4", " 1 9 3"), "row index 8 out of range 0..2"),
    ("corrupt_pointer.rua", _hb(" 1 0 3 4", " 1 2 3"), "index pointer"),
    ("lonely.cites", "a b\n", "lonely.content"),
    ("garbage.png", b"\x89PNG but then nothing sensible" * 4, "cannot identify image"),
    ("truncated.png", lambda p: p.write_bytes(_png(p)[:200]), "cannot read image"),
    ("postscript.png", b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n", "cannot identify image"),
    ("text.jpg", "not a jpeg at all", "cannot identify image"),
    # issue 18: reading never reaches outside the file given
    ("external_storage_v73.mat", _mat73_external, "/A uses external storage"),
    ("external_link_v73.mat", _mat73_external_link, "/A is an external link"),
    # issue 18: values are never silently wrong
    ("misspelled_banner.mtx", "%%MatrixMarkt matrix coordinate real general\n3 3 3\n1 1 1\n2 2 1\n3 3 1\n",
     "line 1: damaged or missing Matrix Market banner"),
    ("headerless.mtx", "1 1 4.0\n2 1 -1.0\n2 2 4.0\n", "--format ijv"),
    ("decimal_comma.mtx", MM + "2 2 1\n1 1 0,25\n", "line 3: Invalid floating-point value (a decimal comma?)"),
    ("fortran_exponent.mtx", MM + "2 2 1\n1 1 1.5D+03\n", "a Fortran 'D' exponent"),
    ("pattern_with_values.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 7\n",
     "line 3: expected 'i j' (a pattern file has no values)"),
    ("skew_diagonal.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 4\n", "nonzero diagonal entry"),
    ("ambiguous_comma.net", "*Vertices 2\n*Arcs\n1 2 1,000\n", "line 3: weight '1,000' is ambiguous"),
    ("not_a_number.net", "*Vertices 2\n*Arcs\n1 2 1.2.3\n", "line 3: weight '1.2.3' is not a number"),
    ("corrupt.mtx.bz2", b"BZh9 but not really bzip2", "not a valid bzip2 file"),
    ("corrupt.mtx.xz", b"\xfd7zXZ\x00 but not really xz", "not a valid xz file"),
]


def _write(path: Path, content) -> None:
    if content is None:
        return
    if callable(content):
        content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def _run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def _assert_one_line_error(res, name: str, fragment: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert "Traceback" not in res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    line = lines[0]
    assert line.startswith("error:"), line
    assert name in line, line
    assert any(f in line for f in ((fragment,) if isinstance(fragment, str) else fragment)), line
    return line


def test_corpus_is_large_and_unique():
    names = [name for name, _, _ in CORPUS]
    assert len(names) >= 25 and len(set(names)) == len(names)


@pytest.mark.parametrize("name, content, fragment", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_file_is_one_line_exit_2(tmp_path, name, content, fragment):
    path = tmp_path / name
    _write(path, content)
    _assert_one_line_error(_run("info", path), name, fragment)


#: Inputs that kill scipy 1.17's Matrix Market reader (fast_matrix_market) with
#: SIGSEGV/SIGFPE when handed over as they are: a last line without newline that
#: holds something scipy skips, or an empty "array" matrix.  The loader must
#: survive each (loading it, or refusing it in one line).
SCIPY_CRASHERS = [
    "%%MatrixMarket matrix coordinate pattern general\n5 5 1\n3 4 1",
    "%%MatrixMarket matrix coordinate real general\n5 5 1\n3 4 1 1",
    "%%MatrixMarket matrix coordinate real symmetric\n5 5 1\n3 4 1e",
    "%%MatrixMarket matrix coordinate real general\n5 5 1\n3 4 0x1",
    "%%MatrixMarket matrix coordinate integer general\n5 5 1\n3 4 1e200",
    "%%MatrixMarket matrix array real general\n1 1\n1 x",
    "%%MatrixMarket matrix array real general\n0 0\n",
    "%%MatrixMarket matrix array real symmetric\n2 3\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
]


@pytest.mark.parametrize("text", SCIPY_CRASHERS)
@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_scipy_reader_crashers_are_kept_away(tmp_path, text, suffix):
    path = tmp_path / f"crasher{suffix}"
    path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    res = _run("info", path)
    assert res.exit_code in (0, 2) and "Traceback" not in res.output, res.output
    if res.exit_code == 2:
        _assert_one_line_error(res, path.name, "")


def test_debug_shows_the_traceback(tmp_path):
    path = tmp_path / "corrupt_index.rua"
    path.write_text(_hb(" 1 2 3 4", " 1 9 3"))
    res = runner.invoke(app, ["--debug", "info", str(path)])
    assert res.exit_code == 2
    assert "Traceback" in res.output and "InputError" in res.output
    assert "error:" in res.output and "corrupt_index.rua" in res.output


def test_brackets_in_a_path_are_not_markup(tmp_path):
    folder = tmp_path / "[bold]data"
    folder.mkdir()
    path = folder / "x.csv"
    path.write_text("1,2,3\n")
    line = _assert_one_line_error(_run("info", path), "x.csv", "not square")
    assert "[bold]data" in line


# ---------------------------------------------------------------------------
# resource bombs: refused from the header, with the estimate and the limit
# ---------------------------------------------------------------------------

GIANT = 2_000_000_000

BOMBS = [
    ("giant.mtx", MM + f"{GIANT} {GIANT} 1\n1 1 1.0\n", "beyond the supported maximum"),
    ("giant_array.mtx", "%%MatrixMarket matrix array real general\n60000 60000\n1\n", "--max-memory"),
    ("many_entries.mtx", MM + "1000 1000 9000000000000\n1 1 1\n", "--max-memory"),
    ("giant.mtx.gz", gzip.compress((MM + f"{GIANT} {GIANT} 1\n1 1 1.0\n").encode()), "beyond the supported maximum"),
    ("giant.net", f"*Vertices {GIANT}\n*Arcs\n1 2\n", "beyond the supported maximum"),
    ("giant_matrix.net", "*Vertices 90000000\n*Matrix\n1\n", "--max-memory"),
    ("giant.ijv", f"1 1 1.0\n{GIANT} 1 2.0\n", "beyond the supported maximum"),
    ("overflowing_index.coo", "1e20 1 1.0\n", "beyond the supported maximum"),
    ("giant.npy", _npy_header((GIANT, GIANT)), "it is truncated"),  # memory-mapped, so its size is checked
    ("giant_coo.npz", _npz_giant_coo, "beyond the supported maximum"),
    ("giant_header.rua", _hb(" 1 2 3 4", " 1 2 3").replace(
        "RUA                        3             3",
        f"RUA               {GIANT}    {GIANT}"), "beyond the supported maximum"),
    ("giant.png", _png_header(GIANT, GIANT), "decompression bomb"),
    ("giant.pgm", f"P5 {GIANT} {GIANT} 255\n".encode() + b"\0" * 16, "decompression bomb"),
]


@pytest.mark.parametrize("name, content, fragment", BOMBS, ids=[b[0] for b in BOMBS])
def test_giant_header_refused_before_allocating(tmp_path, name, content, fragment):
    path = tmp_path / name
    _write(path, content)
    # A 64 MiB cap: had anything of the declared size been allocated first,
    # the process would be gone, not answering with exit 2.
    line = _assert_one_line_error(_run("info", path, "--max-memory", "64M"), name, fragment)
    if "--max-memory" in fragment:
        assert "needs about" in line and "64.0 MiB" in line
    elif "supported maximum" in fragment:
        assert "EiB" in line and "100,000,000" in line  # the estimate and the limit
    elif "truncated" in fragment:
        assert "2,000,000,000 x 2,000,000,000" in line and "16 bytes after the header" in line  # declared, held
    else:
        assert "pixels" in line


def _mat_sparse(path: Path, n: int) -> None:
    scipy.io.savemat(path, {"A": __import__("scipy.sparse").sparse.csc_array(([1.0], ([0], [0])), shape=(n, n))})


def _mat73_square_sparse(path: Path, n: int) -> None:
    """A MATLAB v7.3 sparse n x n variable A holding one entry."""
    with h5py.File(path, "w", userblock_size=512) as f:
        g = f.create_group("A")
        g.attrs["MATLAB_class"] = np.bytes_("double")
        g.attrs["MATLAB_sparse"] = np.uint64(n)
        g["jc"] = np.concatenate([[0], np.ones(n, dtype=np.uint64)]).astype(np.uint64)
        g["ir"] = np.zeros(1, dtype=np.uint64)
        g["data"] = np.ones(1)


def _npz_sparse(path: Path, n: int) -> None:
    import scipy.sparse

    scipy.sparse.save_npz(path, scipy.sparse.csr_array(([1.0], ([0], [n - 1])), shape=(n, n)))


#: Files declaring an order of 5,000 with one or two entries: tiny on disk and
#: as CSR, 190.7 MiB dense.  load_matrix holds a matrix to fit dense, so each is
#: refused from its header (size line, *Vertices, shapes) under a 64 MiB limit;
#: the commands read it kept sparse (a source the methods read by columns).
ORDER = 5000
HEADER_ORDERS = [
    ("order.mtx", MM + f"{ORDER} {ORDER} 2\n1 1 1.0\n{ORDER} {ORDER} 1.0\n"),
    ("order.mtx.xz", __import__("lzma").compress((MM + f"{ORDER} {ORDER} 1\n1 1 1.0\n").encode())),
    ("order.rua", _hb(" 1 2 3 4", " 1 2 3").replace("RUA                        3             3",
                                                       f"RUA                     {ORDER}          {ORDER}")),
    ("order.net", f"*Vertices {ORDER}\n*Arcs\n1 2\n"),
    ("order.ijv", f"1 1 1.0\n{ORDER} {ORDER} 2.0\n"),
    ("order.npz", lambda p: _npz_sparse(p, ORDER)),
    ("order.mat", lambda p: _mat_sparse(p, ORDER)),
    ("order_v73.mat", lambda p: _mat73_square_sparse(p, ORDER)),
]


@pytest.mark.parametrize("name, content", HEADER_ORDERS, ids=[h[0] for h in HEADER_ORDERS])
def test_order_whose_dense_form_exceeds_the_limit_refused_from_the_header(tmp_path, name, content):
    from sfapprox import ResourceError, load_matrix

    path = tmp_path / name
    _write(path, content)
    with pytest.raises(ResourceError, match="of order 5,000 in its dense form") as refused:
        load_matrix(path, max_memory=64 << 20)
    assert "needs about 190.7 MiB, over the memory limit of 64.0 MiB" in str(refused.value)
    if not name.endswith(".rua"):  # (its body is that of a 3 x 3 matrix)
        assert load_matrix(path, max_memory=1 << 30).is_sparse


@pytest.mark.parametrize("name, content", [h for h in HEADER_ORDERS if not h[0].endswith(".rua")],
                         ids=[h[0] for h in HEADER_ORDERS if not h[0].endswith(".rua")])
def test_order_whose_dense_form_exceeds_the_limit_is_read_kept_sparse(tmp_path, name, content):
    """The commands read such a file kept sparse (a source the methods read by columns): it was refused,
    "must fit dense", although its 5,000-order CSR takes kilobytes."""
    from sfapprox import load_matrix
    from sfapprox.sources import SparseSource

    path = tmp_path / name
    _write(path, content)
    res = _run("info", path, "--max-memory", "64M")
    assert res.exit_code == 0, res.output
    assert "kept sparse" in res.output and "from columns" in res.output
    assert isinstance(__import__("sfapprox").io.open_matrix(path, max_memory=64 << 20), SparseSource)
    assert load_matrix(path, max_memory=64 << 20, keep_sparse=True).is_sparse


def test_two_mode_network_checked_at_its_projected_order(tmp_path):
    # 100,003 vertices, but rows x rows is 3 x 3: the header's n is not the matrix's order.
    path = tmp_path / "two_mode.net"
    path.write_text("*Vertices 100003 3\n*Edges\n1 4\n2 4\n3 100003\n")
    res = _run("info", path, "--max-memory", "64M")
    assert res.exit_code == 0, res.output
    # Bipartite, its order is 100,003: kept sparse; SF's budget (30.6 million numbers) is over 64 MiB, but the
    # header refuses only an order where no method has room; info says what SF needs.
    res = _run("info", path, "--max-memory", "64M", "--two-mode", "bipartite")
    assert res.exit_code == 0, res.output
    assert "100,003 x 100,003" in res.output and "no: needs --max-memory" in res.output


def test_sparse_order_refused_only_where_no_method_fits(tmp_path):
    """A graph of N = 1,000,000 was refused under a 2 GiB limit for a surrogate at SF's budget (3.1 GiB),
    also for methods and a budget that fit: here N = 100,000 (SF's 233 MiB) and sparse at 300,000 numbers
    under 64 MiB, which runs; sparse keeps the 3 non-zeros at most, so it runs at SF's budget too."""
    path = tmp_path / "graph.mtx"
    path.write_text(MM + "100000 100000 3\n1 1 1.0\n2 2 2.0\n7 3 1.5\n")
    for budget in (["--budget", "300000"], []):
        res = _run("compare", path, "--methods", "sparse", *budget, "--max-memory", "64M", "--json", "-")
        assert res.exit_code == 0, res.output
        row, = json.loads(res.stdout[res.stdout.index("{"):])["results"]
        assert row["status"] == "ok" and row["rel_error"] == 0.0 and row["error_estimate"]["exact"]
    # at SF's budget (the default) rsvd does not fit: one line naming both options that would help
    line = _assert_one_line_error(_run("compare", path, "--methods", "rsvd", "--max-memory", "64M", "-q"),
                                  "graph", "no method asked for fits the memory limit of 64.0 MiB")
    assert "--max-memory" in line and "lower the budget (--budget)" in line


def test_headerless_mtx_loads_with_format_ijv(tmp_path):
    path = tmp_path / "mesh.mtx"
    path.write_text("1 1 4.0\n2 1 -1.0\n2 2 4.0\n")
    res = _run("info", path, "--format", "ijv")
    assert res.exit_code == 0, res.output


def test_giant_matlab_sparse_refused_before_reading(tmp_path):
    path = tmp_path / "giant_sparse_v73.mat"
    _mat73_sparse(path, GIANT, [0])
    line = _assert_one_line_error(_run("info", path, "--var", "A"), path.name, "beyond the supported maximum")
    assert "sparse variable A" in line


def test_max_memory_option_lowers_the_limit(tmp_path):
    path = tmp_path / "dense.csv"
    path.write_text("\n".join(",".join(["1.5"] * 300) for _ in range(300)) + "\n")
    line = _assert_one_line_error(_run("info", path, "--max-memory", "100K"), "dense.csv", "over the memory limit")
    assert "100.0 KiB" in line and "--max-memory" in line
    assert _run("info", path).exit_code == 0


@pytest.fixture
def big_sparse(tmp_path) -> Path:
    """60000 x 60000 with three entries: tiny on disk and as CSR, 26.8 GiB dense."""
    path = tmp_path / "big_sparse.mtx"
    path.write_text(MM + "60000 60000 3\n1 1 1.0\n2 5 2.0\n60000 60000 3.0\n")
    return path


def test_big_sparse_read_kept_sparse_when_its_dense_form_exceeds_the_limit(big_sparse, tmp_path):
    # load_matrix holds a matrix to fit dense: a header declaring an order whose dense form is over the
    # limit is refused before the matrix is read.
    from sfapprox import ResourceError, load_matrix

    with pytest.raises(ResourceError, match="order 60,000 in its dense form") as refused:
        load_matrix(big_sparse, max_memory=2 << 30)
    assert "needs about 26.8 GiB" in str(refused.value) and "2.0 GiB" in str(refused.value)
    # The commands read it kept sparse: the methods that work from columns run on it.
    res = _run("info", big_sparse, "--max-memory", "2G")
    assert res.exit_code == 0, res.output
    assert "kept sparse (3 non-zeros)" in res.output and "from columns" in res.output
    # With room for one dense copy it loads, sparse.
    assert _run("info", big_sparse, "--max-memory", "30G").exit_code == 0


def test_compare_refuses_methods_that_cannot_run_before_any_work(big_sparse):
    # One dense copy fits under 40G (and the scoring goes by column blocks), but TSVD's fit does not,
    # and it is the only method asked for: refused before anything runs, not a table of one failed row.
    line = _assert_one_line_error(
        _run("compare", big_sparse, "--methods", "tsvd", "--max-memory", "40G"), "big_sparse", "needs about"
    )
    assert "tsvd needs about 80.5 GiB" in line and "40.0 GiB" in line and "work from its columns" in line


def test_compare_of_sparse_file_whose_dense_scoring_is_over_the_limit_runs_from_columns(tmp_path):
    # Up to N = 2,048 a formed comparison's scoring holds dense copies (X densified, the approximation,
    # the residual): the dense form fits 60M, the three copies do not.  It was refused; kept sparse, the
    # methods that work from columns run on it, scored exactly from its non-zeros.
    path = tmp_path / "sparse2000.mtx"
    path.write_text(MM + "2000 2000 3\n1 1 1.0\n2000 2000 2.0\n7 9 -4.0\n")
    res = _run("compare", path, "--methods", "sparse,rsvd", "--max-memory", "60M", "--json", "-")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    rows = {r["method"]: r for r in data["results"]}
    assert rows["sparse"]["status"] == "ok" and rows["sparse"]["fro_error"] == 0
    assert rows["rsvd"]["status"] == "ok" and rows["rsvd"]["error_estimate"]["exact"]
    assert data["matrix"]["path"] == "columns"


def test_to_dense_of_large_sparse_is_checked(big_sparse):
    from sfapprox import ResourceError, load_matrix

    loaded = load_matrix(big_sparse, max_memory=2**35)
    assert loaded.is_sparse and loaded.nnz == 3
    with pytest.raises(ResourceError, match="dense copy of 60,000 x 60,000"):
        loaded.to_dense(max_memory=2**30)


def test_huge_order_with_two_entries_refused_from_the_header(tmp_path):
    """The 90,000,000-order header took 16 s and 1.2 GB before fit refused it (benchmarks measure the time)."""
    path = tmp_path / "huge.mtx"
    path.write_text(MM + "90000000 90000000 2\n1 1 1.0\n2 2 1.0\n")
    # A 64 MiB cap: the row pointers alone would be 1.4 GiB, so exit 2 here
    # shows the refusal came from the header, before anything was allocated.
    line = _assert_one_line_error(_run("info", path, "--max-memory", "64M"), "huge.mtx",
                                  "matrix of order 90,000,000 (kept sparse, its dense form 57.6 PiB")
    assert " an 90" not in line and "a rank-one surrogate of 180,000,001 numbers" in line
    assert "needs about 1.3 GiB" in line


# ---------------------------------------------------------------------------
# outputs that cannot be written are refused before any work
# ---------------------------------------------------------------------------


@pytest.fixture
def small_csv(tmp_path) -> Path:
    path = tmp_path / "small.csv"
    path.write_text("2,1\n1,2\n")
    return path


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_output_in_missing_folder_refused_up_front(small_csv, tmp_path, command):
    target = tmp_path / "no" / "such" / "r.json"
    line = _assert_one_line_error(_run(command, small_csv, "--json", target, "--iters", "1"), "r.json", "does not exist")
    assert "create it first" in line


def test_output_that_is_a_folder_refused(small_csv, tmp_path):
    _assert_one_line_error(_run("fit", small_csv, "--json", tmp_path, "--iters", "1"), str(tmp_path), "is a folder")


def test_same_file_for_two_outputs_refused(small_csv, tmp_path):
    target = tmp_path / "both.out"
    _assert_one_line_error(_run("fit", small_csv, "--out", target, "--json", target, "--iters", "1"),
                           "both.out", "two outputs")
    assert not target.exists()


def test_existing_output_needs_force(small_csv, tmp_path):
    target = tmp_path / "r.json"
    target.write_text("{}")
    _assert_one_line_error(_run("compare", small_csv, "--methods", "tsvd", "--json", target), "r.json", "--force")
    assert target.read_text() == "{}"
    assert _run("compare", small_csv, "--methods", "tsvd", "--json", target, "--force").exit_code == 0
    assert target.read_text() != "{}"


def test_a_file_kept_sparse_must_fit_with_its_column_copy(tmp_path):
    """Kept sparse, a file's CSR and the source's CSC copy are held together: refused where the two are over
    the limit (a comparison of 9.5 million non-zeros under 300M peaked at 1.0 GB)."""
    import scipy.sparse as sp

    from sfapprox import ResourceError, load_matrix
    from sfapprox.io._sources import kept_sparse
    from sfapprox.sources import SparseSource

    path = tmp_path / "dense_ish.npz"
    A = random_array((2000, 2000), density=0.1, random_state=1, format="csr")
    # int32 index arrays, as scipy 1.13+ draws them (1.12, which pyproject allows, draws int64 ones: the
    # message's size below is the int32 arrays')
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    sp.save_npz(path, A)
    loaded = load_matrix(path, keep_sparse=True)
    with pytest.raises(ResourceError, match=r"kept sparse \(400,000 non-zeros\), its row and column copies needs "
                                            r"about 9.2 MiB, over the memory limit of 8.0 MiB"):
        kept_sparse(loaded, 8 << 20)
    assert isinstance(kept_sparse(loaded, 10 << 20), SparseSource)


def test_info_json_of_a_file_kept_sparse_names_its_path_and_format(tmp_path):
    """info --json of one file said "mtx" and its path in memory, "sparse" and no path kept sparse."""
    path = tmp_path / "s.mtx"
    path.write_text(MM + "3000 3000 2\n1 1 1.0\n3000 2 2.0\n")
    kept = json.loads(_run("info", path, "--max-memory", "40M", "--json", "-").stdout)["matrix"]
    loaded = json.loads(_run("info", path, "--json", "-").stdout)["matrix"]
    assert kept["format"] == loaded["format"] == "mtx" and kept["path"] == loaded["path"] == str(path)
