"""Every method at every budget: error-versus-budget curves for one matrix."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import numpy as np

from ._base import RunContext, get_method, parse_methods
from ._errors import InputError, ParameterError, ResourceError
from ._old_api import REQUIRED, take_old_keywords
from ._params import split_items
from ._progress import phase
from ._progress_line import progress_shown
from ._settings import (COUNT_INDICES, DEFAULT_METHODS, DEFAULT_TIME_LIMIT, DEFAULT_TOTAL_TIME, PROTOCOLS, FitSettings,
                        LoadOptions)
from .budget import parse_budget, resolve_budget
from .comparison import (
    MatrixInput,
    as_loaded_matrix,
    build_comparison,
    check_methods_memory,
    check_methods_memory_from_columns,
    check_run_arguments,
    check_scoring_memory,
    columns_note,
    compare_columns,
    from_columns,
    matrix_record,
    not_run,
    opened_input,
    run_all,
    settings_with,
    warnings_at_caller,
)
from .formats import (Column, ShownAsTables, Table, and_listed, fmt_seconds, interval_columns, jsonable, listed,
                      printable)
from .results import (
    Comparison,
    MethodResult,
    check_finite,
    check_format,
    comparison_from,
    error_text,
    key_path,
    matrix_from,
    read_field,
    record_label,
    seconds_note,
    warn_unknown_methods,
)
from .sources import MatrixSource

__all__ = ["Sweep", "sweep", "parse_budget_list", "default_budgets", "SWEEP_FORMAT", "SWEEP_VERSION"]

#: What the JSON of a sweep (``sweep --json``) says it is, in its ``"format"``, and the version of its shape
#: (as :data:`~sfapprox.results.COMPARISON_FORMAT`'s: a later version is refused by :meth:`Sweep.from_dict`).
SWEEP_FORMAT = "sfapprox-sweep"
SWEEP_VERSION = 1
#: A comparison's keys that a sweep's JSON holds once for every point (and its format, the sweep's).
_SHARED = ("format", "version", "matrix", "settings", "versions")


def _parse_item(item: str | int | float, k: int, name: str) -> str:
    """:func:`~sfapprox.budget.parse_budget` of the ``k``-th budget of the list ``name``, whose refusal names
    the list and the item (it said "budget must be ..." alone: which option, and which of its items?)."""
    try:
        return parse_budget(item)
    except ParameterError as exc:
        raise ParameterError(f"{name}: item {k} ({item!r}): {exc}") from None


def parse_budget_list(text: str | Sequence[str | int | float], *, name: str = "--budgets") -> list[str]:
    """``"0.01,0.02,sf,5000"`` → ``["0.01", "0.02", "sf", "5000"]``, each checked for its form.

    Parameters
    ----------
    text : str or sequence of str, int or float
        Comma-separated budgets (:func:`~sfapprox._params.split_items`), or the budgets themselves.
    name : str, default="--budgets"
        What the budgets are called in the error for none: the CLI's option,
        or ``"budgets"`` for :func:`sweep`'s parameter.

    Returns
    -------
    list of str
        Each normalised by :func:`~sfapprox.budget.parse_budget`.

    Raises
    ------
    ParameterError
        When no budget is given or one is malformed.

    Examples
    --------
    >>> parse_budget_list("0.05, sf,100")
    ['0.05', 'sf', '100']
    """
    # Numbers given as numbers stay numbers (600.0 is a count; "600.0" typed is refused as ambiguous).
    items = split_items(text, name) if isinstance(text, str) else [
        part.strip() if isinstance(part, str) else part for part in text]
    # numbered as given (from 1), empty items counted: "item 3" is the third the user wrote
    numbered = [(k, item) for k, item in enumerate(items, 1) if not isinstance(item, str) or item]
    if not numbered:
        example = "0.01,0.02,0.05" if name.startswith("-") else "[0.01, 0.02, 0.05]"
        raise ParameterError(f"{name} needs at least one budget, e.g. {example}")
    try:
        return [_parse_item(item, k, name) for k, item in numbered]
    except ParameterError as exc:
        if isinstance(text, str) and re.search(r"\d,\d{3}(?!\d)", text):
            # "1,000" split into "1" and "000": say why the list read it so
            raise ParameterError(f"{exc}; commas separate the budgets: write 1000, not 1,000") from None
        raise


def _budget_specs(budgets) -> list[str]:
    """:func:`sweep`'s ``budgets`` as :func:`parse_budget_list` gives them; a single budget (a number
    or ``"sf"``) is a sweep of that one budget, as its text ``"0.05"`` already was."""
    if budgets is None:
        # None means "sf" to compare but "the default budgets" to the CLI: guessing either would surprise
        raise ParameterError("budgets is None: give the budgets to run, e.g. [0.01, 0.02, 'sf'] or '0.01,0.02', "
                             "or sfapprox.sweep.default_budgets(n, methods) for the CLI's default ones")
    if isinstance(budgets, np.ndarray) and budgets.ndim == 0:
        budgets = budgets.item()
    if isinstance(budgets, (bytes, bytearray, memoryview)):
        # iterable, it was swept as its byte values: b"0.1" ran the counts 46, 48 and 49
        raise ParameterError(f"budgets must be text, a number or a list of them, not {type(budgets).__name__} "
                             f"({bytes(budgets)[:20]!r}); decode it first (.decode())")
    if isinstance(budgets, Real):
        budgets = [budgets]
    elif not isinstance(budgets, Iterable):
        raise ParameterError(f"budgets must be a budget or a list of budgets (fractions of N², counts or 'sf'); "
                             f"got {type(budgets).__name__}")
    return parse_budget_list(budgets if isinstance(budgets, str) else list(budgets), name="budgets")


def limits_seconds(methods: Sequence[str], budgets: int, time_limit: float | str | None) -> float | None:
    """The seconds that the time limits of a sweep's iterative methods add up to over ``budgets`` budgets:
    the fits' limits, besides the closed forms (not cut), the scoring and each fit's setup.  Each budget gives the
    limit again, so at the defaults they add up to ``budgets`` times a comparison's two minutes at most (at
    N = 3,000, 5 default budgets of tsvd, sparse and sf took 4.7 minutes, where nothing said so before).

    Parameters
    ----------
    methods : sequence of str
        Method names.
    budgets : int
        How many budgets the sweep runs.
    time_limit : float, "auto" or None
        :attr:`FitSettings.time_limit`.

    Returns
    -------
    float or None
        Seconds; None without a limit or without an iterative method.

    Examples
    --------
    >>> limits_seconds(["tsvd", "sparse", "sf"], 5, "auto"), limits_seconds(["sf", "rpca", "nmf"], 5, "auto")
    (300.0, 600.0)
    >>> limits_seconds(["sf", "rpca"], 10, 2.0), limits_seconds(["sf"], 5, None), limits_seconds(["tsvd"], 5, "auto")
    (40.0, None, None)
    """
    iterative = sum(1 for m in methods if get_method(m).iterative)
    if time_limit is None or not iterative:
        return None
    each = (min(DEFAULT_TOTAL_TIME, DEFAULT_TIME_LIMIT * iterative) if time_limit == "auto"
            else float(time_limit) * iterative)
    return budgets * each


#: Multiples of the smallest common budget that ``sweep`` runs when no budgets are given.
DEFAULT_FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0)


def default_budgets(n: int, methods: Sequence[str], *, count_indices: bool = COUNT_INDICES) -> list[str]:
    """Budgets around where the methods start to apply: 0.5, 1, 1.5, 2 and 3 times the largest
    of their smallest budgets (:attr:`~sfapprox._base.MethodSpec.min_budget`), within 2 to ``N^2``.

    At 0.5x some method is "not applicable" (which shows where it starts);
    from 1x on every method runs.  SF on a 234 x 234 graph needs about 30%
    of N², so fixed fractions such as 1%-10% would leave it out everywhere.
    None is 1 where ``N^2`` is more: a budget of ``"1"`` is read as the fraction 1 of ``N^2``
    (:func:`~sfapprox.budget.resolve_budget`), and at N = 2 rpca's 0.5x ran at all 4 entries.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    methods : sequence of str
        Method names.
    count_indices : bool, default=True
        As in :func:`~sfapprox.compare` (it changes some smallest budgets).

    Returns
    -------
    list of str
        Distinct budgets (stored numbers), increasing.

    Examples
    --------
    >>> default_budgets(36, ["sf", "tsvd"])
    ['486', '972', '1296']
    >>> default_budgets(100, ["sf", "tsvd"])
    ['1750', '3500', '5250', '7000', '10000']
    >>> default_budgets(2, ["rpca"])
    ['2', '3', '4']
    """
    base = smallest_common_budget(n, methods, count_indices=count_indices)
    values = sorted({_within(n, f * base) for f in DEFAULT_FACTORS})
    return [str(v) for v in values]


def smallest_common_budget(n: int, methods: Sequence[str], *, count_indices: bool = COUNT_INDICES) -> int:
    """The largest of the methods' smallest budgets (``N^2`` where none has one): what :func:`default_budgets`
    multiplies."""
    context = RunContext(count_indices=count_indices)
    needs = [get_method(m).min_budget(n, context) for m in methods]
    known = [b for b in needs if b is not None]
    return max(known) if known else n * n


def _within(n: int, budget: float) -> int:
    """``budget`` rounded, within 2 (a budget of 1 reads as all of ``N^2``) to ``N^2``."""
    return min(n * n, max(2, int(round(budget))))


def default_budgets_words(n: int, methods: Sequence[str], *, count_indices: bool = COUNT_INDICES) -> str:
    """How :func:`default_budgets` chose its budgets, for the note that lists them: the multiples and of what,
    and where they were capped (at N = 1 a sweep said "1 (0.5 to 3 times the smallest budget at which tsvd
    applies)", tsvd's smallest being 3).

    Examples
    --------
    >>> default_budgets_words(300, ["sf", "tsvd"])
    '0.5 to 3 times the smallest budget at which all of sf, tsvd apply'
    >>> default_budgets_words(100, ["sf", "tsvd"])
    '0.5 to 3 times the smallest budget at which all of sf, tsvd apply, 3,500, capped at N² = 10,000'
    >>> default_budgets_words(1, ["tsvd"])
    '0.5 to 3 times the smallest budget at which tsvd applies, 3, capped at N² = 1'
    >>> default_budgets_words(2, ["rpca"])
    '0.5 to 3 times the smallest budget at which rpca applies, 2, raised to 2 and capped at N² = 4'
    """
    base = smallest_common_budget(n, methods, count_indices=count_indices)
    which = f"{methods[0]} applies" if len(methods) == 1 else f"all of {', '.join(methods)} apply"
    words = f"0.5 to 3 times the smallest budget at which {which}"
    multiples = [int(round(f * base)) for f in DEFAULT_FACTORS]
    bounds = [text for text, moved in ((f"raised to {_within(n, 2)}", any(m < _within(n, m) for m in multiples)),
                                       (f"capped at N² = {n * n:,}", any(m > n * n for m in multiples))) if moved]
    return f"{words}, {base:,}, {' and '.join(bounds)}" if bounds else words


#: A budget named in a method's reason ("budget 40 is too small ..."): the same reason at every budget
#: differs by it alone, and was said once per budget (five near-identical lines at N = 8).
_BUDGET_IN_REASON = re.compile(r"(?<!the )\bbudget [0-9][0-9,]*")


def _reason_note(method: str, key: str, first: str, budgets: list[int], every: list[int]) -> str:
    """A method's reason under the sweep's table: as given where one budget gave it, else once for
    every budget that gave it ("sf at budgets 10, 20, 30: the budget is too small ..."), of the sweep's
    budgets ``every`` (:func:`budgets_text`)."""
    if len(budgets) == 1 or key == first:
        return f"{method}: {first}"
    return f"{method} at {budgets_text(budgets, every)}: {key.replace('budget B', 'the budget')}"


def _reason_notes(reasons: dict[str, dict[str, tuple[str, list[int]]]], methods: list[str],
                  every: list[int]) -> list[str]:
    """The reasons under the sweep's table (:func:`_reason_note`), a reason that every method of several
    gave at the same budgets said once, for them all ("every method at budgets 20, 30: ..."): the budgets
    over the memory limit from columns got the same line once per method."""
    shared = [key for key, (_, at) in reasons.get(methods[0], {}).items() if len(methods) > 1 and all(
        key in reasons.get(m, {}) and reasons[m][key][1] == at for m in methods)] if methods else []
    notes = [_reason_note("every method", key, *reasons[methods[0]][key], every) for key in shared]
    return notes + [_reason_note(m, key, first, at, every) for m, whys in reasons.items()
                    for key, (first, at) in whys.items() if key not in shared]


#: A list of more budgets than this is said by its ends: 40 budgets' "81, 163, ..., 3,276" took four lines.
BUDGETS_LISTED = 6


def budgets_text(budgets: list[int], every: list[int]) -> str:
    """``budgets`` (some of a sweep's budgets ``every``, in order) as a note names them: each where there
    are at most :data:`BUDGETS_LISTED`, else a run of ``every`` by its ends, else the first three and
    how many more.

    Examples
    --------
    >>> every = list(range(10, 410, 10))
    >>> budgets_text([10, 20], every), budgets_text(every[:12], every), budgets_text(every[::2], every)
    ('budgets 10, 20', 'the 12 budgets 10 to 120', 'budgets 10, 30, 50 and 17 more, up to 390')
    """
    if len(budgets) <= BUDGETS_LISTED:
        return f"budgets {', '.join(f'{b:,}' for b in budgets)}"
    start = every.index(budgets[0]) if budgets[0] in every else -1
    if start >= 0 and every[start:start + len(budgets)] == budgets:
        return f"the {len(budgets):,} budgets {budgets[0]:,} to {budgets[-1]:,}"
    return f"budgets {', '.join(f'{b:,}' for b in budgets[:3])} and {len(budgets) - 3:,} more, up to {budgets[-1]:,}"


#: A stopped sweep's note names this many methods left unrun at a budget at most; more are counted (four
#: named are about as long as "sf, rpca and 2 more methods").
METHODS_LISTED = 4


def stopped_note(unrun: dict[int, list[str]], skipped: list[int], every: list[int]) -> str:
    """The one note under a stopped sweep's table naming what the stop left out: the methods left unrun at
    the budget where it came (``unrun``, by budget) and the budgets never reached (``skipped``, of the
    sweep's budgets ``every``, :func:`budgets_text`).  Two notes both beginning "skipped: the sweep was
    stopped before" read as a repeat.

    Budgets that left the same methods unrun are named together; more than :data:`METHODS_LISTED`
    methods are counted.  The budgets never reached are "every method at" them after methods left
    unrun: "sf at budgets 1,000, 2,000 and budget 4,000" read as sf alone skipped at 4,000.  Where a part
    holds a list of its own (a ", " or an " and "), the parts are parted by semicolons: an "and" list of
    "and" lists ("nmf, rpca, monarch and sparse at budget 1,000 and budgets 2,000, 4,000") read as one.

    Examples
    --------
    >>> stopped_note({80000: ["sf"]}, [90000, 100000], [80000, 90000, 100000])
    'skipped: the sweep was stopped before sf at budget 80,000; every method at budgets 90,000, 100,000'
    >>> stopped_note({43: ["sparse", "sf"]}, [], [43])
    'skipped: the sweep was stopped before sparse and sf at budget 43'
    >>> stopped_note({43: ["sf"]}, [72], [43, 72])
    'skipped: the sweep was stopped before sf at budget 43 and every method at budget 72'
    >>> stopped_note({}, [72], [43, 72])
    'skipped: the sweep was stopped before budget 72'
    >>> stopped_note({10: ["nmf", "rpca", "monarch", "sparse", "tsvd"]}, [30], [10, 30])
    'skipped: the sweep was stopped before nmf, rpca and 3 more methods at budget 10; every method at budget 30'
    """
    budgets_by_methods: dict[tuple[str, ...], list[int]] = {}
    for budget, methods in unrun.items():
        budgets_by_methods.setdefault(tuple(methods), []).append(budget)
    parts = [f"{_methods_text(list(methods))} at {_budgets_words(budgets, every)}"
             for methods, budgets in budgets_by_methods.items()]
    if skipped:
        parts.append(("every method at " if parts else "") + _budgets_words(skipped, every))
    own_lists = any(", " in part or " and " in part for part in parts)  # (not 1,000's comma)
    text = "; ".join(parts) if len(parts) > 1 and own_lists else and_listed(parts)
    return f"skipped: the sweep was stopped before {text}"


def _methods_text(methods: list[str]) -> str:
    """"sf and rpca", or past :data:`METHODS_LISTED` the first two and a count (:func:`~sfapprox.formats.listed`):
    "sf, rpca and 9 more methods", no longer than four named."""
    if len(methods) <= METHODS_LISTED:
        return and_listed(methods)
    return f"{listed(methods, most=2)} methods"


def _budgets_words(budgets: list[int], every: list[int]) -> str:
    """"budget 1,000", or several as :func:`budgets_text` names them."""
    return f"budget {budgets[0]:,}" if len(budgets) == 1 else budgets_text(budgets, every)


def beyond_dense(n: int, methods: Sequence[str], *, count_indices: bool = COUNT_INDICES) -> dict[str, int]:
    """The methods whose smallest budget is over ``N^2``, with it: no budget up to the dense matrix's own
    count (where counts are capped, :func:`~sfapprox.budget.resolve_budget`) lets them run.

    Examples
    --------
    >>> beyond_dense(8, ["sf", "tsvd"])
    {'sf': 72}
    >>> beyond_dense(100, ["sf", "tsvd"])
    {}
    """
    context = RunContext(count_indices=count_indices)
    needs = {m: get_method(m).min_budget(n, context) for m in methods}
    return {m: need for m, need in needs.items() if need is not None and need > n * n}


#: Budgets a sweep's ``repr`` gives a line each; of more, the first and last ones.
REPR_BUDGETS = 6


@dataclass(repr=False)  # its own __repr__: every point's every field was 2,400 characters
class Sweep(ShownAsTables):
    """One :class:`~sfapprox.results.Comparison` per budget, by increasing budget.

    In a notebook it shows as ``sweep``'s table (``_repr_html_``); its ``repr`` gives
    each budget's errors (the smallest starred) in a few lines; :meth:`to_frame`
    gives the rows as a pandas DataFrame, the values of ``sweep --csv``: a row per
    budget (a stopped sweep's unreached ones too, "skipped"): ``budget``, ``% of N²``,
    each method's relative error (its absolute one when X is all zeros; NaN where it
    has none), each method's status (``"<method> status"``) and, where estimated, the
    95 % intervals' ends.

    Attributes
    ----------
    matrix : dict
        The matrix summary (as in a Comparison).
    methods : list of str
        The methods run at every budget, in the order asked.
    points : list of Comparison
        One per distinct budget, smallest first (fewer than asked when a
        Ctrl-C stopped the sweep).
    settings : dict
        The fit settings, protocol and ``count_indices``.
    versions : dict of str to str
        The library versions.
    """

    matrix: dict[str, Any]
    methods: list[str]
    points: list[Comparison]
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    #: The budgets a stop left unreached (an interrupted sweep): rows of "skipped" in its table and CSV.
    skipped: list[int] = field(default_factory=list)

    def table(self) -> dict[int, dict[str, MethodResult]]:
        """``{budget: {method: result}}``.

        Returns
        -------
        dict of int to dict of str to MethodResult
        """
        return {p.budget: {r.method: r for r in p.results} for p in self.points}

    def __repr__(self) -> str:
        """The table's title, then a line per budget (its errors as the table says them, the smallest
        starred where two or more were scored); of more than :data:`REPR_BUDGETS` budgets, the first and last ones.

        Examples
        --------
        >>> s = Sweep({"name": "graph", "n": 10}, ["sf", "tsvd"], [
        ...     Comparison({"name": "graph", "n": 10}, 40, "40", [MethodResult("sf", "not applicable"),
        ...                                                       MethodResult("tsvd", "ok", 38, 2.0, 0.4)]),
        ...     Comparison({"name": "graph", "n": 10}, 80, "80", [MethodResult("sf", "ok", 80, 1.0, 0.2),
        ...                                                       MethodResult("tsvd", "ok", 76, 1.5, 0.3)])])
        >>> s
        Sweep: graph (N=10): relative error by budget
          budget 40 (40.00% of N²): sf n/a, tsvd 0.4
          budget 80 (80.00% of N²): sf 0.2 ★, tsvd 0.3
        """
        (table,) = self.tables()
        lines = [f"  budget {row['budget']} ({row['share']} of N²): "
                 + ", ".join(f"{m} {row.get(m, '–')}{' ★' if m in best else ''}" for m in self.methods)
                 for row, best in zip(table.rows, table.best)]
        if len(lines) > REPR_BUDGETS:
            head = REPR_BUDGETS // 2
            left = len(lines) - REPR_BUDGETS + 1
            lines = [*lines[:head], f"  ... {left} more budgets ...", *lines[-(REPR_BUDGETS - head - 1):]]
        return printable("\n".join([f"Sweep: {table.title}", *(lines or ["  no budget was run"])]))

    def tables(self) -> list[Table]:
        """The sweep as one table: a row per budget, a column per method (relative errors)
        with the row's smallest in bold and each method's stop reason where it did not converge.

        Returns
        -------
        list of Table
            One table (what ``sfapprox sweep`` prints, ``to_frame`` and ``_repr_html_`` show).
        """
        n = self.matrix["n"]
        columns = [Column("budget", "budget"), Column("share", "% of N²", priority=10)]
        columns += [Column(m, m) for m in self.methods]
        # each method's seconds (its whole turn, as compare's column) after the errors, read side by side; a narrow
        # window leaves them out after "% of N²", the last method's first
        count = len(self.methods)
        columns += [Column(_seconds_key(m), _seconds_key(m), priority=_SECONDS_PRIORITY + count - k)
                    for k, m in enumerate(self.methods)]
        # X all zeros has no relative error ("–" in every cell): the absolute one, and the title says so
        zero = self.matrix.get("fro_norm") == 0
        error, interval = ("fro_error", "fro_interval") if zero else ("rel_error", "rel_interval")
        what = "absolute error by budget (X is all zeros)" if zero else "relative error by budget"
        table = Table(f"{record_label(self.matrix)} (N={n:,}): {what}", columns)
        # each method's status beside its error in the CSV (CSV-only columns, after the others): a bare
        # number there was a fit cut short as much as a finished one ("interrupted", "time_limit")
        table.data_titles = {f"{m} status": f"{m} status" for m in self.methods}
        # an error estimated from random columns (a matrix never formed): its 95 % interval, CSV-only columns
        # (empty where exact), as compare's CSV has it; the bare value read as exact
        estimated = [m for m in self.methods if any(r.method == m and (r.error_estimate or {}).get(interval)
                                                    for p in self.points for r in p.results)]
        for m in estimated:
            table.data_titles.update({title: title for title in interval_columns(m)})
        # per method, its distinct reasons (a failure after a "too small"), each with the budgets it was given at
        reasons: dict[str, dict[str, tuple[str, list[int]]]] = {}
        unrun: dict[int, list[str]] = {}  # the methods the stop came before, by the budget where it stopped
        for point in self.points:
            rows = {r.method: r for r in point.results}
            # a method the stop left unrun at its own point showed "–", said nowhere (the point's comparison
            # has its "not run" note, the sweep's table did not): "skipped", as the budgets after it
            left = not_run(self.methods, point.results)
            if left:
                unrun[point.budget] = left
            winner = point.winner()
            cells = {"budget": f"{point.budget:,}", "share": f"{100 * point.budget / n**2:.2f}%"}
            data = {"budget": point.budget, "share": 100 * point.budget / n**2}  # CSV's values (Table.data)
            for m in self.methods:
                r = rows.get(m)
                # no error ("n/a", "failed", a cut-short fit not scored): an empty CSV cell, the status column
                # says why ("n/a" in a column of numbers made it a column of strings)
                data[m] = None
                if r is not None:
                    stop = r.params.get("stop_reason") if r.status == "ok" else None
                    data[f"{m} status"] = stop if stop in ("time_limit", "max_iter") else r.status
                # "0.31 ± 0.004" when estimated, "(time_limit)" after a fit stopped on it, "n/a" (as compare's repr)
                cells[m] = ("skipped" if m in left else "–") if r is None else error_text(r, absolute=zero)
                if m in left:
                    data[f"{m} status"] = "skipped"
                # "–" where none was recorded (an older file's row, a method not run at this budget)
                cells[_seconds_key(m)] = fmt_seconds(None if r is None else r.seconds)
                data[_seconds_key(m)] = None if r is None else r.seconds
                if r is None:
                    pass
                elif r.status == "interrupted" and getattr(r, error) is not None:  # its best factors, scored (as compare)
                    data[m] = getattr(r, error)
                elif r.status != "ok":
                    if r.reason:  # the why is in the notes
                        key = _BUDGET_IN_REASON.sub("budget B", r.reason)
                        reasons.setdefault(m, {}).setdefault(key, (r.reason, []))[1].append(point.budget)
                else:
                    data[m] = getattr(r, error)
            for m in estimated:
                r = rows.get(m)
                data.update(interval_columns(m, (r.error_estimate or {}).get(interval) if r is not None and m in data
                                             else None))
            table.add(cells, best={winner} if winner else set(), data=data)
        for budget in self.skipped:  # a stop left them unreached: said, not left out without a sign
            cells = {"budget": f"{budget:,}", "share": f"{100 * budget / n**2:.2f}%"}
            table.add({**cells, **{m: "skipped" for m in self.methods}},
                      data={"budget": budget, "share": 100 * budget / n**2, **{m: None for m in self.methods},
                            **{_seconds_key(m): None for m in self.methods},
                            **{f"{m} status": "skipped" for m in self.methods}})
        every = [p.budget for p in self.points] + list(self.skipped)
        if unrun or self.skipped:
            table.notes.append(stopped_note(unrun, self.skipped, every))
        table.notes.extend(_reason_notes(reasons, self.methods, every))
        if any("(time_limit)" in row.get(m, "") or "(max_iter)" in row.get(m, "") for row in table.rows for m in self.methods):
            table.notes.append("(time_limit) / (max_iter): the fit stopped on that limit before converging")
        # compare's note on its seconds, once (a sweep's points are all formed, or all from columns)
        for note in dict.fromkeys(seconds_note(p.results, from_columns=p.from_columns) for p in self.points):
            if note is not None:
                table.notes.append(note)
        table.notes.extend(f"note: {n}" for n in grouped_notes(self.points))  # once each
        return [table]

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: the matrix, the methods, each budget's rows and verdict, settings and versions.

        Returns
        -------
        dict of str to Any
            Plain JSON values (what ``sfapprox sweep --json`` writes).
        """
        return jsonable(
            {
                "format": SWEEP_FORMAT,
                "version": SWEEP_VERSION,
                "matrix": self.matrix,
                "methods": self.methods,
                "points": [{k: v for k, v in p.to_dict().items() if k not in _SHARED} for p in self.points],
                "settings": self.settings,
                "versions": self.versions,
                "skipped": self.skipped,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sweep:
        """The sweep :meth:`to_dict` wrote (``sweep --json``), read back: its table, plot and JSON are the
        original's.  Every field is checked (each point's as :meth:`Comparison.from_dict` checks a
        comparison's), so that an edited or damaged file is refused in one line naming its key.

        Parameters
        ----------
        data : dict
            The parsed JSON.

        Returns
        -------
        Sweep

        Raises
        ------
        InputError
            Naming the key: one missing (``matrix``, ``methods``, ``points``, a point's ``budget``, ...), of the
            wrong type, NaN or Infinity anywhere, a ``format``/``version`` this sfapprox does not read, or a
            cell given twice: a method named twice in ``methods`` or in a point's rows, a budget of two
            points, a ``skipped`` budget that is a point's or is skipped twice, a row of a method that
            ``methods`` does not name (its table has no column for it).

        Warns
        -----
        UserWarning
            For rows of a method this sfapprox does not know (a newer sfapprox's, or a plugin's not
            imported here): read and shown as recorded (as :meth:`Comparison.from_dict`).

        Examples
        --------
        >>> s = Sweep({"name": "graph", "n": 10}, ["tsvd"], [
        ...     Comparison({"name": "graph", "n": 10}, 40, "40", [MethodResult("tsvd", "ok", 38, 2.0, 0.4)])])
        >>> Sweep.from_dict(s.to_dict()).to_dict() == s.to_dict()
        True
        """
        check_format(data, SWEEP_FORMAT, SWEEP_VERSION)
        check_finite(data)
        matrix = matrix_from(data)
        settings = read_field(data, "settings", "", "table") or {}
        versions = read_field(data, "versions", "", "versions") or {}
        shared = {"matrix": matrix, "settings": settings, "versions": versions}
        names = _named_once(read_field(data, "methods", "", "names", required=True, null=False))
        points = [comparison_from(point, key_path("points", i), shared)
                  for i, point in enumerate(read_field(data, "points", "", "list", required=True, null=False))]
        warn_unknown_methods(_cells_once(points, names))
        skipped = _skipped_once(read_field(data, "skipped", "", "counts") or [], points)
        return cls(matrix, names, points, settings, versions, skipped)


#: The priority of the methods' seconds columns (:class:`~sfapprox.formats.Column`): above "% of N²"'s, so that
#: a narrow window leaves that out first, as compare's leaves "of budget" out before its seconds.
_SECONDS_PRIORITY = 10


def _seconds_key(method: str) -> str:
    """The key and title of ``method``'s column of seconds in a sweep's table (and its CSV's)."""
    return f"{method} seconds"


def _named_once(names: list[str]) -> list[str]:
    """A sweep's ``methods``, refused where one is named twice (two columns of one method)."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InputError(f"key {key_path('methods', i)} is {name!r}, as {key_path('methods', names.index(name))} "
                             "is: a sweep names each method once")
    return names


def _cells_once(points: list[Comparison], names: list[str]) -> dict[str, MethodResult]:
    """Every point's rows by their key (``points[1].results[0]``), refused where a (method, budget) cell would
    be given twice (two points of one budget: :meth:`Sweep.table` kept one of them without a word) or a row
    has no column (a method ``names`` leaves out: its table showed no sign of it).  A point's own second
    row of a method is refused as it is read (:func:`~sfapprox.results.comparison_from`)."""
    first: dict[int, int] = {}
    rows = {}
    for i, point in enumerate(points):
        if point.budget in first:
            raise InputError(f"key {key_path(key_path('points', i), 'budget')} is {point.budget}, as "
                             f"{key_path(key_path('points', first[point.budget]), 'budget')} is: a sweep has one "
                             "point per budget, each method's cell at it once")
        first[point.budget] = i
        for j, r in enumerate(point.results):
            where = key_path(key_path(key_path("points", i), "results"), j)
            if r.method not in names:
                raise InputError(f"key {where}.method is {r.method!r}, which key methods does not name (the "
                                 f"sweep's columns: {', '.join(names) or 'none'})")
            rows[where] = r
    return rows


def _skipped_once(skipped: list[int], points: list[Comparison]) -> list[int]:
    """A sweep's ``skipped`` budgets, refused where one is also a point's (its table showed the budget
    twice, as run and as skipped) or is given twice (two "skipped" rows of one budget)."""
    ran = {point.budget: i for i, point in enumerate(points)}
    for i, budget in enumerate(skipped):
        if budget in ran:
            raise InputError(f"key {key_path('skipped', i)} is {budget}, as "
                             f"{key_path(key_path('points', ran[budget]), 'budget')} is: a budget a sweep ran is "
                             "not also skipped")
        if budget in skipped[:i]:
            raise InputError(f"key {key_path('skipped', i)} is {budget}, as "
                             f"{key_path('skipped', skipped.index(budget))} is: a sweep skips each budget once")
    return skipped


def sweep(
    matrix: MatrixInput = REQUIRED,
    budgets: str | int | float | Sequence[str | int | float] = REQUIRED,
    methods: str | Sequence[str] = DEFAULT_METHODS,
    *,
    settings: FitSettings | None = None,
    count_indices: bool = COUNT_INDICES,
    protocol: str = PROTOCOLS[0],
    callback: Callable[[dict], bool | None] | None = None,
    on_result: Callable[[int, MethodResult], None] | None = None,
    load: LoadOptions | None = None,
    matrix_info: dict[str, Any] | None = None,
    progress: bool = False,
    **setting_changes: Any,
) -> Sweep:
    """Run every method at each budget (as :func:`~sfapprox.compare` does at one).

    The budgets are run and reported by increasing size (equal budgets once).
    A Ctrl-C ends the sweep after the point it interrupted (that point is
    kept, with its interrupted row); other exceptions propagate.

    Parameters
    ----------
    matrix : LoadedMatrix, MatrixSource, LinearOperator, path, ndarray or scipy sparse array
        The square matrix, as :func:`~sfapprox.compare` takes it; a source too
        big to form with its scoring within ``settings.max_memory`` is swept
        from its columns (the column methods at each budget, every row scored
        from the same columns, exactly or with a 95 % interval).
    budgets : str, int, float or sequence of str, int or float
        The budgets (:func:`parse_budget_list`): ``"0.01,0.02,sf"`` or a list;
        a single budget (``0.05``, ``5000`` or ``"sf"``) sweeps that one.
        None is refused (:func:`default_budgets` gives the CLI's defaults).
    methods : str or sequence of str, default=DEFAULT_METHODS
        Method names from :func:`~sfapprox.available_methods`; by default SF,
        TSVD and plain sparse storage, as :func:`~sfapprox.compare` and the
        command line's ``sweep``.
    settings : FitSettings, optional
        How every method is fitted; ``setting_changes`` override its fields.
    count_indices : bool, default=True
        Charge sparse entries at free positions for their positions too.
    protocol : {"default", "paper"}, default="default"
        ``"paper"``: the SF paper's Table 1 settings.
    callback : callable, optional
        Progress callback of the iterative methods (a dict per iteration).
    on_result : callable, optional
        Called as ``on_result(budget, result)`` with each row as soon as it is ready; its
        attribute ``budget_starting``, where it has one, as ``budget_starting(budget, index,
        count)`` as each budget starts (``index`` from 1 of ``count``; a display names it).
    load : LoadOptions, optional
        How ``matrix`` is read when it is a path.
    matrix_info : dict, optional
        Extra facts merged into the matrix summary.
    progress : bool, default=False
        Draw a progress line on stderr, as :func:`~sfapprox.compare` does
        (the budget, the method, its iteration and error, the time).
    **setting_changes
        :class:`~sfapprox.FitSettings` fields to change (``time_limit=2``, ``seed=1``);
        any other keyword is a TypeError that lists them.  The old keywords ``X=``
        (``matrix``) and ``options=`` (a ``RunOptions``: ``settings`` and the keywords
        above) still work, with a DeprecationWarning (:mod:`sfapprox._old_api`).

    Returns
    -------
    Sweep

    Raises
    ------
    ParameterError
        For budgets that are None, empty or malformed (before any loading or
        fitting), and as :func:`~sfapprox.compare` for the other arguments.
    TypeError
        For a keyword that is neither a parameter nor a FitSettings field.

    Examples
    --------
    >>> import numpy as np
    >>> s = sweep(np.random.default_rng(0).random((10, 10)), [1.0, 0.5], ["tsvd"])
    >>> [p.budget for p in s.points]
    [50, 100]
    """
    matrix, replaced, _ = take_old_keywords(
        "sweep", matrix, setting_changes,
        {"settings": (settings, None), "count_indices": (count_indices, COUNT_INDICES),
         "protocol": (protocol, PROTOCOLS[0]), "callback": (callback, None)}, structure=False, approximations=False)
    if budgets is REQUIRED:
        raise TypeError("sweep() missing 1 required positional argument: 'budgets'")
    if replaced:
        settings, count_indices, protocol, callback = (replaced["settings"], replaced["count_indices"],
                                                       replaced["protocol"], replaced["callback"])
    settings = settings_with(settings, setting_changes, "sweep")
    check_run_arguments(count_indices=count_indices, callback=callback, on_result=on_result, matrix_info=matrix_info)
    names = parse_methods(methods)
    if protocol not in PROTOCOLS:
        raise ParameterError(f"unknown protocol {protocol!r}; choose {' or '.join(PROTOCOLS)}")
    specs = _budget_specs(budgets)
    # each budget names itself on the line (on_result's budget_starting), and the methods start again
    with progress_shown(progress, matrix, settings.max_iter, callback=callback, on_result=on_result,
                        names=names) as (callback, on_result):
        matrix = opened_input(matrix, load, settings.max_memory_bytes)
        if isinstance(matrix, MatrixSource) and from_columns(matrix, names, settings.max_memory_bytes):
            return _sweep_columns(matrix, names, specs, settings=settings, count_indices=count_indices,
                                  protocol=protocol, callback=callback, on_result=on_result, matrix_info=matrix_info)
        with phase(callback, "forming the matrix"):  # (a kernel's source: seconds to minutes)
            loaded = as_loaded_matrix(matrix, None, settings.max_memory_bytes)
            resolved, merged = _distinct_budgets(specs, loaded.n)
            check_scoring_memory(loaded, settings.max_memory_bytes)
            check_methods_memory(names, loaded, settings.max_memory_bytes)
            info = {**matrix_record(loaded.summary(), columns=False), **(matrix_info or {})}
        context = RunContext(settings, count_indices, protocol, callback, matrix_name=loaded.name)
        points: list[Comparison] = []
        with warnings_at_caller():
            for index, value in enumerate(sorted(resolved), 1):
                budget = resolved[value]
                _budget_starts(on_result, value, index, len(resolved))
                report = _per_budget(on_result, value)
                results = run_all(names, loaded.matrix, budget, context, info["fro_norm"], report)
                points.append(build_comparison(info, budget, results, context))
                points[-1].notes.extend(n for n in (budget.note, merged.get(value)) if n)
                streamed = columns_note(results, settings.max_memory_bytes)
                if streamed is not None:
                    points[-1].notes.append(streamed)
                if any(r.status == "interrupted" for r in results):
                    break
        first = points[0] if points else build_comparison(info, next(iter(resolved.values())), [], context)
        return Sweep(info, names, points, settings=first.settings, versions=first.versions,
                     skipped=_unreached(resolved, points))


def _over_the_limit(source: MatrixSource, names: list[str], budget, settings: FitSettings, count_indices: bool,
                    protocol: str, matrix_info, note: str) -> Comparison:
    """A sweep point where no method fits the memory limit from the source's columns: each row "not
    applicable" at its budget, ``note`` (:func:`_refused_note`) as the point's note."""
    info = {**matrix_record(source.summary(), columns=True), **(matrix_info or {})}
    # the budget named: grouped under the table as "rsvd at budgets 20, 30: ..." (it said "at this budget")
    rows = [MethodResult(name, "not applicable", reason=f"over the memory limit from columns at budget {budget.value:,}")
            for name in names]
    point = build_comparison(info, budget, rows, RunContext(settings, count_indices, protocol, None, {}))
    point.notes.append(note)
    return point


def _refused_note(refused: dict[int, ResourceError], every: list[int]) -> str:
    """The one note of the budgets ``refused`` (of the sweep's budgets ``every``) at which no method fits the
    memory limit from columns: the refusal at the smallest of them, which names the least limit that
    runs a method there.  Each of their points carries it, so the table says it once: each point's own
    refusal, near-identical and a long line, was said once per budget."""
    first = min(refused)
    if len(refused) == 1:
        return f"budget {first:,}: {refused[first]}"
    return f"{budgets_text(sorted(refused), every)}: {refused[first]} (at the smallest of them; the others need more)"


#: A point's note about its own budget (:func:`_sweep_columns`): "budget 9,000: ..." and its seconds, if any.
_BUDGET_NOTE = re.compile(r"budget (?P<budget>[0-9][0-9,]*): (?P<text>.*?)(?: in (?P<seconds>[0-9.]+) s)?", re.S)


def grouped_notes(points: Sequence[Comparison]) -> list[str]:
    """The points' notes, each once: a note about its own budget ("budget 9,000: X: not formed ...; every
    row was scored exactly ... in 0.4 s") that says the same at several budgets, but for its seconds, is
    said once with them ("the 10 budgets 9,000 to 90,000: ... in 0.3-0.6 s each"): a sweep of ten
    budgets from columns ended in ten near-identical lines.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> grouped_notes([NS(budget=10, notes=["budget 10: scored in 0.5 s", "a"]),
    ...                NS(budget=20, notes=["budget 20: scored in 0.7 s", "a"])])
    ['budgets 10, 20: scored in 0.5-0.7 s each', 'a']
    """
    # (in the order met) (budget-named, text) -> its budgets and seconds; a note of no budget is its own key
    groups: dict[tuple[bool, str], tuple[list[int], list[float]]] = {}
    for point in points:
        for text in point.notes:
            found = _BUDGET_NOTE.fullmatch(text)
            if found is None or found["budget"] != f"{point.budget:,}":
                groups.setdefault((False, text), ([], []))
                continue
            budgets, seconds = groups.setdefault((True, found["text"]), ([], []))
            budgets.append(point.budget)
            if found["seconds"] is not None:
                seconds.append(float(found["seconds"]))
    every = [p.budget for p in points]
    notes = []
    for (named, text), (budgets, seconds) in groups.items():
        if not named:
            notes.append(text)
            continue
        took = ("" if not seconds else f" in {seconds[0]:g} s" if len(budgets) == 1 else
                f" in {min(seconds):g} s each" if min(seconds) == max(seconds) else
                f" in {min(seconds):g}-{max(seconds):g} s each")
        where = f"budget {budgets[0]:,}" if len(budgets) == 1 else budgets_text(budgets, every)
        notes.append(f"{where}: {text}{took}")
    return notes


def _distinct_budgets(specs: list[str], n: int) -> tuple[dict, dict]:
    """The budgets of ``specs`` for an ``n x n`` matrix by value, each value once (its first spec), and
    for each value that several specs came to, a note saying which (200000 and 5000 both clamped to N^2:
    the note named the first alone)."""
    resolved: dict = {}
    came: dict = {}
    for spec in specs:
        budget = resolve_budget(spec, n)
        resolved.setdefault(budget.value, budget)
        came.setdefault(budget.value, []).append(str(spec))
    merged = {value: _merged_note(given, value, n) for value, given in came.items() if len(given) > 1}
    return resolved, merged


def _merged_note(given: list[str], value: int, n: int) -> str:
    """The note of a point that several of the budgets ``given`` came to: a budget given again is said as
    such ("budgets 0.1, 0.1 all come to 900,000" read as two budgets), each other one named once.

    Examples
    --------
    >>> _merged_note(["0.1", "0.1"], 90_000, 300)
    'budget 0.1 is given 2 times: one point'
    >>> _merged_note(["9000", "0.1", "9000"], 9_000, 300)
    'budgets 9000 (given 2 times), 0.1 all come to 9,000 stored numbers at N = 300: one point'
    """
    counts = {spec: given.count(spec) for spec in given}
    if len(counts) == 1:
        return f"budget {given[0]} is given {len(given)} times: one point"
    named = ", ".join(spec if k == 1 else f"{spec} (given {k} times)" for spec, k in counts.items())
    return f"budgets {named} all come to {value:,} stored numbers at N = {n:,}: one point"


def _sweep_columns(source: MatrixSource, names: list[str], specs: list[str], *, settings: FitSettings,
                   count_indices: bool, protocol: str, callback, on_result, matrix_info) -> Sweep:
    """:func:`sweep` of a source too big to form: one comparison from its columns per budget
    (:func:`~sfapprox.comparison.compare_columns`: the column methods fit, every row scored from the
    same columns, exactly or with a 95 % interval)."""
    resolved, merged = _distinct_budgets(specs, source.n)
    # Every budget before the first fit (a later one's refusal lost them all); one where no method fits
    # the limit is a point of "not applicable" rows, as a budget below a method's least is in memory
    # (it ended the whole sweep, the budgets that fit included). Only when none fits is it refused.
    refused: dict[int, ResourceError] = {}
    for value in sorted(resolved):
        try:
            check_methods_memory_from_columns(names, source, value, settings.max_memory_bytes)
        except ResourceError as exc:
            refused[value] = exc
    if len(refused) == len(resolved):
        raise refused[min(refused)]
    over = _refused_note(refused, sorted(resolved)) if refused else ""
    points: list[Comparison] = []
    for index, value in enumerate(sorted(resolved), 1):
        _budget_starts(on_result, value, index, len(resolved))
        report = _per_budget(on_result, value)
        if value in refused:
            points.append(_over_the_limit(source, names, resolved[value], settings, count_indices, protocol,
                                          matrix_info, over))
            continue
        budget = resolved[value]
        clamped = budget.requested is not None
        # a clamped budget's spec ("30000 (clamped to N^2 = 22500)") does not parse again: its value does
        point = compare_columns(source, names, budget=str(value) if clamped else budget.spec, settings=settings,
                                count_indices=count_indices, protocol=protocol, callback=callback, on_result=report,
                                matrix_info=matrix_info)
        if clamped:
            point.budget_spec = budget.spec
        # Each budget's scoring note says its own columns and seconds: say which budget it is.
        point.notes = [f"budget {value:,}: {n}" if n.startswith(f"{source.name}: not formed") else n
                       for n in point.notes] + [n for n in (budget.note if clamped else None, merged.get(value)) if n]
        points.append(point)
        if any(r.status == "interrupted" for r in point.results):
            break
    return Sweep(points[0].matrix, names, points, settings=points[0].settings, versions=points[0].versions,
                 skipped=_unreached(resolved, points))


def _unreached(resolved: dict, points: list[Comparison]) -> list[int]:
    """The budgets after the last point a stop ended the sweep at (none when every budget ran)."""
    reached = {p.budget for p in points}
    last = max(reached, default=0)
    return sorted(value for value in resolved if value not in reached and value > last)


def _budget_starts(on_result: Callable[..., Any] | None, value: int, index: int, count: int) -> None:
    """Call ``on_result``'s ``budget_starting`` hook (a display's, :func:`~sfapprox._display.method_announcer`'s),
    where it has one, as the ``index``-th of ``count`` budgets starts: the bar names the budget beside the
    method (it named the method alone, the same at every budget)."""
    hook = getattr(on_result, "budget_starting", None)
    if callable(hook):
        hook(value, index, count)


def _per_budget(on_result: Callable[..., Any] | None, budget: int) -> Callable[[Any], Any] | None:
    """The comparison's ``on_result`` of one budget: ``on_result(budget, row)``, and its ``starting`` hook
    (a display's: the method that starts now, see :func:`~sfapprox.comparison.run_all`) where it has one."""
    if on_result is None:
        return None

    def report(row: Any) -> Any:
        return on_result(budget, row)

    starting = getattr(on_result, "starting", None)
    if callable(starting):
        report.starting = starting  # type: ignore[attr-defined]
    return report
