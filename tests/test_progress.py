"""Progress callbacks: coarse marks, and the phases a display shows before a fit's first iteration."""

import os
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from sfapprox import ChordSF
from sfapprox._progress import coarse_progress, phase, same_progress


class Display:
    """A progress display's callback: records each report and each phase shown."""

    def __init__(self):
        self.phases, self.reports = [], []
        self.coarse = True

    def __call__(self, info):
        self.reports.append(info)

    def phase(self, text):
        self.phases.append(text)


def test_a_phase_longer_than_its_delay_is_shown_then_cleared():
    display = Display()
    with phase(display, "compiling", delay=0.05):
        time.sleep(0.3)
    assert display.phases == ["compiling", ""]


def test_a_short_phase_is_never_shown():
    display = Display()
    with phase(display, "compiling", delay=5.0):
        pass
    assert display.phases == []


def test_a_callback_without_phases_is_not_called():
    seen = []
    with phase(seen.append, "compiling", delay=0.0):
        time.sleep(0.1)
    with phase(None, "compiling", delay=0.0):
        time.sleep(0.1)
    assert seen == []


def test_a_wrapper_keeps_the_marks_and_phases_of_what_it_wraps():
    display = Display()
    wrapper = same_progress(lambda info: display(dict(info, method="sf")), display)
    assert coarse_progress(wrapper) and wrapper.phase == display.phase
    plain = same_progress(lambda info: None, lambda info: None)
    assert not coarse_progress(plain) and not hasattr(plain, "phase")


def _slow_warm_up(monkeypatch, seconds=0.8, cached=False):
    """The kernels' warm-up made to take ``seconds`` (as numba compiling on a fresh install, or loading
    its cache on a busy machine: ``cached``)."""
    from sfapprox.sf import _kernels

    real = _kernels.warm_up_numba
    monkeypatch.setattr(_kernels, "kernels_cached", lambda: cached)

    def slow(dtype):
        time.sleep(seconds)
        real(dtype)

    monkeypatch.setattr(_kernels, "warm_up_numba", slow)


def _kernel_phases(phases: list[tuple[str, int]]) -> list[str]:
    """The phases shown, less a "preparing" ahead of the kernels' (and its clearing): on a busy machine
    the fit's first ``import numba`` (its memory estimate's) alone took over the half second a phase
    waits before it is shown, on the lowest versions pyproject allows every time."""
    texts = [text for text, _ in phases if text != "preparing"]
    while texts[:1] == [""]:
        texts.pop(0)
    return texts


def test_a_fit_shows_its_compiling_before_the_first_iteration(monkeypatch):
    _slow_warm_up(monkeypatch)
    display = Display()
    display.phase = lambda text: display.phases.append((text, len(display.reports)))
    X = np.random.default_rng(0).random((16, 16))
    ChordSF(max_iter=30, device="cpu", callback=display).fit(X)
    assert _kernel_phases(display.phases) == ["compiling kernels (first run)", ""]
    assert all(reports == 0 for _, reports in display.phases)  # both before the first report
    assert display.reports


