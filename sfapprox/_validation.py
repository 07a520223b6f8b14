"""Input validation shared by every entry point.

Data is validated once, at the boundary (``load_matrix``, ``as_loaded``, the
estimators' ``fit``), by :func:`check_square_matrix`; private solvers trust
their arrays afterwards.  Memory refusals go through :func:`check_memory` so
that every "too big" message has one shape and names the ``--max-memory`` knob.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import sys
import warnings
from typing import TYPE_CHECKING, TypeAlias, Union

import numpy as np
import scipy.sparse as sp

from ._errors import InputError, ParameterError, ResourceError, parameter, user_stacklevel
from ._resources import physical_memory
from .formats import counted, shape_phrase, shape_text

if TYPE_CHECKING:  # for type checkers only: torch is imported where a tensor is met, never to validate an array
    import torch
    from scipy.sparse.linalg import LinearOperator

__all__ = [
    "check_square_matrix",
    "check_sparse_structure",
    "estimate_dense_bytes",
    "check_memory",
    "default_memory_limit",
    "format_bytes",
    "check_path",
    "MatrixArray",
    "is_zero_matrix",
    "torch_sparse_as_scipy",
]

#: A square matrix held in memory, or read by its products: what :func:`check_square_matrix` and
#: :func:`~sfapprox.metrics.frobenius_error` take.  With a source of its columns it is the matrix input
#: of the estimators and :func:`~sfapprox.compare` (:data:`sfapprox.sources.MatrixLike`, which the
#: sources, importing this module, define).
MatrixArray: TypeAlias = Union[np.ndarray, sp.sparray, sp.spmatrix, "torch.Tensor", "LinearOperator"]

#: Fraction of physical RAM (a cgroup's limit where lower) that a single matrix may use when no
#: explicit ``max_memory`` is given.  The rest is left for the solvers' work arrays.
MEMORY_FRACTION = 0.8

#: Largest accepted ``||X||_F**2``.  Errors, norms and losses everywhere are
#: sums of squares in float64 (``np.linalg.norm`` squares without rescaling), so
#: ``||X||_F`` must stay below ``sqrt(max float64) ~ 1.3e154``; the factor 4
#: leaves room for ``||X - approx||_F <= 2 ||X||_F``.  Entries of 1e150 are fine.
MAX_SQUARED_NORM = float(np.finfo(np.float64).max) / 4

#: Smallest accepted ``||X||_F**2`` of a nonzero matrix: below the smallest
#: normal float64 the sum of squares loses its digits (and then becomes 0, so a
#: nonzero matrix would be scored as the zero matrix).  Entries of 1e-150 are fine.
MIN_SQUARED_NORM = float(np.finfo(np.float64).tiny)


def format_bytes(n_bytes: float, *, up: bool = False) -> str:
    """Return ``n_bytes`` as a short human-readable string (``"1.5 GiB"``).

    Parameters
    ----------
    n_bytes : float
        A number of bytes.
    up : bool, default=False
        Round up to the digit shown (a least limit to give: 32.16 MiB shown as 32.2, never 32.1).

    Returns
    -------
    str
        The size with a binary unit.

    Examples
    --------
    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
    """
    size = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(size) < 1024 or unit == "EiB":
            if unit == "B":
                return f"{size:.0f} {unit}"
            if up and abs(size) < 1e4:
                size = math.ceil(size * 10) / 10
            return f"{size:.1f} {unit}" if abs(size) < 1e4 else f"{size:.3g} {unit}"
        size /= 1024
    return f"{size:.1f} EiB"  # pragma: no cover - loop always returns


def default_memory_limit() -> int | None:
    """Return the default memory limit: 80% of physical RAM, or None if unknown.

    The RAM is :func:`~sfapprox._resources.physical_memory`'s: the host's, or the memory limit of the
    process's cgroup (a container's, a job's) where lower, since the kernel kills the process there
    without a word.  Where it is unknown there is no limit, and a warning says so once (give
    ``max_memory=`` / ``--max-memory``).

    Returns
    -------
    int or None
        The limit in bytes.

    Examples
    --------
    >>> limit = default_memory_limit()
    >>> limit is None or limit > 0
    True
    """
    total = physical_memory()
    if total is None:
        _warn_no_memory_limit()
        return None
    return int(total * MEMORY_FRACTION)


#: Whether the warning that no memory limit applies was given (once a process: every load asks).
_warned_no_limit = False


def _warn_no_memory_limit() -> None:
    global _warned_no_limit
    if _warned_no_limit:
        return
    _warned_no_limit = True
    warnings.warn("this system does not tell its physical memory, so no memory limit applies; give one "
                  "(--max-memory 8G; max_memory= in Python) to have work too big for it refused before it starts",
                  RuntimeWarning, stacklevel=user_stacklevel())


#: Bytes torch and the BLAS/LAPACK libraries take on first use beyond what importing them took
#: (thread pools, allocator caches, LAPACK workspaces; measured about 35 MB on the CPU), counted in
#: every estimate of a fit's memory.
LIBRARY_WORKING_SET = 64 << 20
#: Bytes numba and llvmlite take on the first compiled fit or product of a process: importing them and
#: compiling the kernels (first run after installing) or loading them from numba's cache.  Measured
#: beyond LIBRARY_WORKING_SET at N = 64: 44 MB from the cache, 88 MB compiling; the Chord products'
#: apply kernels (scoring a butterfly above N = 1,024): 98 MB.  In a fresh virtual environment (as
#: CI's; 2026-11-27) the same first fit peaked 47 MB higher (218 MB at N = 64 against 195 MB
#: estimated with 128 MB here), so 160 MB.  Counted where a compiled kernel will run.
COMPILED_WORKING_SET = 160 << 20
#: Bytes more where a fit also runs its L-BFGS iterations compiled whole (a float64 CPU fit below
#: N = 512, :func:`sfapprox.sf._solver._compiled_steps`): compiling them took the first fit's peak
#: from 164 MB to 207 MB at N = 64 here, from 218 MB to 259 MB in a fresh virtual environment (fresh
#: numba cache both; about 120 MB and 170 MB from the cache).
COMPILED_LOOP_WORKING_SET = 64 << 20


def held_bytes(matrix) -> int:
    """Bytes a matrix holds in memory: a dense array's (0 for a memory map: its pages are the file's), or
    a sparse matrix's values and index arrays."""
    if sp.issparse(matrix):
        data = getattr(matrix, "data", None)
        if not isinstance(data, np.ndarray) or data.dtype == object:
            # a DOK (a dict, no data array) or a LIL (a list a row): its values and positions at the least
            return 24 * int(matrix.nnz)
        return int(sum(a.nbytes for a in (matrix.data, getattr(matrix, "indices", np.zeros(0)),
                                          getattr(matrix, "indptr", np.zeros(0)),
                                          getattr(matrix, "row", np.zeros(0)), getattr(matrix, "col", np.zeros(0)))))
    if isinstance(matrix, np.memmap):
        return 0
    return int(getattr(matrix, "nbytes", 0))


