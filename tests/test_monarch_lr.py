"""monarch+lr: planted recovery, never worse than its parts' methods, budgets, limits, saving."""

from __future__ import annotations

import numpy as np
import pytest

import sfapprox.baselines.monarch_lr as mod
from sfapprox import BudgetError, ConvergenceWarning, InputError, ParameterError
from sfapprox.baselines.monarch import Monarch, MonarchOperator, monarch_count, monarch_project
from sfapprox.baselines.monarch_lr import MonarchLowRank, MonarchLowRankOperator, monarch_lr_min_budget
from sfapprox.baselines.tsvd import TruncatedSVD
from sfapprox.budget import tsvd_count


def _rel(X, est):
    return np.linalg.norm(X - est.to_dense()) / np.linalg.norm(X)


def _planted(n=64, b=8, k=2, seed=0):
    rng = np.random.default_rng(seed)
    M = MonarchOperator(rng.standard_normal((b, b, b, 1)), rng.standard_normal((b, 1, b, b)), n).to_dense()
    return M + rng.standard_normal((n, k)) @ rng.standard_normal((k, n))


def test_a_planted_monarch_plus_low_rank_is_recovered():
    X = _planted()
    budget = monarch_count(64, 8, 8) + tsvd_count(64, 2)
    fit = MonarchLowRank(budget=budget, time_limit=None).fit(X)
    assert _rel(X, fit) < 1e-10 and fit.stop_reason_ == "exact"
    assert (fit.params_["rank"], fit.params_["monarch_rank"], fit.n_stored_) == (2, 1, budget)
    # Neither part alone comes close at that budget.
    assert _rel(X, Monarch(budget=budget).fit(X)) > 0.1 and _rel(X, TruncatedSVD(budget=budget).fit(X)) > 0.1


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("factor", [0.5, 1.0, 2.0])
def test_never_worse_than_monarch_or_tsvd_at_the_same_budget(seed, factor):
    rng = np.random.default_rng(seed)
    X = rng.random((40, 4)) @ rng.random((4, 40)) + 0.2 * rng.standard_normal((40, 40))
    budget = int(factor * 40 * 6 * 7)
    fit = MonarchLowRank(budget=budget, time_limit=None).fit(X)
    assert fit.n_stored_ <= budget
    for other in (Monarch(budget=budget), TruncatedSVD(budget=budget)):
        assert _rel(X, fit) <= max(_rel(X, other.fit(X)) * (1 + 1e-9), 1e-13)  # or both exact


def test_each_alternation_lowers_the_error():
    # (budget 1,200: rank 3 of 5x6 blocks, 990 numbers.  At 2,000 the shape held X exactly: every error was
    # round-off, 3e-14, and the comparisons passed or failed by it, failing with numpy 1.24 / scipy 1.12)
    X = np.random.default_rng(3).standard_normal((30, 30))
    shape = mod.monarch_configs_for_budget(30, 1200, 1)[0]
    history = []
    for it in range(1, 8):
        history.append(mod._fit_point(X, shape, 3, max_iter=it, tol=0, deadline=None, seed=0).fro_error)
    left, right = monarch_project(X, shape.left_block, shape.right_block, shape.rank)
    plain = np.linalg.norm(X - MonarchOperator(left, right, 30).to_dense())
    assert history[0] <= plain and all(b <= a * (1 + 1e-12) for a, b in zip(history, history[1:]))
    assert history[-1] < 0.99 * plain


def test_budgets_and_parameters_are_checked():
    X = np.random.default_rng(4).standard_normal((36, 36))
    assert monarch_lr_min_budget(36) == tsvd_count(36, 1)
    fit = MonarchLowRank(budget=monarch_lr_min_budget(36)).fit(X)
    assert fit.n_stored_ == 73 and fit.params_["monarch_rank"] is None  # one rank-1 term: TSVD
    with pytest.raises(BudgetError, match=r"^budget 72 is below the smallest fit of a 36 x 36 matrix \(one rank: 73 "):
        MonarchLowRank(budget=72).fit(X)
    with pytest.raises(ParameterError, match="'budget' parameter"):
        MonarchLowRank().fit(X)
    with pytest.raises(ParameterError, match="max_splits"):
        MonarchLowRank(budget=1000, max_splits=4).fit(X)


