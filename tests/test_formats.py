"""Output formats: one table model rendered as CSV, Markdown, LaTeX, JSON and rich."""

import csv
import io
import json
import re
import unicodedata

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sfapprox.formats import Column, OutputFormat, Table, _latex_escape, fmt_seconds, layout, render_rich


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


def test_csv_leaves_missing_values_empty():
    """A missing value was written as the table's "–" (a cell without data) or as ``nan`` (a NaN in its data):
    text in a column of numbers, where a reader (pandas.read_csv, R's read.csv) expects an empty cell."""
    t = Table("t", [Column("m", "method", "left"), Column("e", "error"), Column("s", "share")])
    t.add({"m": "sf", "e": "0.5", "s": "–"}, data={"e": float("nan")})
    t.add({"m": "tsvd", "e": "0.25", "s": "50.0%"}, data={"e": 0.25, "s": 50.0, "x": None})
    t.data_titles = {"x": "extra"}
    rows = list(csv.reader(io.StringIO(OutputFormat.CSV.render([t], {}))))
    assert rows == [["method", "error", "share", "extra"], ["sf", "", "", ""], ["tsvd", "0.25", "50.0", ""]]


def test_markdown_marks_best_and_escapes():
    text = OutputFormat.MARKDOWN.render([table()], {})
    assert "| sf | **1.5** |" in text and "a\\|b_&" in text and "a note" in text


def test_latex_escapes_and_balances():
    text = OutputFormat.LATEX.render([table()], {})
    assert "\\textbf{1.5}" in text and "a|b\\_\\&" in text and "--" in text
    assert text.count("\\begin{tabular}") == text.count("\\end{tabular}") == 1


def test_a_long_latex_table_breaks_across_pages():
    """A report's 500 matrices of a category were one tabular, which never breaks: it ran off the page.
    Past LATEX_PAGE_ROWS rows a table is a longtable, its heading repeated on each page."""
    from sfapprox.formats import LATEX_PAGE_ROWS

    long = Table("long", [Column("m", "method", "left"), Column("e", "error")])
    for i in range(LATEX_PAGE_ROWS + 1):
        long.add({"m": f"m{i}", "e": str(i)}, best={"e"} if i == 3 else None)
    text = OutputFormat.LATEX.render([table(), long], {})
    assert text.count("\\begin{tabular}") == text.count("\\end{tabular}") == 1  # the short one stays a tabular
    assert text.count("\\begin{longtable}{lr}") == text.count("\\end{longtable}") == 1
    body = text.split("\\begin{longtable}")[1]
    assert body.index("method & error") < body.index("\\endhead") < body.index("m0 &") and "\\textbf{3}" in body
    assert body.count(" \\\\\n") == LATEX_PAGE_ROWS + 2  # the heading and every row


def test_latex_is_ascii_for_every_method_formula():
    # pdflatex without a Unicode setup stops at "·", "₂", "ᵀ", "≥", "ö", ...: the methods' table
    # (``sfapprox methods --latex -``) must come out as plain ASCII LaTeX
    from sfapprox.describe import describe_methods

    text = OutputFormat.LATEX.render(describe_methods().tables, {})
    assert text.isascii(), sorted({ch for ch in text if not ch.isascii()})
    assert r"2$\cdot$N$\cdot$log$_2$N" in text and r"C W$^+$ C$^\top$" in text and r"Nystr\"{o}m" in text


def test_latex_is_ascii_for_a_comparison():
    from sfapprox import FitSettings, compare

    rng = np.random.default_rng(0)
    points = rng.standard_normal((24, 3))
    X = points @ points.T + np.eye(24)  # symmetric PSD, so nystrom runs too
    c = compare(X, ["sf", "tsvd", "nystrom", "sparse"], settings=FitSettings(device="cpu", max_iter=20))
    text = OutputFormat.LATEX.render(c.tables(), c.to_dict())
    assert text.isascii(), sorted({ch for ch in text if not ch.isascii()})
    assert text.count("\\begin{tabular}") == text.count("\\end{tabular}") >= 1


@pytest.mark.parametrize("raw, shown", [
    ("‖X − X̂‖ ≥ 0.5 ± µ", r"$\|$X $-$ $\hat X$$\|$ $\geq$ 0.5 $\pm$ $\mu$"),
    ("N′ = 2^⌈log₂N⌉ × √N ≤ 3", r"N$'$ = 2\textasciicircum{}$\lceil$log$_2$N$\rceil$ $\times$ $\surd$N $\leq$ 3"),
    ("a – b … c", r"a -- b \ldots{} c"),
    ("Ω ω Α é", r"$\Omega$ $\omega$ A \'{e}"),
    ("ﬁ", "fi"),
])
def test_latex_maps_non_ascii_symbols(raw, shown):
    assert _latex_escape(raw) == shown


def test_latex_falls_back_to_ascii_for_unmapped_characters():
    # no LaTeX equivalent: the code point, never the character (pdflatex would stop there)
    assert _latex_escape("☃ 😀") == r"\texttt{[U+2603]} \texttt{[U+1F600]}"


def test_json_renders_the_data_without_nan():
    assert json.loads(OutputFormat.JSON.render([], {"x": float("nan"), "y": [1.5]})) == {"x": None, "y": [1.5]}


def test_json_writes_a_name_s_undecodable_bytes_as_strict_utf8_with_the_bytes_beside():
    r"""A name with a byte that is no UTF-8 was written as a lone surrogate (``"bad\udcff.mtx"``), which strict
    JSON readers refuse: it is its escape (as tables show it), its exact bytes beside it."""
    import os

    name = os.fsdecode(b"bad\xff.mtx")
    text = OutputFormat.JSON.render([], {"matrix": {"path": name, "n": 3}, "names": [name], name: 1})
    text.encode("utf-8")  # strict: it raised UnicodeEncodeError on the lone surrogate
    assert "\\udcff" not in text
    data = json.loads(text)
    assert data["matrix"] == {"path": "bad\\xff.mtx", "path_bytes": b"bad\xff.mtx".hex(), "n": 3}
    assert os.fsdecode(bytes.fromhex(data["matrix"]["path_bytes"])) == name  # exact, where it matters
    assert data["names"] == ["bad\\xff.mtx"] and data["bad\\xff.mtx"] == 1
    assert json.loads(OutputFormat.JSON.render([], {"path": "matrice_é.mtx"})) == {"path": "matrice_é.mtx"}


