"""Optional compiled modules (sfapprox._compiled): what happens where numba cannot cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from sfapprox import _compiled

PACKAGE = Path(__file__).resolve().parents[1] / "sfapprox"

_PROBE = """
import warnings
warnings.simplefilter("always")
from sfapprox.sf import _kernels, _solver
from sfapprox.operators import _chord_apply
print("kernels", bool(_kernels._numba_module()))
print("apply", bool(_chord_apply._numba_kernels()))
print("host", _solver._host_math().__name__)
"""


def _read_only_install(tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the package and an environment in which numba finds no writable cache folder: the
    modules' ``__pycache__`` are files (so not writable even by root), ``$HOME`` and ``$XDG_CACHE_HOME``
    lie under a file, ``NUMBA_CACHE_DIR`` is unset; the temporary folder is the test's own."""
    root = tmp_path / "install"
    shutil.copytree(PACKAGE, root / "sfapprox", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("sf", "operators"):
        (root / "sfapprox" / folder / "__pycache__").write_text("")
    (tmp_path / "a-file").write_text("")
    (tmp_path / "temp").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(root), HOME=str(tmp_path / "a-file" / "home"),
               XDG_CACHE_HOME=str(tmp_path / "a-file" / "cache"), TMPDIR=str(tmp_path / "temp"),
               OMP_NUM_THREADS="1")
    return root, env


