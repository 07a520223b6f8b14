"""SF fitted from column blocks: :mod:`sfapprox.sf._columns` and ChordSF's column path.

The path of a matrix whose in-memory fit is over the memory limit (a kernel of
65,536 points, a memory-mapped file), tested at small N with the same code:
the limit is set between the column path's estimate and the in-memory one.
"""

import math

import numpy as np
import pytest

from sfapprox import ChordSF, ParameterError, ResourceError, compare, estimate_errors, load_factors
from sfapprox._settings import FitSettings
from sfapprox._threads import AdaptiveThreads
from sfapprox.chord import chord_offsets, support_offsets
from sfapprox.comparison import compare_columns
from sfapprox.metrics import frobenius_error
from sfapprox.operators import ChordOperator
from sfapprox.sf import _columns as C
from sfapprox.sf import _kernels
from sfapprox.sf._sketch import fit_rounds
from sfapprox.sf._multistart import start_values
from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET, estimate_fit_memory
from sfapprox.sources import ArraySource, KernelMatrix, MatrixSource


def _planted(n: int, seed: int = 0) -> np.ndarray:
    """A product of Chord factors (values 1/K times 1 + 30 % noise): exactly representable."""
    rng = np.random.default_rng(seed)
    offs = chord_offsets(n)
    m = math.ceil(math.log2(n))
    return ChordOperator((1 + 0.3 * rng.standard_normal((m, n, len(offs)))) / len(offs), offs).to_dense()


def _column_limit(n: int, support: str = "chord") -> int:
    """A memory limit that the column path fits and the in-memory fit does not (checked)."""
    offs = support_offsets(n, support, 2)
    m = math.ceil(math.log2(n))
    columns = C.column_fit_memory(n, m, len(offs), C.COLUMN_WIDTH) + LIBRARY_WORKING_SET + COMPILED_WORKING_SET
    limit = columns + (1 << 20)
    in_memory = estimate_fit_memory(n, m, len(offs), 8, 50, "cpu", support=support, reach=int(offs.max()),
                                    n_starts=2, input_bytes=8 * n * n)
    assert in_memory > limit, "the test needs a limit between the two estimates"
    return limit


def _cloud(n: int, seed: int = 0) -> KernelMatrix:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, 3)) * 3
    points = np.sort(centres[rng.integers(0, 4, n)] + 0.5 * rng.standard_normal((n, 3)), axis=0)
    return KernelMatrix(points, bandwidth=1.0, name="cloud")


# ------------------------------------------------------------------------------------------ the fitter
def _fit(X, steps, **kw):
    n = X.shape[0]
    offs = chord_offsets(n)
    start = start_values(["identity"], 0, (math.ceil(math.log2(n)), n, len(offs)))["identity"]
    settings = C.ColumnSettings(**{"batch": 16, **kw.pop("settings", {})})
    return C.fit_columns(lambda a, b: X[:, a:b], start, offs, settings=settings, max_iter=steps, width=8, **kw), offs


def test_a_planted_product_is_fitted_from_its_columns():
    X = _planted(64)
    X /= np.linalg.norm(X) / 8.0  # the fit's units: ||X||_F = sqrt(N)
    fit, offs = _fit(X, 800, settings={"learning_rate": 0.01})
    start_error = np.linalg.norm(X - np.eye(64)) / np.linalg.norm(X)
    exact = np.linalg.norm(X - ChordOperator(fit.values, offs).to_dense()) / np.linalg.norm(X)
    assert fit.steps == 800 and fit.columns == 800 * 16 and fit.stop_reason == "max_iter"
    assert exact < 0.1 * start_error, (exact, start_error)
    # the running estimate lags by at most an epoch of steps: near the exact error at the end
    assert fit.running_error == pytest.approx(exact, rel=0.2)


def test_the_fit_is_seeded_and_the_same_on_any_number_of_threads():
    X = _planted(64, seed=1)
    runs = []
    for threads in (1, 2, 2):
        with AdaptiveThreads(64 * 64, threads=threads, compiled=True):
            runs.append(_fit(X, 30)[0].values)
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[1], runs[2])
    other = _fit(X, 30, seed=5)[0].values
    assert not np.array_equal(other, runs[0])


def test_every_epoch_visits_every_block_once():
    order = C._batches(100, 16, np.random.default_rng(0))
    epochs = [[next(order) for _ in range(7)] for _ in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(0, 100, 16))
    assert epochs[0] != epochs[1]  # a new order every epoch


def test_step_size_warms_up_then_decays_to_its_final_share():
    s = C.ColumnSettings(learning_rate=0.1, warmup=0.1, final_share=0.01)
    sizes = [C._step_size(s, p) for p in np.linspace(0, 1, 101)]
    assert sizes[0] == pytest.approx(0.005) and sizes[10] == pytest.approx(0.1)
    assert max(sizes) == pytest.approx(0.1) and sizes[-1] == pytest.approx(0.001)
    assert all(a >= b for a, b in zip(sizes[10:], sizes[11:]))


def test_compiled_adam_step_is_numpys():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 20, 4))
    grads = rng.standard_normal((4, 3, 20, 4)).astype(np.float32)
    states = []
    for compiled in (True, False):
        xs, xk, m1, m2 = x.copy(), np.empty(x.shape, np.float32), np.zeros_like(x), np.zeros_like(x)
        module = _kernels._numba_module
        try:
            if not compiled:
                C._numba_module = lambda: False
            for t in (1, 2, 3):
                C._adam(xs, xk, grads * t, m1, m2, 2.5, t, C.ColumnSettings(), 0.01)
        finally:
            C._numba_module = module
        states.append((xs, xk, m1, m2))
    for a, b in zip(*states):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(states[0][1], states[0][0].astype(np.float32))


def test_stops_on_the_clock_the_callback_and_an_interrupt(fake_clock):
    X = _planted(32, seed=2)
    ticks = []

    def tick(step, running, columns, values):
        fake_clock.advance(1.0)  # every step "takes" a second
        ticks.append((step, columns))
        return False

    fit, _ = _fit(X, 10**6, time_limit=5.5, callback=tick)
    assert fit.stop_reason == "time_limit" and fake_clock.time <= 5.5 and fit.steps == 5
    assert ticks[-1] == (5, 5 * 16)
    fit, _ = _fit(X, 100, callback=lambda step, *rest: step == 3)
    assert fit.stop_reason == "callback" and fit.steps == 3

    calls = []

    def columns(a, b):
        calls.append(a)
        if len(calls) == 8:
            raise KeyboardInterrupt
        return X[:, a:b]

    offs = chord_offsets(32)
    start = start_values(["identity"], 0, (5, 32, len(offs)))["identity"]
    fit = C.fit_columns(columns, start, offs, settings=C.ColumnSettings(batch=8), max_iter=100, width=8)
    assert fit.stop_reason == "interrupted" and fit.steps == 7 and np.isfinite(fit.values).all()


# ------------------------------------------------------------------------------------------ L-BFGS by passes
def test_lbfgs_by_passes_follows_the_in_memory_lbfgs():
    """One pass over the column blocks per evaluation computes the whole loss: in float64 the iterates
    are those of the in-memory L-BFGS on the formed matrix (to rounding), and the error is exact."""
    import torch

    from sfapprox.sf._solver import LBFGSOptions, lbfgs, new_state

    n = 100
    X = _planted(n, seed=6)
    X *= math.sqrt(n) / np.linalg.norm(X)
    offs = chord_offsets(n)
    m = math.ceil(math.log2(n))
    start = start_values(["identity"], 0, (m, n, len(offs)))["identity"]
    settings = C.ColumnSettings(batch=24, kernel_dtype="float64")  # passes of 5 blocks, the last one short
    fit = C.fit_columns_lbfgs(lambda a, b: X[:, a:b], start, offs, settings=settings, width=8, history=10, max_iter=12)
    state = new_state(torch.from_numpy(start.reshape(-1).copy()))
    target = torch.from_numpy(X)

    def whole(x):
        loss, grad = _kernels.loss_and_grad_numba(x.view(start.shape), offs.tolist(), target)
        return float(loss), grad.reshape(-1)

    lbfgs(whole, state, LBFGSOptions(max_iter=12, history_size=10, ftol=0.0, gtol=0.0, first_step="polyak"))
    assert fit.optimizer == "lbfgs" and fit.steps == 12 and fit.columns == state["func_evals"] * n
    np.testing.assert_allclose(fit.values, state["best_x"].numpy().reshape(start.shape), rtol=0, atol=1e-10)
    exact = np.linalg.norm(X - ChordOperator(fit.values, offs).to_dense()) / np.linalg.norm(X)
    assert fit.running_error == pytest.approx(exact, rel=1e-9) and exact < 0.9


def test_lbfgs_by_passes_keeps_its_best_point_on_an_interrupt():
    X = _planted(32, seed=2)
    calls = []

    def columns(a, b):
        calls.append(a)
        if len(calls) == 9:  # in the third pass (four blocks of 8 columns each)
            raise KeyboardInterrupt
        return X[:, a:b]

    offs = chord_offsets(32)
    start = start_values(["identity"], 0, (5, 32, len(offs)))["identity"]
    fit = C.fit_columns_lbfgs(columns, start, offs, settings=C.ColumnSettings(batch=8), max_iter=100, width=8)
    assert fit.stop_reason == "interrupted" and np.isfinite(fit.values).all() and fit.columns == 2 * 32


def test_lbfgs_by_passes_starts_no_pass_the_time_limit_would_cut():
    X = _planted(32, seed=2)
    offs = chord_offsets(32)
    start = start_values(["identity"], 0, (5, 32, len(offs)))["identity"]
    fit = C.fit_columns_lbfgs(lambda a, b: X[:, a:b], start, offs, settings=C.ColumnSettings(batch=8), width=8,
                              time_limit=5.0, pass_seconds=10.0)
    assert fit.stop_reason == "time_limit" and fit.steps == 0 and fit.columns == 0
    np.testing.assert_array_equal(fit.values, start.astype(np.float32))


