"""The one error definition (sfapprox.metrics): dense, and by column blocks for operators never formed."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import random_array

from sfapprox import metrics
from sfapprox._errors import InputError, ParameterError
from sfapprox.chord import default_n_factors, support_offsets
from sfapprox.metrics import frobenius_error, operator_error, scoring_bytes
from sfapprox.operators import ChordOperator, HybridOperator, SparseOperator


def _operators(n: int, rng) -> dict:
    """A surrogate of each shape of product: Chord factors, butterfly, low rank + sparse + Chord, sparse."""
    offsets = support_offsets(n, "chord")
    chord = ChordOperator(rng.standard_normal((default_n_factors(n), n, offsets.size)) / offsets.size, offsets)
    low_rank = (rng.standard_normal((n, 3)), rng.standard_normal(3), rng.standard_normal((3, n)))
    entries = random_array((n, n), density=0.05, random_state=1, format="csr")
    return {
        "chord": chord,
        "butterfly": ChordOperator(rng.standard_normal((4, 32, 2)) / 2, support="butterfly") if n == 32 else None,
        "hybrid": HybridOperator(n, chord=chord, low_rank=low_rank, sparse=entries),
        "sparse": SparseOperator(entries),
    }


@pytest.fixture
def blocked(monkeypatch):
    """The column-block path at small N: every N is "large", blocks of 7 columns (not dividing N)."""
    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 4)
    monkeypatch.setattr(metrics, "SCORING_BLOCK", 7)


@pytest.mark.parametrize("n", [32, 45])
@pytest.mark.parametrize("threads", [1, 2])
def test_blocks_give_the_dense_error(blocked, n, threads):
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, n))
    for name, op in _operators(n, rng).items():
        if op is None:
            continue
        want = frobenius_error(X, op.to_dense())
        got = operator_error(X, op, threads=threads)
        assert got[0] == pytest.approx(want[0], rel=1e-13), name
        assert got[1] == pytest.approx(want[1], rel=1e-13), name
        # ||X|| given: the relative error is taken against it, not recomputed
        assert operator_error(X, op, 2 * np.linalg.norm(X), threads=threads)[1] == pytest.approx(want[1] / 2, rel=1e-13)


@pytest.mark.parametrize("path", ["dense", "blocks"])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_best_multiple_s_sums_come_from_the_scoring_pass(monkeypatch, path, threads):
    """<X, A> and ||A||^2 beside operator_error's numbers, in its one pass (a Chord surrogate and a hybrid;
    a sparse X too): an SF fit's best multiple then needs no second pass."""
    if path == "blocks":
        monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 4)
        monkeypatch.setattr(metrics, "SCORING_BLOCK", 7)
    rng = np.random.default_rng(7)
    n = 45
    ops = _operators(n, rng)
    for X in (rng.standard_normal((n, n)), random_array((n, n), density=0.2, random_state=8, format="csr")):
        dense = X.toarray() if sp.issparse(X) else X
        for name in ("chord", "hybrid"):
            A = ops[name].to_dense()
            err, rel, inner, square = metrics.operator_error_and_multiple(X, ops[name], threads=threads)
            assert (err, rel) == pytest.approx(operator_error(X, ops[name], threads=threads), rel=1e-13), name
            assert inner == pytest.approx(float(np.vdot(dense, A)), rel=1e-12), name
            assert square == pytest.approx(float(np.vdot(A, A)), rel=1e-12), name
            given = metrics.operator_error_and_multiple(X, ops[name], 2 * np.linalg.norm(dense), threads=threads)
            assert given[1] == pytest.approx(rel / 2, rel=1e-13) and given[2:] == pytest.approx((inner, square))


@pytest.mark.parametrize("n", [32, 45])
def test_sparse_and_low_rank_parts_are_sliced_not_multiplied_by_identity_columns(blocked, monkeypatch, n):
    # S @ E cost nnz(S) per column of every block: O(nnz(S) N) over the pass (23 s for top-s at N = 8,192).
    # The blocks are column slices of S (and of Vt) instead, with the same numbers.
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, n))
    ops = _operators(n, rng)
    want = {name: operator_error(X, ops[name], threads=1) for name in ("sparse", "hybrid")}
    U, s, Vt = rng.standard_normal((n, 3)), rng.random(3), rng.standard_normal((3, n))
    lr_s = HybridOperator(n, low_rank=(U, s, Vt), sparse=ops["sparse"].matrix)
    want["lr+s"] = frobenius_error(X, lr_s.to_dense())
    for cls in (SparseOperator, HybridOperator):
        monkeypatch.setattr(cls, "_apply", lambda *a: pytest.fail("identity columns multiplied"))
    assert operator_error(X, ops["sparse"], threads=1) == want["sparse"]
    assert operator_error(X, lr_s, threads=1) == pytest.approx(want["lr+s"], rel=1e-13)
    # a hybrid with Chord factors: only the Chord part is applied to the identity's columns
    monkeypatch.undo()
    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 4)
    monkeypatch.setattr(metrics, "SCORING_BLOCK", 7)
    monkeypatch.setattr(HybridOperator, "_apply", lambda *a: pytest.fail("identity columns multiplied"))
    assert operator_error(X, ops["hybrid"], threads=1) == pytest.approx(want["hybrid"], rel=1e-13)


