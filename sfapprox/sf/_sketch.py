"""SF fitted to Gaussian sketches of the target's columns: a fit from column blocks in a few passes.

The loss ``0.5 ||(X - P) S||_F^2``, with ``S`` an ``N x b`` Gaussian test
matrix of entries of variance ``1 / b`` (so that its expectation is the whole
loss ``0.5 ||X - P||_F^2``), needs only the sketch ``Y = X S``, made in one
pass over ``X``'s columns (:func:`sketch_target`), and ``P S = W_1 (... (W_M S))``,
``O(M K N b)`` (:func:`._kernels.sketch_loss_and_grad`): an evaluation costs
about ``b / N`` of a pass over the whole matrix, and every column of every
factor gets a gradient (a random subset of ``X``'s columns would leave the
last factor's other columns without one).

It overfits (``N b`` equations for ``N K M`` values): at ``N = 4,096``,
``b = 1,024`` its own error went to 0.380 where the whole matrix's was 0.544;
but L-BFGS on the whole loss from its end got ahead of L-BFGS on the whole
loss alone at equal work and stayed ahead (``benchmarks/results/sketch_probe.md``).
Where a pass over the columns takes minutes (``N = 65,536``: about 5 on two
cores) a fit of half an hour gets a handful of passes, and a sketch's
hundreds of evaluations move it from its start.  One sketch overfits; rounds
of new sketches, each stopped by columns held out of it (:func:`fit_rounds`),
went on lowering the whole error on a kernel SF fits (``scale_fit``'s ordered
cloud at N = 16,384 in 300 s: 0.715 against 0.734 by passes), and gained
nothing after their first round on one it barely fits (``scale_sources``'
cloud: 0.995); there the rounds end where one gains under
``ColumnSettings.sketch_min_gain`` and L-BFGS by passes goes on from their end
(0.9907 against 0.9892 by passes alone; ``benchmarks/results/sketch_fit.md``),
its first step the rounds' last scale (:attr:`SketchFit.step_scale`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from .. import _streams, _timing
from .._settings import DEFAULT_SEED
from .._signals import stop_requested
from .._threads import compiled_threads, torch_threads
from ._columns import (ColumnFit, ColumnSettings, FirstBlock, _announce, _fill, _products, _start_kept, best_multiple,
                       block_sums, column_fit_memory)
from ._kernels import sketch_loss_and_grad
from ._solver import StopReason

__all__ = ["SketchFit", "fit_rounds", "fit_sketch", "rounds_memory", "sketch_columns_within", "sketch_memory",
           "sketch_shape", "sketch_target"]

#: Rows of ``Y`` updated per product while the sketch is made: the product's temporary is
#: ``rows x b`` (64 MB in float32 at ``b = 2,048``), never ``N x b``.
SKETCH_ROWS = 8192
#: Iterations between checks of a sketch fit's held-out columns (:func:`fit_rounds`).
CHECK_EVERY = 5
#: Columns of a stopped first pass's last chunk on which :func:`fit_rounds` takes the start's best multiple
#: (a chunk's 256 took 7.6 s at N = 65,536; the multiple needs only an estimate of ``<X, P> / ||P||^2``).
STOPPED_COLUMNS = 64


def sketch_memory(n: int, b: int, itemsize: int = 4) -> int:
    """Bytes of a sketch's ``Y`` and ``S`` (``2 N b`` numbers) and its products' temporary."""
    return itemsize * (2 * n * b + min(n, SKETCH_ROWS) * b)


#: The fewest sketch columns :func:`sketch_columns_within` offers before it gives the rounds up.
MIN_SKETCH_COLUMNS = 256


def rounds_memory(n: int, n_factors: int, n_offsets: int, width: int, settings: ColumnSettings) -> int:
    """Peak bytes of :func:`fit_rounds`: L-BFGS's from columns (:func:`._columns.column_fit_memory`
    with ``settings.sketch_history``), the sketch (:func:`sketch_memory`, its held-out columns too), the
    kernel's extra block per group (``S``'s), the held-out best point (float32) and the result (float64)."""
    values = n * n_offsets * n_factors
    return (column_fit_memory(n, n_factors, n_offsets, width, settings.groups, history=settings.sketch_history)
            + sketch_memory(n, settings.sketch_columns + settings.holdout_columns)
            + 4 * settings.groups * n * width + 12 * values)


def sketch_columns_within(n: int, n_factors: int, n_offsets: int, width: int, settings: ColumnSettings,
                          memory: int | None) -> int:
    """``settings.sketch_columns``, halved until :func:`rounds_memory` fits ``memory`` bytes (None: no
    limit); 0 where :data:`MIN_SKETCH_COLUMNS` do not fit."""
    b = settings.sketch_columns
    while memory is not None and rounds_memory(n, n_factors, n_offsets, width,
                                               replace(settings, sketch_columns=b)) > memory:
        if b // 2 < MIN_SKETCH_COLUMNS:
            return 0
        b //= 2
    return b


def sketch_shape(n: int, width: int, settings: ColumnSettings) -> tuple[int, int]:
    """The columns of each sketch :func:`fit_rounds` fits and holds out: ``settings``' at most a quarter
    and an eighth of ``N`` (a sketch as wide as ``X`` costs more than an evaluation on the whole of it),
    the fitted ones a multiple of ``width``."""
    held = min(max(0, settings.holdout_columns), max(1, n // 8))
    return max(width, min(settings.sketch_columns, n // 4) // width * width), held


def sketch_target(columns: Callable[[int, int], np.ndarray], n: int, b: int, dtype, *, seed: int = DEFAULT_SEED,
                  chunk: int = 256, piece: int = 32, deadline: _timing.Deadline | None = None,
                  stopped: Callable[[np.ndarray, int], None] | None = None,
                  ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``Y = X S`` by one pass over ``X``'s columns, ``chunk`` at a time, and the test matrix ``S``.

    Parameters
    ----------
    columns : callable
        ``columns(start, stop)`` returns ``X[:, start:stop]``, float64.
    n : int
        ``N``.
    b : int
        Columns of the sketch.
    dtype : numpy dtype
        Of ``Y`` and ``S`` (the kernel's).
    seed : int, default=0
        Seed of ``S``.
    chunk : int, default=256
        Columns of ``X`` per product with ``S``'s rows.
    piece : int, default=32
        Columns asked of the source at a time.
    deadline : Deadline, optional
        Where given, the pass is priced by its chunks as it goes: after each, the rest at their mean rate
        must end by it, else the pass stops (its first chunk, a small share of a pass at large ``N``, prices
        it before the rest is begun).
    stopped : callable, optional
        ``stopped(block, 0)`` where the pass stops (``deadline``, a stop request, Ctrl-C) after reading its
        first chunk: ``block`` is ``X[:, :STOPPED_COLUMNS]`` (in ``dtype``, kept aside as it was read),
        what the stopped pass still tells.  Only then: a pass that ends pays nothing but that copy.

    Returns
    -------
    Y, S : numpy.ndarray, shape (N, b)
        C-contiguous, in ``dtype``; ``S``'s entries of variance ``1 / b``.
    norm2 : float
        ``||X||_F^2``, measured on the way.

    None where ``deadline`` stopped the pass.
    """
    dtype = np.dtype(dtype)
    rng = np.random.default_rng([seed, _streams.SF_SKETCH])
    S = rng.standard_normal((n, b), dtype=np.float32).astype(dtype, copy=False)
    S *= 1.0 / math.sqrt(b)
    Y = np.zeros((n, b), dtype=dtype)
    chunk = min(n, chunk)
    full = np.empty((n, chunk), dtype=dtype)
    product = np.empty((min(n, SKETCH_ROWS), b), dtype=dtype)
    norm2 = 0.0
    began = _timing.now()
    kept = None  # the first chunk's first STOPPED_COLUMNS columns, for ``stopped`` (a copy: ``full`` is reused)
    try:
        with torch_threads(compiled_threads()):  # a fit holds BLAS at one thread beside its kernel's: the products want all
            for start in range(0, n, chunk):
                if stop_requested():
                    raise KeyboardInterrupt
                stop = min(n, start + chunk)
                block = full if stop - start == chunk else np.empty((n, stop - start), dtype=dtype)
                norm2 += _fill(block, columns, start, piece)
                _flush_subnormal(block)
                if stopped is not None and kept is None:
                    kept = np.array(block[:, :STOPPED_COLUMNS], order="C")
                for r in range(0, n, SKETCH_ROWS):
                    out = product[:min(n, r + SKETCH_ROWS) - r]
                    np.matmul(block[r:r + out.shape[0]], S[start:stop], out=out)
                    Y[r:r + out.shape[0]] += out
                if deadline is not None and stop < n and not deadline.rest_fits(began, stop, n):
                    if stopped is not None:
                        stopped(kept, 0)
                    return None
    except KeyboardInterrupt:  # a stop request, or Ctrl-C itself (raised wherever the pass was: in a read, a product)
        if stopped is not None and kept is not None:
            stopped(kept, 0)
        raise
    return Y, S, norm2


