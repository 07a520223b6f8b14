"""Compiled (numba) HALS sweeps of the NMF; imported only by :mod:`.nmf`, through its :class:`CompiledModule`.

The same updates as :func:`.nmf._hals_sweeps`'s torch and numpy paths, in one call into compiled code
per half-step: there every column update was a torch (or numpy) call of about 30 us of overhead for a
few thousand flops (835,000 of them, 24 of 34 s, in a comparison's NMF at N = 256, rank 36).

Layout: the factor ``F`` being updated is ``(N, r)``, C-contiguous (``W``, or ``H^T``).  Column ``k``'s
update reads row ``i`` of ``F`` only for its own entry ``F[i, k]``, so the rows are independent within
a column and the Gauss-Seidel order over the columns can be run row by row: for each row ``i`` the
``r`` columns in order, each ``F[i, k] = max(EPS, XG[i, k] / d_k - F[i, :] . C[k, :])`` where
``C[k, j] = GG[j, k] / d_k`` off the diagonal and 0 on it (the coupling transposed once per call).
:func:`_sweep` takes :data:`ROWS` rows at a time, transposed into a small block that stays in the L1
cache for its ``r`` column updates, each a unit-stride sum over the block's rows.  Each entry gets
the value the column-by-column order gives it; only the summation order inside a dot product may
differ (four terms at a time, "reassoc" and "contract" let LLVM vectorise and fuse it).

Importing this module imports numba and compiles nothing: the kernel is compiled on its first call,
once per process and dtype, or loaded from numba's on-disk cache (``cache=True``).  It starts no threads
(no ``prange``: see :mod:`sfapprox.operators._chord_apply_numba`) and releases the GIL.
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

__all__ = ["hals_sweeps"]

# As the SF kernels' (:mod:`sfapprox.sf._kernels_numba`): no bounds checks (the caller checks the shapes:
# :func:`sfapprox.baselines.nmf._compiled_sweeper`),
# no ZeroDivisionError checks, "reassoc" for the vectorised dot products; no "nnan"/"ninf" (a NaN must
# stay a NaN through the floor, as torch's clamp keeps it).
_JIT: dict[str, Any] = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy",
                            fastmath={"contract", "reassoc"}, no_cfunc_wrapper=True)


@nb.njit(**_JIT)
def _coupling(GG, tiny):
    """``(d, C)``: the diagonal of ``GG`` clamped below at ``tiny`` and ``C[k, j] = GG[j, k] / d_k``
    (``C[k, k] = 0``), the coupling of column ``k`` to the others as a contiguous row."""
    r = GG.shape[0]
    d = np.empty(r, dtype=GG.dtype)
    for k in range(r):
        value = GG[k, k]
        # (a NaN stays: torch.clamp keeps it)
        d[k] = tiny if value < tiny else value
    C = np.empty((r, r), dtype=GG.dtype)
    for k in range(r):
        for j in range(r):
            C[k, j] = GG[j, k] / d[k]
        C[k, k] = 0.0
    return d, C


#: Rows of ``F`` updated together (:func:`_sweep`): their ``r x ROWS`` transposed block (17 KiB at
#: r = 66 in float64) and ``ROWS`` sums stay in the L1 cache.
ROWS = 32


@nb.njit(**_JIT)
def _sweep(F, XG, d, C, eps, block, acc):
    """One Gauss-Seidel sweep over the columns of ``F``; returns the squared Frobenius norm of its change.

    Rows are taken :data:`ROWS` at a time, transposed into ``block`` (``r x ROWS``), so that each column
    update is a sum of whole block rows (unit stride, four terms per pass, no horizontal sums): the
    ``ROWS`` dot products of a column with ``C[k]`` side by side in ``acc``.
    """
    n, r = F.shape
    moved = 0.0
    for i0 in range(0, n, ROWS):
        b = min(ROWS, n - i0)
        for j in range(r):
            for t in range(b):
                block[j, t] = F[i0 + t, j]
        for k in range(r):
            ck = C[k]
            c0 = ck[0]
            for t in range(b):
                acc[t] = block[0, t] * c0
            j = 1
            while j + 4 <= r:
                c0, c1, c2, c3 = ck[j], ck[j + 1], ck[j + 2], ck[j + 3]
                for t in range(b):
                    acc[t] += (block[j, t] * c0 + block[j + 1, t] * c1) + (block[j + 2, t] * c2 + block[j + 3, t] * c3)
                j += 4
            while j < r:
                c0 = ck[j]
                for t in range(b):
                    acc[t] += block[j, t] * c0
                j += 1
            dk = d[k]
            for t in range(b):
                value = XG[i0 + t, k] / dk - acc[t]
                # max(EPS, value) as torch's clamp_(min=EPS): a NaN stays a NaN
                block[k, t] = eps if value < eps else value
        for t in range(b):
            for j in range(r):
                step = float(block[j, t] - F[i0 + t, j])
                moved += step * step
                F[i0 + t, j] = block[j, t]
    return moved


@nb.njit(**_JIT)
def hals_sweeps(F, XG, GG, max_sweeps, eps, tiny, delta):
    """Decrease ``||X - F G||`` over ``F >= eps`` in place by up to ``max_sweeps`` HALS sweeps.

    ``F`` ``(N, r)`` C-contiguous, ``XG = X G^T`` ``(N, r)``, ``GG = G G^T`` ``(r, r)``, all of one dtype,
    ``eps`` and ``tiny`` of it too (the floor of the entries and of ``GG``'s diagonal).  Stops after a
    sweep whose change of ``F`` (Frobenius) is at most ``delta`` times the first sweep's, as
    :func:`sfapprox.baselines.nmf._sweeps` does; returns the sweeps run.
    """
    d, C = _coupling(GG, tiny)
    block = np.empty((F.shape[1], ROWS), dtype=F.dtype)
    acc = np.empty(ROWS, dtype=F.dtype)
    first = 0.0
    sweep = 0
    while sweep < max_sweeps:
        sweep += 1
        moved = math.sqrt(_sweep(F, XG, d, C, eps, block, acc))
        if sweep == 1:
            first = moved
        if moved <= delta * first:
            break
    return sweep
