"""NumPy ``.npy`` / ``.npz`` readers (always ``allow_pickle=False``).

``.npz`` holds either named arrays (``var=`` picks one; default the only
square 2-D one) or a ``scipy.sparse.save_npz`` matrix (keys ``format``,
``shape``, ``data``, ...).
"""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np
import scipy.sparse as sp

from .._npy import PICKLE_REFUSAL, read_npy_header
from .._errors import parameter
from .._validation import check_memory, format_bytes
from ..formats import counted, shape_text
from ._common import HashingReader, Options, ReadResult, Source, check_order, one_line, repeated_keys

_SPARSE_KEYS = {"format", "shape", "data"}
#: Bytes ``np.load`` holds beside the array it fills from a stream: its reads (numpy's ``format.BUFFER_SIZE``,
#: 256 KiB at a time) and their copies, 0.53 MB measured over a .npy.gz's bytes and array (read_memory).
_NPY_READ = 1 << 20
#: Bytes more that a deflated ``.npz`` member's read holds: zipfile reads as many compressed bytes as it is
#: asked for, and keeps its decompressor's output and unread input between numpy's reads (1.2 MB over the
#: array measured against :data:`_NPY_READ`'s 1 MiB: benchmarks/results/read_memory_more.md).
_ZIP_READ = 1 << 20


def _check_array(src: Source, header, what: str, opts: Options, more: int = 0) -> None:
    """Refuse an array of ``header`` that holds objects (pickles), or whose read needs more memory than the
    limit: its float64 form (the readers' matrices are), numpy's reads, ``more`` bytes, and the compressed
    file's decompressed bytes, held while the array is read from them (a .npy.gz table peaked at twice
    this check without them: benchmarks/results/read_memory.md)."""
    if header.dtype.hasobject:
        raise src.fail(f"{what} {PICKLE_REFUSAL}")
    beside = f" (beside the {format_bytes(src.held)} decompressed)" if src.held else ""
    check_memory(header.count * max(header.dtype.itemsize, 8) + src.held + _NPY_READ + more,
                 what=f"{src.display}: {what} of shape {shape_text(header.shape)}{beside}", limit=opts.max_memory_bytes)


def _load_npy(src: Source, fh, what: str, opts: Options) -> np.ndarray:
    """Check header (pickle, memory), then load an array from a ``.npy`` stream."""
    start = fh.tell()
    try:
        header = read_npy_header(fh)
    except (ValueError, OSError, EOFError) as exc:
        raise src.fail(f"{what}: not a valid .npy array ({one_line(exc)})") from None
    _check_array(src, header, what, opts)
    if isinstance(fh, HashingReader):  # a file on disk: its size says whether the data is all there
        truncated = header.truncation(os.fstat(fh.fileno()).st_size)
        if truncated:
            raise src.fail(f"{what}: {truncated}", "copy or write it again")
    fh.seek(start)
    with src.guard():
        return np.load(fh, allow_pickle=False)


def read_table_npy(src: Source, opts: Options) -> np.ndarray:
    """A 2-D array from ``.npy`` (also used for covariance tables), the file hashed as it is read
    (:meth:`Source.sha256` then reads it no more)."""
    with src.hashed() as fh:  # np.load reads through it (a stream, not numpy's fromfile): one pass
        return _load_npy(src, fh, "array", opts)


def read_npy(src: Source, opts: Options) -> ReadResult:
    """Reader for format "npy"."""
    return ReadResult(read_table_npy(src, opts), "npy", [])


def _members(src: Source, zf: zipfile.ZipFile) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    out = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy"):
            continue
        with zf.open(info) as fh:
            try:
                header = read_npy_header(fh)  # shape and dtype, without reading the data
                out[info.filename[:-4]] = header.shape, header.dtype
            except (ValueError, OSError, EOFError) as exc:
                raise src.fail(f"member {info.filename!r} is not a valid .npy array ({one_line(exc)})") from None
    return out


def _describe(members) -> str:
    return ", ".join(f"{k} {shape_text(s)} {d}" for k, (s, d) in members.items()) or "none"


