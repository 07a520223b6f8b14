"""Attention matrices ``softmax(Q K^T / sqrt(d))`` (row-wise), from the queries and keys alone.

A 16,384-token attention map is 2 GB formed; from ``Q`` and ``K`` (``N x d``
each) a column block costs ``O(N d |J|)``.  The row normalisation needs each
row's maximum and sum over all columns: one streamed pass at construction
(the online softmax), ``O(N^2 d)`` work and ``O(N)`` memory.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .._errors import InputError, ParameterError
from .._params import MEMORY_LIMIT, check_values
from .._validation import array_of
from ._base import MatrixSource, block_columns

__all__ = ["AttentionMatrix"]


def _check(name: str, what: str, a) -> np.ndarray:
    arr = array_of(a, name, what)
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise InputError(f"{name}: {what} must be a real (N, d) array, got shape {arr.shape} of {arr.dtype}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InputError(f"{name}: {what} has shape {arr.shape}; it needs at least one token (row) and one "
                         "feature (column)")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        i, j = np.argwhere(~np.isfinite(arr))[0]
        raise InputError(f"{name}: {what}[{i}, {j}] is {arr[i, j]}; queries and keys must be finite")
    return arr


class AttentionMatrix(MatrixSource):
    """``A = softmax(scale * Q K^T)`` with the softmax over each row (the seeds' attention setting).

    Parameters
    ----------
    q, k : arrays of shape (N, d)
        Queries and keys (one token per row).
    scale : float or None, default=None
        The logits' factor; None: ``1 / sqrt(d)``.
    name : str, default="attention"
        What the matrix is called in tables and messages.
    max_memory : int, str or None, default=None
        Memory limit in bytes (or a size such as ``"4G"``, stored in bytes) for the row normalisers' pass made here, and
        the source's :attr:`max_memory` afterwards (None: the default limit).

    Attributes
    ----------
    q, k : numpy.ndarray, shape (N, d)
        The queries and keys, as C-contiguous float64 arrays.
    scale : float
        The logits' factor in use.

    Raises
    ------
    InputError
        For queries or keys that are not finite real ``(N, d)`` arrays of the
        same shape.
    ParameterError
        For a scale that is not a positive, finite number, or a
        ``max_memory`` that is not a positive int or None.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> A = AttentionMatrix(rng.standard_normal((6, 3)), rng.standard_normal((6, 3)))
    >>> bool(np.allclose(A.to_dense().sum(axis=1), 1.0))
    True
    """

    kind = "attention"
    bounded_columns = True  # probabilities, of logits checked finite when it is made
    column_copies = 4  # the logits, their exponentials, the block
    symmetric = False
    nonnegative = True
    psd = False

    def __init__(self, q, k, scale: float | None = None, *, name: str = "attention",
                 max_memory: int | None = None) -> None:
        max_memory = check_values({"max_memory": max_memory}, {"max_memory": MEMORY_LIMIT}, "AttentionMatrix")["max_memory"]
        q, k = _check(name, "q", q), _check(name, "k", k)
        if q.shape != k.shape:
            raise InputError(f"{name}: q {q.shape} and k {k.shape} must have the same shape (N tokens x d)")
        if scale is None:
            scale = 1.0 / math.sqrt(q.shape[1])
        # a number only: float("x") was a raw ValueError, and float("2") would take a string for a scale
        elif not isinstance(scale, numbers.Real) or isinstance(scale, bool) or not math.isfinite(scale) or scale <= 0:
            raise ParameterError(f"{name}: scale must be a positive, finite number (the logits' factor; None: "
                                 f"1/sqrt(d)), got {scale!r}")
        # |q_i . k_j| <= d max|q| max|k|: a logit that could overflow would make the softmax NaN
        bound = float(scale) * q.shape[1] * float(np.abs(q).max()) * float(np.abs(k).max())
        if not math.isfinite(bound):
            raise InputError(f"{name}: q and k are too large (up to {np.abs(q).max():.3g} and {np.abs(k).max():.3g}): "
                             "their scaled products overflow; rescale them or give a smaller scale")
        self.q, self.k, self.scale = q, k, float(scale)
        super().__init__(q.shape[0], name)
        # the pass below is sized by the limit: without it, its blocks were MAX_BLOCK columns of N-long
        # logits and exponentials whatever --max-memory said (1.2 GB at 12,000 tokens)
        self.max_memory = max_memory
        self._row_max, self._row_sum = self._normalisers()
        self.notes.append(f"attention map softmax(Q Kᵀ x {self.scale:.4g}) of {self.n:,} tokens, d = {q.shape[1]}")

    def _logits(self, J: np.ndarray) -> np.ndarray:
        return (self.q @ self.k[J].T) * self.scale

    def _normalisers(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's largest logit and ``sum_j exp(logit - max)``, in one pass over column blocks."""
        peak = np.full(self.n, -np.inf)
        total = np.zeros(self.n)
        for J in block_columns(self.n, self.block_width()):
            logits = self._logits(J)
            new_peak = np.maximum(peak, logits.max(axis=1))
            total = total * np.exp(peak - new_peak) + np.exp(logits - new_peak[:, None]).sum(axis=1)
            peak = new_peak
        return peak, total

    def _columns(self, J: np.ndarray) -> np.ndarray:
        return np.exp(self._logits(J) - self._row_max[:, None]) / self._row_sum[:, None]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "tokens": self.n, "dim": int(self.q.shape[1]), "scale": self.scale}
