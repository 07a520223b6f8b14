"""describe (``sfapprox info``): what it says a method can do is what a comparison then does."""

from __future__ import annotations

import numpy as np
import pytest

from sfapprox import ResourceError, compare
from sfapprox.describe import describe, describe_methods
from sfapprox.sources import KernelMatrix


def _points(n=900, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3))


def _least(K, method, start=1 << 20):
    """The smallest whole MiB limit under which info says ``method`` runs from ``K``'s columns."""
    mib = start >> 20
    while not describe(K, max_memory=mib << 20).data["methods"][method]["from_columns_under_limit"]:
        mib += 1
    return mib << 20


@pytest.mark.parametrize("method", ["rsvd", "sparse", "sf"])
def test_info_says_a_method_runs_from_columns_where_a_comparison_runs_it(method, monkeypatch):
    """info said "yes" for every method that works from columns, whatever --max-memory: a comparison under
    that limit then refused rsvd (32.3 MiB needed at 30M) and SF (250 MiB needed at 6M)."""
    from sfapprox import _base
    from sfapprox.sf import model
    from sfapprox.sources import _base as source_base

    # the libraries' working sets made small: the matrix and the fits decide at this N (900: 6.2 MiB formed)
    for module in (_base, source_base, model):
        monkeypatch.setattr(module, "LIBRARY_WORKING_SET", 1 << 16)
    monkeypatch.setattr(model, "COMPILED_WORKING_SET", 1 << 16)
    K = KernelMatrix(_points())
    least = _least(K, method)
    assert least > 1 << 20  # the limit matters: at 1 MiB info says no
    said = describe(K, max_memory=least - (1 << 20)).data["methods"][method]
    assert said["from_columns"] and not said["from_columns_under_limit"]
    budget = describe(K).data["sf"]["count"]  # info decides at the comparison's default budget, SF's
    for limit, runs in ((least - (1 << 20), False), (least, True)):
        assert describe(K, max_memory=limit).data["matrix"]["formed_bytes"] > limit // 2  # not formed
        try:
            row = compare(K, [method], budget=budget, max_memory=limit, time_limit=0, max_iter=2,
                          device="cpu").results[0]  # (no time limit: SF keeps the structure of its budget)
        except ResourceError:  # the one method asked for does not fit: the comparison is refused whole
            row, ran = None, False
        else:
            ran = row.status == "ok"
        assert ran is runs, (limit, row)


def test_methods_json_has_every_formula():
    data = describe_methods().data
    assert set(data["stores"]) == set(data["methods"]) == set(data["from_columns"])


def test_formats_say_a_libsvm_file_is_a_point_table_for_kernel_too(tmp_path):
    # sfapprox formats said "only with covariance=True", though --kernel reads a LIBSVM file as points
    from sfapprox.describe import describe_formats
    from sfapprox.io import open_matrix

    path = tmp_path / "p.libsvm"
    path.write_text("1 1:0.5 2:1.0\n0 1:0.1 3:2.0\n1 2:0.3 3:0.7\n0 1:1.5\n")
    assert open_matrix(path, kernel="rbf").shape == (4, 4)  # what the text below claims
    described = describe_formats()
    text = described.data["inputs"]["libsvm"]["description"]
    # a Python caller's spelling (describe_formats is a call); `sfapprox formats` says --kernel, --covariance
    assert "kernel=" in text and "covariance=True" in text and "only with covariance" not in text
    shown = {row["key"]: row["what"] for row in described.tables[0].rows}
    assert all("kernel=" in shown[key] for key in ("csv", "npy", "libsvm")) and "kernel=" not in shown["mtx"]


def _runs(described):
    """The "runs" (or "from columns") cell of each method of ``info``'s table."""
    return {row["method"]: row["runs"] for row in described.tables[0].rows}


def test_info_says_a_method_the_matrix_rules_out_does_not_run():
    """The runs column came from memory alone: for an attention map (not symmetric) it said Nyström "yes"
    beside its smallest budget "never (X is not symmetric)", and a comparison refused it."""
    from sfapprox import AttentionMatrix

    rng = np.random.default_rng(0)
    q = rng.standard_normal((300, 4))
    A = AttentionMatrix(q, q + rng.standard_normal((300, 4)))
    limit = 4 << 20  # not formed: compared from columns
    streamed = describe(A, max_memory=limit)
    assert "from_columns_under_limit" in streamed.data["methods"]["rsvd"]  # (only where it is not formed)
    assert _runs(streamed)["nystrom"] == "no: X is not symmetric" and _runs(streamed)["rsvd"] == "yes"
    said = streamed.data["methods"]["nystrom"]  # --json says the same
    assert said["not_applicable"] == "X is not symmetric" and not said["from_columns_under_limit"]
    assert _runs(describe(A))["nystrom"] == "no: X is not symmetric"  # formed: its "from columns" cell
    row = compare(A, ["nystrom"], time_limit=0, device="cpu").results[0]
    assert row.status == "not applicable" and "not symmetric" in row.reason


