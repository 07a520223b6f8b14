"""`sfapprox compare`: several methods at one budget, as a table (and JSON)."""

from __future__ import annotations

from typing import Annotated

import typer

from . import _options as o
from ._app import EXIT_INTERRUPTED, app, check_output, error_boundary, load
from ._render import comparison_table, err, fit_progress, out


@app.command()
def compare(
    path: o.MatrixPath,
    methods: Annotated[str, typer.Option("--methods", help="Comma-separated methods: sf, tsvd, rpca, rpca-pcp, nmf.")] = "sf,tsvd",
    budget: o.Budget = "sf",
    json_path: o.JsonOut = None,
    count_indices: Annotated[bool, typer.Option("--count-indices", help="Charge sparse entries 2 numbers (value + position).")] = False,
    iters: o.Iters = 5000,
    time_limit: o.TimeLimit = None,
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

    Example: sfapprox compare image.png --methods sf,tsvd --json r.json
    """
    from ..api import compare_matrix
    from ..comparison import RunOptions
    from ..results import Comparison, write_json

    with error_boundary():
        check_output(json_path, force)
        names = [m.strip() for m in methods.split(",") if m.strip()]
        loaded = load(path, format=format, var=var, network=network, two_mode=two_mode, gradient=gradient,
                      resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory)
        for note in loaded.notes:
            err.print(f"note: {note}", highlight=False)
        with fit_progress(f"SF {loaded.name}", iters, quiet) as progress:
            options = RunOptions(random_state=seed, device=device, dtype=dtype, count_indices=count_indices,
                                 sf={"max_iter": iters, "time_limit": time_limit, "max_memory": o.parse_size(max_memory)},
                                 callback=progress)
            comparison: Comparison = compare_matrix(loaded, names, budget=budget, options=options)
        data = comparison.to_dict()
        out.print(comparison_table(data))
        if json_path is not None:
            write_json(json_path, data)
            err.print(f"wrote {json_path}", highlight=False)
        if any(r.status == "interrupted" for r in comparison.results):
            err.print("[bold yellow]interrupted[/]: results so far are shown" + (" and saved" if json_path else ""),
                      highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED)
