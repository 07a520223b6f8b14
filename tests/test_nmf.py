import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse import random_array

from sfapprox import BudgetError, ConvergenceWarning, NotApplicableError, ParameterError
from sfapprox.baselines.nmf import NMF
from sfapprox.budget import nmf_count, nmf_rank_for_budget

sklearn_decomposition = pytest.importorskip("sklearn.decomposition")

# The bar every NMF start must meet against scikit-learn's best start, and the
# tighter one that init="best" meets on the matrices below (NMF has local minima,
# so no single start can promise to find scikit-learn's: see the report figures).
SINGLE_START_BAR = 1.02
BEST_START_BAR = 1 + 1e-6


def _graph(n: int, p: float, seed: int) -> np.ndarray:
    """A symmetric 0/1 adjacency matrix without self-loops."""
    upper = np.triu(np.random.default_rng(seed).random((n, n)) < p, 1)
    return (upper | upper.T).astype(float)


def _pajek_edges(path) -> np.ndarray:
    """Adjacency of a Pajek ``*Vertices`` / ``*Edges`` file (only what Sawmill.net uses)."""
    lines = path.read_text().splitlines()
    n = int(lines[0].split()[1])
    A = np.zeros((n, n))
    in_edges = False
    for line in lines[1:]:
        if line.startswith("*"):
            in_edges = line.lower().startswith(("*edges", "*arcs"))
            continue
        parts = line.split()
        if in_edges and len(parts) >= 2:
            i, j = int(parts[0]) - 1, int(parts[1]) - 1
            A[i, j] = A[j, i] = 1.0
    return A


def _sklearn_best(X: np.ndarray, rank: int) -> float:
    """Smallest error of scikit-learn's coordinate descent over its four starts."""
    errors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for init in ("nndsvd", "nndsvda", "nndsvdar", "random"):
            model = sklearn_decomposition.NMF(rank, init=init, solver="cd", max_iter=10000, random_state=0)
            W = model.fit_transform(X)
            errors.append(np.linalg.norm(X - W @ model.components_))
    return min(errors)


@pytest.fixture(scope="module", params=["random60", "graph50", "sawmill"])
def case(request):
    if request.param == "random60":
        return np.random.default_rng(0).random((60, 60)), 5
    if request.param == "graph50":
        return _graph(50, 0.1, 0), 4
    path = request.getfixturevalue("realdata") / "pajek" / "Sawmill.net"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return _pajek_edges(path), 4


def test_error_against_sklearn(case):
    X, rank = case
    reference = _sklearn_best(X, rank)
    single = NMF(rank, device="cpu").fit(X)
    best = NMF(rank, init="best", device="cpu").fit(X)
    assert np.linalg.norm(X - single.to_dense()) <= SINGLE_START_BAR * reference
    assert np.linalg.norm(X - best.to_dense()) <= BEST_START_BAR * reference
    assert set(best.params_["errors"]) == {"nndsvd", "nndsvda", "nndsvdar", "random"}


def test_recovers_nonnegative_low_rank():
    rng = np.random.default_rng(1)
    X = rng.random((40, 3)) @ rng.random((3, 40))
    # An exact fit converges linearly to the round-off floor: give it the iterations.
    nmf = NMF(3, max_iter=2000, device="cpu").fit(X)
    assert np.linalg.norm(X - nmf.to_dense()) < 1e-6 * np.linalg.norm(X)
    assert nmf.W_.min() >= 0 and nmf.H_.min() >= 0
    assert nmf.params_["converged"] and nmf.n_iter_ == nmf.params_["iterations"]


@pytest.mark.parametrize("n", [10, 33, 64])
@pytest.mark.parametrize("budget", [0, 19, 150, 1000, 5000])
def test_budget_never_exceeded(n, budget):
    X = np.random.default_rng(n).random((n, n))
    if nmf_rank_for_budget(n, budget) == 0:  # not even one rank fits: refused, never a zero "fit"
        with pytest.raises(BudgetError, match=r"below the smallest fit .*\(one rank: "):
            NMF(budget=budget, max_iter=20, device="cpu").fit(X)
        return
    nmf = NMF(budget=budget, max_iter=20, device="cpu").fit(X)
    assert nmf.n_stored_ <= budget
    # (at rank N a component may sit at the factors' floor, carrying nothing: not stored, and said so)
    assert nmf.params_.get("rank_budget", nmf.rank_) == nmf_rank_for_budget(n, budget)
    assert nmf.n_stored_ == nmf_count(n, nmf.rank_) == nmf.W_.size + nmf.H_.size


def test_negative_input_not_applicable():
    X = np.ones((5, 5))
    X[2, 3] = -3.2
    with pytest.raises(NotApplicableError, match=r"negative entries \(min -3.2\); NMF needs a non-negative"):
        NMF(2).fit(X)
    with pytest.raises(NotApplicableError, match="negative"):
        NMF(2).fit(sp.csr_array(X))