def test_info_says_a_method_whose_least_budget_is_above_the_default_does_not_run():
    """Monarch's smallest budget (5,660,566 at 20,000 points) was above a comparison's default one, SF's
    (4,800,000), which then refused it; info said "yes". At N = 2 Monarch, the randomized SVD and the
    sparse entries are above SF's 4 numbers."""
    K = KernelMatrix(_points(2))
    described = describe(K, max_memory=1 << 20)  # not formed: compared from columns
    runs, count = _runs(described), described.data["sf"]["count"]
    assert count == 4 and runs["monarch"] == "no: needs a budget ≥ 6" and runs["rsvd"] == "no: needs a budget ≥ 5"
    assert runs["rpca"] == "yes" and any("SF's 4 (budget= sets" in note for note in described.tables[0].notes)
    assert not described.data["methods"]["monarch"]["from_columns_under_limit"]  # --json says the same
    assert described.data["methods"]["rpca"]["from_columns_under_limit"]
    for method in ("monarch", "rsvd"):
        row = compare(K, [method], time_limit=0, device="cpu").results[0]  # at the default budget
        assert row.status == "not applicable" and f"budget {count} is below" in row.reason


def test_info_json_of_a_source_holds_its_comparison_path_and_each_methods_runs_cell():
    """The JSON of info holds what its table shows: for a matrix not formed the table said "in a comparison:
    from columns (it and its scoring, 78.6 MiB, would pass the memory limit ...)" and, per method, "no: needs
    --max-memory 11.2 MiB"; the JSON had neither (only a boolean, and nothing where it is formed)."""
    K = KernelMatrix(_points(300))
    limit = 1 << 20
    streamed = describe(K, max_memory=limit)
    matrix = streamed.data["matrix"]
    assert matrix["in_a_comparison"] == "columns" and matrix["max_memory"] == limit
    assert matrix["formed_need"] > limit and dict(streamed.facts)["in a comparison"].startswith("from columns")
    runs = _runs(streamed)
    assert {m: said["runs"] for m, said in streamed.data["methods"].items()} == runs
    assert runs["rsvd"].startswith("no: needs max_memory='")  # a Python caller's spelling (describe is a call)
    formed = describe(K, max_memory=1 << 30)
    assert formed.data["matrix"]["in_a_comparison"] == "formed"
    assert {m: said["runs"] for m, said in formed.data["methods"].items()} == _runs(formed)


def test_the_methods_table_keeps_method_names_whole_in_a_40_column_window():
    """At 40 columns ``info`` folded the method names ("butterfly" over "-hier", read as the method
    butterfly; "sf-symmet" over "ric"): "never (X is not non-negative)" was kept on one line, 29 columns.
    That cell wraps now, and every name stays whole on its row."""
    import io
    import re

    from rich.console import Console

    from sfapprox._base import methods
    from sfapprox.describe import describe
    from sfapprox.formats import render_rich

    X = np.random.default_rng(0).standard_normal((64, 64))  # negative entries: NMF never applies
    report = describe(X)
    buf = io.StringIO()
    console = Console(file=buf, width=40, color_system=None)
    for item in render_rich(report.tables, 40):
        console.print(item)
    text = buf.getvalue()
    for name in methods():
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), f"{name} folded:\n{text}"
    assert "never (X is not" in text and max(map(len, text.splitlines())) <= 40


