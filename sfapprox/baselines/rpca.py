"""Robust PCA: ``X ≈ L + S`` with ``L`` of rank ``r`` and ``S`` with ``s`` nonzeros, at a budget.

Stored numbers (:func:`~sfapprox.budget.rpca_count`): ``r (2N + 1)`` for
``L = U diag(sigma) V^T`` plus ``s`` values of ``S`` (``2 s`` when the
positions are charged too, ``count_indices=True``).

Two methods:

``"godec"`` (CLI ``rpca``)
    Fixed rank and cardinality, alternating exact projections (GoDec, Zhou &
    Tao 2011): ``L <- best rank-r approximation of X - S``, then
    ``S <- the s largest-magnitude entries of X - L``.  Each step is an exact
    minimisation, so ``||X - L - S||_F`` never increases.  The rank-``r`` step
    is an exact SVD when the subspace would not be much smaller than ``N``;
    otherwise a Rayleigh–Ritz step on a warm-started subspace that contains
    the previous ``L``'s column space (so it stays monotone and converges to
    the exact projection along with the outer loop).  With only a budget, the
    split between ``r`` and ``s`` is chosen as the best over a grid of ranks
    that includes the largest rank that fits (TSVD's) and ``r = 0``: at an
    equal budget RPCA is never worse than TSVD.

``"pcp"`` (CLI ``rpca-pcp``)
    Principal Component Pursuit, ``min ||L||_* + lambda ||S||_1`` subject to
    ``L + S = X``, by the inexact augmented Lagrangian method (Lin, Chen & Ma
    2010) with ``lambda = 1/sqrt(N)``.  Its solution has a natural rank and
    number of nonzeros; it is cut to each split of the rank grid (largest
    singular values, largest ``|S|`` entries), each cut is refitted with GoDec
    from there, and the split of smallest refitted error is kept (not that of
    the smallest cut: the refit can reorder them).  The grid also holds the
    budget's ranks above PCP's, each refitted from ``X``'s best rank-``r``
    (TSVD's ``L``, from one SVD of ``X``), the largest rank from both: at an
    equal budget RPCA-PCP is never worse than TSVD either.  Each ALM iteration is a full SVD, ``O(N^3)``.

Both run in torch on the CPU or a CUDA GPU; the returned factors and the
choice among grid points are evaluated in float64.

What carries only round-off is not stored nor charged: ``L``'s singular
values at or below ``N eps max(sigma)`` (TSVD's rule, :func:`~.tsvd.carrying_rank`)
and ``S``'s smallest entries while all that is left out stays within
``N eps ||X||_F`` (:func:`carrying_entries`; the error moves by no more).
Each split is scored without them, and of the splits that reproduce ``X``
(error within ``EXACT_TOL ||X||_F``) the one storing fewest numbers wins
(:func:`~._rpca_parts.preferred`): a 16 x 16 ones matrix at a budget of 256 stored rank 2
and 95 entries of round-off, all 256 numbers, where rank 1 (33) is as exact.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._device import resolve_device, resolve_dtype
from .._errors import BudgetError, ConvergenceWarning, ParameterError, ResourceError, user_stacklevel
from ..formats import counted
from .._params import MEMORY_LIMIT, SEED, Interval, Options
from .._progress import Reporter
from .._settings import COUNT_INDICES, DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._threads import AdaptiveThreads
from ..sources import MatrixLike, MatrixSource, columns_within, room
from .._validation import LIBRARY_WORKING_SET, check_memory, estimate_dense_bytes, is_zero_matrix
from ._rpca_parts import _Candidate, carrying_entries, settled_stop, skipped_record, split_stage
from ..budget import (
    below_smallest,
    check_within,
    one_sparse_entry,
    rpca_count,
    rpca_rank_for_budget,
    rpca_sparse_for_budget,
    tsvd_rank_for_budget,
)
from ..operators import HybridOperator
from ._torch import few_threads
from .sparse import dense_top_entries
from .tsvd import EXACT_MAX_N, EXACT_SVD_ARRAYS, carrying_rank, leading_svd, preferred, reproduces, round_off

__all__ = ["RobustPCA", "RANK_FRACTIONS", "PCP_MU_GROWTH"]

#: Default rank grid with only a budget: these fractions of the largest rank
#: that fits (rounded, deduplicated); each rank gives the rest of the budget to S.
RANK_FRACTIONS = (1.0, 0.75, 0.5, 0.25, 0.0)

#: Stops of a split that ran to its end (``params_["converged"]``): one the time limit did not cut.
SETTLED = ("exact", "closed_form", "converged")

#: Extra basis vectors of the warm-started subspace step.
OVERSAMPLE = 10

#: Growth factor ``rho`` of the ALM penalty ``mu`` (Lin, Chen & Ma's choice for
#: general matrices) and the cap ``mu_bar = PCP_MU_CAP * mu_0``.
PCP_MU_GROWTH = 1.5
PCP_MU_CAP = 1e7

#: PCP above :data:`~.tsvd.EXACT_MAX_N` (partial SVDs, :func:`_pcp_ialm`): the first number of singular
#: triplets computed, the power iterations of each randomized SVD, and the power iterations at most
#: of the ``||X||_2`` estimate.
PCP_FIRST_RANK = 10
PCP_POWER_ITERATIONS = 2
PCP_NORM_ITERATIONS = 100
#: PCP's first ALM iteration with partial SVDs costs about this many iterations of its ``||X||_2``
#: estimate (two matrix-vector products each): measured 42 at N = 4,096 and 45 at N = 8,192 on 2 cores
#: (1.4 s against 0.030 s), its three dense work arrays' first writes included.
PCP_FIRST_ITERATION_STEPS = 45
#: Time PCP leaves for what follows it under a time limit (the cut to the budget, one residual per
#: grid rank, and the GoDec refit's start, first residual and result), in residual passes
#: (``D - L - E`` and its norm), each of which PCP measures as it goes.  Measured at N = 3000: a
#: pass 0.17 s, the five cuts 2.7 s, a scoring 0.18 s: about 20 passes in all.
PCP_AFTER_PASSES = 30
#: A GoDec grid point runs only when the time left pays for its least work (its start scored, one
#: iteration, its result scored): this many scorings of a split, measured on the largest rank's start first.
GODEC_LEAST_SCORINGS = 4

#: A selection of the largest entries of a dense ``N x N`` array may take this many arrays' worth of
#: memory besides it (its column blocks half of it: :func:`~.sparse.dense_top_entries`).
SELECTION_ARRAYS = 2
#: Dense ``N x N`` arrays a fit holds at once, X included.  GoDec: X, one work array (the residual,
#: then X - S) and the selection's blocks; scoring a split, its residual instead of the work array.
#: PCP: X, Y, E, a work array, and the selection when its solution is cut.
GODEC_ARRAYS, PCP_ARRAYS = 4, 5
#: What an exact SVD of an ``N x N`` array adds (:data:`~.tsvd.EXACT_SVD_ARRAYS`): a grid's start SVD
#: and PCP's shrinkage at N <= EXACT_MAX_N, GoDec's rank-r steps where the warm subspace would not
#: be small, and PCP's partial SVD, whose rank may grow to N.
SVD_ARRAYS = EXACT_SVD_ARRAYS
#: Bytes a scored split's sparse part holds per entry beside the dense arrays (its flat positions, int64,
#: and values, float64), and how many such parts a fit may hold at once: GoDec's best split so far and
#: the scored start of the split it fits (then its result, scored); PCP's largest-rank start besides,
#: scored before PCP and kept for its refit (the result where no refit fits).  At N = 2,000, a rank of
#: 100 and a budget of N^2 numbers (3.6M entries), PCP measured 507 MB of peak RSS where the arrays were
#: estimated at 461 MB.
ENTRY_BYTES = 16
HELD_PARTS = {"godec": 2, "pcp": 3}


# --------------------------------------------------------------------------- projections
def _largest(R: np.ndarray, n_sparse: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions and values of the ``n_sparse`` largest ``|R|`` of a dense array in memory,
    by column blocks of at most one ``N x N`` array's worth besides ``R``
    (:func:`~.sparse.dense_top_entries`; ties to the earlier positions)."""
    return dense_top_entries(R, n_sparse, max_memory=SELECTION_ARRAYS * 8 * R.size)


def _top_entries(R, n_sparse: int):
    """Flat indices and signed values of the ``n_sparse`` largest ``|R|`` entries (a tensor).

    On the CPU by :func:`_largest`, on the tensor's memory; on a GPU by ``torch.topk``."""
    import torch

    flat = R.reshape(-1)
    if n_sparse >= flat.numel():
        idx = torch.arange(flat.numel(), device=R.device)
        return idx, flat.clone()
    if R.device.type == "cpu":
        idx, vals = _largest(R.numpy(), n_sparse)
        return torch.from_numpy(idx), torch.from_numpy(vals).to(R.dtype)
    _, idx = torch.topk(flat.abs(), n_sparse, sorted=False)
    return idx, flat[idx]


def _exact_lowrank(A, rank: int):
    """Best rank-``r`` approximation of ``A`` (Eckart–Young) as ``U, sigma, Vt`` (copies: slices
    would keep the SVD's whole ``N x N`` factors alive)."""
    import torch

    U, sig, Vt = torch.linalg.svd(A, full_matrices=False)
    return U[:, :rank].contiguous(), sig[:rank].clone(), Vt[:rank].clone()


