"""Nyström approximation of a symmetric PSD matrix (kernel matrices above all), from a few of its columns.

``A = C W^+ C^T`` with ``C = X[:, S]`` the columns at ``r`` pivots ``S`` and
``W = X[S, S]``: the SF paper's named low-rank alternative for kernels, and the
only surrogate here that reads ``O(N r)`` entries instead of all ``N^2``.
Stored numbers ``r (N + r)`` (:func:`sfapprox.budget.nystrom_count`): the
pivots' columns and the ``r x r`` core — positions of the pivots are implied
by the columns kept.

Pivots (``pivots=``):

``"rpcholesky"`` (default)
    Randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2023, *Randomly
    pivoted Cholesky: practical approximation of a kernel matrix with few
    entry evaluations*): each pivot is drawn with probability proportional to
    the diagonal of the current residual, which is then updated; near-optimal
    error with ``r`` column evaluations.  Blocks of pivots are drawn at once
    (each block one ``X[:, S]`` call and a small eigendecomposition).
``"uniform"``
    ``r`` distinct pivots drawn uniformly (the classic Nyström method).

Only symmetric positive semi-definite matrices qualify: a source that says
it is not symmetric (or not PSD), a diagonal with negative entries, an array
whose sampled entries are not symmetric, or pivots whose core or residual
diagonal shows a negative direction (:func:`check_psd_fit`) give "not
applicable"; so does a residual whose diagonal is spent while its sampled
columns are not (:func:`check_spent_residual`: a zero-diagonal graph, whose
Nyström surrogate would be 0 and called exact).
"""

from __future__ import annotations

import time

import numpy as np

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._errors import NotApplicableError
from ..formats import counted
from .._params import MEMORY_LIMIT, SEED, Interval, Options
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._threads import AdaptiveThreads
from .._validation import is_zero_matrix
from ..budget import nystrom_count, nystrom_rank_for_budget, rank_within
from ..operators.nystrom import NystromOperator
from ..sources import MatrixLike, MatrixSource, as_source

__all__ = ["Nystrom", "rpcholesky_pivots", "pinvh", "nystrom_factor", "check_psd_fit", "check_spent_residual"]

#: Pivots drawn per block of randomly pivoted Cholesky (a share of the rank, at least one).
BLOCK_SHARE = 0.1
#: Entry pairs compared to decide that a matrix of unknown structure is symmetric.
SYMMETRY_PAIRS = 512
#: Relative tolerance of the symmetry check and of the PSD checks (diagonal, core, residual diagonal).
STRUCTURE_RTOL = 1e-8
#: Randomly pivoted Cholesky stops where the residual's trace is below this share of the diagonal's:
#: what is left is round-off (an exactly low-rank kernel drew pivots from it, each charged r + N numbers
#: and adding nothing), and ``||R||_F <= tr(R)`` bounds the error that stopping leaves.
RESIDUAL_RTOL = 1e-12
#: Columns of the residual read to confirm it is zero where the pivots stopped before the rank with its
#: diagonal spent: a PSD residual of zero diagonal is zero, an indefinite one need not be.
SPENT_CHECK_COLUMNS = 64
#: Advice of every "not positive semi-definite" refusal.
NOT_PSD_ADVICE = "Nyström needs a positive semi-definite (kernel) matrix; use rsvd or tsvd for this one"


