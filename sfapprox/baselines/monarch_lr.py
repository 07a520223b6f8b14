"""Monarch plus low rank (``monarch+lr``): ``X ≈ M + U diag(s) Vᵀ`` at a budget.

``M`` is a block-rank-``r`` Monarch matrix (:mod:`.monarch`) and the second
term a rank-``k`` matrix; both are fitted by alternating their exact
projections:

* the Monarch part: the nearest Monarch matrix of the chosen shape to
  ``X - L`` (:func:`~.monarch.monarch_project`, closed form);
* the low-rank part: the best rank-``k`` approximation of ``X - M`` within
  the column space ``orth((X - M) Vᵀ)`` of the previous ``V`` (one block
  power step, ``O(N² k)``; the first is a full truncated SVD).

Each step can only lower ``‖X - M - L‖_F``: the Monarch step is an exact
minimiser over ``M``, and the low-rank step's candidate set contains the
previous ``L`` (whose rows lie in the span of ``V``), so the alternation is
monotone.  It starts from the plain Monarch projection of ``X`` (``L = 0``),
so every grid point is at least as close as plain Monarch of its shape.

**Budget** (stored numbers): ``monarch_count(N, b1, b2, r) + k (2N + 1)``.
The grid gives the low-rank term ``0`` and up to ``max_splits`` shares of
the budget (a quarter, a half, three quarters), the Monarch part the largest
block rank of each of its ``max_shapes`` most nearly square shapes that fits
the rest (plain Monarch: the shapes ``monarch`` tries), and adds the point "all to the low rank" (TSVD).  So the result is
never worse than ``monarch`` or ``tsvd`` at the same budget (their grids are
contained): those closed-form points run first, then the alternating ones,
each with an equal share of the time left.  ``time_limit`` bounds the whole
grid (the first point always completes); Ctrl-C keeps the best point so far.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._errors import BudgetError, ConvergenceWarning, user_stacklevel
from ..formats import counted
from .._params import MEMORY_LIMIT, SEED, Interval
from .._progress import Reporter
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._validation import check_memory
from ..budget import below_smallest, monarch_lr_min_budget, tsvd_count, tsvd_rank_for_budget
from ..operators.monarch import MonarchLowRankOperator, MonarchOperator
from ..sources import MatrixLike
from .monarch import (MonarchShape, monarch_configs_for_budget, monarch_project, monarch_project_within,
                      projection_seconds, shape_stage)
from .tsvd import leading_svd, numerical_rank, preferred, reproduces

__all__ = ["MonarchLowRank", "MonarchLowRankOperator", "monarch_lr_min_budget"]

#: Shares of the budget the grid gives the low-rank term (besides none and all).
LOW_RANK_SHARES = (0.25, 0.5, 0.75)

#: The first alternation of a grid point is expected to cost this many times its initial Monarch
#: projection (another projection, its dense matrix and error, and the low-rank step); later ones
#: cost what the last one did.
ALTERNATION_PROJECTIONS = 2.0

#: A grid point's alternations stop once its error, less this many times the last alternation's gain for
#: every alternation left, is still above the best point's: alternating projections gain less and less,
#: so even at twice its current pace it cannot catch up.  (On a 300 x 300 planted matrix the mixed points
#: ran their 1,000 alternations, 40 s, at errors twice the low-rank point's.)
BEHIND_PACE = 2.0

#: Peak working memory of a fit, in dense ``N x N`` float64 arrays (X, the two parts, the residuals,
#: the padded slabs and their SVD, LAPACK's workspace for the first truncated SVD; measured with
#: tracemalloc: 11.5-13.8 at N = 100-1000).
WORKING_COPIES = 16


# --------------------------------------------------------------------------- the alternation
@dataclass
class _Point:
    """One grid point's fit: its shape (None: low rank only), low rank ``k``, parts, error, history."""

    shape: MonarchShape | None
    k: int
    left: np.ndarray | None
    right: np.ndarray | None
    low_rank: tuple[np.ndarray, np.ndarray, np.ndarray]
    fro_error: float
    iterations: int
    reason: str

    @property
    def count(self) -> int:
        n = self.low_rank[0].shape[0]
        return (0 if self.shape is None else self.shape.count) + tsvd_count(n, self.k)


