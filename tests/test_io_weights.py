"""A network's weights as matrices: .safetensors read by its own rules, .pt with weights_only, nothing unpickled."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
import torch
from _io_helpers import input_error

from sfapprox._errors import InputError, ResourceError
from sfapprox.describe import describe_weights
from sfapprox.io import load_matrix
from sfapprox.io._weights import optimizer_state


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
    input_error(path, r"holds 2 square weight matrices: attn.q 24 x 24, attn.k 24 x 24; pick one with var=")
    input_error(path, r"no tensor 'nope'", var="nope")
    input_error(path, r"tensor 'mlp.up' has shape 24 x 48, not a square matrix", var="mlp.up")


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


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64", "bool", "uint8", "int16"])
def test_integer_and_boolean_weights_read_as_a_npy_of_them_is(tmp_path, dtype):
    """Every integer type and bool a .npy of them loads as (an unsigned .pt tensor was refused while
    ``info`` listed it as a square matrix)."""
    values = (np.arange(16).reshape(4, 4) % 3).astype(dtype)
    torch.save({"w": torch.from_numpy(values.astype(np.int64)).to(getattr(torch, dtype))}, tmp_path / "w.pt")
    codes = {"uint16": "U16", "uint32": "U32", "uint64": "U64", "bool": "BOOL", "uint8": "U8", "int16": "I16"}
    write_safetensors(tmp_path / "w.safetensors", {"w": (codes[dtype], values)})
    for name in ("w.pt", "w.safetensors"):
        assert np.array_equal(load_matrix(tmp_path / name).to_dense(), values.astype(np.float64)), name


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


def raw_safetensors(path, header, data: bytes):
    """A .safetensors file with the header exactly as given (a dict, or JSON text for what a dict cannot say)."""
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


F32_4x4 = np.arange(16, dtype=np.float32).reshape(4, 4)


@pytest.mark.parametrize("entry, match", [
    # [int(d) for d in shape] read these as 4 x 4, 4 x 4 and 1 x 1 (no guessed values)
    ({"shape": "44"}, r"tensor 'w': its shape \"44\" is not a list of non-negative integers"),
    ({"shape": [4.7, 4]}, r"tensor 'w': its shape \[4.7, 4\] is not a list of non-negative integers"),
    ({"shape": [4.0, 4]}, r"tensor 'w': its shape \[4.0, 4\] is not"),
    ({"shape": [True, True], "data_offsets": [0, 4]}, r"tensor 'w': its shape \[true, true\] is not"),
    # passed the size check (16 values), then failed in numpy as "cannot parse file (ValueError: ...)"
    ({"shape": [-4, -4]}, r"tensor 'w': its shape \[-4, -4\] is not a list of non-negative integers"),
    ({"shape": None}, r"tensor 'w': its shape null is not"),
    ({"data_offsets": ["0", 64]}, r"tensor 'w': its data_offsets \[\"0\", 64\] are not two integers"),
    ({"data_offsets": [0, 64.0]}, r"tensor 'w': its data_offsets \[0, 64.0\] are not two integers"),
    ({"data_offsets": [False, 64]}, r"tensor 'w': its data_offsets \[false, 64\] are not"),
    ({"data_offsets": [0, 32, 64]}, r"tensor 'w': its data_offsets \[0, 32, 64\] are not two integers"),
    ({"data_offsets": [64, 0]}, r"tensor 'w': its data offsets 64..0 do not hold a F32 tensor of shape 4 x 4"),
    ({"data_offsets": [-64, 0]}, r"tensor 'w': its data offsets -64..0 do not hold"),
    ({"data_offsets": [0, 32]}, r"its data offsets 0..32 do not hold a F32 tensor of shape 4 x 4 \(64 bytes\)"),
    ({"data_offsets": [32, 96]}, r"tensor 'w': its data offsets 32..96 do not hold .* \(truncated or edited\)"),
    ({"dtype": ["F32"]}, r"tensor 'w' has dtype \[\"F32\"\], which sfapprox does not read"),
], ids=["shape-string", "shape-float", "shape-float-integral", "shape-bool", "shape-negative", "shape-null",
        "offsets-string", "offsets-float", "offsets-bool", "offsets-three", "offsets-reversed", "offsets-negative",
        "offsets-short", "offsets-beyond-data", "dtype-list"])
def test_safetensors_header_values_are_checked_never_guessed(tmp_path, entry, match):
    header = {"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64], **entry}}
    path = raw_safetensors(tmp_path / "bad.safetensors", header, F32_4x4.tobytes())
    input_error(path, match)
    with pytest.raises(InputError, match=match):  # what info lists is checked alike
        describe_weights(path, "safetensors")


def test_safetensors_tensors_never_share_bytes(tmp_path):
    data = np.arange(32, dtype=np.float32).tobytes()
    same = {"a": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
            "b": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}
    input_error(raw_safetensors(tmp_path / "same.safetensors", same, data),
                r"tensor 'b': its data offsets 0..64 overlap tensor 'a''s 0..64; each tensor needs bytes of "
                r"its own, so the header is damaged or edited", var="a")
    part = {"a": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
            "b": {"dtype": "F32", "shape": [2, 2], "data_offsets": [60, 76]},
            "c": {"dtype": "F32", "shape": [2, 2], "data_offsets": [96, 112]}}
    input_error(raw_safetensors(tmp_path / "part.safetensors", part, data),
                r"tensor 'b': its data offsets 60..76 overlap tensor 'a''s 0..64", var="a")
    repeated = ('{"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}, '
                '"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [64, 80]}}')
    input_error(raw_safetensors(tmp_path / "twice.safetensors", repeated, data),
                r"safetensors header names 'w' twice; which one holds is not said")
    scalar = {**part, "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}  # 1 value, in a's bytes
    del scalar["b"]
    input_error(raw_safetensors(tmp_path / "scalar.safetensors", scalar, data),
                r"tensor 'a': its data offsets 0..64 overlap tensor 's''s 0..4", var="a")
    # Neighbours share no bytes, nor does an empty tensor: read as written.
    fine = {"a": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
            "b": {"dtype": "F32", "shape": [4, 4], "data_offsets": [64, 128]},
            "e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [32, 32]}}
    path = raw_safetensors(tmp_path / "fine.safetensors", fine, data)
    np.testing.assert_array_equal(load_matrix(path, var="b").matrix, np.arange(16, 32).reshape(4, 4))


@pytest.mark.parametrize("suffix", ["safetensors", "pt"])
def test_an_empty_tensor_is_not_a_matrix_to_approximate(tmp_path, suffix):
    """info listed a 0 x 0 tensor as square, usable; --var then refused it as empty."""
    tensors = {"empty": np.zeros((0, 0), np.float32), "w": np.ones((3, 3), np.float32)}
    path = tmp_path / f"m.{suffix}"
    if suffix == "pt":
        torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, path)
    else:
        write_safetensors(path, {k: ("F32", v) for k, v in tensors.items()})
    table = describe_weights(path, "safetensors" if suffix == "safetensors" else "torch").tables[0]
    assert [(r["name"], r["square"]) for r in table.rows] == [("empty", ""), ("w", "✓")]
    assert load_matrix(path).n == 3  # the only square one, as before
    with pytest.raises(InputError, match=r"tensor 'empty' has shape 0 x 0, not a square matrix"):
        load_matrix(path, var="empty")


def test_fp8_tensors_read_and_a_tensor_of_a_type_not_read_keeps_no_other_from_being_read(tmp_path):
    """An FP8 checkpoint (F8_E4M3 weights, F32 scales) or a file with a C64 or F4 tensor anywhere was
    refused whole, even by info ("tensor 'c' has dtype C64, which sfapprox does not read")."""
    W = torch.randn(8, 8, generator=torch.Generator().manual_seed(0)) * 100
    e4m3, e5m2 = W.to(torch.float8_e4m3fn), W.to(torch.float8_e5m2)
    # every byte but the two NaNs (a matrix with NaN is refused): subnormals, both zeros, the largest
    every_byte = torch.arange(256, dtype=torch.uint8).masked_fill(torch.arange(256) % 128 == 127, 0).reshape(16, 16)
    raw = lambda t: t.view(torch.uint8).numpy()  # noqa: E731
    blobs = {"e4m3": ("F8_E4M3", [8, 8], raw(e4m3).tobytes()), "e5m2": ("F8_E5M2", [8, 8], raw(e5m2).tobytes()),
             "bytes": ("F8_E4M3", [16, 16], every_byte.numpy().tobytes()),
             "c": ("C64", [4, 4], np.ones((4, 4), np.complex64).tobytes()),
             "f4": ("F4", [4, 4], bytes(8)),  # 16 values packed 2 a byte, as the format has them
             "new": ("F2_NEXT", [4, 4], bytes(3)),  # a type the format gains later: its size is not checked
             "w": ("F32", [8, 8], W.numpy().tobytes())}
    header, offset = {}, 0
    for name, (dtype, shape, data) in blobs.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    path = raw_safetensors(tmp_path / "fp8.safetensors", header, b"".join(d for _, _, d in blobs.values()))
    np.testing.assert_array_equal(load_matrix(path, var="e4m3").matrix, e4m3.double().numpy())
    np.testing.assert_array_equal(load_matrix(path, var="e5m2").matrix, e5m2.double().numpy())
    np.testing.assert_array_equal(load_matrix(path, var="w").matrix, W.double().numpy())
    np.testing.assert_array_equal(load_matrix(path, var="bytes").matrix,
                                  every_byte.view(torch.float8_e4m3fn).double().numpy())
    input_error(path, r"tensor 'c' holds complex values \(it reads F64, .*F8_E4M3.*\); a real numeric matrix", var="c")
    input_error(path, r"tensor 'new' holds F2_NEXT values, which sfapprox does not read \(it reads F64, ", var="new")
    rows = {r["name"]: r["square"] for r in describe_weights(path, "safetensors").tables[0].rows}
    assert rows == {"e4m3": "✓", "e5m2": "✓", "bytes": "✓", "c": "", "f4": "", "new": "", "w": "✓"}


def test_a_square_tensor_that_is_not_read_is_not_listed_as_one_to_approximate(tmp_path):
    """info marked a complex (or meta) 4 x 4 tensor square, usable, --var then refused it, and a manifest's
    var = "*" ran it to fail; the only readable square tensor is the one read without var."""
    torch.save({"c": torch.ones(4, 4, dtype=torch.complex64), "m": torch.empty(4, 4, device="meta"),
                "w": torch.eye(3)}, tmp_path / "w.pt")
    write_safetensors(tmp_path / "w.safetensors", {"c": ("C64", np.ones((4, 4), np.complex64)),
                                                   "w": ("F32", np.eye(3, dtype=np.float32))})
    for name, fmt in (("w.pt", "torch"), ("w.safetensors", "safetensors")):
        report = describe_weights(tmp_path / name, fmt)
        assert [r["square"] for r in report.tables[0].rows if r["name"] != "w"] == [""] * (2 if fmt == "torch" else 1)
        assert report.tables[0].notes[0].startswith(f"{3 if fmt == 'torch' else 2} tensors, 1 square")
        assert "not counted, square but not read as a matrix: c holds " in report.tables[0].notes[1]
        np.testing.assert_array_equal(load_matrix(tmp_path / name).matrix, np.eye(3))
    input_error(tmp_path / "w.pt", r"tensor 'c' holds torch.complex64 values; a real numeric matrix is needed", var="c")
    if hasattr(torch, "float4_e2m1fn_x2"):  # torch 2.8: two values a byte, which torch does not convert
        torch.save({"w": torch.zeros(4, 4, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)}, tmp_path / "fp4.pt")
        input_error(tmp_path / "fp4.pt", r"tensor 'w' holds torch.float4_e2m1fn_x2 values, which torch does not "
                                         r"convert to numbers; a real numeric matrix is needed")  # not a NotImplementedError
        assert describe_weights(tmp_path / "fp4.pt", "torch").tables[0].notes[0].endswith(
            "(it needs a square one of values it reads)")


@pytest.mark.parametrize("var, meant", [
    ("layers.0.attn.q.weight", "'module.layers.0.attn.q.weight'"),  # saved from DataParallel
    ("module.layers.3.attn.q", "'module.layers.3.attn.q.weight'"),  # .weight left out
    ("module.layers.3.attn.q.weights", "'module.layers.3.attn.q.weight'"),  # misspelt
])
def test_a_tensor_name_not_in_the_file_names_the_one_meant(tmp_path, var, meant):
    """The listing shows a model's first 8 square weights: layers 0 and 1, "and 40 more", never the
    one a prefix or a suffix away."""
    torch.save({f"module.layers.{i}.attn.{p}.weight": torch.ones(4, 4) for i in range(12) for p in "qkvo"},
               tmp_path / "dp.pt")
    msg = input_error(tmp_path / "dp.pt", r"no tensor", var=var)
    assert f"no tensor {var!r} (did you mean {meant}?); square weight matrices: " in msg, msg
    assert "' or '" not in msg.split("?")[0]  # the one meant alone, not the next layers' spellings
    assert "no tensor 'zzz'; square" in input_error(tmp_path / "dp.pt", r"no tensor", var="zzz")


def test_info_of_a_model_with_long_names_keeps_the_square_marks_beside_them_in_a_narrow_window(tmp_path):
    """At 80 columns, language_model.model.layers.N... names split the table in two parts, the square
    marks a whole listing below their names; the dtype gives way first (and is said to)."""
    from sfapprox.formats import layout

    torch.save({f"language_model.model.layers.{i}.self_attn.{p}_proj.weight": torch.ones(4, 4, dtype=torch.bfloat16)
                for i in range(2) for p in "qk"}, tmp_path / "m.pt")
    table = describe_weights(tmp_path / "m.pt", "torch").tables[0]
    table.rows = [{**r, "shape": "4096 x 4096"} for r in table.rows]  # as a real model's
    assert len(layout(table, 90).parts) == 1  # wide enough for all four
    plan = layout(table, 80)
    assert len(plan.parts) == 1 and plan.hidden == ["dtype"], plan


def test_two_tensors_of_one_dotted_name_are_refused_not_one_dropped(tmp_path):
    """{"a.b": I, "a": {"b": ones}}: info listed one tensor a.b, and --var a.b read the ones, silently."""
    torch.save({"a.b": torch.eye(3), "a": {"b": torch.ones(3, 3)}}, tmp_path / "dup.pt")
    input_error(tmp_path / "dup.pt", r"holds two tensors named 'a.b' once nested names are dotted .*; "
                                     r"save them under names of their own", var="a.b")
    with pytest.raises(InputError, match="two tensors named 'a.b'"):
        describe_weights(tmp_path / "dup.pt", "torch")


def test_a_training_checkpoint_s_optimizer_moments_are_not_taken_for_weights(tmp_path):
    # A checkpoint of one square layer trained by Adam holds three square tensors, two of them Adam's moments:
    # "holds 3 square weight matrices; pick one with --var", and a manifest's var = "*" ran all three.
    layer = torch.nn.Linear(6, 6, bias=False)
    opt = torch.optim.Adam(layer.parameters())
    layer(torch.ones(2, 6)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model_state_dict": layer.state_dict(), "optimizer_state_dict": opt.state_dict(), "epoch": 3}, path)
    loaded = load_matrix(path)  # the one weight, without --var
    assert np.array_equal(loaded.matrix, layer.weight.detach().double().numpy())
    moment = load_matrix(path, var="optimizer_state_dict.state.0.exp_avg")  # still read where named
    assert np.array_equal(moment.matrix, opt.state_dict()["state"][0]["exp_avg"].double().numpy())
    info = describe_weights(path, "torch")
    rows = {r["name"]: r for r in info.data["tensors"]}
    assert rows["optimizer_state_dict.state.0.exp_avg_sq"]["optimizer"] and not rows["model_state_dict.weight"]["optimizer"]
    assert any("2 of the square ones are an optimizer's state" in n for n in info.tables[0].notes)


def test_an_optimizer_s_state_saved_under_any_name_is_not_taken_for_a_weight(tmp_path):
    """{"model": ..., "opt": optimizer.state_dict()}: "opt.state.0.exp_avg" did not match the optimizer names
    and was taken for a weight (the file then "holds 3 square weight matrices"); kept as torch keeps it (the
    state keyed by the parameters themselves), its names are "<tensor key 0>"."""
    layer = torch.nn.Linear(5, 5, bias=False)
    opt = torch.optim.Adam(layer.parameters())
    layer(torch.ones(2, 5)).sum().backward()
    opt.step()
    path = tmp_path / "run.pt"
    torch.save({"model": layer.state_dict(), "opt": opt.state_dict(), "raw": {"state": dict(opt.state)}}, path)
    assert np.array_equal(load_matrix(path).matrix, layer.weight.detach().double().numpy())  # without --var
    rows = {r["name"]: r["optimizer"] for r in describe_weights(path, "torch").data["tensors"]}
    assert rows["opt.state.0.exp_avg"] and rows["opt.state.0.exp_avg_sq"] and not rows["model.weight"]
    assert rows["raw.state.<tensor key 0>.exp_avg"] and rows["raw.state.<tensor key 0>.exp_avg_sq"]
    assert not optimizer_state("blocks.state.0.weight") and not optimizer_state("opt.fc.weight")


# -- PyTorch Lightning checkpoints (.ckpt) --------------------------------------------------------------

#: What the classes below did when built (each way a pickle can build an object): nothing, when a file is
#: read as sfapprox reads it.
_BUILT: list[str] = []


def _record(what: str) -> None:
    _BUILT.append(what)


class _Hyper:
    """A user's class of hyper-parameters, as LightningModule.save_hyperparameters() keeps them."""

    def __new__(cls, *args, **kwargs):
        _BUILT.append("__new__")
        return super().__new__(cls)

    def __init__(self, lr: float = 0.1):
        _BUILT.append("__init__")
        self.lr = lr

    def __setstate__(self, state):
        _BUILT.append("__setstate__")
        self.__dict__.update(state)


