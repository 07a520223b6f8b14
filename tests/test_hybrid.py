import math
import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sfapprox import BudgetError, FitSettings, ParameterError, compare, load_factors, save_factors
from sfapprox.budget import (
    hybrid_count,
    sf_config_for_budget,
    sf_count,
    sf_lr_count,
    sf_s_count,
    tsvd_rank_for_budget,
)
from sfapprox.chord import chord_offsets
from sfapprox.hybrid import ChordLowRank, ChordSparse
from sfapprox.hybrid.grid import sf_lr_splits, sf_s_splits
from sfapprox.hybrid.objectives import _lr_objective, _sparse_objective
from sfapprox.operators import HybridOperator
from sfapprox.sf import _kernels as K

FAST = {"max_iter": 60}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Many tiny kernels: a second thread that the OS deschedules makes each of them far slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _planted(n: int, n_factors: int, rank: int, seed: int = 0) -> np.ndarray:
    """Product of near-identity Chord factors plus a rank-``r`` part of the same norm."""
    rng = np.random.default_rng(seed)
    offs = chord_offsets(n)
    w = 0.5 * rng.standard_normal((n_factors, n, len(offs))) / math.sqrt(len(offs))
    w[:, :, 0] += 1.0
    P = K.chord_product(torch.from_numpy(w), offs.tolist()).numpy()
    L = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, n))
    return P + L * np.linalg.norm(P) / np.linalg.norm(L)


def _by_method(c):
    return {r.method: r for r in c.results}


# --------------------------------------------------------------------------- the guarantee
@pytest.mark.parametrize("budget", ["sf", 1300])
def test_never_worse_than_sf_and_tsvd_at_equal_budget(budget):
    X = np.random.default_rng(0).random((32, 32)) + np.eye(32)
    r = _by_method(compare(X, ["sf", "tsvd", "sf+lr", "sf+s"], budget=budget, settings=FitSettings(device="cpu", **FAST)))
    best_end = min(r["sf"].fro_error, r["tsvd"].fro_error)
    assert r["sf+lr"].fro_error <= best_end * (1 + 1e-3)
    assert r["sf+s"].fro_error <= r["sf"].fro_error * (1 + 1e-3)
    # Both ends of the grid are those methods, computed the same way (same settings and seed).
    grid = {p["split"]: p for p in r["sf+lr"].params["grid"]}
    assert grid["sf"]["fro_error"] == pytest.approx(r["sf"].fro_error, rel=1e-12)
    assert grid["lr"]["fro_error"] == pytest.approx(r["tsvd"].fro_error, rel=1e-12)
    assert grid["lr"]["rank"] == r["tsvd"].params["rank"]


def test_strictly_better_on_a_planted_chord_plus_low_rank_matrix():
    n, m, rank = 16, 3, 2
    X = _planted(n, m, rank)
    budget = sf_lr_count(n, m, len(chord_offsets(n)), rank)
    h = ChordLowRank(budget=budget, max_splits=1, sf_params={"max_iter": 600}, device="cpu").fit(X)
    grid = {p["split"]: p for p in h.params_["grid"]}
    assert (h.params_["n_factors"], h.params_["rank"]) == (m, rank)  # the planted split
    assert h.rel_error_ < 0.05 and h.rel_error_ < 0.25 * min(grid["sf"]["rel_error"], grid["lr"]["rel_error"])


def test_sparse_hybrid_recovers_planted_spikes():
    n = 16
    rng = np.random.default_rng(3)
    X = K.chord_product(torch.from_numpy(rng.standard_normal((4, n, 5)) * 0.3 + (np.arange(5) == 0)),
                        chord_offsets(n).tolist()).numpy()
    spikes = rng.choice(n * n, 12, replace=False)
    X.ravel()[spikes] += 5.0
    budget = sf_s_count(n, 4, 5, 12, count_indices=True)
    h = ChordSparse(budget=budget, count_indices=True, max_splits=1, sf_params={"max_iter": 600},
                    device="cpu").fit(X)
    grid = {p["split"]: p for p in h.params_["grid"]}
    assert h.params_["split"] == "split" and h.n_sparse_ == 12
    # A short fit finds most spikes (the last few are found with more iterations).
    assert len(set(np.flatnonzero(h.sparse_.toarray())) & set(spikes)) >= 8
    assert h.rel_error_ < 0.2 * min(grid["sparse"]["rel_error"], grid["sf"]["rel_error"])


