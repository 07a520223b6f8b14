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
from scipy.linalg.lapack import dtrtri

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
    """``-H g`` for the L-BFGS matrix ``H`` of the stored pairs, in two passes over the pair buffer.

    ``H`` is taken in its compact form (Byrd, Nocedal & Schnabel 1994):
    ``H = h0 I + [S Y] Q [S Y]^T`` with a ``2m x 2m`` matrix ``Q`` built from
    the cached inner products when a pair is stored (:func:`_update_history`),
    so a direction is one product of the buffer with ``g``, one small ``Q``
    product and one product to assemble ``d``: the same ``d`` as torch's
    two-loop recursion, without its ``4m`` vector operations or any
    host round trip.
    """
    if not state["order"]:
        return g.neg()
    weights = torch.mv(state["Q"], torch.mv(state["pairs"], g))
    # d = -h0 g - [S Y] (Q [S Y]^T g)
    return torch.addmv(g, state["pairs"].T, weights, beta=-state["H_diag"], alpha=-1.0)


def _compact_matrix(SY: np.ndarray, YY: np.ndarray, h0: float) -> np.ndarray:
    """The middle matrix ``Q`` of the compact form, for pairs in age order.

    With ``R = triu(S^T Y)`` (upper triangle with the diagonal),
    ``D = diag(S^T Y)`` and ``h0 = H_diag``,
    ``-H g = -h0 g - S a - Y b`` with ``[a; b] = Q [S^T g; Y^T g]`` and
    ``Q = [[R^-T (D + h0 Y^T Y) R^-1, -h0 R^-T], [-h0 R^-1, 0]]``.
    ``R`` is triangular with a positive diagonal (the curvature condition),
    and inverting it is exactly the two-loop recursion's substitution.
    """
    k = len(SY)
    Rinv, info = dtrtri(np.triu(SY), lower=0)
    if info != 0:
        raise np.linalg.LinAlgError("singular L-BFGS curvature matrix")
    middle = h0 * YY
    middle[np.diag_indices(k)] += np.diagonal(SY)
    Q = np.zeros((2 * k, 2 * k))
    Q[:k, :k] = Rinv.T @ middle @ Rinv
    Q[:k, k:] = -h0 * Rinv.T
    Q[k:, :k] = -h0 * Rinv
    return Q


def _update_history(state: dict, y: torch.Tensor, s: torch.Tensor, history_size: int) -> None:
    """Store the pair ``(s, y)`` (unless it fails the curvature condition) and rebuild ``Q``.

    The new pair's inner products with the stored pairs are three products
    with half the buffer; the Gram matrices ``S^T Y`` and ``Y^T Y`` are kept
    in age order (the oldest pair first), ``Q`` by buffer slot.
    """
    ys = float(y.dot(s))
    if ys <= 1e-10 * max(1.0, float(s.dot(s))):
        return  # curvature condition failed: skip the pair, keep H positive definite
    if state["pairs"] is None:
        # One (2m, P) buffer: rows [0, m) hold the steps s, rows [m, 2m) the gradient changes y.
        state["pairs"] = torch.zeros((2 * history_size, s.numel()), dtype=s.dtype, device=s.device)
        state["S"], state["Y"] = state["pairs"][:history_size], state["pairs"][history_size:]
    order = state["order"]
    full = len(order) == history_size
    slot = order.pop(0) if full else len(order)
    state["S"][slot] = s
    state["Y"][slot] = y
    order.append(slot)
    # The new pair against every stored pair (slot order), then in age order.
    ages = np.asarray(order)
    Ys = (state["Y"] @ s).double().cpu().numpy()[ages]  # s . y_i
    Sy = (state["S"] @ y).double().cpu().numpy()[ages]  # s_i . y
    Yy = (state["Y"] @ y).double().cpu().numpy()[ages]
    k = len(order)
    keep = slice(1, None) if full else slice(None)
    SY, YY = np.empty((k, k)), np.empty((k, k))
    if k > 1:
        SY[:-1, :-1] = state["SY"][keep, keep]
        YY[:-1, :-1] = state["YY"][keep, keep]
    SY[-1, :], SY[:, -1] = Ys, Sy
    YY[-1, :] = YY[:, -1] = Yy
    state["SY"], state["YY"] = SY, YY
    state["H_diag"] = ys / float(Yy[-1])
    try:
        Qc = _compact_matrix(SY, YY, state["H_diag"])
    except np.linalg.LinAlgError:
        Qc = None
    if Qc is None or not np.isfinite(Qc).all():
        _reset_history(state)  # numerical breakdown: start the memory afresh
        return
    index = np.concatenate([ages, history_size + ages])
    Q = np.zeros((2 * history_size, 2 * history_size))
    Q[np.ix_(index, index)] = Qc
    state["Q"] = torch.as_tensor(Q, dtype=s.dtype, device=s.device)


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
        "SY": None,  # Gram matrices S^T Y and Y^T Y of the stored pairs, oldest first (numpy)
        "YY": None,
        "Q": None,  # compact-form middle matrix by slot (2 history_size square, on the device)
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
                 gtd: float) -> tuple[float, torch.Tensor, float]:
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
        return f_new, g_new, t
    first = [(t, f_new, g_new)]

    def cached(x_: torch.Tensor, t_: float, d_: torch.Tensor) -> tuple[float, torch.Tensor]:
        if first and first[0][0] == t_:
            _, f_, g_ = first.pop()
            return f_, g_
        first.clear()
        return obj(x_, t_, d_)

    f_new, g_new, t, _ = _strong_wolfe(cached, x, t, d, loss, g, gtd, c1=C1, c2=C2)
    return f_new, g_new, float(t)


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
        f_new, g_new, t = _line_search(obj, x, t, d, loss, g, gtd)
        if not math.isfinite(f_new) or not math.isfinite(t):
            state["x"] = state["best_x"].clone()
            return StopReason.NON_FINITE
        step = d.mul(t)
        if f_new > loss or t * float(torch.linalg.vector_norm(d, math.inf)) == 0.0:
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
