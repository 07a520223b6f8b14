"""The CLI through Typer's test runner: output, JSON shape, errors and exit codes."""

import csv
import io
import json
import shutil
import os
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sfapprox.cli import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def small_mtx(tmp_path):
    path = tmp_path / "small.mtx"
    rng = np.random.default_rng(0)
    A = (rng.random((12, 12)) < 0.3) * rng.random((12, 12))
    import scipy.io

    scipy.io.mmwrite(path, A)
    return path


def test_info_on_example():
    res = invoke("info", EXAMPLES / "karate_like.net")
    assert res.exit_code == 0, res.output
    for text in ("SF factors M", "symmetric", "stored entries", "TSVD rank"):
        assert text in res.output


def test_fit_writes_h5_and_json(tmp_path, small_mtx):
    out, js = tmp_path / "f.h5", tmp_path / "f.json"
    res = invoke("fit", small_mtx, "--out", out, "--json", js, "--iters", "40", "--device", "cpu")
    assert res.exit_code == 0, res.output
    data = json.loads(js.read_text())
    assert set(data) >= {"fro_error", "rel_error", "iterations", "evaluations", "seconds", "stop_reason",
                         "device", "dtype", "nnz"}
    assert data["iterations"] <= 40 and data["device"] == "cpu" and data["dtype"] == "float64"
    from sfapprox import load_factors

    saved = load_factors(out)
    assert saved.source["name"] == "small" and len(saved.source["sha256"]) == 64
    assert saved.fit["fro_error"] == pytest.approx(data["fro_error"])
    # No overwrite without --force, and nothing is lost.
    again = invoke("fit", small_mtx, "--out", out, "--iters", "5")
    assert again.exit_code == 2 and "already exists" in again.output and "--force" in again.output
    assert load_factors(out).fit["iterations"] == data["iterations"]


def test_fit_says_its_seconds_as_a_comparison_row_does(tmp_path, small_mtx):
    """`fit --json` and the `fit` record of `fit --out`'s file gave the estimator's own seconds as `seconds`,
    a comparison's row the method's whole turn: both now give the whole turn, the fit's own as fit_seconds."""
    out, js = tmp_path / "f.h5", tmp_path / "f.json"
    res = invoke("fit", small_mtx, "--out", out, "--json", js, "--iters", "5", "--device", "cpu")
    assert res.exit_code == 0, res.output
    data = json.loads(js.read_text())
    assert 0 <= data["fit_seconds"] <= data["seconds"]
    from sfapprox import load_factors

    saved = load_factors(out).fit
    assert saved["seconds"] == pytest.approx(data["seconds"]) and saved["fit_seconds"] == pytest.approx(data["fit_seconds"])
    assert "fit_seconds" in res.output  # the table shows both


def test_fit_of_a_source_tells_the_forming_and_the_scoring_apart_from_the_fit(tmp_path, monkeypatch):
    """`fit points.csv --kernel rbf`: its seconds held forming the kernel matrix and scoring the fit beside the
    fit's own, which nothing told apart; the JSON and the table now give each (compare's format, "0.31"), and
    the table's note says what the seconds hold where they say much more than the fit's."""
    import time

    from sfapprox import KernelMatrix
    from sfapprox.results import fit_seconds_note

    to_dense = KernelMatrix.to_dense
    monkeypatch.setattr(KernelMatrix, "to_dense", lambda self, *a, **k: (time.sleep(0.5), to_dense(self, *a, **k))[1])
    points, js = tmp_path / "points.csv", tmp_path / "fit.json"
    np.savetxt(points, np.random.default_rng(0).standard_normal((40, 3)), delimiter=",")
    res = invoke("fit", points, "--kernel", "rbf", "--iters", 5, "--device", "cpu", "--json", js)
    assert res.exit_code == 0, res.output
    summary = json.loads(js.read_text())
    assert summary["form_seconds"] >= 0.5 * 0.99 and summary["scoring_seconds"] >= 0
    assert summary["fit_seconds"] + summary["form_seconds"] + summary["scoring_seconds"] <= summary["seconds"]
    shown = dict(re.findall(r"(\w*seconds)\W+([0-9.]+)", res.output))
    assert shown == {k: f"{summary[k]:.2f}" for k in ("seconds", "fit_seconds", "form_seconds", "scoring_seconds")}
    note = fit_seconds_note(summary)
    assert note is not None and "forming the matrix" in note and note in " ".join(res.output.split())


def test_fit_table_writes_counts_as_compare_does(tmp_path):
    """fit's table said "max_iter 20000" and "nnz 27000" where compare writes 27,000."""
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).standard_normal((40, 40)))
    res = invoke("fit", path, "--iters", "3", "--device", "cpu", "-q")
    assert res.exit_code == 0, res.output
    nnz = json.loads(invoke("fit", path, "--iters", "3", "--device", "cpu", "-q", "--json", "-").stdout)["nnz"]
    assert nnz >= 1000 and f"{nnz:,}" in res.output and not re.search(rf"\b{nnz}\b", res.output)


def test_fit_json_to_stdout_is_what_the_json_file_holds(tmp_path, small_mtx):
    """`fit --json -` printed the summary only: no settings and no versions, which the file has."""
    js = tmp_path / "f.json"
    filed = invoke("fit", small_mtx, "--json", js, "--iters", "5", "--device", "cpu", "--seed", "3")
    piped = invoke("fit", small_mtx, "--json", "-", "--iters", "5", "--device", "cpu", "--seed", "3")
    assert filed.exit_code == 0 and piped.exit_code == 0, piped.output
    data, printed = json.loads(js.read_text()), json.loads(piped.stdout)
    assert set(printed) == set(data) and {"settings", "versions"} <= set(printed)
    assert printed["settings"] == data["settings"] and printed["settings"]["random_state"] == 3


def test_compare_json_shape(tmp_path, small_mtx):
    js = tmp_path / "c.json"
    res = invoke("compare", small_mtx, "--methods", "sf,tsvd", "--iters", "30", "--json", js, "--device", "cpu")
    assert res.exit_code == 0, res.output
    data = json.loads(js.read_text())
    assert set(data["matrix"]) >= {"name", "n", "nnz", "fro_norm"}
    assert data["matrix"]["name"] == "small" and data["matrix"]["n"] == 12
    assert [r["method"] for r in data["results"]] == ["sf", "tsvd"]
    for row in data["results"]:
        assert set(row) >= {"method", "status", "nnz", "fro_error", "rel_error", "seconds", "params"}
        assert row["status"] == "ok" and row["nnz"] <= data["budget"]
    assert data["budget"] == 12 * 5 * 4
    assert "sf" in res.output and "tsvd" in res.output


def test_compare_sweep_and_fit_titles_name_the_weight_var_picked(tmp_path):
    """``compare w.pt --var b.weight``: the table (terminal, Markdown) was titled "w", whichever weight was
    read; sweep's and fit's too.  Now "w:b.weight", and the JSON's matrix records the var."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    torch.save({"a.weight": torch.from_numpy(rng.random((12, 12))), "b.weight": torch.from_numpy(rng.random((12, 12)))},
               tmp_path / "w.pt")
    md, js = tmp_path / "c.md", tmp_path / "c.json"
    res = invoke("compare", tmp_path / "w.pt", "--var", "b.weight", "--methods", "tsvd", "--markdown", md, "--json", js)
    assert res.exit_code == 0, res.output
    assert "w:b.weight  (N=12" in md.read_text() and "w:b.weight" in res.output
    assert json.loads(js.read_text())["matrix"]["recipe"] == {"var": "b.weight"}
    np.savez(tmp_path / "arrays.npz", A=rng.random((8, 8)), B=rng.random((8, 8)))
    res = invoke("sweep", tmp_path / "arrays.npz", "--var", "B", "--methods", "tsvd", "--budgets", "32",
                 "--markdown", tmp_path / "s.md")
    assert res.exit_code == 0 and "arrays:B (N=8)" in (tmp_path / "s.md").read_text(), res.output
    res = invoke("fit", tmp_path / "w.pt", "--var", "a.weight", "--iters", "3", "--device", "cpu")
    assert res.exit_code == 0 and "SF fit of w:a.weight" in res.output, res.output


def test_save_factors_given_a_file_name_is_refused_before_any_fit(tmp_path):
    """``--save-factors fits.h5`` made a folder named fits.h5 holding one file per method: a user who
    named a file gets a folder they did not ask for.  Refused before any work, nothing made."""
    np.save(tmp_path / "m.npy", np.random.default_rng(0).standard_normal((12, 12)))
    res = invoke("compare", tmp_path / "m.npy", "--methods", "tsvd", "--save-factors", tmp_path / "fits.H5")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "the fits need a folder" in text and "names a file" in text, res.output
    assert "sfapprox fit --out FILE.h5" in text
    assert not (tmp_path / "fits.H5").exists()
    (tmp_path / "old.h5").mkdir()  # an existing folder of that name is a folder: taken
    res = invoke("compare", tmp_path / "m.npy", "--methods", "tsvd", "--save-factors", tmp_path / "old.h5")
    assert res.exit_code == 0 and (tmp_path / "old.h5" / "m.tsvd.h5").is_file(), res.output


def test_a_saved_fit_of_another_weight_of_the_file_is_named_in_the_refusal(tmp_path):
    """``--save-factors out`` after a run on ``--var a.weight`` refused ``--var b.weight`` with "already
    exists" alone: the two weights' fits share ``w.tsvd.h5``; the refusal says whose fit is there."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    torch.save({"a.weight": torch.from_numpy(rng.random((12, 12))), "b.weight": torch.from_numpy(rng.random((12, 12)))},
               tmp_path / "w.pt")
    out = tmp_path / "out"
    first = invoke("compare", tmp_path / "w.pt", "--var", "a.weight", "--methods", "tsvd", "--save-factors", out)
    assert first.exit_code == 0, first.output
    before = (out / "w.tsvd.h5").read_bytes()
    other = invoke("compare", tmp_path / "w.pt", "--var", "b.weight", "--methods", "tsvd", "--save-factors", out)
    text = " ".join(other.output.split())
    assert other.exit_code == 2 and "already holds the fit of 'a.weight' of" in text and "reads 'b.weight'" in text
    assert (out / "w.tsvd.h5").read_bytes() == before
    same = invoke("compare", tmp_path / "w.pt", "--var", "a.weight", "--methods", "tsvd", "--save-factors", out)
    assert same.exit_code == 2 and "already exists; use --force" in " ".join(same.output.split())


def test_compare_budget_fraction(small_mtx):
    res = invoke("compare", small_mtx, "--methods", "tsvd", "--budget", "0.5")
    assert res.exit_code == 0, res.output
    assert "budget 72 stored" in res.output


