import numpy as np
import pytest
from scipy.sparse import random_array

from sfapprox import BudgetError, ParameterError, TruncatedSVD
from sfapprox.budget import tsvd_count


def _best_error(X, r):
    s = np.linalg.svd(X, compute_uv=False)
    return np.sqrt(np.sum(s[r:] ** 2))


@pytest.mark.parametrize("rank", [0, 1, 5, 20, 30])
def test_exact_matches_numpy_svd(rank):
    X = np.random.default_rng(0).standard_normal((30, 30))
    t = TruncatedSVD(n_components=rank, solver="exact").fit(X)
    assert np.linalg.norm(X - t.to_dense()) == pytest.approx(_best_error(X, rank), abs=1e-9)
    assert t.n_stored_ == tsvd_count(30, rank) == rank * 61


def test_randomized_close_to_exact_and_seeded():
    rng = np.random.default_rng(1)
    U, _ = np.linalg.qr(rng.standard_normal((200, 200)))
    X = (U * np.exp(-np.arange(200) / 10.0)) @ U.T  # decaying spectrum
    r = 15
    a = TruncatedSVD(n_components=r, solver="randomized", random_state=3).fit(X)
    b = TruncatedSVD(n_components=r, solver="randomized", random_state=3).fit(X)
    assert np.array_equal(a.to_dense(), b.to_dense())
    assert np.linalg.norm(X - a.to_dense()) == pytest.approx(_best_error(X, r), rel=1e-6)


def test_only_the_exact_solver_says_exact():
    """A randomized SVD is near the best rank-r approximation, not it (a flat spectrum shows the gap), and
    said "exact" as LAPACK's did."""
    X = np.random.default_rng(2).standard_normal((60, 60))
    rand = TruncatedSVD(n_components=10, solver="randomized", n_iter=0, random_state=0).fit(X)
    assert np.linalg.norm(X - rand.to_dense()) > 1.001 * _best_error(X, 10)
    assert rand.stop_reason_ == "closed_form" and rand.params_["solver"] == "randomized"
    assert TruncatedSVD(n_components=10, solver="exact").fit(X).stop_reason_ == "exact"


def test_what_sfapprox_methods_says_of_tsvd_names_its_randomized_svd():
    """`sfapprox methods` (the registry's summary) said "truncated SVD (best rank r)" for every N, where above
    EXACT_MAX_N it is a randomized SVD near the best rank r, not it."""
    from sfapprox._base import methods
    from sfapprox.baselines.tsvd import EXACT_MAX_N

    summary = methods()["tsvd"].summary
    assert "randomized" in summary and f"{EXACT_MAX_N:,}" in summary


def test_budget_picks_largest_rank_and_sparse_input():
    X = random_array((40, 40), density=0.1, random_state=2, format="csr")
    t = TruncatedSVD(budget=500, solver="randomized").fit(X)
    assert t.rank_ == 500 // 81 and t.n_stored_ <= 500
    dense = TruncatedSVD(budget=500).fit(X.toarray())
    assert np.linalg.norm(X.toarray() - t.to_dense()) == pytest.approx(
        np.linalg.norm(X.toarray() - dense.to_dense()), rel=1e-6)


def test_operator_and_errors():
    X = np.random.default_rng(3).random((12, 12))
    t = TruncatedSVD(n_components=3).fit(X)
    x = np.arange(12.0)
    assert np.allclose(t.to_operator().matvec(x), t.to_dense() @ x)
    assert np.allclose(t.to_operator().rmatvec(x), t.to_dense().T @ x)
    with pytest.raises(ParameterError, match="n_components \\(the rank\\) or a budget"):
        TruncatedSVD().fit(X)
    with pytest.raises(ParameterError, match="'solver' parameter"):
        TruncatedSVD(n_components=1, solver="magic").fit(X)


