"""Factor files (HDF5): round trip, matvec, refusals, older files."""

import json
import os
import tempfile

import h5py
import numpy as np
import pytest

from sfapprox import ChordSF, InputError, ParameterError, load_factors, save_factors
from sfapprox.operators import ChordOperator


def test_h5_round_trip_and_matvec(tmp_path):
    X = np.random.default_rng(0).random((24, 24))
    sf = ChordSF(max_iter=30, device="cpu").fit(X)
    path = tmp_path / "f.h5"
    save_factors(path, sf.operator_, loss_history=sf.loss_curve_, fit={"fro_error": sf.fro_error_},
                 settings={"max_iter": 30}, source={"name": "x", "sha256": "abc"})
    saved = load_factors(path)
    assert np.array_equal(saved.operator.values, sf.factors_)
    assert np.array_equal(saved.operator.offsets, sf.offsets_)
    assert np.allclose(saved.loss_history, sf.loss_curve_)
    assert saved.fit["fro_error"] == pytest.approx(sf.fro_error_)
    assert saved.source == {"name": "x", "sha256": "abc"}
    assert "torch" in saved.versions and saved.n == 24 and saved.n_stored == sf.n_stored_
    x = np.random.default_rng(1).random(24)
    D = sf.to_dense()
    assert np.allclose(saved.matvec(x), D @ x) and np.allclose(saved.rmatvec(x), D.T @ x)
    assert np.allclose(saved.to_dense(), D)
    assert np.allclose(saved.aslinearoperator() @ x, D @ x)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_load_factors_rejects_other_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_factors(tmp_path / "none.h5")
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = 1
    with pytest.raises(InputError, match="not an sfapprox factors file"):
        load_factors(other)
    garbage = tmp_path / "garbage.h5"
    garbage.write_bytes(b"not hdf5 at all")
    with pytest.raises(InputError, match="garbage.h5"):
        load_factors(garbage)


