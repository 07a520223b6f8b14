"""Where output goes: tables to stdout (or stderr when stdout carries data), files, progress.

Tables are built by the library (:mod:`sfapprox.formats`); this module only
prints them with rich and writes the requested files.  Machine output goes
to stdout only when asked for with ``-`` (``--json -``); the human tables then
go to stderr, so that a pipe receives clean JSON/CSV.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.text import Text
from rich.table import Column as TableColumn
from rich.table import Table as RichTable

# the progress line is the library's (progress=True of the Python API draws it too); the CLI draws it on its stderr
from .._display import _ElapsedColumn, draws_bar, elapsed_text, fit_display, on_terminal, quiet_update
from .._atomic import check_writable, output_target, resolved_path, stream_kind, write_text
from .._errors import ParameterError, SfapproxError
from ..formats import (PLOT_SUFFIXES, OutputFormat, Table, ascii_commands, ascii_table, at_spaces, encodes_glyphs, limit_text,
                       list_heading, listed_item, printable, render_rich, shell_quote, to_ascii)


#: Width of a console that writes to a pipe or a file: tables there are as wide as their content.
UNBOUNDED = 100_000


#: Exit status when the reader of the output went away (``sfapprox info X | head -1``): 128 + SIGPIPE, what
#: a Unix tool that a closed pipe stops gives (rich's own handling exits 1, the status of a failed check).
EXIT_BROKEN_PIPE = 141


class _Console(Console):
    def print(self, *args: Any, **kwargs: Any) -> None:
        """rich's print; a write that fails (stdout on a full disk, ``> /dev/full``) names the stream, which
        the error then lacked ("error: No space left on device")."""
        try:
            super().print(*args, **kwargs)
        except OSError as exc:
            if exc.filename is None and not closed_pipe(exc):
                exc.filename = "standard error" if self.stderr else "standard output"
            raise

    def on_broken_pipe(self) -> None:
        """The reader closed the pipe: rich's own handling (nothing more is written, stdout goes to
        /dev/null so Python's flush at exit stays quiet), with a closed pipe's status, not a failure's."""
        try:
            super().on_broken_pipe()
        except SystemExit:
            raise SystemExit(EXIT_BROKEN_PIPE) from None


def _console(stderr: bool = False) -> Console:
    console = _Console(stderr=stderr)
    # Piped or redirected, rich assumes 80 columns; a log file has no width, so tables are
    # drawn as wide as their content there (COLUMNS, when set, still wins).
    if not on_terminal(console) and "COLUMNS" not in os.environ:
        console = _Console(stderr=stderr, width=UNBOUNDED)
    return console


def table_width(console: Console) -> int | None:
    """The width tables must fit on ``console``: the window's, or None (unbounded) for a pipe."""
    return None if console.width >= UNBOUNDED else console.width


out = _console()
err = _console(stderr=True)


def one_line() -> bool:
    """Messages on stderr stay one line each in a pipe or a log; in a terminal they wrap at words."""
    return not on_terminal(err)


def say(markup: str) -> None:
    """A message (rich markup) on stderr: one line in a pipe or a log; in a terminal broken at spaces to the
    window's width (:func:`at_spaces`), a word wider than the window left whole for the terminal to wrap.

    rich folded such a word at the window's edge with a line break of its own: a path or a command copied
    from an error line or a "wrote" line came out in two pieces (the terminal's own wrapping copies whole).
    """
    text = err.render_str(markup, highlight=False)
    if not one_line():
        text = at_spaces(text, err.width)
    err.print(text, highlight=False, soft_wrap=True)


#: Indents of a command laid out on several lines (:func:`command_lines`): its first line, and the others.
COMMAND_INDENT = ("  ", "    ")


def command_lines(groups: Sequence[Sequence[str]], width: int) -> list[str]:
    """A shell command laid out to be copied from a window ``width`` columns wide.

    Parameters
    ----------
    groups : sequence of sequence of str
        The command's words, already quoted (:func:`~sfapprox.formats.shell_quote`), in groups kept
        on one line where a line holds them: an option with its value.
    width : int
        The window's width.

    Returns
    -------
    list of str
        The lines, indented (:data:`COMMAND_INDENT`), broken only between
        words, each but the last ending in `` \\`` (the shell's continuation:
        the lines pasted are one command).  A word wider than a line gets a
        line of its own, whole: the terminal then wraps it softly, and a copy
        of it is still one word (cut at the edge, it was two).

    Examples
    --------
    >>> command_lines([["sfapprox"], ["compare"], ["m.mtx"], ["--methods", "tsvd,sparse"]], 30)
    ['  sfapprox compare m.mtx \\\\', '    --methods tsvd,sparse']
    """
    pieces: list[str] = []
    for group in groups:  # a group no line holds goes word by word (--json, then its long path)
        joined = " ".join(group)
        whole = cell_len(f"{COMMAND_INDENT[1]}{joined} \\") <= width
        pieces.extend([joined] if whole else group)
    lines: list[str] = []
    line = COMMAND_INDENT[0]
    for i, piece in enumerate(pieces):
        fresh = line.strip() == ""
        more = " \\" if i < len(pieces) - 1 else ""  # (a line that goes on needs its continuation's room)
        if not fresh and cell_len(f"{line} {piece}{more}") > width:
            lines.append(f"{line} \\")
            line, fresh = COMMAND_INDENT[1], True
        line = f"{line}{piece}" if fresh else f"{line} {piece}"
    return [*lines, line]


