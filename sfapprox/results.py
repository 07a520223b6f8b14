"""Result records: what ``compare`` and ``sweep`` return, and their tables.

:class:`MethodResult` / :class:`Comparison` carry each method's outcome (and
its fitted operator); ``to_dict()`` gives the documented JSON shape and
``tables()`` the table every output format renders
(:mod:`sfapprox.formats`).  Files are written by :mod:`sfapprox._atomic`
(JSON, text) and :mod:`sfapprox.factors` (fitted surrogates, HDF5).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import scipy

from . import __version__
from ._base import methods
from ._errors import InputError
from ._moved import moved_names
from .baselines.sparse import sparse_count
from .formats import (
    ESTIMATED_NOTE,
    MISSING,
    Column,
    ShownAsTables,
    Table,
    and_listed,
    counted,
    fmt_seconds,
    fmt_with_interval,
    limit_text,
    jsonable,
    printable,
)

__all__ = ["MethodResult", "Comparison", "library_versions", "details", "error_cell", "error_text", "matrix_label",
           "COMPARISON_FORMAT", "COMPARISON_VERSION"]

#: What the JSON of a comparison (``compare --json``) says it is, in its ``"format"``, and the version of its
#: shape: a file of a later version (a newer sfapprox's) is refused by :meth:`Comparison.from_dict` rather
#: than misread; a file without them (written before they were recorded) reads as version 1.
COMPARISON_FORMAT = "sfapprox-comparison"
COMPARISON_VERSION = 1
#: A row's statuses (:class:`MethodResult`).
ROW_STATUSES = ("ok", "not applicable", "failed", "interrupted")

# The saved fits' functions and the atomic writes lived here before they had modules of their own.
__getattr__ = moved_names(__name__, {"SavedFactors": "sfapprox.factors", "save_factors": "sfapprox.factors",
                                     "load_factors": "sfapprox.factors", "atomic_path": "sfapprox._atomic",
                                     "write_json": "sfapprox._atomic"})


@dataclass(repr=False)  # its own __repr__: the fitted parameters made a row's 700 characters
class MethodResult:
    """One method's outcome at a budget.

    Its ``repr`` is one line: the method, its status, what it stores, its errors (with their 95 %
    intervals where estimated from columns) and its seconds, or why it has no result.

    Attributes
    ----------
    method : str
        The method's name (``"sf"``, ``"tsvd"``, ...), or an included saved
        fit's row name.
    status : {"ok", "not applicable", "failed", "interrupted"}
        ``"not applicable"`` and ``"failed"`` rows say why in ``reason``.
    nnz : int or None
        Stored numbers of the surrogate (never above the budget for an ``"ok"`` row).
    fro_error, rel_error : float or None
        ``||X - X_hat||_F`` and that over ``||X||_F``; None unless there is an
        approximation to score.
    seconds : float or None
        Wall time this method took in its comparison, measured by the comparison the same way for
        every method: from before its checks and its factory (SF's structure, its starts) to after its
        row is scored.  From columns (a matrix not formed) every row is scored afterwards in one joint
        pass, which no row's seconds hold: the comparison's notes say what it took.  The estimator's
        own time (the optimizer's, each method's clock) is ``params["fit_seconds"]``.  A row read from a
        file written before rows had ``fit_seconds`` holds that fit time here (read as it is: nothing
        converts it); an included saved fit's row shows the seconds its file records.
    params : dict
        The fitted parameters (rank, structure, iterations, ``stop_reason``, ...).
    reason : str or None
        Why the method did not apply, failed or stopped.
    min_budget : int or None
        The smallest budget at which the method applies to this matrix.
    time_limit : float or None
        The seconds the method was given (None: no limit).
    error_estimate : dict or None
        For a row scored from columns (a matrix too big to form): ``{"exact",
        "fro_interval", "rel_interval", "columns", "columns_advised"}`` (see
        :class:`~sfapprox.estimate.ErrorEstimate`); None when scored exactly.
    operator : SurrogateOperator or None
        The fitted surrogate (a LinearOperator with ``to_dense()`` and
        ``n_stored``); not part of :meth:`to_dict`.
    estimator : object or None
        The fitted method object; not part of :meth:`to_dict`.
    stop_reason : str or None
        Read-only: why the fit stopped (``"converged"``, ``"time_limit"``, ``"exact"``, ...), as the
        method's ``stop_reason_``; ``params["stop_reason"]``, None where the row records none (a method
        not run, or one with no stop to report).
    """

    method: str
    status: str
    nnz: int | None = None
    fro_error: float | None = None
    rel_error: float | None = None
    seconds: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    min_budget: int | None = None
    time_limit: float | None = None
    #: For a row scored from columns (a matrix too big to form): ``{"exact", "fro_interval",
    #: "rel_interval", "columns", "columns_advised"}``; None when scored exactly on the formed matrix.
    error_estimate: dict[str, Any] | None = None
    operator: Any = field(default=None, repr=False, compare=False)
    estimator: Any = field(default=None, repr=False, compare=False)

    @property
    def stop_reason(self) -> str | None:
        """Why the fit stopped, ``params["stop_reason"]`` (None where not recorded): the estimator's
        ``stop_reason_``, under the name a row's reader guesses (not a field: :meth:`to_dict` keeps it in
        ``params``)."""
        return (self.params or {}).get("stop_reason")

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (without the operator and estimator)."""
        skip = ("operator", "estimator")
        return jsonable({f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip})

    @classmethod
    def from_dict(cls, record: dict[str, Any], *, where: str = "") -> MethodResult:
        """The row :meth:`to_dict` wrote, read back (without its operator and estimator), every field checked.

        Parameters
        ----------
        record : dict
            A row of a comparison's JSON (``results[i]``).
        where : str, default=""
            The row's place in its file (``"results[2]"``), named by a refusal.

        Returns
        -------
        MethodResult

        Raises
        ------
        InputError
            Naming the key: a missing ``method`` or ``status`` (an ``ok`` row's ``fro_error``), a value of the
            wrong type, a negative or non-finite error, count or time.

        Examples
        --------
        >>> r = MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1})
        >>> MethodResult.from_dict(r.to_dict()).to_dict() == r.to_dict()
        True
        """
        check_table(record, where)
        check_finite(record, where)
        method = read_field(record, "method", where, "name", required=True, null=False)
        status = read_field(record, "status", where, "status", required=True, null=False)
        if status == "ok":  # (null stays: a score that could not be had is written as null)
            read_field(record, "fro_error", where, "measure", required=True)
        return cls(method, status, **{key: read_field(record, key, where, kind) for key, kind in _ROW_FIELDS.items()},
                   params=read_field(record, "params", where, "table") or {},
                   error_estimate=_estimate_from(record, where))

    def __repr__(self) -> str:
        """One line, the numbers of its row of ``compare``'s table.

        Examples
        --------
        >>> MethodResult("tsvd", "ok", 297, 1.43321, 0.145912, 0.0012, {"rank": 9})
        <MethodResult tsvd: ok, stored 297, fro_error 1.433, rel_error 0.1459, 0.00 s>
        >>> MethodResult("nmf", "not applicable", reason="X has negative entries")
        <MethodResult nmf: not applicable: X has negative entries>
        """
        parts = [] if self.nnz is None else [f"stored {self.nnz:,}"]
        for name, key in (("fro_error", "fro_interval"), ("rel_error", "rel_interval")):
            value = getattr(self, name)
            if value is not None:
                estimated = (self.error_estimate or {}).get(key)
                parts.append(f"{name} {error_cell(self, value, key)}" + (" (95%)" if estimated else ""))
        if parts and self.seconds is not None:  # a row without a result took no time worth a word
            parts.append(f"{fmt_seconds(self.seconds)} s")
        said = f"{self.status}, {', '.join(parts)}" if parts else self.status
        if self.reason:
            said += f"{'; ' if parts else ': '}{' '.join(self.reason.split())}"
        return printable(f"<MethodResult {self.method}: {said}>")


