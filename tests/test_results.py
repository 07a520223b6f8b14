"""Result records: JSON shape, winner, tables."""

import math

import pytest

from sfapprox.results import Comparison, MethodResult, details


def test_comparison_shape_and_winner():
    c = Comparison({"name": "m", "n": 4}, 10, "sf", [
        MethodResult("sf", "ok", 10, 1.0, 0.1, 0.5),
        MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1}),
        MethodResult("nmf", "not applicable", reason="negative"),
    ])
    d = c.to_dict()
    assert d["winner"] == "sf" and d["budget"] == 10
    assert set(d["results"][0]) == {"method", "status", "nnz", "fro_error", "rel_error", "seconds", "params", "reason",
                                    "min_budget", "time_limit", "error_estimate"}
    assert d["results"][2]["fro_error"] is None


def test_comparison_table_marks_the_winner():
    c = Comparison({"name": "m", "n": 4}, 10, "sf", [
        MethodResult("sf", "ok", 10, 1.0, 0.1, 0.5, {"n_factors": 2, "stop_reason": "ftol"}),
        MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1}),
    ])
    (table,) = c.tables()
    assert table.rows[0]["method"] == "sf ★" and table.best[0] and not table.best[1]
    assert table.rows[0]["details"] == "M=2 stop=ftol" and table.rows[1]["seconds"] == "0.10"


def test_a_table_title_names_the_variable_picked_in_its_file():
    """A weight --var picked (a .npz or .mat variable, a source's arrays): the title named the file alone."""
    rows = [MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1})]
    picked = Comparison({"name": "model", "n": 4, "recipe": {"var": "layers.0.attn.q.weight"}}, 10, "sf", rows)
    assert picked.tables()[0].title.startswith("model:layers.0.attn.q.weight  (N=4, budget 10")
    columns = Comparison({"name": "attn", "n": 4, "source": {"kind": "attention", "var": "q,k"}}, 10, "sf", rows)
    assert columns.tables()[0].title.startswith("attn:q,k  (N=4")
    assert Comparison({"name": "graph", "n": 4}, 10, "sf", rows).tables()[0].title.startswith("graph  (N=4")


def _row(method, fro, **params):
    return MethodResult(method, "ok", 10, fro, fro / 10, 0.1, params)


def test_verdicts():
    info = {"name": "m", "n": 8}
    exact_sparse = Comparison(info, 100, "sf", [_row("sf", 1.0), _row("sparse", 0.0, exact=True, nnz=12)])
    assert exact_sparse.verdict()["text"].startswith("exact sparse storage is cheapest: X's 12 non-zeros")
    sf_wins = Comparison(info, 100, "sf", [_row("sf", 1.0), _row("tsvd", 3.2), _row("sf-symmetric", 1.5)])
    v = sf_wins.verdict()
    assert v["winner"] == "sf" and v["text"] == "SF wins by 3.2x over low rank (TSVD)" and v["ratio"] == 3.2
    low_rank = Comparison(info, 100, "sf", [_row("sf", 2.1), _row("tsvd", 1.0)])
    assert low_rank.verdict()["text"] == "low rank (TSVD) wins: SF's error is 2.1x larger"
    assert Comparison(info, 100, "sf", []).verdict() is None
    assert "verdict" in low_rank.to_dict() and low_rank.tables()[0].notes[-1].startswith("verdict: low rank")


def test_a_verdict_ratio_of_a_thousand_or_more_reads_as_a_number_not_scientific_notation():
    """A low-rank kernel's verdict said "SF's error is 1.07e+03x larger" (``.3g``); it reads "1,070x"."""
    info = {"name": "m", "n": 8}
    kernel = Comparison(info, 100, "sf", [_row("sf", 1070.4), _row("nystrom", 1.0)])
    assert kernel.verdict()["text"].endswith("SF's error is 1,070x larger")
    assert kernel.verdict()["ratio"] == 1070.4  # the JSON keeps the full number
    huge = Comparison(info, 100, "sf", [_row("sf", 1.0), _row("tsvd", 2.3456e7)])
    assert huge.verdict()["text"] == "SF wins by 23,500,000x over low rank (TSVD)"
    small = Comparison(info, 100, "sf", [_row("sf", 999.0), _row("tsvd", 1.0)])
    assert small.verdict()["text"].endswith("SF's error is 999x larger")


def test_a_row_stopped_early_with_a_smaller_error_is_named_beside_the_star_and_the_verdict():
    """Ctrl-C during SF kept its best point (rel 0.66) beside TSVD's 0.76: the star and the verdict went
    to TSVD without a word, which read as wrong. A stopped row is still not ranked, but it is named."""
    info = {"name": "m", "n": 8}
    stopped = MethodResult("sf", "interrupted", 10, 0.66, 0.066, 0.1, {"stop_reason": "interrupted"})
    c = Comparison(info, 100, "sf", [_row("tsvd", 0.76), _row("nmf", 0.9), stopped])
    assert c.winner() == "tsvd" and c.stopped_ahead() == [stopped]
    assert c.verdict()["text"] == ("low rank (TSVD) wins (of the methods that finished; sf, stopped early at "
                                   "0.066 relative, is not ranked)")
    notes = c.tables()[0].notes
    assert "★ smallest error at this budget: tsvd of the methods that finished" in notes
    behind = Comparison(info, 100, "sf", [_row("tsvd", 0.5), _row("nmf", 0.9), stopped])  # behind the winner: nothing to say
    assert behind.stopped_ahead() == [] and behind.verdict()["text"] == "low rank (TSVD) wins"
    assert "★ smallest error at this budget: tsvd" in behind.tables()[0].notes


def test_three_rows_stopped_early_are_named_as_a_sentence_lists_them():
    """Rows stopped ahead of the winner were joined by "and" each ("sf and rpca and nmf"); they read as
    a list does (formats.and_listed), their errors too."""
    info = {"name": "m", "n": 8}
    stopped = [MethodResult(m, "interrupted", 10, 10 * e, e, 0.1, {"stop_reason": "interrupted"})
               for m, e in (("sf", 0.066), ("rpca", 0.05), ("nmf", 0.06))]
    c = Comparison(info, 100, "sf", [_row("tsvd", 0.76), _row("sparse", 8.0), *stopped])
    assert c.verdict()["text"] == ("low rank (TSVD) wins (of the methods that finished; sf, rpca and nmf, stopped "
                                   "early at 0.066, 0.05 and 0.06 relative, are not ranked)")


