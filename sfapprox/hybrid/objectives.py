"""The joint objectives of the hybrids, ``0.5 * ||X - P(W) - C||_F^2``, with exact gradients.

The factor part goes through the SF kernels with the target ``T = X - C``, so
the kernel's residual ``G = P(W) - T`` is the joint one; the correction's
gradient is read off the same residual (thin products with the factors, no
second ``N x N`` pass).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

# The module, not the constant: TORCH_DENSE_MAX_N is read at each call, as ChordOperator.to_dense reads it.
from ..operators import chord as chord_ops
from ..operators.chord import ChordOperator

__all__ = ["_lr_objective", "_sparse_objective", "_Thin", "_cat", "_entry_reader", "dense_product"]


def dense_product(ws, offsets: list[int]):
    """``W1 ... WM`` as a dense tensor (like :func:`~sfapprox.sf._kernels.chord_product`).

    On the CPU above :data:`~sfapprox.operators.chord.TORCH_DENSE_MAX_N` it comes from
    the compiled apply kernels (``ChordOperator.to_dense``): 0.4 s instead of
    1.3 s at N = 3000, where the hybrids form it for every start, re-selection
    and (sf+s) evaluation.

    Parameters
    ----------
    ws : torch.Tensor, shape (M, N, K)
        The factor values.
    offsets : list of int
        The ``K`` offsets.

    Returns
    -------
    torch.Tensor, shape (N, N)
        Of ``ws``'s dtype, on its device.
    """
    import torch

    from ..sf._kernels import chord_product

    n = ws.shape[1]
    # a line search's trial may hold non-finite values: the torch product carries them into the loss
    # (which the search backs off from), where ChordOperator refuses them
    if ws.device.type != "cpu" or n <= chord_ops.TORCH_DENSE_MAX_N or not bool(torch.isfinite(ws).all()):
        return chord_product(ws, offsets)
    values = ws.detach().to(torch.float64).numpy()
    return torch.from_numpy(ChordOperator(values, np.asarray(offsets, dtype=np.int64)).to_dense()).to(ws.dtype)


def _lr_objective(kernel, offsets: list[int], target, shape: tuple[int, int, int], rank: int):
    """``0.5 * ||X - P(W) - U V^T||^2`` over ``x = [W, U, V]`` (flat), with its exact gradient.

    The kernel gets ``T = X - U V^T``, so its residual is the joint one,
    ``G = P - T``; then ``G V = P V - T V`` and ``G^T U = P^T U - T^T U``
    cost two thin products with the factors (``O(M K N r)``) and two
    ``N x N x r`` products.
    """
    n = target.shape[0]
    n_w = math.prod(shape)

    def fun(x):
        ws = x[:n_w].view(shape)
        U = x[n_w : n_w + n * rank].view(n, rank)
        V = x[n_w + n * rank :].view(n, rank)
        T = target - U @ V.T
        loss, grad_w = kernel(ws, offsets, T)
        factors = _Thin(ws, offsets)
        grad_u = factors.apply(V) - T @ V
        grad_v = factors.apply_t(U) - T.T @ U
        return float(loss), _cat(grad_w, grad_u, grad_v)

    return fun


def _sparse_objective(kernel, offsets: list[int], target, shape: tuple[int, int, int], flat):
    """``0.5 * ||X - P(W) - S||^2`` over ``x = [W, v]``, ``S`` holding ``v`` at the flat positions ``flat``.

    ``grad_v = G[flat] = P[flat] + v - X[flat]``; those entries of ``P``
    come from products with unit columns (or rows), not from all of ``P``.
    """
    n = target.shape[0]
    n_w = math.prod(shape)
    entries = _entry_reader(flat // n, flat % n, n)

    def fun(x):
        ws = x[:n_w].view(shape)
        v = x[n_w:]
        T = target.clone()
        T.view(-1).index_add_(0, flat, -v)  # positions are distinct: T = X - S
        loss, grad_w = kernel(ws, offsets, T)
        grad_v = entries(_Thin(ws, offsets)) - T.view(-1)[flat]
        return float(loss), _cat(grad_w, grad_v)

    return fun


class _Thin:
    """``P B`` and ``P^T B`` for thin blocks ``B``, ``P = W1 ... WM``.

    Small N (the SF kernels' dense range): the factors are scattered into
    dense ``N x N`` matrices once and applied by ``2M`` BLAS calls, since
    there ``M K`` shifted adds per product cost more in call overhead than
    the arithmetic.  Larger N: the ``O(M K N c)`` shifted adds.
    """

    def __init__(self, ws, offsets: list[int]):
        from ..sf._kernels import DENSE_MAX_N

        self.ws, self.offsets = ws, offsets
        self.dense = None
        m, n, k = ws.shape
        if n <= DENSE_MAX_N:
            import torch

            rows = torch.arange(n, device=ws.device)[:, None]
            idx = (rows + torch.as_tensor(offsets, device=ws.device)[None, :]) % n
            self.dense = torch.zeros((m, n, n), dtype=ws.dtype, device=ws.device)
            self.dense.scatter_add_(2, idx.expand(m, n, k), ws)

    def apply(self, B):
        from ..sf._kernels import apply_product

        if self.dense is None:
            return apply_product(self.ws, self.offsets, B)
        for D in reversed(self.dense):
            B = D @ B
        return B

    def apply_t(self, B):
        from ..sf._kernels import apply_product_t

        if self.dense is None:
            return apply_product_t(self.ws, self.offsets, B)
        for D in self.dense:
            B = D.T @ B
        return B


def _cat(*parts):
    import torch

    return torch.cat([p.reshape(-1) for p in parts])


def _entry_reader(rows, cols, n: int) -> Callable:
    """A function ``_Thin -> P[rows, cols]``, through the fewer of the distinct columns or rows.

    ``P E`` for the unit columns ``E`` of the distinct columns costs
    ``O(M K N c)``; when the distinct rows are fewer, ``P^T E`` gives those rows.
    On the CPU above :data:`~sfapprox.operators.chord.TORCH_DENSE_MAX_N`, when they
    are a quarter of ``N`` or more, the whole product from the compiled kernels
    (:func:`dense_product`) is cheaper.
    """
    import torch

    uc, inv_c = torch.unique(cols, return_inverse=True)
    ur, inv_r = torch.unique(rows, return_inverse=True)
    by_cols = uc.numel() <= ur.numel()
    pick, inv, other = (uc, inv_c, rows) if by_cols else (ur, inv_r, cols)
    if rows.device.type == "cpu" and n > chord_ops.TORCH_DENSE_MAX_N and 4 * pick.numel() >= n:
        flat = rows * n + cols
        return lambda factors: dense_product(factors.ws, factors.offsets).view(-1)[flat]
    units = torch.zeros((n, pick.numel()), dtype=torch.float64, device=rows.device)
    units[pick, torch.arange(pick.numel(), device=rows.device)] = 1.0

    def read(factors: _Thin):
        E = units.to(factors.ws.dtype)
        block = factors.apply(E) if by_cols else factors.apply_t(E)
        return block[other, inv]

    return read