def memory_limit(max_memory: int | None) -> int | None:
    """The memory limit in force: ``max_memory`` when given, else :func:`default_memory_limit`.

    Parameters
    ----------
    max_memory : int or None
        The limit asked for (``--max-memory``, ``max_memory=``), in bytes.

    Returns
    -------
    int or None
        Bytes; None when none was asked for and the machine's memory is unknown.

    Examples
    --------
    >>> memory_limit(2**30)
    1073741824
    """
    return max_memory if max_memory is not None else default_memory_limit()


def estimate_dense_bytes(n: int, dtype: np.dtype | type = np.float64) -> int:
    """Bytes needed by a dense ``n x n`` array of ``dtype``.

    Parameters
    ----------
    n : int
        Matrix order.
    dtype : numpy dtype, default=float64
        Element type.

    Returns
    -------
    int
        ``n * n * itemsize``.

    Examples
    --------
    >>> estimate_dense_bytes(1000)
    8000000
    """
    return int(n) * int(n) * np.dtype(dtype).itemsize


def check_memory(n_bytes: int, *, what: str, limit: int | None = None, held: int = 0,
                 advice: str = "use a smaller input") -> None:
    """Refuse work that would need more than ``limit`` bytes, before allocating.

    Parameters
    ----------
    n_bytes : int
        Estimated number of bytes the work needs.
    what : str
        What needs the memory, e.g. ``"data.mtx: dense 50000 x 50000 float64 matrix"``;
        it starts the error message.
    limit : int or None, default=None
        Limit in bytes; None means :func:`default_memory_limit`.
    held : int, default=0
        Bytes of the limit already taken by a matrix held in memory: the work
        gets the rest, and the message says so (not a smaller "limit" than the
        one the user gave).
    advice : str, default="use a smaller input"
        What else helps, after raising the limit (``"lower the budget"``).

    Raises
    ------
    ResourceError
        If ``n_bytes > limit``; the message gives the estimate, the limit and
        the ``--max-memory`` option.

    Examples
    --------
    >>> check_memory(1024, what="tiny", limit=2048)
    """
    limit = memory_limit(limit)
    if limit is None or n_bytes + held <= limit:
        return
    beside = f" beside the matrix held in memory ({format_bytes(held)})" if held > 0 else ""
    need, cap = format_bytes(n_bytes), format_bytes(limit)
    if need == cap and not held:  # "needs about 6.9 MiB, over the memory limit of 6.9 MiB": the bytes
        need, cap = f"{int(n_bytes):,} B", f"{int(limit):,} B"
    raise ResourceError(
        f"{what} needs about {need}{beside}, over the memory limit of "
        f"{cap}; raise the limit with {parameter('max_memory')} "
        f"if the machine has the room, or {advice}"
    )


# ---------------------------------------------------------------------------
# check_square_matrix
# ---------------------------------------------------------------------------


def check_matrix_dtype(dtype: np.dtype, source: str) -> None:
    """Raise InputError unless ``dtype`` is a real numeric (or boolean) type."""
    if dtype.kind == "c":
        raise InputError(f"{source}: complex matrices are not supported; pass the real part (X.real) or abs(X)")
    if dtype.kind == "O":
        raise InputError(f"{source}: matrix has object dtype; convert it to a numeric array first")
    if dtype.kind not in "biuf":
        raise InputError(f"{source}: matrix has non-numeric dtype {dtype}; convert it to a numeric array first")


def _reshape_hint(shape: tuple[int, ...]) -> str:
    """What to do with an array that is not 2-D: the fix its shape points to (an image's ``(N, N, 1)``
    squeezed, a flattened ``(N*N,)`` reshaped), else the plain requirement."""
    size = math.prod(shape)
    if len(shape) > 2 and sum(d != 1 for d in shape) == 2:
        return "drop its axes of length 1 (numpy.squeeze)"
    side = math.isqrt(size)
    if len(shape) == 1 and side > 1 and side * side == size:
        return f"if it holds a {side:,} x {side:,} matrix row by row, reshape it (X.reshape({side}, {side}))"
    return "give a square 2-D array (N x N)"


def _check_shape(shape: tuple[int, ...], source: str) -> None:
    """Raise InputError unless ``shape`` is a non-empty square 2-D shape."""
    if len(shape) != 2:
        # the shape alone did not say what to do: an image's (N, N, 1), a flattened matrix's (N*N,)
        raise InputError(
            f"{source}: matrix must be 2-D, got a {len(shape)}-D array{f' of shape {shape_text(shape)}' if shape else ''}; "
            f"{_reshape_hint(tuple(shape))}"
        )
    rows, cols = shape
    if rows == 0 or cols == 0:
        raise InputError(f"{source}: matrix is empty ({rows:,} x {cols:,}); there is nothing to approximate: give a "
                         "matrix of at least 1 x 1")
    if rows != cols:
        raise InputError(
            f"{source}: matrix is not square ({rows:,} x {cols:,}); only square matrices can be "
            f"approximated (for a samples x features table use {parameter('covariance', True)})"
        )


#: Cells :func:`first_nonfinite` tells the finiteness of at a time: a 64 KiB mask, not one of the whole table.
FINITE_BLOCK = 1 << 16


def first_nonfinite(table: np.ndarray) -> tuple[int, int] | None:
    """The first non-finite cell ``(row, column)`` of a 2-D real ``table``, in row order, or None where
    every cell is finite; looked for a block of rows (:data:`FINITE_BLOCK` cells) at a time.

    ``np.isfinite(table).all()`` made a bool copy of the whole table (and ``np.argwhere`` of its negation two
    more) beside it, whatever the memory limit said; this takes one block's mask.

    Examples
    --------
    >>> first_nonfinite(np.array([[1.0, 2.0], [3.0, np.nan]])), first_nonfinite(np.eye(2))
    ((1, 1), None)
    """
    for start, finite in _finite_blocks(table):
        if not finite.all():
            i = int(np.argmin(finite.all(axis=1)))  # the first row holding one, then its first column
            return start + i, int(np.argmin(finite[i]))
    return None


def count_nonfinite(table: np.ndarray) -> int:
    """How many cells of a 2-D real ``table`` are NaN or infinite, counted a block of rows
    (:data:`FINITE_BLOCK` cells) at a time, as :func:`first_nonfinite` looks.

    Examples
    --------
    >>> count_nonfinite(np.array([[np.inf, 2.0], [3.0, np.nan]])), count_nonfinite(np.eye(2))
    (2, 0)
    """
    return sum(finite.size - int(np.count_nonzero(finite)) for _, finite in _finite_blocks(table))