@dataclass(repr=False)  # its own __repr__: every field of the matrix summary and each row was 1,500 characters
class Comparison(ShownAsTables):
    """Every method's result on one matrix at one budget, and how they were run.

    ``settings``, ``versions`` and ``notes`` are written to every JSON file.  In a
    notebook it shows as ``compare``'s table (``_repr_html_``); its ``repr`` says
    the matrix, the budget, each method's error (the winner starred) and the
    verdict in a few lines; :meth:`to_frame` gives the rows as a pandas DataFrame,
    the values of ``compare --csv``: a row per method, columns ``method``, ``stored``,
    ``of budget``, ``min budget``, ``‖X−X̂‖_F``, ``relative``, ``seconds``, ``status``,
    ``details``, ``winner`` and the 95 % intervals' ends.

    Attributes
    ----------
    matrix : dict
        The matrix record (:func:`~sfapprox.comparison.matrix_record`: name, file, ``n``, ``nnz``,
        ``fro_norm``, ``recipe``, ...), of the same keys formed or compared from columns (there the
        facts no pass gave are None, the reason in its ``unknown``).
    budget : int
        Stored numbers allowed to every method.
    budget_spec : str
        The budget as asked (``"sf"``, ``"0.05"``, ...).
    results : list of MethodResult
        One row per method, in the order asked.
    settings : dict
        The fit settings, the protocol and ``count_indices``.
    versions : dict of str to str
        The library versions (:func:`library_versions`).
    notes : list of str
        What the reader should know about how the rows were made (a clamped
        budget, a saved fit made from another input).
    """

    matrix: dict[str, Any]
    budget: int
    budget_spec: str
    results: list[MethodResult]
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    #: What the reader should know about how the rows were made (a clamped budget, a saved fit
    #: made from another input); shown under the table and written to the JSON.
    notes: list[str] = field(default_factory=list)

    def ranked(self) -> list[MethodResult]:
        """The scored rows, best first: the smallest error; among rows that reproduce X
        exactly (or tie), the fewest stored numbers.  The winner, the ★ and the verdict
        all come from this one order."""
        scored = [r for r in self.results if r.status == "ok" and r.fro_error is not None]
        return sorted(scored, key=_rank_key)

    def winner(self) -> str | None:
        """The best ``ok`` method (:meth:`ranked`'s first), or None: fewer than two rows were scored (one
        method wins no contest, as a batch report counts no win of a matrix with one), or the best
        row's error interval overlaps the next one's (estimated errors: no winner is declared
        inside the intervals)."""
        ranked = self.ranked()
        if len(ranked) < 2 or self.tied() is not None:
            return None
        return ranked[0].method

    def tied(self) -> MethodResult | None:
        """A row the best cannot be told from (None when the best is clear): the first whose 95 % error
        interval overlaps the best row's — any row, not only the runner-up (a wide interval further down
        can reach below the best) — or, with exact errors, one of the same error and stored numbers
        (which of the two ran first decided the winner).  :meth:`tied_rows` has them all."""
        return next(iter(self.tied_rows()), None)

    def tied_rows(self) -> list[MethodResult]:
        """Every row the best cannot be told from, in :meth:`ranked`'s order (empty when the best is clear):
        the verdict named two rows of a three-way tie of sf, sf+lr and sf+s."""
        ranked = self.ranked()
        if len(ranked) < 2:
            return []
        if not any((r.error_estimate or {}).get("fro_interval") for r in ranked):
            key = _rank_key(ranked[0])
            return [r for r in ranked[1:] if _rank_key(r) == key]  # else the order decides
        best = _interval(ranked[0])
        return [r for r in ranked[1:] if _interval(r)[0] <= best[1]]

    def result(self, method: str) -> MethodResult:
        """The row of ``method`` (a KeyError naming the methods that were run when it was not).

        Parameters
        ----------
        method : str
            A method name as in ``results``.
        """
        for r in self.results:
            if r.method == method:
                return r
        ran = ", ".join(r.method for r in self.results) or "none"
        raise KeyError(f"no row for method {method!r} in this comparison; the methods run were: {ran}")

    @property
    def from_columns(self) -> bool:
        """Whether the matrix was compared from its columns (never formed): every row was then scored
        afterwards by one joint pass, which no row's seconds hold."""
        return self.matrix.get("compared_from") == "columns"

    def stopped_ahead(self) -> list[MethodResult]:
        """Rows stopped before they finished (``"interrupted"``, their best point kept and scored) whose
        error so far is below the best finished row's: they are not ranked (a fit cut short is no
        method's result), but a ★ and a verdict beside a smaller error read as wrong without a word."""
        ranked = self.ranked()
        if not ranked or ranked[0].fro_error is None:
            return []
        return [r for r in self.results if r.status == "interrupted" and r.fro_error is not None
                and r.fro_error < ranked[0].fro_error]

    def verdict(self) -> dict[str, Any] | None:
        """What the rows say, in one line: which kind of surrogate wins, and by how much.

        Returns ``{"winner", "text", "ratio", "exact", "suggest"}`` (None without a
        scored row).  ``winner`` is always :meth:`winner`.  The text says
        ``"exact sparse storage is cheapest"`` when the winner stores X's
        non-zeros exactly, ``"SF wins by 3.2x over low rank (TSVD)"`` (the next
        best kind's error over SF's), or ``"low rank (TSVD) wins: SF's error is
        2.1x larger"``.  When plain sparse storage was not run but would hold X
        exactly within the budget, the text says so and ``suggest`` names the
        methods to add (``["sparse"]``), whatever the methods that ran.  A row stopped early
        with a smaller error so far (:meth:`stopped_ahead`) is named after it.  With one scored row
        there is no winner: ``"only tsvd was scored: no winner with one method"``, then the same caveats.
        """
        out = self._verdict()
        stopped = self.stopped_ahead()
        if out is not None and stopped:
            out["text"] += f" (of the methods that finished; {_stopped_words(stopped)} not ranked)"
        return out

    def _verdict(self) -> dict[str, Any] | None:
        """:meth:`verdict` of the finished rows."""
        ranked = self.ranked()
        if not ranked:
            return None
        best = ranked[0]
        if len(ranked) == 1:
            return self._single_verdict(best)
        label = _label(best.method)
        tied = self.tied()
        if best.fro_error == 0.0 and best.rel_error is None:  # X is zero: no relative error to compare
            fewest = [r.method for r in ranked if r.fro_error == 0.0 and r.nnz == best.nnz]
            text = (f"X is all zeros: {and_listed(fewest)} reproduce{'s' if len(fewest) == 1 else ''} it with "
                    f"the fewest numbers ({counted(best.nnz, 'stored number')})")
            return {"winner": None if tied is not None else best.method, "text": text, "ratio": None, "exact": True,
                    "suggest": []}
        if tied is not None:
            rows = [best, *self.tied_rows()]
            if all(_is_exact(r) and _stores_entries_only(r) for r in rows):
                # X's own entries in each (rpca's, rpca-pcp's and sf+s's all-sparse ends on a graph): a tie of one
                # surrogate, whose kind is the answer; "no clear winner" alone read as no answer at all
                text = (f"exact sparse storage is cheapest: X's {self._entries_words(best, '')} and reproduce it "
                        f"exactly, in {and_listed([r.method for r in rows])} alike (no clear winner among them)")
                return {"winner": None, "text": text, "ratio": None, "exact": True, "suggest": []}
            return _tie_verdict(rows)
        exact = _is_exact(best)
        sf = next((r for r in ranked if r.method == "sf"), None)
        ratio = None
        if exact and _stores_entries_only(best):
            # (who holds them said before the count: "... with their positions (rpca's sparse part alone)
            # (45% of the budget)" put two parentheses in a row)
            who = (f" in {best.method}'s sparse part alone" if _kind(best) != "sparse" else
                   "" if best.method == "sparse" else f" in {best.method}")  # (a saved sparse fit's named)
            text = (f"exact sparse storage is cheapest: X's {self._entries_words(best, who)} "
                    "and reproduce it exactly")
        elif exact:
            text = (f"{label} reproduces X exactly with {counted(best.nnz, 'number')} "
                    f"({_share(best.nnz, self.budget)} of the budget)")
        elif label.startswith("SF"):
            runner = next((r for r in ranked[1:] if not _label(r.method).startswith("SF")), None)
            if runner is None:
                text = f"{label} wins (no other kind of method ran)"
            else:
                ratio = runner.fro_error / best.fro_error
                text = f"{label} wins by {_times(ratio)} over {_label(runner.method)}"
        elif sf is not None:
            ratio = sf.fro_error / best.fro_error
            text = f"{label} wins: SF's error is {_times(ratio)} larger{_cut_short_words(sf)}"
        else:
            text = f"{label} wins"
        text, suggest = self._caveats(best, text, exact)
        return {"winner": best.method, "text": text, "ratio": ratio, "exact": exact, "suggest": suggest}

    def _single_verdict(self, row: MethodResult) -> dict[str, Any]:
        """:meth:`verdict` of one scored row: no winner (one method wins no contest: "low rank (TSVD) wins"
        and its ★ said so of a method run alone, where a batch report counts no win), what it reached where
        that is exact, and the caveats of any verdict (a count of X's own entries, sparse storage to add)."""
        exact = _is_exact(row)
        text = f"only {row.method} was scored: no winner with one method"
        if exact:
            text += (f" ({row.method} reproduces X exactly with {counted(row.nnz, 'number')}, "
                     f"{_share(row.nnz, self.budget)} of the budget)")
        text, suggest = self._caveats(row, text, exact)
        return {"winner": None, "text": text, "ratio": None, "exact": exact, "suggest": suggest}

    def _caveats(self, best: MethodResult, text: str, exact: bool) -> tuple[str, list[str]]:
        """``text`` with what every verdict adds after its lead: that the best row stores no fewer numbers
        than X's own entries, and that plain sparse storage, not run, would hold X exactly (then
        ``suggest`` names it)."""
        n = self.matrix.get("n")
        caveat = "but"  # the first caveat's word; "and" after it (two "; but" in a row read as a stutter)
        if n and best.nnz is not None and best.nnz >= int(n) ** 2:
            # A surrogate is only compact below N^2: SF's default budget is its structure's, over N^2 at small N.
            verb = "is" if best.nnz == 1 else "are"
            text += (f"; but {counted(best.nnz, 'number')} {verb} no fewer than X's own "
                     f"{counted(int(n) ** 2, 'entry', 'entries')}: X stored as it is costs no more")
            caveat = "and"
        suggest = []
        csr = self._exact_sparse_count()
        if not exact and csr is not None and not any(r.method == "sparse" for r in self.results):
            text += (f"; {caveat} X has only {self.matrix['nnz']:,} non-zeros: plain sparse storage ('sparse') "
                     f"holds it exactly in {csr:,} numbers ({_share(csr, self.budget)} of the budget)")
            suggest = ["sparse"]
        return text, suggest

    def _entries_words(self, row: MethodResult, who: str) -> str:
        """"57,494 non-zeros take 114,988 numbers with their positions (25% of the budget)": what a row
        that stores X's entries alone (:func:`_stores_entries_only`) holds, ``who`` after the entries."""
        p = row.params
        # the entries the row holds before "nnz", which a saved fit's record (--with) has for its stored numbers:
        # "X's 576 non-zeros ... take 576 numbers" of a graph of 288
        entries = p.get("matrix_nnz", p.get("n_sparse", p.get("nnz", self.matrix.get("nnz"))))
        positions = "" if _kind(row) == "sparse" else " with their positions"
        return (f"{counted(entries, 'non-zero')}{who} take {counted(row.nnz, 'number')}{positions} "
                f"({_share(row.nnz, self.budget)} of the budget)")

    def _exact_sparse_count(self) -> int | None:
        """CSR's stored numbers for X's non-zeros when they fit the budget (None otherwise)."""
        n, nnz = self.matrix.get("n"), self.matrix.get("nnz")
        if n is None or nnz is None:
            return None
        count = sparse_count(int(n), int(nnz))
        return count if count <= self.budget else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: the rows, the winner and verdict, the notes, settings and versions."""
        return jsonable(
            {
                "format": COMPARISON_FORMAT,
                "version": COMPARISON_VERSION,
                "matrix": self.matrix,
                "budget": self.budget,
                "budget_spec": self.budget_spec,
                "winner": self.winner(),
                "verdict": self.verdict(),
                "results": [r.to_dict() for r in self.results],
                "notes": self.notes,
                "settings": self.settings,
                "versions": self.versions,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        """The comparison :meth:`to_dict` wrote (``compare --json``), read back: its tables, verdict and JSON
        are the original's.  Every field is checked, so that an edited or damaged file is refused in one
        line naming its key rather than shown wrong or failing later.

        The winner and the verdict are not read: they follow from the rows (the file's are checked to be
        of their types); a file's rows (``results``) hold no fitted surrogates.

        Parameters
        ----------
        data : dict
            The parsed JSON.

        Returns
        -------
        Comparison

        Raises
        ------
        InputError
            Naming the key: one missing (``matrix``, ``budget``, ``budget_spec``, ``results``), of the wrong
            type, NaN or Infinity anywhere, a second row of one method, or a ``format``/``version`` this
            sfapprox does not read.

        Warns
        -----
        UserWarning
            For a row whose method this sfapprox does not know (a newer sfapprox's, or a plugin's not
            imported here), not an included saved fit's: the row is read and shown as recorded.

        Examples
        --------
        >>> c = Comparison({"name": "graph", "n": 20}, 100, "100", [MethodResult("tsvd", "ok", 82, 3.2, 0.32, 0.1)])
        >>> Comparison.from_dict(c.to_dict()).to_dict() == c.to_dict()
        True
        """
        check_format(data, COMPARISON_FORMAT, COMPARISON_VERSION)
        check_finite(data, "")
        comparison = comparison_from(data)
        warn_unknown_methods({key_path("results", i): r for i, r in enumerate(comparison.results)})
        return comparison

    def __repr__(self) -> str:
        """A few lines: the matrix and the budget, each method's error as the table says it (the
        winner starred), and the verdict.

        Examples
        --------
        >>> c = Comparison({"name": "graph", "n": 20}, 100, "100", [
        ...     MethodResult("sf", "ok", 100, 1.0, 0.1, 0.5), MethodResult("tsvd", "ok", 82, 3.2, 0.32, 0.1),
        ...     MethodResult("nmf", "not applicable", reason="X has negative entries")])
        >>> c
        Comparison: graph (N=20), budget 100 stored numbers (25.00% of N²)
          relative error: sf 0.1 ★, tsvd 0.32, nmf n/a
          verdict: SF wins by 3.2x over low rank (TSVD)
        """
        n = self.matrix.get("n")
        share = f" ({100 * self.budget / n**2:.2f}% of N²)" if n else ""
        # X all zeros has no relative error: the absolute one, as a sweep's table says it
        absolute = self.matrix.get("fro_norm") == 0
        winner = self.winner()
        errors = ", ".join(f"{r.method} {error_text(r, absolute=absolute)}{' ★' if r.method == winner else ''}"
                           for r in self.results)
        budget = counted(self.budget, "stored number")
        order = MISSING if n is None else f"{n:,}"  # thousands separated, as the table's counts
        lines = [f"Comparison: {record_label(self.matrix)} (N={order}), budget {budget}{share}",
                 f"  {'absolute' if absolute else 'relative'} error: {errors or 'no method was run'}"]
        verdict = self.verdict()
        if verdict is not None:
            lines.append(f"  verdict: {verdict['text']}")
        return printable("\n".join(lines))

    def tables(self) -> list[Table]:
        """The comparison as one table: a row per method, the winner marked."""
        name, n = record_label(self.matrix), self.matrix.get("n")
        table = Table(
            f"{name}  (N={n:,}, budget {self.budget:,} stored numbers = {100 * self.budget / n**2:.2f}% of N²)",
            # In a narrow window the least telling columns give way first (priority).
            [Column("method", "method", "left"), Column("stored", "stored", priority=60),
             Column("of_budget", "of budget", priority=10), Column("min_budget", "min budget", priority=20),
             Column("fro_error", "‖X−X̂‖_F"), Column("rel_error", "relative"), Column("seconds", "seconds", priority=30),
             Column("status", "status", "left", priority=40), Column("details", "details", "left", wrap=True, priority=50)],
        )
        winner = self.winner()
        for r in self.results:
            mark = r.method == winner
            table.add(
                {
                    "method": r.method + (" ★" if mark else ""),
                    "stored": "–" if r.nnz is None else f"{r.nnz:,}",
                    "of_budget": "–" if r.nnz is None else f"{100 * r.nnz / self.budget:.1f}%",
                    "min_budget": "–" if r.min_budget is None else f"{r.min_budget:,}",
                    "fro_error": error_cell(r, r.fro_error, "fro_interval"),
                    "rel_error": error_cell(r, r.rel_error, "rel_interval"),
                    "seconds": fmt_seconds(r.seconds),
                    "status": r.status,
                    "details": r.reason or details(r.params),
                },
                best={"method", "fro_error", "rel_error"} if mark else set(),
                data=self._row_data(r, mark),
            )
        table.data_titles = {"winner": "winner", "fro_low": "‖X−X̂‖_F 95% low", "fro_high": "‖X−X̂‖_F 95% high",
                             "rel_low": "relative 95% low", "rel_high": "relative 95% high"}
        # a narrow window leaves out status and details first: why a row has no result still shows
        table.hidden_notes["details"] = [f"{r.method}: {r.status}: {r.reason}" for r in self.results
                                         if r.status != "ok" and r.reason]
        # status alone left out (at 60 columns) while details stay: a row of dashes beside its reason (or a
        # "[1]" note) never said "failed" or "not applicable"
        table.hidden_notes["status"] = [f"{r.method}: {r.status}" for r in self.results if r.status != "ok"]
        if winner is not None:
            stopped = self.stopped_ahead()
            table.notes.append(f"★ smallest error at this budget: {winner}"
                               + (" of the methods that finished" if stopped else ""))
        if any((r.error_estimate or {}).get("fro_interval") for r in self.results):
            table.notes.append(ESTIMATED_NOTE)
        note = seconds_note(self.results, from_columns=self.from_columns)
        if note is not None:
            table.notes.append(note)
        verdict = self.verdict()
        if verdict is not None:
            table.notes.append(f"verdict: {verdict['text']}")
        for r in self.results:
            if r.params.get("structure_reason"):
                table.notes.append(f"{r.method}: {r.params['structure_reason']}")
        table.notes.extend(f"note: {n}" for n in self.notes)
        return [table]

    def _row_data(self, r: MethodResult, winner: bool) -> dict[str, Any]:
        """A row's values for CSV: full precision (the share of the budget in percent), the winner
        as a column of its own and an estimated error's 95 % intervals, of both errors (empty where exact;
        the relative one's was in the JSON only, where a sweep's CSV gives it)."""
        estimate = r.error_estimate or {}
        interval = estimate.get("fro_interval") or (None, None)
        relative = estimate.get("rel_interval") or (None, None)
        return {"method": r.method, "stored": r.nnz, "of_budget": None if r.nnz is None else 100 * r.nnz / self.budget,
                "min_budget": r.min_budget, "fro_error": r.fro_error, "rel_error": r.rel_error,
                "seconds": r.seconds, "winner": winner, "fro_low": interval[0], "fro_high": interval[1],
                "rel_low": relative[0], "rel_high": relative[1]}


#: The table's note on its "seconds" column, where a row's differ from its fit's own (:func:`_beyond_fit`).
SECONDS_NOTE = "seconds: each method's whole turn (setting up, fit, scoring), its fit's own in params.fit_seconds"
#: :data:`SECONDS_NOTE` of a comparison from columns, whose rows' scoring is one joint pass in no row's seconds.
SECONDS_NOTE_COLUMNS = "seconds: each method's whole turn (setting up, fit), its fit's own in params.fit_seconds"

#: Share of a row's fit seconds, and seconds, its whole turn may exceed them by with no note on the column:
#: below both the column reads as the fit's time and nothing is misread.
SECONDS_NOTE_SHARE, SECONDS_NOTE_FLOOR = 0.2, 0.1


def seconds_note(rows: list[MethodResult], *, from_columns: bool = False) -> str | None:
    """The note a table's seconds need (:data:`SECONDS_NOTE`, or :data:`SECONDS_NOTE_COLUMNS` from columns),
    where a row's whole turn says much more than its fit's own (:func:`_beyond_fit`); None: the seconds read
    as the fits' and need no word.  Compare's table and sweep's (a column of seconds per method) say it alike.
    A saved fit's row (``compare --with``) shows its own fit's seconds, from when it was made: the note says so.

    Parameters
    ----------
    rows : list of MethodResult
        The rows whose seconds the table shows.
    from_columns : bool, default=False
        Whether the rows were scored afterwards in one joint pass (a matrix not formed), in no row's seconds.

    Returns
    -------
    str or None

    Examples
    --------
    >>> seconds_note([MethodResult("sf", "ok", seconds=5.9, params={"fit_seconds": 1.76})]) == SECONDS_NOTE
    True
    >>> seconds_note([MethodResult("tsvd", "ok", seconds=0.012, params={"fit_seconds": 0.008})]) is None
    True
    >>> seconds_note([MethodResult("saved:mesh", "ok", seconds=3.2, params={"kind": "sf", "fit_seconds": 1.7})])
    "seconds: saved:mesh shows its own fit's, when it was made, not this comparison's"
    """
    saved = [r.method for r in rows if _is_saved_row(r) and isinstance(r.seconds, (int, float))]
    if not any(_beyond_fit(r) for r in rows if not _is_saved_row(r)):
        return None if not saved else f"seconds: {_saved_seconds_words(saved)}"
    # from columns the rows are scored together afterwards, in no row's seconds (a note says the pass's)
    note = SECONDS_NOTE_COLUMNS if from_columns else SECONDS_NOTE
    return note if not saved else f"{note}; {_saved_seconds_words(saved)}"


def _kind(r: MethodResult) -> str:
    """The method that made row ``r``: a saved fit's ``kind`` (``saved:mesh.sparse`` is sparse storage, and its
    verdict spoke of "saved:mesh.sparse's sparse part alone ... with their positions", rpca's words), else its own.

    Examples
    --------
    >>> _kind(MethodResult("saved:mesh.sparse", "ok", params={"kind": "sparse"})), _kind(MethodResult("rpca", "ok"))
    ('sparse', 'rpca')
    """
    kind = r.params.get("kind") if _is_saved_row(r) else None
    return kind if isinstance(kind, str) else r.method


def _is_saved_row(r: MethodResult) -> bool:
    """Whether row ``r`` is an included saved fit's (``compare --with``): its ``params`` record the ``kind`` of
    surrogate, and its seconds are that fit's own, when it was made."""
    return isinstance(r.params, dict) and "kind" in r.params and r.method not in methods()