def test_sparse_target(blocked):
    rng = np.random.default_rng(3)
    X = random_array((40, 40), density=0.1, random_state=4, format="csr")
    op = _operators(40, rng)["chord"]
    want = frobenius_error(X.toarray(), op.to_dense())
    got = operator_error(X, op)
    assert got == pytest.approx(want, rel=1e-13)


def test_small_n_stays_dense(monkeypatch):
    # Up to DENSE_SCORING_MAX_N the surrogate is formed once (no identity blocks go through it).
    rng = np.random.default_rng(5)
    op = _operators(32, rng)["chord"]
    monkeypatch.setattr(metrics, "column_reader", lambda *a: pytest.fail("scored by blocks"))
    X = rng.standard_normal((32, 32))
    assert operator_error(X, op) == frobenius_error(X, op.to_dense())


def test_a_sparse_surrogate_of_a_sparse_target_is_scored_on_their_entries(blocked, monkeypatch):
    """Both sparse: the entries of X - S (O(nnz)), never a block of columns; the same error (a COO X with
    repeated entries too: they add up, and the caller's X is not changed)."""
    rng = np.random.default_rng(5)
    X = random_array((40, 40), density=0.1, random_state=6, format="csr")
    op = _operators(40, rng)["sparse"]
    want = frobenius_error(X.toarray(), op.to_dense())
    monkeypatch.setattr(metrics, "column_reader", None)  # a block would fail
    assert operator_error(X, op) == pytest.approx(want, rel=1e-13)
    assert operator_error(X, op, 2 * want[0] / want[1])[1] == pytest.approx(want[1] / 2, rel=1e-13)
    coo = sp.coo_array(([1.0, 2.0, 3.0], ([0, 0, 1], [0, 0, 1])), shape=(40, 40))
    empty = SparseOperator(sp.csr_array((40, 40)))
    assert operator_error(coo, empty) == pytest.approx((np.sqrt(18.0), 1.0)) and coo.nnz == 3
    assert operator_error(sp.csr_array((40, 40)), empty) == (0.0, None)


def test_zero_target_and_exact_fit(blocked):
    op = SparseOperator(sp.csr_array((20, 20)))
    assert operator_error(np.zeros((20, 20)), op) == (0.0, None)
    X = np.random.default_rng(6).standard_normal((20, 20))
    assert operator_error(X, SparseOperator(X))[0] == 0.0


def test_shape_mismatch():
    op = SparseOperator(sp.csr_array((5, 5)))
    with pytest.raises(ValueError, match="shapes differ"):
        operator_error(np.zeros((6, 6)), op)


def test_shape_mismatch_is_a_parameter_error_naming_both_shapes():
    with pytest.raises(ParameterError, match=r"\(3, 3\).*\(3, 4\)"):
        frobenius_error(np.eye(3), np.zeros((3, 4)))
    with pytest.raises(ParameterError, match=r"\(6, 6\).*\(5, 5\)"):
        operator_error(np.zeros((6, 6)), SparseOperator(sp.csr_array((5, 5))))


@pytest.mark.parametrize("dtype, x, a", [(np.int8, 100, -100), (np.uint8, 100, 200), (np.int16, 30000, -30000)])
def test_integer_inputs_do_not_wrap_around(dtype, x, a):
    # 100 - (-100) in int8 is -56: the difference is taken in float64
    X, A = np.full((3, 3), x, dtype), np.full((3, 3), a, dtype)
    err, rel = frobenius_error(X, A)
    assert err == pytest.approx(3 * abs(x - a))
    assert rel == pytest.approx(abs(x - a) / abs(x))
    assert frobenius_error(sp.csr_array(X), A)[0] == pytest.approx(3 * abs(x - a))  # sparse X too


def test_float32_target_norm_summed_in_float64():
    X = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    assert frobenius_error(X, np.zeros((64, 64))) == frobenius_error(X.astype(np.float64), np.zeros((64, 64)))


