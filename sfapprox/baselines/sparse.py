"""Sparse storage: keep the ``s`` largest-magnitude entries of ``X``, stored as CSR.

The plainest surrogate there is, and on sparse matrices (graphs, meshes) often
the best: when every non-zero fits in the budget it is *exact*.  A comparison
that leaves it out can make any factorization look good on a sparse network.

**Stored numbers** (:func:`sparse_count`): ``2·s + N + 1``, the sizes of the
three CSR arrays: ``s`` values, ``s`` column indices and ``N + 1`` row
pointers.  An index counts as one stored number, like a value (the same rule
as ``count_indices=True`` for RPCA and sf+s, which charge each entry its value
and one flat position, ``2·s``; CSR pays ``N + 1`` more for its row pointers).

**Budget rule** (:func:`sparse_entries_for_budget`): at a budget ``B`` it keeps
``s = min(nnz(X), floor((B - N - 1) / 2))`` entries; below ``N + 3`` (one
entry) it does not apply.  When ``nnz(X)`` entries fit, all of them are kept
and the surrogate is ``X`` itself: ``stop_reason_ == "exact"`` and
``params_["exact"]`` is True; storing ``X`` exactly costs
``2·nnz(X) + N + 1`` numbers (``params_["exact_budget"]``).  Otherwise the
``s`` entries of largest ``|X_ij|`` are the best ``s``-sparse approximation in
the Frobenius norm (its error is the norm of the dropped entries), and
``stop_reason_ == "closed_form"``.  Ties at the threshold go to the earlier
entries in row-major order, so the result does not depend on the machine.

The selection is ``O(nnz)`` (a partition, no sort) and does not iterate: no
time limit applies, and a Ctrl-C simply propagates (there is nothing to keep).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .._base import Approximation, MethodSpec, RunContext, register
from .._params import Interval
from ..factors import register_operator

__all__ = ["SparseApproximation", "SparseOperator", "sparse_count", "sparse_entries_for_budget", "top_entries"]


# --------------------------------------------------------------------------- accounting
def sparse_count(n: int, n_sparse: int) -> int:
    """Stored numbers of ``s`` entries of an ``n x n`` matrix in CSR: ``2 s + N + 1``.

    Examples
    --------
    >>> sparse_count(10, 4)
    19
    """
    return 2 * int(n_sparse) + int(n) + 1


def sparse_entries_for_budget(n: int, budget: int) -> int:
    """Most entries whose CSR storage fits ``budget``, capped at ``N^2`` (0 if none fits).

    Examples
    --------
    >>> sparse_entries_for_budget(10, 19), sparse_entries_for_budget(10, 12)
    (4, 0)
    """
    return max(0, min(int(n) * int(n), (int(budget) - int(n) - 1) // 2))


def _min_budget(n: int, context: RunContext) -> int:
    return sparse_count(n, 1)


# --------------------------------------------------------------------------- the selection
def top_entries(values: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending) of the ``k`` largest ``|values|``; ties go to the earlier positions.

    ``O(len(values))``: a partition finds the ``k``-th largest magnitude ``t``;
    every entry above ``t`` is kept, and the first entries equal to ``t`` fill
    the rest.

    Examples
    --------
    >>> top_entries(np.array([1.0, -3.0, 2.0, 3.0, 2.0]), 3).tolist()
    [1, 2, 3]
    """
    size = values.size
    if k >= size:
        return np.arange(size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    mags = np.abs(values)
    t = np.partition(mags, size - k)[size - k]
    keep = mags > t
    ties = np.flatnonzero(mags == t)[: k - int(keep.sum())]
    keep[ties] = True
    return np.flatnonzero(keep)


def _nonzeros(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns and values of the non-zeros of ``X`` in row-major order."""
    if sp.issparse(X):
        coo = sp.csr_array(X).tocoo()  # canonical CSR: sorted, no duplicates
        keep = coo.data != 0
        return coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64), coo.data[keep]
    flat = np.flatnonzero(X)
    rows, cols = np.divmod(flat, X.shape[1])
    return rows, cols, X.ravel()[flat]


# --------------------------------------------------------------------------- the operator
@register_operator  # save_factors / load_factors handle it
class SparseOperator(LinearOperator):
    """An ``N x N`` CSR matrix as a LinearOperator that counts its stored numbers.

    Layout
    ------
    ``kind = "csr"``.  Arrays ``data`` (s,) float64, ``indices`` (s,) int64
    and ``indptr`` (N + 1,) int64; attribute ``n``.  The dense matrix, with
    numpy alone::

        D = np.zeros((n, n))
        rows = np.repeat(np.arange(n), np.diff(indptr))
        D[rows, indices] = data

    ``n_stored = data.size + indices.size + indptr.size = 2 s + N + 1``.

    Parameters
    ----------
    matrix : scipy sparse array of shape (N, N)
        Kept in canonical CSR (sorted indices, no duplicates).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> op = SparseOperator(sp.csr_array(([2.0], ([0], [1])), shape=(3, 3)))
    >>> op.matvec(np.ones(3)).tolist(), op.n_stored
    ([2.0, 0.0, 0.0], 6)
    """

    kind: ClassVar[str] = "csr"

    def __init__(self, matrix):
        matrix = sp.csr_array(matrix, dtype=np.float64)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"a square matrix is needed, got shape {matrix.shape}")
        matrix.sum_duplicates()
        matrix.sort_indices()
        self.matrix = matrix
        super().__init__(dtype=np.float64, shape=matrix.shape)

    @property
    def n_stored(self) -> int:
        """``2 s + N + 1``: values, column indices and row pointers (:func:`sparse_count`)."""
        return sparse_count(self.shape[0], self.matrix.nnz)

    def _matmat(self, B: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrix @ np.asarray(B, dtype=np.float64))

    def _rmatmat(self, B: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrix.T @ np.asarray(B, dtype=np.float64))

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._matmat(np.reshape(x, (-1, 1))).ravel()

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._rmatmat(np.reshape(x, (-1, 1))).ravel()

    def to_dense(self) -> np.ndarray:
        """The ``N x N`` matrix as a dense array."""
        return self.matrix.toarray()

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The CSR arrays (``data``, ``indices``, ``indptr``) and ``{"n": N}``."""
        m = self.matrix
        arrays = {"data": m.data.astype(np.float64), "indices": m.indices.astype(np.int64),
                  "indptr": m.indptr.astype(np.int64)}
        return arrays, {"n": int(self.shape[0])}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "SparseOperator":
        """Rebuild from :meth:`to_arrays`; :class:`~sfapprox.InputError` for inconsistent arrays."""
        from .._errors import InputError

        try:
            n = int(attrs["n"])
            data = np.asarray(arrays["data"])
            indices = np.asarray(arrays["indices"])
            indptr = np.asarray(arrays["indptr"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"CSR operator: missing or unreadable part ({exc})") from None
        if n < 1:
            raise InputError(f"CSR operator: n must be at least 1, got {n}")
        if data.ndim != 1 or indices.shape != data.shape or indptr.shape != (n + 1,):
            raise InputError(f"CSR operator: shapes data {data.shape}, indices {indices.shape}, indptr "
                             f"{indptr.shape} do not describe an {n} x {n} matrix")
        for name, a in (("indices", indices), ("indptr", indptr)):
            if a.size and not np.issubdtype(a.dtype, np.integer):
                raise InputError(f"CSR operator: {name} must be integers, got {a.dtype}")
        if not np.issubdtype(data.dtype, np.number) or np.iscomplexobj(data) or not np.all(np.isfinite(data)):
            raise InputError("CSR operator: data must be finite real numbers")
        if indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
            raise InputError("CSR operator: indptr must rise from 0 to the number of entries")
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise InputError(f"CSR operator: column indices outside 0..{n - 1}")
        return cls(sp.csr_array((data.astype(np.float64), indices.astype(np.int64), indptr.astype(np.int64)),
                                shape=(n, n)))


# --------------------------------------------------------------------------- the method
class SparseApproximation(Approximation):
    """The ``s`` largest-magnitude entries of ``X`` (the best ``s``-sparse approximation).

    Parameters
    ----------
    n_sparse : int or None, default=None
        Entries to keep, ``s``.  When None, the most that fit ``budget``
        (:func:`sparse_entries_for_budget`).  Never more than ``nnz(X)``.
    budget : int or None, default=None
        Stored-number budget (used when ``n_sparse`` is None), counted as
        ``2 s + N + 1`` (:func:`sparse_count`).

    Attributes
    ----------
    operator_ : SparseOperator
    S_ : scipy.sparse.csr_array
        The kept entries.
    n_sparse_ : int
    n_stored_ : int
        ``2 s + N + 1``.
    seconds_ : float
    stop_reason_ : str
        ``"exact"`` (every non-zero kept: the surrogate is ``X``) or
        ``"closed_form"`` (the best ``s``-sparse approximation).
    params_ : dict
        ``n_sparse``, ``nnz`` (of ``X``), ``exact``, ``format`` ("csr"),
        ``count_indices`` (True), ``index_storage`` (index numbers stored,
        ``s + N + 1``) and ``exact_budget`` (numbers that store ``X``
        exactly, ``2 nnz + N + 1``).

    Examples
    --------
    >>> X = np.diag([3.0, -1.0, 2.0])
    >>> a = SparseApproximation(budget=8).fit(X)
    >>> a.params_["n_sparse"], a.n_stored_, a.stop_reason_
    (2, 8, 'closed_form')
    >>> SparseApproximation(budget=10).fit(X).stop_reason_
    'exact'
    """

    _method = "sparse"

    _parameter_constraints = {
        "n_sparse": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
    }

    def __init__(self, n_sparse: int | None = None, *, budget: int | None = None):
        self.n_sparse = n_sparse
        self.budget = budget

    def fit(self, X, *, check_input: bool = True) -> "SparseApproximation":
        """Keep the largest entries of the square matrix ``X`` (dense or sparse).

        ``check_input=False`` skips validating ``X`` (the caller did).

        Raises
        ------
        BudgetError
            When the budget cannot hold one entry (below ``N + 3``).
        """
        from .._errors import BudgetError, ParameterError

        X = self._validate(X, check_input)
        n = X.shape[0]
        if self.n_sparse is None and self.budget is None:
            raise ParameterError("SparseApproximation needs n_sparse or a budget")
        if self.n_sparse is None:
            limit = sparse_entries_for_budget(n, self.budget)
            if limit == 0:
                raise BudgetError(f"budget {self.budget} is below one entry of a {n} x {n} CSR matrix "
                                  f"({sparse_count(n, 1)} numbers: value, column index and {n + 1} row pointers)")
        else:
            limit = min(self.n_sparse, n * n)
        start = time.perf_counter()
        rows, cols, vals = _nonzeros(X)
        kept = top_entries(vals, limit)
        S = sp.csr_array((vals[kept], (rows[kept], cols[kept])), shape=(n, n))
        self.seconds_ = time.perf_counter() - start
        nnz, s = int(vals.size), int(kept.size)
        exact = s == nnz
        self.S_ = S
        self.n_sparse_ = s
        self.operator_ = SparseOperator(S)
        self.n_stored_ = sparse_count(n, s)
        self.stop_reason_ = "exact" if exact else "closed_form"
        self.params_ = {
            "n_sparse": s,
            "nnz": nnz,
            "exact": exact,
            "format": "csr",
            "count_indices": True,
            "index_storage": s + n + 1,
            "exact_budget": sparse_count(n, nnz),
        }
        return self

    def to_dense(self) -> np.ndarray:
        """The kept entries as a dense ``N x N`` array."""
        return self.S_.toarray()


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> SparseApproximation:
    return SparseApproximation(budget=budget)


register(
    MethodSpec(
        name="sparse",
        summary="the largest entries, stored as CSR (exact when every non-zero fits)",
        stores="2·s + N + 1",
        make=_make,
        min_budget=_min_budget,
        order=25,
        label="sparse storage",
        iterative=False,
        # the magnitudes, their selection and the kept entries: 5.0 N^2 float64 measured (N = 256-1000)
        working_memory=lambda n: 6 * 8 * n * n,
    )
)
