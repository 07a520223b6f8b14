import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from sfapprox.sf import _solver


def _hosts():
    hosts = [pytest.param(_solver._NumpyHost, id="numpy-host")]
    try:
        from sfapprox.sf import _solver_numba
    except ImportError:
        return hosts
    return hosts + [pytest.param(_solver_numba, id="numba-host")]


@pytest.fixture(params=[pytest.param(_solver._NumpyOps, id="numpy-vectors"),
                        pytest.param(_solver._TorchOps, id="torch-vectors")])
def cpu_ops(request, monkeypatch):
    """Run the loop's vector work in numpy (the CPU path) or in torch (the GPU path, here on the CPU)."""
    monkeypatch.setattr(_solver, "_CPU_OPS", request.param)
    return request.param


@pytest.fixture(params=_hosts())
def host(request, monkeypatch):
    """The m x m arithmetic in numpy (reference, fallback) or compiled (numba)."""
    monkeypatch.setattr(_solver, "_HOST", request.param)
    return request.param


def _rosenbrock(x):
    x = x.detach()
    a, b = x[:-1], x[1:]
    f = ((1 - a) ** 2 + 100 * (b - a * a) ** 2).sum()
    g = torch.zeros_like(x)
    g[:-1] = -2 * (1 - a) - 400 * a * (b - a * a)
    g[1:] += 200 * (b - a * a)
    return float(f), g


def test_minimises_rosenbrock(cpu_ops, host):
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
def test_cached_gram_direction_equals_two_loop(n_pairs, host):
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


def test_stopping_rules_are_reported(cpu_ops):
    quad = lambda x: (float(0.5 * x.dot(x)), x.clone())  # noqa: E731
    x0 = torch.ones(4, dtype=torch.float64)
    assert _solver.lbfgs(quad, _solver.new_state(x0), _solver.LBFGSOptions(max_iter=0)) == "max_iter"
    assert _solver.lbfgs(quad, _solver.new_state(x0), _solver.LBFGSOptions(gtol=1e-8)) == "gtol"
    stop = _solver.lbfgs(quad, _solver.new_state(x0), _solver.LBFGSOptions(), callback=lambda s: True)
    assert stop == "callback"
    slow = lambda x: (float(np.sum(np.sin(x.numpy())) + 0.001 * x.dot(x)), torch.cos(x) + 0.002 * x)  # noqa: E731
    assert _solver.lbfgs(slow, _solver.new_state(x0), _solver.LBFGSOptions(time_limit=0.0)) == "time_limit"


def test_non_finite_objective_returns_best_point(cpu_ops):
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


def test_reset_leaves_no_stale_pair_in_the_direction(host):
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


@pytest.mark.parametrize("pairs_dtype", [None, "float32"])
def test_cached_inner_products_match_the_stored_pairs(cpu_ops, host, pairs_dtype, monkeypatch):
    """The one-pass update (inner products derived from cached values) keeps S^T Y, Y^T Y and
    R^-1 equal to those of the vectors in the buffer, also after the ring wraps.  A float32
    buffer holds the pairs rounded (6e-8 relative): the caches, of the float64 pairs, then match
    the stored ones to that rounding, and the direction is the two-loop recursion's on them to it."""
    monkeypatch.setattr(_solver, "PAIRS_DTYPE", pairs_dtype)
    # float32 where the compiled products run; the numpy fallback keeps the iterate's dtype
    rounded = pairs_dtype is not None and cpu_ops is _solver._NumpyOps and host is not _solver._NumpyHost
    rtol = 1e-5 if rounded else 1e-9
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
    # The buffer is of the loop's kind (numpy on the CPU); x, grad and best_x stay tensors.
    assert isinstance(state["pairs"], np.ndarray if cpu_ops is _solver._NumpyOps else torch.Tensor)
    assert state["pairs"].dtype == (np.float32 if rounded else torch.float64 if cpu_ops is _solver._TorchOps
                                    else np.float64)
    assert all(isinstance(state[k], torch.Tensor) for k in ("x", "grad", "best_x"))
    S = torch.as_tensor(state["S"][state["ages"]]).double()
    Y = torch.as_tensor(state["Y"][state["ages"]]).double()
    SY = (S @ Y.T).numpy()
    assert np.allclose(state["SY"], SY, rtol=rtol, atol=rtol * 1e-3 * np.abs(SY).max())
    assert np.allclose(state["YY"], (Y @ Y.T).numpy(), rtol=rtol, atol=1e-12)
    assert np.allclose(state["Rinv"] @ np.triu(SY), np.eye(6), atol=1e-3 if rounded else 1e-8)
    # The direction from the caches is the textbook two-loop recursion's.
    g = state["grad"]
    d = torch.as_tensor(_solver._direction(state, cpu_ops.array(g)))
    assert d.dtype == torch.float64
    assert torch.allclose(d, _plain_two_loop(list(S), list(Y), g, state["H_diag"]), rtol=rtol * 10,
                          atol=1e-12)


