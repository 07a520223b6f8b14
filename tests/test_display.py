"""The progress line: events in, text out; and ``progress=True`` of the Python API (a terminal, a pipe and
a notebook played by rich consoles: CI has no terminal and no IPython)."""

import importlib.util
import io
import pickle
import re
import warnings

import numpy as np
import pytest
from rich.console import Console

import sfapprox
from sfapprox import ParameterError
from sfapprox import _display
from sfapprox._display import draws_bar, fit_display, shown_progress
from sfapprox._progress import coarse_progress

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: What a rich live line writes when it stops: the cursor shown again (hidden while it draws), the line erased.
CLEARED = "\x1b[?25h\r\x1b[1A\x1b[2K"


def terminal(width=100):
    """A console that takes itself for a terminal (a StringIO is none), and what it was written."""
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, force_interactive=True, width=width), buffer


def lines(buffer):
    """The line's states as drawn, one per redraw, without the escapes."""
    return [s.strip() for s in ANSI.sub("", buffer.getvalue()).replace("\r", "\n").split("\n") if s.strip()]


@pytest.fixture
def on_a_terminal(monkeypatch):
    """``progress=True`` drawing on a terminal of 100 columns; its buffer."""
    console, buffer = terminal()
    monkeypatch.setattr(_display, "stderr_console", lambda: console)
    monkeypatch.setattr(_display, "on_terminal", lambda c: True)
    return buffer


def refreshed(monkeypatch):
    """Every update of a progress line drawn at once (rich redraws 10 times a second)."""
    redraw = _display._FitProgress.update
    monkeypatch.setattr(_display._FitProgress, "update", lambda self, *a, **kw: redraw(self, *a, **kw, refresh=True))


def test_reports_in_the_line_out(monkeypatch):
    refreshed(monkeypatch)
    console, buffer = terminal()
    with fit_display("mesh [1]", 100, console=console) as update:
        update.describe("tsvd")
        update({"iteration": 7, "max_iter": 100, "fro_error": 0.123456, "elapsed": 0.1, "method": "sf",
                "start": "identity"})
        update.phase("compiling kernels (first run)")
    drawn = lines(buffer)
    assert any(s.startswith("mesh [1] tsvd") for s in drawn)  # the name as it is, not read as markup
    assert any("mesh [1] sf" in s and "start identity" in s and "it 7" in s and "error 0.1235" in s
               for s in drawn), drawn
    assert any("compiling kernels (first run)" in s for s in drawn)
    assert buffer.getvalue().endswith(CLEARED)  # cleared and given back when the block ended


def test_the_api_is_silent_by_default(on_a_terminal):
    X = np.random.default_rng(0).random((24, 24))
    seen = []
    with shown_progress(False, "m", 10, callback=seen.append, on_result=None) as (callback, on_result):
        assert callback == seen.append and on_result is None  # the caller's own, untouched
    sfapprox.compare(X, ["tsvd"], budget=200)
    assert on_a_terminal.getvalue() == ""


def test_compare_draws_the_methods_and_still_calls_the_callers_hooks(on_a_terminal, monkeypatch):
    refreshed(monkeypatch)
    X = np.random.default_rng(0).random((32, 32))
    reports, rows = [], []
    c = sfapprox.compare(X, ["tsvd", "nmf"], budget=300, progress=True, max_iter=20, device="cpu",
                         callback=reports.append, on_result=lambda r: rows.append(r.method))
    drawn = lines(on_a_terminal)
    assert any(s.startswith("matrix tsvd") for s in drawn) and any(s.startswith("matrix nmf") for s in drawn)
    assert any(s.startswith("matrix nmf") and "it " in s for s in drawn)  # its iterations, from the reports
    assert rows == ["tsvd", "nmf"] and reports and all(r["method"] == "nmf" for r in reports)
    assert on_a_terminal.getvalue().endswith(CLEARED)
    # a fit keeps its callback: pickled, the caller's alone (a live display does not pickle)
    kept = pickle.loads(pickle.dumps(c))
    shown = kept.result("nmf").estimator.callback.args[0]  # (the method's tagged callback: _tagged)
    assert shown.display is None and len(kept.results) == 2