class _Reduced:
    """An object that pickles as a call to a function of the user's."""

    def __reduce__(self):
        return (_record, ("__reduce__",))


class _HyperDict(dict):
    """A dict of the user's (a subclass): weights_only fills only dict's own, so it cannot stand unbuilt."""

    def __setstate__(self, state):
        _BUILT.append("__setstate__ of a dict")


def lightning_checkpoint(path, hyper_parameters) -> torch.Tensor:
    """A checkpoint as Lightning's Trainer.save_checkpoint writes it (torch.save of this dict), of a 6 x 6
    layer trained one step by Adam; its weight is returned."""
    import pathlib

    layer = torch.nn.Linear(6, 6)
    opt = torch.optim.Adam(layer.parameters())
    layer(torch.ones(2, 6)).sum().backward()
    opt.step()
    torch.save({"epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.4.0",
                "state_dict": {f"model.{k}": v for k, v in layer.state_dict().items()},
                "optimizer_states": [opt.state_dict()], "lr_schedulers": [],
                "hyper_parameters": hyper_parameters,
                "callbacks": {"ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min'}": {
                    "best_model_score": torch.tensor(0.25), "dirpath": pathlib.PosixPath("/runs/ckpts")}},
                "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 3}}}}}, path)
    _BUILT.clear()  # the objects saved were built here, by the test
    return layer.weight.detach()


def test_a_lightning_checkpoint_reads_its_weights_and_builds_none_of_its_other_objects(tmp_path):
    """A .ckpt was an unknown extension, and with --format torch weights_only refused the whole file for
    its hyper-parameters (an argparse.Namespace, a user's class): now they stand unbuilt, never run."""
    import argparse
    import pathlib

    from sfapprox.io import detect_format

    path = tmp_path / "epoch=3-step=120.ckpt"
    hyper = {"args": argparse.Namespace(lr=0.1, data=pathlib.PosixPath("/data")), "config": _Hyper(0.5),
             "hook": _Reduced()}
    weight = lightning_checkpoint(path, hyper)
    assert detect_format(path) == "torch"
    loaded = load_matrix(path)  # the one square weight: Adam's moments are not weights
    assert np.array_equal(loaded.matrix, weight.double().numpy()) and loaded.format == "torch"
    assert loaded.notes[0] == "tensor 'state_dict.model.weight' (torch.float32)"
    assert "argparse.Namespace" in loaded.notes[1] and "test_io_weights._Hyper" in loaded.notes[1]
    assert "none was imported or run" in loaded.notes[1]
    moment = load_matrix(path, var="optimizer_states.0.state.0.exp_avg")  # read where named
    assert moment.n == 6
    rows = {r["name"]: r for r in describe_weights(path, "torch").data["tensors"]}
    assert rows["state_dict.model.weight"]["square"] and rows["optimizer_states.0.state.0.exp_avg"]["optimizer"]
    assert "callbacks.ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min'}.best_model_score" in rows
    input_error(path, r"no tensor 'model.weight' \(did you mean 'state_dict.model.weight'\?\)", var="model.weight")
    assert _BUILT == []  # no __new__, __init__, __setstate__ or reduce function of the user's ran
    # ... which the file would have run, unpickled as it was saved: the check above can see it
    torch.load(path, weights_only=False)
    assert {"__new__", "__setstate__", "__reduce__"} <= set(_BUILT)
    _BUILT.clear()


class _Exec:
    def __reduce__(self):
        return (exec, ("open('PWNED', 'w').close()",))


class _Call:
    def __reduce__(self):
        import subprocess

        return (subprocess.call, (["touch", "PWNED"],))


def test_code_a_checkpoint_names_outside_os_and_sys_stands_unbuilt_too_never_run(tmp_path, monkeypatch):
    """exec, subprocess.call (torch blocks only os, sys and their kin): placeholders too, called with their
    arguments and dropping them; the tensor beside them is read."""
    monkeypatch.chdir(tmp_path)
    torch.save({"w": torch.eye(3), "x": _Exec(), "y": _Call()}, tmp_path / "code.pt")
    loaded = load_matrix(tmp_path / "code.pt")
    assert loaded.n == 3 and "builtins.exec" in loaded.notes[1] and ".call" in loaded.notes[1], loaded.notes
    assert not (tmp_path / "PWNED").exists()


def test_a_checkpoint_whose_tensors_cannot_be_had_without_its_objects_is_refused_naming_them(tmp_path):
    """Objects that cannot stand unbuilt (a dict subclass, which weights_only fills only if it is dict
    itself), a whole pickled model (its tensors inside it): one line naming the classes, and what to do."""
    import re
    from pathlib import PosixPath

    path = tmp_path / "dict.ckpt"
    lightning_checkpoint(path, _HyperDict(lr=0.1))
    posix_path = re.escape(f"{PosixPath.__module__}.{PosixPath.__qualname__}")  # pathlib._local.PosixPath on 3.13
    msg = input_error(path, rf"holds pickled objects other than tensors \(classes or code: {posix_path}, "
                            r"test_io_weights._HyperDict\); "
                            r"refused, never unpickled; where the file is trusted, save its tensors alone: .*"
                            r"torch.save\(ckpt\['state_dict'\], path\)")
    assert _BUILT == [], msg
    torch.save(torch.nn.Linear(4, 4), tmp_path / "model.pt")
    input_error(tmp_path / "model.pt", r"holds pickled objects other than tensors \(classes or code: "
                                       r"torch.nn.modules.linear.Linear\), and no tensor outside them; refused")


def test_a_checkpoint_is_a_weights_file_to_info_and_to_a_manifest(tmp_path):
    """info listed a .ckpt's tensors only with --format torch (without, it refused the extension), and a
    manifest's var = "*" refused a .ckpt as no weights file."""
    from typer.testing import CliRunner

    from sfapprox.cli import app
    from sfapprox.datasets.manifest import WEIGHT_FORMATS, WEIGHT_SUFFIXES
    from sfapprox.io import format_extensions

    assert set(WEIGHT_SUFFIXES) == {e for key in WEIGHT_FORMATS for e in format_extensions(key)}
    path = tmp_path / "last.ckpt"
    lightning_checkpoint(path, {"lr": 0.1})
    res = CliRunner().invoke(app, ["info", str(path)])
    assert res.exit_code == 0 and "state_dict.model.weight" in res.output, res.output
    refused = tmp_path / "refused.ckpt"
    lightning_checkpoint(refused, _HyperDict(lr=0.1))
    res = CliRunner().invoke(app, ["compare", str(refused), "--methods", "tsvd"])
    assert res.exit_code == 2 and "refused, never unpickled" in res.output and "Traceback" not in res.output


# -- Attacks on the placeholders: crafted pickles, as an attacker writes them ---------------------------
#
# Each file is torch.save's zip of {"w": eye(3)}, its pickle (data.pkl) edited by hand to hold one more
# object, "x", of the opcodes given.  Whatever the file does, nothing of it may run: no PWNED file written
# in the working folder, no function of this module called (_RAN), no module imported (pwn_on_import,
# which writes PWNED when it is).

#: Calls of _ran: a function a crafted file names, which must never be called.
_RAN: list[tuple] = []


def _ran(*args) -> None:
    _RAN.append(args)


def _g(module: str, name: str) -> bytes:
    """GLOBAL module.name (as the weights-only unpickler reads it: text lines)."""
    return b"c" + f"{module}\n{name}\n".encode()


def _s(text: str) -> bytes:
    """BINUNICODE text."""
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _call(func: bytes, *args: bytes) -> bytes:
    """func(*args), pickled as REDUCE."""
    return func + b"(" + b"".join(args) + b"tR"


#: The memo index torch.save's pickle of {"w": eye(3)} gives the tensor w (BINGET of it is that tensor).
_W = b"h\x0d"
_EMPTY_ORDERED_DICT = _call(_g("collections", "OrderedDict"))


def crafted_pt(path, body: bytes):
    """torch.save's file of {"w": eye(3)} with ``body`` (pickle opcodes of one object) set as its "x"."""
    import io
    import zipfile

    buf = io.BytesIO()
    torch.save({"w": torch.eye(3)}, buf)
    src = zipfile.ZipFile(buf)
    names = src.namelist()
    pkl = src.read(names[0])
    assert names[0].endswith("/data.pkl") and pkl.endswith(b"q\x0ds.")  # ... the tensor, memo 13; SETITEM; STOP
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        for name in names:
            out.writestr(name, pkl[:-1] + _s("x") + body + b"s." if name == names[0] else src.read(name))
    return path


@pytest.fixture
def attacked(tmp_path, monkeypatch):
    """A working folder where code run by a file shows (PWNED), and a module whose import shows."""
    import sys

    monkeypatch.chdir(tmp_path)
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "pwn_on_import.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w').close()\nrun = print\n")
    monkeypatch.syspath_prepend(str(mod))
    _RAN.clear()
    before = set(torch.serialization.get_safe_globals())
    yield tmp_path
    assert not (tmp_path / "PWNED").exists(), "code from the file ran"
    assert _RAN == [], "a function the file names was called"
    assert "pwn_on_import" not in sys.modules, "a module the file names was imported"
    assert set(torch.serialization.get_safe_globals()) == before, "torch's allowlist was left changed"


_TOUCH = "open('PWNED', 'w').close()"
_ATTACKS = {
    "eval": _call(_g("builtins", "eval"), _s(_TOUCH)),
    "exec": _call(_g("builtins", "exec"), _s(_TOUCH)),
    "py2-name-of-eval": _call(_g("__builtin__", "eval"), _s(_TOUCH)),  # mapped to builtins.eval by torch
    "compile-then-exec": _call(_g("builtins", "exec"), _call(_g("builtins", "compile"), _s(_TOUCH), _s("f"),
                                                             _s("exec"))),
    "os.system": _call(_g("os", "system"), _s("touch PWNED")),
    "posix.system": _call(_g("posix", "system"), _s("touch PWNED")),
    "subprocess.Popen": _call(_g("subprocess", "Popen"), b"](" + _s("touch") + _s("PWNED") + b"e"),
    "subprocess.Popen-newobj": _g("subprocess", "Popen") + b"(](" + _s("touch") + _s("PWNED") + b"et\x81",
    "subprocess.run-kwargs": _call(_g("subprocess", "run"), _s("touch PWNED"), b"}" + _s("shell") + b"\x88s"),
    "getattr-of-import_module": _call(
        _call(_g("builtins", "getattr"), _call(_g("importlib", "import_module"), _s("os")), _s("system")),
        _s("touch PWNED")),
    "import_module": _call(_g("importlib", "import_module"), _s("pwn_on_import")),
    "__import__": _call(_g("builtins", "__import__"), _s("pwn_on_import")),
    "global-of-a-module-with-side-effects": _call(_g("pwn_on_import", "run"), _s("x")),
    "a-function-of-the-user-s": _call(_g("test_io_weights", "_ran"), _s("reduce")),
    "a-function-of-the-user-s-newobj": _g("test_io_weights", "_ran") + b"(" + _s("newobj") + b"t\x81",
    "pickle.loads-of-a-payload": _call(_g("pickle", "loads"), _call(
        _g("_codecs", "encode"), _s("cposix\nsystem\n(X\x0b\x00\x00\x00touch PWNEDtR."), _s("latin1"))),
    "runpy": _call(_g("runpy", "run_module"), _s("pwn_on_import")),
    "torch.load-unsafe": _call(_g("torch", "load"), _s("other.pt"), b"}" + _s("weights_only") + b"\x89s"),
    # a placeholder's instance called, or given state that names a class: dropped, or refused
    "call-of-an-unbuilt-instance": _call(_call(_g("argparse", "Namespace")), _s(_TOUCH)),
    "build-with-class-state": _call(_g("argparse", "Namespace")) + b"}" + _s("__class__") + _g("builtins", "eval")
    + b"sb",
    "build-with-slot-state": _call(_g("argparse", "Namespace")) + b"N}" + _s("__reduce__") + _g("builtins", "exec")
    + b"s\x86b",
    "build-of-the-class-itself": _g("argparse", "Namespace") + b"}" + _s("__init__") + _g("builtins", "eval") + b"sb",
    "newobj-with-arguments": _g("argparse", "Namespace") + b"(" + _s(_TOUCH) + _g("builtins", "exec") + b"t\x81",
    # a name torch treats specially (it tells the user to import torch.nested / torch.distributed)
    "nested-tensor-name": _call(_g("torch.nested._internal.nested_tensor", "_rebuild_njt"), _s(_TOUCH)),
    "dtensor-name": _call(_g("torch.distributed.tensor", "DTensor"), _s(_TOUCH)),
    # placeholders handed to torch's allowed rebuild functions
    "rebuild_tensor_v2-of-an-unbuilt-storage": _call(
        _g("torch._utils", "_rebuild_tensor_v2"), _call(_g("argparse", "Namespace")), b"K\x00", b"K\x03K\x03\x86",
        b"K\x03K\x01\x86", b"\x89", _call(_g("argparse", "Namespace"))),
    "rebuild_parameter-with-unbuilt-hooks": _call(_g("torch._utils", "_rebuild_parameter"), _W, b"\x89",
                                                  _call(_g("builtins", "eval"), _s(_TOUCH))),
    "rebuild_from_type_v2-of-unbuilt": _call(_g("torch._tensor", "_rebuild_from_type_v2"), _g("builtins", "exec"),
                                             _g("builtins", "exec"), b"(" + _s(_TOUCH) + b"t", b"}"),
    "rebuild_from_type_v2-as-subclass": _call(_g("torch._tensor", "_rebuild_from_type_v2"),
                                              _g("torch._utils", "_rebuild_tensor_v2"), _g("builtins", "eval"),
                                              b"(" + _W + b"K\x00K\x03K\x03\x86K\x03K\x01\x86\x89" +
                                              _EMPTY_ORDERED_DICT + b"t", b"}"),
    # a first load that fails for another reason than the globals named: the second fails too
    "an-opcode-not-read-after-a-global": _call(_g("builtins", "exec"), _s(_TOUCH)) + b"\x93",
    "an-append-to-a-dict-after-a-global": b"}" + _call(_g("builtins", "exec"), _s(_TOUCH)) + b"a",
    "a-name-no-class-can-have": _call(_g("builtins", "e\x00val"), _s(_TOUCH)),
    "a-module-inside-os": _call(_g("os.path", "exists"), _s("PWNED")),
    # a persistent id (a storage) whose type is a placeholder, or whose record is outside the file's
    "persistent-id-of-an-unbuilt-storage-type": b"(" + _s("storage") + _g("builtins", "eval") + _s("0") + _s("cpu")
    + b"K\x09tQ",
    "persistent-id-of-another-record": b"(" + _s("storage") + _g("torch", "FloatStorage") + _s("../../../etc/passwd")
    + _s("cpu") + b"K\x09tQ" + _g("builtins", "eval") + b"\x86",
}


@pytest.mark.parametrize("body", _ATTACKS.values(), ids=_ATTACKS.keys())
def test_a_crafted_pickle_runs_and_imports_nothing(attacked, body):
    """Whatever a file names or calls, it is read around, or refused in one line: never run or imported."""
    path = crafted_pt(attacked / "evil.pt", body)
    try:
        loaded = load_matrix(path, var="w")
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path)), exc
    else:
        np.testing.assert_array_equal(loaded.matrix, np.eye(3))
        assert "were left unbuilt" in loaded.notes[1] and "none was imported or run" in loaded.notes[1], loaded.notes
    with pytest.raises(Exception):  # the user's own weights_only load still fails on it after ours  # noqa: B017
        torch.load(path, weights_only=True)


