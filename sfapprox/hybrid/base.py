"""What sf+lr and sf+s share: the plain SF end, the grid loop, the joint fits and the result."""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import scipy.sparse as sp

from .. import _timing
from .._base import Approximation
from .._device import resolve_device, resolve_dtype
from .._errors import BudgetError, ConvergenceWarning, NotApplicableError, ParameterError, user_stacklevel
from ..formats import counted
from .._params import SEED, Interval, check_params
from .._progress import Reporter, phase, same_progress
from .._settings import DEFAULT_SEED, DEFAULT_TIME_LIMIT, SF_START_KINDS as START_KINDS
from .._threads import AdaptiveThreads
from .._validation import check_memory
from ..budget import SFConfig, sf_config_for_budget, sf_count
from ..chord import chord_offsets, default_n_factors
from ..metrics import operator_error
from ..baselines.tsvd import EXACT_TOL
from ..operators import ChordOperator, HybridOperator
from ..sources import MatrixLike
from .grid import HybridSplit
from .objectives import dense_product

# The SF estimator and its race are imported where used: they load torch, which listing the methods
# (`info`, a comparison without SF or a hybrid) never needs.
if TYPE_CHECKING:
    from ..sf.model import ChordSF

__all__ = ["PROBE_SHARE", "RESELECT_AT", "PLAIN_SHARE", "CONTINUE_SHARE", "PLAIN_CACHE_SIZE", "MIN_SPLIT_EVALS",
           "MIN_PHASE_EVALS",
           "StepCosts", "split_starts", "split_need", "reselect_fits", "hybrid_estimator"]

#: Share of a split's iterations (and time limit) each start is probed for, when there are two.
PROBE_SHARE = 0.1
#: sf+s: shares of the iterations after which the support is re-chosen from the residual.
RESELECT_AT = (0.4, 0.7)
#: Share of the time limit the plain SF end gets; the joint fits share the rest (the whole
#: grid stays within the limit, as every method does).
PLAIN_SHARE = 0.4
#: Share of the time limit kept from the joint fits, under a limit, to go on with the grid's best point
#: where it stopped on its time limit (:meth:`_ChordHybrid._go_on`): the plain end alone (40 %) then lost
#: to ``sf`` at the same limit by what the joint fits' 60 % bought nothing (0.607 against 0.505 at N = 257,
#: 2 s, a sparse matrix: every joint point cut short, worse than the plain end).
CONTINUE_SHARE = 0.3
#: Plain SF fits kept for reuse (each holds only its factors, ``N K M`` numbers).
PLAIN_CACHE_SIZE = 4
#: Under a time limit, a ``"split"`` point (fresh starts) runs only when the time left pays for its
#: starts, this many joint evaluations and its scoring (:func:`split_starts`): a fresh start a few
#: evaluations old is far from its fit, and only costs time.  The warm ``"sf+rest"`` point needs
#: just its start and scoring (the plain fit plus the correction of its residual is a result).
MIN_SPLIT_EVALS = 10
#: A re-selection of sf+s's support runs only when the time left pays for it (one start's cost)
#: and this many evaluations after it.
MIN_PHASE_EVALS = 3

_PLAIN_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_INTERRUPTED = "interrupted"


# =============================================================================== small helpers
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


@dataclass
class StepCosts:
    """Seconds of a joint fit's steps, as last measured: what the time limit expects the next to cost.

    Before a step of a kind is measured, its estimate comes from the plain
    SF fit's evaluations and the closed-form end's scoring.

    Attributes
    ----------
    begin : float, default=0.0
        One start's correction (the factors' residual, its TSVD or largest
        entries) and objective.
    evaluation : float, default=0.0
        One joint loss and gradient.
    score : float, default=0.0
        Scoring a grid point (its dense sum and error).
    """

    begin: float = 0.0
    evaluation: float = 0.0
    score: float = 0.0


def split_starts(left: float, costs: StepCosts, starts: int, *, warm: bool) -> int:
    """How many of a grid point's ``starts`` the ``left`` seconds pay for (0: skip the point).

    A warm point (``"sf+rest"``) needs its start and its scoring; a fresh one
    (``"split"``) needs, for each start probed, the start and its first
    evaluation, then :data:`MIN_SPLIT_EVALS` evaluations and its scoring.
    Fewer starts are probed when all do not fit (the first, ChordSF's own
    default, is kept).

    Parameters
    ----------
    left : float
        Seconds left (``inf``: no limit, every start runs).
    costs : StepCosts
        What each step costs.
    starts : int
        Starts the point would probe.
    warm : bool
        A warm ``"sf+rest"`` point (True) or a fresh ``"split"`` one.

    Returns
    -------
    int
        Between 0 and ``starts``.

    Examples
    --------
    >>> c = StepCosts(begin=1.0, evaluation=0.5, score=1.0)
    >>> split_starts(30.0, c, 2, warm=False), split_starts(8.0, c, 2, warm=False), split_starts(7.0, c, 2, warm=False)
    (2, 1, 0)
    >>> split_starts(2.0, c, 1, warm=True), split_starts(1.5, c, 1, warm=True)
    (1, 0)
    """
    if math.isinf(left):
        return starts
    for k in range(starts, 0, -1):
        if left >= split_need(costs, k, warm=warm):
            return k
    return 0