def test_bool_inputs_count_as_0_1():
    X = np.eye(3, dtype=bool)
    assert frobenius_error(X, np.zeros((3, 3), dtype=bool)) == (pytest.approx(np.sqrt(3)), 1.0)


@pytest.mark.parametrize("bad", [np.full((2, 2), "1"), np.full((2, 2), "1", dtype=object), [[None, 1.0], [1.0, 1.0]],
                                 [[1.0, 2.0], [3.0]]])
@pytest.mark.parametrize("side", ["X", "approx"])
def test_non_numbers_are_an_input_error(bad, side):
    # strings and None were numpy's TypeError from the subtraction, or read as numbers ('1' as 1, None as nan)
    args = (bad, np.eye(2)) if side == "X" else (np.eye(2), bad)
    with pytest.raises(InputError, match="numbers|cannot read"):
        frobenius_error(*args)


def test_object_array_of_numbers_is_read_as_float64():
    X = np.array([[1, 2.5], [True, 4]], dtype=object)
    assert frobenius_error(X, np.zeros((2, 2))) == frobenius_error(X.astype(float), np.zeros((2, 2)))


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_torch_tensors_requiring_grad_are_read_as_their_values(dtype):
    # a trained layer's weight as the approximation (or the target): numpy's RuntimeError on a tensor that
    # requires grad, "unsupported ScalarType" on bfloat16
    torch = pytest.importorskip("torch")
    X = np.arange(16.0).reshape(4, 4)
    T = torch.tensor(X + 1, dtype=getattr(torch, dtype), requires_grad=True)
    assert frobenius_error(X, T) == frobenius_error(X, X + 1)
    assert frobenius_error(T, X) == frobenius_error(X + 1, X)
    assert T.requires_grad


def test_a_linear_operator_target_is_formed():
    # read as a 0-d object array: "the target X is ()"
    from scipy.sparse.linalg import aslinearoperator

    X = np.arange(9.0).reshape(3, 3)
    assert frobenius_error(aslinearoperator(X), np.eye(3)) == frobenius_error(X, np.eye(3))


def test_blocked_norm_of_an_integer_target_does_not_wrap_around(blocked):
    X = np.full((20, 20), 100, np.int8)
    op = SparseOperator(sp.csr_array((20, 20)))
    assert operator_error(X, op) == (pytest.approx(2000.0), pytest.approx(1.0))


def test_nan_in_the_target_gives_nan_errors_not_none():
    # documented: no NaN check; a nan must never look like the zero matrix (None) or a small error
    X = np.eye(3)
    X[0, 0] = np.nan
    err, rel = frobenius_error(X, np.eye(3))
    assert np.isnan(err) and rel is not None and np.isnan(rel)


def test_an_infinite_entry_of_the_approximation_of_a_finite_target_is_an_infinite_relative_error():
    """The scaled path (for entries near 1.7e308) divided by an infinite largest entry: (inf, nan), where
    ||X - A|| / ||X|| is inf / finite = inf."""
    approx = np.eye(3)
    approx[1, 2] = -np.inf
    assert frobenius_error(np.eye(3), approx) == (np.inf, np.inf)
    # a finite target whose own norm is past float64: inf / inf was nan
    huge = np.full((2, 2), 1.7e308)
    assert frobenius_error(huge, approx[:2, 1:]) == (np.inf, np.inf)
    # a nan entry (or an infinite one of the target) is no infinite error: nan, as documented
    approx[0, 0] = np.nan
    err, rel = frobenius_error(huge, approx[:2, :2])
    assert np.isnan(err) and np.isnan(rel)
    huge[0, 0] = np.inf
    assert np.isnan(frobenius_error(huge, np.ones((2, 2)))[1])


def test_float64_inputs_are_not_copied():
    # the float64 difference is the only N x N array made: no cast copies of X or approx
    n = 512
    rng = np.random.default_rng(9)
    X, A = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    tracemalloc.start()
    try:
        frobenius_error(X, A)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * n * n * 8


