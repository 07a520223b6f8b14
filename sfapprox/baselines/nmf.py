"""Non-negative matrix factorization ``X ≈ W H`` by accelerated HALS, at a budget.

Stored numbers: ``2 N r`` (W and H).  The solver is hierarchical alternating
least squares (Cichocki & Phan 2009): each column of ``W`` (row of ``H``)
has a closed-form non-negative least-squares update with the others fixed,
which is the same update as scikit-learn's coordinate descent ("cd").  As in
Gillis & Glineur's accelerated HALS (2012), the products ``X H^T`` and
``H H^T`` (``O(N^2 r)``) are formed once per half-step and reused by several
cheap inner sweeps (``O(N r^2)`` each).  The start is NNDSVD, NNDSVDa or
NNDSVDar (Boutsidis & Gallopoulos 2008) or seeded random values.

The objective ``||X - W H||_F`` never increases (each column update is an
exact minimisation).  Runs on the CPU or a CUDA GPU through torch; sparse
inputs stay sparse for the products.  On the CPU the inner sweeps of a half-step
are one compiled (numba) call (:mod:`._nmf_numba`), the per-column torch or numpy
calls where numba is missing.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._compiled import COMPILE_NOTE_SECONDS, CompiledModule
from .._device import resolve_device, resolve_dtype
from .._errors import ConvergenceWarning, NotApplicableError, user_stacklevel
from .._params import MEMORY_LIMIT, SEED, Interval, Options
from .._progress import Reporter
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT
from .._validation import is_zero_matrix
from ..budget import nmf_count, nmf_rank_for_budget, rank_within
from ..formats import counted
from ..metrics import operator_error
from ..operators import HybridOperator
from ..sources import MatrixLike
from ._torch import as_tensor, few_threads
from .tsvd import EXACT_MAX_N, EXACT_SVD_ARRAYS, leading_svd, preferred, round_off
from .tsvd import EXACT_TOL  # noqa: F401 - this module's own name for it before

__all__ = ["NMF"]

#: Floor of every factor entry.  HALS divides by ``(H H^T)_kk``, which must
#: stay positive; 1e-16 is the usual choice (Gillis & Glineur's code).
EPS = 1e-16

#: Outer iterations between two convergence checks.
CHECK_EVERY = 5

#: Accelerated-HALS inner-loop rule (Gillis & Glineur 2012): at most
#: ``1 + ALPHA * rho`` sweeps per half-step, where ``rho`` is the flop ratio of
#: forming the products to one sweep, and stop once a sweep changes the factor
#: by less than ``DELTA`` times what the first sweep changed.
ALPHA = 0.5
DELTA = 0.1

#: Cap on the inner sweeps.  In torch every column update is its own kernel
#: launch, so a sweep costs far more than its flops; measured at N = 1000,
#: r = 55, three sweeps reach scikit-learn's error in about half the time of
#: the uncapped flop rule (which allowed ten).
MAX_SWEEPS = 3

#: Where the compiled sweeps do not run (no numba), factors of at most this many entries (``N r``) are
#: updated on numpy views of the CPU tensors (:func:`_hals_sweeps`): below it a column's torch calls cost
#: more in overhead than in arithmetic.
SMALL_FACTOR = 4096

#: Under a time limit, ``init="auto"`` tries a further start only when the time left pays for
#: about this many iterations of it (at the first start's cost), its start and its scoring.
EXTRA_START_ITERATIONS = 20

#: Columns of ``X`` per block of a measured residual ``X - W H`` (:func:`_residual_norm`): a block
#: of ``N x RESIDUAL_BLOCK`` besides the fit's arrays, never an ``N x N`` one.
RESIDUAL_BLOCK = 256


#: Starts tried by ``init="best"`` and ``init="auto"`` (the first is the usual one).
BEST_INITS = ("nndsvda", "nndsvd", "nndsvdar", "random")


# --------------------------------------------------------------------------- starts
class _StartSVD:
    """The NNDSVD starts' SVD of one fit (:func:`~.tsvd.leading_svd` of ``X`` at ``rank``), computed once.

    Every NNDSVD variant starts from the same SVD of the same ``X`` with the same seed: ``init="auto"``
    computed it again for each (seconds each at N = 8,192).  Called with a deadline, it returns the SVD,
    or None where ``deadline`` cannot pay for it (``give_up``); a None is not kept, so a later call with
    more time left tries again, as each variant did before.
    """

    def __init__(self, X, rank: int, seed: int):
        self.X, self.rank, self.seed = X, rank, seed
        self.found: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: Seconds (:data:`~sfapprox._timing.clock`) spent computing it so far, tries given up included: what
        #: the start that paid for it took and a later start, sharing it, does not.
        self.seconds = 0.0

    def __call__(self, deadline: _timing.Deadline | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        if self.found is None:
            began = _timing.now()
            self.found = leading_svd(self.X, self.rank, self.seed, deadline, give_up=True)
            self.seconds += _timing.now() - began
        return self.found


def _nndsvd(X, rank: int, variant: str, seed: int, deadline: _timing.Deadline | None = None,
            svd: _StartSVD | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """NNDSVD start (Boutsidis & Gallopoulos 2008) and its a/ar variants, in numpy.

    ``"nndsvd"`` keeps the zeros, ``"nndsvda"`` fills them with the mean of
    ``X`` and ``"nndsvdar"`` with small random values (mean / 100), as
    scikit-learn does.  ``svd``: the fit's :class:`_StartSVD` of ``X``, ``rank`` and ``seed``, shared by
    its variants (None: one computed here).  None where ``deadline`` cannot pay for its SVD's products
    that no check cuts (:func:`~.tsvd.leading_svd`'s ``give_up``): the caller starts from random values instead.
    """
    svd = (svd or _StartSVD(X, rank, seed))(deadline)
    if svd is None:
        return None
    U, s, Vt = svd
    n = X.shape[0]
    W, H = np.zeros((n, rank)), np.zeros((rank, n))
    W[:, 0] = math.sqrt(s[0]) * np.abs(U[:, 0])
    H[0] = math.sqrt(s[0]) * np.abs(Vt[0])
    for j in range(1, rank):
        x, y = U[:, j], Vt[j]
        xp, xn, yp, yn = np.maximum(x, 0), np.maximum(-x, 0), np.maximum(y, 0), np.maximum(-y, 0)
        m_pos = np.linalg.norm(xp) * np.linalg.norm(yp)
        m_neg = np.linalg.norm(xn) * np.linalg.norm(yn)
        # Of the two sign patterns of the singular pair, keep the one with more mass.
        u, v, mass = (xp, yp, m_pos) if m_pos > m_neg else (xn, yn, m_neg)
        if mass > 0:
            scale = math.sqrt(s[j] * mass)
            W[:, j] = scale * u / np.linalg.norm(u)
            H[j] = scale * v / np.linalg.norm(v)
    W[W < 1e-6] = 0.0  # sklearn's threshold, so that the starts agree
    H[H < 1e-6] = 0.0
    mean = _mean(X)
    rng = np.random.default_rng(seed)
    for F in (W, H):
        zeros = F == 0
        if variant == "nndsvda":
            F[zeros] = mean
        elif variant == "nndsvdar":
            F[zeros] = np.abs(mean * rng.standard_normal(int(zeros.sum())) / 100)
    return W, H


def _mean(X) -> float:
    """The mean of ``X``'s entries; a compressed or COO sparse ``X``'s from its stored values.

    scipy's sparse ``mean()`` (1.12's at least) is a product of ``X`` with a column of ones: a
    pass over ``X`` that the start's time checks priced as one of the fit's products (NNDSVDa at a limit
    gave way to the random start).  Each stored value is divided by the number of entries before they
    are summed (their plain sum of ``1e308``s overflowed where ``mean()`` did not).
    """
    if getattr(X, "format", None) in ("csr", "csc", "coo") and math.prod(X.shape):
        return float(np.sum(np.asarray(X.data, dtype=np.float64) / math.prod(X.shape)))
    return float(X.mean())


def _random_start(X, rank: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``|N(0, 1)|`` values scaled so that ``W H`` has about the mean of ``X`` (sklearn's rule)."""
    n = X.shape[0]
    scale = math.sqrt(_mean(X) / rank)
    rng = np.random.default_rng(seed)
    W = scale * np.abs(rng.standard_normal((n, rank)))
    H = scale * np.abs(rng.standard_normal((rank, n)))
    return W, H


