"""fit_matrix: the fit-and-save entry point (its writing is tested in test_atomic.py)."""

import warnings

import numpy as np
import pytest

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
