"""Monarch matrices: two block-diagonal factors and a permutation, fitted in closed form.

**The class** (Dao, Chen, Sohoni, Desai, Poli, Grogan, Liu, Rao, Rudra & Ré,
"Monarch: Expressive Structured Matrices for Efficient and Accurate
Training", ICML 2022): ``M = P L P^T R`` where, for ``N = b1·b2``,

* ``R`` is block diagonal with ``b1`` blocks ``R_k`` of size ``b2 x b2``:
  it mixes the entries of the input viewed as a ``b1 x b2`` array ``x[k, l]``
  along ``l``;
* ``P^T`` transposes that array (the "reshape, transpose, flatten"
  permutation of the paper);
* ``L`` is block diagonal with ``b2`` blocks ``L_q`` of size ``b1 x b1``,
  mixing along ``k``; ``P`` transposes back.

The paper's Monarch takes ``b1 = b2 = sqrt(N)``: ``2 N sqrt(N)`` numbers.
Written entry by entry, with row ``i = a·b2 + q`` and column ``j = k·b2 + l``,

    ``M[(a, q), (k, l)] = L_q[a, k] · R_k[q, l]``,

so for each pair ``(q, k)`` the ``b1 x b2`` slab ``S_qk[a, l] = M[(a, q), (k, l)]``
is the outer product of column ``k`` of ``L_q`` and row ``q`` of ``R_k`` —
numbers that appear in no other slab.  The ``N`` slabs partition the matrix,
so ``M`` is Monarch exactly when every slab has rank at most one, and the
nearest Monarch matrix to ``X`` in the Frobenius norm is obtained slab by
slab: reshape ``X`` to the 4-way array ``X[a, q, k, l]``, take the best
rank-1 approximation (leading singular triplet) of each slab ``X[:, q, k, :]``
and read ``L`` and ``R`` off the singular vectors.  This is the paper's
closed-form projection ("approximating a dense weight matrix with a Monarch
matrix, though nonconvex, has an analytical optimal solution": block-wise
rank-1 SVDs after a reshape of ``X`` to a 4-way array).

**Block rank r** (our generalisation, to use larger budgets): keep the best
rank-``r`` approximation of every slab, i.e. ``M = Σ_{t<r} P L^(t) P^T R^(t)``
(equivalently, ``L`` and ``R`` block diagonal with rectangular ``b1 x r·b1``
and ``r·b2 x b2`` blocks).  By Eckart–Young slab by slab, this is again the
exact projection onto its class.  ``r = min(b1, b2)`` reproduces ``X``.

**Any N.** ``X`` is padded with zero rows and columns to ``N' = b1·b2 >= N``
(the smallest ``b2`` for each ``b1``) and the surrogate is the leading
``N x N`` block of the padded Monarch matrix; ``params_["padded_n"]`` and
``params_["note"]`` say when that happened.  The projection is then exact for
the padded matrix, not for the crop (the padding's zeros are fitted too).

**Stored numbers** (:func:`monarch_count`): ``r · N' · (b1 + b2)``: the
blocks of ``L`` (``r · b2 · b1^2``) and of ``R`` (``r · b1 · b2^2``).
**Budget rule**: the candidate shapes ``(b1, b2)`` (:func:`monarch_shapes`)
each take the largest block rank that fits (:func:`monarch_rank_for_budget`,
at most ``min(b1, b2)``); up to ``max_shapes`` of them, the most nearly
square first, are projected, and the smallest Frobenius error (of the
``N x N`` crop) wins.  Each projection costs ``O(N'^2 min(b1, b2))``;
``time_limit`` bounds the whole grid (the first shape always runs), and a
Ctrl-C keeps the best shape projected so far (``stop_reason_ ==
"interrupted"``) or, before the first one ends, propagates.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, get_method, register
from .._errors import BudgetError, ConvergenceWarning, ParameterError, user_stacklevel
from .._params import MEMORY_LIMIT, Interval
from .._progress import Reporter
from .._settings import DEFAULT_TIME_LIMIT
from .._threads import _limit_blas
from .._validation import LIBRARY_WORKING_SET, check_memory
from ..formats import counted
from ..budget import below_smallest, monarch_count, monarch_min_budget, monarch_rank_for_budget, monarch_shapes
from ..operators.monarch import MonarchOperator, from_slabs, monarch_slabs, slabs
from ..sources import MatrixLike, MatrixSource
from .tsvd import EXACT_TOL, preferred, reproduces  # noqa: F401 - EXACT_TOL: this module's own name for it before

__all__ = [
    "Monarch",
    "MonarchOperator",
    "MonarchShape",
    "monarch_count",
    "monarch_shapes",
    "monarch_rank_for_budget",
    "monarch_min_budget",
    "monarch_configs_for_budget",
    "monarch_project",
    "monarch_project_within",
    "monarch_project_columns",
    "monarch_project_sparse",
    "MAX_SHAPES",
    "projection_seconds",
]

#: Shapes ``(b1, b2)`` projected at most when the budget admits several.
MAX_SHAPES = 12


# --------------------------------------------------------------------------- accounting
@dataclass(frozen=True)
class MonarchShape:
    """One candidate structure: blocks ``b1 x b1`` (L) and ``b2 x b2`` (R), block rank, its count.

    Attributes
    ----------
    left_block : int
        ``b1``, the size of ``L``'s blocks.
    right_block : int
        ``b2``, the size of ``R``'s blocks.
    rank : int
        The block rank ``r``.
    count : int
        Stored numbers, ``r N' (b1 + b2)``.
    padded_n : int
        ``N' = b1 b2`` (property).
    """

    left_block: int
    right_block: int
    rank: int
    count: int

    @property
    def padded_n(self) -> int:
        """``N' = b1 b2``, the padded order."""
        return self.left_block * self.right_block

    def padding_note(self, n: int) -> str | None:
        """What padding an ``n x n`` matrix to this shape did, for ``params_["note"]`` (None: none).

        Parameters
        ----------
        n : int
            Order of the matrix.
        """
        if self.padded_n <= n:
            return None
        added = counted(self.padded_n - n, "zero row and column", "zero rows and columns")
        return (f"N = {n:,} padded with {added} to "
                f"{self.left_block}·{self.right_block} = {self.padded_n}")