def test_memory_limit_is_checked_before_any_work():
    from sfapprox import ResourceError

    X = np.random.default_rng(11).standard_normal((40, 40))
    with pytest.raises(ResourceError, match="monarch\\+lr: 16 dense"):
        MonarchLowRank(budget=2000, max_memory=16 * 8 * 40 * 40 - 1).fit(X)
    assert MonarchLowRank(budget=2000, max_memory=16 * 8 * 60 * 60).fit(X).n_stored_ <= 2000


def test_time_limit_bounds_the_grid_and_says_so():
    X = np.random.default_rng(5).standard_normal((48, 48))
    with pytest.warns(ConvergenceWarning, match="grid points within time_limit"):
        fit = MonarchLowRank(budget=4000, time_limit=0).fit(X)
    assert fit.stop_reason_ == "time_limit" and fit.params_["points_tried"] == 1 < fit.params_["points"]


def test_ctrl_c_keeps_the_best_point(monkeypatch):
    X = np.random.default_rng(6).standard_normal((36, 36))
    real = mod._fit_point
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, "_fit_point", interrupted)
    fit = MonarchLowRank(budget=800, time_limit=None).fit(X)  # far from exact: every point runs
    assert fit.stop_reason_ == "interrupted" and fit.params_["points_tried"] == 2


def test_operator_products_and_layout():
    fit = MonarchLowRank(budget=900, time_limit=None).fit(_planted(n=30, b=6, seed=7))
    op, D = fit.operator_, fit.to_dense()
    x = np.random.default_rng(8).standard_normal((30, 3))
    assert np.allclose(op @ x, D @ x) and np.allclose(op.T @ x, D.T @ x) and np.allclose(op.matvec(x[:, 0]), D @ x[:, 0])
    arrays, _ = op.to_arrays()
    dense = (arrays["U"] * arrays["s"]) @ arrays["Vt"]
    if "left" in arrays:  # the layout the class docstring gives, with numpy alone
        b1, b2 = arrays["left"].shape[1], arrays["left"].shape[0]
        dense = dense + np.einsum("qakt,ktql->aqkl", arrays["left"], arrays["right"]).reshape(b1 * b2, b1 * b2)[:30, :30]
    assert np.allclose(dense, D)


@pytest.mark.parametrize("change, match", [
    (lambda a, t: a.pop("U"), "missing"),
    (lambda a, t: a.pop("right"), "come together"),
    (lambda a, t: a.update(s=a["s"][:-1]), "rank"),
    (lambda a, t: a["Vt"].__setitem__((0, 0), np.nan), "finite"),
])
def test_from_arrays_round_trip_and_refusals(change, match):
    X = _planted(n=30, b=6, seed=9)
    op = MonarchLowRank(budget=900, max_splits=1, time_limit=None).fit(X).operator_
    assert op.monarch is not None and len(op.s) >= 1
    arrays, attrs = op.to_arrays()
    back = MonarchLowRankOperator.from_arrays(arrays, attrs)
    assert np.array_equal(back.to_dense(), op.to_dense()) and back.n_stored == op.n_stored
    arrays = {k: v.copy() for k, v in arrays.items()}
    change(arrays, attrs)
    with pytest.raises(ValueError, match=match):  # load_factors makes it an InputError naming the file
        MonarchLowRankOperator.from_arrays(arrays, attrs)


def test_saved_and_loaded_through_the_factor_file(tmp_path):
    from sfapprox import compare, load_factors
    from sfapprox.factors import save_results

    X = np.random.default_rng(10).random((20, 20))
    c = compare(X, ["monarch+lr"], budget=1.0, device="cpu")
    (path,) = save_results(c, tmp_path / "saved")
    saved = load_factors(path)
    assert saved.kind == "monarch+lr" and saved.n_stored == c.results[0].nnz
    assert np.allclose(saved.to_dense(), c.results[0].operator.to_dense())


