"""Tests for sfapprox.io: dispatch, LoadedMatrix, and the mtx/ijv/hb/text/numpy/covariance readers."""

from __future__ import annotations

import gzip
import hashlib
import re

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sfapprox._errors import InputError, ParameterError, ResourceError
from sfapprox.io import LoadedMatrix, as_loaded, available_formats, detect_format, load_matrix


def input_error(path, match, **kwargs) -> str:
    """Load ``path`` expecting an InputError; check it is one line starting with the path."""
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(str(path)), msg
    return msg


def write(path, text: str):
    path.write_text(text)
    return path


MTX_GENERAL = "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.5\n2 3 -2\n3 1 4\n"


# ---------------------------------------------------------------------------
# dispatch and the result type
# ---------------------------------------------------------------------------


class TestDetectFormat:
    @pytest.mark.parametrize(
        "name, key",
        [
            ("a.mtx", "mtx"), ("a.mtx.gz", "mtx"), ("A.MTX", "mtx"), ("a.rsa", "hb"), ("a.rua", "hb"),
            ("a.rb", "hb"), ("a.mat", "mat"), ("a.net", "pajek"), ("a.paj", "pajek"), ("a.npy", "npy"),
            ("a.npz", "npz"), ("a.csv", "csv"), ("a.tsv", "csv"), ("a.txt.gz", "csv"), ("a.dat", "csv"),
            ("a.ijv", "ijv"), ("a.coo", "ijv"), ("a.edges", "ijv"), ("a.cites", "linqs"), ("a.png", "image"),
            ("a.JPG", "image"), ("a.tiff", "image"), ("a.libsvm", "libsvm"), ("a.svm", "libsvm"),
            ("a.mtx.bz2", "mtx"), ("a.MTX.XZ", "mtx"), ("a.net.xz", "pajek"), ("a.npy.bz2", "npy"),
        ],
    )
    def test_known(self, name, key):
        assert detect_format(name) == key

    @pytest.mark.parametrize("name", ["data.xyz", "noext", "a.gz"])
    def test_unknown(self, name):
        with pytest.raises(InputError, match="unknown file type") as info:
            detect_format(name)
        msg = str(info.value)
        assert msg.startswith(name) and ".mtx" in msg and "format=" in msg and "\n" not in msg

    def test_available_formats(self):
        formats = available_formats()
        for key in ("mtx", "hb", "mat", "pajek", "npy", "npz", "csv", "ijv", "linqs", "image", "covariance"):
            assert isinstance(formats[key], str) and formats[key]


class TestFileProblems:
    def test_missing(self, tmp_path):
        input_error(tmp_path / "nope.mtx", "no such file")

    def test_directory(self, tmp_path):
        d = tmp_path / "dir.mtx"
        d.mkdir()
        assert "name a matrix file" in input_error(d, "is a folder, not a matrix file")
        for name in ("b.mtx", "a.net", "c.csv.gz", "d.mtx", "notes.doc"):
            write(d / name, "x")
        msg = input_error(d, "is a folder")
        assert f"its 4 matrix file(s), e.g. {d / 'a.net'} (a.net, b.mtx, c.csv.gz and 1 more)" in msg
        assert "sfapprox batch" in msg and "notes.doc" not in msg

    def test_empty(self, tmp_path):
        input_error(write(tmp_path / "e.csv", ""), "file is empty")

    def test_unknown_extension(self, tmp_path):
        input_error(write(tmp_path / "m.xyz", "1 2\n"), "unknown file type")

    def test_format_override(self, tmp_path):
        p = write(tmp_path / "m.xyz", MTX_GENERAL)
        assert load_matrix(p, format="mtx").nnz == 3

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"format": "nope"}, "format='nope'"),
            ({"two_mode": "both"}, "two_mode"),
            ({"square": "pad"}, "square"),
            ({"mirror": "yes"}, "mirror"),
            ({"network": 0}, "network"),
            ({"resize": -3}, "resize"),
            ({"max_memory": 0}, "max_memory"),
        ],
    )
    def test_bad_option_values(self, tmp_path, kwargs, match):
        p = write(tmp_path / "m.mtx", MTX_GENERAL)
        with pytest.raises(ParameterError, match=match):
            load_matrix(p, **kwargs)

    @pytest.mark.parametrize(
        "kwargs", [{"gradient": True}, {"var": "A"}, {"network": 2}, {"two_mode": "rows"}, {"covariance": True}, {"resize": 8}]
    )
    def test_options_not_for_this_format(self, tmp_path, kwargs):
        p = write(tmp_path / "m.mtx", MTX_GENERAL)
        with pytest.raises(ParameterError, match="applies to|needs a samples"):
            load_matrix(p, **kwargs)


