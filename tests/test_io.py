"""Tests for sfapprox.io dispatch and the result type (sfapprox/io/__init__.py, sfapprox/io/_common.py)."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from _io_helpers import MTX_GENERAL, input_error, write
from sfapprox._errors import InputError, ParameterError, ResourceError
from sfapprox.io import LoadedMatrix, as_loaded, available_formats, detect_format, load_matrix


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
    def test_known_extensions_map_to_their_format(self, name, key):
        assert detect_format(name) == key

    @pytest.mark.parametrize("name", ["data.xyz", "noext", "a.gz"])
    def test_unknown_extension_refused_naming_the_known_ones(self, name):
        with pytest.raises(InputError, match="unknown file type") as info:
            detect_format(name)
        msg = str(info.value)
        assert msg.startswith(name) and ".mtx" in msg and "format=" in msg and "\n" not in msg

    @pytest.mark.parametrize("name", ["a.h5", "a.hdf5", "a.he5", "a.HDF"])
    def test_an_hdf5_name_that_is_no_saved_fit_is_said_to_be_one(self, name):
        """Every ending sfapprox takes for an HDF5 file's (factors.FILE_SUFFIXES): a damaged ``fit.hdf``, a name
        ``--save-factors`` refuses as a file's, was "unknown file type (extension '.hdf')"."""
        with pytest.raises(InputError, match="an HDF5 file that is not an sfapprox factors file.*MATLAB v7.3"):
            detect_format(name)

    def test_available_formats_describes_every_format(self):
        formats = available_formats()
        for key in ("mtx", "hb", "mat", "pajek", "npy", "npz", "csv", "ijv", "linqs", "image", "covariance"):
            assert isinstance(formats[key], str) and formats[key]


class TestFileProblems:
    def test_missing_file_refused(self, tmp_path):
        input_error(tmp_path / "nope.mtx", "no such file")

    def test_a_loop_of_links_and_a_dangling_link_are_said_to_be_links(self, tmp_path):
        """Both said "no such file" of a name that ``ls`` lists."""
        (tmp_path / "a.mtx").symlink_to("b.mtx")
        (tmp_path / "b.mtx").symlink_to("a.mtx")
        input_error(tmp_path / "a.mtx", r"a symbolic link that leads back to itself \(a loop\)")
        (tmp_path / "c.mtx").symlink_to("moved/c.mtx")
        input_error(tmp_path / "c.mtx", "a symbolic link to moved/c.mtx, which does not exist")

    def test_folder_refused_listing_its_matrix_files(self, tmp_path):
        d = tmp_path / "dir.mtx"
        d.mkdir()
        assert "name a matrix file" in input_error(d, "is a folder, not a matrix file")
        for name in ("b.mtx", "a.net", "c.csv.gz", "d.mtx", "notes.doc"):
            write(d / name, "x")
        msg = input_error(d, "is a folder")
        assert f"its 4 matrix file(s), e.g. {d / 'a.net'} (a.net, b.mtx, c.csv.gz and 1 more)" in msg
        assert "sfapprox batch" in msg and "notes.doc" not in msg

    def test_empty_file_refused(self, tmp_path):
        input_error(write(tmp_path / "e.csv", ""), "file is empty")

    def test_unknown_extension_refused_on_load(self, tmp_path):
        input_error(write(tmp_path / "m.xyz", "1 2\n"), "unknown file type")

    def test_format_option_overrides_the_extension(self, tmp_path):
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
    def test_bad_option_values_refused(self, tmp_path, kwargs, match):
        p = write(tmp_path / "m.mtx", MTX_GENERAL)
        with pytest.raises(ParameterError, match=match):
            load_matrix(p, **kwargs)

    @pytest.mark.parametrize("file, kwargs", [("shapes.png", {"gradient": "no"}), ("shapes.png", {"gradient": 1}),
                                              ("features.csv", {"covariance": "false"}),
                                              ("features.csv", {"covariance": None})])
    def test_bool_options_must_be_bools(self, file, kwargs):
        # a truthy "no" or "false" was read as True
        path = Path(__file__).resolve().parents[1] / "examples" / file
        (name, value), = kwargs.items()
        with pytest.raises(ParameterError, match=rf"{name}={value!r} must be True or False"):
            load_matrix(path, **kwargs)
        assert load_matrix(path, **{name: np.True_}).n == load_matrix(path, **{name: True}).n  # numpy bools are bools

    @pytest.mark.parametrize(
        "kwargs", [{"gradient": True}, {"var": "A"}, {"network": 2}, {"two_mode": "rows"}, {"covariance": True}, {"resize": 8}]
    )
    def test_options_not_for_this_format_refused(self, tmp_path, kwargs):
        p = write(tmp_path / "m.mtx", MTX_GENERAL)
        with pytest.raises(ParameterError, match="applies to|needs a samples"):
            load_matrix(p, **kwargs)