def _auto(X, fake_clock, time_limit, *, step_seconds=1.0, sketch_max_passes=None, sketch_min_gain=0.005, max_iter=60,
          stages=None, **kw):
    """fit_columns_auto on blocks of 16 columns, each block "taking" step_seconds; what each step saw (and,
    in the list ``stages``, the stages the callback was told of)."""
    offs = chord_offsets(X.shape[0])
    start = start_values(["identity"], 0, (math.ceil(math.log2(X.shape[0])), X.shape[0], len(offs)))["identity"]
    seen = []

    def columns(a, b):
        fake_clock.advance(step_seconds * (b - a) / 16)
        return X[:, a:b]

    settings = C.ColumnSettings(batch=16, sketch_min_gain=sketch_min_gain,
                                **({} if sketch_max_passes is None else {"sketch_max_passes": sketch_max_passes}))
    def record(step, r, cols, v):
        seen.append((step, cols))

    if stages is not None:
        record.stage = stages.append
    fit = C.fit_columns_auto(columns, start, offs, settings=settings, width=8, max_iter=max_iter,
                             time_limit=time_limit, callback=record, **kw)
    return fit, seen


def test_auto_hands_over_to_lbfgs_where_the_time_left_allows_enough_passes(fake_clock):
    X = _planted(64, seed=7)  # four blocks a pass: a pass "takes" 4 s
    fit, seen = _auto(X, fake_clock, time_limit=4.0 * (C.LBFGS_MIN_PASSES + 1) + C.PROBE_STEPS)
    assert fit.optimizer == "adam+lbfgs" and fit.steps > C.PROBE_STEPS
    steps = [s for s, _ in seen]
    assert steps == list(range(1, len(steps) + 1))  # numbered on across the hand-over
    assert seen[C.PROBE_STEPS - 1] == (C.PROBE_STEPS, C.PROBE_STEPS * 16)
    assert fit.columns == seen[-1][1] and fit.stop_reason in ("time_limit", "max_iter")
    assert fake_clock.time <= 4.0 * (C.LBFGS_MIN_PASSES + 1) + C.PROBE_STEPS


def test_auto_stays_with_adam_when_passes_are_few_memory_is_short_or_no_clock_runs(fake_clock):
    X = _planted(64, seed=7)
    short, _ = _auto(X, fake_clock, time_limit=4.0 * C.LBFGS_MIN_PASSES / 2)  # fewer steps than the 60 allowed
    assert short.optimizer == "adam" and short.stop_reason == "time_limit"
    tight, _ = _auto(X, fake_clock, time_limit=1e6, lbfgs_fits=False)
    assert tight.optimizer == "adam"
    unlimited, _ = _auto(X, fake_clock, time_limit=None)
    plain, _ = _fit(X, 60)
    assert unlimited.optimizer == "adam" and unlimited.steps == 60
    np.testing.assert_array_equal(unlimited.values, plain.values)  # Adam's fit, step for step


def test_auto_fits_by_rounds_of_sketches_where_the_time_left_allows_few_passes(fake_clock):
    """Under settings.sketch_max_passes passes left (and its memory fitting), the rounds of sketches
    (:func:`._sketch.fit_rounds`) take over from Adam's probe steps; not where their memory does not fit."""
    X = _planted(64, seed=7)  # a pass "takes" 4 s: 10 passes
    assert C.ColumnSettings().sketch_max_passes == 30
    fit, seen = _auto(X, fake_clock, time_limit=40.0 + C.PROBE_STEPS, rounds=fit_rounds, sketch_max_passes=30)
    assert fit.optimizer == "adam+sketch" and fit.steps > C.PROBE_STEPS
    steps = [s for s, _ in seen]
    assert steps == list(range(1, len(steps) + 1))  # numbered on across the hand-over
    assert fit.stop_reason in ("time_limit", "max_iter") and fake_clock.time <= 40.0 + C.PROBE_STEPS
    fake_clock.time = 0.0
    without, _ = _auto(X, fake_clock, time_limit=40.0 + C.PROBE_STEPS, rounds=None, sketch_max_passes=30)
    assert without.optimizer == "adam+lbfgs"
    fake_clock.time = 0.0
    many, _ = _auto(X, fake_clock, time_limit=4.0 * 40, rounds=fit_rounds, sketch_max_passes=30)
    assert many.optimizer == "adam+lbfgs"  # passes enough for L-BFGS on the whole loss
    fake_clock.time = 0.0
    default, _ = _auto(X, fake_clock, time_limit=40.0 + C.PROBE_STEPS, rounds=fit_rounds)
    assert default.optimizer.startswith("adam+sketch")  # 10 passes, under the default's 30
    fake_clock.time = 0.0
    never, _ = _auto(X, fake_clock, time_limit=40.0 + C.PROBE_STEPS, rounds=fit_rounds, sketch_max_passes=0)
    assert never.optimizer == "adam+lbfgs"


def test_auto_takes_no_round_of_sketches_whose_pass_the_time_left_does_not_hold(fake_clock):
    """A round begins with its sketch, a whole pass that the clock does not cut: with under
    SKETCH_MIN_PASSES passes left after the probe (2 s of a 4 s pass) the rounds ended at 7 s of a 5 s
    limit; Adam's steps go on to the limit instead, and from one pass left the rounds run as before."""
    X = _planted(64, seed=7)  # a pass "takes" 4 s
    limit = C.PROBE_STEPS + 2.0
    fit, seen = _auto(X, fake_clock, time_limit=limit, rounds=fit_rounds, sketch_max_passes=30)
    assert fake_clock.time <= limit and fit.optimizer == "adam" and fit.stop_reason == "time_limit"
    assert [s for s, _ in seen] == list(range(1, fit.steps + 1))
    fake_clock.time = 0.0
    held = C.PROBE_STEPS + 5.0  # 1.25 passes left: the round's pass ends within the limit
    rounds, _ = _auto(X, fake_clock, time_limit=held, rounds=fit_rounds, sketch_max_passes=30)
    assert rounds.optimizer.startswith("adam+sketch") and fake_clock.time <= held


def test_auto_goes_on_by_passes_where_a_round_of_sketches_gains_nothing(fake_clock):
    """Rounds that end on a round gaining under settings.sketch_min_gain hand over to L-BFGS by passes for
    the time left (steps and columns numbered on, the limit held); where no pass fits the time left, the
    rounds' end is the fit's; where its memory does not fit, the rounds go on to the end (they ended the
    fit after their first round, the time left unused)."""
    X = _planted(64, seed=7)  # a pass "takes" 4 s: 10 passes
    limit = 40.0 + C.PROBE_STEPS
    fit, seen = _auto(X, fake_clock, time_limit=limit, rounds=fit_rounds, sketch_max_passes=30, sketch_min_gain=1.0,
                      max_iter=1000)
    assert fit.optimizer == "adam+sketch+lbfgs" and fit.stop_reason in ("time_limit", "max_iter")
    steps = [s for s, _ in seen]
    assert steps == list(range(1, len(steps) + 1)) and fit.steps == len(steps)
    cols = [c for _, c in seen]
    assert cols == sorted(cols) and fit.columns == cols[-1] and fake_clock.time <= limit
    assert fit.columns > C.PROBE_STEPS * 16 + 64  # a round's pass, then passes
    fake_clock.time = 0.0
    short, _ = _auto(X, fake_clock, time_limit=limit, rounds=fit_rounds, sketch_max_passes=30, sketch_min_gain=1.0,
                     max_iter=1000, lbfgs_fits=False)
    assert short.optimizer == "adam+sketch" and short.stop_reason in ("time_limit", "max_iter")
    assert short.columns > C.PROBE_STEPS * 16 + 64 and fake_clock.time <= limit  # rounds after the first
    fake_clock.time = 0.0  # the round ends at 7 s (3 probe steps and its pass): 7.9 s left, under two passes
    brief, _ = _auto(X, fake_clock, time_limit=14.9, rounds=fit_rounds, sketch_max_passes=30, sketch_min_gain=1.0,
                     max_iter=1000)
    assert brief.optimizer == "adam+sketch" and brief.stop_reason == "no_progress" and fake_clock.time == 7.0


@pytest.mark.parametrize("stop", ["time_limit", "interrupted"])
def test_auto_keeps_the_multiple_of_a_first_sketch_pass_that_was_stopped(fake_clock, monkeypatch, stop):
    """The default route (Adam's probe steps, then the rounds): a first sketch pass stopped after its first
    chunk (its columns ten times slower than Adam's said, past the limit; or a signal) hands Adam's end back
    at its best multiple, and the joined fit says that multiple (it said 1: params_ had no best_multiple).
    Adam's steps made those values: the fit did not keep its own start."""
    from sfapprox.sf import _sketch

    n = 512
    X = 10.0 * np.eye(n) + 0.01 * np.random.default_rng(0).standard_normal((n, n))
    offs = chord_offsets(n)
    start = start_values(["identity"], 0, (math.ceil(math.log2(n)), n, len(offs)))["identity"]
    cost = [1.0 / 16]  # seconds a column: Adam's block of 16 takes 1 s, a pass 32 s

    def columns(a, b):
        fake_clock.advance(cost[0] * (b - a))
        return X[:, a:b]

    seen = []

    def record(step, r, cols, v):
        seen.append(v.copy())

    def stage(name):
        if name == "sketch" and stop == "time_limit":
            cost[0] *= 10  # its first chunk of 256 columns: 160 s, and the rest priced past the limit

    record.stage = stage
    if stop == "interrupted":
        checks = iter([False, True])  # the stop comes after the pass's first chunk
        monkeypatch.setattr(_sketch, "stop_requested", lambda: next(checks, True))
    fit = C.fit_columns_auto(columns, start, offs, settings=C.ColumnSettings(batch=16), width=8, max_iter=60,
                             time_limit=C.PROBE_STEPS + 2 * 32.0, callback=record, rounds=fit_rounds)
    assert (fit.optimizer, fit.stop_reason, fit.steps) == ("adam+sketch", stop, C.PROBE_STEPS)
    assert len(seen) == C.PROBE_STEPS and not fit.kept_start

    def rel(v):
        return np.linalg.norm(X - ChordOperator(v, offs).to_dense()) / np.linalg.norm(X)

    adam_end = seen[-1]
    assert fit.multiple > 2 and rel(adam_end) > 0.5
    np.testing.assert_allclose(fit.values, adam_end * fit.multiple ** (1 / len(adam_end)), rtol=1e-6)
    assert rel(fit.values) < 0.6 * rel(adam_end)  # (0.90 -> 0.51: the noise of the identity start is left)


