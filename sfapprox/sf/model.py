"""The Chord sparse-factorization estimator.

``ChordSF(...).fit(X)`` minimises ``0.5 * ||X - W1 ... WM||_F^2`` over the
values of ``M`` sparse factors with L-BFGS (see ``_solver``), on the CPU or
a CUDA GPU; when that fit is over the memory limit (a matrix too big to
form, a source), with Adam on blocks of its columns (``_columns``).  The factors' support is pluggable: the offset-based Chord
protocols (kernels in ``_kernels``) or the butterfly (kernels in
``_butterfly``); the optimizer, the starts and the scaling are shared.
``fit_sf`` is the function form.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import _streams, _timing
from .._atomic import FileStamp, OutputError, OutputExistsError, check_writable, output_target
from .._base import Approximation
from .._compiled import COMPILE_NOTE_SECONDS as _COMPILE_NOTE_SECONDS
from .._device import resolve_device, resolve_dtype
from .._errors import ConvergenceWarning, ParameterError, ResourceError, SfapproxError, parameter, parameters, user_stacklevel
from .._output_lock import output_lock
from .._progress import coarse_progress, kernel_phase, phase
from .._progress_line import progress_shown
from .._settings import (
    DEFAULT_SEED,
    DEFAULT_TIME_LIMIT,
    SF_BASE,
    SF_FLOAT32_MIN_N,
    SF_FTOL,
    SF_GTOL,
    SF_INIT,
    SF_MAX_ITER,
    SF_NAMED_INITS,
    SF_SUPPORT,
)
from .._threads import AdaptiveThreads
from .._validation import (
    COMPILED_LOOP_WORKING_SET,
    COMPILED_WORKING_SET,
    LIBRARY_WORKING_SET,
    check_memory,
    format_bytes,
    held_bytes,
    memory_limit,
)
from ..formats import counted, limit_text, shape_text
from ..budget import sf_structure
from ..chord import (
    butterfly_n_factors,
    check_butterfly_size,
    min_full_factors,
    support_is_full,
    support_offsets,
)
from ..metrics import operator_error, operator_error_and_multiple, scoring_bytes
from ..operators import ChordOperator
from ..operators._chord_apply import pack, unpack_view
from ..sources import ArraySource, MatrixLike, MatrixSource, SparseSource, columns_within, room
from ._constraints import SF_CONSTRAINTS, check_butterfly_base
from ._multistart import (PREFERRED, RANK_ONE, TOP_PAIR_ITER, multiple_error, multistart, rank_one_applies,
                          rank_one_error, rank_one_pays, rank_one_values, start_values, top_bound, top_pair)

__all__ = ["ChordSF", "fit_sf", "estimate_fit_memory", "optimizer_time_limit", "SCORING_EVALS"]


#: How a fit from column blocks steps (a :class:`~sfapprox.sf._columns.ColumnSettings`); None: its
#: defaults (set here by benchmarks that compare its optimizers).
COLUMN_SETTINGS = None

#: Float64 evaluations' worth of time a fit under a time limit keeps back for scoring its result
#: (:func:`~sfapprox.metrics.operator_error`, which :func:`sfapprox.compare` takes for SF's row
#: instead of scoring it again).  Measured on 2 cores (``benchmarks/results/scoring.md``): a
#: scoring takes 0.64 / 0.52 / 0.37 float64 evaluations (0.82 / 0.77 / 0.66 float32 ones) at
#: N = 4,096 / 8,192 / 16,384; a float32 evaluation counts for half a float64 one.
SCORING_EVALS = 0.75
#: Relative error under which a product handed back at its best multiple (:meth:`ChordSF._at_best_multiple`) is
#: scored by a pass instead of from its scoring's sums: ``sqrt(1 - <X, P>^2 / (||P||^2 ||X||^2))`` loses the
#: digits of its square's round-off (1e-16 of ``||X||^2``), all of them at 1e-8.
MULTIPLE_SCORED_BELOW = 1e-4
#: Seconds of compiling the kernels (the first fit after installing) from which a fit records them
#: (``params_["compile_seconds"]``): they are outside its time limit, inside its seconds.  Its scoring's
#: compiling of the apply kernels, inside its ``scoring_seconds``, is ``params_["scoring_compile_seconds"]``.
#: (:mod:`sfapprox._compiled`'s, which the NMF's sweeps record by too.)
COMPILE_NOTE_SECONDS = _COMPILE_NOTE_SECONDS


def estimate_fit_memory(
    n: int,
    n_factors: int,
    n_offsets: int,
    itemsize: int,
    history_size: int,
    device_type: str = "cpu",
    *,
    support: str = "chord",
    reach: int | None = None,
    n_starts: int = 1,
    input_bytes: int = 0,
) -> int:
    """Peak bytes of one fit, known before any allocation (what ``max_memory`` is checked against).

    Everything the fit holds at once: the input matrix (``input_bytes``, as
    given), the scaled target (``N^2``), the kernel's workspace (see
    :func:`~sfapprox.sf._kernels.workspace_numbers` and
    :func:`~sfapprox.sf._butterfly.workspace_numbers`: ``(M + 2) N^2`` for
    whole-matrix passes, ``(M + 1) (N + reach) * 256`` for CPU column panels,
    ``reach`` the largest offset, and for the compiled kernel from ``N = 512``
    four groups' ``(M + 1) N w`` blocks (``w`` columns of 512 bytes' worth:
    64 in float64, 128 in float32) and three more gradients), L-BFGS's
    ``2 * history_size`` pairs (float32 on the CPU, :func:`~sfapprox.sf._solver.pairs_itemsize`)
    plus a few vectors of ``N K M`` values for each of the ``n_starts`` starts
    that race (``n_offsets`` is the number of values per row: 2 for
    ``support="butterfly"``), the scoring of the result in float64
    (:func:`~sfapprox.metrics.scoring_bytes`: the product and the residual,
    ``2 N^2``, up to ``N = 2,048``, column blocks above), :data:`LIBRARY_WORKING_SET`, and
    :data:`COMPILED_WORKING_SET` when the compiled kernel will run (and
    :data:`COMPILED_LOOP_WORKING_SET` when its iterations run compiled whole).
    Measured against the peak resident memory in ``benchmarks/memory.py``.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    n_factors : int
        Number of factors ``M``.
    n_offsets : int
        Values per row and factor ``K``.
    itemsize : int
        Bytes per number of the fit's dtype (8 for float64, 4 for float32).
    history_size : int
        L-BFGS memory.
    device_type : {"cpu", "cuda"}, default="cpu"
        Decides the kernel, hence the workspace.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol.
    reach : int, optional
        The largest offset (it sizes the CPU column panels' workspace); None:
        the reference Chord's.
    n_starts : int, default=1
        Starts that race (2 for ``init="auto"``, 3 with the rank-one start).
    input_bytes : int, default=0
        Bytes of the input matrix as given.

    Returns
    -------
    int
        Bytes.
    """
    if support == "butterfly":
        from ._butterfly import select_kernel as select_butterfly
        from ._butterfly import workspace_numbers as butterfly_workspace

        _, kind = select_butterfly(device_type)
        workspace = butterfly_workspace(n, n_factors, kind)
    else:
        from ._kernels import select_kernel, workspace_numbers

        _, kind = select_kernel(n, device_type)
        workspace = workspace_numbers(n, n_factors, kind, reach, n_offsets, itemsize)
    from ._solver import pairs_itemsize

    values = n * n_offsets * n_factors
    numbers = n * n + workspace + max(1, n_starts) * 8 * values
    history = max(1, n_starts) * 2 * history_size * values * pairs_itemsize(device_type, itemsize)
    libraries = LIBRARY_WORKING_SET + (COMPILED_WORKING_SET if kind == "numba" else 0)
    if kind == "numba" and support != "butterfly" and _compiles_iterations(n, itemsize):
        libraries += COMPILED_LOOP_WORKING_SET
    return numbers * itemsize + history + scoring_bytes(n) + int(input_bytes) + libraries


def _compiles_iterations(n: int, itemsize: int) -> bool:
    """Whether an ``n x n`` CPU fit in numbers of ``itemsize`` bytes runs its iterations compiled whole
    (:class:`._kernels.CompiledObjective`'s condition, and float64)."""
    from ._kernels import numba_groups

    return itemsize == 8 and numba_groups(n, itemsize) == 1


def optimizer_time_limit(time_limit: float | None, spent: float, eval_seconds: float) -> float | None:
    """Seconds the optimizer gets of a fit's ``time_limit``: what the setup (``spent``) left, less
    :data:`SCORING_EVALS` evaluations' worth for scoring the result.

    Parameters
    ----------
    time_limit : float or None
        The fit's limit in seconds; None: no limit (None is returned).
    spent : float
        Seconds the setup took.
    eval_seconds : float
        Seconds one loss-and-gradient evaluation takes.

    Returns
    -------
    float or None
        Seconds, at least 0.

    Examples
    --------
    >>> optimizer_time_limit(30.0, 0.5, 0.4)
    29.2
    >>> optimizer_time_limit(1.0, 2.0, 0.1), optimizer_time_limit(None, 2.0, 0.1)
    (0.0, None)
    """
    if time_limit is None:
        return None
    return max(0.0, time_limit - spent - SCORING_EVALS * eval_seconds)


def _nbytes(X) -> int:
    """Bytes an ndarray or a scipy sparse matrix holds."""
    if hasattr(X, "toarray"):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


#: The ``init`` values that name a start (anything else is a factors file or values).
NAMED_INITS = SF_NAMED_INITS  # ("auto", *START_KINDS, RANK_ONE): tests/test_model.py checks

#: Column blocks on which a resumed column fit's end is compared with its saved start.
KEEP_START_BLOCKS = 8
#: A float64 evaluation of a block against the fit's float32 one (the comparison, :func:`_better_of`, runs
#: in float64): 1.85-2x per column at N = 16,384-65,536 (``ColumnSettings.kernel_dtype``).
FLOAT64_BLOCK_COST = 2.0
#: The most of the time left that a fit from columns under a time limit keeps for the comparison of its
#: saved or rank-one start with its end (:func:`_better_of`; its blocks estimated from the first block's
#: seconds): it ran after the limit, 8 blocks evaluated twice in float64 (about 18 s at N = 100,000).
KEEP_START_TIME_SHARE = 0.25
#: The most of a fit's time its checkpoints may take (:meth:`ChordSF._checkpointer`): a write of 0.2 s
#: (N = 3,000, 12 factors) comes every 2 s at most, whatever ``checkpoint_every`` asks.
CHECKPOINT_SHARE = 0.1
#: The largest entry a saved start's product may reach (on a random vector): its squares, summed over
#: N^2 entries, must stay finite in float64.
MAX_START_ENTRY = 1e150


def _structure_hint(op, budget: object = None) -> str:
    """The options that give a fit a saved operator's structure (for a refused ``init``), where they can, as
    the reader passes them (:func:`~sfapprox._errors.parameters`): ``"; fit with --support chord --base 2
    --factors 7"`` on the command line, ``"; fit with support='chord', base=2, n_factors=7"`` to Python.

    Parameters
    ----------
    op : ChordOperator
        The saved fit's operator.
    budget : object, optional
        The budget that chose this fit's structure, if one did: it cannot be given with those options (a
        budget chooses the structure itself), so the hint drops it first.

    Returns
    -------
    str
        The hint, from ``"; "``, or ``""`` where no options give that structure.
    """
    from ..chord import support_offsets

    n, m = op.shape[0], op.values.shape[0]
    drop = f"drop {parameter('budget', budget)} and " if budget is not None else ""
    if op.support == "butterfly":
        return f"; {drop}fit with {parameter('support', 'butterfly')}"
    for base in range(2, max(3, n)):
        if np.array_equal(support_offsets(n, op.support, base), op.offsets):
            return f"; {drop}fit with {parameters(support=op.support, base=base, n_factors=m)}"
    return ""


def _better_of(columns, start: np.ndarray, end: np.ndarray, offsets: np.ndarray, width: int, n: int,
               seed: int | None) -> np.ndarray:
    """``start`` or ``end`` (factor values of a column fit), whichever has the smaller loss on the same
    random column blocks (:data:`KEEP_START_BLOCKS` of ``width``): a paired comparison, so that a
    resumed fit never hands back worse factors than the saved ones it started from (Adam restarts
    its moments and its step size, and near a good point its first steps can wander: 0.3605 became
    0.3546-0.3709 in 1-s resumes).  :func:`_compare_start` under no time limit."""
    return _compare_start(columns, start, end, offsets, width, n, seed)[0]


def _compare_start(columns, start: np.ndarray, end: np.ndarray, offsets: np.ndarray, width: int, n: int,
                   seed: int | None, deadline: _timing.Deadline | None = None,
                   block_seconds: float = 0.0) -> tuple[np.ndarray, int]:
    """:func:`_better_of`'s choice and the blocks it was made on, of those that fit ``deadline``: a block
    starts only where its estimate fits (``block_seconds`` for the first, then the last one's seconds).

    It ran whatever it cost, after the fit's limit: at N = 30,000-100,000 a block and its two float64
    evaluations take 1-2 s.  Where no block fits, ``end`` is handed back uncompared: the fit's own choice
    (Adam's end, or its start where its own blocks said so: ``_columns._end_at_best_multiple``).

    Returns
    -------
    (numpy.ndarray, int)
        ``start`` or ``end``, and the blocks compared (fewer than :data:`KEEP_START_BLOCKS` only where
        the time did not hold them, or ``N`` has fewer).
    """
    from ._kernels import block_loss_and_grad

    rng = np.random.default_rng(seed)
    firsts = np.arange(0, n, width)
    picked = np.sort(rng.choice(firsts, size=min(KEEP_START_BLOCKS, firsts.size), replace=False))
    pair = [np.ascontiguousarray(v, dtype=np.float64) for v in (start, end)]
    offs = [int(d) for d in offsets]
    grads = [np.empty_like(pair[0])]
    losses = [0.0, 0.0]
    compared = 0
    for first in picked:
        if deadline is not None and not deadline.fits(block_seconds):
            break
        began = _timing.now()
        block = np.ascontiguousarray(columns(int(first), min(int(first) + width, n)), dtype=np.float64)
        for i, values in enumerate(pair):
            losses[i] += block_loss_and_grad(values, offs, block, int(first), grads, width)
        compared += 1
        block_seconds = _timing.now() - began
    return (start if compared and losses[0] < losses[1] else end), compared


class ChordSF(Approximation):
    """Sparse factorization of a square matrix with Chord-structured factors.

    Parameters
    ----------
    n_factors : int or None, default=None
        Number of factors ``M``; ``None`` is the reference ``ceil(log2 N)``.
    base : int, default=2
        Chord base: offsets ``{0} ∪ {base^k < N}``.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol (:data:`sfapprox.chord.SUPPORTS`); ``"symmetric"``
        adds the offsets ``-base^k``.  The default number of factors is the
        fewest with full support (``ceil(log2 N)`` for the reference).
        ``"butterfly"`` (the FAµST toolbox's structure) needs ``N`` a power
        of two and has exactly ``M = log2 N`` factors; row ``i`` of factor
        ``m`` (``m = 0`` the leftmost) holds columns ``i`` and
        ``i XOR 2^m``: ``2 N M`` stored numbers.  ``n_factors`` (if given)
        must be ``log2 N`` and ``base`` does not apply.
    max_iter : int, default=20000
        Maximum L-BFGS iterations.
    time_limit : float or None, default=60.0
        Wall-clock limit of the whole fit (setup, optimizer and the scoring
        of the result: the optimizer stops :data:`SCORING_EVALS` evaluations
        early), in seconds; None for none (0 is no time at all: the fit
        returns its start; :class:`~sfapprox.FitSettings` and the CLI read 0
        as none).  Compiling the CPU kernels on their first use (once per
        install, seconds) is not counted, nor is a new process's first fit's
        importing of torch and loading of the compiled kernels (1-3 s; its
        ``seconds_`` includes the loading).  With
        the default, a fit takes at most about a minute, and stops earlier on
        ``max_iter`` or a tolerance; a fit cut by the clock depends on the
        machine's speed, so set ``time_limit=None`` for results that depend
        on ``max_iter`` alone (reproducible on every machine).
    ftol : float, default=1e-10
        Stop when the loss falls by a relative ``ftol`` or less over 20 iterations.
    gtol : float, default=1e-12
        Stop when ``max |grad| <= gtol * max(1, loss)`` (scale-free units).
    history_size : int, default=50
        L-BFGS memory.
    init : {"auto", "reference", "identity", "rank1"}, path or ndarray, default="auto"
        Starting point: every value 1/K (the reference code's), each factor
        near the identity (better for sparse graphs such as citation and
        trade networks), factors whose product is X's best rank-one
        approximation (``"rank1"``, from its top singular pair: exactly for
        N a power of two; base-2 offsets and ``ceil(log2 N)`` factors at least,
        so the symmetric support only with ``n_factors`` given), or ``"auto"``: the
        reference and identity starts race, in rounds of 100, 200, 400, ...
        iterations, until one is ahead by 15% in error or each has had its
        probe share; then the better one continues.  Where X is far nearer
        rank one than constant or diagonal (its rank-one error at most 0.6
        times theirs, as a kernel of image patches) and the memory limit has
        room for a third state, the rank-one start races too (and runs alone
        where no race can be afforded).  From column blocks one start runs:
        the identity, or the rank-one start where its error is at most 0.9
        times the identity's and its pass over the columns takes a quarter
        of the time left at most; a fit from columns that ends worse than its
        rank-one or saved start (compared on random column blocks) returns
        the start.  A saved fit
        (a factors file, e.g. a checkpoint) or an array of values ``(M, N, K)``
        in X's units starts from those factors (to resume or to refine); its
        structure must be this fit's.
    checkpoint : path or None, default=None
        Write the best factors so far to this file (atomically, as
        :func:`~sfapprox.save_factors` does) every ``checkpoint_every``
        seconds, so that a fit killed outright loses at most one interval:
        ``init=<the file>`` resumes it.  The file there when the fit starts
        is replaced; one that another program puts there while the fit runs
        is not (the checkpoints then go beside it, with a RuntimeWarning).
        The fit holds the file's output lock (a hidden ``.NAME.sfapprox-lock`` beside it,
        as ``fit --out`` and ``fit_matrix(out=)`` hold theirs) from before any
        work to its end: a second fit checkpointing to the same file (another
        notebook kernel, another process) refuses at once with
        :class:`~sfapprox.OutputBusyError` naming the first, where both ran
        and each replaced the other's checkpoints.  Where this process already
        holds it (``fit_matrix(out=F)`` with ``checkpoint=F``), it nests.
    checkpoint_every : float, default=300.0
        Seconds between checkpoints (checked after each iteration, or after each
        run of compiled iterations: about every 0.05 s at most), and at least ten
        times the last checkpoint's own seconds, so that writing them takes a
        tenth of the fit at most (a 3.7 MB file, N = 3,000: 0.2 s, so every 2 s).
    init_noise : float or None, default=None
        Amplitude of the uniform noise added to the start (relative to 1/K
        for ``"reference"``); None: 0.01 for reference, 0.1 for identity.
    probe : float, default=0.1
        Share of ``max_iter`` (and ``time_limit``) each start gets at most in
        ``init="auto"``'s race (a clearly worse start stops after 100 iterations).
    scale : {"sqrt_n", "n", "fro"} or float, default="sqrt_n"
        X is divided by ``||X||_F / sqrt(N)`` (``/ N``, ``/ 1``, or this number)
        before fitting, and the factors scaled back afterwards.
    random_state : int, default=0
        Seed of the initial noise.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs; ``"auto"``: a CUDA GPU when one is available,
        else the CPU.
    dtype : {"float64", "float32", "auto"} or None, default=None
        None (or ``"auto"``): float32 on a GPU, and on the CPU from
        ``N = 4,096`` (:data:`~sfapprox._settings.SF_FLOAT32_MIN_N`: twice the
        iterations per second there), float64 on the CPU below.  The
        returned factors and their error are float64 either way.
    max_memory : int, str or None, default=None
        Bytes, or a size such as ``"4G"`` or ``"500M"`` as ``--max-memory`` reads it
        (``get_params`` returns it as given; the fit reads it in bytes).
        Memory limit in bytes (default: 90% of the GPU's free memory on
        CUDA, 80% of the physical memory on the CPU).  On the CPU, an offset
        support (chord, symmetric) whose in-memory fit's estimated peak is
        over it is fitted from column blocks instead (Adam on blocks of
        columns, ``O(N K M)`` memory: :mod:`sfapprox.sf._columns`), and a
        :class:`~sfapprox.sources.MatrixSource` (a kernel, an attention map,
        a memory-mapped file) is then never formed; a fit that fits neither
        way is refused before allocating.
    callback : callable or None, default=None
        Called after each iteration with a dict (``iteration``, ``max_iter``,
        ``fro_error``, ``elapsed``, ``start``); returning True stops the fit.
        From column blocks ``start`` is ``"columns"``, ``stage`` the optimizer
        taking the steps (``"adam"``, ``"lbfgs"`` by passes or ``"sketch"``:
        rounds of sketches) and ``epochs`` the passes over the columns so far.
        A callable whose attribute ``coarse`` is True (a progress display, as
        the CLI's) is instead called once per run of iterations where they
        run compiled (small in-memory CPU fits, about every 0.05 s;
        ``iteration`` counts them all), which spares the fit a Python call
        per iteration: a third of its time at ``N = 64``.  A callable with an
        attribute ``phase`` (a callable taking a text) is shown what a fit does
        before its first iteration when that lasts over half a second
        (``"compiling kernels (first run)"`` on a fresh install, ``"loading compiled kernels"``
        where numba's cache has them), then ``""``.
    threads : int or None, default=None
        CPU threads of the fit's kernel (the compiled kernel's from ``N = 512``,
        torch's intra-op threads for the torch kernels; restored afterwards).
        The compiled kernel's result does not depend on it.  None: chosen from the work size and the free
        cores (:mod:`sfapprox._threads`): one thread for matrices whose kernel
        operations are small, more only on cores no other process is using,
        revisited about every second; never more than torch's current
        setting.  An int forces that count (at most the cores this process may
        use).  Ignored on a GPU.

    Attributes
    ----------
    operator_ : ChordOperator
        The fitted product, usable as a LinearOperator.
    factors_ : ndarray of shape (M, N, K)
        ``K = 2`` for the butterfly: ``factors_[m, i, 0]`` at column ``i``,
        ``factors_[m, i, 1]`` at column ``i XOR 2^m``.
    offsets_ : ndarray of shape (K,)
        Empty for the butterfly, whose positions are not offsets.
    n_stored_ : int
    n_iter_, n_evals_ : int
        Iterations and evaluations of every start together (``init="auto"``
        races two starts within ``max_iter``; with fewer iterations than
        starts, the better start takes them all).  From column blocks: the
        optimizers' steps, and their loss-and-gradient evaluations, each of
        what that optimizer minimizes: an Adam step's block of columns, a
        whole pass for L-BFGS by passes, a sketch for the rounds of sketches
        (``params_["epochs"]`` counts the passes over the columns).
    loss_curve_ : list of float
        ``0.5 * ||X - product||_F^2`` after each iteration of the start kept
        (``init_``; index 0: its start), so up to ``n_iter_ + 1`` values.
    stop_reason_ : str
    seconds_ : float
        Optimizer wall time, the loading (or compiling) of the compiled
        kernels included.  Not in it: forming a source
        (``params_["form_seconds"]``) and the final scoring of the result
        (``params_["scoring_seconds"]``), each recorded where it ran.
    fro_error_, rel_error_ : float or None
        Frobenius error of the returned factors, evaluated in float64; None
        after a fit from the column blocks of a source that is not in memory
        (score it with :func:`~sfapprox.estimate_errors`, exact or with a 95 %
        interval; :func:`~sfapprox.compare` and ``fit_matrix`` do).
    running_error_ : float
        After a fit from column blocks: the relative error over the last
        pass's blocks, each at its own step (a lagging estimate).
    device_, dtype_ : str
    init_ : str
        The start the returned factors came from ("none" for the zero matrix).
    starts_ : dict
        Per start tried: ``{"iterations": int, "fro_error": float}`` (its best
        error in X's units); with ``init="auto"`` the losing starts' iterations
        (two or, with the rank-one start, three starts) show how long the race ran.
    kernel_ : str
        The loss+gradient path used ("numba", "dense", "panels", "triton" or "shifts";
        for the butterfly "butterfly-panels" on the CPU, "butterfly" on a
        GPU; "columns" for a fit from column blocks).
    params_ : dict
        The fitted structure and run, for reports: ``support``, ``n_factors``,
        ``offsets``, ``base`` (None for the butterfly), ``iterations``,
        ``evaluations``, ``stop_reason``, ``init``, ``device``, ``dtype``, ``threads``;
        from column blocks also ``path`` ("columns"), ``epochs`` (passes over
        the columns), ``batch``, ``block_width`` and ``running_error``.
    threads_ : int or None
        CPU threads the optimizer ran on (the count that ran longest when it
        changed during the fit); None on a GPU.
    checkpoint_written_ : (Path, FileStamp or False)
        With ``checkpoint``: where the last checkpoint went and which file it
        left there (False: none there yet), what the next write may replace.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(8)
    >>> sf = ChordSF(max_iter=200, device="cpu").fit(X)
    >>> sf.n_stored_
    96
    >>> bool(sf.rel_error_ < 1e-3)
    True
    """

    _accepts_sources = True  # formed when its fit fits the memory limit, else fitted from column blocks

    # Fitted attributes that a branch of fit sets to None first, declared as the docstring says for type
    # checkers (a checker took their type from that first assignment: ``rel_error_`` was None to mypy, and
    # ``sf.rel_error_ < 1e-3`` an error).  Annotations alone: no class attribute, so unfitted they are not there.
    fro_error_: float | None
    rel_error_: float | None
    threads_: int | None
    # fit_matrix's hand-over to fit (annotations alone: each read through ``__dict__``, absent on a plain fit)
    _checkpoint_start: FileStamp | bool
    _checkpoint_iterations: int
    _checkpoint_source: dict[str, Any]
    _budget: str | int | float | None
    _init_note: str | None

    #: How a comparison chose this structure when it took fewer factors than its budget allows
    #: (:func:`sfapprox.sf.methods.sf_estimator` sets it; merged into ``params_``): None otherwise.
    _structure_choice: dict | None = None

    @property
    def method_name(self) -> str:
        return "sf" if self.support == "chord" else f"sf-{self.support}"

    _parameter_constraints = SF_CONSTRAINTS  # (in a module of their own: the CLI checks them without torch)

    def __init__(
        self,
        *,
        n_factors: int | None = None,
        base: int = SF_BASE,
        support: str = SF_SUPPORT,
        max_iter: int = SF_MAX_ITER,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        ftol: float = SF_FTOL,
        gtol: float = SF_GTOL,
        history_size: int = 50,
        init: str = SF_INIT,
        init_noise: float | None = None,
        probe: float = 0.1,
        scale: str | float = "sqrt_n",
        random_state: int = DEFAULT_SEED,
        device: str = "auto",
        dtype: str | None = None,
        max_memory: int | str | None = None,
        callback: Callable[[dict], bool | None] | None = None,
        threads: int | None = None,
        checkpoint: str | os.PathLike | None = None,
        checkpoint_every: float = 300.0,
    ):
        self.n_factors = n_factors
        self.base = base
        self.support = support
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.ftol = ftol
        self.gtol = gtol
        self.history_size = history_size
        self.init = init
        self.init_noise = init_noise
        self.probe = probe
        self.scale = scale
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.max_memory = max_memory
        self.callback = callback
        self.threads = threads
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every

    # ------------------------------------------------------------------ fit
    def fit(self, X: MatrixLike, *, check_input: bool = True) -> "ChordSF":
        """Fit the factors to the square matrix ``X`` (ndarray or scipy sparse).

        A ``KeyboardInterrupt`` during the optimisation stops it at once: the
        best factors found so far are kept and ``stop_reason_`` is
        ``"interrupted"`` (the CLI then saves them and exits 130).  A fit
        stopped by ``max_iter`` or ``time_limit`` before its tolerances warns
        with a :class:`~sfapprox.ConvergenceWarning`.

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The square, finite matrix; a sparse one is densified for the fit, a
            source formed, when the in-memory fit fits ``max_memory``;
            otherwise the fit runs from their column blocks
            (``params_["path"] == "columns"``).
        check_input : bool, default=True
            Validate ``X`` (:func:`~sfapprox._validation.check_square_matrix`);
            False when the caller already did.

        Returns
        -------
        ChordSF
            ``self``, fitted.

        Raises
        ------
        InputError
            For an ``X`` that is not a finite square matrix (with ``check_input``).
        ParameterError
            For an invalid parameter, a structure that does not apply to ``N`` (too few factors for full
            support, the butterfly with ``N`` not a power of two), an ``init`` text
            that is neither a named start nor an existing file, or an ``init``
            whose structure is not this fit's.
        ResourceError
            When the estimated peak memory (:func:`estimate_fit_memory`) is over
            the memory limit.
        DeviceError
            When ``device`` asks for a GPU that is not there.
        OutputBusyError
            With ``checkpoint``: when another process holds that file's lock (it is fitting to it), before
            any work.
        """
        self._check_init()
        if self.checkpoint is not None:
            # before any work: the first checkpoint came after checkpoint_every seconds, and the fit
            # failed there (or a short fit never wrote one, and said nothing)
            check_writable(output_target(self.checkpoint), "checkpoint ")
        # one writer per checkpoint file, as per --out: two notebook kernels fitting with one checkpoint
        # each replaced the other's (nested where fit_matrix holds it already for out=)
        with output_lock(self.checkpoint, option="checkpoint"):
            # importing torch, forming X, the starts and timing one evaluation took ~5 s at N = 3,000 under a
            # bare "sf it 0": named, as the hybrids' stages are, until the first iteration
            with phase(self.callback, "preparing") as preparing:
                return self._fit(X, check_input, preparing)

    def _fit(self, X: MatrixLike, check_input: bool, preparing: Any) -> "ChordSF":
        """:meth:`fit`; ``preparing``, its progress phase (:func:`~sfapprox._progress.phase`), ended where
        the next stage names itself (the kernels, the fit from columns, the first iteration)."""
        import torch

        from . import _butterfly, _kernels, _solver

        self._load_kernel_module()
        fit_begin = _timing.now()  # the time limit covers the whole fit: setup, optimizer, scoring
        if self.checkpoint is not None:  # (checked writable and locked by fit)
            # The file there now may be replaced (the caller allowed it); a file that takes the name
            # later, while the fit runs, is another program's and is not (see _save_checkpoint).
            start = self.__dict__.pop("_checkpoint_start", None)  # fit_matrix's replaces=
            self.checkpoint_written_ = (Path(self.checkpoint),
                                        (FileStamp.of(self.checkpoint) or False) if start is None else start)
            self.__dict__.pop("_checkpoint_iterations", None)  # (an earlier fit's: none written by this one yet)
        X = self._validate(X, check_input)
        if self._asks_rank_one():  # refused before any work where the structure cannot hold it
            butterfly = self.support == "butterfly"
            self._rank_one_possible(X.shape[0], *((np.zeros(0), 0) if butterfly else self._structure(X.shape[0])),
                                    butterfly=butterfly)
        if not self._fits_in_memory(X):  # its in-memory fit is over the memory limit: from column blocks
            # named as the caller knows it (fit_matrix: the file's name), not "X", in what it says
            preparing.end()  # (its stages name themselves)
            return self._fit_columns(columns_within(X, self._max_memory_bytes, self.__dict__.get("_matrix_name", "X")),
                                     fit_begin)
        formed = None  # seconds of forming a source (a kernel of 8,000 points: 27 s), in no optimizer's time
        if isinstance(X, MatrixSource):
            began = _timing.now()
            X = X.to_dense(self._max_memory_bytes)
            formed = _timing.now() - began
        n = X.shape[0]
        butterfly = self.support == "butterfly"
        device, dtype, offsets, n_factors, limit = self._check_in_memory(X)
        n_values = 2 if butterfly else len(offsets)
        # room for the rank-one start's state beside the two that race (init="auto")
        room = limit is None or self._in_memory_need(X, n_factors, offsets, n_values, dtype, device, 3) <= limit
        dense = X.toarray() if hasattr(X, "toarray") else X
        fro = float(np.linalg.norm(dense))
        self.offsets_ = offsets
        self.device_ = str(device)
        self.dtype_ = str(dtype).replace("torch.", "")
        shape = (n_factors, n, n_values)
        saved = self._saved_start(shape, offsets)
        starts = ({"saved": saved} if saved is not None else
                  start_values(self._inits(), self.random_state, shape, self.init_noise))
        if fro == 0.0:
            return self._finish_zero(np.zeros(shape), fro)

        # Fit X / s with s = ||X||_F / sqrt(N): the loss is then O(N) for every
        # input, so tolerances and the line search's first step mean the same
        # thing for a 0/1 graph and for trade volumes of 1e5 (scale invariance).
        scale = self._scale(fro, n)
        target = _kernels.scaled_target(dense, scale, dtype, device)
        offs = offsets.tolist()
        if butterfly:
            kernel, self.kernel_ = _butterfly.select_kernel(device.type)
        else:
            kernel, self.kernel_ = _kernels.select_kernel(n, device.type)

        if kernel is _kernels.loss_and_grad_numba:  # its L-BFGS iterations compiled whole where they can be
            fun = _kernels.CompiledObjective(shape, offs, target)
        else:
            def fun(x: torch.Tensor) -> tuple[float, torch.Tensor]:
                loss, grad = kernel(x.view(shape), target) if butterfly else kernel(x.view(shape), offs, target)
                return float(loss), grad.view(-1)

        if saved is not None:  # in X's units: each factor carries an equal share of the scale
            starts = {"saved": saved / scale ** (1.0 / n_factors)}
        else:
            starts = self._with_rank_one(starts, dense, fro, scale, offsets, n_factors, butterfly, room, fit_begin)
        runs = {
            name: (fun, _solver.new_state(torch.as_tensor(v, dtype=dtype, device=device).reshape(-1)))
            for name, v in starts.items()
        }
        states = {name: st for name, (_, st) in runs.items()}
        start = time.perf_counter()
        compiled = None  # seconds of compiling the kernels, where they were compiled for this fit
        self._warm_up_seconds = 0.0  # loading or compiling them: outside the time limit (a hybrid's too)
        governor = AdaptiveThreads(self._work(n, n_factors), threads=self.threads, device_type=device.type,
                                   compiled=self.kernel_ == "numba")
        with governor:
            # The first start's evaluation (the run's first step anyway) tells what one costs,
            # so the optimizer leaves the scoring its time (see optimizer_time_limit).
            # The preferred start first: the one that runs alone where a race cannot be afforded.
            fun0, first = runs.get(PREFERRED) or next(iter(runs.values()))
            warmed = True  # False: a stop came while the kernels compiled
            if self.kernel_ == "numba":
                preparing.end()  # the kernels' own phase next
                # Compiled first (seconds on a fresh install), so that neither the first evaluation's
                # time nor the race's first round holds the compiling; nor does the time limit: with
                # --time-limit 1 a first fit ended at its start, the compiling had taken the second.
                compiling = _timing.now()
                cached = _kernels.kernels_cached()
                with phase(self.callback, kernel_phase(cached)):
                    warmed = _warm_up_kernels(dtype, fun)
                warm_up = _timing.now() - compiling
                fit_begin += warm_up
                self._warm_up_seconds = warm_up
                # outside the time limit, inside the fit's seconds: said, or "sf 15.0 s" beside --time-limit 5
                # read as a limit not kept
                compiled = None if cached or not warmed or warm_up < COMPILE_NOTE_SECONDS else warm_up
            if not warmed:
                # as a stop during the iterations: the best factors so far (the preferred start, no
                # iteration run) kept, stop_reason_ "interrupted"
                name, reason = next(k for k, (_, st) in runs.items() if st is first), _solver.StopReason.INTERRUPTED
            else:
                # (after the kernels' phase, timing an evaluation is preparing again)
                with phase(self.callback, "preparing") if self.kernel_ == "numba" else contextlib.nullcontext():
                    _solver.evaluate_start(fun0, first)
                    if self.kernel_ == "triton":
                        # triton compiles its kernels on their first launch (4 s measured on an H100, once per
                        # install): time one more, or the scoring's reserve below would count the compile
                        began = _timing.now()
                        fun0(first["x"])
                        first["eval_seconds"] = _timing.now() - began
                preparing.end()  # the first iteration reports next
                # The scoring runs in float64: a float32 fit's evaluation counts for half of one (see SCORING_EVALS).
                scoring_eval = first["eval_seconds"] * 8 / dtype.itemsize
                limit = optimizer_time_limit(self.time_limit, _timing.now() - fit_begin, scoring_eval)
                progress = self._progress(scale, start, states, governor.poll)
                if self.checkpoint is not None:
                    progress = self._checkpointing(progress, states, shape, scale, offsets)
                name, reason = multistart(runs, self._options, max_iter=self.max_iter, time_limit=limit,
                                          probe=self.probe, callback=progress, n_factors=n_factors,
                                          target_norm2=(fro / scale) ** 2)
        state = states[name]
        self.threads_ = governor.used
        self.seconds_ = time.perf_counter() - start
        self.init_ = name
        self.starts_ = {k: {"iterations": int(st["n_iter"]),
                            "fro_error": scale * math.sqrt(2.0 * max(st["best_loss"], 0.0))
                            if math.isfinite(st["best_loss"]) else math.inf}
                        for k, st in states.items() if st["func_evals"]}  # (a start that never ran: none)
        best = state["best_x"].view(shape).to(torch.float64).cpu().numpy()
        # Give each factor an equal share of the scale: the product is then X's scale.
        values = best * scale ** (1.0 / n_factors)
        self.loss_curve_ = [float(v) * scale**2 for v in state["history"]]
        self.n_iter_ = sum(int(st["n_iter"]) for st in states.values())
        self.n_evals_ = sum(int(st["func_evals"]) for st in states.values())
        self.stop_reason_ = reason
        self._set_result(values, dense, fro, device)
        # what one loss-and-gradient evaluation took: a fit cut short after a few iterations says so, for
        # choosing a limit that allows more (N = 16,384 in 60 s: 0 iterations, 15 s an evaluation)
        if first.get("eval_seconds"):
            self.params_["evaluation_seconds"] = float(f"{first['eval_seconds']:.4g}")  # (microseconds at small N)
        self._record_compiling(compiled)
        if formed is not None:
            self.params_["form_seconds"] = formed
        if self.stop_reason_ in (_solver.StopReason.MAX_ITER, _solver.StopReason.TIME_LIMIT):
            warnings.warn(
                f"SF stopped on its {reason.replace('_', ' ')} ({counted(self.n_iter_, 'iteration')}) before "
                "its tolerances were met; increase max_iter / time_limit for a closer fit",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        return self

    def _load_kernel_module(self) -> None:
        """Import the compiled kernels' module (numba's start: 0.3-0.5 s once a process) where the fit on
        the CPU will use it, before the time limit's clock starts, as their compile is: imported inside
        the memory check, it took the whole of ``time_limit=0.3`` at N = 30 (0 iterations, the start
        returned, where an evaluation takes 0.2 ms)."""
        from . import _kernels

        if self.support == "butterfly":  # (its kernels are torch's)
            return
        try:
            device = resolve_device(self.device)
        except SfapproxError:  # (said by the fit's own checks, in their order)
            return
        if device.type == "cpu":
            _kernels._numba_module()

    # ------------------------------------------------------------- from column blocks
    def _structure(self, n: int) -> tuple[np.ndarray, int]:
        """The offsets and the number of factors of an offset support for ``n`` (checked)."""
        offsets = support_offsets(n, self.support, self.base)
        n_factors = sf_structure(n, support=self.support, base=self.base, n_factors=self.n_factors).n_factors
        self._check_support(n, offsets, n_factors)
        return offsets, n_factors

    def check_memory_first(self, X) -> None:
        """Raise the :class:`~sfapprox.ResourceError` that :meth:`fit` of ``X`` raises on the memory
        limit, without any of the fit's work.

        What a comparison's SF row asks before its structure is timed and its kernels are compiled
        (:func:`~sfapprox.sf.methods.sf_estimator`): a fit from column blocks refused under a tiny
        ``--max-memory`` showed 5 s of that work in its "not applicable" row.

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix or MatrixSource, shape (N, N)
            The validated matrix the fit will be given.

        Raises
        ------
        ResourceError
            Where the fit (in memory, or from ``X``'s column blocks where that is over the limit)
            needs more than the memory limit.
        """
        if self._fits_in_memory(X):
            self._check_in_memory(X)
            return
        # held as columns_within counts it: the matrix in memory beside the passes (a sparse one twice)
        held = X.held_bytes if isinstance(X, MatrixSource) else held_bytes(X) * (2 if sp.issparse(X) else 1)
        self._check_columns_memory(X.shape[0], held, self.__dict__.get("_matrix_name", "X"))

    def _check_in_memory(self, X) -> tuple:
        """Refuse the in-memory fit of ``X`` over the memory limit; returns what the check resolved:
        ``(device, dtype, offsets, n_factors, limit)`` (the butterfly's offsets are empty)."""
        n = X.shape[0]
        device = resolve_device(self.device)
        dtype = resolve_dtype(self.dtype, device, SF_FLOAT32_MIN_N, n)
        if self.support == "butterfly":
            n_factors = self._check_butterfly(n)
            offsets = np.zeros(0, dtype=np.int64)  # positions are i and i XOR 2^m, not offsets
        else:
            offsets, n_factors = self._structure(n)
        n_values = 2 if self.support == "butterfly" else len(offsets)
        limit = self._memory_limit(device)
        check_memory(
            self._in_memory_need(X, n_factors, offsets, n_values, dtype, device),
            what=f"fitting SF to the {n:,} x {n:,} matrix on {device.type} in {dtype}".replace("torch.", ""),
            limit=limit,
        )
        return device, dtype, offsets, n_factors, limit

    def _check_columns_memory(self, n: int, held: int, name: str) -> None:
        """Refuse the fit from column blocks where even its narrowest blocks (one column: what
        :meth:`least_columns_limit` counts) and the libraries' working set, beside a matrix held in
        memory (``held`` bytes), are over the memory limit.  Wider blocks are taken only where they
        fit (:func:`~._columns.column_width`), so this is the fit's one memory refusal."""
        full = memory_limit(self._max_memory_bytes)
        checked: dict[str, Any] = dict(limit=full, held=held if full is not None else 0,  # the user's limit, in the message
                       what=f"fitting SF to {name} ({n:,} x {n:,}) from its column blocks")
        need = self._least_columns_need(n)
        try:
            check_memory(need, **checked)
        except ResourceError:  # refused: only then is the advice worked out (the fewest factors: O(M K N))
            room = None if full is None else full - checked["held"]
            check_memory(need, advice=self._fewer_factors_advice(n, room), **checked)
            raise

    def _fewer_factors_advice(self, n: int, room: int | None) -> str:
        """What else a refusal of the fit from column blocks can advise: fewer factors where fewer still reach
        every entry and fit the ``room`` the limit leaves (bytes; None: no user limit), with what they need
        (N = 1,000,000: 20 factors need 21.4 GiB, the fewest, 12, about 13 GiB, under an 18.8 GiB limit; the
        refusal said only "raise --max-memory or use a smaller input").  Fewer that do not fit either are
        not advised."""
        offsets, n_factors = self._structure(n)
        fewest = min_full_factors(n, offsets, n_factors)
        if fewest is None or fewest >= n_factors:
            return "use a smaller input"
        need = self._least_columns_need(n, fewest)
        if room is not None and need > room:
            return "use a smaller input"
        return (f"fit fewer factors ({parameter('n_factors', fewest)}, the fewest that reach every entry, needs "
                f"about {format_bytes(need)}; a comparison fits fewer at a lower {parameter('budget')}), or use a "
                "smaller input")

    def _fits_in_memory(self, X) -> bool:
        """Whether the in-memory L-BFGS fit of ``X`` (formed, if a source) fits the memory limit.

        True for the butterfly and on a GPU, which have no column path (their
        own memory check then says what is over).
        """
        device = resolve_device(self.device)
        if self.support == "butterfly" or device.type != "cpu":
            return True
        n = X.shape[0]
        offsets, n_factors = self._structure(n)
        need = self._in_memory_need(X, n_factors, offsets, len(offsets),
                                    resolve_dtype(self.dtype, device, SF_FLOAT32_MIN_N, n), device)
        limit = memory_limit(self._max_memory_bytes)
        return limit is None or need <= limit

    def _in_memory_need(self, X, n_factors: int, offsets: np.ndarray, n_values: int, dtype, device,
                        n_starts: int | None = None) -> int:
        """:func:`estimate_fit_memory` of the L-BFGS fit of ``X`` (a source counts as formed, a sparse
        matrix with its dense copy) with ``n_starts`` starts (default: the named ones)."""
        import torch

        n = X.shape[0]
        held = X.formed_bytes if isinstance(X, MatrixSource) else _nbytes(X) + (8 * n * n if hasattr(X, "toarray") else 0)
        return estimate_fit_memory(n, n_factors, n_values, torch.empty((), dtype=dtype).element_size(),
                                   self.history_size, device.type, support=self.support,
                                   reach=int(offsets.max()) if len(offsets) else 0,
                                   n_starts=n_starts or len(self._inits()), input_bytes=held)

    def least_columns_limit(self, source: MatrixSource) -> int:
        """The smallest ``max_memory`` under which this estimator's fit from ``source``'s column blocks
        runs (its narrowest blocks, the libraries' working set, a matrix held beside it): what ``info``
        says a comparison from columns needs, the figure the fit's refusal is checked against.

        Parameters
        ----------
        source : MatrixSource
            The matrix known by its columns.

        Returns
        -------
        int
            Bytes.
        """
        return self._least_columns_need(source.n) + source.held_bytes

    def _least_columns_need(self, n: int, n_factors: int | None = None) -> int:
        """Bytes of the fit from column blocks at its narrowest (one column) and the libraries' working set:
        the one figure :meth:`least_columns_limit` says and :meth:`_check_columns_memory` refuses by (of
        ``n_factors`` factors where given, else of this estimator's structure)."""
        from . import _columns

        offsets, factors = self._structure(n)
        n_factors = factors if n_factors is None else n_factors
        _, history, libraries = _column_plan()
        return _columns.column_fit_memory(n, n_factors, len(offsets), 1, history=history) + libraries

    def _fit_columns(self, source: MatrixSource, fit_begin: float) -> "ChordSF":
        """Fit from ``source``'s column blocks (:mod:`._columns`): the path of a matrix whose
        in-memory fit is over the memory limit.  The error is left to the caller's scoring
        (:func:`~sfapprox.estimate_errors`), which looks at the columns honestly."""
        from . import _columns, _sketch, _solver

        n = source.n
        self._check_columns_memory(n, source.held_bytes, source.name)  # before any work
        offsets, n_factors = self._structure(n)
        shape = (n_factors, n, len(offsets))
        limit = room(source, self._max_memory_bytes)  # less what a matrix held in memory takes of it
        settings, history, libraries = _column_plan()
        width = _columns.column_width(n, n_factors, len(offsets), None if limit is None else limit - libraries,
                                      history=history)
        lbfgs_fits = limit is None or _columns.column_fit_memory(
            n, n_factors, len(offsets), width, history=settings.history) + libraries <= limit
        # rounds of sketches where their memory fits (fewer sketch columns where all do not)
        sketch_columns = _sketch.sketch_columns_within(n, n_factors, len(offsets), width, settings,
                                                       None if limit is None else limit - libraries)
        settings = dataclasses.replace(settings, sketch_columns=sketch_columns or settings.sketch_columns)
        # the steps' products run in the kernel's precision (float32: half the memory traffic); the values
        # and Adam's moments stay float64.  A float64 asked for applies to fits in memory: said, not ignored.
        self.offsets_, self.device_, self.dtype_, self.kernel_ = offsets, "cpu", settings.kernel_dtype, "columns"
        if self.dtype not in (None, "auto", settings.kernel_dtype):
            warnings.warn(f"dtype={self.dtype!r} applies to fits in memory; from column blocks SF computes its steps "
                          f"in {settings.kernel_dtype} (its values and their moments kept in float64)", UserWarning,
                          stacklevel=user_stacklevel())
        # so are the tolerances: Adam's steps, the rounds of sketches and L-BFGS by passes stop on the time and
        # iteration limits alone (an --ftol or --gtol given was silently ignored: the fit ran its whole limit)
        tolerances = {k: v for k, v, default in (("ftol", self.ftol, SF_FTOL), ("gtol", self.gtol, SF_GTOL))
                      if v != default}
        if tolerances:
            warnings.warn(f"{parameters(**tolerances)} {'apply' if len(tolerances) > 1 else 'applies'} to fits in "
                          "memory; from column blocks SF stops on its time and iteration limits alone", UserWarning,
                          stacklevel=user_stacklevel())
        saved = self._saved_start(shape, offsets)
        wanted = saved is None and self.init in ("auto", RANK_ONE) and self._rank_one_possible(n, offsets, n_factors)
        skipped = None  # why the rank-one start's pass was not made or not finished (said in params_)
        # (said on a display: the bar sat at "it 0" without a word for seconds on a large source)
        with phase(self.callback, "sampling columns for the start"):
            # a share of the time left (at N = 100,000 its 512 columns and their Gram took 7-13 s of 20)
            share = None if self.time_limit is None else \
                PILOT_TIME_SHARE * _timing.Deadline.after(self.time_limit, fit_begin).left()
            pilot = _pilot(source, self.random_state, top=wanted, seconds=share)
        fro = pilot.fro
        scale = self._scale(fro, n) if fro > 0 else 1.0
        # one start from columns: the identity for "auto" (and a rank-one start that did not fit the time)
        name = "saved" if saved is not None else "identity" if self.init in ("auto", RANK_ONE) else self.init
        start = None
        if saved is not None:
            start = saved / scale ** (1.0 / n_factors)
        elif wanted:
            with phase(self.callback, "rank-one start (a pass over the columns)"):
                start, skipped = self._column_rank_one(source, pilot, scale, offsets, n_factors, fit_begin,
                                                       settings.batch, width)
            name = RANK_ONE if start is not None else name
        if start is None:
            start = start_values([name], self.random_state, shape, self.init_noise)[name]
        governor = AdaptiveThreads(n * n // settings.groups, threads=self.threads, compiled=True)
        began = time.perf_counter()
        with governor:
            warm_up, compiled, warmed = self._warm_up_columns(settings, history, sketch_columns, lbfgs_fits, name)
            fit_begin += warm_up  # outside the time limit, inside the fit's seconds (said), as in memory
            columns = lambda a, b: source.columns(np.arange(a, b)) / scale  # noqa: E731
            # what takes the steps where L-BFGS by passes (history) does not: Adam, Adam and then what the time
            # allows, or rounds of sketches (asked for where not even the fewest columns fit: Adam's steps)
            run = None
            if history is None:
                run = {"auto": _columns.fit_columns_auto, "sketch": _sketch.fit_rounds if sketch_columns else None}.get(
                    settings.optimizer) or _columns.fit_columns
            adam_first = run in (_columns.fit_columns, _columns.fit_columns_auto)
            compared = name in ("saved", RANK_ONE)  # the start is compared with the end (_better_of)
            # under a time limit, Adam's first step and L-BFGS's first pass are taken only where their cost,
            # estimated on a first block, fits (they were taken whatever they cost: a pass at N = 100,000 is an
            # hour), and the comparison is sized by it; charged to the limit
            probe = _columns.first_block(columns, start, offsets, settings=settings, width=width) \
                if self.time_limit is not None and warmed and (adam_first or history is not None or compared) \
                else None
            # the result's assembly (the values packed as its operator holds them) comes after the fit's last
            # decision (1.5-2.9 s at N = 100,000, charged to no phase): its cost, timed on one factor, is kept
            deadline = _timing.Deadline.after(None if self.time_limit is None else
                                              self.time_limit - _assembly_seconds(start), fit_begin)
            limit_s = deadline.limit()
            pair_seconds = 0.0 if probe is None else 2.0 * FLOAT64_BLOCK_COST * probe.block_seconds
            if compared and limit_s is not None:  # its blocks' time kept from the fit, a share of it at most
                limit_s -= self._comparison_reserve(probe, limit_s, pair_seconds, settings, n, adam_first)
            better = (lambda values: _better_of(columns, start, values, offsets, width, n, self.random_state)) \
                if name in ("saved", RANK_ONE) else None  # noqa: E731
            report = self._column_progress(fro, began, governor.poll, shape, scale, better)
            if not warmed:
                # a stop while the kernels compiled: as one before the first step (the start kept, no step
                # taken, stop_reason_ "interrupted"), the in-memory fit's answer too
                fit = _columns.ColumnFit(values=np.array(start, dtype=np.float64),
                                         stop_reason=_solver.StopReason.INTERRUPTED)
            elif history is not None:
                fit = _columns.fit_columns_lbfgs(columns, start, offsets, settings=settings, width=width,
                                                 history=history, max_iter=self.max_iter, time_limit=limit_s,
                                                 callback=report, probe=probe, seed=self.random_state)
            else:
                extra = {"lbfgs_fits": lbfgs_fits, "rounds": _sketch.fit_rounds if sketch_columns else None} \
                    if settings.optimizer == "auto" else {}
                if adam_first:
                    extra["probe"] = probe
                fit = run(columns, start, offsets, settings=settings, width=width, max_iter=self.max_iter,
                          time_limit=limit_s, seed=self.random_state, callback=report, **extra)
            values, blocks = fit.values, None
            if compared and fit.steps > 0:
                # Adam restarts its moments near a good point, and its first steps can wander (from an
                # exact rank-one start, 0.17 after 5 steps): the start, where it is better, is kept; on the
                # blocks the limit holds (none: the fit's own choice)
                values, blocks = _compare_start(columns, start, fit.values, offsets, width, n, self.random_state,
                                                deadline, pair_seconds)
        self.threads_ = governor.used
        self.seconds_ = time.perf_counter() - began
        self.init_ = name
        self.n_iter_, self.n_evals_ = fit.steps, fit.evaluations  # (evaluations were the steps, an L-BFGS's too)
        self.stop_reason_ = fit.stop_reason
        self.loss_curve_ = [0.5 * v * scale**2 for _, v in fit.curve]
        self.starts_ = {name: {"iterations": fit.steps, "fro_error": fit.running_error * fro}}
        self.running_error_ = fit.running_error
        self._set_result(_assembled(values, scale ** (1.0 / n_factors)), None, fro)
        if values is start or fit.kept_start:  # (fit.kept_start: at its best multiple, _columns._end_at_best_multiple)
            self.params_["kept_start"] = True  # the start was better than where this run ended
            self.loss_curve_ = []  # the curve is the kept factors' run's: this run's steps were discarded
        held = isinstance(source, ArraySource) and type(source.array) is np.ndarray  # X in memory
        self.error_from_pass_ = False
        if held or (self.time_limit is None and isinstance(source, (ArraySource, SparseSource))):
            # scored exactly: X is in memory, or (sparse, mapped) no time limit bounds a pass over it
            matrix = source.array if isinstance(source, ArraySource) else source.matrix
            uncompiled = self._scores_uncompiled(n)

            def exact() -> tuple[float, float | None]:
                with self._products(self.operator_, uncompiled):
                    return operator_error(matrix, self.operator_, threads=self.threads)

            if self._scored(exact, (None, None)):
                self.error_from_pass_ = not held  # a comparison from columns need not score it again
        else:  # not known without a pass over X: the caller's estimate_errors scores it, within its time
            # share (a pass here, unlimited, took 263 s after a 10 s fit of a sparse 60,025-order matrix)
            self.fro_error_ = self.rel_error_ = None
        self._record_compiling(compiled)
        if blocks is not None and blocks < min(KEEP_START_BLOCKS, -(-n // width)):
            self.params_["start_compared_blocks"] = blocks  # fewer than asked: the time limit held no more
        if skipped:
            self.params_["rank_one_skipped"] = skipped
        if fit.note:  # what the fit did other than asked (Adam's steps where no pass of L-BFGS fitted)
            self.params_["optimizer_note"] = fit.note
        self.params_.update(path="columns", optimizer=fit.optimizer, epochs=round(fit.columns / n, 2),
                            batch=settings.batch, block_width=width, running_error=round(fit.running_error, 6),
                            **({"best_multiple": round(fit.multiple, 6)} if fit.multiple != 1.0 else {}),
                            **({"history": settings.history} if "lbfgs" in fit.optimizer else {}),
                            **(dict(zip(("sketch_columns", "holdout_columns"), _sketch.sketch_shape(n, width, settings)))
                               if "sketch" in fit.optimizer else {}))
        return self

    @staticmethod
    def _comparison_reserve(probe, limit_s: float, pair_seconds: float, settings, n: int, adam_first: bool) -> float:
        """The seconds a fit from columns keeps from its ``limit_s`` for the comparison of its start with its
        end (:func:`_compare_start`, ``pair_seconds`` a block): its blocks' estimate, at most
        :data:`KEEP_START_TIME_SHARE` of the limit, and none where keeping them leaves no room for Adam's
        first step that the whole limit has (the comparison then gets what the steps leave: at N = 100,000
        under 60 s it took every step away, a row of 13 s)."""
        from . import _columns

        reserve = min(KEEP_START_TIME_SHARE * limit_s, KEEP_START_BLOCKS * pair_seconds)
        if probe is not None and adam_first and not _columns._first_step_fits(
                probe, _timing.Deadline.after(limit_s - reserve), settings, n):
            return 0.0
        return reserve

    def _record_compiling(self, compiled: float | None) -> None:
        """``params_["compile_seconds"]``: the fit's compiling of its kernels (``compiled``; None where it loaded
        them or took under :data:`COMPILE_NOTE_SECONDS`) and its factory's before the fit (``_compiled_before``,
        :func:`~sfapprox.sf.methods.sf_estimator`'s, outside the time limit too: it was in no figure, and the
        row read as a limit not kept), where they come to :data:`COMPILE_NOTE_SECONDS` or more."""
        total = (compiled or 0.0) + self.__dict__.pop("_compiled_before", 0.0)
        if total >= COMPILE_NOTE_SECONDS:
            self.params_["compile_seconds"] = round(total, 2)

    def _warm_up_columns(self, settings, history: int | None, sketch_columns: int, lbfgs_fits: bool,
                         start: str) -> tuple[float, float | None, bool]:
        """Compile (or load) what the fit from columns may call (:func:`._columns.warm_up`), before its
        clock starts, as the in-memory fit does: on a fresh install the float32 kernels took about 5 s,
        out of the time limit (a fit of 20 s lost a quarter of it, one of 5 s all).  Returns its seconds,
        where it compiled for :data:`COMPILE_NOTE_SECONDS` or more those seconds (else None), and whether it
        finished (False: a stop came while it compiled, :func:`_warmed_unless_stopped`)."""
        from . import _columns, _kernels

        if not _kernels._numba_module():
            return 0.0, None, True
        # what may run: fit_columns_auto chooses by the time left, so all it may choose
        choose = self.time_limit is not None and self.max_iter > _columns.PROBE_STEPS
        rounds = bool(sketch_columns) and (settings.optimizer == "sketch" or settings.optimizer == "auto" and choose)
        # (Adam too where L-BFGS by passes has a time limit: where no pass fits, Adam's steps take the time)
        plan = dict(adam=history is None and not (settings.optimizer == "sketch" and rounds)
                    or history is not None and self.time_limit is not None,
                    lbfgs=history is not None or settings.optimizer == "auto" and choose and lbfgs_fits,
                    sketch=history is None and rounds, float64=start in ("saved", RANK_ONE))
        began = _timing.now()
        cached = _columns.kernels_cached(settings, **plan)
        with phase(self.callback, kernel_phase(cached)):
            warmed = _warmed_unless_stopped(lambda: _columns.warm_up(settings, **plan))
        seconds = _timing.now() - began
        return seconds, None if cached or not warmed or seconds < COMPILE_NOTE_SECONDS else seconds, warmed

    def _column_progress(self, fro: float, began: float, poll, shape, scale: float,
                         better: Callable[[np.ndarray], np.ndarray] | None = None):
        """The per-step callback of a fit from columns: the thread governor's poll, the user's
        callback (its ``fro_error`` the running estimate) and the checkpoints.  ``better(values)``: what a
        checkpoint saves of the iterate (a resumed fit: the better of it and its saved start, on the
        same column blocks, :func:`_better_of`; Adam near a good start wanders first, and a checkpoint
        of that replaced the better fit it started from)."""
        user = self.callback
        tick = self._checkpointer() if self.checkpoint is not None else (lambda save: None)
        stage = [None]  # the optimizer taking the steps, as it says (_columns._announce)

        def report(step: int, running: float, columns: int, values: np.ndarray) -> bool:
            poll()
            # "start": "columns" as before (users' callbacks may tell the path by it); "stage" says what steps
            stop = user is not None and bool(user({"iteration": step, "max_iter": self.max_iter,
                                                   "fro_error": running * fro, "elapsed": time.perf_counter() - began,
                                                   "start": "columns", "stage": stage[0],
                                                   "epochs": columns / shape[1]}))
            def save() -> None:  # (the comparison with a saved start is part of a checkpoint's cost)
                kept = values if better is None else better(values)
                self._save_checkpoint(kept * scale ** (1.0 / shape[0]), step, None,
                                      running=running * fro if kept is values else None)

            tick(save)
            return stop

        report.stage = lambda name: stage.__setitem__(0, name)  # type: ignore[attr-defined]
        return report

    # ------------------------------------------------------------- the rank-one start
    def _asks_rank_one(self) -> bool:
        """Whether ``init`` is ``"rank1"`` (an array of values is not compared: it is a saved start)."""
        return isinstance(self.init, str) and self.init == RANK_ONE

    def _rank_one_possible(self, n: int, offsets: np.ndarray, n_factors: int, butterfly: bool = False) -> bool:
        """Whether the rank-one start can be built here; ``init="rank1"`` where it cannot is refused."""
        possible = not butterfly and rank_one_applies(n, offsets, n_factors)
        if self._asks_rank_one() and not possible:
            what = ("the butterfly support" if butterfly else
                    f"offsets {offsets.tolist()} with {counted(n_factors, 'factor')}")
            # the start and its alternatives as the reader passes them: "init='rank1'" reached a command
            # line, whose user types --init rank1
            others = [parameter("init", start) for start in ("auto", "reference", "identity")]
            raise ParameterError(f"{parameter('init', RANK_ONE)} needs the offsets 1, 2, 4, ... below N (base 2) "
                                 f"and ceil(log2 N) factors at least; this fit has {what}: use "
                                 f"{', '.join(others[:-1])} or {others[-1]}")
        return possible

    def _with_rank_one(self, starts: dict, dense: np.ndarray, fro: float, scale: float, offsets: np.ndarray,
                       n_factors: int, butterfly: bool, room: bool, fit_begin: float) -> dict:
        """The starts of an in-memory fit with the rank-one start: alone for ``init="rank1"``; for
        ``"auto"`` a third start in the race where the support holds it, its solver state fits the
        memory limit (``room``) and it pays against the best constant (what the reference start
        approximates) and the identity's best multiple (:func:`._multistart.rank_one_pays`)."""
        n = dense.shape[0]
        if self.init not in ("auto", RANK_ONE) or not self._rank_one_possible(n, offsets, n_factors, butterfly):
            return starts
        if self.init == "auto" and not room:
            return starts
        norm2 = fro * fro
        others = min(multiple_error(float(dense.sum()), float(n * n), norm2),
                     multiple_error(float(np.trace(dense)), float(n), norm2))
        if self.init == "auto" and not rank_one_pays(rank_one_error(top_bound(dense), norm2, n), others, "memory"):
            return starts  # not even at the bound of its singular value: its power iterations are spared
        u, v, top = top_pair(lambda B: dense @ B, lambda B: dense.T @ B, n, n_iter=TOP_PAIR_ITER,
                             seed=self.random_state, deadline=_timing.Deadline.after(self.time_limit, fit_begin))
        if self.init == "auto" and not rank_one_pays(rank_one_error(top, norm2, n), others, "memory"):
            return starts
        root = math.sqrt(scale)  # in the fit's units, X / scale
        return {**starts, RANK_ONE: rank_one_values(u / root, v / root, offsets, n_factors)}

    def _column_rank_one(self, source: MatrixSource, pilot: "_Pilot", scale: float, offsets: np.ndarray,
                         n_factors: int, fit_begin: float, chunk: int,
                         width: int) -> tuple[np.ndarray | None, str | None]:
        """The rank-one start of a fit from columns (its values in the fit's units), or None, and why
        its pass was not made or not finished (None where it was, or where ``"auto"`` judged it would not pay).

        ``u`` is the pilot columns' top left singular vector and ``v = X^T u``
        (:func:`_rank_one_product`: the sparse product of a source held sparse or
        the product of its own of one that has it, else one pass over the columns,
        ``chunk`` at a time in pieces of ``width`` as the fit reads them: the best
        ``v`` for that ``u``).  For ``"auto"``
        only where it pays against the identity start (the one it would
        replace, at its best multiple; :func:`._multistart.rank_one_pays`), as
        the pilot columns estimate first (no pass where they say it would not)
        and ``X^T u`` then says.  Under a time limit the pass is priced before
        it starts (the pilot's columns' rate) and while it runs (its own): it
        takes at most :data:`RANK_ONE_TIME_SHARE` of the time left for
        ``"auto"``, :data:`RANK_ONE_ASKED_TIME_SHARE` for ``"rank1"`` asked for,
        and a pass that cannot is not made, or stopped, leaving the identity
        start (with a warning where ``"rank1"`` was asked for).
        """
        n = source.n
        auto = self.init == "auto"
        norm2 = pilot.fro ** 2
        identity = multiple_error(pilot.trace, float(n), norm2)
        if auto and not rank_one_pays(rank_one_error(pilot.top, norm2, n), identity, "columns"):
            return None, None
        share = RANK_ONE_TIME_SHARE if auto else RANK_ONE_ASKED_TIME_SHARE
        left = _timing.Deadline.after(self.time_limit, fit_begin).left()
        v, why = _rank_one_product(source, pilot, chunk, width, share * left, share)
        if v is None:
            if not auto:
                warnings.warn(f"{parameter('init', RANK_ONE)}: its pass over the columns of {source.name} did not fit "
                              f"the time limit; the fit starts from the identity: {why}", RuntimeWarning,
                              stacklevel=user_stacklevel())
            return None, why
        if auto and not rank_one_pays(rank_one_error(float(np.linalg.norm(v)), norm2, n), identity, "columns"):
            return None, None
        root = math.sqrt(scale)
        return rank_one_values(pilot.left / root, v / root, offsets, n_factors), None

    # ------------------------------------------------------------- helpers
    def _work(self, n: int, n_factors: int) -> int:
        """Numbers one kernel operation touches: what decides whether threads pay (see ``_threads``)."""
        from . import _butterfly, _kernels

        if self.support == "butterfly":
            return n * min(_butterfly.PANEL, n)
        return _kernels.operation_numbers(n, _kernels.select_kernel(n, "cpu")[1])

    def _check_init(self) -> None:
        """Refuse an ``init`` text that is neither a named start nor an existing file, before any work
        (a typo such as "bogus" would otherwise be read as a file and reported as a missing one)."""
        if not isinstance(self.init, (str, os.PathLike)) or self.init in NAMED_INITS:
            return  # other types: the declared constraints name them
        if not os.path.isfile(self.init):
            from ..io._common import special_file

            special = special_file(self.init)
            what = "a directory" if os.path.isdir(self.init) else f"a {special}" if special else "no such file"
            raise ParameterError(f"init must be 'auto', 'reference', 'identity' or 'rank1', an array of factor "
                                 f"values or an existing factors file (.h5); {os.fspath(self.init)!r} is neither "
                                 f"({what})")

    def _inits(self) -> list[str]:
        if isinstance(self.init, str) and self.init in NAMED_INITS:
            return ["reference", "identity"] if self.init == "auto" else [self.init]
        return ["saved"]

    def _saved_start(self, shape: tuple[int, int, int], offsets: np.ndarray) -> np.ndarray | None:
        """The values ``init`` gives (a saved fit or an array), checked against this fit's structure."""
        self._iterations_before = 0  # a saved fit's own, and those before it (a resume of a resume)
        if isinstance(self.init, str) and self.init in NAMED_INITS:
            return None
        if isinstance(self.init, np.ndarray):
            values, what = np.asarray(self.init, dtype=np.float64), "init"
        else:
            from ..factors import load_factors  # here: factors loads h5py

            saved = load_factors(self.init)
            op = saved.operator
            # the file as its reader named it: --init FILE on the command line, init='FILE' to Python
            what = parameter("init", os.fspath(self.init))
            # what to do said too: these two named the mismatch alone
            if not isinstance(op, ChordOperator):
                raise ParameterError(f"{what} holds a {saved.kind} fit, not SF factors: give a file SF's fit wrote "
                                     f"(fit --out, a checkpoint), or fit without {parameter('init')}")
            if op.shape[0] != shape[1]:
                raise ParameterError(f"{what} is a fit of a {op.shape[0]:,} x {op.shape[0]:,} matrix; "
                                     f"this one is {shape[1]:,} x {shape[1]:,}: give a fit of a matrix of this size, "
                                     f"or fit without {parameter('init')}")
            if op.support != self.support or not np.array_equal(op.offsets, offsets) or \
                    op.values.shape[0] != shape[0]:
                # a budget (fit_matrix's) chose this fit's structure: the options that give the saved one
                # cannot be given beside it ("fit with --factors 6" was refused with --budget)
                budget = self.__dict__.get("_budget")
                chosen = f", chosen by {parameter('budget', budget)}," if budget is not None else ""
                raise ParameterError(f"{what} has support {op.support} with offsets {op.offsets.tolist()} and "
                                     f"{counted(op.values.shape[0], 'factor')}; this fit's{chosen} are {self.support}, "
                                     f"{offsets.tolist()} and {shape[0]}{_structure_hint(op, budget)}")
            values = np.asarray(op.values)
            self._iterations_before = _iterations_of(saved.fit)
        if values.shape != shape:
            raise ParameterError(f"{what}: factor values of shape {shape_text(values.shape)}, but this fit's structure is "
                                 f"{shape_text(shape)} (M factors, N rows, K values per row)")
        if not np.isfinite(values).all():
            raise ParameterError(f"{what}: the factor values must be finite")
        # Finite values whose product overflows (values of 1e300) made a fit that ended at once on a
        # non-finite loss, "ok" with an infinite error: a product with one random vector tells (O(N K M)).
        op = self._operator(values, offsets)
        with np.errstate(over="ignore", invalid="ignore"):
            probe = op @ np.random.default_rng(0).standard_normal(shape[1])
        if not (np.isfinite(probe).all() and np.abs(probe).max(initial=0.0) <= MAX_START_ENTRY):
            finite = np.abs(probe[np.isfinite(probe)])
            reach = f"{float(finite.max()):.3g} and beyond" if finite.size and not np.isfinite(probe).all() else \
                f"{float(finite.max()):.3g}" if finite.size else "infinity"
            raise ParameterError(f"{what}: the factors' product overflows (its entries reach {reach}): "
                                 f"not a start; fit without {parameter('init')}")
        if not probe.any():
            # A zero product (the factors of a zero matrix's fit, or an array of zeros) has a zero gradient
            # once two factors are zero: the fit stopped at its start, "gtol" with relative error 1, exit 0.
            raise ParameterError(f"{what}: the factors' product is the zero matrix (a fit of a zero matrix?), "
                                 f"from which the fit cannot move: not a start; fit without {parameter('init')}")
        return values.copy()

    def _save_checkpoint(self, values: np.ndarray, iterations: int, error: float | None,
                         running: float | None = None) -> None:
        """Write ``values`` (in X's units) to ``checkpoint``, atomically, with how far the fit got: the
        factors' error where it is known (in memory), else the fit's running estimate, recorded as such
        (``running_fro_error``: over the last steps' blocks, while the values moved; not these factors')."""
        from ..factors import save_factors  # here: factors loads h5py

        op = self._operator(values)
        path, expect = self.checkpoint_written_
        known = {"fro_error": float(error)} if error is not None else \
            {"running_fro_error": float(running)} if running is not None else {"kept_start": True}
        try:
            save_factors(path, op, kind=self.method_name, force=expect, source=self.__dict__.get("_checkpoint_source"),
                         fit={"checkpoint": True, "iterations": int(iterations), **known,
                              **({"iterations_before": self._iterations_before} if self._iterations_before else {}),
                              # a start of another matrix (fit_matrix's note): its iterations were not this
                              # matrix's, and info said "(+ N before the resume)" of the checkpoint
                              **({"init_note": note} if (note := self.__dict__.get("_init_note")) else {})},
                         settings={k: v for k, v in self.get_params().items() if not callable(v) and k != "init"})
        except OutputExistsError as exc:
            # Another file took the checkpoint's name during the fit: it is left alone, and this fit's
            # checkpoints go on beside it (they replaced it before).  Said in words of its own: the write's
            # "(use --force to overwrite)" was said to those who gave --force (it allows replacing what was
            # there when the fit started, never a file that came during it).
            warnings.warn(f"{exc.path}: another file took its name during the fit, so it was left untouched; this "
                          f"checkpoint was saved as {exc.kept} instead, and the next checkpoints go there too",
                          RuntimeWarning, stacklevel=user_stacklevel())
            path = exc.kept
        except OutputError as exc:
            # A full disk (or a folder gone) hours into a fit ended it, the factors in memory lost with it:
            # the fit goes on, the last checkpoint written stays as it was, and the next one tries again.
            warnings.warn(f"checkpoint not written: {exc}; the fit goes on (the last checkpoint stays as it "
                          "was) and the next checkpoint tries again", RuntimeWarning, stacklevel=user_stacklevel())
            return
        self.checkpoint_written_ = (path, FileStamp.of(path) or False)
        self._checkpoint_iterations = int(iterations)  # what the file there holds (fit_matrix's failure says it)

    def _checkpointer(self) -> Callable[[Callable[[], None]], None]:
        """``tick(save)``: calls ``save`` once every ``checkpoint_every`` seconds (the checkpoints of both
        paths), and never so often that saving takes over :data:`CHECKPOINT_SHARE` of the fit's time: the
        next one comes :data:`CHECKPOINT_SHARE`'s inverse times the last one's seconds after it began at the
        least.  (An interval shorter than a write, ``--checkpoint-every 0.001``, wrote after every
        iteration: ~50 ms a write at N = 30, a fifth of the fit.)"""
        import h5py  # noqa: F401  (here, not in the first save: its 0.2 s import stretched the next wait to 2 s)

        last = [_timing.now(), 0.0]  # when the last save began, and the least wait from there to the next

        def tick(save: Callable[[], None]) -> None:
            if _timing.now() - last[0] < max(self.checkpoint_every, last[1]):
                return
            began = _timing.now()
            save()
            last[:] = [began, (_timing.now() - began) / CHECKPOINT_SHARE]

        return tick

    def _checkpointing(self, report, states: dict, shape, scale: float, offsets: np.ndarray):
        """``report``, and every ``checkpoint_every`` seconds the best factors so far saved to ``checkpoint``."""
        tick = self._checkpointer()

        def save() -> None:
            best = min(states.values(), key=lambda st: st["best_loss"])
            values = best["best_x"].view(shape).double().cpu().numpy() * scale ** (1.0 / shape[0])
            self._save_checkpoint(values, sum(int(st["n_iter"]) for st in states.values()),
                                  scale * math.sqrt(2.0 * max(best["best_loss"], 0.0)))

        def wrapped(name: str, state: dict) -> bool:
            stop = report(name, state)
            tick(save)
            return stop

        return wrapped

    def _options(self, max_iter: int, time_limit: float | None):
        from ._solver import LBFGSOptions

        # A user's callback is called after each iteration, unless it says a call per run of them will do
        return LBFGSOptions(max_iter=max_iter, time_limit=time_limit, ftol=self.ftol, gtol=self.gtol,
                            history_size=self.history_size,
                            coarse_callback=self.callback is None or coarse_progress(self.callback))

    def _scale(self, fro: float, n: int) -> float:
        if isinstance(self.scale, str):
            return fro / {"sqrt_n": math.sqrt(n), "n": float(n), "fro": 1.0}[self.scale]
        return float(self.scale)

    def _check_butterfly(self, n: int) -> int:
        """The number of butterfly factors for N (``log2 N``); ParameterError for what does not apply."""
        check_butterfly_size(n)
        m = butterfly_n_factors(n)
        if self.n_factors is not None and self.n_factors != m:
            raise ParameterError(
                f"the butterfly support of a {n:,} x {n:,} matrix has exactly log2 N = {counted(m, 'factor')}, "
                f"got {parameter('n_factors', self.n_factors)}; leave {parameter('n_factors')} out"
            )
        self._check_butterfly_base()
        return m

    def _check_butterfly_base(self) -> None:
        """ParameterError for a base other than 2 with the butterfly support (checked without the matrix:
        the command line refuses it before loading one)."""
        check_butterfly_base(self.base)

    @staticmethod
    def _check_support(n: int, offsets: np.ndarray, n_factors: int) -> None:
        if not support_is_full(n, offsets, n_factors):
            fewest = min_full_factors(n, offsets)
            raise ParameterError(
                f"{counted(n_factors, 'factor')} with offsets {offsets.tolist()} cannot cover every entry of a "
                f"{n:,} x {n:,} matrix; use at least {counted(fewest, 'factor')}"
            )

    def _memory_limit(self, device) -> int | None:
        limit = self._max_memory_bytes
        if limit is not None:
            return limit
        if device.type == "cuda":
            import torch

            free, _ = torch.cuda.mem_get_info(device)
            return int(0.9 * free)
        return None  # check_memory's default: a share of the physical memory

    def _progress(self, scale: float, start: float, states: dict, poll):
        """The per-iteration callback of the starts: the thread governor's poll, then the user's
        callback with the iterations of every start so far and which start is running."""
        user = self.callback

        def report(name: str, state: dict) -> bool:
            poll()
            if user is None:
                return False
            info = {
                "iteration": sum(int(st["n_iter"]) for st in states.values()),
                "max_iter": self.max_iter,
                "fro_error": scale * math.sqrt(2.0 * max(state["loss"], 0.0)),
                "elapsed": time.perf_counter() - start,
                "start": name,
            }
            return bool(user(info))

        return report

    def _finish_zero(self, init: np.ndarray, fro: float) -> "ChordSF":
        # The zero matrix is reproduced exactly by zero factors: no optimisation.
        self.seconds_ = 0.0
        self.loss_curve_ = [0.0]
        self.n_iter_ = 0
        self.n_evals_ = 0
        self.stop_reason_ = "zero_matrix"
        self.init_ = self.kernel_ = "none"
        self.threads_ = None
        self.starts_ = {}
        self._set_result(np.zeros_like(init), None, fro)
        self._record_compiling(None)  # (its factory's, where it compiled: in no figure, and left on the estimator)
        return self

    def _operator(self, values: np.ndarray, offsets: np.ndarray | None = None) -> ChordOperator:
        """The product of ``values`` in this fit's structure (its offsets, or ``offsets`` before they are set;
        the butterfly's positions need none)."""
        if self.support == "butterfly":
            return ChordOperator(values, support="butterfly")
        return ChordOperator(values, self.offsets_ if offsets is None else offsets, support=self.support)

    def _set_result(self, values: np.ndarray, dense: np.ndarray | None, fro: float, device=None) -> None:
        self.factors_ = values
        self.operator_ = self._operator(values)
        self.n_stored_ = self.operator_.n_stored
        self.params_ = {
            "support": self.support,
            "n_factors": int(values.shape[0]),
            "offsets": self.offsets_.tolist(),
            "base": None if self.support == "butterfly" else self.base,  # its positions use no base
            "iterations": self.n_iter_,
            "evaluations": self.n_evals_,
            "stop_reason": self.stop_reason_,
            "init": self.init_,
            "device": self.device_,
            "dtype": self.dtype_,
            "threads": self.threads_,
            **(self._structure_choice or {}),
            # a resumed fit's iterations are this run's: those of the fit it started from are said apart
            **({"iterations_before": self._iterations_before} if getattr(self, "_iterations_before", 0) else {}),
        }
        if dense is None:
            self.fro_error_, self.rel_error_ = 0.0, None
            return

        sums = {}  # <X, P> and ||P||^2, from the scoring's own pass: the best multiple's, where it is needed
        # the scoring's products on scipy's sparse factors (_scores_uncompiled), a local: an attribute of it
        # outlived the fit on the estimator
        uncompiled = False

        def score() -> tuple[float, float | None]:
            nonlocal uncompiled
            on_device = None
            if device is not None and device.type != "cpu" and self.support != "butterfly":
                on_device = product_error_and_multiple(values, self.offsets_, dense, fro, device)
            # else (and where the GPU has no room for it) the CPU's product
            if on_device is None:
                uncompiled = self._scores_uncompiled(dense.shape[0])
                if not uncompiled:
                    self._apply_kernels_ready(dense.shape[0])
                with self._products(self.operator_, uncompiled):
                    on_device = operator_error_and_multiple(dense, self.operator_, fro, threads=self.threads)
            err, rel, sums["inner"], sums["square"] = on_device
            return err, rel

        # Unscored, the optimizer's own figure of the best point (in the fit's dtype) stands for it
        measured = self.starts_.get(self.init_, {}).get("fro_error")
        unscored = (None, None) if measured is None else (measured, measured / fro if fro > 0 else None)
        began = _timing.now()
        try:
            if self._scored(score, unscored) and self.rel_error_ is not None and self.rel_error_ > 1.0:
                self._scored(lambda: self._at_best_multiple(values, dense, fro, sums["inner"], sums["square"],
                                                            uncompiled))
        finally:
            # the final scoring (its apply kernels' compiling on a fresh install included): after the optimizer,
            # in no fit_seconds (seconds_), told apart by fit_matrix's summary as compare's row tells its whole turn
            self.params_["scoring_seconds"] = _timing.now() - began

    def _scores_uncompiled(self, n: int) -> bool:
        """Whether the final scoring of an ``n x n`` product runs on scipy's sparse factors rather than the
        compiled apply kernels: where the fit was stopped (Ctrl-C or SIGTERM, during the optimizer or
        before it) and numba would first have to compile them (a fresh install).

        Compiling them took 9-17 s after the stop on a 2-core machine, and the stop waited for it; scipy's
        products give the same errors within rounding, 1.2-5x slower than compiled ones (a fraction of a
        second at N = 1,100).  Up to ``TORCH_DENSE_MAX_N`` the fitting kernels form the product: no compiling.
        """
        from ..operators import _chord_apply, chord
        from ._solver import StopReason

        if n <= chord.TORCH_DENSE_MAX_N:
            return False
        return _chord_apply.compiles_after_stop(self.stop_reason_ == StopReason.INTERRUPTED,
                                                self.support == "butterfly")

    @staticmethod
    def _products(operator: ChordOperator, uncompiled: bool) -> contextlib.AbstractContextManager:
        """Where ``operator``'s products run during the final scoring: on scipy's sparse factors where
        ``uncompiled`` (:meth:`_scores_uncompiled` said so), else where they always do."""
        return operator._stack.uncompiled() if uncompiled else contextlib.nullcontext()

    def _apply_kernels_ready(self, n: int) -> None:
        """The compiled apply kernels the CPU scoring of an ``n x n`` product runs, compiled (or loaded)
        first under the display's phase (``"compiling kernels (first run)"``): on a fresh install the
        scoring compiled them for about 9 s after the last iteration, under a bar that stood still.
        Up to ``TORCH_DENSE_MAX_N`` the product is formed by the fitting kernels, which need none."""
        from ..operators import _chord_apply, chord

        if n <= chord.TORCH_DENSE_MAX_N:
            return
        butterfly = self.support == "butterfly"
        doing = _chord_apply.block_kernel_phase(butterfly)
        if doing is not None:
            began = _timing.now()
            with phase(self.callback, doing):
                _chord_apply.warm_up_block_kernel(butterfly)
            seconds = _timing.now() - began
            # inside scoring_seconds, told apart as the fit's own compiling is in compile_seconds (a fresh
            # install's ~4 s here were in no figure: the row's seconds could not be accounted for)
            if doing == kernel_phase(False) and seconds >= COMPILE_NOTE_SECONDS:
                self.params_["scoring_compile_seconds"] = round(seconds, 2)

    def _scored(self, score: Callable[[], tuple[float, float | None] | None],
                unscored: tuple[float | None, float | None] | None = None) -> bool:
        """Run the final scoring ``score`` (which returns the errors or sets them itself); False where a
        Ctrl-C or SIGTERM cut it short.

        The fit is finished by then: a stop during its scoring (minutes at N = 16,384 on the CPU) keeps the
        factors, as a stop during the fit does, with ``stop_reason_`` ``"interrupted"``,
        ``params_["scoring"]`` ``"interrupted"``, and ``unscored`` as the errors (the optimizer's own
        figure where there is one; None: not known).  Without it the stop lost the finished fit.
        """
        try:
            # the bar stood at the last iteration, unnamed, through the scoring's seconds
            with phase(self.callback, "scoring"):
                errors = score()
        except KeyboardInterrupt:
            self._scoring_stopped(unscored)
            return False
        if errors is not None:
            self.fro_error_, self.rel_error_ = errors
        return True

    def _scoring_stopped(self, unscored: tuple[float | None, float | None] | None = None) -> None:
        """Record a stop during the final scoring (see :meth:`_scored`; also ``fit_matrix``'s scoring from columns)."""
        from ._solver import StopReason

        self.stop_reason_ = self.params_["stop_reason"] = StopReason.INTERRUPTED
        self.params_["scoring"] = "interrupted"
        if unscored is not None:
            self.fro_error_, self.rel_error_ = unscored

    def _at_best_multiple(self, values: np.ndarray, dense: np.ndarray, fro: float, inner: float, square: float,
                          uncompiled: bool = False) -> None:
        """A product further from X than the zero matrix (a fit the time limit stopped at its start: rel 1.53
        recorded "ok") is handed back at its best multiple ``c = <X, P> / ||P||^2``, whose error is at most
        ``||X||``, as a fit from columns already is.

        ``inner = <X, P>`` and ``square = ||P||^2`` come from the scoring's own pass
        (:func:`~sfapprox.metrics.operator_error_and_multiple`), and so does the error at ``c``,
        ``sqrt(||X||^2 - <X, P>^2 / ||P||^2)``: two more passes over X and the product (4.4-4.7 s after a
        10-s fit at N = 8,192, no time kept for them) made sf-symmetric's call 1.5 times its limit.  Only
        where that error is under :data:`MULTIPLE_SCORED_BELOW` of ``||X||`` (the difference of two near
        equal squares: its last digits lost) is the scaled product scored by a pass, on the products the
        first scoring ran on (``uncompiled``: :meth:`_products`).
        """
        c = inner / square if square > 0 else 0.0
        scaled = values.copy()
        scaled[0] *= c  # the product is linear in each factor
        operator = self._operator(scaled)
        rel = multiple_error(inner, square, fro * fro)
        if rel < MULTIPLE_SCORED_BELOW:
            with self._products(operator, uncompiled):
                errors = operator_error(dense, operator, fro, threads=self.threads)
        else:
            errors = (rel * fro, rel)
        # set together, after any scoring: a stop during it leaves the unscaled product and its errors
        self.factors_, self.operator_ = scaled, operator
        self.fro_error_, self.rel_error_ = errors
        self.params_["best_multiple"] = round(c, 6)

    def to_dense(self) -> np.ndarray:
        """The fitted product as a dense ``N x N`` array.

        Returns
        -------
        numpy.ndarray
            The product of the fitted factors, of shape ``(N, N)``.
        """
        return self.operator_.to_dense()


def _warm_up_kernels(dtype, objective) -> bool:
    """Compile (or load from numba's cache) the kernel and L-BFGS iterations an in-memory CPU fit in
    ``dtype`` runs; False where a ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM's handler) stopped it
    (:func:`_warmed_unless_stopped`)."""
    from . import _kernels, _solver

    return _warmed_unless_stopped(lambda: _kernels.warm_up_numba(dtype), lambda: _solver.warm_up(dtype, objective))


def _warmed_unless_stopped(*warm_ups: Callable[[], None]) -> bool:
    """Run ``warm_ups`` (compiling, or loading from numba's cache, what a fit will call): True, or False
    where a ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM's handler) stopped them, raw or wrapped by numba.

    On a fresh install this takes seconds (8-17 s on 2 busy cores); a stop then surfaced from deep in
    numba's compiler, where one a moment later (in the iterations) returns the fit with its best factors:
    both fits (in memory, from column blocks) then return their start as stopped.
    A compile cut short leaves numba's cache usable: numba writes each compiled function after it compiled,
    to a temporary file moved in place, then its index entry (numba 0.6x), so a stop leaves at most a stray
    temporary file, never a half-written entry; the next run compiles what is missing.
    """
    from .._compiled import raise_interrupt

    try:
        try:
            for warm_up in warm_ups:
                warm_up()
        except Exception as exc:  # noqa: BLE001 - numba can wrap the stop in a SystemError
            raise_interrupt(exc)
            raise
    except KeyboardInterrupt:
        return False
    return True


def _column_plan():
    """The fit from column blocks' settings (:data:`COLUMN_SETTINGS` or the defaults), the L-BFGS history its
    memory is checked for (None: Adam's memory is the need) and the libraries' working set beside it: what
    the fit checks and what :meth:`ChordSF.least_columns_limit` says it needs, computed alike."""
    from . import _columns

    settings = COLUMN_SETTINGS or _columns.ColumnSettings()
    history = settings.history if settings.optimizer == "lbfgs" else None
    return settings, history, LIBRARY_WORKING_SET + COMPILED_WORKING_SET


def _iterations_of(fit: dict) -> int:
    """The iterations that produced a saved fit's factors: its run's (``iterations``; ``n_iter`` in a fit
    saved from an estimator) and those before it (``iterations_before``); 0 where it does not say.

    A run that ended worse than its start kept the start (``kept_start``, the final file's and its
    checkpoints' alike): its own steps were discarded, so its factors are those of the iterations before
    it alone.  They were counted, and a resume of such a file said "(+ 3,341 before the resume)" of a start
    that 300 had made.  Iterations of a fit of another matrix (a record with an ``init_note``: its start
    was such a fit) are not this matrix's fit's, and are not counted.

    Parameters
    ----------
    fit : dict
        The saved fit's record (:attr:`~sfapprox.factors.SavedFactors.fit`).

    Returns
    -------
    int
        The count a resume of it reports as the iterations before it.
    """
    def count(key: str) -> int:
        # whole counts only, as info reads them (describe._count): a record edited to NaN or Infinity (JSON
        # that Python reads) ended --init in an OverflowError traceback, and 1e308 was said as 309 digits
        value = fit.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    own = 0 if fit.get("kept_start") is True else count("iterations") or count("n_iter")
    # A fit whose start was another matrix's (``init_note``) resumed nothing: the iterations before it were
    # that matrix's fit, and a resume of it said "(+ 60 before the resume)" where 40 of them were
    return own + (0 if fit.get("init_note") else count("iterations_before"))


def product_error(values: np.ndarray, offsets: np.ndarray, dense, fro: float,
                  device) -> tuple[float, float | None] | None:
    """Deprecated: ``product_error_and_multiple(...)[:2]`` (the product's two errors); kept for scripts for one
    release, with a warning.

    Parameters
    ----------
    values, offsets, dense, fro, device
        As :func:`product_error_and_multiple`'s.

    Returns
    -------
    tuple of (float, float or None), or None
        ``||X - P||_F`` and its ratio to ``fro``; None when the device has no room.
    """
    warnings.warn("sfapprox.sf.model.product_error is deprecated: use product_error_and_multiple(...)[:2]; the "
                  "old name will be removed in a later release", DeprecationWarning, stacklevel=2)
    scored = product_error_and_multiple(values, offsets, dense, fro, device)
    return None if scored is None else scored[:2]


def product_error_and_multiple(values: np.ndarray, offsets: np.ndarray, dense, fro: float,
                               device) -> tuple[float, float | None, float, float] | None:
    """``||X - W_1 ... W_M||_F`` and its ratio to ``fro``, then ``<X, P>`` and ``||P||^2`` of the product ``P``
    formed for them (its best multiple's, as :func:`~sfapprox.metrics.operator_error_and_multiple` gives on
    the CPU), the product formed on ``device`` in float64.

    What a GPU fit scores itself with: the same numbers as :func:`~sfapprox.metrics.operator_error` on the
    CPU, in about 2 s instead of the CPU's ~40 s (as it formed the product then) at N = 16,384 (measured
    after a 60-s fit on an H100, which the time limit did not see coming).  None when the device has no
    room for three ``N x N`` float64 buffers (the caller then scores on the CPU)."""
    import torch

    from . import _kernels

    try:
        product = _kernels.chord_product(torch.as_tensor(values, dtype=torch.float64, device=device),
                                         [int(d) for d in offsets])
        target = torch.as_tensor(dense.toarray() if hasattr(dense, "toarray") else dense,
                                 dtype=torch.float64, device=device)
        inner, square = float(torch.vdot(product.reshape(-1), target.reshape(-1))), float(torch.vdot(
            product.reshape(-1), product.reshape(-1)))
        product.sub_(target)
        err = float(torch.linalg.vector_norm(product))
    except torch.cuda.OutOfMemoryError:
        return None
    return err, (err / fro if fro > 0 else None), inner, square


def _assembled(values: np.ndarray, factor: float) -> np.ndarray:
    """``values * factor`` as the result's operator holds them (its packed layout, :func:`pack`; the
    ``(M, N, K)`` view returned): one array written, where the product and then the operator's packing
    wrote two."""
    return unpack_view(pack(values, factor))


def _assembly_seconds(values: np.ndarray) -> float:
    """What :func:`_assembled` will take on values of ``values``' shape: its first factor's, timed, times
    their number (each factor is a pass over ``N K`` numbers of its own)."""
    began = _timing.now()
    pack(values[:1], 1.0)
    return (_timing.now() - began) * values.shape[0]


#: Random columns the fit from columns reads first: its scale, and the rank-one start's choice.
PILOT_COLUMNS = 512
#: Under a time limit the pilot times this many of its columns (and, for the rank-one start, their Gram)
#: first, and reads as many as :data:`PILOT_TIME_SHARE` of the time left allows, these at least.
PILOT_FIRST_COLUMNS = 64
#: Share of a fit's time left that its pilot columns may take: at N = 100,000 the 512 columns and their
#: Gram (26 GFlop) took 7-13 s of a 20 s limit on a busy machine.
PILOT_TIME_SHARE = 0.05
#: ``init="auto"`` from columns makes the rank-one start's pass only when it takes at most this share
#: of the time left (the fit's own passes are what the rest buys).
RANK_ONE_TIME_SHARE = 0.25
#: ``init="rank1"`` asked for from columns makes its pass only when it takes at most this share of the time
#: left: the start asked for, and the other half for the steps from it.  It had the whole limit: at N = 100,000
#: (a dense block pass over a sparse graph) the pass took 18 of 20 s, was cut, and the row ended at 30-34 s
#: with the identity start (``benchmarks/results/sf_setup_guards_rank1.md``).
RANK_ONE_ASKED_TIME_SHARE = 0.5


@dataclass(frozen=True)
class _Pilot:
    """What :func:`_pilot` reads off random columns ``X[:, J]`` (scaled by ``N / |J|``; exact where ``J``
    is every column): ``||X||_F``, ``tr X``, ``top`` (``s1`` of ``X[:, J]`` scaled: an estimate of
    ``X``'s, high where the columns are few), ``left`` (its left singular vector, unit length), the
    seconds the columns took and how many they were (``|J|``)."""

    fro: float
    trace: float
    top: float
    left: np.ndarray
    seconds: float
    columns: int


def _pilot(source: MatrixSource, seed: int, columns: int = PILOT_COLUMNS, *, top: bool = False,
           seconds: float | None = None) -> _Pilot:
    """Read ``columns`` random columns of ``source`` (all where there are no more): the fit's scale, which
    only conditions the optimisation (any estimate within a few times will do), the identity start's
    best multiple and, with ``top``, the rank-one start's left vector and estimated error (``top`` 0
    and ``left`` empty without).  With ``seconds``, fewer where they would take longer
    (:func:`_pilot_draw`), and their Gram and its top eigenvector on as many of them as the rest of
    ``seconds`` holds (:func:`_pilot_top`): priced by its first columns', their read and Gram timed
    before, the pilot overran its share under load (6-10 s of 3 at N = 100,000)."""
    n = source.n
    deadline = _timing.Deadline.after(seconds)
    gram_rate = None  # seconds a pair of columns' product in their Gram, where the draw timed one
    if n <= columns:
        J = np.arange(n)
    else:
        J, gram_rate = _pilot_draw(source, np.random.default_rng([seed, _streams.SF_PILOT]).choice(
            n, size=columns, replace=False), top, seconds)
    began = _timing.now()
    block = source.columns(J)  # (in the drawn order: any first ones of them are a random sample too)
    took = _timing.now() - began
    share = n / J.size
    flat = block.ravel(order="K")  # (np.vdot copied a sparse source's F-ordered block: 4 s of 7 at N = 100,000)
    fro = float(np.sqrt(np.dot(flat, flat) * share))
    trace = float(block[J, np.arange(J.size)].sum() * share)
    if not top:
        return _Pilot(fro=fro, trace=trace, top=0.0, left=np.zeros(0), seconds=took, columns=J.size)
    s1, left = _pilot_top(block, deadline if seconds is not None else None, gram_rate)
    return _Pilot(fro=fro, trace=trace, top=s1, left=left, seconds=took, columns=J.size)


def _pilot_top(block: np.ndarray, deadline: _timing.Deadline | None,
               rate: float | None) -> tuple[float, np.ndarray]:
    """``s1`` (scaled to all ``N`` columns) and the top left singular vector of ``block``'s columns, or of
    as many of its first ones as ``deadline`` holds: their Gram is made :data:`PILOT_FIRST_COLUMNS` rows
    at a time, each priced before it starts at the last one's rate (seconds a column pair; the first at
    ``rate``, where given) with the product of its eigenvector (a column each), and the first ones made
    whatever they cost (their Gram was timed before: the least the pilot reads)."""
    n, k = block.shape
    gram = np.empty((k, k))
    done = 0
    while done < k:
        stop = min(k, done + PILOT_FIRST_COLUMNS)
        pairs = (stop - done) * stop
        if done and deadline is not None and rate is not None and not deadline.fits(rate * (pairs + stop)):
            break
        began = _timing.now()
        # the rows done .. stop of the Gram against every column so far (its lower part), mirrored above
        gram[done:stop, :stop] = block[:, done:stop].T @ block[:, :stop]
        gram[:done, done:stop] = gram[done:stop, :done].T
        rate = (_timing.now() - began) / pairs
        done = stop
    values, vectors = np.linalg.eigh(gram[:done, :done])  # B w / |B w|, w its top eigenvector
    left = block[:, :done] @ vectors[:, -1]
    length = float(np.linalg.norm(left))
    left = left / length if length > 0 else np.full(n, 1.0 / math.sqrt(n))
    return float(np.sqrt(max(values[-1], 0.0) * n / done)), left


def _pilot_draw(source: MatrixSource, drawn: np.ndarray, top: bool,
                seconds: float | None) -> tuple[np.ndarray, float | None]:
    """The pilot's columns: ``drawn``, or, where reading them (and with ``top`` their Gram, which grows as
    their square) would take more than ``seconds``, its first ones that fit (:data:`PILOT_FIRST_COLUMNS`
    at least), as the first of them took; and, where timed, the seconds a column pair of their Gram
    took.  Those first ones are read twice (the pilot then reads its columns in one piece, the same
    numbers as without a limit)."""
    first = min(PILOT_FIRST_COLUMNS, drawn.size)
    if seconds is None or first == drawn.size:
        return drawn, None
    began = _timing.now()
    block = source.columns(drawn[:first])
    read = _timing.now() - began
    gram = 0.0
    if top:
        began = _timing.now()
        block.T @ block
        gram = _timing.now() - began
    left = max(0.0, seconds - (read + gram))
    # k = r * first columns take read * r + gram * r^2 seconds: the largest r within what is left
    r = ((math.sqrt(read * read + 4.0 * gram * left) - read) / (2.0 * gram) if gram > 0 else
         left / read if read > 0 else math.inf)
    return drawn[:int(min(drawn.size, max(first, first * r)))], (gram / (first * first) if top else None)


def _rank_one_product(source: MatrixSource, pilot: _Pilot, chunk: int, width: int, seconds: float,
                      share: float) -> tuple[np.ndarray | None, str | None]:
    """``X^T u`` for the rank-one start (``u``: ``pilot.left``) within ``seconds`` (``share`` of the time left),
    and None where it is not, with why.

    A source held sparse gives it by its sparse product, ``O(nnz)``: the pass over its dense column blocks
    took 18 s of a 20 s limit at N = 100,000 (10 non-zeros a column, 800 KB a column read).  So does any
    source with a product of its own (:attr:`~sfapprox.sources.MatrixSource.products_by_columns` False: a
    covariance's ``A_c^T (A_c u)``, ``O(m N)`` where a pass computes ``N^2`` entries; a LinearOperator's
    ``rmatvec``; an array in memory, one read without the blocks' copies), unpriced as every use of it is
    (:func:`_own_transposed_product`).  Any other, or an operator without ``rmatvec``, is read by columns
    (:func:`_transposed_product`), priced first at the rate of the pilot's columns: a pass that would take
    longer is not begun, and one whose own chunks then say so is stopped.
    """
    n = source.n
    matrix = source.sparse_matrix
    if matrix is not None:
        return np.asarray(matrix.T @ pilot.left, dtype=np.float64).reshape(n), None
    if not source.products_by_columns:
        v = _own_transposed_product(source, pilot.left)
        if v is not None:
            return v, None
    estimate = pilot.seconds * n / max(1, pilot.columns)
    if estimate > seconds:
        return None, (f"at the rate of its first {counted(pilot.columns, 'column')} the pass would take about "
                      f"{limit_text(estimate)} s, over the {limit_text(seconds)} s it may take "
                      f"({share:.0%} of the time left)")
    v, done, took = _transposed_product(source, pilot.left, chunk, width, _timing.Deadline.after(seconds))
    if v is None:
        return None, (f"the pass was stopped after {counted(done, 'column')} of {n:,}: at their rate it would take "
                      f"about {limit_text(took * n / max(1, done))} s, over the {limit_text(seconds)} s it may take "
                      f"({share:.0%} of the time left)")
    return v, None


def _own_transposed_product(source: MatrixSource, u: np.ndarray) -> np.ndarray | None:
    """``X^T u`` by ``source``'s own product (:meth:`~sfapprox.sources.MatrixSource.rmatmat`), or None where
    it has none for ``X^T``: a LinearOperator given ``matvec`` alone, whose ``rmatvec`` scipy refuses with
    NotImplementedError before any work (its columns, ``X @ I[:, J]``, still make the pass)."""
    if type(source).rmatmat is MatrixSource.rmatmat:  # a source of its own that gave matmat alone: its
        return None  # rmatmat is the base class's pass by column blocks, unpriced here
    try:
        return np.asarray(source.rmatmat(u), dtype=np.float64).reshape(source.n)
    except NotImplementedError:
        return None


def _transposed_product(source: MatrixSource, u: np.ndarray, chunk: int, width: int,
                        deadline: _timing.Deadline) -> tuple[np.ndarray | None, int, float]:
    """``X^T u`` by one pass over ``source``'s columns, ``chunk`` at a time in pieces of ``width`` (the
    fit's own reads: within its memory, on any source that gives columns), the columns read and their
    seconds; None where ``deadline`` would pass before the pass's end, at the rate of the chunks read so
    far (:meth:`~sfapprox._timing.Deadline.rest_fits`)."""
    n = source.n
    v = np.empty(n)
    began = _timing.now()
    for start in range(0, n, chunk):
        if start and not deadline.rest_fits(began, start, n):
            return None, start, _timing.now() - began
        for a in range(start, min(n, start + chunk), width):
            J = np.arange(a, min(n, start + chunk, a + width))
            v[J] = source.columns(J).T @ u
    return v, n, _timing.now() - began


def fit_sf(X: MatrixLike, *, progress: bool = False, **params: Any) -> ChordSF:
    """Fit a :class:`ChordSF` to ``X``; keyword arguments are ChordSF's parameters.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (N, N)
        The square matrix.
    progress : bool, default=False
        Draw a progress line on stderr while the fit runs (its iteration,
        error and time): a bar in a terminal, a live display in a Jupyter
        notebook (with ipywidgets), nothing in a pipe; ``callback`` is still
        called.  The fitted estimator keeps ``callback`` as given.
    **params
        :class:`ChordSF` parameters.

    Returns
    -------
    ChordSF
        The fitted estimator.

    Examples
    --------
    >>> import numpy as np
    >>> sf = fit_sf(np.eye(4), max_iter=100, device="cpu")
    >>> sf.factors_.shape
    (2, 4, 3)
    """
    model = ChordSF(**params)  # (its defaults: the line's iterations and time are the estimator's own)
    with progress_shown(progress, X, model.max_iter, prefix="SF ", callback=model.callback,
                        time_limit=model.time_limit) as (callback, _):
        if callback is not model.callback:
            model.callback = callback
        try:
            return model.fit(X)
        finally:
            model.callback = params.get("callback")  # the display is not kept with the fit
