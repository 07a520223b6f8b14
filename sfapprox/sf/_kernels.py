"""Tensor kernels of the Chord sparse factorization.

A factor ``W`` is stored as its values ``w`` of shape ``(N, K)``; row ``i``
holds ``W[i, (i + d_k) mod N] = w[i, k]``.  Applying it to a dense block is a
K-term sum of row-shifted copies, written as in-place ``addcmul_`` on two
slices per offset (the wrap-around split), so no ``N x K x N`` gather, no
dense mask and no ``N x N x N`` product is ever formed: each factor costs
``O(K * N^2)`` time and one ``N x N`` output buffer.

The stack of factors is one tensor ``ws`` of shape ``(M, N, K)``; the product
is ``W1 @ W2 @ ... @ WM`` (``ws[0]`` is applied last, on the left).  All
functions are pure: tensors in, tensors out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "apply_factor",
    "apply_factor_t",
    "factor_grad",
    "factor_to_dense",
    "chord_product",
    "apply_product",
    "apply_product_t",
    "loss_and_grad",
]


def _split(n: int, d: int) -> tuple[slice, slice, slice, slice]:
    """Row slices for a cyclic shift by ``d``: rows ``[0, n-d)`` read ``[d, n)``, the rest wrap."""
    return slice(0, n - d), slice(d, n), slice(n - d, n), slice(0, d)


def apply_factor(
    w: torch.Tensor, offsets: Sequence[int], P: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Return ``W @ P``: ``out[i] = sum_k w[i, k] * P[(i + d_k) mod N]``.

    ``P`` has ``N`` rows and any number of columns; ``offsets[0]`` must be 0.
    ``out`` (same shape as ``P``, not overlapping it) is reused when given.
    """
    n = P.shape[0]
    out = torch.mul(P, w[:, :1], out=out) if out is not None else P * w[:, :1]
    for k in range(1, len(offsets)):
        head, head_src, tail, tail_src = _split(n, int(offsets[k]))
        wk = w[:, k : k + 1]
        out[head].addcmul_(wk[head], P[head_src])
        out[tail].addcmul_(wk[tail], P[tail_src])
    return out


