"""The CLI's own help, read as a user reads it: its examples run, every option says what it does and shows
the library's defaults, and it reads whole in a narrow or a wide window, on a terminal and through a pipe.

The examples and commands are read from the help as it is drawn (never from a copied list), so that an
option renamed while the help still names the old one fails here.
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import typer
from typer.testing import CliRunner

from sfapprox.cli import app
from test_cli_terminal import plain, screen_of

ROOT = Path(__file__).resolve().parents[1]
#: rich markup left in the text as written ("[bold]", "[/]"), where the help is drawn by click, not rich.
#: And rich's escape of a bracket shown as written ("\\[required]": typer before 0.22).
RAW_MARKUP = re.compile(r"\[/?(?:bold|italic|dim|underline|red|green|yellow|blue|cyan|magenta|white|link)\b[^\]]*\]|\[/\]|\\\[")
#: A placeholder never filled in: "{path}" (typer's usage), "TODO", "FIXME", "XXX".
PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\}|\bTODO\b|\bFIXME\b|\bXXX\b")


def _commands(command=None, path=()):
    """(words after 'sfapprox', click command) of the app, its commands and its groups' commands."""
    command = typer.main.get_command(app) if command is None else command
    yield list(path), command
    for name in getattr(command, "list_commands", lambda ctx: [])(None):
        yield from _commands(command.get_command(None, name), (*path, name))


COMMANDS = list(_commands())
PATHS = [path for path, _ in COMMANDS]


def rendered_help(path: list[str], columns: int = 200) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
    assert res.exit_code == 0, res.output
    return res.output