class TestLoadedMatrix:
    def test_fields_hash_and_dense_form(self, tmp_path):
        p = write(tmp_path / "small.mtx", MTX_GENERAL)
        m = load_matrix(p)
        assert isinstance(m, LoadedMatrix)
        assert (m.name, m.path, m.format, m.n, m.nnz, m.is_sparse) == ("small", str(p), "mtx", 3, 3, True)
        assert m.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
        dense = m.to_dense()
        assert dense.dtype == np.float64 and dense.flags.c_contiguous
        np.testing.assert_array_equal(dense, [[1.5, 0, 0], [0, 0, -2], [4, 0, 0]])

    def test_summary_of_a_sparse_matrix(self, tmp_path):
        s = load_matrix(write(tmp_path / "small.mtx", MTX_GENERAL)).summary()
        assert set(s) == {"name", "path", "file", "format", "n", "nnz", "density", "symmetric", "psd", "nonnegative",
                          "fro_norm", "min", "max", "sha256", "notes"}
        assert s["symmetric"] is False and s["nonnegative"] is False
        assert s["min"] == -2.0 and s["max"] == 4.0
        assert s["density"] == pytest.approx(3 / 9)
        assert s["fro_norm"] == pytest.approx(np.sqrt(1.5**2 + 4 + 16))

    def test_summary_names_its_file_under_the_key_a_sources_has_it(self, tmp_path):
        """A result's ``matrix`` named its input file "path" when it was loaded, but "file" when it was
        compared from its columns, where "path" says "columns": a script reading both found no one key.
        "file" is the input file in both ("path" stays as it was)."""
        from sfapprox import compare, open_matrix

        p = tmp_path / "x.npy"
        np.save(p, np.random.default_rng(0).random((12, 12)))
        loaded = compare(load_matrix(p), ["sparse"], time_limit=0, device="cpu").matrix
        streamed = compare(open_matrix(p, max_memory=3000), ["sparse"], time_limit=0, device="cpu",
                           max_memory="24K").matrix
        assert loaded["file"] == loaded["path"] == streamed["file"] == str(p) and streamed["path"] == "columns"
        assert as_loaded(np.eye(3)).summary()["file"] is None

    def test_summary_min_counts_implicit_zeros(self):
        s = as_loaded(sp.csr_array(np.array([[1.0, 2.0], [2.0, 0.0]]))).summary()
        assert s["min"] == 0.0 and s["max"] == 2.0 and s["symmetric"] is True and s["nonnegative"] is True

    @pytest.mark.parametrize("sparse", [False, True])
    def test_summary_says_not_psd_only_where_an_entry_shows_it(self, sparse, monkeypatch):
        """A graph without self-loops (Sawmill) was listed by info as a matrix Nyström applies to."""
        import sfapprox.io as io
        monkeypatch.setattr(io, "_PSD_BLOCK", 7)  # dense rows in blocks of one: every block is read
        ring = np.roll(np.eye(6), 1, axis=1) + np.roll(np.eye(6), -1, axis=1)
        G = np.random.default_rng(0).standard_normal((6, 2))
        wrap = sp.csr_array if sparse else np.asarray
        for X, verdict in ((ring, False), (ring + 2 * np.eye(6), None), (G @ G.T, None), (-np.eye(6), False),
                           (np.diag([1.0, 4.0]) + 2.5 * np.eye(2)[::-1], False), (np.triu(ring), None)):
            assert as_loaded(wrap(X)).summary()["psd"] is verdict
        from sfapprox.describe import describe
        assert describe(wrap(ring)).data["methods"]["nystrom"]["not_applicable"] == "X is not positive semi-definite"
        assert "not_applicable" not in describe(wrap(G @ G.T)).data["methods"]["nystrom"]

    def test_summary_dense_exact_symmetry(self):
        X = np.array([[1.0, 2.0], [2.0 + 1e-15, 1.0]])
        assert as_loaded(X).summary()["symmetric"] is False
        assert as_loaded(X.round(3)).summary()["symmetric"] is True

    @pytest.mark.parametrize("n", [1, 63, 64, 200])
    def test_summary_symmetry_is_array_equal_of_the_transpose(self, n):
        """The tiled test answers as ``np.array_equal(X, X.T)`` did: a difference in any tile (the last,
        partial ones too) is seen; ``-0.0`` equals ``0.0``."""
        def symmetric(X):
            return as_loaded(X).summary()["symmetric"]

        rng = np.random.default_rng(n)
        G = rng.standard_normal((n, n))
        S = G + G.T
        assert symmetric(S) is True
        for i, j in {(0, n - 1), (n - 1, 0), (n // 2, n - 1), (n - 1, n // 3)}:
            if i != j:
                X = S.copy()
                X[i, j] = np.nextafter(X[i, j], np.inf)
                assert symmetric(X) is np.array_equal(X, X.T) is False
        Z = np.zeros((n, n))
        Z[n - 1, 0] = -0.0
        assert symmetric(Z) is True and symmetric(G) is (n == 1)

    def test_summary_symmetry_makes_no_matrix_sized_temporary(self):
        """``np.array_equal(X, X.T)`` made an N x N boolean array (64 MiB at N = 8,192, and 1.4 to 3.5 s
        of an ``info``); the tiles' temporaries are a few KiB."""
        import tracemalloc
        n = 1000
        G = np.random.default_rng(0).standard_normal((n, n))
        loaded = as_loaded(G + G.T)
        tracemalloc.start()
        try:
            assert loaded._symmetric() is True
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < n * n // 8

    def test_as_loaded_wraps_an_array_and_refuses_non_square(self):
        m = as_loaded(np.eye(3, dtype=int), name="I3")
        assert (m.name, m.path, m.format, m.sha256, m.notes, m.n, m.nnz) == ("I3", None, "array", None, [], 3, 3)
        with pytest.raises(InputError, match=r"^I3: matrix is not square"):
            as_loaded(np.zeros((2, 3)), name="I3")

    def test_to_dense_refuses_over_limit(self):
        m = as_loaded(sp.eye(100, format="csr"))
        with pytest.raises(ResourceError, match="max_memory= if"):
            m.to_dense(max_memory=1000)


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


def test_gzipped_files_of_other_formats_load(tmp_path):
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


# ---------------------------------------------------------------------------
# the committed example files
# ---------------------------------------------------------------------------

EXAMPLES = (__import__("pathlib").Path(__file__).parents[1] / "examples").resolve()


@pytest.mark.skipif(not (EXAMPLES / "make_examples.py").exists(), reason="examples/ not present")
class TestExamples:
    def test_example_files_load_and_stay_small(self):
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


@pytest.mark.parametrize("path", [None, 123, b"x.npy"])
def test_a_path_that_is_not_a_path_is_a_parameter_error(path):
    """load_matrix(None), (b"x.npy"), (123) raised a raw TypeError."""
    from sfapprox import ParameterError
    from sfapprox.io import load_matrix, open_matrix

    for read in (load_matrix, open_matrix):
        with pytest.raises(ParameterError, match="path must be a file path"):
            read(path)


def test_an_empty_path_is_no_file_not_the_current_folder(tmp_path, monkeypatch):
    """"" is "." to the file system: load_matrix("") said ": is a directory", and save_factors("", fit)
    failed with "Device or resource busy" (an unset variable in a user's script)."""
    from sfapprox import ChordSF, ParameterError, load_factors, save_factors
    from sfapprox.io import load_matrix, open_matrix

    monkeypatch.chdir(tmp_path)
    fitted = ChordSF(max_iter=1).fit(np.eye(4))
    for call in (lambda: load_matrix(""), lambda: open_matrix(""), lambda: load_factors(""),
                 lambda: save_factors("", fitted)):
        with pytest.raises(ParameterError, match="path is empty; give a file name"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_a_loaded_matrix_records_what_picked_it_in_its_file_as_it_was_read(tmp_path):
    """A saved fit named its file but not the variable, network or mirroring that made the matrix from it,
    so a fit of var A was taken for one of var B.  The recipe records what was read: a default given
    explicitly (the file's only variable, network 1, mirroring that "auto" did) is the same matrix."""
    from PIL import Image

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "one.npz", A=rng.random((4, 4)), v=rng.random(3))
    np.savez(tmp_path / "two.npz", A=rng.random((4, 4)), B=rng.random((4, 4)))
    assert load_matrix(tmp_path / "one.npz").recipe == load_matrix(tmp_path / "one.npz", var="A").recipe == {"var": "A"}
    assert load_matrix(tmp_path / "two.npz", var="B").recipe == {"var": "B"}
    assert load_matrix(tmp_path / "two.npz", var="B").summary()["recipe"] == {"var": "B"}  # compare --json's matrix
    scipy.io.savemat(tmp_path / "m.mat", {"Problem": {"A": np.eye(3)}})
    assert load_matrix(tmp_path / "m.mat").recipe == {"var": "Problem.A"}
    net = write(tmp_path / "g.net", "*Vertices 3\n*Edges\n1 2\n2 3\n")
    assert load_matrix(net).recipe == load_matrix(net, network=1, two_mode="bipartite").recipe == {
        "network": 1, "relation": None, "two_mode": None}
    rel = write(tmp_path / "rel.net", '*Vertices 3\n*Arcs :1 "likes"\n1 2\n*Edges :2 "knows"\n1 2\n')
    assert load_matrix(rel).recipe["relation"] is None and load_matrix(rel, relation=2).recipe["relation"] == 2
    one = write(tmp_path / "one.net", '*Vertices 3\n*Arcs :1 "likes"\n1 2\n2 3\n')
    assert load_matrix(one).recipe == load_matrix(one, relation=1).recipe
    tri = write(tmp_path / "t.ijv", "1 2 1\n1 3 2\n")
    assert load_matrix(tri).recipe == load_matrix(tri, mirror="mirror").recipe == {"mirror": "mirror"}
    assert load_matrix(tri, mirror="none").recipe == {"mirror": "none"}
    table = write(tmp_path / "t.csv", "1,2,3\n2,5,1\n3,1,4\n")
    assert load_matrix(table).recipe == {"covariance": False}
    assert load_matrix(table, covariance=True).recipe == {"covariance": True}
    Image.fromarray((rng.random((6, 6)) * 255).astype(np.uint8)).save(tmp_path / "i.png")
    plain = {"square": None, "resize": None, "gradient": False}
    assert load_matrix(tmp_path / "i.png").recipe == load_matrix(tmp_path / "i.png", square="crop", resize=6).recipe == plain
    assert load_matrix(tmp_path / "i.png", resize=3, gradient=True).recipe == {**plain, "resize": 3, "gradient": True}
    assert load_matrix(write(tmp_path / "g.mtx", MTX_GENERAL)).recipe is None  # one matrix, read as it is


@pytest.mark.parametrize("kind", ["kernel", "covariance"])
def test_a_point_table_read_whole_is_hashed_from_what_was_read_not_read_again(kind, tmp_path, monkeypatch):
    """A source made from a text table (a kernel's points, a covariance never formed) records its file's
    SHA-256 from the bytes its reader read: the file was read a second time only to hash it."""
    import builtins
    import io as stdio
    import os

    from sfapprox.io import open_matrix

    path = tmp_path / "points.csv"
    path.write_text("\n".join(",".join(str((i * 7 + j) % 5) for j in range(6)) for i in range(40)) + "\n")
    opened = []
    for module in (builtins, stdio):  # pathlib's read_bytes opens by io.open, Source.sha256 by open
        real = module.open

        def counting(file, *args, _real=real, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.fspath(file) == os.fspath(path):
                opened.append(file)
            return _real(file, *args, **kwargs)

        monkeypatch.setattr(module, "open", counting)
    source = open_matrix(path, kernel="rbf") if kind == "kernel" else open_matrix(path, covariance=True, max_memory=1 << 20)
    monkeypatch.undo()
    assert type(source).__name__ == ("KernelMatrix" if kind == "kernel" else "CovarianceMatrix")
    assert source.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert len(opened) == 1


def test_an_attention_npz_is_read_once_and_hashed_from_that_reading(tmp_path, monkeypatch):
    """Q and K were read from the .npz, and the file read again only to hash it for the source's record."""
    from _io_helpers import count_opens

    from sfapprox.io import open_matrix

    rng = np.random.default_rng(0)
    path = tmp_path / "qk.npz"
    np.savez_compressed(path, q=rng.standard_normal((30, 4)), k=rng.standard_normal((30, 4)))
    opened = count_opens(monkeypatch, path)
    source = open_matrix(path, format="attention")
    monkeypatch.undo()
    assert type(source).__name__ == "AttentionMatrix" and source.n == 30
    assert source.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert len(opened) == 1, opened


def test_a_hashing_reader_hashes_the_file_in_order_whatever_the_reads(tmp_path):
    """Read back after a seek, read beyond what was hashed (a zip's directory at the end), or left unread:
    the digest is the file's, and bytes read in order are read from the file once."""
    from sfapprox.io._common import HashingReader

    data = np.random.default_rng(1).bytes(300_000)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    raw = open(path, "rb")
    read = []
    real = raw.read
    raw.read = lambda size=-1: read.append(len(out := real(size))) or out  # bytes the file gives
    with HashingReader(raw) as fh:
        fh.seek(-100, 2)
        assert fh.read() == data[-100:]  # (not hashed yet: bytes before it were not read)
        assert fh.read(10) == b"" and fh.seek(0) == 0
        assert fh.read(10) == data[:10]
        fh.seek(-4, 1)
        assert fh.read(8) == data[6:14] and fh.tell() == 14
        assert fh.read(100_000) == data[14:100_014]
        # a skip forward in the in-order reading (Python 3.12+'s zipfile skips a member's extra field so)
        # is read here: left, the hashing read all from there again
        assert fh.seek(20, 1) == 100_034 and fh.read(99_980) == data[100_034:200_014]
        assert fh.hexdigest() == hashlib.sha256(data).hexdigest()  # the rest (200,014 on) read to hash it
        assert fh.tell() == 200_014
    assert sum(read) == 100 + 14 + 4 + 200_000 + (300_000 - 200_014)


def test_a_hashing_reader_reads_a_long_skip_forward_in_pieces(tmp_path):
    """A skip forward in the in-order reading is read to hash it: in one read(offset) it held the whole
    skip (40 MB for a 40 MB skip); in pieces of the module's chunk, the same digest."""
    import tracemalloc

    from sfapprox.io._common import HashingReader

    data = np.random.default_rng(2).bytes(8_000_000)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with HashingReader(open(path, "rb")) as fh:
        assert fh.read(10) == data[:10]
        tracemalloc.start()
        try:
            assert fh.seek(7_000_000, 1) == 7_000_010 and fh.tell() == 7_000_010
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert fh.read(20) == data[7_000_010:7_000_030]
        assert fh.hexdigest() == hashlib.sha256(data).hexdigest()
    assert peak < 1_000_000
    with HashingReader(open(path, "rb")) as fh:  # past the end: read to it, then put there
        assert fh.seek(9_000_000, 1) == 9_000_000 and fh.read(1) == b""
        assert fh.hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_formed_covariance_does_not_hold_the_text_it_was_read_from(tmp_path, monkeypatch):
    """open_matrix(covariance=True) of a text table held the text's bytes (the file's size) and a centred copy
    of the table (made to decide whether to form it) while it formed the covariance from one more copy
    (astype before np.cov's own), and then read the file a second time to hash it: the bytes are let go
    once the table is parsed, their SHA-256 kept, and the copies are gone (held 4.5 and peak 6.6 tables'
    worth here, now 1.0 and 2.1)."""
    import tracemalloc

    from _io_helpers import count_opens

    import sfapprox.io as sio
    from sfapprox.io import open_matrix

    rng = np.random.default_rng(2)
    table = rng.standard_normal((6000, 24))
    path = tmp_path / "samples.csv"
    np.savetxt(path, table, delimiter=",", fmt="%.17g")
    text_bytes = path.stat().st_size
    real, seen = sio.covariance_of, {}

    def forming(src, table, opts, notes):  # what is held as the covariance is formed, and its peak
        seen["held"] = tracemalloc.get_traced_memory()[0] - seen["before"]
        tracemalloc.reset_peak()
        result = real(src, table, opts, notes)
        seen["peak"] = tracemalloc.get_traced_memory()[1] - seen["before"]
        return result

    monkeypatch.setattr(sio, "covariance_of", forming)
    opened = count_opens(monkeypatch, path)
    tracemalloc.start()
    try:
        seen["before"] = tracemalloc.get_traced_memory()[0]
        loaded = open_matrix(path, covariance=True, max_memory=1 << 30)
    finally:
        tracemalloc.stop()
    monkeypatch.undo()
    assert loaded.format == "covariance" and np.allclose(loaded.matrix, np.cov(table, rowvar=False))
    assert text_bytes > 2 * table.nbytes  # (the text is the larger: 17 digits a number)
    assert seen["held"] < 1.1 * table.nbytes  # the table alone, not the text's bytes and a copy besides it
    assert seen["peak"] < 2.5 * table.nbytes  # the table and np.cov's copy of it
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert len(opened) == 1, opened  # (the file was read again to hash it)


# ---------------------------------------------------------------------------
# text encodings (sfapprox/io/_common.py: decode_text)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("name, text, expected", [
    ("t.csv", "a,b\r\n1,2\r\n3,4\r\n", [[1, 2], [3, 4]]),
    ("t.ijv", "1 1 1.5\n2 2 2\n", [[1.5, 0], [0, 2]]),
    ("t.net", '*Vertices 2\n1 "caf\u00e9 x"\n2 "b"\n*Arcs\n1 2 0.5\n', [[0, 0.5], [0, 0]]),
])
def test_utf16_text_is_read_as_text_not_refused_as_binary(tmp_path, codec, name, text, expected):
    """Windows' "Unicode" (UTF-16, with or without its byte-order mark) is half NUL bytes: it was
    refused as "a binary file, not text", which it is not."""
    path = tmp_path / name
    path.write_bytes(text.encode(codec))
    np.testing.assert_array_equal(load_matrix(path).to_dense(), expected)


def test_binary_bytes_with_nuls_are_still_not_text(tmp_path):
    path = tmp_path / "b.csv"
    path.write_bytes(bytes(range(256)) * 4)
    input_error(path, "looks like a binary file")


def test_a_saved_fit_given_as_a_matrix_suggests_a_command_with_its_path_quoted(tmp_path):
    """The hint "sfapprox compare MATRIX --with {path}" printed a path with a space unquoted: pasted, the shell
    split it in two."""
    import shlex
    import warnings

    from sfapprox import ChordSF, save_factors

    path = tmp_path / "my fit.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_factors(path, ChordSF(max_iter=2, device="cpu").fit(np.eye(8)))
    with pytest.raises(InputError, match="is a saved fit") as caught:
        load_matrix(path)
    command = str(caught.value).split("sfapprox compare ")[1].split(" (API")[0]
    assert shlex.split(command) == ["MATRIX", "--with", str(path)]


@pytest.mark.parametrize("name, make, match", [
    ("r.mtx", lambda p: write(p, "%%MatrixMarket matrix coordinate real general\n2 1000 1\n1 1 1\n"),
     r"not square \(2 x 1,000\)"),
    ("e.mtx", lambda p: write(p, "%%MatrixMarket matrix coordinate real general\n0 1000 0\n"),
     r"empty \(0 x 1,000\)"),
    ("r.rua", lambda p: scipy.io.hb_write(str(p), sp.csc_matrix(([1.0], ([0], [999])), shape=(2, 1000))),
     r"not square \(2 x 1,000\)"),
    ("w.npy", lambda p: np.save(p, np.zeros((2, 1000))), r"not square \(2 x 1,000\)"),
])
def test_a_reader_s_refusal_writes_rows_and_columns_thousands_separated(tmp_path, name, make, match):
    """The shape in "not square (2 x 1000)" read unlike the counts beside it ("order 1,000") and the
    tables' counts: 1,000 as they are written."""
    make(tmp_path / name)
    input_error(tmp_path / name, match)


def test_a_dense_copy_refused_writes_its_order_thousands_separated(tmp_path):
    sp.save_npz(tmp_path / "s.npz", sp.eye(2000, format="csr"))
    with pytest.raises(ResourceError, match=r"dense copy of 2,000 x 2,000 matrix"):
        load_matrix(tmp_path / "s.npz").to_dense(max_memory=10**6)


# -- Source (io/_common.py) --------------------------------------------------------------------------------


def test_read_text_checks_the_text_and_its_lines_by_default(tmp_path):
    """Source.read_text's default estimate is split_cost, the measured one every reader starts from (it was
    4 bytes a byte and 300 a line, which no reader used any more: a 3,000-line file was refused at about
    1.4 times what it holds)."""
    from sfapprox.io._common import Source, split_cost

    path = write(tmp_path / "a.txt", "1 2\n" * 3000)
    data = path.read_bytes()
    lines = data.count(b"\n") + 1
    assert Source(path, max_memory=split_cost(data, lines)).read_text() == data.decode()
    with pytest.raises(ResourceError, match=r"^\S+: parsing 3,001 lines of text"):
        Source(path, max_memory=split_cost(data, lines) - 1).read_text()


def test_a_decompression_reads_the_default_memory_limit_once(tmp_path, monkeypatch):
    """Each MiB decompressed is checked against the limit; the default one (the RAM's, or the cgroup's,
    read from its files: 0.5-1 ms) was read again at each, and it still holds."""
    from sfapprox import _validation
    from sfapprox.io._common import Source

    path = tmp_path / "a.txt.gz"
    path.write_bytes(gzip.compress(b"0" * (5 << 20)))
    asked = []

    def physical_memory():
        asked.append(1)
        return 1 << 40

    monkeypatch.setattr(_validation, "physical_memory", physical_memory)
    assert len(Source(path).read_bytes()) == 5 << 20 and len(asked) == 1
    monkeypatch.setattr(_validation, "physical_memory", lambda: 4 << 20)  # a limit of 3.2 MiB
    with pytest.raises(ResourceError, match=r"decompressed data needs about .* over the memory limit of 3\.2 MiB"):
        Source(path).read_bytes()


def test_head_of_a_bz2_file_checks_its_decoder(tmp_path):
    """``Source.head`` (a format's sniffing) built a bzip2 decoder, 3.7 MB of block arrays at level 9, with
    no memory check: a 3 MB limit let it hold them. Now its decoder is checked as a full read's is."""
    import bz2

    from sfapprox.io._common import Source

    p = tmp_path / "a.csv.bz2"
    p.write_bytes(bz2.compress(b"1,2\n3,4\n" * 1000, compresslevel=9))
    with pytest.raises(ResourceError, match=r"a\.csv\.bz2: decoding its first 4\.0 KiB needs about 3\.5 MiB"):
        Source(p, max_memory=3_000_000).head()
    assert Source(p, max_memory=5_000_000).head(8) == b"1,2\n3,4\n"


@pytest.mark.parametrize("suffix", [".xz", ".bz2"])
def test_head_of_a_compressed_file_is_checked_for_what_it_holds(tmp_path, suffix):
    """``Source.head``'s check (its decoder's buffers, :func:`decoder_bytes`) covers the RSS its decoding
    grows by, measured in a fresh process: an ``.xz``'s grew 102.4 kB, over the 64 KiB of state counted."""
    import bz2
    import json
    import lzma
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc to reset and read the peak resident memory")
    p = tmp_path / f"a.csv{suffix}"
    data = b"".join(b"%d,%d\n" % (k, 3 * k) for k in range(100_000))
    p.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME) if suffix == ".xz" else bz2.compress(data))
    code = (
        "import gc, json, sys\n"
        "import sfapprox._validation as validation\n"
        "import sfapprox.io._common as common\n"
        "checks = []\n"
        "def check_memory(n_bytes, *, what, held=0, **kwargs):\n"
        "    checks.append(n_bytes + held)\n"
        "common.check_memory = check_memory\n"
        "def st(k):\n"
        "    return next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith(k + ':'))\n"
        "src = common.Source(sys.argv[1])\n"
        "gc.collect()\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "base = st('VmRSS')\n"
        "src.head()\n"
        "print(json.dumps({'used': st('VmHWM') - base, 'checked': max(checks, default=0)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 < out["used"] <= out["checked"], out


def test_a_legacy_lzma_file_s_dictionary_is_counted():
    """``lzma.open`` reads a legacy ``.lzma`` stream under an ``.xz`` name too: its dictionary (its header's
    bytes 1-4) is counted as an .xz's is, where 0 was."""
    import lzma

    from sfapprox.io._common import _XZ_STATE, decoder_bytes

    for make in (lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE, preset=6),
                 lambda d: lzma.compress(d, format=lzma.FORMAT_XZ, preset=6)):
        head = make(b"0123456789" * 1000)[:32]
        assert decoder_bytes(".xz", head, 10**9) == _XZ_STATE + (8 << 20)
        assert decoder_bytes(".xz", head, 1000) == _XZ_STATE + 1000  # as far as the output has filled it


