"""Every option is checked before anything is loaded or fitted: one line, exit code 2, no work done.

The loaders are replaced by functions that fail the test when called, so a
check that only happens after loading (or never) is caught.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sfapprox.cli import app


@pytest.fixture
def no_loading(monkeypatch):
    import sfapprox.datasets.batch
    import sfapprox.io

    def loader_called(*args, **kwargs):
        pytest.fail("a matrix or manifest was loaded before the options were checked")

    monkeypatch.setattr(sfapprox.io, "load_matrix", loader_called)
    monkeypatch.setattr(sfapprox.datasets.batch, "load_manifest", loader_called)


@pytest.fixture
def inputs(tmp_path):
    matrix = tmp_path / "m.npy"
    np.save(matrix, np.eye(4))
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8}\n')
    return {"MATRIX": str(matrix), "MANIFEST": str(manifest), "OUT": str(tmp_path / "out"),
            "FIG": str(tmp_path / "fig.xyz")}


COMMANDS = {
    "fit": ["fit", "MATRIX"],
    "compare": ["compare", "MATRIX"],
    "sweep": ["sweep", "MATRIX"],
    "batch": ["batch", "MANIFEST", "--out-dir", "OUT"],
}

CASES = [
    # (commands, extra arguments, what the one line must say)
    (("fit", "compare", "sweep", "batch"), ["--max-memory", "nan"], "--max-memory"),
    (("fit", "compare", "sweep", "batch"), ["--max-memory", "1e400"], "--max-memory"),
    (("fit", "compare", "sweep", "batch"), ["--max-memory", "-5G"], "--max-memory"),
    (("compare", "sweep", "batch"), ["--methods", " , "], "no method given"),
    (("compare", "sweep", "batch"), ["--methods", "sf,svd"], "unknown method(s) 'svd' (did you mean 'tsvd'?)"),
    (("compare", "batch"), ["--budget", "abc"], "budget"),
    (("compare", "batch"), ["--budget", "-3"], "budget must be a finite positive number"),
    (("compare", "batch"), ["--budget", "nan"], "budget must be a finite positive number"),
    (("compare", "batch"), ["--budget", "2.5"], "neither a fraction"),
    (("compare", "batch"), ["--budget", "2.0"], "above 1 with a decimal point: write a count of stored values"),
    (("sweep",), ["--budgets", "0.1,2.0"], "as a whole number (2), or a fraction of N² in (0, 1]"),
    (("fit",), ["--budget", "inf"], "budget must be a finite positive number"),
    (("sweep",), ["--budgets", "0.1,zero"], "budget"),
    # --support butterfly --base 3 was refused only once the matrix had loaded
    (("fit",), ["--support", "butterfly", "--base", "3"], "--base 3 does not apply to the butterfly support"),
    (("compare", "sweep"), ["--plot", "FIG"], "cannot write a figure of type '.xyz'"),
    # the budget chooses the structure: refused once the matrix had loaded, as "leave out n_factors"
    (("fit",), ["--budget", "100", "--factors", "3"], "--budget chooses SF's structure itself; leave out --factors"),
    (("fit",), ["--budget", "0.5", "--base", "3", "--support", "symmetric"], "leave out --base, --support"),
    # without --plot it was accepted and ignored
    (("compare",), ["--plot-scale", "log"], "--plot-scale log sets the colours of --plot's figure; give --plot FILE"),
    # a list of no names ran every entry; an empty item was dropped without a word
    (("batch",), ["--only", ","], "--only ',' names no entry"),
    (("batch",), ["--only", "a,,b"], "--only 'a,,b': an item between two commas is empty"),
    # a file for the folder of the fits was refused only once the matrix had been read
    (("compare",), ["--save-factors", "MATRIX"], "the fits need a folder, and this is a file"),
]


@pytest.mark.parametrize("commands, extra, says", CASES, ids=[" ".join(c[1]) for c in CASES])
def test_bad_options_are_refused_before_any_loading(no_loading, inputs, commands, extra, says):
    for command in commands:
        args = [inputs.get(a, a) for a in COMMANDS[command] + extra]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (command, result.output)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and says in result.output, (command, result.output)
        assert "Traceback" not in result.output


NUMBERS = [
    # NaN was refused as "Input should be greater than or equal to 0", as if it were negative
    (("fit", "compare", "sweep", "batch"), ["--time-limit", "nan"], "Invalid value for '--time-limit': must be a number, not NaN"),
    (("fit",), ["--ftol", "nan"], "Invalid value for '--ftol': must be a number, not NaN"),
    (("fit",), ["--gtol", "NaN"], "Invalid value for '--gtol': must be a number, not NaN"),
    (("fit",), ["--out", "OUT", "--checkpoint-every", "nan"], "Invalid value for '--checkpoint-every': must be a number, not NaN"),
    (("fit", "compare"), ["--time-limit", "-1"], "Invalid value for '--time-limit': must be at least 0; got -1"),
    (("fit",), ["--ftol", "ten"], "Invalid value for '--ftol': must be a number; got 'ten'"),
    # infinity was refused by the library's check, in a range the option does not have: "--checkpoint-every
    # must be a float in the range [0, inf). Got inf instead." (its least value is 0.001)
    (("fit",), ["--out", "OUT", "--checkpoint-every", "inf"],
     "Invalid value for '--checkpoint-every': must be a finite number of seconds, at least 0.001; got inf"),
    (("fit",), ["--gtol", "inf"], "Invalid value for '--gtol': must be a finite number, at least 0; got inf"),
    (("fit", "compare", "batch"), ["--time-limit", "inf"],
     "Invalid value for '--time-limit': must be a finite number of seconds, at least 0 (0 for none); got inf"),
    # the whole-number options said "Input should be greater than or equal to 0" (pydantic's words) where
    # --time-limit -1 said "must be at least 0; got -1"
    (("fit", "compare", "batch"), ["--iters", "-1"], "Invalid value for '--iters': must be at least 0; got -1"),
    (("fit", "compare", "batch"), ["--seed", "1.5"], "Invalid value for '--seed': must be a whole number; got '1.5'"),
    (("fit", "compare", "batch"), ["--threads", "0"], "Invalid value for '--threads': must be at least 1; got 0"),
    (("fit",), ["--factors", "abc"], "Invalid value for '--factors': must be a whole number; got 'abc'"),
    (("fit",), ["--base", "1"], "Invalid value for '--base': must be at least 2; got 1"),
    (("fit", "compare"), ["--resize", "0"], "Invalid value for '--resize': must be at least 1; got 0"),
    (("batch",), ["--jobs", "-1"], "must be at least 1; got -1"),
    # torch's generators take 64 bits: 2**64 ran the numpy-seeded methods, then rpca-pcp failed with a traceback
    (("fit", "compare", "batch"), ["--seed", "18446744073709551616"],
     "Invalid value for '--seed': must be at most 18446744073709551615; got 18446744073709551616"),
    # pydantic's words again: "Input should be a valid number, unable to parse string as a number"
    (("fit", "compare", "sweep"), ["--bandwidth", "abc"], "Invalid value for '--bandwidth': must be a number; got 'abc'"),
    # a choice (a Literal) said "Invalid value for '--dtype': Value error, 'float16' is not one of ...", pydantic's
    # "Value error, " kept in typer's message
    (("fit", "compare"), ["--dtype", "float16"], "Invalid value for '--dtype': 'float16' is not one of 'float64', 'float32'."),
    (("compare", "sweep"), ["--mirror", "foo"], "Invalid value for '--mirror': 'foo' is not one of 'auto', 'none', 'mirror'"),
]


@pytest.mark.parametrize("commands, extra, says", NUMBERS, ids=[" ".join(c[1]) for c in NUMBERS])
def test_a_number_option_says_what_is_wrong_with_its_value(no_loading, inputs, commands, extra, says):
    """Refused while the options are parsed (a usage error: exit code 2), before the command runs, in one
    shape of words for the float and the whole-number options."""
    for command in commands:
        result = CliRunner().invoke(app, [inputs.get(a, a) for a in COMMANDS[command] + extra])
        assert result.exit_code == 2 and says in result.output, (command, result.output)
        assert "greater than or equal" not in result.output and "Input should" not in result.output
        assert "Value error" not in result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["list", "verify", "fetch"])
def test_datasets_only_that_names_no_entry_is_refused(inputs, command):
    """``datasets ... --only ,`` listed, verified or fetched every entry of the manifest."""
    for only, says in ((",", "--only ',' names no entry"), ("a,,a", "an item between two commas is empty")):
        result = CliRunner().invoke(app, ["datasets", command, inputs["MANIFEST"], "--only", only])
        assert result.exit_code == 2 and says in result.output, result.output
        assert "Traceback" not in result.output


def test_an_existing_output_is_refused_before_loading(no_loading, inputs, tmp_path):
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    for command in ("fit", "compare", "sweep"):
        result = CliRunner().invoke(app, [*[inputs.get(a, a) for a in COMMANDS[command]], "--json", str(taken)])
        assert result.exit_code == 2 and "already exists; use --force" in result.output, result.output
    assert taken.read_text() == "{}"


def test_a_missing_output_folder_is_refused_before_loading(no_loading, inputs, tmp_path):
    result = CliRunner().invoke(app, ["fit", inputs["MATRIX"], "--out", str(tmp_path / "no" / "f.h5")])
    assert result.exit_code == 2 and "does not exist; create it first" in result.output


def test_json_help_says_what_the_json_holds(inputs, tmp_path):
    """'--json: ... results as JSON (with the settings and versions)' was every table command's help; the JSON
    of report, info, methods, formats and datasets had neither.  Now a command's --json help names the
    settings or the versions only where its JSON records them."""
    import json

    import typer

    results = tmp_path / "run"
    results.mkdir()
    record = {"matrix": "a", "category": "network", "method": "tsvd", "status": "ok", "fro_error": 1.0, "n": 4,
              "settings": {"seed": 0}}
    (results / "results.jsonl").write_text(json.dumps(record) + "\n")
    runs = {("compare",): ["compare", inputs["MATRIX"], "--methods", "tsvd"],
            ("sweep",): ["sweep", inputs["MATRIX"], "--methods", "tsvd", "--budgets", "0.5"],
            ("report",): ["report", str(results)],
            ("info",): ["info", inputs["MATRIX"]],
            ("methods",): ["methods"], ("formats",): ["formats"],
            ("datasets", "list"): ["datasets", "list", inputs["MANIFEST"]],
            ("datasets", "verify"): ["datasets", "verify", inputs["MANIFEST"]]}
    root = typer.main.get_command(app)
    for path, args in runs.items():
        command = root
        for name in path:
            command = command.commands[name]
        said = next(p for p in command.params if "--json" in p.opts).help
        done = CliRunner().invoke(app, [*args, "--json", "-"])
        assert done.exit_code == 0, (path, done.output)
        data = json.loads(done.stdout)
        settings = "settings" in data or bool(data.get("records")) and all("settings" in r for r in data["records"])
        assert ("versions" in said) == ("versions" in data), (path, said, sorted(data))
        assert ("settings" in said) == settings, (path, said, sorted(data))


@pytest.mark.parametrize("command", ["list", "verify"])
def test_datasets_output_that_is_the_manifest_is_refused_even_with_force(inputs, command):
    """``datasets list MANIFEST --json MANIFEST --force`` replaced the manifest it listed with its JSON."""
    from pathlib import Path

    manifest = Path(inputs["MANIFEST"])
    before = manifest.read_bytes()
    for fmt in ("--json", "--csv"):
        result = CliRunner().invoke(app, ["datasets", command, str(manifest), fmt, str(manifest), "--force"])
        assert result.exit_code == 2 and "is this command's input" in result.output, result.output
    assert manifest.read_bytes() == before


def test_batch_jobs_over_the_cores_is_said_and_lowered(inputs, monkeypatch):
    """``--jobs 1000`` on 2 cores ran as asked, without a word: processes that share the cores each get less
    of them in their fits' wall-clock time limits.  It is lowered to the cores, and said, as --threads is."""
    import sfapprox._threads
    import sfapprox.datasets
    from sfapprox._errors import SfapproxError

    asked = {}

    def run_batch(*args, jobs, **kwargs):
        asked["jobs"] = jobs
        raise SfapproxError("stop here")

    monkeypatch.setattr(sfapprox._threads, "available_cores", lambda: 2)
    monkeypatch.setattr(sfapprox.datasets, "run_batch", run_batch)
    result = CliRunner().invoke(app, ["batch", inputs["MANIFEST"], "--out-dir", inputs["OUT"], "--jobs", "1000"])
    assert asked == {"jobs": 2}, result.output
    assert "--jobs 1000 is more than the 2 cores this process may use; running 2 at a time" in \
        " ".join(result.output.split())


