"""A limited-memory BFGS loop over one flat tensor, with explicit stopping rules.

The method is torch.optim.LBFGS's (the two-loop recursion's direction,
strong-Wolfe line search — torch's ``_strong_wolfe``, entered only when the
first trial step fails), rewritten as a plain loop so that every stopping rule
is explicit and reported, the best iterate is always kept, and all
cross-iteration state lives in one dict (``state``), as in torch's optimizer:
checkpointing and Ctrl-C handling become a copy of that dict.

Small fits are dominated by per-iteration overhead, not arithmetic, so the
direction is computed from the compact form of the L-BFGS matrix with cached
``m x m`` matrices, and each iteration makes two passes over the pair buffer
(one product with the new gradient, one to assemble the direction) where the
two-loop recursion makes ``4m`` vector operations.

On the CPU the loop's vector work runs in numpy on views of the same memory
(:class:`_NumpyOps`): the arithmetic is the same, and numpy's per-call
overhead is a third of torch's, which at ``N = 64`` (a few thousand values,
an evaluation of tens of microseconds) is most of an iteration.  There the
pairs are stored in float32 and multiplied in compiled loops that sum in
float64 (:data:`PAIRS_DTYPE`).  On a GPU it
runs in torch (:class:`_TorchOps`).  The state's ``x``, ``grad`` and
``best_x`` are tensors either way.

The objective is an injected callable ``fun(x) -> (loss: float, grad: Tensor)``,
so the loop is testable on any function.  Where it is one call of the compiled
kernel on one thread (``fun.compiled_plan()``, :class:`._kernels.CompiledObjective`:
a float64 CPU fit below ``N = 512``), the same iterations run compiled whole,
about 0.05 s of them per call (:func:`_compiled_steps`,
:func:`._solver_numba.iterate`): at ``N = 64`` the Python around the kernel
and the pair products was half an iteration's time.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .. import _timing
from .._errors import user_stacklevel
from .._threads import compiled_threads

# The strong-Wolfe line search of torch.optim.LBFGS.  It is a private helper,
# but a pure function with a stable signature since torch 1.2; the torch
# range in pyproject.toml is pinned below 3 and tests exercise it.
from torch.optim.lbfgs import _strong_wolfe

__all__ = ["LBFGSOptions", "StopReason", "lbfgs", "evaluate_start", "pairs_itemsize"]

Objective = Callable[[torch.Tensor], tuple[float, torch.Tensor]]


class StopReason:
    """Why a fit stopped (the strings written to results)."""

    MAX_ITER = "max_iter"
    MAX_EVALS = "max_evals"
    TIME_LIMIT = "time_limit"
    FTOL = "ftol"
    GTOL = "gtol"
    NO_PROGRESS = "no_progress"
    NON_FINITE = "non_finite"
    INTERRUPTED = "interrupted"
    CALLBACK = "callback"


@dataclass
class LBFGSOptions:
    """Stopping rules and memory of the L-BFGS loop.

    Attributes
    ----------
    max_iter : int
        Maximum number of iterations (line searches).
    max_evals : int or None
        Maximum number of objective evaluations (None: no limit).
    time_limit : float or None
        Wall-clock limit in seconds.  Checked before every objective
        evaluation: one that would not end within the limit, at the cost of
        the last one measured (``state["eval_seconds"]``), is not started,
        so a line search at a large N stops before the limit, not an
        iteration after it.
    ftol : float
        Stop when the relative decrease of the loss over the last ``window``
        iterations is at most ``ftol``.
    gtol : float
        Stop when ``max |grad| <= gtol * max(1, |loss|)``.
    history_size : int
        Number of correction pairs kept.
    window : int
        Iterations over which ``ftol`` is measured.
    first_step : {"gradient", "polyak"} or float
        The first trial step along ``-g`` (and after a history reset):
        ``"gradient"``, ``min(1, 1 / ||g||_1)`` (torch.optim.LBFGS's); ``"polyak"``,
        ``loss / ||g||^2``, the step to zero loss in the linear model — for a
        loss whose least value is near 0 it is about right, where the gradient
        rule's tiny step makes the line search extrapolate over several
        evaluations (six passes over the columns for the fit from column
        blocks, ``benchmarks/results/column_fit.md``); a number: that step
        (a scale known from an earlier fit of the same loss; the iterations
        then run in Python, never compiled).
    coarse_callback : bool
        Where iterations run compiled (:func:`_compiled_steps`), call the
        callback once per compiled call (about every
        :data:`COMPILED_CALL_SECONDS`, after its last iteration) instead of
        after each iteration: a progress display needs no more, and at small
        N the Python call per iteration is a third of the iteration's time.
    """

    max_iter: int = 5000
    max_evals: int | None = None
    time_limit: float | None = None
    ftol: float = 1e-10
    gtol: float = 1e-12
    history_size: int = 50
    window: int = 20
    first_step: str | float = "gradient"
    coarse_callback: bool = False


class _TorchOps:
    """The loop's vector operations on tensors (any device)."""

    @staticmethod
    def host(t) -> np.ndarray:
        """A small array as a float64 numpy array (no copy for a float64 CPU tensor)."""
        return t.detach().double().cpu().numpy()

    @staticmethod
    def from_host(w: np.ndarray, like):
        w = torch.from_numpy(w) if like.device.type == "cpu" else torch.as_tensor(w, device=like.device)
        return w.to(like.dtype)

    @staticmethod
    def zeros(shape, like):
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    @staticmethod
    def pairs_buffer(shape, like):
        """The pair buffer: the iterate's dtype (on a GPU a float32 product would round its sums)."""
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    @staticmethod
    def project(pairs, g) -> np.ndarray:
        """``pairs @ g`` on the host, float64."""
        return _TorchOps.host(pairs @ g)

    @staticmethod
    def dot(a, b) -> float:
        return float(a.dot(b))

    @staticmethod
    def assemble(pairs, w: np.ndarray, g, h0: float):
        """``-h0 g - pairs^T w`` (``w``: the float64 weights on the host)."""
        return torch.addmv(g, pairs.T, _TorchOps.from_host(w, g), beta=-h0, alpha=-1.0)

    @staticmethod
    def axpy(x, t: float, d):
        """``x + t d`` (a new array)."""
        return x.add(d, alpha=t)

    @staticmethod
    def scale_into(out, d, t: float) -> None:
        torch.mul(d, t, out=out)

    @staticmethod
    def sub_into(out, a, b) -> None:
        torch.sub(a, b, out=out)

    @staticmethod
    def max_abs(g) -> float:
        return float(torch.linalg.vector_norm(g, math.inf))

    @staticmethod
    def copy(a):
        return a.detach().clone()

    @staticmethod
    def tensor(a) -> torch.Tensor:
        return a

    @staticmethod
    def array(t: torch.Tensor):
        return t


class _NumpyOps:
    """The same operations on numpy arrays: the CPU path (views of the tensors' memory, no copies)."""

    @staticmethod
    def host(a: np.ndarray) -> np.ndarray:
        return a if a.dtype == np.float64 else a.astype(np.float64)

    @staticmethod
    def from_host(w: np.ndarray, like: np.ndarray) -> np.ndarray:
        return w if like.dtype == np.float64 else w.astype(like.dtype)

    @staticmethod
    def zeros(shape, like: np.ndarray) -> np.ndarray:
        return np.zeros(shape, dtype=like.dtype)

    @staticmethod
    def pairs_buffer(shape, like: np.ndarray) -> np.ndarray:
        """The pair buffer: :data:`PAIRS_DTYPE` where the compiled products run, else ``like``'s dtype."""
        compiled = PAIRS_DTYPE is not None and _host_math() is not _NumpyHost
        return np.zeros(shape, dtype=np.dtype(PAIRS_DTYPE) if compiled else like.dtype)

    # A float64 iterate's float32 pairs go through the compiled loops that sum in float64; the
    # products of pairs of the iterate's own dtype (a float32 fit's, or without the compiled loops)
    # through BLAS, as before (at N = 4,096 a float32 fit's 256 MB buffer is read faster by BLAS's
    # two threads).

    @staticmethod
    def project(pairs: np.ndarray, g: np.ndarray) -> np.ndarray:
        """``pairs @ g`` as float64 (summed in float64 from a float32 buffer and a float64 ``g``)."""
        if pairs.dtype == g.dtype:
            return _NumpyOps.host(pairs @ g)  # BLAS
        parts = _pair_tasks(lambda lo, hi: _call_host("project", pairs, g, lo, hi), pairs.shape[1])
        out = parts[0]
        for part in parts[1:]:  # in column order, whichever thread made each
            out += part
        return out

    @staticmethod
    def dot(a: np.ndarray, b: np.ndarray) -> float:
        """``a . b``, summed in float64 (one vector: cheap, also for a float32 fit's pairs)."""
        if a.dtype == b.dtype == np.float64:
            return float(a.dot(b))
        return float(_call_host("dot", a, b))

    @staticmethod
    def assemble(pairs: np.ndarray, w: np.ndarray, g: np.ndarray, h0: float) -> np.ndarray:
        """``-h0 g - pairs^T w`` in ``g``'s dtype (``w``: float64 weights)."""
        if pairs.dtype == g.dtype:
            d = np.dot(_NumpyOps.from_host(w, g), pairs)
            d += h0 * g
            return np.negative(d, out=d)
        out = np.empty_like(g)
        _pair_tasks(lambda lo, hi: _call_host("assemble", pairs, w, g, h0, out, lo, hi), pairs.shape[1])
        return out

    @staticmethod
    def axpy(x: np.ndarray, t: float, d: np.ndarray) -> np.ndarray:
        out = np.multiply(d, t)
        out += x
        return out

    @staticmethod
    def scale_into(out: np.ndarray, d: np.ndarray, t: float) -> None:
        np.multiply(d, t, out=out)

    @staticmethod
    def sub_into(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        np.subtract(a, b, out=out)

    @staticmethod
    def max_abs(g: np.ndarray) -> float:
        return float(max(g.max(), -g.min()))

    @staticmethod
    def copy(a: np.ndarray) -> np.ndarray:
        return a.copy()

    @staticmethod
    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a)

    @staticmethod
    def array(t: torch.Tensor) -> np.ndarray:
        return t.detach().numpy()


#: Storage of the L-BFGS pairs on the CPU where the compiled bookkeeping runs (None: the iterate's
#: dtype).  The pairs only shape the direction: the iterate, the gradients and every inner product
#: the compact form caches stay float64 (the products with the buffer accumulate in float64), so a
#: float32 buffer rounds the stored steps and gradient changes by 6e-8 relative and nothing else.
#: It halves the history's memory (100 x N K M numbers per start) and its traffic: at N = 64 the
#: 100 x 2,688 buffer is 1.1 MB instead of 2.2 MB and stays in a core's L2 cache, and the two products
#: an iteration makes with it take ~45 us instead of ~90 us each (benchmarks/results/history_size.md).
PAIRS_DTYPE: str | None = "float32"

#: The vector operations of CPU fits (tests switch to :class:`_TorchOps` to run the GPU's code on the CPU).
_CPU_OPS = _NumpyOps

#: Columns of the pair buffer one task of its compiled products takes: a larger buffer's products
#: are split into tasks of this many columns (a multiple of ``PAIR_BLOCK``), run on the threads the
#: fit's kernel may use (:func:`~sfapprox._threads.compiled_threads`) and summed in column order, so
#: the numbers do not depend on the thread count.  At N = 1,024 (112,640 values) that is 4 tasks;
#: at N <= 256 one, as before.
PAIR_TASK_COLUMNS = 1 << 15


def _pair_tasks(fn, n: int) -> list:
    """``fn(lo, hi)`` for the consecutive column ranges of :data:`PAIR_TASK_COLUMNS` of an ``n``-column
    buffer, on the fit's compiled threads; the results in column order."""
    if n <= PAIR_TASK_COLUMNS:
        return [fn(0, n)]
    from ._kernels import _run_tasks

    spans = [(lo, min(lo + PAIR_TASK_COLUMNS, n)) for lo in range(0, n, PAIR_TASK_COLUMNS)]
    return _run_tasks([lambda lo=lo, hi=hi: fn(lo, hi) for lo, hi in spans], compiled_threads())


def _ops(a):
    """The operations for arrays like ``a``: numpy for numpy arrays, torch for tensors."""
    return _NumpyOps if isinstance(a, np.ndarray) else _TorchOps


class _NumpyHost:
    """The ``m x m`` arithmetic of the compact form on the host, in numpy.

    The reference implementation; :mod:`._solver_numba` has the same
    functions compiled (one call each instead of about twenty small numpy
    calls), used when numba is available (:func:`_host_math`).  Arrays are
    float64 and in age order (the oldest pair first); ``ages`` holds the
    pairs' buffer slots and ``size`` is the history size.
    """

    @staticmethod
    def weights(proj, ages, size, h0, Rinv, middle) -> np.ndarray:
        """The weights ``[a; b]`` (by buffer slot) of ``-H g = -h0 g - S a - Y b``, from ``proj = [S Y]^T g``."""
        u = Rinv @ proj[ages]
        weights = np.zeros(2 * size)
        weights[ages] = Rinv.T @ (middle @ u - h0 * proj[size + ages])
        weights[size + ages] = -h0 * u
        return weights

    @staticmethod
    def project(pairs, g, lo, hi) -> np.ndarray:
        """``pairs[:, lo:hi] @ g[lo:hi]`` in float64 (a float32 buffer is widened first: a copy, the
        fallback's price)."""
        return np.dot(pairs[:, lo:hi].astype(np.float64, copy=False), g[lo:hi].astype(np.float64, copy=False))

    @staticmethod
    def assemble(pairs, w, g, h0, out, lo, hi) -> np.ndarray:
        """``out[lo:hi] = -h0 g[lo:hi] - pairs[:, lo:hi]^T w``, computed in float64."""
        d = np.dot(w, pairs[:, lo:hi].astype(np.float64, copy=False))
        d += h0 * g[lo:hi]
        np.negative(d, out=out[lo:hi])
        return out

    @staticmethod
    def dot(a, b) -> float:
        """``a . b`` in float64."""
        return float(np.dot(a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)))

    @staticmethod
    def step_update(SY, YY, Rinv, h0, old_ages, full, proj_new, proj_old, w_old, t, ys, yy, size):
        """:meth:`append` of the pair ``s = t d``, ``y = g_new - g``, its inner products from cached values.

        ``proj_old`` and ``w_old`` are the projections of ``g`` and the
        weights ``d`` was assembled with, ``proj_new`` the projections of
        ``g_new`` on the buffer (with the new pair in it), ``h0`` the
        ``H_diag`` of the old pairs: ``s_i . y = s_i . g_new - s_i . g``,
        likewise ``y_i . y``, and ``s . y_i = t d . y_i`` with
        ``d = -h0 g - [S Y] w_old`` expanded in the old Gram matrices.
        """
        kept = old_ages[1:] if full else old_ages
        keep = slice(1, None) if full else slice(None)
        k = len(kept) + 1
        Sy, Yy, Ys = np.empty(k), np.empty(k), np.empty(k)
        if k > 1:
            # y_i . d over the old pairs, from d = -h0 g - [S Y] w_old (before the oldest is dropped).
            ws_, wy_ = w_old[old_ages], w_old[size + old_ages]
            yd = -h0 * proj_old[size + old_ages] - SY.T @ ws_ - YY @ wy_
            Sy[:-1] = proj_new[kept] - proj_old[kept]
            Yy[:-1] = proj_new[size + kept] - proj_old[size + kept]
            Ys[:-1] = t * yd[keep]
        Sy[-1] = Ys[-1] = ys
        Yy[-1] = yy
        return _NumpyHost.append(SY, YY, Rinv, full, Sy, Yy, Ys, ys)

    @staticmethod
    def append(SY, YY, Rinv, full, Sy, Yy, Ys, ys):
        """The caches with a new pair, the oldest dropped first when ``full``.

        ``Sy[i] = s_i . y``, ``Yy[i] = y_i . y``, ``Ys[i] = s . y_i`` over
        the kept pairs, then the new one (``ys = s . y``).  Returns ``(ok,
        S^T Y, Y^T Y, R^-1, D + h0 Y^T Y, h0)``; ``ok`` False on a
        numerical breakdown (the caller starts the memory afresh).
        """
        keep = slice(1, None) if full else slice(None)
        k = len(Sy)
        SY_new, YY_new = np.empty((k, k)), np.empty((k, k))
        SY_new[:-1, :-1] = SY[keep, keep]
        YY_new[:-1, :-1] = YY[keep, keep]
        SY_new[-1, :], SY_new[:, -1] = Ys, Sy
        YY_new[-1, :] = YY_new[:, -1] = Yy
        R_new = _append_inverse(Rinv[keep, keep], Sy)
        h0 = ys / float(Yy[-1])
        if not (math.isfinite(float(R_new[:, -1].sum())) and math.isfinite(h0) and h0 > 0):
            return False, SY_new, YY_new, R_new, None, h0
        middle = h0 * YY_new
        middle.ravel()[:: k + 1] += np.diagonal(SY_new)
        return True, SY_new, YY_new, R_new, middle, h0