def test_numpy_and_torch_vectors_take_the_same_path(monkeypatch):
    """The CPU's numpy loop and the GPU's torch loop are the same arithmetic: same iterates (to rounding)."""
    rng = torch.Generator().manual_seed(7)
    n = 30
    A = torch.randn(n, n, dtype=torch.float64, generator=rng)
    H = A @ A.T / n + torch.eye(n, dtype=torch.float64)

    def fun(x):
        return float(0.5 * x.dot(H @ x) + 0.25 * (x**4).sum() - x.sum()), H @ x + x**3 - 1

    monkeypatch.setattr(_solver, "PAIRS_DTYPE", None)  # the GPU's buffer is the iterate's dtype
    runs = {}
    for ops in (_solver._NumpyOps, _solver._TorchOps):
        monkeypatch.setattr(_solver, "_CPU_OPS", ops)
        state = _solver.new_state(torch.zeros(n, dtype=torch.float64))
        _solver.lbfgs(fun, state, _solver.LBFGSOptions(max_iter=12, ftol=0, gtol=0, history_size=5))
        runs[ops] = state
    a, b = runs.values()
    assert a["n_iter"] == b["n_iter"] == 12 and a["func_evals"] == b["func_evals"]
    assert torch.allclose(a["x"], b["x"], rtol=1e-9, atol=1e-12)
    assert np.allclose(a["history"], b["history"], rtol=1e-12)


@pytest.mark.skipif(len(_hosts()) < 2, reason="numba is not available")
def test_compiled_host_arithmetic_equals_numpy():
    """Each compiled host function returns what its numpy reference returns (full and filling memory)."""
    from sfapprox.sf import _solver_numba as compiled

    rng = np.random.default_rng(3)
    size = 5
    for k_old, full in [(0, False), (1, False), (3, False), (5, True)]:
        S, Y = rng.standard_normal((k_old, 12)), rng.standard_normal((k_old, 12))
        Y = S + 0.3 * Y  # s . y > 0
        SY, YY = S @ Y.T, Y @ Y.T
        Rinv = np.linalg.inv(np.triu(SY)) if k_old else np.zeros((0, 0))
        ages = rng.permutation(size)[:k_old].astype(np.int64)
        proj_old, proj_new, w_old = (rng.standard_normal(2 * size) for _ in range(3))
        args = (SY, YY, Rinv, 0.7, ages, full, proj_new, proj_old, w_old, 0.9, 1.3, 2.1, size)
        ref, got = _solver._NumpyHost.step_update(*args), compiled.step_update(*args)
        assert ref[0] == got[0]
        for r, g in zip(ref[1:], got[1:]):
            assert np.allclose(r, g, rtol=1e-13, atol=1e-13)
        if k_old and not full:
            middle = ref[4]
            ages_new = np.append(ages, k_old)
            w_ref = _solver._NumpyHost.weights(proj_new, ages_new, size, ref[5], ref[3], middle)
            w_got = compiled.weights(proj_new, ages_new, size, ref[5], ref[3], middle)
            assert np.allclose(w_ref, w_got, rtol=1e-13, atol=1e-13)


@pytest.mark.skipif(len(_hosts()) < 2, reason="numba is not available")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_pair_products_equal_numpy(dtype):
    """The pair buffer's products (float64 accumulation, by column blocks) equal numpy's in float64,
    across block boundaries and with the zero weights of unused slots."""
    from sfapprox.sf import _solver_numba as compiled

    rng = np.random.default_rng(4)
    n = 2 * compiled.PAIR_BLOCK + 37
    pairs = rng.standard_normal((6, n)).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    w = rng.standard_normal(6)
    w[[1, 4]] = 0.0
    wide = pairs.astype(np.float64)
    assert np.allclose(compiled.project(pairs, g, 0, n), wide @ g.astype(np.float64), rtol=1e-13, atol=1e-11)
    assert np.allclose(compiled.project(pairs, g, 0, n), _solver._NumpyHost.project(pairs, g, 0, n),
                       rtol=1e-13, atol=1e-11)
    lo, hi = compiled.PAIR_BLOCK, n  # a column range (what a task of a wide buffer's products takes)
    assert np.allclose(compiled.project(pairs, g, lo, hi), wide[:, lo:] @ g[lo:].astype(np.float64), rtol=1e-13,
                       atol=1e-11)
    part = compiled.assemble(pairs, w, g, 0.3, np.zeros_like(g), lo, hi)
    assert not part[:lo].any() and np.allclose(part[lo:], -0.3 * g[lo:] - w @ wide[:, lo:], rtol=1e-6, atol=1e-6)
    out = compiled.assemble(pairs, w, g, 0.3, np.empty_like(g), 0, n)
    ref = _solver._NumpyHost.assemble(pairs, w, g, 0.3, np.empty_like(g), 0, n)
    tol = 1e-6 if dtype is np.float32 else 1e-13  # the result is rounded to g's dtype
    assert out.dtype == g.dtype and np.allclose(out, -0.3 * g - w @ wide, rtol=tol, atol=tol)
    assert np.allclose(out, ref, rtol=tol, atol=tol)
    assert compiled.dot(pairs[0], g) == pytest.approx(float(wide[0] @ g.astype(np.float64)), rel=1e-12)


