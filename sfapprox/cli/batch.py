"""`sfapprox batch MANIFEST --out-dir DIR` (resumable runs) and `sfapprox report DIR` (tables, exports; of a
compare's or sweep's JSON file, :mod:`sfapprox.cli.report`)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from .._errors import InputError, ParameterError, SfapproxError
from ..formats import OutputFormat, and_listed, counted, listed, shell_command
from . import _options as o
from .._signals import stop_cause
from ._app import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_INTERRUPTED, app, error_boundary
from ._render import (Outputs, check_outputs, draws_progress, line_progress, literal, note, say_error, show_tables,
                      write_outputs)

ManifestPath = Annotated[Path, typer.Argument(help="Dataset manifest: a .toml file, or a bundled one's name (`sfapprox datasets list` names them), e.g. synthetic.", show_default=False, metavar="MANIFEST")]
OutDir = Annotated[Optional[Path], typer.Option("--out-dir", help="Output folder: results.jsonl, factors/, report.md/.csv/.tex/.json (required).", show_default=False, metavar="DIR")]


# ---------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------


def _out_dir(out_dir: Path | None, old_out: Path | None) -> Path:
    """``--out-dir``, or its old name ``--out`` (renamed in 0.1; kept for scripts, with a note)."""
    if old_out is not None:
        if out_dir is not None:
            raise ParameterError("--out is the old name of --out-dir; give only --out-dir")
        note("note: --out is deprecated and will be removed in a later release; use --out-dir", style="yellow")
        return old_out
    if out_dir is None:
        raise ParameterError("batch needs an output folder: --out-dir DIR")
    return out_dir


def _redo(redo: bool, old_redo: bool) -> bool:
    """``--redo``, or its old name ``--force`` (renamed in 0.1, where --force of the other commands replaces
    outputs; kept for scripts, with a note)."""
    if old_redo:
        note("note: batch --force is deprecated and will be removed in a later release; use --redo (it "
             "recomputes the selected pairs)", style="yellow")
    return redo or old_redo


def _problems(records: list[dict[str, Any]], limit: int = 8) -> None:
    """One line per failed pair (a matrix's pairs that failed alike: one line), at most ``limit``."""
    bad = [r for r in records if r["status"] == "failed"]
    seen: dict[tuple[str, str], list[str]] = {}
    for r in bad:
        seen.setdefault((r["matrix"], r["error"]), []).append(r["method"])
    for number, ((matrix, error), methods) in enumerate(seen.items()):
        if number == limit:
            note(f"… and {len(seen) - limit} more (see results.jsonl)")
            break
        note(f"failed {matrix}/{','.join(methods)}: {error}", style="yellow")


def _unfinished(summary) -> str:
    """What a stop left undone, for its one closing line: "a/sf, b/sf cut short, 3 pairs not begun; " (the
    pairs whose work was lost, and those the next run runs too), or nothing when none is left."""
    said = ([f"{listed(summary.cut_short)} cut short"] if summary.cut_short else []) + \
        ([f"{counted(summary.not_begun, 'pair')} not begun"] if summary.not_begun else [])
    return f"{', '.join(said)}; " if said else ""


def _check_reports(out_dir: Path, at_end: bool = False) -> bool:
    """Refuse (before the run) report files in ``out_dir`` that a batch did not write as they are; at the
    end, a file that became foreign during the run is left alone with a warning.  True: write them."""
    from ..datasets.batch import foreign_reports

    foreign = foreign_reports(out_dir)
    if not foreign:
        return True
    names = ", ".join(str(p) for p in foreign)
    if at_end:
        note(f"warning: {names} changed during the run: the reports were not written "
             f"(`{shell_command('report', str(out_dir))}` writes them elsewhere)", style="yellow")
        return False
    raise SfapproxError(f"{names}: not written by a batch, or edited since; a batch writes its report.md, "
                        ".csv, .tex and .json there: move the file(s) away, or choose another --out-dir")


def _unavailable(report) -> None:
    """Matrices no method could run on: one line for the missing files, one per other cause."""
    from ..datasets.report import unavailable_line  # here: --help loads no numpy

    for u in report.unavailable:
        if not u.missing:  # present but wrong or unreadable: each its own cause
            note(f"unavailable {u.name}: {u.error}", style="yellow")
    line = unavailable_line(report.unavailable)
    if line:
        note(line, style="yellow")


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def batch_progress(quiet: bool) -> Iterator[Any]:
    """An event handler drawing matrices done / to do, the current matrix and method, elapsed time; where
    stderr is no terminal (a pipe, a CI log), a line as each matrix ends (:func:`log_progress`)."""
    if quiet:
        yield None
        return
    if not draws_progress():
        yield log_progress()
        return
    # the count, the iteration and the time are never cut; the matrix and method give way (line_columns)
    progress = line_progress("{task.fields[current]}", ["it"], lead="matrices", before=["count"])
    state: dict[str, Any] = {"task": None, "last": 0.0, "done": 0, "total": 1}

    def on_event(kind: str, **info: Any) -> None:
        task = state["task"]
        if kind == "start":
            state["total"] = max(info["total"], 1)
            state["task"] = progress.add_task("matrices", total=state["total"], current="", it="",
                                              count=f"0/{state['total']}")
        elif kind == "matrix":
            progress.update(task, current=literal(info["name"]), it="")
        elif kind == "fetch":
            progress.update(task, current=f"downloading {literal(info['name'])}", it="")
        elif kind == "method":
            progress.update(task, current=literal(f"{info['matrix']}: {info['method']}"), it="")
        elif kind == "iteration" and time.monotonic() - state["last"] > 0.2:
            state["last"] = time.monotonic()
            # (every iterative method reports now, rpca's and nmf's too: "sf it" named the wrong one)
            progress.update(task, current=literal(f"{info['matrix']}: {info.get('method', 'sf')}"),
                            it=f"it {info['iteration']}/{info['max_iter']}")
        elif kind == "matrix_done":
            state["done"] += 1
            progress.update(task, advance=1, count=f"{state['done']}/{state['total']}")

    with progress:
        yield on_event


def log_progress() -> Callable[..., None]:
    """A log's progress, one line as each matrix ends: "strike: done (2 of 3 matrices, 0:00:09)".

    A batch in a pipe or a CI log said nothing until its report (three small matrices: 15 s of silence;
    a manifest of large ones: hours), where ``compare`` there says "optimizer running" and its phases.
    """
    state = {"total": 0, "done": 0, "began": time.monotonic()}

    def on_event(kind: str, **info: Any) -> None:
        if kind == "start":
            state.update(total=info["total"], began=time.monotonic())
        elif kind == "matrix_done":
            state["done"] += 1
            elapsed = int(time.monotonic() - state["began"])
            note(f"{info['name']}: done ({state['done']} of {counted(state['total'], 'matrix', 'matrices')}, "
                 f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d})")

    return on_event


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


