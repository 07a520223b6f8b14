"""The starts of an SF fit (:mod:`sfapprox.sf._multistart`): the rank-one start's construction, its top
pair and the rule that takes it.  The race itself is tested through ChordSF (tests/test_model.py)."""

import math

import numpy as np
import pytest

from sfapprox.chord import chord_offsets, default_n_factors, support_offsets
from sfapprox.operators import ChordOperator
from sfapprox.sf._multistart import (RANK_ONE_MARGIN, multiple_error, rank_one_applies, rank_one_error,
                                     rank_one_pays, rank_one_values, top_bound, top_pair)


def _product(values: np.ndarray, offsets) -> np.ndarray:
    return ChordOperator(values, np.asarray(offsets)).to_dense()


@pytest.mark.parametrize("n", [1, 2, 4, 8, 64, 256])
@pytest.mark.parametrize("support", ["chord", "symmetric"])
def test_for_n_a_power_of_two_the_product_is_exactly_u_v_transposed(n, support):
    rng = np.random.default_rng(n)
    u, v = rng.standard_normal(n), rng.standard_normal(n)
    offsets = support_offsets(n, support, 2)
    values = rank_one_values(u, v, offsets, default_n_factors(n))
    np.testing.assert_allclose(_product(values, offsets), np.outer(u, v), atol=1e-12 * np.abs(np.outer(u, v)).max())


def test_extra_factors_are_multiples_of_the_identity_and_every_factor_has_the_same_norm():
    n = 32
    u, v = np.arange(1.0, n + 1), np.cos(np.arange(n))
    offsets = chord_offsets(n)
    values = rank_one_values(u, v, offsets, 7)  # 5 would do: two more
    np.testing.assert_allclose(_product(values, offsets), np.outer(u, v), rtol=1e-11, atol=1e-11)
    assert np.count_nonzero(values[5:, :, 1:]) == 0  # the identity's offset 0 only
    jumps = np.linalg.norm(values[:5].reshape(5, -1), axis=1)
    assert jumps == pytest.approx(np.full(5, jumps[0]), rel=1e-12)  # a balanced start, not one big factor


@pytest.mark.parametrize("n", [3, 100, 300])
def test_for_other_n_the_doubled_entries_cost_what_rank_one_error_says(n):
    """With u = v = 1 the doubled share q of the entries is all the error: the best multiple's
    relative error is sqrt(q (1 - q) / (1 + 3 q)), what rank_one_error adds for that N."""
    ones = np.ones(n)
    offsets = chord_offsets(n)
    P = _product(rank_one_values(ones, ones, offsets, default_n_factors(n)), offsets)
    assert set(np.unique(np.round(P, 9))) == {1.0, 2.0}
    X = np.ones((n, n))
    error = multiple_error(float((X * P).sum()), float((P * P).sum()), float(n * n))
    assert error == pytest.approx(rank_one_error(float(n), float(n * n), n), rel=1e-9)
    assert 0.2 < error < 0.45


def test_where_the_support_cannot_hold_it_there_is_no_rank_one_start():
    assert rank_one_applies(64, chord_offsets(64), 6)
    assert not rank_one_applies(64, chord_offsets(64), 5)  # fewer factors than jumps
    assert not rank_one_applies(81, support_offsets(81, "chord", 3), 4)  # base 3: no 2, 8, 16
    with pytest.raises(ValueError, match="no rank-one start"):
        rank_one_values(np.ones(81), np.ones(81), support_offsets(81, "chord", 3), 4)


def test_a_zero_vector_gives_zero_factors():
    values = rank_one_values(np.zeros(8), np.ones(8), chord_offsets(8), 3)
    assert values.shape == (3, 8, 4) and not values.any()


def test_the_top_pair_is_numpy_s_top_singular_triple():
    rng = np.random.default_rng(0)
    X = np.outer(rng.standard_normal(300), rng.standard_normal(300)) * 5 + 0.1 * rng.standard_normal((300, 300))
    u, v, s = top_pair(lambda B: X @ B, lambda B: X.T @ B, 300, n_iter=4, seed=1)
    U, S, Vt = np.linalg.svd(X)
    assert s == pytest.approx(S[0], rel=1e-10)
    np.testing.assert_allclose(np.outer(u, v), S[0] * np.outer(U[:, 0], Vt[0]), atol=1e-8 * S[0])