# --------------------------------------------------------------------------- budget accounting
def test_counts_and_splits_never_exceed_the_budget():
    n = 24
    k = len(chord_offsets(n))
    assert sf_lr_count(n, 3, k, 2) == n * k * 3 + 2 * (2 * n + 1)
    assert sf_s_count(n, 3, k, 10) == n * k * 3 + 10 and sf_s_count(n, 3, k, 10, count_indices=True) == n * k * 3 + 20
    assert hybrid_count(n, 0, 0, rank=1, n_sparse=1) == 2 * n + 2
    for budget in (50, 300, 720, 2000, n * n):
        try:
            plain = sf_config_for_budget(n, budget)
        except BudgetError:
            plain = None
        lr = sf_lr_splits(n, budget, plain)
        ss = sf_s_splits(n, budget, plain, count_indices=True)
        for s in lr + ss:
            assert s.count <= budget
            assert s.count == hybrid_count(n, s.n_factors, s.n_offsets, rank=s.rank, n_sparse=s.n_sparse,
                                           count_indices=s in ss)
        roles = [s.role for s in lr]
        assert ("sf" in roles) == (plain is not None)
        if budget >= 2 * n + 1:
            end = [s for s in lr if s.role == "lr"][0]
            assert end.rank == tsvd_rank_for_budget(n, budget) and end.n_factors == 0
    # The default "sf" budget: the plain end is the reference structure.
    first = sf_lr_splits(n, sf_count(n), sf_config_for_budget(n, sf_count(n)))[0]
    assert (first.role, first.n_factors, first.rank) == ("sf", 5, 0)


@pytest.mark.parametrize("count_indices", [False, True])
def test_estimators_stay_within_budget_and_show_index_storage(count_indices):
    X = np.random.default_rng(1).standard_normal((16, 16))
    for budget in (40, 150, 330):
        h = ChordSparse(budget=budget, count_indices=count_indices, sf_params=FAST, device="cpu").fit(X)
        assert h.n_stored_ <= budget
        assert h.n_stored_ == h.factors_.size + (2 if count_indices else 1) * h.n_sparse_
        assert h.params_["index_storage"] == h.n_sparse_ == h.index_storage_
        assert h.params_["count_indices"] is count_indices
        assert all("index_storage" in p and p["count"] <= budget for p in h.params_["grid"])
        lr = ChordLowRank(budget=budget, sf_params=FAST, device="cpu").fit(X)
        assert lr.n_stored_ <= budget
        assert lr.n_stored_ == lr.factors_.size + lr.rank_ * (2 * 16 + 1) == lr.params_["count"]
        assert lr.params_["sf_count"] + lr.params_["lr_count"] == lr.n_stored_


def test_too_small_budget():
    X = np.random.default_rng(2).random((20, 20))
    with pytest.raises(BudgetError, match="below the smallest fit of a 20 x 20 matrix \\(one rank: 41 "):
        ChordLowRank(budget=40, device="cpu").fit(X)
    c = compare(X, ["sf+lr", "sf+s"], budget=40, settings=FitSettings(device="cpu", **FAST))
    lr, s = c.results
    assert lr.status == "not applicable" and "below the smallest fit" in lr.reason
    assert s.status == "ok" and s.params["split"] == "sparse" and s.nnz <= 40
    # the counts with separators, as the tables show them ("budget 1,000 ... one rank: 6,001 stored numbers")
    assert ChordLowRank(budget=1000, device="cpu")._too_small(3000, 1000) == (
        "budget 1,000 is below the smallest fit of a 3,000 x 3,000 matrix (one rank: 6,001 stored numbers)")
    assert ChordSparse(budget=1, device="cpu")._too_small(3000, 1) == (
        "budget 1 is below the smallest fit of a 3,000 x 3,000 matrix (one sparse entry with its position: "
        "2 stored numbers)")


def test_parameters_are_checked_at_fit():
    h = ChordLowRank(max_splits=-1)  # the constructor only stores
    with pytest.raises(ParameterError, match="'max_splits' parameter of ChordLowRank"):
        h.fit(np.eye(4))
    with pytest.raises(ParameterError, match="'count_indices' parameter of ChordSparse"):
        ChordSparse(count_indices="yes").fit(np.eye(4))


# --------------------------------------------------------------------------- the joint gradient
def _autograd(ws, offs, X, correction):
    ws = ws.clone().requires_grad_(True)
    P = K.factor_to_dense(ws[0], offs)
    for m in range(1, ws.shape[0]):
        P = P @ K.factor_to_dense(ws[m], offs)
    C, leaves = correction()
    loss = 0.5 * ((X - P - C) ** 2).sum()
    loss.backward()
    return float(loss.detach()), torch.cat([ws.grad.reshape(-1)] + [t.grad.reshape(-1) for t in leaves])