def test_float32_pairs_follow_the_float64_path(monkeypatch):
    """A float32 pair buffer changes a fit by rounding only: the same iterations to ~1e-6."""
    monkeypatch.setattr(_solver, "_HOST", None)  # whatever this machine has (numba: float32 pairs)
    runs = {}
    for pairs_dtype in (None, "float32"):
        monkeypatch.setattr(_solver, "PAIRS_DTYPE", pairs_dtype)
        state = _solver.new_state(torch.full((10,), -1.0, dtype=torch.float64))
        _solver.lbfgs(_rosenbrock, state, _solver.LBFGSOptions(max_iter=15, history_size=5, ftol=0, gtol=0))
        runs[pairs_dtype] = state
    a, b = runs.values()
    assert a["n_iter"] == b["n_iter"] == 15
    assert np.allclose(a["history"], b["history"], rtol=1e-5)
    compiled = _solver._host_math() is not _solver._NumpyHost
    assert b["pairs"].dtype == (np.float32 if compiled else np.float64)


def test_compiled_host_failure_falls_back_to_numpy(monkeypatch):
    class Broken:
        @staticmethod
        def weights(*args):
            raise RuntimeError("simulated compile failure")

        step_update = append = project = assemble = dot = weights

    monkeypatch.setattr(_solver, "_HOST", Broken)
    with pytest.warns(RuntimeWarning, match="compiled L-BFGS bookkeeping failed"):
        state = _solver.new_state(torch.full((10,), -1.0, dtype=torch.float64))
        _solver.lbfgs(_rosenbrock, state, _solver.LBFGSOptions(max_iter=50, history_size=5))
    assert _solver._HOST is _solver._NumpyHost and state["n_iter"] == 50


def test_interrupt_keeps_the_best_point(cpu_ops):
    """A KeyboardInterrupt from the objective escapes with best_x/best_loss a consistent evaluated pair."""
    calls = {"n": 0}

    def fun(x):
        calls["n"] += 1
        if calls["n"] == 40:
            raise KeyboardInterrupt
        return _rosenbrock(x)

    state = _solver.new_state(torch.full((10,), -1.0, dtype=torch.float64))
    with pytest.raises(KeyboardInterrupt):
        _solver.lbfgs(fun, state, _solver.LBFGSOptions(max_iter=1000, history_size=5))
    assert isinstance(state["best_x"], torch.Tensor)
    assert _rosenbrock(state["best_x"])[0] == state["best_loss"] < _rosenbrock(torch.full((10,), -1.0,
                                                                                         dtype=torch.float64))[0]


def _timed(fun, clock, seconds: float):
    """``fun`` that moves the fake clock ``seconds`` per evaluation."""

    def timed(x):
        clock.advance(seconds)
        return fun(x)

    return timed


def test_no_evaluation_starts_that_would_end_after_the_time_limit(cpu_ops, fake_clock):
    # Each evaluation "takes" 1 s.  A check after each iteration only would pass the limit by a
    # whole line search; the check before each evaluation stops at the last one that fits.
    slow = lambda x: (float(np.sum(np.sin(x.numpy())) + 0.001 * x.dot(x)), torch.cos(x) + 0.002 * x)  # noqa: E731
    state = _solver.new_state(torch.linspace(-2.0, 3.0, 8, dtype=torch.float64))
    reason = _solver.lbfgs(_timed(slow, fake_clock, 1.0), state, _solver.LBFGSOptions(time_limit=5.5))
    assert reason == "time_limit"
    assert fake_clock.time == 5.0 and state["func_evals"] == 5 and state["eval_seconds"] == 1.0
    assert state["best_loss"] == min(state["history"]) or state["best_loss"] <= state["loss"]


def test_a_line_search_that_would_pass_the_limit_is_cut_and_the_best_point_kept(cpu_ops, fake_clock):
    # The first step of a fresh state is tiny, so the line search needs several evaluations: the
    # limit falls inside it.  The loop stops there, at its best evaluated point.
    quad = lambda x: (float(0.5 * x.dot(x)), x.clone())  # noqa: E731
    state = _solver.new_state(torch.full((4,), 10.0, dtype=torch.float64))
    calls = []

    def fun(x):
        calls.append(float(0.5 * x.dot(x)))
        return quad(x)

    reason = _solver.lbfgs(_timed(fun, fake_clock, 1.0), state, _solver.LBFGSOptions(time_limit=2.5))
    assert reason == "time_limit" and fake_clock.time == 2.0
    assert state["best_loss"] == min(calls)


def test_a_known_evaluation_cost_can_skip_even_the_first_evaluation(cpu_ops, fake_clock):
    quad = lambda x: (float(0.5 * x.dot(x)), x.clone())  # noqa: E731
    state = _solver.new_state(torch.ones(4, dtype=torch.float64))
    state["eval_seconds"] = 2.0  # the caller knows what an evaluation costs
    reason = _solver.lbfgs(_timed(quad, fake_clock, 2.0), state, _solver.LBFGSOptions(time_limit=1.0))
    assert reason == "time_limit" and state["func_evals"] == 0 and fake_clock.time == 0.0
    assert torch.equal(state["best_x"], torch.ones(4, dtype=torch.float64))