def monarch_configs_for_budget(n: int, budget: int, max_shapes: int = MAX_SHAPES) -> list[MonarchShape]:
    """The shapes the grid projects at ``budget``: each at its largest rank, most nearly square first.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    budget : int
        Stored numbers allowed.
    max_shapes : int, default=MAX_SHAPES
        Most shapes returned.

    Returns
    -------
    list of MonarchShape
        Empty when no shape fits.

    Examples
    --------
    >>> [(c.left_block, c.right_block, c.rank) for c in monarch_configs_for_budget(64, 2100, 3)]
    [(8, 8, 2), (8, 9, 1), (9, 8, 1)]
    """
    out = []
    for b1, b2 in monarch_shapes(n):
        r = monarch_rank_for_budget(n, b1, b2, budget)
        if r >= 1:
            out.append(MonarchShape(b1, b2, r, monarch_count(n, b1, b2, r)))
        if len(out) >= max_shapes:
            break
    return out


def projection_seconds(shape: MonarchShape, measured: MonarchShape, seconds: float) -> float:
    """Expected seconds of projecting onto ``shape``, from ``seconds`` measured for ``measured``.

    The projection is ``N'`` SVDs of ``b1 x b2`` slabs, ``O(N'^2 min(b1, b2))``,
    and the product and error of the result, ``O(N'^2 r)``: the measured time
    scales with ``N'^2 (min(b1, b2) + r)``.

    Parameters
    ----------
    shape : MonarchShape
        The shape to project onto.
    measured : MonarchShape
        The shape whose projection was timed.
    seconds : float
        Its measured time.

    Examples
    --------
    >>> a, b = MonarchShape(50, 60, 1, 0), MonarchShape(40, 75, 1, 0)
    >>> round(projection_seconds(b, a, 2.0), 2)
    1.61
    """
    def work(s: MonarchShape) -> float:
        return float(s.padded_n) ** 2 * (min(s.left_block, s.right_block) + s.rank)

    return seconds * work(shape) / work(measured)


