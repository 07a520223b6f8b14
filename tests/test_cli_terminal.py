"""The CLI where users run it: a real (pseudo-)terminal, a narrow window, a dumb terminal, a pipe.

Typer's test runner gives the commands no terminal, so the progress bars never
drew there; these tests start ``python -m sfapprox`` on a pseudo-terminal of a
given width, as a person's shell would, and read what it shows.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import json
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from rich.cells import cell_len
from sfapprox._display import TINY_PROGRESS

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-JL-Za-z]|\x1b\][^\x07]*\x07")
REDRAW = re.compile(r"\x1b\[[0-9]*K|\r")  # a progress bar redrawing its line


def run_in_terminal(args, *, columns: int = 80, env: dict | None = None, timeout: float = 120) -> tuple[int, str]:
    """Run ``python -m sfapprox ARGS`` with stdin, stdout and stderr on a pseudo-terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    environment.update({"TERM": "xterm-256color", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "sfapprox", *map(str, args)], stdin=slave, stdout=slave,
                            stderr=slave, env=environment, cwd=ROOT, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    else:
        proc.kill()
        pytest.fail(f"sfapprox {' '.join(map(str, args))} did not finish in {timeout} s")
    os.close(master)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


#: The screens of commands that write nothing (help, listings), by (args, columns, env): each is drawn once
#: a session and read by every test that checks something of it (a start of ``python -m sfapprox`` costs
#: 0.5-2 s, several of these tests asked for the same screen).
_SCREENS: dict[tuple, tuple[int, str]] = {}


def screen_of(args, *, columns: int = 80, env: dict | None = None, timeout: float = 120) -> tuple[int, str]:
    """``run_in_terminal(args, ...)``'s answer, run once a session: for a command that writes no file."""
    key = (tuple(map(str, args)), columns, tuple(sorted((env or {}).items())))
    if key not in _SCREENS:
        _SCREENS[key] = run_in_terminal(args, columns=columns, env=env, timeout=timeout)
    return _SCREENS[key]


def plain(text: str) -> str:
    """The screen's text without colour and cursor codes, each redraw of a line on a line of its own."""
    return ANSI.sub("", REDRAW.sub("\n", text))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("terminal") / "graph.mtx"
    rng = np.random.default_rng(0)
    A = (rng.random((24, 24)) < 0.2) * rng.random((24, 24))
    scipy.io.mmwrite(path, A)
    return path


FIT = ("--iters", "300", "--time-limit", "5", "--device", "cpu")


@pytest.mark.parametrize("command", ["compare", "fit", "sweep"])
def test_fitting_commands_draw_progress_and_finish(matrix, tmp_path, command):
    args = {"compare": ["compare", matrix, "--methods", "sf,tsvd"],
            "fit": ["fit", matrix, "--out", tmp_path / "f.h5"],
            "sweep": ["sweep", matrix, "--methods", "sf,tsvd", "--budgets", "0.5,0.9"]}[command]
    code, screen = run_in_terminal([*args, *FIT])
    text = plain(screen)
    assert code == 0, text
    assert "Traceback" not in text and "Error" not in text
    assert "\x1b[" in screen  # it drew for a terminal: colours and the progress bar
    assert ("fro_error" if command == "fit" else "tsvd") in text
    for line in text.splitlines():
        assert cell_len(line) <= 80, line  # the next command too (it went on past the edge)
    if command == "fit":
        assert (tmp_path / "f.h5").is_file()


def test_batch_in_a_terminal(tmp_path):
    matrix = tmp_path / "m.npy"
    np.save(matrix, np.random.default_rng(1).random((16, 16)))
    manifest = tmp_path / "one.toml"
    manifest.write_text('[[matrix]]\nname = "m"\ncategory = "other"\nfile = "m.npy"\n')
    code, screen = run_in_terminal(["batch", manifest, "--out-dir", tmp_path / "out", "--methods", "sf,tsvd", *FIT])
    text = plain(screen)
    assert code == 0, text
    assert "Traceback" not in text and (tmp_path / "out" / "results.jsonl").is_file()


@pytest.mark.parametrize("env", [{"TERM": "dumb"}, {"NO_COLOR": "1"}])
def test_dumb_and_colourless_terminals(matrix, env):
    code, screen = run_in_terminal(["compare", matrix, "--methods", "sf,tsvd", *FIT], env=env)
    assert code == 0, plain(screen)
    assert "Traceback" not in screen and "tsvd" in screen
    if "NO_COLOR" in env:
        assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", screen)  # no foreground colours


def test_quiet_in_a_terminal_draws_no_bar(matrix):
    code, screen = run_in_terminal(["compare", matrix, "--methods", "sf,tsvd", "--quiet", *FIT])
    assert code == 0, plain(screen)
    assert "━" not in screen.split("method")[0]  # no bar before the table


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_listings_keep_their_names_in_narrow_windows(columns):
    from sfapprox._base import methods

    code, screen = screen_of(["methods"], columns=columns, timeout=60)
    text = plain(screen)
    assert code == 0, text
    for name in methods():
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), f"{name} missing at {columns} columns:\n{text}"
    assert max(map(cell_len, text.splitlines())) <= columns


@pytest.mark.parametrize("columns", [30, 40])
def test_a_listing_folds_long_paths_never_cuts_them(columns):
    """At 40 columns 'datasets list' showed pajek/world_trade.paj as 'pajek/world_trade.p' (rich cropped the
    cell); now a path too wide for the window continues on the next line."""
    import tomllib

    manifest = ROOT / "sfapprox" / "datasets" / "manifests" / "paper-table1.toml"
    code, screen = run_in_terminal(["datasets", "list", manifest], columns=columns, timeout=60)
    text = plain(screen)
    assert code == 0, text
    lines = [line for line in text.splitlines() if line.strip()]
    header = next(n for n, line in enumerate(lines) if re.match(r"name\s+file\b", line))
    at = lines[header].index("file")
    body = itertools.takewhile(lambda line: not line.startswith("Sparse"), lines[header + 2:])
    joined = "".join(line[at:].strip() for line in body)  # the file column, its folded pieces joined
    for entry in tomllib.loads(manifest.read_text(encoding="utf-8"))["matrix"]:
        if "file" in entry:
            assert entry["file"] in joined, f"{entry['file']} cut at {columns} columns:\n{text}"
    assert max(map(cell_len, text.splitlines())) <= columns


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_a_listing_s_names_stay_whole_in_every_part(columns):
    """At 40 columns 'datasets list' showed lowrank-sparse-noisy-128 as 'lowrank-sparse-noisy-1' / '28' in
    all three parts: the name column, one width in every part, was narrowed for the path beside it in the
    third.  The path folds first now: every name is whole, on its row's line, in each part."""
    import tomllib

    manifest = ROOT / "sfapprox" / "datasets" / "manifests" / "synthetic.toml"
    code, screen = run_in_terminal(["datasets", "list", manifest], columns=columns, timeout=60)
    text = plain(screen)
    assert code == 0, text
    names = [entry["name"] for entry in tomllib.loads(manifest.read_text(encoding="utf-8"))["matrix"]]
    parts = text.count("(continued)") + 1
    for name in names:
        rows = re.findall(rf"^{re.escape(name)}(?:\s|$)", text, re.M)
        assert len(rows) == parts, f"{name} broken at {columns} columns:\n{text}"
    assert max(map(cell_len, text.splitlines())) <= columns


def test_info_table_keeps_names_and_budgets_at_80_columns(matrix):
    from sfapprox._base import methods

    code, screen = run_in_terminal(["info", matrix], columns=80, timeout=60)
    text = plain(screen)
    assert code == 0, text
    for name in methods():
        # the name, its formula, and its smallest budget (a count, or "never")
        assert re.search(rf"^{re.escape(name)}\s+\S+.*\s([\d,]+|never)\s", text, re.M), f"{name}:\n{text}"
    assert max(map(cell_len, text.splitlines())) <= 80


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_info_keeps_a_path_and_a_digest_whole_on_one_line(columns):
    """At 40 columns info's table broke the path inside its cell ("examples/mesh_sma" / "ll.mtx") and the
    sha256 over four lines: copied, each came out in pieces.  The key column narrows for the path; the
    digest, wider than any room beside the keys, has a line of its own under the table."""
    import hashlib

    path = "examples/mesh_small.mtx"
    digest = hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
    code, screen = screen_of(["info", path], columns=columns, timeout=60)
    text = plain(screen)
    assert code == 0, text
    lines = text.splitlines()
    assert any(re.search(rf"(^|[\s│|]){re.escape(path)}([\s│|]|$)", line) for line in lines), text
    assert any(re.search(rf"(^|[\s│|]){digest}([\s│|]|$)", line) for line in lines), text
    assert all(cell_len(line) <= columns for line in lines if digest not in line), text
    assert "1,920" in text and "mesh_small" in text  # (the tables after it)


