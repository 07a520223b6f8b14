"""Hierarchical butterfly factorization: the butterfly support fitted by block rank-one SVDs.

**The support** is sfapprox's butterfly support (:mod:`sfapprox.sf._butterfly`,
the FAµST toolbox's structure): ``N = 2^L``, ``L`` factors, row ``i`` of
factor ``m`` (``m = 0`` the leftmost) holds columns ``i`` and ``i XOR 2^m``,
and the surrogate is ``W_0 @ W_1 @ ... @ W_{L-1}``; ``2 N L`` stored numbers
(:func:`sfapprox.budget.butterfly_count`).  The result is a
:class:`~sfapprox.operators.ChordOperator` with ``support="butterfly"``, the same
object ``sf-butterfly`` (L-BFGS on the same support) returns.

**Why one split is a set of rank-one problems.**  A partial product
``W_a ⋯ W_{b-1}`` can only be non-zero at ``(i, l)`` when ``i`` and ``l``
agree outside the bits ``a .. b-1``.  In a product ``A = Left · Right`` of a
factor on bit ``t`` and a product on bits ``t+1 .. L-1``, the inner index
``j`` of ``Σ_j Left[i, j] Right[j, l]`` is pinned to one value (bit ``t`` of
``l``, the other bits of ``i``), so ``A[i, l] = Left[i, j] Right[j, l]``: for
each ``j`` the ``2 x 2^(L-t-1)`` block of the entries that use ``j`` is the
outer product of column ``j`` of ``Left`` and row ``j`` of ``Right``.  The
``N`` blocks partition the support, so the nearest such two-factor product is
the best rank-one approximation of every block (Zheng, Riccietti & Gribonval,
"Efficient identification of butterfly sparse matrix factorizations", SIAM
J. Math. Data Sci. 2023: the hierarchical algorithm, whose every step is
such a split; the same argument gives the Monarch projection,
:mod:`sfapprox.baselines.monarch`).

**The algorithm** (the "left-to-right" hierarchical order, with the factor
split off at each step orthonormalised, in the spirit of Le, Zheng, Riccietti
& Gribonval, "Butterfly factorization with error guarantees", arXiv:2411.04506,
2024, whose orthonormalised butterfly algorithm has a bound of this kind;
the bound below is proved for this variant): ``A_0 = X``; for ``t = 0 .. L-2`` split
``A_t ≈ W_t · A_{t+1}`` block by block, with the left singular vector
(unit norm) as column ``j`` of ``W_t`` and ``sigma · v`` as row ``j`` of
``A_{t+1}``; the last remainder ``A_{L-1}`` is the last factor.  Every step
is ``O(size of A_t)``, ``O(N^2)`` in all (``2 N^2`` entries visited).

**Guarantee** (proved in :func:`factorize`'s notes; tested).  With unit
columns in ``W_t`` the residuals of the steps are orthogonal, so
``||X - W_0 ⋯ W_{L-1}||_F^2 = Σ_t e_t^2`` (``e_t``: the rank-one error of
step ``t``), and each ``e_t`` is at most the error ``ε*`` of the best
butterfly approximation of ``X``.  Hence

    ``||X - X̂||_F <= sqrt(L - 1) · min_{butterfly B} ||X - B||_F``,

and a matrix that *is* a butterfly product is recovered to round-off.
``"right-to-left"`` is the mirror image (peel ``W_{L-1}`` first: the
left-to-right algorithm on ``P X^T P``, ``P`` the bit reversal), with the same
guarantee; ``order="best"`` (default) runs both and keeps the smaller error.

**Any N.** ``X`` is padded with zero rows and columns to the next power of
two ``N'``; the surrogate is the leading ``N x N`` block of the ``N' x N'``
product (:class:`PaddedButterflyOperator`), storing ``2 N' log2 N'`` numbers.
The guarantee then holds for the padded matrix.

The budget rule is that of ``sf-butterfly``: the one structure fits the
budget or the method does not apply (a larger budget buys nothing more).
``time_limit`` bounds the whole fit (the second order of ``"best"`` is
skipped when, at the first one's cost, it would end after the limit), and a Ctrl-C during the second order keeps the
first (``stop_reason_ == "interrupted"``); during the first it propagates.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _timing
from .._base import Approximation, MethodSpec, RunContext, register
from .._errors import BudgetError
from .._params import MEMORY_LIMIT, Interval, Options
from .._progress import Reporter
from .._settings import DEFAULT_TIME_LIMIT
from .._validation import COMPILED_WORKING_SET
from ..formats import counted
from ..budget import below_smallest, butterfly_hier_count, padded_size
from ..metrics import operator_error
from ..operators import ChordOperator, PaddedButterflyOperator
from ..sources import MatrixLike
from .tsvd import EXACT_TOL, reproduces  # noqa: F401 - EXACT_TOL: this module's own name for it before

__all__ = [
    "HierarchicalButterfly",
    "PaddedButterflyOperator",
    "factorize",
    "padded_size",
    "butterfly_hier_count",
    "ORDERS",
]

#: Hierarchical orders: which end of the product is peeled first.
ORDERS = ("left-to-right", "right-to-left")


#: Bytes of blocks one batched SVD call takes (see :func:`_split`).
SVD_CHUNK_BYTES = 16 << 20


# --------------------------------------------------------------------------- accounting
# --------------------------------------------------------------------------- the algorithm
def _left_to_right(A: np.ndarray, step: Callable[[], Any] | None = None) -> tuple[np.ndarray, list[float]]:
    """Factor values ``(L, N, 2)`` and the per-step errors ``e_t`` of the left-to-right algorithm.

    The remainder ``A_t`` (support: bits ``t .. L-1``) is kept as a batch
    ``T[q, p, p'] = A_t[p 2^t + q, p' 2^t + q]`` of ``2^t`` dense matrices
    (``q``: the ``t`` low bits that row and column share).  ``step()``, where given, is called after
    each split (a progress report).
    """
    n = A.shape[0]
    n_factors = n.bit_length() - 1
    values = np.zeros((n_factors, n, 2))
    T = A[None]
    errors = []
    for t in range(n_factors - 1):
        batch, half = 1 << t, n >> (t + 1)
        u, error, T = _split(T, batch, half)  # u: [q, h, lo, x], unit columns of W_t
        errors.append(error)
        if step is not None:
            step()
        # Row i = (2h + x) 2^t + q of W_t: W[i, i] = u[q, h, x, x], W[i, i ^ 2^t] = u[q, h, 1 - x, x].
        values[t, :, 0] = u[:, :, [0, 1], [0, 1]].transpose(1, 2, 0).reshape(n)
        values[t, :, 1] = u[:, :, [1, 0], [0, 1]].transpose(1, 2, 0).reshape(n)
    # The last remainder is the last factor: T[q, x, y] on bit L-1, row i = x 2^(L-1) + q.
    values[-1, :, 0] = T[:, [0, 1], [0, 1]].T.reshape(n)
    values[-1, :, 1] = T[:, [0, 1], [1, 0]].T.reshape(n)
    return values, errors


def _split(T: np.ndarray, batch: int, half: int) -> tuple[np.ndarray, float, np.ndarray]:
    """One step's rank-one splits: the unit vectors ``u[q, h, lo, x]``, the step's error and the next remainder.

    The ``2 x half`` blocks go through the batched SVD :data:`SVD_CHUNK_BYTES` at a time (rows ``h``
    of the remainder), each chunk's ``sigma_1 v_1`` written into the next remainder: the whole batch at
    once would add a contiguous copy of ``T`` and its ``Vt``, two ``N x N`` arrays, to the fit's peak.
    """
    # p = 2 p_hi + x (x: bit t of the row); block j = (q, h, lo) holds rows x, columns p'_hi.
    blocks = T.reshape(batch, half, 2, half, 2).transpose(0, 1, 4, 2, 3)  # [q, h, lo, x, p'_hi]
    u = np.empty((batch, half, 2, 2))
    rest = np.empty((2, batch, half, half))  # [lo, q, h, p'_hi]: rows j of A_{t+1}
    squared = 0.0
    rows = max(1, SVD_CHUNK_BYTES // (8 * batch * 4 * half))  # values of one h: batch x 2 x 2 x half
    for h in range(0, half, rows):
        chunk = slice(h, h + rows)
        U, s, Vt = np.linalg.svd(blocks[:, chunk], full_matrices=False)
        u[:, chunk] = U[..., 0]
        squared += float(np.sum(s[..., 1] ** 2))
        rest[:, :, chunk] = (s[..., 0, None] * Vt[..., 0, :]).transpose(2, 0, 1, 3)
    return u, math.sqrt(squared), rest.reshape(2 * batch, half, half)  # new q = lo 2^t + q


def _bit_reversal(n: int) -> np.ndarray:
    bits = n.bit_length() - 1
    idx = np.arange(n)
    rev = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev


def _right_to_left(A: np.ndarray, step: Callable[[], Any] | None = None) -> tuple[np.ndarray, list[float]]:
    """The mirror algorithm: left-to-right on ``A' = P A^T P`` (``P``: bit reversal), mapped back.

    ``A = P A'^T P = Π_m P W'^T_{L-1-m} P`` and ``P W'^T_k P`` sits on bit
    ``L-1-k``: factor ``m`` of ``A`` has ``values[m, a, 0] = w'[k, rev a, 0]``
    and ``values[m, a, 1] = w'[k, rev(a) ^ 2^k, 1]`` with ``k = L-1-m``.
    """
    n = A.shape[0]
    rev = _bit_reversal(n)
    mirrored, errors = _left_to_right(A.T[np.ix_(rev, rev)], step)  # a new array (fancy indexing copies)
    n_factors = mirrored.shape[0]
    values = np.empty_like(mirrored)
    for m in range(n_factors):
        k = n_factors - 1 - m
        values[m, :, 0] = mirrored[k, rev, 0]
        values[m, :, 1] = mirrored[k, rev ^ (1 << k), 1]
    return values, errors[::-1]


def warm_up_apply() -> None:
    """Load (or compile) the butterfly apply kernel that scores a fit, before the fit's clock starts.

    The first order's scoring loaded it (numba's import and cache: about 1 s, 3 s on a busy machine),
    and that second was taken for what the other order would cost: at N = 8 under a 0.2 s limit the
    other order was skipped (``stop_reason`` ``time_limit``, 1.0 s for a fit of 1 ms), and within
    ``compare --methods all`` on a 100 x 100 matrix at 5 s one order ran in 3.4 s.  SF's kernels are
    loaded outside its limit the same way.
    """
    ChordOperator(np.ones((1, 2, 2)), support="butterfly").to_dense()


def factorize(X: np.ndarray, order: str = "left-to-right", step: Callable[[], Any] | None = None,
              ) -> tuple[np.ndarray, list[float]]:
    """Hierarchical butterfly factorization of a ``2^L x 2^L`` matrix.

    Parameters
    ----------
    X : ndarray of shape (N, N)
        ``N`` a power of two, at least 2.
    order : {"left-to-right", "right-to-left"}
        Peel ``W_0`` first (``X ≈ W_0 A_1``, ...) or ``W_{L-1}`` first.
    step : callable or None, default=None
        Called with no argument after each of the ``L - 1`` splits (a progress report).

    Returns
    -------
    values : ndarray of shape (L, N, 2)
        Butterfly factor values (:class:`~sfapprox.operators.ChordOperator` layout).
    step_errors : list of float
        ``e_t``, the rank-one error of each of the ``L - 1`` splits.

    Notes
    -----
    Proof of the guarantee (left-to-right; the other order is its mirror).
    Write ``B_j`` for the block of ``A_t`` whose entries use inner index
    ``j``, ``u_j`` (unit) and ``sigma_j v_j`` its leading singular pair, so
    ``W_t[:, j] = u_j`` and ``A_{t+1}[j, :] = u_j^T B_j``.

    1. *Pythagoras.*  For any ``Â`` on the support of ``A_{t+1}``, block
       ``j`` of ``W_t Â`` is ``u_j Â[j, :]``; the step's residual
       ``B_j - u_j u_j^T B_j`` is orthogonal to it (``u_j^T`` annihilates
       it) and ``||W_t Δ||_F = ||Δ||_F`` (unit, non-overlapping columns).  So
       ``||A_t - W_t Â||^2 = e_t^2 + ||A_{t+1} - Â||^2`` and, unrolled,
       ``||X - X̂||^2 = Σ_t e_t^2``.
    2. *Each step is within ε*.*  Let ``C_0 = B*``, the best butterfly
       approximation of ``X``, and ``C_{t+1}[j, :] = u_j^T (C_t)_j``.  Block
       ``j`` of ``C_t`` is rank one, ``c_j w_j^T`` with ``w_j`` row ``j`` of
       a butterfly on bits ``t+1 ..``, so ``C_{t+1} = D W_{t+1} ⋯`` (``D``
       diagonal) is a butterfly on those bits: ``e_{t+1} <= ||A_{t+1} -
       C_{t+1}||``, and ``||A_{t+1} - C_{t+1}|| = (Σ_j ||u_j^T (A_t -
       C_t)_j||^2)^(1/2) <= ||A_t - C_t|| <= ... <= ||X - B*|| = ε*``.

    Hence ``||X - X̂|| <= sqrt(L - 1) ε*`` (and 0 when ``ε* = 0``).

    Examples
    --------
    >>> H = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> W = np.kron(np.kron(H, H), H)  # the 8 x 8 Walsh-Hadamard matrix
    >>> values, errors = factorize(W)
    >>> bool(np.allclose(ChordOperator(values, support="butterfly").to_dense(), W)), max(errors) < 1e-12
    (True, True)
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if X.shape != (n, n) or n < 2 or n & (n - 1):
        raise ValueError(f"factorize needs a square matrix of a power-of-two order >= 2, got {X.shape}")
    if order == "left-to-right":
        return _left_to_right(X, step)
    if order == "right-to-left":
        return _right_to_left(X, step)
    raise ValueError(f"unknown order {order!r}; choose one of {', '.join(ORDERS)}")


