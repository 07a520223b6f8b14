"""Reports of batch results: per-category tables with wins per method.

:func:`build_report` groups the records of a ``results.jsonl`` by category
and matrix; :meth:`Report.tables` gives one :class:`~sfapprox.formats.Table`
per category, which every output format renders (rich, JSON, CSV, Markdown,
LaTeX; :mod:`sfapprox.formats`).  The tables show what ran: a matrix none of
whose methods could run (every record ``unavailable``: its file is missing)
is no row but one of :attr:`Report.unavailable`, which
:func:`unavailable_line` sums up in one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import InputError, ParameterError
from .._settings import TEXT_MARKS
from ..formats import (ESTIMATED_NOTE, Column, ShownAsTables, Table, and_listed, counted, fmt_with_interval,
                       interval_columns, printable, shell_command)
from .manifest import CATEGORIES
from .results_file import FILE_MISSING, MEASURES, RESULTS_FILE, ResultsFile, read_results, results_file_of
from .results_file import finite_number as _finite  # the lines' own test: an edited 10**400 is not finite

__all__ = ["MatrixRow", "CategoryTable", "Report", "Unavailable", "build_report", "table_cells", "wins_line",
           "total_wins_line", "unavailable_line"]

#: Matrix facts shown as extra columns when present (key -> column title).
INFO_COLUMNS = {"mean_row_entropy": "entropy", "beta": "β"}


def fmt(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits; "–" for missing values.

    Parameters
    ----------
    value : object
        A number; anything else (None, a string, NaN, an infinity) gives "–".
    digits : int, default=4
        Significant digits.
    """
    return f"{value:.{digits}g}" if _finite(value) else "–"


@dataclass
class MatrixRow:
    """One matrix: its results by method, reference figures and the winner.

    Attributes
    ----------
    name : str
        The matrix.
    n : int or None
        Its order (from the first record that has it).
    results : dict of str to dict
        The record of each method.
    reference : dict of str to float
        Published figures comparable to these records (:func:`comparable`).
    info : dict
        Matrix facts from the records' ``matrix_info`` (entropy, ...).
    winner : str or None
        The ``ok`` method with the smallest Frobenius error, when two or more
        were scored under one measure (:data:`~.results_file.MEASURES`).
    mixed : str or None
        How its scored lines' measures differ (``budget 'sf', '0.3'``), when
        they do: they are not ranked against each other (no winner).
    source : str or None
        The parameters of a matrix made from what defines it (:func:`source_text`: a kernel and its
        bandwidth, an attention map's arrays, a covariance, a tensor read), None for a file read as it is.
    withheld : list of str
        Methods whose published figure the manifest gives but these records were not made under its
        settings (not :func:`comparable`): left out of ``reference``, and said in a note.
    """

    name: str
    n: int | None
    results: dict[str, dict[str, Any]]
    reference: dict[str, float]
    info: dict[str, Any]
    winner: str | None
    mixed: str | None = None
    source: str | None = None
    withheld: list[str] = field(default_factory=list)


@dataclass
class CategoryTable:
    """All matrices of one category, with wins per method.

    Attributes
    ----------
    category : str
        The category.
    methods : list of str
        Methods with a record in this category.
    reference_keys : list of str
        Methods with a published figure in some row.
    info_keys : list of str
        Matrix facts shown as columns (keys of ``INFO_COLUMNS``).
    rows : list of MatrixRow
        One per matrix.
    wins : dict of str to int
        Rows won, by method, of the methods that ran on some row that was a contest (failed there
        counts: it lost); empty where none
        was (``contests`` is 0: one method, or none of two or more scored on one matrix), as a
        comparison of one scored row has no winner.
    sourced : bool, default=False
        Whether some row has a ``source`` (the table then shows it in a column).
    contests : int, default=0
        Rows that ranked two or more scored methods (a tie or overlapping intervals among them
        leaves a contest without a winner, so the wins may sum to less).
    """

    category: str
    methods: list[str]
    reference_keys: list[str]
    info_keys: list[str]
    rows: list[MatrixRow]
    wins: dict[str, int]
    sourced: bool = False
    contests: int = 0


@dataclass
class Unavailable:
    """A matrix that no method could run on (every record ``unavailable``), with why.

    Attributes
    ----------
    name : str
        The matrix (entry) name.
    category : str
        Its category.
    error : str
        The first record's error, on one line.
    missing : bool
        True when its file was neither present nor downloadable (rather than
        present but wrong or unreadable: ``error`` says what).
    manifest, data_dir : str or None, default=None
        Where the batch looked (None when the records do not say).
    """

    name: str
    category: str
    error: str
    missing: bool
    manifest: str | None = None
    data_dir: str | None = None