def test_info_at_80_columns_keeps_its_keys_on_one_line_and_the_digest_under_the_table():
    """At 80 columns the key column narrowed to 9 cells so that the sha256 sat beside it: "TSVD rank at that
    budget" on 3 lines, and 5 other keys on 2, a table 10 lines longer than with the digest under it."""
    import hashlib

    path = "examples/mesh_small.mtx"
    digest = hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
    code, screen = screen_of(["info", path], columns=80, timeout=60)
    lines = plain(screen).splitlines()
    assert code == 0, lines
    for key in ("TSVD rank at that budget", "SF stored numbers N·K·M", "SF offsets (K)", "stored entries"):
        assert any(f"│ {key} " in line for line in lines), (key, lines)  # whole, on one line
    assert "  " + digest in lines and any("│ sha256 " in line and "see below" in line for line in lines), lines


@pytest.fixture(scope="module")
def info_inputs(tmp_path_factory) -> dict[str, list]:
    """``info``'s three kinds of input: a matrix file, a saved fit and a kernel over a points table."""
    fit = tmp_path_factory.mktemp("info") / "fit.h5"
    subprocess.run([sys.executable, "-m", "sfapprox", "fit", "examples/mesh_small.mtx", "--iters", "3", "--device",
                    "cpu", "--out", str(fit)], cwd=ROOT, check=True, capture_output=True, timeout=120)
    return {"matrix": ["examples/mesh_small.mtx"], "fit": [fit], "kernel": ["examples/features.csv", "--kernel", "rbf"]}


@functools.cache
def _piped_info(args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """``info ARGS`` piped at 400 columns, run once a session: the three widths' tests of an input compare
    their screens with the same facts."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([sys.executable, "-m", "sfapprox", "info", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**env, "COLUMNS": "400"}, timeout=120)


def _facts(args: list) -> list[tuple[str, str]]:
    """``info``'s facts as (key, value), read from its table piped at a width that fits them on one line each."""
    done = _piped_info(tuple(map(str, args)))
    assert done.returncode == 0, done.stderr
    rows = []
    for line in done.stdout.split("\n\n")[0].splitlines():  # the facts' table, the first
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) == 4 and cells[1]:
            rows.append((cells[1], cells[2]))
    assert len(rows) > 5, done.stdout
    return rows


@pytest.mark.parametrize("kind", ["matrix", "fit", "kernel"])
@pytest.mark.parametrize("columns", [20, 40, 80])
def test_info_facts_read_whole_at_20_40_and_80_columns(info_inputs, kind, columns):
    """At 20 columns info's table had every value's cell saying "see below" (the keys and the word beside them
    left no room), then listed them under it, where "min -1, max 4, ‖X‖_F 35.33" went past the window's edge
    for the terminal to cut mid-word.  Where no value fits beside the keys the facts are a list, key then value,
    each broken at spaces; every value is there whole at each width, and a line wider than the window is one
    word (a digest, a path) only."""
    args = info_inputs[kind]
    facts = _facts(args)
    code, screen = screen_of(["info", *args], columns=columns, timeout=120)
    text = plain(screen)
    assert code == 0, text
    facts_part = text.split("note:")[0].split(" where each")[0]  # before the methods' table
    lines = facts_part.splitlines()
    if columns == 20:
        assert "see below" not in facts_part, facts_part
        flat = " ".join(facts_part.split())
        for key, value in facts:
            assert f"{' '.join(key.split())}: {' '.join(value.split())}" in flat, (key, value, facts_part)
    else:
        words = set(re.sub(r"[│┌┐└┘├┤─┬┴┼]", " ", facts_part).split())
        assert all(word in words for _, value in facts for word in value.split() if value != "see below"), facts_part
        assert facts_part.count("see below") < len(facts) // 2, facts_part
    assert all(cell_len(line) <= columns or len(line.split()) == 1 for line in lines), facts_part


def test_info_lists_the_methods_where_their_names_cannot_be_whole():
    """At 20 columns info's second table ("where each method applies") broke each method's name into 4-cell
    pieces in each of its three parts ("sf-s" / "ymme" / "tric"), its formula beside them in pieces too. It is
    a list there, as the facts are: each name whole on a line of its own, what it stores and its smallest
    budget under it, no line past the window but a single word."""
    from sfapprox._base import methods

    columns = 20
    code, screen = run_in_terminal(["info", "examples/mesh_small.mtx"], columns=columns, timeout=60)
    text = plain(screen)
    assert code == 0, text
    listed = re.split(r"where\s+each", text)[1]  # (the title broken at spaces)
    lines = listed.splitlines()
    for name in methods():
        assert f"{name}:" in lines, (name, listed)
    flat = " ".join(listed.split())
    assert "sf: stores: N·K·M smallest budget: 1,920" in flat and "sf-symmetric: stores: N·K′·M" in flat
    assert "(continued)" not in listed and "left out" not in listed
    assert all(cell_len(line) <= columns or len(line.split()) == 1 for line in lines), listed


def test_piped_tables_are_as_wide_as_their_content(matrix):
    done = subprocess.run([sys.executable, "-m", "sfapprox", "methods"], capture_output=True, text=True, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == 0
    widest = max(len(line.rstrip()) for line in lines)
    assert all(len(line) <= widest + 1 for line in lines)  # no padding to an assumed width
    assert any("monarch+lr" in line and "Monarch plus low rank" in line for line in lines)  # nothing wrapped


def _imported_modules(*argv: str) -> set[str]:
    code = ("import sys\nfrom sfapprox.cli import main\nsys.argv = ['sfapprox', *%r]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('MODULES', ' '.join(sorted(sys.modules)))" % (argv,))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    line = next(l for l in done.stdout.splitlines() if l.startswith("MODULES"))
    return set(line.split()[1:])


@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("compare", "--help"), ("compar",), ("fit",)])
def test_starting_the_cli_loads_no_heavy_library(argv):
    # --help, --version and usage errors answer at once: torch, numba, numpy and scipy load
    # only when a command does work (benchmarks/startup.py times it).
    loaded = _imported_modules(*argv)
    assert not {"torch", "numba", "numpy", "scipy", "h5py", "matplotlib"} & loaded, argv


@pytest.mark.parametrize("argv", [("info", "examples/mesh_small.mtx"), ("methods",), ("formats",),
                                  ("compare", "examples/mesh_small.mtx", "--methods", "tsvd,sparse,monarch", "--quiet"),
                                  ("compare", "examples/mesh_small.mtx", "--methods", "rsvd,nystrom", "--quiet")])
def test_work_without_sf_loads_no_torch(argv):
    # torch (1-2 s to import) loads with SF's estimator, not with the method registry: info and a
    # comparison of baselines that use no torch answered a second or more later for it; numba loads
    # with the first compiled kernel, pooch with a download (benchmarks/startup.py times these commands)
    loaded = _imported_modules(*argv)
    assert not {"torch", "numba", "triton", "pooch"} & loaded, argv
    assert argv[0] == "formats" or "sfapprox.sf.methods" in loaded, argv  # (the registry was asked)


def test_the_bar_names_the_method_being_fitted_then_the_scoring():
    """Closed-form methods report no iterations: the bar names each method as it starts and as the previous
    one ends (in the fitting order, closed-form first), then "scoring"; a sweep starts again at each budget.
    Nothing is named before the first method starts: a kernel's matrix formed for 27 s under "tsvd"."""
    from types import SimpleNamespace

    from sfapprox._display import method_announcer

    shown = []
    bar = SimpleNamespace(describe=shown.append)
    row = lambda m: SimpleNamespace(method=m)  # noqa: E731
    on_result = method_announcer(bar, ["sf", "tsvd", "sparse"])
    assert shown == []
    for m in ("tsvd", "sparse", "sf"):
        on_result.starting(m)
        on_result(row(m))
    assert shown == ["tsvd", "sparse", "sparse", "sf", "sf", "scoring"]