def test_one_order_decides_the_star_the_verdict_and_the_json_winner():
    info = {"name": "m", "n": 8, "nnz": 12}
    # Two exact rows: the one that stores fewer numbers wins, everywhere.
    rows = [_row("sf", 1.0), MethodResult("sparse", "ok", 33, 0.0, 0.0, 0.1, {"exact": True, "n_sparse": 12}),
            MethodResult("rpca", "ok", 24, 1e-15, 1e-17, 0.1, {"rank": 0, "n_sparse": 12})]
    c = Comparison(info, 100, "sf", rows)
    [table] = c.tables()
    starred = [row["method"] for row in table.rows if row["method"].endswith("★")]
    assert c.winner() == c.verdict()["winner"] == c.to_dict()["winner"] == "rpca" and starred == ["rpca ★"]
    # (one parenthesis: "... with their positions (rpca's sparse part alone) (24% of the budget)" had two in a row)
    assert c.verdict()["text"] == ("exact sparse storage is cheapest: X's 12 non-zeros in rpca's sparse part alone "
                                   "take 24 numbers with their positions (24% of the budget) and reproduce it exactly")
    # A saved fit's row (compare --with) has its record's "nnz", its stored numbers, among its params: the
    # verdict said "X's 24 non-zeros ... take 24 numbers" of a matrix of 12
    saved = MethodResult("saved:f", "ok", 24, 0.0, 0.0, 0.1, {"rank": 0, "n_sparse": 12, "nnz": 24})
    c = Comparison(info, 100, "sf", [_row("sf", 1.0), saved])
    assert c.verdict()["text"].startswith("exact sparse storage is cheapest: X's 12 non-zeros in saved:f's "), c.verdict()
    # A saved sparse fit is sparse storage: the verdict spoke of its "sparse part alone ... with their positions",
    # rpca's words, for checking method == "sparse" and not the saved kind
    saved = MethodResult("saved:mesh.sparse", "ok", 33, 0.0, 0.0, 0.1,
                         {"kind": "sparse", "exact": True, "n_sparse": 12, "matrix_nnz": 12, "nnz": 33})
    c = Comparison(info, 100, "sf", [_row("sf", 1.0), saved])
    assert c.verdict()["text"] == ("exact sparse storage is cheapest: X's 12 non-zeros in saved:mesh.sparse take 33 "
                                   "numbers (33% of the budget) and reproduce it exactly"), c.verdict()
    # Not exact: the smallest error wins whatever it stores.
    c = Comparison(info, 100, "sf", [_row("sf", 1.0), _row("tsvd", 0.5)])
    assert c.winner() == c.verdict()["winner"] == "tsvd"


def test_verdict_says_when_the_winner_stores_no_fewer_numbers_than_x():
    """SF's default budget is its structure's, over N^2 at small N: a 3 x 3 matrix "reproduced exactly
    with 18 numbers" said nothing of X's own 9 entries."""
    c = Comparison({"name": "m", "n": 3}, 18, "sf", [MethodResult("sf", "ok", 18, 0.0, 0.0, 0.1, {}), _row("tsvd", 2.0)])
    assert c.verdict()["text"] == ("SF reproduces X exactly with 18 numbers (100% of the budget); but 18 numbers "
                                   "are no fewer than X's own 9 entries: X stored as it is costs no more")
    under = Comparison({"name": "m", "n": 8}, 60, "sf", [_row("sf", 1.0), _row("tsvd", 3.0)])
    assert "no fewer than" not in under.verdict()["text"]
    one = Comparison({"name": "m", "n": 1}, 1, "sf", [MethodResult("sf", "ok", 1, 0.0, 0.0, 0.1, {}), _row("tsvd", 2.0)])
    assert one.verdict()["text"] == ("SF reproduces X exactly with 1 number (100% of the budget); but 1 number "
                                     "is no fewer than X's own 1 entry: X stored as it is costs no more")


def test_verdict_joins_its_two_caveats_with_and_not_a_second_but():
    """Sawmill (36 x 36, 124 non-zeros) with --methods tsvd: "...; but 1,460 numbers are no fewer than X's
    own 1,296 entries: ...; but X has only 124 non-zeros: ..." (two "; but" in a row)."""
    c = Comparison({"name": "m", "n": 8, "nnz": 12}, 100, "sf", [MethodResult("tsvd", "ok", 70, 1.0, 0.1, 0.1, {})])
    text = c.verdict()["text"]
    assert text.count("; but ") == 1 and "X stored as it is costs no more; and X has only 12 non-zeros" in text


def test_one_scored_method_has_no_winner_star_or_wins_verdict():
    """`compare --methods tsvd` marked tsvd ★ and said "low rank (TSVD) wins", where a batch report of the
    same single method counts no winner: one method wins no contest, and both now say so."""
    info = {"name": "m", "n": 8, "nnz": 60}
    alone = Comparison(info, 100, "tsvd", [_row("tsvd", 0.76)])
    assert alone.winner() is None and alone.to_dict()["winner"] is None
    assert alone.verdict() == {"winner": None, "text": "only tsvd was scored: no winner with one method",
                               "ratio": None, "exact": False, "suggest": []}
    (table,) = alone.tables()
    assert table.rows[0]["method"] == "tsvd" and not any(note.startswith("★") for note in table.notes)
    assert "tsvd 0.076 ★" not in repr(alone)
    exact = Comparison(info, 100, "sparse", [_row("sparse", 0.0, exact=True, nnz=12)])
    assert exact.verdict()["text"] == ("only sparse was scored: no winner with one method (sparse reproduces X "
                                       "exactly with 10 numbers, 10% of the budget)")
    failed = MethodResult("sf", "failed", reason="boom")  # a second method that gave no error: still one scored
    assert Comparison(info, 100, "sf", [_row("tsvd", 0.76), failed]).winner() is None


def test_one_scored_method_keeps_the_verdicts_caveats():
    """The advice a verdict gives whoever won (sparse storage would be exact) stays for one method."""
    c = Comparison({"name": "m", "n": 8, "nnz": 5}, 100, "tsvd", [_row("tsvd", 0.76)])
    verdict = c.verdict()
    assert verdict["suggest"] == ["sparse"] and verdict["text"].startswith(
        "only tsvd was scored: no winner with one method; but X has only 5 non-zeros")