def test_an_alternation_runs_only_when_its_expected_cost_fits(fake_clock, monkeypatch):
    # The initial projection "takes" two hours on the fake clock: the first alternation, expected to
    # cost ALTERNATION_PROJECTIONS of it, does not fit in an hour, and the point is plain Monarch.
    from sfapprox._timing import Deadline

    real, real_within = mod.monarch_project, mod.monarch_project_within

    def slow(*args, **kwargs):
        out = real_within(*args, **kwargs)  # whole (its slab groups fit), then "it took" two hours
        fake_clock.advance(7200.0)
        return out

    monkeypatch.setattr(mod, "monarch_project_within", slow)  # (the initial projection)
    X = np.random.default_rng(5).standard_normal((36, 36))
    shape = mod.monarch_configs_for_budget(36, 1500, 1)[0]
    point = mod._fit_point(X, shape, 3, max_iter=50, tol=0.0, deadline=Deadline.after(3600.0), seed=0)
    assert (point.k, point.iterations, point.reason) == (0, 0, "time_limit") and point.count == shape.count
    left, right = real(X, shape.left_block, shape.right_block, shape.rank)
    assert np.allclose(point.left, left) and np.allclose(point.right, right)


def test_among_points_that_reproduce_x_the_fewest_stored_numbers_win():
    """The grid stopped at its first exact point, which stored the whole budget (256 numbers of a zero or
    constant 16 x 16 matrix) where plain Monarch's 160 are as exact: the fewest numbers win, and a point
    that cannot store fewer is not fitted after X is reproduced."""
    from sfapprox.baselines.monarch import Monarch
    from sfapprox.baselines.monarch_lr import MonarchLowRank

    for X in (np.zeros((16, 16)), np.ones((16, 16))):
        m = MonarchLowRank(budget=256).fit(X)
        assert m.n_stored_ == m.operator_.n_stored == Monarch(budget=256).fit(X).n_stored_ == 160
        assert np.linalg.norm(X - m.to_dense()) <= 1e-12 * max(np.linalg.norm(X), 1.0)
        assert all(g["count"] < 256 for g in m.params_["grid"][1:])  # after the first exact point: fewer only


@pytest.mark.parametrize("seed", [0, 1])
def test_the_low_rank_end_stores_no_round_off_singular_values(seed):
    # Below Monarch's smallest shape only the TSVD end fits: a rank-2 matrix kept rank 4 (196 numbers)
    # and a zero matrix rank 1 (17), where TruncatedSVD stores 98 and 0 for the same error.
    A = np.random.default_rng(seed).standard_normal((24, 2))
    for X, budget in ((A @ A.T, 200), (np.zeros((8, 8)), 32)):
        fit = MonarchLowRank(budget=budget).fit(X)
        tsvd = TruncatedSVD(budget=budget).fit(X)
        assert fit.params_["rank"] == tsvd.rank_ and fit.n_stored_ == tsvd.n_stored_ == fit.operator_.n_stored
        assert np.linalg.norm(X - fit.to_dense()) <= 1e-12 * max(np.linalg.norm(X), 1.0)


def test_an_alternating_point_prices_its_first_truncated_svd_and_keeps_the_limit(fake_clock, monkeypatch):
    # A truncated SVD "takes" 100 s on the fake clock, a projection 1 s.  The low-rank point's SVD
    # prices the alternating points' first one: with 60 s left none starts; unpriced (3 projections
    # expected) each started and its SVD ran the fit past its limit.
    real_project, real_within, real_svd = mod.monarch_project, mod.monarch_project_within, mod._first_low_rank

    def project(*args, **kwargs):
        fake_clock.advance(1.0)
        return real_project(*args, **kwargs)

    def project_within(*args, **kwargs):  # (a point's initial projection)
        fake_clock.advance(1.0)
        return real_within(*args, **kwargs)

    def svd(*args, **kwargs):
        fake_clock.advance(100.0)
        return real_svd(*args, **kwargs)

    monkeypatch.setattr(mod, "monarch_project", project)
    monkeypatch.setattr(mod, "monarch_project_within", project_within)
    monkeypatch.setattr(mod, "_first_low_rank", svd)
    X = np.random.default_rng(5).standard_normal((36, 36))
    fit = MonarchLowRank(budget=1500, time_limit=170.0)
    with pytest.warns(ConvergenceWarning, match="grid points within time_limit"):
        fit.fit(X)
    assert fake_clock.time <= 170.0
    assert all(point["rank"] == 0 or point["blocks"] is None for point in fit.params_["grid"])


