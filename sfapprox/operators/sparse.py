"""Plain sparse storage: an ``N x N`` CSR matrix that counts its stored numbers (``sparse``'s surrogate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp

from .._errors import ParameterError
from ..budget import sparse_count
from ..formats import shape_phrase, shape_text
from ._base import SurrogateOperator, register_operator

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["SparseOperator"]


@register_operator
class SparseOperator(SurrogateOperator):
    """An ``N x N`` CSR matrix as a LinearOperator that counts its stored numbers.

    Parameters
    ----------
    matrix : scipy sparse array of shape (N, N)
        Kept in canonical CSR (sorted indices, no duplicates).

    Attributes
    ----------
    matrix : scipy.sparse.csr_array
        The matrix, float64, canonical CSR.

    Notes
    -----
    Saved layout: ``kind = "csr"``.  Arrays ``data`` (s,) float64,
    ``indices`` (s,) int64 and ``indptr`` (N + 1,) int64; attribute ``n``.
    The dense matrix, with numpy alone::

        D = np.zeros((n, n))
        rows = np.repeat(np.arange(n), np.diff(indptr))
        D[rows, indices] = data

    ``n_stored = data.size + indices.size + indptr.size = 2 s + N + 1``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> op = SparseOperator(sp.csr_array(([2.0], ([0], [1])), shape=(3, 3)))
    >>> op.matvec(np.ones(3)).tolist(), op.n_stored
    ([2.0, 0.0, 0.0], 6)
    """

    kind: ClassVar[str] = "csr"
    description: ClassVar[str] = ("A is the n x n CSR matrix (data, indices, indptr): row i holds data[j] at column "
                                  "indices[j] for indptr[i] <= j < indptr[i + 1].")

    def __init__(self, matrix):
        # The shape before scipy reads it: a 1-D array became a 1-D sparse array (then an IndexError here), a
        # scalar or a 3-D array scipy's own ValueError.
        shape = np.shape(matrix)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ParameterError(f"a square matrix is needed, got {shape_phrase(shape)}")
        matrix = sp.csr_array(matrix, dtype=np.float64)
        matrix.sum_duplicates()
        matrix.sort_indices()
        self.matrix = matrix
        self._matrix_t = None
        super().__init__(matrix.shape[0])

    @property
    def n_stored(self) -> int:
        """``2 s + N + 1``: values, column indices and row pointers; 0 for no entries
        (:func:`~sfapprox.budget.sparse_count`)."""
        return sparse_count(self.shape[0], self.matrix.nnz)

    def _holds(self) -> str:
        return f"{self.matrix.nnz:,} entries (CSR)"

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        if transpose and self._matrix_t is None:
            self._matrix_t = self.matrix.T.tocsr()  # CSR of the transpose, made once
        return np.asarray((self._matrix_t if transpose else self.matrix) @ np.asarray(B, dtype=np.float64))

    def to_dense(self) -> np.ndarray:
        """The ``N x N`` matrix as a dense array.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        return self.matrix.toarray()

    def factored_parts(self) -> tuple[np.ndarray, np.ndarray, Any]:
        """No low-rank part (``r = 0``) and the CSR matrix.

        Returns
        -------
        tuple or None
            ``(L, R, S)``: ``L`` of shape ``(N, r)``, ``R`` of shape ``(r, N)``, ``S`` a scipy sparse
            array or None; None where the surrogate is not low rank plus sparse.
        """
        n = self.shape[0]
        return np.zeros((n, 0)), np.zeros((0, n)), self.matrix

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying this matrix as ``nn.Linear(N, N, bias=False)`` does.

        ``module(x) = x @ A.T`` over the last dimension of ``x``, one multiply-add per entry and
        vector (a gather and an ``index_add``, as a hybrid's sparse part); the values are a
        parameter, the positions fixed buffers, and gradients reach the values and the input.

        Parameters
        ----------
        dtype : torch.dtype, optional
            Default: ``torch.get_default_dtype()``.
        device : torch.device or str, optional
            Default: CPU.

        Returns
        -------
        sfapprox.operators._torch.SparseLinear
            ``.to_operator()`` turns it back into a :class:`SparseOperator`.

        Examples
        --------
        >>> import scipy.sparse as sp, torch
        >>> op = SparseOperator(sp.csr_array(([2.0], ([0], [1])), shape=(3, 3)))
        >>> op.to_torch(dtype=torch.float64)(torch.ones(3, dtype=torch.float64)).tolist()
        [2.0, 0.0, 0.0]
        """
        from ._torch import SparseLinear

        coo = self.matrix.tocoo()
        return SparseLinear(self.shape[0], rows=coo.row.astype(np.int64), cols=coo.col.astype(np.int64),
                            vals=coo.data, dtype=dtype, device=device)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The CSR arrays (``data``, ``indices``, ``indptr``) and ``{"n": N}``.

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        m = self.matrix
        arrays = {"data": m.data.astype(np.float64), "indices": m.indices.astype(np.int64),
                  "indptr": m.indptr.astype(np.int64)}
        return arrays, {"n": int(self.shape[0])}

    def array_names(self) -> tuple[str, ...]:
        """:meth:`to_arrays`' names, without its int64 copies (:meth:`SurrogateOperator.array_names`).

        Returns
        -------
        tuple of str
            The dataset names a factors file of this kind holds.
        """
        return ("data", "indices", "indptr")

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "SparseOperator":
        """Rebuild from :meth:`to_arrays` (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        SparseOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        try:
            n = int(attrs["n"])
            data = np.asarray(arrays["data"])
            indices = np.asarray(arrays["indices"])
            indptr = np.asarray(arrays["indptr"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"CSR operator: missing or unreadable part ({exc})") from None
        if n < 1:
            raise ParameterError(f"CSR operator: n must be at least 1, got {n:,}")
        if data.ndim != 1 or indices.shape != data.shape or indptr.shape != (n + 1,):
            raise ParameterError(f"CSR operator: shapes data {shape_text(data.shape)}, indices {shape_text(indices.shape)}, indptr "
                             f"{shape_text(indptr.shape)} do not describe an {n:,} x {n:,} matrix")
        for name, a in (("indices", indices), ("indptr", indptr)):
            if a.size and not np.issubdtype(a.dtype, np.integer):
                raise ParameterError(f"CSR operator: {name} must be integers, got {a.dtype}")
        if not np.issubdtype(data.dtype, np.number) or np.iscomplexobj(data) or not np.all(np.isfinite(data)):
            raise ParameterError("CSR operator: data must be finite real numbers")
        if indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
            raise ParameterError("CSR operator: indptr must rise from 0 to the number of entries")
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise ParameterError(f"CSR operator: column indices outside 0..{n - 1}")
        return cls(sp.csr_array((data.astype(np.float64), indices.astype(np.int64), indptr.astype(np.int64)),
                                shape=(n, n)))
