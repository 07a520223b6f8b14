"""Fused GPU (Triton) loss+gradient of the offset supports; imported only by :mod:`._kernels`.

The same objective and gradient as :func:`._kernels.loss_and_grad` (the
"shifts" path), with each of its three kinds of pass fused into one kernel
launch that reads its ``N x N`` operand once and writes its output once:

* ``W P`` and ``W^T G`` (:func:`combine`): ``out[i] = sum_k c[i, k] src[(i ± d_k) mod N]``
  — the shifts path makes ``K`` read-modify-write passes over ``out`` for it;
* the gradient's row dot products (:func:`row_dots`): ``grad[i, k] = <G[i], P[(i + d_k) mod N]>``
  — the shifts path reads ``G`` once per offset.

Both launch one program per tile of ``BLOCK_ROWS x BLOCK_COLS`` entries,
numbered column tile first: the programs that run at the same time share a
few column slabs of ``N x BLOCK_COLS`` numbers (8 MiB at N = 16,384 in
float32), which stay in the GPU's L2 cache, so the ``K`` shifted reads of a
row come from the cache and device memory sees each operand about once: the
evaluation's traffic is close to the ``3 M`` passes of ``2 N^2`` numbers that
``benchmarks/speed.py`` counts as its bound.

Importing this module imports triton and compiles nothing; triton compiles
each kernel on its first launch (once per dtype and ``K``).  With
``TRITON_INTERPRET=1`` in the environment before the import, the same
kernels run on the CPU through triton's interpreter (how the tests check
them on machines without a GPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from ._kernels import _column_index, chain_loss_and_grad

__all__ = ["combine", "row_dots", "loss_and_grad"]

#: Tile of one program: rows x columns (one column tile is 512 bytes of float32 per row), and the
#: warps that run it.
BLOCK_ROWS = 32
BLOCK_COLS = 128
NUM_WARPS = 4


@triton.jit
def _combine_kernel(out_ptr, src_ptr, coef_ptr, off_ptr, n, n_cols, stride, row_tiles,
                    K: tl.constexpr, SIGN: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """``out[i, j] = sum_k coef[i, k] * src[(i + SIGN d_k) mod n, j]`` on one tile."""
    pid = tl.program_id(0)
    col_tile = pid // row_tiles  # column tile outer: concurrent programs share its slab in L2
    rows = (pid % row_tiles) * BR + tl.arange(0, BR)
    cols = col_tile * BC + tl.arange(0, BC)
    row_ok = rows < n
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    acc = tl.zeros((BR, BC), dtype=out_ptr.dtype.element_ty)
    for k in tl.static_range(K):
        d = tl.load(off_ptr + k)
        src_rows = ((rows + SIGN * d + n) % n).to(tl.int64)  # 0 <= d < n
        c = tl.load(coef_ptr + rows.to(tl.int64) * K + k, mask=row_ok, other=0.0)
        v = tl.load(src_ptr + src_rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
        acc += c[:, None] * v
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride + cols[None, :], acc, mask=mask)


@triton.jit
def _row_dots_kernel(part_ptr, g_ptr, p_ptr, off_ptr, n, n_cols, stride, row_tiles,
                     K: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """``part[t, i, k] = <G[i, J_t], P[(i + d_k) mod n, J_t]>`` for the column tile ``J_t`` of one program."""
    pid = tl.program_id(0)
    col_tile = pid // row_tiles
    rows = (pid % row_tiles) * BR + tl.arange(0, BR)
    cols = col_tile * BC + tl.arange(0, BC)
    row_ok = rows < n
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    g = tl.load(g_ptr + rows.to(tl.int64)[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    base = part_ptr + col_tile.to(tl.int64) * n * K + rows.to(tl.int64) * K
    for k in tl.static_range(K):
        d = tl.load(off_ptr + k)
        src_rows = ((rows + d) % n).to(tl.int64)
        p = tl.load(p_ptr + src_rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
        tl.store(base + k, tl.sum(g * p, axis=1), mask=row_ok)


def _grid(n: int, n_cols: int) -> tuple[int, int]:
    row_tiles = triton.cdiv(n, BLOCK_ROWS)
    return row_tiles, row_tiles * triton.cdiv(n_cols, BLOCK_COLS)


def combine(coef: torch.Tensor, offsets: torch.Tensor, src: torch.Tensor, sign: int,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """``out[i] = sum_k coef[i, k] * src[(i + sign * d_k) mod N]`` for an ``(N, c)`` block ``src``.

    ``sign=1`` with the factor's values gives ``W @ src``; ``sign=-1`` with
    ``coef[j, k] = w[(j - d_k) mod N, k]`` gives ``W.T @ src``.  ``offsets``
    is an int32 tensor of the ``d_k`` reduced mod ``N``, on ``src``'s device.
    """
    n, n_cols = src.shape
    src = src.contiguous()
    out = torch.empty_like(src) if out is None else out
    row_tiles, programs = _grid(n, n_cols)
    _combine_kernel[(programs,)](out, src, coef.contiguous(), offsets, n, n_cols, src.stride(0), row_tiles,
                                 K=coef.shape[1], SIGN=sign, BR=BLOCK_ROWS, BC=BLOCK_COLS, num_warps=NUM_WARPS)
    return out


def row_dots(G: torch.Tensor, P: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``grad[i, k] = <G[i], P[(i + d_k) mod N]>``, shape ``(N, K)``: the gradient of ``<G, W P>`` in ``w``.

    Each program writes its column tile's part; the parts are added by one
    ``sum`` in a fixed order (the same numbers on every run).
    """
    n, n_cols = G.shape
    k = offsets.shape[0]
    row_tiles, programs = _grid(n, n_cols)
    parts = torch.empty((programs // row_tiles, n, k), dtype=G.dtype, device=G.device)
    _row_dots_kernel[(programs,)](parts, G.contiguous(), P.contiguous(), offsets, n, n_cols, G.stride(0),
                                  row_tiles, K=k, BR=BLOCK_ROWS, BC=BLOCK_COLS, num_warps=NUM_WARPS)
    return parts.sum(0)


def loss_and_grad(ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``0.5 ||X - W_1 ... W_M||_F^2`` and its gradient in the values ``ws`` (shape ``(M, N, K)``).

    The passes of :func:`._kernels.loss_and_grad` — the partial products kept
    from the right, the residual, then per factor its gradient and ``W^T G`` —
    each one fused kernel.  ``W^T``'s values are gathered once per factor.
    """
    n = ws.shape[1]
    device = ws.device
    cols = _column_index(n, offsets, device)  # where row i's value k sits
    rows_t = _column_index(n, [-int(d) for d in offsets], device)  # whose value k lands in column j
    offs = cols[0].to(torch.int32)  # the d_k reduced mod N
    return chain_loss_and_grad(
        ws.contiguous(), X, cols,
        apply=lambda w, P: combine(w, offs, P, 1),
        row_grad=lambda G, P: row_dots(G, P, offs),
        apply_t=lambda w, G, spare: combine(torch.gather(w, 0, rows_t), offs, G, -1, out=spare),
    )
