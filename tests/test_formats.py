"""Output formats: one table model rendered as CSV, Markdown, LaTeX, JSON and rich."""

import csv
import io
import json

import pytest

from sfapprox.formats import Column, OutputFormat, Table, fmt_seconds, layout, render_rich


def table(title="t"):
    t = Table(title, [Column("m", "method", "left"), Column("e", "error")])
    t.add({"m": "sf", "e": "1.5"}, best={"e"})
    t.add({"m": "a|b_&", "e": "–"})
    t.notes.append("a note")
    return t


def test_csv_one_header_for_all_tables():
    other = Table("u", [Column("m", "method", "left"), Column("x", "extra")])
    other.add({"m": "tsvd", "x": "3"})
    rows = list(csv.DictReader(io.StringIO(OutputFormat.CSV.render([table(), other], {}))))
    assert [r["table"] for r in rows] == ["t", "t", "u"]
    assert rows[0]["error"] == "1.5" and rows[2]["extra"] == "3" and rows[2]["error"] == ""


def test_markdown_marks_best_and_escapes():
    text = OutputFormat.MARKDOWN.render([table()], {})
    assert "| sf | **1.5** |" in text and "a\\|b_&" in text and "a note" in text


def test_latex_escapes_and_balances():
    text = OutputFormat.LATEX.render([table()], {})
    assert "\\textbf{1.5}" in text and "a|b\\_\\&" in text and "--" in text
    assert text.count("\\begin{tabular}") == text.count("\\end{tabular}") == 1


def test_json_renders_the_data_without_nan():
    assert json.loads(OutputFormat.JSON.render([], {"x": float("nan"), "y": [1.5]})) == {"x": None, "y": [1.5]}


@pytest.mark.parametrize("fmt", list(OutputFormat))
def test_every_format_has_a_suffix_and_renders(fmt):
    assert fmt.suffix.startswith(".") and fmt.render([table()], {"a": 1}).strip()


def test_rich_and_seconds():
    assert len(render_rich([table()])) == 3  # its title, the table and its note
    assert fmt_seconds(0.0312) == "0.03" and fmt_seconds(None) == "–"


# ----------------------------------------------------------------------------- fitting a window
def wide_table(methods: int = 4) -> Table:
    """A comparison-like table: a name column, numbers, optional columns and free text."""
    t = Table("wide", [Column("method", "method", "left"), Column("stored", "stored", priority=60),
                       Column("share", "of budget", priority=10), Column("least", "min budget", priority=20),
                       Column("error", "error"), Column("details", "details", "left", wrap=True, priority=50)])
    for i in range(methods):
        t.add({"method": f"butterfly-hier-{i}", "stored": "1,234,567", "share": "100.0%", "least": "1,234,567",
               "error": "1.234e+05", "details": "M=10/12 b=2 init=identity it=18357 stop=time_limit " * 2})
    return t


def test_layout_keeps_everything_when_the_window_is_wide_enough():
    plan = layout(wide_table(), None)
    assert plan.boxed and plan.parts == [[0, 1, 2, 3, 4, 5]] and not plan.hidden


@pytest.mark.parametrize("width", [40, 60, 80, 100, 140])
def test_layout_fits_the_window_without_cutting_names(width):
    t = wide_table()
    plan = layout(t, width)
    for part in plan.parts:
        assert part[0] == 0  # every part repeats the names
        shown = sum(plan.widths[i] for i in part) + 2 * (len(part) - 1)
        assert shown <= width or plan.boxed
    assert plan.widths[0] >= len("butterfly-hier-0")
    # optional columns give way lowest priority first
    order = ["of budget", "min budget", "details", "stored"]
    assert plan.hidden == order[:len(plan.hidden)]


def test_layout_splits_a_table_of_essential_columns_into_parts():
    t = Table("sweep", [Column("budget", "budget")] + [Column(f"m{i}", f"method-{i}") for i in range(13)])
    t.add({"budget": "1,234", **{f"m{i}": "0.1234 (time_limit)" for i in range(13)}})
    plan = layout(t, 80)
    assert len(plan.parts) > 1 and all(p[0] == 0 for p in plan.parts)
    assert sorted({i for p in plan.parts for i in p}) == list(range(14))  # no method vanished
    rendered = render_rich([t], 80)
    assert sum(1 for item in rendered if hasattr(item, "columns")) == len(plan.parts)


def test_rendered_tables_fit_and_name_what_was_left_out():
    from rich.console import Console

    console = Console(width=60, record=True, force_terminal=True)
    for item in render_rich([wide_table()], 60):
        console.print(item)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 60
    assert text.count("butterfly-hier-") == 4 and "left out to fit the window: of budget" in text
