"""Tensor kernels of SF with the butterfly support (the FAµST toolbox's structure).

``N`` is a power of two and there are ``M = log2 N`` factors.  Factor ``m``
is stored as its values ``w`` of shape ``(N, 2)``: row ``i`` holds
``W[i, i] = w[i, 0]`` and ``W[i, i XOR 2^m] = w[i, 1]``.  The stack of
factors is one tensor ``ws`` of shape ``(M, N, 2)`` and the product is
``W_0 @ W_1 @ ... @ W_{M-1}`` (``ws[0]`` applied last, on the left, as for
the Chord kernels in :mod:`._kernels`): the leftmost factor pairs
neighbouring rows, the rightmost rows ``N/2`` apart.  This is FAµST's order
reversed; since ``W_m^T`` has the support of ``W_m``, ``X`` is a product in
one order exactly when ``X^T`` is one in the other.

Pairing row ``i`` with row ``i XOR s`` (``s = 2^m``) is a reshape: with the
rows of a block viewed as ``(N / 2s, 2, s)``, ``i = a 2s + b s + r`` and
``i XOR s`` flips ``b``, so ``swap_m(B) = B.view(N // (2 s), 2, s, -1).flip(1)``
and ``W_m @ B = v0 * B + v1 * swap_m(B)`` (``v0, v1`` the two value columns,
broadcast over the columns of ``B``).  The kernels never materialise the
flip: they add ``v1`` times the *other* half into each half with
``addcmul_`` on the two half views, so applying a factor costs ``O(N c)``
for a block of ``c`` columns, ``O(N^2)`` for the whole product, and needs no
buffer beyond its output — no dense ``N x N`` mask and no ``N x N x N``
object is ever formed.  All functions are pure: tensors in, tensors out.
"""

from __future__ import annotations

import functools

import torch

__all__ = [
    "apply_factor",
    "apply_factor_t",
    "factor_grad",
    "factor_to_dense",
    "butterfly_product",
    "apply_product",
    "apply_product_t",
    "loss_and_grad",
    "select_kernel",
    "workspace_numbers",
]