@pytest.mark.parametrize("fmt", list(OutputFormat))
def test_every_format_has_a_suffix_and_renders(fmt):
    assert fmt.suffix.startswith(".") and fmt.render([table()], {"a": 1}).strip()


def test_rich_and_seconds():
    assert len(render_rich([table()])) == 3  # its title, the table and its note
    assert fmt_seconds(0.0312) == "0.03" and fmt_seconds(None) == "–"


def test_a_terminal_shows_the_rows_a_table_names_and_the_files_keep_every_row():
    """A long listing (a model's 10,000 tensors) was drawn whole: 4 s of rich and a summary scrolled away.
    A table names the rows a terminal shows; rich measures and draws those only, the other formats all."""
    from rich.table import Table as RichTable

    t = Table("many", [Column("m", "method", "left"), Column("e", "error")])
    for i in range(300):
        t.add({"m": f"row{i}" + ("-a-much-longer-name" if i == 299 else ""), "e": str(i)}, best={"e"} if i == 7 else None)
    t.notes.append("a note")
    t.terminal_rows, t.terminal_notes = [0, 7], ["listed: 2 of 300"]
    shown = render_rich([t], 80)
    drawn = [item for item in shown if isinstance(item, RichTable)]
    assert len(drawn) == 1 and drawn[0].row_count == 2
    assert drawn[0].columns[0].width == len("method")  # measured on the rows shown, not on row299's long name
    assert [str(item) for item in shown if not isinstance(item, RichTable)][1:] == ["a note", "listed: 2 of 300"]
    assert layout(t, None).widths[0] == len("row299-a-much-longer-name")  # the table itself keeps every row
    assert OutputFormat.CSV.render([t], {}).count("\n") == 301 and "| row299" in OutputFormat.MARKDOWN.render([t], {})
    assert "listed" not in OutputFormat.MARKDOWN.render([t], {})  # a terminal's note only
    # a pipe (capped=False) gets every row, as the files do: its reader may be grep
    piped = render_rich([t], None, capped=False)
    assert [item.row_count for item in piped if isinstance(item, RichTable)] == [300]
    assert "listed: 2 of 300" not in [str(item) for item in piped if not isinstance(item, RichTable)]


@pytest.mark.parametrize("width", range(24, 61))
def test_a_table_s_notes_keep_each_number_beside_its_unit(width):
    """A table's notes were wrapped by rich at any space: at 40 columns "ran past the time limit: rpca 8.73"
    ended a line and "s of 5 s" began the next.  They break as the messages on stderr do (at_spaces)."""
    from rich.console import Console

    t = Table("t", [Column("m", "method", "left")])
    t.add({"m": "sf"})
    said = ("note: ran past the time limit: rpca 8.73 s of 5 s (3.68 s of them outside its fit); "
            "pts3000: not formed (68.7 MiB dense), scored in 0.8 s")
    t.notes.append(said)
    console = Console(width=width, record=True, color_system=None)
    for item in render_rich([t], width)[2:]:
        console.print(item)
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert " ".join(lines) == said, lines
    assert not any(re.search(r"\d$", line) for line in lines[:-1]), lines  # no number left without its unit


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


@pytest.mark.parametrize("width", [20, 24])
def test_a_table_whose_names_cannot_be_whole_is_a_list(width):
    """At 20 columns info's methods table broke every name into four-cell pieces, in each of its parts
    ("sf-s" / "ymme" / "tric"). Where the window cannot hold most rows' names whole beside a column, the table
    is a list, as info's facts are: each name whole on a line of its own, its cells under it as "title: value"
    broken at spaces (none left out, none made a numbered note); at 40 columns it is a table still."""
    from rich.table import Table as RichTable

    t = wide_table()
    t.notes.append("note: a table's own note")
    text = shown([t], width)
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("butterfly-hier-")] == [f"butterfly-hier-{i}:" for i in range(4)]
    flat = " ".join(text.split())
    details = " ".join(t.rows[0]["details"].split())
    for title, value in (("stored", "1,234,567"), ("of budget", "100.0%"), ("min budget", "1,234,567"),
                         ("error", "1.234e+05"), ("details", details)):
        assert flat.count(f"{title}: {value}") == 4, (title, text)
    assert "note: a table's own note" in flat and "(continued)" not in text and "left out" not in text
    assert all(len(line) <= width or len(line.split()) == 1 for line in lines), text
    assert any(isinstance(item, RichTable) for item in render_rich([t], 40))


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
    rows = [line for line in text.splitlines() if line.startswith("butterfly-hier-")]  # (its notes name them too)
    assert len(rows) == 4 and "left out to fit the window: of budget" in text


def shown(tables, width: int) -> str:
    """The text a terminal ``width`` characters wide shows for ``tables``."""
    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), record=True)
    for item in render_rich(tables, width):
        console.print(item)
    return console.export_text()


def columns_shown(table: Table, width: int) -> list[dict[str, str]]:
    """Per part of ``table`` in a (compact) window ``width`` characters wide, the text of each column by
    title: what the lines under the part's rule hold at the column's place, its folded pieces joined."""
    from rich.console import Console
    from rich.table import Table as RichTable

    plan = layout(table, width)
    assert not plan.boxed
    out = []
    for part, item in zip(plan.parts, [i for i in render_rich([table], width) if isinstance(i, RichTable)]):
        console = Console(width=width, file=io.StringIO(), record=True)
        console.print(item)
        lines = console.export_text().splitlines()
        rule = next(n for n, line in enumerate(lines) if set(line.strip()) == {"─"})
        texts, start = {}, 0
        for i in part:
            end = start + plan.widths[i]
            texts[table.columns[i].title] = "".join(line[start:end].strip() for line in lines[rule + 1:])
            start = end + 2  # the compact style's gap
        out.append(texts)
    return out