def reselect_fits(left: float, costs: StepCosts) -> bool:
    """Whether ``left`` seconds pay for a re-selection of the correction (one start's cost) and
    :data:`MIN_PHASE_EVALS` evaluations after it.

    Parameters
    ----------
    left : float
        Seconds left.
    costs : StepCosts
        What each step costs.

    Examples
    --------
    >>> reselect_fits(5.0, StepCosts(begin=1.0, evaluation=1.0)), reselect_fits(3.9, StepCosts(1.0, 1.0))
    (True, False)
    """
    return left >= costs.begin + MIN_PHASE_EVALS * costs.evaluation


def split_need(costs: StepCosts, starts: int, *, warm: bool) -> float:
    """Seconds the least useful work of a grid point takes (see :func:`split_starts`).

    Parameters
    ----------
    costs : StepCosts
        What each step costs.
    starts : int
        Starts probed.
    warm : bool
        A warm ``"sf+rest"`` point (True) or a fresh ``"split"`` one.
    """
    if warm:
        return starts * costs.begin + costs.score
    return starts * (costs.begin + costs.evaluation) + MIN_SPLIT_EVALS * costs.evaluation + costs.score


def _plain_sf(X, dense: np.ndarray, params: dict[str, Any]):
    """``ChordSF(**params).fit(X)``, memoised when it is deterministic (no time limit)."""
    key = None
    if params.get("time_limit", DEFAULT_TIME_LIMIT) is None:
        settings = tuple(sorted((k, repr(v)) for k, v in params.items() if k != "callback"))
        digest = hashlib.sha256(np.ascontiguousarray(dense).tobytes()).hexdigest()
        key = (dense.shape, digest, settings)
        if key in _PLAIN_CACHE:
            _PLAIN_CACHE.move_to_end(key)
            return _PLAIN_CACHE[key]
    from ..sf.model import ChordSF

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