def test_negative_input_is_told_what_to_do():
    """The refusal (a compare row's reason) named no way to a fit: the shift, the absolute values or
    the methods that take any sign."""
    X = np.ones((3, 3))
    X[0, 1] = -1.0
    with pytest.raises(NotApplicableError, match=r"NMF needs a non-negative matrix: fit X - X.min\(\) \(and add the "
                                                 r"constant back\) or abs\(X\) instead, or use a method that takes "
                                                 r"any sign \(tsvd, sf\)"):
        NMF(1).fit(X)
    NMF(1).fit(X - X.min())  # the shift it names fits


@pytest.mark.parametrize("rank", [3, 12])
def test_sparse_input_matches_dense(rank):
    X = _graph(40, 0.15, 3)
    dense = NMF(rank, device="cpu").fit(X)
    sparse = NMF(rank, device="cpu").fit(sp.csr_array(X))
    # Same iterations up to round-off in the products (the stopping check may fall differently).
    assert np.linalg.norm(X - sparse.to_dense()) == pytest.approx(np.linalg.norm(X - dense.to_dense()), rel=1e-6)


def test_operator_matches_dense():
    X = np.random.default_rng(4).random((15, 15))
    nmf = NMF(2, device="cpu").fit(X)
    op, x = nmf.to_operator(), np.arange(15.0)
    assert np.allclose(op.matvec(x), nmf.to_dense() @ x)
    assert np.allclose(op.rmatvec(x), nmf.to_dense().T @ x)
    assert np.allclose(op.matmat(np.eye(15)), nmf.to_dense())


def test_parameters_and_warnings():
    X = np.random.default_rng(5).random((12, 12))
    with pytest.raises(ParameterError, match="n_components \\(the rank\\) or a budget"):
        NMF().fit(X)
    with pytest.raises(ParameterError, match="The 'init' parameter of NMF must be one of"):
        NMF(2, init="svd").fit(X)
    with pytest.raises(ParameterError, match="'solver' parameter"):
        NMF(2, solver="mu").fit(X)
    with pytest.warns(ConvergenceWarning, match="max_iter=1 iteration before") as said:  # "1 iterations" before
        NMF(3, max_iter=1, device="cpu").fit(X)
    assert {w.filename for w in said if issubclass(w.category, ConvergenceWarning)} == {__file__}  # the caller's line
    with pytest.warns(ConvergenceWarning, match="max_iter=1200 iterations before"):  # as Python writes it, not 1,200
        NMF(10, max_iter=1200, tol=0.0, device="cpu").fit(np.random.default_rng(5).random((80, 80)))
    zero = NMF(2, device="cpu").fit(np.zeros((6, 6)))
    assert np.array_equal(zero.to_dense(), np.zeros((6, 6)))


def test_seeded_and_inits():
    X = np.random.default_rng(6).random((20, 20))
    for init in ("nndsvd", "nndsvda", "nndsvdar", "random"):
        a = NMF(3, init=init, random_state=1, max_iter=50, device="cpu").fit(X)
        b = NMF(3, init=init, random_state=1, max_iter=50, device="cpu").fit(X)
        assert np.array_equal(a.W_, b.W_) and a.params_["init"] == init


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_cpu():
    X = np.random.default_rng(0).random((60, 60))
    cpu = NMF(5, device="cpu").fit(X)
    gpu = NMF(5, device="cuda").fit(X)
    assert gpu.params_["dtype"] == "float32" and gpu.W_.dtype == np.float64
    assert np.linalg.norm(X - gpu.to_dense()) <= SINGLE_START_BAR * np.linalg.norm(X - cpu.to_dense())
    gpu64 = NMF(5, device="cuda", dtype="float64").fit(sp.csr_array(X))
    assert np.linalg.norm(X - gpu64.to_dense()) == pytest.approx(np.linalg.norm(X - cpu.to_dense()), rel=1e-4)


def test_sawmill_at_its_budget_rank_as_loaded(realdata):
    """The acceptance case: Sawmill as the loader gives it (sparse), at SF's budget, within 2 % of sklearn."""
    from sfapprox import load_matrix
    from sfapprox.budget import sf_count

    path = realdata / "pajek" / "Sawmill.net"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    loaded = load_matrix(path)
    X = loaded.to_dense()
    nmf = NMF(budget=sf_count(loaded.n), device="cpu").fit(loaded.matrix)
    assert sp.issparse(loaded.matrix) and nmf.rank_ == 21
    assert np.linalg.norm(X - nmf.to_dense()) <= 1.02 * _sklearn_best(X, nmf.rank_)


def test_hals_checks_the_time_before_every_iteration():
    from sfapprox._timing import Deadline
    from sfapprox.baselines.nmf import _fit_hals

    rng = np.random.default_rng(3)
    X = torch.as_tensor(rng.random((20, 20)))
    W, H = torch.as_tensor(rng.random((20, 3))), torch.as_tensor(rng.random((3, 20)))
    # (not only at the convergence checks, every CHECK_EVERY iterations)
    *_, n_iter, reason = _fit_hals(X, X.T, W.clone(), H.clone(), max_iter=100, tol=0.0, norm_x2=float(X.square().sum()),
                                   deadline=Deadline.after(0.0))
    assert (n_iter, reason) == (1, "time_limit")  # the first iteration always runs (a start alone is no fit)