def test_blocks_hold_columns_not_the_product(monkeypatch):
    # The blocked path never holds an N x N array: its traced peak stays within scoring_bytes's
    # workspace for one worker, far below the N^2 float64 of the formed product.
    n = 1200
    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 256)
    monkeypatch.setattr(metrics, "SCORING_BLOCK", 32)
    rng = np.random.default_rng(7)
    X = rng.standard_normal((n, n))
    op = _operators(n, rng)["chord"]
    op @ np.zeros((n, 40))  # compile/load the kernels outside the traced part
    tracemalloc.start()
    try:
        operator_error(X, op, threads=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= scoring_bytes(n, workers=1) < n * n * 8 / 8


def test_scoring_bytes():
    assert scoring_bytes(100) == 2 * 100 * 100 * 8
    assert scoring_bytes(metrics.DENSE_SCORING_MAX_N + 1, workers=2) == \
        2 * scoring_bytes(metrics.DENSE_SCORING_MAX_N + 1, workers=1)
    # above the dense path it is a few blocks of at most SCORING_BLOCK_NUMBERS each, whatever N
    for n in (4096, 16384, 65536, 1 << 20):
        assert metrics.scoring_block(n) >= 1
        assert scoring_bytes(n, workers=2) <= 2 * 4 * metrics.SCORING_BLOCK_NUMBERS * 8


def test_an_interrupt_stops_the_blocks_still_waiting(blocked, monkeypatch):
    # Ctrl-C (or SIGTERM, which sfapprox turns into it) reaches the main thread in the middle of
    # a threaded scoring: it propagates, and the blocks not yet started are cancelled, not computed.
    import _thread
    import time

    monkeypatch.setattr(metrics, "SCORING_BLOCK", 1)
    rng = np.random.default_rng(8)
    op = _operators(60, rng)["chord"]
    calls = []
    real = metrics._identity_columns  # (each block's columns of a Chord operator)

    def slow(*args):
        calls.append(1)
        if len(calls) == 3:
            _thread.interrupt_main()  # what the SIGINT handler does
        time.sleep(0.02)
        return real(*args)

    monkeypatch.setattr(metrics, "_identity_columns", slow)
    with pytest.raises(KeyboardInterrupt):
        operator_error(rng.standard_normal((60, 60)), op, threads=2)
    assert len(calls) < 30


def test_frobenius_error_takes_sparse_and_operator_approximations_and_huge_entries():
    from sfapprox import ChordOperator

    X = np.random.default_rng(0).standard_normal((8, 8))
    op = ChordOperator(np.full((3, 8, 4), 0.25))
    expected = np.linalg.norm(X - op.to_dense())
    for approx in (op, sp.csr_array(op.to_dense()), op.to_dense()):
        assert metrics.frobenius_error(X, approx)[0] == pytest.approx(expected, rel=1e-12)
    # the squares of 1e300 overflow, the norm does not
    assert metrics.frobenius_error(np.full((2, 2), 1e300), np.zeros((2, 2))) == (pytest.approx(2e300), 1.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ParameterError, match="fro_norm must be"):
            metrics.frobenius_error(X, op, fro_norm=bad)


def test_frobenius_error_of_tiny_entries_does_not_underflow():
    """Squares of 1e-300 underflow to 0: the errors were (0.0, None), the zero matrix fitted exactly; squares
    near 1e-320 are subnormals, which kept a few digits of a small residual (or none: an error of 1.6e-13
    relative read 0, "exact")."""
    X = np.array([[3.0, 0.0], [0.0, 4.0]])
    fro, rel = metrics.frobenius_error(X * 1e-300, np.zeros((2, 2)))
    assert fro == pytest.approx(5e-300, rel=1e-15) and rel == pytest.approx(1.0, rel=1e-15)
    # an accepted matrix (||X||_F^2 is 2.5e-299) and a residual of 1e-13 of it
    residual = np.array([[0.0, 3e-163], [4e-163, 0.0]])
    fro, rel = metrics.frobenius_error(X * 1e-150, X * 1e-150 - residual)
    assert fro == pytest.approx(5e-163, rel=1e-14) and rel == pytest.approx(1e-13, rel=1e-14)
    assert metrics.frobenius_error(np.zeros((2, 2)), np.zeros((2, 2))) == (0.0, None)


# --------------------------------------------------------------------------- a sparse X's errors from its non-zeros
def _sparse_target_case(n: int = 120, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = random_array((n, n), density=0.05, random_state=seed, format="csr")
    U, s, Vt = rng.standard_normal((n, 4)), rng.random(4), rng.standard_normal((4, n))
    S = random_array((n, n), density=0.02, random_state=seed + 1, format="csr")
    return X, U, s, Vt, S


@pytest.mark.parametrize("gather", [1 << 20, 7], ids=["one chunk", "chunks of 7"])
def test_sparse_target_error_equals_the_dense_error_of_every_low_rank_plus_sparse_form(monkeypatch, gather):
    from sfapprox.metrics import sparse_target_error

    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", gather)  # X's entries and the gathers a few at a time
    from sfapprox.operators import NystromOperator

    X, U, s, Vt, S = _sparse_target_case()
    n = X.shape[0]
    ops = [HybridOperator(n, low_rank=(U, s, Vt)), HybridOperator(n, low_rank=(U, s, Vt), sparse=S),
           HybridOperator(n, low_rank=(U, None, Vt)), NystromOperator(U, np.diag(s)), SparseOperator(S)]
    ops.append(ops[1].T)  # a transposed surrogate's parts are the transposed parts
    for op in ops:
        expected = frobenius_error(X.toarray(), op @ np.eye(n))
        got = sparse_target_error(X if op is not ops[0] else X.tocsc(), op)  # CSR or CSC alike
        assert got is not None
        assert got[0] == pytest.approx(expected[0], rel=1e-12) and got[1] == pytest.approx(expected[1], rel=1e-12)


def _with_empty_rows_and_columns(X, seed: int):
    """``X`` with a third of its rows and of its columns emptied (blocks of no entries, rows ``x @ R^T`` is 0)."""
    keep = np.random.default_rng(seed).random((2, X.shape[0])) > 1 / 3
    return (sp.diags_array(keep[0].astype(float)) @ X @ sp.diags_array(keep[1].astype(float))).tocsr()


@pytest.mark.parametrize("rank", [1, 3, 8])
@pytest.mark.parametrize("x_format", ["csr", "csc"])
@pytest.mark.parametrize("gather", [1 << 20, 7, 1], ids=["one block", "blocks of 7", "one row a block"])
def test_a_low_rank_plus_sparse_surrogate_of_any_rank_is_its_dense_error(monkeypatch, rank, x_format, gather):
    """``<X, L R>`` and ``<S, L R>`` by blocks of rows (of columns for a CSC ``X``): each row's entries times
    ``R^T``'s rows, dotted with the row's ``L`` (for CSC the factors' roles swap), whatever the rank, with rows
    and columns of ``X`` empty, and blocks of one row (``_GATHER_NUMBERS`` = 1: a block's ``rows x r``)."""
    from sfapprox.metrics import sparse_target_error

    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", gather)
    n = 60
    rng = np.random.default_rng(rank)
    X = _with_empty_rows_and_columns(random_array((n, n), density=0.1, random_state=rank, format="csr"), rank)
    S = random_array((n, n), density=0.05, random_state=rank + 10, format="csr")
    U, s, Vt = rng.standard_normal((n, rank)), rng.random(rank) + 0.5, rng.standard_normal((rank, n))
    with_s = HybridOperator(n, low_rank=(U, s, Vt), sparse=S)
    for op in (HybridOperator(n, low_rank=(U, s, Vt)), with_s, with_s.T):
        expected = frobenius_error(X.toarray(), op @ np.eye(n))
        got = sparse_target_error(X.asformat(x_format), op)
        assert got is not None
        assert got[0] == pytest.approx(expected[0], rel=1e-12) and got[1] == pytest.approx(expected[1], rel=1e-12)


@pytest.mark.parametrize("x_format", ["csr", "csc"])
def test_float32_factors_are_summed_in_float64(x_format):
    """An operator's factored parts may be float32 (the protocol names no dtype): ``<X, L R>`` was summed from
    float32 products of each entry's factors (7e-8 off relative here) and ``||L R||^2`` from float32 Gram
    matrices (3e-8), an error 1.5e-8 off its dense float64 value where it is now 2e-16."""
    from types import SimpleNamespace

    from sfapprox.metrics import sparse_target_error

    n = 80
    rng = np.random.default_rng(5)
    L, R = rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((3, n)).astype(np.float32)
    X = random_array((n, n), density=0.2, random_state=5, format=x_format)
    expected = frobenius_error(X.toarray(), L.astype(np.float64) @ R.astype(np.float64))
    got = sparse_target_error(X, SimpleNamespace(factored_parts=lambda: (L, R, None)))
    assert got is not None
    assert got[0] == pytest.approx(expected[0], rel=1e-12) and got[1] == pytest.approx(expected[1], rel=1e-12)


@pytest.mark.parametrize("x_format", ["csr", "csc"])
@pytest.mark.parametrize("scale", [1e-4, 1e-7])
def test_a_sparse_part_reproducing_x_leaves_the_low_rank_parts_error_uncancelled(x_format, scale):
    """RPCA's ``S`` holds (nearly) every entry of ``X``: ``||X||^2 - 2 <X, S> + ||S||^2`` summed apart were
    each about ``||X||^2`` and cancelled to round-off, ``1e-16 ||X||^2`` against an error of ``||L R||^2``
    (4e-10 off relative at scale 1e-4; below 1e-10 of ``||X||^2`` at 1e-7, left to a pass).  ``X - S`` entry
    by entry has nothing to cancel."""
    from sfapprox.metrics import sparse_target_error

    n = 70
    rng = np.random.default_rng(4)
    X = random_array((n, n), density=0.2, random_state=4, format="csr")
    S = X.copy()
    S.data[::7] += 1e-9  # (a few entries not quite X's)
    U, s, Vt = rng.standard_normal((n, 2)) * scale, np.array([1.0, 0.5]), rng.standard_normal((2, n))
    op = HybridOperator(n, low_rank=(U, s, Vt), sparse=S)
    want = np.linalg.norm((X.toarray() - S.toarray()) - (U * s) @ Vt)  # (the same subtraction X - S as scipy's)
    got = sparse_target_error(X.asformat(x_format), op)
    assert got is not None
    assert got[0] == pytest.approx(want, rel=1e-12) and got[1] == pytest.approx(want / np.linalg.norm(X.data), rel=1e-12)


def test_blocks_hold_at_most_the_budget_of_entries_and_of_rows_times_the_rank(monkeypatch):
    """A block's ``x @ R^T`` is ``rows x r``: rows of no entries would have made one block of all of them."""
    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", 12)
    X = _with_empty_rows_and_columns(random_array((90, 90), density=0.1, random_state=2, format="csr"), 2)
    S = random_array((90, 90), density=0.05, random_state=3, format="csr")
    for part, rank in ((None, 3), (S, 3), (S, 0), (None, 40)):
        blocks = list(metrics._block_pairs(X, part, rank=rank))
        assert [b[0] for b in blocks] == [0] + [b[1] for b in blocks[:-1]] and blocks[-1][1] == 90
        for start, stop, x, s in blocks:
            assert x.shape == (stop - start, 90) and (s is None) == (part is None)
            assert stop - start == 1 or ((stop - start) * max(rank, 1) <= 12
                                         and x.nnz + (0 if s is None else s.nnz) <= 12)


def test_sparse_target_error_leaves_other_forms_and_round_off_to_a_pass():
    from sfapprox.metrics import sparse_target_error

    X, U, s, Vt, S = _sparse_target_case()
    assert sparse_target_error(X, ChordOperator(np.full((2, 4, 3), 0.5))) is None  # no low-rank-plus-sparse form
    # X = U V^T exactly: the difference of its terms is round-off, not the error
    exact = HybridOperator(4, low_rank=(np.eye(4)[:, :1], np.array([2.0]), np.eye(4)[:1]))
    assert sparse_target_error(sp.csr_array(exact @ np.eye(4)), exact) is None


@pytest.mark.parametrize("gather", [1 << 20, 7], ids=["one chunk", "chunks of 7"])
def test_a_sparse_part_alone_is_scored_entry_by_entry_even_where_it_reproduces_x(monkeypatch, gather):
    """RPCA's rank-0 end keeps every non-zero of X: the general formula's difference of sums is round-off
    there (left to a pass, sampled "0 +- ?" at N = 60,025); a sparse part alone is X - S entry by entry."""
    from sfapprox.metrics import sparse_target_error

    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", gather)
    n = 40
    X = random_array((n, n), density=0.1, random_state=7, format="csr")
    empty = (np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)))
    other = random_array((n, n), density=0.05, random_state=8, format="csr")
    half = X.multiply(random_array((n, n), density=0.5, random_state=9) > 0).tocsr() * 1.5
    for S, expected in ((X.copy(), 0.0), (other, None), (half, None), (X.tocoo(), 0.0)):
        got = sparse_target_error(X, HybridOperator(n, low_rank=empty, sparse=S))
        want = np.linalg.norm(X.toarray() - S.toarray())
        assert got is not None and got[0] == pytest.approx(want, rel=1e-12, abs=0.0)
        assert expected is None or got == (0.0, 0.0)