def _subspace_lowrank(A, rank: int, U_prev, Q):
    """Rank-``r`` Rayleigh–Ritz approximation of ``A`` on ``span([U_prev, A A^T Q])``.

    The span contains the previous ``L``'s column space, so the result is at
    least as close to ``A`` as any rank-``r`` matrix with those columns (the
    GoDec objective cannot increase); one power step on the basis ``Q``
    moves it toward the leading singular subspace.  Returns
    ``U, sigma, Vt, Q_next`` (``Q_next``: the ``rank + OVERSAMPLE`` leading
    Ritz vectors).
    """
    import torch

    Z = A @ (A.T @ Q)
    B, _ = torch.linalg.qr(torch.cat([U_prev, Z], dim=1))
    Uc, sig, Vt = torch.linalg.svd(B.T @ A, full_matrices=False)
    U = B @ Uc
    return U[:, :rank], sig[:rank], Vt[:rank], U[:, : rank + OVERSAMPLE]


def _use_exact_svd(n: int, rank: int) -> bool:
    """Exact SVD when the warm-started subspace (``2r + OVERSAMPLE`` columns) is not small."""
    return 4 * (2 * rank + OVERSAMPLE) >= n


def work_bytes(n: int, method: str, ranks, *, entries: int = 0) -> int:
    """Peak bytes of an in-memory fit of an ``n x n`` float64 matrix, X included (what ``max_memory``
    is checked against): :data:`GODEC_ARRAYS` or :data:`PCP_ARRAYS` dense arrays, plus
    :data:`SVD_ARRAYS` where an exact (or possibly full-rank) SVD runs, plus the sparse parts it holds
    beside them (:data:`HELD_PARTS` of ``entries`` each, :data:`ENTRY_BYTES` an entry), plus the
    libraries' working set.

    Parameters
    ----------
    n : int
        Order of the matrix.
    method : {"godec", "pcp"}
        The algorithm.
    ranks : iterable of int
        The ranks of the splits the fit may try.
    entries : int, default=0
        The most sparse entries of a split the fit may try (PCP's splits below the budget's ranks
        included: :func:`_most_entries`).

    Returns
    -------
    int

    Examples
    --------
    >>> work_bytes(4096, "godec", [78, 39]) // 2**20, work_bytes(1024, "godec", [30]) // 2**20
    (576, 160)
    """
    exact = method == "pcp" or n <= EXACT_MAX_N or any(_use_exact_svd(n, r) for r in ranks)
    arrays = (PCP_ARRAYS if method == "pcp" else GODEC_ARRAYS) + (SVD_ARRAYS if exact else 0)
    return arrays * estimate_dense_bytes(n) + HELD_PARTS[method] * ENTRY_BYTES * entries + LIBRARY_WORKING_SET


# --------------------------------------------------------------------------- GoDec
def _godec(X, rank: int, n_sparse: int, U, sig, Vt, *, max_iter: int, tol: float,
           deadline: _timing.Deadline | None = None, first_step: float = 0.0, report: Reporter | None = None) -> tuple:
    """GoDec at fixed ``rank`` (>= 1) and ``n_sparse`` from the start ``L = U diag(sig) Vt``.

    ``X`` is a dense tensor.  Each iteration is an S-step (the ``n_sparse``
    largest ``|X - L|`` entries) then an L-step (rank-``r`` projection of
    ``X - S``).  Stops when the objective ``||X - L - S||_F`` changed by a
    relative ``tol`` or less, or by no more than round-off, ``N eps ||X||_F``
    (:func:`~.tsvd.round_off`: what the float64 scoring itself leaves out,
    :func:`carrying_entries`), when it is at round-off level, after
    ``max_iter`` L-steps, or when the next iteration, at the cost of the
    last one (the first: ``first_step`` seconds, an estimate), would end
    after ``deadline``.  Returns the ``L`` of the best iterate (the
    objective is monotone; keeping the best guards round-off) as
    ``U, sig, Vt, n_iter, stop_reason``; its best ``S`` is recomputed by the caller.  ``report``
    (a :class:`~sfapprox._progress.Reporter`) is given each iterate's error, which the S-step leaves
    at hand.
    """
    import torch

    norm = float(torch.linalg.vector_norm(X))
    floor = 10 * torch.finfo(X.dtype).eps * norm
    # A gain below round-off is no gain: near an exact fit a relative tol of the error is a change of
    # 1e-6 of an error itself near round-off, which an RBF kernel (N = 1024, rank 127 of a 25 % budget,
    # error 8e-12 of ||X||) kept passing with gains of 1e-15 of ||X|| each, 66 exact SVDs to the time
    # limit and 3 of 5 splits skipped.  The scoring drops up to this much anyway (carrying_entries).
    unresolved = round_off(X.shape[0], norm)
    exact = _use_exact_svd(X.shape[0], rank)
    Q = U
    best, best_err, last, reason = (U, sig, Vt), math.inf, math.inf, "max_iter"
    step = first_step  # seconds of the last iteration: what the next one is expected to cost
    # One N x N work array besides X: the residual X - L, then (its entries selected) X - S.
    work = torch.empty_like(X)
    for it in range(max_iter + 1):
        began = _timing.now()
        R = torch.addmm(X, U * sig, Vt, alpha=-1.0, out=work)
        idx, vals = _top_entries(R, n_sparse)
        R.view(-1)[idx] = 0.0  # what S leaves: its norm is the error, exactly (no difference of squares)
        err = float(torch.linalg.vector_norm(R))
        if report is not None:
            report(err, steps=1 if it else 0)  # (the start's error is no iteration)
        if err < best_err:
            best, best_err = (U, sig, Vt), err
        if n_sparse == 0 or err <= floor or (it > 0 and last - err <= max(tol * last, unresolved)):
            # (Without a sparse part the start, the best rank-r of X, is final.)
            reason = "converged"
            break
        last = err
        if it == max_iter:
            break
        if deadline is not None and not deadline.fits(step):
            reason = "time_limit"  # the next L-step (and the S-step after it) would pass the deadline
            break
        A = work.copy_(X)
        A.view(-1)[idx.to(A.device)] -= vals
        if exact:
            U, sig, Vt = _exact_lowrank(A, rank)
        else:
            U, sig, Vt, Q = _subspace_lowrank(A, rank, U, Q)
        step = _timing.now() - began
    return (*best, it, reason)


# --------------------------------------------------------------------------- PCP
def _spectral_norm(D, generator, *, max_iter: int = PCP_NORM_ITERATIONS, rtol: float = 1e-7) -> float:
    """``||D||_2`` by power iteration on ``D^T D`` from a seeded start (``O(N^2)`` per iteration).

    The estimate grows to the largest singular value; it stops once it changes by a
    relative ``rtol`` or less.
    """
    return _power_norm(D, generator, max_iter=max_iter, rtol=rtol)[0]


def _power_norm(D, generator, *, max_iter: int = PCP_NORM_ITERATIONS, rtol: float = 1e-7,
                deadline: _timing.Deadline | None = None, then: float = 0.0) -> tuple[float, float]:
    """:func:`_spectral_norm`, stopped early where the next iteration, at the cost of the last, and the
    work after the estimate, ``then`` such iterations' worth, would not both end by ``deadline`` (the
    estimate so far: a lower bound; up to :data:`PCP_NORM_ITERATIONS` unchecked iterations, two passes
    over ``D`` each, ran whatever the limit).  Returns the estimate and the seconds of its last
    iteration (what prices PCP's first, :data:`PCP_FIRST_ITERATION_STEPS`)."""
    import torch

    v = torch.randn(D.shape[1], 1, generator=generator, dtype=D.dtype, device=D.device)
    v /= torch.linalg.vector_norm(v)
    sigma, step = 0.0, 0.0
    for it in range(max_iter):
        # The estimate is for the work after it: an iteration more runs only when that work still fits
        # after it (it ran to the deadline, and PCP's first iteration, priced after it, then did not fit:
        # 2.8 s spent for nothing at N = 8,192)
        if it and deadline is not None and not deadline.fits((1.0 + then) * step):
            return sigma, step
        began = _timing.now()
        u = D @ v
        new = float(torch.linalg.vector_norm(u))
        if new == 0.0:
            return 0.0, _timing.now() - began
        w = D.T @ u
        v = w / torch.linalg.vector_norm(w)
        step = _timing.now() - began
        if abs(new - sigma) <= rtol * new:
            return new, step
        sigma = new
    return sigma, step


def _partial_svd(A, k: int, generator, n_iter: int = PCP_POWER_ITERATIONS):
    """The leading ``k`` singular triplets of ``A`` by a randomized range finder with ``n_iter``
    power iterations (Halko, Martinsson & Tropp 2011), ``O(N^2 k)``: ``U, sigma, Vt``."""
    import torch

    width = min(A.shape[1], k + OVERSAMPLE)
    Q, _ = torch.linalg.qr(A @ torch.randn(A.shape[1], width, generator=generator, dtype=A.dtype, device=A.device))
    for _ in range(n_iter):
        Q, _ = torch.linalg.qr(A.T @ Q)
        Q, _ = torch.linalg.qr(A @ Q)
    Ub, sig, Vt = torch.linalg.svd(Q.T @ A, full_matrices=False)
    return (Q @ Ub)[:, :k], sig[:k], Vt[:k]