def test_memory_estimate_and_width():
    sizes = [C.column_fit_memory(65536, 16, 17, w) for w in (1, 8, 16, 32)]
    assert sizes == sorted(sizes) and sizes[-1] < 3 * 2**30
    assert C.column_width(65536, 16, 17, None) == C.COLUMN_WIDTH
    assert C.column_width(65536, 16, 17, sizes[2]) == 16
    assert C.column_width(65536, 16, 17, 1) == 1  # the caller then refuses
    # L-BFGS's history and vectors against Adam's moments: (8 h + 56) N K M bytes against 28 N K M
    values = 65536 * 16 * 17
    assert C.column_fit_memory(65536, 16, 17, 32, history=10) - sizes[-1] == (8 * 10 + 56 - 28) * values
    assert C.column_fit_memory(65536, 16, 17, 32, history=10) < 4 * 2**30  # the 4 GB of issue 25's goal 2


# ------------------------------------------------------------------------------------------ ChordSF's path
def test_a_fit_whose_first_sketch_pass_is_stopped_says_its_best_multiple(monkeypatch):
    """Through ChordSF on the default route (Adam's probe steps, then the rounds): the rounds' first pass
    stopped after its first chunk hands Adam's end back at its best multiple, and params_["best_multiple"]
    says so, as on the other routes (it was missing: the joined fit dropped the multiple)."""
    import functools

    from sfapprox.sf import _sketch
    from sfapprox.sf import model as sf_model

    K = _cloud(128)
    offs = support_offsets(128, "chord", 2)
    limit = _sketch.rounds_memory(128, 7, len(offs), C.COLUMN_WIDTH, C.ColumnSettings()) + LIBRARY_WORKING_SET \
        + COMPILED_WORKING_SET + (1 << 20)
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", C.ColumnSettings(sketch_max_passes=1e9, sketch_min_gain=-1.0))
    monkeypatch.setattr(_sketch, "sketch_target", functools.partial(_sketch.sketch_target, chunk=64))  # two chunks
    checks = iter([False, True])  # a stop after the pass's first chunk
    monkeypatch.setattr(_sketch, "stop_requested", lambda: next(checks, True))
    sf = ChordSF(max_iter=80, time_limit=30, max_memory=limit, device="cpu", init="identity").fit(K)
    assert (sf.params_["optimizer"], sf.stop_reason_, sf.n_iter_) == ("adam+sketch", "interrupted", C.PROBE_STEPS)
    assert sf.params_["best_multiple"] > 0 and sf.params_["best_multiple"] != 1.0
    assert "kept_start" not in sf.params_  # Adam's steps made these factors


def test_a_source_over_the_limit_is_fitted_from_columns_and_scored_honestly():
    K = _cloud(300)
    limit = _column_limit(300)
    sf = ChordSF(max_iter=200, time_limit=None, max_memory=limit, device="cpu").fit(K)
    # four clusters: the rank-one error is 0.87 of the identity's
    assert sf.params_["path"] == "columns" and sf.kernel_ == "columns" and sf.init_ == "rank1"
    assert sf.params_["epochs"] == 100 and sf.n_iter_ == 200  # blocks of 256 and 44 columns
    assert sf.fro_error_ is None  # not known without a pass over X
    dense = K.to_dense()
    exact = estimate_errors(K, {"sf": sf.operator_}, time_limit=None)["sf"]
    fro, rel = frobenius_error(dense, sf.to_dense())
    assert exact.exact and exact.fro_error == pytest.approx(fro, rel=1e-9)
    assert rel < 0.5 * np.linalg.norm(dense - np.eye(300)) / np.linalg.norm(dense)  # it learned
    assert sf.running_error_ == pytest.approx(rel, rel=0.25)


def test_a_source_with_few_passes_in_its_time_is_fitted_by_rounds_of_sketches(monkeypatch):
    """Where the time left allows few passes (here: any number, by the settings) and the rounds' memory
    fits the limit, ChordSF from columns fits by rounds of sketches, says so, and its error is honest."""
    from sfapprox.sf import _sketch
    from sfapprox.sf import model as sf_model

    K = _cloud(128)
    offs = support_offsets(128, "chord", 2)
    limit = _sketch.rounds_memory(128, 7, len(offs), C.COLUMN_WIDTH, C.ColumnSettings()) + LIBRARY_WORKING_SET \
        + COMPILED_WORKING_SET + (1 << 20)
    assert limit < estimate_fit_memory(128, 7, len(offs), 8, 50, "cpu", reach=int(offs.max()), n_starts=2,
                                       input_bytes=8 * 128 * 128)
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", C.ColumnSettings(sketch_max_passes=1e9, sketch_min_gain=-1.0))
    sf = ChordSF(max_iter=80, time_limit=30, max_memory=limit, device="cpu", init="identity").fit(K)
    assert sf.params_["path"] == "columns" and sf.params_["optimizer"] == "adam+sketch"  # rounds to the end
    assert (sf.params_["sketch_columns"], sf.params_["holdout_columns"]) == (32, 16)
    dense = K.to_dense()
    _, rel = frobenius_error(dense, sf.to_dense())
    assert rel < 0.92 * np.linalg.norm(dense - np.eye(128)) / np.linalg.norm(dense)  # (few columns at N = 128)
    assert sf.running_error_ == pytest.approx(rel, rel=0.1)
    # the default share: at N = 128 the second round gains under it, and L-BFGS by passes goes on from there
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", C.ColumnSettings(sketch_max_passes=1e9))
    then = ChordSF(max_iter=80, time_limit=30, max_memory=limit, device="cpu", init="identity").fit(K)
    assert then.params_["optimizer"] == "adam+sketch+lbfgs" and then.n_iter_ == 80
    assert then.params_["history"] == C.ColumnSettings().history and then.params_["sketch_columns"] == 32
    _, then_rel = frobenius_error(dense, then.to_dense())
    assert then_rel < rel and then.running_error_ == pytest.approx(then_rel, rel=1e-3)  # (exact: L-BFGS's loss)
    tight = ChordSF(max_iter=20, time_limit=30, max_memory=_column_limit(128), device="cpu", init="identity").fit(K)
    assert tight.params_["optimizer"] != "adam+sketch"  # the rounds' memory is over that limit


def test_a_dense_matrix_over_the_limit_is_fitted_from_its_columns_with_its_exact_error():
    X = _planted(128, seed=3)
    sf = ChordSF(max_iter=50, time_limit=None, max_memory=_column_limit(128), device="cpu").fit(X)
    assert sf.params_["path"] == "columns"
    fro, rel = frobenius_error(X, sf.to_dense())
    assert sf.fro_error_ == pytest.approx(fro, rel=1e-9) and sf.rel_error_ == pytest.approx(rel, rel=1e-9)


@pytest.mark.parametrize("kind", ["sparse", "memory-mapped"])
def test_a_sparse_or_mapped_matrix_over_the_limit_gets_its_exact_error(tmp_path, kind, monkeypatch):
    # Scored by metrics.operator_error from the matrix itself (column blocks here, as above N = 2,048).
    import scipy.sparse as sp

    from sfapprox import metrics
    from sfapprox.sources import open_npy

    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 16)
    X = _planted(128, seed=4)
    if kind == "sparse":
        X[np.abs(X) < np.quantile(np.abs(X), 0.5)] = 0.0
        target = sp.csr_array(X)
    else:
        np.save(tmp_path / "x.npy", X)
        target = open_npy(tmp_path / "x.npy")
    sf = ChordSF(max_iter=20, time_limit=None, max_memory=_column_limit(128), device="cpu").fit(target)
    assert sf.params_["path"] == "columns"
    fro, rel = frobenius_error(X, sf.to_dense())
    assert sf.fro_error_ == pytest.approx(fro, rel=1e-12) and sf.rel_error_ == pytest.approx(rel, rel=1e-12)


def test_within_the_limit_a_source_is_formed_and_fitted_as_before():
    # An ArraySource's columns are copies of X's: its formed matrix is X to the last bit (a kernel's
    # columns are arithmetic whose last bits depend on the BLAS's blocking).  The fits agree to rounding
    # only: two runs of one fit in one process differ by ~1e-13 in their losses (the vector sums' order
    # follows the arrays' alignment), and L-BFGS carries that on; 10 iterations keep it small.
    X = _cloud(64).to_dense()
    assert np.array_equal(ArraySource(X).to_dense(), X)
    from_source = ChordSF(max_iter=10, time_limit=None, device="cpu").fit(ArraySource(X))
    from_dense = ChordSF(max_iter=10, time_limit=None, device="cpu").fit(X)
    assert "path" not in from_source.params_ and from_source.kernel_ != "columns"
    np.testing.assert_allclose(from_source.factors_, from_dense.factors_, rtol=0, atol=1e-8)
    assert from_source.rel_error_ == pytest.approx(from_dense.rel_error_, rel=1e-10)
    kernel = ChordSF(max_iter=40, time_limit=None, device="cpu").fit(_cloud(64))
    assert "path" not in kernel.params_ and kernel.kernel_ != "columns"


