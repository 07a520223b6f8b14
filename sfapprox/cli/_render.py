"""Rich rendering of results (tables to stdout) and progress (to stderr)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def _table_console() -> Console:
    console = Console()
    # Piped or redirected, rich assumes 80 columns and squeezes the details column
    # to a few letters; a log file has no width, so give the tables room (COLUMNS still wins).
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=160)
    return console


out = _table_console()
err = Console(stderr=True)


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}g}"


def comparison_table(data: dict[str, Any]) -> Table:
    """The compare table: one row per method, the winner in bold green."""
    matrix, budget = data["matrix"], data["budget"]
    table = Table(title=f"{matrix.get('name', 'matrix')}  (N={matrix['n']}, budget {budget:,} stored numbers)")
    for col, justify in (("method", "left"), ("stored", "right"), ("budget", "right"), ("‖X−X̂‖_F", "right"),
                         ("relative", "right"), ("seconds", "right"), ("status", "left"), ("details", "left")):
        table.add_column(col, justify=justify, no_wrap=col != "details")
    for row in data["results"]:
        used = f"{100 * row['nnz'] / budget:.1f}%" if row.get("nnz") is not None else "–"
        style = "bold green" if row["method"] == data.get("winner") else None
        table.add_row(
            row["method"],
            f"{row['nnz']:,}" if row.get("nnz") is not None else "–",
            used,
            _fmt(row.get("fro_error")),
            _fmt(row.get("rel_error")),
            _fmt(row.get("seconds"), 3),
            row["status"],
            row.get("reason") or _details(row),
            style=style,
        )
    return table


_SHORT = {"rank": "r", "n_sparse": "s", "index_storage": "indices", "n_factors": "M", "base": "b",
          "iterations": "it", "stop_reason": "stop"}


def _details(row: dict[str, Any]) -> str:
    params = row.get("params", {})
    # None marks a part the method did not use (sf+s that kept no factors has no base)
    return " ".join(f"{short}={params[key]}" for key, short in _SHORT.items() if params.get(key) is not None)


def key_value_table(title: str, rows: list[tuple[str, Any]]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, str(value))
    return table


@contextlib.contextmanager
def fit_progress(label: str, total: int, quiet: bool, time_limit: float | None = None) -> Iterator[Any]:
    """A progress bar with the current error; a no-op callback when quiet or piped.

    The bar fills with whichever limit is nearer: iterations or the time limit.
    """
    if quiet or not err.is_terminal:
        yield lambda info: None
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("it {task.fields[iteration]}"),
        TextColumn("error {task.fields[error]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    with progress:
        task = progress.add_task(label, total=1.0, iteration=0, error="–")

        def update(info: dict) -> None:
            done = info["iteration"] / max(total, 1)
            if time_limit:
                done = max(done, info["elapsed"] / time_limit)
            progress.update(task, completed=min(done, 1.0), iteration=info["iteration"],
                            error=_fmt(info["fro_error"]))

        yield update