def show_command(label: str, groups: Sequence[Sequence[str]]) -> None:
    """``label`` and a command to copy (``groups``: its words, an option with its value) on stderr.

    One line in a pipe or a log, and in a window it fits.  In a narrower
    window the label has a line of its own and the command follows, broken
    only between words with the shell's `` \\`` continuation
    (:func:`command_lines`), so that a copy of those lines runs: the terminal
    broke the one line at its edge, in the middle of a word or an option.  A
    file's name with a control character or a byte that is no UTF-8 is
    quoted as ``$'...'`` with escapes (:func:`~sfapprox.formats.shell_quote`):
    the command to paste, and nothing the terminal acts on.  On a stream that writes ASCII only, a name
    that is not ASCII is quoted as its bytes (``$'matrice_\\xc3\\xa9.mtx'``): spelled in ASCII it named
    another file (``'matrice_e.mtx'``).
    """
    ascii = not writes_glyphs(err)
    quoted = [[shell_quote(word, ascii=ascii) for word in group] for group in groups]
    line = " ".join([label, *(word for group in quoted for word in group)])
    lines = [line] if one_line() or cell_len(line) <= err.width else [label, *command_lines(quoted, err.width)]
    # soft_wrap: never re-wrapped by rich (a word wider than the window is left whole, the terminal wraps it)
    err.print(Text("\n".join(lines), style="bold"), highlight=False, soft_wrap=True)


def literal(text: str) -> str:
    """``text`` in rich markup as it is: ``[...]`` shown, not read as a style, and what a terminal would act
    on (an ESC in a file's name) written as its escape (:func:`~sfapprox.formats.printable`).  On a stderr
    that writes ASCII only, a command in it is quoted as its bytes (:func:`~sfapprox.formats.ascii_commands`):
    the stream's own spelling wrote ``'matrice_\\u00e9.npy'``, no file a shell finds."""
    return escape(printable(text if text.isascii() or writes_glyphs(err) else ascii_commands(text)))


#: ``--quiet`` of the command that runs (:func:`quiet_notes`): its informational notes are left out.
_quiet = {"notes": False}


def quiet_notes(quiet: bool) -> None:
    """Leave the informational notes out (``--quiet``), or not; each command starts with them shown.

    ``--quiet`` keeps what a script needs: the results (the tables on stdout,
    the files asked for), errors, warnings and stops (a note with a style:
    yellow or red), and the notes that say the result is not what was asked
    (``keep``: a fit that kept its start).  It leaves out the progress display
    and what only informs: how the file was read, what was written, the next
    command to try, the time each method took against its limit (the table
    and the JSON say a limit that stopped a fit: ``stop=time_limit``).
    """
    _quiet["notes"] = bool(quiet)


def notes_quiet() -> bool:
    """Whether the command runs with ``--quiet``: informational notes are left out (:func:`quiet_notes`)."""
    return _quiet["notes"]


def note(message: str, *, style: str = "", keep: bool | None = None) -> None:
    """One line on stderr (markup in ``message`` is printed as is); left out under ``--quiet`` unless
    ``keep`` (default: a line with a ``style``, a warning or a stop, is kept; a plain one informs)."""
    if notes_quiet() and not (bool(style) if keep is None else keep):
        return
    text = literal(message)
    say(f"[{style}]{text}[/]" if style else text)


@dataclass(frozen=True)
class Outputs:
    """A table command's output files by format (``"json"`` -> path, ``-`` for stdout) and ``--force``."""

    files: dict[str, Path] = field(default_factory=dict)
    force: bool = False
    #: Another of the command's outputs (its --plot) goes to standard output: the tables go to stderr.
    stdout_taken: bool = False


def is_stdout(path: Path | str | None) -> bool:
    """True for ``-`` and for a path that writes to this process's standard output (``/dev/stdout``,
    ``/dev/fd/1``, or the very file stdout is redirected to): the tables then go to stderr, or they
    would be mixed into the output."""
    if path is None:
        return False
    if str(path) == "-":
        return True
    try:
        target = os.stat(path)
        # /dev/null takes anything and keeps nothing: nothing written there mixes with the tables (with
        # `> /dev/null`, `--plot /dev/null` sent the tables to stderr)
        return os.path.samestat(target, os.fstat(1)) and not os.path.samestat(target, os.stat(os.devnull))
    except (OSError, ValueError):  # no such file, or no stdout at all
        return False


def stdout_claimed(outputs: Outputs) -> bool:
    """True when some output goes to standard output (``-``, ``/dev/stdout``)."""
    return outputs.stdout_taken or any(is_stdout(p) for p in outputs.files.values())


