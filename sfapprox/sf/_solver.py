"""A limited-memory BFGS loop over one flat tensor, with explicit stopping rules.

The method is torch.optim.LBFGS's (two-loop recursion, strong-Wolfe line
search — the line search itself is torch's ``_strong_wolfe``), rewritten as a
plain loop so that every stopping rule is explicit and reported, the best
iterate is always kept, and all cross-iteration state lives in one dict
(``state``), as in torch's optimizer: checkpointing and Ctrl-C handling
become a copy of that dict.

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
from scipy.linalg import solve_triangular

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
    """``-H g`` by the two-loop recursion, with its inner products taken from cached Gram matrices.

    The two loops of torch's LBFGS make ``4m`` vector operations per
    iteration (``m`` pairs); here the scalars of both loops come from
    ``S @ g``, ``Y @ g`` and the cached ``S Y^T`` and ``Y Y^T`` (``m x m``,
    updated once per pair), so an iteration costs two passes over the pair
    buffer whatever ``m`` is: one product with ``g``, one to assemble ``d``.
    """
    order = state["order"]
    if not order:
        return g.neg()
    size = len(state["ro"])
    slots = np.asarray(order)
    SY = state["SY"][np.ix_(order, order)]  # SY[i, j] = s_i . y_j
    YY = state["YY"][np.ix_(order, order)]
    ro = state["ro"][order]
    # Products with the whole ring buffer (empty slots are zero rows): selecting the
    # pairs first would copy the buffer, which costs more than the products themselves.
    proj = (state["pairs"] @ g).double().cpu().numpy()
    sg, yg = proj[:size][slots], proj[size:][slots]
    # First loop, newest to oldest: al_i = ro_i (-s_i.g - sum_{j>i} (s_i.y_j) al_j), i.e. the
    # upper-triangular system (I + diag(ro) triu(SY, 1)) al = -ro * sg, solved in one call.
    eye = np.eye(len(order))
    al = solve_triangular(eye + ro[:, None] * np.triu(SY, 1), -ro * sg, lower=False)
    h0 = state["H_diag"]
    yq = -yg - YY @ al  # y_i . q after the first loop
    # Second loop, oldest to newest: coef_i = al_i - ro_i (h0 y_i.q + sum_{j<i} (s_j.y_i) coef_j),
    # the coefficients of s_i in d: (I + diag(ro) tril(SY^T, -1)) coef = al - ro h0 yq.
    coef = solve_triangular(eye + ro[:, None] * np.tril(SY.T, -1), al - ro * h0 * yq, lower=True)
    # d = -h0 g + S^T coef - h0 Y^T al, as one product with the buffer
    weights = np.zeros(2 * size)
    weights[slots] = coef
    weights[size + slots] = -h0 * al
    d = g.mul(-h0)
    d.addmv_(state["pairs"].T, torch.as_tensor(weights, dtype=g.dtype, device=g.device))
    return d


def _update_history(state: dict, y: torch.Tensor, s: torch.Tensor, history_size: int) -> None:
    ys = float(y.dot(s))
    if ys <= 1e-10 * max(1.0, float(s.dot(s))):
        return  # curvature condition failed: skip the pair, keep H positive definite
    if state["pairs"] is None:
        # One (2m, P) buffer: rows [0, m) hold the steps s, rows [m, 2m) the gradient changes y.
        state["pairs"] = torch.zeros((2 * history_size, s.numel()), dtype=s.dtype, device=s.device)
        state["S"], state["Y"] = state["pairs"][:history_size], state["pairs"][history_size:]
        state["SY"] = np.zeros((history_size, history_size))
        state["YY"] = np.zeros((history_size, history_size))
        state["ro"] = np.zeros(history_size)
    order = state["order"]
    slot = order.pop(0) if len(order) == history_size else len(order)
    state["S"][slot] = s
    state["Y"][slot] = y
    order.append(slot)
    # Refresh the Gram entries of the new pair against every stored pair.
    state["SY"][slot, :] = (state["Y"] @ s).double().cpu().numpy()
    state["SY"][:, slot] = (state["S"] @ y).double().cpu().numpy()
    yy = (state["Y"] @ y).double().cpu().numpy()
    state["YY"][slot, :] = yy
    state["YY"][:, slot] = yy
    state["ro"][slot] = 1.0 / ys
    state["H_diag"] = ys / float(yy[slot])


def _reset_history(state: dict) -> None:
    state["order"].clear()
    state["H_diag"] = 1.0
    if state["pairs"] is not None:
        # _direction multiplies the whole buffer (unused slots by 0): leave no stale values in it.
        state["pairs"].zero_()


def new_state(x0: torch.Tensor) -> dict:
    """Fresh solver state for the starting point ``x0`` (copied)."""
    return {
        "x": x0.detach().clone(),
        "pairs": None,  # (2 history_size, P) ring buffer: steps, then gradient changes
        "S": None,  # views of its two halves
        "Y": None,
        "SY": None,  # cached Gram matrices by slot (numpy, history_size^2)
        "YY": None,
        "ro": None,
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
        if float(g.abs().max()) <= options.gtol * max(1.0, abs(loss)):
            return StopReason.GTOL
        if state["n_iter"] >= options.max_iter:
            return StopReason.MAX_ITER
        if options.max_evals is not None and state["func_evals"] >= options.max_evals:
            return StopReason.MAX_EVALS

        # ---- compute direction and initial step
        d = _direction(state, g)
        gtd = float(g.dot(d))
        if not gtd < 0:
            # Not a descent direction (numerical breakdown): restart from steepest descent.
            _reset_history(state)
            d = g.neg()
            gtd = float(g.dot(d))
        if not state["order"]:
            t = min(1.0, 1.0 / float(g.abs().sum()))
        else:
            t = 1.0

        # ---- line search
        f_new, g_new, t, _ = _strong_wolfe(obj, x, t, d, loss, g, gtd)
        t = float(t)
        if not math.isfinite(f_new) or not math.isfinite(t):
            state["x"] = state["best_x"].clone()
            return StopReason.NON_FINITE
        step = d.mul(t)
        if f_new > loss or float(step.abs().max()) == 0.0:
            return StopReason.NO_PROGRESS
        _update_history(state, g_new.sub(g), step, options.history_size)
        x = x.add(step)
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
