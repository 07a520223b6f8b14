"""Command-line interface: a thin Typer layer over the public API.

Importing this package is cheap: the Typer app and its commands load inside
:func:`main`, so a Ctrl-C while they load is an ordinary interruption.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["app", "main"]


def _load_app():
    from ._app import app
    from . import batch, compare, datasets, fit, formats, info, sweep  # noqa: F401  (registers the commands)

    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _load_app()
    raise AttributeError(f"module 'sfapprox.cli' has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``sfapprox`` console script."""
    import warnings

    from .._errors import ConvergenceWarning

    # The stop reason is in every table and JSON file; the warning would only repeat it.
    warnings.simplefilter("ignore", ConvergenceWarning)
    try:
        app = _load_app()
    except KeyboardInterrupt:
        sys.stderr.write("sfapprox: interrupted while starting; nothing was written\n")
        raise SystemExit(130) from None
    app()