def _initialize(X, rank: int, init: str, seed: int, deadline: _timing.Deadline | None = None,
                svd: _StartSVD | None = None) -> tuple[tuple[np.ndarray, np.ndarray], str]:
    """The start ``(W, H)`` named by ``init`` (float64 numpy), its SVD's power iterations within ``deadline``,
    and the start it is: ``init``, or ``"random"`` where ``deadline`` could not pay for an NNDSVD's SVD
    (its first product and final projection, which no check cuts, ran past it: at N = 8,192 on 2 shared
    cores a product of 1-2 s each).  ``svd``: the fit's :class:`_StartSVD`, shared by its NNDSVD starts.
    The random start reads ``X`` once, for its mean."""
    if init != "random":
        start = _nndsvd(X, rank, init, seed, deadline, svd)
        if start is not None:
            return start, init
    return _random_start(X, rank, seed), "random"


# --------------------------------------------------------------------------- HALS
_COMPILED = CompiledModule("sfapprox.baselines._nmf_numba", "NMF sweeps",
                           "numpy/torch column updates (same results, up to 10-50x slower)")


def _hals_sweeps(F, XG, GG, max_sweeps: int, compiled: Callable[[Any, Any, int], int | None] | None = None) -> int:
    """Decrease ``||X - F G||`` over ``F >= EPS`` in place, column by column (G fixed).

    ``XG = X G^T`` and ``GG = G G^T`` are given.  Column ``k``'s exact
    minimiser with the others fixed is
    ``max(EPS, (XG[:, k] - sum_{j != k} F[:, j] GG[j, k]) / GG[k, k])``.
    On the CPU the sweeps are one compiled call (:func:`_compiled_sweeper`, ``compiled`` where the caller
    found it once for ``F``, else found here) where numba works; else (a GPU, or no numba) one torch or
    numpy call per column.  Returns the number of sweeps run.
    """
    compiled = compiled or _compiled_sweeper(F)
    ran = compiled(XG, GG, max_sweeps) if compiled is not None else None
    if ran is not None:
        return ran
    import torch

    # Divide once by the diagonal and zero it, so one fused addmv per column
    # gives the unconstrained minimiser.  A zero diagonal (an all-zero row of
    # G, impossible with the EPS floor) must not divide by zero.
    diag = torch.clamp(torch.diagonal(GG), min=torch.finfo(F.dtype).tiny)
    rhs = XG / diag
    coupling = GG / diag
    coupling.fill_diagonal_(0.0)
    if F.device.type == "cpu" and F.numel() <= SMALL_FACTOR:
        # the same updates on numpy views of the same memory: a torch call's overhead, not its flops, was
        # the cost of a small problem's column (7 x 7 at rank 6: 0.35 ms an iteration, 1.5-7 s a fit)
        Fn, rn, cn = F.numpy(), rhs.numpy(), coupling.numpy()

        def column(k: int) -> None:
            np.maximum(rn[:, k] - Fn @ cn[:, k], EPS, out=Fn[:, k])

        return _sweeps(column, F.shape[1], Fn.copy, lambda before: float(np.linalg.norm(Fn - before)), max_sweeps)

    def column(k: int) -> None:
        F[:, k] = torch.addmv(rhs[:, k], F, coupling[:, k], alpha=-1.0).clamp_(min=EPS)

    return _sweeps(column, F.shape[1], F.clone, lambda before: float(torch.linalg.vector_norm(F - before)),
                   max_sweeps)


