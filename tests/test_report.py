"""Reports: per-category tables, wins, and the Markdown / CSV / LaTeX renderers and the CLI."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from sfapprox.datasets.report import build_report, table_cells
from sfapprox.formats import OutputFormat


def rec(matrix, method, status="ok", fro=None, category="network", n=24, **extra):
    r = {"matrix": matrix, "category": category, "method": method, "status": status, "fro_error": fro, "n": n,
         "nnz": 100, "budget": 120, "rel_error": None if fro is None else fro / 10, "seconds": 0.5, "params": {},
         "reference": {}, "matrix_info": {}, "error": None, "reason": None}
    r.update(extra)
    return r


PAPER = {"protocol": "paper", "budget": "sf"}
RECORDS = [
    rec("strike", "sf", fro=1.1, reference={"tsvd": 2.73, "sf": 1.04}, params={"stop_reason": "max_iter", "iterations": 300},
        settings=PAPER),
    rec("strike", "tsvd", fro=2.727, reference={"tsvd": 2.73, "sf": 1.04}, settings=PAPER),
    rec("sawmill", "sf", fro=3.5),
    rec("sawmill", "tsvd", fro=3.236),
    rec("gone_1", "sf", status="unavailable", n=None, error="m.toml: entry 'gone_1': file 'x' not found; put it at DATA_DIR/x"),
    rec("gone_1", "tsvd", status="unavailable", n=None, error="same"),
    rec("att", "sf", fro=0.9, category="attention", n=128, matrix_info={"mean_row_entropy": 2.8226, "beta": 2.0}),
    rec("att", "tsvd", fro=1.04, category="attention", n=128, matrix_info={"mean_row_entropy": 2.8226, "beta": 2.0}),
    rec("neg", "nmf", status="not applicable", category="attention", n=128, reason="negative entries"),
]


def test_tables_by_category_with_wins():
    report = build_report(RECORDS)
    assert [t.category for t in report.tables_by_category] == ["network", "attention"]
    network, attention = report.tables_by_category
    assert network.wins == {"sf": 1, "tsvd": 1}
    assert [r.winner for r in network.rows] == ["sf", "tsvd"]  # gone_1 ran nothing: no row
    assert [(u.name, u.category, u.missing) for u in report.unavailable] == [("gone_1", "network", True)]
    # nmf ran on no matrix beside another (not applicable on 'neg'): it lost nothing, so it is not counted
    assert attention.wins == {"sf": 1, "tsvd": 0}
    assert report.total_wins() == {"sf": 2, "tsvd": 1}
    assert report.statuses() == {"ok": 6, "unavailable": 2, "not applicable": 1}


def test_matrices_that_ran_nothing_are_one_line_not_rows():
    from sfapprox.datasets.report import unavailable_line

    def gone(name, reason="file missing", data_dir="data", error="m.toml: entry: file 'x' not found; put it at ..."):
        return [rec(name, m, status="unavailable", n=None, reason=reason, error=error,
                    matrix_info={"manifest": "m.toml", "data_dir": data_dir}) for m in ("sf", "tsvd")]

    records = [*(r for i in range(10) for r in gone(f"g{i}")), *gone("bad", reason="checksum mismatch", error="hash"),
               rec("half", "sf", fro=1.0), rec("half", "tsvd", status="unavailable", error="went away")]
    report = build_report(records)
    assert [row.name for t in report.tables_by_category for row in t.rows] == ["half"]  # it ran something: a row
    assert [u.name for u in report.unavailable] == [*(f"g{i}" for i in range(10)), "bad"]
    assert unavailable_line(report.unavailable) == (
        "10 entries unavailable (files not in data): g0, g1, g2, g3, g4, g5, g6, g7 and 2 more — "
        "`sfapprox datasets list m.toml --data-dir data -v` says where to get each")
    assert unavailable_line(build_report(gone("bad", reason="checksum mismatch")).unavailable) is None
    several = build_report([*gone("a", data_dir="d1"), *gone("b", data_dir="d2")]).unavailable
    assert unavailable_line(several).endswith("(files not found): a, b — `sfapprox datasets list m.toml --data-dir DIR -v` "
                                              "says where to get each")
    # a path as the shell reads it back: "my data" split in two where the command was pasted
    spaced = build_report([rec("c", "sf", status="unavailable", reason="file missing", n=None, error="gone",
                               matrix_info={"manifest": "my list.toml", "data_dir": "my data"})]).unavailable
    assert "`sfapprox datasets list 'my list.toml' --data-dir 'my data' -v`" in unavailable_line(spaced)
    old = build_report(RECORDS).unavailable  # lines written before reason and matrix_info said more
    assert unavailable_line(old) == "1 entry unavailable (files not found): gone_1 — `sfapprox datasets list MANIFEST -v` says where to get each"


def test_last_record_of_a_pair_wins():
    report = build_report([rec("a", "sf", status="failed"), rec("a", "sf", fro=1.0), rec("a", "tsvd", fro=2.0)])
    assert report.tables_by_category[0].rows[0].winner == "sf" and len(report.records) == 2


def test_rows_and_records_follow_the_entries_order_not_the_finishing_order():
    # --jobs 2 (or a cluster) finishes a small matrix first: its lines come first in results.jsonl, and the
    # rows, the CSV and report.json followed, so the same batch wrote other reports from run to run
    finished = [rec("small", "sf", fro=1.0, position=1), rec("small", "tsvd", fro=2.0, position=1),
                rec("unplaced", "sf", fro=1.0), rec("large", "sf", fro=3.0, position=0),
                rec("large", "tsvd", fro=4.0, position=0)]
    report = build_report(finished)
    assert [row.name for row in report.tables_by_category[0].rows] == ["large", "small", "unplaced"]
    assert [(r["matrix"], r["method"]) for r in report.records] == [
        ("large", "sf"), ("large", "tsvd"), ("small", "sf"), ("small", "tsvd"), ("unplaced", "sf")]
    assert build_report(list(reversed(finished[:2])) + finished[3:]).tables_by_category[0].rows[0].name == "large"


def test_cells_show_errors_statuses_reference_and_deviation():
    header, rows = table_cells(build_report(RECORDS).tables_by_category[0])
    assert header == ["matrix", "N", "sf", "tsvd", "paper tsvd", "paper sf", "Δ sf", "Δ tsvd", "winner"]
    assert rows[0] == ["strike", "24", "1.1", "2.727", "2.73", "1.04", "+5.8%", "-0.1%", "sf"]
    assert len(rows) == 2  # gone_1, unavailable for every method, is no row of "unavailable" cells
    header, rows = table_cells(build_report(RECORDS).tables_by_category[1])
    assert header == ["matrix", "N", "sf", "tsvd", "nmf", "entropy", "β", "winner"]
    assert rows[1][4] == "n/a" and rows[0][5:7] == ["2.82", "2"]


def test_published_figures_only_where_the_settings_match():
    # Default protocol: TSVD took the largest rank that fits SF's budget, not the paper's rank,
    # so the paper's TSVD figure is no yardstick; SF at budget "sf" is the paper's structure.
    default = {"protocol": "default", "budget": "sf"}
    recs = [rec("strike", m, fro=e, reference={"tsvd": 2.73, "sf": 1.04}, settings=default, budget_spec="sf")
            for m, e in (("sf", 1.1), ("tsvd", 2.6))]
    header, rows = table_cells(build_report(recs).tables_by_category[0])
    assert "paper tsvd" not in header and "Δ tsvd" not in header
    assert "paper sf" in header and "Δ sf" in header


@pytest.mark.parametrize("width", [20, 22, 30, 40, 46, 80])
def test_a_long_matrix_name_folds_in_a_narrow_window_and_numbers_stay_whole(width):
    """A 40-character matrix name at 46 columns cut the numbers beside it: 5.333 showed as '5.33', 19.27 as
    '19.2', 0.8177 as '0.81', and the header 'sparse' folded into 'spar'/'se'."""
    from rich.cells import cell_len
    from rich.console import Console

    from sfapprox.formats import render_rich

    name = "a-matrix-name-that-is-forty-characters-x"
    records = [rec(name, "sf", fro=5.333), rec(name, "tsvd", fro=19.27), rec(name, "sparse", fro=0.8177),
               rec("small", "sf", fro=1.779e-14), rec("small", "tsvd", fro=2.558e-15), rec("small", "sparse", fro=3.0)]
    console = Console(width=width, file=io.StringIO(), record=True)
    for item in render_rich(build_report(records).tables(), width):
        console.print(item)
    text = console.export_text()
    tokens = {token for line in text.splitlines() for token in line.split()}
    for whole in ("5.333", "19.27", "0.8177", "1.779e-14", "2.558e-15", "sparse", "tsvd", "winner"):
        assert whole in tokens, f"{whole!r} cut at {width} columns:\n{text}"
    assert max(cell_len(line) for line in text.splitlines()) <= width


def test_markdown():
    text = OutputFormat.MARKDOWN.render(build_report(RECORDS).tables(), {})
    assert "### network" in text and "### attention" in text
    assert "| strike | 24 | **1.1** | 2.727 | 2.73 | 1.04 | +5.8% | -0.1% | sf |" in text
    assert "wins: sf 1, tsvd 1" in text and "total wins: sf 2, tsvd 1" in text
    assert text.endswith("\n")


def test_markdown_escapes_pipes():
    text = OutputFormat.MARKDOWN.render(build_report([rec("a|b", "sf", fro=1.0)]).tables(), {})
    assert "| a\\|b |" in text


def test_csv_has_every_category_row():
    rows = list(csv.DictReader(io.StringIO(OutputFormat.CSV.render(build_report(RECORDS).tables(), {}))))
    assert [r["matrix"] for r in rows] == ["strike", "sawmill", "att", "neg"]
    assert rows[0]["sf"] == "1.1" and rows[0]["table"].startswith("network")


def test_json_keeps_every_record_at_full_precision():
    data = json.loads(OutputFormat.JSON.render([], build_report(RECORDS).to_dict()))
    assert len(data["records"]) == len(RECORDS) and data["total_wins"] == {"sf": 2, "tsvd": 1}
    assert data["unavailable"] == ["gone_1"] and data["statuses"]["unavailable"] == 2
    assert data["records"][0]["params"] == {"stop_reason": "max_iter", "iterations": 300}


def test_json_records_the_library_versions(tmp_path):
    """The --json help promised "(with the settings and versions)"; a report's JSON had no versions. Now
    report --json and the report.json a batch writes record them (the settings are in each record)."""
    from sfapprox.cli import app
    from sfapprox.results import library_versions

    assert build_report(RECORDS).to_dict()["versions"] == library_versions()
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    shown = CliRunner().invoke(app, ["report", str(out), "--json", "-"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["versions"]["sfapprox"] == library_versions()["sfapprox"]
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8}\n')
    batch = CliRunner().invoke(app, ["batch", str(manifest), "--out-dir", str(tmp_path / "b"), "--methods", "tsvd",
                                     "--quiet"])
    assert batch.exit_code == 0, batch.output
    written = json.loads((tmp_path / "b" / "report.json").read_text())
    assert written["versions"] == library_versions() and written["records"][0]["settings"]["seed"] == 0


def test_latex_tables_are_escaped_and_balanced():
    text = OutputFormat.LATEX.render(build_report(RECORDS).tables(), {})
    assert text.count("\\begin{tabular}") == text.count("\\end{tabular}") == 2
    assert "gone" not in text
    assert "\\toprule" in text and "+5.8\\%" in text and "$\\Delta$ sf" in text


@pytest.mark.parametrize("fmt", list(OutputFormat))
def test_every_format_renders(fmt):
    report = build_report(RECORDS)
    assert fmt.render(report.tables(), report.to_dict()).strip()


def test_empty_report_renders():
    report = build_report([])
    assert report.tables() == [] and report.to_dict()["records"] == []
    assert OutputFormat.CSV.render(report.tables(), {}) == ""


def test_report_command_prints_and_exports(tmp_path):
    from sfapprox.cli import app

    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS) + '{"matrix": "cut', encoding="utf-8")
    md, cs, tex = tmp_path / "r.md", tmp_path / "r.csv", tmp_path / "r.tex"
    result = CliRunner().invoke(app, ["report", str(out), "--markdown", str(md), "--csv", str(cs), "--latex", str(tex)])
    assert result.exit_code == 0, result.output
    assert "network" in result.output and "wins: sf 1, tsvd 1" in result.output
    assert "B of an incomplete last line" in " ".join(result.output.split())
    # the ranked rows, then a table of the matrices no method could run on (gone_1, with why)
    assert md.read_text().startswith("### network") and cs.read_text().count("\n") == 4 + 1 + 1
    assert "1 entry unavailable (files not found): gone_1 — `sfapprox datasets list MANIFEST -v` says where" in " ".join(
        result.output.split())
    assert "1 entry unavailable" in md.read_text()
    unavailable = md.read_text().split("### unavailable: no method could run on these")[1]
    assert "| gone_1 | network |" in unavailable and "gone_1 |" not in md.read_text().split("### unavailable")[0]
    assert "\\begin{tabular}" in tex.read_text()
    again = CliRunner().invoke(app, ["report", str(out), "--csv", str(cs)])
    assert again.exit_code == 2 and "already exists; use --force" in again.output
    assert CliRunner().invoke(app, ["report", str(out), "--csv", str(cs), "--force"]).exit_code == 0
    (tmp_path / "empty").mkdir()
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "empty")])
    assert missing.exit_code == 2 and "no results.jsonl; run 'sfapprox batch MANIFEST --out-dir" in missing.output
    # a mistyped folder is said as such: "run batch --out-dir <the typo> first" sent the user to make it
    typo = CliRunner().invoke(app, ["report", str(tmp_path / "nothing")])
    assert typo.exit_code == 2 and f"{tmp_path / 'nothing'}: no such file or folder; give a batch's output" in \
        " ".join(typo.output.split()), typo.output


def test_datasets_commands(tmp_path):
    from sfapprox.cli import app

    data = tmp_path / "data"
    data.mkdir()
    (data / "x.net").write_text("*Vertices 2\n*Edges\n1 2\n")
    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "x"\ncategory = "network"\nfile = "x.net"\nsha256 = "' + "0" * 64 + '"\n\n'
                 '[[matrix]]\nname = "g"\ncategory = "attention"\ngenerator = "attention"\nparams = {n = 8}\n')
    runner = CliRunner()
    listed = runner.invoke(app, ["datasets", "list", str(m)])
    assert listed.exit_code == 0 and "(generated: attention)" in listed.output and "missing" in listed.output
    assert "1 missing, 1 generated" in listed.output and "attention(n=8)" not in listed.output  # compact
    verbose = runner.invoke(app, ["datasets", "list", str(m), "--verbose", "--json", "-"])
    assert verbose.exit_code == 0 and "attention(n=8)" in verbose.output
    import json as _json

    assert [e["status"] for e in _json.loads(verbose.stdout)["entries"]] == ["missing", "generated"]
    verified = runner.invoke(app, ["datasets", "verify", str(m), "--data-dir", str(data)])
    assert verified.exit_code == 1 and "mismatch" in verified.output
    fetched = runner.invoke(app, ["datasets", "fetch", str(m), "--data-dir", str(data)])
    assert fetched.exit_code == 1 and "SHA-256 mismatch" in fetched.output
    bad = runner.invoke(app, ["datasets", "list", str(tmp_path / "none.toml")])
    assert bad.exit_code == 2 and "no such manifest file" in bad.output


# ------------------------------------------------------------------ malformed and odd lines


MALFORMED = [
    '{"matrix": ["strike"], "method": "sf", "status": "ok", "fro_error": 1.0}',  # a list where a name should be
    '{"matrix": "strike", "method": "sf", "status": "ok", "fro_error": "1.0"}',  # a number as text
    '{"matrix": "strike", "method": "sf", "status": "ok", "reference": {"sf": "big"}}',
    '{"matrix": "strike", "method": "sf", "status": 3}',
    '{"matrix": "strike", "method": "", "status": "ok"}',
    '{"matrix": "strike", "status": "ok"}',
    '["strike", "sf", "ok"]',
    '{"matrix": "strike", "method": "sf", "status": "ok", "matrix_info": [1, 2]}',
    'not json at all',
]


@pytest.mark.parametrize("value, got", [(10**400, "got 100000000000... (401 digits)"), (-5, "got -5"),
                                        (float("inf"), "got inf")])
def test_an_edited_error_out_of_range_is_a_bad_line_not_a_crash_or_a_winner(tmp_path, value, got):
    """10**400 crashed report and batch (OverflowError in float()); -5 was accepted and named the winner."""
    from sfapprox.datasets.results_file import read_results

    line = json.dumps({**RECORDS[0], "fro_error": value}).replace("Infinity", "1e999")
    (tmp_path / "results.jsonl").write_text(line + "\n" + json.dumps(RECORDS[1]) + "\n", encoding="utf-8")
    parsed = read_results(tmp_path / "results.jsonl")
    assert parsed.bad_lines == [1] and parsed.problems[1] == f"field 'fro_error' must be a finite number >= 0, {got}"


def test_malformed_lines_are_skipped_with_their_number_and_why(tmp_path):
    from sfapprox.datasets.results_file import read_results

    path = tmp_path / "results.jsonl"
    good = [json.dumps(r) for r in RECORDS[:2]]
    path.write_text("\n".join([good[0], *MALFORMED, good[1]]) + "\n", encoding="utf-8")
    parsed = read_results(path)
    assert [r["method"] for r in parsed.records] == ["sf", "tsvd"]
    assert parsed.bad_lines == list(range(2, 2 + len(MALFORMED)))
    assert parsed.problems[2] == "field 'matrix' must be a non-empty string, got list"
    assert parsed.problems[3] == "field 'fro_error' must be a finite number >= 0, got str"
    assert parsed.problems[4] == "field 'reference' must be a table of numbers, got dict"
    assert parsed.problems[7] == "no field 'method'" and parsed.problems[8] == "not a JSON object (a list)"
    assert parsed.problems[10] == "not valid JSON"


def test_report_command_warns_about_malformed_lines_and_reports_the_rest(tmp_path):
    from sfapprox.cli import app

    out = tmp_path / "run"
    out.mkdir()
    body = [json.dumps(r) for r in RECORDS]
    body.insert(2, MALFORMED[0])
    (out / "results.jsonl").write_text("\n".join(body) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["report", str(out), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "results.jsonl: line 3 skipped: field 'matrix' must be a non-empty string, got list" in text
    assert "Traceback" not in result.output and "wins: sf 1, tsvd 1" in text
    assert len(json.loads((tmp_path / "r.json").read_text())["records"]) == len(RECORDS)


def test_a_resumed_batch_removes_malformed_lines_and_redoes_their_pairs(tmp_path):
    from sfapprox.datasets.batch import BatchOptions, run_batch
    from sfapprox.datasets.results_file import read_results

    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8}\n')
    out = tmp_path / "out"
    run_batch(m, out, BatchOptions(methods=("tsvd",)))
    line = json.loads((out / "results.jsonl").read_text())
    line["fro_error"] = [line["fro_error"]]  # damaged by hand
    (out / "results.jsonl").write_text(json.dumps(line) + "\n")
    again = run_batch(m, out, BatchOptions(methods=("tsvd",)))
    assert again.written == 1 and any("moved 1 line(s) it cannot read to results.jsonl.rejected" in x
                                      for x in again.repaired)
    assert len(read_results(out / "results.jsonl").records) == 1
    # kept aside, never deleted (a newer version's line, or one edited by hand, was gone for good)
    assert json.loads((out / "results.jsonl.rejected").read_text()) == line


def test_odd_but_valid_records_never_break_a_report():
    """Records that pass validation, with any mix of missing, null, unusual and non-finite values."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from sfapprox.datasets.results_file import record_problem
    from sfapprox.formats import render_rich

    scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(), st.text(max_size=4))
    value = st.recursive(scalar, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=3), c, max_size=3)),
                         max_leaves=5)
    fields = ["category", "n", "nnz", "budget", "fro_error", "rel_error", "seconds", "params", "settings",
              "matrix_info", "reference", "factors", "error", "reason", "budget_spec", "extra"]
    record = st.fixed_dictionaries(
        {"matrix": st.text(min_size=1, max_size=4), "method": st.sampled_from(["sf", "tsvd", "a|b", "[x]", "é"]),
         "status": st.sampled_from(["ok", "failed", "not applicable", "unavailable", "interrupted", "new-status"])},
        optional={k: st.one_of(value, st.floats(), st.dictionaries(st.text(max_size=3), st.floats(), max_size=2))
                  for k in fields})

    @settings(max_examples=100, deadline=None)
    @given(st.lists(record, max_size=6))
    def check(records):
        records = [r for r in records if record_problem(r) is None]
        report = build_report(records)
        tables = report.tables()
        for fmt in OutputFormat:
            fmt.render(tables, report.to_dict())
        list(render_rich(tables))

    check()


