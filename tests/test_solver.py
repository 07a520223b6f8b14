import math

import numpy as np
import pytest
import torch

from sfapprox.sf import _solver


def _rosenbrock(x):
    x = x.detach()
    a, b = x[:-1], x[1:]
    f = ((1 - a) ** 2 + 100 * (b - a * a) ** 2).sum()
    g = torch.zeros_like(x)
    g[:-1] = -2 * (1 - a) - 400 * a * (b - a * a)
    g[1:] += 200 * (b - a * a)
    return float(f), g


def test_minimises_rosenbrock():
    state = _solver.new_state(torch.full((10,), -1.0, dtype=torch.float64))
    reason = _solver.lbfgs(_rosenbrock, state, _solver.LBFGSOptions(max_iter=2000, gtol=1e-10, history_size=10))
    assert reason in ("gtol", "ftol")
    assert torch.allclose(state["best_x"], torch.ones(10, dtype=torch.float64), atol=1e-5)


def _plain_two_loop(S, Y, g, h0):
    """Textbook two-loop recursion (torch.optim.LBFGS's), for comparison."""
    q = -g.clone()
    ro = [1.0 / float(y.dot(s)) for s, y in zip(S, Y)]
    al = [0.0] * len(S)
    for i in range(len(S) - 1, -1, -1):
        al[i] = float(S[i].dot(q)) * ro[i]
        q -= al[i] * Y[i]
    r = q * h0
    for i in range(len(S)):
        be = float(Y[i].dot(r)) * ro[i]
        r += (al[i] - be) * S[i]
    return r


@pytest.mark.parametrize("n_pairs", [3, 8])
def test_cached_gram_direction_equals_two_loop(n_pairs):
    rng = torch.Generator().manual_seed(0)
    n, hist = 30, 5
    A = torch.randn(n, n, dtype=torch.float64, generator=rng)
    H = A @ A.T + n * torch.eye(n, dtype=torch.float64)  # SPD: all pairs accepted
    state = _solver.new_state(torch.zeros(n, dtype=torch.float64))
    pairs = []
    # 3: empty slots left in the buffer; 8: more pairs than the history, the ring wraps
    for _ in range(n_pairs):
        s = torch.randn(n, dtype=torch.float64, generator=rng)
        y = H @ s
        _solver._update_history(state, y, s, hist)
        pairs.append((s, y))
    S = [p[0] for p in pairs[-hist:]]
    Y = [p[1] for p in pairs[-hist:]]
    g = torch.randn(n, dtype=torch.float64, generator=rng)
    h0 = float(S[-1].dot(Y[-1]) / Y[-1].dot(Y[-1]))
    assert math.isclose(state["H_diag"], h0, rel_tol=1e-12)
    assert torch.allclose(_solver._direction(state, g), _plain_two_loop(S, Y, g, h0), rtol=1e-9, atol=1e-12)


def test_stopping_rules_are_reported():
    quad = lambda x: (float(0.5 * x.dot(x)), x.clone())  # noqa: E731
    x0 = torch.ones(4, dtype=torch.float64)
    assert _solver.lbfgs(quad, _solver.new_state(x0), _solver.LBFGSOptions(max_iter=0)) == "max_iter"
    assert _solver.lbfgs(quad, _solver.new_state(x0), _solver.LBFGSOptions(gtol=1e-8)) == "gtol"
    stop = _solver.lbfgs(quad, _solver.new_state(x0), _solver.LBFGSOptions(), callback=lambda s: True)
    assert stop == "callback"
    slow = lambda x: (float(np.sum(np.sin(x.numpy())) + 0.001 * x.dot(x)), torch.cos(x) + 0.002 * x)  # noqa: E731
    assert _solver.lbfgs(slow, _solver.new_state(x0), _solver.LBFGSOptions(time_limit=0.0)) == "time_limit"


def test_non_finite_objective_returns_best_point():
    calls = {"n": 0}

    def blows_up(x):
        calls["n"] += 1
        if calls["n"] > 3:
            return math.nan, torch.full_like(x, math.nan)
        return float(0.5 * x.dot(x)), x.clone()

    state = _solver.new_state(torch.ones(3, dtype=torch.float64) * 5)
    reason = _solver.lbfgs(blows_up, state, _solver.LBFGSOptions(gtol=0))
    assert reason in ("non_finite", "no_progress")
    assert math.isfinite(state["best_loss"]) and torch.isfinite(state["best_x"]).all()


def test_reset_leaves_no_stale_pair_in_the_direction():
    rng = torch.Generator().manual_seed(1)
    n = 12
    state = _solver.new_state(torch.zeros(n, dtype=torch.float64))
    for _ in range(3):
        s = torch.randn(n, dtype=torch.float64, generator=rng)
        _solver._update_history(state, 2 * s, s, 5)
    state["pairs"][2] = float("nan")  # a slot that the reset abandons
    _solver._reset_history(state)
    s = torch.randn(n, dtype=torch.float64, generator=rng)
    y = 3 * s
    _solver._update_history(state, y, s, 5)
    g = torch.randn(n, dtype=torch.float64, generator=rng)
    h0 = float(s.dot(y) / y.dot(y))
    d = _solver._direction(state, g)
    assert torch.isfinite(d).all()
    assert torch.allclose(d, _plain_two_loop([s], [y], g, h0), rtol=1e-12, atol=1e-14)


def test_cached_inner_products_match_the_stored_pairs():
    """The one-pass update (inner products derived from cached values) keeps S^T Y, Y^T Y and
    R^-1 equal to those of the vectors in the buffer, also after the ring wraps."""
    rng = torch.Generator().manual_seed(5)
    n = 40
    A = torch.randn(n, n, dtype=torch.float64, generator=rng)
    H = A @ A.T / n + torch.eye(n, dtype=torch.float64)
    b = torch.randn(n, dtype=torch.float64, generator=rng)

    def fun(x):  # a quadratic plus a quartic term: curvature changes along the path
        q = H @ x - b
        return float(0.5 * x.dot(H @ x) - b.dot(x) + 0.25 * (x**4).sum()), q + x**3

    state = _solver.new_state(torch.zeros(n, dtype=torch.float64))
    _solver.lbfgs(fun, state, _solver.LBFGSOptions(max_iter=17, ftol=0, gtol=0, history_size=6))
    assert state["n_iter"] == 17 and len(state["order"]) == 6
    S = state["S"][state["ages"]]
    Y = state["Y"][state["ages"]]
    SY = (S @ Y.T).numpy()
    assert np.allclose(state["SY"], SY, rtol=1e-9, atol=1e-12 * np.abs(SY).max())
    assert np.allclose(state["YY"], (Y @ Y.T).numpy(), rtol=1e-9, atol=1e-12)
    assert np.allclose(state["Rinv"] @ np.triu(SY), np.eye(6), atol=1e-8)
    # The direction from the caches is the textbook two-loop recursion's.
    g = state["grad"]
    assert torch.allclose(_solver._direction(state, g), _plain_two_loop(list(S), list(Y), g, state["H_diag"]),
                          rtol=1e-8, atol=1e-12)
