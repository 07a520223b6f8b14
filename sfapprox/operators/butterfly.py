"""The hierarchical butterfly's surrogate: a butterfly product of order ``N' = 2^L``, cropped to ``n x n``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._errors import ParameterError
from ..formats import counted
from ._base import SurrogateOperator, padded_rows, register_operator
from .chord import ChordOperator

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["PaddedButterflyOperator"]


@register_operator
class PaddedButterflyOperator(SurrogateOperator):
    """The leading ``n x n`` block of a butterfly product of order ``N' = 2^L > n``.

    Parameters
    ----------
    values : ndarray of shape (L, N', 2)
        Butterfly factor values of order ``N' = 2^L`` (as :class:`ChordOperator`
        with ``support="butterfly"`` takes them).
    n : int
        The order of the matrix, ``1 <= n <= N'`` (``ValueError`` otherwise).

    Attributes
    ----------
    inner : ChordOperator
        The butterfly product of order ``N'``.
    values : ndarray of shape (L, N', 2)
        Its values (read-only).
    padded_n : int
        ``N'``.
    n_factors : int
        ``L``.

    Notes
    -----
    Saved layout: ``kind = "butterfly-padded"``.  Array ``values`` of shape ``(L, N', 2)``
    (factor ``m`` holds ``values[m, i, 0]`` at ``(i, i)`` and
    ``values[m, i, 1]`` at ``(i, i XOR 2^m)``); attribute ``n``.  The dense
    matrix, with numpy alone::

        D = np.eye(big)
        for m in range(L):
            W = np.zeros((big, big)); i = np.arange(big)
            W[i, i] = values[m, :, 0]; W[i, i ^ (1 << m)] = values[m, :, 1]
            D = D @ W
        D = D[:n, :n]

    ``n_stored = values.size = 2 N' L``.

    Examples
    --------
    >>> op = PaddedButterflyOperator(np.full((2, 4, 2), 0.5), 3)
    >>> op.to_dense().round(2).tolist(), op.n_stored
    ([[0.25, 0.25, 0.25], [0.25, 0.25, 0.25], [0.25, 0.25, 0.25]], 16)
    """

    kind: ClassVar[str] = "butterfly-padded"
    description: ClassVar[str] = (
        "The leading n x n block of a butterfly product of order N' = 2^L: factor m holds values[m, i, 0] "
        "at (i, i) and values[m, i, 1] at (i, i XOR 2^m), and A = (W[0] @ ... @ W[L-1])[:n, :n].")

    def __init__(self, values: np.ndarray, n: int):
        self.inner = ChordOperator(values, support="butterfly")
        big = self.inner.shape[0]
        n = int(n)
        if not 1 <= n <= big:
            raise ParameterError(f"n = {n} must be between 1 and the factors' order {big}")
        super().__init__(n)

    @property
    def values(self) -> np.ndarray:
        """The factor values, shape ``(L, N', 2)`` (read-only)."""
        return self.inner.values

    @property
    def padded_n(self) -> int:
        """``N'``, the order of the butterfly product."""
        return self.inner.shape[0]

    @property
    def n_factors(self) -> int:
        """``L = log2 N'``, the number of butterfly factors."""
        return self.inner.n_factors

    def _holds(self) -> str:
        return f"{counted(self.n_factors, 'butterfly factor')} of order N' = {self.padded_n:,}, cropped"

    @property
    def n_stored(self) -> int:
        """``2 N' L``: every stored factor value (:func:`~sfapprox.budget.butterfly_hier_count`)."""
        return int(self.inner.values.size)

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        return self.inner._apply(padded_rows(B, self.padded_n), transpose)[: self.shape[0]]

    def to_dense(self) -> np.ndarray:
        """The ``n x n`` block of the product, ``O(L N'^2)``.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        n = self.shape[0]
        return self.inner.to_dense()[:n, :n]

    def to_sparse_factors(self) -> list:
        """The butterfly factors as scipy sparse matrices whose product is the operator.

        The factors are of order ``N'``; the first keeps its ``n`` leading rows and the last its
        ``n`` leading columns, so the product is the ``n x n`` operator itself (the rows and columns
        cropped only ever meet the padding).

        Returns
        -------
        list of scipy.sparse.csr_array
            ``[W_1, ..., W_L]``: ``W_1`` of shape ``(n, N')``, ``W_L`` ``(N', n)``, the others
            ``N' x N'`` (one factor, ``L = 1``: ``n x n``), one stored entry per kept value;
            ``W_1 @ ... @ W_L`` equals :meth:`to_dense`.

        Examples
        --------
        >>> from functools import reduce
        >>> op = PaddedButterflyOperator(np.random.default_rng(0).standard_normal((3, 8, 2)), 6)
        >>> factors = op.to_sparse_factors()
        >>> [f.shape for f in factors]
        [(6, 8), (8, 8), (8, 6)]
        >>> bool(np.allclose(reduce(lambda a, b: a @ b, factors).toarray(), op.to_dense()))
        True
        """
        n = self.shape[0]
        factors = self.inner.to_sparse_factors()
        factors[0] = factors[0][:n]
        factors[-1] = factors[-1][:, :n]
        return factors

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying this operator as ``nn.Linear(n, n, bias=False)`` does.

        ``module(x) = x @ A.T`` over the last dimension of ``x``: ``x`` padded with zeros to ``N'``,
        the butterfly factors applied (:class:`~sfapprox.operators._torch.ChordLinear`, ``O(N' L)``
        per vector), the result cropped to ``n``; the factor values are one parameter, and
        gradients reach them and the input.

        Parameters
        ----------
        dtype : torch.dtype, optional
            Default: ``torch.get_default_dtype()``.
        device : torch.device or str, optional
            Default: CPU.

        Returns
        -------
        sfapprox.operators._torch.PaddedButterflyLinear
            ``.to_operator()`` turns it back into a :class:`PaddedButterflyOperator`.

        Examples
        --------
        >>> import torch
        >>> op = PaddedButterflyOperator(np.random.default_rng(0).standard_normal((3, 8, 2)), 6)
        >>> x = torch.randn(4, 6, dtype=torch.float64)
        >>> bool(torch.allclose(op.to_torch(dtype=torch.float64)(x), x @ torch.from_numpy(op.to_dense()).T))
        True
        """
        from ._torch import PaddedButterflyLinear

        return PaddedButterflyLinear(self.values, self.shape[0], dtype=dtype, device=device)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``{"values"}`` and ``{"n": n}`` (see the class docstring's layout).

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        return {"values": self.inner.values}, {"n": int(self.shape[0])}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "PaddedButterflyOperator":
        """Rebuild from :meth:`to_arrays` (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        PaddedButterflyOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        try:
            values, n = np.asarray(arrays["values"]), int(attrs["n"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"padded butterfly operator: missing or unreadable part ({exc})") from None
        if not np.issubdtype(values.dtype, np.number) or np.iscomplexobj(values) or not np.all(np.isfinite(values)):
            raise ParameterError("padded butterfly operator: values must be finite real numbers")
        try:
            return cls(values, n)
        except ValueError as exc:
            raise ParameterError(f"padded butterfly operator: {exc}") from None