def test_a_file_naming_thousands_of_classes_is_refused_at_once_not_unpickled_for_hours(attacked):
    """torch's unpickler looks every allowed name up afresh at each GLOBAL: 2,000 placeholders took 2 s to
    read around, 4,000 8 s, and the time grows as the square of a file's size.  A checkpoint's few load."""
    import time

    def naming(n):
        return b"](" + b"".join(_g("hyper", f"C{i}") for i in range(n)) + b"e"

    many = crafted_pt(attacked / "many.pt", naming(2000))
    t0 = time.perf_counter()
    msg = input_error(many, r"holds pickled objects other than tensors "
                      r"\(classes or code: hyper.C0, .* and 1,994 more: more than the 64 left unbuilt at most\); "
                      r"refused, never unpickled", var="w")
    assert time.perf_counter() - t0 < 5, msg  # loose: refused before any placeholder is made
    loaded = load_matrix(crafted_pt(attacked / "some.pt", naming(64)), var="w")
    assert "hyper.C0, hyper.C1, hyper.C10" in loaded.notes[1] and "and 58 more" in loaded.notes[1], loaded.notes


class _UsersOwn:
    """A class the user put on torch's allowlist themselves."""


def test_our_placeholders_leave_torch_s_allowlist_as_the_user_had_it(tmp_path, monkeypatch):
    """After a checkpoint read (list_weights, info, load_matrix), read around or refused (an exception inside
    the placeholders' load), the allowlist is the user's again: their own entry kept, ours gone, and their own
    weights_only load of the checkpoint refused as before."""
    import argparse
    import pickle

    from typer.testing import CliRunner

    from sfapprox.cli import app
    from sfapprox.io import list_weights

    ckpt, refused = tmp_path / "ns.ckpt", tmp_path / "dict.ckpt"
    lightning_checkpoint(ckpt, argparse.Namespace(lr=0.1))
    lightning_checkpoint(refused, _HyperDict(lr=0.1))
    torch.save(_UsersOwn(), tmp_path / "own.pt")
    monkeypatch.setattr(torch.serialization._weights_only_unpickler, "_marked_safe_globals_set", set())
    torch.serialization.add_safe_globals([_UsersOwn])
    assert "state_dict.model.weight" in [t["name"] for t in list_weights(ckpt, "torch")]
    assert CliRunner().invoke(app, ["info", str(ckpt)]).exit_code == 0
    assert load_matrix(ckpt).n == 6
    input_error(refused, "refused, never unpickled")  # its second load raised inside the placeholders' context
    assert torch.serialization.get_safe_globals() == [_UsersOwn]
    assert isinstance(torch.load(tmp_path / "own.pt", weights_only=True), _UsersOwn)
    for path in (ckpt, refused):
        with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
            torch.load(path, weights_only=True)