NUMBERS = ["5.333", "19.27", "0.8177", "1.779e-14", "2.558e-15", "12,345"]


def long_names_table() -> Table:
    """A report's shape: a 40-character name, number columns, a winner; and a long path."""
    t = Table("errors", [Column("m", "matrix", "left"), Column("n", "N"), Column("a", "tsvd"), Column("b", "sparse"),
                         Column("c", "butterfly-hier"), Column("w", "winner", "left"),
                         Column("f", "file", "left")])
    t.add({"m": "a-matrix-name-that-is-forty-characters-x", "n": "12,345", "a": "5.333", "b": "19.27",
           "c": "1.779e-14", "w": "sparse", "f": "suitesparse/mesh1e1_structural_48_48_177.mtx"}, best={"c"})
    t.add({"m": "small", "n": "16", "a": "0.8177", "b": "2.558e-15", "c": "–", "w": "tsvd", "f": "pajek/world_trade.paj"})
    return t


@pytest.mark.parametrize("width", [20, 22, 30, 40, 46, 80])
def test_narrow_windows_never_cut_a_number_and_fold_long_names(width):
    """At 46 columns a 40-character name left the numbers beside it 4 wide: 5.333 showed as '5.33', 19.27
    as '19.2', 0.8177 as '0.81', 'sparse' as 'spar'/'se'; at 22, 1.779e-14 as '1.779e'; at 40 a path as
    'pajek/world_trade.p'.  Now the name or path folds onto more lines and every number is whole."""
    t = long_names_table()
    text = shown([t], width)
    lines = text.splitlines()
    if width == 20:  # both names in pieces of 4 cells: a list (test_a_table_whose_names_cannot_be_whole_is_a_list)
        assert "small:" in lines and "a-matrix-name-that-is-forty-characters-x:" in "".join(text.split()), text
        flat = " ".join(text.split())
        assert all(f": {number}" in flat for number in NUMBERS) and "winner: sparse" in flat, text
        assert "suitesparse/mesh1e1_structural_48_48_177.mtx" in "".join(text.split()), text  # (folded by rich)
        return
    assert max(len(line) for line in lines) <= width
    tokens = {token for line in lines for token in line.split()}
    for number in NUMBERS + ["sparse", "butterfly-hier", "winner"]:
        assert number in tokens, f"{number!r} cut at {width} columns:\n{text}"
    parts = columns_shown(t, width)
    assert {p["matrix"] for p in parts} == {"a-matrix-name-that-is-forty-characters-xsmall"}, text
    # folded onto more lines, every character kept
    assert [p["file"] for p in parts if "file" in p] == ["suitesparse/mesh1e1_structural_48_48_177.mtxpajek/world_trade.paj"]


def test_a_column_that_folds_is_a_text_column():
    plan = layout(long_names_table(), 46)
    widest = {0: 40, 6: 44}  # the name and the path, wider than the window allows
    numbers = [1, 2, 3, 4]
    assert all(plan.widths[i] < widest[i] for i in widest)
    assert [plan.widths[i] for i in numbers] == [6, 6, 9, 14]  # whole: their widest cell (or title)


def test_a_narrow_window_still_says_why_a_comparison_row_has_no_result():
    """At 50 columns status and details gave way: a row of dashes and no reason anywhere (a sweep said it
    in notes)."""
    import numpy as np

    from sfapprox import compare

    ring = np.roll(np.eye(30), 1, axis=1) + np.roll(np.eye(30), -1, axis=1)
    tables = compare(ring, "nystrom,tsvd", budget=400).tables()
    narrow, wide = " ".join(shown(tables, 50).split()), " ".join(shown(tables, 400).split())
    assert "left out to fit the window" in narrow and "details" in narrow
    assert "nystrom: not applicable: X is not positive semi-definite" in narrow
    assert "nystrom: not applicable:" not in wide  # said once, in its row, where the column shows
    t = Table("t", [Column("a", "a"), Column("why", "why", priority=1)])
    t.add({"a": "1", "why": "9" * 40})  # a number: never folded, so left out at 30 columns
    t.hidden_notes["why"] = ["a: because"]
    assert "a: because" in shown([t], 30) and "a: because" not in shown([t], 300)


def test_html_escapes_every_text_and_shows_the_rows_a_terminal_shows():
    """A notebook's view of a table: titles, headings, cells and notes are text (a name is a file's:
    ``<b>x&y</b>`` is no markup), a line break a <br>, a long listing the rows a terminal shows."""
    from sfapprox.formats import render_html

    t = Table("<i>t</i>", [Column("name", "<name>", "left"), Column("n", "n")])
    for i in range(5):
        t.add({"name": f"a<{i}>\nb", "n": str(i)}, best={"n"} if i == 1 else None)
    t.notes.append("note & <more>")
    t.terminal_rows, t.terminal_notes = [0, 1], ["listed: 2 of 5 & more"]
    html = render_html([t], facts=[("<k>", "v&")])
    assert "<i>t</i>" not in html and "<p><i>&lt;i&gt;t&lt;/i&gt;</i></p>" in html
    assert "&lt;name&gt;" in html and "a&lt;0&gt;<br>b" in html and "a&lt;2&gt;" not in html
    assert '<td style="text-align: right"><b>1</b></td>' in html
    assert "note &amp; &lt;more&gt;<br>listed: 2 of 5 &amp; more" in html
    assert '<th style="text-align: left">&lt;k&gt;</th><td style="text-align: left">v&amp;</td>' in html


def test_a_frame_of_several_tables_is_their_csv():
    """One header for all (the union of the titles), the title in a leading "table" column, a value a
    table lacks missing: as render_csv writes them."""
    pytest.importorskip("pandas")
    from _frames import assert_frame_is_the_csv

    from sfapprox.formats import render_frame

    a = Table("a", [Column("x", "x"), Column("y", "y")])
    a.add({"x": "1,000", "y": "–"}, data={"x": 1000.5})
    b = Table("b", [Column("x", "x"), Column("z", "z", "left")])
    b.add({"x": "2", "z": "text"}, data={"x": 2})
    frame = render_frame([a, b])
    assert list(frame.columns) == ["table", "x", "y", "z"] and frame["x"].tolist() == [1000.5, 2]
    assert frame["table"].tolist() == ["a", "b"] and frame["z"].tolist()[1] == "text"
    assert_frame_is_the_csv(frame, [a, b])


