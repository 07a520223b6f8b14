"""Compiled (numba) kernels that apply a stack of SF factors; imported only by :mod:`._chord_apply`.

Importing this module imports numba (about half a second) and compiles
nothing: each kernel is compiled on its first call, once per process, or
loaded from numba's on-disk cache (``cache=True``, next to this file or in
numba's user cache folder).  Every kernel takes C-contiguous float64 arrays
and int64 plans, so each compiles to exactly one specialisation.

Layouts (made once, by :func:`._chord_apply.pack`):

* offset-based supports: ``W`` of shape ``(M, K, N)``, ``W[m, k, i]`` the
  value of factor ``m`` at row ``i`` and column ``(i + d_k) mod N``; for one
  offset the values of all rows are contiguous, so ``out += w_k * shift(x)``
  is a unit-stride loop that LLVM turns into SIMD code;
* butterfly: ``W`` of shape ``(M, 2, N)``: ``W[m, 0, i]`` at column ``i``,
  ``W[m, 1, i]`` at column ``i XOR 2^m``.

Vectors: every term is a unit-stride loop over a row segment, taken four
offsets at a time so that ``out`` is read and written once per four terms
(the *plan* from :func:`._chord_apply.offset_plan` lists, for each group of four
offsets, the row segments on which none of them wraps around and the shift
of each).  Blocks of columns (row-major ``(N, c)``): row ``i`` of the output
is a combination of ``K`` rows of the input, again four at a time.

No kernel starts threads: on a shared two-core machine a second thread that
is descheduled stalls every factor's join (measured: up to 25x slower), and
one thread already reads the values at 70-85 % of memory speed for large N (see
``benchmarks/results/apply.md``).  (Column-chunk threads for large blocks are
an opt-in of :mod:`._chord_apply`: ``THREADS``.)
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

__all__ = [
    "offset_vec",
    "offset_cols",
    "offset_mat",
    "butterfly_vec",
    "butterfly_mat",
]

# error_model="numpy": no ZeroDivisionError checks; boundscheck off (the callers build the
# indices); nogil so that callers may run several products in threads of their own.
_JIT: dict[str, Any] = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract"})


@nb.njit(inline="always", **_JIT)
def _add1(o, w0, x0):
    for i in range(o.shape[0]):
        o[i] += w0[i] * x0[i]


@nb.njit(inline="always", **_JIT)
def _add2(o, w0, x0, w1, x1):
    for i in range(o.shape[0]):
        o[i] += w0[i] * x0[i] + w1[i] * x1[i]


@nb.njit(inline="always", **_JIT)
def _add4(o, w0, x0, w1, x1, w2, x2, w3, x3):
    for i in range(o.shape[0]):
        o[i] += (w0[i] * x0[i] + w1[i] * x1[i]) + (w2[i] * x2[i] + w3[i] * x3[i])


@nb.njit(**_JIT)
def _offset_factor_vec(w, plan, x, out):
    """``out = W x`` (or ``W^T x``, as the plan says) for one factor's values ``w`` (K, N).

    Plan rows: ``(k0, count, s0, s1, xs_0..xs_3, ws_0..ws_3)``: on rows
    ``s0:s1``, add ``w[k0 + t, i + ws_t] * x[i + xs_t]`` for ``t < count``.
    """
    out[:] = 0.0
    for r in range(plan.shape[0]):
        k0, count, s0, s1 = plan[r, 0], plan[r, 1], plan[r, 2], plan[r, 3]
        o = out[s0:s1]
        t = 0
        while t < count:
            xa, wa = plan[r, 4 + t], plan[r, 8 + t]
            if count - t >= 4:
                xb, xc, xd = plan[r, 5 + t], plan[r, 6 + t], plan[r, 7 + t]
                wb, wc, wd = plan[r, 9 + t], plan[r, 10 + t], plan[r, 11 + t]
                _add4(
                    o,
                    w[k0 + t, s0 + wa : s1 + wa], x[s0 + xa : s1 + xa],
                    w[k0 + t + 1, s0 + wb : s1 + wb], x[s0 + xb : s1 + xb],
                    w[k0 + t + 2, s0 + wc : s1 + wc], x[s0 + xc : s1 + xc],
                    w[k0 + t + 3, s0 + wd : s1 + wd], x[s0 + xd : s1 + xd],
                )
                t += 4
            elif count - t >= 2:
                xb, wb = plan[r, 5 + t], plan[r, 9 + t]
                _add2(
                    o,
                    w[k0 + t, s0 + wa : s1 + wa], x[s0 + xa : s1 + xa],
                    w[k0 + t + 1, s0 + wb : s1 + wb], x[s0 + xb : s1 + xb],
                )
                t += 2
            else:
                _add1(o, w[k0 + t, s0 + wa : s1 + wa], x[s0 + xa : s1 + xa])
                t += 1


@nb.njit(**_JIT)
def offset_vec(W, plan, x, transpose):
    """``(W_0 ... W_{M-1}) x``, or its transpose applied to ``x``, for ``W`` of shape (M, K, N)."""
    n_factors = W.shape[0]
    if n_factors == 0:
        return x.copy()
    a = np.empty_like(x)
    b = np.empty_like(x) if n_factors > 1 else a
    src = x
    for step in range(n_factors):
        m = step if transpose else n_factors - 1 - step
        dst = a if step % 2 == 0 else b
        _offset_factor_vec(W[m], plan, src, dst)
        src = dst
    return src


@nb.njit(**_JIT)
def offset_cols(W, plan, xt, transpose):
    """:func:`offset_vec` for each row of ``xt`` (c, N): a narrow block's columns, one at a time."""
    out = np.empty_like(xt)
    for j in range(xt.shape[0]):
        out[j] = offset_vec(W, plan, xt[j], transpose)
    return out


