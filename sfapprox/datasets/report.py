"""Reports of batch results: per-category tables with wins per method.

:func:`build_report` groups the records of a ``results.jsonl`` by category
and matrix; the renderers are pure functions from that report to text
(Markdown, CSV, LaTeX), chosen by :class:`ReportFormat`.  The CLI builds
its rich tables from the same :func:`table_cells`.
"""

from __future__ import annotations

import csv
import enum
import io
import math
from dataclasses import dataclass, field
from typing import Any

from .manifest import CATEGORIES

__all__ = [
    "MatrixRow",
    "CategoryTable",
    "Report",
    "build_report",
    "table_cells",
    "render_markdown",
    "render_csv",
    "render_latex",
    "ReportFormat",
]

#: Matrix facts shown as extra columns when present (key -> column title).
INFO_COLUMNS = {"mean_row_entropy": "entropy", "beta": "β"}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits; "–" for missing values."""
    return f"{value:.{digits}g}" if _finite(value) else "–"


@dataclass
class MatrixRow:
    """One matrix: its results by method, reference figures and the winner."""

    name: str
    n: int | None
    results: dict[str, dict[str, Any]]
    reference: dict[str, float]
    info: dict[str, Any]
    winner: str | None


@dataclass
class CategoryTable:
    """All matrices of one category, with wins per method."""

    category: str
    methods: list[str]
    reference_keys: list[str]
    info_keys: list[str]
    rows: list[MatrixRow]
    wins: dict[str, int]


@dataclass
class Report:
    """Tables by category (in :data:`~sfapprox.datasets.manifest.CATEGORIES` order) and the records."""

    records: list[dict[str, Any]]
    methods: list[str]
    tables: list[CategoryTable] = field(default_factory=list)

    def total_wins(self) -> dict[str, int]:
        return {m: sum(t.wins.get(m, 0) for t in self.tables) for m in self.methods}

    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out


def _winner(results: dict[str, dict[str, Any]]) -> str | None:
    scored = [(r["fro_error"], m) for m, r in results.items() if r.get("status") == "ok" and _finite(r.get("fro_error"))]
    return min(scored)[1] if len(scored) >= 2 else None


def _row(name: str, records: list[dict[str, Any]]) -> MatrixRow:
    results = {r["method"]: r for r in records}
    first = records[0]
    reference: dict[str, float] = {}
    info: dict[str, Any] = {}
    n = None
    for r in records:
        reference.update(r.get("reference") or {})
        info.update(r.get("matrix_info") or {})
        n = n if n is not None else r.get("n")
    return MatrixRow(first["matrix"], n, results, reference, info, _winner(results))


def build_report(records: list[dict[str, Any]]) -> Report:
    """Group records (the last one per (matrix, method) wins) into category tables.

    Examples
    --------
    >>> recs = [{"matrix": "a", "category": "network", "method": m, "status": "ok", "fro_error": e, "n": 4}
    ...         for m, e in (("sf", 1.0), ("tsvd", 2.0))]
    >>> build_report(recs).tables[0].wins
    {'sf': 1, 'tsvd': 0}
    """
    latest = {(r["matrix"], r["method"]): r for r in records}
    ordered = list(latest.values())
    methods = list(dict.fromkeys(r["method"] for r in ordered))
    by_category: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in ordered:
        by_category.setdefault(r.get("category") or "other", {}).setdefault(r["matrix"], []).append(r)
    order = [c for c in CATEGORIES if c in by_category] + sorted(c for c in by_category if c not in CATEGORIES)
    report = Report(ordered, methods)
    for category in order:
        rows = [_row(name, recs) for name, recs in by_category[category].items()]
        present = [m for m in methods if any(m in row.results for row in rows)]
        ref_keys = list(dict.fromkeys(k for row in rows for k in row.reference))
        info_keys = [k for k in INFO_COLUMNS if any(k in row.info for row in rows)]
        wins = {m: sum(row.winner == m for row in rows) for m in present}
        report.tables.append(CategoryTable(category, present, ref_keys, info_keys, rows, wins))
    return report


# ---------------------------------------------------------------------------
# cells shared by every renderer
# ---------------------------------------------------------------------------


_SHORT_STATUS = {"not applicable": "n/a", "unavailable": "unavailable", "failed": "failed", "interrupted": "interrupted"}


def _result_cell(record: dict[str, Any] | None) -> str:
    if record is None:
        return ""
    if record.get("status") == "ok":
        return fmt(record.get("fro_error"))
    return _SHORT_STATUS.get(record.get("status"), str(record.get("status")))


def _deviation(record: dict[str, Any] | None, paper: float | None) -> str:
    if record is None or record.get("status") != "ok" or not _finite(record.get("fro_error")) or not _finite(paper) or paper == 0:
        return ""
    return f"{100.0 * (record['fro_error'] - paper) / paper:+.1f}%"


def table_cells(table: CategoryTable) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a category table as strings.

    Columns: matrix, N, one per method (Frobenius error ‖X − X̂‖_F or the
    status), one per reference figure ("paper tsvd"), the deviation from it
    for methods that have one ("Δ tsvd"), matrix facts (entropy), winner.
    """
    compared = [m for m in table.methods if m in table.reference_keys]
    header = ["matrix", "N", *table.methods, *(f"paper {k}" for k in table.reference_keys),
              *(f"Δ {m}" for m in compared), *(INFO_COLUMNS[k] for k in table.info_keys), "winner"]
    rows = []
    for row in table.rows:
        cells = [row.name, str(row.n) if row.n is not None else "–"]
        cells += [_result_cell(row.results.get(m)) for m in table.methods]
        cells += [fmt(row.reference.get(k), 3) if k in row.reference else "" for k in table.reference_keys]
        cells += [_deviation(row.results.get(m), row.reference.get(m)) for m in compared]
        cells += [fmt(row.info.get(k), 3) for k in table.info_keys]
        cells.append(row.winner or "")
        rows.append(cells)
    return header, rows