def _awkward_sparse_pair(n: int = 50, seed: int = 3):
    """A sparse ``X`` and ``S`` with what scoring their difference must get right: ``S`` given as COO with
    repeated positions (they add up), entries of ``S`` outside ``X``'s pattern and inside it, and explicit
    zeros stored in both (one at a position both hold)."""
    rng = np.random.default_rng(seed)
    X = random_array((n, n), density=0.1, random_state=seed, format="coo")
    k = X.nnz // 2
    inside = rng.choice(X.nnz, k, replace=False)  # half of S on X's positions, half anywhere
    rows = np.r_[X.row[inside], rng.integers(0, n, k)]
    cols = np.r_[X.col[inside], rng.integers(0, n, k)]
    rows, cols = np.r_[rows, rows[:7]], np.r_[cols, cols[:7]]  # 7 positions given twice
    vals = rng.standard_normal(rows.size)
    X_zero = (np.r_[X.data, 0.0, 0.0], (np.r_[X.row, 0, 1], np.r_[X.col, n - 1, n - 2]))
    S = sp.coo_array((np.r_[vals, 0.0], (np.r_[rows, 0], np.r_[cols, n - 1])), shape=(n, n))
    return sp.coo_array(X_zero, shape=(n, n)), S


@pytest.mark.parametrize("x_format", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("gather", [1 << 20, 7, 1], ids=["one chunk", "chunks of 7", "one row a chunk"])
def test_a_sparse_part_alone_is_the_dense_difference_whatever_the_formats(monkeypatch, x_format, dtype, gather):
    from sfapprox.metrics import sparse_target_error

    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", gather)
    X, S = _awkward_sparse_pair()
    X, S = X.astype(dtype).asformat(x_format), S.astype(dtype)
    n = X.shape[0]
    want = np.linalg.norm(X.toarray().astype(np.float64) - S.toarray().astype(np.float64))
    norm = np.linalg.norm(X.toarray().astype(np.float64))
    empty = (np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)))
    op = HybridOperator(n, low_rank=empty, sparse=S)
    for surrogate, target in ((op, X), (SparseOperator(S), X), (op.T, X.T)):  # S's CSR and, transposed, CSC
        got = sparse_target_error(target, surrogate)
        assert got is not None
        assert got[0] == pytest.approx(want, rel=1e-12) and got[1] == pytest.approx(want / norm, rel=1e-12)
    # with a low-rank part too: <X, S> by the same blocks, in the general formula's sums
    rng = np.random.default_rng(1)
    hybrid = HybridOperator(n, low_rank=(rng.standard_normal((n, 2)), np.array([1.0, 0.5]),
                                         rng.standard_normal((2, n))), sparse=S)
    for surrogate, target in ((hybrid, X), (hybrid.T, X.T)):
        expected = frobenius_error(target.toarray().astype(np.float64), surrogate @ np.eye(n))
        got = sparse_target_error(target, surrogate)
        assert got is not None
        assert got[0] == pytest.approx(expected[0], rel=1e-12) and got[1] == pytest.approx(expected[1], rel=1e-12)