# None: not tried yet; else the host-arithmetic implementation in use.
_HOST = None


def _host_math():
    """:mod:`._solver_numba` when numba imports (and, on first use, compiles), else :class:`_NumpyHost`."""
    global _HOST
    if _HOST is None:
        from ._kernels import _numba_module  # the same import discipline (and warning) as the kernels

        from .._compiled import import_compiled, raise_interrupt

        host = _NumpyHost
        if _numba_module():
            try:  # (through import_compiled: numba's cache folder as the kernels', where they had to move it)
                host = import_compiled(f"{__package__}._solver_numba")
            except Exception as exc:  # noqa: BLE001 - a broken numba must not break the fit
                # but a stop (Ctrl-C, SIGTERM's handler) that numba wrapped is no broken numba: raised, and
                # nothing chosen (set before the import, numpy stayed the host for the rest of the process)
                raise_interrupt(exc)
        _HOST = host
    return _HOST


def pairs_itemsize(device_type: str, itemsize: int) -> int:
    """Bytes per stored number of the L-BFGS pairs of a fit on ``device_type`` in a dtype of
    ``itemsize`` bytes (see :data:`PAIRS_DTYPE`): what a memory estimate counts for the history."""
    if device_type == "cpu" and PAIRS_DTYPE is not None and _host_math() is not _NumpyHost:
        return np.dtype(PAIRS_DTYPE).itemsize
    return itemsize