def test_report_on_the_results_file_names_its_folder(tmp_path):
    from typer.testing import CliRunner

    from sfapprox.cli import app

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.jsonl").write_text("")
    res = CliRunner().invoke(app, ["report", str(tmp_path / "r" / "results.jsonl")])
    assert res.exit_code == 2  # it said: run 'sfapprox batch MANIFEST --out-dir r/results.jsonl' first
    assert f"is a file; give the batch's folder, the one that holds results.jsonl (sfapprox report {tmp_path / 'r'})" \
        in " ".join(res.output.split())


def test_report_csv_holds_the_values_behind_the_cells():
    """report --csv held the display's rounding ("8.032"); compare's and sweep's CSV hold values, and so
    does the report's now: errors, reference figures and matrix facts at full precision."""
    import csv
    import io

    from sfapprox.formats import render_csv

    rows = list(csv.DictReader(io.StringIO(render_csv(build_report(RECORDS).tables()))))
    strike = next(r for r in rows if r["matrix"] == "strike")
    assert (strike["sf"], strike["tsvd"], strike["paper tsvd"]) == ("1.1", "2.727", "2.73")
    assert float(strike["Δ sf"]) == 100 * (1.1 - 1.04) / 1.04  # in percent, not the display's "+5.8%"
    att = next(r for r in rows if r["matrix"] == "att")
    assert (att["entropy"], att["β"], att["nmf"], att["nmf status"]) == ("2.8226", "2.0", "", "")


