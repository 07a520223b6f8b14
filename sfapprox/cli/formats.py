"""`sfapprox formats` and `sfapprox methods`: what the tool reads, writes and fits."""

from __future__ import annotations

from . import _options as o
from ._app import app, error_boundary
from ._render import check_outputs, emit


@app.command()
@o.options(o.OUTPUTS)
def formats(force: o.Force = False, *, outputs) -> None:
    """List the input formats (--format keys, extensions) and the output formats.

    Example: sfapprox formats
    """
    with error_boundary():
        from ..formats import Column, OutputFormat, Table
        from ..io import available_formats, format_extensions

        check_outputs(outputs, force)
        inputs = Table("input formats (--format KEY overrides the extension)",
                       [Column("key", "key", "left"), Column("extensions", "extensions", "left"),
                        Column("what", "what", "left")])
        for key, description in available_formats().items():
            inputs.add({"key": key, "extensions": " ".join(format_extensions(key)) or "–", "what": description})
        outputs_table = Table("output formats (compare, sweep, info, report: --json/--csv/--markdown/--latex FILE, '-' for stdout)",
                              [Column("key", "option", "left"), Column("suffix", "suffix", "left")])
        for fmt in OutputFormat:
            outputs_table.add({"key": f"--{fmt.value}", "suffix": fmt.suffix})
        tables = [inputs, outputs_table]
        data = {"inputs": {k: {"extensions": format_extensions(k), "description": d} for k, d in available_formats().items()},
                "outputs": [f.value for f in OutputFormat]}
        emit(tables, data, outputs, force=force)


@app.command()
@o.options(o.OUTPUTS)
def methods(force: o.Force = False, *, outputs) -> None:
    """List the approximation methods: name, stored numbers, what they fit.

    Example: sfapprox methods
    """
    with error_boundary():
        from .. import available_methods
        from .._base import methods as registered
        from ..formats import Column, Table

        check_outputs(outputs, force)
        table = Table("methods (--methods NAME,NAME,...)",
                      [Column("name", "name", "left"), Column("stores", "stores", "left"),
                       Column("summary", "what", "left")])
        for name, spec in registered().items():
            table.add({"name": name, "stores": spec.stores, "summary": spec.summary})
        emit([table], {"methods": available_methods()}, outputs, force=force)