@pytest.mark.parametrize("raw, spelled", [("offsets {0} ∪ {b^k < N}", "offsets {0} U {b^k < N}"),
                                          ("✓ present, ✗ missing", "+ present, x missing")])
def test_ascii_spells_the_help_and_datasets_marks(raw, spelled):
    """``--help``'s union and datasets' check marks were "?" on a stream that writes ASCII only."""
    from sfapprox.formats import to_ascii

    assert to_ascii(raw) == spelled


def test_a_names_undecodable_bytes_are_escaped_and_quoted_for_the_shell():
    """A lone surrogate (a byte of a file's name that is no UTF-8) went raw into tables and files: a UTF-8
    file could not hold it (UnicodeEncodeError), and ``shlex.quote`` kept it as ``'\\udcff'``."""
    import os
    import subprocess

    from sfapprox.formats import printable, shell_join

    name = os.fsdecode(b"a b\xff\xfe's.mtx")
    assert printable(name) == "a b\\xff\\xfe's.mtx"
    line = shell_join(["printf", "%s", name, "\x1b[31m"])
    assert line == "printf %s $'a b\\xff\\xfe\\'s.mtx' $'\\x1b[31m'"
    said = subprocess.run(["bash", "-c", line], capture_output=True, check=True).stdout
    assert said == b"a b\xff\xfe's.mtx\x1b[31m"  # the shell reads back the very bytes


@pytest.mark.parametrize("name", ["a\u0085b.mtx", "c\u009bd.mtx", "e\u202ef.mtx", "g\x7fh\\i.mtx"])
def test_a_names_control_characters_are_read_back_by_the_shell_as_the_same_bytes(name):
    """A C1 control (U+0080-U+009F) was quoted as ``$'\\x85'``: bash reads the byte 0x85, where the name
    holds its two UTF-8 bytes, so the suggested command named a file that does not exist."""
    import subprocess

    from sfapprox.formats import shell_join

    said = subprocess.run(["bash", "-c", shell_join(["printf", "%s", name])], capture_output=True, check=True).stdout
    assert said == name.encode()


def test_to_ascii_spells_a_names_undecodable_bytes_as_escapes():
    """An ASCII stream (LC_ALL=C, PYTHONIOENCODING=ascii) showed ``bad\\xff.mtx`` as ``bad?.mtx``."""
    import os

    from sfapprox.formats import to_ascii

    # (its "é" was "e" here: escaped now, as every character of a name, test below)
    assert to_ascii(os.fsdecode(b"bad\xff\xe9t\xc3\xa9.mtx")) == "bad\\xff\\xe9t\\u00e9.mtx"


@pytest.mark.parametrize("names", [("matrice_é.mtx", "matrice_e.mtx"), ("行列.mtx", "列行.mtx"),
                                   ("a×b.mtx", "axb.mtx"), ("Schröder.mtx", "Schroder.mtx")])
def test_to_ascii_keeps_two_names_apart_and_spells_its_own_glyphs(names):
    """An ASCII stream showed ``matrice_é.mtx`` as ``matrice_e.mtx`` (accent dropped), ``行列`` and ``列行`` both
    as ``??``: a name's characters are escapes now (``\\u00e9``), sfapprox's own glyphs still spelled."""
    from sfapprox.formats import ascii_in_context, to_ascii

    shown = [to_ascii(f"{name}: ‖X−X̂‖_F ± 2·N², Nyström") for name in names]
    assert all(text.isascii() for text in shown) and shown[0] != shown[1], shown
    assert all(text.endswith(": ||X-X^||_F +/- 2*N^2, Nystrom") for text in shown), shown
    assert shown[0].split(":")[0].encode().decode("unicode_escape") == names[0]  # read back as the name
    text = f"wrote {names[0]} (‖X−X̂‖)"  # a stream's error handler gets each part it cannot write, in its text
    parts = [(m.start(), m.end()) for m in re.finditer(r"[^\x00-\x7f]+", text)]
    rebuilt, last = "", 0
    for start, end in parts:
        rebuilt += text[last:start] + ascii_in_context(text, start, end)
        last = end
    assert rebuilt + text[last:] == to_ascii(text)


def test_a_free_text_cell_too_long_for_its_column_is_a_numbered_note():
    """A reason of 19 lines in a 16-cell column: the cell says "[1]", the note under the table says it all;
    a cell of a few lines stays in its row, and a window wide enough for the table keeps every cell."""
    from sfapprox.formats import NOTE_LINES

    reason = "graph is not symmetric; Nyström needs a symmetric PSD matrix (a kernel, a covariance) " * 3
    t = Table("t", [Column("method", "method", "left"), Column("error", "error"),
                    Column("details", "details", "left", wrap=True)])
    t.add({"method": "tsvd", "error": "0.1234", "details": "r=14 stop=exact"})
    t.add({"method": "nystrom", "error": "–", "details": reason})
    text = shown([t], 40)
    lines = text.splitlines()
    assert any(re.search(r"nystrom\W+–\W+\[1\]\W*$", line) for line in lines), text  # (boxed now: it fits)
    assert f"[1] nystrom: {' '.join(reason.split())}" in " ".join(text.split())
    assert " ".join(text.split()).count("graph is") == 3, text  # in the note only
    assert "r=14 stop=exact" in text and "[2]" not in text
    assert all(len(line) <= 40 for line in lines)
    assert "[1]" not in shown([t], 400)  # (boxed: nothing wraps)
    assert NOTE_LINES >= 2