def _norm2(Y: np.ndarray, first: int, stop: int) -> float:
    """``||Y[:, first:stop]||_F^2`` in float64, a few rows at a time: ``np.vdot`` of the column range (not
    contiguous) copied it whole, twice (512 MB at N = 65,536, b = 1,024, outside the memory estimate)."""
    total = 0.0
    for r in range(0, Y.shape[0], 1024):
        part = Y[r:r + 1024, first:stop].astype(np.float64)
        total += float(np.einsum("ij,ij->", part, part))
    return total


def _flush_subnormal(block: np.ndarray) -> None:
    """Zero the entries of ``block`` below its dtype's smallest normal number, in place.

    A kernel's far entries underflow (``exp(-d^2 / 2h^2)`` below 1.2e-38 in float32: 8 % of the RBF
    kernel of ``scale_fit``'s clustered cloud at N = 4,096), and a product with subnormal operands
    runs in the CPU's slow microcode: the sketch of that kernel at N = 16,384, b = 2,048 took 124 s,
    where a random matrix's took 8 s.  What is dropped is below ``1e-38`` of the scale.
    """
    tiny = np.finfo(block.dtype).tiny
    for r in range(0, block.shape[0], SKETCH_ROWS):  # (a temporary of a few rows, not of the block)
        part = block[r:r + SKETCH_ROWS]
        part[np.abs(part) < tiny] = 0.0


