"""Nyström surrogates: ``A = C W^+ C^T`` from ``r`` columns ``C = X[:, S]`` of a symmetric PSD matrix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._errors import ParameterError
from ..budget import nystrom_count
from ..formats import shape_phrase
from ._base import SurrogateOperator, check_finite, register_operator

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["NystromOperator"]


@register_operator
class NystromOperator(SurrogateOperator):
    """``A = C core C^T``: the columns ``C`` (N, r) at the pivots and the core ``W^+`` (r, r).

    A product costs ``O(N r)`` per column; ``n_stored = r (N + r)``
    (:func:`sfapprox.budget.nystrom_count`): the pivots' columns and the core.

    Parameters
    ----------
    C : array_like, shape (N, r)
        The matrix's columns at the ``r`` pivots.
    core : array_like, shape (r, r)
        The pseudo-inverse of the pivots' ``r x r`` block.

    Attributes
    ----------
    C, core : numpy.ndarray
        Float64, C-contiguous.
    rank : int
        ``r`` (property).

    Examples
    --------
    >>> C = np.array([[2.0], [1.0], [0.0]])
    >>> op = NystromOperator(C, np.array([[0.5]]))
    >>> op.to_dense().tolist(), op.n_stored
    ([[2.0, 1.0, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 0.0]], 4)
    """

    kind: ClassVar[str] = "nystrom"
    description: ClassVar[str] = ("A Nyström approximation: A = C @ core @ C.T with C (n, r) the matrix's "
                                  "columns at the r pivots and core (r, r) the pseudo-inverse of their r x r block; "
                                  "or, the stable form, C those columns times the inverse transposed Cholesky "
                                  "factor of the (shifted) block and core the identity.")
    dataset_descriptions: ClassVar[dict[str, str]] = {
        "C": "the matrix's columns at the pivots (the stable form: times L^-T, L the block's Cholesky factor), "
             "shape (n, r)",
        "core": "the pseudo-inverse of the pivots' r x r block (the stable form: the identity), shape (r, r)",
    }

    def __init__(self, C: np.ndarray, core: np.ndarray):
        C = np.ascontiguousarray(C, dtype=np.float64)
        core = np.ascontiguousarray(core, dtype=np.float64)
        if C.ndim != 2 or core.shape != (C.shape[1], C.shape[1]):
            raise ParameterError(f"C must be (n, r) and core (r, r), got C: {shape_phrase(C.shape)}; core: {shape_phrase(core.shape)}")
        self.C, self.core = C, core
        super().__init__(C.shape[0])

    @property
    def rank(self) -> int:
        """Number ``r`` of pivots."""
        return int(self.C.shape[1])

    def _holds(self) -> str:
        return f"C core Cᵀ of rank {self.rank}"

    @property
    def n_stored(self) -> int:
        """``r (N + r)``."""
        return nystrom_count(self.shape[0], self.rank)

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        B = np.asarray(B, dtype=np.float64)
        core = self.core.T if transpose else self.core
        return self.C @ (core @ (self.C.T @ B))

    def to_dense(self) -> np.ndarray:
        """The ``N x N`` matrix, ``O(N^2 r)``.

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        return (self.C @ self.core) @ self.C.T

    def factored_parts(self) -> tuple[np.ndarray, np.ndarray, None]:
        """``(C core, C^T, None)``.

        Returns
        -------
        tuple or None
            ``(L, R, S)``: ``L`` of shape ``(N, r)``, ``R`` of shape ``(r, N)``, ``S`` a scipy sparse
            array or None; None where the surrogate is not low rank plus sparse.
        """
        return self.C @ self.core, self.C.T, None

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying ``C core C^T`` as ``nn.Linear(N, N, bias=False)`` does.

        ``module(x) = x @ A.T`` over the last dimension of ``x``, as three thin products
        (``O(N r)`` per vector); ``C`` and ``core`` are parameters, and gradients reach them and
        the input.  They are trained freely: ``core`` may lose its symmetry and positive
        semi-definiteness (:class:`~sfapprox.operators._torch.NystromLinear` says how to keep them).

        Parameters
        ----------
        dtype : torch.dtype, optional
            Default: ``torch.get_default_dtype()``.
        device : torch.device or str, optional
            Default: CPU.

        Returns
        -------
        sfapprox.operators._torch.NystromLinear
            ``.to_operator()`` turns it back into a :class:`NystromOperator`.

        Examples
        --------
        >>> import torch
        >>> op = NystromOperator(np.array([[2.0], [1.0], [0.0]]), np.array([[0.5]]))
        >>> op.to_torch(dtype=torch.float64)(torch.ones(3, dtype=torch.float64)).tolist()
        [3.0, 1.5, 0.0]
        """
        from ._torch import NystromLinear

        return NystromLinear(self.C, self.core, dtype=dtype, device=device)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``C`` and ``core``.

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        return {"C": self.C, "core": self.core}, {}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "NystromOperator":
        """Rebuild from :meth:`to_arrays` (:meth:`SurrogateOperator.from_arrays` states the contract).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        NystromOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent, missing or unreadable (a :class:`~sfapprox.ParameterError`).
        """
        C, core = np.asarray(arrays["C"]), np.asarray(arrays["core"])
        check_finite("C and core", "Nyström operator", C, core)
        return cls(C, core)