@app.command()
@o.options(o.FIT)
def batch(
    manifest: ManifestPath,
    out_dir: OutDir = None,
    old_out: Annotated[Optional[Path], typer.Option("--out", hidden=True, help="Deprecated name of --out-dir.", metavar="DIR")] = None,
    methods: o.Methods = o.DEFAULT_METHODS,
    budget: o.Budget = "sf",
    protocol: o.Protocol = o.PROTOCOLS[0],
    count_indices: o.CountIndices = o.COUNT_INDICES_DEFAULT,
    jobs: Annotated[int, o.integer("--jobs", "-j", min=1, help="Matrices run in parallel processes.", metavar="N")] = 1,
    wait: Annotated[bool, o.flag("--wait", help="When another batch is using the output folder, wait for it to end instead of refusing.")] = False,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Folder searched first for manifest files (it must exist).", metavar="DIR")] = None,
    only: Annotated[Optional[str], typer.Option("--only", help="Comma-separated entry names (default: all).", metavar="NAMES")] = None,
    redo: Annotated[bool, o.flag("--redo", help="Recompute (matrix, method) pairs that already have a finished line.")] = False,
    old_redo: Annotated[bool, typer.Option("--force", hidden=True, help="Deprecated name of --redo.", metavar=" ")] = False,
    executor: Annotated[Literal["process", "dask"], typer.Option("--executor", **o.CHOICE, help="process (local processes) or dask (an existing Dask cluster).")] = "process",
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786.", metavar="ADDRESS")] = None,
    quiet: o.Quiet = False,
    *,
    settings,
) -> None:
    """Run methods on every matrix of a manifest; resumable, one JSON line per (matrix, method).

    Re-running the same command skips finished pairs and retries failed or
    unavailable ones (--redo recomputes them all).  At the end: a table per
    category, and report.md, report.csv, report.tex, report.json in the
    --out-dir folder.
    Ctrl-C stops within seconds, keeps every finished line and exits 130
    (SIGTERM: the same, exit 143).  One batch at a time per output folder:
    a second one refuses, naming the first, or waits for it with --wait.

    Example: sfapprox batch paper-table1 --data-dir ../shared/realdata --out-dir runs/t1 --methods tsvd --protocol paper
    """
    # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
    from .._base import parse_methods
    from ..datasets import BatchOptions, run_batch
    from ..datasets.fetch import check_data_dir

    with error_boundary():
        out_dir = _out_dir(out_dir, old_out)
        redo = _redo(redo, old_redo)
        check_data_dir(data_dir)  # (spelled --data-dir: batch's messages name its options as typed)
        options = BatchOptions(
            methods=tuple(parse_methods(methods)), budget=budget, protocol=protocol, settings=settings,
            count_indices=count_indices, data_dir=str(data_dir) if data_dir else None,
        )
        names = o.entry_names(only)
        jobs = _usable_jobs(jobs, executor)
        _check_reports(out_dir)
        with batch_progress(quiet) as progress:

            def on_event(kind: str, **info: Any) -> None:
                if kind == "waiting":  # said even when quiet: otherwise a wait looks like a hang
                    note(f"waiting: {out_dir} is in use by another batch ({info['holder']}); "
                         "this one starts when it ends (Ctrl-C gives up)", style="yellow")
                elif progress is not None:
                    progress(kind, **info)

            summary = run_batch(manifest, out_dir, options, only=names, force=redo, jobs=jobs,
                                executor=executor, scheduler=scheduler, on_event=on_event, wait=wait)
        try:
            _after_run(summary, out_dir)
        except KeyboardInterrupt:  # the lines are written as they finish: only the report was cut short
            note(f"interrupted ({stop_cause()}) while making the report: every finished line is kept in "
                 f"{summary.results_path} ({summary.written} written by this run); run the same command again "
                 "to resume and make the report", style="bold yellow")
            raise typer.Exit(EXIT_INTERRUPTED) from None