def test_report_csv_leaves_a_method_without_an_error_empty_and_says_its_status():
    """A method without an error wrote its status ("n/a", "failed") in its column of errors: text in a
    column of numbers, which pandas.read_csv took for strings.  The cell is empty and a column of its own
    says the status, as a sweep's CSV has it ("<method> status"; the limit a fit stopped on)."""
    from sfapprox.formats import render_csv

    records = RECORDS + [rec("broke", "sf", status="failed", category="attention", n=128, reason="out of memory"),
                         rec("broke", "tsvd", fro=0.5, category="attention", n=128)]
    rows = {r["matrix"]: r for r in csv.DictReader(io.StringIO(render_csv(build_report(records).tables())))}
    assert (rows["neg"]["nmf"], rows["neg"]["nmf status"]) == ("", "not applicable")
    assert (rows["broke"]["sf"], rows["broke"]["sf status"], rows["broke"]["tsvd status"]) == ("", "failed", "ok")
    assert (rows["strike"]["sf status"], rows["strike"]["tsvd status"]) == ("max_iter", "ok")
    for row in rows.values():  # every error cell a number or empty
        assert all(row[m] == "" or float(row[m]) >= 0 for m in ("sf", "tsvd"))


def test_lines_made_at_different_budgets_are_not_ranked_against_each_other():
    """A row whose sparse line was made at SF's budget and tsvd's at 0.3 declared a winner: a smaller error
    at a larger budget is no win.  Not ranked, and the report says which rows and why."""
    from sfapprox.datasets import build_report

    def rec(matrix, method, error, budget):
        return {"matrix": matrix, "category": "synthetic", "method": method, "status": "ok", "fro_error": error,
                "n": 10, "settings": {"budget": budget, "protocol": "default", "count_indices": True}}

    rep = build_report([rec("b1", "sparse", 2.0, "sf"), rec("b1", "tsvd", 1.0, "0.3"),
                        rec("b2", "sparse", 2.0, "sf"), rec("b2", "tsvd", 1.0, "sf")])
    rows = {row.name: row for row in rep.tables_by_category[0].rows}
    assert rows["b1"].winner is None and rows["b1"].mixed == "budget '0.3', 'sf'"
    assert rows["b2"].winner == "tsvd" and rows["b2"].mixed is None
    assert rep.total_wins() == {"sparse": 0, "tsvd": 1}
    notes = rep.tables()[-1].notes
    assert any(n.startswith("not ranked, their lines measured different things: b1 (budget '0.3', 'sf')") for n in notes)