def _best_multiple(objective: "_SketchObjective", w: np.ndarray, held: tuple[int, int], norm2: float) -> float:
    """Scale ``w`` in place so that its product is the best multiple ``c P`` on the held-out columns
    (:func:`._columns.best_multiple`, ``<Y_h, P S_h>`` and ``||P S_h||^2`` from the loss there and
    ``<gradient, w>``, :func:`._solver.inner_and_square`); returns the held-out error after it.

    Never worse than storing nothing on those columns (``c = 0`` gives 1): at N = 65,536 rounds that
    gained nothing on a kernel ended at 1.004 of ``||X||``, above the zero matrix's 1.
    """
    loss = objective.loss(w, held)
    inner, square = _products(objective.grads[:1], w, loss, norm2)  # (the groups' sum is in grads[0])
    if best_multiple(w, inner, square) == 1.0 or norm2 <= 0:
        return math.sqrt(2.0 * max(loss, 0.0) / norm2) if norm2 > 0 else 0.0
    return math.sqrt(max(0.0, 1.0 - inner * inner / (square * norm2)))


class _SketchObjective:
    """``x -> (0.5 ||Y_J - P(x) S_J||^2, gradient)`` for the flat values ``x`` of factors of ``shape``,
    ``J`` the sketch's columns ``columns``."""

    def __init__(self, Y: np.ndarray, S: np.ndarray, offsets, shape, width: int, groups: int, columns: tuple[int, int]):
        self.Y, self.S, self.offsets, self.shape, self.width, self.columns = Y, S, offsets, shape, width, columns
        self.grads = [np.empty(shape, dtype=Y.dtype) for _ in range(max(1, groups))]

    def loss(self, w: np.ndarray, columns: tuple[int, int]) -> float:
        """The loss of the values ``w`` (shaped) on the sketch's columns ``columns`` (its gradient discarded)."""
        return sketch_loss_and_grad(w, self.offsets, self.Y, self.S, self.grads, self.width, columns)

    def __call__(self, x):
        import torch

        loss = self.loss(x.numpy().reshape(self.shape), self.columns)
        return loss, torch.from_numpy(self.grads[0].reshape(-1).copy())  # the solver keeps it