class TestLoadedMatrix:
    def test_fields_and_hash(self, tmp_path):
        p = write(tmp_path / "small.mtx", MTX_GENERAL)
        m = load_matrix(p)
        assert isinstance(m, LoadedMatrix)
        assert (m.name, m.path, m.format, m.n, m.nnz, m.is_sparse) == ("small", str(p), "mtx", 3, 3, True)
        assert m.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
        dense = m.to_dense()
        assert dense.dtype == np.float64 and dense.flags.c_contiguous
        np.testing.assert_array_equal(dense, [[1.5, 0, 0], [0, 0, -2], [4, 0, 0]])

    def test_summary_sparse(self, tmp_path):
        s = load_matrix(write(tmp_path / "small.mtx", MTX_GENERAL)).summary()
        assert set(s) == {"name", "path", "format", "n", "nnz", "density", "symmetric", "nonnegative",
                          "fro_norm", "min", "max", "sha256", "notes"}
        assert s["symmetric"] is False and s["nonnegative"] is False
        assert s["min"] == -2.0 and s["max"] == 4.0
        assert s["density"] == pytest.approx(3 / 9)
        assert s["fro_norm"] == pytest.approx(np.sqrt(1.5**2 + 4 + 16))

    def test_summary_min_counts_implicit_zeros(self):
        s = as_loaded(sp.csr_array(np.array([[1.0, 2.0], [2.0, 0.0]]))).summary()
        assert s["min"] == 0.0 and s["max"] == 2.0 and s["symmetric"] is True and s["nonnegative"] is True

    def test_summary_dense_exact_symmetry(self):
        X = np.array([[1.0, 2.0], [2.0 + 1e-15, 1.0]])
        assert as_loaded(X).summary()["symmetric"] is False
        assert as_loaded(X.round(3)).summary()["symmetric"] is True

    def test_as_loaded(self):
        m = as_loaded(np.eye(3, dtype=int), name="I3")
        assert (m.name, m.path, m.format, m.sha256, m.notes, m.n, m.nnz) == ("I3", None, "array", None, [], 3, 3)
        with pytest.raises(InputError, match=r"^I3: matrix is not square"):
            as_loaded(np.zeros((2, 3)), name="I3")

    def test_to_dense_refuses_over_limit(self):
        m = as_loaded(sp.eye(100, format="csr"))
        with pytest.raises(ResourceError, match="max-memory"):
            m.to_dense(max_memory=1000)


# ---------------------------------------------------------------------------
# Matrix Market
# ---------------------------------------------------------------------------