def _pcp_ialm(D, *, lam: float, tol: float, max_iter: int, deadline: _timing.Deadline | None = None,
              partial: bool = False, seed: int = DEFAULT_SEED, report: Reporter | None = None) -> tuple:
    """Principal Component Pursuit by inexact ALM (Lin, Chen & Ma 2010, Algorithm 5).

    Returns ``U, sigma, Vt`` of the low-rank part (singular values after
    shrinkage, descending), the sparse part ``E`` (dense tensor), the
    iterations and whether ``||D - A - E||_F / ||D||_F < tol`` was reached
    (it stops unconverged after ``max_iter`` iterations, or when the next
    iteration and what follows PCP would not end by ``deadline``: the cut and
    the refit get :data:`PCP_AFTER_PASSES` residual passes of time, each
    costing what this iteration's residual did).  ``report`` is given each iteration's
    ``||D - A - E||_F`` (its residual, computed anyway).

    Each iteration shrinks the singular values of an ``N x N`` matrix.
    ``partial=False``: a full SVD (``O(N^3)``).  ``partial=True``: only the
    leading ``sv`` triplets, by a randomized SVD (:func:`_partial_svd`,
    ``O(N^2 sv)``), with Lin, Chen & Ma's rule for ``sv`` (start at
    :data:`PCP_FIRST_RANK`; one more than the values kept when fewer than
    ``sv`` passed the threshold, else ``5 %`` of ``N`` more), and ``||D||_2``
    by power iteration instead of an SVD.  The full SVD of a 3000 x 3000
    matrix takes 8-35 s on 2 cores, so above :data:`~.tsvd.EXACT_MAX_N` the
    partial one is used, as TSVD does.
    """
    import torch

    norm_fro = float(torch.linalg.vector_norm(D))
    n = D.shape[0]
    U, sig, Vt = D.new_zeros((n, 0)), D.new_zeros(0), D.new_zeros((0, D.shape[1]))
    if norm_fro == 0.0:
        return U, sig, Vt, torch.zeros_like(D), 0, True
    # Under a deadline no ALM iteration starts that would not end by it, the first included: at N = 8,192
    # the spectral norm and the first iteration ran after the start SVD had used the limit up (14.4 s of
    # 10).  Without one the caller refits from X's best rank-r alone (its result within TSVD's error).
    if deadline is not None and deadline.passed():
        return U, sig, Vt, torch.zeros_like(D), 0, False
    generator = torch.Generator(device=D.device).manual_seed(seed)
    began = _timing.now()
    if partial:
        # (the estimate stops once the first iteration would not fit after its next step; where the first
        # does not fit even now, after one step, the check below gives up at once)
        norm_two, step = _power_norm(D, generator, deadline=deadline, then=PCP_FIRST_ITERATION_STEPS)
        first = PCP_FIRST_ITERATION_STEPS * step
    else:
        norm_two = float(torch.linalg.matrix_norm(D, ord=2))
        first = _timing.now() - began  # an SVD of D: what the first iteration's is
    if deadline is not None and not deadline.fits(first):
        return U, sig, Vt, torch.zeros_like(D), 0, False
    norm_inf = float(torch.linalg.vector_norm(D, math.inf)) / lam
    Y = D / max(norm_two, norm_inf)
    mu = 1.25 / norm_two
    mu_bar = mu * PCP_MU_CAP
    sv = min(n, PCP_FIRST_RANK)
    converged = False
    # Three N x N arrays besides D, written in place: Y, E and one work array (the same
    # arithmetic as the textbook's expressions, without their temporaries).
    E, work = torch.empty_like(D), torch.empty_like(D)
    for it in range(1, max_iter + 1):
        began = _timing.now()
        # E = shrink(D - L + Y / mu, lam / mu), as T - clip(T, -tau, tau): the same numbers
        torch.addmm(D, U * sig, Vt, alpha=-1.0, out=E).add_(Y, alpha=1.0 / mu)
        E.sub_(torch.clamp(E, -lam / mu, lam / mu, out=work))
        torch.sub(D, E, out=work).add_(Y, alpha=1.0 / mu)  # D - E + Y / mu
        if partial:
            Uf, sf, Vtf = _partial_svd(work, sv, generator)
        else:
            Uf, sf, Vtf = torch.linalg.svd(work, full_matrices=False)
        keep = int((sf > 1.0 / mu).sum())
        if partial:
            sv = min(keep + 1, n) if keep < sv else min(keep + max(1, round(0.05 * n)), n)
        U, sig, Vt = Uf[:, :keep].contiguous(), sf[:keep] - 1.0 / mu, Vtf[:keep].clone()
        del Uf, Vtf  # a full SVD's N x N factors
        passed = _timing.now()
        Z = torch.addmm(D, U * sig, Vt, alpha=-1.0, out=work).sub_(E)
        Y.add_(Z, alpha=mu)
        mu = min(mu * PCP_MU_GROWTH, mu_bar)
        residual = float(torch.linalg.vector_norm(Z))
        if report is not None:
            report(residual)
        ended = _timing.now()
        if residual < tol * norm_fro:
            converged = True
            break
        if deadline is not None and not deadline.fits(ended - began + PCP_AFTER_PASSES * (ended - passed)):
            break
    return U, sig, Vt, E, it, converged


# --------------------------------------------------------------------------- float64 scoring
def _score(X: np.ndarray, U: np.ndarray, sig: np.ndarray, Vt: np.ndarray, n_sparse: int, norm: float):
    """Best ``S`` for this ``L`` and the error, in float64 numpy, without what carries only round-off.

    Re-doing the S-step in float64 makes a float32 (GPU) fit's ``S`` exactly
    optimal for its ``L``, and puts every candidate on the same scale.  ``L``'s
    singular values at round-off are dropped first (:func:`carrying_rank`),
    then ``S``'s entries that carry only round-off (:func:`carrying_entries`);
    the error is that of what is kept, exactly.  ``norm`` is ``||X||_F`` (the fit's, computed once).
    Returns ``error, U, sig, Vt, flat indices, values``.
    """
    n = X.shape[0]
    keep = carrying_rank(sig, n)
    if not keep.all():
        U, sig, Vt = U[:, keep], sig[keep], Vt[keep]
    R = _residual(X, U, sig, Vt)
    flat = R.reshape(-1)
    if n_sparse >= flat.size:
        idx = np.arange(flat.size)
        vals = flat.copy()
    elif n_sparse == 0:
        idx, vals = np.zeros(0, dtype=np.int64), np.zeros(0)
    else:
        idx, vals = _largest(R, n_sparse)
    flat[idx] = 0.0  # the norm of what is left, exactly (0 where L + S is X)
    error = float(np.linalg.norm(flat))
    kept, error = carrying_entries(vals, error, n, norm)
    return error, U, sig, Vt, idx[kept], vals[kept]


def _residual(X: np.ndarray, U: np.ndarray, sig: np.ndarray, Vt: np.ndarray) -> np.ndarray:
    """``X - U diag(sig) Vt`` in one new ``N x N`` array (the product's own, subtracted in place)."""
    R = (U * sig) @ Vt
    np.subtract(X, R, out=R)
    return R


def _to_numpy(*tensors) -> list[np.ndarray]:
    return [t.detach().double().cpu().numpy() for t in tensors]


# --------------------------------------------------------------------------- budget splits
def _check_rank_grid(rank_grid) -> None:
    """Refuse a ``rank_grid`` that is not a non-empty sequence of whole numbers >= 0 (a -1 was read as
    a Python index, the largest rank, over the budget; 2.5 was cut to 2, "a" failed inside ``int``)."""
    if rank_grid is None:
        return
    bad = [r for r in rank_grid if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 0]
    if bad or not len(rank_grid):
        raise ParameterError(f"rank_grid must list ranks, whole numbers >= 0 (got {list(rank_grid)!r}); "
                             "or None for the default grid")


def _grid_ranks(r_max: int, rank_grid) -> list[int]:
    """Ranks tried with only a budget, largest first, each at most ``r_max``."""
    if rank_grid is None:
        ranks = {int(round(f * r_max)) for f in RANK_FRACTIONS}
    else:
        ranks = {min(int(r), r_max) for r in rank_grid}
    return sorted(ranks, reverse=True)