def _host_failed(exc: Exception) -> None:
    """A compiled host function failed (on its first call, when it compiles): numpy from now on (an
    interrupt that surfaced as the failure is raised instead, see :func:`~sfapprox._compiled.raise_interrupt`)."""
    from .._compiled import raise_interrupt

    raise_interrupt(exc)
    global _HOST
    _HOST = _NumpyHost
    warnings.warn(
        f"sfapprox: the compiled L-BFGS bookkeeping failed ({type(exc).__name__}: {exc}); "
        "falling back to numpy (same results, slower iterations).",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )


#: Seconds (about) one call of the compiled iterations may take: the loop's callback (progress, the
#: thread governor, checkpoints, a stop request) and its time limit are seen at least this often.
COMPILED_CALL_SECONDS = 0.05

# Set when the compiled iterations failed (to compile): the Python loop from then on.
_LOOP_FAILED = False


def _compiled_plan(fun: Objective, x, ops) -> tuple | None:
    """What :func:`._solver_numba.iterate` needs of ``fun`` (its ``compiled_plan()``: the target and
    the kernel's plan), where the compiled iterations apply: a CPU fit in float64 with the compiled
    bookkeeping, on an objective that is one compiled-kernel call; else None (the Python loop)."""
    plan_of = getattr(fun, "compiled_plan", None)
    if (_LOOP_FAILED or plan_of is None or ops is not _NumpyOps or x.dtype != np.float64
            or _host_math() is _NumpyHost or PAIRS_DTYPE != "float32"):
        return None
    return plan_of()