class TestMatrixMarket:
    def test_general_stays_sparse(self, tmp_path):
        m = load_matrix(write(tmp_path / "g.mtx", MTX_GENERAL))
        assert isinstance(m.matrix, sp.csr_array) and m.notes == []

    def test_symmetric_expanded_with_note(self, tmp_path):
        p = write(tmp_path / "s.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 2\n2 1 -1\n3 2 -1\n")
        m = load_matrix(p)
        assert m.nnz == 5 and m.summary()["symmetric"]
        assert "symmetric storage expanded: 3 stored -> 5 entries" in m.notes

    def test_skew_symmetric(self, tmp_path):
        p = write(tmp_path / "k.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n")
        np.testing.assert_array_equal(load_matrix(p).to_dense(), [[0, -3], [3, 0]])

    def test_pattern_and_integer(self, tmp_path):
        p = write(tmp_path / "p.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n")
        m = load_matrix(p)
        np.testing.assert_array_equal(m.to_dense(), [[0, 1], [1, 0]])
        assert any("pattern" in n for n in m.notes)
        q = write(tmp_path / "i.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 7\n")
        assert load_matrix(q).matrix.dtype == np.float64

    def test_dense_array_format(self, tmp_path):
        p = write(tmp_path / "a.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n")
        m = load_matrix(p)
        assert isinstance(m.matrix, np.ndarray)
        np.testing.assert_array_equal(m.matrix, [[1, 3], [2, 4]])  # column-major

    def test_gz(self, tmp_path):
        p = tmp_path / "foo.mtx.gz"
        p.write_bytes(gzip.compress(MTX_GENERAL.encode()))
        m = load_matrix(p)
        assert (m.name, m.format, m.nnz) == ("foo", "mtx", 3)
        assert m.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()

    def test_corrupt_gzip(self, tmp_path):
        p = tmp_path / "bad.mtx.gz"
        p.write_bytes(b"this is not gzip at all")
        input_error(p, "not a valid gzip file")

    def test_truncated_gzip(self, tmp_path):
        p = tmp_path / "trunc.mtx.gz"
        p.write_bytes(gzip.compress((MTX_GENERAL * 200).encode())[:60])
        input_error(p, "not a valid gzip file")

    def test_complex(self, tmp_path):
        p = write(tmp_path / "c.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 2\n")
        input_error(p, "complex matrices are not supported")

    def test_not_square_from_header(self, tmp_path):
        p = write(tmp_path / "r.mtx", "%%MatrixMarket matrix coordinate real general\n3 5 1\n1 1 1\n")
        input_error(p, r"not square \(3 x 5\)")

    @pytest.mark.parametrize(
        "body, match",
        [
            ("3 3 2\n1 1 1.0\n4 2 2.0\n", "out of bounds"),
            ("3 3 3\n1 1 1.0\n2 2 2.0\n", "Truncated"),
            ("3 3 1\n1 1 1\n2 2 2\n", "Too many lines"),
            ("3 3 1\n1 1 abc\n", "Invalid"),
            ("3 3 1\n0 1 1\n", "out of bounds"),
        ],
    )
    def test_body_errors(self, tmp_path, body, match):
        p = write(tmp_path / "b.mtx", "%%MatrixMarket matrix coordinate real general\n" + body)
        input_error(p, match)

    def test_nan_entry(self, tmp_path):
        p = write(tmp_path / "n.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 1\n3 2 nan\n")
        input_error(p, r"1 NaN/Inf entries \(first at row 2, col 1")

    def test_dense_over_memory_refused(self, tmp_path):
        p = write(tmp_path / "big.mtx", "%%MatrixMarket matrix array real general\n1000 1000\n1\n")
        with pytest.raises(ResourceError, match="max-memory"):
            load_matrix(p, max_memory=10**6)

    def test_huge_header_refused_before_reading(self, tmp_path):
        p = write(tmp_path / "huge.mtx", "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1\n1 1 1\n")
        with pytest.raises(ResourceError, match="beyond the supported maximum"):
            load_matrix(p)

    def test_big_coordinate_stays_sparse(self, tmp_path):
        # Dense would be 8e10 bytes; the coordinate file is tiny and stays sparse
        # when the limit leaves room for the dense form every method needs.
        p = write(tmp_path / "wide.mtx", "%%MatrixMarket matrix coordinate real general\n100000 100000 2\n1 1 1\n100000 5 2\n")
        m = load_matrix(p, max_memory=10**11)
        assert m.is_sparse and m.n == 100000 and m.nnz == 2

    def test_order_whose_dense_form_exceeds_the_limit_refused_from_header(self, tmp_path):
        p = write(tmp_path / "wide.mtx", "%%MatrixMarket matrix coordinate real general\n100000 100000 2\n1 1 1\n100000 5 2\n")
        with pytest.raises(ResourceError, match=r"wide.mtx: matrix of order 100,000 \(its dense form, which every "
                                                r"method works on\) needs about 74.5 GiB, over the memory limit of 9.5 MiB"):
            load_matrix(p, max_memory=10**7)


