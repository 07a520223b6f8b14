"""`sfapprox compare`: several methods at one budget, as a table (and JSON, CSV, Markdown, LaTeX)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from . import _options as o
from ._app import (
    EXIT_INTERRUPTED,
    announce_start,
    app,
    check_output,
    check_plot,
    error_boundary,
    read_matrix,
    show_notes,
    stop_cause,
)
from ._render import advise_limits, check_outputs, emit, fit_progress, note, suggest_next


@app.command()
@o.options(o.LOAD, o.FIT, o.OUTPUTS)
def compare(
    path: o.MatrixPath,
    methods: o.Methods = o.DEFAULT_METHODS,
    budget: o.Budget = "sf",
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the original, each method's approximation and its residual (PNG/PDF/SVG; needs matplotlib).", metavar="FILE")] = None,
    count_indices: o.CountIndices = o.COUNT_INDICES_DEFAULT,
    save_factors: Annotated[Optional[Path], typer.Option("--save-factors", help="Write each fitted surrogate to FOLDER/<name>.<method>.h5 (the folder is created).", metavar="FOLDER")] = None,
    saved: Annotated[Optional[list[Path]], typer.Option("--with", help="A saved fit (fit --out, --save-factors) to score beside the methods; repeatable.", metavar="FILE")] = None,
    plot_scale: Annotated[Literal["auto", "linear", "log"], typer.Option("--plot-scale", help="--plot colors: linear values, log10 |values| (sparse graphs), or auto: log below 10% non-zeros or when a few values dominate (half of the non-zeros below 2% of the largest).")] = "auto",
    quiet: o.Quiet = False,
    force: o.Force = False,
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
        from .. import compare as run_compare
        from .._base import parse_methods
        from .._errors import ParameterError
        from ..budget import parse_budget

        names = parse_methods(methods)
        parse_budget(budget)
        check_outputs(outputs, force)
        check_plot(plot, force)
        if save_factors is not None and save_factors.exists() and not save_factors.is_dir():
            raise ParameterError(f"{save_factors}: --save-factors needs a folder, and this is a file")
        from ..factors import is_factors_file, load_factors

        if is_factors_file(path):
            raise ParameterError(f"{path} is a saved fit, not a matrix; compare it with the matrix it approximates: "
                                 f"sfapprox compare MATRIX --with {path}")
        surrogates = {f"saved:{p.stem}": load_factors(p, max_memory=settings.max_memory) for p in saved or []}
        loaded = read_matrix(path, load)
        show_notes(loaded)
        if save_factors is not None:  # each file it would write, before any fitting
            for name in names:
                check_output(save_factors / f"{loaded.name}.{name}.h5", force)
        for name, fit in surrogates.items():
            if fit.source.get("sha256") and fit.source["sha256"] != loaded.sha256:
                note(f"note: {name} was fitted to {fit.source.get('path') or 'another input'} "
                     f"(sha256 {fit.source['sha256'][:12]}…), not to this file", style="yellow")
        with fit_progress(f"{loaded.name}", settings.max_iter, quiet, settings.per_method(len(names)).time_limit) as progress:
            comparison = run_compare(loaded, names, budget=budget, settings=settings, count_indices=count_indices,
                                     callback=announce_start(progress, loaded.name, quiet), include=surrogates)
        if "clamped" in comparison.budget_spec:
            note(f"note: budget {comparison.budget_spec}: no method can use more than the dense N² numbers")
        advise_limits(comparison.results)
        tables = comparison.tables()
        emit(tables, comparison.to_dict(), outputs, force=force)
        suggest_next(comparison, path, names)
        if plot is not None:
            from ..plotting import plot_comparison

            how = plot_comparison(loaded, comparison, plot, scale=plot_scale, force=force)
            note(f"wrote {plot} (colour scale {how}; --plot-scale linear|log to choose)")
        if save_factors is not None:
            from ..factors import save_results

            for written in save_results(comparison, save_factors, source=loaded, force=force):
                note(f"wrote {written}")
        stopped = next((r for r in comparison.results if r.status == "interrupted"), None)
        if stopped is not None:
            kept = "the rows so far are shown" + (" and written" if outputs else "")
            if stopped.fro_error is not None:
                kept += f" ({stopped.method}: the best factors found before the stop)"
            note(f"interrupted ({stop_cause()}) during {stopped.method}: {kept}; the methods not yet run were skipped",
                 style="bold yellow")
            raise typer.Exit(EXIT_INTERRUPTED)