def _saved_seconds_words(names: list[str]) -> str:
    """What the seconds of the saved fits' rows ``names`` are: their own fits' whole turns, when they were made
    (saved:mesh's 3.25 s read as this comparison's turn, under a note saying the column was each method's).

    Examples
    --------
    >>> _saved_seconds_words(["saved:mesh"])
    "saved:mesh shows its own fit's, when it was made, not this comparison's"
    >>> _saved_seconds_words(["saved:a", "saved:b"])
    "saved:a and saved:b show their own fits', when they were made, not this comparison's"
    """
    if len(names) == 1:
        return f"{names[0]} shows its own fit's, when it was made, not this comparison's"
    return f"{and_listed(names)} show their own fits', when they were made, not this comparison's"


def fit_seconds_note(summary: dict[str, Any]) -> str | None:
    """The note `sfapprox fit` shows under its table where its ``seconds`` (the fit's whole turn) say much
    more than its ``fit_seconds`` (:func:`_beyond_fit`), in :data:`SECONDS_NOTE`'s words, naming the parts
    that ran: forming a source (``form_seconds``), setting up, the fit, scoring (``scoring_seconds``).

    Examples
    --------
    >>> fit_seconds_note({"seconds": 5.0, "fit_seconds": 2.0, "form_seconds": 2.5, "scoring_seconds": 0.4})
    "seconds: the fit's whole turn (forming the matrix, setting up, fit, scoring), its fit's own in fit_seconds"
    >>> fit_seconds_note({"seconds": 0.012, "fit_seconds": 0.008}) is None
    True
    """
    row = MethodResult("sf", "ok", seconds=summary.get("seconds"),
                       params={k: summary.get(k) for k in ("fit_seconds", "compile_seconds")})
    if not _beyond_fit(row):
        return None
    parts = ["forming the matrix"] if summary.get("form_seconds") is not None else []
    parts += ["setting up", "fit"] + (["scoring"] if summary.get("scoring_seconds") is not None else [])
    return f"seconds: the fit's whole turn ({', '.join(parts)}), its fit's own in fit_seconds"


