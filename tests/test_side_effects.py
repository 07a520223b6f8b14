"""A call of the Python API leaves the caller's process as it found it (sfapprox._global_state).

A notebook runs sfapprox in its own process: a generator reseeded, a thread count, a dtype, a warnings
filter, a logger, a signal handler, a working folder or a matplotlib backend left changed by a call
changes the user's next cell.  Each test snapshots that state (:func:`process_state`), makes a call,
and compares; :func:`test_the_check_sees_each_side_effect` shows that every item of the snapshot
catches its side effect.  A call is made once before the checked one: the first call imports
libraries, and what importing numpy's, scipy's or numba's own modules does (a warnings filter of
scipy.special, a BLAS library loaded) is theirs; what an import does to the caller's random
generators is checked from a fresh interpreter (:func:`test_first_calls_in_a_fresh_process_keep_the_generators`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import sfapprox

torch = pytest.importorskip("torch")

N = 32
#: Short fits: the checks are about what a call leaves, not about its numbers.
LIMIT = 0.2
#: Idle worker threads a first large product or fit starts and keeps for the process (as numba's and
#: OpenBLAS's pools are kept): never more than their fixed sizes, reused by every later call.
PERSISTENT_POOLS = ("sfapprox-apply", "sfapprox-kernel")


def _blas_threads() -> dict[str, int]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {}
    return {f"{i['filepath']} ({i['internal_api']})": i["num_threads"] for i in threadpool_info()}


def _loggers() -> dict[str, tuple]:
    out = {}
    for name, log in [("", logging.getLogger()), *logging.Logger.manager.loggerDict.items()]:
        if isinstance(log, logging.Logger):
            out[name] = (log.level, tuple(log.handlers), log.propagate, log.disabled)
    return out


def _signals() -> dict[str, object]:
    names = ["SIGINT", "SIGTERM", "SIGHUP"]
    out = {name: signal.getsignal(getattr(signal, name)) for name in names if hasattr(signal, name)}
    if hasattr(signal, "pthread_sigmask"):
        out["mask"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return out


def _threads() -> set[tuple[int | None, str]]:
    return {(t.ident, t.name) for t in threading.enumerate() if not t.name.startswith(PERSISTENT_POOLS)}


def _fds() -> set[str]:
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: not checked here
        return set()
    out = set()
    for fd in fds:
        with contextlib.suppress(OSError):  # (the listing's own descriptor is closed by now)
            out.add(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
    return out


def _numba_launched() -> bool:
    """Whether numba's parallel threading layer has been started in this process (sfapprox's compiled
    kernels never start it: they use threads of their own)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return bool(getattr(parallel, "_is_initialized", False))


def process_state() -> dict[str, object]:
    """What a library call may not leave changed, as comparable values."""
    keys, pos, has_gauss, gauss = np.random.get_state()[1:]
    state = {
        "numpy global generator": (keys.tobytes(), pos, has_gauss, gauss),
        "random global generator": random.getstate(),
        "torch generator": torch.random.get_rng_state().numpy().tobytes(),
        "torch threads": torch.get_num_threads(),
        "torch interop threads": torch.get_num_interop_threads(),
        "torch default dtype": torch.get_default_dtype(),
        "torch deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch grad mode": torch.is_grad_enabled(),
        "torch anomaly mode": torch.is_anomaly_enabled(),
        "BLAS threads": _blas_threads(),
        "numpy errors": np.geterr(),
        "numpy print options": np.get_printoptions(),
        "warnings filters": list(warnings.filters),
        "warnings.showwarning": warnings.showwarning,
        "loggers": _loggers(),
        "signals": _signals(),
        "environment": dict(os.environ),
        "working folder": os.getcwd(),
        "standard streams": (sys.stdin, sys.stdout, sys.stderr),
        "excepthook": sys.excepthook,
        "recursion limit": sys.getrecursionlimit(),
        "threads": _threads(),
        "open files": _fds(),
    }
    if _numba_launched():  # (asked before: the question launches numba's threads, which set OpenMP's count)
        import numba

        state["numba threads"] = numba.get_num_threads()
        state["numba threading layer"] = numba.threading_layer()
    if "matplotlib" in sys.modules:
        import matplotlib

        state["matplotlib backend"] = matplotlib.get_backend()
        state["matplotlib rcParams"] = {k: repr(v) for k, v in matplotlib.rcParams.items() if k != "backend"}
        if "matplotlib.pyplot" in sys.modules:
            state["pyplot figures"] = sys.modules["matplotlib.pyplot"].get_fignums()
    return state


def changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """The items of two :func:`process_state` snapshots that differ, each said in a line."""
    out = []
    for key in before.keys() | after.keys():
        if key not in before or key not in after:
            # a library imported by the call (numba, matplotlib): its state is compared from the next call
            continue
        a, b = before[key], after[key]
        if key in ("BLAS threads", "loggers"):
            # a library loaded by the call (its BLAS, its module loggers) is not a change of one already there
            a, b = ({k: v for k, v in d.items() if k in a and k in b} for d in (a, b))
        if a != b:
            out.append(f"{key}: {str(a)[:300]} -> {str(b)[:300]}")
    return sorted(out)


def assert_leaves_no_trace(call, warm_up: bool = True) -> None:
    """``call()`` (once before, unchecked, where ``warm_up``) leaves :func:`process_state` as it was."""
    if warm_up:
        call()
    before = process_state()
    call()
    assert changes(before, process_state()) == []


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((N, N))


@pytest.fixture(scope="module")
def comparison(X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sfapprox.ConvergenceWarning)  # (the module's fixture: before conftest's)
        return sfapprox.compare(X, list(sfapprox.available_methods()), time_limit=LIMIT)


# ---------------------------------------------------------------------------------------------- the check


@contextlib.contextmanager
def _thread_left_running():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="left-running", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


@contextlib.contextmanager
def _file_left_open():
    with open(os.devnull):  # (open while the snapshot is taken)
        yield


@contextlib.contextmanager
def _restoring(get, set_, value):
    before = get()
    set_(value)
    try:
        yield
    finally:
        set_(before)


@contextlib.contextmanager
def _generator(get, set_, draw):
    before = get()
    draw()
    try:
        yield
    finally:
        set_(before)


@contextlib.contextmanager
def _blas_limited():
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController().select(user_api="blas")
    if not controller.lib_controllers:
        pytest.skip("no BLAS library that threadpoolctl controls")
    now = controller.lib_controllers[0].num_threads
    limiter = controller.limit(limits=2 if now == 1 else 1)
    try:
        yield
    finally:
        limiter.restore_original_limits()


@contextlib.contextmanager
def _numba_threads():
    numba = pytest.importorskip("numba")
    now = numba.get_num_threads()
    numba.set_num_threads(1 if now > 1 else 2)
    try:
        yield
    finally:
        numba.set_num_threads(now)