def test_report_of_a_folder_with_no_lines_yet_says_so(tmp_path):
    from typer.testing import CliRunner

    from sfapprox.cli import app

    (tmp_path / "results.jsonl").write_text("")
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no result lines yet" in result.output


def test_lines_made_with_other_settings_are_said_where_they_are_ranked():
    """A batch resumed with another --time-limit or --seed said so on stderr only; the report files and
    `sfapprox report` ranked the lines together without a word."""
    one = {"time_limit": 1.0, "seed": 0, "max_iter": None}
    other = {**one, "time_limit": 2.0, "seed": 3}
    mixed = build_report([rec("a", "sf", fro=1.0, settings=one), rec("a", "tsvd", fro=2.0, settings=one),
                          rec("b", "sf", fro=1.0, settings=other), rec("b", "tsvd", fro=2.0, settings=other)])
    assert mixed.mixed_settings() == {"time_limit": ["1.0", "2.0"], "seed": ["0", "3"]}
    notes = mixed.tables()[-1].notes
    assert "ranked together, made with different settings: time_limit 1.0 and 2.0; seed 0 and 3" in " ".join(notes)
    assert mixed.to_dict()["mixed_settings"] == mixed.mixed_settings()
    third = {**one, "time_limit": 4.0}  # three values read as a list does ("1.0 and 2.0 and 4.0" before)
    three = build_report([rec(name, "sf", fro=1.0, settings=s) for name, s in (("a", one), ("b", other), ("c", third))])
    assert "made with different settings: time_limit 1.0, 2.0 and 4.0; seed 0 and 3" in " ".join(three.tables()[-1].notes)
    alike = build_report([rec("a", "sf", fro=1.0, settings=one), rec("b", "sf", fro=1.0, settings=one),
                          rec("c", "sf", status="failed", settings=other)])  # a failed line ranks nothing
    assert alike.mixed_settings() == {} and not any("different settings" in n for n in alike.tables()[-1].notes)


def test_the_report_csv_names_each_rows_category_with_one_category_or_several():
    from sfapprox.formats import render_csv

    for categories in (["network"], ["network", "surface mesh"]):
        records = [rec(f"m{i}", "sf", fro=1.0, category=c) for i, c in enumerate(categories)]
        rows = list(csv.DictReader(io.StringIO(render_csv(build_report(records).tables()))))
        assert [r["category"] for r in rows] == categories


def test_lines_of_one_name_made_from_different_matrices_are_not_ranked():
    """An entry changed from N = 32 to 64 and a batch redid tsvd only: the row showed N = 32, sparse's error
    of the old matrix beside tsvd's of the new, and a winner."""
    old = rec("band", "sparse", fro=0.0, n=32, source={"generator": "banded", "params": {"n": 32}})
    new = rec("band", "tsvd", fro=8.9, n=64, source={"generator": "banded", "params": {"n": 64}})
    row = build_report([old, new]).tables_by_category[0].rows[0]
    assert row.winner is None and row.mixed == "N 32, 64"
    # the same size, another input (a file's content, a generator's seed): not ranked either
    seeded = rec("band", "tsvd", fro=8.9, n=32, source={"generator": "banded", "params": {"n": 32, "seed": 2}})
    row = build_report([old, seeded]).tables_by_category[0].rows[0]
    assert row.winner is None and "different inputs" in row.mixed
    same = rec("band", "tsvd", fro=8.9, n=32, source={"generator": "banded", "params": {"n": 32}})
    assert build_report([old, same]).tables_by_category[0].rows[0].winner == "sparse"
    unknown = rec("band", "tsvd", fro=8.9, n=32)  # an older version's line, without its source: not "different"
    assert build_report([old, unknown]).tables_by_category[0].rows[0].winner == "sparse"
    other_file = [rec("m", m, fro=f, matrix_info={"sha256": h}) for m, f, h in (("sf", 1.0, "aa"), ("tsvd", 2.0, "bb"))]
    assert build_report(other_file).tables_by_category[0].rows[0].winner is None


def test_an_edited_line_over_its_budget_is_not_ranked():
    row = build_report([rec("m", "sf", fro=1.0), rec("m", "tsvd", fro=0.5, nnz=5000)]).tables_by_category[0].rows[0]
    assert row.winner is None and row.mixed == "tsvd stores 5,000 numbers, over its budget 120"