def test_paper_tsvd_figures(realdata):
    """TSVD at the paper's rank ceil(M^2/2) reproduces Table 1's TSVD column to 3 digits."""
    from sfapprox import load_matrix

    cases = [("pajek/strike.paj", 2.73), ("pajek/Sawmill.net", 3.24),
             ("pajek/mexican_power.paj", 3.85), ("suitesparse/mesh1e1_structural_48_48_177.mtx", 18.7)]
    for rel, paper in cases:
        X = load_matrix(realdata / rel).to_dense()
        n = X.shape[0]
        m = int(np.ceil(np.log2(n)))
        t = TruncatedSVD(n_components=-(-m * m // 2)).fit(X)
        err = np.linalg.norm(X - t.to_dense())
        assert float(f"{err:.3g}") == paper, (rel, err)


def test_a_rank_over_the_budget_also_given_is_refused():
    X = np.random.default_rng(0).standard_normal((24, 24))
    with pytest.raises(BudgetError, match=r"rank 3 stores 147 numbers, over the budget of 100; choose n_components "
                                          r"of at most 2"):
        TruncatedSVD(n_components=3, budget=100).fit(X)
    with pytest.raises(BudgetError, match="raise the budget, or give none"):
        TruncatedSVD(n_components=3, budget=10).fit(X)
    assert TruncatedSVD(n_components=3, budget=147).fit(X).n_stored_ == 147


def test_the_paper_protocol_at_a_smaller_budget_stays_within_it():
    """protocol="paper" fixed the rank at ceil(M^2 / 2) whatever the budget: at budget 0.3 of N^2 the
    comparison ended in an internal AssertionError (2,322 numbers over 1,228)."""
    from sfapprox import compare
    from sfapprox.budget import paper_tsvd_rank, tsvd_rank_for_budget

    X = np.random.default_rng(0).random((64, 64))
    row = compare(X, methods=["tsvd"], budget=0.3, protocol="paper").result("tsvd")
    assert row.status == "ok" and row.nnz <= int(0.3 * 64 * 64)
    assert row.params["rank"] == min(paper_tsvd_rank(64), tsvd_rank_for_budget(64, int(0.3 * 64 * 64)))
    full = compare(X, methods=["tsvd"], protocol="paper").result("tsvd")
    assert full.params["rank"] == paper_tsvd_rank(64)  # the paper's own budget: its rank


@pytest.mark.parametrize("solver", ["exact", "randomized"])
def test_singular_values_that_carry_nothing_are_not_stored(solver):
    """A zero matrix kept rank 9 of zero singular values, 297 stored numbers at N = 16 where none give the
    same error; a rank-one matrix kept its round-off singular values too: the rank kept is the one that carries
    something, and what is charged is what the factors hold."""
    n = 16
    zero = TruncatedSVD(budget=320, solver=solver).fit(np.zeros((n, n)))
    assert (zero.rank_, zero.n_stored_, zero.operator_.n_stored) == (0, 0, 0)
    assert zero.params_["rank_budget"] == 9 and np.all(zero.to_dense() == 0)
    X = np.outer(np.arange(1.0, n + 1), np.ones(n))
    one = TruncatedSVD(n_components=5, solver=solver).fit(X)
    assert (one.rank_, one.n_stored_, one.U_.shape, one.params_["rank"]) == (1, tsvd_count(n, 1), (n, 1), 1)
    assert np.linalg.norm(X - one.to_dense()) < 1e-12 * np.linalg.norm(X)
    full = TruncatedSVD(n_components=5, solver=solver).fit(np.random.default_rng(0).standard_normal((n, n)))
    assert full.rank_ == 5 and "rank_budget" not in full.params_


def test_the_exact_fit_rule_every_method_shares():
    """tsvd.preferred: the smaller error (within `tie` the earlier); of two fits that reproduce X (round-off,
    EXACT_TOL), the fewer numbers; the first fit always.  RPCA, NMF, Monarch and monarch+lr choose by it."""
    from sfapprox.baselines import _rpca_columns, monarch, monarch_lr, nmf, rpca
    from sfapprox.baselines.tsvd import EXACT_TOL, preferred, reproduces

    assert preferred(5.0, 100, None, 0, 1.0)
    assert preferred(0.4, 100, 0.5, 10, 1.0) and not preferred(0.5, 1, 0.4, 10, 1.0)
    assert not preferred(0.5 * (1 - 1e-13), 1, 0.5, 10, 1.0, tie=1e-12)  # a tie: the earlier kept
    assert preferred(0.5 * (1 - 1e-13), 1, 0.5, 10, 1.0)
    assert preferred(EXACT_TOL, 3, 0.0, 4, 1.0) and not preferred(0.0, 4, EXACT_TOL, 4, 1.0)
    assert not preferred(0.0, 5, 0.9 * EXACT_TOL * 1e3, 4, 1e3)  # both exact at ||X|| = 1000: fewer numbers win
    assert reproduces(EXACT_TOL * 7, 7.0) and not reproduces(EXACT_TOL * 7.01, 7.0) and not reproduces(None, 1.0)
    assert all(m.preferred is preferred for m in (rpca, _rpca_columns, nmf, monarch, monarch_lr))


@pytest.mark.parametrize("solver", ["exact", "randomized"])
def test_its_blas_threads_are_the_free_cores(monkeypatch, solver):
    """Beside busy cores the SVD runs on one BLAS thread, as rsvd's: on the default pool each product
    waited for a descheduled thread (N = 4,096 on 2 shared cores: 15-17 s where one thread took 2-3 s)."""
    from sfapprox import _threads

    monkeypatch.setattr(_threads, "runnable_others", lambda *a, **k: 64)  # every core wanted by others
    seen = []
    real_qr, real_svd = np.linalg.qr, np.linalg.svd
    monkeypatch.setattr(np.linalg, "qr", lambda *a, **k: (seen.append(_threads._blas_threads()), real_qr(*a, **k))[1])
    monkeypatch.setattr(np.linalg, "svd", lambda *a, **k: (seen.append(_threads._blas_threads()), real_svd(*a, **k))[1])
    pool = _threads._limit_blas(2)  # a pool of two threads (the tests run under OMP_NUM_THREADS=1)
    if pool is None:
        pytest.skip("threadpoolctl cannot set the BLAS pools here")
    try:
        X = np.random.default_rng(0).standard_normal((40, 40))
        TruncatedSVD(n_components=3, solver=solver).fit(X)
        after = _threads._blas_threads()
    finally:
        pool.restore_original_limits()
    assert seen and set(seen) == {1}
    assert after == 2  # the pool's own setting is restored after the fit


def test_randomized_power_iterations_that_do_not_fit_its_time_limit_are_skipped(fake_clock, monkeypatch):
    """The randomized SVD (above N = 2,048) ran all its power iterations whatever the limit: at N = 4,096,
    rank 614, 36-38 s of a 2 s --time-limit.  Each iteration now starts only when it and the final
    product fit, as rsvd's do, and the fit says it was cut."""
    X = np.random.default_rng(3).random((60, 60))
    free = TruncatedSVD(n_components=4, solver="randomized", time_limit=None).fit(X)
    real_qr = np.linalg.qr

    def slow_qr(*a, **k):  # one "second" per product (each is followed by its QR)
        fake_clock.advance(1.0)
        return real_qr(*a, **k)

    monkeypatch.setattr(np.linalg, "qr", slow_qr)
    cut = TruncatedSVD(n_components=4, solver="randomized", time_limit=4.5).fit(X)
    assert cut.n_iter_ == 1 and cut.stop_reason_ == "time_limit" and cut.params_["power_iterations"] == 1
    assert fake_clock.time <= 4.5 and cut.rank_ == 4
    assert free.n_iter_ == 7 and free.stop_reason_ == "closed_form" and "power_iterations" not in free.params_
    assert np.linalg.norm(X - cut.to_dense()) <= 1.05 * np.linalg.norm(X - free.to_dense())
    exact = TruncatedSVD(n_components=4, solver="exact", time_limit=0.0).fit(X)  # LAPACK's: one step, not cut
    assert exact.stop_reason_ == "exact" and exact.n_iter_ == 0



@pytest.mark.parametrize("limit, qr, gives_up, seconds", [(1.0, 0.0, True, 0.125), (2.5, 1.0, True, 2.0),
                                                          (2.5, 0.0, False, 2.0)])
def test_a_start_svd_that_may_give_up_runs_no_product_the_time_left_cannot_pay_for(
        fake_clock, monkeypatch, slow_sparse_products, limit, qr, gives_up, seconds):
    """The randomized SVD's range finder's first product X @ Omega and its final projection are not cut by its
    time checks: they ran whatever was left of the limit.  With give_up (NMF's NNDSVD, whose random start costs
    no product), each product "taking" 1 s: with 1 s the first product's first row block (an eighth) prices
    the rest of it and the projection after it at 1.9 s, and nothing more runs; where its QR "takes" 1 s more,
    the first product measured with its QR (2 s) leaves no time for the projection, which does not run; with
    2.5 s both run (no power iteration: 3 more products do not fit), and the factors are those of the same
    SVD that may not give up."""
    from sfapprox import _timing
    from sfapprox.baselines import tsvd

    monkeypatch.setattr(tsvd, "EXACT_MAX_N", 8)  # (the randomized SVD at N = 64)
    X = random_array((64, 64), density=0.5, format="csr", random_state=np.random.default_rng(2))
    plain = tsvd.leading_svd(X, 4, 0, n_iter=0)
    taken = slow_sparse_products(X)
    real_qr = np.linalg.qr
    monkeypatch.setattr(np.linalg, "qr", lambda *a, **k: (fake_clock.advance(qr), real_qr(*a, **k))[1])
    found = tsvd.leading_svd(X, 4, 0, _timing.Deadline.after(limit), n_iter=7, give_up=True)
    assert (found is None) == gives_up and fake_clock.time == pytest.approx(seconds, abs=0.05)
    assert fake_clock.time <= limit and tsvd.FIRST_ROWS == 1 / 8
    if not gives_up:
        assert len(taken) == 3 and all(np.array_equal(a, b) for a, b in zip(found, plain))
    # without give_up (RPCA's start, Monarch+LR's low-rank end), as before: both products run
    taken.clear()
    assert tsvd.leading_svd(X, 4, 0, _timing.Deadline.after(0.0), n_iter=7) is not None
    assert sum(taken) == pytest.approx(2.0)


@pytest.mark.parametrize("rank", [1, 7, 40])
def test_a_symmetric_matrix_takes_its_eigendecomposition_for_the_same_best_fit(monkeypatch, rank):
    """LAPACK's SVD of a symmetric matrix (a kernel, a graph, a mesh) took 2.5x the time of its eigh: 11.8 s
    against 4.7 s for a 2,000-point kernel on one thread.  The best rank-r fit is the same (the eigenvalues
    of largest magnitude, negative ones included), and the SVD is not called."""
    A = np.random.default_rng(4).standard_normal((40, 40))
    X = A + A.T  # indefinite: half its eigenvalues are negative
    calls = []
    real_svd = np.linalg.svd
    monkeypatch.setattr(np.linalg, "svd", lambda *a, **k: (calls.append(1), real_svd(*a, **k))[1])
    t = TruncatedSVD(n_components=rank, solver="exact").fit(X)
    assert not calls
    monkeypatch.setattr(np.linalg, "svd", real_svd)
    assert np.linalg.norm(X - t.to_dense()) == pytest.approx(_best_error(X, rank), rel=1e-12, abs=1e-12)
    s = real_svd(X, compute_uv=False)
    assert np.allclose(t.s_, s[:rank])  # in decreasing order, as the SVD gives them