def _sparse_alone(X, S):
    """The errors of a sparse part ``S`` alone against ``X`` (rank-0 low-rank parts) by the entry-by-entry path."""
    n = X.shape[0]
    return metrics._parts_error(metrics._compressed(X), np.zeros((n, 0)), np.zeros((0, n)), S, None)


@pytest.mark.parametrize("gather", [1 << 20, 5])
def test_a_sparse_part_alone_held_as_given_is_scored_as_its_dense_form(monkeypatch, gather):
    """The entry-by-entry path on parts as a caller may hold them (not canonical): repeated positions and
    integer values (summed in float64), CSC against CSR and the other way round, an empty X or S."""
    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", gather)
    X, S = _awkward_sparse_pair(seed=5)
    n = X.shape[0]
    big = np.r_[np.round(S.data * 1e3), 9e18, 9e18].astype(np.int64)  # (9e18 twice at (2, 2): past int64 added)
    integers = sp.coo_array((big, (np.r_[S.row, 2, 2], np.r_[S.col, 2, 2])), shape=(n, n))
    nothing = sp.csr_array((n, n))
    for target, part in ((X, S), (X.tocsc(), S.tocsr()), (X.tocsr(), S.tocsc()), (X, integers), (nothing, S),
                         (X, nothing)):
        want = np.linalg.norm(target.toarray() - part.astype(np.float64).toarray())  # (repeats added in float64)
        norm = np.linalg.norm(target.toarray())
        err, rel = _sparse_alone(target, part)
        assert err == pytest.approx(want, rel=1e-12, abs=0.0)
        assert rel == (None if norm == 0 else pytest.approx(want / norm, rel=1e-12))


