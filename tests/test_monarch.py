import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse import random_array

from sfapprox import BudgetError, ConvergenceWarning, ParameterError
from sfapprox._base import RunContext, get_method
from sfapprox.baselines import monarch as mod
from sfapprox.baselines.monarch import (
    Monarch,
    MonarchOperator,
    monarch_configs_for_budget,
    monarch_count,
    monarch_min_budget,
    monarch_project,
    monarch_project_sparse,
    monarch_shapes,
)


def transpose_permutation(b1: int, b2: int) -> np.ndarray:
    """``P^T`` of Dao et al.: view x as a b1 x b2 array, transpose it, flatten."""
    n = b1 * b2
    Pt = np.zeros((n, n))
    for k in range(b1):
        for l in range(b2):
            Pt[l * b1 + k, k * b2 + l] = 1.0
    return Pt


def monarch_by_definition(Ls, Rs) -> np.ndarray:
    """``M = P L P^T R`` from the blocks, built with dense permutation and block-diagonal matrices."""
    b1, b2 = Ls[0].shape[0], Rs[0].shape[0]
    Pt = transpose_permutation(b1, b2)
    return Pt.T @ sla.block_diag(*Ls) @ Pt @ sla.block_diag(*Rs)


def random_blocks(b1, b2, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((b1, b1)) for _ in range(b2)], [rng.standard_normal((b2, b2)) for _ in range(b1)]


@pytest.mark.parametrize("b1, b2", [(4, 4), (8, 8), (3, 5), (6, 2)])
def test_a_monarch_product_is_recovered(b1, b2):
    Ls, Rs = random_blocks(b1, b2, seed=b1 * 10 + b2)
    M = monarch_by_definition(Ls, Rs)
    m = Monarch(rank=1, left_block=b1, right_block=b2).fit(M)
    assert np.linalg.norm(m.to_dense() - M) <= 1e-10 * np.linalg.norm(M)
    assert m.n_stored_ == monarch_count(b1 * b2, b1, b2) == b1 * b2 * (b1 + b2)
    assert m.stop_reason_ == "exact" and m.params_["exact"]
    # With only a budget, the grid finds it too (the square shape first when there is one).
    auto = Monarch(budget=m.n_stored_).fit(M)
    assert np.linalg.norm(auto.to_dense() - M) <= 1e-10 * np.linalg.norm(M)


def test_operator_layout_matches_the_definition():
    b1, b2 = 3, 5
    Ls, Rs = random_blocks(b1, b2, seed=1)
    left = np.stack(Ls)[..., None]  # left[q, a, k, 0] = L_q[a, k]
    right = np.stack(Rs)[:, None]  # right[k, 0, q, l] = R_k[q, l]
    op = MonarchOperator(left, right, b1 * b2)
    M = monarch_by_definition(Ls, Rs)
    assert np.allclose(op.to_dense(), M)
    # The docstring's numpy recipe.
    recipe = np.einsum("qakt,ktql->aqkl", left, right).reshape(b1 * b2, b1 * b2)
    assert np.allclose(recipe, M)
    B = np.random.default_rng(2).standard_normal((15, 4))
    assert np.allclose(op.matmat(B), M @ B) and np.allclose(op.rmatmat(B), M.T @ B)
    assert np.allclose(op.matvec(B[:, 0]), M @ B[:, 0]) and np.allclose(op.rmatvec(B[:, 1]), M.T @ B[:, 1])
    assert op.n_stored == left.size + right.size == 15 * 8


def _slab_svd_error(X, b1, b2, r):
    """The error of the best block-rank-r approximation, slab by slab with explicit loops."""
    total = 0.0
    for q in range(b2):
        for k in range(b1):
            S = np.array([[X[a * b2 + q, k * b2 + l] for l in range(b2)] for a in range(b1)])
            s = np.linalg.svd(S, compute_uv=False)
            total += np.sum(s[r:] ** 2)
    return np.sqrt(total)


@pytest.mark.parametrize("b1, b2, r", [(4, 4, 1), (3, 4, 1), (4, 6, 2), (5, 5, 5)])
def test_projection_is_the_per_slab_svd(b1, b2, r):
    X = np.random.default_rng(3).standard_normal((b1 * b2, b1 * b2))
    m = Monarch(rank=r, left_block=b1, right_block=b2).fit(X)
    assert np.linalg.norm(X - m.to_dense()) == pytest.approx(_slab_svd_error(X, b1, b2, r), rel=1e-10, abs=1e-10)
    assert m.n_stored_ == r * b1 * b2 * (b1 + b2)