#: Run ``sfapprox info PATH`` with an address space of what the process holds after its imports plus 512 MiB.
_UNDER_ADDRESS_LIMIT = """
import resource, sys
from sfapprox.cli import app, main  # (torch and the readers imported before the limit: their mappings are large)
import sfapprox.describe, sfapprox.io

held = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (held + (512 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
sys.argv = ["sfapprox", "info", sys.argv[1]]
main()
"""


@pytest.mark.parametrize("name", ["a.npy.xz", "a.csv.xz"])
def test_an_xz_whose_dictionary_does_not_fit_the_address_space_says_so_in_one_line(tmp_path, name):
    """An ``.xz`` whose header declares a 1.5 GiB dictionary (liblzma allocates it whole before its first
    byte) read under ``ulimit -v``: "error: out of memory ()", naming neither the file nor why.  It names the
    file, the memory its decoder asks for and what to do, exit 2."""
    import io
    import lzma
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs Linux's /proc to read the address space held")
    table = np.arange(400.0).reshape(20, 20)
    if name.endswith(".npy.xz"):
        buf = io.BytesIO()
        np.save(buf, table)
        data = buf.getvalue()
    else:
        data = "\n".join(",".join(map(str, row)) for row in table).encode()
    p = tmp_path / name
    p.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 1536 << 20}]))
    done = subprocess.run([sys.executable, "-c", _UNDER_ADDRESS_LIMIT, str(p)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "1000"})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: its xz decoder could not get the 1.5 GiB"), done.stderr
    assert "1.5 GiB dictionary its header declares" in lines[0] and f"xz -dk {p}" in lines[0]


def test_an_xz_decoder_s_memory_limit_error_is_said_as_its_memory_not_as_a_bad_file(tmp_path, monkeypatch):
    """liblzma's own refusal ("Memory usage limit exceeded", a decoder given a memlimit) read as "not a valid
    xz file"; it is the decoder's memory, named with the dictionary."""
    import lzma

    from sfapprox.io._common import Source

    p = tmp_path / "a.csv.xz"
    p.write_bytes(lzma.compress(b"1,2\n3,4\n", format=lzma.FORMAT_XZ,
                                filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 64 << 20}]))

    class _Refusing:  # lzma.open's file, whose decoder was refused its memory
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, *args):
            raise lzma.LZMAError("Memory usage limit exceeded")

    monkeypatch.setattr(lzma, "open", lambda *args, **kwargs: _Refusing())
    for read in (lambda src: src.head(), lambda src: src.read_bytes()):
        with pytest.raises(ResourceError, match=r"a\.csv\.xz: its xz decoder could not get the 64\.1 MiB"):
            read(Source(p))