def test_verdict_says_when_unrun_sparse_storage_would_be_exact():
    info = {"name": "m", "n": 8, "nnz": 12}
    c = Comparison(info, 100, "sf", [_row("sf", 1.0), _row("tsvd", 3.0)])
    v = c.verdict()
    assert v["suggest"] == ["sparse"] and "X has only 12 non-zeros" in v["text"] and "33 numbers" in v["text"]
    # ... but not when sparse ran, or when X's non-zeros do not fit the budget.
    ran = Comparison(info, 100, "sf", [_row("sf", 1.0), MethodResult("sparse", "ok", 33, 0.0, 0.0, 0.1, {})])
    assert ran.verdict()["suggest"] == []
    assert Comparison({**info, "nnz": 60}, 100, "sf", [_row("sf", 1.0)]).verdict()["suggest"] == []


def test_a_smaller_sf_structure_than_the_budget_allows_is_shown():
    assert details({"n_factors": 9, "n_factors_budget": 11, "base": 2}) == "M=9/11 b=2"
    row = _row("sf", 1.0, n_factors=9, n_factors_budget=11, structure_reason="9 of the 11 factors its budget allows")
    [table] = Comparison({"name": "m", "n": 8}, 100, "sf", [row]).tables()
    assert "sf: 9 of the 11 factors its budget allows" in table.notes


def test_result_of_a_method_not_run_names_the_methods_that_were():
    import pytest

    c = Comparison({"name": "m", "n": 8}, 60, "sf", [_row("tsvd", 3.0)])
    with pytest.raises(KeyError, match="no row for method 'sf' in this comparison; the methods run were: tsvd"):
        c.result("sf")


def test_csv_holds_the_values_not_the_display():
    """CSV is data: method names without the star, counts without separators, errors at full precision,
    the winner and an estimated error's interval as columns ("sf ★", "14,400" and 4 digits before)."""
    import csv
    import io

    from sfapprox.formats import render_csv

    rows = [MethodResult("sf", "ok", 14400, 111.89427123, 0.5584123456, 2.5, {}),
            MethodResult("rsvd", "ok", 14000, 101.123456789, 0.5, 1.0, {},
                         error_estimate={"fro_interval": [100.5, 101.75]})]
    c = Comparison({"name": "m", "n": 200}, 14400, "sf", rows)
    table = list(csv.DictReader(io.StringIO(render_csv(c.tables()))))
    assert [r["method"] for r in table] == ["sf", "rsvd"]
    assert table[0]["stored"] == "14400" and float(table[0]["‖X−X̂‖_F"]) == 111.89427123
    assert float(table[0]["of budget"]) == 100.0 and table[0]["winner"] == "False" and table[1]["winner"] == "True"
    assert (table[0]["‖X−X̂‖_F 95% low"], float(table[1]["‖X−X̂‖_F 95% high"])) == ("", 101.75)


def test_compares_csv_gives_the_relative_errors_interval_too():
    """compare's CSV gave the 95 % interval of the absolute error only; the relative error beside it read as
    exact there (its interval was in the JSON, and a sweep's CSV gives it)."""
    import csv
    import io

    from sfapprox.formats import render_csv

    estimate = {"exact": False, "fro_interval": [0.9, math.inf], "rel_interval": [0.09, 0.1112345678901]}
    c = Comparison({"name": "m", "n": 20}, 100, "sf", [MethodResult("rsvd", "ok", 90, 1.0, 0.1, 1.0, {},
                                                                    error_estimate=estimate),
                                                       MethodResult("tsvd", "ok", 90, 2.0, 0.2, 1.0, {})])
    rows = list(csv.DictReader(io.StringIO(render_csv(c.tables()))))
    assert (float(rows[0]["relative 95% low"]), float(rows[0]["relative 95% high"])) == (0.09, 0.1112345678901)
    assert rows[1]["relative 95% low"] == rows[1]["relative 95% high"] == ""  # exact: empty


def test_the_json_of_a_comparison_is_strict_whatever_its_numbers():
    """JSON has no NaN or Infinity: a NaN error, an infinite time and an unbounded interval are null, and
    a reader that refuses those tokens (json.loads with parse_constant raising, JavaScript's JSON.parse)
    reads the file."""
    import json

    from sfapprox.formats import OutputFormat

    def refuse(token):
        raise ValueError(token)

    estimate = {"exact": False, "fro_interval": (0.5, math.inf), "rel_interval": (float("nan"), math.inf)}
    c = Comparison({"name": "m", "n": 4, "fro_norm": 0.0}, 10, "sf", [
        MethodResult("sf", "interrupted", 10, float("nan"), None, math.inf, {"loss": float("-inf")}),
        MethodResult("rsvd", "ok", 9, 1.0, float("nan"), 0.1, {}, error_estimate=estimate)])
    text = OutputFormat.JSON.render(c.tables(), c.to_dict())
    d = json.loads(text, parse_constant=refuse)
    assert d["results"][0]["fro_error"] is None and d["results"][0]["seconds"] is None
    assert d["results"][1]["error_estimate"]["fro_interval"] == [0.5, None]


def _estimated(method: str, fro: float, low: float, high: float, nnz: int = 100) -> MethodResult:
    return MethodResult(method, "ok", nnz=nnz, fro_error=fro, rel_error=fro / 10,
                        error_estimate={"exact": False, "fro_interval": [low, high], "rel_interval": [low / 10, high / 10],
                                        "columns": 256, "columns_advised": 0})


def test_no_winner_when_any_row_s_interval_reaches_the_best_not_only_the_runner_up_s():
    """rsvd's [2.5, 3.9] holds all of SF's [2.95, 3.05]; only the runner-up's [3.08, 3.12] was compared,
    and "SF wins by 1.07x over low rank (randomized SVD)" was declared."""
    rows = [_estimated("sf", 3.0, 2.95, 3.05), _estimated("sf-symmetric", 3.1, 3.08, 3.12),
            _estimated("rsvd", 3.2, 2.5, 3.9)]
    c = Comparison(matrix={"name": "X", "n": 1000}, budget=1000, budget_spec="1000", results=rows)
    assert c.winner() is None and c.tied().method == "rsvd" and "no clear winner" in c.verdict()["text"]
    rows[2] = _estimated("rsvd", 3.2, 3.1, 3.3)  # clear of SF's: SF wins
    c = Comparison(matrix={"name": "X", "n": 1000}, budget=1000, budget_spec="1000", results=rows)
    assert c.winner() == "sf"