def test_no_perturbation_of_the_projection_does_better():
    b1, b2 = 4, 4
    X = np.random.default_rng(4).standard_normal((16, 16))
    left, right = monarch_project(X, b1, b2)
    best = np.linalg.norm(X - MonarchOperator(left, right, 16).to_dense())
    rng = np.random.default_rng(5)
    for scale in (1e-4, 1e-2, 1e-1, 1.0):
        for _ in range(50):
            dl = scale * rng.standard_normal(left.shape)
            dr = scale * rng.standard_normal(right.shape)
            err = np.linalg.norm(X - MonarchOperator(left + dl, right + dr, 16).to_dense())
            assert err >= best - 1e-12
    # Nor does any other Monarch matrix built from random blocks.
    for _ in range(50):
        Ls, Rs = random_blocks(b1, b2, seed=int(rng.integers(1 << 30)))
        assert np.linalg.norm(X - monarch_by_definition(Ls, Rs)) >= best


def test_block_rank_errors_fall_and_full_rank_is_exact():
    X = np.random.default_rng(6).standard_normal((16, 16))
    errors = [np.linalg.norm(X - Monarch(rank=r, left_block=4, right_block=4).fit(X).to_dense()) for r in (1, 2, 3, 4)]
    assert errors[0] > errors[1] > errors[2] > errors[3] and errors[3] < 1e-10
    with pytest.raises(ParameterError, match="above min"):
        Monarch(rank=5, left_block=4, right_block=4).fit(X)


def test_kronecker_products_and_walsh_hadamard_are_monarch():
    H = np.array([[1.0, 1.0], [1.0, -1.0]])
    W = H
    for _ in range(5):
        W = np.kron(W, H)  # 64 x 64
    m = Monarch(budget=monarch_count(64, 8, 8)).fit(W)
    assert m.params_["left_block"] == 8 and m.params_["rank"] == 1
    assert np.linalg.norm(m.to_dense() - W) <= 1e-10 * np.linalg.norm(W)


def test_padding_for_any_n():
    X = np.random.default_rng(7).standard_normal((10, 10))
    m = Monarch(rank=1, left_block=3, right_block=4).fit(X)
    assert m.operator_.shape == (10, 10) and m.params_["padded_n"] == 12 and "padded" in m.params_["note"]
    assert m.n_stored_ == 12 * 7
    # The crop of the padded fit is never worse than the padded projection's error.
    assert np.linalg.norm(X - m.to_dense()) <= _slab_svd_error(np.pad(X, (0, 2)), 3, 4, 1) + 1e-12
    x = np.arange(10.0)
    assert np.allclose(m.operator_.matvec(x), m.to_dense() @ x)
    assert np.allclose(m.operator_.rmatvec(x), m.to_dense().T @ x)
    with pytest.raises(ParameterError, match="do not cover"):
        Monarch(rank=1, left_block=3, right_block=3).fit(X)
    with pytest.raises(ParameterError, match="both"):
        Monarch(rank=1, left_block=3).fit(X)
    # Prime N: the grid pads and stays within the budget.
    P = np.random.default_rng(8).standard_normal((37, 37))
    g = Monarch(budget=3000).fit(P)
    assert g.n_stored_ <= 3000 and g.params_["padded_n"] >= 37


def test_budget_grid_accounting():
    n = 36
    assert monarch_min_budget(n) == min(monarch_count(n, a, b) for a, b in monarch_shapes(n)) == 432
    for budget in (432, 1000, 1512, 3024):
        configs = monarch_configs_for_budget(n, budget)
        assert configs and all(c.count <= budget and c.rank <= min(c.left_block, c.right_block) for c in configs)
        assert all(monarch_count(n, c.left_block, c.right_block, c.rank + 1) > budget
                   or c.rank == min(c.left_block, c.right_block) for c in configs)
    X = np.random.default_rng(9).standard_normal((n, n))
    m = Monarch(budget=1512).fit(X)
    grid = m.params_["grid"]
    assert m.n_stored_ <= 1512 and len(grid) == m.params_["shapes_tried"] == m.params_["shapes"]
    assert np.linalg.norm(X - m.to_dense()) == pytest.approx(min(g["fro_error"] for g in grid))
    with pytest.raises(BudgetError, match=r"below the smallest fit .*\(a Monarch matrix of block rank 1: 432 "):
        Monarch(budget=431).fit(X)
    with pytest.raises(BudgetError):
        Monarch(rank=1, left_block=6, right_block=6, budget=431).fit(X)
    with pytest.raises(ParameterError, match="rank or a budget"):
        Monarch().fit(X)
    spec = get_method("monarch")
    assert spec.min_budget(n, RunContext()) == 432