def test_evaluate_start_is_the_loops_first_evaluation(cpu_ops):
    quad = lambda x: (float(0.5 * x.dot(x)), x.clone())  # noqa: E731
    primed, plain = (_solver.new_state(torch.ones(4, dtype=torch.float64)) for _ in range(2))
    assert _solver.evaluate_start(quad, primed) == 2.0 and primed["eval_seconds"] is not None
    _solver.lbfgs(quad, primed, _solver.LBFGSOptions(max_iter=3))
    _solver.lbfgs(quad, plain, _solver.LBFGSOptions(max_iter=3))
    assert primed["func_evals"] == plain["func_evals"] and primed["history"] == plain["history"]


def test_polyak_first_step_takes_one_evaluation_where_the_gradient_rule_extrapolates(cpu_ops):
    """On a least-squares loss whose least value is 0 the Polyak step (loss / ||g||^2) is accepted at
    once; torch's 1 / ||g||_1 is far too short for a large gradient and the line search extrapolates."""
    target = torch.linspace(1.0, 3.0, 200, dtype=torch.float64)

    def squares(x):
        r = x - target
        return float(0.5 * r.dot(r)), r.clone()

    evals = {}
    for rule in ("gradient", "polyak"):
        state = _solver.new_state(torch.zeros(200, dtype=torch.float64))
        _solver.lbfgs(squares, state, _solver.LBFGSOptions(max_iter=1, first_step=rule))
        evals[rule] = state["func_evals"]
        assert state["loss"] < 0.5 * float(target.dot(target))
    assert evals["polyak"] == 2  # the start and one trial step
    assert evals["gradient"] > evals["polyak"]


def test_a_known_first_step_is_the_first_trial_where_polyak_overshoots(cpu_ops):
    """A loss whose least value is far above 0 (a constant added): the Polyak step (loss / ||g||^2)
    overshoots and the line search backtracks; a step known from an earlier fit (1 here, the exact
    one on this quadratic) is the first trial, accepted at once."""
    target = torch.linspace(1.0, 3.0, 200, dtype=torch.float64)
    points = []

    def offset_squares(x):
        points.append(x.clone())
        r = x - target
        return float(0.5 * r.dot(r)) + 1e4, r.clone()

    evals = {}
    for rule in ("polyak", 1.0):
        points.clear()
        state = _solver.new_state(torch.zeros(200, dtype=torch.float64))
        _solver.lbfgs(offset_squares, state, _solver.LBFGSOptions(max_iter=1, first_step=rule))
        evals[rule] = state["func_evals"]
    torch.testing.assert_close(points[1], target)  # x0 - 1.0 * g, g = x0 - target
    assert evals[1.0] == 2 and evals["polyak"] > 2


def test_best_multiple_start_is_the_closed_form_best_scale_of_the_product():
    """A start whose product overshoots X: scaled (no evaluation) to c^(1/M) v with c = <X,P>/||P||^2;
    its stated loss is the evaluated one, min_c 0.5 ||X - c P||^2, and the run goes on from there."""
    from sfapprox.chord import support_offsets
    from sfapprox.sf import _kernels

    n, m = 24, 3
    offsets = support_offsets(n, "chord", 2).tolist()
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.random((n, n)), dtype=torch.float64)
    v0 = 2.0 * torch.as_tensor(rng.random((m, n, len(offsets))), dtype=torch.float64)

    def fun(x):
        loss, grad = _kernels.loss_and_grad(x.view(m, n, len(offsets)), offsets, X)
        return float(loss), grad.reshape(-1)

    state = _solver.new_state(v0.reshape(-1))
    _solver.evaluate_start(fun, state)
    before = state["loss"]
    assert _solver.best_multiple_start(state, m, float((X * X).sum()))
    P = _kernels.chord_product(v0, offsets)
    c = float((X * P).sum() / (P * P).sum())
    best = 0.5 * float(((X - c * P) ** 2).sum())
    assert state["loss"] == pytest.approx(best, rel=1e-10) and best < before
    assert state["grad"] is None and state["history"] == [state["loss"]]
    assert torch.allclose(state["best_x"], v0.reshape(-1) * c ** (1 / m))
    evaluated = _solver.evaluate_start(fun, state)  # the gradient there, and the loss evaluated
    assert evaluated == pytest.approx(best, rel=1e-10) and len(state["history"]) == 1
    assert _solver.lbfgs(fun, state, _solver.LBFGSOptions(max_iter=5)) == "max_iter"
    assert state["best_loss"] < best