@pytest.mark.parametrize("limit, starts", [(150.0, 1), (250.0, 2)])
def test_a_further_start_runs_only_when_its_least_work_fits(fake_clock, monkeypatch, limit, starts):
    # Each start "takes" 100 s to initialise on the fake clock: the next one runs only when the time
    # left pays for its start (and its few iterations, which take no fake time here).
    from sfapprox.baselines import nmf

    real = nmf._initialize

    def slow(*args, **kw):
        fake_clock.advance(100.0)
        return real(*args, **kw)

    monkeypatch.setattr(nmf, "_initialize", slow)
    X = np.random.default_rng(4).random((20, 20))
    fit = NMF(3, time_limit=limit, max_iter=30, device="cpu").fit(X)
    # (errors per start where several ran; one start alone is not scored)
    assert len(fit.params_.get("errors", [fit.params_["init"]])) == starts and fake_clock.time <= limit


def test_a_later_start_is_priced_without_the_start_svd_it_shares(fake_clock, monkeypatch):
    """init="auto" computes the NNDSVD starts' SVD once, on the first start, but priced every later start
    with it: the SVD "taking" 100 s of a 150 s limit (HALS and the scorings no time), the later starts,
    which take no time, were skipped as 100 s each."""
    from sfapprox.baselines import nmf

    real = nmf.leading_svd

    def slow_svd(*args, **kw):
        fake_clock.advance(100.0)
        return real(*args, **kw)

    monkeypatch.setattr(nmf, "leading_svd", slow_svd)
    X = np.random.default_rng(4).random((20, 20))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = NMF(3, time_limit=150.0, max_iter=30, device="cpu").fit(X)
    assert set(fit.params_["errors"]) == set(nmf.BEST_INITS) and fake_clock.time == 100.0
    # the time a start takes of its own still prices the later ones: of the first start's 100 s, the SVD's
    # 60, and 40 s each start: one more start fits in the 50 s left, not two
    monkeypatch.setattr(nmf, "leading_svd", lambda *a, **kw: fake_clock.advance(60.0) or real(*a, **kw))
    real_initialize = nmf._initialize
    monkeypatch.setattr(nmf, "_initialize", lambda *a, **kw: fake_clock.advance(40.0) or real_initialize(*a, **kw))
    began = fake_clock.time
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = NMF(3, time_limit=150.0, max_iter=30, device="cpu").fit(X)
    assert list(fit.params_["errors"]) == ["nndsvda", "nndsvd"] and fake_clock.time - began == 140.0


def test_the_starts_are_scored_by_the_comparisons_scoring_without_forming_w_h(monkeypatch):
    """Choosing among starts scores each: by column blocks above DENSE_SCORING_MAX_N, as every row of a
    comparison is (W H and the residual were two more N x N arrays, over NMF's working memory)."""
    import tracemalloc

    from sfapprox import metrics
    from sfapprox.baselines import nmf as module

    rng = np.random.default_rng(2)
    X, W, H = rng.random((300, 300)), rng.random((300, 4)), rng.random((4, 300))
    want = float(np.linalg.norm(X - W @ H))
    assert module._error_of(X, W, H) == pytest.approx(want, rel=1e-12)
    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 100)
    monkeypatch.setattr(metrics, "SCORING_BLOCK", 16)
    tracemalloc.start()
    try:
        got = module._error_of(X, W, H)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == pytest.approx(want, rel=1e-12)
    assert peak < 0.5 * X.nbytes


def test_a_rank_over_the_budget_also_given_is_refused():
    X = np.abs(np.random.default_rng(0).standard_normal((24, 24)))
    with pytest.raises(BudgetError, match=r"rank 3 stores 144 numbers, over the budget of 100; choose n_components "
                                          r"of at most 2"):
        NMF(n_components=3, budget=100).fit(X)
    assert NMF(n_components=3, budget=144, max_iter=20).fit(X).n_stored_ == 144


def test_zero_components_are_not_stored():
    """A zero matrix stored rank 10 of zeros (320 numbers at N = 16) where none give the same error: a
    component that adds nothing to W H is neither kept nor charged."""
    n = 16
    nmf = NMF(budget=320).fit(np.zeros((n, n)))
    assert (nmf.rank_, nmf.n_stored_, nmf.operator_.n_stored, nmf.W_.shape) == (0, 0, 0, (n, 0))
    assert nmf.params_["rank"] == 0 and nmf.params_["rank_budget"] == 10
    X = np.abs(np.random.default_rng(0).standard_normal((n, n)))
    full = NMF(n_components=3).fit(X)
    assert full.rank_ == 3 and full.n_stored_ == nmf_count(n, 3) and "rank_budget" not in full.params_