def _npz_hint(members, square: list[str]) -> str:
    """What to do with an .npz whose square array is not obvious; arrays ``q`` and ``k`` of one
    width are the inputs of an attention map, which the attention format reads.  An .npz with no
    array at all has none to pick: "pick one with --var" was no way out."""
    if not members:
        return "it holds no arrays: save the matrix in it (np.savez(path, X=X))"
    q, k = members.get("q"), members.get("k")
    if q and k and len(q[0]) == len(k[0]) == 2 and q[0][1] == k[0][1]:
        return (f"pick one with {parameter('var')}, or read q and k as softmax(Q K^T / sqrt d) with "
                f"{parameter('format', 'attention')}")
    if not square:
        return f"save a square one in it (np.savez(path, X=X)), or pick one with {parameter('var')}"
    return f"pick one with {parameter('var')}"


def read_npz(src: Source, opts: Options) -> ReadResult:
    """Reader for format "npz" (the file hashed as it is read: :meth:`Source.hashed`)."""
    with src.hashed() as file:
        return _read_npz(src, file, opts)


def _read_npz(src: Source, file, opts: Options) -> ReadResult:
    try:
        zf = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise src.fail(f"not a valid .npz (zip) file ({one_line(exc)})") from None
    with zf:
        members = _members(src, zf)
        if _SPARSE_KEYS <= members.keys() and opts.var is None:
            return _read_sparse_npz(src, zf, file, members, opts)
        if opts.var is not None:
            if opts.var not in members:
                raise src.fail(f"no array {opts.var!r}; arrays: {_describe(members)}", f"pick one with {parameter('var')}")
            key = opts.var
        else:
            square = [k for k, (s, d) in members.items() if len(s) == 2 and s[0] == s[1] > 0]
            if len(square) != 1:
                what = "no square 2-D array" if not square else f"several square 2-D arrays ({', '.join(square)})"
                raise src.fail(f"{what}; arrays: {_describe(members)}", _npz_hint(members, square))
            key = square[0]
        array = _load_member(src, zf, key, opts)
    return ReadResult(array, "npz", [f"npz array {key!r}"], source=f"{src.display} (array {key})",
                      reading={"var": key})


def _load_member(src: Source, zf: zipfile.ZipFile, key: str, opts: Options) -> np.ndarray:
    """Array ``key`` of an .npz (its header read by :func:`_members`): checked from its header, then read
    by numpy from the member as it is decompressed, in order (no seek back to the header: a member that
    could not seek was copied whole into memory first, a copy no check counted)."""
    info = zf.getinfo(key + ".npy")
    with zf.open(info) as raw:
        header = read_npy_header(raw)
    deflated = info.compress_type != zipfile.ZIP_STORED
    _check_array(src, header, f"array {key!r}", opts, _ZIP_READ if deflated else 0)
    with src.guard(), zf.open(info) as raw:
        return np.lib.format.read_array(raw, allow_pickle=False)