def _beyond_fit(r: MethodResult) -> bool:
    """Whether row ``r``'s seconds (its whole turn in the comparison) say much more than its fit's own
    (``params["fit_seconds"]``: over a fifth more, and :data:`SECONDS_NOTE_FLOOR` s), or hold a compiling of
    the kernels: the table's "seconds" then need their word (SF's 5.9 s at N = 3,000 read as its fit's
    1.76 s had). A row with no fit seconds recorded (an older file's, a saved fit's) needs none.

    Examples
    --------
    >>> _beyond_fit(MethodResult("sf", "ok", seconds=5.9, params={"fit_seconds": 1.76}))
    True
    >>> _beyond_fit(MethodResult("tsvd", "ok", seconds=0.012, params={"fit_seconds": 0.008}))
    False
    """
    params = r.params if isinstance(r.params, dict) else {}
    fit, compiled = params.get("fit_seconds"), params.get("compile_seconds")
    if not isinstance(fit, (int, float)) or not isinstance(r.seconds, (int, float)):
        return False  # (an older file's row: its seconds are its fit's, compiling or not)
    if isinstance(compiled, (int, float)) and compiled > 0:
        return True
    extra = r.seconds - fit
    return extra > SECONDS_NOTE_SHARE * fit and extra > SECONDS_NOTE_FLOOR