@pytest.mark.parametrize("width", [60, 80, 100])
def test_the_stores_formulas_wrap_between_their_terms_never_inside_parentheses(width):
    """At 80 columns ``sfapprox methods`` showed monarch+lr's formula as "... + k·(2N +" over "1)" and Monarch's
    as "N′ =" over "b₁·b₂ ≥ N"; the tables (``methods``, ``info``) now wrap a formula only between its terms."""
    import io
    import re

    from rich.console import Console

    from sfapprox.describe import describe, describe_methods
    from sfapprox.formats import render_rich

    for report in (describe_methods(), describe(np.random.default_rng(0).standard_normal((64, 64)))):
        buf = io.StringIO()
        console = Console(file=buf, width=width, color_system=None)
        for item in render_rich(report.tables, width):
            console.print(item)
        column = None  # the stores column's span, from its table's heading
        headings = 0
        for line in buf.getvalue().splitlines():
            if line.startswith(("name ", "method ")):  # a table's heading (a narrow window's continuation has none)
                heading = re.search(r"\bstores\s+", line)
                column = heading.span() if heading else None
                headings += heading is not None
                continue
            cell = line[column[0]:column[1]].strip() if column else ""
            # (" +" at a line's end is a break between two terms, as a formula is written over two lines)
            assert not re.search(r"(\S[+−]|[=≥·(])$", cell) and not cell.startswith(")"), \
                f"a formula wrapped inside a term at {width} columns: {line!r}"
        assert headings
    assert describe_methods().data["stores"]["monarch+lr"] == "r·N′·(b₁ + b₂) + k·(2N + 1)"  # the JSON as given


def test_info_of_a_resumed_fit_and_of_its_checkpoint_counts_the_iterations_before(tmp_path):
    """`info` of a resumed fit showed "iterations 1,044" where its fit's table said "1,044 (+ 2,704 before
    the resume)": the count read as the whole fit's, in the final file and in the resume's checkpoints."""
    from sfapprox import FitSettings
    from sfapprox.api import fit_matrix
    from sfapprox.describe import describe_factors
    from sfapprox.factors import load_factors

    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((32, 32)))
    first, resumed, ck = tmp_path / "first.h5", tmp_path / "resumed.h5", tmp_path / "ck.h5"
    settings = FitSettings(time_limit=None, max_iter=20, device="cpu")
    fit_matrix(tmp_path / "x.npy", settings=settings, out=first, ftol=0.0, gtol=0.0)
    # by iterations, not a time limit: a 1-s fit on a machine busy with other tests ended before its first
    # 0.05-s checkpoint was due (no ck.h5 to read); 2,000 iterations pass a 1-ms interval on any machine
    fit_matrix(tmp_path / "x.npy", settings=FitSettings(time_limit=None, max_iter=2000, device="cpu"), out=resumed,
               init=str(first), checkpoint=ck, checkpoint_every=0.001, ftol=0.0, gtol=0.0)
    before = load_factors(first).fit["iterations"]
    for path in (resumed, ck):
        fit = load_factors(path).fit
        assert fit["iterations_before"] == before
        facts = dict(describe_factors(path).facts)
        assert facts["iterations"] == f"{fit['iterations']:,} (+ {before:,} before the resume)"
    assert dict(describe_factors(first).facts)["iterations"] == before  # a fit from a named start: as it was


def test_info_of_a_fit_from_columns_says_so_and_that_its_errors_are_estimated(tmp_path):
    """info of a fit made from column blocks (a matrix too big to form) showed its errors as any fit's:
    nothing said how it was made, nor that its errors came from a sample of columns."""
    import numpy as np

    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors

    path = tmp_path / "f.h5"
    estimate = {"exact": False, "fro_interval": [0.9, 1.1], "rel_interval": [0.09, 0.11], "columns": 512}
    save_factors(path, ChordOperator(np.full((3, 8, 4), 0.25)),
                 fit={"fro_error": 1.0, "rel_error": 0.1, "path": "columns", "epochs": 2.5, "error_estimate": estimate})
    facts = dict(describe_factors(path).facts)
    assert facts["fitted"] == "from column blocks (2.5 passes over the columns)"
    assert facts["errors"].startswith("estimated from 512 random columns")
    save_factors(path, ChordOperator(np.full((3, 8, 4), 0.25)), fit={"fro_error": 1.0, "path": "in memory"}, force=True)
    assert "fitted" not in dict(describe_factors(path).facts) and "errors" not in dict(describe_factors(path).facts)


