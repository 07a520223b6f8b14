"""One error definition for every method: Frobenius, absolute and relative.

:func:`frobenius_error` compares ``X`` with a dense approximation;
:func:`operator_error` gives the same numbers for a surrogate operator
without forming it above :data:`DENSE_SCORING_MAX_N` (by column blocks,
``A[:, J] = A @ I[:, J]``, on the free cores), in memory that grows with
``N`` instead of ``N^2``.
"""

from __future__ import annotations

import math
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._errors import InputError, ParameterError
from ._threads import _limit_blas, available_cores, threads_free_now
from ._validation import MatrixArray, canonical_csr, numbers_array, numpy_readable, refuse_masked

__all__ = ["frobenius_error", "operator_error", "operator_error_and_multiple", "sparse_target_error", "surrogate_columns",
           "column_reader", "scoring_bytes", "scoring_block", "DENSE_SCORING_MAX_N", "SCORING_BLOCK", "SCORING_BLOCK_NUMBERS"]

#: Up to this order :func:`operator_error` scores a surrogate on its dense form (the product and
#: the residual, ``2 N^2`` float64: 64 MiB at N = 2,048); above it by column blocks.
DENSE_SCORING_MAX_N = 2048

#: Columns per block when :func:`operator_error` scores by blocks (an SF product takes them 64 at
#: a time, :data:`~sfapprox.operators._chord_apply.CHUNK_COLUMNS`), fewer where ``N`` times that
#: would pass :data:`SCORING_BLOCK_NUMBERS`.
SCORING_BLOCK = 256
#: Numbers of one ``N``-row block at most (32 MiB of float64): 256 columns up to N = 16,384, 64 at 65,536.
SCORING_BLOCK_NUMBERS = 1 << 22

#: ``N``-long float64 vectors one scoring worker holds per column of its block: the identity's
#: columns, the surrogate's (then the residual), the block kernels' two chunk buffers and a
#: sparse ``X``'s block (in ``benchmarks/scoring.py``'s measured peaks).
_VECTORS_PER_COLUMN = 4


def frobenius_error(X: MatrixArray, approx: MatrixArray, fro_norm: float | None = None) -> tuple[float, float | None]:
    """Absolute ``||X - approx||_F`` and relative ``||X - approx||_F / ||X||_F``.

    The difference is taken in float64 (or a wider float type given), so
    integer and bool inputs neither wrap around nor fail; float64 inputs are
    not copied.  No check for NaN or infinite entries is made, and none gives
    a smaller number: a NaN in either makes both errors nan; an infinite entry
    of ``approx`` of a finite ``X`` makes both inf, one of ``X`` makes the
    absolute error inf (or nan) and the relative error nan.

    Parameters
    ----------
    X : ndarray, scipy sparse array, torch tensor or LinearOperator
        The target matrix (any real dtype; a tensor is read detached, an operator formed).
    approx : ndarray, scipy sparse array, fitted surrogate or LinearOperator
        The approximation, same shape (a surrogate or operator with
        ``to_dense()``, or any LinearOperator, is formed).
    fro_norm : float, optional
        ``||X||_F`` when already known (finite, >= 0).

    Returns
    -------
    (float, float or None)
        The relative error is None for the zero matrix (0/0 has no meaning).

    Raises
    ------
    ParameterError
        When ``approx``'s shape is not ``X``'s, or ``fro_norm`` is negative or not finite.
    InputError
        When ``X`` or ``approx`` does not hold numbers (strings, None) or cannot be read as an array.

    Examples
    --------
    >>> import numpy as np
    >>> frobenius_error(np.eye(2), np.zeros((2, 2)))
    (1.4142135623730951, 1.0)
    """
    if fro_norm is not None and not (math.isfinite(fro_norm) and fro_norm >= 0):
        raise ParameterError(f"fro_norm must be ||X||_F, finite and >= 0; got {fro_norm!r}")
    dense = _numeric(_formed(X, "the target X"), "the target X")
    approx = _numeric(_formed(approx, "the approximation"), "the approximation")
    _check_shapes(dense.shape, approx.shape)
    # float64 at least: an int8 or uint8 difference would wrap around (100 - (-100) == -56)
    wide = np.result_type(dense.dtype, approx.dtype, np.float64)
    with np.errstate(over="ignore"):  # a difference past float64 is inf, its relative error scaled below
        err = _fro_norm(np.subtract(dense, approx, dtype=wide))
    # in float64 too: a float32 target's own norm was summed in float32 (relative error 1.0000000075 for 1)
    norm = _fro_norm(dense.astype(wide, copy=False)) if fro_norm is None else float(fro_norm)
    if fro_norm is None and (math.isinf(err) or math.isinf(norm)):
        return err, _scaled_relative(dense, approx, wide, err, norm)
    return err, _relative(err, norm)


