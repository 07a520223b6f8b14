"""Sparse storage: keep the ``s`` largest-magnitude entries of ``X``, stored as CSR.

The plainest surrogate there is, and on sparse matrices (graphs, meshes) often
the best: when every non-zero fits in the budget it is *exact*.  A comparison
that leaves it out can make any factorization look good on a sparse network.

**Stored numbers** (:func:`sparse_count`): ``2·s + N + 1``, the sizes of the
three CSR arrays: ``s`` values, ``s`` column indices and ``N + 1`` row
pointers.  An index counts as one stored number, like a value (the same rule
as ``count_indices=True`` for RPCA and sf+s, which charge each entry its value
and one flat position, ``2·s``; CSR pays ``N + 1`` more for its row pointers).

**Budget rule** (:func:`sparse_entries_for_budget`): at a budget ``B`` it keeps
``s = min(nnz(X), floor((B - N - 1) / 2))`` entries; below ``N + 3`` (one
entry) it does not apply, but to the zero matrix, which it holds in 0 numbers
(no entry, no row pointers: :func:`sparse_count`) within any budget.  When ``nnz(X)`` entries fit, all of them are kept
and the surrogate is ``X`` itself: ``stop_reason_ == "exact"`` and
``params_["exact"]`` is True; storing ``X`` exactly costs
``2·nnz(X) + N + 1`` numbers (``params_["exact_budget"]``).  Otherwise the
``s`` entries of largest ``|X_ij|`` are the best ``s``-sparse approximation in
the Frobenius norm (its error is the norm of the dropped entries), and
``stop_reason_ == "closed_form"``.  Ties at the threshold go to the earlier
entries in row-major order, so the result does not depend on the machine.

The selection is ``O(nnz)`` (a partition, no sort) and does not iterate: in
memory no time limit applies, and a Ctrl-C simply propagates (there is nothing
to keep).  From a source's columns its one pass stops at ``time_limit``, as the
other methods' passes do, and keeps the largest entries of the columns read
(``stop_reason_ == "time_limit"``, ``params_["columns_read"]``).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp

from .. import _streams, _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._errors import BudgetError, ConvergenceWarning, ParameterError, user_stacklevel
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._params import MEMORY_LIMIT, SEED, Interval
from ..budget import below_smallest, check_within, sparse_count, sparse_entries_for_budget
from ..metrics import SPARSE_TARGET_MIN_SHARE
from ..operators.sparse import SparseOperator
from .._validation import check_squared_norm, is_zero_matrix, memory_limit
from ..formats import counted, limit_text
from ..sources import BLOCK_SHARE, ArraySource, DistributedSource, MatrixLike, MatrixSource

__all__ = ["SparseApproximation", "SparseOperator", "sparse_count", "sparse_entries_for_budget", "top_entries",
           "streamed_top_entries", "dense_top_entries"]


#: Above this order a dense ``X`` in memory is read in column blocks, as a source is: the entries
#: are the same (ties included), the selection holds ``O(k)`` candidates and a block instead of
#: six ``N x N`` arrays, and it is faster, since a block only adds its entries at or above the
#: ``k``-th largest held.  ``benchmarks/results/sparse_selection.md`` (2 cores; at once / by
#: blocks, besides X): N = 8,192: 3.62 s and 2.5 GiB / 2.28 s and 462 MiB; N = 16,384: 14.25 s and
#: 10 GiB / 10.08 s and 462 MiB.
STREAMED_MIN_N = 2048
#: Memory limit of that pass (it sizes the blocks, which take half of it): at most this, and at most
#: SELECTION_ARRAYS N x N arrays, so that just above STREAMED_MIN_N, where 1 GiB is many arrays, the
#: pass still holds fewer than the in-memory selection (``benchmarks/results/method_memory.md``).
SELECTION_BYTES = 1 << 30
SELECTION_ARRAYS = 4


def selection_bytes(n: int) -> int:
    """The memory limit of the column-block selection of a dense ``n x n`` X in memory (see
    :data:`SELECTION_BYTES`)."""
    return min(SELECTION_BYTES, SELECTION_ARRAYS * 8 * n * n)


def working_memory(n: int) -> int:
    """Peak bytes of the selection from a dense ``n x n`` X in memory, X included (what a comparison
    checks before the fit): the magnitudes, their selection and the kept entries, 5.0 N^2 float64
    measured (N = 256-1,000; 6 counted); above :data:`STREAMED_MIN_N`, X and the column-block pass's
    :func:`selection_bytes` (its blocks take half; the rest holds ``O(k)`` candidates)."""
    array = 8 * n * n
    return 6 * array if n <= STREAMED_MIN_N else array + selection_bytes(n)


#: Bytes per stored entry of the selection from a scipy sparse X (X included: 12 for its CSR arrays): the
#: entries' rows, columns and values, their magnitudes, the kept ones and the result; 89 measured
#: (tracemalloc, N = 20,000, 2,000,000 entries, half to all kept).
SPARSE_ENTRY_BYTES = 112


def sparse_memory(n: int, nnz: int) -> int:
    """Peak bytes of the selection from a scipy sparse ``n x n`` X of ``nnz`` entries, X included: it
    works on the entries (:data:`SPARSE_ENTRY_BYTES` each) and never forms X."""
    return SPARSE_ENTRY_BYTES * nnz + 16 * (n + 1)


def _min_budget(n: int, context: RunContext) -> int:
    return sparse_count(n, 1)


# --------------------------------------------------------------------------- the selection
def top_entries(values: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending) of the ``k`` largest ``|values|``; ties go to the earlier positions.

    ``O(len(values))``: a partition finds the ``k``-th largest magnitude ``t``;
    every entry above ``t`` is kept, and the first entries equal to ``t`` fill
    the rest.

    Parameters
    ----------
    values : numpy.ndarray
        Any array (taken flat).
    k : int
        How many to keep; ``k >= values.size`` keeps all, ``k <= 0`` none.

    Returns
    -------
    numpy.ndarray of int

    Examples
    --------
    >>> top_entries(np.array([1.0, -3.0, 2.0, 3.0, 2.0]), 3).tolist()
    [1, 2, 3]
    """
    size = values.size
    if k >= size:
        return np.arange(size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    mags = np.abs(values)
    t = np.partition(mags, size - k)[size - k]
    keep = mags > t
    ties = np.flatnonzero(mags == t)[: k - int(keep.sum())]
    keep[ties] = True
    return np.flatnonzero(keep)


def _first_largest(mags: np.ndarray, order: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``mags``, ties to the smallest ``order`` (:func:`top_entries`'s rule)."""
    if k >= mags.size:
        return np.arange(mags.size)
    t = np.partition(mags, mags.size - k)[mags.size - k]
    keep = np.flatnonzero(mags > t)
    ties = np.flatnonzero(mags == t)
    ties = ties[np.argsort(order[ties], kind="stable")[: k - keep.size]]
    return np.concatenate([keep, ties])


def streamed_top_entries(source, k: int, max_memory: int | None = None):
    """The ``k`` largest entries of a :class:`~sfapprox.sources.MatrixSource` by one pass over its columns.

    Returns rows, columns and values (row-major order) and the number of
    non-zeros seen; ties go to the earlier entries in row-major order, as
    :func:`top_entries` does, so the result is the in-memory one.  Holds
    ``O(k)`` candidates besides one block (and its selection's temporaries).
    On a :class:`~sfapprox.sources.DistributedSource` each worker passes over
    a range of columns and sends back its ``k`` largest; merged here, they give
    the same entries (the order "larger magnitude, then earlier position" is total).

    Parameters
    ----------
    source : MatrixSource
        The matrix.
    k : int
        Entries to keep.
    max_memory : int or None, default=None
        Memory limit in bytes that sets the block width (None: the default limit).

    Returns
    -------
    rows, cols : numpy.ndarray of int64
    vals : numpy.ndarray
    nnz : int
        Non-zeros of the whole matrix.
    """
    return streamed_top(source, k, max_memory)[:4]


def streamed_top(source, k: int, max_memory: int | None = None):
    """:func:`streamed_top_entries`, and the sum of the squares of every entry seen (``||X||_F^2``, exact)
    as a fifth result: what RPCA's residual pass scores its split by."""
    if isinstance(source, DistributedSource):  # each worker keeps the top k of its columns
        # a held-sparse X is read in pieces of non-zeros, per column alike; a dense one in blocks, whose
        # ranges start where a local pass's blocks do (the residual's columns of RPCA: products)
        width = None if source.sparse_matrix is not None else _top_width(source, max_memory)
        parts = source.map_ranges(_top_of_range, k, max_memory, width=width)
    else:
        parts = iter([_top_of_range(source, np.arange(source.n), k, max_memory)])
    rows, cols, vals, nnz, squares = next(parts)
    squares = [squares]
    for r, c, v, seen, sq in parts:
        rows, cols, vals = _keep_largest(np.concatenate([rows, r]), np.concatenate([cols, c]),
                                         np.concatenate([vals, v]), k, source.n)
        nnz += seen
        squares.append(sq)
    order = np.argsort(rows * source.n + cols, kind="stable")
    # ||X||^2 summed once, over every column's own sum in column order: the sums of the workers' ranges
    # added up (or of the blocks, one after another) grouped the terms by range, and a comparison on a
    # cluster differed from the local one in the last digits (sparse's and RPCA's errors)
    return rows[order], cols[order], vals[order], nnz, float(np.sum(np.concatenate(squares)))


def column_squares(block: np.ndarray) -> np.ndarray:
    """Each column's sum of squares, the same to the last bit whichever columns share ``block``: the squares
    of :data:`SQUARE_ROWS` rows at a time (a buffer that size) summed down the rows, each column's terms
    added in row order whatever the width (numpy reduces a C-ordered array's first axis row after row).

    A single column is summed beside a column of zeros: alone it is one contiguous vector, which numpy sums
    pairwise, in another order.  (A Fortran copy of the block, summed column by column, gives the same
    independence for 15-40x the time: a transposing copy of each block of a pass.)

    Examples
    --------
    >>> X = np.arange(12.0).reshape(3, 4)
    >>> column_squares(X), bool((column_squares(X[:, 1:3]) == column_squares(X)[1:3]).all())
    (array([ 80., 107., 140., 179.]), True)
    """
    n, width = block.shape
    if width == 1:
        return column_squares(np.column_stack([block[:, 0], np.zeros(n)]))[:1]
    total = np.zeros(width)
    buffer = np.empty((min(n, SQUARE_ROWS), width))
    for i in range(0, n, SQUARE_ROWS):
        rows = block[i:i + SQUARE_ROWS]
        total += np.square(rows, out=buffer[:rows.shape[0]]).sum(axis=0)
    return total


#: Rows of a block squared at a time by :func:`column_squares` (its buffer's height).
SQUARE_ROWS = 128


#: The smallest share of ``||X||_F^2`` a residual's squares computed as ``||X||^2 - sum(kept^2)`` are taken at:
#: below it the difference is round-off (float64 sums of ``||X||^2`` carry about 1e-16 of it), so the error
#: is left to the comparison's scoring (the same bound as the errors from a sparse X's non-zeros).
OWN_ERROR_MIN_SHARE = SPARSE_TARGET_MIN_SHARE


def own_pass_error(squared: float, kept: np.ndarray, *, exact: bool) -> tuple[float, float | None] | None:
    """The top-s surrogate's error ``(||X - S||_F, relative)`` from its selection's pass: the surrogate is
    ``X`` on the kept entries and 0 elsewhere, so ``||X - S||_F^2 = ||X||_F^2 - sum(kept^2)``, exact, with
    ``||X||_F^2`` summed over every entry seen.  0 when every non-zero was kept; None where the difference
    is within round-off of ``||X||^2`` (:data:`OWN_ERROR_MIN_SHARE`): then it is scored as any row.

    Examples
    --------
    >>> own_pass_error(25.0, np.array([4.0]), exact=False)
    (3.0, 0.6)
    >>> own_pass_error(16.0, np.array([4.0]), exact=True)
    (0.0, 0.0)
    """
    norm = float(np.sqrt(squared))
    if exact:
        return 0.0, (0.0 if norm > 0 else None)
    left = float(squared) - float(np.dot(kept, kept))
    if left < OWN_ERROR_MIN_SHARE * float(squared):
        return None
    fro = float(np.sqrt(left))
    return fro, fro / norm


def dense_top_entries(X: np.ndarray, k: int, max_memory: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions (ascending) and values of the ``k`` largest ``|X|`` among the non-zeros of a
    dense square array in memory, by one pass over its column blocks (:func:`streamed_top_entries`).

    Holds one block and ``O(k)`` candidates besides ``X``, the block sized by ``max_memory``,
    where partitioning all of ``X`` at once holds about three more ``N x N`` arrays (its
    magnitudes, the partition's copy, the positions).  Ties go to the earlier positions, as
    :func:`top_entries`'s do.

    Parameters
    ----------
    X : numpy.ndarray, shape (N, N)
        Any real dtype (read a block at a time as float64).
    k : int
        Entries to keep (fewer when ``X`` has fewer non-zeros).
    max_memory : int
        Bytes the pass may take besides ``X`` (half of it for the blocks).

    Returns
    -------
    positions : numpy.ndarray of int64
    values : numpy.ndarray of float64

    Examples
    --------
    >>> pos, vals = dense_top_entries(np.array([[1.0, -3.0], [0.0, 2.0]]), 2, 1 << 20)
    >>> pos.tolist(), vals.tolist()
    ([1, 3], [-3.0, 2.0])
    """
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.flags.c_contiguous):
        rows, cols, vals, _ = streamed_top_entries(ArraySource(X), k, max_memory=max_memory)
        return rows * X.shape[1] + cols, vals
    # Row blocks of a C-ordered X are views: no block copied, and no squares or count of non-zeros
    # (the streamed pass's, which this caller drops); RPCA's GoDec selects every iteration (78 of its
    # 200 ms per iteration at N = 1,024 went to the column blocks' copies, squares and counts).
    n = X.shape[1]
    height = ArraySource(X).block_width(max_memory, extra_columns=8)  # the rows a block of columns had
    pos = np.zeros(0, dtype=np.int64)
    vals = np.zeros(0)
    threshold = 0.0
    if k <= 0:
        return pos, vals
    for i0 in range(0, X.shape[0], height):
        block = np.asarray(X[i0:i0 + height], dtype=np.float64)
        p = np.flatnonzero(np.abs(block) >= threshold if threshold > 0 else block)
        pos = np.concatenate([pos, p + i0 * n])
        vals = np.concatenate([vals, block.reshape(-1)[p]])
        if vals.size > k:
            keep = _first_largest(np.abs(vals), pos, k)
            pos, vals = pos[keep], vals[keep]
        if vals.size >= k:
            threshold = float(np.abs(vals).min())
    order = np.argsort(pos, kind="stable")
    return pos[order], vals[order]


def _keep_largest(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, k: int, n: int):
    """The ``k`` largest ``|vals|`` of candidate entries, ties to the earlier in row-major order."""
    if vals.size <= k:
        return rows, cols, vals
    if k <= 0:
        return rows[:0], cols[:0], vals[:0]
    keep = _first_largest(np.abs(vals), rows * n + cols, k)
    return rows[keep], cols[keep], vals[keep]


def _top_of_range(source, J: np.ndarray, k: int, max_memory: int | None):
    """The ``k`` largest entries among the columns ``J`` of ``source`` (rows, columns, values), the
    non-zeros seen and each column's sum of squares (:func:`column_squares`): one pass over ``J`` in blocks
    (a task of its own on an executor)."""
    if source.sparse_matrix is not None:  # a matrix held sparse: its non-zeros are the candidates
        return _top_of_sparse(source, J, k, max_memory)
    return _top_of_blocks(source, J, k, max_memory)[:5]


def _top_of_blocks(source, J: np.ndarray, k: int, max_memory: int | None,
                   deadline: _timing.Deadline | None = None):
    """:func:`_top_of_range` of a source read in dense blocks, and the columns read (``J.size``: all of them).
    Under ``deadline`` the pass stops after a block where the next one, at the time of the slowest so far,
    would not end by it (one block is always read); the squares of the columns left unread are 0."""
    rows = cols = np.zeros(0, dtype=np.int64)
    vals = np.zeros(0)
    nnz, squares = 0, np.zeros(J.size)
    threshold = 0.0  # once k candidates are held: the least of their magnitudes
    width = _top_width(source, max_memory)
    read, slowest = 0, 0.0
    for start in range(0, J.size, width):
        began = _timing.now()
        columns = J[start:start + width]
        block = source.columns(columns)
        squares[start:start + columns.size] = column_squares(block)
        nnz += int(np.count_nonzero(block))
        read += columns.size
        if k > 0:  # (k = 0: only the count and the squares, RPCA's residual without a sparse part)
            # An entry below the k-th largest magnitude held cannot enter (one equal to it may, by its
            # position): with k held, only the few above it are gathered and partitioned with them.
            r, c = np.nonzero(np.abs(block) >= threshold if threshold > 0 else block)
            (rows, cols, vals), threshold = _admitted((rows, cols, vals), (r, columns[c], block[r, c]), k, source.n)
        slowest = max(slowest, _timing.now() - began)
        if deadline is not None and read < J.size and not deadline.fits(slowest):
            break
    return rows, cols, vals, nnz, squares, read


#: The seed stream of a cut pass's column order (:func:`timed_top`): :data:`~sfapprox._streams.SPARSE_ORDER`.
ORDER_STREAM = _streams.SPARSE_ORDER


def timed_top(source, k: int, max_memory: int | None, deadline: _timing.Deadline | None, seed: int = DEFAULT_SEED):
    """:func:`streamed_top` within ``deadline``, and the columns read: the pass stops where its next block
    would end after it, its result the ``k`` largest entries of the columns read, ``||X||^2`` theirs.

    Under a deadline the blocks are taken in a seeded random order (as Nyström's and the randomized SVD's
    one pass, :func:`~.rsvd.nystrom_pass`), so that a cut pass has read columns from all of the matrix; a
    whole pass gives :func:`streamed_top`'s numbers all the same (the order "larger magnitude, then
    earlier position" is total, and the squares are summed in column order).  A matrix held sparse (its
    non-zeros selected, no dense block) and one on an executor are passed over whole (``read == n``).

    Returns
    -------
    rows, cols, vals, nnz, squared
        As :func:`streamed_top`'s, of the columns read.
    read : int
        Columns read (``source.n``: the whole pass).
    """
    n = source.n
    if deadline is None or isinstance(source, DistributedSource) or source.sparse_matrix is not None:
        return (*streamed_top(source, k, max_memory), n)
    # a stream of its own: the comparison's sampled scoring took its columns in default_rng(seed)'s permutation,
    # and a cut pass in that order left it sampling only the columns read (N = 12,000 RBF kernel cut at 3,276
    # columns: estimated rel 0.9695 +- 0.0024 where the exact error is 0.9910); the scoring has its own now too
    J = np.random.default_rng([seed, ORDER_STREAM]).permutation(n)
    rows, cols, vals, nnz, squares, read = _top_of_blocks(source, J, k, max_memory, deadline)
    order = np.argsort(rows * n + cols, kind="stable")
    by_column = np.zeros(n)
    by_column[J] = squares  # (in column order, as a whole pass in order sums them)
    return rows[order], cols[order], vals[order], nnz, float(np.sum(by_column)), read


def _top_width(source, max_memory: int | None) -> int:
    """The columns of a dense block of the top-s pass: per column, its non-zeros' rows, columns and values,
    their concatenation with the candidates, the magnitudes and the row-major order of the selection
    (8 arrays besides the block)."""
    return source.block_width(max_memory, extra_columns=8)


def _admitted(held: tuple, new: tuple, k: int, n: int) -> tuple[tuple, float]:
    """The candidates ``held`` (rows, columns, values) and the ``new`` ones, the ``k`` largest kept
    (:func:`_keep_largest`), and the magnitude an entry must reach to enter next (0 until ``k`` are held)."""
    rows, cols, vals = _keep_largest(*(np.concatenate([a, b]) for a, b in zip(held, new)), k, n)
    return (rows, cols, vals), (float(np.abs(vals).min()) if vals.size >= k else 0.0)


#: Bytes per stored entry the sparse top-s pass holds for a piece of columns: its COO copy (row, column,
#: value), the magnitudes, the mask and the candidates' concatenation (measured with tracemalloc: about 60).
_SPARSE_ENTRY_BYTES = 64
#: Stored entries of a piece at the least (however small the limit: a piece's copies are then a few MB).
_SPARSE_PIECE_MIN = 1 << 16


def _top_of_sparse(source, J: np.ndarray, k: int, max_memory: int | None):
    """:func:`_top_of_range` of a matrix held sparse (:attr:`~sfapprox.sources.MatrixSource.sparse_matrix`):
    its columns ``J`` in pieces of at most half the limit's worth of stored entries, each piece's non-zeros
    the candidates (no dense block: 15.9 s for 300 non-zeros at N = 60,000; all of ``J`` at once held
    720 MB of copies for 9.5 million non-zeros under a 300 MB limit)."""
    held = source.sparse_matrix
    limit = memory_limit(max_memory if max_memory is not None else source.max_memory)
    per_piece = max(_SPARSE_PIECE_MIN, int(BLOCK_SHARE * max(0, (limit or 1 << 62) - source.held_bytes)) // _SPARSE_ENTRY_BYTES)
    counts = np.cumsum(held.indptr[J + 1] - held.indptr[J])
    rows = cols = np.zeros(0, dtype=np.int64)
    vals = np.zeros(0)
    nnz, squares, start, threshold = 0, np.zeros(J.size), 0, 0.0
    while start < J.size:
        before = counts[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(counts, before + per_piece, side="right")))
        part = held[:, J[start:stop]].tocoo()
        keep = np.abs(part.data) >= threshold if threshold > 0 else part.data != 0
        nnz += int(np.count_nonzero(part.data))
        # each column's squares added in its own entries' order, whatever the piece (as column_squares)
        squares[start:stop] = np.bincount(part.col, weights=np.square(part.data), minlength=stop - start)
        if k > 0:
            new = (part.row[keep].astype(np.int64), J[start:stop][part.col[keep]], part.data[keep])
            (rows, cols, vals), threshold = _admitted((rows, cols, vals), new, k, source.n)
        start = stop
    return rows, cols, vals, nnz, squares


def _nonzeros(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns and values of the non-zeros of ``X`` in row-major order."""
    if sp.issparse(X):
        coo = sp.csr_array(X).tocoo()  # canonical CSR: sorted, no duplicates
        keep = coo.data != 0
        return coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64), coo.data[keep]
    flat = np.flatnonzero(X)
    rows, cols = np.divmod(flat, X.shape[1])
    return rows, cols, X.ravel()[flat]


# --------------------------------------------------------------------------- the method
class SparseApproximation(Approximation):
    """The ``s`` largest-magnitude entries of ``X`` (the best ``s``-sparse approximation).

    Parameters
    ----------
    n_sparse : int or None, default=None
        Entries to keep, ``s``.  When None, the most that fit ``budget``
        (:func:`sparse_entries_for_budget`).  Never more than ``nnz(X)``.
    budget : int or None, default=None
        Stored-number budget (sets ``s`` when ``n_sparse`` is None; with both, an
        ``n_sparse`` over the budget is refused: :class:`~sfapprox.BudgetError`), counted as
        ``2 s + N + 1`` (:func:`sparse_count`).
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes of a fit from a :class:`~sfapprox.sources.MatrixSource`'s
        columns: one that would keep more than it beside its passes' blocks is refused
        before any pass, and the passes are sized for it (None: the source's own
        limit, else 80% of the physical memory).  A dense matrix in memory whose
        selection (several copies of it) would be over the limit is read by its
        column blocks instead (``params_["from"] == "columns"``), as a comparison
        does; a scipy sparse one is selected from its entries (about 112 bytes
        each).
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Seconds the pass over a :class:`~sfapprox.sources.MatrixSource`'s columns may take; None for
        none.  Where its next block would end after it (at the time of the slowest block so far), the
        pass stops there, as Nyström's and the randomized SVD's one pass do: the result is the ``s``
        largest entries of the columns read (``params_["columns_read"]``), ``stop_reason_ ==
        "time_limit"``, with a warning naming the limit a whole pass needs.  A selection in memory (a
        matrix held sparse too) takes no limit: it is one partition, far below a pass's time.
    random_state : int, default=0
        Seed of the order a pass over a source's columns under ``time_limit`` reads its blocks in (a
        seeded random order, so that a cut pass has read columns from all of the matrix); a whole pass
        and a selection in memory keep the same entries whatever the seed.

    Attributes
    ----------
    operator_ : SparseOperator
    S_ : scipy.sparse.csr_array
        The kept entries.
    n_sparse_ : int
    n_stored_ : int
        ``2 s + N + 1``.
    seconds_ : float
    stop_reason_ : str
        ``"exact"`` (every non-zero kept: the surrogate is ``X``) or
        ``"closed_form"`` (the best ``s``-sparse approximation), or ``"time_limit"`` (a pass over
        columns cut by ``time_limit``: the largest entries of the columns read).
    params_ : dict
        ``n_sparse``, ``nnz`` (of ``X``), ``exact``, ``format`` ("csr"),
        ``count_indices`` (True), ``index_storage`` (index numbers stored,
        ``s + N + 1``) and ``exact_budget`` (numbers that store ``X``
        exactly, ``2 nnz + N + 1``).  A cut pass knows neither ``nnz`` nor
        ``exact_budget`` (absent; ``exact`` False): ``columns_read`` and
        ``nnz_read`` (the non-zeros of the columns read) instead.

    Examples
    --------
    >>> X = np.diag([3.0, -1.0, 2.0])
    >>> a = SparseApproximation(budget=8).fit(X)
    >>> a.params_["n_sparse"], a.n_stored_, a.stop_reason_
    (2, 8, 'closed_form')
    >>> SparseApproximation(budget=10).fit(X).stop_reason_
    'exact'
    """

    _method = "sparse"

    _accepts_sources = True
    _parameter_constraints = {
        "n_sparse": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "max_memory": MEMORY_LIMIT,
        "time_limit": Interval(float, 0, None, allow_none=True),
        "random_state": SEED,
    }

    def __init__(self, n_sparse: int | None = None, *, budget: int | None = None, max_memory: int | str | None = None,
                 time_limit: float | None = DEFAULT_TIME_LIMIT, random_state: int = DEFAULT_SEED):
        self.n_sparse = n_sparse
        self.budget = budget
        self.max_memory = max_memory
        self.time_limit = time_limit
        self.random_state = random_state

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "SparseApproximation":
        """Keep the largest entries of the square matrix ``X`` (dense, sparse or a source).

        ``check_input=False`` skips validating ``X`` (the caller did).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square matrix; a :class:`~sfapprox.sources.MatrixSource` is read in
            one pass over its columns (never formed).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        SparseApproximation
            ``self``, fitted.

        Raises
        ------
        BudgetError
            When the budget cannot hold one entry (below ``N + 3``).
        """
        X = self._validate(X, check_input)
        n = X.n if isinstance(X, MatrixSource) else X.shape[0]
        if self.n_sparse is None and self.budget is None:
            raise ParameterError("SparseApproximation needs n_sparse or a budget")
        if self.n_sparse is None:
            limit = sparse_entries_for_budget(n, self.budget)
            # the zero matrix: no entry to keep, and no entry stores nothing (sparse_count), within any budget
            if limit == 0 and not is_zero_matrix(X):
                raise BudgetError(below_smallest(self.budget, n, f"one entry in CSR, its value, column index and "
                                                                 f"{n + 1:,} row pointers", sparse_count(n, 1)))
        else:
            limit = min(self.n_sparse, n * n)
            fits = sparse_entries_for_budget(n, self.budget or 0)
            check_within(sparse_count(n, limit), self.budget, counted(limit, "entry", "entries"),
                         f"choose n_sparse of at most {fits}" if fits else "raise the budget, or give none")
        X = self._within_limit(X)  # a matrix in memory whose selection is over the limit: its columns
        start = time.perf_counter()
        from_columns = isinstance(X, MatrixSource)
        read = n
        if from_columns or (not sp.issparse(X) and n > STREAMED_MIN_N):
            # Too big to form: one pass over its columns.  A large dense X goes the same way, in
            # blocks of selection_bytes(n): the same entries, without six N x N temporaries.
            source, memory = ((self._from_columns(X, sparse_count(n, limit)), None) if from_columns
                              else (ArraySource(X), selection_bytes(n)))
            # a pass over columns stops at the time limit, as the other methods' passes do (at N = 12,000 an RBF
            # kernel's pass took 33 s of a 20 s limit); X in memory, read by blocks, is not cut
            deadline = _timing.Deadline.after(self.time_limit) if from_columns else None
            began = _timing.now()
            # (the run's seed: compare(seed=...) reaches it through the settings, as rsvd's and nystrom's)
            rows, cols, vals, nnz, squared, read = timed_top(source, limit, memory, deadline, self.random_state)
            passed = _timing.now() - began
            # a matrix never formed is known by this pass alone: one whose ||X||^2 is out of float64's range
            # is refused here, as one in memory is (1e-300 entries were a ZeroDivisionError, 0 / 0)
            check_squared_norm(squared, source.name, nonzero=nnz > 0,
                               largest=float(np.abs(vals).max()) if vals.size else None)
            S = sp.csr_array((vals, (rows, cols)), shape=(n, n))
            s = int(vals.size)
            own = own_pass_error(squared, vals, exact=s == nnz) if read == n else None  # (unread columns: unknown)
        else:
            rows, cols, vals = _nonzeros(X)
            kept = top_entries(vals, limit)
            S = sp.csr_array((vals[kept], (rows[kept], cols[kept])), shape=(n, n))
            nnz, s = int(vals.size), int(kept.size)
            own = None  # (a comparison scores a matrix in memory exactly, on X)
        self.seconds_ = time.perf_counter() - start
        cut = read < n
        exact = s == nnz and not cut
        self.S_ = S
        self.n_sparse_ = s
        self.operator_ = SparseOperator(S)
        self.n_stored_ = sparse_count(n, s)
        self.stop_reason_ = "time_limit" if cut else ("exact" if exact else "closed_form")
        # (X's non-zeros, and the numbers that store it exactly, are not known from a cut pass)
        whole = {"nnz_read": nnz, "columns_read": read} if cut else {
            "matrix_nnz": nnz,  # X's non-zeros
            "nnz": nnz,  # the same, by its first name (a saved fit's record has its own "nnz": the stored count)
        }
        self.params_ = {
            "n_sparse": s,
            **whole,
            "exact": exact,
            "format": "csr",
            "count_indices": True,
            "index_storage": s + n + 1,
            **({} if cut else {"exact_budget": sparse_count(n, nnz)}),
            **({"from": "columns"} if from_columns else {}),
        }
        if cut:
            # what a whole pass would take at the speed of the part read: the limit to ask for
            needed = passed * n / read
            warnings.warn(f"SparseApproximation's one pass over X did not fit time_limit={self.time_limit:g} s: it "
                          f"was cut at {read:,} of {n:,} columns (the largest entries of those are kept); a whole "
                          f"pass needs about {limit_text(needed)} s", ConvergenceWarning, stacklevel=user_stacklevel())
        if own is not None:  # scored exactly by the selection's own pass: a comparison need not sample it
            self.fro_error_, self.rel_error_ = own
            self.error_from_pass_ = True
        return self

    def to_dense(self) -> np.ndarray:
        """The kept entries as a dense ``N x N`` array.

        Returns
        -------
        numpy.ndarray
            The kept entries (zeros elsewhere), of shape ``(N, N)``.
        """
        return self.S_.toarray()


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> SparseApproximation:
    return SparseApproximation(**context.settings.apply_to(SparseApproximation, budget=budget))


register(
    MethodSpec(
        name="sparse",
        operators=("csr",),
        summary="the largest entries, stored as CSR (exact when every non-zero fits)",
        stores="2·s + N + 1",
        make=_make,
        min_budget=_min_budget,
        order=25,
        label="sparse storage",
        iterative=False,
        access=("dense", "columns"),
        working_memory=working_memory,
        sparse_memory=sparse_memory,
        # the entries kept (a block's candidates are sized with the block: 8 more columns per column)
        columns_memory=lambda n, budget: 8 * 6 * budget,
        # of a matrix held sparse it keeps its non-zeros at most, whatever the budget
        columns_kept=sparse_count,
    )
)