def test_a_refused_rank_is_named_not_a_budget_never_given():
    """Monarch(rank=32) on a 32 x 32 matrix said "budget None is below the smallest Monarch matrix"."""
    X = np.random.default_rng(3).random((32, 32))
    with pytest.raises(BudgetError, match=r"^block rank 32 is above min\(b1, b2\) of every Monarch shape of a "
                                          r"32 x 32 matrix \(6 at most.*choose a rank of at most 6$"):
        Monarch(rank=32).fit(X)
    assert Monarch(rank=6).fit(X).params_["rank"] == 6
    with pytest.raises(BudgetError, match=r"^budget 100 is below every Monarch matrix of block rank 2 of a 32 x 32 "
                                          r"matrix \(the smallest stores 768 numbers\); raise the budget"):
        Monarch(rank=2, budget=100).fit(X)
    for refused in (Monarch(rank=32), Monarch(rank=2, budget=100), Monarch(budget=100)):
        with pytest.raises(BudgetError) as info:
            refused.fit(X)
        assert "None" not in str(info.value)


def _same_fit(a: Monarch, b: Monarch) -> None:
    """``a`` and ``b`` chose one shape and reproduce one matrix (their grids' errors within round-off)."""
    assert np.allclose(a.to_dense(), b.to_dense(), atol=1e-12)
    assert {k: v for k, v in a.params_.items() if k not in ("grid", "from")} == \
        {k: v for k, v in b.params_.items() if k not in ("grid", "from")}
    assert [(g["blocks"], g["rank"]) for g in a.params_["grid"]] == [(g["blocks"], g["rank"]) for g in b.params_["grid"]]
    assert np.allclose([g["fro_error"] for g in a.params_["grid"]], [g["fro_error"] for g in b.params_["grid"]],
                       rtol=1e-10, atol=1e-12)


def test_sparse_input_gives_the_dense_fit():
    X = random_array((20, 20), density=0.2, random_state=10, format="csr")
    a = Monarch(budget=2000).fit(X)
    b = Monarch(budget=2000).fit(X.toarray())
    _same_fit(a, b)
    # every shape reproduces X here: the fewest numbers win (round-off chose among them before)
    assert a.params_["exact"] and a.n_stored_ == min(g["count"] for g in a.params_["grid"]) == 480
    assert a.params_["from"] == "non-zeros" and "from" not in b.params_


@pytest.mark.parametrize("n, density, rank", [(37, 0.05, None), (50, 0.3, 2), (64, 0.004, 1)])
def test_sparse_projection_is_the_dense_one_from_the_non_zeros(n, density, rank):
    X = random_array((n, n), density=density, random_state=n, format="coo")
    X = sp.coo_array((np.r_[X.data - 0.5, [0.25]], (np.r_[X.row, [3]], np.r_[X.col, [4]])), shape=(n, n))  # a duplicate
    dense = X.toarray()
    budget = 6 * n * 8
    a = Monarch(rank=rank, budget=budget).fit(X)
    b = Monarch(rank=rank, budget=budget).fit(dense)
    _same_fit(a, b)
    assert np.isclose(a.fro_error_, np.linalg.norm(dense - a.to_dense()), rtol=1e-12, atol=1e-13)
    assert np.isclose(a.rel_error_, a.fro_error_ / np.linalg.norm(dense))


def test_sparse_projection_never_forms_the_matrix(monkeypatch):
    X = random_array((400, 400), density=0.002, random_state=3, format="csc")
    monkeypatch.setattr(sp.csc_array, "toarray", lambda self, *a, **k: pytest.fail("formed"))
    left, right, err, norm = monarch_project_sparse(X, 20, 20, 1)
    assert norm == pytest.approx(np.linalg.norm(X.data))
    assert left.shape == (20, 20, 20, 1) and right.shape == (20, 1, 20, 20)


def test_time_limit_keeps_the_first_shape():
    X = np.random.default_rng(11).standard_normal((36, 36))
    with pytest.warns(ConvergenceWarning, match="block shapes within time_limit"):
        m = Monarch(budget=3000, time_limit=0).fit(X)
    assert m.stop_reason_ == "time_limit" and m.params_["shapes_tried"] == 1 < m.params_["shapes"]


