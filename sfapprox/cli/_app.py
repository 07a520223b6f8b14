"""The Typer application, the error boundary and helpers shared by commands."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from .._errors import SfapproxError
from ._render import err

app = typer.Typer(
    name="sfapprox",
    help="Approximate square matrices by Chord sparse factorizations and compare them with "
    "TSVD, Robust PCA and NMF at an equal budget of stored numbers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_state: dict[str, Any] = {"debug": False}

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"sfapprox {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks for errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
) -> None:
    _state["debug"] = debug


@contextlib.contextmanager
def error_boundary() -> Iterator[None]:
    """Turn project errors into one stderr line + exit 2, and Ctrl-C into exit 130.

    Catches :class:`SfapproxError` specifically: ``typer.Exit`` is a
    RuntimeError and must pass through untouched.
    """
    try:
        yield
    except SfapproxError as exc:
        if _state["debug"]:
            traceback.print_exc()
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        err.print("[bold yellow]interrupted[/]: nothing more was written", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def load(path: Path, **options: Any):
    """Load the command's matrix through the public loader API."""
    from ..io import load_matrix
    from ._options import parse_size

    options["max_memory"] = parse_size(options.get("max_memory"))
    return load_matrix(path, **options)


def check_output(path: Path | None, force: bool) -> None:
    """Refuse, before any work, to overwrite an existing output without --force."""
    if path is not None and path.exists() and not force:
        raise SfapproxError(f"{path}: already exists; use --force to overwrite it")
