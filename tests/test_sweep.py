import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from sfapprox import FitSettings, ParameterError
from sfapprox.cli import app
from sfapprox.sweep import parse_budget_list, sweep


def test_every_method_at_every_budget():
    X = np.random.default_rng(0).random((24, 24))
    s = sweep(X, ["0.5", "sf", 100], ["sf", "tsvd"], device="cpu", max_iter=10)
    assert [p.budget for p in s.points] == [100, 288, 720]  # by increasing budget
    for point in s.points:
        assert [r.method for r in point.results] == ["sf", "tsvd"]
        assert all(r.nnz is None or r.nnz <= point.budget for r in point.results)
    d = s.to_dict()
    assert d["methods"] == ["sf", "tsvd"] and len(d["points"]) == 3 and "matrix" not in d["points"][0]
    assert s.table()[720]["sf"].status == "ok"


def test_without_methods_it_sweeps_the_methods_compare_and_the_cli_run():
    """sweep(X, budgets) ran sf and tsvd while compare(X) and `sfapprox sweep` (DEFAULT_METHODS) also ran sparse."""
    import inspect

    from sfapprox import compare
    from sfapprox._settings import DEFAULT_METHODS

    s = sweep(np.random.default_rng(0).random((12, 12)), [0.5], device="cpu", max_iter=3, time_limit=None)
    assert [r.method for r in s.points[0].results] == list(DEFAULT_METHODS) == ["sf", "tsvd", "sparse"]
    assert inspect.signature(sweep).parameters["methods"].default == \
        inspect.signature(compare).parameters["methods"].default


def test_parse_budget_list():
    assert parse_budget_list(" 0.01, 0.1 ,sf") == ["0.01", "0.1", "sf"]
    with pytest.raises(ParameterError):
        parse_budget_list(" , ")
    assert parse_budget_list("0.1,0.2,") == ["0.1", "0.2"]
    with pytest.raises(ParameterError, match=r"--budgets '0.1,,0.2': an item between two commas is empty"):
        parse_budget_list("0.1,,0.2")


