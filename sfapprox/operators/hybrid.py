"""Sums of parts: Chord factors plus a low-rank and a sparse correction (sf+lr, sf+s, TSVD, RPCA, NMF).

:class:`HybridOperator` is ``W1 ... WM + U diag(s) V^T + S``, each part
optional: every product costs ``O(N·K·M + N·r + s)`` per column (the compiled
Chord kernel, BLAS for the low-rank part, CSR for the sparse one), and
nothing ``N x N`` is formed.  Plain low rank (TSVD, NMF's ``W H``) and low rank
plus sparse (RPCA) are hybrids without factors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp

from .._errors import ParameterError
from .._validation import canonical_csr
from ..budget import hybrid_count
from ..formats import shape_text
from ._base import SurrogateOperator, check_finite, register_operator
from .chord import CHORD_DATASETS, CHORD_DESCRIPTION, ChordOperator

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["HybridOperator"]


@register_operator
class HybridOperator(SurrogateOperator):
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
        Whether each sparse entry is charged for its position too (2 numbers).  False, the default here,
        is the SF paper's convention (values only); the estimators and :func:`~sfapprox.compare` build
        theirs with True by default (and a comparison charges an included operator by its own rule).
        :attr:`n_stored` counts by this attribute, which says the rule used.

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

    kind: ClassVar[str] = "hybrid"
    layout: ClassVar[str] = "root"  # hybrids sit at the file's root, as since format version 2
    description: ClassVar[str] = (
        "A = P + U diag(s) V^T + S: P the Chord factor product of 'values'/'offsets' (absent when n_factors "
        "is 0; " + CHORD_DESCRIPTION + "), U = lr_U, s = lr_s, V^T = lr_Vt (when lr_singular_values is "
        "false the part is U V^T and lr_s holds ones), S the sparse matrix with S[sparse_rows[j], "
        "sparse_cols[j]] = sparse_vals[j]."
    )
    dataset_descriptions: ClassVar[dict[str, str]] = {
        **CHORD_DATASETS,
        "lr_U": "left factor U, shape (n, r)",
        "lr_s": "singular values s, shape (r,) (ones when the file's lr_singular_values is false)",
        "lr_Vt": "right factor V^T, shape (r, n)",
        "sparse_rows": "row of each sparse entry (0-based)",
        "sparse_cols": "column of each sparse entry (0-based)",
        "sparse_vals": "value of each sparse entry",
    }

    def __init__(
        self,
        n: int,
        *,
        chord: ChordOperator | None = None,
        low_rank: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        sparse=None,
        count_indices: bool = False,
    ):
        if chord is not None and chord.shape != (n, n):
            raise ParameterError(f"Chord part has shape {shape_text(chord.shape)}, expected {n:,} x {n:,}")
        if low_rank is None:
            low_rank = (np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)))
        #: whether the low-rank part stores its singular values (U diag(s) V^T) or is U V^T
        self.singular_values = low_rank[1] is not None
        if not self.singular_values:
            low_rank = (low_rank[0], np.ones(np.shape(low_rank[0])[1]), low_rank[2])
        # C-contiguous, as a factors file reads them back: a fit's Fortran-ordered U (RPCA, NMF) took
        # another BLAS path than the loaded copy, whose products then differed in the last bits.
        U, sig, Vt = (np.ascontiguousarray(a, dtype=np.float64) for a in low_rank)
        if U.shape != (n, sig.size) or Vt.shape != (sig.size, n):
            raise ParameterError(f"low-rank part shapes (U {shape_text(U.shape)}; s {shape_text(sig.shape)}; Vt {shape_text(Vt.shape)}) "
                                 f"do not match N={n:,}")
        if sparse is None:
            sparse = sp.csr_array((n, n))
        if sparse.shape != (n, n):
            raise ParameterError(f"sparse part has shape {shape_text(sparse.shape)}, expected {n:,} x {n:,}")
        self.chord = chord
        self.U, self.s, self.Vt = U, sig, Vt
        # As a factors file holds it (COO entries, a repeated position refused): a part with repeated entries
        # was saved as a file that load_factors refused as damaged and counted each repeat as a stored
        # number, and unsorted columns summed a row in another order than the loaded copy (products that
        # differed in the last bits).
        self.sparse = canonical_csr(sparse)
        self.count_indices = bool(count_indices)
        self._sparse_t = None  # (sparse, its transpose as CSR), made on the first transposed product
        super().__init__(n)

    @property
    def rank(self) -> int:
        """Rank ``r`` of the low-rank part (0: none)."""
        return int(self.s.size)

    @property
    def n_factors(self) -> int:
        """Number of Chord factors ``M`` (0: none)."""
        return 0 if self.chord is None else self.chord.n_factors

    def _holds(self) -> str:
        parts = [] if self.chord is None else [f"Chord factors ({self.chord._holds()})"]
        parts += [f"rank {self.rank}"] if self.rank else []
        parts += [f"{self.sparse.nnz:,} sparse entries"] if self.sparse.nnz else []
        return " + ".join(parts) or "no parts (zero)"

    @property
    def n_stored(self) -> int:
        """Stored numbers, by :func:`sfapprox.budget.hybrid_count`, each sparse entry charged 2 numbers
        where :attr:`count_indices` is True, else 1."""
        # Values per row: len(offsets) for offset-based factors, 2 for the butterfly.
        k = 0 if self.chord is None else self.chord.values.shape[2]
        return hybrid_count(
            self.shape[0], self.n_factors, k, rank=self.rank, n_sparse=int(self.sparse.nnz),
            count_indices=self.count_indices, singular_values=self.singular_values,
        )

    def factored_parts(self) -> tuple[np.ndarray, np.ndarray, Any] | None:
        """``(U diag(s), V^T, S)`` without Chord factors (TSVD, RPCA, NMF); None with them.

        Returns
        -------
        tuple or None
            ``(L, R, S)``: ``L`` of shape ``(N, r)``, ``R`` of shape ``(r, N)``, ``S`` a scipy sparse
            array or None; None where the surrogate is not low rank plus sparse.
        """
        if self.chord is not None:
            return None
        return self.U * self.s, self.Vt, self.sparse if self.sparse.nnz else None

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        """``A @ B`` or ``A.T @ B``: the Chord kernel, two BLAS products and one CSR product."""
        # float64, as every other kind computes: a longdouble operand kept its dtype here (float128 out,
        # products without BLAS) where the Chord kernel and the other kinds returned float64.
        B = np.asarray(B, dtype=np.float64)
        if self.chord is not None:
            out = self.chord._stack.apply(B, transpose)  # a fresh array: added into below
        else:
            out = np.zeros(B.shape)
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
        """The full ``N x N`` sum.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        out = (self.U * self.s) @ self.Vt + self.sparse.toarray()
        if self.chord is not None:
            out += self.chord.to_dense()
        return out

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
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
        sfapprox.operators._torch.HybridLinear
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
        from ._torch import HybridLinear

        return HybridLinear.from_operator(self, dtype=dtype, device=device)

    # ------------------------------------------------------------------ the saved layout
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The Chord part's ``values``/``offsets`` (empty without factors), ``lr_U``, ``lr_s``,
        ``lr_Vt`` and the sparse part as COO ``sparse_rows``/``_cols``/``_vals``.

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        n = self.shape[0]
        chord = self.chord
        coo = self.sparse.tocoo()
        arrays = {
            "values": np.zeros((0, n, 0)) if chord is None else chord.values,
            "offsets": np.zeros(0, np.int64) if chord is None else chord.offsets,
            "lr_U": self.U, "lr_s": self.s, "lr_Vt": self.Vt,
            "sparse_rows": coo.row.astype(np.int64), "sparse_cols": coo.col.astype(np.int64),
            "sparse_vals": coo.data.astype(np.float64),
        }
        attrs = {"support": "chord" if chord is None else chord.support, "n_factors": self.n_factors,
                 "count_indices": self.count_indices, "lr_singular_values": self.singular_values}
        return arrays, attrs

    def array_names(self) -> tuple[str, ...]:
        """:meth:`to_arrays`' names, without its COO copy of the sparse part
        (:meth:`SurrogateOperator.array_names`).

        Returns
        -------
        tuple of str
            The dataset names a factors file of this kind holds.
        """
        return ("values", "offsets", "lr_U", "lr_s", "lr_Vt", "sparse_rows", "sparse_cols", "sparse_vals")

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "HybridOperator":
        """Rebuild from :meth:`to_arrays` (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        HybridOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        values = np.asarray(arrays["values"])
        chord = ChordOperator.from_arrays(arrays, attrs) if values.ndim == 3 and values.shape[0] else None
        U, s, Vt = (np.asarray(arrays[k]) for k in ("lr_U", "lr_s", "lr_Vt"))
        rows, cols, vals = (np.asarray(arrays[k]) for k in ("sparse_rows", "sparse_cols", "sparse_vals"))
        check_finite("the low-rank part", "hybrid", U, s, Vt)
        check_finite("sparse_vals", "hybrid", vals)
        n = U.shape[0] if U.ndim == 2 else -1
        if U.ndim != 2 or s.ndim != 1 or Vt.ndim != 2 or U.shape[1] != s.size or Vt.shape != (s.size, n):
            raise ParameterError(f"low-rank part shapes (U {shape_text(U.shape)}; s {shape_text(s.shape)}; Vt {shape_text(Vt.shape)}) "
                             f"do not make a rank-{s.size} "
                             "square matrix")
        if values.ndim == 3 and values.shape[1] != n:
            raise ParameterError(f"values has shape {shape_text(values.shape)}, expected (M, {n:,}, K)")
        if rows.shape != cols.shape or rows.shape != vals.shape or rows.ndim != 1:
            raise ParameterError("sparse_rows, sparse_cols and sparse_vals differ in shape")
        for name, index in (("sparse_rows", rows), ("sparse_cols", cols)):
            if index.size and (not np.issubdtype(index.dtype, np.integer) or index.min() < 0 or index.max() >= n):
                raise ParameterError(f"{name} holds positions outside 0..{n - 1}")
        sparse = sp.csr_array((vals.astype(np.float64), (rows.astype(np.int64), cols.astype(np.int64))), shape=(n, n))
        if sparse.nnz != rows.size:
            raise ParameterError("sparse entries repeat a position")
        singular = bool(attrs.get("lr_singular_values", True))
        return cls(n, chord=chord, low_rank=(U, s if singular else None, Vt), sparse=sparse,
                   count_indices=bool(attrs.get("count_indices", False)))
