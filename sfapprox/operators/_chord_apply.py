"""Applying a stack of SF factors to vectors and blocks, fast: the kernels behind ``ChordOperator``.

The fitting kernels (:mod:`sfapprox.sf._kernels`, :mod:`sfapprox.sf._butterfly`) are built for
``N x N`` blocks on torch; applying a fitted surrogate to one vector is a
different job: ``N K M`` multiply-adds, a few microseconds at ``N = 256``,
where any per-call overhead (torch dispatch, one Python call per factor)
dominates.  :class:`FactorStack` holds the values once, in the layout the
kernels read with unit stride, and applies the product (or its transpose)
with one call into compiled code.

Backends, chosen per call by :func:`backend` (measured in
``benchmarks/apply.py``):

``"numba"``
    Compiled loops (:mod:`._chord_apply_numba`), the default when numba imports,
    single-threaded: one vector 1.6-4.6x faster than the dense product at
    ``N = 1024`` and 12-57x at ``N = 4096``; 70-85 % of the one-core memory
    bound of reading the values at ``N = 65536`` (offset supports).
``"scipy"``
    One ``scipy.sparse.csr_array`` per factor, built on first use: the
    fallback when numba is missing or fails to compile (a
    ``RuntimeWarning`` says so once); 2-5x slower than numba on vectors,
    1.2-2.5x on 64-column blocks.

The backend can be forced with :data:`BACKEND` (or the environment variable
``SFAPPROX_APPLY_BACKEND``) -- tests run both.  On a GPU, use the torch
module from ``ChordOperator.to_torch`` instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from .._compiled import CompiledModule
from .._errors import ParameterError

__all__ = [
    "BACKEND",
    "BACKENDS",
    "CHUNK_COLUMNS",
    "PARALLEL_MIN_WORK",
    "THREADS",
    "FactorStack",
    "backend",
    "block_kernel_compiles",
    "compiles_after_stop",
    "block_kernel_phase",
    "warm_up_block_kernel",
    "offset_plan",
    "pack",
    "unpack_view",
    "vector_columns_max",
]

#: Backends known to :func:`backend`.
BACKENDS = ("auto", "numba", "scipy")

#: Which backend applies the factors: ``"auto"`` (numba when it imports and compiles, else
#: scipy), ``"numba"`` or ``"scipy"``.  Read on every call, so tests and users can switch it.
BACKEND: str = os.environ.get("SFAPPROX_APPLY_BACKEND", "auto")

_COMPILED = CompiledModule("sfapprox.operators._chord_apply_numba", "apply kernels",
                           "scipy sparse factors (correct, 1.2-5x slower)")


def _numba_kernels():
    """The compiled-kernel module, or False when numba is missing or broken (imported once per process)."""
    return _COMPILED.get()


def backend() -> str:
    """The backend the next product will use: ``"numba"`` or ``"scipy"``.

    Examples
    --------
    >>> backend() in ("numba", "scipy")
    True
    """
    choice = BACKEND
    if choice not in BACKENDS:
        raise ParameterError(f"unknown apply backend {choice!r}; choose one of {', '.join(BACKENDS)}")
    if choice == "scipy":
        return "scipy"
    if _numba_kernels():
        return "numba"
    if choice == "numba":
        raise ParameterError("the 'numba' apply backend was requested but numba is not available")
    return "scipy"


#: Most threads one block product may use (the kernels release the GIL, so Python threads run
#: them side by side on column chunks).  Default 1: on the shared 2-core machine these kernels
#: were measured on, a second thread made 64-column products 1.2-2.2x *slower* (the other core
#: was busy); on a dedicated multi-core machine, set it to the number of free cores (read when
#: the thread pool starts, on the first threaded product).
THREADS: int = int(os.environ.get("SFAPPROX_APPLY_THREADS", "1")) if os.environ.get(
    "SFAPPROX_APPLY_THREADS", "1").isdigit() else 1

#: Columns the block kernels take at a time: a wider block goes through them in chunks of this
#: width.  Their two ``(N, c)`` buffers then stay in cache; measured on 2 cores (one thread, ms
#: for all N columns at widths 32 / 64 / 128 / 256 / N): N = 1,024: 24 / 19 / 27 / 28 / 35;
#: 2,048: 111 / 92 / 86 / 111 / 229; 8,192 (s): 2.8 / 2.7 / 3.3 / - / 7.4.
CHUNK_COLUMNS = 64

#: Multiply-adds below which a product runs on the calling thread only: a single vector never
#: starts threads, and a block only when each thread gets at least a few milliseconds of work.
PARALLEL_MIN_WORK = 8_000_000

_POOL = None


def _block_kernel(butterfly: bool):
    """The compiled block kernel a product with a wide block runs (``to_dense``, a scoring's blocks)."""
    kernels = _numba_kernels()
    return kernels.butterfly_mat if butterfly else kernels.offset_mat


def _unready_block_kernel(butterfly: bool):
    """The block kernel where the numba backend runs and this process has neither compiled nor loaded it
    yet, else None (ready, or the scipy backend runs)."""
    try:
        if backend() != "numba":
            return None
    except ParameterError:
        return None
    kernel = _block_kernel(butterfly)
    return None if kernel.signatures else kernel  # (signatures: compiled, or loaded from the cache, here)


def block_kernel_phase(butterfly: bool = False) -> str | None:
    """What making the block kernel ready does, for a progress display: ``"compiling kernels (first
    run)"``, ``"loading compiled kernels"`` (numba's on-disk cache holds it), or None where it is
    ready in this process already or the scipy backend runs.

    A fit's scoring (above ``TORCH_DENSE_MAX_N``) was the first product with the apply kernels: on a
    fresh install it compiled them for about 9 s after the last iteration, under a bar that stood still.
    """
    from .._compiled import cached_signatures
    from .._progress import kernel_phase

    kernel = _unready_block_kernel(butterfly)
    return None if kernel is None else kernel_phase(bool(cached_signatures(kernel)))


def block_kernel_compiles(butterfly: bool = False) -> bool:
    """Whether the next wide product would first compile the block kernel: the numba backend runs, and
    the kernel is neither compiled by this process nor held by numba's on-disk cache (a fresh install,
    or a cache that cannot be read).

    A stopped fit's scoring asks this: it then runs on scipy's sparse factors
    (:meth:`FactorStack.uncompiled`) rather than keep the stop waiting for seconds of compiling.  It reads
    the kernel's signatures, not :func:`block_kernel_phase`'s display text, which a rewording would change.
    """
    from .._compiled import cached_signatures

    kernel = _unready_block_kernel(butterfly)
    return kernel is not None and not cached_signatures(kernel)


def compiles_after_stop(stopped: bool, butterfly: bool = False) -> bool:
    """Whether products after a stop should run on scipy's sparse factors (:meth:`FactorStack.uncompiled`):
    a stop came (``stopped``, or a stop signal received) and the next wide product would first compile the
    block kernel (:func:`block_kernel_compiles`: a fresh install).

    The scorings of stopped work ask this (a stopped SF fit's own, a comparison's of its row): compiling
    kept the stop waiting 9-19 s on 2 busy cores; scipy's products give the same errors within rounding.
    """
    from .._signals import stop_requested

    return (stopped or stop_requested()) and block_kernel_compiles(butterfly)


def warm_up_block_kernel(butterfly: bool = False) -> None:
    """Compile (or load from numba's cache) the block kernel on an ``8 x 8`` stack: the one
    specialisation any ``N``'s products use (float64 values and blocks)."""
    if butterfly:
        stack = FactorStack(pack(np.full((3, 8, 2), 0.5)), np.zeros(0, dtype=np.int64))
    else:
        stack = FactorStack(pack(np.full((2, 8, 4), 0.25)), np.array([0, 1, 2, 4]))
    # 8 columns: the block kernel (vector_columns_max(8) is 4); a failed compile falls back to scipy
    # with its one warning, as any product does (apply)
    stack.apply(np.eye(8))


def _threads_for(work: int, B: np.ndarray) -> int:
    """Threads for a product of ``work`` multiply-adds on ``B``: 1 for vectors and small blocks."""
    if B.ndim != 2 or THREADS <= 1 or work < PARALLEL_MIN_WORK:
        return 1
    # Each chunk stays at least 32 columns wide: narrower blocks cost more per column.
    return max(1, min(THREADS, B.shape[1] // 32))


def _pool():
    """The thread pool of large products (started on first use, ``THREADS`` workers)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="sfapprox-apply")
    return _POOL


def vector_columns_max(n: int) -> int:
    """Blocks narrower than this go through the vector kernel column by column (offset supports).

    The block kernel pays a fixed cost per row and offset that only wide
    blocks amortise; measured crossovers: 4 columns at N = 64, 8 at 256,
    16-32 at 1024 and 4096.

    Examples
    --------
    >>> vector_columns_max(64), vector_columns_max(256), vector_columns_max(4096)
    (4, 8, 24)
    """
    return min(24, max(4, n // 32))


def pack(values: np.ndarray, factor: float | None = None) -> np.ndarray:
    """Values ``(M, N, K)`` in the kernels' layout ``(M, K, N)`` (a C-contiguous float64 copy; none where
    ``values`` is already :func:`unpack_view` of such an array and no ``factor`` is given).

    With ``factor``, the values times it in the same pass: a fit's values rescaled into the result's
    units and packed wrote two ``M N K`` arrays where this writes one (at N = 100,000, 245 MB each,
    1.5-2.9 s on a busy machine for the two).  :func:`unpack_view` gives the ``(M, N, K)`` view of it
    back without copying.
    """
    if factor is None:
        return np.ascontiguousarray(np.asarray(values, dtype=np.float64).transpose(0, 2, 1))
    values = np.asarray(values)
    out = np.empty((values.shape[0], values.shape[2], values.shape[1]), dtype=np.float64)
    np.multiply(values.transpose(0, 2, 1), factor, out=out)
    return out


def unpack_view(packed: np.ndarray) -> np.ndarray:
    """The ``(M, N, K)`` view of packed values (shares memory with ``packed``)."""
    return packed.transpose(0, 2, 1)


def offset_plan(n: int, offsets: np.ndarray, transpose: bool) -> np.ndarray:
    """Row segments on which groups of up to four offsets are plain shifts (the vector kernel's plan).

    For a factor with values ``w`` (K, N), ``(W x)[i] = sum_k w[k, i] x[(i + d_k) mod N]``
    and ``(W^T x)[j] = sum_k w[k, j - d_k] x[j - d_k]`` (indices mod N).  Each
    offset wraps around at one row (``N - d`` forward, ``d`` transposed), so
    the wrap rows of four offsets cut ``[0, N)`` into at most five segments
    on which every term is a unit-stride slice.

    Returns
    -------
    ndarray of int64, shape (rows, 12)
        ``(k0, count, s0, s1, xs_0..xs_3, ws_0..ws_3)``: on rows ``s0:s1``
        add ``w[k0 + t, i + ws_t] * x[i + xs_t]`` for ``t < count``.

    Examples
    --------
    >>> offset_plan(8, np.array([0, 1, 2, 4]), transpose=False)[:, :8].tolist()
    [[0, 4, 0, 4, 0, 1, 2, 4], [0, 4, 4, 6, 0, 1, 2, -4], [0, 4, 6, 7, 0, 1, -6, -4], [0, 4, 7, 8, 0, -7, -6, -4]]
    """
    offsets = np.asarray(offsets, dtype=np.int64) % n
    rows = []
    for k0 in range(0, len(offsets), 4):
        group = offsets[k0 : k0 + 4]
        wraps = group if transpose else n - group  # forward: rows >= n - d wrap; transposed: rows < d
        cuts = np.unique(np.concatenate([[0, n], np.clip(wraps, 0, n)]))
        for s0, s1 in zip(cuts[:-1], cuts[1:]):
            row = np.zeros(12, dtype=np.int64)
            row[:4] = k0, len(group), s0, s1
            for t, d in enumerate(group):
                if transpose:
                    shift = -d if s0 >= d else n - d
                    row[4 + t] = row[8 + t] = shift
                else:
                    row[4 + t] = d if s1 <= n - d else d - n
            rows.append(row)
    # Tiling the rows (segments cut at multiples of 512..8192, so that a tile of the output stays
    # in L1 across groups) was measured 5-50 % slower at N = 16384 and 65536: one pass per group.
    return np.asarray(rows, dtype=np.int64).reshape(-1, 12)


class FactorStack:
    """A stack of SF factors held for applying: ``W_0 @ ... @ W_{M-1}`` and its transpose.

    Parameters
    ----------
    packed : ndarray of shape (M, K, N)
        Values in the kernels' layout (:func:`pack`); kept by reference.
    offsets : ndarray of int64, shape (K,)
        Offsets of an offset-based support (each in ``[0, N)``), or empty for
        the butterfly (``K = 2``).

    Examples
    --------
    >>> stack = FactorStack(pack(np.full((3, 8, 4), 0.25)), np.array([0, 1, 2, 4]))
    >>> stack.apply(np.ones(8)).tolist() == [1.0] * 8
    True
    """

    def __init__(self, packed: np.ndarray, offsets: np.ndarray):
        self.packed = packed
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.butterfly = self.offsets.size == 0
        self._plans = None  # the vector kernel's (forward, transposed) plans, made on first use
        self._csr = None  # (factors, transposed factors), built on first use by the scipy backend
        self._uncompiled = 0  # depth of uncompiled() blocks: while above 0, products use scipy

    @property
    def n(self) -> int:
        return self.packed.shape[2]

    @contextlib.contextmanager
    def uncompiled(self) -> Iterator[None]:
        """This stack's products inside the block run on the scipy backend, whatever :func:`backend` says.

        For work that must not wait for numba to compile (a fit's scoring after Ctrl-C or SIGTERM on a
        fresh install: the block kernel's compiling kept the stop waiting for 9-17 s); the numbers are
        the same within rounding (the sums run in another order).  Products by other threads inside the
        block (a scoring's column blocks) use scipy too.
        """
        self._uncompiled += 1
        try:
            yield
        finally:
            self._uncompiled -= 1

    def apply(self, B: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``A @ B`` (or ``A.T @ B``) for ``B`` of shape (N,) or (N, c); float64 result.

        Real inputs of any dtype are computed in float64; complex inputs as
        their real and imaginary parts.
        """
        B = np.asarray(B)
        if np.iscomplexobj(B):
            return self.apply(B.real, transpose) + 1j * self.apply(B.imag, transpose)
        B = np.ascontiguousarray(B, dtype=np.float64)
        if B.ndim == 2 and B.shape[1] == 1:  # the vector kernel is 2-4x faster than a 1-column block
            return self.apply(B[:, 0], transpose)[:, None]
        if not self._uncompiled and backend() == "numba":
            try:
                return self._apply_numba(B, transpose)
            except Exception as exc:  # a failed compile (broken llvmlite, ...) must not break apply
                _COMPILED.failed(exc)
        return self._apply_scipy(B, transpose)

    def _apply_numba(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        threads = _threads_for(self.packed.size * (B.shape[1] if B.ndim == 2 else 1), B)
        if threads > 1:
            # Column chunks, one per thread, each through all the factors: one join per product,
            # so a thread that the OS deschedules costs at most what one thread would have taken.
            bounds = np.linspace(0, B.shape[1], threads + 1).astype(int)
            chunks = [np.ascontiguousarray(B[:, a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
            parts = _pool().map(lambda chunk: self._apply_numba_serial(chunk, transpose), chunks)
            return np.concatenate(list(parts), axis=1)
        return self._apply_numba_serial(B, transpose)

    def _apply_numba_serial(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        kernels = _numba_kernels()
        if B.ndim == 2 and B.shape[1] > CHUNK_COLUMNS:
            # Wide blocks a chunk at a time: the kernels' two (N, c) buffers stay small enough for the
            # caches (the product of N = 8,192 applied to I: 2.7 s against 7.4 s in one block).
            out = np.empty_like(B)
            for j0 in range(0, B.shape[1], CHUNK_COLUMNS):
                chunk = np.ascontiguousarray(B[:, j0 : j0 + CHUNK_COLUMNS])
                out[:, j0 : j0 + CHUNK_COLUMNS] = self._apply_numba_serial(chunk, transpose)
            return out
        if not B.flags.writeable:
            # numba types a read-only array apart, and its np.empty_like then makes read-only results: a
            # read-only operand (np.load(..., mmap_mode="r"), a frozen array) gave a product that could
            # not be written to, and a hybrid adding its other parts into it raised "output array is
            # read-only".  A copy of at most CHUNK_COLUMNS columns, and no second compiled variant.
            B = B.copy()
        if self.butterfly:
            run = kernels.butterfly_vec if B.ndim == 1 else kernels.butterfly_mat
            return run(self.packed, B, transpose)
        if B.ndim == 2 and B.shape[1] >= vector_columns_max(self.n):
            return kernels.offset_mat(self.packed, self.offsets, B, transpose)
        if self._plans is None:
            self._plans = tuple(offset_plan(self.n, self.offsets, t) for t in (False, True))
        if B.ndim == 1:
            return kernels.offset_vec(self.packed, self._plans[transpose], B, transpose)
        return kernels.offset_cols(self.packed, self._plans[transpose], np.ascontiguousarray(B.T), transpose).T

    def _apply_scipy(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        if self._csr is None:
            factors = self.sparse_factors()
            self._csr = (factors, [f.T.tocsr() for f in factors])
        factors, transposed = self._csr
        out = B
        if transpose:  # A^T = W_{M-1}^T ... W_0^T: W_0^T is applied first
            for f in transposed:
                out = f @ out
        else:
            for f in reversed(factors):
                out = f @ out
        return np.array(out, dtype=np.float64, copy=out is B)

    def sparse_factors(self) -> list:
        """The factors as ``scipy.sparse.csr_array``, one stored entry per value (sorted columns)."""
        n_factors, k, n = self.packed.shape
        rows = np.arange(n, dtype=np.int64)
        indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
        out = []
        for m in range(n_factors):
            if self.butterfly:
                cols = np.stack([rows, rows ^ (1 << m)], axis=1)
            else:
                cols = (rows[:, None] + self.offsets[None, :]) % n
            vals = self.packed[m].T  # (N, K): row i's values in offset order
            order = np.argsort(cols, axis=1, kind="stable")
            cols = np.take_along_axis(cols, order, axis=1)
            vals = np.take_along_axis(vals, order, axis=1)
            index_dtype = np.int32 if n * k < 2**31 else np.int64
            out.append(
                sp.csr_array(
                    (np.ascontiguousarray(vals).ravel(), cols.ravel().astype(index_dtype), indptr.astype(index_dtype)),
                    shape=(n, n),
                )
            )
        return out