def stdout_closed() -> bool:
    """True when the process has no standard output (started with ``>&-``: Python's ``sys.stdout`` is None)."""
    return sys.stdout is None


def human_console(outputs: Outputs) -> Console:
    """Where the tables for a person go: stdout, or stderr when stdout carries machine output or is
    closed (``>&-``: rich printed them nowhere, and a finished sweep exited 0 having shown nothing)."""
    return err if stdout_claimed(outputs) or stdout_closed() else out


def check_outputs(outputs: Outputs, inputs: Sequence[Path | str] = ()) -> None:
    """Refuse, before any work, outputs that could not be written, would overwrite a file or are one of
    the command's ``inputs``."""
    dashes = [fmt for fmt, p in outputs.files.items() if is_stdout(p)]
    if len(dashes) > 1:
        raise ParameterError(f"only one output can go to standard output ('-'); got {', '.join('--' + d for d in dashes)}")
    closed = [fmt for fmt, p in outputs.files.items() if str(p) == "-"]
    if closed and stdout_closed():  # it ended the command with a traceback, after all the work
        raise ParameterError(f"--{closed[0]} -: standard output is closed (the command was started with >&-); "
                             "give a file name, or redirect standard output to one")
    files = named_outputs(outputs)
    for _, path in files:
        check_output(path, outputs.force, inputs)
    check_distinct(*files)


def check_plot(path: Path | None, force: bool, outputs: Outputs | None = None,
               inputs: Sequence[Path | str] = ()) -> Outputs | None:
    """Refuse, before any work, a figure that could not be written (type, matplotlib, folder), that
    is the command's input, or that another of its ``outputs`` names too (the table's text went into
    the figure's file, after the whole run).  Returns the ``outputs`` to use: marked
    ``stdout_taken`` where the figure goes to standard output (the tables then go to stderr)."""
    if path is None:
        return outputs
    # a pipe or a device without a suffix (/dev/null, /dev/stdout) gets a PNG, as README says outputs
    # are written through there (it was "cannot write a figure of type '(none)'")
    if str(path) == "-":  # the tables' '-': it was "cannot write a figure of type '(none)'"
        raise ParameterError("--plot -: a figure is not written to '-'; name a file (plot.png), or /dev/stdout "
                             "with standard output redirected (--plot /dev/stdout > plot.png)")
    through = not path.suffix and stream_kind(output_target(path)) is not None
    if path.suffix.lower() not in PLOT_SUFFIXES and not through:
        raise ParameterError(f"{path}: cannot write a figure of type {path.suffix or '(none)'!r}; "
                            f"use one of {', '.join(PLOT_SUFFIXES)}")
    check_output(path, force, inputs)
    if outputs is not None:
        check_distinct(*named_outputs(outputs), ("--plot", path))
        if is_stdout(path):  # a figure on stdout: the tables (and any other output) may not go there too
            if sys.stdout.isatty():
                raise ParameterError(f"--plot {path}: the figure (PNG, binary) would go to the terminal; redirect "
                                     "standard output (> plot.png) or give a file name")
            if stdout_claimed(outputs):
                raise ParameterError(f"only one output can go to standard output; got --plot {path} and another")
            outputs = dataclasses.replace(outputs, stdout_taken=True)
    from ..plotting import _new_figure

    _new_figure()  # fail now, not after the fits, when matplotlib is missing
    return outputs


def check_output(path: Path | None, force: bool, inputs: Sequence[Path | str] = ()) -> None:
    """Refuse, before any work, an output that could not be written or would overwrite a file.

    Checks that ``path`` is not a folder, is none of the command's ``inputs``
    (not even with ``force``: the result would replace what it is computed
    from), does not exist (unless ``force``), and that its folder exists and
    is writable, so that a long fit never ends in "cannot write".
    """
    if path is None:
        return
    for source in read_files(inputs):
        with contextlib.suppress(OSError):
            if os.path.samefile(path, source):
                raise ParameterError(f"{path}: is this command's input ({source}); write the output to another file")
    resolved_path(path)  # a loop of links: refused here, not when something follows it
    path = output_target(path)  # a link's target is what gets written
    if stream_kind(path) is not None:  # /dev/null, a pipe: written through, nothing overwritten
        return
    check_writable(path)
    if path.exists() and not force:
        raise ParameterError(f"{path}: already exists; use --force to overwrite it")


def read_files(inputs: Sequence[Path | str]) -> list[Path]:
    """The command's inputs and the files reading them opens beside them (a LINQS ``.cites`` file's
    ``.content``: :func:`sfapprox.io.input_files`)."""
    if not inputs:
        return []
    from ..io import input_files  # here: sfapprox.io loads numpy, which a command without inputs need not

    return [file for given in inputs for file in input_files(given)]