@nb.njit(inline="always", **_JIT)
def _source(w, offsets, k, i, n, transpose):
    """Row of the input that term ``k`` of output row ``i`` reads, and its value."""
    d = offsets[k]
    if transpose:  # W^T[i, j] = W[j, i]: the row j with j + d = i (mod N)
        s = i - d
        if s < 0:
            s += n
        return s, w[k, s]
    s = i + d
    if s >= n:
        s -= n
    return s, w[k, i]


@nb.njit(**_JIT)
def _offset_factor_mat(w, offsets, x, out, transpose):
    """``out = W x`` (or ``W^T x``) for a row-major block ``x`` (N, c) and values ``w`` (K, N).

    Row ``i`` of ``out`` sums ``K`` scaled rows of ``x``, four per pass.
    Plain 2-D indexing (no row views: their reference counting cost more
    than the arithmetic for narrow blocks); the row indices are invariant
    in the inner loop, which LLVM vectorises over the columns.
    """
    n, c = x.shape
    n_offsets = offsets.shape[0]
    for i in range(n):
        for j in range(c):
            out[i, j] = 0.0
        k = 0
        while k + 4 <= n_offsets:
            s0, v0 = _source(w, offsets, k, i, n, transpose)
            s1, v1 = _source(w, offsets, k + 1, i, n, transpose)
            s2, v2 = _source(w, offsets, k + 2, i, n, transpose)
            s3, v3 = _source(w, offsets, k + 3, i, n, transpose)
            for j in range(c):
                out[i, j] += (v0 * x[s0, j] + v1 * x[s1, j]) + (v2 * x[s2, j] + v3 * x[s3, j])
            k += 4
        while k < n_offsets:
            s0, v0 = _source(w, offsets, k, i, n, transpose)
            for j in range(c):
                out[i, j] += v0 * x[s0, j]
            k += 1