def test_sweep_names_each_budget(on_a_terminal, monkeypatch):
    refreshed(monkeypatch)
    X = np.random.default_rng(0).random((32, 32))
    seen = []
    sfapprox.sweep.sweep(X, [200, 400], ["tsvd"], progress=True, on_result=lambda b, r: seen.append(b))
    drawn = lines(on_a_terminal)
    assert any("budget 1/2 (200)" in s for s in drawn) and any("budget 2/2 (400)" in s for s in drawn), drawn
    assert seen == [200, 400]


def test_fit_sf_and_fit_matrix_draw_an_sf_line(on_a_terminal, monkeypatch):
    refreshed(monkeypatch)
    X = np.random.default_rng(0).random((16, 16))
    seen = []
    model = sfapprox.fit_sf(X, progress=True, max_iter=30, device="cpu", callback=seen.append)
    assert any(s.startswith("SF matrix") and "it " in s for s in lines(on_a_terminal))
    assert seen and model.callback == seen.append  # the estimator keeps the caller's callback alone
    on_a_terminal.seek(0)
    on_a_terminal.truncate(0)
    run = sfapprox.fit_matrix(X, progress=True, settings=sfapprox.FitSettings(max_iter=30, device="cpu"))
    assert any(s.startswith("SF matrix") and "it " in s for s in lines(on_a_terminal))
    assert run.summary["iterations"] > 0


def test_piped_nothing_is_drawn(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(_display, "stderr_console", lambda: Console(file=buffer))
    seen = []
    with shown_progress(True, "m", 10, callback=seen.append) as (callback, _):
        assert callback == seen.append
    assert buffer.getvalue() == ""


def test_a_notebook_draws_with_ipywidgets_and_says_what_to_install_without(monkeypatch):
    notebook = Console(file=io.StringIO(), force_jupyter=True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ipywidgets" else object())
    with pytest.warns(UserWarning, match="pip install ipywidgets"):
        assert not draws_bar(notebook)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert draws_bar(notebook)
    assert not draws_bar(Console(file=io.StringIO()))  # (a file is neither)


def test_a_failing_display_warns_once_and_never_stops_the_fit(monkeypatch):
    class Broken(io.StringIO):
        def write(self, text):
            raise OSError("stream closed")

    console = Console(file=Broken(), force_terminal=True, force_interactive=True)
    monkeypatch.setattr(_display, "stderr_console", lambda: console)
    monkeypatch.setattr(_display, "on_terminal", lambda c: True)
    refreshed(monkeypatch)
    X = np.random.default_rng(0).random((24, 24))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = sfapprox.compare(X, ["tsvd", "nmf"], budget=200, progress=True, max_iter=10)
    assert [r.status for r in c.results] == ["ok", "ok"]
    said = [w for w in caught if "progress display stopped" in str(w.message)]
    assert len(said) == 1 and issubclass(said[0].category, RuntimeWarning)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, ValueError])
def test_the_line_is_closed_however_the_block_ends(stop, monkeypatch):
    console, buffer = terminal()
    monkeypatch.setattr(_display, "on_terminal", lambda c: True)
    with pytest.raises(stop):
        with shown_progress(True, "m", 10, console=console) as (callback, _):
            callback({"iteration": 1, "max_iter": 10, "fro_error": 1.0, "elapsed": 0.0})
            raise stop()
    assert buffer.getvalue().endswith(CLEARED)
    assert not console._live_stack  # the live display stopped: no redraws left


def test_it_composes_with_the_callers_callback(monkeypatch):
    console, _ = terminal()
    monkeypatch.setattr(_display, "on_terminal", lambda c: True)
    phases = []

    def own(info):
        return True  # (a request to stop, passed on)

    own.phase = phases.append
    with shown_progress(True, "m", 10, callback=own, console=console) as (callback, _):
        assert callback({"iteration": 1, "max_iter": 10, "fro_error": None, "elapsed": 0.0}) is True
        callback.phase("preparing")
        assert not coarse_progress(callback)  # the caller's callback has each iteration, as it asked
    with shown_progress(True, "m", 10, console=console) as (alone, _):
        assert coarse_progress(alone)  # a bar alone needs no call per iteration
    assert phases == ["preparing"]


def test_progress_is_true_or_false():
    X = np.eye(8)
    for call in (lambda: sfapprox.compare(X, ["tsvd"], progress="no"), lambda: sfapprox.fit_sf(X, progress=1),
                 lambda: sfapprox.fit_matrix(X, progress="yes")):
        with pytest.raises(ParameterError, match="progress must be True or False"):
            call()