def _load_compiled(device, dtype) -> None:
    """Compile the sweeps for ``dtype`` (or load them from numba's cache), on a 1 x 1 half-step, where a fit
    on ``device`` runs them (the CPU); a compile that fails gives them up here (said once)."""
    if device.type != "cpu" or not _COMPILED.get():
        return
    import torch

    one = torch.ones((1, 1), dtype=dtype)
    sweeps = _compiled_sweeper(one)
    if sweeps is not None:
        sweeps(one.clone(), one.clone(), 1)


def _compiled_sweeper(F) -> Callable[[Any, Any, int], int | None] | None:
    """``sweeps(XG, GG, max_sweeps)``: :func:`_hals_sweeps` of the CPU tensor ``F`` by
    :func:`._nmf_numba.hals_sweeps`, the same updates in one call for every sweep (the per-column calls
    cost ~30 us each of overhead for a few thousand flops), ``F``'s numpy view and constants found once
    (found on each call, they cost a fit at N = 16 three to four times the kernel's own time).

    None where the compiled module is unavailable or ``F`` is on a GPU or not C-contiguous (it is updated in
    place: W and H^T are made so).  The sweeps return None, and leave ``F`` as it was, once the module is
    given up: where it fails to compile (said once, :meth:`~sfapprox._compiled.CompiledModule.failed`).
    """
    if F.device.type != "cpu":  # (first: a GPU fit neither imports numba nor warns of its failures)
        return None
    module = _COMPILED.get()
    if not module:
        return None
    import torch

    Fn = F.numpy()
    if not Fn.flags.c_contiguous:
        return None
    kind = Fn.dtype.type
    eps, tiny = kind(EPS), kind(torch.finfo(F.dtype).tiny)

    def sweeps(XG, GG, max_sweeps: int) -> int | None:
        if not _COMPILED.module:
            return None  # (given up since: by this fit or another)
        XGn, GGn = np.ascontiguousarray(XG.numpy()), np.ascontiguousarray(GG.numpy())
        if XGn.shape != Fn.shape or GGn.shape != (Fn.shape[1],) * 2 or not XGn.dtype == GGn.dtype == Fn.dtype:
            # the compiled loops index without bounds checks: a mismatch would read out of bounds (a crash)
            raise ValueError(f"HALS sweeps of a factor {Fn.shape} {Fn.dtype} got X G^T {XGn.shape} {XGn.dtype} "
                             f"and G G^T {GGn.shape} {GGn.dtype}")
        try:
            return int(module.hals_sweeps(Fn, XGn, GGn, max_sweeps, eps, tiny, DELTA))
        except Exception as exc:  # a compile that fails (a broken llvmlite): the column loops from now on
            _COMPILED.failed(exc)
            return None

    return sweeps


def _sweeps(column: Callable[[int], None], columns: int, snapshot: Callable[[], Any],
            change: Callable[[Any], float], max_sweeps: int) -> int:
    """Up to ``max_sweeps`` sweeps of ``column(k)`` over the ``columns`` columns (torch calls, or numpy for
    small factors on the CPU: :func:`_hals_sweeps`), stopping once a sweep's ``change`` from its
    ``snapshot`` (taken before it) is at most ``DELTA`` times the first sweep's; the sweeps run."""
    first = None
    for sweep in range(1, max_sweeps + 1):
        before = snapshot() if max_sweeps > 1 else None
        for k in range(columns):
            column(k)
        if before is None:
            break
        moved = change(before)
        first = moved if first is None else first
        if moved <= DELTA * first:
            break
    return sweep


def _max_sweeps(n: int, rank: int) -> int:
    """``1 + ALPHA * rho`` (the sweeps that cost about as much as forming the products),
    at most ``MAX_SWEEPS``.

    ``rho`` takes the dense product cost (``N^2`` entries) whatever the storage: the
    number of sweeps changes the HALS path and so the local minimum reached, and one
    matrix must give one answer (Sawmill at rank 21: 3.43 with the sparse cost, 3.24
    with the dense one; scikit-learn's best is 3.23).
    """
    rho = 1.0 + (n * n * rank + n * rank) / (n * rank * (rank + 1))
    return max(1, min(MAX_SWEEPS, int(1 + ALPHA * rho)))


def _squared_error(norm_x2: float, H, XtW, WtW) -> float:
    """``||X - W H||^2 = ||X||^2 - 2 <H, W^T X> + <W^T W, H H^T>`` from small products."""
    value = norm_x2 - 2.0 * float((H * XtW.T).sum()) + float((WtW * (H @ H.T)).sum())
    return max(value, 0.0)