def test_another_thread_s_own_load_meanwhile_refuses_what_our_placeholders_stand_for(tmp_path, monkeypatch):
    """torch's allowlist is the whole process's: while sfapprox read a checkpoint around its Namespace, a
    weights_only load of the user's in another thread built that Namespace as our placeholder, not refused."""
    import argparse
    import pickle
    import threading

    from sfapprox.io._weights import _Unbuilt

    ckpt = tmp_path / "ns.ckpt"
    lightning_checkpoint(ckpt, argparse.Namespace(lr=0.1))
    theirs, load = [], torch.load

    def users_load():
        try:
            theirs.append(load(ckpt, weights_only=True))
        except pickle.UnpicklingError as exc:
            theirs.append(exc)

    def ours(*args, **kwargs):  # sfapprox's load, with the user's thread loading while it is under way
        if any(isinstance(g, type) and issubclass(g, _Unbuilt) for g in torch.serialization.get_safe_globals()):
            user = threading.Thread(target=users_load)
            user.start()
            user.join()
        return load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", ours)
    assert load_matrix(ckpt).n == 6
    assert len(theirs) == 1 and isinstance(theirs[0], pickle.UnpicklingError), theirs
    assert "argparse.Namespace" in str(theirs[0])


def test_a_tensor_given_attributes_that_shadow_its_methods_is_read_by_its_values(attacked):
    """torch's rebuild functions set any attribute a file names on a tensor (a Parameter's state): detach,
    numel, to, numpy, is_complex, set to allowed classes or to placeholders, were what sfapprox called
    (AttributeError: '_Unbuilt' object has no attribute 'to', a traceback), and a dict's items."""
    shadows = b"}(" + b"".join(_s(m) + _g("builtins", "eval") for m in ("detach", "to", "numpy", "is_floating_point"))
    shadows += _s("numel") + _g("torch", "Size") + _s("is_complex") + _g("builtins", "set") + b"u"
    param = _call(_g("torch._utils", "_rebuild_parameter_with_state"), _W, b"\x89", _EMPTY_ORDERED_DICT, shadows)
    path = crafted_pt(attacked / "shadowed.pt", param)
    np.testing.assert_array_equal(load_matrix(path, var="x").matrix, np.eye(3))
    assert {r["name"]: r["square"] for r in describe_weights(path, "torch").data["tensors"]} == {"w": True, "x": True}
    plain = _call(_g("torch._utils", "_rebuild_parameter_with_state"), _W, b"\x89", _EMPTY_ORDERED_DICT,
                  b"}" + _s("detach") + _g("builtins", "set") + b"s")  # no global beyond weights_only's own
    np.testing.assert_array_equal(load_matrix(crafted_pt(attacked / "plain.pt", plain), var="x").matrix, np.eye(3))
    items = _EMPTY_ORDERED_DICT + b"(" + _s("v") + _W + b"u}" + _s("items") + _g("collections", "Counter") + b"sb"
    np.testing.assert_array_equal(load_matrix(crafted_pt(attacked / "items.pt", items), var="x.v").matrix, np.eye(3))


