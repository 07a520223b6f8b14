"""Options shared by several commands, declared once, as option groups.

A group is a list of Typer options that together fill one object of the
library: :data:`LOAD` fills a :class:`~sfapprox.LoadOptions`, :data:`FIT` a
:class:`~sfapprox.FitSettings`, :data:`OUTPUTS` the output files of a table.
``@options(LOAD, FIT)`` adds a group's options to a command's signature and
hands the command the built object (``load=``, ``settings=``, ``outputs=``),
so no command repeats an option or a default: the defaults shown by
``--help`` are read from the library's classes.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from .._params import MAX_SEED
from ..formats import counted
from .._settings import (
    COUNT_INDICES,
    PROTOCOLS,
    DEFAULT_TIME_LIMIT,
    DEFAULT_TOTAL_TIME,
    SF_MAX_ITER,
    FitSettings,
    LoadOptions,
    check_text_marks,
    parse_size,
)
from .._settings import DEFAULT_METHODS as _DEFAULT_METHODS
from ._app import error_boundary
from ._render import Outputs, note, quiet_notes

__all__ = ["MatrixPath", "options", "LOAD", "FIT", "OUTPUTS", "output_group", "Methods", "Budget", "CountIndices", "Force", "Quiet", "flag", "number", "integer",
           "entry_names", "lowered", "CHOICE"]

#: Given to every option whose value is one of a few words (a Literal): ``--dtype FLOAT32`` is float32,
#: as a user who types ``--kernel RBF`` expects; the value the command gets is the word as declared.
CHOICE: dict[str, Any] = {"case_sensitive": False}


def lowered(value: Any) -> Any:
    """An option's text in lower case (a callback): the words of a choice typed as free text (``--format
    MTX``, ``--kernel RBF``, ``--methods SF,TSVD``, ``--device CPU``) as the library spells them, so
    what is stored and printed is that spelling.

    Examples
    --------
    >>> lowered("SF,Tsvd"), lowered(None)
    ('sf,tsvd', None)
    """
    return value.lower() if isinstance(value, str) else value


def flag(*names: str, help: str) -> Any:
    """A boolean flag; shown without a ``<bool>`` value (it takes none)."""
    return typer.Option(*names, help=help, metavar=" ")


def number(*names: str, min: float, unit: str = "", none: str = "", **kwargs: Any) -> Any:
    """A finite float option of at least ``min`` (``--help`` shows the range), whose refusals say what is wrong.

    Typer's own range check (pydantic's ``ge``) refused NaN as "Input should be
    greater than or equal to 0", as if it were a negative number; the value is
    parsed here instead.  Infinity is refused here too, with the option's own
    minimum: the library's check said "--checkpoint-every must be a float in the
    range [0, inf). Got inf instead.", a range the option does not have.
    ``unit`` names what the number counts ("seconds"), ``none`` the value that
    means no limit ("0 for none"), both said when infinity is refused.
    """
    what = f"a finite number{f' of {unit}' if unit else ''}, at least {min:g}{f' ({none})' if none else ''}"

    def parse(text: Any) -> float:
        value = any_number(text)
        if math.isnan(value):
            raise typer.BadParameter("must be a number, not NaN")
        if value < min:
            raise typer.BadParameter(f"must be at least {min:g}; got {text}")
        if math.isinf(value):
            raise typer.BadParameter(f"must be {what}; got {text}")
        return value

    return typer.Option(*names, min=min, parser=parse, **kwargs)


def any_number(text: Any) -> float:
    """A float option's value, its range left to the library (``--bandwidth``: positive and finite); text that
    is no number is refused in :func:`number`'s words (typer's, pydantic's, said "Input should be a valid
    number, unable to parse string as a number", and not what was typed).

    Examples
    --------
    >>> any_number("2.5"), any_number(-1.0)
    (2.5, -1.0)
    """
    if isinstance(text, float):
        return text
    try:
        return float(text)
    except (TypeError, ValueError):
        raise typer.BadParameter(f"must be a number; got {text!r}") from None


def integer(*names: str, min: int, max: int | None = None, **kwargs: Any) -> Any:
    """A whole-number option in ``[min, max]``, refused in :func:`number`'s words.

    Typer's own checks (pydantic's) said "Input should be greater than or equal
    to 0" for ``--iters -1`` and "Input should be a valid integer, unable to
    parse string as an integer" for ``--seed 1.5``, where ``--time-limit -1``
    said "must be at least 0; got -1".
    """
    def parse(text: Any) -> int:
        if isinstance(text, int):
            return text
        try:
            value = int(str(text).strip(), 10)
        except ValueError:
            raise typer.BadParameter(f"must be a whole number; got {text!r}") from None
        if value < min:
            raise typer.BadParameter(f"must be at least {min}; got {text}")
        if max is not None and value > max:
            raise typer.BadParameter(f"must be at most {max}; got {text}")
        return value

    return typer.Option(*names, min=min, max=max, parser=parse, **kwargs)


MatrixPath = Annotated[Path, typer.Argument(help="Matrix file (.mtx, .net/.paj, .mat, .npy, .csv, image, ...; see 'sfapprox formats').", show_default=False, metavar="PATH")]
#: The methods compare/sweep/batch run when --methods is not given.
DEFAULT_METHODS = ",".join(_DEFAULT_METHODS)
# The names are not listed here: that would import every method (and torch) for --help.
Methods = Annotated[str, typer.Option("--methods", help="Comma-separated method names, or 'all' for every method; 'sfapprox methods' lists them all and what each stores.", metavar="LIST", callback=lowered)]
Budget = Annotated[str, typer.Option("--budget", help="Stored numbers per method: 'sf' (SF's own count), a whole number, or a fraction of N² (0.05).", metavar="BUDGET", callback=lowered)]
Force = Annotated[bool, flag("--force", help="Overwrite existing output files.")]
Plot = Annotated[Optional[Path], typer.Option("--plot", help="Write a figure (PNG/PDF/SVG, ...; needs matplotlib: pip install 'sfapprox[plot]').", metavar="FILE")]
Protocol = Annotated[Literal[PROTOCOLS], typer.Option(
    "--protocol", **CHOICE, help="default, or paper: the SF paper's Table 1 settings (TSVD at rank ceil(M²/2), SF's reference structure).")]
#: Default of :data:`CountIndices`, from the library.
COUNT_INDICES_DEFAULT = COUNT_INDICES
CountIndices = Annotated[bool, typer.Option(
    "--count-indices/--no-count-indices", metavar=" ",
    help="Charge each sparse entry at a free position (rpca, rpca-pcp, sf+s) its position too, 2 numbers: "
         "honest storage, the default. --no-count-indices charges values only (the SF paper's convention).")]


def _quieten(quiet: bool) -> bool:
    """``--quiet``'s callback: the command's informational notes are left out from its start."""
    quiet_notes(quiet)
    return quiet


Quiet = Annotated[bool, typer.Option(
    "--quiet", "-q", metavar=" ", callback=_quieten,
    help="No progress display (it is also off when stderr is not a terminal) and no informational notes on "
         "stderr (the file read, the files written, the next command, time-limit advice); results, errors, "
         "warnings and stops are still shown.")]


def entry_names(only: str | None) -> list[str] | None:
    """``--only``'s entry names, in order and without repeats; None when it is not given (every entry).

    Raises
    ------
    ParameterError
        For a list that names no entry (``--only ,`` ran every entry) or has an empty item between two
        commas (``a,,b``, as ``--methods`` refuses it).

    Examples
    --------
    >>> entry_names("a, b,a"), entry_names(None)
    (['a', 'b'], None)
    """
    from .._errors import ParameterError
    from .._params import split_items

    if only is None:
        return None
    names = list(dict.fromkeys(split_items(only, "--only")))
    if not names:
        raise ParameterError(f"--only {only!r} names no entry; give entry names ('sfapprox datasets list "
                             "MANIFEST' shows them), or leave --only out to select every entry")
    return names


# ----------------------------------------------------------------------------- groups
@dataclass(frozen=True)
class Group:
    """Typer options that together build one object, handed to the command as ``target``."""

    target: str
    params: tuple[inspect.Parameter, ...]
    build: Callable[[dict[str, Any]], Any]


def _param(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _field_default(cls: type, name: str) -> Any:
    return {f.name: f.default for f in dataclasses.fields(cls)}[name]


def options(*groups: Group) -> Callable:
    """Add the groups' options to a command; the command receives each group's object.

    The objects are built (and so checked) inside the error boundary, before
    the command runs: a bad value is one line and exit code 2, before any work.
    """
    def decorate(func: Callable) -> Callable:
        sig = inspect.signature(func, eval_str=True)
        targets = {g.target for g in groups}
        own = [p for p in sig.parameters.values() if p.name not in targets]
        added: dict[str, inspect.Parameter] = {}
        for group in groups:
            for p in group.params:
                added.setdefault(p.name, p)  # --max-memory feeds two groups, declared once

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in added}
            with error_boundary():
                built = {g.target: g.build(values) for g in groups}
            return func(**kwargs, **built)

        command.__signature__ = sig.replace(parameters=own + list(added.values()))
        command.__annotations__ = {}  # Typer reads the (evaluated) signature instead
        return command

    return decorate


# ---------------------------------------------------------------- LoadOptions
_MAX_MEMORY = _param(
    "max_memory",
    Annotated[Optional[str], typer.Option("--max-memory", help="Memory limit for loading and fitting, e.g. 8G or 500M (default: 80% of RAM, or of a container's or job's memory limit where lower); larger work is refused before it starts.", metavar="SIZE")],
    None,
)

LOAD = Group(
    "load",
    (
        _param("format", Annotated[Optional[str], typer.Option("--format", help="Input format, overriding the file extension (see 'sfapprox formats').", metavar="FORMAT", callback=lowered)], _field_default(LoadOptions, "format")),
        _param("var", Annotated[Optional[str], typer.Option("--var", help="Variable to read from a .mat/.npz file (e.g. Problem.A), or the weight to read from a .safetensors/.pt/.pth/.ckpt file ('sfapprox info FILE' lists them).", metavar="NAME")], _field_default(LoadOptions, "var")),
        _param("network", Annotated[Optional[int], integer("--network", min=1, help="Which network of a multi-network Pajek .paj file (1-based).", metavar="K")], _field_default(LoadOptions, "network")),
        _param("relation", Annotated[Optional[int], integer("--relation", min=1, help="Pajek: only relation K (*Arcs :K, 'K: i j' lines, *Matrix :K); default: all relations, summed.", metavar="K")], _field_default(LoadOptions, "relation")),
        _param("two_mode", Annotated[Optional[Literal["rows", "cols", "bipartite"]], typer.Option("--two-mode", **CHOICE, help="2-mode Pajek network: rows (B·Bᵀ), cols (BᵀB) or bipartite.")], _field_default(LoadOptions, "two_mode")),
        _param("gradient", Annotated[bool, flag("--gradient", help="Image: use its gradient magnitude instead of the intensities.")], _field_default(LoadOptions, "gradient")),
        _param("resize", Annotated[Optional[int], integer("--resize", min=1, help="Image: resize to N x N.", metavar="N")], _field_default(LoadOptions, "resize")),
        _param("square", Annotated[Optional[Literal["crop", "resize"]], typer.Option("--square", **CHOICE, help="Non-square image: crop (center) or resize.")], _field_default(LoadOptions, "square")),
        _param("covariance", Annotated[bool, flag("--covariance", help="Input is a data table (rows = samples): use the features x features covariance.")], _field_default(LoadOptions, "covariance")),
        _param("mirror", Annotated[Literal["auto", "none", "mirror"], typer.Option("--mirror", **CHOICE, help="Header-less triplets: mirror a one-triangle file (auto), never (none) or always (mirror).")], _field_default(LoadOptions, "mirror")),
        _param("kernel", Annotated[Optional[str], typer.Option("--kernel", help="The file is a table of points (.csv/.tsv/.txt/.dat, .npy, .libsvm): use their kernel matrix, rbf, laplacian, matern32, matern52, cosine or linear (computed from columns; formed only when it fits).", metavar="KERNEL", callback=lowered)], _field_default(LoadOptions, "kernel")),
        _param("bandwidth", Annotated[Optional[float], typer.Option("--bandwidth", parser=any_number, help="The kernel's bandwidth h (rbf: exp(-d²/2h²)); default: the median distance between points (printed).", metavar="H")], _field_default(LoadOptions, "bandwidth")),
        _param("delimiter", Annotated[Optional[str], typer.Option("--delimiter", help="Text table (.csv/.tsv/.txt/.dat) or triplets (.ijv): what separates its cells, ',' ';' tab or whitespace (default: detected from the extension and the data lines).", metavar="SEP", callback=lowered)], _field_default(LoadOptions, "delimiter")),
        _param("decimal", Annotated[Optional[str], typer.Option("--decimal", help="Text table or triplets: the decimal mark of its numbers, '.' or ',' (default: detected; a number that reads both ways is refused).", metavar="MARK")], _field_default(LoadOptions, "decimal")),
        _MAX_MEMORY,
    ),
    lambda v: _checked_marks(LoadOptions(
        format=v["format"], var=v["var"], network=v["network"], relation=v["relation"], two_mode=v["two_mode"],
        gradient=v["gradient"],
        resize=v["resize"], square=v["square"], covariance=v["covariance"], mirror=v["mirror"],
        kernel=v["kernel"], bandwidth=v["bandwidth"], max_memory=parse_size(v["max_memory"]),
        delimiter=v["delimiter"], decimal=v["decimal"],
    )),
)


def _checked_marks(load: LoadOptions) -> LoadOptions:
    """``load`` once its text-table delimiter and decimal mark are ones a table can have (refused before any
    file is read or output checked: a batch would otherwise fetch its downloads first)."""
    check_text_marks(load.delimiter, load.decimal)
    return load


# ---------------------------------------------------------------- FitSettings
FIT = Group(
    "settings",
    (
        _param("iters", Annotated[Optional[int], integer("--iters", min=0, help=f"SF (and sf+lr, sf+s): maximum L-BFGS iterations (default {SF_MAX_ITER}).", metavar="N", show_default=False)], None),
        _param("time_limit", Annotated[Optional[float], number("--time-limit", min=0, unit="seconds", none="0 for none", help=f"Seconds each method may take as a whole (grids and starts share them), at each budget of a sweep; 0 for none (results then depend on the iteration limits alone: the same on any machine). Default: {DEFAULT_TIME_LIMIT:g} for one method; the methods of a comparison (of a sweep's budget) share {DEFAULT_TOTAL_TIME:g} (at most {DEFAULT_TIME_LIMIT:g} each).", metavar="SECONDS", show_default=False)], None),
        _param("seed", Annotated[int, integer("--seed", min=0, max=MAX_SEED, help="Random seed (random starts, randomized solvers).", metavar="N")], _field_default(FitSettings, "seed")),
        _param("device", Annotated[str, typer.Option("--device", help="auto (CUDA when available), cpu, cuda or cuda:N.", metavar="DEVICE", callback=lowered)], _field_default(FitSettings, "device")),
        _param("dtype", Annotated[Optional[Literal["float64", "float32"]], typer.Option("--dtype", **CHOICE, help="Floating point of the fits (default: float32 on a GPU; on the CPU float64, but float32 for SF from N = 4,096).")], None),
        _param("threads", Annotated[Optional[int], integer("--threads", min=1, help="CPU threads of the fits, at most the cores this process may use (default: chosen from the work size and the free cores).", metavar="N")], None),
        _MAX_MEMORY,
    ),
    lambda v: _usable(_in_option_words(lambda: FitSettings(
        max_iter=v["iters"], time_limit="auto" if v["time_limit"] is None else v["time_limit"] or None,
        seed=v["seed"], device=v["device"],
        dtype=v["dtype"], threads=v["threads"], max_memory=parse_size(v["max_memory"]),
    ))),
)


def _usable(settings: FitSettings) -> FitSettings:
    """``settings`` once its device is one this machine has (checked before any file is read: a batch
    fetched its downloads and wrote a failed line per SF fit for --device cuda on a CPU), and its threads
    at most the cores this process may use."""
    from .._device import check_device

    check_device(settings.device)
    # the fits never use more (the count was recorded as asked while 2 threads ran): said, and recorded as run
    threads = at_most_cores("--threads", settings.threads, "the fits use {cores}")
    return settings if threads == settings.threads else dataclasses.replace(settings, threads=threads)


def at_most_cores(option: str, value: int | None, then: str) -> int | None:
    """``value`` of a count option, at most the cores this process may use; where lowered, a note says so
    (``then``: what runs instead, with ``{cores}``), as ``--threads`` and ``batch --jobs`` are lowered."""
    from .._threads import available_cores

    cores = available_cores()
    if value is None or value <= cores:
        return value
    note(f"note: {option} {value} is more than the {counted(cores, 'core')} this process may use; "
         f"{then.format(cores=cores)}")
    return cores


#: The command-line option of each FitSettings field whose value a user types.
_FIT_OPTIONS = {"max_iter": "--iters", "time_limit": "--time-limit", "seed": "--seed", "device": "--device",
                "dtype": "--dtype", "threads": "--threads", "max_memory": "--max-memory"}


def _in_option_words(make: Callable[[], Any], owner: str = "FitSettings",
                     options: dict[str, str] | None = None) -> Any:
    """``make()``, its :class:`ParameterError` about a field of ``owner`` (FitSettings, ChordSF) reworded
    to name the option (``options``: field -> option; "--time-limit must be ..."), not the class a user
    never sees."""
    import re

    from .._errors import ParameterError

    options = _FIT_OPTIONS if options is None else options
    try:
        return make()
    except ParameterError as exc:
        found = re.match(rf"The '(\w+)' parameter of {owner} (.*)", str(exc), re.S)
        if found is None or found.group(1) not in options:
            raise
        field = found.group(1)
        if field == "time_limit":  # its 'auto' and None are the API's, not values a user types
            got = re.search(r"Got (.*) instead\.$", found.group(2), re.S)
            raise ParameterError("--time-limit must be a finite number of seconds, 0 for none"
                                 + (f"; got {got.group(1)}" if got else "")) from None
        # None is the API's "not given", not a value a user types
        raise ParameterError(f"{options[field]} {found.group(2).replace(' or None', '')}") from None


# ---------------------------------------------------------------- outputs
def _output(name: str, what: str) -> inspect.Parameter:
    return _param(name, Annotated[Optional[Path], typer.Option(f"--{name}", help=f"Also write the {what} to this file ('-': standard output).", metavar="FILE")], None)


def output_group(json: str) -> Group:
    """The output options of a table command; ``json`` says what its JSON holds (in ``--json``'s help:
    "Also write the ``json`` to this file"), since that differs from command to command."""
    return Group(
        "outputs",
        (
            _output("json", json),
            _output("csv", "table as CSV"),
            _output("markdown", "table as Markdown"),
            _output("latex", "table as LaTeX (booktabs)"),
            _param("force", Force, False),
        ),
        lambda v: _outputs({fmt: v[fmt] for fmt in ("json", "csv", "markdown", "latex") if v[fmt] is not None},
                           v["force"]),
    )


#: The outputs of a command whose JSON is a result (compare, sweep): it records what made it.
OUTPUTS = output_group("results as JSON (with the settings and versions)")


def _outputs(files: dict[str, Path], force: bool):
    return Outputs(files, force)
