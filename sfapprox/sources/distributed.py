"""A source whose column passes run on an executor: a process pool here, or a Dask cluster's workers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._errors import ParameterError
from .._executors import Executor, check_executor, ordered_map, send_shared, worker_count
from ._base import MatrixSource, kept_stop

__all__ = ["DistributedSource"]

#: Columns below which a request stays local: a short request (SF's column fit asks 32 at a time)
#: costs more in round trips than it gains from other workers.
MIN_REMOTE_COLUMNS = 64


def _columns_of(source: MatrixSource, J: np.ndarray) -> np.ndarray:
    return source.columns(J)


def _kept_rows_of(source: MatrixSource, task: tuple[np.ndarray, int]) -> np.ndarray:
    J, step = task
    return source._kept_rows(J, step)


def _unwrap(source: MatrixSource) -> MatrixSource:
    return source


class DistributedSource(MatrixSource):
    """``source``, its column blocks, ``X @ B`` and ``X.T @ B`` computed on ``executor``.

    The same matrix with the same numbers: each pass is split into the column
    blocks the local pass would use, the blocks run on the executor's workers
    and their results are put together here in the local order (a product's
    partial sums are added in that order).  Methods that read a source in
    passes (randomized SVD's and RPCA's range finding, Nyström's columns, the
    top-s pass of ``sparse``) run there unchanged; a request of fewer than
    :data:`MIN_REMOTE_COLUMNS` columns stays local.  Sent to a worker, the
    source travels as the wrapped one (never with the executor).

    Each worker sizes its blocks by the same memory limit as this process
    (the wrapped source's ``max_memory``): a limit per process, so workers that
    share one machine (a local cluster) together use up to that many times it.
    Products are the same to the last bit where the workers' BLAS is this
    process's; columns computed in pieces may differ in the last bits from one
    request (a kernel's distances are blocked differently).

    Parameters
    ----------
    source : MatrixSource
        The matrix.
    executor : Executor
        A ``concurrent.futures`` pool or a ``dask.distributed.Client``.

    Raises
    ------
    ParameterError
        For a ``source`` that is no :class:`MatrixSource` (an array: ``as_source(X)`` makes one) or an
        ``executor`` without ``submit`` (``source.n``'s and ``executor.submit``'s raw AttributeErrors before).

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from sfapprox.sources import KernelMatrix
    >>> K = KernelMatrix(np.random.default_rng(0).standard_normal((300, 3)))
    >>> with ThreadPoolExecutor(2) as pool:
    ...     D = DistributedSource(K, pool)
    ...     bool(np.array_equal(D.matmat(np.ones(300)), K.matmat(np.ones(300))))
    True
    """

    def __init__(self, source: MatrixSource, executor: Executor) -> None:
        if not isinstance(source, MatrixSource):
            raise ParameterError(f"source must be a MatrixSource (KernelMatrix, AttentionMatrix, ...; an array or a "
                                 f"sparse matrix: sfapprox.sources.as_source(X)), got {type(source).__name__}")
        if executor is None:  # (compare's None is "no executor"; a DistributedSource is one)
            raise ParameterError("executor must be a concurrent.futures pool or a dask.distributed Client, got None")
        check_executor(executor)
        super().__init__(source.n, source.name)
        self.source = source
        self.executor = executor
        self.kind = source.kind
        self.notes = source.notes
        for attribute in ("symmetric", "nonnegative", "psd", "column_copies"):
            setattr(self, attribute, getattr(source, attribute))

    # The memory limit is the wrapped source's (a comparison sets it there or here).
    @property
    def max_memory(self) -> int | None:  # type: ignore[override]
        return self.source.max_memory

    @max_memory.setter
    def max_memory(self, value: int | None) -> None:
        if "source" in self.__dict__:
            self.source.max_memory = value
            self.__dict__.pop("_on_executor", None)  # the copy sent sizes its blocks by the old limit

    @property
    def held_bytes(self) -> int:  # type: ignore[override]
        """The wrapped source's (a matrix held in memory beside the passes)."""
        return self.source.held_bytes

    @held_bytes.setter
    def held_bytes(self, value: int) -> None:
        if "source" in self.__dict__:
            self.source.held_bytes = value
            self.__dict__.pop("_on_executor", None)

    def _sent_source(self) -> Any:
        """The wrapped source as the tasks take it: sent to a Dask cluster once for all this source's passes
        (a future kept here, released with it), not once a pass.  RPCA from columns makes ``2 + 2q``
        product passes a GoDec step, each of which sent the source again (:func:`~sfapprox._executors.share`)."""
        held = self.__dict__.get("_on_executor")
        if held is None:
            held = send_shared(self.executor, [self.source])[0]
            if held is not self.source:  # (a local pool takes the source itself, with each task)
                self._on_executor = held
        return held

    @property
    def sparse_matrix(self) -> Any:
        """The wrapped source's sparse ``X`` (None where it holds none): a selection among its non-zeros
        (Monarch's slabs, the exact scoring) is cheaper here than passes of dense blocks on the workers."""
        return self.source.sparse_matrix

    def limited(self, max_memory: int | str | None) -> "DistributedSource":
        """The same executor over a limited copy of the wrapped source (:meth:`MatrixSource.limited`).

        Parameters
        ----------
        max_memory : int, str or None
            Memory limit in bytes (or a size such as ``"4G"``); None: the default limit.

        Returns
        -------
        DistributedSource
            A new source on the same executor; ``self`` is unchanged.
        """
        return DistributedSource(self.source.limited(max_memory), self.executor)

    def block_width(self, max_memory: int | str | None = None, *, extra_columns: int = 0) -> int:
        """The wrapped source's blocks (:meth:`MatrixSource.block_width`): the same passes, split here.

        Parameters
        ----------
        max_memory : int, str or None, default=None
            Memory limit in bytes (or a size such as ``"4G"``); None: the source's own.
        extra_columns : int, default=0
            Columns of ``N`` numbers each pass holds besides its block.

        Returns
        -------
        int
            Columns per block.
        """
        return self.source.block_width(max_memory, extra_columns=extra_columns)

    def __reduce__(self):
        return (_unwrap, (self.source,))

    def describe(self) -> dict[str, Any]:
        return self.source.describe()

    @property
    def reading(self) -> dict | None:  # type: ignore[override]
        """The wrapped source's (what selected it in its file)."""
        return self.source.reading

    def diagonal(self) -> np.ndarray:
        return self.source.diagonal()

    def entries(self, rows, cols) -> np.ndarray:
        return self.source.entries(rows, cols)

    def _columns(self, J: np.ndarray) -> np.ndarray:
        if J.size < MIN_REMOTE_COLUMNS:
            return self.source.columns(J)
        return np.hstack(list(ordered_map(self.executor, _columns_of, self._pieces(J), (self._sent_source(),))))

    def _kept_rows(self, J: np.ndarray, step: int) -> np.ndarray:
        """A symmetric formation's kept rows (:meth:`MatrixSource._kept_rows`) as :meth:`_columns` splits
        ``J``: each piece's on a worker, which computes only those."""
        if J.size < MIN_REMOTE_COLUMNS:
            return self.source._kept_rows(J, step)
        pieces = self._pieces(J)
        out = np.empty((kept_stop(int(J[-1]), step, self.n), J.size))
        done = 0
        for kept in ordered_map(self.executor, _kept_rows_of, ((piece, step) for piece in pieces), (self._sent_source(),)):
            out[:kept.shape[0], done:done + kept.shape[1]] = kept  # (the rows below it are never read)
            done += kept.shape[1]
        return out

    def _pieces(self, J: np.ndarray) -> list[np.ndarray]:
        """``J`` split among the workers, no piece under half of :data:`MIN_REMOTE_COLUMNS`."""
        pieces = max(1, min(worker_count(self.executor), J.size // (MIN_REMOTE_COLUMNS // 2)))
        return np.array_split(J, pieces)

    def _local_products(self) -> bool:
        """The wrapped source has its own ``X @ B`` (a sparse matrix, a covariance's factored product):
        cheaper where the data is than by columns."""
        own = type(self.source)
        return own.matmat is not MatrixSource.matmat or own.rmatmat is not MatrixSource.rmatmat

    @property
    def products_by_columns(self) -> bool:
        """The wrapped source's (its own products, a mapped file's passes among them, run here)."""
        return self.source.products_by_columns

    @property
    def pass_source(self) -> MatrixSource:
        """The wrapped source where its products are its own (they run here, as :meth:`matmat`'s), else
        this one (its blocks on the executor)."""
        return self.source if self._local_products() else self

    def matmat(self, B: np.ndarray) -> np.ndarray:
        return self.source.matmat(B) if self._local_products() else super().matmat(B)

    def rmatmat(self, B: np.ndarray) -> np.ndarray:
        return self.source.rmatmat(B) if self._local_products() else super().rmatmat(B)

    def _map_blocks(self, fn, items, *shared) -> Iterator[Any]:
        """The pass's blocks on the executor: ``fn(wrapped source, *shared, item)``, results in order."""
        return ordered_map(self.executor, fn, items, (self._sent_source(), *shared))

    def map_ranges(self, fn: Callable, *args: Any, width: int | None = None) -> Iterator[Any]:
        """``fn(source, J, *args)`` for consecutive column ranges ``J`` (two per worker), on the executor.

        A pass that reduces its blocks to something small (the top-s pass: the
        ``k`` largest entries of each range) runs each range wholly on one
        worker and returns only its reduction.

        Parameters
        ----------
        fn : callable
            A module-level function of the wrapped source, a range's columns and ``args``.
        *args
            Further arguments (sent with each task).
        width : int or None, default=None
            The columns ``fn`` reads at a time: the ranges then start at multiples of it, so that
            their blocks are those of a local pass over ``0..N-1`` (a block's products, ``U @ Vt[:, J]``,
            can differ in the last bits with its width and its place in it: a comparison on a cluster
            gave RPCA other numbers than a local one).  A pass of fewer blocks than ranges uses fewer.

        Yields
        ------
        Any
            ``fn``'s results, in the ranges' order.
        """
        ranges = _ranges(self.n, 2 * worker_count(self.executor), width)
        return ordered_map(self.executor, _call_on_range, ((J, fn, args) for J in ranges), (self._sent_source(),))


def _ranges(n: int, pieces: int, width: int | None) -> list[np.ndarray]:
    """``0..n-1`` in at most ``pieces`` consecutive ranges, each starting at a multiple of ``width``.

    Examples
    --------
    >>> [(int(J[0]), int(J[-1])) for J in _ranges(10, 3, 4)]
    [(0, 3), (4, 7), (8, 9)]
    >>> [J.size for J in _ranges(10, 4, None)]
    [3, 3, 2, 2]
    """
    if not width:
        return np.array_split(np.arange(n), min(n, pieces))
    blocks = -(-n // width)
    return [np.arange(int(b[0]) * width, min(n, (int(b[-1]) + 1) * width))
            for b in np.array_split(np.arange(blocks), min(blocks, pieces))]


def _call_on_range(source: MatrixSource, task: tuple[np.ndarray, Callable, tuple]) -> Any:
    J, fn, args = task
    return fn(source, J, *args)
