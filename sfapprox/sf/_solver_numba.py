"""Compiled (numba) host arithmetic of the L-BFGS loop, and the loop itself; imported only by :mod:`._solver`.

The ``m x m`` bookkeeping of the compact L-BFGS form (the direction's
weights, the new pair's inner products, the updated Gram matrices and
``R^-1``) is a few thousand flops, but about forty small numpy calls: at
``N = 64`` that is a fifth of an iteration.  These functions do the same
arithmetic, with the same arguments and results, as the numpy methods of
:class:`._solver._NumpyHost` (the reference, and the fallback when numba is
missing), each in one compiled call.

The pair buffer's two products per iteration (:func:`project`,
:func:`assemble`) and the new pair's ``y . y`` (:func:`dot`) are compiled here
too: the buffer is float32 on the CPU (``_solver.PAIRS_DTYPE``), and these
loops widen each value and sum in float64, which numpy's float32 products do not.

The ``m x m`` arrays are float64 (``ages``: int64), C-contiguous; nothing is
compiled at import: on first call, or loaded from numba's on-disk cache.

:func:`iterate` runs whole iterations of the loop, with the kernel of
:mod:`._kernels_numba` and torch's strong-Wolfe line search ported, for small
fits whose evaluation is one kernel call: the same iterations as the Python
loop, without its Python (see :func:`._solver._compiled_steps`).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from ._kernels_numba import loss_and_grad

__all__ = ["weights", "step_update", "append", "project", "assemble", "dot", "project_all", "iterate"]

# no_cfunc_wrapper: nothing here is passed as a C callback (a first-class function): each function's C
# wrapper was compiled for nothing on a fresh install.
_JIT: dict[str, Any] = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy", no_cfunc_wrapper=True)
# The pair-buffer products are reductions: reassociating them is what lets LLVM vectorise the
# float32 -> float64 loop (a sum in another order, as BLAS's own; no other fast-math licence).
_JIT_SUM: dict[str, Any] = dict(_JIT, fastmath={"reassoc", "contract", "nsz"})

#: Columns of the pair buffer taken at a time: a block of the vector (16 KiB in float64) stays in
#: L1 while every row of the buffer passes over it, so the buffer is read once and the vector once.
PAIR_BLOCK = 2048


@nb.njit(**_JIT)
def weights(proj, ages, size, h0, Rinv, middle):
    """See :meth:`._solver._NumpyHost.weights`."""
    k = ages.shape[0]
    u = np.zeros(k)
    for i in range(k):
        acc = 0.0
        for j in range(i, k):  # Rinv is upper triangular
            acc += Rinv[i, j] * proj[ages[j]]
        u[i] = acc
    v = np.empty(k)
    for i in range(k):
        acc = 0.0
        for j in range(k):
            acc += middle[i, j] * u[j]
        v[i] = acc - h0 * proj[size + ages[i]]
    out = np.zeros(2 * size)
    for j in range(k):
        acc = 0.0
        for i in range(j + 1):  # Rinv.T @ v
            acc += Rinv[i, j] * v[i]
        out[ages[j]] = acc
        out[size + ages[j]] = -h0 * u[j]
    return out


@nb.njit(**_JIT)
def append(SY, YY, Rinv, full, Sy, Yy, Ys, ys):
    """See :meth:`._solver._NumpyHost.append`."""
    k = Sy.shape[0]
    off = 1 if full else 0
    SY_new = np.empty((k, k))
    YY_new = np.empty((k, k))
    R_new = np.zeros((k, k))
    for i in range(k - 1):
        for j in range(k - 1):
            SY_new[i, j] = SY[i + off, j + off]
            YY_new[i, j] = YY[i + off, j + off]
        for j in range(i, k - 1):
            R_new[i, j] = Rinv[i + off, j + off]
    for i in range(k):
        SY_new[k - 1, i] = Ys[i]
        SY_new[i, k - 1] = Sy[i]
        YY_new[k - 1, i] = Yy[i]
        YY_new[i, k - 1] = Yy[i]
    rho = Sy[k - 1]
    total = 0.0
    for i in range(k - 1):
        acc = 0.0
        for j in range(i, k - 1):
            acc += R_new[i, j] * Sy[j]
        R_new[i, k - 1] = -acc / rho
        total += R_new[i, k - 1]
    R_new[k - 1, k - 1] = 1.0 / rho
    total += R_new[k - 1, k - 1]
    h0 = ys / Yy[k - 1]
    if not (np.isfinite(total) and np.isfinite(h0) and h0 > 0):
        return False, SY_new, YY_new, R_new, SY_new, h0
    middle = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            middle[i, j] = h0 * YY_new[i, j]
        middle[i, i] += SY_new[i, i]
    return True, SY_new, YY_new, R_new, middle, h0


@nb.njit(**_JIT)
def step_update(SY, YY, Rinv, h0, old_ages, full, proj_new, proj_old, w_old, t, ys, yy, size):
    """See :meth:`._solver._NumpyHost.step_update`."""
    k_old = old_ages.shape[0]
    off = 1 if full else 0
    k = k_old - off + 1
    Sy = np.empty(k)
    Yy = np.empty(k)
    Ys = np.empty(k)
    for i in range(k - 1):
        a = old_ages[i + off]
        Sy[i] = proj_new[a] - proj_old[a]
        Yy[i] = proj_new[size + a] - proj_old[size + a]
        # y_a . d = -h0 y_a . g - sum_j (s_j . y_a) ws_j - sum_j (y_j . y_a) wy_j
        acc = -h0 * proj_old[size + a]
        for j in range(k_old):
            b = old_ages[j]
            acc -= SY[j, i + off] * w_old[b] + YY[i + off, j] * w_old[size + b]
        Ys[i] = t * acc
    Sy[k - 1] = ys
    Ys[k - 1] = ys
    Yy[k - 1] = yy
    return append(SY, YY, Rinv, full, Sy, Yy, Ys, ys)


@nb.njit(**_JIT_SUM)
def project(pairs, g, lo, hi):
    """``pairs[:, lo:hi] @ g[lo:hi]`` accumulated in float64 (the buffer may be float32).

    Four rows at a time over one column block: each value of ``g`` is loaded
    once for four rows, and the block of ``g`` stays in L1 across the rows.
    (A column range, not a view: the rows stay contiguous arrays to numba.)
    """
    m = pairs.shape[0]
    out = np.zeros(m)
    for start in range(lo, hi, PAIR_BLOCK):
        stop = min(start + PAIR_BLOCK, hi)
        gb = g[start:stop]
        width = stop - start
        for i in range(0, m - 3, 4):
            r0, r1 = pairs[i, start:stop], pairs[i + 1, start:stop]
            r2, r3 = pairs[i + 2, start:stop], pairs[i + 3, start:stop]
            a0 = a1 = a2 = a3 = 0.0
            for j in range(width):
                gj = np.float64(gb[j])
                a0 += np.float64(r0[j]) * gj
                a1 += np.float64(r1[j]) * gj
                a2 += np.float64(r2[j]) * gj
                a3 += np.float64(r3[j]) * gj
            out[i] += a0
            out[i + 1] += a1
            out[i + 2] += a2
            out[i + 3] += a3
        for i in range(m - m % 4, m):
            row = pairs[i, start:stop]
            acc = 0.0
            for j in range(width):
                acc += np.float64(row[j]) * np.float64(gb[j])
            out[i] += acc
    return out


# No fast-math: a loop that stores runs behind LLVM's run-time check that its arrays do not overlap,
# and where that check is inconclusive (it depends on where the arrays lie) the scalar loop runs; with
# "reassoc"/"contract" the two loops round differently, so the same fit ended elsewhere on a fresh
# install (compiled in the process) than on the next runs (loaded from the cache).  The sums here are
# per column: the vectorised loop needs no licence (the same speed, measured at P = 2,688 and 46,000).
@nb.njit(**_JIT)
def assemble(pairs, w, g, h0, out, lo, hi):
    """``out[lo:hi] = -h0 g[lo:hi] - pairs[:, lo:hi]^T w``, accumulated in float64 by column blocks
    (``out``: ``g``'s dtype)."""
    m = pairs.shape[0]
    acc = np.empty(PAIR_BLOCK)
    for start in range(lo, hi, PAIR_BLOCK):
        stop = min(start + PAIR_BLOCK, hi)
        width = stop - start
        gb = g[start:stop]
        for j in range(width):
            acc[j] = -h0 * np.float64(gb[j])
        for i in range(0, m - 3, 4):
            w0, w1, w2, w3 = w[i], w[i + 1], w[i + 2], w[i + 3]
            r0, r1 = pairs[i, start:stop], pairs[i + 1, start:stop]
            r2, r3 = pairs[i + 2, start:stop], pairs[i + 3, start:stop]
            for j in range(width):
                acc[j] -= (w0 * np.float64(r0[j]) + w1 * np.float64(r1[j])
                           + w2 * np.float64(r2[j]) + w3 * np.float64(r3[j]))
        for i in range(m - m % 4, m):
            wi = w[i]
            row = pairs[i, start:stop]
            for j in range(width):
                acc[j] -= wi * np.float64(row[j])
        ob = out[start:stop]
        for j in range(width):
            ob[j] = acc[j]
    return out


@nb.njit(**_JIT_SUM)
def dot(a, b):
    """``a . b`` accumulated in float64."""
    acc = 0.0
    for j in range(a.shape[0]):
        acc += np.float64(a[j]) * np.float64(b[j])
    return acc


# ---- the L-BFGS iterations of a small fit, compiled whole (see _solver._compiled_steps)

#: Why :func:`iterate` returned: ``CAP``, it made its ``max_steps`` (or the evaluations left);
#: ``OUT_OF_TIME``, its next evaluation would pass the time limit (``time_evals``); the others as
#: :class:`._solver.StopReason`'s.
CAP, OUT_OF_TIME, NO_PROGRESS, NON_FINITE, GTOL, FTOL = range(6)

# No fast-math here: the loop's elementwise arithmetic (x + t d, the line search's scalars) rounds as
# numpy's and torch's do; its sums (g . d, d . d, |g|_1) are compiled ones (``dot``), in another order
# than numpy's and torch's, and the kernel and pair products carry their own flags.
_JIT_LOOP: dict[str, Any] = dict(_JIT)
# What only :func:`iterate` calls needs no wrapper for Python either (its arguments boxed and unboxed).
# Such a function called from Python crashes the interpreter (no wrapper to refuse the call): private
# names only, never in ``__all__``.
_JIT_CALLEE: dict[str, Any] = dict(_JIT_LOOP, no_cpython_wrapper=True)

C1, C2 = 1e-4, 0.9  # strong-Wolfe constants of torch.optim.LBFGS (as _solver.C1, C2)
TOLERANCE_CHANGE, MAX_LS = 1e-9, 25  # torch's _strong_wolfe defaults
# A 0 typed int64, not Literal[int](0): a literal argument would compile the callee again, for it alone
# (the kernel, the pair products: seconds each on a fresh install), beside the specialisation Python calls.
_ZERO = np.int64(0)


@nb.njit(**_JIT_LOOP)  # public (``__all__``): callable from Python, so its wrapper is kept
def project_all(pairs, g, task_columns):
    """``pairs @ g`` in float64, by column tasks of ``task_columns`` summed in column order: the same
    numbers as :meth:`._solver._NumpyOps.project` (which runs the tasks on threads)."""
    n = g.shape[0]
    out = project(pairs, g, _ZERO, min(task_columns, n))
    for lo in range(task_columns, n, task_columns):
        part = project(pairs, g, lo, min(lo + task_columns, n))
        for i in range(out.shape[0]):  # (a loop: ``+=`` of arrays compiles a shape check's message, seconds)
            out[i] += part[i]
    return out


@nb.njit(**_JIT_CALLEE)
def _cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi):
    """torch.optim.lbfgs's ``_cubic_interpolate`` within the bounds ``lo <= hi`` (Python's ``min``/``max`` ties)."""
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        out = lo if lo > min_pos else min_pos
        return hi if hi < out else out
    return (lo + hi) / 2.0