def apply_factor_t(
    w: torch.Tensor, offsets: Sequence[int], G: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Return ``W.T @ G``: row ``i`` of ``G`` is sent, times ``w[i, k]``, to row ``(i + d_k) mod N``."""
    n = G.shape[0]
    out = torch.mul(G, w[:, :1], out=out) if out is not None else G * w[:, :1]
    for k in range(1, len(offsets)):
        head, head_dst, tail, tail_dst = _split(n, int(offsets[k]))
        wk = w[:, k : k + 1]
        out[head_dst].addcmul_(wk[head], G[head])
        out[tail_dst].addcmul_(wk[tail], G[tail])
    return out


#: Up to this many entries per operand, row dot products go through torch.linalg.vecdot,
#: which writes an elementwise-product temporary but runs 1.3-2x faster than einsum's
#: batched dots (measured at 306 x 306 and 2048 x 256); above it, einsum (no temporary).
ROWDOT_TEMP_MAX = 1 << 22


def _rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.numel() <= ROWDOT_TEMP_MAX:
        return torch.linalg.vecdot(a, b, dim=1)
    return torch.einsum("ij,ij->i", a, b)


def factor_grad(
    G: torch.Tensor, P: torch.Tensor, offsets: Sequence[int], acc: torch.Tensor | None = None
) -> torch.Tensor:
    """Gradient of ``<G, W @ P>`` with respect to the values ``w``.

    ``grad[i, k] = <G[i], P[(i + d_k) mod N]>``; added into ``acc`` when given
    (column panels add their share of the sum over columns).
    """
    n = G.shape[0]
    grad = torch.zeros((n, len(offsets)), dtype=G.dtype, device=G.device) if acc is None else acc
    grad[:, 0] += _rowdot(G, P)
    for k in range(1, len(offsets)):
        head, head_src, tail, tail_src = _split(n, int(offsets[k]))
        grad[head, k] += _rowdot(G[head], P[head_src])
        grad[tail, k] += _rowdot(G[tail], P[tail_src])
    return grad


def _column_index(n: int, offsets: Sequence[int], device: torch.device) -> torch.Tensor:
    rows = torch.arange(n, device=device)[:, None]
    return (rows + torch.as_tensor(list(offsets), device=device)[None, :]) % n


def factor_to_dense(w: torch.Tensor, offsets: Sequence[int]) -> torch.Tensor:
    """The factor as a dense ``N x N`` matrix (used for the rightmost factor and for tests)."""
    n = w.shape[0]
    dense = torch.zeros((n, n), dtype=w.dtype, device=w.device)
    # scatter_add_ rather than scatter_: with N < 2^(K-1) two offsets never coincide,
    # but summing keeps the meaning right for any offset list.
    dense.scatter_add_(1, _column_index(n, offsets, w.device), w)
    return dense


def chord_product(ws: torch.Tensor, offsets: Sequence[int]) -> torch.Tensor:
    """Dense product ``W1 @ ... @ WM`` of the factor stack ``ws`` (shape ``(M, N, K)``)."""
    P = factor_to_dense(ws[-1], offsets)
    for m in range(ws.shape[0] - 2, -1, -1):
        P = apply_factor(ws[m], offsets, P)
    return P


def apply_product(ws: torch.Tensor, offsets: Sequence[int], B: torch.Tensor) -> torch.Tensor:
    """``(W1 @ ... @ WM) @ B`` for a block ``B`` of shape ``(N, c)`` in ``O(M K N c)``."""
    out = B
    for m in range(ws.shape[0] - 1, -1, -1):
        out = apply_factor(ws[m], offsets, out)
    return out


def apply_product_t(ws: torch.Tensor, offsets: Sequence[int], B: torch.Tensor) -> torch.Tensor:
    """``(W1 @ ... @ WM).T @ B`` in ``O(M K N c)``."""
    out = B
    for m in range(ws.shape[0]):
        out = apply_factor_t(ws[m], offsets, out)
    return out


def loss_and_grad(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Objective ``0.5 * ||X - W1 ... WM||_F^2`` and its exact gradient.

    Forward: the partial products ``P_m = W_m ... W_M`` are built right to
    left and kept (``M - 1`` dense buffers).  Backward: with
    ``G_1 = P_1 - X`` and ``G_{m+1} = W_m^T G_m``, the gradient of factor
    ``m`` is ``factor_grad(G_m, P_{m+1})``; for the last factor
    ``P_{M+1} = I`` so it is a gather of ``G_M`` on the Chord positions.

    Returns
    -------
    loss : 0-d tensor
    grad : tensor shaped like ``ws``
    """
    n_factors = ws.shape[0]
    partials = [factor_to_dense(ws[-1], offsets)]  # partials[j] = P_{M-j}
    for m in range(n_factors - 2, -1, -1):
        partials.append(apply_factor(ws[m], offsets, partials[-1]))
    G = partials.pop()  # P_1, reused in place as the residual
    G.sub_(X)
    flat = G.reshape(-1)
    loss = 0.5 * torch.dot(flat, flat)
    grad = torch.empty_like(ws)
    for m in range(n_factors - 1):
        right = partials.pop()  # P_{m+2} in 1-based terms: what W_{m+1} multiplies
        grad[m] = factor_grad(G, right, offsets)
        del right
        G = apply_factor_t(ws[m], offsets, G)
    idx = _column_index(ws.shape[1], offsets, ws.device)
    grad[-1] = torch.gather(G, 1, idx)
    return loss, grad


def loss_and_grad_dense(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same objective and gradient as :func:`loss_and_grad`, through dense factors.

    ``O(M N^3)`` work in about ``4M`` BLAS calls instead of ``O(M K N^2)`` in
    about ``5MK`` small kernels: for small ``N`` the per-call overhead
    dominates and this path is several times faster (the solver picks it
    below ``DENSE_MAX_N``).  Never used for large ``N``.
    """
    n_factors, n, k = ws.shape
    idx = _column_index(n, offsets, ws.device).expand(n_factors, n, k)
    dense = torch.zeros((n_factors, n, n), dtype=ws.dtype, device=ws.device)
    dense.scatter_add_(2, idx, ws)
    # suffix[m] = D_{m+1} ... D_{M-1} (identity for the last), built right to left
    suffix = [None] * n_factors
    acc = None
    for m in range(n_factors - 1, -1, -1):
        suffix[m] = acc
        acc = dense[m] if acc is None else dense[m] @ acc
    G = acc - X
    flat = G.reshape(-1)
    loss = 0.5 * torch.dot(flat, flat)
    grads = torch.empty_like(dense)
    left_t = G  # (D_0 ... D_{m-1})^T G, updated left to right
    for m in range(n_factors):
        grads[m] = left_t if suffix[m] is None else left_t @ suffix[m].T
        if m + 1 < n_factors:
            left_t = dense[m].T @ left_t
    return loss, torch.gather(grads, 2, idx)


#: Up to this N the dense-factor path is used: fewer, larger BLAS calls win there.
DENSE_MAX_N = 200
#: Column-block width of the CPU path for larger N (blocks stay in cache).
PANEL = 256
#: Up to this N the CPU path takes all columns as one block: a second, narrow block
#: (306 = 256 + 50) costs as many small kernel calls as a full one for little work.
SINGLE_PANEL_MAX_N = 448


def panel_width(n: int) -> int:
    """Column-block width of the CPU path: all of ``n`` up to :data:`SINGLE_PANEL_MAX_N`,
    else equal blocks of at most :data:`PANEL` columns (no narrow remainder block).

    Examples
    --------
    >>> panel_width(306), panel_width(600), panel_width(2048)
    (306, 200, 256)
    """
    if n <= SINGLE_PANEL_MAX_N:
        return n
    count = -(-n // PANEL)
    return -(-n // count)


def select_kernel(n: int, device_type: str):
    """The loss+gradient routine for an ``n x n`` fit on a device, and its name.

    Small N: dense factors (BLAS).  CPU: column panels (cache-resident, small
    workspace).  GPU: whole-matrix shifted adds (large kernels keep the GPU busy).
    """
    if n <= DENSE_MAX_N:
        return loss_and_grad_dense, "dense"
    if device_type == "cpu":
        return loss_and_grad_panels, "panels"
    return loss_and_grad, "shifts"


def workspace_numbers(n: int, n_factors: int, kind: str) -> int:
    """Numbers of scratch memory a kernel needs for one evaluation (beyond X and the parameters).

    Block buffers, plus the row-dot temporary of at most :data:`ROWDOT_TEMP_MAX` numbers.
    """
    if kind == "panels":
        block = n * panel_width(n)
        return (n_factors + 2) * block + min(block, ROWDOT_TEMP_MAX)
    if kind == "dense":
        return (3 * n_factors + 2) * n * n
    return (n_factors + 2) * n * n + min(n * n, ROWDOT_TEMP_MAX)


def _first_factor_panel(w: torch.Tensor, offsets: Sequence[int], j0: int, j1: int, out: torch.Tensor):
    """Columns ``j0:j1`` of the rightmost factor, and the (row, k) index pairs they hold.

    Column ``j`` holds ``w[(j - d_k) mod N, k]`` at row ``(j - d_k) mod N``.
    """
    n, k = w.shape
    width = j1 - j0
    offs = torch.as_tensor(list(offsets), device=w.device)
    cols = torch.arange(j0, j1, device=w.device)
    rows = (cols[None, :] - offs[:, None]) % n  # (K, width)
    ks = torch.arange(k, device=w.device)[:, None].expand(k, width)
    local = torch.arange(width, device=w.device).expand(k, width)
    out.zero_()
    out.index_put_((rows, local), w[rows, ks], accumulate=True)
    return rows, ks, local


def loss_and_grad_panels(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor, panel: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same objective and gradient as :func:`loss_and_grad`, one block of columns at a time.

    Columns of the product are independent: ``P[:, J] = W1 (W2 (... WM[:, J]))``
    and the residual, the backward pass and each factor's gradient (a sum
    over columns) split the same way.  Working on ``N x panel`` blocks keeps
    the ``M`` partial products of a block in cache instead of streaming
    ``M`` dense ``N x N`` buffers through memory, and cuts the workspace from
    ``(M + 2) N^2`` to ``(M + 2) N * panel`` numbers — what lets large ``N``
    fit.  The buffers are allocated once per call and reused by every block.
    """
    n_factors, n, _ = ws.shape
    width = panel_width(n) if panel is None else min(panel, n)
    bufs = [torch.empty((n, width), dtype=ws.dtype, device=ws.device) for _ in range(n_factors + 1)]
    grad = torch.zeros_like(ws)
    loss = torch.zeros((), dtype=ws.dtype, device=ws.device)
    for j0 in range(0, n, width):
        j1 = min(n, j0 + width)
        views = [b[:, : j1 - j0] for b in bufs]
        rows, ks, local = _first_factor_panel(ws[-1], offsets, j0, j1, views[0])
        partials = [views[0]]
        for i, m in enumerate(range(n_factors - 2, -1, -1)):
            partials.append(apply_factor(ws[m], offsets, partials[-1], out=views[i + 1]))
        G = partials.pop()
        G.sub_(X[:, j0:j1])
        flat = G.reshape(-1)
        loss += 0.5 * torch.dot(flat, flat)
        spare = views[n_factors]
        for m in range(n_factors - 1):
            factor_grad(G, partials.pop(), offsets, acc=grad[m])
            G, spare = apply_factor_t(ws[m], offsets, G, out=spare), G
        grad[-1].index_put_((rows, ks), G[rows, local], accumulate=True)
    return loss, grad