def _halves(T: torch.Tensor, m: int) -> torch.Tensor:
    """``T`` (``N`` rows) as ``(N / 2s, 2, s, c)``: ``[:, 0]`` and ``[:, 1]`` are the rows paired by factor ``m``."""
    s = 1 << m
    return T.view(T.shape[0] // (2 * s), 2, s, -1)


def _pairs(T: torch.Tensor, m: int) -> torch.Tensor:
    """:func:`_halves` of a tensor only read (copied first if its strides forbid the view)."""
    s = 1 << m
    return T.reshape(T.shape[0] // (2 * s), 2, s, -1)


def _value(w: torch.Tensor, k: int, m: int) -> torch.Tensor:
    """Value column ``k`` of factor ``m`` shaped ``(N / 2s, 2, s, 1)`` to broadcast over a block's halves."""
    return _pairs(w[:, k], m)


def _block_like(T: torch.Tensor) -> torch.Tensor:
    # Row-major on purpose: an elementwise result may copy T's strides (e.g. a transposed
    # block), and the half views of the output must be views.
    return torch.empty(T.shape, dtype=T.dtype, device=T.device)


def apply_factor(w: torch.Tensor, m: int, P: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Return ``W_m @ P``: ``out[i] = w[i, 0] P[i] + w[i, 1] P[i XOR 2^m]``.

    ``P`` has ``N`` rows and any number of columns.  ``out`` (contiguous,
    shaped like ``P``, not overlapping it) is reused when given.
    """
    out = torch.mul(P, w[:, :1], out=_block_like(P) if out is None else out)
    v1, src, dst = _value(w, 1, m), _pairs(P, m), _halves(out, m)
    dst[:, 0].addcmul_(v1[:, 0], src[:, 1])
    dst[:, 1].addcmul_(v1[:, 1], src[:, 0])
    return out


def apply_factor_t(w: torch.Tensor, m: int, G: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Return ``W_m.T @ G = v0 * G + swap_m(v1 * G)``: ``out[j] = w[j, 0] G[j] + w[j^s, 1] G[j^s]``."""
    out = torch.mul(G, w[:, :1], out=_block_like(G) if out is None else out)
    v1, src, dst = _value(w, 1, m), _pairs(G, m), _halves(out, m)
    dst[:, 0].addcmul_(v1[:, 1], src[:, 1])
    dst[:, 1].addcmul_(v1[:, 0], src[:, 0])
    return out


def _rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # einsum lowers to a batched dot product: no N x c temporary, unlike (a * b).sum(1).
    return torch.einsum("ic,ic->i", a, b)


def factor_grad(
    G: torch.Tensor,
    P: torch.Tensor,
    m: int,
    acc: torch.Tensor | None = None,
    work: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gradient of ``<G, W_m @ P>`` with respect to the values ``w`` of factor ``m``.

    ``grad[i, 0] = <G[i], P[i]>`` (row sums of ``G * P``) and
    ``grad[i, 1] = <G[i], P[i XOR 2^m]>`` (row sums of ``G * swap_m(P)``,
    taken half by half); added into ``acc`` when given (column panels add
    their share).  ``work``, a flat buffer of at least ``N c / 2`` numbers,
    holds the half products: a product into a reused buffer and a row sum
    beat a batched dot over the strided half views, which copies both
    operands (measured on CPU).
    """
    n, c = G.shape
    grad = torch.zeros((n, 2), dtype=G.dtype, device=G.device) if acc is None else acc
    grad[:, 0] += _rowdot(G, P)
    g, p = _pairs(G, m), _pairs(P, m)
    half = g[:, 0].shape
    if work is None:
        work = torch.empty(n * c // 2, dtype=G.dtype, device=G.device)
    tmp = work[: n * c // 2].view(half)
    g1 = grad[:, 1].view(half[0], 2, half[1])  # grad[i, 1] by (block, half, row within the half)
    g1[:, 0] += torch.mul(g[:, 0], p[:, 1], out=tmp).sum(-1)
    g1[:, 1] += torch.mul(g[:, 1], p[:, 0], out=tmp).sum(-1)
    return grad


def _factor_columns(w: torch.Tensor, m: int, j0: int, j1: int, out: torch.Tensor):
    """Columns ``j0:j1`` of factor ``m`` as a dense ``N x (j1 - j0)`` block, written into ``out``.

    Column ``j`` holds ``w[j, 0]`` at row ``j`` and ``w[j XOR 2^m, 1]`` at
    row ``j XOR 2^m``.  Returns the column indices, their partners and the
    local column numbers (what the gradient of this factor gathers).
    """
    cols = torch.arange(j0, j1, device=w.device)
    partner = cols ^ (1 << m)
    local = cols - j0
    out.zero_()
    out[cols, local] = w[cols, 0]
    out[partner, local] = w[partner, 1]
    return cols, partner, local


def factor_to_dense(w: torch.Tensor, m: int) -> torch.Tensor:
    """Factor ``m`` as a dense ``N x N`` matrix (for tests and the rightmost factor)."""
    n = w.shape[0]
    dense = torch.empty((n, n), dtype=w.dtype, device=w.device)
    _factor_columns(w, m, 0, n, dense)
    return dense


def butterfly_product(ws: torch.Tensor) -> torch.Tensor:
    """Dense product ``W_0 @ ... @ W_{M-1}`` of the stack ``ws`` (shape ``(M, N, 2)``), ``O(M N^2)``.

    Examples
    --------
    >>> import torch
    >>> ws = torch.ones((2, 4, 2))  # H_2 = [[1, 1], [1, -1]] on the rows paired by each factor:
    >>> ws[0, 1::2, 0] = ws[1, 2:, 0] = -1.0  # v0 = -1 where bit m of the row is set
    >>> butterfly_product(ws).int().tolist()  # the 4 x 4 Walsh-Hadamard matrix H_2 ⊗ H_2
    [[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]
    """
    P = factor_to_dense(ws[-1], ws.shape[0] - 1)
    for m in range(ws.shape[0] - 2, -1, -1):
        P = apply_factor(ws[m], m, P)
    return P


def apply_product(ws: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``(W_0 @ ... @ W_{M-1}) @ B`` for a block ``B`` of shape ``(N, c)`` in ``O(M N c)``."""
    out = B
    for m in range(ws.shape[0] - 1, -1, -1):
        out = apply_factor(ws[m], m, out)
    return out


def apply_product_t(ws: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``(W_0 @ ... @ W_{M-1}).T @ B`` in ``O(M N c)``."""
    out = B
    for m in range(ws.shape[0]):
        out = apply_factor_t(ws[m], m, out)
    return out


def loss_and_grad(
    ws: torch.Tensor, X: torch.Tensor, panel: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Objective ``0.5 * ||X - W_0 ... W_{M-1}||_F^2`` and its exact gradient, by hand.

    Forward, per block of columns ``J``: the partial products
    ``P_m = W_m ... W_{M-1}`` restricted to ``J`` are built right to left,
    starting from the columns of the rightmost factor, and kept.  Backward:
    with ``G_0 = P_0 - X[:, J]`` and ``G_{m+1} = W_m^T G_m``, factor ``m``'s
    gradient is :func:`factor_grad` of ``G_m`` and ``P_{m+1}``; for the
    rightmost factor ``P_M = I`` and it is a gather of ``G_{M-1}`` at the
    factor's positions.  Columns are independent, so the loss and the
    gradients are sums over blocks.

    Parameters
    ----------
    ws : tensor of shape (M, N, 2)
    X : tensor of shape (N, N)
    panel : int or None, default=None
        Block width.  None: the whole matrix at once (``M + 1`` dense
        ``N x N`` buffers; what a GPU wants).  On the CPU blocks of 256
        columns keep the ``M`` partial products in cache and cut the
        workspace to ``(M + 1) N * panel`` numbers.

    Returns
    -------
    loss : 0-d tensor
    grad : tensor shaped like ``ws``
    """
    n_factors, n, _ = ws.shape
    width = n if panel is None else max(1, min(panel, n))
    storage = [torch.empty(n * width, dtype=ws.dtype, device=ws.device) for _ in range(n_factors + 1)]
    work = torch.empty(n * width // 2, dtype=ws.dtype, device=ws.device)  # factor_grad's half products
    grad = torch.zeros_like(ws)
    loss = torch.zeros((), dtype=ws.dtype, device=ws.device)
    last = n_factors - 1
    for j0 in range(0, n, width):
        j1 = min(n, j0 + width)
        # Contiguous views of the flat buffers, also for a narrower last block.
        bufs = [s[: n * (j1 - j0)].view(n, j1 - j0) for s in storage]
        cols, partner, local = _factor_columns(ws[last], last, j0, j1, bufs[0])
        partials = [bufs[0]]
        for i, m in enumerate(range(last - 1, -1, -1)):
            partials.append(apply_factor(ws[m], m, partials[-1], out=bufs[i + 1]))
        G = partials.pop()  # P_0, reused in place as the residual
        G.sub_(X[:, j0:j1])
        flat = G.reshape(-1)
        loss += 0.5 * torch.dot(flat, flat)
        spare = bufs[n_factors]
        for m in range(last):
            factor_grad(G, partials.pop(), m, acc=grad[m], work=work)
            G, spare = apply_factor_t(ws[m], m, G, out=spare), G
        # d/dw[j, 0] = G[j, j] and d/dw[j^s, 1] = G[j^s, j]: each is in exactly one block.
        grad[last, cols, 0] = G[cols, local]
        grad[last, partner, 1] = G[partner, local]
    return loss, grad


#: Column-block width of the CPU path (blocks stay in cache).
PANEL = 256


def select_kernel(device_type: str):
    """The butterfly loss+gradient routine for a device, and its name.

    CPU: column panels (``"butterfly-panels"``); GPU: the whole matrix at
    once (``"butterfly"``: large kernels keep the GPU busy).
    """
    if device_type == "cpu":
        return functools.partial(loss_and_grad, panel=PANEL), "butterfly-panels"
    return loss_and_grad, "butterfly"


def workspace_numbers(n: int, n_factors: int, kind: str) -> int:
    """Numbers of scratch memory one evaluation needs (beyond X and the parameters).

    ``M + 1`` block buffers, half a block for :func:`factor_grad`'s products,
    and half a block of slack for temporaries: ``(M + 2) N w`` with ``w``
    the block width (256 on the CPU, ``N`` on a GPU).
    """
    width = min(PANEL, n) if kind == "butterfly-panels" else n
    return (n_factors + 2) * n * width