#: Relative error below which a row reproduces X exactly (floating-point round-off).
EXACT_REL_ERROR = 1e-12


def is_exact(fro_error: float | None, rel_error: float | None, error_estimate: dict | None = None) -> bool:
    """Whether a row (or a batch line) of these errors reproduces X (to round-off); never an error estimated
    from some columns (a sample of exact columns said "0 ± 0" of a surrogate with relative error 0.014)."""
    if (error_estimate or {}).get("exact") is False:
        return False
    return fro_error == 0.0 or (rel_error is not None and rel_error < EXACT_REL_ERROR)


def rank_key(fro_error: float, rel_error: float | None, nnz: int | None,
             error_estimate: dict | None = None) -> tuple[float, int]:
    """A row's place in :meth:`Comparison.ranked`, and a batch line's in its report's row: its error (0 when
    exact, :func:`is_exact`), then its stored numbers.  Two rows of the same key have no winner between them."""
    return (0.0 if is_exact(fro_error, rel_error, error_estimate) else fro_error, nnz if nnz is not None else 0)


def _is_exact(r: MethodResult) -> bool:
    """:func:`is_exact` of a row."""
    return is_exact(r.fro_error, r.rel_error, r.error_estimate)


def _rank_key(r: MethodResult) -> tuple[float, int]:
    """:func:`rank_key` of a row."""
    return rank_key(r.fro_error, r.rel_error, r.nnz, r.error_estimate)


def _stores_entries_only(r: MethodResult) -> bool:
    """True for a row whose surrogate is X's entries alone (sparse, or a low-rank + sparse split of rank 0)."""
    if r.method == "sparse":
        return True
    p = r.params
    return bool(p.get("n_sparse")) and not p.get("rank") and not p.get("n_factors") and not p.get("monarch_rank")


def _interval(r: MethodResult) -> tuple[float, float]:
    """A row's error interval: its 95 % interval when estimated, else the exact value twice."""
    estimate = r.error_estimate or {}
    if estimate.get("fro_interval"):
        low, high = estimate["fro_interval"]
        return low or 0.0, math.inf if high is None else high  # None: an unbounded end read back from JSON
    value = 0.0 if _is_exact(r) else r.fro_error
    return value, value


def matrix_label(name: str, reading: dict[str, Any] | None) -> str:
    """A matrix as a title names it: its name and, for one picked in its file (``var``: a weight, a
    ``.mat`` or ``.npz`` variable), that variable after a colon: the title named the file alone, whichever
    of its weights ``--var`` picked.

    Parameters
    ----------
    name : str
        The matrix's name (its file's stem).
    reading : dict or None
        What selected it in its file (:attr:`sfapprox.io.LoadedMatrix.recipe`, a source's ``recipe``).

    Examples
    --------
    >>> matrix_label("model", {"var": "layers.0.attn.q.weight"}), matrix_label("graph", None)
    ('model:layers.0.attn.q.weight', 'graph')
    """
    var = (reading or {}).get("var")
    return f"{name}:{var}" if var else name


def record_label(matrix: dict[str, Any]) -> str:
    """:func:`matrix_label` of a result's ``matrix`` record (a loaded matrix's ``recipe``, a source's)."""
    return matrix_label(matrix.get("name", "matrix"), matrix.get("recipe") or matrix.get("source"))