def _residual_norm(X, W, H) -> float:
    """``||X - W H||_F`` of a dense tensor ``X``, by blocks of :data:`RESIDUAL_BLOCK` columns (no
    ``N x N`` product): no difference of squares, so it resolves errors down to round-off."""
    import torch

    total = 0.0
    for j in range(0, X.shape[1], RESIDUAL_BLOCK):
        block = torch.addmm(X[:, j:j + RESIDUAL_BLOCK], W, H[:, j:j + RESIDUAL_BLOCK], alpha=-1.0)
        total = math.hypot(total, float(torch.linalg.vector_norm(block)))
    return total


def _fit_hals(X, Xt, W, H, *, max_iter: int, tol: float, norm_x2: float,
              deadline: _timing.Deadline | None = None, measure: Callable | None = None,
              report: Reporter | None = None) -> tuple:
    """Accelerated HALS from ``(W, H)``; ``X`` and ``Xt = X^T`` are dense or sparse-CSR tensors.

    Stops when the Frobenius error fell by a relative ``tol`` or less since
    the previous check (checks every ``CHECK_EVERY`` iterations), when it is
    below what the small-product formula resolves (``sqrt(eps) ||X||``),
    after ``max_iter`` outer iterations, or before an iteration that, at the
    cost of the last one, would end after ``deadline`` (a
    :class:`~sfapprox._timing.Deadline`; the first iteration always runs: a start alone is no NMF fit,
    and NNDSVDa's can be worse than storing nothing, relative error 1.10-1.23 at N = 4,096).

    With ``measure(W, H)`` (``||X - W H||_F`` itself, float64 fits): where the
    error is so small that the formula's round-off (``eps ||X||^2`` in the
    squared error) is a relative change of ``tol`` or more, the checks measure
    it instead, and the floor is round-off (:func:`~.tsvd.round_off`): HALS
    goes on reproducing an exact non-negative product down to round-off, as
    TSVD reproduces an exact low-rank one, where the formula stopped it at 1e-8
    to 1e-5 of ``||X||`` (a false "converged": its noise read as no progress).
    Errors above that, every ordinary fit's, are checked as before.
    ``report`` (a :class:`~sfapprox._progress.Reporter`) is told each iteration, with the error where
    a check computed it (from the small products: no extra pass over ``X``).
    Returns ``W, H, n_iter, stop_reason``.
    """
    report = report or Reporter(None)
    import torch

    eps = torch.finfo(W.dtype).eps
    floor = math.sqrt(eps * norm_x2)
    # Below this error a relative change of tol is within the formula's round-off.
    measured_below = math.sqrt(eps * norm_x2 / max(tol, eps)) if measure is not None else 0.0
    exact = round_off(W.shape[0], math.sqrt(norm_x2))
    n, rank = W.shape
    sweeps = _max_sweeps(n, rank)
    last = math.sqrt(_squared_error(norm_x2, H, Xt @ W, W.T @ W))
    report(last, steps=0)
    Ht = H.T.contiguous()  # rows of H are updated as columns of H^T (contiguous writes)
    compiled_w, compiled_h = _compiled_sweeper(W), _compiled_sweeper(Ht)  # (updated in place, never made anew)
    step = 0.0  # seconds of the last iteration: what the next one is expected to cost
    for it in range(1, max_iter + 1):
        if deadline is not None and it > 1 and not deadline.fits(step):
            # (checked before every iteration, not only at the convergence checks: at N = 3000 an
            # iteration takes a quarter of a second and more)
            return W, Ht.T, it - 1, "time_limit"
        began = _timing.now()
        H = Ht.T
        _hals_sweeps(W, X @ Ht, H @ Ht, sweeps, compiled_w)
        XtW, WtW = Xt @ W, W.T @ W
        _hals_sweeps(Ht, XtW, WtW, sweeps, compiled_h)
        if it % CHECK_EVERY == 0 or it == max_iter:
            err = math.sqrt(_squared_error(norm_x2, Ht.T, XtW, WtW))
            if err <= measured_below:
                err = measure(W, Ht.T)
                report(err)
                if last - err <= tol * last or err <= exact:
                    return W, Ht.T, it, "converged"
            else:
                report(err)
                if last - err <= tol * last or err <= floor:
                    return W, Ht.T, it, "converged"
            last = err
        else:
            report()  # (the error of the last check stands)
        step = _timing.now() - began
    return W, Ht.T, max_iter, "max_iter"


def _fit_from(X, Xt, start, device, dtype, **options) -> tuple:
    """Move a numpy start to the device and run :func:`_fit_hals`."""
    import torch

    # contiguous: the compiled sweeps update W in place through its numpy view, and take none other
    W = torch.as_tensor(start[0], dtype=dtype, device=device).contiguous()
    H = torch.as_tensor(start[1], dtype=dtype, device=device)
    return _fit_hals(X, Xt, W, H, **options)


def _error_of(X, W: np.ndarray, H: np.ndarray) -> float:
    """Frobenius error in float64 numpy (used to choose among starts): the comparison's scoring, by
    column blocks above ``DENSE_SCORING_MAX_N`` (``W H`` and the residual would be two more N x N arrays)."""
    return operator_error(X, HybridOperator(X.shape[0], low_rank=(W, None, H)))[0]