def _first_low_rank(R: np.ndarray, k: int, seed: int,
                    deadline: _timing.Deadline | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best rank-``k`` approximation of ``R`` as U, s, Vt: :func:`~.tsvd.leading_svd` with 4 power
    iterations at most (each only when it fits ``deadline``); the alternations refine it further."""
    return leading_svd(R, k, seed, deadline, n_iter=4)


def _power_step(R: np.ndarray, Vt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best approximation of ``R`` with columns in ``orth(R Vtᵀ)``: never worse than ``(., ., Vt)``."""
    Q, _ = np.linalg.qr(R @ Vt.T)
    Ub, s, Vt_new = np.linalg.svd(Q.T @ R, full_matrices=False)
    return Q @ Ub, s, Vt_new


def point_stage(shape: MonarchShape | None, k: int) -> str:
    """What a progress display says while the grid point ``(shape, k)`` is fitted.

    Examples
    --------
    >>> point_stage(MonarchShape(45, 45, 1, 0), 12), point_stage(None, 30)
    ('shape 45 x 45 + rank 12', 'rank 30')
    """
    if shape is None:
        return f"rank {k}"
    return shape_stage(shape) + (f" + rank {k}" if k else "")


def _monarch_dense(left: np.ndarray, right: np.ndarray, n: int) -> np.ndarray:
    return MonarchOperator(left, right, n).to_dense()


def _fit_point(X: np.ndarray, shape: MonarchShape | None, k: int, *, max_iter: int, tol: float,
               deadline: _timing.Deadline | None, seed: int, svd_seconds: float = 0.0,
               beat: float | None = None, report: Reporter | None = None) -> _Point:
    """Alternate the two exact projections from the plain Monarch fit (or fit the low rank alone).

    An alternation starts only when it ends by ``deadline`` at the cost of
    the last one (the first: :data:`ALTERNATION_PROJECTIONS` times the
    initial projection's, plus ``svd_seconds``, what its truncated SVD of
    ``X - M`` is expected to cost); ``"time_limit"`` when none did.  With
    ``beat`` (the best point's error so far) the alternations stop
    (``"behind"``) once they could not reach it at :data:`BEHIND_PACE` times
    the last one's gain in the alternations left.  ``report`` (a
    :class:`~sfapprox._progress.Reporter`) is given each alternation's error, computed anyway.
    """
    report = report or Reporter(None)
    n = X.shape[0]
    deadline = deadline or _timing.Deadline(None)
    if shape is None:  # low rank only: TSVD
        U, s, Vt = _first_low_rank(X, k, seed, deadline)
        # As TruncatedSVD: singular values at round-off carry nothing and are neither stored nor charged
        # (a rank-2 matrix of order 24 kept rank 4, 196 numbers, where tsvd's rank 2 takes 98).
        kept = numerical_rank(s, n)
        U, s, Vt = U[:, :kept], s[:kept], Vt[:kept]
        err = float(np.linalg.norm(X - (U * s) @ Vt))
        return _Point(None, kept, None, None, (U, s, Vt), err, 1, "closed_form")
    began = _timing.now()
    # (its slab SVDs within the deadline: the first point's projection runs whatever the limit, and at
    # N = 8,192 it alone took longer than 10 s)
    left, right, err, whole = monarch_project_within(X, shape.left_block, shape.right_block, shape.rank, deadline)
    empty = (np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)))
    if not whole:  # some blocks left zero: the projection so far (its error without a dense M)
        return _Point(shape, 0, left, right, empty, err, 0, "time_limit")
    if k == 0 and deadline.end is not None:
        # under a limit the singular values' error (the same to round-off): forming M and X - M ran past it
        return _Point(shape, 0, left, right, empty, err, 1, "closed_form")
    M = _monarch_dense(left, right, n)
    err = float(np.linalg.norm(X - M))
    if k == 0:
        return _Point(shape, 0, left, right, empty, err, 1, "closed_form")
    # What the next alternation is expected to cost: the first one's truncated SVD of an N x N residual
    # too, which at N = 1024 costs 10-30 projections and overran a 30 s limit by 1.3-7.6 s unpriced.
    step = ALTERNATION_PROJECTIONS * (_timing.now() - began) + svd_seconds
    report(err, steps=0)  # the plain Monarch start's
    low, reason, it = None, "max_iter", 0
    for it in range(1, max(1, max_iter) + 1):
        if not deadline.fits(step):
            reason, it = "time_limit", it - 1
            break
        began = _timing.now()
        R = X - M
        low = _first_low_rank(R, k, seed, deadline) if low is None else _power_step(R, low[2])
        L = (low[0] * low[1]) @ low[2]
        left, right = monarch_project(X - L, shape.left_block, shape.right_block, shape.rank)
        M = _monarch_dense(left, right, n)
        new = float(np.linalg.norm(X - M - L))
        gain = err - new
        done = gain <= tol * err  # less than tol of the error gained by this alternation
        err = new  # the error of the parts kept (monotone up to round-off)
        report(err)
        if reproduces(new, float(np.linalg.norm(X))):
            reason = "exact"
            break
        if done:
            reason = "converged"
            break
        if beat is not None and it > 1 and new - BEHIND_PACE * max(gain, 0.0) * (max_iter - it) > beat:
            reason = "behind"  # (never kept: another point is better, and this one cannot catch up)
            break
        step = _timing.now() - began
    if low is None:  # no alternation fitted: the plain Monarch projection, with no low-rank term
        return _Point(shape, 0, left, right, empty, err, 0, reason)
    return _Point(shape, k, left, right, low, err, it, reason)