def check_distinct(*paths: Path | tuple[str, Path | None] | None) -> None:
    """Refuse the same file named for two outputs (one would silently replace the other).  Each output is a
    path, or ``(option, path)``: the message then names the two options, as typed ("--plot and --json";
    the paths alone read "s.png and s.png"), and both paths where they differ (a link to the other)."""
    seen: dict[Path, tuple[str, Path]] = {}
    for item in paths:
        option, path = item if isinstance(item, tuple) else ("", item)
        if path is None or stream_kind(output_target(path)) is not None:  # /dev/null may take them all
            continue
        key = resolved_path(path)
        if key in seen:
            first_option, first = seen[key]
            same = str(first) == str(path)
            if first_option and option and first_option != option:
                named = f"{first_option} and {option}" if same else f"{first_option} {first} and {option} {path}, the same file"
            else:
                named = f"twice, as {path}" if same else f"{first} and {path}, the same file"
            raise ParameterError(f"{path}: named for two outputs ({named}); give each its own file")
        seen[key] = (option, path)


def named_outputs(outputs: Outputs) -> list[tuple[str, Path]]:
    """``(option, path)`` of each output to a file (``--json``, ``--csv``, ...), for :func:`check_distinct`."""
    return [(f"--{fmt}", p) for fmt, p in outputs.files.items() if str(p) != "-"]


def writes_glyphs(console: Console) -> bool:
    """Whether ``console``'s stream can write sfapprox's non-ASCII glyphs (``‖X−X̂‖``, ``±``, ``★``, a bar's
    ``━``: :data:`~sfapprox.formats.GLYPHS`); not with ``PYTHONIOENCODING=ascii`` or a Latin-1 locale, where
    they are spelled in ASCII."""
    try:
        return encodes_glyphs(console.encoding)
    except LookupError:  # an encoding Python does not know: ASCII is safe
        return False


def show_tables(tables: list[Table], outputs: Outputs) -> None:
    """Print the tables for a person: stdout, or stderr when stdout carries machine output."""
    console = human_console(outputs)
    if not writes_glyphs(console):  # laid out on the ASCII text it prints, so that its columns stay in line
        tables = [ascii_table(table) for table in tables]
    # a long listing is capped on a terminal only: a pipe (| grep layers.3) gets every row, as the files do
    for item in render_rich(tables, table_width(console), capped=on_terminal(console)):
        console.print(item)


def output_steps(tables: list[Table], data: Any, outputs: Outputs) -> list[Callable[[], None]]:
    """One step per requested format: write it (atomically) to its file, or to stdout for ``-``."""
    def step(fmt: str, path) -> Callable[[], None]:
        def write() -> None:
            text = OutputFormat(fmt).render(tables, data)
            if str(path) == "-":
                _to_stdout(text)
            else:
                write_text(path, text, force=outputs.force)
                note(f"wrote {path}")
        return write

    return [step(fmt, path) for fmt, path in outputs.files.items()]


def _to_stdout(text: str) -> None:
    """Machine output on stdout; a reader that went away (``--json - | head -1``) ends the command as a
    closed pipe does (exit 141, nothing more written), not as an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        out.on_broken_pipe()
    except OSError as exc:  # named, as the tables' console names it ("error: No space left on device" alone)
        if exc.filename is None:
            exc.filename = "standard output"
        raise


def write_all(steps: Sequence[Callable[[], None]]) -> None:
    """Run every output step, even after one fails: a file that cannot be put in place (taken meanwhile,
    a full disk) costs that file, not the outputs after it (the plot, the factors).  Each failure is
    one ``error:`` line; the last is raised for the command's error boundary (exit 2)."""
    failures: list[Exception] = []
    for step in steps:
        try:
            step()
        except (SfapproxError, OSError) as exc:
            failures.append(exc)
    closed = [exc for exc in failures if closed_pipe(exc)]  # the reader went away: not an error to report
    failures = [exc for exc in failures if not closed_pipe(exc)]
    for exc in failures[:-1]:
        say_error(str(exc) if isinstance(exc, SfapproxError) else os_error_text(exc))
    if failures:
        raise failures[-1]
    if closed:
        out.on_broken_pipe()