def _compiled_call_limits(state: dict, options: LBFGSOptions, deadline: _timing.Deadline,
                          each_step: bool) -> tuple[int, int, int]:
    """``(max_steps, evals_left, time_evals)`` of the next call of the compiled iterations: the
    iterations left, but no more than fit in :data:`COMPILED_CALL_SECONDS` at the last measured cost of
    one (one with ``each_step``: a callback to call after each); the evaluations left; and how many
    evaluations fit before the deadline (each checked there where the Python loop checks
    ``max_iter``, ``max_evals`` and the time limit)."""
    big = 1 << 62
    per = state.get("eval_seconds") or 0.0
    steps = options.max_iter - state["n_iter"]
    if each_step:
        steps = min(steps, 1)
    elif per > 0:
        steps = min(steps, max(1, int(COMPILED_CALL_SECONDS / per)))
    evals_left = big if options.max_evals is None else options.max_evals - state["func_evals"]
    left = deadline.left()
    # capped before int(): a time limit of 1e308 s made left / per inf (OverflowError) or 1e300 an int the
    # compiled loop cannot take, which sent every later fit of the process to the Python loop
    time_evals = big if not math.isfinite(left) or per <= 0 else int(min(left / per, big))
    return max(steps, 0), max(evals_left, 0), max(time_evals, 0)


def _compiled_steps(plan: tuple, state: dict, x: np.ndarray, g: np.ndarray, loss: float, options: LBFGSOptions,
                    deadline: _timing.Deadline, callback) -> tuple:
    """Iterations of :func:`lbfgs` in compiled code (:func:`._solver_numba.iterate`), within the
    limits of :func:`_compiled_call_limits`, then the checks the Python loop makes after a step.

    Returns ``(x, g, loss, reason)``: the new iterate and a stop reason, or
    None to go on.  ``state`` is brought up to date as the Python loop would
    have left it.  A failure to compile turns the compiled iterations off for
    the process (a ``RuntimeWarning``; the Python loop goes on from the same state).
    """
    global _LOOP_FAILED
    from .._signals import stop_requested
    from . import _solver_numba as compiled

    if callback is not None and stop_requested():
        # a fit's stop already received (its interrupt lost), which its callback would act on after the
        # run: not another run of iterations first
        raise KeyboardInterrupt
    if state["pairs"] is None:
        _allocate_pairs(state, options.history_size, x)
    if state["order"] and state["proj_of"] is not g:
        state["proj"], state["proj_of"] = _NumpyOps.project(state["pairs"], g), g
    history = state["history"]
    recent = np.asarray(history[-(options.window + 1):], dtype=np.float64)
    ages = state["ages"] if state["order"] else _NO_AGES
    middle = state["middle"] if state["order"] else _NO_MATRIX
    proj = state["proj"] if state["order"] else _NO_VALUES
    began = _timing.now()
    try:
        code, losses, evals, x, g, best, best_loss, memory = compiled.iterate(
            x, g, float(loss), state["best_x"].numpy(), float(state["best_loss"]), state["pairs"], ages,
            state["SY"], state["YY"], state["Rinv"], middle, float(state["H_diag"]), proj, plan, recent,
            *_compiled_call_limits(state, options, deadline, callback is not None and not options.coarse_callback),
            float(options.gtol), float(options.ftol),
            int(options.window), options.first_step == "polyak", PAIR_TASK_COLUMNS)
    except Exception as exc:
        from .._compiled import raise_interrupt

        raise_interrupt(exc)
        _LOOP_FAILED = True
        warnings.warn(f"sfapprox: the compiled L-BFGS iterations failed ({type(exc).__name__}: {exc}); "
                      "iterating in Python (the same method, slower iterations).", RuntimeWarning, stacklevel=user_stacklevel())
        _reset_history(state)  # the pair buffer may have been written: start the memory afresh
        return x, g, loss, None
    state["func_evals"] += evals
    if evals:
        state["eval_seconds"] = (_timing.now() - began) / evals
    if best_loss < state["best_loss"]:
        state["best_x"], state["best_loss"] = torch.from_numpy(best), best_loss
    ages, SY, YY, Rinv, middle, h0, proj = memory
    if len(ages):
        state.update(order=ages.tolist(), ages=ages, SY=SY, YY=YY, Rinv=Rinv, middle=middle, H_diag=h0)
        state["proj"], state["proj_of"] = proj, g
    else:
        _reset_history(state)
    if len(losses):
        loss = float(losses[-1])
        state["x"], state["grad"], state["loss"] = torch.from_numpy(x), torch.from_numpy(g), loss
        state["n_iter"] += len(losses)
        history.extend(losses.tolist())
        # ---- the checks after a step (the Python loop's order)
        if callback is not None and callback(state):
            return x, g, loss, StopReason.CALLBACK
        if code == compiled.FTOL:
            return x, g, loss, StopReason.FTOL
        if deadline.passed():
            return x, g, loss, StopReason.TIME_LIMIT
    if code == compiled.NON_FINITE:
        state["x"] = state["best_x"].clone()
    reason = {compiled.GTOL: StopReason.GTOL, compiled.NO_PROGRESS: StopReason.NO_PROGRESS,
              compiled.NON_FINITE: StopReason.NON_FINITE, compiled.OUT_OF_TIME: StopReason.TIME_LIMIT}.get(code)
    return x, g, loss, reason  # CAP: the loop's checks (max_iter, max_evals, time), then on


