"""Output formats: one table model rendered as CSV, Markdown, LaTeX, JSON and rich."""

import csv
import io
import json

import pytest

from sfapprox.formats import Column, OutputFormat, Table, fmt_seconds, render_rich


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
    assert len(render_rich([table()])) == 2  # the table and its note
    assert fmt_seconds(0.0312) == "0.03" and fmt_seconds(None) == "–"