def test_a_sweep_s_bar_names_the_budget_then_its_methods_then_its_scoring():
    """A sweep's bar named the method alone, the same at every budget, and (the methods cycling) a budget's
    scoring pass from columns under the next budget's first method: "budget 2/10 (18,000)" now stands
    before the method, each budget starts the methods again and ends in "scoring"."""
    from types import SimpleNamespace

    from sfapprox._display import method_announcer

    shown = []
    bar = SimpleNamespace(describe=lambda what: shown.append(what), relabel=lambda what: shown.append(f"[{what}]"))
    row = lambda m: SimpleNamespace(method=m)  # noqa: E731
    on_result = method_announcer(bar, ["sf", "tsvd"])
    for value, index in ((18_000, 1), (36_000, 2)):
        on_result.budget_starting(value, index, 2)
        for m in ("tsvd", "sf"):
            on_result.starting(m)
            on_result(row(m))
    assert shown == ["[budget 1/2 (18,000)]", "tsvd", "sf", "sf", "scoring",
                     "[budget 2/2 (36,000)]", "tsvd", "sf", "sf", "scoring"]


def test_key_value_values_wrap_in_a_narrow_window_never_cut():
    """At 20-40 columns info cut values to '0.993…' and the sha256 to '03d2abce5a925517…'."""
    import io

    from rich.console import Console

    from sfapprox.cli._render import key_value_table

    digest = "03d2abce5a9255170f7f1b6b0c7a7b3a2e7c5b3e58f1c0a4d5e6f7a8b9c0d1e2"
    buf = io.StringIO()
    Console(file=buf, width=30, color_system=None).print(key_value_table("t", [("sha256", digest), ("rel", "0.99312345")]))
    text = buf.getvalue()
    assert "…" not in text
    cells = "".join(line.split("│")[2].strip() for line in text.splitlines() if line.count("│") == 3)
    assert digest in cells and "0.99312345" in cells


