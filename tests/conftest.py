"""Shared fixtures: the real matrices of ../shared/realdata (skipped when absent)."""

from __future__ import annotations

import signal
import sys
import warnings
from pathlib import Path

import pytest

from sfapprox import _timing

# A test run started in the background of a non-interactive shell (`pytest &`, nohup) inherits
# SIGINT ignored, and sfapprox keeps an ignored SIGINT ignored (as Python does): the Ctrl-C tests
# would then test nothing.  Run them as a foreground run would, here and in the CLIs they start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REALDATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata").resolve()


@pytest.fixture(scope="session")
def realdata() -> Path:
    """Folder of the paper's real matrices; skips the test when it is absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"{REALDATA} not present (real-data tests run only where it is)")
    return REALDATA


@pytest.fixture(autouse=True)
def _no_convergence_warnings():
    # Short fits in tests stop on max_iter by design; the warning is tested on its own.
    from sfapprox import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


@pytest.fixture(autouse=True)
def _notes_not_quiet_after():
    # A command run in-process with --quiet (CliRunner, a parsed option set) leaves the notes quiet until
    # the next command starts; a test calling a CLI helper directly after it saw no notes (order-dependent).
    yield
    render = sys.modules.get("sfapprox.cli._render")
    if render is not None:
        render.quiet_notes(False)


@pytest.fixture(params=["numba", "scipy"])
def backend(request, monkeypatch):
    """Run a test once per apply backend (scipy's mmio/fmm habit: both implementations, the same tests)."""
    from sfapprox.operators import _chord_apply as _apply

    if request.param == "numba" and not _apply._numba_kernels():
        pytest.skip("numba is not available")
    monkeypatch.setattr(_apply, "BACKEND", request.param)
    return request.param


#: A clock for time-limit decisions that moves only when a test says so (``advance``).
FakeClock = _timing.ManualClock


@pytest.fixture
def fake_clock(monkeypatch) -> FakeClock:
    """Replace the clock every time-limit decision reads (:data:`sfapprox._timing.clock`)."""
    from sfapprox import _timing

    clock = FakeClock()
    monkeypatch.setattr(_timing, "clock", clock)
    return clock


@pytest.fixture
def slow_sparse_products(fake_clock, monkeypatch):
    """``patch(X)``: each product of a block with a part of the scipy sparse ``X`` (its rows, its transpose, a
    multiple of it) "takes" that part's share of ``X``'s non-zeros in seconds of :func:`fake_clock`: a whole
    product 1 s.  Returns the list of each product's seconds."""
    import numpy as np
    import scipy.sparse as sp

    seconds: list[float] = []

    def patch(X) -> list[float]:
        total = X.nnz
        for cls in (sp.csr_array, sp.csc_array, sp.csr_matrix, sp.csc_matrix):
            real = cls.__matmul__

            def slow(self, other, real=real):
                if isinstance(other, np.ndarray) and other.ndim == 2:
                    seconds.append(self.nnz / total)
                    fake_clock.advance(seconds[-1])
                return real(self, other)

            monkeypatch.setattr(cls, "__matmul__", slow)
        return seconds

    return patch


@pytest.fixture
def factors_too_large(monkeypatch) -> None:
    """Every factors file (HDF5) fails as on ``ulimit -f``: File too large (the other outputs are written)."""
    import errno

    import sfapprox._atomic as atomic

    real_fsync = atomic._fsync

    def fsync(path):
        if ".h5." in Path(path).name:
            raise OSError(errno.EFBIG, "File too large")
        real_fsync(path)

    monkeypatch.setattr(atomic, "_fsync", fsync)


class Blocked(Exception):
    """A test's call blocked (a named pipe opened with no other end): raised by :func:`no_hang`."""


@pytest.fixture
def no_hang():
    """Fail, instead of hanging the run, a test whose code blocks for more than 60 s (SIGALRM)."""
    def blocked(signum, frame):
        raise Blocked("blocked for 60 s (a named pipe opened with no other end?)")

    before = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


@pytest.fixture
def slow_power_iterations(fake_clock, monkeypatch):
    """A randomized SVD forced on small matrices, each product of its range finder "taking" 1 s of
    :func:`fake_clock`: ``patch(module)`` sets the module's and :mod:`~sfapprox.baselines.tsvd`'s ``EXACT_MAX_N``
    to 8 and spies on tsvd's ``_randomized_svd_within`` (what :func:`~sfapprox.baselines.tsvd.leading_svd`
    calls); it returns the list of the power iterations each such SVD ran."""
    import numpy as np

    from sfapprox.baselines import tsvd

    done: list[int] = []
    within = tsvd._randomized_svd_within

    def spy(*args, **kwargs):
        out = within(*args, **kwargs)
        done.append(None if out is None else out[3])  # (None: it gave up, its products unpaid)
        return out

    real_qr = np.linalg.qr

    def slow_qr(*a, **k):  # each product of the range finder is followed by its QR
        fake_clock.advance(1.0)
        return real_qr(*a, **k)

    monkeypatch.setattr(np.linalg, "qr", slow_qr)

    def patch(module) -> list[int]:
        # the start SVDs' rule lives in tsvd (leading_svd); the module's own uses of the threshold follow it
        for owner in {module, tsvd}:
            if hasattr(owner, "EXACT_MAX_N"):
                monkeypatch.setattr(owner, "EXACT_MAX_N", 8)
        monkeypatch.setattr(tsvd, "_randomized_svd_within", spy)
        return done

    return patch


@pytest.fixture
def fake_cgroup(tmp_path, monkeypatch):
    """A fake cgroup tree: ``make(proc, files, mountinfo="")`` writes ``proc`` as this process's
    ``/proc/self/cgroup``, ``mountinfo`` as its ``/proc/self/mountinfo`` (``{root}`` in it: the tree's
    folder; empty: no cgroup mount listed, so the usual folders are read) and ``files`` (path under the
    cgroup root -> text or bytes), and points sfapprox._resources at them (on a Linux as far as it can
    tell).  Returns the root folder."""
    from sfapprox import _resources

    root = tmp_path / "sys-fs-cgroup"
    root.mkdir()

    def make(proc: str, files: dict | None = None, mountinfo: str | bytes = "") -> Path:
        (tmp_path / "proc-self-cgroup").write_text(proc)
        if isinstance(mountinfo, str):
            escaped = str(root).replace("\\", "\\134").replace(" ", "\\040")  # as the kernel writes a path
            mountinfo = mountinfo.replace("{root}", escaped).encode()
        (tmp_path / "proc-self-mountinfo").write_bytes(mountinfo)
        for name, content in (files or {}).items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return root

    monkeypatch.setattr(_resources, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(_resources, "PROC_CGROUP", str(tmp_path / "proc-self-cgroup"))
    monkeypatch.setattr(_resources, "PROC_MOUNTINFO", str(tmp_path / "proc-self-mountinfo"))
    monkeypatch.setattr(sys, "platform", "linux")
    make("")  # no cgroup until a test makes one
    return make


@pytest.fixture
def slow_import(monkeypatch):
    """``slow_import(name, importer, seconds=0.8)``: ``from .name import ...`` in module ``importer`` made
    ``seconds`` slower, as a fresh process's import of torch with SF's module is (1.2-4 s)."""
    import builtins
    import time

    real = builtins.__import__

    def make_slow(name: str, importer: str, seconds: float = 0.8) -> None:
        def slow(module, globals=None, locals=None, fromlist=(), level=0):
            if level and module == name and (globals or {}).get("__name__") == importer:
                time.sleep(seconds)
            return real(module, globals, locals, fromlist, level)

        monkeypatch.setattr(builtins, "__import__", slow)

    return make_slow


_OUTPUT_HOLDER = """
import sys
from sfapprox._output_lock import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def output_holder():
    """``start(path)``: a process that holds the lock of the output ``path`` (as a fit writing it does) until
    the test ends or kills it; returns the process, once it holds the lock."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs: list[subprocess.Popen] = []

    def start(path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", _OUTPUT_HOLDER, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=env)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "locked"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
