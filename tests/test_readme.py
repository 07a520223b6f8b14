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


#: README's sizes that the test runs smaller (the same lines: seconds instead of minutes).
SMALLER = {"20_000": "1_000", "4_096": "256"}


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """Every Python block of the README runs as written, in order, in a temporary folder (graph.net: the example
    network): the first at N = 1,000 instead of 20,000 and 256 tokens instead of 4,096 (it used q and k, and read
    a points.csv, that it never made), the last (a saved fit rebuilt with h5py and numpy alone) on the f.h5 that
    the block before it writes, whose matrix it rebuilds."""
    import shutil
    import warnings

    import numpy as np

    from sfapprox import load_factors

    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "examples" / "karate_like.net", tmp_path / "graph.net")
    blocks = _python_blocks()
    assert len(blocks) == 4
    for old, new in SMALLER.items():
        assert old in blocks[0]
        blocks[0] = blocks[0].replace(old, new)
    *api, rebuild = blocks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits
        for block in api:
            exec(compile(block, "README.md", "exec"), {})
        names = {"path": tmp_path / "f.h5"}
        exec(compile(rebuild, "README.md", "exec"), names)
    np.testing.assert_allclose(names["A"], load_factors(tmp_path / "f.h5").operator.to_dense(), rtol=1e-12,
                               atol=1e-12)


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



def test_safety_says_glibc_can_keep_freed_arrays_in_rss_and_how_to_stop_it():
    """glibc's growing mmap threshold keeps freed arrays of up to 32 MiB in the heap, so at N <= ~2,000 the
    RSS holds arrays a fit already freed (benchmarks/results/malloc_peak.md): the README says so and names
    the environment variable that fixes the threshold."""
    safety = (ROOT / "README.md").read_text().split("## Safety", 1)[1].split("\n## ", 1)[0]
    text = " ".join(safety.split())
    assert "mmap threshold" in text and "MALLOC_MMAP_THRESHOLD_=65536" in text and "malloc_peak.md" in text

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
    exact = sfapprox.compare(EXAMPLES / "karate_like.net", ["sparse", "tsvd"]).verdict()["text"]  # (one: no winner)
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


