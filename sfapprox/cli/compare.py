"""`sfapprox compare`: several methods at one budget, as a table (and JSON, CSV, Markdown, LaTeX)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from .._atomic import output_target, stream_kind
from .._display import method_announcer
from .._errors import ParameterError
from .._output_lock import output_lock
from . import _options as o
from ._app import (EXIT_INTERRUPTED, announce_start, app, error_boundary, option_items, read_matrix, show_notes,
                   stop_cause)
from ._render import (advise_limits, check_distinct, check_outputs, check_plot, emit, fit_progress,
                      named_outputs, note, notes_quiet, read_files, show_command)


@app.command()
@o.options(o.LOAD, o.FIT, o.OUTPUTS)
def compare(
    path: o.MatrixPath,
    methods: o.Methods = o.DEFAULT_METHODS,
    budget: o.Budget = "sf",
    plot: o.Plot = None,
    count_indices: o.CountIndices = o.COUNT_INDICES_DEFAULT,
    save_factors: Annotated[Optional[Path], typer.Option("--save-factors", help="Write each fitted surrogate to FOLDER/<name>.<method>.h5 (the folder is created; each file locked from before the fits to its write: a second run saving the same files refuses at once).", metavar="FOLDER")] = None,
    saved: Annotated[Optional[list[Path]], typer.Option("--with", help="A saved fit (fit --out, --save-factors) to score beside the methods; repeatable.", metavar="FILE")] = None,
    plot_scale: Annotated[Literal["auto", "linear", "log"], typer.Option("--plot-scale", **o.CHOICE, help="--plot colors: linear values, log10 |values| (sparse graphs), or auto: log below 10% non-zeros or when a few values dominate (half of the non-zeros below 2% of the largest).")] = "auto",
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="A matrix compared from its columns: run its passes on this Dask cluster (scoring, top-s, Nyström's columns, randomized SVD's and RPCA's products: their column blocks run on its workers; needs sfapprox[dask]).", metavar="ADDRESS")] = None,
    quiet: o.Quiet = False,
    *,
    load,
    settings,
    outputs,
) -> None:
    """Compare SF with the baselines at an equal budget of stored numbers.

    Ctrl-C (or SIGTERM) stops the method that is running: the methods finished
    so far (and SF's best factors, if SF was running) are shown and written to
    the outputs, and the command exits with code 130 (143 for SIGTERM).

    Example: sfapprox compare image.png --methods sf,tsvd --json r.json --plot side-by-side.png
    """
    with error_boundary():
        # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
        from .. import compare as run_compare
        from .._base import parse_methods
        from ..budget import parse_budget
        from ..comparison import load_included, not_run
        from ..factors import check_results_folder, result_writers
        from ..results import matrix_label

        names = parse_methods(methods)  # every option and output is checked before any work
        if plot_scale != "auto" and plot is None:  # it colours --plot's figure: alone it was ignored without a word
            raise ParameterError(f"--plot-scale {plot_scale} sets the colours of --plot's figure; give --plot FILE too "
                                 "(or leave --plot-scale out)")
        parse_budget(budget)
        inputs = [path, *(saved or [])]  # every file read (a saved fit scored beside): none replaced
        check_outputs(outputs, inputs=inputs)
        outputs = check_plot(plot, outputs.force, outputs, inputs=inputs)
        included = load_included(saved, settings.max_memory)
        if save_factors is not None:  # the folder itself now (a file, not creatable): it was said once the matrix was read
            check_results_folder(save_factors, "", [], force=outputs.force)
        client = None
        if scheduler is not None:  # connected before any work: a wrong address costs nothing
            from .._dask import connect

            client = connect(scheduler)
        with contextlib.ExitStack() as held:  # the locks of --save-factors' files, to their write
            loaded = read_matrix(path, load, quiet)
            show_notes(loaded)
            if save_factors is not None:  # every fit's file, included rows' too: none an input or another output
                # (each named after the matrix: result_path refuses a name over 255 bytes, refused after every fit)
                targets = check_results_folder(save_factors, loaded.name, [*names, *included], force=outputs.force,
                                               inputs=read_files(inputs), reading=loaded.recipe)
                check_distinct(*named_outputs(outputs), ("--plot", plot), *(("--save-factors", t) for t in targets))
                # each fit's file locked, before the fits, to its write: a second compare saving the same files
                # (a job started twice) refuses now, naming the first, not after its fits.  The folder is made
                # now, for the locks (checked creatable above; made at the first write before)
                held.callback(_remove_if_empty, _made_folders(Path(save_factors)))  # (after the locks' release)
                for target in targets:
                    held.enter_context(output_lock(target, option="save_factors"))
            label = matrix_label(loaded.name, loaded.recipe)  # the weight --var picked, not the file alone
            try:
                with fit_progress(label, settings.max_iter, quiet) as progress:
                    comparison = run_compare(loaded, names, budget=budget, settings=settings, count_indices=count_indices,
                                             callback=announce_start(progress, label, quiet), include=included,
                                             executor=client, on_result=method_announcer(progress, names))
            finally:
                if client is not None:
                    from .._dask import close

                    close(client)
            advise_limits(comparison.results, scored_apart=comparison.from_columns)

            def write_plot() -> None:
                from ..plotting import plot_comparison

                how = plot_comparison(loaded, comparison, plot, scale=plot_scale, force=outputs.force,
                                      max_memory=settings.max_memory)  # (the figure too keeps to the limit)
                note(f"wrote {plot} (colour scale {how}; --plot-scale linear|log to choose)")

            def write_factors(write) -> None:
                note(f"wrote {write()}")

            # one step per fit's file: one taken meanwhile (a second run saving there) costs that file alone
            factor_steps = [] if save_factors is None else [
                functools.partial(write_factors, write)
                for write in result_writers(comparison, save_factors, source=loaded, force=outputs.force)]
            # every output is written whatever became of the others (one taken meanwhile costs itself alone)
            emit(comparison.tables(), comparison.to_dict(), outputs,
                 then=[*([write_plot] if plot is not None else []), *factor_steps])
        suggest_next(comparison, path, names)
        stopped = next((r for r in comparison.results if r.status == "interrupted"), None)
        if stopped is not None:
            kept = "the rows so far are shown" + (" and written" if outputs else "")
            if stopped.fro_error is not None:
                kept += f" ({stopped.method}: the best factors found before the stop)"
            left = not_run(names, comparison.results)
            skipped = f"; not run: {', '.join(left)}" if left else ""
            when = (f"while {stopped.method} was scored" if (stopped.params or {}).get("scoring") == "interrupted"
                    else f"during {stopped.method}")  # (its fit had ended)
            note(f"interrupted ({stop_cause()}) {when}: {kept}{skipped}", style="bold yellow")
            raise typer.Exit(EXIT_INTERRUPTED)


def _made_folders(folder: Path) -> list[Path]:
    """Make ``folder`` (and its parents) if missing; the folders made, deepest first (none where it could
    not be made: the locks are then not taken, and the first write says why)."""
    missing = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        return missing
    return []


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove the folders this run made for --save-factors where they are still empty (no fit was saved:
    all failed, none applied, a stop before the first): a compare that saved nothing left an empty folder,
    made for its locks, where it left none before there were locks."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (a file saved, or another's), or gone: left as it is
            return


def suggest_next(comparison, path: Path, names: list[str], argv: list[str] | None = None) -> None:
    """The next command, when the verdict says a method that was not run would do better: the command
    that ran (``argv``, default ``sys.argv[1:]``: its source options such as ``--kernel`` and
    ``--var`` kept) with the methods to run next."""
    verdict = comparison.verdict()
    if verdict and verdict.get("suggest") and not notes_quiet():  # advice: --quiet leaves it out
        methods = ",".join(list(names) + [m for m in verdict["suggest"] if m not in names])
        words = list(sys.argv[1:] if argv is None else argv)
        # sfapprox's own options before the command (--debug): kept; the command was not recognised after
        # them, and the plain form left out --kernel (the points table then read as a matrix)
        lead = list(itertools.takewhile(_root_spellings().__contains__, words))
        words = _with_methods(words[len(lead):], methods)
        if not words or words[0] != "compare":  # not run as the CLI (a test, an embedding): the plain form
            named = ["--", str(path)] if str(path).startswith("-") else [str(path)]  # (-m.mtx: not an option)
            lead, words = [], _with_options(["compare", *named], "--methods", methods)
        groups = [[word] for word in ["sfapprox", *lead]] + _once_each_items(words)  # `--var W --var W`: once
        if not any("--force" in group for group in groups) and _writes_files(_flat(groups)):
            # its outputs exist now: as it ran, the command would refuse to start (before a `--`: after it, a file)
            end = next((i for i, group in enumerate(groups) if group == ["--"]), len(groups))
            groups.insert(end, ["--force"])
        # A file's name with a control character or a byte that is no UTF-8 is quoted as $'...' with escapes
        show_command("next:", groups)


def _with_options(words: list[str], *options: str) -> list[str]:
    """``words`` with ``options`` added at their end, or before a ``--`` (after which every word is a file's
    name: ``compare -- -m.mtx``'s suggestion ``compare -- -m.mtx --methods ...`` gave ``--methods`` as a file)."""
    if "--" not in words:
        return [*words, *options]
    end = words.index("--")
    return [*words[:end], *options, *words[end:]]


#: compare's options that write files (a command suggested again must be let replace them).
_FILE_OUTPUTS = ("--json", "--csv", "--markdown", "--latex", "--plot", "--save-factors")


def _writes_files(words: list[str]) -> bool:
    """Whether the command ``words`` writes a file that exists once it ran: an output option whose value
    is neither standard output (``-``) nor a stream (``/dev/null``, a pipe), which need no --force."""
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in _FILE_OUTPUTS:
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if value and value != "-" and stream_kind(output_target(value)) is None:
                return True
    return False


def _flat(groups: list[list[str]]) -> list[str]:
    """The words of ``groups``, in order."""
    return [word for group in groups for word in group]


def _once_each_items(words: list[str]) -> list[list[str]]:
    """``words`` (a ``compare`` command line) with each option once, each option with its value a list of its
    own (a word that is no option alone): the pieces the next command is broken between, never inside.  An
    option given again (which the command allows, its last value counting) keeps its first place and takes
    its last value; a repeatable one (``--with``) keeps every occurrence, and words that are no option of
    compare's stay as they are."""
    items: list[list[str]] = []
    first: dict[str, int] = {}  # an option's name -> its item
    for item in option_items(typer.main.get_command(app).commands["compare"].params, words):
        if item.param is not None and not item.param.multiple and item.param.name in first:
            items[first[item.param.name]] = item.words
            continue
        if item.param is not None:
            first.setdefault(item.param.name, len(items))
        items.append(item.words)
    return items


def _root_spellings() -> set[str]:
    """Each spelling of sfapprox's own options, given before the command (``--debug``), read from the
    command group itself."""
    import typer

    from ._app import app

    return {spelled for p in typer.main.get_command(app).params if p.param_type_name == "option"
            for spelled in [*p.opts, *p.secondary_opts]}


def _with_methods(words: list[str], methods: str) -> list[str]:
    """``words`` with its ``--methods`` option (``--methods X`` or ``--methods=X``) set to ``methods``."""
    end = words.index("--") if "--" in words else len(words)  # after it, file names: a "--methods" too
    out, skip = [], False
    for word in words[:end]:
        if skip:
            skip = False
        elif word == "--methods":
            skip = True
        elif not word.startswith("--methods="):
            out.append(word)
    return _with_options([*out, *words[end:]], "--methods", methods)
