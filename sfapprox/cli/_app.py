"""The Typer application, the error boundary and helpers shared by commands."""

from __future__ import annotations

import contextlib
import functools
import shutil
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from rich.markup import escape
from typer.core import TyperGroup

from .. import __version__
from .._atomic import cut_short_outputs, written_outputs
from .._errors import SfapproxError, spelled_for
from .._progress import same_progress
from .._signals import caused_by_stop, stop_cause
from ..formats import and_listed, encodes_glyphs, printable, to_ascii
from ._render import (closed_pipe, draws_progress, literal, note, os_error_text, out,
                      quiet_notes, reading_progress, say, say_error)

#: How ``--help`` is drawn, for the app and its sub-command groups: click's plain layout, not Typer's rich
#: panels.  Rich's table of options cut option names to fit (``--no-count-indi…`` at 80 columns, 25 names at
#: 40), with no setting to stop it; click's puts a name too long for its column on a line of its own, so none
#: is ever cut, and wraps only the descriptions.  (It also prints ``sfapprox[plot]`` as written, where rich
#: read ``[plot]`` as markup and dropped it.)
HELP_MARKUP = None


#: click's usage error, of the click that typer uses (its own copy from typer 0.29, plain click before).
_USAGE_ERROR = next(kind for kind in typer.BadParameter.__mro__ if kind.__name__ == "UsageError")
#: click's context, of that same click.
_CONTEXT = next(kind for kind in typer.Context.__mro__[1:] if kind.__name__ == "Context")

#: The least room ``--help`` leaves an option's description beside its name; a longer name goes on a
#: line of its own, its description under it.
HELP_TEXT_MIN_WIDTH = 20
#: The narrowest ``--help`` drawn: below this a window shows it wrapped by the terminal.
HELP_MIN_WIDTH = 30


class NarrowHelpFormatter(_CONTEXT.formatter_class):
    """click's help formatter, kept within a narrow window.

    click never drew help narrower than 50 columns, and gave option names up
    to 30 of them: at 40 columns 250 lines of ``compare --help`` ran over the
    window's edge (up to 50 columns), and the terminal broke each of them in
    two.  Here the help is as wide as the window, and a name too long for a
    third of it goes on a line of its own (as click does for any name over 30).
    Its text is wrapped at spaces only (:func:`wrap_help`): click's wrapper broke
    ``--no-count-indices`` after ``--no-`` at every width.
    """

    def __init__(self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None) -> None:
        forced = getattr(sys.modules[_CONTEXT.formatter_class.__module__], "FORCED_WIDTH", None)  # (test runners)
        if width is None and forced is None:
            width = max(min(shutil.get_terminal_size().columns, max_width or 80) - 2, HELP_MIN_WIDTH)
        super().__init__(indent_increment, width, max_width)
        #: Spell the help in ASCII (:func:`help_in_ascii`), before it is wrapped: laid out on what it prints.
        self.ascii = help_in_ascii()

    def _text(self, text: str) -> str:
        return to_ascii(text) if self.ascii else text

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        """click's definition list, its first column narrowed so that the descriptions keep
        :data:`HELP_TEXT_MIN_WIDTH` columns within the window, and wrapped by :func:`wrap_help`."""
        room = self.width - self.current_indent - col_spacing - 2 - HELP_TEXT_MIN_WIDTH
        rows = [(self._text(str(first)), self._text(str(second or ""))) for first, second in rows]
        if not rows:
            return
        first_col = min(max(len(first) for first, _ in rows), max(min(col_max, room), 8)) + col_spacing
        margin = " " * self.current_indent
        for first, second in rows:
            # a name wider than the window (an option and its choices: "--init auto|reference|identity|
            # rank1|FILE" is 41 columns) is wrapped as its text is, its further lines indented under it;
            # unwrapped, a 40-column terminal broke it wherever the edge fell
            name = f"{margin}{first}" if len(margin) + len(first) <= self.width else \
                wrap_help(first, self.width, margin, margin + " " * self.indent_increment)
            if not second:
                self.write(f"{name}\n")
                continue
            # a name too long for the column goes on a line of its own, its description under it
            gap = " " * (first_col - len(first)) if len(first) <= first_col - col_spacing else \
                "\n" + " " * (first_col + self.current_indent)
            lines = wrap_help(second, max(self.width - first_col - 2, 10), paragraphs=True).splitlines() or [""]
            hang = " " * (first_col + self.current_indent)
            self.write(f"{name}{gap}{lines[0]}\n" + "".join(f"{hang}{line}\n" for line in lines[1:]))

    def write_text(self, text: str) -> None:
        """click's paragraphs of text, wrapped by :func:`wrap_help`; an ``Example:`` paragraph is a command
        laid out to be copied (:func:`example_lines`)."""
        indent = " " * self.current_indent
        blocks = [block for block in self._text(text).split("\n\n") if block.strip()]
        self.write("\n\n".join(example_lines(block, self.width, indent) if block.lstrip().startswith(EXAMPLE)
                                else wrap_help(block, self.width, indent, indent, paragraphs=True)
                                for block in blocks) + "\n")

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        """click's usage line, wrapped by :func:`wrap_help`."""
        prog, args = self._text(prog), self._text(args)
        lead = f"{'Usage: ' if prefix is None else prefix:>{self.current_indent}}{prog} "
        room = self.width - self.current_indent
        if room >= len(lead) + 20:  # the arguments beside the program's name
            self.write(wrap_help(args, room, lead, " " * len(lead)) + "\n")
        else:  # under it
            indent = " " * (max(self.current_indent, len(prefix or "Usage: ")) + 4)
            # the program's name wrapped at its spaces too: "Usage: python -m sfapprox datasets verify" is
            # 41 columns, and a 40-column terminal broke it
            self.write(f"{wrap_help(lead.rstrip(), room, '', indent)}\n{wrap_help(args, room, indent, indent)}\n")