@pytest.mark.skipif(len(_hosts()) < 2, reason="numba is not available")
def test_a_wide_buffers_products_run_in_tasks_with_the_same_numbers_on_any_thread_count(monkeypatch):
    """Above PAIR_TASK_COLUMNS the compiled pair products (float32 pairs, a float64 iterate) are split
    into column tasks run on the fit's compiled threads and summed in column order: the numbers do not
    depend on how many threads ran them."""
    from sfapprox import _threads

    monkeypatch.setattr(_solver, "PAIR_TASK_COLUMNS", 4096)  # five tasks here
    rng = np.random.default_rng(7)
    n = 4 * 4096 + 123
    pairs = rng.standard_normal((8, n)).astype(np.float32)  # the CPU's pair buffer (PAIRS_DTYPE)
    g = rng.standard_normal(n)
    w = rng.standard_normal(8)
    results = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(_threads, "_COMPILED_THREADS", threads)
        results[threads] = (_solver._NumpyOps.project(pairs, g), _solver._NumpyOps.assemble(pairs, w, g, 0.3))
    for proj, d in results.values():
        assert np.array_equal(proj, results[1][0]) and np.array_equal(d, results[1][1])
    wide = pairs.astype(np.float64)
    proj, d = results[1]
    assert np.allclose(proj, wide @ g.astype(np.float64), rtol=1e-12, atol=1e-9)
    assert np.allclose(d, -0.3 * g - w @ wide, rtol=1e-12, atol=1e-12)



@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_warm_up_compiles_what_a_fit_calls(dtype):
    """After warm_up, a CPU fit in the same dtype compiles no other specialisation of the host
    arithmetic: the compiling (seconds on a fresh install) happens before the race, not in a round."""
    from sfapprox import ChordSF
    from sfapprox.sf import _solver

    if _solver._host_math() is _solver._NumpyHost:
        pytest.skip("needs numba")
    host = _solver._host_math()
    _solver.warm_up(dtype)
    names = ("weights", "project", "assemble", "dot", "step_update", "append")  # append: within step_update
    before = {name: len(getattr(host, name).signatures) for name in names}
    # a float32 fit's float32 pairs go through BLAS: no compiled products
    assert all(before[name] for name in ("weights", "step_update", "dot"))
    X = np.random.default_rng(0).random((40, 40))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ChordSF(max_iter=60, time_limit=None, device="cpu", dtype=str(dtype).split(".")[1]).fit(X)
    assert {name: len(getattr(host, name).signatures) for name in names} == before