@dataclass
class SketchFit:
    """What :func:`fit_sketch` returns.

    Attributes
    ----------
    values : numpy.ndarray, shape (M, N, K)
        The result, float64: the best point on the fitted columns, or, with a
        held-out part, the best point on it among those checked.
    iterations, evaluations : int
        L-BFGS's.
    stop_reason : str
        A :class:`~._solver.StopReason` value: ``"no_progress"`` where the held-out columns stopped it.
    sketch_error : float
        ``||Y_J - P S_J|| / ||Y_J||`` of the best point on the fitted columns ``J``.
    holdout_error : float
        The same on the held-out columns, for ``values`` (nan without them): an estimate of
        ``||X - P|| / ||X||`` that the fit did not look at.
    start_holdout_error : float
        The same for the start (nan without held-out columns): what the fit gained on them is
        ``start_holdout_error - holdout_error``, both on one draw.
    step_scale : float
        L-BFGS's last ``s.y / y.y`` (nan before its first pair), times ``fitted / b``: the sketch's
        loss on its ``fitted`` of ``b`` columns is ``fitted / b`` of the whole loss in expectation,
        so this is the scale for the whole loss.  The first step of L-BFGS by passes from here:
        Polyak's, ``loss / ||g||^2``, overshot where the loss stays far above 0 (at N = 4,096 on a
        kernel SF barely fits, nine passes for the first iteration after the rounds; with this, two).
    """

    values: np.ndarray
    iterations: int = 0
    evaluations: int = 0
    stop_reason: str = StopReason.MAX_ITER
    sketch_error: float = math.nan
    holdout_error: float = math.nan
    start_holdout_error: float = math.nan
    step_scale: float = math.nan


def fit_sketch(Y: np.ndarray, S: np.ndarray, values: np.ndarray, offsets, *, width: int, groups: int,
               fit_columns: int | None = None, check_every: int = 5, patience: int = 2, history: int = 10,
               max_iter: int = 10**6, time_limit: float | None = None,
               callback: Callable[[int, float, np.ndarray], bool] | None = None) -> SketchFit:
    """L-BFGS on ``0.5 ||Y_J - P S_J||_F^2`` from ``values``, ``J`` the sketch's first ``fit_columns``
    columns (:func:`sketch_target` made ``Y``, ``S``); the others, where there are any, held out.

    The held-out columns give an estimate of the whole matrix's error that the
    fit did not see: it is checked every ``check_every`` iterations (and at the
    start), the best point by it is kept, and the fit stops when ``patience``
    checks in a row found no better one: the fit has begun to fit the
    sketch's own columns at the whole matrix's expense (at N = 16,384,
    b = 2,048, the whole error fell to 0.778 in 25 iterations and rose to 0.842
    by 60, while the sketch's fell on).

    Parameters
    ----------
    Y, S : numpy.ndarray, shape (N, b)
        The sketch and its test matrix, in the kernel's dtype.
    values : numpy.ndarray, shape (M, N, K)
        The start.
    offsets : sequence of int
        The support's offsets.
    width : int
        Columns of ``S`` per kernel block (``fit_columns`` a multiple of it).
    groups : int
        Groups of blocks (threads) per evaluation.
    fit_columns : int or None, default=None
        Columns fitted; None: all (no held-out part).
    check_every, patience : int
        See above.
    history : int, default=10
        L-BFGS pairs kept.
    max_iter : int
        Iterations at most.
    time_limit : float or None
        Seconds at most (no evaluation starts that would not end within them).
    callback : callable, optional
        ``callback(iteration, error, values)`` after every iteration: with held-out
        columns the best point by them so far and its held-out error (what the fit
        returns, but for its best multiple), else the best point on the sketch and
        its error; true stops the fit.  (It was given the best point on the sketch
        beside the held-out error of another: the checkpoints during the rounds saved
        that point, which overfits the sketch, under the other's error.)

    Returns
    -------
    SketchFit
    """
    import torch

    from ._solver import LBFGSOptions, lbfgs, new_state

    shape, b = values.shape, Y.shape[1]
    fitted = b if fit_columns is None or fit_columns >= b else fit_columns
    held = (fitted, b) if fitted < b else None
    objective = _SketchObjective(Y, S, offsets, shape, width, groups, (0, fitted))
    norms = [_norm2(Y, a, c) for a, c in ((0, fitted), held or (0, 0))]
    state = new_state(torch.from_numpy(np.ascontiguousarray(values, dtype=Y.dtype).reshape(-1)))
    out = SketchFit(values=np.array(values, dtype=np.float64))

    def error(loss: float, part: int = 0) -> float:
        return math.sqrt(2.0 * max(loss, 0.0) / norms[part]) if norms[part] > 0 else 0.0

    kept = [np.array(values, dtype=Y.dtype), math.inf, 0]  # the best point held out, its error, checks since

    def check(w: np.ndarray) -> bool:
        """The held-out error of ``w``; True where ``patience`` checks found nothing better."""
        held_error = error(objective.loss(w, held), 1)
        if held_error < kept[1]:
            kept[0][...], kept[1], kept[2] = w, held_error, 0
        else:
            kept[2] += 1
        out.holdout_error = kept[1]
        return kept[2] >= patience

    def report(st: dict) -> bool:
        if stop_requested():
            raise KeyboardInterrupt
        best = st["best_x"].numpy().reshape(shape)
        if held is not None and st["n_iter"] % check_every == 0 and check(best):
            out.stop_reason = StopReason.NO_PROGRESS
        shown, point = (out.holdout_error, kept[0]) if held is not None else (error(st["best_loss"]), best)
        asked = callback is not None and bool(callback(st["n_iter"], shown, point))
        if asked:
            out.stop_reason = StopReason.CALLBACK  # (the user's stop wins: the rounds end)
        return asked or out.stop_reason == StopReason.NO_PROGRESS

    if held is not None:
        check(kept[0])
        out.start_holdout_error = kept[1]
    options = LBFGSOptions(max_iter=max_iter, time_limit=time_limit, history_size=history, ftol=0.0, gtol=0.0,
                           first_step="polyak")
    try:
        stop = lbfgs(objective, state, options, callback=report)
        if stop != StopReason.CALLBACK:  # (else the held-out columns or the user's callback: said above)
            out.stop_reason = stop
    except KeyboardInterrupt:
        out.stop_reason = StopReason.INTERRUPTED
    best = state["best_x"].numpy().reshape(shape)
    if held is not None and out.stop_reason != StopReason.INTERRUPTED and state["n_iter"] % check_every:
        check(best)  # the last iterations, not yet checked
    if held is not None:
        out.holdout_error = _best_multiple(objective, kept[0], held, norms[1])
    out.values = (kept[0] if held is not None else best).astype(np.float64)
    out.iterations, out.evaluations = int(state["n_iter"]), int(state["func_evals"])
    out.sketch_error = error(state["best_loss"])
    if state["order"]:
        out.step_scale = float(state["H_diag"]) * fitted / b
    return out