def help_in_ascii() -> bool:
    """Whether ``--help`` must be spelled in ASCII: standard output's encoding cannot write sfapprox's glyphs
    (``PYTHONIOENCODING=ascii``, ``LC_ALL=C`` without Python's UTF-8 mode, a Latin-1 locale).  click then wrote
    the help's ``N·K·M``, ``N²`` and ``−`` as UTF-8 all the same (it takes an ASCII stream for a mistake): a
    terminal that shows ASCII only showed them as mojibake (``NÂ·KÂ·M``); the tables and messages spell them
    in ASCII there already (``_render.writes_glyphs``)."""
    encoding = getattr(sys.stdout, "encoding", None)
    if not encoding:  # (no stdout, or not a text stream: click writes UTF-8 bytes)
        return False
    try:
        return not encodes_glyphs(encoding)
    except LookupError:  # an encoding Python does not know: ASCII is what any stream writes
        return True


class _WholeWordWrapper(textwrap.TextWrapper):
    """A wrapper that breaks lines at spaces only, never at a hyphen: ``--no-count-indices``,
    ``rpca-pcp`` and ``paper-table1.toml`` are names to type, and ``--no-`` at the end of a line, its
    ``count-indices`` on the next, read as two words (textwrap's default breaks after any hyphen)."""

    def __init__(self, width: int, initial_indent: str = "", subsequent_indent: str = "") -> None:
        super().__init__(width, initial_indent=initial_indent, subsequent_indent=subsequent_indent,
                         replace_whitespace=False, break_on_hyphens=False)

    def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int) -> None:
        """Cut a word longer than a whole line (a path at 40 columns): after its last ``/``, ``|`` or ``,``
        that fits, or, with none, where the line ends, moved off any hyphen; a word that fits no part of
        the rest of this line begins the next one, which has the whole width."""
        word = reversed_chunks[-1]
        room = max(width - cur_len, 1)
        cut = max(word.rfind(mark, 0, room) for mark in "/|,") + 1
        if cut <= 1:
            if cur_line:
                return  # (textwrap then ends this line, and comes back with the whole of the next)
            cut = room
            while cut > 1 and "-" in word[cut - 1 : cut + 1]:
                cut -= 1
        cur_line.append(word[:cut])
        reversed_chunks[-1] = word[cut:]