@pytest.mark.parametrize("args, message", [
    (["fit", "{matrix}", "--ftol", "-1"], re.escape("error: Invalid value for '--ftol': ")),
    (["fit", "{matrix}", "--time-limit", "nan"],
     re.escape("error: Invalid value for '--time-limit': must be a number, not NaN ")),
    # click's wording: typer 0.19-0.2x (pyproject allows 0.19) uses click's "argument" and 'PATH', newer
    # typer its own copy of click's "argument(s)" and 'path'
    (["methods", "extra"], r"error: Got unexpected extra argument(\(s\))? \(extra\) \(see '"),
    (["fitt"], re.escape("error: No such command 'fitt'.")),
    (["fit"], r"error: Missing argument '(path|PATH)'\. \(see '"),
    # click's parser raises these without a context: they named no help
    (["compare", "{matrix}", "--methods"], re.escape("error: Option '--methods' requires an argument. (see '")),
    (["datasets", "list", "--data-dir"], re.escape("error: Option '--data-dir' requires an argument. (see '")),
    (["fit", "{matrix}", "--quiet=yes"], re.escape("error: Option '--quiet' does not take a value. (see '")),
])
def test_a_usage_error_is_one_line(matrix, args, message):
    """A bad option or argument is one line and exit code 2, as every other error (it was a boxed
    "Usage: ... Try ... --help" block of four lines)."""
    done = subprocess.run([sys.executable, "-m", "sfapprox", *[a.format(matrix=matrix) for a in args]],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and re.match(message, done.stderr), done.stderr
    assert done.stderr.rstrip().endswith("--help')")  # where the command's help is


@pytest.mark.parametrize("args, message", [
    (["compare", "{matrix}", "--methods", "tsvd", "--save-factors", ""], "error: --save-factors: an empty value "),
    (["compare", "", "--methods", "tsvd"], "error: an empty argument after compare "),
    (["fit", "{matrix}", "--iters", "3", "--json="], "error: --json: an empty value "),
    (["datasets", "list", ""], "error: an empty argument after datasets list "),
    # after a flag, an argument of its own (it was "--quiet: an empty value": --quiet takes none)
    (["fit", "{matrix}", "--quiet", ""], "error: an empty argument after fit "),
    (["compare", "{matrix}", "--no-count-indices", ""], "error: an empty argument after compare "),
])
def test_an_empty_value_is_refused_never_read_as_the_current_folder(matrix, tmp_path, args, message):
    """``--save-factors "$DIR"`` with ``DIR`` unset wrote the fits into the current folder ("" is a path
    to "."); an empty matrix name was "a folder"."""
    done = subprocess.run([sys.executable, "-m", "sfapprox", *[a.format(matrix=matrix) for a in args]],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and list(tmp_path.iterdir()) == []
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(message), done.stderr
    assert "(an unset shell variable?)" in done.stderr


@pytest.mark.parametrize("args, command", [
    (["sweep", "{matrix}", "--budgets="], "sweep"),
    (["--debug", "compare", "{matrix}", "--plot", ""], "compare"),
    (["datasets", "verify", "paper-table1", "--data-dir="], "datasets verify"),
    (["datasets", "list", ""], "datasets list"),
    ([""], ""),
])
def test_an_empty_value_names_the_help_of_its_command(matrix, tmp_path, args, command):
    """The refusal of an empty value named the group's help ("see 'sfapprox --help'"), which lists no
    ``--budgets`` or ``--data-dir``: it names the command's, as click's own usage errors do."""
    done = subprocess.run([sys.executable, "-m", "sfapprox", *[a.format(matrix=matrix) for a in args]],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "(an unset shell variable?)" in done.stderr
    assert done.stderr.rstrip().endswith(f"sfapprox{' ' * bool(command)}{command} --help')"), done.stderr


@pytest.fixture(scope="module")
def narrow_progress(matrix, tmp_path_factory):
    """``narrow_progress(command, columns)``: the screen of ``fit`` or ``compare --methods sf`` on a matrix of
    a long name, iterating 2 s at ``columns``; each drawn once (the 40-column fit is read by both tests
    below: the numbers whole, the method named)."""
    named = tmp_path_factory.mktemp("narrow") / "a_graph_with_a_long_name.mtx"
    named.write_bytes(matrix.read_bytes())

    @functools.cache
    def screen(command: str, columns: int) -> tuple[int, str]:
        out = tmp_path_factory.mktemp("narrow_out") / "f.h5"
        args = {"fit": ["fit", named, "--out", out], "compare": ["compare", named, "--methods", "sf"]}[command]
        return run_in_terminal([*args, "--iters", "100000", "--time-limit", "2", "--device", "cpu"], columns=columns)

    return screen


@pytest.mark.parametrize("columns", [40, 30])
def test_a_narrow_window_cuts_the_labels_never_the_numbers(narrow_progress, columns):
    """At 40 columns the progress line read "it 7… error 6…" at iteration 7,429; now the label and the
    phase give way, and the iteration, the error and the time stay whole (at 30 the time read "0:0":
    there the numbers alone are shown)."""
    code, screen = narrow_progress("fit", columns)
    assert code == 0, plain(screen)
    whole = re.compile(r"it (\d+) +error (\d+\.\d+|–) +\d+:\d\d:\d\d")
    lines = [line for line in plain(screen).splitlines() if re.search(r"(^| )it \d", line) and "error" in line]
    assert lines and all(whole.search(line) for line in lines), lines[:3]
    assert all(cell_len(line) <= columns for line in lines)
    assert columns < TINY_PROGRESS or all(not line.startswith("it ") for line in lines)  # the label where it fits


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_a_narrow_progress_line_names_the_method(narrow_progress, command):
    """At 40 columns the label and the phase had 4 columns each, the phase's kept while it was empty: fit's
    line read "SF …" and compare's "a_g…", the method never shown.  The label goes first now ("SF a_gra…",
    "a_gra… sf": the matrix's name is cut, never the method), the phase has what is left or no column."""
    code, screen = narrow_progress(command, 40)
    text = plain(screen)
    assert code == 0, text
    lines = [line.rstrip() for line in text.splitlines() if re.search(r" it \d+ +error ", line)]
    assert lines and all(cell_len(line) <= 40 for line in lines), lines
    iterating = [line for line in lines if re.search(r" it [1-9]", line)]
    label = {"fit": r"^SF a_\S+ +it ", "compare": r"^a_\S+ sf +it "}[command]
    assert iterating and all(re.search(label, line) for line in iterating), lines


def _column_points(tmp_path) -> tuple[Path, int]:
    """A table of 300 points and a --max-memory that their kernel's fit from column blocks fits and its
    fit in memory does not (the path of a matrix too big to form, at a size a test affords)."""
    from sfapprox.chord import chord_offsets
    from sfapprox.sf import _columns
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET, estimate_fit_memory

    offsets = chord_offsets(300)
    limit = (_columns.column_fit_memory(300, 9, len(offsets), _columns.COLUMN_WIDTH) + LIBRARY_WORKING_SET
             + COMPILED_WORKING_SET + (1 << 20))
    assert estimate_fit_memory(300, 9, len(offsets), 8, 50, "cpu", reach=int(offsets.max()), n_starts=2,
                               input_bytes=8 * 300 * 300) > limit
    path = tmp_path / "points.csv"
    np.savetxt(path, np.random.default_rng(4).random((300, 3)), delimiter=",")
    return path, limit


def test_a_fit_from_columns_says_what_its_steps_are_never_start_columns(tmp_path):
    """Through a fit from column blocks the bar said "start columns" (no start has that name; that path is
    no start): it says the stage (Adam's steps here; L-BFGS by passes, rounds of sketches) and the passes
    over the columns so far.  Piped, the fit says no stage at all (a log gets no line per stage)."""
    points, limit = _column_points(tmp_path)
    # (1 s of Adam's steps is a hundred or more of them, each drawn: the fit need last no longer)
    args = ["fit", points, "--kernel", "rbf", "--max-memory", str(limit), "--time-limit", "1", "--init", "identity"]
    code, screen = run_in_terminal([*args, "--out", tmp_path / "f.h5"])
    text = plain(screen)
    assert code == 0, text
    assert "start columns" not in text and re.search(r"Adam steps, [0-9.,]+ passes +it [1-9]", text), text[-2000:]
    assert "column blocks" in text  # (the path it took)
    piped = subprocess.run([sys.executable, "-m", "sfapprox", *map(str, args), "--out", str(tmp_path / "g.h5")],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert not any(words in piped.stderr for words in ("Adam steps", "L-BFGS by passes", "rounds of sketches",
                                                       "start columns"))


def test_the_progress_line_names_a_column_fit_s_stage_and_passes():
    """The words beside the bar: a fit in memory's start, a fit from columns' stage and passes so far."""
    from sfapprox._display import progress_phase

    assert progress_phase({"start": "rank1"}) == "start rank1" and progress_phase({}) == ""
    assert progress_phase({"start": "columns", "stage": "adam", "epochs": 0.51}) == "Adam steps, 0.5 passes"
    assert progress_phase({"start": "columns", "stage": "sketch", "epochs": 3.0}) == "rounds of sketches, 3.0 passes"
    assert progress_phase({"start": "columns", "stage": "lbfgs", "epochs": 1234.4}) == "L-BFGS by passes, 1,234 passes"


def test_a_reader_that_closes_the_pipe_early_gets_a_closed_pipe_s_status_and_no_noise():
    """``sfapprox methods | head -1``: the reader went away; rich exited 1 (a failed check's status). Now
    141 (128 + SIGPIPE, as a Unix tool a closed pipe stops), and nothing on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "sfapprox", "methods"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # before it writes anything
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 141 and stderr == b""


@pytest.mark.parametrize("args", [["methods", "--json", "-"], ["compare", "{matrix}", "--methods", "tsvd", "--json", "-"],
                                  ["fit", "{matrix}", "--iters", "5", "--out", "-", "-q"]])
def test_machine_output_to_a_closed_pipe_is_a_closed_pipe_not_an_error(matrix, args):
    """``--json - | true`` ended with "error: Broken pipe" and exit 2; the table's path already gave 141.
    ``fit --out - | true`` (written through /dev/stdout) said "not written to this named pipe", exit 2."""
    proc = subprocess.Popen([sys.executable, "-m", "sfapprox", *[a.format(matrix=matrix) for a in args]], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 141 and b"error:" not in stderr, stderr


@pytest.mark.parametrize("args", [["sweep", "{matrix}", "--methods", "tsvd", "--budgets", "0.1", "--json", "-"],
                                  ["compare", "{matrix}", "--methods", "tsvd", "--csv", "-"]])
def test_machine_output_to_a_closed_stdout_is_refused_before_any_work(matrix, args):
    """``sfapprox sweep X --json - >&-`` ran the whole sweep, then ended in a traceback ('NoneType' object
    has no attribute 'write'): standard output was closed from the start, so it is refused at once."""
    proc = subprocess.run([sys.executable, "-m", "sfapprox", *[a.format(matrix=matrix) for a in args]], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                          preexec_fn=lambda: os.close(1))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "standard output is closed" in lines[0] and "Traceback" not in lines[0]


def test_tables_with_stdout_closed_go_to_stderr(matrix):
    """With stdout closed the sweep's table was printed nowhere and the command exited 0: a run's only
    result lost without a word.  It goes to stderr, as when stdout carries machine output."""
    proc = subprocess.run([sys.executable, "-m", "sfapprox", "sweep", str(matrix), "--methods", "tsvd", "--budgets",
                           "0.1", "-q"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                          preexec_fn=lambda: os.close(1))
    assert proc.returncode == 0 and "relative error by budget" in proc.stderr.decode(), proc.stderr


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_plot_to_a_dash_says_how_to_send_a_figure_to_stdout(matrix, command):
    """``--plot -`` said "cannot write a figure of type '(none)'", as if '-' were a file without a suffix."""
    proc = subprocess.run([sys.executable, "-m", "sfapprox", command, str(matrix), "--methods", "tsvd", "--plot", "-"],
                          cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"type '(none)'" not in proc.stderr, proc.stderr
    assert b"--plot /dev/stdout > plot.png" in proc.stderr and proc.stdout == b""


def _every_command() -> list[list[str]]:
    """The words that name each command of the CLI, the groups' and their commands' ([] for the app itself)."""
    import typer

    from sfapprox.cli import app

    found, todo = [], [([], typer.main.get_command(app))]
    while todo:
        words, command = todo.pop()
        found.append(words)
        if hasattr(command, "list_commands"):
            todo += [([*words, name], command.get_command(None, name)) for name in command.list_commands(None)]
    return sorted(found)


@pytest.mark.parametrize("args", [[*words, "--help"] for words in _every_command()], ids=" ".join)
def test_help_fits_a_narrow_window(args):
    """At 40 columns ``compare --help`` drew 250 lines up to 50 columns wide (click never draws help narrower
    than 50, and gives option names 30 of them), each broken in two by the terminal; now the help is as wide
    as the window, and a long option name has a line of its own.  An option with its choices wider than
    the window (``fit``'s ``--init auto|reference|identity|rank1|FILE``, 43 columns) and a program's name
    (``Usage: python -m sfapprox datasets verify``, 41) are wrapped at their spaces: every command's fits."""
    code, screen = screen_of(args, columns=40, timeout=60)  # (test_cli_help reads it too)
    text = plain(screen)
    assert code == 0, text
    lines = text.splitlines()
    assert max(map(cell_len, lines)) <= 40, [line for line in lines if cell_len(line) > 40][:3]
    if "compare" in args:
        assert re.search(r"^  --methods LIST\n+ +Comma-separated", text, re.M)  # name, then its description
    if args == ["fit", "--help"]:
        assert re.search(r"^  --init\n+    auto\|reference\|identity\|rank1\|FILE\n+ +Start:", text, re.M)


@pytest.mark.parametrize("args", [[*words, "--help"] for words in _every_command()], ids=" ".join)
def test_help_on_a_terminal_that_writes_ascii_only_is_spelled_in_ascii(args):
    """``--help`` under ``PYTHONIOENCODING=ascii``: click takes an ASCII stream for a mistake and wrote the help's
    ``N·K·M``, ``N²`` and ``−`` as UTF-8 all the same, mojibake on a terminal that shows ASCII only
    (``NÂ·KÂ·M``).  It is spelled in ASCII now, laid out on what it prints (the window's width kept)."""
    code, screen = run_in_terminal(args, columns=60, env={"PYTHONIOENCODING": "ascii"}, timeout=60)
    text = plain(screen)
    assert code == 0 and "Traceback" not in text, text[-2000:]
    assert screen.isascii(), sorted({c for c in screen if not c.isascii()})
    assert max(map(len, text.splitlines())) <= 60
    if args == ["fit", "--help"]:
        assert "N*K*M numbers" in text and "2*N*log2 N" in text and "{0} U {b^k < N}" in text


def test_help_under_the_c_locale_without_utf8_mode_is_ascii():
    """``LC_ALL=C`` where Python neither coerces the locale nor takes UTF-8 mode: stdout is ASCII, and ``-h``
    wrote UTF-8 there (a pipe, here: what a log of such a job holds)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("LANG", "LC_CTYPE", "PYTHONIOENCODING")}
    environment.update(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    done = subprocess.run([sys.executable, "-m", "sfapprox", "compare", "-h"], capture_output=True, cwd=ROOT,
                          env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii() and b"N^2" in done.stdout and not done.stderr


@pytest.mark.parametrize("args", [["methods"], ["info", "{matrix}"],
                                  ["compare", "{matrix}", "--methods", "tsvd,sparse", "--budget", "0.2"]])
def test_a_terminal_that_writes_ascii_only_gets_the_glyphs_spelled_out(matrix, args):
    """Under ``PYTHONIOENCODING=ascii`` every table ended in a UnicodeEncodeError (``‖X−X̂‖_F``, ``N²``, a
    formula's ``·``): now they are spelled in ASCII (``||X-X^||_F``), and the tables stay in line."""
    code, screen = run_in_terminal([a.format(matrix=matrix) for a in args], env={"PYTHONIOENCODING": "ascii"},
                                   timeout=120)
    text = plain(screen)
    assert code == 0 and "Traceback" not in text and "Error" not in text, text[-2000:]
    assert screen.isascii(), sorted({c for c in screen if not c.isascii()})
    if args[0] == "compare":
        header = next(line for line in text.splitlines() if "||X-X^||_F" in line)
        row = next(line for line in text.splitlines() if line.startswith("tsvd"))
        # laid out on the text it prints: the header's column rules where the row's are
        assert all(header[i] == "|" for i, c in enumerate(row) if c == "|"), (header, row)


@pytest.mark.parametrize("command", ["fit", "batch"])
def test_force_color_in_a_log_colours_it_but_draws_no_bar(matrix, tmp_path, command):
    """``FORCE_COLOR=1 sfapprox fit X 2> log`` (CI sets it for colours) drew the progress bar into the log, a
    line per refresh with the cursor hidden: rich takes FORCE_COLOR for a terminal.  The bar is for a
    terminal only; the log gets the one "optimizer running" line, as without FORCE_COLOR."""
    (tmp_path / "m.npy").write_bytes(b"")
    np.save(tmp_path / "m.npy", np.random.default_rng(1).random((16, 16)))
    (tmp_path / "one.toml").write_text('[[matrix]]\nname = "m"\ncategory = "other"\nfile = "m.npy"\n')
    args = {"fit": ["fit", matrix], "batch": ["batch", tmp_path / "one.toml", "--out-dir", tmp_path / "out",
                                              "--methods", "sf,tsvd"]}[command]
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "TTY_INTERACTIVE")}
    done = subprocess.run([sys.executable, "-m", "sfapprox", *map(str, args), *FIT], capture_output=True, text=True,
                          cwd=ROOT, env={**environment, "FORCE_COLOR": "1", "TERM": "xterm-256color"}, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "\x1b[?25l" not in done.stderr and "\r" not in done.stderr and "━━━━" not in done.stderr, done.stderr[:500]
    if command == "fit":
        assert "optimizer running" in done.stderr


def test_a_window_narrowed_during_the_fit_keeps_the_numbers_whole(monkeypatch):
    """Narrowed from 80 to 30 columns during a fit (SIGWINCH), the line kept its 80-column layout and read
    "start ide… it 33330  error 0." (the error cut, the time gone): it is laid out at each redraw."""
    import io

    from rich.console import Console

    from sfapprox.cli import _render

    console = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    monkeypatch.setattr(_render, "err", console)
    monkeypatch.setattr(_render, "draws_progress", lambda: True, raising=False)  # a StringIO is no terminal
    info = {"iteration": 7429, "max_iter": 100000, "fro_error": 0.3755, "elapsed": 1.0, "start": "identity"}
    with _render.fit_progress("SF a_matrix_with_a_long_name", 100000, False) as update:
        update(info)
        console.width = 30  # what rich reads again after a SIGWINCH
        update({**info, "iteration": 33330})
    drawn = [line for line in plain(console.file.getvalue()).splitlines() if "it 33330" in line]
    assert drawn and all(re.search(r"it 33330 +error 0\.3755 +0:00:\d\d$", line.rstrip()) for line in drawn), drawn
    assert all(cell_len(line) <= 30 for line in drawn)


def _drawn_progress(monkeypatch, width: int, reports: list[dict], timed: bool = False) -> list[str]:
    """The progress lines drawn for ``reports`` in a window ``width`` columns wide (``timed``: each drawn
    at its ``elapsed`` seconds of the bar's clock)."""
    import io

    from rich.console import Console

    from sfapprox import _display
    from sfapprox.cli import _render

    console = Console(file=io.StringIO(), force_terminal=True, width=width, color_system=None)
    monkeypatch.setattr(_render, "err", console)
    monkeypatch.setattr(_render, "draws_progress", lambda: True, raising=False)  # a StringIO is no terminal
    now = [0.0]
    if timed:
        console.get_time = lambda: now[0]  # (the bar's clock)
    # drawn at each report, not at the refresh thread's pace (a busy machine drew some reports never)
    redraw = _display._FitProgress.update
    monkeypatch.setattr(_display._FitProgress, "update", lambda self, *a, **kw: redraw(self, *a, **kw, refresh=True))
    with _render.fit_progress("SF a_matrix_with_a_long_name", 100000, False, time_limit=10) as update:
        for info in reports:
            now[0] = info["elapsed"]
            update(info)
    return [line.rstrip() for line in plain(console.file.getvalue()).splitlines() if re.search(r"(^| )it \d", line)]


@pytest.mark.parametrize("columns", [30, 40, 60])
@pytest.mark.parametrize("error", [0.00012345, 12345.6, 0.37551])
def test_five_digit_iterations_and_a_long_error_keep_the_time_whole(monkeypatch, columns, error):
    """At 30 columns "it 54321  error 0.0001234" left the elapsed time "0:00:0" (the numbers' fixed widths
    9 + 12 + 7 assumed shorter ones): a narrow window gets fewer of the error's digits, never a cut number."""
    from sfapprox.formats import fmt_number

    info = {"iteration": 54321, "max_iter": 100000, "fro_error": error, "elapsed": 1.0, "start": "identity"}
    lines = [line for line in _drawn_progress(monkeypatch, columns, [info]) if "it 54321" in line]
    assert lines, columns
    for line in lines:
        assert cell_len(line) <= columns, line
        found = re.search(r"it 54321 +error (\S+) +(\d+:\d\d:\d\d)$", line)
        assert found, line
        shown = found.group(1)
        assert shown in {fmt_number(error, digits) for digits in (1, 2, 3, 4)}, line  # the error, rounded
        assert float(shown) == pytest.approx(error, rel=0.5)


def test_a_wide_window_keeps_the_error_s_four_digits(monkeypatch):
    info = {"iteration": 54321, "max_iter": 100000, "fro_error": 0.00012345, "elapsed": 1.0}
    lines = [line for line in _drawn_progress(monkeypatch, 100, [info]) if "it 54321" in line]
    assert lines and all("error 0.0001234 " in line for line in lines), lines


def test_the_elapsed_time_goes_on_after_the_bar_fills(monkeypatch):
    """The bar fills at the time limit (or max_iter); the fit goes on past it (the limit leaves out the
    compiling and the scoring) and compare's methods after it: rich's elapsed column stopped at the second the
    bar filled, and showed it for the rest of the run."""
    reports = [{"iteration": iteration, "max_iter": 100000, "fro_error": 0.5, "elapsed": seconds}
               for seconds, iteration in ((0.0, 0), (12.0, 30), (25.0, 40), (75.0, 50))]
    lines = _drawn_progress(monkeypatch, 100, reports, timed=True)
    last = [line for line in lines if "it 50 " in line]
    assert last and all(line.endswith("0:01:15") for line in last), lines


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="the bytes read are told from Linux's /proc")
def test_the_bytes_read_of_a_file_are_those_its_open_reader_has_read(tmp_path):
    from sfapprox.cli._render import bytes_read

    path = tmp_path / "big.mtx"
    path.write_bytes(b"x" * 10_000)
    assert bytes_read(path) is None  # not open
    with open(path, "rb", buffering=0) as fh:
        fh.read(1234)
        assert bytes_read(path) == 1234


def test_reading_a_file_shows_its_name_and_the_bytes_read_of_its_size(monkeypatch, tmp_path):
    """A 237 MB .mtx took 7 s with nothing on the screen (info, compare, fit): it reads as a hang."""
    import io

    from rich.console import Console

    from sfapprox.cli import _render

    console = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    monkeypatch.setattr(_render, "err", console)
    path = tmp_path / "graph.mtx"
    path.write_bytes(b"x" * 300_000)
    monkeypatch.setattr(_render, "bytes_read", lambda p: 100_000)
    line = _render._ReadingLine(path)
    line.show()  # (what the redraw thread calls, after half a second)
    line.close()
    drawn = plain(console.file.getvalue())
    assert re.search(r"reading graph\.mtx .*97\.7 KiB of 293\.0 KiB", drawn), drawn
    monkeypatch.setattr(_render, "bytes_read", lambda p: None)  # not told: the size alone
    assert line.amount() == "293.0 KiB"


def test_the_cli_draws_its_progress_where_the_library_does(monkeypatch):
    """One decision (``_display.draws_bar``): the CLI run in a notebook's kernel draws its line there, as a
    fit with progress=True does (the CLI's own test knew terminals only and drew nothing); a pipe or a
    file draws none, nor a notebook without ipywidgets."""
    import importlib.util
    import io

    from rich.console import Console

    from sfapprox.cli import _render

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())  # ipywidgets installed
    monkeypatch.setattr(_render, "err", Console(file=io.StringIO(), force_jupyter=True))
    assert _render.draws_progress()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ipywidgets" else object())
    with pytest.warns(UserWarning, match="pip install ipywidgets") as said:
        assert not _render.draws_progress()
    # in the CLI's words: progress=True is the library's keyword, no option the user typed
    assert [str(w.message) for w in said] == [_render.NO_WIDGETS] and "progress=" not in _render.NO_WIDGETS
    monkeypatch.setattr(_render, "err", Console(file=io.StringIO(), force_terminal=True))  # (not a tty)
    assert not _render.draws_progress()


def test_reading_shows_nothing_when_quiet_or_piped(monkeypatch, tmp_path):
    import threading

    from sfapprox.cli import _render

    started = []
    monkeypatch.setattr(_render, "_ReadingLine", lambda path: started.append(path))
    monkeypatch.setattr(threading, "Thread", lambda *a, **kw: pytest.fail("a drawing thread started"))
    monkeypatch.setattr(_render, "draws_progress", lambda: False)  # piped
    with _render.reading_progress(tmp_path / "m.mtx"):
        pass
    monkeypatch.setattr(_render, "draws_progress", lambda: True)
    with _render.reading_progress(tmp_path / "m.mtx", quiet=True):
        pass
    assert started == []


@pytest.mark.parametrize("command, quiet", [("info", False), ("compare", True), ("fit", False), ("sweep", True)])
def test_every_command_reads_its_matrix_under_the_reading_line(monkeypatch, matrix, tmp_path, command, quiet):
    import contextlib

    from typer.testing import CliRunner

    from sfapprox.cli import _app, app

    seen = []

    @contextlib.contextmanager
    def recorded(path, quiet=False):
        seen.append((Path(path).name, quiet))
        yield

    monkeypatch.setattr(_app, "reading_progress", recorded)
    args = {"info": ["info", matrix], "compare": ["compare", matrix, "--methods", "tsvd", "-q"],
            "fit": ["fit", matrix, "--iters", "3", "--device", "cpu", "--out", tmp_path / "f.h5"],
            "sweep": ["sweep", matrix, "--methods", "tsvd", "--budgets", "0.2", "-q"]}[command]
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    assert seen == [(matrix.name, quiet)]


@pytest.fixture(scope="module")
def n3000(tmp_path_factory) -> Path:
    """A sparse matrix of order 3,000 (18,000 non-zeros): a size where the tables' counts take seven digits."""
    import scipy.sparse

    path = tmp_path_factory.mktemp("n3000") / "n3000.mtx"
    scipy.io.mmwrite(path, scipy.sparse.random(3000, 3000, density=0.002, random_state=0, format="coo"))
    return path


@pytest.mark.parametrize("budget", ["sf", "0.001"])
def test_a_40_column_window_wraps_an_n_3000_comparison_readably(n3000, tmp_path, budget):
    """``COLUMNS=40`` on a 40-column terminal, N = 3,000: the table, its notes and the verdict wrap at spaces
    (every count, error and word of the verdict whole), no line is wider than the window, no traceback."""
    from sfapprox.formats import fmt_number

    record = tmp_path / "c.json"
    code, screen = run_in_terminal(["compare", n3000, "--methods", "tsvd,sparse,rpca", "--budget", budget,
                                    "--time-limit", "1", "--device", "cpu", "--json", record], columns=40,
                                   env={"COLUMNS": "40"}, timeout=180)
    text = plain(screen)
    assert code == 0 and "Traceback" not in text, text[-3000:]
    lines = [line.rstrip() for line in text.splitlines()]
    # (the next command's path, wider than the window, has a line of its own: the terminal wraps it)
    assert all(cell_len(line) <= 40 or _one_piece(line) for line in lines), [line for line in lines if cell_len(line) > 40]
    words = " ".join(text.split())
    data = json.loads(record.read_text())
    assert " ".join(data["verdict"]["text"].split()) in words  # wrapped at spaces: every number whole
    for row in data["results"]:
        if row["status"] == "ok":
            shown = [line for line in lines if line.startswith(row["method"])]
            assert shown and f"{row['nnz']:,}" in shown[0] and fmt_number(row["rel_error"]) in shown[0], shown


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_a_long_reason_is_a_numbered_note_under_the_table(matrix, tmp_path, columns):
    """``compare --methods all`` at 100 columns gave details 16 cells and Nyström's reason ran 19 lines.  A
    free-text cell longer than NOTE_LINES lines is a numbered note under the table now ("[1] nystrom: ..."),
    its cell the number: every row stays a few lines, every number whole, every reason said in full."""
    from sfapprox.formats import fmt_number

    record = tmp_path / "c.json"
    code, screen = run_in_terminal(["compare", matrix, "--methods", "tsvd,nystrom,sf-butterfly,sparse", "--device",
                                    "cpu", "--json", record], columns=columns, timeout=180)
    text = plain(screen)
    assert code == 0 and "Traceback" not in text, text[-3000:]
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert all(cell_len(line) <= columns or _one_piece(line) for line in lines), text  # (the record's path)
    rows = json.loads(record.read_text())["results"]
    names = [row["method"] for row in rows]
    starts = [next(n for n, line in enumerate(lines) if re.match(rf"{re.escape(name)}( ★)?\s", line)) for name in names]
    after = next(n for n in range(starts[-1] + 1, len(lines)) if not lines[n].startswith(" "))
    for start, end in zip(starts, [*starts[1:], after]):
        assert end - start <= 4, lines[start:end]  # a row of a few lines (NOTE_LINES), no reason running down
    words = " ".join(text.split())
    for row in rows:
        if row["status"] == "ok":
            assert fmt_number(row["rel_error"]) in lines[starts[names.index(row["method"])]].split()
        else:  # said in full: in its row, or in the note its row names
            reason = " ".join(row["reason"].split())
            number = re.search(r"\[\d+\]", lines[starts[names.index(row["method"])]])
            assert reason in words and (number is None or f"{number.group()} {row['method']}: {reason}" in words), words


def _one_piece(line: str) -> bool:
    """Whether ``line`` of a command laid out to be copied holds one piece alone (a path wider than the
    window, left whole for the terminal to wrap softly)."""
    return " " not in line.strip().removesuffix(" \\")


def _shell_words(lines: list[str]) -> list[str]:
    """The words a shell reads in ``lines`` pasted (``\\`` continuations and all)."""
    done = subprocess.run(["bash", "-c", "printf '%s\\0' " + "\n".join(lines)], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


@pytest.mark.parametrize("columns", [40, 60])
def test_the_next_command_is_copyable_in_a_narrow_window(tmp_path, columns):
    """At 40 columns the ``next:`` line (a command to copy) was never wrapped: the terminal broke it at its
    edge, in the middle of a path or an option.  Now it has lines of its own, broken only between shell words
    (an option beside its value) with `` \\`` continuations, so that the lines pasted into a shell are the
    command; a pipe still gets it on one line."""
    record = tmp_path / "a_results_file_with_a_long_name.json"
    args = ["compare", "examples/mesh_small.mtx", "--methods", "tsvd", "--json", record, "--device", "cpu", "--force"]
    piped = subprocess.run([sys.executable, "-m", "sfapprox", *map(str, args)], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
    assert piped.returncode == 0, piped.stderr
    said = [line for line in piped.stderr.splitlines() if line.startswith("next: sfapprox compare ")]
    assert len(said) == 1, piped.stderr  # one line in a pipe
    command = shlex.split(said[0].removeprefix("next: "))
    code, screen = run_in_terminal(args, columns=columns)
    lines = [line.rstrip() for line in plain(screen).splitlines() if line.strip()]
    assert code == 0, "\n".join(lines)
    start = lines.index("next:")
    shown = lines[start + 1:]
    assert shown[0].startswith("  sfapprox compare") and all(line.endswith(" \\") for line in shown[:-1]), shown
    assert not shown[-1].endswith("\\"), shown
    assert all(cell_len(line) <= columns or _one_piece(line) for line in shown), shown
    assert f"    {record} \\" in shown, shown  # wider than the window: a line of its own, whole
    assert "--methods tsvd,sparse" in "\n".join(shown)  # an option beside its value
    assert _shell_words(shown) == command


def test_the_next_command_fits_a_wide_window_on_one_line(tmp_path):
    code, screen = run_in_terminal(["compare", "examples/mesh_small.mtx", "--methods", "tsvd", "--device", "cpu"],
                                   columns=120)
    text = plain(screen)
    assert code == 0, text
    assert "next: sfapprox compare examples/mesh_small.mtx --device cpu --methods tsvd,sparse" in text.splitlines()


def test_a_command_is_broken_between_its_words_only():
    """An option stays beside its value where a line holds them; a word wider than a line (a path) has a line
    of its own, whole (the terminal wraps it softly: a copy of it is one word)."""
    from sfapprox.cli._render import command_lines

    path = "/a/path/wider/than/the/window/itself.mtx"
    groups = [["sfapprox"], ["compare"], [path], ["--methods", "tsvd,sparse"], ["--json", path], ["--device", "cpu"],
              ["--force"]]
    assert command_lines(groups, 30) == ["  sfapprox compare \\", f"    {path} \\", "    --methods tsvd,sparse \\",
                                         "    --json \\", f"    {path} \\", "    --device cpu --force"]
    assert command_lines([["sfapprox"], ["methods"]], 80) == ["  sfapprox methods"]


@pytest.mark.parametrize("columns", [40, 60])
def test_batch_s_progress_line_keeps_its_numbers_whole_in_a_narrow_window(tmp_path, columns):
    """At 40 columns batch's line read "matrices ━━ 0… mesh: sf it 274/20000 0:…": rich shrank every column,
    the count of matrices and the time among them.  Now the bar and the matrix's name give way, never the
    count, the iteration or the time."""
    np.save(tmp_path / "m.npy", np.random.default_rng(1).random((16, 16)))
    (tmp_path / "one.toml").write_text('[[matrix]]\nname = "a_matrix_with_a_rather_long_name"\ncategory = "other"\n'
                                       'file = "m.npy"\n')
    code, screen = run_in_terminal(["batch", tmp_path / "one.toml", "--out-dir", tmp_path / "out", "--methods", "sf",
                                    "--iters", "100000", "--time-limit", "3", "--device", "cpu"], columns=columns)
    text = plain(screen)
    assert code == 0, text
    drawn = [line.rstrip() for line in text.splitlines() if re.search(r"\d+:\d\d(:|…|$)", line)]
    iterating = [line for line in drawn if " it " in line]
    assert iterating, drawn
    for line in drawn:
        assert cell_len(line) <= columns and re.search(r"(^|\s)[01]/1\s(.*\s)?\d+:\d\d:\d\d$", line), line
    assert all(re.search(r" it \d+/100000 \d+:\d\d:\d\d$", line) for line in iterating), iterating


@pytest.mark.parametrize("columns", [30, 40, 60, 100])
def test_the_reading_line_keeps_the_bytes_and_the_time_whole(monkeypatch, tmp_path, columns):
    """At 40 columns the "reading FILE" line read "reading a_rather_long_matri… 95.4 MiB …" and at 60
    "95.4 MiB of 286.1…", the time gone: the name and the bar give way now, never the bytes or the time."""
    import io

    from rich.console import Console

    from sfapprox.cli import _render

    console = Console(file=io.StringIO(), force_terminal=True, width=columns, color_system=None)
    monkeypatch.setattr(_render, "err", console)
    path = tmp_path / "a_rather_long_matrix_file_name.mtx"
    path.write_bytes(b"x" * 300_000)
    monkeypatch.setattr(_render, "bytes_read", lambda p: 100_000)
    line = _render._ReadingLine(path)
    line.show()
    line.close()
    drawn = [text.rstrip() for text in plain(console.file.getvalue()).splitlines() if "KiB" in text]
    assert drawn and all(cell_len(text) <= columns for text in drawn), drawn
    assert all(re.search(r"(^|\s)97\.7 KiB of 293\.0 KiB \d+:\d\d:\d\d$", text) for text in drawn), drawn
    assert columns < 40 or all(text.startswith("reading a") for text in drawn), drawn  # the name, where it fits


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_message_never_breaks_a_path_in_a_narrow_window(tmp_path, command):
    """At 40 columns an error line and a "wrote" line broke a path wider than the window at the window's edge
    with a line break of their own ("/tmp/.../runs_with_a_long_folde" / "r_name"): copied from there, it was
    two pieces.  Messages still wrap at spaces, and such a path has a line of its own, whole, which the
    terminal wraps (and copies) as one."""
    folder = tmp_path / "a_folder_with_a_name_wider_than_the_window_itself"
    if command == "report":  # (there and empty: its message names it twice, in the command it suggests too)
        folder.mkdir()
    args = {"report": ["report", folder],
            "compare": ["compare", "examples/mesh_small.mtx", "--methods", "tsvd,sparse", "--device", "cpu",
                        "--json", folder.with_suffix(".json")]}[command]
    code, screen = run_in_terminal(args, columns=40, timeout=120)
    lines = [line.rstrip() for line in plain(screen).splitlines() if line.strip()]
    assert code == (2 if command == "report" else 0), "\n".join(lines)
    said = {"report": [f"{folder}:", f"{folder}'"], "compare": [f"{folder}.json"]}[command]
    for path in said:
        assert path in lines, lines  # whole, on a line of its own
    assert all(cell_len(line) <= 40 or _one_piece(line) for line in lines), lines
    assert lines[lines.index(said[0]) - 1] == ("error:" if command == "report" else "wrote"), lines


def test_datasets_fetch_s_lines_wrap_at_spaces_in_a_narrow_window(tmp_path):
    """``datasets fetch`` printed its ✓/✗ lines unwrapped (soft_wrap): a 40-column terminal broke them
    mid-word ("where to p" / "ut it").  Now they wrap at spaces as every other message does."""
    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "strike"\ncategory = "network"\nfile = "pajek/strike.paj"\n'
                 'url = "http://127.0.0.1:9/strike.paj"\n', encoding="utf-8")
    data = tmp_path / "d"
    data.mkdir()
    code, screen = run_in_terminal(["datasets", "fetch", m, "--data-dir", data], columns=40, timeout=60,
                                   env={"SFAPPROX_CACHE": str(tmp_path / "c")})
    lines = [line.rstrip() for line in plain(screen).splitlines() if line.strip()]
    assert code == 1 and any(line.startswith("✗") for line in lines), lines
    assert all(cell_len(line) <= 40 or _one_piece(line) for line in lines), lines


@pytest.mark.parametrize("width", range(24, 61))
def test_a_wrapped_message_keeps_each_number_beside_its_unit(width):
    """At 40 columns "ran past the time limit: rpca 8.73" ended a line and "s of 5 s" began the next: a
    figure read without its unit, and a unit read as a word.  A number and its unit now wrap as one."""
    from rich.text import Text

    from sfapprox.cli._render import at_spaces

    said = ("note: ran past the time limit: rpca 8.73 s of 5 s (3.68 s of them outside its fit); "
            "pts3000: not formed (68.7 MiB dense), scored in 0.8 s; 12 ms a step")
    lines = at_spaces(Text(said), width).plain.splitlines()
    assert " ".join(lines) == said
    assert all(cell_len(line) <= width for line in lines), lines
    assert not any(re.search(r"\d$", line) for line in lines[:-1]), lines  # no number left without its unit
    assert not any(re.match(r"(s|ms|MiB)\b", line) for line in lines), lines


def _progress_console(monkeypatch, columns: int):
    """A terminal console ``columns`` wide that the fit's progress line draws on, each update drawn at once
    (a StringIO is no terminal, and rich refreshes on its own clock)."""
    import io

    from rich.console import Console

    from sfapprox import _display
    from sfapprox.cli import _render

    console = Console(file=io.StringIO(), force_terminal=True, width=columns, color_system=None)
    monkeypatch.setattr(_render, "err", console)
    monkeypatch.setattr(_render, "draws_progress", lambda: True, raising=False)  # a StringIO is no terminal
    redraw = _display._FitProgress.update
    monkeypatch.setattr(_display._FitProgress, "update", lambda self, *a, **kw: redraw(self, *a, **kw, refresh=True))
    return console


@pytest.mark.parametrize("columns", [100, 60])
def test_a_stage_without_iterations_shows_its_name_and_time_not_it_0(monkeypatch, columns):
    """compare's scoring (and a method before its first iteration) showed "it 0 error –", numbers that
    meant nothing there: the line now shows the stage's name and the elapsed time alone, and the numbers
    come back with the next fit's first report."""
    from sfapprox.cli import _render

    console = _progress_console(monkeypatch, columns)
    with _render.fit_progress("m", 100, False) as update:
        update({"iteration": 40, "max_iter": 100, "fro_error": 0.25, "elapsed": 1.0, "method": "sf"})
        update.describe("scoring")
        scoring = len(console.file.getvalue())
        update.describe("tsvd")
        update({"iteration": 3, "max_iter": 100, "fro_error": 0.5, "elapsed": 1.0, "method": "tsvd"})
    text = plain(console.file.getvalue())
    staged = [line.rstrip() for line in plain(console.file.getvalue()[:scoring]).splitlines() if "scoring" in line]
    assert staged and all(re.search(r"m scoring .*\d+:\d\d:\d\d$", line) for line in staged), staged
    assert not any("it " in line or "error" in line for line in staged), staged
    assert not re.search(r"it 0 +error", text), text
    assert re.search(r"it 3 +error 0\.5 ", text), text


@pytest.mark.parametrize("columns", [40, 50, 60])
def test_a_phase_before_the_first_iteration_has_the_numbers_room(monkeypatch, columns):
    """Before SF's first iteration ("loading torch", "loading compiled kernels": seconds on a first run) the
    empty "it" and error columns kept 24 blank cells: at 40 columns the phase was not shown at all, at 50 it
    read "SF mesh loading to…".  With no numbers to show, the phase has their room; they come back with
    the first iteration."""
    from sfapprox.cli import _render

    console = _progress_console(monkeypatch, columns)
    with _render.fit_progress("SF mesh", 100, False) as update:
        update.phase("loading torch")
        update.phase("loading compiled kernels")
        update({"iteration": 7, "max_iter": 100, "fro_error": 0.25, "elapsed": 1.0})
    lines = [line.rstrip() for line in plain(console.file.getvalue()).splitlines()]
    assert any(re.search(r"^SF mesh loading torch +\d+:\d\d:\d\d$", line) for line in lines), lines
    assert any(re.search(r"^SF mesh loading compiled kernels +\d+:\d\d:\d\d$", line) for line in lines), lines
    assert any(re.search(r"it 7 +error 0\.25 +\d+:\d\d:\d\d$", line) for line in lines), lines
    assert all(cell_len(line) <= columns for line in lines), lines


def test_a_terminal_that_writes_ascii_only_shows_a_non_ascii_name_escaped_and_the_next_command_as_bytes(tmp_path):
    r"""On a terminal that writes ASCII only, ``maillage_é.mtx`` showed as ``maillage_e`` (another file's name)
    and the next command named ``'maillage_e.mtx'``: the name is ``maillage_\u00e9`` now, and the command names
    its bytes, ``$'maillage_\xc3\xa9.mtx'``; the glyphs are still spelled (``||X-X^||_F``)."""
    import shutil

    name = tmp_path / "maillage_é.mtx"
    shutil.copy(ROOT / "examples" / "mesh_small.mtx", name)
    code, screen = run_in_terminal(["compare", name, "--methods", "tsvd"], columns=200,
                                   env={"PYTHONIOENCODING": "ascii"}, timeout=120)
    text = plain(screen)
    assert code == 0 and "Traceback" not in text, text[-2000:]
    assert screen.isascii(), sorted({c for c in screen if not c.isascii()})
    assert "maillage_\\u00e9  (N=64" in text and "||X-X^||_F" in text
    assert "maillage_e " not in text and "maillage_e.mtx" not in text
    expected = f"compare $'{os.fsencode(tmp_path).decode('ascii')}/maillage_\\xc3\\xa9.mtx' --methods tsvd,sparse"
    assert expected in " ".join(text.split()).replace(" \\ ", " "), text[-1000:]


def test_a_narrow_sweep_line_cuts_the_matrix_s_name_never_the_budget():
    """At 60 columns a sweep's progress line read "rbf3000 budget 1/5 (144… tsvd" and "budget 1/5 (1…
    sparse": the budget cut to a number it is not.  The matrix's name gives way first, then the budget's
    count; the budget is whole or not shown."""
    from types import SimpleNamespace

    from sfapprox._display import _LabelColumn

    def shown(room: int, method: str) -> str:
        task = SimpleNamespace(description=f"rbf3000 budget 1/5 (144,000) {method}",
                               fields={"what": method, "stage": "budget 1/5 (144,000)"})
        return _LabelColumn(room).render(task).plain

    assert shown(40, "tsvd") == "rbf3000 budget 1/5 (144,000) tsvd"  # room enough: as it is
    assert shown(28, "tsvd") == "r… budget 1/5 (144,000) tsvd"
    assert shown(28, "sparse") == "rbf3000 budget 1/5 sparse"
    assert shown(22, "sparse") == "rbf… budget 1/5 sparse"
    for room in range(6, 41):
        for method in ("tsvd", "sparse", "sf"):
            line = shown(room, method)
            assert cell_len(line) <= room and line.endswith(method), (room, line)
            assert "(144,000)" in line or "(" not in line, (room, line)  # never "(144…" nor "(1…"


def _sweep_json(path: Path) -> Path:
    """A sweep's JSON as `sweep --json` writes it (three methods, each row's seconds and its fit's own)."""
    from sfapprox.results import Comparison, MethodResult
    from sfapprox.sweep import Sweep

    info = {"name": "graph", "n": 24, "fro_norm": 5.0}
    points = [Comparison(info, b, str(b), [
        MethodResult("sf", "ok", b, 1.0, 0.1889, 20.89, {"fit_seconds": 4.3, "stop_reason": "max_iter"}),
        MethodResult("tsvd", "ok", b - 2, 1.5, 0.3523, 0.0123, {"fit_seconds": 0.01}),
        MethodResult("sparse", "ok", b, 0.1, 0.0085, 0.0031, {"fit_seconds": 0.002})]) for b in (240, 480, 576)]
    path.write_text(json.dumps(Sweep(info, ["sf", "tsvd", "sparse"], points).to_dict()))
    return path


@pytest.mark.parametrize("columns", [60, 80])
def test_a_sweep_s_seconds_fit_a_narrow_window_never_cut(tmp_path, columns):
    """A sweep's table now has each method's seconds: at 60 and 80 columns every line fits, the errors and
    sf's seconds stay whole, the seconds that give way are named under the table, and compare's note says
    what the seconds hold; piped, every column on one header line."""
    from sfapprox.results import SECONDS_NOTE

    path = _sweep_json(tmp_path / "sweep.json")
    code, text = run_in_terminal(["report", path], columns=columns)
    text = plain(text)
    assert code == 0, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(cell_len(line) <= columns for line in lines), text
    body = [line.split() for line in lines if line.split() and line.split()[0] in ("240", "480", "576")]
    assert len(body) == 3 and all("0.1889" in row and "20.89" in row for row in body), text
    assert SECONDS_NOTE in " ".join(text.split())
    if columns == 60:  # the last methods' seconds give way first, said
        assert "left out to fit the window" in text and "sparse seconds" in " ".join(text.split())
    else:
        assert all("0.01" in row and "0.00" in row for row in body), text
    piped = subprocess.run([sys.executable, "-m", "sfapprox", "report", str(path)], capture_output=True, text=True,
                           cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert any(all(t in line for t in ("sf seconds", "tsvd seconds", "sparse seconds")) for line in
               piped.stdout.splitlines()), piped.stdout
