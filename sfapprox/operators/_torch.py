"""Fitted surrogates as trainable torch layers: drop-in replacements for ``nn.Linear(N, N, bias=False)``.

:class:`ChordLinear` applies ``A = W_1 ... W_M`` (SF factors of any
support) and :class:`HybridLinear` ``A + U diag(s) V^T + S`` to the last
dimension of their input, ``y = x @ A.T``, as ``nn.Linear`` does with its
weight; :class:`SparseLinear`, :class:`NystromLinear`, :class:`MonarchLinear`,
:class:`MonarchLowRankLinear` and :class:`PaddedButterflyLinear` do the same
for the other kinds, each in what it stores per vector (never an ``N x N``
weight).  All values are ``nn.Parameter``: gradients reach them (and the
input), so a fitted surrogate can replace a dense weight and be fine-tuned;
the positions (the support, the sparse part's indices) are fixed buffers that
move with ``.to(device)``.  Built by each operator's ``to_torch``;
``to_operator()`` goes back.

Each factor runs the fitting kernels (:mod:`sfapprox.sf._kernels`, :mod:`sfapprox.sf._butterfly`:
``K`` shifted multiply-adds over the ``N x batch`` block, large kernels
that suit a GPU) inside a :class:`torch.autograd.Function` whose backward
is the transposed apply and the kernels' exact value gradient:
``O(batch N K)`` time per factor and one ``N x batch`` block kept per
factor for backward; no ``N x N`` matrix and no ``batch x N x K`` gather is
formed (measured 2-7x faster forward and 1-10x faster forward + backward than
a gather-and-sum on the CPU; ``benchmarks/apply.py``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from .._errors import ParameterError
from ..chord import support_offsets
from ..formats import shape_text
from ..sf import _butterfly, _kernels
from ._base import operator_class

__all__ = ["ChordLinear", "HybridLinear", "SparseLinear", "NystromLinear", "MonarchLinear", "MonarchLowRankLinear",
           "PaddedButterflyLinear", "TransposedLinear"]


def _placement(dtype, device) -> tuple[torch.dtype, torch.device | None]:
    """The parameters' dtype and device, checked: a floating torch dtype (or its name, ``"float32"``;
    None: torch's default) and a device :func:`~sfapprox._device.resolve_device` takes (None: the CPU).

    torch's own AssertionError ("Torch not compiled with CUDA enabled"), TypeError and RuntimeError
    came out of ``to_torch(device="cuda")`` on a machine without a GPU and of a dtype that was not one.
    """
    from .._device import resolve_device

    asked = dtype
    if dtype is None:
        dtype = torch.get_default_dtype()
    elif isinstance(dtype, str) and isinstance(getattr(torch, dtype.strip().lower(), None), torch.dtype):
        dtype = getattr(torch, dtype.strip().lower())
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ParameterError(f"dtype={asked!r} must be a floating-point torch dtype (torch.float32, torch.float64, "
                             "...) or its name")
    if device is not None:
        try:  # any device torch knows ("cpu:0", "meta", "mps"); a CUDA one checked for its GPU
            named = torch.device(device)
        except (RuntimeError, TypeError, ValueError):
            named = None
        if named is None or named.type == "cuda" or str(device).strip().lower() == "auto":
            device = resolve_device(str(device))
    return dtype, device


def _check_operand(x, n: int) -> None:
    """A layer's input: a tensor whose last dimension is ``N`` (a 0-d one was torch's IndexError)."""
    if not torch.is_tensor(x):
        raise ParameterError(f"expected a torch tensor with last dimension {n:,}, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != n:
        raise ParameterError(f"expected input with last dimension {n:,}, got shape {shape_text(x.shape)}")


class _Factor(torch.autograd.Function):
    """``W @ P`` (``W.T @ P`` with ``transpose``) for one factor, ``P`` (N, b): ``kernels`` is the
    fitting-kernel module of its support (:mod:`sfapprox.sf._kernels` with ``key`` the offsets, 0 first,
    and values (N, K); or :mod:`sfapprox.sf._butterfly` with ``key`` the factor's index ``m`` and values
    (N, 2)).  The backward is the other apply and the kernels' exact value gradient: ``<G, W.T P>`` is
    ``<P, W G>``, so the transpose's value gradient is the forward's with ``G`` and ``P`` swapped."""

    @staticmethod
    def forward(ctx, w, P, key, kernels, transpose=False):
        ctx.save_for_backward(w, P)
        ctx.key, ctx.kernels, ctx.transpose = key, kernels, transpose
        return (kernels.apply_factor_t if transpose else kernels.apply_factor)(w, key, P)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, G):
        w, P = ctx.saved_tensors
        G = G.contiguous()
        kernels, key = ctx.kernels, ctx.key
        grad_w = grad_P = None
        if ctx.needs_input_grad[0]:
            grad_w = kernels.factor_grad(P, G, key) if ctx.transpose else kernels.factor_grad(G, P, key)
        if ctx.needs_input_grad[1]:
            grad_P = (kernels.apply_factor if ctx.transpose else kernels.apply_factor_t)(w, key, G)
        return grad_w, grad_P, None, None, None


def _columns(n: int, n_factors: int, offsets, support: str) -> torch.Tensor:
    """Column of every value: ``(N, K)`` for offset supports (shared by the factors), ``(M, N, 2)`` for the butterfly."""
    rows = torch.arange(n)
    if support == "butterfly":
        return torch.stack([torch.stack([rows, rows ^ (1 << m)], dim=1) for m in range(n_factors)])
    offs = torch.as_tensor(np.asarray(offsets, dtype=np.int64))
    return (rows[:, None] + offs[None, :]) % n


class _Layer(nn.Module):
    """What the layers share: the input read as ``(batch, n)`` rows in the promoted dtype, the dense weight
    by applying the layer to the identity, and the transpose (:meth:`transposed`, applied by each layer's
    :meth:`forward_transposed`)."""

    n: int

    def _rows(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """``x`` checked and as rows ``(b, n)``, in the dtype ``x`` and the parameter ``like`` promote to (as
        :class:`HybridLinear`: a float64 input to float32 parameters computes in float64)."""
        _check_operand(x, self.n)
        return x.reshape(-1, self.n).to(torch.promote_types(x.dtype, like.dtype))

    def dense_weight(self) -> torch.Tensor:
        """``A`` as an ``n x n`` tensor (differentiable; ``O(n^2)`` memory)."""
        param = next(self.parameters())
        return self(torch.eye(self.n, dtype=param.dtype, device=param.device)).T

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., n)``): the transpose's forward, in what
        the layer stores and at its forward's cost."""
        raise NotImplementedError

    def transposed(self) -> "TransposedLinear":
        """A module applying ``A.T`` (``module(x) == x @ A``) that shares this layer's parameters.

        Returns
        -------
        TransposedLinear
            Training either module trains both; ``.transposed()`` of it is this layer again.
        """
        return TransposedLinear(self)


