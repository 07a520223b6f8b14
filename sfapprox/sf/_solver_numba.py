"""Compiled (numba) host arithmetic of the L-BFGS loop; imported only by :mod:`._solver`.

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
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["weights", "step_update", "append", "project", "assemble", "dot"]

_JIT = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy")
# The pair-buffer products are reductions: reassociating them is what lets LLVM vectorise the
# float32 -> float64 loop (a sum in another order, as BLAS's own; no other fast-math licence).
_JIT_SUM = dict(_JIT, fastmath={"reassoc", "contract", "nsz"})

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


@nb.njit(**_JIT_SUM)
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