@pytest.mark.parametrize("kernel", [K.loss_and_grad, K.loss_and_grad_dense, K.loss_and_grad_panels])
@pytest.mark.parametrize("n,m", [(9, 2), (16, 4)])
@pytest.mark.parametrize("thin", ["dense", "shifts"])
def test_joint_gradients_match_autograd(kernel, n, m, thin, monkeypatch):
    if thin == "shifts":  # the thin products' large-N path (shifted adds), on a small N
        monkeypatch.setattr(K, "DENSE_MAX_N", 0)
    g = torch.Generator().manual_seed(n)
    offs = chord_offsets(n).tolist()
    shape = (m, n, len(offs))
    ws = torch.randn(shape, dtype=torch.float64, generator=g)
    X = torch.randn(n, n, dtype=torch.float64, generator=g)
    rank = 3
    U = torch.randn(n, rank, dtype=torch.float64, generator=g)
    V = torch.randn(n, rank, dtype=torch.float64, generator=g)

    def low_rank():
        u, v = U.clone().requires_grad_(True), V.clone().requires_grad_(True)
        return u @ v.T, [u, v]

    loss, grad = _lr_objective(kernel, offs, X, shape, rank)(torch.cat([ws.reshape(-1), U.reshape(-1), V.reshape(-1)]))
    ref_loss, ref_grad = _autograd(ws, offs, X, low_rank)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert torch.allclose(grad, ref_grad, rtol=0, atol=1e-10 * max(1.0, float(ref_grad.abs().max())))

    flat = torch.as_tensor(np.sort(np.random.default_rng(n).choice(n * n, 2 * n, replace=False)))
    vals = torch.randn(flat.numel(), dtype=torch.float64, generator=g)

    def sparse():
        v = vals.clone().requires_grad_(True)
        S = torch.zeros(n * n, dtype=torch.float64).index_put((flat,), v).view(n, n)
        return S, [v]

    loss, grad = _sparse_objective(kernel, offs, X, shape, flat)(torch.cat([ws.reshape(-1), vals]))
    ref_loss, ref_grad = _autograd(ws, offs, X, sparse)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert torch.allclose(grad, ref_grad, rtol=0, atol=1e-10 * max(1.0, float(ref_grad.abs().max())))


# --------------------------------------------------------------------------- results and files
@pytest.mark.parametrize("cls,budget", [(ChordLowRank, 400), (ChordSparse, 400), (ChordLowRank, 100),
                                        (ChordSparse, 60)])
def test_save_load_matvec_round_trip(tmp_path, cls, budget):
    X = np.random.default_rng(4).standard_normal((16, 16))
    h = cls(budget=budget, sf_params=FAST, device="cpu").fit(X)
    path = tmp_path / "h.h5"
    kind = "sf+lr" if cls is ChordLowRank else "sf+s"
    save_factors(path, h.operator_, kind=kind, fit={"fro_error": h.fro_error_}, settings=h.params_)
    saved = load_factors(path)
    assert saved.kind == kind
    assert isinstance(saved.operator, HybridOperator) and saved.n_stored == h.n_stored_
    D = h.to_dense()
    x = np.random.default_rng(5).standard_normal(16)
    B = np.random.default_rng(6).standard_normal((16, 3))
    assert np.allclose(saved.matvec(x), D @ x) and np.allclose(saved.rmatvec(x), D.T @ x)
    assert np.allclose(saved.matmat(B), D @ B) and np.allclose(saved.to_dense(), D)
    assert np.allclose(h.to_operator() @ x, D @ x)
    assert np.linalg.norm(X - D) == pytest.approx(h.fro_error_)
    assert saved.settings["grid"][0]["split"] == h.params_["grid"][0]["split"]


def test_low_rank_part_is_orthonormal_and_operator_counts():
    X = _planted(16, 2, 2, seed=1)
    h = ChordLowRank(budget=sf_lr_count(16, 2, 5, 2), max_splits=1, sf_params=FAST, device="cpu").fit(X)
    U, s, Vt = h.low_rank_
    assert np.allclose(U.T @ U, np.eye(h.rank_)) and np.allclose(Vt @ Vt.T, np.eye(h.rank_))
    assert np.all(np.diff(s) <= 0) and h.operator_.n_stored == h.n_stored_


def test_interrupt_keeps_the_best_point_and_marks_the_row():
    calls = []

    def interrupt(info):
        calls.append(info)
        if len(calls) > 5:
            raise KeyboardInterrupt

    X = np.random.default_rng(7).random((16, 16))
    c = compare(X, ["sf+lr", "tsvd"], budget=300, settings=FitSettings(device="cpu", **FAST), callback=interrupt)
    assert [r.status for r in c.results] == ["interrupted", "ok"]  # tsvd, closed form, ran first
    assert c.results[0].fro_error is not None and c.results[0].nnz <= 300


def test_zero_matrix_and_sparse_input():
    h = ChordLowRank(budget=200, sf_params=FAST, device="cpu").fit(np.zeros((12, 12)))
    assert h.fro_error_ == 0.0 and h.rel_error_ is None
    X = sp.random(20, 20, density=0.1, random_state=0, format="csr")
    s = ChordSparse(budget=2 * int(X.nnz), device="cpu", sf_params=FAST).fit(X)  # value + position each
    assert s.fro_error_ == pytest.approx(0.0, abs=1e-12) and s.params_["split"] == "sparse"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_joint_fit_scores_like_cpu():
    X = _planted(32, 3, 2)
    budget = sf_lr_count(32, 3, 6, 2)
    gpu = ChordLowRank(budget=budget, max_splits=1, sf_params={"max_iter": 300}, device="cuda", dtype="float64").fit(X)
    cpu = ChordLowRank(budget=budget, max_splits=1, sf_params={"max_iter": 300}, device="cpu").fit(X)
    assert gpu.device_.startswith("cuda") and gpu.n_stored_ == cpu.n_stored_
    assert gpu.rel_error_ == pytest.approx(cpu.rel_error_, rel=0.05, abs=1e-3)


