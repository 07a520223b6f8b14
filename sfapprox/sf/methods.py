"""The SF methods of a comparison: ``sf``, ``sf-symmetric`` and ``sf-butterfly``.

Each fits :class:`~sfapprox.sf.model.ChordSF` on its support in the largest
structure of that support that fits the budget
(:func:`~sfapprox.budget.sf_config_for_budget`) — and, under a time limit,
that the time allows: more factors make each evaluation slower, and a
structure that gets a few dozen L-BFGS iterations ends far worse than a
smaller one that converges (at twice SF's budget with 2-5 s per fit, the
largest structure was worse on 24 of 31 matrices).  So with a time limit the
factors are capped at what leaves :data:`MIN_EVALS` evaluations, measured on
this machine, never below the fewest that cover every entry.  ``sf`` under the paper
protocol keeps the reference structure (its count is the paper's budget); a
structure fixed by hand (``n_factors`` or ``base`` in the run's
``structure``) is kept as given, and refused when it stores more than the
budget — a "not applicable" row, never a run over budget.

Under a time limit the limit holds for the method's whole turn in a comparison: what the factory does
before the fit (the checks before it, the structure's timing) is charged to the fit's limit from the
turn's start (:attr:`~sfapprox._base.RunContext.started`), once-per-process work excepted (torch's
import, the kernels' loading or compiling: :func:`~sfapprox._timing.one_time`; a compiling is said in
``compile_seconds``).  At N = 100,000 (a sparse graph fitted from columns) the row then
took 6 s of a 20 s limit and 60.4 s of a 60 s one (before: 43-74 s and 61-66 s,
``benchmarks/results/sf_setup.md``): what passes the limit is the last step's variance and the result's
assembly after the fit, under a second or 2 % there.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .. import _timing
from .._base import MethodSpec, RunContext, register
from .._settings import SF_FLOAT32_MIN_N
from .._errors import BudgetError, ResourceError, parameter
from .._progress import phase
from ..budget import SFConfig, sf_config_for_budget, sf_min_budget, sf_structure
from ..chord import min_full_factors, support_offsets
from ..formats import counted, limit_text

if TYPE_CHECKING:  # the estimator loads torch: imported with the first SF fit, not with the registry
    from .model import ChordSF

__all__ = ["SF_METHODS", "sf_estimator", "sf_check_first", "MIN_EVALS", "affordable_structure",
           "least_evaluation_seconds"]

#: Under a time limit, SF takes no more factors than leave it this many loss+gradient
#: evaluations (about as many L-BFGS iterations): the reference structures of the paper's
#: matrices reach their figure within a few hundred to a few thousand iterations.
MIN_EVALS = 1000

#: The plain-SF methods, one per support: name -> (support, summary, stored numbers).
SF_METHODS: dict[str, tuple[str, str, str]] = {
    "sf": ("chord", "Chord sparse factorization (L-BFGS; this project's core)", "N·K·M"),
    "sf-symmetric": ("symmetric", "SF on the symmetric Chord support (offsets 0, ±b^k)", "N·K′·M"),
    "sf-butterfly": ("butterfly", "SF on the butterfly support (FAµST's; N a power of two)", "2·N·log₂N"),
}


def sf_estimator(n: int, budget: int, context: RunContext, *, support: str = "chord") -> ChordSF:
    """The ChordSF that the SF method of ``support`` fits for an ``n x n`` matrix at ``budget``.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    budget : int
        Stored numbers allowed.
    context : RunContext
        The settings, protocol, callback and any structure fixed by hand
        (``context.structure``: ``n_factors``, ``base`` and other ChordSF
        parameters).
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol.

    Returns
    -------
    ChordSF
        Not fitted yet.

    Raises
    ------
    BudgetError
        When no structure of the support fits, or a structure fixed in
        ``context.structure`` stores more than the budget.
    NotApplicableError
        For the butterfly support when ``N`` is not a power of two.
    """
    params, full = _planned(n, budget, context, support)
    config, seconds, compiling = full, None, 0.0
    settings = context.settings.per_method(1)
    began = _timing.work_now() if context.started is None else context.started
    if full is not None and settings.time_limit is not None:
        compiling = _compiled_first(n, context.callback) or 0.0
        # (4 s at N = 12,000 on a busy machine, under a bar that said nothing)
        with phase(context.callback, "timing the factors' evaluations"):
            config, seconds = _affordable(n, full, settings.time_limit, settings.device, settings.max_iter)
        params.update(n_factors=config.n_factors, base=config.base)
    ChordSF = _chord_sf(context.callback)
    if settings.time_limit is not None:
        # The limit holds for the method's whole turn: the checks before this factory and the structure's
        # timing are charged to it (the timing alone was: at N = 100,000 the row took 74-99 s of a 20 s limit).
        # Once-per-process work is not (_timing.one_time): torch's import and the kernels' loading or compiling
        # (said apart, compile_seconds), as the fit's own warm-up: charged, a first SF row under --time-limit 2
        # spent it loading torch and made no iteration.
        params["time_limit"] = max(0.0, settings.time_limit - (_timing.work_now() - began))
    est = ChordSF(**context.settings.apply_to(ChordSF, callback=context.callback, **params))
    est._compiled_before = compiling  # (its fit says it where it is long enough to matter)
    if full is not None and context.protocol != "paper" and config.n_factors < full.n_factors:
        # Said in the row (details "M=10/12") and its reason, never silent: the result then
        # depends on this machine's speed, which --time-limit 0 avoids.
        est._structure_choice = {
            "n_factors_budget": full.n_factors,
            "count_budget": full.count,
            "structure_reason": structure_reason(n, full, config, settings.time_limit, settings.max_iter,
                                                 evaluation_seconds=seconds),
        }
    return est


def _planned(n: int, budget: int, context: RunContext, support: str) -> tuple[dict, SFConfig | None]:
    """ChordSF's parameters for the SF method of ``support`` at ``budget`` (the structure the budget
    allows), before any time limit cuts its factors, and that structure: None where it is fixed (by
    hand, or the paper's reference), which is refused when it stores more than the budget."""
    params = dict(context.structure)
    params["support"] = support
    if "n_factors" in params or "base" in params or (context.protocol == "paper" and support == "chord"):
        config = sf_structure(n, support=support, base=params.get("base", 2), n_factors=params.get("n_factors"))
        if config.count > budget:
            raise BudgetError(f"SF with {counted(config.n_factors, 'factor')} of "
                              f"{counted(config.n_offsets, 'value')} per row stores {counted(config.count, 'number')}, "
                              f"over the budget {budget:,}")
        return params, None
    full = sf_config_for_budget(n, budget, support=support)
    params.update(n_factors=full.n_factors, base=full.base)
    return params, full


def sf_check_first(X, budget: int, context: RunContext, *, support: str = "chord") -> None:
    """Refuse, before :func:`sf_estimator` does any work, the fit of ``X`` that the memory limit refuses
    whatever structure that factory chooses.

    Under a time limit the factory times its structure (its kernels compiled first, seconds on a
    fresh install) and may keep fewer factors (:func:`affordable_structure`): the memory is then
    checked for the fewest it may keep, the need growing with the factors.  A fit from column blocks
    refused under a tiny ``--max-memory`` showed that work's 5 s in its "not applicable" row.

    Parameters
    ----------
    X : numpy.ndarray, scipy sparse matrix or MatrixSource
        The validated matrix the fit will be given.
    budget : int
        Stored numbers allowed.
    context : RunContext
        As :func:`sf_estimator` takes it.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol.

    Raises
    ------
    ResourceError
        Where the fit's memory is over the limit (:meth:`~sfapprox.sf.model.ChordSF.check_memory_first`).
    BudgetError
        As :func:`sf_estimator`, where no structure fits the budget.
    """
    try:
        _check_structure(X, budget, context, support)
    except ResourceError as refused:
        least = sf_min_budget(X.shape[0], support=support) if support != "butterfly" else None
        if least is None or least >= budget:
            raise
        try:  # the least budget's structure (another base, fewer offsets) may fit where this one does not
            _check_structure(X, least, context, support)
        except ResourceError:
            raise refused from None
        raise ResourceError(f"{refused}; or lower the budget to SF's least, {parameter('budget', least)}, which "
                            "fits the limit") from None


def _check_structure(X, budget: int, context: RunContext, support: str) -> None:
    """:meth:`~sfapprox.sf.model.ChordSF.check_memory_first` of the structure :func:`sf_estimator` fits at
    ``budget`` (under a time limit, with the fewest factors it may keep)."""
    ChordSF = _chord_sf(context.callback)
    n = X.shape[0]
    params, full = _planned(n, budget, context, support)
    if full is not None and support != "butterfly" and context.settings.per_method(1).time_limit is not None:
        fewest = min_full_factors(n, support_offsets(n, full.support, full.base)) or full.n_factors
        params["n_factors"] = min(fewest, full.n_factors)
    est = ChordSF(**context.settings.apply_to(ChordSF, **params))
    est._matrix_name = context.matrix_name
    est.check_memory_first(X)


def _chord_sf(callback=None) -> type[ChordSF]:
    """ChordSF, its module imported under a display's phase (``callback``'s ``phase``): in a fresh
    process that import loads torch, 1.2-4 s before any other phase, under a bar that showed only
    "sf" and the clock (the phase shows only where it lasts, not in a process that has torch)."""
    with phase(callback, "loading torch"), _timing.one_time():
        from .model import ChordSF
    return ChordSF


def _default_dtype(n: int) -> np.dtype:
    """The floating point a default CPU fit of order ``n`` runs in (what the kernel is compiled and timed for)."""
    return np.dtype(np.float32 if n >= SF_FLOAT32_MIN_N else np.float64)


def _compiled_first(n: int, callback=None) -> float:
    """The compiled kernel compiled (or loaded from numba's cache) before the structure is timed: the
    timing is charged to the method's time limit, and on a fresh install its first call held the
    kernel's compiling, seconds of a short limit (a batch's first SF fit).  A progress display
    (``callback``'s ``phase``) says so, as ChordSF.fit's warm-up does: a comparison's first SF showed
    "sf it 0" and nothing more for 8 s of compiling.  Returns the seconds it compiled (0 where it loaded
    the kernel from the cache, or has none): what :func:`sf_estimator` keeps out of the time limit, as
    ChordSF.fit keeps its own compiling, and says."""
    from .._progress import kernel_phase

    # torch, numba (select_kernel imports it) and the look into numba's cache: said too, where they last
    with phase(callback, "loading kernels"), _timing.one_time():
        import torch

        from ._kernels import compiled_for, select_kernel, warm_up_numba
        from .model import _warmed_unless_stopped

        numba = select_kernel(n, "cpu")[1] == "numba"
        # cached: the one kernel warm_up_numba compiles, in its dtype. kernels_cached() also asks for the
        # in-memory L-BFGS iterations, which fits from columns never compile: every comparison of a kernel
        # too big to form said "compiling kernels (first run)" while it loaded them, run after run
        dtype = _default_dtype(n)
        cached = numba and compiled_for("loss_and_grad", dtype)
    if not numba:
        return 0.0
    compiling = _timing.now()
    with phase(callback, kernel_phase(cached)), _timing.one_time():
        # (a stop while it compiles: numba may wrap it in a SystemError, which a comparison raised, or a
        # batch wrote as a failed row and went on; as the fit's warm-ups take it, a stop, and no fit yet
        # to keep: the row "interrupted", the comparison stopped, run_all)
        if not _warmed_unless_stopped(lambda: warm_up_numba(getattr(torch, dtype.name))):
            raise KeyboardInterrupt
    return 0.0 if cached else _timing.now() - compiling


#: Up to this N a structure's evaluation is measured on a whole random target (8 MiB at most); above
#: it, with the compiled kernel, on a few blocks of columns (:func:`_blocks_seconds`).  It was 8,192
#: (512 MiB): a probe made before any memory check, that overran ``--max-memory`` (a 7,000 x 7,000
#: memory-mapped input under 100M peaked at 895 MiB, ``benchmarks/results/memory_limits.md``) and the
#: time limit it was sizing the fit for (8.2 s of a 5-s limit).
WHOLE_MEASURE_MAX_N = 1024


def _evaluation_seconds(n: int, offsets, n_factors: int, enough: float = math.inf) -> float:
    """Seconds of one loss+gradient evaluation of this structure on the CPU (the faster of two).

    Above :data:`WHOLE_MEASURE_MAX_N`, with the compiled kernel, measured on a few blocks
    of its columns and scaled to all ``N`` (:func:`_blocks_seconds`; an evaluation is its
    blocks one after another): the probe runs before any memory check, and a random
    ``N x N`` target would take 32 GiB at ``N = 65,536``.  There the timing stops at the first
    call that takes ``enough`` seconds or more, and returns that call's seconds (an :class:`_AtLeast`):
    a whole evaluation takes at least as long, which is all the structure's choice then needs.
    """
    import torch

    from ._kernels import numba_width, select_kernel

    kernel, name = select_kernel(n, "cpu")
    rng = np.random.default_rng(0)
    dtype = _default_dtype(n)
    # drawn in the kernel's dtype, in place: at N = 100,000 the float64 draw and its float32 copy took
    # 2-6 s of a 20 s limit
    values = rng.random((n_factors, n, len(offsets)), dtype=dtype)
    values /= len(offsets)
    offs = [int(d) for d in offsets]
    if name == "numba" and n > WHOLE_MEASURE_MAX_N:
        return _blocks_seconds(values, offs, numba_width(n, dtype.itemsize), rng, enough)
    ws, target = torch.as_tensor(values), torch.as_tensor(rng.random((n, n), dtype=dtype))
    return _best_of_two(lambda: kernel(ws, offs, target))


#: Multiply-adds per second no CPU reaches in SF's evaluation (a 128-core AVX-512 server peaks near 1e13 in
#: float32; this kernel ran at about 6e9 on the 2 busy cores it was measured on): what
#: :func:`least_evaluation_seconds` divides by.
CPU_MADDS_CEILING = 1e14


def least_evaluation_seconds(n: int, n_offsets: int, n_factors: int) -> float:
    """Seconds one loss+gradient evaluation takes at least on any CPU: its ``3 (M - 1) K N^2`` multiply-adds
    (the product's columns forward, the gradients and the transposed products backward) at
    :data:`CPU_MADDS_CEILING`.  Where this alone leaves no factor to spare, the structure is chosen
    without a timing: at N = 100,000 (17 factors of 18 offsets) it is 0.086 s, and the 60 s limit keeps
    the fewest factors from 0.068 s on.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    n_offsets : int
        Values per row of a factor (``K``).
    n_factors : int
        Factors (``M``).

    Returns
    -------
    float
        Seconds, a lower bound of any CPU's.

    Examples
    --------
    >>> round(least_evaluation_seconds(100_000, 18, 17), 3)
    0.086
    """
    return 3.0 * max(1, n_factors - 1) * n_offsets * float(n) * n / CPU_MADDS_CEILING


#: Bytes of random target the block measurement of :func:`_evaluation_seconds` takes at most (beyond its one block).
PROBE_BYTES = 16 << 20
#: Columns of the first, narrow call of a block measurement that may stop early (:func:`_blocks_seconds`):
#: at N = 100,000 one call of a whole block (128 columns) took 8-20 s on a busy machine, 150 times
#: what the 60 s limit's choice needed to know.
PROBE_FIRST_COLUMNS = 8


def _blocks_seconds(values: np.ndarray, offs: list[int], width: int, rng: np.random.Generator,
                    enough: float = math.inf) -> float:
    """A whole evaluation's seconds from one block of ``width`` columns and from ``b`` blocks (2-4, within
    :data:`PROBE_BYTES`): each call also pays a per-call cost (the transposed values, the zeroed
    gradient: ``O(N K M)``) that a whole evaluation pays once, so the time per block is the slope
    between the two, and the call's own cost is counted once (one block times ``N / width`` over-counted
    it: 4.3 s against 2.6 s measured whole at N = 6,000).

    With a finite ``enough``, a call of :data:`PROBE_FIRST_COLUMNS` columns comes first, and the first call
    that takes ``enough`` seconds or more ends the measurement: its seconds are returned, a lower bound
    of a whole evaluation's (which does all that call does, and more)."""
    from ._kernels import block_loss_and_grad

    n = values.shape[1]
    blocks = int(max(2, min(4, PROBE_BYTES // max(1, n * width * values.itemsize))))
    first = min(width, PROBE_FIRST_COLUMNS) if math.isfinite(enough) else 0
    target = rng.random((n, blocks * width), dtype=values.dtype)
    grads = [np.empty_like(values)]

    def call(cols: int):
        part = np.ascontiguousarray(target[:, :cols])
        return lambda: block_loss_and_grad(values, offs, part, 0, grads, width)

    if first and (lower := _best_of_two(call(first), enough, tries=1)) >= enough:
        return _AtLeast(lower)
    one = _best_of_two(call(width), enough)
    if one >= enough:
        return _AtLeast(one)
    many = _best_of_two(call(blocks * width), enough)
    if many >= enough:
        return _AtLeast(many)
    # a busy machine can time the longer call no slower than the short one: then its plain average
    per_block = (many - one) / (blocks - 1) if many > one else many / blocks
    return one + per_block * max(0.0, n / width - 1)


class _AtLeast(float):
    """Seconds that a whole evaluation takes at least: a timing that stopped once it knew enough
    (:func:`_blocks_seconds`), or the arithmetic's bound that made a timing needless
    (:func:`least_evaluation_seconds`), which :func:`structure_reason` says as such."""


def _best_of_two(run, enough: float = math.inf, tries: int = 2) -> float:
    """The faster of two timed calls of ``run`` (the first may still warm caches), or the first call's
    seconds where they reach ``enough`` (the caller needs no more); ``tries``: calls at most."""
    best = math.inf
    for _ in range(tries):
        t0 = _timing.now()
        run()
        took = _timing.now() - t0
        if took >= enough:
            return took
        best = min(best, took)
    return best


def wanted_evaluations(max_iter: int | None) -> int:
    """Evaluations a structure must leave room for: :data:`MIN_EVALS`, or fewer where ``max_iter``
    stops the fit first (about 1.05 evaluations per iteration, twice that to spare)."""
    return MIN_EVALS if max_iter is None else max(1, min(MIN_EVALS, 2 * int(max_iter) + 10))


def affordable_structure(n: int, config: SFConfig, time_limit: float | None, device: str = "cpu", *,
                         max_iter: int | None = None) -> SFConfig:
    """``config`` with at most the factors that leave :func:`wanted_evaluations` in ``time_limit``.

    Unchanged without a time limit (results then depend on the budget alone),
    for the butterfly (one structure), on a GPU (whose evaluations are cheap),
    and when the structure has no factor to spare (the fewest that cover
    every entry).  An evaluation costs in proportion to the number of factors,
    so one measured evaluation tells what each smaller structure costs.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    config : SFConfig
        The structure the budget allows.
    time_limit : float or None
        The fit's time limit in seconds; None: no cap.
    device : str, default="cpu"
        The fit's device (``"auto"`` counts as the CPU when no GPU is available).
    max_iter : int or None, default=None
        The fit's iteration limit: with ``--iters 3`` three iterations need
        no room for a thousand evaluations (the factors were cut "for time" in
        a fit that took 0.2 s of its 10).

    Returns
    -------
    SFConfig
        ``config``, or the same base and offsets with fewer factors.
    """
    return _affordable(n, config, time_limit, device, max_iter)[0]


def _affordable(n: int, config: SFConfig, time_limit: float | None, device: str = "cpu",
                max_iter: int | None = None) -> tuple[SFConfig, float | None]:
    """:func:`affordable_structure`'s structure and the measured seconds of one evaluation of ``config``
    (None where none was measured), from which :func:`structure_reason` tells what the structure chosen
    can expect; an :class:`_AtLeast` where those seconds are a lower bound (the timing stopped once they
    left no factor to spare, :func:`_evaluation_seconds`, or none was needed)."""
    if time_limit is None or config.support == "butterfly" or not str(device).startswith(("cpu", "auto")):
        return config, None
    if str(device) == "auto":
        import torch

        if torch.cuda.is_available():
            return config, None
    offsets = support_offsets(n, config.support, config.base)
    fewest = min_full_factors(n, offsets) or config.n_factors
    if config.n_factors <= fewest:
        return config, None
    wanted = wanted_evaluations(max_iter)
    # from these seconds of a whole evaluation on, no more than the fewest factors are affordable: a timing
    # that reaches them stops there (at N = 100,000 it took 50 s, where its first call already said so),
    # and none is made where the evaluation's arithmetic alone, at a speed no CPU has, takes as long
    enough = config.n_factors * time_limit / (wanted * (fewest + 1)) * (1.0 + 1e-6)
    seconds = least_evaluation_seconds(n, len(offsets), config.n_factors)
    seconds = _AtLeast(seconds) if seconds >= enough else _evaluation_seconds(n, offsets, config.n_factors, enough)
    affordable = int(config.n_factors * time_limit / (wanted * max(seconds, 1e-9)) + 1e-9)
    m = max(fewest, min(config.n_factors, affordable))
    if m == config.n_factors:
        return config, seconds
    return SFConfig(config.base, m, config.n_offsets, n * config.n_offsets * m, config.support), seconds


def structure_reason(n: int, full: SFConfig, config: SFConfig, time_limit: float, max_iter: int | None = None,
                     *, evaluation_seconds: float | None = None) -> str:
    """Why ``config`` has fewer factors than ``full``, the structure its budget allows (one line).

    Where ``config`` is the fewest factors that reach every entry and that too gets fewer evaluations
    than wanted, the line says about how many: "12 would get fewer than 1000 ... (10 is the fewest that
    reach every entry)" read as if 10 got them, beside a row of 48 evaluations (an RBF kernel at
    N = 3,000 under the default 60 s).

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    full : SFConfig
        The structure the budget allows.
    config : SFConfig
        The structure chosen (:func:`affordable_structure`).
    time_limit : float
        The fit's time limit in seconds.
    max_iter : int or None, default=None
        The fit's iteration limit (:func:`wanted_evaluations`).
    evaluation_seconds : float or None, default=None
        The measured seconds of one evaluation of ``full`` (an evaluation costs in proportion to the
        factors); None: not known, and not said.  An :class:`_AtLeast` (from :func:`_affordable`) is a
        lower bound (the timing stopped once the choice was made): the evaluations the fewest factors
        get are then said as "at most".

    Examples
    --------
    >>> full, fewest = SFConfig(2, 12, 13, 468_000, "chord"), SFConfig(2, 10, 13, 390_000, "chord")
    >>> structure_reason(3000, full, fewest, 60.0, evaluation_seconds=1.8).split(": ", 1)[1]
    '12 would get fewer than 1,000 loss evaluations in the 60 s limit on this machine, and 10, the fewest that reach every entry, about 40; time_limit=0 or a longer limit fits them all'
    """
    fewest = min_full_factors(n, support_offsets(n, config.support, config.base))
    wanted = wanted_evaluations(max_iter)
    # rounded: a comparison's shared limit read "10.9578 s" (and .3g alone writes 1,200 s as 1.2e+03)
    limit = limit_text(time_limit)
    why = f"{full.n_factors} would get fewer than {wanted:,} loss evaluations in the {limit} s limit on this machine"
    expected = (None if not evaluation_seconds else
                int(time_limit / (evaluation_seconds * config.n_factors / full.n_factors)))
    if config.n_factors == fewest and expected is not None and expected < wanted:
        about = "at most" if isinstance(evaluation_seconds, _AtLeast) else "about"
        why += f", and {config.n_factors}, the fewest that reach every entry, {about} {expected:,}"
    elif config.n_factors == fewest:
        why += f" ({config.n_factors} is the fewest that reach every entry)"
    return (f"{config.n_factors} of the {full.n_factors} factors its budget allows ({config.count:,} of "
            f"{full.count:,} numbers): {why}; {parameter('time_limit', 0)} or a longer limit fits them all")


def _register(name: str, support: str, summary: str, stores: str, order: int) -> None:
    register(
        MethodSpec(
            name=name,
            summary=summary,
            stores=stores,
            make=lambda n, budget, context: sf_estimator(n, budget, context, support=support),
            check_first=lambda X, budget, context: sf_check_first(X, budget, context, support=support),
            min_budget=lambda n, context: sf_min_budget(n, support=support),
            order=order,
            label="SF" if support == "chord" else f"SF ({support})",
            # offset supports fit from column blocks when the matrix is not formed (ChordSF._fit_columns)
            access=("dense",) if support == "butterfly" else ("dense", "columns"),
            operators=("chord",),
        )
    )


for _order, (_name, (_support, _summary, _stores)) in enumerate(SF_METHODS.items()):
    _register(_name, _support, _summary, _stores, _order)