def test_cli_sweep_table_json_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    js, png = tmp_path / "s.json", tmp_path / "s.png"
    res = CliRunner().invoke(app, ["sweep", str(path), "--budgets", "0.3,0.6", "--methods", "tsvd",
                                   "--json", str(js), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "% of N²" in res.output
    data = json.loads(js.read_text())
    assert [p["budget"] for p in data["points"]] == [76, 153]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_source_too_big_for_the_limit_is_swept_from_columns():
    from sfapprox.sources import KernelMatrix

    rng = np.random.default_rng(3)
    K = KernelMatrix(rng.standard_normal((150, 3)), bandwidth=1.0, name="k")
    small = 2 * K.formed_bytes  # forming it and scoring would pass this limit
    s = sweep(K, "0.02,0.05", ["nystrom", "rsvd", "tsvd"], settings=FitSettings(device="cpu", max_memory=small))
    assert [p.budget for p in s.points] == [450, 1125] and s.matrix["path"] == "columns"
    dense = K.to_dense()
    for point in s.points:
        rows = {r.method: r for r in point.results}
        assert rows["tsvd"].status == "not applicable"
        for m in ("nystrom", "rsvd"):
            assert rows[m].nnz <= point.budget and rows[m].error_estimate["exact"]
            assert rows[m].fro_error == pytest.approx(np.linalg.norm(dense - rows[m].operator.to_dense()), rel=1e-9)
    assert {r.method for r in s.points[1].results} == {"nystrom", "rsvd", "tsvd"}
    # Each budget's scoring note says which budget it is (their columns and seconds differ).
    assert [n.split(":")[0] for n in s.points[0].notes + s.points[1].notes if "not formed" in n] == [
        "budget 450", "budget 1,125"]


def test_a_method_over_the_memory_limit_is_swept_from_the_formed_matrix_columns():
    """sparse's in-memory fit over max_memory: it runs from the formed matrix's columns at every budget
    (the same entries), and the sweep's notes say so once."""
    X = np.random.default_rng(4).random((40, 40))
    from sfapprox._validation import LIBRARY_WORKING_SET

    limit = 3 * 8 * 40 * 40 + LIBRARY_WORKING_SET  # scoring (X and 2 arrays) fits; sparse's 6 dense copies do not
    small = sweep(X, "0.1,0.3", ["sparse", "tsvd"], settings=FitSettings(device="cpu", max_memory=limit))
    free = sweep(X, "0.1,0.3", ["sparse", "tsvd"], settings=FitSettings(device="cpu"))
    for a, b in zip(small.points, free.points):
        ra, rb = ({r.method: r for r in p.results} for p in (a, b))
        assert ra["sparse"].params["path"] == "columns" and "path" not in rb["sparse"].params
        assert ra["sparse"].fro_error == pytest.approx(rb["sparse"].fro_error, rel=1e-12)
    lines = small.tables()[0].notes
    assert sum("sparse: fitted from the matrix's column blocks" in n for n in lines) == 1
    assert not any("column blocks" in n for n in free.tables()[0].notes)


@pytest.mark.parametrize("budget", [0.5, 50, "0.5", np.float64(0.5), np.array(0.5)])
def test_a_single_budget_is_a_sweep_of_that_one(budget):
    X = np.random.default_rng(0).random((10, 10))
    assert [p.budget for p in sweep(X, budget, ["tsvd"]).points] == [50]


def test_api_budget_errors_name_the_parameter_not_the_cli_option():
    X = np.random.default_rng(0).random((10, 10))
    with pytest.raises(ParameterError, match=r"^budgets is None.*default_budgets"):
        sweep(X, None, ["tsvd"])
    for empty in ([], "", " , "):
        with pytest.raises(ParameterError, match=r"^budgets needs at least one budget") as caught:
            sweep(X, empty, ["tsvd"])
        assert "--budgets" not in str(caught.value)
    with pytest.raises(ParameterError, match=r"^budgets must be a budget or a list of budgets.*got object"):
        sweep(X, object(), ["tsvd"])


def test_cli_keeps_naming_the_budgets_option(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((10, 10)))
    out = CliRunner().invoke(app, ["sweep", str(path), "--budgets", " , ", "--methods", "tsvd"])
    assert out.exit_code == 2
    assert "--budgets needs at least one budget, e.g. 0.01,0.02,0.05" in " ".join(out.output.split())


def test_an_unknown_setting_keyword_names_sweep():
    X = np.random.default_rng(0).random((10, 10))
    with pytest.raises(TypeError, match=r"^sweep\(\) got an unexpected keyword argument 'bogus'.*max_iter"):
        sweep(X, [0.5], ["tsvd"], bogus=1)


def test_a_thousands_separator_in_the_budgets_is_explained():
    from sfapprox import ParameterError
    from sfapprox.sweep import parse_budget_list

    with pytest.raises(ParameterError, match="got '000'; commas separate the budgets: write 1000, not 1,000"):
        parse_budget_list("0.05,1,000")
    with pytest.raises(ParameterError) as info:
        parse_budget_list("0.05,-1")
    assert "commas separate" not in str(info.value)


def test_every_distinct_reason_of_a_method_is_said_under_the_table():
    """SF "n/a" at a small budget, then "failed" (over the memory limit) at larger ones: only the first
    reason was said, and the failures had none under the table."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    small = MethodResult("sf", "not applicable", reason="budget 8000 is too small")
    failed = MethodResult("sf", "failed", reason="needs about 233 MiB, over the memory limit of 60 MiB")
    points = [Comparison({"name": "m", "n": 400}, b, str(b), [r]) for b, r in ((8000, small), (16000, failed),
                                                                                   (24000, failed))]
    notes = Sweep({"name": "m", "n": 400}, ["sf"], points).tables()[0].notes
    assert [n for n in notes if n.startswith("sf: ")] == ["sf: budget 8000 is too small",
                                                         "sf: needs about 233 MiB, over the memory limit of 60 MiB"]


def test_budgets_given_as_numbers_are_counts_whatever_their_type():
    X = np.random.default_rng(0).standard_normal((60, 60))
    s = sweep(X, [600.0, np.float64(900.0), 0.1], "tsvd")
    assert [p.budget for p in s.points] == [360, 600, 900]
    with pytest.raises(ParameterError, match="above 1 with a decimal point"):
        sweep(X, "0.1,600.0", "tsvd")  # typed: ambiguous


def test_a_sweep_from_columns_checks_every_budget_before_its_first_fit():
    """The smaller budgets were fitted, then the largest was refused and the whole sweep ended, exit 2,
    nothing written. Every budget is checked first: the one over the limit is a point of "not
    applicable" rows, never fitted, and the others are."""
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(1).standard_normal((400, 3)), bandwidth=1.0)
    seen = []
    result = sweep(K, [0.001, 0.3], "rsvd", max_memory=2 << 20, on_result=lambda b, r: seen.append(b))
    assert seen == [160] and "memory limit" not in (result.points[0].results[0].reason or "")
    assert "over the memory limit" in result.points[1].results[0].reason


def test_budgets_that_come_to_one_value_are_one_point_and_each_is_named():
    """200000 and 5000 both clamp to N^2 at N = 16: one point, and the note names both (it named the first)."""
    X = np.random.default_rng(0).random((16, 16))
    s = sweep(X, ["200000", "5000", "0.5"], ["tsvd"])
    assert [p.budget for p in s.points] == [128, 256]
    assert "budgets 200000, 5000 all come to 256 stored numbers at N = 16: one point" in s.points[-1].notes


def test_an_interrupted_method_with_its_best_factors_scored_shows_its_error(monkeypatch):
    """An interrupted sweep showed SF's cell as "interrupted" and left it off the plot while its JSON had
    rel_error 0.52 (compare shows it): its best factors were scored, so the cell shows the number."""
    s = sweep(np.random.default_rng(0).random((12, 12)), [0.5], ["tsvd", "sparse"])
    row = next(r for r in s.points[0].results if r.method == "sparse")
    row.status = "interrupted"  # as a Ctrl-C during its fit leaves it: the best so far, scored
    table = s.tables()[0]
    assert table.rows[0]["sparse"].startswith(f"{row.rel_error:.3g}"[:4]) and "(interrupted)" in table.rows[0]["sparse"]
    assert table.data[0]["sparse"] == row.rel_error


def test_a_budget_no_method_fits_from_columns_is_a_point_of_not_applicable_rows():
    """One budget over the memory limit ended the whole sweep from columns (the budgets that fit
    included); it is a point of "not applicable" rows now, and only a sweep where no budget fits is
    refused."""
    import sfapprox
    from sfapprox import ResourceError

    K = sfapprox.KernelMatrix(np.random.default_rng(0).standard_normal((600, 3)), kernel="rbf", bandwidth=1.5)
    settings = sfapprox.FitSettings(time_limit=2, max_memory=4 << 20)
    result = sweep(K, budgets=[0.02, 0.5], methods=["rsvd", "sparse"], settings=settings)
    small, large = result.points
    assert [r.status for r in small.results] == ["ok", "ok"]
    assert [r.status for r in large.results] == ["not applicable"] * 2
    assert any("no method asked for fits the memory limit" in n for n in large.notes)
    with pytest.raises(ResourceError, match="no method asked for fits the memory limit"):
        sweep(K, budgets=[0.5], methods=["rsvd", "sparse"], settings=settings)


def test_methods_none_is_refused():
    with pytest.raises(ParameterError, match=r"methods must be a name, comma-separated names or a list of names"):
        sweep(np.eye(4), [0.5], None)


def test_a_linear_operator_is_swept_as_a_source_of_columns():
    from scipy.sparse.linalg import aslinearoperator

    X = np.random.default_rng(4).random((16, 16))
    by_operator = sweep(aslinearoperator(X), [0.5], ["tsvd"])  # "matrix has object dtype" before
    by_array = sweep(X, [0.5], ["tsvd"])
    assert by_operator.points[0].results[0].status == "ok"
    assert by_operator.points[0].results[0].rel_error == pytest.approx(by_array.points[0].results[0].rel_error,
                                                                        rel=1e-10)


def test_the_sweeps_csv_carries_each_methods_status_beside_its_error(tmp_path):
    """A bare number in the CSV was a fit cut short (interrupted, stopped on its limit) as much as a
    finished one; the table and the JSON said which."""
    import csv
    import io

    from sfapprox.formats import render_csv

    X = np.random.default_rng(0).random((24, 24))
    s = sweep(X, ["0.1", "sf"], ["sf", "tsvd"], device="cpu", max_iter=3)
    rows = list(csv.DictReader(io.StringIO(render_csv(s.tables()))))
    assert [(r["sf status"], r["tsvd status"]) for r in rows] == [("not applicable", "ok"), ("max_iter", "ok")]
    assert rows[1]["sf"] and float(rows[1]["sf"]) == s.points[1].results[0].rel_error


def test_the_sweeps_csv_leaves_a_method_without_an_error_empty():
    """A method that did not apply wrote "n/a" in its column of errors: a reader (pandas.read_csv) took
    the column for text, and "failed" is no missing value to any reader; the cell is empty, and its
    status column says why."""
    import csv
    import io

    from sfapprox.formats import render_csv

    X = np.random.default_rng(0).random((16, 16)) - 0.5
    s = sweep(X, ["0.3", "0.5"], ["tsvd", "nmf"], device="cpu", max_iter=3)
    rows = list(csv.DictReader(io.StringIO(render_csv(s.tables()))))
    assert [(r["nmf"], r["nmf status"]) for r in rows] == [("", "not applicable")] * 2
    assert [float(r["tsvd"]) for r in rows] == [p.result("tsvd").rel_error for p in s.points]


def test_default_budgets_say_when_a_method_runs_at_none_of_them(tmp_path):
    """At N = 8 SF needs 72 stored numbers, more than the 64 entries the budgets are capped at: the note
    said the budgets were where every method applies, and SF was n/a at all of them."""
    from sfapprox.sweep import beyond_dense, default_budgets

    assert default_budgets(8, ["sf", "tsvd"]) == ["36", "64"] and beyond_dense(8, ["sf", "tsvd"]) == {"sf": 72}
    path = tmp_path / "t8.npy"
    np.save(path, np.random.default_rng(1).standard_normal((8, 8)))
    res = CliRunner().invoke(app, ["sweep", str(path), "--methods", "sf,tsvd", "-q", "--iters", "3"])
    assert res.exit_code == 0, res.output
    assert "need more stored numbers than the matrix's own 64 entries (sf 72)" in " ".join(res.output.split())


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_a_figure_goes_through_to_a_device_or_standard_output(tmp_path, command):
    """--plot /dev/null was "cannot write a figure of type '(none)'" though outputs are written through
    there; a figure on standard output takes it from the tables (which go to stderr)."""
    import subprocess
    import sys

    pytest.importorskip("matplotlib")
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    extra = ["--budgets", "0.3"] if command == "sweep" else []
    run = lambda plot, *more: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "sfapprox", command, str(path), "--methods", "tsvd", "-q", "--plot", plot, *extra,
         *more], capture_output=True, timeout=120)
    assert run("/dev/null").returncode == 0
    png = run("/dev/stdout")
    assert png.returncode == 0 and png.stdout[:8] == b"\x89PNG\r\n\x1a\n", png.stderr
    both = run("/dev/stdout", "--json", "-")
    assert both.returncode == 2 and b"only one output can go to standard output" in both.stderr


