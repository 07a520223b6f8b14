"""Randomized SVD from products alone: the low-rank surrogate of a matrix too big to form.

Halko, Martinsson & Tropp (2011): a range finder ``Q = orth(X Ω)`` from a
Gaussian sketch, ``q`` power iterations ``Q <- orth(X orth(X^T Q))``, then the
exact SVD of the small ``B = Q^T X``.  Every product with ``X`` is one pass
over its column blocks (:class:`~sfapprox.sources.MatrixSource`), so the
matrix is never formed: ``2 + 2q`` passes and ``O(N (r + p))`` memory.
Stored numbers: ``r (2N + 1)``, as TSVD's.  Under a time limit a power
iteration runs only when the passes measured so far say it fits, keeping
the final ``B`` pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._errors import BudgetError, ParameterError
from .._params import Interval
from .._settings import DEFAULT_TIME_LIMIT
from .._threads import AdaptiveThreads
from ..budget import tsvd_count, tsvd_rank_for_budget
from ..operators import HybridOperator
from ..sources import as_source

__all__ = ["RandomizedSVD", "randomized_svd"]


def randomized_svd(
    apply: Callable[[np.ndarray], np.ndarray],
    apply_t: Callable[[np.ndarray], np.ndarray],
    n: int,
    rank: int,
    *,
    n_oversamples: int = 10,
    n_iter: int = 2,
    seed: int = 0,
    deadline: _timing.Deadline | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``U, s, Vt`` of rank ``rank`` from ``apply(B) = X @ B`` and ``apply_t(B) = X.T @ B``.

    Returns the factors and the power iterations that ran (fewer than
    ``n_iter`` when ``deadline`` did not leave time for the next one).

    Parameters
    ----------
    apply : callable
        ``apply(B) = X @ B`` for an ``(n, k)`` block.
    apply_t : callable
        ``apply_t(B) = X.T @ B``.
    n : int
        Order of ``X``.
    rank : int
        Rank ``r`` of the result.
    n_oversamples : int, default=10
        Extra sketch columns ``p``.
    n_iter : int, default=2
        Power iterations ``q``.
    seed : int, default=0
        Seed of the Gaussian sketch.
    deadline : Deadline, optional
        A power iteration starts only when it and the final pass fit before it.

    Returns
    -------
    U : numpy.ndarray, shape (n, r)
    s : numpy.ndarray, shape (r,)
    Vt : numpy.ndarray, shape (r, n)
    iterations : int
        Power iterations that ran.

    Examples
    --------
    >>> X = np.outer(np.arange(1.0, 5.0), np.ones(4))
    >>> U, s, Vt, _ = randomized_svd(lambda B: X @ B, lambda B: X.T @ B, 4, 1)
    >>> bool(np.allclose((U * s) @ Vt, X))
    True
    """
    width = min(n, rank + n_oversamples)
    rng = np.random.default_rng(seed)
    started = _timing.now()
    Q, _ = np.linalg.qr(apply(rng.standard_normal((n, width))))
    per_pass = _timing.now() - started
    done = 0
    for _ in range(n_iter):
        # Two passes for an iteration, one more for B after it: start it only when all fit.
        if deadline is not None and not deadline.fits(3 * per_pass):
            break
        # Re-orthonormalise after every product, so the smaller directions survive round-off.
        Q, _ = np.linalg.qr(apply_t(Q))
        Q, _ = np.linalg.qr(apply(Q))
        done += 1
    B = np.asarray(apply_t(Q)).T
    Ub, s, Vt = np.linalg.svd(B, full_matrices=False)
    return (Q @ Ub)[:, :rank], s[:rank], Vt[:rank], done