def error_cell(r: MethodResult, value: float | None, key: str) -> str:
    """An error cell: ``0.3120 ± 0.0040`` when estimated (the interval's half-width), else the value.

    Parameters
    ----------
    r : MethodResult
        The row (its ``error_estimate`` holds the intervals).
    value : float or None
        The error shown.
    key : {"fro_interval", "rel_interval"}
        Which interval goes with ``value``.
    """
    return fmt_with_interval(value, (r.error_estimate or {}).get(key))


def error_text(r: MethodResult, *, absolute: bool = False) -> str:
    """A row's error as a sweep's table says it: the relative error (``absolute``: the Frobenius one)
    with its interval where estimated, ``(time_limit)`` / ``(max_iter)`` after a fit that stopped on that
    limit, ``(interrupted)`` after one cut short, else ``n/a`` or the status (why is in the row's reason).

    Parameters
    ----------
    r : MethodResult
        The row.
    absolute : bool, default=False
        The Frobenius error instead of the relative one (X all zeros has no relative error).

    Examples
    --------
    >>> error_text(MethodResult("sf", "ok", 10, 2.0, 0.25, 1.0, {"stop_reason": "time_limit"}))
    '0.25 (time_limit)'
    >>> error_text(MethodResult("nmf", "not applicable")), error_text(MethodResult("rpca", "failed"))
    ('n/a', 'failed')
    """
    error, interval = ("fro_error", "fro_interval") if absolute else ("rel_error", "rel_interval")
    value = getattr(r, error)
    if r.status == "interrupted" and value is not None:  # its best factors, scored
        return error_cell(r, value, interval) + " (interrupted)"
    if r.status != "ok":
        return "n/a" if r.status == "not applicable" else r.status
    stop = r.params.get("stop_reason")
    return error_cell(r, value, interval) + (f" ({stop})" if stop in ("time_limit", "max_iter") else "")


def _tie_verdict(rows: list[MethodResult]) -> dict[str, Any]:
    """The verdict of rows the best cannot be told from (``rows[0]`` the best, :meth:`Comparison.tied_rows`
    after it), every one named: a three-way tie of sf, sf+lr and sf+s named two.  Exactly scored, they are of
    the same rank (:func:`rank_key`): the same error, or all reproducing X, their errors each its own
    round-off, quoted each where they differ ("tsvd and rsvd reach the same error (6.737e-15 relative)" sat
    beside rsvd's row of 1.298e-15).  Estimated, their 95 % intervals overlap.  Rows that are sf's own fit
    (:func:`_same_as_sf`) are said to be once.

    Examples
    --------
    >>> _tie_verdict([MethodResult("tsvd", "ok", 9, 7e-14, 7e-15), MethodResult("rsvd", "ok", 9, 1e-14, 1e-15)])["text"]
    'no clear winner: tsvd and rsvd both reproduce X to round-off (7e-15 and 1e-15 relative) with the same 9 stored numbers'
    """
    names = and_listed([r.method for r in rows])
    same = _same_surrogate_words(rows)
    if any(r.error_estimate for r in rows):
        if len(rows) == 2:
            errors = and_listed([f"{r.method} ({_with_interval(r)})" for r in rows])
            overlap = f"{errors} are within each other's 95% intervals"
        else:  # (the others need not overlap each other: each overlaps the best's)
            others = and_listed([f"{r.method} ({_with_interval(r)})" for r in rows[1:]])
            overlap = f"the 95% intervals of {others} reach into {rows[0].method}'s ({_with_interval(rows[0])})"
        text = (f"no clear winner: {overlap}{same}; estimate from more "
                "columns (a longer time limit) to tell them apart")
        return {"winner": None, "text": text, "ratio": None, "exact": False, "suggest": []}
    exact = all(_is_exact(r) for r in rows)
    if len({r.rel_error for r in rows}) == 1:  # (one number is true of all)
        errors = f"({_with_interval(rows[0])})"
    else:
        errors = f"({and_listed([error_cell(r, r.rel_error, 'rel_interval') for r in rows])} relative)"
    if exact:
        how = f"{'both' if len(rows) == 2 else 'all'} reproduce X to round-off"
    else:
        how = "reach the same error"
    text = f"no clear winner: {names} {how} {errors} with the same {counted(rows[0].nnz, 'stored number')}{same}"
    return {"winner": None, "text": text, "ratio": None, "exact": exact, "suggest": []}


def _cut_short_words(sf: MethodResult) -> str:
    """" (SF stopped on its 10.6 s time limit after 4 iterations)" where ``sf``'s fit stopped on its limit,
    else "": `compare --methods all` at N = 3,000 gave SF 10.6 s of its two minutes, and the verdict said
    "Nyström wins: SF's error is 14,800x larger" of a fit 4 iterations from its start, the limit said only in
    a note above the table (and not under --quiet).

    Examples
    --------
    >>> _cut_short_words(MethodResult("sf", "ok", 10, 2.0, 0.9, 11.0, {"stop_reason": "time_limit", "iterations": 4},
    ...                               time_limit=10.63))
    ' (SF stopped on its 10.6 s time limit after 4 iterations)'
    >>> _cut_short_words(MethodResult("sf", "ok", 10, 2.0, 0.9, 11.0, {"stop_reason": "converged", "iterations": 40}))
    ''
    """
    if sf.params.get("stop_reason") != "time_limit" or not sf.time_limit:
        return ""
    steps = sf.params.get("iterations")
    after = "" if steps is None else f" after {counted(int(steps), 'iteration')}"
    return f" (SF stopped on its {limit_text(sf.time_limit)} s time limit{after})"


def _same_as_sf(r: MethodResult, sf: MethodResult) -> bool:
    """Whether a hybrid row is the ``sf`` row's own fit: its best split had no low-rank or sparse part and
    was sf's fit, handed over by the comparison (``start`` "sf (its row's fit)"), so its count and error are sf's."""
    return (r is not sf and r.params.get("split") == "sf" and str(r.params.get("start", "")).startswith("sf (")
            and r.nnz == sf.nnz and r.fro_error == sf.fro_error)


def _same_surrogate_words(rows: list[MethodResult]) -> str:
    """"; sf+lr and sf+s are sf's own fit (...)" for tied rows that reused the tied sf row's fit, else ""."""
    sf = next((r for r in rows if r.method == "sf"), None)
    same = [r.method for r in rows if sf is not None and _same_as_sf(r, sf)]
    if not same:
        return ""
    verb = "is" if len(same) == 1 else "are"
    return (f"; {and_listed(same)} {verb} sf's own fit, the same surrogate (the best split had no low-rank "
            "or sparse part)")


def _stopped_words(rows: list[MethodResult]) -> str:
    """"sf, stopped early at 0.689 relative, is", "sf, rpca and nmf, stopped early at 0.689, 0.5 and 0.6
    relative, are": the rows :meth:`Comparison.stopped_ahead` names."""
    names = and_listed([r.method for r in rows])
    errors = and_listed([error_cell(r, r.rel_error, "rel_interval") for r in rows])
    return f"{names}, stopped early at {errors} relative, {'is' if len(rows) == 1 else 'are'}"


def _with_interval(r: MethodResult) -> str:
    return error_cell(r, r.rel_error, "rel_interval") + " relative"


def _share(count: int | None, budget: int) -> str:
    return f"{100 * count / budget:.0f}%" if budget and count is not None else "–"