# --------------------------------------------------------------------------- the method
class HierarchicalButterfly(Approximation):
    """Butterfly factorization by the hierarchical block rank-one algorithm (closed form, ``O(N^2)``).

    Parameters
    ----------
    order : {"best", "left-to-right", "right-to-left"}, default="best"
        Which end of the product is peeled first; ``"best"`` runs both and
        keeps the smaller error.
    budget : int or None, default=None
        Stored-number budget; the fit is refused when ``2 N' log2 N'``
        (:func:`butterfly_hier_count`) is above it.  None: no check.
    time_limit : float or None, default=DEFAULT_TIME_LIMIT
        Wall-clock limit of the whole fit; ``"best"`` skips its second order
        once it has passed.
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes: a fit of a matrix in memory whose working arrays
        (several copies of it, measured) would be over it is refused before any
        work (ResourceError), as a comparison refuses its row (None: 80% of the
        physical memory).
    callback : callable or None, default=None
        Progress, as ChordSF's ``callback``: called with a dict as each order starts (``stage``:
        ``"order left-to-right"``), after each of its ``L - 1`` rank-one splits (``iteration``, over
        both orders, ``max_iter``, ``elapsed``) and after its scoring (``fro_error``); what it
        returns is not read.

    Attributes
    ----------
    operator_ : ChordOperator or PaddedButterflyOperator
        ``support="butterfly"`` factors; padded when ``N`` is not a power of two.
    values_ : ndarray of shape (L, N', 2)
    n_stored_ : int
        ``2 N' L``.
    seconds_ : float
    stop_reason_ : str
        ``"closed_form"``, ``"exact"`` (it reproduces ``X``), ``"time_limit"``
        (``"best"`` ran one order) or ``"interrupted"``.
    params_ : dict
        ``order``, ``n_factors``, ``padded_n``, ``count``, ``exact``,
        ``step_errors`` (``e_t``), ``bound_factor`` (``sqrt(L - 1)``),
        ``errors`` (per order tried, with ``"best"``); ``note`` when padded.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = ChordOperator(rng.standard_normal((4, 16, 2)), support="butterfly").to_dense()
    >>> b = HierarchicalButterfly().fit(X)
    >>> b.n_stored_, bool(np.allclose(b.to_dense(), X))
    (128, True)
    """

    _method = "butterfly-hier"

    _parameter_constraints = {
        "order": Options(("best",) + ORDERS),
        "budget": Interval(int, 0, None, allow_none=True),
        "time_limit": Interval(float, 0, None, allow_none=True),
        "max_memory": MEMORY_LIMIT,
        "callback": (Callable, None),
    }

    def __init__(self, order: str = "best", *, budget: int | None = None,
                 time_limit: float | None = DEFAULT_TIME_LIMIT, max_memory: int | str | None = None,
                 callback: Callable[[dict], Any] | None = None):
        self.order = order
        self.callback = callback
        self.max_memory = max_memory
        self.budget = budget
        self.time_limit = time_limit

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "HierarchicalButterfly":
        """Factorize the square matrix ``X`` (dense or sparse; padded to a power of two).

        ``check_input=False`` skips validating ``X`` (the caller did).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square matrix; a :class:`~sfapprox.sources.MatrixSource` is formed
            first (refused above the memory limit).  Padded with zeros to
            ``N'``, the power of two ``>= N``.
        check_input : bool, default=True
            Validate ``X`` (square, finite, real); False when the caller already
            did (:func:`~sfapprox.compare` validates once for all methods).

        Returns
        -------
        HierarchicalButterfly
            ``self``, fitted.

        Raises
        ------
        BudgetError
            When ``2 N' log2 N'`` numbers are over the budget.
        """
        X = self._validate(X, check_input)
        n = X.shape[0]
        big, count = padded_size(n), butterfly_hier_count(n)
        if self.budget is not None and count > self.budget:  # before the memory: no limit makes it fit
            raise BudgetError(below_smallest(self.budget, n, f"the butterfly's 2·N'·log2 N' with N' = {big:,}",
                                             count))
        X = self._within_limit(X)  # its working arrays over the limit: refused before any work
        warm_up_apply()
        # The limit counts from here: the padded copy and the norm (about 1 s at N = 4,096 on 2 shared
        # cores) came before it, uncounted
        start = time.perf_counter()
        deadline = _timing.Deadline.after(self.time_limit)
        dense = X.toarray() if hasattr(X, "toarray") else X
        if big == n:  # nothing to pad: factorize reads X, never writes it (a copy of it was 1 N^2 pass)
            padded = np.asarray(dense, dtype=np.float64)
        else:
            padded = np.zeros((big, big))
            padded[:n, :n] = dense
        norm = float(np.linalg.norm(dense))
        orders = ORDERS if self.order == "best" else (self.order,)
        best, errors, reason, each = None, {}, None, 0.0
        report = Reporter(self.callback, max_iter=len(orders) * max(1, big.bit_length() - 2))
        try:
            for i, order in enumerate(orders):
                # The second order costs what the first did (the mirror image of the same work).
                if best is not None and not deadline.fits(each):
                    reason = "time_limit"
                    break
                began = _timing.now()
                report.at(f"order {order}")
                values, steps = factorize(padded, order, step=report)
                op = self._operator(values, n)
                # No next order where its factorization alone would not end in time.  The error is then the
                # split errors' (each split's W_t has orthonormal columns: ||X - product||^2 = sum e_t^2,
                # the same to round-off), not a scoring pass over X past the limit (3-4 s at N = 8,192)
                last = big == n and i + 1 < len(orders) and not deadline.fits(_timing.now() - began)
                if last:
                    err = math.sqrt(sum(e * e for e in steps))
                else:
                    err = operator_error(dense, op, norm)[0]  # by column blocks above DENSE_SCORING_MAX_N
                report(err, steps=0)
                errors[order] = err
                each = _timing.now() - began
                if best is None or err < best[0] * (1 - 1e-12):
                    best = (err, order, values, steps, op)
                if last:
                    reason = "time_limit"
                    break
        except KeyboardInterrupt:
            if best is None:
                raise
            reason = "interrupted"
        self.seconds_ = time.perf_counter() - start
        err, order, values, steps, op = best
        exact = reproduces(err, norm)
        n_factors = values.shape[0]
        self.values_ = values
        self.operator_ = op
        self.n_stored_ = count
        self.stop_reason_ = reason or ("exact" if exact else "closed_form")
        self.params_ = {
            "order": order,
            "n_factors": n_factors,
            "padded_n": big,
            "count": count,
            "exact": bool(exact),
            "step_errors": steps,
            "bound_factor": math.sqrt(max(n_factors - 1, 0)),
        }
        if len(orders) > 1:
            self.params_["errors"] = errors
        if big > n:
            self.params_["note"] = (f"N = {n:,} padded with "
                                    f"{counted(big - n, 'zero row and column', 'zero rows and columns')} to {big:,}")
        return self

    @staticmethod
    def _operator(values: np.ndarray, n: int):
        if values.shape[1] == n:
            return ChordOperator(values, support="butterfly")
        return PaddedButterflyOperator(values, n)

    def to_dense(self) -> np.ndarray:
        """The fitted product as a dense ``N x N`` array."""
        return self.operator_.to_dense()


