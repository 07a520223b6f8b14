"""Tests for sfapprox.io._hdf5: HDF5 files are read only from themselves, and within the memory limit.

The files are real HDF5 files written with h5py: external raw storage, external
links, virtual datasets, soft links (good, dangling, looping), hard-link cycles,
and datasets declared far larger than their storage (fill-value only).  Each is
tried through the reusable functions and through ``load_matrix`` on a MATLAB
v7.3 ``.mat`` (an HDF5 file with a 512-byte user block).
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import h5py
from sfapprox import InputError, ResourceError, load_matrix
from sfapprox.cli import app
from sfapprox.io._hdf5 import check_dataset, check_self_contained, open_self_contained, read_dataset

SECRET = np.array([1234.5, 6789.25, 42.0, 7.0])


@pytest.fixture
def secret_file(tmp_path):
    """A local file the user never names: raw float64 bytes and an HDF5 file holding the same."""
    raw = tmp_path / "secret.bin"
    raw.write_bytes(SECRET.tobytes())
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["A"] = SECRET.reshape(2, 2)
    return raw, other


def _mat(path, build):
    """A MATLAB v7.3 file (HDF5 with a 512-byte user block) built by ``build(f)``."""
    with h5py.File(path, "w", userblock_size=512) as f:
        build(f)
    return path


def _double(obj):
    obj.attrs["MATLAB_class"] = np.bytes_("double")
    return obj


def _refused(path, match, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    return msg


# ---------------------------------------------------------------------------
# the reusable checks
# ---------------------------------------------------------------------------


class TestCheckSelfContained:
    def test_plain_file_passes_and_reads(self, tmp_path):
        path = tmp_path / "ok.h5"
        with h5py.File(path, "w") as f:
            f.create_group("g/h")["d"] = np.eye(3)
            f["g"]["alias"] = h5py.SoftLink("/g/h/d")  # a soft link inside the file is fine
            f["g"]["h"]["back"] = f["g"]  # a hard-link cycle: the walk must end
        with open_self_contained(path) as f:
            np.testing.assert_array_equal(read_dataset(f["g/alias"], path), np.eye(3))

    def test_external_storage_refused_naming_the_other_file(self, tmp_path, secret_file):
        raw, _ = secret_file
        path = tmp_path / "ext.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("x", shape=(4,), dtype="<f8", external=[(str(raw), 0, SECRET.nbytes)])
            with pytest.raises(InputError, match=r"ext.h5: /x uses external storage: its data lives in other files "
                                                 r"\('.*secret.bin'\); sfapprox reads only data stored in the file"):
                check_self_contained(f, path)
            with pytest.raises(InputError, match="external storage"):
                read_dataset(f["x"], path)
            # h5py would read the other file's bytes: exactly what must not happen.
            np.testing.assert_array_equal(f["x"][()], SECRET)

    def test_external_link_refused_without_opening_it(self, tmp_path, secret_file):
        _, other = secret_file
        path = tmp_path / "link.h5"
        with h5py.File(path, "w") as f:
            f.create_group("deep")["A"] = h5py.ExternalLink(str(other), "/A")
            f["missing"] = np.zeros(1)
        with h5py.File(path, "r") as f:
            with pytest.raises(InputError, match=r"/deep/A is an external link to '/A' in '.*other.h5'"):
                check_self_contained(f, path)

    def test_virtual_dataset_refused(self, tmp_path, secret_file):
        _, other = secret_file
        path = tmp_path / "vds.h5"
        layout = h5py.VirtualLayout(shape=(2, 2), dtype="f8")
        layout[:] = h5py.VirtualSource(str(other), "A", shape=(2, 2))
        with h5py.File(path, "w") as f:
            f.create_virtual_dataset("v", layout, fillvalue=0)
        with h5py.File(path, "r") as f:
            with pytest.raises(InputError, match=r"/v is a virtual dataset: its data is mapped from other datasets, in \('.*other.h5'\)"):
                check_self_contained(f, path)
            with pytest.raises(InputError, match="virtual dataset"):
                check_dataset(f["v"], path)

    @pytest.mark.parametrize("target, why", [("/loop", "a loop of soft links"), ("/nowhere", "a missing object")])
    def test_broken_soft_links_refused(self, tmp_path, target, why):
        path = tmp_path / "soft.h5"
        with h5py.File(path, "w") as f:
            f["A"] = np.eye(2)
            f["loop"] = h5py.SoftLink(target)
        with h5py.File(path, "r") as f:
            with pytest.raises(InputError, match=f"/loop is a soft link to '{target}', which leads to {why}"):
                check_self_contained(f, path)

    def test_soft_link_through_an_external_link_is_not_followed(self, tmp_path, secret_file):
        # The soft link is resolved only after the walk has refused the external link it goes through.
        _, other = secret_file
        path = tmp_path / "via.h5"
        with h5py.File(path, "w") as f:
            f["a_soft"] = h5py.SoftLink("/z_ext/A")
            f["z_ext"] = h5py.ExternalLink(str(other), "/")
        with h5py.File(path, "r") as f:
            with pytest.raises(InputError, match="/z_ext is an external link"):
                check_self_contained(f, path)


class TestReadDataset:
    def test_fill_value_only_dataset_refused_before_reading(self, tmp_path):
        # 10^6 x 10^6 float64 (7.3 TiB) declared, no chunk ever written: a few KiB on disk.
        path = tmp_path / "fill.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("big", shape=(10**6, 10**6), dtype="f8", chunks=(64, 64), fillvalue=1.0)
        assert path.stat().st_size < 100_000
        with h5py.File(path, "r") as f:
            with pytest.raises(ResourceError, match=r"fill.h5: /big \(1,000,000 x 1,000,000 float64, 7.3 TiB declared\) "
                                                    r"needs about 7.3 TiB, over the memory limit of 1.0 MiB"):
                read_dataset(f["big"], path, max_memory=2**20)

    def test_small_fill_value_dataset_reads(self, tmp_path):
        path = tmp_path / "fill.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("d", shape=(2, 2), dtype="f8", fillvalue=3.0)
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(read_dataset(f["d"], path), np.full((2, 2), 3.0))

    def test_copies_scale_the_estimate(self, tmp_path):
        path = tmp_path / "d.h5"
        with h5py.File(path, "w") as f:
            f["d"] = np.zeros(1000)  # 8000 bytes
        with h5py.File(path, "r") as f:
            read_dataset(f["d"], path, max_memory=10_000)
            with pytest.raises(ResourceError, match="needs about 15.6 KiB"):
                read_dataset(f["d"], path, max_memory=10_000, copies=2)

    def test_null_and_variable_length_refused(self, tmp_path):
        path = tmp_path / "odd.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("null", data=h5py.Empty("f8"))
            f.create_dataset("vlen", data=["a", "bb"], dtype=h5py.string_dtype())
        with h5py.File(path, "r") as f:
            with pytest.raises(InputError, match="null dataspace"):
                read_dataset(f["null"], path)
            with pytest.raises(InputError, match="variable-length or object data"):
                read_dataset(f["vlen"], path)

    def test_not_hdf5(self, tmp_path):
        path = tmp_path / "no.h5"
        path.write_bytes(b"not an hdf5 file at all" * 10)
        with pytest.raises(InputError, match="no.h5: not a readable HDF5 file"):
            with open_self_contained(path):
                pass


# ---------------------------------------------------------------------------
# through load_matrix: MATLAB v7.3
# ---------------------------------------------------------------------------


class TestMatlabV73:
    def test_external_storage_variable_refused(self, tmp_path, secret_file):
        raw, _ = secret_file
        path = _mat(tmp_path / "ext.mat",
                    lambda f: _double(f.create_dataset("A", shape=(2, 2), dtype="<f8",
                                                       external=[(str(raw), 0, SECRET.nbytes)])))
        msg = _refused(path, r"/A uses external storage")
        assert "1234.5" not in msg

    def test_external_link_variable_refused(self, tmp_path, secret_file):
        _, other = secret_file

        def build(f):
            f["A"] = h5py.ExternalLink(str(other), "/A")

        _refused(_mat(tmp_path / "link.mat", build), r"/A is an external link")

    def test_external_link_anywhere_refuses_the_file(self, tmp_path, secret_file):
        # Even away from the chosen variable: listing the variables would open it.
        _, other = secret_file

        def build(f):
            _double(f.create_dataset("A", data=np.eye(3)))
            f.create_group("#refs#")["x"] = h5py.ExternalLink(str(other), "/A")

        _refused(_mat(tmp_path / "refs.mat", build), r"/#refs#/x is an external link")

    def test_virtual_variable_refused(self, tmp_path, secret_file):
        _, other = secret_file

        def build(f):
            layout = h5py.VirtualLayout(shape=(2, 2), dtype="f8")
            layout[:] = h5py.VirtualSource(str(other), "A", shape=(2, 2))
            _double(f.create_virtual_dataset("A", layout))

        _refused(_mat(tmp_path / "vds.mat", build), r"/A is a virtual dataset")

    def test_sparse_part_with_external_storage_refused(self, tmp_path, secret_file):
        raw, _ = secret_file

        def build(f):
            g = f.create_group("A")
            g.attrs["MATLAB_class"] = np.bytes_("double")
            g.attrs["MATLAB_sparse"] = np.uint64(2)
            g["jc"] = np.array([0, 1, 2], dtype=np.uint64)
            g["ir"] = np.array([0, 1], dtype=np.uint64)
            g.create_dataset("data", shape=(2,), dtype="<f8", external=[(str(raw), 0, 16)])

        _refused(_mat(tmp_path / "sp.mat", build), r"/A/data uses external storage")

    def test_soft_link_loop_refused(self, tmp_path):
        def build(f):
            _double(f.create_dataset("A", data=np.eye(2)))
            f["B"] = h5py.SoftLink("/B")

        _refused(_mat(tmp_path / "loop.mat", build), r"/B is a soft link to '/B', which leads to a loop")

    def test_huge_fill_value_variable_refused_from_its_shape(self, tmp_path):
        def build(f):
            _double(f.create_dataset("A", shape=(10**6, 10**6), dtype="f8", chunks=(64, 64)))

        path = _mat(tmp_path / "fill.mat", build)
        with pytest.raises(ResourceError, match=r"fill.mat: variable A of order 1,000,000 in its dense form"):
            load_matrix(path, max_memory=2**26)

    def test_rectangular_fill_value_variable_refused_before_reading(self, tmp_path):
        # Not square, so no order check: the dataset's declared size is refused by read_dataset.
        def build(f):
            _double(f.create_dataset("A", shape=(10**5, 10**6), dtype="f8", chunks=(64, 64)))

        with pytest.raises(ResourceError, match=r"variable A \(100,000 x 1,000,000 float64, 745.1 GiB declared\)"):
            load_matrix(_mat(tmp_path / "rect.mat", build), var="A", max_memory=2**26)

    def test_self_contained_file_still_loads(self, tmp_path):
        def build(f):
            _double(f.create_dataset("A", data=np.arange(9.0).reshape(3, 3)))

        m = load_matrix(_mat(tmp_path / "ok.mat", build))
        np.testing.assert_array_equal(m.matrix, np.arange(9.0).reshape(3, 3).T)

    def test_cli_one_line_exit_2(self, tmp_path, secret_file):
        raw, _ = secret_file
        path = _mat(tmp_path / "ext.mat",
                    lambda f: _double(f.create_dataset("A", shape=(2, 2), dtype="<f8",
                                                       external=[(str(raw), 0, SECRET.nbytes)])))
        res = CliRunner().invoke(app, ["info", str(path)])
        assert res.exit_code == 2 and "Traceback" not in res.output
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and "ext.mat" in lines[0]
        assert "external storage" in lines[0]