def test_a_report_says_which_lines_it_could_not_read(tmp_path):
    """A damaged line changed the winner in every exported report; only stderr said a line was skipped."""
    from sfapprox.cli import app

    out = tmp_path / "run"
    out.mkdir()
    body = [json.dumps(r) for r in RECORDS]
    body[3] = "this is not json"  # sawmill's tsvd: sf is left alone in its row
    (out / "results.jsonl").write_text("\n".join(body) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["report", str(out), "--json", str(tmp_path / "r.json"),
                                      "--markdown", str(tmp_path / "r.md")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["skipped_lines"] == {"4": "not valid JSON"}
    text = " ".join((tmp_path / "r.md").read_text().split())
    assert "1 line(s) of the results file could not be read and are left out (line 4 (not valid JSON))" in text


def test_errors_estimated_from_columns_show_their_interval_and_no_winner_inside_it():
    """A batch of a matrix never formed records errors estimated from random columns (``error_estimate``):
    the report showed them as plain numbers, and named a winner (and counted its win) where the intervals
    overlapped — what compare and sweep refuse to do."""
    def est(low, high):
        return {"error_estimate": {"exact": False, "fro_interval": [low, high], "rel_interval": [low / 10, None if high is None else high / 10],
                                   "columns": 163, "columns_advised": 0}}

    overlapping = [rec("k1", "rsvd", fro=76.5, category="other", **est(74.6, 78.3)),
                   rec("k1", "rpca", fro=75.3, category="other", **est(73.4, 77.2)),
                   rec("k2", "rsvd", fro=76.5, category="other", **est(74.6, 78.3)),
                   rec("k2", "rpca", fro=71.3, category="other", **est(69.3, 73.2))]
    report = build_report(overlapping)
    (table,) = report.tables_by_category
    assert [r.winner for r in table.rows] == [None, "rpca"]  # k1's intervals overlap: no winner
    assert table.wins == {"rsvd": 0, "rpca": 1}
    header, rows = table_cells(table)
    assert rows[0][header.index("rsvd")] == "76.5 ± 1.9" and rows[1][header.index("rpca")] == "71.3 ± 2"
    rendered = report.tables()[0]
    assert any("95% interval" in n for n in rendered.notes)
    text = OutputFormat.CSV.render([rendered], {})
    got = list(csv.DictReader(io.StringIO(text)))
    assert float(got[0]["rpca 95% low"]) == 73.4 and float(got[1]["rsvd 95% high"]) == 78.3
    # exact errors keep their plain cells, and an unbounded upper end ("0 ± ?") bounds nothing
    plain = build_report([rec("m", "sf", fro=1.0), rec("m", "tsvd", fro=2.0, **est(0.0, None))])
    (ptable,) = plain.tables_by_category
    h, (cells,) = table_cells(ptable)
    assert cells[h.index("sf")] == "1" and cells[h.index("tsvd")] == "2 ± ?" and ptable.rows[0].winner is None


def test_an_incomplete_last_line_is_named_in_the_report_files_with_its_pair_and_what_to_do(tmp_path):
    """A results file cut inside its last line: report said "skipped N bytes of an incomplete last line" on
    stderr only, and its Markdown, CSV and JSON ranked the row that lacked the cut line's method (another
    winner) without a sign; nor did it say which pair, or how to get it back."""
    from sfapprox.cli import app

    out = tmp_path / "run"
    out.mkdir()
    lines = "".join(json.dumps(r) + "\n" for r in RECORDS[:3])
    (out / "results.jsonl").write_text(lines + json.dumps(RECORDS[3])[:75], encoding="utf-8")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    result = CliRunner().invoke(app, ["report", str(out), "--markdown", str(md), "--json", str(js)])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "line 4 skipped: 75 B of an incomplete last line (sawmill/tsvd, by what is left of it)" in said
    assert "run the batch that wrote" in said and "redoes their pairs" in said
    assert "incomplete last line (sawmill/tsvd" in md.read_text()
    assert "incomplete last line" in json.loads(js.read_text())["skipped_lines"]["4"]


def test_a_line_that_cannot_be_read_is_said_with_what_to_do(tmp_path):
    """"line 2 skipped: not valid JSON", and nothing on what to do about it."""
    from sfapprox.cli import app

    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps(RECORDS[2]) + "\ngarbage {\n" + json.dumps(RECORDS[3]) + "\n")
    result = CliRunner().invoke(app, ["report", str(out)])
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "line 2 skipped: not valid JSON" in said, result.output
    assert "correct or delete the lines, or run the batch" in said and "results.jsonl.rejected" in said


def test_a_path_that_is_no_folder_is_said_so(tmp_path):
    """``sfapprox report /dev/null`` said "no results.jsonl; run 'sfapprox batch MANIFEST --out-dir /dev/null'"."""
    from sfapprox.cli import app

    result = CliRunner().invoke(app, ["report", "/dev/null"])
    assert result.exit_code == 2 and "/dev/null: is not a folder" in result.output, result.output
    assert "--out-dir /dev/null" not in result.output


def test_a_row_s_winner_follows_a_comparison_s_rule_for_exact_and_tied_lines():
    """An all-zero matrix every method reproduced: the report named nmf, the first name of error 0, where
    compare names none (tsvd, nmf and rpca store 0 numbers each); of exact lines the one storing fewer
    numbers wins (round-off's 1e-15 is exact), whatever the names' order."""
    zero = [rec("z", "sf", fro=0.0, nnz=320), rec("z", "tsvd", fro=0.0, nnz=0), rec("z", "sparse", fro=0.0, nnz=17),
            rec("z", "nmf", fro=0.0, nnz=0), rec("z", "rpca", fro=0.0, nnz=0)]
    for r in zero:
        r.update(rel_error=None, budget=320)  # ||X|| = 0: no relative error, as a comparison's rows have it
    row = build_report(zero).tables_by_category[0].rows[0]
    assert row.mixed is None and row.winner is None
    exact = [rec("e", "nmf", fro=0.0, nnz=32), rec("e", "sparse", fro=1e-15, nnz=17, rel_error=1e-16),
             rec("e", "tsvd", fro=0.5, nnz=10)]
    assert build_report(exact).tables_by_category[0].rows[0].winner == "sparse"
    same = [rec("s", "tsvd", fro=0.5, nnz=100), rec("s", "nystrom", fro=0.5, nnz=100)]
    assert build_report(same).tables_by_category[0].rows[0].winner is None


def test_one_method_counts_no_wins_in_tables_repr_and_command(tmp_path):
    """`batch --methods tsvd` printed "wins: tsvd 0" and "total wins: tsvd 0": one method lost where there was
    no contest. The tables, the repr and `sfapprox report` say that no winner is counted."""
    from sfapprox.cli import app

    records = [rec("strike", "tsvd", fro=2.7), rec("att", "tsvd", fro=1.0, category="attention", n=128)]
    report = build_report(records)
    titles = [t.title for t in report.tables()]
    assert titles == ["network: ‖X − X̂‖_F by method (tsvd alone: no winner counted)",
                      "attention: ‖X − X̂‖_F by method (tsvd alone: no winner counted)"]
    assert report.tables()[-1].notes == ["total wins: none counted (tsvd alone)"]
    assert repr(report).splitlines()[1:] == ["  network (1 matrix): tsvd alone: no winner counted",
                                             "  attention (1 matrix): tsvd alone: no winner counted",
                                             "  total wins: none counted (tsvd alone)"]
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = CliRunner().invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert "tsvd 0" not in result.output and "total wins: none counted (tsvd alone)" in result.output


def test_report_json_counts_no_win_where_there_was_no_contest(tmp_path):
    """`batch --methods tsvd` wrote report.json's wins as {"tsvd": 0} (and total_wins likewise) where the text
    said "no winner counted". A category without a contest has empty wins and 0 contests, as compare's JSON
    has no winner for one scored row; a category where each matrix had one method scored says so too."""
    from sfapprox.cli import app

    records = [rec("strike", "tsvd", fro=2.7), rec("att", "sf", fro=0.9, category="attention", n=128),
               rec("att", "tsvd", fro=1.0, category="attention", n=128),
               rec("w1", "sf", status="failed", category="weights", error="boom"),
               rec("w1", "tsvd", fro=1.0, category="weights")]
    data = build_report(records).to_dict()
    assert [(c["category"], c["wins"], c["contests"]) for c in data["categories"]] == [
        ("network", {}, 0), ("attention", {"sf": 1, "tsvd": 0}, 1), ("weights", {}, 0)]
    assert data["total_wins"] == {"sf": 1, "tsvd": 0}
    # a method scored only on a matrix where it ran alone met no other: not counted as a loser
    alone = build_report([rec("a", "sf", fro=1.0), rec("a", "tsvd", fro=2.0), rec("b", "nmf", fro=3.0)])
    assert alone.tables_by_category[0].wins == {"sf": 1, "tsvd": 0} and alone.total_wins() == {"sf": 1, "tsvd": 0}
    # one that ran beside others and failed on every matrix lost: its 0 is said, not hidden
    failing = build_report([rec(m, "sf", status="failed", error="boom") for m in "ab"]
                           + [rec(m, k, fro=f) for m in "ab" for k, f in (("tsvd", 1.0), ("nmf", 2.0))])
    assert failing.tables_by_category[0].wins == {"sf": 0, "tsvd": 2, "nmf": 0}
    assert repr(build_report(records)).splitlines()[1:] == [
        "  network (1 matrix): tsvd alone: no winner counted", "  attention (1 matrix): wins: tsvd 0, sf 1",
        "  weights (1 matrix): no matrix ranked two methods: no winner counted", "  total wins: tsvd 0, sf 1"]
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8}\n')
    batch = CliRunner().invoke(app, ["batch", str(manifest), "--out-dir", str(tmp_path / "b"), "--methods", "tsvd"])
    assert batch.exit_code == 0, batch.output
    assert "no winner counted" in batch.output and "tsvd 0" not in batch.output
    written = json.loads((tmp_path / "b" / "report.json").read_text())
    assert [(c["wins"], c["contests"]) for c in written["categories"]] == [({}, 0)] and written["total_wins"] == {}
    shown = CliRunner().invoke(app, ["report", str(tmp_path / "b"), "--json", "-"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["total_wins"] == {} and "total wins: none counted (tsvd alone)" in shown.stderr


# ----------------------------------------------------------------------------- in a notebook and a REPL
def test_a_report_s_repr_sums_it_up_in_a_few_lines():
    """A Report's repr was every record's every field (thousands of characters); it gives the wins by
    category, in total, and what was left out."""
    text = repr(build_report(RECORDS, {7: "not JSON"}))
    assert text.splitlines() == [
        "Report: 9 records of 4 matrices, methods sf, tsvd, nmf",
        "  network (2 matrices): wins: sf 1, tsvd 1",
        "  attention (2 matrices): wins: sf 1, tsvd 0",
        "  total wins: sf 2, tsvd 1",
        "  unavailable (no method could run): 1 matrix (gone_1)",
        "  1 line of the results file could not be read"]


def test_a_report_shows_as_its_files_tables_in_a_notebook_every_text_escaped():
    """The tables of ``sfapprox report`` and of its files (the matrices no method ran on, with why), a
    matrix's name (its file's) as text: ``<b>x&y</b>`` is not markup."""
    records = [rec("<b>x&y</b>", "sf", fro=1.0), rec("<b>x&y</b>", "tsvd", fro=2.0), *RECORDS[4:6]]
    html = build_report(records)._repr_html_()
    assert "<b>x&y</b>" not in html and "&lt;b&gt;x&amp;y&lt;/b&gt;" in html
    assert "network: ‖X − X̂‖_F by method (wins: sf 1, tsvd 0)" in html and "<b>1</b>" in html
    assert "unavailable: no method could run on these" in html and "gone_1" in html


def test_a_report_s_frame_holds_the_values_of_its_csv():
    pytest.importorskip("pandas")
    from _frames import assert_frame_is_the_csv

    report = build_report(RECORDS)
    frame = report.to_frame()
    assert_frame_is_the_csv(frame, report.file_tables())
    rows = frame[frame["table"].str.startswith("network: ")]
    assert rows["matrix"].tolist() == ["strike", "sawmill"] and rows["tsvd"].tolist() == [2.727, 3.236]
    # the matrices no method ran on, as in the CSV file
    assert frame["matrix"].tolist()[-1] == "gone_1" and frame["table"].tolist()[-1].startswith("unavailable")


def test_matrices_made_from_what_defines_them_show_their_parameters():
    """Two kernel entries over one points file, differing by their bandwidth alone, were two rows of names
    and errors: the report (tables, Markdown, CSV) said nowhere which bandwidth, which arrays of an
    attention .npz, or which tensor each was made from; a table of files read as they are gets no column."""
    from sfapprox.formats import render_csv, render_markdown

    def kernel(bandwidth, rule):
        return {"recipe": {"kind": "kernel", "kernel": "rbf", "bandwidth": bandwidth, "bandwidth_rule": rule}}

    records = [rec(name, m, fro=f, category="kernel", matrix_info=info)
               for name, info in (("pts-h1", kernel(1.5, "given")), ("pts-med", kernel(0.8123, "median heuristic")))
               for m, f in (("tsvd", 1.0), ("rsvd", 1.1))]
    records += [rec("attn", "tsvd", fro=0.3, category="attention",
                    matrix_info={"recipe": {"kind": "attention", "var": "q2,k2", "scale": 0.125}}),
                rec("model.w", "tsvd", fro=0.2, category="other", matrix_info={"recipe": {"var": "w"}}),
                rec("sawmill", "tsvd", fro=3.2)]
    report = build_report(records)
    cells = {t.category: table_cells(t) for t in report.tables_by_category}
    header, rows = cells["kernel"]
    assert header[-2:] == ["source", "winner"]
    assert [r[-2] for r in rows] == ["rbf, bandwidth 1.5", "rbf, bandwidth 0.8123 (median heuristic)"]
    assert cells["attention"][1][0][-2] == "attention q2,k2, scale 0.125"
    assert cells["other"][1][0][-2] == "var w"
    assert "source" not in cells["network"][0]
    assert "| rbf, bandwidth 1.5 |" in render_markdown(report.tables())
    rows = list(csv.DictReader(io.StringIO(render_csv(report.tables()))))
    assert {r["matrix"]: r["source"] for r in rows if r["category"] == "kernel"} == {
        "pts-h1": "rbf, bandwidth 1.5", "pts-med": "rbf, bandwidth 0.8123 (median heuristic)"}


def _made_json(tmp_path, command, *extra):
    """The JSON (and Markdown, CSV) ``command`` wrote of a small matrix, and the command's run."""
    import numpy as np

    from sfapprox.cli import app

    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).standard_normal((16, 16)))  # negative entries: nmf not applicable
    files = {fmt: tmp_path / f"{command}.{fmt}" for fmt in ("json", "md", "csv")}
    budgets = ["--budgets", "0.3,0.6"] if command == "sweep" else ["--budget", "0.3"]
    made = CliRunner().invoke(app, [command, str(path), "--methods", "tsvd,sparse,nmf", *budgets, "--json",
                                    str(files["json"]), "--markdown", str(files["md"]), "--csv", str(files["csv"]),
                                    "--quiet", *extra])
    assert made.exit_code == 0, made.output
    return made, files


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_report_of_a_compare_s_or_sweep_s_json_shows_its_table_again(tmp_path, command):
    """``report FILE.json`` of a saved comparison or sweep said only "is the JSON of 'sfapprox compare', not a
    batch's folder": it shows the same table lines the command printed, and writes the same Markdown, CSV
    and JSON, without running anything."""
    from sfapprox.cli import app

    made, files = _made_json(tmp_path, command)
    again = {fmt: tmp_path / f"again.{fmt}" for fmt in ("json", "md", "csv")}
    shown = CliRunner().invoke(app, ["report", str(files["json"]), "--json", str(again["json"]), "--markdown",
                                     str(again["md"]), "--csv", str(again["csv"])])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == made.stdout.splitlines() and "tsvd" in shown.stdout
    assert again["md"].read_text() == files["md"].read_text()
    assert again["csv"].read_text() == files["csv"].read_text()
    assert json.loads(again["json"].read_text()) == json.loads(files["json"].read_text())


