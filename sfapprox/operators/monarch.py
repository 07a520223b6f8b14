"""Monarch surrogates: a block-rank-r Monarch matrix (``monarch``), and one plus a low-rank term (``monarch+lr``).

Both are fitted in :mod:`sfapprox.baselines.monarch` and
:mod:`sfapprox.baselines.monarch_lr`; here they are applied (two batched
matmuls per product, ``O(r N' (b1 + b2))`` per column), densified and saved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp

from .._errors import ParameterError
from ..budget import tsvd_count
from ..formats import counted, shape_phrase, shape_text
from ._base import SurrogateOperator, register_operator

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["MonarchOperator", "MonarchLowRankOperator", "slabs", "from_slabs", "monarch_slabs"]


def slabs(X, b1: int, b2: int) -> np.ndarray:
    """``X`` padded to ``N' = b1 b2`` as its slabs ``S[q, k, a, l] = X[a b2 + q, k b2 + l]``.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (n, n)
        The matrix, with ``n <= b1 b2``.
    b1, b2 : int
        The Monarch block sizes.

    Returns
    -------
    numpy.ndarray, shape (b2, b1, b1, b2)
    """
    n = X.shape[0]
    big = b1 * b2
    Xp = np.zeros((big, big))
    Xp[:n, :n] = X.toarray() if hasattr(X, "toarray") else X
    return Xp.reshape(b1, b2, b1, b2).transpose(1, 2, 0, 3)


def from_slabs(slabs: np.ndarray, n: int) -> np.ndarray:
    """The inverse of :func:`slabs`, cropped to ``n x n``.

    Parameters
    ----------
    slabs : numpy.ndarray, shape (b2, b1, b1, b2)
        What :func:`slabs` returns (or :func:`monarch_slabs`).
    n : int
        The order to crop to.

    Returns
    -------
    numpy.ndarray, shape (n, n)
    """
    b2, b1 = slabs.shape[0], slabs.shape[1]
    return slabs.transpose(2, 0, 1, 3).reshape(b1 * b2, b1 * b2)[:n, :n]


def monarch_slabs(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The slabs ``S[q, k] = L-columns @ R-rows`` of a Monarch matrix, ``(b2, b1, b1, b2)``.

    Parameters
    ----------
    left : numpy.ndarray, shape (b2, b1, b1, r)
        ``MonarchOperator.left``.
    right : numpy.ndarray, shape (b1, r, b2, b2)
        ``MonarchOperator.right``.
    """
    return left.transpose(0, 2, 1, 3) @ right.transpose(2, 0, 1, 3)


#: How a saved Monarch part's arrays make the matrix (in every file's description).
_MONARCH_FORMULA = ("D[a*b2 + q, k*b2 + l] = sum_t left[q, a, k, t] * right[k, t, q, l] (left: (b2, b1, b1, r), "
                    "right: (b1, r, b2, b2)), cropped to n x n; with numpy, "
                    "np.einsum('qakt,ktql->aqkl', left, right).reshape(b1*b2, b1*b2)[:n, :n]")


class _Blockwise(SurrogateOperator):
    """Products through ``_product(B)`` / ``_product_t(B)`` on 2-D blocks (a vector is a 1-column block)."""

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        block = np.reshape(B, (B.shape[0], -1))
        out = self._product_t(block) if transpose else self._product(block)
        return out.reshape(B.shape)