def _legacy(path, values, offsets, **attrs):
    """A file as sfapprox wrote it before format version 4."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "sfapprox-chord-factors"
        f.attrs["format_version"] = 1
        f.attrs["n"] = values.shape[1]
        f.attrs["n_factors"] = values.shape[0]
        for key, value in attrs.items():
            f.attrs[key] = value
        f["values"], f["offsets"], f["loss_history"] = values, offsets, np.zeros(0)
        for key in ("fit", "settings", "source", "versions"):
            f.attrs[key] = "{}"


def test_files_of_earlier_versions_still_load(tmp_path):
    # Version 1 had no "support" attribute: its factors are offset-based (Chord).

    op = ChordOperator(np.random.default_rng(0).random((3, 8, 4)))
    _legacy(tmp_path / "old.h5", op.values, op.offsets)
    saved = load_factors(tmp_path / "old.h5")
    assert saved.operator.support == "chord" and saved.kind == "sf"
    assert np.array_equal(saved.operator.offsets, [0, 1, 2, 4])
    assert np.allclose(saved.to_dense(), op.to_dense())


def test_files_describe_themselves_and_the_readme_rebuilds_them(tmp_path):
    X = np.random.default_rng(3).random((12, 12))
    sf = ChordSF(max_iter=20, device="cpu").fit(X)
    path = tmp_path / "f.h5"
    save_factors(path, sf.operator_, loss_history=sf.loss_curve_)
    with h5py.File(path) as f:
        assert "W[0] @ W[1]" in f.attrs["description"] and f.attrs["operator"] == "chord"
        assert all("description" in f[name].attrs for name in ("values", "offsets", "loss_history"))
    # The README's snippet (h5py + numpy only), run as written there.
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"```python\n(# rebuild a saved fit.*?)```", readme, re.S).group(1)
    namespace = {"path": str(path)}
    exec(snippet, namespace)
    assert np.allclose(namespace["A"], sf.to_dense())


def _saved(tmp_path, name="f.h5"):

    path = tmp_path / name
    save_factors(path, ChordOperator(np.random.default_rng(0).random((3, 8, 4))))
    return path


@pytest.mark.parametrize("edit,message", [
    (lambda f: f["values"].__setitem__((0, 0, 0), np.nan), "NaN or infinite"),
    (lambda f: f["offsets"].__setitem__(1, 9), "not distinct positions in 0..7"),
    (lambda f: f["offsets"].__setitem__(1, -1), "not distinct positions"),
    (lambda f: f.attrs.__setitem__("format_version", 99), "newer sfapprox"),
    (lambda f: f.attrs.__setitem__("n_stored", 5), "says it stores 5 numbers but holds 96"),
    (lambda f: f.attrs.__setitem__("n", 9), "the file says n = 9"),
    (lambda f: f.attrs.__setitem__("n_factors", 2), "says it has 2 factors but holds 3"),
    (lambda f: f.attrs.__setitem__("n_factors", "three"), "attribute 'n_factors' is 'three', not a whole number"),
    (lambda f: f.attrs.__setitem__("fit", "{not json"), "not valid JSON"),
    (lambda f: f.attrs.__setitem__("operator", "quantum"), "unknown operator kind 'quantum'"),
])
def test_edited_files_are_refused_in_one_line(tmp_path, edit, message):
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        edit(f)
    with pytest.raises(InputError, match=message) as info:
        load_factors(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_checkpoint_cut_to_fewer_factors_is_refused(tmp_path):
    """Its 'values' cut to two factors with h5py and 'n_stored' set to match loaded as a fit of two factors
    (an --init of it then refused for its structure, or resumed as another fit): its n_factors tells."""
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        values = f["values"][:2]
        del f["values"]
        f["values"] = values
        f.attrs["n_stored"] = values.size
    with pytest.raises(InputError, match="says it has 3 factors but holds 2; the file is damaged or was edited"):
        load_factors(path)


@pytest.mark.parametrize("record", ['{"sha256": 5, "path": "x.npy"}', '{"sha256": NaN}', '{"path": ["x"]}',
                                    '{"sha256": "ab", "recipe": [1, 2]}'])
def test_source_record_of_other_types_is_refused_not_a_traceback(tmp_path, record):
    # compare --with sliced source["sha256"] and walked source["recipe"]: an edited record was a TypeError
    import sfapprox

    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        f.attrs["source"] = record
    with pytest.raises(InputError, match="attribute 'source'") as info:
        load_factors(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(InputError, match="attribute 'source'"):
        sfapprox.compare(np.eye(8), "tsvd", include=[path])


def test_a_truncated_or_non_hdf5_file_says_so_and_what_to_do(tmp_path):
    # was h5py's "cannot read sfapprox factors (Unable to synchronously open file (truncated file: eof = ...))"
    path = _saved(tmp_path)
    data = path.read_bytes()
    for name, content, what in (("cut.h5", data[: len(data) // 2], "truncated"), ("text.h5", b"hello\n", "not an HDF5 file")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InputError, match=f"{name}: {what}.*write it again") as info:
            load_factors(tmp_path / name)
        assert "\n" not in str(info.value) and "Unable to" not in str(info.value)


def test_data_outside_the_file_is_never_read(tmp_path):
    secret = tmp_path / "secret.bin"
    np.full((3, 8, 4), 7.0).tofile(secret)
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        del f["values"]
        f.create_dataset("values", shape=(3, 8, 4), dtype="f8", external=[(str(secret), 0, 3 * 8 * 4 * 8)])
    with pytest.raises(InputError, match="external storage"):
        load_factors(path)
    other = _saved(tmp_path, "other.h5")
    with h5py.File(path, "a") as f:
        del f["values"]
        f["values"] = h5py.ExternalLink(str(other), "values")
    with pytest.raises(InputError, match="link"):
        load_factors(path)
    with h5py.File(path, "a") as f:
        del f["values"]
        layout = h5py.VirtualLayout(shape=(3, 8, 4), dtype="f8")
        layout[:] = h5py.VirtualSource(str(other), "values", shape=(3, 8, 4))
        f.create_virtual_dataset("values", layout)
    with pytest.raises(InputError, match="virtual dataset"):
        load_factors(path)


def test_a_huge_declared_dataset_is_refused_before_reading(tmp_path):
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        del f["values"]
        f.create_dataset("values", shape=(40, 1 << 20, 4), dtype="f8", fillvalue=1.0)  # no storage: 1.3 GB when read
        f.attrs["n"] = 1 << 20
    from sfapprox import ResourceError

    with pytest.raises(ResourceError, match="reading its datasets"):
        load_factors(path, max_memory=100 << 20)


def test_every_method_saves_and_loads(tmp_path):
    from sfapprox import compare
    from sfapprox.factors import save_results

    X = np.abs(np.random.default_rng(5).random((16, 16)))
    c = compare(X, ["sf", "tsvd", "rpca", "nmf", "sf+lr", "sf+s", "sf-butterfly"], max_iter=10, device="cpu")
    files = save_results(c, tmp_path / "saved")
    assert len(files) == 7
    for r, path in zip(c.results, files):
        saved = load_factors(path)
        assert saved.kind == r.method and saved.n_stored == r.nnz
        assert np.allclose(saved.to_dense(), r.operator.to_dense())


def test_saving_a_fitted_estimator_records_its_fit(tmp_path):
    from sfapprox import NMF

    X = np.random.default_rng(4).random((12, 12))
    sf = ChordSF(max_iter=15, device="cpu", support="symmetric").fit(X)
    save_factors(tmp_path / "sf.h5", sf)
    saved = load_factors(tmp_path / "sf.h5")
    assert saved.kind == "sf-symmetric" and saved.fit["fro_error"] == pytest.approx(sf.fro_error_)
    assert saved.settings["max_iter"] == 15 and len(saved.loss_history) == len(sf.loss_curve_)
    nmf = NMF(2, device="cpu").fit(X)
    save_factors(tmp_path / "nmf.h5", nmf)
    saved = load_factors(tmp_path / "nmf.h5")
    assert saved.kind == "nmf" and saved.n_stored == nmf.n_stored_ == 2 * 12 * 2
    assert np.allclose(saved.to_dense(), nmf.to_dense())


def test_the_structured_methods_save_and_load_too(tmp_path):
    from sfapprox import compare
    from sfapprox.factors import save_results

    X = np.random.default_rng(6).random((12, 12))  # not a power of two: butterfly-hier pads
    c = compare(X, ["sparse", "monarch", "butterfly-hier"], budget=0.9, device="cpu")
    files = save_results(c, tmp_path / "saved")
    assert len(files) == 3
    for r, path in zip(c.results, files):
        saved = load_factors(path)
        assert saved.kind == r.method and saved.n_stored == r.nnz
        assert np.allclose(saved.to_dense(), r.operator.to_dense())
        with h5py.File(path) as f:
            assert "parts" in f and f.attrs["description"].startswith("An sfapprox fit")


def test_messages_for_a_folder_a_truncated_file_and_a_fit_of_another_size(tmp_path):
    """load_factors('.') said "no such file"; a truncated factors file was an "unknown file type
    (extension '.h5')" to the readers; --init with a fit of another N spoke of offsets."""
    from sfapprox import ChordSF, InputError, ParameterError, load_matrix, save_factors

    with pytest.raises(InputError, match="is a folder; give a factors file"):
        load_factors(tmp_path)
    X = np.random.default_rng(0).standard_normal((32, 32))
    path = tmp_path / "f32.h5"
    save_factors(path, ChordSF(max_iter=5, time_limit=None, device="cpu").fit(X))
    (tmp_path / "trunc.h5").write_bytes(path.read_bytes()[:3000])
    with pytest.raises(InputError, match="cannot be opened \\(truncated or damaged\\?\\)"):
        load_matrix(tmp_path / "trunc.h5")
    with pytest.raises(ParameterError, match="is a fit of a 32 x 32 matrix; this one is 64 x 64"):
        ChordSF(max_iter=5, time_limit=None, device="cpu", init=path).fit(np.eye(64))


