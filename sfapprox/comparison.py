"""Run several methods on one matrix at one budget of stored numbers.

``compare`` never prints: it returns a :class:`~sfapprox.results.Comparison`
whose rows the CLI (or a notebook) renders.  It owns everything a
comparison needs: it checks every argument before any work, loads the
matrix when given a path, resolves the budget, refuses (before the first
fit) a comparison whose scoring would not fit in memory, validates the
matrix once for all methods, and keeps the finished rows when Ctrl-C stops
it.  Every method is scored by the same
:func:`~sfapprox.metrics.operator_error`, and every method reports its
stored-number count, which is never above the budget.  The methods come
from the registry (:func:`sfapprox._base.methods`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import functools
import math
import numbers
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, Union

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from . import _timing
from ._base import (RunContext, check_columns_memory, columns_need, get_method, in_memory_or_columns, known_facts,
                    lacking, least_columns_limit, method_need, methods, parse_methods, run_order)
from ._errors import BudgetError, NotApplicableError, ParameterError, ResourceError, one_line, parameter
from ._executors import Executor, check_executor
from ._moved import moved_names
from ._old_api import REQUIRED, fill_approximations, take_old_keywords
from ._settings import (COUNT_INDICES, DEFAULT_METHODS, DEFAULT_TOTAL_TIME, PROTOCOLS, TEXT_MARKS, FitSettings,
                        LoadOptions)
from ._progress import phase, same_progress
from ._progress_line import progress_shown
from ._signals import caused_by_stop, stop_cause, stop_requested
from ._validation import (
    check_memory,
    estimate_dense_bytes,
    format_bytes,
    held_bytes,
    memory_limit,
    torch_sparse_as_scipy,
)
from .budget import Budget, parse_budget, resolve_budget
from .factors import load_factors
from .estimate import ErrorEstimate, estimate_errors
from .formats import counted, shape_text
from .metrics import DENSE_SCORING_MAX_N, operator_error
from .results import Comparison, MethodResult, library_versions
from .sources import (
    DistributedSource,
    MatrixLike,
    MatrixSource,
    as_source,
    formable,
    formed_need,
    scoring_need,
    sparse_source_within,
)

if TYPE_CHECKING:  # sfapprox.io loads h5py and Pillow: imported where a file is read
    from .io import LoadedMatrix

__all__ = ["compare", "available_methods", "run_method", "run_all", "PROTOCOLS", "MatrixInput"]

#: What :func:`compare`, :func:`~sfapprox.sweep.sweep` and :func:`~sfapprox.describe.describe` take as the
#: matrix: a :data:`~sfapprox.sources.MatrixLike`, what :func:`~sfapprox.load_matrix` returns, or a file.
MatrixInput: TypeAlias = Union[MatrixLike, "LoadedMatrix", str, os.PathLike]


def available_methods() -> dict[str, str]:
    """Method names accepted by :func:`compare`, with one-line descriptions.

    Returns
    -------
    dict of str to str
        Method name to what it stores, in the order ``sfapprox methods`` lists them.

    Examples
    --------
    >>> "tsvd" in available_methods()
    True
    """
    return {name: spec.summary for name, spec in methods().items()}


def row_reason(exc: BaseException, estimator: Any = None) -> str:
    """Why a method's row is not applicable: ``exc``'s message without the estimator's own name in front.

    An estimator fitted alone names itself ("Nystrom: budget 5 is below one Nyström pivot ..."); in a
    row, which names its method already, that read "nystrom: Nystrom: budget ..." (the name twice).

    Examples
    --------
    >>> from sfapprox.baselines.tsvd import TruncatedSVD
    >>> row_reason(ValueError("TruncatedSVD: budget 3 is below one rank"), TruncatedSVD(1))
    'budget 3 is below one rank'
    """
    text = str(exc)
    own = f"{type(estimator).__name__}: " if estimator is not None else None
    return text[len(own):] if own and text.startswith(own) else text


def run_method(name: str, X, budget: int, context: RunContext, fro_norm: float | None = None) -> MethodResult:
    """Fit one method to the validated matrix ``X`` at ``budget`` and score it.

    ``NotApplicableError`` (e.g. NMF on negative data) and ``BudgetError``
    (e.g. a budget below the smallest full-support SF) give a row with status
    ``"not applicable"`` and the reason; ``KeyboardInterrupt`` propagates
    (methods that keep partial work catch it themselves and return a row
    with status ``"interrupted"``).

    Parameters
    ----------
    name : str
        A method name from :func:`available_methods`.
    X : numpy.ndarray, scipy.sparse.csr_array or MatrixSource
        The validated square matrix.  On a :class:`~sfapprox.sources.MatrixSource`
        a method that cannot work from columns gives a ``"not applicable"`` row,
        and the errors are left None (they are scored afterwards).
    budget : int
        Stored numbers allowed.
    context : RunContext
        The settings, protocol, ``count_indices``, callback and fixed structure.
    fro_norm : float, optional
        ``||X||_F`` when already known (saves a pass when scoring).

    Returns
    -------
    MethodResult
        The row, with the fitted ``operator`` and ``estimator``.  Its ``seconds`` are the wall time of
        this call, from before the method's checks and factory to after its row is scored (on a source:
        before the joint scoring, which :func:`compare` reports in its notes); ``params["fit_seconds"]``
        is the estimator's own ``seconds_``, the optimizer's time.

    Raises
    ------
    ResourceError
        When the method's working memory is over ``context.settings.max_memory``
        and it cannot work from columns (one that can runs from ``X``'s column
        blocks instead, its row's ``params["path"]`` then ``"columns"``).
    """
    spec = get_method(name)
    n = X.shape[0]
    start = time.perf_counter()
    # the time limit holds for the whole turn: a factory's own work (SF's structure timing) and the checks
    # before it are charged from here (at N = 100,000 they took 40-50 s outside a 20 s limit), once-per-process
    # work (torch's import, the kernels' loading: _timing.one_time) excepted
    context = dataclasses.replace(context, started=_timing.work_now())
    streaming = isinstance(X, MatrixSource)
    if streaming and "columns" not in spec.access:
        return MethodResult(name, "not applicable", seconds=0.0,
                            reason=needs_formed(X, context.settings.max_memory_bytes, spec))
    fit_on = X
    # A budget below the method's smallest fit is refused by its fit, before any work, in the words every
    # method gives (budget.below_smallest): no memory limit makes it fit, so the memory checks wait (rsvd
    # from columns at budget 15 said its 11 KiB were over the limit, and at 2 that one rank is 33 numbers).
    need = spec.min_budget(n, context)
    below = need is not None and budget < need
    if spec.working_memory is not None and not streaming and not below:
        fit_on = in_memory_or_columns(name, spec, X, context.settings.max_memory_bytes)
    # A method a property of the matrix rules out (its source says so: Nyström on a graph that is not positive
    # semi-definite) is refused by its fit in its own words, before any memory check: "raise --max-memory" was
    # said of it, and at any limit it would not run
    ruled_out = isinstance(fit_on, MatrixSource) and bool(lacking(spec, known_facts(fit_on)))
    if isinstance(fit_on, MatrixSource) and not below and not ruled_out:
        check_columns_memory(name, fit_on, budget, context.settings.max_memory_bytes)
    est = None
    try:
        if spec.check_first is not None:  # its limits before the factory's own work (SF times its structure)
            spec.check_first(fit_on, budget, context)
        est = spec.make(n, budget, context)
        est._matrix_name = context.matrix_name  # named so in what its fit says (SF from columns)
        est = est.fit(fit_on, check_input=False)
    except (NotApplicableError, BudgetError) as exc:
        return MethodResult(name, "not applicable", reason=row_reason(exc, est),
                            seconds=time.perf_counter() - start)
    if est.n_stored_ > budget:  # a broken promise is a bug, never a silent excess
        raise AssertionError(f"{name} stored {counted(est.n_stored_, 'number')}, over the budget {budget:,}")
    # From columns, every row is scored afterwards, together, on the same columns (estimate_errors).
    # A stop during SF's own scoring left its error as it could: not scored again here (the stop is on)
    unscored = est.params_.get("scoring") == "interrupted"
    # top-s from columns scored itself exactly in its selection's pass (``||X||^2 - sum kept^2``): its row is
    # not sampled again (a sample of a surrogate that keeps every non-zero said "0 ± ?", and no winner)
    own = streaming and est.__dict__.get("error_from_pass_", False)
    fro, rel = ((est.fro_error_, est.rel_error_) if unscored or own else
                (None, None) if streaming else row_error(est, X, fro_norm, threads=context.settings.threads))
    # The row's seconds are measured here, the same way for every method: each estimator's own clock
    # (``seconds_``, kept as ``fit_seconds``) starts where it likes, and SF's left out its structure's
    # timing, its starts and its scoring (1.76 s said of a 5.9 s comparison at N = 3,000)
    seconds = time.perf_counter() - start
    return MethodResult(
        method=name,
        status="interrupted" if est.stop_reason_ == "interrupted" else "ok",
        nnz=int(est.n_stored_),
        fro_error=fro,
        rel_error=rel,
        seconds=seconds,
        params={**est.params_, **({"path": "columns"} if fit_on is not X else {}), "stop_reason": est.stop_reason_,
                "fit_seconds": float(est.seconds_), **({"error_from_pass": True} if own else {})},
        error_estimate=ErrorEstimate(fro, rel, exact=True, columns=n).to_dict() if own else None,
        operator=est.operator_,
        estimator=est,
    )


def _scored_by_own_pass(r: MethodResult) -> bool:
    """Whether ``r``'s error was computed exactly by its fit's own pass over every column (top-s from
    columns: :func:`run_method`), so that the comparison's scoring leaves it as it is."""
    return bool((r.params or {}).get("error_from_pass")) and r.error_estimate is not None


def row_error(est, X, fro_norm: float | None = None, *, threads: int | None = None) -> tuple[float, float | None]:
    """A fitted method's error against the in-memory ``X``: :func:`~sfapprox.metrics.operator_error`.

    SF and the hybrids score themselves with that same function against the ``X`` they were fitted
    to (``fro_error_``, exact, float64; from columns by an exact pass), and RPCA in memory by the norm of
    its chosen split's float64 residual (the same to round-off, ``tests/test_rpca.py``): that number is
    taken rather than a second pass over ``N^2`` entries (9.5 s at N = 16,384 on 2 cores,
    ``benchmarks/results/scoring.md``).  Every other method, and an estimator that left its error
    unknown (None), is scored here.

    Parameters
    ----------
    est : Approximation
        The fitted estimator (``operator_``, and ``fro_error_`` where it scores itself).
    X : numpy.ndarray or scipy sparse matrix
        The matrix it was fitted to.
    fro_norm : float, optional
        ``||X||_F`` when already known.
    threads : int, optional
        Scoring workers (see :func:`~sfapprox.metrics.operator_error`).

    Returns
    -------
    (float, float or None)
    """
    own = getattr(est, "fro_error_", None)
    if own is not None and math.isfinite(own):
        norm = float(np.linalg.norm(X.data if sp.issparse(X) else X)) if fro_norm is None else float(fro_norm)
        return float(own), (float(own) / norm if norm > 0 else None)
    with _products_after_stop(est):
        return operator_error(X, est.operator_, fro_norm, threads=threads)


def _products_after_stop(est) -> contextlib.AbstractContextManager:
    """Where a stopped row's scoring runs its products: on scipy's sparse factors where it holds Chord
    factors and the apply kernels would first compile (:func:`~sfapprox.operators._chord_apply.compiles_after_stop`;
    SF fitted from the columns of a sparse matrix under a time limit leaves its error to this scoring, and a
    stop on a fresh install then waited 19 s for the compiling), else where they always run."""
    return _operator_products_after_stop(getattr(est, "operator_", None),
                                         getattr(est, "stop_reason_", None) == "interrupted")


def _operator_products_after_stop(operator, stopped: bool) -> contextlib.AbstractContextManager:
    """:func:`_products_after_stop` for ``operator``, whose fit was ``stopped`` (or a stop came since)."""
    from .operators import _chord_apply

    stack = getattr(operator, "_stack", None)
    if isinstance(stack, _chord_apply.FactorStack) and _chord_apply.compiles_after_stop(stopped, stack.butterfly):
        return stack.uncompiled()
    return contextlib.nullcontext()


def needs_formed(source: MatrixSource, max_memory: int | None, spec=None) -> str:
    """Why a method that needs the matrix in memory does not run on ``source`` (one line): the matrix
    and its scoring are over the limit, or (a matrix that could be formed, not formed because that
    would help no method: :func:`better_from_columns`) ``spec``'s own fit is.

    Parameters
    ----------
    source : MatrixSource
        The matrix known by its columns.
    max_memory : int or None
        Memory limit in bytes; None: :func:`~sfapprox._validation.default_memory_limit`
        (80% of RAM).
    spec : MethodSpec, optional
        The method.
    """
    limit = memory_limit(max_memory)
    able = ", ".join(m for m, other in methods().items() if "columns" in other.access)
    over = f"over the memory limit{f' of {format_bytes(limit)}' if limit else ''}"
    if spec is not None and spec.working_memory is not None and formable(source, max_memory):
        return (f"needs the {source.n:,} x {source.n:,} matrix in memory, and its fit there needs about "
                f"{format_bytes(method_need(spec, source.n))}, {over}; the methods that work from columns: {able}")
    return (f"needs the {source.n:,} x {source.n:,} matrix in memory, and a comparison there holds it and its "
            f"scoring ({format_bytes(formed_need(source))}), {over}; the methods that work from columns: {able}")


#: In a comparison from columns, the joint scoring pass gets this share of the shared time
#: (or of each method's own limit), and at least SCORE_MIN_SECONDS.
SCORE_SHARE, SCORE_MIN_SECONDS = 0.25, 5.0


def scoring_seconds(time_limit: float | str | None) -> float | None:
    """Seconds the scoring pass of a fit from columns may take: :data:`SCORE_SHARE` of the time
    limit (``"auto"``: of the shared default), at least :data:`SCORE_MIN_SECONDS`; None: no limit.

    Parameters
    ----------
    time_limit : float, "auto" or None
        The methods' time limit.

    Examples
    --------
    >>> scoring_seconds(600.0), scoring_seconds(4.0), scoring_seconds(None)
    (150.0, 5.0, None)
    """
    if time_limit is None:
        return None
    return max(SCORE_MIN_SECONDS, SCORE_SHARE * (DEFAULT_TOTAL_TIME if time_limit == "auto" else float(time_limit)))


def operator_as_source(matrix: Any, max_memory: int | None = None) -> Any:
    """``matrix``, a ``LinearOperator`` made a source that gives its columns (as the estimators read one,
    :meth:`~sfapprox._base.Approximation._validate`): compared from its columns or formed within the
    memory limit like any source.  Read as an array, it was a 0-d object array ("object dtype").  A square
    scipy sparse matrix that a comparison could not form (:func:`~sfapprox.sources.formable` under
    ``max_memory``) is a :class:`~sfapprox.sources.SparseSource`, as such a file is read
    (:func:`~sfapprox.io.open_matrix`); its copies are refused first where they are over ``max_memory``
    (:func:`~sfapprox.sources.sparse_source_within`)."""
    if isinstance(matrix, LinearOperator):
        return as_source(matrix)
    square = sp.issparse(matrix) and len(matrix.shape) == 2 and matrix.shape[0] == matrix.shape[1] > 0
    # decided by the order (formed, any source's need is the same): a matrix that is formed is not copied first
    if square and not formable(MatrixSource(matrix.shape[0]), max_memory):
        return sparse_source_within(matrix, max_memory)  # its copies checked first (they were made unchecked)
    return matrix


def opened_input(matrix: Any, load: LoadOptions | None, max_memory: int | None = None) -> Any:
    """What :func:`compare`, :func:`~sfapprox.sweep.sweep` and :func:`~sfapprox.fit_matrix` work on: a file
    opened as the command line opens it (:func:`~sfapprox.io.open_matrix`: a kernel of a point table, an
    attention map, a ``.npy`` too big to load and a sparse matrix too big to form are sources; other files
    are read), a ``LinearOperator`` or such a sparse matrix made a source (:func:`operator_as_source`),
    anything else as given.  A path with ``kernel=`` in its load options was read as a plain table
    (TypeError from load_matrix).  ``max_memory`` (the settings') is the limit a file is opened under where
    ``load`` sets none: a ``.npy`` of 500 MB under ``max_memory=300M`` was loaded under the default limit,
    where the command line mapped it.

    Raises
    ------
    ParameterError
        For load options given with anything but a path (:func:`check_load_applies`).
    """
    check_load_applies(matrix, load)
    from .io import LoadedMatrix, open_matrix  # here: sfapprox.io loads h5py and Pillow
    from .io._sources import kept_sparse

    if isinstance(matrix, (str, os.PathLike)):
        keywords = (load or LoadOptions()).keywords()
        if keywords.get("max_memory") is None:
            keywords["max_memory"] = max_memory
        return open_matrix(matrix, **keywords)
    if isinstance(matrix, LoadedMatrix):  # as its file is opened: load_matrix(keep_sparse=True)'s was refused
        return kept_sparse(matrix, max_memory)
    # a torch sparse tensor as the scipy sparse matrix it is (a GPU one's entries copied within the limit):
    # kept sparse where it cannot be formed
    return operator_as_source(torch_sparse_as_scipy(matrix, "X", max_memory), max_memory)


#: A source's facts (:class:`~sfapprox.sources.MatrixSource` attributes) that its formed matrix keeps
#: (:attr:`~sfapprox.io.LoadedMatrix.facts`): a check of the entries gives no ``psd: True`` back.
KNOWN_FACTS = ("symmetric", "psd", "nonnegative")


def as_loaded_matrix(matrix, load: LoadOptions | None, max_memory: int | None = None):
    """A :class:`~sfapprox.io.LoadedMatrix` (validated once) from a path, a LoadedMatrix or an array.

    Parameters
    ----------
    matrix : LoadedMatrix, MatrixSource, str, os.PathLike or array
        A loaded matrix (returned as is), a source (formed), a file (read with
        :func:`~sfapprox.load_matrix`) or an array (named ``"X"``).
    load : LoadOptions or None
        How a file is read; None: the defaults.  Given with an array:
        :class:`~sfapprox.ParameterError`.
    max_memory : int or None, default=None
        The memory limit (the settings') of the copies made here: a source formed
        (its blocks take half of what the matrix leaves of it; None: the source's
        own, else the default), an array's float64 or a GPU tensor's copy in host
        memory (None: the default).  A file is read under ``load``'s limit.

    Returns
    -------
    LoadedMatrix
    """
    from .io import LoadedMatrix, as_loaded, load_matrix  # here: sfapprox.io loads h5py and Pillow

    check_load_applies(matrix, load)
    if isinstance(matrix, LoadedMatrix):
        return matrix
    if isinstance(matrix, MatrixSource):  # small enough: formed (within the memory limit) and validated
        # The comparison's limit: under the default (80% of RAM) a block was the whole matrix, with its
        # temporaries five N x N arrays, where the limit allowed 3.75 (N = 4,096).
        formed = as_loaded(matrix.to_dense(max_memory), matrix.name)
        # what it was made from, as a loaded file records its own: results and saved fits name their input;
        # and what the source knew of it (a kernel's psd: True), which no check of the entries gives back
        known = {fact: getattr(matrix, fact) for fact in KNOWN_FACTS if getattr(matrix, fact) is not None}
        return dataclasses.replace(formed, path=matrix.file, format=matrix.kind, notes=list(matrix.notes),
                                   sha256=matrix.file_sha256, recipe=matrix.recipe, facts=known or None)
    if isinstance(matrix, (str, os.PathLike)):
        return load_matrix(matrix, **(load or LoadOptions()).keywords())
    # the caller's limit: a GPU tensor's copy in host memory was checked against the default (80 % of RAM)
    return as_loaded(matrix, "X", max_memory)


def check_load_applies(matrix, load: LoadOptions | None) -> None:
    """ParameterError for ``load`` options given with anything but a file path: they were ignored
    without a word for a loaded matrix, a source or a LinearOperator (an array's was refused)."""
    if load is not None and not isinstance(matrix, (str, os.PathLike)):
        raise ParameterError(f"load options apply to a file path, not to a {type(matrix).__name__}; "
                             "leave load out (the matrix is read already)")


def check_scoring_memory(loaded, limit: int | None) -> None:
    """Refuse, before the first fit, a comparison whose scoring would be over the memory limit.

    Every method is scored by :func:`~sfapprox.metrics.operator_error`:
    up to :data:`~sfapprox.metrics.DENSE_SCORING_MAX_N` on dense ``N x N``
    arrays (approximation, residual and, for sparse input, X itself), above
    it by column blocks (and a sparse X's CSC copy).  ``X`` is held meanwhile,
    so it counts, as every method's working memory counts it, and so does the libraries' working set
    (:func:`method_need`).

    Parameters
    ----------
    loaded : LoadedMatrix
        The matrix to be scored.
    limit : int or None
        Memory limit in bytes; None: the default limit (80% of RAM).

    Raises
    ------
    ResourceError
        When the scoring's arrays are over the limit.
    """
    n = loaded.n
    X = loaded.matrix
    held = held_bytes(X)
    # a sparse X's dense copy, or its CSC copy (as big as X)
    copy = (estimate_dense_bytes(n) if n <= DENSE_SCORING_MAX_N else held) if loaded.is_sparse else 0
    need = scoring_need(n, held, copy)
    how = "dense arrays" if n <= DENSE_SCORING_MAX_N else "column blocks"
    check_memory(need, what=f"{loaded.name}: scoring each method ({how} of the {n:,} x {n:,} matrix)", limit=limit)


def needs_if_none_fits(names: Sequence[str], need_of: Callable[[Any], int | None], limit: int) -> dict[str, int]:
    """Each method's need, by name, when none of ``names`` fits ``limit``; empty as soon as one does.

    Parameters
    ----------
    names : sequence of str
        Method names.
    need_of : callable
        ``need_of(spec)``: the bytes the method's fit is checked for, or None when it always runs (or
        checks its own need).
    limit : int
        Memory limit in bytes.

    Returns
    -------
    dict of str to int
    """
    needs = {}
    for name in names:
        need = need_of(get_method(name))
        if need is None or need <= limit:
            return {}
        needs[name] = need
    return needs


def check_methods_memory(names: Sequence[str], loaded, limit: int | None) -> None:
    """Refuse, before the first fit, a comparison none of whose methods can run within the memory limit.

    A method that declares its working memory and needs the matrix in memory is refused when that is
    over the limit (:func:`run_method` would give it a "failed" row); when every method asked for is
    refused so, nothing would run: one error, exit 2, before any work.  Methods that work from columns,
    or check their memory themselves (SF, the hybrids), may run and keep the comparison going.

    Parameters
    ----------
    names : sequence of str
        The methods (checked names).
    loaded : LoadedMatrix
        The matrix.
    limit : int or None
        Memory limit in bytes; None: the default limit (80% of RAM).

    Raises
    ------
    ResourceError
        Naming each method and what it needs.
    """
    limit = memory_limit(limit)
    if limit is None:
        return

    def need_of(spec) -> int | None:  # None: it runs from columns, or decides for itself
        return None if spec.working_memory is None or "columns" in spec.access else method_need(spec, loaded.n)

    needs = needs_if_none_fits(names, need_of, limit)
    if needs:
        asked = ", ".join(f"{name} needs about {format_bytes(b)}" for name, b in needs.items())
        able = ", ".join(m for m, spec in methods().items() if "columns" in spec.access)
        raise ResourceError(f"{loaded.name}: no method asked for fits the memory limit of {format_bytes(limit)} with "
                            f"the {loaded.n:,} x {loaded.n:,} matrix in memory ({asked}); raise the limit with "
                            f"{parameter('max_memory')} if the machine has the room, or use methods that work "
                            f"from its columns ({able})")


@contextlib.contextmanager
def warnings_at_caller(stacklevel: int = 4) -> Iterator[None]:
    """Re-issue the warnings raised inside (e.g. ConvergenceWarning) so they point at the caller.

    ``stacklevel`` counts from this generator's frame: 4 is the caller of the
    function whose ``with`` statement uses it.

    Parameters
    ----------
    stacklevel : int, default=4
        Passed to :func:`warnings.warn` for each re-issued warning.
    """
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:  # also when the work inside raised: its warnings still reach the user
        for w in caught:
            warnings.warn(w.message, w.category, stacklevel=stacklevel)


def settings_with(settings: FitSettings | None, changes: Mapping[str, Any], caller: str) -> FitSettings:
    """``settings`` (None: the defaults) with the :class:`FitSettings` fields in ``changes`` changed.

    Parameters
    ----------
    settings : FitSettings or None
        The settings to start from.
    changes : mapping
        The ``**setting_changes`` keywords of ``caller``.
    caller : str
        The function that took them (``"compare"``), named in the error.

    Returns
    -------
    FitSettings

    Raises
    ------
    TypeError
        For a keyword that is no FitSettings field: it names ``caller`` (the
        function the user called, not ``FitSettings.__init__``) and the fields.
    ParameterError
        For an invalid value.

    Examples
    --------
    >>> settings_with(None, {"seed": 3}, "compare").seed
    3
    """
    check_settings(settings)
    fields = [f.name for f in dataclasses.fields(FitSettings)]
    unknown = [name for name in changes if name not in fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        what = "an unexpected keyword argument" if len(unknown) == 1 else "unexpected keyword arguments"
        raise TypeError(f"{caller}() got {what} {', '.join(map(repr, unknown))}{hint}; besides its own "
                        f"parameters it takes the FitSettings fields {', '.join(fields)}")
    settings = settings or FitSettings()
    settings = settings.replace(**changes) if changes else settings
    from ._device import check_device

    check_device(settings.device)  # before any method runs: not after the ones that need no torch
    return settings


def check_settings(settings: Any, *, keywords: bool = True) -> None:
    """ParameterError unless ``settings`` is a :class:`FitSettings` or None (a dict of its fields was an
    AttributeError, ``'dict' object has no attribute 'replace'``, once the run had begun); ``keywords``:
    the caller takes the fields as keywords too (``compare``, ``sweep``), which the message then says."""
    if settings is not None and not isinstance(settings, FitSettings):
        also = ", or its fields as keywords (seed=1, time_limit=5)" if keywords else ""
        raise ParameterError(f"settings must be a FitSettings, got {type(settings).__name__}; pass "
                             f"settings=sfapprox.FitSettings(...){also}")


def check_run_arguments(*, count_indices: Any = False, callback: Any = None, on_result: Any = None,
                        matrix_info: Any = None) -> None:
    """ParameterError for a run's arguments of the wrong type, before anything is loaded or fitted.

    ``count_indices="no"`` counted the indices (a non-empty string is true); a ``callback`` or
    ``on_result`` that is no function was a TypeError once the first method was fitted, a ``matrix_info``
    that is no mapping one after every method was.
    """
    if not isinstance(count_indices, (bool, np.bool_)):
        raise ParameterError(f"count_indices must be True or False, got {count_indices!r}")
    for name, value in (("callback", callback), ("on_result", on_result)):
        if value is not None and not callable(value):
            raise ParameterError(f"{name} must be a function (or None), got {type(value).__name__} {value!r:.40}")
    if matrix_info is not None and not isinstance(matrix_info, Mapping):
        raise ParameterError(f"matrix_info must be a mapping of facts for the report header, got "
                             f"{type(matrix_info).__name__}")


def compare(
    matrix: MatrixInput = REQUIRED,
    methods: str | Sequence[str] = DEFAULT_METHODS,
    *,
    budget: str | int | float | None = "sf",
    settings: FitSettings | None = None,
    count_indices: bool = COUNT_INDICES,
    protocol: str = PROTOCOLS[0],
    structure: Mapping[str, Any] | None = None,
    callback: Callable[[dict], bool | None] | None = None,
    on_result: Callable[[MethodResult], None] | None = None,
    load: LoadOptions | None = None,
    matrix_info: Mapping[str, Any] | None = None,
    include: Mapping[str, Any] | Sequence[str | os.PathLike] | str | os.PathLike | None = None,
    executor: Executor | None = None,
    progress: bool = False,
    **setting_changes: Any,
) -> Comparison:
    """Fit every method in ``methods`` to ``matrix`` at the same budget and score them.

    Parameters
    ----------
    matrix : LoadedMatrix, path, ndarray, scipy sparse array, MatrixSource or LinearOperator
        The square matrix: what :func:`~sfapprox.load_matrix` returns, a file
        (loaded with ``load``), an array, or a source of its columns (a
        ``LinearOperator`` is read by its products, as the estimators read it).
    methods : str or sequence of str, default=DEFAULT_METHODS
        Names from :func:`available_methods` (``"sf,tsvd"`` works too);
        by default SF, TSVD and plain sparse storage.
    budget : "sf", int or float, default="sf"
        Stored-number budget: SF's own reference count, a count, or a fraction of ``N**2`` in
        ``(0, 1]`` (so ``1`` is all of ``N**2``, not one number).
    settings : FitSettings, optional
        How every method is fitted; ``setting_changes`` (e.g. ``time_limit=2``,
        ``seed=1``) override its fields.
    count_indices : bool, default=True
        Charge sparse entries at free positions (RPCA, sf+s) for their
        positions too (2 numbers each); False: values only, the SF paper's
        convention.
    protocol : {"default", "paper"}, default="default"
        ``"paper"``: the SF paper's Table 1 settings (:data:`PROTOCOLS`).
    structure : mapping, optional
        An SF structure fixed by hand (``n_factors``, ``base``) and further
        ChordSF parameters for the SF methods and hybrids.
    callback : callable, optional
        Progress callback of the iterative methods (a dict per iteration).
    on_result : callable, optional
        Called with each :class:`MethodResult` as soon as it is ready.
    load : LoadOptions, optional
        How ``matrix`` is read when it is a path.
    matrix_info : mapping, optional
        Extra facts for the report header (merged into the matrix summary).
    include : mapping or sequence, optional
        Surrogates fitted earlier, scored like the methods (each must fit the
        budget too): a mapping of row name to a factors file, what
        :func:`~sfapprox.load_factors` returns or a surrogate operator (one
        with ``n_stored``: a fitted estimator's ``operator_``), or a sequence
        of factors files (rows ``saved:<file stem>``).  Files are read before
        any fitting; one fitted to another input is said in the notes.
    executor : Executor, optional
        For a matrix compared from its columns: where its passes compute their
        column blocks (a ``concurrent.futures`` pool or a
        ``dask.distributed.Client``): the exact scoring pass, the top-s pass,
        Nyström's columns and the products of randomized SVD's and RPCA's
        range finding (:class:`~sfapprox.sources.DistributedSource`; the same
        numbers as here).  Ignored when the matrix is formed.
    progress : bool, default=False
        Draw a progress line on stderr while the methods run (the method, its
        iteration and error, the time): a bar in a terminal, a live display in
        a Jupyter notebook (with ipywidgets), nothing where stderr is a pipe
        or a file.  ``callback`` and ``on_result`` are still called.  The line
        is cleared when the comparison ends, a Ctrl-C or an error included; a
        display that fails is dropped with a warning, never the comparison.
    **setting_changes
        :class:`FitSettings` fields to change (``time_limit=2``, ``seed=1``, ...);
        any other keyword is a TypeError that lists them.  The old keywords
        ``X=`` (``matrix``), ``options=`` (a ``RunOptions``: ``settings`` and the
        keywords above) and ``approximations=`` (a dict filled with each row's
        ``operator.to_dense()``) still work, with a DeprecationWarning
        (:mod:`sfapprox._old_api`).

    Returns
    -------
    Comparison
        One row per method, each with its fitted ``operator``.  A Ctrl-C ends
        the comparison with the rows finished so far and an ``"interrupted"``
        row for the method it cut short (an interrupted SF keeps its best
        factors); the later methods are not run.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((16, 16))
    >>> c = compare(X, ["tsvd"], budget=200)
    >>> c.results[0].nnz <= 200, c.results[0].operator.shape
    (True, (16, 16))
    """
    # Every argument is checked before anything is loaded or fitted.
    matrix, replaced, approximations = take_old_keywords(
        "compare", matrix, setting_changes,
        {"settings": (settings, None), "count_indices": (count_indices, COUNT_INDICES),
         "protocol": (protocol, PROTOCOLS[0]), "structure": (structure, None), "callback": (callback, None)})
    if replaced:
        settings, count_indices, protocol, callback = (replaced["settings"], replaced["count_indices"],
                                                       replaced["protocol"], replaced["callback"])
        structure = replaced.get("structure")
    settings = settings_with(settings, setting_changes, "compare")
    check_run_arguments(count_indices=count_indices, callback=callback, on_result=on_result, matrix_info=matrix_info)
    check_executor(executor)
    names = parse_methods(methods)
    if protocol not in PROTOCOLS:
        raise ParameterError(f"unknown protocol {protocol!r}; choose {' or '.join(PROTOCOLS)}")
    parse_budget(budget)
    _check_structure(structure)
    with progress_shown(progress, matrix, settings.max_iter, callback=callback, on_result=on_result,
                        names=names) as (callback, on_result):
        saved = load_included(include, settings.max_memory_bytes)
        matrix = opened_input(matrix, load, settings.max_memory_bytes)
        if isinstance(matrix, MatrixSource) and from_columns(matrix, names, settings.max_memory_bytes):
            if approximations is not None:
                raise ParameterError(f"compare: approximations= asks for each row's dense {matrix.n:,} x {matrix.n:,} "
                                     f"approximation, but {matrix.name} is compared from its columns (too big to form "
                                     "within the memory limit); use each row's operator (c.result(name).operator)")
            return compare_columns(matrix, names, budget=budget, settings=settings, count_indices=count_indices,
                                   protocol=protocol, structure=structure, callback=callback, on_result=on_result,
                                   include=saved, matrix_info=matrix_info, executor=executor)
        with phase(callback, "forming the matrix"):  # a kernel of 8,000 points: 27 s, that said nothing
            loaded = as_loaded_matrix(matrix, None, settings.max_memory_bytes)
            check_included_shapes(saved, loaded.n)
            resolved = resolve_budget(budget, loaded.n)
            check_scoring_memory(loaded, settings.max_memory_bytes)
            check_methods_memory(names, loaded, settings.max_memory_bytes)
            X = loaded.matrix
            info = {**matrix_record(loaded.summary(), columns=False), **(matrix_info or {})}
        context = RunContext(settings, count_indices, protocol, callback, dict(structure or {}), matrix_name=loaded.name)
        with warnings_at_caller():
            results = run_all(names, X, resolved, context, info["fro_norm"], on_result)
        streamed = columns_note(results, settings.max_memory_bytes)  # before the saved rows: those were fitted elsewhere
        for name, surrogate in saved.items():
            results.append(score_surrogate(name, surrogate, X, resolved.value, info["fro_norm"],
                                           count_indices=context.count_indices))
        comparison = build_comparison(info, resolved, results, context)
        comparison.notes.extend(n for n in [resolved.note, not_run_note(names, results), *_source_notes(saved, loaded.sha256, loaded.recipe)]
                                if n)
        if isinstance(matrix, MatrixSource):
            ran = "every method ran on it" if streamed is None else "the methods ran on it or its column blocks"
            comparison.notes.append(f"{matrix.name}: formed in memory ({loaded.n:,} x {loaded.n:,}), {ran} and every "
                                    "row was scored exactly")
        if streamed is not None:
            comparison.notes.append(streamed)
        if executor is not None:  # (it ran here: a cluster the user named and saw go unused said nothing)
            comparison.notes.append(f"{loaded.name} fits in memory ({loaded.n:,} x {loaded.n:,} within the memory "
                                    "limit): every method ran in this process; the executor runs the passes of a "
                                    "matrix compared from its columns")
        fill_approximations(approximations, comparison)
        return comparison


# (SparseSource was imported here until a sparse matrix's source came from sources.sparse_source_within)
_moved_name = moved_names(__name__, {"paper_tsvd_rank": "sfapprox.budget", "SparseSource": "sfapprox.sources"},
                          stacklevel=3)


def __getattr__(name: str) -> Any:
    """The old names of this module: ``RunOptions`` (it warns when made), ``paper_tsvd_rank`` and ``SparseSource``
    (moved)."""
    if name == "RunOptions":
        from ._old_api import RunOptions

        return RunOptions
    return _moved_name(name)


def from_columns(source: MatrixSource, names: Sequence[str], max_memory: int | None) -> bool:
    """Whether the methods ``names`` are compared on ``source``'s columns, not on it formed: it cannot be
    formed (:func:`~sfapprox.sources.formable`), or formed it would starve them
    (:func:`better_from_columns`).  The one decision of :func:`compare`, :func:`~sfapprox.sweep.sweep`
    and a batch's entries."""
    return not formable(source, max_memory) or better_from_columns(source, names, max_memory)


def better_from_columns(source: MatrixSource, names: Sequence[str], max_memory: int | None) -> bool:
    """Whether a source that could be formed is better compared from its columns: the matrix would
    take over half the limit, one of the methods is SF, and every method asked for works from
    columns or would not fit beside the formed matrix either (its :func:`method_need` is over the
    limit: forming it helps no method).
    SF's in-memory fit holds several copies of the matrix, so beside a formed one it would fall back
    to a fit from columns in what the matrix leaves of the limit: a higher ``--max-memory`` refused
    what a lower one, comparing from columns, ran; and ``--methods sf,tsvd`` on a 7,000 x 7,000
    ``.npy`` under 600 MB formed it (374 MiB) for TSVD, which needs 1.2 GiB, and SF's fit from
    columns was then refused beside it.  The other methods' fallbacks from a formed matrix are
    sized by their own :func:`method_need` (:func:`run_method`).

    Parameters
    ----------
    source : MatrixSource
        The matrix known by its columns.
    names : sequence of str
        The methods asked for (checked).
    max_memory : int or None
        Memory limit in bytes; None: :func:`~sfapprox._validation.default_memory_limit`.
    """
    limit = memory_limit(max_memory)
    specs = [get_method(name) for name in names]
    if limit is None or not specs or not any(spec.label.startswith("SF") for spec in specs):
        return False
    if 2 * source.formed_bytes <= limit and _sf_fits_formed(source, limit):
        return False  # SF's in-memory fit of the formed matrix fits: form it

    def helped(spec) -> bool:  # a method that needs the matrix formed, and would fit beside it
        return "columns" not in spec.access and (spec.working_memory is None or method_need(spec, source.n) <= limit)

    # SF fits from columns either way: beside a formed matrix it has that much less (a kernel of 2,000
    # points, --methods sf: 255M ran from columns, 260M formed it and refused SF beside it)
    return not any(helped(spec) for spec in specs)


def _sf_fits_formed(source: MatrixSource, limit: int) -> bool:
    """Whether SF's default in-memory fit of ``source`` formed (the matrix counted) fits ``limit``."""
    from .sf.model import ChordSF

    return ChordSF(max_memory=limit)._fits_in_memory(source)


def columns_note(results: Sequence[MethodResult], max_memory: int | None) -> str | None:
    """The note naming the rows of ``results`` fitted from a formed matrix's column blocks (their
    in-memory fits over the memory limit; see :func:`run_method`); None when there are none."""
    names = [r.method for r in results if r.params.get("path") == "columns"]
    if not names:
        return None
    limit = memory_limit(max_memory)
    of = f" of {format_bytes(limit)}" if limit else ""
    return (f"{', '.join(names)}: fitted from the matrix's column blocks, in bounded memory (the in-memory fit is "
            f"over the memory limit{of}; a larger {parameter('max_memory')} fits in memory)")


#: The keys of every comparison's ``matrix`` record (:func:`matrix_record`), whichever way it was compared.
MATRIX_KEYS = ("name", "path", "file", "format", "n", "nnz", "density", "symmetric", "psd", "nonnegative", "fro_norm",
               "min", "max", "sha256", "notes", "recipe", "source", "formed_bytes", "formed", "compared_from",
               "unknown")
#: The facts of a matrix that only a pass over its entries gives (from its columns: null, with the reason).
PASS_FACTS = ("nnz", "density", "fro_norm", "min", "max")
#: Why a fact of :data:`PASS_FACTS` is null in the record of a matrix compared from its columns.
NOT_COUNTED = "not computed: the matrix was compared from its columns, never formed, and no pass counts it"


def matrix_record(summary: Mapping[str, Any], *, columns: bool) -> dict[str, Any]:
    """A comparison's ``matrix`` record, of the same keys (:data:`MATRIX_KEYS`) for a matrix in memory and one
    compared from its columns: the record from columns had ``source`` for ``recipe`` and no ``nnz`` or
    ``fro_norm``, and scripts reading one broke on the other.

    ``recipe`` and ``source`` are one value (``source``: a source's name for it, kept for the records written
    before); ``file`` is the input file; ``path`` the same file for a matrix in memory and ``"columns"`` for one
    compared from its columns (as before), which ``compared_from`` (``"memory"`` or ``"columns"``) also says.
    A fact that needs a pass over the entries (:data:`PASS_FACTS`) and is not known is null, with the reason in
    ``unknown`` (fact -> why; empty when every fact is known): :func:`with_pass_norm` fills ``fro_norm``
    from the scoring pass.

    Parameters
    ----------
    summary : mapping
        :meth:`~sfapprox.io.LoadedMatrix.summary` or :meth:`~sfapprox.sources.MatrixSource.summary`.
    columns : bool
        Compared from its columns.

    Returns
    -------
    dict

    Examples
    --------
    >>> r = matrix_record({"name": "k", "n": 2, "source": {"kind": "kernel"}, "formed_bytes": 32}, columns=True)
    >>> r["recipe"] == r["source"], r["path"], r["fro_norm"], sorted(r["unknown"])
    (True, 'columns', None, ['density', 'fro_norm', 'max', 'min', 'nnz'])
    """
    n = int(summary["n"])
    recipe = summary.get("recipe") or summary.get("source") or None
    formed = summary.get("formed_bytes") or estimate_dense_bytes(n)
    record = {key: summary.get(key) for key in MATRIX_KEYS}
    record.update(recipe=recipe, source=recipe, formed_bytes=formed, formed=format_bytes(formed),
                  compared_from="columns" if columns else "memory",
                  unknown={key: NOT_COUNTED for key in PASS_FACTS if record[key] is None} if columns else {})
    if columns:  # how it was compared, as records from columns always said (the file is "file")
        record["path"] = "columns"
    return {**record, **{k: v for k, v in summary.items() if k not in record}}


def with_pass_norm(record: dict[str, Any], estimates: Mapping[str, ErrorEstimate], why: str | None) -> dict[str, Any]:
    """``record`` (:func:`matrix_record`) with ``||X||_F`` where the scoring pass summed it over every column
    (an exact pass's :attr:`~sfapprox.estimate.ErrorEstimate.fro_norm`); else, where it is not known, ``why``
    (a sample, a stop) as its reason."""
    if record.get("fro_norm") is not None:
        return record
    norm = next((e.fro_norm for e in estimates.values() if e.fro_norm is not None), None)
    unknown = {k: v for k, v in (record.get("unknown") or {}).items() if k != "fro_norm"}
    if norm is None:
        unknown["fro_norm"] = why or NOT_COUNTED
    return {**record, "fro_norm": norm, "unknown": unknown}


def compare_columns(
    source: MatrixSource,
    names: Sequence[str],
    *,
    budget,
    settings: FitSettings,
    count_indices: bool = COUNT_INDICES,
    protocol: str = PROTOCOLS[0],
    structure: Mapping[str, Any] | None = None,
    callback: Callable[[dict], bool | None] | None = None,
    on_result: Callable[[MethodResult], None] | None = None,
    include: Mapping[str, Any] | None = None,
    matrix_info: Mapping[str, Any] | None = None,
    executor: Executor | None = None,
) -> Comparison:
    """:func:`compare` for a source too big to form: the methods that work from columns fit on it,
    the others get a "not applicable" row saying why, and every row is scored in one pass over the
    same columns (exact when it fits the time, else estimated with a 95 % interval).

    Parameters
    ----------
    source : MatrixSource
        The matrix, known by its columns.
    names : sequence of str
        Method names, already checked (:func:`~sfapprox._base.parse_methods`).
    budget : str, int or float
        Budget specification, as :func:`compare` takes it.
    settings : FitSettings
        How every method is fitted; its ``time_limit`` also sets the scoring
        pass's share and its ``seed`` the random columns.
    count_indices, protocol, structure, callback, on_result
        As in :func:`compare`.
    include : mapping, optional
        Surrogates fitted earlier by row name, already loaded (:func:`load_included`).
    matrix_info : mapping, optional
        Extra facts merged into the matrix summary.
    executor : Executor, optional
        Where the passes over the columns compute their blocks
        (:class:`~sfapprox.sources.DistributedSource`, :func:`~sfapprox.estimate_errors`).

    Returns
    -------
    Comparison
    """
    _check_structure(structure)
    check_included_shapes(include or {}, source.n)
    resolved = resolve_budget(budget, source.n)
    info = {**matrix_record(source.summary(), columns=True), **(matrix_info or {})}
    context = RunContext(settings, count_indices, protocol, callback, dict(structure or {}), matrix_name=source.name)
    check_methods_memory_from_columns(names, source, resolved.value, settings.max_memory_bytes)
    # every pass sized for the limit, on a copy: the source given is never changed (MatrixSource.limited)
    return _compare_columns(source.limited(settings.max_memory), names, resolved, info, context, settings,
                            on_result, include, executor)


def check_methods_memory_from_columns(names: Sequence[str], source: MatrixSource, budget: int,
                                      max_memory: int | None) -> None:
    """Refuse, before the first fit, a comparison from columns in which no method asked for could run: each
    needs the matrix formed, or keeps more than the memory limit (:func:`check_columns_memory`).

    Parameters
    ----------
    names : sequence of str
        The methods (checked names).
    source : MatrixSource
        The matrix known by its columns.
    budget : int
        Stored numbers allowed.
    max_memory : int or None
        Memory limit in bytes; None: the default limit (80% of RAM).

    Raises
    ------
    ResourceError
        Naming each method and what it would keep.
    """
    limit = memory_limit(max_memory)
    if limit is None:
        return

    def need_of(spec) -> int | None:  # None: SF, which decides for itself
        return None if spec.columns_memory is None else columns_need(spec, source, budget, limit) + source.held_bytes

    # Only the methods that apply are weighed: one the matrix rules out (Nyström on a graph that is not
    # positive semi-definite) is refused so whatever the limit, in its row, and "raise --max-memory" was
    # said of it alone, advice that would not make it run
    facts = known_facts(source)
    from_columns = [name for name in names if "columns" in get_method(name).access]
    ruled_out = [name for name in from_columns if lacking(get_method(name), facts)]
    needs = needs_if_none_fits([name for name in from_columns if name not in ruled_out], need_of, limit)
    if needs:
        asked = ", ".join(f"{name} about {format_bytes(b)}" for name, b in needs.items())
        # the limit each would run from (its need above grows with the limit: the blocks take half of it)
        least = {name: least_columns_limit(get_method(name), source, budget) for name in needs
                 if get_method(name).columns_memory is not None}
        first = min(least, key=least.__getitem__, default=None)
        runs = f" to at least {format_bytes(least[first], up=True)} (where {first} runs)" if first else ""
        asked += f"; {', '.join(ruled_out)} not applicable to it at any limit" if ruled_out else ""
        raise ResourceError(f"{source.name}: no method asked for fits the memory limit of {format_bytes(limit)} from "
                            f"the columns of the {source.n:,} x {source.n:,} matrix at a budget of {budget:,} (what "
                            f"each keeps, with its passes' blocks, half the limit: {asked}); raise the limit with "
                            f"{parameter('max_memory')}{runs} if the machine has the room, or lower the budget "
                            f"({parameter('budget')})")


def score_from_columns(source: MatrixSource, results: Sequence[MethodResult], settings: FitSettings,
                       executor: Executor | None = None) -> dict[str, Any]:
    """Score every fitted row of ``results`` from ``source``'s columns, all on the same columns (exact
    when one pass fits :func:`scoring_seconds` of ``settings.time_limit``, else estimated with a 95 %
    interval): sets each row's ``fro_error``, ``rel_error`` and ``error_estimate``.

    Parameters
    ----------
    source : MatrixSource
        The matrix, known by its columns.
    results : sequence of MethodResult
        The rows; those with an operator and status "ok" or "interrupted" are scored.
    settings : FitSettings
        Its ``time_limit``, ``seed`` and ``max_memory`` drive the pass.
    executor : Executor, optional
        Where an exact pass computes its blocks (:func:`~sfapprox.estimate_errors`).

    Returns
    -------
    dict of str to ErrorEstimate
        By method name.
    """
    # (rows that scored themselves exactly by a pass over every column, top-s, are not sampled again)
    scored = {r.method: r.operator for r in results if r.operator is not None and r.status in ("ok", "interrupted")
              and not _scored_by_own_pass(r)}
    if not scored:
        return {}
    with contextlib.ExitStack() as after_stop:  # (a stopped row's products on scipy's factors: row_error's rule)
        for r in results:
            if r.method in scored:
                after_stop.enter_context(_operator_products_after_stop(r.operator, r.status == "interrupted"))
        estimates = estimate_errors(source, scored, time_limit=scoring_seconds(settings.time_limit),
                                    seed=settings.seed, max_memory=settings.max_memory, executor=executor)
    for r in results:
        if r.method in estimates:
            e = estimates[r.method]
            r.fro_error, r.rel_error, r.error_estimate = e.fro_error, e.rel_error, e.to_dict()
    return estimates


def _compare_columns(source, names, resolved, info, context, settings, on_result, include, executor) -> Comparison:
    methods_source = source if executor is None else DistributedSource(source, executor)
    with warnings_at_caller():
        results = run_all(names, methods_source, resolved, context, None, on_result)
    for name, surrogate in (include or {}).items():
        operator = counted_as(getattr(surrogate, "operator", surrogate), context.count_indices)
        results.append(MethodResult(name, "ok", nnz=int(operator.n_stored), operator=operator,
                                    params={"kind": getattr(surrogate, "kind", None)}))
    started, stopped = time.perf_counter(), False
    try:
        estimates = score_from_columns(source, results, settings, executor)
    except KeyboardInterrupt:  # the fits are finished: their rows are kept, unscored (the stop is reported)
        estimates, stopped = {}, True
        for r in results:
            if _scored_by_own_pass(r):  # scored before the stop: its error is kept
                r.status = "interrupted"  # (no winner beside rows whose errors the stop left unknown)
                r.reason = (f"scored exactly by its own pass; the scoring of the other rows was stopped by "
                            f"{stop_cause()}")
            elif r.operator is not None and r.status in ("ok", "interrupted"):
                r.status, r.params = "interrupted", {**(r.params or {}), "scoring": "interrupted"}
                r.reason = f"fitted, then stopped by {stop_cause()} while the rows were scored: its error is not known"
    for r in results:
        if r.method in estimates and r.nnz is not None and r.nnz > resolved.value:
            r.status, r.reason = "not applicable", f"stores {r.nnz:,} numbers, over the budget {resolved.value:,}"
    info = with_pass_norm(info, estimates, _why_no_norm(source.n, estimates, stopped))
    comparison = build_comparison(info, resolved, results, context)
    comparison.notes.extend(n for n in [not_run_note(names, results),
                                        *_source_notes(include or {}, source.file_sha256, source.recipe)] if n)
    passed = [e for e in estimates.values() if not e.by_nonzeros]  # (rows scored by their own pass: exactly)
    columns = max((e.columns for e in passed), default=source.n)
    how = ("exactly, by a pass over every column" if columns >= source.n else
           f"from {columns:,} random columns of {source.n:,} (95% intervals)")
    nonzeros = [name for name, e in estimates.items() if e.by_nonzeros]
    own = [r.method for r in results if _scored_by_own_pass(r)]
    # no pass for those: the sparse matrix's non-zeros, or the fit's own pass (top-s, Monarch), give their errors
    exactly = [(", ".join(names), way) for names, way in
               ((nonzeros, "from X's non-zeros"), (own, f"by {'its' if len(own) == 1 else 'their'} own pass")) if names]
    if passed and exactly:
        how += " (" + "; ".join(f"{names}: exactly, {way}" for names, way in exactly) + ")"
    elif exactly:
        how = ("exactly, " + exactly[0][1] if len(exactly) == 1 and not own else
               "exactly (" + "; ".join(f"{names}: {way}" for names, way in exactly) + ")")
    unbounded = [name for name, e in estimates.items() if e.fro_interval and not math.isfinite(e.fro_interval[1])]
    short = {name: e.columns_advised for name, e in estimates.items() if e.too_few_columns and name not in unbounded}
    if short:  # the time limit stopped the sample before the errors' skew allows a normal interval
        how += (f"; the intervals of {', '.join(short)} may be too narrow: their squared column errors are skewed "
                f"enough to ask for {max(short.values()):,} columns (a longer {parameter('time_limit')} samples more)")
    if unbounded:  # "± ?": a sample without spread bounds nothing
        how += (f"; {', '.join(unbounded)}: every sampled column had the same error, which says nothing of the "
                f"others (shown '± ?'; a longer {parameter('time_limit')} looks at more of them, or all)")
    any_scored = not stopped and (estimates or any(_scored_by_own_pass(r) for r in results))
    scored = (f"every row was scored {how} in {time.perf_counter() - started:.1f} s" if any_scored else
              f"the scoring was stopped by {stop_cause()}" if any(r.status == "interrupted" for r in results) else
              "no method gave a surrogate to score")  # not "from 0 random columns"
    # one pass over the same columns scores every row: no row's seconds hold it (or a share of it), this note does
    seconds_apart = " (a row's seconds leave out the joint scoring)" if estimates and not stopped else ""
    comparison.notes.append(f"{source.name}: not formed ({source.summary()['formed']} dense); the methods that work "
                            f"from columns ran{seconds_apart}, and {scored}")
    if resolved.note:
        comparison.notes.append(resolved.note)
    return comparison


def _why_no_norm(n: int, estimates: Mapping[str, ErrorEstimate], stopped: bool) -> str:
    """Why a comparison from columns does not know ``||X||_F`` (:func:`with_pass_norm`)."""
    if stopped:
        return "not computed: the scoring pass over the columns was stopped"
    sampled = max((e.columns for e in estimates.values() if not e.exact), default=0)
    if sampled:
        return f"not computed: the scoring sampled {sampled:,} of the {n:,} columns, no pass over all of them"
    return "not computed: no pass over the columns was made (every row was scored by its own pass, or none)"


def check_included_shapes(included: Mapping[str, Any], n: int) -> None:
    """Refuse, before any fit, a surrogate fitted earlier whose shape is not the ``n x n`` matrix's: it was
    found only when it was scored, after every method had been fitted.

    Parameters
    ----------
    included : mapping of str to object
        Row name -> a loaded surrogate (:func:`load_included`).
    n : int
        The matrix's order.

    Raises
    ------
    ParameterError
        Naming the row, its shape and the file it came from where known.
    """
    for name, surrogate in included.items():
        shape = tuple(getattr(getattr(surrogate, "operator", surrogate), "shape", ()))
        if shape != (n, n):
            where = getattr(surrogate, "path", None)
            raise ParameterError(f"{name}{f' ({where})' if where else ''}: a {shape_text(shape)} surrogate "
                                 f"cannot approximate this {n:,} x {n:,} matrix; give a fit of this matrix")


def _included_names(paths: Sequence[Any]) -> list[str]:
    """Row names of saved fits given by their files: ``saved:<file stem>``; files of one stem in different
    folders ``saved:<folder>.<stem>`` (two `fit.h5` gave one row, the other dropped without a word), and
    numbered where that still clashes.

    Examples
    --------
    >>> _included_names(["a/fit.h5", "b/fit.h5", "c.h5"])
    ['saved:a.fit', 'saved:b.fit', 'saved:c']
    """
    def stem(p) -> str:
        return os.path.splitext(os.path.basename(os.fspath(p)))[0]

    stems = [stem(p) for p in paths]
    names = [f"saved:{os.path.basename(os.path.dirname(os.path.abspath(os.fspath(p))))}.{s}"
             if stems.count(s) > 1 else f"saved:{s}" for p, s in zip(paths, stems)]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[i] = f"{name}-{seen[name]}"
    return names


def load_included(include, max_memory: int | None = None) -> dict[str, Any]:
    """``compare``'s ``include``: factors files read (and checked) before any fitting, by row name.

    Parameters
    ----------
    include : mapping, sequence, str, os.PathLike or None
        A mapping of row name to a factors file or a loaded surrogate, or one
        or more factors files (rows named ``saved:<file stem>``; a file given
        more than once is one row); None: none.
    max_memory : int or None
        Memory limit in bytes; None: :func:`~sfapprox._validation.default_memory_limit`
        (80% of RAM).

    Returns
    -------
    dict of str to object
        Row name -> what :func:`~sfapprox.load_factors` returned (or the
        surrogate as given).

    Raises
    ------
    ParameterError
        For a surrogate that does not say how many numbers it stores (an
        array, a plain LinearOperator, an estimator rather than its
        ``operator_``).
    """
    if include is None:
        return {}
    if not isinstance(include, (str, os.PathLike, Mapping, Iterable)):  # list(5) was a TypeError
        raise ParameterError(f"include must be a factors file, a list of them or a mapping of row name to a "
                             f"file or a surrogate, got {type(include).__name__}")
    if isinstance(include, (str, os.PathLike)) or not isinstance(include, Mapping):
        paths = [include] if isinstance(include, (str, os.PathLike)) else list(include)
        # one row per file, as methods are named once: the same file given twice ("k.h5", "./k.h5") was
        # scored twice, and the verdict found no winner between a fit and itself
        first: dict[str, Any] = {}
        for p in paths:
            first.setdefault(os.path.realpath(os.fspath(p)), p)
        paths = list(first.values())
        include = dict(zip(_included_names(paths), paths))
    loaded = {name: load_factors(s, max_memory=max_memory) if isinstance(s, (str, os.PathLike)) else s
              for name, s in include.items()}
    for name, surrogate in loaded.items():
        # Its row is held to the budget by its count: an array or a plain LinearOperator has none (an
        # AttributeError once every method had been fitted), and a count made up here would not be honest.
        stored = getattr(getattr(surrogate, "operator", surrogate), "n_stored", None)
        if isinstance(stored, bool) or not isinstance(stored, numbers.Integral) or stored < 0:
            raise ParameterError(f"include: {name!r} is a {type(surrogate).__name__}, which does not say how many "
                                 "numbers it stores (n_stored), so it cannot be held to the budget; give a factors "
                                 "file, what sfapprox.load_factors returns, or a surrogate operator (a fitted "
                                 "estimator's operator_)")
    return loaded


def _source_notes(saved: Mapping[str, Any], sha256: str | None, recipe: Mapping[str, Any] | None) -> list[str]:
    """A note for each saved fit whose recorded input is not this matrix: another file (``sha256``), or
    another matrix made from this file (``recipe``: a kernel's and its bandwidth, a table's variable or the
    text marks it was read with)."""
    notes = []
    for name, fit in saved.items():
        source = getattr(fit, "source", None) or {}
        theirs = source.get("recipe") or {}
        if source.get("sha256") and sha256 and source["sha256"] != sha256:
            notes.append(f"{name} was fitted to {source.get('path') or 'another input'} "
                         f"(sha256 {source['sha256'][:12]}…), not to this file")
        elif recipe and theirs.get("sampled_sha256") and recipe.get("sampled_sha256") not in (
                None, theirs["sampled_sha256"]):
            # a memory-mapped file (never hashed whole): its size and sampled chunks differ
            size = theirs.get("bytes")  # (an edited record's entries are shown, never computed with)
            notes.append(f"{name} was fitted to {theirs.get('path') or 'another file'} (another file's contents: "
                         f"{f'{size:,}' if isinstance(size, int) else '?'} bytes, sampled sha256 "
                         f"{str(theirs['sampled_sha256'])[:12]}…), not to this file")
        elif recipe and theirs:
            mine, other = _recipe_key(recipe, theirs), _recipe_key(theirs, recipe)
            if mine != other:
                # a kernel's whole recipe (kernel and bandwidth go together); a file's reading, what differs
                keys = None if "kind" in theirs else [k for k in other if other[k] != mine[k]]
                notes.append(f"{name} was fitted to another matrix of this file ({recipe_text(theirs, keys)}; "
                             f"this one: {recipe_text(recipe, keys)})")
    return notes


#: Recipe entries that say how a matrix was reached, not which it is: a copy of a mapped file elsewhere, or a
#: bandwidth given that the median rule also gives, is the same matrix.
_NOT_IDENTITY = ("path", "bandwidth_rule", "bytes", "sampled_sha256")


def _recipe_key(recipe: Mapping[str, Any], other: Mapping[str, Any]) -> dict:
    """What identifies a matrix made from a file (a float to 12 digits: it went through a file and back),
    of the entries ``other`` records too (a record written before an entry existed is not judged on it; nor
    is a text mark one of them left to detection, which reads a file by the marks it finds there: a
    ``;``-separated file is the same matrix with ``delimiter=';'`` as without)."""
    return {k: round(float(v), 12) if isinstance(v, float) else (list(v) if isinstance(v, tuple) else v)
            for k, v in recipe.items() if k in other and k not in _NOT_IDENTITY}


def recipe_text(description: Mapping[str, Any], keys: Sequence[str] | None = None) -> str:
    """A source's description (a matrix made from a file: its recipe), for a note or ``info`` of a saved
    fit: ``kernel=rbf, bandwidth=1.2``; ``keys``: those entries alone (None or False ones too), else every
    entry that says something (a reading's ``two_mode=None``, ``covariance=False`` do not)."""
    return ", ".join(_entry_text(k, v) for k, v in description.items()
                     if (k in keys if keys is not None else
                         k not in ("kind", "points", "sampled_sha256") and v is not None and v is not False))


def _entry_text(key: str, value: Any) -> str:
    """One entry of :func:`recipe_text`: a text mark quoted (``decimal=','``: a bare ``,`` read as the list's
    own comma).

    Examples
    --------
    >>> _entry_text("bandwidth", 1.23456), _entry_text("decimal", ","), _entry_text("var", "A")
    ('bandwidth=1.235', "decimal=','", 'var=A')
    """
    if key in TEXT_MARKS:
        return f"{key}={value!r}"
    return f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"


def counted_as(operator, count_indices: bool):
    """``operator`` charged as the comparison charges its own fits: a hybrid saved by a comparison that
    did not count its sparse part's positions (``count_indices=False``) was held to this one's budget
    by its own rule (614 numbers, "ok" and the winner, where this comparison counts 1,098).  A copy
    sharing the values, with the comparison's rule; any other surrogate as it is."""
    if isinstance(getattr(operator, "count_indices", None), bool) and operator.count_indices != count_indices:
        operator = copy.copy(operator)
        operator.count_indices = count_indices
    return operator


#: What a ``fit --out`` file's summary says and a comparison's own row leaves unsaid, as it is the usual case:
#: a fit in memory that kept its own end.  A saved row's details read "path=in memory kept_start=False"
#: beside the sf row's plain "M=9 b=2 ..."; a fit from columns (path=columns) or one that kept its start
#: still says so.
_UNSAID = {"path": "in memory", "kept_start": False}
_KEEP = object()


def score_surrogate(name: str, surrogate, X, budget: int, fro_norm: float | None = None, *,
                    count_indices: bool | None = None) -> MethodResult:
    """A row for a surrogate fitted earlier (an operator, or what :func:`~sfapprox.load_factors` returns).

    Parameters
    ----------
    name : str
        The row's name.
    surrogate : SavedFactors or SurrogateOperator
        What :func:`~sfapprox.load_factors` returns (its ``operator`` is
        used), or an operator with ``n_stored`` and ``to_dense()``.
    X : numpy.ndarray or scipy.sparse.csr_array
        The matrix it is scored against.
    budget : int
        Stored numbers allowed; a surrogate over it gets a ``"not applicable"`` row.
    fro_norm : float, optional
        ``||X||_F`` when already known.
    count_indices : bool, optional
        The comparison's rule for a sparse part's positions (:func:`counted_as`); None: the
        surrogate's own.

    Returns
    -------
    MethodResult

    Raises
    ------
    ParameterError
        When the surrogate's shape is not ``X``'s.
    """
    operator = getattr(surrogate, "operator", surrogate)
    if count_indices is not None:
        operator = counted_as(operator, count_indices)
    check_included_shapes({name: operator}, X.shape[0])
    stored = int(operator.n_stored)
    fit = {key: value for key, value in dict(getattr(surrogate, "fit", {}) or {}).items()
           if _UNSAID.get(key, _KEEP) != value}
    params = {"kind": getattr(surrogate, "kind", None), **fit}
    if stored > budget:
        return MethodResult(name, "not applicable", nnz=stored, params=params,
                            reason=f"stores {stored:,} numbers, over the budget {budget:,}")
    fro, rel = operator_error(X, operator, fro_norm)
    return MethodResult(name, "ok", nnz=stored, fro_error=fro, rel_error=rel, seconds=params.get("seconds"),
                        params=params, operator=operator)


def run_all(
    names: Sequence[str],
    X,
    budget: Budget,
    context: RunContext,
    fro_norm: float | None = None,
    on_result: Callable[[MethodResult], None] | None = None,
    *,
    isolate: bool = False,
) -> list[MethodResult]:
    """Run the methods one after the other; a Ctrl-C keeps the finished rows and stops.

    ``X`` must be validated already (a LoadedMatrix's matrix is).  A method
    that needs more memory than allowed gives a ``"failed"`` row with the
    reason (the others still run); with ``isolate`` (batches) so does any
    other exception, which otherwise propagates.

    Parameters
    ----------
    names : sequence of str
        Method names (checked); the rows come back in this order.
    X : numpy.ndarray, scipy.sparse.csr_array or MatrixSource
        The validated matrix.
    budget : Budget
        The resolved budget.
    context : RunContext
        Settings shared by every method; the time limit is shared between them
        (:meth:`~sfapprox.FitSettings.share_time`).
    fro_norm : float, optional
        ``||X||_F`` when already known.
    on_result : callable, optional
        Called with each :class:`MethodResult` as soon as it is ready; its attribute ``starting``, where
        it has one, with each method's name as it starts.
    isolate : bool, default=False
        Turn any exception of a method into a ``"failed"`` row.

    Returns
    -------
    list of MethodResult
        One row per method run (none for the methods after an interrupted one).
    """
    by_name: dict[str, MethodResult] = {}
    share = context.settings.share_time(len(names))
    # a display's hook (method_announcer's): the method that starts now, closed-form ones included
    starting = getattr(on_result, "starting", None)
    for name in run_order(names):
        if callable(starting):
            starting(name)
        start = time.perf_counter()
        limit = share.next_limit()
        fitted = {m: r.estimator for m, r in by_name.items() if r.status == "ok" and r.estimator is not None}
        own = dataclasses.replace(context, settings=context.settings.replace(time_limit=limit),
                                  callback=_tagged(context.callback, name, limit), fitted=fitted)
        need = get_method(name).min_budget(X.shape[0], own)
        try:
            if stop_requested():  # a stop whose KeyboardInterrupt was swallowed (see _signals)
                raise KeyboardInterrupt
            # a pass over a source's columns (rsvd's, sparse's: 15-30 s at N = 12,000) showed a bar with no
            # word beside it; a method's own phases and steps say more over this one, which ends once they
            # are shown (it came back after SF's "scoring" ended, over a finished fit)
            with (phase(own.callback, "reading columns (the matrix is not formed)", gives_way=True)
                  if isinstance(X, MatrixSource) else contextlib.nullcontext()):
                result = run_method(name, X, budget.value, own, fro_norm)
        except ResourceError as exc:
            # over a memory limit the user gave: not applicable under it, as a method that needs the matrix
            # formed is (a batch redoes such lines under another limit). A limit of the moment (a GPU's free
            # memory, the default) or a lost cluster is a failure, tried again by the next run.
            fixed = context.settings.max_memory is not None and not getattr(exc, "transient", False)
            result = MethodResult(name, "not applicable" if fixed else "failed", reason=str(exc),
                                  seconds=time.perf_counter() - start)
        except Exception as exc:
            if stop_requested() or caused_by_stop(exc):
                # a stop that a library turned into an error of its own (torch's import as ImportError, numba's
                # compiler as SystemError): the method was stopped, not broken; a batch wrote it as a failed
                # line, kept after its "interrupted", where the pair is to be redone
                result = _interrupted(name, start)
            elif not isolate:
                raise
            else:
                result = MethodResult(name, "failed", reason=one_line(exc), seconds=time.perf_counter() - start)
        except KeyboardInterrupt:
            # Methods with partial work catch Ctrl-C themselves; the others have
            # nothing worth keeping, but the finished rows are.
            result = _interrupted(name, start)
        if result.status == "ok" and result.nnz == 0 and fro_norm == 0.0:
            need = 0  # the zero matrix, held in 0 numbers within any budget (budget.rank_within): from 0 on
        result.min_budget = need
        result.time_limit = limit
        by_name[name] = result
        if on_result is not None:
            on_result(result)
        if result.status == "interrupted":
            break
    return [by_name[name] for name in names if name in by_name]


def _interrupted(name: str, start: float) -> MethodResult:
    """The row of method ``name``, begun at ``start`` (``perf_counter``), that a stop cut short."""
    return MethodResult(name, "interrupted", reason=f"stopped by {stop_cause()} before it finished",
                        seconds=time.perf_counter() - start)


def not_run(names: Sequence[str], results: Sequence[MethodResult]) -> list[str]:
    """The methods of ``names`` a stop left unrun (no row in ``results``), in their order.

    Examples
    --------
    >>> not_run(["sf", "tsvd", "rpca"], [MethodResult("sf", "interrupted")])
    ['tsvd', 'rpca']
    """
    if not any(r.status == "interrupted" for r in results):
        return []
    ran = {r.method for r in results}
    return [name for name in names if name not in ran]


def not_run_note(names: Sequence[str], results: Sequence[MethodResult]) -> str | None:
    """The comparison's note naming the methods a stop left unrun (:func:`not_run`); None if none.

    Examples
    --------
    >>> not_run_note(["sf", "tsvd", "rpca"], [MethodResult("sf", "interrupted")])
    'not run, the comparison was stopped first: tsvd, rpca'
    """
    left = not_run(names, results)
    return f"not run, the comparison was stopped first: {', '.join(left)}" if left else None


def _tagged(callback: Callable[[dict], Any] | None, method: str, limit: float | None) -> Callable[[dict], Any] | None:
    """The progress callback with the method's name and time limit added to each report; a log's phase
    lines (its ``phase_of``, :func:`sfapprox.cli._app.announce_start`) name the method.

    A partial of a module-level function, not a lambda: the estimators a comparison returns (each row's
    ``estimator``) keep it as their ``callback``, and a local lambda made every such Comparison (and Sweep)
    fail ``pickle.dumps`` and ``joblib.dump`` ("Can't pickle local object '_tagged.<locals>.<lambda>'"),
    whatever the callback given; now it pickles wherever the caller's callback does.
    """
    if callback is None:
        return None
    tagged = same_progress(functools.partial(_report_tagged, callback, method, limit), callback)
    phase_of = getattr(callback, "phase_of", None)  # a log's: its phase lines name the method (a bar shows it)
    if callable(phase_of):
        tagged.phase = phase_of(method)  # type: ignore[attr-defined]
    return tagged


def _report_tagged(callback: Callable[[dict], Any], method: str, limit: float | None, info: dict) -> Any:
    """``callback``'s report of ``info`` with the method's name and time limit (what :func:`_tagged` calls)."""
    return callback({**info, "method": method, "time_limit": limit})


def _check_structure(structure: Mapping[str, Any] | None) -> None:
    """An SF structure given by hand holds ChordSF parameters only (checked before any work: an
    unknown name was a TypeError when SF's turn came)."""
    if structure:
        from .sf.model import ChordSF  # here: it loads torch, which a comparison without SF never needs

        ChordSF.check_param_names(structure, "structure")
        if "support" in structure:  # each SF method fits its own support: it was overwritten without a word
            raise ParameterError(f"structure: the support is the SF method's own (sf: chord, sf-symmetric, "
                                 f"sf-butterfly); drop support={structure['support']!r} and name the method "
                                 "in methods instead")


def build_comparison(info: dict[str, Any], budget: Budget, results: list[MethodResult], context: RunContext) -> Comparison:
    """The :class:`~sfapprox.results.Comparison` of ``results``, with the settings, protocol and versions.

    Parameters
    ----------
    info : dict
        The matrix summary (the report header).
    budget : Budget
        The resolved budget.
    results : list of MethodResult
        The rows.
    context : RunContext
        Its settings, ``protocol``, ``count_indices`` and ``structure`` are recorded.
    """
    settings = {**context.settings.to_dict(), "protocol": context.protocol, "count_indices": context.count_indices}
    if context.structure:
        settings["structure"] = dict(context.structure)
    return Comparison(info, budget.value, budget.spec, results, settings=settings, versions=library_versions())