def test_a_rebuild_function_given_the_wrong_objects_is_a_one_line_refusal_not_a_traceback(attacked):
    """_rebuild_tensor_v2 given an int for its storage raised AttributeError ('int' object has no attribute
    'dtype') out of the first load, past the one-line errors."""
    bad = _call(_g("torch._utils", "_rebuild_tensor_v2"), b"K\x01K\x00K\x03K\x03\x86K\x03K\x01\x86\x89",
                _EMPTY_ORDERED_DICT)
    input_error(crafted_pt(attacked / "bad.pt", bad), r"not a readable PyTorch file \(.*'dtype'")


def test_a_global_s_name_reaches_the_terminal_with_its_control_characters_escaped(attacked):
    """The names listed as unbuilt or refused are the file's: an ESC sequence in one (clear the screen, set the
    window's title) was printed raw in the error line and the notes."""
    esc = "\x1b]0;owned\x07\x1b[2J"
    msg = input_error(crafted_pt(attacked / "refused.pt", _call(_g("os", "system" + esc), _s("x"))), "refused")
    assert "\x1b" not in msg and "\x07" not in msg and r"os.system\x1b]0;owned\x07\x1b[2J" in msg, msg
    loaded = load_matrix(crafted_pt(attacked / "read.pt", _call(_g("hyper", "C" + esc), _s("x"))), var="w")
    assert "\x1b" not in loaded.notes[1] and r"hyper.C\x1b]0;owned" in loaded.notes[1], loaded.notes