def _read_sparse_npz(src: Source, zf: zipfile.ZipFile, file, members, opts: Options) -> ReadResult:
    for key, (_, dtype) in members.items():
        if dtype.hasobject:
            raise src.fail(f"array {key!r} {PICKLE_REFUSAL}")
    # Sizes before loading: the declared shape (a coo file of shape 2e9 x 2e9
    # with one entry would become 16 GB of CSR row pointers) and the members.
    with zf.open("shape.npy") as raw:
        shape = _load_npy(src, io.BytesIO(raw.read(1024)), "array 'shape'", opts).ravel()
    if shape.size != 2 or shape.dtype.kind not in "iu":
        raise src.fail(f"scipy.sparse file with an invalid 'shape' array {shape.tolist()[:4]}")
    check_order(int(max(shape)), src, sparse=True)
    stored = sum(int(np.prod(s)) * max(d.itemsize, 8) for s, d in members.values())
    check_memory(2 * stored, what=f"{src.display}: sparse arrays", limit=opts.max_memory_bytes)
    with src.guard():
        with zf.open("format.npy") as fh:
            fmt = np.load(io.BytesIO(fh.read()), allow_pickle=False).item()
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        file.seek(0)  # (np.load reads the zip's signature where the file stands)
        try:
            M = sp.load_npz(file)  # load_npz itself uses allow_pickle=False
        except ValueError:
            _refuse_bad_coordinates(src, zf, shape)  # scipy's "axis 0 index 5 exceeds matrix dimension 3"
            raise
        except KeyError:
            # A COO saved with one 'coords' array (as newer scipy writes it): scipy 1.12's load_npz (pyproject
            # allows it) looks for 'row' and 'col' ("KeyError: 'row is not a file in the archive'")
            if fmt != "coo" or "coords" not in members:
                raise
            _refuse_bad_coordinates(src, zf, shape)
            M = _coo_from_coords(src, zf, shape)
    notes = [f"scipy.sparse save_npz file ({fmt} format)"]
    repeated = _repeated_entries(M)
    if repeated:  # summed when the matrix is checked, as the Matrix Market and triplet readers say they are
        notes.append(f"{counted(repeated, 'repeated entry', 'repeated entries')} summed")
    return ReadResult(M, "npz", notes)


def _coo_from_coords(src, zf: zipfile.ZipFile, shape: np.ndarray):
    """The COO array of a save_npz file that holds its indices as one ``coords`` array (2 x nnz); one of
    another shape is refused, as scipy's own reader refuses it (its third row was dropped silently)."""
    coords, data = (np.load(io.BytesIO(zf.read(f"{name}.npy")), allow_pickle=False) for name in ("coords", "data"))
    if coords.ndim != 2 or coords.shape[0] != 2 or data.ndim != 1 or coords.shape[1] != data.size:
        raise src.fail(f"its 'coords' array has shape {shape_text(coords.shape)} and its 'data' {data.size:,} values: "
                       f"a square matrix's coords are 2 x (its number of values)", "write it again with save_npz")
    return sp.coo_array((data, (coords[0], coords[1])), shape=tuple(int(s) for s in shape))


def _refuse_bad_coordinates(src: Source, zf: zipfile.ZipFile, shape: np.ndarray) -> None:
    """Refuse a COO file whose ``row``/``col`` (or ``coords``) array holds an index beyond its ``shape``,
    naming the array, the index and the bound (scipy named neither array nor file); nothing found: return."""
    names = set(zf.namelist())
    arrays = [(name, axis) for axis, name in enumerate(("row", "col")) if f"{name}.npy" in names]
    coords = None
    if not arrays and "coords.npy" in names:
        coords = np.load(io.BytesIO(zf.read("coords.npy")), allow_pickle=False)
        arrays = [("coords", axis) for axis in range(min(len(coords), 2))]
    for name, axis in arrays:
        index = coords[axis] if coords is not None else np.load(io.BytesIO(zf.read(f"{name}.npy")), allow_pickle=False)
        index = np.asarray(index).ravel()
        if index.dtype.kind not in "iu" or not index.size:
            continue
        bound = int(shape[axis])
        outside = np.flatnonzero((index < 0) | (index >= bound))
        if outside.size:
            k = int(outside[0])
            where = f"array 'coords' (row {axis})" if name == "coords" else f"array {name!r}"
            raise src.fail(f"{where} holds index {int(index[k]):,} at position {k:,} ({outside.size:,} out of range in all), "
                           f"but 'shape' gives {counted(bound, ('row', 'column')[axis])}: indices 0..{bound - 1:,}",
                           "the arrays do not belong together: save the matrix again (scipy.sparse.save_npz)")


def _repeated_entries(M) -> int:
    """How many of a sparse matrix's stored entries repeat a position stored before them (0 for a
    canonical CSR/CSC, known without a pass)."""
    if getattr(M, "has_canonical_format", False):
        return 0
    coo = sp.coo_array(M)  # (converting to COO keeps repeated entries; to CSR would sum them)
    keys = coo.row.astype(np.int64) * coo.shape[1] + coo.col
    return repeated_keys(keys)
