from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands():
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```bash\n")[1:3]
    return [b.split("\n```")[0].strip() for b in blocks]


def test_readme_starts_with_two_commands_and_ci_runs_the_test_one():
    run_cmd, test_cmd = _commands()
    assert "sfapprox" in run_cmd and "examples/" in run_cmd
    assert "pytest" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci
    assert any("torch==2.13.0" in line for line in ci[: ci.index(test_cmd)])


def test_example_in_readme_exists():
    run_cmd, _ = _commands()
    example = next(tok for tok in run_cmd.split() if tok.startswith("examples/"))
    assert (ROOT / example).is_file()


def _python_blocks():
    text = (ROOT / "README.md").read_text()
    return [b.split("\n```")[0] for b in text.split("```python\n")[1:]]


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """The API examples run as written (graph.net: the example network; files land in a temporary folder)."""
    import shutil
    import warnings

    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "examples" / "karate_like.net", tmp_path / "graph.net")
    blocks = [b for b in _python_blocks() if "import sfapprox" in b or "import numpy as np, torch, sfapprox" in b]
    assert len(blocks) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "f.h5").is_file()


def test_readme_input_formats_table_names_every_extension():
    """Every extension a reader is chosen by is in README's table of input formats (.safetensors and
    .pt/.pth were missing)."""
    from sfapprox.io import available_formats, format_extensions

    section = (ROOT / "README.md").read_text().split("## Input formats")[1].split("\n## ")[0]
    missing = {key: [ext for ext in format_extensions(key) if f"`{ext}`" not in section]
               for key in available_formats()}
    assert not {key: exts for key, exts in missing.items() if exts}


def test_safety_says_a_mapped_file_s_pages_count_in_rss():
    """A pass over a memory-mapped .npy brings the file's pages into RSS (651 MiB peak at --max-memory 100M
    for a 275 MiB file): the limit covers what sfapprox holds, and the README says so."""
    safety = (ROOT / "README.md").read_text().split("## Safety", 1)[1].split("\n## ", 1)[0]
    text = " ".join(safety.split())
    assert "memory-mapped `.npy`'s pages" in text and "RSS can pass `--max-memory` by up to the file's size" in text


# ------------------------------------------------------------------ README facts the code could silently break
EXAMPLES = ROOT / "examples"


def _text(path="README.md"):
    """A README with its line breaks folded, so a quote split over lines still matches."""
    return " ".join((ROOT / path).read_text().split())


def _section(title, path="README.md"):
    return _text(path).split(title, 1)[1].split(" ## ", 1)[0]


def _cli_commands():
    """{command path ("" for the program, "compare", "datasets list"): its click command}."""
    import typer

    from sfapprox.cli import app

    out = {}

    def walk(command, prefix):
        out[" ".join(prefix)] = command
        for name, sub in getattr(command, "commands", {}).items():  # a group (typer's own click)
            walk(sub, prefix + [name])

    walk(typer.main.get_command(app), [])
    return out


def _commands_and_options():
    """{command path: its option names, hidden (old) ones too}."""
    return {name: {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
            for name, command in _cli_commands().items()}


def _named_options(text):
    import re

    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def test_manifest_readme_names_every_batch_record_field(tmp_path):
    """data_manifests/README.md's list of a results.jsonl line holds every field a line has (error_estimate,
    time_limit and source were missing)."""
    import json

    from typer.testing import CliRunner

    from sfapprox.cli import app

    manifest = tmp_path / "m.toml"
    manifest.write_text('[[matrix]]\nname = "r"\ncategory = "synthetic"\ngenerator = "random_sparse"\n'
                        "params = {n = 16}\n")
    res = CliRunner().invoke(app, ["batch", str(manifest), "--out-dir", str(tmp_path / "out"), "--methods", "tsvd"])
    assert res.exit_code == 0, res.output
    record = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[0])
    listed = _section("## Batch results", "data_manifests/README.md").split("Each line holds:", 1)[1]
    listed = listed.split("Running the same command again", 1)[0]
    assert {key for key in record if f"`{key}`" not in listed} == set()


