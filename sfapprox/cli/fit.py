"""`sfapprox fit`: fit the Chord sparse factorization and save the factors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer
from rich.text import Text

from .._atomic import FileStamp, OutputError, OutputExistsError, output_target, stream_kind
from .._errors import ParameterError
from .._output_lock import output_lock
from .._settings import SF_BASE, SF_FTOL, SF_GTOL, SF_INIT, SF_NAMED_INITS, SF_SUPPORT
from ..formats import counted, fact_text, fmt_seconds, jsonable, limit_text
from . import _options as o
from ._app import EXIT_INTERRUPTED, announce_start, app, error_boundary, read_matrix, show_notes, stop_cause
from ._render import (check_distinct, check_output, compiling_note, err, fit_progress, is_stdout, note, out,
                      say_error, show_key_values, writes_glyphs, _to_stdout)


def _named_start(init: str) -> str:
    """``--init``: a named start in any case as its name (``Auto`` is auto, as ``--support Chord`` is
    chord), anything else as typed (a file's name keeps its case)."""
    return init.lower() if init.lower() in SF_NAMED_INITS else init


@app.command()
@o.options(o.LOAD, o.FIT)
def fit(
    path: o.MatrixPath,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="Write the factors to this HDF5 file ('-': standard output, not a terminal; see the README's 'Output files' for its layout). Locked from the start to the final write: a second fit writing the same file refuses at once, naming this one.", metavar="FILE")] = None,
    json_path: Annotated[Optional[Path], typer.Option("--json", help="Also write a JSON summary to this file ('-': standard output).", metavar="FILE")] = None,
    ftol: Annotated[float, o.number("--ftol", min=0, help="Stop when the loss falls by a relative amount below this over 20 iterations.", metavar="X")] = SF_FTOL,
    gtol: Annotated[float, o.number("--gtol", min=0, help="Stop when max |gradient| falls below this (scale-free units).", metavar="X")] = SF_GTOL,
    factors: Annotated[Optional[int], o.integer("--factors", min=1, help="Number of factors M (default: ceil(log2 N) for the reference support).", metavar="M")] = None,
    init: Annotated[str, typer.Option("--init", help="Start: auto (probe two, continue the better), reference (values 1/K), identity (near-identity factors), rank1 (the product starts as the best rank-one approximation), or a saved fit FILE.h5 (a checkpoint: resume, or refine).", metavar="auto|reference|identity|rank1|FILE", callback=_named_start)] = SF_INIT,
    checkpoint_every: Annotated[Optional[float], o.number("--checkpoint-every", min=0.001, unit="seconds", help="Write the best factors so far to --out every SECONDS (atomically; never so often that writing takes over a tenth of the fit): a fit killed outright loses at most one interval, or ten times a write's seconds where writes are slow; resume with --init FILE --out FILE --force.", metavar="SECONDS")] = None,
    support: Annotated[Literal["chord", "symmetric", "butterfly"], typer.Option("--support", **o.CHOICE, help="chord (offsets 0, b^k; N·K·M numbers), symmetric (also -b^k) or butterfly (FAµST's: N a power of two, 2·N·log2 N numbers).")] = SF_SUPPORT,
    base: Annotated[int, o.integer("--base", min=2, help="Chord base b: offsets {0} ∪ {b^k < N}.", metavar="B")] = SF_BASE,
    budget: Annotated[Optional[str], typer.Option("--budget", help="Fit the Chord structure that best fills this budget (a whole number, a fraction of N², or 'sf': the reference one's own count) instead of the reference one.", metavar="BUDGET", callback=o.lowered)] = None,
    quiet: o.Quiet = False,
    force: o.Force = False,
    *,
    load,
    settings,
) -> None:
    """Fit SF to a matrix; print the error, optionally save factors (--out) and a JSON summary.

    Ctrl-C (or SIGTERM) stops the optimizer at once: the best factors found so
    far are still written to --out / --json, and the command exits with code 130
    (143 for SIGTERM).

    Example: sfapprox fit mesh.mtx --out mesh-sf.h5
    """
    with error_boundary():
        # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
        from ..api import fit_matrix
        from ..budget import parse_budget
        from ..results import fit_seconds_note, matrix_label

        if budget is not None:
            parse_budget(budget)
            # the budget picks the structure; refused here, before the matrix loads, in the options' words
            # (fit_matrix refused it only once the matrix had loaded, as "leave out n_factors")
            chosen = [option for option, value, default in (("--factors", factors, None), ("--base", base, SF_BASE),
                                                            ("--support", support, SF_SUPPORT)) if value != default]
            if chosen:
                raise ParameterError(f"--budget chooses SF's structure itself; leave out {', '.join(chosen)} "
                                     "(or drop --budget)")
        if checkpoint_every is not None and out_path is None:
            raise ParameterError("--checkpoint-every writes the factors to --out FILE; give --out too")
        out_dash = out_path is not None and str(out_path) == "-"
        if out_dash:  # standard output, as for --json (a file named "-" before)
            if sys.stdout.isatty():
                raise ParameterError("--out -: the factors file (HDF5, binary) would go to the terminal; redirect "
                                     "standard output (> fit.h5) or give a file name")
            out_path = Path("/dev/stdout")
        if checkpoint_every is not None and stream_kind(output_target(out_path)) is not None:
            # each checkpoint replaces the last one in a file: a stream would get them all, one after another
            # named as typed: '-' is standard output (it said "/dev/stdout is a stream", a path never given)
            shown = "- (standard output)" if out_dash else out_path
            raise ParameterError(f"--checkpoint-every replaces the factors in --out FILE at each checkpoint; "
                                 f"--out {shown} is a stream, not a file: give a file's path")
        if init not in SF_NAMED_INITS:
            check_saved_fit(Path(init))
        to_stdout = json_path is not None and str(json_path) == "-"
        if to_stdout and is_stdout(out_path):
            raise ParameterError("only one output can go to standard output; got --out and --json")
        check_output(out_path, force, inputs=[path])
        # What a checkpoint may replace: the file seen now, if --force allowed it; none otherwise (a file
        # put there while the matrix loads is another program's)
        replaces = (FileStamp.of(out_path) or False) if force and out_path is not None else False
        if not to_stdout:  # (the saved start is an input too: --out may replace it, to resume; --json not)
            check_output(json_path, force, inputs=[path] + ([] if init in SF_NAMED_INITS else [Path(init)]))
        check_distinct(("--out", out_path), ("--json", None if to_stdout else json_path))
        _check_sf_options(ftol=ftol, gtol=gtol, n_factors=factors, support=support, base=base,
                          **({"checkpoint_every": checkpoint_every} if checkpoint_every else {}))
        # One fit per output file, taken before any work and held to the final write: a second fit on this
        # file (a job started twice) refuses now, naming the first, not at its first checkpoint minutes later
        with output_lock(out_path):
            loaded = read_matrix(path, load, quiet)
            show_notes(loaded)
            label = matrix_label(loaded.name, loaded.recipe)  # the weight --var picked, not the file alone
            with fit_progress(f"SF {label}", settings.max_iter, quiet, settings.per_method(1).time_limit) as progress:
                # A Ctrl-C inside the optimizer is caught by ChordSF.fit (stop_reason
                # "interrupted", best factors kept); fit_matrix then writes the outputs.
                try:
                    run, failures = fit_matrix(
                        loaded, settings=settings, budget=budget, out=out_path, json_path=None if to_stdout else json_path,
                        # --out was checked before the fit; with checkpoints the file there is this fit's own.
                        force=force or checkpoint_every is not None, callback=announce_start(progress, f"SF {label}", quiet),
                        ftol=ftol, gtol=gtol, n_factors=factors, init=init, support=support, base=base,
                        **({"checkpoint": out_path, "checkpoint_every": checkpoint_every, "replaces": replaces}
                           if checkpoint_every else {}),
                    ), []
                except (OutputError, OutputExistsError) as exc:
                    if getattr(exc, "run", None) is None:
                        raise
                    run, failures = exc.run, exc.failures  # the fit is done: its table is shown, then what failed
        summary = run.summary
        # What the library resolved, not only what was asked: structure, limits, device, threads.
        rows = [(k, _error(summary, k) if k in _INTERVALS else fmt_seconds(summary[k]) if k in _SECONDS
                 else fact_text(summary[k]))
                for k in ("fro_error", "rel_error", "nnz", "n_factors", "base", "iterations", "evaluations", *_SECONDS,
                          "stop_reason", "init", "path", "time_limit", "max_iter", "device", "dtype", "threads")
                # forming and scoring said where they ran (a source formed, a result scored)
                if k not in _PARTS or summary.get(k) is not None]
        if summary["init"] == "saved" and init not in SF_NAMED_INITS:  # which file it resumed (or refined): not
            # "saved" alone, which named none (the JSON's settings do)
            rows = [(k, f"saved ({init})" if k == "init" else v) for k, v in rows]
        if summary["iterations_before"] or summary.get("kept_start"):
            # a resume's run: those of the fits it resumed said beside its own; a kept start: its steps
            # discarded (as info says them, from the same words)
            from ..describe import iterations_words

            rows = [(k, iterations_words(summary) if k == "iterations" else v) for k, v in rows]
        # stderr when stdout carries an output (--json -, --out /dev/stdout): it would be mixed into it
        claimed = is_stdout(out_path) or is_stdout(json_path)  # "-" included
        console = err if claimed else out
        show_key_values(console, f"SF fit of {label}", rows, ascii=not writes_glyphs(console))
        said = fit_seconds_note(summary)  # as compare's table says its seconds, under it
        if said is not None:
            console.print(Text(said))
        if to_stdout:
            try:  # as a --json file has it (named on a failure)
                _to_stdout(json.dumps(jsonable(run.record()), indent=2) + "\n")
            except OSError as exc:  # said last, after what was written (--out's factors are on disk all the same)
                failures = [*failures, exc]
        # (an OutputError's path is a Path; standard output's failure has none)
        failed = {os.path.abspath(exc.path) for exc in failures
                  if isinstance(getattr(exc, "path", None), (str, os.PathLike))}
        # standard output ('-') is not said, as compare's '-' is not ("wrote /dev/stdout" named a path never typed)
        for written in (p for p in (None if out_dash else out_path, None if to_stdout else json_path) if p is not None):
            if os.path.abspath(written) not in failed:
                note(f"wrote {written}")
        _advise(summary, settings, loaded.n)
        if failures:  # each one line, the last for the error boundary (exit 2), as compare's outputs
            for exc in failures[:-1]:
                say_error(str(exc))
            raise failures[-1]
        if summary["stop_reason"] == "interrupted":
            note(_interrupted_words(summary, out_path is not None), style="bold yellow")
            raise typer.Exit(EXIT_INTERRUPTED)


