"""MATLAB ``.mat`` reader: v4/v5/v7 via scipy.io.loadmat, v7.3 (HDF5) via h5py.

Variable choice: ``var="name"`` (or dotted ``"Problem.A"`` for a struct
field); by default the only square numeric variable, where a SuiteSparse
``Problem`` struct counts as the candidate ``Problem.A``.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from dataclasses import dataclass

import h5py
import numpy as np
import scipy.io
import scipy.sparse as sp

from .._errors import SfapproxError, parameter
from .._validation import check_memory, format_bytes, memory_limit
from ..formats import shape_text
from ._common import HDF5_SIGNATURE, Options, ReadResult, Source, check_order, one_line, sparse_array_asked
from ._hdf5 import check_self_contained, read_dataset

try:  # public location since scipy 1.8
    from scipy.io.matlab import MatReadError
except ImportError:  # pragma: no cover - old scipy
    MatReadError = ValueError  # type: ignore[misc,assignment]

_NUMERIC = {"double", "single", "logical", "sparse"} | {f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}


@dataclass
class _Var:
    """One variable (or struct field) as listed before loading."""

    name: str
    shape: tuple[int, ...]
    cls: str
    fields: tuple[str, ...] = ()

    @property
    def square_numeric(self) -> bool:
        return self.cls in _NUMERIC and len(self.shape) == 2 and self.shape[0] == self.shape[1] > 0

    def describe(self) -> str:
        return f"{self.name} ({shape_text(self.shape)} {self.cls})"


def _is_hdf5(src: Source) -> bool:
    # MATLAB v7.3 puts a 512-byte text header before the HDF5 superblock.
    head = src.head(2048 + 8)
    return any(head[k : k + 8] == HDF5_SIGNATURE for k in (0, 512, 1024, 2048))


def _choose(src: Source, variables: list[_Var], var: str | None) -> tuple[str, str | None]:
    """Pick (top-level name, struct field or None) following the module rules."""
    listing = ", ".join(v.describe() for v in variables) or "none"
    by_name = {v.name: v for v in variables}
    if var is not None:
        top, _, fld = var.partition(".")
        if top not in by_name:
            raise src.fail(f"no variable {top!r}; variables: {listing}", f"pick one with {parameter('var')}")
        if fld and fld not in by_name[top].fields and by_name[top].cls == "struct" and by_name[top].fields:
            raise src.fail(
                f"struct {top!r} has no field {fld!r}; fields: {', '.join(by_name[top].fields)}",
                f"pick one with {parameter('var', shown=repr(f'{top}.<field>'))}",
            )
        return top, (fld or None)
    candidates: list[tuple[str, str | None]] = [(v.name, None) for v in variables if v.square_numeric]
    problem = by_name.get("Problem")
    if problem is not None and problem.cls == "struct" and "A" in problem.fields:
        candidates.append(("Problem", "A"))
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise src.fail(f"no square numeric variable; variables: {listing}", f"pick one with {parameter('var')}")
    names = ", ".join(n if f is None else f"{n}.{f}" for n, f in candidates)
    raise src.fail(f"several square numeric variables: {names}", f"pick one with {parameter('var')}")


# ---------------------------------------------------------------------------
# v4 - v7 (scipy)
# ---------------------------------------------------------------------------


_V5_ERRORS = (ValueError, OSError, TypeError, MatReadError, EOFError, IndexError, KeyError)


def _read_v5(src: Source, opts: Options) -> ReadResult:
    # whosmat lists shapes without loading; structs must be loaded to see
    # their fields, so those are kept to avoid reading them twice.
    structs: dict[str, object] = {}
    try:
        variables = [_Var(n, tuple(s), c) for n, s, c in scipy.io.whosmat(src.file_arg())]
    except _V5_ERRORS as exc:
        raise _unreadable(src, exc, "not a readable MATLAB file") from None
    listed = [v for v in variables
              if v.cls == "struct" and (v.name == "Problem" or (opts.var or "").split(".")[0] == v.name)]
    # scipy reads a variable whole (a struct with every field): each one is sized before it is read.
    _check_v5_sizes(src, variables, [v.name for v in listed], opts)
    try:
        for v in listed:
            structs[v.name] = _loadmat(src, v.name)
            v.fields = tuple(structs[v.name].dtype.names or ())
    except _V5_ERRORS as exc:
        raise _unreadable(src, exc, "not a readable MATLAB file") from None
    top, fld = _choose(src, variables, opts.var)
    info = next(v for v in variables if v.name == top)
    if info.cls == "sparse" and len(info.shape) == 2:
        check_order(max(info.shape), src, f"sparse variable {top}", sparse=True)
    elif info.cls not in ("struct", "cell") and len(info.shape) == 2:
        check_memory(8 * int(np.prod(info.shape)), what=f"{src.display}: variable {top}", limit=opts.max_memory_bytes)
    if top not in structs:
        _check_v5_sizes(src, variables, [top], opts)
    try:
        value = structs[top] if top in structs else _loadmat(src, top)
    except _V5_ERRORS as exc:
        raise _unreadable(src, exc, f"cannot read variable {top!r}", damaged=True) from None
    name = top
    if fld is not None:
        value = _v5_field(src, value, top, fld)
        name = f"{top}.{fld}"
    return _finish(src, value, name, "MATLAB v5")


def _loadmat(src: Source, name: str):
    """Variable ``name`` of a v4/v5/v7 file, read whole by scipy; a sparse one as a sparse array where this
    scipy takes the keyword that asks for one (1.18 warns on every read of a sparse variable that does not
    say, and turns its default in 1.20): :func:`_finish` takes a matrix or an array alike."""
    return scipy.io.loadmat(src.file_arg(), variable_names=[name], **sparse_array_asked(scipy.io.loadmat))[name]


#: What to do with a file that is cut short or damaged: no reading of it can tell what is missing.
_AGAIN = "the copy is incomplete or damaged: copy or download it again, or save it again from MATLAB"


def _unreadable(src: Source, exc: BaseException, what: str, *, damaged: bool = False):
    """The refusal of a v5 file scipy could not read: one cut short says where it ends and how much is
    missing (scipy said only "could not read bytes"); a listed variable that cannot be read is a damaged file."""
    said = one_line(exc) or type(exc).__name__
    short = _v5_truncation(src)
    if short is not None:
        return src.fail(f"the file is truncated: {short} (scipy: {said})", _AGAIN)
    if damaged:
        return src.fail(f"{what}: the file is damaged ({said})", _AGAIN)
    return src.fail(f"{what} ({said})")


def _v5_truncation(src: Source) -> str | None:
    """Where a v5 file's bytes end before its 128-byte header or a top-level element (a variable) does, said for
    a message; None where every element the walk reaches ends within the file (or it is no v5 file)."""
    with src.guard():
        fh = io.BytesIO(src.read_bytes()) if src.compressed else open(src.path, "rb")
        with fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(0)
            head = fh.read(128)
            if len(head) < 128:
                return f"it ends at byte {size:,}, inside its 128-byte header" if head.startswith(b"MATLAB") else None
            if head[126:128] not in (b"IM", b"MI"):
                return None
            endian, pos = ("<" if head[126:128] == b"IM" else ">"), 128
            while pos < size:
                tag = fh.read(8)
                if len(tag) < 8:
                    return f"it ends at byte {size:,}, inside the tag of the element at byte {pos:,}"
                mtype, nbytes = struct.unpack(endian + "II", tag)
                if mtype not in (_MI_MATRIX, _MI_COMPRESSED):
                    return None  # damaged otherwise: scipy's message stands
                end = pos + 8 + nbytes
                if end > size:
                    return f"it ends at byte {size:,}, {end - size:,} bytes short of the variable stored from byte {pos:,}"
                pos = fh.seek(end)
    return None


def _v5_field(src: Source, value, top: str, fld: str):
    names = getattr(getattr(value, "dtype", None), "names", None)
    if not names:
        raise src.fail(f"variable {top!r} is not a struct, so it has no field {fld!r}")
    if fld not in names:
        raise src.fail(f"struct {top!r} has no field {fld!r}; fields: {', '.join(names)}")
    if value.size != 1:
        raise src.fail(f"struct {top!r} is a {shape_text(value.shape)} struct array; only 1 x 1 structs are supported")
    return value[fld].flat[0]


# ---------------------------------------------------------------------------
# v5: a variable's size, before scipy reads it
# ---------------------------------------------------------------------------

#: MATLAB v5 data types: a variable (miMATRIX) and a zlib-compressed one (miCOMPRESSED).
_MI_MATRIX, _MI_COMPRESSED = 14, 15
#: Most decompressed bytes made at a time while a compressed variable is sized: zlib expands data
#: up to about 1000 times, so its output, not its input, is what is bounded (256 KiB: as fast as
#: larger pieces, 2.4 s for 1.1 GB here; 1 MiB took 3.6 s).
_PIECE = 1 << 18
#: Compressed bytes read from the file at a time.
_READ = 1 << 16
#: Most bytes of one part of a variable's header (array flags, dimensions, name) read to find its
#: name; MATLAB's names have at most 63 characters, so a longer part is a damaged header.
_MAX_HEADER_PART = 1 << 16


class _Inflated:
    """The decompressed bytes of one miCOMPRESSED element, made a piece at a time and counted.

    :meth:`read` hands out its first bytes (the variable's header); :meth:`count_to` counts
    the rest without keeping any of it.
    """

    def __init__(self, fh, nbytes: int) -> None:
        self._fh, self._left = fh, nbytes
        self._z = zlib.decompressobj()
        self._buffer = b""
        self.count = 0  # bytes decompressed so far
        self.ended = False  # the zlib stream, or the element's bytes, ended

    def _piece(self) -> bytes:
        """The next decompressed bytes (at most :data:`_PIECE`, a few more at the very end); b"" at the end."""
        while not self.ended:
            if self._z.unconsumed_tail:
                out = self._z.decompress(self._z.unconsumed_tail, _PIECE)
            elif self._left > 0 and not self._z.eof:
                data = self._fh.read(min(_READ, self._left))
                self._left = self._left - len(data) if data else 0
                out = self._z.decompress(data, _PIECE) if data else b""
            else:  # all input given: what zlib still holds (a match cut by the output bound) is small
                out, self.ended = self._z.flush(), True
            if out:
                self.count += len(out)
                return out
        return b""

    def read(self, n: int) -> bytes:
        """The next ``n`` decompressed bytes (fewer at the end)."""
        while len(self._buffer) < n and not self.ended:
            self._buffer += self._piece()
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def count_to(self, stop: int | None) -> None:
        """Decompress to the end, keeping nothing, or until more than ``stop`` bytes in all."""
        self._buffer = b""
        while not self.ended and (stop is None or self.count <= stop):
            self._piece()


def _v5_part(read, endian: str) -> bytes | None:
    """The data of one element of a variable's header; None where it is cut short or too long."""
    tag = read(8)
    if len(tag) < 8:
        return None
    mtype, nbytes = struct.unpack(endian + "II", tag)
    if mtype >> 16:  # the compact form (4 bytes or fewer): the size in the type's upper half, the data in the tag
        return tag[4 : 4 + (mtype >> 16)]
    if nbytes > _MAX_HEADER_PART:
        return None
    data = read(nbytes + -nbytes % 8)  # padded to a multiple of 8 bytes
    return data[:nbytes] if len(data) >= nbytes else None


def _v5_name(read, endian: str) -> str | None:
    """A variable's name from its header (array flags, dimensions, name), as scipy decodes it."""
    for _ in range(2):  # array flags, dimensions
        if _v5_part(read, endian) is None:
            return None
    name = _v5_part(read, endian)
    if name is None:
        return None
    return name.decode("latin-1") or "__function_workspace__"


def _v5_sizes(fh, wanted: set[str], stop: int | None) -> dict[str, tuple[int, int, bool]]:
    """name -> (bytes scipy reads, bytes in the file, compressed?) for the variables ``wanted``.

    Walks the file's top-level elements (a 128-byte header, then for each variable an 8-byte tag:
    type, byte count).  A compressed variable is decompressed in pieces that are counted, never
    kept, and the count ends once past ``stop`` (a zlib bomb is refused after reading little of
    it); the size given then is the larger of the count and the size its own tag declares.  Only
    the first variable of each name counts, as for scipy.  A file that is not v5 (v4 has no
    compression, and its headers give the sizes) gives ``{}``.
    """
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(0)
    head = fh.read(128)
    if len(head) < 128 or head[126:128] not in (b"IM", b"MI"):
        return {}
    endian = "<" if head[126:128] == b"IM" else ">"
    found: dict[str, tuple[int, int, bool]] = {}
    pos = 128
    while pos + 8 <= size and not wanted <= found.keys():
        fh.seek(pos)
        mtype, nbytes = struct.unpack(endian + "II", fh.read(8))
        if mtype not in (_MI_MATRIX, _MI_COMPRESSED) or nbytes == 0:
            break  # scipy's listing refuses such an element; nothing past it is read
        stored = min(nbytes, size - pos - 8)
        name = None
        if mtype == _MI_MATRIX:
            name, count = _v5_name(fh.read, endian), stored
        else:
            stream, declared = _Inflated(fh, stored), 0
            try:
                tag = stream.read(8)
                if len(tag) == 8 and struct.unpack(endian + "I", tag[:4])[0] == _MI_MATRIX:
                    declared = 8 + struct.unpack(endian + "I", tag[4:])[0]
                    name = _v5_name(stream.read, endian)
                    if name in wanted and name not in found:
                        stream.count_to(stop)
            except zlib.error:
                pass  # damaged: scipy says so when it reads it, after at most what was counted
            count = stream.count if stream.ended else max(stream.count, declared)
        if name in wanted and name not in found:
            found[name] = (count, stored, mtype == _MI_COMPRESSED)
        pos += 8 + nbytes
    return found


def _check_v5_sizes(src: Source, variables: list[_Var], names: list[str], opts: Options) -> None:
    """Refuse a variable (a struct: with every field) that scipy would read over the memory limit.

    scipy's loadmat reads a variable whole, decompressing it first where it is compressed: a
    struct's size, or a zlib bomb's, shows in no header, so it is counted from the file
    (:func:`_v5_sizes`).  A ``Problem`` struct of a 12000 x 12000 matrix of zeros is a 1.1 MB file
    that loadmat decompressed to 1.1 GB just to list its fields.
    """
    if not names:
        return
    with src.guard():
        fh = io.BytesIO(src.read_bytes()) if src.compressed else open(src.path, "rb")
        with fh:
            sizes = _v5_sizes(fh, set(names), memory_limit(opts.max_memory_bytes))
    classes = {v.name: v.cls for v in variables}
    for name in names:
        if name not in sizes:
            continue  # not found by its name: scipy's reading says what is wrong
        need, stored, compressed = sizes[name]
        about = [classes.get(name, "unknown")]
        if compressed:
            about.append(f"{format_bytes(stored)} zlib-compressed in the file")
        if classes.get(name) in ("struct", "cell"):
            about.append("read whole, every field")
        check_memory(need, what=f"{src.display}: variable {name} ({', '.join(about)})", limit=opts.max_memory_bytes)


# ---------------------------------------------------------------------------
# v7.3 (HDF5)
# ---------------------------------------------------------------------------


def _attr_str(obj, key: str) -> str:
    raw = obj.attrs.get(key, b"")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _sparse_parts(src: Source, name: str, obj) -> None:
    """Refuse a sparse group whose ``jc``, ``ir`` or ``data`` is not a dataset (a damaged file).

    MATLAB writes each of them as a 1-D dataset; a group (or a named type) in its place has no
    shape or values, and reading it as one ended in an AttributeError traceback.
    """
    for key in ("jc", "ir", "data"):
        if key in obj and not isinstance(obj[key], h5py.Dataset):
            kind = "a group" if isinstance(obj[key], h5py.Group) else f"an HDF5 {type(obj[key]).__name__}"
            raise src.fail(f"sparse variable {name!r}: its {key!r} is {kind}, not a dataset, so the file is damaged",
                           "save the matrix again from MATLAB (save -v7.3)")


def _h5_var(src: Source, name: str, obj) -> _Var:
    cls = _attr_str(obj, "MATLAB_class") or "unknown"
    if isinstance(obj, h5py.Group):
        if "MATLAB_sparse" in obj.attrs:
            _sparse_parts(src, name, obj)
            ncols = obj["jc"].shape[0] - 1 if "jc" in obj else 0
            return _Var(name, (int(obj.attrs["MATLAB_sparse"]), ncols), "sparse")
        return _Var(name, (1, 1), "struct" if cls in ("struct", "unknown") else cls, tuple(obj.keys()))
    if "MATLAB_empty" in obj.attrs and obj.attrs["MATLAB_empty"]:
        return _Var(name, (0, 0), cls)
    return _Var(name, tuple(reversed(obj.shape)), cls)  # stored column-major


def _h5_read(src: Source, obj, name: str, opts: Options):
    """Read one v7.3 variable: dense dataset (transposed) or sparse group.

    Every dataset goes through :func:`~sfapprox.io._hdf5.read_dataset`: sizes
    are checked from the headers before reading (HDF5 compression and
    fill-value-only datasets make small files that expand hugely).
    """
    if isinstance(obj, h5py.Group) and "MATLAB_sparse" in obj.attrs:
        nrows = int(obj.attrs["MATLAB_sparse"])
        _sparse_parts(src, name, obj)
        if "jc" not in obj:
            raise src.fail(f"sparse variable {name!r} has no column pointers ('jc')")
        # Index validity is checked by check_square_matrix before scipy converts anything.
        check_order(max(nrows, obj["jc"].shape[0] - 1), src, f"sparse variable {name}", sparse=True)
        stored = sum(int(np.prod(obj[k].shape)) for k in ("jc", "ir", "data") if k in obj)
        check_memory(2 * 8 * stored, what=f"{src.display}: sparse variable {name}", limit=opts.max_memory_bytes)
        parts = {k: read_dataset(obj[k], src.display, max_memory=opts.max_memory_bytes, name=f"{name}.{k}", copies=2)
                 for k in ("jc", "ir", "data") if k in obj}
        jc = np.asarray(parts["jc"]).astype(np.int64)
        ir = np.asarray(parts["ir"]).astype(np.int64) if "ir" in parts else np.zeros(0, np.int64)
        if "data" in parts:
            data = np.asarray(parts["data"])
            if data.dtype.names:
                raise src.fail(f"variable {name!r}: complex matrices are not supported")
        else:  # MATLAB omits data for an all-zero sparse matrix
            data = np.ones(ir.shape[0])
        return sp.csc_array((data.astype(np.float64), ir, jc), shape=(nrows, jc.shape[0] - 1))
    if isinstance(obj, h5py.Group):
        raise src.fail(f"variable {name!r} is a struct or object, not a matrix", f"pick a field with {parameter('var', shown=repr(f'{name}.<field>'))}")
    var = _h5_var(src, name, obj)
    if var.cls not in _NUMERIC:
        raise src.fail(f"variable {name!r} is of MATLAB class {var.cls!r}, not numeric")
    if len(var.shape) == 2 and var.shape[0] == var.shape[1]:
        check_order(var.shape[0], src, f"variable {name}")
    data = read_dataset(obj, src.display, max_memory=opts.max_memory_bytes, name=f"variable {name}")
    if data.dtype.names:
        raise src.fail(f"variable {name!r}: complex matrices are not supported")
    return np.asarray(data).T


def _read_v73(src: Source, opts: Options) -> ReadResult:
    try:
        with h5py.File(src.file_arg(), "r") as f:
            # Before anything is listed: opening a variable behind an external
            # link would already read another file.
            check_self_contained(f, src.display)
            variables = [_h5_var(src, k, f[k]) for k in f.keys() if not k.startswith("#")]
            top, fld = _choose(src, variables, opts.var)
            obj = f[top]
            name = top
            if fld is not None:
                if not isinstance(obj, h5py.Group) or fld not in obj:
                    raise src.fail(f"variable {top!r} has no field {fld!r}")
                obj, name = obj[fld], f"{top}.{fld}"
            value = _h5_read(src, obj, name, opts)
    except SfapproxError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise src.fail(f"not a readable MATLAB v7.3 (HDF5) file ({one_line(exc) or type(exc).__name__})") from None
    return _finish(src, value, name, "MATLAB v7.3 (HDF5)")


def _finish(src: Source, value, name: str, kind: str) -> ReadResult:
    if not sp.issparse(value):
        value = np.asarray(value)
        if value.dtype.kind in "OUSV":
            raise src.fail(f"variable {name!r} is not numeric (MATLAB cell, char or struct)", f"pick another with {parameter('var')}")
    return ReadResult(value, "mat", [f"{kind}: variable {name}"], source=f"{src.display} (variable {name})",
                      reading={"var": name})


def read_mat(src: Source, opts: Options) -> ReadResult:
    """Reader for format "mat"."""
    if _is_hdf5(src):
        return _read_v73(src, opts)
    return _read_v5(src, opts)
