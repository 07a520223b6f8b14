"""Sources over matrices that exist somewhere already: an array (memory-mapped or not), a scipy
sparse matrix, or any LinearOperator that can multiply."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .._errors import InputError, ParameterError
from .._validation import (check_magnitude, check_matrix_dtype, check_memory, check_sparse_structure, held_bytes,
                           memory_limit, stored_count)
from .._npy import PICKLE_REFUSAL, read_npy_header
from ..formats import shape_phrase, shape_text
from ._base import MatrixSource, checked_product

__all__ = ["ArraySource", "SparseSource", "OperatorSource", "open_npy", "as_source", "sparse_source_within"]


def _what_array(value) -> str:
    """What a message says a non-square matrix it got was: its shape (``shape 3 x 4``, ``a scalar``), or its type
    where it has none."""
    shape = getattr(value, "shape", None)
    return shape_phrase(shape) if isinstance(shape, tuple) else f"a {type(value).__name__}"


class ArraySource(MatrixSource):
    """A dense ``N x N`` array, in memory or memory-mapped (``np.load(path, mmap_mode="r")``).

    Columns are read block by block, so a memory-mapped file larger than the
    memory is streamed, never loaded whole.  Non-finite entries are refused
    when their block is read (one line naming the source and the entry).

    Parameters
    ----------
    array : numpy.ndarray or numpy.memmap, shape (N, N)
        Real numbers of any numeric dtype (read as float64, a block at a time).
    name : str, default="X"
        What the matrix is called in tables and messages.

    Attributes
    ----------
    array : numpy.ndarray or numpy.memmap
        The array as given (not copied).

    Raises
    ------
    InputError
        For an array that is not square and 2-D, or not of real numbers.

    Examples
    --------
    >>> src = ArraySource(np.arange(9.0).reshape(3, 3))
    >>> src.columns([2, 0]).tolist()
    [[2.0, 0.0], [5.0, 3.0], [8.0, 6.0]]
    """

    kind = "array"

    def __init__(self, array, name: str = "X") -> None:
        if getattr(array, "ndim", None) != 2 or array.shape[0] != array.shape[1]:
            raise InputError(f"{name}: a square matrix is needed, got {_what_array(array)}")
        if array.dtype.kind not in "biuf":  # bool (read as 0/1, as a formed matrix is), integers, reals
            raise InputError(f"{name}: the matrix must hold real numbers, got {array.dtype}")
        self.array = array
        super().__init__(array.shape[0], name)

    def _columns(self, J: np.ndarray) -> np.ndarray:
        # a signalling NaN (numpy's own NaN is quiet; other programs write them) sets the invalid flag when
        # cast: numpy's "invalid value encountered in cast" came before columns() refused the entry
        with np.errstate(invalid="ignore"):
            return np.asarray(self.array[:, J], dtype=np.float64)  # columns() refuses a non-finite entry

    def _whole_product(self, A: np.ndarray, B: np.ndarray) -> np.ndarray | None:
        """``A @ B`` (``A`` is ``X`` or ``X.T``) in one BLAS product when ``X`` is a float64 array in memory
        (not memory-mapped) and the product is finite; None: the caller's pass by column blocks, which
        names a non-finite entry of ``X``."""
        if type(self.array) is not np.ndarray or self.array.dtype != np.float64:
            return None
        out = A @ np.asarray(B, dtype=np.float64)
        return out if np.isfinite(out).all() else None

    @property
    def products_by_columns(self) -> bool:
        """A memory-mapped (or not float64) array's products are passes by column blocks."""
        return type(self.array) is not np.ndarray or self.array.dtype != np.float64

    @checked_product
    def matmat(self, B: np.ndarray) -> np.ndarray:
        """``X @ B``: one product for a float64 array in memory, else by column blocks.

        A pass by blocks copies each block (up to 4,096 columns: the whole matrix again at N = 4,096,
        ``benchmarks/results/method_memory.md``).

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)
            The operand.

        Returns
        -------
        numpy.ndarray
            ``X @ B``, of ``B``'s shape.
        """
        out = self._whole_product(self.array, B)
        return super().matmat(B) if out is None else out

    @checked_product
    def rmatmat(self, B: np.ndarray) -> np.ndarray:
        """``X.T @ B``, as :meth:`matmat`.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)
            The operand.

        Returns
        -------
        numpy.ndarray
            ``X.T @ B``, of ``B``'s shape.
        """
        out = self._whole_product(self.array.T, B)
        return super().rmatmat(B) if out is None else out

    def diagonal(self) -> np.ndarray:
        return np.asarray(np.diagonal(self.array), dtype=np.float64).copy()

    def describe(self) -> dict[str, Any]:
        memmap = isinstance(self.array, np.memmap)
        if not (memmap and self.array.filename):
            return {"kind": self.kind, "memory_mapped": memmap, "dtype": str(self.array.dtype)}
        path = os.fspath(self.array.filename)
        if getattr(self, "_sampled", None) is None:  # once: a saved fit's record and a comparison's notes use it
            try:
                self._sampled = sampled_sha256(path)
            except OSError:  # the file went away or cannot be read again since it was mapped: no fingerprint
                self._sampled = {}
        return {"kind": self.kind, "memory_mapped": memmap, "dtype": str(self.array.dtype), "path": path,
                **self._sampled}

    # A read-only memory map travels by its file, not its data: pickled as an ndarray it was the whole file
    # read into the pickle (a process pool's or Dask cluster's every task, for a .npy opened because it is
    # over the memory limit), and the copy described itself with no path or fingerprint.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        mapped = _MappedFile.of(self.array)
        if mapped is not None:
            state["array"] = mapped
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("array"), _MappedFile):
            state = {**state, "array": state["array"].open(state.get("name", "X"))}
        self.__dict__.update(state)

    def __copy__(self) -> "ArraySource":
        # a shallow copy (MatrixSource.limited's) shares the map it has: not a second map of the file
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone


