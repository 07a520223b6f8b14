"""Attention matrices ``softmax(Q K^T / sqrt(d))`` (row-wise), from the queries and keys alone.

A 16,384-token attention map is 2 GB formed; from ``Q`` and ``K`` (``N x d``
each) a column block costs ``O(N d |J|)``.  The row normalisation needs each
row's maximum and sum over all columns: one streamed pass at construction
(the online softmax), ``O(N^2 d)`` work and ``O(N)`` memory.

A block is one array: the logits' product is written into it and scaled, shifted,
exponentiated and normalised in place, a slab of rows at a time
(:data:`SLAB_ENTRIES`), and a formed matrix's blocks are computed straight into
the matrix (:meth:`AttentionMatrix._form_columns`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._errors import InputError, ParameterError
from ..formats import shape_text
from .._params import MEMORY_LIMIT, check_values
from .._validation import array_of, first_nonfinite, float64_table, held_bytes
from ._base import MatrixSource, block_columns

__all__ = ["AttentionMatrix", "SLAB_ENTRIES"]

#: Entries of a column block transformed at a time (whole rows of it, about 512 KiB): the scaling, the shift,
#: the exponential and the normalisation run in place on a slab that stays in the cache.  Over the whole
#: block they were four passes through memory, each into a new ``N x |J|`` temporary (one block of 4,096
#: columns under the default limit at N = 4,096: 128 MiB each, most of the time forming took).
SLAB_ENTRIES = 1 << 16
#: Bytes of numpy's buffers while a slab of a formed matrix is transformed where it lies: a ufunc over
#: that strided view runs through a buffer of ``np.getbufsize()`` numbers per operand, three for the
#: subtraction of the row maxima (tracemalloc: 3 x 64 KiB at N = 256 and 600, whatever the width).
UFUNC_BUFFERS = 3 * 8 * np.getbufsize()


def _check(name: str, what: str, a, max_memory: int | None = None, held: int = 0) -> np.ndarray:
    """Queries or keys as a C-contiguous float64 array, each copy within ``max_memory`` beside ``held`` bytes (the
    queries, while the keys are read)."""
    arr = array_of(a, name, what, max_memory)  # (a GPU tensor's copy in host memory within the source's limit)
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise InputError(f"{name}: {what} must be a real (N, d) array, got shape {shape_text(arr.shape)} of {arr.dtype}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InputError(f"{name}: {what} has shape {shape_text(arr.shape)}; it needs at least one token (row) and one "
                         "feature (column)")
    arr = float64_table(arr, name, what, max_memory, held=held)  # (float32 queries were copied unchecked)
    bad = first_nonfinite(arr)  # (a mask of the whole table was made whatever the memory limit said)
    if bad is not None:
        i, j = bad
        raise InputError(f"{name}: {what}[{i}, {j}] is {arr[i, j]}; queries and keys must be finite")
    return arr


def _row_slabs(n: int, width: int) -> Iterator[tuple[int, int]]:
    """The rows ``[r0, r1)`` of an ``n x width`` block, :data:`SLAB_ENTRIES` entries at a time (at least a row).

    Whole rows, not cells of columns: a row's sum over the block is then numpy's sum of the same
    contiguous row as before (the same pairwise order, the same bits).

    Examples
    --------
    >>> list(_row_slabs(5, 30000))
    [(0, 2), (2, 4), (4, 5)]
    """
    step = max(1, SLAB_ENTRIES // max(1, width))
    for r0 in range(0, n, step):
        yield r0, min(n, r0 + step)


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
    column_copies = 2  # the block, computed in place, and the keys' rows k[J] (set per source in __init__)
    symmetric = False
    nonnegative = True
    psd = False

    def __init__(self, q: ArrayLike, k: ArrayLike, scale: float | None = None, *, name: str = "attention",
                 max_memory: int | str | None = None) -> None:
        # the limit in bytes, named apart from the parameter (which takes "4G" too): its readers take an int
        limit: int | None = check_values({"max_memory": max_memory}, {"max_memory": MEMORY_LIMIT}, "AttentionMatrix")["max_memory"]
        q = _check(name, "q", q, limit)
        k = _check(name, "k", k, limit, held=held_bytes(q))
        if q.shape != k.shape:
            raise InputError(f"{name}: q {shape_text(q.shape)} and k {shape_text(k.shape)} must have the same shape (N tokens x d)")
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
        # What block_width sizes blocks by: a block allocates itself (N numbers a column) and the keys' rows
        # k[J] (d a column, counted as whole N-long arrays), nothing else of its size (tracemalloc: 1.01
        # arrays a column at d = 8, N = 2,000); the 4 counted for the temporaries made blocks 4x narrower.
        self.column_copies = 1 + -(-q.shape[1] // self.n)
        # the pass below is sized by the limit: without it, its blocks were MAX_BLOCK columns of N-long
        # logits and exponentials whatever --max-memory said (1.2 GB at 12,000 tokens)
        self.max_memory = limit
        self._row_max, self._row_sum = self._normalisers()
        self.notes.append(f"attention map softmax(Q Kᵀ x {self.scale:.4g}) of {self.n:,} tokens, d = {q.shape[1]}")

    def _logits_into(self, J: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``Q K[J]^T`` (unscaled) written into ``out``, an ``N x |J|`` array or view: the one BLAS product of
        the whole block, as it always was (a product of fewer rows or columns may differ in its last bits)."""
        return np.matmul(self.q, self.k[J].T, out=out)

    def _normalisers(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's largest logit and ``sum_j exp(logit - max)``, in one pass over column blocks."""
        peak = np.full(self.n, -np.inf)
        total = np.zeros(self.n)
        for J in block_columns(self.n, self.block_width()):
            self._fold(J, peak, total)  # a call per block: its array is freed before the next one's is made
        return peak, total

    def _fold(self, J: np.ndarray, peak: np.ndarray, total: np.ndarray) -> None:
        """Fold the columns ``J`` into each row's running largest logit ``peak`` and sum ``total`` (the online
        softmax), in place: the block's logits are scaled, shifted and exponentiated where they lie, slab by
        slab, with the numbers (and each row's sum over the block) of the whole-block expressions."""
        block = self._logits_into(J, np.empty((self.n, J.size)))
        for r0, r1 in _row_slabs(self.n, J.size):
            logits = block[r0:r1]
            logits *= self.scale
            new_peak = np.maximum(peak[r0:r1], logits.max(axis=1))
            logits -= new_peak[:, None]
            np.exp(logits, out=logits)
            total[r0:r1] = total[r0:r1] * np.exp(peak[r0:r1] - new_peak) + logits.sum(axis=1)
            peak[r0:r1] = new_peak

    def _columns(self, J: np.ndarray) -> np.ndarray:
        return self._softmax_into(J, np.empty((self.n, J.size)))

    def _form_columns(self, J: np.ndarray, out: np.ndarray) -> None:
        self._softmax_into(J, out)  # into the formed matrix itself: no block, no copy of it

    def forming_bytes(self, width: int) -> int:
        """Bytes :meth:`to_dense` allocates besides the matrix for a block of ``width`` columns: the keys' rows
        ``k[J]`` and numpy's buffers (:data:`UFUNC_BUFFERS`), as the block is computed in the matrix itself
        (:meth:`_form_columns`); the ``column_copies`` blocks counted before were never allocated.

        Parameters
        ----------
        width : int
            Columns of the block.

        Returns
        -------
        int
            Bytes.
        """
        return 8 * self.q.shape[1] * width + UFUNC_BUFFERS

    def _softmax_into(self, J: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``A[:, J]`` written into ``out`` (an ``N x |J|`` array or view): the logits' product there, then
        ``exp(scale * logit - max) / sum`` in place, slab by slab (each entry as the whole-block expression
        rounds it: the same operations in the same order)."""
        self._logits_into(J, out)
        for r0, r1 in _row_slabs(self.n, J.size):
            block = out[r0:r1]
            block *= self.scale
            block -= self._row_max[r0:r1, None]
            np.exp(block, out=block)
            block /= self._row_sum[r0:r1, None]
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "tokens": self.n, "dim": int(self.q.shape[1]), "scale": self.scale}