def _direction(state: dict, g):
    """``-H g`` for the L-BFGS matrix ``H`` of the stored pairs (see :func:`_direction_parts`).

    The same vector as torch.optim.LBFGS's two-loop recursion (up to rounding).
    """
    return _direction_parts(state, g)[0]


def _direction_parts(state: dict, g, ops=None) -> tuple:
    """``-H g``, and the buffer's projections of ``g`` and the weights it was assembled with.

    ``H`` is taken in its compact form (Byrd, Nocedal & Schnabel 1994): with
    the pairs in age order, ``R = triu(S^T Y)`` (upper triangle with the
    diagonal), ``D = diag(S^T Y)`` and ``h0 = H_diag``,
    ``-H g = -h0 g - S a - Y b`` where, from ``p = S^T g`` and ``q = Y^T g``,
    ``u = R^-1 p``, ``a = R^-T ((D + h0 Y^T Y) u - h0 q)`` and ``b = -h0 u``.
    So a direction is one product of the pair buffer with ``g`` (made by the
    last pair update when ``g`` is the gradient it was given), a few
    ``m x m`` products on the host with the cached ``R^-1`` and
    ``D + h0 Y^T Y``, and one product to assemble ``d``: the same ``d`` as
    torch's two-loop recursion, without its ``4m`` vector operations.
    ``g`` is a tensor or a numpy array (``ops``: its operations, found from it by default).
    """
    if not state["order"]:
        return -g, None, None
    ops = ops or _ops(g)
    size = state["size"]
    ages = state["ages"]
    proj = state["proj"] if state["proj_of"] is g else ops.project(state["pairs"], g)
    h0 = state["H_diag"]
    weights = _call_host("weights", proj, ages, size, h0, state["Rinv"], state["middle"])
    # d = -h0 g - [S Y] weights
    d = ops.assemble(state["pairs"], weights, g, h0)
    return d, proj, weights


def _call_host(name: str, *args):
    """``name`` of the host arithmetic in use (:func:`_host_math`), numpy's if the compiled one fails."""
    try:
        return getattr(_host_math(), name)(*args)
    except Exception as exc:
        if _HOST is _NumpyHost:
            raise
        _host_failed(exc)
        return getattr(_NumpyHost, name)(*args)


def _host(t) -> np.ndarray:
    """A small tensor or array as a float64 numpy array (no copy for float64 CPU data)."""
    return _ops(t).host(t)


def _append_inverse(Rinv: np.ndarray, column: np.ndarray) -> np.ndarray:
    """Inverse of the upper-triangular ``[[R, r], [0, rho]]`` from ``R^-1`` and ``column = [r; rho]``.

    ``[[R^-1, -R^-1 r / rho], [0, 1 / rho]]``: the new column is one
    back-substitution with the inverse already known, which is how the
    two-loop recursion would treat the new pair.  (Dropping the oldest pair,
    the first row and column of ``R``, leaves ``R^-1[1:, 1:]``: no arithmetic.)
    """
    k = len(column)
    out = np.zeros((k, k))
    out[:-1, :-1] = Rinv
    rho = column[-1]
    out[:-1, -1] = -(Rinv @ column[:-1]) / rho
    out[-1, -1] = 1.0 / rho
    return out


@dataclass
class _Step:
    """How the step ``s = t d`` was made, so that its inner products need no pass over the buffer.

    ``g`` is the gradient the step started from, ``dd = d . d``; ``proj`` and
    ``weights`` are those of :func:`_direction_parts` (None for a
    steepest-descent step); ``gtd`` and ``gtd_new`` are ``g . d`` and ``g_new . d``.
    """

    t: float
    d: object
    g: object
    dd: float
    gtd: float
    gtd_new: float
    proj: np.ndarray | None
    weights: np.ndarray | None