def _resolve_splits(
    n: int,
    rank: int | None,
    n_sparse: int | None,
    budget: int | None,
    *,
    count_indices: bool,
    rank_grid=None,
    max_rank: int | None = None,
    zero: Callable[[], bool] | None = None,
) -> list[tuple[int, int]]:
    """The ``(rank, n_sparse)`` pairs to try, each within the budget.

    ``max_rank`` caps every rank (PCP's natural rank); with a budget, the
    sparse part then gets what the smaller rank leaves.  A budget that holds
    neither a sparse entry nor a rank-1 term is refused (as is one that leaves
    nothing beside a part given as 0: ``rank=0`` below one entry, ``n_sparse=0``
    below one rank), in :func:`~sfapprox.budget.below_smallest`'s words, but for
    the zero matrix (``zero()`` True, asked only then): ``(0, 0)`` holds it
    exactly in 0 numbers (:func:`~sfapprox.budget.rank_within`'s rule).  Both
    parts given as 0, without a budget's say, is the zero surrogate asked for
    (as ``TruncatedSVD(n_components=0)``).
    """
    _check_rank_grid(rank_grid)
    cap = n if max_rank is None else min(n, max_rank)
    rank = None if rank is None else min(rank, cap)
    n_sparse = None if n_sparse is None else min(n_sparse, n * n)
    ci = count_indices
    if budget is None:
        if rank is None or n_sparse is None:
            raise ParameterError("RobustPCA needs rank and n_sparse, or a budget")
        return [(rank, n_sparse)]
    if rank is not None and n_sparse is not None:
        check_within(rpca_count(n, rank, n_sparse, count_indices=ci), budget,
                     f"rank {rank} with {counted(n_sparse, 'sparse entry', 'sparse entries')}",
                     "lower rank or n_sparse")
        return [(rank, n_sparse)]
    if rank is not None or n_sparse is not None:
        # one part given, the budget sizes the other: where that leaves nothing to store, refused as the grid
        # is (rank=0 at a budget below one entry stored 0 numbers of a nonzero X, "ok")
        split = ((rank, rpca_sparse_for_budget(n, budget, rank, count_indices=ci)) if rank is not None else
                 (rpca_rank_for_budget(n, budget, n_sparse, count_indices=ci), n_sparse))
        # refused by what the budget holds, before a cap (PCP's natural rank 0 of a sparse X capped rank 4
        # at 0: with n_sparse=0 given, "below the smallest fit" of a budget that holds rank 4)
        if split != (0, 0) or (zero is not None and zero()):
            return [split if rank is not None else (min(cap, split[0]), n_sparse)]
        smallest = (one_sparse_entry(ci), rpca_count(n, 0, 1, count_indices=ci)) if rank is not None else \
            ("one rank", rpca_count(n, 1, 0))
        raise BudgetError(below_smallest(budget, n, *smallest))
    ranks = _grid_ranks(min(cap, tsvd_rank_for_budget(n, budget)), rank_grid)
    splits = [(r, rpca_sparse_for_budget(n, budget, r, count_indices=ci)) for r in ranks]
    splits = [(r, s) for r, s in splits if r or s]  # a split that stores nothing is no approximation
    if not splits and zero is not None and zero():
        return [(0, 0)]  # the zero matrix: exact, storing nothing, within any budget
    if not splits:
        raise BudgetError(below_smallest(budget, n, one_sparse_entry(ci), rpca_count(n, 0, 1, count_indices=ci)))
    return splits


# --------------------------------------------------------------------------- one split
#: The start SVD (:func:`~.tsvd.leading_svd`), TruncatedSVD's own answer, so that the largest-rank grid point
#: starts from it; under its name here since before (the tests time it).
_start_svd = leading_svd


def _scored(dense: np.ndarray, U, sig, Vt, n_sparse: int, norm: float, n_iter: int = 0,
            stop_reason: str | None = None) -> _Candidate:
    """``L = U diag(sig) Vt`` with its best ``S`` (:func:`_score`).  ``stop_reason`` None: a split settled without
    GoDec (:func:`~._rpca_parts.settled_stop`); ``L`` with no ``S`` is the start SVD's, LAPACK's best rank-r up to
    :data:`~.tsvd.EXACT_MAX_N` (:func:`~.tsvd.leading_svd`)."""
    scored = _score(dense, U, sig, Vt, n_sparse, norm)
    if stop_reason is None:
        best_rank = n_sparse == 0 and sig.size > 0 and dense.shape[0] <= EXACT_MAX_N
        stop_reason = settled_stop(scored[0], norm, best_rank)
    return _Candidate(*scored, n_iter, stop_reason)


def _fit_split(dense: np.ndarray, Xt, rank: int, n_sparse: int, start, *, max_iter: int, tol: float, norm: float,
               deadline: _timing.Deadline | None = None, first_step: float = 0.0,
               scored: tuple[_Candidate, float] | None = None, report: Reporter | None = None) -> _Candidate:
    """GoDec at one split from the float64 start ``(U, sigma, Vt)`` (at least ``rank`` wide); ``norm`` is
    ``||dense||_F``.

    The start itself (TSVD's ``L`` with its best ``S`` for the largest rank)
    is a candidate too, so that a float32 (GPU) fit cannot lose to it by
    round-off: the result is never worse than the start.  ``scored``: the
    start already scored (:func:`_scored`) and the seconds that took, where
    the caller scored it first to price the rest.  ``report``: GoDec's progress (:func:`_godec`).
    """
    import torch

    U0, s0, Vt0 = start[0][:, :rank], start[1][:rank], start[2][:rank]
    if scored is None:
        began = _timing.now()
        first = _scored(dense, U0, s0, Vt0, n_sparse, norm)
        scoring = _timing.now() - began
    else:
        first, scoring = scored
    if rank == 0 or n_sparse == 0:
        # r = 0: S = the s largest entries of X; s = 0: L = the start (their stop: _scored's).
        return first
    if deadline is not None and deadline.end is not None:
        # GoDec stops early enough for its result to be scored as the start just was.
        deadline = _timing.Deadline(deadline.end - scoring)
    U, sig, Vt = (torch.as_tensor(np.ascontiguousarray(a), dtype=Xt.dtype, device=Xt.device) for a in (U0, s0, Vt0))
    U, sig, Vt, n_iter, reason = _godec(Xt, rank, n_sparse, U, sig, Vt, max_iter=max_iter, tol=tol, deadline=deadline,
                                        first_step=first_step, report=report)
    fitted = _scored(dense, *_to_numpy(U, sig, Vt), n_sparse, norm, n_iter, reason)
    if first.error < fitted.error:
        first.n_iter, first.stop_reason = n_iter, reason
        return first
    return fitted


def _fit_grid(dense: np.ndarray, Xt, splits, *, seed: int, deadline: _timing.Deadline | None = None,
              count_indices: bool = COUNT_INDICES, report: Reporter | None = None, norm: float | None = None,
              **options) -> tuple[_Candidate, list[dict]]:
    """GoDec at every split from one shared start SVD; the smallest error wins, and of the splits that
    reproduce ``X`` (:func:`~._rpca_parts.preferred`) the one storing fewest numbers.

    The largest rank's split runs first and always: its start (TSVD's ``L``
    with its best ``S``) is scored, which prices a scoring, and GoDec goes on
    from it only where the rest of its least work (:data:`GODEC_LEAST_SCORINGS`
    scorings in all) ends by ``deadline``: the grid is never worse than TSVD,
    however little time is left after the start SVD.  (The exact ends ran
    first before: a 40 x 40 kernel at 760 numbers, one scoring of 15 s left,
    ended at its largest entries alone, 4000 x TSVD's error.)  Every later
    split, the exact ends (rank 0: the largest entries; no sparse part: TSVD)
    included, starts only when its least work fits the time left, one scoring
    for an exact end, :data:`GODEC_LEAST_SCORINGS` for a GoDec split; those
    that do not fit are skipped (their grid records say so).

    One exception runs first of all: the all-sparse end (rank 0) where ``X``'s
    non-zeros fit in it, which reproduces ``X`` (a count of the non-zeros says
    so, without a scoring), as from columns.  It ran last, and a time limit
    spent on GoDec skipped it: a scipy sparse ``X`` of 1,285 non-zeros at N = 257
    ended at 1.4e-3 of ``||X||`` in 23,129 numbers, where its entries reproduce
    it in 2,570.

    Once a split reproduces ``X`` (:func:`~.tsvd.reproduces`), only the splits
    of a lower rank than it keeps are fitted (they may store fewer numbers);
    the others are marked ``skipped: "exact"``, as from columns.  The start SVD
    is made only where a split needs it: not where ``X``'s own entries settle it.

    ``report`` (a :class:`~sfapprox._progress.Reporter`) is told each stage (the start SVD, each
    split) and given GoDec's iterations and every error the fit computes anyway.  ``norm``: ``||dense||_F``
    where the caller computed it (None: computed here).
    """
    report = report or Reporter(None)
    n = dense.shape[0]
    norm = float(np.linalg.norm(dense)) if norm is None else norm
    top = max(splits)  # the largest rank: its start is TSVD's L
    nnz = int(np.count_nonzero(dense))
    exact_end = [split for split in splits if split[0] == 0 and split[1] >= nnz and split != top]
    best, records, scoring, start = None, {}, 0.0, None
    order = exact_end + [top] + [split for split in splits if split != top and split not in exact_end]
    for i, (rank, n_sparse) in enumerate(order, 1):
        if best is not None and reproduces(best.error, norm) and rank >= best.kept()[0]:
            # X reproduced: a split of no lower rank holds the same directions and more, and is not fitted (as
            # from columns); one of a lower rank may store fewer numbers.  (A 3,000-node graph whose non-zeros
            # fit went on to the start SVD and every GoDec split: 64 s for the answer its entries gave at once.)
            records[rank, n_sparse] = skipped_record((rank, n_sparse), "exact")
            continue
        if start is None and (rank, n_sparse) not in exact_end:  # made once, where a split needs it
            report.at("start SVD")
            start = _start_svd(dense, top[0], seed, deadline)
        report.at(split_stage(i, len(splits), rank))
        godec = rank > 0 and n_sparse > 0
        if (rank, n_sparse) in exact_end:
            cand = _all_entries(dense, norm)  # X's own non-zeros: no selection, no time check
        elif (rank, n_sparse) == top:
            began = _timing.now()
            first = _scored(dense, start[0][:, :rank], start[1][:rank], start[2][:rank], n_sparse, norm)
            scoring = _timing.now() - began
            first.split = top
            if godec and deadline is not None and not deadline.fits((GODEC_LEAST_SCORINGS - 1) * scoring):
                # no refit fits after its start: TSVD's L with its best S, never worse than TSVD
                first.stop_reason = "time_limit"
                cand = first
            else:
                cand = _fit_split(dense, Xt, rank, n_sparse, start, deadline=deadline, norm=norm,
                                  scored=(first, scoring), report=report, **options)
            del first  # (cand where it is the result): its sparse part is not held through the later splits
        else:
            # Its least work, at the cost of a scoring measured on the largest rank's start.
            least = GODEC_LEAST_SCORINGS * scoring if godec else scoring
            if deadline is not None and not deadline.fits(least):
                records[rank, n_sparse] = skipped_record((rank, n_sparse), "time_limit")
                continue
            cand = _fit_split(dense, Xt, rank, n_sparse, start, deadline=deadline, norm=norm, report=report, **options)
        report(cand.error, steps=0)  # (scored in float64: the split's error, as its record says)
        cand.split = (rank, n_sparse)
        records[rank, n_sparse] = cand.record((rank, n_sparse), n, count_indices)
        if best is None or preferred(cand.error, cand.count(n, count_indices), best.error,
                                     best.count(n, count_indices), norm):
            best = cand
        cand = None  # (best where it is the best): not held through the next split
    return best, [records[split] for split in splits]  # reported in the grid's order