def test_a_budget_clamped_to_n_squared_is_swept_from_columns():
    """From columns, a budget above N² that fits the memory limit was handed on as its clamped text
    "30000 (clamped to N^2 = 22500)", which was refused as a malformed budget: the whole sweep failed."""
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(3).standard_normal((150, 3)), bandwidth=1.0, name="k")
    s = sweep(K, "0.02,30000", ["nystrom"], settings=FitSettings(device="cpu", max_memory=8 * K.formed_bytes))
    assert s.matrix["path"] == "columns" and [p.budget for p in s.points] == [450, 22500]
    assert s.points[1].results[0].status == "ok" and s.points[1].budget_spec == "30000 (clamped to N^2 = 22500)"
    assert any(n.startswith("budget 30000 (30,000 stored numbers) is above the 22,500 entries") for n in s.points[1].notes)


def test_a_reason_given_at_several_budgets_is_said_once_with_them():
    """The same "too small" reason at every budget differed by its budget alone: one line per budget."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    points = [Comparison({"name": "m", "n": 8}, b, str(b),
                         [MethodResult("sf", "not applicable", reason=f"budget {b:,} is too small (needs 72)")])
              for b in (10, 20, 1000)]
    notes = [n for n in Sweep({"name": "m", "n": 8}, ["sf"], points).tables()[0].notes if n.startswith("sf")]
    assert notes == ["sf at budgets 10, 20, 1,000: the budget is too small (needs 72)"]
    one = Sweep({"name": "m", "n": 8}, ["sf"], points[:1]).tables()[0].notes
    assert "sf: budget 10 is too small (needs 72)" in one


def test_a_reason_given_at_many_budgets_names_them_by_their_ends():
    """A sweep of 40 budgets said "monarch at budgets 81, 163, 245, ..., 983" (four lines at 80 columns),
    and a stop early in it listed every budget it skipped: a run of budgets is said by its ends now."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    budgets = list(range(100, 4100, 100))
    points = [Comparison({"name": "m", "n": 64}, b, str(b),
                         [MethodResult("monarch", "not applicable", reason=f"budget {b:,} is too small (needs 1024)")
                          if b < 1024 else MethodResult("monarch", "ok", fro_error=1.0, rel_error=0.5),
                          MethodResult("sf", "failed", reason=f"budget {b:,} failed") if b % 200 else
                          MethodResult("sf", "ok", fro_error=1.0, rel_error=0.5)])
              for b in budgets[:30]]
    stopped = Sweep({"name": "m", "n": 64}, ["monarch", "sf"], points, skipped=budgets[30:])
    notes = stopped.tables()[0].notes
    assert "skipped: the sweep was stopped before the 10 budgets 3,100 to 4,000" in notes
    assert "monarch at the 10 budgets 100 to 1,000: the budget is too small (needs 1024)" in notes
    assert "sf at budgets 100, 300, 500 and 12 more, up to 2,900: the budget failed" in notes
    from sfapprox.cli.sweep import _stopped_line

    assert _stopped_line("Ctrl-C", stopped).endswith("skipped (the 10 budgets 3,100 to 4,000)")


