"""Compiled (numba) loss+gradient of the offset supports; imported only by :mod:`._kernels`.

The same objective and gradient as :func:`._kernels.loss_and_grad`, computed
in one call into compiled code on the sparse structure: for small ``N`` the
arithmetic of one evaluation (``3 (M - 1) K N^2`` multiply-adds, about 0.4
million at ``N = 64``) takes tens of microseconds, while the torch and numpy
paths spend most of their time in per-call overhead (one call per offset
and factor, or ``3 M`` dense ``N x N`` BLAS products).

Layout: the factor values ``w`` of shape ``(M, N, K)`` (row ``i`` of factor
``m`` holds ``w[m, i, k]`` at column ``(i + d_k) mod N``), ``X`` ``(N, N)``,
both C-contiguous, float64 or float32 (one specialisation each).  The plan
holds ``fwd[i, k] = (i + d_k) mod N`` (the row of the right operand that
term ``k`` of row ``i`` of ``W P`` reads) and ``bwd[j, k] = (j - d_k) mod N``
(the row of ``G`` that term ``k`` of row ``j`` of ``W^T G`` reads, with the
value ``w[bwd[j, k], k]``).  Every product is a combination of whole rows,
so the cyclic wrap-around is in the row index only and every inner loop is a
unit-stride loop over ``N`` columns, four terms at a time (the output row is
read and written once per four terms).

Importing this module imports numba and compiles nothing: the kernel is
compiled on its first call, once per process and dtype, or loaded from
numba's on-disk cache (``cache=True``).  The kernel starts no threads of its
own (no ``prange``: a join per factor stalls on a shared machine, see
:mod:`sfapprox.operators._chord_apply_numba`); it releases the GIL, and
:func:`._kernels.loss_and_grad_numba` runs disjoint sets of column blocks on
a few threads, one join per evaluation.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

__all__ = ["loss_and_grad", "sketch_loss_and_grad", "adam_step"]

# error_model="numpy": no ZeroDivisionError checks; boundscheck off (the plan is built by the
# caller).  "reassoc" lets LLVM vectorise the row dot products and the loss (sums in another
# order: the gradient agrees with the torch kernels to rounding, ~1e-15 relative in float64).
# No "nnan"/"ninf": a non-finite loss must come out as such (the solver backtracks on it).
# no_cfunc_wrapper: never passed as a C callback (a first-class function): its C wrapper was compiled for
# nothing on a fresh install.
_JIT: dict[str, Any] = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract", "reassoc"},
            no_cfunc_wrapper=True)
# The kernels' helpers are plain compiled functions, not inline="always": numba's IR inlining copies and
# types a callee again at each call site (a fresh install's kernel: 9.4 M -> 6.1 M Python calls of numba's,
# 4.4 -> 3.4 CPU s), while LLVM still inlines the small ones.  Each helper takes every row of a product, so
# a call that LLVM leaves a call costs once per factor and block, not once per row.  Called only by the
# kernels: no wrapper for Python (such a function called from Python crashes the interpreter).
_JIT_HELPER: dict[str, Any] = dict(_JIT, no_cpython_wrapper=True)


@nb.njit(**_JIT_HELPER)
def _combine(out, coef, rows, src, c):
    """``out[i, :c] = sum_k coef[i, k] * src[rows[i, k], :c]`` for every row ``i`` (``W P`` or ``W^T G``), four
    terms per pass."""
    n_terms = rows.shape[1]
    for i in range(out.shape[0]):
        k = 0
        if n_terms >= 4:
            r0, r1, r2, r3 = rows[i, 0], rows[i, 1], rows[i, 2], rows[i, 3]
            c0, c1, c2, c3 = coef[i, 0], coef[i, 1], coef[i, 2], coef[i, 3]
            for j in range(c):
                out[i, j] = (c0 * src[r0, j] + c1 * src[r1, j]) + (c2 * src[r2, j] + c3 * src[r3, j])
            k = 4
        else:
            r0, c0 = rows[i, 0], coef[i, 0]
            for j in range(c):
                out[i, j] = c0 * src[r0, j]
            k = 1
        while k + 4 <= n_terms:
            r0, r1, r2, r3 = rows[i, k], rows[i, k + 1], rows[i, k + 2], rows[i, k + 3]
            c0, c1, c2, c3 = coef[i, k], coef[i, k + 1], coef[i, k + 2], coef[i, k + 3]
            for j in range(c):
                out[i, j] += (c0 * src[r0, j] + c1 * src[r1, j]) + (c2 * src[r2, j] + c3 * src[r3, j])
            k += 4
        while k + 2 <= n_terms:
            r0, r1 = rows[i, k], rows[i, k + 1]
            c0, c1 = coef[i, k], coef[i, k + 1]
            for j in range(c):
                out[i, j] += c0 * src[r0, j] + c1 * src[r1, j]
            k += 2
        while k < n_terms:
            r0, c0 = rows[i, k], coef[i, k]
            for j in range(c):
                out[i, j] += c0 * src[r0, j]
            k += 1


@nb.njit(**_JIT_HELPER)
def _row_dots(grad, G, rows, P, c):
    """``grad[i, k] += <G[i, :c], P[rows[i, k], :c]>`` for every row ``i`` and term ``k``, four dot products per
    pass over ``G[i]``."""
    n_terms = rows.shape[1]
    for i in range(G.shape[0]):
        k = 0
        while k + 4 <= n_terms:
            r0, r1, r2, r3 = rows[i, k], rows[i, k + 1], rows[i, k + 2], rows[i, k + 3]
            s0 = s1 = s2 = s3 = 0.0
            for j in range(c):
                g = G[i, j]
                s0 += g * P[r0, j]
                s1 += g * P[r1, j]
                s2 += g * P[r2, j]
                s3 += g * P[r3, j]
            grad[i, k] += s0
            grad[i, k + 1] += s1
            grad[i, k + 2] += s2
            grad[i, k + 3] += s3
            k += 4
        while k < n_terms:
            r0 = rows[i, k]
            s0 = 0.0
            for j in range(c):
                s0 += G[i, j] * P[r0, j]
            grad[i, k] += s0
            k += 1


@nb.njit(**_JIT)  # (its Python wrapper kept: tests/test_kernels.py calls it)
def _residual(G, X, col, c):
    """``G[:, :c] -= X[:, col:col + c]``; returns ``sum G[:, :c]^2``, the same to the bit wherever ``G`` and
    ``X`` lie in memory.

    Each row's sum has a loop of its own that stores nothing.  Summed in the
    loop that stored ``G``, LLVM's vectorised sum ran behind a run-time check
    that ``G`` and ``X`` do not overlap, and where the check was inconclusive
    (it depends on where the workspace was allocated, another place on a
    helper thread) the scalar loop summed in another order: the loss differed
    by 1-2 ulp in about 1 call in 50, and a fit on two threads drifted from the
    same fit on one.
    """
    total = 0.0
    for i in range(G.shape[0]):
        for j in range(c):
            G[i, j] -= X[i, col + j]
        row = 0.0
        for j in range(c):
            row += G[i, j] * G[i, j]
        total += row
    return total


@nb.njit(**_JIT_HELPER)
def _transposed(ws, bwd):
    """``coef_t[m, j, k] = ws[m, bwd[j, k], k]``: row ``j`` of ``W_m^T`` reads ``coef_t[m, j]``."""
    n_factors, n, n_offsets = ws.shape
    coef_t = np.empty((n_factors, n, n_offsets), dtype=ws.dtype)
    for m in range(n_factors):
        for j in range(n):
            for k in range(n_offsets):
                coef_t[m, j, k] = ws[m, bwd[j, k], k]
    return coef_t


@nb.njit(**_JIT)
def loss_and_grad(ws, X, fwd, bwd, width, grad, starts, x0):
    """``0.5 * ||X[:, J] - (W_0 ... W_{M-1})[:, J]||_F^2``, returned, and its gradient, written into ``grad``.

    ``J`` is the union of the column blocks ``[j0, j0 + width)`` for ``j0`` in
    ``starts`` (int64; all of ``range(0, N, width)`` for the whole loss).
    ``X`` holds the target's columns from column ``x0`` of the matrix on: the
    whole matrix (``x0 = 0``), or a block of its columns that covers ``J``
    (a fit from a source's column blocks, never formed whole).
    columns of the product are independent, so the work runs on blocks of
    ``width`` columns (all of them for small ``N``), the buffers of a block
    stay in cache, the workspace is ``M + 1`` buffers of ``N x width``, and
    disjoint sets of blocks give parts of the loss and gradient that add up
    (the caller runs them on threads, or samples some of them).  ``grad`` is
    ``(M, N, K)``.
    Per block: forward ``Q_{M-1} = W_{M-1}`` (the block's columns, dense),
    ``Q_m = W_m Q_{m+1}`` kept for ``m >= 1``, ``G_0 = W_0 Q_1 - X`` (the
    residual); backward, the gradient of factor ``m < M - 1`` gains
    ``<G_m[i], Q_{m+1}[fwd[i, k]]>`` and ``G_{m+1} = W_m^T G_m``; the last
    factor's is ``G_{M-1}[i, fwd[i, k]]`` where that column is in the block.
    """
    n_factors, n, n_offsets = ws.shape
    width = min(width, n)
    Q = np.empty((n_factors + 1, n, width), dtype=ws.dtype)  # Q[m] for 1 <= m < M; Q[0], Q[M]: G
    coef_t = _transposed(ws, bwd)
    grad[:, :, :] = 0.0
    loss = 0.0
    for b in range(starts.shape[0]):
        j0 = starts[b]
        c = min(width, n - j0, x0 + X.shape[1] - j0)  # a block ends at the matrix's or the target's last column
        # ---- forward
        last = Q[n_factors - 1] if n_factors > 1 else Q[0]
        last[:, :] = 0.0
        for i in range(n):
            for k in range(n_offsets):
                col = fwd[i, k] - j0
                if 0 <= col < c:
                    last[i, col] += ws[n_factors - 1, i, k]
        for m in range(n_factors - 2, -1, -1):
            _combine(Q[m], ws[m], fwd, Q[m + 1], c)
        G = Q[0]
        loss += _residual(G, X, j0 - x0, c)
        # ---- backward
        spare = Q[n_factors]
        for m in range(n_factors - 1):
            _row_dots(grad[m], G, fwd, Q[m + 1], c)
            _combine(spare, coef_t[m], bwd, G, c)
            # G_{m+1} replaces G_m; Q[m + 1], read above for the last time, is the next spare
            G, spare = spare, Q[m + 1]
        for i in range(n):
            for k in range(n_offsets):
                col = fwd[i, k] - j0
                if 0 <= col < c:
                    grad[n_factors - 1, i, k] += G[i, col]
    return 0.5 * loss


@nb.njit(**_JIT)
def sketch_loss_and_grad(ws, Y, S, fwd, bwd, width, grad, starts):
    """``0.5 ||Y[:, J] - (W_0 ... W_{M-1}) S[:, J]||_F^2``, returned, and its gradient, written into ``grad``.

    The loss of a fit to a sketch ``Y = X S`` of the target (``S`` an
    ``N x b`` test matrix, ``Y`` ``N x b``, both C-contiguous): the chain of
    :func:`loss_and_grad` with ``S``'s columns where that one has the
    identity's, so every factor, the last one too, is a dense combination
    (``M`` forward products where that one has ``M - 1``) and the last
    factor's gradient is ``<G_{M-1}[i], S[fwd[i, k]]>``.  ``J`` is the union
    of the blocks ``[j0, j0 + width)`` of ``S``'s columns for ``j0`` in
    ``starts``; an evaluation costs about ``b / N`` of one on the whole matrix.
    ``grad`` is ``(M, N, K)``.
    """
    n_factors, n, n_offsets = ws.shape
    width = min(width, S.shape[1])
    Q = np.empty((n_factors + 2, n, width), dtype=ws.dtype)  # Q[M]: the spare; Q[M + 1]: S's block
    coef_t = _transposed(ws, bwd)
    grad[:, :, :] = 0.0
    loss = 0.0
    block = Q[n_factors + 1]
    for b in range(starts.shape[0]):
        j0 = starts[b]
        c = min(width, S.shape[1] - j0)
        for i in range(n):
            for j in range(c):
                block[i, j] = S[i, j0 + j]
        # ---- forward: Q[m] = W_m Q[m + 1], Q[M] standing for S's block
        for m in range(n_factors - 1, -1, -1):
            src = block if m == n_factors - 1 else Q[m + 1]
            _combine(Q[m], ws[m], fwd, src, c)
        G = Q[0]
        loss += _residual(G, Y, j0, c)
        # ---- backward
        spare = Q[n_factors]
        for m in range(n_factors):
            right = block if m == n_factors - 1 else Q[m + 1]
            _row_dots(grad[m], G, fwd, right, c)
            if m < n_factors - 1:
                _combine(spare, coef_t[m], bwd, G, c)
                G, spare = spare, Q[m + 1]
    return 0.5 * loss


@nb.njit(**_JIT)
def adam_step(x, x32, grads, m1, m2, scale, lr, beta1, beta2, bias1, bias2, eps):
    """One Adam step on ``x`` (float64), in one pass: the gradient is the sum of the groups'
    ``grads[g]`` (float32) times ``scale``; ``m1``, ``m2`` are the moments; ``x32`` gets the new
    values in float32 (what the next step's kernel reads).  All arrays flat, of one length."""
    n_groups = grads.shape[0]
    root2 = 1.0 / np.sqrt(bias2)
    step = lr / bias1
    for i in range(x.shape[0]):
        g = 0.0
        for k in range(n_groups):
            g += grads[k, i]
        g *= scale
        a = beta1 * m1[i] + (1.0 - beta1) * g
        b = beta2 * m2[i] + (1.0 - beta2) * g * g
        m1[i] = a
        m2[i] = b
        v = x[i] - step * a / (np.sqrt(b) * root2 + eps)
        x[i] = v
        x32[i] = v