def _usable_jobs(jobs: int, executor: str) -> int:
    """``--jobs``, at most the cores this process may use, said when lowered (as ``--threads`` is): more
    processes than cores share them, and each fit's wall-clock time limit then buys it less work than
    one run alone (``--jobs 1000`` on 2 cores ran as asked, without a word)."""
    if executor != "process":  # (on --executor dask, --jobs above 1 is refused later)
        return jobs
    return o.at_most_cores("--jobs", jobs, "running {cores} at a time")


def _after_run(summary, out_dir: Path) -> None:
    """What a batch says and writes once its pairs ran: notes, the report's tables and files, its tally."""
    # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
    from ..datasets import build_report, read_results
    from ..datasets.batch import remember_reports

    for line in summary.repaired:
        note(f"note: results.jsonl: {line}", keep=True)  # (the results file was changed: said under --quiet too)
    for line in summary.changed:
        note(f"note: {line}", style="yellow")
    if summary.orphans:
        shown = ", ".join(summary.orphans[:5]) + (f" and {len(summary.orphans) - 5} more"
                                                  if len(summary.orphans) > 5 else "")
        note(f"warning: {out_dir} holds lines of matrices this manifest no longer names: {shown}; the report "
             "ranks them too (delete their lines from results.jsonl, or use another --out-dir)", style="yellow")
    for line in summary.warnings:
        note(f"warning: {out_dir} holds lines made with other settings ({line}); the report ranks "
             "them beside this run's (--redo reruns the selected pairs; another --out-dir keeps runs apart)",
             style="yellow")
    parsed = read_results(summary.results_path)
    records = parsed.records
    report = build_report(records, parsed.left_out())
    tables = report.tables()
    show_tables(tables, Outputs())
    _problems(list(parsed.latest().values()))  # a pair's older lines (a failure since redone) are not its state
    _unavailable(report)
    if summary.no_network:
        skipped = len(summary.downloads_skipped)
        more = f"; skipped the downloads of {skipped} more entr{'y' if skipped == 1 else 'ies'}" if skipped else ""
        note(f"{summary.no_network}{more}", style="yellow")
    if summary.rewrite_error:  # said before the report files, whose own failure would end the command
        say_error(f"{summary.results_path}: this run's lines are kept (appended to it), but its rewrite that "
                  f"drops the older lines they supersede failed: {summary.rewrite_error}; the report counts each "
                  "pair's latest line only, and the next run drops the older ones")
    targets = {fmt: out_dir / f"report{OutputFormat(fmt).suffix}" for fmt in ("markdown", "csv", "latex", "json")}
    if _check_reports(out_dir, at_end=True):
        remember_reports(out_dir, writing=True)
        try:
            write_outputs(report.file_tables(tables), report.to_dict(), Outputs(targets, force=True))
        finally:  # those written before a stop or a failure are this batch's too (not another's, next time)
            remember_reports(out_dir)
    order = ("ok", "not applicable", "failed", "unavailable", "interrupted")
    statuses = sorted(summary.statuses.items(), key=lambda sn: order.index(sn[0]) if sn[0] in order else len(order))
    counts = ", ".join(f"{s} {n}" for s, n in statuses) or "nothing new"
    note(f"{summary.written} line(s) written ({counts}); {summary.skipped} finished pair(s) skipped; "
         f"results in {summary.results_path}", keep=True)  # batch's result (it has no table): kept under --quiet
    if summary.interrupted:
        # named as every other command's stop line names it: Ctrl-C, or SIGTERM (a `timeout`, a job scheduler)
        note(f"interrupted ({stop_cause()}): {_unfinished(summary)}every finished line is kept in "
             f"{summary.results_path}; run the same command again to resume", style="bold yellow")
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.rewrite_error:  # an output that could not be written, as elsewhere
        raise typer.Exit(EXIT_ERROR)
    undone = {status: summary.statuses[status] for status in ("failed", "unavailable") if summary.statuses.get(status)}
    if undone:  # a script or CI must be able to tell (it exited 0); what ran is written all the same
        said = and_listed([f"{n} {status}" for status, n in undone.items()])
        note(f"exit {EXIT_INCOMPLETE}: {said} (see above); the next run tries them again", style="yellow")
        raise typer.Exit(EXIT_INCOMPLETE)


