"""RPCA (GoDec) on a matrix too big to form: every step a pass over its column blocks.

GoDec alternates two exact projections: ``L <- the rank-r part of X - S`` and
``S <- the s largest entries of X - L``.  From columns, the first is a
randomized SVD of the operator ``X - S`` (its products are a pass over ``X``
minus a sparse product) and the second one streamed top-``s`` pass over the
columns of ``X - L``, which also gives the error of ``(L, S)`` exactly:
``||X - L - S||^2 = ||X - L||^2 - sum of the kept squares``.  So every grid
point is scored exactly, and the grid's best is chosen on exact errors.

Each GoDec iteration costs ``2 + 2q`` passes for ``L`` (``q`` power
iterations) and one for ``S``.

A :class:`Start` gives every split its first ``L``, its leading ``r`` terms: a
split's first iteration is then one pass, its result never worse than that
low rank part alone.  In a comparison it is the ``rsvd`` row's fit of the same
matrix; without one the grid makes its own first, a randomized SVD at the
grid's largest rank under the time limit (:func:`~.rsvd.source_svd`, as the
``rsvd`` row fits it), keeping back the time of one residual pass.  Under a
time limit the largest-rank split runs first — the low rank end: the start's
``L`` and the top ``s`` of ``X - L``, never worse than ``L`` alone — then the
largest entries (rank 0, one pass), and a GoDec iteration starts only when
the passes measured so far say it ends in time.  (Without a start the
largest entries ran first and every other split was priced at ``2 + 2q``
top-s passes: at N = 8,000 under 5 s each was skipped and RPCA ended at
rel 0.988 where rsvd had 0.0017.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import _timing
from ..sources import DistributedSource, MatrixSource
from .._settings import COUNT_INDICES
from ._rpca_parts import _Candidate, carrying_entries, settled_stop, skipped_record, split_stage
from .rsvd import randomized_svd, source_svd
from .tsvd import carrying_rank, preferred, reproduces, round_off
from .sparse import streamed_top

__all__ = ["fit_grid_columns", "Start", "POWER_ITERATIONS"]

#: Power iterations of each randomized SVD of ``X - S`` (two passes each).
POWER_ITERATIONS = 1

#: A pass over ``X - L`` costs the pass over ``X`` and ``L``'s columns besides: its cost from a pass over ``X``.
RESIDUAL_PASS = 1.25


@dataclass(frozen=True)
class Start:
    """A low rank approximation of the same matrix to start each split's ``L`` from.

    Attributes
    ----------
    U, sig, Vt : numpy.ndarray
        Its factors, singular values in decreasing order (a split of rank
        ``r`` starts from the first ``r``).
    product_pass : float
        Measured seconds of one product pass over ``X`` (what a randomized SVD
        of ``X - S`` costs ``2 + 2q`` of), for the time checks.
    """

    U: np.ndarray
    sig: np.ndarray
    Vt: np.ndarray
    product_pass: float

    def leading(self, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Its first ``rank`` terms (None when it has fewer)."""
        if self.sig.size < rank:
            return None
        return self.U[:, :rank], self.sig[:rank], self.Vt[:rank]


class _Residual(MatrixSource):
    """``X - U diag(sig) Vt``, column by column (a plain source: it travels to an executor's workers)."""

    def __init__(self, source: MatrixSource, U: np.ndarray, sig: np.ndarray, Vt: np.ndarray) -> None:
        super().__init__(source.n, f"{source.name} - L")
        self.column_copies = source.column_copies + 1  # and L's columns
        self.max_memory = source.max_memory
        self.source, self.left, self.right = source, U * sig, Vt

    def _columns(self, J: np.ndarray) -> np.ndarray:
        return self.source.columns(J) - self.left @ self.right[:, J]