# --------------------------------------------------------------------------- the projection
def shape_stage(shape: MonarchShape) -> str:
    """What a progress display says while ``shape`` is projected (its rank where above one).

    Examples
    --------
    >>> shape_stage(MonarchShape(45, 45, 1, 0)), shape_stage(MonarchShape(32, 64, 2, 0))
    ('shape 45 x 45', 'shape 32 x 64, rank 2')
    """
    rank = f", rank {shape.rank}" if shape.rank > 1 else ""
    return f"shape {shape.left_block} x {shape.right_block}{rank}"


def monarch_project(X, left_block: int, right_block: int, rank: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The nearest block-rank-``r`` Monarch matrix to ``X`` (zero-padded to ``b1 b2``), as its blocks.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (n, n)
        The matrix, ``n <= b1 b2``.
    left_block, right_block : int
        ``b1`` and ``b2``.
    rank : int, default=1
        Block rank ``r`` (at most ``min(b1, b2)``).

    Returns
    -------
    left : ndarray of shape (b2, b1, b1, r)
        ``left[q, a, k, t]``: entry ``(a, k)`` of block ``q`` of ``L^(t)``.
    right : ndarray of shape (b1, r, b2, b2)
        ``right[k, t, q, l]``: entry ``(q, l)`` of block ``k`` of ``R^(t)``.

    The singular values are split evenly (``sqrt(sigma)`` into each side),
    which keeps both factors' scales alike.

    Examples
    --------
    >>> X = np.kron(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, -1.0], [0.5, 2.0]]))
    >>> left, right = monarch_project(X, 2, 2)
    >>> bool(np.allclose(MonarchOperator(left, right, 4).to_dense(), X))  # a Kronecker product is Monarch
    True
    """
    return monarch_project_within(X, left_block, right_block, rank)[:2]


def monarch_project_within(X, left_block: int, right_block: int, rank: int = 1,
                           deadline: _timing.Deadline | None = None
                           ) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """:func:`monarch_project`, its slab SVDs taken ``b1`` at a time (row offset ``q`` by row offset ``q``),
    each group only when it still ends by ``deadline`` at the measured cost of the last one (the first
    always runs); the groups not taken keep zero blocks.

    One projection is the first step of every Monarch fit and was one LAPACK call: at N = 8,192 on 2
    shared cores it alone took longer than a 10 s limit.  Without a deadline the result is the same
    (the same SVD of each slab).

    Returns
    -------
    left, right : numpy.ndarray
        As :func:`monarch_project` returns them.
    error : float
        ``||X - M||_F`` from the slabs' dropped singular values and the rows not reached (equal to
        the dense error to round-off), for a fit under a limit: forming ``M`` and subtracting it ran
        past the limit again (0.4-1.5 s at N = 4,096).
    whole : bool
        Whether every group was taken.
    """
    b1, b2 = int(left_block), int(right_block)
    r = int(rank)
    dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    n = dense.shape[0]
    left = np.zeros((b2, b1, b1, r))
    right = np.zeros((b1, r, b2, b2))
    step = 0.0  # seconds of the last group of slab SVDs: what the next one is expected to cost
    dropped = 0.0  # squared singular values the groups so far left out
    with _one_blas_thread():
        for q in range(b2):
            if q and deadline is not None and not deadline.fits(step):
                rest = sum(float(np.square(dense[p::b2]).sum()) for p in range(q, min(b2, n)))
                return left, right, math.sqrt(dropped + rest), False
            began = _timing.now()
            # The slabs S[q, k, a, l] = X'[a b2 + q, k b2 + l] (k < b1) from rows q, q + b2, ... of X
            # padded: the whole padded copy (:func:`slabs`) came before the first group, not counted
            # (0.6 s at N = 4,096).
            rows = np.zeros((b1, b1 * b2))
            part = dense[q::b2]
            rows[: part.shape[0], :n] = part
            lefts, rights, s = _slab_triplets(rows.reshape(b1, b1, b2).transpose(1, 0, 2), r)
            left[q] = lefts.transpose(1, 0, 2)
            right[:, :, q] = rights
            dropped += float(np.square(s[:, r:]).sum())
            step = _timing.now() - began
    return left, right, math.sqrt(dropped), True


def _slab_triplets(stack: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The leading ``rank`` singular triplets of each ``b1 x b2`` slab of ``stack`` (``m x b1 x b2``), with
    ``sqrt(sigma)`` into each side (:func:`monarch_project`'s split): the left parts (``m x b1 x r``), the
    right parts (``m x r x b2``) and every singular value (``m x min(b1, b2)``), for the dropped ones' error.

    :func:`monarch_project_within` stacks the slabs of one row offset ``q``, :func:`monarch_project_columns`
    those of one column block ``k``, :func:`monarch_project_sparse` one slab's non-zero rows and columns:
    each writes the parts into its own axes of ``left`` and ``right``.
    """
    U, s, Vt = np.linalg.svd(stack, full_matrices=False)
    root = np.sqrt(s[:, :rank])
    return U[..., :rank] * root[:, None, :], Vt[:, :rank, :] * root[:, :, None], s