def _all_entries(dense: np.ndarray, norm: float) -> _Candidate:
    """The all-sparse split that holds every non-zero of ``X``: ``S = X``, what :func:`_scored` gives at rank 0
    (the entries that carry only round-off left out, :func:`carrying_entries`) without selecting the largest."""
    n = dense.shape[0]
    flat = dense.reshape(-1)
    idx = np.flatnonzero(flat)
    vals = flat[idx]
    kept, error = carrying_entries(vals, 0.0, n, norm)
    return _Candidate(error, np.zeros((n, 0)), np.zeros(0), np.zeros((0, n)), idx[kept], vals[kept])


def _entries_alone(dense: np.ndarray, splits, norm: float, count_indices: bool) -> tuple | None:
    """PCP's result where ``X``'s non-zeros fit the budget's all-sparse split (rank 0): ``S = X``, exact, its
    grid's other splits ``skipped: "exact"`` and PCP not run (``pcp_iterations`` 0, ``pcp_skipped``); None
    where they do not fit.  A 3,000-node graph whose 60,000 non-zeros fit ran its start SVD, PCP and every
    refit, 32 s, to end at those entries."""
    n, nnz = dense.shape[0], int(np.count_nonzero(dense))
    end = next((split for split in splits if split[0] == 0 and split[1] >= nnz), None)
    if end is None:
        return None
    cand = _all_entries(dense, norm)
    if not reproduces(cand.error, norm):  # (its error is what carrying_entries left out: round-off)
        return None
    cand.split = end
    records = [cand.record(end, n, count_indices) if split == end else skipped_record(split, "exact")
               for split in splits]
    return cand, records, {"pcp_iterations": 0, "pcp_skipped": "exact"}


def _cut_error(X: np.ndarray, U, sig, Vt, idx: np.ndarray, vals: np.ndarray) -> float:
    """``||X - L_r - E_kept||_F`` for PCP's ``r`` leading triplets and its sparse part's kept
    entries (flat positions ``idx``, values ``vals``)."""
    R = _residual(X, U, sig, Vt)
    R.reshape(-1)[idx] -= vals
    return float(np.linalg.norm(R))


def _low_rank_error(norm: float, sig: np.ndarray, rank: int) -> float:
    """``||X - X_r||_F`` of the best rank-``r`` ``X_r = U_r diag(sig_r) Vt_r`` from its singular values:
    ``sqrt(||X||^2 - ||sig_r||^2)`` (its factors orthonormal, ``sig`` = ``U^T X V``), no residual formed."""
    kept = sig[:rank]
    return math.sqrt(max(0.0, norm * norm - float(kept @ kept)))