def test_symmetric_support_from_columns_and_refusal_below_its_needs():
    X = _planted(128, seed=4)
    sym = ChordSF(support="symmetric", max_iter=20, time_limit=None, device="cpu",
                  max_memory=_column_limit(128, "symmetric")).fit(ArraySource(X))
    assert sym.params_["path"] == "columns" and sym.factors_.shape[2] == len(support_offsets(128, "symmetric", 2))
    with pytest.raises(ResourceError, match="from its column blocks"):
        ChordSF(max_iter=5, device="cpu", max_memory=20 << 20).fit(ArraySource(X))


def test_column_checkpoints_resume(tmp_path, fake_clock):
    X = _planted(128, seed=5)
    path = tmp_path / "ck.h5"

    def tick(info):
        fake_clock.advance(1.0)

    limit = _column_limit(128)
    ChordSF(max_iter=25, time_limit=None, max_memory=limit, checkpoint=path, checkpoint_every=10.0,
            callback=tick, device="cpu").fit(X)
    saved = load_factors(path)
    assert saved.fit["checkpoint"] and saved.fit["iterations"] == 20
    resumed = ChordSF(max_iter=1, time_limit=None, max_memory=limit, init=path, device="cpu").fit(X)
    assert resumed.init_ == "saved" and resumed.params_["path"] == "columns"
    # one small step from the saved values (a resume, not a fresh start), the product then at its best multiple
    scaled = saved.operator.values * resumed.params_.get("best_multiple", 1.0) ** (1 / saved.operator.values.shape[0])
    assert np.abs(resumed.factors_ - scaled).max() < 0.05


def test_a_resumed_column_fit_checkpoints_the_better_of_its_start_and_its_iterate(tmp_path, fake_clock):
    """Resumed from the exact factors of X, Adam's steps can only lose: every checkpoint holds the saved
    factors, never the iterate (a checkpoint of the iterate replaced the better fit it started from, and
    a kill -9 then lost it); a column checkpoint records no error it does not know."""
    from sfapprox import save_factors
    from sfapprox.chord import chord_offsets

    offs = chord_offsets(128, 2)
    values = np.random.default_rng(3).standard_normal((7, 128, len(offs))) / math.sqrt(len(offs))
    exact = ChordOperator(values, offs)
    start, ck = tmp_path / "exact.h5", tmp_path / "ck.h5"
    save_factors(start, exact)
    seen = []

    def tick(info):
        fake_clock.advance(1.0)
        if ck.exists():
            seen.append(load_factors(ck))

    resumed = ChordSF(max_iter=30, time_limit=None, max_memory=_column_limit(128), init=start, checkpoint=ck,
                      checkpoint_every=5.0, callback=tick, device="cpu").fit(exact.to_dense())
    assert resumed.params_.get("kept_start") and resumed.loss_curve_ == [] and len(seen) >= 3
    for saved in seen:
        assert np.allclose(saved.operator.values, exact.values, rtol=1e-12, atol=0)
        assert "fro_error" not in saved.fit and saved.fit["kept_start"]
    fresh = tmp_path / "fresh.h5"
    ChordSF(max_iter=25, time_limit=None, max_memory=_column_limit(128), checkpoint=fresh, checkpoint_every=10.0,
            callback=lambda info: fake_clock.advance(1.0), device="cpu").fit(exact.to_dense())
    fit = load_factors(fresh).fit
    assert "fro_error" not in fit and fit["running_fro_error"] > 0  # the running estimate, named as such


def test_a_comparison_from_columns_has_an_sf_row_scored_like_the_others():
    K = _cloud(128)
    settings = FitSettings(device="cpu", max_iter=60, time_limit=None, max_memory=_column_limit(128))
    c = compare_columns(K, ["sf", "nystrom", "tsvd"], budget="sf", settings=settings)
    rows = {r.method: r for r in c.results}
    sf = rows["sf"]
    assert sf.status == "ok" and sf.params["path"] == "columns" and sf.nnz <= c.budget
    assert sf.error_estimate["exact"]
    assert sf.fro_error == pytest.approx(frobenius_error(K.to_dense(), sf.operator.to_dense())[0], rel=1e-9)
    assert rows["tsvd"].status == "not applicable"
    assert "path=columns" in c.tables()[0].rows[0]["details"] or any(
        "path=columns" in row["details"] for row in c.tables()[0].rows)
    formed = compare(K, ["sf"], settings=settings.replace(max_memory=None))
    assert formed.results[0].params.get("path") is None  # formed, in memory


def test_a_comparison_scored_from_too_few_columns_for_their_skew_says_so(monkeypatch):
    """A scoring sample the time limit cut before Cochran's 25 g^2 columns: the note says which rows'
    intervals may be too narrow and what samples more."""
    import sfapprox.comparison as comparison
    from sfapprox.estimate import ErrorEstimate

    def short_sample(source, operators, **kw):
        return {name: ErrorEstimate(1.0, 0.5, False, (0.9, 1.1), (0.45, 0.55), 256, 3000) for name in operators}

    monkeypatch.setattr(comparison, "estimate_errors", short_sample)
    K = _cloud(128)
    settings = FitSettings(device="cpu", time_limit=None, max_memory=_column_limit(128))
    c = compare_columns(K, ["nystrom"], budget="sf", settings=settings)
    note = next(n for n in c.notes if "not formed" in n)
    assert "intervals of nystrom may be too narrow" in note and "3,000 columns" in note
    assert c.results[0].error_estimate["columns_advised"] == 3000


def test_fit_shows_an_interval_from_too_few_columns_as_such():
    from sfapprox.cli.fit import _error

    summary = {"rel_error": 0.5, "error_estimate": {"rel_interval": [0.45, 0.55], "columns": 256,
                                                     "columns_advised": 3000}}
    assert _error(summary, "rel_error") == ("0.5 ± 0.05 (estimated from 256 columns; its skew asks for 3,000: "
                                             "the interval may be too narrow)")
    summary["error_estimate"]["columns_advised"] = 100
    assert _error(summary, "rel_error") == "0.5 ± 0.05 (estimated from 256 columns)"
    del summary["error_estimate"]["columns_advised"]  # a summary written before the field
    assert _error(summary, "rel_error") == "0.5 ± 0.05 (estimated from 256 columns)"


def test_fit_says_which_optimizer_took_the_column_steps(monkeypatch):
    from sfapprox.cli import fit as fit_cli
    from sfapprox.results import details

    said = []
    monkeypatch.setattr(fit_cli, "note", lambda message, **kw: said.append(message))
    summary = {"path": "columns", "epochs": 87.19, "iterations": 82, "optimizer": "adam+lbfgs", "stop_reason": "time_limit"}
    fit_cli._advise(summary, None)
    assert "87.2 passes over the columns in 82 steps: Adam's, then L-BFGS's by passes)" in said[-1]
    del summary["optimizer"]  # a summary written before the field: Adam's steps
    fit_cli._advise(summary, None)
    assert "in 82 steps)" in said[-1]
    assert "opt=adam+lbfgs" in details({"path": "columns", "optimizer": "adam+lbfgs"})


def test_a_matrix_held_in_memory_leaves_the_column_fit_only_the_rest_of_the_limit(monkeypatch):
    """X stays in memory while SF reads its columns: the column fit is checked against (and sizes its
    blocks for) the limit less X, less a sparse X twice (its source keeps a CSC copy); it used to take
    the whole limit, X on top."""
    import scipy.sparse as sp

    from sfapprox.sf import model

    checked = []
    real = model.check_memory
    monkeypatch.setattr(model, "check_memory", lambda need, *, what, limit=None, held=0:
                        checked.append((what, need, limit - held)) or real(need, what=what, limit=limit, held=held))
    X = _planted(128, seed=5)
    limit = _column_limit(128)
    S = sp.csr_array(np.where(np.abs(X) > np.quantile(np.abs(X), 0.5), X, 0.0))
    for matrix, held in ((X, X.nbytes), (S, 2 * (S.data.nbytes + S.indices.nbytes + S.indptr.nbytes))):
        checked.clear()
        sf = ChordSF(max_iter=5, time_limit=None, max_memory=limit, device="cpu").fit(matrix)
        assert sf.params_["path"] == "columns"
        (what, need, given), = [c for c in checked if "column blocks" in c[0]]
        assert given == limit - held and need <= given


def test_a_resumed_column_fit_never_ends_worse_than_its_saved_start(tmp_path):
    """Resumed from the exact factors of X (a planted product), any step can only lose: the saved
    factors come back (rel 0), where the run's own end came back before (0.3605 -> 0.3709 in the
    audit's 1-s resumes of a kernel fit)."""
    from sfapprox import save_factors
    from sfapprox.chord import chord_offsets

    offs = chord_offsets(128, 2)
    values = np.random.default_rng(3).standard_normal((7, 128, len(offs))) / math.sqrt(len(offs))
    exact = ChordOperator(values, offs)
    path = tmp_path / "exact.h5"
    save_factors(path, exact)
    resumed = ChordSF(max_iter=30, time_limit=None, max_memory=_column_limit(128), init=path,
                      device="cpu").fit(exact.to_dense())
    assert resumed.params_["path"] == "columns" and resumed.params_.get("kept_start")
    assert np.allclose(resumed.factors_, exact.values, rtol=1e-12, atol=0) and resumed.rel_error_ < 1e-10


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_a_stop_whose_interrupt_was_swallowed_still_stops_the_column_fit(monkeypatch, optimizer):
    """A SIGINT's KeyboardInterrupt raised inside C-called Python is printed and lost ("Exception ignored
    in ..."); the fit from column blocks ran on to its time limit and exited 0 (1 run in 6). The loop now
    checks the signal's flag, as the in-memory fit's does."""
    from sfapprox import _signals

    X = _planted(32, seed=2)
    offs = chord_offsets(32)
    start = start_values(["identity"], 0, (5, 32, len(offs)))["identity"]
    steps = []

    def lost_stop(step, *rest):
        steps.append(step)
        if step == 3:
            monkeypatch.setattr(_signals, "_received", [2])  # SIGINT received, its interrupt swallowed
        return False

    fit = (C.fit_columns if optimizer == "adam" else C.fit_columns_lbfgs)(
        lambda a, b: X[:, a:b], start, offs, settings=C.ColumnSettings(batch=8), max_iter=50, width=8,
        callback=lost_stop)
    assert fit.stop_reason == "interrupted" and steps[-1] <= 4 and np.isfinite(fit.values).all()