def test_an_exact_tie_has_no_winner_whatever_the_order_of_the_methods():
    """Equal errors and counts (sf+lr with no factors is TSVD): the method run first won."""
    for order in (["sf+lr", "tsvd"], ["tsvd", "sf+lr"]):
        rows = [MethodResult(m, "ok", nnz=100, fro_error=9.676, rel_error=0.9676) for m in order]
        c = Comparison(matrix={"name": "X", "n": 1000}, budget=1000, budget_spec="1000", results=rows)
        assert c.winner() is None and "reach the same error" in c.verdict()["text"], order


def test_a_tie_of_rows_at_round_off_quotes_each_row_s_own_error():
    """Two rows reproducing X tie on their rank (error 0, the same count): the verdict said "tsvd and rsvd
    reach the same error (6.737e-15 relative)" where rsvd's row showed 1.298e-15."""
    rows = [MethodResult("tsvd", "ok", 100, 6.737e-14, 6.737e-15, 0.1),
            MethodResult("rsvd", "ok", 100, 1.298e-14, 1.298e-15, 0.1)]
    c = Comparison(matrix={"name": "X", "n": 20}, budget=200, budget_spec="200", results=rows)
    v = c.verdict()
    assert v["winner"] is None and v["exact"]
    assert v["text"] == ("no clear winner: tsvd and rsvd both reproduce X to round-off (6.737e-15 and 1.298e-15 "
                         "relative) with the same 100 stored numbers")
    assert v["text"] in repr(c)  # the table's and the repr's verdict are this one text


def test_an_estimated_error_is_never_called_exact():
    """A sample of exact columns gave "0 ± 0" (now "0 ± ?"), and the verdict said the surrogate (relative
    error 0.014) reproduced X exactly."""
    row = MethodResult("sparse", "ok", nnz=100, fro_error=0.0, rel_error=0.0,
                       error_estimate={"exact": False, "fro_interval": [0.0, math.inf],
                                       "rel_interval": [0.0, math.inf], "columns": 300, "columns_advised": 20_000})
    c = Comparison(matrix={"name": "X", "n": 20_000}, budget=100, budget_spec="100", results=[row])
    assert not c.verdict()["exact"] and "exactly" not in c.verdict()["text"]
    assert c.tables()[0].rows[0]["fro_error"] == "0 ± ?"


def test_a_zero_matrix_s_verdict_names_what_reproduces_it_with_fewest_numbers():
    """X all zeros: the verdict said "no clear winner: tsvd and rsvd reach the same error (– relative)"."""
    import numpy as np

    from sfapprox import compare

    c = compare(np.zeros((16, 16)), ["tsvd", "rsvd", "sparse"], budget=200)
    v = c.verdict()
    # (sparse too: no entries store nothing; it stored its 17 row pointers)
    assert v["text"] == ("X is all zeros: tsvd, rsvd and sparse reproduce it with the fewest numbers "
                         "(0 stored numbers)")
    assert v["winner"] is None and v["exact"] and "–" not in v["text"]
    v = compare(np.zeros((16, 16)), ["sparse", "monarch"], budget=200).verdict()
    assert v["winner"] == "sparse" and v["text"].startswith("X is all zeros: sparse reproduces it")


