import numpy as np
import pytest
import scipy.sparse.linalg as spla

from sfapprox import ChordOperator


@pytest.fixture
def op():
    rng = np.random.default_rng(0)
    return ChordOperator(rng.standard_normal((5, 24, 6)))


def test_matvec_rmatvec_matmat_match_dense(op):
    D = op.to_dense()
    x = np.random.default_rng(1).standard_normal(24)
    B = np.random.default_rng(2).standard_normal((24, 3))
    assert np.allclose(op.matvec(x), D @ x)
    assert np.allclose(op.rmatvec(x), D.T @ x)
    assert np.allclose(op.matmat(B), D @ B)
    assert np.allclose(op @ B, D @ B)
    assert np.allclose(op.T @ x, D.T @ x)
    assert np.allclose(op.H.matmat(B), D.T @ B)
    assert op.n_stored == 5 * 24 * 6


def test_works_with_scipy_solvers(op):
    # A LinearOperator: usable by iterative solvers without forming the matrix.
    sym = op.T @ op
    vals = spla.eigsh(sym, k=2, return_eigenvectors=False)
    dense_vals = np.linalg.eigvalsh(op.to_dense().T @ op.to_dense())[-2:]
    assert np.allclose(np.sort(vals), dense_vals)


def test_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        ChordOperator(np.ones((3, 4)))
    with pytest.raises(ValueError, match="offsets"):
        ChordOperator(np.ones((3, 8, 4)), offsets=np.array([0, 1]))