def wrap_help(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "",
              paragraphs: bool = False) -> str:
    """``text`` wrapped to ``width`` as click's ``wrap_text`` does, but never at a hyphen (:class:`_WholeWordWrapper`).

    Parameters
    ----------
    text : str
        The text; with ``paragraphs``, blank lines part paragraphs, each indented as its first line is,
        and a paragraph whose first line is ``\\b`` is kept as written (click's rules).
    width : int
        The widest line, indents included.
    initial_indent, subsequent_indent : str
        Put before the first line, and before each of the others.
    paragraphs : bool
        Keep the paragraphs apart (else the text is one paragraph).

    Returns
    -------
    str
        The wrapped lines, without a final newline.
    """
    text = text.expandtabs()
    if not paragraphs:
        return _WholeWordWrapper(width, initial_indent, subsequent_indent).fill(text)
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line:
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    done = []
    for block in filter(None, blocks):
        extra = " " * (len(block[0]) - len(block[0].lstrip()))
        first, rest = initial_indent + extra, subsequent_indent + extra
        if block[0].strip() == "\b":  # kept as written
            done.append("\n".join((first if i == 0 else rest) + line for i, line in enumerate(block[1:])))
        else:
            done.append(_WholeWordWrapper(width, first, rest).fill(" ".join(line.lstrip() if i == 0 else line
                                                                            for i, line in enumerate(block))))
    return "\n\n".join(done)


#: How a command's help begins its example: the command after it is laid out by :func:`example_lines`.
EXAMPLE = "Example:"


def example_lines(block: str, width: int, indent: str = "") -> str:
    """An ``Example: sfapprox ...`` paragraph of a command's help, laid out to be copied.

    On one line where it fits; else ``Example:`` has a line of its own and the command follows, broken
    between an option and the next only, with the shell's `` \\`` continuation
    (:func:`~sfapprox.cli._render.command_lines`, as the next command a comparison suggests): wrapped
    as prose, ``--data-dir`` ended one line and its folder began the next, and the lines pasted ran
    ``--data-dir`` without its value.

    Examples
    --------
    >>> print(example_lines("Example: sfapprox info graph.net --json -", 40, "  "))
      Example: sfapprox info graph.net --json -
    >>> print(example_lines("Example: sfapprox info graph.net --json -", 30, "  "))
      Example:
        sfapprox info graph.net \\
          --json -
    """
    words = block.split()[1:]  # (an example's words hold no spaces: its own quoting is kept as written)
    line = f"{indent}{EXAMPLE} {' '.join(words)}"
    if len(line) <= width:
        return line
    from ._render import command_lines

    groups: list[list[str]] = []
    for word in words:  # an option with its value: "--json -", "--out-dir runs/t1"
        takes = groups and groups[-1][0].startswith("-") and len(groups[-1]) == 1 and groups[-1][0] != "-"
        if takes and (word == "-" or not word.startswith("-")):
            groups[-1].append(word)
        else:
            groups.append([word])
    return "\n".join([f"{indent}{EXAMPLE}", *(indent + part for part in command_lines(groups, width - len(indent)))])


class HelpContext(_CONTEXT):
    """click's context, drawing ``--help`` with :class:`NarrowHelpFormatter`."""

    formatter_class = NarrowHelpFormatter


class OptionItem(NamedTuple):
    """One item of a command line (:func:`option_items`): an option with its value, or any other word."""

    #: The click parameter of an option of the command; None for any other word.
    param: Any
    #: The option as typed, without an ``=VALUE`` or a short option's joined value (``--csv``, ``-j``).
    name: str
    #: Its value (``--csv a.csv``, ``--csv=a.csv``, ``-j4``); None for a flag, or one given last without it.
    value: str | None
    #: The words it took.
    words: list[str]