def test_a_checkpoint_says_it_is_one_and_names_its_matrix(tmp_path):
    """`info` showed a checkpoint as "a saved sf fit", and its source was {}."""
    from sfapprox import FitSettings
    from sfapprox.api import fit_matrix
    from sfapprox.describe import describe_factors

    X = np.random.default_rng(0).standard_normal((32, 32))
    np.save(tmp_path / "x.npy", X)
    ck = tmp_path / "ck.h5"
    fit_matrix(tmp_path / "x.npy", settings=FitSettings(time_limit=1.0, max_iter=10**9, device="cpu"),
               checkpoint=ck, checkpoint_every=0.05, ftol=0.0, gtol=0.0)
    saved = load_factors(ck)
    assert saved.fit["checkpoint"] and saved.source["name"] == "x" and saved.source["sha256"]
    facts = dict(describe_factors(ck).facts)
    assert facts["holds"].startswith("a checkpoint of an unfinished sf fit") and "fitted to" in facts


def test_info_of_a_kernel_fit_says_which_matrix_of_the_file_it_is(tmp_path):
    """info said "fitted to pts (pts.csv)": the points' table, not their rbf kernel at bandwidth 0.7."""
    from sfapprox import FitSettings, LoadOptions
    from sfapprox.api import fit_matrix
    from sfapprox.describe import describe_factors

    np.savetxt(tmp_path / "pts.csv", np.random.default_rng(0).standard_normal((40, 2)), delimiter=",")
    out = tmp_path / "k.h5"
    fit_matrix(tmp_path / "pts.csv", settings=FitSettings(max_iter=3, device="cpu"), out=out,
               load=LoadOptions(kernel="rbf", bandwidth=0.7))
    facts = dict(describe_factors(out).facts)
    assert facts["the matrix"] == "kernel of the file: kernel=rbf, bandwidth=0.7, bandwidth_rule=given"


def test_a_group_where_a_dataset_belongs_is_a_damaged_file_not_a_traceback(tmp_path):
    """values replaced by a group: AttributeError ('Group' object has no attribute 'shape'), exit 1."""
    import h5py

    from sfapprox import ChordSF, InputError, load_factors, save_factors

    path = tmp_path / "g.h5"
    save_factors(path, ChordSF(max_iter=3).fit(np.random.default_rng(0).random((16, 16))))
    with h5py.File(path, "a") as f:
        del f["values"]
        f.create_group("values")
    with pytest.raises(InputError, match="damaged or was edited"):
        load_factors(path)


def test_a_saved_fit_records_its_stored_count_never_a_parameter_of_the_same_name(tmp_path):
    """sparse's parameter "nnz" (X's non-zeros) replaced the stored count in a saved fit's record:
    1,024 recorded for 613 stored, over the budget of 614."""
    import sfapprox
    from sfapprox.factors import save_results

    X = np.random.default_rng(0).standard_normal((32, 32))
    est = sfapprox.SparseApproximation(budget=614).fit(X)
    save_factors(tmp_path / "s.h5", est)
    saved = load_factors(tmp_path / "s.h5")
    assert saved.n_stored == saved.fit["nnz"] == est.n_stored_ <= 614 and saved.fit["matrix_nnz"] == 1024
    comparison = sfapprox.compare(X, "sparse", budget=614)
    save_results(comparison, tmp_path / "r")
    assert load_factors(tmp_path / "r" / "X.sparse.h5").fit["nnz"] == comparison.results[0].nnz == saved.n_stored


def test_a_dataset_where_the_parts_group_belongs_is_a_damaged_file(tmp_path):
    """A saved sparse fit whose 'parts' was a dataset: a raw AttributeError (also from info, --init, --with)."""
    import sfapprox

    path = tmp_path / "s.h5"
    save_factors(path, sfapprox.SparseApproximation(budget=100).fit(np.eye(8)))
    with h5py.File(path, "r+") as f:
        del f["parts"]
        f["parts"] = np.zeros(3)
    with pytest.raises(InputError, match="'parts' is not a group"):
        load_factors(path)