class _MappedFile:
    """Where a read-only memory-mapped array lies in its file: what :class:`ArraySource` pickles instead
    of the array's data, and maps again when unpickled (on a worker, the same path must be readable)."""

    def __init__(self, path: str, offset: int, dtype: np.dtype, shape: tuple[int, ...], order: str, size: int):
        self.path, self.offset, self.dtype, self.shape, self.order, self.size = path, offset, dtype, shape, order, size

    @classmethod
    def of(cls, array: Any) -> "_MappedFile | None":
        """The place of ``array`` in its file, or None where it is not a contiguous read-only map of a
        named file (an array in memory, a copy-on-write map whose changes the file lacks, a strided view)."""
        import mmap

        if not (isinstance(array, np.memmap) and array.filename and array.mode == "r"):
            return None
        order = "C" if array.flags.c_contiguous else "F" if array.flags.f_contiguous else None
        mapped = array.base
        while mapped is not None and not isinstance(mapped, mmap.mmap):  # a view's base is its parent map
            mapped = getattr(mapped, "base", None)
        if order is None or mapped is None:
            return None
        # the map starts at the offset rounded down to the allocation granularity (numpy's own rule); a view
        # lies further in by its distance from the map's first byte
        start = array.offset - array.offset % mmap.ALLOCATIONGRANULARITY
        first = np.frombuffer(mapped, dtype=np.uint8).__array_interface__["data"][0]
        offset = start + array.__array_interface__["data"][0] - first
        return cls(os.fspath(array.filename), offset, array.dtype, array.shape, order, os.path.getsize(array.filename))

    def open(self, name: str) -> np.memmap:
        """The array mapped again from its file (read-only); :class:`~sfapprox.InputError` where the file is
        gone, unreadable here or of another size than when it was pickled (changed since)."""
        try:
            size = os.path.getsize(self.path)
            if size != self.size:
                raise OSError(f"it is {size:,} bytes, not the {self.size:,} it was when the source was pickled")
            return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=self.shape,
                             order=self.order)
        except (OSError, ValueError) as exc:
            raise InputError(f"{name}: cannot map {self.path} again where the source was unpickled "
                             f"({' '.join(str(exc).split())}); a memory-mapped matrix travels by its path, "
                             "which must be readable there") from None


#: ``(chunks, bytes each)`` that :func:`sampled_sha256` reads of a large file.
SAMPLED_CHUNKS = (16, 1 << 20)