def _low_rank(source: MatrixSource, S: sp.csr_array, rank: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rank-``rank`` randomized SVD of ``X - S`` from products with ``X``."""
    St = S.T.tocsr()
    U, sig, Vt, _ = randomized_svd(lambda B: source.matmat(B) - S @ B, lambda B: source.rmatmat(B) - St @ B,
                                   source.n, rank, n_iter=POWER_ITERATIONS, seed=seed)
    return U, sig, Vt


def _held_sparse(source: MatrixSource) -> bool:
    """Whether ``source`` holds its matrix sparse (a :class:`~sfapprox.sources.DistributedSource` gives its
    wrapped source's): then ``X`` itself (rank 0) is selected from its non-zeros, not by a pass of dense blocks."""
    return source.sparse_matrix is not None


def _sparse_part(source: MatrixSource, U, sig, Vt, n_sparse: int, max_memory: int | None):
    """The ``n_sparse`` largest entries of ``X - L`` (flat positions, values) and the exact error after them
    (on a :class:`~sfapprox.sources.DistributedSource`, each worker passes over a range of the residual's columns).
    Without ``L`` (rank 0) that is ``X``'s own: from its non-zeros where it is held sparse (a residual of
    rank 0 read dense blocks: a minute at N = 60,025 for 300,000 non-zeros, which top-s reads in 0.1 s)."""
    if not sig.size:
        residual = source
    elif isinstance(source, DistributedSource):
        residual = DistributedSource(_Residual(source.source, U, sig, Vt), source.executor)
    else:
        residual = _Residual(source, U, sig, Vt)
    rows, cols, vals, nnz, squared = streamed_top(residual, n_sparse, max_memory)
    # every non-zero kept: X - L - S is zero (the difference of the two sums would leave round-off's sqrt)
    error = 0.0 if vals.size >= nnz else math.sqrt(max(0.0, squared - float(vals @ vals)))
    return rows * source.n + cols, vals, error


def _timed_sparse_part(timing: dict | None, source: MatrixSource, U, sig, Vt, n_sparse: int,
                       max_memory: int | None):
    """:func:`_sparse_part`, its seconds per pass over ``X`` noted in ``timing["top_pass"]``, without the
    entries that carry only round-off (:func:`_without_round_off`)."""
    started = _timing.now()
    out = _sparse_part(source, U, sig, Vt, n_sparse, max_memory)
    if timing is not None and (sig.size or not _held_sparse(source)):  # (X's non-zeros price no residual pass)
        timing["top_pass"] = (_timing.now() - started) / (RESIDUAL_PASS if sig.size else 1.0)
    return _without_round_off(source.n, sig, *out)


def norm_below(sig: np.ndarray, vals: np.ndarray, error: float) -> float:
    """A lower bound of ``||X||_F`` from a split's result, where ``X`` is not formed: ``| ||L|| - ||X - L|| |``,
    with ``||L||_F = ||sigma||`` and ``||X - L||_F^2 = error^2 + ||S||^2`` (``S`` holds ``X - L`` at its
    positions).  It is ``||X||`` itself at rank 0 and, within round-off, where ``L`` reproduces ``X``."""
    return abs(float(np.linalg.norm(sig)) - math.hypot(error, float(np.linalg.norm(vals))))


def _without_round_off(n: int, sig: np.ndarray, idx: np.ndarray, vals: np.ndarray, error: float):
    """The sparse part without the entries that carry only round-off (:func:`~._rpca_parts.carrying_entries`, on
    :func:`norm_below`'s bound of ``||X||_F``), and the error of what is kept."""
    keep, error = carrying_entries(vals, error, n, norm_below(sig, vals, error))
    return (idx, vals, error) if keep.all() else (idx[keep], vals[keep], error)


def _carrying(U: np.ndarray, sig: np.ndarray, Vt: np.ndarray):
    """``L`` without its singular values at round-off (:func:`~.tsvd.carrying_rank`)."""
    keep = carrying_rank(sig, U.shape[0])
    return (U, sig, Vt) if keep.all() else (U[:, keep], sig[keep], Vt[keep])


def fit_split_columns(source: MatrixSource, rank: int, n_sparse: int, *, max_iter: int, tol: float, seed: int,
                      deadline: _timing.Deadline | None, max_memory: int | None, start: Start | None = None,
                      timing: dict | None = None, report=None):
    """GoDec at one ``(rank, n_sparse)`` split from columns; returns ``(error, U, sig, Vt, idx, vals, iterations, stop)``.

    ``timing`` (a dict), when given, gets the seconds of its last top-s pass per pass over ``X``
    (``"top_pass"``): what the grid prices the next splits by.  ``report`` (a
    :class:`~sfapprox._progress.Reporter`) is given each iteration's error (its top-s pass's)."""
    n = source.n
    empty = (np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)))
    if rank == 0:  # the largest entries of X: one pass
        idx, vals, error = _timed_sparse_part(timing, source, *empty, n_sparse, max_memory)
        return error, *empty, idx, vals, 0, settled_stop(error, norm_below(empty[1], vals, error))
    started = _timing.now()
    given = None if start is None else start.leading(rank)
    U, sig, Vt = _carrying(*(given if given is not None else _low_rank(source, sp.csr_array((n, n)), rank, seed)))
    idx, vals, error = _timed_sparse_part(timing, source, U, sig, Vt, n_sparse, max_memory)
    if n_sparse == 0:  # a randomized SVD's L
        return error, U, sig, Vt, idx, vals, 0, settled_stop(error, norm_below(sig, vals, error))
    per_iteration = _timing.now() - started
    if given is not None:  # that was one pass; the next iteration also computes its L
        per_iteration += (2 + 2 * POWER_ITERATIONS) * start.product_pass
    best = (error, U, sig, Vt, idx, vals)
    stop, iterations = "max_iter", 1
    while iterations < max_iter:
        if deadline is not None and not deadline.fits(per_iteration):
            stop = "time_limit"
            break
        started = _timing.now()
        rows, cols = np.divmod(idx, n)
        S = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        U, sig, Vt = _carrying(*_low_rank(source, S, rank, seed + iterations))
        idx, vals, error = _timed_sparse_part(timing, source, U, sig, Vt, n_sparse, max_memory)
        per_iteration = _timing.now() - started
        iterations += 1
        if report is not None:
            report(error)
        improved = best[0] - error
        if error < best[0]:
            best = (error, U, sig, Vt, idx, vals)
        # a gain below round-off (N eps ||X||_F, ||X|| bounded from the split: X is not formed) is no gain, as
        # in memory: near an exact fit a relative tol of an error itself at round-off passed every time (a 64 x 64
        # kernel at rank 50: all 300 iterations, each a randomized SVD and a top-s pass, at 6e-11 of ||X||)
        unresolved = round_off(n, norm_below(best[2], best[5], best[0]))
        if improved <= max(tol * max(best[0], 1e-300), unresolved):
            stop = "converged"
            break
    return (*best, iterations, stop)