def test_a_stop_that_left_many_methods_unrun_is_one_short_note():
    """Many methods left unrun, at several budgets, were one "and" list of "and" lists ("tsvd, rpca, nmf,
    ..., sparse at budget 1,000, tsvd, rpca, ... at budget 2,000 and budget 4,000"): budgets that left the
    same methods unrun are named together, past three methods they are counted, and the parts are parted
    by semicolons."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    methods = ["sf", "tsvd", "rpca", "nmf", "sparse", "monarch", "butterfly-hier"]
    points = [Comparison({"name": "m", "n": 64}, b, str(b), [MethodResult("sf", "interrupted")]) for b in (1000, 2000)]
    stopped = Sweep({"name": "m", "n": 64}, methods, points, skipped=[4000])
    notes = [n for n in stopped.tables()[0].notes if n.startswith("skipped:")]
    assert notes == ["skipped: the sweep was stopped before tsvd, rpca and 4 more methods at budgets 1,000, 2,000; "
                     "every method at budget 4,000"]


def test_a_stop_note_says_which_methods_a_budget_never_reached_left_out():
    """"sf at budgets 1,000, 2,000 and budget 4,000" read as sf alone skipped at 4,000 (semicolons came only
    with an " and " in a part): the budgets never reached are every method's, and a part's own list (a
    comma) parts them by semicolons."""
    from sfapprox.sweep import stopped_note

    assert stopped_note({1000: ["sf"], 2000: ["sf"]}, [4000], [1000, 2000, 4000]) == \
        "skipped: the sweep was stopped before sf at budgets 1,000, 2,000; every method at budget 4,000"
    assert stopped_note({1000: ["sf"]}, [2000, 4000], [1000, 2000, 4000]) == \
        "skipped: the sweep was stopped before sf at budget 1,000; every method at budgets 2,000, 4,000"
    assert stopped_note({}, [2000, 4000], [1000, 2000, 4000]) == "skipped: the sweep was stopped before budgets 2,000, 4,000"


@pytest.mark.parametrize("count, text", [(4, "m0, m1, m2 and m3"), (5, "m0, m1 and 3 more methods"),
                                         (1206, "m0, m1 and 1,204 more methods")])
def test_a_stop_note_names_up_to_four_methods_then_counts(count, text):
    """Four methods named are as short as "m0, m1 and 2 more methods": named; past four, counted as
    :func:`~sfapprox.formats.listed` counts."""
    from sfapprox.sweep import stopped_note

    assert stopped_note({10: [f"m{i}" for i in range(count)]}, [], [10]) == \
        f"skipped: the sweep was stopped before {text} at budget 10"


def test_a_method_a_stop_left_unrun_at_its_point_is_skipped(monkeypatch):
    """A notebook's sweep stopped (Ctrl-C) during tsvd, run first, showed sf's cell at that budget as "–"
    with no note, where the point's comparison said "not run, the comparison was stopped first: sf"."""
    import csv
    import io

    import sfapprox.sweep as sweep_module
    from sfapprox.formats import render_csv

    real = sweep_module.run_all

    def stopped(names, *args, **kwargs):
        rows = real([n for n in names if n == "tsvd"], *args, **kwargs)
        rows[0].status = "interrupted"  # a Ctrl-C during tsvd's fit: the later methods not run
        return rows

    monkeypatch.setattr(sweep_module, "run_all", stopped)
    s = sweep(np.random.default_rng(0).random((12, 12)), [0.3, 0.5], ["sparse", "tsvd"])
    table = s.tables()[0]
    assert table.rows[0]["sparse"] == "skipped"
    # one note for both: the method left unrun where the stop came and the budget never reached after it
    stops = [n for n in table.notes if n.startswith("skipped:")]
    assert stops == ["skipped: the sweep was stopped before sparse at budget 43 and every method at budget 72"]
    rows = list(csv.DictReader(io.StringIO(render_csv(s.tables()))))
    assert [(r["sparse status"], r["tsvd status"]) for r in rows] == [("skipped", "interrupted"), ("skipped", "skipped")]


def test_the_budgets_a_stop_left_unreached_are_rows_of_skipped(monkeypatch):
    """An interrupted sweep's CSV ended at the point it stopped, with no sign of the budgets after it."""
    import csv
    import io

    import sfapprox.sweep as sweep_module
    from sfapprox.formats import render_csv

    real = sweep_module.run_all

    def stopped(names, *args, **kwargs):
        rows = real(names, *args, **kwargs)
        rows[0].status = "interrupted"  # a Ctrl-C during the first budget's fit
        return rows

    monkeypatch.setattr(sweep_module, "run_all", stopped)
    s = sweep(np.random.default_rng(0).random((12, 12)), [0.3, 0.5, 0.8], ["tsvd"])
    assert [p.budget for p in s.points] == [43] and s.skipped == [72, 115] and s.to_dict()["skipped"] == [72, 115]
    rows = list(csv.DictReader(io.StringIO(render_csv(s.tables()))))
    assert [(r["budget"], r["tsvd status"]) for r in rows] == [("43", "interrupted"), ("72", "skipped"),
                                                               ("115", "skipped")]
    assert rows[1]["tsvd"] == "" and any("stopped before budgets 72, 115" in n for n in s.tables()[0].notes)
    monkeypatch.undo()
    whole = sweep(np.random.default_rng(0).random((12, 12)), [0.3, 0.5], ["tsvd"])
    assert whole.skipped == []


def test_a_grouped_reason_keeps_its_own_words_about_the_budget():
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    points = [Comparison({"name": "m", "n": 8}, b, str(b),
                         [MethodResult("sf", "not applicable", reason=f"stores 960 numbers, over the budget {b}")])
              for b in (100, 200)]
    notes = [n for n in Sweep({"name": "m", "n": 8}, ["sf"], points).tables()[0].notes if n.startswith("sf")]
    assert not any("the the" in n for n in notes), notes


def test_old_sweep_keywords_map_to_todays_with_a_note_at_the_callers_line():
    """sweep(X=, options=RunOptions(...)) was a TypeError once RunOptions was removed."""
    import warnings

    import sfapprox

    X = np.random.default_rng(0).random((12, 12))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = sweep(X=X, budgets=[0.5, 1.0], methods=["tsvd"],
                    options=sfapprox.RunOptions(random_state=4, sf={"max_iter": 10, "time_limit": None}))
    notes = [w for w in caught if w.category is DeprecationWarning]
    assert [str(w.message).split(" is deprecated")[0] for w in notes] == ["RunOptions", "sweep(X=)", "sweep(options=)"]
    assert all(w.filename == __file__ for w in notes)
    new = sweep(X, [0.5, 1.0], ["tsvd"], seed=4, max_iter=10, time_limit=None)
    assert old.settings == new.settings and old.settings["seed"] == 4
    assert [(p.budget, [r.fro_error for r in p.results]) for p in old.points] == \
        [(p.budget, [r.fro_error for r in p.results]) for p in new.points]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # a sweep fixes no SF structure any more (compare(structure=) does, at one budget)
        with pytest.raises(ParameterError, match="options.sf holds n_factors, an SF structure fixed by hand, which sweep"):
            sweep(X, [0.5], ["tsvd"], options=sfapprox.RunOptions(sf={"n_factors": 2}))
        with pytest.raises(ParameterError, match=r"\(got options= with seed=\)"):
            sweep(X, [0.5], ["tsvd"], options=sfapprox.RunOptions(), seed=1)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'budgets'"):
        sweep(X)


