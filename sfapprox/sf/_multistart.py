"""Several starts, one fit: the start routine and the race between starts.

Used by :class:`~sfapprox.sf.model.ChordSF` (``init="auto"``) and by the hybrids
(sf+lr, sf+s), so that both draw the same starts from the same seeds and pick
the one to continue by the same rule.

* :func:`start_values` is the one start routine: ``"reference"`` (every value
  ``1/K`` times ``1 + noise``, the reference code's) or ``"identity"`` (each
  factor near the identity), with one random stream per kind of start
  (``[seed, i]``), so ``init="auto"`` and ``init="identity"`` start alike.
* :func:`rank_one_values` is the informed start ``"rank1"``: factors whose
  product is the best rank-one approximation ``s1 u1 v1^T`` of ``X``
  (exactly, for ``N`` a power of two), from its top singular pair
  (:func:`top_pair`).  In memory it races with the other two where it is
  far ahead of both; from column blocks, where one start runs, it replaces
  the identity start where it is clearly ahead of it (:func:`rank_one_pays`).
* :func:`race` runs L-BFGS from each start in rounds (100 iterations and an
  eighth of its probe time, then twice that, ...) within a probe share of the
  iteration and time budgets; a start whose error is :data:`MARGIN` times the
  best one's drops out.
* :func:`multistart` races, then continues the best start with what is left
  (where no race can be afforded: the rank-one start where it was let in,
  else :data:`PREFERRED`, alone).

Runs are ``{name: (objective, solver state)}`` (:func:`~sfapprox.sf._solver.new_state`);
a Ctrl-C propagates from :func:`race` and is turned into the stop reason
``"interrupted"`` by :func:`multistart`, with every state's best point kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from .. import _timing
from .._settings import SF_START_KINDS
from .._signals import stop_requested
from ._solver import LBFGSOptions, StopReason, best_multiple_start, evaluate_start, lbfgs

__all__ = ["START_KINDS", "FIRST", "MARGIN", "PREFERRED", "RANK_ONE", "RANK_ONE_MARGIN", "start_noise", "start_values",
           "rank_one_values", "rank_one_applies", "rank_one_error", "multiple_error", "rank_one_pays", "top_pair",
           "race", "race_affordable", "multistart", "best_run"]

#: The kinds of start, in the order of their random streams.
START_KINDS = SF_START_KINDS
#: Iterations of each start in the first round of a race (then doubled each round).
FIRST = 100
#: A start whose error is this many times the best start's drops out of the race.
MARGIN = 1.15
#: Share of a start's probe time its first round may take (then doubled each round, as the
#: iterations are): at N = 4,096 a first round of 100 iterations took ~50 s, the whole probe share
#: of a 10-minute fit, before the second start began (``benchmarks/results/scale_fit.md``).
FIRST_TIME = 1 / 8
#: A start is never judged on fewer iterations than this (round time or not): the identity start's
#: noise puts it above the reference start before its first steps.
MIN_ITER = 10
#: Evaluations the first iteration of a start takes (its line search grows the first step,
#: ``1 / |g|_1``, until it brackets the minimum): 6 at N = 8,192 (measured).
FIRST_SEARCH = 6
#: The start that runs alone when a race cannot be afforded (:func:`race_affordable`): the
#: winner of every race measured at N >= 4,096 (``benchmarks/results/scale_fit*.json``).
PREFERRED = "identity"
#: A start alone is scaled to its product's best multiple when the time left is under this many
#: evaluations (hardly a step would fit): at N = 16,384 in 60 s on two cores (RBF kernel,
#: bandwidth 2), rel 0.997 instead of the identity start's 1.25, and, with ~2.4 evaluations left
#: once the scoring took 9.5 s instead of 40, 0.997 against 1.037 after 3 unscaled iterations;
#: with 48 s (~3.4 evaluations) left the scaling's new gradient cost the steps more (0.877 after
#: 1 iteration against 0.830 after 3).
SCALED_START_EVALS = 3

#: The informed start's name: the product starts as ``X``'s best rank-one approximation.
RANK_ONE = "rank1"
#: The rank-one start's relative error, as a share of the other starts' best multiples', at most which it
#: is taken (:func:`rank_one_pays`).  Its start error does not say how far a fit gets from it
#: (``benchmarks/results/starts.md``, ``paper_table1_rank1.md``): on the RBF kernel of sorted points
#: (bandwidth 0.7) it is 0.664 against a constant's 0.701, and its fits ended at 0.0071 / 0.052 (N = 1,024
#: in 20 s / 4,096 in 60 s) where the usual starts' reached 0.064 / 0.139; on the Table 1 graphs (0.76-0.96
#: of a constant's) it ends worse on all eight (mexican_power 0.350 against 0.114, mesh1e1 2.54 against
#: 1.40), and led the race there when it was let in; on a clustered kernel (0.979 against a constant's
#: 0.986) its fits ended at 0.735 / 0.842 where the identity start's reached 0.527 / 0.694.  So: in memory
#: it races the other two only where it is far ahead of both (``"memory"``: a kernel of image patches,
#: 0.271 against 0.487, is; 0.052 / 0.085 where the identity alone reached 0.066 / 0.185), none of the
#: Table 1 matrices; from column blocks, where one start runs and few passes leave a fit near its start,
#: it replaces the identity start where it is clearly ahead of that one (``"columns"``).
RANK_ONE_MARGIN = {"memory": 0.6, "columns": 0.9}
#: Power iterations of the top singular pair in memory (each two products with ``X``: cheap there; from
#: column blocks the fit takes its left vector from the columns it reads first, and one pass).
TOP_PAIR_ITER = 4

Run = tuple[Callable, dict]


def start_noise(kind: str, init_noise: float | None = None) -> float:
    """Noise amplitude of a start: ``init_noise`` when given; 0.01 for reference, 0.1 for identity
    (the identity start needs larger noise to break the symmetry between offsets)."""
    if init_noise is not None:
        return init_noise
    return 0.1 if kind == "identity" else 0.01


def start_values(kinds, seed: int, shape: tuple[int, int, int], init_noise: float | None = None) -> dict[str, np.ndarray]:
    """Starting factor values of each kind in ``kinds``, shape ``(M, N, K)``.

    ``"reference"``: every value ``1/K`` times ``(1 + uniform noise)`` (each
    factor starts as a local average).  ``"identity"``: the offset-0 value 1,
    the others noise (each factor starts near the identity, the product near
    ``I``), which suits sparse graphs whose best surrogate is far from an
    average.  Both apply to the butterfly (``K = 2``).

    Examples
    --------
    >>> v = start_values(["identity"], 0, (2, 4, 3))["identity"]
    >>> v.shape, bool(abs(v[:, :, 0] - 1).max() <= 0.1)
    ((2, 4, 3), True)
    """
    out = {}
    for i, kind in enumerate(START_KINDS):
        if kind not in kinds:
            continue
        rng = np.random.default_rng([seed, i])  # one stream per kind of start (by index: _streams.FIT, SF_BATCHES)
        values = rng.uniform(-1.0, 1.0, size=shape)
        # in place, the same numbers: at N = 100,000 (17 factors) each array is 245 MB, and a start made in
        # three of them took 2-6 s of a fit's limit on a busy machine
        values *= start_noise(kind, init_noise)
        if kind == "identity":
            values[:, :, 0] += 1.0
        else:
            values += 1.0
            values /= shape[2]
        out[kind] = values
    return out


def _jumps(n: int) -> int:
    """The offsets ``1, 2, 4, ...`` the rank-one start uses, one per factor: ``ceil(log2 N)`` of them (none for
    ``N = 1``), whose sums of distinct ones are every ``s < 2^jumps``."""
    return math.ceil(math.log2(n)) if n > 1 else 0


def rank_one_applies(n: int, offsets, n_factors: int) -> bool:
    """Whether :func:`rank_one_values` can build its start for this structure: the offsets hold every
    ``2^m < N`` (base 2: the chord and symmetric supports) and there are as many factors."""
    jumps = _jumps(n)
    have = {int(d) for d in offsets}
    return n_factors >= max(jumps, 1) and all((1 << m) in have for m in range(jumps))


def rank_one_values(u: np.ndarray, v: np.ndarray, offsets, n_factors: int) -> np.ndarray:
    """Factor values ``(M, N, K)`` whose product is ``u v^T`` when ``N`` is a power of two.

    Factor ``m`` (``m = 0`` the leftmost) holds ``a`` at the offsets ``0`` and
    ``2^m``: the product of ``(I + S^(2^m))`` over ``m < log2 N`` is the matrix
    of ones, since every ``s < N`` is one sum of distinct powers of two.  The
    first factor's rows are then scaled by ``u``, the last factor's entries by
    ``v`` at their column, so the product is ``D_u J D_v = u v^T``; ``a`` and the
    scales give every factor the same Frobenius norm.  For other ``N`` the sums
    ``s`` in ``[N, 2^M)`` wrap onto ``s - N``: those entries are doubled (the fit
    goes on from there).  Factors beyond ``ceil(log2 N)`` are ``a I``.

    Parameters
    ----------
    u, v : numpy.ndarray, shape (N,)
        The rank-one approximation ``u v^T`` (e.g. from :func:`top_pair`).
    offsets : sequence of int
        The support's offsets (holding every ``2^m < N``: :func:`rank_one_applies`).
    n_factors : int
        ``M``, at least ``ceil(log2 N)``.

    Returns
    -------
    numpy.ndarray, shape (M, N, K)

    Examples
    --------
    >>> from sfapprox.operators.chord import ChordOperator
    >>> u, v = np.arange(1.0, 9.0), np.linspace(-1.0, 1.0, 8)
    >>> values = rank_one_values(u, v, [0, 1, 2, 4], 3)
    >>> bool(np.allclose(ChordOperator(values, np.array([0, 1, 2, 4])).to_dense(), np.outer(u, v)))
    True
    """
    u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    n = u.size
    if not rank_one_applies(n, offsets, n_factors):
        raise ValueError(f"no rank-one start for N = {n} with offsets {list(offsets)} and {n_factors} factors")
    index = {int(d): k for k, d in enumerate(offsets)}
    values = np.zeros((n_factors, n, len(index)))
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0.0 or nv == 0.0:
        return values
    # a^M t^2 = |u| |v| with t = sqrt(N): the first and last factors' norm 2 a^2 t^2, the others' 2 N a^2
    a = (nu * nv / n) ** (1.0 / n_factors)
    values[:, :, index[0]] = a
    for m in range(_jumps(n)):
        values[m, :, index[1 << m]] = a
    values[0] *= (math.sqrt(n) / nu * u)[:, None]  # row i of the product: u_i
    cols = (np.arange(n)[:, None] + np.asarray([int(d) for d in offsets])[None, :]) % n
    values[-1] *= (math.sqrt(n) / nv * v)[cols]  # the last factor's entry at column j: v_j
    return values


def top_pair(apply: Callable[[np.ndarray], np.ndarray], apply_t: Callable[[np.ndarray], np.ndarray], n: int, *,
             n_iter: int, seed: int, deadline=None) -> tuple[np.ndarray, np.ndarray, float]:
    """``(u, v, s)`` with ``u v^T`` the best rank-one approximation of ``X`` (``s`` its singular value), by
    the randomized SVD of :mod:`sfapprox.baselines.rsvd` (``n_iter`` power iterations, 7 extra vectors).

    ``apply(B) = X @ B`` and ``apply_t(B) = X.T @ B``; ``u`` and ``v`` carry ``sqrt(s)`` each.
    """
    from ..baselines.rsvd import randomized_svd  # here: the baselines import this package's neighbours

    U, s, Vt, _ = randomized_svd(apply, apply_t, n, 1, n_oversamples=min(7, max(0, n - 1)), n_iter=n_iter,
                                 seed=seed, deadline=deadline)
    root = math.sqrt(max(float(s[0]), 0.0))
    return U[:, 0] * root, Vt[0] * root, float(s[0])


def top_bound(dense: np.ndarray, rows: int = 1024) -> float:
    """An upper bound of ``X``'s largest singular value, ``sqrt(||X||_1 ||X||_inf)`` (the largest column
    and row sums of ``|X|``), by one pass over ``rows`` rows at a time (no ``N x N`` copy).

    What the rank-one start can be at best (:func:`rank_one_error` falls as its ``top`` grows): where even
    this bound does not pay, its top singular pair (2 ``TOP_PAIR_ITER`` + 1 products with ``X``, 7-8 s at
    N = 16,384 on two cores, of a comparison's 60 s) is not computed, and the fit is the same.

    Examples
    --------
    >>> X = np.array([[3.0, 0.0], [0.0, 1.0]])
    >>> top_bound(X), float(np.linalg.norm(X, 2))
    (3.0, 3.0)
    """
    n = dense.shape[0]
    columns = np.zeros(dense.shape[1])
    row_max = 0.0
    for i in range(0, n, rows):
        block = np.abs(dense[i:i + rows])
        columns += block.sum(axis=0)
        row_max = max(row_max, float(block.sum(axis=1).max(initial=0.0)))
    return math.sqrt(float(columns.max(initial=0.0)) * row_max)


def rank_one_error(top: float, norm2: float, n: int) -> float:
    """The relative error of the rank-one start at its best multiple, from ``top = s1`` and ``norm2 =
    ||X||^2``: ``sqrt(1 - s1^2 / ||X||^2)`` for ``N`` a power of two; for other ``N`` the doubled entries
    (a share ``q = (2^M - N) / N`` of them, :func:`rank_one_values`) add ``q (1 - q) / (1 + 3 q)`` of the
    rank-one part's square (its best multiple where its entries are alike).

    Examples
    --------
    >>> round(rank_one_error(8.0, 100.0, 64), 3), round(rank_one_error(8.0, 100.0, 100), 3)
    (0.6, 0.656)
    """
    if not norm2 > 0:
        return 0.0
    share = min(1.0, top * top / norm2)
    q = ((1 << _jumps(n)) - n) / n  # 0 for N a power of two (and N = 1)
    return math.sqrt(max(0.0, 1.0 - share + share * q * (1.0 - q) / (1.0 + 3.0 * q)))


def multiple_error(inner: float, square: float, norm2: float) -> float:
    """The relative error of ``c P`` at its best multiple ``c``, ``sqrt(1 - <X, P>^2 / (||P||^2 ||X||^2))``,
    from ``inner = <X, P>``, ``square = ||P||^2`` and ``norm2 = ||X||^2`` (1 where ``P`` or ``X`` is 0)."""
    if not (norm2 > 0 and square > 0):
        return 1.0
    return math.sqrt(max(0.0, 1.0 - inner * inner / (square * norm2)))


def rank_one_pays(mine: float, other: float, where: str) -> bool:
    """Whether the rank-one start (relative error ``mine``, :func:`rank_one_error`) is taken against starts
    whose products' best multiples have the error ``other`` (the least of them, :func:`multiple_error`):
    ``mine`` at most ``RANK_ONE_MARGIN[where]`` times ``other`` (``where``: "memory" or "columns").

    Examples
    --------
    >>> rank_one_pays(0.44, 0.87, "memory"), rank_one_pays(0.76, 0.99, "memory"), rank_one_pays(0.76, 0.99, "columns")
    (True, False, True)
    """
    return mine <= RANK_ONE_MARGIN[where] * other


def release_history(state: dict) -> None:
    """Drop a solver state's L-BFGS pairs (``2 m`` vectors): a start that lost needs only its best point."""
    for key in ("pairs", "S", "Y"):
        if key in state:
            state[key] = None


def best_run(runs: dict[str, Run]) -> str:
    """The name of the run whose state holds the lowest loss seen."""
    return min(runs, key=lambda k: runs[k][1]["best_loss"])


def race(
    runs: dict[str, Run],
    options: Callable[[int, float | None], LBFGSOptions],
    *,
    share_iter: int,
    share_time: float | None,
    callback: Callable[[str, dict], bool | None] | None = None,
) -> str:
    """Run the starts in rounds until one is clearly best or each used its share.

    Round r runs each live start up to ``FIRST * 2**r`` iterations (at most
    ``share_iter``) and ``FIRST_TIME * 2**r`` of its ``share_time`` (but
    :data:`MIN_ITER` iterations at least), within ``share_time`` seconds per
    start; after each round a start whose error is :data:`MARGIN` times the
    best one's drops out.  Where one start is clearly better (most matrices) the loser costs a
    few hundred iterations instead of a whole share; where they stay close,
    each gets its full share.  ``options(max_iter, time_limit)`` makes the
    solver options of one leg; ``callback(name, state)`` is called after each
    iteration (True stops everything).  Returns the last stop reason
    (``"callback"`` when asked to stop).
    """
    used = {name: 0.0 for name in runs}
    alive = list(runs)
    reason = StopReason.MAX_ITER
    checkpoint = min(FIRST, share_iter)
    round_time = None if share_time is None else FIRST_TIME * share_time
    while True:
        for name in alive:
            fun, st = runs[name]
            left = None if share_time is None else share_time - used[name]
            if st["n_iter"] >= checkpoint or (left is not None and left <= 0):
                continue
            report = None if callback is None else (lambda s, name=name: callback(name, s))
            t0 = _timing.now()
            reason = lbfgs(fun, st, options(checkpoint, None if left is None else min(left, round_time)), report)
            least = min(MIN_ITER, checkpoint)
            if reason != StopReason.CALLBACK and st["n_iter"] < least and reason == StopReason.TIME_LIMIT:
                # the round's time was up first: a few more iterations before the start is judged
                rest = None if left is None else left - (_timing.now() - t0)
                reason = lbfgs(fun, st, options(least, rest), report)
            used[name] += _timing.now() - t0
            if reason == StopReason.CALLBACK:
                return reason
        best = min(runs[k][1]["best_loss"] for k in alive)
        # Losses are half squared errors: an error ratio r is a loss ratio r^2.
        alive = [k for k in alive if runs[k][1]["best_loss"] <= best * MARGIN**2]
        out_of_time = share_time is not None and all(used[k] >= share_time for k in alive)
        if len(alive) == 1 or checkpoint >= share_iter or out_of_time:
            return reason
        checkpoint = min(2 * checkpoint, share_iter)
        round_time = None if round_time is None else 2 * round_time


def _stoppable(callback: Callable[[str, dict], bool | None] | None) -> Callable[[str, dict], bool]:
    """``callback`` preceded by a check that no stop signal went unseen (see :func:`.._signals.stop_requested`)."""

    def report(name: str, state: dict) -> bool:
        if stop_requested():
            raise KeyboardInterrupt
        return bool(callback(name, state)) if callback is not None else False

    return report


def race_affordable(runs: dict[str, Run], share_time: float | None) -> bool:
    """Whether each start can make :data:`MIN_ITER` iterations in its ``share_time`` seconds, at the
    cost of the evaluations already timed (``state["eval_seconds"]``; unknown: assumed so).

    A race judged on fewer iterations picks by the starts' first losses, where the reference start
    (a local average) is ahead of the identity start before either moved (at N = 8,192 in 60 s on
    two cores: the reference start won with 0 iterations and ended at rel 0.991; the identity start
    alone reached 0.882 in 34 s).
    """
    costs = [st["eval_seconds"] for _, st in runs.values() if st.get("eval_seconds")]
    if share_time is None or not costs:
        return True
    return max(costs) * (MIN_ITER + FIRST_SEARCH) <= share_time


def _polyak_first(options: Callable[[int, float | None], LBFGSOptions]) -> Callable[[int, float | None], LBFGSOptions]:
    """``options`` with the Polyak first step (:attr:`~._solver.LBFGSOptions.first_step`)."""
    return lambda max_iter, time_limit: dataclasses.replace(options(max_iter, time_limit), first_step="polyak")


def multistart(
    runs: dict[str, Run],
    options: Callable[[int, float | None], LBFGSOptions],
    *,
    max_iter: int,
    time_limit: float | None,
    probe: float,
    callback: Callable[[str, dict], bool | None] | None = None,
    n_factors: int | None = None,
    target_norm2: float | None = None,
) -> tuple[str, str]:
    """Race the starts (each within ``probe`` of the budgets), then continue the best one.

    Where the timed evaluations say a race cannot be judged within its share
    (:func:`race_affordable`), the :data:`PREFERRED` start runs alone, its
    first step the Polyak step (evaluations are what such a fit lacks) and,
    given ``n_factors`` and ``target_norm2`` (``||X||^2`` in the objective's
    units) and a ``time_limit`` that no step fits (:data:`SCALED_START_EVALS`),
    its evaluated start scaled to its product's best multiple
    (:func:`~._solver.best_multiple_start`, no evaluation).

    Iterations spent on a losing start count against ``max_iter``; the time
    of the whole fit stays within ``time_limit``.  A Ctrl-C or a callback
    asking to stop ends the whole fit; either way every state keeps the best
    point it saw.  Returns ``(name of the best run, stop reason)``.
    """
    begin = _timing.now()
    reason = StopReason.MAX_ITER
    callback = _stoppable(callback)
    try:
        share_time = None if time_limit is None else probe * time_limit
        if len(runs) > 1 and PREFERRED in runs and not race_affordable(runs, share_time):
            # Too slow to judge the starts: the preferred one alone, its first step the Polyak step,
            # which took 1 evaluation where the gradient rule's took 6 (N = 8,192: 0.641 against
            # 0.682 after 40 s, 0.772 against 0.882 at bandwidth 2; benchmarks/results/scale_fit_solo_8192.md).
            # The rank-one start, where it races, was let in far ahead of the others: it is that one.
            solo = RANK_ONE if RANK_ONE in runs else PREFERRED
            runs = {solo: runs[solo]}
            options = _polyak_first(options)
            state = runs[solo][1]
            if (n_factors is not None and target_norm2 is not None and time_limit is not None
                    and time_limit < SCALED_START_EVALS * (state.get("eval_seconds") or 0.0)):
                # No step fits the time left: the start's best multiple is all the fit can still do
                # (it costs no evaluation, but its gradient one, which the steps would need).
                best_multiple_start(state, n_factors, target_norm2)
        if len(runs) > 1 and max_iter >= len(runs):
            # each start's share within max_iter in all (max_iter=1 made two iterations, one per start)
            share = max(1, min(int(probe * max_iter), max_iter // len(runs)))
            reason = race(runs, options, share_iter=share, share_time=share_time, callback=callback)
        elif len(runs) > 1:  # fewer iterations than starts: the better start as it is, evaluated, takes them
            for fun, st in runs.values():
                evaluate_start(fun, st)
        if reason != StopReason.CALLBACK:
            name = best_run(runs)
            for other, (_, st) in runs.items():
                if other != name:  # a losing start keeps only its best point: free its L-BFGS history
                    release_history(st)
            spent = sum(st["n_iter"] for k, (_, st) in runs.items() if k != name)
            left = None if time_limit is None else max(0.0, time_limit - (_timing.now() - begin))
            fun, st = runs[name]
            report = None if callback is None else (lambda s: callback(name, s))
            reason = lbfgs(fun, st, options(max(0, max_iter - spent), left), report)
    except KeyboardInterrupt:
        reason = StopReason.INTERRUPTED
    return best_run(runs), reason