def test_a_row_without_a_result_says_its_status_where_only_the_status_column_is_left_out():
    """At 60 columns compare left out the status column and kept details: a row of dashes beside a "[1]"
    note that gave the reason but never the words "not applicable"; the status is said under the table,
    once (where details give way too, its line says it with the reason)."""
    from sfapprox import compare

    ring = np.roll(np.eye(30), 1, axis=1) + np.roll(np.eye(30), -1, axis=1)
    tables = compare(ring, "nystrom,tsvd", budget=400).tables()
    text = " ".join(shown(tables, 60).split())
    assert "status; a wider window" in text and "X is not positive semi-definite" in text, text
    assert "nystrom: not applicable" in text, text
    narrow = " ".join(shown(tables, 50).split())
    assert narrow.count("nystrom: not applicable") == 1, narrow
    t = Table("t", [Column("a", "a", "left"), Column("s", "status", "left", priority=1),
                    Column("why", "why", priority=2)])
    t.add({"a": "x", "s": "failed", "why": "9" * 40})
    t.hidden_notes.update(s=["x: failed"], why=["x: failed: out of memory"])
    assert "x: failed" in shown([t], 45) and "x: failed: out" not in shown([t], 45)
    both = shown([t], 20)
    assert both.count("x: failed") == 1 and "x: failed: out of memory" in " ".join(both.split()), both