def _interrupted_words(summary: dict, written: bool) -> str:
    """What a fit stopped by a signal says it kept: the best factors found so far, or (a stop before the
    first iteration, e.g. while the kernels compiled on a fresh install) its start, said as such: "after 0
    iterations: the best factors found so far were written" was true but hid that nothing was fitted."""
    cause = f"interrupted ({stop_cause()})"
    if not summary["scored"]:  # the fit had ended; its scoring was cut short
        cause += (" during the final scoring" + (", so the error is not known" if summary["fro_error"] is None
                                                 else ", so the error shown is the optimizer's own"))
    if summary["iterations"]:
        kept = ("the best factors found so far were written" if written else
                "the error above is that of the best factors found so far (pass --out to keep them)")
        return f"{cause} after {counted(summary['iterations'], 'iteration')}: {kept}"
    # a resumed fit's start is a fit of its own: this run added nothing to it
    nothing = "nothing fitted by this run" if summary.get("iterations_before") or summary.get("init") == "saved" \
        else "nothing fitted yet"
    kept = (f"the start factors were written ({nothing})" if written else
            f"the error above is that of the start factors ({nothing}; pass --out to keep them)")
    return f"{cause} before the first iteration: {kept}"


def _advise(summary: dict, settings, n: int | None = None) -> None:
    """Say on stderr when the fit stopped on a limit, with the knob to turn; and when its structure
    stores no fewer numbers than the matrix's own ``N^2`` entries (a dense copy would be as small)."""
    if summary.get("init_note"):
        note(f"note: {summary['init_note']}", style="yellow")
    if summary.get("compile_seconds"):
        # the estimator's own seconds hold the compiling (a summary before fit_seconds was recorded: seconds)
        fit = summary.get("fit_seconds", summary["seconds"])
        compiling_note(f"the fit's {limit_text(fit)} s include {limit_text(summary['compile_seconds'])} s")
    if n is not None and summary.get("nnz") is not None and summary["nnz"] >= n * n:
        note(f"note: this structure stores {summary['nnz']:,} numbers, no fewer than the matrix's own {n * n:,} "
             "entries: a dense copy would be as small")
    if summary.get("path") == "columns":
        via = {"adam+lbfgs": ": Adam's, then L-BFGS's by passes", "lbfgs": " of L-BFGS by passes",
               "adam+sketch": ": Adam's, then L-BFGS's on sketches of the columns, a new one each pass",
               "adam+sketch+lbfgs": ": Adam's, then L-BFGS's on sketches of the columns, a new one each pass, "
                                    "until a sketch gained nothing, then by passes",
               "sketch": " of L-BFGS on sketches of the columns, a new one each pass"}.get(
            summary.get("optimizer"), "")  # a summary of an older version has no optimizer: Adam's
        # the knob that stopped it, and none where no limit did: a fit that ran to --iters (with no time limit
        # at all) was told to raise --time-limit, which allowed nothing more, and so was one stopped by Ctrl-C
        knob = {"max_iter": ("--iters allows more steps, ", "more --iters"),
                "time_limit": ("--time-limit (0 for none) allows more passes, ", "a longer --time-limit")}.get(
            summary.get("stop_reason"), ("", "a longer run"))
        note(f"note: SF was fitted from column blocks ({summary['epochs']:.3g} passes over the columns in "
             f"{summary['iterations']:,} steps{via}): its fit in memory would be over the memory limit; "
             f"{knob[0]}--max-memory a fit in memory")
        if summary.get("kept_start"):
            # the start named as it was made: --init's factors, or the rank-one start of init auto/rank1
            # (a fit with no --init was told "(--init)")
            start = "--init's factors" if summary.get("init") == "saved" else "its rank-one start"
            longer = knob[1]
            note(f"note: this run ended worse than where it started ({start}), which is kept unchanged: "
                 f"Adam's first steps near a good point wander; {longer} may get past them",
                 keep=True)  # (the factors written are the start's, not a fit's: kept under --quiet)
    elif summary["stop_reason"] == "time_limit":
        note(f"note: the fit stopped on its time limit ({settings.per_method(1).time_limit:g} s) after "
             f"{counted(summary['iterations'], 'iteration')}, before its tolerances were met; --time-limit "
             "(0 for none) allows a closer fit")
    elif summary["stop_reason"] == "max_iter":
        note(f"note: the fit stopped after its {counted(summary['iterations'], 'iteration')} before its tolerances were met; "
             "--iters allows a closer fit")