def test_library_versions_read_without_importing_torch():
    # A result records torch's version; reading it imported torch, a second or more for a comparison of
    # baselines that never use it. The version is the module's, its build's label included (2.13.0+cpu,
    # 2.13.0+cu130: PyPI's CUDA wheels leave the label out of their metadata).
    import subprocess
    import sys

    code = ("import sys\nfrom sfapprox.results import library_versions\nv = library_versions()\n"
            "print('torch' in sys.modules, v['torch'], v['h5py'])\nimport torch, h5py\n"
            "print(torch.__version__, h5py.__version__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    first, second = done.stdout.splitlines()
    loaded, torch_version, h5py_version = first.split()
    assert loaded == "False" and [torch_version, h5py_version] == second.split(), done.stdout


def test_a_version_with_a_build_label_is_the_modules_not_the_metadatas(tmp_path, monkeypatch):
    """torch's wheels from PyPI say 2.13.0 in their metadata and 2.13.0+cu130 as torch.__version__ (the
    label is in torch/version.py alone): a result recorded 2.13.0.  The version.py is read, not run."""
    import sys

    from sfapprox.results import _installed_version

    package = tmp_path / "labelled"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('imported')\n")
    (package / "version.py").write_text("from typing import Optional\n__version__ = '2.13.0+cu130'\ncuda = '13.0'\n")
    (tmp_path / "labelled-2.13.0.dist-info").mkdir()
    (tmp_path / "labelled-2.13.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: labelled\n"
                                                                     "Version: 2.13.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _installed_version("labelled") == "2.13.0+cu130" and "labelled" not in sys.modules
    (package / "version.py").write_text("__version__ = compute()\n")  # not a literal: the metadata's
    assert _installed_version("labelled") == "2.13.0"


# ----------------------------------------------------------------------------- in a notebook and a REPL
def _notebook_comparison(name="graph"):
    """Three rows as compare makes them: SF's fitted parameters long (a row's repr was 700 characters)."""
    params = {"n_factors": 4, "offsets": list(range(40)), "stop_reason": "ftol", "iterations": 812}
    return Comparison({"name": name, "n": 20, "nnz": 400, "fro_norm": 10.0, "path": f"/data/{name}.mtx"}, 100, "100", [
        MethodResult("sf", "ok", 100, 1.0123456789, 0.10123456789, 0.5, params),
        MethodResult("tsvd", "ok", 82, 3.2, 0.32, 0.1, {"rank": 2}),
        MethodResult("nmf", "not applicable", reason="X has negative entries")],
        settings={"time_limit": 60.0, "seed": 0}, versions={"sfapprox": "0.1.0", "numpy": "2.4"})


def test_a_comparison_s_repr_is_a_few_lines_with_each_error_the_winner_and_the_verdict():
    """In a notebook, ``c`` showed a 1,500-character dataclass repr (every field of the matrix summary
    and of each row); it says the matrix, the budget, each error as the table does and the verdict."""
    text = repr(_notebook_comparison())
    assert text.splitlines() == [
        "Comparison: graph (N=20), budget 100 stored numbers (25.00% of N²)",
        "  relative error: sf 0.1012 ★, tsvd 0.32, nmf n/a",
        "  verdict: SF wins by 3.16x over low rank (TSVD)"]
    assert "offsets" not in text and "versions" not in text
    # X all zeros has no relative error: the absolute one, as a sweep's table gives it
    zero = Comparison({"name": "z", "n": 4, "fro_norm": 0.0}, 8, "8", [MethodResult("tsvd", "ok", 0, 0.0, None),
                                                                     MethodResult("sparse", "ok", 0, 0.0, None)])
    assert repr(zero).splitlines()[1] == "  absolute error: tsvd 0, sparse 0"


def test_a_method_result_s_repr_is_one_line_with_its_errors_and_their_interval():
    """A row's repr held its every fitted parameter; it says its status, stored numbers, errors (the 95 %
    interval where estimated) and seconds, or why it has no result."""
    assert repr(_notebook_comparison().results[0]) == \
        "<MethodResult sf: ok, stored 100, fro_error 1.012, rel_error 0.1012, 0.50 s>"
    assert repr(_estimated("rsvd", 3.0, 2.95, 3.05)) == \
        "<MethodResult rsvd: ok, stored 100, fro_error 3 ± 0.05 (95%), rel_error 0.3 ± 0.005 (95%)>"
    assert repr(MethodResult("nmf", "not applicable", seconds=0.0, reason="X has\nnegative entries")) == \
        "<MethodResult nmf: not applicable: X has negative entries>"
    # fields and equality are the dataclass's: the repr changed, nothing else
    assert MethodResult("sf", "ok", 10) == MethodResult("sf", "ok", 10) != MethodResult("sf", "ok", 11)


def test_a_comparison_shows_as_its_table_in_a_notebook_every_text_escaped():
    """No _repr_html_: a notebook showed the repr. It is compare's table (the winner in bold, its notes
    under it), and a matrix's name, from its file's, is text: ``<b>x&y</b>`` is not markup."""
    c = _notebook_comparison("<b>x&y</b>")
    html = c._repr_html_()
    assert "<b>x&y</b>" not in html and "&lt;b&gt;x&amp;y&lt;/b&gt;" in html
    (table,) = c.tables()
    for cells in table.cells():
        assert all(f">{v}<" in html.replace("<b>", "").replace("</b>", "") for v in cells)
    assert "<b>sf ★</b>" in html and "<b>0.1012</b>" in html and "<b>tsvd</b>" not in html
    assert "verdict: SF wins by 3.16x over low rank (TSVD)" in html
    assert html.count("<tr>") == 1 + len(c.results)


def test_to_frame_gives_the_values_of_the_csv_at_full_precision():
    """A DataFrame of compare's rows: the CSV's values (no marks, no separators, all the digits)."""
    pytest.importorskip("pandas")
    from _frames import assert_frame_is_the_csv

    c = _notebook_comparison()
    frame = c.to_frame()
    assert list(frame.columns) == c.tables()[0].records()[0] and len(frame) == len(c.results)
    assert frame["method"].tolist() == ["sf", "tsvd", "nmf"] and frame["winner"].tolist() == [True, False, False]
    assert frame["‖X−X̂‖_F"].tolist()[:2] == [1.0123456789, 3.2] and math.isnan(frame["‖X−X̂‖_F"][2])
    assert frame["relative"].tolist()[:2] == [r.rel_error for r in c.results[:2]]
    assert frame["stored"].tolist()[:2] == [100, 82] and frame["of budget"][1] == 82.0
    assert_frame_is_the_csv(frame, c.tables())  # every value the CSV writes, read back


def test_to_frame_without_pandas_says_how_to_install_it(monkeypatch):
    """pandas is no dependency of sfapprox: to_frame says so in one line, as sfapprox's error."""
    import sys

    from sfapprox import SfapproxError

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(SfapproxError, match=r"^to_frame\(\) needs pandas, which sfapprox does not install: "
                                            r"pip install pandas$"):
        _notebook_comparison().to_frame()


# ---------------------------------------------------------------------------
# from_dict: a comparison's JSON read back (sfapprox report FILE.json)
# ---------------------------------------------------------------------------


def _saved_comparison():
    """A comparison of every kind of field a file holds: estimated rows (one interval unbounded above), an
    exact one, a row without a result, a source's record with its recipe, notes, a clamped budget's spec."""
    matrix = {"name": "pts", "file": "pts.csv", "path": "columns", "compared_from": "columns", "n": 400, "nnz": None,
              "fro_norm": 12.5, "recipe": {"kind": "kernel", "kernel": "rbf", "bandwidth": 0.8,
                                           "bandwidth_rule": "given"},
              "source": {"kind": "kernel", "kernel": "rbf", "bandwidth": 0.8, "bandwidth_rule": "given"},
              "unknown": {"nnz": "not computed: never formed"}, "notes": ["a note of the reading"]}
    rows = [
        MethodResult("nystrom", "ok", 4000, 1.25, 0.1, 0.31, {"rank": 10, "stop_reason": "closed_form"},
                     time_limit=2.0, min_budget=400,
                     error_estimate={"exact": False, "fro_interval": (1.2, 1.31), "rel_interval": (0.096, 0.1048),
                                     "columns": 120, "columns_advised": 300}),
        MethodResult("rsvd", "ok", 3990, 3.0, 0.24, 0.2, {"rank": 9},
                     error_estimate={"exact": False, "fro_interval": (2.9, math.inf),
                                     "rel_interval": (0.232, math.inf), "columns": 40, "columns_advised": 40}),
        MethodResult("sparse", "ok", 4000, 5.0, 0.4, 0.01, {"n_sparse": 2000},
                     error_estimate={"exact": True, "fro_interval": None, "rel_interval": None, "columns": 400,
                                     "columns_advised": 400, "by_nonzeros": True}),
        MethodResult("tsvd", "not applicable", reason="needs the matrix formed (1.2 GiB)", min_budget=401),
        MethodResult("sf", "interrupted", 3900, 4.0, 0.32, 9.5, {"stop_reason": "interrupted"},
                     reason="stopped by Ctrl-C before it finished"),
    ]
    return Comparison(matrix, 4000, "0.025", rows, settings={"seed": 0, "time_limit": 2.0, "count_indices": True},
                      versions={"sfapprox": "0.1.0"}, notes=["from columns: a note of the run"])


def _via_json(data):
    """``data`` as a file holds it: written and parsed as JSON (tuples become lists, infinity null)."""
    import json

    return json.loads(json.dumps(data, allow_nan=False))


def test_a_comparison_read_back_from_its_json_is_the_same_comparison():
    """``report FILE.json`` could not re-read compare's JSON (no from_dict): every field comes back, so its
    tables (text, notes, CSV values with an unbounded interval's inf) and its JSON are the original's."""
    from sfapprox.formats import OutputFormat

    c = _saved_comparison()
    again = Comparison.from_dict(_via_json(c.to_dict()))
    assert again.to_dict() == c.to_dict()
    assert again.winner() == c.winner() and again.verdict() == c.verdict() and again.notes == c.notes
    assert again.budget_spec == "0.025" and again.matrix["recipe"]["bandwidth"] == 0.8
    assert again.results[1].error_estimate["fro_interval"] == (2.9, math.inf)
    (table,), (before,) = again.tables(), c.tables()
    assert (table.title, table.rows, table.notes, table.data) == (before.title, before.rows, before.notes, before.data)
    for fmt in (OutputFormat.CSV, OutputFormat.MARKDOWN, OutputFormat.LATEX):
        assert fmt.render(again.tables(), None) == fmt.render(c.tables(), None)
    assert "0.24 ± ?" in table.rows[1]["rel_error"] and repr(again) == repr(c)


def test_a_comparison_made_before_the_format_was_recorded_reads_as_version_1():
    data = _via_json(_saved_comparison().to_dict())
    del data["format"], data["version"]
    assert Comparison.from_dict(data).to_dict() == _saved_comparison().to_dict()


def _edited(change):
    data = _via_json(_saved_comparison().to_dict())
    change(data)
    return data


@pytest.mark.parametrize("change, said", [
    (lambda d: d["results"][1].update(fro_error="3.0"), r"^key results\[1\]\.fro_error must be a finite number >= 0 or null, got '3\.0'$"),
    (lambda d: d["results"][0].update(nnz=-1), r"^key results\[0\]\.nnz must be a whole number from 0 to "),
    (lambda d: d["results"][0].pop("status"), r"^key results\[0\]\.status is missing$"),
    (lambda d: d["results"][0].update(status="OK"), r"^key results\[0\]\.status must be one of 'ok', "),
    (lambda d: d["results"][0].pop("fro_error"), r"^key results\[0\]\.fro_error is missing$"),
    (lambda d: d.pop("budget"), r"^key budget is missing$"),
    (lambda d: d.update(budget=0), r"^key budget must be a whole number from 1 to "),
    (lambda d: d.update(budget_spec=0.025), r"^key budget_spec must be a string, got 0\.025$"),
    (lambda d: d.update(results={}), r"^key results must be a list, got a JSON object$"),
    (lambda d: d["results"].append("sf"), r"^key results\[5\] must be a JSON object, got 'sf'$"),
    (lambda d: d["matrix"].pop("n"), r"^key matrix\.n is missing$"),
    (lambda d: d["matrix"].update(recipe="rbf"), r"^key matrix\.recipe must be a JSON object or null, got 'rbf'$"),
    (lambda d: d.update(notes="one"), r"^key notes must be a list of strings or null, got 'one'$"),
    (lambda d: d["verdict"].pop("text"), r"^key verdict\.text is missing$"),
    (lambda d: d["results"][0]["error_estimate"].update(fro_interval=[1.31, 1.2]),
     r"^key results\[0\]\.error_estimate\.fro_interval must be \[low, high\]"),
    (lambda d: d["results"][0]["error_estimate"].update(rel_interval=[0.1]),
     r"^key results\[0\]\.error_estimate\.rel_interval must be \[low, high\]"),
    (lambda d: d["results"][0]["error_estimate"].update(rel_interval=[None, 0.2]),  # (a traceback in report)
     r"^key results\[0\]\.error_estimate\.rel_interval must be \[low, high\]"),
    (lambda d: d["results"][2]["params"].update(n_sparse=float("nan")),
     r"^key results\[2\]\.params\.n_sparse is NaN, which is no JSON number"),
    (lambda d: d["results"][0].update(seconds=float("inf")), r"^key results\[0\]\.seconds is Infinity"),
    (lambda d: d.update(version=2), r"^key version is 2: a newer sfapprox wrote it \(this one reads "
                                    r"sfapprox-comparison up to version 1\)"),
    (lambda d: d.update(version="1"), r"^key version must be a whole number from 1 to 1, got '1'$"),
    (lambda d: d.update(format="sfapprox-sweep"), r"^key format must be 'sfapprox-comparison', got 'sfapprox-sweep'$"),
    # a second row of one method (an edit, two files pasted together): the winner and result() took one of them
    (lambda d: d["results"].append(dict(d["results"][1], fro_error=0.5)),
     r"^key results\[5\]\.method is 'rsvd', as results\[1\]\.method is: a comparison, and each budget of a "
     r"sweep, has one row per method$"),
])
def test_an_edited_or_damaged_comparison_is_refused_naming_its_key(change, said):
    """An edited file was not read at all; read back, a wrong value is one line naming its key (a NaN
    anywhere, a later format version), never a table shown wrong or a traceback later."""
    from sfapprox import InputError

    with pytest.raises(InputError, match=said):
        Comparison.from_dict(_edited(change))


def test_a_row_of_a_method_this_sfapprox_does_not_know_is_shown_as_recorded_with_a_warning():
    """A row of a newer sfapprox's method, or a plugin's not imported, was read without a word (a misspelt
    edit looked like a method): it is read and shown as recorded, and a warning names it and its key.  An
    included saved fit's row (its own name, its ``kind`` in params) is no unknown method."""
    import warnings

    data = _edited(lambda d: d["results"][2].update(method="sf-next"))
    with pytest.warns(UserWarning, match=r"^'sf-next' \(results\[2\]\.method\): a method this sfapprox does not "
                                         r"know \(a newer sfapprox's, or a plugin's not imported here\); shown as "
                                         r"recorded$"):
        again = Comparison.from_dict(data)
    assert again.result("sf-next").nnz == 4000 and "sf-next" in again.tables()[0].rows[2]["method"]
    assert again.to_dict()["results"] == data["results"]
    saved = _edited(lambda d: d["results"].append({"method": "saved:fit", "status": "ok", "nnz": 10, "fro_error": 9.0,
                                                   "rel_error": 0.7, "params": {"kind": "chord"}}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Comparison.from_dict(saved)  # (and a file of known methods only: no warning either)
        Comparison.from_dict(_via_json(_saved_comparison().to_dict()))


def test_a_file_that_is_no_json_object_is_refused():
    from sfapprox import InputError

    with pytest.raises(InputError, match=r"^must hold a JSON object, got a list$"):
        Comparison.from_dict([])


def test_a_comparison_nested_near_the_recursion_limit_is_refused_not_a_traceback_later():
    """JSON nested ~900 deep in a row's params parsed and read back, then failed in a RecursionError
    traceback where report wrote its JSON again."""
    from sfapprox import InputError

    deep: list = []
    for _ in range(900):
        deep = [deep]
    data = _edited(lambda d: d["results"][0]["params"].update(deep=deep))
    with pytest.raises(InputError, match=r"^key results\[0\]\.params\.deep\[0\].*… is nested deeper than 64 levels"):
        Comparison.from_dict(data)


def _sf_end(method: str) -> MethodResult:
    """A hybrid row whose best split was the comparison's sf row's own fit, as the hybrid records it."""
    return MethodResult(method, "ok", nnz=1920, fro_error=38.66, rel_error=0.604,
                        params={"split": "sf", "start": "sf (its row's fit)", "reused": ["sf"]})


def test_a_three_way_tie_names_every_row_and_says_once_they_are_sf_s_fit():
    """sf, sf+lr and sf+s tied (the hybrids ended at sf's own fit): the verdict named sf and sf+lr only."""
    rows = [MethodResult("sf", "ok", 1920, 38.66, 0.604, 1.0), _sf_end("sf+lr"), _sf_end("sf+s"),
            MethodResult("tsvd", "ok", 1806, 56.57, 0.884, 0.1)]
    c = Comparison(matrix={"name": "X", "n": 64}, budget=1925, budget_spec="1925", results=rows)
    assert [r.method for r in c.tied_rows()] == ["sf+lr", "sf+s"] and c.tied().method == "sf+lr"
    v = c.verdict()
    assert v["winner"] is None
    assert v["text"] == ("no clear winner: sf, sf+lr and sf+s reach the same error (0.604 relative) with the same "
                         "1,920 stored numbers; sf+lr and sf+s are sf's own fit, the same surrogate (the best split "
                         "had no low-rank or sparse part)")


def test_a_tie_of_a_hybrid_s_own_fit_is_not_called_sf_s():
    """Only a row that reused sf's fit is said to be it: a hybrid fitting its own sf end ties without that."""
    own = MethodResult("sf+lr", "ok", 1920, 38.66, 0.604, params={"split": "sf", "start": "sf"})
    c = Comparison(matrix={"name": "X", "n": 64}, budget=1925, budget_spec="1925",
                   results=[MethodResult("sf", "ok", 1920, 38.66, 0.604), own])
    assert c.verdict()["text"] == ("no clear winner: sf and sf+lr reach the same error (0.604 relative) with the "
                                   "same 1,920 stored numbers")


def test_an_estimated_three_way_tie_names_every_row():
    rows = [_estimated("sf", 3.0, 2.95, 3.05), _estimated("sf-symmetric", 3.1, 3.0, 3.2),
            _estimated("rsvd", 3.2, 2.5, 3.9)]
    c = Comparison(matrix={"name": "X", "n": 1000}, budget=1000, budget_spec="1000", results=rows)
    text = c.verdict()["text"]
    assert text.startswith("no clear winner: the 95% intervals of sf-symmetric (") and "and rsvd (" in text
    assert "reach into sf's (0.3" in text


def test_a_tie_of_rows_that_hold_x_s_entries_says_exact_sparse_storage_is_cheapest():
    """On a graph of 57,494 non-zeros at N = 3,000, `compare --methods all` ended in "no clear winner: rpca,
    rpca-pcp and sf+s all reproduce X to round-off (0 relative) with the same 114,988 stored numbers": each
    was X's own entries (its all-sparse end), a tie of one surrogate whose kind is the answer, not none."""
    rows = [MethodResult("rpca", "ok", 68, 0.0, 0.0, 0.1, params={"rank": 0, "n_sparse": 34}),
            MethodResult("rpca-pcp", "ok", 68, 0.0, 0.0, 0.1, params={"rank": 0, "n_sparse": 34}),
            MethodResult("sf+s", "ok", 68, 0.0, 0.0, 0.1, params={"n_factors": 0, "n_sparse": 34}),
            MethodResult("tsvd", "ok", 189, 1.5, 0.3, 0.1, params={"rank": 9})]
    c = Comparison(matrix={"name": "X", "n": 10, "nnz": 34}, budget=200, budget_spec="200", results=rows)
    v = c.verdict()
    assert v["winner"] is None and c.winner() is None and v["exact"]  # still a tie: no ★, no winner
    assert v["text"] == ("exact sparse storage is cheapest: X's 34 non-zeros take 68 numbers with their positions "
                         "(34% of the budget) and reproduce it exactly, in rpca, rpca-pcp and sf+s alike (no clear "
                         "winner among them)")
    # a tie of other rows at round-off keeps its words
    rows = [MethodResult("tsvd", "ok", 100, 0.0, 0.0, 0.1, params={"rank": 5}),
            MethodResult("rsvd", "ok", 100, 0.0, 0.0, 0.1, params={"rank": 5})]
    c = Comparison(matrix={"name": "X", "n": 10}, budget=200, budget_spec="200", results=rows)
    assert c.verdict()["text"].startswith("no clear winner: tsvd and rsvd both reproduce X")


def test_a_verdict_against_sf_says_when_sf_stopped_on_its_time_limit():
    """`compare --methods all` at N = 3,000 gave SF 10.6 s (4 iterations from its start, relative error 0.9988)
    and the verdict said "Nyström wins: SF's error is 14,800x larger", the cut said only in a note above the
    table that --quiet leaves out.  The verdict says it; a converged SF's verdict is as it was."""
    def rows(stop):
        return [MethodResult("sf", "ok", 390, 1923.0, 0.9988, 17.6, {"stop_reason": stop, "iterations": 4},
                             time_limit=10.63),
                MethodResult("nystrom", "ok", 465, 0.13, 6.751e-05, 0.15, {"rank": 148})]

    c = Comparison(matrix={"name": "X", "n": 30}, budget=468, budget_spec="468", results=rows("time_limit"))
    v = c.verdict()
    assert v["winner"] == "nystrom"
    assert v["text"] == ("Nyström wins: SF's error is 14,800x larger (SF stopped on its 10.6 s time limit after "
                         "4 iterations)")
    c = Comparison(matrix={"name": "X", "n": 30}, budget=468, budget_spec="468", results=rows("converged"))
    assert c.verdict()["text"] == "Nyström wins: SF's error is 14,800x larger"


def test_the_verdicts_time_limit_note_writes_a_long_limit_whole():
    from sfapprox.results import MethodResult, _cut_short_words

    row = MethodResult("sf", "ok", 10, 2.0, 0.9, 11.0, {"stop_reason": "time_limit", "iterations": 1}, time_limit=1200.0)
    assert _cut_short_words(row) == " (SF stopped on its 1,200 s time limit after 1 iteration)"


@pytest.mark.parametrize("shown, expected", [
    (lambda c: repr(c).splitlines()[0], "Comparison: graph (N=3,000), budget 100"),
    (lambda c: c.tables()[0].title, "graph  (N=3,000, budget 100 stored numbers"),
])
def test_the_comparison_s_title_and_summary_write_n_thousands_separated(shown, expected):
    """"(N=3000, budget 90,000 stored numbers" wrote the budget beside it thousands separated, N not."""
    rows = [MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1})]
    assert shown(Comparison({"name": "graph", "n": 3000}, 100, "sf", rows)).startswith(expected)


def test_a_table_says_what_its_seconds_hold_where_they_are_more_than_the_fits():
    """A row's seconds are its whole turn (SF's 5.9 s at N = 3,000, its fit's own 1.76 s): the column said
    nothing of it. A note says so where a row's seconds exceed its fit's by a fifth, or hold a compiling."""
    from sfapprox.results import SECONDS_NOTE

    def notes(*rows):
        return Comparison({"name": "m", "n": 4}, 10, "sf", list(rows)).tables()[0].notes

    fit = MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.012, {"rank": 1, "fit_seconds": 0.008})
    assert SECONDS_NOTE not in notes(fit)  # hundredths of a second apart: nothing to misread
    assert SECONDS_NOTE not in notes(MethodResult("sf", "ok", 10, 1.0, 0.1, 5.9))  # an older file's row
    slow = MethodResult("sf", "ok", 10, 1.0, 0.1, 5.9, {"fit_seconds": 1.76})
    assert SECONDS_NOTE in notes(slow, fit)
    compiled = MethodResult("sf", "ok", 10, 1.0, 0.1, 11.0, {"fit_seconds": 10.5, "compile_seconds": 9.8})
    assert SECONDS_NOTE in notes(compiled)


def test_the_seconds_note_fits_a_comparison_from_columns_and_leaves_older_rows_alone():
    # from columns the rows' scoring is the joint pass, in no row's seconds (the note said "scoring" beside the
    # note saying they leave it out); a row of a file written before fit_seconds (its seconds its fit's) that
    # holds a compiling got the note naming a key it does not have
    from sfapprox.results import SECONDS_NOTE, SECONDS_NOTE_COLUMNS

    slow = MethodResult("sf", "ok", 10, 1.0, 0.1, 5.9, {"fit_seconds": 1.76})
    notes = Comparison({"name": "m", "n": 4, "compared_from": "columns"}, 10, "sf", [slow]).tables()[0].notes
    assert SECONDS_NOTE_COLUMNS in notes and SECONDS_NOTE not in notes
    older = MethodResult("sf", "ok", 10, 1.0, 0.1, 11.0, {"compile_seconds": 9.8})
    notes = Comparison({"name": "m", "n": 4}, 10, "sf", [older]).tables()[0].notes
    assert SECONDS_NOTE not in notes and SECONDS_NOTE_COLUMNS not in notes


def test_the_seconds_note_says_a_saved_fit_s_row_shows_its_own_fit_s_seconds():
    """compare --with mesh.h5: the saved row's 3.25 s are its fit's, made before, under a note saying the column
    is "each method's whole turn" in this comparison (the saved row itself called for that note)."""
    from sfapprox.results import SECONDS_NOTE

    def notes(*rows):
        return Comparison({"name": "m", "n": 4}, 10, "sf", list(rows)).tables()[0].notes

    saved = MethodResult("saved:mesh", "ok", 10, 1.0, 0.1, 3.25, {"kind": "sf", "fit_seconds": 1.7})
    fit = MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.012, {"rank": 1, "fit_seconds": 0.008})
    said = "saved:mesh shows its own fit's, when it was made, not this comparison's"
    assert f"seconds: {said}" in notes(saved, fit)
    assert SECONDS_NOTE not in notes(saved, fit)
    slow = MethodResult("sf", "ok", 10, 1.0, 0.1, 5.9, {"fit_seconds": 1.76})
    assert f"{SECONDS_NOTE}; {said}" in notes(slow, saved)
    unscored = MethodResult("saved:mesh", "ok", 10, 1.0, 0.1, None, {"kind": "sf"})  # from columns: no seconds
    assert not any(n.startswith("seconds:") for n in notes(unscored, fit))