def monarch_project_columns(source: MatrixSource, left_block: int, right_block: int, rank: int = 1):
    """:func:`monarch_project` of a :class:`~sfapprox.sources.MatrixSource`, in one pass over its columns.

    The slabs ``S[q, k]`` of column block ``k`` (columns ``k b2 .. k b2 + b2 - 1``)
    all come from that block, so each block is read once, its ``b2`` slab SVDs
    taken and dropped: ``O(N b2)`` memory besides the factors.  Also returns
    the projection's error ``||X - M||_F`` (the singular values the slabs drop:
    exact, and the cropped ``n x n`` error too, since ``M`` vanishes on the
    padding, whose rows and columns of ``X'`` are zero) and ``||X||_F``.

    Parameters
    ----------
    source : MatrixSource
        The matrix, ``N <= b1 b2``.
    left_block, right_block : int
        ``b1`` and ``b2``.
    rank : int, default=1
        Block rank ``r``.

    Returns
    -------
    left, right : numpy.ndarray
        As :func:`monarch_project` returns them.
    error : float
        ``||X - M||_F``.
    norm : float
        ``||X||_F``.
    """
    b1, b2, r = int(left_block), int(right_block), int(rank)
    n = source.n
    left = np.zeros((b2, b1, b1, r))
    right = np.zeros((b1, r, b2, b2))
    dropped = total = 0.0
    for k in range(b1):
        J = np.arange(k * b2, min((k + 1) * b2, n))
        block = np.zeros((b1 * b2, b2))
        if J.size:
            block[:n, : J.size] = source.columns(J)
        slab = block.reshape(b1, b2, b2).transpose(1, 0, 2)  # (q, a, l): S[q, k] for every q
        with _one_blas_thread():
            lefts, rights, s = _slab_triplets(slab, r)
        left[:, :, k, :] = lefts
        right[k] = rights.transpose(1, 0, 2)
        total += float((s**2).sum())
        dropped += float((s[:, r:] ** 2).sum())
    return left, right, float(np.sqrt(dropped)), float(np.sqrt(total))