# -- Containers weights_only does not fill: collections.defaultdict --------------------------------------

def _default_dict(factory: bytes, how: str = "reduce") -> bytes:
    """defaultdict(factory) holding the tensor w under "v", as pickle writes it (REDUCE), or by NEWOBJ."""
    made = (_call(_g("collections", "defaultdict"), factory) if how == "reduce"
            else _g("collections", "defaultdict") + b"(" + factory + b"t\x81")
    return made + b"(" + _s("v") + _W + b"u"


_FACTORIES = {
    "eval": _g("builtins", "eval"),
    "exec": _g("builtins", "exec"),
    "a-function-of-the-user-s": _g("test_io_weights", "_ran"),
    "global-of-a-module-with-side-effects": _g("pwn_on_import", "run"),
    "subprocess.Popen": _g("subprocess", "Popen"),
    "a-call-as-factory": _call(_g("builtins", "eval"), _s(_TOUCH)),
    "the-factory-a-defaultdict-too": _g("collections", "defaultdict"),
}


@pytest.mark.parametrize("how", ["reduce", "newobj"])
@pytest.mark.parametrize("factory", _FACTORIES.values(), ids=_FACTORIES.keys())
def test_a_defaultdict_is_read_as_a_plain_dict_its_factory_never_called(attacked, factory, how):
    """torch's unpickler fills only dict, OrderedDict and Counter: a defaultdict anywhere refused the whole file.
    It is a plain dict now, whatever its default factory names (never imported, built or called)."""
    path = crafted_pt(attacked / "dd.pt", _default_dict(factory, how))
    loaded = load_matrix(path, var="x.v")
    np.testing.assert_array_equal(loaded.matrix, np.eye(3))
    assert loaded.notes[1] == "x: collections.defaultdict, read as a plain dict (a default factory is never called)"
    assert [t["name"] for t in describe_weights(path, "torch").data["tensors"]] == ["w", "x.v"]
    with pytest.raises(Exception):  # the user's own weights_only load still refuses it  # noqa: B017
        torch.load(path, weights_only=True)


def test_a_defaultdict_whose_factory_torch_blocks_or_that_is_given_state_is_refused_in_one_line(attacked):
    """os.system is a module torch blocks whatever the allowlist; a defaultdict given state (BUILD) or
    called is no dict weights_only builds: each refused, nothing run."""
    for body in (_default_dict(_g("os", "system")), _default_dict(_g("posix", "system")),
                 _default_dict(_g("builtins", "list")) + b"}" + _s("__class__") + _g("builtins", "eval") + b"sb",
                 _call(_call(_g("collections", "defaultdict"), _g("builtins", "list")), _s(_TOUCH))):
        msg = input_error(crafted_pt(attacked / "dd.pt", body), "refused, never unpickled", var="w")
        assert "\n" not in msg