# --------------------------------------------------------------------------- time limits
def test_split_starts_pays_for_the_least_work_or_skips():
    from sfapprox.hybrid.base import MIN_SPLIT_EVALS, StepCosts, split_need, split_starts

    c = StepCosts(begin=2.0, evaluation=1.0, score=1.5)
    one = 2.0 + 1.0 + MIN_SPLIT_EVALS * 1.0 + 1.5
    assert split_need(c, 1, warm=False) == one and split_need(c, 2, warm=False) == one + 3.0
    assert split_starts(one + 3.0, c, 2, warm=False) == 2  # both starts probed
    assert split_starts(one + 2.9, c, 2, warm=False) == 1  # only ChordSF's default start
    assert split_starts(one - 0.1, c, 2, warm=False) == 0  # skipped
    assert split_starts(3.5, c, 1, warm=True) == 1 and split_starts(3.4, c, 1, warm=True) == 0
    assert split_starts(math.inf, StepCosts(1e9, 1e9, 1e9), 2, warm=False) == 2  # no time limit


@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
def test_points_the_time_left_cannot_pay_for_are_skipped_and_said(cls, monkeypatch):
    # Steps "known" to cost a day each: under a 30 s limit no joint point fits, so each is skipped
    # (recorded, never started) and the best of the plain ends is kept, within the budget (450 < 24^2:
    # the largest entries alone do not reproduce X, which would end the grid).
    from sfapprox.hybrid import base

    monkeypatch.setattr(cls, "_first_costs", lambda self: base.StepCosts(86400.0, 86400.0, 86400.0))
    X = _planted(24, 3, 2, seed=3)
    h = cls(budget=450, sf_params={"max_iter": 40, "time_limit": 30.0}, device="cpu").fit(X)
    skipped = [g for g in h.grid_ if g.get("skipped")]
    assert skipped and all(g["split"] in ("split", "sf+rest") and g["fro_error"] is None for g in skipped)
    assert h.stop_reason_ == "time_limit" and h.n_stored_ <= 450
    assert h.params_["split"] in ("sf", "lr", "sparse")
    # Without a time limit the same grid runs every point.
    free = cls(budget=450, sf_params={"max_iter": 40, "time_limit": None}, device="cpu").fit(X)
    assert not any(g.get("skipped") for g in free.grid_) and free.fro_error_ <= h.fro_error_ + 1e-9


def test_a_reselection_runs_only_when_the_time_left_pays_for_it(monkeypatch):
    # sf+s re-chooses its support in phases; when a re-selection would not fit before the point's
    # deadline (reselect_fits says no), the fit goes on with the support it has.
    from sfapprox.hybrid import base

    calls = []
    real = ChordSparse._refresh
    monkeypatch.setattr(ChordSparse, "_refresh", lambda self, *a: calls.append(1) or real(self, *a))
    X = _planted(24, 3, 2, seed=4)
    fit = lambda: ChordSparse(budget=450, max_splits=1, sf_params={"max_iter": 60}, device="cpu").fit(X)  # noqa: E731
    fit()
    assert calls  # with time, the phases re-select
    calls.clear()
    monkeypatch.setattr(base, "reselect_fits", lambda left, costs: False)
    assert fit().n_stored_ <= 450 and not calls


def test_in_a_comparison_the_grid_ends_are_the_sf_and_tsvd_rows():
    """sf+lr starts from sf's and tsvd's own fits: never worse than either, under any time limit."""
    X = np.random.default_rng(11).random((40, 40))
    c = compare(X, ["sf+lr", "tsvd", "sf+s", "sf"], settings=FitSettings(device="cpu", time_limit=0.5))
    rows = {r.method: r for r in c.results}
    assert [r.method for r in c.results] == ["sf+lr", "tsvd", "sf+s", "sf"]
    assert rows["sf+lr"].params["reused"] == ["sf", "tsvd"] and rows["sf+s"].params["reused"] == ["sf"]
    best_end = min(rows["sf"].fro_error, rows["tsvd"].fro_error)
    assert rows["sf+lr"].fro_error <= best_end * (1 + 1e-12)
    assert rows["sf+s"].fro_error <= rows["sf"].fro_error * (1 + 1e-12)
    plain = next(g for g in rows["sf+lr"].params["grid"] if g["split"] == "sf")
    assert plain["fro_error"] == pytest.approx(rows["sf"].fro_error) and plain["seconds"] == 0.0
    alone = compare(X, ["sf+lr"], settings=FitSettings(device="cpu", time_limit=0.5)).results[0]
    assert "reused" not in alone.params


