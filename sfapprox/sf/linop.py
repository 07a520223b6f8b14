"""Using a fitted Chord factorization: apply it fast, export it to scipy or torch.

:class:`ChordOperator` is a :class:`scipy.sparse.linalg.LinearOperator`, so
it composes with scipy's iterative solvers and eigensolvers.  It holds the
factors of any SF support: offset-based (``"chord"``, ``"symmetric"``,
``N·K·M`` values) or ``"butterfly"`` (two values per row, ``2·N·M``).
Every product (``op @ x``, ``op @ B``, ``op.T @ x``, ``rmatvec``) costs one
multiply-add per stored value and column, in one call into compiled code
(:mod:`sfapprox.sf._apply`: numba, with scipy sparse factors as the
fallback), on values stored once, at construction, in the kernels' layout.
:class:`HybridOperator` is the sum of such a product and a low-rank and/or
sparse correction (the sf+lr and sf+s surrogates), ``O(N·K·M + N·r + s)``
per column (BLAS for the low-rank part, CSR for the sparse one).

Exports: ``to_dense()``; ``ChordOperator.to_sparse_factors()`` (one
``scipy.sparse.csr_array`` per factor); ``to_torch()`` (a trainable
``torch.nn.Module`` that replaces ``nn.Linear(N, N, bias=False)``).
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ..chord import OFFSET_SUPPORTS, SUPPORTS, is_power_of_two, support_offsets
from ._apply import FactorStack, pack, unpack_view

__all__ = ["ChordOperator", "HybridOperator", "TORCH_DENSE_MAX_N"]

#: Up to this order ``to_dense`` runs in the fitting kernels (torch, on one thread), above it in
#: the compiled apply kernels.  Measured on 2 cores (seconds, torch 1 thread / 2 threads / compiled):
#: N = 512: 0.004 / 0.012 / 0.002; 1024: 0.024 / 0.10 / 0.032; 2048: 0.39 / 0.60 / 0.10;
#: 3000 (10 factors): 2.4 / 2.4-2.8 / 0.41.  A second torch thread never paid: every one of the
#: M K shifted adds waits for it, and for a time slice when another process holds the core.
TORCH_DENSE_MAX_N = 1024


class _FastApply(LinearOperator):
    """Products through one ``_apply(B, transpose)`` call, without scipy's per-call checks for arrays.

    scipy's ``matvec``/``rmatvec``/``matmat``/``rmatmat`` and ``dot``/``@`` all
    land in ``_apply``; for a 1-D or 2-D ndarray of the right length ``@``
    and ``dot`` call it directly (scipy's checks are a third of a product at
    N = 256), anything else follows scipy's rules (scalars refused, operators
    composed).  The transpose is made once and shares the values.
    """

    _transposed = None

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._apply(np.reshape(x, -1), False)

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._apply(np.reshape(x, -1), True)

    def _matmat(self, B: np.ndarray) -> np.ndarray:
        return self._apply(B, False)

    def _rmatmat(self, B: np.ndarray) -> np.ndarray:
        return self._apply(B, True)

    def _fast(self, x) -> bool:
        return type(x) is np.ndarray and x.ndim in (1, 2) and x.shape[0] == self.shape[1]

    def dot(self, x):
        """``A @ x`` for a vector or block (anything else: scipy's rules, e.g. operator products)."""
        return self._apply(x, False) if self._fast(x) else super().dot(x)

    def __matmul__(self, x):
        return self._apply(x, False) if self._fast(x) else super().__matmul__(x)

    def _adjoint(self) -> LinearOperator:
        if self._transposed is None:  # made once: `op.T @ x` in a loop should not rebuild it
            self._transposed = _Transposed(self)
        return self._transposed

    # Real: the transpose is the adjoint (scipy's default would conjugate twice per product).
    _transpose = _adjoint


class _Transposed(_FastApply):
    """``A.T`` of a :class:`ChordOperator` or :class:`HybridOperator`, sharing its values."""

    def __init__(self, op: _FastApply):
        self._op = op
        super().__init__(dtype=op.dtype, shape=op.shape)

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        return self._op._apply(B, not transpose)

    def _adjoint(self) -> LinearOperator:
        return self._op

    _transpose = _adjoint

    def to_dense(self) -> np.ndarray:
        return self._op.to_dense().T


class ChordOperator(_FastApply):
    """The product ``W1 @ W2 @ ... @ WM`` of SF factors, never formed densely.

    Parameters
    ----------
    values : ndarray of shape (M, N, K)
        Factor values (``m = 0`` is the leftmost factor).  Offset-based
        supports: ``values[m, i, k]`` sits at column ``(i + offsets[k]) % N``
        of factor ``m``.  Butterfly: ``K = 2``, ``values[m, i, 0]`` sits at
        column ``i`` and ``values[m, i, 1]`` at column ``i XOR 2^m``.
    offsets : ndarray of shape (K,), optional
        Offsets of an offset-based support (default: the support's offsets
        with base 2, e.g. the reference Chord protocol for ``N``).  Must be
        left out (or empty) for the butterfly.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        The support protocol (:data:`sfapprox.chord.SUPPORTS`).  For the
        offset-based ones it is a label (the offsets define the positions);
        ``"butterfly"`` needs ``N`` a power of two and ``1 <= M <= log2 N``.

    Attributes
    ----------
    values : ndarray of shape (M, N, K)
        The values (float64), a read-only view of the ``(M, K, N)`` copy
        that the apply kernels read with unit stride.
    offsets, support
        As given (``offsets`` is empty for the butterfly).

    See Also
    --------
    HybridOperator : the product plus low-rank and sparse corrections.
    sfapprox.load_factors : an operator read back from a saved fit.

    Examples
    --------
    >>> import numpy as np
    >>> op = ChordOperator(np.ones((3, 8, 4)) / 4)
    >>> y = op.matvec(np.ones(8))
    >>> bool(np.allclose(y, 1.0))
    True
    >>> bf = ChordOperator(np.full((3, 8, 2), 0.5), support="butterfly")
    >>> bool(np.allclose(bf.matvec(np.ones(8)), 1.0)), bf.n_stored
    (True, 48)
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray | None = None, *, support: str = "chord"):
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 3:
            raise ValueError(f"values must have shape (M, N, K), got {values.shape}")
        if support not in SUPPORTS:
            raise ValueError(f"unknown support {support!r}; choose one of {', '.join(SUPPORTS)}")
        n = values.shape[1]
        if support in OFFSET_SUPPORTS:
            offsets = support_offsets(n, support) if offsets is None else np.asarray(offsets, dtype=np.int64)
            if offsets.shape != (values.shape[2],):
                raise ValueError(f"{len(offsets)} offsets for {values.shape[2]} values per row")
        else:
            if offsets is not None and np.size(offsets):
                raise ValueError("the butterfly support has no offsets; leave offsets out")
            offsets = np.zeros(0, dtype=np.int64)
            n_max = n.bit_length() - 1
            if n < 2 or not is_power_of_two(n):
                raise ValueError(f"butterfly factors need N a power of two (at least 2), got N = {n}")
            if values.shape[2] != 2 or not 1 <= values.shape[0] <= n_max:
                raise ValueError(
                    f"butterfly values must have shape (M, {n}, 2) with 1 <= M <= log2 N = {n_max}, "
                    f"got {values.shape}"
                )
        # The values are kept once, in the layout the apply kernels read with unit stride
        # ((M, K, N): one offset's values contiguous over the rows); ``values`` is a view of it.
        self._stack = FactorStack(pack(values), offsets % max(n, 1))
        self.offsets = offsets
        self.support = support
        self._transposed = None
        super().__init__(dtype=np.float64, shape=(n, n))

    @property
    def values(self) -> np.ndarray:
        """The factor values, shape ``(M, N, K)``: a read-only view of the kernels' ``(M, K, N)`` copy.

        Read-only because what the products derive from the values (the
        fallback's sparse factors) is made once; build a new operator for
        new values (``to_torch()`` to fine-tune them).
        """
        view = unpack_view(self._stack.packed)
        view.flags.writeable = False
        return view

    @property
    def n_factors(self) -> int:
        return self._stack.packed.shape[0]

    @property
    def n_stored(self) -> int:
        """Stored numbers (positions are implied by the protocol).

        ``N * K * M`` for offset-based supports; ``2 * N * M`` for the
        butterfly (:func:`sfapprox.budget.butterfly_count`).
        """
        if self.support == "butterfly":
            from ..budget import butterfly_count

            return butterfly_count(self.shape[0], self.n_factors)
        return int(self._stack.packed.size)

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        # One compiled kernel call (sfapprox.sf._apply: numba, or scipy sparse factors when
        # numba is unavailable); it returns the shapes scipy's matvec/matmat would.
        return self._stack.apply(B, transpose)

    def to_dense(self) -> np.ndarray:
        """The full ``N x N`` product, built with ``O(M K N^2)`` work.

        Examples
        --------
        >>> import numpy as np
        >>> ChordOperator(np.full((2, 4, 3), 0.5)).to_dense()[0].tolist()
        [0.5, 0.5, 0.75, 0.5]
        """
        n = self.shape[0]
        kernel_form = self.support == "butterfly" or (self.offsets.size and self.offsets[0] % n == 0)
        if "torch" in sys.modules and self.n_factors and kernel_form and n <= TORCH_DENSE_MAX_N:
            # Right after a small fit (torch loaded): the fitting kernels, so that it does not also
            # import and load the compiled apply kernels (about a second) just to score itself.
            import torch

            values = torch.from_numpy(np.array(self.values, order="C"))  # a writable copy
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                if self.support == "butterfly":
                    from ._butterfly import butterfly_product

                    return butterfly_product(values).numpy()
                from ._kernels import chord_product

                return chord_product(values, (self.offsets % n).tolist()).numpy()
            finally:
                torch.set_num_threads(threads)
        return self._stack.apply(np.eye(n))  # the operator applied to I

    def to_sparse_factors(self) -> list:
        """The factors as scipy sparse matrices whose product is the operator.

        Returns
        -------
        list of scipy.sparse.csr_array
            ``[W_1, ..., W_M]`` (``W_1`` leftmost), each ``N x N`` with
            exactly one stored entry per value (explicit zeros included,
            columns sorted within each row), so their total ``nnz`` is
            :attr:`n_stored`; ``W_1 @ W_2 @ ... @ W_M`` equals the operator.
            For ``M = 0`` the list is empty (the operator is the identity).

        Examples
        --------
        >>> import numpy as np
        >>> from functools import reduce
        >>> op = ChordOperator(np.random.default_rng(0).standard_normal((3, 8, 4)))
        >>> factors = op.to_sparse_factors()
        >>> [f.nnz for f in factors], sum(f.nnz for f in factors) == op.n_stored
        ([32, 32, 32], True)
        >>> bool(np.allclose(reduce(lambda a, b: a @ b, factors).toarray(), op.to_dense()))
        True
        """
        return self._stack.sparse_factors()

    def to_torch(self, dtype=None, device=None):
        """A trainable ``torch.nn.Module`` that applies this matrix as ``nn.Linear(N, N, bias=False)`` does.

        ``module(x)`` is ``x @ A.T`` over the last dimension of ``x``
        (any leading batch dimensions); the factor values are one
        ``nn.Parameter`` of shape ``(M, N, K)``, so a fitted surrogate can
        replace a dense weight and be fine-tuned.  Each factor costs a
        gather of ``K`` entries per row: ``O(batch N K M)`` time and a
        ``batch x N x K`` temporary per factor (kept for backward).

        Parameters
        ----------
        dtype : torch.dtype, optional
            Parameter dtype (default: ``torch.get_default_dtype()``, as
            ``nn.Linear``).
        device : torch.device or str, optional
            Where the parameters live (default: CPU); ``"cuda"`` works.

        Returns
        -------
        sfapprox.sf._torch_module.ChordLinear
            ``.to_operator()`` turns it back into a :class:`ChordOperator`.

        Examples
        --------
        >>> import numpy as np, torch
        >>> op = ChordOperator(np.random.default_rng(0).standard_normal((3, 8, 4)))
        >>> layer = op.to_torch(dtype=torch.float64)
        >>> x = torch.randn(5, 8, dtype=torch.float64)
        >>> bool(torch.allclose(layer(x), x @ torch.from_numpy(op.to_dense()).T))
        True
        >>> layer(x).sum().backward(); tuple(layer.values.grad.shape)
        (3, 8, 4)
        """
        from ._torch_module import ChordLinear

        return ChordLinear(self.values, None if self.support == "butterfly" else self.offsets,
                           support=self.support, dtype=dtype, device=device)


class HybridOperator(_FastApply):
    """``W1 ... WM + U diag(s) V^T + S``: Chord factors plus low-rank and sparse corrections.

    Each part is optional; every product costs ``O(N K M + N r + nnz(S))``
    per column and nothing ``N x N`` is formed.

    Parameters
    ----------
    n : int
        Order of the matrix.
    chord : ChordOperator or None
        The Chord product (None: no factors).
    low_rank : tuple (U, s, Vt) or None
        Shapes ``(N, r)``, ``(r,)``, ``(r, N)``: an SVD-like part
        ``U diag(s) V^T`` storing ``r (2N + 1)`` numbers; with ``s`` None, a
        factored part ``U V^T`` (e.g. NMF's ``W H``) storing ``2 N r``.
    sparse : scipy sparse array or None
        The free-position entries.
    count_indices : bool, default=False
        Whether each sparse entry is charged for its position too (2 numbers).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> U = np.ones((8, 1)) / np.sqrt(8)
    >>> S = sp.csr_array(([2.0], ([0], [3])), shape=(8, 8))
    >>> chord = ChordOperator(np.ones((3, 8, 4)) / 4)
    >>> op = HybridOperator(8, chord=chord, low_rank=(U, np.array([8.0]), U.T), sparse=S)
    >>> y = op.matvec(np.ones(8))
    >>> np.round(y[:2], 9).tolist(), op.n_stored
    ([11.0, 9.0], 114)
    """

    def __init__(
        self,
        n: int,
        *,
        chord: ChordOperator | None = None,
        low_rank: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        sparse=None,
        count_indices: bool = False,
    ):
        import scipy.sparse as sp

        if chord is not None and chord.shape != (n, n):
            raise ValueError(f"Chord part has shape {chord.shape}, expected {(n, n)}")
        if low_rank is None:
            low_rank = (np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)))
        #: whether the low-rank part stores its singular values (U diag(s) V^T) or is U V^T
        self.singular_values = low_rank[1] is not None
        if not self.singular_values:
            low_rank = (low_rank[0], np.ones(np.shape(low_rank[0])[1]), low_rank[2])
        U, sig, Vt = (np.asarray(a, dtype=np.float64) for a in low_rank)
        if U.shape != (n, sig.size) or Vt.shape != (sig.size, n):
            raise ValueError(f"low-rank part shapes {U.shape}, {sig.shape}, {Vt.shape} do not match N={n}")
        if sparse is None:
            sparse = sp.csr_array((n, n))
        if sparse.shape != (n, n):
            raise ValueError(f"sparse part has shape {sparse.shape}, expected {(n, n)}")
        self.chord = chord
        self.U, self.s, self.Vt = U, sig, Vt
        self.sparse = sp.csr_array(sparse, dtype=np.float64)
        self.count_indices = bool(count_indices)
        self._sparse_t = None  # (sparse, its transpose as CSR), made on the first transposed product
        self._transposed = None
        super().__init__(dtype=np.float64, shape=(n, n))

    @property
    def rank(self) -> int:
        return int(self.s.size)

    @property
    def n_factors(self) -> int:
        return 0 if self.chord is None else self.chord.n_factors

    @property
    def n_stored(self) -> int:
        """Stored numbers, by :func:`sfapprox.budget.hybrid_count`."""
        from ..budget import hybrid_count

        # Values per row: len(offsets) for offset-based factors, 2 for the butterfly.
        k = 0 if self.chord is None else self.chord.values.shape[2]
        return hybrid_count(
            self.shape[0], self.n_factors, k, rank=self.rank, n_sparse=int(self.sparse.nnz),
            count_indices=self.count_indices, singular_values=self.singular_values,
        )

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        """``A @ B`` or ``A.T @ B``: the Chord kernel, two BLAS products and one CSR product."""
        B = np.asarray(B)
        if self.chord is not None:
            out = self.chord._stack.apply(B, transpose)  # a fresh array: added into below
        else:
            out = np.zeros(B.shape, dtype=np.result_type(B.dtype, np.float64))
        if self.rank:
            scale = self.s if B.ndim == 1 else self.s[:, None]
            if transpose:
                out += self.Vt.T @ (scale * (self.U.T @ B))
            else:
                out += self.U @ (scale * (self.Vt @ B))
        if self.sparse.nnz:
            out += self._sparse_for(transpose) @ B
        return out

    def _sparse_for(self, transpose: bool):
        if not transpose:
            return self.sparse
        if self._sparse_t is None or self._sparse_t[0] is not self.sparse:
            self._sparse_t = (self.sparse, self.sparse.T.tocsr())  # CSR of the transpose, made once
        return self._sparse_t[1]


    def to_dense(self) -> np.ndarray:
        """The full ``N x N`` sum."""
        out = (self.U * self.s) @ self.Vt + self.sparse.toarray()
        if self.chord is not None:
            out += self.chord.to_dense()
        return out

    def to_torch(self, dtype=None, device=None):
        """A trainable ``torch.nn.Module`` applying this sum as ``nn.Linear(N, N, bias=False)`` does.

        ``module(x) = x @ A.T`` over the last dimension; the Chord values,
        ``U``, ``s``, ``Vt`` and the sparse part's values are parameters
        (the sparse positions are fixed buffers).  See
        :meth:`ChordOperator.to_torch`.

        Parameters
        ----------
        dtype : torch.dtype, optional
            Default: ``torch.get_default_dtype()``.
        device : torch.device or str, optional
            Default: CPU.

        Returns
        -------
        sfapprox.sf._torch_module.HybridLinear
            ``.to_operator()`` turns it back into a :class:`HybridOperator`.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, torch
        >>> rng = np.random.default_rng(0)
        >>> U, _ = np.linalg.qr(rng.standard_normal((8, 2)))
        >>> op = HybridOperator(8, chord=ChordOperator(rng.standard_normal((3, 8, 4))),
        ...                     low_rank=(U, np.array([3.0, 1.0]), U.T),
        ...                     sparse=sp.csr_array(([2.0], ([0], [3])), shape=(8, 8)))
        >>> layer = op.to_torch(dtype=torch.float64)
        >>> x = torch.randn(2, 5, 8, dtype=torch.float64)
        >>> bool(torch.allclose(layer(x), x @ torch.from_numpy(op.to_dense()).T))
        True
        """
        from ._torch_module import HybridLinear

        return HybridLinear.from_operator(self, dtype=dtype, device=device)