def test_a_log_gets_the_compiling_as_one_line(monkeypatch, tmp_path):
    from sfapprox.cli import app

    _slow_warm_up(monkeypatch)
    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(1).random((16, 16)))
    result = CliRunner().invoke(app, ["fit", str(path), "--out", str(tmp_path / "f.h5"), "--iters", "30",
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "compiling kernels" in line]
    assert lines == ["SF m: compiling kernels (first run)"]
    assert result.output.index("compiling kernels") < result.output.index("optimizer running")
    quiet = CliRunner().invoke(app, ["fit", str(path), "--out", str(tmp_path / "g.h5"), "--iters", "30",
                                     "--device", "cpu", "--quiet"])
    assert quiet.exit_code == 0 and "compiling kernels" not in quiet.output


def test_a_slow_load_of_cached_kernels_is_not_called_compiling(monkeypatch):
    """On a busy machine loading numba's cache took over half a second, and every warm run said
    "compiling kernels (first run)" while nothing was compiled."""
    from sfapprox.sf import _kernels

    _slow_warm_up(monkeypatch, cached=True)
    display = Display()
    display.phase = lambda text: display.phases.append((text, len(display.reports)))
    ChordSF(max_iter=30, device="cpu", callback=display).fit(np.random.default_rng(0).random((16, 16)))
    assert _kernel_phases(display.phases) == ["loading compiled kernels", ""]
    monkeypatch.undo()
    ChordSF(max_iter=5, device="cpu").fit(np.random.default_rng(0).random((16, 16)))  # (compiled now)
    assert _kernels.kernels_cached()  # this process's kernels are in the cache



def test_a_fit_from_columns_shows_its_compiling_before_its_first_step(monkeypatch):
    """The fit from column blocks compiled its kernels (float32, about 5 s on a fresh install) inside its
    first steps, under a bar at "it 0" and inside its time limit; it compiles them first now, and says so
    as the in-memory fit does."""
    from sfapprox.chord import chord_offsets
    from sfapprox.sf import _columns
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET

    # over the in-memory fit's need at N = 128, within the fit from columns' (checked: "path")
    limit = (_columns.column_fit_memory(128, 7, len(chord_offsets(128)), _columns.COLUMN_WIDTH)
             + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (1 << 20))
    real = getattr(_columns, "warm_up", None)

    def slow(*args, **kw):
        time.sleep(0.8)
        if real is not None:
            real(*args, **kw)

    monkeypatch.setattr(_columns, "warm_up", slow, raising=False)
    monkeypatch.setattr(_columns, "kernels_cached", lambda *a, **k: False, raising=False)
    display = Display()
    display.phase = lambda text: display.phases.append((text, len(display.reports)))
    X = np.random.default_rng(0).random((128, 128))
    sf = ChordSF(max_iter=3, time_limit=None, device="cpu", init="identity", max_memory=limit,
                 callback=display).fit(X)
    assert sf.params_["path"] == "columns"
    assert _kernel_phases(display.phases) == ["compiling kernels (first run)", ""]
    assert all(reports == 0 for _, reports in display.phases) and len(display.reports) == 3


def test_a_fit_from_columns_says_what_its_start_does_before_its_first_step(monkeypatch):
    """Before its first step a fit from columns samples columns for its start and, for a rank-one start,
    makes a pass over them: seconds on a large source under a bar at "it 0" with no word beside it."""
    from sfapprox.chord import chord_offsets
    from sfapprox.sf import _columns, model
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET

    limit = (_columns.column_fit_memory(128, 7, len(chord_offsets(128)), _columns.COLUMN_WIDTH)
             + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (1 << 20))

    def slow(real):
        def call(*args, **kw):
            time.sleep(0.8)
            return real(*args, **kw)
        return call

    monkeypatch.setattr(model, "_pilot", slow(model._pilot))
    monkeypatch.setattr(ChordSF, "_column_rank_one", slow(ChordSF._column_rank_one))
    display = Display()
    display.phase = lambda text: display.phases.append((text, len(display.reports)))
    rng = np.random.default_rng(0)
    X = np.outer(rng.random(128), rng.random(128))
    sf = ChordSF(max_iter=3, time_limit=None, device="cpu", init="rank1", max_memory=limit, callback=display).fit(X)
    assert sf.params_["path"] == "columns" and sf.init_ == "rank1"
    shown = [text for text, _ in display.phases if text]
    assert shown[:2] == ["sampling columns for the start", "rank-one start (a pass over the columns)"]
    assert all(reports == 0 for _, reports in display.phases[:4])


def test_a_fresh_install_s_kernels_are_not_said_cached_before_they_are_compiled(tmp_path):
    """Importing the compiled iterations writes their empty cache index (a fresh install's stale-cache check
    flushes it), and the kernel compiles first: an index for each was there before the iterations were
    compiled, and every first fit after installing showed "loading compiled kernels" for its 10 s of
    compiling.  A fresh cache folder (NUMBA_CACHE_DIR), the kernel compiled, the iterations not: not cached."""
    import subprocess
    import sys

    pytest.importorskip("numba")
    code = ("import torch; from sfapprox.sf import _kernels; "
            "before = _kernels.kernels_cached(); _kernels.warm_up_numba(torch.float64); "
            "print(before, _kernels.kernels_cached())")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_a_fit_records_the_seconds_it_compiled_its_kernels_not_those_it_loaded_them(monkeypatch):
    """Compiling (the first fit after installing) is outside the time limit and inside the fit's seconds:
    SF's 15 s beside --time-limit 5 read as a limit not kept.  The fit records them; loading from the
    cache, however slow, is not compiling."""
    X = np.random.default_rng(0).random((16, 16))
    _slow_warm_up(monkeypatch, seconds=1.2, cached=False)
    compiled = ChordSF(max_iter=5, device="cpu").fit(X).params_
    assert compiled["compile_seconds"] >= 1.2
    _slow_warm_up(monkeypatch, seconds=1.2, cached=True)
    assert "compile_seconds" not in ChordSF(max_iter=5, device="cpu").fit(X).params_
    monkeypatch.undo()
    assert "compile_seconds" not in ChordSF(max_iter=5, device="cpu").fit(X).params_  # (cached by now)


def _recorded_phases(monkeypatch, module):
    """``module``'s :func:`phase` replaced by one that records each text as its block starts (no timer:
    what a display would be shown, whatever the machine's speed)."""
    import contextlib

    shown = []

    @contextlib.contextmanager
    def recorded(callback, text, delay=0.5):
        shown.append(text)
        yield type("Phase", (), {"end": staticmethod(lambda: None)})()

    monkeypatch.setattr(module, "phase", recorded)
    return shown


@pytest.mark.parametrize("cached, text", [(False, "compiling kernels (first run)"),
                                          (True, "loading compiled kernels")])
def test_the_scoring_s_first_compiling_is_a_phase_after_the_last_iteration(monkeypatch, cached, text):
    """After SF's last iteration on a fresh install the bar stood still ~9 s: the scoring compiled the
    apply kernels.  They are made ready first, under the compiling phase, after every report."""
    from sfapprox.operators import _chord_apply, chord
    from sfapprox.sf import model

    shown = _recorded_phases(monkeypatch, model)
    monkeypatch.setattr(chord, "TORCH_DENSE_MAX_N", 8)  # the scoring of N = 16 then runs the apply kernels
    # the apply kernels not ready, as in a fresh process (their cache as the case says)
    monkeypatch.setattr(_chord_apply, "block_kernel_phase", lambda butterfly=False: text)
    warmed = []
    monkeypatch.setattr(_chord_apply, "warm_up_block_kernel", lambda butterfly=False: warmed.append(len(display.reports)))
    display = Display()
    est = ChordSF(max_iter=5, device="cpu", callback=display).fit(np.random.default_rng(0).random((16, 16)))
    assert shown[-1] == text and warmed == [len(display.reports)] and display.reports
    assert est.fro_error_ is not None


def test_the_block_kernel_is_said_ready_once_warmed():
    from sfapprox.operators import _chord_apply

    pytest.importorskip("sfapprox.operators._chord_apply_numba")
    if _chord_apply.backend() != "numba":
        pytest.skip("the scipy apply backend runs")
    _chord_apply.warm_up_block_kernel(False)
    _chord_apply.warm_up_block_kernel(True)
    assert _chord_apply.block_kernel_phase(False) is None and _chord_apply.block_kernel_phase(True) is None


def test_a_phase_inside_another_hands_the_display_back_to_it():
    """The kernels compiled during SF's scoring: their phase ended with a blank, the scoring's unnamed again."""
    display = Display()
    with phase(display, "scoring", delay=0.02):
        time.sleep(0.1)
        with phase(display, "compiling", delay=0.02):
            time.sleep(0.1)
        time.sleep(0.05)
    assert display.phases == ["scoring", "compiling", "scoring", ""]


def test_a_phase_ended_early_is_cleared_once():
    display = Display()
    with phase(display, "preparing", delay=0.02) as preparing:
        time.sleep(0.1)
        preparing.end()
        time.sleep(0.05)
    assert display.phases == ["preparing", ""]


def test_sf_names_its_seconds_before_the_first_iteration_and_its_scoring(monkeypatch):
    """At N = 3,000 SF's bar read a bare "sf it 0" for ~5 s (importing torch, timing one evaluation), and
    stood unnamed through its scoring: "preparing" and "scoring" now, cleared before the first report."""
    from sfapprox.sf import _solver

    log = []

    class Logged(Display):
        def __call__(self, info):
            log.append("report")

        def phase(self, text):
            log.append(text)

    evaluate = _solver.evaluate_start

    def slow(*args, **kwargs):
        time.sleep(0.8)  # past the phase's delay, as one evaluation at N = 3,000 is
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(_solver, "evaluate_start", slow)
    ChordSF(max_iter=5, device="cpu", callback=Logged()).fit(np.random.default_rng(0).random((16, 16)))
    preparing = log.index("preparing")
    assert log.index("", preparing) < log.index("report"), log


def test_sf_s_scoring_is_a_phase_after_the_last_iteration(monkeypatch):
    from sfapprox.sf import model

    shown = _recorded_phases(monkeypatch, model)
    ChordSF(max_iter=5, device="cpu", callback=Display()).fit(np.random.default_rng(0).random((16, 16)))
    assert shown[0] == "preparing" and "scoring" in shown, shown


def test_an_outer_phase_that_gives_way_does_not_come_back_after_an_inner_one():
    """A comparison's "reading columns (the matrix is not formed)" around a whole method came back on the
    bar after SF's own "scoring" ended, over a finished fit: it ends for good once an inner phase shows."""
    display = Display()
    with phase(display, "reading columns", delay=0.0, gives_way=True):
        time.sleep(0.05)
        with phase(display, "scoring", delay=0.0):
            time.sleep(0.05)
        time.sleep(0.05)
    assert display.phases == ["reading columns", "scoring", ""]


def test_an_outer_phase_is_handed_the_display_back_unless_it_gives_way():
    """Without gives_way, an inner phase hands the display back to the outer one's text (not a blank)."""
    display = Display()
    with phase(display, "scoring", delay=0.0):
        time.sleep(0.05)
        with phase(display, "compiling", delay=0.0):
            time.sleep(0.05)
        time.sleep(0.05)
    assert display.phases == ["scoring", "compiling", "scoring", ""]