def _times(ratio: float) -> str:
    """A ratio to three significant digits, as a reader says it: "3.42x", "778x", "1,070x" (``.3g`` wrote
    "1.07e+03x" from a thousand up, where the verdict of a low-rank kernel often is)."""
    if ratio < 1000 or not math.isfinite(ratio):
        return f"{ratio:.3g}x"
    return f"{float(f'{ratio:.3g}'):,.0f}x"


def _label(method: str) -> str:
    spec = methods().get(method)
    return (spec.label or spec.name) if spec is not None else method


#: Short names of the fitted parameters shown in the details column.
_SHORT = {"monarch_rank": "monarch_r", "rank": "r", "n_sparse": "s", "index_storage": "indices", "n_factors": "M", "base": "b",
          "init": "init", "iterations": "it", "stop_reason": "stop", "path": "path", "epochs": "epochs",
          "optimizer": "opt", "kept_start": "kept_start"}


def details(params: dict[str, Any]) -> str:
    """The fitted parameters worth a glance, e.g. ``M=6 b=2 it=812 stop=ftol``.

    Parameters
    ----------
    params : dict
        A row's ``params``; keys whose value is None are left out.

    Returns
    -------
    str
        ``key=value`` pairs with short keys, space-separated.

    Examples
    --------
    >>> details({"rank": 3, "stop_reason": "exact", "base": None})
    'r=3 stop=exact'
    """
    # None marks a part the method did not use (sf+s that kept no factors has no base)
    shown = []
    for key, short in _SHORT.items():
        if params.get(key) is None:
            continue
        value = params[key]
        if key == "n_factors" and params.get("n_factors_budget"):  # fewer than the budget allows
            value = f"{value}/{params['n_factors_budget']}"
        shown.append(f"{short}={value}")
    return " ".join(shown)


def library_versions() -> dict[str, str]:
    """Versions of sfapprox and the libraries that shaped a result."""
    return {
        "sfapprox": __version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": _installed_version("torch"),
        "h5py": _installed_version("h5py"),
    }


def _installed_version(name: str) -> str:
    """``name.__version__``, read without importing ``name`` where it is not imported yet: from the
    ``__version__ = "..."`` line of its ``version.py`` (:func:`_written_version`), else from the installed
    distribution's metadata, else (no such distribution) by importing it.  Importing torch to read its
    version cost a comparison of baselines alone a second or more (they never use it)."""
    import importlib
    import importlib.metadata
    import sys

    if name not in sys.modules:
        # the package's own version.py first: torch's wheels from PyPI say 2.13.0 in their metadata where
        # the module says 2.13.0+cu130 (the build's label is written to version.py alone)
        written = _written_version(name)
        if written is not None:
            return written
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:  # not installed as a distribution: ask the module
            pass
    return str(importlib.import_module(name).__version__)


def _written_version(name: str) -> str | None:
    """The string ``__version__ = "..."`` of package ``name``'s ``version.py``, read without running it
    (None where there is no such file or line)."""
    import ast
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec(name)
        folders = list(spec.submodule_search_locations or ()) if spec is not None else []
        text = next((Path(f, "version.py").read_text(encoding="utf-8") for f in folders
                     if Path(f, "version.py").is_file()), None)
        tree = ast.parse(text) if text is not None else None
    except (ImportError, ValueError, OSError, SyntaxError):
        return None
    for node in tree.body if tree is not None else ():
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


# ---------------------------------------------------------------------------
# reading a result's JSON back (from_dict): every field checked, a refusal names its key
# ---------------------------------------------------------------------------

#: The largest count read back: one beyond it is an edit (and no float holds its share of the budget).
_LARGEST = 2**63 - 1


def _finite(value: Any) -> bool:
    """A finite int or float, not a bool (an edited integer too large for a float is not finite)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _whole(low: int) -> tuple[str, Any]:
    return (f"a whole number from {low} to {_LARGEST}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= _LARGEST)


#: What a field must be (said by a refusal) and its test, by the names :func:`read_field` takes.
_KINDS: dict[str, tuple[str, Any]] = {
    "name": ("a non-empty string", lambda v: isinstance(v, str) and v != ""),
    "text": ("a string", lambda v: isinstance(v, str)),
    "table": ("a JSON object", lambda v: isinstance(v, dict)),
    "list": ("a list", lambda v: isinstance(v, list)),
    "texts": ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "names": ("a list of non-empty strings", lambda v: isinstance(v, list) and all(isinstance(x, str) and x for x in v)),
    "versions": ("a JSON object of strings", lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values())),
    "count": _whole(0),
    "positive": _whole(1),
    "counts": (f"a list of whole numbers from 1 to {_LARGEST}",
               lambda v: isinstance(v, list) and all(_whole(1)[1](x) for x in v)),
    "measure": ("a finite number >= 0", lambda v: _finite(v) and v >= 0),
    "flag": ("true or false", lambda v: isinstance(v, bool)),
    "status": (f"one of {', '.join(map(repr, ROW_STATUSES))}", lambda v: isinstance(v, str) and v in ROW_STATUSES),
}

#: A row's optional fields beside ``params`` and ``error_estimate``, and their kinds.
_ROW_FIELDS = {"nnz": "count", "fro_error": "measure", "rel_error": "measure", "seconds": "measure",
               "reason": "text", "min_budget": "count", "time_limit": "measure"}


def key_path(where: str, key: str | int) -> str:
    """A key's place in a file, as a refusal names it: ``results[2].fro_error``.

    Examples
    --------
    >>> key_path("", "results"), key_path("results", 2), key_path("results[2]", "fro_error")
    ('results', 'results[2]', 'results[2].fro_error')
    """
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _shown(value: Any) -> str:
    """A value as a refusal quotes it, short: a string's first 40 characters, a list or object by its kind."""
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a list"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_field(record: dict[str, Any], key: str, where: str, kind: str, *, required: bool = False,
               null: bool = True) -> Any:
    """``record[key]``, checked to be of ``kind`` (a name of :data:`_KINDS`); None where it is missing or null.

    Parameters
    ----------
    record : dict
        A JSON object of a result's file.
    key : str
        The field.
    where : str
        ``record``'s place in its file (:func:`key_path`; ``""`` for the top).
    kind : str
        What the value must be: ``"name"``, ``"text"``, ``"table"``, ``"count"``, ``"measure"``, ...
    required : bool, default=False
        Refuse a missing key.
    null : bool, default=True
        Take null (None) for a value.

    Raises
    ------
    InputError
        ``key results[2].fro_error must be a finite number >= 0 or null, got '0.3'``.
    """
    path = key_path(where, key)
    if key not in record:
        if required:
            raise InputError(f"key {path} is missing")
        return None
    value = record[key]
    if value is None and null:
        return None
    what, ok = _KINDS[kind]
    if not ok(value):
        raise InputError(f"key {path} must be {what}{' or null' if null else ''}, got {_shown(value)}")
    return value


def check_table(value: Any, where: str) -> None:
    """Refuse ``value`` unless it is a JSON object (the file itself where ``where`` is ``""``)."""
    if not isinstance(value, dict):
        said = f"key {where} must be" if where else "must hold"
        raise InputError(f"{said} a JSON object, got {_shown(value)}")


#: The deepest nesting read back: a result's JSON is a few levels deep, and one nested near Python's recursion
#: limit (which its JSON reader takes) failed later, in a traceback, where it was written again.
_DEEPEST = 64