def test_manifest_readme_schema_is_the_manifest_reader_s():
    """The schema tables name every field, category, load option, archive suffix and generator parameter the
    manifest reader takes (.tbz2 and .txz were missing)."""
    import inspect

    from sfapprox.datasets import manifest as m
    from sfapprox.datasets.synthetic import GENERATORS

    schema = _section("## Schema", "data_manifests/README.md")
    assert {f for f in m.ENTRY_FIELDS if f"`{f}`" not in schema} == set()
    assert {f for f in m.TOP_FIELDS - {"matrix"} if f"`{f}`" not in schema} == set()
    assert {c for c in m.CATEGORIES if f"`{c}`" not in schema} == set()
    assert {o for o in m.LOAD_OPTIONS if f"`{o}`" not in schema} == set()
    assert {s for s in m.ARCHIVE_SUFFIXES + m.COMPRESSED_SUFFIXES if f"`{s}`" not in schema} == set()
    generators = _section("## Generators", "data_manifests/README.md")
    for name, make in GENERATORS.items():
        row = generators.split(f"| `{name}` |", 1)[1].split(" | ", 1)[0]
        assert {p for p in inspect.signature(make).parameters if p not in ("n", "seed") and f"`{p}`" not in row} \
            == set(), name


def test_every_option_the_readmes_name_is_an_option_of_the_cli():
    """An option README.md (but its benchmark table, whose options are the scripts') or data_manifests/README.md
    names exists in some command."""
    commands = _commands_and_options()
    known = set().union(*commands.values()) | {"--help"}  # click's own, on every command
    text = _text().split(" ## Benchmarks", 1)[0] + " " + _text("data_manifests/README.md")
    assert _named_options(text) - known == set()


def test_every_option_of_the_cli_is_in_the_readmes():
    """Each command's options are documented (--plot-scale, sweep's --budgets and datasets list's --verbose were
    not); a --x/--no-x pair counts when either is named."""
    text = _text() + " " + _text("data_manifests/README.md")
    named = _named_options(text)
    missing = set()
    for name, options in _commands_and_options().items():
        for option in options:
            if option.startswith("--") and option not in named and option != "--help":
                missing.add(f"{name} {option}")
    # a --x/--no-x pair: one of them named is enough
    pairs = {f"{n} --{o[5:]}" for n in _commands_and_options() for o in named if o.startswith("--no-")}
    assert missing - pairs == set()


def test_readme_option_groups_are_the_cli_groups():
    """README's Options paragraph lists the loading and fit options as _options.py declares them (--kernel and
    --bandwidth were missing), on the commands it says take them."""
    from sfapprox.cli import _options as o

    commands = _commands_and_options()
    options = _section("### Options")

    def declared(group):
        names = {p.name for p in group.params}
        return {opt for p in _cli_commands()["fit"].params if p.name in names for opt in p.opts}

    loading = options.split("takes the **loading** options", 1)[1].split("Every fitting command", 1)[0]
    assert _named_options(loading) == declared(o.LOAD)
    fitting = options.split("takes the **fit** settings", 1)[1].split("Every table-producing", 1)[0]
    assert _named_options(fitting) | {"--max-memory"} == declared(o.FIT)
    for command in ("info", "fit", "compare", "sweep"):
        assert declared(o.LOAD) <= commands[command], command
    for command in ("fit", "compare", "sweep", "batch"):
        assert declared(o.FIT) <= commands[command], command


def test_readme_python_names_resolve():
    """Every dotted sfapprox name in the READMEs (sfapprox.compare, sfapprox.sources.DistributedSource, the old
    names kept for scripts, ...) imports."""
    import importlib
    import re
    import warnings

    text = _text() + " " + _text("data_manifests/README.md")
    bad = []
    for name in sorted(set(re.findall(r"\bsfapprox(?:\.[A-Za-z_]\w*)+", text))):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                for part in parts[i:]:
                    obj = getattr(obj, part)
        except AttributeError:
            bad.append(name)
    assert bad == []


def test_readme_quoted_verdicts_are_what_compare_says():
    """The verdicts README quotes from the shipped examples are today's text (it quoted an older wording)."""
    import sfapprox

    text = _text()
    exact = sfapprox.compare(EXAMPLES / "karate_like.net", "sparse").verdict()["text"]
    assert f'"{exact}" (`examples/karate_like.net`)' in text
    suggestion = sfapprox.compare(EXAMPLES / "mesh_small.mtx", "tsvd").verdict()["text"].split("; ", 1)[1]
    assert f'("{suggestion}", on `examples/mesh_small.mtx`)' in text