def sampled_sha256(path: str | os.PathLike) -> dict[str, Any]:
    """``{"bytes": size, "sampled_sha256": hex}``: SHA-256 of a file's size and of 16 chunks of 1 MiB spread
    evenly over it (all of it when smaller), what tells a saved fit of a memory-mapped ``.npy`` from a
    fit of another file without a pass over it (the whole file is hashed for every file read whole; a
    mapped one may be tens of GB).  Files differing only between the chunks are taken for the same.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    dict
    """
    import hashlib

    chunks, width = SAMPLED_CHUNKS
    size = os.path.getsize(path)
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        starts = [0] if size <= chunks * width else np.linspace(0, size - width, chunks).astype(np.int64).tolist()
        for start in starts:
            fh.seek(start)
            digest.update(fh.read(width if len(starts) > 1 else size))
    return {"bytes": size, "sampled_sha256": digest.hexdigest()}


class SparseSource(MatrixSource):
    """A scipy sparse matrix (kept as CSC: a column block is a slice).

    Parameters
    ----------
    matrix : scipy sparse matrix or array, shape (N, N)
        Finite real values.
    name : str, default="X"
        What the matrix is called in tables and messages.
    file_format : str or None, default=None
        The format of the file it was read from (:func:`~sfapprox.io.open_matrix` sets it: "mtx",
        "pajek", ...); None for a matrix given in memory.

    Attributes
    ----------
    matrix : scipy.sparse.csc_array
        A float64 CSC copy.
    nonnegative : bool
        Whether every stored value is ``>= 0``.
    symmetric : bool
        Whether it equals its transpose (exact, from its stored entries).

    Raises
    ------
    InputError
        For a matrix that is not square, not of real numbers, has index arrays
        pointing outside it (a corrupt file: refused before scipy reads them),
        or holds NaN, infinite or overflowing values.

    Examples
    --------
    >>> src = SparseSource(sp.eye(4, format="csr"))
    >>> src.columns([1]).ravel().tolist()
    [0.0, 1.0, 0.0, 0.0]
    """

    kind = "sparse"

    def __init__(self, matrix, name: str = "X", *, file_format: str | None = None) -> None:
        if matrix.shape[0] != matrix.shape[1]:
            raise InputError(f"{name}: a square matrix is needed, got shape {shape_text(matrix.shape)}")
        check_matrix_dtype(np.dtype(matrix.dtype), name)  # complex values would lose their imaginary part
        check_sparse_structure(matrix, source=name)  # scipy's conversion trusts the indices
        self.matrix = sp.csc_array(matrix, dtype=np.float64)
        if not self.matrix.has_canonical_format:  # (a CSR's repeated entries survive the conversion)
            self.matrix.sum_duplicates()
        if not np.isfinite(self.matrix.data).all():
            raise InputError(f"{name}: the matrix holds NaN or infinite values")
        check_magnitude(self.matrix.data, name)
        super().__init__(matrix.shape[0], name)
        self.file_format = file_format
        self.nonnegative = bool(self.matrix.data.size == 0 or self.matrix.data.min() >= 0)
        self.symmetric = _symmetric(self.matrix, matrix)
        #: its CSC arrays, held while passes run beside them (what they are sized without)
        self.held_bytes = held_bytes(self.matrix)

    def _columns(self, J: np.ndarray) -> np.ndarray:
        return self.matrix[:, J].toarray()

    @property
    def sparse_matrix(self) -> sp.csc_array:
        """The CSC copy (:attr:`matrix`): the top-s pass and the scoring read its non-zeros."""
        return self.matrix

    @checked_product
    def matmat(self, B: np.ndarray) -> np.ndarray:
        """``X @ B`` by the sparse product (no pass over column blocks).

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)

        Returns
        -------
        numpy.ndarray
            ``X @ B``, of ``B``'s shape.
        """
        return np.asarray(self.matrix @ np.asarray(B, dtype=np.float64))

    @checked_product
    def rmatmat(self, B: np.ndarray) -> np.ndarray:
        """``X.T @ B`` by the sparse product.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)

        Returns
        -------
        numpy.ndarray
            ``X.T @ B``, of ``B``'s shape.
        """
        return np.asarray(self.matrix.T @ np.asarray(B, dtype=np.float64))

    def diagonal(self) -> np.ndarray:
        return np.asarray(self.matrix.diagonal(), dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "nnz": int(self.matrix.nnz),
                **({"file_format": self.file_format} if self.file_format else {})}

    def summary(self) -> dict[str, Any]:
        """:meth:`MatrixSource.summary` and the facts its stored entries give without a pass: ``nnz``,
        ``density``, ``fro_norm``, ``min`` and ``max`` (as a loaded matrix's summary has them).

        Returns
        -------
        dict of str to Any
            :meth:`MatrixSource.summary`'s keys and ``nnz``, ``density``, ``fro_norm``, ``min``, ``max``.
        """
        values = self.matrix.data
        nnz, full = int(np.count_nonzero(values)), self.n * self.n
        lo = float(values.min(initial=0.0)) if nnz < full else float(values.min())
        hi = float(values.max(initial=0.0)) if nnz < full else float(values.max())
        # a file's format and path under the keys a loaded matrix's summary has them (info --json of one
        # file said "mtx" and its path, or "sparse" and no path, by the memory limit)
        return {**super().summary(), "nnz": nnz, "density": nnz / float(full),
                "fro_norm": float(np.linalg.norm(values)), "min": lo, "max": hi,
                **({"format": self.file_format} if self.file_format else {}),
                **({"path": self.file} if self.file else {})}