class _FitProgress:
    """The hybrid fit's reports to the user's ``callback``, counted over the whole fit.

    Its legs run one after another (the plain SF end, the closed-form end, each joint fit's race of starts
    and its phases, going on with the best point), each counting its iterations from 0: passed on as they
    were, the count (and a progress bar's fill with it) went back at every grid point.  Each report here
    gives ``iteration`` after the legs before, ``max_iter`` the most the whole fit may take (an upper bound
    until the grid is known, then lowered as its points end or are skipped, never raised: the fill
    ``iteration / max_iter`` never goes back) and ``elapsed`` since the fit began.

    Parameters
    ----------
    callback : callable or None
        The user's callback (None: every report is a no-op).
    max_iter : int
        The most iterations the fit may take, as known before it starts.
    began : float
        When the fit began (``time.perf_counter()``).
    """

    def __init__(self, callback: Callable[[dict], Any] | None, max_iter: int, began: float) -> None:
        self.callback = callback
        self.max_iter = max(0, int(max_iter))
        self.began = began
        self.done = 0  # iterations of the legs finished
        self.last = 0  # the highest iteration reported

    def report(self, info: dict, leg_iterations: int) -> bool:
        """Pass on a leg's ``info`` with its ``leg_iterations`` counted after the legs before; what the
        callback returns (True: stop)."""
        if self.callback is None:
            return False
        self.last = max(self.last, self.done + int(leg_iterations))
        return bool(self.callback({**info, "iteration": self.last, "max_iter": self.max_iter,
                                   "elapsed": time.perf_counter() - self.began}))

    def relay(self) -> Callable[[dict], bool] | None:
        """A callback for a leg that makes its own progress dicts (ChordSF's, a :class:`Reporter`'s),
        marked coarse and showing phases as the user's is; None without a user's callback (a fit without
        one skips its reports)."""
        if self.callback is None:
            return None
        return same_progress(lambda info: self.report(info, info["iteration"]), self.callback)

    def finish(self, n_iter: int = 0) -> None:
        """End a leg of ``n_iter`` iterations (those a coarse callback was not told of included)."""
        self.done = max(self.last, self.done + int(n_iter))

    def at_most(self, max_iter: int) -> None:
        """Lower ``max_iter`` to ``max_iter`` (the grid known, a point skipped or ended early); never raised,
        never below the iterations reported."""
        self.max_iter = max(self.last, min(self.max_iter, int(max_iter)))


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
    init_noise: float | None
    progress: _FitProgress
    seed: int
    # When the grid point being fitted must stop optimising: its end less its scoring.
    deadline: _timing.Deadline = field(default_factory=lambda: _timing.Deadline(None))
    costs: StepCosts = field(default_factory=StepCosts)
    poll: Callable[[], Any] = lambda: None  # the thread governor's poll, after every iteration

    def tensor(self, a):
        import torch

        return torch.as_tensor(np.ascontiguousarray(a), dtype=self.target.dtype, device=self.target.device)

    def factor_starts(self, shape: tuple[int, int, int]) -> dict[str, Any]:
        """ChordSF's own starts (the same routine, seeds and noise), as flat tensors."""
        from ..sf._multistart import start_values

        values = start_values(self.inits, self.seed, shape, self.init_noise)
        return {kind: self.tensor(v).reshape(-1) for kind, v in values.items()}

    def lbfgs_options(self, max_iter: int, time_limit: float | None):
        """Solver options of one leg: ChordSF's tolerances, at most until the point's deadline."""
        from ..sf import _solver

        o = self.options
        left = self.deadline.limit()
        if left is not None:
            time_limit = left if time_limit is None else min(time_limit, left)
        return _solver.LBFGSOptions(max_iter=max(0, int(max_iter)), time_limit=time_limit,
                                    ftol=o["ftol"], gtol=o["gtol"], history_size=o["history_size"])

    def new_state(self, x0):
        """A solver state from ``x0`` that expects an evaluation to cost what the last one did
        (so that under a time limit not even its first evaluation starts when it would not fit)."""
        from ..sf import _solver

        state = _solver.new_state(x0)
        if self.costs.evaluation > 0:
            state["eval_seconds"] = self.costs.evaluation
        return state

    def measured(self, state: dict) -> None:
        """Keep the cost of the state's last evaluation as the estimate of the next ones."""
        if state.get("eval_seconds") is not None:
            self.costs.evaluation = float(state["eval_seconds"])

    def residual(self, x, shape, offsets: list[int]):
        """``X / scale - P(W)`` for the flat factor values at the front of ``x``."""
        return self.target - dense_product(x[: math.prod(shape)].view(shape), offsets)

    def minimize(self, fun, x0, share: float) -> tuple[Any, str, int, float]:
        """L-BFGS from ``x0`` for ``share`` of the iterations (and time limit).

        Returns the best point, the stop reason, the iterations and the best
        loss; a Ctrl-C ends it with reason ``"interrupted"`` and the best point kept.
        """
        from ..sf import _solver

        options = self.lbfgs_options(round(share * self.options["max_iter"]),
                                     None if self.seconds is None else share * self.seconds)
        state = self.new_state(x0)
        try:
            reason = _solver.lbfgs(fun, state, options, self._progress())
        except KeyboardInterrupt:
            reason = _INTERRUPTED
        self.measured(state)
        self.progress.finish(int(state["n_iter"]))
        return state["best_x"], reason, int(state["n_iter"]), state["best_loss"]

    def _progress(self, start: str | None = None, iterations: Callable[[dict], int] | None = None):
        """The solver's per-iteration callback: the governor's poll, then the user's callback
        (:class:`_FitProgress`: the iterations and time of the whole fit) with the iterate's error.
        ``start``: the start it runs; ``iterations(state)``: the leg's iterations so far (default: the
        state's own; a race's: every start's)."""
        progress, scale, poll = self.progress, self.scale, self.poll

        def report(state: dict) -> bool:
            poll()
            if progress.callback is None:
                return False
            info = {"fro_error": scale * math.sqrt(2.0 * max(state["loss"], 0.0))}
            if start is not None:
                info["start"] = start
            return progress.report(info, state["n_iter"] if iterations is None else iterations(state))

        return report

    def chord(self, x, shape, offsets: list[int]) -> ChordOperator:
        """The factor part of ``x`` in ``X``'s units (each factor takes an equal share of the scale)."""
        import torch

        values = x[: math.prod(shape)].view(shape).to(torch.float64).cpu().numpy()
        return ChordOperator(values * self.scale ** (1.0 / shape[0]), np.asarray(offsets))


def _config(split: HybridSplit) -> SFConfig:
    return SFConfig(split.base, split.n_factors, split.n_offsets, split.count)


def _score(dense: np.ndarray, split: HybridSplit, op: HybridOperator, begin: float, **info) -> _Point:
    fro, rel = operator_error(dense, op, float(np.linalg.norm(dense)))
    return _Point(split, op, fro, rel, time.perf_counter() - begin, **info)