def test_a_checkpoint_holding_defaultdicts_reads_its_state_dict(tmp_path):
    """A trainer's state saved as it is kept (optimizer.state is a defaultdict keyed by index, counters, a
    defaultdict of hyper-parameters): real torch.save files, refused whole before, read with a note."""
    import collections

    layer = torch.nn.Linear(5, 5)
    hyper = collections.defaultdict(list, {"milestones": [10, 20]})
    state = collections.defaultdict(dict, {0: {"exp_avg": torch.ones(5, 5), "step": torch.tensor(3.0)}})
    path = tmp_path / "trainer.pt"
    torch.save({"state_dict": layer.state_dict(), "optim_state": state, "hparams": hyper,
                "counts": collections.defaultdict(int, {"epoch": 3})}, path)
    before = set(torch.serialization.get_safe_globals())
    loaded = load_matrix(path, var="state_dict.weight")
    np.testing.assert_array_equal(loaded.matrix, layer.weight.detach().double().numpy())
    assert loaded.notes[1] == ("optim_state, hparams, counts: collections.defaultdict, read as plain dicts "
                               "(a default factory is never called)")
    assert "builtins.dict, builtins.int, builtins.list" in loaded.notes[2] and "were left unbuilt" in loaded.notes[2]
    assert load_matrix(path).n == 5  # the one weight: the optimizer's moment is not taken for one
    names = [t["name"] for t in describe_weights(path, "torch").data["tensors"]]
    assert names == ["state_dict.weight", "state_dict.bias", "optim_state.0.exp_avg", "optim_state.0.step"]
    assert set(torch.serialization.get_safe_globals()) == before
    torch.save(collections.defaultdict(list, {"w": torch.eye(4)}), tmp_path / "top.pt")
    assert load_matrix(tmp_path / "top.pt").notes[1].startswith(
        "the file's top level: collections.defaultdict, read as a plain dict")


# -- How a state's containers name their tensors ----------------------------------------------------------

@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_tensors_keyed_by_tensors_and_nested_tensors_have_names_to_type(tmp_path):
    """optimizer.state, saved as kept, is keyed by the parameters themselves: each name was the key's repr,
    lines of its values.  A nested tensor (tensors of several shapes) made the whole file "cannot parse file
    (RuntimeError: NestedTensorImpl doesn't support sizes)"; it is its tensors, as a list of them is."""
    layer = torch.nn.Linear(4, 4, bias=False)
    opt = torch.optim.Adam(layer.parameters())
    layer(torch.ones(2, 4)).sum().backward()
    opt.step()
    path = tmp_path / "state.pt"
    torch.save({"model": layer.state_dict(), "optim_state": opt.state}, path)
    names = [t["name"] for t in describe_weights(path, "torch").data["tensors"]]
    assert names == ["model.weight", "optim_state.<tensor key 0>.step", "optim_state.<tensor key 0>.exp_avg",
                     "optim_state.<tensor key 0>.exp_avg_sq"], names
    moment = load_matrix(path, var="optim_state.<tensor key 0>.exp_avg").matrix
    np.testing.assert_array_equal(moment, opt.state[layer.weight]["exp_avg"].double().numpy())
    parts = [torch.arange(4.0).reshape(2, 2), torch.arange(9.0).reshape(3, 3)]
    torch.save({"n": torch.nested.nested_tensor(parts), "w": torch.eye(5)}, tmp_path / "nested.pt")
    listed = describe_weights(tmp_path / "nested.pt", "torch").data["tensors"]
    rows = {t["name"]: (t["shape"], t["square"]) for t in listed}
    assert rows == {"n.0": ([2, 2], True), "n.1": ([3, 3], True), "w": ([5, 5], True)}
    np.testing.assert_array_equal(load_matrix(tmp_path / "nested.pt", var="n.1").matrix, parts[1].numpy())


def _doubled(levels: int) -> bytes:
    """(t, t), ((t, t), (t, t)), ...: ``levels`` tuples, each of the one before twice (by the pickle's memo)."""
    body = _W + _W + b"\x86q\x64"
    for k in range(levels):
        body += b"h" + bytes([100 + k]) + b"\x86q" + bytes([101 + k])  # the one before, on the stack, twice
    return body


def test_containers_holding_themselves_or_one_another_many_times_over_are_refused_at_once(attacked):
    """A list inside itself made naming its tensors recurse until Python's limit; 40 tuples, each of the one
    before twice (200 bytes of pickle), named 2**41 tensors: info never ended, its memory growing."""
    import time

    itself = crafted_pt(attacked / "itself.pt", b"]q\xc8h\xc8a")  # x = [x]
    msg = input_error(itself, r"holds a container inside itself \('x.0' is 'x' again\), so its tensors have no "
                              r"names that end; refused", var="w")
    assert "\n" not in msg
    input_error(crafted_pt(attacked / "dict.pt", _W + b"}q\xc9" + _s("me") + b"h\xc9s\x86"),  # (t, {"me": ...})
                r"holds a container inside itself \('x.1.me' is 'x.1' again\)", var="w")
    t0 = time.perf_counter()
    input_error(crafted_pt(attacked / "doubled.pt", _doubled(40)), r"holds containers that hold one another so many "
                r"times over that their tensors have more than 1,000,000 names", var="w")
    assert time.perf_counter() - t0 < 20  # loose: refused after a million, not 2**41
    # a dict saved under two names (the same object twice in the pickle) is listed under both
    twice = crafted_pt(attacked / "twice.pt", _doubled(2))
    names = [t["name"] for t in describe_weights(twice, "torch").data["tensors"]]
    assert len(names) == 1 + 8 and names[-1] == "x.1.1.1"
    deep = crafted_pt(attacked / "deep.pt", b"]" * 5000 + _W + b"a" * 5000)
    input_error(deep, r"holds containers nested more than 500 deep \(at 'x.0.0.0", var="w")


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_a_quantized_weight_is_read_as_the_values_it_stands_for(tmp_path):
    """A quantized model's state dict (qint8 weights, a scale and zero point each, or one per channel) was
    "tensor 'w' holds torch.qint8 values; a real numeric matrix is needed", and info marked none square."""
    W = torch.arange(-8.0, 8.0).reshape(4, 4)
    per_tensor = torch.quantize_per_tensor(W, 0.5, 3, torch.qint8)
    per_channel = torch.quantize_per_channel(W, torch.tensor([0.5, 1.0, 0.25, 2.0]), torch.tensor([0, 1, 2, 3]), 0,
                                             torch.quint8)
    torch.save({"fc.weight": per_tensor, "proj.weight": per_channel}, tmp_path / "q.pt")
    for name, q in (("fc.weight", per_tensor), ("proj.weight", per_channel)):
        loaded = load_matrix(tmp_path / "q.pt", var=name)
        np.testing.assert_array_equal(loaded.matrix, q.dequantize().double().numpy())
        assert loaded.notes[0].startswith(f"tensor {name!r} (torch.q") and "dequantized" in loaded.notes[0]
    rows = {t["name"]: (t["dtype"], t["square"]) for t in describe_weights(tmp_path / "q.pt", "torch").data["tensors"]}
    assert rows == {"fc.weight": ("qint8", True), "proj.weight": ("quint8", True)}