def test_the_sweeps_csv_carries_an_estimated_errors_interval(tmp_path):
    """The table shows an error estimated from random columns (a matrix never formed) as "0.068 ± 0.0019"; the
    CSV had the bare value, read as exact (compare's CSV gives the interval's ends as columns)."""
    import csv
    import io

    from sfapprox.formats import render_csv

    X = np.random.default_rng(0).random((24, 24))
    s = sweep(X, ["0.1", "0.2"], ["tsvd", "sparse"], device="cpu")
    row = s.points[1].results[0]
    row.error_estimate = {"exact": False, "fro_interval": [0.9 * row.fro_error, 1.1 * row.fro_error],
                          "rel_interval": [0.9 * row.rel_error, 1.1 * row.rel_error], "columns": 12,
                          "columns_advised": 0}
    (table,) = s.tables()
    assert " ± " in table.rows[1]["tsvd"]
    rows = list(csv.DictReader(io.StringIO(render_csv([table]))))
    assert float(rows[1]["tsvd 95% low"]) == pytest.approx(0.9 * row.rel_error)
    assert float(rows[1]["tsvd 95% high"]) == pytest.approx(1.1 * row.rel_error)
    assert rows[0]["tsvd 95% low"] == "" and "sparse 95% low" not in rows[0]  # exact: empty; no column for sparse


def test_a_zero_matrix_s_sweep_shows_absolute_errors():
    """Relative errors do not exist for X = 0: every cell was "–"; the table shows the absolute ones."""
    s = sweep(np.zeros((16, 16)), [50, 100], ["tsvd", "sparse"])
    table = s.tables()[0]
    assert "absolute error by budget (X is all zeros)" in table.title
    assert all(row[m] == "0" for row in table.rows for m in ("tsvd", "sparse"))
    assert all(d["tsvd"] == 0.0 for d in table.data)