def test_info_and_the_fit_table_say_a_kept_starts_steps_were_discarded(tmp_path):
    """A run that ended worse than its start keeps the start: info and the fit's table said "30 (+ 300
    before the resume)", which read as 330 iterations behind factors that 300 had made.  Its steps are
    now said discarded, and the iterations that made the factors named."""
    import math
    import re

    from typer.testing import CliRunner

    from sfapprox import save_factors
    from sfapprox.chord import chord_offsets
    from sfapprox.cli import app
    from sfapprox.describe import describe_factors
    from sfapprox.operators import ChordOperator
    from sfapprox.sf._columns import COLUMN_WIDTH, column_fit_memory
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET

    n = 128
    offs = chord_offsets(n)
    exact = ChordOperator(np.random.default_rng(3).standard_normal((7, n, len(offs))) / math.sqrt(len(offs)), offs)
    start, out, x = tmp_path / "start.h5", tmp_path / "out.h5", tmp_path / "x.npy"
    save_factors(start, exact, fit={"iterations": 300})  # exact factors: any step of the resume can only lose
    np.save(x, exact.to_dense())
    limit = column_fit_memory(n, 7, len(offs), COLUMN_WIDTH) + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (1 << 20)
    res = CliRunner().invoke(app, [str(a) for a in ("fit", x, "--init", start, "--out", out, "--iters", 10,
                                                    "--time-limit", 0, "--max-memory", limit, "--device", "cpu",
                                                    "-q")])
    assert res.exit_code == 0, res.output
    table = re.sub(r"[\s│]+", " ", res.output)  # a long cell wraps over lines
    assert "(discarded: these factors are the start's, of 300 iterations before the resume)" in table, res.output
    assert "(+ 300" not in table
    facts = dict(describe_factors(out).facts)
    assert facts["iterations"] == "10 (discarded: these factors are the start's, of 300 iterations before the resume)"
    # a kept rank-one start (no saved fit before it), and a start of another matrix
    from sfapprox.describe import iterations_words

    assert iterations_words({"iterations": 12, "kept_start": True}) == "12 (discarded: these factors are the start's)"
    assert iterations_words({"iterations": 12, "kept_start": True, "iterations_before": 5, "init_note": "x"}) == \
        "12 (discarded: these factors are the start's, of 5 iterations of the start's fit, of another matrix)"
    assert iterations_words({"iterations": 1044, "iterations_before": 2704}) == "1,044 (+ 2,704 before the resume)"


def test_what_describe_and_the_formats_say_to_do_is_spelled_for_their_reader(tmp_path):
    """describe, describe_methods, describe_formats, describe_weights and sfapprox.io.available_formats are
    library calls: their titles and notes told a Python caller "--methods NAME,NAME,...", "--format KEY",
    "--var NAME picks a square one", "(sfapprox compare FILE --var NAME)", "no: needs --max-memory 11.2 MiB",
    and the formats mixed "var= picks a variable" with "(--var Q,K names others)" for both readers.  Now
    each says the option as its reader passes it; the command line's words stay as they were."""
    import torch

    from sfapprox._errors import spelled_for
    from sfapprox._params import parse_size
    from sfapprox.describe import describe_formats, describe_weights
    from sfapprox.io import available_formats

    weights = tmp_path / "w.pt"
    torch.save({"attn.q": torch.ones(4, 4), "bias": torch.ones(4)}, weights)
    K = KernelMatrix(_points(300))

    def said():
        runs = _runs(describe(K, max_memory=1 << 20))
        table = describe_weights(weights, "torch").tables[0]
        return {"methods": describe_methods().tables[0].title, "formats": describe_formats().tables[0].title,
                "tensors": table.title, "tensors note": table.notes[0], "runs": runs["rsvd"],
                "formats text": " ".join(available_formats().values())}

    api = said()
    with spelled_for("cli"):
        cli = said()
    assert api["methods"] == "methods (methods='NAME,NAME,...')"
    assert cli["methods"] == "methods (--methods NAME,NAME,...)"
    assert api["formats"] == "input formats (format='KEY' overrides the extension)"
    assert cli["formats"] == "input formats (--format KEY overrides the extension)"
    assert api["tensors"] == "w.pt: its tensors (var='NAME' picks a square one)"
    assert cli["tensors"] == "w.pt: its tensors (--var NAME picks a square one)"
    assert api["tensors note"].endswith("(sfapprox.load_matrix(FILE, var='NAME'))")
    assert cli["tensors note"].endswith("(sfapprox compare FILE --var NAME)")
    assert cli["runs"].startswith("no: needs --max-memory ")
    least = api["runs"].removeprefix("no: needs max_memory=")
    assert least != api["runs"] and parse_size(least.strip("'")) > 1 << 20  # a value the caller can pass
    assert describe(K, max_memory=least.strip("'")).data["methods"]["rsvd"]["runs"] == "yes"
    for text, stray in ((api["formats text"], "--"), (cli["formats text"], "var=")):
        assert stray not in text, text
    assert "var='Q,K' names others" in api["formats text"] and "--var Q,K names others" in cli["formats text"]
    assert "var= picks a variable" in api["formats text"] and "--var picks a variable" in cli["formats text"]