def sparse_copies_bytes(matrix) -> int:
    """Bytes :class:`SparseSource` copies ``matrix`` (scipy sparse) into: its float64 CSC arrays, and the
    canonical CSR that :func:`_symmetric` compares them with where ``matrix`` is not one already (its
    index arrays as wide as ``matrix``'s).  From the arrays' sizes, nothing copied."""
    n, nnz = matrix.shape[0], stored_count(matrix)  # (a DOK has no .data; a LIL's counts its rows)
    index = getattr(matrix, "indices", getattr(matrix, "row", None))
    width = max(4, index.dtype.itemsize if index is not None else 8)
    copy = 8 * nnz + width * (nnz + n + 1)
    canonical = (getattr(matrix, "format", None) == "csr" and matrix.has_canonical_format
                 and matrix.dtype == np.float64)
    return copy if canonical else 2 * copy


def sparse_source_within(matrix, max_memory: int | None, name: str = "X") -> SparseSource:
    """A :class:`SparseSource` of ``matrix``, a scipy sparse matrix held in memory, once its copies
    (:func:`sparse_copies_bytes`) and ``matrix`` fit the memory limit: refused before they are made.

    Parameters
    ----------
    matrix : scipy sparse matrix or array, shape (N, N)
    max_memory : int or None
        Memory limit in bytes; None: :func:`~sfapprox._validation.default_memory_limit`.
    name : str, default="X"
        What the matrix is called in tables and messages.

    Returns
    -------
    SparseSource

    Raises
    ------
    ResourceError
        Where the copies beside ``matrix`` are over the limit.
    """
    n, nnz = matrix.shape[0], stored_count(matrix)  # (a DOK has no .data; a LIL's counts its rows)
    check_memory(sparse_copies_bytes(matrix), limit=max_memory, held=held_bytes(matrix),
                 what=f"{name}: reading the {n:,} x {n:,} sparse matrix ({nnz:,} stored entries) by its columns, "
                      "its float64 column copy")
    return SparseSource(matrix, name)


def _symmetric(csc: sp.csc_array, given) -> bool:
    """Whether the canonical CSC ``csc`` equals its transpose, in O(nnz) without a transposed copy where
    ``given`` is its canonical CSR (a loaded matrix's): the CSR arrays of ``X`` are the CSC arrays of
    ``X^T``.  (``X != X.T`` held three more copies of X: 9.5 million non-zeros, 400 MB.)"""
    csr = given if (getattr(given, "format", None) == "csr" and given.has_canonical_format
                    and given.dtype == np.float64) else csc.tocsr()
    return (np.array_equal(csr.indptr, csc.indptr) and np.array_equal(csr.indices, csc.indices)
            and np.array_equal(csr.data, csc.data))