@pytest.mark.parametrize("name", ["sf+lr", "sf+s"])
def test_joint_fits_over_the_memory_limit_are_refused_before_the_grids_ends_are_fitted(monkeypatch, name):
    """The joint fits' memory is checked first: a hybrid over the limit fits nothing (its SF and closed-form
    ends ran, in memory, before the refusal, and the sparse end alone could pass the limit)."""
    from sfapprox import ResourceError
    from sfapprox._validation import LIBRARY_WORKING_SET
    from sfapprox.hybrid import base

    fitted = []
    cls = ChordLowRank if name == "sf+lr" else ChordSparse
    monkeypatch.setattr(base._ChordHybrid, "_fit_plain", lambda self, *a: fitted.append("sf"))
    monkeypatch.setattr(cls, "_fit_end", lambda self, *a: fitted.append("end"))
    X = np.random.default_rng(0).random((48, 48))
    with pytest.raises(ResourceError, match=f"fitting {re.escape(name)} to the 48 x 48 matrix"):
        cls(sf_params={"max_memory": LIBRARY_WORKING_SET}, device="cpu").fit(X)
    assert fitted == []


@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
def test_unknown_sf_params_and_a_callback_that_is_not_one_are_refused(cls):
    X = np.random.default_rng(0).random((16, 16))
    with pytest.raises(ParameterError, match=r"ChordSF has no parameter 'bogus' \(in sf_params\)"):
        cls(sf_params={"bogus": 1}, device="cpu").fit(X)
    with pytest.raises(ParameterError, match="must be a callable or None"):
        cls(callback=3, device="cpu").fit(X)


def test_the_hybrids_refuse_the_rank_one_start():
    """init="rank1" is SF's start alone: a hybrid asked for it says so (it raced the usual two before)."""
    X = np.random.default_rng(0).random((64, 64))
    with pytest.raises(ParameterError, match="init='rank1' is SF's start alone"):
        ChordLowRank(budget=2000, sf_params={"init": "rank1"}, device="cpu").fit(X)


# ---- audit fixes (2026-11-27): support, refits, sf_params, budget 0

@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
def test_a_support_other_than_chords_is_refused_not_fitted(cls):
    """support="butterfly" in sf_params handed an empty offset list to the Chord kernel: a segmentation
    fault. The hybrids fit Chord factors; another support is refused before any work."""
    from sfapprox import NotApplicableError

    X = np.random.default_rng(0).random((16, 16))
    for support in ("butterfly", "symmetric"):
        with pytest.raises(NotApplicableError, match=f"support='{support}' is for sf alone"):
            cls(budget=320, sf_params={"support": support, "time_limit": 3}, device="cpu").fit(X)
    # A comparison's structure names no support: each SF method fits its own (it was overwritten silently).
    with pytest.raises(ParameterError, match="the support is the SF method's own"):
        compare(X, methods=["sf-butterfly", "sf+s"], structure={"support": "butterfly"}, time_limit=3)


def test_a_hybrid_from_a_comparison_refitted_to_another_matrix_fits_that_matrix():
    """The comparison's sf and tsvd fits are handed over for its own fit only: fitted again to another
    matrix, the hybrid reported the first matrix's error (0.037 for an actual 33)."""
    rng = np.random.default_rng(0)
    X1 = np.eye(32) + 0.01 * rng.random((32, 32))
    X2 = rng.standard_normal((32, 32))
    est = compare(X1, methods=["sf", "tsvd", "sf+lr"], time_limit=2).result("sf+lr").estimator
    assert est.params_["reused"] == ["sf", "tsvd"]
    est.fit(X2)
    assert "reused" not in est.params_
    assert est.fro_error_ == pytest.approx(np.linalg.norm(X2 - est.to_dense()), rel=1e-9)


@pytest.mark.parametrize("bad, message", [
    ({"history_size": 0}, "'history_size' parameter of ChordSF"),
    ({"time_limit": -1.0}, "Got -1.0 instead"),
    ({"time_limit": float("nan")}, "'time_limit' parameter"),
    ({"max_iter": -3}, "'max_iter' parameter"),
    ({"gtol": "x"}, "'gtol' parameter"),
    ({"init": "bogus"}, "init='bogus' is SF's start alone"),
])
def test_sf_params_are_checked_as_given_whether_or_not_the_plain_end_runs(bad, message):
    """At budget 150 (N = 16) no plain SF structure fits, and sf_params were never checked: an IndexError
    for history_size=0, silence for time_limit=-1; at 320 the message showed -0.4 (the plain end's share)."""
    X = np.random.default_rng(0).random((16, 16))
    for budget in (150, 320):
        with pytest.raises(ParameterError, match=re.escape(message)):
            ChordLowRank(budget=budget, sf_params=dict(bad), device="cpu").fit(X)