def _carrying(W: np.ndarray, H: np.ndarray, norm: float) -> np.ndarray:
    """Which components of ``W H`` carry more than round-off (a boolean mask over the ``r`` components).

    A component's share of ``W H`` is the rank-one ``W[:, k] H[k]``, of Frobenius norm
    ``c_k = ||W[:, k]|| ||H[k]||``; leaving out a set of them moves ``W H``, and so the error
    ``||X - W H||_F``, by at most the sum of their ``c_k``.  The smallest are left out as long as that
    sum stays within ``N eps ||X||_F`` (numpy's ``matrix_rank`` scale of round-off, the rule TSVD keeps
    singular values by): all-zero components, and those HALS holds at the ``EPS`` floor (entries of
    1e-16 in the scaled problem: ``c_k`` about ``N 1e-32`` of the scale), which the floor keeps positive
    by design (HALS divides by ``(H H^T)_kk``) but which add nothing to ``W H``.  A component of an
    ordinary fit carries a share of ``||X||`` many orders above that, and stays.  (:func:`_pruned` also
    folds a component into a parallel one.)
    """
    n = W.shape[0]
    share = np.linalg.norm(W, axis=0) * np.linalg.norm(H, axis=1)
    order = np.argsort(share, kind="stable")
    dropped = np.cumsum(share[order]) <= round_off(n, norm)
    live = np.ones(share.size, dtype=bool)
    live[order[dropped]] = False
    return live