def test_a_weights_file_of_many_tensors_lists_its_square_ones_on_a_terminal_and_every_one_elsewhere(tmp_path, monkeypatch):
    """`info` on a model of 10,000 tensors drew a 10,000-row table (4 s of the 8, its summary scrolled
    away).  A terminal lists the square ones (at most TENSORS_SHOWN) and says how many it left out and
    where every tensor is; the table's rows, CSV and --json keep them all."""
    import json

    import torch
    from typer.testing import CliRunner

    from sfapprox.cli import app
    from sfapprox.describe import TENSORS_SHOWN, describe_weights

    many = TENSORS_SHOWN + 50
    state = {f"layers.{i}.bias": torch.ones(2) for i in range(many)}
    state.update({f"layers.{i}.q.weight": torch.ones(2, 2) for i in range(3)})
    torch.save(state, tmp_path / "m.pt")
    table = describe_weights(tmp_path / "m.pt", "torch").tables[0]
    assert len(table.rows) == many + 3 and [table.rows[i]["name"] for i in table.terminal_rows] == [
        "layers.0.q.weight", "layers.1.q.weight", "layers.2.q.weight"]
    assert table.terminal_notes == [f"listed: the 3 square tensors; not listed: {many} that are not square; "
                                    f"the table's rows and data['tensors'] hold all {many + 3}"]
    res = CliRunner().invoke(app, ["info", str(tmp_path / "m.pt"), "--json", "-"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stderr.split())  # the tables go to stderr, stdout carries the JSON
    # not a terminal (a pipe: | grep bias): every tensor, as in the files; the cap is a terminal's
    assert "layers.2.q.weight" in text and f"layers.{many - 1}.bias" in text and "not listed" not in text
    assert len(json.loads(res.stdout)["tensors"]) == many + 3
    from sfapprox.cli import _render

    monkeypatch.setattr(_render.err, "_force_terminal", True)  # as a terminal's stderr is
    monkeypatch.setattr(_render, "on_terminal", lambda console: True)  # (its stream a terminal indeed)
    res = CliRunner().invoke(app, ["info", str(tmp_path / "m.pt"), "--json", "-"])
    text = " ".join(res.stderr.split())
    assert "layers.2.q.weight" in text and "layers.0.bias" not in text
    assert f"not listed: {many} that are not square; --json - (or --csv FILE) lists all {many + 3}" in text

    state = {f"w{i}": torch.ones(2, 2) for i in range(TENSORS_SHOWN + 1)}  # more square ones than are listed
    torch.save(state, tmp_path / "s.pt")
    table = describe_weights(tmp_path / "s.pt", "torch").tables[0]
    assert table.terminal_rows == list(range(TENSORS_SHOWN))
    assert table.terminal_notes[0].startswith(f"listed: the first {TENSORS_SHOWN} of the {TENSORS_SHOWN + 1} square "
                                              "tensors; not listed: 1 more square;")
    torch.save({"w": torch.ones(2, 2)}, tmp_path / "one.pt")  # a short listing: every row, no note
    table = describe_weights(tmp_path / "one.pt", "torch").tables[0]
    assert table.terminal_rows is None and table.terminal_notes == []


def test_the_info_csv_holds_each_methods_smallest_budget_as_a_number():
    """info --csv wrote the table's text: "1,512" (a thousands separator), "93.8%" (rounded, a sign) and
    "never (X is not symmetric)" in the column of budgets; it holds the count, the share in percent and
    why a method never applies in a column of its own (as --json's ``not_applicable``)."""
    import csv
    import io

    from sfapprox.formats import render_csv

    X = np.random.default_rng(0).standard_normal((40, 40))
    d = describe(X)
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(render_csv(d.tables)))}
    sf = d.data["methods"]["sf"]["min_budget"]
    assert sf >= 1000 and rows["sf"]["smallest budget"] == str(sf)
    assert float(rows["sf"]["% of N²"]) == 100 * sf / 40**2 and rows["sf"]["not applicable"] == ""
    assert (rows["nystrom"]["smallest budget"], rows["nystrom"]["% of N²"]) == ("", "")
    assert rows["nystrom"]["not applicable"] == d.data["methods"]["nystrom"]["not_applicable"] == "X is not symmetric"