def test_a_step_gives_its_block_s_inner_product_and_square_exactly():
    """<X_S, P_S> and ||P_S||^2 from the step's loss, ||X_S||^2 and gradient (P homogeneous of degree M)."""
    X = _cloud(64).to_dense()
    offs, m = chord_offsets(64), 6
    w = start_values(["identity"], 0, (m, 64, len(offs)))["identity"] * 1.1
    grads = np.empty((2, *w.shape))
    block = np.ascontiguousarray(X[:, 8:40])
    loss = _kernels.block_loss_and_grad(w, offs, block, 8, list(grads), 16, add=False)
    inner, square = C._products(grads, w, loss, float((block * block).sum()))
    P = ChordOperator(w, offs).to_dense()[:, 8:40]
    assert inner == pytest.approx(float((block * P).sum()), rel=1e-9)
    assert square == pytest.approx(float((P * P).sum()), rel=1e-9)


@pytest.mark.parametrize("rest_kept, multiple", [(True, 6.0), (False, 3.0)])
def test_a_joined_fit_s_multiple_is_both_stages_where_the_second_kept_its_start(rest_kept, multiple):
    """Adam's end scaled by 2, then rounds that kept it (their start) scaled by 3: the values are 6 times
    Adam's product, and best_multiple said 3; where the rounds took steps, theirs alone is on the values."""
    v = np.ones((2, 4, 3))
    first = C.ColumnFit(values=v, multiple=2.0, kept_start=False)
    rest = C.ColumnFit(values=6 * v, multiple=3.0, kept_start=rest_kept)
    assert C._joined(first, rest, 0.0, "adam").multiple == multiple


def test_adam_s_product_ends_at_its_best_multiple_never_worse_than_nothing():
    """After one epoch of Adam the product overshot (relative error above 1 at N = 2,048: worse than
    storing nothing); it is scaled to the best multiple the last epoch's blocks estimate."""
    n = 512
    X = _cloud(n).to_dense()
    fro = float(np.linalg.norm(X))
    scale = fro / math.sqrt(n)
    offs, m = chord_offsets(n), math.ceil(math.log2(n))
    start = start_values(["identity"], 0, (m, n, len(offs)))["identity"]
    fit = C.fit_columns(lambda a, b: X[:, a:b] / scale, start, offs, max_iter=math.ceil(n / 256))
    assert fit.multiple != 1.0

    def error(values):
        return float(np.linalg.norm(X - ChordOperator(values * scale ** (1 / m), offs).to_dense()) / fro)

    scaled, unscaled = error(fit.values), error(fit.values / fit.multiple ** (1 / m))
    P = ChordOperator(fit.values * scale ** (1 / m), offs).to_dense()
    best = math.sqrt(1 - float((X * P).sum()) ** 2 / (float((P * P).sum()) * fro**2))
    assert scaled < min(unscaled, 1.0) and scaled == pytest.approx(best, rel=0.02)
    assert fit.running_error == pytest.approx(scaled, rel=0.1)  # the window's estimate of the scaled product


def test_a_fit_of_under_one_pass_ends_at_its_best_multiple_of_either_sign(monkeypatch):
    """A fit of fewer columns than N (large N, a short limit) kept Adam's scale: a graph's adjacency, the
    product anti-correlated with it, ended at rel 1.39 (N = 20,000, 0.3 passes), worse than storing nothing.
    From MULTIPLE_MIN_COLUMNS columns the product is set to its best multiple, a negative one carried by
    the first factor's sign."""
    n = 96
    monkeypatch.setattr(C, "MULTIPLE_MIN_COLUMNS", 16)
    X = -np.eye(n) + 0.05 * np.random.default_rng(3).standard_normal((n, n))  # the identity start, negated
    offs, m = chord_offsets(n), math.ceil(math.log2(n))
    start = start_values(["identity"], 0, (m, n, len(offs)))["identity"]
    settings = C.ColumnSettings(batch=16)
    fit = C.fit_columns(lambda a, b: X[:, a:b], start.copy(), offs, settings=settings, max_iter=2, width=8)
    assert fit.columns < n and fit.multiple < 0
    rel = float(np.linalg.norm(X - ChordOperator(fit.values, offs).to_dense()) / np.linalg.norm(X))
    assert rel < 1.0
    # under MULTIPLE_MIN_COLUMNS the end is measured on one more block (it kept its scale there: rel > 1)
    monkeypatch.setattr(C, "MULTIPLE_MIN_COLUMNS", 1 << 62)
    short = C.fit_columns(lambda a, b: X[:, a:b], start.copy(), offs, settings=settings, max_iter=2, width=8)
    assert short.multiple < 0
    assert float(np.linalg.norm(X - ChordOperator(short.values, offs).to_dense()) / np.linalg.norm(X)) < 1.0


def _graph(n: int) -> np.ndarray:
    """A random symmetric graph's adjacency, about 10 non-zeros a row, scaled to ``||X||^2 = N`` (the fit's units)."""
    import scipy.sparse as sp

    A = sp.random(n, n, density=5 / n, random_state=np.random.default_rng(0), format="csr")
    X = (A + A.T).toarray()
    return X * math.sqrt(n) / np.linalg.norm(X)


@pytest.mark.parametrize("steps", [1, 2])
def test_a_fit_of_a_step_or_two_ends_no_worse_than_storing_nothing_or_its_start(steps):
    """A graph of N = 100,000 in the default 60 s: two Adam steps of sign-like size on every value blew the
    product up, and with fewer than MULTIPLE_MIN_COLUMNS columns behind it the product kept its scale, rel
    1.74 (storing nothing: 1).  The end is measured on the next block of the epoch, columns no step used,
    and handed back at its best multiple, or the start at its own where that is estimated the better."""
    n = 256
    X = _graph(n)
    offs, m = chord_offsets(n), math.ceil(math.log2(n))
    start = start_values(["identity"], 0, (m, n, len(offs)))["identity"]
    asked = []

    def columns(a, b):
        asked.append(a)
        return X[:, a:b]

    fit = C.fit_columns(columns, start, offs, settings=C.ColumnSettings(batch=32), max_iter=steps, width=32)

    def error(values):
        return float(np.linalg.norm(X - ChordOperator(values, offs).to_dense()) / np.linalg.norm(X))

    assert fit.multiple != 1.0 and error(fit.values) < 1.0 + 1e-3 and error(fit.values) < error(start) - 0.4
    assert len(asked) == steps + 1 and asked[-1] not in asked[:-1]  # one more block, not one a step used
    assert fit.running_error == pytest.approx(error(fit.values), abs=0.01)


def test_a_short_fit_keeps_a_step_s_time_to_measure_its_end(fake_clock):
    """Under a time limit, a fit that would end with fewer than MULTIPLE_MIN_COLUMNS columns behind it
    takes no step whose time would leave none for that measurement (each step "takes" a second)."""
    X = -np.eye(96) + 0.05 * np.random.default_rng(3).standard_normal((96, 96))

    def tick(step, running, columns, values):
        fake_clock.advance(1.0)
        return False

    fit, offs = _fit(X, 10**6, time_limit=2.5, callback=tick)
    assert fit.steps == 1 and fit.stop_reason == "time_limit" and fit.multiple < 0
    fit, _ = _fit(X, 10**6, time_limit=3.5, callback=tick)  # a step, then a step and the measurement
    assert fit.steps == 2


def test_lbfgs_by_passes_ends_no_worse_than_storing_nothing():
    """A start far off in scale (each factor the identity times 3) that one iteration cannot bring back: the
    best point's pass gives its <X, P> and ||P||^2, and it is handed back at its best multiple."""
    X = _cloud(64).to_dense()
    offs = chord_offsets(64)
    start = 3.0 * start_values(["identity"], 0, (6, 64, len(offs)))["identity"]
    fit = C.fit_columns_lbfgs(lambda a, b: X[:, a:b], start, offs, settings=C.ColumnSettings(batch=16), width=8,
                              max_iter=1)
    error = float(np.linalg.norm(X - ChordOperator(fit.values, offs).to_dense()) / np.linalg.norm(X))
    assert fit.multiple != 1.0 and error <= 1.0 and fit.running_error == pytest.approx(error, rel=1e-4)


def test_from_columns_a_fit_cut_after_a_step_or_two_scores_no_worse_than_storing_nothing():
    """The same through ChordSF's column path (a memory limit under the in-memory fit's need): a graph's
    fit of one step (half of N's columns behind it) is scored exactly (X in memory) at most at storing
    nothing's error, its start's being 1.5."""
    X = _graph(512)
    sf = ChordSF(max_iter=1, time_limit=None, max_memory=_column_limit(512), device="cpu", init="identity").fit(X)
    assert sf.params_["path"] == "columns" and sf.n_iter_ == 1
    assert sf.rel_error_ < 1.0 + 1e-3 and ("best_multiple" in sf.params_ or sf.params_.get("kept_start"))


# ------------------------------------------------------------------------------ the rank-one start
def _smooth(n: int) -> KernelMatrix:
    """The RBF kernel of sorted points at a wide bandwidth: near rank one (0.37 against the identity's 0.99)."""
    return KernelMatrix(np.linspace(0, 4, n)[:, None], bandwidth=1.5, name="smooth")