def test_a_chord_part_of_no_factors_is_refused_before_writing(tmp_path):
    """M = 0 (the identity) was saved, then refused as damaged (plain) or read back without its identity
    term (a hybrid: another matrix with the same count)."""
    import scipy.sparse as sp

    from sfapprox import HybridOperator, ParameterError
    from sfapprox.operators import ChordOperator

    empty = ChordOperator(np.zeros((0, 8, 4)))
    hybrid = HybridOperator(8, chord=empty, sparse=sp.csr_array(([2.0], ([0], [1])), shape=(8, 8)))
    for operator in (empty, hybrid):
        with pytest.raises(ParameterError, match="no factors"):
            save_factors(tmp_path / "e.h5", operator)
        assert not (tmp_path / "e.h5").exists()


@pytest.mark.parametrize("history", [[1.0, float("nan")], [[1.0, 2.0]], "abc", 3.0, [1.0, float("inf")]])
def test_a_loss_history_the_file_cannot_hold_is_refused_when_saving(tmp_path, history):
    """It was written, and the file then read back as damaged (or json's ValueError came out)."""
    with pytest.raises(ParameterError, match="loss_history must be a sequence of finite numbers"):
        save_factors(tmp_path / "f.h5", ChordOperator(np.full((3, 8, 4), 0.25)), loss_history=history)
    assert not (tmp_path / "f.h5").exists()


def test_save_factors_checks_its_records_and_kind_and_takes_no_history(tmp_path):
    op = ChordOperator(np.full((3, 8, 4), 0.25))
    with pytest.raises(ParameterError, match="fit= must hold numbers, strings"):
        save_factors(tmp_path / "f.h5", op, fit={"a": object()})  # json's TypeError
    for kind in (5, "", "  "):
        with pytest.raises(ParameterError, match="kind="):
            save_factors(tmp_path / "f.h5", op, kind=kind)  # 5 was stored as '5'
    assert not (tmp_path / "f.h5").exists()
    save_factors(tmp_path / "f.h5", op, loss_history=None, kind="mine")
    saved = load_factors(tmp_path / "f.h5")
    assert saved.kind == "mine" and saved.loss_history.shape == (0,)


@pytest.mark.parametrize("limit", ["lots", -1, 0, True, 1.5])
def test_load_factors_refuses_a_memory_limit_that_is_not_one(tmp_path, limit):
    """'1G' blamed the file ("cannot read sfapprox factors ('<=' not supported ...)"); -1 was a limit of -1 B.
    (A size such as '1G' is read as --max-memory reads it now; text that is none is refused.)"""
    save_factors(tmp_path / "f.h5", ChordOperator(np.full((3, 8, 4), 0.25)))
    with pytest.raises(ParameterError, match="'max_memory' parameter of load_factors"):
        load_factors(tmp_path / "f.h5", max_memory=limit)
    assert load_factors(tmp_path / "f.h5", max_memory="1G").n_stored == 96


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_in_the_fits_folder_is_refused_even_with_force(tmp_path, no_hang):
    """compare --save-factors DIR --force with a named pipe at a fit's name in DIR passed the checks, ran
    every fit, then waited for ever to write through the pipe: a file sfapprox names is no stream."""
    from sfapprox import compare
    from sfapprox._atomic import OutputError
    from sfapprox.factors import check_results_folder, result_path, save_results

    c = compare(np.random.default_rng(0).standard_normal((12, 12)), "tsvd", budget=60)
    folder = tmp_path / "fits"
    folder.mkdir()
    fifo = result_path(folder, c.matrix["name"], "tsvd")
    os.mkfifo(fifo)
    with pytest.raises(ParameterError, match="is a named pipe, not a file.*remove it, or choose another folder"):
        check_results_folder(folder, c.matrix["name"], ["tsvd"], force=True)
    with pytest.raises(OutputError, match="is a named pipe, not a file"):  # (one made during the run)
        save_results(c, folder, force=True)
    assert fifo.is_fifo()


def _tracebacks(exc):
    """The frames of ``exc``'s traceback and of the exceptions it was raised from or during."""
    while exc is not None:
        tb = exc.__traceback__
        while tb is not None:
            yield tb.tb_frame
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__


def _released(view: memoryview) -> bool:
    try:
        view.nbytes
    except ValueError:  # "operation forbidden on released memoryview object"
        return True
    return False


def test_a_failed_save_leaves_no_view_of_its_buffer_for_the_garbage_collector(tmp_path, monkeypatch):
    """save_factors builds the file in a BytesIO and writes a view of it.  A failed write's traceback kept
    the view unreleased with the buffer, in a cycle; collecting it, Python 3.13 printed "Exception ignored
    in: <_io.BytesIO ...> BufferError: Existing exports of data" and 3.12.1 crashed (a segmentation
    fault).  The view is released on the way out, an error's too."""
    import gc
    import sys

    from sfapprox._atomic import OutputError

    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    with pytest.raises(OutputError, match="does not exist") as caught:
        save_factors(tmp_path / "missing" / "f.h5", ChordOperator(np.random.default_rng(0).random((2, 16, 5))))
    views = [value for frame in _tracebacks(caught.value) for value in frame.f_locals.values()
             if isinstance(value, memoryview)]
    assert views and all(_released(view) for view in views)  # (the write saw it: it was passed down)
    del caught, views
    gc.collect()
    assert [repr(u.exc_value) for u in ignored] == []