#: The summary's seconds in its table (in compare's format, :func:`~sfapprox.formats.fmt_seconds`): the whole
#: turn, the fit's own, and of the rest, forming a source and scoring the result (:data:`_PARTS`).
_SECONDS = ("seconds", "fit_seconds", "form_seconds", "scoring_seconds")
#: Those the table shows only where they ran: a matrix given, nothing was formed.
_PARTS = ("form_seconds", "scoring_seconds")

#: The summary's errors and the keys of their 95 % intervals when they are estimated.
_INTERVALS = {"fro_error": "fro_interval", "rel_error": "rel_interval"}


def _error(summary: dict, key: str) -> str:
    """An error of the summary, ``0.312 ± 0.004 (estimated from 1,536 columns)`` when it is estimated."""
    estimate = summary.get("error_estimate") or {}
    value, interval = summary[key], estimate.get(_INTERVALS[key])
    if value is None or not interval:
        return fact_text(value)
    if interval[1] is None or interval[1] == float("inf"):  # every sampled column alike: the others unbounded
        return (f"{value:.6g} ± ? (estimated from {estimate['columns']:,} columns, all with the same error: that "
                "bounds nothing of the others; a longer --time-limit looks at more)")
    half = max(interval[1] - value, value - interval[0])
    advised = estimate.get("columns_advised", 0)
    short = (f"; its skew asks for {advised:,}: the interval may be too narrow"
             if estimate["columns"] < advised else "")
    return f"{value:.6g} ± {half:.2g} (estimated from {estimate['columns']:,} columns{short})"