def test_from_columns_a_matrix_near_rank_one_starts_from_its_rank_one_approximation():
    K, limit = _smooth(256), _column_limit(256)
    ranked = ChordSF(max_iter=40, time_limit=None, max_memory=limit, device="cpu").fit(K)
    plain = ChordSF(init="identity", max_iter=40, time_limit=None, max_memory=limit, device="cpu").fit(K)
    assert ranked.params_["path"] == plain.params_["path"] == "columns"
    assert ranked.init_ == "rank1" and plain.init_ == "identity"
    errors = estimate_errors(K, {"rank1": ranked.operator_, "identity": plain.operator_}, time_limit=None)
    assert errors["rank1"].rel_error < 0.25 * errors["identity"].rel_error


def test_from_columns_a_kernel_near_the_identity_keeps_the_identity_start():
    K = KernelMatrix(np.linspace(0, 4, 256)[:, None], bandwidth=0.05, name="narrow")
    sf = ChordSF(max_iter=5, time_limit=None, max_memory=_column_limit(256), device="cpu").fit(K)
    assert sf.params_["path"] == "columns" and sf.init_ == "identity"


def test_from_columns_the_rank_one_pass_is_made_only_where_it_may_pay(monkeypatch):
    from sfapprox.sf import model

    def refused(*args, **kwargs):
        raise AssertionError("the rank-one start's pass was made")

    smooth, narrow = _smooth(256), KernelMatrix(np.linspace(0, 4, 256)[:, None], bandwidth=0.05)
    monkeypatch.setattr(model, "_transposed_product", refused)
    limit = _column_limit(256)
    # near the identity: the pilot columns say it would not pay, and no pass is made
    assert ChordSF(max_iter=5, time_limit=600, max_memory=limit, device="cpu").fit(narrow).init_ == "identity"
    # near rank one, but no time limit leaves room for the pass
    monkeypatch.setattr(model, "RANK_ONE_TIME_SHARE", 1e-12)
    assert ChordSF(max_iter=5, time_limit=600, max_memory=limit, device="cpu").fit(smooth).init_ == "identity"
    with pytest.raises(AssertionError, match="pass was made"):  # asked for: made
        ChordSF(init="rank1", max_iter=5, time_limit=600, max_memory=limit, device="cpu").fit(smooth)


def test_the_pilot_columns_give_the_norm_the_trace_and_the_top_left_vector():
    from sfapprox.sf.model import _pilot

    X = _smooth(300).to_dense()
    assert _pilot(ArraySource(X), seed=0, top=False).left.size == 0  # the Gram's work only where it is used
    pilot = _pilot(ArraySource(X), seed=0, columns=300, top=True)  # every column: exact
    U, s, _ = np.linalg.svd(X)
    assert pilot.fro == pytest.approx(np.linalg.norm(X)) and pilot.trace == pytest.approx(np.trace(X))
    assert pilot.top == pytest.approx(s[0]) and abs(float(pilot.left @ U[:, 0])) == pytest.approx(1.0)
    sampled = _pilot(ArraySource(X), seed=0, columns=64, top=True)
    assert abs(float(sampled.left @ U[:, 0])) > 0.99 and sampled.top == pytest.approx(s[0], rel=0.1)


def test_from_columns_rank1_asked_for_starts_there_whatever_its_error():
    sf = ChordSF(init="rank1", max_iter=5, time_limit=None, max_memory=_column_limit(300),
                 device="cpu").fit(_cloud(300))
    assert sf.params_["path"] == "columns" and sf.init_ == "rank1"
    with pytest.raises(ParameterError, match="init='rank1' needs"):
        ChordSF(init="rank1", base=3, max_iter=5, time_limit=None, max_memory=_column_limit(300),
                device="cpu").fit(_cloud(300))


@pytest.mark.parametrize("init", ["auto", "rank1"])
def test_from_columns_a_zero_matrix_starts_and_ends_at_zero(init):
    sf = ChordSF(init=init, max_iter=3, time_limit=None, max_memory=_column_limit(256),
                 device="cpu").fit(ArraySource(np.zeros((256, 256))))
    assert sf.params_["path"] == "columns" and sf.fro_error_ == 0.0 and not sf.factors_.any()


def test_from_columns_an_operator_without_a_transposed_product_still_gets_its_rank_one_start():
    """The rank-one pass reads columns as the fit does: X^T u from them, not from the source's rmatmat
    (a LinearOperator without rmatvec raised NotImplementedError under the default init)."""
    from scipy.sparse.linalg import LinearOperator

    from sfapprox.sources import OperatorSource

    A = _smooth(256).to_dense()
    src = OperatorSource(LinearOperator((256, 256), matvec=lambda b: A @ b, matmat=lambda B: A @ B, dtype=float))
    sf = ChordSF(max_iter=5, time_limit=None, max_memory=_column_limit(256), device="cpu").fit(src)
    assert sf.params_["path"] == "columns" and sf.init_ == "rank1"


def test_from_columns_a_fit_never_ends_worse_than_its_rank_one_start():
    """An exact rank-one matrix: the start is exact, and Adam's first steps wandered off it (0.17 after 5)."""
    rng = np.random.default_rng(0)
    X = np.outer(rng.standard_normal(512), rng.standard_normal(512))
    for steps in (1, 5, 20):
        sf = ChordSF(init="rank1", max_iter=steps, time_limit=None, max_memory=_column_limit(512),
                     device="cpu").fit(X)
        assert sf.params_["path"] == "columns" and sf.rel_error_ < 1e-6 and sf.params_.get("kept_start")


class _SlowColumns(MatrixSource):
    """The columns of ``array``, every request "taking" one second on the fake clock; no product of its own
    (as a kernel's), so the rank-one start's ``X^T u`` is a pass over them (an ArraySource's is one product)."""

    def __init__(self, array, clock):
        super().__init__(array.shape[0])
        self.array, self._clock = array, clock

    def _columns(self, J):
        return self.array[:, J]

    def columns(self, J):
        self._clock.advance(1.0)
        return super().columns(J)


def test_from_columns_a_rank_one_pass_the_time_limit_would_cut_leaves_the_identity_start(fake_clock):
    """Two chunks of 256 columns, eight reads each: the second would end after the limit, so it is not
    started; "rank1" asked for says so, "auto" says nothing (its estimate had already said no)."""
    X = _smooth(512).to_dense()
    with pytest.warns(RuntimeWarning, match="did not fit the time limit; the fit starts from the identity"):
        sf = ChordSF(init="rank1", max_iter=2, time_limit=12, max_memory=_column_limit(512),
                     device="cpu").fit(_SlowColumns(X, fake_clock))
    assert sf.init_ == "identity"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        auto = ChordSF(max_iter=2, time_limit=12, max_memory=_column_limit(512), device="cpu").fit(
            _SlowColumns(X, fake_clock))
    assert auto.init_ == "identity"


def test_rank1_where_the_structure_cannot_hold_it_is_refused_before_reading_a_column():
    class Unread(ArraySource):
        def columns(self, J):
            raise AssertionError("a column was read")

    with pytest.raises(ParameterError, match="init='rank1' needs"):
        ChordSF(init="rank1", base=3, max_memory=_column_limit(256), device="cpu").fit(Unread(np.eye(256)))


def test_a_column_fit_reports_the_precision_its_steps_ran_in_and_says_a_float64_asked_for_does_not_apply():
    X = _planted(128, seed=2)
    est = ChordSF(max_iter=3, time_limit=None, max_memory=_column_limit(128), device="cpu").fit(X)
    assert est.params_["path"] == "columns" and est.dtype_ == "float32" and est.params_["dtype"] == "float32"
    with pytest.warns(UserWarning, match=r"dtype='float64' applies to fits in memory; from column blocks"):
        ChordSF(max_iter=3, time_limit=None, max_memory=_column_limit(128), device="cpu", dtype="float64").fit(X)


def test_a_column_fit_says_the_tolerances_asked_for_do_not_apply():
    """No optimizer of the column path stops on ftol or gtol (their L-BFGS runs with both 0): given, they were
    ignored without a word (the fit ran its whole limit); the defaults say nothing."""
    import warnings

    X = _planted(128, seed=2)
    limit = _column_limit(128)
    with pytest.warns(UserWarning, match=r"ftol=0\.01 applies to fits in memory; from column blocks SF stops on"):
        ChordSF(max_iter=3, time_limit=None, max_memory=limit, device="cpu", ftol=0.01).fit(X)
    with pytest.warns(UserWarning, match=r"ftol=0\.01, gtol=0\.5 apply to fits in memory"):
        ChordSF(max_iter=3, time_limit=None, max_memory=limit, device="cpu", ftol=0.01, gtol=0.5).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert ChordSF(max_iter=3, time_limit=None, max_memory=limit, device="cpu").fit(X).params_["path"] == "columns"


def test_a_stop_while_a_fit_from_columns_is_scored_keeps_the_fit(tmp_path, monkeypatch):
    """A source never formed, SF fitted from its columns: a stop during fit_matrix's scoring from columns
    keeps the fit (saved), its error unknown."""
    import sfapprox.api as api
    from sfapprox import fit_matrix

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "estimate_errors", stopped)
    run = fit_matrix(_cloud(128), out=tmp_path / "k.h5",
                     settings=FitSettings(device="cpu", max_iter=10, time_limit=None, max_memory=_column_limit(128)))
    assert run.summary["path"] == "columns" and run.summary["stop_reason"] == "interrupted"
    assert run.summary["scored"] is False and run.summary["fro_error"] is None
    assert load_factors(tmp_path / "k.h5").fit["stop_reason"] == "interrupted"