# --------------------------------------------------------------------------- registration
def _make(n: int, budget: int, context: RunContext) -> HierarchicalButterfly:
    return HierarchicalButterfly(**context.settings.apply_to(HierarchicalButterfly, budget=budget,
                                                             callback=context.callback))


register(
    MethodSpec(
        name="butterfly-hier",
        operators=("chord", "butterfly-padded"),
        summary="butterfly factors by the hierarchical block rank-one algorithm "
                "(Zheng, Riccietti & Gribonval 2023; closed form; N padded to a power of two)",
        stores="2·N′·log₂N′, N′ = 2^⌈log₂N⌉",
        make=_make,
        min_budget=lambda n, context: butterfly_hier_count(n),
        order=61,
        label="hierarchical butterfly",
        iterative=False,
        # X, the padded matrix, its mirror image and the splits' remainders (3.5 N'^2), or X, the padded
        # matrix and the scoring's two arrays (4 N'^2; N' = padded_size), and the compiled apply kernels
        # its scoring loads above N = 1,024: peak RSS 5.2 N'^2 at N = 4,096, 98 MB of kernels included
        # (benchmarks/results/method_memory.md)
        working_memory=lambda n: 5 * 8 * padded_size(n) ** 2 + COMPILED_WORKING_SET,
    )
)
