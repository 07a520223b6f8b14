"""Command-line interface: a thin Typer layer over the public API.

Importing this package is cheap: the Typer app and its commands load inside
:func:`main`, so a Ctrl-C while they load is an ordinary interruption.

Exit codes (the one place they are decided): 0 success; 1 a command that
checks several items found some bad (``datasets fetch``, ``datasets verify``);
2 an error, reported in one line (bad input or option, an output that
cannot be written, a busy batch folder); 130 stopped by Ctrl-C (SIGINT) and
143 stopped by SIGTERM (``timeout``, systemd, Slurm, ``kill``) and 129 by
SIGHUP (a closed terminal or ssh session), each after saving what was finished; 141 the reader of the output closed the pipe
(:data:`~sfapprox.cli._render.EXIT_BROKEN_PIPE`).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from .._errors import ConvergenceWarning
from .._signals import exit_code, install_stop_handlers

__all__ = ["app", "main"]


def _load_app():
    # here, not at the top: importing sfapprox.cli stays cheap, and main() handles a Ctrl-C while they load
    from ._app import app
    from . import batch, compare, datasets, fit, formats, info, sweep  # noqa: F401  (registers the commands)

    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _load_app()
    raise AttributeError(f"module 'sfapprox.cli' has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``sfapprox`` console script."""
    # The stop reason is in every table and JSON file; the warning would only repeat it.
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.showwarning = _one_line_warning
    # SIGTERM and SIGHUP stop like Ctrl-C: the commands keep what was finished either way.
    install_stop_handlers()
    _spell_glyphs_in_ascii()
    try:
        app = _load_app()
        # not standalone: click's usage errors come here (a boxed "Usage: ... Try ..." block of four lines
        # otherwise), and a command's typer.Exit comes back as its code
        code = app(standalone_mode=False)
    except KeyboardInterrupt:  # while starting, before the commands' own handling
        sys.stderr.write("sfapprox: interrupted while starting; nothing was written\n")
        raise SystemExit(exit_code(130)) from None
    except SystemExit as exc:
        # Commands end an interruption with 130; SIGTERM as the cause makes it 143, SIGHUP 129.
        if isinstance(exc.code, int):
            raise SystemExit(exit_code(exc.code)) from None
        raise
    except Exception as exc:
        # click's classes by name: typer vendors its own copy of click from 0.29, plain click before
        kinds = {kind.__name__ for kind in type(exc).__mro__}
        if "Abort" in kinds:  # a Ctrl-C click caught outside a command's own handling
            sys.stderr.write("sfapprox: interrupted\n")
            raise SystemExit(exit_code(130)) from None
        if "ClickException" in kinds:  # a bad option or argument: one line, as every other error
            raise SystemExit(_usage_error(exc)) from None
        raise
    raise SystemExit(exit_code(code if isinstance(code, int) else 0))


def _ascii_spelling(exc: UnicodeError) -> tuple[str, int]:
    """The codec error handler ``sfapprox.ascii``: what a stream cannot encode, spelled in ASCII as the word
    around it asks (sfapprox's glyphs spelled, a name's characters escaped: ``matrice_\\u00e9.mtx``, which
    showed as ``matrice_e.mtx``)."""
    from ..formats import ascii_in_context  # (light: no numpy)

    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return ascii_in_context(exc.object, exc.start, exc.end), exc.end


def _spell_glyphs_in_ascii() -> None:
    """Let stdout and stderr write what their encoding cannot (``PYTHONIOENCODING=ascii``, a Latin-1 locale)
    in ASCII: a table's ``‖X−X̂‖``, a note's ``±``, a bar's ``━`` ended every command in a UnicodeEncodeError,
    after the work.  (The tables themselves are laid out in ASCII there: _render.writes_glyphs.)"""
    import codecs
    import os

    from ..formats import encodes_glyphs  # (light: no numpy)

    if ":" in os.environ.get("PYTHONIOENCODING", ""):  # the user named an error handler: theirs to keep
        return
    codecs.register_error("sfapprox.ascii", _ascii_spelling)
    for stream in (sys.stdout, sys.stderr):  # (stderr's own handler wrote a dash as "\u2013")
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:  # closed (>&-), or not a text stream Python made
            continue
        # the tables' own test: a stream that has ‖ and ━ but no X̂ or ² (Shift-JIS, GBK) ended `--markdown -` in
        # a UnicodeEncodeError
        try:
            if not encodes_glyphs(stream.encoding):
                reconfigure(errors="sfapprox.ascii")
        except (LookupError, TypeError):  # an encoding Python does not know: left as it is
            pass


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the CLI's other messages are: one line on stderr (``warning: ...``), without the
    source file and line Python adds (they name sfapprox's code, not anything the user can act on).

    On a stream that writes ASCII only, a command in it is quoted as its bytes, as the notes' are
    (:func:`~sfapprox.formats.ascii_commands`): the stream's own spelling wrote ``'matrice_\\u00e9.npy'``,
    no file a shell finds."""
    from ..formats import ascii_commands, printable  # (light: no numpy)

    stream = file or sys.stderr
    text = " ".join(str(message).split())
    if not text.isascii() and not _writes_glyphs(stream):
        text = ascii_commands(text)
    stream.write(f"warning: {printable(text)}\n")


def _writes_glyphs(stream) -> bool:
    """Whether ``stream`` writes sfapprox's glyphs (as the notes' console is asked): a stream without an
    encoding (a StringIO) writes any text; one in an encoding Python does not know is taken for ASCII."""
    from ..formats import encodes_glyphs  # (light: no numpy)

    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    try:
        return encodes_glyphs(encoding)
    except LookupError:
        return False


def _usage_error(exc) -> int:
    """Print a click usage error as one line (``error: ...``, and where the command's help is);
    returns its exit code (2)."""
    if any(kind.__name__ == "NoArgsIsHelpError" for kind in type(exc).__mro__):
        # no arguments at all: its message is the help (click's plain layout, sfapprox.cli._app.HELP_MARKUP),
        # printed whole where --help prints it
        sys.stdout.write(exc.format_message().rstrip("\n") + "\n")
        return exc.exit_code
    from ..formats import printable  # (light: no numpy)

    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    # the message quotes what was typed (an option's name, a file's): escaped as every error line is (click
    # before typer 0.29 escapes none of it, typer's own copy leaves the bidirectional overrides)
    sys.stderr.write(f"error: {printable(message + where)}\n")
    return exc.exit_code