class TestHeaderlessTriplets:
    LOWER = "1 1 4.0\n2 1 -1.0\n2 2 4.0\n3 2 -1.0\n3 3 4.0\n"

    def test_mtx_without_header_refused_with_the_ijv_hint(self, tmp_path):
        # A file named .mtx is Matrix Market: header-less lines are never guessed.
        msg = input_error(write(tmp_path / "mesh.mtx", self.LOWER), r"line 1: no %%MatrixMarket banner")
        assert "header-less 'i j value' lines" in msg and "format='ijv' (CLI: --format ijv)" in msg

    def test_format_ijv_reads_a_headerless_mtx_mirrored(self, tmp_path):
        m = load_matrix(write(tmp_path / "mesh.mtx", self.LOWER), format="ijv")
        assert m.format == "ijv" and m.n == 3 and m.nnz == 7 and m.summary()["symmetric"]
        assert any("entries only in the lower triangle: mirrored" in n for n in m.notes)

    def test_mirror_none_keeps_triangle(self, tmp_path):
        m = load_matrix(write(tmp_path / "mesh.mtx", self.LOWER), format="ijv", mirror="none")
        assert m.nnz == 5 and not m.summary()["symmetric"]

    def test_mirror_refused_for_matrix_market(self, tmp_path):
        with pytest.raises(ParameterError, match="mirror= applies to header-less triplet files"):
            load_matrix(write(tmp_path / "g.mtx", MTX_GENERAL), mirror="none")

    def test_mirror_forced_on_general(self, tmp_path):
        m = load_matrix(write(tmp_path / "g.ijv", "1 2 1\n3 1 2\n"), mirror="mirror")
        np.testing.assert_array_equal(m.to_dense(), [[0, 1, 2], [1, 0, 0], [2, 0, 0]])

    def test_auto_keeps_general(self, tmp_path):
        m = load_matrix(write(tmp_path / "g.ijv", "1 2 1\n3 1 2\n"))
        assert m.nnz == 2 and not any("mirrored" in n for n in m.notes)

    def test_upper_triangle_mirrored(self, tmp_path):
        m = load_matrix(write(tmp_path / "u.coo", "1 2 5\n1 3 6\n"))
        assert m.nnz == 4 and any("upper triangle" in n for n in m.notes)

    def test_pattern_zero_based_and_duplicates(self, tmp_path):
        m = load_matrix(write(tmp_path / "e.edges", "# edge list\n0 1\n1 2\n0 1\n"), mirror="none")
        np.testing.assert_array_equal(m.to_dense(), [[0, 2, 0], [0, 0, 1], [0, 0, 0]])
        text = " ".join(m.notes)
        assert "0-based" in text and "pattern" in text and "1 repeated entries summed" in text

    def test_garbage_mtx(self, tmp_path):
        input_error(write(tmp_path / "junk.mtx", "hello world\n"), "not a Matrix Market file")

    @pytest.mark.parametrize(
        "text, match",
        [
            ("1 2 3\n1 2 3 4\n", "line 2: expected 'i j' or 'i j value'"),
            ("1 2 3\n2 1\n", "line 2 has 2 fields but line 1 has 3"),
            ("1 2 3\n2 x 1\n", "line 2, column 2: non-numeric cell 'x'"),
            ("1.5 2 3\n", "line 1: indices must be non-negative integers"),
            ("-1 2 3\n", "indices must be non-negative"),
            ("% only comments\n", "no entries"),
        ],
    )
    def test_ijv_errors(self, tmp_path, text, match):
        input_error(write(tmp_path / "t.ijv", text), match)

    def test_mesh_like_nnz(self, tmp_path):
        # mesh2e1 is 1162 lower-triangle lines -> 2018 entries; a small analogue here.
        i, j = np.tril_indices(10)
        lines = "".join(f"{a + 1} {b + 1} {a + b + 1}\n" for a, b in zip(i, j))
        m = load_matrix(write(tmp_path / "m.mtx", lines), format="ijv")
        assert m.nnz == 100


# ---------------------------------------------------------------------------
# Harwell-Boeing
# ---------------------------------------------------------------------------


def _sym_fixture():
    A = sp.random(6, 6, density=0.4, random_state=np.random.default_rng(1), format="csc")
    return (A + A.T + sp.eye(6)).tocsc()