class ChordLinear(_Layer):
    """``y = x @ A.T`` with ``A = W_1 @ ... @ W_M`` held as its SF factor values.

    Parameters
    ----------
    values : array_like of shape (M, N, K)
        Factor values, as :attr:`sfapprox.operators.ChordOperator.values`
        (``values[0]`` is the leftmost factor).
    offsets : array_like of shape (K,), optional
        Offsets of an offset-based support (default: the support's own);
        left out for the butterfly.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
    dtype : torch.dtype, optional
        Parameter dtype (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Default: CPU.

    Attributes
    ----------
    values : nn.Parameter of shape (M, N, K)
    columns : buffer of int64
        Column of each value: ``(N, K)`` for offset supports, ``(M, N, 2)``
        for the butterfly.

    Examples
    --------
    >>> import torch
    >>> layer = ChordLinear(torch.full((3, 8, 4), 0.25), dtype=torch.float64)
    >>> layer(torch.ones(2, 8, dtype=torch.float64)).tolist()[0] == [1.0] * 8
    True
    >>> sum(p.numel() for p in layer.parameters())
    96
    """

    # its buffer, typed for type checkers (nn.Module's __getattr__ is typed Tensor | Module)
    columns: torch.Tensor

    def __init__(self, values, offsets=None, *, support: str = "chord", dtype=None, device=None):
        super().__init__()

        dtype, device = _placement(dtype, device)
        # np.array copies: ChordOperator.values is a read-only view (torch warns on those).
        values = values if torch.is_tensor(values) else torch.from_numpy(np.array(values, dtype=np.float64))
        n_factors, n, _ = values.shape
        if support != "butterfly" and offsets is None:
            offsets = support_offsets(n, support)
        self.support = support
        self.offsets = None if support == "butterfly" else np.asarray(offsets, dtype=np.int64)
        # A contiguous copy: ChordOperator.values is a strided view of the apply kernels' layout.
        self.values = nn.Parameter(
            values.detach().to(device=device, dtype=dtype, copy=True, memory_format=torch.contiguous_format)
        )
        self.register_buffer("columns", _columns(n, n_factors, self.offsets, support).to(device))
        self._shift_order = self._shift_offsets = None
        if support != "butterfly":
            reduced = self.offsets % n
            zeros = np.flatnonzero(reduced == 0)
            if zeros.size:
                order = np.concatenate([zeros[:1], np.delete(np.arange(reduced.size), zeros[0])])
                self._shift_offsets = reduced[order].tolist()
                self._shift_order = slice(None) if (order == np.arange(order.size)).all() else order.tolist()

    @property
    def n(self) -> int:
        return self.values.shape[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T`` over the last dimension of ``x`` (shape ``(..., N)``)."""
        return self._chain(x, transpose=False)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., N)``): ``W_M.T ... W_1.T`` applied to
        the columns, each factor by the same kernels as the forward (the same cost)."""
        return self._chain(x, transpose=True)

    def _chain(self, x: torch.Tensor, transpose: bool) -> torch.Tensor:
        """The factors applied to the columns of ``x``: ``A x^T`` (rightmost factor first) or, with
        ``transpose``, ``A.T x^T`` (``W_1.T`` first)."""
        _check_operand(x, self.n)
        # Columns of a block: (..., N) -> (N, b). In the promoted dtype, input and values alike (a float32
        # input to a float64 layer crashed in backward, the butterfly returned float32, an integer input
        # crashed it).
        dtype = torch.promote_types(x.dtype, self.values.dtype)
        P = x.reshape(-1, self.n).T.to(dtype).contiguous()
        n_factors = self.values.shape[0]
        for m in (range(n_factors) if transpose else range(n_factors - 1, -1, -1)):
            P = self._factor(m, P, transpose)
        return P.T.reshape(x.shape)

    def _factor(self, m: int, P: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        w = self.values[m].to(P.dtype)
        if self.support == "butterfly":
            return _Factor.apply(w, P, m, _butterfly, transpose)
        if self._shift_order is not None:  # the kernels want offset 0 first
            return _Factor.apply(w[:, self._shift_order], P, self._shift_offsets, _kernels, transpose)
        # No zero offset (a hand-made support): gather K entries per row and sum, or (the transpose) send
        # each row's K products to their columns.
        if not transpose:
            return torch.einsum("nkb,nk->nb", P[self.columns], w)
        sent = (w[:, :, None] * P[:, None, :]).reshape(-1, P.shape[1])
        return torch.zeros_like(P).index_add(0, self.columns.reshape(-1), sent)

    def dense_weight(self) -> torch.Tensor:
        """``A`` as an ``N x N`` tensor (differentiable; ``O(N^2)`` memory)."""
        eye = torch.eye(self.n, dtype=self.values.dtype, device=self.values.device)
        return self(eye).T  # row j of eye @ A.T is column j of A

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.ChordOperator` (float64, on the CPU)."""
        values = self.values.detach().to(device="cpu", dtype=torch.float64).numpy()
        # Through the registry: this module is imported by the operator's to_torch, not the other way.
        return operator_class("chord")(values, self.offsets, support=self.support)

    def extra_repr(self) -> str:
        m, n, k = self.values.shape
        return f"n={n}, n_factors={m}, values_per_row={k}, support={self.support!r}"


class HybridLinear(_Layer):
    """``y = x @ (A + U diag(s) V^T + S).T``: Chord factors plus low-rank and sparse corrections.

    Parameters
    ----------
    n : int
        Order of the matrix.
    chord : ChordLinear or None
    U, s, Vt : tensors of shape (N, r), (r,), (r, N)
    rows, cols, vals : tensors of shape (nnz,)
        The sparse part's positions (fixed buffers) and values (a parameter).
    count_indices : bool, default=False
        Carried back by :meth:`to_operator` (stored-number accounting).
    singular_values : bool, default=True
        Whether ``s`` is stored (``U diag(s) V^T``); False: the low-rank part is
        ``U V^T`` (NMF's ``W H``), ``s`` a fixed buffer of ones, and
        :meth:`to_operator` counts ``2 N r`` numbers as the surrogate did.
    dtype, device : optional
        As :class:`ChordLinear`.

    Examples
    --------
    >>> import torch
    >>> layer = HybridLinear(4, U=torch.ones(4, 1), s=torch.ones(1), Vt=torch.ones(1, 4),
    ...                      rows=torch.tensor([0]), cols=torch.tensor([1]), vals=torch.tensor([2.0]))
    >>> layer(torch.tensor([1.0, 2.0, 0.0, 0.0])).tolist()
    [7.0, 3.0, 3.0, 3.0]
    """

    # its position buffers, typed for type checkers (nn.Module's __getattr__ is typed Tensor | Module)
    rows: torch.Tensor
    cols: torch.Tensor

    def __init__(self, n: int, *, chord: ChordLinear | None = None, U, s, Vt, rows, cols, vals,
                 count_indices: bool = False, singular_values: bool = True, dtype=None, device=None):
        super().__init__()
        dtype, device = _placement(dtype, device)

        def param(a):
            return nn.Parameter(torch.as_tensor(a).detach().to(device=device, dtype=dtype, copy=True))

        self.n = int(n)
        self.count_indices = bool(count_indices)  # budget accounting only, kept for to_operator()
        self.singular_values = bool(singular_values)  # (budget accounting, kept for to_operator())
        self.chord = None if chord is None else chord.to(dtype=dtype, device=device)
        self.U, self.Vt = param(U), param(Vt)
        if self.singular_values:
            self.s = param(s)
        else:  # U V^T: no values of its own to train (or count)
            self.register_buffer("s", torch.ones(self.U.shape[1], dtype=dtype, device=device))
        self.register_buffer("rows", torch.as_tensor(rows, dtype=torch.int64).to(device))
        self.register_buffer("cols", torch.as_tensor(cols, dtype=torch.int64).to(device))
        self.vals = param(vals)

    @classmethod
    def from_operator(cls, op, *, dtype=None, device=None) -> HybridLinear:
        """The module of a :class:`sfapprox.operators.HybridOperator`."""
        coo = op.sparse.tocoo()
        chord = None if op.chord is None else op.chord.to_torch(dtype=dtype, device=device)
        return cls(op.shape[0], chord=chord, U=op.U, s=op.s, Vt=op.Vt, rows=coo.row.astype(np.int64),
                   cols=coo.col.astype(np.int64), vals=coo.data, count_indices=op.count_indices,
                   singular_values=op.singular_values, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T`` over the last dimension of ``x`` (shape ``(..., N)``)."""
        return self._sum(x, transpose=False)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., N)``): each part's transpose."""
        return self._sum(x, transpose=True)

    def _sum(self, x: torch.Tensor, transpose: bool) -> torch.Tensor:
        """``x @ A.T`` (``x @ A`` with ``transpose``), part by part."""
        _check_operand(x, self.n)
        # In the promoted dtype, as the Chord part computes (float64 input, float32 parameters: float64);
        # a low-rank or sparse surrogate alone raised torch's "expected m1 and m2 to have the same dtype".
        dtype = torch.promote_types(x.dtype, self.U.dtype)
        z = x.reshape(-1, self.n).to(dtype)
        if self.chord is None:
            y = _zero_part(z)
        else:
            y = (self.chord.forward_transposed(z) if transpose else self.chord(z)).to(dtype)
        U, s, Vt = self.U.to(dtype), self.s.to(dtype), self.Vt.to(dtype)
        if s.numel():  # x (U s Vt)^T = ((x Vt^T) s) U^T; x (U s Vt) = ((x U) s) Vt
            y = y + (((z @ U) * s) @ Vt if transpose else ((z @ Vt.T) * s) @ U.T)
        if self.vals.numel():
            # S[r, c] = v: y[:, r] += v * z[:, c]; the transpose: y[:, c] += v * z[:, r]
            into, source = (self.cols, self.rows) if transpose else (self.rows, self.cols)
            y = y.index_add(1, into, z[:, source] * self.vals.to(dtype))
        return y.reshape(x.shape)

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.HybridOperator` (float64, on the CPU)."""
        def host(t):
            return t.detach().to(device="cpu", dtype=torch.float64).numpy()

        sparse = sp.csr_array((host(self.vals), (self.rows.cpu().numpy(), self.cols.cpu().numpy())),
                              shape=(self.n, self.n))
        chord = None if self.chord is None else self.chord.to_operator()
        s = host(self.s) if self.singular_values else None
        return operator_class("hybrid")(self.n, chord=chord, low_rank=(host(self.U), s, host(self.Vt)),
                              sparse=sparse, count_indices=self.count_indices)

    def extra_repr(self) -> str:
        return f"n={self.n}, rank={self.s.numel()}, sparse_entries={self.vals.numel()}"


# =============================================================================== the other kinds
def _parameter(a, dtype, device) -> nn.Parameter:
    """An array (or tensor) as a parameter of its own, copied: an operator's arrays stay as they are (and a
    read-only one, as ChordOperator.values, made torch warn)."""
    a = a if torch.is_tensor(a) else torch.from_numpy(np.array(a, dtype=np.float64))
    return nn.Parameter(a.detach().to(device=device, dtype=dtype, copy=True, memory_format=torch.contiguous_format))


def _zero_part(z: torch.Tensor) -> torch.Tensor:
    """The zeros a surrogate without a part gives for ``z``, with a gradient path to it (``zeros_like`` had
    none: the zero operator's ``backward()`` raised "does not require grad"), and 0 for inf or NaN, as
    ``op @ x`` gives (``z * 0`` alone is NaN there)."""
    return torch.nan_to_num(z * 0, nan=0.0)


def _host(t: torch.Tensor) -> np.ndarray:
    """A parameter's current values as a float64 array on the CPU (what the operators hold)."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


class SparseLinear(_Layer):
    """``y = x @ S.T`` for a sparse ``S``: its values a parameter, its positions fixed buffers.

    Parameters
    ----------
    n : int
        Order of the matrix.
    rows, cols : array_like of int, shape (nnz,)
        The entries' positions.
    vals : array_like, shape (nnz,)
        Their values.
    dtype, device : optional
        As :class:`ChordLinear`.

    Examples
    --------
    >>> import torch
    >>> layer = SparseLinear(3, rows=[0, 2], cols=[1, 1], vals=[2.0, 5.0], dtype=torch.float64)
    >>> layer(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64)).tolist()
    [2.0, 0.0, 5.0]
    """

    # its position buffers, typed for type checkers (nn.Module's __getattr__ is typed Tensor | Module)
    rows: torch.Tensor
    cols: torch.Tensor

    def __init__(self, n: int, *, rows, cols, vals, dtype=None, device=None):
        super().__init__()
        dtype, device = _placement(dtype, device)
        self.n = int(n)
        self.register_buffer("rows", torch.as_tensor(np.asarray(rows), dtype=torch.int64).to(device))
        self.register_buffer("cols", torch.as_tensor(np.asarray(cols), dtype=torch.int64).to(device))
        self.vals = _parameter(vals, dtype, device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ S.T`` over the last dimension of ``x`` (shape ``(..., n)``): one multiply-add per entry."""
        z = self._rows(x, self.vals)
        # S[r, c] = v: y[:, r] += v * z[:, c]
        y = torch.zeros_like(z).index_add(1, self.rows, z[:, self.cols] * self.vals.to(z.dtype))
        return y.reshape(x.shape)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ S`` over the last dimension of ``x`` (shape ``(..., n)``): one multiply-add per entry."""
        z = self._rows(x, self.vals)
        # S[r, c] = v: y[:, c] += v * z[:, r]
        y = torch.zeros_like(z).index_add(1, self.cols, z[:, self.rows] * self.vals.to(z.dtype))
        return y.reshape(x.shape)

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.SparseOperator` (float64, on the CPU)."""
        matrix = sp.csr_array((_host(self.vals), (self.rows.cpu().numpy(), self.cols.cpu().numpy())),
                              shape=(self.n, self.n))
        return operator_class("csr")(matrix)

    def extra_repr(self) -> str:
        return f"n={self.n}, entries={self.vals.numel()}"


class NystromLinear(_Layer):
    """``y = x @ (C core C^T).T``, as three thin products; ``C`` and ``core`` are parameters.

    Both are trained freely, as they are: a step moves ``core`` by its gradient, which is not symmetric
    in general, so a fine-tuned ``core`` (and ``A``) may lose the symmetry, and the positive
    semi-definiteness, that a Nyström fit of a symmetric PSD matrix has.  Where a model needs them,
    restore them after a step (``core.data = (core + core.T) / 2``, then its negative eigenvalues set to
    0), or train a factor ``L`` with ``core = L L^T`` in a module of your own.  (No ``L L^T`` here: a
    fit's ``core`` is a pseudo-inverse, indefinite for a matrix that is not PSD, and a factor of it
    would not give the exported forward bit for bit.)

    Parameters
    ----------
    C : array_like, shape (n, r)
    core : array_like, shape (r, r)
    dtype, device : optional
        As :class:`ChordLinear`.
    """

    def __init__(self, C, core, *, dtype=None, device=None):
        super().__init__()
        dtype, device = _placement(dtype, device)
        self.C, self.core = _parameter(C, dtype, device), _parameter(core, dtype, device)
        self.n = self.C.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T`` over the last dimension of ``x`` (shape ``(..., n)``): ``O(n r)`` per row."""
        z = self._rows(x, self.C)
        C, core = self.C.to(z.dtype), self.core.to(z.dtype)
        return (((z @ C) @ core.T) @ C.T).reshape(x.shape)  # (A z^T)^T = z C core^T C^T

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., n)``): ``O(n r)`` per row."""
        z = self._rows(x, self.C)
        C, core = self.C.to(z.dtype), self.core.to(z.dtype)
        return (((z @ C) @ core) @ C.T).reshape(x.shape)

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.NystromOperator` (float64, on the CPU)."""
        return operator_class("nystrom")(_host(self.C), _host(self.core))

    def extra_repr(self) -> str:
        return f"n={self.n}, rank={self.C.shape[1]}"


class MonarchLinear(_Layer):
    """``y = x @ A.T`` for a block-rank-``r`` Monarch matrix (:class:`~sfapprox.operators.MonarchOperator`).

    Two batched products over the rows padded to ``N' = b1 b2`` (``O(r N' (b1 + b2))`` per row), then
    the first ``n`` outputs; ``left`` and ``right`` are parameters.

    Parameters
    ----------
    left : array_like, shape (b2, b1, b1, r)
    right : array_like, shape (b1, r, b2, b2)
    n : int
        The order, ``n <= b1 b2``.
    dtype, device : optional
        As :class:`ChordLinear`.
    """

    def __init__(self, left, right, n: int, *, dtype=None, device=None):
        super().__init__()
        dtype, device = _placement(dtype, device)
        self.left, self.right = _parameter(left, dtype, device), _parameter(right, dtype, device)
        self.n = int(n)

    @property
    def padded_n(self) -> int:
        """``N' = b1 b2``."""
        return self.left.shape[1] * self.left.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T`` over the last dimension of ``x`` (shape ``(..., n)``)."""
        z = self._rows(x, self.left)
        b2, b1 = self.left.shape[:2]
        padded = torch.nn.functional.pad(z, (0, self.padded_n - self.n)).reshape(-1, b1, b2)  # [., k, l]
        # As MonarchOperator's products: R^(t) block k, then L^(t) block q after the permutation.
        y = torch.einsum("ktql,bkl->bktq", self.right.to(z.dtype), padded)
        out = torch.einsum("qakt,bktq->baq", self.left.to(z.dtype), y)  # output row a b2 + q
        return out.reshape(-1, self.padded_n)[:, : self.n].reshape(x.shape)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., n)``): the two products transposed, in
        the other order (the same cost)."""
        z = self._rows(x, self.left)
        b2, b1 = self.left.shape[:2]
        # A[a b2 + q, k b2 + l] = sum_t left[q, a, k, t] right[k, t, q, l]; the rows padded with zeros
        # (the padded matrix's extra rows are not A's), the columns cropped.
        padded = torch.nn.functional.pad(z, (0, self.padded_n - self.n)).reshape(-1, b1, b2)  # [., a, q]
        y = torch.einsum("qakt,baq->bktq", self.left.to(z.dtype), padded)
        out = torch.einsum("ktql,bktq->bkl", self.right.to(z.dtype), y)  # output column k b2 + l
        return out.reshape(-1, self.padded_n)[:, : self.n].reshape(x.shape)

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.MonarchOperator` (float64, on the CPU)."""
        return operator_class("monarch")(_host(self.left), _host(self.right), self.n)

    def extra_repr(self) -> str:
        b2, b1, _, r = self.left.shape
        return f"n={self.n}, b1={b1}, b2={b2}, rank={r}"


class MonarchLowRankLinear(_Layer):
    """``y = x @ (M + U diag(s) Vt).T``: a :class:`MonarchLinear` (or none) plus a low-rank part.

    Parameters
    ----------
    n : int
    monarch : MonarchLinear or None
    U, s, Vt : array_like of shapes (n, k), (k,), (k, n)
    dtype, device : optional
        As :class:`ChordLinear`.
    """

    def __init__(self, n: int, *, monarch: MonarchLinear | None = None, U, s, Vt, dtype=None, device=None):
        super().__init__()
        dtype, device = _placement(dtype, device)
        self.n = int(n)
        self.monarch = None if monarch is None else monarch.to(dtype=dtype, device=device)
        self.U, self.s, self.Vt = (_parameter(a, dtype, device) for a in (U, s, Vt))

    @classmethod
    def from_operator(cls, op, *, dtype=None, device=None) -> MonarchLowRankLinear:
        """The module of a :class:`sfapprox.operators.MonarchLowRankOperator`."""
        monarch = None if op.monarch is None else op.monarch.to_torch(dtype=dtype, device=device)
        return cls(op.shape[0], monarch=monarch, U=op.U, s=op.s, Vt=op.Vt, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T`` over the last dimension of ``x`` (shape ``(..., n)``)."""
        z = self._rows(x, self.U)
        y = self.monarch(z).to(z.dtype) if self.monarch is not None else _zero_part(z)
        if self.s.numel():
            y = y + ((z @ self.Vt.T.to(z.dtype)) * self.s.to(z.dtype)) @ self.U.T.to(z.dtype)
        return y.reshape(x.shape)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., n)``): each part's transpose."""
        z = self._rows(x, self.U)
        y = self.monarch.forward_transposed(z).to(z.dtype) if self.monarch is not None else _zero_part(z)
        if self.s.numel():
            y = y + ((z @ self.U.to(z.dtype)) * self.s.to(z.dtype)) @ self.Vt.to(z.dtype)
        return y.reshape(x.shape)

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.MonarchLowRankOperator` (float64, on the CPU)."""
        parts = {} if self.monarch is None else {"left": _host(self.monarch.left), "right": _host(self.monarch.right)}
        return operator_class("monarch+lr")(self.n, U=_host(self.U), s=_host(self.s), Vt=_host(self.Vt), **parts)

    def extra_repr(self) -> str:
        return f"n={self.n}, rank={self.s.numel()}"


class PaddedButterflyLinear(_Layer):
    """``y = x @ A.T`` for the leading ``n x n`` block of a butterfly product of order ``N' = 2^L``.

    The rows padded with zeros to ``N'``, a butterfly :class:`ChordLinear` (``O(N' L)`` per row), the
    first ``n`` outputs kept.

    Parameters
    ----------
    values : array_like, shape (L, N', 2)
        The butterfly factors' values.
    n : int
        The order, ``n <= N'``.
    dtype, device : optional
        As :class:`ChordLinear`.

    Attributes
    ----------
    inner : ChordLinear
        The butterfly product of order ``N'``.
    """

    def __init__(self, values, n: int, *, dtype=None, device=None):
        super().__init__()
        self.inner = ChordLinear(values, support="butterfly", dtype=dtype, device=device)
        self.n = int(n)

    @property
    def values(self) -> nn.Parameter:
        """The factor values, shape ``(L, N', 2)`` (the inner layer's parameter)."""
        return self.inner.values

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T`` over the last dimension of ``x`` (shape ``(..., n)``)."""
        z = self._rows(x, self.values)
        padded = torch.nn.functional.pad(z, (0, self.inner.n - self.n))
        return self.inner(padded)[:, : self.n].reshape(x.shape)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., n)``): padded, the inner product's
        transpose, cropped (the padded matrix's leading block transposed is ``A.T``)."""
        z = self._rows(x, self.values)
        padded = torch.nn.functional.pad(z, (0, self.inner.n - self.n))
        return self.inner.forward_transposed(padded)[:, : self.n].reshape(x.shape)

    def to_operator(self):
        """The current values as a :class:`~sfapprox.operators.PaddedButterflyOperator` (float64, on the CPU)."""
        return operator_class("butterfly-padded")(_host(self.values), self.n)

    def extra_repr(self) -> str:
        return f"n={self.n}, padded_n={self.inner.n}, n_factors={self.values.shape[0]}"


# =============================================================================== the transpose
class TransposedLinear(_Layer):
    """``y = x @ A``: the transpose of a layer ``layer(x) == x @ A.T``, sharing its parameters.

    What ``op.T.to_torch()`` returns: the layer of ``op`` (its values copied from the operator, as every
    ``to_torch`` copies) wrapped here; ``layer.transposed()`` wraps a layer one already has, and then
    the two modules hold the same ``nn.Parameter`` objects (training either trains both).  Its
    ``state_dict`` is the layer's, keys and all (``values``, not ``layer.values``), so a checkpoint of
    either module loads into the other, and into ``op.to_torch()`` or ``op.T.to_torch()`` of an operator of
    the same structure; a state dict saved with the ``layer.`` keys of earlier versions still loads
    (``named_parameters`` keep ``layer.``: they name the modules as they are nested).  The forward is the layer's
    :meth:`~_Layer.forward_transposed`: the transpose in what the layer stores, at its forward's cost (no
    ``N x N`` weight), gradients reaching the parameters and the input.

    Parameters
    ----------
    layer : nn.Module
        One of this module's layers (:class:`ChordLinear`, :class:`HybridLinear`, ...).

    Examples
    --------
    >>> import torch
    >>> layer = SparseLinear(3, rows=[0], cols=[2], vals=[5.0], dtype=torch.float64)
    >>> layer.transposed()(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)).tolist()  # x @ S
    [0.0, 0.0, 5.0]
    """

    def __init__(self, layer: _Layer):
        super().__init__()
        if not isinstance(layer, _Layer):
            raise ParameterError(f"TransposedLinear wraps one of sfapprox's torch layers, got {type(layer).__name__}")
        self.layer = layer
        self.register_load_state_dict_pre_hook(_under_layer)
        self.register_load_state_dict_post_hook(_keys_said_as_saved)

    @property
    def n(self) -> int:
        return self.layer.n

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """The wrapped layer's state dict, under this module's own prefix (no ``layer.``).

        A checkpoint of ``A.T``'s module loads into ``A``'s and back (:class:`TransposedLinear`): the
        numbers are the same, only the apply differs, and ``layer.values`` beside ``values`` kept a
        checkpoint of one from loading into the other.
        """
        # (a parent module calls this with its destination and this module's prefix, so the keys are the
        # layer's within any model that holds the transpose)
        return self.layer.state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A`` over the last dimension of ``x`` (shape ``(..., n)``)."""
        return self.layer.forward_transposed(x)

    def forward_transposed(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ A.T``: the wrapped layer's own forward."""
        return self.layer(x)

    def transposed(self) -> _Layer:
        """The wrapped layer (``A``) itself."""
        return self.layer

    def dense_weight(self) -> torch.Tensor:
        """``A.T`` as an ``n x n`` tensor (differentiable; ``O(n^2)`` memory)."""
        return self.layer.dense_weight().T

    def to_operator(self):
        """The current values as the transpose (``.T``) of the layer's operator (float64, on the CPU)."""
        return self.layer.to_operator().T


#: The wrapped layer's attribute in :class:`TransposedLinear`, and so the prefix torch loads its keys under.
_WRAPPED = "layer."


def _under_layer(module, state_dict, prefix, *_) -> None:
    """A load pre-hook of :class:`TransposedLinear`: its keys, the layer's own (its ``state_dict``), put under
    ``layer.`` where torch looks for the wrapped module's; a key already there (a state dict saved before
    the keys were the layer's) is left as it is.  No layer has a part named ``layer``, so the two never clash."""
    module._loaded_under = prefix  # for _keys_said_as_saved
    for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + _WRAPPED)]:
        state_dict[prefix + _WRAPPED + key[len(prefix):]] = state_dict.pop(key)


def _keys_said_as_saved(module, incompatible) -> None:
    """A load post-hook of :class:`TransposedLinear`: a missing key named as its ``state_dict`` writes it
    (``values``), not as :func:`_under_layer` looked for it (``layer.values``, a key no checkpoint of it has)."""
    prefix = getattr(module, "_loaded_under", None)
    if prefix is None:
        return
    inner = prefix + _WRAPPED
    incompatible.missing_keys[:] = [prefix + k[len(inner):] if k.startswith(inner) else k
                                    for k in incompatible.missing_keys]