def _launch_numba() -> None:
    """Start numba's threading layer, and put back what its start set: its OpenMP layer sets the
    OpenMP libraries' thread count (torch's among them) to numba's."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread: no other count to set")
    threadpoolctl = pytest.importorskip("threadpoolctl")
    threads = torch.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=None):
        numba.get_num_threads()
        torch.set_num_threads(threads)


@contextlib.contextmanager
def _matplotlib_backend():
    matplotlib = pytest.importorskip("matplotlib")
    now = matplotlib.get_backend()
    with matplotlib.rc_context():  # (use() sets rcParams["backend_fallback"] too)
        matplotlib.use("svg" if now.lower() != "svg" else "pdf")
        try:
            yield
        finally:
            matplotlib.use(now)


@contextlib.contextmanager
def _deterministic():
    # torch's first call imports its compiler, which sets an environment variable and a warnings
    # filter: put back here too, so that the next tests start from the state this one found
    environment, filters = dict(os.environ), warnings.filters[:]
    now = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(not now)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(now)
        os.environ.clear()
        os.environ.update(environment)
        warnings.filters[:] = filters


#: Each side effect a library call could leave, made and undone (the check must see it while it lasts).
SIDE_EFFECTS = {
    "numpy global generator": lambda: _generator(np.random.get_state, np.random.set_state, lambda: np.random.seed(1)),
    "random global generator": lambda: _generator(random.getstate, random.setstate, lambda: random.seed(1)),
    "torch generator": lambda: _generator(torch.random.get_rng_state, torch.random.set_rng_state,
                                          lambda: torch.manual_seed(1)),
    "torch threads": lambda: _restoring(torch.get_num_threads, torch.set_num_threads, torch.get_num_threads() + 1),
    "torch default dtype": lambda: _restoring(torch.get_default_dtype, torch.set_default_dtype, torch.float32
                                              if torch.get_default_dtype() != torch.float32 else torch.float64),
    "torch deterministic algorithms": _deterministic,
    "torch grad mode": lambda: _restoring(torch.is_grad_enabled, torch.set_grad_enabled, not torch.is_grad_enabled()),
    "torch anomaly mode": lambda: _restoring(torch.is_anomaly_enabled, torch.set_anomaly_enabled,
                                             not torch.is_anomaly_enabled()),
    "BLAS threads": _blas_limited,
    "numba threads": _numba_threads,
    "numpy errors": lambda: np.errstate(over="raise" if np.geterr()["over"] != "raise" else "ignore"),
    "numpy print options": lambda: np.printoptions(precision=np.get_printoptions()["precision"] + 1),
    "warnings filters": lambda: _restoring(lambda: warnings.filters[:], lambda f: setattr(warnings, "filters", f),
                                           [("ignore", None, Warning, None, 0), *warnings.filters]),
    "warnings.showwarning": lambda: _restoring(lambda: warnings.showwarning,
                                               lambda f: setattr(warnings, "showwarning", f), print),
    "loggers": lambda: _restoring(logging.getLogger().getEffectiveLevel, logging.getLogger().setLevel, 1),
    "signals": lambda: _restoring(lambda: signal.getsignal(signal.SIGTERM),
                                  lambda h: signal.signal(signal.SIGTERM, h), lambda *a: None),
    "environment": lambda: _restoring(lambda: os.environ.get("SFAPPROX_SIDE_EFFECT"),
                                      lambda v: os.environ.pop("SFAPPROX_SIDE_EFFECT", None) if v is None
                                      else os.environ.__setitem__("SFAPPROX_SIDE_EFFECT", v), "1"),
    "working folder": lambda: contextlib.chdir(os.path.dirname(os.getcwd()) or "/"),
    "standard streams": lambda: contextlib.redirect_stdout(io.StringIO()),
    "excepthook": lambda: _restoring(lambda: sys.excepthook, lambda h: setattr(sys, "excepthook", h), print),
    "recursion limit": lambda: _restoring(sys.getrecursionlimit, sys.setrecursionlimit, sys.getrecursionlimit() + 7),
    "threads": _thread_left_running,
    "open files": _file_left_open,
    "matplotlib backend": _matplotlib_backend,
    "matplotlib rcParams": lambda: pytest.importorskip("matplotlib").rc_context({"lines.linewidth": 7.5}),
}


@pytest.mark.parametrize("key", sorted(SIDE_EFFECTS))
def test_the_check_sees_each_side_effect(key):
    """Every item of the snapshot tells its side effect (made here, and undone), so a check that finds
    none after a call could have found one."""
    if key.startswith("matplotlib"):  # imported before the snapshot: compared from then on
        pytest.importorskip("matplotlib")
    if key == "numba threads":
        _launch_numba()
    before = process_state()
    with SIDE_EFFECTS[key]():
        found = changes(before, process_state())
    # (one setting may move others with it: numba's OpenMP thread count is torch's and the BLAS pools')
    assert key in [line.split(":")[0] for line in found]
    assert changes(before, process_state()) == []  # undone: the next tests start clean


# ----------------------------------------------------------------------------------------- the calls


def test_loading(tmp_path, X):
    np.save(tmp_path / "x.npy", X)
    assert_leaves_no_trace(lambda: sfapprox.load_matrix(tmp_path / "x.npy"))
    assert_leaves_no_trace(lambda: sfapprox.open_matrix(tmp_path / "x.npy"))


@pytest.mark.parametrize("options", [
    {},
    {"threads": 1, "seed": 3},
    {"threads": 2, "device": "cpu", "dtype": "float32"},
    {"progress": True},
], ids=["defaults", "threads=1,seed", "threads=2,cpu,float32", "progress"])
def test_compare(X, options):
    assert_leaves_no_trace(lambda: sfapprox.compare(X, "sf,tsvd,rsvd,nmf", time_limit=LIMIT, **options))


def test_compare_every_method(X):
    methods = list(sfapprox.available_methods())
    assert_leaves_no_trace(lambda: sfapprox.compare(X, methods, time_limit=LIMIT, seed=2), warm_up=False)


@pytest.mark.parametrize("options", [{}, {"threads": 2, "random_state": 4}, {"dtype": "float32", "device": "cpu"},
                                     {"progress": True}],
                         ids=["defaults", "threads=2,random_state", "float32,cpu", "progress"])
def test_fitting_sf(X, options):
    progress = options.pop("progress", False)
    if progress:
        assert_leaves_no_trace(lambda: sfapprox.fit_sf(X, time_limit=LIMIT, progress=True))
    assert_leaves_no_trace(lambda: sfapprox.ChordSF(time_limit=LIMIT, **options).fit(X))


def test_fit_matrix_and_its_files(tmp_path, X):
    out = tmp_path / "f.npz"
    assert_leaves_no_trace(lambda: sfapprox.fit_matrix(X, out=out, json_path=tmp_path / "f.json", force=True,
                                                       time_limit=LIMIT, progress=True))
    assert_leaves_no_trace(lambda: sfapprox.load_factors(out))


def test_sweep(X):
    assert_leaves_no_trace(lambda: sfapprox.sweep.sweep(X, "0.1,0.3", "sf,tsvd", time_limit=LIMIT, progress=True))


def test_describing(X, comparison):
    from sfapprox.describe import describe, describe_formats, describe_methods

    assert_leaves_no_trace(lambda: (str(describe(X)), str(describe_methods()), str(describe_formats())))
    assert_leaves_no_trace(lambda: (str(comparison), repr(comparison), comparison._repr_html_()))


def test_using_the_surrogates(comparison):
    """Products, dense forms and torch exports (a module's forward and backward) of every method's surrogate."""
    operators = [r.operator for r in comparison.results if r.operator is not None]
    assert len(operators) >= 5

    def use() -> None:
        x = np.ones(N)
        for op in operators:
            op @ x, op.T @ np.ones((N, 3)), op.to_dense()
            if hasattr(op, "to_torch"):
                module = op.to_torch(dtype=torch.float64)
                module(torch.ones(2, N, dtype=torch.float64)).sum().backward()

    assert_leaves_no_trace(use)


def test_matrices_known_by_their_columns():
    points = np.random.default_rng(1).standard_normal((N, 3))
    K = sfapprox.KernelMatrix(points)
    assert_leaves_no_trace(lambda: sfapprox.compare(K, "sf,nystrom,rsvd", time_limit=LIMIT))

    def from_columns():  # not formed within its memory: the methods read it by column blocks
        compared = sfapprox.compare(K, "nystrom,rsvd,sparse", time_limit=LIMIT, max_memory="300K")
        assert "not formed" in compared.notes[0] and {r.status for r in compared.results} == {"ok"}

    assert_leaves_no_trace(from_columns)
    A = sfapprox.AttentionMatrix(points, points[::-1].copy())
    assert_leaves_no_trace(lambda: sfapprox.compare(A, "sf,tsvd", time_limit=LIMIT))
    fitted = sfapprox.compare(K, "nystrom", time_limit=LIMIT).results[0].operator
    assert_leaves_no_trace(lambda: sfapprox.estimate_errors(K, {"nystrom": fitted}))


@pytest.mark.parametrize("how", ["callback", "signal"])
def test_an_interrupted_call(X, how):
    """A Ctrl-C (the KeyboardInterrupt of Python's handler) ends a comparison with its rows so far; the
    handlers, the thread counts and the generators are the caller's again after it."""
    if how == "signal":
        if threading.current_thread() is not threading.main_thread():
            pytest.skip("signals reach the main thread only")

        def stop(info):
            signal.raise_signal(signal.SIGINT)
    else:
        def stop(info):
            raise KeyboardInterrupt

    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # (a background run may ignore it)
    try:
        def call():
            result = sfapprox.compare(X, "tsvd,sf,nmf", time_limit=5, threads=2, callback=stop)
            assert [r.status for r in result.results][-1] == "interrupted"

        assert_leaves_no_trace(call)
        assert_leaves_no_trace(lambda: sfapprox.fit_sf(X, time_limit=5, threads=2, callback=stop))
    finally:
        signal.signal(signal.SIGINT, handler)


def test_plots_keep_the_callers_matplotlib(tmp_path, X):
    """The plot functions drew through pyplot after ``matplotlib.use("Agg")``: a notebook's backend
    (inline) was Agg after the first plot, and its figures no longer showed."""
    matplotlib = pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from sfapprox.io import as_loaded
    from sfapprox.plotting import plot_comparison, plot_sweep

    loaded = as_loaded(X, "x")
    compared = sfapprox.compare(loaded, "sf,tsvd", time_limit=LIMIT)
    swept = sfapprox.sweep.sweep(loaded, "0.1,0.3", "tsvd", time_limit=LIMIT)
    backend = matplotlib.get_backend()
    # first plots: matplotlib opens the fonts it draws with, and keeps them for the process
    plot_comparison(loaded, compared, tmp_path / "c.png")
    plot_sweep(swept, tmp_path / "s.pdf")
    matplotlib.use("svg")  # the caller's own backend (a notebook's inline one, here one that needs no display)
    figure = plt.figure()
    try:
        assert_leaves_no_trace(lambda: plot_comparison(loaded, compared, tmp_path / "c.png"), warm_up=False)
        assert_leaves_no_trace(lambda: plot_sweep(swept, tmp_path / "s.pdf"), warm_up=False)
        assert matplotlib.get_backend() == "svg" and plt.gcf() is figure
        assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "s.pdf").read_bytes()[:4] == b"%PDF"
    finally:
        plt.close(figure)
        matplotlib.use(backend)


FRESH = """
import random, sys
import numpy as np, torch, sfapprox
from sfapprox.describe import describe
from sfapprox.io import as_loaded
from sfapprox.formats import Column, Table, render_rich

table = Table("t", [Column("a", "a", "left")])
table.add({"a": "x"})

def states():
    return (random.getstate(), np.random.get_state()[1].tobytes(), torch.random.get_rng_state().numpy().tobytes())

random.seed(7); np.random.seed(7); torch.manual_seed(7)
seeded = states()
X = as_loaded(np.random.default_rng(0).standard_normal((24, 24)), "x")
for name, call in [
    ("render_rich", lambda: render_rich([table])),  # (first: the formats' own import of rich, no display before)
    ("compare(progress=True)", lambda: sfapprox.compare(X, "sf,tsvd,rsvd,nystrom,nmf", time_limit=0.2, progress=True)),
    ("fit_sf(progress=True)", lambda: sfapprox.fit_sf(X.matrix, time_limit=0.2, progress=True)),
    ("sweep(progress=True)", lambda: sfapprox.sweep.sweep(X, "0.2", "tsvd", progress=True)),
    ("describe", lambda: str(describe(X))),
]:
    call()
    if states() != seeded:
        print(f"{name} changed a global generator")
        sys.exit(1)
print("kept")
"""


def test_first_calls_in_a_fresh_process_keep_the_generators():
    """The first calls import what they need, and an import may draw from Python's generator: rich did,
    as the first ``progress=True`` call loaded it, so a notebook's ``random.seed(0)`` gave other numbers
    after it.  Checked in a fresh interpreter, where those imports happen."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(sfapprox.__file__)),
                                                                      os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", textwrap.dedent(FRESH)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("kept"), done.stdout + done.stderr


def test_logs_off_puts_levels_back_and_never_makes_a_logger_say_more():
    from sfapprox._global_state import logs_off

    quiet, chatty = logging.getLogger("sfapprox-test.quiet"), logging.getLogger("sfapprox-test.chatty")
    quiet.setLevel(logging.ERROR)
    chatty.setLevel(logging.DEBUG)
    try:
        with logs_off(quiet.name, chatty.name, below=logging.WARNING):
            assert (quiet.level, chatty.level) == (logging.ERROR, logging.WARNING)
        assert (quiet.level, chatty.level) == (logging.ERROR, logging.DEBUG)
    finally:
        quiet.setLevel(logging.NOTSET)
        chatty.setLevel(logging.NOTSET)
