"""A network's weights as matrices: .safetensors read by its own rules, .pt with weights_only, nothing unpickled."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
import torch
from _io_helpers import input_error

from sfapprox._errors import ResourceError
from sfapprox.describe import describe_weights
from sfapprox.io import load_matrix


def write_safetensors(path, tensors: dict) -> None:
    """A .safetensors file by the format's rules (8-byte header length, JSON header, raw data)."""
    header, blobs, offset = {}, b"", 0
    for name, (dtype, array) in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs += raw
    text = json.dumps({**header, "__metadata__": {"format": "pt"}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + blobs)


@pytest.fixture
def model(tmp_path):
    rng = np.random.default_rng(0)
    weights = {"attn.q": rng.standard_normal((24, 24)).astype(np.float32),
               "attn.k": rng.standard_normal((24, 24)).astype(np.float64),
               "mlp.up": rng.standard_normal((24, 48)).astype(np.float32), "bias": np.zeros(24, np.float32)}
    dtypes = {np.float32: "F32", np.float64: "F64"}
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {k: (dtypes[v.dtype.type], v) for k, v in weights.items()})
    return path, weights


def test_safetensors_reads_the_tensor_named(model):
    path, weights = model
    m = load_matrix(path, var="attn.k")
    assert m.n == 24 and np.array_equal(m.to_dense(), weights["attn.k"]) and m.format == "safetensors"
    input_error(path, r"holds 2 square weight matrices: attn.q 24x24, attn.k 24x24; pick one with var=")
    input_error(path, r"no tensor 'nope'", var="nope")
    input_error(path, r"tensor 'mlp.up' has shape \[24, 48\], not a square matrix", var="mlp.up")


def test_bfloat16_and_damaged_files(tmp_path):
    W = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
    bf16 = (W.view(np.uint32) >> 16).astype(np.uint16)
    path = tmp_path / "b.safetensors"
    write_safetensors(path, {"w": ("BF16", bf16)})
    assert np.allclose(load_matrix(path).to_dense(), W, rtol=1e-2)
    path.write_bytes(path.read_bytes()[:-10])
    input_error(path, r"tensor 'w': its data offsets .* inside the file \(truncated or edited\)")
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 16)
    input_error(tmp_path / "junk.safetensors", "not a safetensors file")


def test_torch_state_dicts_with_weights_only(tmp_path):
    torch.save({"layer": {"weight": torch.ones(5, 5)}, "bias": torch.ones(5)}, tmp_path / "w.pt")
    m = load_matrix(tmp_path / "w.pt")
    assert m.n == 5 and m.format == "torch" and m.notes == ["tensor 'layer.weight' (torch.float32)"]


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickled_code_is_refused_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.save({"w": torch.ones(3, 3), "x": _Payload()}, tmp_path / "evil.pt")
    input_error(tmp_path / "evil.pt", "holds pickled objects other than tensors .* refused, never unpickled")
    assert not (tmp_path / "PWNED").exists()


def test_info_lists_the_tensors(model):
    path, _ = model
    table = describe_weights(path, "safetensors").tables[0]
    assert [(r["name"], r["square"]) for r in table.rows] == [
        ("attn.q", "✓"), ("attn.k", "✓"), ("mlp.up", ""), ("bias", "")]
    assert table.notes[0].startswith("4 tensors, 2 square: each one is a matrix sfapprox can approximate")


def test_info_on_weights_without_a_square_matrix_says_none_applies(tmp_path):
    write_safetensors(tmp_path / "w.safetensors", {"w": ("F32", np.ones((3, 4), dtype=np.float32))})
    table = describe_weights(tmp_path / "w.safetensors", "safetensors").tables[0]
    assert table.notes == ["1 tensor, 0 square: no matrix here that sfapprox can approximate (it needs a square one)"]


def test_legacy_format_and_sparse_weights_load_and_meta_or_truncated_ones_say_what_to_do(tmp_path):
    """The legacy format cannot be memory-mapped (torch refused it, and the user read torch's mmap
    advice); a sparse weight is its dense values; a meta tensor has none; a truncated file says so."""
    W = torch.arange(16.0).reshape(4, 4)
    torch.save({"w": W}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert np.array_equal(load_matrix(tmp_path / "legacy.pt").matrix, W.numpy())
    torch.save({"w": W.to_sparse()}, tmp_path / "coo.pt")
    assert np.array_equal(load_matrix(tmp_path / "coo.pt").matrix, W.numpy())
    torch.save({"w": torch.empty(4, 4, device="meta")}, tmp_path / "meta.pt")
    input_error(tmp_path / "meta.pt", "meta tensor: it has a shape but no values")
    whole = (tmp_path / "coo.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(whole[: len(whole) // 2])
    input_error(tmp_path / "cut.pt", "truncated or damaged")


def test_a_raw_pickle_with_code_is_refused_never_run_and_quietly(tmp_path, monkeypatch, recwarn):
    import pickle

    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw.pt").write_bytes(pickle.dumps({"w": _Payload()}, protocol=4))
    input_error(tmp_path / "raw.pt", "refused, never unpickled")
    assert not (tmp_path / "PWNED").exists()
    assert not [w for w in recwarn if "pickle protocol" in str(w.message)]  # torch's note is not shown


def test_every_square_weight_of_a_file_with_none_says_so(tmp_path):
    torch.save({"up": torch.ones(3, 5)}, tmp_path / "rect.pt")  # a manifest's var = "*" left unexpanded
    input_error(tmp_path / "rect.pt", "holds no square weight matrix", var="*")


def test_a_file_name_that_is_not_utf8_loads_still_weights_only(tmp_path, monkeypatch):
    """torch memory-maps a file from its path as UTF-8 text, which a Latin-1 byte in the name cannot be:
    such a file said "not a readable PyTorch file ('utf-8' codec can't encode ...)"; it is handed to torch
    open and read whole (its size checked first), and still with weights_only."""
    name = tmp_path / os.fsdecode(b"ok_caf\xe9.pt")
    W = torch.arange(16.0).reshape(4, 4)
    try:
        torch.save({"w": W}, name)
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses a file name that is not UTF-8")
    assert np.array_equal(load_matrix(name).matrix, W.numpy())
    assert [t["name"] for t in describe_weights(name, "torch").tables[0].rows] == ["w"]
    with pytest.raises(ResourceError, match=r"a PyTorch file read whole \(torch memory-maps a file only by a UTF-8"):
        load_matrix(name, max_memory=100)
    legacy = tmp_path / os.fsdecode(b"legacy_caf\xe9.pt")
    torch.save({"w": W}, legacy, _use_new_zipfile_serialization=False)
    assert np.array_equal(load_matrix(legacy).matrix, W.numpy())
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / os.fsdecode(b"evil_caf\xe9.pt")
    torch.save({"w": torch.ones(3, 3), "x": _Payload()}, evil)
    input_error(evil, "holds pickled objects other than tensors .* refused, never unpickled")
    assert not (tmp_path / "PWNED").exists()
    st = tmp_path / os.fsdecode(b"ok_caf\xe9.safetensors")  # read by its own rules, from the open file
    write_safetensors(st, {"w": ("F32", W.numpy())})
    assert np.array_equal(load_matrix(st).matrix, W.numpy())
