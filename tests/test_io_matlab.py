"""Tests for the MATLAB reader: v5 (scipy.io.savemat) and v7.3 (HDF5 in MATLAB's layout)."""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import h5py
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sfapprox._errors import InputError, ResourceError
from sfapprox.io import _matlab, load_matrix


def input_error(path, match, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    return msg


NONSYM = np.arange(16.0).reshape(4, 4)  # transposition mistakes show


# ---------------------------------------------------------------------------
# v5
# ---------------------------------------------------------------------------


class TestV5:
    def test_single_square_variable(self, tmp_path):
        p = tmp_path / "m.mat"
        scipy.io.savemat(p, {"X": NONSYM, "labels": np.arange(4.0)[:, None], "title": "hi"})
        m = load_matrix(p)
        assert m.format == "mat" and not m.is_sparse
        np.testing.assert_array_equal(m.matrix, NONSYM)
        assert m.notes == ["MATLAB v5: variable X"]

    def test_suitesparse_problem_struct(self, tmp_path):
        A = sp.random(6, 6, density=0.3, random_state=np.random.default_rng(0), format="csc")
        p = tmp_path / "ss.mat"
        scipy.io.savemat(p, {"Problem": {"A": A, "title": "test", "Zeros": sp.csc_matrix((6, 6)), "id": 7}})
        m = load_matrix(p)
        assert m.is_sparse and m.nnz == A.nnz
        np.testing.assert_allclose(m.to_dense(), A.toarray())
        assert "Problem.A" in m.notes[0]

    def test_a_sparse_variable_reads_without_a_warning_from_scipy(self, tmp_path):
        """scipy 1.18's loadmat warns on every read of a sparse variable that does not say which sparse type
        it wants ("The default value for `spmatrix` is changing to `False` in v1.20"): asked for an array,
        where it takes the keyword.  (A struct's sparse field is not converted by loadmat, nor warned on.)"""
        import warnings

        p = tmp_path / "s.mat"
        scipy.io.savemat(p, {"A": sp.csc_matrix(NONSYM)})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m = load_matrix(p)
        assert m.is_sparse
        np.testing.assert_array_equal(m.to_dense(), NONSYM)

    def test_problem_dense_field_and_dotted_var(self, tmp_path):
        p = tmp_path / "d.mat"
        scipy.io.savemat(p, {"Problem": {"A": NONSYM, "B": np.eye(4)}, "W": np.eye(2)})
        input_error(p, r"several square numeric variables: W, Problem.A")
        np.testing.assert_array_equal(load_matrix(p, var="Problem.A").matrix, NONSYM)
        np.testing.assert_array_equal(load_matrix(p, var="Problem.B").matrix, np.eye(4))
        assert load_matrix(p, var="W").n == 2
        input_error(p, r"struct 'Problem' has no field 'C'; fields: A, B", var="Problem.C")

    def test_a_struct_array_is_refused_with_its_shape_written_as_every_message_writes_one(self, tmp_path):
        p = tmp_path / "arr.mat"
        records = np.empty((1, 2), dtype=[("A", object)])
        records[0, 0]["A"], records[0, 1]["A"] = NONSYM, np.eye(4)
        scipy.io.savemat(p, {"Problem": records})
        input_error(p, r"struct 'Problem' is a 1 x 2 struct array; only 1 x 1 structs are supported$",
                    var="Problem.A")

    def test_no_square_variable_lists_variables(self, tmp_path):
        p = tmp_path / "n.mat"
        scipy.io.savemat(p, {"T": np.ones((3, 5)), "name": "abc"})
        msg = input_error(p, "no square numeric variable; variables: T \\(3 x 5 double\\)")
        assert "var=" in msg and "name" in msg

    def test_variables_are_listed_with_thousands_separators(self, tmp_path):
        """A variable listed as "T (1200 x 3 double)" where every other message writes 1,200."""
        p = tmp_path / "t.mat"
        scipy.io.savemat(p, {"T": np.ones((1200, 3))})
        input_error(p, r"no square numeric variable; variables: T \(1,200 x 3 double\)")

    def test_unknown_var(self, tmp_path):
        p = tmp_path / "u.mat"
        scipy.io.savemat(p, {"X": np.eye(2)})
        input_error(p, r"no variable 'Y'; variables: X \(2 x 2 double\)", var="Y")

    def test_non_square_var(self, tmp_path):
        p = tmp_path / "r.mat"
        scipy.io.savemat(p, {"T": np.ones((3, 5))})
        input_error(p, r"\(variable T\): matrix is not square \(3 x 5\)", var="T")

    def test_complex_and_char_vars(self, tmp_path):
        p = tmp_path / "c.mat"
        scipy.io.savemat(p, {"Z": np.eye(2) * (1 + 1j), "s": "ab"})
        input_error(p, "complex matrices are not supported", var="Z")
        input_error(p, "not numeric", var="s")

    def test_logical_and_int(self, tmp_path):
        p = tmp_path / "l.mat"
        scipy.io.savemat(p, {"B": np.eye(3, dtype=bool)})
        assert load_matrix(p).matrix.dtype == np.float64

    def test_memory_refused_from_header(self, tmp_path):
        p = tmp_path / "big.mat"
        scipy.io.savemat(p, {"X": np.zeros((200, 200))})
        with pytest.raises(ResourceError):
            load_matrix(p, max_memory=10_000)

    def test_garbage_and_truncated(self, tmp_path):
        g = tmp_path / "g.mat"
        g.write_bytes(b"hello world " * 30)
        input_error(g, "not a readable MATLAB file")
        t = tmp_path / "t.mat"
        scipy.io.savemat(t, {"X": np.random.default_rng(0).random((30, 30))})
        t.write_bytes(t.read_bytes()[:400])
        input_error(t, "MATLAB|cannot")


    @pytest.mark.parametrize("compressed", [False, True])
    def test_a_truncated_file_says_it_is_truncated_and_what_to_do(self, tmp_path, compressed):
        """scipy's "could not read bytes" (as 'cannot read variable' or 'not a readable MATLAB file') said
        neither that the file was cut short nor what to do."""
        whole = tmp_path / "w.mat"
        scipy.io.savemat(whole, {"A": np.random.default_rng(0).random((30, 30))}, do_compression=compressed)
        data = whole.read_bytes()
        for cut, where in ((100, "inside its 128-byte header"), (132, "inside the tag of the element at byte 128"),
                           (len(data) - 10, "10 bytes short of the variable stored from byte 128")):
            t = tmp_path / "t.mat"
            t.write_bytes(data[:cut])
            msg = input_error(t, rf"t\.mat: the file is truncated: it ends at byte {cut:,}, {where} \(scipy: ")
            assert msg.endswith("copy or download it again, or save it again from MATLAB"), msg


# ---------------------------------------------------------------------------
# v5 files written by hand (the format's own layout), a piece at a time: a
# struct that decompresses to hundreds of MB is never held while it is made.
# ---------------------------------------------------------------------------


def _v5_problem(path, n, *, values=None, endian="<", compress=True):
    """A v5 file holding struct ``Problem`` whose field ``A`` is an n x n double matrix (zeros or ``values``)."""

    def pack(fmt, *args):
        return struct.pack(endian + fmt, *args)

    def element(mtype, data):  # a full 8-byte tag, the data padded to 8 bytes
        return pack("II", mtype, len(data)) + data + bytes(-len(data) % 8)

    def header(cls, dims, name):  # array flags, dimensions, name
        return element(6, pack("II", cls, 0)) + element(5, pack(f"{len(dims)}i", *dims)) + element(1, name)

    field = header(6, (n, n), b"") + pack("II", 9, 8 * n * n)  # mxDOUBLE_CLASS; miDOUBLE data follows
    body = header(2, (1, 1), b"Problem") + element(5, pack("i", 32)) + element(1, b"A".ljust(32, b"\0"))
    body += pack("II", 14, len(field) + 8 * n * n) + field
    head = pack("II", 14, len(body) + 8 * n * n) + body

    def data():
        yield head
        if values is not None:
            yield np.asarray(values, dtype=endian + "f8").tobytes(order="F")
            return
        left = 8 * n * n
        while left:
            yield bytes(min(left, 1 << 22))
            left -= min(left, 1 << 22)

    with open(path, "wb") as fh:
        fh.write(b"MATLAB 5.0 MAT-file, written by hand".ljust(116) + bytes(8) + pack("H", 0x0100)
                 + (b"IM" if endian == "<" else b"MI"))
        if not compress:
            for piece in data():
                fh.write(piece)
            return path
        tag = fh.tell()
        fh.write(bytes(8))
        z, size = zlib.compressobj(), 0
        for piece in data():
            out = z.compress(piece)
            fh.write(out)
            size += len(out)
        out = z.flush()
        fh.write(out)
        fh.seek(tag)
        fh.write(pack("II", 15, size + len(out)))
    return path


def _no_loadmat(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("scipy.io.loadmat called: the variable was not sized first")

    monkeypatch.setattr(scipy.io, "loadmat", refuse)


class TestV5Sizes:
    """scipy reads a v5 variable whole, decompressed, a struct with every field: each is sized before."""

    def test_compressed_problem_struct_refused_before_loadmat(self, tmp_path, monkeypatch):
        # 4000 x 4000 zeros: 122 MiB in a file of about 125 kB (a 12000 x 12000 one, 1.1 GB in
        # 1.1 MB, peaked at 1.4 GB before being refused).
        p = _v5_problem(tmp_path / "bomb.mat", 4000)
        assert p.stat().st_size < 200_000
        _no_loadmat(monkeypatch)
        for var in (None, "Problem.A", "Problem.title"):
            with pytest.raises(ResourceError) as info:
                load_matrix(p, var=var, max_memory=8 << 20)
            msg = str(info.value)
            assert msg.startswith(f"{p}: variable Problem (struct, ") and "\n" not in msg, msg
            assert "zlib-compressed in the file, read whole, every field) needs about 122.1 MiB" in msg
            assert "over the memory limit of 8.0 MiB; raise the limit with max_memory= if" in msg
        # Sized a piece at a time, to just past the limit (scipy's whosmat alone shows a fixed
        # 264 MiB peak to tracemalloc, untouched memory: the sizing is measured alone).
        tracemalloc.start()
        try:
            with open(p, "rb") as fh:
                sizes = _matlab._v5_sizes(fh, {"Problem"}, 8 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert sizes["Problem"][1:] == (p.stat().st_size - 136, True)
        assert peak < 4 * _matlab._PIECE, peak

    def test_big_endian_and_uncompressed_files_sized_alike(self, tmp_path, monkeypatch):
        small = _v5_problem(tmp_path / "be.mat", 4, values=NONSYM, endian=">")
        np.testing.assert_array_equal(load_matrix(small).matrix, NONSYM)  # scipy reads what was sized
        np.testing.assert_array_equal(load_matrix(_v5_problem(tmp_path / "raw.mat", 4, values=NONSYM,
                                                              compress=False)).matrix, NONSYM)
        big = _v5_problem(tmp_path / "be_big.mat", 1000, endian=">")
        plain = _v5_problem(tmp_path / "raw_big.mat", 1000, compress=False)
        _no_loadmat(monkeypatch)
        with pytest.raises(ResourceError, match=r"Problem \(struct, .* zlib-compressed .* needs about 7.6 MiB"):
            load_matrix(big, max_memory=1 << 20)
        with pytest.raises(ResourceError, match=r"Problem \(struct, read whole, every field\) needs about 7.6 MiB"):
            load_matrix(plain, max_memory=1 << 20)

    def test_cell_variable_sized_before_loadmat(self, tmp_path, monkeypatch):
        cell = np.empty((1, 1), dtype=object)
        cell[0, 0] = np.zeros((1000, 1000))
        p = tmp_path / "cell.mat"
        scipy.io.savemat(p, {"C": cell, "X": np.eye(2)}, do_compression=True)
        assert load_matrix(p).n == 2  # X is the only square numeric variable; C is not read
        _no_loadmat(monkeypatch)
        with pytest.raises(ResourceError, match=r"variable C \(cell, .* zlib-compressed in the file, read whole"):
            load_matrix(p, var="C", max_memory=1 << 20)

    def test_within_the_limit_loads_as_before(self, tmp_path):
        A = np.random.default_rng(3).random((50, 50))
        p = tmp_path / "ok.mat"
        scipy.io.savemat(p, {"Problem": {"A": A, "title": "t"}}, do_compression=True)
        np.testing.assert_array_equal(load_matrix(p, max_memory=1 << 20).matrix, A)
        v4 = tmp_path / "v4.mat"  # no compression in v4: its headers give the sizes, nothing is walked
        scipy.io.savemat(v4, {"X": NONSYM}, format="4")
        np.testing.assert_array_equal(load_matrix(v4).matrix, NONSYM)


# ---------------------------------------------------------------------------
# v7.3 (HDF5): MATLAB writes a 512-byte text header, column-major datasets,
# sparse matrices as groups (data, ir, jc) with attribute MATLAB_sparse = rows.
# ---------------------------------------------------------------------------


def _dense(f, name, X, cls="double"):
    ds = f.create_dataset(name, data=np.asarray(X).T)
    ds.attrs["MATLAB_class"] = np.bytes_(cls)
    return ds


def _sparse(f, name, A):
    A = sp.csc_matrix(A)
    g = f.create_group(name)
    g.attrs["MATLAB_class"] = np.bytes_("double")
    g.attrs["MATLAB_sparse"] = np.uint64(A.shape[0])
    g.create_dataset("data", data=A.data)
    g.create_dataset("ir", data=A.indices.astype(np.uint64))
    g.create_dataset("jc", data=A.indptr.astype(np.uint64))
    return g


def write_v73(path, build):
    with h5py.File(path, "w", userblock_size=512) as f:
        build(f)
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 .")


class TestV73:
    def test_dense_is_transposed_back(self, tmp_path):
        p = tmp_path / "d.mat"
        write_v73(p, lambda f: (_dense(f, "X", NONSYM), _dense(f, "v", np.ones((1, 4)))))
        m = load_matrix(p)
        np.testing.assert_array_equal(m.matrix, NONSYM)
        assert "v7.3" in m.notes[0]

    def test_sparse_group(self, tmp_path):
        A = sp.random(7, 7, density=0.3, random_state=np.random.default_rng(5))
        p = tmp_path / "s.mat"
        write_v73(p, lambda f: _sparse(f, "A", A))
        m = load_matrix(p)
        assert m.is_sparse
        np.testing.assert_allclose(m.to_dense(), A.toarray())

    def test_problem_struct(self, tmp_path):
        A = sp.random(5, 5, density=0.4, random_state=np.random.default_rng(6))

        def build(f):
            g = f.create_group("Problem")
            g.attrs["MATLAB_class"] = np.bytes_("struct")
            _sparse(g, "A", A)
            _dense(g, "title", np.frombuffer("abc".encode("utf-16-le"), dtype=np.uint16)[None, :], cls="char")

        p = tmp_path / "p.mat"
        write_v73(p, build)
        np.testing.assert_allclose(load_matrix(p).to_dense(), A.toarray())
        np.testing.assert_allclose(load_matrix(p, var="Problem.A").to_dense(), A.toarray())

    def test_choice_errors(self, tmp_path):
        p = tmp_path / "c.mat"
        write_v73(p, lambda f: (_dense(f, "X", np.eye(2)), _dense(f, "Y", np.eye(3)), _dense(f, "T", np.ones((2, 3)))))
        input_error(p, r"several square numeric variables: X, Y")
        assert load_matrix(p, var="Y").n == 3
        input_error(p, r"no variable 'Q'; variables: T \(2 x 3 double\), X \(2 x 2 double\), Y \(3 x 3 double\)", var="Q")
        input_error(p, r"not square \(2 x 3\)", var="T")

    def test_complex(self, tmp_path):
        z = np.zeros((2, 2), dtype=[("real", "<f8"), ("imag", "<f8")])
        p = tmp_path / "z.mat"
        write_v73(p, lambda f: _dense(f, "Z", z))
        input_error(p, "complex matrices are not supported")

    def test_char_var(self, tmp_path):
        p = tmp_path / "ch.mat"
        write_v73(p, lambda f: _dense(f, "s", np.ones((2, 2), dtype=np.uint16), cls="char"))
        input_error(p, "no square numeric variable")
        input_error(p, "not numeric", var="s")

    def test_memory(self, tmp_path):
        p = tmp_path / "m.mat"
        write_v73(p, lambda f: _dense(f, "X", np.zeros((100, 100))))
        with pytest.raises(ResourceError):
            load_matrix(p, max_memory=1000)

    @pytest.mark.parametrize("part", ["jc", "ir", "data"])
    def test_sparse_part_that_is_a_group_is_a_damaged_file(self, tmp_path, part):
        def build(f, where):
            g = _sparse(where, "A", sp.eye(3, format="csc"))
            del g[part]
            g.create_group(part)

        p = tmp_path / "g.mat"
        write_v73(p, lambda f: build(f, f))
        input_error(p, rf"sparse variable 'A': its '{part}' is a group, not a dataset, so the file is damaged")

        def problem(f):
            g = f.create_group("Problem")
            g.attrs["MATLAB_class"] = np.bytes_("struct")
            build(f, g)

        q = tmp_path / "p.mat"
        write_v73(q, problem)
        input_error(q, rf"sparse variable 'Problem.A': its '{part}' is a group, not a dataset")

    def test_corrupt_hdf5(self, tmp_path):
        p = tmp_path / "bad.mat"
        write_v73(p, lambda f: _dense(f, "X", np.eye(50)))
        data = p.read_bytes()
        p.write_bytes(data[:1200])
        input_error(p, "MATLAB|cannot")