def test_components_at_the_floor_are_not_stored():
    """A matrix with one non-zero entry kept rank 10 at N = 16 (320 numbers): one component that holds the
    entry and 9 that HALS holds at its EPS floor (each about 1e-31 of ||X|| in W H).  Components whose shares
    of W H add up to no more than round-off (N eps ||X||) are not stored nor charged; the error is unchanged
    and an ordinary fit keeps its rank."""
    n = 16
    X = np.zeros((n, n))
    X[3, 5] = 2.0
    nmf = NMF(budget=320, device="cpu").fit(X)
    assert (nmf.rank_, nmf.n_stored_, nmf.operator_.n_stored, nmf.W_.shape) == (1, nmf_count(n, 1), nmf_count(n, 1), (n, 1))
    assert nmf.params_["rank"] == 1 and nmf.params_["rank_budget"] == 10
    assert np.linalg.norm(X - nmf.to_dense()) <= 1e-14 * np.linalg.norm(X)
    full = NMF(budget=320, device="cpu").fit(np.abs(np.random.default_rng(0).standard_normal((n, n))))
    assert full.rank_ == 10 and "rank_budget" not in full.params_


def test_an_exact_non_negative_product_is_reproduced_to_round_off():
    # W H of rank 3 at rank 3: the small-product error formula's round-off read as no progress, and the fit
    # stopped "converged" at 2.3e-8 of ||X||; below its resolution the error is measured, and HALS goes on
    # to round-off (as TSVD reproduces an exact low-rank matrix)
    rng = np.random.default_rng(0)
    X = rng.random((20, 3)) @ rng.random((3, 20))
    nmf = NMF(n_components=3, device="cpu", time_limit=None).fit(X)
    assert nmf.stop_reason_ == "converged" and nmf.rank_ == 3
    assert np.linalg.norm(X - nmf.to_dense()) <= 1e-13 * np.linalg.norm(X)


def test_of_the_starts_that_reproduce_x_the_fewest_components_are_kept():
    # A constant matrix at rank 2: NNDSVDa's two components and NNDSVD's one reproduce it alike (error 0);
    # the first start's two were kept, 64 numbers where 32 do
    X = np.full((16, 16), 2.0)
    nmf = NMF(budget=64, device="cpu").fit(X)
    assert (nmf.rank_, nmf.n_stored_) == (1, 32) and nmf.params_["rank_budget"] == 2
    assert np.linalg.norm(X - nmf.to_dense()) <= 1e-14 * np.linalg.norm(X)
    # (NNDSVDa's two components are both constant: folded into one, its fit is as exact with 32, and first)
    assert nmf.params_["init"] == "nndsvda"


def test_a_component_parallel_to_another_is_folded_into_it(monkeypatch):
    """A constant matrix at rank 2 from NNDSVD with numpy 2.5: HALS's round-off drifted its second component
    (both H rows constant: the objective is flat along trading one for the other) to 1.8 N eps ||X||, above
    round-off, in 5 iterations, and it was kept (64 numbers where 32 reproduce X).  Here the start is that
    state, with the W column at the EPS floor and the H row 20 (of the scaled problem), on any numpy."""
    from sfapprox.baselines import nmf

    X = np.full((16, 16), 2.0)
    start = (np.column_stack([np.full(16, 0.5), np.full(16, nmf.EPS)]),
             np.vstack([np.full(16, 0.5), np.full(16, 20.0)]))
    monkeypatch.setattr(nmf, "_nndsvd", lambda *args, **kwargs: tuple(F.copy() for F in start))
    est = NMF(n_components=2, init="nndsvd", device="cpu").fit(X)
    assert (est.rank_, est.n_stored_) == (1, 32)
    assert np.linalg.norm(X - est.to_dense()) <= 16 * np.finfo(float).eps * np.linalg.norm(X)


def test_components_that_are_not_parallel_are_not_folded():
    from sfapprox.baselines.nmf import _pruned

    rng = np.random.default_rng(0)
    W, H = rng.random((16, 3)), rng.random((3, 16))
    H[2] = H[1] + 1e-6 * rng.random(16)  # nearly parallel rows: folding would move W H by ~1e-6, far above round-off
    W2, H2 = _pruned(W, H, float(np.linalg.norm(W @ H)))
    assert W2.shape == (16, 3) and np.array_equal(W2 @ H2, W @ H)
    H[2] = 2.0 * H[1]  # exactly parallel: folded, W H kept to round-off
    W2, H2 = _pruned(W, H, float(np.linalg.norm(W @ H)))
    assert W2.shape == (16, 2) and np.linalg.norm(W2 @ H2 - W @ H) <= 16 * np.finfo(float).eps * np.linalg.norm(W @ H)