# _evaluate and _trial are inlined (numba IR) into the line search: every compiled function that calls
# the kernel links a copy of it, optimised and translated again (about 1.4 s each on a fresh install).
@nb.njit(inline="always", **_JIT_LOOP)
def _evaluate(x, t, d, kernel):
    """The loss and gradient at ``x + t d`` (both new arrays, and the point).  ``kernel`` is
    ``(target, fwd, bwd, width, starts, shape)``, the arguments of :func:`._kernels_numba.loss_and_grad`."""
    target, fwd, bwd, width, starts, shape = kernel
    point = np.empty_like(x)
    for i in range(x.shape[0]):
        point[i] = d[i] * t + x[i]
    grad = np.empty_like(x)
    f = loss_and_grad(point.reshape(shape), target, fwd, bwd, width, grad.reshape(shape), starts, _ZERO)
    return f, grad, point


@nb.njit(inline="always", **_JIT_LOOP)
def _trial(x, t, d, kernel, best, best_loss):
    """One trial of the line search: ``(f, g, g . d)`` at ``x + t d``, and the best point and loss so
    far (the trial's point where its loss is finite and lower: what :func:`._solver._evaluate` keeps).
    A non-finite loss comes back as ``inf`` with a zero gradient, as :func:`._solver.lbfgs`'s
    objective hands it to the line search (which then backtracks)."""
    f_new, g_new, point = _evaluate(x, t, d, kernel)
    if np.isfinite(f_new) and f_new < best_loss:
        best, best_loss = point, f_new
    if not np.isfinite(f_new):
        f_new, g_new = np.inf, np.zeros_like(g_new)
    return f_new, g_new, dot(g_new, d), best, best_loss