def test_the_csv_of_a_saved_fits_info_holds_its_numbers_unrounded(tmp_path):
    """info --csv of a saved fit wrote the facts as shown: errors and seconds to 6 digits ("1.23457") and
    "3,072 (18.75% of N²)" for its stored numbers; the CSV holds the numbers themselves."""
    import csv
    import io

    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors
    from sfapprox.formats import render_csv

    path = tmp_path / "f.h5"
    fit = {"fro_error": 1.2345678912345, "rel_error": 0.012345678912345, "seconds": 12.3456789, "iterations": 20000}
    save_factors(path, ChordOperator(np.full((3, 128, 8), 0.25)), fit=fit)
    rows = {r["what"]: r["value"] for r in csv.DictReader(io.StringIO(render_csv(describe_factors(path).tables)))}
    assert (rows["stored numbers"], rows["iterations"]) == ("3072", "20000")
    assert [float(rows[k]) for k in ("‖X−X̂‖_F", "relative error", "seconds")] == [
        fit["fro_error"], fit["rel_error"], fit["seconds"]]
    assert rows["size"] == "128 x 128"  # a fact that is no number keeps its words


def test_info_of_a_saved_fit_names_its_method_and_stored_numbers_as_results_do(tmp_path):
    """info --json of a saved fit had "kind" and "n_stored" only (the file's names), where a comparison's
    rows, a batch's lines and fit --json say "method" and "nnz"; both are there now."""
    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors

    path = tmp_path / "f.h5"
    save_factors(path, ChordOperator(np.full((3, 8, 4), 0.25)))
    data = describe_factors(path).data
    assert (data["method"], data["nnz"]) == (data["kind"], data["n_stored"]) == ("sf", 96)


# ----------------------------------------------------------------------------- in a notebook and a REPL
def test_a_description_s_repr_gives_its_table_and_main_facts_in_a_few_lines():
    """describe()'s repr was every cell of its table and every fact (8,000 characters)."""
    text = repr(describe(np.eye(36)))
    assert text.splitlines() == [
        "MatrixDescription: X: where each method applies (N² = 1,296) "
        f"({len(describe_methods().tables[0].rows)} rows)",
        "  size 36 x 36; stored entries 36 (2.78% of N²); symmetric yes; sign non-negative; "
        "SF stored numbers N·K·M 1,512 (116.67% of N²) (13 facts)"]
    # a description with no fact of those (a listing of the methods): its table alone
    assert repr(describe_methods()).splitlines() == [
        f"MatrixDescription: methods (methods='NAME,NAME,...') ({len(describe_methods().tables[0].rows)} rows)"]


def test_a_description_shows_as_info_does_in_a_notebook_every_text_escaped():
    """The facts, then the table, as ``sfapprox info`` prints them; a matrix's name (its file's) as text."""
    from sfapprox.io import LoadedMatrix

    html = describe(LoadedMatrix(np.eye(8), "<b>x&y</b>", "<b>x&y</b>.npy", "npy"))._repr_html_()
    assert "<b>x&y</b>" not in html and "&lt;b&gt;x&amp;y&lt;/b&gt;: where each method applies" in html
    assert '<th style="text-align: left">SF factors M</th><td style="text-align: left">3</td>' in html
    assert html.count("<tr>") == 13 + 1 + len(describe_methods().tables[0].rows)  # facts, heading, methods


def test_a_saved_fits_description_shows_its_facts_once_in_a_notebook(tmp_path):
    """info prints a saved fit's facts; their table is for the files (--csv): not shown twice."""
    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors

    save_factors(tmp_path / "f.h5", ChordOperator(np.full((3, 8, 4), 0.25)), fit={"fro_error": 1.25})
    d = describe_factors(tmp_path / "f.h5")
    html = d._repr_html_()
    assert html.count("‖X−X̂‖_F") == 1 and html.count("<tr>") == len(d.facts)
    assert "holds a saved sf fit (ChordOperator); size 8 x 8; stored numbers 96 (150.00% of N²)" in repr(d)


def test_a_description_s_frame_holds_the_values_of_its_csv():
    pytest.importorskip("pandas")
    from _frames import assert_frame_is_the_csv

    X = np.random.default_rng(0).standard_normal((40, 40))
    d = describe(X)
    frame = d.to_frame()
    assert_frame_is_the_csv(frame, d.tables)
    sf = frame[frame["method"] == "sf"].iloc[0]
    assert sf["smallest budget"] == d.data["methods"]["sf"]["min_budget"]
    assert sf["% of N²"] == 100 * sf["smallest budget"] / 1600
    assert frame[frame["method"] == "nystrom"].iloc[0]["not applicable"] == "X is not symmetric"