def test_loading_a_hybrid_does_not_export_its_arrays_again(tmp_path, monkeypatch):
    """The check that a file holds no other kind's datasets called to_arrays() for their names: a COO
    copy of the sparse part of every hybrid loaded.  It reads the names alone now."""
    import scipy.sparse as sp

    from sfapprox.operators import HybridOperator

    rng = np.random.default_rng(0)
    op = HybridOperator(8, low_rank=(rng.standard_normal((8, 2)), np.ones(2), rng.standard_normal((2, 8))),
                        sparse=sp.random(8, 8, density=0.3, format="csr", random_state=0))
    save_factors(tmp_path / "h.h5", op)

    def exported(self):
        pytest.fail("to_arrays() was called to load a file")

    monkeypatch.setattr(HybridOperator, "to_arrays", exported)
    np.testing.assert_allclose(load_factors(tmp_path / "h.h5").operator.to_dense(), op.to_dense())


def test_an_operator_class_of_the_old_contract_registers_saves_and_loads(tmp_path, monkeypatch):
    """The deprecated sfapprox.factors.register_operator warned, then failed on a class of the contract it
    was kept for (kind, to_arrays, from_arrays, its layout in its docstring): AttributeError 'layout'."""
    import warnings

    from scipy.sparse.linalg import LinearOperator

    from sfapprox import factors
    from sfapprox.operators import _base

    monkeypatch.setattr(_base, "_KINDS", dict(_base._KINDS))  # the registry as it was, after the test
    monkeypatch.setattr(factors, "_LEGACY_CLASSES", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @factors.register_operator
        class Diag(LinearOperator):
            """A diagonal matrix: dataset ``d``, its diagonal.

            Written by a user's script."""
            kind = "test-old-diag"

            def __init__(self, d):
                self.d = np.asarray(d, float)
                super().__init__(float, (self.d.size, self.d.size))

            def _matvec(self, x):
                return self.d * np.ravel(x)

            def _rmatvec(self, x):
                return self.d * np.ravel(x)

            def to_arrays(self):
                return {"d": self.d}, {}

            @classmethod
            def from_arrays(cls, datasets, attrs):
                return cls(datasets["d"])

    assert [w.category for w in caught] == [DeprecationWarning] and caught[0].filename == __file__
    assert Diag.description == "A diagonal matrix: dataset ``d``, its diagonal."
    save_factors(tmp_path / "d.h5", Diag([1.0, 2.0, 3.0]))
    back = load_factors(tmp_path / "d.h5")
    assert isinstance(back.operator, Diag) and back.n_stored == 3
    assert np.allclose(back.operator.matvec(np.ones(3)), [1.0, 2.0, 3.0])


def test_info_of_a_fit_of_one_variable_of_a_file_says_which(tmp_path):
    """info said "fitted to two (two.npz)" of a fit of its array B: which of the file's arrays it was."""
    from sfapprox import compare, load_matrix
    from sfapprox.describe import describe_factors
    from sfapprox.factors import save_results

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "two.npz", A=rng.random((8, 8)), B=rng.random((8, 8)))
    loaded = load_matrix(tmp_path / "two.npz", var="B")
    fit = save_results(compare(loaded, "tsvd", budget=30), tmp_path / "fits", source=loaded)[0]
    facts = dict(describe_factors(fit).facts)
    assert facts["the matrix"] == "read from the file with var=B" and facts["fitted to"].startswith("two (")


def test_info_and_notes_of_a_reading_say_what_tells_it_apart_only():
    """A plain table's reading records ``covariance=False`` (what tells it from the table's covariance): info
    said "read from the file with covariance=False" of every fit of a .csv matrix; a note names the entries
    that differ, not every entry of the reading."""
    from sfapprox import compare, load_matrix
    from sfapprox.comparison import _source_notes
    from sfapprox.describe import describe_factors
    from sfapprox.factors import save_results

    with tempfile.TemporaryDirectory() as tmp:
        np.savetxt(f"{tmp}/sq.csv", np.random.default_rng(1).random((8, 8)), delimiter=",")
        loaded = load_matrix(f"{tmp}/sq.csv")
        fit = save_results(compare(loaded, "tsvd", budget=30), f"{tmp}/fits", source=loaded)[0]
        assert "the matrix" not in dict(describe_factors(fit).facts)

    class Saved:
        source = {"sha256": "s", "recipe": {"network": 2, "relation": None, "two_mode": None}}

    note, = _source_notes({"saved:g": Saved()}, "s", {"network": 1, "relation": None, "two_mode": None})
    assert note == "saved:g was fitted to another matrix of this file (network=2; this one: network=1)"


def test_a_baseline_operator_saved_alone_is_named_by_its_method_not_sf_lr(tmp_path):
    """``save_factors(path, c.result("tsvd").operator)`` wrote kind "sf+lr" (NMF's too, RPCA's "sf+s"):
    ``load_factors(path).kind`` and ``sfapprox info`` called a surrogate without Chord factors an SF hybrid."""
    import sfapprox

    X = np.random.default_rng(0).random((16, 16))
    c = sfapprox.compare(X, "tsvd,nmf,rpca,sf+lr", budget=100, time_limit=1)
    for method in ("tsvd", "nmf", "rpca"):
        path = tmp_path / f"{method}.h5"
        save_factors(path, c.result(method).operator)
        assert load_factors(path).kind == method
    op = c.result("sf+lr").operator
    save_factors(tmp_path / "h.h5", op)
    assert load_factors(tmp_path / "h.h5").kind == ("sf+lr" if op.chord is not None else "tsvd")