def monarch_project_sparse(X, left_block: int, right_block: int, rank: int = 1):
    """:func:`monarch_project` of a scipy sparse ``X``, from its non-zeros: never formed.

    A slab ``S[q, k]`` (rows ``a b2 + q``, columns ``k b2 + l``) is zero outside
    the rows and columns its non-zeros take, so its singular triplets are those
    of that small dense block, zero elsewhere: each slab costs its own non-zeros
    (a slab of one non-zero is its own rank-one fit) and the empty ones
    nothing.  The column blocks are read one at a time from a CSC copy (the
    slabs of block ``k`` all lie in columns ``k b2 .. k b2 + b2 - 1``), so
    besides the factors the memory is one block's non-zeros.  At N = 20,000
    with 160,000 non-zeros one shape took 27 s from dense column blocks (their
    ``N'`` dense slab SVDs).

    Parameters
    ----------
    X : scipy sparse matrix or array, shape (n, n)
        The matrix, ``n <= b1 b2``.
    left_block, right_block, rank : int
        As :func:`monarch_project_columns` takes them.

    Returns
    -------
    left, right, error, norm
        As :func:`monarch_project_columns` returns them (the same, up to round-off).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.random(30, 30, density=0.05, random_state=0)
    >>> left, right, err, norm = monarch_project_sparse(X, 6, 5)
    >>> dense = X.toarray()
    >>> bool(np.isclose(err, np.linalg.norm(dense - MonarchOperator(left, right, 30).to_dense())))
    True
    """
    b1, b2, r = int(left_block), int(right_block), int(rank)
    n = X.shape[0]
    csc = sp.csc_array(X)
    if not csc.has_canonical_format:  # duplicates summed (a COO file may hold them), indices sorted
        csc = csc.copy()
        csc.sum_duplicates()
    left = np.zeros((b2, b1, b1, r))
    right = np.zeros((b1, r, b2, b2))
    dropped = total = 0.0
    for k in range(b1):
        lo, hi = min(k * b2, n), min((k + 1) * b2, n)
        start, stop = csc.indptr[lo], csc.indptr[hi]
        values = np.asarray(csc.data[start:stop], dtype=np.float64)
        if not values.size:
            continue
        rows = np.asarray(csc.indices[start:stop], dtype=np.int64)
        cols = np.repeat(np.arange(hi - lo), np.diff(csc.indptr[lo:hi + 1]))  # l, within the block
        a, q = np.divmod(rows, b2)
        total += float(values @ values)
        order = np.argsort(q, kind="stable")
        a, q, cols, values = a[order], q[order], cols[order], values[order]
        first = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        sizes = np.diff(np.r_[first, q.size])
        alone = first[sizes == 1]  # a slab of one entry: sign(v) sqrt|v| on the left, sqrt|v| on the right
        root = np.sqrt(np.abs(values[alone]))
        left[q[alone], a[alone], k, 0] = np.sign(values[alone]) * root
        right[k, 0, q[alone], cols[alone]] = root
        for f, size in zip(first[sizes > 1], sizes[sizes > 1]):
            dropped += _sparse_slab(left, right, k, int(q[f]), a[f:f + size], cols[f:f + size],
                                    values[f:f + size], r)
    return left, right, float(np.sqrt(dropped)), float(np.sqrt(total))