def test_readme_stop_reasons_are_every_method_s():
    """The Stopping rules list every stop_reason a row can say: SF's and the other methods' (README listed SF's
    alone, so `exact`, `closed_form` and `converged`, in most rows' details, were nowhere)."""
    import warnings

    import numpy as np

    import sfapprox
    from sfapprox.sf._solver import StopReason

    listed = _text().split("**Stopping rules**", 1)[1].split("**Supports.**", 1)[0]
    sf_reasons = {v for k, v in vars(StopReason).items() if k.isupper()} - {StopReason.MAX_EVALS}  # (no fit sets it)
    reasons = sf_reasons | {"zero_matrix"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = sfapprox.compare(EXAMPLES / "karate_like.net", "tsvd,sparse,nmf,rpca,rsvd,monarch+lr", budget=0.3,
                                time_limit=5).results
        kernel = np.abs(np.random.default_rng(0).standard_normal((40, 40)))
        rows += sfapprox.compare(kernel @ kernel.T, "nystrom,sparse", budget=0.3, time_limit=5).results
    seen = {r.params.get("stop_reason") for r in rows if r.status == "ok"}
    assert {"exact", "closed_form", "converged"} <= seen  # the run reached the baselines' own reasons
    assert {r for r in reasons | seen if f"`{r}`" not in listed} == set()


def test_readme_quoted_defaults_are_the_code_s():
    """Numbers README quotes for a default are the constants the code uses (the hybrids' 40 % / 30 % shares and
    float32's 128-column kernel blocks were not said)."""
    from sfapprox import _settings
    from sfapprox.baselines.tsvd import EXACT_MAX_N
    from sfapprox.estimate import DEFAULT_RTOL
    from sfapprox.hybrid.base import CONTINUE_SHARE, PLAIN_SHARE
    from sfapprox.plotting import PANEL_MAX
    from sfapprox.sf._columns import LBFGS_MIN_PASSES, ColumnSettings
    from sfapprox.sf._kernels import NUMBA_SINGLE_BLOCK_MAX_N, numba_width
    from sfapprox.sf._solver import LBFGSOptions
    from sfapprox.sources.kernels import MEDIAN_SAMPLE

    text = _text()
    cs = ColumnSettings()
    quotes = [
        f"`--iters N` (SF's L-BFGS iterations, default {_settings.SF_MAX_ITER})",
        f"By default one method gets {_settings.DEFAULT_TIME_LIMIT:.0f} s and the methods of one comparison",
        f"share {_settings.DEFAULT_TOTAL_TIME:.0f} s, at most {_settings.DEFAULT_TIME_LIMIT:.0f} s each",
        f"within {DEFAULT_RTOL:.0%} of its estimate".replace("%", " %"),
        f"a seeded sample of {MEDIAN_SAMPLE:,}",
        f"over {PANEL_MAX:,} rows",
        f"LAPACK's exact SVD up to N = {EXACT_MAX_N}",
        f"`tsvd` | truncated SVD, the largest rank that fits: the best rank-r approximation (LAPACK's SVD, "
        f"of a symmetric X its eigendecomposition, `stop=exact`) up to N = {EXACT_MAX_N:,}",
        f"their plain SF end {PLAIN_SHARE:.0%} of their limit and keep {CONTINUE_SHARE:.0%} back".replace("%", " %"),
        f"in column blocks of {numba_width(4096)} ({numba_width(4096, itemsize=4)} in float32) above "
        f"N = {NUMBA_SINGLE_BLOCK_MAX_N}",
        f"from blocks of {cs.batch} consecutive columns",
        f"with {cs.history} pairs of history",
        f"room for {LBFGS_MIN_PASSES} passes over the columns",
        f"fewer than {cs.sketch_max_passes:.0f} passes",
        f"sketch `Y = X S` of {cs.sketch_columns:,} columns",
        f"{cs.holdout_columns} more held out",
        f"gains under {cs.sketch_min_gain:.1%} on its held-out columns".replace("%", " %"),
        f"relative decrease over {LBFGSOptions.window} iterations",
    ]
    assert [q for q in quotes if q not in text] == []


def test_readme_spells_the_glyphs_as_an_ascii_stream_gets_them():
    """README's ASCII spellings of the glyphs are what a stream that cannot encode them gets (they were not said)."""
    from sfapprox.formats import to_ascii

    text = _text()
    for glyphs in ("‖X−X̂‖_F", "N²"):
        assert f"`{to_ascii(glyphs)}`" in text, glyphs
    assert f"`{to_ascii('★')}` for ★" in text


def test_readme_fit_json_names_are_fit_s(tmp_path):
    """The names README gives for `fit --json` and for `info --json` of a saved fit are keys of them."""
    import json
    import re

    from typer.testing import CliRunner

    from sfapprox.cli import app

    out = tmp_path / "f.h5"
    res = CliRunner().invoke(app, ["fit", str(EXAMPLES / "karate_like.net"), "--iters", "5", "--budget", "sf",
                                   "--out", str(out), "--json", str(tmp_path / "fit.json"), "--quiet"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["info", str(out), "--json", str(tmp_path / "info.json")])
    assert res.exit_code == 0, res.output
    described = _section("## Output files").split("`fit --json`:", 1)[1]
    fit_part, info_part = described.split("`info --json` of a saved fit:", 1)
    info_part = info_part.split("No JSON output", 1)[0]
    for part, path in ((fit_part, "fit.json"), (info_part, "info.json")):
        record = json.loads((tmp_path / path).read_text())
        names = set(re.findall(r'"([a-z_]+)"', part.split("{", 1)[1])) - {"sf"}
        assert names and names - set(record) == set(), path


def test_manifest_readme_says_what_report_csv_holds(tmp_path):
    """data_manifests/README.md says report.csv holds each method's status in a column of its own and an empty
    cell for a missing value, as a batch writes it (it said nothing of either)."""
    import csv

    from typer.testing import CliRunner

    from sfapprox.cli import app

    manifest = tmp_path / "m.toml"
    manifest.write_text('[[matrix]]\nname = "r"\ncategory = "synthetic"\ngenerator = "random_sparse"\n'
                        "params = {n = 16}\n")
    res = CliRunner().invoke(app, ["batch", str(manifest), "--out-dir", str(tmp_path / "out"),
                                   "--methods", "tsvd,nystrom"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader((tmp_path / "out" / "report.csv").open()))
    assert rows[0]["nystrom status"] == "not applicable" and rows[0]["nystrom"] == ""
    said = _section("## Batch results", "data_manifests/README.md")
    assert "`<method> status`" in said and "an empty cell for a missing value" in said


def _differing_keys(a, b, path=()):
    """The keys of the leaves (and of the fields present in one only) where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in set(a) | set(b):
            if key not in a or key not in b:
                yield key
            else:
                yield from _differing_keys(a[key], b[key], (*path, key))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b):
            yield from _differing_keys(x, y, path)
    elif a != b:
        yield path[-1] if path else "(root)"


def test_readme_names_every_field_that_differs_between_two_runs_of_a_command():
    """A researcher rerunning a comparison diffs the JSON: the README says which fields may differ (timings
    and dates, kept beside the numbers); every other field is the same, to the last digit."""
    import numpy as np

    import sfapprox

    X = np.random.default_rng(0).random((32, 32))
    runs = [sfapprox.compare(X, methods=["sf", "tsvd", "rsvd", "rpca", "sf+s"], time_limit=None, max_iter=20,
                             seed=3).to_dict() for _ in range(2)]
    differing = set(_differing_keys(*runs))
    assert differing and "fro_error" not in differing and "rel_error" not in differing
    text = (ROOT / "README.md").read_text()
    said = text[text.index("**Reproducibility.**"):].split("\n\n")[0]
    assert all(f"`{key}`" in said or f".{key}`" in said for key in differing), differing


def test_readme_quoted_sizes_are_what_sfapprox_says():
    """The sizes README gives for a formed N x N float64 matrix are the ones sfapprox prints (format_bytes:
    powers of 1024); it said '36.5 GB' for 70,000 points (36.5 GiB, 39.2 GB) and '3.2 GB' for 20,000 (3.0 GiB)."""
    from sfapprox._validation import format_bytes

    def formed(n):
        return format_bytes(n * n * 8)

    text = _text()
    quotes = [f"A kernel matrix of 70,000 points is {formed(70_000)};",
              f"an attention map of 16,384 tokens, {formed(16_384)}.",
              f"a SuiteSparse mesh of 60,025 rows is 2.5 MB as `.mtx` and {formed(60_025)} dense",
              f"# median heuristic; {formed(20_000)} if formed"]
    assert "points = rng.standard_normal((20_000, 8))" in text  # the block the last quote is about
    assert [q for q in quotes if q not in text] == []


def _readme_results_files():
    """The benchmark results files README names: a whole code span that is a .md/.json/.png name under
    benchmarks/results/ or a bare one (`first_fit.md`); braces and globs as the shell would expand them."""
    import re

    names = set()
    for span in re.findall(r"`([^`\s]+)`", (ROOT / "README.md").read_text()):
        span = span.removeprefix("benchmarks/results/")
        if re.fullmatch(r"[a-z0-9_*{},-]+\.(md|json|png)", span) and span not in BATCH_OUTPUTS:
            head, _, rest = span.partition("{")
            choices, _, tail = rest.partition("}")
            names |= {head + c + tail for c in choices.split(",")} if rest else {span}
    return names


#: Files README names that a command writes, not benchmark results.
BATCH_OUTPUTS = {"report.json"}


def test_readme_names_only_benchmark_scripts_and_results_that_exist():
    """Every script in README's Benchmarks table is in benchmarks/, and every results file README cites
    (`benchmarks/results/scoring.md`, `first_fit.md`, `scale_fit_scoring_*.md`, ...) is in benchmarks/results/."""
    rows = [line for line in (ROOT / "README.md").read_text().split("\n## Benchmarks", 1)[1].splitlines()
            if line.startswith("| `")]
    assert [s for s in (line.split("`", 2)[1] for line in rows) if not (ROOT / "benchmarks" / s).is_file()] == []
    results = ROOT / "benchmarks" / "results"
    cited = _readme_results_files()
    assert len(cited) > 20 and "scoring.md" in cited and "method_memory_columns-before.md" in cited
    assert sorted(name for name in cited if not list(results.glob(name))) == []


def test_readme_default_methods_are_each_command_s():
    """README says which methods compare, sweep and batch run without --methods, as their --help does (it named
    compare's alone, where sweep and batch now take the same default)."""
    commands = _cli_commands()
    defaults = {name: next(p.default for p in commands[name].params if p.name == "methods")
                for name in ("compare", "sweep", "batch")}
    assert len(set(defaults.values())) == 1
    default = defaults["compare"]
    assert f"`compare`, `sweep` and `batch` run `{default}` by default" in _text()


def test_readme_says_where_a_narrow_window_puts_what_does_not_fit():
    """README's 'Tables fit the terminal' says what today's layout does with text that does not fit: a long
    free-text cell as a numbered note (NOTE_LINES), a word wider than the room (a sha256) under info's and fit's
    tables ('see below'), messages wrapped at spaces, a progress label cut in the matrix's name (none was said)."""
    from sfapprox.cli._render import SEE_BELOW
    from sfapprox.formats import NOTE_LINES

    said = _text().split("Tables fit the terminal:", 1)[1].split("The `next:` command", 1)[0]
    assert f"free-text cell still longer than {NOTE_LINES} lines" in said and "numbered note" in said
    assert f"(`{SEE_BELOW}` in its cell)" in said and "(a sha256)" in said
    assert "wrap at spaces, never inside a word" in said
    assert "shortens the matrix's name before the method" in said


def test_readme_names_the_folder_numba_caches_in_without_a_writable_one(tmp_path, monkeypatch):
    """Where numba has no writable cache folder the kernels cache in <temp>/sfapprox-numba-<uid> (they fell back
    to the slow path before); README says so, with the folder's name as the code makes it."""
    import os
    import tempfile

    from sfapprox import _compiled

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path, lasting = _compiled._private_folder()
    assert lasting and os.path.dirname(path) == str(tmp_path)
    said = _text().split("The first fit after installing compiles the kernels", 1)[1].split("**Starts.**", 1)[0]
    assert f"`<temp>/{os.path.basename(path).replace(str(os.getuid()), '<uid>')}`" in said
    assert "`NUMBA_CACHE_DIR` unset" in said and "`NUMBA_CACHE_DIR` chooses the folder" in said


def test_readme_says_which_messy_numbers_are_refused_and_which_read(tmp_path):
    """Safety's 'No guessed values' names what is refused as it is today: a Fortran exponent only in Matrix
    Market (text tables and triplets read it with a note), a decimal comma outside a ';' file, a NaN by line
    and column (it listed '0,25' and '1.5D+03' as refused everywhere)."""
    import re

    import pytest

    import sfapprox

    banner = "%%MatrixMarket matrix coordinate real general\n2 2 2\n"
    files = {"d.mtx": banner + "1 1 1.5D+03\n2 2 1\n", "d.ijv": "1 1 1.5D+03\n2 2 1\n",
             "c.txt": "0,25 1\n1 1\n", "c.csv": "0,25;1\n1;1\n", "n.csv": "1,2\n3,nan\n", "r.ijv": "1 1 1\n1 1 2\n2 2 1\n",
             "n.mtx": banner + "1 1 1\n2 1 nan\n"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    for refused in ("d.mtx", "c.txt"):
        with pytest.raises(sfapprox.SfapproxError):
            sfapprox.load_matrix(tmp_path / refused)
    with pytest.raises(sfapprox.SfapproxError, match="line 2, column 2"):
        sfapprox.load_matrix(tmp_path / "n.csv")
    with pytest.raises(sfapprox.SfapproxError, match="line 4: .* entry at row 2, column 1 "):
        sfapprox.load_matrix(tmp_path / "n.mtx")
    assert sfapprox.load_matrix(tmp_path / "d.ijv").matrix[0, 0] == 1500
    assert sfapprox.load_matrix(tmp_path / "c.csv").matrix[0, 0] == 0.25
    assert any(re.search(r"repeated entr(y|ies) summed", note) for note in sfapprox.load_matrix(tmp_path / "r.ijv").notes)
    safety = _section("## Safety")
    assert ("`0,25` outside a `;`-separated file, `1.5D+03` in Matrix Market" in safety
            and "(a text table's, triplets' and LIBSVM's also with the column, a Matrix Market entry's with its row "
                "and column)" in safety
            and "repeated entries summed) is said in a note" in safety)


def test_readme_lists_every_public_max_memory():
    """The Python API's list of what takes max_memory= names every public function and source class that has
    it (KernelMatrix, CovarianceMatrix and AttentionMatrix took it today; LoadOptions and estimate_errors were
    not named); the estimators are named as a group."""
    import inspect
    import warnings

    import sfapprox
    import sfapprox.sources
    from sfapprox._base import Approximation

    said = _section("## Python API").split("Every `max_memory=` (", 1)[1].split(") takes bytes", 1)[0]
    public = {name: getattr(sfapprox, name) for name in sfapprox.__all__}
    public |= {name: obj for name in sfapprox.sources.__all__
               if inspect.isclass(obj := getattr(sfapprox.sources, name))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        taking = set()
        for name, obj in public.items():
            if isinstance(obj, type) and issubclass(obj, Approximation):
                continue  # "the estimators"
            try:
                if "max_memory" in inspect.signature(obj).parameters:
                    taking.add(name)
            except (TypeError, ValueError):
                continue
    assert {"KernelMatrix", "load_matrix"} <= taking
    assert "the estimators" in said and {name for name in taking if f"`{name}`" not in said} == set()


def test_readme_shell_commands_use_their_own_command_s_options():
    """Each `sfapprox ...` line of README's shell blocks names a command that exists and only options that
    command takes (the option test only asked that some command had them)."""
    import shlex

    commands = _commands_and_options()
    text = (ROOT / "README.md").read_text()
    lines = [line.split(" #", 1)[0].strip() for block in text.split("```bash\n")[1:]
             for line in block.split("\n```", 1)[0].splitlines()]
    calls = [shlex.split(line.split("&& ", 1)[-1]) for line in lines if "sfapprox " in line]
    assert len(calls) > 15
    wrong = []
    for words in calls:
        words = words[words.index("sfapprox") + 1:]
        name = words[0] if words[0] in commands else None
        if name and len(words) > 1 and f"{name} {words[1]}" in commands:
            name = f"{name} {words[1]}"
        if name is None:
            wrong.append(" ".join(words))
            continue
        wrong += [f"{name} {w}" for w in words if w.startswith("--") and w.split("=")[0] not in commands[name]]
    assert wrong == []