def test_a_sparse_part_alone_is_scored_in_memory_of_a_chunk_not_of_s(monkeypatch):
    """X and S canonical CSR (a loaded matrix's, the sparse method's): no copy of S nor of its positions
    (a COO copy, its flat positions and their sort were 32 bytes an entry of S: 14.8 s at 10 million)."""
    monkeypatch.setattr(metrics, "_GATHER_NUMBERS", 1000)
    n = 20_000
    rng = np.random.default_rng(11)  # (scipy's random_array took 100 s to place 200,000 entries at this N)
    X = sp.csr_array((rng.standard_normal(10 * n), (rng.integers(0, n, 10 * n), rng.integers(0, n, 10 * n))),
                     shape=(n, n))
    X.sum_duplicates()
    S = X.copy()
    S.data *= 0.5
    want = 0.5 * np.linalg.norm(X.data)
    tracemalloc.start()
    try:
        err, rel = _sparse_alone(X, S)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err == pytest.approx(want, rel=1e-12) and rel == pytest.approx(0.5, rel=1e-12)
    # beyond X and S: X's and S's row pointers added (N + 1 int64) and a few chunks' copies
    assert peak < 8 * (n + 1) + 64 * 1000 * 8 < 8 * S.nnz


def test_operator_error_of_a_large_sparse_x_takes_its_low_rank_surrogates_error_from_its_non_zeros(monkeypatch):
    # Above DENSE_SCORING_MAX_N a pass over the N^2 entries took minutes at N = 60,000: no column is made.
    X, U, s, Vt, S = _sparse_target_case()
    op = HybridOperator(X.shape[0], low_rank=(U, s, Vt), sparse=S)
    expected = frobenius_error(X.toarray(), op @ np.eye(X.shape[0]))
    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 16)
    monkeypatch.setattr(metrics, "column_reader", lambda *a: pytest.fail("a column of the surrogate was made"))
    got = metrics.operator_error(X, op)
    assert got[0] == pytest.approx(expected[0], rel=1e-12)