#: The command-line option of each SF parameter `fit` takes.
_SF_OPTIONS = {"ftol": "--ftol", "gtol": "--gtol", "n_factors": "--factors", "support": "--support",
               "base": "--base", "checkpoint_every": "--checkpoint-every"}


def _check_sf_options(**params) -> None:
    """Refuse SF's options before the matrix loads, in the options' words (``--gtol must be ...``; it was
    "The 'gtol' parameter of ChordSF ...", once the matrix had loaded).  Checked against the estimator's
    constraints without its module: that import loads torch (1-2 s), a pause before the progress bar, where
    the fit's display says "loading torch" (the options left out are the defaults, valid by construction)."""
    from .._params import check_values
    from .._settings import SF_BASE, SF_SUPPORT
    from ..sf._constraints import SF_CONSTRAINTS, check_butterfly_base
    from ._options import _in_option_words

    given = {k: v for k, v in params.items() if v is not None}
    _in_option_words(lambda: check_values(given, {k: SF_CONSTRAINTS[k] for k in given}, "ChordSF"), "ChordSF",
                     _SF_OPTIONS)
    if given.get("support", SF_SUPPORT) == "butterfly":  # --support butterfly --base 3 was refused only once
        check_butterfly_base(given.get("base", SF_BASE))  # the matrix had loaded


def check_saved_fit(path: Path) -> None:
    """Refuse, before loading the matrix, an ``--init`` that is neither a start nor a saved fit."""
    from ..factors import is_factors_file  # here: factors loads numpy
    from ..io._common import HDF5_SIGNATURE, special_file

    kind = "folder" if path.is_dir() else special_file(path)
    if kind:
        raise ParameterError(f"--init {path}: is a {kind}, not a saved fit (fit --out, --checkpoint-every write one)")
    if not path.is_file():
        raise ParameterError(f"--init {path}: neither a start (auto, reference, identity, rank1) nor an existing file")
    if not is_factors_file(path):
        with open(path, "rb") as fh:
            hdf5 = fh.read(8) == HDF5_SIGNATURE
        why = ("an HDF5 file that is not a saved fit (another program's, or one truncated or damaged)" if hdf5
               else "not a saved fit")
        raise ParameterError(f"--init {path}: {why} (fit --out, --checkpoint-every write one)")
