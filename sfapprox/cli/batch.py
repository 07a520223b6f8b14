"""`sfapprox batch MANIFEST --out DIR` (resumable runs) and `sfapprox report DIR` (tables, exports)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import _options as o
from ._app import EXIT_INTERRUPTED, app, check_output, error_boundary
from ._render import err, out

ManifestPath = Annotated[Path, typer.Argument(help="Dataset manifest (.toml), e.g. data_manifests/synthetic.toml.", show_default=False)]
OutDir = Annotated[Path, typer.Option("--out", help="Output folder: results.jsonl, factors/, report.md/.csv/.tex.", show_default=False)]
Markdown = Annotated[Optional[Path], typer.Option("--markdown", help="Write the tables as Markdown to this file.")]
Csv = Annotated[Optional[Path], typer.Option("--csv", help="Write one CSV row per (matrix, method) to this file.")]
Latex = Annotated[Optional[Path], typer.Option("--latex", help="Write the tables as LaTeX (booktabs) to this file.")]


# ---------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------


def category_tables(report) -> list[Table]:
    """One rich table per category; each row's winning error in bold green."""
    from ..datasets.report import table_cells, wins_line

    tables = []
    for cat in report.tables:
        header, rows = table_cells(cat)
        table = Table(title=f"{cat.category}  ({wins_line(cat)})", title_justify="left")
        for i, col in enumerate(header):
            table.add_column(col, justify="left" if i == 0 or col == "winner" else "right", no_wrap=True)
        for row, cells in zip(cat.rows, rows):
            styled = [f"[bold green]{c}[/]" if header[i] == row.winner else c for i, c in enumerate(cells)]
            table.add_row(*styled)
        tables.append(table)
    return tables


def _print_report(report) -> None:
    for table in category_tables(report):
        out.print(table)
    totals = report.total_wins()
    if totals:
        out.print("total wins: " + ", ".join(f"{m} {n}" for m, n in totals.items()), highlight=False)


def _write_exports(report, targets: dict[str, Path | None], force: bool) -> None:
    from ..datasets.report import ReportFormat
    from ..results import atomic_path

    for fmt, path in targets.items():
        if path is None:
            continue
        with atomic_path(path, force=force) as tmp:
            tmp.write_text(ReportFormat(fmt).render(report), encoding="utf-8")
        err.print(f"wrote {path}", highlight=False)


def _problems(records: list[dict[str, Any]], limit: int = 8) -> None:
    bad = [r for r in records if r["status"] in ("failed", "unavailable")]
    seen = set()
    for r in bad:
        key = (r["matrix"], r["error"])
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > limit:
            err.print(f"… and {len(bad) - limit} more (see results.jsonl)", highlight=False)
            break
        err.print(f"[yellow]{r['status']}[/] {r['matrix']}/{r['method']}: {r['error']}", highlight=False, soft_wrap=True)


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def batch_progress(quiet: bool) -> Iterator[Any]:
    """An event handler drawing matrices done / to do, the current matrix and method, elapsed time."""
    if quiet or not err.is_terminal:
        yield None
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[current]}"), TimeElapsedColumn(), console=err, transient=True,
    )
    state: dict[str, Any] = {"task": None, "last": 0.0}

    def on_event(kind: str, **info: Any) -> None:
        task = state["task"]
        if kind == "start":
            state["task"] = progress.add_task("matrices", total=max(info["total"], 1), current="")
        elif kind == "matrix":
            progress.update(task, current=info["name"])
        elif kind == "method":
            progress.update(task, current=f"{info['matrix']}: {info['method']}")
        elif kind == "iteration" and time.monotonic() - state["last"] > 0.2:
            state["last"] = time.monotonic()
            progress.update(task, current=f"{info['matrix']}: sf it {info['iteration']}/{info['max_iter']}")
        elif kind == "matrix_done":
            progress.advance(task)

    with progress:
        yield on_event


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