@register_operator
class MonarchOperator(_Blockwise):
    """A block-rank-``r`` Monarch matrix ``Σ_t P L^(t) P^T R^(t)``, cropped to ``n x n``.

    Parameters
    ----------
    left : array_like, shape (b2, b1, b1, r)
        The blocks of the ``L^(t)``.
    right : array_like, shape (b1, r, b2, b2)
        The blocks of the ``R^(t)``.
    n : int
        The order of the matrix, ``1 <= n <= b1 b2``.

    Attributes
    ----------
    left, right : numpy.ndarray
        As given, float64 and C-contiguous.
    left_block, right_block : int
        ``b1`` and ``b2``.
    rank : int
        The block rank ``r``.
    padded_n : int
        ``N' = b1 b2`` (property).

    Notes
    -----
    Saved layout: ``kind = "monarch"``.  Arrays ``left`` of shape ``(b2, b1, b1, r)``
    (``left[q, a, k, t]`` = entry ``(a, k)`` of the ``q``-th ``b1 x b1`` block
    of ``L^(t)``) and ``right`` of shape ``(b1, r, b2, b2)``
    (``right[k, t, q, l]`` = entry ``(q, l)`` of the ``k``-th ``b2 x b2``
    block of ``R^(t)``); attribute ``n`` (``<= b1 b2``).  The dense matrix,
    with numpy alone::

        D = np.einsum("qakt,ktql->aqkl", left, right).reshape(b1 * b2, b1 * b2)[:n, :n]

    i.e. ``D[a b2 + q, k b2 + l] = Σ_t left[q, a, k, t] right[k, t, q, l]``.
    ``n_stored = left.size + right.size = r (b1 b2) (b1 + b2)``.  A product
    with ``c`` columns costs ``O(r N' (b1 + b2) c)`` (two batched matmuls).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> op = MonarchOperator(rng.random((3, 2, 2, 1)), rng.random((2, 1, 3, 3)), 6)
    >>> D = op.to_dense()
    >>> bool(np.allclose(op.matvec(np.ones(6)), D.sum(1))), op.n_stored
    (True, 30)
    """

    kind: ClassVar[str] = "monarch"
    description: ClassVar[str] = f"A Monarch matrix: {_MONARCH_FORMULA}."

    def __init__(self, left: np.ndarray, right: np.ndarray, n: int):
        left = np.ascontiguousarray(left, dtype=np.float64)
        right = np.ascontiguousarray(right, dtype=np.float64)
        if left.ndim != 4 or right.ndim != 4:
            raise ParameterError(f"left and right must be 4-way arrays, got left: {shape_phrase(left.shape)}; "
                                 f"right: {shape_phrase(right.shape)}")
        b2, b1, b1b, r = left.shape
        if b1b != b1 or right.shape != (b1, r, b2, b2):
            raise ParameterError(f"left must be (b2, b1, b1, r) and right (b1, r, b2, b2), got left: shape {shape_text(left.shape)}; "
                                 f"right: shape {shape_text(right.shape)}")
        n = int(n)
        if not 1 <= n <= b1 * b2:
            raise ParameterError(f"n = {n} must be between 1 and b1·b2 = {b1 * b2}")
        self.left, self.right = left, right
        self.left_block, self.right_block, self.rank = b1, b2, r
        super().__init__(n)

    @property
    def padded_n(self) -> int:
        """``N' = b1 b2``, the padded order."""
        return self.left_block * self.right_block

    def _holds(self) -> str:
        padded = f", padded to N' = {self.padded_n}" if self.padded_n != self.shape[0] else ""
        return f"block rank {self.rank}, blocks b1 = {self.left_block}, b2 = {self.right_block}{padded}"

    @property
    def n_stored(self) -> int:
        """``r N' (b1 + b2)`` (:func:`~sfapprox.budget.monarch_count`)."""
        return int(self.left.size + self.right.size)

    def _padded(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=np.float64)
        out = np.zeros((self.padded_n, B.shape[1]))
        out[: self.shape[0]] = B
        return out

    def _product(self, B: np.ndarray) -> np.ndarray:
        b1, b2, r = self.left_block, self.right_block, self.rank
        c = B.shape[1]
        x = self._padded(B).reshape(b1, b2, c)
        y = self.right.reshape(b1, r * b2, b2) @ x  # R: (k, (t, q), c)
        y = y.reshape(b1, r, b2, c).transpose(2, 0, 1, 3).reshape(b2, b1 * r, c)  # P^T: (q, (k, t), c)
        z = self.left.reshape(b2, b1, b1 * r) @ y  # L: (q, a, c)
        return z.transpose(1, 0, 2).reshape(b1 * b2, c)[: self.shape[0]]  # P: rows a b2 + q

    def _product_t(self, G: np.ndarray) -> np.ndarray:
        b1, b2, r = self.left_block, self.right_block, self.rank
        c = G.shape[1]
        g = self._padded(G).reshape(b1, b2, c).transpose(1, 0, 2)  # (q, a, c)
        z = self.left.reshape(b2, b1, b1 * r).transpose(0, 2, 1) @ g  # (q, (k, t), c)
        z = z.reshape(b2, b1, r, c).transpose(1, 2, 0, 3).reshape(b1, r * b2, c)  # (k, (t, q), c)
        x = self.right.reshape(b1, r * b2, b2).transpose(0, 2, 1) @ z  # (k, l, c)
        return x.reshape(b1 * b2, c)[: self.shape[0]]

    def to_dense(self) -> np.ndarray:
        """The ``n x n`` matrix, ``O(r N'^2)``.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        return from_slabs(monarch_slabs(self.left, self.right), self.shape[0])

    def to_sparse_factors(self) -> list:
        """The two sparse factors whose product is the operator: ``[P L P^T, R]`` with the ``r`` terms side by side.

        ``R`` stacks the block-diagonal ``R^(t)`` (``r N' x N'``), the left factor holds the
        ``P L^(t) P^T`` next to each other (``N' x r N'``); the left factor keeps its ``n`` leading
        rows and the right one its ``n`` leading columns, so the product is the ``n x n`` operator.

        Returns
        -------
        list of scipy.sparse.csr_array
            ``[Lf, Rf]`` of shapes ``(n, r N')`` and ``(r N', n)``, one stored entry per kept value of
            ``left`` and ``right`` (explicit zeros included); ``Lf @ Rf`` equals :meth:`to_dense`.

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> op = MonarchOperator(rng.random((3, 2, 2, 2)), rng.random((2, 2, 3, 3)), 5)
        >>> Lf, Rf = op.to_sparse_factors()
        >>> Lf.shape, Rf.shape, bool(np.allclose((Lf @ Rf).toarray(), op.to_dense()))
        ((5, 12), (12, 5), True)
        """
        b2, r, big, n = self.right_block, self.rank, self.padded_n, self.shape[0]
        # The middle index of the term t, block k, row q of R^(t): t N' + k b2 + q (as _product's y).
        q, a, k, t = np.indices(self.left.shape)
        left = sp.csr_array((self.left.ravel(), ((a * b2 + q).ravel(), (t * big + k * b2 + q).ravel())),
                            shape=(big, r * big))
        k, t, q, col = np.indices(self.right.shape)
        right = sp.csr_array((self.right.ravel(), ((t * big + k * b2 + q).ravel(), (k * b2 + col).ravel())),
                             shape=(r * big, big))
        return [left[:n], right[:, :n]]

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying this matrix as ``nn.Linear(n, n, bias=False)`` does.

        ``module(x) = x @ A.T`` over the last dimension of ``x``, by the two batched products of
        :meth:`matvec` (``O(r N' (b1 + b2))`` per vector); ``left`` and ``right`` are parameters, and
        gradients reach them and the input.

        Parameters
        ----------
        dtype : torch.dtype, optional
            Default: ``torch.get_default_dtype()``.
        device : torch.device or str, optional
            Default: CPU.

        Returns
        -------
        sfapprox.operators._torch.MonarchLinear
            ``.to_operator()`` turns it back into a :class:`MonarchOperator`.

        Examples
        --------
        >>> import torch
        >>> rng = np.random.default_rng(0)
        >>> op = MonarchOperator(rng.random((3, 2, 2, 2)), rng.random((2, 2, 3, 3)), 5)
        >>> x = torch.randn(4, 5, dtype=torch.float64)
        >>> bool(torch.allclose(op.to_torch(dtype=torch.float64)(x), x @ torch.from_numpy(op.to_dense()).T))
        True
        """
        from ._torch import MonarchLinear

        return MonarchLinear(self.left, self.right, self.shape[0], dtype=dtype, device=device)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``{"left", "right"}`` and ``{"n": n}`` (see the class docstring's layout).

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        return {"left": self.left, "right": self.right}, {"n": int(self.shape[0])}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "MonarchOperator":
        """Rebuild from :meth:`to_arrays` (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        MonarchOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        try:
            left, right, n = np.asarray(arrays["left"]), np.asarray(arrays["right"]), int(attrs["n"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"Monarch operator: missing or unreadable part ({exc})") from None
        for name, a in (("left", left), ("right", right)):
            if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a) or not np.all(np.isfinite(a)):
                raise ParameterError(f"Monarch operator: {name} must hold finite real numbers")
        try:
            return cls(left, right, n)
        except ValueError as exc:
            raise ParameterError(f"Monarch operator: {exc}") from None


@register_operator
class MonarchLowRankOperator(_Blockwise):
    """A Monarch matrix plus a low-rank matrix, ``M + U diag(s) Vt`` (either part may be absent).

    Parameters
    ----------
    n : int
        The order of the matrix.
    left, right : array_like, optional
        The Monarch part (:class:`MonarchOperator`'s arrays); both or neither.
    U : array_like, shape (n, k), optional
    s : array_like, shape (k,), optional
    Vt : array_like, shape (k, n), optional
        The low-rank part ``U diag(s) Vt``; all None: none.

    Attributes
    ----------
    monarch : MonarchOperator or None
        The Monarch part.
    U, s, Vt : numpy.ndarray
        The low-rank part (``k = 0`` when absent).

    Notes
    -----
    Saved layout: ``kind = "monarch+lr"``.  Arrays ``left`` and ``right`` (the Monarch part,
    layout of :class:`MonarchOperator`; absent
    when there is none), ``U`` ``(n, k)``, ``s`` ``(k,)`` and ``Vt`` ``(k, n)``
    (``k`` may be 0); attribute ``n``.  With numpy alone::

        D = U @ np.diag(s) @ Vt (+ the Monarch part's dense matrix)

    ``n_stored`` = the Monarch part's + ``k (2n + 1)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> U, Vt = rng.random((6, 1)), rng.random((1, 6))
    >>> op = MonarchLowRankOperator(6, left=rng.random((3, 2, 2, 1)), right=rng.random((2, 1, 3, 3)),
    ...                             U=U, s=np.ones(1), Vt=Vt)
    >>> bool(np.allclose(op.matvec(np.ones(6)), op.to_dense().sum(1))), op.n_stored
    (True, 43)
    """

    kind: ClassVar[str] = "monarch+lr"
    description: ClassVar[str] = (f"A = M + U diag(s) Vt: M the Monarch matrix of 'left'/'right' (absent when there "
                                  f"are none; {_MONARCH_FORMULA}), U (n, k), s (k,), Vt (k, n).")

    def __init__(self, n: int, *, left=None, right=None, U=None, s=None, Vt=None):
        n = int(n)
        self.monarch = None if left is None else MonarchOperator(left, right, n)
        k = 0 if s is None else len(s)
        self.U = np.zeros((n, 0)) if U is None else np.ascontiguousarray(U, dtype=np.float64)
        self.s = np.zeros(0) if s is None else np.ascontiguousarray(s, dtype=np.float64).ravel()
        self.Vt = np.zeros((0, n)) if Vt is None else np.ascontiguousarray(Vt, dtype=np.float64)
        if self.U.shape != (n, k) or self.Vt.shape != (k, n):
            raise ParameterError(f"U of shape {shape_text(self.U.shape)}, {counted(k, 'singular value')} and Vt of shape "
                                 f"{shape_text(self.Vt.shape)} do not make a rank-{k} "
                             f"{n:,} x {n:,} matrix")
        super().__init__(n)

    @property
    def n_stored(self) -> int:
        """The Monarch part's numbers plus ``k (2n + 1)``."""
        return (0 if self.monarch is None else self.monarch.n_stored) + tsvd_count(self.shape[0], len(self.s))

    def _holds(self) -> str:
        parts = [] if self.monarch is None else [f"Monarch ({self.monarch._holds()})"]
        parts += [f"rank {len(self.s)}"] if len(self.s) else []
        return " + ".join(parts) or "no parts (zero)"

    def _product(self, B: np.ndarray) -> np.ndarray:
        B = np.asarray(B, dtype=np.float64)
        out = self.U @ (self.s[:, None] * (self.Vt @ B))
        return out if self.monarch is None else out + self.monarch._product(B)

    def _product_t(self, G: np.ndarray) -> np.ndarray:
        G = np.asarray(G, dtype=np.float64)
        out = self.Vt.T @ (self.s[:, None] * (self.U.T @ G))
        return out if self.monarch is None else out + self.monarch._product_t(G)

    def to_dense(self) -> np.ndarray:
        """The ``n x n`` matrix.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        out = (self.U * self.s) @ self.Vt
        return out if self.monarch is None else out + self.monarch.to_dense()

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying this sum as ``nn.Linear(n, n, bias=False)`` does.

        ``module(x) = x @ A.T`` over the last dimension of ``x``: the Monarch part as
        :meth:`MonarchOperator.to_torch`, the low-rank part as two thin products
        (``O(r N' (b1 + b2) + k n)`` per vector); every array is a parameter, and gradients reach
        them and the input.

        Parameters
        ----------
        dtype : torch.dtype, optional
            Default: ``torch.get_default_dtype()``.
        device : torch.device or str, optional
            Default: CPU.

        Returns
        -------
        sfapprox.operators._torch.MonarchLowRankLinear
            ``.to_operator()`` turns it back into a :class:`MonarchLowRankOperator`.
        """
        from ._torch import MonarchLowRankLinear

        return MonarchLowRankLinear.from_operator(self, dtype=dtype, device=device)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``{"U", "s", "Vt"}`` plus ``{"left", "right"}`` when there is a Monarch part; ``{"n": n}``.

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        arrays = {"U": self.U, "s": self.s, "Vt": self.Vt}
        if self.monarch is not None:
            arrays.update(left=self.monarch.left, right=self.monarch.right)
        return arrays, {"n": int(self.shape[0])}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> MonarchLowRankOperator:
        """Rebuild from :meth:`to_arrays` (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        MonarchLowRankOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        try:
            parts = {name: np.asarray(arrays[name]) for name in ("U", "s", "Vt")}
            n = int(attrs["n"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"Monarch + low-rank operator: missing or unreadable part ({exc})") from None
        if ("left" in arrays) != ("right" in arrays):
            raise ParameterError("Monarch + low-rank operator: left and right come together")
        for name, a in parts.items():
            if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a) or not np.all(np.isfinite(a)):
                raise ParameterError(f"Monarch + low-rank operator: {name} must hold finite real numbers")
        if "left" in arrays:  # the Monarch part: MonarchOperator's own checks
            monarch = MonarchOperator.from_arrays(arrays, {"n": n})
            parts.update(left=monarch.left, right=monarch.right)
        try:
            return cls(n, **parts)
        except ValueError as exc:
            raise ParameterError(f"Monarch + low-rank operator: {exc}") from None
