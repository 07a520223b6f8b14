"""SF's surrogate: the product of Chord (or butterfly) factors, applied fast, exported to scipy or torch.

:class:`ChordOperator` is a :class:`scipy.sparse.linalg.LinearOperator`, so
it composes with scipy's iterative solvers and eigensolvers.  It holds the
factors of any SF support: offset-based (``"chord"``, ``"symmetric"``,
``N·K·M`` values) or ``"butterfly"`` (two values per row, ``2·N·M``).
Every product (``op @ x``, ``op @ B``, ``op.T @ x``, ``rmatvec``) costs one
multiply-add per stored value and column, in one call into compiled code
(:mod:`._chord_apply`: numba, with scipy sparse factors as the fallback), on
values stored once, at construction, in the kernels' layout.

Exports: ``to_dense()``, ``to_sparse_factors()`` (one
``scipy.sparse.csr_array`` per factor) and ``to_torch()`` (a trainable
``torch.nn.Module`` that replaces ``nn.Linear(N, N, bias=False)``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._errors import ParameterError
from ..budget import butterfly_count
from ..chord import OFFSET_SUPPORTS, SUPPORTS, is_power_of_two, support_offsets
from ..formats import counted, shape_phrase, shape_text
from ._base import SurrogateOperator, check_finite, register_operator
from ._chord_apply import CHUNK_COLUMNS, FactorStack, pack, unpack_view

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["ChordOperator", "TORCH_DENSE_MAX_N", "CHORD_DESCRIPTION"]

#: Up to this order ``to_dense`` runs in the fitting kernels (torch, on one thread), above it in
#: the compiled apply kernels.  Measured on 2 cores (seconds, torch 1 thread / 2 threads / compiled):
#: N = 512: 0.004 / 0.012 / 0.002; 1024: 0.024 / 0.10 / 0.032; 2048: 0.39 / 0.60 / 0.10;
#: 3000 (10 factors): 2.4 / 2.4-2.8 / 0.41.  A second torch thread never paid: every one of the
#: M K shifted adds waits for it, and for a time slice when another process holds the core.
TORCH_DENSE_MAX_N = 1024


#: How a file's ``values`` and ``offsets`` make the matrix (also the Chord part of a hybrid's description).
CHORD_DESCRIPTION = (
    "A = W[0] @ W[1] @ ... @ W[M-1] (M = n_factors); factor m holds values[m, i, k] at row i, column "
    "(i + offsets[k]) mod n; with support 'butterfly' it holds values[m, i, 0] at column i and "
    "values[m, i, 1] at column i XOR 2**m (offsets empty)."
)
CHORD_DATASETS = {
    "values": "factor values, shape (M, n, K): values[m, i, k] sits in row i of factor m (see the file's description)",
    "offsets": "column offsets: values[m, i, k] sits at column (i + offsets[k]) mod n",
}


@register_operator
class ChordOperator(SurrogateOperator):
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
        with base 2, e.g. the reference Chord protocol for ``N``): any
        integers, distinct modulo ``N``, kept modulo ``N`` (-1 is ``N - 1``).
        Must be left out (or empty) for the butterfly.
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

    kind: ClassVar[str] = "chord"
    layout: ClassVar[str] = "root"  # SF factors sit at the file's root, as since format version 1
    description: ClassVar[str] = CHORD_DESCRIPTION
    dataset_descriptions: ClassVar[dict[str, str]] = CHORD_DATASETS

    def __init__(self, values: np.ndarray, offsets: np.ndarray | None = None, *, support: str = "chord"):
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 3 or not min(values.shape[1:]):  # (M = 0 is the empty product, the identity)
            raise ParameterError(f"values must have shape (M, N, K), N and K at least 1, got {shape_phrase(values.shape)}")
        if support not in SUPPORTS:
            raise ParameterError(f"unknown support {support!r}; choose one of {', '.join(SUPPORTS)}")
        check_finite("values", "Chord factors", values)
        n = values.shape[1]
        if support in OFFSET_SUPPORTS:
            offsets = support_offsets(n, support) if offsets is None else np.asarray(offsets, dtype=np.int64)
            if offsets.shape != (values.shape[2],):
                raise ParameterError(f"{counted(len(offsets), 'offset')} for {counted(values.shape[2], 'value')} "
                                     "per row")
            if len(set((offsets % n).tolist())) != offsets.size:  # two values for one entry of every row
                raise ParameterError(f"offsets {offsets.tolist()} are not distinct modulo N = {n:,}")
            offsets = offsets % n  # as the products read them, and as a factors file holds them
        else:
            if offsets is not None and np.size(offsets):
                raise ParameterError("the butterfly support has no offsets; leave offsets out")
            offsets = np.zeros(0, dtype=np.int64)
            n_max = n.bit_length() - 1
            if n < 2 or not is_power_of_two(n):
                raise ParameterError(f"butterfly factors need N a power of two (at least 2), got N = {n:,}")
            if values.shape[2] != 2 or not 1 <= values.shape[0] <= n_max:
                raise ParameterError(
                    f"butterfly values must have shape (M, {n}, 2) with 1 <= M <= log2 N = {n_max}, "
                    f"got shape {shape_text(values.shape)}"
                )
        # The values are kept once, in the layout the apply kernels read with unit stride
        # ((M, K, N): one offset's values contiguous over the rows); ``values`` is a view of it.
        self._stack = FactorStack(pack(values), offsets % max(n, 1))
        self.offsets = offsets
        self.support = support
        super().__init__(n)

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
        """Number of factors ``M``."""
        return self._stack.packed.shape[0]

    def _holds(self) -> str:
        if not self.n_factors:
            return "no factors (the identity)"
        if self.support == "butterfly":
            return counted(self.n_factors, "butterfly factor")
        return (f"{counted(self.n_factors, 'factor')}, {self.support} support, "
                f"K = {counted(self.offsets.size, 'value')} a row")

    @property
    def n_stored(self) -> int:
        """Stored numbers (positions are implied by the protocol).

        ``N * K * M`` for offset-based supports; ``2 * N * M`` for the
        butterfly (:func:`sfapprox.budget.butterfly_count`).
        """
        if self.support == "butterfly":
            return butterfly_count(self.shape[0], self.n_factors)
        return int(self._stack.packed.size)

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        # One compiled kernel call (sfapprox.operators._chord_apply: numba, or scipy sparse factors when
        # numba is unavailable); it returns the shapes scipy's matvec/matmat would.
        return self._stack.apply(B, transpose)

    def to_dense(self) -> np.ndarray:
        """The full ``N x N`` product, built with ``O(M K N^2)`` work.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.

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
                    from ..sf._butterfly import butterfly_product

                    return butterfly_product(values).numpy()
                from ..sf._kernels import chord_product

                return chord_product(values, (self.offsets % n).tolist()).numpy()
            finally:
                torch.set_num_threads(threads)
        # The operator applied to I, a block of the identity at a time: no N x N identity besides the result.
        out = np.empty((n, n))
        width = 4 * CHUNK_COLUMNS
        for j0 in range(0, n, width):
            j1 = min(n, j0 + width)
            block = np.zeros((n, j1 - j0))
            block[np.arange(j0, j1), np.arange(j1 - j0)] = 1.0
            out[:, j0:j1] = self._stack.apply(block)
        return out

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

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
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
        sfapprox.operators._torch.ChordLinear
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
        from ._torch import ChordLinear

        return ChordLinear(self.values, None if self.support == "butterfly" else self.offsets,
                           support=self.support, dtype=dtype, device=device)

    # ------------------------------------------------------------------ the saved layout
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``values`` and ``offsets``; attributes ``support`` and ``n_factors``.

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        return ({"values": self.values, "offsets": self.offsets},
                {"support": self.support, "n_factors": self.n_factors})

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "ChordOperator":
        """Rebuild from :meth:`to_arrays`, files older than the ``support`` attribute read as offset-based
        (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        ChordOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        support = str(attrs.get("support", "chord"))
        if support not in SUPPORTS:
            raise ParameterError(f"unknown factor support {support!r} (known: {', '.join(SUPPORTS)}); "
                             "the file may come from a newer sfapprox")
        values, offsets = np.asarray(arrays["values"]), np.asarray(arrays["offsets"])
        check_finite("values", "Chord factors", values)
        if values.ndim != 3 or offsets.ndim != 1:
            raise ParameterError(f"values must be (M, n, K) and offsets one-dimensional, got values: {shape_phrase(values.shape)}; "
                                 f"offsets: {shape_phrase(offsets.shape)}")
        n = values.shape[1]
        if support == "butterfly":
            if offsets.size:
                raise ParameterError("butterfly factors have offsets")
            return cls(values, support="butterfly")
        if not np.issubdtype(offsets.dtype, np.integer) and offsets.size:
            raise ParameterError(f"offsets must be integers, got {offsets.dtype}")
        if offsets.shape != (values.shape[2],):
            raise ParameterError(f"{counted(offsets.size, 'offset')} for {counted(values.shape[2], 'value')} per row")
        if offsets.size and (offsets.min() < 0 or offsets.max() >= n or len(set(offsets.tolist())) != offsets.size):
            raise ParameterError(f"offsets {offsets.tolist()} are not distinct positions in 0..{n - 1}")
        return cls(values, offsets.astype(np.int64), support=support)
