"""`sfapprox formats` and `sfapprox methods`: what the tool reads, writes and fits."""

from __future__ import annotations

from . import _options as o
from ._app import app, error_boundary
from ._render import check_outputs, emit


@app.command()
@o.options(o.output_group("formats as JSON"))
def formats(*, outputs) -> None:
    """List the input formats (--format keys, extensions) and the output formats.

    Example: sfapprox formats
    """
    _listing("formats", outputs)


@app.command()
@o.options(o.output_group("methods as JSON"))
def methods(*, outputs) -> None:
    """List the approximation methods: name, stored numbers, what they fit.

    Example: sfapprox methods
    """
    _listing("methods", outputs)


def _listing(what: str, outputs) -> None:
    with error_boundary():
        from .. import describe  # here: --help loads no numpy

        check_outputs(outputs)
        listing = describe.describe_formats() if what == "formats" else describe.describe_methods()
        emit(listing.tables, listing.data, outputs)