def option_items(params, args: list[str]) -> Iterator[OptionItem]:
    """``args`` of a command whose parameters are ``params``, cut as click cuts them: an option takes its
    value from the next word unless it is joined (``--csv=a.csv``, ``-j4``), a flag takes none, and every
    word after ``--`` is an argument.  One reading for :func:`refuse_repeats` and for the next command
    ``compare`` suggests (each option once)."""
    options = {spelled: param for param in params if param.param_type_name == "option"
               for spelled in (*param.opts, *param.secondary_opts)}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":  # the rest are arguments
            yield from (OptionItem(None, "", None, [word]) for word in args[i:])
            return
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        param = options.get(name) if arg.startswith("-") else None
        if param is None:
            yield OptionItem(None, "", None, [arg])
            i += 1
        elif eq or inline or param.is_flag or param.count:
            yield OptionItem(param, name, inline if (eq or inline) else None, [arg])
            i += 1
        else:
            words = args[i:i + 2]
            yield OptionItem(param, name, words[1] if len(words) == 2 else None, words)
            i += len(words)


def _parsed(parse: Callable, command, ctx, args: list[str]) -> list[str]:
    """``command``'s ``parse(ctx, args)``, its repeats refused (:func:`refuse_repeats`); a usage error raised
    without a context ("Option '--methods' requires an argument.", click's parser gives it none) gets the
    command's, so that it says where the command's help is, as its other usage errors do."""
    try:
        return parse(ctx, refuse_repeats(command, ctx, args))
    except _USAGE_ERROR as exc:
        if exc.ctx is None:
            exc.ctx = ctx
        if isinstance(getattr(exc, "message", None), str):
            # typer >= 0.29 checks a choice (a Literal: --dtype, --mirror, ...) with pydantic, whose "Value error, "
            # stayed in the message: "Invalid value for '--dtype': Value error, 'x' is not one of 'float64', ..."
            exc.message = exc.message.removeprefix("Value error, ")
        others = _taken_elsewhere(ctx, getattr(exc, "option_name", None)) if type(exc).__name__ == "NoSuchOption" else []
        if others:
            # click's nearest spelling is no help where the option is another command's: 'fit --csv' was
            # answered "(Possible options: --var)", a weight variable, where fit has no CSV and compare has
            raise _USAGE_ERROR(f"No such option: {exc.option_name} ({ctx.info_name} has none; {and_listed(others)} "
                               f"take{'s' if len(others) == 1 else ''} it)", ctx) from None
        raise


def _taken_elsewhere(ctx, option: str | None) -> list[str]:
    """The other commands of ``ctx``'s group that take ``option`` (``--csv``: compare, sweep, ...), in the
    group's order; none where it is no option of theirs (a misspelling: click's nearest name then helps)."""
    group = None if ctx.parent is None else ctx.parent.command
    if option is None or group is None or not hasattr(group, "list_commands"):
        return []
    found = []
    for name in group.list_commands(ctx.parent):
        other = group.get_command(ctx.parent, name)
        if name != ctx.info_name and other is not None and any(option in p.opts for p in other.params):
            found.append(name)
    return found


def refuse_repeats(command, ctx, args: list[str]) -> list[str]:
    """``args`` of ``command``, refused where an option that takes one value is given twice with two
    values: click keeps the last silently, so ``--csv a.csv --csv b.csv`` wrote b.csv alone and
    ``--methods sf --methods tsvd`` ran tsvd alone.  The same value twice, a flag twice (``-q --quiet``)
    and an option meant to repeat (``--with``) pass.
    """
    seen: dict[str, tuple[str, str]] = {}  # the parameter's name: (the option as typed, its value)
    for item in option_items(command.params, args):
        if item.value is None or not _takes_one(item.param):
            continue  # (a flag; or a value missing, which click says)
        before = seen.setdefault(item.param.name, (item.name, item.value))
        if before[1] != item.value:
            raise _USAGE_ERROR(f"{item.name}: given twice ({before[0]} {before[1]} and {item.name} {item.value}), "
                               "and only one is used; give it once", ctx)
    return args