def test_one_worker_scores_on_one_blas_thread(blocked, monkeypatch):
    """A scoring by one worker (no second core free) runs its products on one BLAS thread, as each of
    several workers does: on the default pool beside a busy process each product waited for a
    descheduled thread (monarch+lr at N = 4,096 on 2 shared cores: 9-20 s to score)."""
    from sfapprox import _threads
    from sfapprox.operators import MonarchOperator

    monkeypatch.setattr(_threads, "runnable_others", lambda *a, **k: 64)  # every core wanted by others
    rng = np.random.default_rng(0)
    op = MonarchOperator(rng.random((4, 4, 4, 1)), rng.random((4, 1, 4, 4)), 16)
    seen = []
    product = op._product
    monkeypatch.setattr(op, "_product", lambda B: (seen.append(_threads._blas_threads()), product(B))[1])
    pool = _threads._limit_blas(2)  # a pool of two threads (the tests run under OMP_NUM_THREADS=1)
    if pool is None:
        pytest.skip("threadpoolctl cannot set the BLAS pools here")
    try:
        got = operator_error(rng.random((16, 16)), op)
        after = _threads._blas_threads()
    finally:
        pool.restore_original_limits()
    assert seen and set(seen) == {1} and after == 2
    assert got[0] > 0


def test_the_relative_error_of_entries_near_float64s_largest_is_their_ratio_not_nan():
    """||X|| and ||X - A|| of entries near 1.7e308 are past float64 (inf): their ratio was inf / inf = nan
    where it is 0.5; a non-finite entry still gives nan."""
    X = np.array([[1.7e308, -1.0e308], [0.5e308, 1.2e308]])
    err, rel = frobenius_error(X, 0.5 * X)  # ||X|| (2.4e308) is past float64, the error (1.2e308) is not
    assert err == pytest.approx(0.5 * np.sqrt(np.sum((X / 1e308) ** 2)) * 1e308) and rel == pytest.approx(0.5, rel=1e-12)
    err, rel = frobenius_error(X, -X)  # the difference itself overflows: inf, honestly, and its ratio 2
    assert err == np.inf and rel == pytest.approx(2.0, rel=1e-12)
    Y = X.copy()
    Y[0, 0] = np.inf
    assert np.isnan(frobenius_error(Y, 0.5 * X)[1])


@pytest.mark.parametrize("side", ["target", "approx"])
def test_a_masked_array_is_refused_not_scored_by_the_values_under_its_mask(side):
    X = np.arange(4.0).reshape(2, 2)
    masked = np.ma.masked_array(X, mask=[[1, 0], [0, 0]])
    args, what = ((masked, X), "the target X") if side == "target" else ((X, masked), "the approximation")
    with pytest.raises(InputError, match=rf"^{what}: a masked array with 1 masked entry; fill it first"):
        frobenius_error(*args)
    assert frobenius_error(np.ma.masked_array(X), X) == (0.0, 0.0)  # nothing masked: its values