@dataclass(repr=False)  # its own __repr__: every record's every field, thousands of characters
class Report(ShownAsTables):
    """Tables by category (in :data:`~sfapprox.datasets.manifest.CATEGORIES` order) and the records.

    In a notebook it shows as ``sfapprox report``'s tables (``_repr_html_``: those of its files, the
    matrices no method could run on included); its ``repr`` sums it up in a few lines (the wins by
    category); :meth:`to_frame` gives the rows as a pandas DataFrame, the values of ``sfapprox report
    --csv``: a row per matrix: its name, ``N``, each method's ‖X − X̂‖_F (NaN where it has none), the
    paper's figures and the deviation from them, the winner, ``category``, each method's status and,
    where estimated, the 95 % intervals' ends; a leading ``table`` column (the table's title) where
    there are several (categories, or the matrices no method could run on).

    Attributes
    ----------
    records : list of dict
        The last record of each (matrix, method).
    methods : list of str
        Every method in the records, in first-seen order.
    tables_by_category : list of CategoryTable
        One per category with at least one row.
    unavailable : list of Unavailable
        The matrices left out of the tables because no method could run on
        them (their records stay in ``records``).
    skipped_lines : dict of int to str
        Lines of the results file that could not be read (damaged, edited),
        by number, with why: said in the tables' notes and the JSON, as a
        row may lack the line of a method, and its winner be another.
    """

    records: list[dict[str, Any]]
    methods: list[str]
    tables_by_category: list[CategoryTable] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)
    skipped_lines: dict[int, str] = field(default_factory=dict)

    def total_wins(self) -> dict[str, int]:
        """Rows won by each method over every category, of the methods in some category's wins (a method
        that never met another on a matrix is not counted as losing: ``{}`` for a batch of one method)."""
        won: dict[str, int] = {}
        for table in self.tables_by_category:
            for method, n in table.wins.items():
                won[method] = won.get(method, 0) + n
        return {m: won[m] for m in self.methods if m in won}

    def statuses(self) -> dict[str, int]:
        """Number of records by status."""
        out: dict[str, int] = {}
        for r in self.records:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    def tables(self) -> list[Table]:
        """One table per category: Frobenius errors by method, the winner of each row marked,
        the paper's figures and the deviation from them where the manifest has them."""
        out = []
        for cat in self.tables_by_category:
            header, rows = table_cells(cat)
            table = Table(f"{cat.category}: ‖X − X̂‖_F by method ({wins_line(cat)})",
                          [Column(f"c{i}", h, "left" if i == 0 or h in ("winner", "source") else "right")
                           for i, h in enumerate(header)])
            # every row names its category (a CSV-only column): the CSV's "table" column, holding the title,
            # is there only beside other categories, so one category's CSV said it nowhere
            table.data_titles = {"category": "category"}
            # an estimated error's 95 % interval, CSV-only columns beside the value (empty where exact)
            estimated = [m for m in cat.methods if any(
                r.get("status") == "ok" and error_interval(r) is not None
                for row in cat.rows for r in [row.results.get(m) or {}])]
            for m in estimated:
                table.data_titles.update({title: title for title in interval_columns(m)})
            # each method's status, CSV-only columns as a sweep's CSV has them: its column of errors is left
            # empty where there is none ("n/a", "failed" were text in a column of numbers)
            table.data_titles.update({f"{m} status": f"{m} status" for m in cat.methods})
            for row, cells in zip(cat.rows, rows):
                best = {f"c{i}" for i, h in enumerate(header) if h == row.winner}
                intervals = {}
                for m in estimated:
                    r = row.results.get(m) or {}
                    intervals.update(interval_columns(m, error_interval(r) if r.get("status") == "ok" else None))
                statuses = {f"{m} status": _status(row.results.get(m)) for m in cat.methods}
                table.add({f"c{i}": c for i, c in enumerate(cells)}, best=best,
                          data={**_row_data(header, cat, row), "category": cat.category, **intervals, **statuses})
            if estimated:
                table.notes.append(f"{ESTIMATED_NOTE}; no winner where the intervals overlap")
            out.append(table)
        if out and self.methods:
            out[-1].notes.append(total_wins_line(self))
        mixed = [f"{row.name} ({row.mixed})" for cat in self.tables_by_category for row in cat.rows if row.mixed]
        if out and mixed:
            out[-1].notes.append(f"not ranked, their lines measured different things: {', '.join(mixed)}; "
                                 f"'{shell_command('batch', '--redo')}' with one budget and the manifest as it is now redoes them")
        if out and self.skipped_lines:  # a damaged line's method is unknown: any row may lack it
            lines = sorted(self.skipped_lines)
            shown = ", ".join(f"{k} ({self.skipped_lines[k]})" for k in lines[:3]) + (" …" if len(lines) > 3 else "")
            out[-1].notes.append(f"{len(lines)} line(s) of the results file could not be read and are left out "
                                 f"(line {shown}): a row may lack a method's line, and its winner be another")
        withheld = list(dict.fromkeys(m for cat in self.tables_by_category for row in cat.rows for m in row.withheld))
        if out and withheld:
            out[-1].notes.append(withheld_note(withheld))
        differ = self.mixed_settings()
        if out and differ:
            said = "; ".join(f"{key} {and_listed(values)}" for key, values in differ.items())
            out[-1].notes.append(f"ranked together, made with different settings: {said} "
                                 f"('{shell_command('batch', '--redo')}' with one setting makes them alike)")
        return out

    def __repr__(self) -> str:
        """A few lines: the records, matrices and methods, the wins of each category and in total, and
        what was left out (matrices no method could run on, lines that could not be read).

        Examples
        --------
        >>> recs = [{"matrix": "a", "category": "network", "method": m, "status": "ok", "fro_error": e, "n": 4}
        ...         for m, e in (("sf", 1.0), ("tsvd", 2.0))]
        >>> build_report(recs)
        Report: 2 records of 1 matrix, methods sf, tsvd
          network (1 matrix): wins: sf 1, tsvd 0
          total wins: sf 1, tsvd 0
        """
        rows = sum(len(c.rows) for c in self.tables_by_category)
        lines = [f"Report: {counted(len(self.records), 'record')} of {counted(rows, 'matrix', 'matrices')}, "
                 f"methods {', '.join(self.methods) or 'none'}"]
        lines += [f"  {c.category} ({counted(len(c.rows), 'matrix', 'matrices')}): {wins_line(c)}"
                  for c in self.tables_by_category]
        if self.tables_by_category:
            lines.append(f"  {total_wins_line(self)}")
        if self.unavailable:
            names = ", ".join(u.name for u in self.unavailable[:3]) + (" ..." if len(self.unavailable) > 3 else "")
            count = counted(len(self.unavailable), "matrix", "matrices")
            lines.append(f"  unavailable (no method could run): {count} ({names})")
        if self.skipped_lines:
            lines.append(f"  {counted(len(self.skipped_lines), 'line')} of the results file could not be read")
        return printable("\n".join(lines))

    def _shown_tables(self) -> list[Table]:
        """The tables a notebook shows and :meth:`to_frame` flattens: those of the report's files
        (:meth:`file_tables`), the matrices no method could run on included."""
        return self.file_tables()

    def file_tables(self, tables: list[Table] | None = None) -> list[Table]:
        """The tables of the report's files (``--csv``, ``--markdown``, ...): those on screen (``tables``,
        None: :meth:`tables`), then the matrices no method could run on, each with why, and under them
        the command that says where to get the missing files."""
        tables = self.tables() if tables is None else tables
        table = self.unavailable_table()
        if table is None:
            return tables
        line = unavailable_line(self.unavailable)
        return [*tables, dataclasses.replace(table, notes=[*table.notes, line] if line else table.notes)]

    def unavailable_table(self) -> Table | None:
        """The matrices no method could run on, with why (for the report files); None when there are none.

        The files named only those whose file was missing, under the last category's table, and a
        batch where nothing ran wrote empty files.
        """
        if not self.unavailable:
            return None
        table = Table("unavailable: no method could run on these", [Column("matrix", "matrix", "left"),
                      Column("category", "category", "left"), Column("why", "why", "left")])
        for u in self.unavailable:
            table.add({"matrix": u.name, "category": u.category, "why": u.error})
        return table

    def mixed_settings(self) -> dict[str, list[str]]:
        """The settings that change what a fit reaches (:data:`RESULT_SETTINGS`) whose values differ
        between the ranked records, each with its values (as JSON); empty when they agree.  A batch
        resumed with another ``--time-limit`` or ``--seed`` said so on stderr only: its report files and
        ``sfapprox report`` ranked the lines together without a word."""
        seen: dict[str, set[str]] = {}
        for r in self.records:
            if r.get("status") in ("ok", "interrupted"):
                for key in RESULT_SETTINGS:
                    seen.setdefault(key, set()).add(json.dumps((r.get("settings") or {}).get(key)))
        return {key: sorted(values) for key, values in seen.items() if len(values) > 1}

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON: wins per category and in total, statuses, every record (each with its
        settings), and the versions of the libraries that made the report
        (:func:`~sfapprox.results.library_versions`), as every result file records them."""
        from ..results import library_versions  # here: it imports torch, which the tables do not need

        return {
            "categories": [{"category": c.category, "methods": c.methods, "wins": c.wins, "contests": c.contests,
                            "matrices": [r.name for r in c.rows]} for c in self.tables_by_category],
            "total_wins": self.total_wins(),
            "statuses": self.statuses(),
            "unavailable": [u.name for u in self.unavailable],
            "mixed_settings": self.mixed_settings(),
            "skipped_lines": {str(k): v for k, v in sorted(self.skipped_lines.items())},
            "records": self.records,
            "versions": library_versions(),
        }


#: The settings that change what a fit reaches without changing what it measures (the budget, the
#: protocol and the index counting do: lines that differ in them are not ranked; see MEASURES).
RESULT_SETTINGS = ("time_limit", "max_iter", "seed", "device", "dtype", "max_memory")


def _winner(results: dict[str, dict[str, Any]]) -> str | None:
    """A row's winner by a comparison's rule (:func:`~sfapprox.results.rank_key`): the smallest error; of rows
    that reproduce X, the fewest stored numbers; none between rows of the same error and stored numbers (the
    method's name decided: nmf "won" an all-zero matrix every method reproduced in 0 numbers)."""
    scored = sorted((_rank_key(r), m) for m, r in results.items() if _scored(r))
    if len(scored) < 2:
        return None
    best = scored[0][1]
    if scored[1][0] == scored[0][0]:
        return None
    if any(error_interval(results[m]) is not None for _, m in scored):
        # errors estimated from random columns (a matrix never formed): as a comparison, no winner is
        # declared where another row's 95 % interval reaches the best row's
        low, high = _span(results[best])
        if any(_span(results[m])[0] <= high for _, m in scored if m != best):
            return None
    return best


def _scored(record: dict[str, Any]) -> bool:
    """Whether a record takes part in its row's ranking: a fit that ran and has an error."""
    return record.get("status") == "ok" and _finite(record.get("fro_error"))


def _entered(record: dict[str, Any] | None) -> bool:
    """Whether a method took part in its row (it ran: scored, or failed, timed out, was stopped); not one
    that did not apply to the matrix or whose matrix was unavailable."""
    return record is not None and record.get("status") not in ("not applicable", "unavailable")


def _contested(row: MatrixRow) -> bool:
    """Whether a row ranked two or more methods: one scored method wins no contest (a comparison's
    rule), and a row whose lines measured different things is not ranked."""
    return row.mixed is None and sum(_scored(r) for r in row.results.values()) >= 2


def _rank_key(record: dict[str, Any]) -> tuple[float, int]:
    nnz = record.get("nnz")
    rel = record.get("rel_error")
    estimate = record.get("error_estimate")
    from ..results import rank_key  # here, as results is everywhere in this module: it loads the methods

    return rank_key(float(record["fro_error"]), float(rel) if _finite(rel) else None,
                    int(nnz) if _finite(nnz) else None, estimate if isinstance(estimate, dict) else None)


def error_interval(record: dict[str, Any]) -> tuple[float, float] | None:
    """The 95 % interval of a record's ``fro_error`` where it was estimated from random columns (the
    record's ``error_estimate``; an unbounded upper end is infinite), else None (an exact error)."""
    estimate = record.get("error_estimate")
    interval = estimate.get("fro_interval") if isinstance(estimate, dict) else None
    if not isinstance(interval, (list, tuple)) or len(interval) != 2:
        return None
    low, high = interval
    low = float(low) if _finite(low) else 0.0
    return low, float(high) if _finite(high) else math.inf


def _span(record: dict[str, Any]) -> tuple[float, float]:
    """A scored record's error interval: its 95 % interval when estimated, else its error twice."""
    return error_interval(record) or (record["fro_error"], record["fro_error"])


def withheld_note(methods: list[str]) -> str:
    """The note under a report whose manifest gives published figures that its lines were not made to
    compare with: the figures were left out without a word, and a user who had put ``tsvd = 2.73`` in the
    manifest saw no "paper tsvd" column and no reason.

    Examples
    --------
    >>> withheld_note(["tsvd"])
    "the paper's tsvd figures are not shown: they were made under the paper's protocol (SF's reference structure, TSVD at rank ceil(M²/2)), not these lines' settings; 'sfapprox batch --protocol paper' compares with them"
    """
    return (f"the paper's {and_listed(methods)} figures are not shown: they were made under the paper's protocol "
            "(SF's reference structure, TSVD at rank ceil(M²/2)), not these lines' settings; "
            "'sfapprox batch --protocol paper' compares with them")


def comparable(record: dict[str, Any], method: str) -> bool:
    """Whether a published figure for ``method`` was made under the settings of ``record``.

    The paper protocol reproduces Table 1's settings for every method; under the
    default protocol only SF at budget "sf" fits the paper's structure (TSVD
    then takes the largest rank that fits, not the paper's rank ceil(M²/2)).

    Parameters
    ----------
    record : dict
        A batch record (its ``settings`` and budget are looked at).
    method : str
        The method the figure is for.
    """
    settings = record.get("settings") or {}
    if settings.get("protocol") == "paper":
        return True
    return method == "sf" and record.get("budget_spec", settings.get("budget")) == "sf"


def _row(name: str, records: list[dict[str, Any]]) -> MatrixRow:
    results = {r["method"]: r for r in records}
    first = records[0]
    reference: dict[str, float] = {}
    withheld: list[str] = []
    info: dict[str, Any] = {}
    n = None
    for r in records:
        # A figure published for another setting would be a false yardstick: only comparable ones.
        for k, v in (r.get("reference") or {}).items():
            if k not in results or comparable(results[k], k):
                reference[k] = v
            elif k not in withheld:
                withheld.append(k)
        info.update(r.get("matrix_info") or {})
        n = n if n is not None else r.get("n")
    mixed = _mixed_measures(results)
    return MatrixRow(first["matrix"], n, results, reference, info, None if mixed else _winner(results), mixed,
                     source_text(info), [k for k in withheld if k not in reference])


def source_text(info: dict[str, Any]) -> str | None:
    """The parameters a matrix was made with, from its ``matrix_info``: two kernel entries over one points
    file differ by them alone (their rows showed their names and errors only), as do two attention maps of
    one ``.npz``.

    Parameters
    ----------
    info : dict
        A record's ``matrix_info`` (its ``recipe``).

    Returns
    -------
    str or None
        None for a matrix read as it is.

    Examples
    --------
    >>> source_text({"recipe": {"kind": "kernel", "kernel": "rbf", "bandwidth": 1.5, "bandwidth_rule": "given"}})
    'rbf, bandwidth 1.5'
    >>> source_text({"recipe": {"kind": "attention", "var": "q,k", "scale": 0.125}}), source_text({})
    ('attention q,k, scale 0.125', None)
    >>> source_text({"path": "columns", "source": {"kind": "kernel", "kernel": "laplacian", "bandwidth": 2.0}})
    'laplacian, bandwidth 2'
    >>> source_text({"recipe": {"covariance": False, "delimiter": ";", "decimal": ","}})
    "delimiter ';', decimal ','"
    """
    # a matrix compared from its columns recorded its recipe as "source" alone before it had "recipe" too
    given = info.get("recipe") or info.get("source")
    recipe = given if isinstance(given, dict) else {}
    # the marks its text was read with (two readings of one file are two matrices), quoted: a bare ',' would
    # read as the list's own
    marks = [f"{k} {recipe[k]!r}" for k in TEXT_MARKS if isinstance(recipe.get(k), str)]
    if recipe.get("kind") == "kernel":
        bandwidth, rule = recipe.get("bandwidth"), recipe.get("bandwidth_rule")
        how = "" if not _finite(bandwidth) else f", bandwidth {fmt(bandwidth)}" + (f" ({rule})" if rule not in
                                                                                     (None, "given") else "")
        return ", ".join([f"{recipe.get('kernel')}{how}", *marks])
    if recipe.get("kind") == "attention":
        return f"attention {recipe.get('var')}" + (f", scale {fmt(recipe['scale'])}" if _finite(recipe.get("scale")) else "")
    parts = ["covariance"] if recipe.get("covariance") else []
    if isinstance(recipe.get("var"), str):
        parts.append(f"var {recipe['var']}")
    return ", ".join(parts + marks) or None


def _mixed_measures(results: dict[str, dict[str, Any]]) -> str | None:
    """How the scored lines' measures differ (a budget of 0.3 beside SF's), or None where they agree: a
    smaller error at a larger budget is no win."""
    scored = [r for r in results.values() if r.get("status") == "ok"]
    differ = []
    for key in MEASURES:
        values = {repr((r.get("settings") or {}).get(key)) for r in scored}
        if len(values) > 1:
            differ.append(f"{key} {', '.join(sorted(values))}")
    # Lines of one name made from different matrices (an entry whose parameters or file changed, and a
    # batch that redid only some methods): an N = 64 matrix's error ranked beside an N = 32 one's.
    sizes = {r.get("n") for r in scored}
    if len(sizes) > 1:
        differ.append(f"N {', '.join(str(n) for n in sorted(sizes, key=lambda n: natural_key(str(n))))}")
    elif _different_inputs(scored):
        differ.append("made from different inputs (the entry's file or parameters changed)")
    # a batch never writes one (a method over its budget is a bug): an edited line, not a result
    differ.extend(f"{r['method']} stores {r['nnz']:,} numbers, over its budget {r['budget']:,}" for r in scored
                  if _finite(r.get("nnz")) and _finite(r.get("budget")) and r["nnz"] > r["budget"])
    return "; ".join(differ) or None


def _different_inputs(records: list[dict[str, Any]]) -> bool:
    """Whether ``records`` were made from different matrices: their files' digests differ, or the manifest
    entries they were made from (``source``: file, generator and parameters, reading options; what a batch
    redoes a line for).  A line without one (an older version's) is not taken as different."""
    digests, sources = set(), set()
    for r in records:
        info = r.get("matrix_info") if isinstance(r.get("matrix_info"), dict) else {}
        if info.get("sha256"):
            digests.add(info["sha256"])
        if r.get("source") is not None:
            sources.add(json.dumps(r["source"], sort_keys=True, default=str))
    return len(digests) > 1 or len(sources) > 1


def _unavailable(name: str, category: str, records: list[dict[str, Any]]) -> Unavailable:
    first = records[0]
    error = " ".join(str(first.get("error") or "unavailable").split())
    reason = first.get("reason")
    # Lines written before "reason" was recorded: the missing-file message is all there is.
    missing = reason == FILE_MISSING or (reason is None and " not found" in error)
    info = first.get("matrix_info") if isinstance(first.get("matrix_info"), dict) else {}
    text = {k: v if isinstance(v, str) and v else None for k, v in info.items() if k in ("manifest", "data_dir")}
    return Unavailable(name, category, error, missing, **text)


def _results_path(path: str | os.PathLike) -> str | os.PathLike:
    """``path`` where it holds a batch's results (a file, or a folder with its results file), else an
    :class:`~sfapprox.InputError` saying what is there instead (the CLI's ``report`` says the same)."""
    where = Path(path)
    if not where.exists():
        raise InputError(f"{where}: no such file or folder; give a batch's results file or its output folder")
    results = results_file_of(where)
    if results != where and not results.exists():
        from .folder_lock import running_holder

        if running_holder(where):  # a batch planning there writes its file soon: a report of nothing so far
            return path
        raise InputError(f"{where}: no {RESULTS_FILE}; run_batch (or sfapprox batch --out-dir) writes it there")
    return path


def build_report(records: list[dict[str, Any]] | ResultsFile | str | os.PathLike,
                 skipped_lines: dict[int, str] | None = None) -> Report:
    """Group records (the last one per (matrix, method) wins) into category tables.

    Parameters
    ----------
    records : list of dict, ResultsFile, str or os.PathLike
        Batch records, in file order (:func:`~sfapprox.datasets.read_results`'s ``records``); or what
        ``read_results`` returns, or the results file or batch output folder it reads, whose left-out
        lines (:meth:`~sfapprox.datasets.results_file.ResultsFile.left_out`) the report then says.
    skipped_lines : dict of int to str, optional
        The results file's lines that could not be read, with why
        (:meth:`~sfapprox.datasets.results_file.ResultsFile.skipped`): the report says so.

    Returns
    -------
    Report

    Raises
    ------
    ParameterError
        If ``records`` is none of these (None, a dict, a list holding something other than records).
    InputError
        If ``records`` is a path to nothing, or to a folder without a results file that no batch is
        using now: a typo would otherwise be a report of nothing (:func:`read_results` reads a missing
        file as empty, as a batch resuming there needs).  A folder a batch is planning in (its file
        not written yet) gives a report of nothing so far, as before.

    Examples
    --------
    >>> recs = [{"matrix": "a", "category": "network", "method": m, "status": "ok", "fro_error": e, "n": 4}
    ...         for m, e in (("sf", 1.0), ("tsvd", 2.0))]
    >>> build_report(recs).tables_by_category[0].wins
    {'sf': 1, 'tsvd': 0}
    """
    if isinstance(records, (str, os.PathLike)):  # run_batch's out_dir: "string indices must be integers" before
        records = read_results(_results_path(records))
    if isinstance(records, ResultsFile):
        records, skipped_lines = records.records, records.left_out() if skipped_lines is None else skipped_lines
    if isinstance(records, (Mapping, str, bytes)) or not isinstance(records, Iterable):
        raise ParameterError(f"records must be a batch's records (read_results(path).records), what read_results "
                             f"returns, or a results file or batch output folder, got {type(records).__name__}")
    records = list(records)
    if not all(isinstance(r, Mapping) and "matrix" in r and "method" in r for r in records):
        raise ParameterError("records must be a batch's records, each a dict with 'matrix' and 'method' "
                             "(read_results(path).records)")
    latest = {(r["matrix"], r["method"]): r for r in records}
    ordered = _in_entry_order(list(latest.values()))
    methods = list(dict.fromkeys(r["method"] for r in ordered))
    by_category: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in ordered:
        by_category.setdefault(r.get("category") or "other", {}).setdefault(r["matrix"], []).append(r)
    order = [c for c in CATEGORIES if c in by_category] + sorted((c for c in by_category if c not in CATEGORIES), key=natural_key)
    report = Report(ordered, methods, skipped_lines=dict(skipped_lines or {}))
    for category in order:
        rows = []
        for name, recs in by_category[category].items():
            if all(r.get("status") == "unavailable" for r in recs):
                report.unavailable.append(_unavailable(name, category, recs))
            else:
                rows.append(_row(name, recs))
        if not rows:
            continue
        present = [m for m in methods if any(m in row.results for row in rows)]
        ref_keys = list(dict.fromkeys(k for row in rows for k in row.reference))
        info_keys = [k for k in INFO_COLUMNS if any(k in row.info for row in rows)]
        contests = sum(_contested(row) for row in rows)
        # no contest, no count: {"tsvd": 0} in report.json said tsvd lost where it ran alone; nor does a
        # method that entered no contest (scored alone, not applicable or unavailable wherever asked); one that
        # entered and failed there lost it ("sf 0": a systematic failure is not hidden)
        met = [m for m in present if any(_contested(row) and _entered(row.results.get(m)) for row in rows)]
        wins = {m: sum(row.winner == m for row in rows) for m in met}
        sourced = any(row.source for row in rows)
        report.tables_by_category.append(CategoryTable(category, present, ref_keys, info_keys, rows, wins, sourced,
                                                       contests))
    return report


def _in_entry_order(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with their matrices in their entries' order (each line's ``position``), each matrix's
    lines in file order.

    A results file holds lines in the order they finished: with ``--jobs 2`` or on a cluster a small
    matrix's lines came before a large one's, and the report's rows, its CSV and its JSON followed,
    so the same batch gave other files from one run to the next.  Matrices whose lines have no
    position (made before it was recorded, or edited) follow, in the order first seen.
    """
    place: dict[str, int] = {}
    for r in records:
        position = r.get("position")
        if isinstance(position, int) and not isinstance(position, bool):
            place[r["matrix"]] = position  # the latest run's, where runs of other --only differ
    first = {name: i for i, name in reversed(list(enumerate(r["matrix"] for r in records)))}
    unplaced = max(place.values(), default=-1) + 1  # after every placed matrix
    # a model's square weights share their entry's place: among them by name (the order they finished in
    # changed with --jobs), each matrix's lines in file order
    return sorted(records, key=lambda r: (place.get(r["matrix"], unplaced),
                                          natural_key(r["matrix"]) if r["matrix"] in place else (), first[r["matrix"]]))


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """``name`` as it sorts to a reader: its runs of digits as numbers (``layer.2`` before ``layer.10``; as
    text, ``layer.10`` and ``layer.11`` came first), then the name itself, so ``w01`` and ``w1`` keep an order.

    Examples
    --------
    >>> sorted(["layer.10.q", "layer.2.q", "layer.1.q", "layer.2.k"], key=natural_key)
    ['layer.1.q', 'layer.2.k', 'layer.2.q', 'layer.10.q']
    """
    # split keeps the digit runs at the odd places: element by element, text meets text and a number a number
    parts = _DIGITS.split(name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


# ---------------------------------------------------------------------------
# cells shared by every renderer
# ---------------------------------------------------------------------------


_SHORT_STATUS = {"not applicable": "n/a", "unavailable": "unavailable", "failed": "failed", "interrupted": "interrupted"}


def _result_cell(record: dict[str, Any] | None) -> str:
    if record is None:
        return ""
    if record.get("status") == "ok":
        interval = error_interval(record) if _finite(record.get("fro_error")) else None
        if interval is None:
            return fmt(record.get("fro_error"))
        # estimated from random columns: its 95 % interval's half-width, as compare and sweep show it
        return fmt_with_interval(record["fro_error"], interval)
    return _SHORT_STATUS.get(record.get("status"), str(record.get("status")))


def _deviation_percent(record: dict[str, Any] | None, paper: float | None) -> float | None:
    """How far ``record``'s error is from the paper's figure, in percent of it (None where either is missing)."""
    if record is None or record.get("status") != "ok" or not _finite(record.get("fro_error")) or not _finite(paper) or paper == 0:
        return None
    return 100.0 * (record["fro_error"] - paper) / paper


def _deviation(record: dict[str, Any] | None, paper: float | None) -> str:
    percent = _deviation_percent(record, paper)
    return "" if percent is None else f"{percent:+.1f}%"


def table_cells(table: CategoryTable) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a category table as strings.

    Columns: matrix, N, one per method (Frobenius error ‖X − X̂‖_F or the
    status), one per reference figure ("paper tsvd"), the deviation from it
    for methods that have one ("Δ tsvd"), matrix facts (entropy), the parameters of matrices made from
    what defines them ("source": a kernel's bandwidth, :func:`source_text`), winner.

    Parameters
    ----------
    table : CategoryTable
        The category.

    Returns
    -------
    header : list of str
    rows : list of list of str
    """
    compared = [m for m in table.methods if m in table.reference_keys]
    header = ["matrix", "N", *table.methods, *(f"paper {k}" for k in table.reference_keys),
              *(f"Δ {m}" for m in compared), *(INFO_COLUMNS[k] for k in table.info_keys),
              *(["source"] if table.sourced else []), "winner"]
    rows = []
    for row in table.rows:
        cells = [row.name, str(row.n) if row.n is not None else "–"]
        cells += [_result_cell(row.results.get(m)) for m in table.methods]
        cells += [fmt(row.reference.get(k), 3) if k in row.reference else "" for k in table.reference_keys]
        cells += [_deviation(row.results.get(m), row.reference.get(m)) for m in compared]
        cells += [fmt(row.info.get(k), 3) for k in table.info_keys]
        cells += [row.source or ""] if table.sourced else []
        cells.append(row.winner or "")
        rows.append(cells)
    return header, rows


def _row_data(header: list[str], table: CategoryTable, row) -> dict[str, Any]:
    """A category row's values behind its cells, for CSV (:attr:`~sfapprox.formats.Table.data`), by the
    columns of :func:`table_cells`' ``header``: N, each scored method's error (None, an empty cell, for a
    method without one: its status is a column of its own), the paper's figures and the deviation from
    them (in percent) at full precision, and the matrix facts; the other cells keep their text."""
    facts = {title: key for key, title in INFO_COLUMNS.items() if key in table.info_keys}
    compared = {f"Δ {m}": m for m in table.methods if m in table.reference_keys}
    data: dict[str, Any] = {}
    for i, title in enumerate(header):
        if title == "N":
            data[f"c{i}"] = row.n
        elif title in table.methods:
            r = row.results.get(title)
            data[f"c{i}"] = r["fro_error"] if r is not None and r.get("status") == "ok" and _finite(r.get("fro_error")) \
                else None
        elif title.startswith("paper ") and title[6:] in row.reference:
            data[f"c{i}"] = row.reference[title[6:]]
        elif title in compared:
            data[f"c{i}"] = _deviation_percent(row.results.get(compared[title]), row.reference.get(compared[title]))
        elif title in facts:
            data[f"c{i}"] = row.info.get(facts[title])
    return data


def _status(record: dict[str, Any] | None) -> str | None:
    """A method's status in a report's CSV, as a sweep's CSV words it: its record's status, or the limit an
    ``ok`` fit stopped on before converging (``time_limit``, ``max_iter``); None without a record."""
    if record is None:
        return None
    stop = (record.get("params") or {}).get("stop_reason") if record.get("status") == "ok" else None
    return stop if stop in ("time_limit", "max_iter") else record.get("status")


def wins_line(table: CategoryTable) -> str:
    """``"wins: sf 3, tsvd 1"`` (only matrices with two or more scored methods count), or that no winner
    was counted where no matrix was a contest: ``"tsvd alone: no winner counted"`` where the category has
    one method, ``"no matrix ranked two methods: no winner counted"`` where each had one scored.

    Parameters
    ----------
    table : CategoryTable
        The category.
    """
    if not table.wins:  # "wins: tsvd 0" said one method lost where there was no contest
        return f"{_no_contest(table.methods)}: no winner counted"
    return "wins: " + ", ".join(f"{m} {n}" for m, n in table.wins.items())


def total_wins_line(report: Report) -> str:
    """``"total wins: sf 3, tsvd 1"`` over every category (the methods of :meth:`Report.total_wins`),
    or that none was counted where no matrix was a contest.

    Parameters
    ----------
    report : Report
        The report.
    """
    total = report.total_wins()
    if not total:
        return f"total wins: none counted ({_no_contest(report.methods)})"
    return "total wins: " + ", ".join(f"{m} {n}" for m, n in total.items())


def _no_contest(methods: list[str]) -> str:
    """Why a table counts no wins: one method (a contest needs two), or none scored beside another."""
    if len(methods) < 2:
        return f"{methods[0]} alone" if methods else "no method"
    return "no matrix ranked two methods"


def unavailable_line(unavailable: list[Unavailable], shown: int = 8) -> str | None:
    """One line naming the matrices whose files are missing, and the command that says where to get each.

    None when there are none.  Matrices that are unavailable for another
    reason (a wrong hash, an unreadable file) are not in it: each deserves
    its own message (``Unavailable.error``).

    Parameters
    ----------
    unavailable : list of Unavailable
        What :attr:`Report.unavailable` holds.
    shown : int, default=8
        Most names given (then "and k more").

    Examples
    --------
    >>> gone = [Unavailable(n, "network", "...", True, "m.toml", "data") for n in ("a", "b")]
    >>> unavailable_line(gone)
    '2 entries unavailable (files not in data): a, b — `sfapprox datasets list m.toml --data-dir data -v` says where to get each'
    """
    missing = [u for u in unavailable if u.missing]
    if not missing:
        return None
    names = ", ".join(u.name for u in missing[:shown])
    if len(missing) > shown:
        names += f" and {len(missing) - shown} more"
    manifests = {u.manifest for u in missing}
    data_dirs = {u.data_dir for u in missing}
    # a real path quoted for the shell it is pasted into (a data folder "my data" split in two); the
    # placeholders stay as they are
    manifest = str(manifests.pop()) if len(manifests) == 1 and None not in manifests else "MANIFEST"
    data_dir = data_dirs.pop() if len(data_dirs) == 1 else None
    option = ["--data-dir", str(data_dir)] if data_dir else ["--data-dir", "DIR"] if len(data_dirs) > 1 else []
    where = f"files not in {data_dir}" if data_dir else "files not found"
    command = shell_command("datasets", "list", manifest, *option, "-v")
    count = f"{len(missing)} entr{'y' if len(missing) == 1 else 'ies'}"
    return f"{count} unavailable ({where}): {names} — `{command}` says where to get each"