@app.command()
@o.options(o.output_group("report as JSON (every result line, with its settings, and the library versions; of a "
                          "compare's or sweep's JSON, that JSON)"))
def report(
    out_dir: Annotated[Path, typer.Argument(help="A batch output folder (holding results.jsonl), or the JSON file that compare --json or sweep --json wrote.", show_default=False, metavar="OUT_DIR")],
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Of a sweep's JSON: its figure again, as sweep --plot wrote it (needs matplotlib).", metavar="FILE")] = None,
    *,
    outputs,
) -> None:
    """Tables per category (wins per method) from a batch's results, with optional exports; or the table
    of a compare's or sweep's JSON again, as that command showed it (its exports, a sweep's --plot).

    Example: sfapprox report runs/t1 --markdown t1.md --csv t1.csv --latex t1.tex --json -
    """
    # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
    from ..datasets import build_report, read_results
    from ..datasets.batch import check_results_file
    from ..datasets.folder_lock import describe_holder, running_holder
    from ..datasets.results_file import RESULTS_FILE
    from .report import check_format_known, read_json, report_result, result_command

    with error_boundary():
        if out_dir.is_file():  # a compare's or a sweep's JSON, or the results file itself, not its folder
            data = read_json(out_dir)
            check_format_known(out_dir, data)
            command = result_command(data)
            if command is not None:
                report_result(out_dir, data, command, outputs, plot)
                return
            # (quoted: a folder named "my runs" is two words to the shell)
            hint = shell_command("report", str(out_dir.parent) if out_dir.name == RESULTS_FILE else "DIR")
            raise InputError(f"{out_dir}: is a file; give the batch's folder, the one that holds {RESULTS_FILE} "
                             f"({hint}), or the JSON that compare --json or sweep --json wrote")
        if not os.path.lexists(out_dir):  # a mistyped folder: "run batch --out-dir <the typo> first" misled
            raise InputError(f"{out_dir}: no such file or folder; give a batch's output folder (the one that holds "
                             f"{RESULTS_FILE}), or the JSON that compare --json or sweep --json wrote")
        if out_dir.exists() and not out_dir.is_dir():  # /dev/null, a pipe: it said "run batch --out-dir /dev/null"
            raise InputError(f"{out_dir}: is not a folder; give the batch's output folder, the one that holds "
                             f"{RESULTS_FILE}")
        if plot is not None:  # (a batch's tables have no figure: it was an unknown option)
            raise ParameterError("--plot draws the figure of a sweep's JSON (error against budget); a batch's "
                                 "report has none: give report the JSON that sweep --json wrote")
        check_outputs(outputs, inputs=[out_dir / RESULTS_FILE])
        results = out_dir / RESULTS_FILE
        check_results_file(results)  # a folder there is said as such, not as "no results.jsonl"
        # a batch running there now: its lines so far ("run batch first" was said while it ran its first pair)
        running = running_holder(out_dir)
        if not results.is_file() and not running:
            raise InputError(f"{out_dir}: no {RESULTS_FILE}; {_run_batch_first(out_dir)}")
        parsed = read_results(results)  # (a missing one reads as empty)
        skipped = parsed.left_out()  # the incomplete last line too: the tables' notes and the JSON say it
        _say_left_out(results, skipped)
        _missing_factors(parsed, out_dir)
        if not parsed.records and running:
            raise InputError(f"{out_dir}: no result lines yet: the batch using this folder "
                             f"({describe_holder(running)}) has finished no pair so far; run this again later")
        if not parsed.records:  # printed nothing, exit 0: as if the folder held a report of nothing
            raise InputError(f"{results}: no result lines yet (a batch stopped before its first pair finished "
                             f"leaves none); {_run_batch_first(out_dir)}")
        rep = build_report(parsed.records, skipped)
        tables = rep.tables()
        show_tables(tables, outputs)
        _unavailable(rep)
        if running:
            note(f"note: a batch is still running in {out_dir} ({describe_holder(running)}): this report holds "
                 f"the {len(parsed.records)} line(s) it had finished so far")
        # the JSON only when asked for: its library versions import torch, which the tables do not need
        write_outputs(rep.file_tables(tables), rep.to_dict() if "json" in outputs.files else None, outputs)


