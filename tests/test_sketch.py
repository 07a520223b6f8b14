"""SF fitted to a Gaussian sketch of the target's columns: :mod:`sfapprox.sf._sketch`."""

import math

import numpy as np
import pytest

from sfapprox.chord import chord_offsets
from sfapprox.operators import ChordOperator
from sfapprox.sf import _columns as C
from sfapprox.sf import _kernels
from sfapprox.sf import _sketch as K
from sfapprox.sf._multistart import start_values


def _planted(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    offs = chord_offsets(n)
    m = math.ceil(math.log2(n))
    return ChordOperator((1 + 0.3 * rng.standard_normal((m, n, len(offs)))) / len(offs), offs).to_dense(), offs


@pytest.mark.parametrize("n, b, chunk", [(40, 12, 16), (33, 7, 5), (20, 30, 64)])
def test_the_sketch_is_the_matrix_times_its_test_matrix_by_one_pass(n, b, chunk):
    """Y = X S from column chunks not dividing N (each asked of the source in pieces), ||X||^2 on the
    way, S of variance 1 / b from its seed (the same S for the same seed, another for another)."""
    X = np.random.default_rng(n).standard_normal((n, n))
    asked = []

    def columns(a, b_):
        asked.append((a, b_))
        return X[:, a:b_]

    Y, S, norm2 = K.sketch_target(columns, n, b, np.float64, seed=3, chunk=chunk, piece=4)
    assert Y.shape == S.shape == (n, b) and Y.flags.c_contiguous and S.flags.c_contiguous
    np.testing.assert_allclose(Y, X @ S, rtol=1e-6, atol=1e-5)  # (S drawn in float32)
    assert norm2 == pytest.approx(float(np.sum(X**2)), rel=1e-12)
    covered = np.concatenate([np.arange(a, c) for a, c in asked])  # every column once, 4 at most a time
    assert np.array_equal(covered, np.arange(n)) and max(c - a for a, c in asked) <= 4
    assert np.array_equal(K.sketch_target(columns, n, b, np.float64, seed=3)[1], S)
    assert not np.array_equal(K.sketch_target(columns, n, b, np.float64, seed=4)[1], S)
    assert K.sketch_target(columns, n, b, np.float32, seed=3)[0].dtype == np.float32


def test_a_pass_calls_its_stopped_hook_only_where_it_stops(fake_clock):
    """The start's sums on a stopped first pass's columns are taken only where it stops (with the chunk it
    read last and where it began): on every first pass they cost 0.9-2 s at N = 16,384, 7.6 s at 65,536."""
    from sfapprox import _timing

    n = 64
    X = np.random.default_rng(2).standard_normal((n, n))
    calls = []

    def slow(a, b):
        fake_clock.advance(0.01 * (b - a))  # a pass "takes" 0.64 s
        return X[:, a:b]

    def stopped(block, start):
        calls.append((start, block.shape[1], np.array_equal(block, X[:, start:start + block.shape[1]])))

    assert K.sketch_target(slow, n, 8, np.float64, chunk=16, stopped=stopped) is not None and calls == []

    def interrupted(a, b):  # Ctrl-C comes where the pass is (a read), not at a stop request's check
        if a >= 32:
            raise KeyboardInterrupt
        return slow(a, b)

    with pytest.raises(KeyboardInterrupt):
        K.sketch_target(interrupted, n, 8, np.float64, chunk=16, stopped=stopped)
    assert calls == [(0, 16, True)]
    calls.clear()
    deadline = _timing.Deadline.after(0.3)  # its first chunk prices the pass at 0.64 s: it stops there
    assert K.sketch_target(slow, n, 8, np.float64, chunk=16, deadline=deadline, stopped=stopped) is None
    assert calls == [(0, 16, True)]


def test_the_sketch_loss_estimates_the_whole_loss_without_bias():
    """E ||(X - P) S||^2 = ||X - P||^2 over the test matrix's draws (entries of variance 1 / b)."""
    n, b = 32, 16
    X, offs = _planted(n)
    P = X + 0.1 * np.random.default_rng(1).standard_normal((n, n))
    draws = [np.sum((K.sketch_target(lambda a, c: (X - P)[:, a:c], n, b, np.float64, seed=s)[0]) ** 2)
             for s in range(300)]
    assert np.mean(draws) == pytest.approx(np.sum((X - P) ** 2), rel=0.05)


def test_a_fit_to_the_sketch_lowers_its_loss_and_the_whole_matrix_error():
    """L-BFGS on the sketch of a planted product (b well above the values per row): the sketch's error falls
    far, and the whole matrix's error with it; the result is the best point, float64, of the start's shape."""
    n = 64
    X, offs = _planted(n)
    shape = (math.ceil(math.log2(n)), n, len(offs))
    start = start_values(["identity"], 0, shape)["identity"]
    Y, S, _ = K.sketch_target(lambda a, b: X[:, a:b], n, 256, np.float64)
    seen = []
    fit = K.fit_sketch(Y, S, start, offs, width=16, groups=2, max_iter=150,
                       callback=lambda i, e, v: seen.append(e) and False)
    values, error = fit.values, fit.sketch_error
    assert values.shape == shape and values.dtype == np.float64 and fit.stop_reason == "max_iter"
    assert fit.iterations == 150 and fit.evaluations >= 150 and len(seen) == 150 and seen == sorted(seen, reverse=True)
    assert math.isnan(fit.holdout_error)

    def whole(v):
        return np.linalg.norm(X - ChordOperator(v, offs).to_dense()) / np.linalg.norm(X)

    before = np.linalg.norm(Y - ChordOperator(start, offs).to_dense() @ S) / np.linalg.norm(Y)
    assert error == pytest.approx(seen[-1]) and error < 0.1 * before
    assert whole(values) < 0.2 * whole(start)


def test_a_fit_to_the_sketch_stops_at_its_time_limit_and_by_its_callback():
    n = 64
    X, offs = _planted(n)
    start = start_values(["identity"], 0, (6, n, len(offs)))["identity"]
    Y, S, _ = K.sketch_target(lambda a, b: X[:, a:b], n, 64, np.float32)
    assert K.fit_sketch(Y, S, start, offs, width=16, groups=1, time_limit=0.3).stop_reason == "time_limit"
    fit = K.fit_sketch(Y, S, start, offs, width=16, groups=1, callback=lambda i, e, v: i == 3)
    assert (fit.iterations, fit.stop_reason) == (3, "callback")


def test_a_sketch_fit_with_held_out_columns_calls_back_with_its_best_point_by_them_and_its_error():
    """With held-out columns the callback gets the best point by them and that point's held-out error (the
    rounds' checkpoints save it): it got the best point on the fitted columns, which overfits them, beside
    the held-out error of another point."""
    X, columns = _cloud_columns(64)
    offs = chord_offsets(64)
    start = start_values(["identity"], 0, (6, 64, len(offs)))["identity"]
    Y, S, _ = K.sketch_target(columns, 64, 48, np.float64, seed=1)

    def held_error(v):
        return np.linalg.norm(Y[:, 32:] - ChordOperator(v, offs).to_dense() @ S[:, 32:]) / np.linalg.norm(Y[:, 32:])

    seen = []
    fit = K.fit_sketch(Y, S, start, offs, width=8, groups=1, fit_columns=32, max_iter=30,
                       callback=lambda i, e, v: seen.append((e, held_error(v))) and False)
    assert len(seen) == fit.iterations > 5
    for shown, actual in seen:
        assert shown == pytest.approx(actual, rel=1e-9)


def test_an_interrupted_sketch_fit_keeps_its_best_point(monkeypatch):
    n = 32
    X, offs = _planted(n)
    start = start_values(["identity"], 0, (5, n, len(offs)))["identity"]
    Y, S, _ = K.sketch_target(lambda a, b: X[:, a:b], n, 32, np.float64)
    calls = [0]
    real = _kernels.sketch_loss_and_grad

    def interrupted(*args):
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(K, "sketch_loss_and_grad", interrupted)
    fit = K.fit_sketch(Y, S, start, offs, width=8, groups=1)
    assert fit.stop_reason == "interrupted" and 0 < fit.iterations < 6
    loss = 0.5 * np.sum((Y - ChordOperator(fit.values, offs).to_dense() @ S) ** 2)
    assert fit.sketch_error == pytest.approx(math.sqrt(2 * loss / np.sum(Y**2)), rel=1e-9)


# ------------------------------------------------------------------------------------------ rounds
def _cloud_columns(n: int):
    from sfapprox.sources import KernelMatrix

    rng = np.random.default_rng(2)
    points = np.sort(rng.standard_normal((4, 3))[rng.integers(0, 4, n)] * 3 + 0.5 * rng.standard_normal((n, 3)), axis=0)
    X = KernelMatrix(points, bandwidth=1.0).to_dense()
    return X, lambda a, b: X[:, a:b]


def _rounds(X, columns, min_gain=-1.0, **kw):
    """fit_rounds from the identity; by default rounds to the end (at N = 128 a round gains under the
    default share from the second on)."""
    n = X.shape[0]
    offs = chord_offsets(n)
    start = start_values(["identity"], 0, (math.ceil(math.log2(n)), n, len(offs)))["identity"]
    settings = C.ColumnSettings(sketch_columns=32, holdout_columns=16, sketch_min_gain=min_gain)
    return K.fit_rounds(columns, start, offs, settings=settings, width=8, **kw), offs, start


def test_rounds_of_sketches_take_a_new_sketch_each_and_lower_the_whole_error():
    """Each round a new sketch (a pass over the columns, a new test matrix), L-BFGS on it from the last
    round's end until its held-out columns stop improving; steps numbered on across the rounds; the
    running error is the held-out estimate of the whole error."""
    X, columns = _cloud_columns(128)
    seen, asked = [], []

    def counted(a, b):
        asked.append(a)
        return columns(a, b)

    fit, offs, start = _rounds(X, counted, max_iter=120, callback=lambda s, e, c, v: seen.append((s, c)) and False)
    rounds = fit.columns // 128
    assert fit.optimizer == "sketch" and fit.stop_reason == "max_iter" and fit.steps == 120 and rounds >= 2
    assert asked.count(0) == rounds and len(fit.curve) == rounds
    assert [s for s, _ in seen] == list(range(1, 121))
    whole = np.linalg.norm(X - ChordOperator(fit.values, offs).to_dense()) / np.linalg.norm(X)
    first = np.linalg.norm(X - ChordOperator(start, offs).to_dense()) / np.linalg.norm(X)
    assert whole < 0.92 * first  # (at N = 128 a sketch's 32 columns are fewer than a row's 56 values)
    assert fit.running_error == pytest.approx(whole, rel=0.1)


def test_rounds_stop_on_the_time_limit_the_callback_and_an_interrupt(fake_clock, monkeypatch):
    X, columns = _cloud_columns(64)

    def slow(a, b):
        fake_clock.advance(0.01 * (b - a))  # a pass "takes" 0.64 s
        return columns(a, b)

    timed, *_ = _rounds(X, slow, time_limit=2.0)
    assert timed.stop_reason == "time_limit" and fake_clock.time <= 2.0 + 1e-9 and timed.columns >= 64
    called, *_ = _rounds(X, columns, callback=lambda s, e, c, v: s == 7)
    assert (called.stop_reason, called.steps) == ("callback", 7)
    calls = [0]
    real = K.sketch_target

    def interrupted(*args, **kw):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(K, "sketch_target", interrupted)
    stopped, offs, _ = _rounds(X, columns)
    assert stopped.stop_reason == "interrupted" and stopped.columns == 2 * 64 and stopped.steps > 0
    assert np.all(np.isfinite(stopped.values))


@pytest.mark.parametrize("stop", ["time_limit", "interrupted", "ctrl-c"])
def test_a_first_pass_stopped_hands_the_start_back_at_its_best_multiple(fake_clock, monkeypatch, stop):
    """A first sketch pass stopped after its first chunk (by the time limit, or a signal) handed the start back
    as it was: the identity start (its product I + noise) against 10 I at rel 0.90. It comes back at its best multiple on the columns
    the pass read (as Adam's fit where no step fits), kept_start, no step taken."""
    n = 512
    X = 10.0 * np.eye(n) + 0.01 * np.random.default_rng(0).standard_normal((n, n))

    def slow(a, b):
        fake_clock.advance(0.01 * (b - a))  # a pass "takes" 5.12 s, its first chunk of 256 columns 2.56 s
        if stop == "ctrl-c" and a >= 256:  # Ctrl-C raised where the pass is (in a read), no stop request
            raise KeyboardInterrupt
        return X[:, a:b]

    if stop == "interrupted":
        checks = iter([False, True])  # the stop comes after the first chunk
        monkeypatch.setattr(K, "stop_requested", lambda: next(checks, True))
    fit, offs, start = _rounds(X, slow, time_limit=3.0 if stop == "time_limit" else None)

    def rel(v):
        return np.linalg.norm(X - ChordOperator(v, offs).to_dense()) / np.linalg.norm(X)

    P = ChordOperator(start, offs).to_dense()
    best = rel(start * (np.vdot(X, P) / np.vdot(P, P)) ** (1 / len(start)))  # the whole matrix's best multiple
    assert rel(start) > 0.9 and best < 0.6
    assert (fit.stop_reason, fit.steps, fit.optimizer, fit.kept_start) == (stop.replace("ctrl-c", "interrupted"), 0,
                                                                          "sketch", True)
    assert fit.multiple > 5 and rel(fit.values) == pytest.approx(best, rel=0.05)


def test_rounds_end_where_one_gains_less_than_its_share_on_the_held_out_columns():
    """A round that lowers its held-out error by no more than settings.sketch_min_gain of where it began
    ends the rounds ("no_progress", for fit_columns_auto to go on by passes); an exact start gains nothing."""
    X, columns = _cloud_columns(64)
    going, *_ = _rounds(X, columns, max_iter=120)
    assert going.stop_reason == "max_iter" and going.columns >= 4 * 64  # (a negative share: to the end)
    default, *_ = _rounds(X, columns, min_gain=C.ColumnSettings().sketch_min_gain, max_iter=120)
    assert default.stop_reason == "no_progress" and 64 < default.columns < going.columns  # at N = 64: after 3
    n, offs = 64, chord_offsets(64)
    start = start_values(["identity"], 0, (6, n, len(offs)))["identity"]
    settings = C.ColumnSettings(sketch_columns=32, holdout_columns=16, sketch_min_gain=1.0)  # (no round gains it all)
    ended = K.fit_rounds(columns, start, offs, settings=settings, width=8, max_iter=60)
    assert ended.stop_reason == "no_progress" and ended.columns == 64 and 0 < ended.steps < 60
    assert np.linalg.norm(X - ChordOperator(ended.values, offs).to_dense()) < \
        np.linalg.norm(X - ChordOperator(start, offs).to_dense())  # what the round gained is kept

    def exact(Y, S, values, *args, **kw):  # a round from an exact start: 0 on the held-out columns, before and after
        return K.SketchFit(values=values, iterations=5, evaluations=5, stop_reason="no_progress", sketch_error=0.0,
                           holdout_error=0.0, start_holdout_error=0.0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(K, "fit_sketch", exact)
        same = K.fit_rounds(columns, start, offs, settings=C.ColumnSettings(sketch_columns=32, holdout_columns=16),
                            width=8, max_iter=60)
    assert same.stop_reason == "no_progress" and same.columns == 64 and same.steps == 5


def test_rounds_that_spend_their_iterations_stop_on_max_iter_whatever_the_last_one_gained():
    """The last round cut by max_iter and gaining under the share: the stop is "max_iter" (it was
    "no_progress", and fit then told the user to raise --time-limit of a fit --iters had ended)."""
    X, columns = _cloud_columns(64)
    fit, *_ = _rounds(X, columns, min_gain=1.0, max_iter=3)  # (no round gains it all)
    assert (fit.steps, fit.columns, fit.stop_reason) == (3, 64, "max_iter")


def test_rounds_give_their_step_scale_for_the_passes_after_them(monkeypatch):
    """A sketch fit's last L-BFGS scale s.y / y.y, times fitted / b (the sketch's loss is that share of the
    whole in expectation), goes out with the rounds and is the first step of L-BFGS by passes after them."""
    X, columns = _cloud_columns(64)
    fit, offs, start = _rounds(X, columns, min_gain=1.0, max_iter=60)
    assert fit.stop_reason == "no_progress" and math.isfinite(fit.step_scale) and fit.step_scale > 0
    Y, S, _ = K.sketch_target(columns, 64, 24, np.float32, seed=3)
    one = K.fit_sketch(Y, S, start, offs, width=8, groups=1, fit_columns=16, max_iter=20)
    seen = {}
    real = K.fit_sketch

    def spying(*args, **kw):
        out = real(*args, **kw)
        seen["scale"] = out.step_scale
        return out

    from sfapprox.sf import _solver

    real_lbfgs = _solver.lbfgs

    def recording(fun, state, options, callback=None):
        seen.setdefault("h_diag", []).append(state)
        return real_lbfgs(fun, state, options, callback)

    monkeypatch.setattr(_solver, "lbfgs", recording)
    again = K.fit_sketch(Y, S, start, offs, width=8, groups=1, fit_columns=16, max_iter=20)
    assert again.step_scale == pytest.approx(float(seen["h_diag"][0]["H_diag"]) * 16 / 24)
    assert one.step_scale == again.step_scale
    monkeypatch.setattr(K, "fit_sketch", spying)
    handed = {}

    def passes(*args, **kw):
        handed["first_step"] = kw["first_step"]
        return C.ColumnFit(values=args[1], optimizer="lbfgs")

    monkeypatch.setattr(C, "fit_columns_lbfgs", passes)
    rounds = K.fit_rounds(columns, start, offs, settings=C.ColumnSettings(sketch_columns=32, holdout_columns=16,
                                                                         sketch_min_gain=1.0), width=8, max_iter=60)
    C._then_passes(rounds, columns, offs, C.ColumnSettings(), 8, 100, 100.0, 1.0, 0.1, lambda *a: False, True)
    assert handed["first_step"] == rounds.step_scale == seen["scale"]


def test_the_sketch_columns_fit_the_memory_limit():
    settings = C.ColumnSettings()
    full = K.rounds_memory(65536, 16, 17, 32, settings)
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET

    # issue 25's goal 2: 4 GB at N = 65,536, with sketches of 1,024 columns at least
    assert K.sketch_columns_within(65536, 16, 17, 32, settings,
                                   4 * 2**30 - LIBRARY_WORKING_SET - COMPILED_WORKING_SET) >= 1024
    assert K.sketch_columns_within(65536, 16, 17, 32, settings, None) == settings.sketch_columns
    assert K.sketch_columns_within(65536, 16, 17, 32, settings, full) == settings.sketch_columns
    assert K.sketch_columns_within(65536, 16, 17, 32, settings, full - 1) == settings.sketch_columns // 2
    least = K.rounds_memory(65536, 16, 17, 32, C.ColumnSettings(sketch_columns=K.MIN_SKETCH_COLUMNS))
    assert K.sketch_columns_within(65536, 16, 17, 32, settings, least) == K.MIN_SKETCH_COLUMNS
    assert K.sketch_columns_within(65536, 16, 17, 32, settings, least - 1) == 0


def test_a_sketch_fit_ends_at_its_best_multiple_on_the_held_out_columns():
    """A start far off in scale (the identity times 3 in each factor) and no iteration that helps: the result
    is the best multiple of its product on the held-out columns, never above storing nothing there (1.0;
    at N = 65,536 rounds that gained nothing ended at 1.004), its held-out error the one reported."""
    X, columns = _cloud_columns(64)
    offs = chord_offsets(64)
    start = 3.0 * start_values(["identity"], 0, (6, 64, len(offs)))["identity"]
    Y, S, _ = K.sketch_target(columns, 64, 48, np.float64, seed=1)

    def held_error(v):
        return np.linalg.norm(Y[:, 32:] - ChordOperator(v, offs).to_dense() @ S[:, 32:]) / np.linalg.norm(Y[:, 32:])

    assert held_error(start) > 10
    fit = K.fit_sketch(Y, S, start, offs, width=8, groups=1, fit_columns=32, max_iter=0)
    assert fit.iterations == 0 and fit.holdout_error <= 1.0
    assert held_error(fit.values) == pytest.approx(fit.holdout_error, rel=1e-9)