def test_the_users_prints_stay_on_a_redirected_stdout(monkeypatch):
    """rich's live line takes over sys.stdout by default and draws what is printed through its own console,
    stderr: a caller's prints (its on_result, its callback) left their redirected stdout for the terminal."""
    console, drawn = terminal()
    stdout = io.StringIO()  # (not a terminal: a file or a pipe)
    monkeypatch.setattr("sys.stdout", stdout)
    with fit_display("X", 10, console=console) as update:
        print("ROW tsvd")
        update({"iteration": 1, "fro_error": 0.5, "elapsed": 0.1})
    assert stdout.getvalue() == "ROW tsvd\n" and "ROW" not in drawn.getvalue()


@pytest.mark.parametrize("reported_after", [True, False], ids=["a report after it", "none after it"])
def test_a_redraw_that_fails_on_richs_own_thread_is_said_and_dropped(reported_after, monkeypatch):
    """rich redraws from a thread of its own: a write that failed there killed that thread with a traceback,
    and no warning came (the guard was around the caller's calls only); one after the fit's last report was
    kept and never said (the guarded calls look at it, and none came after: the line's closing says it)."""
    import threading

    class FailsLater(io.StringIO):
        broken = False

        def write(self, text):
            if self.broken:
                raise OSError("stream closed")
            return super().write(text)

    stream = FailsLater()
    console = Console(file=stream, force_terminal=True, force_interactive=True, width=100)
    monkeypatch.setattr(_display, "on_terminal", lambda c: True)
    died = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_type))
    report = {"iteration": 1, "max_iter": 10, "fro_error": 1.0, "elapsed": 0.0}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with shown_progress(True, "m", 10, console=console) as (callback, _):
            callback(report)
            stream.broken = True
            redraw = threading.Thread(target=console._live_stack[-1].refresh)  # (as rich's refresh thread does)
            redraw.start()
            redraw.join()
            if reported_after:
                callback(report)
    assert died == []
    said = [w for w in caught if "progress display stopped" in str(w.message)]
    assert len(said) == 1 and "stream closed" in str(said[0].message)


LONG_NAME = "a_very_long_matrix_name_for_testing_progress"  # 44 characters


def _drawn_lines(monkeypatch, width, phase, report=None):
    """The states of a comparison's progress line at ``width`` columns, for a long-named matrix's "sf" in
    ``phase`` (then, with ``report``, at its iteration)."""
    refreshed(monkeypatch)
    console, buffer = terminal(width)
    with fit_display(LONG_NAME, 100, console=console) as update:
        update.describe("sf")
        update.phase(phase)
        if report:
            update(report)
    return [s for s in lines(buffer) if s.startswith("a_")]


@pytest.mark.parametrize("phase", ["start identity", "rank-one start (a pass over the columns)"])
@pytest.mark.parametrize("width", [72, 75, 80])
def test_a_long_name_beside_a_bar_gives_way_to_the_method_and_the_numbers(monkeypatch, width, phase):
    """A 44-character name at 72-80 columns (a bar shown) pushed the method, the error's last digits and the
    time off the line: "a_very_long_…progre… start ide… it 1234   error 3"; so did a long phase beside it."""
    drawn = _drawn_lines(monkeypatch, width, phase,
                         {"iteration": 1234, "max_iter": 20000, "fro_error": 3.4567, "elapsed": 1.0, "method": "sf"})
    iterating = [s for s in drawn if "it 1234" in s]
    assert iterating and all(re.search(r"^a_\S+ sf .*it 1234 +error 3\.457 +\d:\d\d:\d\d$", s) for s in iterating), drawn
    assert all(len(s) <= width and re.search(r"\d:\d\d:\d\d$", s) for s in drawn), drawn
    assert all(re.search(r"^a_\S+ sf ", s) for s in drawn if phase[:5] in s), drawn  # the phase's line names sf


def test_a_tiny_window_names_a_stage_without_numbers(monkeypatch):
    """Below 40 columns the line shows the numbers alone; a stage that has none (loading torch, compiling,
    scoring) was 23 blank cells and the time, neither the matrix, the method nor the stage named."""
    drawn = _drawn_lines(monkeypatch, 30, "loading torch")
    assert drawn and all(re.search(r"^a_\S+ .*\d:\d\d:\d\d$", s) and len(s) <= 30 for s in drawn), drawn
    assert any(re.search(r"^a_\S+ sf ", s) for s in drawn), drawn
