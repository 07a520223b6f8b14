"""Truncated SVD: the best rank-r approximation (Eckart–Young) up to ``EXACT_MAX_N``, near it above, at a budget.

Stored numbers: ``r * (2N + 1)`` (U, V and the singular values).  Exact SVD
(LAPACK through numpy) up to ``EXACT_MAX_N``; above it a seeded randomized
SVD (Halko, Martinsson & Tropp 2011, with power iterations), which is
accurate for the leading singular triplets and costs ``O(N^2 r)``; under a
time limit a power iteration starts only when it still fits (LAPACK's SVD
is not cut).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._base import Approximation, MethodSpec, RunContext, register
from .. import _timing
from .._params import MEMORY_LIMIT, SEED, Interval, Options
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._threads import AdaptiveThreads
from .._validation import is_zero_matrix
from ..budget import paper_tsvd_rank, rank_within, tsvd_count, tsvd_rank_for_budget
from ..operators import HybridOperator
from ..sources import MatrixLike
from ._rank import carrying_rank, numerical_rank, round_off  # noqa: F401 - their names here since before (rpca, nmf import them)
from .rsvd import _passes, randomized_svd

__all__ = ["TruncatedSVD", "EXACT_MAX_N", "EXACT_TOL", "preferred", "reproduces", "round_off"]

#: Largest N for which the exact (full LAPACK) SVD is used with ``solver="auto"``.
EXACT_MAX_N = 2048
#: Dense ``N x N`` float64 arrays that exact SVD allocates beyond its input (LAPACK's gesdd: a copy
#: of the input, U, Vt and its workspace), peak RSS measured: 7.9 at N = 1,024 and 2,048.  Every
#: method that takes one counts it (tracemalloc, which sees only numpy's own arrays, had shown 2).
EXACT_SVD_ARRAYS = 8


#: Share of the rows of the randomized SVD's first product made first to price the rest of it and the final
#: projection (:func:`_priced_first_product`, for a caller that can give up); its rows are those of the whole
#: product, to round-off (BLAS may block them otherwise: 1e-14 apart at N = 5,000 in one case of twelve).
FIRST_ROWS = 1 / 8


#: Relative error at or below which a fit reproduces ``X`` (round-off of ``||X||_F``): every method's test
#: of an exact fit (RPCA's splits, NMF's starts, Monarch's shapes and points, the hierarchical
#: butterfly's orders, the hybrids' grid points), so that a matrix one method reproduces is reproduced
#: by the others' same measure.
EXACT_TOL = 1e-12


def reproduces(error: float | None, norm: float) -> bool:
    """Whether a fit's Frobenius ``error`` is round-off of ``||X||_F = norm`` (:data:`EXACT_TOL`)."""
    return error is not None and error <= EXACT_TOL * norm


def preferred(error: float, count: int, best_error: float | None, best_count: int, norm: float,
              tie: float = 0.0) -> bool:
    """Whether a fit of this ``error`` and stored ``count`` beats the best so far (``best_error`` None: none
    yet): the smaller error (smaller than ``best_error (1 - tie)``: a tie within ``tie`` keeps the earlier);
    of two that reproduce ``X`` (:func:`reproduces`), the fewer numbers (ties: the earlier), not round-off's
    draw — the first exact fit of a zero 16 x 16 matrix stored 256 numbers where another's 160 are as exact.

    Examples
    --------
    >>> preferred(0.5, 10, 0.6, 5, 1.0), preferred(1e-14, 10, 1e-15, 5, 1.0), preferred(1e-15, 4, 1e-14, 5, 1.0)
    (True, False, True)
    """
    if best_error is None:
        return True
    if reproduces(error, norm) and reproduces(best_error, norm):
        return count < best_count
    return error < best_error * (1.0 - tie)