def _finite_blocks(table: np.ndarray):
    """``(first row, finiteness mask)`` of each block of :data:`FINITE_BLOCK` cells' rows of ``table``; none
    for integers (all finite)."""
    if table.dtype.kind in "biu":
        return
    rows = max(1, FINITE_BLOCK // max(1, table.shape[1]))
    for start in range(0, table.shape[0], rows):
        yield start, np.isfinite(table[start:start + rows])


def _raise_nonfinite(count: int, row: int, col: int, source: str) -> None:
    # an array has no lines: its position is numpy's index, said to be 0-based (the text readers say a
    # 1-based "line L, column C")
    one = count == 1
    raise InputError(
        f"{source}: matrix has {counted(count, 'NaN/Inf entry', 'NaN/Inf entries')} (the first at [{row}, {col}]: "
        f"0-based, as numpy indexes); replace {'it' if one else 'them'} (numpy.nan_to_num) or remove "
        f"{'its row and column' if one else 'their rows and columns'}"
    )


def _sum_of_squares(values: np.ndarray) -> float:
    """``values . values`` (inf or NaN where it over-flows or an entry is not finite), one pass, no temporary."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return float(np.dot(values, values)) if values.size else 0.0


def check_magnitude(values: np.ndarray, source: str, squared: float | None = None) -> None:
    """Refuse finite values whose sum of squares over- or underflows float64.

    ``values`` is a 1-D view of every stored entry; ``squared`` their sum of squares when the caller
    has it.  The dot product costs one pass and no temporary; the extremes are only looked up to word
    the error.
    """
    if squared is None:
        squared = _sum_of_squares(values)
    if squared <= MAX_SQUARED_NORM and (squared >= MIN_SQUARED_NORM or squared == 0.0 and not values.any()):
        return
    check_squared_norm(squared, source, nonzero=True, largest=float(max(values.max(), -values.min())))


def check_squared_norm(squared: float, source: str, *, nonzero: bool, largest: float | None = None) -> None:
    """Refuse a matrix whose ``||X||_F**2`` (``squared``, summed by a pass over its entries or columns) is
    out of float64's range: over :data:`MAX_SQUARED_NORM`, or under :data:`MIN_SQUARED_NORM` although
    ``nonzero`` (some entry is not 0: its squares underflowed, to 0 or to subnormals).

    :func:`check_magnitude`'s test and words, for a matrix never held whole: a pass over its columns
    knows the sum, whether an entry was non-zero, and perhaps the ``largest`` ``|entry|``.

    Examples
    --------
    >>> check_squared_norm(0.0, "X", nonzero=False)  # the zero matrix
    >>> check_squared_norm(0.0, "X", nonzero=True)
    Traceback (most recent call last):
    ...
    sfapprox._errors.InputError: X: values too small: ||X||_F**2 underflows float64, so errors cannot be computed; multiply the matrix by a constant (e.g. 1 / its largest entry)
    """
    if squared <= MAX_SQUARED_NORM and (squared >= MIN_SQUARED_NORM or not nonzero):
        return
    seen = f" (largest |entry| {largest:.3g})" if largest is not None else ""
    if squared > MAX_SQUARED_NORM:
        raise InputError(
            f"{source}: values too large{seen}: ||X||_F**2 overflows float64, "
            "so errors cannot be computed; divide the matrix by a constant (e.g. its largest entry)"
        )
    raise InputError(
        f"{source}: values too small{seen}: ||X||_F**2 underflows float64, "
        "so errors cannot be computed; multiply the matrix by a constant (e.g. 1 / its largest entry)"
    )


def check_sparse_structure(X, *, source: str = "array") -> None:
    """Refuse sparse index arrays that point outside the matrix, before any conversion.

    scipy's constructors check only lengths, and its C++ routines (format
    conversion, ``sum_duplicates``) trust the indices: a corrupt file
    (``.npz``, ``.mat``, Harwell-Boeing) with an index out of range makes them
    read and write out of bounds (a segfault, or worse).  Read-only, unlike
    ``check_format(full_check=True)``, which may recast the caller's index
    arrays in place.

    Parameters
    ----------
    X : scipy.sparse matrix or array
        CSR, CSC, COO and BSR are checked; other formats are built through
        scipy's checked Python code and pass.
    source : str, default="array"
        Starts the error message.

    Raises
    ------
    InputError
        For an index pointer of the wrong length, not starting at 0, or
        decreasing, or an index outside the shape.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> check_sparse_structure(sp.eye(3, format="csr"))
    """
    fmt = X.format
    if fmt in ("csr", "csc"):
        major, minor = X.shape if fmt == "csr" else X.shape[::-1]
        what = ("row", "column") if fmt == "csr" else ("column", "row")
        indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
        if indptr.ndim != 1 or indptr.size != major + 1:
            raise InputError(
                f"{source}: invalid sparse matrix: index pointer has {indptr.size:,} entries, expected {major + 1:,}"
            )
        if indptr[0] != 0 or (np.diff(indptr) < 0).any():
            raise InputError(f"{source}: invalid sparse matrix: index pointer must start at 0 and never decrease")
        nnz = int(indptr[-1])
        if nnz > min(indices.size, np.size(X.data)):
            raise InputError(
                f"{source}: invalid sparse matrix: index pointer ends at {nnz:,}, but only "
                f"{counted(min(indices.size, np.size(X.data)), 'entry is', 'entries are')} stored"
            )
        used = indices[:nnz]
        if used.size and (used.min() < 0 or used.max() >= minor):
            bad = int(used[(used < 0) | (used >= minor)][0])
            raise InputError(
                f"{source}: invalid sparse matrix: {what[1]} index {bad} out of range 0..{minor - 1}"
            )
    elif fmt == "coo":
        coords = X.coords if hasattr(X, "coords") else (X.row, X.col)
        for axis, (idx, size) in enumerate(zip(coords, X.shape)):
            idx = np.asarray(idx)
            if idx.size and (idx.min() < 0 or idx.max() >= size):
                bad = int(idx[(idx < 0) | (idx >= size)][0])
                raise InputError(
                    f"{source}: invalid sparse matrix: {('row', 'column')[axis]} index {bad} out of range 0..{size - 1}"
                )
    elif fmt == "bsr":
        try:
            X.copy().check_format(full_check=True)  # on a copy: it may recast index arrays in place
        except ValueError as exc:
            raise InputError(f"{source}: invalid sparse matrix ({' '.join(str(exc).split())})") from None


def _float_values(X):
    """A scipy sparse ``X`` with float64 values, its stored entries as they are (repeats not summed yet).

    The values are cast alone, before anything sums the repeats: an int64 sum wraps around (two entries
    of 6e18 gave -6.4e18).  Not ``X.astype`` for the formats with a ``.data``: it sums the repeats as well,
    a pass over the matrix that the callers, converting to CSR, make again.
    """
    if X.format not in ("coo", "csr", "csc", "bsr"):
        # dok, lil, dia: one value per position already (a dok has no .data, a lil's is an object array of lists)
        return X.astype(np.float64)
    values = np.asarray(X.data).astype(np.float64)  # a copy: the caller's values stay as they are
    if X.format == "coo":
        return sp.coo_array((values, (X.row, X.col)), shape=X.shape)
    return type(X)((values, X.indices, X.indptr), shape=X.shape)


def _stored_values(X) -> list[np.ndarray]:
    """A scipy sparse ``X``'s stored values, in their own dtype, as arrays: its ``.data`` where that is
    one (no copy); a dia's diagonals cut to the matrix (views; its ``.data`` holds values outside it too);
    a dok's and a lil's read into one array of ``nnz`` values.

    Not their COO copy: scipy's lil to COO passes the values through float64 (a longdouble 1e-400 came
    back 0, 1e400 inf), and its index arrays, for a dok, lil or dia, were a copy past what
    :func:`check_memory` counted; the one array made here, freed before the canonical copy is made, is
    within what it counted for that copy (16 bytes an entry)."""
    if X.format in ("coo", "csr", "csc", "bsr"):
        return [np.asarray(X.data)]
    if X.format == "dok":
        return [np.fromiter(X.values(), dtype=X.dtype, count=len(X))]
    if X.format == "lil":
        return [np.fromiter(itertools.chain.from_iterable(X.data), dtype=X.dtype, count=X.nnz)]
    if X.format == "dia":
        # diagonal k's entry j is at (j - k, j): in the matrix for max(k, 0) <= j < min(n_rows + k, n_cols)
        n_rows, n_cols = X.shape
        stop = min(n_cols, X.data.shape[1])
        return [X.data[i, max(k, 0):min(n_rows + k, stop)] for i, k in enumerate(X.offsets)]
    return [X.tocoo().data]  # (no format scipy has today)


def canonical_csr(sparse) -> sp.csr_array:
    """``sparse`` as float64 CSR with one entry per position, columns sorted in each row: a surrogate's
    sparse part (:class:`~sfapprox.operators.HybridOperator`) or a target scored by its entries
    (:mod:`~sfapprox.metrics`).  One that is so already is taken as it is; otherwise a new array (the
    caller's is left as it was).

    Integer values become float64 before repeated entries are summed, as :func:`check_square_matrix`
    converts them: scipy sums a COO's repeats in its own dtype as it converts it to CSR, and int64 wraps
    around (two entries of 6e18 gave -6.4e18).  Unlike :func:`check_square_matrix`'s copy, explicit zeros
    stay: a part's stored entries are what it is charged for.
    """
    if np.dtype(sparse.dtype).kind in "biu":
        sparse = _float_values(sparse)
    out = sp.csr_array(sparse, dtype=np.float64)
    if not out.has_canonical_format:
        out = out.copy()  # (the caller's array is left as it was)
        out.sum_duplicates()  # sorts the columns too
    return out


def stored_count(X) -> int:
    """The values a scipy sparse matrix stores, for a memory check before any copy of it: the size of its
    values' array where they are one numeric array (a BSR's blocks' every value; ``X.nnz`` would read an
    index pointer not checked yet), else ``X.nnz`` (a DOK has no ``data``; a LIL's is an object array
    of its rows, as many as the rows).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> [stored_count(sp.random(4, 4, density=0.5, format=f, random_state=0)) for f in ("csr", "dok", "lil")]
    [8, 8, 8]
    """
    data = getattr(X, "data", None)
    return int(np.size(data)) if isinstance(data, np.ndarray) and data.dtype != object else int(X.nnz)


def _check_sparse(X, source: str, max_memory: int | None, held: int = 0) -> sp.csr_array:
    """``X`` (scipy sparse) as :func:`check_square_matrix` returns it; ``held``: bytes of a copy of it made
    here (a GPU tensor's entries in host memory), held while the canonical copy is made."""
    check_matrix_dtype(np.dtype(X.dtype), source)
    _check_shape(X.shape, source)
    n = X.shape[0]
    # The canonical copy: row pointers, column indices and values (+ scipy's temporaries).  Checked before
    # the structure, whose check of a BSR is made on a copy; counted by the values stored (X.nnz reads
    # the index pointer, not checked yet).
    stored = stored_count(X)
    check_memory(
        2 * (8 * (n + 1) + 16 * stored),
        what=f"{source}: sparse {n:,} x {n:,} matrix with {counted(stored, 'stored entry', 'stored entries')}",
        limit=max_memory, held=held,
    )
    check_sparse_structure(X, source=source)
    if np.dtype(X.dtype).kind == "f" and np.dtype(X.dtype).itemsize > 8:
        # before the float64 copy, which made 1e400 an inf ("1 NaN/Inf entry") after scipy's overflow warning
        _check_float64_range(_stored_values(X), source)
    if np.dtype(X.dtype).kind in "biu":
        # Values become float64 before any duplicates are summed: scipy sums a
        # COO's duplicates in its own dtype, and int64 wraps around (two
        # entries of 6e18 would give -6.4e18).
        X = _float_values(X)
    # copy=True: canonicalising works in place and must not touch the caller's arrays.
    A = sp.csr_array(X, dtype=np.float64, copy=True)
    A.sum_duplicates()  # also sorts indices
    # Dropping explicit zeros makes ``nnz`` mean "nonzeros" for sparse and dense alike.
    A.eliminate_zeros()
    A.sort_indices()
    bad = ~np.isfinite(A.data)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        row = int(np.searchsorted(A.indptr, first, side="right") - 1)
        _raise_nonfinite(int(bad.sum()), row, int(A.indices[first]), source)
    check_magnitude(A.data, source)
    return A


def numpy_readable(X, *, source: str = "tensor", max_memory: int | None = None, as_float64: bool = False):
    """``X`` itself, or a torch tensor as numpy can read it: detached from autograd (numpy refused a
    tensor that ``requires_grad``: a raw RuntimeError), copied to host memory from a GPU
    (:func:`host_copy`: numpy refused it with torch's "can't convert cuda:0 device type tensor"), and a
    float type numpy lacks (bfloat16, the float8s) widened to float64, exactly.  The caller's tensor is
    not changed.  torch is never imported here: a tensor exists only where the caller imported it.

    ``source``, ``max_memory`` and ``as_float64`` (the caller makes a float64 copy of it next) word and
    size the memory check of a copy to host memory.
    """
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(X, torch.Tensor):
        return X
    X = X.detach()
    copied = X.device.type != "cpu"
    if copied:
        X = host_copy(X, source=source, max_memory=max_memory, as_float64=as_float64)
    if _numpy_lacks(X.dtype, torch):
        if not copied:  # (host_copy counted this copy with its own)
            _check_widening(X, source, max_memory)
        X = X.to(torch.float64)  # after the copy to the host: widened on the GPU it took 4 times its memory there
    return X


def _check_widening(X, source: str, max_memory: int | None) -> None:
    """Refuse the float64 copy of a tensor in host memory of a float type numpy lacks (bfloat16: 4 times
    its bytes) where it and the tensor are over the limit, as a numpy array's float64 copy is."""
    dtype = str(X.dtype).removeprefix("torch.")
    check_memory(8 * X.numel() + X.numel() * X.element_size(), limit=max_memory,
                 what=f"{source}: float64 copy of the {shape_text(X.shape)} {dtype} tensor (besides the "
                      "tensor it is made from)")


def host_copy(X, *, source: str = "tensor", max_memory: int | None = None, as_float64: bool = False):
    """A torch tensor on another device (a GPU) copied to host memory, once its copy is known to fit.

    Parameters
    ----------
    X : torch.Tensor
        A dense tensor, on a device other than the CPU.
    source : str, default="tensor"
        Starts the error message.
    max_memory : int or None, default=None
        The memory limit (None: :func:`default_memory_limit`).
    as_float64 : bool, default=False
        Whether a float64 copy of it is made next (a matrix validated by :func:`check_square_matrix`):
        counted with it, the peak of the two.

    Returns
    -------
    torch.Tensor
        On the CPU.

    Raises
    ------
    ResourceError
        Where the copy (and the float64 one) is over the limit; the GPU's tensor is not copied.
    """
    torch = sys.modules["torch"]
    # a float type numpy lacks is widened on the host (numpy_readable): that is the float64 copy then
    widened = _numpy_lacks(X.dtype, torch)
    wide = 8 * X.numel() if widened or (as_float64 and X.dtype != torch.float64) else 0
    dtype = str(X.dtype).removeprefix("torch.")
    check_memory(X.numel() * X.element_size() + wide, limit=max_memory,
                 what=f"{source}: the copy in host memory of the {shape_text(X.shape)} {dtype} tensor "
                      f"on {X.device}" + (" (and its float64 copy)" if wide else ""),
                 advice="use a smaller input (or slice the tensor on the GPU)")
    return X.cpu()


def is_zero_matrix(X) -> bool:
    """Whether ``X``, an array or a scipy sparse matrix in memory, holds no non-zero (one pass, no
    temporary); False for a matrix known by its columns (a source: known only by a pass over them).

    Examples
    --------
    >>> is_zero_matrix(np.zeros((2, 2))), is_zero_matrix(np.eye(2))
    (True, False)
    """
    if sp.issparse(X):
        return X.count_nonzero() == 0
    return isinstance(X, np.ndarray) and not X.any()


def torch_sparse_as_scipy(X, source: str = "X", max_memory: int | None = None):
    """``X`` itself, or a torch sparse tensor as the scipy sparse array of its stored entries: COO
    (duplicates kept, summed later as scipy's), CSR and CSC as they are, BSR and BSC through COO.  Only
    the indices and values are copied (to the CPU, detached, a float type numpy lacks widened as
    :func:`numpy_readable` does), never a dense ``N x N``.  numpy refused such a tensor with torch's own
    "Use Tensor.to_dense() first", while a dense tensor was taken.  torch is never imported here.

    ``max_memory`` limits the copy of a tensor on another device (a GPU) in host memory (None: the default
    limit): it is refused before it is made (:func:`sparse_tensor_host_bytes`).

    Raises
    ------
    InputError
        For a tensor that is not 2-D (a batched one), a hybrid COO tensor (dense dimensions in its
        values) or a layout without sparse indices to read (mkldnn).
    ResourceError
        Where the copy of a GPU tensor's entries in host memory is over ``max_memory``.
    """
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(X, torch.Tensor) or X.layout == torch.strided:
        return X
    _check_shape(tuple(X.shape), source)
    if X.device.type != "cpu":
        _check_sparse_host_copy(X, torch, source, max_memory)
    elif _converted_on_host(X, torch):
        _check_sparse_conversion(X, torch, source, max_memory)
    X = X.detach().cpu()
    if X.layout in (torch.sparse_bsr, torch.sparse_bsc):
        X = X.to_sparse_coo()
    if X.layout == torch.sparse_coo:
        if X.dense_dim():  # its values are rows or columns: no scipy sparse matrix holds that as it is
            raise InputError(f"{source}: a hybrid sparse tensor ({X.sparse_dim()} sparse, {X.dense_dim()} dense "
                             "dimensions); give one with 2 sparse dimensions (X.to_dense().to_sparse())")
        X = X.coalesce()  # (its indices are read only from a coalesced tensor; duplicates summed, as scipy's)
        rows, cols = X.indices().numpy()
        return sp.coo_array((_values_of(X), (rows, cols)), shape=tuple(X.shape))
    if X.layout == torch.sparse_csr:
        return sp.csr_array((_values_of(X), X.col_indices().numpy(), X.crow_indices().numpy()), shape=tuple(X.shape))
    if X.layout == torch.sparse_csc:
        return sp.csc_array((_values_of(X), X.row_indices().numpy(), X.ccol_indices().numpy()), shape=tuple(X.shape))
    raise InputError(f"{source}: a torch tensor of layout {X.layout}; give a dense tensor (X.to_dense()) or a "
                     "sparse COO, CSR or CSC one")


def sparse_tensor_host_bytes(X, torch) -> int:
    """Bytes a torch sparse tensor's entries take at their peak once copied to host memory by
    :func:`torch_sparse_as_scipy`: its index and value arrays as stored, again where they are converted
    there (an uncoalesced COO coalesced, a BSR or BSC made COO), and its values widened to float64 where
    numpy lacks their type (bfloat16).  Read from the arrays' sizes, no copy."""
    entries = _sparse_entries(X, torch)
    if entries is None:  # no entries to copy: the layout is refused after
        return 0
    parts, converted = entries
    stored = sum(p.numel() * p.element_size() for p in parts)
    values = parts[-1]
    return stored * (2 if converted else 1) + (8 * values.numel() if _numpy_lacks(values.dtype, torch) else 0)


def _numpy_lacks(dtype, torch) -> bool:
    """Whether ``dtype`` (a torch dtype) is a float type numpy has no type for (bfloat16, the float8s): such
    a tensor's values are widened to float64 to be read."""
    return dtype.is_floating_point and dtype not in (torch.float16, torch.float32, torch.float64)


def _sparse_entries(X, torch) -> tuple[tuple, bool] | None:
    """A torch sparse tensor's index and value arrays (the values last), and whether they are converted once
    on the host (an uncoalesced COO coalesced, a BSR or BSC made COO); None for a layout without them."""
    if X.layout == torch.sparse_coo:
        return (X._indices(), X._values()), not X.is_coalesced()
    if X.layout in (torch.sparse_csr, torch.sparse_bsr):
        return (X.crow_indices(), X.col_indices(), X.values()), X.layout == torch.sparse_bsr
    if X.layout in (torch.sparse_csc, torch.sparse_bsc):
        return (X.ccol_indices(), X.row_indices(), X.values()), X.layout == torch.sparse_bsc
    return None


def _check_sparse_host_copy(X, torch, source: str, max_memory: int | None) -> None:
    """Refuse the copy of a sparse tensor on a GPU to host memory where it is over the limit, before it is made."""
    shape = shape_text(X.shape)
    check_memory(sparse_tensor_host_bytes(X, torch), limit=max_memory,
                 what=f"{source}: the copy in host memory of the {shape} sparse tensor's {X._nnz():,} stored entries "
                      f"on {X.device}", advice="use a smaller input (or slice the tensor on the GPU)")


def _converted_on_host(X, torch) -> bool:
    """Whether :func:`torch_sparse_as_scipy` copies a CPU sparse tensor's entries before reading them: an
    uncoalesced COO is coalesced, a BSR or BSC made COO, a float type numpy lacks widened."""
    entries = _sparse_entries(X, torch)
    if entries is None:  # no entries to read: the layout is refused after
        return False
    parts, converted = entries
    return converted or _numpy_lacks(parts[-1].dtype, torch)


def _check_sparse_conversion(X, torch, source: str, max_memory: int | None) -> None:
    """Refuse the conversion of a CPU sparse tensor's entries (coalescing, BSR to COO, widening) where it and the
    entries it is made from are over the limit, before it is made, as a GPU tensor's copy to host memory is."""
    shape = shape_text(X.shape)
    values = X._values() if X.layout == torch.sparse_coo else X.values()  # (a BSR's _nnz() counts its blocks)
    check_memory(sparse_tensor_host_bytes(X, torch), limit=max_memory,
                 what=f"{source}: the conversion of the {shape} sparse tensor's {values.numel():,} stored values "
                      f"({str(X.layout).removeprefix('torch.')}, besides the entries it is made from)")


def _values_of(X) -> np.ndarray:
    """A torch sparse tensor's stored values as numpy reads them (:func:`numpy_readable`), float16 widened to
    float32 (exactly): scipy.sparse holds no float16 (its own ValueError, "does not support dtype float16")."""
    values = np.asarray(numpy_readable(X.values()))
    return values.astype(np.float32) if values.dtype == np.float16 else values


def refuse_masked(X, source: str, what: str = "a masked array", error: type[Exception] = InputError) -> None:
    """Refuse a numpy masked array with any entry masked: ``np.asarray`` keeps the values under the mask,
    so entries the caller marked missing were used as data without a word (a matrix was fitted to them,
    a point table's masked coordinates made kernel entries, a masked approximation was scored by them).
    One with nothing masked is its values.  ``what``: what the array is, after ``source`` (an argument's
    name and "a masked array": "the points, a masked array"); ``error``: the class raised (an operand's is
    a ParameterError).  The advice names no variable: the array is the points, an operand, an approximation
    as often as an ``X``.

    Examples
    --------
    >>> refuse_masked(np.ma.masked_array(np.eye(2)), "X")
    >>> refuse_masked(np.ma.masked_array(np.eye(2), mask=np.eye(2)), "X")
    Traceback (most recent call last):
    ...
    sfapprox._errors.InputError: X: a masked array with 2 masked entries; fill them first (.filled(0)), or pass its .data to use the values under the mask
    """
    if np.ma.isMaskedArray(X) and np.ma.getmask(X).any():
        masked = int(np.ma.count_masked(X))
        raise error(f"{source}: {what} with {counted(masked, 'masked entry', 'masked entries')}; "
                         f"fill {'it' if masked == 1 else 'them'} first (.filled(0)), or pass its .data to use the "
                         "values under the mask")


def array_of(a, source: str, what: str, max_memory: int | None = None) -> np.ndarray:
    """An array argument other than the matrix (points, queries and keys, a samples x features table)
    as numpy reads it: a torch tensor detached (:func:`numpy_readable`: numpy's RuntimeError for one that
    requires grad; one on a GPU copied to host memory), a scipy sparse table as its dense array (read as
    a 0-d object array: "got shape ()"), a ragged list an :class:`~sfapprox.InputError` (numpy's
    ValueError).  Its shape and dtype are the caller's to check; ``max_memory`` limits the copies made
    here (None: the default limit), each refused before it is made.

    Examples
    --------
    >>> array_of([[1, 2], [3, 4]], "kernel", "the points").shape
    (2, 2)
    """
    if sp.issparse(a):
        check_memory(math.prod(a.shape) * np.dtype(a.dtype).itemsize, limit=max_memory,
                     what=f"{source}: the dense copy of {what} ({shape_text(a.shape)}, sparse)")
        return a.toarray()
    refuse_masked(a, source, f"{what}, a masked array")
    try:
        # the caller makes a float64 copy next: counted with a GPU tensor's copy in host memory
        arr = np.asarray(numpy_readable(a, source=source, max_memory=max_memory, as_float64=True))
    except (TypeError, ValueError) as exc:
        raise InputError(f"{source}: cannot read {what} as an array ({' '.join(str(exc).split())})") from None
    # a pandas frame of nullable dtypes reads as an object array ("got object" said nothing of its numbers)
    return object_numbers(arr, source, what, max_memory) if arr.dtype.kind == "O" and arr.ndim else arr


def float64_table(arr: np.ndarray, source: str, what: str, max_memory: int | None = None, *, held: int = 0,
                  copy: bool = False) -> np.ndarray:
    """``arr`` (a table read by :func:`array_of`: points, queries, keys) as a C-contiguous float64 array, its copy
    refused before it is made where it and the array it is made from are over ``max_memory`` (a table of
    float32 points, or a column-major one, was copied whatever the limit said).

    Parameters
    ----------
    arr : numpy.ndarray
        The table.
    source, what : str
        Start the message (``"kernel"``, ``"the points"``).
    max_memory : int or None, default=None
        The memory limit (None: :func:`default_memory_limit`).
    held : int, default=0
        Bytes already held beside it (the queries while the keys are copied).
    copy : bool, default=False
        Always copy (the caller changes it: a covariance's centred table), not only where ``arr`` is not
        already C-contiguous float64.

    Returns
    -------
    numpy.ndarray
        ``arr`` itself where it is already C-contiguous float64 and ``copy`` is False, else its copy.

    Examples
    --------
    >>> float64_table(np.ones((2, 3), dtype=np.float32), "kernel", "the points").dtype
    dtype('float64')
    """
    if copy or arr.dtype != np.float64 or not arr.flags.c_contiguous:
        # the array is held while its copy is made: both count, as for a matrix's float64 copy
        shape = shape_text(arr.shape)
        check_memory(held_bytes(arr) + 8 * arr.size, limit=max_memory, held=held,
                     what=f"{source}: the float64 copy of {what} ({shape} {arr.dtype}, besides the array it is made from)")
    return np.array(arr, dtype=np.float64, order="C", copy=True) if copy else np.ascontiguousarray(arr, dtype=np.float64)


def _check_float64_range(parts: list[np.ndarray], source: str) -> None:
    """Refuse a wider float matrix (longdouble) with finite entries past float64's range, given its values
    in ``parts`` (a dense array's ``[arr]``; a sparse matrix's stored values, :func:`_stored_values`): its
    float64 copy made 1e400 an inf ("has NaN/Inf entries", where the caller's entries are all finite) and
    1e-400 a 0 (the zero matrix, fitted without a word).

    Only the finite-entry mask is made (1 byte an entry): ``np.abs(arr[mask])`` made two more copies of
    16 bytes an entry, past what :func:`check_memory` counted for the float64 copy."""
    top = max((_largest_finite(part) for part in parts), default=0.0)
    info = np.finfo(np.float64)
    seen = np.format_float_scientific(top, precision=2, trim="-")  # (a float's :.3g made 1e400 inf, 1e-400 0)
    if top > info.max:
        raise InputError(f"{source}: values too large for float64 (largest |entry| {seen}); divide the matrix "
                         "by a constant (e.g. its largest entry)")
    if 0 < top and float(top) == 0.0:
        # only where the float64 copy is the zero matrix: a subnormal largest entry (1e-310) is refused
        # next by check_magnitude, in the words a float64 matrix of the same values gets
        raise InputError(f"{source}: values too small for float64 (largest |entry| {seen}); multiply the matrix "
                         "by a constant (e.g. 1 / its largest entry)")


def _largest_finite(arr: np.ndarray):
    """The largest finite ``|entry|`` of ``arr`` in its own dtype (0 for none), making only the mask."""
    finite = np.isfinite(arr)
    return max(arr.max(where=finite, initial=0), -arr.min(where=finite, initial=0))


def _is_linear_operator(X) -> bool:
    """Whether ``X`` is a scipy ``LinearOperator`` (scipy.sparse.linalg is not imported here: one exists
    only where the caller imported it)."""
    linalg = sys.modules.get("scipy.sparse.linalg")
    return linalg is not None and isinstance(X, linalg.LinearOperator)


def _check_dense(X, source: str, max_memory: int | None) -> np.ndarray:
    if X is None:  # np.asarray(None) is a 0-d object array: "object dtype" would not say what is missing
        raise InputError(f"{source}: a matrix is needed (an array, a scipy sparse matrix or a MatrixSource), got None")
    if isinstance(X, (str, bytes, os.PathLike)):  # np.asarray("m.npy") is a 0-d string: "dtype <U5" said nothing
        raise InputError(f"{source}: got the file name {os.fspath(X)!r}, not a matrix; read it first "
                         "(sfapprox.load_matrix(path).matrix), or give the path to sfapprox.compare")
    io = sys.modules.get("sfapprox.io")  # not imported here (h5py, Pillow): a LoadedMatrix exists only where it is
    if io is not None and isinstance(X, io.LoadedMatrix):  # np.asarray made it a 0-d object array: "object dtype"
        raise InputError(f"{source}: a LoadedMatrix ({X.name}), not its array; pass its .matrix "
                         "(or give it to sfapprox.compare, which takes it as it is)")
    if _is_linear_operator(X):  # np.asarray made it a 0-d object array: "object dtype" said nothing
        raise InputError(f"{source}: a LinearOperator is read by its products only where a matrix source is "
                         "taken (compare, sweep, the estimators' fit); form it here (X @ numpy.eye(N))")
    refuse_masked(X, source)
    try:
        arr = np.asarray(numpy_readable(X, source=source, max_memory=max_memory, as_float64=True))
    except (ValueError, TypeError) as exc:  # ragged nested lists and the like
        raise InputError(f"{source}: cannot convert input to an array ({exc})".replace("\n", " ")) from None
    if arr.dtype.kind == "O" and arr.ndim == 2:  # a pandas frame of nullable dtypes ("Float64", "Int64") is one
        arr = object_numbers(arr, source, "the matrix", max_memory)
    check_matrix_dtype(arr.dtype, source)
    _check_shape(arr.shape, source)
    if arr.dtype != np.float64 or not arr.flags.c_contiguous:
        n = arr.shape[0]
        # The array is held while its copy is made: both count (a MATLAB file's column-major float64
        # variable peaked at 2.1 arrays against a check of the copy alone).
        check_memory(int(arr.nbytes) + estimate_dense_bytes(n),
                     what=f"{source}: float64 copy of the {n:,} x {n:,} matrix (besides the {arr.dtype} array it is "
                          f"made from)", limit=max_memory)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        _check_float64_range([arr], source)
    with np.errstate(invalid="ignore"):  # a signalling NaN's cast warned before the error that names it
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    # One pass and no temporary: the sum of squares is finite only when every entry is (an N x N mask
    # of np.isfinite is an eighth of an array more, at the peak of a copy); where it is not, the entries
    # are found and counted a block at a time (a whole mask was 900 MB at N = 30,000, past --max-memory)
    squared = _sum_of_squares(arr.ravel())
    if not math.isfinite(squared):
        first = first_nonfinite(arr)
        if first is not None:
            _raise_nonfinite(count_nonfinite(arr), *first, source)
    check_magnitude(arr.ravel(), source, squared)
    return arr


def check_square_matrix(X, *, source: str = "array", allow_sparse: bool = True, max_memory: int | None = None):
    """Validate a square, finite, real matrix and return it as float64.

    Parameters
    ----------
    X : array_like, scipy.sparse matrix/array or torch tensor
        The input matrix (a torch sparse tensor is read as the scipy sparse
        array of its entries: :func:`torch_sparse_as_scipy`; a dense one on a
        GPU is copied to host memory within ``max_memory``: :func:`host_copy`).
    source : str, default="array"
        What the matrix came from (a file path, ``"X"``); every error message
        starts with it.
    allow_sparse : bool, default=True
        If False, sparse input is refused with a hint to densify it.
    max_memory : int or None, default=None
        Memory limit in bytes for every copy made here: a GPU tensor's (or a
        sparse one's entries) in host memory, the float64 / canonical CSR copy
        (None: :func:`default_memory_limit`).

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_array
        Dense input: a C-contiguous float64 ndarray (no copy if ``X`` already is
        one).  Sparse input: a new canonical float64 ``csr_array`` (sorted
        indices, duplicates summed, explicit zeros dropped).

    Raises
    ------
    InputError
        If ``X`` is not 2-D, not square, empty, complex, of object or
        non-numeric dtype, holds NaN/Inf entries, has sparse indices out of
        range, or has values so large or small that ``||X||_F**2`` over- or
        underflows float64 (see :data:`MAX_SQUARED_NORM`).
    ResourceError
        If a copy (a GPU tensor's in host memory, the float64 / CSR copy)
        would exceed ``max_memory``; refused before it is made.

    Examples
    --------
    >>> check_square_matrix([[1, 2], [3, 4]]).dtype
    dtype('float64')
    """
    # a torch sparse tensor is a sparse matrix (numpy refused it); one on a GPU copied within max_memory
    given, X = X, torch_sparse_as_scipy(X, source, max_memory)
    if sp.issparse(X):
        if not allow_sparse:
            raise InputError(
                f"{source}: sparse input is not accepted here; pass a dense array (X.toarray())"
            )
        # a GPU tensor's entries, copied to host memory, are held while the canonical copy is made
        held = held_bytes(X) if X is not given and given.device.type != "cpu" else 0
        return _check_sparse(X, source, max_memory, held)
    return _check_dense(X, source, max_memory)


def check_path(path) -> None:
    """Refuse a ``path`` that is not a file path (``load_matrix(None)`` was a raw TypeError), or is empty.

    Raises
    ------
    ParameterError
        For anything but a ``str`` or an ``os.PathLike`` giving one, and for an empty one.
    """
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise ParameterError(f"path must be a file path (a str or pathlib.Path), got {type(path).__name__}; an array "
                             "in memory goes to the methods directly (or sfapprox.io.as_loaded(X, name))")
    if not os.fspath(path):  # "" is a path to "." for the file system: an unset variable, not a file
        raise ParameterError("path is empty; give a file name")


# ---------------------------------------------------------------------------
# operands of products
# ---------------------------------------------------------------------------


def check_operand(x, n: int, *, owner: str, what: str = "a vector or a matrix", ndim: int = 2) -> None:
    """Refuse an operand of ``X @ x`` that is not ``N`` rows long (and 1-D or 2-D), before any product.

    Shared by the surrogate operators and the matrix sources: numpy's broadcasting and reshaping
    otherwise turned a wrong shape into a result of the wrong shape, or said only "dimension mismatch".

    Parameters
    ----------
    x : array_like
        The operand.
    n : int
        The order ``N`` of the (square) matrix it is applied to.
    owner : str
        What is applied (a class or a matrix name); it starts the message.
    what : str, default="a vector or a matrix"
        What the product takes, for the message.
    ndim : {1, 2}, default=2
        1: only a vector (or an ``(N, 1)`` block); 2: a vector or an ``(N, k)`` block.

    Raises
    ------
    ParameterError
        For an operand of another length than ``N`` or of more than two dimensions.

    Examples
    --------
    >>> check_operand(np.ones((3, 2)), 3, owner="X")
    """
    shape = np.shape(x)
    if not shape or shape[0] != n or len(shape) > 2 or (ndim == 1 and len(shape) == 2 and shape[1] != 1):
        raise ParameterError(f"{owner} is {n:,} x {n:,}: it applies to {what} of {counted(n, 'row')}, "
                             f"got {shape_phrase(shape)}")


def apply_real_parts(apply, B, owner: str = "the matrix"):
    """``apply(B)`` for a real ``B``; for a complex one ``apply(B.real) + 1j * apply(B.imag)``.

    Products are computed in float64: reading a complex operand as float64 dropped its imaginary part
    with only numpy's ComplexWarning, and the matrix is real, so the product is linear in each part.
    An operand that does not hold numbers is refused here, once for every kind: strings and dates were
    read as numbers by some kinds (``'1.0'`` as 1, a date as its days since 1970) and raised numpy's or
    scipy's own TypeError in others, and an object array of numbers came back as an object array.

    Parameters
    ----------
    apply : callable
        The real product, taking and returning arrays.
    B : array_like
        The operand: booleans, integers, reals or complex numbers (an object array of Python numbers
        is read as float64, or complex128 where it holds complex ones).
    owner : str, default="the matrix"
        What is applied (a class or a matrix name), for the message.

    Returns
    -------
    numpy.ndarray
        ``apply(B)``, complex where ``B`` is.

    Raises
    ------
    ParameterError
        For an operand that does not hold numbers.

    Examples
    --------
    >>> apply_real_parts(lambda b: 2 * np.asarray(b, dtype=float), np.array([1 + 1j]))
    array([2.+2.j])
    """
    B = _numeric_operand(B, owner)
    if np.iscomplexobj(B):
        B = np.asarray(B)
        return apply(B.real) + 1j * apply(B.imag)
    return apply(B)


def readable_operand(B):
    """An operand of a product as the products take it: a scipy sparse one as its dense block (the
    product is a dense ``N x k`` block anyway; scipy's LinearOperator refused it with a TypeError), a
    torch tensor as an ndarray of its values (:func:`numpy_readable`: numpy refused one that requires
    grad with a RuntimeError), anything else as it is.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> readable_operand(sp.eye(2, format="csr"))
    array([[1., 0.],
           [0., 1.]])
    """
    if sp.issparse(B):
        return B.toarray()
    refuse_masked(B, "the operand", error=ParameterError)  # its values under the mask were multiplied
    readable = numpy_readable(B)
    return B if readable is B else np.asarray(readable)


def _numeric_operand(B, owner: str):
    """``B`` itself when it holds numbers; an object array of numbers as float64 (complex128)."""
    B = readable_operand(B)
    dtype = getattr(B, "dtype", None)
    if not isinstance(dtype, np.dtype):  # a list, a scalar, a tensor: what numpy makes of it
        B = np.asarray(B)
        dtype = B.dtype
    if dtype.kind in "biufc":
        return B
    read = numbers_array(np.asarray(B))
    if read is not None:
        return read
    if dtype.kind == "O":
        raise ParameterError(f"{owner} applies to numbers; got an object array holding "
                             f"{_first_non_number(np.asarray(B).ravel())}")
    raise ParameterError(f"{owner} applies to numbers (bool, integer, float or complex); got an operand of "
                         f"dtype {dtype}")


def numbers_array(a: np.ndarray) -> np.ndarray | None:
    """``a`` where it holds numbers (bool, integer, float, complex), an object array of Python numbers as
    float64 (complex128 where one is complex); None for anything else (strings, None, dates), never read
    as numbers ('1' as 1, None as NaN).  The products' operands and :func:`~sfapprox.metrics.frobenius_error`'s
    arguments are read by it, each refusing the None in its own words.

    Examples
    --------
    >>> numbers_array(np.array([1, 2.5], dtype=object)).dtype, numbers_array(np.array(["1"])) is None
    (dtype('float64'), True)
    """
    if a.dtype.kind in "biufc":
        return a
    if a.dtype.kind != "O":
        return None
    # by the entries' distinct types: an isinstance test of every entry against the numbers ABCs took
    # 33 s for a 3,000 x 3,000 frame of pandas' nullable dtypes (the set of types: about 1 s)
    types = set(map(type, a.ravel()))
    if not all(issubclass(t, (numbers.Number, np.bool_)) for t in types):
        return None
    complex_ = any(issubclass(t, numbers.Complex) and not issubclass(t, numbers.Real) for t in types)
    try:
        return a.astype(np.complex128 if complex_ else np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a Python int beyond float64 (10**400)
        return None


def object_numbers(arr: np.ndarray, source: str, what: str, max_memory: int | None = None) -> np.ndarray:
    """An object array of numbers as float64 (complex128 where one is complex), as :func:`numbers_array`
    reads the products' operands: what numpy makes of a pandas frame of nullable dtypes (``"Float64"``,
    ``"Int64"``: ``df.convert_dtypes()``'s) or of a list of Decimals.  One holding anything else (None,
    ``pd.NA``, a string) is an :class:`~sfapprox.InputError` naming its first such entry.  The copy is
    checked against ``max_memory`` before it is made.

    Parameters
    ----------
    arr : numpy.ndarray
        An array of object dtype.
    source : str
        What it came from (``"X"``, ``"kernel"``); the error starts with it.
    what : str
        What it is (``"the matrix"``, ``"the points"``), for the error ("an entry of the matrix is None").
    max_memory : int or None, default=None
        Memory limit in bytes for the float64 copy (None: the default limit).

    Returns
    -------
    numpy.ndarray
        The numbers, float64 (complex128 where one is complex: the caller refuses it in its words).

    Examples
    --------
    >>> object_numbers(np.array([[1, 2.5], [3, 4]], dtype=object), "X", "the matrix").dtype
    dtype('float64')
    """
    check_memory(8 * arr.size, what=f"{source}: float64 copy of {what} (an object array)", limit=max_memory)
    read = numbers_array(arr)
    if read is None:
        at, bad = _first_non_number_at(arr)
        advice = "a missing value: fill or drop it first (pandas: df.fillna(0))" \
            if bad.startswith(("None ", "<NA> ", "NaT ")) else "convert it to a numeric array first"
        entry = f"entry {at}" if at else "an entry"
        raise InputError(f"{source}: {entry} of {what} is {bad}, not a number (object dtype); {advice}")
    return read


def _first_non_number_at(arr: np.ndarray) -> tuple[str, str]:
    """Where the first entry of ``arr`` that is no number is (``"[0, 1]"``; ``""`` where none is: a number
    numpy could not convert) and that entry in words (:func:`_first_non_number`'s)."""
    values = arr.ravel()
    index = _non_number_index(values)
    at = "" if index is None else "[" + ", ".join(str(int(i)) for i in np.unravel_index(index, arr.shape)) + "]"
    return at, _entry_in_words(values, index)


def _first_non_number(values) -> str:
    """The first entry of ``values`` (a flat array) that is no number, in words (the message of an object
    operand)."""
    return _entry_in_words(values, _non_number_index(values))


def _non_number_index(values) -> int | None:
    """The index of the first entry of ``values`` that is no number; None where all are."""
    return next((i for i, v in enumerate(values) if not isinstance(v, (numbers.Number, np.bool_))), None)


def _entry_in_words(values, index: int | None) -> str:
    """``values[index]`` in words, with its type; where ``index`` is None, the numbers themselves are the
    trouble (numpy could not convert them)."""
    if index is None:
        return "numbers that cannot be read as float64"
    return f"{values[index]!r:.40} ({type(values[index]).__name__})"