def test_a_loaded_fit_applies_with_the_matmul_operator_as_with_matvec(tmp_path):
    """``load_factors(p) @ x`` (it has matvec, rmatvec and matmat) gave numpy's "matmul: Input operand 0
    does not have enough dimensions", and ``x @ load_factors(p)`` the same."""
    op = ChordOperator(np.random.default_rng(0).standard_normal((3, 8, 4)))
    save_factors(tmp_path / "f.h5", op)
    saved = load_factors(tmp_path / "f.h5")
    x, B = np.arange(8.0), np.ones((8, 2))
    D = op.to_dense()
    np.testing.assert_allclose(saved @ x, D @ x)
    np.testing.assert_allclose(saved @ B, D @ B)
    np.testing.assert_allclose(x @ saved, x @ D)
    with pytest.raises(ParameterError, match="8 x 8"):
        saved @ np.ones(9)


def test_a_loaded_fit_goes_to_scipys_solvers_and_has_a_transpose_and_a_one_line_repr(tmp_path):
    """``cg(load_factors(p), b)`` was scipy's "type not understood" (the record had no shape), ``saved.T``
    an AttributeError, and its repr held every loss of the history and every setting."""
    import scipy.sparse.linalg as spla

    rng = np.random.default_rng(0)
    op = ChordOperator(rng.standard_normal((3, 8, 4)) / 2)
    save_factors(tmp_path / "f.h5", op, loss_history=np.linspace(2.0, 1.0, 500), fit={"rel_error": 0.25},
                 settings={"max_iter": 500}, source={"name": "mesh"})
    saved = load_factors(tmp_path / "f.h5")
    D = op.to_dense()
    x, B = rng.standard_normal(8), rng.standard_normal((8, 3))
    assert saved.shape == (8, 8) and saved.dtype == np.float64
    np.testing.assert_array_equal(saved.T @ x, op.T @ x)
    np.testing.assert_array_equal(saved.H @ B, op.T @ B)
    np.testing.assert_array_equal(saved.rmatmat(B), op.T @ B)
    linear = spla.aslinearoperator(saved)
    np.testing.assert_allclose(linear @ x, D @ x)
    np.testing.assert_allclose(linear.T @ x, D.T @ x)
    spd = D @ D.T + 8 * np.eye(8)
    got, info = spla.cg(linear @ linear.T + spla.aslinearoperator(8 * np.eye(8)), x, rtol=1e-12)
    assert info == 0
    np.testing.assert_allclose(spd @ got, x, atol=1e-9)
    top = spla.svds(saved, k=2, return_singular_vectors=False, random_state=0)  # the record itself
    np.testing.assert_allclose(np.sort(top), np.linalg.svd(D, compute_uv=False)[:2][::-1], rtol=1e-8)
    said = repr(saved)
    assert said == ("<SavedFactors sf: <ChordOperator 8 x 8: 3 factors, chord support, K = 4 values a row; "
                    "stores 96 numbers (150% of N²)>, rel_error 0.25, 500 losses recorded, of mesh>")


def test_a_saved_fit_of_one_recorded_loss_says_loss():
    """A fit stopped at its start (N = 3,000 under a 3 s limit) records one loss: its repr said "1 losses"."""
    from sfapprox.factors import SavedFactors

    saved = SavedFactors(ChordOperator(np.full((3, 8, 4), 0.25)), np.zeros(1), {"rel_error": 0.5}, {}, {}, {})
    assert repr(saved).endswith(", rel_error 0.5, 1 loss recorded>")


def test_an_operator_that_cannot_be_saved_is_named_by_what_it_is(tmp_path):
    """save_factors(op.T) and save_factors(2 * op) named scipy's and our private classes
    ("cannot save a _Transposed", "a _ScaledLinearOperator").  (op.T.to_torch() was refused naming "the
    transpose (.T) of a ChordOperator" too; it now gives a module applying x @ A: tests/test_operators.py.)"""
    from sfapprox import SfapproxError, save_factors
    from sfapprox.operators import ChordOperator
    from sfapprox.chord import chord_offsets

    op = ChordOperator(np.full((3, 8, 4), 0.25), chord_offsets(8))
    with pytest.raises(SfapproxError, match=r"cannot save the transpose \(\.T\) of a ChordOperator: .*save the "
                                            r"surrogate itself"):
        save_factors(tmp_path / "t.h5", op.T)
    with pytest.raises(SfapproxError, match="cannot save a multiple, sum, product or power of scipy LinearOperators"):
        save_factors(tmp_path / "s.h5", 2 * op)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("what", [None, [[1.0, 0.0], [0.0, 1.0]], "f.h5"])
def test_saving_what_is_no_surrogate_is_an_sfapprox_error(tmp_path, what):
    """save_factors(path, None) was an AttributeError ('NoneType' object has no attribute 'shape')."""
    from sfapprox import SfapproxError, save_factors

    with pytest.raises(SfapproxError, match=r"^cannot save a (NoneType|list|str): it is not an operator"):
        save_factors(tmp_path / "f.h5", what)
    assert not (tmp_path / "f.h5").exists()