def test_a_budget_of_zero_is_a_budget_error_as_for_every_method():
    X = np.random.default_rng(0).random((16, 16))
    for cls in (ChordLowRank, ChordSparse):
        with pytest.raises(BudgetError, match="below the smallest fit"):
            cls(budget=0, device="cpu").fit(X)


def test_under_a_time_limit_the_best_point_goes_on_from_its_fit():
    """A sparse 64 x 64 matrix at 1 s: every joint point cut short lost to the plain end, which had 40 % of
    the limit, so sf+lr ended worse than sf at the same limit (0.184 against 0.173 at 2 s).  A share of the
    limit is kept, and the best point, stopped on its time limit, goes on from its fit in it."""
    import warnings

    from sfapprox import ConvergenceWarning

    rng = np.random.default_rng(0)
    n = 64
    cols = np.concatenate([rng.choice(n, 5, replace=False) for _ in range(n)])
    X = sp.csr_array((rng.standard_normal(5 * n), (np.repeat(np.arange(n), 5), cols)), shape=(n, n)).toarray()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        h = ChordLowRank(sf_params={"time_limit": 1.0}, device="cpu").fit(X)
    chosen = next(g for g in h.grid_ if g["fro_error"] == h.fro_error_)
    assert chosen["start"].endswith(", then from its fit") and chosen["split"] in ("sf", "split")
    assert h.stop_reason_ == "time_limit" and h.wall_seconds_ < 1.5


