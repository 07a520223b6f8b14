"""The feature covariance of a wide table, from the table alone.

For a table of ``m`` samples by ``N`` features the covariance is ``N x N``
(32 GiB at ``N = 65,536``) while the table is ``m x N``; with ``A_c`` the
centred table, a column block is ``A_c^T A_c[:, J] / (m - 1)``
(``O(m N |J|)``), and ``X @ B`` is ``A_c^T (A_c B) / (m - 1)`` — no pass
over the ``N^2`` entries.  The same numbers as ``np.cov(table, rowvar=False)``
(ddof = 1), what ``load_matrix(covariance=True)`` forms for smaller tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import InputError
from ..formats import shape_phrase
from .._params import MEMORY_LIMIT, check_values
from .._validation import array_of, first_nonfinite, float64_table
from ._base import MatrixSource, checked_product

__all__ = ["CovarianceMatrix"]


class CovarianceMatrix(MatrixSource):
    """The sample covariance (ddof = 1) of a samples x features table, never formed.

    Parameters
    ----------
    table : array of shape (m, N)
        One sample per row, ``m >= 2``, every cell finite.
    name : str, default="covariance"
        What the matrix is called in tables and messages.
    max_memory : int, str or None, default=None
        Memory limit in bytes (or a size such as ``"4G"``, stored in bytes) for the table's copies made here
        (its centred float64 copy, a sparse table's dense one), and the source's :attr:`max_memory` afterwards
        (None: the default limit).

    Attributes
    ----------
    centred : numpy.ndarray, shape (m, N)
        The table less its column means (float64, C-contiguous).

    Raises
    ------
    InputError
        For a table that is not 2-D and real, has fewer than 2 samples, or a
        non-finite cell.

    Examples
    --------
    >>> T = np.random.default_rng(0).standard_normal((5, 8))
    >>> C = CovarianceMatrix(T)
    >>> C.n, bool(np.allclose(C.to_dense(), np.cov(T, rowvar=False)))
    (8, True)
    """

    kind = "covariance"
    column_copies = 2  # the block and the product's temporary
    symmetric = True
    psd = True

    def __init__(self, table, *, name: str = "covariance", max_memory: int | str | None = None) -> None:
        # the limit in bytes, named apart from the parameter (which takes "4G" too): its readers take an int
        limit: int | None = check_values({"max_memory": max_memory}, {"max_memory": MEMORY_LIMIT},
                                         "CovarianceMatrix")["max_memory"]
        arr = array_of(table, name, "the table", limit)
        if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise InputError(f"{name}: a covariance needs a real samples x features table, got {shape_phrase(arr.shape)} "
                             f"of {arr.dtype}")
        if arr.shape[0] < 2:
            raise InputError(f"{name}: a covariance needs at least 2 samples (rows), got {arr.shape[0]}")
        bad = first_nonfinite(arr)  # (a whole table's mask was made whatever the memory limit said)
        if bad is not None:
            raise InputError(f"{name}: cell [{bad[0]}, {bad[1]}] is {arr[bad]}; a covariance needs complete data")
        centred = float64_table(arr, name, "the table", limit, copy=True)  # (it was copied unchecked)
        centred -= centred.mean(axis=0)
        self.centred = centred
        self._denominator = float(arr.shape[0] - 1)
        super().__init__(arr.shape[1], name)
        self.max_memory = limit
        self.notes.append(f"sample covariance of {arr.shape[0]:,} samples x {arr.shape[1]:,} features, "
                          "computed by columns from the table (never formed)")

    def _columns(self, J: np.ndarray) -> np.ndarray:
        return (self.centred.T @ self.centred[:, J]) / self._denominator

    def diagonal(self) -> np.ndarray:
        return np.einsum("ij,ij->j", self.centred, self.centred) / self._denominator

    @checked_product
    def matmat(self, B: np.ndarray) -> np.ndarray:
        """``X @ B`` (as :meth:`MatrixSource.matmat`) by ``A_c^T (A_c B) / (m - 1)``: ``O(m N k)``,
        no pass over the ``N^2`` entries.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)
            The operand.

        Returns
        -------
        numpy.ndarray
            ``X @ B``, of ``B``'s shape.
        """
        B = np.asarray(B, dtype=np.float64)
        return self.centred.T @ (self.centred @ B) / self._denominator

    rmatmat = matmat  # a covariance is symmetric: X.T @ B is X @ B

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "samples": int(self.centred.shape[0]), "features": self.n}