def _stop_here(seen: dict, key: str):
    """A stand-in that keeps what a command passed it (under ``key``) and ends the command there."""
    from sfapprox._errors import SfapproxError

    def stand_in(*args, **kwargs):
        seen[key] = (args, kwargs)
        raise SfapproxError("stop here")

    return stand_in


def test_choices_are_taken_in_any_case_and_kept_as_declared(inputs, monkeypatch):
    """``--kernel RBF``, ``--format MTX``, ``--dtype FLOAT32``, ``--support Chord`` ... were refused as
    unknown; each is taken in any case, and what the command gets (stores, prints) is the declared word."""
    import sfapprox.api
    import sfapprox.cli.info
    import sfapprox.cli.sweep
    import sfapprox.datasets
    import sfapprox.sweep

    seen: dict = {}
    monkeypatch.setattr(sfapprox.cli.info, "read_matrix", _stop_here(seen, "load"))
    monkeypatch.setattr(sfapprox.datasets, "run_batch", _stop_here(seen, "batch"))
    monkeypatch.setattr(sfapprox.api, "fit_matrix", _stop_here(seen, "fit"))
    monkeypatch.setattr(sfapprox.sweep, "parse_budget_list", _stop_here(seen, "budgets"))
    runs = {
        "load": ["info", inputs["MATRIX"], "--format", "NPY", "--kernel", "RBF", "--mirror", "NONE",
                 "--two-mode", "Rows", "--square", "CROP"],
        "batch": ["batch", inputs["MANIFEST"], "--out-dir", inputs["OUT"], "--methods", "TSVD,Sparse",
                  "--budget", "SF", "--protocol", "PAPER", "--executor", "Process", "--device", "CPU",
                  "--dtype", "FLOAT32"],
        "fit": ["fit", inputs["MATRIX"], "--support", "Chord", "--init", "Reference"],
        "budgets": ["sweep", inputs["MATRIX"], "--budgets", "SF,0.5"],
    }
    for key, args in runs.items():
        result = CliRunner().invoke(app, args)
        assert key in seen and "stop here" in result.output, (args, result.output)
    load = seen["load"][0][1]
    assert (load.format, load.kernel, load.mirror, load.two_mode, load.square) == ("npy", "rbf", "none", "rows", "crop")
    options = seen["batch"][0][2]
    assert options.methods == ("tsvd", "sparse") and options.budget == "sf" and options.protocol == "paper"
    assert (options.settings.device, options.settings.dtype) == ("cpu", "float32")
    assert seen["batch"][1]["executor"] == "process"
    assert (seen["fit"][1]["support"], seen["fit"][1]["init"]) == ("chord", "reference")
    assert seen["budgets"][0] == ("sf,0.5",)
    said = CliRunner().invoke(app, ["compare", inputs["MATRIX"], "--plot-scale", "LOG"]).output
    assert "--plot-scale log sets the colours" in " ".join(said.split())
    # words that name no choice are still refused, and a file's name keeps its case
    assert "--dtype" in CliRunner().invoke(app, ["fit", inputs["MATRIX"], "--dtype", "FLOAT16"]).output
    said = CliRunner().invoke(app, ["fit", inputs["MATRIX"], "--init", "Missing.h5"]).output
    assert "--init Missing.h5: neither a start" in " ".join(said.split())


def test_time_limit_help_says_a_sweep_gives_it_at_each_budget():
    """--time-limit's help said "Seconds each method may take as a whole": in a sweep that read as the whole
    sweep, where each method gets it at every budget (10 budgets of 3 methods at 2 s take about a minute)."""
    import typer

    sweep = typer.main.get_command(app).commands["sweep"]
    (option,) = [p for p in sweep.params if "--time-limit" in getattr(p, "opts", ())]
    assert "at each budget of a sweep" in " ".join(option.help.split())


def test_a_count_option_over_one_core_says_the_core_in_the_singular(monkeypatch, capsys):
    """"--threads 4 is more than the 1 cores this process may use": counted (formats.counted); the value
    typed stays as typed."""
    import sfapprox._threads
    from sfapprox.cli._options import at_most_cores

    monkeypatch.setattr(sfapprox._threads, "available_cores", lambda: 1)
    assert at_most_cores("--threads", 4000, "the fits use {cores}") == 1
    said = " ".join(capsys.readouterr().err.split())
    assert "--threads 4000 is more than the 1 core this process may use; the fits use 1" in said
