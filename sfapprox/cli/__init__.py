"""Command-line interface: a thin Typer layer over the public API."""

from __future__ import annotations

from ._app import app
from . import batch, compare, datasets, fit, info, sweep  # noqa: F401  (registers the commands)

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``sfapprox`` console script."""
    import warnings

    from .._errors import ConvergenceWarning

    # The stop reason is in every table and JSON file; the warning would only repeat it.
    warnings.simplefilter("ignore", ConvergenceWarning)
    app()