#: The phases of :func:`_strong_wolfe`: finding a bracket (the first trial's phase), then zooming into it.
_BRACKET, _ZOOM = 0, 1


@nb.njit(**_JIT_LOOP)
def _strong_wolfe(x, t, d, f, g, gtd, kernel, evals_left, best, best_loss):
    """torch.optim.lbfgs's ``_strong_wolfe`` (c1, c2, tolerance and 25 trials as there), compiled.

    Evaluations keep the best point (:func:`_trial`).  At most ``evals_left`` are made: when
    one more would be needed, ``ok`` is False (the time limit).  Returns
    ``(ok, f_new, g_new, t, evals, best, best_loss)``.

    torch's two loops (the bracketing, then the zoom) as one, its phase in ``phase``: every trial is
    made at one place.  ``_trial`` is inlined where it is called, so each call site was a copy of it
    for numba to type and LLVM to compile (three, on a fresh install); the steps and trials are torch's.
    """
    d_norm = 0.0
    for i in range(d.shape[0]):
        d_norm = max(d_norm, abs(d[i]))
    evals = 0
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    # bracket [b0, b1] with losses, gradients and slopes; set before use
    b0, b1, bf0, bf1, bgtd0, bgtd1 = 0.0, t, f, f, gtd, gtd
    bg0, bg1 = g, g
    two = True
    insuf_progress = False
    low = 0
    phase = _BRACKET
    while True:
        if phase == _ZOOM:  # the zoom loop's head, and its next step
            if done or ls_iter >= MAX_LS or abs(b1 - b0) * d_norm < TOLERANCE_CHANGE:
                break
            lo_b, hi_b = (b0, b1) if b0 <= b1 else (b1, b0)
            t = _cubic_interpolate(b0, bf0, bgtd0, b1, bf1, bgtd1, lo_b, hi_b)
            top = b1 if b1 > b0 else b0  # Python's max(bracket), min(bracket)
            bottom = b1 if b1 < b0 else b0
            eps = 0.1 * (top - bottom)
            near = t - bottom if (t - bottom) < (top - t) else top - t
            if near < eps:
                if insuf_progress or t >= top or t <= bottom:
                    t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                    insuf_progress = False
                else:
                    insuf_progress = True
            else:
                insuf_progress = False
        if evals >= evals_left:
            return False, f, g, 0.0, evals, best, best_loss
        f_new, g_new, gtd_new, best, best_loss = _trial(x, t, d, kernel, best, best_loss)
        evals += 1
        if evals > 1:
            ls_iter += 1
        if phase == _ZOOM:
            f_low = bf0 if low == 0 else bf1
            if f_new > (f + C1 * t * gtd) or f_new >= f_low:
                if low == 0:
                    b1, bf1, bg1, bgtd1 = t, f_new, g_new, gtd_new
                else:
                    b0, bf0, bg0, bgtd0 = t, f_new, g_new, gtd_new
                low = 0 if bf0 <= bf1 else 1
            else:
                if abs(gtd_new) <= -C2 * gtd:
                    done = True
                elif gtd_new * ((b1 - b0) if low == 0 else (b0 - b1)) >= 0:
                    if low == 0:  # old high becomes new low
                        b1, bf1, bg1, bgtd1 = b0, bf0, bg0, bgtd0
                    else:
                        b0, bf0, bg0, bgtd0 = b1, bf1, bg1, bgtd1
                if low == 0:
                    b0, bf0, bg0, bgtd0 = t, f_new, g_new, gtd_new
                else:
                    b1, bf1, bg1, bgtd1 = t, f_new, g_new, gtd_new
            continue
        # ---- the bracketing loop's body (its head: ls_iter < MAX_LS) on this trial
        bracketed = True
        if ls_iter < MAX_LS:
            if f_new > (f + C1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
                b0, b1, bf0, bf1, bg0, bg1, bgtd0, bgtd1 = t_prev, t, f_prev, f_new, g_prev, g_new, gtd_prev, gtd_new
            elif abs(gtd_new) <= -C2 * gtd:
                b0, bf0, bg0 = t, f_new, g_new
                two = False
                done = True
            elif gtd_new >= 0:
                b0, b1, bf0, bf1, bg0, bg1, bgtd0, bgtd1 = t_prev, t, f_prev, f_new, g_prev, g_new, gtd_prev, gtd_new
            else:
                bracketed = False
                min_step = t + 0.01 * (t - t_prev)
                max_step = t * 10
                tmp = t
                t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step)
                t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        if bracketed:
            if ls_iter == MAX_LS:
                b0, b1, bf0, bf1, bg0, bg1 = 0.0, t, f, f_new, g, g_new
                two = True
            if not two:  # torch's one-point bracket: low_pos 0 (bf0 <= bf[-1], the same point)
                return True, bf0, bg0, b0, evals, best, best_loss
            low = 0 if bf0 <= bf1 else 1
            phase = _ZOOM
    if low == 0:
        return True, bf0, bg0, b0, evals, best, best_loss
    return True, bf1, bg1, b1, evals, best, best_loss