def test_without_a_writable_cache_folder_the_kernels_cache_in_a_private_one_said_once(tmp_path):
    pytest.importorskip("numba")
    root, env = _read_only_install(tmp_path)
    first = subprocess.run([sys.executable, "-c", _PROBE], cwd=root, env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    # numba refused cache=True and every compiled path was dropped, with "Reinstall numba"
    assert first.stdout.split() == ["kernels", "True", "apply", "True", "host", "sfapprox.sf._solver_numba"]
    assert "Reinstall" not in first.stderr and "failed" not in first.stderr
    assert first.stderr.count("no writable folder for its cache") == 1, first.stderr
    folder = tmp_path / "temp" / f"sfapprox-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    assert str(folder) in first.stderr and any(folder.iterdir())
    second = subprocess.run([sys.executable, "-c", _PROBE], cwd=root, env=env, capture_output=True, text=True,
                            timeout=300)
    assert second.stdout == first.stdout
    assert "warning" not in second.stderr.lower(), second.stderr  # the folder is in use: nothing new to say


_PRIVATE_PROBE = """
import os, sys
import numpy as np
from numba.core import config
from sfapprox.sf import _kernels, _solver
_solver._host_math()
from sfapprox.sf import _solver_numba
_solver_numba.dot(np.ones(4), np.ones(4))  # compiled, or loaded from the private folder
sys.path.insert(0, sys.argv[1])
import user_numba  # the user's own numba function, in a folder numba can cache next to
user_numba.twice(1.0)
print("environ", os.environ.get("NUMBA_CACHE_DIR"))
print("config", repr(config.CACHE_DIR))
print("kernels", _solver_numba.dot._cache.cache_path)
print("hits", len(_solver_numba.dot.stats.cache_hits))
print("user", user_numba.twice._cache.cache_path)
"""


def test_the_private_cache_folder_is_the_kernels_own_not_the_environments(tmp_path):
    """NUMBA_CACHE_DIR was set in os.environ: the user's own numba functions (and every process the user
    started after) cached in sfapprox's private folder too.  Now only sfapprox's kernels use it."""
    pytest.importorskip("numba")
    root, env = _read_only_install(tmp_path)
    user = tmp_path / "user"
    user.mkdir()
    (user / "user_numba.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    runs = [subprocess.run([sys.executable, "-c", _PRIVATE_PROBE, str(user)], cwd=root, env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    folder = tmp_path / "temp" / f"sfapprox-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    for run in runs:
        assert run.returncode == 0, run.stderr
        said = dict(line.split(" ", 1) for line in run.stdout.splitlines())
        assert said["environ"] == "None" and said["config"] == "''"  # the environment and numba's config as they were
        assert Path(said["kernels"]).is_relative_to(folder)
        assert Path(said["user"]) == user / "__pycache__"  # numba's own choice for the user's function
    assert said["hits"] == "1"  # the second run loaded the kernel from the private folder


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="folder owners are POSIX")
def test_a_cache_folder_others_can_write_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / f"sfapprox-numba-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)  # numba's cache files are pickles: another user could have put code there
    path, lasting = _compiled._private_folder()
    assert Path(path) != planted and Path(path).parent == tmp_path and not lasting
    assert os.stat(path).st_mode & 0o077 == 0
    planted.chmod(0o700)
    assert _compiled._private_folder() == (str(planted), True)


def test_a_cache_folder_failure_names_numba_cache_dir_not_a_reinstall():
    module = _compiled.CompiledModule("json", "demo kernels", "numpy")
    error = RuntimeError("cannot cache function 'f': no locator available for file '/ro/f.py'")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module.failed(error)
    (warning,) = seen
    assert "NUMBA_CACHE_DIR" in str(warning.message) and "Reinstall" not in str(warning.message)
    assert module.get() is False


@pytest.mark.parametrize("code, advice", [
    ("EFBIG", "larger than the file system holding /cache takes"),
    ("EROFS", "the file system holding /cache is read-only; choose a folder on another one"),
    ("ENOSPC", "the file system holding /cache is full; free some space"),
])
def test_kernels_whose_cache_cannot_be_written_say_so_not_reinstall_numba(monkeypatch, code, advice):
    """numba failing to write its cache (a file over ``ulimit -f``, a read-only or full disk) was answered
    with "Reinstall numba to restore them", which cannot help."""
    import errno
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    module = _compiled.CompiledModule("sfapprox.no_such_module", "demo kernels", "numpy")
    number = getattr(errno, code)
    with pytest.warns(RuntimeWarning) as caught:
        module.failed(OSError(number, os.strerror(number), "/cache/kernels.nbi"))
    [warning] = caught
    message = str(warning.message)
    assert module.module is False and "Reinstall" not in message
    assert f"numba could not write its cache of them: {advice}" in message and "NUMBA_CACHE_DIR sets its folder" \
        in message, message


_UNWRITABLE_PROBE = """
import resource, sys, warnings
warnings.simplefilter("always")
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))  # numba's cache files are larger
import numpy as np
import sfapprox
from sfapprox.sf import _kernels, _solver
from sfapprox.operators import _chord_apply
sf = sfapprox.ChordSF(max_iter=5, device="cpu").fit(np.random.default_rng(0).standard_normal((16, 16)))
_chord_apply.warm_up_block_kernel()  # the apply kernels (a CPU scoring above TORCH_DENSE_MAX_N)
print("kernel", sf.kernel_, bool(_kernels._numba_module()))
print("host", _solver._host_math().__name__, "loop_failed", _solver._LOOP_FAILED)
print("apply", _chord_apply.backend())
"""


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="RLIMIT_FSIZE is POSIX")
def test_kernels_whose_cache_cannot_be_written_run_compiled_not_cached(tmp_path):
    """A cache write that failed (here a file over ``ulimit -f``) gave the compiled kernels up for the
    process: the fit's later evaluations, its L-BFGS bookkeeping and iterations ran on numpy/torch, several
    times slower.  The kernels now run compiled, only not cached, and one note says they compile again."""
    pytest.importorskip("numba")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", _UNWRITABLE_PROBE], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["kernel", "numba", "True", "host", "sfapprox.sf._solver_numba", "loop_failed",
                                  "False", "apply", "numba"], run.stderr
    assert "failed" not in run.stderr and "falling back" not in run.stderr, run.stderr
    assert run.stderr.count("could not write its cache") == 1, run.stderr
    assert "compiles them again" in run.stderr and "ulimit -f" in run.stderr, run.stderr
    assert "<string>:" in run.stderr  # the note names the user's line, not numba's or sfapprox's


_SAVES = """
import numba


@numba.njit(cache=True)
def twice(x):
    return 2 * x


@numba.njit(cache=True)
def thrice(x):
    return 3 * x
"""


def test_a_failed_cache_write_is_said_once_and_the_compiled_code_used(tmp_path, monkeypatch):
    """The same, in-process: numba adds a compiled overload before saving it, so a failed save need not
    lose it; the first failure is said once, and no later save is tried."""
    pytest.importorskip("numba")
    import errno

    (tmp_path / "nc_saves.py").write_text(_SAVES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None, raising=False)
    module = _compiled.import_compiled("nc_saves")
    monkeypatch.setitem(sys.modules, "nc_saves", module)  # removed again after the test
    tried = []

    def full(name, data):
        tried.append(name)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "__pycache__" / name))

    for function in (module.twice, module.thrice):
        monkeypatch.setattr(function._cache._cache_file, "_save_data", full)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert module.twice(2.0) == 4.0 and module.thrice(2.0) == 6.0
    (warning,) = seen
    message = str(warning.message)
    assert "is full" in message and "compiles them again" in message and warning.filename == __file__, message
    assert len(tried) == 1 and isinstance(_compiled.CACHE_WRITE_ERROR, OSError)
    assert module.twice.signatures and module.thrice.signatures  # compiled, and kept in memory