def test_a_small_problem_s_columns_are_updated_without_a_torch_call_each(monkeypatch):
    """A 7 x 7 matrix at rank 6: every column update was a torch addmv and clamp (0.35 ms an iteration of
    overhead, 1.5 s for four starts of 1,000 iterations); they run on numpy views of the same memory now,
    to the same factors as the torch loop (which larger factors keep)."""
    from sfapprox.baselines import nmf

    X = np.random.default_rng(0).exponential(size=(7, 7))
    monkeypatch.setattr(nmf._COMPILED, "module", False)  # (the paths that run where numba does not)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        monkeypatch.setattr(nmf, "SMALL_FACTOR", 0, raising=False)  # the torch loop, as for large factors
        by_torch = NMF(n_components=6, max_iter=50, device="cpu").fit(X)
        monkeypatch.undo()  # SMALL_FACTOR (and the module) as they were: the numpy loop
        monkeypatch.setattr(nmf._COMPILED, "module", False)
        calls = []
        real = torch.addmv
        monkeypatch.setattr(torch, "addmv", lambda *a, **k: calls.append(1) or real(*a, **k))
        small = NMF(n_components=6, max_iter=50, device="cpu").fit(X)
    assert not calls and small.n_iter_ == by_torch.n_iter_
    np.testing.assert_allclose(small.to_dense(), by_torch.to_dense(), rtol=1e-9, atol=1e-12)


def test_hals_reports_each_iteration_and_the_errors_of_its_checks():
    """nmf took no callback: a progress bar stood at "it 0 error –" through its whole fit."""
    from sfapprox._base import RunContext, get_method

    X = np.random.default_rng(0).random((30, 30))
    seen = []
    est = NMF(n_components=3, init="nndsvda", device="cpu", time_limit=None, callback=seen.append).fit(X)
    assert seen[-1]["iteration"] == est.n_iter_ and all(info["max_iter"] == est.max_iter for info in seen)
    assert {info["stage"] for info in seen} == {"start nndsvda"}
    # the errors are X's (not the scaled problem's): the last check's is the fit's own, to the formula's round-off
    assert seen[-1]["fro_error"] == pytest.approx(np.linalg.norm(X - est.to_dense()), rel=1e-6)
    display = lambda info: None  # noqa: E731
    assert get_method("nmf").make(30, 200, RunContext(callback=display)).callback is display


def test_the_start_svds_power_iterations_keep_to_the_time_limit(slow_power_iterations):
    """Above N = 2,048 NNDSVD's SVD is randomized, and ran its 7 power iterations whatever the limit
    (nmf at N = 8,192: 53 s of a 10 s limit): each now starts only when it fits, as TruncatedSVD's do.
    (The randomized solver forced at N = 60; every product "takes" 1 s.)"""
    from sfapprox.baselines import nmf

    done = slow_power_iterations(nmf)
    X = np.random.default_rng(4).random((60, 60))
    est = NMF(n_components=3, init="nndsvda", time_limit=4.5).fit(X)
    assert done == [1] and est.rank_ == 3  # one iteration of 7; the fit goes on from it