def test_an_interrupted_sweep_names_what_stopped_it(tmp_path, monkeypatch):
    """A stopped sweep ended with "interrupted: budgets not reached were skipped", where fit and compare
    say "interrupted (Ctrl-C) ..." or "(SIGTERM)": the same stop now reads the same in every command."""
    import sfapprox.comparison as comparison

    def interrupt(name, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(comparison, "run_method", interrupt)
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    res = CliRunner().invoke(app, ["sweep", str(path), "--budgets", "0.3,0.6", "--methods", "tsvd", "--quiet"])
    assert res.exit_code == 130, res.output
    assert "interrupted (Ctrl-C): budgets not reached were skipped" in " ".join(res.output.split())


@pytest.mark.parametrize("budgets", [b"0.1", bytearray(b"0.1,0.2")])
def test_budgets_given_as_bytes_are_refused_not_read_as_byte_values(budgets):
    """sweep(X, b"0.1") swept the budgets 46, 48 and 49 (the bytes' values), without a word."""
    with pytest.raises(ParameterError, match="not (bytes|bytearray).*decode it first"):
        sweep(np.eye(8), budgets, ["tsvd"])


def test_a_stop_during_the_last_budget_says_none_was_skipped(tmp_path, monkeypatch):
    """A Ctrl-C during the last budget ended with "budgets not reached were skipped", where every budget
    had its row; the rows a stop skips are named."""
    import sfapprox.comparison as comparison

    real, calls = comparison.run_method, []

    def interrupt_the_second(name, *args, **kwargs):
        calls.append(name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(comparison, "run_method", interrupt_the_second)
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    res = CliRunner().invoke(app, ["sweep", str(path), "--budgets", "0.3,0.6", "--methods", "tsvd", "--quiet"])
    said = " ".join(res.output.split())
    assert res.exit_code == 130 and "skipped" not in said.replace("no budget was skipped", ""), res.output
    assert "interrupted (Ctrl-C) during the last budget (153): no budget was skipped" in said
    calls.clear()
    res = CliRunner().invoke(app, ["sweep", str(path), "--budgets", "0.1,0.3,0.6", "--methods", "tsvd", "--quiet"])
    assert "interrupted (Ctrl-C): budgets not reached were skipped (153)" in " ".join(res.output.split())


@pytest.mark.parametrize("bad, match", [
    (dict(settings={"seed": 1}), r"^settings must be a FitSettings, got dict"),
    (dict(count_indices="no"), r"^count_indices must be True or False"),
    (dict(on_result="print"), r"^on_result must be a function"),
])
def test_arguments_of_the_wrong_type_are_refused_before_any_fit(bad, match):
    with pytest.raises(ParameterError, match=match):
        sweep(np.eye(8), [0.5], ["tsvd"], **bad)


# ----------------------------------------------------------------------------- in a notebook and a REPL
def _notebook_sweep(name="graph", budgets=(40, 80), skipped=()):
    """A sweep as sweep() makes it: at each budget a point of full rows (their params long)."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    info = {"name": name, "n": 10, "fro_norm": 5.0, "path": f"/data/{name}.mtx"}
    long = {"offsets": list(range(40)), "stop_reason": "ftol"}
    points = [Comparison(info, b, str(b), [
        MethodResult("sf", "not applicable", reason=f"budget {b} is too small") if b < 60 else
        MethodResult("sf", "ok", b, 2.0 / b, 0.4 / b, 0.5, long),
        MethodResult("tsvd", "ok", b - 2, 3.0 / b, 0.6 / b + 0.0123456789, 0.1, {"rank": 2})]) for b in budgets]
    return Sweep(info, ["sf", "tsvd"], points, settings={"seed": 0}, versions={"sfapprox": "0.1.0"},
                 skipped=list(skipped))


def test_a_sweep_s_repr_is_a_line_per_budget_with_its_errors_and_the_smallest_starred():
    """In a notebook, ``s`` showed a 2,400-character dataclass repr (every point's every field); it says
    what the table says, a budget a line."""
    assert repr(_notebook_sweep()).splitlines() == [
        "Sweep: graph (N=10): relative error by budget",
        "  budget 40 (40.00% of N²): sf n/a, tsvd 0.02735",  # (one method scored: no ★)
        "  budget 80 (80.00% of N²): sf 0.005 ★, tsvd 0.01985"]


def test_a_long_sweep_s_repr_gives_its_first_and_last_budgets():
    from sfapprox.sweep import REPR_BUDGETS

    text = repr(_notebook_sweep(budgets=range(60, 460, 10), skipped=[460, 470]))
    lines = text.splitlines()
    assert len(lines) == 1 + REPR_BUDGETS and "offsets" not in text
    assert lines[1].startswith("  budget 60 (") and lines[-1].startswith("  budget 470 (")
    assert lines[-1].endswith("sf skipped, tsvd skipped")
    assert "  ... 37 more budgets ..." in lines


def test_a_sweep_shows_as_its_table_in_a_notebook_every_text_escaped():
    s = _notebook_sweep("<b>x&y</b>")
    html = s._repr_html_()
    assert "<b>x&y</b>" not in html and "&lt;b&gt;x&amp;y&lt;/b&gt;" in html
    # (at budget 40 tsvd alone was scored: no winner, nothing bold)
    assert "<b>0.02735</b>" not in html and "<b>0.005</b>" in html and html.count("<tr>") == 1 + len(s.points)
    assert "sf: budget 40 is too small" in html  # the table's notes, under it


def test_a_sweep_s_frame_holds_the_values_of_its_csv():
    pytest.importorskip("pandas")
    from _frames import assert_frame_is_the_csv

    s = _notebook_sweep(budgets=(40, 80), skipped=[120])
    frame = s.to_frame()
    assert frame["budget"].tolist() == [40, 80, 120] and frame["tsvd"].tolist()[:2] == [
        p.result("tsvd").rel_error for p in s.points]
    assert frame["sf status"].tolist() == ["not applicable", "ok", "skipped"]
    assert_frame_is_the_csv(frame, s.tables())


def test_a_display_is_told_each_budget_as_it_starts():
    """A sweep's progress bar named the method alone, the same at every budget (at N = 3,000 a user watched
    "rsvd" come back ten times without knowing which budget ran); on_result's ``budget_starting`` hook is
    now called with each budget, its place and the count, on the formed path and from columns alike."""
    from sfapprox.sources import KernelMatrix

    seen = []

    def on_result(budget, row):
        seen.append(("row", budget, row.method))

    on_result.budget_starting = lambda value, index, count: seen.append(("budget", value, index, count))
    sweep(np.random.default_rng(0).random((12, 12)), [40, 0.5], ["tsvd"], on_result=on_result)
    assert seen == [("budget", 40, 1, 2), ("row", 40, "tsvd"), ("budget", 72, 2, 2), ("row", 72, "tsvd")]
    seen.clear()
    K = KernelMatrix(np.random.default_rng(3).standard_normal((150, 3)), bandwidth=1.0, name="k")
    sweep(K, "0.02,0.05", ["nystrom"], on_result=on_result, settings=FitSettings(max_memory=2 * K.formed_bytes))
    assert [s for s in seen if s[0] == "budget"] == [("budget", 450, 1, 2), ("budget", 1125, 2, 2)]


def test_budgets_no_method_fits_from_columns_are_said_once():
    """Four budgets over the memory limit from columns gave four near-identical long notes (each its own
    refusal) and a line per method saying "over the memory limit ... at this budget" without naming it;
    the refusal at the smallest is now said once, naming them, and the methods' shared reason once."""
    import sfapprox

    K = sfapprox.KernelMatrix(np.random.default_rng(0).standard_normal((600, 3)), kernel="rbf", bandwidth=1.5)
    settings = sfapprox.FitSettings(time_limit=2, max_memory=4 << 20)
    result = sweep(K, budgets=[0.02, 0.5, 0.7, 0.9], methods=["rsvd", "sparse"], settings=settings)
    (table,) = result.tables()
    refusals = [n for n in table.notes if "no method asked for fits the memory limit" in n]
    assert len(refusals) == 1 and refusals[0].startswith("note: budgets 180,000, 252,000, 324,000: ")
    over = [n for n in table.notes if "over the memory limit from columns" in n]
    assert over == ["every method at budgets 180,000, 252,000, 324,000: over the memory limit from columns "
                    "at the budget"]
    # each point keeps the note in its own record (the JSON)
    assert all(refusals[0][len("note: "):] in p.notes for p in result.points[1:])


def test_a_note_each_budget_gives_alike_is_said_once_with_its_budgets():
    """A sweep from columns ended in a note per budget, the same words but for the budget and the seconds
    ("budget 9,000: pts: not formed (68.7 MiB dense); ... scored exactly ... in 0.4 s", ten lines for ten
    budgets); it is said once, with the budgets and the range of the seconds."""
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(3).standard_normal((150, 3)), bandwidth=1.0, name="k")
    s = sweep(K, "0.02,0.05,0.1", ["nystrom"], settings=FitSettings(max_memory=2 * K.formed_bytes))
    (table,) = s.tables()
    scored = [n for n in table.notes if "not formed" in n]
    assert len(scored) == 1 and scored[0].startswith("note: budgets 450, 1,125, 2,250: k: not formed"), scored
    assert re.search(r"in [0-9.]+(-[0-9.]+)? s each$", scored[0]), scored
    assert all(any(n.startswith(f"budget {p.budget:,}: k: not formed") for n in p.notes) for p in s.points)


def test_a_budget_given_twice_is_said_as_given_twice():
    """"--budgets 0.1,0.1" said "budgets 0.1, 0.1 all come to 1,600 stored numbers": two budgets, it read."""
    X = np.random.default_rng(0).random((40, 40))
    s = sweep(X, ["0.1", "0.2", "0.1", 320, "0.2"], ["tsvd"])
    assert [p.budget for p in s.points] == [160, 320]
    assert s.points[0].notes == ["budget 0.1 is given 2 times: one point"]
    assert s.points[1].notes == ["budgets 0.2 (given 2 times), 320 all come to 320 stored numbers at N = 40: one point"]


def test_a_sweep_from_columns_records_its_matrix_as_one_formed():
    """The sweep's matrix record (and each point's, the over-the-limit one's included) had "source" for
    "recipe" and no "fro_norm" from columns: the keys of a formed matrix's, and the table reads both."""
    from sfapprox.comparison import MATRIX_KEYS
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(1).standard_normal((400, 3)), bandwidth=1.0)
    streamed = sweep(K, [0.02, 0.3], "rsvd", max_memory=2 << 20, time_limit=None)
    formed = sweep(K, [0.02], "rsvd", time_limit=None)
    assert "over the memory limit" in streamed.points[1].results[0].reason
    assert streamed.points[0].results[0].error_estimate["exact"]
    for record in (streamed.matrix, *(p.matrix for p in streamed.points), formed.matrix):
        assert set(record) == set(MATRIX_KEYS) and record["recipe"] == record["source"] == K.recipe
    assert streamed.to_dict()["matrix"]["fro_norm"] == pytest.approx(formed.matrix["fro_norm"], rel=1e-12)
    assert streamed.points[1].matrix["fro_norm"] is None and streamed.points[1].matrix["unknown"]["fro_norm"]
    assert streamed.tables()[0].title.startswith("kernel (N=400)") and formed.tables()[0].title.startswith("kernel")


def test_a_bad_budget_names_the_option_and_its_item(tmp_path):
    """A bad item said "budget must be ..." alone: not which option, nor which of its items."""
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((10, 10)))
    out = CliRunner().invoke(app, ["sweep", str(path), "--budgets", "0.1,0.2,-1", "--methods", "tsvd"])
    text = " ".join(out.output.split())
    assert out.exit_code == 2 and "error: --budgets: item 3 ('-1'): budget must be a finite positive" in text, text
    assert len(out.output.strip().splitlines()) == 1  # (one line, no traceback)
    # sweep()'s own parameter, items counted as given (an empty one too) and numbers shown as passed
    with pytest.raises(ParameterError, match=r"^budgets: item 3 \(2\.5\): budget 2\.5 is neither"):
        sweep(np.eye(10), [0.1, "", 2.5], ["tsvd"])
    # the hint for a thousands separator stays
    with pytest.raises(ParameterError, match=r"^--budgets: item 2 \('000'\): .*write 1000, not 1,000"):
        parse_budget_list("1,000")