def test_ctrl_c_keeps_the_best_shape_or_propagates(monkeypatch):
    X = np.random.default_rng(12).standard_normal((36, 36))
    real = mod.monarch_project_within
    calls = []

    def interrupted_at(k):
        def project(*args, **kwargs):
            calls.append(1)
            if len(calls) == k:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return project

    monkeypatch.setattr(mod, "monarch_project_within", interrupted_at(3))
    m = Monarch(budget=3000, time_limit=None).fit(X)
    assert m.stop_reason_ == "interrupted" and m.params_["shapes_tried"] == 2
    calls.clear()
    monkeypatch.setattr(mod, "monarch_project_within", interrupted_at(1))
    with pytest.raises(KeyboardInterrupt):
        Monarch(budget=3000).fit(X)


@pytest.mark.parametrize("change, match", [
    (lambda a, t: a.pop("left"), "missing"),
    (lambda a, t: a.update(right=a["right"][:, :, :1]), "must be"),
    (lambda a, t: a.update(left=a["left"][..., 0]), "4-way"),
    (lambda a, t: t.update(n=17), "between"),
    (lambda a, t: a["left"].__setitem__((0, 0, 0, 0), np.inf), "finite"),
])
def test_from_arrays_round_trip_and_refusals(change, match):
    X = np.random.default_rng(13).standard_normal((14, 14))
    op = Monarch(rank=2, left_block=4, right_block=4).fit(X).operator_
    arrays, attrs = op.to_arrays()
    back = MonarchOperator.from_arrays(arrays, attrs)
    assert np.array_equal(back.to_dense(), op.to_dense()) and back.n_stored == op.n_stored
    assert MonarchOperator.kind == "monarch"
    arrays = {k: v.copy() for k, v in arrays.items()}
    change(arrays, attrs)
    with pytest.raises(ValueError, match=match):  # load_factors makes it an InputError naming the file
        MonarchOperator.from_arrays(arrays, attrs)


def test_a_shape_runs_only_when_its_expected_projection_fits(fake_clock, monkeypatch):
    # Each projection "takes" 10 s on the fake clock; the next one is expected to cost about as much
    # (projection_seconds), so with a 25 s limit the third shape is not started.
    real = mod.monarch_project_within

    def slow(*args, **kwargs):
        out = real(*args, **kwargs)  # whole, then "it took" 10 s
        fake_clock.advance(10.0)
        return out

    monkeypatch.setattr(mod, "monarch_project_within", slow)
    X = np.random.default_rng(11).standard_normal((36, 36))
    with pytest.warns(ConvergenceWarning, match="block shapes within time_limit"):
        m = Monarch(budget=3000, time_limit=25.0).fit(X)
    assert m.stop_reason_ == "time_limit" and m.params_["shapes_tried"] == 2 and fake_clock.time == 20.0
    a, b = mod.MonarchShape(6, 6, 1, 0), mod.MonarchShape(6, 7, 2, 0)
    assert mod.projection_seconds(a, a, 3.0) == 3.0
    assert mod.projection_seconds(b, a, 3.0) == pytest.approx(3.0 * 42**2 * 8 / (36**2 * 7))


@pytest.mark.parametrize("n", [50, 64])
def test_from_columns_the_same_projection(n):
    """One pass over a source's columns per shape gives the in-memory Monarch matrix (padded or not)."""
    from sfapprox.baselines.monarch import monarch_project_columns
    from sfapprox.sources import ArraySource

    X = np.random.default_rng(n).random((n, n))
    streamed = Monarch(budget=2000, time_limit=None).fit(ArraySource(X))
    in_memory = Monarch(budget=2000, time_limit=None).fit(X)
    assert streamed.params_["from"] == "columns" and np.allclose(streamed.to_dense(), in_memory.to_dense())
    left, right, err, norm = monarch_project_columns(ArraySource(X), 8, 8, 2)
    assert norm == pytest.approx(np.linalg.norm(X)) and err >= np.linalg.norm(
        X - MonarchOperator(left, right, n).to_dense()) - 1e-9  # the padded error bounds the cropped one