@nb.njit(**_JIT)
def offset_mat(W, offsets, x, transpose):
    """:func:`offset_vec` for a row-major block ``x`` of shape (N, c)."""
    n_factors = W.shape[0]
    if n_factors == 0:
        return x.copy()
    a = np.empty_like(x)
    b = np.empty_like(x) if n_factors > 1 else a
    src = x
    for step in range(n_factors):
        m = step if transpose else n_factors - 1 - step
        dst = a if step % 2 == 0 else b
        _offset_factor_mat(W[m], offsets, src, dst, transpose)
        src = dst
    return src


@nb.njit(**_JIT)
def _butterfly_factor(w, m, x, out, transpose):
    """``out = W_m x`` (or ``W_m^T x``) for butterfly values ``w`` (2, N) and a vector ``x``.

    Rows ``i`` and ``i + s`` (``s = 2^m``, bit ``m`` of ``i`` clear) form a
    pair: ``out[i] = w0[i] x[i] + w1[i] x[i+s]``, ``out[i+s] = w0[i+s] x[i+s] + w1[i+s] x[i]``;
    the transpose swaps the two ``w1`` values.  Wide pairs (``s >= 16``) run
    as unit-stride loops over views of the two halves (vectorised); narrow
    ones index directly (a view per pair of short halves costs more than the
    arithmetic).
    """
    n = x.shape[0]
    s = 1 << m
    w0, w1 = w[0], w[1]
    if s < 16:
        for base in range(0, n, 2 * s):
            for i in range(base, base + s):
                j = i + s
                xi, xj = x[i], x[j]
                a1, b1 = (w1[j], w1[i]) if transpose else (w1[i], w1[j])
                out[i] = w0[i] * xi + a1 * xj
                out[j] = w0[j] * xj + b1 * xi
        return
    for base in range(0, n, 2 * s):
        lo, hi = x[base : base + s], x[base + s : base + 2 * s]
        olo, ohi = out[base : base + s], out[base + s : base + 2 * s]
        a0, b0 = w0[base : base + s], w0[base + s : base + 2 * s]
        a1, b1 = w1[base : base + s], w1[base + s : base + 2 * s]
        if transpose:
            a1, b1 = b1, a1
        for r in range(s):
            olo[r] = a0[r] * lo[r] + a1[r] * hi[r]
            ohi[r] = b0[r] * hi[r] + b1[r] * lo[r]


@nb.njit(**_JIT)
def butterfly_vec(W, x, transpose):
    """``(W_0 ... W_{M-1}) x`` (or the transpose) for butterfly values ``W`` (M, 2, N)."""
    n_factors = W.shape[0]
    a = np.empty_like(x)
    b = np.empty_like(x) if n_factors > 1 else a
    src = x
    for step in range(n_factors):
        m = step if transpose else n_factors - 1 - step
        dst = a if step % 2 == 0 else b
        _butterfly_factor(W[m], m, src, dst, transpose)
        src = dst
    return src


@nb.njit(**_JIT)
def _butterfly_factor_mat(w, m, x, out, transpose):
    """:func:`_butterfly_factor` for a row-major block ``x`` (N, c), pair by pair of rows."""
    n, c = x.shape
    s = 1 << m
    for base in range(0, n, 2 * s):
        for i in range(base, base + s):
            j = i + s
            a0, b0 = w[0, i], w[0, j]
            a1, b1 = (w[1, j], w[1, i]) if transpose else (w[1, i], w[1, j])
            for col in range(c):
                xi, xj = x[i, col], x[j, col]
                out[i, col] = a0 * xi + a1 * xj
                out[j, col] = b0 * xj + b1 * xi


@nb.njit(**_JIT)
def butterfly_mat(W, x, transpose):
    """:func:`butterfly_vec` for a row-major block ``x`` of shape (N, c)."""
    n_factors = W.shape[0]
    a = np.empty_like(x)
    b = np.empty_like(x) if n_factors > 1 else a
    src = x
    for step in range(n_factors):
        m = step if transpose else n_factors - 1 - step
        dst = a if step % 2 == 0 else b
        _butterfly_factor_mat(W[m], m, src, dst, transpose)
        src = dst
    return src