def test_a_fit_another_program_holds_open_for_writing_is_said_as_such_not_as_damaged(tmp_path):
    """HDF5's file lock (a notebook with the file open in 'a' mode) made a whole saved fit "not an HDF5
    file, or a damaged one ... write it again" to load_factors, and "not a saved fit" to --init."""
    import subprocess
    import sys

    from sfapprox.factors import is_factors_file

    path = tmp_path / "f.h5"
    save_factors(path, ChordOperator(np.full((3, 8, 4), 0.25)))
    holder = subprocess.Popen([sys.executable, "-c", "import sys, h5py; f = h5py.File(sys.argv[1], 'a'); "
                               "print('open', flush=True); sys.stdin.read()", str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        try:
            h5py.File(path, "r").close()
        except OSError:
            pass
        else:
            pytest.skip("this file system has no HDF5 file locks")
        for read in (load_factors, is_factors_file):
            with pytest.raises(InputError, match="another program holds it open for writing .*close it there"):
                read(path)
    finally:
        holder.communicate("")
    assert load_factors(path).n == 8  # whole, once it is closed


def _edited(path, **attrs):
    with h5py.File(path, "r+") as f:
        for name, value in attrs.items():
            f.attrs[name] = value
    return path


def test_a_file_edited_to_name_another_method_is_refused(tmp_path):
    # An SF file edited to say 'tsvd' loaded, and `sfapprox info` called it "a saved tsvd fit (ChordOperator)".
    from sfapprox.operators import HybridOperator, SparseOperator
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    ops = {"sf": ChordOperator(rng.standard_normal((2, 8, 4))),
           "tsvd": HybridOperator(8, low_rank=(rng.standard_normal((8, 1)), np.ones(1), rng.standard_normal((1, 8)))),
           "sparse": SparseOperator(sp.eye(8, format="csr"))}
    for kind, op in ops.items():
        for other in ops:
            path = tmp_path / f"{kind}-{other}.h5"
            save_factors(path, op, kind=kind)
            _edited(path, kind=other)
            if other == kind:
                assert load_factors(path).kind == kind
                continue
            with pytest.raises(InputError, match=f"names the method '{other}'") as info:
                load_factors(path)
            assert "\n" not in str(info.value) and "edited" in str(info.value)
    # a name of the user's own, or a method of the same operator, is the user's to give
    save_factors(tmp_path / "mine.h5", ops["sf"], kind="my-sf")
    save_factors(tmp_path / "rsvd.h5", ops["tsvd"], kind="rsvd")
    assert load_factors(tmp_path / "mine.h5").kind == "my-sf" and load_factors(tmp_path / "rsvd.h5").kind == "rsvd"
    # and is not written where it could not be read back
    with pytest.raises(ParameterError, match="kind='tsvd' does not fit this ChordOperator"):
        save_factors(tmp_path / "bad.h5", ops["sf"], kind="tsvd")
    assert not (tmp_path / "bad.h5").exists()


def test_a_file_edited_to_another_operator_that_leaves_parts_unread_is_refused(tmp_path):
    # A monarch+lr file (here without a low-rank term, so the counts agree) edited to say 'monarch' loaded as
    # its Monarch part, the file's U, s and Vt never read.
    from sfapprox.operators import MonarchLowRankOperator

    rng = np.random.default_rng(1)
    op = MonarchLowRankOperator(6, left=rng.random((3, 2, 2, 1)), right=rng.random((2, 1, 3, 3)))
    path = tmp_path / "m.h5"
    save_factors(path, op, kind="monarch+lr")
    _edited(path, operator="monarch", kind="monarch")
    with pytest.raises(InputError, match="'U', 'Vt', 's', which a 'monarch' operator does not have"):
        load_factors(path)


def test_a_fit_file_taken_meanwhile_costs_that_file_alone(tmp_path):
    """Two runs saving into one folder at once: the first file found taken stopped save_results, and the
    rows after it were neither written nor kept (nothing said so)."""
    from sfapprox import compare
    from sfapprox._atomic import OutputExistsError
    from sfapprox.factors import result_path, save_results

    X = np.random.default_rng(7).random((12, 12))
    c = compare(X, ["sparse", "tsvd", "nmf"], max_iter=5, device="cpu")
    name = c.matrix.get("name", "matrix")
    for method in ("sparse", "nmf"):  # the other run got there first
        result_path(tmp_path, name, method).write_bytes(b"the other run's fit")
    with pytest.raises(OutputExistsError) as caught:
        save_results(c, tmp_path)
    assert result_path(tmp_path, name, "sparse").read_bytes() == b"the other run's fit"
    assert load_factors(result_path(tmp_path, name, "tsvd")).kind == "tsvd"  # the row after it: written
    assert load_factors(caught.value.kept).kind == "sparse"
    [note] = caught.value.__notes__  # the second one taken: said too, its fit kept
    assert "nmf" in note and load_factors(tmp_path / note.split("saved as ")[1].split(" instead")[0]).kind == "nmf"


@pytest.mark.parametrize("name", ["values", "lr_s", "sparse_vals", "sparse_rows"])
def test_unsigned_integers_beyond_int64_in_an_edited_file_are_refused(tmp_path, name):
    """An edited file's uint64 values were cast to int64, so 2^64 - 1 was read as -1: a hybrid's value
    loaded silently negative (a position was refused, but as "outside 0..n-1")."""
    import scipy.sparse as sp

    from sfapprox.operators import HybridOperator

    n = 8
    op = HybridOperator(n, chord=ChordOperator(np.ones((2, n, 4))), low_rank=(np.ones((n, 1)), np.ones(1), np.ones((1, n))),
                        sparse=sp.csr_array((np.ones(2), ([0, 3], [1, 5])), shape=(n, n)))
    path = tmp_path / "h.h5"
    save_factors(path, op)
    with h5py.File(path, "a") as f:
        held = f[name][()]
        edited = np.round(held).astype(np.uint64)
        edited.reshape(-1)[-1] = np.iinfo(np.uint64).max
        del f[name]
        f[name] = edited
    with pytest.raises(InputError, match=rf"'{name}' holds 18446744073709551615, beyond the largest 64-bit"):
        load_factors(path)


def test_unsigned_integers_that_fit_still_load(tmp_path):
    path = tmp_path / "c.h5"
    save_factors(path, ChordOperator(np.full((2, 8, 4), 3.0)))
    with h5py.File(path, "a") as f:
        for name in ("values", "offsets"):
            held = f[name][()].astype(np.uint64)
            del f[name]
            f[name] = held
    back = load_factors(path).operator
    assert np.array_equal(back.to_dense(), ChordOperator(np.full((2, 8, 4), 3.0)).to_dense())


def test_result_path_refuses_a_name_over_255_bytes_before_any_write(tmp_path):
    """``result_path`` gave ``<250 bytes>.tsvd.h5`` as it was: ``save_results`` then failed at the write with an
    OSError ("File name too long"), where ``compare --save-factors`` refuses it before any fit."""
    from sfapprox import compare
    from sfapprox.factors import result_path, save_results

    name = "m" * 250
    with pytest.raises(ParameterError, match=r"258 bytes, over the 255 .*FOLDER/<matrix>\.<method>\.h5; give the "):
        result_path(tmp_path, name, "tsvd")
    assert result_path(tmp_path, "m" * 240, "tsvd").name == "m" * 240 + ".tsvd.h5"  # 248 bytes: as it was
    c = compare(np.random.default_rng(0).standard_normal((12, 12)), "tsvd", budget=60)
    c.matrix["name"] = name  # (a matrix read from a file named so)
    with pytest.raises(ParameterError, match="258 bytes"):
        save_results(c, tmp_path / "fits")
    assert not (tmp_path / "fits").exists()


def test_a_fit_s_metadata_keeps_an_undecodable_file_name_as_strict_json(tmp_path):
    r"""The file a fit was made from, named with a byte that is no UTF-8, was recorded as ``"bad\udcff.npy"`` in
    the metadata: a lone surrogate that strict JSON readers refuse.  Its escape now, its bytes beside it."""
    from sfapprox import compare, load_matrix
    from sfapprox.factors import save_results

    path = tmp_path / os.fsdecode(b"bad\xff.npy")
    np.save(path, np.random.default_rng(0).standard_normal((12, 12)))
    loaded = load_matrix(path)
    [saved] = save_results(compare(loaded, "tsvd", budget=60), tmp_path / "fits", source=loaded)
    with h5py.File(saved, "r") as f:
        raw = f.attrs["source"]
    source = json.loads(raw)
    json.dumps(source, ensure_ascii=False).encode("utf-8")  # strict UTF-8 (it raised on the lone surrogate)
    assert source["name"] == "bad\\xff" and source["path"].endswith("bad\\xff.npy")
    assert os.fsdecode(bytes.fromhex(source["path_bytes"])) == str(path)
    assert load_factors(saved).source["path"] == source["path"]


def test_a_sparse_operator_saved_alone_is_a_sparse_fit_as_a_comparisons_row_names_it(tmp_path):
    """Saved on its own, a SparseOperator was a "csr" fit (its operator's kind) in ``info`` and ``kind``, where a
    comparison's row calls it "sparse"; files written so read as "sparse" too."""
    import scipy.sparse as sp

    from sfapprox.describe import describe_factors
    from sfapprox.operators import SparseOperator

    path = tmp_path / "s.h5"
    save_factors(path, SparseOperator(sp.eye(4, format="csr")))
    with h5py.File(path) as f:
        assert f.attrs["kind"] == "sparse" and f.attrs["operator"] == "csr"
    assert load_factors(path).kind == "sparse"
    with h5py.File(path, "a") as f:  # as sfapprox wrote it before
        f.attrs["kind"] = "csr"
    assert load_factors(path).kind == "sparse"
    assert ("holds", "a saved sparse fit (SparseOperator)") in describe_factors(path).facts


def test_a_datasets_shape_is_written_as_every_message_writes_one(tmp_path):
    """A dataset of the wrong shape was "has shape 3 x 4, expected (3, None)": the expected one written as a
    shape too (any length: "any")."""
    from pathlib import Path

    from sfapprox.factors import _Reader

    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.ones((3, 4))
        f["y"] = np.ones(3)
    with h5py.File(path) as f:
        reader = _Reader(f, Path(path), None)
        assert reader.array("x", ndim=2, shape=(3, None)).shape == (3, 4)
        with pytest.raises(InputError, match=r"dataset 'x' has shape 3 x 4, expected 2 x any; the file is damaged"):
            reader.array("x", ndim=2, shape=(2, None))
        with pytest.raises(InputError, match=r"dataset 'y' has shape 3, expected 2 dimensions;"):
            reader.array("y", ndim=2)