def fit_rounds(
    columns: Callable[[int, int], np.ndarray],
    values: np.ndarray,
    offsets,
    *,
    settings: ColumnSettings = ColumnSettings(),
    width: int = 32,
    max_iter: int = 10**6,
    time_limit: float | None = None,
    seed: int = DEFAULT_SEED,
    callback: Callable[[int, float, int, np.ndarray], bool] | None = None,
) -> ColumnFit:
    """SF from column blocks by rounds of sketches: each round a new sketch of ``X`` (one pass,
    :func:`sketch_target`, ``settings.sketch_columns`` columns fitted and ``settings.holdout_columns``
    held out), and L-BFGS on it (:func:`fit_sketch`) from the last round's result until the held-out
    columns stop improving; rounds until ``time_limit`` (or ``max_iter`` iterations in all).

    A new sketch undoes the last one's overfitting (the directions it did not
    see), so the rounds go on lowering the whole error where one sketch stops:
    on ``scale_fit``'s ordered cloud at N = 16,384 in 300 s on two cores, 0.715
    against 0.734 for the fit by passes over the columns, and 0.78 for one
    sketch then passes; but on ``scale_sources``' 16-dimensional cloud a sketch's
    whole error rose from its fifth iteration (``benchmarks/results/sketch_fit.md``).
    A round starts only where its pass and a few iterations fit the time left;
    the rounds end (``"no_progress"``) where one lowered its held-out error by
    less than ``settings.sketch_min_gain`` of where it began, and
    :func:`._columns.fit_columns_auto` goes on from there by passes.  A first
    pass stopped by the time limit or a signal hands the start back at its best
    multiple on some of the columns the pass read (``kept_start``), as Adam's fit
    does where no step fits: it came back as it was, the identity start at the
    scale of ``||X||`` (rel 1.41 or more on a matrix of zero trace, worse than storing nothing).

    Parameters and result as :func:`._columns.fit_columns` (``steps``: iterations
    of all rounds; ``evaluations``: their L-BFGS evaluations on the sketches;
    ``columns``: ``N`` per round's pass; ``running_error``: the last round's
    held-out error, an estimate of the whole error the fit did not look at
    while fitting).
    """
    _announce(callback, "sketch")
    n = values.shape[1]
    low = np.dtype(settings.kernel_dtype)
    fitted, held = sketch_shape(n, width, settings)
    deadline = _timing.Deadline.after(time_limit)
    out = ColumnFit(values=np.array(values, dtype=np.float64), optimizer="sketch")
    began = _timing.now()
    pass_seconds = iteration_seconds = 0.0
    rounds = 0
    sums: list[tuple[float, float, float]] = []  # the start's, on columns of a first pass that stopped

    def measure(block: np.ndarray, start: int) -> None:
        # a few of the columns read (STOPPED_COLUMNS): a whole chunk's product took 7.6 s at N = 65,536
        norm2 = float(np.einsum("ij,ij->", block, block, dtype=np.float64))
        sums.append(block_sums(values, offsets, block, start, norm2, width, settings.groups))

    try:
        while out.steps < max_iter:
            if rounds and not deadline.fits(pass_seconds + CHECK_EVERY * iteration_seconds):
                out.stop_reason = StopReason.TIME_LIMIT
                break
            t0 = _timing.now()
            # the first pass has no last one to price it: its own first chunk does (at N = 100,000 a whole
            # pass over the columns, taken whatever it cost); the later ones are priced above
            sketched = sketch_target(columns, n, fitted + held, low, seed=seed * 7919 + rounds, piece=width,
                                     deadline=None if rounds or time_limit is None else deadline,
                                     stopped=None if rounds else measure)
            if sketched is None:
                out.stop_reason = StopReason.TIME_LIMIT
                break
            Y, S, norm2 = sketched
            pass_seconds = _timing.now() - t0
            out.columns += n

            def shifted(iteration: int, error: float, x: np.ndarray, done=out.steps) -> bool:
                return callback is not None and bool(callback(done + iteration, error, out.columns, x))

            left = None if time_limit is None else max(0.0, deadline.left())
            t1 = _timing.now()
            fit = fit_sketch(Y, S, out.values, offsets, width=width, groups=settings.groups, fit_columns=fitted,
                             check_every=CHECK_EVERY, history=settings.sketch_history, max_iter=max_iter - out.steps,
                             time_limit=left, callback=shifted)
            del Y, S
            rounds += 1
            iteration_seconds = (_timing.now() - t1) / max(1, fit.iterations)
            out.values, out.steps = fit.values, out.steps + fit.iterations
            out.evaluations += fit.evaluations
            out.step_scale = fit.step_scale if math.isfinite(fit.step_scale) else out.step_scale
            out.running_error = fit.holdout_error if held else fit.sketch_error
            out.curve.append((_timing.now() - began, out.running_error**2 * norm2))
            if fit.stop_reason in (StopReason.INTERRUPTED, StopReason.TIME_LIMIT, StopReason.CALLBACK):
                out.stop_reason = fit.stop_reason
                break
            # (not "gain < share": an exact start, 0 to 0 on the held-out columns, gains nothing either).  Not
            # where the iterations are spent: that stop is "max_iter" (below), and "no_progress" told the user
            # to raise --time-limit of a fit that --iters had ended
            if held and out.steps < max_iter and not fit.start_holdout_error - fit.holdout_error > \
                    settings.sketch_min_gain * fit.start_holdout_error:
                out.stop_reason = StopReason.NO_PROGRESS  # (fit_columns_auto goes on by passes)
                break
        else:
            out.stop_reason = StopReason.MAX_ITER
    except KeyboardInterrupt:
        out.stop_reason = StopReason.INTERRUPTED
    if not rounds and sums:  # no sketch was made: the start, at its best multiple
        return replace(_start_kept(values, FirstBlock(0.0, sums[0]), out.stop_reason), optimizer="sketch")
    return out