def test_readme_compare_json_keys_are_the_json_s():
    """Every key of `compare --json` and of its rows is in README's description of it (notes and error_estimate
    were missing)."""
    import sfapprox

    record = sfapprox.compare(EXAMPLES / "karate_like.net", "tsvd").to_dict()
    described = _section("## Output files").split("`compare --json`:", 1)[1].split("`fit --out F.h5`", 1)[0]
    keys = set(record) | set(record["results"][0]) | set(record["verdict"])
    assert {key for key in keys if f'"{key}"' not in described and f"`{key}`" not in described} == set()


def _table_commands(text):
    """The command names in "(compare, sweep, ..., datasets list|verify)"."""
    names = []
    for item in text.replace("`", "").split(","):
        words = item.strip().split()
        if len(words) == 2 and "|" in words[1]:
            names += [f"{words[0]} {sub}" for sub in words[1].split("|")]
        else:
            names.append(" ".join(words))
    return set(names)


def test_readme_and_formats_name_every_command_with_output_options():
    """README's list of table-producing commands, and `sfapprox formats`' title of its output formats (which
    named only compare, sweep, info and report), are the commands that take --json/--csv/--markdown/--latex."""
    from sfapprox.describe import describe_formats

    with_outputs = {name for name, options in _commands_and_options().items()
                    if {"--json", "--csv", "--markdown", "--latex"} <= options}
    readme = _section("### Options").split("Every table-producing command (", 1)[1].split(")", 1)[0]
    assert _table_commands(readme) == with_outputs
    title = describe_formats().tables[1].title
    assert _table_commands(title.split("(", 1)[1].split(":", 1)[0]) == with_outputs


def _benchmark_scripts():
    """The runnable scripts of benchmarks/ (a main or an argument parser; not helpers such as _common.py)."""
    return sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")
                  and ('if __name__ == "__main__"' in p.read_text() or "argparse" in p.read_text()))


def test_readme_benchmarks_table_names_every_benchmark_script():
    """Each runnable script of benchmarks/ has its row in README's Benchmarks table (ten had none:
    coarse_probe.py, libsvm_read.py, limit_decisions.py, panel_width.py, ...)."""
    rows = [line for line in (ROOT / "README.md").read_text().split("\n## Benchmarks", 1)[1].splitlines()
            if line.startswith("| `")]
    named = {line.split("`", 2)[1] for line in rows}
    scripts = _benchmark_scripts()
    assert len(scripts) > 30  # the scan found the scripts
    assert [s for s in scripts if s not in named] == []


def test_readme_names_every_root_attribute_of_a_saved_fit(tmp_path):
    """README's list of a saved fit's root attributes holds every one that an SF file, a hybrid's and a baseline's
    (arrays in `parts`) have (support and n_factors were missing, and the hybrids' count_indices and
    lr_singular_values)."""
    import h5py
    import numpy as np
    import scipy.sparse as sp

    from sfapprox import save_factors
    from sfapprox.operators import ChordOperator, HybridOperator, SparseOperator

    chord = ChordOperator(np.full((3, 8, 4), 0.25))
    U = np.ones((8, 1)) / np.sqrt(8)
    operators = {"sf": chord, "sf+lr": HybridOperator(8, chord=chord, low_rank=(U, np.array([8.0]), U.T)),
                 "nmf": HybridOperator(8, low_rank=(U, None, U.T)), "sparse": SparseOperator(sp.eye(8))}
    attributes = set()
    for name, operator in operators.items():
        save_factors(tmp_path / f"{name}.h5", operator)
        with h5py.File(tmp_path / f"{name}.h5") as f:
            attributes |= set(f.attrs)
    listed = _section("## Output files").split("`fit --out F.h5`", 1)[1].split("SF factors are", 1)[0]
    assert {"format", "support", "n_factors"} <= attributes  # the files were read
    assert {a for a in attributes if f"`{a}`" not in listed} == set()


def test_readme_placeholder_folders_are_option_metavars():
    """A placeholder path in README (`DIR/factors/`) names a folder given as `--option DIR` there (it wrote
    batch's `OUT/factors/`, an OUT no option takes)."""
    import re

    text = _text()
    for name in re.findall(r"`([A-Z][A-Z_]*)/", text):
        assert re.search(rf"--[a-z][a-z-]* {name}\b", text), name