def test_an_interrupt_inside_compiled_code_is_raised_not_taken_for_a_broken_compile(monkeypatch):
    """A Ctrl-C delivered as a compiled call returns reaches Python as numba's SystemError ("returned a
    result with an exception set") caused by the KeyboardInterrupt: it was taken for a failed compile,
    the stop was lost and the process fell back to numpy for good.  Now the interrupt is raised."""
    host = _solver._host_math()
    if host is _solver._NumpyHost:
        pytest.skip("needs numba")

    def interrupted(*args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as cause:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from cause

    monkeypatch.setattr(host, "dot", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _solver._call_host("dot", np.ones(3), np.ones(3))
    assert _solver._host_math() is host  # not given up


@pytest.mark.parametrize("wrapped", [True, False])
def test_an_interrupt_while_the_host_module_loads_is_raised_and_numba_kept(monkeypatch, wrapped):
    """A Ctrl-C while :mod:`._solver_numba` was imported (raw, or wrapped by numba in a SystemError) was
    taken for a broken numba (or left numpy chosen before the import): numpy's slower host arithmetic for
    the rest of the process.  Now the interrupt is raised and the next call imports the compiled module."""
    from sfapprox import _compiled

    if _solver._host_math() is _solver._NumpyHost:
        pytest.skip("needs numba")
    real = _compiled.import_compiled

    def interrupted(name):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as cause:
            if not wrapped:
                raise
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from cause

    monkeypatch.setattr(_solver, "_HOST", None)
    monkeypatch.setattr(_compiled, "import_compiled", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _solver._host_math()
    monkeypatch.setattr(_compiled, "import_compiled", real)
    assert _solver._host_math() is not _solver._NumpyHost


def test_a_broken_host_module_falls_back_to_numpy(monkeypatch):
    from sfapprox import _compiled

    if _solver._host_math() is _solver._NumpyHost:
        pytest.skip("needs numba")
    monkeypatch.setattr(_solver, "_HOST", None)
    monkeypatch.setattr(_compiled, "import_compiled", lambda name: (_ for _ in ()).throw(SystemError("broken")))
    assert _solver._host_math() is _solver._NumpyHost


def test_a_real_failure_still_falls_back(monkeypatch):
    host = _solver._host_math()
    if host is _solver._NumpyHost:
        pytest.skip("needs numba")
    monkeypatch.setattr(host, "dot", lambda *a: (_ for _ in ()).throw(SystemError("broken")))
    monkeypatch.setattr(_solver, "_HOST", host)
    with pytest.warns(RuntimeWarning, match="compiled L-BFGS bookkeeping failed"):
        assert _solver._call_host("dot", np.ones(3), np.ones(3)) == 3.0
    assert _solver._HOST is _solver._NumpyHost


# ---- the iterations compiled whole (_solver_numba.iterate, through _solver._compiled_steps)


def _chord_problem(n: int = 16, seed: int = 0):
    """A small SF objective on the compiled kernel (its iterations run compiled) and a start."""
    from sfapprox.sf import _kernels

    if _kernels.select_kernel(n, "cpu")[1] != "numba" or _solver._host_math() is _solver._NumpyHost:
        pytest.skip("needs numba")
    rng = np.random.default_rng(seed)
    offsets, n_factors = (0, 1, 2, 4, 8), 4
    objective = _kernels.CompiledObjective((n_factors, n, len(offsets)), offsets, torch.from_numpy(rng.random((n, n))))
    x0 = torch.from_numpy(1.0 / len(offsets) + 0.01 * rng.standard_normal(n_factors * n * len(offsets)))
    return objective, x0


def _python_loop(objective):
    """The same objective without its compiled plan: the Python loop runs it."""
    return lambda x: objective(x)


def _run(fun, x0, callback=None, **options):
    state = _solver.new_state(x0)
    reason = _solver.lbfgs(fun, state, _solver.LBFGSOptions(**{"history_size": 8, **options}), callback)
    return reason, state


@pytest.fixture
def compiled_calls(monkeypatch):
    """Count the calls of the compiled iterations (and reset their failure flag afterwards)."""
    from sfapprox.sf import _solver_numba

    calls = []
    real = _solver_numba.iterate

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_solver_numba, "iterate", counted)
    monkeypatch.setattr(_solver, "_LOOP_FAILED", False)
    return calls


def test_compiled_iterations_follow_the_python_loop(compiled_calls):
    """The same iterations as the Python loop (direction, strong-Wolfe line search, pair updates),
    to rounding: the compiled sums (g . d, |g|_1) are not numpy's and torch's, nothing else differs.
    (Rounding differences grow about tenfold an iteration here, 1e-16 at first: 12 are compared; with
    numba 0.61 and numpy 1.24 the 12th differed by 1.5e-12, and the pairs' products by 7e-11; with numba
    0.68.1 the 12th iterate by 8.8e-10 in an entry near zero, so x is compared on the scale of its largest
    entries: a difference in the iterations themselves moves it by orders of magnitude more.)"""
    objective, x0 = _chord_problem()
    reason, fast = _run(objective, x0, max_iter=12)
    assert compiled_calls and reason == "max_iter"
    assert fast["func_evals"] > fast["n_iter"] + 1  # line searches past the unit step were compiled too
    slow_reason, slow = _run(_python_loop(objective), x0, max_iter=12)
    assert slow_reason == reason and slow["func_evals"] == fast["func_evals"]
    np.testing.assert_allclose(fast["history"], slow["history"], rtol=1e-11)
    assert torch.allclose(fast["x"], slow["x"], rtol=0, atol=1e-8 * slow["x"].abs().max().item())
    assert fast["best_loss"] == slow["best_loss"] or math.isclose(fast["best_loss"], slow["best_loss"], rel_tol=1e-10)
    assert fast["order"] == slow["order"]
    np.testing.assert_allclose(fast["SY"], slow["SY"], rtol=0, atol=1e-8 * np.abs(slow["SY"]).max())


@pytest.mark.parametrize("scale", [1.0, 1e-4, 30.0], ids=["unit", "short", "long"])
def test_compiled_line_search_is_torchs(scale):
    """The compiled strong-Wolfe search takes torch's path (the same trials, bracket and zoom) along a
    direction whose unit step is right, far too short (extrapolation) or far too long (zoom)."""
    from torch.optim.lbfgs import _strong_wolfe

    from sfapprox.sf import _solver_numba

    objective, x0 = _chord_problem(seed=3)
    f, g = objective(x0)
    d = -g * scale / float(g.abs().max())
    gtd = float(g.dot(d))
    trials = []

    def obj(x, t, d_):
        trials.append(float(t))
        return objective(x + float(t) * d_)

    f_ref, g_ref, t_ref, evals_ref = _strong_wolfe(obj, x0, 1.0, d, f, g, gtd)
    ok, f_new, g_new, t, evals, best, best_loss = _solver_numba._strong_wolfe(
        x0.numpy(), 1.0, d.numpy(), f, g.numpy(), gtd, objective.compiled_plan(), 100, x0.numpy(), math.inf)
    assert ok and evals == evals_ref == len(trials) and (scale == 1.0 or evals > 1)
    assert math.isclose(t, float(t_ref), rel_tol=1e-9) and math.isclose(f_new, f_ref, rel_tol=1e-12)
    assert np.allclose(g_new, g_ref.numpy(), rtol=1e-9, atol=1e-12)
    assert best_loss <= f_new
    short, *_ = _solver_numba._strong_wolfe(x0.numpy(), 1.0, d.numpy(), f, g.numpy(), gtd,
                                            objective.compiled_plan(), evals - 1, x0.numpy(), math.inf)
    assert not short or evals == 1  # one evaluation fewer than it needs: cut (the time limit)


def test_the_compiled_line_search_makes_its_trials_at_one_place():
    """The line search's trial (with the kernel's call) is inlined where it is called: each call site
    was a copy for numba to type and LLVM to compile on a fresh install (three, in torch's two loops)."""
    import dis

    _solver_numba = pytest.importorskip("sfapprox.sf._solver_numba")

    def sites(function, name: str) -> int:
        return sum(i.opname == "LOAD_GLOBAL" and i.argval == name for i in dis.get_instructions(function.py_func))

    assert _solver_numba._trial.targetoptions.get("inline") == "always"
    assert sites(_solver_numba._strong_wolfe, "_trial") == 1
    assert sites(_solver_numba._trial, "_evaluate") == 1
    assert sites(_solver_numba._strong_wolfe, "loss_and_grad") == sites(_solver_numba.iterate, "loss_and_grad") == 0


def test_how_the_compiled_iterations_are_split_changes_nothing(compiled_calls, monkeypatch):
    """One compiled call for the whole run, or one per iteration (a callback to call after each):
    the same iterates to the bit.  A callback sees every iteration unless it asks for fewer calls."""
    objective, x0 = _chord_problem()
    seen = []
    _, whole = _run(objective, x0, callback=lambda st: seen.append(st["n_iter"]), max_iter=60, coarse_callback=True)
    assert len(compiled_calls) < 10 and seen[-1] == 60 and len(seen) < 60
    monkeypatch.setattr(_solver, "COMPILED_CALL_SECONDS", 0.0)
    every = []
    _, split = _run(objective, x0, callback=lambda st: every.append(st["n_iter"]), max_iter=60)
    assert every == list(range(1, 61))
    assert split["history"] == whole["history"] and torch.equal(split["x"], whole["x"])
    assert split["func_evals"] == whole["func_evals"] and torch.equal(split["best_x"], whole["best_x"])


def test_compiled_iterations_apply_the_stopping_rules(compiled_calls):
    """ftol, gtol and max_evals stop the compiled iterations where the rules say (checked on the run)."""
    objective, x0 = _chord_problem()
    reason, state = _run(objective, x0, max_iter=5000, ftol=1e-2, window=10)
    hist = state["history"]
    assert reason == "ftol" and hist[-11] - hist[-1] <= 1e-2 * hist[-11]
    assert all(hist[i - 10] - hist[i] > 1e-2 * hist[i - 10] for i in range(10, len(hist) - 1))
    reason, state = _run(objective, x0, max_iter=5000, max_evals=17)
    assert reason == "max_evals" and state["func_evals"] >= 17 and state["n_iter"] < 17
    reason, state = _run(objective, x0, max_iter=5000, gtol=2e-3, ftol=0.0)
    assert reason == "gtol" and float(state["grad"].abs().max()) <= 2e-3 * max(1.0, state["loss"])
    assert _run(_python_loop(objective), x0, max_iter=5000, gtol=2e-3, ftol=0.0)[0] == "gtol"


def test_compiled_iterations_make_no_evaluation_past_the_time_limit(compiled_calls, fake_clock):
    """At a known cost per evaluation (1 s here), a call makes only the evaluations that fit before the
    deadline, also inside a line search: the fit stops on its time limit, at its last iterate, with the
    best point it evaluated."""
    objective, x0 = _chord_problem()
    state = _solver.new_state(x0)
    _solver.evaluate_start(objective, state)
    state["eval_seconds"] = 1.0
    reason = _solver.lbfgs(objective, state, _solver.LBFGSOptions(max_iter=100, time_limit=2.5, history_size=8))
    assert compiled_calls and reason == "time_limit"
    assert state["func_evals"] <= 1 + 2
    assert state["best_loss"] <= state["loss"] and math.isfinite(state["best_loss"])


def test_compiled_call_limits():
    state = {"n_iter": 10, "func_evals": 14, "eval_seconds": 0.001}
    options = _solver.LBFGSOptions(max_iter=100, max_evals=20)
    steps, evals, timed = _solver._compiled_call_limits(state, options, _solver._timing.Deadline.after(None), False)
    assert steps == min(90, int(_solver.COMPILED_CALL_SECONDS / 0.001)) and evals == 6 and timed > 10**9
    assert _solver._compiled_call_limits(state, options, _solver._timing.Deadline.after(None), True)[0] == 1
    assert _solver._compiled_call_limits(state, options, _solver._timing.Deadline.after(0.0105), False)[2] in (9, 10)
    # --time-limit 1e308 / 1e300: OverflowError / an int too big for the compiled loop, which then failed
    for huge in (1e308, 1e300):
        timed = _solver._compiled_call_limits(state, options, _solver._timing.Deadline.after(huge), False)[2]
        assert timed == 1 << 62


def test_a_failure_of_the_compiled_iterations_hands_the_fit_to_the_python_loop(compiled_calls, monkeypatch):
    from sfapprox.sf import _solver_numba

    objective, x0 = _chord_problem()
    monkeypatch.setattr(_solver_numba, "iterate", lambda *a: (_ for _ in ()).throw(RuntimeError("no LLVM")))
    with pytest.warns(RuntimeWarning, match="compiled L-BFGS iterations failed"):
        reason, state = _run(objective, x0, max_iter=30)
    assert reason == "max_iter" and _solver._LOOP_FAILED
    _, python = _run(_python_loop(objective), x0, max_iter=30)
    assert state["history"] == python["history"]


def test_an_interrupt_in_the_compiled_iterations_is_raised(compiled_calls, monkeypatch):
    from sfapprox.sf import _solver_numba

    def interrupted(*args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as cause:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from cause

    objective, x0 = _chord_problem()
    monkeypatch.setattr(_solver_numba, "iterate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(objective, x0, max_iter=30)
    assert not _solver._LOOP_FAILED


def test_cached_iterations_are_dropped_when_the_kernel_file_changed(tmp_path, monkeypatch):
    """numba keys iterate's cache by its own file; it holds the kernel of another file compiled in, so
    a changed kernel file flushes it (once: the kernel's digest is kept beside the cache)."""
    try:
        from sfapprox.sf import _solver_numba
    except ImportError:
        pytest.skip("needs numba")

    class Cache:
        cache_path = str(tmp_path)
        flushed = 0

        def flush(self):
            Cache.flushed += 1

    monkeypatch.setattr(_solver_numba.iterate, "_cache", Cache())
    _solver_numba._drop_stale_iterations()
    marker = tmp_path / "_solver_numba.iterate.kernel-sha256"
    assert Cache.flushed == 1 and len(marker.read_text()) == 64
    _solver_numba._drop_stale_iterations()
    assert Cache.flushed == 1  # the same kernel: the cache is kept
    marker.write_text("0" * 64)  # as if the kernel had been edited since
    _solver_numba._drop_stale_iterations()
    assert Cache.flushed == 2 and marker.read_text() != "0" * 64


#: A small float64 fit in a fresh interpreter (its dispatchers hold only what it compiled or loaded):
#: every compiled function of the kernel and L-BFGS modules it holds, with each signature's array dtypes,
#: and whether it compiled any (a compiled caller compiles what it calls on its own first).
_FIT_IN_A_FRESH_PROCESS = """
import json, warnings
import numpy as np, torch
from sfapprox import ChordSF
from sfapprox.sf import _kernels
if not _kernels._numba_module():
    print(json.dumps(None)); raise SystemExit
from sfapprox.sf import _kernels_numba, _solver_numba
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ChordSF(max_iter=40, time_limit=None, device="cpu", random_state=1).fit(np.random.default_rng(0).random((24, 24)))
held, compiled = {}, False
for module in (_kernels_numba, _solver_numba):
    for name in dir(module):
        dispatcher = getattr(module, name)
        if getattr(dispatcher, "signatures", None):
            held[name] = sorted({"/".join(str(t.dtype) for t in s if hasattr(t, "dtype")) for s in dispatcher.signatures})
            compiled = compiled or any(dispatcher.stats.cache_misses.values())
print(json.dumps([held, compiled]))
"""


def test_a_compiled_fit_holds_only_what_it_calls():
    """A float64 fit whose iterations run compiled holds the kernel (called from Python for its first
    evaluation), the iterations and the pair product (called from Python when a start resumes), in
    float64 only: not the quadratic warm-up's host functions, which it calls only inside the iterations
    (a warm run loaded each from the cache).  Run again where the first run compiled (numba's cache empty)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _FIT_IN_A_FRESH_PROCESS], env=env, capture_output=True,
                              text=True, check=False, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout.splitlines()[-1])
        if result is None:
            pytest.skip("needs numba")
        held, compiled = result
        if not compiled:
            break
    assert not compiled, "the second run compiled again: numba's cache is not reused"
    assert set(held) <= {"loss_and_grad", "iterate", "project", "dot"}, held
    assert {"loss_and_grad", "iterate"} <= set(held)
    assert held["loss_and_grad"] == ["float64/float64/int64/int64/float64/int64"]  # one specialisation
    assert all("float32" not in types or name in ("project", "dot", "iterate")  # (the pairs: float32)
               for name, signatures in held.items() for types in signatures)


def test_compiled_functions_carry_no_c_callback_wrapper():
    """Nothing passes the compiled kernel or L-BFGS functions as C callbacks: none compiles the wrapper
    for it (each one's compiling on a fresh install, for nothing)."""
    try:
        from sfapprox.sf import _kernels_numba, _solver_numba
    except ImportError:
        pytest.skip("needs numba")
    _solver_numba.dot(np.ones(3), np.ones(3))  # at least one compiled (or loaded) here
    seen = 0
    for module in (_kernels_numba, _solver_numba):
        for name in dir(module):
            dispatcher = getattr(module, name)
            for overload in getattr(dispatcher, "overloads", {}).values():
                address = overload.library.get_pointer_to_function(overload.fndesc.llvm_cfunc_wrapper_name)
                assert not address, f"{name} has a C callback wrapper"
                seen += 1
    assert seen


def test_every_public_compiled_function_is_callable_from_python():
    """``project_all`` (in ``__all__``) lost its Python wrapper with the functions only ``iterate`` calls:
    called from Python it crashed the interpreter (exit 139) where it returned ``pairs @ g``."""
    pytest.importorskip("numba")
    code = ("import numpy as np\n"
            "from sfapprox.sf import _solver_numba as s\n"
            "print(s.project_all(np.ones((2, 4)), np.ones(4), 2).tolist())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "[4.0, 4.0]"
    from sfapprox.sf import _solver_numba

    for name in _solver_numba.__all__:  # none of them without the wrapper a call from Python needs
        options = getattr(getattr(_solver_numba, name), "targetoptions", {})
        assert not options.get("no_cpython_wrapper"), name