# --------------------------------------------------------------------------- the method
class MonarchLowRank(Approximation):
    """A Monarch matrix plus a low-rank matrix at a budget, by alternating exact projections.

    Parameters
    ----------
    budget : int
        Stored-number budget: the Monarch part's numbers plus ``k (2N + 1)``.
        Required (the default, None, is a :class:`~sfapprox.ParameterError`).
    max_splits : int, default=3
        Shares of the budget tried for the low-rank term (of 1/4, 1/2, 3/4),
        besides none (plain Monarch) and all (TSVD).
    max_shapes : int, default=2
        Monarch shapes tried per split with a low-rank term (the most nearly
        square first); plain Monarch tries as many as ``monarch`` does.
    max_iter : int, default=1000
        Alternations per grid point (they converge linearly: a planted
        Monarch + rank-1 matrix of order 16 needs about 600).
    tol : float, default=1e-6
        Stop a grid point when an alternation lowers the error by less than
        this fraction.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Wall-clock limit of the whole grid, in seconds.
    random_state : int, default=0
        Seed of the randomized SVD (only for N above the exact-SVD limit).
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Refuse fits whose working memory (:data:`WORKING_COPIES` dense
        ``N x N`` arrays) exceeds this many bytes (default: 80% of the
        physical memory).
    callback : callable or None, default=None
        Progress, as ChordSF's ``callback``: called with a dict as each grid point starts
        (``stage``: ``"shape 45 x 45 + rank 12"``), after each alternation and after each
        closed-form point (``iteration``: alternations and closed-form points so far,
        ``max_iter``: the most the grid may take, ``fro_error``: the current error, computed
        anyway, ``elapsed``); what it returns is not read.

    Attributes
    ----------
    operator_ : MonarchLowRankOperator
    n_stored_ : int
    seconds_ : float
    fro_error_, rel_error_ : float, float or None
        ``||X - M - L||_F`` and that over ``||X||_F`` as the fit computed them for the chosen point (the
        same as :meth:`frobenius_error` to round-off; the relative error None for X all zeros).
    stop_reason_ : str
        ``"exact"``, ``"converged"``, ``"max_iter"``, ``"closed_form"``
        (a point with one part only), ``"time_limit"`` or ``"interrupted"``.
    params_ : dict
        The winner's ``left_block``, ``right_block``, ``monarch_rank`` (None
        without a Monarch part), ``rank`` (of the low-rank term), ``count``,
        ``iterations``, and the ``grid`` (per point tried: ``blocks``,
        ``monarch_rank``, ``rank``, ``count``, ``fro_error``, ``iterations``).

    Examples
    --------
    >>> from sfapprox.operators import MonarchOperator
    >>> rng = np.random.default_rng(0)
    >>> M = MonarchOperator(rng.standard_normal((4, 4, 4, 1)), rng.standard_normal((4, 1, 4, 4)), 16).to_dense()
    >>> X = M + np.outer(rng.standard_normal(16), rng.standard_normal(16))
    >>> fit = MonarchLowRank(budget=128 + 33).fit(X)
    >>> fit.params_["rank"], fit.n_stored_, bool(np.linalg.norm(X - fit.to_dense()) < 1e-6 * np.linalg.norm(X))
    (1, 161, True)
    """

    _method = "monarch+lr"

    _parameter_constraints = {
        # 0 as in every other method: refused by the fit in their words (below its smallest fit), not here
        "budget": Interval(int, 0, None),
        "max_splits": Interval(int, 0, len(LOW_RANK_SHARES)),
        "max_shapes": Interval(int, 1, None),
        "max_iter": Interval(int, 1, None),
        "tol": Interval(float, 0, None),
        "time_limit": Interval(float, 0, None, allow_none=True),
        "random_state": SEED,
        "max_memory": MEMORY_LIMIT,
        "callback": (Callable, None),
    }

    def __init__(
        self,
        *,
        budget: int | None = None,
        max_splits: int = 3,
        max_shapes: int = 2,
        max_iter: int = 1000,
        tol: float = 1e-6,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        random_state: int = DEFAULT_SEED,
        max_memory: int | str | None = None,
        callback: Callable[[dict], Any] | None = None,
    ):
        self.budget = budget
        self.max_splits = max_splits
        self.max_shapes = max_shapes
        self.max_iter = max_iter
        self.tol = tol
        self.time_limit = time_limit
        self.random_state = random_state
        self.max_memory = max_memory
        self.callback = callback

    def _grid(self, n: int) -> list[tuple[MonarchShape | None, int]]:
        """(shape, low rank) points: plain Monarch, the shares, then all to the low rank."""
        budget = int(self.budget)
        # Plain Monarch over monarch's own shapes (closed form, cheap): never worse than `monarch`.
        points = [(shape, 0) for shape in monarch_configs_for_budget(n, budget)]
        for share in LOW_RANK_SHARES[: self.max_splits]:
            k = tsvd_rank_for_budget(n, int(share * budget))
            if k >= 1:
                rest = budget - tsvd_count(n, k)
                points += [(shape, k) for shape in monarch_configs_for_budget(n, rest, self.max_shapes)]
        k_all = min(n, tsvd_rank_for_budget(n, budget))
        if k_all >= 1:
            points.append((None, k_all))
        # The closed-form points first (plain Monarch, TSVD), so a time limit never drops them.
        points.sort(key=lambda p: p[1] > 0 and p[0] is not None)
        if not points:
            # the cheaper of its two ends, as its row's smallest budget (monarch_lr_min_budget) says
            rank = tsvd_count(n, 1)
            smallest = "one rank" if rank <= monarch_lr_min_budget(n) else "a Monarch matrix of block rank 1"
            raise BudgetError(below_smallest(budget, n, smallest, monarch_lr_min_budget(n)))
        return list(dict.fromkeys(points))  # a split whose rank repeats another's adds nothing

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> MonarchLowRank:
        """Fit ``M + L`` to the square matrix ``X`` (dense or sparse).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square matrix; a :class:`~sfapprox.sources.MatrixSource` is formed
            first (refused above the memory limit).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        MonarchLowRank
            ``self``, fitted.

        Raises
        ------
        BudgetError
            When neither part fits the budget.
        ResourceError
            When its working memory exceeds ``max_memory``.
        """
        X = self._validate(X, check_input)
        n = X.shape[0]
        grid = self._grid(n)
        padded = max([n] + [shape.padded_n for shape, _ in grid if shape is not None])
        check_memory(WORKING_COPIES * 8 * padded * padded,
                     what=f"monarch+lr: {WORKING_COPIES} dense {padded:,} x {padded:,} working arrays", limit=self._max_memory_bytes)
        dense = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
        norm = float(np.linalg.norm(dense))
        start = time.perf_counter()
        deadline = _timing.Deadline.after(self.time_limit)
        best, tried, reason = None, [], None
        alternating = sum(1 for shape, k in grid if shape is not None and k > 0)
        last = None  # (shape, seconds) of the last Monarch projection: the next one's expected cost
        # Seconds of the low-rank point's truncated SVD (rank k_all, the largest): what an alternating
        # point's first low-rank step (a truncated SVD of the same order, rank k <= k_all) may cost.
        svd_seconds = 0.0
        report = Reporter(self.callback, max_iter=len(grid) - alternating + alternating * max(1, self.max_iter))
        try:
            for shape, k in grid:
                if best is not None and reproduces(best.fro_error, norm) and \
                        (0 if shape is None else shape.count) + tsvd_count(n, k) >= best.count:
                    continue  # X is reproduced: only a point storing fewer numbers could do as well
                # A point's least work: its projection (at the measured cost of the last one), and
                # for an alternating point one alternation after it.
                least = 0.0 if last is None or shape is None else projection_seconds(shape, *last)
                if shape is not None and k > 0:
                    least = least * (1.0 + ALTERNATION_PROJECTIONS) + svd_seconds
                if best is not None and not deadline.fits(least):
                    reason = "time_limit"
                    break
                share = deadline
                if deadline.end is not None and shape is not None and k > 0:
                    # Each alternating point gets an equal share of the time left (at least its least
                    # work: then the later ones are skipped), so all are tried.
                    share = _timing.Deadline.after(max(deadline.left() / alternating, least))
                    alternating -= 1
                report.at(point_stage(shape, k))
                began = _timing.now()
                point = _fit_point(dense, shape, k, max_iter=self.max_iter, tol=self.tol, deadline=share,
                                   seed=self.random_state, svd_seconds=svd_seconds,
                                   beat=None if best is None else best.fro_error, report=report)
                # (a closed-form point counts as one iteration; an alternating one reported its own)
                report(point.fro_error, steps=1 if shape is None or k == 0 else 0)
                cut = shape is not None and k == 0 and point.reason == "time_limit"
                if shape is not None and k == 0 and not cut:
                    last = (shape, _timing.now() - began)
                elif shape is None:
                    svd_seconds = _timing.now() - began
                tried.append({"blocks": None if shape is None else [shape.left_block, shape.right_block],
                              "monarch_rank": None if shape is None else shape.rank, "rank": point.k,
                              "count": point.count, "fro_error": point.fro_error, "iterations": point.iterations})
                # Smallest error; of points that reproduce X (errors round-off) the one storing fewest
                # numbers (the first exact one stored the whole budget: 256 numbers of a zero 16 x 16
                # matrix, where plain Monarch's 160 are as exact)
                if best is None or preferred(point.fro_error, point.count, best.fro_error, best.count, norm,
                                             tie=1e-12):
                    best = point
                if cut:  # its projection did not end within the limit: nor would the next points'
                    reason = "time_limit"
                    break
        except KeyboardInterrupt:
            if best is None:
                raise
            reason = "interrupted"
        self.seconds_ = time.perf_counter() - start
        if reason == "time_limit":
            warnings.warn(f"monarch+lr fitted {len(tried):,} of {counted(len(grid), 'grid point')} within time_limit="
                          f"{self.time_limit:g} s; increase it to try them all", ConvergenceWarning, stacklevel=user_stacklevel())
        U, s, Vt = best.low_rank
        self.operator_ = MonarchLowRankOperator(n, left=best.left, right=best.right, U=U, s=s, Vt=Vt)
        self.n_stored_ = self.operator_.n_stored
        exact = reproduces(best.fro_error, norm)
        # The chosen point's error as its fit computed it against X (a dense residual's norm, or the projection's
        # dropped singular values as Monarch keeps its own): a comparison takes it rather than a pass more
        self.fro_error_ = float(best.fro_error)
        self.rel_error_ = self.fro_error_ / norm if norm > 0 else None
        self.stop_reason_ = reason or ("exact" if exact else best.reason)
        shape = best.shape
        self.params_ = {
            "left_block": None if shape is None else shape.left_block,
            "right_block": None if shape is None else shape.right_block,
            "monarch_rank": None if shape is None else shape.rank,
            "rank": best.k,
            "count": self.n_stored_,
            "iterations": best.iterations,
            "exact": bool(exact),
            "points_tried": len(tried),
            "points": len(grid),
            "grid": tried,
        }
        if shape is not None and shape.padding_note(n):
            self.params_["note"] = shape.padding_note(n)
        return self


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> MonarchLowRank:
    # Its iterations are alternations, not L-BFGS steps: --iters is SF's, not this method's.
    return MonarchLowRank(**context.settings.apply_to(MonarchLowRank, exclude=("max_iter",), budget=budget,
                                                      callback=context.callback))


register(
    MethodSpec(
        name="monarch+lr",
        operators=("monarch+lr",),
        summary="Monarch plus low rank: alternating exact projections over a budget split "
                "(never worse than monarch or tsvd at the same budget)",
        stores="r·N′·(b₁ + b₂) + k·(2N + 1)",
        make=_make,
        min_budget=lambda n, context: monarch_lr_min_budget(n),
        order=62,
        label="Monarch + low rank",
    )
)