def _fold_costs(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each component ``k`` of ``W H`` (``A``'s columns, ``B``'s rows: ``W, H`` or ``H^T, W^T``), the
    component ``j`` whose row ``B[j]`` is the most nearly parallel to ``B[k]``, the multiple
    ``a = <B[k], B[j]> / ||B[j]||^2 >= 0`` and the move of ``W H`` when ``A[:, k] B[k]`` is replaced by
    ``a A[:, k] B[j]`` (folded into ``j``): ``||A[:, k]|| ||B[k] - a B[j]||``, computed from the difference
    itself (a difference of squares would hide ``sqrt(eps)`` of the share)."""
    r = B.shape[0]
    lengths = np.linalg.norm(B, axis=1)
    unit = B / np.where(lengths > 0, lengths, 1.0)[:, None]
    cosine = unit @ unit.T
    np.fill_diagonal(cosine, -np.inf)
    cosine[:, lengths == 0] = -np.inf  # (nothing folds into an all-zero row)
    into = np.argmax(cosine, axis=1) if r > 1 else np.zeros(r, dtype=int)
    squared = np.where(lengths > 0, lengths, 1.0) ** 2
    a = np.einsum("kn,kn->k", B, B[into]) / squared[into]
    cost = np.linalg.norm(A, axis=0) * np.linalg.norm(B - a[:, None] * B[into], axis=1)
    return into, a, cost


def _pruned(W: np.ndarray, H: np.ndarray, norm: float) -> tuple[np.ndarray, np.ndarray]:
    """``W`` and ``H`` without the components that add nothing to ``W H`` but round-off: those
    :func:`_carrying` leaves out, and then, one at a time while the moves of ``W H`` add up to at most
    ``N eps ||X||_F`` (``norm``), a component folded into one with a parallel ``H`` row
    (``W[:, j] += a W[:, k]``) or ``W`` column (``H[j] += b H[k]``), non-negative as ``a, b >= 0``.

    Where two components share a row space (a rank-one ``X`` fitted at rank 2: both ``H`` rows constant),
    HALS's objective is flat along trading one for the other, and its round-off drifts along it, by
    iterations: NNDSVD's second component of a constant 16 x 16 matrix reached ``1.8 N eps ||X||`` in 5
    iterations with numpy 2.5 (its matmul rounds otherwise than 2.4's, whose arithmetic there was exact),
    so no bound on a component's own share holds; folding it moves ``W H`` by ``5e-30``.
    """
    n = W.shape[0]
    live = _carrying(W, H, norm)
    share = np.linalg.norm(W, axis=0) * np.linalg.norm(H, axis=1)
    left = round_off(n, norm) - float(np.sum(share[~live]))  # (what the left-out components moved W H by)
    W, H = W[:, live].copy(), H[live].copy()
    while H.shape[0] > 1:
        by_rows, by_columns = _fold_costs(W, H), _fold_costs(H.T, W.T)
        rows = int(np.argmin(by_rows[2]))
        columns = int(np.argmin(by_columns[2]))
        fold_rows = by_rows[2][rows] <= by_columns[2][columns]
        k, (into, a, cost) = (rows, by_rows) if fold_rows else (columns, by_columns)
        if cost[k] > left:
            break
        left -= cost[k]
        if fold_rows:
            W[:, into[k]] += a[k] * W[:, k]
        else:
            H[into[k]] += a[k] * H[k]
        W, H = np.delete(W, k, axis=1), np.delete(H, k, axis=0)
    return W, H


def _fit_nmf(X, rank: int, inits: tuple[str, ...], seed: int, device, dtype, *, time_limit: float | None,
             all_starts: bool, report: Reporter | None = None, began: float | None = None,
             **options) -> tuple:
    """HALS from the starts in ``inits``; the smallest error wins.

    ``X`` is the validated float64 ndarray or CSR array.  It is fitted as
    ``X / c`` with ``c = ||X||_F / sqrt(N)`` (and ``W``, ``H`` scaled back by
    ``sqrt(c)`` each): the floor ``EPS`` of the factor entries and the
    tolerances then mean the same for every positive multiple of ``X``.
    The first start gets the whole ``time_limit`` (counted from ``began``, a
    :data:`~sfapprox._timing.clock` value, default now); the others run only in
    the time it leaves, unless ``all_starts`` (``init="best"``).  Returns
    ``W, H, n_iter, stop_reason, init, errors`` (``init``: the start kept, :func:`.tsvd.preferred`;
    ``errors``: per start tried, None for one start or when the limit left time for one only).  ``report`` is told each start (its ``stage``)
    and given HALS's iterations (:func:`_fit_hals`), its errors in ``X``'s units.
    """
    import torch

    n = X.shape[0]
    values = X.data if hasattr(X, "toarray") else X
    norm = float(np.linalg.norm(values))
    if rank == 0 or norm == 0.0:
        # Nothing to fit: the zero matrix is the exact (or only) answer.
        return np.zeros((n, rank)), np.zeros((rank, n)), 0, "exact", inits[0], None
    scale = norm / math.sqrt(n)
    report = report or Reporter(None)
    report.scale = scale
    X = X / scale
    norm_x2 = float(n)  # ||X / scale||_F^2
    Xd = as_tensor(X, device, dtype)
    Xt = as_tensor(X.T.tocsr(), device, dtype) if hasattr(X, "toarray") else Xd.T
    measure = None
    if Xd.dtype == torch.float64:
        # (a sparse X's residual by the comparison's scoring, by column blocks; a dense one's on the device)
        measure = ((lambda W, H: _error_of(X, W.cpu().numpy(), H.cpu().numpy())) if hasattr(X, "toarray")
                   else (lambda W, H: _residual_norm(Xd, W, H)))
    deadline = None if time_limit is None else _timing.Deadline.after(time_limit, began)
    best, errors = None, {}
    each = 0.0  # seconds of the first start's least work (start, a few iterations, scoring)
    svd = _StartSVD(X, rank, seed)  # (one SVD for every NNDSVD start: the same X, rank and seed)
    for i, init in enumerate(inits):
        if i and not all_starts and deadline is not None and not deadline.fits(each):
            break  # the later starts are extras: only in the time the first one left, when theirs fits
        began = _timing.now()
        report.at(f"start {init}")
        shared = svd.seconds
        start, made = _initialize(X, rank, init, seed, deadline, svd)
        # What this start cost, less the SVD it computed for every NNDSVD start: a later start does not pay
        # for it (the first start's SVD priced each later start, and under a limit skipped starts that fit)
        shared = svd.seconds - shared
        if made != init and best is not None:
            break  # a later start whose SVD the time left cannot pay for: the starts fitted so far stand
        fitting = _timing.now()
        W, H, n_iter, reason = _fit_from(Xd, Xt, start, device, dtype, norm_x2=norm_x2, deadline=deadline,
                                         measure=measure, report=report, **options)
        if made != init:
            # The limit left no time for the first start's SVD: the random start stood in for it (HALS's
            # first iteration always runs), the fit stopped on the limit whatever HALS said, and no later
            # start fits either
            best = (W.double().cpu().numpy(), H.double().cpu().numpy(), n_iter, "time_limit", made, rank, None)
            break
        scoring = _timing.now()
        per_iteration = (scoring - fitting) / max(1, n_iter)  # (the first start's: what prices the later ones)
        W, H = W.double().cpu().numpy(), H.double().cpu().numpy()
        if (not i and len(inits) > 1 and not all_starts and deadline is not None and not deadline.fits(
                (fitting - began - shared) + (2 + EXTRA_START_ITERATIONS) * per_iteration)):
            # No further start could run (its start, its iterations, and the scoring of both, each
            # about an iteration): the first start's scoring, only there to choose among starts, is
            # skipped (a pass over X past the limit: 3-4 s at N = 8,192 on 2 shared cores)
            best = (W, H, n_iter, reason, init, rank, None)
            break
        errors[init] = _error_of(X, W, H) if len(inits) > 1 else 0.0
        if not i:
            # A later start is worth its time only with a few iterations: its start, its scoring
            # and EXTRA_START_ITERATIONS at the first start's cost per iteration.
            each = (fitting - began - shared) + (_timing.now() - scoring) + EXTRA_START_ITERATIONS * per_iteration
        live = _pruned(W, H, math.sqrt(n))[0].shape[1] if len(inits) > 1 else rank
        # of starts that reproduce X the fewest components: a constant matrix at rank 2 kept NNDSVDa's two
        # (64 numbers at N = 16, error 0) where NNDSVD's one (32) is as exact
        if best is None or preferred(errors[init], live, best[-1], best[-2], math.sqrt(n)):
            best = (W, H, n_iter, reason, init, live, errors[init])
    W, H, n_iter, reason, kept, *_ = best
    root = math.sqrt(scale)
    errors = {k: v * scale for k, v in errors.items()} if len(inits) > 1 and errors else None
    return W * root, H * root, n_iter, reason, kept, errors


class NMF(Approximation):
    """Non-negative matrix factorization ``X ≈ W H`` with ``W, H >= 0``, rank ``r``.

    Parameters
    ----------
    n_components : int or None, default=None
        Inner dimension ``r`` (scikit-learn's name).  When None, the largest rank that fits ``budget``
        (:func:`~sfapprox.budget.nmf_rank_for_budget`).
    budget : int or None, default=None
        Stored-number budget; NMF stores ``2 N r``.  Sets the rank when ``n_components`` is None;
        with both, a rank over the budget is refused (:class:`~sfapprox.BudgetError`).
    init : {"auto", "nndsvda", "nndsvd", "nndsvdar", "random", "best"}, default="auto"
        Start.  NMF has local minima, and which start wins depends on the
        matrix (Sawmill at rank 21: NNDSVDa 3.33, NNDSVD 3.23).  ``"auto"``
        runs NNDSVDa, then the other starts of ``BEST_INITS`` in the time
        ``time_limit`` leaves (all of them when it is None), and keeps the
        smallest error; ``"best"`` runs every start whatever the time limit.
    solver : {"hals"}, default="hals"
        Accelerated hierarchical alternating least squares.
    max_iter : int, default=1000
        Maximum outer iterations (one W and one H update each) of each start.
    tol : float, default=1e-7
        Stop when the Frobenius error fell by a relative ``tol`` or less over
        the last ``CHECK_EVERY`` iterations.  From the same start this ends
        within about 1e-7 (relative) of scikit-learn's fully converged
        coordinate descent; large matrices may need ``max_iter`` raised.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Wall-clock limit of the whole fit (every start), in seconds; None for none.
    random_state : int, default=0
        Seed of the random starts and of the randomized SVD (large ``N``).
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the updates run; ``"auto"``: a CUDA GPU when available.
    dtype : {"float64", "float32"} or None, default=None
        None: float64 on CPU, float32 on GPU.
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes: a fit of a matrix in memory whose working arrays
        (several copies of it, measured) would be over it is refused before any
        work (ResourceError), as a comparison refuses its row (None: 80% of the
        physical memory).
    callback : callable or None, default=None
        Progress, as ChordSF's ``callback``: called with a dict after each HALS iteration
        (``iteration``, counted over every start, ``max_iter``, ``max_iter`` per start together,
        ``fro_error``, ``||X - W H||_F`` as of the last convergence check, every
        ``CHECK_EVERY`` iterations, ``elapsed``) and as each start begins (``stage``:
        ``"start nndsvda"``); what it returns is not read.

    Attributes
    ----------
    operator_ : HybridOperator
        ``W H`` as a LinearOperator, ``O(N r)`` per matvec.
    W_ : ndarray of shape (N, r)
    H_ : ndarray of shape (r, N)
    components_ : ndarray of shape (r, N)
        ``H_``, as scikit-learn names it.
    rank_ : int
        Components kept: below the rank asked where some came out zero or at the factors' floor (they add
        nothing to ``W H`` but round-off: :func:`_pruned`; ``params_["rank_budget"]`` then says the rank asked).
    n_stored_ : int
        ``2 N r``.
    n_iter_ : int
        Outer iterations of the kept run.
    seconds_ : float
    stop_reason_ : str
        The kept run's: ``"converged"``, ``"max_iter"``, ``"time_limit"`` or
        ``"exact"`` (rank 0 or the zero matrix); ``"time_limit"`` too where the time limit could not pay for
        the NNDSVD start's SVD above :data:`~.tsvd.EXACT_MAX_N` (its two products no check cuts), and the
        random start stood in for it (``params_["init"]``: ``"random"``).
    params_ : dict
        ``rank``, ``init`` (the start kept), ``solver``, ``iterations``,
        ``converged``, ``tol``, ``device``, ``dtype`` (and ``errors`` per start
        tried, when several were; not when the time limit left time for the first only).

    Raises
    ------
    NotApplicableError
        From ``fit`` when ``X`` has a negative entry.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((20, 2)) @ rng.random((2, 20))
    >>> nmf = NMF(n_components=2, device="cpu").fit(X)
    >>> nmf.n_stored_, bool(np.linalg.norm(X - nmf.to_dense()) < 1e-3 * np.linalg.norm(X))
    (80, True)
    """

    _method = "nmf"
    _parameter_constraints = {
        "n_components": Interval(int, 0, None, allow_none=True),
        "budget": Interval(int, 0, None, allow_none=True),
        "init": Options(("auto", "nndsvda", "nndsvd", "nndsvdar", "random", "best")),
        "solver": Options(("hals",)),
        "max_iter": Interval(int, 1, None),
        "tol": Interval(float, 0, None),
        "time_limit": Interval(float, 0, None, allow_none=True),
        "random_state": SEED,
        "device": str,
        "dtype": (Options(("float64", "float32", "auto")), None),
        "max_memory": MEMORY_LIMIT,
        "callback": (Callable, None),
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        budget: int | None = None,
        init: str = "auto",
        solver: str = "hals",
        max_iter: int = 1000,
        tol: float = 1e-7,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        random_state: int = DEFAULT_SEED,
        device: str = "auto",
        dtype: str | None = None,
        max_memory: int | str | None = None,
        callback: Callable[[dict], Any] | None = None,
        **renamed: Any,
    ):
        self.n_components = n_components
        self.budget = budget
        self.init = init
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.time_limit = time_limit
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.max_memory = max_memory
        self.callback = callback
        self._take_renamed(renamed, {"rank": "n_components"})  # (its name until scikit-learn's was taken)

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "NMF":
        """Fit ``W`` and ``H`` to the non-negative square matrix ``X`` (dense or sparse).

        ``check_input=False`` skips validating ``X`` (the caller did).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square, non-negative matrix; a :class:`~sfapprox.sources.MatrixSource` is formed
            first (refused above the memory limit).
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        NMF
            ``self``, fitted.

        Raises
        ------
        ParameterError
            When neither ``n_components`` nor ``budget`` is given.
        NotApplicableError
            When ``X`` has a negative entry.
        """
        X = self._validate(X, check_input)
        n = X.shape[0]
        # the budget before the memory: a budget below one rank is said so whatever the limit
        rank = rank_within(n, self.n_components, self.budget, nmf_rank_for_budget, nmf_count, "NMF",
                           zero=lambda: is_zero_matrix(X))  # the zero matrix: rank 0 within any budget
        X = self._within_limit(X)  # its working arrays over the limit: refused before any work
        low = float(X.data.min(initial=0.0) if hasattr(X, "toarray") else X.min())
        if low < 0:
            raise NotApplicableError(
                f"matrix has negative entries (min {low:.3g}); NMF needs a non-negative matrix: fit X - X.min() "
                "(and add the constant back) or abs(X) instead, or use a method that takes any sign (tsvd, sf)"
            )
        device = resolve_device(self.device)
        dtype = resolve_dtype(self.dtype, device)
        # seconds_ counts from here: the scaled copy of X and its move to the device came before it (about
        # 1 s at N = 4,096 on 2 shared cores, uncounted).  (Not torch's import, in resolve_device: once a
        # process, 1.1 s, and not the fit's.)
        start = time.perf_counter()
        # numba's start and the sweeps' compile (or load from its cache: 0.85 s, 4.1 s with the cache empty, at
        # load 3 on 2 cores) before the limit's clock, as SF's compile: priced as the first iteration, it
        # stopped a fit under a few seconds' limit after one iteration.  Inside seconds_, and said apart as
        # compile_seconds where it took long (as SF's).  A rank-0 fit (the zero matrix) runs no sweep.
        if rank > 0:
            _load_compiled(device, dtype)
        compiled = time.perf_counter() - start
        began = _timing.now()  # the limit counts from here
        inits = BEST_INITS if self.init in ("auto", "best") else (self.init,)
        with few_threads(n, device):
            W, H, n_iter, reason, kept, errors = _fit_nmf(
                X, rank, inits, self.random_state, device, dtype, time_limit=self.time_limit, began=began,
                all_starts=self.init == "best", max_iter=self.max_iter, tol=self.tol,
                report=Reporter(self.callback, max_iter=self.max_iter * len(inits)),
            )
        self.seconds_ = time.perf_counter() - start
        if reason in ("max_iter", "time_limit"):
            # max_iter as it is written in Python (counted's "1,000" is not), with its word in the singular for 1
            limit = f"max_iter={self.max_iter} iteration{'s' * (self.max_iter != 1)}" if reason == "max_iter" else (
                f"time_limit={self.time_limit:g} s ({counted(n_iter, 'iteration')})")
            warnings.warn(
                f"NMF stopped after {limit} before the error settled to tol={self.tol:g}; "
                f"increase {reason} for a closer fit",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        # A component that adds nothing to W H but round-off is not stored, nor charged: an all-zero W column
        # or H row (a zero matrix gave rank 10 of zeros, 320 numbers at N = 16), or one held at the EPS floor
        # (a matrix with one non-zero kept rank 10, 9 of them ~1e-32 of ||X||: 320 numbers where 32 do)
        W, H = _pruned(W, H, float(np.linalg.norm(X.data if hasattr(X, "toarray") else X)))
        self.W_, self.H_ = W, H
        self.components_ = H
        self.rank_ = W.shape[1]
        self.n_stored_ = nmf_count(n, self.rank_)
        self.n_iter_ = n_iter
        self.stop_reason_ = reason
        self.params_ = {
            "rank": self.rank_,
            **({"rank_budget": rank} if self.rank_ < rank else {}),
            "init": kept,
            "solver": self.solver,
            "iterations": n_iter,
            "converged": reason in ("converged", "exact"),
            "tol": self.tol,
            "device": str(device),
            "dtype": str(dtype).replace("torch.", ""),
        }
        if errors is not None:
            self.params_["errors"] = errors
        if compiled >= COMPILE_NOTE_SECONDS:  # (a fresh install's: outside the time limit, inside seconds_)
            self.params_["compile_seconds"] = round(compiled, 2)
        self.operator_ = HybridOperator(n, low_rank=(W, None, H))
        return self

    def to_dense(self) -> np.ndarray:
        """The approximation ``W H`` as a dense array.

        Returns
        -------
        numpy.ndarray
            ``W_ @ H_``, of shape ``(N, N)``.
        """
        return self.W_ @ self.H_


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> NMF:
    # NMF's iterations are outer HALS sweeps, not L-BFGS steps: --iters is SF's, not NMF's.
    return NMF(**context.settings.apply_to(NMF, exclude=("max_iter",), budget=budget, callback=context.callback))


register(
    MethodSpec(
        name="nmf",
        operators=("hybrid",),
        summary="non-negative matrix factorization (HALS; non-negative input only)",
        stores="2·N·r",
        make=_make,
        min_budget=lambda n, context: nmf_count(n, 1),
        order=40,
        label="non-negative low rank (NMF)",
        needs=("nonnegative",),
        # dense X, its products and the candidates: 3.3-3.8 N^2 float64 (tracemalloc, N = 300-1000);
        # up to EXACT_MAX_N the NNDSVD start's exact SVD first (peak RSS: X + 8.9-9.8 N^2 at
        # N = 1,024-2,048; X + 3.6 N^2 at 3,000)
        working_memory=lambda n: int((EXACT_SVD_ARRAYS + 2 if n <= EXACT_MAX_N else 4.5) * 8 * n * n),
    )
)