def usage_name(param) -> str:
    """An argument as the usage line names it, in click's and man pages' convention: ``MANIFEST``, and
    ``[OUT_DIR]`` where it may be left out.  Typer's own, ``{manifest}``, read as a placeholder left
    unfilled (``Usage: sfapprox fit [OPTIONS] {path}``).  (The arguments' ``metavar`` names them so in
    the argument list and in errors: "Missing argument 'PATH'".)"""
    name = (param.metavar or param.name).upper()
    name = name if param.required else f"[{name}]"
    return f"{name}..." if param.nargs != 1 else name


def _takes_one(param) -> bool:
    """Whether ``param`` (None: a word that is no option) is an option that takes one value, and only once."""
    return param is not None and not (param.is_flag or param.count or param.multiple) and param.nargs == 1


class HelpGroup(TyperGroup):
    """A command group (``typer.Typer(cls=HelpGroup)``) whose ``--help`` lists each command's whole summary,
    and fits the window (its own and its commands': :class:`HelpContext`)."""

    context_class = HelpContext

    def get_command(self, ctx, cmd_name: str):
        """The command ``cmd_name``, drawing its ``--help`` as this group does (typer gives each command
        click's own context, whose help is never narrower than 50 columns)."""
        command = super().get_command(ctx, cmd_name)
        if command is not None and not isinstance(command, HelpGroup):
            command.context_class = HelpContext
            for param in command.params:
                if param.param_type_name == "argument":
                    param._usage_display_name = functools.partial(usage_name, param)
            if not getattr(command, "_repeats_refused", False):  # (commands are made once; wrapped once)
                parse = command.parse_args
                command.parse_args = functools.partial(_parsed, parse, command)
                command._repeats_refused = True
        return command

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        """Refuse an empty argument before anything else: it is an unset shell variable far more often
        than a value (``--save-factors "$DIR"`` with no ``DIR`` wrote into the current folder; an empty
        file name read as ".")."""
        for i, arg in enumerate(args):
            if arg == "--":
                break
            name, eq, value = arg.partition("=")
            option = name if eq and name.startswith("--") and not value else None
            if arg == "" and i and args[i - 1].startswith("-") and args[i - 1] not in self._flags(ctx):
                option = args[i - 1]  # (after a flag such as --quiet, it is an argument of its own)
            if option or arg == "":
                what = f"{option}: an empty value" if option else f"an empty argument after {' '.join(args[:i]) or 'sfapprox'}"
                raise _USAGE_ERROR(f"{what} (an unset shell variable?); give it a value",
                                   self._named_context(ctx, args[:i]))
        return super().parse_args(ctx, args)

    def _named_context(self, ctx, args: list[str]):
        """The context of the command ``args`` name (``sweep``, ``datasets list``), unparsed: a usage error
        raised here, before click reaches it, says where *its* help is ("see 'sfapprox sweep --help'", not
        the group's, which does not list ``--budgets``)."""
        command = self
        for arg in args:
            sub = command.get_command(ctx, arg) if hasattr(command, "get_command") and not arg.startswith("-") \
                else None
            if sub is None:
                if not arg.startswith("-"):  # the first word that names no command: the command's own arguments
                    break
                continue  # a group's own flag (--debug)
            ctx, command = sub.context_class(sub, info_name=arg, parent=ctx), sub
        return ctx

    def make_context(self, *args: Any, **kwargs: Any):
        """click's context, made from the arguments; a stop while they are read is said (typer's own handling
        turned it into a silent exit 130)."""
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            say(f"[bold yellow]interrupted[/] ({stop_cause()}) while starting; nothing was written")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    def invoke(self, ctx):
        """Run the command; a stop outside the commands' own handling (before their error boundary, while
        their options are built) is said as the boundary says it, not as typer's silent exit 130."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _say_interrupted()
            raise typer.Exit(EXIT_INTERRUPTED) from None

    def _flags(self, ctx) -> set[str]:
        """The names of every option of the group and its commands (and theirs) that takes no value
        (``--quiet``)."""
        commands, flags = [self], set[str]()
        while commands:
            command = commands.pop()
            flags.update(opt for param in command.params
                         if getattr(param, "is_flag", False) or getattr(param, "count", False)
                         for opt in (*param.opts, *param.secondary_opts))
            if hasattr(command, "list_commands"):
                commands += [c for name in command.list_commands(ctx) if (c := command.get_command(ctx, name))]
        return flags

    def format_commands(self, ctx, formatter) -> None:
        """click's list of commands, each with its first sentence wrapped under it where click's own cut it
        to the window's width with "..." (rich's panel wrapped it)."""
        rows = [(name, command.get_short_help_str(limit=10_000)) for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    name="sfapprox",
    help="Approximate square matrices by Chord sparse factorizations and compare them with "
    "truncated SVD, Robust PCA, NMF, sparse storage, Monarch, butterfly and hybrid surrogates "
    "at an equal budget of stored numbers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state: dict[str, Any] = {"debug": False}

#: Some of the work could not be done (entries not fetched or verified, batch pairs failed or unavailable);
#: the rest was, and is written.
EXIT_INCOMPLETE = 1
EXIT_ERROR = 2
#: Stopped by Ctrl-C; main() turns it into 143 when SIGTERM was the cause (sfapprox/_signals.py).
EXIT_INTERRUPTED = 130


#: The commands whose options are a manifest's keys, not options typed: their messages name the keywords.
#: ``batch`` is not one: its run options (--methods, --jobs, --max-memory) are typed, and its entries' reading
#: options, a manifest's keys, are spelled as keywords where each entry is read (datasets.runner.run_matrix).
_KEYWORD_COMMANDS = ("datasets",)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sfapprox {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks for errors.", metavar=" ")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.", metavar=" ")] = False,
) -> None:
    _state["debug"] = debug
    quiet_notes(False)  # (a command's --quiet sets it: one run in a process must not quieten the next)
    # messages name the options as typed (--var A), where the Python caller's say var='A'; the datasets
    # commands' come from a manifest's keys, which are the keywords (var = "A")
    ctx.with_resource(spelled_for("api" if ctx.invoked_subcommand in _KEYWORD_COMMANDS else "cli"))
    _state["written_before"] = len(written_outputs())
    _state["cut_before"] = len(cut_short_outputs())


@contextlib.contextmanager
def error_boundary() -> Iterator[None]:
    """Turn project errors into one stderr line + exit 2, and Ctrl-C (or SIGTERM) into exit 130 (143).

    Catches :class:`SfapproxError` specifically: ``typer.Exit`` is a
    RuntimeError and must pass through untouched.  An ``OSError`` (a full
    disk, a folder without write permission while writing outputs) and a
    ``MemoryError`` that no estimate foresaw are also one line, since neither
    is a bug the user can act on from a traceback; ``--debug`` shows it.
    Commands that can keep partial work (``fit``, ``compare``) catch Ctrl-C
    themselves; reaching this handler means nothing more was written.
    """
    try:
        yield
    except SfapproxError as exc:
        if closed_pipe(exc):
            out.on_broken_pipe()  # exit 141, as the tables' and --json -'s closed pipe
        _fail(str(exc))
    except MemoryError as exc:
        _fail(f"out of memory ({exc or 'MemoryError'}); lower --max-memory so that oversize work is refused "
              "before it starts, or use a smaller input")
    except OSError as exc:
        _fail(os_error_text(exc))
    except KeyboardInterrupt:
        _say_interrupted()
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        if not caused_by_stop(exc):
            raise
        _say_interrupted()
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _say_interrupted() -> None:
    """The one line for a stop that reached no command's own handling: what was written by then."""
    if _state["debug"]:
        _print_traceback()
    say(f"[bold yellow]interrupted[/] ({stop_cause()}): stopped; {literal(_written_since_start())}")


