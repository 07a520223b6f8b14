"""`sfapprox sweep`: every method at every budget (table, JSON, plot)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from . import _options as o
from ._app import EXIT_INTERRUPTED, app, check_output, error_boundary, load
from ._render import _fmt, err, fit_progress, out


@app.command()
def sweep(
    path: o.MatrixPath,
    budgets: Annotated[str, typer.Option("--budgets", help="Comma-separated budgets: fractions of N², counts or 'sf'.")] = "0.01,0.02,0.05,0.1",
    methods: o.Methods = "sf,tsvd",
    json_path: o.JsonOut = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write an error-vs-budget chart (PNG/PDF/SVG; needs matplotlib).")] = None,
    count_indices: Annotated[bool, typer.Option("--count-indices", help="Charge sparse entries 2 numbers (value + position).")] = False,
    iters: o.Iters = o.ITERS,
    time_limit: o.TimeLimit = o.TIME_LIMIT,
    device: o.Device = "auto",
    dtype: o.Dtype = None,
    seed: o.Seed = 0,
    quiet: o.Quiet = False,
    force: o.Force = False,
    format: o.Format = None,
    var: o.Var = None,
    network: o.Network = None,
    two_mode: o.TwoMode = None,
    gradient: o.Gradient = False,
    resize: o.Resize = None,
    square: o.Square = None,
    covariance: o.Covariance = False,
    mirror: o.Mirror = "auto",
    max_memory: o.MaxMemory = None,
) -> None:
    """Run every method at every budget: rows are budgets, columns methods (relative errors).

    Example: sfapprox sweep graph.net --budgets 0.01,0.02,0.05,0.1 --plot sweep.png
    """
    from ..comparison import RunOptions
    from ..sweep import parse_budget_list
    from ..sweep import sweep as run_sweep

    with error_boundary():
        check_output(json_path, force)
        check_output(plot, force)
        if plot is not None:
            from ..plotting import _pyplot

            _pyplot()  # fail now, not after an hour of fitting, when matplotlib is missing
        names = [m.strip() for m in methods.split(",") if m.strip()]
        specs = parse_budget_list(budgets)
        loaded = load(path, format=format, var=var, network=network, two_mode=two_mode, gradient=gradient,
                      resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory)
        for note in loaded.notes:
            err.print(f"note: {note}", highlight=False)
        with fit_progress(f"SF {loaded.name}", iters, quiet, o.time_limit_or_none(time_limit)) as progress:
            options = RunOptions(random_state=seed, device=device, dtype=dtype, count_indices=count_indices,
                                 sf={"max_iter": iters, "time_limit": o.time_limit_or_none(time_limit), "max_memory": o.parse_size(max_memory)},
                                 callback=progress)
            result = run_sweep(loaded.matrix, specs, names, matrix_info=loaded.summary(), options=options)
        out.print(_sweep_table(result))
        if json_path is not None:
            from ..results import write_json

            write_json(json_path, result.to_dict())
            err.print(f"wrote {json_path}", highlight=False)
        if plot is not None:
            from ..plotting import plot_sweep

            plot_sweep(result, plot)
            err.print(f"wrote {plot}", highlight=False)
        if any(r.status == "interrupted" for p in result.points for r in p.results):
            err.print("[bold yellow]interrupted[/]: budgets not reached were skipped", highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED)


def _sweep_table(result) -> Table:
    n = result.matrix["n"]
    table = Table(title=f"{result.matrix.get('name', 'matrix')} (N={n}): relative error by budget")
    table.add_column("budget", justify="right")
    table.add_column("% of N²", justify="right")
    for method in result.methods:
        table.add_column(method, justify="right")
    for point in result.points:
        rows = {r.method: r for r in point.results}
        ok = [r for r in point.results if r.status == "ok" and r.rel_error is not None]
        best = min(ok, key=lambda r: r.rel_error).method if ok else None
        cells = []
        for method in result.methods:
            r = rows.get(method)
            if r is None:
                cells.append("–")
            elif r.status != "ok":
                cells.append(r.status)
            else:
                text = _fmt(r.rel_error)
                cells.append(f"[bold green]{text}[/]" if method == best else text)
        table.add_row(f"{point.budget:,}", f"{100 * point.budget / n**2:.2f}%", *cells)
    return table