def test_fit_s_seconds_note_names_the_parts_that_ran_in_compare_s_words():
    """`fit`'s table said "seconds" and "fit_seconds" with no word on what the first holds beside the second
    (forming a kernel matrix, scoring): its note says it as compare's does, naming only what ran."""
    from sfapprox.results import SECONDS_NOTE, fit_seconds_note

    formed = {"seconds": 5.0, "fit_seconds": 2.0, "form_seconds": 2.5, "scoring_seconds": 0.4}
    assert fit_seconds_note(formed) == ("seconds: the fit's whole turn (forming the matrix, setting up, fit, "
                                        "scoring), its fit's own in fit_seconds")
    assert fit_seconds_note({**formed, "form_seconds": None}).startswith("seconds: the fit's whole turn (setting up,")
    assert fit_seconds_note({"seconds": 2.05, "fit_seconds": 2.0, "scoring_seconds": 0.05}) is None
    assert SECONDS_NOTE.endswith("its fit's own in params.fit_seconds")  # the same sentence, compare's key


def test_a_rows_stop_reason_is_its_params_one_read_only():
    """Every estimator has ``stop_reason_``; a row kept it in ``params`` alone, and ``row.stop_reason`` was an
    AttributeError."""
    row = MethodResult("sf", "ok", 10, 2.0, 0.25, 1.0, {"stop_reason": "time_limit"})
    assert row.stop_reason == "time_limit"
    assert MethodResult.from_dict(row.to_dict()).stop_reason == "time_limit"
    assert MethodResult("tsvd", "not applicable", reason="too small").stop_reason is None
    assert "stop_reason" not in row.to_dict()  # (a property: the record keeps it in params, once)
    with pytest.raises(AttributeError):
        row.stop_reason = "converged"