def examples(text: str) -> list[list[str]]:
    """The words of each ``Example:`` of a rendered help, its lines joined where they end in the shell's
    `` \\`` continuation (as a shell joins them when they are pasted)."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("Example:"):
            continue
        command = line.split("Example:", 1)[1].strip()
        rest = iter(lines[i + 1:])
        if not command:
            command = next(rest).strip()
        while command.endswith("\\"):
            command = command[:-1] + next(rest).strip()
        found.append(shlex.split(command))
    return found


def quoted_commands(text: str) -> list[list[str]]:
    """Each 'sfapprox ...' command a help quotes in its prose ('sfapprox info FILE' lists them)."""
    return [found.split() for found in re.findall(r"'(sfapprox [^']+)'", " ".join(text.split()))]


def resolve(words: list[str]):
    """The click command that ``sfapprox WORDS`` runs and the words given to it."""
    assert words[0] == "sfapprox", words
    command, rest = typer.main.get_command(app), words[1:]
    while hasattr(command, "list_commands") and rest and not rest[0].startswith("-"):
        sub = command.get_command(None, rest[0])
        assert sub is not None, f"'{' '.join(words)}': no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    return command, rest


def parsed(words: list[str]):
    """``sfapprox WORDS`` parsed and its values checked as click does before the command runs (an unknown
    option, a value that is none of an option's choices, a missing argument are refused)."""
    command, rest = resolve(words)
    with command.make_context(" ".join(words[:len(words) - len(rest)]), list(rest)) as ctx:
        return ctx


def every_help_command() -> list[tuple[list[str], list[str]]]:
    """(the command whose help it is, the command line) of every example and quoted command of every help."""
    return [(path, words) for path in PATHS for text in [rendered_help(path)]
            for words in [*examples(text), *quoted_commands(text)]]


# ---------------------------------------------------------------------------- 1. the examples
def test_every_command_has_an_example():
    """Each command's help ends in an example to copy (a group's commands have theirs)."""
    for path, command in COMMANDS:
        if not hasattr(command, "list_commands"):
            found = examples(rendered_help(path))
            assert len(found) == 1, f"'sfapprox {' '.join(path)} --help' has no Example:"
            assert resolve(found[0])[0].name == command.name, f"'sfapprox {' '.join(path)} --help' shows {found[0]}"


@pytest.mark.parametrize("path, words", every_help_command(), ids=lambda v: " ".join(v))
def test_each_command_the_help_shows_parses(path, words):
    """Every option an example or a quoted command names is one of its command's, with a valid value."""
    if any(word.isupper() for word in words[1:]):  # 'sfapprox info FILE': a placeholder, the command and options checked
        command, rest = resolve(words)
        names = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
        assert all(word in names for word in rest if word.startswith("-")), (words, sorted(names))
        return
    assert parsed(words).command.name == resolve(words)[0].name


def test_the_examples_check_catches_a_drifted_option():
    """The check above refuses what a renamed option would leave behind."""
    with pytest.raises(Exception, match="No such option"):
        parsed(["sfapprox", "batch", "m.toml", "--out-folder", "runs"])
    with pytest.raises(Exception, match="not one of|invalid choice|is not"):
        parsed(["sfapprox", "batch", "m.toml", "--protocol", "papers"])
    assert examples("  Example:\n    sfapprox fit m.mtx \\\n      --out f.h5\n") == [["sfapprox", "fit", "m.mtx", "--out", "f.h5"]]


def _fixture(path: Path) -> None:
    """A small file where an example names one that is not in the repository: a matrix of its format."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    A = (rng.random((16, 16)) < 0.3) * rng.random((16, 16))
    if path.suffix == ".mtx":
        scipy.io.mmwrite(path, A)
    elif path.suffix == ".net":
        rows, cols = np.nonzero(A)
        path.write_text("*Vertices 16\n*Arcs\n" + "".join(f"{i + 1} {j + 1} 1\n" for i, j in zip(rows, cols)))
    elif path.suffix == ".png":
        from PIL import Image

        Image.fromarray((rng.random((16, 16)) * 255).astype(np.uint8)).save(path)
    else:
        raise AssertionError(f"no fixture for {path}: add one, or name a file of the repository")


#: Added to an example that fits or compares, so that it runs in a test's time (its own options kept).
TINY = {"fit": ["--iters", "5", "--device", "cpu"], "compare": ["--iters", "5", "--device", "cpu"],
        "sweep": ["--iters", "5", "--device", "cpu", "--budgets", "0.3"]}


def _runnable(words: list[str], cwd: Path) -> list[str] | None:
    """``words`` to run offline in ``cwd`` (the bundled manifests by name, and the files the example names
    written as fixtures); None where it downloads (batch, datasets fetch)."""
    command, rest = resolve(words)
    if command.name in ("batch", "fetch"):
        return None
    ctx = parsed(words)
    for param in command.params:  # the input files it names
        value = ctx.params.get(param.name)
        value = Path(value) if isinstance(value, str) else value  # (typer 0.26 converts it later: a str)
        if param.param_type_name == "argument" and isinstance(value, Path) and not (cwd / value).exists() \
                and str(value) not in bundled_manifests():  # (a bundled manifest's name: nothing to write)
            if command.name == "report":  # a batch's folder: a batch of one small entry writes it
                _run(["batch", "synthetic", "--only", "random-sparse-64", "--methods",
                      "tsvd", "--out-dir", str(value), "-q"], cwd)
            else:
                _fixture(cwd / value)
    if "--data-dir" in rest:  # "../shared/realdata": an empty folder, nothing present
        (cwd / rest[rest.index("--data-dir") + 1]).mkdir(parents=True, exist_ok=True)
    if "--plot" in rest and not _has_matplotlib():  # (drawn too where matplotlib is installed)
        at = rest.index("--plot")
        rest = rest[:at] + rest[at + 2:]
    return [*words[1:len(words) - len(rest)], *rest, *TINY.get(command.name, []), "-q"] \
        if any("-q" in p.opts for p in command.params) else [*words[1:len(words) - len(rest)], *rest]


def bundled_manifests() -> dict[str, Path]:
    from sfapprox.datasets.bundled import bundled_manifests

    return bundled_manifests()


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "sfapprox", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("path", [p for p, c in COMMANDS if not hasattr(c, "list_commands")], ids=" ".join)
def test_each_example_runs(path, tmp_path):
    """Each example runs as shown (with --quiet and a few iterations), on the bundled manifests and on
    small files of the names it gives; those that download (batch, datasets fetch) are parsed only, and
    their manifest and entries must exist."""
    (words,) = examples(rendered_help(path))
    cwd = tmp_path / "repo"
    cwd.mkdir()
    args = _runnable(words, cwd)
    if args is None:
        from sfapprox.datasets.manifest import load_manifest

        _, rest = resolve(words)
        manifest = load_manifest(rest[0])  # (a bundled manifest's name)
        names = {entry.name for entry in manifest.entries}
        if "--only" in rest:
            assert set(rest[rest.index("--only") + 1].split(",")) <= names, (words, sorted(names))
        return
    done = _run(args, cwd)
    # datasets verify: 1 says some entries are absent (the empty --data-dir), which the test means
    assert done.returncode in ((0, 1) if path[-1:] == ["verify"] else (0,)), (args, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "error:" not in done.stderr, done.stderr


# ---------------------------------------------------------------------------- 3. options and defaults
def test_every_option_and_argument_says_what_it_does():
    for path, command in COMMANDS:
        for param in command.params:
            if not getattr(param, "hidden", False) and param.name not in ("help",):
                assert (getattr(param, "help", None) or "").strip(), f"'sfapprox {' '.join(path)}' {param.name}: no help"


def test_deprecated_names_are_hidden_and_say_what_replaces_them():
    """A renamed option's old name is left out of the help, and its (hidden) help names the new one."""
    hidden = [(path, p) for path, command in COMMANDS for p in command.params if getattr(p, "hidden", False)]
    assert hidden  # batch --out (--out-dir), batch --force (--redo)
    for path, param in hidden:
        text = rendered_help(path)
        for name in param.opts:
            new = re.search(r"Deprecated name of (--[\w-]+)", param.help or "")
            assert new and new.group(1) in text, (path, name, param.help)
            if name not in {n for p in resolve(["sfapprox", *path])[0].params if not getattr(p, "hidden", False)
                            for n in (*p.opts, *p.secondary_opts)}:
                assert not re.search(rf"^\s+(?:-\w, )?{re.escape(name)}(?![\w-])", text, re.M), (path, name)


@pytest.mark.parametrize("old, new, note", [(["--out", "runs"], ["--out-dir", "runs"], "--out is deprecated"),
                                            (["--force"], ["--redo"], "batch --force is deprecated")])
def test_a_deprecated_name_still_works_with_its_note(old, new, note, tmp_path):
    """batch's old names run as the new ones do, and say so (a batch of one small entry)."""
    base = ["batch", "synthetic", "--only", "random-sparse-64", "--methods", "tsvd"]
    args = base + (["--out-dir", str(tmp_path / "runs")] if "--out" not in old else []) + \
        [str(tmp_path / w) if w == "runs" else w for w in old]
    done = _run(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert note in " ".join(done.stderr.split()) and (tmp_path / "runs" / "results.jsonl").is_file()


def _api_defaults() -> dict[str, object]:
    """What the library uses where an option is left out, read from its own signatures and settings."""
    from sfapprox import ChordSF, FitSettings, LoadOptions, compare
    from sfapprox.datasets.batch import BatchOptions, run_batch
    from sfapprox.plotting import plot_comparison

    def default(func, name):
        return inspect.signature(func).parameters[name].default

    sf = ChordSF()
    return {
        "--methods": ",".join(default(compare, "methods")), "--budget": default(compare, "budget"),
        "--count-indices": "count-indices" if default(compare, "count_indices") else "no-count-indices",
        "--seed": FitSettings().seed, "--device": FitSettings().device, "--mirror": LoadOptions().mirror,
        "--ftol": sf.ftol, "--gtol": sf.gtol, "--init": sf.init, "--support": sf.support, "--base": sf.base,
        "--plot-scale": default(plot_comparison, "scale"), "--protocol": BatchOptions().protocol,
        "--jobs": default(run_batch, "jobs"), "--executor": default(run_batch, "executor"),
    }


def test_the_defaults_the_help_shows_are_the_library_s():
    """Every ``[default: X]`` of every command's help is what the library uses when the option is left out
    (an option whose default the help shows must have its library counterpart here)."""
    api = _api_defaults()
    from sfapprox.datasets.batch import BatchOptions

    batch = BatchOptions()
    api_batch = {"--methods": ",".join(batch.methods), "--budget": batch.budget}
    for path, command in COMMANDS:
        ctx = command.context_class(command, info_name=command.name)
        for param in command.params:
            record = param.get_help_record(ctx)  # (names, help) as --help draws them
            shown = record and re.search(r"\[default: ([^;\]]+)", record[1])
            if not shown:
                continue
            name = param.opts[0]
            expected = (api_batch if path == ["batch"] else {}).get(name, api.get(name, "(no library default)"))
            assert shown.group(1) == str(expected), (
                f"'sfapprox {' '.join(path)} --help': {name} shows {shown.group(1)}, the library uses {expected}")
    assert "[default: 1e-10" in " ".join(rendered_help(["fit"]).split())  # (what the records above are)


def test_the_defaults_said_in_words_are_the_library_s():
    """--iters and --time-limit say their defaults in their text: those of the estimator and its settings."""
    from sfapprox import ChordSF

    text = " ".join(rendered_help(["fit"]).split())
    assert f"(default {ChordSF().max_iter})" in text
    assert f"Default: {ChordSF().time_limit:g} for one method" in text


# ---------------------------------------------------------------------------- 2. narrow and wide windows
def _check_drawn(path: list[str], text: str, width: int | None) -> None:
    where = f"'sfapprox {' '.join(path)} -h' at {width} columns"
    assert not RAW_MARKUP.search(text), (where, RAW_MARKUP.findall(text))
    assert not PLACEHOLDER.search(text), (where, PLACEHOLDER.findall(text))
    command = resolve(["sfapprox", *path])[0]
    for param in command.params:  # every option name whole, on one line; an argument as the usage names it
        names = (param.metavar or param.name.upper(),) if param.param_type_name == "argument" else (*param.opts, *param.secondary_opts)
        for name in () if getattr(param, "hidden", False) else names:
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), (where, name)
    if width is not None:
        assert max(map(len, text.splitlines())) <= width, where
    assert examples(text) == examples(rendered_help(path)), where  # the example copies as the same command


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "sfapprox")
def test_help_reads_whole_in_a_terminal_and_through_a_pipe(path):
    """``-h`` at 40, 80 and 200 columns on a (pseudo-)terminal and through a pipe: no rich markup shown
    as text, no placeholder left (typer's usage wrote ``{path}``), every option name whole, no line past the
    window, and the example the same command however it is broken.  (At 40 columns on a terminal it is the
    screen of ``--help``, the same help, that test_cli_terminal's narrow-window test reads too: drawn once.)"""
    for columns in (40, 80, 200):
        code, screen = screen_of([*path, "--help" if columns == 40 else "-h"], columns=columns, timeout=60)
        text = plain(screen.replace("\r\n", "\n"))  # (the terminal's line ends)
        assert code == 0, text
        _check_drawn(path, text, columns)
    for columns in (40, 200):
        env = {**os.environ, "COLUMNS": str(columns)}
        done = subprocess.run([sys.executable, "-m", "sfapprox", *path, "-h"], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=60)
        assert done.returncode == 0 and not done.stderr, done.stderr
        _check_drawn(path, done.stdout, max(columns, 30))


