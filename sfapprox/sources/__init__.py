"""Matrices known by their columns: kernels, attention maps, memory-mapped arrays, any operator.

A :class:`MatrixSource` computes exact column blocks ``X[:, J]`` on demand
(``O(N |J|)`` memory), and from them ``X @ B``, ``X.T @ B``, entries, the
diagonal, and the whole matrix when it fits.  The methods that can work from
columns (``sf``, ``nystrom``, ``rsvd``, ``sparse``, ``rpca``, ``monarch``) run on a
source directly, their errors exact by a streamed pass or estimated with a
confidence interval (:mod:`sfapprox.estimate`); :func:`sfapprox.compare` forms a source whose
dense size fits the memory limit and runs every method on it as before.

==========================  =====================================================
:class:`KernelMatrix`       ``k(x_i, x_j)`` of a point table (rbf, laplacian, matern32/52, cosine, linear)
:class:`AttentionMatrix`    ``softmax(Q K^T / sqrt(d))`` from queries and keys
:class:`CovarianceMatrix`   the feature covariance of a wide samples x features table
:class:`ArraySource`        a dense array, or a ``.npy`` file memory-mapped (:func:`open_npy`)
:class:`SparseSource`       a scipy sparse matrix
:class:`OperatorSource`     any square scipy ``LinearOperator``
:class:`DistributedSource`  any source, its column passes run on a process pool or a Dask cluster
==========================  =====================================================

:func:`as_source` wraps an array, sparse matrix or operator; :func:`columns_within`, one held in memory
for a fit from its columns over the memory limit (the passes sized for what it leaves of the limit).  A new kind of
source is a subclass that implements ``_columns(J)`` (and ``describe()``).
"""

from __future__ import annotations

from ._base import BLOCK_SHARE, MAX_BLOCK, MIN_BLOCK, MatrixLike, MatrixSource, block_columns, formable, formed_need, scoring_need
from .arrays import (ArraySource, OperatorSource, SparseSource, as_source, columns_within, open_npy, passes_within, room,
                     sparse_source_within)
from .attention import AttentionMatrix
from .covariance import CovarianceMatrix
from .distributed import DistributedSource
from .kernels import KERNELS, KernelMatrix, median_bandwidth

__all__ = [
    "MatrixSource",
    "MatrixLike",
    "KernelMatrix",
    "AttentionMatrix",
    "CovarianceMatrix",
    "ArraySource",
    "SparseSource",
    "OperatorSource",
    "DistributedSource",
    "as_source",
    "columns_within",
    "sparse_source_within",
    "room",
    "passes_within",
    "open_npy",
    "block_columns",
    "median_bandwidth",
    "KERNELS",
    "MIN_BLOCK",
    "BLOCK_SHARE",
    "MAX_BLOCK",
    "formable",
    "formed_need",
    "scoring_need",
]