def test_a_file_of_very_many_tensors_is_listed_and_refused_without_a_name_at_once(tmp_path):
    """20,000 square tensors and no var: "holds 20000 square weight matrices" took 4 s (each name sought in
    the list of square ones: quadratic, 16 s at 40,000); info's listing and a named tensor's read stay as
    fast.  The bound is loose (0.4 s here) so that a busy machine does not fail it, and the size large
    enough that the quadratic search would."""
    import time

    n = 40_000
    header = {f"layers.{i}.w": {"dtype": "F32", "shape": [1, 1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(n)}
    path = raw_safetensors(tmp_path / "many.safetensors", header, np.arange(n, dtype=np.float32).tobytes())
    t0 = time.perf_counter()
    input_error(path, r"holds 40,000 square weight matrices: layers.0.w 1 x 1, .* and 39,992 more; pick one with var=")
    assert time.perf_counter() - t0 < 8, time.perf_counter() - t0
    assert len(describe_weights(path, "safetensors").data["tensors"]) == n
    assert load_matrix(path, var=f"layers.{n - 1}.w").matrix[0, 0] == n - 1


def test_a_scalar_alone_and_a_header_nested_past_python_s_limit_say_what_they_are(tmp_path):
    """A file of one 0-D tensor listed it as "e.g. w " (its empty shape); a header of 100,000 nested
    brackets was "cannot parse file (RecursionError: maximum recursion depth exceeded ...)"."""
    torch.save({"w": torch.tensor(3.0)}, tmp_path / "scalar.pt")
    input_error(tmp_path / "scalar.pt", r"holds no square weight matrix \(1 tensor, e.g. w scalar\)")
    raw_safetensors(tmp_path / "s.safetensors", {"w": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, bytes(4))
    input_error(tmp_path / "s.safetensors", r"holds no square weight matrix \(1 tensor, e.g. w scalar\)")
    deep = raw_safetensors(tmp_path / "deep.safetensors", '{"w": ' + "[" * 100_000 + "]" * 100_000 + "}", b"")
    input_error(deep, r"safetensors header is not a header of tensors \(its JSON is nested deeper than Python reads\)")
    with pytest.raises(InputError, match="nested deeper"):
        describe_weights(deep, "safetensors")


@pytest.mark.filterwarnings("ignore:Sparse")
def test_a_sparse_tensor_whose_indices_lie_is_refused_not_read_past_its_values(tmp_path):
    """torch checks a loaded sparse tensor's indices only where asked: a COO index past the shape was dropped
    (the matrix read without it), and a CSR row pointer past its values crashed the process in to_dense()."""
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 9], [1, 1]]), torch.tensor([1.0, 2.0]), (4, 4),
                                  check_invariants=False)
    csr = torch.sparse_csr_tensor(torch.tensor([0, 1, 5, 2, 2]), torch.tensor([0, 7]), torch.tensor([1.0, 2.0]),
                                  (4, 4), check_invariants=False)
    for name, bad, match in (("coo", coo, "for dim 0, size is 4 but found index 9"),
                             ("csr", csr, "col_indices < ncols")):
        torch.save({"w": bad}, tmp_path / f"{name}.pt")
        input_error(tmp_path / f"{name}.pt", rf"not a readable PyTorch file \(.*{match}")
    W = torch.arange(16.0).reshape(4, 4)
    torch.save({"csr": W.to_sparse_csr(), "bsc": W.to_sparse_bsc((2, 2))}, tmp_path / "fine.pt")
    for name in ("csr", "bsc"):  # the true ones are read as before
        np.testing.assert_array_equal(load_matrix(tmp_path / "fine.pt", var=name).matrix, W.numpy())
    assert not torch.sparse.check_sparse_tensor_invariants.is_enabled()  # the user's setting, as it was


def test_tied_weights_are_said_to_be_one_storage_under_two_names(tmp_path):
    """A language model's lm_head.weight saved tied to its embedding (one storage, two names) was listed as
    two tensors, nothing said; a view of other bytes (a transpose, a block) or two meta tensors (each at
    address 0) are matrices of their own."""
    w = torch.randn(6, 6)
    torch.save({"embed.weight": w, "lm_head.weight": w, "t.weight": w.t(), "block.weight": w[:3, :3],
                "m1.weight": torch.empty(4, 4, device="meta"), "m2.weight": torch.empty(4, 4, device="meta")},
               tmp_path / "tied.pt")
    desc = describe_weights(tmp_path / "tied.pt", "torch")
    same = {t["name"]: t["same_as"] for t in desc.data["tensors"]}
    assert same == {"embed.weight": None, "lm_head.weight": "embed.weight", "t.weight": None,
                    "block.weight": None, "m1.weight": None, "m2.weight": None}
    assert any(n.startswith("tied: 1 tensor is another one's values under a second name (one storage): "
                            "lm_head.weight is embed.weight;") for n in desc.tables[0].notes), desc.tables[0].notes
    write_safetensors(tmp_path / "w.safetensors", {"a": ("F32", np.eye(3, dtype=np.float32))})
    assert describe_weights(tmp_path / "w.safetensors", "safetensors").data["tensors"][0]["same_as"] is None


def test_info_names_a_dtype_alike_for_safetensors_and_torch_files(tmp_path):
    """info showed a .safetensors tensor's dtype as F32/BF16 and a .pt's as float32/bfloat16: one spelling
    (torch's) in the table and in data["tensors"] (the JSON), whichever format."""
    W = torch.randn(4, 4)
    torch.save({"a": W, "b": W.to(torch.bfloat16), "c": W.to(torch.float8_e4m3fn)}, tmp_path / "w.pt")
    bf16 = (W.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))
    write_safetensors(tmp_path / "w.safetensors", {"a": ("F32", W.numpy()), "b": ("BF16", bf16),
                                                   "c": ("F8_E4M3", W.to(torch.float8_e4m3fn).view(torch.uint8).numpy())})
    for path, fmt in ((tmp_path / "w.pt", "torch"), (tmp_path / "w.safetensors", "safetensors")):
        desc = describe_weights(path, fmt)
        assert [r["dtype"] for r in desc.tables[0].rows] == ["float32", "bfloat16", "float8_e4m3fn"], fmt
        assert [t["dtype"] for t in desc.data["tensors"]] == ["float32", "bfloat16", "float8_e4m3fn"], fmt


def test_tied_weights_alone_are_one_matrix_read_without_var(tmp_path):
    """A file whose only square tensors are two names of one storage (lm_head.weight tied to embed.weight) asked
    which to pick: they are one matrix, read under its first name, the note saying so; an untied second is
    still a choice to make."""
    w = torch.randn(5, 5)
    torch.save({"embed.weight": w, "lm_head.weight": w, "bias": torch.zeros(5)}, tmp_path / "tied.pt")
    m = load_matrix(tmp_path / "tied.pt")
    assert np.array_equal(m.to_dense(), w.double().numpy()) and m.recipe["var"] == "embed.weight"
    assert any("also 'lm_head.weight' (tied weights, one storage): read as 'embed.weight'" in n for n in m.notes), m.notes
    torch.save({"embed.weight": w, "lm_head.weight": w, "other": torch.randn(5, 5)}, tmp_path / "two.pt")
    input_error(tmp_path / "two.pt", r"holds 3 square weight matrices")
    assert not any("tied" in n for n in load_matrix(tmp_path / "tied.pt", var="lm_head.weight").notes)


def test_tied_weights_of_a_training_checkpoint_are_not_said_to_be_the_files_only_square_ones(tmp_path):
    """The tied-weights note said "the file's only square weight" of a checkpoint whose optimizer state
    holds square tensors too (Adam's moments of that weight): said of the weights outside that state."""
    w = torch.randn(5, 5)
    model = {"embed.weight": w, "lm_head.weight": w, "bias": torch.zeros(5)}
    optimizer = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(5, 5), "exp_avg_sq": torch.rand(5, 5)}},
                 "param_groups": [{"lr": 1e-3, "params": [0]}]}
    torch.save({"model": model, "optimizer": optimizer}, tmp_path / "ckpt.pt")
    m = load_matrix(tmp_path / "ckpt.pt")
    assert np.array_equal(m.to_dense(), w.double().numpy()) and m.recipe["var"] == "model.embed.weight"
    note = next(n for n in m.notes if "tied weights" in n)
    assert note.startswith("the only square weight matrix outside the optimizer state, named 'model.embed.weight'"), note
    assert "the file's only" not in note
    torch.save(model, tmp_path / "tied.pt")  # no optimizer state: the file's only square weight, as before
    assert any(n.startswith("the file's only square weight") for n in load_matrix(tmp_path / "tied.pt").notes)