def test_the_usage_line_names_an_argument_as_click_does():
    """Typer wrote ``Usage: sfapprox datasets list [OPTIONS] {manifest}``, a placeholder left unfilled to the eye;
    the usage line and the error for a missing argument name it as click and man pages do."""
    text = rendered_help(["datasets", "verify"])
    assert text.startswith("Usage: ") and text.splitlines()[0].endswith("[OPTIONS] MANIFEST")
    assert rendered_help(["datasets", "list"]).splitlines()[0].endswith("[OPTIONS] [MANIFEST]")  # (optional)
    res = CliRunner().invoke(app, ["fit"])
    assert res.exit_code == 2 and "Missing argument 'PATH'" in res.output, res.output


# ---------------------------------------------------------------------------- 4. the listings
@pytest.mark.parametrize("listing", ["methods", "formats"])
def test_a_listing_is_cut_neither_on_a_terminal_nor_through_a_pipe(listing):
    """``methods`` and ``formats`` at 80 columns on a terminal: every line within the window and every
    row's name shown; through a pipe, each row whole on one line, however wide (never cut to 80)."""
    from sfapprox import describe

    table = (describe.describe_methods() if listing == "methods" else describe.describe_formats()).tables[0]
    code, screen = screen_of([listing], columns=80, timeout=60)  # (methods: test_cli_terminal's listing test's)
    text = plain(screen)
    assert code == 0 and max(map(len, text.splitlines())) <= 80
    first = table.columns[0].key
    for row in table.rows:
        assert re.search(rf"^{re.escape(row[first])}\s", text, re.M), row[first]
    # a pipe whose COLUMNS is not set (as a shell leaves it): rich's 80 columns would apply
    done = subprocess.run([sys.executable, "-m", "sfapprox", listing], capture_output=True, text=True, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, timeout=60)
    assert done.returncode == 0
    first_table = done.stdout.split("└")[0]
    drawn = [line for line in first_table.splitlines() if line.startswith("│")]  # its rows
    assert [line.split("│")[1].strip() for line in drawn] == [row[first] for row in table.rows], drawn
    assert max(map(len, drawn)) > 80  # each row whole on its line, as wide as it is


@pytest.mark.parametrize("path", [p for p, c in COMMANDS if not hasattr(c, "list_commands")], ids=" ".join)
def test_an_example_copies_as_one_command_in_a_narrow_window(path):
    """At 40 columns batch's example was wrapped as prose: "--data-dir" ended a line and its folder began the
    next, and the lines pasted ran a command without its value.  Broken with the shell's `` \\`` now, the
    lines pasted are the one command the wide help shows."""
    narrow = rendered_help(path, 40)
    assert examples(narrow) == examples(rendered_help(path, 200))
    lines = narrow.split("Example:", 1)[1].split("\n\n", 1)[0].splitlines()
    assert all(line.endswith(" \\") for line in lines[1:-1]), lines