def _written_since_start() -> str:
    done = written_outputs()[_state.get("written_before", 0):]
    cut = [f"{target} got {sent:,} of {total:,} bytes, an incomplete output"
           for target, sent, total in cut_short_outputs()[_state.get("cut_before", 0):]]
    said = ("outputs written: " + ", ".join(map(str, done))) if done else \
        "no output was written" + (" whole" if cut else "")
    return "; ".join([said, *cut])


def _print_traceback() -> None:
    """--debug's traceback on stderr, its control characters escaped: the exception's message quotes a file's
    own names (traceback.print_exc wrote an ESC in one raw)."""
    sys.stderr.write(printable(traceback.format_exc()))


def _fail(message: str) -> None:
    if _state["debug"]:
        _print_traceback()
    say_error(message)  # one line, whatever a third-party message held
    raise typer.Exit(EXIT_ERROR) from None


def read_matrix(path: Path, options, quiet: bool = False):
    """The command's matrix through the public API (``options``: a LoadOptions): a LoadedMatrix, or a
    matrix source for a kernel, an attention map or a ``.npy`` too big to load (:func:`~sfapprox.io.open_matrix`).
    On a terminal, and not ``quiet``, a read that takes over half a second says so ("reading FILE")."""
    from ..io import open_matrix  # here: sfapprox.io loads numpy, h5py and Pillow; --help loads none

    with reading_progress(path, quiet):
        return open_matrix(path, **options.keywords())