def _fit_pcp(dense: np.ndarray, Xt, split_for, *, pcp_tol: float, max_iter: int, tol: float,
             deadline: _timing.Deadline | None = None, seed: int = DEFAULT_SEED, count_indices: bool = COUNT_INDICES,
             report: Reporter | None = None, norm: float | None = None) -> tuple:
    """PCP, cut to each split of the grid, each split refitted with GoDec; the smallest refitted error wins.

    ``split_for(max_rank)`` gives the ``(rank, n_sparse)`` splits allowed with
    ranks at most ``max_rank`` (None: all the budget holds).  The grid is that
    of PCP's natural rank and the whole budget's above it, the largest rank the
    budget holds included (TSVD's, its sparse part what the budget leaves): a
    low rank + sparse fit is then never worse than TSVD at the same budget,
    which PCP's own grid alone could be (a kernel matrix PCP gave natural rank
    21: its rank-9 refit from PCP's ``L`` ended at 7.0e-4 of ``||X||`` where
    TSVD's rank 9 has 1.2e-4).  With TSVD's rank alone above PCP's, a graph of
    three blocks (N = 90, 1500 numbers) PCP gave rank 1 ended at rank 1, 0.638
    of ``||X||``, where rank 4 from ``X``'s best rank-4 reaches 0.567 (as GoDec
    does).  A split above PCP's rank but TSVD's is not refitted where the best
    so far is within ``tol ||X||`` of ``X`` (its record: ``skipped: "tol"``).

    Each split is refitted from PCP's cut (its ``r`` leading triplets and
    ``E``'s largest entries), within the cut's error; where PCP has not the
    rank, or without a sparse part, from ``X``'s best rank-``r`` (TSVD's ``L``),
    within ``sqrt(||X||^2 - ||sigma_r||^2)``; the largest-rank split from both,
    the better kept.  A refit is never worse than its start, so that split
    ends at or below TSVD's error.  Starting every split from the start of
    smaller bound instead lost to PCP's start where its refit was the better
    (a kernel matrix, N = 60: 4.0e-2 of ``||X||`` where PCP's start gives
    3.6e-2), and both starts everywhere doubled the refits' time for one
    gain in twenty cases (a 40 x 40 Gaussian, 0.634 -> 0.632).  ``X``'s SVD is
    computed once, before PCP (whose time check then counts it).

    The largest rank's start from ``X``'s best rank-``r`` is scored first,
    before PCP: what a scoring costs at this size, which every later step
    under ``deadline`` leaves room for, and the result where nothing more
    fits.  The refits run smallest bound first; under ``deadline`` those whose
    least work would not end by it are skipped (their grid records say so),
    and where not even the first's does, its start is scored alone where that
    one scoring fits: the result is within the smallest bound or the largest
    rank's, so within TSVD's error.  Of the splits
    that reproduce ``X`` the one storing fewest numbers wins
    (:func:`~._rpca_parts.preferred`).  Returns the candidate, its grid record
    list (each record's ``start``: ``"pcp"`` or ``"tsvd"``, and where both ran
    ``other_start``, the other's ``start`` and ``fro_error``) and the PCP
    entries of ``params_`` (``start``, ``cut`` and ``cut_error``: the chosen
    split's start and PCP cut).  ``report`` and ``norm``: as :func:`_fit_grid`'s (PCP's iterations, then
    each refit's).
    """
    import torch

    report = report or Reporter(None)
    n = dense.shape[0]
    norm = float(np.linalg.norm(dense)) if norm is None else norm
    top = max(split_for(None))  # the largest rank the budget holds, with what it leaves to S
    entries = _entries_alone(dense, split_for(None), norm, count_indices)
    if entries is not None:
        report(entries[0].error, steps=0)
        return entries
    # X's best rank-r for every r of the grid, from one SVD (TSVD's own, as TruncatedSVD computes it)
    report.at("start SVD")
    # No time is kept back in this SVD for the one scoring after it, which the result needs (a row needs its
    # error): where the SVD uses the limit up, that scoring runs past it.  A price for it before the SVD's power
    # iterations would come from the SVD's measured products, and does not hold on a shared machine: in six fits
    # at N = 4,096 (load 5-7) the products took 0.19-0.42 s and the scoring after them 0.40-3.88 s (its residual
    # 0.20-2.29 s, its selection 0.17-1.14 s), 3-13 products; a price off by that much either runs past the
    # limit still or takes the SVD's power iterations for a quick scoring (a price from a sample of X was off
    # 2x under load at N = 8,192 and left the SVD none: relative error 0.206 where 0.118 is reached).
    low = _start_svd(dense, top[0], seed, deadline)
    # The largest rank's start (X's best rank-r with its best S) scored first, as the GoDec grid's: the result
    # the fit keeps however little time is left, and the price of a scoring (a dense residual and the
    # selection of its largest entries) measured at this split's size, which every later step leaves room
    # for.  It was priced from the selection of PCP's E, mostly zeros and nearly free, where a residual's
    # selection of 745k entries took 2.3 s at N = 8,192: the refits' scorings ended the call at 1.44x its
    # limit.  (Its refit, which always runs when the time allows, starts from it: no scoring more.)
    report.at("scoring the start")
    began = _timing.now()
    first = _scored(dense, low[0][:, :top[0]], low[1][:top[0]], low[2][:top[0]], top[1], norm)
    scoring = _timing.now() - began
    # Float32 cannot reach a residual of 1e-7 relative: stop at its round-off instead.
    ptol = max(pcp_tol, 10 * torch.finfo(Xt.dtype).eps)
    began = _timing.now()
    report.at("PCP")
    U, sig, Vt, E, pcp_iter, pcp_converged = _pcp_ialm(Xt, lam=1.0 / math.sqrt(n), tol=ptol, max_iter=max_iter,
                                                        deadline=deadline, partial=n > EXACT_MAX_N, seed=seed,
                                                        report=report)
    # A GoDec iteration of the refit costs about what a PCP iteration did (a rank-r SVD step and a
    # residual): the refit's first one runs only when that fits.
    per_iteration = (_timing.now() - began) / max(1, pcp_iter)
    natural_rank, natural_nnz = int(sig.numel()), int(torch.count_nonzero(E))
    U, sig, Vt, E = _to_numpy(U, sig, Vt, E)
    # PCP's grid (ranks at most its natural rank, the rest of the budget to S) and the whole budget's grid
    # above it, each split there refitted from X's best rank-r: with TSVD's rank alone above it, a graph of
    # three blocks (N = 90, 1500 numbers) PCP gave rank 1 kept rank 1 (0.638 of ||X||) where rank 4 from
    # X's best rank-4 reaches 0.567.  (The grid's order: largest rank first; split_for(None) holds top.)
    splits = sorted({*split_for(natural_rank), *split_for(None)}, reverse=True)
    # E's largest entries once, in order (larger first, ties to the earlier position): a split's
    # kept entries are a prefix of it.
    # Under a deadline the selection and each cut (a dense residual: 1.5 s at N = 8,192, six of them
    # 9 s past a 10 s limit) run only while the time left pays for them; a split left uncut is refitted
    # from X's best rank-r alone (its bound TSVD's), a rank-0 one (S alone) last.
    # The selection of E's entries (fewer and no more than a scoring's: priced as one) runs when it, a cut and
    # the one scoring that a cut's start needs fit.
    cutting_fits = deadline is None or deadline.fits(2 * scoring)
    idx, vals = _largest(E, max(min(s, natural_nnz) for _, s in splits)) if cutting_fits else (np.zeros(0, dtype=np.int64), np.zeros(0))
    order = np.lexsort((idx, -np.abs(vals)))
    idx, vals = idx[order], vals[order]
    del E
    cuts, starts, bounds = {}, {}, {}
    cut_seconds, computed = 0.0, 0
    for rank, n_sparse in splits:
        kept = min(n_sparse, natural_nnz)
        cut = None
        # A cut runs when it and the one scoring of a start after it fit: the cuts ran to the limit and the
        # scoring after them ended 0.9 s past it at N = 8,192 (a cut 0.19 s, the scoring 1.9 s).
        per_cut = cut_seconds / max(1, computed)
        if cutting_fits and (deadline is None or deadline.fits(per_cut + scoring)):
            began_cut = _timing.now()
            cut = _cut_error(dense, U[:, :rank], sig[:rank], Vt[:rank], idx[:kept], vals[:kept])
            cut_seconds, computed = cut_seconds + _timing.now() - began_cut, computed + 1
        cuts[rank, n_sparse] = (cut, kept)
        lowrank = _low_rank_error(norm, low[1], rank)
        # Each start with the error bound it refits within, smaller bound first.  PCP's L only where it has
        # the rank and S its entries (s = 0: GoDec stops before its first L-step, which kept PCP's shrunk
        # singular values, twice TSVD's error at the same rank).  X's best rank-r where PCP's is not one,
        # and at the largest rank: the split that keeps RPCA within TSVD's error.
        tried = {}
        if cut is not None and 0 < rank <= natural_rank and n_sparse > 0:
            tried["pcp"] = cut
        if rank > 0 and (not tried or (rank, n_sparse) == top):
            tried["tsvd"] = lowrank
        starts[rank, n_sparse] = sorted(tried, key=tried.get)
        # (rank 0: S is X's largest entries; uncut, its bound is unknown and it goes last)
        bounds[rank, n_sparse] = min(tried.values(), default=math.inf if cut is None else cut)
    del idx, vals  # E's entries served the cuts alone (a refit starts from PCP's L): not held through the refits
    # A GoDec refit (its start scored, an iteration, its result scored) runs when GODEC_LEAST_SCORINGS
    # scorings fit (one fewer from the largest rank's start, scored already), a split with an exact answer
    # (r = 0, s = 0) when one does.
    # Every split is refitted and the smallest refitted error wins: the bound does not rank the refits
    # (a kernel matrix's best cut, refitted, ended 10x above another split's refit and above TSVD's).
    # The smallest bound goes first: when the time left pays for one refit alone, it is that one.
    best, records, chosen = None, {}, {}
    for i, split in enumerate(sorted(splits, key=lambda split: bounds[split]), 1):
        rank, n_sparse = split
        report.at(f"refit {split_stage(i, len(splits), rank)}")
        godec = rank > 0 and n_sparse > 0
        if best is not None and reproduces(best.error, norm) and rank >= best.kept()[0]:
            # X reproduced: a split of no lower rank holds the same directions and more (as in _fit_grid)
            records[split] = skipped_record(split, "exact")
            continue
        if natural_rank < rank and split != top and best is not None and best.error <= tol * norm:
            # A split above PCP's rank is not refitted where the best so far is within tol * ||X|| of X: it could
            # gain less than GoDec's own tolerance (a planted rank 2 + 100 entries, N = 60, PCP's rank-2 refit at
            # 1e-10 of ||X||, took 0.8 s for three such refits of 200 iterations each, where it took 0.2 s).
            records[split] = skipped_record(split, "tol", start="tsvd")
            continue
        for name in starts[split] or [None]:
            start = (U, sig, Vt) if name == "pcp" else low
            begun = {"start": name} if name else {}
            scored = (first, scoring) if split == top and name != "pcp" else None  # the start scored first
            least = (GODEC_LEAST_SCORINGS - (scored is not None) if godec else 1) * scoring
            fits = deadline is None or deadline.fits(least)
            if not fits and scored is not None:
                first.stop_reason = "time_limit"
                cand = first  # no refit fits: its start, scored already, at no cost
            elif not fits and (best is not None or not deadline.fits(scoring)):
                # (the largest rank's start scored first is the result where no other is)
                records.setdefault(split, skipped_record(split, "time_limit", **begun))
                continue
            elif not fits:
                # no refit fits: the smallest bound's start is scored alone (one scoring, which fits)
                cand = _scored(dense, start[0][:, :rank], start[1][:rank], start[2][:rank], n_sparse, norm, 0,
                               "time_limit")
            else:
                cand = _fit_split(dense, Xt, rank, n_sparse, start, max_iter=max_iter, tol=tol, deadline=deadline,
                                  first_step=per_iteration, norm=norm, scored=scored, report=report)
            report(cand.error, steps=0)
            cand.split = split
            record = {**cand.record(split, n, count_indices), **begun}
            other = records.get(split)
            if other is not None and other.get("fro_error") is not None:
                # the split refitted from both starts: its record is the better refit's, naming the other's error
                worse, better = (other, record) if cand.error < other["fro_error"] else (record, other)
                record = {**better, "other_start": {"start": worse["start"], "fro_error": worse["fro_error"]}}
            records[split] = record
            if best is None or preferred(cand.error, cand.count(n, count_indices), best.error,
                                         best.count(n, count_indices), norm):
                best, chosen = cand, begun
            cand = scored = None  # (best where it is the best): not held through the next refit
        if split == top:
            first = None  # the largest rank's start served its refit: best where it is the best
    rank, n_sparse = best.split
    cut_error, kept = cuts[best.split]
    extra = {
        "natural_rank": natural_rank,
        "natural_nnz": natural_nnz,
        **chosen,
        "cut": {"rank": [natural_rank, min(rank, natural_rank)], "nnz": [natural_nnz, kept]},
        "cut_error": cut_error,
        "pcp_iterations": pcp_iter,
        "pcp_converged": pcp_converged,
    }
    return best, [records[split] for split in splits], extra  # reported in the grid's order