def fit_grid_columns(source: MatrixSource, splits, *, max_iter: int, tol: float, seed: int,
                     deadline: _timing.Deadline | None, max_memory: int | None = None, start: Start | None = None,
                     count_indices: bool = COUNT_INDICES, report=None):
    """Every split of the grid from columns that fits the time; the best (a :class:`~._rpca_parts._Candidate`,
    its ``split`` the one it fitted) and the grid records.  The best: the smallest error, and of the splits that reproduce ``X`` the one storing fewest
    numbers (:func:`~._rpca_parts.preferred`, on the largest of the splits' :func:`norm_below` bounds of ``||X||``).

    Without a ``start`` (the comparison's ``rsvd`` fit) one is made first
    (:func:`_own_start`).  The split of the largest rank it covers runs first:
    its first iteration is one pass over ``X - L`` with ``L`` given, and its
    result is never worse than that low rank part alone — at N = 65,536,
    where a pass takes minutes, the one split a time limit may allow.  Each
    split starts only when the passes it needs fit the time left (before any
    top-s pass is measured, priced at the start's product pass); where not one
    does, the result is the start's low rank part alone, its error None.  Once
    a split reproduces ``X``, only the splits of a lower rank than it keeps
    are tried (they may store fewer numbers; the others are marked
    ``skipped: "exact"``).  ``report`` (a :class:`~sfapprox._progress.Reporter`) is told each split
    and given its iterations' errors.
    """
    from .._progress import Reporter

    report = report or Reporter(None)
    held = _held_sparse(source)
    n, largest = source.n, max(rank for rank, _ in splits)
    best, records, timing, norm = None, {}, {}, 0.0

    def made(start: Start | None) -> Start | None:
        """``start`` or the grid's own, with the time of a residual pass probed where products say nothing of it."""
        start = start if start is not None else _own_start(source, largest, seed, deadline)
        if deadline is not None and start is not None and not source.products_by_columns:
            timing["top_pass"] = _probed_top_pass(source, start, max_memory)
        return start

    # X held sparse: its all-sparse end first, before the start is made (where every non-zero fits, X is
    # reproduced and no start is needed: 6-8 s of randomized SVD at N = 60,025 for a 0.1 s answer)
    later = start is None and held and any(rank == 0 for rank, _ in splits)
    if not later:
        start = made(start)
    order = _order(splits, start, held)
    tried = 0
    while order:
        rank, n_sparse = order.pop(0)
        if best is not None and reproduces(best.error, norm) and rank >= best.kept()[0]:
            # X reproduced: a split of no lower rank holds the same directions and more, and is not tried
            # (its passes spared); one of a lower rank may store fewer numbers (a sparse part in their place)
            records[rank, n_sparse] = skipped_record((rank, n_sparse), "exact")
            continue
        if later and rank > 0:  # the all-sparse end did not settle it: the start now, and the rest in its order
            later, start = False, made(None)
            order = _order([(rank, n_sparse), *order], start, held)
            rank, n_sparse = order.pop(0)
        cost = _first_cost(rank, n_sparse, start, timing, held)
        if deadline is not None and cost is not None and not deadline.fits(cost):
            records[rank, n_sparse] = skipped_record((rank, n_sparse), "time_limit")
            continue
        tried += 1
        report.at(split_stage(tried, len(splits), rank))
        cand = _Candidate(*fit_split_columns(source, rank, n_sparse, max_iter=max_iter, tol=tol, seed=seed,
                                             deadline=deadline, max_memory=max_memory, start=start, timing=timing,
                                             report=report),
                          split=(rank, n_sparse))
        report(cand.error, steps=0)
        records[rank, n_sparse] = cand.record(cand.split, n, count_indices)
        norm = max(norm, norm_below(cand.sig, cand.vals, cand.error))
        if best is None or preferred(cand.error, cand.count(n, count_indices), best.error,
                                     best.count(n, count_indices), norm):
            best = cand
    if best is None:  # not one residual pass fits: the start's low rank part alone, unscored
        best = _start_alone(start, largest, n)
    return best, [records[split] for split in splits]


