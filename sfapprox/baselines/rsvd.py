"""Randomized SVD from products alone: the low-rank surrogate of a matrix too big to form.

Halko, Martinsson & Tropp (2011): a range finder ``Q = orth(X Ω)`` from a
Gaussian sketch, ``q`` power iterations ``Q <- orth(X orth(X^T Q))``, then the
exact SVD of the small ``B = Q^T X``.  Every product with ``X`` is one pass
over its column blocks (:class:`~sfapprox.sources.MatrixSource`), so the
matrix is never formed: ``2 + 2q`` passes and ``O(N (r + p))`` memory.
Stored numbers: ``r (2N + 1)``, as TSVD's.  Under a time limit a power
iteration runs only when the passes measured so far say it fits, keeping
the final ``B`` pass.

When even that final pass does not fit, a matrix read by column blocks ends
after one pass: a positive semi-definite source (a kernel) from its sketch
alone, by the stable single-pass Nyström form of Tropp, Yurtsever, Udell &
Cevher (2017, "Fixed-rank approximation of a positive-semidefinite matrix
from streaming data", Algorithm 3); any other (attention, a memory-mapped
array) from the co-range sketch ``psi X`` it takes in the same pass when the
first block's time says that a second pass would not fit and that reading,
not multiplying, dominates (:func:`sketch_pass`), rebuilt from both sketches
(Tropp et al. 2017, "Practical sketching algorithms", :func:`one_pass_general`).
Sources with cheap products of their own (sparse, operators, covariances,
arrays in memory) always make their passes.  At N = 65,536 a pass can take
minutes; the second one used to run past the limit by a whole pass.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
import scipy.linalg

from .. import _streams, _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._errors import ConvergenceWarning, user_stacklevel
from .._params import MEMORY_LIMIT, SEED, Interval
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._threads import AdaptiveThreads
from ._rank import numerical_rank
from .._validation import is_zero_matrix
from ..budget import rank_within, tsvd_count, tsvd_rank_for_budget
from ..formats import limit_text
from ..operators import HybridOperator
from ..sources import MatrixLike, as_source, block_columns
from ..sources._base import _product_part

__all__ = ["RandomizedSVD", "randomized_svd", "source_svd", "nystrom_pass", "one_pass_nystrom", "one_pass_general", "sketch_pass", "co_range_pays"]

#: The final pass starts, where one pass could end the fit instead, only when this many times the
#: first pass's time is left.
FINAL_PASS_MARGIN = 1.25

#: The co-range sketch is taken only where its pass is estimated at most this share of two passes.
CO_RANGE_MARGIN = 0.8


def one_pass_nystrom(Y: np.ndarray, omega: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``U, s, Vt`` of rank ``rank`` of a positive semi-definite ``X`` from its sketch ``Y = X @ omega``
    alone: the stable Nyström form ``Y (omega^T Y)^+ Y^T`` with a tiny shift (Tropp, Yurtsever, Udell &
    Cevher 2017, "Fixed-rank approximation of a positive-semidefinite matrix from streaming data",
    Algorithm 3), whose eigenvalues are never negative.

    (A symmetric matrix that is not PSD gets no such form here: the least-squares core of Halko et
    al., section 5.5, gave relative errors of 2.6 where two passes gave 0.008; such a matrix takes
    the co-range sketch, as any other.)

    Parameters
    ----------
    Y : numpy.ndarray, shape (n, k)
        The sketch ``X @ omega``.
    omega : numpy.ndarray, shape (n, k)
        The test matrix (any of full column rank; only its range matters).
    rank : int
        Rank ``r <= k`` of the result.

    Returns
    -------
    U : numpy.ndarray, shape (n, r)
    s : numpy.ndarray, shape (r,)
        The eigenvalues, largest first.
    Vt : numpy.ndarray, shape (r, n)
        ``U.T``.

    Examples
    --------
    >>> G = np.random.default_rng(0).standard_normal((30, 3))
    >>> X = G @ G.T
    >>> omega = np.random.default_rng(1).standard_normal((30, 5))
    >>> U, s, Vt = one_pass_nystrom(X @ omega, omega, 3)
    >>> bool(np.allclose((U * s) @ Vt, X))
    True
    """
    rank = min(rank, Y.shape[1])
    # An orthonormal test matrix of the same range: X @ Om = Y R^-1 (the approximation depends on the range only).
    Om, R = np.linalg.qr(omega)
    Y = scipy.linalg.solve_triangular(R, Y.T, trans="T").T
    lam, U = _nystrom_eig(Y, Om)
    return U[:, :rank], lam[:rank], U[:, :rank].T