def test_the_plain_end_s_kernel_loading_is_outside_the_hybrid_s_time_limit(monkeypatch):
    """Loading (or compiling) SF's kernels is outside a fit's time limit; the plain end's took the hybrid's:
    sf+lr at 2 s, the kernels' loading 1.5 s (a first fit in a process), skipped every joint point."""
    import time
    import warnings

    from sfapprox import ConvergenceWarning
    from sfapprox.sf import _kernels

    real, calls = _kernels.warm_up_numba, []

    def first_slow(*args, **kwargs):  # 1.5 s of loading, the first time only
        if not calls:
            time.sleep(1.5)
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_kernels, "warm_up_numba", first_slow)
    X = _planted(24, 3, 2, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        h = ChordLowRank(sf_params={"time_limit": 2.0}, device="cpu").fit(X)  # SF's own budget: the plain end fits
    joint = [g for g in h.grid_ if g["split"] in ("split", "sf+rest")]
    assert h.grid_[0]["split"] == "sf" and joint and any(g.get("skipped") is None for g in joint)
    assert h.wall_seconds_ < 4.5  # the limit and the loading


def test_the_tsvd_end_fits_within_the_hybrids_time_limit(monkeypatch):
    """The low-rank end was a TruncatedSVD of its own default limit (none before it took one), whose
    randomized SVD ran every power iteration whatever the hybrid's limit (sf+lr at N = 8,192: 26 s of
    10 s): it now gets the time the hybrid's limit leaves."""
    from sfapprox.baselines.tsvd import TruncatedSVD
    from sfapprox.hybrid import lowrank

    limits = []

    class Recorded(TruncatedSVD):
        def fit(self, X, *, check_input=True):
            limits.append(self.get_params().get("time_limit", "none"))
            return super().fit(X, check_input=check_input)

    monkeypatch.setattr(lowrank, "TruncatedSVD", Recorded)
    X = np.random.default_rng(0).random((32, 32))
    ChordLowRank(budget=2000, max_splits=1, sf_params={**FAST, "time_limit": 5}, device="cpu").fit(X)
    assert limits and isinstance(limits[0], float) and 0 < limits[0] <= 5


def test_sparse_end_above_the_streamed_order_holds_no_copy_of_the_whole_matrix(monkeypatch):
    """sf+s's exact top-s end held |X|, -|X| and argpartition's positions (three N x N arrays: at
    N = 8,192 a 2.6 GB peak and 25 s); above sparse's streamed order it now selects by row blocks, the
    same entries."""
    import tracemalloc

    import sfapprox.hybrid.sparse as hs
    from sfapprox.hybrid.base import _largest
    from sfapprox.hybrid.grid import HybridSplit

    monkeypatch.setattr(hs, "STREAMED_MIN_N", 64, raising=False)  # this order stands for N = 8,192
    monkeypatch.setattr(hs, "selection_bytes", lambda n: 8 * n * 16, raising=False)  # blocks of a few rows
    n, s = 200, 600
    X = np.random.default_rng(5).standard_normal((n, n))
    split = HybridSplit(role="sparse", base=2, n_factors=0, n_offsets=0, rank=0, n_sparse=s, count=3 * s)
    est = ChordSparse(budget=3 * s)
    expected = _largest(X, s)
    seen = []
    real = np.argpartition
    monkeypatch.setattr(np, "argpartition", lambda a, *k, **kw: (seen.append(np.size(a)), real(a, *k, **kw))[1])
    kept = est._fit_end(X, X, 3 * s, split).operator.sparse.tocoo()
    assert np.array_equal(np.sort(kept.row * n + kept.col), expected)  # the same entries
    assert all(size < n * n for size in seen)
    monkeypatch.setattr(hs, "_score", lambda *a, **k: None)  # the selection's own memory (3.0 X before)
    tracemalloc.start()
    try:
        est._fit_end(X, X, 3 * s, split)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * X.nbytes


# --------------------------------------------------------------------------- progress
@pytest.mark.parametrize("cls, words", [(ChordLowRank, "low-rank end: TSVD, rank"),
                                        (ChordSparse, "sparse end: the ")])
def test_the_closed_form_end_is_a_stage_of_its_own_on_the_progress_display(cls, words):
    """The plain SF end reports its iterations, then the closed-form end (TSVD's SVD, the selection of
    the largest entries) ran without a report: a progress bar stood on SF's last step, as if SF still ran.
    It is now a stage of its own, then its error, before the joint fits report theirs."""
    X = np.random.default_rng(0).random((16, 16)) + np.eye(16)
    seen = []
    h = cls(sf_params={"max_iter": 20}, device="cpu", callback=seen.append).fit(X)
    roles = [p["split"] for p in h.grid_]
    assert roles[:2] == ["sf", "lr" if cls is ChordLowRank else "sparse"]
    staged = [i for i, info in enumerate(seen) if info.get("stage", "").startswith(words)]
    assert len(staged) == 2, seen
    first, done = seen[staged[0]], seen[staged[1]]
    assert staged[0] > 0 and "stage" not in seen[staged[0] - 1]  # after the plain SF end's own reports
    before = seen[staged[0] - 1]
    # said as it starts; it counts no iteration: the whole fit's count stands (it went back to 0 of 1)
    assert (first["iteration"], first["fro_error"]) == (before["iteration"], None)
    assert first["max_iter"] <= before["max_iter"]  # the most the fit may take, lowered once the grid is known
    assert done["iteration"] == first["iteration"] and done["fro_error"] == pytest.approx(h.grid_[1]["fro_error"])
    assert done["elapsed"] >= first["elapsed"] > 0  # the hybrid's time, going on from the plain end's
    assert staged[1] < len(seen) - 1 and "stage" not in seen[-1]  # then the joint fits


@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
def test_a_stop_during_the_closed_form_end_keeps_the_plain_sf_end(cls, monkeypatch):
    """A Ctrl-C or SIGTERM while the closed-form end ran (sf+lr's TSVD, sf+s's selection: seconds at N =
    3,000, now a progress stage of its own) left the fit by its KeyboardInterrupt: the plain SF end, 40 %
    of the time limit fitted, was lost with it, where a stop during a joint fit keeps the best point."""
    X = np.random.default_rng(0).random((16, 16)) + np.eye(16)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cls, "_fit_end", stopped)
    try:
        h = cls(sf_params={"max_iter": 20}, device="cpu").fit(X)
    except KeyboardInterrupt:  # (a failure, not the end of the test session)
        pytest.fail("the stop threw the plain SF end away")
    assert h.stop_reason_ == "interrupted" and [p["split"] for p in h.grid_] == ["sf"]
    assert h.fro_error_ == pytest.approx(np.linalg.norm(X - h.operator_.to_dense()))
    c = compare(X, [cls._method], budget=h.n_stored_, settings=FitSettings(device="cpu", **FAST))
    assert [(r.status, r.fro_error is not None) for r in c.results] == [("interrupted", True)]  # its row kept


@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
def test_the_joint_fits_report_the_time_since_the_hybrids_fit_began(cls, monkeypatch):
    """Each joint fit reported "elapsed" from its own grid point's start: the progress bar's time went back
    to about 0 at each point, after the closed-form end had said the hybrid's time.  It now runs on."""
    import time

    end = cls._fit_end

    def slow_end(self, *args, **kwargs):  # the closed-form end takes a while: its report says so
        point = end(self, *args, **kwargs)
        time.sleep(0.3)
        return point

    monkeypatch.setattr(cls, "_fit_end", slow_end)
    X = np.random.default_rng(0).random((16, 16)) + np.eye(16)
    seen = []
    cls(sf_params={"max_iter": 20}, device="cpu", callback=seen.append).fit(X)
    last_stage = max(i for i, info in enumerate(seen) if info.get("stage"))
    joint = seen[last_stage + 1:]
    assert joint and all(info["elapsed"] >= seen[last_stage]["elapsed"] >= 0.3 for info in joint)
    times = [info["elapsed"] for info in seen]
    assert times == sorted(times)  # never back, the plain end's, the closed-form end's and the joint fits'


