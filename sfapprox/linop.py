"""Using a fitted Chord factorization: matvec / rmatvec / matmat in O(N·K·M) per column.

:class:`ChordOperator` is a :class:`scipy.sparse.linalg.LinearOperator`, so
it composes with scipy's iterative solvers and eigensolvers, and it adds
``to_dense()`` and the stored-number count.  It holds the factors of any SF
support: offset-based (``"chord"``, ``"symmetric"``) or ``"butterfly"``
(``O(N·M)`` per column, two values per row).  :class:`HybridOperator` is the
sum of such a product and a low-rank and/or sparse correction (the sf+lr and
sf+s surrogates), ``O(N·K·M + N·r + s)`` per column.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .chord import OFFSET_SUPPORTS, SUPPORTS, is_power_of_two, support_offsets

__all__ = ["ChordOperator", "HybridOperator"]


class ChordOperator(LinearOperator):
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
    values, offsets, support
        As given (``offsets`` is empty for the butterfly).

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
        values = np.ascontiguousarray(values, dtype=np.float64)
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
        self.values = values
        self.offsets = offsets
        self.support = support
        super().__init__(dtype=np.float64, shape=(n, n))

    @property
    def n_factors(self) -> int:
        return self.values.shape[0]

    @property
    def n_stored(self) -> int:
        """Stored numbers (positions are implied by the protocol).

        ``N * K * M`` for offset-based supports; ``2 * N * M`` for the
        butterfly (:func:`sfapprox.budget.butterfly_count`).
        """
        if self.support == "butterfly":
            from .budget import butterfly_count

            return butterfly_count(self.shape[0], self.n_factors)
        return int(self.values.size)

    def _run(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        import torch

        ws = torch.from_numpy(self.values)
        block = torch.from_numpy(np.ascontiguousarray(B, dtype=np.float64))
        if self.support == "butterfly":
            from .sf import _butterfly

            out = _butterfly.apply_product_t(ws, block) if transpose else _butterfly.apply_product(ws, block)
            return out.numpy()
        from .sf._kernels import apply_product, apply_product_t

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

        if self.support == "butterfly":
            from .sf._butterfly import butterfly_product

            return butterfly_product(torch.from_numpy(self.values)).numpy()
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


class HybridOperator(LinearOperator):
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
        from .budget import hybrid_count

        # Values per row: len(offsets) for offset-based factors, 2 for the butterfly.
        k = 0 if self.chord is None else self.chord.values.shape[2]
        return hybrid_count(
            self.shape[0], self.n_factors, k, rank=self.rank, n_sparse=int(self.sparse.nnz),
            count_indices=self.count_indices, singular_values=self.singular_values,
        )

    def _matmat(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=np.float64)
        out = self.U @ (self.s[:, None] * (self.Vt @ B)) + self.sparse @ B
        if self.chord is not None:
            out += self.chord.matmat(B)
        return out

    def _rmatmat(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=np.float64)
        out = self.Vt.T @ (self.s[:, None] * (self.U.T @ B)) + self.sparse.T @ B
        if self.chord is not None:
            out += self.chord.rmatmat(B)
        return out

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._matmat(np.reshape(x, (-1, 1))).ravel()

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._rmatmat(np.reshape(x, (-1, 1))).ravel()

    def to_dense(self) -> np.ndarray:
        """The full ``N x N`` sum."""
        out = (self.U * self.s) @ self.Vt + self.sparse.toarray()
        if self.chord is not None:
            out += self.chord.to_dense()
        return out
