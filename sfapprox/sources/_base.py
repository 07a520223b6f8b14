"""What every matrix source is: a square matrix known by how to compute its columns.

A :class:`MatrixSource` gives exact column blocks ``X[:, J]`` on demand, in
memory ``O(N |J|)``, and from them everything the streaming methods need:
``X @ B`` and ``X.T @ B`` by one pass over column blocks, single entries, and
the whole matrix when it fits (:meth:`MatrixSource.to_dense`).  It is the
project's answer to matrices too big to form (a kernel matrix of 70,000
points is 36.5 GB): the methods that can work from columns run on it
directly; the others need it formed, which :func:`sfapprox.compare` does
when the formed size fits the memory limit.

Blocks are as wide as the memory limit allows (:meth:`MatrixSource.block_width`),
so that a pass holds one block of ``N x b`` numbers plus what its caller keeps.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, Union

import numpy as np

from .._errors import InputError, ParameterError
from ..formats import counted, shape_text
from .._params import MEMORY_LIMIT, check_values
from .._validation import (LIBRARY_WORKING_SET, MAX_SQUARED_NORM, MatrixArray, _sum_of_squares, apply_real_parts, check_memory,
                           check_operand, check_squared_norm, format_bytes, memory_limit, readable_operand)
from ..metrics import scoring_bytes

__all__ = ["MatrixSource", "MatrixLike", "checked_product", "block_columns", "MIN_BLOCK", "MAX_BLOCK", "BLOCK_SHARE", "formable", "formed_need",
           "scoring_need"]

#: Narrowest and widest column block a pass uses: narrower blocks waste the BLAS calls
#: (and, for a memory-mapped row-major file, read a whole page per row for a few numbers).
MIN_BLOCK, MAX_BLOCK = 64, 4096
#: Columns per cell of a symmetric source's formation (:meth:`MatrixSource.to_dense`): of the columns of
#: cell ``[c0, c1)`` only the rows ``[0, c1)`` are kept (the rest is the mirror of the upper triangle), about
#: ``(1 + FORM_CELL / N) / 2`` of the entries.  Cells, not the column blocks (up to :data:`MAX_BLOCK` wide,
#: one block up to N = 4,096 under the default limit): the blocks' products stay as they were, so that the
#: kept entries keep their bits (a BLAS product's entry may change in its last bits with the product's shape).
FORM_CELL = 512
#: Share of the memory limit a pass's blocks may take, with every temporary of computing and using
#: them (the rest is the process itself and what the method keeps: its factors, its entries).
BLOCK_SHARE = 0.5


def checked_product(product: Callable[[Any, np.ndarray], np.ndarray]) -> Callable[[Any, Any], np.ndarray]:
    """Wrap a source's ``matmat`` or ``rmatmat`` (a real product) so that its operand is checked and a
    complex one is applied to its real and imaginary parts.

    Every source's products go through it (the base class's and the overrides of its subclasses): the
    operand was read as ``np.asarray(B, dtype=np.float64).reshape(N, -1)``, so an ``(2N,)`` vector gave
    an ``(2N,)`` result, an ``(N/2, 4)`` block an ``(N, 2)`` one of garbage, a 3-D block a 2-D one, and a
    complex operand lost its imaginary part with only numpy's ComplexWarning.

    Parameters
    ----------
    product : callable
        ``product(source, B)`` for a real ``B`` of shape ``(N,)`` or ``(N, k)``.

    Returns
    -------
    callable
        The checked method; :class:`~sfapprox.ParameterError` for an operand that is not ``N`` rows
        long or has more than two dimensions (as the surrogate operators give).
    """
    @functools.wraps(product)
    def checked(self, B):
        # a scipy sparse operand as its N x k block, dense as the product is (numpy's "setting an array
        # element with a sequence" came out), a torch tensor as its values: as the operators read theirs
        B = readable_operand(B)
        check_operand(B, self.n, owner=self.name)
        return apply_real_parts(lambda part: product(self, part), B, owner=self.name)

    return checked


class MatrixSource:
    """A square ``N x N`` matrix given by its columns (subclasses implement :meth:`_columns`).

    Parameters
    ----------
    n : int
        The order ``N``, at least 1 (:class:`~sfapprox.ParameterError` otherwise).
    name : str, default="X"
        What the matrix is called in tables, messages and file names.

    Attributes
    ----------
    n : int
        The order.
    name : str
        What the matrix is called in tables and file names.
    symmetric : bool or None
        Known structure (None: unknown without a pass over the matrix).
    nonnegative : bool or None
        Known sign (None: unknown).
    psd : bool or None
        Symmetric positive semi-definite (kernel matrices of a positive
        definite kernel): what Nyström's methods need.
    """

    kind = "source"
    symmetric: bool | None = None
    nonnegative: bool | None = None
    psd: bool | None = None
    #: ``N``-long float64 arrays per column that computing a block takes at its peak (the block and
    #: its temporaries; measured with tracemalloc), what :meth:`block_width` sizes blocks by.
    column_copies: int = 2
    #: Whether every column block is finite and bounded by construction (a kernel's entries lie in [-1, 1]
    #: or are checked with its points; attention's are probabilities): :meth:`columns` then skips its
    #: check of each block (:func:`check_block`, up to 15 % of making a kernel block).
    bounded_columns: bool = False
    #: The memory limit passes are sized for when their caller gives none (a comparison sets it).
    max_memory: int | None = None
    #: Bytes of a matrix held in memory beside this source's passes (:func:`~.arrays.columns_within`).
    held_bytes: int = 0
    #: The file it was read from and that file's SHA-256 (:func:`sfapprox.io.open_matrix` sets them; the
    #: hash is left out for a file too big to load, whose hashing would be a pass over it): what a result
    #: or a saved fit records as its input, as it records a loaded file's.
    file: str | None = None
    file_sha256: str | None = None
    #: What selected or transformed the matrix in that file, as it was read (``{"var": "A"}``, a Pajek
    #: ``network``, a table's ``covariance``; :attr:`sfapprox.io.LoadedMatrix.recipe`): set by
    #: :func:`sfapprox.io.open_matrix`, part of :attr:`recipe`.
    reading: dict | None = None

    def __init__(self, n: int, name: str = "X") -> None:
        if int(n) < 1:
            raise ParameterError(f"{name}: a matrix source needs at least one row, got N = {n:,}")
        self.n = int(n)
        self.name = name
        #: How the matrix came about, one line each (shown by the CLI as ``note:`` lines).
        self.notes: list[str] = []

    # ------------------------------------------------------------------ what subclasses supply
    def _columns(self, J: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _kept_rows(self, J: np.ndarray, step: int) -> np.ndarray:
        """The entries of the consecutive columns ``J`` that a symmetric source's formed matrix keeps
        (:meth:`to_dense` mirrors the rest), unchecked: ``X[:stop, J]``, ``stop`` the end of the last
        cell of ``step`` columns that ``J`` reaches (:func:`kept_stop`), of which only the rows up to the
        end of each column's own cell need be right (the others are never read).

        Here the first ``stop`` rows of :meth:`_columns` (every row computed); a source that can skip
        the rest overrides it, with each kept entry the one :meth:`_columns` gives, to the last bit.
        """
        return self._columns(J)[:kept_stop(int(J[-1]), step, self.n)]

    def _form_columns(self, J: np.ndarray, out: np.ndarray) -> None:
        """Write the consecutive columns ``X[:, J]`` into ``out``, their ``N x |J|`` view of the matrix that
        :meth:`to_dense` forms (not symmetric; a symmetric one is formed by :meth:`_kept_rows`).

        Here a copy of :meth:`columns` (checked as every block is); a source that can compute its block
        where it lies (:class:`~sfapprox.sources.AttentionMatrix`) overrides it and saves the block and the copy.
        """
        out[...] = self.columns(J)

    def describe(self) -> dict[str, Any]:
        """What the source is, in plain JSON values (its kind and parameters).

        Returns
        -------
        dict of str to Any
            ``kind`` and the parameters that make the matrix (a kernel's name and bandwidth, ...).
        """
        return {"kind": self.kind}

    @property
    def recipe(self) -> dict[str, Any]:
        """How the matrix was made: :meth:`describe` and, for one read from a file, what selected it there
        (:attr:`reading`); what a saved fit records and a comparison tells another matrix of the file by."""
        return {**self.describe(), **(self.reading or {})}

    # ------------------------------------------------------------------ access
    @property
    def shape(self) -> tuple[int, int]:
        """``(N, N)``."""
        return (self.n, self.n)

    def columns(self, J) -> np.ndarray:
        """The exact columns ``X[:, J]`` as a float64 ``(N, |J|)`` array.

        Parameters
        ----------
        J : array of int
            Column indices (any order, repeats allowed), each in ``0..N-1``.

        Returns
        -------
        numpy.ndarray
            ``X[:, J]``, float64, of shape ``(N, len(J))``.

        Raises
        ------
        ParameterError
            For indices that are not whole numbers or lie outside ``0..N-1``.
        InputError
            For a block holding NaN or infinite values (named by row and column).
        """
        given = np.asarray(J)
        whole = given.dtype.kind in "iu" or (given.dtype.kind == "f" and np.array_equal(given, np.round(given)))
        if given.size and not whole:  # 1.5 was read as column 1
            raise ParameterError(f"{self.name}: column indices must be whole numbers, got {given.dtype} values")
        J = given.astype(np.int64).reshape(-1)
        if J.size and (J.min() < 0 or J.max() >= self.n):
            raise ParameterError(f"{self.name}: column indices must lie in 0..{self.n - 1}")
        out = np.asarray(self._columns(J), dtype=np.float64)
        if out.shape != (self.n, J.size):
            raise AssertionError(f"{type(self).__name__} gave columns of shape {out.shape}, not {(self.n, J.size)}")
        if not self.bounded_columns:
            check_block(out, J, self.name)
        return out

    @property
    def sparse_matrix(self) -> Any:
        """``X`` itself where the source holds it sparse (:class:`~sfapprox.sources.SparseSource`: a scipy
        sparse array); None here.  Passes read its non-zeros instead of dense column blocks (a dense block
        of a 60,000-order matrix is 480 KB a column for its few non-zeros)."""
        return None

    def diagonal(self) -> np.ndarray:
        """``X[i, i]`` for every ``i`` (subclasses with a cheaper rule override it).

        Returns
        -------
        numpy.ndarray
            The ``N`` diagonal entries, float64.
        """
        out = np.empty(self.n)
        for J in block_columns(self.n, self.block_width()):
            out[J] = self.columns(J)[J, np.arange(J.size)]
        return out

    def entries(self, rows, cols) -> np.ndarray:
        """``X[rows[t], cols[t]]`` for each ``t`` (one column block per distinct column).

        Parameters
        ----------
        rows, cols : array_like of int
            Row and column indices, of the same shape, each in ``0..N-1``.

        Returns
        -------
        numpy.ndarray
            The entries, of the shape of ``rows``.
        """
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        out = np.empty(rows.shape)
        unique, inverse = np.unique(cols, return_inverse=True)
        width = self.block_width()
        for start in range(0, unique.size, width):
            J = unique[start:start + width]
            block = self.columns(J)
            take = (inverse >= start) & (inverse < start + J.size)
            out[take] = block[rows[take], inverse[take] - start]
        return out

    @checked_product
    def matmat(self, B: np.ndarray) -> np.ndarray:
        """``X @ B`` by one pass over column blocks: ``sum_J X[:, J] @ B[J]``.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)

        Returns
        -------
        numpy.ndarray
            ``X @ B``, of ``B``'s shape (complex where ``B`` is: its real and imaginary parts are
            applied apart).

        Raises
        ------
        ParameterError
            For a ``B`` that is not ``N`` rows long or has more than two dimensions.
        """
        B = np.asarray(B, dtype=np.float64)
        vector = B.ndim == 1
        B2 = B.reshape(self.n, -1)
        out = np.zeros((self.n, B2.shape[1]))
        tasks = ((J, B2[J]) for J in block_columns(self.n, self.block_width()))
        for part in self._map_blocks(_product_part, tasks):
            out += part  # in the blocks' order, wherever they were computed: the same sums
        return out.ravel() if vector else out

    @checked_product
    def rmatmat(self, B: np.ndarray) -> np.ndarray:
        """``X.T @ B`` by one pass over column blocks: row block ``J`` of the result is ``X[:, J].T @ B``.

        Parameters
        ----------
        B : array_like, shape (N,) or (N, k)

        Returns
        -------
        numpy.ndarray
            ``X.T @ B``, of ``B``'s shape (complex where ``B`` is: its real and imaginary parts are
            applied apart).

        Raises
        ------
        ParameterError
            For a ``B`` that is not ``N`` rows long or has more than two dimensions.
        """
        B = np.asarray(B, dtype=np.float64)
        vector = B.ndim == 1
        B2 = B.reshape(self.n, -1)
        out = np.empty((self.n, B2.shape[1]))
        blocks = list(block_columns(self.n, self.block_width()))
        for J, part in zip(blocks, self._map_blocks(_transposed_part, blocks, B2)):
            out[J] = part
        return out.ravel() if vector else out

    # ``K @ B`` and ``B @ K``, as a notebook user writes them first (a source had no ``@``: a TypeError, and
    # ``ndarray @ K`` numpy's "matmul: Input operand 1 does not support ufuncs"); numpy defers to them:
    __array_ufunc__ = None

    def __matmul__(self, B) -> np.ndarray:
        """``X @ B``: :meth:`matmat` (one pass over the column blocks)."""
        return self.matmat(B)

    def __rmatmul__(self, B) -> np.ndarray:
        """``B @ X`` for a vector or a ``(k, N)`` block: ``(X.T @ B.T).T`` by :meth:`rmatmat`."""
        B = np.asarray(readable_operand(B))
        if B.ndim not in (1, 2) or B.shape[-1] != self.n:  # (rmatmat would name B.T's shape)
            raise ParameterError(f"{self.name} is {self.n:,} x {self.n:,}: B @ it takes a vector of {self.n:,} or a "
                                 f"matrix of {counted(self.n, 'column')}, got shape {shape_text(B.shape)}")
        return self.rmatmat(B.T).T

    def _map_blocks(self, fn, items, *shared) -> Iterator[Any]:
        """``fn(self, *shared, item)`` for each item, in order: a pass's work per block, done here
        (:class:`~sfapprox.sources.DistributedSource` does it on an executor's workers)."""
        for item in items:
            yield fn(self, *shared, item)

    # ------------------------------------------------------------------ passes
    @property
    def products_by_columns(self) -> bool:
        """Whether :meth:`matmat` and :meth:`rmatmat` are passes over the column blocks (each as dear as
        reading the matrix); False where the source has a cheaper product of its own (a sparse matrix,
        an operator, a covariance's factored form, an array in memory)."""
        return type(self).matmat is MatrixSource.matmat

    @property
    def pass_source(self) -> "MatrixSource":
        """The source whose blocks a pass reads (:class:`~sfapprox.sources.DistributedSource`: the
        wrapped one where its products run here)."""
        return self

    def limited(self, max_memory: int | str | None) -> "MatrixSource":
        """A shallow copy of this source (the same data) whose passes are sized for ``max_memory``.

        Parameters
        ----------
        max_memory : int, str or None
            The copy's :attr:`max_memory`, in bytes (a size such as ``"4G"`` is read as ``--max-memory`` reads it).

        Returns
        -------
        MatrixSource
        """
        max_memory = self._check_limit(max_memory, "limited")
        clone = copy.copy(self)
        clone.max_memory = max_memory
        return clone

    def _check_limit(self, max_memory, method: str) -> int | None:
        """``max_memory`` in bytes (a size such as ``"4G"`` read as the command line reads it); ParameterError
        for one that is neither a positive int, a size nor None (as every limit is checked): -1 was "a
        memory limit of -1 B", or a block width of its own."""
        return check_values({"max_memory": max_memory}, {"max_memory": MEMORY_LIMIT},
                            f"{type(self).__name__}.{method}")["max_memory"]

    def block_width(self, max_memory: int | str | None = None, *, extra_columns: int = 0) -> int:
        """Columns per block of a pass: :data:`BLOCK_SHARE` of the memory limit, between MIN_BLOCK and MAX_BLOCK.

        The limit is ``max_memory``, else the source's own :attr:`max_memory`,
        else the default (a share of the machine's memory).  A column costs
        :attr:`column_copies` ``N``-long arrays, plus ``extra_columns`` that
        the caller holds per column besides the block (e.g. the surrogate's
        columns and the residual).

        Parameters
        ----------
        max_memory : int, str or None, default=None
            Memory limit in bytes (or a size such as ``"4G"``); the blocks take ``BLOCK_SHARE`` (half) of it
            (but at least ``MIN_BLOCK`` columns).  None: the source's
            :attr:`max_memory`, else the default limit (80% of RAM); no limit
            known: ``min(N, MAX_BLOCK)``.
        extra_columns : int, default=0
            Further ``N``-vectors the caller holds per column of the block.

        Returns
        -------
        int
            At least 1 and at most ``min(N, MAX_BLOCK)``.
        """
        max_memory = self._check_limit(max_memory, "block_width")
        limit = memory_limit(max_memory if max_memory is not None else self.max_memory)
        per_column = 8 * self.n * (self.column_copies + extra_columns)
        if limit is None:
            return min(self.n, MAX_BLOCK)
        width = int(BLOCK_SHARE * limit // max(per_column, 1))
        return max(1, min(self.n, MAX_BLOCK, max(MIN_BLOCK, width)))

    def blocks(self, width: int | None = None, *, order: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(J, X[:, J])`` for consecutive column blocks covering every column once.

        Parameters
        ----------
        width : int, optional
            Columns per block; None: :meth:`block_width`.
        order : array_like of int, optional
            A permutation of ``0..N-1``: the columns are visited in this order.

        Yields
        ------
        J : numpy.ndarray of int64
            The block's column indices.
        block : numpy.ndarray, shape (N, len(J))
            ``X[:, J]``.
        """
        width = width or self.block_width()
        for J in block_columns(self.n, width, order=order):
            yield J, self.columns(J)

    # ------------------------------------------------------------------ forming it
    @property
    def formed_bytes(self) -> int:
        """Bytes the matrix takes formed, dense float64: ``8 N^2``."""
        return 8 * self.n * self.n

    def forming_bytes(self, width: int) -> int:
        """Bytes :meth:`to_dense` allocates besides the matrix while it forms a block of ``width`` columns.

        Here the block and its temporaries, :attr:`column_copies` ``N``-long arrays a column, then copied
        into the matrix; a source that computes its block where it lies (:meth:`_form_columns`) says less.

        Parameters
        ----------
        width : int
            Columns of the block.

        Returns
        -------
        int
            Bytes.
        """
        return 8 * self.n * width * self.column_copies

    def to_dense(self, max_memory: int | str | None = None) -> np.ndarray:
        """The whole matrix, formed block by block (refused above the memory limit, before allocating).

        Parameters
        ----------
        max_memory : int, str or None, default=None
            Memory limit in bytes (or a size such as ``"4G"``) for the ``8 N^2`` bytes (None: the source's :attr:`max_memory`, else
            80% of RAM); the blocks computed meanwhile take half of what the matrix leaves of it.

        Returns
        -------
        numpy.ndarray, shape (N, N)

        Raises
        ------
        ParameterError
            For a ``max_memory`` that is not a positive int (or None).
        ResourceError
            When the formed matrix is over the limit.
        """
        # As load_matrix and the estimators check it: -1 was "a memory limit of -1 B" (a ResourceError).
        max_memory = self._check_limit(max_memory, "to_dense")
        check_memory(self.formed_bytes, what=f"{self.name}: forming the {self.n:,} x {self.n:,} matrix",
                     limit=max_memory)
        out = np.empty((self.n, self.n))
        limit = memory_limit(max_memory if max_memory is not None else self.max_memory)
        # The blocks get half of what the matrix leaves of the limit (block_width's share of it).
        rest = None if limit is None else max(1, limit - self.formed_bytes)
        width = self.block_width(rest)
        if self.symmetric:
            _form_symmetric(self, out, width)
            return out
        for J in block_columns(self.n, width):
            self._form_columns(J, out[:, J[0]:J[-1] + 1])
        return out

    def summary(self) -> dict[str, Any]:
        """Facts known without a pass over the matrix (what ``info`` and result files record).

        Returns
        -------
        dict of str to Any
            ``name``, ``n``, ``format``, ``formed_bytes``, ``symmetric``, ``nonnegative``, ``psd``,
            ``source`` (:attr:`recipe`), ``file``, ``sha256`` and ``notes``.
        """
        return {"name": self.name, "n": self.n, "format": self.kind, "formed_bytes": self.formed_bytes,
                "formed": format_bytes(self.formed_bytes), "symmetric": self.symmetric,
                "nonnegative": self.nonnegative, "psd": self.psd, "source": self.recipe,
                "file": self.file, "sha256": self.file_sha256, "notes": list(self.notes)}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "kind")
        return f"{type(self).__name__}(n={self.n}{', ' + params if params else ''})"


def kept_stop(j: int, step: int, n: int) -> int:
    """The rows a symmetric formation keeps of column ``j``: ``[0, stop)``, ``stop`` the end of its cell of
    ``step`` columns (:data:`FORM_CELL`), at most ``n``.

    Examples
    --------
    >>> kept_stop(0, 512, 2000), kept_stop(511, 512, 2000), kept_stop(512, 512, 2000), kept_stop(1999, 512, 2000)
    (512, 512, 1024, 2000)
    """
    return min(n, (j // step + 1) * step)


def form_cells(j0: int, j1: int, step: int) -> Iterator[tuple[int, int]]:
    """The columns ``[j0, j1)`` cut at the multiples of ``step``: each ``(c0, c1)`` lies in one cell.

    Examples
    --------
    >>> list(form_cells(300, 1100, 512))
    [(300, 512), (512, 1024), (1024, 1100)]
    """
    c0 = j0
    while c0 < j1:
        c1 = min(j1, (c0 // step + 1) * step)
        yield c0, c1
        c0 = c1


def _form_symmetric(source: MatrixSource, out: np.ndarray, width: int) -> None:
    """Fill ``out`` with a symmetric ``source`` by column blocks of ``width``: of the columns of each cell
    ``[c0, c1)`` of :data:`FORM_CELL` columns only the rows ``[0, c1)`` are kept
    (:meth:`MatrixSource._kept_rows`, which need compute no others), the rest is the upper triangle's
    mirror (:func:`_mirror_upper`, by the same cells).  Whole columns, their part below the diagonal then
    overwritten by the mirror, threw away about half of a kernel's evaluations.

    The matrix is the one whole columns mirrored gave, to the last bit: the blocks are the same (and so
    are a kernel's products), each kept entry is computed as its whole column computes it, and the mirror
    reads only those.  A source whose blocks are not bounded by construction is checked as its whole
    column blocks were (:func:`check_block`, on the formed matrix's), but only where the whole matrix's
    sum of squares is not a finite number below the bound: one cheap pass where nothing is wrong.
    """
    n, step = out.shape[0], min(width, FORM_CELL)
    for J in block_columns(n, width):
        j0, j1 = int(J[0]), int(J[-1]) + 1
        kept = np.asarray(source._kept_rows(J, step), dtype=np.float64)
        if kept.shape != (kept_stop(j1 - 1, step, n), J.size):
            raise AssertionError(f"{type(source).__name__} kept rows of shape {kept.shape} of columns {j0}..{j1 - 1}")
        for c0, c1 in form_cells(j0, j1, step):
            stop = kept_stop(c0, step, n)
            out[:stop, c0:c1] = kept[:stop, c0 - j0:c1 - j0]
    _mirror_upper(out, step)
    if not source.bounded_columns and not _sum_of_squares(out.ravel()) <= MAX_SQUARED_NORM:
        for J in block_columns(n, width):  # the column block that is not finite or overflows, named
            check_block(np.ascontiguousarray(out[:, J[0]:J[-1] + 1]), J, source.name)


def _mirror_upper(X: np.ndarray, width: int) -> None:
    """Make ``X`` exactly symmetric in place, its lower triangle the upper one's mirror, by row blocks of
    ``width`` (no ``N x N`` temporary): a symmetric source's columns, computed block by block, differ from
    its rows by rounding (1e-16), and a formed kernel then read as not symmetric."""
    n = X.shape[0]
    for i0 in range(0, n, width):
        i1 = min(n, i0 + width)
        X[i0:i1, :i0] = X[:i0, i0:i1].T
        diagonal = X[i0:i1, i0:i1]
        diagonal[:] = np.triu(diagonal) + np.triu(diagonal, 1).T


def check_block(block: np.ndarray, J: np.ndarray, name: str) -> None:
    """Refuse a block of columns ``X[:, J]`` holding a NaN or infinite entry, or values so large that
    ``||X||_F^2`` overflows float64 (as a matrix in memory is refused: :func:`~sfapprox._validation.check_square_matrix`).

    One dot product over the block decides (a NaN or an infinity makes it NaN or infinite too): a pass
    cheaper than making the block; the entry is looked for only to word the error.

    Parameters
    ----------
    block : numpy.ndarray, shape (N, |J|)
        The columns, float64.
    J : numpy.ndarray of int
        Their indices.
    name : str
        The matrix's name, for the message.

    Raises
    ------
    InputError
        Naming the first non-finite entry, or the largest entry.

    Examples
    --------
    >>> check_block(np.ones((3, 2)), np.array([0, 2]), "X")
    >>> check_block(np.array([[1.0], [np.nan]]), np.array([4]), "X")
    Traceback (most recent call last):
    ...
    sfapprox._errors.InputError: X: entry (1, 4) is nan; the matrix must be finite
    """
    squared = _sum_of_squares(block.ravel(order="K"))  # a view of a contiguous block
    if squared <= MAX_SQUARED_NORM:  # False for NaN
        return
    bad = ~np.isfinite(block)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"{name}: entry ({i}, {J[j]}) is {block[i, j]}; the matrix must be finite")
    check_squared_norm(squared, name, nonzero=True, largest=float(np.abs(block).max()))  # (over: it raises)


def _product_part(source: MatrixSource, task: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """``X[:, J] @ B[J]``: one block's share of ``X @ B`` (module level: it travels to other processes)."""
    J, B = task
    return source.columns(J) @ B


def _transposed_part(source: MatrixSource, B: np.ndarray, J: np.ndarray) -> np.ndarray:
    """``X[:, J].T @ B``: the rows ``J`` of ``X.T @ B``."""
    return source.columns(J).T @ B


def block_columns(n: int, width: int, *, order: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """Consecutive index blocks of ``width`` covering ``0..n-1`` (or ``order``'s permutation of it).

    Parameters
    ----------
    n : int
        Number of columns.
    width : int
        Columns per block (at least 1 is used).
    order : array_like of int, optional
        The column order to cut into blocks; None: ``0..n-1``.

    Yields
    ------
    numpy.ndarray of int64

    Examples
    --------
    >>> [J.tolist() for J in block_columns(5, 2)]
    [[0, 1], [2, 3], [4]]
    """
    index = np.arange(n) if order is None else np.asarray(order, dtype=np.int64)
    for start in range(0, index.size, max(1, int(width))):
        yield index[start:start + width]


# ------------------------------------------------------------------- formed or not
# Here, below both the comparison and the readers: the readers decide by it whether a .npy is mapped.
def formable(source: MatrixSource, max_memory: int | None) -> bool:
    """Whether ``source`` is formed for a comparison: the formed matrix and its scoring fit the limit
    (:func:`formed_need`, what :func:`sfapprox.comparison.check_scoring_memory` will check once it is
    formed).

    Parameters
    ----------
    source : MatrixSource
        The matrix known by its columns.
    max_memory : int or None
        Memory limit in bytes; None: :func:`~sfapprox._validation.default_memory_limit`
        (80% of RAM).
        No limit known: True.

    Returns
    -------
    bool
        True where forming ``source`` and scoring it fit ``max_memory``.
    """
    limit = memory_limit(max_memory)
    return limit is None or formed_need(source) <= limit


def formed_need(source: MatrixSource) -> int:
    """Bytes a comparison on ``source`` formed holds at least: the dense matrix and its scoring (two
    more dense arrays up to ``DENSE_SCORING_MAX_N``, column blocks above) and the libraries' working
    set; or, forming it, the matrix and what forming one block of the narrowest width allocates
    (:meth:`~sfapprox.sources.MatrixSource.forming_bytes`; the blocks take half of what the matrix
    leaves of the limit, :meth:`~sfapprox.sources.MatrixSource.to_dense`, but at least
    :data:`~sfapprox.sources.MIN_BLOCK` columns).

    Parameters
    ----------
    source : MatrixSource
        The matrix known by its columns.

    Returns
    -------
    int
        Bytes.
    """
    forming = source.formed_bytes + source.forming_bytes(min(MIN_BLOCK, source.n)) + LIBRARY_WORKING_SET
    return max(scoring_need(source.n, source.formed_bytes), forming)


def scoring_need(n: int, held: int, copy: int = 0) -> int:
    """What scoring every method of an ``n x n`` comparison holds: ``held`` (X) and ``copy`` (a sparse
    X's dense or CSC copy) besides the scoring's own arrays (:func:`~sfapprox.metrics.scoring_bytes`),
    and the libraries' working set.

    Parameters
    ----------
    n : int
        Order of the matrix.
    held : int
        Bytes of ``X`` as held.
    copy : int, default=0
        Bytes of a sparse ``X``'s dense or CSC copy.

    Returns
    -------
    int
        Bytes.
    """
    return held + copy + scoring_bytes(n) + LIBRARY_WORKING_SET


#: A matrix input: an array, a scipy sparse matrix, a torch tensor or a ``LinearOperator``
#: (:data:`~sfapprox._validation.MatrixArray`), or a source of its columns: what every estimator's ``fit``
#: and ``frobenius_error``, :func:`~sfapprox.sf.model.fit_sf` and :func:`~sfapprox.describe.describe` take
#: (:func:`~sfapprox.compare` a file or a LoadedMatrix too).
MatrixLike: TypeAlias = Union[MatrixArray, MatrixSource]