class OperatorSource(MatrixSource):
    """Any square :class:`scipy.sparse.linalg.LinearOperator`: ``X[:, J] = X @ I[:, J]``.

    Parameters
    ----------
    operator : scipy.sparse.linalg.LinearOperator, shape (N, N)
        Anything with ``matvec``/``matmat`` (and ``rmatvec``/``rmatmat`` for ``X.T @ B``).
    name : str, default="X"
        What the matrix is called in tables and messages.

    Attributes
    ----------
    operator : LinearOperator
        The operator as given.

    Raises
    ------
    InputError
        For an operator that is not square or not real (its ``dtype``); a
        product holding NaN or infinite values is refused when it is made.

    Examples
    --------
    >>> from scipy.sparse.linalg import aslinearoperator
    >>> src = OperatorSource(aslinearoperator(np.diag([1.0, 2.0, 3.0])))
    >>> src.columns([1]).ravel().tolist()
    [0.0, 2.0, 0.0]
    """

    kind = "operator"
    column_copies = 3  # the identity's columns, the product, the block

    def __init__(self, operator: LinearOperator, name: str = "X") -> None:
        if len(operator.shape) != 2 or operator.shape[0] != operator.shape[1]:
            raise InputError(f"{name}: a square operator is needed, got shape {shape_text(operator.shape)}")
        if getattr(operator, "dtype", None) is not None:
            check_matrix_dtype(np.dtype(operator.dtype), name)
        self.operator = operator
        super().__init__(operator.shape[0], name)

    def _columns(self, J: np.ndarray) -> np.ndarray:
        E = np.zeros((self.n, J.size))
        E[J, np.arange(J.size)] = 1.0
        return self._finite(self.operator.matmat(E))  # a NaN spreads along its row: no entry is named

    @checked_product
    def matmat(self, B: np.ndarray) -> np.ndarray:
        """``X @ B`` by the operator's own ``matvec``/``matmat``.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)

        Returns
        -------
        numpy.ndarray
            ``X @ B``, of ``B``'s shape.
        """
        B = np.asarray(B, dtype=np.float64)
        return self._finite(self.operator.matvec(B) if B.ndim == 1 else self.operator.matmat(B))

    @checked_product
    def rmatmat(self, B: np.ndarray) -> np.ndarray:
        """``X.T @ B`` by the operator's own ``rmatvec``/``rmatmat``.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)

        Returns
        -------
        numpy.ndarray
            ``X.T @ B``, of ``B``'s shape.
        """
        B = np.asarray(B, dtype=np.float64)
        return self._finite(self.operator.rmatvec(B) if B.ndim == 1 else self.operator.rmatmat(B))

    def _finite(self, product) -> np.ndarray:
        """An operator's product as float64, refused where it holds NaN or infinite values (the operator's
        entries cannot be looked at; a column block's can: :meth:`columns` names the entry)."""
        out = np.asarray(product, dtype=np.float64)
        if not np.isfinite(out).all():
            raise InputError(f"{self.name}: a product with the operator holds NaN or infinite values; "
                             "the matrix must be finite")
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "operator": type(self.operator).__name__}


def open_npy(path: str | os.PathLike, name: str | None = None) -> ArraySource:
    """A ``.npy`` file as a memory-mapped :class:`ArraySource` (never read whole, never unpickled).

    A truncated or damaged file is an :class:`~sfapprox.InputError` naming it.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy`` file holding one square array of real numbers.
    name : str, optional
        The source's name; None: the file's stem.

    Returns
    -------
    ArraySource
        Over a read-only memory map, with a note saying so.
    """
    display = os.fspath(path)
    try:
        with open(display, "rb") as fh:
            header = read_npy_header(fh)
        size = os.path.getsize(display)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{display}: not a valid .npy array ({' '.join(str(exc).split())})") from None
    if header.dtype.hasobject:
        raise InputError(f"{display}: array {PICKLE_REFUSAL}")
    truncated = header.truncation(size)
    if truncated:
        raise InputError(f"{display}: {truncated}; copy or write it again")
    try:
        array = np.load(display, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError, OverflowError) as exc:
        raise InputError(f"{display}: cannot memory-map it as a .npy array ({' '.join(str(exc).split())}); "
                         "the file is damaged or truncated") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"{display}: not a single .npy array")
    source = ArraySource(array, name or os.path.splitext(os.path.basename(display))[0])
    source.notes.append(f"memory-mapped ({array.dtype}, {source.n:,} x {source.n:,}): read a block of columns at a "
                        "time, never whole")
    return source