def test_report_of_a_sweep_s_json_draws_its_plot_and_refuses_compare_s(tmp_path):
    """A sweep's figure comes from its JSON alone; compare's shows the approximations, which its JSON lacks:
    refused in one line, before anything is written."""
    pytest.importorskip("matplotlib")
    from sfapprox.cli import app

    _, sweep_files = _made_json(tmp_path, "sweep")
    figure = tmp_path / "again.png"
    drawn = CliRunner().invoke(app, ["report", str(sweep_files["json"]), "--plot", str(figure)])
    assert drawn.exit_code == 0 and figure.read_bytes().startswith(b"\x89PNG"), drawn.output
    _, compare_files = _made_json(tmp_path, "compare")
    refused = CliRunner().invoke(app, ["report", str(compare_files["json"]), "--plot", str(tmp_path / "c.png")])
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "--plot: compare's figure shows the approximations" in said, said
    assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize("damage, said", [
    (lambda d: d["results"][0].update(fro_error="0.5"), "key results[0].fro_error must be a finite number >= 0"),
    (lambda d: d.update(version=2), "key version is 2: a newer sfapprox wrote it"),
    (lambda d: d.update(format="sfapprox-other"), "key format is 'sfapprox-other', which report does not read"),
    (lambda d: d.pop("budget"), "key budget is missing"),
    (lambda d: d["results"].append(dict(d["results"][0])), "key results[3].method is 'tsvd', as results[0].method is"),
])
def test_report_of_an_edited_compare_json_is_one_line_naming_the_file_and_the_key(tmp_path, damage, said):
    from sfapprox.cli import app

    _, files = _made_json(tmp_path, "compare")
    data = json.loads(files["json"].read_text())
    damage(data)
    files["json"].write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["report", str(files["json"])])
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert " ".join(res.output.split()).startswith(f"error: {files['json']}: {said}"), res.output