def _exact_svd(X: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if np.array_equal(X, X.T):
        return _symmetric_svd(X, rank)
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    # Copies: a slice would keep the whole N x N U and Vt alive as long as the result is.
    return np.ascontiguousarray(U[:, :rank]), s[:rank].copy(), Vt[:rank].copy()


def _symmetric_svd(X: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top-``rank`` singular triplets of a symmetric ``X`` from its eigendecomposition: its singular
    values are its eigenvalues' magnitudes, ``u = v`` and ``vᵀ = sign(λ) vᵀ``, so the best rank-``r``
    approximation is the same (Eckart-Young), at 2.5x less time: LAPACK's SVD of a 2,000-point kernel
    took 11.8 s on one thread, ``eigh`` 4.7 s (kernels, graphs and meshes, most of what is compared,
    are symmetric; ``benchmarks/results/symmetric_svd.md``).  Ties in magnitude keep eigh's order.

    Examples
    --------
    >>> U, s, Vt = _symmetric_svd(np.diag([1.0, -3.0, 2.0]), 2)
    >>> s.tolist(), np.allclose(U * s @ Vt, np.diag([0.0, -3.0, 2.0]))
    ([3.0, 2.0], True)
    """
    w, V = np.linalg.eigh(X)
    top = np.argsort(-np.abs(w), kind="stable")[:rank]
    U = np.ascontiguousarray(V[:, top])
    return U, np.abs(w[top]), np.ascontiguousarray((U * np.where(w[top] < 0, -1.0, 1.0)).T)


def _priced_first_product(X, deadline: _timing.Deadline):
    """A first pass for :func:`~.rsvd._passes` (``give_up``): ``X @ omega`` by two row blocks, the first
    (:data:`FIRST_ROWS` of the rows, of the non-zeros where ``X`` is sparse) timed to price the rest
    and the final projection after it, a whole product; None, the rest not made, where they would not
    end by ``deadline`` (nor anything where it has passed)."""

    def first_pass(omega: np.ndarray):
        if deadline.passed():
            return None
        n = X.shape[0]
        m = max(1, int(n * FIRST_ROWS))
        began = _timing.now()
        top = X[:m] @ omega
        # the block's share of the product's work: its rows, or of a sparse X its non-zeros
        share = X.indptr[m] / max(1, X.nnz) if hasattr(X, "indptr") else m / n
        product = (_timing.now() - began) / max(share, 1.0 / n)
        if not deadline.fits((1.0 - share) * product + product):
            return None
        return np.vstack([top, X[m:] @ omega]), None, None

    return first_pass


def _randomized_svd_within(
    X, rank: int, n_oversamples: int, n_iter: int, seed: int, deadline: _timing.Deadline | None = None,
    give_up: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Randomized range finder + small exact SVD of ``X`` (dense or sparse), :func:`~.rsvd.randomized_svd`'s:
    its power iterations each start only when it and the final product still end before ``deadline`` (at
    the measured speed of the range finder's product); with the count that ran.  (At N = 4,096, rank 614,
    its 7 iterations took 36-38 s of a 2 s limit.)  ``give_up``: None where ``deadline`` cannot pay for the
    range finder's first product and the final projection, which no check cuts (:func:`_priced_first_product`)."""
    if give_up and deadline is not None and deadline.end is not None:
        found = _passes(lambda B: X @ B, lambda B: X.T @ B, X.shape[0], rank, n_oversamples=n_oversamples,
                        n_iter=n_iter, seed=seed, deadline=deadline, psd=False,
                        first_pass=_priced_first_product(X, deadline), give_up=True)
        return None if found is None else found[:4]
    return randomized_svd(lambda B: X @ B, lambda B: X.T @ B, X.shape[0], rank, n_oversamples=n_oversamples,
                          n_iter=n_iter, seed=seed, deadline=deadline)


def _truncated_svd(X, rank: int, *, exact: bool, n_oversamples: int = 10, n_iter: int = 7, seed: int = DEFAULT_SEED,
                   deadline: _timing.Deadline | None = None,
                   give_up: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Top-``rank`` singular triplets of ``X`` (dense or sparse) and the power iterations that ran: LAPACK's
    SVD where ``exact`` (a sparse ``X`` formed for it; 0 iterations), else :func:`_randomized_svd_within`'s
    (each power iteration only when it fits ``deadline``; ``give_up``: None where its two uncut products
    do not).  Rank 0 is no SVD: empty factors."""
    if rank == 0:
        n = X.shape[0]
        return np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)), 0
    if exact:
        return (*_exact_svd(X.toarray() if hasattr(X, "toarray") else X, rank), 0)
    return _randomized_svd_within(X, rank, n_oversamples, n_iter, seed, deadline, give_up)


def leading_svd(X, rank: int, seed: int, deadline: _timing.Deadline | None = None, *,
                n_iter: int = 7, give_up: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The start SVD of the methods that begin from TruncatedSVD's answer (NMF's NNDSVD, RPCA's largest
    rank, Monarch+LR's low-rank end), computed as ``solver="auto"`` computes it: exact up to
    :data:`EXACT_MAX_N`, randomized (10 extra columns, at most ``n_iter`` power iterations) above.

    Each power iteration starts only when it fits ``deadline``, as TruncatedSVD's do: all of them ran
    whatever the limit (at N = 8,192, nmf's 7 took 53 s of a 10 s limit, rpca's 65 s, monarch+lr's 4 39 s).
    The randomized SVD's range finder's first product ``X @ Omega`` and its final projection are not cut:
    with ``give_up`` (a caller with a cheaper start: NMF's random one) None is returned where
    ``deadline`` cannot pay for them, priced from the first product's first row block
    (:func:`_priced_first_product`) and then from the whole first product; without it they run.

    Returns
    -------
    U, s, Vt : numpy.ndarray, or None
        ``(N, rank)``, ``(rank,)``, ``(rank, N)``; None where ``give_up`` gave up.
    """
    found = _truncated_svd(X, rank, exact=X.shape[0] <= EXACT_MAX_N, n_iter=n_iter, seed=seed, deadline=deadline,
                           give_up=give_up)
    return None if found is None else found[:3]


class TruncatedSVD(Approximation):
    """Rank-``r`` approximation ``U diag(s) V^T``: the best one (LAPACK's SVD) up to ``EXACT_MAX_N``, a randomized
    SVD's, near it, above (``stop_reason_`` says which).

    Parameters
    ----------
    n_components : int or None, default=None
        Rank ``r`` (scikit-learn's name).  When None, the largest rank that fits ``budget``.
    budget : int or None, default=None
        Stored-number budget, ``r (2N + 1)``.  Sets the rank when ``n_components`` is None; with
        both, a rank over the budget is refused (:class:`~sfapprox.BudgetError`).
    solver : {"auto", "exact", "randomized"}, default="auto"
        ``auto``: exact for ``N <= EXACT_MAX_N``, randomized above.
    n_oversamples, n_iter : int, default=10, 7
        Randomized SVD's extra columns and power iterations.
    random_state : int, default=0
        Seed of the randomized SVD.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Seconds the randomized SVD may take: a power iteration that would not end within it (with
        the product after it) is skipped, and ``stop_reason_`` says ``"time_limit"``.  LAPACK's SVD
        (``solver="exact"``) is one step, not cut.
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes: a fit of a matrix in memory whose working arrays
        (several copies of it, measured) would be over it is refused before any
        work (ResourceError), as a comparison refuses its row (None: 80% of the
        physical memory).

    Attributes
    ----------
    operator_ : HybridOperator
        ``U diag(s) V^T`` as a LinearOperator, ``O(N r)`` per matvec.
    U_, s_, Vt_ : ndarray
    components_ : ndarray of shape (r, N)
        ``Vt_``, as scikit-learn names the right singular vectors.
    rank_, n_stored_ : int
        The rank kept and its stored numbers: below ``n_components`` (or the budget's rank) where the
        rest of the singular values are round-off (:func:`numerical_rank`; ``params_["rank_budget"]``
        then says the rank asked).
    seconds_ : float
    stop_reason_ : str
        ``"exact"`` (the best rank-r approximation, by LAPACK's SVD) or ``"closed_form"`` (the
        randomized SVD's, near it: ``solver="randomized"``, which ``"auto"`` takes above ``EXACT_MAX_N``),
        or ``"time_limit"`` (the randomized SVD with fewer power iterations, ``n_iter_``, than ``n_iter``).
    n_iter_ : int
        Power iterations that ran (0 for LAPACK's SVD).
    params_ : dict
        What was fitted (rank, solver), for reports.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.outer(np.arange(4.0), np.ones(4))
    >>> t = TruncatedSVD(n_components=1).fit(X)
    >>> t.n_stored_, bool(np.allclose(t.to_dense(), X))
    (9, True)
    """

    _method = "tsvd"
    _parameter_constraints = {
        "n_components": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "solver": Options(("auto", "exact", "randomized")),
        "n_oversamples": Interval(int, 0, None),
        "n_iter": Interval(int, 0, None),
        "random_state": SEED,
        "time_limit": Interval(float, 0, None, allow_none=True),
        "max_memory": MEMORY_LIMIT,
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        budget: int | None = None,
        solver: str = "auto",
        n_oversamples: int = 10,
        n_iter: int = 7,
        random_state: int = DEFAULT_SEED,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        max_memory: int | str | None = None,
        **renamed: Any,
    ):
        self.n_components = n_components
        self.budget = budget
        self.solver = solver
        self.max_memory = max_memory
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.random_state = random_state
        self.time_limit = time_limit
        self._take_renamed(renamed, {"rank": "n_components"})  # (its name until scikit-learn's was taken)

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "TruncatedSVD":
        """Compute the truncated SVD of the square matrix ``X`` (dense or sparse).

        ``check_input=False`` skips validating ``X`` (the caller did).

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
        TruncatedSVD
            ``self``, fitted.

        Raises
        ------
        ParameterError
            When neither ``n_components`` nor ``budget`` is given.
        """
        X = self._validate(X, check_input)
        n = X.shape[0]
        # the budget before the memory: a budget below one rank is said so whatever the limit
        rank = rank_within(n, self.n_components, self.budget, tsvd_rank_for_budget, tsvd_count, "TruncatedSVD",
                           zero=lambda: is_zero_matrix(X))  # the zero matrix: rank 0 within any budget
        X = self._within_limit(X)  # its working arrays over the limit: refused before any work
        solver = self.solver
        if solver == "auto":
            solver = "exact" if n <= EXACT_MAX_N else "randomized"
        start = time.perf_counter()
        deadline = _timing.Deadline.after(self.time_limit)
        done = 0
        # BLAS threads from the free cores, as rsvd's: on the default pool beside a busy process each
        # product waited for a descheduled thread (N = 4,096, rank 77 on 2 shared cores: 15-17 s, 1.6-3.4 s
        # on one thread), over a 10 s limit this closed form cannot be cut by
        with AdaptiveThreads(float(n) * n, torch=False):
            U, s, Vt, done = _truncated_svd(X, rank, exact=solver == "exact", n_oversamples=self.n_oversamples,
                                            n_iter=self.n_iter, seed=self.random_state, deadline=deadline)
        kept = numerical_rank(s, n)  # singular values at round-off carry nothing: not stored, not charged
        U, s, Vt = U[:, :kept], s[:kept], Vt[:kept]
        self.seconds_ = time.perf_counter() - start
        self.U_, self.s_, self.Vt_ = U, s, Vt
        self.components_ = Vt
        self.rank_ = kept
        self.n_stored_ = tsvd_count(n, kept)
        self.params_ = {"rank": kept, "solver": solver, **({"rank_budget": rank} if kept < rank else {})}
        # only LAPACK's SVD is the best rank-r approximation: the randomized one is near it (0.18 % above at
        # N = 3,000 on a flat spectrum), and was said "exact" too
        self.n_iter_ = done
        cut = solver == "randomized" and rank and done < self.n_iter
        self.stop_reason_ = "exact" if solver == "exact" else ("time_limit" if cut else "closed_form")
        if cut:
            self.params_["power_iterations"] = done
        self.operator_ = HybridOperator(n, low_rank=(U, s, Vt))
        return self

    def to_dense(self) -> np.ndarray:
        """The rank-``r`` approximation as a dense array.

        Returns
        -------
        numpy.ndarray
            ``(U_ * s_) @ Vt_``, of shape ``(N, N)``.
        """
        return (self.U_ * self.s_) @ self.Vt_


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> TruncatedSVD:
    if context.protocol == "paper":
        # The paper's rank ceil(M^2 / 2), which fits SF's reference budget; a smaller budget asked for
        # lowers it to the largest rank that fits (never over the budget).
        rank = min(paper_tsvd_rank(n), n, tsvd_rank_for_budget(n, budget))
        return TruncatedSVD(**context.settings.apply_to(TruncatedSVD, n_components=rank, budget=budget))
    return TruncatedSVD(**context.settings.apply_to(TruncatedSVD, budget=budget))


register(
    MethodSpec(
        name="tsvd",
        operators=("hybrid",),
        summary=f"truncated SVD (best rank r; above N = {EXACT_MAX_N:,} a randomized SVD, near it)",
        stores="r·(2N + 1)",
        make=_make,
        min_budget=lambda n, context: tsvd_count(n, 1),
        order=20,
        label="low rank (TSVD)",
        iterative=False,
        # X, and up to EXACT_MAX_N the exact SVD's copy, factors and workspace (peak RSS: X + 7.9 N^2
        # at N = 2,048: X is not among the EXACT_SVD_ARRAYS); above, the randomized SVD's N x r blocks
        # (X + 0.4 N^2 at N = 3,000)
        working_memory=lambda n: (1 + EXACT_SVD_ARRAYS if n <= EXACT_MAX_N else 3) * 8 * n * n,
    )
)