# =============================================================================== estimators
class _ChordHybrid(Approximation):
    """What sf+lr and sf+s share: validation, the plain SF end, the grid loop, the joint fits, the result.

    Subclasses supply the grid (``_grid``), the other end (``_fit_end``) and
    the correction: ``_begin`` (its start next to given factors),
    ``_objective``, ``_phases`` / ``_refresh`` and ``_operator``.
    """

    # The hooks a subclass supplies (lowrank.py, sparse.py), declared for type checkers only (annotations:
    # nothing at run time); their signatures are the subclasses'.
    _start_label: str
    _grid: Callable[..., list[HybridSplit]]
    _too_small: Callable[[int, int], str]
    _fit_end: Callable[..., _Point]
    _end_stage: Callable[[HybridSplit, int], str]
    _begin: Callable[..., Any]
    _objective: Callable[..., Any]
    _operator: Callable[..., HybridOperator]
    _record: Callable[[_Point], dict[str, Any]]

    _method = ""
    _parameter_constraints = {
        "budget": Interval(int, 0, None, allow_none=True),
        "max_splits": Interval(int, 0, None),
        "sf_params": (dict, None),
        "callback": (Callable, None),
        "random_state": SEED,
        "device": str,
        "dtype": (str, None),
    }

    def __init__(
        self,
        *,
        budget: int | None = None,
        max_splits: int = 3,
        sf_params: dict[str, Any] | None = None,
        random_state: int = DEFAULT_SEED,
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

    # ------------------------------------------------------------------ fit
    def fit(self, X: MatrixLike, *, check_input: bool = True) -> Self:  # ChordLowRank.fit gives a ChordLowRank
        """Fit every split of the grid to the square matrix ``X`` and keep the best.

        A ``KeyboardInterrupt`` stops the grid at once: the best point so far
        (for the fit it cut short, its best iterate) is kept and
        ``stop_reason_`` is ``"interrupted"``.  ``check_input=False`` skips
        validating ``X`` (the caller did).

        Parameters
        ----------
        X : array_like, scipy sparse array, LinearOperator or MatrixSource
            The square matrix (formed for the fit).
        check_input : bool, default=True
            Validate ``X``; False when the caller did.

        Returns
        -------
        self
            Fitted: ``operator_``, ``fro_error_``, ``rel_error_``, ``stop_reason_``, ``params_``.
        """
        begin = time.perf_counter()  # the time limit covers the whole fit
        self._plain_estimator = None
        self._reusing = self._handed_over()
        X = self._validate(X, check_input)
        self._check_sf_params()  # every value, whether or not the plain SF end is fitted at this budget
        n = X.shape[0]
        budget = sf_count(n) if self.budget is None else int(self.budget)
        self._resolve_device()
        limit = self._time_limit()
        deadline = _timing.Deadline.after(limit)
        params = self._plain_params(n, budget)
        if params is None and not [s for s in self._grid(n, budget, None) if s.role != "sf"]:
            # below its smallest fit: said before the memory check (no limit makes it fit), as every method
            raise BudgetError(self._too_small(n, budget))
        self._check_memory(n, params)  # the joint fits' need, before the grid's ends are fitted
        per_point = self._reference(params).max_iter  # the most iterations of the plain end and of each joint point
        # Before the grid is known (it follows the plain end's structure), the most it may hold: the plain end,
        # a warm point, max_splits fresh ones and going on with the best (under a time limit).
        progress = _FitProgress(self.callback, per_point * ((params is not None) + 1 + self.max_splits
                                                            + (limit is not None)), begin)
        if params is not None:
            params["callback"] = progress.relay()
        # (after the check: a sparse X's dense copy was made before it, N^2 numbers a refusal did not need)
        dense = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        if params is not None and limit is not None:
            params["time_limit"] = PLAIN_SHARE * limit
        plain = None if params is None else self._fit_plain(X, dense, params, budget)
        # the plain end handed over by a comparison's sf row (its start says so), not fitted here
        reused = plain is not None and plain.start != "sf"
        progress.finish(0 if plain is None or reused else plain.n_iter)
        if plain is not None and not reused and deadline.end is not None:
            # the plain end's loading (or compiling) of its kernels is outside its time limit, and so outside
            # the hybrid's: a first fit's (seconds) had taken the joint points' time, every one skipped
            deadline = _timing.Deadline(deadline.end + getattr(self._plain_estimator, "_warm_up_seconds", 0.0))
        points: list[_Point | dict] = [] if plain is None else [plain]  # a dict: a point skipped for time
        config = None if plain is None else _config(plain.split)
        splits = [s for s in self._grid(n, budget, config) if s.role != "sf"]
        if not splits and not points:
            raise BudgetError(self._too_small(n, budget))
        problem = None
        costs = self._first_costs()
        # The closed-form end first, then the joint fits, each with an equal share of the time left
        # (or, when that share would not pay for its least work, that least work: later points are
        # then skipped, never the time limit passed).
        splits.sort(key=lambda s: s.role not in ("lr", "sparse"))
        joint = [s for s in splits if s.role not in ("lr", "sparse")]
        floor = EXACT_TOL * float(np.linalg.norm(dense))  # a grid point reproduces X (round-off): the grid stops there
        # kept for going on with the best point (a share of the joint fits' time: the plain end's is its own);
        # none beside a comparison's sf row, whose fit had the whole limit (going on with it would be SF
        # given more time than the sf row, not the hybrid's gain)
        reserve = 0.0 if limit is None or not joint or reused else CONTINUE_SHARE * limit
        progress.at_most(progress.done + per_point * (len(joint) + (reserve > 0)))
        stopped = False  # a stop during the closed-form end, which no point records
        with AdaptiveThreads(self._work(n), device_type=self._device.type, compiled=self._compiled(n)) as governor:
            for split in splits:
                if points and isinstance(points[-1], _Point) and points[-1].stop_reason == _INTERRUPTED:
                    break
                if any(isinstance(p, _Point) and p.fro_error <= floor for p in points):
                    break  # a point reproduces X: nothing can beat it (e.g. every non-zero fits sf+s's budget)
                if split.role in ("lr", "sparse"):
                    started = _timing.now()
                    try:
                        points.append(self._reported_end(X, dense, budget, split, deadline, progress))
                    except KeyboardInterrupt:
                        if not points:
                            raise  # nothing fitted yet to keep
                        stopped = True  # the plain SF end is kept, as a stop in a joint fit keeps its best
                        break
                    costs.score = max(costs.score, _timing.now() - started)  # fit and scoring: an upper estimate
                    continue
                if not np.any(dense):  # (for the zero matrix both ends are exact already)
                    continue
                warm = split.role == "sf+rest"
                problem = problem or self._problem(n, dense, params, costs, governor.poll, progress)
                left = max(0.0, deadline.left() - reserve)
                point_time = min(left, max(left / (len(joint) - joint.index(split)),
                                           split_need(costs, 1, warm=warm)))
                starts = split_starts(point_time, costs, 1 if warm else len(problem.inits), warm=warm)
                if not starts:
                    points.append(self._skipped(split))
                    progress.at_most(progress.max_iter - per_point)
                    continue
                point_end = _timing.Deadline.after(None if deadline.end is None else point_time)
                problem.seconds = None if deadline.end is None else point_time
                problem.deadline = _timing.Deadline(None if point_end.end is None else point_end.end - costs.score)
                points.append(self._fit_split(problem, split, plain if warm else None, starts))
                progress.at_most(progress.max_iter - max(0, per_point - points[-1].n_iter))  # ended early
            if reserve and not stopped:
                self._go_on(X, n, dense, params, points, problem, deadline, costs, progress)
        self._set_result(n, budget, points, time.perf_counter() - begin, stopped)
        return self

    def _reported_end(self, X, dense: np.ndarray, budget: int, split: HybridSplit, deadline: _timing.Deadline,
                      progress: _FitProgress) -> _Point:
        """The closed-form end (:meth:`_fit_end`), said to the progress callback as a stage of its own, then
        its error: without it a progress bar stood on the plain SF end's last iteration through the end's
        SVD or selection (seconds at N = 3,000), as if SF still ran.  It counts no iteration (the point
        records none): the whole fit's count stands while it runs."""
        report = Reporter(progress.relay(), began=progress.began)
        report.at(self._end_stage(split, budget))
        point = self._fit_end(X, dense, budget, split, deadline)
        report(point.fro_error, steps=0)
        progress.finish()
        return point

    def _go_on(self, X, n: int, dense: np.ndarray, params: dict[str, Any] | None, points: list,
               problem: _Problem | None, deadline: _timing.Deadline, costs: StepCosts,
               progress: _FitProgress) -> None:
        """Go on with the best point in the time left (:data:`CONTINUE_SHARE`, and what the points left
        unused) where it stopped on its time limit: the plain end as ChordSF from its factors, a joint
        point as a warm joint fit from its factors (its correction re-fitted to their residual, as
        ``"sf+rest"``'s).  The point is replaced only by a smaller error: never worse than it was."""
        scored = [(i, p) for i, p in enumerate(points) if isinstance(p, _Point)]
        if not scored:
            return
        i, best = min(scored, key=lambda item: item[1].fro_error)
        left = deadline.left()
        if best.stop_reason != "time_limit" or left <= 0:
            return
        began = time.perf_counter()
        if best.split.role == "sf":
            if params is None:
                return
            from ..sf.model import ChordSF

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # the row warns of its own stop, once
                est = ChordSF(**{**params, "init": best.operator.chord.values, "time_limit": left}).fit(
                    X, check_input=False)  # (params' callback: the whole fit's progress, going on)
            progress.finish(int(est.n_iter_))
            if est.n_stored_ != best.split.count:
                return
            point = _Point(best.split, HybridOperator(n, chord=est.operator_), float(est.fro_error_), est.rel_error_,
                           float(est.seconds_), n_iter=int(est.n_iter_), stop_reason=est.stop_reason_)
        elif best.split.role in ("split", "sf+rest") and problem is not None:
            if not split_starts(left, costs, 1, warm=True):
                return
            problem.seconds = left
            problem.deadline = _timing.Deadline(None if deadline.end is None else deadline.end - costs.score)
            point = self._fit_split(problem, best.split, best, 1)
        else:
            return
        if point.fro_error < best.fro_error:
            point.seconds = best.seconds + (time.perf_counter() - began)
            point.n_iter += best.n_iter
            point.start = f"{best.start}, then from its fit"
            points[i] = point

    def _first_costs(self) -> StepCosts:
        """Estimates of the joint fits' step costs before any is measured: the plain SF fit's
        seconds per evaluation (a joint evaluation, a start's residual and a scoring each
        cost about one dense pass over the factors; refined as they are measured)."""
        plain = getattr(self, "_plain_estimator", None)
        # (its seconds less its kernels' loading or compiling, which no joint evaluation repeats)
        fitting = 0.0 if plain is None else max(0.0, float(plain.seconds_) - getattr(plain, "_warm_up_seconds", 0.0))
        each = 0.0 if plain is None else fitting / max(1, int(plain.n_evals_))
        return StepCosts(begin=each, evaluation=each, score=each)

    @staticmethod
    def _compiled(n: int) -> bool:
        """Whether the SF end runs on the compiled kernel (its threads are the kernel's, see ``_threads``)."""
        from ..sf import _kernels

        return _kernels.select_kernel(n, "cpu")[1] == "numba"

    def _work(self, n: int) -> int:
        """Numbers one kernel operation touches (what decides whether threads pay, see ``_threads``)."""
        from ..sf import _kernels

        return _kernels.operation_numbers(n, _kernels.select_kernel(n, "cpu")[1])

    def _skipped(self, split: HybridSplit) -> dict[str, Any]:
        """The grid record of a point the time left did not pay for."""
        return {"split": split.role, "n_factors": split.n_factors, "base": split.base if split.n_factors else None,
                "rank" if split.rank else "n_sparse": split.rank or split.n_sparse,
                "count": split.count, "fro_error": None, "rel_error": None, "seconds": 0.0, "iterations": 0,
                "stop_reason": "time_limit", "skipped": "time_limit"}

    def _time_limit(self) -> float | None:
        """The whole fit's time limit: ``sf_params["time_limit"]`` or ChordSF's default."""
        return (self.sf_params or {}).get("time_limit", DEFAULT_TIME_LIMIT)

    def _resolve_device(self) -> None:
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

    #: Fits of the same matrix a comparison hands over (``"sf"``: a ChordSF, ``"tsvd"``: a
    #: TruncatedSVD), used as the grid's ends instead of refitting them (:func:`hybrid_estimator`).
    REUSES: tuple[str, ...] = ()

    def _fit_plain(self, X, dense: np.ndarray, params: dict[str, Any], budget: int) -> _Point | None:
        given = self._reusing.get("sf")
        reusable = given is not None and given.n_stored_ <= budget and given.stop_reason_ != _INTERRUPTED
        est = given if reusable else _plain_sf(X, dense, params)
        self._plain_estimator = est
        if est.n_stored_ > budget:
            return None  # a structure forced through sf_params that does not fit is no grid point
        m, _, k = est.factors_.shape
        split = HybridSplit("sf", int(est.base), m, k, 0, 0, int(est.n_stored_))
        # ChordSF scored its product as _score would (operator_error of the product against
        # X, in float64): the same numbers, without a second dense product.
        # Its own fit time when fitted (or cached) here; nothing when the comparison's sf row paid for it.
        seconds = 0.0 if reusable else float(est.seconds_)
        return _Point(split, HybridOperator(dense.shape[0], chord=est.operator_), float(est.fro_error_),
                      est.rel_error_, seconds, n_iter=int(est.n_iter_), stop_reason=est.stop_reason_,
                      start="sf (its row's fit)" if reusable else "sf")

    def _reference(self, params: dict[str, Any] | None) -> ChordSF:
        """ChordSF's own defaults (max_iter, tolerances, init, memory limit) with ``params``, not repeated here."""
        from ..sf.model import ChordSF

        return ChordSF(**{k: v for k, v in (params or self.sf_params or {}).items() if k != "callback"})

    def _check_sf_params(self) -> None:
        """Refuse, before any work, ``sf_params`` that ChordSF would refuse (the values as given, not
        the plain end's share of the time limit), and those the hybrids cannot use: a support other
        than Chord's (the joint fits' kernels and grid are Chord's) and a start other than SF's
        named ones (the joint fits race the reference and identity starts)."""
        from ..sf.model import ChordSF

        ChordSF.check_param_names(self.sf_params or {}, "sf_params")
        ref = self._reference(None)
        try:
            check_params(ref, ref._parameter_constraints)
        except ParameterError as exc:
            raise ParameterError(f"{self._method}: {exc} (in sf_params)") from None
        if ref.support != "chord":
            raise NotApplicableError(f"{self._method} fits Chord factors beside its correction; "
                                     f"support={ref.support!r} is for sf alone (drop it from sf_params / structure)")
        if not (isinstance(ref.init, str) and (ref.init == "auto" or ref.init in START_KINDS)):
            raise ParameterError(f"{self._method}: init={ref.init!r} is SF's start alone; the hybrids start from "
                                 "'reference' or 'identity', or race both ('auto')")

    def _check_memory(self, n: int, params: dict[str, Any] | None) -> None:
        """Refuse, before any fit (the grid's ends included) and before ``X``'s dense float64 copy is made,
        joint fits over the memory limit: they hold that copy and the correction's target copies (3 N^2)
        besides what a plain fit holds."""
        import torch

        from ..sf.model import estimate_fit_memory

        ref = self._reference(params)
        itemsize = torch.empty((), dtype=self._dtype).element_size()
        starts = 1 if ref.init in START_KINDS else len(START_KINDS)
        check_memory(
            estimate_fit_memory(n, default_n_factors(n), len(chord_offsets(n)), itemsize, ref.history_size,
                                self._device.type, n_starts=starts, input_bytes=8 * n * n)
            + 3 * n * n * itemsize,
            what=f"fitting {self._method} to the {n:,} x {n:,} matrix on {self._device.type}",
            limit=ref._max_memory_bytes,
        )

    def _problem(self, n: int, dense: np.ndarray, params: dict[str, Any] | None, costs: StepCosts,
                 poll: Callable[[], Any], progress: _FitProgress) -> _Problem:
        """What the joint fits share; ``progress``: the whole fit's reports (their iterations and time go on
        from the points before)."""
        from ..sf._kernels import scaled_target, select_kernel

        ref = self._reference(params)
        fro = float(np.linalg.norm(dense))
        scale = fro / math.sqrt(n)  # ChordSF's "sqrt_n" scale: the loss is O(N) whatever X's units
        target = scaled_target(dense, scale, self._dtype, self._device)
        kernel, _ = select_kernel(n, self._device.type)
        inits = [ref.init] if ref.init in START_KINDS else list(START_KINDS)
        options = {k: getattr(ref, k) for k in ("max_iter", "ftol", "gtol", "history_size")}
        return _Problem(n, dense, fro, scale, target, kernel, options, None, inits, ref.init_noise, progress,
                        self.random_state, costs=costs, poll=poll)

    def _fit_split(self, pb: _Problem, split: HybridSplit, warm: _Point | None, n_starts: int | None = None) -> _Point:
        """Joint fit of one split: probe the (first ``n_starts``) starts, continue the best, in phases.

        Under a time limit (``pb.deadline``: when the point must stop
        optimising) a phase's re-selection of the correction runs only when
        it and :data:`MIN_PHASE_EVALS` evaluations after it fit; otherwise the
        fit goes on with the correction it has.
        """
        begin = time.perf_counter()
        shape = (split.n_factors, pb.n, split.n_offsets)
        if warm is not None:
            offsets = warm.operator.chord.offsets.tolist()
            values = warm.operator.chord.values / pb.scale ** (1.0 / split.n_factors)
            starts = {"sf": pb.tensor(values).reshape(-1)}
        else:
            offsets = chord_offsets(pb.n).tolist()
            starts = pb.factor_starts(shape)
            starts = dict(list(starts.items())[: n_starts or len(starts)])
        name, corr, x, reason, n_iter = self._probe(pb, split, starts, shape, offsets)
        used = min(1.0, n_iter / pb.options["max_iter"]) if pb.options["max_iter"] else 0.0
        fun = None
        for k, share in enumerate(self._phases(used)):
            if reason == _INTERRUPTED:
                break
            if k and reselect_fits(pb.deadline.left(), pb.costs):
                started = _timing.now()
                corr, x = self._refresh(pb, corr, x, shape, offsets)
                fun = self._objective(pb, corr, shape, offsets)
                pb.costs.begin = _timing.now() - started
            elif fun is None:
                fun = self._objective(pb, corr, shape, offsets)
            x, reason, it, _ = pb.minimize(fun, x, share)
            n_iter += it
        op = self._operator(pb, corr, x, shape, offsets)
        started = _timing.now()
        point = _score(pb.dense, split, op, begin, n_iter=n_iter, stop_reason=reason,
                       start=f"{name} + {self._start_label}")
        pb.costs.score = _timing.now() - started
        return point

    def _probe(self, pb: _Problem, split: HybridSplit, starts: dict, shape, offsets):
        """The start to continue: the only one, or the winner of ChordSF's race between the starts
        (:func:`sfapprox.sf._multistart.race`, each within ``PROBE_SHARE`` of the point's budgets).

        Returns the start's name, its correction, its best point, the stop reason and the iterations spent.
        """
        from ..sf._multistart import best_run, race

        corrs, runs = {}, {}
        for name, x_w in starts.items():
            if runs and not pb.deadline.fits(split_need(pb.costs, 1, warm=False) - pb.costs.score):
                break  # the starts cost more than estimated: probe no further one (the first is ChordSF's default)
            started = _timing.now()
            corrs[name], x0 = self._begin(pb, split, x_w, shape, offsets)
            runs[name] = (self._objective(pb, corrs[name], shape, offsets), pb.new_state(x0))
            pb.costs.begin = _timing.now() - started
        if len(runs) == 1 or pb.options["max_iter"] < len(runs):
            # One start, or a point's iterations too few for one each (a race gives each start at least one:
            # max_iter 1 ran 2 iterations a point, max_iter 0 ran 2 where none was asked): the first, ChordSF's default.
            name, (_, state) = next(iter(runs.items()))
            return name, corrs[name], state["x"], "max_iter", 0
        reason = "max_iter"

        def raced(_state: dict) -> int:  # every start's iterations so far, as ChordSF's race reports them
            return sum(int(st["n_iter"]) for _, st in runs.values())

        progress = {name: pb._progress(name, raced) for name in runs}
        try:
            reason = race(runs, pb.lbfgs_options, share_iter=max(1, round(PROBE_SHARE * pb.options["max_iter"])),
                          share_time=None if pb.seconds is None else PROBE_SHARE * pb.seconds,
                          callback=lambda name, st: progress[name](st))
        except KeyboardInterrupt:
            reason = _INTERRUPTED
        for _, state in runs.values():
            pb.measured(state)
        name = best_run(runs)
        n_iter = sum(int(st["n_iter"]) for _, st in runs.values())
        pb.progress.finish(n_iter)
        return name, corrs[name], runs[name][1]["best_x"], reason, n_iter

    @staticmethod
    def _phases(used: float) -> list[float]:
        return [1.0 - used]

    def _refresh(self, pb, corr, x, shape, offsets):
        return corr, x

    # ------------------------------------------------------------------ result
    def _set_result(self, n: int, budget: int, entries: list[_Point | dict], seconds: float,
                    stopped: bool = False) -> None:
        """The fitted attributes from the grid's ``entries`` (a dict: a point skipped for time); ``stopped``:
        a stop came between points (the closed-form end's), so the fit is interrupted whatever they say."""
        points = [p for p in entries if isinstance(p, _Point)]
        skipped = len(entries) - len(points)
        best = min(points, key=lambda p: p.fro_error)
        chord = best.operator.chord
        self.operator_ = best.operator
        self.n_stored_ = int(best.operator.n_stored)
        self.fro_error_, self.rel_error_ = best.fro_error, best.rel_error
        self.factors_ = np.zeros((0, n, 0)) if chord is None else chord.values
        self.offsets_ = np.zeros(0, dtype=np.int64) if chord is None else chord.offsets
        # Compute of the whole search: every grid point's own time (a cached plain fit counts its time;
        # one a comparison's sf row made counts there).
        self.seconds_ = float(sum(p.seconds for p in points))
        self.wall_seconds_ = seconds
        self.n_iter_ = int(sum(p.n_iter for p in points))
        interrupted = stopped or any(p.stop_reason == _INTERRUPTED for p in points)
        # Points the time limit left no time for: the grid ended on its time limit.
        self.stop_reason_ = _INTERRUPTED if interrupted else "time_limit" if skipped else best.stop_reason
        self.grid_ = [self._record(p) if isinstance(p, _Point) else p for p in entries]
        chosen = {k: v for k, v in self._record(best).items() if k not in ("seconds", "fro_error", "rel_error")}
        self.params_ = {**chosen, "budget": budget, "offsets": self.offsets_.tolist(),
                        "max_splits": self.max_splits, "device": self.device_, "dtype": self.dtype_,
                        "grid": self.grid_}
        if self._reusing:
            self.params_["reused"] = sorted(self._reusing)  # the grid ends that are other rows' fits
        if skipped:
            warnings.warn(
                f"{self._method}: {skipped:,} of its {counted(len(entries), 'grid point')} did not fit in the time "
                "limit and were skipped; increase time_limit (sf_params) to try them all",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        elif best.stop_reason in ("max_iter", "time_limit") and best.split.role in ("split", "sf+rest"):
            warnings.warn(
                f"{self._method}: the chosen split stopped on its {best.stop_reason.replace('_', ' ')} "
                "before its tolerances were met; increase max_iter / time_limit (sf_params) for a closer fit",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
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


def hybrid_estimator(cls: type, budget: int, context, **extra: Any) -> "_ChordHybrid":
    """The hybrid estimator a method registration makes: ``cls`` at ``budget`` with the run's settings.

    The plain SF end and the joint fits take ChordSF's settings (iterations,
    time, memory) through ``sf_params``; the paper protocol keeps base 2, so
    the plain end is then the paper's reference structure, as the ``sf`` method's.

    Parameters
    ----------
    cls : type
        :class:`~sfapprox.hybrid.ChordLowRank` or :class:`~sfapprox.hybrid.ChordSparse`.
    budget : int
        Stored numbers allowed.
    context : RunContext
        The run's settings, protocol, structure and callback, and the fits of
        the methods run before it (``sf``, ``tsvd``), reused as the grid's ends.
    **extra
        Further ``cls`` parameters (e.g. ``count_indices``).

    Returns
    -------
    ChordLowRank or ChordSparse
        Not fitted yet.
    """
    with phase(context.callback, "loading torch"):  # (with SF's module, in a fresh process: 1-4 s)
        from ..sf.model import ChordSF

    sf = {k: v for k, v in context.settings.apply_to(ChordSF).items() if k in ("max_iter", "time_limit", "max_memory")}
    sf.update(context.structure)
    if context.protocol == "paper":
        sf.setdefault("base", 2)
    est = cls(budget=budget, sf_params=sf, callback=context.callback,
              **context.settings.apply_to(cls, exclude=("max_iter", "time_limit", "max_memory")), **extra)
    # In a comparison that also ran sf (and tsvd), the grid's ends are their fits, not refits: the
    # hybrid is then never worse than either, whatever the time limit, and its time goes to the
    # joint points.  Not parameters (a fit of its own has none): what the comparison hands over.
    est._reuse = {m: context.fitted[m] for m in cls.REUSES if m in context.fitted}
    return est