def test_report_of_a_json_with_a_method_this_sfapprox_does_not_know_shows_it_with_a_note(tmp_path):
    """A row of a newer sfapprox's (or a plugin's) method was shown without a word: shown as recorded, and a
    note names the file, the method and its key; the JSON written again is the file's."""
    from sfapprox.cli import app

    made, files = _made_json(tmp_path, "compare")
    data = json.loads(files["json"].read_text())
    data["results"][1]["method"] = "sparse-next"
    files["json"].write_text(json.dumps(data))
    again = tmp_path / "again.json"
    res = CliRunner().invoke(app, ["report", str(files["json"]), "--json", str(again)])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 0 and "sparse-next" in res.stdout, res.output
    assert (f"note: {files['json']}: 'sparse-next' (results[1].method): a method this sfapprox does not know"
            in said), said
    assert json.loads(again.read_text())["results"] == data["results"]


def test_report_of_a_json_with_nan_or_cut_short_says_so(tmp_path):
    """Python's JSON reader takes NaN (an edit: sfapprox writes null); a file cut short is no JSON: each said
    with the file, where the report said "give the batch's folder"."""
    from sfapprox.cli import app

    _, files = _made_json(tmp_path, "sweep")
    text = files["json"].read_text()
    files["json"].write_text(text.replace('"seconds": ', '"seconds": NaN, "was": ', 1))
    res = CliRunner().invoke(app, ["report", str(files["json"])])
    assert res.exit_code == 2 and "key points[0].results[0].seconds is NaN" in " ".join(res.output.split())
    files["json"].write_text(text[: len(text) // 2])
    res = CliRunner().invoke(app, ["report", str(files["json"])])
    assert res.exit_code == 2 and f"{files['json']}: not valid JSON (" in " ".join(res.output.split()), res.output


def test_report_of_a_json_saved_again_with_a_byte_order_mark_shows_its_table(tmp_path):
    """A result JSON saved again by an editor that writes a UTF-8 byte-order mark (Notepad) was refused as
    "not valid JSON"."""
    from sfapprox.cli import app

    made, files = _made_json(tmp_path, "compare")
    files["json"].write_bytes(b"\xef\xbb\xbf" + files["json"].read_bytes())
    shown = CliRunner().invoke(app, ["report", str(files["json"])])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == made.stdout.splitlines()


def test_report_of_a_json_whose_verdict_is_not_its_rows_says_which_it_shows(tmp_path):
    """The winner and the verdict follow from the rows: a file's own (another sfapprox's wording, an edited
    row) would be lost without a word; the note says both."""
    from sfapprox.cli import app

    _, files = _made_json(tmp_path, "compare")
    data = json.loads(files["json"].read_text())
    data["verdict"]["text"] = "tsvd wins, by far"
    files["json"].write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["report", str(files["json"])])
    assert res.exit_code == 0 and 'its verdict was "tsvd wins, by far"; its rows read now' in " ".join(res.stderr.split())


def test_report_plot_of_a_batch_folder_is_refused(tmp_path):
    from sfapprox.cli import app

    (tmp_path / "results.jsonl").write_text("")
    res = CliRunner().invoke(app, ["report", str(tmp_path), "--plot", str(tmp_path / "p.png")])
    assert res.exit_code == 2 and "a batch's report has none" in " ".join(res.output.split())


def test_a_kernel_compared_from_its_columns_shows_its_parameters_from_an_old_or_new_record():
    """A batch entry compared from its columns recorded its recipe under "source" alone (with "path":
    "columns"): its report row said nothing of the kernel or its bandwidth, where the same entry formed did."""
    recipe = {"kind": "kernel", "kernel": "rbf", "bandwidth": 1.5, "bandwidth_rule": "given"}
    old = {"path": "columns", "source": recipe}  # written before the record had "recipe" too
    new = {"path": "columns", "source": recipe, "recipe": recipe, "compared_from": "columns"}
    for info in (old, new):
        report = build_report([rec("pts", "rsvd", fro=1.0, category="kernel", matrix_info=info)])
        header, rows = table_cells(report.tables_by_category[0])
        assert header[-2] == "source" and rows[0][-2] == "rbf, bandwidth 1.5"


def test_published_figures_left_out_are_said_in_a_note():
    """The manifest's tsvd figure was left out of a default-protocol report without a word: no 'paper tsvd'
    column, no reason, where the user had written tsvd = 2.73 beside sf = 1.04."""
    default = {"protocol": "default", "budget": "sf"}
    recs = [rec("strike", m, fro=e, reference={"tsvd": 2.73, "sf": 1.04}, settings=default, budget_spec="sf")
            for m, e in (("sf", 1.1), ("tsvd", 2.6))]
    report = build_report(recs)
    assert report.tables_by_category[0].rows[0].withheld == ["tsvd"]
    notes = report.tables()[-1].notes
    assert any(n.startswith("the paper's tsvd figures are not shown") and "--protocol paper" in n for n in notes)
    # under the paper's protocol every figure is shown, and nothing is said
    paper = build_report([rec("strike", m, fro=e, reference={"tsvd": 2.73, "sf": 1.04}, settings=PAPER)
                          for m, e in (("sf", 1.1), ("tsvd", 2.7))])
    assert not any("not shown" in n for n in paper.tables()[-1].notes)


def test_a_name_with_undecodable_bytes_is_strict_json_and_report_reads_it_old_and_new(tmp_path, monkeypatch):
    r"""``compare bad\xff.npy --json`` wrote the name as a lone surrogate (``"bad\udcff"``), refused by strict
    JSON readers (jq, serde: no UTF-8 holds it).  It is written as its escape, its bytes beside it; report reads
    that file, and the files written before, as the command showed them."""
    import os

    import numpy as np
    from sfapprox.cli import app

    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"bad\xff.npy")
    np.save(name, np.random.default_rng(0).standard_normal((12, 12)))
    made = CliRunner().invoke(app, ["compare", name, "--methods", "tsvd", "--json", "r.json", "--quiet"])
    assert made.exit_code == 0, made.output
    text = (tmp_path / "r.json").read_bytes().decode("utf-8")
    data = json.loads(text)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # strict UTF-8 all through (it raised here)
    assert data["matrix"]["file"] == "bad\\xff.npy" and data["matrix"]["file_bytes"] == b"bad\xff.npy".hex()
    older = text.replace("bad\\\\xff", "bad\\udcff")  # as sfapprox wrote it before: a lone surrogate
    assert older != text
    (tmp_path / "old.json").write_text(older, encoding="utf-8")
    for saved in ("r.json", "old.json"):
        shown = CliRunner().invoke(app, ["report", saved, "--markdown", f"{saved}.md"])
        assert shown.exit_code == 0, shown.output
        assert shown.stdout.splitlines() == made.stdout.splitlines() and "bad\\xff" in shown.stdout
        assert "bad\\xff" in (tmp_path / f"{saved}.md").read_text(encoding="utf-8")


