"""SF fitted from a source's column blocks: the fit of a matrix too big to form.

The loss ``0.5 ||X - W_1 ... W_M||_F^2`` is a sum over columns, and the
product's columns ``S`` cost ``O(M K N |S|)`` (:func:`._kernels.block_loss_and_grad`),
so a step needs only ``X[:, S]`` for a block ``S`` of consecutive columns:
the source computes it (a kernel's columns from its points, a memory-mapped
file's from disk), the step's gradient is an unbiased estimate of the whole
loss's (scaled by ``N / |S|``), and Adam (Kingma & Ba 2015) takes the step
(:func:`fit_columns`).
The blocks are visited in a new random order every epoch, so every column of
the last factor is trained once per epoch.  The step size follows a cosine
schedule over the fit's progress (steps of ``max_iter``, or seconds of the
time limit, whichever is further along), from a short warm-up down to 1 %.

Why not only L-BFGS on the whole loss: at ``N = 65,536`` one evaluation is a
pass over every column, ``3 M K N^2 = 3.5e12`` multiply-adds (about 5 minutes
on two cores); here a step of 256 columns is about a second.  But steps of Adam gain little per pass
(``benchmarks/results/column_fit.md``: at ``N = 4,096`` 0.966 after 48 passes,
where L-BFGS by passes gets 0.874 and in memory 0.56 in 135), so where the time
limit leaves room for :data:`LBFGS_MIN_PASSES` passes, :func:`fit_columns_auto`
hands over to :func:`fit_columns_lbfgs`: the in-memory fit's L-BFGS, each
evaluation one pass over the column blocks; where it leaves room for fewer than
``sketch_max_passes`` (30), to rounds of sketches (:func:`._sketch.fit_rounds`:
each pass a new Gaussian sketch ``X S`` of the columns, L-BFGS on it at ``b / N``
of a pass per evaluation, until columns held out of the sketch stop improving),
and from where a round stops gaining, to L-BFGS by passes.  Either way the fit's own memory is
``O(N K M)`` — the values, Adam's two moments, L-BFGS's history — plus one
gradient and ``(M + 1) N w`` workspace per group of column blocks
(:func:`column_fit_memory`): this path is for matrices that cannot be formed,
the in-memory L-BFGS stays the fit of every matrix that can.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .. import _streams, _timing
from .._settings import DEFAULT_SEED
from ..formats import limit_text
from .._signals import stop_requested
from ._kernels import NUMBA_GROUPS, _numba_module, block_loss_and_grad
from ._multistart import multiple_error
from ._solver import StopReason, inner_and_square

__all__ = ["ColumnFit", "ColumnSettings", "FirstBlock", "column_fit_memory", "column_width", "first_block",
           "fit_columns", "fit_columns_auto", "fit_columns_lbfgs", "kernels_cached", "warm_up"]


@dataclass(frozen=True)
class ColumnSettings:
    """How a fit from column blocks steps.

    Attributes
    ----------
    batch : int
        Columns per step (consecutive; the last block of an epoch may be shorter).
    learning_rate : float
        Adam's peak step size, in the units of the factor values (the
        identity start's values are about 1).
    warmup : float
        Share of the fit over which the step size rises to its peak.
    final_share : float
        The step size at the end, as a share of the peak.
    beta1, beta2, eps : float
        Adam's moment decays and its denominator's floor.
    groups : int
        Groups of column blocks per step, each with its own gradient and
        workspace, run on up to as many threads; fixed (never the thread
        count), so the numbers do not depend on the machine's free cores.
    kernel_dtype : {"float32", "float64"}
        Precision of the step's product and gradient (the values and Adam's
        moments stay float64).  float32 halves the kernel's memory traffic:
        1.85-2x faster per column at N = 16,384-65,536 (measured), and a
        stochastic step's gradient is far noisier than its rounding.
    optimizer : {"auto", "lbfgs", "adam", "sketch"}
        ``"adam"``: :func:`fit_columns`, Adam steps on ``batch`` columns;
        ``"lbfgs"``: :func:`fit_columns_lbfgs`, L-BFGS on the whole loss, one
        pass over the columns per evaluation; ``"sketch"``: :func:`._sketch.fit_rounds`,
        L-BFGS on rounds of sketches of the columns; ``"auto"``: :func:`fit_columns_auto`,
        Adam, switching to the sketches or L-BFGS by what the time limit leaves room for.
    history : int
        L-BFGS pairs kept.
    sketch_columns, holdout_columns : int
        Columns of each sketch of ``X`` that :func:`._sketch.fit_rounds` fits, and
        that it holds out to tell when to take the next sketch.
    sketch_max_passes : float
        ``"auto"`` fits by rounds of sketches (:func:`._sketch.fit_rounds`) where
        the time left allows fewer passes over the columns than this (0: never):
        on ``scale_fit``'s ordered cloud they beat L-BFGS by passes at 15-20
        passes and tied at 36; where they stop gaining, L-BFGS by passes goes on
        (``benchmarks/results/sketch_fit.md``).
    sketch_history : int
        L-BFGS pairs the rounds keep (a round is tens of iterations; each pair
        is ``8 N K M`` bytes: 0.7 GB of five at N = 65,536).
    sketch_min_gain : float
        The rounds end where one lowers its held-out error by less than this
        share of where it started (on the same held-out columns, so the two
        are compared on one draw); ``"auto"`` then goes on by L-BFGS by passes
        for the time left, where its memory fits (where it does not, the rounds
        go on to the end).  Negative: to the end.
    """

    batch: int = 256
    learning_rate: float = 0.01
    warmup: float = 0.02
    final_share: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-12
    groups: int = NUMBA_GROUPS
    kernel_dtype: str = "float32"
    optimizer: str = "auto"
    history: int = 10
    sketch_columns: int = 2048
    holdout_columns: int = 128
    sketch_max_passes: float = 30.0
    sketch_history: int = 5
    sketch_min_gain: float = 0.005


@dataclass
class ColumnFit:
    """What :func:`fit_columns` returns.

    Attributes
    ----------
    values : numpy.ndarray, shape (M, N, K)
        The factor values (in the scaled units the fit ran in).
    steps : int
        Adam steps taken.
    evaluations : int
        Loss-and-gradient evaluations of what the optimizer minimized (what the in-memory fit's
        ``n_evals_`` counts, each on its own objective here): one per Adam step (its block of columns),
        one per L-BFGS evaluation by passes (a pass over every column) and one per L-BFGS evaluation
        of a sketch's loss (:func:`._sketch.fit_rounds`; a sketch's own pass is counted in ``columns``).
    columns : int
        Columns of ``X`` looked at, repeats counted (``epochs = columns / N``).
    stop_reason : str
        ``"max_iter"``, ``"time_limit"``, ``"interrupted"`` or ``"callback"``.
    running_error : float
        ``sqrt(2 loss / ||X||^2)`` over the last epoch's blocks, each with the
        values of its step (a lagging estimate of the relative error; the
        exact or interval estimate is the caller's).
    curve : list of (float, float)
        ``(seconds, running squared loss x 2)`` after each step, for the loss curve.
    optimizer : str
        What took the steps: ``"adam"``, ``"lbfgs"``, ``"sketch"`` (:func:`._sketch.fit_rounds`),
        ``"adam+lbfgs"``, ``"adam+sketch"`` or ``"adam+sketch+lbfgs"`` (the rounds stopped gaining).
    multiple : float
        The factor ``c`` Adam's product was scaled by at its end (:func:`best_multiple`; 1: not).
    kept_start : bool
        Adam's end was estimated further from ``X`` than its start (each at its best multiple), and
        the start, at its best multiple, is what ``values`` holds (:func:`_end_at_best_multiple`).
    step_scale : float
        Rounds of sketches: their L-BFGS's last scale ``s.y / y.y`` in the whole loss's units, the
        first step for L-BFGS by passes from their end (nan: none).
    note : str
        What the fit did other than asked, and why ("": nothing): Adam's steps where L-BFGS by passes
        was asked for and no pass fitted the time (:func:`_steps_instead_of_passes`).
    """

    values: np.ndarray
    optimizer: str = "adam"
    steps: int = 0
    columns: int = 0
    evaluations: int = 0
    stop_reason: str = StopReason.MAX_ITER
    running_error: float = math.nan
    curve: list = field(default_factory=list)
    multiple: float = 1.0
    step_scale: float = math.nan
    kept_start: bool = False
    note: str = ""


#: Columns the last steps' blocks must cover for their sums to give Adam's end its best multiple
#: (:func:`best_multiple`; every column where ``N`` is smaller).  Not a whole pass: a fit of under one
#: pass (large N, a short limit) kept the product's scale, off by far (8 s at N = 20,000, 0.3 passes:
#: a mesh 0.876 where its multiple gives 0.821, a graph's adjacency 1.39 where storing nothing gives 1.0).
#: Each block's sums are of the values before its step, so over fewer columns (a step or two: a graph of
#: N = 100,000 in 60 s) they stand for the end's product no more: the end is measured on one more block
#: (:func:`_end_at_best_multiple`), a step's time the loop keeps for it.
MULTIPLE_MIN_COLUMNS = 1024

#: Columns per kernel block on this path: in float32 at N = 4,096-65,536, 32 was the fastest
#: width of 16, 32 and 64 (0.99 s against 1.07 and 1.28 s per 256 columns at N = 65,536).
COLUMN_WIDTH = 32


def column_width(n: int, n_factors: int, n_offsets: int, memory: int | None, groups: int = NUMBA_GROUPS,
                 history: int | None = None) -> int:
    """Columns per block of the compiled kernel on this path: :data:`COLUMN_WIDTH`, or the largest
    power of two below it whose workspace fits ``memory`` (bytes; None: no limit), at least 1.

    Examples
    --------
    >>> column_width(65536, 16, 17, None), column_width(65536, 16, 17, 3 * 2**29, history=None)
    (32, 16)
    """
    width = COLUMN_WIDTH
    while width > 1 and memory is not None and \
            column_fit_memory(n, n_factors, n_offsets, width, groups, history=history) > memory:
        width //= 2
    return width


def column_fit_memory(n: int, n_factors: int, n_offsets: int, width: int, groups: int = NUMBA_GROUPS,
                      batch: int = ColumnSettings.batch, column_copies: int = 2, history: int | None = None) -> int:
    """Peak bytes a fit from column blocks allocates (float32 kernel, float64 values).

    Adam (``history=None``): the values and Adam's two moments in float64 and
    the kernel's copy of the values in float32 (``28 N K M`` bytes).  L-BFGS
    (``history`` pairs): the start and the result in float64, the solver's
    ``2 history`` pairs and about ten vectors (point, gradients, direction,
    best point) in float32 (``(8 history + 56) N K M`` bytes).  Either way, per
    group, in float32, the kernel's ``M + 1`` blocks of ``N x width``, its
    transposed values and its gradient; the step's target block in float32, and
    the ``width`` columns the source computes at a time (``column_copies``
    float64 ``N``-vectors each).

    Parameters
    ----------
    n, n_factors, n_offsets : int
        ``N``, ``M`` and ``K``.
    width : int
        Columns per kernel block.
    groups : int, default=NUMBA_GROUPS
        Groups of blocks run at once.
    batch : int, default=ColumnSettings.batch
        Columns per step.
    column_copies : int, default=2
        ``N``-vectors per column the source's block takes at its peak.
    history : int or None, default=None
        L-BFGS pairs (:func:`fit_columns_lbfgs`); None: Adam (:func:`fit_columns`).

    Returns
    -------
    int
        Bytes.
    """
    values = n * n_offsets * n_factors
    per_group = 4 * ((n_factors + 1) * n * width + 2 * values)
    state = 28 * values if history is None else (8 * history + 56) * values
    return state + groups * per_group + 8 * column_copies * n * min(width, n) + 4 * n * min(batch, n)


def warm_up(settings: ColumnSettings, *, adam: bool = True, lbfgs: bool = False, sketch: bool = False,
            float64: bool = False) -> None:
    """Compile (or load from numba's cache) what a fit from column blocks will call, on an ``8 x 8``
    problem (the same compiled specialisations as any ``N``'s): the block kernel in
    ``settings.kernel_dtype`` (in float64 too where ``float64``: the comparison of a saved or rank-one
    start with the fit's end), Adam's step where ``adam``, the sketch kernel where ``sketch`` and
    L-BFGS's host arithmetic where ``lbfgs`` or ``sketch`` (rounds of sketches run L-BFGS).

    The fit calls this before its clock starts, as the in-memory fit does (:func:`._kernels.warm_up_numba`):
    on a fresh install the float32 block kernel, the sketch kernel and the host arithmetic took 2.1, 1.8
    and 1.3 s to compile on their first calls, inside the fit's time limit (a fit of 20 s lost a quarter
    of it).  Loaded from the cache, this costs milliseconds.
    """
    import torch

    from . import _solver
    from ._kernels import sketch_loss_and_grad

    offsets, shape = (0, 1, 2, 4), (3, 8, 4)
    for dtype in dict.fromkeys([np.dtype(settings.kernel_dtype)] + ([np.dtype(np.float64)] if float64 else [])):
        w = np.full(shape, 0.25, dtype=dtype)
        grads = [np.empty_like(w) for _ in range(2)]  # two groups: the calls of a fit's
        block = np.ascontiguousarray(np.eye(8, dtype=dtype)[:, :4])
        block_loss_and_grad(w, offsets, block, 0, grads, 2, add=False)
    low = np.dtype(settings.kernel_dtype)
    w = np.full(shape, 0.25, dtype=low)
    grads = np.zeros((2, *shape), dtype=low)
    if adam:
        x = w.astype(np.float64)
        _adam(x, w, grads, np.zeros_like(x), np.zeros_like(x), 1.0, 1, settings, 0.01)
    if sketch:
        target = np.ascontiguousarray(np.eye(8, dtype=low)[:, :4])
        sketch_loss_and_grad(w, offsets, target, target.copy(), list(grads), 2, (0, 2))
    if lbfgs or sketch:
        _solver.warm_up(getattr(torch, low.name))


def kernels_cached(settings: ColumnSettings, *, adam: bool = True, lbfgs: bool = False, sketch: bool = False,
                   float64: bool = False) -> bool:
    """Whether numba's cache holds what :func:`warm_up` with these arguments compiles (it then loads it):
    for the words a display shows while it runs, and whether its seconds were compiling."""
    from ._kernels import compiled_for

    low = settings.kernel_dtype
    wanted = [("loss_and_grad", low, 0, "_kernels_numba")]
    wanted += [("loss_and_grad", "float64", 0, "_kernels_numba")] if float64 else []
    wanted += [("adam_step", low, 1, "_kernels_numba")] if adam else []
    wanted += [("sketch_loss_and_grad", low, 0, "_kernels_numba")] if sketch else []
    wanted += [("dot", low, 0, "_solver_numba")] if (lbfgs or sketch) and low != "float64" else []
    return all(compiled_for(*entry) for entry in wanted)


def _announce(callback: Callable | None, stage: str) -> None:
    """Tell ``callback`` (its attribute ``stage``, a callable taking the name, where it has one) that the
    steps it sees from now on are ``stage``'s: ``"adam"``, ``"lbfgs"`` (by passes) or ``"sketch"``
    (rounds of sketches), the names :attr:`ColumnFit.optimizer` joins.  A progress display says so: it
    said "start columns" through every stage of the fit, a start of that name being none."""
    tell = getattr(callback, "stage", None)
    if callable(tell):
        tell(stage)


def _same_stage(wrapper: Callable, callback: Callable | None) -> Callable:
    """``wrapper`` (a callback that calls ``callback``) told the stages ``callback`` is told; returns it."""
    tell = getattr(callback, "stage", None)
    if callable(tell):
        wrapper.stage = tell  # type: ignore[attr-defined]
    return wrapper


def _step_size(settings: ColumnSettings, progress: float) -> float:
    """The cosine schedule: a linear warm-up to the peak, then down to ``final_share`` of it."""
    peak = settings.learning_rate
    if progress < settings.warmup:
        return peak * max(progress / settings.warmup, 0.05)
    t = min(1.0, (progress - settings.warmup) / max(1e-12, 1.0 - settings.warmup))
    low = settings.final_share * peak
    return low + 0.5 * (peak - low) * (1.0 + math.cos(math.pi * t))


def _batches(n: int, batch: int, rng: np.random.Generator):
    """Block starts of every epoch, each epoch in a new random order (endless)."""
    starts = np.arange(0, n, batch)
    while True:
        yield from rng.permutation(starts).tolist()


@dataclass(frozen=True)
class FirstBlock:
    """The start evaluated on one block of columns before a fit under a time limit (:func:`first_block`).

    Attributes
    ----------
    step_seconds : float
        What a step of ``settings.batch`` columns is estimated to take: the seconds of the blocks that run
        at once (one a thread) times the rounds a step's groups take (:func:`_step_rounds`).
    sums : tuple of float
        The start's ``(||X_S||^2, <X_S, P_S>, ||P_S||^2)`` on those columns: its best multiple where no
        step fits the time.
    block_seconds : float
        The seconds of the blocks evaluated at once (one a thread, their columns read one block after
        another): one block's on one thread, the long side of it on more (their reads add up), which the
        comparison of a saved or rank-one start with the fit's end (``model._better_of``, one block at a
        time) is priced by: on the safe side, as much as the threads times one block's read where reads
        dominate.
    """

    step_seconds: float
    sums: tuple[float, float, float]
    block_seconds: float = 0.0

    def pass_seconds(self, n: int, batch: int) -> float:
        """What a pass over the ``n`` columns in chunks of ``batch`` (:class:`_pass_objective`) is estimated
        to take: a step's estimate per chunk (on the long side, as :attr:`step_seconds` is)."""
        return self.step_seconds * math.ceil(n / min(n, max(1, batch)))


def first_block(columns: Callable[[int, int], np.ndarray], values: np.ndarray, offsets, *,
                settings: ColumnSettings = ColumnSettings(), width: int = COLUMN_WIDTH) -> FirstBlock:
    """Evaluate ``values`` on the first columns: what a first step costs, before a fit takes it.

    :func:`fit_columns` times each step by the last one, and took its first whatever it cost: at
    N = 100,000 (14 factors) a step of 256 columns and the end's measure of another block took 34 s of
    a 20 s limit.  Given this, it takes the first only where it fits.  A step's blocks of ``width``
    columns run in ``settings.groups`` groups on up to :func:`~sfapprox._threads.compiled_threads`
    threads: so many blocks as run at once are evaluated here (one group each, on as many threads),
    and a step costs as many such rounds as its groups take (an estimate of one block on one thread times
    a step's blocks was as long as the step on two idle threads).  Their arrays are freed before the fit
    makes its own.

    Parameters
    ----------
    columns, values, offsets, settings, width
        As :func:`fit_columns` takes them.

    Returns
    -------
    FirstBlock
    """
    from .._threads import compiled_threads

    n = values.shape[1]
    low = np.dtype(settings.kernel_dtype)
    width = min(n, max(1, width))
    rounds, threads = _step_rounds(n, settings, width, compiled_threads())
    xk = np.ascontiguousarray(values, dtype=low)
    full = np.empty((n, min(n, threads * width)), dtype=low)
    grads = np.empty((threads, *values.shape), dtype=low)
    began = _timing.now()
    sums = _evaluate_block(columns, xk, offsets, full, 0, width, grads)[2:]
    seconds = _timing.now() - began
    return FirstBlock(step_seconds=seconds * rounds, sums=sums, block_seconds=seconds)


def _step_rounds(n: int, settings: ColumnSettings, width: int, threads: int) -> tuple[int, int]:
    """How a step of ``settings.batch`` columns runs its blocks of ``width`` on ``threads`` threads: the
    rounds of ``t`` blocks at once it takes, and ``t``, the blocks that run at once.  Its blocks are split
    into ``settings.groups`` groups as the kernel splits them (``numpy.array_split``), and each thread takes
    the next group when it is free (:func:`._kernels._run_tasks`), a group's blocks one after another: the
    rounds are the most blocks one thread runs.  One thread: a round per block."""
    blocks = -(-min(n, max(1, settings.batch)) // width)
    groups = min(max(1, settings.groups), blocks)
    at_once = max(1, min(threads, groups))
    loads = [0] * at_once
    for size in (len(g) for g in np.array_split(np.arange(blocks), groups)):
        loads[loads.index(min(loads))] += size  # the thread that is free first takes the next group
    return max(loads), at_once


def fit_columns(
    columns: Callable[[int, int], np.ndarray],
    values: np.ndarray,
    offsets,
    *,
    settings: ColumnSettings = ColumnSettings(),
    width: int = COLUMN_WIDTH,
    max_iter: int = 1000,
    time_limit: float | None = None,
    seed: int = DEFAULT_SEED,
    callback: Callable[[int, float, int, np.ndarray], bool] | None = None,
    probe: FirstBlock | None = None,
) -> ColumnFit:
    """Adam on column blocks of ``X`` from ``values``; stops on ``max_iter`` steps or ``time_limit``.

    Parameters
    ----------
    columns : callable
        ``columns(start, stop)`` returns ``X[:, start:stop]`` (scaled as the
        fit's units want), float64, shape ``(N, stop - start)``.
    values : numpy.ndarray, shape (M, N, K)
        The start (copied).
    offsets : sequence of int
        The support's offsets.
    settings : ColumnSettings, optional
        Batch, step size and Adam's constants.
    width : int, default=COLUMN_WIDTH
        Columns per kernel block (:func:`column_width` sizes it for memory).
    max_iter : int, default=1000
        Steps at most.
    time_limit : float or None, default=None
        Seconds at most; a step starts only when the last one's cost still fits.
    seed : int, default=0
        Seed of the epochs' block orders.
    callback : callable, optional
        ``callback(step, running_error, columns, values)`` after every step
        (``values`` the current ones, not to be changed); a true return
        value stops the fit (``stop_reason`` ``"callback"``).  Where it has
        an attribute ``stage`` (a callable), that is called with ``"adam"``
        before the first step (L-BFGS by passes and the rounds of sketches
        call it with ``"lbfgs"`` and ``"sketch"``).
    probe : FirstBlock, optional
        The start on a first block (:func:`first_block`): the first step is then taken only where its
        estimated cost and the end's measure fit ``time_limit``; where it does not, the start is handed
        back at its best multiple by the probe's sums (``kept_start``).  None: the first step is taken.

    Returns
    -------
    ColumnFit
    """
    _announce(callback, "adam")
    deadline = _timing.Deadline.after(time_limit)
    if probe is not None and not _first_step_fits(probe, deadline, settings, values.shape[1]):
        # before Adam's moments and buffers are made (0.9 GB at N = 100,000: 4 s of a fit that took no step)
        return _start_kept(values, probe)
    x = np.array(values, dtype=np.float64, order="C")
    n = x.shape[1]
    m1, m2 = np.zeros_like(x), np.zeros_like(x)
    low = np.dtype(settings.kernel_dtype)
    xk = x.astype(low)  # what the kernel reads
    grads = np.empty((max(1, settings.groups), *x.shape), dtype=low)
    full = np.empty((n, min(n, max(1, settings.batch))), dtype=low)  # a step's target, made once
    began = _timing.now()
    order = _batches(n, max(1, settings.batch), np.random.default_rng([seed, _streams.SF_BATCHES]))
    window: deque = deque()  # (columns, loss, ||X_S||^2, <X_S, P_S>, ||P_S||^2) of the last epoch's steps
    totals = [0, 0.0, 0.0, 0.0, 0.0]
    out = ColumnFit(values=x)
    step_seconds = 0.0
    first = None  # the start's (||X_S||^2, <X_S, P_S>, ||P_S||^2) on the first step's block
    window_min = min(n, MULTIPLE_MIN_COLUMNS)
    try:
        while out.steps < max_iter:
            if stop_requested():  # a stop whose KeyboardInterrupt was swallowed (one run in six, Ctrl-C lost)
                raise KeyboardInterrupt
            # a fit that would end with its window under window_min keeps a step's time to measure its end
            measure = step_seconds if totals[0] + settings.batch < window_min else 0.0
            if out.steps and not deadline.fits(step_seconds + measure):
                out.stop_reason = StopReason.TIME_LIMIT
                break
            t0 = _timing.now()
            start = next(order)
            stop, loss, norm2, inner, square = _evaluate_block(columns, xk, offsets, full, start, width, grads)
            first = first or (norm2, inner, square)
            lr = _step_size(settings, _progress(out.steps + 1, max_iter, _timing.now() - began, time_limit))
            # n / |S|: the whole loss's gradient, estimated from these columns
            _adam(x, xk, grads, m1, m2, n / (stop - start), out.steps + 1, settings, lr)
            out.steps += 1
            out.evaluations += 1
            out.columns += stop - start
            _remember(window, totals, (stop - start, loss, norm2, inner, square), n)
            out.running_error = math.sqrt(2.0 * totals[1] / totals[2]) if totals[2] > 0 else 0.0
            out.curve.append((_timing.now() - began, 2.0 * totals[1] * n / max(totals[0], 1)))
            halt = callback is not None and callback(out.steps, out.running_error, out.columns, x)
            step_seconds = _timing.now() - t0  # the callback's share too (progress, checkpoints)
            if halt:
                out.stop_reason = StopReason.CALLBACK
                break
        else:
            out.stop_reason = StopReason.MAX_ITER
    except KeyboardInterrupt:  # the values of the last whole step are kept (Adam updates them in place last)
        out.stop_reason = StopReason.INTERRUPTED
    if out.stop_reason != StopReason.CALLBACK and first is not None:  # (a callback's stop: L-BFGS goes on)
        end = tuple(totals[2:5]) if totals[0] >= window_min else None
        if end is None and out.stop_reason != StopReason.INTERRUPTED:
            try:  # the next block of the epoch: columns no step of this fit has looked at
                end = _evaluate_block(columns, xk, offsets, full, next(order), width, grads)[2:]
            except KeyboardInterrupt:
                out.stop_reason = StopReason.INTERRUPTED
        if end is not None:
            _end_at_best_multiple(out, values, end, first)
    return out


def _first_step_fits(probe: FirstBlock, deadline: _timing.Deadline, settings: ColumnSettings, n: int) -> bool:
    """Whether Adam's first step, at ``probe``'s estimate, fits ``deadline``: with the end's measure (a
    step's time) where that step leaves fewer than :data:`MULTIPLE_MIN_COLUMNS` columns behind it, as
    :func:`fit_columns` keeps for every later step."""
    measure = probe.step_seconds if min(n, settings.batch) < min(n, MULTIPLE_MIN_COLUMNS) else 0.0
    return deadline.fits(probe.step_seconds + measure)


def _start_kept(values: np.ndarray, probe: FirstBlock, stop_reason: str = StopReason.TIME_LIMIT) -> ColumnFit:
    """The fit where no step fits the time (or a stop came before the first): the start (copied), at its
    best multiple on the probe's columns (no worse than storing nothing), as a fit whose steps were worse
    than its start hands it back."""
    out = ColumnFit(values=np.array(values, dtype=np.float64, order="C"), stop_reason=stop_reason)
    _end_at_best_multiple(out, values, probe.sums, probe.sums)
    out.kept_start = True
    return out


def _evaluate_block(columns: Callable[[int, int], np.ndarray], xk: np.ndarray, offsets, full: np.ndarray, start: int,
                    width: int, grads: np.ndarray) -> tuple[int, float, float, float, float]:
    """``(stop, loss, ||X_S||^2, <X_S, P_S>, ||P_S||^2)`` of the values ``xk`` on the block of columns
    ``start .. stop`` (``full``'s width, or to ``N``), its gradient into ``grads``: a step's evaluation, and
    the end's measure after the last step."""
    n = xk.shape[1]
    stop = min(n, start + full.shape[1])
    block = full if stop - start == full.shape[1] else np.empty((n, stop - start), dtype=full.dtype)
    norm2 = _fill(block, columns, start, width)
    loss = block_loss_and_grad(xk, offsets, block, start, list(grads), width, add=False)
    return (stop, loss, norm2, *_products(grads, xk, loss, norm2))


def block_sums(values: np.ndarray, offsets, block: np.ndarray, start: int, norm2: float, width: int,
               groups: int = 1) -> tuple[float, float, float]:
    """``(||X_S||^2, <X_S, P_S>, ||P_S||^2)`` of ``values``' product on a block already read (``block``:
    ``X[:, start:start + b]`` in the kernel's dtype, C-contiguous; ``norm2``: ``||X_S||^2``), as
    :class:`FirstBlock`'s ``sums``: its best multiple (:func:`_start_kept`) without reading the columns again."""
    xk = np.ascontiguousarray(values, dtype=block.dtype)
    grads = np.empty((max(1, groups), *values.shape), dtype=block.dtype)
    loss = block_loss_and_grad(xk, offsets, block, start, list(grads), width, add=False)
    return (norm2, *_products(grads, xk, loss, norm2))


def _error_at_multiple(sums: tuple[float, float, float]) -> float:
    """``||X_S - c P_S|| / ||X_S||`` at the best ``c`` from a block's ``(||X_S||^2, <X_S, P_S>, ||P_S||^2)``."""
    return multiple_error(sums[1], sums[2], sums[0])


def _end_at_best_multiple(out: ColumnFit, start: np.ndarray, end: tuple[float, float, float],
                          first: tuple[float, float, float]) -> None:
    """Set Adam's result ``out.values`` to its best multiple (:func:`best_multiple`) by the sums ``end``
    (``(||X_S||^2, <X_S, P_S>, ||P_S||^2)`` of the end's product: the last epoch's blocks, or a block
    measured after the last step), or to the ``start``'s best multiple (by ``first``, its sums on the first
    step's block) where that is the smaller error: the fit hands back nothing it knows to be worse than
    its start or than storing nothing.  At N = 100,000 (a graph, 60 s) two steps of sign-like size on
    every value blew the product up (``(1 + K lr)^M``) and it came back at rel 1.74, kept at its scale.

    The multiple is fitted on the fit's own blocks, never on the scoring's columns (another random
    stream): the scoring's estimate of the product handed back stays unbiased.  ``running_error`` becomes
    the chosen product's error on those blocks.
    """
    if _error_at_multiple(first) < _error_at_multiple(end):
        out.values[...] = start
        out.kept_start, end = True, first
    out.multiple = best_multiple(out.values, end[1], end[2])
    if end[0] > 0 and (out.multiple != 1.0 or out.kept_start):  # the blocks' error, of the scaled product
        out.running_error = _error_at_multiple(end) if out.multiple != 1.0 else \
            math.sqrt(max(0.0, end[0] - 2.0 * end[1] + end[2]) / end[0])


def _products(grads: np.ndarray, xk: np.ndarray, loss: float, norm2: float) -> tuple[float, float]:
    """``<X_S, P_S>`` and ``||P_S||^2`` of a step's block, from its loss, ``||X_S||^2`` and gradient
    (:func:`._solver.inner_and_square`, as the in-memory fit's best multiple of its start).  The groups'
    gradients are dotted a million values at a time, each sum in float64.
    """
    flat = xk.reshape(-1)
    dot = 0.0
    for g in grads:
        g = g.reshape(-1)
        for s in range(0, flat.size, 1 << 20):
            dot += float(np.dot(g[s:s + (1 << 20)], flat[s:s + (1 << 20)]))
    return inner_and_square(loss, dot, norm2, xk.shape[0])


def best_multiple(x: np.ndarray, inner: float, square: float) -> float:
    """Scale ``x`` in place so that its product is ``c P`` with ``c = <X, P> / ||P||^2`` (estimated
    over the last epoch's blocks): the best multiple of the product, never worse than storing nothing.

    Adam's steps on a high-rank kernel leave the product's scale far off when the time allows few
    passes: at N = 2,048 after 1 / 3 / 6 epochs the relative error was 1.196 / 1.042 / 0.972, and the
    best multiple of the same product 0.968 / 0.965 / 0.959 (at N = 65,536, 5.6 epochs gave 1.0001).
    A negative ``c`` (the product anti-correlated with ``X``: a graph's adjacency after a few steps from
    the identity, rel 1.40 at N = 20,000) is carried by the first factor's sign.
    Returns ``c`` (1.0 where it is not defined: ``<X, P>`` zero or ``||P||^2`` not positive).
    """
    if not (inner != 0 and square > 0 and math.isfinite(inner / square)):
        return 1.0
    c = inner / square
    x *= abs(c) ** (1.0 / x.shape[0])
    if c < 0:
        x[0] *= -1.0
    return c


def fit_columns_lbfgs(
    columns: Callable[[int, int], np.ndarray],
    values: np.ndarray,
    offsets,
    *,
    settings: ColumnSettings = ColumnSettings(),
    width: int = COLUMN_WIDTH,
    history: int = 10,
    max_iter: int = 1000,
    time_limit: float | None = None,
    callback: Callable[[int, float, int, np.ndarray], bool] | None = None,
    pass_seconds: float | None = None,
    first_step: float = math.nan,
    probe: FirstBlock | None = None,
    seed: int = DEFAULT_SEED,
) -> ColumnFit:
    """L-BFGS on the whole loss from ``values``, each evaluation one pass over ``X``'s column blocks.

    The in-memory fit's method (:func:`._solver.lbfgs`, float32 values and
    history) on the same objective, but ``X`` is asked for its columns again
    at every evaluation, ``settings.batch`` at a time, so only a block of it
    is ever held: the fit's memory is its ``2 history + 8`` vectors of
    ``N K M`` values and the kernel's workspace (:func:`column_fit_memory`).
    Each evaluation's loss is the exact loss of its point, so the error
    reported is exact (in float32 arithmetic) for the best point.

    Parameters and the result are those of :func:`fit_columns` (``steps``:
    iterations; ``evaluations``: L-BFGS's, each a pass; ``columns``: ``N`` per evaluation); ``history`` is the number of
    L-BFGS pairs kept, and ``pass_seconds`` what a pass is expected to take
    (known: no evaluation starts that the time limit would not see end), ``first_step`` the first
    step along ``-g`` where one is known (nan: Polyak's, ``loss / ||g||^2``).  ``probe``: the start on a
    first block (:func:`first_block`), where no ``pass_seconds`` is known; the first pass is then made
    only where its estimate (:meth:`FirstBlock.pass_seconds`) fits ``time_limit``; else Adam's steps take the
    time where the first of them fits (:func:`_steps_instead_of_passes`, said in ``note``; ``seed``: their
    blocks' order), and else the start is handed back at its best multiple by the probe's sums
    (``kept_start``), as :func:`fit_columns` does.  Without either, the first pass is made whatever it costs
    (at N = 100,000 about an hour under a 20 s limit: ``benchmarks/results/sf_setup_guards_lbfgs.md``).
    """
    import torch

    from ._solver import LBFGSOptions, lbfgs, new_state

    _announce(callback, "lbfgs")
    low = np.dtype(settings.kernel_dtype)
    shape = values.shape
    n = shape[1]
    if pass_seconds is None and probe is not None:
        pass_seconds = probe.pass_seconds(n, settings.batch)
        if not _timing.Deadline.after(time_limit).fits(pass_seconds):
            # before the objective's and the solver's buffers are made (the pass could not end in time)
            return _steps_instead_of_passes(columns, values, offsets, settings=settings, width=width,
                                            max_iter=max_iter, time_limit=time_limit, seed=seed, callback=callback,
                                            probe=probe, pass_seconds=pass_seconds)
    objective = _pass_objective(columns, offsets, shape, low, width, max(1, settings.batch), max(1, settings.groups))
    state = new_state(torch.from_numpy(np.ascontiguousarray(values, dtype=low).reshape(-1)))
    state["eval_seconds"] = pass_seconds
    began = _timing.now()
    out = ColumnFit(values=np.array(values, dtype=np.float64), optimizer="lbfgs")

    def report(st: dict) -> bool:
        if stop_requested():  # a stop whose KeyboardInterrupt was swallowed (see _signals): stop here
            raise KeyboardInterrupt
        out.running_error = math.sqrt(2.0 * max(st["best_loss"], 0.0) / objective.norm2) if objective.norm2 > 0 else 0.0
        out.curve.append((_timing.now() - began, 2.0 * st["loss"]))
        if callback is None:
            return False
        return bool(callback(st["n_iter"], out.running_error, st["func_evals"] * n, st["best_x"].numpy().reshape(shape)))

    # the Polyak first step: a first iteration of one or two passes, not six (results/column_fit.md)
    options = LBFGSOptions(max_iter=max_iter, time_limit=time_limit, history_size=history, ftol=0.0, gtol=0.0,
                           first_step=first_step if first_step > 0 else "polyak")
    try:
        out.stop_reason = lbfgs(objective, state, options, callback=report)
    except KeyboardInterrupt:  # the best point evaluated so far is kept
        out.stop_reason = StopReason.INTERRUPTED
    out.values = state["best_x"].numpy().reshape(shape).astype(np.float64)
    out.steps = int(state["n_iter"])
    out.evaluations = int(state["func_evals"])
    out.columns = int(state["func_evals"]) * n
    if math.isfinite(state["best_loss"]) and objective.norm2 > 0:
        out.running_error = math.sqrt(2.0 * max(state["best_loss"], 0.0) / objective.norm2)
        best_loss, inner, square = objective.best
        # further from X than storing nothing (a start far off in scale, a pass or two): its best multiple,
        # from the best point's own pass (exact sums), as the in-memory fit's scoring does (ChordSF._at_best_multiple)
        if out.running_error > 1.0 and math.isclose(best_loss, state["best_loss"], rel_tol=1e-12):
            out.multiple = best_multiple(out.values, inner, square)
            if out.multiple != 1.0:
                out.running_error = multiple_error(inner, square, objective.norm2)
    return out


def _steps_instead_of_passes(columns, values: np.ndarray, offsets, *, settings: ColumnSettings, width: int,
                             max_iter: int, time_limit: float | None, seed: int, callback, probe: FirstBlock,
                             pass_seconds: float) -> ColumnFit:
    """L-BFGS by passes where not one pass fits ``time_limit`` (``pass_seconds``, the probe's estimate):
    Adam's steps on blocks of columns (:func:`fit_columns`, its first priced by the same ``probe``), with a
    ``note`` that says so, where the first fits; else the start at its best multiple, as before.  The
    fit ended with its start where a step of a second or two fitted: at N = 100,000 under 20 s a pass is
    about an hour (``benchmarks/results/sf_setup_guards_lbfgs.md``).  Adam's state (the values and two
    moments, ``28 N K M`` bytes) is less than L-BFGS's (:func:`column_fit_memory`): it fits where that did."""
    deadline = _timing.Deadline.after(time_limit)
    if not _first_step_fits(probe, deadline, settings, values.shape[1]):
        return replace(_start_kept(values, probe), optimizer="lbfgs")
    left = deadline.left()
    fit = fit_columns(columns, values, offsets, settings=settings, width=width, max_iter=max_iter,
                      time_limit=left, seed=seed, callback=callback, probe=probe)
    fit.note = (f"L-BFGS by passes: a pass (about {limit_text(pass_seconds)} s by the first block) did not fit the "
                f"{limit_text(left)} s left; Adam's steps of {min(values.shape[1], settings.batch):,} columns instead")
    return fit


#: From this many passes over the columns that the time left allows, :func:`fit_columns_auto` hands
#: over from Adam to L-BFGS: on the RBF kernel of 4,096 clustered points (``benchmarks/column_fit.py
#: --passes 4096``, ``results/column_fit.md``) L-BFGS by passes (with its Polyak first step) was behind
#: Adam at 3 passes (1.042 against 1.032) and ahead from 6 (0.978 / 0.986), 12 (0.971 / 0.978), 24
#: (0.955 / 0.974) and 48 (0.874 / 0.966; in-memory L-BFGS gets 0.56 in 135).  With torch's first step
#: its first iteration took six passes, and it was behind up to 12.
LBFGS_MIN_PASSES = 6
#: Adam steps timed before that choice (the first may also load the kernel where no :func:`warm_up` ran).
PROBE_STEPS = 3
#: The fewest passes over the columns the time left must hold for :func:`fit_columns_auto` to go by rounds
#: of sketches: a round begins with its sketch, a whole pass that no time limit cuts short, so under one
#: pass left it ended past the limit (a pass of 4 s with 2 s left: at 7 s of a 5 s limit; at N = 65,536,
#: where a pass takes minutes, a fit of the default 60 s would have run for one).  Adam's steps go on there.
SKETCH_MIN_PASSES = 1.0


def fit_columns_auto(
    columns: Callable[[int, int], np.ndarray],
    values: np.ndarray,
    offsets,
    *,
    settings: ColumnSettings = ColumnSettings(),
    width: int = COLUMN_WIDTH,
    max_iter: int = 1000,
    time_limit: float | None = None,
    seed: int = DEFAULT_SEED,
    callback: Callable[[int, float, int, np.ndarray], bool] | None = None,
    lbfgs_fits: bool = True,
    rounds: Callable[..., ColumnFit] | None = None,
    probe: FirstBlock | None = None,
) -> ColumnFit:
    """Adam (:func:`fit_columns`) for :data:`PROBE_STEPS` steps, then, from where it got, by what the
    time left allows at the speed those steps had: rounds of sketches from :data:`SKETCH_MIN_PASSES` to
    ``settings.sketch_max_passes`` passes over the columns (``rounds``, given where their memory fits the
    limit: :func:`._sketch.fit_rounds`, passed in because that module imports this one; where a round stops
    gaining, L-BFGS by passes for the time left where ``lbfgs_fits``, else the rounds to the end), L-BFGS
    (:func:`fit_columns_lbfgs`) from :data:`LBFGS_MIN_PASSES` passes (where ``lbfgs_fits``); else Adam to
    the end.

    Without a time limit (``max_iter`` steps bound the fit) it is Adam's fit, step for step.
    Parameters and result as :func:`fit_columns` (``probe`` is Adam's); ``callback`` sees the steps of
    all, numbered on.
    """
    n = values.shape[1]
    began = _timing.now()
    stamps: list[float] = []
    switch = [None]
    per_pass = [0.0]

    def timed(step: int, running: float, seen: int, x: np.ndarray) -> bool:
        stop = callback is not None and callback(step, running, seen, x)
        stamps.append(_timing.now())
        if step == PROBE_STEPS and not stop:
            per_step = (stamps[-1] - stamps[0]) / max(1, PROBE_STEPS - 1)  # the first step's compile left out
            per_pass[0] = per_step * math.ceil(n / max(1, settings.batch))
            passes = (time_limit - (stamps[-1] - began)) / max(per_pass[0], 1e-9)
            switch[0] = "sketch" if rounds is not None and SKETCH_MIN_PASSES <= passes < settings.sketch_max_passes \
                else "lbfgs" if lbfgs_fits and passes >= LBFGS_MIN_PASSES else None
            return switch[0] is not None
        return stop

    choose = time_limit is not None and (lbfgs_fits or rounds is not None) and max_iter > PROBE_STEPS
    adam = fit_columns(columns, values, offsets, settings=settings, width=width, max_iter=max_iter,
                       time_limit=time_limit, seed=seed, callback=_same_stage(timed, callback) if choose else callback,
                       probe=probe)
    if switch[0] is None:
        return adam

    shifted = _after(adam, callback)
    offset = _timing.now() - began
    if switch[0] == "sketch":
        # the rounds' stop on a small gain hands over to L-BFGS by passes; where its memory does not fit, they
        # go on to the end (they ended the fit with the time left unused: at N = 1,500 under --max-memory 380M,
        # after 8 s of 15, "no_progress", and fit's advice to raise --time-limit)
        plan = settings if lbfgs_fits else replace(settings, sketch_min_gain=-1.0)
        rest = rounds(columns, adam.values, offsets, settings=plan, width=width, max_iter=max_iter - adam.steps,
                      time_limit=max(0.0, time_limit - offset), seed=seed, callback=shifted)
        rest = _then_passes(rest, columns, offsets, settings, width, max_iter - adam.steps,
                            time_limit - (_timing.now() - began), _timing.now() - began - offset, per_pass[0],
                            shifted, lbfgs_fits)
    else:
        rest = fit_columns_lbfgs(columns, adam.values, offsets, settings=settings, width=width,
                                 history=settings.history, max_iter=max_iter - adam.steps,
                                 time_limit=max(0.0, time_limit - offset), callback=shifted, pass_seconds=per_pass[0])
    return _joined(adam, rest, offset, "adam")


def _after(first: ColumnFit, callback: Callable[[int, float, int, np.ndarray], bool] | None):
    """``callback`` for a fit that goes on from ``first``: its steps and columns numbered on from ``first``'s."""

    def shifted(step: int, running: float, seen: int, x: np.ndarray) -> bool:
        return callback is not None and bool(callback(first.steps + step, running, first.columns + seen, x))

    return _same_stage(shifted, callback)


def _joined(first: ColumnFit, rest: ColumnFit, offset: float, name: str) -> ColumnFit:
    """One fit of ``first`` and then ``rest`` (begun ``offset`` seconds after ``first``): steps, columns
    and curves added up, the optimizers named in turn (``name``: ``first``'s), ``rest``'s values.

    ``rest`` went on from ``first``'s values, so its ``multiple`` (and ``step_scale``) is the joined
    fit's: the rounds of sketches hand their start (``first``'s end) back at its best multiple where
    their first pass is stopped, and ``params_["best_multiple"]`` said nothing of it (dropped here).
    Where ``rest`` kept its start, ``first``'s own multiple is on its values too: the two multiply.
    The joined fit kept its start only where both did (``rest`` keeping ``first``'s end alone is not
    the fit's start: ``first``'s steps made it); the notes of both are kept.
    """
    return ColumnFit(values=rest.values, optimizer=f"{name}+{rest.optimizer}", steps=first.steps + rest.steps,
                     columns=first.columns + rest.columns, evaluations=first.evaluations + rest.evaluations,
                     stop_reason=rest.stop_reason,
                     running_error=rest.running_error if math.isfinite(rest.running_error) else first.running_error,
                     curve=first.curve + [(t + offset, v) for t, v in rest.curve],
                     # rest's start scaled once more where it kept it: both factors are on the values
                     multiple=rest.multiple * (first.multiple if rest.kept_start else 1.0),
                     step_scale=rest.step_scale, kept_start=first.kept_start and rest.kept_start,
                     note="; ".join(n for n in (first.note, rest.note) if n))


def _then_passes(rounds: ColumnFit, columns, offsets, settings: ColumnSettings, width: int, max_iter: int,
                 left: float, spent: float, pass_seconds: float, callback, lbfgs_fits: bool) -> ColumnFit:
    """``rounds``, or, where they stopped gaining (``"no_progress"``), it and L-BFGS by passes
    (:func:`fit_columns_lbfgs`) from its end for the ``left`` seconds, where its memory fits
    (``lbfgs_fits``), those seconds hold two passes (``pass_seconds``, Adam's estimate: the first only
    measures the start) and ``max_iter`` a step; ``spent``: the rounds' seconds (the passes' curve goes
    on from there)."""
    if rounds.stop_reason != StopReason.NO_PROGRESS or not lbfgs_fits or rounds.steps >= max_iter \
            or left < 2 * pass_seconds:
        return rounds
    passes = fit_columns_lbfgs(columns, rounds.values, offsets, settings=settings, width=width,
                               history=settings.history, max_iter=max_iter - rounds.steps, time_limit=left,
                               callback=_after(rounds, callback), pass_seconds=pass_seconds,
                               first_step=rounds.step_scale)
    return _joined(rounds, passes, spent, rounds.optimizer)


class _pass_objective:
    """``x -> (0.5 ||X - P(x)||_F^2, gradient)`` by one pass over ``X``'s blocks of ``chunk`` columns
    (:func:`._kernels.block_loss_and_grad` on each, the gradients added up in a fixed order);
    ``norm2`` is ``||X||_F^2``, measured by the first pass."""

    def __init__(self, columns, offsets, shape, dtype, width: int, chunk: int, groups: int):
        self.columns, self.offsets, self.shape, self.width = columns, offsets, shape, width
        n = shape[1]
        self.chunk = min(n, chunk)
        self.grads = [np.empty(shape, dtype=dtype) for _ in range(groups)]
        self.block = np.empty((n, self.chunk), dtype=dtype)  # a pass's target blocks, made once
        self.norm2 = math.nan
        self.best = (math.inf, math.nan, math.nan)  # the least loss evaluated, its <X, P> and ||P||^2

    def __call__(self, x):
        import torch

        n = self.shape[1]
        w = x.numpy().reshape(self.shape)
        total = np.zeros(self.shape, dtype=w.dtype)  # the solver keeps it: a new one per evaluation
        loss = norm2 = 0.0
        for start in range(0, n, self.chunk):
            stop = min(n, start + self.chunk)
            block = self.block if stop - start == self.chunk else np.empty((n, stop - start), dtype=w.dtype)
            norm2 += _fill(block, self.columns, start, self.width)
            loss += block_loss_and_grad(w, self.offsets, block, start, self.grads, self.width)
            total += self.grads[0]
        self.norm2 = norm2
        if loss < self.best[0]:  # (a dot of the values: the pass's own sums, for the best multiple at the end)
            self.best = (loss, *_products(total[None], w, loss, norm2))
        return loss, torch.from_numpy(total.reshape(-1))


def _fill(block: np.ndarray, columns: Callable[[int, int], np.ndarray], start: int, chunk: int) -> float:
    """``block[:, j] = X[:, start + j]``, asked of the source ``chunk`` columns at a time; returns
    ``||block||^2`` (of the float64 columns).  Small pieces: a whole step's columns at once made
    ``N x batch`` temporaries that the allocator returned to the system and faulted in again on
    every step (0.1-1.3 s per step at N = 65,536, measured; 0.13 s steady in pieces of 32)."""
    total = 0.0
    for a in range(0, block.shape[1], chunk):
        b = min(block.shape[1], a + chunk)
        part = columns(start + a, start + b)
        total += float(np.vdot(part, part))
        block[:, a:b] = part
    return total


def _progress(step: int, max_iter: int, elapsed: float, time_limit: float | None) -> float:
    """How far along the fit is, 0..1: by steps or by seconds, whichever is further."""
    by_steps = step / max(1, max_iter)
    return max(by_steps, elapsed / time_limit) if time_limit else by_steps


def _remember(window: deque, totals: list, entry: tuple, n: int) -> None:
    """Add a step's (columns, loss, ||X_S||^2, ...) and forget the steps beyond the last ``n`` columns."""
    window.append(entry)
    for i, value in enumerate(entry):
        totals[i] += value
    while totals[0] - window[0][0] >= n:
        old = window.popleft()
        for i, value in enumerate(old):
            totals[i] -= value


def _adam(x: np.ndarray, xk: np.ndarray, grads: np.ndarray, m1: np.ndarray, m2: np.ndarray, scale: float, t: int,
          settings: ColumnSettings, lr: float) -> None:
    """One Adam step on ``x`` in place, the gradient the sum of the groups' ``grads`` times
    ``scale``; ``xk`` gets the new values in the kernel's dtype.  Compiled, one pass over the
    ``N K M``-long arrays (142 MB each at N = 65,536); numpy in place without numba."""
    b1, b2 = settings.beta1, settings.beta2
    bias1, bias2 = 1.0 - b1**t, 1.0 - b2**t
    module = _numba_module()
    if module:
        module.adam_step(x.reshape(-1), xk.reshape(-1), grads.reshape(grads.shape[0], -1), m1.reshape(-1),
                         m2.reshape(-1), scale, lr, b1, b2, bias1, bias2, settings.eps)
        return
    g = grads.sum(axis=0, dtype=np.float64)
    g *= scale
    m1 *= b1
    m1 += (1.0 - b1) * g
    g *= g
    m2 *= b2
    m2 += (1.0 - b2) * g
    np.sqrt(m2, out=g)
    g *= 1.0 / math.sqrt(bias2)
    g += settings.eps
    np.divide(m1, g, out=g)
    x -= (lr / bias1) * g
    xk[...] = x