def test_a_memory_refusal_comes_before_the_dense_copy_of_a_sparse_matrix():
    """The joint fits' memory was checked after a sparse X's dense float64 copy was made (N^2 numbers a
    refusal did not need): it is now checked first."""
    from sfapprox import ResourceError

    class NoDense(sp.csr_array):
        def toarray(self, *args, **kwargs):
            raise AssertionError("densified before the memory check")

    X = NoDense(sp.random(64, 64, density=0.1, random_state=0, format="csr"))
    for cls in (ChordLowRank, ChordSparse):
        with pytest.raises(ResourceError, match="fitting sf"):
            cls(sf_params={"max_memory": 1 << 20}, device="cpu").fit(X, check_input=False)


@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
@pytest.mark.parametrize("time_limit", [None, 30.0])
def test_the_reported_iterations_go_forward_over_the_whole_fit(cls, time_limit):
    """Each joint fit (each of its starts, each phase) reported its iterations from 0: the progress bar's
    count and fill went back at every grid point.  They now count over the whole fit, up to the most it may
    still take (``max_iter``: lowered as the grid is known and its points end, never raised)."""
    X = np.random.default_rng(0).random((16, 16)) + np.eye(16)
    seen = []
    h = cls(sf_params={"max_iter": 20, "time_limit": time_limit}, device="cpu", callback=seen.append).fit(X)
    assert len([p for p in h.grid_ if p["split"] in ("split", "sf+rest")]) >= 2  # joint points, each reporting
    iterations = [info["iteration"] for info in seen]
    assert iterations == sorted(iterations) and iterations[-1] == h.n_iter_  # every one counted, once
    most = [info["max_iter"] for info in seen]
    assert most == sorted(most, reverse=True) and all(i <= m for i, m in zip(iterations, most))
    fill = [i / m for i, m in zip(iterations, most)]
    assert fill == sorted(fill)  # the bar's fill by iterations never goes back


@pytest.mark.parametrize("cls", [ChordLowRank, ChordSparse])
@pytest.mark.parametrize("max_iter", [0, 1])
def test_a_point_runs_no_more_iterations_than_asked(cls, max_iter):
    """A joint point's race gave each of its two starts at least one iteration: ``max_iter`` 1 ran 2 a point,
    0 ran 2 where none was asked, and the progress then raised its ``max_iter`` past the reported count."""
    X = np.random.default_rng(0).random((16, 16)) + np.eye(16)
    seen = []
    h = cls(sf_params={"max_iter": max_iter}, device="cpu", callback=seen.append).fit(X)
    joint = [p for p in h.grid_ if p["split"] in ("split", "sf+rest")]
    assert joint and all(p["iterations"] <= max_iter for p in joint), [p["iterations"] for p in joint]
    most = [info["max_iter"] for info in seen]
    assert most == sorted(most, reverse=True) and all(info["iteration"] <= info["max_iter"] for info in seen)


def test_counts_and_orders_are_said_as_other_messages_say_them(monkeypatch):
    """"800 of its 1200 grid points did not fit", "fitting sf+lr to the 1024 x 1024 matrix": thousands
    separated (formats.counted), as the tables write counts."""
    from sfapprox import ConvergenceWarning, ResourceError
    from sfapprox._validation import LIBRARY_WORKING_SET
    from sfapprox.hybrid import base

    with pytest.raises(ResourceError, match=r"fitting sf\+lr to the 1,024 x 1,024 matrix"):
        ChordLowRank(sf_params={"max_memory": LIBRARY_WORKING_SET}, device="cpu").fit(np.eye(1024))
    # a grid of thousands: its joint splits over and over, each "known" to cost a day (skipped, never started)
    grid = ChordLowRank._grid
    monkeypatch.setattr(ChordLowRank, "_grid", lambda self, *a: [s for s in grid(self, *a) if s.role == "sf"] +
                        [s for s in grid(self, *a) if s.role != "sf"] * 400)
    monkeypatch.setattr(ChordLowRank, "_first_costs", lambda self: base.StepCosts(86400.0, 86400.0, 86400.0))
    with pytest.warns(ConvergenceWarning, match=r"^sf\+lr: [\d,]+ of its \d,\d{3} grid points did not fit in the "):
        ChordLowRank(budget=450, sf_params={"max_iter": 40, "time_limit": 30.0}, device="cpu").fit(_planted(24, 3, 2, 3))


def test_a_display_says_torch_is_loading_before_a_hybrids_first_phase(slow_import):
    """A hybrid's factory imports SF's estimator (torch with it: 1.2-4 s in a fresh process) under a bar
    that said nothing; its display now says so."""
    from sfapprox import FitSettings
    from sfapprox._base import RunContext
    from sfapprox.hybrid import ChordLowRank
    from sfapprox.hybrid.base import hybrid_estimator

    slow_import("sf.model", "sfapprox.hybrid.base")
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    hybrid_estimator(ChordLowRank, 500, RunContext(FitSettings(device="cpu"), callback=display))
    assert phases == ["loading torch", ""]