def test_a_model_s_weights_are_listed_in_natural_order_layer_2_before_layer_10():
    """A var = "*" entry's weights share its place, and were ordered as text: layer.10 and layer.11 came
    before layer.2; digit runs now count as numbers, and the sizes of a row's mixed lines too (N 128, 64)."""
    names = ["gpt.layer.11.q", "gpt.layer.2.q", "gpt.layer.10.q", "gpt.layer.1.q", "gpt.layer.2.k"]
    finished = [rec(n, "tsvd", fro=1.0, position=0) for n in names] + [rec("after", "tsvd", fro=1.0, position=1)]
    report = build_report(finished)
    assert [row.name for row in report.tables_by_category[0].rows] == [
        "gpt.layer.1.q", "gpt.layer.2.k", "gpt.layer.2.q", "gpt.layer.10.q", "gpt.layer.11.q", "after"]
    assert build_report(list(reversed(finished))).records == report.records  # whatever order they finished in
    row = build_report([rec("band", "sparse", fro=0.0, n=128), rec("band", "tsvd", fro=1.0, n=64)]).tables_by_category[0].rows[0]
    assert row.mixed == "N 64, 128"


def test_a_matrix_source_names_the_text_marks_its_table_was_read_with():
    """Two entries of one ';'-separated table read with other --decimal marks, or a kernel of points read
    with decimal=',', were rows the report told apart by name alone: the marks are shown with the recipe."""
    from sfapprox.datasets.report import source_text

    assert source_text({"recipe": {"covariance": False, "delimiter": ";", "decimal": ","}}) == \
        "delimiter ';', decimal ','"
    assert source_text({"recipe": {"covariance": True, "decimal": "."}}) == "covariance, decimal '.'"
    assert source_text({"recipe": {"kind": "kernel", "kernel": "rbf", "bandwidth": 1.5, "bandwidth_rule": "given",
                                   "delimiter": "tab"}}) == "rbf, bandwidth 1.5, delimiter 'tab'"
    assert source_text({"recipe": {"covariance": False}}) is None  # (a table read as detected: as before)


def _two_records_and_a_bad_line(tmp_path):
    records = [{"matrix": "a", "category": "network", "method": m, "status": "ok", "fro_error": e, "n": 4}
               for m, e in (("sf", 1.0), ("tsvd", 2.0))]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    return records


def test_a_report_is_built_from_the_batch_folder_its_file_or_what_read_results_returns(tmp_path):
    """build_report(out_dir) was "string indices must be integers" from deep inside, and read_results(out_dir)
    an IsADirectoryError: a notebook's run_batch(manifest, out_dir) gives the folder, not its records."""
    from sfapprox.datasets import read_results

    records = _two_records_and_a_bad_line(tmp_path)
    want = build_report(records, {3: "not valid JSON"})
    for given in (tmp_path, str(tmp_path), tmp_path / "results.jsonl", read_results(tmp_path)):
        got = build_report(given)
        assert repr(got) == repr(want)
        assert got.skipped_lines == {3: "not valid JSON"}
    assert read_results(tmp_path).records == records


@pytest.mark.parametrize("given, said", [(None, "got NoneType"), ({"matrix": "a"}, "got dict"),
                                         ([1, 2], "each a dict with 'matrix' and 'method'")])
def test_records_that_are_none_are_one_parameter_error(given, said):
    from sfapprox import ParameterError

    with pytest.raises(ParameterError, match=said):
        build_report(given)


def test_a_folder_named_as_the_results_file_is_one_parameter_error(tmp_path):
    from sfapprox import ParameterError
    from sfapprox.datasets import read_results

    (tmp_path / "results.jsonl").mkdir()
    with pytest.raises(ParameterError, match=r"results.jsonl: is a folder, not a batch's results file"):
        read_results(tmp_path / "results.jsonl")
    # given the output folder, the user is not told to give the output folder (they did)
    with pytest.raises(ParameterError, match=r"results.jsonl: is a folder, where the batch output folder .* keeps its "
                                             r"results file; move or rename that folder$"):
        read_results(tmp_path)
    with pytest.raises(ParameterError, match=r"path must be a results file or a batch's output folder .* got NoneType"):
        read_results(None)


def test_a_report_of_a_path_to_nothing_is_one_input_error_not_a_report_of_nothing(tmp_path):
    """build_report("typo_dir") was "Report: 0 records of 0 matrices" (read_results reads a missing file as
    empty, as a resuming batch needs), where the CLI's report says there is no results file."""
    from sfapprox import InputError

    with pytest.raises(InputError, match=r"typo_dir: no such file or folder; give a batch's results file or its "
                                         r"output folder"):
        build_report(tmp_path / "typo_dir")
    with pytest.raises(InputError, match=r"no results.jsonl; run_batch \(or sfapprox batch --out-dir\) writes it"):
        build_report(tmp_path)
    (tmp_path / "results.jsonl").write_text("")  # a batch's folder before its first pair: a report of nothing
    assert build_report(tmp_path).tables_by_category == []


def test_a_report_of_a_folder_a_batch_plans_in_is_a_report_of_nothing_so_far(tmp_path):
    """run_batch writes results.jsonl once it has planned (sources hashed): a script polling build_report(out_dir)
    meanwhile got a report of nothing, as the CLI's report does while a batch holds the folder."""
    import socket
    import subprocess
    import sys

    from sfapprox import InputError
    from sfapprox.datasets.folder_lock import HOLDER_FILE

    with pytest.raises(InputError, match="no results.jsonl"):
        build_report(tmp_path)
    batch = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a process of this host that runs: the holder's batch
    try:
        (tmp_path / HOLDER_FILE).write_text(json.dumps({"pid": batch.pid, "host": socket.gethostname()}))
        assert build_report(tmp_path).tables_by_category == []
    finally:
        batch.kill()
        batch.wait()
