"""Tests for the MATLAB reader: v5 (scipy.io.savemat) and v7.3 (HDF5 in MATLAB's layout)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sfapprox._errors import InputError, ResourceError
from sfapprox.io import load_matrix


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

    def test_problem_dense_field_and_dotted_var(self, tmp_path):
        p = tmp_path / "d.mat"
        scipy.io.savemat(p, {"Problem": {"A": NONSYM, "B": np.eye(4)}, "W": np.eye(2)})
        input_error(p, r"several square numeric variables: W, Problem.A")
        np.testing.assert_array_equal(load_matrix(p, var="Problem.A").matrix, NONSYM)
        np.testing.assert_array_equal(load_matrix(p, var="Problem.B").matrix, np.eye(4))
        assert load_matrix(p, var="W").n == 2
        input_error(p, r"struct 'Problem' has no field 'C'; fields: A, B", var="Problem.C")

    def test_no_square_variable_lists_variables(self, tmp_path):
        p = tmp_path / "n.mat"
        scipy.io.savemat(p, {"T": np.ones((3, 5)), "name": "abc"})
        msg = input_error(p, "no square numeric variable; variables: T \\(3 x 5 double\\)")
        assert "var=" in msg and "name" in msg

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

    def test_corrupt_hdf5(self, tmp_path):
        p = tmp_path / "bad.mat"
        write_v73(p, lambda f: _dense(f, "X", np.eye(50)))
        data = p.read_bytes()
        p.write_bytes(data[:1200])
        input_error(p, "MATLAB|cannot")