def test_the_rank_one_start_pays_only_by_its_margin():
    # the best constant of a near-constant matrix is as good as rank one: no
    for where, margin in RANK_ONE_MARGIN.items():
        assert not rank_one_pays(0.5, 0.5, where)
        assert rank_one_pays(margin * 0.8, 0.8, where) and not rank_one_pays(margin * 0.8 + 1e-9, 0.8, where)
    assert RANK_ONE_MARGIN["memory"] < RANK_ONE_MARGIN["columns"]  # in memory a start that leads early may end worse
    assert multiple_error(0.0, 1.0, 4.0) == 1.0 and multiple_error(1.0, 0.0, 4.0) == 1.0
    assert rank_one_error(2.0, 4.0, 64) == 0.0 and rank_one_error(0.0, 0.0, 64) == 0.0
    assert math.isclose(rank_one_error(1.0, 4.0, 64), math.sqrt(0.75))


@pytest.mark.parametrize("seed", range(6))
def test_top_bound_is_never_below_the_largest_singular_value(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 90))
    X = rng.standard_normal((n, n)) * rng.choice([1e-8, 1.0, 1e8]) + rng.choice([0.0, 3.0])
    assert top_bound(X, rows=7) >= np.linalg.norm(X, 2) * (1 - 1e-12)
    assert top_bound(X, rows=7) == pytest.approx(top_bound(X))  # the row blocks change nothing


def test_the_rank_one_start_that_cannot_pay_at_its_bound_costs_no_power_iterations(monkeypatch):
    """init="auto" made the top singular pair (9 products with X: 7-8 s at N = 16,384) even where the
    rank-one start could not pay; where its singular value's bound already says so, it is not made, and
    the fit is the same."""
    import sfapprox
    from sfapprox.sf import model

    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return top_pair(*args, **kwargs)

    monkeypatch.setattr(model, "top_pair", counted)
    noise = np.random.default_rng(0).standard_normal((64, 64))
    X = np.kron(np.eye(8), np.ones((8, 8))) + 0.01 * noise  # 8 clusters: s1^2 / ||X||^2 <= 1/8 at the bound
    fit = sfapprox.ChordSF(max_iter=30, time_limit=None, device="cpu").fit(X)
    assert calls == [] and "rank1" not in fit.starts_
    near_rank_one = np.outer(np.arange(1.0, 65.0), np.ones(64)) + 0.01 * noise  # it pays here: made as before
    fit = sfapprox.ChordSF(max_iter=30, time_limit=None, device="cpu").fit(near_rank_one)
    assert calls == [1] and "rank1" in fit.starts_


def test_the_race_and_the_final_leg_read_the_fit_s_clock(fake_clock, monkeypatch):
    """Each leg "takes" the seconds it is given on the fake clock: the race charges each start what its
    legs took, and the best start continues with what the whole limit has left (it read
    ``time.perf_counter``, which a fake clock does not reach: the last leg was given the whole limit)."""
    from sfapprox.sf import _multistart
    from sfapprox.sf._solver import LBFGSOptions, StopReason

    limits = []

    def lbfgs(fun, state, options, report):
        limits.append(options.time_limit)
        fake_clock.advance(options.time_limit)
        state["n_iter"] += options.max_iter
        state["best_loss"] = fun
        return StopReason.TIME_LIMIT

    monkeypatch.setattr(_multistart, "lbfgs", lbfgs)
    runs = {"identity": (1.0, {"n_iter": 0, "best_loss": math.inf}),
            "reference": (1.1, {"n_iter": 0, "best_loss": math.inf})}
    name, _ = _multistart.multistart(runs, lambda it, t: LBFGSOptions(max_iter=it, time_limit=t),
                                     max_iter=10_000, time_limit=100.0, probe=0.2)
    assert name == "identity"
    assert fake_clock.time <= 100.0 + 1e-9  # close starts: the race took its 20 s a start, the last leg the rest
    assert limits[-1] == pytest.approx(100.0 - 2 * 20.0)