def test_a_stop_while_a_comparison_from_columns_scores_its_rows_keeps_them(monkeypatch):
    """Every fit finished, then a stop during the scoring from columns: the rows and their surrogates are
    kept, "interrupted" with their errors unknown (the comparison was lost with them), no winner."""
    import sfapprox.comparison as comparison

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(comparison, "estimate_errors", stopped)
    settings = FitSettings(device="cpu", max_iter=10, time_limit=None, max_memory=_column_limit(128))
    c = compare_columns(_cloud(128), ["nystrom", "sparse"], budget="sf", settings=settings)
    assert [(r.method, r.status) for r in c.results] == [("nystrom", "interrupted"), ("sparse", "interrupted")]
    nystrom, sparse = c.results
    assert nystrom.fro_error is None and "error is not known" in nystrom.reason and nystrom.operator is not None
    # top-s scored itself exactly in its own pass, before the stop: that error is kept
    assert sparse.fro_error is not None and sparse.error_estimate["exact"] and "its own pass" in sparse.reason
    assert c.winner() is None and any("the scoring was stopped by Ctrl-C" in n for n in c.notes)


def test_top_s_from_columns_is_scored_exactly_by_its_own_pass(monkeypatch):
    """A comparison from columns sampled the surrogate that keeps every non-zero of a sparse matrix: "0 ± ?"
    and no winner.  Its selection's pass knows its error exactly (||X||^2 - the kept squares)."""
    from sfapprox import comparison
    from sfapprox.sources import ArraySource

    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 120)) * (rng.random((120, 120)) < 0.05)
    sampled = []
    real = comparison.estimate_errors
    monkeypatch.setattr(comparison, "estimate_errors", lambda src, ops, **k: sampled.append(set(ops)) or real(src, ops, **k))
    settings = FitSettings(device="cpu", time_limit=None)
    whole = compare_columns(ArraySource(X), ["sparse", "rsvd"], budget=4000, settings=settings)
    row = next(r for r in whole.results if r.method == "sparse")
    assert row.params["exact"] and row.fro_error == 0.0 and row.rel_error == 0.0 and row.error_estimate["exact"]
    assert sampled == [{"rsvd"}] and "exactly" in whole.verdict()["text"]
    part = compare_columns(ArraySource(X), ["sparse"], budget=500, settings=settings)
    row = part.results[0]
    S = row.operator.to_dense()
    assert not row.params["exact"] and row.error_estimate["exact"]
    assert row.fro_error == pytest.approx(np.linalg.norm(X - S), rel=1e-9)
    assert row.rel_error == pytest.approx(np.linalg.norm(X - S) / np.linalg.norm(X), rel=1e-9)
    assert sampled == [{"rsvd"}] and any("exactly (sparse: by its own pass)" in n for n in part.notes)


# ------------------------------------------------------------------------------------------ what it reports
def test_a_column_fit_counts_its_evaluations_not_its_steps(fake_clock, monkeypatch):
    """``evaluations`` (n_evals_, the summary's and the JSON's) was the steps' count on this path: 141 for a
    fit of 141 steps that took 144 evaluations (3 Adam steps, then L-BFGS by passes and its line search).
    Now it counts loss-and-gradient evaluations, as in memory: one per Adam step (its block), one per pass
    of L-BFGS by passes, one per evaluation on a sketch."""
    from sfapprox.sf import _sketch
    from sfapprox.sf import model as sf_model

    # ChordSF's (n_evals_, the summary's), by passes and by rounds of sketches: theirs, no longer n_iter_
    K = _cloud(128)
    by_passes = C.ColumnSettings(optimizer="lbfgs")
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", by_passes)
    limit = C.column_fit_memory(128, 7, len(chord_offsets(128)), C.COLUMN_WIDTH, history=by_passes.history) \
        + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (1 << 20)
    sf = ChordSF(max_iter=12, time_limit=None, max_memory=limit, device="cpu", init="identity").fit(K)
    assert sf.params_["path"] == "columns" and sf.params_["optimizer"] == "lbfgs" and sf.n_iter_ == 12
    assert sf.n_evals_ == sf.params_["evaluations"] == sf.params_["epochs"] > sf.n_iter_
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", C.ColumnSettings(optimizer="sketch"))
    limit = _sketch.rounds_memory(128, 7, len(chord_offsets(128)), C.COLUMN_WIDTH, C.ColumnSettings()) \
        + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (1 << 20)
    sf = ChordSF(max_iter=12, time_limit=None, max_memory=limit, device="cpu", init="identity").fit(K)
    assert sf.params_["optimizer"] == "sketch" and sf.n_iter_ == 12 and sf.n_evals_ > sf.n_iter_
    # each optimizer's
    X = _planted(64, seed=7)
    adam, _ = _fit(X, 12)
    assert adam.evaluations == adam.steps == 12
    offs = chord_offsets(64)
    start = start_values(["identity"], 0, (6, 64, len(offs)))["identity"]
    passes = C.fit_columns_lbfgs(lambda a, b: X[:, a:b], start, offs, settings=C.ColumnSettings(batch=16), width=8,
                                 max_iter=10)
    assert passes.evaluations == passes.columns // 64 > passes.steps == 10  # a pass each, the line search's too
    fit, seen = _auto(X, fake_clock, time_limit=40.0 + C.PROBE_STEPS, rounds=fit_rounds, sketch_max_passes=30,
                      sketch_min_gain=1.0, max_iter=1000)
    assert fit.optimizer == "adam+sketch+lbfgs" and fit.evaluations > fit.steps == len(seen)

def test_the_callback_is_told_which_optimizer_takes_the_steps(fake_clock, monkeypatch):
    """A progress display showed "start columns" through every stage of a fit from columns (no start has
    that name).  Each optimizer now tells the callback its stage before its steps, through the hand-overs,
    and ChordSF's progress dicts say it (``stage``; ``start`` stays "columns" for the scripts that read it)."""
    from sfapprox.sf import model as sf_model

    X = _planted(64, seed=7)
    stages = []
    fit, _ = _auto(X, fake_clock, time_limit=40.0 + C.PROBE_STEPS, rounds=fit_rounds, sketch_max_passes=30,
                   sketch_min_gain=1.0, max_iter=1000, stages=stages)
    assert fit.optimizer == "adam+sketch+lbfgs" and stages == ["adam", "sketch", "lbfgs"]
    fake_clock.time = 0.0
    stages.clear()
    _auto(X, fake_clock, time_limit=4.0 * (C.LBFGS_MIN_PASSES + 1) + C.PROBE_STEPS, stages=stages)
    assert stages == ["adam", "lbfgs"]
    seen = []
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", C.ColumnSettings(optimizer="adam"))
    ChordSF(max_iter=5, time_limit=None, max_memory=_column_limit(128), device="cpu", init="identity",
            callback=seen.append).fit(_cloud(128))
    assert [(info["start"], info["stage"]) for info in seen] == [("columns", "adam")] * 5
    assert seen[-1]["epochs"] == pytest.approx(5.0)  # (a step of 256 columns is a pass at N = 128)


def test_the_kernels_compile_before_the_fit_s_clock_starts(fake_clock, monkeypatch):
    """The kernels of this path (float32; the sketch kernel, L-BFGS's host arithmetic) compiled on their first
    calls, inside the time limit: about 5 s of a fresh install's first fit from columns.  They are compiled
    first now, outside the limit and inside the fit's seconds, and recorded as the in-memory fit's are.  The
    compile is made to "take" 5 s of the test's clock on the kernel's first call."""
    from sfapprox.sf import model as sf_model

    if not _kernels._numba_module():
        pytest.skip("numba is not available: nothing compiles")
    real = _kernels._run_groups
    compiled = set()

    def compiling(module, w, *args, **kw):  # the first call of each specialisation "compiles" for 5 s
        if w.dtype not in compiled:
            compiled.add(w.dtype)
            fake_clock.advance(5.0)
        return real(module, w, *args, **kw)

    monkeypatch.setattr(_kernels, "_run_groups", compiling)
    monkeypatch.setattr(_kernels, "compiled_for", lambda *a, **k: False, raising=False)  # a fresh install
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", C.ColumnSettings(optimizer="adam", batch=16))

    def tick(info):  # every step "takes" a second
        fake_clock.advance(1.0)

    sf = ChordSF(max_iter=1000, time_limit=10.0, max_memory=_column_limit(128), device="cpu", init="identity",
                 callback=tick).fit(_cloud(128))
    assert sf.params_["path"] == "columns" and sf.stop_reason_ == "time_limit"
    assert sf.n_iter_ == 10  # the limit's ten seconds are the steps': 1 step before (its compile took 5 + 1 of 10)
    assert sf.params_["compile_seconds"] == 5.0


# ---------------------------------------------------------------------- a stop while the kernels compile
INTERRUPTED_COMPILE = """
import json, os, signal, sys
import numpy as np
import numba.core.compiler as compiler
from sfapprox import ChordSF

real, calls = compiler.compile_extra, []

def compile_extra(*args, **kwargs):  # numba compiling a kernel: the stop arrives inside it
    calls.append(1)
    if len(calls) == 1:
        os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)

compiler.compile_extra = compile_extra
X = np.random.default_rng(0).standard_normal((128, 128))
sf = ChordSF(max_iter=50, time_limit=None, max_memory=int(sys.argv[1]), device="cpu", init="identity").fit(X)
print(json.dumps({"stop": sf.stop_reason_, "iterations": sf.n_iter_, "path": sf.params_["path"],
                  "rel": sf.rel_error_, "compiles": len(calls),
                  "exact": float(np.linalg.norm(X - sf.operator_.to_dense()) / np.linalg.norm(X))}))
"""


def test_a_stop_while_the_column_kernels_compile_returns_the_start_as_stopped(tmp_path):
    """A KeyboardInterrupt in the fit from columns' compiling (an empty numba cache) escaped ``fit``, where the
    in-memory fit returns its start with stop_reason_ "interrupted": now the same, its error scored."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "interrupted_compile.py"
    script.write_text(INTERRUPTED_COMPILE)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, str(script), str(_column_limit(128))], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (fit,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert fit["path"] == "columns" and fit["stop"] == "interrupted" and fit["iterations"] == 0, fit
    assert fit["compiles"] == 1 and 0 < fit["rel"] == pytest.approx(fit["exact"], rel=1e-9)


# ------------------------------------------------------------------ the setup under a time limit
def _slow_kernel(monkeypatch, clock, n: int, seconds: float = 1.0) -> list[int]:
    """Every call of the block kernel on ``n`` rows "takes" ``seconds`` on the fake clock (the warm-up's
    8 x 8 calls take none); returns the list of each call's columns."""
    calls = []
    real = C.block_loss_and_grad

    def slow(w, offsets, block, start, grads, width, **kw):
        if block.shape[0] == n:
            calls.append(block.shape[1])
            clock.advance(seconds)
        return real(w, offsets, block, start, grads, width, **kw)

    monkeypatch.setattr(C, "block_loss_and_grad", slow)
    return calls