def _json_again(data):
    """``data`` as a file holds it (written and parsed: tuples become lists, infinity null)."""
    return json.loads(json.dumps(data, allow_nan=False))


def test_a_sweep_read_back_from_its_json_is_the_same_sweep():
    """``report FILE.json`` could not re-read sweep's JSON (no from_dict): every point comes back, with the
    sweep's matrix, settings and versions, its rows' reasons and notes, and the budgets a stop skipped, so its
    table (text, notes, CSV) and its JSON are the original's."""
    from sfapprox.formats import OutputFormat
    from sfapprox.sweep import Sweep

    X = np.random.default_rng(3).standard_normal((16, 16))  # negative entries: nmf is not applicable
    s = sweep(X, ["0.2", "0.5", "1e30"], ["tsvd", "sparse", "nmf"], time_limit=None)
    s.skipped = [250]  # (as a stop leaves them)
    s.points[0].results[0].error_estimate = {"exact": False, "fro_interval": (1.0, float("inf")),
                                             "rel_interval": (0.1, float("inf")), "columns": 4, "columns_advised": 16}
    again = Sweep.from_dict(_json_again(s.to_dict()))
    assert again.to_dict() == s.to_dict() and again.skipped == [250]
    assert [p.budget_spec for p in again.points] == [p.budget_spec for p in s.points]
    assert again.points[-1].budget_spec == "1e30 (clamped to N^2 = 256)"
    assert all(p.matrix is again.matrix and p.settings == s.settings for p in again.points)
    (table,), (before,) = again.tables(), s.tables()
    assert (table.title, table.rows, table.notes, table.data) == (before.title, before.rows, before.notes, before.data)
    for fmt in (OutputFormat.CSV, OutputFormat.MARKDOWN, OutputFormat.LATEX):
        assert fmt.render(again.tables(), None) == fmt.render(s.tables(), None)
    assert repr(again) == repr(s)


def test_a_sweep_s_rows_of_a_method_this_sfapprox_does_not_know_are_shown_as_recorded_with_a_warning():
    """As a comparison's (a newer sfapprox's method, a plugin's): read, its column shown, one warning naming it."""
    from sfapprox.sweep import Sweep

    s = sweep(np.random.default_rng(0).random((12, 12)), ["0.3", "0.6"], ["tsvd"], time_limit=None)
    data = _json_again(s.to_dict())
    data["methods"] = ["tsvd2"]
    for point in data["points"]:
        point["results"][0]["method"] = "tsvd2"
    with pytest.warns(UserWarning, match=r"^'tsvd2' \(points\[0\]\.results\[0\]\.method, and 1 more row\): a "
                                         r"method this sfapprox does not know"):
        again = Sweep.from_dict(data)
    assert again.tables()[0].rows[0]["tsvd2"] == s.tables()[0].rows[0]["tsvd"]


@pytest.mark.parametrize("change, said", [
    (lambda d: d["points"][1]["results"][0].update(rel_error=[0.3]),
     r"^key points\[1\]\.results\[0\]\.rel_error must be a finite number >= 0 or null, got a list$"),
    (lambda d: d["points"][0].pop("budget"), r"^key points\[0\]\.budget is missing$"),
    (lambda d: d.pop("points"), r"^key points is missing$"),
    (lambda d: d.update(methods="tsvd"), r"^key methods must be a list of non-empty strings, got 'tsvd'$"),
    (lambda d: d.update(skipped=[0]), r"^key skipped must be a list of whole numbers from 1 to "),
    (lambda d: d["matrix"].update(n=2.5), r"^key matrix\.n must be a whole number from 1 to "),
    (lambda d: d["points"][1]["results"][0].update(seconds=float("nan")),
     r"^key points\[1\]\.results\[0\]\.seconds is NaN"),
    (lambda d: d.update(version=3), r"^key version is 3: a newer sfapprox wrote it \(this one reads sfapprox-sweep "),
    # a (method, budget) cell given twice: a point's second row, or a second point of one budget (table() kept
    # one of each without a word), and a second column of one method
    (lambda d: d["points"][1]["results"].append(dict(d["points"][1]["results"][0])),
     r"^key points\[1\]\.results\[1\]\.method is 'tsvd', as points\[1\]\.results\[0\]\.method is: "),
    (lambda d: d["points"][1].update(budget=d["points"][0]["budget"]),
     r"^key points\[1\]\.budget is \d+, as points\[0\]\.budget is: a sweep has one point per budget"),
    (lambda d: d["methods"].append("tsvd"), r"^key methods\[1\] is 'tsvd', as methods\[0\] is: a sweep names each "),
    # a budget both run and skipped (its table showed it twice), or skipped twice
    (lambda d: d.update(skipped=[500, d["points"][1]["budget"]]),
     r"^key skipped\[1\] is \d+, as points\[1\]\.budget is: a budget a sweep ran is not also skipped$"),
    (lambda d: d.update(skipped=[500, 500]), r"^key skipped\[1\] is 500, as skipped\[0\] is: a sweep skips each "),
    # a row without a column: the table showed no sign of it
    (lambda d: d["points"][0]["results"][0].update(method="sparse"),
     r"^key points\[0\]\.results\[0\]\.method is 'sparse', which key methods does not name \(the sweep's "
     r"columns: tsvd\)$"),
])
def test_an_edited_or_damaged_sweep_is_refused_naming_its_key(change, said):
    from sfapprox import InputError
    from sfapprox.sweep import Sweep

    s = sweep(np.random.default_rng(0).random((12, 12)), ["0.3", "0.6"], ["tsvd"], time_limit=None)
    data = _json_again(s.to_dict())
    change(data)
    with pytest.raises(InputError, match=said):
        Sweep.from_dict(data)


