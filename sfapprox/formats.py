"""Tables in every output format: one table model, one renderer per format.

``compare``, ``sweep``, ``info`` and ``report`` each describe their output as
:class:`Table` objects (already formatted cells) plus a JSON-ready dict; the
:class:`OutputFormat` enum turns them into text (CSV, Markdown, LaTeX, JSON)
or into rich tables for a terminal.  So every command offers the same
outputs, and a new format is one new renderer here.  Formatters are pure:
they return strings; the CLI decides where they go.
"""

from __future__ import annotations

import csv
import enum
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Column", "Table", "OutputFormat", "fmt_number", "fmt_seconds", "jsonable"]


@dataclass(frozen=True)
class Column:
    """A column: its key in the rows, its title, its alignment."""

    key: str
    title: str
    align: str = "right"


@dataclass
class Table:
    """A titled table of formatted cells.

    Attributes
    ----------
    title : str
    columns : list of Column
    rows : list of dict
        Cell text by column key (missing keys render as "–").
    best : list of set of str
        Per row, the column keys to emphasise (the winner).
    notes : list of str
        Lines printed under the table (not part of CSV).
    """

    title: str
    columns: list[Column]
    rows: list[dict[str, str]] = field(default_factory=list)
    best: list[set[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: dict[str, str], best: set[str] | None = None) -> None:
        self.rows.append(row)
        self.best.append(best or set())

    def cells(self) -> list[list[str]]:
        return [[row.get(c.key, "–") for c in self.columns] for row in self.rows]


def jsonable(value: Any) -> Any:
    """Plain JSON types; non-finite floats become None (JSON has no NaN)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def fmt_number(value: float | None, digits: int = 4) -> str:
    """``0.08742`` / ``3.52e+04``; "–" for missing values.

    Examples
    --------
    >>> fmt_number(0.087423), fmt_number(35213.9), fmt_number(None)
    ('0.08742', '3.521e+04', '–')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}g}"


def fmt_seconds(value: float | None) -> str:
    """Seconds in one format everywhere: two decimals (``0.03``, ``12.40``, ``61.02``).

    Examples
    --------
    >>> fmt_seconds(0.0312), fmt_seconds(61.019)
    ('0.03', '61.02')
    """
    return "–" if value is None else f"{value:.2f}"


# ----------------------------------------------------------------------------- renderers
def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "‖": r"$\|$", "−": "-", "Δ": r"$\Delta$", "β": r"$\beta$", "–": "--", "★": r"$\star$",
                  "²": r"$^2$"}


def _latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (and the few non-ASCII symbols used in titles)."""
    text = text.replace("X̂", "\x00")  # a two-code-point symbol, kept whole
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    return out.replace("\x00", r"$\hat X$")


def render_csv(tables: list[Table]) -> str:
    """All tables as one CSV: one header (the union of the tables' columns, by title), with a
    leading ``table`` column when there are several tables; cells a table lacks are empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    several = len(tables) > 1
    titles = list(dict.fromkeys(c.title for t in tables for c in t.columns))
    if not titles:
        return ""
    writer.writerow((["table"] if several else []) + titles)
    for table in tables:
        for cells in table.cells():
            by_title = dict(zip((c.title for c in table.columns), cells))
            writer.writerow(([table.title] if several else []) + [by_title.get(t, "") for t in titles])
    return buffer.getvalue()


def render_markdown(tables: list[Table]) -> str:
    """All tables as Markdown (the winner in bold), each under its title."""
    out = []
    for table in tables:
        out.append(f"### {_md_escape(table.title)}\n")
        out.append("| " + " | ".join(_md_escape(c.title) for c in table.columns) + " |")
        out.append("|" + "|".join("---:" if c.align == "right" else "---" for c in table.columns) + "|")
        for cells, best in zip(table.cells(), table.best):
            shown = [f"**{_md_escape(v)}**" if c.key in best else _md_escape(v) for c, v in zip(table.columns, cells)]
            out.append("| " + " | ".join(shown) + " |")
        out.extend(["", *(f"{_md_escape(n)}  " for n in table.notes), ""] if table.notes else [""])
    return "\n".join(out).rstrip() + "\n"


def render_latex(tables: list[Table]) -> str:
    """All tables as LaTeX ``tabular`` environments (booktabs), the winner in bold."""
    out = []
    for table in tables:
        spec = "".join("r" if c.align == "right" else "l" for c in table.columns)
        out.append(f"% {_latex_escape(table.title)}")
        out.append(f"\\begin{{tabular}}{{{spec}}}\n\\toprule")
        out.append(" & ".join(_latex_escape(c.title) for c in table.columns) + r" \\")
        out.append(r"\midrule")
        for cells, best in zip(table.cells(), table.best):
            shown = [f"\\textbf{{{_latex_escape(v)}}}" if c.key in best else _latex_escape(v)
                     for c, v in zip(table.columns, cells)]
            out.append(" & ".join(shown) + r" \\")
        out.append("\\bottomrule\n\\end{tabular}\n")
    return "\n".join(out)


def render_json(data: Any) -> str:
    return json.dumps(jsonable(data), indent=2) + "\n"


def render_rich(tables: list[Table]) -> list[Any]:
    """Rich tables for a terminal (the winner in bold green), then their notes."""
    from rich.table import Table as RichTable
    from rich.text import Text

    out: list[Any] = []
    for table in tables:
        rich = RichTable(title=table.title, title_justify="left")
        for c in table.columns:
            rich.add_column(c.title, justify=c.align if c.align in ("left", "right", "center") else "left",
                            no_wrap=c.key not in ("details", "reason", "source"), overflow="fold")
        for cells, best in zip(table.cells(), table.best):
            rich.add_row(*[Text(v, style="bold green") if c.key in best else Text(v)
                           for c, v in zip(table.columns, cells)])
        out.append(rich)
        out.extend(Text(n) for n in table.notes)
    return out


class OutputFormat(str, enum.Enum):
    """The output formats every table-producing command offers."""

    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"
    LATEX = "latex"

    @property
    def suffix(self) -> str:
        return {"json": ".json", "csv": ".csv", "markdown": ".md", "latex": ".tex"}[self.value]

    def render(self, tables: list[Table], data: Any) -> str:
        """Text of this format: ``data`` for JSON, ``tables`` for the others."""
        if self is OutputFormat.JSON:
            return render_json(data)
        if self is OutputFormat.CSV:
            return render_csv(tables)
        if self is OutputFormat.MARKDOWN:
            return render_markdown(tables)
        if self is OutputFormat.LATEX:
            return render_latex(tables)
        raise AssertionError(f"unhandled format {self}")  # pragma: no cover - every member is handled
