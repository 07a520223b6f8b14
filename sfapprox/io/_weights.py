"""A network's weights: ``.safetensors`` files, PyTorch state dicts (``.pt``/``.pth``) and checkpoints (``.ckpt``), never unpickling code.

The square weight matrices of a model (attention projections, square MLP
layers) are natural inputs.  ``var=`` (``--var NAME``) picks one; without
it the file must hold exactly one square 2-D tensor, and otherwise the
error lists them (``sfapprox info`` does too).

* ``.safetensors`` is read by its own rules (an 8-byte header length, a JSON
  header of ``{name: {dtype, shape, data_offsets}}``, the raw data): no
  package needed, only the chosen tensor read, offsets checked against the
  file's size first.  Float (F64, F32, F16, BF16, and the 8-bit F8_E4M3 and F8_E5M2), integer
  (signed and unsigned) and boolean tensors.  A tensor of another type (complex C64, the packed
  4- and 6-bit floats, a type newer than this reader) is listed, and refused only where it is chosen:
  it does not keep the file's other tensors from being read.
* ``.pt`` / ``.pth`` / ``.ckpt`` (a PyTorch Lightning checkpoint: its ``state_dict``
  beside the optimizer's state, hyper-parameters and callbacks) go through
  ``torch.load(weights_only=True)``: tensors, dicts and lists.  The objects of
  other classes a checkpoint names (an ``argparse.Namespace`` or a user's class of
  hyper-parameters, a ``pathlib.Path``) are never imported, built or run: each
  stands as an inert placeholder (:class:`_Unbuilt`), so the tensors around them
  are read.  A ``collections.defaultdict`` (an optimizer's ``state``) is read as a
  plain dict, its default factory never called (:class:`_PlainDict`); a quantized
  tensor is read dequantized, a nested one as its tensors, a sparse one checked.
  A file whose tensors cannot be had that way (a whole pickled model, a global of
  ``os`` or ``sys``, more than 64 names to leave unbuilt) is refused, never executed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import re
import struct
import threading
import warnings
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .._errors import parameter
from .._validation import check_memory
from ..formats import counted, shape_text
from ._common import Options, ReadResult, Source

__all__ = ["read_safetensors", "read_torch", "weight_tensors", "list_weights"]

#: safetensors dtypes and their numpy types (BF16: the upper half of a float32).
_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
           "U8": np.uint8, "BOOL": np.bool_}
#: The format's other types, by their bits a value: listed and size-checked, never read as a matrix
#: (complex values, packed 4- and 6-bit floats, an 8-bit exponent alone).
_OTHER_BITS = {"C64": 64, "F8_E8M0": 8, "F6_E2M3": 6, "F6_E3M2": 6, "F4": 4}
#: The 8-bit floats real checkpoints store (DeepSeek-V3's, Llama's FP8 releases), read through a float16:
#: F8_E5M2 is float16's upper byte; F8_E4M3 (torch's float8_e4m3fn: no infinities, 0x7f and 0xff NaN)
#: is decoded by a table of its 256 values.
_FP8 = {"F8_E4M3", "F8_E5M2"}
#: The types read as a matrix, as messages name them.
_READ = (*_DTYPES, *sorted(_FP8))
#: The safetensors types by torch's names (``F32`` is ``float32``): what ``info`` shows for either format, the
#: names users know from both.  A type torch has no one name for (a packed 6-bit float) keeps the format's.
_TORCH_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                "I32": "int32", "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16",
                "U8": "uint8", "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
                "F8_E8M0": "float8_e8m0fnu", "C64": "complex64"}
#: Largest JSON header read (the format's own limit is 100 MB).
_MAX_HEADER = 100 * 2**20


class _RepeatedKey(ValueError):
    """A JSON object names a key twice (json.loads would keep the last silently)."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen.add(key)
    return dict(pairs)