def test_a_point_that_cannot_catch_the_best_stops_alternating():
    """A planted low rank + sparse matrix: its low-rank point wins, and the mixed points ran up to their
    1,000 alternations (816 and 1,000 here; 40 s at N = 300, errors above 1.4x the best) where a couple of
    hundred show they cannot reach it.  The kept fit is the same; a point is never abandoned while it
    could catch up at twice its pace."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6)) @ rng.standard_normal((6, 80))
    X[rng.random((80, 80)) < 0.01] += 5.0
    X = np.abs(X)
    fit = MonarchLowRank(time_limit=None, budget=2000).fit(X)
    best = float(np.linalg.norm(X - fit.to_dense()))
    assert fit.params_["monarch_rank"] is None  # the low-rank point wins
    mixed = [g for g in fit.params_["grid"] if g["blocks"] is not None and g["rank"] > 0]
    assert mixed and all(g["iterations"] < 500 and g["fro_error"] > best for g in mixed)
    tsvd = TruncatedSVD(budget=2000).fit(X)
    assert best == pytest.approx(np.linalg.norm(X - tsvd.to_dense()), rel=1e-12)


def test_the_grid_reports_its_points_and_alternations():
    """monarch+lr took no callback: its alternations ran under a bar at "it 0"."""
    from sfapprox._base import RunContext, get_method

    X = np.random.default_rng(0).random((32, 32))
    seen = []
    est = MonarchLowRank(budget=800, max_iter=20, time_limit=None, callback=seen.append).fit(X)
    assert seen[-1]["iteration"] == sum(point["iterations"] for point in est.params_["grid"])
    stages = list(dict.fromkeys(info["stage"] for info in seen))
    assert len(stages) == len(est.params_["grid"]) and any(" + rank " in stage for stage in stages)
    assert seen[-1]["fro_error"] == est.params_["grid"][-1]["fro_error"]
    display = lambda info: None  # noqa: E731
    assert get_method("monarch+lr").make(32, 800, RunContext(callback=display)).callback is display


def test_the_low_rank_svds_power_iterations_keep_to_the_time_limit(slow_power_iterations):
    """Above N = 2,048 the low-rank term's first SVD is randomized, and ran its 4 power iterations whatever
    the limit (the low-rank end at N = 8,192: 39 s of a 10 s limit): each now starts only when it fits, as
    TruncatedSVD's do.  (The randomized solver forced at N = 60; every product "takes" 1 s.)"""
    done = slow_power_iterations(mod)
    X = np.random.default_rng(5).random((60, 60))
    est = MonarchLowRank(budget=tsvd_count(60, 3), time_limit=4.5).fit(X)  # room for low rank alone
    assert done and done[0] == 1 and est.n_stored_ <= tsvd_count(60, 3)


def test_the_first_projection_keeps_the_limit_slab_group_by_slab_group(fake_clock, monkeypatch):
    """Each slab SVD "takes" 1 s of the fake clock: the first point's projection (16 slabs of a 16 x 16
    matrix) ran whole, whatever the limit, as one LAPACK call (16 s of a 5 s limit; at N = 8,192 on 2
    shared cores the projection alone took longer than 10 s).  Its groups of slab SVDs now start only
    when they fit; the blocks not reached stay zero, and the grid stops there."""
    real_svd = np.linalg.svd

    def slow_svd(a, *args, **kwargs):
        if np.ndim(a) >= 3:  # the stacked slab SVDs of a projection (a truncated SVD's are 2-D)
            fake_clock.advance(float(np.prod(np.shape(a)[:-2])))
        return real_svd(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "svd", slow_svd)
    X = np.random.default_rng(3).standard_normal((16, 16))
    fit = MonarchLowRank(budget=200, time_limit=5.0)
    with pytest.warns(ConvergenceWarning, match="grid points within time_limit"):
        fit.fit(X)
    assert fake_clock.time <= 5.0
    assert fit.stop_reason_ == "time_limit" and len(fit.params_["grid"]) == 1
    assert np.linalg.norm(X - fit.to_dense()) == pytest.approx(fit.params_["grid"][0]["fro_error"])


def test_the_projection_by_slab_groups_is_the_whole_one():
    from sfapprox.baselines.monarch import slabs

    X = np.random.default_rng(4).standard_normal((30, 30))
    U, s, Vt = np.linalg.svd(slabs(X, 5, 7), full_matrices=False)
    root = np.sqrt(s[..., :2])
    left, right = mod.monarch_project(X, 5, 7, 2)
    assert np.array_equal(left, (U[..., :2] * root[..., None, :]).transpose(0, 2, 1, 3))
    assert np.array_equal(right, (Vt[..., :2, :] * root[..., :, None]).transpose(1, 2, 0, 3))


