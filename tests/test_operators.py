import re
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse.linalg as spla

from _compat import ComplexWarning
from sfapprox import ChordOperator, ParameterError


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


# --------------------------------------------------------------------------- fast apply and exports

from functools import reduce  # noqa: E402

import scipy.sparse as sp  # noqa: E402

from sfapprox import HybridOperator  # noqa: E402
from sfapprox.chord import default_n_factors, support_offsets  # noqa: E402
from sfapprox.operators import _chord_apply as _apply  # noqa: E402

torch = pytest.importorskip("torch")


def _chord(support, n, rng, n_factors=None):
    if support == "butterfly":
        return ChordOperator(rng.standard_normal((n_factors or n.bit_length() - 1, n, 2)) / 1.5, support="butterfly")
    offsets = support_offsets(n, support)
    m = default_n_factors(n) if n_factors is None else n_factors
    return ChordOperator(rng.standard_normal((m, n, offsets.size)) / np.sqrt(offsets.size), offsets, support=support)


def _hybrid(n, rng, *, chord=True, rank=3, nnz=5):
    U = np.linalg.qr(rng.standard_normal((n, rank)))[0] if rank else np.zeros((n, 0))
    V = np.linalg.qr(rng.standard_normal((n, rank)))[0] if rank else np.zeros((n, 0))
    S = sp.csr_array((rng.standard_normal(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    return HybridOperator(n, chord=_chord("chord", n, rng) if chord else None,
                          low_rank=(U, np.arange(1.0, rank + 1), V.T), sparse=S)


OPERATORS = {
    "chord-odd": lambda rng: _chord("chord", 23, rng),
    "chord-100": lambda rng: _chord("chord", 100, rng),
    "symmetric-odd": lambda rng: _chord("symmetric", 15, rng),
    "butterfly-32": lambda rng: _chord("butterfly", 32, rng),
    "butterfly-partial": lambda rng: _chord("butterfly", 16, rng, n_factors=2),
    "hybrid": lambda rng: _hybrid(21, rng),
    "hybrid-no-chord": lambda rng: _hybrid(12, rng, chord=False),
    "hybrid-rank-0": lambda rng: _hybrid(17, rng, rank=0),
    "hybrid-no-sparse": lambda rng: _hybrid(16, rng, nnz=0),
}


@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_product_matches_dense(backend, name, dtype):
    rng = np.random.default_rng(7)
    op = OPERATORS[name](rng)
    D = op.to_dense()
    n = D.shape[0]
    x = rng.standard_normal(n).astype(dtype)
    B = rng.standard_normal((n, 4)).astype(dtype)
    tol = dict(rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(op @ x, D @ x, **tol)
    np.testing.assert_allclose(op.matvec(x), D @ x, **tol)
    np.testing.assert_allclose(op.matvec(x[:, None]), (D @ x)[:, None], **tol)
    np.testing.assert_allclose(op.rmatvec(x), D.T @ x, **tol)
    np.testing.assert_allclose(op.T @ x, D.T @ x, **tol)
    np.testing.assert_allclose(op.H @ x, D.T @ x, **tol)
    np.testing.assert_allclose(op @ B, D @ B, **tol)
    np.testing.assert_allclose(op.matmat(B), D @ B, **tol)
    np.testing.assert_allclose(op.rmatmat(B), D.T @ B, **tol)
    np.testing.assert_allclose(op.T @ B, D.T @ B, **tol)
    np.testing.assert_allclose(op.T.T @ x, D @ x, **tol)
    np.testing.assert_allclose(op.T.to_dense(), D.T)
    assert (op @ x).dtype == np.float64


@pytest.mark.parametrize("name", OPERATORS)
def test_a_read_only_operand_gives_a_product_one_can_write_to(backend, name, tmp_path):
    """A read-only operand (a .npy opened with mmap_mode="r", a frozen array) gave the compiled kernels'
    read-only result, and a hybrid adding its other parts into it raised "output array is read-only"."""
    rng = np.random.default_rng(9)
    op = OPERATORS[name](rng)
    D = op.to_dense()
    n = D.shape[0]
    np.save(tmp_path / "x.npy", rng.standard_normal(n))
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    B = rng.standard_normal((n, 8))
    B.flags.writeable = False
    for got, want in ((op @ x, D @ x), (op.T @ x, D.T @ x), (op.matvec(x[:, None]), D @ x[:, None]),
                      (op @ B, D @ B), (op.T @ B, D.T @ B)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        got += 1.0  # the caller's array, to use as it likes
    assert not x.flags.writeable and not B.flags.writeable


@pytest.mark.parametrize("name", [n for n in OPERATORS if not n.startswith("hybrid")])
def test_both_dense_paths_agree(backend, name):
    """to_dense runs the fitting kernels when torch is loaded, else the apply kernels on I."""
    op = OPERATORS[name](np.random.default_rng(18))
    np.testing.assert_allclose(op._stack.apply(np.eye(op.shape[0])), op.to_dense(), rtol=1e-10, atol=1e-12)
    hand = ChordOperator(np.random.default_rng(19).standard_normal((2, 9, 3)), np.array([2, 0, 10]))
    expected = np.eye(9)
    for m in range(2):
        W = np.zeros((9, 9))
        for k, d in enumerate([2, 0, 10]):
            W[np.arange(9), (np.arange(9) + d) % 9] += hand.values[m, :, k]
        expected = expected @ W
    np.testing.assert_allclose(hand.to_dense(), expected, rtol=1e-10)


def test_dense_is_the_product_of_the_factors():
    rng = np.random.default_rng(8)
    for op in (_chord("chord", 10, rng), _chord("symmetric", 9, rng), _chord("butterfly", 8, rng)):
        factors = op.to_sparse_factors()
        assert all(isinstance(f, sp.csr_array) and f.shape == op.shape for f in factors)
        assert len(factors) == op.n_factors
        assert sum(f.nnz for f in factors) == op.n_stored
        np.testing.assert_allclose(reduce(lambda a, b: a @ b, factors).toarray(), op.to_dense(), atol=1e-12)
    # Explicit zeros are still stored: the count does not depend on the values.
    zero = ChordOperator(np.zeros((3, 8, 4)))
    assert sum(f.nnz for f in zero.to_sparse_factors()) == zero.n_stored == 96
    assert ChordOperator(np.zeros((0, 5, 4))).to_sparse_factors() == []


def test_values_view_and_layout():
    values = np.random.default_rng(9).standard_normal((4, 12, 5))
    op = ChordOperator(values)
    assert op.values.shape == (4, 12, 5)
    np.testing.assert_array_equal(op.values, values)
    assert not np.shares_memory(op.values, values)  # a copy, in the kernels' layout
    assert op._stack.packed.flags.c_contiguous and op._stack.packed.shape == (4, 5, 12)
    with pytest.raises(ValueError, match="read-only"):
        op.values[0, 0, 0] = 1.0


@pytest.mark.parametrize("name", OPERATORS)
def test_saved_and_loaded_operator_is_the_fast_one(tmp_path, name):
    import sfapprox

    rng = np.random.default_rng(10)
    op = OPERATORS[name](rng)
    path = tmp_path / "f.h5"
    sfapprox.save_factors(path, op)
    back = sfapprox.load_factors(path).operator
    assert type(back) is type(op)
    chord = back.chord if isinstance(back, HybridOperator) else back
    if chord is not None:
        assert isinstance(chord._stack, _apply.FactorStack)
    x = rng.standard_normal(op.shape[0])
    np.testing.assert_allclose(back @ x, op @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(back.T @ x, op.T @ x, rtol=1e-12, atol=1e-12)
    assert back.n_stored == op.n_stored


# --------------------------------------------------------------------------- torch modules


@pytest.mark.parametrize("name", OPERATORS)
def test_torch_module_is_linear_with_the_operator_as_weight(name):
    rng = np.random.default_rng(11)
    op = OPERATORS[name](rng)
    layer = op.to_torch(dtype=torch.float64)
    A = torch.from_numpy(op.to_dense())
    n = op.shape[0]
    for shape in [(n,), (3, n), (2, 3, n), (1, 1, 1, n)]:
        x = torch.randn(*shape, dtype=torch.float64)
        y = layer(x)
        assert y.shape == x.shape
        torch.testing.assert_close(y, x @ A.T, rtol=1e-10, atol=1e-10)
    back = layer.to_operator()
    np.testing.assert_allclose(back.to_dense(), op.to_dense(), atol=1e-12)
    assert back.n_stored == op.n_stored


SMALL = {  # gradcheck perturbs every input: a few hundred numbers keep it to a second each
    "chord-odd": lambda rng: _chord("chord", 7, rng),
    "symmetric-odd": lambda rng: _chord("symmetric", 9, rng),
    "butterfly": lambda rng: _chord("butterfly", 8, rng),
    "hybrid": lambda rng: _hybrid(7, rng, rank=2, nnz=3),
    "hybrid-no-chord": lambda rng: _hybrid(6, rng, chord=False, rank=2, nnz=3),
}


@pytest.mark.parametrize("name", SMALL)
def test_torch_module_gradcheck(name):
    rng = np.random.default_rng(12)
    op = SMALL[name](rng)
    _gradcheck_layer(op.to_torch(dtype=torch.float64), op.shape[0])


def _gradcheck_layer(layer, n: int) -> None:
    """``layer``'s backward (to its input and every parameter) against finite differences, on a batch of 2."""
    from torch.func import functional_call

    params = {k: v.detach().clone().requires_grad_() for k, v in layer.named_parameters()}
    keys = sorted(params)
    x = torch.randn(2, n, dtype=torch.float64, requires_grad=True)

    def f(x, *values):
        return functional_call(layer, dict(zip(keys, values)), (x,))

    assert torch.autograd.gradcheck(f, (x, *(params[k] for k in keys)))


def test_torch_module_defaults_and_training():
    rng = np.random.default_rng(13)
    op = _chord("chord", 16, rng)
    layer = op.to_torch()
    assert layer.values.dtype == torch.get_default_dtype()
    assert layer.values.is_contiguous()
    assert [name for name, _ in layer.named_parameters()] == ["values"]
    # Fine-tuning moves the values: one SGD step on a least-squares target lowers the loss.
    target = torch.randn(8, 16)
    x = torch.randn(8, 16)
    opt = torch.optim.SGD(layer.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ((layer(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert not np.allclose(layer.to_operator().to_dense(), op.to_dense())
    with pytest.raises(ValueError, match="last dimension 16"):
        layer(torch.ones(3, 15))


def test_torch_module_hand_made_offsets():
    """Without a zero offset the module gathers; with 0 not first it reorders for the kernels."""
    rng = np.random.default_rng(14)
    for offsets in ([1, 2, 5], [3, 0, 1]):
        op = ChordOperator(rng.standard_normal((3, 10, 3)) / 2, np.array(offsets))
        x = torch.randn(4, 10, dtype=torch.float64)
        y = op.to_torch(dtype=torch.float64)(x)
        torch.testing.assert_close(y, x @ torch.from_numpy(op.to_dense()).T)


def test_dense_weight():
    op = _chord("symmetric", 12, np.random.default_rng(15))
    np.testing.assert_allclose(op.to_torch(dtype=torch.float64).dense_weight().detach().numpy(), op.to_dense(),
                               atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["chord-odd", "butterfly-32", "hybrid"])
def test_torch_module_on_cuda(name):
    op = OPERATORS[name](np.random.default_rng(16))
    layer = op.to_torch(dtype=torch.float64, device="cuda")
    x = torch.randn(5, op.shape[0], dtype=torch.float64, device="cuda")
    y = layer(x)
    torch.testing.assert_close(y.cpu(), x.cpu() @ torch.from_numpy(op.to_dense()).T)
    y.sum().backward()
    assert all(p.grad is not None and p.grad.is_cuda for p in layer.parameters())


# --------------------------------------------------------------------------- README round trip


def test_readme_round_trip(tmp_path, monkeypatch):
    """Fit, save, load, apply, export: the snippet proposed for README.md's Python API section."""
    monkeypatch.chdir(tmp_path)
    # --- snippet ---
    import numpy as np
    import torch

    import sfapprox

    X = np.random.default_rng(0).standard_normal((64, 64))
    sf = sfapprox.ChordSF(max_iter=100, device="cpu").fit(X)
    sfapprox.save_factors("f.h5", sf.operator_)
    op = sfapprox.load_factors("f.h5").operator       # ChordOperator: compiled O(N·K·M) apply
    y, z = op @ X[:, 0], op.T @ X[:, 0]               # also op @ B, op.rmatvec, scipy's solvers
    factors = op.to_sparse_factors()                   # [W1, ..., WM], scipy CSR; W1 @ ... @ WM == op
    layer = op.to_torch()                              # nn.Module: layer(x) == x @ A.T, values trainable
    out = layer(torch.randn(8, 64))
    # --- end ---
    A = sf.operator_.to_dense()
    np.testing.assert_allclose(y, A @ X[:, 0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(z, A.T @ X[:, 0], rtol=1e-10, atol=1e-10)
    assert sum(f.nnz for f in factors) == op.n_stored == sf.n_stored_
    assert out.shape == (8, 64) and out.dtype == torch.float32


@pytest.mark.parametrize("hybrid", [False, True])
def test_operator_algebra_still_scipy(backend, hybrid):
    rng = np.random.default_rng(17)
    op = _hybrid(12, rng) if hybrid else _chord("chord", 12, rng)
    D = op.to_dense()
    x = rng.standard_normal(12)
    np.testing.assert_allclose((op @ op) @ x, D @ D @ x, rtol=1e-10)
    np.testing.assert_allclose((op.T @ op) @ x, D.T @ D @ x, rtol=1e-10)
    np.testing.assert_allclose(op.dot(2.0) @ x, 2 * D @ x, rtol=1e-10)
    with pytest.raises(ValueError, match="[Ss]calar"):
        op @ 2.0
    with pytest.raises(ParameterError, match="12 x 12: it applies to a vector of 12 rows, got shape"):
        op @ np.ones(11)  # (scipy's own check said only "dimension mismatch")
    # scipy 1.18's dot and rdot refuse these themselves, a ValueError of their own (scipy 1.17 left them to
    # matvec's check): said the same on every scipy
    for wrong, said in ((lambda: op.dot(np.ones((11, 2))), "applies to a matrix of 12 rows, got shape 11 x 2"),
                        (lambda: np.ones(11) @ op, "applies to a vector of 12 rows, got shape 11"),
                        (lambda: np.ones((2, 11)) @ op, "applies to a matrix of 12 rows, got shape 11 x 2")):
        with pytest.raises(ParameterError, match=f"12 x 12: it {said}$"):
            wrong()
    np.testing.assert_allclose(x @ op, x @ D, rtol=1e-10)
    np.testing.assert_allclose(np.ones((2, 12)) @ op, np.ones((2, 12)) @ D, rtol=1e-10)
    # rdot called by name: scipy's own is public only from 1.18 (before: _rdot), and pyproject allows 1.12
    np.testing.assert_allclose(op.rdot(x), x @ D, rtol=1e-10)
    np.testing.assert_allclose(op.rdot(np.ones((2, 12))), np.ones((2, 12)) @ D, rtol=1e-10)
    np.testing.assert_allclose(op.T.rdot(x), x @ D.T, rtol=1e-10)
    np.testing.assert_allclose(op.rdot(op) @ x, D @ D @ x, rtol=1e-10)
    with pytest.raises(ParameterError, match="12 x 12: it applies to a vector of 12 rows, got shape 11$"):
        op.rdot(np.ones(11))
    assert op.T is op.T and op.T.T is op


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy's own, on np.matrix: a user's container
def test_a_wrong_length_is_refused_alike_for_any_array_like(tmp_path):
    # scipy 1.18's dot and rdot refuse an operand of the wrong length themselves (their own ValueError); our
    # check covered only an exact ndarray, so a list, a memmap (np.load's mmap_mode) or an np.matrix got
    # scipy's words there and ours on 1.17
    op = _chord("chord", 12, np.random.default_rng(5))
    np.save(tmp_path / "x.npy", np.ones(11))
    memmap = np.load(tmp_path / "x.npy", mmap_mode="r")
    vector, matrix = "a vector of 12 rows, got shape 11", "a matrix of 12 rows, got shape 11 x "
    for wrong, said in ((lambda: op @ ([1.0] * 11), vector),
                        (lambda: op.dot([1.0] * 11), vector), (lambda: [1.0] * 11 @ op, vector),
                        (lambda: op.rdot([1.0] * 11), vector),
                        (lambda: op @ memmap, vector), (lambda: op.dot(memmap), vector), (lambda: memmap @ op, vector),
                        (lambda: op.rdot(memmap), vector), (lambda: op.T @ memmap, vector),
                        (lambda: op @ np.asmatrix(np.ones((11, 1))), matrix + "1"),
                        (lambda: op.dot(np.asmatrix(np.ones((11, 2)))), matrix + "2"),
                        (lambda: np.asmatrix(np.ones((1, 11))) @ op, matrix + "1"),
                        (lambda: op.rdot(np.asmatrix(np.ones((3, 11)))), matrix + "3")):
        with pytest.raises(ParameterError, match=f"ChordOperator(.T)? is 12 x 12: it applies to {said}$"):
            wrong()
    D = op.to_dense()
    np.testing.assert_allclose(op @ np.asmatrix(np.ones((12, 1))), D @ np.ones((12, 1)), rtol=1e-10)
    np.testing.assert_allclose([1.0] * 12 @ op, np.ones(12) @ D, rtol=1e-10)


@pytest.mark.parametrize("support", ["chord", "butterfly"])
def test_to_dense_through_the_compiled_kernels_is_the_torch_product(support, monkeypatch):
    # Above TORCH_DENSE_MAX_N the dense product comes from the compiled apply kernels (about 6x
    # faster at N = 3000 than torch's shifted adds); both give the same matrix.
    from sfapprox.operators import chord as linop

    rng = np.random.default_rng(3)
    op = ChordOperator(rng.random((4, 16, 2)), support="butterfly") if support == "butterfly" else \
        ChordOperator(rng.random((4, 16, 5)), np.array([0, 1, 2, 4, 8]))
    small = op.to_dense()
    monkeypatch.setattr(linop, "TORCH_DENSE_MAX_N", 0)
    assert np.allclose(op.to_dense(), small, rtol=1e-13, atol=1e-13)


def test_a_new_kind_of_surrogate_is_one_class(tmp_path, monkeypatch):
    """What README's "Adding things" promises: one SurrogateOperator subclass, registered, is applied,
    exported and saved/loaded by the library with no other edit."""
    from typing import ClassVar

    import sfapprox
    from sfapprox.operators import _base

    monkeypatch.setattr(_base, "_KINDS", dict(_base._KINDS))  # the registry as it was, after the test

    @_base.register_operator
    class DiagonalOperator(_base.SurrogateOperator):
        kind: ClassVar[str] = "test-diagonal"
        description: ClassVar[str] = "A = diag(d)."

        def __init__(self, d):
            self.d = np.asarray(d, dtype=np.float64)
            super().__init__(self.d.size)

        @property
        def n_stored(self) -> int:
            return self.d.size

        def _apply(self, B, transpose):
            B = np.asarray(B, dtype=np.float64)
            return self.d * B if B.ndim == 1 else self.d[:, None] * B

        def to_arrays(self):
            return {"d": self.d}, {"n": self.d.size}

        @classmethod
        def from_arrays(cls, arrays, attrs):
            if arrays["d"].shape != (int(attrs["n"]),):
                raise ValueError("d does not have n values")
            return cls(arrays["d"])

    assert sfapprox.operators.operator_class("test-diagonal") is DiagonalOperator
    op = DiagonalOperator([1.0, 2.0, 3.0])
    x = np.array([1.0, 1.0, 2.0])
    assert (op @ x).tolist() == [1.0, 2.0, 6.0] and (op.T @ x).tolist() == [1.0, 2.0, 6.0]
    assert np.array_equal(op.to_dense(), np.diag([1.0, 2.0, 3.0]))
    path = tmp_path / "diag.h5"
    sfapprox.save_factors(path, op)
    back = sfapprox.load_factors(path)
    assert isinstance(back.operator, DiagonalOperator) and back.operator.d.tolist() == [1.0, 2.0, 3.0]
    assert back.matvec(x).tolist() == [1.0, 2.0, 6.0]


def test_low_rank_and_sparse_torch_layers_take_float64_input_as_the_chord_layer_does():
    """A TSVD or RPCA surrogate's layer (float32 parameters) on float64 input raised torch's "expected
    m1 and m2 to have the same dtype"; the Chord and SF+LR layers computed in float64."""
    import torch

    rng = np.random.default_rng(0)
    U, s, Vt = np.linalg.svd(rng.standard_normal((16, 16)))
    for op in (HybridOperator(16, low_rank=(U[:, :3], s[:3], Vt[:3])),
               HybridOperator(16, low_rank=(U[:, :2], s[:2], Vt[:2]),
                              sparse=sp.coo_array(([1.5], ([2], [5])), shape=(16, 16)))):
        layer = op.to_torch()
        x = torch.randn(4, 16, dtype=torch.float64)
        y = layer(x)
        assert y.dtype == torch.float64 and layer(x.float()).dtype == torch.float32
        assert torch.allclose(y, x @ torch.from_numpy(op.to_dense()).T, atol=1e-5)


def test_an_integer_sparse_parts_repeated_entries_are_summed_in_float():
    """A sparse part of int64 COO entries was converted to CSR, its repeats summed in int64, before it became
    float64: two entries of 6e18 wrapped to -6.4e18 (the input check's twin converts first, and got 1.2e19)."""
    coo = sp.coo_array((np.array([6 * 10**18] * 2, dtype=np.int64), ([0, 0], [1, 1])), shape=(3, 3))
    op = HybridOperator(3, sparse=coo)
    assert op.sparse.dtype == np.float64 and op.sparse.nnz == 1
    assert op.to_dense()[0, 1] == 1.2e19 and coo.nnz == 2  # the caller's array as it was


def test_the_constructor_refuses_what_no_operator_is(tmp_path):
    from sfapprox import HybridOperator, load_factors, save_factors

    bad = [(lambda: ChordOperator(np.ones((3, 8))), "must have shape"),
           (lambda: ChordOperator(np.ones((3, 8, 4)), support="foo"), "unknown support"),
           (lambda: ChordOperator(np.full((3, 8, 4), np.nan)), "finite real numbers"),
           (lambda: ChordOperator(np.ones((3, 8, 2)), offsets=np.array([1, 9])), "not distinct modulo N = 8"),
           (lambda: HybridOperator(8, sparse=sp.eye(7)), "sparse part has shape")]
    for make, message in bad:
        with pytest.raises(ParameterError, match=message):
            make()
    # offsets are kept modulo N, so that a saved operator loads back (an offset of 10 at N = 9 did not)
    op = ChordOperator(np.random.default_rng(0).standard_normal((2, 9, 3)), np.array([2, 0, 10]))
    assert op.offsets.tolist() == [2, 0, 1]
    save_factors(tmp_path / "f.h5", op)
    np.testing.assert_array_equal(load_factors(tmp_path / "f.h5").operator.to_dense(), op.to_dense())


def test_torch_round_trip_keeps_a_products_count():
    """NMF's W H is stored without singular values (2 N r); its torch module's to_operator() counted
    r (2 N + 1) and went over the budget the fit kept (594 -> 603 at N = 33)."""
    from sfapprox import NMF

    est = NMF(budget=600, time_limit=2).fit(np.random.default_rng(0).random((33, 33)))
    layer = est.operator_.to_torch(dtype=torch.float64)
    assert "s" not in dict(layer.named_parameters())  # ones, not trained
    back = layer.to_operator()
    assert back.n_stored == est.operator_.n_stored == est.n_stored_ <= 600
    np.testing.assert_allclose(back.to_dense(), est.operator_.to_dense(), atol=1e-12)


def _every_kind():
    """One operator of every kind a method fits (a 16 x 16 matrix), by name."""
    import sfapprox
    from sfapprox.operators import NystromOperator, PaddedButterflyOperator, SparseOperator

    rng = np.random.default_rng(3)
    X = rng.standard_normal((16, 16))
    return {
        "sparse": SparseOperator(sp.random(6, 6, density=0.4, format="csr", random_state=0)),
        "nystrom": NystromOperator(rng.standard_normal((6, 2)), np.eye(2)),
        "padded-butterfly": PaddedButterflyOperator(rng.standard_normal((2, 4, 2)), 3),
        "monarch": sfapprox.Monarch(budget=200).fit(X).operator_,
        "monarch+lr": sfapprox.compare(X, "monarch+lr", budget=200, time_limit=1).results[0].operator,
        "chord": ChordOperator(rng.standard_normal((3, 6, 4))),
        "hybrid": HybridOperator(6, chord=ChordOperator(rng.standard_normal((3, 6, 4))),
                                 sparse=sp.random(6, 6, density=0.3, format="csr", random_state=1)),
    }


def test_array_names_are_the_saved_arrays_names_for_every_kind():
    """A reader learns the datasets a kind holds from array_names() (to_arrays copied a hybrid's sparse
    part for their names alone): the same names, in the same order, for every kind and its variants."""
    from sfapprox.operators import MonarchLowRankOperator, operator_kinds

    rng = np.random.default_rng(5)
    ops = _every_kind()
    lr = ops["monarch+lr"]
    ops["monarch+lr without monarch"] = MonarchLowRankOperator(lr.shape[0], U=lr.U, s=lr.s, Vt=lr.Vt)
    ops["hybrid without chord"] = HybridOperator(6, low_rank=(rng.standard_normal((6, 2)), np.ones(2),
                                                              rng.standard_normal((2, 6))))
    assert {type(op) for op in ops.values()} >= set(operator_kinds().values())  # none left out
    for name, op in ops.items():
        assert op.array_names() == tuple(op.to_arrays()[0]), name


def test_complex_operands_keep_their_imaginary_part_and_3d_ones_are_refused():
    """Five kinds read a complex operand as float64 (numpy's ComplexWarning, once) and dropped its
    imaginary part; a 3-D operand got scipy's ValueError with the array in its message."""
    warnings.simplefilter("error", ComplexWarning)  # (pytest restores the filters after the test)
    rng = np.random.default_rng(4)
    for name, op in _every_kind().items():
        n = op.shape[0]
        D = op.to_dense()
        x = rng.standard_normal((n, 3)) + 1j * rng.standard_normal((n, 3))
        for got, want in ((op @ x, D @ x), (op.T @ x, D.T @ x), (op.matvec(x[:, 0]), D @ x[:, 0]),
                          (op.rmatmat(x), D.T @ x), (x.T @ op, x.T @ D)):
            np.testing.assert_allclose(got, want, atol=1e-12, err_msg=name)
        with pytest.raises(ParameterError, match=f"is {n} x {n}: it applies to a vector or a matrix"):
            op @ np.ones((n, 2, 2))


@pytest.mark.parametrize("support, k", [("chord", 4), ("butterfly", 2)])
@pytest.mark.parametrize("layer", ["float32", "float64"])
@pytest.mark.parametrize("given", ["float32", "float64", "int64"])
def test_the_chord_layer_computes_in_the_promoted_dtype_forward_and_backward(support, k, layer, given):
    """A float32 input to a float64 layer crashed in backward (offset supports), came back float32 from
    the butterfly, and an integer input crashed the butterfly's forward."""
    import torch

    layer_dtype, dtype = getattr(torch, layer), getattr(torch, given)
    L = ChordOperator(np.random.default_rng(0).standard_normal((3, 8, k)), support=support).to_torch(dtype=layer_dtype)
    x = torch.arange(16, dtype=dtype).reshape(2, 8)
    y = L(x)
    y.sum().backward()
    assert y.dtype == torch.promote_types(dtype, layer_dtype) and L.values.grad.dtype == layer_dtype
    want = x.double() @ torch.as_tensor(L.to_operator().to_dense()).T
    assert torch.allclose(y.double(), want, rtol=1e-4, atol=1e-4)


def test_torch_layers_check_their_dtype_device_and_input():
    """torch's AssertionError ("Torch not compiled with CUDA enabled"), TypeError and RuntimeError came
    out of to_torch; a 0-d input was an IndexError."""
    import torch

    from sfapprox import DeviceError

    op = ChordOperator(np.full((3, 8, 4), 0.25))
    hybrid = HybridOperator(8, chord=op, low_rank=(np.ones((8, 1)), np.ones(1), np.ones((1, 8))))
    for made in (op, hybrid):
        for dtype in (torch.int64, "int", "no-such", 5):
            with pytest.raises(ParameterError, match="must be a floating-point torch dtype"):
                made.to_torch(dtype=dtype)
        with pytest.raises(ParameterError, match="unknown device"):
            made.to_torch(device="tpu")
        if not torch.cuda.is_available():
            with pytest.raises(DeviceError, match="no CUDA GPU"):
                made.to_torch(device="cuda")
        layer = made.to_torch(dtype="float64", device=torch.device("cpu"))
        assert all(p.dtype == torch.float64 for p in layer.parameters())
        for bad in (torch.tensor(1.0), np.ones(8)):
            with pytest.raises(ParameterError, match="last dimension 8"):
                layer(bad)


def test_torch_layers_take_every_device_torch_knows():
    """'cpu:0' and 'meta' were refused as unknown (only auto, cpu and cuda[:N] were taken)."""
    op = ChordOperator(np.full((3, 8, 4), 0.25))
    assert op.to_torch(device="cpu:0").values.device.type == "cpu"
    assert op.to_torch(device=torch.device("cpu", 0)).values.device.type == "cpu"
    assert op.to_torch(device="meta").values.device.type == "meta"


def test_operands_that_are_not_numbers_are_refused_by_every_kind():
    """Strings and dates were read as numbers by the Chord, sparse, Monarch and butterfly kinds
    (``'1.0'`` as 1, a date as its days since 1970) and gave numpy's or scipy's TypeError in the hybrids
    (TSVD, RPCA, NMF, sf+lr); an object array of numbers came back from a hybrid as an object array."""
    for name, op in _every_kind().items():
        n = op.shape[0]
        D = op.to_dense()
        for bad in (np.array(["1.0"] * n), np.array(["2020-01-01"] * n, dtype="datetime64[D]"), ["a"] * n):
            with pytest.raises(ParameterError, match="applies to numbers"):
                op @ bad
        with pytest.raises(ParameterError, match="None"):
            op.T @ np.array([None] * n, dtype=object)
        got = op @ np.ones(n, dtype=object)
        assert got.dtype == np.float64, name
        np.testing.assert_allclose(got, D @ np.ones(n), atol=1e-12, err_msg=name)


def test_torch_and_sparse_operands_are_read_by_every_kind():
    """A tensor that requires grad was numpy's RuntimeError, a bfloat16 one its "unsupported ScalarType"
    TypeError, a scipy sparse block scipy's "Unable to multiply a LinearOperator with a sparse matrix"."""
    for name, op in _every_kind().items():
        n = op.shape[0]
        D = op.to_dense()
        B = np.arange(2.0 * n).reshape(n, 2) / n
        grad = torch.tensor(B, requires_grad=True)
        half = torch.tensor(B).to(torch.bfloat16)
        for product, want in ((op.__matmul__, D @ B), (op.dot, D @ B), (op.matmat, D @ B), (op.rmatmat, D.T @ B),
                              (op.T.__matmul__, D.T @ B)):
            np.testing.assert_allclose(product(grad), want, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(product(sp.csr_array(B)), want, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(product(half), product(half.double().numpy()), atol=1e-12, err_msg=name)
        np.testing.assert_allclose(op.matvec(grad[:, 0]), D @ B[:, 0], atol=1e-12, err_msg=name)
        np.testing.assert_allclose(op.rmatvec(grad[:, 0]), D.T @ B[:, 0], atol=1e-12, err_msg=name)
        assert grad.requires_grad


def test_a_transpose_is_named_by_its_operator_in_messages():
    op = ChordOperator(np.full((3, 8, 4), 0.25))
    with pytest.raises(ParameterError, match=r"^ChordOperator\.T is 8 x 8"):
        op.T @ np.ones(5)


def test_a_hybrid_keeps_one_entry_per_position_so_its_file_reads_back(tmp_path):
    # A sparse part with a repeated position was counted twice and saved as a file load_factors refused as
    # damaged ("sparse entries repeat a position").
    from sfapprox import load_factors, save_factors

    S = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([1, 1, 2]), np.array([0, 2, 3, 3, 3])), shape=(4, 4))
    op = HybridOperator(4, sparse=S)
    assert op.n_stored == 2 and op.to_dense()[0, 1] == 3.0
    assert S.nnz == 3  # the caller's array is left as it was
    save_factors(tmp_path / "h.h5", op)
    back = load_factors(tmp_path / "h.h5").operator
    assert back.n_stored == 2 and np.array_equal(back.to_dense(), op.to_dense())


def test_a_saved_hybrid_gives_the_same_products_to_the_last_bit(tmp_path):
    # RPCA's and NMF's U came Fortran-ordered and a sparse part may have unsorted columns; the loaded copy
    # (C order, sorted) took other BLAS and CSR paths, and its products differed in the last bits.
    from sfapprox import load_factors, save_factors

    rng = np.random.default_rng(3)
    n, r = 64, 5
    U, Vt = np.asfortranarray(rng.standard_normal((n, r))), np.asfortranarray(rng.standard_normal((r, n)))
    S = sp.random(n, n, density=0.2, random_state=4, format="csr")
    flip = np.concatenate([np.arange(a, b)[::-1] for a, b in zip(S.indptr[:-1], S.indptr[1:])])
    S = sp.csr_array((S.data[flip], S.indices[flip], S.indptr), shape=(n, n))  # each row's columns descending
    for op in (HybridOperator(n, low_rank=(U, rng.standard_normal(r), Vt), sparse=S),
               HybridOperator(n, low_rank=(np.abs(U), None, np.abs(Vt)))):
        save_factors(tmp_path / "h.h5", op)
        back = load_factors(tmp_path / "h.h5").operator
        B = rng.standard_normal((n, 7))
        for product in (lambda o: o @ B[:, 0], lambda o: o @ B, lambda o: o.T @ B[:, 0], lambda o: o.T @ B):
            assert np.array_equal(product(back), product(op))


def test_the_repr_says_the_structure_and_the_storage_of_every_kind():
    """scipy's repr, ``<64x64 ChordOperator with dtype=float64>``, said neither what a surrogate holds nor
    what it stores: what a notebook shows of ``c.result("sf").operator``."""
    said = {name: repr(op) for name, op in _every_kind().items()}
    for name, op in _every_kind().items():
        n = op.shape[0]
        assert said[name].startswith(f"<{type(op).__name__} {n} x {n}: "), said[name]
        assert f"stores {op.n_stored:,} numbers" in said[name] and "\n" not in said[name], said[name]
        assert repr(op.T).startswith(f"<{type(op).__name__}.T {n} x {n}: "), name
    assert "3 factors, chord support, K = 4 values a row" in said["chord"]
    assert "6 x 6: 14 entries (CSR)" in said["sparse"]
    assert "C core Cᵀ of rank 2" in said["nystrom"]
    assert "2 butterfly factors of order N' = 4, cropped" in said["padded-butterfly"]
    assert said["hybrid"].count(" + ") == 1 and "Chord factors (3 factors" in said["hybrid"]
    assert "block rank 1, blocks b1 = 2, b2 = 9, padded to N' = 18" in said["monarch"]
    assert said["monarch+lr"].count(" + ") == 1 and "Monarch (block rank 1" in said["monarch+lr"]
    assert repr(ChordOperator(np.full((2, 8, 2), 0.5), support="butterfly")) == \
        "<ChordOperator 8 x 8: 2 butterfly factors; stores 32 numbers (50% of N²)>"


def test_applying_one_vector_allocates_a_few_vectors_never_the_matrix():
    """Every kind applies in what it stores: at N = 4,096 one product (or its transpose) allocates a few
    N-long vectors (measured: 1 to 7), against the N² = 4,096 vectors a formed matrix would take."""
    import tracemalloc

    from sfapprox.operators import (MonarchLowRankOperator, MonarchOperator, NystromOperator,
                                    PaddedButterflyOperator, SparseOperator)

    n, rng = 4096, np.random.default_rng(0)
    U, s, Vt = rng.standard_normal((n, 8)), rng.random(8), rng.standard_normal((8, n))
    S = sp.csr_array((rng.standard_normal(2000), (rng.integers(0, n, 2000), rng.integers(0, n, 2000))), shape=(n, n))
    blocks = dict(left=rng.standard_normal((64, 64, 64, 1)), right=rng.standard_normal((64, 1, 64, 64)))
    ops = {
        "chord": _chord("chord", n, rng, n_factors=3),
        "butterfly": _chord("butterfly", n, rng),
        "hybrid": HybridOperator(n, chord=_chord("symmetric", n, rng, n_factors=2), low_rank=(U, s, Vt), sparse=S),
        "sparse": SparseOperator(S),
        "nystrom": NystromOperator(U, np.eye(8)),
        "monarch": MonarchOperator(blocks["left"], blocks["right"], n - 5),
        "monarch+lr": MonarchLowRankOperator(n - 5, **blocks, U=U[5:], s=s, Vt=Vt[:, 5:]),
        "padded-butterfly": PaddedButterflyOperator(rng.standard_normal((13, 2 * n, 2)), n - 3),
    }
    for name, op in ops.items():
        x = rng.standard_normal(op.shape[0])
        for product in (lambda: op @ x, lambda: op.T @ x):
            product()  # compiled kernels loaded, a transpose's CSR made: what every later product reuses
            tracemalloc.start()
            try:
                product()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 10 * 8 * op.shape[0], (name, peak)


def _hybrids_without_factors(n=6):
    """What tsvd, rsvd, rpca and nmf return: hybrids with no Chord part (low rank, low rank + sparse, W H)."""
    rng = np.random.default_rng(6)
    U, Vt = rng.standard_normal((n, 2)), rng.standard_normal((2, n))
    S = sp.random(n, n, density=0.3, format="csr", random_state=2)
    return {"tsvd": HybridOperator(n, low_rank=(U, np.ones(2), Vt)),
            "rpca": HybridOperator(n, low_rank=(U, np.ones(2), Vt), sparse=S),
            "nmf": HybridOperator(n, low_rank=(np.abs(U), None, np.abs(Vt))),
            "sparse only": HybridOperator(n, sparse=S)}


def test_a_longdouble_operand_gives_float64_for_every_kind():
    """Hybrids with no Chord part (tsvd, rsvd, rpca, nmf) returned float128 (complex256) and computed
    without BLAS, where every other kind returned float64 (complex128)."""
    for name, op in {**_every_kind(), **_hybrids_without_factors()}.items():
        n = op.shape[0]
        D = op.to_dense()
        x = np.linspace(-1, 1, 2 * n, dtype=np.longdouble).reshape(n, 2)
        for got, want in ((op @ x[:, 0], D @ x[:, 0]), (op @ x, D @ x), (op.T @ x[:, 0], D.T @ x[:, 0]),
                          (op.rmatmat(x), D.T @ x)):
            assert got.dtype == np.float64, name
            np.testing.assert_allclose(got, want.astype(np.float64), atol=1e-12, err_msg=name)
        assert (op @ x.astype(np.clongdouble)).dtype == np.complex128, name


def test_a_0d_operand_is_refused_naming_the_shape_by_every_kind():
    """``op @ np.ones(())`` got scipy's ValueError ("expected 1-d or 2-d array or matrix, got array(1.)"),
    which named neither the operator nor the shape it takes."""
    for name, op in {**_every_kind(), **_hybrids_without_factors()}.items():
        n = op.shape[0]
        for product in (op.__matmul__, op.dot, op.T.__matmul__, op.matvec, op.matmat):
            with pytest.raises(ParameterError, match=rf"is {n} x {n}: it applies to .* of {n} rows, got a scalar"):
                product(np.ones(()))
    # a Python scalar: scipy's own rule (a ValueError, "use '*' instead"), now naming the operator and the product
    with pytest.raises(ValueError, match=r"op @ x takes a vector .* got 2.0 \(float\); a scalar, which scales by \*: op \* 2.0$"):
        op @ 2.0


@pytest.mark.parametrize("operand, said", [(None, r"None \(NoneType\)$"), ("abc", r"'abc' \(str\)$"),
                                           (3, r"3 \(int\); a scalar, which scales by \*: op \* 3$"),
                                           (np.float64(2), r"np.float64\(2.0\) \(float64\); a scalar, which scales by \*: "
                                                           r"op \* 2.0$"),
                                           (np.complex64(1 + 2j), r"np.complex64\(1\+2j\) \(complex64\); a scalar, which scales by \*: op \* \(1\+2j\)$"),
                                           (Fraction(1, 3), r"Fraction\(1, 3\) \(Fraction\); a scalar, which scales by \*: op \* Fraction\(1, 3\)$")])
def test_an_operand_of_at_that_is_no_array_is_one_error_naming_the_operator(operand, said):
    """``op @ None`` and ``op @ "abc"`` got scipy's raw ValueError ("expected 1-d or 2-d array or matrix, got
    array(None, dtype=object)", "Scalar operands are not allowed"), naming neither the operator nor the operand."""
    for name, op in {**_every_kind(), **_hybrids_without_factors()}.items():
        n = op.shape[0]
        # x @ op: x's columns meet the operator's rows (it said "a matrix of N rows" there too)
        for product, words, side in ((lambda: op @ operand, "op @ x", "rows"), (lambda: operand @ op, "x @ op", "columns"),
                                     (lambda: op.T @ operand, "op @ x", "rows")):
            with pytest.raises(ParameterError, match=rf"is {n:,} x {n:,}: {re.escape(words)} takes a vector or a matrix "
                                                     rf"of {n:,} {side}, or an operator, got {said}") as info:
                product()
            assert "\n" not in str(info.value), name


# --------------------------------------------------------------------------- exports of the other kinds
def _other_kinds(n):
    """One operator of each kind whose exports were missing, at order n: padded (Monarch, butterfly) when n
    is not their inner order, not padded at n = 64 (Monarch 8 x 8, butterfly of order 64)."""
    from sfapprox.operators import (MonarchLowRankOperator, MonarchOperator, NystromOperator,
                                    PaddedButterflyOperator, SparseOperator)

    rng = np.random.default_rng(n)
    blocks = dict(left=rng.standard_normal((8, 8, 8, 2)) / 4, right=rng.standard_normal((8, 2, 8, 8)) / 4)
    return {
        "sparse": SparseOperator(sp.random(n, n, density=0.1, format="csr", random_state=n)),
        "nystrom": NystromOperator(rng.standard_normal((n, 4)), rng.standard_normal((4, 4))),
        "monarch": MonarchOperator(blocks["left"], blocks["right"], n),
        "monarch+lr": MonarchLowRankOperator(n, **blocks, U=rng.standard_normal((n, 3)), s=rng.random(3),
                                             Vt=rng.standard_normal((3, n))),
        "monarch+lr, low rank alone": MonarchLowRankOperator(n, U=rng.standard_normal((n, 2)), s=rng.random(2),
                                                             Vt=rng.standard_normal((2, n))),
        "padded-butterfly": PaddedButterflyOperator(rng.standard_normal((6, 64, 2)) / 1.4, n),
        "padded-butterfly of order 128": PaddedButterflyOperator(rng.standard_normal((7, 128, 2)) / 1.4, n),
    }


@pytest.mark.parametrize("n", [60, 64])
def test_every_other_kind_has_a_torch_layer_that_applies_it_and_passes_gradients(n):
    """Nyström, sparse, Monarch, Monarch + low rank and the padded butterfly had no to_torch (their error
    suggested to_dense(): an N x N weight to use them in torch)."""
    for name, op in _other_kinds(n).items():
        D = torch.from_numpy(op.to_dense())
        layer = op.to_torch(dtype=torch.float64)
        x = torch.randn(3, 2, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n), requires_grad=True)
        y = layer(x)
        torch.testing.assert_close(y, x @ D.T, rtol=1e-10, atol=1e-10, msg=name)
        w = torch.randn(3, 2, n, dtype=torch.float64)
        (y * w).sum().backward()
        torch.testing.assert_close(x.grad, w @ D, rtol=1e-10, atol=1e-10, msg=name)  # d(w . x A^T)/dx = w A
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters()), name
        # The parameters are the surrogate's values: the layer goes back to the same operator, and its
        # dense weight is the matrix.
        back = layer.to_operator()
        assert type(back) is type(op) and np.array_equal(back.to_dense(), op.to_dense()), name
        torch.testing.assert_close(layer.dense_weight().detach(), D, rtol=1e-10, atol=1e-10, msg=name)
        assert sum(p.numel() for p in layer.parameters()) <= op.n_stored, name


def test_the_other_kinds_layers_take_their_dtype_device_and_check_their_input():
    """As the Chord and hybrid layers: the promoted dtype forward and backward, the parameters' dtype and
    device checked, a wrong input refused with the project's error."""
    for name, op in _other_kinds(60).items():
        for layer_dtype in (torch.float32, torch.float64):
            layer = op.to_torch(dtype=layer_dtype)
            for given in (torch.float32, torch.float64, torch.int64):
                y = layer(torch.arange(120, dtype=given).reshape(2, 60) / (1 if given == torch.int64 else 60))
                y.sum().backward()
                assert y.dtype == torch.promote_types(given, layer_dtype), name
                assert all(p.dtype == p.grad.dtype == layer_dtype for p in layer.parameters()), name
        for bad in (torch.tensor(1.0), torch.ones(61), np.ones(60)):
            with pytest.raises(ParameterError, match="last dimension 60"):
                layer(bad)
        with pytest.raises(ParameterError, match="must be a floating-point torch dtype"):
            op.to_torch(dtype=torch.int64)
        assert all(p.device.type == "meta" for p in op.to_torch(device="meta").parameters()), name


# --------------------------------------------------------------------------- the transpose's torch module
def _every_kind_at(n):
    """One operator of every kind at order n: Chord factors of each support (the butterfly at n = 64; hand-
    made offsets without a zero, applied by a gather, and with 0 not first), hybrids with and without
    factors, and the other kinds."""
    rng = np.random.default_rng(n + 1)
    ops = {"chord": _chord("chord", n, rng), "symmetric": _chord("symmetric", n, rng),
           "offsets without 0": ChordOperator(rng.standard_normal((3, n, 3)) / 2, np.array([1, 2, 5])),
           "offsets with 0 not first": ChordOperator(rng.standard_normal((3, n, 3)) / 2, np.array([3, 0, 1])),
           "hybrid": _hybrid(n, rng), **{f"hybrid ({k})": op for k, op in _hybrids_without_factors(n).items()},
           **_other_kinds(n)}
    if n & (n - 1) == 0:
        ops["butterfly"] = _chord("butterfly", n, rng)
    return ops


@pytest.mark.parametrize("n", [60, 64])
def test_the_transpose_of_every_kind_has_a_torch_module_applying_it_with_gradients(n):
    """op.T.to_torch() raised "the transpose (.T) of a ... has no torch export yet" for every kind: a
    model needing x @ A (a tied decoder, an adjoint) had only op.to_dense()'s N x N weight."""
    for name, op in _every_kind_at(n).items():
        D = torch.from_numpy(op.to_dense())
        layer = op.T.to_torch(dtype=torch.float64)
        x = torch.randn(3, 2, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n), requires_grad=True)
        y = layer(x)
        torch.testing.assert_close(y, x @ D, rtol=1e-10, atol=1e-10, msg=name)
        w = torch.randn(3, 2, n, dtype=torch.float64)
        (y * w).sum().backward()
        torch.testing.assert_close(x.grad, w @ D.T, rtol=1e-10, atol=1e-10, msg=name)  # d(w . x A)/dx = w A^T
        # The parameters' gradients are those of x @ A through the forward's own dense weight (another
        # path: each factor's transposed kernel and value gradient checked against it).
        got = {k: p.grad.clone() for k, p in layer.named_parameters() if p.grad is not None}
        layer.zero_grad()
        (x.detach() @ layer.transposed().dense_weight() * w).sum().backward()
        assert got.keys() == {k for k, p in layer.named_parameters() if p.numel()}, name
        for k, p in layer.named_parameters():
            if p.numel():
                torch.testing.assert_close(got[k], p.grad, rtol=1e-9, atol=1e-9, msg=f"{name}: {k}")
        # The same numbers as the surrogate's own module, held once: its stored numbers at most.
        assert sum(p.numel() for p in layer.parameters()) <= op.n_stored, name
        torch.testing.assert_close(layer.dense_weight().detach(), D.T, rtol=1e-10, atol=1e-10, msg=name)
        np.testing.assert_array_equal(layer.to_operator().to_dense(), op.T.to_dense(), err_msg=name)


def _padded_butterfly(rng):
    from sfapprox.operators import PaddedButterflyOperator

    return PaddedButterflyOperator(rng.standard_normal((2, 4, 2)), 3)


SMALL_T = {**SMALL, "padded-butterfly": _padded_butterfly,
           "offsets without 0": lambda rng: ChordOperator(rng.standard_normal((2, 7, 3)) / 2, np.array([1, 2, 5]))}


@pytest.mark.parametrize("name", SMALL_T)
def test_the_transposed_module_gradcheck(name):
    """The transposed factors' backward (the forward's value gradient with its operands swapped) against
    finite differences."""
    op = SMALL_T[name](np.random.default_rng(12))
    _gradcheck_layer(op.T.to_torch(dtype=torch.float64), op.shape[0])


def test_a_layers_transpose_shares_its_parameters_and_takes_dtype_device_and_input_as_it():
    """layer.transposed() holds the layer's own parameters (training one trains both); op.T.to_torch()
    copies the operator's values as op.to_torch() does, and takes the same dtype, device and input."""
    from sfapprox.operators._torch import TransposedLinear

    op = _chord("chord", 16, np.random.default_rng(16))
    layer = op.to_torch(dtype=torch.float64)
    t = layer.transposed()
    assert isinstance(t, TransposedLinear) and t.transposed() is layer
    assert [p for p in t.parameters()] == [layer.values]
    torch.optim.SGD(t.parameters(), lr=0.1).zero_grad()
    t(torch.ones(2, 16, dtype=torch.float64)).square().sum().backward()
    before = layer(torch.eye(16, dtype=torch.float64)).detach()
    torch.optim.SGD(t.parameters(), lr=0.1).step()
    assert not torch.equal(layer(torch.eye(16, dtype=torch.float64)), before)  # the forward moved too
    assert np.array_equal(op.values, _chord("chord", 16, np.random.default_rng(16)).values)  # a copy trained
    for name, made in {**_every_kind_at(60)}.items():
        t = made.T.to_torch(dtype=torch.float32)
        y = t(torch.ones(2, 60, dtype=torch.float64))
        assert y.dtype == torch.float64 and all(p.dtype == torch.float32 for p in t.parameters()), name
        with pytest.raises(ParameterError, match="last dimension 60"):
            t(torch.ones(61))
        assert all(p.device.type == "meta" for p in made.T.to_torch(device="meta").parameters()), name
    with pytest.raises(ParameterError, match="wraps one of sfapprox's torch layers"):
        TransposedLinear(torch.nn.Linear(3, 3))


def test_a_transposed_module_s_state_dict_loads_into_the_plain_one_and_back():
    """op.T.to_torch() and layer.transposed() wrote their keys under "layer." ("layer.values"): a checkpoint of
    A's module did not load into A.T's of the same structure, nor back.  The keys are the plain layer's; the
    parameters stay shared, a state dict of the old keys still loads, and a missing key is named as saved."""
    for name, op in _every_kind_at(16).items():
        plain, transposed = op.to_torch(dtype=torch.float64), op.T.to_torch(dtype=torch.float64)
        assert list(transposed.state_dict()) == list(plain.state_dict()), name
        with torch.no_grad():
            for p in transposed.parameters():
                p.mul_(2)  # other numbers of the same structure
        plain.load_state_dict(transposed.state_dict())  # A.T's checkpoint into A's module
        torch.testing.assert_close(plain.dense_weight(), transposed.dense_weight().T, msg=name)
        with torch.no_grad():
            for p in plain.parameters():
                p.mul_(3)
        transposed.load_state_dict(plain.state_dict())  # and back
        torch.testing.assert_close(transposed.dense_weight(), plain.dense_weight().T, msg=name)
        shared = plain.transposed()
        assert list(shared.state_dict()) == list(plain.state_dict()), name
        assert all(a is b for a, b in zip(shared.state_dict(keep_vars=True).values(),
                                          plain.state_dict(keep_vars=True).values())), name
        # within a model, under the model's own prefix; the old "layer." keys still load
        model = torch.nn.Sequential(torch.nn.Identity(), transposed)
        assert list(model.state_dict()) == [f"1.{k}" for k in plain.state_dict()], name
        scaled = {k: 5 * v if v.is_floating_point() else v for k, v in plain.state_dict().items()}
        model.load_state_dict({f"1.layer.{k}": v for k, v in scaled.items()})
        plain.load_state_dict(scaled)
        torch.testing.assert_close(transposed.dense_weight(), plain.dense_weight().T, msg=name)
    layer = _chord("chord", 16, np.random.default_rng(16)).T.to_torch(dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "values"'):
        layer.load_state_dict({k: v for k, v in layer.state_dict().items() if k != "values"})


def test_the_hybrid_module_has_a_dense_weight_as_the_others():
    """HybridLinear had no dense_weight() (AttributeError), where every other module has one."""
    for name, op in {"hybrid": _hybrid(12, np.random.default_rng(17)), **_hybrids_without_factors()}.items():
        layer = op.to_torch(dtype=torch.float64)
        W = layer.dense_weight()
        torch.testing.assert_close(W.detach(), torch.from_numpy(op.to_dense()), rtol=1e-12, atol=1e-12, msg=name)
        W.sum().backward()  # differentiable, as the others'
        assert all(p.grad is not None for p in layer.parameters() if p.numel()), name


@pytest.mark.parametrize("n", [60, 64])
def test_monarch_and_the_padded_butterfly_export_their_sparse_factors(n):
    """Both are products of sparse factors but had no to_sparse_factors (ParameterError: "not a product of
    sparse factors"); estimator.to_scipy() raised for them too."""
    for name, op in _other_kinds(n).items():
        if not name.startswith(("monarch", "padded")) or "+lr" in name:
            continue
        factors = op.to_sparse_factors()
        assert all(isinstance(f, sp.csr_array) for f in factors), name
        assert factors[0].shape[0] == factors[-1].shape[1] == n, name
        np.testing.assert_allclose(reduce(lambda a, b: a @ b, factors).toarray(), op.to_dense(), atol=1e-12,
                                   err_msg=name)
        x = np.random.default_rng(n).standard_normal(n)
        np.testing.assert_allclose(reduce(lambda v, f: f @ v, factors[::-1], x), op @ x, atol=1e-12, err_msg=name)
        # One stored entry per value kept: all of them unpadded, fewer (the rows and columns cropped) padded.
        stored = sum(f.nnz for f in factors)
        assert stored == op.n_stored if n == 64 and "128" not in name else stored < op.n_stored, name


def test_a_monarch_of_block_rank_one_exports_square_factors_with_explicit_zeros():
    from sfapprox.operators import MonarchOperator

    left = np.zeros((3, 2, 2, 1))
    left[0, 0, 0, 0] = 2.0
    op = MonarchOperator(left, np.ones((2, 1, 3, 3)), 6)
    Lf, Rf = op.to_sparse_factors()
    assert Lf.shape == Rf.shape == (6, 6) and Lf.nnz + Rf.nnz == op.n_stored
    np.testing.assert_array_equal((Lf @ Rf).toarray(), op.to_dense())


def test_estimators_of_monarch_and_the_hierarchical_butterfly_give_their_factors_to_scipy():
    import sfapprox
    from sfapprox.baselines.butterfly_hier import HierarchicalButterfly

    X = np.random.default_rng(0).standard_normal((12, 12))
    for est in (sfapprox.Monarch(budget=120).fit(X), HierarchicalButterfly(budget=200).fit(X)):
        assert type(est.operator_).__name__ in ("MonarchOperator", "PaddedButterflyOperator")
        W = est.to_scipy()
        np.testing.assert_allclose(reduce(lambda a, b: a @ b, W).toarray(), est.to_dense(), atol=1e-12)


@pytest.mark.parametrize("kind", ["monarch+lr", "hybrid"])
@pytest.mark.parametrize("transposed", [False, True])
def test_a_zero_surrogate_s_torch_layer_passes_a_zero_gradient_to_its_input(kind, transposed):
    """A surrogate with no parts (the zero matrix) gave an output without a gradient path: ``backward()``
    raised torch's "element 0 of tensors does not require grad" where the gradient is zero."""
    torch = pytest.importorskip("torch")
    from sfapprox.operators import HybridOperator, MonarchLowRankOperator

    op = MonarchLowRankOperator(6) if kind == "monarch+lr" else HybridOperator(6)
    layer = (op.T if transposed else op).to_torch()
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    y.sum().backward()
    assert not y.detach().any() and x.grad is not None and not x.grad.any()
    inf = torch.tensor([float("inf"), 1.0, float("nan"), 0.0, 0.0, 0.0], dtype=torch.float64)
    assert not layer(inf).any()  # 0, as op @ x gives (z * 0 alone gave NaN for inf and NaN)


def test_a_transposed_product_of_sparse_factors_gives_its_factors_transposed_in_reverse():
    """``op.T.to_sparse_factors()`` said "a _Transposed is not a product of sparse factors" (a private
    class's name) of Monarch's transpose, which is one: the factors transposed, in reverse order."""
    from sfapprox import TruncatedSVD
    from sfapprox._errors import ParameterError
    from sfapprox.operators import MonarchOperator

    rng = np.random.default_rng(0)
    op = MonarchOperator(rng.random((3, 2, 2, 2)), rng.random((2, 2, 3, 3)), 5)
    factors = op.T.to_sparse_factors()
    product = factors[0]
    for factor in factors[1:]:
        product = product @ factor
    np.testing.assert_allclose(product.toarray(), op.to_dense().T, rtol=1e-12, atol=1e-12)
    low_rank = TruncatedSVD(n_components=1).fit(rng.random((6, 6))).operator_
    with pytest.raises(ParameterError, match=r"^a HybridOperator\.T is not a product of sparse factors"):
        low_rank.T.to_sparse_factors()


def test_one_offset_or_factor_is_said_in_the_singular():
    """"1 offsets for 2 values per row", "1 factors, chord support, K = 1 values a row": counted."""
    with pytest.raises(ParameterError, match=r"^1 offset for 2 values per row$"):
        ChordOperator(np.ones((1, 4, 2)), offsets=[0])
    assert "4 x 4: 1 factor, chord support, K = 1 value a row;" in repr(ChordOperator(np.ones((1, 4, 1)), offsets=[0]))


def test_a_damaged_parts_message_writes_the_shapes_as_every_message_does():
    """A saved fit's parts of the wrong shape reached users as tuples (``(3, 4)``, ``(2,)``), where every other
    message writes ``3 x 4``; a scalar is "a scalar", not "shape ()".  The expected layouts stay symbolic."""
    from sfapprox.operators import HybridOperator, MonarchLowRankOperator, MonarchOperator, NystromOperator

    rng = np.random.default_rng(0)
    U, s, Vt = rng.random((4, 2)), np.ones(2), rng.random((2, 4))
    arrays, attrs = HybridOperator(4, low_rank=(U, s, Vt)).to_arrays()
    bad = [
        (lambda: HybridOperator(8, sparse=sp.eye(7)), "sparse part has shape 7 x 7, expected 8 x 8"),
        (lambda: HybridOperator(8, chord=ChordOperator(np.full((1, 4, 2), 0.5), np.array([0, 1]))),
         "Chord part has shape 4 x 4, expected 8 x 8"),
        (lambda: HybridOperator(4, low_rank=(U, np.ones(3), Vt)),
         "low-rank part shapes (U 4 x 2; s 3; Vt 2 x 4) do not match N=4"),
        (lambda: HybridOperator.from_arrays({**arrays, "lr_Vt": rng.random((2, 5))}, attrs),
         "low-rank part shapes (U 4 x 2; s 2; Vt 2 x 5) do not make a rank-2 square matrix"),
        (lambda: ChordOperator(np.float64(3)), "values must have shape (M, N, K), N and K at least 1, got a scalar"),
        (lambda: ChordOperator(np.ones((1, 8, 3)), support="butterfly"),
         "butterfly values must have shape (M, 8, 2) with 1 <= M <= log2 N = 3, got shape 1 x 8 x 3"),
        (lambda: ChordOperator.from_arrays({"values": np.ones((8, 3)), "offsets": np.zeros(3)}, {}),
         "values must be (M, n, K) and offsets one-dimensional, got values: shape 8 x 3; offsets: shape 3"),
        (lambda: MonarchOperator(np.ones((2, 2, 2)), np.ones((2, 1, 2, 2)), 4),
         "left and right must be 4-way arrays, got left: shape 2 x 2 x 2; right: shape 2 x 1 x 2 x 2"),
        (lambda: MonarchOperator(np.ones((2, 2, 2, 1)), np.ones((2, 1, 2, 3)), 4),
         "left must be (b2, b1, b1, r) and right (b1, r, b2, b2), got left: shape 2 x 2 x 2 x 1; "
         "right: shape 2 x 1 x 2 x 3"),
        (lambda: MonarchLowRankOperator(4, U=U, s=s, Vt=rng.random((2, 5))),
         "U of shape 4 x 2, 2 singular values and Vt of shape 2 x 5 do not make a rank-2 4 x 4 matrix"),
        (lambda: NystromOperator(np.ones((4, 2)), np.ones((3, 3))),
         "C must be (n, r) and core (r, r), got C: shape 4 x 2; core: shape 3 x 3"),
    ]
    for make, message in bad:
        with pytest.raises(ParameterError) as info:
            make()
        assert str(info.value) == message


def test_an_n_by_1_column_is_taken_by_matvec_without_scipy_s_2d_path(monkeypatch):
    """scipy 1.18 warns (FutureWarning) when matvec or rmatvec is given an (N, 1) column, and 1.20 refuses
    it: the column is passed on as its vector, and the result given back as a column, as scipy documents."""
    from scipy.sparse.linalg import LinearOperator

    from sfapprox.operators import SparseOperator

    for name in ("matvec", "rmatvec"):
        scipys = getattr(LinearOperator, name)

        def refusing(self, x, scipys=scipys):  # scipy 1.20's behaviour
            if np.ndim(x) != 1:
                raise ValueError("expected a 1-D operand")
            return scipys(self, x)

        monkeypatch.setattr(LinearOperator, name, refusing)
    M = np.arange(9.0).reshape(3, 3)
    op = SparseOperator(sp.csr_array(M))
    column = np.array([[1.0], [2.0], [3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(op.matvec(column), M @ column)
        np.testing.assert_array_equal(op.rmatvec(column), M.T @ column)
        np.testing.assert_array_equal(op.T.matvec(column), M.T @ column)
        assert op.matvec(column[:, 0]).shape == (3,)