def pinvh(W: np.ndarray, rcond: float = 1e-12) -> np.ndarray:
    """Pseudo-inverse of a symmetric matrix by its eigendecomposition (eigenvalues below ``rcond`` times the
    largest dropped).

    Parameters
    ----------
    W : numpy.ndarray, shape (r, r)
        A symmetric matrix (its symmetric part ``(W + W.T) / 2`` is used).
    rcond : float, default=1e-12
        Relative cut-off for the eigenvalues.

    Returns
    -------
    numpy.ndarray, shape (r, r)

    Examples
    --------
    >>> pinvh(np.diag([2.0, 0.0])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    values, vectors = np.linalg.eigh((W + W.T) / 2)
    keep = values > rcond * max(float(np.abs(values).max(initial=0.0)), 1e-300)
    return (vectors[:, keep] / values[keep]) @ vectors[:, keep].T


def nystrom_factor(C: np.ndarray, S: np.ndarray) -> np.ndarray | None:
    """``F`` with ``F F^T = C (W + s I)^-1 C^T``, ``W = C[S]`` the pivots' block, ``s = eps trace(W)``:
    ``F = C L^-T`` for the Cholesky factor ``L`` of the shifted block (the stable form of Chen, Epperly,
    Tropp & Webber's randomly pivoted Cholesky).  None where even the shifted block has no Cholesky
    factor (the caller keeps ``C W^+ C^T``).

    ``C @ pinvh(W) @ C.T`` lost accuracy as the rank grew: on an RBF kernel of 1,500 points the
    relative error went from 2.5e-07 at rank 159 to 2.1e-06 at 229 and 1.1e-05 at 300, where this form
    gives 2.4e-07, 4.4e-09 and 9.2e-11 (an inverse of ``W`` formed explicitly, shifted or not, does as
    badly: the cancellation is in ``C W^-1 C^T``, not in the inverse).

    Parameters
    ----------
    C : numpy.ndarray, shape (n, r)
        The matrix's columns at the pivots.
    S : numpy.ndarray of int, shape (r,)
        The pivots.

    Returns
    -------
    numpy.ndarray of shape (n, r), or None

    Examples
    --------
    >>> X = np.array([[2.0, 1.0], [1.0, 1.0]])
    >>> F = nystrom_factor(X[:, [0]], np.array([0]))
    >>> np.round(F @ F.T, 12).tolist()
    [[2.0, 1.0], [1.0, 0.5]]
    """
    import scipy.linalg

    W = (C[S] + C[S].T) / 2
    shift = np.finfo(np.float64).eps * max(float(np.trace(W)), 0.0)
    try:
        L = np.linalg.cholesky(W + shift * np.eye(W.shape[0]))
    except np.linalg.LinAlgError:
        return None
    return scipy.linalg.solve_triangular(L, C.T, lower=True, check_finite=False).T


def rpcholesky_pivots(source: MatrixSource, rank: int, *, seed: int = DEFAULT_SEED, block: int | None = None,
                      deadline: _timing.Deadline | None = None, diagonal: np.ndarray | None = None) -> np.ndarray:
    """``rank`` pivots by (block) randomly pivoted Cholesky; fewer when the residual vanishes or time runs out.

    Parameters
    ----------
    source : MatrixSource
        A symmetric PSD matrix (its diagonal and the pivots' columns are read).
    rank : int
        Pivots wanted.
    seed : int, default=0
        Seed of the draws.
    block : int, optional
        Pivots drawn per step; None: ``ceil(BLOCK_SHARE * rank)``.
    deadline : Deadline, optional
        A step starts only when it fits, at the cost per column measured so far.
    diagonal : numpy.ndarray, optional
        ``source``'s diagonal when already read (a source without a rule of its
        own reads it by a pass over its columns); None: read here.

    Returns
    -------
    numpy.ndarray of int64
        The pivots, in the order drawn.

    Examples
    --------
    >>> from sfapprox.sources import ArraySource
    >>> X = np.diag([4.0, 0.0, 1.0])
    >>> sorted(rpcholesky_pivots(ArraySource(X), 2).tolist())  # the zero diagonal is never drawn
    [0, 2]
    """
    return _rpcholesky(source, rank, seed=seed, block=block, deadline=deadline, diagonal=diagonal)[0]


def _rpcholesky(source: MatrixSource, rank: int, *, seed: int, block: int | None,
                deadline: _timing.Deadline | None, diagonal: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """:func:`rpcholesky_pivots` and whether it stopped on a spent residual (else the rank or the time limit)."""
    rng = np.random.default_rng(seed)
    n = source.n
    block = block or max(1, int(np.ceil(BLOCK_SHARE * rank)))
    residual = np.maximum(source.diagonal() if diagonal is None else diagonal, 0.0)
    floor = RESIDUAL_RTOL * float(residual.sum())
    factor = np.zeros((n, 0))
    chosen: list[int] = []
    per_column = None
    while len(chosen) < rank and residual.sum() > floor:
        want = min(block, rank - len(chosen))
        if deadline is not None and per_column is not None and not deadline.fits(per_column * want):
            break
        started = _timing.now()
        draws = rng.choice(n, size=want, p=residual / residual.sum())
        picked = np.array([i for i in dict.fromkeys(draws.tolist()) if i not in set(chosen)], dtype=np.int64)
        if picked.size == 0:
            continue
        G = source.columns(picked) - factor @ factor[picked].T
        core = (G[picked] + G[picked].T) / 2
        # Only the pivots whose residual directions are independent are kept (and charged): a block's
        # pivot its other pivots already span adds nothing to the surrogate.
        own = _independent(core)
        residual[picked] = 0.0  # (the others are spanned: never drawn again)
        if own.size:
            values, vectors = np.linalg.eigh(core[np.ix_(own, own)])
            keep = values > STRUCTURE_RTOL * max(float(values.max(initial=0.0)), 1e-300)
            new = G[:, own] @ (vectors[:, keep] / np.sqrt(values[keep]))
            factor = np.hstack([factor, new])
            residual = np.maximum(residual - np.einsum("ij,ij->i", new, new), 0.0)
            residual[picked] = 0.0
            chosen.extend(picked[own].tolist())
        per_column = (_timing.now() - started) / picked.size
    return np.array(chosen, dtype=np.int64), len(chosen) < rank and residual.sum() <= floor


def _independent(core: np.ndarray) -> np.ndarray:
    """Indices (ascending) of a largest set of ``core``'s pivots with independent directions: greedy
    pivoted Cholesky of the PSD block, stopping where the largest remaining diagonal is below
    :data:`STRUCTURE_RTOL` of the block's largest (all of them for a well-conditioned block).

    Examples
    --------
    >>> _independent(np.ones((3, 3))).tolist(), _independent(np.diag([2.0, 0.0, 1.0])).tolist()
    ([0], [0, 2])
    """
    A = core.copy()
    d = np.diag(A).copy()
    top = float(d.max(initial=0.0))
    own: list[int] = []
    while len(own) < d.size and top > 0:
        i = int(np.argmax(d))
        if d[i] <= STRUCTURE_RTOL * top:
            break
        own.append(i)
        column = A[:, i] / np.sqrt(d[i])
        A -= np.outer(column, column)
        d = np.diag(A).copy()
        d[own] = -np.inf
    return np.sort(np.asarray(own, dtype=np.int64))


def _check_structure(source: MatrixSource, seed: int) -> np.ndarray:
    """NotApplicableError unless ``source`` is (as far as can be told cheaply) symmetric PSD; its diagonal."""
    if source.symmetric is False:
        raise NotApplicableError(f"{source.name} is not symmetric; Nyström needs a symmetric PSD matrix "
                                 "(a kernel, a covariance)")
    if source.symmetric is None:
        rng = np.random.default_rng(seed)
        i, j = rng.integers(0, source.n, SYMMETRY_PAIRS), rng.integers(0, source.n, SYMMETRY_PAIRS)
        a, b = source.entries(i, j), source.entries(j, i)
        if not np.allclose(a, b, rtol=STRUCTURE_RTOL, atol=STRUCTURE_RTOL * float(np.abs(a).max(initial=0.0))):
            raise NotApplicableError(f"{source.name} is not symmetric; Nyström needs a symmetric PSD matrix "
                                     "(a kernel, a covariance)")
    if source.psd is False:
        raise NotApplicableError(f"{source.name} is not positive semi-definite (its source says so); {NOT_PSD_ADVICE}")
    diagonal = source.diagonal()
    if diagonal.min(initial=0.0) < -STRUCTURE_RTOL * max(float(np.abs(diagonal).max(initial=0.0)), 1e-300):
        raise NotApplicableError(f"{source.name} has negative diagonal entries (min {diagonal.min():.3g}), so it is "
                                 f"not positive semi-definite; {NOT_PSD_ADVICE}")
    return diagonal


def residual_diagonal(diagonal: np.ndarray, C: np.ndarray, S: np.ndarray, F: np.ndarray | None) -> np.ndarray:
    """The diagonal of ``X - C W^+ C^T`` (``X - F F^T`` where the factor ``F`` exists), from ``X``'s diagonal.

    Examples
    --------
    >>> X = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> residual_diagonal(np.diag(X), X[:, [0]], np.array([0]), None).tolist()
    [0.0, 1.5]
    """
    parts = _surrogate_parts(C, S, F)
    if parts is None:
        return diagonal.astype(float, copy=True)
    A, B = parts
    return diagonal - np.einsum("ij,ij->i", A, B)


def _surrogate_parts(C: np.ndarray, S: np.ndarray, F: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """``(A, B)`` with ``A B^T`` the surrogate: ``(F, F)``, else ``(C W^+, C)``; None for no pivots (0)."""
    if F is not None:
        return F, F
    if S.size == 0:
        return None
    return C @ pinvh((C[S] + C[S].T) / 2), C


def check_psd_fit(name: str, diagonal: np.ndarray, C: np.ndarray, S: np.ndarray, F: np.ndarray | None) -> None:
    """NotApplicableError where the pivots' columns show that the matrix is not positive semi-definite.

    For a PSD ``X`` the core ``W = X[S, S]`` is PSD, and so is the residual
    ``X - C W^+ C^T`` (a Schur complement), whose diagonal is therefore
    non-negative; an indefinite ``X`` whose pivots meet a negative direction
    breaks one of the two, and its Nyström surrogate can be worse than zero
    (relative errors 1.3-5.3 were reported "ok").  Both are read off what the
    fit has already computed: the diagonal, the columns ``C`` and the factor
    ``F`` (or, where the shifted core had no Cholesky factor, the core's
    eigenvalues), so the check costs no pass.  The tolerance is
    :data:`STRUCTURE_RTOL` of the largest diagonal entry (which bounds every
    entry of a PSD matrix): on RBF kernels of 300-2,000 points, nearly
    singular ones included, the core's eigenvalues and the residual diagonal
    stayed above ``-1e-15`` of it.

    Parameters
    ----------
    name : str
        The matrix's name, for the message.
    diagonal : numpy.ndarray, shape (N,)
        ``X``'s diagonal.
    C : numpy.ndarray, shape (N, r)
        ``X``'s columns at the pivots.
    S : numpy.ndarray of int, shape (r,)
        The pivots.
    F : numpy.ndarray of shape (N, r), or None
        :func:`nystrom_factor`'s factor; None where it had none.

    Raises
    ------
    NotApplicableError
        Naming the negative number found and what to use instead.

    Examples
    --------
    >>> X = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    >>> check_psd_fit("X", np.diag(X), X[:, [0]], np.array([0]), nystrom_factor(X[:, [0]], np.array([0])))
    Traceback (most recent call last):
    ...
    sfapprox._errors.NotApplicableError: X is not positive semi-definite: ...
    """
    if S.size == 0:
        return
    scale = max(float(np.abs(diagonal).max(initial=0.0)), 1e-300)
    if F is None:  # the shifted core has no Cholesky factor: a negative eigenvalue, round-off or not
        low = float(np.linalg.eigvalsh((C[S] + C[S].T) / 2)[0])
        if low < -STRUCTURE_RTOL * scale:
            raise NotApplicableError(f"{name} is not positive semi-definite: its {S.size:,} x {S.size:,} block at the "
                                     f"pivots has eigenvalue {low:.3g} (largest diagonal entry {scale:.3g}); "
                                     f"{NOT_PSD_ADVICE}")
    residual = residual_diagonal(diagonal, C, S, F)
    worst = int(np.argmin(residual))
    if residual[worst] < -STRUCTURE_RTOL * scale:
        raise NotApplicableError(f"{name} is not positive semi-definite: after {counted(S.size, 'pivot')} the residual "
                                 f"X - C W⁺ Cᵀ has diagonal entry {residual[worst]:.3g} at row {worst} (never below "
                                 f"0 for a PSD matrix; largest diagonal entry {scale:.3g}); {NOT_PSD_ADVICE}")


def check_spent_residual(source: MatrixSource, diagonal: np.ndarray, C: np.ndarray, S: np.ndarray,
                         F: np.ndarray | None, *, seed: int = DEFAULT_SEED) -> None:
    """NotApplicableError unless the residual of pivots that stopped with its diagonal spent is zero.

    Randomly pivoted Cholesky stops before the rank where the residual's diagonal
    is (nearly) zero, and the surrogate is then called exact: true for a PSD
    ``X``, whose residual obeys ``|R_ij| <= sqrt(R_ii R_jj)``, not for an
    indefinite one (a graph's adjacency matrix has a zero diagonal: no pivot is
    ever drawn, the surrogate is 0).  Up to :data:`SPENT_CHECK_COLUMNS` columns of
    the residual, drawn among the non-pivots, are read and held to that bound.

    Parameters
    ----------
    source : MatrixSource
        The matrix (its columns are read).
    diagonal : numpy.ndarray, shape (N,)
        ``X``'s diagonal.
    C, S, F
        The pivots' columns, the pivots and the factor, as :func:`check_psd_fit` takes them.
    seed : int
        Seed of the columns drawn.

    Raises
    ------
    NotApplicableError
        When a residual entry exceeds the bound: ``X`` is not positive semi-definite.

    Examples
    --------
    >>> from sfapprox.sources import ArraySource
    >>> ring = np.roll(np.eye(4), 1, axis=1) + np.roll(np.eye(4), -1, axis=1)  # zero diagonal
    >>> check_spent_residual(ArraySource(ring), np.zeros(4), np.zeros((4, 0)), np.zeros(0, int), None)
    Traceback (most recent call last):
    ...
    sfapprox._errors.NotApplicableError: X is not positive semi-definite: ...
    """
    n = diagonal.size
    others = np.setdiff1d(np.arange(n), S)
    if others.size == 0:
        return
    rng = np.random.default_rng(seed)
    J = np.sort(rng.choice(others, size=min(others.size, SPENT_CHECK_COLUMNS), replace=False))
    R, left = source.columns(J), diagonal.astype(float, copy=True)
    parts = _surrogate_parts(C, S, F)  # (the core's pseudo-inverse once, for the columns and the diagonal)
    if parts is not None:
        A, B = parts
        R, left = R - A @ B[J].T, left - np.einsum("ij,ij->i", A, B)
    left = np.maximum(left, 0.0)
    scale = max(float(np.abs(diagonal).max(initial=0.0)), 1e-300)
    excess = np.abs(R) - np.sqrt(np.outer(left, left[J])) * (1 + STRUCTURE_RTOL) - STRUCTURE_RTOL * scale
    if excess.max(initial=0.0) > 0:
        i, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
        where = (f"its diagonal is zero but its entry ({int(i)}, {int(J[j])}) is {R[i, j]:.3g} (a PSD matrix's "
                 "would be zero too: a graph without self-loops is never PSD)" if S.size == 0 else
                 f"after {counted(S.size, 'pivot')} the residual's diagonal is spent but its entry "
                 f"({int(i)}, {int(J[j])}) is {R[i, j]:.3g} (zero for a PSD matrix)")
        raise NotApplicableError(f"{source.name} is not positive semi-definite: {where}; {NOT_PSD_ADVICE}")


class Nystrom(Approximation):
    """Nyström approximation ``C W^+ C^T`` of a symmetric PSD matrix at ``r`` pivots.

    Parameters
    ----------
    n_components : int or None, default=None
        Rank ``r`` (the pivots; 0 gives the zero matrix, as in
        :class:`~sfapprox.TruncatedSVD`); None: the largest that fits ``budget``.
    budget : int or None, default=None
        Stored-number budget, ``r (N + r)``.  Sets the rank when ``n_components`` is None; with
        both, a rank over the budget is refused (:class:`~sfapprox.BudgetError`).
    pivots : {"rpcholesky", "uniform"}, default="rpcholesky"
        How the pivots are drawn: randomly pivoted Cholesky
        (:func:`rpcholesky_pivots`) or uniformly, without replacement.
    random_state : int, default=0
        Seed of the pivots' draws (and of the symmetry check's sample).
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Seconds the pivot search may take (fewer pivots when it runs out).
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes of a fit from a :class:`~sfapprox.sources.MatrixSource`'s
        columns: one that would keep more than it beside its passes' blocks is refused
        before any pass, and the passes are sized for it (None: the source's own
        limit, else 80% of the physical memory).

    Attributes
    ----------
    pivots_ : ndarray of int
    operator_ : NystromOperator

    Examples
    --------
    >>> from sfapprox.sources import KernelMatrix
    >>> K = KernelMatrix(np.random.default_rng(0).standard_normal((200, 2)))
    >>> est = Nystrom(n_components=20).fit(K)
    >>> est.n_stored_, est.rank_
    (4400, 20)
    """

    _method = "nystrom"
    _accepts_sources = True
    _parameter_constraints = {
        "n_components": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "pivots": Options(("rpcholesky", "uniform")),
        "random_state": SEED,
        "time_limit": Interval(float, 0, None, allow_none=True),
        "max_memory": MEMORY_LIMIT,
    }

    def __init__(self, n_components: int | None = None, *, budget: int | None = None, pivots: str = "rpcholesky",
                 random_state: int = DEFAULT_SEED, time_limit: float | None = DEFAULT_TIME_LIMIT,
                 max_memory: int | str | None = None):
        self.n_components = n_components
        self.budget = budget
        self.pivots = pivots
        self.random_state = random_state
        self.time_limit = time_limit
        self.max_memory = max_memory

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "Nystrom":
        """Choose the pivots and form ``C`` and the core from ``X``'s columns (dense, sparse or a source).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix, LinearOperator or MatrixSource, shape (N, N)
            A symmetric positive semi-definite matrix, read by its columns (never
            formed).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        Nystrom
            ``self``, fitted.

        Raises
        ------
        ParameterError
            When neither ``n_components`` nor ``budget`` is given.
        BudgetError
            When the budget (with no ``n_components``) is below one pivot, for a matrix
            Nyström applies to.
        NotApplicableError
            When ``X`` is not symmetric, has a negative diagonal entry, or its
            pivots show it is not positive semi-definite (:func:`check_psd_fit`);
            the first two whatever the budget (checked before it).
        """
        start = time.perf_counter()
        given = self._validate(X, check_input)
        name = self.__dict__.get("_matrix_name", "X")  # a comparison's matrix named in the refusals
        source = as_source(given, name)
        n = source.n
        deadline = _timing.Deadline.after(self.time_limit)  # (its diagonal's read counts, as it always did)
        # Whether Nyström applies at all before whether the budget holds a pivot: a matrix it cannot
        # approximate is refused for that at every budget (a sweep over a non-symmetric one said "below one
        # Nyström pivot" at its small budgets and "not symmetric" at the others). Without a rank or a
        # budget, rank_within's parameter error comes first, whatever the matrix.
        asked = self.n_components is not None or self.budget is not None
        diagonal = _check_structure(source, self.random_state) if asked else None
        # (n_components=0 is the zero matrix, as in TruncatedSVD)
        rank = rank_within(n, self.n_components, self.budget, nystrom_rank_for_budget, nystrom_count, "Nystrom",
                           what="Nyström pivot", zero=lambda: is_zero_matrix(given))
        source = as_source(self._from_columns(given, nystrom_count(n, rank)), name)
        with AdaptiveThreads(float(n) * rank, torch=False):  # BLAS threads from the free cores (numpy alone)
            if self.pivots == "uniform":
                S, spent = np.sort(np.random.default_rng(self.random_state).choice(n, size=rank, replace=False)), False
            else:
                S, spent = _rpcholesky(source, rank, seed=self.random_state, block=None, deadline=deadline,
                                       diagonal=diagonal)
            C = source.columns(S) if S.size else np.zeros((n, 0))
            F = nystrom_factor(C, S) if S.size else None
            # Checked here, on the final columns, not in the pivots' loop: the loop's residual comes from its
            # eigenvalue-truncated blocks and fell to -5e-8 of the diagonal on PSD kernels (this one: -1e-15).
            if source.psd is not True:  # a kernel or a covariance is PSD by construction
                check_psd_fit(source.name, diagonal, C, S, F)
            if spent and source.psd is not True:  # about to be called exact: only a PSD residual of zero diagonal is 0
                check_spent_residual(source, diagonal, C, S, F, seed=self.random_state)
            # F F^T, the stable form, stored as C = F with the identity as core; else C W^+ C^T
            C, core = (F, np.eye(S.size)) if F is not None else (C, pinvh(C[S]) if S.size else np.zeros((0, 0)))
        self.pivots_, self.rank_ = S, int(S.size)
        self.operator_ = NystromOperator(C, core)
        self.n_stored_ = self.operator_.n_stored
        self.stop_reason_ = "closed_form" if S.size == rank else ("exact" if spent else "time_limit")
        self.params_ = {"rank": int(S.size), "pivots": self.pivots, "rank_budget": rank}
        self.seconds_ = time.perf_counter() - start
        return self


def _make(n: int, budget: int, context: RunContext) -> Nystrom:
    return Nystrom(**context.settings.apply_to(Nystrom, exclude=("max_iter",), budget=budget))


register(
    MethodSpec(
        name="nystrom",
        operators=("nystrom",),
        summary="Nyström C W⁺ Cᵀ at randomly pivoted Cholesky pivots (symmetric PSD matrices: kernels)",
        stores="r·(N + r)",
        make=_make,
        min_budget=lambda n, context: nystrom_count(n, 1),
        order=22,
        label="Nyström",
        iterative=False,
        access=("dense", "columns"),
        needs=("symmetric", "psd"),
        # the pivots' columns and the factor, N r each; measured at most 2.9 x 8 budget (N = 3,000)
        columns_memory=lambda n, budget: 8 * (3 * budget + 4 * n),
    )
)