def test_alone_a_sparse_matrix_is_projected_from_its_non_zeros_within_its_limit():
    """``Monarch(max_memory=...)`` alone projects a sparse X from its non-zeros (it formed X for its
    projections, or read its column blocks where they were over its limit: the same fit), and refuses
    before any work where what it keeps is over the limit."""
    import scipy.sparse as sp

    from sfapprox import Monarch, ResourceError
    from sfapprox._base import get_method, method_need

    n = 300
    X = sp.random(n, n, density=0.02, random_state=0, format="csr")
    limit = method_need(get_method("monarch"), n) - 1
    alone = Monarch(budget=30_000, max_memory=limit).fit(X)
    free = Monarch(budget=30_000).fit(X)
    assert alone.params_["from"] == free.params_["from"] == "non-zeros"
    assert alone.n_stored_ == free.n_stored_ <= 30_000
    assert alone.frobenius_error(X)[0] == pytest.approx(free.frobenius_error(X)[0], rel=1e-9)
    with pytest.raises(ResourceError, match="memory limit"):
        Monarch(budget=30_000, max_memory=1 << 16).fit(X)


def test_among_exact_shapes_the_fewest_stored_numbers_win():
    """The shape grid kept the first (squarest) shape on a tie: a zero or constant 16 x 16 matrix stored 256
    numbers (blocks 4 x 4, rank 2) where blocks 2 x 8 at rank 1 reproduce it with 160."""
    for X in (np.zeros((16, 16)), np.ones((16, 16))):
        m = Monarch(budget=256).fit(X)
        exact = [g["count"] for g in m.params_["grid"] if g["fro_error"] <= 1e-12 * max(np.linalg.norm(X), 1e-300)]
        assert m.n_stored_ == m.operator_.n_stored == min(exact) == 160
        assert np.linalg.norm(X - m.to_dense()) <= 1e-12 * max(np.linalg.norm(X), 1.0)


def test_on_an_executor_a_sparse_source_is_still_projected_from_its_non_zeros():
    """A comparison with an executor wraps its source (DistributedSource), which hid the sparse matrix:
    Monarch read dense column blocks on the workers (27 s a shape at N = 20,000)."""
    from concurrent.futures import ThreadPoolExecutor

    from sfapprox.sources import DistributedSource, SparseSource

    X = random_array((300, 300), density=0.01, random_state=4, format="csr")
    with ThreadPoolExecutor(2) as pool:
        m = Monarch(budget=12_000).fit(DistributedSource(SparseSource(X), pool))
    assert m.params_["from"] == "non-zeros"
    assert m.fro_error_ == pytest.approx(np.linalg.norm(X.toarray() - m.to_dense()), rel=1e-9)


def test_each_shape_is_reported_as_it_starts_and_with_its_error():
    """monarch took no callback: a comparison's bar said nothing of its shapes (N = 2,000: seconds each)."""
    X = np.random.default_rng(0).random((64, 64))
    seen = []
    est = Monarch(budget=3000, time_limit=None, callback=seen.append).fit(X)
    errors = [record["fro_error"] for record in est.params_["grid"]]
    assert seen[-1]["iteration"] == len(errors) and all(info["max_iter"] == len(errors) for info in seen)
    assert [info["fro_error"] for info in seen[1::2]] == errors  # each shape's, after its projection
    assert [info["stage"] for info in seen[::2]] == [mod.shape_stage(mod.MonarchShape(*r["blocks"], r["rank"], 0))
                                                     for r in est.params_["grid"]]
    display = lambda info: None  # noqa: E731
    assert get_method("monarch").make(64, 3000, RunContext(callback=display)).callback is display


def test_monarch_shapes_are_sorted_once_per_order(monkeypatch):
    """A comparison asked for N's shapes four times, each a sort of 2 N shapes (0.36 s at N = 8,192);
    the sorted shapes are remembered, and each call gets its own list."""
    import sfapprox.budget as budget

    sorts = []
    real = budget.np.lexsort
    monkeypatch.setattr(budget.np, "lexsort", lambda *a, **k: sorts.append(1) or real(*a, **k))
    n = 1031  # an order no other test asks for
    first = monarch_shapes(n)
    first.clear()  # the caller's own list
    again = monarch_shapes(n)
    assert again and again == monarch_shapes(n) and again[0] == (32, 33) and len(sorts) == 1