def _update_history(
    state: dict,
    y,
    s,
    history_size: int,
    g_next=None,
    step: _Step | None = None,
) -> None:
    """Store the pair ``(s, y)`` (unless it fails the curvature condition) and update the caches.

    ``S^T Y``, ``Y^T Y``, the inverse of ``triu(S^T Y)`` and
    ``D + h0 Y^T Y`` (see :func:`_direction_parts`) are kept in age order
    (the oldest pair first) and updated, not recomputed.  The new pair's
    inner products with the stored pairs need, in general, three products
    with half the buffer.  From the loop (``step`` and ``g_next``, the next
    gradient, given) they come from one product of the buffer with
    ``g_next`` — which the next direction needs anyway — and the cached
    values: ``s_i . y = s_i . g_next - s_i . g``, likewise ``y_i . y``, and
    ``s . y_i = t d . y_i`` with ``d = -h0 g - [S Y] weights`` expanded in the
    cached Gram matrices.  One pass over the buffer instead of two and a half.
    With ``s`` and ``y`` None (the loop's call), ``s = t d`` and
    ``y = g_next - g`` are written straight into the buffer.  The vectors
    are all tensors or all numpy arrays; the buffer is made of their kind.
    """
    like = step.d if s is None else s
    ops = _ops(like)
    if step is not None:
        ys = step.t * (step.gtd_new - step.gtd)
        ss = step.t * step.t * step.dd
    else:
        ys, ss = ops.dot(y, s), ops.dot(s, s)
    if not ys > 1e-10 * max(1.0, ss):
        # Curvature condition failed: skip the pair, keep H positive definite.
        if g_next is not None and state["order"]:
            state["proj"], state["proj_of"] = ops.project(state["pairs"], g_next), g_next
        return
    if state["pairs"] is None:
        _allocate_pairs(state, history_size, like)
    order = state["order"]
    old_ages = state["ages"] if order else _NO_AGES
    full = len(order) == history_size
    slot = order.pop(0) if full else len(order)
    if s is None:
        s, y = state["S"][slot], state["Y"][slot]
        ops.scale_into(s, step.d, step.t)
        ops.sub_into(y, g_next, step.g)
    else:
        state["S"][slot] = s
        state["Y"][slot] = y
    order.append(slot)
    ages = np.asarray(order)
    if step is not None and g_next is not None and (len(order) == 1 or step.weights is not None):
        proj = ops.project(state["pairs"], g_next)
        w_old, proj_old = (step.weights, step.proj) if step.weights is not None else (_NO_VALUES, _NO_VALUES)
        ok, SY, YY, Rinv, middle, h0 = _call_host(
            "step_update", state["SY"], state["YY"], state["Rinv"], state["H_diag"], old_ages, full,
            proj, proj_old, w_old, step.t, ys, ops.dot(y, y), history_size)
        state["proj"], state["proj_of"] = proj, g_next
    else:
        Ys = ops.project(state["Y"], s)[ages]  # s . y_i
        Sy = ops.project(state["S"], y)[ages]  # s_i . y
        Yy = ops.project(state["Y"], y)[ages]
        ok, SY, YY, Rinv, middle, h0 = _call_host("append", state["SY"], state["YY"], state["Rinv"], full,
                                                  Sy, Yy, Ys, ys)
        state["proj"] = state["proj_of"] = None
    if not ok:
        _reset_history(state)  # numerical breakdown: start the memory afresh
        return
    state["SY"], state["YY"], state["Rinv"], state["H_diag"] = SY, YY, Rinv, h0
    state["middle"], state["ages"] = middle, ages


def _allocate_pairs(state: dict, history_size: int, like) -> None:
    """The pair buffer, one ``(2m, P)`` array: rows ``[0, m)`` hold the steps s, rows ``[m, 2m)`` the
    gradient changes y (``like``: an array or tensor of the iterate's kind)."""
    state["pairs"] = _ops(like).pairs_buffer((2 * history_size, like.shape[0]), like)
    state["S"], state["Y"] = state["pairs"][:history_size], state["pairs"][history_size:]
    state["size"] = history_size


# Placeholders for "no pairs yet" (typed arrays, so that the compiled host functions accept them).
_NO_AGES = np.zeros(0, dtype=np.int64)
_NO_VALUES = np.zeros(0)
_NO_MATRIX = np.zeros((0, 0))


def _reset_history(state: dict) -> None:
    state["order"].clear()
    state["H_diag"] = 1.0
    state["SY"], state["YY"], state["Rinv"] = np.zeros((0, 0)), np.zeros((0, 0)), np.zeros((0, 0))
    state["ages"] = None
    state["proj"] = state["proj_of"] = None
    if state["pairs"] is not None:
        # _direction multiplies the whole buffer (unused slots by 0): leave no stale values in it.
        state["pairs"][:] = 0


def new_state(x0: torch.Tensor) -> dict:
    """Fresh solver state for the starting point ``x0`` (copied)."""
    return {
        "x": x0.detach().clone(),
        "pairs": None,  # (2 history_size, P) ring buffer: steps, then gradient changes (numpy on the CPU)
        "S": None,  # views of its two halves
        "size": 0,  # history size (rows of S and of Y)
        "Y": None,
        "SY": np.zeros((0, 0)),  # Gram matrices S^T Y and Y^T Y of the stored pairs, oldest first
        "YY": np.zeros((0, 0)),
        "Rinv": np.zeros((0, 0)),  # inverse of triu(S^T Y), oldest first
        "middle": None,  # D + H_diag Y^T Y, oldest first
        "ages": None,  # buffer slots of the pairs, oldest first (numpy)
        "proj": None,  # pairs @ proj_of (numpy), made by the last pair update for the next direction
        "proj_of": None,
        "order": [],  # slots from oldest to newest pair
        "H_diag": 1.0,
        "n_iter": 0,
        "func_evals": 0,
        "loss": math.inf,
        "grad": None,
        "best_x": x0.detach().clone(),
        "best_loss": math.inf,
        "history": [],  # loss after each iteration (index 0: the start)
        # Seconds of the last evaluation: what the time limit expects the next one to cost.  None
        # until one ran; a caller that knows the cost beforehand may set it (then even the first
        # evaluation is skipped when it would not fit).
        "eval_seconds": None,
    }


def _evaluate(fun: Objective, state: dict, x, ops=_TorchOps) -> tuple[float, object]:
    """``fun`` at ``x`` (a tensor, or a numpy array for ``ops=_NumpyOps``), keeping the best point
    and the evaluation's seconds (``state["eval_seconds"]``, what the next one is expected to cost)."""
    began = _timing.now()
    loss, grad = fun(ops.tensor(x))
    state["eval_seconds"] = _timing.now() - began
    state["func_evals"] += 1
    loss = float(loss)
    if math.isfinite(loss) and loss < state["best_loss"]:
        # Copy first: a Ctrl-C between the two lines must not pair a new loss with an old point.
        state["best_x"] = ops.tensor(ops.copy(x))
        state["best_loss"] = loss
    return loss, ops.array(grad)


