"""fit_matrix: the fit-and-save entry point (its writing is tested in test_atomic.py)."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sfapprox import ConvergenceWarning, FitSettings, ParameterError, fit_matrix


def test_unknown_sf_parameters_are_refused_before_the_fit():
    with pytest.raises(ParameterError, match=r"ChordSF has no parameter 'bogus' \(in fit_matrix's keyword arguments\)"):
        fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), bogus=3)


def test_its_convergence_warning_points_at_the_callers_line():
    X = np.random.default_rng(0).standard_normal((32, 32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_matrix(X, settings=FitSettings(max_iter=20, time_limit=None, device="cpu"))
    found = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert found and all(w.filename == __file__ for w in found), [(w.filename, w.lineno) for w in found]


def test_the_methods_that_work_from_columns_are_importable_from_the_package():
    import sfapprox
    from sfapprox._base import methods

    for name in ("RandomizedSVD", "Nystrom", "SparseApproximation", "Monarch"):
        cls = getattr(sfapprox, name)
        assert name in sfapprox.__all__ and methods()[cls._method].access == ("dense", "columns")



def test_a_path_with_kernel_options_is_the_kernel_matrix_in_every_entry_point(tmp_path):
    """compare/sweep/fit_matrix of a points file with LoadOptions(kernel=...) let load_matrix's TypeError
    out ("unexpected keyword argument 'kernel'"): the command line opened it, the API read it as a table."""
    from sfapprox import LoadOptions, compare
    from sfapprox.sources import KernelMatrix
    from sfapprox.sweep import sweep

    points = np.random.default_rng(0).standard_normal((60, 2))
    np.savetxt(tmp_path / "pts.csv", points, delimiter=",")
    load = LoadOptions(kernel="rbf", bandwidth=0.7)
    K = KernelMatrix(points, bandwidth=0.7)
    from_file = compare(tmp_path / "pts.csv", "tsvd", budget=500, load=load).results[0]
    assert from_file.rel_error == pytest.approx(compare(K, "tsvd", budget=500).results[0].rel_error)
    point = sweep(tmp_path / "pts.csv", [500], "tsvd", load=load).points[0].results[0]
    assert point.rel_error == pytest.approx(from_file.rel_error)
    run = fit_matrix(tmp_path / "pts.csv", load=load, settings=FitSettings(max_iter=3, device="cpu"))
    assert run.summary["matrix"] == "pts" and run.summary["n"] == 60


def test_a_factors_file_that_cannot_be_written_costs_itself_alone(tmp_path, factors_too_large):
    """`out` that could not be written (a file too large) skipped the JSON summary after it, and the finished
    fit was lost to the caller."""
    from sfapprox._atomic import OutputError

    out, js = tmp_path / "f.h5", tmp_path / "f.json"
    with pytest.raises(OutputError, match="f.h5: not written: File too large") as caught:
        fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), out=out, json_path=js)
    assert not out.exists() and js.is_file()  # the summary is written all the same
    assert caught.value.run.summary["n"] == 8 and [f.path for f in caught.value.failures] == [out]


def test_the_old_compare_matrix_still_works_with_a_deprecation_note():
    """sfapprox.compare_matrix (removed in 7ce4959 without an alias) is compare, with its old defaults."""
    import sfapprox
    from sfapprox import compare

    X = np.random.default_rng(0).standard_normal((16, 16))
    approximations = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = sfapprox.RunOptions(device="cpu", sf={"max_iter": 5, "time_limit": None})
        old = sfapprox.compare_matrix(X, budget=400, options=options, approximations=approximations)
    notes = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert len(notes) == 2 and notes[1].startswith("sfapprox.compare_matrix is deprecated") and "sfapprox.compare(" in notes[1]
    # every warning, the fit's own included, points at the line that called it
    assert {w.filename for w in caught} == {__file__} and any(w.category is ConvergenceWarning for w in caught)
    new = compare(X, ("sf", "tsvd"), budget=400, settings=FitSettings(device="cpu", max_iter=5, time_limit=None))
    assert [(r.method, r.fro_error) for r in old.results] == [(r.method, r.fro_error) for r in new.results]
    assert sorted(approximations) == ["sf", "tsvd"] and "compare_matrix" not in sfapprox.__all__
    np.testing.assert_array_equal(approximations["sf"], old.result("sf").operator.to_dense())


def test_a_start_saved_from_a_fit_of_another_matrix_is_said_not_counted_as_a_resume(tmp_path):
    """fit --init FILE.h5 of a fit to another kernel of the same points (or another file) went on silently,
    its table saying "(+ 30 before the resume)", where compare --with notes a fit of another matrix."""
    from sfapprox import LoadOptions

    points = np.random.default_rng(0).standard_normal((60, 2))
    np.savetxt(tmp_path / "pts.csv", points, delimiter=",")
    np.savetxt(tmp_path / "other.csv", points + 1.0, delimiter=",")
    settings = FitSettings(max_iter=3, device="cpu", time_limit=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_matrix(tmp_path / "pts.csv", load=LoadOptions(kernel="rbf", bandwidth=0.7), settings=settings,
                   out=tmp_path / "k.h5")
        same = fit_matrix(tmp_path / "pts.csv", load=LoadOptions(kernel="rbf", bandwidth=0.7), settings=settings,
                          init=str(tmp_path / "k.h5"))
        kernel = fit_matrix(tmp_path / "pts.csv", load=LoadOptions(kernel="rbf", bandwidth=2.0), settings=settings,
                            init=str(tmp_path / "k.h5"))
        other = fit_matrix(tmp_path / "other.csv", load=LoadOptions(kernel="rbf", bandwidth=0.7), settings=settings,
                           init=str(tmp_path / "k.h5"))
    assert same.summary["init_note"] is None and same.summary["iterations_before"] > 0  # a resume
    assert "another matrix of this file" in kernel.summary["init_note"] and "bandwidth=2" in kernel.summary["init_note"]
    assert "not to this file" in other.summary["init_note"] and "pts.csv" in other.summary["init_note"]


def test_a_start_saved_from_another_variable_of_the_same_file_is_said(tmp_path):
    """fit --init of a fit to --var A of an .npz, for its --var B, went on as a resume without a word."""
    from sfapprox import ChordSF, load_matrix, save_factors
    from sfapprox.api import _init_note
    from sfapprox.factors import input_record

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "two.npz", A=rng.random((8, 8)), B=rng.random((8, 8)))
    np.savez(tmp_path / "one.npz", A=rng.random((8, 8)))
    for name, var in (("two", "A"), ("one", None)):
        save_factors(tmp_path / f"{name}.h5", ChordSF(max_iter=2).fit(np.eye(8)).operator_,
                     source=input_record(load_matrix(tmp_path / f"{name}.npz", var=var)))
    note = _init_note(str(tmp_path / "two.h5"), input_record(load_matrix(tmp_path / "two.npz", var="B")))
    assert note.startswith(f"the start {tmp_path / 'two.h5'} was fitted to another matrix of this file (var=A; "
                           "this one: var=B): its factors were this fit's start")
    assert _init_note(str(tmp_path / "two.h5"), input_record(load_matrix(tmp_path / "two.npz", var="A"))) is None
    assert _init_note(str(tmp_path / "one.h5"), input_record(load_matrix(tmp_path / "one.npz", var="A"))) is None


def test_a_named_start_is_one_beside_a_file_of_its_name(tmp_path, monkeypatch):
    """fit --init identity in a folder holding a file named "identity": the fit ran from the identity start,
    then its summary read that file as the saved start, and the finished fit ended in "not an HDF5 file",
    exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "identity").write_text("notes\n")
    settings = FitSettings(max_iter=3, device="cpu", time_limit=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run = fit_matrix(np.random.default_rng(0).random((16, 16)), settings=settings, init="identity",
                         out=tmp_path / "f.h5")
    assert run.summary["init"] == "identity" and run.summary["init_note"] is None and (tmp_path / "f.h5").is_file()


def test_a_start_of_another_matrix_is_said_where_the_checkpoints_replace_its_file(tmp_path):
    """fit B --init A.h5 --out A.h5 --checkpoint-every: the note was read after the fit, from the file this fit's
    checkpoints had replaced (naming B), so a fit of another matrix was reported "(+ N before the resume)"."""
    np.save(tmp_path / "a.npy", np.random.default_rng(0).random((32, 32)))
    np.save(tmp_path / "b.npy", np.random.default_rng(1).random((32, 32)))
    path = tmp_path / "f.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_matrix(tmp_path / "a.npy", settings=FitSettings(max_iter=5, device="cpu", time_limit=None), out=path)
        run = fit_matrix(tmp_path / "b.npy", settings=FitSettings(max_iter=10**9, device="cpu", time_limit=1.0),
                         init=str(path), out=path, force=True, checkpoint=path, checkpoint_every=0.05,
                         ftol=0.0, gtol=0.0)
    assert run.summary["iterations_before"] > 0
    assert run.summary["init_note"] and "not to this file" in run.summary["init_note"]


def test_a_fit_resuming_onto_its_own_checkpoint_holds_its_outputs_lock_and_removes_it(tmp_path):
    """fit --init F --out F --force --checkpoint-every: one process reads, checkpoints and writes F under the one
    lock it took before the fit (its holder file naming it), removed at the end."""
    import os

    from sfapprox._output_lock import read_holder_file

    path, holder = tmp_path / "f.h5", tmp_path / ".f.h5.sfapprox-lock.json"
    matrix = np.random.default_rng(0).random((30, 30))
    fit_matrix(matrix, settings=FitSettings(max_iter=5, device="cpu", time_limit=None), out=path)
    seen = []
    run = fit_matrix(matrix, settings=FitSettings(max_iter=30, device="cpu", time_limit=None), init=str(path),
                     out=path, force=True, checkpoint=path, checkpoint_every=0.001,
                     callback=lambda info: seen.append(read_holder_file(holder).get("pid")))
    assert run.summary["iterations_before"] == 5 and seen and set(seen) == {os.getpid()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.h5"]


@pytest.mark.skipif(__import__("os").name != "posix", reason="flock")
def test_a_fit_whose_out_another_process_writes_refuses_before_reading_its_matrix(tmp_path, output_holder):
    from sfapprox._output_lock import OutputBusyError

    path = tmp_path / "f.h5"
    holder = output_holder(path)
    with pytest.raises(OutputBusyError, match=rf"^{re.escape(str(path))}: is being written by another run "
                                              rf"\(pid {holder.pid} on .*; wait for it to end or choose another out=$"):
        fit_matrix(tmp_path / "missing.npy", out=path)  # refused before the read that would fail
    assert not path.exists()


def test_a_checkpoint_of_a_fit_from_another_matrix_s_start_says_so(tmp_path):
    """The checkpoints of fit B --init A.h5 (a fit of another matrix) had no note: info said their iterations
    were "(+ N before the resume)", where the final file says "of the start's fit, of another matrix"."""
    from sfapprox import load_factors
    from sfapprox.describe import describe_factors

    np.save(tmp_path / "a.npy", np.random.default_rng(0).random((32, 32)))
    np.save(tmp_path / "b.npy", np.random.default_rng(1).random((32, 32)))
    start, ck = tmp_path / "a.h5", tmp_path / "ck.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_matrix(tmp_path / "a.npy", settings=FitSettings(max_iter=5, device="cpu", time_limit=None), out=start)
        fit_matrix(tmp_path / "b.npy", settings=FitSettings(max_iter=10**9, device="cpu", time_limit=1.0),
                   init=str(start), checkpoint=ck, checkpoint_every=0.05, ftol=0.0, gtol=0.0)
    fit = load_factors(ck).fit
    assert fit["checkpoint"] and "not to this file" in fit["init_note"]
    assert dict(describe_factors(ck).facts)["iterations"].endswith("of the start's fit, of another matrix)")


def test_a_final_write_that_fails_says_the_last_checkpoint_is_still_there(tmp_path, fake_clock, monkeypatch):
    """A disk that filled after a checkpoint: the final factors' error said "F: not written ...; no partial file
    was left" and no more, where F held the fit's last checkpoint, which resumes it; it says so now."""
    import errno

    import sfapprox.api as api
    from sfapprox import load_factors
    from sfapprox._atomic import OutputError

    path = tmp_path / "f.h5"

    def full(file, *args, **kwargs):  # the final write only (the checkpoints call sfapprox.factors' own)
        raise OutputError(f"{file}: not written: No space left on device; no partial file was left", Path(file),
                          errno.ENOSPC)

    monkeypatch.setattr(api, "save_factors", full)
    settings = FitSettings(max_iter=30, device="cpu", time_limit=None)
    with warnings.catch_warnings(), pytest.raises(OutputError) as info:
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_matrix(np.random.default_rng(0).random((16, 16)), settings=settings, init="reference", out=path,
                   checkpoint=path, checkpoint_every=10.0, callback=lambda state: fake_clock.advance(1.0))
    iterations = load_factors(path).fit["iterations"]
    assert load_factors(path).fit["checkpoint"] and iterations in (10, 20, 30)
    assert str(info.value).endswith(f"; {path} still holds this fit's last checkpoint ({iterations} iterations): "
                                    f"init='{path}' resumes from it")
    # a file it was allowed to replace but never checkpointed into is not said to hold a checkpoint
    other = tmp_path / "g.h5"
    other.write_bytes(b"old")
    with warnings.catch_warnings(), pytest.raises(OutputError) as info:
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_matrix(np.random.default_rng(0).random((16, 16)), settings=settings, out=other, force=True,
                   checkpoint=other, checkpoint_every=1000.0)
    assert str(info.value) == f"{other}: not written: No space left on device; no partial file was left"


def test_a_settings_dict_is_a_parameter_error():
    """fit_matrix(X, settings={...}) was an AttributeError ('dict' object has no attribute 'max_memory')."""
    with pytest.raises(ParameterError, match=r"^settings must be a FitSettings, got dict; pass settings=sfapprox"
                                             r"\.FitSettings\(\.\.\.\)$"):
        fit_matrix(np.eye(8), settings={"max_iter": 5})


def test_a_fits_json_names_its_method_and_budget_as_a_comparisons_rows_do(tmp_path):
    """fit --json had neither ``method`` nor the budget asked (``--budget 0.8``: only the ``nnz`` it came
    to), fields a comparison's rows and a batch's lines carry: a script reading both found them missing."""
    import json

    import numpy as np

    from sfapprox import FitSettings
    from sfapprox.api import fit_matrix

    X = np.random.default_rng(0).standard_normal((32, 32))
    settings = FitSettings(max_iter=3, device="cpu")
    run = fit_matrix(X, settings=settings, budget="0.8", json_path=tmp_path / "f.json")
    record = json.loads((tmp_path / "f.json").read_text())
    assert (record["method"], record["budget"], record["budget_spec"]) == ("sf", 819, "0.8")
    assert record["nnz"] == run.model.n_stored_ <= 819
    plain = fit_matrix(X, settings=settings).summary  # no budget asked: the reference structure
    assert (plain["method"], plain["budget"], plain["budget_spec"]) == ("sf", None, None)


def test_the_top_level_holds_only_public_private_or_submodule_names_and_documents_each_public_one():
    """``sfapprox.Any``, ``sfapprox.importlib`` and ``sfapprox.annotations`` (the package's own helpers)
    were attributes of the package outside ``__all__``; and the module docstring, what ``help(sfapprox)``
    shows first, named neither ``estimate_errors`` nor the error family that ``__all__`` exports."""
    import types

    import sfapprox

    for name, value in vars(sfapprox).items():
        assert (name in sfapprox.__all__ or name.startswith("_")
                or isinstance(value, types.ModuleType) and value.__name__ == f"sfapprox.{name}"), name
    assert dir(sfapprox) == sfapprox.__all__
    for name in sfapprox.__all__:
        assert name.startswith("__") or name in sfapprox.__doc__, name


# What a macOS or Windows user meets, simulated on Linux (CI): no /proc or /sys, none of the POSIX-only
# os functions and flags, no resource/fcntl/termios, and Windows' fsync, which refuses a read-only
# descriptor.  The library imports, loads, compares and saves its factors as on Linux.
ELSEWHERE = r"""
import builtins, errno, io, os, sys, warnings

real_open = builtins.open


def no_proc(file, *args, **kwargs):
    if isinstance(file, (str, os.PathLike)) and os.fspath(file).startswith(("/proc", "/sys")):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", file)
    return real_open(file, *args, **kwargs)


builtins.open = io.open = no_proc
# The standard library's own checks at import see the real platform: asyncio (imported by torch) asks
# os.sysconf("SC_IOV_MAX") where sockets have sendmsg (Python 3.13), which a platform without sysconf
# has not (Windows); imported before the calls go, as it imports there.
import asyncio
for name in ("sched_getaffinity", "sysconf", "O_NONBLOCK", "getuid", "statvfs", "O_NOFOLLOW", "O_DIRECTORY"):
    if hasattr(os, name):
        delattr(os, name)
for module in ("resource", "fcntl", "termios"):
    sys.modules[module] = None
"""


WINDOWS_FSYNC = r"""
import os as _os, errno as _errno
_real_fsync, _writable = _os.fsync, set()
_real_open = _os.open
def _open(path, flags, *args, **kwargs):
    fd = _real_open(path, flags, *args, **kwargs)
    (_writable.add if flags & (_os.O_WRONLY | _os.O_RDWR) else _writable.discard)(fd)
    return fd
def _fsync(fd):
    if hasattr(fd, "fileno"):
        fd = fd.fileno()
    if fd not in _writable:
        raise OSError(_errno.EBADF, "Bad file descriptor")
    _real_fsync(fd)
_os.open, _os.fsync = _open, _fsync
"""

FLOW = r"""
import numpy as np, sfapprox
from sfapprox.operators import ChordOperator
path = sys.argv[1]
np.save(path + "/a.npy", np.random.default_rng(0).standard_normal((32, 32)))
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    loaded = sfapprox.load_matrix(path + "/a.npy")
print([str(w.message)[:40] for w in said if w.category is RuntimeWarning])
result = sfapprox.compare(loaded, ["tsvd", "sparse", "sf"], max_iter=50, time_limit=None)
print(sorted(r.method for r in result.results if r.status == "ok"))
sf = next(r for r in result.results if r.method == "sf")
sfapprox.save_factors(path + "/f.h5", sf.operator)
print(np.allclose(sfapprox.load_factors(path + "/f.h5").to_dense(), sf.operator.to_dense()))
"""


def test_the_library_works_where_linux_only_calls_are_missing(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "elsewhere.py"
    script.write_text(ELSEWHERE + WINDOWS_FSYNC + FLOW)
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    warned, methods, same = done.stdout.strip().splitlines()[-3:]
    # no os.sysconf and not Windows: no memory limit, said once (Windows asks GlobalMemoryStatusEx instead)
    assert warned == "['this system does not tell its physical m']"
    assert methods == "['sf', 'sparse', 'tsvd']" and same == "True"


def test_a_fits_seconds_are_its_whole_turn_as_a_comparison_rows_and_fit_seconds_the_estimators(monkeypatch, tmp_path):
    """`fit --json` and `fit --out`'s record gave the estimator's own clock as ``seconds``, which leaves out
    SF's scoring; a comparison's row of the same fit gives its whole turn. Both now say the same: the wall
    time of the fit and its scoring in ``seconds``, the estimator's own in ``fit_seconds``."""
    import json
    import time

    from sfapprox.sf.model import ChordSF

    scored = ChordSF._scored
    monkeypatch.setattr(ChordSF, "_scored", lambda self, *a, **k: (time.sleep(0.3), scored(self, *a, **k))[1])
    X = np.random.default_rng(0).random((16, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run = fit_matrix(X, settings=FitSettings(max_iter=5, device="cpu"), json_path=tmp_path / "fit.json")
    summary = run.summary
    assert summary["fit_seconds"] == pytest.approx(run.model.seconds_)
    assert summary["seconds"] - summary["fit_seconds"] >= 0.3 * 0.99  # the scoring's sleep, in seconds alone
    # and told apart: the scoring's own seconds hold the sleep; an array given, nothing was formed
    assert summary["scoring_seconds"] >= 0.3 * 0.99 and summary["form_seconds"] is None
    assert summary["fit_seconds"] + summary["scoring_seconds"] <= summary["seconds"]
    saved = json.loads((tmp_path / "fit.json").read_text())
    assert saved["seconds"] == pytest.approx(summary["seconds"]) and saved["fit_seconds"] == pytest.approx(summary["fit_seconds"])


def test_a_fits_display_says_torch_is_loading_while_sfs_module_is_imported(slow_import):
    """`sfapprox fit` imported SF's module (torch with it, 1-2 s) in its options check, before the bar was
    up: a pause with nothing shown. fit_matrix imports it under the fit's display, which says so (as a
    comparison's does); the import is made slow here, as a fresh process's is."""
    slow_import("model", "sfapprox.sf.methods")
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), callback=display)
    assert phases[:2] == ["loading torch", ""], phases


# ---------------------------------------------------------------------------
# every public entry that takes a matrix, given whatever a notebook holds
# ---------------------------------------------------------------------------

_ZOO_BASE = np.random.default_rng(7).standard_normal((6, 6))
_ZOO_INT = np.round(_ZOO_BASE * 10)


def _zoo_memmap(tmp_path, X):
    np.save(tmp_path / "zoo.npy", X)
    return np.load(tmp_path / "zoo.npy", mmap_mode="r")


def _zoo_read_only(X):
    X = X.copy()
    X.setflags(write=False)
    return X


def _zoo_coo_with_repeats(X):
    """``X`` as COO with each entry stored twice, as two halves (repeats summed, as scipy sums them)."""
    c = sp.coo_array(X)
    return sp.coo_array((np.r_[c.data, c.data] / 2, (np.r_[c.row, c.row], np.r_[c.col, c.col])), shape=X.shape)


def _zoo_unsorted_int64(X):
    """``X`` as CSR with int64 indices, each row's columns in reverse order."""
    c = sp.csr_array(X)
    order = np.concatenate([np.arange(c.indptr[i + 1] - 1, c.indptr[i] - 1, -1) for i in range(X.shape[0])])
    out = sp.csr_array((c.data[order], c.indices[order].astype(np.int64), c.indptr.astype(np.int64)), shape=X.shape)
    out.has_sorted_indices = False
    return out


def _torch():
    return pytest.importorskip("torch")


#: name: (the container, made from the tmp_path; the float64 matrix it holds)
ZOO = {
    "big_endian": (lambda tmp: _ZOO_BASE.astype(">f8"), _ZOO_BASE),
    "big_endian_int": (lambda tmp: _ZOO_INT.astype(">i4"), _ZOO_INT),
    "fortran": (lambda tmp: np.asfortranarray(_ZOO_BASE), _ZOO_BASE),
    "strided_view": (lambda tmp: np.repeat(np.repeat(_ZOO_BASE, 2, 0), 2, 1)[::2, ::2], _ZOO_BASE),
    "transposed_view": (lambda tmp: np.ascontiguousarray(_ZOO_BASE.T).T, _ZOO_BASE),
    "negative_strides": (lambda tmp: np.ascontiguousarray(_ZOO_BASE[::-1, ::-1])[::-1, ::-1], _ZOO_BASE),
    "read_only": (lambda tmp: _zoo_read_only(_ZOO_BASE), _ZOO_BASE),
    "memmap": (lambda tmp: _zoo_memmap(tmp, _ZOO_BASE), _ZOO_BASE),
    "numpy_matrix": (lambda tmp: np.asmatrix(_ZOO_BASE), _ZOO_BASE),
    "masked_nothing_masked": (lambda tmp: np.ma.masked_array(_ZOO_BASE), _ZOO_BASE),
    "int8": (lambda tmp: _ZOO_INT.astype(np.int8), _ZOO_INT),
    "uint64": (lambda tmp: np.abs(_ZOO_INT).astype(np.uint64), np.abs(_ZOO_INT)),
    "bool": (lambda tmp: _ZOO_BASE > 0, (_ZOO_BASE > 0).astype(float)),
    "float16": (lambda tmp: _ZOO_BASE.astype(np.float16), _ZOO_BASE.astype(np.float16).astype(float)),
    "float32": (lambda tmp: _ZOO_BASE.astype(np.float32), _ZOO_BASE.astype(np.float32).astype(float)),
    "longdouble": (lambda tmp: _ZOO_BASE.astype(np.longdouble), _ZOO_BASE),
    "list_of_lists": (lambda tmp: _ZOO_BASE.tolist(), _ZOO_BASE),
    # what numpy makes of a pandas frame of nullable dtypes ("Float64", "Int64"): it said "object dtype"
    "object_numbers": (lambda tmp: _ZOO_BASE.astype(object), _ZOO_BASE),
    "object_ints": (lambda tmp: _ZOO_INT.astype(int).astype(object), _ZOO_INT),
    "huge_finite": (lambda tmp: _ZOO_BASE * 1e150, _ZOO_BASE * 1e150),
    "zero": (lambda tmp: np.zeros((6, 6)), np.zeros((6, 6))),
    "one_by_one": (lambda tmp: np.array([[2.5]]), np.array([[2.5]])),
    "two_by_two": (lambda tmp: _ZOO_BASE[:2, :2].copy(), _ZOO_BASE[:2, :2]),
    "torch_requires_grad": (lambda tmp: _torch().tensor(_ZOO_BASE, requires_grad=True), _ZOO_BASE),
    "torch_transposed": (lambda tmp: _torch().tensor(_ZOO_BASE).T.contiguous().T, _ZOO_BASE),
    "torch_float16": (lambda tmp: _torch().tensor(_ZOO_BASE).half(), _ZOO_BASE.astype(np.float16).astype(float)),
    "torch_bfloat16": (lambda tmp: _torch().tensor(_ZOO_BASE).bfloat16(),
                       _torch().tensor(_ZOO_BASE).bfloat16().double().numpy()),
    "torch_sparse_coo": (lambda tmp: _torch().tensor(_ZOO_BASE).to_sparse(), _ZOO_BASE),
    "torch_sparse_csr": (lambda tmp: _torch().tensor(_ZOO_BASE).to_sparse_csr(), _ZOO_BASE),
    **{f"scipy_{fmt}": ((lambda fmt: lambda tmp: _zoo_coo_with_repeats(_ZOO_BASE).asformat(fmt))(fmt), _ZOO_BASE)
       for fmt in ("coo", "csr", "csc", "bsr", "dia", "dok", "lil")},
    "scipy_lil_matrix": (lambda tmp: sp.lil_matrix(_ZOO_BASE), _ZOO_BASE),
    "scipy_int64_unsorted": (lambda tmp: _zoo_unsorted_int64(_ZOO_BASE), _ZOO_BASE),
    "scipy_int": (lambda tmp: sp.csr_array(_ZOO_INT.astype(np.int64)), _ZOO_INT),
    "linear_operator": (lambda tmp: __import__("scipy.sparse.linalg").sparse.linalg.aslinearoperator(_ZOO_BASE),
                        _ZOO_BASE),
}

_ZOO_SETTINGS = dict(max_iter=2, device="cpu", time_limit=None)


def _zoo_compare(X):
    from sfapprox import compare

    return [r.fro_error for r in compare(X, "tsvd,sparse", budget=30, device="cpu").results]


def _zoo_sweep(X):
    from sfapprox.sweep import sweep

    return [r.fro_error for point in sweep(X, [30], "tsvd").points for r in point.results]


def _zoo_fit_matrix(X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return [fit_matrix(X, settings=FitSettings(**_ZOO_SETTINGS)).summary["fro_error"]]


def _zoo_estimator(make):
    def fit(X):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return make().fit(X).to_dense()
    return fit


def _zoo_fit_sf(X):
    from sfapprox import fit_sf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_sf(X, **_ZOO_SETTINGS).to_dense()


def _zoo_frobenius(X):
    from sfapprox import frobenius_error

    return [*frobenius_error(X, 0.5 * _reference_of(X)), *frobenius_error(_reference_of(X), X)]


def _zoo_describe(X):
    from sfapprox.describe import describe

    facts = describe(X).data
    return [facts["sf"]["count"], facts["methods"]["tsvd"]["min_budget"]]


def _zoo_kernel(X):
    from sfapprox.sources import KernelMatrix

    return KernelMatrix(X, bandwidth=3.0).to_dense()


def _reference_of(X):
    """The float64 matrix of ``X``'s shape this zoo made it from (a frobenius_error's other argument)."""
    shape = tuple(getattr(X, "shape", np.shape(X)))
    return {shape: ref for _, ref in ZOO.values()}.get(shape, _ZOO_BASE)


#: What a kernel's point table refuses, saying so, where a matrix entry takes it: a torch sparse tensor or an
#: operator is no table of coordinates, and booleans are no coordinates (scipy sparse tables are densified).
_NO_POINT_TABLE = {"bool", "torch_sparse_coo", "torch_sparse_csr", "linear_operator"}


ZOO_ENTRIES = {
    "compare": _zoo_compare,
    "sweep": _zoo_sweep,
    "fit_matrix": _zoo_fit_matrix,
    "fit_sf": _zoo_fit_sf,
    "ChordSF.fit": _zoo_estimator(lambda: __import__("sfapprox").ChordSF(**_ZOO_SETTINGS)),
    "TruncatedSVD.fit": _zoo_estimator(lambda: __import__("sfapprox").TruncatedSVD(budget=30)),
    "SparseApproximation.fit": _zoo_estimator(lambda: __import__("sfapprox").SparseApproximation(budget=30)),
    "frobenius_error": _zoo_frobenius,
    "describe": _zoo_describe,
    "KernelMatrix(points)": _zoo_kernel,
}


def _snapshot(X):
    """A copy of ``X``'s values, to check that no entry wrote to the caller's array."""
    if hasattr(X, "detach"):
        return X.detach().to_dense().double().numpy().copy()
    if sp.issparse(X):
        return (X.format, X.toarray())
    return None if not isinstance(X, (np.ndarray, list)) else np.array(X, dtype=np.float64)


def _same_numbers(got, want) -> bool:
    got, want = list(np.ravel(np.asarray(got, dtype=object))), list(np.ravel(np.asarray(want, dtype=object)))
    return len(got) == len(want) and all((a is None) == (b is None) and (a is None or np.isclose(a, b, rtol=1e-9,
                                                                                                 atol=1e-12))
                                         for a, b in zip(got, want))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy's own, on np.matrix: a user's container
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")  # torch's own, on a user's tensor
@pytest.mark.parametrize("container", list(ZOO))
@pytest.mark.parametrize("entry", list(ZOO_ENTRIES))
def test_every_entry_gives_the_same_numbers_for_every_container_of_a_matrix_or_says_why(tmp_path, entry,
                                                                                        container):
    """What a notebook holds is read as the float64 C-contiguous matrix it holds: the same numbers as for
    that plain copy, or an SfapproxError where the plain copy is refused too (or, for a container read by its
    products, where the entry needs the entries), never another library's error, and the caller's array
    as it was."""
    from sfapprox import SfapproxError

    run = ZOO_ENTRIES[entry]
    make, plain = ZOO[container]
    X = make(tmp_path)
    before = _snapshot(X)
    try:
        want = run(np.ascontiguousarray(plain, dtype=np.float64))
    except SfapproxError as refused:
        with pytest.raises(type(refused)):
            run(X)
    else:
        try:
            got = run(X)
        except SfapproxError as exc:
            assert entry == "KernelMatrix(points)" and container in _NO_POINT_TABLE, exc
        else:
            assert _same_numbers(got, want), (got, want)
    after = _snapshot(X)
    if isinstance(before, tuple):
        assert after[0] == before[0]
        np.testing.assert_array_equal(after[1], before[1])
    elif before is not None:
        np.testing.assert_array_equal(after, before)


#: name: (the input, what its one-line refusal says)
ZOO_REFUSED = {
    "masked": (lambda: np.ma.masked_array(_ZOO_BASE, mask=_ZOO_BASE > 1), r"masked array with \d+ masked entr"),
    "complex": (lambda: _ZOO_BASE + 1j, r"complex matrices are not supported"),
    "complex_zero_imaginary": (lambda: _ZOO_BASE + 0j, r"complex matrices are not supported"),
    "complex_sparse": (lambda: sp.csr_array(_ZOO_BASE + 1j), r"complex matrices are not supported"),
    "complex_torch": (lambda: _torch().tensor(_ZOO_BASE + 1j), r"complex matrices are not supported"),
    "strings": (lambda: _ZOO_BASE.astype(str), r"non-numeric dtype"),
    "objects": (lambda: np.where(_ZOO_BASE > 1, None, _ZOO_BASE.astype(object)),
                r"entry \[\d+, \d+\] of the matrix is None \(NoneType\), not a number \(object dtype\); "
                r"a missing value: fill or drop it first"),
    "object_strings": (lambda: _ZOO_BASE.astype(str).astype(object), r"entry \[0, 0\] of the matrix is '-?\d.*' \(str\)"),
    "scalar": (lambda: np.float64(3.0), r"matrix must be 2-D, got a 0-D array"),
    "vector": (lambda: np.ones(36), r"reshape it \(X.reshape\(6, 6\)\)"),
    "three_d": (lambda: np.ones((2, 6, 6)), r"matrix must be 2-D, got a 3-D array"),
    "image_channel": (lambda: np.ones((6, 6, 1)), r"drop its axes of length 1"),
    "torch_three_d": (lambda: _torch().ones((1, 6, 6)), r"matrix must be 2-D, got a 3-D array"),
    "empty": (lambda: np.zeros((0, 0)), r"matrix is empty"),
    "empty_sparse": (lambda: sp.csr_array((0, 0)), r"matrix is empty"),
    "not_square": (lambda: np.ones((6, 5)), r"matrix is not square"),
    "not_square_operator": (lambda: __import__("scipy.sparse.linalg").sparse.linalg.aslinearoperator(np.ones((6, 5))),
                            r"a square operator is needed, got shape 6 x 5"),
    "complex_operator": (lambda: __import__("scipy.sparse.linalg").sparse.linalg.aslinearoperator(_ZOO_BASE + 1j),
                         r"complex"),
    "ragged": (lambda: [[1.0, 2.0], [3.0]], r"cannot convert input to an array"),
    "nan": (lambda: np.where(np.eye(6, dtype=bool), np.nan, _ZOO_BASE), r"NaN/Inf entr"),
    "inf_sparse": (lambda: sp.csr_array(np.where(np.eye(6, dtype=bool), np.inf, _ZOO_BASE)), r"NaN/Inf entr"),
    "near_float64_max": (lambda: _ZOO_BASE / np.abs(_ZOO_BASE).max() * 1.7e308, r"values too large"),
    "squares_overflow": (lambda: _ZOO_BASE * 1e200, r"values too large"),
    "none": (lambda: None, r"a matrix is needed"),
}


@pytest.mark.parametrize("name", list(ZOO_REFUSED))
@pytest.mark.parametrize("entry", [e for e in ZOO_ENTRIES if e not in ("frobenius_error", "KernelMatrix(points)")])
def test_every_entry_refuses_what_is_no_real_square_matrix_in_one_line_saying_what_to_do(entry, name):
    from sfapprox import SfapproxError

    make, match = ZOO_REFUSED[name]
    with pytest.raises(SfapproxError, match=match) as caught:
        ZOO_ENTRIES[entry](make())
    assert "\n" not in str(caught.value)


def test_a_fit_run_shows_as_one_short_line():
    """fit_matrix's FitRun showed as a dataclass: the estimator and every field of the summary, 800-850
    characters on one line in a notebook (N = 30 and 3,000)."""
    from sfapprox import fit_matrix

    X = np.random.default_rng(3).standard_normal((16, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ConvergenceWarning of a 3-iteration fit
        run = fit_matrix(X, max_iter=3, time_limit=None, device="cpu")
    said = repr(run)
    assert "\n" not in said and len(said) < 160, said
    assert re.fullmatch(r"<FitRun sf of X \(N=16\): stored [\d,]+, fro_error \S+, rel_error \S+, 3 iterations "
                        r"\(max_iter\), \d+\.\d\d s>", said), said
    assert f"rel_error {run.summary['rel_error']:.4g}," in said
