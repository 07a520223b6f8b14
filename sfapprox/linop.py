"""Using a fitted Chord factorization: matvec / rmatvec / matmat in O(N·K·M) per column.

:class:`ChordOperator` is a :class:`scipy.sparse.linalg.LinearOperator`, so
it composes with scipy's iterative solvers and eigensolvers, and it adds
``to_dense()`` and the stored-number count.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .chord import chord_offsets

__all__ = ["ChordOperator"]


class ChordOperator(LinearOperator):
    """The product ``W1 @ W2 @ ... @ WM`` of Chord factors, never formed densely.

    Parameters
    ----------
    values : ndarray of shape (M, N, K)
        Factor values; ``values[m, i, k]`` sits at column ``(i + offsets[k]) % N``
        of factor ``m`` (``m = 0`` is the leftmost factor).
    offsets : ndarray of shape (K,), optional
        Chord offsets (default: the reference protocol for ``N``).

    Examples
    --------
    >>> import numpy as np
    >>> op = ChordOperator(np.ones((3, 8, 4)) / 4)
    >>> y = op.matvec(np.ones(8))
    >>> bool(np.allclose(y, 1.0))
    True
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray | None = None):
        values = np.ascontiguousarray(values, dtype=np.float64)
        if values.ndim != 3:
            raise ValueError(f"values must have shape (M, N, K), got {values.shape}")
        n = values.shape[1]
        offsets = chord_offsets(n) if offsets is None else np.asarray(offsets, dtype=np.int64)
        if offsets.shape != (values.shape[2],):
            raise ValueError(f"{len(offsets)} offsets for {values.shape[2]} values per row")
        self.values = values
        self.offsets = offsets
        super().__init__(dtype=np.float64, shape=(n, n))

    @property
    def n_factors(self) -> int:
        return self.values.shape[0]

    @property
    def n_stored(self) -> int:
        """Stored numbers: ``N * K * M`` (positions are implied by the protocol)."""
        return int(self.values.size)

    def _run(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        import torch

        from .sf._kernels import apply_product, apply_product_t

        ws = torch.from_numpy(self.values)
        block = torch.from_numpy(np.ascontiguousarray(B, dtype=np.float64))
        offs = self.offsets.tolist()
        out = apply_product_t(ws, offs, block) if transpose else apply_product(ws, offs, block)
        return out.numpy()

    def _matmat(self, B: np.ndarray) -> np.ndarray:
        return self._run(B, transpose=False)

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._run(np.reshape(x, (-1, 1)), transpose=False).ravel()

    def _rmatmat(self, B: np.ndarray) -> np.ndarray:
        return self._run(B, transpose=True)

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._run(np.reshape(x, (-1, 1)), transpose=True).ravel()

    def _adjoint(self) -> LinearOperator:
        return _TransposedChord(self)

    def to_dense(self) -> np.ndarray:
        """The full ``N x N`` product, built with ``O(M K N^2)`` work."""
        import torch

        from .sf._kernels import chord_product

        return chord_product(torch.from_numpy(self.values), self.offsets.tolist()).numpy()


class _TransposedChord(LinearOperator):
    def __init__(self, op: ChordOperator):
        self._op = op
        super().__init__(dtype=op.dtype, shape=op.shape)

    def _matmat(self, B):
        return self._op._rmatmat(B)

    def _rmatmat(self, B):
        return self._op._matmat(B)

    def _adjoint(self):
        return self._op