class _OutOfTime(Exception):
    """Raised inside the line search when its next evaluation would pass the time limit."""


#: Strong-Wolfe constants of torch.optim.LBFGS (sufficient decrease, curvature).
C1, C2 = 1e-4, 0.9


def _line_search(obj, x, t: float, d, loss: float, g, gtd: float, ops=_TorchOps) -> tuple[float, object, float, float]:
    """Strong-Wolfe step along ``d``: the first trial, if it passes, else torch's ``_strong_wolfe``.

    L-BFGS's unit step passes the strong-Wolfe conditions in the great
    majority of iterations; checking them here with two float comparisons
    skips ``_strong_wolfe``'s bookkeeping (clones, tensor comparisons).  When
    the trial fails, ``_strong_wolfe`` runs from the same first step and is
    handed the evaluation already made, so it takes exactly the path it would
    have taken alone.  Numpy arrays (``ops=_NumpyOps``) go to it as tensors
    sharing their memory.
    """
    f_new, g_new = obj(x, t, d)
    gtd_new = float(g_new.dot(d))
    if f_new <= loss + C1 * t * gtd and abs(gtd_new) <= -C2 * gtd:
        return f_new, g_new, t, gtd_new
    first = [(t, f_new, ops.tensor(g_new))]

    def cached(x_: torch.Tensor, t_: float, d_: torch.Tensor) -> tuple[float, torch.Tensor]:
        if first and first[0][0] == t_:
            _, f_, g_ = first.pop()
            return f_, g_
        first.clear()
        f_, g_ = obj(x, float(t_), d)  # _strong_wolfe's interpolated steps may be 0-d tensors
        return f_, ops.tensor(g_)

    f_new, g_new, t, _ = _strong_wolfe(cached, ops.tensor(x), t, ops.tensor(d), loss, ops.tensor(g), gtd,
                                       c1=C1, c2=C2)
    g_new = ops.array(g_new)
    return f_new, g_new, float(t), float(g_new.dot(d))


def evaluate_start(fun: Objective, state: dict) -> float:
    """Evaluate the start of ``state`` (what :func:`lbfgs` does first, then skips), once.

    Its loss, gradient and cost (``state["eval_seconds"]``) are then known
    before the run, e.g. to keep back time for scoring the result.  Returns the loss.
    """
    if state["grad"] is None:
        ops = _CPU_OPS if state["x"].device.type == "cpu" else _TorchOps
        state["loss"], g = _evaluate(fun, state, ops.array(state["x"]), ops)
        state["grad"] = ops.tensor(g)
        if state["history"]:  # a start moved before its first step (best_multiple_start): its loss, evaluated
            state["history"][-1] = state["loss"]
        else:
            state["history"].append(state["loss"])
    return state["loss"]