def test_a_saved_fit_with_free_position_entries_says_how_they_were_counted(tmp_path):
    """info fit.h5 gave an RPCA fit's stored numbers without the rule that counted its sparse entries (2 numbers
    each in a comparison, 1 with count_indices=False, budget.rpca_count's default): the same file read as two
    different sizes."""
    from sfapprox import RobustPCA, TruncatedSVD, save_factors
    from sfapprox.describe import describe_factors

    X = np.random.default_rng(0).random((16, 16))
    for ci, words in ((True, "2 numbers (value and position)"), (False, "1 number (its value alone")):
        fit = RobustPCA(budget=120, count_indices=ci, rank_grid=[1]).fit(X)
        save_factors(tmp_path / f"{ci}.h5", fit)
        d = describe_factors(tmp_path / f"{ci}.h5")
        assert dict(d.facts)["sparse entries"].startswith(f"{fit.n_sparse_:,}, each counted as {words}")
        assert d.data["count_indices"] is ci and d.data["n_stored"] == fit.n_stored_
    save_factors(tmp_path / "t.h5", TruncatedSVD(n_components=1).fit(X))
    tsvd = describe_factors(tmp_path / "t.h5")
    # (its JSON said "count_indices": false, the empty sparse part's default, beside settings saying true)
    assert "sparse entries" not in dict(tsvd.facts) and "count_indices" not in tsvd.data


def test_a_file_is_opened_within_the_limit_given_as_info_opens_it(tmp_path):
    """describe(path, max_memory=) read the file under the default limit (80% of RAM): a file over the
    limit given was formed whole; now it is opened as info opens it, a sparse file kept sparse."""
    import scipy.io
    import scipy.sparse as sp

    n = 256
    X = sp.random(n, n, density=0.01, random_state=0, format="coo") + sp.eye(n)
    path = tmp_path / "sparse.mtx"
    scipy.io.mmwrite(path, X)
    limit = 200_000  # its dense form (512 KiB) is over it, its sparse copies are not
    described = describe(path, max_memory=limit)
    matrix = described.data["matrix"]
    assert matrix["in_a_comparison"] == "columns" and matrix["max_memory"] == limit
    assert dict(described.facts)["stored entries"].startswith(f"{sp.csr_array(X).nnz:,}")
    dense = tmp_path / "dense.csv"
    np.savetxt(dense, np.eye(n), delimiter=",")
    with pytest.raises(ResourceError, match="dense.csv"):  # its float64 matrix is over the limit: not read whole
        describe(dense, max_memory=limit)


def test_info_s_sparse_storage_count_is_the_one_compare_s_verdict_quotes():
    """info said "stored as values + positions it takes 152 numbers" where compare's verdict quoted the
    sparse method's 177 (CSR's row pointers charged): two unexplained counts of one matrix's storage."""
    import scipy.sparse as sp

    from sfapprox import compare

    X = sp.random(64, 64, density=0.02, random_state=0, format="csr")
    X.setdiag(1.0)
    nnz = X.nnz
    [note] = [n for n in describe(X).tables[0].notes if "non-zeros" in n]
    verdict = compare(X, ["tsvd"], budget=1920).verdict()["text"]
    csr = f"{2 * nnz + 65:,} numbers"  # a value and a column index each, and N + 1 row pointers
    assert f"holds it exactly in {csr}" in note and f"holds it exactly in {csr}" in verdict


def test_a_saved_fit_s_size_and_description_write_n_thousands_separated(tmp_path):
    """The "size" fact and the file's own description said "1024 x 1024" beside "stored numbers 22,528"."""
    import h5py

    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors

    path = tmp_path / "f.h5"
    save_factors(path, ChordOperator(np.full((2, 1024, 11), 0.25)))
    facts = {r["what"]: r["value"] for r in describe_factors(path).tables[0].rows}
    assert facts["size"] == "1,024 x 1,024"
    with h5py.File(path) as f:
        assert f.attrs["description"].startswith("An sfapprox fit of a 1,024 x 1,024 matrix A")


def test_info_shows_a_kernel_s_points_like_other_sizes():
    """info of a points table as a kernel showed its points as [12000, 8]; now as its size is shown, 12,000 x 8
    (the JSON keeps the list)."""
    from sfapprox.describe import describe

    desc = describe(KernelMatrix(np.random.default_rng(0).standard_normal((1200, 3))))
    facts = dict(desc.facts)
    assert facts["points"] == "1,200 x 3" and facts["size"] == "1,200 x 1,200"
    assert desc.data["matrix"]["source"]["points"] == [1200, 3]