def _probed_top_pass(source: MatrixSource, start: Start, max_memory: int | None) -> float:
    """Seconds of a top-s pass over ``X - L``, from the time of its first block, where the start's product
    pass says nothing of it: ``X``'s products are its own (a sparse matrix's sparse product), the
    residual's blocks dense ``N x |J|`` products with ``L`` (at N = 60,025 a product pass took 0.2 s and a
    residual pass a minute: the first split, priced at the product, ran 70 s of a 30 s limit)."""
    plain = source.source if isinstance(source, DistributedSource) else source
    residual = _Residual(plain, start.U, start.sig, start.Vt)
    # (a block no wider than the pass's own: the probe is a share of the pass, never more)
    J = np.arange(min(source.block_width(max_memory, extra_columns=8), residual.block_width(max_memory, extra_columns=8)))
    started = _timing.now()
    magnitudes = np.abs(residual.columns(J))
    np.count_nonzero(magnitudes >= float(magnitudes.max(initial=0.0)))  # the selection's own share
    return (_timing.now() - started) * source.n / max(J.size, 1)


def _start_alone(start: Start | None, rank: int, n: int) -> _Candidate:
    """The grid's result where no split fitted the time: the start's leading ``rank`` terms, no sparse
    part (within the budget: the largest rank's split holds them), its error unknown (None) and no split
    fitted — at N = 20,000 the first split's pass ran 9 s past a 3 s limit."""
    if start is None:  # (a grid of its all-sparse end alone, out of time before it: nothing stored)
        U, sig, Vt = np.zeros((n, 0)), np.zeros(0), np.zeros((0, n))
    else:
        U, sig, Vt = _carrying(*start.leading(min(rank, start.sig.size)))
    return _Candidate(None, U, sig, Vt, np.zeros(0, dtype=np.int64), np.zeros(0), 0, "time_limit")


def _own_start(source: MatrixSource, rank: int, seed: int, deadline: _timing.Deadline | None) -> Start | None:
    """The grid's own start where no fit was handed over: a randomized SVD of ``X`` at the grid's largest
    rank, its passes cut as the ``rsvd`` row's are, with the time of one residual pass kept back for the
    split it starts (None for a grid of rank 0 alone)."""
    if rank == 0:
        return None
    started = _timing.now()
    U, sig, Vt, _, passes, _, read = source_svd(source, rank, seed=seed, deadline=deadline, keep_back=RESIDUAL_PASS)
    return Start(U, sig, Vt, product_pass=(_timing.now() - started) / (passes - 1 + read / source.n))


def _order(splits, start: Start | None, sparse: bool = False) -> list[tuple[int, int]]:
    """The order the splits run in: the exact ends first, or with a ``start`` its largest-rank GoDec split;
    of an ``X`` held sparse its largest entries before all (a selection among its non-zeros, no pass: where
    they all fit, X itself, and no split is tried after it)."""
    exact = [split for split in splits if split[0] == 0 or split[1] == 0]
    godec = [split for split in splits if split not in exact]
    seeded = [split for split in godec if start is not None and start.leading(split[0]) is not None]
    first = sorted(seeded, reverse=True)[:1]
    order = first + exact + [split for split in godec if split not in first]
    return sorted(order, key=lambda split: split[0] != 0) if sparse else order


def _first_cost(rank: int, n_sparse: int, start: Start | None, timing: dict, source_sparse: bool = False) -> float | None:
    """Seconds a split's first result costs, from the top-s pass measured so far (before any: priced as
    the start's product pass; None without a start): one such pass for rank 0 (none where ``X`` is held
    sparse: ``source_sparse``, its non-zeros are selected from), ``RESIDUAL_PASS`` of them
    with a given ``L``, else a randomized SVD's ``2 + 2q`` product passes (the start's measured ones, or
    priced as top-s passes) and the residual's."""
    if rank == 0 and source_sparse:  # X's non-zeros: a selection among them, no pass
        return 0.0
    top = timing.get("top_pass", None if start is None else start.product_pass)
    if top is None:
        return None
    if rank == 0:
        return top
    if start is not None and start.leading(rank) is not None:
        return RESIDUAL_PASS * top
    product = start.product_pass if start is not None else top
    return (2 + 2 * POWER_ITERATIONS) * product + RESIDUAL_PASS * top