class RobustPCA(Approximation):
    """Low rank plus sparse: ``X ≈ U diag(sigma) V^T + S`` at a budget of stored numbers.

    Parameters
    ----------
    rank : int or None, default=None
        Rank ``r`` of the low-rank part.
    n_sparse : int or None, default=None
        Number ``s`` of nonzeros of the sparse part.
    budget : int or None, default=None
        Stored-number budget.  With only a budget the split between ``r`` and
        ``s`` is the best over the rank grid; with a budget and one of
        ``rank`` / ``n_sparse``, the other takes the rest of the budget.
        Without a budget both ``rank`` and ``n_sparse`` are needed.
    count_indices : bool, default=True
        Charge each sparse entry for its position too (2 numbers per entry), as :func:`~sfapprox.compare`
        does; False: values only, the SF paper's convention and the default of
        :func:`~sfapprox.budget.rpca_count` (whose count is then lower).  ``params_["count_indices"]``
        says which rule ``n_stored_`` used.
    method : {"godec", "pcp"}, default="godec"
        GoDec at fixed rank and cardinality, or Principal Component Pursuit
        cut to the budget and refitted with GoDec.
    max_iter : int, default=200
        Maximum iterations of each GoDec run, and of PCP's ALM.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Wall-clock limit of the whole fit (every grid point, PCP and its
        refit), in seconds; None for none.  In memory GoDec's largest-rank
        split always runs, its start (TSVD's ``L`` and its best ``S``) at
        least, and every other split only where its least work fits the
        time left; from columns, where not one residual pass fits, the
        result is the low rank start alone (its grid all skipped).
    tol : float, default=1e-6
        GoDec stops when ``||X - L - S||_F`` changes by a relative ``tol`` or less.
    pcp_tol : float, default=1e-7
        PCP stops when ``||X - L - S||_F / ||X||_F < pcp_tol`` (Lin, Chen & Ma's value).
    rank_grid : sequence of int or None, default=None
        Ranks tried with only a budget (capped at the largest that fits);
        None: ``RANK_FRACTIONS`` of the largest rank that fits.
    random_state : int, default=0
        Seed of the randomized SVD start (``N > tsvd.EXACT_MAX_N``).
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the iterations run; ``"auto"``: a CUDA GPU when available.
    dtype : {"float64", "float32"} or None, default=None
        None: float64 on CPU, float32 on GPU.
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Bytes the dense work arrays may take; refused before any work above it
        (None: 80% of the physical memory).  A fit from a
        :class:`~sfapprox.sources.MatrixSource`'s columns is refused before
        any pass where what it keeps beside its passes' blocks is over it,
        and its passes are sized for it (None: the source's own limit, else
        80%).
    callback : callable or None, default=None
        Progress, as ChordSF's ``callback``: called with a dict after each GoDec (or PCP) iteration
        (``iteration``, counted over the whole grid, ``max_iter``, every split's together,
        ``fro_error``, the current iterate's ``||X - L - S||_F``, which each iteration computes
        anyway, ``elapsed``) and as each stage starts (``stage``: ``"start SVD"``, ``"PCP"``,
        ``"split 2/5, rank 39"``); what it returns is not read.

    Attributes
    ----------
    operator_ : HybridOperator
        ``L + S`` as a LinearOperator, ``O(N r + s)`` per matvec.
    L_ : tuple of ndarray
        ``(U, sigma, Vt)`` with shapes ``(N, r)``, ``(r,)``, ``(r, N)``.
    S_ : scipy.sparse.csr_array
        The sparse part (float64, ``n_sparse_`` stored entries).
    rank_, n_sparse_ : int
    n_stored_ : int
        ``rpca_count(N, rank_, n_sparse_, count_indices=count_indices)``.
    index_storage_ : int
        Positions ``S`` needs (``n_sparse_``), reported whatever ``count_indices`` is.
    seconds_ : float
    fro_error_, rel_error_ : float, float or None
        ``||X - L - S||_F`` and that over ``||X||_F``, as the fit scored its chosen split in float64 (the
        same as :meth:`frobenius_error` to round-off; the relative error None for X all zeros).  None
        after a fit from columns, whose errors are differences of sums of squares: score it there.
    stop_reason_ : str
        The chosen split's: ``"exact"`` (it reproduces ``X``, or no sparse part and LAPACK's best rank-r),
        ``"closed_form"`` (the largest entries alone, or a randomized SVD's ``L`` alone), ``"converged"``,
        ``"max_iter"`` or ``"time_limit"``.
    params_ : dict
        ``rank``, ``n_sparse`` (what is stored), ``count_indices``, ``index_storage``, ``method``,
        ``split`` (the ``[rank, n_sparse]`` fitted, where fewer are stored: singular values and
        sparse entries that carry only round-off are not, see :func:`carrying_rank` and
        :func:`carrying_entries`), ``iterations``, ``converged``, ``svd``, ``grid`` (one record
        per split tried: ``rank``, ``n_sparse``, ``fro_error``, ``iterations``, ``count`` (the
        numbers its result stores), and ``rank_kept``, ``n_sparse_kept`` where that is fewer
        than the split's), ``device``, ``dtype``; for PCP also ``natural_rank``, ``natural_nnz``,
        ``cut`` (``{"rank": [natural, kept], "nnz": [natural, kept]}``), ``cut_error`` (None where
        the time limit left that split uncut), ``start`` (the chosen split's refit started from PCP's cut, ``"pcp"``, or from ``X``'s
        best rank-r, ``"tsvd"``; absent at rank 0; each grid record names its own, and
        ``other_start`` where a split was refitted from both), ``pcp_iterations``, ``pcp_converged``; where
        ``X``'s non-zeros fit the all-sparse split, PCP is not run: ``pcp_iterations`` 0 and
        ``pcp_skipped: "exact"`` alone.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.outer(rng.random(30), rng.random(30))
    >>> X[3, 7] += 5.0
    >>> rp = RobustPCA(rank=1, n_sparse=1, device="cpu").fit(X)  # 61 numbers for rank 1, 2 for the entry
    >>> rp.n_stored_, bool(np.allclose(rp.to_dense(), X))
    (63, True)
    """

    @property
    def method_name(self) -> str:
        return "rpca-pcp" if self.method == "pcp" else "rpca"

    _accepts_sources = True
    #: Rows of a comparison whose fits the fit from columns starts from (see ``_reused_start``).
    REUSES: tuple[str, ...] = ("rsvd",)
    _parameter_constraints = {
        "rank": Interval(int, 0, None, allow_none=True),
        "n_sparse": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "count_indices": bool,
        "method": Options(("godec", "pcp")),
        "max_iter": Interval(int, 1, None),
        "tol": Interval(float, 0, None),
        "pcp_tol": Interval(float, 0, None),
        "time_limit": Interval(float, 0, None, allow_none=True),
        "rank_grid": (None, list, tuple),
        "random_state": SEED,
        "device": str,
        "dtype": (Options(("float64", "float32", "auto")), None),
        "max_memory": MEMORY_LIMIT,
        "callback": (Callable, None),
    }

    def __init__(
        self,
        rank: int | None = None,
        n_sparse: int | None = None,
        *,
        budget: int | None = None,
        count_indices: bool = COUNT_INDICES,
        method: str = "godec",
        max_iter: int = 200,
        tol: float = 1e-6,
        pcp_tol: float = 1e-7,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        rank_grid: list[int] | tuple[int, ...] | None = None,
        random_state: int = DEFAULT_SEED,
        device: str = "auto",
        dtype: str | None = None,
        max_memory: int | str | None = None,
        callback: Callable[[dict], Any] | None = None,
    ):
        self.rank = rank
        self.n_sparse = n_sparse
        self.budget = budget
        self.count_indices = count_indices
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.pcp_tol = pcp_tol
        self.time_limit = time_limit
        self.rank_grid = rank_grid
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.max_memory = max_memory
        self.callback = callback

    # ------------------------------------------------------------------ fit
    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "RobustPCA":
        """Fit ``L + S`` to the square matrix ``X`` (dense or sparse; worked on densely).

        ``check_input=False`` skips validating ``X`` (the caller did).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square matrix.  A :class:`~sfapprox.sources.MatrixSource` is fitted
            by GoDec from its columns, never formed (``method="pcp"`` needs it
            formed: not applicable).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        RobustPCA
            ``self``, fitted.

        Raises
        ------
        ResourceError
            When the dense work arrays are over ``max_memory``.
        """
        import torch

        self._reusing = self._handed_over()
        X = self._validate(X, check_input)
        if isinstance(X, MatrixSource):
            return self._fit_columns(X)
        n = X.shape[0]
        zero = lambda: is_zero_matrix(X)  # noqa: E731
        splits = self._splits(n, zero=zero)  # checks the budget before any work
        try:
            check_memory(
                work_bytes(n, self.method, [rank for rank, _ in splits], entries=self._most_entries(n, splits)),
                what=f"RobustPCA ({self.method}) on a {n:,} x {n:,} matrix (dense work arrays)",
                limit=self._max_memory_bytes,
            )
        except ResourceError:
            if self.method != "godec":
                raise
            return self._fit_columns(columns_within(X, self._max_memory_bytes))  # GoDec from X's column blocks
        dense = X.toarray() if sp.issparse(X) else X
        device = resolve_device(self.device)
        dtype = resolve_dtype(self.dtype, device)
        start = time.perf_counter()
        deadline = None if self.time_limit is None else _timing.Deadline.after(self.time_limit)
        norm = float(np.linalg.norm(dense))  # once: every split's scoring, and the relative error kept
        options: dict[str, Any] = {"max_iter": self.max_iter, "tol": self.tol, "deadline": deadline,
                   "report": self._reporter(splits), "norm": norm}
        with few_threads(n, device):
            Xt = torch.as_tensor(dense, dtype=dtype, device=device)
            if self.method == "pcp":
                split_for = lambda max_rank: self._splits(n, max_rank, zero=zero)  # noqa: E731
                best, grid, extra = _fit_pcp(dense, Xt, split_for, pcp_tol=self.pcp_tol, seed=self.random_state,
                                             count_indices=self.count_indices, **options)
            else:
                best, grid = _fit_grid(dense, Xt, splits, seed=self.random_state, count_indices=self.count_indices,
                                       **options)
                extra = {}
        self.seconds_ = time.perf_counter() - start
        self._store(n, best, grid, extra, device, dtype)
        # The chosen split was scored in float64 against X (:func:`_score`: the norm of its residual): a
        # comparison takes that number rather than a pass more over X's N^2 entries outside the fit's seconds
        # (:func:`~sfapprox.comparison.row_error`).  It is operator_error's to round-off, not to the bit:
        # the residual there is X - (L + S), here X - L with S's positions set to 0.
        self.fro_error_ = float(best.error)
        self.rel_error_ = self.fro_error_ / norm if norm > 0 else None
        return self

    def _fit_columns(self, source: MatrixSource) -> "RobustPCA":
        """GoDec from the columns of a matrix too big to form (:mod:`._rpca_columns`); PCP needs it formed."""
        from .._errors import NotApplicableError
        from ._rpca_columns import fit_grid_columns

        if self.method != "godec":
            raise NotApplicableError("Principal Component Pursuit needs the matrix formed (its singular value "
                                     "thresholding works on all of it); rpca (GoDec) works from columns")
        n = source.n
        splits = self._splits(n)
        # What a comparison checks before it, for this fit from the API too (the fallback from a dense
        # matrix over the limit included): a large budget's sketch and entries over the limit are refused
        # before any pass
        stored = max(rpca_count(n, rank, n_sparse, count_indices=self.count_indices) for rank, n_sparse in splits)
        start = time.perf_counter()
        deadline = None if self.time_limit is None else _timing.Deadline.after(self.time_limit)
        given = self._reused_start(n)
        source = self._from_columns(source, stored)
        with AdaptiveThreads(float(n) * n):
            best, grid = fit_grid_columns(source, splits, max_iter=self.max_iter, tol=self.tol,
                                          seed=self.random_state, deadline=deadline,
                                          max_memory=room(source, self._max_memory_bytes),
                                          start=given, count_indices=self.count_indices,
                                          report=self._reporter(splits))
        self.seconds_ = time.perf_counter() - start
        extra = {"from": "columns", "path": "columns", "svd": "randomized",
                 **({"reused": ["rsvd"]} if given is not None else {})}
        self._store(n, best, grid, extra, "cpu", "float64")
        # From columns a split's error is a difference of sums of squares over a pass (||X - L||^2 - ||S||^2),
        # round-off's square root near an exact fit: not kept, the row is scored as any other (a comparison's
        # exact or sampled pass); None where no split fitted the time as well
        self.fro_error_ = self.rel_error_ = None
        return self

    def _reporter(self, splits: list[tuple[int, int]]) -> Reporter:
        """The fit's progress reports (:attr:`callback`), its ``max_iter`` the most iterations the grid may
        take: ``max_iter`` GoDec iterations per split that iterates, and for PCP its ALM iterations and
        the refits of a grid up to twice as long (PCP's and the budget's), two starts at the largest rank."""
        iterating = sum(1 for rank, n_sparse in splits if rank and n_sparse)
        runs = max(1, iterating) if self.method == "godec" else 2 * len(splits) + 2
        return Reporter(self.callback, max_iter=self.max_iter * runs)

    def _reused_start(self, n: int):
        """The comparison's ``rsvd`` fit of this matrix as every split's first ``L`` (None: none was handed over)."""
        from ._rpca_columns import Start

        fitted = self._reusing.get("rsvd")
        op = getattr(fitted, "operator_", None)
        if op is None or op.shape[0] != n or not getattr(op, "singular_values", False) or not fitted.params_.get("passes"):
            return None
        # (a pass cut short read a share of the columns: a whole one costs that much more)
        share = fitted.params_.get("columns_read", n) / n
        return Start(op.U, op.s, op.Vt, product_pass=float(fitted.seconds_) / (fitted.params_["passes"] - 1 + share))

    def _most_entries(self, n: int, splits: list[tuple[int, int]]) -> int:
        """The most sparse entries of a split the fit may try: of ``splits``, and for PCP of its grid's
        ranks below them too (down to rank 0, the most the budget leaves to S)."""
        most = max(n_sparse for _, n_sparse in splits)
        if self.method == "pcp" and self.n_sparse is None:  # (a given n_sparse is every split's)
            try:
                most = max([most] + [n_sparse for _, n_sparse in self._splits(n, 0)])
            except BudgetError:  # no rank-0 split (the zero matrix's (0, 0)): the splits' own count
                pass
        return most

    def _splits(self, n: int, max_rank: int | None = None,
                zero: Callable[[], bool] | None = None) -> list[tuple[int, int]]:
        return _resolve_splits(
            n,
            self.rank,
            self.n_sparse,
            self.budget,
            count_indices=self.count_indices,
            rank_grid=self.rank_grid,
            max_rank=max_rank,
            zero=zero,
        )

    def _store(self, n: int, best: _Candidate, grid: list[dict], extra: dict, device, dtype) -> None:
        """Set the fitted attributes from the chosen candidate."""
        # Exact zeros (singular values of a rank-deficient X, entries where X - L
        # is already 0) add nothing to the approximation and are not stored (nor, dropped
        # when the split was scored, what carries only round-off: carrying_rank, carrying_entries).
        used = best.sig > 0
        nonzero = best.vals != 0
        idx, vals = best.idx[nonzero], best.vals[nonzero]
        rank, n_sparse = int(used.sum()), int(idx.size)
        # (splits the time left untried lose nothing beside one that reproduces X)
        skipped = 0 if best.error == 0.0 else sum(1 for record in grid if record.get("skipped") == "time_limit")
        rows, cols = np.divmod(idx.astype(np.int64), n)
        self.L_ = (best.U[:, used], best.sig[used], best.Vt[used])
        self.S_ = sp.csr_array((vals.astype(np.float64), (rows, cols)), shape=(n, n))
        self.rank_, self.n_sparse_ = rank, n_sparse
        self.n_stored_ = rpca_count(n, rank, n_sparse, count_indices=self.count_indices)
        self.index_storage_ = n_sparse
        self.params_ = {
            "rank": rank,
            "n_sparse": n_sparse,
            "count_indices": self.count_indices,
            "index_storage": n_sparse,
            "method": self.method,
            # the split fitted, where round-off (singular values, entries) or exact zeros were not stored
            **({"split": list(best.split)} if best.split is not None and best.split != (rank, n_sparse) else {}),
            "iterations": best.n_iter,
            "converged": best.stop_reason in SETTLED,
            **({"splits_skipped": skipped} if skipped else {}),
            # (the kept split's rank-r step; an all-sparse one has none, and where X's own entries settled the
            # fit no SVD ran at all)
            **({"svd": "exact" if _use_exact_svd(n, rank) else "subspace"} if rank > 0 else {}),
            "grid": grid,
            "device": str(device),
            "dtype": str(dtype).replace("torch.", ""),
            **extra,
        }
        # A grid the time limit cut short stopped on it, whatever its best split's own stop (an all-sparse
        # split is exact: "stop=exact" read as a finished fit where one split of twelve had run).
        self.stop_reason_ = "time_limit" if skipped and best.stop_reason in SETTLED else best.stop_reason
        self.operator_ = HybridOperator(n, low_rank=self.L_, sparse=self.S_, count_indices=self.count_indices)
        if skipped:
            warnings.warn(f"RobustPCA ({self.method}) tried {len(grid) - skipped} of its {len(grid)} rank/sparse "
                          f"splits within time_limit={self.time_limit:g} s; increase it to try them all",
                          ConvergenceWarning, stacklevel=user_stacklevel())
        if best.stop_reason in ("max_iter", "time_limit"):
            # max_iter as it is written in Python (counted's "1,000" is not), with its word in the singular for 1
            limit = f"max_iter={self.max_iter} GoDec iteration{'s' * (self.max_iter != 1)}" if best.stop_reason == "max_iter" else (
                f"time_limit={self.time_limit:g} s ({counted(best.n_iter, 'GoDec iteration')})")
            warnings.warn(
                f"RobustPCA ({self.method}) stopped after {limit} before the error settled to "
                f"tol={self.tol:g}; increase {best.stop_reason} for a closer fit",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        if "pcp_converged" in extra and not extra["pcp_converged"]:
            cut = extra["pcp_iterations"] < self.max_iter  # by the time limit, not the iterations
            warnings.warn(
                f"PCP stopped after {counted(extra['pcp_iterations'], 'ALM iteration')} "
                f"({'its time limit' if cut else 'max_iter'}) before ||X - L - S|| / ||X|| < "
                f"pcp_tol={self.pcp_tol:g}; increase {'time_limit' if cut else 'max_iter'}",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )

    # ------------------------------------------------------------------ use
    def to_dense(self) -> np.ndarray:
        """The approximation ``L + S`` as a dense array.

        Returns
        -------
        numpy.ndarray
            The low-rank part plus the sparse part, of shape ``(N, N)``.
        """
        U, sig, Vt = self.L_
        return (U * sig) @ Vt + self.S_.toarray()


# --------------------------------------------------------------------------- registration
def _maker(method: str):
    def make(n: int, budget: int, context: RunContext) -> RobustPCA:
        # GoDec/ALM iterations are not SF's L-BFGS steps: --iters does not apply.
        est = RobustPCA(**context.settings.apply_to(RobustPCA, exclude=("max_iter",), budget=budget,
                                                    method=method, count_indices=context.count_indices,
                                                    callback=context.callback))
        # From columns, the rsvd row's fit of the same matrix gives each split its first L (not a
        # parameter: what a comparison hands over, as to the hybrids).
        est._reuse = {m: context.fitted[m] for m in RobustPCA.REUSES if m in context.fitted}
        return est

    return make


def _min_budget(n: int, context: RunContext) -> int:
    return rpca_count(n, 0, 1, count_indices=context.count_indices)  # one sparse entry


for _name, _method, _summary, _order in (
    ("rpca", "godec", "Robust PCA (GoDec): low rank + sparse, best split over a rank grid that includes s = 0", 30),
    ("rpca-pcp", "pcp", "Robust PCA by Principal Component Pursuit, cut to the budget and refitted", 31),
):
    register(MethodSpec(name=_name, summary=_summary, stores="r·(2N + 1) + s", make=_maker(_method),
                        min_budget=_min_budget, order=_order, label="low rank + sparse (RPCA)",
                        operators=("hybrid",),
                        access=("dense", "columns") if _method == "godec" else ("dense",),
                        reuses=RobustPCA.REUSES if _method == "godec" else (),
                        # from columns: L's sketch and factors and S's entries (a block's candidates are
                        # sized with the block); measured 5.2-6.4 x 8 budget beside the blocks, more at
                        # small budgets (the sketch's oversampling, per N)
                        columns_memory=(lambda n, budget: 8 * (5 * budget + 60 * n)) if _method == "godec" else None))