def wins_line(table: CategoryTable) -> str:
    """``"wins: sf 3, tsvd 1"`` (only matrices with two or more scored methods count)."""
    return "wins: " + ", ".join(f"{m} {table.wins.get(m, 0)}" for m in table.methods)


# ---------------------------------------------------------------------------
# renderers
# ---------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(report: Report) -> str:
    """Markdown: a heading, a table and a wins line per category.

    Examples
    --------
    >>> recs = [{"matrix": "a", "category": "network", "method": "tsvd", "status": "ok",
    ...          "fro_error": 2.7271, "n": 24, "reference": {"tsvd": 2.73}}]
    >>> print(render_markdown(build_report(recs)).splitlines()[6])
    | a | 24 | 2.727 | 2.73 | -0.1% |  |
    """
    lines = ["# Batch report", ""]
    for table in report.tables:
        header, rows = table_cells(table)
        lines += [f"## {table.category}", ""]
        lines.append("| " + " | ".join(map(_md_escape, header)) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines += ["| " + " | ".join(map(_md_escape, cells)) + " |" for cells in rows]
        lines += ["", wins_line(table), ""]
    totals = report.total_wins()
    if totals:
        lines.append("Total " + wins_line(CategoryTable("all", report.methods, [], [], [], totals)))
    return "\n".join(lines).rstrip() + "\n"


CSV_COLUMNS = ["matrix", "category", "method", "status", "n", "nnz", "budget", "fro_error", "rel_error", "seconds",
               "stop_reason", "iterations", "reference", "error"]


def render_csv(report: Report) -> str:
    """CSV: one row per (matrix, method) record, numbers at full precision.

    ``reference`` is ``key=value`` pairs separated by ``;``; ``error`` holds
    the failure message or the not-applicable reason.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in report.records:
        params = r.get("params") or {}
        reference = ";".join(f"{k}={v}" for k, v in (r.get("reference") or {}).items())
        writer.writerow([
            r["matrix"], r.get("category", ""), r["method"], r["status"],
            *("" if r.get(k) is None else r[k] for k in ("n", "nnz", "budget", "fro_error", "rel_error", "seconds")),
            params.get("stop_reason", ""), params.get("iterations", ""), reference,
            r.get("error") or r.get("reason") or "",
        ])
    return buffer.getvalue()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "‖": r"$\|$", "−": "-", "Δ": r"$\Delta$", "β": r"$\beta$", "–": "--"}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (and the few non-ASCII symbols used in headers)."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def render_latex(report: Report) -> str:
    """LaTeX: one booktabs ``table`` per category (needs ``\\usepackage{booktabs}``)."""
    parts = ["% Generated by sfapprox report; needs \\usepackage{booktabs}", ""]
    for table in report.tables:
        header, rows = table_cells(table)
        spec = "l" + "r" * (len(header) - 2) + "l"
        parts += [
            "\\begin{table}[ht]",
            "\\centering",
            f"\\caption{{{latex_escape(table.category)}: Frobenius error $\\|X - \\hat X\\|_F$ ({latex_escape(wins_line(table))})}}",
            f"\\begin{{tabular}}{{{spec}}}",
            "\\toprule",
            " & ".join(latex_escape(h) for h in header) + r" \\",
            "\\midrule",
            *(" & ".join(latex_escape(c) for c in cells) + r" \\" for cells in rows),
            "\\bottomrule",
            "\\end{tabular}",
            "\\end{table}",
            "",
        ]
    return "\n".join(parts)


class ReportFormat(str, enum.Enum):
    """Export formats of ``sfapprox report``; ``render`` dispatches to the pure renderer."""

    MARKDOWN = "markdown"
    CSV = "csv"
    LATEX = "latex"

    def render(self, report: Report) -> str:
        if self is ReportFormat.MARKDOWN:
            return render_markdown(report)
        if self is ReportFormat.CSV:
            return render_csv(report)
        if self is ReportFormat.LATEX:
            return render_latex(report)
        raise AssertionError(self)  # unreachable: every member is handled above