def test_a_plain_monarch_point_under_a_limit_is_scored_from_its_singular_values(fake_clock, monkeypatch):
    """Forming M densely "takes" 10 s of the fake clock: a plain Monarch point formed it for its error
    after its projection, uncounted (10 s of a 5 s limit; 0.4-1.5 s at N = 4,096 on 2 shared cores).  Under
    a limit its error is the slabs' dropped singular values' (the same to round-off); without one, as before."""
    real = mod._monarch_dense

    def slow(*args):
        fake_clock.advance(10.0)
        return real(*args)

    monkeypatch.setattr(mod, "_monarch_dense", slow)
    X = np.random.default_rng(6).standard_normal((16, 16))
    fit = MonarchLowRank(budget=200, max_splits=0, time_limit=5.0).fit(X)
    assert fake_clock.time <= 5.0
    unlimited = MonarchLowRank(budget=200, max_splits=0, time_limit=None).fit(X)
    for a, b in zip(fit.params_["grid"], unlimited.params_["grid"]):
        assert a["fro_error"] == pytest.approx(b["fro_error"], rel=1e-12)
    assert np.array_equal(fit.to_dense(), unlimited.to_dense())


@pytest.mark.parametrize("case", ["planted", "gaussian", "low rank", "timed"])
def test_the_fit_keeps_its_chosen_point_s_error_the_same_as_a_scoring_pass_to_round_off(case):
    """monarch+lr computed each point's error against X and kept none: a comparison scored its row by one pass
    more over X.  The kept error is operator_error's to round-off (within 1e-12 of ||X||)."""
    from sfapprox.metrics import operator_error

    X = _planted() if case == "planted" else np.random.default_rng(2).standard_normal((48, 48))
    if case == "low rank":
        X = X[:, :3] @ X[:3]
    est = MonarchLowRank(budget=1200, time_limit=60.0 if case == "timed" else None).fit(X)
    fro, _ = operator_error(X, est.operator_)
    norm = float(np.linalg.norm(X))
    assert abs(est.fro_error_ - fro) <= 1e-12 * norm and est.rel_error_ == pytest.approx(est.fro_error_ / norm)
    if case in ("gaussian", "timed"):
        assert est.fro_error_ == pytest.approx(fro, rel=1e-10)


def test_a_comparison_takes_monarch_lr_s_own_error_rather_than_a_pass_more(monkeypatch):
    from sfapprox import compare, comparison

    scored = []
    real = comparison.operator_error
    monkeypatch.setattr(comparison, "operator_error", lambda X, op, *a, **k: scored.append(op) or real(X, op, *a, **k))
    row = compare(_planted(), ["monarch+lr"], budget=1200, time_limit=None).results[0]
    assert row.status == "ok" and scored == [] and row.fro_error == row.estimator.fro_error_


def test_budget_zero_is_refused_as_every_method_refuses_it():
    """MonarchLowRank(budget=0) was a ParameterError ("must be an int in the range [1, inf)") where every
    other method's budget 0 is a BudgetError saying its smallest fit (a comparison's "not applicable")."""
    X = np.random.default_rng(0).random((16, 16))
    with pytest.raises(BudgetError, match=r"^budget 0 is below the smallest fit of a 16 x 16 matrix \(one rank: 33 "):
        MonarchLowRank(budget=0).fit(X)
    with pytest.raises(ParameterError):
        MonarchLowRank(budget=-1).fit(X)


def test_counts_and_orders_are_said_as_other_messages_say_them(monkeypatch):
    """"fitted 1 of 4800 grid points", "16 dense 1000 x 1000 working arrays": thousands separated
    (formats.counted), as the tables write counts."""
    from sfapprox import ResourceError

    with pytest.raises(ResourceError, match=r"monarch\+lr: 16 dense 1,\d{3} x 1,\d{3} working arrays"):
        MonarchLowRank(budget=20_000, max_memory=10**6).fit(np.eye(1000))
    grid = MonarchLowRank._grid
    monkeypatch.setattr(MonarchLowRank, "_grid", lambda self, n: grid(self, n) * 400)  # a grid of thousands
    with pytest.warns(ConvergenceWarning, match=r"^monarch\+lr fitted 1 of \d,\d{3} grid points within time_limit=0 s"):
        MonarchLowRank(budget=4000, time_limit=0).fit(np.random.default_rng(5).standard_normal((48, 48)))
