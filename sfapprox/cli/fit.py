"""`sfapprox fit`: fit the Chord sparse factorization and save the factors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from . import _options as o
from ._app import EXIT_INTERRUPTED, announce_start, app, check_distinct, check_output, error_boundary, load
from ._render import err, fit_progress, key_value_table, out


@app.command()
def fit(
    path: o.MatrixPath,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="Write the factors to this HDF5 file.")] = None,
    json_path: o.JsonOut = None,
    iters: o.Iters = o.ITERS,
    time_limit: o.TimeLimit = o.TIME_LIMIT,
    ftol: o.Ftol = 1e-10,
    gtol: o.Gtol = 1e-12,
    factors: o.Factors = None,
    init: o.Init = "auto",
    support: o.Support = "chord",
    base: o.Base = 2,
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

    Ctrl-C stops the optimizer at once: the best factors found so far are
    still written to --out / --json, and the command exits with code 130.

    Example: sfapprox fit mesh.mtx --out mesh-sf.h5
    """
    with error_boundary():
        from ..api import fit_matrix

        check_output(out_path, force)
        check_output(json_path, force)
        check_distinct(out_path, json_path)
        loaded = load(path, format=format, var=var, network=network, two_mode=two_mode, gradient=gradient,
                      resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory)
        for note in loaded.notes:
            err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
        with fit_progress(f"SF {loaded.name}", iters, quiet, o.time_limit_or_none(time_limit)) as progress:
            # A Ctrl-C inside the optimizer is caught by ChordSF.fit (stop_reason
            # "interrupted", best factors kept); fit_matrix then writes the outputs.
            run = fit_matrix(
                loaded,
                budget=budget,
                out=out_path,
                json_path=json_path,
                max_iter=iters,
                time_limit=o.time_limit_or_none(time_limit),
                ftol=ftol,
                gtol=gtol,
                n_factors=factors,
                init=init,
                support=support,
                base=base,
                device=device,
                dtype=dtype,
                random_state=seed,
                max_memory=o.parse_size(max_memory),
                callback=announce_start(progress, f"SF {loaded.name}", quiet),
            )
        summary = run.summary
        rows = [(k, summary[k]) for k in ("fro_error", "rel_error", "nnz", "iterations", "evaluations",
                                           "seconds", "stop_reason", "device", "dtype")]
        out.print(key_value_table(f"SF fit of {loaded.name}", [(k, _show(v)) for k, v in rows]))
        written = [str(p) for p in (out_path, json_path) if p is not None]
        for name in written:
            err.print(f"wrote {escape(name)}", highlight=False, soft_wrap=True)
        if summary["stop_reason"] == "interrupted":
            kept = ("the best factors found so far were written" if out_path is not None else
                    "the error above is that of the best factors found so far (pass --out to keep them)")
            err.print(f"[bold yellow]interrupted[/] (Ctrl-C) after {summary['iterations']} iterations: {kept}",
                      highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED)


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "–" if value is None else str(value)
