"""Hybrid surrogates at one budget: Chord factors plus a low-rank (sf+lr) or sparse (sf+s) correction.

``ChordLowRank`` fits ``X ≈ W1 ... WM + U V^T`` and ``ChordSparse`` fits
``X ≈ W1 ... WM + S`` (``s`` entries at free positions).  Each fit is joint:
one differentiable objective ``0.5 * ||X - P(W) - C||_F^2`` minimised by the
SF L-BFGS loop (:func:`sfapprox.sf._solver.lbfgs`) over the factor values and
the correction's numbers together.  The factor part goes through the SF
kernels (:func:`~sfapprox.sf._kernels.select_kernel`) with the target
``T = X - C``, so the kernel's residual ``G = P(W) - T`` is the joint one, and
the correction's gradient is read off the same residual: ``grad_U = G V``,
``grad_V = G^T U`` (thin products with the factors, no second ``N x N``
pass) and ``grad_S = G`` on the support.

How the budget ``B`` is split between factors and correction is chosen on a
small grid (:func:`sfapprox.budget.sf_lr_splits`, :func:`~sfapprox.budget.sf_s_splits`);
the split with the smallest Frobenius error wins.  The grid's ends are the
plain methods, computed exactly as :func:`sfapprox.compare` computes them:
``ChordSF`` with the structure of :func:`~sfapprox.budget.sf_config_for_budget`
and the ``sf`` method's settings and seed, and ``TruncatedSVD`` at ``B``
(sf+lr) or the ``B / c`` largest entries (sf+s).  So at an equal budget sf+lr
is never worse than the better of SF and TSVD, and sf+s never worse than the
better of SF and the largest entries.  Between the ends:

* ``"sf+rest"``: the plain SF structure plus what its count leaves, started
  from the plain fit and the TSVD (largest entries) of its residual;
* ``"split"``: the reference offsets with ``M' < M`` factors plus the rest.
  Two starts, ChordSF's (every value ``1/K``, or each factor near ``I``),
  each with the TSVD of ``X - P`` (the largest entries of ``X - P``), are
  probed for ``PROBE_SHARE`` of the iterations; the better one continues.

sf+s re-chooses its support from the residual's largest entries at
``RESELECT_AT`` of the iterations (which never raises the loss: those entries
then hold the residual exactly).

The plain SF fit is deterministic for a given matrix and settings (without a
time limit), so the last few are memoised: ``compare(X, ["sf+lr", "sf+s"])``
fits it once.
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._base import Approximation, MethodSpec, RunContext, register
from ._errors import BudgetError, ConvergenceWarning
from ._params import Interval
from .budget import (
    HybridSplit,
    SFConfig,
    rpca_count,
    sf_config_for_budget,
    sf_count,
    sf_lr_splits,
    sf_min_budget,
    sf_s_splits,
    tsvd_count,
)
from .linop import ChordOperator, HybridOperator
from .sf.model import ChordSF

__all__ = ["ChordLowRank", "ChordSparse"]

#: Share of a split's iterations (and time limit) each start is probed for, when there are two.
PROBE_SHARE = 0.1
#: sf+s: shares of the iterations after which the support is re-chosen from the residual.
RESELECT_AT = (0.4, 0.7)
#: Share of the time limit the plain SF end gets; the joint fits share the rest (the whole
#: grid stays within the limit, as every method does).
PLAIN_SHARE = 0.4
#: Plain SF fits kept for reuse (each holds only its factors, ``N K M`` numbers).
PLAIN_CACHE_SIZE = 4

_PLAIN_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_INTERRUPTED = "interrupted"


# =============================================================================== objectives
def _lr_objective(kernel, offsets: list[int], target, shape: tuple[int, int, int], rank: int):
    """``0.5 * ||X - P(W) - U V^T||^2`` over ``x = [W, U, V]`` (flat), with its exact gradient.

    The kernel gets ``T = X - U V^T``, so its residual is the joint one,
    ``G = P - T``; then ``G V = P V - T V`` and ``G^T U = P^T U - T^T U``
    cost two thin products with the factors (``O(M K N r)``) and two
    ``N x N x r`` products.
    """
    n = target.shape[0]
    n_w = math.prod(shape)

    def fun(x):
        ws = x[:n_w].view(shape)
        U = x[n_w : n_w + n * rank].view(n, rank)
        V = x[n_w + n * rank :].view(n, rank)
        T = target - U @ V.T
        loss, grad_w = kernel(ws, offsets, T)
        factors = _Thin(ws, offsets)
        grad_u = factors.apply(V) - T @ V
        grad_v = factors.apply_t(U) - T.T @ U
        return float(loss), _cat(grad_w, grad_u, grad_v)

    return fun


def _sparse_objective(kernel, offsets: list[int], target, shape: tuple[int, int, int], flat):
    """``0.5 * ||X - P(W) - S||^2`` over ``x = [W, v]``, ``S`` holding ``v`` at the flat positions ``flat``.

    ``grad_v = G[flat] = P[flat] + v - X[flat]``; those entries of ``P``
    come from products with unit columns (or rows), not from all of ``P``.
    """
    n = target.shape[0]
    n_w = math.prod(shape)
    entries = _entry_reader(flat // n, flat % n, n)

    def fun(x):
        ws = x[:n_w].view(shape)
        v = x[n_w:]
        T = target.clone()
        T.view(-1).index_add_(0, flat, -v)  # positions are distinct: T = X - S
        loss, grad_w = kernel(ws, offsets, T)
        grad_v = entries(_Thin(ws, offsets)) - T.view(-1)[flat]
        return float(loss), _cat(grad_w, grad_v)

    return fun


class _Thin:
    """``P B`` and ``P^T B`` for thin blocks ``B``, ``P = W1 ... WM``.

    Small N (the SF kernels' dense range): the factors are scattered into
    dense ``N x N`` matrices once and applied by ``2M`` BLAS calls, since
    there ``M K`` shifted adds per product cost more in call overhead than
    the arithmetic.  Larger N: the ``O(M K N c)`` shifted adds.
    """

    def __init__(self, ws, offsets: list[int]):
        from .sf._kernels import DENSE_MAX_N

        self.ws, self.offsets = ws, offsets
        self.dense = None
        m, n, k = ws.shape
        if n <= DENSE_MAX_N:
            import torch

            rows = torch.arange(n, device=ws.device)[:, None]
            idx = (rows + torch.as_tensor(offsets, device=ws.device)[None, :]) % n
            self.dense = torch.zeros((m, n, n), dtype=ws.dtype, device=ws.device)
            self.dense.scatter_add_(2, idx.expand(m, n, k), ws)

    def apply(self, B):
        from .sf._kernels import apply_product

        if self.dense is None:
            return apply_product(self.ws, self.offsets, B)
        for D in reversed(self.dense):
            B = D @ B
        return B

    def apply_t(self, B):
        from .sf._kernels import apply_product_t

        if self.dense is None:
            return apply_product_t(self.ws, self.offsets, B)
        for D in self.dense:
            B = D.T @ B
        return B


def _cat(*parts):
    import torch

    return torch.cat([p.reshape(-1) for p in parts])


def _entry_reader(rows, cols, n: int) -> Callable:
    """A function ``_Thin -> P[rows, cols]``, through the fewer of the distinct columns or rows.

    ``P E`` for the unit columns ``E`` of the distinct columns costs
    ``O(M K N c)``; when the distinct rows are fewer, ``P^T E`` gives those rows.
    """
    import torch

    uc, inv_c = torch.unique(cols, return_inverse=True)
    ur, inv_r = torch.unique(rows, return_inverse=True)
    by_cols = uc.numel() <= ur.numel()
    pick, inv, other = (uc, inv_c, rows) if by_cols else (ur, inv_r, cols)
    units = torch.zeros((n, pick.numel()), dtype=torch.float64, device=rows.device)
    units[pick, torch.arange(pick.numel(), device=rows.device)] = 1.0

    def read(factors: _Thin):
        E = units.to(factors.ws.dtype)
        block = factors.apply(E) if by_cols else factors.apply_t(E)
        return block[other, inv]

    return read


# =============================================================================== small helpers
def _start_factors(kind: str, rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    """ChordSF's two starts: every value ``1/K`` (1% noise), or each factor near ``I`` (noise 0.1)."""
    jitter = rng.uniform(-1.0, 1.0, size=shape)
    if kind == "identity":
        values = 0.1 * jitter
        values[:, :, 0] += 1.0
        return values
    return (1.0 + 0.01 * jitter) / shape[2]


def _orthonormal(U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``U V^T`` as ``(Q_u A) diag(s) (Q_v B)^T`` (two QRs and an ``r x r`` SVD): orthonormal factors."""
    Qu, Ru = np.linalg.qr(U)
    Qv, Rv = np.linalg.qr(V)
    A, s, Bt = np.linalg.svd(Ru @ Rv.T)
    return Qu @ A, s, (Qv @ Bt.T).T


def _largest(R: np.ndarray, count: int) -> np.ndarray:
    """Flat indices of the ``count`` entries of largest magnitude, sorted."""
    flat = np.abs(R).ravel()
    if count >= flat.size:
        return np.arange(flat.size)
    return np.sort(np.argpartition(-flat, count - 1)[:count])


def _plain_sf(X, dense: np.ndarray, params: dict[str, Any]):
    """``ChordSF(**params).fit(X)``, memoised when it is deterministic (no time limit)."""
    key = None
    if params.get("time_limit", ChordSF().time_limit) is None:
        settings = tuple(sorted((k, repr(v)) for k, v in params.items() if k != "callback"))
        digest = hashlib.sha256(np.ascontiguousarray(dense).tobytes()).hexdigest()
        key = (dense.shape, digest, settings)
        if key in _PLAIN_CACHE:
            _PLAIN_CACHE.move_to_end(key)
            return _PLAIN_CACHE[key]
    est = ChordSF(**params).fit(X, check_input=False)
    if key is not None and est.stop_reason_ != _INTERRUPTED:
        _PLAIN_CACHE[key] = est
        while len(_PLAIN_CACHE) > PLAIN_CACHE_SIZE:
            _PLAIN_CACHE.popitem(last=False)
    return est


@dataclass
class _Point:
    """One fitted grid point, scored in float64."""

    split: HybridSplit
    operator: HybridOperator
    fro_error: float
    rel_error: float | None
    seconds: float
    n_iter: int = 0
    stop_reason: str = "exact"
    start: str = "-"


@dataclass
class _Problem:
    """What every joint fit of one ``fit`` call shares (``target = X / scale`` on the device)."""

    n: int
    dense: np.ndarray
    fro: float
    scale: float
    target: Any
    kernel: Callable
    options: dict[str, Any]  # max_iter, ftol, gtol, history_size
    seconds: float | None  # time of the grid point being fitted (None: no limit)
    inits: list[str]
    callback: Callable | None
    seed: int

    def tensor(self, a):
        import torch

        return torch.as_tensor(np.ascontiguousarray(a), dtype=self.target.dtype, device=self.target.device)

    def factor_starts(self, shape: tuple[int, int, int]) -> dict[str, Any]:
        rng = np.random.default_rng(self.seed)
        return {kind: self.tensor(_start_factors(kind, rng, shape)).reshape(-1) for kind in self.inits}

    def residual(self, x, shape, offsets: list[int]):
        """``X / scale - P(W)`` for the flat factor values at the front of ``x``."""
        from .sf._kernels import chord_product

        return self.target - chord_product(x[: math.prod(shape)].view(shape), offsets)

    def minimize(self, fun, x0, share: float, begin: float) -> tuple[Any, str, int, float]:
        """L-BFGS from ``x0`` for ``share`` of the iterations (and time limit).

        Returns the best point, the stop reason, the iterations and the best
        loss; a Ctrl-C ends it with reason ``"interrupted"`` and the best point kept.
        """
        from .sf import _solver

        o = self.options
        options = _solver.LBFGSOptions(
            max_iter=max(0, int(round(share * o["max_iter"]))),
            time_limit=None if self.seconds is None else share * self.seconds,
            ftol=o["ftol"], gtol=o["gtol"], history_size=o["history_size"],
        )
        state = _solver.new_state(x0)
        try:
            reason = _solver.lbfgs(fun, state, options, self._progress(begin))
        except KeyboardInterrupt:
            reason = _INTERRUPTED
        return state["best_x"], reason, int(state["n_iter"]), state["best_loss"]

    def _progress(self, begin: float):
        if self.callback is None:
            return None
        user, scale, max_iter = self.callback, self.scale, self.options["max_iter"]

        def report(state: dict) -> bool:
            info = {"iteration": state["n_iter"], "max_iter": max_iter,
                    "fro_error": scale * math.sqrt(2.0 * max(state["loss"], 0.0)),
                    "elapsed": time.perf_counter() - begin}
            return bool(user(info))

        return report

    def chord(self, x, shape, offsets: list[int]) -> ChordOperator:
        """The factor part of ``x`` in ``X``'s units (each factor takes an equal share of the scale)."""
        import torch

        values = x[: math.prod(shape)].view(shape).to(torch.float64).cpu().numpy()
        return ChordOperator(values * self.scale ** (1.0 / shape[0]), np.asarray(offsets))


def _config(split: HybridSplit) -> SFConfig:
    return SFConfig(split.base, split.n_factors, split.n_offsets, split.count)


def _score(dense: np.ndarray, split: HybridSplit, op: HybridOperator, begin: float, **info) -> _Point:
    from .metrics import frobenius_error

    fro, rel = frobenius_error(dense, op.to_dense(), float(np.linalg.norm(dense)))
    return _Point(split, op, fro, rel, time.perf_counter() - begin, **info)


# =============================================================================== estimators
class _ChordHybrid(Approximation):
    """What sf+lr and sf+s share: validation, the plain SF end, the grid loop, the joint fits, the result.

    Subclasses supply the grid (``_grid``), the other end (``_fit_end``) and
    the correction: ``_begin`` (its start next to given factors),
    ``_objective``, ``_phases`` / ``_refresh`` and ``_operator``.
    """

    _method = ""
    _parameter_constraints = {
        "budget": Interval(int, 1, None, allow_none=True),
        "max_splits": Interval(int, 0, None),
        "sf_params": (dict, None),
        "random_state": Interval(int, 0, None),
        "device": str,
        "dtype": (str, None),
    }

    # ------------------------------------------------------------------ fit
    def fit(self, X, *, check_input: bool = True):
        """Fit every split of the grid to the square matrix ``X`` and keep the best.

        A ``KeyboardInterrupt`` stops the grid at once: the best point so far
        (for the fit it cut short, its best iterate) is kept and
        ``stop_reason_`` is ``"interrupted"``.  ``check_input=False`` skips
        validating ``X`` (the caller did).
        """
        X = self._validate(X, check_input)
        n = X.shape[0]
        budget = sf_count(n) if self.budget is None else int(self.budget)
        dense = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        self._resolve_device()
        begin = time.perf_counter()
        limit = self._time_limit()
        deadline = None if limit is None else begin + limit
        params = self._plain_params(n, budget)
        if params is not None and limit is not None:
            params["time_limit"] = PLAIN_SHARE * limit
        plain = None if params is None else self._fit_plain(X, dense, params, budget)
        points = [] if plain is None else [plain]
        config = None if plain is None else _config(plain.split)
        splits = [s for s in self._grid(n, budget, config) if s.role != "sf"]
        if not splits and not points:
            raise BudgetError(self._too_small(n, budget))
        problem = None
        # The closed-form end first, then the joint fits, each with an equal share of the time left.
        splits.sort(key=lambda s: s.role not in ("lr", "sparse"))
        joint = [s for s in splits if s.role not in ("lr", "sparse")]
        for split in splits:
            if points and points[-1].stop_reason == _INTERRUPTED:
                break
            if split.role in ("lr", "sparse"):
                points.append(self._fit_end(X, dense, budget, split))
            elif np.any(dense):  # (for the zero matrix both ends are exact already)
                problem = problem or self._problem(n, dense, params)
                left = len(joint) - joint.index(split)
                problem.seconds = None if deadline is None else max(0.0, deadline - time.perf_counter()) / left
                points.append(self._fit_split(problem, split, plain if split.role == "sf+rest" else None))
        self._set_result(n, budget, points, time.perf_counter() - begin)
        return self

    def _time_limit(self) -> float | None:
        """The whole fit's time limit: ``sf_params["time_limit"]`` or ChordSF's default."""
        import inspect

        params = self.sf_params or {}
        if "time_limit" in params:
            return params["time_limit"]
        return inspect.signature(ChordSF).parameters["time_limit"].default

    def _resolve_device(self) -> None:
        from ._device import resolve_device, resolve_dtype

        device = resolve_device(self.device)
        self._device, self._dtype = device, resolve_dtype(self.dtype, device)
        self.device_, self.dtype_ = str(device), str(self._dtype).replace("torch.", "")

    def _plain_params(self, n: int, budget: int) -> dict[str, Any] | None:
        """``ChordSF`` keywords of the ``sf`` method at this budget (None: no structure fits)."""
        params = dict(self.sf_params or {})
        if not ({"n_factors", "base"} & params.keys()):
            try:
                config = sf_config_for_budget(n, budget)
            except BudgetError:
                return None
            params.update(n_factors=config.n_factors, base=config.base)
        return dict(random_state=self.random_state, device=self.device, dtype=self.dtype,
                    callback=self.callback, **params)

    def _fit_plain(self, X, dense: np.ndarray, params: dict[str, Any], budget: int) -> _Point | None:
        est = _plain_sf(X, dense, params)
        if est.n_stored_ > budget:
            return None  # a structure forced through sf_params that does not fit is no grid point
        m, _, k = est.factors_.shape
        split = HybridSplit("sf", int(est.base), m, k, 0, 0, int(est.n_stored_))
        point = _score(dense, split, HybridOperator(dense.shape[0], chord=est.operator_), 0.0,
                       n_iter=int(est.n_iter_), stop_reason=est.stop_reason_, start="sf")
        point.seconds = float(est.seconds_)  # its own fit time, also when reused
        return point

    def _problem(self, n: int, dense: np.ndarray, params: dict[str, Any] | None) -> _Problem:
        import torch

        from ._validation import check_memory
        from .chord import chord_offsets, default_n_factors
        from .sf._kernels import select_kernel
        from .sf.model import estimate_fit_memory

        # ChordSF's own defaults (max_iter, tolerances, init, memory limit), not repeated here.
        ref = ChordSF(**{k: v for k, v in (params or self.sf_params or {}).items() if k != "callback"})
        itemsize = torch.empty((), dtype=self._dtype).element_size()
        check_memory(
            estimate_fit_memory(n, default_n_factors(n), len(chord_offsets(n)), itemsize, ref.history_size,
                                self._device.type) + 3 * n * n * itemsize,
            what=f"fitting {self._method} to the {n} x {n} matrix on {self._device.type}",
            limit=ref.max_memory,
        )
        fro = float(np.linalg.norm(dense))
        scale = fro / math.sqrt(n)  # ChordSF's "sqrt_n" scale: the loss is O(N) whatever X's units
        target = torch.as_tensor(dense / scale, dtype=self._dtype, device=self._device)
        kernel, _ = select_kernel(n, self._device.type)
        inits = [ref.init] if ref.init in ("reference", "identity") else ["reference", "identity"]
        options = {k: getattr(ref, k) for k in ("max_iter", "ftol", "gtol", "history_size")}
        return _Problem(n, dense, fro, scale, target, kernel, options, None, inits, self.callback, self.random_state)

    def _fit_split(self, pb: _Problem, split: HybridSplit, warm: _Point | None) -> _Point:
        """Joint fit of one split: probe the starts, continue the best, in phases."""
        from .chord import chord_offsets

        begin = time.perf_counter()
        shape = (split.n_factors, pb.n, split.n_offsets)
        if warm is not None:
            offsets = warm.operator.chord.offsets.tolist()
            values = warm.operator.chord.values / pb.scale ** (1.0 / split.n_factors)
            starts = {"sf": pb.tensor(values).reshape(-1)}
        else:
            offsets = chord_offsets(pb.n).tolist()
            starts = pb.factor_starts(shape)
        name, corr, x, reason, n_iter = self._probe(pb, split, starts, shape, offsets, begin)
        used = PROBE_SHARE * len(starts) if len(starts) > 1 else 0.0
        for k, share in enumerate(self._phases(used)):
            if reason == _INTERRUPTED:
                break
            if k:
                corr, x = self._refresh(pb, corr, x, shape, offsets)
            x, reason, it, _ = pb.minimize(self._objective(pb, corr, shape, offsets), x, share, begin)
            n_iter += it
        op = self._operator(pb, corr, x, shape, offsets)
        return _score(pb.dense, split, op, begin, n_iter=n_iter, stop_reason=reason,
                      start=f"{name} + {self._start_label}")

    def _probe(self, pb: _Problem, split: HybridSplit, starts: dict, shape, offsets, begin: float):
        """The start to continue: the only one, or the one whose short probe reached the lower loss."""
        if len(starts) == 1:
            (name, x_w), = starts.items()
            return (name, *self._begin(pb, split, x_w, shape, offsets), "max_iter", 0)
        best, n_iter = None, 0
        for name, x_w in starts.items():
            corr, x0 = self._begin(pb, split, x_w, shape, offsets)
            x, reason, it, loss = pb.minimize(self._objective(pb, corr, shape, offsets), x0, PROBE_SHARE, begin)
            n_iter += it
            if best is None or loss < best[-1]:
                best = (name, corr, x, reason, loss)
            if reason == _INTERRUPTED:
                return (*best[:3], reason, n_iter)
        return (*best[:4], n_iter)

    @staticmethod
    def _phases(used: float) -> list[float]:
        return [1.0 - used]

    def _refresh(self, pb, corr, x, shape, offsets):
        return corr, x

    # ------------------------------------------------------------------ result
    def _set_result(self, n: int, budget: int, points: list[_Point], seconds: float) -> None:
        best = min(points, key=lambda p: p.fro_error)
        chord = best.operator.chord
        self.operator_ = best.operator
        self.n_stored_ = int(best.operator.n_stored)
        self.fro_error_, self.rel_error_ = best.fro_error, best.rel_error
        self.factors_ = np.zeros((0, n, 0)) if chord is None else chord.values
        self.offsets_ = np.zeros(0, dtype=np.int64) if chord is None else chord.offsets
        # Compute of the whole search: every grid point's own time (a reused plain fit counts its time).
        self.seconds_ = float(sum(p.seconds for p in points))
        self.wall_seconds_ = seconds
        self.n_iter_ = int(sum(p.n_iter for p in points))
        interrupted = any(p.stop_reason == _INTERRUPTED for p in points)
        self.stop_reason_ = _INTERRUPTED if interrupted else best.stop_reason
        self.grid_ = [self._record(p) for p in points]
        chosen = {k: v for k, v in self._record(best).items() if k not in ("seconds", "fro_error", "rel_error")}
        self.params_ = {**chosen, "budget": budget, "offsets": self.offsets_.tolist(),
                        "max_splits": self.max_splits, "device": self.device_, "dtype": self.dtype_,
                        "grid": self.grid_}
        if best.stop_reason in ("max_iter", "time_limit") and best.split.role in ("split", "sf+rest"):
            warnings.warn(
                f"{self._method}: the chosen split stopped on its {best.stop_reason.replace('_', ' ')} "
                "before its tolerances were met; increase max_iter / time_limit (sf_params) for a closer fit",
                ConvergenceWarning,
                stacklevel=4,  # this frame, the subclass's _set_result, fit, then the caller
            )

    def _common_record(self, p: _Point) -> dict[str, Any]:
        s, chord = p.split, p.operator.chord
        return {
            "split": s.role,
            "n_factors": s.n_factors,
            "base": s.base if s.n_factors else None,
            "sf_count": 0 if chord is None else chord.n_stored,
            "count": int(p.operator.n_stored),
            "fro_error": p.fro_error,
            "rel_error": p.rel_error,
            "seconds": p.seconds,
            "iterations": p.n_iter,
            "stop_reason": p.stop_reason,
            "start": p.start,
        }

    # ------------------------------------------------------------------ use


class ChordLowRank(_ChordHybrid):
    """sf+lr: Chord sparse factors plus a rank-``r`` correction, at one budget of stored numbers.

    ``X ≈ W1 ... WM + U diag(s) V^T``, fitted jointly; the split of the budget
    between the factors and the rank is chosen on the grid of
    :func:`sfapprox.budget.sf_lr_splits`, whose ends are the ``sf`` method's
    fit and TSVD at the same budget, so the result is never worse than the
    better of the two.  Stored: ``N K M + r (2N + 1)``.

    Parameters
    ----------
    budget : int or None, default=None
        Stored-number budget; None is SF's reference count ``N K ceil(log2 N)``.
    max_splits : int, default=3
        Most ``"split"`` points (fewer factors, larger rank) tried besides the
        two ends and ``"sf+rest"``; 0 tries only those.
    sf_params : dict or None, default=None
        Extra :class:`~sfapprox.sf.model.ChordSF` parameters (``max_iter``,
        ``time_limit``, ``init``, ``ftol``, ...): the plain SF point gets them
        as the ``sf`` method does, and every joint fit stops by the same
        rules (``max_iter`` applies to each grid point).  ``time_limit``
        bounds the whole fit: the plain SF point gets ``PLAIN_SHARE`` of it
        and the joint fits share the rest equally (with ``time_limit=None``
        the plain point is exactly the ``sf`` method's fit).
    random_state : int, default=0
    device : {"auto", "cpu", "cuda"}, default="auto"
    dtype : {"float64", "float32"} or None, default=None
        None: float64 on the CPU, float32 on a GPU.
    callback : callable or None
        Progress callback, as ChordSF's (called by every iterative fit).

    Attributes
    ----------
    operator_ : HybridOperator
        The surrogate (Chord part, ``U``, ``s``, ``Vt``).
    factors_ : ndarray of shape (M, N, K)
        The Chord part (``M = 0`` when TSVD alone won).
    offsets_ : ndarray of shape (K,)
    low_rank_ : tuple of ndarray
        ``(U, s, Vt)``, ``U`` and ``V`` with orthonormal columns.
    rank_ : int
    n_stored_ : int
        ``sf_lr_count(N, M, K, r)``, never above the budget.
    fro_error_, rel_error_ : float
    seconds_ : float
        Compute time of the whole grid (each point's own time; a reused plain
        SF fit counts its original time).
    wall_seconds_ : float
        Wall time of this ``fit`` call.
    n_iter_ : int
        L-BFGS iterations of the whole grid.
    stop_reason_ : str
        The chosen point's (``"exact"`` for TSVD; ``"interrupted"`` after a Ctrl-C).
    grid_ : list of dict
        Every point tried: split, counts, error, seconds, iterations, start.
    params_ : dict
        The chosen split (``split``, ``n_factors``, ``base``, ``rank``,
        ``sf_count``, ``lr_count``, ``count``, ...) and the ``grid``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((16, 16))
    >>> h = ChordLowRank(budget=200, sf_params={"max_iter": 50}, device="cpu").fit(X)
    >>> h.n_stored_ <= 200, [p["split"] for p in h.params_["grid"]]
    (True, ['lr', 'split', 'split'])
    """

    _method = "sf+lr"
    _start_label = "tsvd(X - P)"

    def __init__(
        self,
        *,
        budget: int | None = None,
        max_splits: int = 3,
        sf_params: dict[str, Any] | None = None,
        random_state: int = 0,
        device: str = "auto",
        dtype: str | None = None,
        callback: Callable[[dict], bool | None] | None = None,
    ):
        self.budget = budget
        self.max_splits = max_splits
        self.sf_params = sf_params
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.callback = callback

    def _grid(self, n: int, budget: int, plain: SFConfig | None) -> list[HybridSplit]:
        return sf_lr_splits(n, budget, plain, max_splits=self.max_splits)

    @staticmethod
    def _too_small(n: int, budget: int) -> str:
        return (f"budget {budget} is too small for sf+lr on a {n} x {n} matrix: neither a full-support "
                f"Chord factorization nor one rank ({tsvd_count(n, 1)} numbers) fits")

    def _fit_end(self, X, dense: np.ndarray, budget: int, split: HybridSplit) -> _Point:
        """TSVD at the budget, exactly as the ``tsvd`` method fits it."""
        from .baselines.tsvd import TruncatedSVD

        begin = time.perf_counter()
        t = TruncatedSVD(budget=budget, random_state=self.random_state).fit(X, check_input=False)
        return _score(dense, split, HybridOperator(dense.shape[0], low_rank=(t.U_, t.s_, t.Vt_)), begin)

    def _begin(self, pb: _Problem, split: HybridSplit, x_w, shape, offsets):
        """``U, V`` from the TSVD of ``X - P(W)`` (balanced: each takes ``sqrt(s)``)."""
        from .baselines.tsvd import TruncatedSVD

        residual = pb.residual(x_w, shape, offsets).double().cpu().numpy()
        t = TruncatedSVD(n_components=split.rank, random_state=self.random_state).fit(residual, check_input=False)
        root = np.sqrt(t.s_)
        return split.rank, _cat(x_w, pb.tensor(t.U_ * root), pb.tensor(t.Vt_.T * root))

    def _objective(self, pb: _Problem, rank: int, shape, offsets):
        return _lr_objective(pb.kernel, offsets, pb.target, shape, rank)

    def _operator(self, pb: _Problem, rank: int, x, shape, offsets) -> HybridOperator:
        import torch

        tail = x[math.prod(shape) :].to(torch.float64).cpu().numpy()
        U = tail[: pb.n * rank].reshape(pb.n, rank) * pb.scale
        V = tail[pb.n * rank :].reshape(pb.n, rank)
        return HybridOperator(pb.n, chord=pb.chord(x, shape, offsets), low_rank=_orthonormal(U, V))

    def _record(self, p: _Point) -> dict[str, Any]:
        rank = p.operator.rank
        return {**self._common_record(p), "rank": rank, "lr_count": tsvd_count(p.operator.shape[0], rank)}

    def _set_result(self, n, budget, points, seconds) -> None:
        super()._set_result(n, budget, points, seconds)
        self.low_rank_ = (self.operator_.U, self.operator_.s, self.operator_.Vt)
        self.rank_ = self.operator_.rank


class ChordSparse(_ChordHybrid):
    """sf+s: Chord sparse factors plus ``s`` entries at free positions, at one budget.

    ``X ≈ W1 ... WM + S``: the positions of ``S`` are the largest entries of
    the factors' residual (re-chosen as the fit goes), and its values are
    fitted jointly with the factors.  The split of the budget is chosen on
    the grid of :func:`sfapprox.budget.sf_s_splits`, whose ends are the ``sf``
    method's fit and the ``B / c`` largest entries of ``X``.  Stored:
    ``N K M + s`` (``N K M + 2s`` with ``count_indices``, as RPCA counts).

    Parameters
    ----------
    budget : int or None, default=None
        Stored-number budget; None is SF's reference count.
    count_indices : bool, default=False
        Charge each sparse entry for its position too (2 numbers).
    max_splits, sf_params, random_state, device, dtype, callback
        As :class:`ChordLowRank`'s.

    Attributes
    ----------
    operator_ : HybridOperator
    factors_, offsets_ : ndarray
    sparse_ : scipy.sparse.csr_array
        The sparse part (exact zeros are not stored).
    n_sparse_ : int
    index_storage_ : int
        Positions ``S`` needs (``n_sparse_``), reported whatever ``count_indices`` is.
    n_stored_, fro_error_, rel_error_, seconds_, n_iter_, stop_reason_, grid_
        As ChordLowRank's.
    params_ : dict
        ``split``, ``n_factors``, ``n_sparse``, ``sf_count``, ``sparse_count``,
        ``count_indices``, ``index_storage``, ``count`` and the ``grid``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(16) + np.eye(16, k=3)
    >>> h = ChordSparse(budget=64, count_indices=True, device="cpu").fit(X)
    >>> h.n_stored_, h.params_["index_storage"], h.rel_error_
    (58, 29, 0.0)
    """

    _method = "sf+s"
    _start_label = "largest(X - P)"
    _parameter_constraints = {**_ChordHybrid._parameter_constraints, "count_indices": bool}

    def __init__(
        self,
        *,
        budget: int | None = None,
        count_indices: bool = False,
        max_splits: int = 3,
        sf_params: dict[str, Any] | None = None,
        random_state: int = 0,
        device: str = "auto",
        dtype: str | None = None,
        callback: Callable[[dict], bool | None] | None = None,
    ):
        self.budget = budget
        self.count_indices = count_indices
        self.max_splits = max_splits
        self.sf_params = sf_params
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.callback = callback

    def _grid(self, n: int, budget: int, plain: SFConfig | None) -> list[HybridSplit]:
        return sf_s_splits(n, budget, plain, count_indices=self.count_indices, max_splits=self.max_splits)

    @staticmethod
    def _too_small(n: int, budget: int) -> str:
        return f"budget {budget} is too small for sf+s on a {n} x {n} matrix: not even one sparse entry fits"

    def _sparse(self, n: int, flat: np.ndarray, values: np.ndarray) -> sp.csr_array:
        keep = values != 0  # exact zeros add nothing: not stored, not counted
        rows, cols = np.divmod(np.asarray(flat, dtype=np.int64)[keep], n)
        return sp.csr_array((values[keep].astype(np.float64), (rows, cols)), shape=(n, n))

    def _fit_end(self, X, dense: np.ndarray, budget: int, split: HybridSplit) -> _Point:
        """The ``s`` largest entries of ``X``: the best ``s``-sparse approximation, exactly."""
        begin = time.perf_counter()
        n = dense.shape[0]
        flat = _largest(dense, split.n_sparse)
        op = HybridOperator(n, sparse=self._sparse(n, flat, dense.ravel()[flat]), count_indices=self.count_indices)
        return _score(dense, split, op, begin)

    def _begin(self, pb: _Problem, split: HybridSplit, x_w, shape, offsets):
        return self._on_largest(pb, x_w, shape, offsets, split.n_sparse)

    @staticmethod
    def _on_largest(pb: _Problem, x_w, shape, offsets, count: int):
        """Support: the ``count`` largest entries of ``X - P(W)``, holding the residual there."""
        import torch

        residual = pb.residual(x_w, shape, offsets).reshape(-1)
        flat = torch.topk(residual.abs(), count, sorted=False).indices.sort().values
        return flat, _cat(x_w, residual[flat])

    def _objective(self, pb: _Problem, flat, shape, offsets):
        return _sparse_objective(pb.kernel, offsets, pb.target, shape, flat)

    @staticmethod
    def _phases(used: float) -> list[float]:
        marks = [m for m in RESELECT_AT if m > used]
        edges = [used, *marks, 1.0]
        return [b - a for a, b in pairwise(edges)]

    def _refresh(self, pb: _Problem, flat, x, shape, offsets):
        # The new support holds the residual exactly, so the loss cannot rise.
        return self._on_largest(pb, x[: math.prod(shape)], shape, offsets, flat.numel())

    def _operator(self, pb: _Problem, flat, x, shape, offsets) -> HybridOperator:
        import torch

        values = x[math.prod(shape) :].to(torch.float64).cpu().numpy() * pb.scale
        return HybridOperator(pb.n, chord=pb.chord(x, shape, offsets),
                              sparse=self._sparse(pb.n, flat.cpu().numpy(), values),
                              count_indices=self.count_indices)

    def _record(self, p: _Point) -> dict[str, Any]:
        s = int(p.operator.sparse.nnz)
        return {**self._common_record(p), "n_sparse": s, "sparse_count": (2 if self.count_indices else 1) * s,
                "count_indices": self.count_indices, "index_storage": s}

    def _set_result(self, n, budget, points, seconds) -> None:
        super()._set_result(n, budget, points, seconds)
        self.sparse_ = self.operator_.sparse
        self.n_sparse_ = int(self.sparse_.nnz)
        self.index_storage_ = self.n_sparse_


# =============================================================================== registration
def _maker(cls: type):
    def make(n: int, budget: int, context: RunContext):
        # The plain SF end and the joint fits take ChordSF's settings (iterations, time, memory).
        sf = {k: v for k, v in context.settings.apply_to(ChordSF).items() if k in ("max_iter", "time_limit", "max_memory")}
        sf.update(context.structure)
        if context.protocol == "paper":
            sf.setdefault("base", 2)  # its plain-SF end is then the paper's reference structure, as "sf"
        extra = {"count_indices": context.count_indices} if cls is ChordSparse else {}
        return cls(budget=budget, sf_params=sf, callback=context.callback,
                   **context.settings.apply_to(cls, exclude=("max_iter", "time_limit", "max_memory")), **extra)

    return make


register(
    MethodSpec(
        name="sf+lr",
        summary="Chord factors + low rank, budget split chosen on a grid (ends: sf, tsvd)",
        stores="N·K·M′ + r·(2N + 1)",
        make=_maker(ChordLowRank),
        min_budget=lambda n, context: min(b for b in (sf_min_budget(n), tsvd_count(n, 1)) if b is not None),
        order=50,
        label="SF + low rank",
    )
)
register(
    MethodSpec(
        name="sf+s",
        summary="Chord factors + sparse entries at free positions, budget split chosen on a grid",
        stores="N·K·M′ + s",
        make=_maker(ChordSparse),
        min_budget=lambda n, context: rpca_count(n, 0, 1, count_indices=context.count_indices),
        order=51,
        label="SF + sparse",
    )
)
