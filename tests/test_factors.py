"""Factor files (HDF5): round trip, matvec, refusals, older files."""

import os

import h5py
import numpy as np
import pytest

from sfapprox import ChordSF, InputError, load_factors, save_factors


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


def test_files_without_a_support_attribute_load_as_chord(tmp_path):
    # Files written before the butterfly support existed have no "support": offset-based.
    from sfapprox import ChordOperator

    op = ChordOperator(np.random.default_rng(0).random((3, 8, 4)))
    path = tmp_path / "old.h5"
    save_factors(path, op)
    with h5py.File(path, "a") as f:
        assert f.attrs["support"] == "chord" and f.attrs["format_version"] == 1
        del f.attrs["support"]
    saved = load_factors(path)
    assert saved.operator.support == "chord"
    assert np.array_equal(saved.operator.offsets, [0, 1, 2, 4])
    assert np.allclose(saved.to_dense(), op.to_dense())