def _sparse_slab(left: np.ndarray, right: np.ndarray, k: int, q: int, a: np.ndarray, cols: np.ndarray,
                 values: np.ndarray, rank: int) -> float:
    """Slab ``(q, k)`` of :func:`monarch_project_sparse` from its entries ``(a, l, v)``: its leading ``rank``
    triplets written into ``left``/``right``; returns the squares of the singular values it drops."""
    rows, at_row = np.unique(a, return_inverse=True)
    used, at_col = np.unique(cols, return_inverse=True)
    block = np.zeros((rows.size, used.size))
    block[at_row, at_col] = values
    with _one_blas_thread():
        lefts, rights, s = _slab_triplets(block[None], rank)
    t = lefts.shape[-1]  # rank, or fewer where the block is smaller
    left[q][rows, k, :t] = lefts[0]  # (views: in place)
    right[k, :t][:, q, used] = rights[0]
    return float((s[0, t:] ** 2).sum())


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run the block on one BLAS thread (restored after).

    The ``N'`` slab SVDs of a projection are small (``b1 x b2``, about 55 x 55
    at N = 3000), so a second thread gains nothing, and when another process
    holds a core it stalls every slab: one shape's projection at N = 3000
    beside one CPU-bound process took 2.9-26 s on numpy's two BLAS threads,
    1.1-2.9 s on one (and 0.7-0.9 s either way on an idle machine), which
    also made the next projection's cost unpredictable for the time limit.
    (The slab products, :func:`~sfapprox.operators.monarch.monarch_slabs`, take 0.03 s either way.)
    """
    limit = _limit_blas(1)
    try:
        yield
    finally:
        if limit is not None:
            limit.restore_original_limits()


# --------------------------------------------------------------------------- the method
class Monarch(Approximation):
    """The nearest Monarch matrix of block rank ``r`` (Dao et al. 2022), at a budget.

    Parameters
    ----------
    rank : int or None, default=None
        Block rank ``r`` (the paper's Monarch: 1).  None: for each shape, the
        largest that fits ``budget``.
    left_block, right_block : int or None, default=None
        A fixed shape ``(b1, b2)`` with ``b1 b2 >= N`` (both or neither).
        None: the grid of :func:`monarch_configs_for_budget`.
    budget : int or None, default=None
        Stored-number budget (:func:`monarch_count`); needed unless ``rank``
        is given.
    max_shapes : int, default=MAX_SHAPES
        Shapes projected at most (the most nearly square first).
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Wall-clock limit of the whole grid, in seconds; the first shape always
        runs, each later one only when it ends within the limit at the cost
        the last projection predicts (:func:`projection_seconds`).
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes of a fit from a :class:`~sfapprox.sources.MatrixSource`'s
        columns: one that would keep more than it beside its passes' blocks is refused
        before any pass (None: the source's own limit, else 80% of the physical
        memory).  A dense matrix in memory whose projections' working arrays
        would be over the limit is projected from its column blocks instead
        (``params_["from"] == "columns"``), as a comparison does.  A sparse
        one (in memory, or a source that holds it sparse) is projected from
        its non-zeros (:func:`monarch_project_sparse`, ``params_["from"] ==
        "non-zeros"``), never formed.
    callback : callable or None, default=None
        Progress, as ChordSF's ``callback``: called with a dict as each block shape starts
        (``stage``: ``"shape 45 x 45"``) and after its projection (``iteration``: the shapes
        projected, ``max_iter``: the shapes to try, ``fro_error``: that shape's error, which its
        projection gives, ``elapsed``); what it returns is not read.

    Attributes
    ----------
    operator_ : MonarchOperator
    left_, right_ : ndarray
        The blocks (layout of :class:`MonarchOperator`).
    n_stored_ : int
        ``r N' (b1 + b2)``.
    seconds_ : float
    fro_error_, rel_error_ : float
        ``||X - M||_F`` and its ratio to ``||X||_F`` (None for a zero ``X``),
        exact, from the projection (the slabs' dropped singular values, or
        ``X - M`` itself in memory): a comparison does not score the row again.
    stop_reason_ : str
        ``"closed_form"`` (the exact projection of the chosen shape),
        ``"exact"`` (it reproduces ``X``), ``"time_limit"`` (shapes left
        untried) or ``"interrupted"``.
    params_ : dict
        ``left_block``, ``right_block``, ``rank``, ``padded_n``, ``count``,
        ``exact``, ``shapes_tried``, ``shapes`` and the ``grid`` (per shape
        tried: ``blocks``, ``rank``, ``count``, ``fro_error``); ``note`` when
        ``N`` was padded.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> left, right = rng.standard_normal((4, 4, 4, 1)), rng.standard_normal((4, 1, 4, 4))
    >>> X = MonarchOperator(left, right, 16).to_dense()
    >>> m = Monarch(budget=128).fit(X)
    >>> (m.params_["left_block"], m.params_["rank"], m.n_stored_), bool(np.allclose(m.to_dense(), X))
    ((4, 1, 128), True)
    """

    _method = "monarch"

    _accepts_sources = True
    _parameter_constraints = {
        "rank": Interval(int, 1, None, allow_none=True),
        "left_block": Interval(int, 1, None, allow_none=True),
        "right_block": Interval(int, 1, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "max_shapes": Interval(int, 1, None),
        "time_limit": Interval(float, 0, None, allow_none=True),
        "max_memory": MEMORY_LIMIT,
        "callback": (Callable, None),
    }

    def __init__(
        self,
        rank: int | None = None,
        *,
        left_block: int | None = None,
        right_block: int | None = None,
        budget: int | None = None,
        max_shapes: int = MAX_SHAPES,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        max_memory: int | str | None = None,
        callback: Callable[[dict], Any] | None = None,
    ):
        self.rank = rank
        self.left_block = left_block
        self.right_block = right_block
        self.budget = budget
        self.max_shapes = max_shapes
        self.time_limit = time_limit
        self.max_memory = max_memory
        self.callback = callback

    def _candidates(self, n: int) -> list[MonarchShape]:
        """The shapes to project, each with its rank and count; errors name what does not fit."""
        if (self.left_block is None) != (self.right_block is None):
            raise ParameterError("give both left_block and right_block, or neither")
        if self.rank is None and self.budget is None:
            raise ParameterError("Monarch needs a rank or a budget")
        if self.left_block is not None:
            b1, b2 = self.left_block, self.right_block
            unit = monarch_count(n, b1, b2)  # checks b1 b2 >= N
            if self.rank is not None and self.rank > min(b1, b2):
                raise ParameterError(f"block rank {self.rank} is above min(b1, b2) = {min(b1, b2)}, "
                                     "where every slab is already exact")
            r = self.rank if self.rank is not None else monarch_rank_for_budget(n, b1, b2, self.budget)
            if r < 1 or (self.budget is not None and r * unit > self.budget):
                raise BudgetError(f"budget {self.budget:,} is below a {b1} x {b2} Monarch of rank "
                                  f"{max(r, 1)} ({max(r, 1) * unit:,} numbers)")
            return [MonarchShape(b1, b2, r, r * unit)]
        if self.rank is None:
            shapes = monarch_configs_for_budget(n, self.budget, self.max_shapes)
            if not shapes:
                raise BudgetError(below_smallest(self.budget, n, "a Monarch matrix of block rank 1",
                                                 monarch_min_budget(n)))
            return shapes
        # a rank given: each refusal names it (and the budget only where one was given)
        ranked = [MonarchShape(b1, b2, self.rank, monarch_count(n, b1, b2, self.rank))
                  for b1, b2 in monarch_shapes(n) if self.rank <= min(b1, b2)]
        if not ranked:
            most = max(min(b1, b2) for b1, b2 in monarch_shapes(n))
            raise BudgetError(f"block rank {self.rank} is above min(b1, b2) of every Monarch shape of a {n:,} x {n:,} "
                              f"matrix ({most} at most, where the fit is already exact); choose a rank of at most "
                              f"{most}")
        shapes = ranked if self.budget is None else [s for s in ranked if s.count <= self.budget]
        if not shapes:
            raise BudgetError(f"budget {self.budget:,} is below every Monarch matrix of block rank {self.rank} of a "
                              f"{n:,} x {n:,} matrix (the smallest stores {min(s.count for s in ranked):,} numbers); "
                              "raise the budget or lower the rank")
        return shapes[: self.max_shapes]

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "Monarch":
        """Project the square matrix ``X`` (dense, sparse or a source) onto the Monarch class.

        ``check_input=False`` skips validating ``X`` (the caller did).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square matrix; a :class:`~sfapprox.sources.MatrixSource` is
            projected from its columns, one pass per shape (never formed).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        Monarch
            ``self``, fitted.

        Raises
        ------
        BudgetError
            When no Monarch shape fits the budget, or none has ``min(b1, b2)``
            as large as ``rank``.
        """
        X = self._validate(X, check_input)
        n = X.n if isinstance(X, MatrixSource) else X.shape[0]
        shapes = self._candidates(n)  # checks the budget before any work
        # sparse (in memory, or a source that holds it so): projected from its non-zeros, never formed
        held = X.sparse_matrix if isinstance(X, MatrixSource) else X if sp.issparse(X) else None
        if held is None:
            X = self._within_limit(X)  # a matrix in memory whose projections are over the limit: its columns
        elif not isinstance(X, MatrixSource):  # what it keeps beside X: the factors, and X's CSC copy
            keeps = get_method(self.method_name).columns_memory(n, max(shape.count for shape in shapes))
            check_memory(keeps + (0 if X.format == "csc" else 12 * X.nnz + 8 * n) + LIBRARY_WORKING_SET,
                         what=f"monarch: its fit of a {n:,} x {n:,} sparse matrix", limit=self._max_memory_bytes)
        streamed = isinstance(X, MatrixSource)
        # a fit from columns: refused before its first pass where its largest shape would not fit
        X = self._from_columns(X, max(shape.count for shape in shapes))
        if streamed or held is not None:  # one pass per shape, which gives its error exactly
            norm = None
        else:
            dense = X
            norm = float(np.linalg.norm(dense))
        start = time.perf_counter()
        deadline = _timing.Deadline.after(self.time_limit)
        best, grid, reason = None, [], None
        last = None  # (shape, seconds) of the last projection: what the next one is expected to cost
        report = Reporter(self.callback, max_iter=len(shapes))
        try:
            for shape in shapes:
                if best is not None and not deadline.fits(projection_seconds(shape, *last)):
                    reason = "time_limit"  # (the shapes are tried in order, squarest first)
                    break
                report.at(shape_stage(shape))
                began = _timing.now()
                whole = True  # (a dense X's slab SVDs stop at the limit: the first shape's alone overran it)
                if held is not None:
                    left, right, err, norm = monarch_project_sparse(held, shape.left_block, shape.right_block,
                                                                    shape.rank)
                elif streamed:
                    left, right, err, norm = monarch_project_columns(X, shape.left_block, shape.right_block,
                                                                     shape.rank)
                else:
                    left, right, err, whole = monarch_project_within(dense, shape.left_block, shape.right_block,
                                                                     shape.rank, deadline)
                    if deadline.end is None:  # (under a limit the singular values' error: no dense M past it)
                        err = float(np.linalg.norm(dense - from_slabs(monarch_slabs(left, right), n)))
                grid.append({"blocks": [shape.left_block, shape.right_block], "rank": shape.rank,
                             "count": shape.count, "fro_error": err})
                last = (shape, _timing.now() - began)
                report(err)
                # Smallest error; a tie goes to the earlier (squarer) shape, and of shapes that reproduce X
                # (their errors round-off) the one storing fewest numbers wins, not round-off's draw
                if best is None or preferred(err, shape.count, best[0], best[1].count, norm, tie=1e-12):
                    best = (err, shape, left, right)
                if not whole:  # some blocks left zero at the limit: no time for another shape either
                    reason = "time_limit"
                    break
        except KeyboardInterrupt:
            if best is None:
                raise
            reason = "interrupted"
        self.seconds_ = time.perf_counter() - start
        err, shape, left, right = best
        exact = reproduces(err, norm)
        if reason == "time_limit":
            warnings.warn(
                f"Monarch projected {len(grid):,} of {counted(len(shapes), 'block shape')} within time_limit="
                f"{self.time_limit:g} s; increase it to try them all",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        self.left_, self.right_ = left, right
        self.operator_ = MonarchOperator(left, right, n)
        self.n_stored_ = shape.count
        self.stop_reason_ = reason or ("exact" if exact else "closed_form")
        self.params_ = {
            "left_block": shape.left_block,
            "right_block": shape.right_block,
            "rank": shape.rank,
            "padded_n": shape.padded_n,
            "count": shape.count,
            "exact": bool(exact),
            "shapes_tried": len(grid),
            "shapes": len(shapes),
            "grid": grid,
        }
        if held is not None:
            self.params_["from"] = "non-zeros"
        elif streamed:
            self.params_["from"] = "columns"
        # The projection's own pass gave the error exactly (the slabs' dropped singular values): from a
        # source, a comparison takes it rather than sampling the row again (an estimate, at N = 20,000
        # "194.4 +- 3.8" for the exact 192.1)
        self.fro_error_ = err
        self.rel_error_ = err / norm if norm else None
        self.error_from_pass_ = streamed
        if shape.padding_note(n):
            self.params_["note"] = shape.padding_note(n)
        return self

    def to_dense(self) -> np.ndarray:
        """The fitted Monarch matrix as a dense ``N x N`` array.

        Returns
        -------
        numpy.ndarray
            The fitted Monarch matrix, of shape ``(N, N)``.
        """
        return self.operator_.to_dense()


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> Monarch:
    return Monarch(**context.settings.apply_to(Monarch, budget=budget, callback=context.callback))


register(
    MethodSpec(
        name="monarch",
        operators=("monarch",),
        summary="Monarch matrices (Dao et al. 2022): block-diagonal · permutation · block-diagonal, "
                "closed-form projection; block rank r, any N (padded)",
        stores="r·N′·(b₁ + b₂), N′ = b₁·b₂ ≥ N (2·N·√N at rank 1, b₁ = b₂ = √N)",
        make=_make,
        min_budget=lambda n, context: monarch_min_budget(n),
        order=60,
        label="Monarch",
        iterative=False,
        access=("dense", "columns"),
        # the padded slabs and their SVDs: 3.4-4.5 N'^2 float64 measured (N = 256-1000), N' the largest
        # padded order among the shapes tried
        working_memory=lambda n: 5 * 8 * max(b1 * b2 for b1, b2 in monarch_shapes(n, first=MAX_SHAPES)) ** 2,
        # from columns: the blocks' factors as they are projected; measured 2.8-3.1 x 8 budget by tracemalloc
        # (N = 3,000), and up to 4.2 in peak RSS beside the blocks (N = 4,096, method_memory_formed.md)
        columns_memory=lambda n, budget: 8 * 5 * budget,
    )
)
