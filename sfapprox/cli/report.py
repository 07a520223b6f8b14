"""`sfapprox report FILE.json`: the JSON that `compare` or `sweep` wrote, shown and written again as that
command showed and wrote it (its table, its other formats, a sweep's plot), without running anything.

The command itself is `report` in :mod:`sfapprox.cli.batch`, which reads a batch's folder; a file it is
given comes here.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from .._errors import InputError, ParameterError
from ._render import Outputs, check_outputs, check_plot, emit, note

#: A file larger than this is no compare's or sweep's JSON (theirs are kilobytes): it is not read.
LARGEST_RESULT = 64 << 20
#: The command that writes each format of result JSON.
_COMMANDS = {"sfapprox-comparison": "compare", "sfapprox-sweep": "sweep"}


def read_json(path: Path) -> Any:
    """The parsed file, or None where it is no JSON (or over :data:`LARGEST_RESULT`): those keep the report's
    word on a file that is not a batch's folder.  A file named ``*.json`` that does not parse is refused,
    saying where: a damaged result said "give the batch's folder"."""
    try:
        if path.stat().st_size > LARGEST_RESULT:
            return None
        text = path.read_bytes().decode("utf-8-sig")  # (a BOM: the file saved again by an editor such as Notepad)
        return json.loads(text)
    except OSError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        if path.suffix.lower() != ".json":
            return None
        why = (f"{exc.msg}: line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError)
               else "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "nested too deeply")
        raise InputError(f"{path}: not valid JSON ({why}); report reads the JSON that compare --json or sweep "
                         "--json wrote, or a batch's folder") from None


def result_command(data: Any) -> str | None:
    """``"compare"`` or ``"sweep"``, the command whose JSON ``data`` is (its ``format``; a file written before
    that was recorded, by its keys), else None.

    Examples
    --------
    >>> result_command({"format": "sfapprox-sweep"}), result_command({"matrix": {}, "results": []})
    ('sweep', 'compare')
    >>> result_command({"method": "sf", "budget_spec": "sf"}) is None  # fit --json
    True
    """
    if not isinstance(data, dict):
        return None
    said = data.get("format")
    if isinstance(said, str) and said in _COMMANDS:
        return _COMMANDS[said]
    if "points" in data:
        return "sweep"
    return "compare" if "results" in data else None


def check_format_known(path: Path, data: Any) -> None:
    """Refuse a JSON object whose ``format`` names an sfapprox result this one does not know (a newer one's)."""
    said = data.get("format") if isinstance(data, dict) else None
    if isinstance(said, str) and said.startswith("sfapprox-") and said not in (*_COMMANDS, "sfapprox-batch-record"):
        known = ", ".join(repr(f) for f in _COMMANDS)
        raise InputError(f"{path}: key format is {said!r}, which report does not read (it reads {known} and a "
                         "batch's folder); a newer sfapprox's file?")


def report_result(path: Path, data: dict[str, Any], command: str, outputs: Outputs, plot: Path | None) -> None:
    """Show ``data`` (the JSON of ``command``, read from ``path``) as ``command`` showed it, and write the
    formats asked for and ``plot`` (a sweep's figure) as it wrote them."""
    if plot is not None and command == "compare":
        raise ParameterError(f"--plot: compare's figure shows the approximations and their residuals, which "
                             f"{path} does not hold; run compare again with --plot FILE")
    check_outputs(outputs, inputs=[path])
    outputs = check_plot(plot, outputs.force, outputs, inputs=[path])
    result = read_result(path, data, command)
    _say_changed(path, data, result)

    def write_plot() -> None:
        from ..plotting import plot_sweep  # here: --help loads no numpy

        plot_sweep(result, plot, force=outputs.force)
        note(f"wrote {plot}")

    emit(result.tables(), result.to_dict(), outputs, then=[write_plot] if plot is not None else [])


def read_result(path: Path, data: dict[str, Any], command: str):
    """The :class:`~sfapprox.results.Comparison` or :class:`~sfapprox.sweep.Sweep` of ``data``; a refusal
    names the file and the key."""
    from ..results import Comparison  # here: --help loads no numpy
    from ..sweep import Sweep

    try:
        # what from_dict warns of (a row of a method this sfapprox does not know: shown as recorded) is said
        # as the report's other notes are, with the file, rather than as a warning naming no file
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", UserWarning)
            result = (Sweep if command == "sweep" else Comparison).from_dict(data)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    for w in said:
        if w.category is UserWarning:
            note(f"note: {path}: {w.message}", style="yellow")
        else:  # not the file's: shown as it would have been
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return result


def _say_changed(path: Path, data: dict[str, Any], result) -> None:
    """A note where the file's verdict is not the one its rows give now (another sfapprox's wording, an edited
    row): the table shows the one its rows give, and the file's would otherwise be lost without a word."""
    points = data.get("points") if "points" in data else [data]
    now = result.points if "points" in data else [result]
    for point, comparison in zip(points, now):
        said = (point.get("verdict") or {}).get("text")
        verdict = comparison.verdict()
        if said is not None and said != (verdict or {}).get("text"):
            budget = f" at budget {comparison.budget:,}" if "points" in data else ""
            note(f"note: {path}: its verdict{budget} was \"{said}\"; its rows read now: "
                 f"\"{(verdict or {}).get('text', 'no verdict')}\" (shown)", style="yellow")