@pytest.mark.parametrize("passed_on", [True, False])
def test_a_failed_cache_write_passed_on_is_not_said_here(monkeypatch, passed_on):
    """A batch's worker passes its failed write to its parent (CACHE_WRITE_REPORT), which says it once for
    every worker; one it could not pass on is said where it happened."""
    import errno

    reported = []
    monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
    monkeypatch.setattr(_compiled, "CACHE_WRITE_REPORT", lambda exc: reported.append(exc) or passed_on,
                        raising=False)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/cache/kernels.nbi")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _compiled.cache_not_written(full)
        _compiled.cache_not_written(full)  # a later failure: neither passed on nor said again
    assert reported == [full] and len(seen) == (0 if passed_on else 1)


def test_a_threads_notes_on_numbas_cache_go_to_its_own_report(monkeypatch):
    """A Dask worker runs tasks of different batches side by side, on threads: each task's notes go to its
    own batch (reports_to, per thread), another thread's are said as before; the folder note is said once
    in a process, however many workers send it."""
    import errno
    import threading
    import warnings

    from sfapprox import _compiled

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/cache/sfapprox/kernels.nbi")
    for name in ("CACHE_WRITE_ERROR", "CACHE_WRITE_REPORT", "CACHE_FOLDER_REPORT"):
        monkeypatch.setattr(_compiled, name, None)
    monkeypatch.setattr(_compiled, "_FOLDER_NOTES_SAID", set())
    told: list = []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with _compiled.reports_to(lambda exc: told.append(exc) or True, lambda note: told.append(note) or True):
            _compiled.cache_not_written(full)
            assert told == [full] and said == []
            monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
            other = threading.Thread(target=_compiled.cache_not_written, args=(full,))
            other.start()
            other.join()
        assert told == [full] and len(said) == 1 and "is full" in str(said[0].message)  # said by the other
        for _ in range(2):
            _compiled.no_cache_folder("sfapprox: numba found no writable folder ...")
        assert len(said) == 2


def test_a_folder_note_is_said_once_whatever_each_workers_own_folder(monkeypatch, tmp_path):
    """Where another user holds the usual folder, each process makes its own (mkdtemp): a batch's 8 workers
    sent 8 notes differing only in their folder, and the batch said all 8, as 8 notes.  Said once, by kind;
    a note of another kind (its folder kept, or another NUMBA_CACHE_DIR) is still said."""
    monkeypatch.setattr(_compiled, "_FOLDER_NOTES_SAID", set())
    monkeypatch.setattr(_compiled, "CACHE_FOLDER_REPORT", None)
    monkeypatch.setattr(_compiled, "CACHE_FOLDER", None)
    monkeypatch.setattr(_compiled, "CACHE_FOLDER_NOTE", None)
    notes = []
    for lasting, given in ((False, None), (False, None), (False, None), (True, None), (False, "/ro")):
        if given:
            monkeypatch.setenv("NUMBA_CACHE_DIR", given)
        else:
            monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
        folder = tempfile.mkdtemp(dir=tmp_path)  # (a fresh one, as each worker's)
        monkeypatch.setattr(_compiled, "_private_folder", lambda f=folder, k=lasting: (f, k))
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            _compiled._cache_in_private_folder()
        notes.append([str(w.message) for w in said])
    assert [len(n) for n in notes] == [1, 0, 0, 1, 1]
    assert "each process its own" in notes[0][0] and "kept for later runs" in notes[3][0]
    assert "NUMBA_CACHE_DIR (/ro) is not writable" in notes[4][0]


def test_a_modules_first_import_is_charged_to_no_time_limit(monkeypatch):
    """numba's start (0.3-0.5 s once a process) is once-per-process work (``_timing.one_time``): a comparison's
    SF row under ``--time-limit 0.3`` spent it in its memory check, before its fit, and made no iteration."""
    import time

    from sfapprox import _timing

    def slow_import(name):
        time.sleep(0.3)
        return sys.modules[__name__]

    monkeypatch.setattr(_compiled, "import_compiled", slow_import)
    module = _compiled.CompiledModule("sfapprox.slow_demo_kernels", "demo kernels", "numpy")
    wall, work = _timing.now(), _timing.work_now()
    assert module.get() is sys.modules[__name__]
    assert _timing.now() - wall >= 0.3
    assert _timing.work_now() - work < 0.1
