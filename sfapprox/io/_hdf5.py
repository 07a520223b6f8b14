"""Reading HDF5 files safely: only data stored in the file itself, never beyond the memory limit.

HDF5 lets a file take its data from elsewhere: a dataset's bytes may live in
*external* raw files (``external=[(path, offset, size)]``), a *virtual*
dataset maps regions of datasets in other HDF5 files, and an *external link*
opens an object of another file.  A reader that follows them reads local
files the user never named (``/etc/passwd`` as matrix entries), and the
SHA-256 recorded for the input covers only the file given.  The functions
here refuse all of these before any data is read, and refuse a dataset whose
declared size exceeds the memory limit before it is allocated: HDF5 datasets
can be declared huge and hold nothing (fill-value-only, no storage), or hold
compressed chunks that expand a thousandfold.

Used by the MATLAB v7.3 reader (:mod:`sfapprox.io._matlab`) and meant for every
HDF5 file sfapprox reads (saved factor files too)::

    with open_self_contained(path) as f:        # refuses links and storage outside the file
        values = read_dataset(f["W"], path, max_memory=limit)   # refuses over the limit

Every refusal is an :class:`~sfapprox.InputError` (memory: a
:class:`~sfapprox.ResourceError`) whose one-line message starts with the path.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import h5py
import numpy as np

from .._validation import check_memory, format_bytes
from ..formats import shape_text
from ._common import fail, one_line

__all__ = ["check_self_contained", "check_dataset", "read_dataset", "open_self_contained"]

_HINT = "sfapprox reads only data stored in the file itself; save the data into the file (e.g. re-save it from MATLAB or h5py)"


def check_dataset(ds: h5py.Dataset, path: str | os.PathLike, name: str | None = None) -> None:
    """Refuse a dataset whose data is not stored in its own file.

    Parameters
    ----------
    ds : h5py.Dataset
        The dataset (nothing is read).
    path : str or os.PathLike
        The file, as the user named it; starts the message.
    name : str or None, default=None
        The dataset's name in messages (default: its HDF5 path).

    Raises
    ------
    InputError
        For a virtual dataset (its data comes from other HDF5 files) and for a
        dataset with external storage (its bytes live in other raw files).
    """
    name = name or ds.name or "dataset"
    display = os.fspath(path)
    if ds.is_virtual:
        sources = sorted({vs.file_name for vs in ds.virtual_sources()})
        shown = ", ".join(repr(s) for s in sources[:3]) + (", ..." if len(sources) > 3 else "")
        # Same-file sources (".") are refused too: no writer sfapprox reads makes them.
        raise fail(display, f"{name} is a virtual dataset: its data is mapped from other datasets, in ({shown})", _HINT)
    external = ds.external
    if external:
        files = sorted({os.fsdecode(e[0]) for e in external})
        shown = ", ".join(repr(f) for f in files[:3]) + (", ..." if len(files) > 3 else "")
        raise fail(display, f"{name} uses external storage: its data lives in other files ({shown})", _HINT)


def check_self_contained(obj: h5py.File | h5py.Group, path: str | os.PathLike) -> None:
    """Refuse an HDF5 file (or group) that takes anything from outside itself.

    Walks every link below ``obj`` without following any link to another
    file: each group and dataset reachable through hard links is visited once
    (hard links may form cycles), soft links are not followed during the walk,
    and nothing is read but link and layout metadata.

    Parameters
    ----------
    obj : h5py.File or h5py.Group
        Usually the open file.
    path : str or os.PathLike
        The file, as the user named it; starts the message.

    Raises
    ------
    InputError
        For an external link, a user-defined link, a virtual dataset, a
        dataset with external storage, and a soft link that leads nowhere
        (dangling, or a loop of soft links).

    Examples
    --------
    >>> import h5py, io, numpy as np
    >>> with h5py.File(io.BytesIO(), "w") as f:
    ...     f["A"] = np.eye(2)
    ...     check_self_contained(f, "in-memory.h5")
    >>> with h5py.File(io.BytesIO(), "w") as f:
    ...     f["A"] = h5py.ExternalLink("/etc/hostname", "/x")
    ...     check_self_contained(f, "in-memory.h5")
    Traceback (most recent call last):
    ...
    sfapprox._errors.InputError: in-memory.h5: /A is an external link to '/x' in '/etc/hostname'; sfapprox ...
    """
    display = os.fspath(path)
    seen: set = set()
    soft: list[tuple[h5py.Group, str, str]] = []
    pending: list[h5py.Group] = [obj]
    while pending:
        group = pending.pop()
        if group.id in seen:
            continue
        seen.add(group.id)
        for key in group.keys():
            full = f"{group.name.rstrip('/')}/{key}"
            link = group.get(key, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                raise fail(display, f"{full} is an external link to {link.path!r} in {link.filename!r}", _HINT)
            if isinstance(link, h5py.SoftLink):
                soft.append((group, key, link.path))
                continue
            if not isinstance(link, h5py.HardLink):
                raise fail(display, f"{full} is a user-defined link ({type(link).__name__})", _HINT)
            child = group.get(key)
            if isinstance(child, h5py.Group):
                pending.append(child)
            elif isinstance(child, h5py.Dataset) and child.id not in seen:
                seen.add(child.id)
                check_dataset(child, display, full)
    # Only now that no external link is left may soft links be resolved: a
    # soft link to a path through an external link would otherwise open the
    # other file.  Their targets were visited above through hard links.
    for group, key, target in soft:
        full = f"{group.name.rstrip('/')}/{key}"
        try:
            group[key]
        except (KeyError, RuntimeError, ValueError, OSError) as exc:
            why = "a loop of soft links" if "too many links" in str(exc) else "a missing object"
            raise fail(display, f"{full} is a soft link to {target!r}, which leads to {why}",
                       "check the file") from None


def read_dataset(ds: h5py.Dataset, path: str | os.PathLike, *, max_memory: int | None = None,
                 name: str | None = None, copies: int = 1) -> np.ndarray:
    """Read a whole dataset after checking where its data lives and what it would cost.

    Parameters
    ----------
    ds : h5py.Dataset
        The dataset.
    path : str or os.PathLike
        The file, as the user named it; starts the message.
    max_memory : int or None, default=None
        Memory limit in bytes (None: 80% of physical RAM).
    name : str or None, default=None
        The dataset's name in messages (default: its HDF5 path).
    copies : int, default=1
        How many float64-sized copies the caller will make of it (the limit is
        checked against ``copies * max(itemsize, 8) * size``).

    Returns
    -------
    numpy.ndarray
        ``ds[()]``.

    Raises
    ------
    InputError
        See :func:`check_dataset`; also for a dataset with no dataspace (HDF5
        "null") or of variable-length/object type.
    ResourceError
        If the declared size exceeds ``max_memory``: checked from the
        dataset's shape, before reading, so a fill-value-only dataset of
        10⁶ x 10⁶ entries (a few hundred bytes on disk) is refused at once.
    """
    name = name or ds.name or "dataset"
    display = os.fspath(path)
    check_dataset(ds, display, name)
    if ds.shape is None:
        raise fail(display, f"{name} holds no data (null dataspace)")
    if ds.dtype.kind == "O" or h5py.check_vlen_dtype(ds.dtype) is not None:
        raise fail(display, f"{name} holds variable-length or object data, not numbers")
    size = int(np.prod(ds.shape, dtype=object))
    nbytes = copies * size * max(ds.dtype.itemsize, 8)
    check_memory(nbytes, what=f"{display}: {name} ({shape_text(ds.shape)} {ds.dtype}, "
                 f"{format_bytes(size * ds.dtype.itemsize)} declared)", limit=max_memory)
    return ds[()]


@contextlib.contextmanager
def open_self_contained(file: str | os.PathLike | object, path: str | os.PathLike | None = None
                        ) -> Iterator[h5py.File]:
    """Open an HDF5 file read-only and check it with :func:`check_self_contained`.

    Parameters
    ----------
    file : str, os.PathLike or binary file object
        What h5py opens (a path, or a BytesIO for decompressed data).
    path : str or os.PathLike or None, default=None
        The file as the user named it, for messages (default: ``file``).

    Yields
    ------
    h5py.File

    Raises
    ------
    InputError
        For a file HDF5 cannot open, and for anything :func:`check_self_contained` refuses.
    """
    display = os.fspath(path if path is not None else file)
    try:
        handle = h5py.File(file, "r")
    except (OSError, ValueError) as exc:
        raise fail(display, f"not a readable HDF5 file ({one_line(exc) or type(exc).__name__})") from None
    with handle:
        check_self_contained(handle, display)
        yield handle