def test_a_first_step_that_does_not_fit_the_time_is_not_taken(fake_clock, monkeypatch):
    """Adam took its first step whatever it cost (at N = 100,000 a step and the end's measure took 34 s of a
    20 s limit).  Given the start's cost on a first block (a step "takes" 2 s here: two blocks of 1 s),
    it takes the first step only where it and the end's measure fit, and else hands back the start at
    its best multiple on that block (here c < 0: X is near -I)."""
    X = -np.eye(96) + 0.05 * np.random.default_rng(3).standard_normal((96, 96))
    calls = _slow_kernel(monkeypatch, fake_clock, 96)
    offs = chord_offsets(96)
    start = start_values(["identity"], 0, (math.ceil(math.log2(96)), 96, len(offs)))["identity"]
    settings = C.ColumnSettings(batch=16)
    probe = C.first_block(lambda a, b: X[:, a:b], start, offs, settings=settings, width=8)
    assert calls == [8] and probe.step_seconds == pytest.approx(2.0)

    def error(values):
        return float(np.linalg.norm(X - ChordOperator(values, offs).to_dense()) / np.linalg.norm(X))

    fit, _ = _fit(X, 10**6, time_limit=3.0, probe=probe)
    assert fit.steps == 0 and fit.stop_reason == "time_limit" and fit.kept_start and fit.multiple < 0
    assert calls == [8] and error(fit.values) < min(1.0, error(start) - 0.4)  # no block read past the limit
    fit, _ = _fit(X, 10**6, time_limit=4.5, probe=probe)  # a step and the end's measure fit
    assert fit.steps >= 1


def test_from_columns_a_fit_under_a_time_limit_keeps_to_it_when_a_step_costs_more(fake_clock, monkeypatch):
    """The fit from columns took a step and measured its end whatever the time left: 2 "seconds" of a 1.5 s
    limit here.  Its first block says a step costs more than the limit: no step, the start kept at its
    best multiple (no worse than storing nothing), and the fit's clock within the limit."""
    n = 512
    X = np.abs(np.random.default_rng(0).standard_normal((n, n)))
    _slow_kernel(monkeypatch, fake_clock, n)
    began = fake_clock.time
    sf = ChordSF(init="identity", max_iter=50, time_limit=1.5, max_memory=_column_limit(n), device="cpu").fit(X)
    assert sf.params_["path"] == "columns"
    assert fake_clock.time - began <= 1.5
    assert sf.n_iter_ == 0 and sf.stop_reason_ == "time_limit" and sf.params_["kept_start"]
    assert sf.rel_error_ <= 1.0 + 1e-9


def test_the_pilot_reads_the_columns_a_share_of_the_time_allows(fake_clock):
    """Its 512 columns (and their Gram) took 7-13 s of a 20 s limit at N = 100,000.  Under a limit of its
    own it times its first columns and reads as many as fit (those first ones at least); without one, or
    where all fit, it reads what it read before, the same numbers."""
    from sfapprox.sf.model import PILOT_COLUMNS, PILOT_FIRST_COLUMNS, _pilot

    X = _smooth(1024).to_dense()

    class PerColumn(ArraySource):  # a column "takes" 10 ms
        def columns(self, J):
            fake_clock.advance(0.01 * len(J))
            return super().columns(J)

    plain = _pilot(ArraySource(X), seed=0, top=True)
    assert plain.columns == PILOT_COLUMNS
    roomy = _pilot(PerColumn(X), seed=0, top=True, seconds=60.0)
    assert (roomy.fro, roomy.trace, roomy.top) == (plain.fro, plain.trace, plain.top)
    short = _pilot(PerColumn(X), seed=0, top=False, seconds=2.0)
    # the first 64 took 0.64 s; the rest of the 2 s reads 136 more
    assert short.columns == 136 and short.fro == pytest.approx(np.linalg.norm(X), rel=0.2)
    assert _pilot(PerColumn(X), seed=0, seconds=0.1).columns == PILOT_FIRST_COLUMNS


def test_lbfgs_by_passes_makes_no_first_pass_its_probe_says_the_time_cannot_hold(fake_clock, monkeypatch):
    """L-BFGS from columns made its first pass whatever it cost (a pass at N = 100,000 is about an hour, under
    a 20 s limit).  Given the start's first block, it makes it only where the pass's estimate fits, and else
    (where no Adam step fits either: those are taken where one does, test_sf_columns.py) hands back the
    start at its best multiple (here c < 0: X is near -I); where it fits, the same fit."""
    X = -np.eye(96) + 0.05 * np.random.default_rng(3).standard_normal((96, 96))
    calls = _slow_kernel(monkeypatch, fake_clock, 96)
    offs = chord_offsets(96)
    start = start_values(["identity"], 0, (math.ceil(math.log2(96)), 96, len(offs)))["identity"]
    settings = C.ColumnSettings(batch=16)
    columns = lambda a, b: X[:, a:b]  # noqa: E731
    probe = C.first_block(columns, start, offs, settings=settings, width=8)
    assert probe.block_seconds == pytest.approx(1.0) and probe.pass_seconds(96, 16) == pytest.approx(12.0)
    calls.clear()
    short = C.fit_columns_lbfgs(columns, start, offs, settings=settings, width=8, max_iter=5, time_limit=3.0,
                                probe=probe)
    assert calls == [] and short.steps == short.columns == 0 and short.stop_reason == "time_limit"
    assert short.kept_start and short.multiple < 0 and short.optimizer == "lbfgs"
    assert np.linalg.norm(X - ChordOperator(short.values, offs).to_dense()) < np.linalg.norm(X)
    roomy = C.fit_columns_lbfgs(columns, start, offs, settings=settings, width=8, max_iter=5, time_limit=1e6,
                                probe=probe)
    plain = C.fit_columns_lbfgs(columns, start, offs, settings=settings, width=8, max_iter=5)
    assert roomy.steps == plain.steps == 5 and not roomy.kept_start
    np.testing.assert_array_equal(roomy.values, plain.values)


def test_from_columns_lbfgs_by_passes_keeps_to_a_time_limit_shorter_than_a_pass(fake_clock, monkeypatch):
    """ChordSF with L-BFGS by passes gave it no estimate: its first pass (2 "seconds" here) ran past a 1.5 s
    limit.  The first block says a pass costs more: none made, the start kept at its best multiple."""
    from sfapprox.sf import model as sf_model

    n = 512
    X = np.abs(np.random.default_rng(0).standard_normal((n, n)))
    _slow_kernel(monkeypatch, fake_clock, n)
    by_passes = C.ColumnSettings(optimizer="lbfgs")
    monkeypatch.setattr(sf_model, "COLUMN_SETTINGS", by_passes)
    limit = C.column_fit_memory(n, 9, len(chord_offsets(n)), C.COLUMN_WIDTH, history=by_passes.history) \
        + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + X.nbytes + (1 << 20)
    began = fake_clock.time
    sf = ChordSF(init="identity", max_iter=50, time_limit=1.5, max_memory=limit, device="cpu").fit(X)
    assert sf.params_["path"] == "columns" and sf.params_["optimizer"] == "lbfgs"
    assert fake_clock.time - began <= 1.5
    assert sf.n_iter_ == 0 and sf.stop_reason_ == "time_limit" and sf.params_["kept_start"]
    assert sf.rel_error_ <= 1.0 + 1e-9


def test_the_comparison_with_a_saved_start_keeps_to_the_time_limit(tmp_path, fake_clock, monkeypatch):
    """A resumed fit compared its end with its saved start on 8 blocks after its limit, whatever they cost
    (1-2 s a block at N = 30,000-100,000): 42 "seconds" of 40 here.  The fit now keeps a share of its time
    for them (estimated from its first block) and compares on those that fit, keeping the exact saved
    factors; where fewer than 8 fit (float64 evaluations slower than estimated), it says how many."""
    from sfapprox import save_factors

    n = 512
    offs = chord_offsets(n, 2)
    values = np.random.default_rng(3).standard_normal((9, n, len(offs))) / math.sqrt(len(offs))
    exact = ChordOperator(values, offs)
    path = tmp_path / "exact.h5"
    save_factors(path, exact)

    class Slow(ArraySource):  # every request for columns "takes" a second
        def columns(self, J):
            fake_clock.advance(1.0)
            return super().columns(J)

    def resumed(limit):
        began = fake_clock.time
        sf = ChordSF(max_iter=10**6, time_limit=limit, max_memory=_column_limit(n), init=path,
                     device="cpu").fit(Slow(exact.to_dense()))
        assert sf.init_ == "saved" and sf.n_iter_ >= 1 and fake_clock.time - began <= limit
        assert sf.params_.get("kept_start") and np.allclose(sf.factors_, exact.values, rtol=1e-12, atol=0)
        return sf

    assert "start_compared_blocks" not in resumed(40.0).params_  # every block
    real = _kernels.block_loss_and_grad

    def slow64(w, offsets, block, *args, **kw):  # the comparison's float64 evaluations "take" 3 s
        if block.dtype == np.float64 and block.shape[0] == n:
            fake_clock.advance(3.0)
        return real(w, offsets, block, *args, **kw)

    monkeypatch.setattr(_kernels, "block_loss_and_grad", slow64)
    assert 1 <= resumed(40.0).params_["start_compared_blocks"] < 8