@app.command()
def batch(
    manifest: ManifestPath,
    out_dir: OutDir,
    methods: o.Methods = "sf,tsvd",
    budget: o.Budget = "sf",
    protocol: Annotated[str, typer.Option("--protocol", help="default, or paper: TSVD rank ceil(M²/2) and SF's reference structure (Table 1).")] = "default",
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Matrices run in parallel processes.")] = 1,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Folder searched first for manifest files.")] = None,
    iters: Annotated[Optional[int], typer.Option("--iters", min=0, help="SF: maximum L-BFGS iterations (default 20000).")] = None,
    time_limit: o.TimeLimit = o.TIME_LIMIT,
    seed: o.Seed = 0,
    device: o.Device = "auto",
    only: Annotated[Optional[str], typer.Option("--only", help="Comma-separated entry names (default: all).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Recompute (matrix, method) pairs that already have a finished line.")] = False,
    executor: Annotated[str, typer.Option("--executor", help="process (local processes) or dask (an existing Dask cluster).")] = "process",
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786.")] = None,
    quiet: o.Quiet = False,
) -> None:
    """Run methods on every matrix of a manifest; resumable, one JSON line per (matrix, method).

    Re-running the same command skips finished pairs and retries failed or
    unavailable ones.  At the end: a table per category, and DIR/report.md,
    report.csv, report.tex.  Ctrl-C stops within seconds, keeps every finished
    line and exits 130.

    Example: sfapprox batch data_manifests/paper-table1.toml --data-dir ../shared/realdata --out runs/t1 --methods tsvd --protocol paper
    """
    from ..datasets import BatchOptions, build_report, read_results, run_batch

    with error_boundary():
        options = BatchOptions(
            methods=tuple(m.strip() for m in methods.split(",") if m.strip()), budget=budget, protocol=protocol,
            iters=iters, time_limit=o.time_limit_or_none(time_limit), seed=seed, device=device,
            data_dir=str(data_dir) if data_dir else None,
        )
        names = [n.strip() for n in only.split(",") if n.strip()] if only else None
        with batch_progress(quiet) as on_event:
            summary = run_batch(manifest, out_dir, options, only=names, force=force, jobs=jobs,
                                executor=executor, scheduler=scheduler, on_event=on_event)
        for note in summary.repaired:
            err.print(f"note: results.jsonl: {note}", highlight=False)
        records = read_results(summary.results_path).records
        report = build_report(records)
        _print_report(report)
        _problems([r for r in records if r["status"] in ("failed", "unavailable")])
        targets = {fmt: out_dir / f"report.{ext}" for fmt, ext in (("markdown", "md"), ("csv", "csv"), ("latex", "tex"))}
        _write_exports(report, targets, force=True)
        counts = ", ".join(f"{s} {n}" for s, n in summary.statuses.items()) or "nothing new"
        err.print(f"{summary.written} line(s) written ({counts}); {summary.skipped} finished pair(s) skipped; "
                  f"results in {summary.results_path}", highlight=False)
        if summary.interrupted:
            err.print(f"[bold yellow]interrupted[/]: every finished line is kept in {summary.results_path}; "
                      "run the same command again to resume", highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED)


@app.command()
def report(
    out_dir: Annotated[Path, typer.Argument(help="A batch output folder (holding results.jsonl).", show_default=False)],
    markdown: Markdown = None,
    csv: Csv = None,
    latex: Latex = None,
    force: o.Force = False,
) -> None:
    """Tables per category (wins per method) from a batch's results, with optional exports.

    Example: sfapprox report runs/t1 --markdown t1.md --csv t1.csv --latex t1.tex
    """
    from .._errors import InputError
    from ..datasets import build_report, read_results
    from ..datasets.batch import RESULTS_FILE

    with error_boundary():
        targets = {"markdown": markdown, "csv": csv, "latex": latex}
        for path in targets.values():
            check_output(path, force)
        results = out_dir / RESULTS_FILE
        if not results.is_file():
            raise InputError(f"{out_dir}: no {RESULTS_FILE}; run 'sfapprox batch MANIFEST --out {out_dir}' first")
        parsed = read_results(results)
        if parsed.bad_lines or parsed.tail_bytes:
            err.print(f"note: {results}: {len(parsed.bad_lines)} invalid line(s) and {parsed.tail_bytes} bytes of an "
                      "incomplete last line ignored", highlight=False)
        rep = build_report(parsed.records)
        _print_report(rep)
        _write_exports(rep, targets, force)
