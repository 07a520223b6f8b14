"""`sfapprox compare`: several methods at one budget, as a table (and JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from . import _options as o
from ._app import EXIT_INTERRUPTED, announce_start, app, check_output, error_boundary, load
from ._render import comparison_table, err, fit_progress, out

if TYPE_CHECKING:
    from ..budget import Budget
    from ..io import LoadedMatrix
    from ..results import Comparison, MethodResult


@app.command()
def compare(
    path: o.MatrixPath,
    methods: o.Methods = "sf,tsvd",
    budget: o.Budget = "sf",
    json_path: o.JsonOut = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the original and each method's approximation side by side (PNG/PDF/SVG; needs matplotlib).")] = None,
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
    """Compare SF with the baselines at an equal budget of stored numbers.

    Ctrl-C stops the method that is running: the methods finished so far (and
    SF's best factors, if SF was running) are shown and written to --json,
    and the command exits with code 130.

    Example: sfapprox compare image.png --methods sf,tsvd --json r.json --plot side-by-side.png
    """
    with error_boundary():
        from .._validation import check_memory, estimate_dense_bytes
        from ..api import compare_matrix
        from ..budget import resolve_budget
        from ..comparison import RunOptions
        from ..results import write_json

        check_output(json_path, force)
        check_output(plot, force)
        if plot is not None:
            from ..plotting import _pyplot

            _pyplot()  # fail now, not after the fits, when matplotlib is missing
        names = [m.strip() for m in methods.split(",") if m.strip()]
        limit = o.parse_size(max_memory)
        loaded = load(path, format=format, var=var, network=network, two_mode=two_mode, gradient=gradient,
                      resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory)
        for note in loaded.notes:
            err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
        resolved = resolve_budget(budget, loaded.n)  # a bad --budget fails here, before any work
        # Every method is scored on dense N x N arrays (approximation, residual and,
        # for sparse input, X itself): refuse before the first fit, not after it.
        copies = 3 if loaded.is_sparse else 2
        check_memory(copies * estimate_dense_bytes(loaded.n),
                     what=f"{loaded.name}: scoring each method ({copies} dense {loaded.n} x {loaded.n} arrays)",
                     limit=limit)
        finished: list[MethodResult] = []
        approximations: dict | None = {} if plot is not None else None
        try:
            with fit_progress(f"SF {loaded.name}", iters, quiet, o.time_limit_or_none(time_limit)) as progress:
                options = RunOptions(random_state=seed, device=device, dtype=dtype, count_indices=count_indices,
                                     sf={"max_iter": iters, "time_limit": o.time_limit_or_none(time_limit), "max_memory": limit},
                                     callback=announce_start(progress, f"SF {loaded.name}", quiet))
                comparison = compare_matrix(loaded, names, budget=budget, options=options, on_result=finished.append,
                                            approximations=approximations)
        except KeyboardInterrupt:
            # Ctrl-C outside SF's optimizer (which keeps its best factors itself):
            # keep the rows that were finished.
            comparison = _partial(loaded, names, resolved, finished)
        data = comparison.to_dict()
        out.print(comparison_table(data))
        if json_path is not None:
            write_json(json_path, data)
            err.print(f"wrote {escape(str(json_path))}", highlight=False, soft_wrap=True)
        if plot is not None:
            _plot(loaded, comparison, approximations or {}, plot)
            err.print(f"wrote {escape(str(plot))}", highlight=False, soft_wrap=True)
        stopped = next((r for r in comparison.results if r.status == "interrupted"), None)
        if stopped is not None:
            kept = "the rows so far are shown" + (f" and saved to {escape(str(json_path))}" if json_path else "")
            if stopped.fro_error is not None:
                kept += f" ({stopped.method}: the best factors found before the stop)"
            err.print(f"[bold yellow]interrupted[/] (Ctrl-C) during {stopped.method}: {kept}; "
                      "later methods were not run", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED)


def _partial(loaded: LoadedMatrix, names: list[str], resolved: Budget, finished: list[MethodResult]) -> Comparison:
    """The comparison as far as it got: finished rows plus an "interrupted" row for the running method."""
    from ..results import Comparison, MethodResult

    info = {"name": loaded.name, "n": loaded.n}
    info.update(loaded.summary())
    results = list(finished)
    if len(results) < len(names) and not (results and results[-1].status == "interrupted"):
        results.append(MethodResult(names[len(results)], "interrupted", reason="stopped by Ctrl-C before it finished"))
    return Comparison(info, resolved.value, resolved.spec, results)


def _plot(loaded: LoadedMatrix, comparison: Comparison, approximations: dict, path: Path) -> None:
    """Original and approximations side by side, each panel titled with its method and error."""
    from ..plotting import plot_approximations

    labels = {r.method: f"{r.method}  rel {r.rel_error:.3g}" for r in comparison.results if r.rel_error is not None}
    panels = {labels.get(name, name): approx for name, approx in approximations.items()}
    title = f"{loaded.name} (N={loaded.n}), budget {comparison.budget} numbers"
    plot_approximations(loaded.to_dense(), panels, path, title=title)