@nb.njit(**_JIT_CALLEE)
def _fresh_memory(pairs):
    """No pairs (as :func:`._solver._reset_history`): the buffer zeroed (the products read every row),
    and ``(ages, SY, YY, Rinv, middle, h0)`` empty, ``h0 = 1``."""
    pairs[:, :] = 0.0
    return np.empty(0, dtype=np.int64), np.zeros((0, 0)), np.zeros((0, 0)), np.zeros((0, 0)), np.zeros((0, 0)), 1.0


@nb.njit(**_JIT_LOOP)
def iterate(x, g, loss, best, best_loss, pairs, ages, SY, YY, Rinv, middle, h0, proj, kernel,
            recent, max_steps, evals_left, time_evals, gtol, ftol, window, polyak, task_columns):
    """Iterations of :func:`._solver.lbfgs` on the compiled kernel's loss, in one call.

    Every iteration is the Python loop's, step for step: the
    direction from the compact form (:func:`weights`, :func:`assemble`; ``-g``
    without pairs, with the first step ``polyak`` or not), torch's strong-Wolfe
    line search, the pair update (:func:`step_update`) and the stopping rules
    ``gtol`` and ``ftol`` (``recent``: the loss history's last ``window + 1``
    values, or all of it).  ``x``, ``g`` are the iterate and its gradient,
    ``proj`` is ``pairs @ g`` (any array without pairs), ``ages`` the buffer
    slots, oldest first; ``kernel`` the objective's (see :func:`_evaluate`).
    Arrays given are never written, except the pair buffer (in place).  It
    stops after ``max_steps`` steps or when fewer than one evaluation is left
    of ``evals_left`` (both checked before a step: where the Python loop
    checks ``max_iter`` and ``max_evals``), or when the next evaluation would
    be beyond ``time_evals`` (before every evaluation, as the time limit).  How the steps are split over calls does not change them.
    The sums round otherwise than numpy's and torch's in the Python loop, so a
    long run parts from that loop's after rounding-level differences (about
    1e-16 relative at first, growing over the iterations of a non-convex fit),
    as a change of summation order does; its rules and decisions are the same.

    Returns ``(code, losses, evals, x, g, best, best_loss, memory)``:
    ``losses`` after each step made, ``best`` the best point evaluated (the
    one given unless ``best_loss`` fell) and ``memory`` the pairs' ``(ages,
    SY, YY, Rinv, middle, h0, proj)``.
    """
    n = x.shape[0]
    size = pairs.shape[0] // 2
    history = np.empty(recent.shape[0] + max_steps)
    for i in range(recent.shape[0]):
        history[i] = recent[i]
    length = recent.shape[0]
    evals = 0
    code = CAP
    while True:
        # ---- the stopping rules checked before a step
        top = 0.0
        for i in range(n):
            top = max(top, abs(g[i]))
        if top <= gtol * max(1.0, abs(loss)):
            code = GTOL
            break
        if length - recent.shape[0] >= max_steps or evals >= evals_left:
            break
        if evals >= time_evals:
            code = OUT_OF_TIME
            break
        # ---- direction: d = -h0 g - [S Y] w, or -g without pairs
        k = ages.shape[0]
        d = np.empty_like(x)
        weights_ = np.zeros(0)
        gtd = 0.0
        if k:
            weights_ = weights(proj, ages, size, h0, Rinv, middle)
            assemble(pairs, weights_, g, h0, d, _ZERO, n)
            gtd = dot(g, d)
        if not k or not gtd < 0:
            if k:  # not a descent direction (numerical breakdown): the memory starts afresh
                ages, SY, YY, Rinv, middle, h0 = _fresh_memory(pairs)
                k = 0
            for i in range(n):
                d[i] = -g[i]
            gtd = dot(g, d)
        if k:
            t = 1.0
        elif polyak:
            t = loss / max(dot(g, g), 1e-300)
        else:
            total = 0.0
            for i in range(n):
                total += abs(g[i])
            t = min(1.0, 1.0 / total)
        # ---- line search
        ok, f_new, g_new, t, used, best, best_loss = _strong_wolfe(x, t, d, loss, g, gtd, kernel,
                                                                   time_evals - evals, best, best_loss)
        evals += used
        if not ok:
            code = OUT_OF_TIME
            break
        gtd_new = dot(g_new, d)
        if not np.isfinite(f_new) or not np.isfinite(t):
            code = NON_FINITE
            break
        dd = dot(d, d)
        if f_new > loss or t * t * dd == 0.0:
            code = NO_PROGRESS
            break
        # ---- the pair (s, y) = (t d, g_new - g), unless it fails the curvature condition
        ys = t * (gtd_new - gtd)
        ss = t * t * dd
        if not ys > 1e-10 * max(1.0, ss):
            if k:
                proj = project_all(pairs, g_new, task_columns)
        else:
            full = k == size
            slot = ages[0] if full else k
            for i in range(n):
                pairs[slot, i] = d[i] * t
                pairs[size + slot, i] = g_new[i] - g[i]
            old_ages = ages
            ages = np.empty(k if full else k + 1, dtype=np.int64)
            for i in range(ages.shape[0] - 1):
                ages[i] = old_ages[i + 1] if full else old_ages[i]
            ages[ages.shape[0] - 1] = slot
            proj_new = project_all(pairs, g_new, task_columns)
            yy = dot(pairs[size + slot], pairs[size + slot])
            w_old = weights_ if k else np.zeros(0)
            p_old = proj if k else np.zeros(0)
            ok, SY_, YY_, Rinv_, middle_, h0_ = step_update(SY, YY, Rinv, h0, old_ages, full, proj_new, p_old,
                                                             w_old, t, ys, yy, size)
            proj = proj_new
            if ok:
                SY, YY, Rinv, middle, h0 = SY_, YY_, Rinv_, middle_, h0_
            else:  # numerical breakdown: the memory starts afresh
                ages, SY, YY, Rinv, middle, h0 = _fresh_memory(pairs)
        # ---- the step: x + t d, as the line search's trial made it
        point = np.empty_like(x)
        for i in range(n):
            point[i] = d[i] * t + x[i]
        x, g, loss = point, g_new, f_new
        history[length] = loss
        length += 1
        # ---- ftol over the last ``window`` iterations
        if length > window:
            before = history[length - 1 - window]
            if before - loss <= ftol * max(abs(before), 1e-300):
                code = FTOL
                break
    memory = (ages, SY, YY, Rinv, middle, h0, proj)
    return code, history[recent.shape[0]:length], evals, x, g, best, best_loss, memory


def _drop_stale_iterations() -> None:
    """Drop :func:`iterate`'s cached code when :mod:`._kernels_numba` changed since it was cached.

    numba keys a function's on-disk cache by the function's own file (numba
    issue #1833), but :func:`iterate` holds the kernel compiled in: after an
    edit of the kernel alone (a developer's checkout, a partial upgrade) it
    would run the old kernel.  The kernel file's SHA-256 is kept beside the
    cache; where it differs, the cached iterations are flushed (compiled again
    on first use).  Any failure leaves numba's cache as it is.
    """
    import hashlib
    import os

    from . import _kernels_numba

    try:
        with open(_kernels_numba.__file__, "rb") as source:
            digest = hashlib.sha256(source.read()).hexdigest()
        cache = iterate._cache
        marker = os.path.join(cache.cache_path, "_solver_numba.iterate.kernel-sha256")
        try:
            with open(marker, encoding="ascii") as seen:
                if seen.read().strip() == digest:
                    return
        except OSError:
            pass
        cache.flush()
        with open(marker, "w", encoding="ascii") as out:
            out.write(digest)
    except Exception:  # noqa: BLE001 - a cache we cannot read or write: numba's own rules apply
        pass


_drop_stale_iterations()