def one_pass_general(Y: np.ndarray, W: np.ndarray, psi: np.ndarray, rank: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``U, s, Vt`` of rank ``rank`` of any ``X`` from its range sketch ``Y = X @ omega`` and its co-range
    sketch ``W = psi @ X``, both made in one pass (Tropp, Yurtsever, Udell & Cevher 2017, "Practical
    sketching algorithms for low-rank matrix approximation", Algorithm 4 and section 5.5's truncation).

    Parameters
    ----------
    Y : numpy.ndarray, shape (n, k)
        The range sketch.
    W : numpy.ndarray, shape (l, n)
        The co-range sketch, ``l >= k`` (``2k + 1`` advised).
    psi : numpy.ndarray, shape (l, n)
        Its test matrix.
    rank : int
        Rank ``r <= k`` of the result.

    Returns
    -------
    U : numpy.ndarray, shape (n, r)
    s : numpy.ndarray, shape (r,)
    Vt : numpy.ndarray, shape (r, n)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((30, 3)) @ rng.standard_normal((3, 30))
    >>> omega, psi = rng.standard_normal((30, 5)), rng.standard_normal((11, 30))
    >>> U, s, Vt = one_pass_general(X @ omega, psi @ X, psi, 3)
    >>> bool(np.allclose((U * s) @ Vt, X))
    True
    """
    Q, _ = np.linalg.qr(Y)
    core = np.linalg.lstsq(psi @ Q, W, rcond=None)[0]  # X ~ Q core, core from psi X ~ (psi Q) core
    Uc, s, Vt = np.linalg.svd(core, full_matrices=False)
    rank = min(rank, s.size)
    return (Q @ Uc)[:, :rank], s[:rank], Vt[:rank]


def sketch_pass(source, omega: np.ndarray, deadline: _timing.Deadline | None, seed: int
                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``Y = X @ omega`` by one pass over ``source``'s column blocks, with the co-range sketch
    ``W = psi @ X`` (``psi`` Gaussian, ``2k + 1`` rows) beside it when the first block's time says that
    a second pass would not fit before ``deadline`` and reading the columns, not multiplying them, takes
    most of a pass (the co-range's product costs twice the sketch's): the matrix's row space then
    comes from this pass.

    ``Y`` is the sum :meth:`~sfapprox.sources.MatrixSource.matmat` makes, in its order (the same
    numbers).

    Parameters
    ----------
    source : MatrixSource
        The matrix.
    omega : numpy.ndarray, shape (n, k)
        The range sketch's test matrix.
    deadline : Deadline or None
        When the fit must end; None: no co-range sketch.
    seed : int
        Seed of ``psi`` (a stream of its own: the two-pass result does not depend on it).

    Returns
    -------
    Y : numpy.ndarray, shape (n, k)
    W : numpy.ndarray, shape (2k + 1, n), or None
    psi : numpy.ndarray, shape (2k + 1, n), or None
    """
    n, k = omega.shape
    rows = 2 * k + 1
    first, *rest = list(block_columns(n, source.block_width()))
    # The first block alone, its reading and its product timed apart where they run (an executor's
    # worker), its share the same numbers as matmat's first term.
    part, read, product = next(source._map_blocks(_timed_product_part, [(first, omega[first])]))
    Y = np.zeros((n, k))
    Y += part
    if deadline is None or not rest or not co_range_pays(read, product, 1 + len(rest), k, rows, deadline):
        for part in source._map_blocks(_product_part, ((J, omega[J]) for J in rest)):
            Y += part
        return Y, None, None
    psi = np.random.default_rng([seed, _streams.CO_RANGE]).standard_normal((rows, n))
    W = np.empty((rows, n))
    W[:, first] = next(source._map_blocks(_co_range_part, [first], psi))  # the first block read again
    for J, (part, co) in zip(rest, source._map_blocks(_both_parts, ((J, omega[J]) for J in rest), psi)):
        Y += part
        W[:, J] = co
    return Y, W, psi


def nystrom_pass(source, omega: np.ndarray, deadline: _timing.Deadline | None, seed: int = DEFAULT_SEED
                 ) -> tuple[np.ndarray, int]:
    """``Y = X @ omega`` by one pass over the column blocks of a positive semi-definite ``source`` that
    stops where the next block would not end before ``deadline`` (at the speed of the slowest so far),
    once ``k`` columns are read: the rows of ``omega`` of the columns left unread are set to 0, so ``Y``
    is exactly ``X @ omega`` still, and :func:`one_pass_nystrom` makes the approximation from the
    columns read.  (At N = 20,000 a pass took 10 s under a 3 s limit.)  Under a deadline the blocks are
    taken in a seeded random order, so a cut pass reads columns from all of the matrix (in their order it
    read the first ones: on points sorted by position, one end of the matrix alone).

    Parameters
    ----------
    source : MatrixSource
        The matrix (its blocks read here, or on its executor).
    omega : numpy.ndarray, shape (n, k)
        The test matrix; changed in place where the pass stops early.
    deadline : Deadline or None
        When the fit must end; None: the whole pass, its blocks in order.
    seed : int, default=0
        Seed of the blocks' order under a deadline.

    Returns
    -------
    Y : numpy.ndarray, shape (n, k)
    read : int
        Columns read (``n``: the whole pass).
    """
    n, k = omega.shape
    Y = np.zeros((n, k))
    read, slowest = 0, 0.0
    # the fit's own stream (_streams.FIT): this was the scoring's order too, and a cut pass left the scoring
    # sampling only the columns read (N = 600: rel 0.9130 +- 0.0024, exact 0.9616); the scoring has its own stream now
    order = None if deadline is None else np.random.default_rng(seed).permutation(n)
    blocks = list(block_columns(n, source.block_width(), order=order))
    parts = source._map_blocks(_product_part, ((J, omega[J]) for J in blocks))
    began = _timing.now()
    for i, (J, part) in enumerate(zip(blocks, parts)):
        Y += part  # in the blocks' order: matmat's numbers where the pass is whole and in order
        read += J.size
        slowest = max(slowest, _timing.now() - began)
        if read < n and read >= k and deadline is not None and not deadline.fits(slowest):
            parts.close()  # (an executor's pending blocks are cancelled)
            omega[np.concatenate(blocks[i + 1:])] = 0.0
            break
        began = _timing.now()
    return Y, read


def _timed_product_part(source, task: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, float, float]:
    """``X[:, J] @ B[J]`` (as the pass's :func:`~sfapprox.sources._base._product_part`), and the seconds
    the block took to read and to multiply (module level: it travels to other processes)."""
    J, B = task
    began = _timing.now()
    block = source.columns(J)
    read = _timing.now() - began
    part = block @ B
    return part, read, _timing.now() - began - read


def _co_range_part(source, psi: np.ndarray, J: np.ndarray) -> np.ndarray:
    """``psi @ X[:, J]``."""
    return psi @ source.columns(J)


def co_range_pays(read: float, product: float, blocks: int, k: int, rows: int, deadline: _timing.Deadline) -> bool:
    """Whether a pass should take the co-range sketch too: two passes would not fit before ``deadline``
    and one pass with it is quicker than two without.

    Its product (``rows x N`` by the block) costs ``rows / k`` times the sketch's, so it pays where
    reading the columns dominates (a mapped file read from disk).  Softmax attention's columns are
    cheap to compute: at N = 16,384 its co-range pass took 8.97 s where two passes took 8.8 (1.4 against
    1.65 at 8,192), at a worse error (0.89 against 0.64; ``benchmarks/results/one_pass.md``).

    Parameters
    ----------
    read, product : float
        Seconds the first block took to read and to multiply by the sketch's test matrix.
    blocks : int
        Blocks in a pass.
    k, rows : int
        Columns of the sketch, rows of the co-range sketch.
    deadline : Deadline
        When the fit must end (measured from now: the first block's time is spent).

    Examples
    --------
    >>> from sfapprox._timing import Deadline
    >>> co_range_pays(1.0, 0.1, 10, 20, 41, Deadline.after(15.0))  # reading dominates, 2 passes: 22 s
    True
    >>> co_range_pays(0.1, 1.0, 10, 20, 41, Deadline.after(15.0))  # multiplying dominates
    False
    >>> co_range_pays(1.0, 0.1, 10, 20, 41, Deadline.after(30.0))  # two passes fit
    False
    """
    two_passes = 2 * blocks * (read + product)
    one_pass = blocks * (read + product * (1 + rows / k)) + read  # the first block is read again
    # A fifth's margin: on attention at N = 16,384 the estimate said a fifth quicker, and the pass took
    # as long as two (8.97 s against 8.8).
    return not deadline.fits(two_passes) and one_pass < CO_RANGE_MARGIN * two_passes


def _both_parts(source, psi: np.ndarray, task: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``X[:, J] @ omega[J]`` and ``psi @ X[:, J]`` from one read of the block."""
    J, omega = task
    block = source.columns(J)
    return block @ omega, psi @ block


def _nystrom_eig(Y: np.ndarray, Om: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and vectors of ``Y (Om^T Y)^+ Y^T``, the shifted Cholesky form (Tropp et al. 2017, Alg. 3)."""
    def shifted(nu: float) -> tuple[np.ndarray, np.ndarray]:  # the sketch of X + nu I, and its core
        Yn = Y + nu * Om
        core = Om.T @ Yn
        return Yn, (core + core.T) / 2

    # The shift keeps the Cholesky factorisation of a numerically singular core defined; taken back off below.
    # (positive even for a zero sketch: the Cholesky factorisation of a zero core failed)
    nu = max(np.sqrt(Y.shape[0]) * np.finfo(float).eps * np.linalg.norm(Y, 2), np.finfo(float).tiny)
    Yn, core = shifted(nu)
    try:
        L = np.linalg.cholesky(core)
    except np.linalg.LinAlgError:  # not PSD after all (a declared kernel's round-off): shift by the deficit
        nu += max(0.0, -float(np.linalg.eigvalsh(core)[0])) * 2 + nu
        Yn, core = shifted(nu)
        L = np.linalg.cholesky(core)
    E = scipy.linalg.solve_triangular(L, Yn.T, lower=True).T  # Yn L^-T
    U, S, _ = np.linalg.svd(E, full_matrices=False)
    lam = S * S - nu
    return np.where(lam > nu, lam, 0.0), U  # the shift's own size is round-off: zero (not 3e-323)


def randomized_svd(
    apply: Callable[[np.ndarray], np.ndarray],
    apply_t: Callable[[np.ndarray], np.ndarray],
    n: int,
    rank: int,
    *,
    n_oversamples: int = 10,
    n_iter: int = 2,
    seed: int = DEFAULT_SEED,
    deadline: _timing.Deadline | None = None,
    psd: bool = False,
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
    psd : bool, default=False
        ``X`` is known to be positive semi-definite: when the final pass would
        not fit before ``deadline`` after the sketch's, the result comes from
        the sketch alone (:func:`one_pass_nystrom`).  False: the final pass
        always runs.

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
    U, s, Vt, done, _ = _passes(apply, apply_t, n, rank, n_oversamples=n_oversamples, n_iter=n_iter, seed=seed,
                                deadline=deadline, psd=psd)
    return U, s, Vt, done


def _passes(apply, apply_t, n: int, rank: int, *, n_oversamples: int, n_iter: int, seed: int,
            deadline: _timing.Deadline | None, psd: bool, first_pass: Callable | None = None,
            keep_back: float = 0.0, give_up: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int] | None:
    """:func:`randomized_svd`'s work, with the passes over ``X`` it made as a fifth value.

    ``first_pass(omega) -> (Y, W, psi)``, when given, makes the sketch's pass instead of ``apply``,
    with the co-range sketch ``W = psi @ X`` beside it when it judged a second pass would not fit
    (else ``W`` and ``psi`` are None): :func:`sketch_pass`.  A co-range sketch taken ends the fit
    after that pass (its cost is paid; a second pass then ran on past the limit).  ``keep_back``
    passes' worth of time (at the first pass's measured speed) is left before ``deadline`` for
    the caller's work after the fit.

    ``give_up``: the two passes no check cuts, the sketch's and the final ``B``'s, are not run past
    ``deadline``: None is returned instead, for a caller that has a cheaper answer (NMF's random
    start), where ``first_pass`` returns None (it priced its pass and the final one from a part of
    its own) or where the final pass, at the sketch's measured speed, would not fit after it.
    """
    width = min(n, rank + n_oversamples)
    rng = np.random.default_rng(seed)
    started = _timing.now()
    omega = rng.standard_normal((n, width))
    first = first_pass(omega) if first_pass is not None else (apply(omega), None, None)
    if first is None:
        return None
    Y, W, psi = first
    del first  # (the tuple held Y: the sketch, N x (r + 10), lived through every power iteration)
    if W is not None:
        return *one_pass_general(Y, W, psi, rank), 0, 1
    # A quarter's margin on the next pass's time: at N = 8,192 a second pass measured as fitting ran 15 %
    # past the limit (a pass's time varies on a shared machine); one pass is the fit to keep then.
    if psd and deadline is not None and not deadline.fits((FINAL_PASS_MARGIN + keep_back) * (_timing.now() - started)):
        return *one_pass_nystrom(Y, omega, rank), 0, 1
    Q, _ = np.linalg.qr(Y)
    per_pass = _timing.now() - started  # with the QR, as every later pass has one
    if give_up and deadline is not None and not deadline.fits(per_pass):
        return None  # (the final pass would end past the deadline)
    del Y, omega
    done = 0
    for _ in range(n_iter):
        # Two passes for an iteration, one more for B after it: start it only when all fit.
        if deadline is not None and not deadline.fits((3 + keep_back) * per_pass):
            break
        # Re-orthonormalise after every product, so the smaller directions survive round-off.
        Q, _ = np.linalg.qr(apply_t(Q))
        Q, _ = np.linalg.qr(apply(Q))
        done += 1
    B = np.asarray(apply_t(Q)).T
    Ub, s, Vt = np.linalg.svd(B, full_matrices=False)
    return (Q @ Ub)[:, :rank], s[:rank], Vt[:rank], done, 2 + 2 * done


def source_svd(source, rank: int, *, n_oversamples: int = 10, n_iter: int = 2, seed: int = DEFAULT_SEED,
               deadline: _timing.Deadline | None = None, keep_back: float = 0.0):
    """:func:`randomized_svd` of a :class:`~sfapprox.sources.MatrixSource` as :class:`RandomizedSVD` fits it:
    under a ``deadline``, a source read by column blocks may end after one pass (:func:`sketch_pass`,
    :func:`one_pass_nystrom`).

    Parameters
    ----------
    source : MatrixSource
        The matrix.
    rank : int
        Rank ``r >= 1`` of the result.
    n_oversamples, n_iter, seed
        As :func:`randomized_svd`'s.
    deadline : Deadline or None, default=None
        When the fit must end; None: every pass is made.
    keep_back : float, default=0.0
        Passes' worth of time (at the measured speed of the first) to leave before ``deadline`` for
        the caller's own passes after it (RPCA's residual pass).

    Returns
    -------
    U, s, Vt : numpy.ndarray
        The factors.
    iterations : int
        Power iterations that ran.
    passes : int
        Passes over ``X`` made.
    one_pass : {"nystrom", "co-range"} or None
        How a fit that ended after one pass was made (None: it made two or more).
    read : int
        Columns its first pass read: fewer than ``N`` where a PSD source's one pass did not fit
        before ``deadline`` and was cut (:func:`nystrom_pass`).
    """
    # One pass can end the fit only where passes read the columns (others' products are cheap): a
    # PSD source's from its sketch (cut where even that pass does not fit), any other's from the
    # co-range sketch its pass may take too.
    by_columns = deadline is not None and deadline.end is not None and source.products_by_columns
    psd = by_columns and source.symmetric is True and source.psd is True
    read = [source.n]

    def cut_sketch(omega):
        Y, read[0] = nystrom_pass(source.pass_source, omega, deadline, seed)
        return Y, None, None

    first = cut_sketch if psd else (lambda omega: sketch_pass(source.pass_source, omega, deadline, seed)
                                    ) if by_columns else None
    U, s, Vt, done, passes = _passes(source.matmat, source.rmatmat, source.n, rank, n_oversamples=n_oversamples,
                                     n_iter=n_iter, seed=seed, deadline=deadline, psd=psd, first_pass=first,
                                     keep_back=keep_back)
    one_pass = None if passes > 1 else ("nystrom" if psd else "co-range")
    return U, s, Vt, done, passes, one_pass, read[0]


class RandomizedSVD(Approximation):
    """Rank-``r`` randomized SVD of a matrix or a :class:`~sfapprox.sources.MatrixSource`, from products only.

    Parameters
    ----------
    n_components : int or None, default=None
        Rank ``r`` (0 gives the zero matrix, with no pass over ``X``, as in
        :class:`~sfapprox.TruncatedSVD`); None: the largest that fits ``budget``.
    budget : int or None, default=None
        Stored-number budget, ``r (2N + 1)``.  Sets the rank when ``n_components`` is None; with
        both, a rank over the budget is refused (:class:`~sfapprox.BudgetError`).
    n_oversamples : int, default=10
        Extra sketch columns ``p``.
    n_iter : int, default=2
        Power iterations ``q`` (each two passes over ``X``).
    random_state : int, default=0
        Seed of the Gaussian sketch.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Seconds the fit may take; power iterations that would not fit are skipped.
        A source read by column blocks whose second pass would not fit ends
        after one (``params_["one_pass"]``): a PSD one (a kernel) from its
        sketch (``"nystrom"``), any other from its sketch and the co-range
        sketch taken beside it where that is the quicker way (``"co-range"``).
        Sources with cheap products of their own (sparse, operators,
        covariances, arrays in memory) always make their passes.
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes of a fit from a :class:`~sfapprox.sources.MatrixSource`'s
        columns: one that would keep more than it beside its passes' blocks is refused
        before any pass, and the passes are sized for it (None: the source's own
        limit, else 80% of the physical memory).

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
        "random_state": SEED,
        "time_limit": Interval(float, 0, None, allow_none=True),
        "max_memory": MEMORY_LIMIT,
    }

    def __init__(self, n_components: int | None = None, *, budget: int | None = None, n_oversamples: int = 10,
                 n_iter: int = 2, random_state: int = DEFAULT_SEED, time_limit: float | None = DEFAULT_TIME_LIMIT,
                 max_memory: int | str | None = None):
        self.n_components = n_components
        self.budget = budget
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.random_state = random_state
        self.time_limit = time_limit
        self.max_memory = max_memory

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "RandomizedSVD":
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
            When the budget (with no ``n_components``) is below one rank (``2N + 1`` numbers).
        """
        start = time.perf_counter()
        given = self._validate(X, check_input)
        n = given.shape[0]
        rank = rank_within(n, self.n_components, self.budget, tsvd_rank_for_budget, tsvd_count, "RandomizedSVD",
                           zero=lambda: is_zero_matrix(given))  # the zero matrix: rank 0 within any budget
        if rank == 0:  # n_components=0 (or X = 0): the zero matrix, as TruncatedSVD gives it (no sketch, no pass)
            return self._set_fit(0, np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)), 0, 0, start, "exact")
        deadline = _timing.Deadline.after(self.time_limit)
        # BLAS threads from the free cores: a second thread on a busy core made a QR 100x slower.
        # the declared need was measured with the default oversampling: more widens every sketch
        source = as_source(self._from_columns(given, tsvd_count(n, min(n, rank + max(0, self.n_oversamples - 10)))))
        with AdaptiveThreads(float(n) * n, torch=False):  # numpy alone: torch is not imported for it
            U, s, Vt, done, passes, one_pass, read = source_svd(source, rank, n_oversamples=self.n_oversamples,
                                                                n_iter=self.n_iter, seed=self.random_state,
                                                                deadline=deadline)
        self._set_fit(rank, U, s, Vt, done, passes, start,
                      "closed_form" if done == self.n_iter and passes > 1 else "time_limit")
        if one_pass is not None:
            self.params_["one_pass"] = one_pass
        if read < n:  # the one pass was cut: what a comparison's rpca prices a whole pass by
            self.params_["columns_read"] = read
            warnings.warn(
                f"RandomizedSVD's one pass over X did not fit time_limit={self.time_limit:g} s: it was cut at "
                f"{read:,} of {n:,} columns (the approximation is made from those); raise the limit for all",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        elif self.time_limit is not None and done == 0 and deadline.passed():
            # The method's fewest passes ran past the limit: a result, and a warning that says so (attention
            # at N = 16,384 took 9.4 s of 5.7: its columns are cheap, the co-range sketch's product is not).
            warnings.warn(
                f"RandomizedSVD took {limit_text(self.seconds_)} s of time_limit={self.time_limit:g} s: its fewest passes "
                f"over X ({passes}: {'one, from its sketch' if passes == 1 else 'the sketch and Q^T X'}) did not "
                "fit in it; raise the limit, or lower the rank",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        return self

    def _set_fit(self, rank: int, U: np.ndarray, s: np.ndarray, Vt: np.ndarray, done: int, passes: int,
                 start: float, stop_reason: str) -> "RandomizedSVD":
        """Record the factors and what the fit did (``start``: its ``perf_counter`` at the beginning)."""
        n = U.shape[0]
        kept = numerical_rank(s, n)  # singular values at round-off carry nothing: not stored, not charged
        U, s, Vt = U[:, :kept], s[:kept], Vt[:kept]
        self.U_, self.s_, self.Vt_, self.n_iter_ = U, s, Vt, done
        self.rank_ = kept
        self.n_stored_ = tsvd_count(n, kept)
        self.stop_reason_ = stop_reason
        self.params_ = {"rank": kept, "power_iterations": done, "passes": passes,
                        **({"rank_budget": rank} if kept < rank else {})}
        self.operator_ = HybridOperator(n, low_rank=(U, s, Vt))
        self.seconds_ = time.perf_counter() - start
        return self


def _make(n: int, budget: int, context: RunContext) -> RandomizedSVD:
    return RandomizedSVD(**context.settings.apply_to(RandomizedSVD, exclude=("max_iter",), budget=budget))


register(
    MethodSpec(
        name="rsvd",
        operators=("hybrid",),
        summary="randomized SVD from products with X (works on matrices too big to form)",
        stores="r·(2N + 1)",
        make=_make,
        min_budget=lambda n, context: tsvd_count(n, 1),
        order=21,
        label="low rank (randomized SVD)",
        iterative=False,
        access=("dense", "columns"),
        # the sketch, its range and B's SVD: N (r + p) each; measured 0.1-1.9 x 8 budget (N = 1,500-6,000);
        # a pass that takes the co-range sketch too keeps two (2k + 1) x N arrays more
        columns_memory=lambda n, budget: 8 * (4 * budget + 80 * n),
    )
)
