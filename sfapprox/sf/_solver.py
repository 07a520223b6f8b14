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

The objective is an injected callable ``fun(x) -> (loss: float, grad: Tensor)``,
so the loop is testable on any function.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

# The strong-Wolfe line search of torch.optim.LBFGS.  It is a private helper,
# but a pure function with a stable signature since torch 1.2; the torch
# range in pyproject.toml is pinned below 3 and tests exercise it.
from torch.optim.lbfgs import _strong_wolfe

__all__ = ["LBFGSOptions", "StopReason", "lbfgs"]

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
        Wall-clock limit in seconds, checked after every iteration.
    ftol : float
        Stop when the relative decrease of the loss over the last ``window``
        iterations is at most ``ftol``.
    gtol : float
        Stop when ``max |grad| <= gtol * max(1, |loss|)``.
    history_size : int
        Number of correction pairs kept.
    window : int
        Iterations over which ``ftol`` is measured.
    """

    max_iter: int = 5000
    max_evals: int | None = None
    time_limit: float | None = None
    ftol: float = 1e-10
    gtol: float = 1e-12
    history_size: int = 50
    window: int = 20


def _direction(state: dict, g: torch.Tensor) -> torch.Tensor:
    """``-H g`` for the L-BFGS matrix ``H`` of the stored pairs (see :func:`_direction_parts`).

    The same vector as torch.optim.LBFGS's two-loop recursion (up to rounding).
    """
    return _direction_parts(state, g)[0]


def _direction_parts(state: dict, g: torch.Tensor) -> tuple[torch.Tensor, np.ndarray | None, np.ndarray | None]:
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
    """
    if not state["order"]:
        return g.neg(), None, None
    size = state["size"]
    ages = state["ages"]
    proj = state["proj"] if state["proj_of"] is g else _host(torch.mv(state["pairs"], g))
    h0, Rinv = state["H_diag"], state["Rinv"]
    u = Rinv @ proj[ages]
    weights = np.zeros(2 * size)
    weights[ages] = Rinv.T @ (state["middle"] @ u - h0 * proj[size + ages])
    weights[size + ages] = -h0 * u
    w = torch.from_numpy(weights) if g.device.type == "cpu" else torch.as_tensor(weights, device=g.device)
    # d = -h0 g - [S Y] weights
    d = torch.addmv(g, state["pairs"].T, w.to(g.dtype), beta=-h0, alpha=-1.0)
    return d, proj, weights


def _host(t: torch.Tensor) -> np.ndarray:
    """A small tensor as a float64 numpy array (no copy for a float64 CPU tensor)."""
    return t.detach().double().cpu().numpy()


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
    d: torch.Tensor
    g: torch.Tensor
    dd: float
    gtd: float
    gtd_new: float
    proj: np.ndarray | None
    weights: np.ndarray | None


