"""Nyström: exact on low-rank PSD matrices, honest budgets, refusals, the same result from columns."""

from __future__ import annotations

import numpy as np
import pytest

from sfapprox import BudgetError, NotApplicableError, ParameterError, compare, load_factors, save_factors
from sfapprox.baselines.nystrom import Nystrom, check_psd_fit, nystrom_factor, pinvh, rpcholesky_pivots
from sfapprox.budget import nystrom_count, nystrom_rank_for_budget
from sfapprox.sources import ArraySource, KernelMatrix


def _clustered(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.standard_normal((n // 3, 3)) * 0.4 + rng.standard_normal(3) * 3 for _ in range(3)])


@pytest.mark.parametrize("pivots", ["rpcholesky", "uniform"])
def test_a_low_rank_psd_matrix_is_reproduced(pivots):
    G = np.random.default_rng(1).standard_normal((60, 4))
    X = G @ G.T
    est = Nystrom(n_components=4 if pivots == "uniform" else 6, pivots=pivots).fit(X)
    assert np.allclose(est.to_dense(), X, atol=1e-8)
    assert est.n_stored_ == nystrom_count(60, est.rank_) == est.operator_.n_stored


def test_rpcholesky_beats_uniform_pivots_on_a_clustered_kernel():
    K = KernelMatrix(_clustered(), bandwidth=1.0)
    X = K.to_dense()
    errors = {p: np.mean([np.linalg.norm(X - Nystrom(n_components=10, pivots=p, random_state=s).fit(K).to_dense())
                          for s in range(5)]) for p in ("rpcholesky", "uniform")}
    assert errors["rpcholesky"] < 0.9 * errors["uniform"]  # measured 19.4 vs 26.5
    best = np.linalg.svd(X, compute_uv=False)
    assert errors["rpcholesky"] >= np.sqrt((best[10:] ** 2).sum()) * (1 - 1e-9)  # never better than TSVD


def test_from_columns_and_in_memory_agree():
    K = KernelMatrix(_clustered(150), bandwidth=0.8)
    a = Nystrom(budget=5000, random_state=2).fit(K)
    b = Nystrom(budget=5000, random_state=2).fit(K.to_dense())
    assert np.array_equal(a.pivots_, b.pivots_) and np.allclose(a.to_dense(), b.to_dense())


def test_budget_and_refusals():
    assert nystrom_rank_for_budget(100, 525) == 5 and nystrom_rank_for_budget(100, 0) == 0
    for n in (1, 7, 100):
        for budget in (0, 5, n + 1, 10 * n, n * n, 10 * n * n):
            r = nystrom_rank_for_budget(n, budget)
            assert nystrom_count(n, r) <= budget and (r == n or nystrom_count(n, r + 1) > budget)
    with pytest.raises(BudgetError, match=r"below the smallest fit .*\(one Nyström pivot: "):
        Nystrom(budget=50).fit(np.eye(60))
    with pytest.raises(NotApplicableError, match="not symmetric"):
        Nystrom(n_components=2).fit(np.triu(np.ones((20, 20))))
    with pytest.raises(NotApplicableError, match="negative diagonal"):
        Nystrom(n_components=2).fit(-np.eye(20))


def test_pivots_and_pseudo_inverse():
    assert sorted(rpcholesky_pivots(ArraySource(np.diag([4.0, 0.0, 1.0])), 3).tolist()) == [0, 2]  # stops: exact
    W = np.array([[2.0, 1.0], [1.0, 2.0]])
    assert np.allclose(pinvh(W), np.linalg.inv(W))


def test_saved_and_loaded(tmp_path):
    est = Nystrom(n_components=5).fit(KernelMatrix(_clustered(90)))
    save_factors(tmp_path / "n.h5", est)
    back = load_factors(tmp_path / "n.h5")
    assert back.kind == "nystrom" and np.allclose(back.to_dense(), est.to_dense())


def test_more_pivots_never_make_a_worse_fit():
    """C W^+ C^T lost accuracy as the rank grew (an RBF kernel of 600 points: 9.3e-07 at rank 180, 1.6e-05
    at 240, worse than 5.2e-07 at 120); the Cholesky form F F^T keeps improving."""
    from sfapprox import KernelMatrix

    X = KernelMatrix(np.random.default_rng(1).standard_normal((600, 3)), kernel="rbf").to_dense()
    errors = [Nystrom(n_components=r).fit(X).frobenius_error(X)[1] for r in (60, 120, 180, 240)]
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-9


def _indefinite(n=40, seed=0):
    """Symmetric, unit diagonal, entries up to 2: indefinite (the audit's matrix: Nyström was "ok" at
    relative errors 1.28-5.25, worse than the zero matrix)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 2, (n, n))
    X = (X + X.T) / 2
    np.fill_diagonal(X, 1.0)
    return X


@pytest.mark.parametrize("pivots", ["rpcholesky", "uniform"])
@pytest.mark.parametrize("wrap", [np.asarray, ArraySource], ids=["array", "columns"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_indefinite_matrix_is_not_applicable(pivots, wrap, seed):
    with pytest.raises(NotApplicableError, match="not positive semi-definite.*use rsvd or tsvd"):
        Nystrom(n_components=4, pivots=pivots).fit(wrap(_indefinite(seed=seed)))


@pytest.mark.parametrize("wrap", [np.asarray, ArraySource], ids=["array", "columns"])
def test_a_comparison_says_why_nystrom_is_not_applicable(wrap):
    X = _indefinite()
    rows = {r.method: r for r in compare(wrap(X), "nystrom,tsvd" if wrap is np.asarray else "nystrom,rsvd",
                                         budget=400).results}
    assert rows["nystrom"].status == "not applicable" and rows["nystrom"].operator is None
    assert "not positive semi-definite" in rows["nystrom"].reason and "rsvd" in rows["nystrom"].reason
    other = rows.get("tsvd") or rows["rsvd"]
    assert other.status == "ok" and other.rel_error < 1


def test_the_psd_check_reads_the_residual_and_the_core():
    X = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1, a positive diagonal
    S = np.array([0])
    with pytest.raises(NotApplicableError, match=r"diagonal entry -3 at row 1"):
        check_psd_fit("X", np.diag(X), X[:, S], S, nystrom_factor(X[:, S], S))
    S = np.array([0, 1])  # the whole matrix as the core: no Cholesky factor, its eigenvalue -1
    assert nystrom_factor(X, S) is None
    with pytest.raises(NotApplicableError, match=r"2 x 2 block at the pivots has eigenvalue -1"):
        check_psd_fit("X", np.diag(X), X, S, None)
    G = np.random.default_rng(0).standard_normal((30, 3))
    P = G @ G.T  # PSD of rank 3: all 30 pivots, a singular core (round-off negative eigenvalues)
    S = np.arange(30)
    check_psd_fit("P", np.diag(P), P, S, nystrom_factor(P, S))
    check_psd_fit("P", np.diag(P), P, S, None)


@pytest.mark.parametrize("n, dim, bandwidth", [(300, 1, 5.0), (300, 3, 1.0), (1000, 2, 3.0), (2000, 1, 5.0),
                                               (2000, 2, None)])
@pytest.mark.parametrize("pivots", ["rpcholesky", "uniform"])
def test_psd_kernels_are_never_refused(n, dim, bandwidth, pivots):
    """Nearly singular kernels (wide bandwidths, few dimensions: numerical rank 40-200) at ranks past
    their numerical rank, where the core's eigenvalues and the residual diagonal are round-off; given
    as arrays (no PSD declared), so the check runs."""
    K = KernelMatrix(np.random.default_rng(n + dim).standard_normal((n, dim)), bandwidth=bandwidth)
    X = K.to_dense()
    for rank in (20, 300):
        est = Nystrom(n_components=rank, pivots=pivots).fit(X)
        assert est.rank_ > 0 and est.frobenius_error(X)[1] < 0.5
    Nystrom(n_components=300, pivots=pivots).fit(ArraySource(X))
    Nystrom(n_components=300, pivots=pivots).fit(K)


class _Counting(ArraySource):
    """An array read by columns that counts what the fit reads (declared symmetric: no sampled check)."""

    symmetric = True

    def __init__(self, array):
        super().__init__(array)
        self.read, self.diagonals = 0, 0

    def _columns(self, J):
        self.read += J.size
        return super()._columns(J)

    def diagonal(self):
        self.diagonals += 1
        return super().diagonal()


@pytest.mark.parametrize("pivots, columns", [("rpcholesky", 2), ("uniform", 1)])
def test_the_psd_check_reads_nothing_more(pivots, columns):
    X = KernelMatrix(_clustered(150)).to_dense()
    source = _Counting(X)
    est = Nystrom(n_components=12, pivots=pivots).fit(source)
    # the pivots' columns (randomly pivoted Cholesky reads them again for C) and the diagonal once
    assert est.rank_ == 12 and source.read == columns * 12 and source.diagonals == 1
    with pytest.raises(NotApplicableError, match="not positive semi-definite"):
        Nystrom(n_components=4, pivots=pivots).fit(indefinite := _Counting(_indefinite()))
    assert indefinite.read <= columns * 4 and indefinite.diagonals == 1


@pytest.mark.parametrize("wrap", [np.asarray, ArraySource], ids=["array", "columns"])
def test_zero_components_is_the_zero_matrix_as_in_tsvd(wrap):
    """n_components=0 said "budget None is below one Nyström pivot" (no budget was given)."""
    from sfapprox import TruncatedSVD

    X = KernelMatrix(_clustered(30)).to_dense()
    est, tsvd = Nystrom(n_components=0).fit(wrap(X)), TruncatedSVD(n_components=0).fit(X)
    assert (est.rank_, est.n_stored_, est.pivots_.size) == (tsvd.rank_, tsvd.n_stored_, 0) == (0, 0, 0)
    assert est.to_dense().shape == (30, 30) and not est.to_dense().any()
    with pytest.raises(BudgetError, match="budget 5 is below the smallest fit of a 30 x 30 matrix \\(one Nyström pivot"):
        Nystrom(budget=5).fit(wrap(X))


def test_pivots_that_add_no_direction_are_neither_drawn_nor_charged():
    """On a rank-1 PSD matrix, budget 1,600 kept 24 pivots (1,536 numbers) for the surrogate one pivot
    (41 numbers) gives exactly: pivots drawn from round-off, and a block's pivots its others span."""
    X = np.ones((40, 40))
    for budget in (225, 1600):
        est = Nystrom(budget=budget).fit(X)
        assert est.params_["rank"] == 1 and est.n_stored_ == 41
        assert est.frobenius_error(X)[0] < 1e-10
    rng = np.random.default_rng(1)
    F = rng.standard_normal((60, 2))
    K = F @ F.T  # rank 2
    est = Nystrom(budget=60 * 60).fit(K)
    assert est.params_["rank"] == 2 and est.frobenius_error(K)[1] < 1e-8


@pytest.mark.parametrize("wrap", [np.asarray, ArraySource], ids=["array", "columns"])
def test_a_zero_diagonal_graph_is_not_applicable_rather_than_exact(wrap):
    """A graph without self-loops (Sawmill) drew no pivot (its diagonal is zero): Nyström stored 0 numbers,
    relative error 1, and was "ok, stop=exact"."""
    ring = np.roll(np.eye(30), 1, axis=1) + np.roll(np.eye(30), -1, axis=1)
    with pytest.raises(NotApplicableError, match=r"its diagonal is zero but its entry .* is 1.*use rsvd or tsvd"):
        Nystrom(n_components=5).fit(wrap(ring))
    rows = {r.method: r for r in compare(wrap(ring), "nystrom,rsvd", budget=400).results}
    assert rows["nystrom"].status == "not applicable"


def test_a_spent_diagonal_with_a_non_zero_residual_is_not_called_exact():
    """Positive diagonal, pivot 0 (drawn first: scaled up) spends it, the residual's entry (1, 2) is b - 1:
    PSD only for b = 1."""
    D = np.diag([1000.0, 1.0, 1.0])
    for b, psd in ((1.0, True), (0.5, False)):
        X = np.ones((3, 3))
        X[1, 2] = X[2, 1] = b
        X = D @ X @ D
        if psd:
            est = Nystrom(n_components=3).fit(X)
            assert est.stop_reason_ == "exact" and est.rank_ == 1 and np.allclose(est.to_dense(), X)
        else:
            with pytest.raises(NotApplicableError, match=r"after 1 pivot the residual's diagonal is spent but its "
                                                         r"entry \(1, 2\) is -0.5"):
                Nystrom(n_components=3).fit(X)


def test_pivots_cut_short_by_the_time_limit_are_not_called_exact(monkeypatch):
    """A block of pivots that did not fit the time left ended the draw with the deadline not yet passed:
    the fit said "exact" for a surrogate of 1 pivot of a full-rank kernel."""
    from sfapprox import _timing
    monkeypatch.setattr(_timing.Deadline, "fits", lambda self, seconds: False)
    est = Nystrom(n_components=40, time_limit=100.0).fit(KernelMatrix(_clustered(90), bandwidth=0.3))
    assert est.rank_ < 40 and est.stop_reason_ == "time_limit"


@pytest.mark.parametrize("X, why", [(np.triu(np.ones((30, 30))), "not symmetric"), (-np.eye(30), "negative diagonal")],
                         ids=["not-symmetric", "negative-diagonal"])
def test_a_matrix_nystrom_cannot_approximate_gives_one_reason_at_every_budget(X, why):
    """The budget was checked before the symmetry and the diagonal: a sweep over a non-symmetric matrix said
    "below one Nyström pivot" at its small budgets and "not symmetric" at the others."""
    from sfapprox.sweep import sweep

    for budget in (5, nystrom_count(30, 1), 300):
        with pytest.raises(NotApplicableError, match=why):
            Nystrom(budget=budget).fit(X)
    s = sweep(X, [5, 300], ["nystrom"], device="cpu")
    reasons = {point.results[0].reason for point in s.points}
    assert len(reasons) == 1 and why in reasons.pop()
    with pytest.raises(BudgetError, match="below the smallest fit .*one Nyström pivot"):  # a matrix it applies to: the budget's reason
        Nystrom(budget=5).fit(np.eye(30))
    with pytest.raises(ParameterError, match="n_components .* or a budget"):  # neither: the parameters first
        Nystrom().fit(X)


def test_the_pivots_taken_are_counted_as_other_messages_count():
    """"after 1 pivots the residual X - C W⁺ Cᵀ has diagonal entry -3": counted (formats.counted)."""
    with pytest.raises(NotApplicableError, match=r"^X is not positive semi-definite: after 1 pivot the residual "
                                                 r"X - C W⁺ Cᵀ has diagonal entry -3 at row 0 "):
        Nystrom(n_components=1).fit(np.array([[1.0, 2.0], [2.0, 1.0]]))