def warm_up(dtype: torch.dtype, objective: Objective | None = None) -> None:
    """Compile (or load from numba's cache) what a CPU fit in ``dtype`` will call: the compiled
    iterations where the fit's ``objective`` will run them (:func:`_compiled_plan`), on an ``8 x 8``
    SF problem; else the host arithmetic of the Python loop, by a few L-BFGS iterations on a small
    quadratic.

    A fit calls this before its starts race: on a fresh install the compiled
    pair products and history updates take seconds to compile on their first
    call, and inside the race's first round that time came out of one start's
    round, so the README's first fit ended elsewhere on its first run than on
    the next ones (rel 0.1949 against 0.1808).  A fit whose iterations run
    compiled calls the host arithmetic only inside them (inlined there, see
    :mod:`._solver_numba`) and the pair product from Python (compiled with
    them): the quadratic would compile the rest on its own, for nothing (about
    4 s on a fresh install).  Loaded from the cache, this costs milliseconds.
    """
    if _host_math() is _NumpyHost:
        return
    options = LBFGSOptions(max_iter=4, history_size=2, ftol=0.0, gtol=0.0)
    if objective is not None and _compiled_plan(objective, torch.zeros(1, dtype=dtype).numpy(), _CPU_OPS) is not None:
        from ._kernels import CompiledObjective

        n, offsets = 8, (0, 1, 2, 4)
        small = CompiledObjective((3, n, len(offsets)), offsets, torch.eye(n, dtype=dtype))
        state = new_state(torch.linspace(0.25, 0.26, 3 * n * len(offsets), dtype=dtype))
        lbfgs(small, state, dataclasses.replace(options, max_iter=6))
        # Resumed, as a race's next round resumes a start: that call projects the gradient on the
        # pair buffer from Python before the compiled iterations go on (a fit's first resume
        # compiled that product on a fresh install, inside a timed round).
        lbfgs(small, state, dataclasses.replace(options, max_iter=8))
        return
    n = 13
    curvature = torch.linspace(1.0, 4.0, n, dtype=dtype)

    def quadratic(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = curvature * (x - 1.0)
        return 0.5 * (g * (x - 1.0)).sum(), g

    lbfgs(quadratic, new_state(torch.zeros(n, dtype=dtype)), options)


def inner_and_square(loss: float, g_dot_v: float, target_norm2: float, n_factors: int) -> tuple[float, float]:
    """``<X, P>`` and ``||P||^2`` from ``loss = 0.5 ||X - P||^2``, ``<g, v>`` and ``||X||^2``: ``P`` is
    homogeneous of degree ``n_factors`` in the values ``v``, so ``<g, v> = -n_factors <X - P, P>``.
    (A block of columns' own ``X_S``, ``P_S`` and gradient give the block's two sums.)"""
    h = -g_dot_v / n_factors  # <X - P, P> = a - b
    b = target_norm2 - 2.0 * h - 2.0 * loss
    return h + b, b


def best_multiple_start(state: dict, n_factors: int, target_norm2: float) -> bool:
    """Scale the evaluated start of ``state`` so that its product is the best multiple ``c P`` of
    the product ``P`` (closed form, no evaluation): a start whose product overshoots ``X`` (the
    identity start at N = 16,384, relative error 1.25) then starts below ``||X||``.

    The loss is ``0.5 ||X - P||^2`` with ``P`` homogeneous of degree ``n_factors`` in the values
    ``v``, so ``<g, v> = -n_factors <X - P, P>``; with ``||X||^2 = target_norm2`` that gives
    ``a = <X, P>`` and ``b = ||P||^2``, ``c = a / b``, and the new loss ``0.5 (||X||^2 - a^2 / b)``
    exactly.  The values become ``c^(1/M) v`` (the best point too); the gradient there is unknown,
    so the state is left to be evaluated again (:func:`evaluate_start`).  Returns whether it moved
    (not where ``a`` or ``b`` is not positive, or the loss would not fall).
    """
    if state["grad"] is None or not state["history"]:
        return False
    ops = _CPU_OPS if state["x"].device.type == "cpu" else _TorchOps
    x, g, loss = ops.array(state["x"]), ops.array(state["grad"]), float(state["loss"])
    a, b = inner_and_square(loss, float(g.dot(x)), target_norm2, n_factors)
    if not (a > 0 and b > 0 and math.isfinite(a / b)):
        return False
    new_loss = 0.5 * (target_norm2 - a * a / b)
    if not new_loss < loss:
        return False
    scaled = ops.copy(x)
    scaled *= (a / b) ** (1.0 / n_factors)
    state["x"] = ops.tensor(scaled)
    state["best_x"], state["best_loss"] = ops.tensor(ops.copy(scaled)), new_loss
    state["loss"], state["grad"] = new_loss, None
    state["history"][-1] = new_loss
    return True


def lbfgs(
    fun: Objective,
    state: dict,
    options: LBFGSOptions,
    callback: Callable[[dict], bool | None] | None = None,
) -> str:
    """Run L-BFGS from ``state`` (see :func:`new_state`) until a stopping rule fires.

    ``state`` is updated in place; ``state["best_x"]`` always holds the best
    point evaluated so far, also when a ``KeyboardInterrupt`` escapes (the
    caller catches it and uses the best point).  ``callback(state)`` runs after
    each iteration; returning True stops the loop.  On the CPU the vector
    work runs in numpy on the tensors' memory (``state["x"]``,
    ``state["grad"]`` and ``state["best_x"]`` stay tensors).

    Returns
    -------
    str
        The stop reason (a :class:`StopReason` value).
    """
    deadline = _timing.Deadline.after(options.time_limit)
    ops = _CPU_OPS if state["x"].device.type == "cpu" else _TorchOps
    x = ops.array(state["x"])

    def next_evaluation_fits() -> bool:
        return deadline.fits(state.get("eval_seconds") or 0.0)

    if state["grad"] is None:
        if state.get("eval_seconds") is not None and not next_evaluation_fits():
            return StopReason.TIME_LIMIT  # the caller's estimate says not even the start fits
        evaluate_start(fun, state)
    loss, g = state["loss"], ops.array(state["grad"])
    if not math.isfinite(loss):
        return StopReason.NON_FINITE

    def obj(x_, t: float, d) -> tuple[float, object]:
        if not next_evaluation_fits():
            raise _OutOfTime
        f_new, g_new = _evaluate(fun, state, ops.axpy(x_, t, d), ops)
        if not math.isfinite(f_new):
            # Make the line search backtrack instead of interpolating with NaN.
            return math.inf, ops.zeros(g_new.shape, g_new)
        return f_new, g_new

    plan = _compiled_plan(fun, x, ops)
    while True:
        # ---- check conditions before stepping
        if ops.max_abs(g) <= options.gtol * max(1.0, abs(loss)):
            return StopReason.GTOL
        if state["n_iter"] >= options.max_iter:
            return StopReason.MAX_ITER
        if options.max_evals is not None and state["func_evals"] >= options.max_evals:
            return StopReason.MAX_EVALS
        if not next_evaluation_fits():
            return StopReason.TIME_LIMIT
        if plan is not None and not _LOOP_FAILED and isinstance(options.first_step, str) and \
                (state["pairs"] is None or state["pairs"].dtype == np.float32):
            # ---- the same iterations, compiled whole
            x, g, loss, reason = _compiled_steps(plan, state, x, g, loss, options, deadline, callback)
            if reason is not None:
                return reason
            continue

        # ---- compute direction and initial step
        d, proj, weights = _direction_parts(state, g, ops)
        gtd = float(g.dot(d))
        if not gtd < 0:
            # Not a descent direction (numerical breakdown): restart from steepest descent.
            _reset_history(state)
            d, proj, weights = -g, None, None
            gtd = float(g.dot(d))
        if not state["order"]:
            if not isinstance(options.first_step, str):
                t = float(options.first_step)
            elif options.first_step == "polyak":  # the step along -g to zero loss in the linear model
                t = loss / max(float(g.dot(g)), 1e-300)
            else:
                t = min(1.0, 1.0 / float(abs(g).sum()))
        else:
            t = 1.0

        # ---- line search (cut short when its next evaluation would pass the time limit:
        # the state stays at the last iterate, and best_x holds the best point evaluated)
        try:
            f_new, g_new, t, gtd_new = _line_search(obj, x, t, d, loss, g, gtd, ops)
        except _OutOfTime:
            return StopReason.TIME_LIMIT
        if not math.isfinite(f_new) or not math.isfinite(t):
            state["x"] = state["best_x"].clone()
            return StopReason.NON_FINITE
        dd = float(d.dot(d))
        if f_new > loss or t * t * dd == 0.0:
            return StopReason.NO_PROGRESS
        _update_history(state, None, None, options.history_size, g_next=g_new,
                        step=_Step(t, d, g, dd, gtd, gtd_new, proj, weights))
        x = ops.axpy(x, t, d)
        state["x"], state["loss"], state["grad"] = ops.tensor(x), f_new, ops.tensor(g_new)
        state["n_iter"] += 1
        state["history"].append(f_new)
        loss, g = f_new, g_new

        # ---- check conditions after stepping
        if callback is not None and callback(state):
            return StopReason.CALLBACK
        hist = state["history"]
        if len(hist) > options.window:
            before = hist[-1 - options.window]
            if before - loss <= options.ftol * max(abs(before), 1e-300):
                return StopReason.FTOL
        if deadline.passed():
            return StopReason.TIME_LIMIT
