"""`sfapprox info`: what was loaded, SF's structure and budget, and where each method applies."""

from __future__ import annotations

from rich.markup import escape

from . import _options as o
from ._app import app, error_boundary, read_matrix, show_notes
from ._render import check_outputs, key_value_table, out, show_tables, write_outputs


@app.command()
@o.options(o.LOAD, o.OUTPUTS)
def info(
    path: o.MatrixPath,
    force: o.Force = False,
    *,
    load,
    outputs,
) -> None:
    """Show a matrix's shape, entries, symmetry, sign, SF's budget and where each method applies.

    Example: sfapprox info graph.net --json -
    """
    with error_boundary():
        from ..describe import describe

        check_outputs(outputs, force)
        loaded = read_matrix(path, load)
        report = describe(loaded)
        if not any(str(p) == "-" for p in outputs.values()):
            out.print(key_value_table(escape(loaded.name), [(k, escape(str(v))) for k, v in report.facts]))
        show_tables(report.tables, outputs)
        write_outputs(report.tables, report.data, outputs, force=force)
        show_notes(loaded)
