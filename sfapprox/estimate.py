"""Errors you can trust at any size: exact by a streamed pass, or estimated from random columns with a 95 % interval.

The error of a surrogate ``A`` of ``X`` is ``||X - A||_F = sqrt(sum_j ||x_j - a_j||^2)``,
a sum over columns.  :func:`estimate_errors` computes it for several
surrogates at once, on the same columns of ``X`` (each block of ``X`` is
computed once): over every column when that pass fits the time limit (the
error is then exact), else over a simple random sample of columns, drawn
without replacement in random blocks until each interval is narrow enough
(``rtol``, and only once the sample is large enough for the normal
approximation: Cochran's ``25 g^2`` columns for a sample skewness ``g``) or
the time is up.

**The estimator.**  With ``m`` of the ``N`` columns sampled, ``e_j`` the
squared column errors and ``x_j = ||x_j||^2``: the total ``T = N mean(e)`` is
unbiased for ``||X - A||_F^2``, with standard error
``N s_e / sqrt(m) sqrt(1 - m / N)`` (finite-population correction); the
relative error is the ratio ``sum e / sum x`` (the same columns), whose
standard error is the linearised one, ``sqrt(1 - m/N) s_d / (sqrt(m) mean(x))``
with ``d_j = e_j - R x_j``.  The 95 % intervals are those of the studentized
mean corrected for the sample's skewness (Hall's transformation, at Student's
quantile for ``m - 1`` degrees of freedom) on the squared errors, square-rooted (and floored at 0).  ``benchmarks/scale_sources.py
--coverage`` measures how often they hold the exact error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import stdtrit

from . import _streams, _timing
from ._errors import ParameterError
from ._executors import Executor, check_executor, ordered_map
from ._params import MEMORY_LIMIT, SEED, Interval, check_values
from ._settings import DEFAULT_SEED
from ._threads import AdaptiveThreads
from ._validation import check_squared_norm
from .formats import shape_text
from .metrics import sparse_target_error, surrogate_columns
from .sources import DistributedSource, MatrixLike, MatrixSource, as_source, block_columns

__all__ = ["ErrorEstimate", "estimate_errors", "block_errors", "scoring_order", "Z95", "DEFAULT_RTOL", "MIN_SAMPLE"]

#: The least positive float64: :func:`block_errors`' squared norm of a non-zero column whose squares underflowed.
_LEAST_POSITIVE = float(np.finfo(np.float64).smallest_subnormal)

#: The normal quantile of a two-sided 95 % interval (the large-sample limit of :func:`_t95`).
Z95 = 1.959963984540054
#: Sampling stops once every interval's half-width is at most this share of its estimate.
DEFAULT_RTOL = 0.02
#: Columns sampled at the least before an interval is trusted (the normal approximation).
MIN_SAMPLE = 256
#: Columns of a timed pass's first block at most: the block that times the pass.  A first block sized by
#: the memory limit alone (2,527 columns of a graph of N = 100,000 scored for SF's 14 factors) took 99 s of
#: a 30 s scoring limit before the pass first looked at the clock.
FIRST_BLOCK = 64
#: The largest skew term ``a = g / (6 sqrt(m))`` of Hall's transformation (:func:`_studentized_quantiles`):
#: its flat point ``t = -1 / (2 a)`` stays beyond the 2.5 % point (2.7 at this a).
HALL_MAX_A = 0.1
#: :func:`estimate_errors`'s scalar arguments, checked before any work, in the estimators' message shape
#: (a seed of -1 was numpy's raw ValueError; a time limit of -1, a memory of 0 and a NaN norm went through).
_ARGUMENTS = {
    "time_limit": Interval(float, 0, None, allow_none=True, low_open=True),
    "rtol": Interval(float, 0, None, low_open=True),
    "seed": SEED,
    "max_memory": MEMORY_LIMIT,
    "fro_norm": Interval(float, 0, None, allow_none=True),
}


@dataclass
class ErrorEstimate:
    """One surrogate's Frobenius error, exact or estimated.

    Attributes
    ----------
    fro_error, rel_error : float, float or None
        ``||X - A||_F`` and ``||X - A||_F / ||X||_F`` (point estimates when estimated).
    exact : bool
        Every column was looked at.
    fro_interval, rel_interval : (float, float) or None
        95 % confidence intervals (None when exact).
    columns : int
        Columns of ``X`` the error was computed on.
    columns_advised : int
        Columns the intervals' normal approximation asks for: Cochran's
        ``25 g^2`` for the sample skewness ``g`` of the squared column errors
        (0 when exact).  An interval from fewer columns (a sampling pass the
        time limit stopped early) may be too narrow: a few columns hold much
        of the error, and a small sample often misses them.
    by_nonzeros : bool
        Computed exactly from the non-zeros of a matrix held sparse
        (:func:`~sfapprox.metrics.sparse_target_error`), not by a pass.
    fro_norm : float or None
        ``||X||_F`` where known exactly: summed by an exact pass (or given); None for a sample.  Not part of
        :meth:`to_dict` (it is the matrix's, not the row's: a comparison's ``matrix`` record holds it).
    """

    fro_error: float
    rel_error: float | None
    exact: bool
    fro_interval: tuple[float, float] | None = None
    rel_interval: tuple[float, float] | None = None
    columns: int = 0
    columns_advised: int = 0
    by_nonzeros: bool = False
    fro_norm: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: ``{"exact", "fro_interval", "rel_interval", "columns", "columns_advised"}``, and
        ``"by_nonzeros": true`` for an error computed from a sparse matrix's non-zeros."""
        return {"exact": self.exact, "fro_interval": self.fro_interval, "rel_interval": self.rel_interval,
                "columns": self.columns, "columns_advised": self.columns_advised,
                **({"by_nonzeros": True} if self.by_nonzeros else {})}

    @property
    def too_few_columns(self) -> bool:
        """Sampled from fewer columns than :attr:`columns_advised`."""
        return not self.exact and self.columns < self.columns_advised

    def half_width(self, relative: bool = False) -> float | None:
        """Half the interval's width (None when exact).

        Parameters
        ----------
        relative : bool, default=False
            The relative error's interval instead of the Frobenius error's.
        """
        interval = self.rel_interval if relative else self.fro_interval
        return None if interval is None else (interval[1] - interval[0]) / 2


def estimate_errors(
    source: MatrixLike,
    operators: Mapping[str, Any],
    *,
    time_limit: float | None = None,
    rtol: float = DEFAULT_RTOL,
    seed: int = DEFAULT_SEED,
    max_memory: int | str | None = None,
    fro_norm: float | None = None,
    executor: Executor | None = None,
) -> dict[str, ErrorEstimate]:
    """The error of each surrogate in ``operators`` (name -> LinearOperator) against ``source``.

    Parameters
    ----------
    source : MatrixSource, numpy.ndarray, scipy sparse matrix or LinearOperator
        The matrix ``X``, known by its columns (anything else as :func:`~sfapprox.sources.as_source` takes it).
    operators : mapping of str to LinearOperator
        The fitted surrogates (``op @ B`` must work for a dense block ``B``), each ``N x N``.
    time_limit : float or None
        Seconds the pass may take; None: no limit (the errors are then exact).
        A full pass that the first block says would not fit is replaced by
        sampling, which stops at the limit or at ``rtol``.
    rtol : float, default=DEFAULT_RTOL
        Sampling stops when every interval's half-width is at most ``rtol``
        times its estimate (after :data:`MIN_SAMPLE` columns, and at least
        ``25 g^2`` of them for a skewness ``g`` of the squared column errors).
    seed : int, default=0
        Seed of the column sample (its own stream: :func:`scoring_order`).
    max_memory : int, str or None
        Bytes a block (of ``X`` and of one surrogate) may take, or a size such as ``"4G"``.
    fro_norm : float or None
        ``||X||_F`` when known exactly (the relative errors then only carry
        the error's uncertainty).
    executor : Executor, optional
        Where the blocks of an exact pass are computed: anything with
        ``submit(fn, *args)`` returning futures with ``result()`` — a
        ``concurrent.futures`` pool, or a ``dask.distributed.Client`` (the
        blocks then run on the cluster's workers; the source and the
        surrogates travel to them pickled).  The first block is computed here
        (it decides between an exact pass and sampling); the others are
        submitted at once and added up in the same order, so the numbers are
        the local run's.  Sampling stays here (each block decides whether to go on).
        A :class:`~sfapprox.sources.DistributedSource` brings its own executor.

    Returns
    -------
    dict of str to ErrorEstimate

    Raises
    ------
    ParameterError
        Before any work, for a ``time_limit`` or ``rtol`` that is not
        positive, a ``seed`` that is not a non-negative int, a ``max_memory``
        below 1, a ``fro_norm`` that is negative or not finite, ``operators``
        that are not a mapping, or a surrogate of another shape than ``source``.

    Examples
    --------
    >>> from sfapprox.sources import ArraySource
    >>> X = np.random.default_rng(0).random((50, 50))
    >>> est = estimate_errors(ArraySource(X), {"zero": np.zeros((50, 50))})
    >>> est["zero"].exact, round(est["zero"].fro_error / float(np.linalg.norm(X)), 12)
    (True, 1.0)
    """
    max_memory = check_values({"time_limit": time_limit, "rtol": rtol, "seed": seed, "max_memory": max_memory,
                               "fro_norm": fro_norm}, _ARGUMENTS, "estimate_errors")["max_memory"]  # in bytes
    check_executor(executor)
    if isinstance(source, DistributedSource):  # its executor computes the blocks; they read the plain source
        source, executor = source.source, executor if executor is not None else source.executor
    source = as_source(source)  # an array, a sparse matrix or a LinearOperator as compare takes them
    n = source.n
    if not isinstance(operators, Mapping):  # a list was .items()'s raw AttributeError
        raise ParameterError(f"operators must be a mapping of name -> surrogate operator (e.g. {{'sf': op}}), "
                             f"got a {type(operators).__name__}; name each surrogate")
    for name, op in operators.items():
        shape = tuple(getattr(op, "shape", ()))
        if shape != (n, n):
            raise ParameterError(f"surrogate {name!r} is {shape_text(shape) if shape else 'not a matrix'}, "
                                 f"the matrix {n:,} x {n:,}; give surrogates of the matrix's shape")
    exact = _from_nonzeros(source, operators, fro_norm)
    if len(exact) == len(operators):
        return exact
    passed = _pass_errors(source, {k: op for k, op in operators.items() if k not in exact}, time_limit, rtol,
                          seed, max_memory, fro_norm, executor)
    return {name: exact[name] if name in exact else passed[name] for name in operators}


def _from_nonzeros(source: MatrixSource, operators: Mapping[str, Any], fro_norm: float | None) -> dict[str, ErrorEstimate]:
    """The exact errors of the low-rank-plus-sparse surrogates of a matrix held sparse, from its non-zeros
    (:func:`~sfapprox.metrics.sparse_target_error`): no column of theirs is sampled."""
    held = source.sparse_matrix
    if held is None:
        return {}
    out = {}
    for name, op in operators.items():
        found = sparse_target_error(held, op, fro_norm)
        if found is not None:
            out[name] = ErrorEstimate(found[0], found[1], True, columns=source.n, by_nonzeros=True)
    return out


def _pass_errors(source: MatrixSource, operators: Mapping[str, Any], time_limit, rtol, seed, max_memory, fro_norm,
                 executor) -> dict[str, ErrorEstimate]:
    """:func:`estimate_errors` by a pass over ``source``'s columns (exact or sampled)."""
    n = source.n
    start = _timing.now()
    width = source.block_width(max_memory, extra_columns=3)  # the identity's and the surrogate's columns, R
    order = scoring_order(n, seed)
    tallies: dict[str, list[np.ndarray]] = {name: [] for name in operators}  # squared column errors so far
    norms: list[np.ndarray] = []
    with AdaptiveThreads(float(n) * width, torch=False):  # BLAS threads from the free cores (torch where loaded)
        _scoring_pass(source, operators, order, width, tallies, norms, start, time_limit, rtol, fro_norm,
                      executor)
    x = np.concatenate(norms)
    # a matrix never formed was not refused as one in memory is: its ||X||^2 is known only now. Out of
    # float64's range every error here is 0, inf or round-off (1e-300 entries: "0.0", the zero matrix)
    check_squared_norm(float(x.sum()) * n / x.size, source.name, nonzero=bool(x.any()))
    return {name: _estimate(np.concatenate(e), x, n, fro_norm) for name, e in tallies.items()}


def scoring_order(n: int, seed: int = DEFAULT_SEED) -> np.ndarray:
    """The order in which a pass over ``n`` columns takes them (the sample of a pass cut short is its
    first columns): a permutation from the seed's own stream for the scoring, :data:`~sfapprox._streams.SCORING`.

    Not ``default_rng(seed)``, a fit's: a fit cut part-way through a pass in that order (the randomized
    SVD's one pass) left the scoring sampling only the columns it had read, where its error is lowest
    (N = 600: rel 0.9130 +- 0.0024 where the exact error is 0.9616).

    Parameters
    ----------
    n : int
        Columns.
    seed : int, default=0
        The run's seed.

    Returns
    -------
    numpy.ndarray of int
        A permutation of ``range(n)``.

    Examples
    --------
    >>> sorted(scoring_order(5).tolist())
    [0, 1, 2, 3, 4]
    >>> bool((scoring_order(100) == np.random.default_rng(0).permutation(100)).all())  # not a fit's order
    False
    """
    return np.random.default_rng([seed, _streams.SCORING]).permutation(n)


def block_errors(source, operators: Mapping[str, Any], J: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``||x_j||^2`` and, per surrogate, ``||x_j - a_j||^2`` for the columns ``J`` (one block of a pass;
    a pure function of its arguments, so it can run on another process or machine).

    Parameters
    ----------
    source : MatrixSource
        The matrix ``X``.
    operators : mapping of str to LinearOperator
        The surrogates.
    J : numpy.ndarray of int
        The block's columns.

    Returns
    -------
    norms : numpy.ndarray
        ``||x_j||^2``; the least positive float where a column's squares all underflowed to 0 (entries
        under 1.5e-162, not all 0), so that the pass can tell that column from a column of zeros.
    errors : dict of str to numpy.ndarray
    """
    block = source.columns(J)
    errors = {}
    for name, op in operators.items():
        R = block - surrogate_columns(op, J, source.n)
        errors[name] = np.einsum("ij,ij->j", R, R)
    with np.errstate(under="ignore"):
        norms = np.einsum("ij,ij->j", block, block)
    lost = np.flatnonzero(norms == 0)
    if lost.size:
        norms[lost[block[:, lost].any(axis=0)]] = _LEAST_POSITIVE
    return norms, errors


def _scoring_pass(source, operators, order, width, tallies, norms, start, time_limit, rtol, fro_norm,
                  executor: Executor | None = None) -> int:
    """Columns of ``source`` in ``order``, block by block, into the tallies: all of them when the
    first block (at most :data:`FIRST_BLOCK` columns under a time limit) says the pass fits
    ``time_limit``, else blocks cut to the columns the time left allows, until the time or ``rtol`` says
    stop."""
    n = source.n
    seen = 0
    exact_pass = None  # decided after the first block: can every column be looked at in time?
    step = width if time_limit is None else max(1, min(width, FIRST_BLOCK))
    while seen < n:
        J = order[seen:seen + step]
        _tally(block_errors(source, operators, J), tallies, norms)
        seen += J.size
        elapsed = _timing.now() - start
        if exact_pass is None:
            exact_pass = time_limit is None or elapsed * n / seen <= time_limit
            if exact_pass and executor is not None:
                rest = block_columns(n - seen, width, order=order[seen:])
                return seen + _distributed_rest(executor, source, operators, rest, tallies, norms)
        if exact_pass:
            step = width
            continue
        if seen >= MIN_SAMPLE and _narrow_enough(tallies, norms, n, rtol, fro_norm):
            break
        step = min(width, int((time_limit - elapsed) * seen / elapsed)) if elapsed > 0 else width
        if step < 1:  # not one more column fits the time left
            break
    return seen


def _tally(result: tuple[np.ndarray, dict[str, np.ndarray]], tallies, norms) -> None:
    """Add one block's :func:`block_errors` to the pass's tallies."""
    x, errors = result
    norms.append(x)
    for name, e in errors.items():
        tallies[name].append(e)


def _distributed_rest(executor, source, operators, blocks, tallies, norms) -> int:
    """The rest of an exact pass on ``executor``: the blocks computed there, their results added in order
    (the source and the surrogates sent once to a Dask cluster's workers)."""
    seen = 0
    for result in ordered_map(executor, block_errors, blocks, (source, dict(operators))):
        _tally(result, tallies, norms)
        seen += result[0].size
    return seen


def _narrow_enough(tallies, norms, n: int, rtol: float, fro_norm: float | None) -> bool:
    """Every interval's half-width is at most ``rtol`` of its estimate, from a sample large enough for
    the normal approximation (:attr:`ErrorEstimate.columns_advised`: Cochran's ``25 g^2`` columns for a
    sample skewness ``g``; Cochran, *Sampling Techniques*, 3rd ed., 1977, sec. 2.15) — a few columns
    holding most of the error make a small sample's spread, and so its interval, far too small."""
    x = np.concatenate(norms)
    for errors in tallies.values():
        est = _estimate(np.concatenate(errors), x, n, fro_norm)
        relative = est.rel_interval is not None
        width = est.half_width(relative=relative)
        value = est.rel_error if relative else est.fro_error
        if est.too_few_columns or (width is not None and width > rtol * max(value, 1e-300)):
            return False
    return True


def _skewness(values: np.ndarray) -> float:
    """The sample skewness ``g`` (0 for fewer than three values or no spread)."""
    spread = float(values.std()) if values.size > 2 else 0.0
    return float(np.mean((values - values.mean()) ** 3)) / spread ** 3 if spread > 0 else 0.0


def _t95(m: int) -> float:
    """Student's t quantile of a two-sided 95 % interval from ``m`` values (``m - 1`` degrees of freedom).

    The studentized mean's spread divides by the sample's own ``s``, which is itself uncertain: its
    quantiles lie beyond the normal's by ``z (z^2 + 1) / (4 m)`` to first order (exactly Student's for
    normal values), whatever the values' skew — 1.9647 at 512 columns, 2.26 at 10.
    """
    return float(stdtrit(max(m - 1, 1), 0.975))


def _studentized_quantiles(g: float, m: int) -> tuple[float, float]:
    """The 2.5 % and 97.5 % points of ``(mean - mu) / se`` for the mean of ``m`` values of sample skewness ``g``.

    A mean of right-skewed values (squared column errors: a few columns carry much of the error) has a
    studentized statistic skewed to the left — a sample that misses the heavy columns has both a low
    mean and a low spread — so the normal interval ``mean +- 1.96 se`` falls short above.  Hall's
    transformation (*On the removal of skewness by transformation*, JRSS B 54, 1992) removes that
    skew: ``h(T) = T + a (1 + 2 T^2) + (4/3) a^2 T^3`` with ``a = g / (6 sqrt(m))`` is close to standard
    normal, and monotone (``h' = (1 + 2 a T)^2``), so the points are its inverse at ``-+t``, in closed
    form: ``h(t) = ((1 + 2 a t)^3 - 1) / (6 a) + a``.  To first order these are the Edgeworth
    (Cornish-Fisher) points ``z - a (2 z^2 + 1)`` used before; the cubic term corrects strongly skewed
    errors further (Nyström's squared column errors, skewness 5: coverage 0.933 -> 0.956 at 256
    columns, ``benchmarks/results/interval_stopping.md``).  The interval for the mean is then
    ``[mean - q_hi se, mean - q_lo se]``.  ``t`` is Student's quantile at ``m - 1`` degrees of freedom
    (:func:`_t95`), not the normal's 1.96: the part of the statistic's ``1 / m`` term that the spread's own
    noise makes is there for symmetric values too (Nyström at N = 8,192, ~530 columns: coverage
    0.9472 -> 0.9479 over 40,000 replays; a 10-column sample 0.91 -> 0.95, ``tests/test_estimate.py``).
    """
    # The expansion holds for small a (Cochran's 25 g^2 columns keep it at most 1/30); a sample too
    # small for it (flagged: ErrorEstimate.too_few_columns) is held where h stays monotone over +-z.
    a = max(-HALL_MAX_A, min(HALL_MAX_A, g / (6 * math.sqrt(max(m, 1)))))
    z = _t95(m)
    if a == 0:
        return -z, z

    def point(z: float) -> float:
        return float((np.cbrt(1 + 6 * a * (z - a)) - 1) / (2 * a))

    return point(-z), point(z)


def _estimate(e: np.ndarray, x: np.ndarray, n: int, fro_norm: float | None) -> ErrorEstimate:
    """Point estimates and 95 % intervals from the squared column errors ``e`` and norms ``x``."""
    m = e.size
    if m >= n:  # every column: exact
        fro = math.sqrt(float(e.sum()))
        norm = math.sqrt(float(x.sum())) if fro_norm is None else fro_norm
        return ErrorEstimate(fro, fro / norm if norm > 0 else None, True, columns=m, fro_norm=norm)
    shrink = math.sqrt(max(0.0, 1.0 - m / n)) / math.sqrt(m)
    total = n * float(e.mean())
    # Every sampled column alike (all exact, typically: a sparse surrogate that missed few entries) says
    # nothing of the columns not seen: no interval (its upper end unknown) and every column advised. A
    # spread of 0 made it "0 ± 0", and the verdict called a surrogate of relative error 0.014 exact.
    alike = m > 1 and float(np.ptp(e)) == 0.0
    se_total = n * float(e.std(ddof=1)) * shrink if m > 1 and not alike else math.inf
    fro = math.sqrt(total)
    g = _skewness(e)  # once: it moves the interval and says how many columns it wants
    low, high = _studentized_quantiles(g, m)
    fro_interval = (math.sqrt(max(0.0, total - high * se_total)), math.sqrt(max(0.0, total - low * se_total)))
    advised = n if alike else _cochran(g, n)
    if fro_norm is not None:  # only the error is uncertain
        if fro_norm <= 0:
            return ErrorEstimate(fro, None, False, fro_interval, None, m, advised)
        return ErrorEstimate(fro, fro / fro_norm, False, fro_interval,
                             (fro_interval[0] / fro_norm, fro_interval[1] / fro_norm), m, advised)
    if float(x.sum()) <= 0:
        return ErrorEstimate(fro, None, False, fro_interval, None, m, advised)
    ratio = float(e.sum() / x.sum())
    d = e - ratio * x
    se_ratio = float(d.std(ddof=1)) * shrink / float(x.mean()) if m > 1 and not alike else math.inf
    g = _skewness(d)
    low, high = _studentized_quantiles(g, m)
    rel_interval = (math.sqrt(max(0.0, ratio - high * se_ratio)), math.sqrt(max(0.0, ratio - low * se_ratio)))
    return ErrorEstimate(fro, math.sqrt(ratio), False, fro_interval, rel_interval, m, max(advised, _cochran(g, n)))


def _cochran(g: float, n: int) -> int:
    """Cochran's least sample for a normal interval of a mean of values of skewness ``g``: ``25 g^2``, at most
    the ``n`` columns there are (so errors skewed that far are sampled until the time is up, or looked at in
    full)."""
    return min(n, math.ceil(25 * g ** 2))