def test_json_of_plain_values_loads_no_numpy():
    # `sfapprox methods --json -` printed a fixed table after 0.8 s of importing numpy to find no numpy value in it
    import subprocess
    import sys

    code = ("import sys\nfrom pathlib import Path\nfrom sfapprox.formats import render_json\n"
            "print(render_json({'a': float('nan'), 'p': Path('x'), 't': (1, 2.5), 3: True}), end='')\n"
            "print('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    *shown, loaded = done.stdout.splitlines()
    assert json.loads("\n".join(shown)) == {"a": None, "p": "x", "t": [1, 2.5], "3": True}
    assert loaded == "False", done.stderr


def test_json_of_numpy_values_is_plain():
    from sfapprox.formats import jsonable

    got = jsonable({"i": np.int64(3), "f": np.float32(0.5), "n": np.float64("inf"), "a": np.arange(2), "b": np.bool_(1)})
    assert got == {"i": 3, "f": 0.5, "n": None, "a": [0, 1], "b": True}
    assert [type(v) for v in got.values()] == [int, float, type(None), list, bool]


def test_to_ascii_spells_the_batch_reports_beta_column():
    from sfapprox.formats import to_ascii

    assert to_ascii("β tsvd") == "beta tsvd"


def test_suggested_commands_are_quoted_for_cmd_and_powershell_on_windows(monkeypatch):
    # neither reads '...' as POSIX shells do (cmd passed the quotes on as part of the name), nor $'...'
    import sys

    from sfapprox.formats import shell_join, shell_quote

    monkeypatch.setattr(sys, "platform", "win32")
    assert shell_join(["sfapprox", "compare", r"C:\my data\a b.mtx", "--with", r"D:\fits\a.sf.h5"]) == \
        r'sfapprox compare "C:\my data\a b.mtx" --with D:\fits\a.sf.h5'
    assert shell_quote("matrice_é.mtx", ascii=True) == '"matrice_é.mtx"'
    assert shell_quote("it's") == '"it\'s"' and shell_quote("") == '""'


@pytest.mark.parametrize("name", ["matrice_é.mtx", "a'é b.mtx", "é\x1b[31m.mtx", "x\u0085é\\.mtx", "行列 \u202e.mtx",
                                  "bad\udcffé.mtx", "plain.mtx"])
def test_a_command_in_a_message_is_requoted_for_an_ascii_stream_as_bash_reads_it_back(name):
    r"""A command in a message (``sfapprox report 'runs_é'``) was spelled for an ASCII stream as any text is:
    ``'runs_\u00e9'``, a folder no shell finds.  :func:`ascii_commands` writes its words as bytes, and bash in
    the C locale reads back the name; the text around it is left to :func:`to_ascii`."""
    import os
    import subprocess

    from sfapprox.formats import ascii_commands, shell_command, to_ascii

    message = f"{name}: see `{shell_command('report', name, '--json', 'r é.json')}` (or sfapprox does 'é')"
    for shown in (ascii_commands(message), to_ascii(message)):
        command = shown.split("`")[1]
        assert command.isascii(), shown
        said = subprocess.run(["bash", "-c", command.replace("sfapprox", "printf '%s\\0'", 1)], capture_output=True,
                              check=True, env={**os.environ, "LC_ALL": "C"}).stdout
        assert said.split(b"\0")[:-1] == [b"report", os.fsencode(name), b"--json", "r é.json".encode()]
    # not a command: left as it is, then spelled as a name's characters are
    assert ascii_commands(message).endswith("(or sfapprox does 'é')")
    assert to_ascii(message).endswith("(or sfapprox does '\\u00e9')")


def test_the_commands_ascii_commands_knows_are_the_clis():
    """:func:`ascii_commands` re-quotes the words after ``sfapprox`` and one of the CLI's commands only:
    a command added to the CLI and not to the list is left spelled as text on an ASCII stream."""
    import typer

    from sfapprox.cli import app
    from sfapprox.formats import CLI_COMMANDS

    assert sorted(typer.main.get_command(app).commands) == sorted(CLI_COMMANDS)


def test_windows_quoting_keeps_powershell_from_splitting_and_a_trailing_backslash_from_eating_the_quote(monkeypatch):
    # PowerShell reads an unquoted a,b.mtx as an array (two arguments) and @x as splatting; the C runtime reads
    # "C:\my runs\" as ending in a literal quote
    import sys

    from sfapprox.formats import shell_quote

    monkeypatch.setattr(sys, "platform", "win32")
    assert shell_quote("a,b.mtx") == '"a,b.mtx"' and shell_quote("@x.mtx") == '"@x.mtx"'
    assert shell_quote("C:\\my runs\\") == '"C:\\my runs\\\\"'
    assert shell_quote('say \\"hi"') == '"say \\\\""hi"""'


def _cmd_names(line: str) -> list[str]:
    """The variable names an interactive cmd.exe looks up in ``line``: each text between a ``%`` and the
    next (a name it does not know is left as typed, and the scan goes on from the closing ``%``)."""
    return re.findall(r"(?=%([^%]*)%)", line)


def _cmd_unquoted(line: str) -> str:
    """What cmd.exe reads outside double quotes in ``line``, where its special characters act (``cmd /?``:
    they "require quotes"): each ``"`` opens or closes its quoting (a backslash means nothing to it)."""
    return "".join(line.split('"')[::2])


def _crt_argv(line: str) -> list[str]:
    """The arguments the C runtime (every program's argv on Windows, Python's too) reads from ``line``."""
    args, word, quoted, i, started = [], "", False, 0, False
    while i < len(line):
        slashes = len(line[i:]) - len(line[i:].lstrip("\\"))
        if slashes and line[i + slashes:i + slashes + 1] == '"':  # 2n backslashes + " : n and a quote's role
            word += "\\" * (slashes // 2)
            i += slashes
            if slashes % 2:
                word, i = word + '"', i + 1
            continue
        char = line[i]
        if slashes:
            word, i, started = word + "\\" * slashes, i + slashes, True
        elif char == '"':
            if quoted and line[i + 1:i + 2] == '"':  # "" inside quotes: a literal quote
                word, i = word + '"', i + 1
            else:
                quoted = not quoted
            i, started = i + 1, True
        elif char in " \t" and not quoted:
            if started:
                args.append(word)
            word, i, started = "", i + 1, False
        else:
            word, i, started = word + char, i + 1, True
    return args + [word] if started else args


@pytest.mark.parametrize("word", ["a%PATH%b.mtx", "%USERNAME%.json", r"C:\my runs\%CD%\x y.mtx", "100%", "%",
                                  "a%%b", r"C:\runs\%X%\\", "r%1 %2.mtx", 'say "%OS%"', "%A%B%C%"])
def test_windows_quoting_leaves_cmd_no_variable_to_expand(monkeypatch, word):
    r"""cmd.exe expands %NAME% inside double quotes too ("C:\my runs\%CD%.mtx" named the current folder): each
    name it can look up in the quoted words now starts with '"', which no variable's does, and the C runtime
    reads the words back as they were; the word starts unquoted, as PowerShell needs to read it as one."""
    import sys

    from sfapprox.formats import shell_join, shell_quote

    monkeypatch.setattr(sys, "platform", "win32")
    line = shell_join(["sfapprox", "fit", word, "--out", "o%TEMP%.json"])
    assert all(name.startswith('"') for name in _cmd_names(line)), line
    assert _crt_argv(line) == ["sfapprox", "fit", word, "--out", "o%TEMP%.json"]
    assert not shell_quote(word).startswith('"') or shell_quote(word).count('"') == 2


#: PowerShell's quote characters and the escapes a backtick makes (its language specification, sections 2.3.5.2
#: and 2.3.7: https://learn.microsoft.com/powershell/scripting/lang-spec/chapter-02)
_PS_DQ, _PS_SQ = '"\u201c\u201d\u201e', "'\u2018\u2019\u201a\u201b"
_PS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "0": "\0"}


def _ps_variable_start(char: str) -> bool:
    # 2.3.2: $$ $? $^, or a name's first character (Lu Ll Lt Lm Lo Nd, _ , ?); ${ and $( (2.3.5.2)
    return char in "$?^_{(" or unicodedata.category(char) in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nd")


def _ps_expandable(line: str, i: int) -> tuple[str, int]:
    """The value of the double-quoted string opening at ``line[i]`` and the index after it; a variable or a
    sub-expression read is written ``<$>`` (never a word's own value)."""
    value, i = "", i + 1
    while True:
        char = line[i]
        if char == "`":
            value, i = value + _PS_ESCAPES.get(line[i + 1], line[i + 1]), i + 2
        elif char in _PS_DQ:
            if line[i + 1:i + 2] and line[i + 1] in _PS_DQ:  # a doubled quote: one literal
                value, i = value + line[i + 1], i + 2
            else:
                return value, i + 1
        elif char == "$" and line[i + 1] not in _PS_DQ and _ps_variable_start(line[i + 1]):
            # ("dollars": a run of $ right before the closing quote is literal)
            run = len(line[i:]) - len(line[i:].lstrip("$"))
            if line[i + run] in _PS_DQ:
                value, i = value + "$" * run, i + run
            else:
                value, i = value + "<$>", i + 2
        else:
            value, i = value + char, i + 1


def _ps_parameter_opens(line: str, i: int) -> bool:
    """Whether a parameter token opens at ``line[i]``: a dash, then a first-parameter-char (2.3.4)."""
    return line[i] == "-" and bool(line[i + 1:i + 2]) and (
        line[i + 1] in "_?" or unicodedata.category(line[i + 1]) in ("Lu", "Ll", "Lt", "Lm", "Lo"))


def _ps_parameter_end(line: str, i: int) -> int | None:
    """Where the parameter token PowerShell reads at ``line[i]`` ends (its specification, 2.3.4: a dash, a
    first-parameter-char, then parameter-chars, none of ``{}();,|&.[``, a colon or whitespace), or None where
    none starts there (or holds a quote, a backtick or a ``$``: not modelled)."""
    if not _ps_parameter_opens(line, i):
        return None
    end = i + 2
    while end < len(line) and line[end] not in "{}();,|&.[: \t":
        end += 1
    return None if any(char in _PS_DQ + "`$" for char in line[i:end]) else end


def _ps_argv(line: str) -> list[str]:
    """The arguments PowerShell passes a native command typed as ``line`` (argument mode, its specification's
    generic tokens, B.1.7): bare characters, double-quoted strings and escapes join into one word, except that
    a word opening with a quoted string ends with it (``"a"b`` is two arguments to PowerShell), and a word
    opening with a parameter token that a ``.`` ends is two (``-x.mtx``: ``-x`` and ``.mtx``; 2.3.4, and
    PowerShell issue #6291); a parameter that a colon ends is passed joined with what follows."""
    args, i = [], 0
    while i < len(line):
        if line[i] in " \t":
            i += 1
            continue
        end = _ps_parameter_end(line, i)
        if end is not None and line[end:end + 1] == ".":
            args.append(line[i:end])
            i = end
        word, opened_quoted = "", line[i] in _PS_DQ
        while i < len(line) and line[i] not in " \t":
            char = line[i]
            assert char not in "{}();,|&" + _PS_SQ, (line, i)  # (a writing never leaves these bare)
            if char in _PS_DQ:
                value, i = _ps_expandable(line, i)
                word += value
                if opened_quoted:
                    break
            elif char == "`":
                word, i = word + _PS_ESCAPES.get(line[i + 1], line[i + 1]), i + 2
            elif char == "$":
                assert not _ps_variable_start(line[i + 1:i + 2] or " "), (line, i)
                word, i = word + "<$>", i + 1  # (a bare $ is no generic-token-char: never left bare)
            else:
                word, i = word + char, i + 1
        args.append(word)
    return args


def test_the_powershell_model_reads_its_specifications_examples():
    assert _ps_argv('a"b c"d "x"y `$z "$" "a$b" "a$.b" "p$$" "q$(1)" "`$n" "u""v" Test` Data.txt') == \
        ["ab cd", "x", "y", "$z", "$", "a<$>", "a$.b", "p$$", "q<$>1)", "$n", 'u"v', "Test Data.txt"]


@pytest.mark.parametrize("word", ["cost$data.mtx", r"C:\my runs\a $1 b.mtx", "a$$b c.mtx", "x$.mtx", "a$", "price $",
                                  "a$b$c d", "z$_.mtx", "p$é.mtx", "100%$x%.mtx", "a%$PATH%b", "it's $ok.mtx",
                                  "$", "$.mtx", "tab$\u00e9 x", r"\data\run$1.mtx", r"\\srv\share\cost$data.mtx",
                                  r"\\srv\my share\100%x%.mtx", r"\\srv\a$1\b%x%.mtx", r"\a\ $1"])
def test_windows_quoting_is_read_back_alike_by_cmd_and_powershell(monkeypatch, word):
    """PowerShell expands ``$name`` inside double quotes: ``"cost$data.mtx"`` ran with ``cost.mtx`` there.  A
    ``$`` run before a name now ends its quoted piece (PowerShell takes such a ``$`` as itself), the next
    character bare: cmd, the C runtime and PowerShell all read the word back."""
    import sys

    from sfapprox.formats import shell_join

    monkeypatch.setattr(sys, "platform", "win32")
    line = shell_join(["sfapprox", "fit", word, "--out", "o.json"])
    assert _crt_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"], line
    assert all(name.startswith('"') for name in _cmd_names(line)), line
    assert _ps_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"], line


def _windows_plain_char(char: str) -> bool:
    # what cmd, PowerShell and the C runtime all take unquoted (a Windows path's characters)
    return char.isascii() and (char.isalnum() or char in "_+=:./\\-")


def _claims_a_common_spelling(word: str) -> bool:
    """Whether :func:`~sfapprox._shell._windows_quote`'s docstring claims ``word`` is read back alike by cmd,
    PowerShell and the C runtime: all but a backtick, a typographic double quote, a ``$`` before ``(``, ``{``
    or ``^``, a run of ``$`` before a character that cannot stand bare, and a ``$`` before a name or a ``%``
    in a word whose first character after any backslashes needs quotes (cmd's ``!`` and the controls aside)."""
    lead = word.lstrip("\\")[:1]
    pieces = "%" in word or re.search(r"\$[\w?$:]", word)
    return not (re.search("[`\u201c\u201d\u201e]|\\$[({^]|\\$\\$+[^\\w?:%]", word)
                or pieces and not (lead and _windows_plain_char(lead)))


def _backslashes_doubled_or_not(word: str) -> re.Pattern:
    """``word``, its backslashes before a ``"``, a ``%`` or the end as they are or doubled: PowerShell reads
    those in a quoted piece doubled (for the C runtime), a documented difference."""
    def run(m: re.Match) -> str:
        return f"(?:{re.escape(m.group())}|{re.escape(m.group() * 2)})"
    parts = re.split(r'(\\+(?=["%]|$))', word)
    return re.compile("".join(run(re.match(r".*", part)) if i % 2 else re.escape(part)
                              for i, part in enumerate(parts)), re.DOTALL)


@settings(max_examples=300, deadline=None)
@given(word=st.text(alphabet='ab1_\\$% "-.:é', max_size=8))
def test_windows_quoting_reads_back_path_like_words(word):
    """Where the docstring claims a common spelling, the C runtime reads ``word`` back exactly, cmd finds no
    variable to expand, and PowerShell reads it back (backslashes before a quote or a ``%`` maybe doubled):
    a rooted ``\\data\\run$1.mtx`` was written ``\\"data\\run$"1".mtx"``, whose ``\\"`` the C runtime reads
    as a quote, the quoting then open over the options after it."""
    from sfapprox._shell import _windows_quote

    assume(_claims_a_common_spelling(word))
    line = "sfapprox fit " + _windows_quote(word) + " --out o.json"
    assert _crt_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"], line
    assert all(name.startswith('"') for name in _cmd_names(line)), line
    ps = _ps_argv(line)
    assert ps[:2] == ["sfapprox", "fit"] and ps[3:] == ["--out", "o.json"], line
    assert _backslashes_doubled_or_not(word).fullmatch(ps[2]), line


class _SliceCounted(str):
    """A string that counts the characters its slices copy."""
    copied = 0

    def __getitem__(self, key):
        got = str.__getitem__(self, key)
        if isinstance(key, slice):
            type(self).copied += len(got)
        return got


def test_windows_quoting_reads_a_long_word_in_linear_work():
    """:func:`_both_quoted` measured each ``$`` run on ``text[i:]``, a copy of the rest at every character:
    a 32,000-character path took a second.  The characters its slices copy now stay within a few per
    character, and the long word still reads back."""
    from sfapprox._shell import _both_quoted, _windows_quote

    word = "a$$b c$1.mtx\\" * 400 + "z"
    _SliceCounted.copied = 0
    quoted = _both_quoted(_SliceCounted(word))
    assert _SliceCounted.copied <= 2 * len(word)
    assert quoted == _both_quoted(word)
    line = "sfapprox fit " + _windows_quote(word) + " --out o.json"
    assert _crt_argv(line) == _ps_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"]


@pytest.mark.parametrize("word", ["$RECYCLE.BIN", "a`b.mtx", "a $(x).mtx", "a${b}.mtx", "say \u201chi\u201d.mtx",
                                  "é$x.mtx", "r$^.mtx", "run$$.mtx", "a$$ b.mtx", r"\$1 x.mtx"])
def test_windows_words_without_a_common_spelling_are_written_for_powershell(monkeypatch, word):
    """No writing reads the same in both shells (a word opening with a quoted string is two words to
    PowerShell; cmd has no escape but ``^`` outside quotes): PowerShell's, where the character is special.
    Each is one the docstring lists (the read-back test's claim leaves it out); what cmd and the C runtime
    read is not asserted: a common spelling found for one would be no failure."""
    import sys

    from sfapprox.formats import shell_quote

    monkeypatch.setattr(sys, "platform", "win32")
    assert not _claims_a_common_spelling(word)
    assert _ps_argv(shell_quote(word)) == [word]


def test_the_powershell_model_reads_a_parameter_token_as_its_specification_does():
    # 2.3.4: a parameter's name ends at a "." (issue #6291's -foo=bar.baz) or a colon; "-" and a digit is none
    assert _ps_argv('-foo=bar.baz -a:b.c -1.5 "-q.r" -_x.y') == ["-foo=bar", ".baz", "-a:b.c", "-1.5", "-q.r", "-_x", ".y"]


@pytest.mark.parametrize("word", ['say "hi"', 'a "&" b.mtx', '"quoted".mtx', 'x"', '"', 'a"b$c d', 'o"k|x"',
                                  '100%"x"%.mtx', 'a"%PATH%"'])
def test_a_double_quote_in_a_word_is_read_back_alike_by_cmd_and_powershell(monkeypatch, word):
    r"""A ``"`` was written ``\"``: PowerShell read ``"say \"hi\""`` as the words ``say \`` and ``hi\``, and
    cmd read what followed the ``\"`` unquoted (``"a \"&\" b"`` ran ``" b"`` as a second command).  Written
    ``""``, both read one ``"`` inside the quotes (the C runtime too), and PowerShell 7.3+ passes it on."""
    import sys

    from sfapprox.formats import shell_join

    monkeypatch.setattr(sys, "platform", "win32")
    line = shell_join(["sfapprox", "fit", word, "--out", "o.json"])
    assert _crt_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"], line
    assert _ps_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"], line
    assert not set(_cmd_unquoted(line)) & set("&|<>^()"), line
    assert all(name.startswith('"') for name in _cmd_names(line)), line


@pytest.mark.parametrize("word", ["-x.mtx", "--out=a.json", "-a.b%X%", "-1.5", r"-C:\runs\a.mtx", "-x%A%.mtx",
                                  "-%A%.mtx", "-_%A%b.c"])
def test_a_word_opening_with_a_dash_is_not_split_by_powershell(monkeypatch, word):
    """PowerShell reads an unquoted ``-x.mtx`` as a parameter whose name ends at the ``.`` and passed a native
    program ``-x`` and ``.mtx``; such a word is now quoted where it holds a ``.``, and one without stays bare.
    With a ``%`` too: ``-x%A%.mtx`` was written ``-x%"A"%".mtx"``, its ``.`` after the ``%`` unseen, and may
    open with a parameter token (a ``%`` or a ``"`` is a parameter-char to the specification; the model
    leaves a token holding a quote unread): no parameter token opens such a word's writing now."""
    import sys

    from sfapprox.formats import shell_join, shell_quote

    monkeypatch.setattr(sys, "platform", "win32")
    line = shell_join(["sfapprox", "fit", word, "--out", "o.json"])
    assert _ps_argv(line) == _crt_argv(line) == ["sfapprox", "fit", word, "--out", "o.json"], line
    assert all(name.startswith('"') for name in _cmd_names(line)), line
    assert not _ps_parameter_opens(shell_quote(word), 0), shell_quote(word)
    assert shell_quote("--delimiter") == "--delimiter" and shell_quote("-a:b") == "-a:b"


def test_the_crt_model_reads_quotes_as_the_c_runtime_does():
    assert _crt_argv(r'a "b c" d\"e "f\\" g""h "x""y"') == ["a", "b c", 'd"e', "f\\", "gh", 'x"y']


def test_limit_text_writes_long_limits_whole():
    from sfapprox.formats import limit_text

    assert [limit_text(t) for t in (0.5, 10.9578, 99.4, 1200.0)] == ["0.5", "11", "99.4", "1,200"]


def test_shapes_are_written_as_the_messages_write_a_matrix():
    """A shape in a message was a tuple, ``(60025, 60025)``, or ``60025 x 60025``, where every other message
    writes a matrix as ``60,025 x 60,025``."""
    from sfapprox.formats import shape_text

    assert shape_text((60025, 60025)) == "60,025 x 60,025"
    assert shape_text(np.zeros((3, 1200, 2)).shape) == "3 x 1,200 x 2"
    assert shape_text([4096]) == "4,096" and shape_text(()) == "scalar"


def test_counts_keep_the_digits_that_were_asked():
    """A count is written out with separators; one beyond a float's exact integers (read from ``1e30``) keeps
    three significant digits: its 31 digits were the float's, not the user's."""
    from sfapprox.formats import count_text

    assert count_text(1_230_000) == "1,230,000" and count_text(2**53 - 1) == f"{2**53 - 1:,}"
    assert count_text(int(1e30)) == "1e+30" and count_text(0) == "0"


def test_shape_phrase_says_a_scalar_where_shape_text_has_no_dimensions():
    from sfapprox.formats import shape_phrase

    assert shape_phrase((60025, 60025)) == "shape 60,025 x 60,025"
    assert shape_phrase((3,)) == "shape 3" and shape_phrase(()) == "a scalar"
