"""Task-level functions: what a CLI command does, callable from Python.

``fit_matrix`` fits SF to a loaded matrix (or a path, or an array) and writes
its outputs.  Comparing is :func:`sfapprox.compare`, which takes the same inputs.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._atomic import FileStamp, OutputError, OutputExistsError, write_json
from ._errors import ParameterError, parameter
from ._old_api import options_keywords
from ._output_lock import output_lock
from ._settings import SF_BASE, SF_NAMED_INITS, SF_SUPPORT, FitSettings, LoadOptions
from .budget import parse_budget, resolve_budget, sf_config_for_budget
from .comparison import MatrixInput, as_loaded_matrix, check_settings, compare, opened_input, scoring_seconds, warnings_at_caller
from .estimate import estimate_errors
from .formats import counted, fmt_seconds, printable
from .factors import input_record, save_factors
from .results import library_versions
from .sf.methods import _chord_sf
from .sources import MatrixSource

__all__ = ["FitRun", "fit_matrix"]


@dataclass(repr=False)  # its own __repr__: one line, not every field of the summary
class FitRun:
    """An SF fit and the summary written by ``fit --json``.

    Attributes
    ----------
    model : ChordSF
        The fitted estimator.
    summary : dict
        Errors, iterations, seconds, stop reason, structure (``support``,
        ``base``, ``n_factors``, ``offsets``), device and matrix name.  Its
        ``seconds`` are the wall time of the fit's whole turn (a source formed,
        its structure chosen, the fit, its scoring), as a comparison row's are;
        its ``fit_seconds`` the estimator's own ``seconds_``, the optimizer's;
        of the rest, ``form_seconds`` forming a source in memory (None where
        none was formed) and ``scoring_seconds`` scoring the result.
    """

    model: Any  # ChordSF
    summary: dict[str, Any]

    def __repr__(self) -> str:
        """One line, the numbers ``fit`` prints: the matrix, what is stored, the errors, the iterations and
        why they stopped, the seconds (a dataclass's repr held the whole summary: 800 characters on one line).

        Examples
        --------
        >>> FitRun("ChordSF()", {"matrix": "X", "n": 30, "nnz": 900, "fro_error": 0.2963, "rel_error": 0.03881,
        ...                      "iterations": 9823, "stop_reason": "time_limit", "seconds": 3.104})
        <FitRun sf of X (N=30): stored 900, fro_error 0.2963, rel_error 0.03881, 9,823 iterations (time_limit), 3.10 s>
        """
        got = self.summary
        parts = [] if got.get("nnz") is None else [f"stored {got['nnz']:,}"]
        estimated = " (estimated)" if (got.get("error_estimate") or {}).get("exact") is False else ""
        for name in ("fro_error", "rel_error"):
            if isinstance(got.get(name), (int, float)):
                parts.append(f"{name} {got[name]:.4g}{estimated}")
        if isinstance(got.get("iterations"), int):
            stop = f" ({got['stop_reason']})" if got.get("stop_reason") else ""
            parts.append(f"{counted(got['iterations'], 'iteration')}{stop}")
        if isinstance(got.get("seconds"), (int, float)):
            parts.append(f"{fmt_seconds(got['seconds'])} s")
        n = f" (N={got['n']:,})" if isinstance(got.get("n"), int) else ""
        return printable(f"<FitRun sf of {got.get('matrix', 'X')}{n}: {', '.join(parts)}>")

    def record(self) -> dict[str, Any]:
        """What ``fit --json`` writes (to a file or to stdout alike): the summary, the estimator's
        settings and the library versions."""
        return {**self.summary, "settings": _recorded_settings(self.model), "versions": library_versions()}


def _recorded_settings(model) -> dict[str, Any]:
    """The estimator's parameters as a fit's files record them (the callback is code, not a setting)."""
    return {k: v for k, v in model.get_params().items() if k != "callback"}


def _out_force(model, out, force: bool):
    """``force`` for the final factors, but where the fit checkpointed into ``out``: replace only its
    own last checkpoint (or the file it started with), never a file another program put there."""
    written = getattr(model, "checkpoint_written_", None)
    if written is None or model.checkpoint is None or not _same_path(model.checkpoint, out):
        return force
    path, stamp = written
    return stamp if _same_path(path, out) else False  # its checkpoints went aside: so does the result


def _checkpoints_aside(model, out) -> tuple[str, Any] | None:
    """``(path, stamp)`` of the checkpoint a fit wrote beside ``out`` when another file took ``out``'s
    name during the fit (:meth:`ChordSF._save_checkpoint`); None where its checkpoints went to ``out``."""
    written = getattr(model, "checkpoint_written_", None)
    if written is None or model.checkpoint is None or not _same_path(model.checkpoint, out):
        return None
    path, stamp = written
    return None if _same_path(path, out) else (os.fspath(path), stamp)


def _same_path(a, b) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def fit_matrix(
    matrix: MatrixInput,
    *,
    settings: FitSettings | None = None,
    budget: str | int | float | None = None,
    out: str | os.PathLike | None = None,
    json_path: str | os.PathLike | None = None,
    force: bool = True,
    load: LoadOptions | None = None,
    callback: Callable[[dict], bool | None] | None = None,
    replaces: FileStamp | bool | None = None,
    progress: bool = False,
    **sf_params: Any,
) -> FitRun:
    """Fit SF to ``matrix`` and optionally save the factors (HDF5) and a JSON summary.

    Parameters
    ----------
    matrix : LoadedMatrix, MatrixSource, path or array
        The square matrix; a path is read with ``load``.  A source (a kernel,
        an attention map, a memory-mapped file) is formed only when SF's fit
        of it fits ``settings.max_memory``; otherwise SF is fitted from its
        column blocks and its error scored from its columns (exact when that
        pass fits the time, else estimated with a 95 % interval:
        ``summary["error_estimate"]``).
    settings : FitSettings, optional
        Iterations, time limit, seed, device, dtype, threads, memory limit.
    budget : "sf", int or float, optional
        When given, the Chord structure that best fills this budget
        (:func:`~sfapprox.budget.sf_config_for_budget`); otherwise the
        reference structure (or ``n_factors``/``base`` from ``sf_params``).
        A budget with ``n_factors``, ``base`` or ``support`` set as well is a
        :class:`~sfapprox.ParameterError`.
    out, json_path : path, optional
        Output files (written atomically, even after a Ctrl-C that stopped
        the fit: the best factors found are saved).  ``out`` is locked from
        the start of the call to its final write (a hidden ``.NAME.sfapprox-lock``
        beside it, removed at the end):
        a second fit writing the same file, in another process, refuses at
        once.  Standard output, a pipe or a device is not locked.
    force : bool, default=True
        Overwrite existing output files.
    load : LoadOptions, optional
        How ``matrix`` is read when it is a path.
    callback : callable, optional
        Progress callback (ChordSF's).
    replaces : FileStamp, False or None, optional
        With ``checkpoint`` (in ``sf_params``): the file at the checkpoint's
        path the fit may replace, False for none (it must stay free), None
        (the default) for the one there when the fit starts.  A command that
        checked its output before loading the matrix gives what it saw then,
        so that a file put there while the matrix loads is not replaced.
    progress : bool, default=False
        Draw a progress line on stderr while SF fits, as
        :func:`~sfapprox.compare` does (a bar in a terminal, a live display in
        a notebook, nothing in a pipe); ``callback`` is still called.
    **sf_params
        Further :class:`~sfapprox.sf.model.ChordSF` parameters (``support``,
        ``n_factors``, ``base``, ``init``, ``ftol``, ...).

    Returns
    -------
    FitRun

    Raises
    ------
    OutputBusyError
        Before any work, when another process is writing ``out`` (one line naming it and that process).
    OutputError, OutputExistsError
        After the fit, when an output could not be written (a full disk) or its name was taken
        meanwhile (the result kept aside): each output is tried whatever became of the other.  The
        exception's ``run`` is the finished :class:`FitRun` and its ``failures`` each output's error.

    Examples
    --------
    >>> import numpy as np
    >>> run = fit_matrix(np.eye(8), settings=FitSettings(max_iter=50, device="cpu"))
    >>> run.summary["n"], run.summary["support"], run.summary["nnz"] == run.model.n_stored_
    (8, 'chord', True)
    """
    check_settings(settings, keywords=False)
    settings = settings or FitSettings()
    if progress is not False:  # the call again, its callback drawn on a progress line that it clears however it ends
        from ._display import display_label, shown_progress

        # (warnings_at_caller here too: the inner call's re-issued warnings name this line, these the caller's)
        with warnings_at_caller(), shown_progress(progress, f"SF {display_label(matrix)}", settings.max_iter,
                                                  callback=callback, time_limit=settings.per_method(1).time_limit
                                                  ) as (callback, _):
            return fit_matrix(matrix, settings=settings, budget=budget, out=out, json_path=json_path, force=force,
                              load=load, callback=callback, replaces=replaces, **sf_params)
    # one fit per output file: a second one refuses here, before any work, naming the first (a fit started
    # twice on one --out ran for minutes, then kept its result aside or replaced the other's checkpoints)
    # (the lock nests: the CLI took it already, before reading the matrix; _fit's warnings, re-issued at this
    # line, are re-issued again at the caller's)
    with output_lock(out), warnings_at_caller():
        return _fit(matrix, settings, budget, out, json_path, force, load, callback, replaces, sf_params)


def _fit(matrix: MatrixInput, settings: FitSettings, budget, out, json_path, force: bool, load: LoadOptions | None,
         callback, replaces, sf_params: dict[str, Any]) -> FitRun:
    """:func:`fit_matrix`'s work once its options are checked and its output locked."""
    # its module loads torch (1-2 s in a fresh process): said on the fit's display, as a comparison says it
    ChordSF = _chord_sf(callback)

    ChordSF.check_param_names(sf_params, "fit_matrix's keyword arguments")
    if budget is not None:
        parse_budget(budget)
        chosen = [k for k, default in (("n_factors", None), ("base", SF_BASE), ("support", SF_SUPPORT))
                  if sf_params.get(k, default) != default]
        if chosen:
            raise ParameterError(f"a budget chooses SF's structure itself; leave out {', '.join(chosen)} "
                                 "(or drop the budget)")
    matrix = opened_input(matrix, load, settings.max_memory_bytes)
    if isinstance(matrix, MatrixSource):  # left to ChordSF: formed when its fit fits the memory limit
        target, name, n = matrix, matrix.name, matrix.n
        origin = input_record(matrix)
    else:
        loaded = as_loaded_matrix(matrix, None, settings.max_memory_bytes)
        target, name, n = loaded.matrix, loaded.name, loaded.n
        origin = input_record(loaded)
    # the summary's seconds are the wall time from here (the structure chosen, the fit, its scoring) to the
    # summary, as a comparison's row's are (run_method): the estimator's own clock (``seconds_``, kept as
    # ``fit_seconds``) left out SF's scoring and setting up, and `fit` said less than `compare` of one fit
    start = time.perf_counter()
    resolved = None if budget is None else resolve_budget(budget, n)
    if resolved is not None:
        config = sf_config_for_budget(n, resolved.value)
        sf_params.update(n_factors=config.n_factors, base=config.base)
    model = ChordSF(**settings.apply_to(ChordSF, callback=callback, **sf_params))
    if replaces is not None:
        model._checkpoint_start = replaces  # read (once) by ChordSF.fit
    model._checkpoint_source = origin  # a checkpoint names the matrix it is a fit of, as the final file does
    model._matrix_name = name  # and its messages name it ("fitting SF to X" named an array the user never saw)
    # and a saved start of another structure is refused with options the budget leaves room for
    model._budget = budget
    # a start (init=) saved from a fit of another matrix: its factors were only a start, not resumed.  Read
    # before the fit: its checkpoints may replace the start's file (--init F --out F), which then names this
    # matrix, and a start of another matrix was reported as "(+ N before the resume)"
    init_note = _init_note(sf_params.get("init"), origin)
    model._init_note = init_note  # and its checkpoints say it, as the final file does
    with warnings_at_caller():  # a ConvergenceWarning points at the caller's line, as compare's do
        model.fit(target, check_input=False)
    fro, rel, estimate = model.fro_error_, model.rel_error_, None
    # the model's own final scoring (in memory), or the one from columns below: in seconds, in no fit_seconds
    scoring = model.params_.get("scoring_seconds")
    if fro is None and model.params_.get("scoring") != "interrupted":
        # fitted from the columns of a matrix never formed: scored from its columns too
        began = time.perf_counter()
        try:
            scored = estimate_errors(target, {"sf": model.operator_}, seed=settings.seed,
                                     max_memory=settings.max_memory,
                                     time_limit=scoring_seconds(settings.per_method(1).time_limit))["sf"]
            fro, rel, estimate = scored.fro_error, scored.rel_error, scored.to_dict()
        except KeyboardInterrupt:  # the fit is finished: kept and saved, its error not known (as ChordSF's own)
            model._scoring_stopped()
        finally:
            scoring = time.perf_counter() - began
    seconds = time.perf_counter() - start
    summary = {
        "fro_error": fro,
        "rel_error": rel,
        "error_estimate": estimate,
        "init_note": init_note,
        "path": model.params_.get("path", "in memory"),
        "epochs": model.params_.get("epochs"),  # passes over the columns, on the column path
        "optimizer": model.params_.get("optimizer"),  # the column path's: "adam", "adam+lbfgs", "adam+sketch"
        "kept_start": bool(model.params_.get("kept_start", False)),  # it ended worse than its start, kept
        "iterations": model.n_iter_,
        # a resumed fit (--init a saved fit): the iterations of the fits before this run's
        "iterations_before": model.params_.get("iterations_before", 0),
        "evaluations": model.n_evals_,
        "seconds": seconds,
        "fit_seconds": float(model.seconds_),  # the estimator's own clock: the optimizer's time
        # of the whole turn, besides the fit: forming a source in memory (None: given a matrix, or fitted from
        # its columns) and scoring the result (None: nothing scored, as a zero matrix)
        "form_seconds": model.params_.get("form_seconds"),
        "scoring_seconds": scoring,
        # of those, compiling the kernels (the first fit after installing; outside the time limit), or None
        "compile_seconds": model.params_.get("compile_seconds"),
        # and compiling the scoring's kernels (the first scoring after installing), part of scoring_seconds
        "scoring_compile_seconds": model.params_.get("scoring_compile_seconds"),
        "stop_reason": model.stop_reason_,
        # False where a stop cut the final scoring short: the errors are then the optimizer's own, or None
        "scored": model.params_.get("scoring") != "interrupted",
        "init": model.init_,
        "kernel": model.kernel_,
        "device": model.device_,
        "dtype": model.dtype_,
        "threads": model.threads_,
        "time_limit": model.time_limit,
        "max_iter": model.max_iter,
        "nnz": model.n_stored_,
        # the fields a comparison's rows and a batch's lines name them by: the method, and the budget asked
        # (None: SF's structure was given or the reference one, not chosen for a budget)
        "method": "sf",
        "budget": None if resolved is None else resolved.value,
        "budget_spec": None if resolved is None else resolved.spec,
        "matrix": name,
        "n": n,
        "support": model.support,
        "base": model.base,
        "n_factors": int(model.factors_.shape[0]),
        # butterfly positions are i and i XOR 2^m, not offsets: the list is empty there
        "offsets": model.offsets_.tolist(),
    }
    run = FitRun(model, summary)
    failures = _write_outputs(run, origin, out, json_path, force)
    if failures:
        raise _output_failure(failures, run)
    return run


def _init_note(init, origin: dict[str, Any]) -> str | None:
    """Where ``init`` is a saved fit of another matrix (another file, or another kernel of the same points),
    a line that says so, as ``compare --with`` says it of a saved fit it scores; None otherwise."""
    if not isinstance(init, (str, os.PathLike)) or init in SF_NAMED_INITS or not os.path.isfile(init):
        # a named start is one even where a file of that name sits in the working directory (ChordSF reads
        # it as the start, not the file): read as a fit, that file failed the finished fit, nothing written
        return None
    from .comparison import _source_notes
    from .factors import load_factors

    notes = _source_notes({f"the start {os.fspath(init)}": load_factors(init)}, origin.get("sha256"),
                          origin.get("recipe"))
    return f"{notes[0]}: its factors were this fit's start, not a fit of this matrix resumed" if notes else None


def _write_outputs(run: FitRun, origin, out, json_path, force: bool) -> list[Exception]:
    """Write the factors (``out``) and the JSON summary, each whatever became of the other; their failures.

    An output whose name was taken meanwhile is kept aside (:class:`OutputExistsError`); one that cannot
    be written (a full disk, a file too large) costs itself alone: the JSON summary was never written
    after a failed ``--out``.
    """
    model = run.model
    failures: list[Exception] = []
    if out is not None:
        aside = _checkpoints_aside(model, out)
        # checkpoints that went aside (another file took the name meanwhile): the result replaces the
        # last of them there, one file, not a second name beside it
        _tried(out, failures, lambda: save_factors(
            out if aside is None else aside[0], model.operator_, loss_history=model.loss_curve_, fit=run.summary,
            settings=_recorded_settings(model), source=origin,
            force=_out_force(model, out, force) if aside is None else aside[1]))
        if failures and isinstance(failures[-1], OutputError):
            failures[-1] = _with_checkpoint(failures[-1], model)
        if aside is not None:
            failures.append(OutputExistsError(f"{out}: another file took its name during the fit, so it was left "
                                              f"untouched; the result was saved as {aside[0]} instead, with the "
                                              "checkpoints", Path(out), Path(aside[0])))
    if json_path is not None:
        _tried(json_path, failures, lambda: write_json(json_path, run.record(), force=force))
    return failures


def _with_checkpoint(exc: OutputError, model) -> OutputError:
    """``exc``, the final factors' failure, saying where the fit's last checkpoint still is: "F: not written:
    No space left on device; no partial file was left" was all, where F held a checkpoint that resumes it."""
    written = getattr(model, "checkpoint_written_", None)
    iterations = model.__dict__.get("_checkpoint_iterations")
    if written is None or iterations is None or not written[1] or FileStamp.of(written[0]) != written[1]:
        return exc  # no checkpoint written, or the file there is no longer the one this fit wrote
    path = os.fspath(written[0])
    return OutputError(f"{exc}; {path} still holds this fit's last checkpoint ({counted(iterations, 'iteration')}): "
                       f"{parameter('init', path)} resumes from it", exc.path, exc.errno)


def _tried(path, failures: list[Exception], write: Callable[[], Any]) -> None:
    """``write()`` of the output ``path``; its failure, if any, appended to ``failures`` (an ``OSError`` made an
    :class:`OutputError` naming ``path``: an output's own writer says which file, the error may not)."""
    try:
        write()
    except (OutputExistsError, OutputError) as exc:
        failures.append(exc)
    except OSError as exc:
        failures.append(OutputError(f"{path}: not written: {exc.strerror or exc}", Path(path), exc.errno))


def _output_failure(failures: list[Exception], run: FitRun) -> Exception:
    """One exception for the outputs that failed: an :class:`OutputExistsError` when every one was only
    kept aside, else an :class:`OutputError`; its ``run`` is the finished fit and ``failures`` each output's
    own error, for a caller that still shows the result."""
    message = "; ".join(str(exc) for exc in failures)
    if all(isinstance(exc, OutputExistsError) for exc in failures):
        error: Exception = OutputExistsError(message, failures[0].path, failures[0].kept)
    else:
        first = next(exc for exc in failures if isinstance(exc, OutputError))
        error = OutputError(message, first.path, first.errno)
    error.run, error.failures = run, failures  # type: ignore[attr-defined]
    return error


def compare_matrix(matrix, methods=("sf", "tsvd"), *, budget: str | int | float | None = "sf", options=None,
                   on_result=None, approximations: dict | None = None):
    """Deprecated: :func:`sfapprox.compare`, which takes a LoadedMatrix, a path or an array alike.

    Kept for scripts for one release; it warns (a DeprecationWarning at the caller's line) and
    runs ``compare(matrix, methods, budget=budget, on_result=on_result)`` with ``options`` (a
    deprecated ``RunOptions``) as today's keywords (``settings=FitSettings(...)``,
    ``count_indices``, ``protocol``, ``structure``, ``callback``).  ``methods`` keeps its old
    default, SF and TSVD.

    Parameters
    ----------
    matrix : LoadedMatrix, path or array
    methods : str or sequence of str, default=("sf", "tsvd")
    budget : "sf", int or float, default="sf"
    options : RunOptions, optional
    on_result : callable, optional
    approximations : dict, optional
        Filled with each scored row's dense approximation (now: ``c.result(name).operator.to_dense()``).

    Returns
    -------
    Comparison
    """
    warnings.warn("sfapprox.compare_matrix is deprecated (the old name will be removed in a later release); use "
                  "sfapprox.compare(matrix, methods, budget=..., settings=FitSettings(...)): it takes a "
                  "LoadedMatrix, a path or an array alike", DeprecationWarning, stacklevel=2)
    keywords = options_keywords(options, "compare_matrix") if options is not None else {}
    if approximations is not None:
        keywords["approximations"] = approximations
    with warnings_at_caller():  # a ConvergenceWarning points at the caller's line, as compare's do
        with warnings.catch_warnings():  # said once, by the warning above
            warnings.filterwarnings("ignore", r"compare\(approximations=\)", DeprecationWarning)
            return compare(matrix, methods, budget=budget, on_result=on_result, **keywords)