def as_source(matrix, name: str = "X") -> MatrixSource:
    """A :class:`MatrixSource` from a source, an ndarray (or memmap), a scipy sparse matrix or a LinearOperator.

    Parameters
    ----------
    matrix : MatrixSource, numpy.ndarray, scipy sparse matrix or LinearOperator
        A source is returned as it is.
    name : str, default="X"
        What the matrix is called in tables and messages.

    Returns
    -------
    MatrixSource

    Raises
    ------
    ParameterError
        For any other type.
    """
    if isinstance(matrix, MatrixSource):
        return matrix
    if sp.issparse(matrix):
        return SparseSource(matrix, name)
    if isinstance(matrix, LinearOperator):
        return OperatorSource(matrix, name)
    if isinstance(matrix, np.ndarray):
        return ArraySource(matrix, name)
    raise ParameterError(f"{name}: cannot read columns from a {type(matrix).__name__}; give an array, a scipy "
                         "sparse matrix, a LinearOperator or a MatrixSource")


def columns_within(matrix, max_memory: int | None, name: str = "X") -> MatrixSource:
    """``matrix`` (held in memory) read by column blocks, for a fit whose in-memory form is over the
    memory limit: a source whose passes are sized for what the held matrix leaves of the limit.

    The matrix stays in memory while the fit reads it, so a fit from its columns may use only the
    rest: its :attr:`~MatrixSource.max_memory` is the limit less the matrix (twice for a sparse one,
    whose source keeps a CSC copy); a fit sizes its own work for :func:`room` of it.

    Parameters
    ----------
    matrix : numpy.ndarray, scipy sparse matrix, LinearOperator or MatrixSource
        The matrix (a source, memory-mapped array or operator holds nothing of it: the limit stays).
    max_memory : int or None
        Memory limit in bytes; None: :func:`~sfapprox._validation.default_memory_limit`.
    name : str, default="X"
        What the matrix is called in tables and messages.

    Returns
    -------
    MatrixSource

    Raises
    ------
    ResourceError
        Where a sparse matrix's copies (:func:`sparse_source_within`) are over the limit.

    Examples
    --------
    >>> src = columns_within(np.zeros((100, 100)), 200_000)
    >>> src.max_memory
    120000
    """
    # a sparse one's copy is checked before it is made (the limit was applied only to what it left)
    source = sparse_source_within(matrix, max_memory, name) if sp.issparse(matrix) else as_source(matrix, name)
    limit = memory_limit(max_memory)
    if limit is not None and source is not matrix:
        held = held_bytes(matrix) * (2 if sp.issparse(matrix) else 1)
        source.max_memory, source.held_bytes = max(1, limit - held), held
    return source


def room(source: MatrixSource, max_memory: int | None) -> int | None:
    """The memory a fit from ``source``'s columns may use: ``max_memory`` (default: a share of the
    machine's memory), or less where the source was made by :func:`columns_within` from a matrix held
    in memory (None: no limit known).

    Parameters
    ----------
    source : MatrixSource
        The matrix known by its columns.
    max_memory : int or None
        Memory limit in bytes; None: the default limit.

    Returns
    -------
    int or None
        Bytes; None where no limit is known.
    """
    limit = memory_limit(max_memory)
    if limit is not None:
        limit = max(1, limit - source.held_bytes)  # a matrix held beside the passes takes its share
    if source.max_memory is None:
        return limit
    return source.max_memory if limit is None else min(limit, source.max_memory)


def passes_within(source: MatrixSource, max_memory: int | None) -> MatrixSource:
    """``source`` with its passes sized for ``max_memory``: a copy of it whose own limit is
    :func:`room` (never more than the source's own limit, less a matrix held beside it), so that the
    source given is never changed (two fits of it in two threads with two limits each keep theirs);
    None: ``source`` itself.

    Parameters
    ----------
    source : MatrixSource
        The matrix read by its columns.
    max_memory : int or None
        Memory limit in bytes.

    Returns
    -------
    MatrixSource
    """
    if max_memory is None:
        return source
    return source.limited(room(source, max_memory))