def _run_batch_first(out_dir: Path) -> str:
    """What to run to fill ``out_dir``: ``run 'sfapprox batch MANIFEST --out-dir DIR' first``, or, where the
    folder's name needs quoting for a shell (``my runs``: two words), the command last, quoted as typed."""
    command = shell_command("batch", "MANIFEST", "--out-dir", str(out_dir))
    if command.endswith(f" {out_dir}"):  # (nothing quoted)
        return f"run '{command}' first"
    return f"run first: {command}"


def _say_left_out(results: Path, skipped: dict[int, str], shown: int = 5) -> None:
    """Warn of the lines of ``results`` a report leaves out (each with why, the first ``shown``), and say
    what to do about them: it said what was wrong, never how to get the pairs back."""
    for number, why in list(skipped.items())[:shown]:
        note(f"warning: {results}: line {number} skipped: {why}", style="yellow")
    if len(skipped) > shown:
        note(f"warning: {results}: {len(skipped) - shown} more invalid line(s) skipped "
             f"({_line_list(list(skipped)[shown:])})", style="yellow")
    if skipped:
        note(f"note: the report lacks those lines' pairs: correct or delete the lines, or run the batch that "
             f"wrote {results} again (it moves lines it cannot read to {results.name}.rejected, cuts an "
             "incomplete last line, and redoes their pairs)")


def _missing_factors(parsed, out_dir: Path, shown: int = 5) -> None:
    """Warn of finished lines whose factors file is gone: the report ranks them, but their fit is in no file."""
    from ..datasets.batch import missing_factors  # here: --help loads no numpy

    missing = missing_factors(parsed, out_dir)
    for (matrix, method), why in list(missing.items())[:shown]:
        note(f"warning: {matrix}/{method}: {why} (the report ranks its line all the same; the batch that made "
             "it redoes the pair when run again)", style="yellow")
    if len(missing) > shown:
        note(f"warning: {len(missing) - shown} more line(s) whose factors file is missing", style="yellow")


def _line_list(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:5])) + (", …" if len(numbers) > 5 else "")
    return f"line {shown}"