def _safetensors_header(src: Source) -> tuple[dict[str, Any], int]:
    """The header's tensors (name -> dtype, shape, offsets) and where the data starts."""
    size = os.path.getsize(src.path)
    with open(src.path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise src.fail("not a safetensors file (shorter than its 8-byte header length)")
        (length,) = struct.unpack("<Q", raw)
        if length > min(_MAX_HEADER, size - 8):
            raise src.fail(f"not a safetensors file (its header claims {length:,} bytes of a {size:,}-byte file)")
        try:
            header = json.loads(fh.read(length), object_pairs_hook=_no_repeats)
        except _RepeatedKey as exc:
            raise src.fail(f"safetensors header names {exc.args[0]!r} twice; which one holds is not said, so the "
                           "header is damaged or edited") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise src.fail(f"safetensors header is not valid JSON ({exc})") from None
        except RecursionError:  # [[[[...: json's parser recurses, and said "cannot parse file (RecursionError: ...)"
            raise src.fail("safetensors header is not a header of tensors (its JSON is nested deeper than Python "
                           "reads), so the file is damaged or edited") from None
    if not isinstance(header, dict):
        raise src.fail("safetensors header is not a JSON object")
    start = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor_entry(src, name, info, size - start)
    # Two tensors on the same bytes is an edited file: one of them holds values not its own.  Sorted by
    # where they begin, any overlap shows between neighbours; an empty tensor has no bytes to share.
    ranges = sorted((t["offsets"], n) for n, t in tensors.items() if t["offsets"][0] < t["offsets"][1])
    for ((b1, e1), first), ((b2, e2), second) in zip(ranges, ranges[1:]):
        if b2 < e1:
            raise src.fail(f"tensor {second!r}: its data offsets {b2}..{e2} overlap tensor {first!r}'s {b1}..{e1}; "
                           "each tensor needs bytes of its own, so the header is damaged or edited")
    return tensors, start


def _shown(value: Any, most: int = 60) -> str:
    """A header value as its JSON (``"44"`` is a string), cut to ``most`` characters (a hostile
    header may hold a long one)."""
    text = json.dumps(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _is_int(value: Any) -> bool:
    """A JSON integer: not a float (4.0, 4.7), a string ("4") or a bool (true is 1 to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _tensor_entry(src: Source, name: str, info: Any, data_size: int) -> dict[str, Any]:
    """One tensor's header entry, checked as the format defines it: nothing is guessed or converted.

    ``dtype`` a known name, ``shape`` a list of non-negative integers, ``data_offsets`` two integers
    ``0 <= begin <= end`` within the data section (``data_size`` bytes), holding exactly the shape's
    values.  (``[int(d) for d in shape]`` read ``"44"`` as 4 x 4, ``[4.7, 4]`` as 4 x 4, ``[true,
    true]`` as 1 x 1, and passed ``[-4, -4]`` on to fail in numpy.)
    """
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
        raise src.fail(f"tensor {name!r}: its header entry is malformed (it needs dtype, shape and data_offsets)")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str):
        raise src.fail(f"tensor {name!r} has dtype {_shown(dtype)}, which sfapprox does not read "
                       f"(known: {', '.join(_READ)})")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise src.fail(f"tensor {name!r}: its shape {_shown(shape)} is not a list of non-negative integers, "
                       "so the header is damaged or edited")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(d) for d in offsets)):
        raise src.fail(f"tensor {name!r}: its data_offsets {_shown(offsets)} are not two integers "
                       "[begin, end], so the header is damaged or edited")
    begin, end = offsets
    # A type this reader does not know (the format has gained some) has a size it cannot check: the
    # offsets must still lie in the file, and the tensor is refused only where it is chosen.
    bits = _bits(dtype)
    need = None if bits is None else -(-math.prod(shape) * bits // 8)  # exact ints (np.prod: 4 us a tensor)
    if not (0 <= begin <= end and end <= data_size and need in (None, end - begin)):
        size = "" if need is None else f" ({need:,} bytes)"
        raise src.fail(f"tensor {name!r}: its data offsets {begin:,}..{end:,} do not hold a {dtype} tensor of "
                       f"shape {shape_text(shape)}{size} inside the file (truncated or edited)")
    return {"dtype": dtype, "shape": shape, "offsets": (begin, end)}


def _bits(dtype: str) -> int | None:
    """Bits a value of a safetensors ``dtype`` takes; None for a type the format has gained since."""
    if dtype in _DTYPES:
        return 8 * np.dtype(_DTYPES[dtype]).itemsize
    return 8 if dtype in _FP8 else _OTHER_BITS.get(dtype)


def _e4m3_values() -> np.ndarray:
    """The 256 values of F8_E4M3 (float8_e4m3fn), by byte: sign, 4 exponent bits (bias 7), 3 mantissa bits."""
    byte = np.arange(256)
    sign = np.where(byte >> 7, -1.0, 1.0)
    exponent, mantissa = (byte >> 3) & 0xF, byte & 0x7
    values = sign * np.where(exponent == 0, mantissa / 8 * 2.0**-6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    values[(exponent == 15) & (mantissa == 7)] = np.nan  # the only NaN, and no infinity
    return values


#: A dotted part naming a training run's optimizer state (``optimizer_state_dict``, Lightning's
#: ``optimizer_states``, ``optimizer``, ``optim``), and the per-parameter state torch's optimizers keep
#: (``state.<index>.exp_avg`` in a bare ``optimizer.state_dict()``).
_OPTIMIZER_PART = re.compile(r"optim(izer)?s?(_states?|_state_dict)?", re.IGNORECASE)
_OPTIMIZER_STATE = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "acc_delta",
                    "sum", "ax", "eta", "mu", "prev", "step_size", "grad_avg"}


#: How a dotted name writes a dict key that is a tensor (:func:`_key_name`): an optimizer's ``state`` as torch keeps it.
_TENSOR_KEY = re.compile(r"<tensor key \d+>")


def optimizer_state(name: str) -> bool:
    """Whether the tensor ``name`` (dotted) is an optimizer's state in a training checkpoint, not a weight:
    under a part such as ``optimizer_state_dict``, or ``state.<index>.exp_avg`` (Adam's moments, SGD's
    momentum).  A checkpoint of one 512 x 512 layer trained by Adam holds three square tensors, two of them
    its moments: a manifest's ``var = "*"`` ran all three as the model's weights.

    Examples
    --------
    >>> [optimizer_state(n) for n in ("model_state_dict.fc.weight", "optimizer_state_dict.state.0.exp_avg",
    ...                                "state.3.momentum_buffer", "blocks.state.0.weight", "opt.state.0.exp_avg")]
    [False, True, True, False, True]
    """
    parts = name.split(".")
    if any(_OPTIMIZER_PART.fullmatch(part) for part in parts[:-1]):
        return True
    # an optimizer's state_dict under any name ({"opt": optimizer.state_dict()}: "opt.state.0.exp_avg" was
    # taken for a weight), its parameters by index or, kept as torch keeps it, by the tensors themselves
    return (len(parts) >= 3 and parts[-3] == "state" and parts[-1] in _OPTIMIZER_STATE
            and (parts[-2].isdigit() or _TENSOR_KEY.fullmatch(parts[-2]) is not None))


def is_square(shape) -> bool:
    """Whether a tensor of ``shape`` is a matrix to approximate: 2-D, square, not empty (a 0 x 0 tensor
    was listed by ``info`` as usable, then refused by ``--var``).

    Examples
    --------
    >>> is_square([4, 4]), is_square([0, 0]), is_square([4, 3]), is_square([4])
    (True, False, False, False)
    """
    return len(shape) == 2 and shape[0] == shape[1] > 0


def _choose(src: Source, shapes: dict[str, list[int]], var: str | None, square: list[str],
            tied: dict[str, str] | None = None) -> str:
    """The tensor ``var`` names, or the only one of ``square`` (the square tensors of a type read; ``var="*"``,
    a manifest's "every square weight", left unexpanded only where the file has none: as no ``var``), or the
    only one of them that is not an optimizer's state (:func:`optimizer_state`), or the first name of the
    only matrix they are where the others are it under more names (``tied``, :func:`tied_tensors`)."""
    if var == "*":
        var = None
    if var is not None:
        if var not in shapes:
            near = _near(var, list(shapes))
            meant = f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""
            raise src.fail(f"no tensor {var!r}{meant}; square weight matrices: {_listing(shapes, square)}",
                           f"pick one with {parameter('var')}; 'sfapprox info FILE' lists them")
        return var
    weights = [n for n in square if not optimizer_state(n)]
    if len(square) == 1:
        return square[0]
    if len(weights) == 1:  # a checkpoint's one weight beside its optimizer's moments
        return weights[0]
    matrices = [n for n in weights if n not in (tied or {})]
    if len(matrices) == 1 and len(weights) > 1:  # tied weights: two names of one storage are one matrix
        return matrices[0]
    read = set(square)  # not the list: a model's 20,000 tensors took 4 s to say it holds many
    unread = [n for n, s in shapes.items() if is_square(s) and n not in read]
    if not square and len(unread) == 1:  # the only square tensor: chosen, its reader says why it is not read
        return unread[0]
    if not square and unread:
        raise src.fail(f"holds no square weight matrix of values sfapprox reads ({_listing(shapes, unread)}: "
                       "complex, meta or of a type not read)", "a real numeric matrix is needed")
    if not square:
        raise src.fail(f"holds no square weight matrix ({counted(len(shapes), 'tensor')}, e.g. "
                       f"{_listing(shapes, list(shapes)[:5])})", "a matrix to approximate must be square")
    raise src.fail(f"holds {counted(len(square), 'square weight matrix', 'square weight matrices')}: "
                   f"{_listing(shapes, weights or square)}",
                   f"pick one with {parameter('var')}; 'sfapprox info FILE' lists them")


def _near(var: str, names: list[str], most: int = 3) -> list[str]:
    """The names ``var`` most likely meant: those it differs from by whole dotted parts at either end
    (a ``module.`` or ``state_dict.`` prefix, a ``.weight`` suffix), fewest characters apart first, or
    else the closest spellings (``q_proj.weights``).  The listing after them shows only the first few of a model's many square
    weights: ``model.layers.3.self_attn.q_proj`` listed layers 0 and 1 "and 40 more".

    Examples
    --------
    >>> _near("layers.0.q.weight", ["module.layers.0.q.weight", "module.layers.0.k.weight"])
    ['module.layers.0.q.weight']
    >>> _near("q_proj", ["attn.q_proj.weight", "attn.q_proj.bias", "mlp.up"])
    []
    >>> _near("attn.q_proj", ["attn.q_proj.weight", "attn.q_proj.bias", "mlp.up"])
    ['attn.q_proj.bias', 'attn.q_proj.weight']
    """
    import difflib

    def dotted_apart(name: str) -> bool:
        short, long = sorted((var, name), key=len)
        return long.endswith("." + short) or long.startswith(short + ".")

    parts = sorted((n for n in names if dotted_apart(n)), key=lambda n: (abs(len(n) - len(var)), n))
    # only where no name is a dotted part apart: beside it, the next layer's spelling is noise
    if parts:
        return parts[:most]
    # the closest alone (and its ties): q_proj.weights is nearer q_proj.weight than v_proj.weight, by little
    ratio = {n: difflib.SequenceMatcher(None, var, n).ratio() for n in names}
    best = max(ratio.values(), default=0.0)
    return [n for n in names if ratio[n] == best >= 0.8][:most]


def _first(items: list[str], most: int) -> str:
    """The first ``most`` of ``items``, comma-separated, and how many more there are."""
    return ", ".join(items[:most]) + (f" and {len(items) - most:,} more" if len(items) > most else "")


def _listing(shapes: dict[str, list[int]], names: list[str], most: int = 8) -> str:
    """Names and shapes, ``w 4 x 4`` (a 0-D tensor ``w scalar``, as info lists it: it was ``w `` alone)."""
    return _first([f"{n} {shape_text(shapes[n])}" for n in names], most) if names else "none"


def _safetensors_unread(dtype: str) -> str | None:
    """Why a tensor of safetensors type ``dtype`` is not read as a matrix, or None where it is."""
    if dtype in _DTYPES or dtype in _FP8:
        return None
    return "holds complex values" if dtype.startswith("C") else f"holds {dtype} values, which sfapprox does not read"


def read_safetensors(src: Source, opts: Options) -> ReadResult:
    """Reader for format "safetensors": one square tensor, read alone, as float64."""
    with src.guard():
        tensors, start = _safetensors_header(src)
    name = _choose(src, {k: v["shape"] for k, v in tensors.items()}, opts.var,
                   [k for k, v in tensors.items() if is_square(v["shape"]) and not _safetensors_unread(v["dtype"])])
    info = tensors[name]
    shape, dtype = info["shape"], info["dtype"]
    if not is_square(shape):
        raise src.fail(f"tensor {name!r} has shape {shape_text(shape)}, not a square matrix")
    why = _safetensors_unread(dtype)
    if why:
        raise src.fail(f"tensor {name!r} {why} (it reads {', '.join(_READ)})",
                       "a real numeric matrix is needed")
    check_memory(8 * shape[0] * shape[1], what=f"{src.display}: tensor {name!r}", limit=opts.max_memory_bytes)
    begin, end = info["offsets"]
    with src.guard(), open(src.path, "rb") as fh:
        fh.seek(start + begin)
        raw = fh.read(end - begin)
    if dtype == "F8_E4M3":
        data = _e4m3_values()[np.frombuffer(raw, dtype=np.uint8)]
    elif dtype == "F8_E5M2":  # float16 with its lower byte 0
        data = (np.frombuffer(raw, dtype=np.uint8).astype("<u2") << 8).view("<f2")
    else:
        data = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<"))
    if dtype == "BF16":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    return ReadResult(data.astype(np.float64).reshape(shape), "safetensors", [f"tensor {name!r} ({dtype})"],
                      source=f"{src.display} (tensor {name})", reading={"var": name})


#: What to do with a file whose objects are refused: its tensors saved alone, where it is trusted.
_SAVE_ALONE = ("where the file is trusted, save its tensors alone: torch.save(model.state_dict(), path) (a Lightning "
               "checkpoint's: torch.save(ckpt['state_dict'], path)), or use .safetensors")
#: torch's list of the globals a weights_only load may take is one for the whole process: the placeholders
#: of one file's load are on it only during that load, and no other load of ours runs meanwhile.
_ALLOWLIST_LOCK = threading.Lock()
#: ``active`` in the thread of the load the placeholders are on the list for: another thread's own
#: ``torch.load(weights_only=True)`` meanwhile finds them there too, and must refuse what it refuses without them.
_LOADING = threading.local()
#: Most names a file may have stand unbuilt.  torch's unpickler rebuilds its dict of allowed names at every
#: GLOBAL, NEWOBJ and BUILD of them: a 36 KB file naming 4,000 classes took 8 s to refuse, and time grows as
#: the square (a 1 MB file, hours).  A training checkpoint names a few (a Namespace, a path, a config's classes).
_MOST_UNBUILT = 64


class _Unbuilt:
    """Stands for an object a checkpoint pickled that ``weights_only`` does not load (an ``argparse.Namespace``
    of hyper-parameters, a user's class, a function): the name is never imported, nothing of it runs.

    torch's weights-only unpickler takes a class it is told is safe and then only calls it (``cls(*args)``),
    calls ``cls.__new__(cls, *args)``, or gives an instance its state (``__setstate__``).  Here each of these
    takes its arguments and drops them: a placeholder holds nothing, so no tensor is hidden in it and no
    memory-mapped storage kept.  Only the load that put it on torch's list builds one: in another thread's
    load it is refused as torch refuses a name not allowed.
    """

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        if not getattr(_LOADING, "active", False):
            raise pickle.UnpicklingError(f"Unsupported global: {cls.__module__}.{cls.__qualname__} is allowed only to "
                                         "the load of sfapprox that stands it unbuilt")
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__qualname__}, not built>"


class _PlainDict(_Unbuilt):
    """Stands for ``collections.defaultdict`` (an optimizer's ``state``, a trainer's counters, hyper-parameters):
    built, it is a plain ``dict``, which torch's unpickler fills as any other (it fills only dict, OrderedDict
    and Counter, and refused the whole file).  Its default factory (``list``, a user's function) is an argument
    dropped, never called; each dict made is kept in ``_LOADING.made``, for the note that says so.
    """

    __slots__ = ()

    def __new__(cls, *args, **kwargs):  # called (REDUCE) or __new__ (NEWOBJ): either way a dict, nothing run
        _Unbuilt.__new__(cls)  # refused outside the load that put it on the list
        made: dict = {}
        _LOADING.made.append(made)
        return made


#: Globals read as a container weights_only fills, not left unbuilt.
_AS_PLAIN = {"collections.defaultdict": _PlainDict}


def _placeholder(path: str) -> type:
    """A subclass of :class:`_Unbuilt` that torch's allowlist files under ``path`` (``argparse.Namespace``): it
    keys a class by ``f"{__module__}.{__qualname__}"``, the GLOBAL's ``module.name`` however it is split."""
    module, _, name = path.rpartition(".")
    base = _AS_PLAIN.get(path, _Unbuilt)
    return type(name, (base,), {"__module__": module, "__qualname__": name, "__slots__": ()})


@contextlib.contextmanager
def _unbuilt_globals(names: list[str], made: list | None = None) -> Iterator[None]:
    """``names`` taken as placeholders by the weights-only loads inside (none: nothing changed); the plain
    dicts made for a ``collections.defaultdict`` (:class:`_PlainDict`) are appended to ``made``."""
    if not names:
        yield
        return
    import torch

    with _ALLOWLIST_LOCK, torch.serialization.safe_globals([_placeholder(n) for n in names]):
        _LOADING.active, _LOADING.made = True, [] if made is None else made
        try:
            yield
        finally:
            _LOADING.active, _LOADING.made = False, []


def _unsafe_globals(src: Source, mapped: bool) -> list[str]:
    """The globals (classes, functions) a torch.save file names beyond what ``weights_only`` loads, read
    from its pickle without running it; empty where torch cannot say (before 2.5, a legacy-format file,
    a raw pickle)."""
    import torch

    serialization = torch.serialization
    if not (hasattr(serialization, "safe_globals") and hasattr(serialization, "get_unsafe_globals_in_checkpoint")):
        return []
    try:
        with contextlib.nullcontext(src.path) if mapped else open(src.path, "rb") as f:
            return sorted(serialization.get_unsafe_globals_in_checkpoint(f))
    except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError, OSError, KeyError):
        return []


def _listed(names: list[str], most: int = 6) -> str:
    """Global names as a message lists them, their control characters escaped (``ESC[2J`` in a GLOBAL
    reached the terminal raw; :func:`~sfapprox.formats.printable`)."""
    from ..formats import printable

    return _first([printable(name) for name in names], most)


def _named(names: list[str]) -> str:
    return f"classes or code: {_listed(names)}" if names else "classes or code"


def _torch_load(src: Source, mapped: bool, unbuilt: Sequence[str] = (), made: list | None = None) -> Any:
    """``torch.load(weights_only=True)`` of the file, the globals ``unbuilt`` taken as placeholders (the plain
    dicts read for a defaultdict appended to ``made``)."""
    import torch  # here: only .pt files need it

    # torch's own notes ("sparse CSR support is in beta", "detected pickle protocol 4") are not the
    # user's concern: what it cannot load is said by the caller, in one line
    # torch checks a sparse tensor's indices at load only where asked: unchecked, a CSR row pointer past its
    # values made to_dense() crash the process (a segmentation fault), a COO index past the shape was dropped
    with warnings.catch_warnings(), _unbuilt_globals(list(unbuilt), made), \
            torch.sparse.check_sparse_tensor_invariants(enable=True), \
            (contextlib.nullcontext(src.path) if mapped else open(src.path, "rb")) as f:
        warnings.simplefilter("ignore", UserWarning)
        # weights_only whichever way the file is given: tensors, dicts and lists, never code
        return torch.load(f, map_location="cpu", weights_only=True, mmap=mapped)


def _torch_state(src: Source, max_memory: int | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """The file's tensors by dotted name, the globals its objects named that were left unbuilt
    (:class:`_Unbuilt`; empty for a plain state dict), and the names of the defaultdicts read as plain
    dicts (:class:`_PlainDict`; ``""`` the file's top level)."""
    # torch.save's zip format is memory-mapped (a tensor is read when chosen); the legacy format
    # (_use_new_zipfile_serialization=False) cannot be, and is read whole: its size is checked first.
    # torch maps a file only from its path, passed on as UTF-8 text: a file whose name is not UTF-8
    # (a Latin-1 byte in it) is handed to torch open, and read whole too.
    zipped = zipfile.is_zipfile(src.path)
    mapped = zipped and _utf8_name(src.path)
    if not mapped:
        what = ("a PyTorch file read whole (torch memory-maps a file only by a UTF-8 name, and this one's is not)"
                if zipped else "a legacy-format PyTorch file")
        check_memory(2 * os.path.getsize(src.path), what=f"{src.display}: {what}", limit=max_memory)
    unbuilt: list[str] = []
    made: list[dict] = []
    try:
        state = _torch_load(src, mapped)
    except pickle.UnpicklingError:
        # A training checkpoint's hyper-parameters (an argparse.Namespace, a user's config class) are what
        # weights_only refuses, not its state_dict: loaded again with those names as inert placeholders
        unbuilt = _unsafe_globals(src, mapped)
        state = _with_placeholders(src, mapped, unbuilt, made)
    except (RuntimeError, OSError, EOFError, ValueError, AttributeError) as exc:  # AttributeError: a rebuild
        # function of torch's given what it does not take ('int' object has no attribute 'dtype')
        raise src.fail(f"not a readable PyTorch file ({' '.join(str(exc).split())[:200]})",
                       "it may be truncated or damaged: copy or save it again") from None
    tensors: dict[str, Any] = {}
    walk = _Walk(marked=made)
    try:
        named = list(walk.tensors(state))
    except _Tangled as exc:
        raise src.fail(f"{exc}; refused", "save the state dict alone (torch.save(model.state_dict(), path))") from None
    for name, tensor in named:
        # {"a.b": t, "a": {"b": u}}: both are a.b once dotted, and dict() kept the last silently (info
        # listed one tensor, --var a.b read u); refused as a safetensors header naming a tensor twice is
        if name in tensors:
            raise src.fail(f"holds two tensors named {name!r} once nested names are dotted (a key with a dot "
                           f"beside a nested dict); which one {parameter('var')} means is not said",
                           "save them under names of their own")
        # its values alone: torch sets any attribute a file names on a tensor (a Parameter's state), and one
        # named detach, numel or to (an allowed class, a placeholder) is what tensor.detach() would call
        tensors[name] = tensor.data
    if unbuilt and not tensors:  # a whole pickled model (torch.save(model)): its tensors are inside its objects
        raise src.fail(f"holds pickled objects other than tensors ({_named(unbuilt)}), and no tensor outside them; "
                       "refused, never unpickled", _SAVE_ALONE)
    return tensors, unbuilt, walk.found


def _with_placeholders(src: Source, mapped: bool, unbuilt: list[str], made: list | None = None) -> Any:
    """The file loaded with the globals ``unbuilt`` as placeholders; refused, naming them, where that
    does not load it either (a module torch blocks, ``os``; a subclass of dict; nothing named)."""
    refused = src.fail(f"holds pickled objects other than tensors ({_named(unbuilt)}); refused, never unpickled",
                       _SAVE_ALONE)
    if not unbuilt:
        raise refused
    if len(unbuilt) > _MOST_UNBUILT:
        raise src.fail(f"holds pickled objects other than tensors ({_named(unbuilt)}: more than the "
                       f"{_MOST_UNBUILT} left unbuilt at most); refused, never unpickled", _SAVE_ALONE)
    try:
        return _torch_load(src, mapped, unbuilt, made)
    except MemoryError:
        raise
    except Exception:  # the unpickler's refusal, or an allowed rebuild function given a placeholder
        raise refused from None


def _utf8_name(path) -> bool:
    """True when ``path`` can be passed on as UTF-8 text (a name read from a Latin-1 listing cannot)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def weight_tensors(state: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor in a (nested) state dict or list; dotted names."""
    return _Walk().tensors(state, prefix)


#: Most entries of containers walked again (a dict saved under two names, its tensors listed under both):
#: a pickle's memo lets a few hundred bytes hold a tuple of two tuples of two ... of a tensor, 2**40 names.
_MOST_AGAIN = 1_000_000
#: Deepest nesting walked (a model's state dict nests a few levels; Python's own limit, near 1000, said
#: "cannot parse file (RecursionError: maximum recursion depth exceeded)").
_MOST_DEPTH = 500


class _Tangled(ValueError):
    """A file's containers hold themselves, or one another so many times over that naming their tensors
    does not end."""


class _Walk:
    """The tensors of a loaded state by dotted name, as torch's ``state_dict`` names them; and where the
    containers ``marked`` (the plain dicts read for defaultdicts) are: :attr:`found`, their names.

    A key that is not a plain value (a tensor: ``optimizer.state`` is keyed by the parameters themselves) is
    named by its place: ``<tensor key 0>``; its repr was the name, lines of a matrix's values.  A nested
    tensor is its tensors, as a list of them is (``name.0``, ``name.1``): it has no one shape to list.
    """

    def __init__(self, marked: Iterable[Any] = ()) -> None:
        self.marked = {id(c) for c in marked}  # all alive in the state: their ids are theirs while it is
        self.found: list[str] = []
        self.above: dict[int, str] = {}  # the containers the one walked is inside, by their names
        self.walked: set[int] = set()
        self.bare: set[int] = set()  # walked, and no tensor in them: not walked again
        self.again = 0

    def tensors(self, node: Any, name: str = "") -> Iterator[tuple[str, Any]]:
        """``(name, tensor)`` for every tensor in ``node``."""
        return (item for item in self._walk(node, name) if item is not None)

    def _walk(self, node: Any, name: str) -> Iterator[tuple[str, Any] | None]:
        # Yields None once a container holds a tensor (how its container knows), else (name, tensor).
        import torch

        if isinstance(node, torch.Tensor):
            if node.is_nested:
                yield from ((_dotted(name, str(i)), part) for i, part in enumerate(node.unbind()))
            else:
                yield name, node
            return
        if isinstance(node, dict):  # dict.items, not node.items: an OrderedDict's attributes are the file's
            children: Any = ((_key_name(k, i), value) for i, (k, value) in enumerate(dict.items(node)))
        elif isinstance(node, (list, tuple)):
            children = ((str(i), value) for i, value in enumerate(node))
        else:
            return
        key = id(node)
        if key in self.bare:
            return
        self._enter(node, name)
        held = False
        for child, value in children:
            for item in self._walk(value, _dotted(name, child)):
                held = True
                if item is not None:
                    yield item
        if held:
            yield None
        else:
            self.bare.add(key)
        del self.above[key]

    def _enter(self, node: Any, name: str) -> None:
        """Refuse a container inside itself, nested past :data:`_MOST_DEPTH`, or walked again past
        :data:`_MOST_AGAIN` entries; note it where it is marked."""
        key, where = id(node), _where(name)
        if key in self.above:
            raise _Tangled(f"holds a container inside itself ({where} is {_where(self.above[key])} again), so its "
                           "tensors have no names that end")
        if len(self.above) >= _MOST_DEPTH:
            raise _Tangled(f"holds containers nested more than {_MOST_DEPTH} deep (at {where}...)")
        if key in self.walked:
            self.again += len(node)
            if self.again > _MOST_AGAIN:
                raise _Tangled(f"holds containers that hold one another so many times over that their tensors "
                               f"have more than {_MOST_AGAIN:,} names (a few bytes of pickle can name billions)")
        self.walked.add(key)
        self.above[key] = name
        if key in self.marked:
            self.found.append(name)


def _where(name: str) -> str:
    return repr(name[:80]) if name else "the file's top level"


def _dotted(name: str, part: str) -> str:
    return f"{name}.{part}" if name else part


def _key_name(key: Any, place: int) -> str:
    """A dict key as a part of a dotted name: a plain value as itself (``"fc"``, ``3``), anything else (a
    tensor, a placeholder) by its place in the dict, ``<tensor key 0>``."""
    import torch

    if isinstance(key, (str, int, float, bytes)) or key is None:
        return str(key)
    return f"<{'tensor' if isinstance(key, torch.Tensor) else type(key).__name__} key {place}>"


def _torch_unread(tensor) -> tuple[str, str | None] | None:
    """Why ``tensor`` is not read as a matrix (and what to do, if anything), or None where it is."""
    if tensor.is_quantized:  # qint8, quint8, qint32: integers that stand for real values, read dequantized
        return None
    if tensor.is_complex() or not (tensor.is_floating_point() or tensor.dtype in _INT_DTYPES()):
        return f"holds {tensor.dtype} values", "a real numeric matrix is needed"
    if tensor.is_meta:
        return "is a meta tensor: it has a shape but no values", "save the model's weights after they are materialized"
    import torch

    try:  # a float torch cannot convert (float4_e2m1fn_x2, two values a byte): "cannot parse file (copy_ ...)"
        torch.empty(1, dtype=tensor.dtype).to(torch.float64)  # one value: an empty tensor copies none
    except (RuntimeError, NotImplementedError, TypeError):
        return f"holds {tensor.dtype} values, which torch does not convert to numbers", "a real numeric matrix is needed"
    return None


def read_torch(src: Source, opts: Options) -> ReadResult:
    """Reader for format "torch": one square tensor of a state dict or a training checkpoint, loaded with
    ``weights_only=True`` (:func:`_torch_state`)."""
    with src.guard():
        tensors, unbuilt, plain = _torch_state(src, opts.max_memory_bytes)
    square = [k for k, t in tensors.items() if is_square(t.shape) and not _torch_unread(t)]
    tied = tied_tensors({k: tensors[k] for k in square}) if opts.var in (None, "*") and len(square) > 1 else {}
    name = _choose(src, {k: list(t.shape) for k, t in tensors.items()}, opts.var, square, tied)
    tensor = tensors[name]
    if not is_square(tensor.shape):
        raise src.fail(f"tensor {name!r} has shape {shape_text(tensor.shape)}, not a square matrix")
    why = _torch_unread(tensor)
    if why:
        raise src.fail(f"tensor {name!r} {why[0]}", why[1])
    check_memory(8 * tensor.numel(), what=f"{src.display}: tensor {name!r}", limit=opts.max_memory_bytes)
    import torch

    if tensor.layout != torch.strided:  # a sparse (COO, CSR, ...) weight: its dense values, as any other
        tensor = tensor.to_dense()
    notes = [f"tensor {name!r} ({tensor.dtype})"]
    if tensor.is_quantized:  # the values its integers stand for, scale * (q - zero_point), as torch computes them
        notes = [f"tensor {name!r} ({tensor.dtype}, dequantized: its scale times its integers less its zero point)"]
        tensor = tensor.dequantize()
    aliases = [k for k, first in tied.items() if first == name]
    if aliases:  # chosen without --var among names of one storage: which name the rows carry is said
        # a training checkpoint's optimizer moments are square tensors too: "the file's only" was then untrue
        only = ("the only square weight matrix outside the optimizer state" if any(map(optimizer_state, square))
                else "the file's only square weight")
        notes.append(f"{only}, named {name!r} and also {_listed([repr(a) for a in aliases])} "
                     f"(tied weights, one storage): read as {name!r}")
    if plain:
        where = _listed([p or "the file's top level" for p in plain])
        notes.append(f"{where}: collections.defaultdict, read as {'a plain dict' if len(plain) == 1 else 'plain dicts'} "
                     "(a default factory is never called)")
    others = [g for g in unbuilt if not (plain and g in _AS_PLAIN)]  # built, as said: not unbuilt
    if others:
        notes.append(f"the file's other objects ({_listed(others)}) were left unbuilt: weights_only does not load them, "
                     "and none was imported or run")
    return ReadResult(tensor.detach().to(torch.float64).numpy(), "torch", notes,
                      source=f"{src.display} (tensor {name})", reading={"var": name})


def _INT_DTYPES():
    """The integer (and boolean) tensor types read as matrices, as a ``.npy`` of them is: torch has
    ``uint16``/``uint32``/``uint64`` since 2.3 (looked up by name for older versions)."""
    import torch

    names = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
    return tuple(getattr(torch, name) for name in names if hasattr(torch, name))


def list_weights(path, fmt: str) -> list[dict[str, Any]]:
    """Every tensor of a weights file: name, shape, dtype, square (what ``info`` shows).

    ``dtype`` is torch's name (``float32``, ``bfloat16``) for either format: a ``.safetensors`` header's
    ``F32``/``BF16`` were shown as they are spelled there.  ``square`` is a matrix ``var=`` reads: 2-D, square, of values read.  ``unread`` says why a
    square-shaped tensor is not (complex values, a meta tensor, a type sfapprox does not read), else
    None: ``info`` marked a complex or FP4 tensor usable, and a manifest's ``var = "*"`` ran it to fail.
    ``optimizer`` marks an optimizer's state in a training checkpoint (:func:`optimizer_state`): read
    where ``var=`` names it, never taken for one of the model's weights.  ``same_as`` names the earlier
    tensor a tensor is, under another name (tied weights, :func:`tied_tensors`), else None.
    """
    src = Source(path)
    src.check_exists()
    with src.guard():
        if fmt == "safetensors":
            tensors, _ = _safetensors_header(src)
            listed = [(k, v["shape"], _TORCH_NAMES.get(v["dtype"], v["dtype"]), _safetensors_unread(v["dtype"]))
                      for k, v in tensors.items()]
            tied: dict[str, str] = {}  # a header's tensors never share bytes (its offsets are checked)
        else:
            state = _torch_state(src)[0]
            listed = [(k, list(t.shape), str(t.dtype).replace("torch.", ""), (_torch_unread(t) or [None])[0])
                      for k, t in state.items()]
            tied = tied_tensors(state)
    return [{"name": name, "shape": shape, "dtype": dtype, "square": is_square(shape) and not why,
             "unread": why if is_square(shape) else None, "optimizer": optimizer_state(name),
             "same_as": tied.get(name)}
            for name, shape, dtype, why in listed]


def _tie_key(tensor) -> tuple | None:
    """What makes two tensors one matrix: the same bytes read the same way (None where that is not
    known: a meta tensor has no bytes, every one at address 0; a sparse one has no single storage)."""
    import torch

    if tensor.is_meta or tensor.layout != torch.strided or tensor.is_quantized:
        return None
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
            tuple(tensor.stride()), tensor.dtype)


def tied_tensors(tensors: dict[str, Any]) -> dict[str, str]:
    """``{name: first name}`` for each tensor that is an earlier one under another name (tied weights:
    a language model's ``lm_head.weight`` is its token embedding, one storage that ``torch.save`` writes
    once); a view of other bytes of a storage, or of the same bytes in another shape, is a matrix of its own."""
    first: dict[tuple, str] = {}
    tied: dict[str, str] = {}
    for name, tensor in tensors.items():
        key = _tie_key(tensor)
        if key is None or tensor.numel() == 0:  # empty tensors share no values, whatever their address
            continue
        if key in first:
            tied[name] = first[key]
        else:
            first[key] = name
    return tied