class TestHarwellBoeing:
    def test_rua_roundtrip(self, tmp_path):
        A = sp.random(5, 5, density=0.5, random_state=np.random.default_rng(0), format="csc")
        p = tmp_path / "m.rua"
        scipy.io.hb_write(str(p), A)
        m = load_matrix(p)
        assert m.format == "hb" and m.is_sparse
        np.testing.assert_allclose(m.to_dense(), A.toarray())

    def test_rsa_lower_triangle_expanded(self, tmp_path):
        A = _sym_fixture()
        p = tmp_path / "s.rsa"
        scipy.io.hb_write(str(p), sp.tril(A).tocsc())
        text = p.read_text().splitlines(keepends=True)
        text[2] = "RSA" + text[2][3:]  # hb_write only writes RUA; symmetric files store one triangle
        p.write_text("".join(text))
        m = load_matrix(p)
        np.testing.assert_allclose(m.to_dense(), A.toarray())
        assert any("symmetric storage expanded" in n for n in m.notes)

    def test_rza_skew(self, tmp_path):
        p = tmp_path / "k.rb"
        scipy.io.hb_write(str(p), sp.csc_matrix(np.array([[0, 0.0], [3.0, 0]])))
        text = p.read_text().splitlines(keepends=True)
        text[2] = "RZA" + text[2][3:]
        p.write_text("".join(text))
        np.testing.assert_allclose(load_matrix(p).to_dense(), [[0, -3], [3, 0]])

    @pytest.mark.parametrize("mxtype, match", [("CUA", "complex"), ("PUA", "pattern-only"), ("RUE", "elemental"), ("XYZ", "unknown matrix type")])
    def test_unsupported_types(self, tmp_path, mxtype, match):
        p = tmp_path / "m.rua"
        scipy.io.hb_write(str(p), sp.csc_matrix(np.eye(3)))
        text = p.read_text().splitlines(keepends=True)
        text[2] = mxtype + text[2][3:]
        p.write_text("".join(text))
        input_error(p, match)

    def test_not_square(self, tmp_path):
        p = tmp_path / "r.rua"
        scipy.io.hb_write(str(p), sp.csc_matrix(np.ones((2, 3))))
        input_error(p, r"not square \(2 x 3\)")

    def test_garbage(self, tmp_path):
        input_error(write(tmp_path / "g.hb", "just\nsome\ntext here\nand more\n"), "not a Harwell-Boeing file")

    def test_truncated_body(self, tmp_path):
        p = tmp_path / "t.rua"
        scipy.io.hb_write(str(p), sp.random(8, 8, density=0.5, random_state=np.random.default_rng(2), format="csc"))
        lines = p.read_text().splitlines(keepends=True)
        p.write_text("".join(lines[:-2]))
        input_error(p, "cannot parse file")


# ---------------------------------------------------------------------------
# dense text
# ---------------------------------------------------------------------------