@pytest.mark.parametrize("init", ["nndsvda", "auto"])
@pytest.mark.parametrize("limit", [1.5, 2.5])
def test_a_start_svd_the_time_left_cannot_pay_for_gives_way_to_the_random_start(fake_clock, monkeypatch,
                                                                                slow_sparse_products, init, limit):
    """Above N = 2,048 NNDSVD's randomized SVD makes two products no time check cuts (the range finder's first
    and the final projection), and they ran whatever was left of the limit.  Each product of X "taking" 1 s
    (the randomized SVD forced at N = 64; HALS's own products, torch's, no time): with 1.5 s the first
    product's first row block prices both at 1.9 s, and the random start (no product) stands in for NNDSVDa,
    the row's stop reason "time_limit"; with 2.5 s NNDSVDa's SVD runs, as before."""
    from sfapprox.baselines import tsvd

    monkeypatch.setattr(tsvd, "EXACT_MAX_N", 8)
    X = random_array((64, 64), density=0.5, format="csr", random_state=np.random.default_rng(2))
    slow_sparse_products(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = NMF(n_components=3, init=init, time_limit=limit, max_iter=30, device="cpu").fit(X)
    if limit < 2.0:
        assert est.params_["init"] == "random" and est.stop_reason_ == "time_limit" and "errors" not in est.params_
        assert fake_clock.time <= limit and est.n_iter_ >= 1 and est.rank_ == 3  # (HALS's first iteration ran)
        fallback = NMF(n_components=3, init="random", max_iter=est.n_iter_, tol=0.0, time_limit=None,
                       device="cpu").fit(X)
        assert np.array_equal(est.to_dense(), fallback.to_dense())  # the random start's fit, as init="random"
    elif init == "nndsvda":
        assert est.params_["init"] == "nndsvda" and fake_clock.time == pytest.approx(2.0, abs=0.05)
    else:
        # NNDSVDa's SVD ran, and the later starts, which share it, in the time it left (their scorings'
        # products too): the one kept is the smallest error's
        assert "nndsvda" in est.params_["errors"] and fake_clock.time <= limit


def test_the_first_start_is_not_scored_when_no_other_start_can_follow(fake_clock, monkeypatch):
    """init="auto" scored its first start (a pass over X, 3-4 s at N = 8,192 on 2 shared cores) to choose
    among starts even when no other start could run in the time left.  Each iteration "takes" 10 s and
    a scoring 10 s: within 25 s no second start fits, and the first is not scored."""
    from sfapprox.baselines import nmf

    real_sweeps, real_score = nmf._hals_sweeps, nmf._error_of
    scored = []

    def slow_sweeps(*args):
        fake_clock.advance(5.0)
        return real_sweeps(*args)

    def slow_score(*args):
        scored.append(1)
        fake_clock.advance(10.0)
        return real_score(*args)

    monkeypatch.setattr(nmf, "_hals_sweeps", slow_sweeps)
    monkeypatch.setattr(nmf, "_error_of", slow_score)
    X = np.random.default_rng(4).random((20, 20))
    fit = NMF(3, time_limit=25.0, max_iter=30, device="cpu").fit(X)
    assert fake_clock.time <= 25.0 and not scored and "errors" not in fit.params_
    assert fit.params_["init"] == "nndsvda" and fit.stop_reason_ == "time_limit"


def test_the_limit_counts_from_the_start_of_the_fit(fake_clock, monkeypatch):
    """Scaling X (its copy and its move to the device, about 1 s at N = 4,096 on 2 shared cores) "takes"
    6 s of the fake clock and each half-iteration 1 s: the limit counted only from after it, and the fit
    ended at 14 s of an 8 s limit.  With a start that used the limit up, one iteration still runs (a start
    alone is no fit), and no other."""
    from sfapprox.baselines import nmf

    real_tensor, real_sweeps = nmf.as_tensor, nmf._hals_sweeps

    def slow_tensor(*args):
        fake_clock.advance(6.0)
        return real_tensor(*args)

    def slow_sweeps(*args):
        fake_clock.advance(1.0)
        return real_sweeps(*args)

    monkeypatch.setattr(nmf, "as_tensor", slow_tensor)
    monkeypatch.setattr(nmf, "_hals_sweeps", slow_sweeps)
    X = np.random.default_rng(4).random((20, 20))
    fit = NMF(3, init="nndsvda", time_limit=8.0, max_iter=30, device="cpu").fit(X)
    assert fake_clock.time <= 8.0 and fit.stop_reason_ == "time_limit" and fit.n_iter_ == 1
    fit = NMF(3, init="nndsvda", time_limit=5.0, max_iter=30, device="cpu").fit(X)
    assert (fit.n_iter_, fit.stop_reason_) == (1, "time_limit")


@pytest.mark.parametrize("randomized", [False, True])
def test_auto_computes_the_start_svd_once_for_every_nndsvd_start(monkeypatch, randomized):
    """init="auto" tries NNDSVDa, NNDSVD and NNDSVDar from one SVD (it computed the same one for each:
    seconds each at N = 8,192), and each start is bit for bit the one its own SVD gives."""
    from sfapprox.baselines import nmf as module
    from sfapprox.baselines import tsvd

    if randomized:  # (the randomized SVD above EXACT_MAX_N: seeded, so the same one each time)
        monkeypatch.setattr(tsvd, "EXACT_MAX_N", 8)
    rng = np.random.default_rng(5)
    X = rng.random((30, 4)) @ rng.random((4, 30)) + 0.01 * rng.random((30, 30))
    calls, starts = [], {}
    real_svd, real_initialize = module.leading_svd, module._initialize

    def counting_svd(*args, **kwargs):
        calls.append(args[1])
        return real_svd(*args, **kwargs)

    def keeping(Xs, rank, init, *args, **kwargs):
        start, made = real_initialize(Xs, rank, init, *args, **kwargs)
        starts[made] = (Xs, [F.copy() for F in start])
        return start, made

    monkeypatch.setattr(module, "leading_svd", counting_svd)
    monkeypatch.setattr(module, "_initialize", keeping)
    fit = NMF(3, init="auto", time_limit=None, max_iter=40, device="cpu").fit(X)
    assert calls == [3] and set(fit.params_["errors"]) == set(module.BEST_INITS)
    for init in ("nndsvda", "nndsvd", "nndsvdar"):
        Xs, (W, H) = starts[init]
        # each variant from its own SVD, as before the SVD was shared
        W0, H0 = real_initialize(Xs, 3, init, fit.random_state)[0]
        assert np.array_equal(W, W0) and np.array_equal(H, H0)
    # the start kept gives the fit that start alone gives
    alone = NMF(3, init=fit.params_["init"], time_limit=None, max_iter=40, device="cpu").fit(X)
    assert np.array_equal(fit.W_, alone.W_) and np.array_equal(fit.H_, alone.H_)


def test_the_start_s_mean_of_a_sparse_matrix_is_its_entries_mean_duplicates_and_integers_too():
    """NNDSVDa's fill and the random start's scale take the mean of X from a sparse X's stored values (scipy
    1.12's ``mean()`` is a product with a ones column, which the time checks priced as a product of the fit):
    the mean of every entry, zeros counted, duplicates of a COO summed, integers in float64."""
    from sfapprox.baselines.nmf import _mean

    X = sp.coo_array((np.array([3, 4, 5]), (np.array([0, 0, 2]), np.array([1, 1, 0]))), shape=(3, 4))
    assert _mean(X) == 12 / 12 and _mean(X.tocsr()) == _mean(X.tocsc()) == _mean(X.toarray()) == 1.0
    D = np.random.default_rng(0).random((5, 5))
    assert _mean(sp.csr_array(D)) == pytest.approx(D.mean(), rel=1e-15) and _mean(D) == float(D.mean())
    # the values' plain sum overflowed where their mean does not
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _mean(sp.csr_array([[1e308, 1e308]])) == 1e308 and _mean(sp.csr_array((2, 2))) == 0.0


def _sweep_problem(n: int, r: int, dtype, seed: int, floor: bool):
    """Random ``F`` (``n x r``, non-negative), ``XG`` and ``GG = G G^T`` of a HALS half-step; with ``floor``,
    ``XG`` partly negative, so that many entries are clamped to ``EPS``."""
    rng = np.random.default_rng(seed)
    G = torch.as_tensor(rng.random((r, 3 * n)), dtype=dtype)
    XG = torch.as_tensor(rng.random((n, r)) * r - (0.6 * r if floor else 0.0), dtype=dtype)
    return torch.as_tensor(rng.random((n, r)), dtype=dtype), XG, G @ G.T


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("n, r, sweeps, floor", [(7, 6, 2, False), (16, 10, 3, True), (130, 37, 3, False),
                                                  (300, 21, 50, True), (64, 1, 4, False), (33, 5, 1, True)])
def test_the_compiled_sweeps_are_the_column_updates(monkeypatch, dtype, n, r, sweeps, floor):
    """One compiled call for the sweeps of a half-step (each column's torch addmv cost ~30 us of overhead:
    24 of 34 s of a comparison's NMF at N = 256): the same factor to rounding as the torch and numpy column
    loops, the same entries at the floor, and the same number of sweeps where the inner-sweep rule stops
    them (``sweeps=50``: stopped by DELTA long before)."""
    from sfapprox.baselines import nmf

    assert nmf._COMPILED.get(), "numba is installed with the tests: the compiled module must load"
    F, XG, GG = _sweep_problem(n, r, dtype, seed=n + r, floor=floor)
    compiled = F.clone()
    ran = nmf._hals_sweeps(compiled, XG, GG, sweeps)
    monkeypatch.setattr(nmf._COMPILED, "module", False)
    rtol = 1e-11 if dtype == torch.float64 else 1e-4
    for small in (4096, 0):  # the numpy loop (small factors), then the torch loop
        monkeypatch.setattr(nmf, "SMALL_FACTOR", small)
        loop = F.clone()
        assert nmf._hals_sweeps(loop, XG, GG, sweeps) == ran
        np.testing.assert_allclose(compiled.numpy(), loop.numpy(), rtol=rtol, atol=rtol * float(loop.abs().max()))
        assert torch.equal(compiled == nmf.EPS, loop == nmf.EPS) and compiled.dtype == dtype
    if sweeps == 50:
        assert 1 < ran < sweeps
    if floor:
        assert bool((compiled == torch.tensor(nmf.EPS, dtype=dtype)).any())


def test_the_compiled_sweeps_keep_a_nan_as_torch_s_clamp_does():
    """A NaN in the products stays a NaN in the factor (as the torch loop's clamp keeps it): never turned
    into the floor, which would hide a broken fit."""
    from sfapprox.baselines import nmf

    assert nmf._COMPILED.get(), "numba is installed with the tests: the compiled module must load"
    F, XG, GG = _sweep_problem(9, 3, torch.float64, seed=3, floor=False)
    XG[4, 1] = float("nan")
    nmf._hals_sweeps(F, XG, GG, 1)
    assert bool(torch.isnan(F[4, 1])) and not bool(torch.isnan(F[:4]).any())


def test_a_fit_without_the_compiled_sweeps_is_the_same_fit(monkeypatch):
    """Where numba is missing the per-column loops run, to the same fit: the same start kept, the same
    iterations, the same error to rounding."""
    from sfapprox.baselines import nmf

    X = np.abs(np.random.default_rng(4).standard_normal((40, 40)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        compiled = NMF(n_components=8, max_iter=200, device="cpu").fit(X)
        monkeypatch.setattr(nmf._COMPILED, "module", False)
        calls = []
        real = nmf._sweeps
        monkeypatch.setattr(nmf, "_sweeps", lambda *a: calls.append(1) or real(*a))
        loops = NMF(n_components=8, max_iter=200, device="cpu").fit(X)
    assert calls and (loops.n_iter_, loops.params_["init"]) == (compiled.n_iter_, compiled.params_["init"])
    np.testing.assert_allclose(loops.to_dense(), compiled.to_dense(), rtol=1e-8, atol=1e-10)


def test_the_compiled_sweeps_fall_back_when_they_fail_to_compile(monkeypatch):
    """A failed compile warns once and the column loops take over for the process, the half-step done."""
    from sfapprox.baselines import nmf

    class Broken:
        @staticmethod
        def hals_sweeps(*args):
            raise RuntimeError("LLVM ERROR: simulated")

    monkeypatch.setattr(nmf._COMPILED, "module", Broken)
    F, XG, GG = _sweep_problem(20, 4, torch.float64, seed=5, floor=True)
    expected = F.clone()
    with pytest.warns(RuntimeWarning, match="compiled NMF sweeps failed"):
        ran = nmf._hals_sweeps(F, XG, GG, 3)
    assert nmf._COMPILED.module is False
    assert nmf._hals_sweeps(expected, XG, GG, 3) == ran and torch.equal(F, expected)


def test_the_sweeps_compile_before_the_limit_s_clock(fake_clock, monkeypatch):
    """numba's start and the sweeps' compile "take" 10 s of the fake clock on their first call: inside the
    first iteration they were its price, and a fit under a 5 s limit stopped after one iteration (a fresh
    install's first NMF: 4 s of compiling at load 3); they come before the limit now, as SF's compile."""
    from sfapprox.baselines import nmf

    real = nmf._COMPILED.get()
    assert real, "numba is installed with the tests: the compiled module must load"
    calls = []

    class FirstCompiles:
        @staticmethod
        def hals_sweeps(*args):
            if not calls:
                fake_clock.advance(10.0)
            calls.append(1)
            return real.hals_sweeps(*args)

    monkeypatch.setattr(nmf._COMPILED, "module", FirstCompiles)
    X = np.random.default_rng(4).random((20, 20))
    fit = NMF(3, init="nndsvda", time_limit=5.0, max_iter=30, device="cpu").fit(X)
    assert fit.stop_reason_ != "time_limit" and fit.n_iter_ > 1 and len(calls) > 2


def test_the_compiled_sweeps_refuse_products_of_another_shape():
    """The compiled loops index without bounds checks: products that do not match the factor are refused
    before they run (they would read out of bounds), not taken for a failed compile."""
    from sfapprox.baselines import nmf

    assert nmf._COMPILED.get(), "numba is installed with the tests: the compiled module must load"
    F, XG, GG = _sweep_problem(12, 4, torch.float64, seed=6, floor=False)
    with pytest.raises(ValueError, match="HALS sweeps of a factor"):
        nmf._hals_sweeps(F, XG[:, :3], GG[:3, :3], 2)
    with pytest.raises(ValueError, match="HALS sweeps of a factor"):
        nmf._hals_sweeps(F, XG.float(), GG, 2)
    assert nmf._COMPILED.module


def test_a_slow_compile_is_said_apart_in_compile_seconds_and_a_rank_0_fit_compiles_nothing(monkeypatch):
    """A fresh install's compile (4 s at load 3) came inside seconds_ with nothing saying so, where SF's has
    ``params_["compile_seconds"]``; a fit of rank 0 (the zero matrix within a budget: no sweep) loaded numba for
    nothing."""
    import time

    from sfapprox.baselines import nmf

    real = nmf._load_compiled
    loads = []

    def slow(device, dtype):
        loads.append(dtype)
        real(device, dtype)
        time.sleep(0.3)

    monkeypatch.setattr(nmf, "_load_compiled", slow)
    monkeypatch.setattr(nmf, "COMPILE_NOTE_SECONDS", 0.25)
    X = np.random.default_rng(5).random((12, 12))
    fit = NMF(2, max_iter=5, device="cpu").fit(X)
    assert fit.params_["compile_seconds"] >= 0.3 and fit.seconds_ >= fit.params_["compile_seconds"]
    monkeypatch.setattr(nmf, "COMPILE_NOTE_SECONDS", 10.0)
    assert "compile_seconds" not in NMF(2, max_iter=5, device="cpu").fit(X).params_  # (under the note's floor)
    loads.clear()
    zero = NMF(budget=10, max_iter=5, device="cpu").fit(np.zeros((12, 12)))  # (below one rank: rank 0)
    assert zero.rank_ == 0 and zero.params_["rank"] == 0 and not loads


def test_a_factor_off_the_cpu_never_asks_for_the_compiled_sweeps(monkeypatch):
    """A GPU fit asked for the compiled module first: it imported numba (0.3-0.9 s) and, where numba was
    broken, warned that the NMF sweeps fell back, though a GPU never runs them."""
    from sfapprox.baselines import nmf

    asked = []
    monkeypatch.setattr(nmf._COMPILED, "get", lambda: asked.append(1) or None)
    assert nmf._compiled_sweeper(torch.empty((4, 2), device="meta")) is None and not asked
    assert nmf._compiled_sweeper(torch.empty((4, 2))) is None and asked  # (the CPU's does ask)
