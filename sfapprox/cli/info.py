"""`sfapprox info`: what was loaded, and the SF configuration and budget for it."""

from __future__ import annotations

from rich.markup import escape

from .. import budget as budget_mod
from ..chord import chord_offsets, default_n_factors
from . import _options as o
from ._app import app, error_boundary, load
from ._render import err, key_value_table, out


@app.command()
def info(
    path: o.MatrixPath,
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
    """Show a matrix's shape, stored entries, symmetry and sign, and its SF budget.

    Example: sfapprox info graph.net
    """
    with error_boundary():
        loaded = load(path, format=format, var=var, network=network, two_mode=two_mode, gradient=gradient,
                      resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory)
        summary = loaded.summary()
        n = summary["n"]
        offsets = chord_offsets(n)
        m = default_n_factors(n)
        count = budget_mod.sf_count(n)
        rank = budget_mod.tsvd_rank_for_budget(n, count)
        rows = [
            ("file", escape(str(summary.get("path")))),
            ("format", summary["format"]),
            ("size", f"{n} x {n}"),
            ("stored entries", f"{summary['nnz']:,} ({100 * summary['density']:.2f}% of N²)"),
            ("storage", "sparse" if loaded.is_sparse else "dense"),
            ("symmetric", "yes" if summary["symmetric"] else "no"),
            ("sign", "non-negative" if summary["nonnegative"] else "has negative entries"),
            ("values", f"min {summary['min']:.4g}, max {summary['max']:.4g}, ‖X‖_F {summary['fro_norm']:.4g}"),
            ("sha256", summary.get("sha256") or "–"),
            ("SF factors M", m),
            ("SF offsets (K)", f"{offsets.tolist()} ({len(offsets)})"),
            ("SF stored numbers N·K·M", f"{count:,} ({100 * count / n**2:.2f}% of N²)"),
            ("TSVD rank at that budget", f"{rank} ({budget_mod.tsvd_count(n, rank):,} numbers)"),
        ]
        out.print(key_value_table(escape(loaded.name), rows))
        for note in summary.get("notes", []):
            err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