class TestDenseText:
    def test_csv_with_header(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", "a,b\n1,2\n3,4\n"))
        assert m.format == "csv" and isinstance(m.matrix, np.ndarray)
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])
        assert any("header" in n for n in m.notes)

    def test_csv_row_labels(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", ",x,y\nx,1,0.5\ny,0.5,1\n"))
        np.testing.assert_array_equal(m.matrix, [[1, 0.5], [0.5, 1]])

    def test_tsv_and_whitespace(self, tmp_path):
        assert load_matrix(write(tmp_path / "m.tsv", "1\t2\n3\t4\n")).n == 2
        m = load_matrix(write(tmp_path / "m.txt", "# comment\n1  2 \n\n 3 4\n"))
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])

    def test_gz_text(self, tmp_path):
        p = tmp_path / "m.csv.gz"
        p.write_bytes(gzip.compress(b"1,2\n3,4\n"))
        m = load_matrix(p)
        assert (m.name, m.n) == ("m", 2)

    def test_corrupt_gz_text(self, tmp_path):
        p = tmp_path / "m.csv.gz"
        p.write_bytes(b"\x1f\x8b\x08garbage")
        input_error(p, "not a valid gzip file")

    def test_non_numeric_cell(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2,3\n4,five,6\n7,8,9\n"), r"line 2, column 2: non-numeric cell 'five'")

    def test_ragged(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2,3\n4,5\n7,8,9\n"), r"line 2 has 2 fields, expected 3")

    def test_empty_cell(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2\n3,\n"), r"line 2, column 2: non-numeric cell ''")

    def test_nan(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2\nnan,4\n"), r"1 NaN/Inf entries \(first at row 1, col 0")

    def test_not_square_suggests_covariance(self, tmp_path):
        msg = input_error(write(tmp_path / "m.csv", "1,2,3\n4,5,6\n"), r"not square \(2 x 3\)")
        assert "covariance" in msg

    def test_binary_garbage(self, tmp_path):
        p = tmp_path / "m.csv"
        p.write_bytes(bytes(range(256)) * 4)
        input_error(p, "binary file")

    def test_latin1_header_decodes(self, tmp_path):
        p = tmp_path / "m.csv"
        p.write_bytes("caf\xe9,b\n1,2\n3,4\n".encode("latin-1"))
        assert load_matrix(p).n == 2

    def test_only_header(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "a,b\n"), "only a header row")


# ---------------------------------------------------------------------------
# NumPy
# ---------------------------------------------------------------------------


class TestNumpy:
    def test_npy(self, tmp_path):
        p = tmp_path / "a.npy"
        np.save(p, np.arange(9, dtype=np.int32).reshape(3, 3))
        m = load_matrix(p)
        assert m.format == "npy" and m.matrix.dtype == np.float64 and m.nnz == 8

    def test_npy_object_refused(self, tmp_path):
        p = tmp_path / "o.npy"
        np.save(p, np.array([[1, None], [None, 2]], dtype=object), allow_pickle=True)
        input_error(p, r"contains Python objects \(pickle\); refusing to load untrusted pickles")

    def test_npy_not_2d(self, tmp_path):
        p = tmp_path / "v.npy"
        np.save(p, np.arange(4.0))
        input_error(p, "must be 2-D")

    def test_npy_garbage(self, tmp_path):
        input_error(write(tmp_path / "g.npy", "not numpy"), "not a valid .npy")

    def test_npy_truncated(self, tmp_path):
        p = tmp_path / "t.npy"
        np.save(p, np.eye(50))
        p.write_bytes(p.read_bytes()[:500])
        input_error(p, "cannot parse file|truncated")

    def test_npy_memory(self, tmp_path):
        p = tmp_path / "a.npy"
        np.save(p, np.eye(100))
        with pytest.raises(ResourceError):
            load_matrix(p, max_memory=1000)

    def test_npz_default_and_var(self, tmp_path):
        p = tmp_path / "z.npz"
        np.savez(p, labels=np.arange(5), W=np.eye(4), V=np.ones((2, 3)))
        m = load_matrix(p)
        assert m.n == 4 and m.format == "npz"
        np.savez(p, A=np.eye(2), B=np.eye(3))
        input_error(p, r"several square 2-D arrays \(A, B\).*var=")
        assert load_matrix(p, var="B").n == 3
        input_error(p, r"no array 'C'; arrays: A 2x2", var="C")

    def test_npz_object_member_refused(self, tmp_path):
        p = tmp_path / "o.npz"
        np.savez(p, A=np.array([[None, 1], [2, 3]], dtype=object))
        input_error(p, "pickle")

    def test_npz_sparse(self, tmp_path):
        p = tmp_path / "s.npz"
        A = sp.random(20, 20, density=0.1, random_state=np.random.default_rng(3), format="csc")
        sp.save_npz(p, A)
        m = load_matrix(p)
        assert m.is_sparse and m.nnz == A.nnz
        np.testing.assert_allclose(m.to_dense(), A.toarray())

    def test_npz_garbage(self, tmp_path):
        input_error(write(tmp_path / "g.npz", "not a zip"), "not a valid .npz")


# ---------------------------------------------------------------------------
# covariance
# ---------------------------------------------------------------------------


class TestCovariance:
    def test_csv_table(self, tmp_path):
        rng = np.random.default_rng(0)
        T = rng.standard_normal((30, 5))
        p = tmp_path / "t.csv"
        p.write_text("a,b,c,d,e\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in T) + "\n")
        m = load_matrix(p, covariance=True)
        assert m.format == "covariance" and m.n == 5
        np.testing.assert_allclose(m.matrix, np.cov(T, rowvar=False, ddof=1))
        assert "sample covariance of 30 samples x 5 features" in m.notes

    def test_format_covariance_key(self, tmp_path):
        p = write(tmp_path / "t.txt", "1 2 3\n2 4 7\n")
        assert load_matrix(p, format="covariance").n == 3

    def test_npy_table(self, tmp_path):
        p = tmp_path / "t.npy"
        T = np.arange(12.0).reshape(4, 3) ** 2
        np.save(p, T)
        np.testing.assert_allclose(load_matrix(p, covariance=True).matrix, np.cov(T, rowvar=False))

    def test_libsvm(self, tmp_path):
        p = write(tmp_path / "d.libsvm", "+1 1:0.5 3:2\n-1 2:1 # comment\n1 qid:3 1:1 2:2 3:3\n")
        T = np.array([[0.5, 0, 2], [0, 1, 0], [1, 2, 3]])
        m = load_matrix(p, covariance=True)
        np.testing.assert_allclose(m.matrix, np.cov(T, rowvar=False))

    def test_libsvm_without_covariance(self, tmp_path):
        input_error(write(tmp_path / "d.svm", "1 1:2\n"), "covariance=True")

    def test_libsvm_bad_token(self, tmp_path):
        input_error(write(tmp_path / "d.svm", "1 1:2\n1 x:3\n"), r"line 2: expected 'index:value'", covariance=True)

    def test_one_sample(self, tmp_path):
        input_error(write(tmp_path / "t.csv", "a,b\n1,2\n"), "at least 2 samples", covariance=True)

    def test_nan_in_table(self, tmp_path):
        input_error(write(tmp_path / "t.csv", "1,2\nnan,3\n4,5\n"), "NaN/Inf", covariance=True)


def test_every_error_message_is_one_line(tmp_path):
    """A sweep over malformed inputs: only InputError, one line, path first."""
    cases = {
        "a.mtx": b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n\n\n",
        "b.mat": b"MATLAB 5.0 MAT-file garbage" * 20,
        "c.net": b"*Vertices 2\n*Edges\n1 3\n",
        "d.png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 40,
        "e.npz": b"PK\x03\x04broken",
        "f.rsa": b"\n\n\n\n",
        "g.csv": b"1,2\n3\n",
        "h.cites": b"a b\n",
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(InputError) as info:
            load_matrix(p)
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(str(p)), msg
        assert re.search(r"\S", msg[len(str(p)) + 1 :])


# ---------------------------------------------------------------------------
# the committed example files
# ---------------------------------------------------------------------------

EXAMPLES = (__import__("pathlib").Path(__file__).parents[1] / "examples").resolve()


@pytest.mark.skipif(not (EXAMPLES / "make_examples.py").exists(), reason="examples/ not present")
class TestExamples:
    def test_files_load(self):
        net = load_matrix(EXAMPLES / "karate_like.net")
        assert 30 <= net.n <= 40 and net.is_sparse and net.nnz > 0
        mesh = load_matrix(EXAMPLES / "mesh_small.mtx")
        assert 48 <= mesh.n <= 64 and mesh.summary()["symmetric"]
        img = load_matrix(EXAMPLES / "shapes.png")
        assert img.n in (64, 128) and len(np.unique(img.matrix)) > 2
        cov = load_matrix(EXAMPLES / "features.csv", covariance=True)
        assert cov.format == "covariance" and 30 <= cov.n <= 50 and cov.summary()["symmetric"]
        for name in ("karate_like.net", "mesh_small.mtx", "shapes.png", "features.csv"):
            assert (EXAMPLES / name).stat().st_size < 50_000

    def test_generator_is_deterministic(self, tmp_path):
        import runpy

        runpy.run_path(str(EXAMPLES / "make_examples.py"))["main"](tmp_path)
        for name in ("karate_like.net", "mesh_small.mtx", "shapes.png"):
            kwargs = {}
            a = load_matrix(tmp_path / name, **kwargs).to_dense()
            b = load_matrix(EXAMPLES / name, **kwargs).to_dense()
            np.testing.assert_array_equal(a, b)
        assert (tmp_path / "features.csv").read_text() == (EXAMPLES / "features.csv").read_text()


def test_ijv_reads_a_matrix_market_file_as_what_it_declares(tmp_path):
    # Read as triplets, the size line "3 3 3" would become an entry.
    m = load_matrix(write(tmp_path / "m.ijv", MTX_GENERAL))
    assert m.format == "mtx" and m.nnz == 3 and "read as Matrix Market" in m.notes[0]
    assert load_matrix(write(tmp_path / "m.txt", MTX_GENERAL), format="ijv").nnz == 3


@pytest.mark.parametrize("banner", ["%%MatrixMarkt matrix coordinate real general", "% matrix market coordinate real"])
def test_ijv_refuses_a_damaged_matrix_market_banner(tmp_path, banner):
    input_error(write(tmp_path / "m.ijv", f"{banner}\n3 3 3\n1 1 1\n2 2 1\n3 3 1\n"),
                r"damaged Matrix Market banner .* its size line would become an entry")


def test_ijv_comment_mentioning_a_matrix_is_a_comment(tmp_path):
    m = load_matrix(write(tmp_path / "m.ijv", "% matrix of distances, general\n1 2 1.5\n2 1 1.5\n"))
    assert m.format == "ijv" and m.nnz == 2


def test_gzipped_formats(tmp_path):
    """Any format can be gzipped: decompressed in memory, hash of the compressed bytes."""
    net = tmp_path / "g.net.gz"
    net.write_bytes(gzip.compress(b"*Vertices 3\n*Edges\n1 2\n2 3\n"))
    assert load_matrix(net).nnz == 4
    buf = tmp_path / "a.npy"
    np.save(buf, np.eye(3))
    npy = tmp_path / "a.npy.gz"
    npy.write_bytes(gzip.compress(buf.read_bytes()))
    m = load_matrix(npy)
    assert (m.name, m.n) == ("a", 3)
    assert m.sha256 == hashlib.sha256(npy.read_bytes()).hexdigest()
    mat = tmp_path / "m.mat"
    scipy.io.savemat(mat, {"X": np.eye(4)})
    matgz = tmp_path / "m.mat.gz"
    matgz.write_bytes(gzip.compress(mat.read_bytes()))
    assert load_matrix(matgz).n == 4


def test_csv_fast_and_slow_paths_agree(tmp_path):
    from sfapprox.io._text import _fast_table

    assert _fast_table(["1,2", "3,4"], ",").tolist() == [[1, 2], [3, 4]]
    assert _fast_table(["1,2", "3"], ",") is None  # ragged: the slow path names the line
    m = load_matrix(write(tmp_path / "q.csv", '"1",2\n3,"4"\n'))
    np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])


class TestHardening:
    """Bounds checked before parsing, and inputs scipy's readers would misread."""

    def test_text_parsing_cost_refused_before_splitting(self, tmp_path):
        p = write(tmp_path / "long.txt", "1\n" * 5000)
        with pytest.raises(ResourceError, match=r"parsing 5,001 lines of text .* --max-memory"):
            load_matrix(p, max_memory=100_000)

    def test_file_size_checked_before_reading(self, tmp_path):
        text = "%%MatrixMarket matrix coordinate real general\n" + "%" * 300 + "\n2 2 1\n1 1 1.0"  # no final newline
        with pytest.raises(ResourceError, match="reading the file"):
            load_matrix(write(tmp_path / "big.mtx", text), max_memory=200)

    def test_no_final_newline_loads(self, tmp_path):
        p = write(tmp_path / "m.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1")
        np.testing.assert_array_equal(load_matrix(p).to_dense(), [[0, 1, 0], [0, 0, 0], [1, 0, 0]])

    def test_value_in_a_pattern_file_refused(self, tmp_path):
        # scipy drops the 7; the file contradicts its banner.
        p = write(tmp_path / "m.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1 7")
        input_error(p, r"line 4: expected 'i j' \(a pattern file has no values\), got '3 1 7'; declare the field 'real'")

    def test_integer_field_with_fraction_refused(self, tmp_path):
        p = write(tmp_path / "i.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 3\n2 2 2.5\n")
        input_error(p, r"line 4: the header declares an integer field .* '2 2 2.5'")

    def test_array_one_value_per_line(self, tmp_path):
        p = write(tmp_path / "a.mtx", "%%MatrixMarket matrix array real general\n% two\n2 2\n1\n2\n3 4\n")
        input_error(p, r"line 6: an array-format Matrix Market file holds one value per line, got '3 4'")

    def test_empty_array_refused_from_header(self, tmp_path):
        input_error(write(tmp_path / "e.mtx", "%%MatrixMarket matrix array real general\n0 0\n"), r"empty \(0 x 0\)")

    def test_size_beyond_int64(self, tmp_path):
        p = write(tmp_path / "o.mtx", "%%MatrixMarket matrix coordinate real general\n9223372036854775808\n")
        input_error(p, r"line 2: Invalid integer size line '9223372036854775808'")

    def test_ijv_index_beyond_int64_refused_before_cast(self, tmp_path):
        with pytest.raises(ResourceError, match="beyond the supported maximum"):
            load_matrix(write(tmp_path / "t.ijv", "1e20 1 1.0\n"))
        input_error(write(tmp_path / "u.ijv", "inf 1 1.0\n"), "non-negative integers")

    def test_pajek_order_memory_from_header(self, tmp_path):
        p = write(tmp_path / "g.net", "*Vertices 50000000\n*Arcs\n1 2\n")
        with pytest.raises(ResourceError, match=r"network of order 50,000,000 \(its sparse row pointers alone\)"):
            load_matrix(p, max_memory=2**26)

    def test_sparse_npz_shape_checked_before_loading(self, tmp_path):
        p = tmp_path / "s.npz"
        sp.save_npz(p, sp.coo_array((np.ones(1), ([0], [0])), shape=(3 * 10**8, 3 * 10**8)))
        with pytest.raises(ResourceError, match="beyond the supported maximum"):
            load_matrix(p)

    def test_image_decoders_limited_to_image_formats(self, tmp_path):
        p = tmp_path / "x.png"
        p.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n")
        input_error(p, "cannot identify image file .*PNG, JPEG")