def test_a_sweep_says_what_its_time_limits_add_up_to(tmp_path):
    """Each budget gives the time limits again: 5 default budgets of tsvd, sparse and sf at N = 3,000 took
    4.7 minutes, where the README's "about two minutes" is a comparison's, and nothing said so before."""
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    args = ["sweep", str(path), "--budgets", "0.3,0.6", "--methods", "tsvd,sf", "--iters", "3"]
    res = CliRunner().invoke(app, [*args, "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    assert ("note: the time limits add up to 4 s (2 s at each of 2 budgets; the closed forms, the scoring and "
            "each fit's setup come on top; --time-limit SECONDS sets each method's)") in " ".join(res.output.split())
    res = CliRunner().invoke(app, [*args])  # the default limit: sf's 60 s at each budget
    assert res.exit_code == 0 and "add up to 2 minutes (60 s at each of 2 budgets" in " ".join(res.output.split())
    for more in (["--time-limit", "0"], ["--time-limit", "2", "--quiet"]):  # no limit to add up; quiet
        res = CliRunner().invoke(app, [*args, *more])
        assert res.exit_code == 0 and "add up to" not in res.output, res.output


def test_the_time_limits_note_writes_long_limits_whole_and_one_budget_plainly(capsys):
    # 1,200 s at each budget read "1.2e+03 s"; one budget said "(3.6e+03 s at each of 1 budget"
    from sfapprox.cli.sweep import _say_limits

    _say_limits(["sf", "rpca", "nmf"], 5, 400.0)
    err = " ".join(capsys.readouterr().err.split())
    assert "(1,200 s at each of 5 budgets;" in err and "e+0" not in err
    _say_limits(["sf"], 1, 3600.0)
    err = " ".join(capsys.readouterr().err.split())
    assert "add up to 60 minutes (the closed forms" in err and "at each of" not in err


def test_a_sweep_s_title_writes_n_thousands_separated():
    """The title said "(N=3000)" above budgets written "90,000"."""
    sweep = _notebook_sweep()
    sweep.matrix = {**sweep.matrix, "n": 3000}
    assert sweep.tables()[0].title.startswith("graph (N=3,000): ")


def test_the_default_budgets_note_writes_them_thousands_separated(tmp_path):
    """The note said "budgets: 600, 1201, 1802" above a table whose budget column reads "1,201"."""
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((600, 600)))
    out = CliRunner().invoke(app, ["sweep", str(path), "--methods", "tsvd", "--time-limit", "0"])
    text = " ".join(out.output.split())
    assert out.exit_code == 0 and "budgets: 600, 1,201, 1,802, 2,402, 3,603 (0.5 to 3 times" in text, text


def _timed_sweep(fit_seconds: float | None, *, from_columns: bool = False):
    """A sweep of two budgets whose rows record seconds (and, unless None, the fits' own)."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    info = {"name": "graph", "n": 10, "fro_norm": 5.0, **({"compared_from": "columns"} if from_columns else {})}
    fit = {} if fit_seconds is None else {"fit_seconds": fit_seconds}
    points = [Comparison(info, b, str(b), [
        MethodResult("sf", "not applicable", reason="too small") if b < 60 else
        MethodResult("sf", "ok", b, 1.0, 0.2, 5.9, dict(fit)),
        MethodResult("tsvd", "ok", b - 2, 1.5, 0.3, 0.0123, {"fit_seconds": 0.01})]) for b in (40, 80)]
    return Sweep(info, ["sf", "tsvd"], points)


def test_a_sweep_s_table_gives_each_method_s_seconds_as_compare_s_does():
    """A sweep's table (terminal, markdown, a notebook's HTML) had no seconds though its JSON has them per
    point: each method's now has a column of them, in compare's format, with compare's note where a row's
    whole turn says much more than its fit's own; the CSV has the values."""
    from sfapprox.formats import render_markdown
    from sfapprox.results import SECONDS_NOTE, SECONDS_NOTE_COLUMNS

    s = _timed_sweep(1.76)
    (table,) = s.tables()
    assert [c.title for c in table.columns][-2:] == ["sf seconds", "tsvd seconds"]
    assert [(row["sf seconds"], row["tsvd seconds"]) for row in table.rows] == [("–", "0.01"), ("5.90", "0.01")]
    assert [d["sf seconds"] for d in table.data] == [None, 5.9]  # full precision in the CSV, empty where none
    assert table.notes.count(SECONDS_NOTE) == 1 and SECONDS_NOTE_COLUMNS not in table.notes
    markdown = render_markdown([table])
    assert "| sf seconds | tsvd seconds |" in markdown and "| 5.90 | 0.01 |" in markdown
    assert "<th>sf seconds</th>" in s._repr_html_().replace(' style="text-align: right"', "")
    # the fit's own seconds close to the whole turn: nothing to misread, no note (as compare)
    assert SECONDS_NOTE not in _timed_sweep(5.8).tables()[0].notes
    # from columns, scored in one joint pass outside every row's seconds: compare's note for that
    assert SECONDS_NOTE_COLUMNS in _timed_sweep(1.76, from_columns=True).tables()[0].notes


def test_an_older_sweep_file_without_seconds_shows_dashes():
    """A sweep's JSON written before its rows had seconds (or fit_seconds) still reads and shows: "–"."""
    from sfapprox.formats import render_markdown
    from sfapprox.sweep import Sweep

    data = _timed_sweep(None).to_dict()
    for point in data["points"]:
        for row in point["results"]:
            row.pop("seconds", None)
            row["params"].pop("fit_seconds", None)
    (table,) = Sweep.from_dict(data).tables()
    assert {row[f"{m} seconds"] for row in table.rows for m in ("sf", "tsvd")} == {"–"}
    assert "| – | – |" in render_markdown([table]) and not any(n.startswith("seconds:") for n in table.notes)


def test_default_budgets_are_never_1_where_1_reads_as_all_of_n2():
    """A default budget of 1 is read as the fraction 1 of N² (all 4 entries at N = 2): rpca's 0.5x ran at 4
    numbers, and the note merged it with the budget 4."""
    from sfapprox.sweep import default_budgets

    for n in (2, 3, 5):
        for methods in (["rpca"], ["sparse"], ["tsvd", "rpca"]):
            assert "1" not in default_budgets(n, methods), (n, methods)
    assert default_budgets(2, ["rpca"]) == ["2", "3", "4"] and default_budgets(1, ["tsvd"]) == ["1"]


def test_the_default_budgets_note_says_where_they_were_capped(tmp_path):
    """At N = 1 the note said "1 (0.5 to 3 times the smallest budget at which tsvd applies)", tsvd's smallest
    being 3, and "budget 1 is the fraction 1 of N^2" though no budget was typed."""
    path = tmp_path / "n1.npy"
    np.save(path, np.array([[3.0]]))
    out = CliRunner().invoke(app, ["sweep", str(path), "--methods", "tsvd"])
    text = " ".join(out.output.split())
    assert out.exit_code == 0, text
    assert "budgets: 1 (0.5 to 3 times the smallest budget at which tsvd applies, 3, capped at N² = 1)" in text
    assert "fraction 1" not in text
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((100, 100)))
    out = CliRunner().invoke(app, ["sweep", str(path), "--methods", "sf,tsvd", "--time-limit", "0", "--iters", "1"])
    text = " ".join(out.output.split())
    assert "apply, 3,500, capped at N² = 10,000)" in text, text