@pytest.mark.parametrize(
    "content,name,message",
    [
        (None, "missing.mtx", "missing.mtx"),
        ("1,2,3\n4,5,6\n", "rect.csv", "not square"),
        ("1 nan\n2 3\n", "nan.txt", "NaN"),
        ("hello", "x.unknownext", "unknownext"),
        ("%%MatrixMarket matrix coordinate real general\n3 3 1\n9 9 1.0\n", "bad.mtx", "bad.mtx"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, content, name, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    res = invoke("info", path)
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    lines = [line for line in res.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert message in res.output


def test_cuda_without_gpu_is_clear(small_mtx):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    res = invoke("fit", small_mtx, "--device", "cuda")
    assert res.exit_code == 2 and "no CUDA GPU" in res.output


def test_debug_shows_traceback(tmp_path):
    res = runner.invoke(app, ["--debug", "info", str(tmp_path / "missing.mtx")])
    assert res.exit_code == 2 and "Traceback" in res.output


def test_version():
    res = invoke("--version")
    assert res.exit_code == 0 and res.output.startswith("sfapprox ")


def test_compare_plot_shows_each_approximation(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import sfapprox.plotting as plotting

    seen = {}
    real = plotting.plot_approximations

    def spy(X, approximations, path, title="", **kwargs):
        seen.update(X=X, approximations=approximations, title=title)
        real(X, approximations, path, title=title, **kwargs)

    monkeypatch.setattr(plotting, "plot_approximations", spy)
    png = tmp_path / "side.png"
    res = invoke("compare", EXAMPLES / "shapes.png", "--resize", "32", "--methods", "sf,tsvd", "--iters", "20",
                 "--device", "cpu", "--plot", png, "-q")
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [label.split()[0] for label in seen["approximations"]] == ["sf", "tsvd"]
    for approx in seen["approximations"].values():
        assert approx.shape == seen["X"].shape == (32, 32)
    # The same file again needs --force, and says so before fitting anything.
    again = invoke("compare", EXAMPLES / "shapes.png", "--resize", "32", "--plot", png)
    assert again.exit_code == 2 and "--force" in again.output


def test_compare_api_keeps_finished_rows_on_ctrl_c(monkeypatch):
    import sfapprox.comparison as comparison

    real = comparison.run_method
    stop_at = {"name": "tsvd"}

    def interrupt(name, *args, **kwargs):
        if name == stop_at["name"]:
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(comparison, "run_method", interrupt)
    X = np.random.default_rng(0).random((12, 12))
    # Closed-form tsvd runs first: interrupted there, nothing else ran.
    c = comparison.compare(X, ["sf", "nmf", "tsvd", "rpca"], max_iter=5)
    assert [(r.method, r.status) for r in c.results] == [("tsvd", "interrupted")]
    # Then the iterative ones in the order asked: the rows finished before nmf are kept, rpca never ran.
    stop_at["name"] = "nmf"
    c = comparison.compare(X, ["sf", "nmf", "tsvd", "rpca"], max_iter=5)
    assert [(r.method, r.status) for r in c.results] == [("sf", "ok"), ("nmf", "interrupted"), ("tsvd", "ok")]


def test_fit_structure_options(tmp_path, small_mtx):
    js = tmp_path / "f.json"
    res = invoke("fit", small_mtx, "--json", js, "--iters", "10", "--device", "cpu", "--init", "identity",
                 "--support", "symmetric", "-q")
    assert res.exit_code == 0, res.output
    summary = json.loads(js.read_text())
    assert summary["init"] == "identity" and summary["support"] == "symmetric" and summary["base"] == 2
    assert summary["offsets"] == [0, 1, 2, 4, 8, 10, 11]  # -2, -1 mod 12 (-4, -8 coincide with 8, 4)
    clash = invoke("fit", small_mtx, "--budget", "0.5", "--base", "3")
    assert clash.exit_code == 2 and "leave out --base" in clash.output


def test_fit_from_the_rank_one_start(tmp_path, small_mtx):
    js = tmp_path / "f.json"
    res = invoke("fit", small_mtx, "--json", js, "--iters", "10", "--device", "cpu", "--init", "rank1", "-q")
    assert res.exit_code == 0, res.output
    assert json.loads(js.read_text())["init"] == "rank1"
    wrong = invoke("fit", small_mtx, "--init", "rank1", "--base", "3", "--device", "cpu", "-q")
    # the start and its alternatives as typed: "init='rank1'" is a Python caller's spelling
    assert wrong.exit_code == 2 and "--init rank1 needs the offsets 1, 2, 4" in wrong.output
    assert "use --init auto, --init reference or --init identity" in wrong.output and "init='" not in wrong.output
    unknown = invoke("fit", small_mtx, "--init", "rank2", "--device", "cpu", "-q")
    assert unknown.exit_code == 2 and "auto, reference, identity, rank1" in unknown.output


def test_json_dash_goes_to_stdout_alone(small_mtx):
    res = runner.invoke(app, ["compare", str(small_mtx), "--methods", "tsvd", "--json", "-"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # stdout is JSON only; the table went to stderr
    assert data["results"][0]["method"] == "tsvd" and data["settings"]["seed"] == 0
    assert "numpy" in data["versions"] and not Path("-").exists()


def test_every_table_format_from_one_command(tmp_path, small_mtx):
    outs = {fmt: tmp_path / f"c.{fmt}" for fmt in ("csv", "markdown", "latex")}
    args = ["compare", small_mtx, "--methods", "tsvd,rpca"]
    for fmt, path in outs.items():
        args += [f"--{fmt}", path]
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    assert outs["csv"].read_text().startswith("method,stored")
    assert "| tsvd" in outs["markdown"].read_text() and "\\toprule" in outs["latex"].read_text()
    two = invoke("compare", small_mtx, "--json", "-", "--csv", "-")
    assert two.exit_code == 2 and "only one output can go to standard output" in two.output


def test_formats_and_methods_commands():
    res = invoke("formats")
    assert res.exit_code == 0 and "mtx" in res.output and "--markdown" in res.output
    res = invoke("methods", "--json", "-")
    assert res.exit_code == 0 and {"sf", "tsvd", "nmf"} <= set(json.loads(res.stdout)["methods"])
    data = json.loads(res.stdout)  # the table's formulas were missing from the JSON
    assert data["stores"]["tsvd"] == "r·(2N + 1)" and set(data["stores"]) == set(data["methods"])
    assert data["from_columns"]["rsvd"] is True and data["from_columns"]["nmf"] is False


def test_info_and_compare_with_a_saved_fit(tmp_path, small_mtx):
    h5 = tmp_path / "f.h5"
    assert invoke("fit", small_mtx, "--out", h5, "--iters", "10", "--device", "cpu", "-q").exit_code == 0
    res = invoke("info", h5)
    assert res.exit_code == 0 and "saved sf fit" in res.output and "small" in res.output
    res = invoke("compare", small_mtx, "--with", h5, "--methods", "tsvd", "--json", "-")
    assert res.exit_code == 0, res.output
    rows = {r["method"]: r for r in json.loads(res.stdout)["results"]}
    assert rows["saved:f"]["status"] == "ok" and rows["saved:f"]["nnz"] == 240
    res = invoke("compare", h5)
    assert res.exit_code == 2 and "is a saved fit, not a matrix" in res.output


def test_help_flags_and_module_entry_point():
    import subprocess
    import sys

    assert invoke("-h").exit_code == 0
    done = subprocess.run([sys.executable, "-m", "sfapprox", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("sfapprox ")
    text = invoke("compare", "--help").output
    assert "<bool>" not in text.split("--help")[0]  # flags take no value


def _commands():
    """(words after 'sfapprox', click command) for the app, every command and every group's command."""
    import typer

    def walk(command, path):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_help_never_cuts_an_option_name(columns):
    """Rich's options table cut names to fit: '--no-count-indi…' even at 80 columns, 9 names at 60, 25 at 40.
    Now every option name of every command is shown whole in its --help (the descriptions wrap)."""
    import re

    for path, command in _commands():
        res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
        assert res.exit_code == 0, res.output
        assert "…" not in res.output, res.output
        names = [name for param in command.params if not getattr(param, "hidden", False)
                 for name in (*param.opts, *param.secondary_opts) if name.startswith("-")]
        for name in names:
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", res.output), (
                f"{name} cut in 'sfapprox {' '.join(path)} --help' at {columns} columns:\n{res.output}")


@pytest.mark.parametrize("columns", [40, 60, 80, 120])
def test_help_never_breaks_a_word_at_its_hyphen(columns):
    """click's wrapper broke lines after hyphens: '--no-' / 'count-indices' at 60 to 120 columns, '--out-' /
    'dir' in batch's example, '[default: count-' / 'indices]', 'data_manifests/paper-' / 'table1.toml'.
    No line of any command's --help now ends in a word's hyphen, and the names read whole."""
    import re

    from sfapprox.cli._app import wrap_help

    for path, _ in _commands():
        res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
        assert res.exit_code == 0, res.output
        broken = re.findall(r"^.*\w-$", res.output, re.M)
        assert not broken, f"'sfapprox {' '.join(path)} --help' at {columns} columns breaks at a hyphen: {broken}"
    text = " ".join(CliRunner().invoke(app, ["compare", "--help"], env={"COLUMNS": str(columns)},
                                       terminal_width=columns).output.split())
    assert "--no-count-indices charges" in text and "[default: count-indices]" in text
    # a word longer than the line is cut after a folder, not at its hyphen
    assert wrap_help("e.g. data_manifests/paper-table1.toml.", 22).splitlines() == [
        "e.g. data_manifests/", "paper-table1.toml."]
    assert all(not line.endswith("-") for line in wrap_help("x" * 9 + "-" + "y" * 30, 10).splitlines())


def test_help_shows_brackets_and_each_command_s_whole_summary():
    """Rich read '[plot]' in "pip install 'sfapprox[plot]'" as markup and dropped it; click's plain list of
    commands cut each summary to one line with '...'."""
    text = " ".join(invoke("compare", "--help").output.split())
    assert "pip install 'sfapprox[plot]'" in text and "needs sfapprox[dask]" in text
    text = " ".join(invoke("--help").output.split("Commands:")[1].split())
    assert "batch Run methods on every matrix of a manifest; resumable, one JSON line per (matrix, method)." in text
    assert "..." not in text



def test_help_names_a_folder_by_its_option_s_metavar():
    """batch's help wrote the reports to 'OUT/report.md' where its option is '--out-dir DIR' (and --data-dir is
    a DIR too): a placeholder path in a command's help (FOLDER/<name>.h5) is the metavar of exactly one of its
    options."""
    import re

    for path, command in _commands():
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        metavars = [p.metavar for p in command.params if p.metavar]
        for name in re.findall(r"\b([A-Z][A-Z_]*)/[a-z<]", " ".join(texts)):
            assert metavars.count(name) == 1, f"'sfapprox {' '.join(path)} --help' writes {name}/ ({metavars})"

def test_every_option_s_value_is_named_by_a_metavar():
    """datasets list/verify/fetch showed '--data-dir <path>' and '--only <str>' (Typer's type names) where batch's
    same options read '--data-dir DIR' and '--only NAMES': no option's value is shown as a bare type."""
    import re

    for path, command in _commands():
        res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}, terminal_width=200)
        options = res.output.split("Options:", 1)[-1]
        bare = re.findall(r"^\s+(?:-\w, )?--[\w-]+ (<(?:path|str|int|float|text)>|TEXT|INTEGER|FLOAT|PATH)(?!\w)",
                          options, re.M | re.I)
        assert not bare, f"'sfapprox {' '.join(path)} --help': {bare}"


def test_fit_help_says_its_budget_takes_sf():
    """fit --budget takes 'sf' (the reference structure's count), as compare's does; its help named only a count
    or a fraction."""
    text = " ".join(invoke("fit", "--help").output.split())
    assert "'sf'" in text.split("--budget BUDGET", 1)[1].split(" --", 1)[0]


@pytest.mark.parametrize("argv", [[], ["datasets"]])
def test_no_arguments_print_the_help_whole(argv):
    """A group run without a command prints its help on stdout, as --help does, and exits 2 (click's help
    comes as the message of its usage error; it was folded into one 'error:' line)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sfapprox", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr == ""
    assert done.stdout.startswith("Usage: ") and "\nCommands:\n" in done.stdout


@pytest.mark.parametrize("encoding", ["shift_jis", "gbk"])
def test_a_stream_that_has_some_glyphs_only_gets_the_others_spelled_out(encoding):
    """Shift-JIS and GBK have ‖ and ━ but not X̂'s hat (nor, Shift-JIS, ``·`` and ``²``): the streams were tried
    on ‖━ alone and kept their strict errors, while the tables were tried on every glyph; ``methods --markdown -``
    (a formula's ``N·K·M``) ended in a UnicodeEncodeError after the work.  One test now: what the encoding lacks
    is spelled out."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sfapprox", "methods", "--markdown", "-"], capture_output=True,
                          timeout=60, env={**os.environ, "PYTHONIOENCODING": encoding})
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(encoding, "replace")[-600:]
    text = done.stdout.decode(encoding)
    assert "| name | stores | what |" in text
    assert "| sf | N*K*M |" in text if encoding == "shift_jis" else "| sf | N·K·M |" in text  # (GBK has ·)


def test_a_fit_cut_by_its_time_limit_is_said(small_mtx):
    res = invoke("compare", small_mtx, "--methods", "sf,tsvd", "--time-limit", "0.05", "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert "stopped on the time limit before converging: sf 0.05 s" in " ".join(res.output.split())
    assert "--time-limit" in res.output


def test_first_command_tells_the_truth_and_names_the_next(small_mtx):
    res = invoke("compare", small_mtx, "--methods", "sf,tsvd", "--iters", "30", "--device", "cpu")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "X has only" in text and "plain sparse storage ('sparse') holds it exactly" in text
    assert f"next: sfapprox compare {small_mtx} --methods sf,tsvd,sparse" in text
    ran = invoke("compare", small_mtx, "--methods", "sf,tsvd,sparse", "--iters", "30", "--device", "cpu")
    assert ran.exit_code == 0 and "next:" not in ran.output and "X has only" not in ran.output


def test_count_indices_is_on_by_default_and_can_be_turned_off(tmp_path, small_mtx):
    for flag, charged in ((None, True), ("--no-count-indices", False), ("--count-indices", True)):
        js = tmp_path / f"{flag}.json"
        res = invoke("compare", small_mtx, "--methods", "rpca", "--time-limit", "2", "--json", js,
                     *([flag] if flag else []))
        assert res.exit_code == 0, res.output
        data = json.loads(js.read_text())
        [row] = data["results"]
        assert data["settings"]["count_indices"] is charged and row["params"]["count_indices"] is charged
        per_entry = 2 if charged else 1
        assert row["nnz"] == per_entry * row["params"]["n_sparse"] + row["params"]["rank"] * 25


def test_a_fit_killed_outright_resumes_from_its_checkpoint(tmp_path):
    """kill -9 during `fit --checkpoint-every`: the file holds the last checkpoint, and --init resumes there."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import scipy.io

    rng = np.random.default_rng(1)
    path, out = tmp_path / "m.mtx", tmp_path / "f.h5"
    scipy.io.mmwrite(path, rng.random((64, 64)))
    proc = subprocess.Popen([sys.executable, "-m", "sfapprox", "fit", str(path), "--out", str(out),
                             "--checkpoint-every", "0.2", "--time-limit", "60", "--iters", "1000000", "--quiet",
                             "--device", "cpu"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a few more checkpoints
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    from sfapprox import load_factors

    saved = load_factors(out)  # complete: every checkpoint was written atomically
    assert saved.fit["checkpoint"] and saved.fit["iterations"] > 0
    res = invoke("fit", path, "--init", out, "--out", out, "--force", "--iters", "5", "--device", "cpu",
                 "--json", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    # A kill during a checkpoint's write leaves its hidden temporary; the resumed run's write removed it.
    assert not [p.name for p in tmp_path.iterdir() if ".new" in p.name or p.name.startswith(".")]
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["init"] == "saved" and summary["fro_error"] <= saved.fit["fro_error"] * (1 + 1e-9)


def test_the_table_of_a_resumed_fit_names_the_file_it_started_from(tmp_path, monkeypatch):
    """A fit from --init FILE showed "init: saved" alone: its table named no file (only the JSON's settings did)."""
    import scipy.io

    monkeypatch.chdir(tmp_path)  # a short name: the table's cell holds it whole
    path, start = Path("m.mtx"), Path("start.h5")
    scipy.io.mmwrite(path, np.random.default_rng(1).random((16, 16)))
    assert invoke("fit", path, "--out", start, "--iters", "5", "--device", "cpu", "-q").exit_code == 0
    res = invoke("fit", path, "--init", start, "--iters", "5", "--device", "cpu", "-q")
    assert res.exit_code == 0, res.output
    assert re.search(r"init\s*│\s*saved \(" + re.escape(str(start)), res.output), res.output


@pytest.mark.skipif(os.name != "posix", reason="flock, symbolic links")
@pytest.mark.parametrize("spelling", ["same", "link", "relative"])
def test_a_second_fit_on_one_out_refuses_at_once_naming_the_first(tmp_path, small_mtx, output_holder, monkeypatch,
                                                                  spelling):
    """Two `fit --out f.h5 --checkpoint-every 60 --force` started together both ran for minutes: the second found
    out at its first checkpoint (its file kept aside), or with --force replaced the other's checkpoints.  Now the
    second refuses before reading its matrix, naming the first, whichever spelling of the file it was given."""
    out = tmp_path / "f.h5"
    holder = output_holder(out)
    (tmp_path / "sub").mkdir()
    (tmp_path / "g.h5").symlink_to(out)
    monkeypatch.chdir(tmp_path / "sub")
    given = {"same": out, "link": tmp_path / "g.h5", "relative": Path("..") / "f.h5"}[spelling]
    before = sorted(p.name for p in tmp_path.iterdir())
    read = []
    monkeypatch.setattr("sfapprox.cli.fit.read_matrix", lambda *args: read.append(args))
    res = invoke("fit", small_mtx, "--out", given, "--force", "--checkpoint-every", 60, "--device", "cpu",
                 "--iters", 5)
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.startswith(f"error: {given}: is being written by another run (pid {holder.pid} on "), line
    assert "started " in line
    assert line.endswith("; wait for it to end or choose another --out")
    assert not read and sorted(p.name for p in tmp_path.iterdir()) == before  # no work, nothing written


@pytest.mark.skipif(os.name != "posix", reason="flock and POSIX signals")
def test_kill_9_of_the_fit_writing_an_out_frees_it(tmp_path, small_mtx, output_holder):
    import signal

    out = tmp_path / "f.h5"
    holder = output_holder(out)
    assert json.loads((tmp_path / ".f.h5.sfapprox-lock.json").read_text())["pid"] == holder.pid
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    res = invoke("fit", small_mtx, "--out", out, "--checkpoint-every", 60, "--device", "cpu", "--iters", 5, "-q")
    assert res.exit_code == 0, res.output  # the kernel released the lock; its holder file named no one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.h5", "small.mtx"]  # lock and holder removed at the end


def test_a_fit_to_standard_output_takes_no_lock(tmp_path, small_mtx, monkeypatch):
    """--out - is written through: no second writer can clobber it, and there is no folder to lock in."""
    def no_lock(*args, **kwargs):
        raise AssertionError(f"a lock was taken: {args}")

    monkeypatch.setattr("sfapprox._output_lock.held_lock", no_lock)
    res = runner.invoke(app, ["fit", str(small_mtx), "--out", "-", "--device", "cpu", "--iters", "5", "-q"])
    assert res.exit_code == 0, res.output
    res = invoke("fit", small_mtx, "--out", tmp_path / "f.h5", "--device", "cpu", "--iters", "5", "-q")
    assert isinstance(res.exception, AssertionError)  # (a file's fit does take it)


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_a_second_compare_saving_the_same_fits_refuses_before_fitting(tmp_path, small_mtx, output_holder,
                                                                     monkeypatch):
    """Two `compare --save-factors FOLDER --force` of one matrix started together both fitted for minutes and wrote
    over each other's files: the folder held a mix of the two runs.  The second now refuses before its fits."""
    fits = tmp_path / "fits"
    fits.mkdir()
    holder = output_holder(fits / "small.tsvd.h5")
    fitted = []
    monkeypatch.setattr("sfapprox.compare", lambda *args, **kwargs: fitted.append(args))
    res = invoke("compare", small_mtx, "--methods", "tsvd", "--save-factors", fits, "--force", "--device", "cpu")
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.startswith(f"error: {fits / 'small.tsvd.h5'}: is being written by another run (pid {holder.pid} on ")
    assert line.endswith("; wait for it to end or choose another --save-factors") and not fitted


def test_a_compare_holds_the_locks_of_its_fits_files_from_before_its_fits_in_a_folder_it_makes(tmp_path, small_mtx,
                                                                                             monkeypatch):
    import sfapprox

    fits, seen, real = tmp_path / "new" / "fits", [], sfapprox.compare

    def spy(*args, **kwargs):
        seen.append(sorted(p.name for p in fits.iterdir()))
        return real(*args, **kwargs)

    monkeypatch.setattr("sfapprox.compare", spy)
    res = invoke("compare", small_mtx, "--methods", "tsvd", "--save-factors", fits, "--device", "cpu", "-q")
    assert res.exit_code == 0, res.output
    assert seen == [[".small.tsvd.h5.sfapprox-lock", ".small.tsvd.h5.sfapprox-lock.json"]]
    assert sorted(p.name for p in fits.iterdir()) == ["small.tsvd.h5"]


def test_a_compare_that_saves_no_fit_leaves_no_folder_made_for_its_locks(tmp_path):
    """`compare neg.npy --methods nmf --save-factors new/fits`: nmf does not apply to negative entries, nothing
    is saved, and the folders made before the fits for the locks were left empty (none before there were
    locks).  They are removed; a folder that was there stays."""
    np.save(tmp_path / "neg.npy", -np.abs(np.random.default_rng(0).standard_normal((16, 16))) - 1)
    res = invoke("compare", tmp_path / "neg.npy", "--methods", "nmf", "--save-factors", tmp_path / "new" / "fits",
                 "--device", "cpu", "-q")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["neg.npy"]
    (tmp_path / "there").mkdir()
    res = invoke("compare", tmp_path / "neg.npy", "--methods", "nmf", "--save-factors", tmp_path / "there",
                 "--device", "cpu", "-q")
    assert res.exit_code == 0 and (tmp_path / "there").is_dir() and not list((tmp_path / "there").iterdir())


def test_fit_of_a_kernel_over_the_memory_limit_runs_from_columns(tmp_path):
    """`fit points.csv --kernel rbf` whose in-memory fit is over --max-memory: SF from column blocks,
    never formed; the table says which path ran and the error is scored from the columns."""
    import math

    from sfapprox.chord import chord_offsets
    from sfapprox.sf._columns import COLUMN_WIDTH, column_fit_memory
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET

    n = 300
    points = tmp_path / "points.csv"
    np.savetxt(points, np.random.default_rng(0).standard_normal((n, 3)), delimiter=",")
    limit = (column_fit_memory(n, math.ceil(math.log2(n)), len(chord_offsets(n)), COLUMN_WIDTH)
             + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (2 << 20))
    js, out = tmp_path / "fit.json", tmp_path / "fit.h5"
    res = invoke("fit", points, "--kernel", "rbf", "--max-memory", limit, "--iters", 30, "--time-limit", 0,
                 "--json", js, "--out", out)
    assert res.exit_code == 0, res.output
    assert "columns" in res.output and "fitted from column blocks" in res.output
    summary = json.loads(js.read_text())
    assert summary["path"] == "columns" and summary["iterations"] == 30 and summary["epochs"] == 15
    assert summary["error_estimate"]["exact"] and 0 < summary["rel_error"] < 1
    # never formed: no forming in its seconds; its scoring from columns told apart from the fit's own
    assert summary["form_seconds"] is None and "form_seconds" not in res.output
    assert 0 < summary["scoring_seconds"] < summary["seconds"] and "scoring_seconds" in res.output
    assert summary["fit_seconds"] + summary["scoring_seconds"] <= summary["seconds"]
    from sfapprox import KernelMatrix, load_factors

    K = KernelMatrix(np.loadtxt(points, delimiter=","))
    saved = load_factors(out).operator.to_dense()
    assert summary["fro_error"] == pytest.approx(np.linalg.norm(K.to_dense() - saved), rel=1e-9)


def test_compare_on_a_dask_scheduler_gives_the_local_rows(tmp_path):
    """compare --scheduler: a kernel too big for --max-memory, its passes on a (local) Dask cluster, the
    same rows as without it."""
    distributed = pytest.importorskip("dask.distributed")
    points = tmp_path / "points.csv"
    np.savetxt(points, np.random.default_rng(2).standard_normal((120, 2)), delimiter=",")
    common = ["compare", points, "--kernel", "rbf", "--max-memory", "32M",
              "--methods", "nystrom,sparse,rsvd", "--time-limit", "30"]
    local = invoke(*common, "--json", tmp_path / "local.json")
    assert local.exit_code == 0, local.output
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        remote = invoke(*common, "--scheduler", cluster.scheduler_address, "--json", tmp_path / "remote.json")
    assert remote.exit_code == 0, remote.output
    a, b = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("local", "remote"))
    assert a["matrix"]["path"] == b["matrix"]["path"] == "columns"
    for x, y in zip(a["results"], b["results"]):
        assert (x["method"], x["status"], x["nnz"]) == (y["method"], y["status"], y["nnz"])
        assert x["rel_error"] == pytest.approx(y["rel_error"], rel=1e-12, abs=1e-15)


def test_compare_scheduler_without_dask_is_one_line_before_any_work(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    points = tmp_path / "points.csv"
    np.savetxt(points, np.random.default_rng(0).standard_normal((20, 2)), delimiter=",")
    res = invoke("compare", points, "--kernel", "rbf", "--scheduler", "tcp://127.0.0.1:1", "--json", tmp_path / "r.json")
    assert res.exit_code == 2 and "--scheduler needs dask.distributed" in res.output
    assert not (tmp_path / "r.json").exists()


def test_the_next_command_keeps_the_source_options(tmp_path):
    """The suggested command is the one that ran with other methods: a kernel's --kernel and --bandwidth
    kept (it used to be rebuilt from the path alone, which then read a points table as a matrix)."""
    import subprocess
    import sys

    points = tmp_path / "pts.csv"
    np.savetxt(points, np.random.default_rng(0).standard_normal((60, 3)), delimiter=",")
    done = subprocess.run([sys.executable, "-m", "sfapprox", "compare", str(points), "--kernel", "rbf",
                           "--bandwidth", "1e-3", "--methods=tsvd", "--seed", "3"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"next: sfapprox compare {points} --kernel rbf --bandwidth 1e-3 --seed 3 --methods tsvd,sparse" in \
        " ".join(done.stderr.split())


class _Suggesting:
    """A comparison whose verdict suggests running sparse too (what suggest_next reads of one)."""

    def verdict(self):
        return {"suggest": ["sparse"]}


@pytest.mark.parametrize("argv, said", [
    # an option given twice (the same value: the last counts) is said once, in its first place
    (["compare", "m.mat", "--var", "A", "-q", "--var=A", "--quiet", "--methods", "tsvd"],
     "compare m.mat --var=A --quiet --methods tsvd,sparse"),
    (["compare", "m.mat", "--no-count-indices", "--count-indices", "--methods", "tsvd"],
     "compare m.mat --count-indices --methods tsvd,sparse"),
    # a repeatable option keeps every value
    (["compare", "m.mat", "--with", "a.h5", "--with", "b.h5", "--methods", "tsvd"],
     "compare m.mat --with a.h5 --with b.h5 --methods tsvd,sparse"),
    # sfapprox's own --debug before the command: the command's options kept (it was the plain form)
    (["--debug", "compare", "p.csv", "--kernel", "rbf", "--methods", "tsvd"],
     "--debug compare p.csv --kernel rbf --methods tsvd,sparse"),
])
def test_the_next_command_gives_each_option_once(capsys, argv, said):
    from sfapprox.cli.compare import suggest_next

    suggest_next(_Suggesting(), Path("m.mat"), ["tsvd"], argv=argv)
    assert f"next: sfapprox {said}\n" in capsys.readouterr().err


def test_the_next_command_replaces_only_the_methods():
    from sfapprox.cli.compare import _with_methods

    assert _with_methods(["compare", "a b.csv", "--methods", "sf", "--var", "W"], "sf,sparse") == \
        ["compare", "a b.csv", "--var", "W", "--methods", "sf,sparse"]
    assert _with_methods(["compare", "x.npy", "--methods=sf"], "sf,tsvd") == ["compare", "x.npy", "--methods", "sf,tsvd"]


@pytest.mark.parametrize("option, value, said", [
    ("--time-limit", "inf", "'--time-limit': must be a finite number of seconds, at least 0 (0 for none); got inf"),
    ("--device", "tpu", "--device must be one of auto, cpu, cuda or cuda:N. Got 'tpu' instead."),
])
def test_a_setting_refused_names_its_option_not_the_settings_class(small_mtx, option, value, said):
    res = invoke("fit", small_mtx, option, value)
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert said in text and "FitSettings" not in text


def test_a_thread_count_no_machine_has_is_refused(small_mtx):
    res = invoke("fit", small_mtx, "--threads", "99999999999")
    assert res.exit_code == 2 and "--threads must be an int in the range [1, 1024]. Got 99999999999" in \
        " ".join(res.output.split())


def test_an_output_that_is_the_commands_input_is_refused_even_with_force(tmp_path):
    """--force let fit replace its input matrix with HDF5 and report replace results.jsonl with CSV."""
    from typer.testing import CliRunner

    from sfapprox.cli import app

    X = tmp_path / "in.npy"
    np.save(X, np.random.default_rng(0).standard_normal((16, 16)))
    before = X.read_bytes()
    for args in (["fit", str(X), "--out", str(X), "--force"], ["fit", str(X), "--json", str(X), "--force"],
                 ["compare", str(X), "--methods", "tsvd", "--json", str(X), "--force"],
                 ["info", str(X), "--json", str(X), "--force"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "is this command's input" in result.output, (args, result.output)
    assert X.read_bytes() == before


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_a_figure_named_like_another_output_is_refused_before_any_work(tmp_path, small_mtx, command):
    figure = tmp_path / "p.png"
    extra = ["--budgets", "0.5"] if command == "sweep" else []
    res = invoke(command, small_mtx, "--methods", "tsvd", *extra, "--plot", figure, "--csv", figure)
    assert res.exit_code == 2 and "named for two outputs" in res.output, res.output
    assert not figure.exists()  # the table's text went into the figure's file, after the whole run
    # the two options named, as typed (it said "(p.png and p.png)"); a link to the other file, both paths
    assert "named for two outputs (--csv and --plot); give each its own file" in " ".join(res.output.split())
    (tmp_path / "link.png").symlink_to(figure)
    res = invoke(command, small_mtx, "--methods", "tsvd", *extra, "--plot", tmp_path / "link.png", "--csv", figure)
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and f"(--csv {figure} and --plot {tmp_path / 'link.png'}, the same file)" in said, said


def test_null_takes_several_outputs_and_a_dash_out_is_standard_output(tmp_path, small_mtx):
    import io
    import subprocess
    import sys

    import h5py

    res = invoke("fit", small_mtx, "--iters", "5", "--device", "cpu", "--out", "/dev/null", "--json", "/dev/null")
    assert res.exit_code == 0, res.output
    done = subprocess.run([sys.executable, "-m", "sfapprox", "fit", str(small_mtx), "--iters", "5", "--device", "cpu",
                           "--quiet", "--out", "-"], capture_output=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    with h5py.File(io.BytesIO(done.stdout)) as f:  # the factors, on standard output
        assert f.attrs["n"] == 12
    assert not (tmp_path / "-").exists()  # a file named "-" before


def test_factors_sent_to_standard_output_are_not_said_written_to_a_path(tmp_path, small_mtx):
    """``fit --out -`` said "wrote /dev/stdout", a path never typed; standard output is not said (as
    ``compare --json -`` does not), while a --json file beside it still is."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sfapprox", "fit", str(small_mtx), "--iters", "5", "--device", "cpu",
                           "--out", "-", "--json", "fit.json"], capture_output=True, cwd=tmp_path, timeout=120)
    said = done.stderr.decode()
    assert done.returncode == 0 and done.stdout.startswith(b"\x89HDF"), said
    assert "/dev/stdout" not in said and "wrote fit.json" in said, said


def test_a_huge_factor_count_is_refused_at_once_and_a_structure_over_n2_is_said(small_mtx):
    # --factors 1000000 spun in the support check (one pass per factor) and was never refused
    res = invoke("fit", small_mtx, "--iters", "2", "--device", "cpu", "--factors", "1000000", "--max-memory", "2G")
    assert res.exit_code == 2 and "over the memory limit" in res.output, res.output
    res = invoke("fit", small_mtx, "--iters", "2", "--device", "cpu", "--factors", "4")
    assert res.exit_code == 0, res.output
    assert "no fewer than the matrix's own 144 entries: a dense copy would be as small" in " ".join(res.output.split())


def test_the_next_command_runs_as_printed_after_writing_outputs(tmp_path, small_mtx):
    """With --json FILE the suggested command refused to start ("already exists; use --force"): it now
    carries --force, and runs."""
    import shlex
    import subprocess
    import sys

    js = tmp_path / "c.json"
    run = [sys.executable, "-m", "sfapprox"]
    done = subprocess.run([*run, "compare", str(small_mtx), "--methods", "tsvd", "--json", str(js), "--device", "cpu"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("next: "))
    assert line.endswith("--force"), line
    again = subprocess.run([*run, *shlex.split(line)[2:]], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr


def test_info_json_to_stdout_keeps_the_summary_on_stderr(small_mtx):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sfapprox", "info", str(small_mtx), "--json", "-"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # clean JSON on stdout
    assert "sha256" in done.stderr and "where each method applies" in done.stderr  # the summary was left out


def test_info_on_a_saved_fit_refuses_options_for_reading_a_matrix(tmp_path, small_mtx):
    fit = tmp_path / "f.h5"
    assert invoke("fit", small_mtx, "--out", fit, "--iters", "5", "--device", "cpu").exit_code == 0
    res = invoke("info", fit, "--kernel", "rbf")  # ran, and ignored the kernel
    assert res.exit_code == 2 and "a saved fit is read as it is; --kernel applies to matrix files" in res.output
    assert invoke("info", fit).exit_code == 0


@pytest.mark.parametrize("stream", ["-", "/dev/stdout"])
def test_checkpoints_into_a_stream_are_refused(small_mtx, stream):
    # every checkpoint went to stdout one after another: the file read back was an early checkpoint
    res = invoke("fit", small_mtx, "--checkpoint-every", "0.2", "--out", stream, "--iters", "5", "--device", "cpu")
    assert res.exit_code == 2 and "is a stream, not a file" in " ".join(res.output.split())
    # named as typed: '-' is standard output ("/dev/stdout is a stream" named a path never given)
    assert ("--out - (standard output) is a stream" if stream == "-" else "/dev/stdout is a stream") in \
        " ".join(res.output.split())


def test_compare_of_a_kernel_saves_its_factors_and_records_the_points_file_and_the_kernel(tmp_path):
    """--save-factors on a kernel (formed, and from columns): the files are written (an AttributeError lost
    every fit before), each naming the points file (path, SHA-256) and the kernel; the results say the
    same, with the formed kernel exactly symmetric; a fit of another kernel of the same file is noted."""
    import hashlib

    from sfapprox.factors import load_factors

    points = tmp_path / "pts.npy"
    np.save(points, np.random.default_rng(0).standard_normal((120, 3)))
    digest = hashlib.sha256(points.read_bytes()).hexdigest()
    for extra, folder in (([], "formed"), (["--max-memory", "3M", "--budget", "0.05"], "columns")):
        res = invoke("compare", points, "--kernel", "rbf", "--methods", "nystrom", "--save-factors", tmp_path / folder,
                     "--json", tmp_path / f"{folder}.json", *extra)
        assert res.exit_code == 0, res.output
        matrix = json.loads((tmp_path / f"{folder}.json").read_text())["matrix"]
        assert matrix["sha256"] == digest and matrix["format"] == "kernel" and matrix["symmetric"] is True
        assert os.path.basename(matrix["file" if folder == "columns" else "path"]) == "pts.npy"
        saved = load_factors(tmp_path / folder / "pts.nystrom.h5")
        assert saved.source["sha256"] == digest and saved.source["recipe"]["kernel"] == "rbf"
    res = invoke("compare", points, "--kernel", "laplacian", "--methods", "tsvd", "--with",
                 tmp_path / "formed" / "pts.nystrom.h5")
    assert res.exit_code == 0 and "was fitted to another matrix of this file (kernel=rbf" in res.output
    res = invoke("compare", points, "--kernel", "rbf", "--methods", "tsvd", "--with", tmp_path / "formed" / "pts.nystrom.h5")
    assert res.exit_code == 0 and "another matrix" not in res.output


def test_a_saved_fit_of_a_memory_mapped_file_is_told_from_another_file_by_its_contents_not_its_path(tmp_path):
    """A memory-mapped .npy is never hashed whole: its saved fit was judged by its path, so a byte-identical
    copy elsewhere was "another matrix of this file" and another file of the same shape passed unnoticed.
    Its size and sampled chunks tell them apart; a bandwidth given as the median rule gives it is the same
    kernel."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((400, 400))
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", A + 1e-3)
    shutil.copy(tmp_path / "a.npy", tmp_path / "copy.npy")
    limit = ["--max-memory", "2M", "--methods", "rsvd", "--budget", "0.1"]
    res = invoke("compare", tmp_path / "a.npy", *limit, "--save-factors", tmp_path / "fits")
    assert res.exit_code == 0, res.output
    fit = tmp_path / "fits" / "a.rsvd.h5"
    for name, other in (("a", False), ("copy", False), ("b", True)):
        res = invoke("compare", tmp_path / f"{name}.npy", *limit, "--with", fit)
        assert res.exit_code == 0, res.output
        said = " ".join(res.output.split())
        assert "memory-mapped" in said  # (not formed: no SHA-256 of the whole file)
        assert ("another file's contents" in said and "not to this file" in said) is other, said
        assert "another matrix" not in said
    points = tmp_path / "pts.npy"
    np.save(points, rng.standard_normal((100, 3)))
    res = invoke("compare", points, "--kernel", "rbf", "--methods", "tsvd", "--save-factors", tmp_path / "k",
                 "--json", tmp_path / "k.json")
    assert res.exit_code == 0, res.output
    median = json.loads((tmp_path / "k.json").read_text())["matrix"]["recipe"]["bandwidth"]
    res = invoke("compare", points, "--kernel", "rbf", "--bandwidth", repr(median), "--methods", "tsvd",
                 "--with", tmp_path / "k" / "pts.tsvd.h5")
    assert res.exit_code == 0 and "another matrix" not in res.output, res.output


@pytest.mark.parametrize("option", [["--var", "x"], ["--resize", "100"], ["--gradient"], ["--network", "3"]])
def test_reading_options_that_do_not_apply_to_a_kernel_are_refused(tmp_path, option):
    points = tmp_path / "pts.npy"
    np.save(points, np.random.default_rng(0).standard_normal((30, 3)))
    res = invoke("compare", points, "--kernel", "rbf", "--methods", "tsvd", *option)
    assert res.exit_code == 2 and "does not apply to it" in res.output


@pytest.mark.parametrize("address", ["garbage", "", "tcp://[::1"])
def test_a_scheduler_address_that_is_not_one_is_one_line(tmp_path, address):
    pytest.importorskip("dask.distributed")
    points = tmp_path / "points.csv"
    np.savetxt(points, np.random.default_rng(0).standard_normal((20, 2)), delimiter=",")
    res = invoke("compare", points, "--kernel", "rbf", "--scheduler", address, "--json", tmp_path / "r.json")
    assert res.exit_code == 2 and "scheduler" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r.json").exists()


def test_a_warning_is_one_line_without_python_s_source_line():
    import io

    from sfapprox.cli import _one_line_warning

    buffer = io.StringIO()
    _one_line_warning(RuntimeWarning("q.h5: taken;\n  saved aside"), RuntimeWarning, "/x/sfapprox/cli/fit.py", 84,
                      file=buffer, line="run = fit_matrix(")
    assert buffer.getvalue() == "warning: q.h5: taken; saved aside\n"


def test_info_says_never_where_the_matrix_rules_a_method_out(tmp_path):
    """Nyström needs a symmetric matrix and NMF a non-negative one: info listed their smallest budgets on
    matrices a comparison then marked "not applicable" for them."""
    path = tmp_path / "x.npy"
    np.save(path, np.triu(np.random.default_rng(0).standard_normal((12, 12))))  # neither
    res = invoke("info", path, "--json", "-")
    assert res.exit_code == 0, res.output
    methods = json.loads(res.stdout[res.stdout.index("{"):])["methods"]
    assert methods["nystrom"]["min_budget"] is None and methods["nystrom"]["not_applicable"] == "X is not symmetric"
    assert methods["nmf"]["not_applicable"] == "X is not non-negative" and methods["tsvd"]["min_budget"] > 0
    np.save(path, np.eye(12))
    methods = json.loads((res := invoke("info", path, "--json", "-")).stdout[res.stdout.index("{"):])["methods"]
    assert "not_applicable" not in methods["nystrom"] and "not_applicable" not in methods["nmf"]


def test_an_output_taken_meanwhile_costs_itself_alone(tmp_path, monkeypatch):
    """race.json appearing during the fit made compare stop at it: --csv, the plot and the saved factors
    after it were never written. Every output is written now; the failed one is the error (exit 2)."""
    from sfapprox.cli import _render

    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((20, 20)))
    real = _render.output_steps

    def taken_first(tables, data, outputs):  # the JSON file appears after the checks, before it is written
        (tmp_path / "r.json").write_text("mine")
        return real(tables, data, outputs)

    monkeypatch.setattr(_render, "output_steps", taken_first)
    result = runner.invoke(app, ["compare", str(path), "--methods", "tsvd,sparse", "--json", str(tmp_path / "r.json"),
                                 "--csv", str(tmp_path / "r.csv"), "--save-factors", str(tmp_path / "fits")])
    assert result.exit_code == 2
    assert "r.json: already exists" in result.output
    assert (tmp_path / "r.json").read_text() == "mine"  # the user's file untouched
    assert (tmp_path / "r.csv").exists()  # the outputs after it were written
    assert sorted(p.name for p in (tmp_path / "fits").iterdir()) == ["m.sparse.h5", "m.tsvd.h5"]


def test_a_fits_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path, monkeypatch):
    """An unwritable --save-factors folder was found after the fitting ("not written: Operation not
    permitted"); --json in it was refused up front. Now the folder is checked as the files are."""
    import os as _os

    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((20, 20)))
    (tmp_path / "a_file").write_text("x")
    result = runner.invoke(app, ["compare", str(path), "--methods", "tsvd", "--save-factors",
                                 str(tmp_path / "a_file" / "fits")])
    assert result.exit_code == 2 and "is a file" in result.output
    locked = tmp_path / "locked"
    locked.mkdir()
    real = _os.access
    monkeypatch.setattr(_os, "access",  # (as root, permission bits do not stop writes: the denial is faked)
                        lambda p, mode, **k: False if Path(p) == locked and mode & _os.W_OK else real(p, mode, **k))
    for folder, said in ((locked, "folder is not writable"), (locked / "sub", f"{locked} is not writable")):
        result = runner.invoke(app, ["compare", str(path), "--methods", "tsvd", "--save-factors", str(folder)])
        assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
        assert "tsvd" not in result.output.split("error")[0]  # nothing fitted (no table before the error)


def test_the_fits_files_are_checked_against_inputs_other_outputs_and_link_loops_before_any_work(tmp_path):
    """--json F/m.tsvd.h5 --save-factors F --force: the JSON silently became the factors; --with F/m.sf.h5
    --save-factors F --force replaced the fit it scored; an existing file for an included row, or a loop
    of links as an output, was found after the fitting (a traceback, exit 1, for the loop)."""
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((20, 20)))
    fits = tmp_path / "F"
    fits.mkdir()
    assert invoke("fit", path, "--iters", "5", "--out", fits / "m.sf.h5", "-q").exit_code == 0
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    (tmp_path / "H").mkdir()
    (tmp_path / "H" / "m.saved:m.sf.h5").write_text("mine")
    for args, said in (
        (["--json", fits / "m.tsvd.h5", "--save-factors", fits, "--force"], "named for two outputs"),
        (["--methods", "sf", "--with", fits / "m.sf.h5", "--save-factors", fits, "--force"], "is this run's input"),
        (["--with", fits / "m.sf.h5", "--save-factors", tmp_path / "H"], "m.saved:m.sf.h5: already exists"),
        (["--json", tmp_path / "loopA"], "loopA: a symbolic link that leads back to itself"),
        (["--save-factors", tmp_path / "loopA"], "loopA: a symbolic link that leads back to itself"),
    ):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        result = invoke("compare", path, "--methods", "tsvd", *args) if "--methods" not in args else invoke(
            "compare", path, *args)
        assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
        assert "Traceback" not in result.output and "stored" not in result.output  # nothing fitted
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "H" / "m.saved:m.sf.h5").read_text() == "mine"


def test_special_files_are_refused_before_anything_opens_them(tmp_path):
    """``info fifo.mtx`` hung forever (h5py opened the named pipe to see whether it was a saved fit);
    compare said "file is empty", --init /dev/zero "neither a start nor an existing file"."""
    fifo = tmp_path / "fifo.mtx"
    os.mkfifo(fifo)
    for args in (["info", str(fifo)], ["compare", str(fifo)], ["info", os.devnull]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "not a file" in result.output, result.output
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((8, 8)))
    result = runner.invoke(app, ["fit", str(path), "--init", os.devnull])
    assert result.exit_code == 2 and "is a character device, not a saved fit" in " ".join(result.output.split())
    result = runner.invoke(app, ["compare", str(path), "--with", str(fifo)])
    assert result.exit_code == 2 and "is a named pipe, not a file" in " ".join(result.output.split())


def test_no_output_replaces_a_file_the_command_reads_even_with_force(tmp_path):
    """--with w.h5 --json w.h5 --force (and fit --init w.h5 --json w.h5) overwrote the saved fit, and
    --json t.content the LINQS node list of a t.cites comparison; the main input was already refused."""
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((16, 16)))
    saved = tmp_path / "w.h5"
    assert runner.invoke(app, ["fit", str(path), "--out", str(saved), "--iters", "5"]).exit_code == 0
    before = saved.read_bytes()
    for args in (["compare", str(path), "--methods", "tsvd", "--with", str(saved), "--json", str(saved), "--force"],
                 ["fit", str(path), "--init", str(saved), "--json", str(saved), "--force", "--iters", "2"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "is this command's input" in " ".join(result.output.split()), result.output
    assert saved.read_bytes() == before
    # resuming into the file it starts from stays allowed
    resumed = runner.invoke(app, ["fit", str(path), "--init", str(saved), "--out", str(saved), "--force", "--iters", "2"])
    assert resumed.exit_code == 0, resumed.output
    (tmp_path / "t.cites").write_text("a b\nb c\n")
    (tmp_path / "t.content").write_text("a x\nb x\nc x\n")
    kept = (tmp_path / "t.content").read_bytes()
    result = runner.invoke(app, ["compare", str(tmp_path / "t.cites"), "--methods", "tsvd", "--json",
                                 str(tmp_path / "t.content"), "--force"])
    assert result.exit_code == 2 and "is this command's input" in " ".join(result.output.split())
    assert (tmp_path / "t.content").read_bytes() == kept


def test_a_method_whose_least_work_ran_past_its_limit_is_not_said_to_have_stopped_on_it(capsys):
    """Randomized SVD from columns took 15.4 s of a 4 s limit (one pass over the columns cannot be cut)
    and the note said "stopped on the time limit before converging: rsvd 4 s"."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("rsvd", "ok", 10, 1.0, 0.1, 15.4, {"stop_reason": "time_limit"}, time_limit=4.0),
            MethodResult("sf", "ok", 10, 1.0, 0.1, 4.1, {"stop_reason": "time_limit"}, time_limit=4.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert "stopped on the time limit before converging: sf 4 s;" in said
    assert "ran past the time limit: rsvd 15.4 s of 4 s" in said


def test_a_closed_form_that_ran_past_its_limit_says_so(capsys):
    """tsvd's SVD and sparse's selection are not cut by the time limit: tsvd at N = 4,096 with budget 0.3
    took 36-38 s of a 2 s limit, and nothing said so (its stop reason is "closed_form", not "time_limit"); rpca
    in memory (65.5 s of 10 s at N = 8,192, its start) was said to want one pass over the matrix's columns."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("tsvd", "ok", 10, 1.0, 0.1, 42.0, {"stop_reason": "closed_form"}, time_limit=2.0),
            MethodResult("sparse", "ok", 10, 1.0, 0.1, 2.5, {"stop_reason": "closed_form"}, time_limit=2.0),
            MethodResult("rsvd", "ok", 10, 1.0, 0.1, 15.4, {"stop_reason": "time_limit", "path": "columns"},
                         time_limit=4.0),
            MethodResult("nmf", "not applicable", seconds=30.0, time_limit=2.0),
            MethodResult("rpca", "ok", 10, 1.0, 0.1, 65.5, {"stop_reason": "time_limit"}, time_limit=10.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert ("ran past the time limit: tsvd 42 s of 2 s (its closed form is not cut), rsvd 15.4 s of 4 s (its least "
            "work, one pass over the matrix's columns, does not fit in it), rpca 65.5 s of 10 s (its least work does not fit "
            "in it); a longer --time-limit") in said
    assert "sparse" not in said and "nmf" not in said and "stopped on the time limit" not in said


def test_an_iterative_fit_that_ran_past_its_limit_is_not_called_a_closed_form(capsys):
    """A row past its limit that stopped on anything but the limit was said "its closed form is not cut": NMF
    converged (or RPCA at its iterations) after its start ran past the limit is no closed form."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("nmf", "ok", 10, 1.0, 0.1, 30.0, {"stop_reason": "converged"}, time_limit=2.0),
            MethodResult("rpca", "ok", 10, 1.0, 0.1, 30.0, {"stop_reason": "max_iter"}, time_limit=2.0),
            MethodResult("sparse", "ok", 10, 1.0, 0.1, 30.0, {"stop_reason": "exact"}, time_limit=2.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert ("ran past the time limit: nmf 30 s of 2 s (its least work does not fit in it), rpca 30 s of 2 s (its least "
            "work does not fit in it), sparse 30 s of 2 s (its closed form is not cut)") in said


def test_seconds_spent_compiling_are_said_and_not_taken_for_a_limit_overrun(capsys):
    """The first fit after installing compiles its kernels outside its time limit: 'sf 13.4 s' beside
    --time-limit 5, stopped on max_iter, had no word, and one stopped on the limit was said to have 'run past
    it' for want of one pass over the columns."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("sf", "ok", 10, 1.0, 0.1, 13.4, {"stop_reason": "max_iter", "compile_seconds": 9.83},
                         time_limit=5.0),
            MethodResult("sf-symmetric", "ok", 10, 1.0, 0.1, 14.0, {"stop_reason": "time_limit", "compile_seconds": 9.0},
                         time_limit=5.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert ("compiling the kernels, once after installing (cached for later runs, and not counted in --time-limit): "
            "sf's 13.4 s include 9.83 s, sf-symmetric's 14 s include 9 s") in said
    assert "ran past the time limit" not in said and "stopped on the time limit before converging: sf-symmetric 5 s" in said
    from sfapprox.cli.fit import _advise

    _advise({"compile_seconds": 9.83, "seconds": 13.4, "stop_reason": "max_iter", "iterations": 20000}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "not counted in --time-limit): the fit's 13.4 s include 9.83 s" in said


def test_a_scorings_compiling_is_not_taken_off_its_fits_seconds(capsys):
    """The scoring's compiling (``scoring_compile_seconds``) is in a row's seconds, not its fit's: taken off the
    fit's 7.5 s too, a fit that ran past its 2-s limit read as one that kept to it."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("sf", "ok", 10, 1.0, 0.1, 12.0, {"stop_reason": "time_limit", "fit_seconds": 7.5,
                                                       "scoring_compile_seconds": 4.0}, time_limit=2.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert "ran past the time limit: sf 12 s of 2 s (its least work does not fit in it; 4 s compiling" in said
    assert "stopped on the time limit before converging" not in said


def test_a_row_whose_setting_up_ran_past_its_limit_says_so_and_that_its_fit_stopped_on_it(capsys):
    """A row's seconds are its whole turn (checks, structure, starts, fit, scoring), its fit's own are
    ``fit_seconds``: SF past its limit by its setting up is not said to want more than its least work, a
    first run's compiling is named in the same words, and its fit, which stopped on the limit, is still said
    to have (the "ran past" note never fired for SF, whose seconds were its fit's alone)."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("sf", "ok", 10, 1.0, 0.1, 17.0, {"stop_reason": "time_limit", "fit_seconds": 12.0,
                                                          "compile_seconds": 9.8}, time_limit=3.0),
            MethodResult("tsvd", "ok", 10, 1.0, 0.1, 9.0, {"stop_reason": "exact", "fit_seconds": 8.5}, time_limit=3.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert "stopped on the time limit before converging: sf 3 s;" in said
    assert ("ran past the time limit: sf 17 s of 3 s (5 s of them outside its fit: setting up and scoring it, which "
            "the limit does not cut; 9.8 s compiling its kernels, a first run), tsvd 9 s of 3 s (its closed form is "
            "not cut); a longer --time-limit") in said


def test_sf_made_to_run_past_its_limit_by_its_setting_up_is_said_to(monkeypatch, capsys):
    """SF's structure timing (the factory's: 4 s at N = 12,000) and its checks ran under no clock of a row's:
    ``compare --time-limit`` never said SF ran past it. A slow setting up now shows in its row and the note."""
    import dataclasses
    import time

    from sfapprox import FitSettings, _base, compare
    from sfapprox.cli._render import advise_limits

    spec = _base.get_method("sf")
    slow = lambda *a, **k: (time.sleep(1.4), spec.check_first(*a, **k))[1]  # noqa: E731
    monkeypatch.setitem(_base._REGISTRY, "sf", dataclasses.replace(spec, check_first=slow))
    X = np.random.default_rng(0).random((16, 16))
    c = compare(X, ["sf"], settings=FitSettings(device="cpu", max_iter=30, time_limit=0.2))
    advise_limits(c.results)
    said = " ".join(capsys.readouterr().err.split())
    assert re.search(r"ran past the time limit: sf [0-9.]+ s of 0\.2 s \([0-9.]+ s of them outside its fit: setting "
                     r"up and scoring it", said), said


def test_a_fit_the_limit_left_with_few_iterations_says_what_an_evaluation_takes(capsys):
    """SF at N = 16,384 under compare's 60 s made 0 iterations (an evaluation took 15 s): the note said only
    "stopped on the time limit", which left the limit to ask for a guess."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("sf", "ok", 10, 1.0, 0.1, 46.0, {"stop_reason": "time_limit", "iterations": 0,
                                                          "evaluation_seconds": 15.23}, time_limit=60.0),
            MethodResult("sf-symmetric", "ok", 10, 1.0, 0.1, 60.0, {"stop_reason": "time_limit", "iterations": 400,
                                                                    "evaluation_seconds": 0.1}, time_limit=60.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert ("stopped on the time limit before converging: sf 60 s (0 iterations; an evaluation takes 15.2 s here), "
            "sf-symmetric 60 s;") in said


def test_info_of_a_saved_fit_writes_its_facts_to_every_output_format(tmp_path):
    """--csv, --markdown and --latex of `info F.h5` were empty files, "wrote" said all the same."""
    from sfapprox import ChordSF, save_factors

    X = np.random.default_rng(0).random((16, 16))
    save_factors(tmp_path / "f.h5", ChordSF(max_iter=5, device="cpu").fit(X))
    res = runner.invoke(app, ["info", str(tmp_path / "f.h5"), "--csv", str(tmp_path / "f.csv"),
                              "--markdown", str(tmp_path / "f.md"), "--latex", str(tmp_path / "f.tex")])
    assert res.exit_code == 0, res.output
    assert "stored numbers" in (tmp_path / "f.csv").read_text() and "size,16 x 16" in (tmp_path / "f.csv").read_text()
    assert "| size | 16 x 16 |" in (tmp_path / "f.md").read_text() and "tabular" in (tmp_path / "f.tex").read_text()


def test_info_of_a_weights_file_refuses_reading_options_it_would_ignore(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"a.weight": torch.randn(16, 16)}, tmp_path / "w.pt")
    for extra in (["--kernel", "rbf"], ["--covariance", "--gradient"]):
        res = runner.invoke(app, ["info", str(tmp_path / "w.pt"), *extra])
        assert res.exit_code == 2 and "a model's weights file lists its tensors as they are" in res.output
    assert runner.invoke(app, ["info", str(tmp_path / "w.pt")]).exit_code == 0


def test_info_shows_a_float_fact_to_six_digits(tmp_path):
    """A bandwidth's 17 digits wrapped over two lines at 40 columns."""
    path = tmp_path / "p.csv"
    np.savetxt(path, np.random.default_rng(0).standard_normal((50, 3)), delimiter=",")
    res = runner.invoke(app, ["info", str(path), "--kernel", "rbf", "--json", str(tmp_path / "i.json")])
    assert res.exit_code == 0, res.output
    shown = re.search(r"bandwidth\s*│\s*([0-9.]+)", res.output).group(1)
    assert len(shown.replace(".", "")) <= 6


def test_the_next_command_asks_force_only_for_files_it_wrote(tmp_path):
    """--plot /dev/null (or --json -) made the suggested command add --force, which a stream never needs."""
    from sfapprox.cli.compare import _writes_files

    assert not _writes_files(["compare", "x.mtx", "--plot", "/dev/null", "--json", "-", "--csv=-"])
    assert _writes_files(["compare", "x.mtx", "--plot", "/dev/null", "--json", str(tmp_path / "c.json")])
    assert _writes_files(["compare", "x.mtx", f"--save-factors={tmp_path}"])


def test_an_output_to_dev_null_does_not_take_standard_output_from_the_tables(tmp_path):
    """With stdout sent to /dev/null too, --plot /dev/null counted as standard output: the tables went to
    stderr, where the user had not sent them away."""
    import subprocess
    import sys

    pytest.importorskip("matplotlib")
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    with open(os.devnull, "w") as null:
        done = subprocess.run([sys.executable, "-m", "sfapprox", "compare", str(path), "--methods", "tsvd", "-q",
                               "--plot", os.devnull], stdout=null, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0 and "tsvd ★" not in done.stderr, done.stderr  # the table row stays out


def test_a_fit_refused_for_memory_names_the_matrix_not_x(tmp_path):
    """"fitting SF to X (300 x 300) from its column blocks needs ...": X was the array the user never saw."""
    path = tmp_path / "id300.npy"
    np.save(path, np.eye(300))
    res = runner.invoke(app, ["fit", str(path), "--max-memory", "100M", "-q"])
    assert res.exit_code == 2 and "fitting SF to id300 (300 x 300) from its column blocks" in " ".join(res.output.split())
    res = runner.invoke(app, ["compare", str(path), "--methods", "sf", "--max-memory", "100M", "-q", "--json", "-"])
    sf = json.loads(res.stdout)["results"][0]
    assert sf["status"] == "not applicable" and sf["reason"].startswith("fitting SF to id300 (300 x 300)")


def test_info_of_a_saved_fit_shows_its_facts_once(tmp_path):
    from sfapprox import ChordSF, save_factors

    save_factors(tmp_path / "f.h5", ChordSF(max_iter=5, device="cpu").fit(np.random.default_rng(0).random((16, 16))))
    res = runner.invoke(app, ["info", str(tmp_path / "f.h5")])
    assert res.exit_code == 0 and res.output.count("stored numbers") == 1, res.output


def test_a_memory_refusal_of_the_moment_is_a_failure_tried_again(monkeypatch):
    """Under no --max-memory (a GPU's free memory, the default) or a lost cluster, a ResourceError is
    'failed' (a batch runs it again); under a limit the user gave, 'not applicable'."""
    from sfapprox import FitSettings, ResourceError, compare
    from sfapprox.baselines import tsvd

    X = np.random.default_rng(0).random((12, 12))

    def refused(self, *args, **kwargs):
        raise ResourceError("needs more memory")

    monkeypatch.setattr(tsvd.TruncatedSVD, "fit", refused)
    assert compare(X, "tsvd").results[0].status == "failed"
    assert compare(X, "tsvd", settings=FitSettings(max_memory=1 << 30)).results[0].status == "not applicable"


def test_more_threads_than_cores_is_said_and_recorded_as_run(tmp_path, small_mtx, monkeypatch):
    """--threads 1000 ran 2 threads without a word, and the results recorded 1000."""
    from sfapprox import _threads

    monkeypatch.setattr(_threads, "available_cores", lambda: 2)
    js = tmp_path / "c.json"
    res = invoke("compare", small_mtx, "--methods", "tsvd", "--threads", "1000", "--json", js)
    assert res.exit_code == 0, res.output
    assert "--threads 1000 is more than the 2 cores this process may use; the fits use 2" in res.stderr
    assert json.loads(js.read_text())["settings"]["threads"] == 2


def test_fit_whose_out_cannot_be_written_still_writes_json_and_shows_its_table(tmp_path, small_mtx, factors_too_large):
    """`fit --out z.h5 --json z.json` with z.h5 too large (ulimit -f): only "error: z.h5: not written", rc 2;
    the JSON was never written and the table never shown."""
    out, js = tmp_path / "z.h5", tmp_path / "z.json"
    res = invoke("fit", small_mtx, "--out", out, "--json", js, "--iters", "5", "--device", "cpu")
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "SF fit of small" in text and "fro_error" in text  # the table
    assert f"wrote {js}" in text and f"wrote {out}" not in text and json.loads(js.read_text())["n"] == 12
    assert f"error: {out}: not written: File too large" in text


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_outputs_over_the_largest_file_are_one_line_each_and_keep_what_was_there(tmp_path, small_mtx):
    """`compare --json --plot` on a disk whose largest file is smaller than they (FAT32's 4 GiB; here
    `ulimit -f 1`): one line each, naming the file and what to do, exit 2, no traceback, the earlier
    files kept whole and no temporaries; the small outputs are written."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    js, plot, md = tmp_path / "c.json", tmp_path / "c.png", tmp_path / "c.md"
    js.write_text("previous")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "sfapprox", "compare", str(small_mtx), "--methods", "tsvd",
                           "--json", str(js), "--plot", str(plot), "--markdown", str(md), "--force", "--quiet",
                           "--device", "cpu"], capture_output=True, text=True, env=env, timeout=120,
                          preexec_fn=limit, cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    too_large = "File too large (this process's file size limit ('ulimit -f') is 1.0 KiB: raise it); no partial " \
                "file was left"
    assert f"error: {js}: not written: {too_large}" in errors and f"error: {plot}: not written: {too_large}" in \
        errors, done.stderr
    assert js.read_text() == "previous" and not plot.exists() and "tsvd" in md.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "c.md", "small.mtx"]


def test_a_stop_while_the_arguments_are_read_is_said(monkeypatch):
    """A Ctrl-C early in startup (typer turned it into exit 130) ended the command with no message at all."""
    from sfapprox.cli import _app

    def stopped(self, ctx, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(_app.HelpGroup, "parse_args", stopped)
    res = invoke("formats")
    assert res.exit_code == 130
    assert "interrupted (Ctrl-C) while starting; nothing was written" in " ".join(res.output.split())


def test_a_stop_before_a_commands_own_handling_is_said(monkeypatch):
    """A Ctrl-C in the app's callback, before any command's error boundary, was a silent exit 130."""
    from sfapprox.cli import _app

    real, calls = _app.cut_short_outputs, []

    def stopped_once():
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real()

    monkeypatch.setattr(_app, "cut_short_outputs", stopped_once)
    res = invoke("formats")
    assert res.exit_code == 130
    assert "interrupted (Ctrl-C): stopped; no output was written" in " ".join(res.output.split())


def test_tables_that_cannot_be_written_name_standard_output(monkeypatch):
    """`sfapprox compare X > /dev/full` said only "error: No space left on device"."""
    import errno
    import io

    from sfapprox.cli import _render

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_render.out, "_file", Full())  # (its "file" property: undone, it pinned the stream)
    res = invoke("formats")
    assert res.exit_code == 2
    assert "error: standard output: No space left on device" in res.output


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_machine_output_that_cannot_be_written_names_standard_output(small_mtx, tmp_path):
    """`compare X --json - > /dev/full` said only "error: No space left on device" (the tables' console names
    its stream; the JSON went through another write); `fit --out F --json -` did not say F was written."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    factors = tmp_path / "f.h5"
    for command in (["compare", str(small_mtx), "--methods", "tsvd", "--quiet"],
                    ["fit", str(small_mtx), "--iters", "3", "--out", str(factors)]):  # (its notes: not --quiet)
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "sfapprox", *command, "--json", "-", "--device",
                                   "cpu"], stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.splitlines()[-1] == "error: standard output: No space left on device", done.stderr[-2000:]
        assert "Traceback" not in done.stderr
    assert factors.exists() and f"wrote {factors}" in " ".join(done.stderr.split())


def test_a_fit_from_columns_that_kept_its_start_names_that_start(capsys):
    """A fit from columns with no --init that kept its rank-one start said it kept "the factors it started
    from (--init)"."""
    from sfapprox.cli.fit import _advise

    base = {"path": "columns", "epochs": 1.0, "iterations": 3, "optimizer": "adam+lbfgs", "kept_start": True,
            "stop_reason": "max_iter", "nnz": 10}
    _advise({**base, "init": "rank1"}, None)
    _advise({**base, "init": "saved"}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "ended worse than where it started (its rank-one start), which is kept unchanged" in said
    assert "ended worse than where it started (--init's factors), which is kept unchanged" in said
    assert "(--init), which" not in said


def test_a_fit_from_columns_stopped_by_its_iterations_names_iters_not_the_time_limit(capsys):
    """A fit from columns that ran its --iters with no time limit (--time-limit 0) was told "--time-limit (0
    for none) allows more passes" and, keeping its start, "a longer --time-limit may get past them": a knob
    that allowed nothing more.  The knob named is the one that stopped it."""
    from sfapprox.cli.fit import _advise

    base = {"path": "columns", "epochs": 30.0, "iterations": 30, "optimizer": "adam", "kept_start": True,
            "init": "saved", "nnz": 10}
    _advise({**base, "stop_reason": "max_iter", "time_limit": None}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "--iters allows more steps" in said and "more --iters may get past them" in said
    assert "--time-limit" not in said
    _advise({**base, "stop_reason": "time_limit", "time_limit": 10.0}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "--time-limit (0 for none) allows more passes" in said and "a longer --time-limit may get past" in said
    # Ctrl-C stopped it: no limit did, so none is named (it was told to raise --time-limit)
    _advise({**base, "stop_reason": "interrupted", "time_limit": 10.0}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "--time-limit" not in said and "--iters" not in said, said
    assert "memory limit; --max-memory a fit in memory" in said and "a longer run may get past them" in said


def test_refusals_name_the_option_typed_and_the_api_keeps_its_keywords(tmp_path):
    """Reading refusals named the keyword to a CLI user ('pick one with var=', 'option two_mode= applies to
    pajek files', 'network=3 but the file holds 2 networks; use network=1..2') and the option to a Python
    caller ('(--bandwidth)', '(CLI: --format ijv)'); or both ('--kernel (kernel=)'). One message now says
    each reader's own: --var for the command line, var= for Python."""
    import scipy.io as sio

    from sfapprox.io import open_matrix

    X = np.arange(16.0).reshape(4, 4)
    np.savez(tmp_path / "two.npz", A=X, B=X.T)
    sio.mmwrite(tmp_path / "a.mtx", X)
    np.savetxt(tmp_path / "pts.csv", np.arange(12.0).reshape(6, 2), delimiter=",")
    (tmp_path / "t.ijv").write_text("1 2 1.0\n2 3 2.0\n")
    cases = [  # (file, CLI options, keywords, what the CLI says, what Python says)
        ("two.npz", [], {}, "pick one with --var", "pick one with var="),
        ("a.mtx", ["--two-mode", "rows"], {"two_mode": "rows"}, "option --two-mode rows applies to pajek files",
         "option two_mode='rows' applies to pajek files"),
        ("pts.csv", ["--kernel", "rbf", "--var", "x"], {"kernel": "rbf", "var": "x"},
         "--kernel reads a table of points: --var x does not apply", "kernel= reads a table of points: var='x' does not"),
        ("a.mtx", ["--bandwidth", "1"], {"bandwidth": 1.0}, "give --kernel too", "give kernel= too"),
        ("pts.csv", ["--kernel", "linear", "--bandwidth", "2"], {"kernel": "linear", "bandwidth": 2.0},
         "leave --bandwidth out", "leave bandwidth= out"),
        ("a.mtx", ["--covariance"], {"covariance": True}, "--covariance needs a samples x features table",
         "covariance=True needs a samples x features table"),
        ("t.ijv", ["--format", "mtx"], {"format": "mtx"}, "read them as triplets with --format ijv",
         "read them as triplets with format='ijv'"),
    ]
    for name, options, keywords, cli, api in cases:
        res = invoke("info", str(tmp_path / name), *options)
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and cli in text and not re.search(r"\b[a-z_]+=", text), text
        with pytest.raises(Exception) as info:
            open_matrix(tmp_path / name, **keywords)
        assert api in str(info.value) and "--" not in str(info.value).replace(str(tmp_path), ""), str(info.value)


def test_a_fit_from_columns_by_sketches_says_so(capsys):
    from sfapprox.cli.fit import _advise

    _advise({"path": "columns", "epochs": 6.0, "iterations": 120, "optimizer": "adam+sketch", "stop_reason": "time_limit",
             "nnz": 10}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "(6 passes over the columns in 120 steps: Adam's, then L-BFGS's on sketches of the columns, a new one " \
           "each pass)" in said
    _advise({"path": "columns", "epochs": 6.0, "iterations": 120, "optimizer": "adam+sketch+lbfgs",
             "stop_reason": "time_limit", "nnz": 10}, None)
    said = " ".join(capsys.readouterr().err.split())
    assert "(6 passes over the columns in 120 steps: Adam's, then L-BFGS's on sketches of the columns, a new one " \
           "each pass, until a sketch gained nothing, then by passes)" in said


def test_control_characters_a_file_spells_never_reach_the_terminal(tmp_path):
    """A tensor's name (or a file's) with ESC in it reached info's table and the error line raw: an
    ``ESC[2J`` cleared the user's screen, ``ESC[31m`` recoloured it.  They are shown escaped."""
    torch = pytest.importorskip("torch")
    torch.save({"a\x1b[2J\x07.weight": torch.eye(6)}, tmp_path / "esc.pt")
    shown = invoke("info", tmp_path / "esc.pt")
    assert shown.exit_code == 0 and "\x1b" not in shown.output and "\x07" not in shown.output
    assert "a\\x1b[2J\\x07.weight" in shown.output
    refused = invoke("compare", tmp_path / "esc.pt", "--var", "nope", "--methods", "tsvd")
    assert refused.exit_code == 2 and "\x1b" not in refused.output and "a\\x1b[2J\\x07.weight" in refused.output
    ran = invoke("compare", tmp_path / "esc.pt", "--methods", "tsvd", "--markdown", tmp_path / "c.md")
    assert ran.exit_code == 0 and "\x1b" not in ran.output and "\x1b" not in (tmp_path / "c.md").read_text()
    assert "esc:a\\x1b[2J\\x07.weight" in ran.output


ESC_NAME = "x\x1b[2J\x07"  # a file's name with ESC[2J (clear the screen) and BEL in it


def _raw_controls(text: str) -> list[str]:
    """The characters in ``text`` a terminal would act on (what formats.printable escapes)."""
    return re.findall("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)


def test_a_usage_error_quoting_a_control_character_is_escaped(capsys):
    """click's usage errors quote what was typed: typer's copy of click escapes ESC but not a bidirectional
    override, and plain click (before typer 0.29) escapes nothing; the line went to the terminal raw."""
    import typer

    from sfapprox.cli import _usage_error

    usage_error = next(k for k in typer.BadParameter.__mro__ if k.__name__ == "UsageError")
    assert _usage_error(usage_error("No such option: --a\x1b[2J\u202eb")) == 2
    said = capsys.readouterr().err
    assert not _raw_controls(said) and "--a\\x1b[2J\\u202eb" in said


def test_the_next_command_escapes_a_file_name_s_control_characters(tmp_path, small_mtx):
    """The ``next:`` line quotes the matrix's path with shlex, which keeps an ESC in it as it is."""
    path = tmp_path / f"{ESC_NAME}.mtx"
    shutil.copy(small_mtx, path)
    res = invoke("compare", path, "--methods", "tsvd")
    assert res.exit_code == 0, res.output
    assert "next: sfapprox compare" in res.output
    assert not _raw_controls(res.output) and "x\\x1b[2J\\x07.mtx" in res.output


def test_fit_s_optimizer_line_escapes_the_matrix_s_name(tmp_path, small_mtx):
    """In a log (no progress bar) fit says "SF NAME: optimizer running": NAME is the file's, ESC and all."""
    path = tmp_path / f"{ESC_NAME}[bold].mtx"
    shutil.copy(small_mtx, path)
    res = invoke("fit", path, "--iters", "3", "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert not _raw_controls(res.output)
    assert "SF x\\x1b[2J\\x07[bold]: optimizer running" in " ".join(res.output.split())


def test_an_interruption_names_the_outputs_written_escaped(monkeypatch, capsys):
    from sfapprox.cli import _app

    monkeypatch.setattr(_app, "written_outputs", lambda: [Path(f"/tmp/{ESC_NAME}.json")])
    monkeypatch.setitem(_app._state, "written_before", 0)
    monkeypatch.setitem(_app._state, "debug", False)
    _app._say_interrupted()
    said = capsys.readouterr().err
    assert not _raw_controls(said) and "outputs written: /tmp/x\\x1b[2J\\x07.json" in said


def test_debug_s_traceback_escapes_control_characters(tmp_path):
    res = invoke("--debug", "info", tmp_path / f"{ESC_NAME}.mtx")
    assert res.exit_code == 2 and "Traceback" in res.output
    assert not _raw_controls(res.output)


def test_datasets_fetch_escapes_the_paths_it_names(tmp_path, small_mtx):
    """fetch's ✓/✗ lines name the file found and where to put a missing one: the manifest's folder's
    spelling, an ESC in it reached the terminal raw."""
    folder = tmp_path / ESC_NAME
    folder.mkdir()
    shutil.copy(small_mtx, folder / "a.mtx")
    (folder / "m.toml").write_text('[[matrix]]\nname = "a"\ncategory = "other"\nfile = "a.mtx"\n\n'
                                   '[[matrix]]\nname = "b"\ncategory = "other"\nfile = "b.mtx"\n', encoding="utf-8")
    res = invoke("datasets", "fetch", folder / "m.toml", "--data-dir", folder)
    assert res.exit_code == 1, res.output
    assert not _raw_controls(res.output)
    shown = f"{tmp_path}/x\\x1b[2J\\x07"
    assert f"a: {shown}/a.mtx" in res.output and f"put it at {shown}/b.mtx" in res.output


def test_an_option_given_twice_with_two_values_is_refused_not_the_last_kept(tmp_path, small_mtx):
    """click keeps the last of an option given twice: `--csv a.csv --csv b.csv` wrote b.csv alone and
    `--methods sf --methods tsvd` ran tsvd alone, without a word.  Refused before any work; the same value
    twice, a flag twice and --with (meant to repeat) pass."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for args, said in ((["--methods", "sf", "--methods", "tsvd"], "--methods: given twice (--methods sf and "
                                                                     "--methods tsvd), and only one is used"),
                       (["--methods", "tsvd", "--csv", a, f"--csv={b}"], f"--csv: given twice (--csv {a} and --csv {b})"),
                       (["--methods", "tsvd", "--time-limit", "5", "--time-limit=6"], "--time-limit: given twice")):
        res = invoke("compare", small_mtx, *args)
        assert res.exit_code == 2 and said in " ".join(res.output.split()), res.output
    assert not a.exists() and not b.exists()
    res = invoke("compare", small_mtx, "--methods", "tsvd", "-q", "--quiet", "--csv", a, "--csv", a)
    assert res.exit_code == 0 and a.exists(), res.output
    res = CliRunner().invoke(app, ["batch", str(tmp_path / "m.toml"), "--out-dir", str(tmp_path / "o"), "-j", "2",
                                   "--jobs", "3"])
    assert res.exit_code == 2 and "-j: given twice" not in res.output and "--jobs: given twice (-j 2 and --jobs 3)" in \
        " ".join(res.output.split()), res.output


def test_compare_saves_every_fit_when_one_file_was_taken_meanwhile(tmp_path, monkeypatch):
    """Two `compare --save-factors F` at once: the loser's first file found taken ended the saving, its other
    fits neither written nor kept, and only that one file was said."""
    import sfapprox

    matrix, fits = tmp_path / "m.npy", tmp_path / "fits"
    np.save(matrix, np.random.default_rng(0).random((10, 10)))
    real = sfapprox.compare

    def compare_and_meanwhile(*args, **kwargs):
        result = real(*args, **kwargs)
        fits.mkdir(exist_ok=True)
        (fits / "m.sparse.h5").write_bytes(b"the other run's fit")  # the other run saved its first
        return result

    monkeypatch.setattr(sfapprox, "compare", compare_and_meanwhile)
    res = invoke("compare", matrix, "--methods", "sparse,tsvd", "--save-factors", fits)
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert f"error: {fits / 'm.sparse.h5'}: already exists, so it was left untouched" in out
    assert f"wrote {fits / 'm.tsvd.h5'}" in out
    assert (fits / "m.sparse.h5").read_bytes() == b"the other run's fit"
    assert sfapprox.load_factors(fits / "m.tsvd.h5").kind == "tsvd"
    assert sfapprox.load_factors(fits / f"m.sparse.{os.getpid()}.new.h5").kind == "sparse"


def test_a_log_says_the_same_phase_once_until_a_step_comes(capsys):
    """On a fresh install SF compiles before its structure is timed, then its fit warms up: a log said
    "m: compiling kernels (first run)" twice in a row.  Said once; after steps, a phase is news again."""
    from sfapprox.cli._app import announce_start

    display = announce_start(lambda info: None, "m", quiet=False)
    for text in ("compiling kernels (first run)", "", "compiling kernels (first run)", ""):
        display.phase(text)
    display({"iteration": 1, "fro_error": 1.0})
    display.phase("compiling kernels (first run)")
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["m: compiling kernels (first run)",
                     "m: optimizer running (Ctrl-C stops it and keeps the best factors found)",
                     "m: compiling kernels (first run)"]


# --------------------------------------------------------------------------- --quiet
EXAMPLE_MESH = Path(__file__).resolve().parents[1] / "examples" / "mesh_small.mtx"


def test_quiet_keeps_the_results_and_leaves_the_informational_notes_out(tmp_path):
    """``--quiet`` hid the progress display only: the loading note, "wrote FILE", the time-limit advice and the
    next command still came on stderr.  It now leaves them out; the table and verdict are on stdout as before."""
    args = ["compare", EXAMPLE_MESH, "--methods", "tsvd", "--json", tmp_path / "c.json"]
    loud = invoke(*args)
    assert loud.exit_code == 0, loud.output
    for said in ("note: symmetric storage expanded", f"wrote {tmp_path / 'c.json'}", "next: sfapprox compare"):
        assert said in loud.stderr
    quiet = invoke(*args, "--force", "--quiet")
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""
    verdict = [line for line in loud.stdout.splitlines() if line.startswith("verdict:")]
    assert verdict and verdict == [line for line in quiet.stdout.splitlines() if line.startswith("verdict:")]
    assert "tsvd" in quiet.stdout  # the table, on stdout as without --quiet
    assert json.loads((tmp_path / "c.json").read_text())["winner"] is None  # one method: no contest
    again = invoke(*args, "--force")  # the next command in the same process is not quietened
    assert "note: symmetric storage expanded" in again.stderr


def test_quiet_still_says_errors(tmp_path):
    res = invoke("compare", tmp_path / "missing.mtx", "--methods", "tsvd", "-q")
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and "missing.mtx" in res.stderr


def test_quiet_fit_writes_its_table_and_file_and_says_nothing_else(tmp_path, small_mtx):
    out = tmp_path / "f.h5"
    res = invoke("fit", small_mtx, "--iters", "3", "--device", "cpu", "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert out.is_file() and "fro_error" in res.stdout
    assert res.stderr == ""  # it said "wrote" and that the fit stopped on its iterations


@pytest.mark.parametrize("style, keep, shown", [("", None, False), ("yellow", None, True), ("", True, True),
                                                ("yellow", False, False)])
def test_a_note_under_quiet_is_kept_when_it_warns(monkeypatch, style, keep, shown):
    """Under --quiet a plain note (it informs) is left out; a styled one (a warning, a stop) is kept, and
    ``keep`` says so where the style does not."""
    from sfapprox.cli import _render

    said = []
    monkeypatch.setattr(_render.err, "print", lambda text, **kw: said.append(text))
    _render.quiet_notes(True)
    try:
        _render.note("note: x", style=style, keep=keep)
    finally:
        _render.quiet_notes(False)
    assert bool(said) is shown
    _render.note("note: y")
    assert str(said[-1]) == "note: y"  # (a Text: say() lays it out)


def test_an_error_a_stop_caused_is_an_interruption(monkeypatch, tmp_path):
    """A Ctrl-C or SIGTERM while scipy was imported (a class being made: Python 3.11 calls __set_name__
    and wraps what it raises) came out as "RuntimeError: Error calling __set_name__ ...": a traceback and
    exit 1, where every other stop is one line and exit 130 (143)."""
    import importlib

    def stopped(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'warnings'") from exc

    monkeypatch.setattr(importlib.import_module("sfapprox.cli.compare"), "read_matrix", stopped)
    np.save(tmp_path / "x.npy", np.eye(8))
    res = invoke("compare", str(tmp_path / "x.npy"), "--methods", "tsvd")
    assert res.exit_code == 130 and not isinstance(res.exception, RuntimeError)
    assert "interrupted (Ctrl-C): stopped; no output was written" in " ".join(res.output.split())


def test_an_error_raised_after_a_stop_was_handled_is_still_an_error():
    from sfapprox.cli._app import caused_by_stop

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ValueError("a bug") from None  # the stop was dealt with: what follows is its own
    except ValueError as exc:
        assert not caused_by_stop(exc)


def test_fit_s_iteration_note_separates_thousands(small_mtx):
    """"the fit stopped after its 1979 iterations" beside tables printing 5,267."""
    res = invoke("fit", small_mtx, "--iters", "1000", "--ftol", "0", "--gtol", "0", "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert "stopped after its 1,000 iterations before" in res.output


def test_delimiter_and_decimal_settle_a_table_and_info_says_how_it_was_read(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("1.000;2.500\n2.500;1.000\n")
    refused = invoke("info", path)
    assert refused.exit_code == 2 and "pass --decimal . where the points are decimal points" in refused.output
    res = invoke("info", path, "--decimal", ".", "--json", "-")
    assert res.exit_code == 0, res.output
    matrix = json.loads(res.stdout)["matrix"]
    assert matrix["max"] == 2.5 and "numbers read with a decimal point, as --decimal . says (not detected)" in matrix["notes"]
    txt = tmp_path / "m.txt"
    txt.write_text("1,2\n2,1\n")
    assert invoke("info", txt, "--delimiter", "TAB").exit_code == 2
    assert invoke("info", txt, "--delimiter", ",").exit_code == 0


def test_a_delimiter_named_in_a_message_is_quoted_as_the_shell_reads_it_back(tmp_path):
    """"not the --delimiter ; given": pasted into a shell, the ';' ended the command."""
    path = tmp_path / "m.csv"
    path.write_text("1\t2\n2\t1\n")
    res = invoke("info", path, "--delimiter", ";")
    assert res.exit_code == 2 and "the file may be separated by tabs, not the --delimiter ';' given" in \
        " ".join(res.output.split()), res.output
    res = invoke("info", path, "--delimiter", ",")
    assert "not the --delimiter , given" in " ".join(res.output.split()), res.output  # (no quotes it does not need)


@pytest.mark.parametrize("args, message", [
    (["--delimiter", "|"], "--delimiter '|' is not a delimiter sfapprox reads"),
    (["--delimiter", ",", "--decimal", ","], "--decimal , and --delimiter , name the same character"),
    (["--decimal", "."], "option --decimal . applies to text tables (.csv/.tsv/.txt/.dat) and triplet files (.ijv/.coo/.edges), not 'mtx'"),
])
@pytest.mark.parametrize("command", ["info", "compare", "fit"])
def test_nonsense_delimiter_or_decimal_is_one_line_and_exit_2(small_mtx, command, args, message):
    res = invoke(command, small_mtx, *args)
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output, res.output


def test_a_comparisons_log_names_the_method_of_each_phase(monkeypatch, tmp_path):
    """In a log (stderr no terminal) `compare` said "m: compiling kernels (first run)", "m: preparing",
    "m: scoring", never whose: a bar shows the method beside its phase, a log's line lacked it."""
    import time

    from sfapprox.sf import _kernels

    real = _kernels.warm_up_numba

    def slow(dtype):  # as numba compiling on a fresh install: a phase long enough to be said
        time.sleep(0.8)
        real(dtype)

    monkeypatch.setattr(_kernels, "kernels_cached", lambda: False)
    monkeypatch.setattr(_kernels, "warm_up_numba", slow)
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    res = invoke("compare", path, "--methods", "tsvd,sf", "--iters", "20", "--device", "cpu")
    assert res.exit_code == 0, res.output
    phases = [line for line in res.output.splitlines() if "compiling kernels" in line]
    assert phases == ["m sf: compiling kernels (first run)"], res.output


def test_the_limit_notes_write_long_seconds_whole(capsys):
    """advise_limits wrote 1,200 s with ``.3g`` as "1.2e+03 s"; formats.limit_text writes it whole."""
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("sf", "ok", 10, 1.0, 0.1, 1250.0, {"stop_reason": "time_limit", "fit_seconds": 1200.5,
                                                            "compile_seconds": 150.0}, time_limit=1200.0),
            MethodResult("tsvd", "ok", 10, 1.0, 0.1, 4000.0, {"stop_reason": "exact"}, time_limit=1200.0)]
    advise_limits(rows)
    said = " ".join(capsys.readouterr().err.split())
    assert "e+0" not in said, said
    assert "stopped on the time limit before converging: sf 1,200 s;" in said
    assert "ran past the time limit: tsvd 4,000 s of 1,200 s (its closed form is not cut)" in said
    assert "sf's 1,250 s include 150 s" in said
    from sfapprox.cli.fit import _advise

    _advise({"compile_seconds": 150.0, "seconds": 1250.0, "stop_reason": "max_iter", "iterations": 20000}, None)
    assert "the fit's 1,250 s include 150 s" in " ".join(capsys.readouterr().err.split())


def test_a_row_of_a_matrix_compared_from_columns_past_its_limit_by_its_setting_up_is_not_said_to_be_scoring(capsys):
    # from columns every row is scored afterwards by one joint pass, in no row's seconds (a matrix in memory
    # whose method read columns is scored in its row: "and scoring it" there); and a fit's 0.0 s were read as
    # missing (its whole seconds taken instead, so its stop on the limit went unsaid)
    from sfapprox.cli._render import advise_limits
    from sfapprox.results import MethodResult

    rows = [MethodResult("sf", "ok", 10, 1.0, 0.1, 20.0, {"stop_reason": "time_limit", "fit_seconds": 2.0,
                                                          "path": "columns"}, time_limit=3.0),
            MethodResult("nmf", "ok", 10, 1.0, 0.1, 20.0, {"stop_reason": "time_limit", "fit_seconds": 0.0},
                         time_limit=3.0)]
    advise_limits(rows, scored_apart=True)
    said = " ".join(capsys.readouterr().err.split())
    assert "stopped on the time limit before converging: sf 3 s, nmf 3 s;" in said
    assert "sf 20 s of 3 s (18 s of them outside its fit: setting it up, which the limit does not cut)" in said
    advise_limits(rows)
    assert "(18 s of them outside its fit: setting up and scoring it," in " ".join(capsys.readouterr().err.split())


def test_fits_options_are_checked_without_loading_torch():
    """fit's options check (before the matrix loads) imported SF's module, torch with it: 1-2 s before the
    progress bar, where the fit's display says "loading torch". The check refuses as before, torch-free."""
    import subprocess
    import sys

    code = ("import sys\nfrom sfapprox.cli.fit import _check_sf_options as check\n"
            "check(ftol=1e-9, gtol=None, n_factors=3, support='chord', base=2)\n"
            "for bad in ({'gtol': -1.0}, {'support': 'butterfly', 'base': 3}):\n"
            "    try:\n        check(**bad)\n    except Exception as exc:\n        print('REFUSED', exc)\n"
            "print('TORCH', 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "REFUSED --gtol must be a float in the range [0, inf)" in done.stdout, done.stdout
    assert "does not apply to the butterfly support" in done.stdout, done.stdout
    assert "TORCH False" in done.stdout, done.stdout


def test_results_of_a_table_read_with_text_marks_record_and_show_them(tmp_path):
    """compare's JSON, a saved fit and `info FIT.h5` named how the matrix was selected but not the
    --delimiter and --decimal its ';'-separated decimal-comma table was read with.  They are recorded where
    given and shown where the recipe is; a kernel fitted to its points read otherwise is noted with them;
    a fit written before marks were recorded still loads, unjudged on them."""
    import h5py

    from sfapprox.factors import load_factors

    rng = np.random.default_rng(0)
    table = tmp_path / "t.csv"
    table.write_text("\n".join(";".join(f"{v:.4f}".replace(".", ",") for v in row) for row in rng.random((10, 10))),
                     encoding="utf-8")
    res = invoke("compare", table, "--delimiter", ";", "--decimal", ",", "--methods", "tsvd", "--budget", "0.5",
                 "--save-factors", tmp_path / "fits", "--json", tmp_path / "c.json")
    assert res.exit_code == 0, res.output
    marks = {"delimiter": ";", "decimal": ","}
    assert json.loads((tmp_path / "c.json").read_text())["matrix"]["recipe"] == {"covariance": False, **marks}
    fit = tmp_path / "fits" / "t.tsvd.h5"
    assert load_factors(fit).source["recipe"] == {"covariance": False, **marks}
    shown = invoke("info", fit)
    assert shown.exit_code == 0 and "read from the file with delimiter=';', decimal=','" in shown.output, shown.output
    # the same file, its marks detected: the same matrix, no note
    res = invoke("compare", table, "--methods", "tsvd", "--budget", "0.5", "--with", fit)
    assert res.exit_code == 0 and "another matrix" not in res.output, res.output
    # a fit written before marks were recorded (its recipe without them) still loads, and is not judged on them
    with h5py.File(fit, "r+") as f:
        source = json.loads(f.attrs["source"])
        f.attrs["source"] = json.dumps({**source, "recipe": {"covariance": False}})
    res = invoke("compare", table, "--delimiter", ";", "--methods", "tsvd", "--budget", "0.5", "--with", fit)
    assert res.exit_code == 0 and "another matrix" not in res.output, res.output
    # a kernel of points read with --decimal ',' (one coordinate, 1,5) against one read with the file's commas
    points = tmp_path / "p.csv"
    points.write_text("".join(f"{i},{5 * i % 7}\n" for i in range(1, 13)), encoding="utf-8")
    kernel = ["--kernel", "rbf", "--bandwidth", "1", "--methods", "tsvd", "--budget", "0.5"]
    res = invoke("compare", points, *kernel, "--decimal", ",", "--save-factors", tmp_path / "k")
    assert res.exit_code == 0, res.output
    res = invoke("compare", points, *kernel, "--delimiter", ",", "--with", tmp_path / "k" / "p.tsvd.h5")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "was fitted to another matrix of this file (kernel=rbf" in said, said
    assert "decimal=','; this one: kernel=rbf" in said and "delimiter=',')" in said, said


@pytest.mark.parametrize("written", [True, False])
def test_a_fit_stopped_before_its_first_iteration_says_its_start_was_kept(tmp_path, monkeypatch, written):
    """A stop while the kernels compiled (a fresh install) said "after 0 iterations: the best factors found so
    far were written": true, but it hid that they are the start, nothing fitted.  Said plainly now."""
    from sfapprox.sf import model

    monkeypatch.setattr(model, "_warmed_unless_stopped", lambda *warm_ups: False)  # the stop, as it compiled
    matrix, out = tmp_path / "m.npy", tmp_path / "f.h5"
    np.save(matrix, np.random.default_rng(0).standard_normal((48, 48)))
    res = invoke("fit", matrix, "--device", "cpu", *(["--out", out] if written else []))
    said = " ".join(res.output.split())
    assert res.exit_code == 130, res.output
    kept = "the start factors were written (nothing fitted yet)" if written else \
        "the error above is that of the start factors (nothing fitted yet; pass --out to keep them)"
    assert f"interrupted (Ctrl-C) before the first iteration: {kept}" in said, said
    assert "after 0 iterations" not in said and out.exists() == written


def test_datasets_list_alone_names_the_bundled_manifests(tmp_path):
    res = invoke("datasets", "list")
    assert res.exit_code == 0, res.output
    for name, title in (("kernels", "Kernel matrices"), ("paper-table1", "Sparse Factorization paper"),
                        ("synthetic", "Synthetic matrices")):
        assert re.search(rf"^\W*{name}\W+\d+\W+{title}", res.output, re.M), res.output
    data = json.loads(invoke("datasets", "list", "--json", "-").stdout)
    assert [(m["name"], m["entries"]) for m in data["manifests"]] == [("kernels", 4), ("paper-table1", 45),
                                                                       ("synthetic", 19)]
    assert all(Path(m["file"]).is_file() for m in data["manifests"])
    # its options are a manifest's: refused without one, not ignored
    res = invoke("datasets", "list", "--only", "strike")
    assert res.exit_code == 2 and "--only needs a manifest" in res.output


def test_datasets_list_alone_verbose_shows_each_manifest_s_description_and_file():
    """-v was taken without a manifest and did nothing; it shows where each bundled manifest lies (to copy and
    edit one) and what it describes."""
    plain, verbose = invoke("datasets", "list", "--csv", "-"), invoke("datasets", "list", "-v", "--csv", "-")
    assert plain.exit_code == verbose.exit_code == 0, verbose.output
    header = verbose.stdout.splitlines()[0]
    assert plain.stdout.splitlines()[0] == "name,entries,what" and header == "name,entries,what,description,file"
    rows = list(csv.DictReader(io.StringIO(verbose.stdout)))
    assert [Path(r["file"]).name for r in rows] == ["kernels.toml", "paper-table1.toml", "synthetic.toml"]
    assert all(Path(r["file"]).is_file() for r in rows) and "MNIST" in rows[0]["description"]


@pytest.mark.parametrize("command", ["list", "verify", "fetch"])
def test_datasets_commands_take_a_bundled_manifest_s_name(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("datasets", command, "synthetic", "--only", "banded-128")
    assert res.exit_code == 0, res.output
    assert ("generated" if command != "fetch" else "1 generated, nothing to fetch") in res.output


def test_an_option_of_other_commands_says_which_take_it_not_a_near_spelling():
    """`fit x --csv f` answered click's "(Possible options: --var)", a weight variable: fit writes no CSV, and
    compare and sweep do. A misspelling of the command's own option keeps click's nearest name."""
    res = invoke("fit", "x", "--csv", "f")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "--var" not in text, text
    assert "No such option: --csv (fit has none;" in text and "compare" in text and "sweep" in text, text
    res = invoke("compare", "x", "--csvv", "f")
    assert res.exit_code == 2 and "Possible options: --csv" in " ".join(res.output.split()), res.output


def test_fit_s_iteration_note_of_one_iteration_says_iteration(small_mtx):
    """"the fit stopped after its 1 iterations": one in the singular, as the verdict says it."""
    res = invoke("fit", small_mtx, "--iters", "1", "--ftol", "0", "--gtol", "0", "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert "stopped after its 1 iteration before" in " ".join(res.output.split())