def _update_history(
    state: dict,
    y: torch.Tensor | None,
    s: torch.Tensor | None,
    history_size: int,
    g_next: torch.Tensor | None = None,
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
    ``y = g_next - g`` are written straight into the buffer.
    """
    if step is not None:
        ys = step.t * (step.gtd_new - step.gtd)
        ss = step.t * step.t * step.dd
    else:
        ys, ss = float(y.dot(s)), float(s.dot(s))
    if not ys > 1e-10 * max(1.0, ss):
        # Curvature condition failed: skip the pair, keep H positive definite.
        if g_next is not None and state["order"]:
            state["proj"], state["proj_of"] = _host(torch.mv(state["pairs"], g_next)), g_next
        return
    if state["pairs"] is None:
        # One (2m, P) buffer: rows [0, m) hold the steps s, rows [m, 2m) the gradient changes y.
        like = step.d if s is None else s
        state["pairs"] = torch.zeros((2 * history_size, like.numel()), dtype=like.dtype, device=like.device)
        state["S"], state["Y"] = state["pairs"][:history_size], state["pairs"][history_size:]
        state["size"] = history_size
    order = state["order"]
    old_ages = state["ages"] if order else np.zeros(0, dtype=np.int64)
    full = len(order) == history_size
    keep = slice(1, None) if full else slice(None)
    yd = None
    if step is not None and len(old_ages) and step.weights is not None:
        # y_i . d over the old pairs, from d = -h0 g - [S Y] weights (before the oldest is dropped).
        ws_, wy_ = step.weights[old_ages], step.weights[history_size + old_ages]
        yd = -state["H_diag"] * step.proj[history_size + old_ages] - state["SY"].T @ ws_ - state["YY"] @ wy_
    slot = order.pop(0) if full else len(order)
    if s is None:
        s = torch.mul(step.d, step.t, out=state["S"][slot])
        y = torch.sub(g_next, step.g, out=state["Y"][slot])
    else:
        state["S"][slot].copy_(s)
        state["Y"][slot].copy_(y)
    order.append(slot)
    ages = np.asarray(order)
    k = len(order)
    if step is not None and g_next is not None and (k == 1 or yd is not None):
        proj = _host(torch.mv(state["pairs"], g_next))
        Sy, Yy, Ys = np.empty(k), np.empty(k), np.empty(k)
        if k > 1:
            kept = ages[:-1]  # the older pairs, whose slots this step did not touch
            Sy[:-1] = proj[kept] - step.proj[kept]
            Yy[:-1] = proj[history_size + kept] - step.proj[history_size + kept]
            Ys[:-1] = step.t * yd[keep]
        Sy[-1] = Ys[-1] = ys
        Yy[-1] = float(y.dot(y))
        state["proj"], state["proj_of"] = proj, g_next
    else:
        Ys = _host(state["Y"] @ s)[ages]  # s . y_i
        Sy = _host(state["S"] @ y)[ages]  # s_i . y
        Yy = _host(state["Y"] @ y)[ages]
        state["proj"] = state["proj_of"] = None
    SY, YY = np.empty((k, k)), np.empty((k, k))
    SY[:-1, :-1] = state["SY"][keep, keep]
    YY[:-1, :-1] = state["YY"][keep, keep]
    SY[-1, :], SY[:, -1] = Ys, Sy
    YY[-1, :] = YY[:, -1] = Yy
    Rinv = _append_inverse(state["Rinv"][keep, keep], Sy)
    h0 = ys / float(Yy[-1])
    if not (math.isfinite(float(Rinv[:, -1].sum())) and math.isfinite(h0) and h0 > 0):
        _reset_history(state)  # numerical breakdown: start the memory afresh
        return
    middle = h0 * YY
    middle.ravel()[:: k + 1] += np.diagonal(SY)
    state["SY"], state["YY"], state["Rinv"], state["H_diag"] = SY, YY, Rinv, h0
    state["middle"], state["ages"] = middle, ages


def _reset_history(state: dict) -> None:
    state["order"].clear()
    state["H_diag"] = 1.0
    state["SY"], state["YY"], state["Rinv"] = np.zeros((0, 0)), np.zeros((0, 0)), np.zeros((0, 0))
    state["ages"] = None
    state["proj"] = state["proj_of"] = None
    if state["pairs"] is not None:
        # _direction multiplies the whole buffer (unused slots by 0): leave no stale values in it.
        state["pairs"].zero_()


def new_state(x0: torch.Tensor) -> dict:
    """Fresh solver state for the starting point ``x0`` (copied)."""
    return {
        "x": x0.detach().clone(),
        "pairs": None,  # (2 history_size, P) ring buffer: steps, then gradient changes
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
    }


def _evaluate(fun: Objective, state: dict, x: torch.Tensor) -> tuple[float, torch.Tensor]:
    loss, grad = fun(x)
    state["func_evals"] += 1
    loss = float(loss)
    if math.isfinite(loss) and loss < state["best_loss"]:
        # Copy first: a Ctrl-C between the two lines must not pair a new loss with an old point.
        state["best_x"] = x.detach().clone()
        state["best_loss"] = loss
    return loss, grad


#: Strong-Wolfe constants of torch.optim.LBFGS (sufficient decrease, curvature).
C1, C2 = 1e-4, 0.9


def _line_search(obj, x: torch.Tensor, t: float, d: torch.Tensor, loss: float, g: torch.Tensor,
                 gtd: float) -> tuple[float, torch.Tensor, float, float]:
    """Strong-Wolfe step along ``d``: the first trial, if it passes, else torch's ``_strong_wolfe``.

    L-BFGS's unit step passes the strong-Wolfe conditions in the great
    majority of iterations; checking them here with two float comparisons
    skips ``_strong_wolfe``'s bookkeeping (clones, tensor comparisons).  When
    the trial fails, ``_strong_wolfe`` runs from the same first step and is
    handed the evaluation already made, so it takes exactly the path it would
    have taken alone.
    """
    f_new, g_new = obj(x, t, d)
    gtd_new = float(g_new.dot(d))
    if f_new <= loss + C1 * t * gtd and abs(gtd_new) <= -C2 * gtd:
        return f_new, g_new, t, gtd_new
    first = [(t, f_new, g_new)]

    def cached(x_: torch.Tensor, t_: float, d_: torch.Tensor) -> tuple[float, torch.Tensor]:
        if first and first[0][0] == t_:
            _, f_, g_ = first.pop()
            return f_, g_
        first.clear()
        return obj(x_, t_, d_)

    f_new, g_new, t, _ = _strong_wolfe(cached, x, t, d, loss, g, gtd, c1=C1, c2=C2)
    return f_new, g_new, float(t), float(g_new.dot(d))


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
    each iteration; returning True stops the loop.

    Returns
    -------
    str
        The stop reason (a :class:`StopReason` value).
    """
    start = time.perf_counter()
    x = state["x"]
    if state["grad"] is None:
        state["loss"], state["grad"] = _evaluate(fun, state, x)
        state["history"].append(state["loss"])
    loss, g = state["loss"], state["grad"]
    if not math.isfinite(loss):
        return StopReason.NON_FINITE

    def obj(x_: torch.Tensor, t: float, d: torch.Tensor) -> tuple[float, torch.Tensor]:
        f_new, g_new = _evaluate(fun, state, x_.add(d, alpha=t))
        if not math.isfinite(f_new):
            # Make the line search backtrack instead of interpolating with NaN.
            return math.inf, torch.zeros_like(g_new)
        return f_new, g_new

    while True:
        # ---- check conditions before stepping
        if float(torch.linalg.vector_norm(g, math.inf)) <= options.gtol * max(1.0, abs(loss)):
            return StopReason.GTOL
        if state["n_iter"] >= options.max_iter:
            return StopReason.MAX_ITER
        if options.max_evals is not None and state["func_evals"] >= options.max_evals:
            return StopReason.MAX_EVALS

        # ---- compute direction and initial step
        d, proj, weights = _direction_parts(state, g)
        gtd = float(g.dot(d))
        if not gtd < 0:
            # Not a descent direction (numerical breakdown): restart from steepest descent.
            _reset_history(state)
            d, proj, weights = g.neg(), None, None
            gtd = float(g.dot(d))
        if not state["order"]:
            t = min(1.0, 1.0 / float(g.abs().sum()))
        else:
            t = 1.0

        # ---- line search
        f_new, g_new, t, gtd_new = _line_search(obj, x, t, d, loss, g, gtd)
        if not math.isfinite(f_new) or not math.isfinite(t):
            state["x"] = state["best_x"].clone()
            return StopReason.NON_FINITE
        dd = float(d.dot(d))
        if f_new > loss or t * t * dd == 0.0:
            return StopReason.NO_PROGRESS
        _update_history(state, None, None, options.history_size, g_next=g_new,
                        step=_Step(t, d, g, dd, gtd, gtd_new, proj, weights))
        x = x.add(d, alpha=t)
        state["x"], state["loss"], state["grad"] = x, f_new, g_new
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
        if options.time_limit is not None and time.perf_counter() - start >= options.time_limit:
            return StopReason.TIME_LIMIT