def closed_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` is the reader of an output closing its pipe (``--out - | head -c 10``, a named
    pipe's reader gone): a closed pipe's exit status 141, not an error line and 2."""
    return isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) == errno.EPIPE


def say_error(message: str) -> None:
    """One ``error:`` line on stderr, whatever the message held (its whitespace folded; escaped, so that
    "[...]" in a path or message is printed, not read as rich markup)."""
    say(f"[bold red]error:[/] {literal(' '.join(message.split()))}")


def os_error_text(exc: OSError) -> str:
    """An OSError as a user reads it: the file it concerns, then what went wrong (``f: No space left``)."""
    where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
    return f"{where}{exc.strerror or exc}"


def write_outputs(tables: list[Table], data: Any, outputs: Outputs) -> None:
    """Write each requested format (atomically) to its file, or to stdout for ``-`` (:func:`write_all`)."""
    write_all(output_steps(tables, data, outputs))


def emit(tables: list[Table], data: Any, outputs: Outputs, *, then: Sequence[Callable[[], None]] = ()) -> None:
    """Show the tables to the person and write every requested format (the end of each table command),
    then the command's other outputs ``then`` (a plot, saved factors): each is written whatever
    became of the others (:func:`write_all`)."""
    show_tables(tables, outputs)
    write_all([*output_steps(tables, data, outputs), *then])


def advise_limits(results, *, scored_apart: bool = False) -> None:
    """One stderr line naming the methods that stopped on their time limit, with the knob to turn; one
    more for those that ran well past it: a fit whose least work (a pass over every column) does not fit
    in it, which "stopped on the time limit" misstated (randomized SVD from columns: 15.4 s of 4 s), and
    a closed form that is not cut (tsvd's SVD, sparse's selection), which said nothing (tsvd at N = 4,096,
    budget 0.3: 36-38 s of a 2 s limit).  A row's seconds are its whole turn (checks, structure, starts,
    fit, scoring: :func:`~sfapprox.comparison.run_method`), so a fit that kept to its limit can still have
    run past it in its setting up or scoring, which the note then says (:func:`_why_over`); ``scored_apart``:
    the matrix was compared from columns, its rows scored together afterwards, in no row's seconds."""
    limited = [r for r in results if isinstance(r.params, dict) and r.time_limit and r.status == "ok"]
    timed = [r for r in limited if r.params.get("stop_reason") == "time_limit"]
    by_name = {r.method: r for r in timed}
    over = {r.method: (r.seconds, r.time_limit, _why_over(r, scored_apart)) for r in limited if _past(r, r.seconds)}
    # a fit that kept to its limit did stop on it, whatever its setting up and scoring took besides
    cut = {r.method: r.time_limit for r in timed
           if not (_past(r, r.seconds) if _fit_seconds(r) is None else _past(r, _fit_seconds(r), fit=True))}
    if cut:
        limits = ", ".join(f"{m} {limit_text(t)} s{_few_iterations(by_name[m])}" for m, t in cut.items())
        note(f"note: stopped on the time limit before converging: {limits}; --time-limit SECONDS (each method's; "
             "0 for none) allows closer fits")
    if over:
        took = ", ".join(f"{m} {limit_text(s)} s of {limit_text(t)} s ({least})" for m, (s, t, least) in over.items())
        note(f"note: ran past the time limit: {took}; a longer --time-limit, or a smaller budget, keeps to it")
    compiled = [f"{r.method}'s {limit_text(r.seconds)} s include {limit_text(_compiling(r))} s" for r in results if _compiling(r)]
    if compiled:
        compiling_note(", ".join(compiled))


def _past(r, seconds, fit: bool = False) -> bool:
    """Whether ``seconds`` of row ``r`` (its own, or its fit's: ``fit``) ran well past its time limit: over
    :data:`OVERRUN` times it and a second, its kernels' compiling (a first run's, said apart) left out — the
    fit's alone from its fit's seconds (the scoring's compiling is in the scoring's seconds, not the fit's:
    taken off them too, a fit that overran its limit read as one that kept to it)."""
    compiled = _compiling(r, ("compile_seconds",) if fit else _COMPILE_PARTS)
    return bool(seconds) and seconds - compiled > OVERRUN * r.time_limit + 1.0


def _fit_seconds(r) -> float | None:
    """A row's fit's own seconds (``params["fit_seconds"]``, the estimator's clock); None where not recorded
    (a row written before it was, a saved fit's)."""
    fit = r.params.get("fit_seconds")
    return float(fit) if isinstance(fit, (int, float)) and not isinstance(fit, bool) else None


def _why_over(r, scored_apart: bool = False) -> str:
    """Why row ``r`` ran past its time limit, in the note's parentheses.  A row's seconds are its whole turn
    in the comparison (checks, factory, starts, fit, scoring); its fit's own are ``params["fit_seconds"]``.
    Where the fit kept to the limit, what ran past it is the rest, which the limit does not cut (SF's
    structure timing at N = 12,000: 4 s): said so, not "its least work does not fit in it".  A first run's
    compiling is named too, or "sf 15 s of 3 s" read as 15 s of fitting."""
    fit = _fit_seconds(r)
    if fit is not None and not _past(r, fit, fit=True):
        # from columns every row is scored afterwards by one joint pass, in no row's seconds: only the setting up
        rest = "setting it up" if scored_apart else "setting up and scoring it"
        why = f"{limit_text(r.seconds - fit)} s of them outside its fit: {rest}, which the limit does not cut"
    else:
        why = _least_work(r)
    compiled = _compiling(r)
    return f"{why}; {limit_text(compiled)} s compiling its kernels, a first run" if compiled else why


def _least_work(r) -> str:
    """Why a row that ran past its time limit could not keep to it: its least work (a pass over the columns
    of a matrix read by columns; else its start, which rpca at N = 8,192 was said to be such a pass), or
    its closed form, which is not cut (an iterative fit that converged, or ran its iterations, past the limit
    is no closed form: its least work did not fit)."""
    if r.params.get("stop_reason") in ("exact", "closed_form"):
        return "its closed form is not cut"
    if r.params.get("path") == "columns":
        return "its least work, one pass over the matrix's columns, does not fit in it"
    return "its least work does not fit in it"


def compiling_note(which: str) -> None:
    """The stderr line saying that seconds ``which`` ("sf's 12.8 s include 9.83 s") went to compiling the
    kernels: outside the time limit, so the seconds beside a ``--time-limit`` read as a limit not kept."""
    note("note: compiling the kernels, once after installing (cached for later runs, and not counted in "
         f"--time-limit): {which}")


#: The parts of a row's seconds that went to compiling kernels: its fit's and its scoring's.
_COMPILE_PARTS = ("compile_seconds", "scoring_compile_seconds")


def _compiling(r, parts: tuple[str, ...] = _COMPILE_PARTS) -> float:
    """Seconds of a result's that went to compiling its kernels, its fit's (``params["compile_seconds"]``) and its
    scoring's (``params["scoring_compile_seconds"]``; both are in a row's seconds), else 0; ``parts``: those alone."""
    params = r.params if isinstance(r.params, dict) else {}
    values = (params.get(key) for key in parts)
    return float(sum(s for s in values if isinstance(s, (int, float)) and s > 0))


#: A method that took more than this many times its time limit (and a second) is said to have run past it.
OVERRUN = 1.5
#: Iterations below which a fit cut by its time limit says what one evaluation took (the limit to ask for).
FEW_ITERATIONS = 20


def _few_iterations(r) -> str:
    """`` (3 iterations; an evaluation takes 15.2 s here)`` for a fit that the time limit left with fewer
    than :data:`FEW_ITERATIONS` iterations and that timed its evaluations, else ``""``."""
    iterations, each = r.params.get("iterations"), r.params.get("evaluation_seconds")
    if iterations is None or not each or iterations >= FEW_ITERATIONS:
        return ""
    return f" ({iterations:,} iteration{'' if iterations == 1 else 's'}; an evaluation takes {limit_text(each)} s here)"


#: What a boxed two-column table takes besides its cells: three rules and a space each side of each cell.
KEY_VALUE_FRAME = 7
#: A fact's cell when its value is on a line of its own under the table (:func:`show_key_values`).
SEE_BELOW = "see below"


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def key_value_layout(rows: list[tuple[str, str]], width: int | None) -> tuple[int | None, int | None, set[int]]:
    """The key and value columns' widths of a boxed two-column table ``width`` cells wide (None, None: as wide
    as its content), and the rows whose values go on lines of their own under it.

    A value's words are never broken inside a cell (at 40 columns ``info`` showed "examples/mesh_sma" /
    "ll.mtx", and a sha256 on four lines, which copy as pieces): the key column, whose words wrap, narrows
    so that a value's longest word fits beside it, or that value (a digest) goes on a line of its own under
    the table, where the terminal wraps it and a copy of it is whole: whichever draws the fewer lines (at 80
    columns the keys narrowed to 9 cells for a sha256 beside them, "TSVD rank at that budget" on 3 lines
    and the table 10 lines longer, where the digest under it takes 2).
    """
    keys = [key for key, _ in rows]
    natural = max((cell_len(line) for key, value in rows for line in value.splitlines() or [""]), default=0)
    key_natural = max((cell_len(key) for key in keys), default=0)
    if width is None or key_natural + natural + KEY_VALUE_FRAME <= width:
        return None, None, set()
    key_least = max((_longest_word(key) for key in keys), default=0)
    best: tuple[int, int, set[int]] | None = None
    for key in range(key_least, max(key_least, key_natural) + 1):
        room = width - KEY_VALUE_FRAME - key
        below = {n for n, (_, value) in enumerate(rows) if _longest_word(value) > room}
        if room < 1 or (below and cell_len(SEE_BELOW) > room):
            continue
        # each row as tall as its taller cell; a value under the table: its key's line and its own
        lines = sum(max(_line_count(name, key), 1 if n in below else _line_count(value, room))
                    for n, (name, value) in enumerate(rows)) + 2 * len(below)
        if best is None or lines <= best[0]:  # (a tie: the wider keys)
            best = (lines, key, below)
    if best is None:  # a window narrower than the longest key and "see below": the keys at their least
        return key_least, max(1, width - KEY_VALUE_FRAME - key_least), set(range(len(rows)))
    return best[1], width - KEY_VALUE_FRAME - best[1], best[2]


def _line_count(text: str, width: int) -> int:
    """How many lines ``text`` takes wrapped at spaces to ``width`` cells (:func:`at_spaces`)."""
    return max(1, len(at_spaces(Text(text), width).plain.splitlines()))


def key_value_table(title: str, rows: list[tuple[str, Any]], *, ascii: bool = False,
                    width: int | None = None) -> RichTable:
    """Facts as a two-column table; in a narrow window a value wraps at spaces, never cut to "0.993…".
    With ``ascii`` (a stream that cannot write other characters: :func:`writes_glyphs`) every text is
    spelled in ASCII (:func:`~sfapprox.formats.to_ascii`).  Given the ``width`` it must fit, a value's
    words are whole (:func:`key_value_layout`); one too wide for any cell beside the keys reads "see
    below" (:func:`show_key_values` prints it there)."""
    title, rows = _key_value_text(title, rows, ascii)
    key_width, value_width, below = key_value_layout(rows, width)
    # Text, not markup: a value is shown as it is ("[...]" in a path), its control characters escaped
    table = RichTable(title=Text(title), show_header=False)
    table.add_column(style="bold", overflow="fold", width=key_width)
    table.add_column(overflow="fold", width=value_width)
    for n, (key, value) in enumerate(rows):
        table.add_row(Text(key), Text(SEE_BELOW if n in below else value, style="italic" if n in below else ""))
    return table


def _key_value_text(title: str, rows: list[tuple[str, Any]], ascii: bool) -> tuple[str, list[tuple[str, str]]]:
    rows = [(printable(key), printable(str(value))) for key, value in rows]
    if ascii:
        return to_ascii(printable(title)), [(to_ascii(k), to_ascii(v)) for k, v in rows]
    return printable(title), rows


def show_key_values(console: Console, title: str, rows: list[tuple[str, Any]], *, ascii: bool = False) -> None:
    """Print facts as a two-column table laid out for ``console``'s width (:func:`key_value_table`), then
    each value too wide to sit beside its key under its key, on a line of its own, whole: the terminal
    wraps it, and a copy of it is one piece.  Where every value would go under the table (a window
    narrower than the longest key beside "see below": 20 columns), the facts are a list, key then value,
    without the table, whose cells all said "see below"."""
    width = table_width(console)
    heading, texts = _key_value_text(title, rows, ascii)
    below = key_value_layout(texts, width)[2]
    listed = bool(texts) and len(below) == len(texts)
    if listed:
        console.print(list_heading(heading, width), soft_wrap=True)
    else:
        console.print(key_value_table(title, rows, ascii=ascii, width=width))
    for n in sorted(below):
        key, value = texts[n]
        for line in listed_item(key, [value], width):
            console.print(line, soft_wrap=True)


@contextlib.contextmanager
def fit_progress(label: str, total: int | None, quiet: bool, time_limit: float | None = None) -> Iterator[Any]:
    """A progress bar on stderr with the current method, start and error (:func:`~sfapprox._display.fit_display`);
    a no-op callback when quiet or piped."""
    if quiet or not draws_progress():
        yield quiet_update
        return
    with fit_display(label, total, console=err, time_limit=time_limit, literal=literal) as update:
        yield update


#: The warning of a CLI run in a notebook's kernel without ipywidgets: the library's names its own
#: ``progress=True`` (:data:`~sfapprox._display.NO_WIDGETS`), no option of the command's.
NO_WIDGETS = ("the progress line is drawn in a notebook with ipywidgets: pip install ipywidgets "
              "(the command runs without it)")


def draws_progress() -> bool:
    """Whether a progress line can be drawn on stderr, decided as the library's (``_display.draws_bar``): a
    terminal it can redraw its line on, or a notebook's output (the CLI run in a notebook's kernel)."""
    return draws_bar(err, no_widgets=NO_WIDGETS)


#: The narrowest bar a progress line draws (:func:`line_columns`); with less room it has none.
MIN_BAR = 10


def line_columns(width: int, task: Any, label: str, numbers: Sequence[str], *, lead: str = "",
                 before: Sequence[str] = ()) -> list[Any]:
    """The columns of a progress line ``width`` columns wide, laid out for ``task`` (None: none yet).

    The line is ``lead`` (fixed words, as "matrices") and a bar, the numbers
    ``before`` the label, then ``label`` (a template of ``task``'s, in
    markup), or, without a ``lead``, the label and then the bar; then
    ``numbers`` and the elapsed time.  Numbers are names of ``task``'s fields
    (one not set is left out).  The lead and the bar
    are drawn where they fit beside the whole label; the label is cut ("…")
    where it must be; the numbers never are.

    rich's own layout shrinks every column of a line too wide: at 40 columns
    batch's line read "matrices ━━ 0… mesh: sf it 274/20000 0:…" (the count
    and the time cut) and the reading line "95.4 MiB of 286.1…" (its time
    gone).  Here the numbers have their whole widths, measured on ``task`` at
    each redraw, and the words take what they leave.
    """
    first, shown = ([name for name in names if task is not None and task.fields.get(name)] for names in (before, numbers))
    texts = [str(task.fields[name]) for name in [*first, *shown]] + [elapsed_text(task) if task is not None else "0:00:00"]
    room = width - sum(map(cell_len, texts)) - len(texts)  # the words' room (each number's gap taken)
    words = cell_len(lead) + 1 if lead else 0
    drawn = Text.from_markup(label.format(task=task)).cell_len if task is not None else 0
    bar = min(room - drawn - words - 1, 40)  # (the gap between the bar and the label taken)
    whole: dict[str, Any] = dict(no_wrap=True, overflow="ignore")
    parts: list[Any] = []
    if bar >= MIN_BAR:
        parts = [TextColumn(f"[bold]{lead}", table_column=TableColumn(**whole))] if lead else []
        parts.append(BarColumn(bar_width=bar, table_column=TableColumn(**whole)))
        room -= words + bar + 1
    parts.extend(TextColumn(f"{{task.fields[{name}]}}", table_column=TableColumn(**whole)) for name in first)
    if room >= 1 and drawn:  # (an empty label would leave two gaps)
        cut = TextColumn(label, table_column=TableColumn(max_width=room, no_wrap=True, overflow="ellipsis"))
        parts.insert(len(parts) if lead else 0, cut)
    parts.extend(TextColumn(f"{{task.fields[{name}]}}", table_column=TableColumn(**whole)) for name in shown)
    return [*parts, _ElapsedColumn(table_column=TableColumn(**whole))]


class _LaidOutProgress(Progress):
    """A progress line laid out for the window's width at each redraw, by ``layout(width, task)`` (its first
    task, None before one is added): :func:`line_columns`."""

    def __init__(self, layout: Callable[[int, Any], list[Any]], **kwargs: Any) -> None:
        self._layout = layout
        super().__init__(**kwargs)

    def make_tasks_table(self, tasks):
        self.columns = tuple(self._layout(err.width, tasks[0] if tasks else None))
        return super().make_tasks_table(tasks)


def line_progress(label: str, numbers: Sequence[str], *, lead: str = "", before: Sequence[str] = ()) -> Progress:
    """A transient progress line on stderr, laid out at each redraw by :func:`line_columns` (its arguments)."""
    return _LaidOutProgress(lambda width, task: line_columns(width, task, label, numbers, lead=lead, before=before),
                            console=err, transient=True)


def bytes_read(path: Path | str) -> int | None:
    """How far this process has read ``path``: the largest position of its open descriptors on the
    file (Linux's ``/proc/self/fdinfo``, a few system calls), whatever reader holds them (scipy's
    Matrix Market reader, h5py, numpy).  None where that cannot be told (another system, or the file
    not open, or read through a memory map, whose position does not move)."""
    fds = Path("/proc/self/fd")
    try:
        target = os.path.realpath(path)
        positions = []
        for fd in os.listdir(fds):
            with contextlib.suppress(OSError):
                if os.readlink(fds / fd) == target:
                    for line in (Path("/proc/self/fdinfo") / fd).read_text().splitlines():
                        if line.startswith("pos:"):
                            positions.append(int(line.split()[1]))
    except (OSError, ValueError):
        return None
    return max(positions) if positions and max(positions) > 0 else None


class _ReadingLine:
    """The "reading FILE" line: drawn (transient, on stderr) at its first :meth:`show`, then its bytes
    read of the file's size at each later one; gone at :meth:`close`."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        try:
            self.total: int | None = os.stat(path).st_size or None
        except OSError:
            self.total = None
        self.progress: Progress | None = None
        self.task: Any = None

    def amount(self) -> str:
        """``"12.3 MiB of 237 MiB"``, the size alone where the bytes read cannot be told, or ``""``."""
        return self._amount(bytes_read(self.path))

    def _amount(self, done: int | None) -> str:
        """:meth:`amount` for ``done`` bytes read (None: not told)."""
        from .._validation import format_bytes

        if self.total is None:
            return ""
        if done is None:
            return format_bytes(self.total)
        return f"{format_bytes(min(done, self.total))} of {format_bytes(self.total)}"

    def show(self) -> None:
        done = bytes_read(self.path)  # once a redraw: the bar and its text from the same position
        amount = self._amount(done)
        # a bar that fills with the bytes read where they are told, else one that pulses (no total)
        total = self.total if done is not None else None
        completed = min(done or 0, self.total or 0)
        if self.progress is None:
            self.progress = line_progress("[bold]{task.description}", ["amount"])
            self.task = self.progress.add_task(f"reading {literal(Path(self.path).name)}", total=total,
                                               completed=completed, amount=amount)
            self.progress.start()
        else:
            self.progress.update(self.task, total=total, completed=completed, amount=amount)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


#: Seconds between two redraws of the "reading FILE" line.
READING_REFRESH = 0.25


@contextlib.contextmanager
def reading_progress(path: Path | str, quiet: bool = False) -> Iterator[None]:
    """Show "reading FILE" (with the bytes read of its size, where :func:`bytes_read` tells them) on a
    terminal while the block reads ``path``, once it has taken over half a second; nothing when
    quiet or piped.  A 237 MB ``.mtx`` took 7 s with nothing on the screen (``info``, ``compare``,
    ``fit``), which read as a hang."""
    from .._progress import PHASE_DELAY

    if quiet or not draws_progress():
        yield
        return
    import threading

    line, stop = _ReadingLine(path), threading.Event()

    def redraw() -> None:
        if stop.wait(PHASE_DELAY):
            return
        while not stop.is_set():
            line.show()
            stop.wait(READING_REFRESH)

    drawer = threading.Thread(target=redraw, daemon=True)
    drawer.start()
    try:
        yield
    finally:
        stop.set()
        drawer.join()
        line.close()