def _scaled_relative(dense: np.ndarray, approx: np.ndarray, wide: np.dtype, err: float,
                     norm: float) -> float | None:
    """The relative error of finite entries whose difference or norm is past float64 (entries near 1.7e308:
    ``inf / inf`` was nan where the ratio is 0.5), from both divided by their largest entry first.

    Where an entry is not finite, ``err / norm`` (``err`` and ``norm`` as summed): an infinite entry of the
    approximation of a finite target is an infinite relative error, not the nan its scaling made, nor the
    ``inf / inf`` = nan of a target whose own norm is past float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        top_x = float(np.max(np.abs(dense)))
        top = max(top_x, float(np.max(np.abs(approx))))
    if not math.isfinite(top):  # (a nan entry makes the max nan too)
        return math.inf if math.isfinite(top_x) and math.isinf(err) else _relative(err, norm)
    scaled = dense.astype(wide) / top
    return _relative(_fro_norm(scaled - approx.astype(wide) / top), _fro_norm(scaled))


def _formed(approx, what: str) -> np.ndarray:
    """An approximation (or a target) as a dense array: an ndarray as it is, a sparse matrix, a surrogate,
    a source or an operator formed (a sparse one used to be read as a 0-d object array: "the approximation
    ()"), a torch tensor as numpy reads it (one that requires grad was numpy's RuntimeError); a masked array
    with masked entries refused (its values under the mask were scored as entries)."""
    refuse_masked(approx, what)
    approx = numpy_readable(approx)  # before to_dense: a tensor has one, which keeps it a tensor
    if sp.issparse(approx):
        return approx.toarray()
    if callable(getattr(approx, "to_dense", None)):
        return np.asarray(approx.to_dense())
    if isinstance(approx, LinearOperator):
        return np.asarray(approx.matmat(np.eye(approx.shape[1])))
    try:
        return np.asarray(approx)
    except (TypeError, ValueError) as exc:  # a ragged list
        raise InputError(f"cannot read {type(approx).__name__} as an array ({' '.join(str(exc).split())})") from None


def _numeric(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` when it holds numbers; an object array of numbers as float64 (complex128); else InputError
    (strings and None were numpy's TypeError from the subtraction)."""
    read = numbers_array(a)  # never strings ('1' read as 1) nor None (read as nan)
    if read is not None:
        return read
    bad = next((v for v in a.flat if not isinstance(v, (numbers.Number, np.bool_))), "numbers beyond float64")
    held = f"object entries such as {bad!r:.30}" if a.dtype.kind == "O" else f"dtype {a.dtype}"
    raise InputError(f"{what} must hold numbers, got {held}; convert it to a numeric array first")


#: Below this ``||a||_F`` the squares :func:`_fro_norm` sums may have lost digits as subnormals (or all
#: of them, to 0): its sum of squares is under 1e-290, where squares of entries under 1.5e-154 are no
#: longer normal floats.  Such an ``a`` is scaled by its largest entry first.
_SCALED_BELOW = 1e-145


def _fro_norm(a: np.ndarray) -> float:
    """``||a||_F``, without overflow or underflow where the squares pass float64's range but the norm
    does not (entries of 1e300: the norm 2e300, not inf; of 1e-300: 2e-300, not 0, which said the zero
    matrix and an exact fit)."""
    with np.errstate(over="ignore", under="ignore"):  # handled here, not warned about
        value = float(np.linalg.norm(a))
    # (a finite norm below the scaling threshold has finite entries: the pass over them is for inf alone)
    if a.size and (value < _SCALED_BELOW or math.isinf(value) and np.isfinite(a).all()):
        top = float(np.abs(a).max())
        if top > 0:
            with np.errstate(under="ignore"):
                value = top * float(np.linalg.norm(a / top))
    return value


def _check_shapes(target: tuple[int, ...], approx: tuple[int, ...]) -> None:
    """Raise :class:`ParameterError` unless the approximation has the target's shape."""
    if tuple(target) != tuple(approx):
        raise ParameterError(f"shapes differ: the target X is {tuple(target)}, the approximation {tuple(approx)}; "
                             "compare a surrogate with the matrix it was fitted to")


def _relative(err: float, norm: float) -> float | None:
    """``err / norm``; None for the zero matrix only (a nan norm gives nan, not None: X held a nan)."""
    return None if norm == 0 else err / norm


def surrogate_columns(operator, J: np.ndarray, n: int) -> np.ndarray:
    """``A[:, J]`` as a dense float64 block: the operator applied to the identity's columns ``J``.

    Parameters
    ----------
    operator : LinearOperator
        The surrogate ``A`` (``operator @ B`` must work for a dense block).
    J : numpy.ndarray of int
        Column indices.
    n : int
        Order of ``A``.

    Examples
    --------
    >>> surrogate_columns(np.arange(9.0).reshape(3, 3), np.array([2]), 3).ravel().tolist()
    [2.0, 5.0, 8.0]
    """
    return column_reader(operator, n)(J)


def _identity_columns(operator, J: np.ndarray, n: int) -> np.ndarray:
    """The operator applied to the identity's columns ``J``, as a dense float64 block."""
    E = np.zeros((n, J.size))
    E[J, np.arange(J.size)] = 1.0
    return np.asarray(operator @ E, dtype=np.float64)


def operator_error(X, operator, fro_norm: float | None = None, *,
                   threads: int | None = None) -> tuple[float, float | None]:
    """:func:`frobenius_error` of a surrogate operator, without forming it above :data:`DENSE_SCORING_MAX_N`.

    The same definition and, up to the order of the sums, the same numbers:
    ``||X - A||_F^2`` is the sum over column blocks of ``||X[:, J] - A[:, J]||^2``,
    each ``A[:, J]`` the operator applied to the identity's columns.  Memory
    is :func:`scoring_bytes` instead of the ``N x N`` product and residual
    (2 x 2 GiB at N = 16,384), and the blocks run on the cores that are free
    (the blocks' sums are added in block order, so how many ran changes
    at most the rounding inside a block's BLAS sums).

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (N, N)
        The target matrix.
    operator : LinearOperator
        The surrogate, with ``to_dense()`` (used up to ``DENSE_SCORING_MAX_N``)
        and products with dense blocks.
    fro_norm : float, optional
        ``||X||_F`` when already known.
    threads : int, optional
        Workers for the blocks; None: one per free core (:func:`~sfapprox._threads.threads_free_now`).

    Returns
    -------
    (float, float or None)
        ``||X - A||_F`` and its ratio to ``||X||_F`` (None for the zero matrix).

    Raises
    ------
    ParameterError
        When the operator's shape is not ``X``'s.

    Examples
    --------
    >>> from sfapprox.operators import ChordOperator
    >>> op = ChordOperator(np.full((2, 4, 3), 0.5))
    >>> operator_error(op.to_dense(), op)
    (0.0, 0.0)
    """
    n = X.shape[0]
    _check_shapes(X.shape, operator.shape)
    if n <= DENSE_SCORING_MAX_N:
        return frobenius_error(X, operator.to_dense(), fro_norm)
    if sp.issparse(X) and getattr(operator, "kind", None) == "csr":  # both sparse: the difference's entries
        return _sparse_error(X, operator.matrix, fro_norm)
    exact = sparse_target_error(X, operator, fro_norm) if sp.issparse(X) else None
    if exact is not None:  # low rank (+ sparse) of a sparse X: from X's non-zeros
        return exact
    sums = _column_sums(X, operator, norm=fro_norm is None, threads=threads)
    err = math.sqrt(sums[0])
    norm = math.sqrt(sums[1]) if fro_norm is None else float(fro_norm)
    return err, _relative(err, norm)


def operator_error_and_multiple(X, operator, fro_norm: float | None = None, *,
                                threads: int | None = None) -> tuple[float, float | None, float, float]:
    """:func:`operator_error`'s two errors and, from the same pass over ``X``, ``<X, A>`` and ``||A||^2``.

    They give the surrogate's best multiple ``c = <X, A> / ||A||^2`` and its error
    ``sqrt(||X||^2 - <X, A>^2 / ||A||^2)`` without a second pass (an SF fit stopped near its start, further
    from ``X`` than the zero matrix, is handed back at that multiple: a second and third pass took 4.4-4.7 s
    after a 10-s fit at N = 8,192).  The two sums cost two dot products per block of the pass that reads
    ``X`` and ``A`` anyway.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (N, N)
        The target matrix.
    operator : LinearOperator
        The surrogate, as for :func:`operator_error`.
    fro_norm : float, optional
        ``||X||_F`` when already known.
    threads : int, optional
        Workers for the blocks; None: one per free core.

    Returns
    -------
    (float, float or None, float, float)
        ``||X - A||_F``, its ratio to ``||X||_F`` (None for the zero matrix), ``<X, A>`` and ``||A||_F^2``.

    Examples
    --------
    >>> from sfapprox.operators import ChordOperator
    >>> op = ChordOperator(np.full((2, 4, 3), 0.5))
    >>> err, rel, inner, square = operator_error_and_multiple(2.0 * op.to_dense(), op)
    >>> rel, inner / square  # X = 2 A: its best multiple is 2
    (0.5, 2.0)
    """
    n = X.shape[0]
    _check_shapes(X.shape, operator.shape)
    if n <= DENSE_SCORING_MAX_N:
        product = np.asarray(operator.to_dense(), dtype=np.float64)
        err, rel = frobenius_error(X, product, fro_norm)
        target = _formed(X, "the target X")
        inner = float(np.einsum("ij,ij->", target, product, dtype=np.float64))
        return err, rel, inner, float(np.vdot(product, product))
    sums = _column_sums(X, operator, norm=fro_norm is None, threads=threads, multiple=True)
    err = math.sqrt(sums[0])
    norm = math.sqrt(sums[1]) if fro_norm is None else float(fro_norm)
    return err, _relative(err, norm), sums[2], sums[3]


def _column_sums(X, operator, *, norm: bool, threads: int | None, multiple: bool = False) -> list[float]:
    """One pass over the column blocks of ``X`` and of the surrogate ``A``: ``||X - A||^2``, ``||X||^2``
    (0 unless ``norm``) and, with ``multiple``, ``<X, A>`` and ``||A||^2`` (0 without), each summed over the
    blocks in block order."""
    n = X.shape[0]
    columns = X.tocsc() if sp.issparse(X) else np.asarray(X)  # a sparse X's column blocks: slices of CSC
    width = scoring_block(n)
    column_block = column_reader(operator, n)

    def block(j0: int) -> tuple[float, float, float, float]:
        J = np.arange(j0, min(n, j0 + width))
        x = columns[:, j0 : j0 + J.size]
        x = x.toarray() if sp.issparse(x) else x
        r = column_block(J)
        # (before r becomes the residual: the surrogate's own block)
        inner, square = (float(np.einsum("ij,ij->", x, r, dtype=np.float64)), float(np.vdot(r, r))) if multiple \
            else (0.0, 0.0)
        r -= x
        # einsum reads X's strided view in place (vdot would copy it); it sums in float64, which an
        # integer X's own dtype would wrap around in
        return (float(np.vdot(r, r)), float(np.einsum("ij,ij->", x, x, dtype=np.float64)) if norm else 0.0,
                inner, square)

    starts = range(0, n, width)
    workers = threads or threads_free_now(float(n) * width, available_cores())
    # Each worker's products on one BLAS thread: the workers are the parallelism. One worker too, as it
    # is one where no second core is free: on the default pool beside a busy process each product waited
    # for a descheduled thread (monarch+lr at N = 4,096 on 2 shared cores: 9-20 s, outside its time limit).
    limiter = _limit_blas(1)
    try:
        if workers > 1:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sfapprox-score")
            try:
                parts = list(pool.map(block, starts))
            finally:
                # A Ctrl-C (or SIGTERM) waits for the blocks being computed, not for all the others.
                pool.shutdown(wait=True, cancel_futures=True)
        else:
            parts = [block(j0) for j0 in starts]
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    return [math.fsum(p[i] for p in parts) for i in range(4)]


def column_reader(operator, n: int):
    """``J -> A[:, J]`` (dense float64) for the surrogate ``A`` (``operator``): :func:`surrogate_columns`'s
    numbers, read where the surrogate has a sparse or low-rank part without its products with the
    identity's columns.  ``S @ E`` cost ``nnz(S)`` per column of a block, so ``O(nnz(S) N)`` over all
    blocks (23 s for top-s at 5 % of N = 8,192); a column slice of ``S``'s CSC (made once per reader,
    ``nnz(S)`` entries) is ``O(nnz(S) + N^2)`` in all.  Likewise ``Vt[:, J]`` instead of ``Vt @ E``.
    Each column of ``S @ E`` or ``Vt @ E`` is one entry times 1 plus zeros: the slice's values exactly.

    Examples
    --------
    >>> column_reader(np.arange(9.0).reshape(3, 3), 3)(np.array([2, 0])).tolist()
    [[2.0, 0.0], [5.0, 3.0], [8.0, 6.0]]
    """
    kind = getattr(operator, "kind", None)
    if kind == "csr":
        csc = operator.matrix.tocsc()
        return lambda J: csc[:, J].toarray()
    if kind != "hybrid":
        return lambda J: _identity_columns(operator, J, n)
    csc = operator.sparse.tocsc() if operator.sparse.nnz else None

    def columns(J: np.ndarray) -> np.ndarray:
        if operator.chord is not None:
            E = np.zeros((n, J.size))
            E[J, np.arange(J.size)] = 1.0
            out = np.asarray(operator.chord._stack.apply(E, False), dtype=np.float64)
        else:
            out = np.zeros((n, J.size))
        if operator.rank:
            out += operator.U @ (operator.s[:, None] * operator.Vt[:, J])
        if csc is not None:
            out += csc[:, J].toarray()
        return out

    return columns


def _sparse_error(X, S, fro_norm: float | None) -> tuple[float, float | None]:
    """:func:`operator_error` of a sparse surrogate ``S`` (CSR) of a sparse ``X``: the entries of ``X - S``,
    in ``O(nnz)`` time and memory instead of a pass over ``N^2`` entries (9 s at N = 20,000)."""
    X = canonical_csr(X)  # repeated entries add up (on a copy: X is the caller's)
    err = _fro_norm((X - S).data)
    return err, _relative(err, _fro_norm(X.data) if fro_norm is None else float(fro_norm))


#: The smallest share of its largest term (``||X - S||^2`` or ``||L R||^2``) an error from
#: :func:`sparse_target_error` is taken at: its terms carry 1e-16 of it in round-off, so a smaller
#: difference is left to a pass.
SPARSE_TARGET_MIN_SHARE = 1e-10
#: Numbers :func:`sparse_target_error` takes at a time: entries of ``X`` and ``S`` together in one block of
#: rows whose difference or products are taken, and the block's rows times the rank (its ``x @ R^T``).
_GATHER_NUMBERS = 1 << 20


def sparse_target_error(X, operator, fro_norm: float | None = None) -> tuple[float, float | None] | None:
    """:func:`operator_error` of a low-rank-plus-sparse surrogate (``A = L R + S``,
    :meth:`~sfapprox.operators.SurrogateOperator.factored_parts`) of a sparse ``X``, from ``X``'s non-zeros:
    ``||X - A||^2 = ||X - S||^2 - 2 <X - S, L R> + ||L R||^2``, each term in ``O((nnz(X) + nnz(S)) r + N r^2)``
    (``X - S`` entry by entry, ``||L R||^2 = sum((L^T L) * (R R^T))``), exact where a pass over the ``N^2``
    entries took minutes at N = 60,000.

    Parameters
    ----------
    X : scipy sparse matrix, shape (N, N)
        The target.
    operator : SurrogateOperator
        The surrogate.
    fro_norm : float, optional
        ``||X||_F`` when already known.

    Returns
    -------
    (float, float or None) or None
        ``||X - A||_F`` and its ratio to ``||X||_F``; None where the surrogate has no such form, or where the
        error is within the round-off of those terms (below :data:`SPARSE_TARGET_MIN_SHARE` of the largest:
        scored by a pass instead).

    Examples
    --------
    >>> from sfapprox.operators import HybridOperator
    >>> X = sp.csr_array(np.diag([3.0, 0.0, 4.0]))
    >>> op = HybridOperator(3, low_rank=(np.array([[1.0], [0.0], [0.0]]), np.array([3.0]), np.array([[1.0, 0, 0]])))
    >>> sparse_target_error(X, op)
    (4.0, 0.8)
    """
    parts = getattr(operator, "factored_parts", lambda: None)()
    if parts is None:
        return None
    return _parts_error(_compressed(X), *parts, fro_norm)


def _parts_error(X, L: np.ndarray, R: np.ndarray, S, fro_norm: float | None) -> tuple[float, float | None] | None:
    """:func:`sparse_target_error` of a compressed ``X`` and the parts ``L R + S`` (``S`` None, or a sparse
    part; ``L`` and ``R`` of rank 0 for a sparse part alone, top-s's and RPCA's rank-0 end).

    ``X - S`` is taken entry by entry, a block of rows (or columns) at a time by scipy's one merge of the two
    blocks' entries, both held compressed alike: a COO copy of ``S`` sorted by position, a search for every
    entry of ``X`` and a gather of ``X`` at ``S``'s positions took 14.8 s at N = 1,000,000 with 10 million
    entries (12.9 s of it sorting ``S`` again, though canonical already); and ``||X||^2 - 2 <X, S> + ||S||^2``
    as a difference of sums left an ``S`` holding every non-zero of ``X`` to round-off, then to a pass over
    the ``N^2`` entries, sampled ("0 +- ?") at N = 60,025."""
    L, R = np.asarray(L, dtype=np.float64), np.asarray(R, dtype=np.float64)  # (float32 ones: sums in float64)
    outer, inner = _low_rank_sides(L, R, X.format)
    norms = float(np.sum((L.T @ L) * (R @ R.T)))
    S = _compressed_like(S, X) if S is not None and S.nnz else None  # (as big as the budget: the surrogate's own)
    squared = residual = cross = 0.0
    for start, stop, x, s in _block_pairs(X, S, rank=L.shape[1]):
        v = np.asarray(x.data, dtype=np.float64)
        squared += float(np.dot(v, v))
        d = x if s is None else x - s  # X - S entry by entry: no difference of sums about ||X||^2 to cancel
        w = v if s is None else d.data
        residual += float(np.dot(w, w))
        cross += _low_rank_block_dot(outer[start:stop], inner, d)
    total = residual - 2 * cross + norms  # ||(X - S) - L R||^2
    if total < SPARSE_TARGET_MIN_SHARE * max(residual, norms):
        return None
    err = math.sqrt(total)
    return err, _relative(err, math.sqrt(squared) if fro_norm is None else float(fro_norm))


def _compressed_like(S, X):
    """``S`` as a canonical float64 array of ``X``'s compressed format (CSR or CSC), without a copy where it
    is one already.  Integer values become float64 before repeated positions add up (scipy sums them in
    their own dtype, where int64 wraps around)."""
    if X.format == "csr":
        return canonical_csr(S)
    if getattr(S, "format", None) == "csc":  # (a transposed surrogate's part): its arrays are its transpose's CSR
        return canonical_csr(S.T).T
    S = canonical_csr(S).tocsc()
    S.has_canonical_format = True  # (sorted, one entry per position: what a canonical CSR gives)
    return S


def _block_pairs(X, S=None, rank: int = 0):
    """``(start, stop, x, s)``: successive blocks of rows ``start:stop`` of a CSR ``X`` and ``S`` (of columns for
    CSC), each as a CSR array over slices of their arrays (scipy copies a block's, never the whole), together at
    most about :data:`_GATHER_NUMBERS` entries, and rows (times ``rank``: a block's ``x @ R^T`` is ``rows x rank``);
    a block is one row at least.  ``s`` is None where ``S`` is.  A CSC pair's blocks are their columns'
    transposes, which leaves the entries' products and differences, and so every sum over them, the same."""
    total = X.indptr.astype(np.int64) + (0 if S is None else S.indptr)  # entries of both up to each row
    major, minor = X.indptr.size - 1, X.shape[1] if X.format == "csr" else X.shape[0]
    most_rows = max(1, _GATHER_NUMBERS // max(rank, 1))
    start = 0
    while start < major:
        stop = int(np.searchsorted(total, total[start] + _GATHER_NUMBERS, side="right")) - 1
        stop = min(major, start + most_rows, max(stop, start + 1))
        yield start, stop, _rows(X, start, stop, minor), None if S is None else _rows(S, start, stop, minor)
        start = stop


def _rows(A, start: int, stop: int, minor: int):
    """Rows (or columns, for a CSC ``A``) ``start:stop`` of ``A`` as a CSR array over slices of its arrays."""
    ptr = A.indptr[start:stop + 1]
    lo, hi = int(ptr[0]), int(ptr[-1])
    block = sp.csr_array((A.data[lo:hi], A.indices[lo:hi], ptr - lo), shape=(stop - start, minor))
    block.has_canonical_format = True  # (A's are: canonical in sparse_target_error)
    return block


def _compressed(X):
    """``X`` as a canonical CSR or CSC array, without a copy where it is one already (a loaded matrix's CSR,
    a SparseSource's CSC): the whole matrix copied was as big again as X (9.5 million non-zeros: 411 MB)."""
    if getattr(X, "format", None) not in ("csr", "csc"):
        X = sp.csr_array(X)
    elif not isinstance(X, sp.sparray):  # a csr_matrix / csc_matrix: its arrays, in the array kind
        X = sp.csr_array(X) if X.format == "csr" else sp.csc_array(X)
    if not X.has_canonical_format:  # repeated entries add up (on a copy: X is the caller's)
        X = X.copy()
        X.sum_duplicates()
    return X


def _low_rank_sides(L: np.ndarray, R: np.ndarray, compressed: str) -> tuple[np.ndarray, np.ndarray]:
    """``(outer, inner)``: the factors of ``L R`` taken by a block's rows and by its entries' columns,
    ``(L, R^T)`` for a CSR target, ``(R^T, L)`` for a CSC one (whose blocks are its columns, transposed).
    ``inner`` is made C-contiguous once here: scipy's ``x @ inner`` flattens it, a copy per block where it is
    not."""
    outer, inner = (L, R.T) if compressed == "csr" else (R.T, L)
    return outer, np.ascontiguousarray(inner)


def _low_rank_block_dot(outer: np.ndarray, inner: np.ndarray, block) -> float:
    """``<block, outer inner^T>`` for a block (CSR) of rows of a matrix: each row's entries times ``inner``'s
    rows at their columns, summed in the row (scipy's sparse times dense, in C++), then dotted with the row's
    ``outer``.  Gathering both factors at every entry instead (two ``nnz x r`` copies, a ``(R^T)`` made
    contiguous per chunk) took 1.8 of 2.1 s at N = 1,000,000, 19 million entries, rank 2."""
    if inner.shape[1] == 0 or block.nnz == 0:
        return 0.0
    return float(np.einsum("kr,kr->", outer, block @ inner))


def scoring_block(n: int) -> int:
    """Columns per block of :func:`operator_error` at order ``n``.

    Examples
    --------
    >>> scoring_block(4096), scoring_block(65536)
    (256, 64)
    """
    return max(1, min(SCORING_BLOCK, SCORING_BLOCK_NUMBERS // max(n, 1)))


def scoring_bytes(n: int, workers: int | None = None) -> int:
    """Peak bytes :func:`operator_error` adds to score an ``N x N`` surrogate (besides ``X``, and a
    sparse ``X``'s CSC copy).

    Parameters
    ----------
    n : int
        Order of the matrix.
    workers : int, optional
        Scoring workers; None: the cores this process may use (the most it starts).

    Returns
    -------
    int
        ``2 N^2`` float64 up to :data:`DENSE_SCORING_MAX_N`; above it
        ``workers * 4 * N * scoring_block(N)`` float64.

    Examples
    --------
    >>> scoring_bytes(1000), scoring_bytes(16384, workers=2) // 2**20, scoring_bytes(65536, workers=2) // 2**20
    (16000000, 256, 256)
    """
    if n <= DENSE_SCORING_MAX_N:
        return 2 * n * n * 8
    if workers is None:
        workers = available_cores()
    width = min(n, scoring_block(n))
    return min(workers, -(-n // width)) * _VECTORS_PER_COLUMN * n * width * 8