def test_info_of_a_saved_fit_gives_its_fit_seconds_beside_its_whole_turns_where_recorded(tmp_path):
    """A fit record's seconds are the fit's whole turn (structure chosen, fit, scoring) and fit_seconds the
    estimator's own; info listed only the first, as if it were the fit's time. An older file: as before."""
    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors

    op = ChordOperator(np.full((3, 8, 4), 0.25))
    save_factors(tmp_path / "new.h5", op, fit={"seconds": 5.9, "fit_seconds": 1.76, "iterations": 10})
    save_factors(tmp_path / "old.h5", op, fit={"seconds": 1.76, "iterations": 10})
    facts = dict(describe_factors(tmp_path / "new.h5").facts)
    assert (facts["seconds"], facts["fit seconds"]) == ("5.90", "1.76")
    labels = [label for label, _ in describe_factors(tmp_path / "new.h5").facts]
    assert labels.index("fit seconds") == labels.index("seconds") + 1  # beside it
    old = dict(describe_factors(tmp_path / "old.h5").facts)
    assert old["seconds"] == "1.76" and "fit seconds" not in old


def test_a_saved_fit_s_seconds_are_shown_as_fit_and_compare_show_them(tmp_path):
    """info showed a saved fit's seconds to 6 digits ("3.64137", "0.00659834") where fit's table and compare's
    had said "3.64" and "0.01" of the same fit: two decimals, as every table gives seconds."""
    from sfapprox import ChordOperator, save_factors
    from sfapprox.describe import describe_factors

    save_factors(tmp_path / "f.h5", ChordOperator(np.full((3, 8, 4), 0.25)),
                 fit={"seconds": 3.641366078, "fit_seconds": 0.006598342, "iterations": 10})
    facts = dict(describe_factors(tmp_path / "f.h5").facts)
    assert (facts["seconds"], facts["fit seconds"]) == ("3.64", "0.01")


def test_a_linear_operator_is_described_from_its_products_as_compare_reads_it():
    """describe(aslinearoperator(X)) said "matrix has object dtype", where compare and the estimators take it."""
    from scipy.sparse.linalg import aslinearoperator

    described = describe(aslinearoperator(np.eye(36)))
    assert described.data["sf"]["count"] == describe(np.eye(36)).data["sf"]["count"]
    assert "operator" in str(described)


def test_info_charges_top_s_of_a_graph_held_sparse_for_its_non_zeros_and_the_comparison_runs_it(tmp_path):
    """A graph kept sparse (its dense form over the limit) is compared from its non-zeros: top-s keeps them at
    most, whatever the budget. info said sparse needs the limit raised to twice 48 bytes a number of SF's
    budget (37.7 GiB at N = 1,000,000 and 10,000,000 non-zeros, which peaked at 0.85 GiB)."""
    import scipy.io
    import scipy.sparse as sp

    n = 2000
    A = sp.random(n, n, density=5 / n, random_state=0, format="csr")
    path = tmp_path / "g.mtx"
    scipy.io.mmwrite(path, A + A.T)
    limit = 16 << 20  # the dense form (32 MB) is over it; 48 bytes a number of SF's budget, twice, too
    said = describe(path, max_memory=limit)
    assert said.data["matrix"]["in_a_comparison"] == "columns"
    assert said.data["methods"]["sparse"]["runs"] == "yes"
    row = compare(str(path), ["sparse"], max_memory=limit).results[0]
    assert row.status == "ok" and row.params["from"] == "columns" and row.rel_error == 0.0


def test_info_says_why_the_butterfly_never_applies_at_a_size_not_a_power_of_two():
    """At N = 30 sf-butterfly's smallest budget said "never" alone, beside Nyström's "never (X is not
    symmetric)"."""
    X = np.random.default_rng(0).standard_normal((30, 30))
    d = describe(X)
    row = next(r for r in d.tables[0].rows if r["method"] == "sf-butterfly")
    assert row["min_budget"] == "never (N is not a power of two)"
    assert d.data["methods"]["sf-butterfly"]["not_applicable"] == "N is not a power of two"
    row = next(r for r in describe(X[:16, :16]).tables[0].rows if r["method"] == "sf-butterfly")
    assert row["min_budget"] == "128"  # 2 N log2 N at N = 16
