"""`sfapprox fit`: fit the Chord sparse factorization and save the factors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import _options as o
from ._app import EXIT_INTERRUPTED, app, check_output, error_boundary, load
from ._render import err, fit_progress, key_value_table, out


@app.command()
def fit(
    path: o.MatrixPath,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="Write the factors to this HDF5 file.")] = None,
    json_path: o.JsonOut = None,
    iters: o.Iters = 5000,
    time_limit: o.TimeLimit = None,
    ftol: o.Ftol = 1e-10,
    gtol: o.Gtol = 1e-12,
    factors: o.Factors = None,
    budget: Annotated[Optional[str], typer.Option("--budget", help="Fit the Chord structure that best fills this budget (count or fraction of N²) instead of the reference one.")] = None,
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
    """Fit SF to a matrix; print the error, optionally save factors (--out) and a JSON summary.

    Example: sfapprox fit mesh.mtx --out mesh-sf.h5
    """
    from ..api import fit_matrix

    with error_boundary():
        check_output(out_path, force)
        check_output(json_path, force)
        loaded = load(path, format=format, var=var, network=network, two_mode=two_mode, gradient=gradient,
                      resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory)
        for note in loaded.notes:
            err.print(f"note: {note}", highlight=False)
        with fit_progress(f"SF {loaded.name}", iters, quiet) as progress:
            run = fit_matrix(
                loaded,
                budget=budget,
                out=out_path,
                json_path=json_path,
                max_iter=iters,
                time_limit=time_limit,
                ftol=ftol,
                gtol=gtol,
                n_factors=factors,
                device=device,
                dtype=dtype,
                random_state=seed,
                max_memory=o.parse_size(max_memory),
                callback=progress,
            )
        summary = run.summary
        rows = [(k, summary[k]) for k in ("fro_error", "rel_error", "nnz", "iterations", "evaluations",
                                           "seconds", "stop_reason", "device", "dtype")]
        out.print(key_value_table(f"SF fit of {loaded.name}", [(k, _show(v)) for k, v in rows]))
        for written in (out_path, json_path):
            if written is not None:
                err.print(f"wrote {written}", highlight=False)
        if summary["stop_reason"] == "interrupted":
            err.print("[bold yellow]interrupted[/]: kept the best factors found so far", highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED)


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "–" if value is None else str(value)