def check_finite(value: Any, where: str = "", depth: int = 0) -> None:
    """Refuse NaN or ±Infinity anywhere in ``value`` (Python's JSON reader takes them; sfapprox never writes
    them, a number that is not finite is null), naming the first one's key, and nesting deeper than
    :data:`_DEEPEST` levels."""
    if depth > _DEEPEST:
        shown = where if len(where) <= 60 else where[:60] + "…"
        raise InputError(f"key {shown} is nested deeper than {_DEEPEST} levels, as no result's JSON is")
    if isinstance(value, float) and not math.isfinite(value):
        said = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        raise InputError(f"key {where or '(the whole file)'} is {said}, which is no JSON number (sfapprox writes "
                         "null for a number that is not finite)")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        check_finite(item, key_path(where, key), depth + 1)


def check_format(data: Any, expected: str, version: int) -> None:
    """Refuse ``data`` unless it is a JSON object of the format ``expected`` at ``version`` or below: a later
    version is a newer sfapprox's, whose fields may mean something else.  A file without ``format`` or
    ``version`` (written before they were recorded) reads as version 1 of ``expected``.

    Parameters
    ----------
    data : object
        The parsed file.
    expected : str
        Its format (:data:`COMPARISON_FORMAT`, ``sweep.SWEEP_FORMAT``).
    version : int
        The latest version of it this sfapprox reads.

    Raises
    ------
    InputError
        Naming the key ``format`` or ``version``.
    """
    check_table(data, "")
    said = data.get("format", expected)
    if said != expected:
        raise InputError(f"key format must be {expected!r}, got {_shown(said)}")
    number = data.get("version", 1)
    whole = isinstance(number, int) and not isinstance(number, bool)
    if whole and number > version:
        raise InputError(f"key version is {number}: a newer sfapprox wrote it (this one reads {expected} up to "
                         f"version {version}); read it with that sfapprox, or upgrade this one")
    if not (whole and number >= 1):
        raise InputError(f"key version must be a whole number from 1 to {version}, got {_shown(number)}")


def matrix_from(data: dict[str, Any], where: str = "") -> dict[str, Any]:
    """A result's ``matrix`` record, checked where the tables and the verdict read it (``n``, ``nnz``,
    ``fro_norm``, its name and recipe); its other keys are kept as they are."""
    matrix = read_field(data, "matrix", where, "table", required=True, null=False)
    at = key_path(where, "matrix")
    read_field(matrix, "n", at, "positive", required=True, null=False)
    for key, kind in (("name", "text"), ("nnz", "count"), ("fro_norm", "measure"), ("recipe", "table"),
                      ("source", "table"), ("unknown", "table"), ("notes", "texts")):
        read_field(matrix, key, at, kind)
    return matrix


def _interval_from(estimate: dict[str, Any], key: str, where: str) -> tuple[float | None, float | None] | None:
    """An estimate's 95 % interval, ``[low, high]``, as the tuple the estimate held: an unbounded upper end,
    written null (JSON has no Infinity), is infinite again (the CSV says ``inf`` there, as the original's did)."""
    interval = read_field(estimate, key, where, "list")
    if interval is None:
        return None
    ends = [end for end in interval if end is None or _finite(end)]
    # (only the upper end is unbounded: a null low end passed, and the table's "value ± spread" failed on it)
    if (len(interval) != 2 or len(ends) != 2 or ends[0] is None
            or (ends[1] is not None and ends[0] > ends[1])):
        raise InputError(f"key {key_path(where, key)} must be [low, high] (finite numbers, low <= high, null for "
                         f"an unbounded upper end) or null, got {interval!r:.60}")
    return ends[0], math.inf if ends[1] is None else ends[1]


def _estimate_from(record: dict[str, Any], where: str) -> dict[str, Any] | None:
    """A row's ``error_estimate`` (:class:`~sfapprox.estimate.ErrorEstimate`'s record), checked where the
    tables and the ranking read it; its intervals as tuples."""
    estimate = read_field(record, "error_estimate", where, "table")
    if estimate is None:
        return None
    at = key_path(where, "error_estimate")
    for key, kind in (("exact", "flag"), ("by_nonzeros", "flag"), ("columns", "count"), ("columns_advised", "count")):
        read_field(estimate, key, at, kind)
    return {**estimate, **{key: _interval_from(estimate, key, at) for key in ("fro_interval", "rel_interval")
                           if key in estimate}}


def comparison_from(data: Any, where: str = "", shared: dict[str, Any] | None = None) -> Comparison:
    """:meth:`Comparison.from_dict` of a record already past its format check (a sweep's point, whose
    ``shared`` matrix, settings and versions are its sweep's); a refusal names its key under ``where``."""
    check_table(data, where)
    data = {**data, **(shared or {})}
    results = read_field(data, "results", where, "list", required=True, null=False)
    comparison = Comparison(
        matrix_from(data, where),
        read_field(data, "budget", where, "positive", required=True, null=False),
        read_field(data, "budget_spec", where, "text", required=True, null=False),
        _one_row_each([MethodResult.from_dict(row, where=key_path(key_path(where, "results"), i))
                       for i, row in enumerate(results)], key_path(where, "results")),
        settings=read_field(data, "settings", where, "table") or {},
        versions=read_field(data, "versions", where, "versions") or {},
        notes=read_field(data, "notes", where, "texts") or [],
    )
    # not read: they follow from the rows; checked all the same (a script reading the file trusts their types)
    read_field(data, "winner", where, "name")
    verdict = read_field(data, "verdict", where, "table")
    if verdict is not None:
        read_field(verdict, "text", key_path(where, "verdict"), "text", required=True, null=False)
    return comparison


def _one_row_each(rows: list[MethodResult], where: str) -> list[MethodResult]:
    """``rows``, refused where a method has a second one (an edit, or two files pasted together): the winner,
    :meth:`Comparison.result` and a sweep's cell would each take one of the two without a word."""
    first: dict[str, int] = {}
    for i, r in enumerate(rows):
        if r.method in first:
            raise InputError(f"key {key_path(key_path(where, i), 'method')} is {r.method!r}, as "
                             f"{key_path(key_path(where, first[r.method]), 'method')} is: a comparison, and each budget "
                             "of a sweep, has one row per method")
        first[r.method] = i
    return rows


def is_known_row(r: MethodResult) -> bool:
    """Whether this sfapprox knows what made the row: a registered method, or an included saved fit (whose
    row name is the user's, ``saved:<file>``, and whose ``params`` record its ``kind``)."""
    return r.method in methods() or "kind" in r.params


def warn_unknown_methods(rows: dict[str, MethodResult], stacklevel: int = 3) -> None:
    """One :class:`UserWarning` naming the rows (by their key, ``results[2]``) whose method this sfapprox does
    not know (:func:`is_known_row`).  Such a file is read, not refused: a newer sfapprox's, or one made with
    a plugin's method, is shown as it was recorded (its row's numbers need no code of the method), with
    this word so that a misspelt edit is not taken for a method."""
    places: dict[str, list[str]] = {}
    for where, r in rows.items():
        if not is_known_row(r):
            places.setdefault(r.method, []).append(where)
    # by method, at its first row (a sweep of 30 budgets named its 30 rows)
    unknown = [f"{method!r} ({at[0]}.method{_more_rows(len(at) - 1)})" for method, at in places.items()]
    if unknown:
        those = "a method" if len(unknown) == 1 else "methods"
        warnings.warn(f"{and_listed(unknown)}: {those} this sfapprox does not know (a newer sfapprox's, or a "
                      f"plugin's not imported here); shown as recorded", UserWarning, stacklevel=stacklevel)


def _more_rows(count: int) -> str:
    return "" if count == 0 else f", and {counted(count, 'more row')}"

