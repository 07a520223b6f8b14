"""Input validation shared by every entry point.

Data is validated once, at the boundary (``load_matrix``, ``as_loaded``, the
estimators' ``fit``), by :func:`check_square_matrix`; private solvers trust
their arrays afterwards.  Memory refusals go through :func:`check_memory` so
that every "too big" message has one shape and names the ``--max-memory`` knob.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ._errors import InputError, ResourceError

__all__ = [
    "check_square_matrix",
    "estimate_dense_bytes",
    "check_memory",
    "default_memory_limit",
    "format_bytes",
]

#: Fraction of physical RAM that a single matrix may use when no explicit
#: ``max_memory`` is given.  The rest is left for the solvers' work arrays.
MEMORY_FRACTION = 0.8


def format_bytes(n_bytes: float) -> str:
    """Return ``n_bytes`` as a short human-readable string (``"1.5 GiB"``).

    Parameters
    ----------
    n_bytes : float
        A number of bytes.

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
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - loop always returns


def default_memory_limit() -> int | None:
    """Return the default memory limit: 80% of physical RAM, or None if unknown.

    Uses ``os.sysconf`` (installed physical pages times page size) so that no
    third-party package is needed; on platforms without it there is no limit.

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
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page_size <= 0:
        return None
    return int(pages * page_size * MEMORY_FRACTION)


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


def check_memory(n_bytes: int, *, what: str, limit: int | None = None) -> None:
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

    Raises
    ------
    ResourceError
        If ``n_bytes > limit``; the message gives the estimate, the limit and
        the ``--max-memory`` option.

    Examples
    --------
    >>> check_memory(1024, what="tiny", limit=2048)
    """
    if limit is None:
        limit = default_memory_limit()
    if limit is None or n_bytes <= limit:
        return
    raise ResourceError(
        f"{what} needs about {format_bytes(n_bytes)}, over the memory limit of "
        f"{format_bytes(limit)}; raise the limit with --max-memory (max_memory=) "
        "if the machine has the room, or use a smaller input"
    )


# ---------------------------------------------------------------------------
# check_square_matrix
# ---------------------------------------------------------------------------


def _check_dtype(dtype: np.dtype, source: str) -> None:
    """Raise InputError unless ``dtype`` is a real numeric (or boolean) type."""
    if dtype.kind == "c":
        raise InputError(f"{source}: complex matrices are not supported; pass the real part (X.real) or abs(X)")
    if dtype.kind == "O":
        raise InputError(f"{source}: matrix has object dtype; convert it to a numeric array first")
    if dtype.kind not in "biuf":
        raise InputError(f"{source}: matrix has non-numeric dtype {dtype}; convert it to a numeric array first")


def _check_shape(shape: tuple[int, ...], source: str) -> None:
    """Raise InputError unless ``shape`` is a non-empty square 2-D shape."""
    if len(shape) != 2:
        raise InputError(
            f"{source}: matrix must be 2-D, got a {len(shape)}-D array of shape {tuple(shape)}"
        )
    rows, cols = shape
    if rows == 0 or cols == 0:
        raise InputError(f"{source}: matrix is empty ({rows} x {cols})")
    if rows != cols:
        raise InputError(
            f"{source}: matrix is not square ({rows} x {cols}); only square matrices can be "
            "approximated (for a samples x features table use covariance=True / --covariance)"
        )


def _raise_nonfinite(count: int, row: int, col: int, source: str) -> None:
    raise InputError(
        f"{source}: matrix has {count} NaN/Inf entries (first at row {row}, col {col}; 0-based)"
    )


def _check_sparse(X, source: str) -> sp.csr_array:
    _check_dtype(np.dtype(X.dtype), source)
    _check_shape(X.shape, source)
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
    return A


def _check_dense(X, source: str) -> np.ndarray:
    try:
        arr = np.asarray(X)
    except (ValueError, TypeError) as exc:  # ragged nested lists and the like
        raise InputError(f"{source}: cannot convert input to an array ({exc})".replace("\n", " ")) from None
    _check_dtype(arr.dtype, source)
    _check_shape(arr.shape, source)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        rows, cols = np.nonzero(~finite)
        _raise_nonfinite(int(rows.size), int(rows[0]), int(cols[0]), source)
    return arr


def check_square_matrix(X, *, source: str = "array", allow_sparse: bool = True):
    """Validate a square, finite, real matrix and return it as float64.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix/array
        The input matrix.
    source : str, default="array"
        What the matrix came from (a file path, ``"X"``); every error message
        starts with it.
    allow_sparse : bool, default=True
        If False, sparse input is refused with a hint to densify it.

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
        non-numeric dtype, or holds NaN/Inf entries.

    Examples
    --------
    >>> check_square_matrix([[1, 2], [3, 4]]).dtype
    dtype('float64')
    """
    if sp.issparse(X):
        if not allow_sparse:
            raise InputError(
                f"{source}: sparse input is not accepted here; pass a dense array (X.toarray())"
            )
        return _check_sparse(X, source)
    return _check_dense(X, source)