def show_notes(loaded) -> None:
    """Print how the file became a matrix (one ``note:`` line each) on stderr; not under ``--quiet``."""
    for line in loaded.notes:
        note(f"note: {line}")


def announce_start(callback: Callable[[dict], Any], what: str, quiet: bool) -> Callable[[dict], Any]:
    """Wrap a progress callback: when no progress bar is shown, say once that the optimizer runs.

    Logs (stderr not a terminal) then tell "loading" from "optimizing", and
    that Ctrl-C keeps the best factors; a long phase before the first
    iteration (compiling on a fresh install, :func:`sfapprox._progress.phase`)
    gets a line too.  Nothing is added under ``--quiet`` or when the bar is shown.
    """
    if quiet or draws_progress():
        return callback
    what = literal(what)  # (a file's name)
    started = False
    said = None  # the phase said last (and whose), since the last step

    def wrapped(info: dict) -> Any:
        nonlocal started, said
        said = None  # (a phase after steps is news again: the scoring's compiling, after the fit's)
        if not started:
            started = True
            say(f"{what}: optimizer running (Ctrl-C stops it and keeps the best factors found)")
        return callback(info)

    def phase(text: str, method: str | None = None) -> None:
        nonlocal said
        # a log gets the phase once, as a line (a bar shows it and clears it); the same phase again at once
        # (SF compiles before its structure is timed, then its fit warms up: "compiling kernels (first run)"
        # twice on a fresh install) is not said again
        if text and (method, text) != said:
            # the method named: a comparison's log said "m: preparing", "m: scoring", "m: preparing" and
            # never whose (a bar shows the method beside its phase)
            say(f"{what}{'' if method is None else ' ' + literal(method)}: {escape(text)}")
        said = (method, text) if text else said

    def phase_of(method: str) -> Callable[[str], None]:
        return lambda text: phase(text, method)

    marked = same_progress(wrapped, callback)
    marked.phase = phase  # type: ignore[attr-defined]
    marked.phase_of = phase_of  # type: ignore[attr-defined]
    return marked