def test_monarch_shapes_order_and_least_budget_without_a_python_loop(monkeypatch):
    """``info`` on a graph of N = 1,000,000 spent 20 s of its 53 s keying and sorting 2 N shapes in Python
    (and building their tuples for Monarch's smallest budget and working memory).  The order is the
    documented one (most nearly square, then padding, then b1; a shape and its transpose tie), the least
    budget is the minimum over every shape, and neither it nor the first shapes build the tuples."""
    import math

    import sfapprox.budget as budget

    for n in (1, 2, 7, 36, 97, 1000, 1031, 4099):
        shapes = {(b, -(-n // b)) for b in range(1, n + 1)} | {(-(-n // b), b) for b in range(1, n + 1)}
        key = lambda s: (round(math.log(max(s) / min(s)), 12), s[0] * s[1] - n, s[0])  # noqa: E731
        expected = sorted(shapes, key=key)
        assert monarch_shapes(n) == expected and monarch_shapes(n, first=5) == expected[:5]
        assert monarch_min_budget(n) == min(monarch_count(n, a, b) for a, b in expected)

    def no_tuples(n):
        raise AssertionError("built every shape's tuple")

    monkeypatch.setattr(budget, "_monarch_shapes", no_tuples)
    n = 1_000_003
    assert monarch_min_budget(n) == min(monarch_count(n, b, -(-n // b)) for b in range(900, 1101)) == 2_001_016_008
    assert monarch_shapes(n, first=2) == [(1000, 1001), (1001, 1000)]


def test_the_first_shape_keeps_the_limit_slab_group_by_slab_group(fake_clock, monkeypatch):
    """Each slab SVD "takes" 1 s of the fake clock: the first shape's projection (16 slabs of a 16 x 16
    matrix) ran whole, whatever the limit, as one LAPACK call (16 s of a 5 s limit).  Its groups of slab
    SVDs now start only when they fit; the blocks not reached stay zero, and no other shape is tried."""
    real_svd = np.linalg.svd

    def slow_svd(a, *args, **kwargs):
        fake_clock.advance(float(np.prod(np.shape(a)[:-2])))
        return real_svd(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "svd", slow_svd)
    X = np.random.default_rng(3).standard_normal((16, 16))
    with pytest.warns(ConvergenceWarning, match="within time_limit"):
        fit = Monarch(budget=200, time_limit=5.0).fit(X)
    assert fake_clock.time <= 5.0
    assert fit.stop_reason_ == "time_limit" and fit.params_["shapes_tried"] == 1
    assert np.linalg.norm(X - fit.to_dense()) == pytest.approx(fit.fro_error_)
    assert np.count_nonzero(fit.left_) < fit.left_.size  # (blocks not reached: zero)


def test_a_shape_under_a_limit_is_scored_from_its_singular_values(fake_clock, monkeypatch):
    """Forming the Monarch matrix densely "takes" 10 s of the fake clock: each shape formed it for its
    error after its projection, uncounted (20 s of a 5 s limit).  Under a limit the error is the slabs'
    dropped singular values' (the same to round-off)."""
    real = mod.monarch_slabs

    def slow(*args):
        fake_clock.advance(10.0)
        return real(*args)

    monkeypatch.setattr(mod, "monarch_slabs", slow)
    X = np.random.default_rng(6).standard_normal((16, 16))
    fit = Monarch(budget=200, time_limit=5.0).fit(X)
    assert fake_clock.time <= 5.0
    assert fit.fro_error_ == pytest.approx(np.linalg.norm(X - fit.to_dense()), rel=1e-12)


def test_a_padding_of_one_row_is_said_in_the_singular():
    """"N = 11 padded with 1 zero rows and columns": counted (formats.counted)."""
    m = Monarch(rank=1, left_block=3, right_block=4).fit(np.random.default_rng(0).standard_normal((11, 11)))
    assert m.params_["note"] == "N = 11 padded with 1 zero row and column to 3·4 = 12"


def test_the_shapes_projected_within_the_time_limit_are_counted_as_other_messages_count():
    """A shape fixed by hand and cut by the time limit: "projected 1 of 1 block shapes" (formats.counted)."""
    X = np.random.default_rng(11).standard_normal((36, 36))
    with pytest.warns(ConvergenceWarning, match=r"^Monarch projected 1 of 1 block shape within time_limit=0 s"):
        Monarch(rank=1, left_block=6, right_block=6, time_limit=0).fit(X)


def test_a_rank_above_every_shape_says_the_order_as_other_messages_count():
    """"every Monarch shape of a 1024 x 1024 matrix": thousands separated, as the tables write counts; the
    rank typed stays as typed."""
    with pytest.raises(BudgetError, match=r"^block rank 40 is above min\(b1, b2\) of every Monarch shape of a "
                                          r"1,024 x 1,024 matrix \(32 at most"):
        Monarch(rank=40).fit(np.eye(1024))