class RandomizedSVD(Approximation):
    """Rank-``r`` randomized SVD of a matrix or a :class:`~sfapprox.sources.MatrixSource`, from products only.

    Parameters
    ----------
    n_components : int or None, default=None
        Rank ``r``; None: the largest that fits ``budget``.
    budget : int or None, default=None
        Stored-number budget, ``r (2N + 1)`` (used when ``n_components`` is None).
    n_oversamples : int, default=10
        Extra sketch columns ``p``.
    n_iter : int, default=2
        Power iterations ``q`` (each two passes over ``X``).
    random_state : int, default=0
        Seed of the Gaussian sketch.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Seconds the fit may take; power iterations that would not fit are skipped.

    Attributes
    ----------
    U_, s_, Vt_ : ndarray
        The factors; ``operator_`` their product (a :class:`~sfapprox.operators.HybridOperator`).
    n_iter_ : int
        Power iterations that ran.

    Examples
    --------
    >>> from sfapprox.sources import KernelMatrix
    >>> K = KernelMatrix(np.random.default_rng(0).standard_normal((300, 2)))
    >>> est = RandomizedSVD(n_components=10).fit(K)
    >>> est.n_stored_, est.params_["passes"]
    (6010, 6)
    """

    _method = "rsvd"
    _accepts_sources = True
    _parameter_constraints = {
        "n_components": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "n_oversamples": Interval(int, 0, None),
        "n_iter": Interval(int, 0, None),
        "random_state": Interval(int, 0, None),
        "time_limit": Interval(float, 0, None, allow_none=True),
    }

    def __init__(self, n_components: int | None = None, *, budget: int | None = None, n_oversamples: int = 10,
                 n_iter: int = 2, random_state: int = 0, time_limit: float | None = DEFAULT_TIME_LIMIT):
        self.n_components = n_components
        self.budget = budget
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.random_state = random_state
        self.time_limit = time_limit

    def fit(self, X, *, check_input: bool = True) -> "RandomizedSVD":
        """Fit the factors to ``X`` (dense, sparse or a source) from products with it.

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix, LinearOperator or MatrixSource, shape (N, N)
            The square matrix, used through products only (never formed).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        RandomizedSVD
            ``self``, fitted.

        Raises
        ------
        ParameterError
            When neither ``n_components`` nor ``budget`` is given.
        BudgetError
            When the budget is below one rank (``2N + 1`` numbers).
        """
        start = time.perf_counter()
        source = as_source(self._validate(X, check_input))
        n = source.n
        if self.n_components is None and self.budget is None:
            raise ParameterError("RandomizedSVD needs n_components (the rank) or a budget")
        rank = tsvd_rank_for_budget(n, self.budget) if self.n_components is None else min(self.n_components, n)
        if rank == 0:
            raise BudgetError(f"budget {self.budget} is below one rank of a {n} x {n} randomized SVD "
                              f"({tsvd_count(n, 1)} numbers)")
        deadline = _timing.Deadline.after(self.time_limit)
        # BLAS threads from the free cores: a second thread on a busy core made a QR 100x slower.
        with AdaptiveThreads(float(n) * n):
            U, s, Vt, done = randomized_svd(source.matmat, source.rmatmat, n, rank, n_oversamples=self.n_oversamples,
                                            n_iter=self.n_iter, seed=self.random_state, deadline=deadline)
        self.U_, self.s_, self.Vt_, self.n_iter_ = U, s, Vt, done
        self.rank_ = rank
        self.n_stored_ = tsvd_count(n, rank)
        self.stop_reason_ = "closed_form" if done == self.n_iter else "time_limit"
        self.params_ = {"rank": rank, "power_iterations": done, "passes": 2 + 2 * done}
        self.operator_ = HybridOperator(n, low_rank=(U, s, Vt))
        self.seconds_ = time.perf_counter() - start
        return self


def _make(n: int, budget: int, context: RunContext) -> RandomizedSVD:
    return RandomizedSVD(**context.settings.apply_to(RandomizedSVD, exclude=("max_iter",), budget=budget))


register(
    MethodSpec(
        name="rsvd",
        summary="randomized SVD from products with X (works on matrices too big to form)",
        stores="r·(2N + 1)",
        make=_make,
        min_budget=lambda n, context: tsvd_count(n, 1),
        order=21,
        label="low rank (randomized SVD)",
        iterative=False,
        access=("dense", "columns"),
    )
)
