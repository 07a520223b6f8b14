"""Tensor kernels of the Chord sparse factorization.

A factor ``W`` is stored as its values ``w`` of shape ``(N, K)``; row ``i``
holds ``W[i, (i + d_k) mod N] = w[i, k]``.  Applying it to a dense block is a
K-term sum of row-shifted copies, written as in-place ``addcmul_`` on two
slices per offset (the wrap-around split), so no ``N x K x N`` gather, no
dense mask and no ``N x N x N`` product is ever formed: each factor costs
``O(K * N^2)`` time and one ``N x N`` output buffer.

The stack of factors is one tensor ``ws`` of shape ``(M, N, K)``; the product
is ``W1 @ W2 @ ... @ WM`` (``ws[0]`` is applied last, on the left).  All
functions are pure: tensors in, tensors out.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence

import numpy as np
import torch

from .._compiled import CompiledModule, import_compiled
from .._threads import compiled_threads

__all__ = [
    "apply_factor",
    "apply_factor_t",
    "factor_grad",
    "factor_to_dense",
    "chord_product",
    "apply_product",
    "apply_product_t",
    "loss_and_grad",
    "loss_and_grad_numba",
    "loss_and_grad_triton",
]


def _split(n: int, d: int) -> tuple[slice, slice, slice, slice]:
    """Row slices for a cyclic shift by ``d``: rows ``[0, n-d)`` read ``[d, n)``, the rest wrap."""
    return slice(0, n - d), slice(d, n), slice(n - d, n), slice(0, d)


def apply_factor(
    w: torch.Tensor, offsets: Sequence[int], P: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Return ``W @ P``: ``out[i] = sum_k w[i, k] * P[(i + d_k) mod N]``.

    ``P`` has ``N`` rows and any number of columns; ``offsets[0]`` must be 0.
    ``out`` (same shape as ``P``, not overlapping it) is reused when given.
    """
    n = P.shape[0]
    out = torch.mul(P, w[:, :1], out=out) if out is not None else P * w[:, :1]
    for k in range(1, len(offsets)):
        head, head_src, tail, tail_src = _split(n, int(offsets[k]))
        wk = w[:, k : k + 1]
        out[head].addcmul_(wk[head], P[head_src])
        out[tail].addcmul_(wk[tail], P[tail_src])
    return out


def apply_factor_t(
    w: torch.Tensor, offsets: Sequence[int], G: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Return ``W.T @ G``: row ``i`` of ``G`` is sent, times ``w[i, k]``, to row ``(i + d_k) mod N``."""
    n = G.shape[0]
    out = torch.mul(G, w[:, :1], out=out) if out is not None else G * w[:, :1]
    for k in range(1, len(offsets)):
        head, head_dst, tail, tail_dst = _split(n, int(offsets[k]))
        wk = w[:, k : k + 1]
        out[head_dst].addcmul_(wk[head], G[head])
        out[tail_dst].addcmul_(wk[tail], G[tail])
    return out


#: Up to this many entries per operand, row dot products go through torch.linalg.vecdot,
#: which writes an elementwise-product temporary but runs 1.3-2x faster than einsum's
#: batched dots (measured at 306 x 306 and 2048 x 256); above it, einsum (no temporary).
ROWDOT_TEMP_MAX = 1 << 22


def _rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.numel() <= ROWDOT_TEMP_MAX:
        return torch.linalg.vecdot(a, b, dim=1)
    return torch.einsum("ij,ij->i", a, b)


def factor_grad(
    G: torch.Tensor, P: torch.Tensor, offsets: Sequence[int], acc: torch.Tensor | None = None
) -> torch.Tensor:
    """Gradient of ``<G, W @ P>`` with respect to the values ``w``.

    ``grad[i, k] = <G[i], P[(i + d_k) mod N]>``; added into ``acc`` when given
    (column panels add their share of the sum over columns).
    """
    n = G.shape[0]
    grad = torch.zeros((n, len(offsets)), dtype=G.dtype, device=G.device) if acc is None else acc
    grad[:, 0] += _rowdot(G, P)
    for k in range(1, len(offsets)):
        head, head_src, tail, tail_src = _split(n, int(offsets[k]))
        grad[head, k] += _rowdot(G[head], P[head_src])
        grad[tail, k] += _rowdot(G[tail], P[tail_src])
    return grad


def _column_index(n: int, offsets: Sequence[int], device: torch.device) -> torch.Tensor:
    rows = torch.arange(n, device=device)[:, None]
    return (rows + torch.as_tensor(list(offsets), device=device)[None, :]) % n


def factor_to_dense(w: torch.Tensor, offsets: Sequence[int]) -> torch.Tensor:
    """The factor as a dense ``N x N`` matrix (used for the rightmost factor and for tests)."""
    n = w.shape[0]
    dense = torch.zeros((n, n), dtype=w.dtype, device=w.device)
    # scatter_add_ rather than scatter_: with N < 2^(K-1) two offsets never coincide,
    # but summing keeps the meaning right for any offset list.
    dense.scatter_add_(1, _column_index(n, offsets, w.device), w)
    return dense


def chord_product(ws: torch.Tensor, offsets: Sequence[int]) -> torch.Tensor:
    """Dense product ``W1 @ ... @ WM`` of the factor stack ``ws`` (shape ``(M, N, K)``)."""
    P = factor_to_dense(ws[-1], offsets)
    for m in range(ws.shape[0] - 2, -1, -1):
        P = apply_factor(ws[m], offsets, P)
    return P


def scaled_target(dense: np.ndarray, scale: float, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """``dense / scale`` as a tensor of ``dtype`` on ``device``: a fit's target.

    Divided straight into an array of ``dtype``: ``torch.as_tensor(dense / scale, dtype=...)`` made a
    float64 quotient first, a second ``N x N`` array that a float32 fit never keeps (2 GiB and 5.8 s of
    fresh pages at N = 16,384 on a 2-core machine, for a target of 1 GiB).  numpy picks the division's
    loop by the operands, so each number is the same to the bit as before: the quotient in ``dense``'s
    precision, rounded once to ``dtype``.

    Examples
    --------
    >>> scaled_target(np.array([[1.0, 2.0], [3.0, 4.0]]), 2.0, torch.float32)
    tensor([[0.5000, 1.0000],
            [1.5000, 2.0000]])
    """
    target = torch.empty(dense.shape, dtype=dtype)  # on the host: the quotient is made there, as it was
    np.divide(dense, scale, out=target.numpy(), casting="same_kind")
    return target.to(device)


def apply_product(ws: torch.Tensor, offsets: Sequence[int], B: torch.Tensor) -> torch.Tensor:
    """``(W1 @ ... @ WM) @ B`` for a block ``B`` of shape ``(N, c)`` in ``O(M K N c)``."""
    out = B
    for m in range(ws.shape[0] - 1, -1, -1):
        out = apply_factor(ws[m], offsets, out)
    return out


def apply_product_t(ws: torch.Tensor, offsets: Sequence[int], B: torch.Tensor) -> torch.Tensor:
    """``(W1 @ ... @ WM).T @ B`` in ``O(M K N c)``."""
    out = B
    for m in range(ws.shape[0]):
        out = apply_factor_t(ws[m], offsets, out)
    return out


def loss_and_grad(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Objective ``0.5 * ||X - W1 ... WM||_F^2`` and its exact gradient.

    Forward: the partial products ``P_m = W_m ... W_M`` are built right to
    left and kept (``M - 1`` dense buffers).  Backward: with
    ``G_1 = P_1 - X`` and ``G_{m+1} = W_m^T G_m``, the gradient of factor
    ``m`` is ``factor_grad(G_m, P_{m+1})``; for the last factor
    ``P_{M+1} = I`` so it is a gather of ``G_M`` on the Chord positions.

    Returns
    -------
    loss : 0-d tensor
    grad : tensor shaped like ``ws``
    """
    return chain_loss_and_grad(
        ws, X, _column_index(ws.shape[1], offsets, ws.device),
        apply=lambda w, P: apply_factor(w, offsets, P),
        row_grad=lambda G, P: factor_grad(G, P, offsets),
        apply_t=lambda w, G, spare: apply_factor_t(w, offsets, G, out=spare),
    )


def chain_loss_and_grad(ws: torch.Tensor, X: torch.Tensor, positions: torch.Tensor, *, apply, row_grad, apply_t):
    """The passes of :func:`loss_and_grad`, with the three products given: what the torch and the
    GPU's fused kernels (:mod:`._kernels_triton`) share.

    ``positions[i, k]`` is the column of row ``i``'s value ``k``; ``apply(w, P)`` is ``W P``,
    ``row_grad(G, P)`` the gradient of ``<G, W P>`` in ``w`` (``(N, K)``), and
    ``apply_t(w, G, spare)`` is ``W^T G``, which may be written into ``spare`` (an ``N x N``
    buffer read for the last time).
    """
    n_factors = ws.shape[0]
    partial = torch.zeros(X.shape, dtype=ws.dtype, device=ws.device)
    partials = [partial.scatter_add_(1, positions, ws[-1])]  # partials[j] = P_{M-j}; P_M = W_M dense
    for m in range(n_factors - 2, -1, -1):
        partials.append(apply(ws[m], partials[-1]))
    G = partials.pop()  # P_1, reused in place as the residual
    G.sub_(X)
    flat = G.reshape(-1)
    loss = 0.5 * torch.dot(flat, flat)
    grad = torch.empty_like(ws)
    for m in range(n_factors - 1):
        right = partials.pop()  # P_{m+2} in 1-based terms: what W_{m+1} multiplies
        grad[m] = row_grad(G, right)
        G = apply_t(ws[m], G, right)  # into the buffer just read for the last time
    grad[-1] = torch.gather(G, 1, positions)
    return loss, grad


def loss_and_grad_dense(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same objective and gradient as :func:`loss_and_grad`, through dense factors.

    ``O(M N^3)`` work in about ``3M`` BLAS calls instead of ``O(M K N^2)`` in
    about ``3MK`` small kernels: for small ``N`` the per-call overhead
    dominates and this path is faster (the solver picks it up to
    ``DENSE_MAX_N``).  Never used for large ``N``.

    On the CPU the products run in numpy, on the same memory (no copies):
    numpy's per-call overhead is about half of torch's, and on the CPUs
    measured its OpenBLAS multiplies 64 x 64 blocks 1.6x faster than
    torch's MKL — 1.4 to 2.2x faster evaluations for N = 24..100
    (``benchmarks/results/speed-iteration.md``).
    """
    n_factors, n, _ = ws.shape
    plan = _dense_plan(n_factors, n, tuple(int(d) for d in offsets), str(ws.device))
    if ws.device.type == "cpu":
        loss, grad = _dense_numpy(ws.detach().numpy(), plan["flat_np"], X.detach().numpy())
        return torch.tensor(loss, dtype=ws.dtype), torch.from_numpy(grad)
    return _dense_torch(ws, plan["flat"], X)


def _dense_torch(ws: torch.Tensor, flat_index: torch.Tensor, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`loss_and_grad_dense`'s arithmetic in torch (the GPU path)."""
    n_factors, n, k = ws.shape
    dense = torch.zeros((n_factors, n * n), dtype=ws.dtype, device=ws.device)
    dense.index_copy_(1, flat_index, ws.reshape(n_factors, n * k))
    dense = dense.view(n_factors, n, n)
    # suffix[m] = D_{m+1} ... D_{M-1} (None for the last), built right to left
    suffix: list[torch.Tensor | None] = [None] * n_factors
    acc = dense[-1]
    for m in range(n_factors - 2, -1, -1):
        suffix[m] = acc
        acc = torch.mm(dense[m], acc)
    G = acc.sub_(X) if n_factors > 1 else acc - X
    flat = G.reshape(-1)
    loss = 0.5 * torch.dot(flat, flat)
    grads = torch.empty((n_factors, n, n), dtype=ws.dtype, device=ws.device)
    left_t = G  # (D_0 ... D_{m-1})^T G, updated left to right
    for m in range(n_factors):
        if suffix[m] is None:
            grads[m] = left_t
        else:
            torch.mm(left_t, suffix[m].T, out=grads[m])
        if m + 1 < n_factors:
            left_t = torch.mm(dense[m].T, left_t)
    grad = grads.view(n_factors, n * n).index_select(1, flat_index)
    return loss, grad.view(n_factors, n, k)


def _dense_numpy(ws: np.ndarray, flat: np.ndarray, X: np.ndarray) -> tuple[float, np.ndarray]:
    """:func:`loss_and_grad_dense`'s arithmetic on numpy arrays (the CPU path)."""
    n_factors, n, k = ws.shape
    dense = np.zeros((n_factors, n * n), dtype=ws.dtype)
    dense[:, flat] = ws.reshape(n_factors, n * k)
    dense = dense.reshape(n_factors, n, n)
    suffix: list[np.ndarray | None] = [None] * n_factors
    acc = dense[-1]
    for m in range(n_factors - 2, -1, -1):
        suffix[m] = acc
        acc = dense[m] @ acc
    G = acc - X
    loss = 0.5 * float(np.vdot(G, G))
    grads = np.empty((n_factors, n, n), dtype=ws.dtype)
    left_t = G
    for m in range(n_factors):
        if suffix[m] is None:
            grads[m] = left_t
        else:
            np.matmul(left_t, suffix[m].T, out=grads[m])
        if m + 1 < n_factors:
            left_t = dense[m].T @ left_t
    return loss, np.take(grads.reshape(n_factors, n * n), flat, axis=1).reshape(n_factors, n, k)


@functools.lru_cache(maxsize=32)
def _dense_plan(n_factors: int, n: int, offsets: tuple[int, ...], device: str) -> dict:
    """Flat positions ``i * N + (i + d_k) mod N`` of the Chord values in an ``N x N`` factor."""
    dev = torch.device(device)
    rows = torch.arange(n, device=dev)[:, None]
    cols = (rows + torch.as_tensor(offsets, device=dev)[None, :]) % n
    flat = (rows * n + cols).reshape(-1)
    return {"flat": flat, "flat_np": flat.cpu().numpy()}


#: Up to this N the dense-factor path is used: fewer, larger BLAS calls win there
#: (on one CPU thread the column panels catch up between N = 112 and 128, measured).
DENSE_MAX_N = 112
#: Column-block width of the CPU path for larger N (blocks stay in cache).
PANEL = 256
#: Up to this N the CPU path takes all columns as one block: a second, narrow block
#: (306 = 256 + 50) costs as many small kernel calls as a full one for little work.
SINGLE_PANEL_MAX_N = 448


def panel_width(n: int) -> int:
    """Column-block width of the CPU path: all of ``n`` up to :data:`SINGLE_PANEL_MAX_N`,
    else equal blocks of at most :data:`PANEL` columns (no narrow remainder block).

    Examples
    --------
    >>> panel_width(306), panel_width(600), panel_width(2048)
    (306, 200, 256)
    """
    if n <= SINGLE_PANEL_MAX_N:
        return n
    count = -(-n // PANEL)
    return -(-n // count)


#: Column-block width of the compiled kernel for larger N in float64; up to
#: :data:`NUMBA_SINGLE_BLOCK_MAX_N` it takes all columns at once (measured: 64 is the best width at
#: N = 512 and 1024, within 10 % of the best at 2048; one block is as fast or faster up to N = 306).
#: A block's rows are what stays in cache, so the width is one of bytes: float32 takes twice as many
#: columns (``benchmarks/results/panel_width.md``: 128 float32 columns took 0.61-0.95x the seconds of
#: 64 at N = 2,048-8,192 in five of six cells, 1.29x in one; float64 at 128 1.1-1.5x slower from
#: N = 4,096; a 300-s float32 fit at N = 4,096 made 507 iterations against 471).
NUMBA_PANEL = 64
NUMBA_SINGLE_BLOCK_MAX_N = 384


def numba_width(n: int, itemsize: int = 8) -> int:
    """Column-block width of :func:`loss_and_grad_numba` for an ``n x n`` fit in numbers of ``itemsize`` bytes.

    Examples
    --------
    >>> numba_width(64), numba_width(306), numba_width(2048), numba_width(2048, itemsize=4)
    (64, 306, 64, 128)
    """
    return n if n <= NUMBA_SINGLE_BLOCK_MAX_N else max(1, NUMBA_PANEL * 8 // itemsize)


_COMPILED = CompiledModule("sfapprox.sf._kernels_numba", "SF fitting kernel",
                           "the numpy/torch kernels (same results, 2-10x slower)")


def _numba_module():
    """The compiled-kernel module, or False when numba is missing or broken (imported once per process)."""
    return _COMPILED.get()


@functools.lru_cache(maxsize=32)
def _numba_plan(n: int, offsets: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``fwd[i, k] = (i + d_k) mod N`` and ``bwd[j, k] = (j - d_k) mod N`` (int64, C order)."""
    i = np.arange(n, dtype=np.int64)[:, None]
    offs = np.asarray(offsets, dtype=np.int64)[None, :]
    fwd, bwd = np.mod(i + offs, n), np.mod(i - offs, n)
    fwd.flags.writeable = bwd.flags.writeable = False
    return fwd, bwd


#: From this N the compiled kernel's column blocks are split into :data:`NUMBA_GROUPS` fixed groups
#: that run on up to as many threads (:func:`sfapprox._threads.compiled_threads`, which a fit sets
#: from the free cores).  The split is fixed by ``N`` alone, never by the thread count, so a fit gives the
#: same loss and gradients on one thread or four, to the bit (see ``_kernels_numba._residual``
#: for the one sum that depended on where memory lay); below this N an evaluation takes under ~20 ms and a
#: thread handoff would be a visible share of it.
NUMBA_PARALLEL_MIN_N = 512
#: Groups of column blocks from :data:`NUMBA_PARALLEL_MIN_N` on: each has its own gradient buffer
#: (``N K M`` numbers) and, while it runs, its own workspace.  Four keep two to four threads busy, and
#: on a busy machine a thread that is descheduled holds up at most a quarter of the work (the others
#: take the remaining groups).
NUMBA_GROUPS = 4


def numba_groups(n: int, itemsize: int = 8) -> int:
    """Groups of column blocks one compiled evaluation of an ``n x n`` fit (numbers of ``itemsize`` bytes)
    is split into.

    Examples
    --------
    >>> numba_groups(306), numba_groups(4096)
    (1, 4)
    """
    blocks = -(-n // numba_width(n, itemsize))
    return NUMBA_GROUPS if n >= NUMBA_PARALLEL_MIN_N and blocks >= NUMBA_GROUPS else 1


def _run_tasks(tasks: list, threads: int) -> list:
    """Results of the callables ``tasks`` (in order), computed on up to ``threads`` threads.

    The calling thread works too; every thread takes the next task not yet
    taken, so a thread the OS deschedules (a busy machine) does fewer of them.
    """
    threads = min(threads, len(tasks))
    if threads <= 1:
        return [task() for task in tasks]
    results: list = [None] * len(tasks)
    order = iter(range(len(tasks)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                i = next(order, None)
            if i is None:
                return
            results[i] = tasks[i]()

    # keyed by pid: a child forked by the caller's code (multiprocessing's fork start, Linux's default before
    # Python 3.14) inherits this cache but not the parent's threads, so it starts its own pool.  Batch
    # workers are spawned (datasets/batch.py `_run_processes`): they import this module afresh.
    pool = _pool(os.getpid())
    futures = [pool.submit(work) for _ in range(threads - 1)]
    try:
        work()
    finally:
        for future in futures:
            future.result()  # waits for every helper, and re-raises what one raised
    return results


@functools.lru_cache(maxsize=1)
def _pool(pid: int):
    """The helper threads of :func:`_run_tasks` in process ``pid`` (started when first needed, idle otherwise)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=NUMBA_GROUPS - 1, thread_name_prefix="sfapprox-kernel")


@functools.lru_cache(maxsize=32)
def _block_groups(n: int, width: int, groups: int) -> tuple[np.ndarray, ...]:
    """The starts of the ``width``-column blocks of an ``n x n`` evaluation, split into ``groups``
    consecutive groups (int64; made once: at N = 24 a call takes ~11 us, and making them each time
    added ~3 us, measured).  Left writeable: a read-only array would be another type to numba,
    and another compiled specialisation of the kernel."""
    return tuple(np.array_split(np.arange(0, n, width, dtype=np.int64), groups))


def _checked_plan(w: np.ndarray, rows: int, offsets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_numba_plan` for factors ``w`` and a target of ``rows`` rows, checked to agree with them."""
    fwd, bwd = _numba_plan(w.shape[1], tuple(offsets))  # ints or numpy ints: the same hash and key
    if fwd.shape[1] != w.shape[2] or rows != w.shape[1]:
        # the compiled loops index without bounds checks: a mismatch would read out of bounds (a crash)
        raise ValueError(f"the kernel got {fwd.shape[1]} offsets for factors of shape {w.shape} and a target "
                         f"of {rows} rows")
    return fwd, bwd


def _run_compiled(tasks: list) -> float | None:
    """The summed losses of compiled-kernel ``tasks`` run on up to :func:`~sfapprox._threads.compiled_threads`
    threads, or None when the kernel failed to compile (a broken llvmlite, an unwritable cache; said once)."""
    try:
        losses = _run_tasks(tasks, compiled_threads())
    except Exception as exc:
        _COMPILED.failed(exc)
        return None
    return float(sum(losses))


def _run_groups(module, w: np.ndarray, target: np.ndarray, offsets: Sequence[int], width: int,
                grads: Sequence[np.ndarray], groups: Sequence[np.ndarray], x0: int) -> float | None:
    """The compiled kernel on each group of block starts (``groups[g]`` into ``grads[g]``), on up to
    :func:`~sfapprox._threads.compiled_threads` threads: the summed loss, or None when the kernel
    failed to compile (said once)."""
    fwd, bwd = _checked_plan(w, target.shape[0], offsets)

    def task(g: int):
        return lambda: module.loss_and_grad(w, target, fwd, bwd, width, grads[g], groups[g], x0)

    return _run_compiled([task(g) for g in range(len(groups))])


def sketch_loss_and_grad(w: np.ndarray, offsets: Sequence[int], Y: np.ndarray, S: np.ndarray,
                         grads: Sequence[np.ndarray], width: int, columns: tuple[int, int] | None = None) -> float:
    """``0.5 ||Y_J - P S_J||_F^2`` and its gradient in ``grads[0]``: the loss of a fit to the sketch
    ``Y = X S`` of a target, with ``P = W_1 ... W_M`` the product of the factors ``w`` and ``J`` the
    sketch's columns ``columns`` (all of them by default).

    :func:`._kernels_numba.sketch_loss_and_grad` on ``S``'s column blocks of
    ``width``, split into ``len(grads)`` fixed groups (the same numbers on any
    number of threads, as :func:`block_loss_and_grad`); an evaluation costs
    about ``b / N`` of one on the whole matrix.  Without numba, torch's product
    and autograd give the same values.

    Parameters
    ----------
    w : numpy.ndarray, shape (M, N, K)
        Factor values, C-contiguous, in the kernel's dtype (``Y``'s and ``S``'s too).
    offsets : sequence of int
        The support's offsets ``d_k``.
    Y, S : numpy.ndarray, shape (N, b)
        The sketch and its test matrix, C-contiguous.
    grads : sequence of numpy.ndarray
        One gradient buffer of ``w``'s shape per group; ``grads[0]`` gets the sum.
    width : int
        Columns of ``S`` per block of the compiled kernel.
    columns : (int, int), optional
        ``(start, stop)``: the sketch's columns ``start .. stop - 1`` only (``stop - start`` a
        multiple of ``width``, or ``stop`` the last column: a block never crosses ``stop``).

    Returns
    -------
    float
        The loss.
    """
    if S.shape != Y.shape:
        raise ValueError(f"a sketch of shape {Y.shape} for a test matrix of shape {S.shape}")
    first, stop = (0, S.shape[1]) if columns is None else columns
    if not (0 <= first < stop <= S.shape[1] and ((stop - first) % width == 0 or stop == S.shape[1])):
        raise ValueError(f"columns {first}..{stop} of a sketch of {S.shape[1]} in blocks of {width}")
    module = _numba_module()
    if module:
        fwd, bwd = _checked_plan(w, Y.shape[0], offsets)
        groups = [g for g in np.array_split(np.arange(first, stop, width, dtype=np.int64), len(grads)) if g.size]

        def task(g: int):
            return lambda: module.sketch_loss_and_grad(w, Y, S, fwd, bwd, width, grads[g], groups[g])

        loss = _run_compiled([task(g) for g in range(len(groups))])
        if loss is not None:  # else a failed compile, said once: the torch path below
            for extra in grads[1:len(groups)]:
                grads[0] += extra
            return loss
    ws = torch.from_numpy(w).clone().requires_grad_(True)
    residual = apply_product(ws, [int(d) for d in offsets], torch.from_numpy(S[:, first:stop])) \
        - torch.from_numpy(Y[:, first:stop])
    loss = 0.5 * (residual.double() ** 2).sum()
    loss.backward()
    grads[0][...] = ws.grad.numpy()
    return float(loss.detach())


def loss_and_grad_numba(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same objective and gradient as :func:`loss_and_grad`, in one call into compiled code (CPU tensors).

    :mod:`._kernels_numba` works on the sparse structure (``O(M K N^2)``, each
    product a sum of whole shifted rows): no per-offset kernel launches, no
    dense factors.  From :data:`NUMBA_PARALLEL_MIN_N` the column blocks are
    split into :func:`numba_groups` fixed groups computed on up to
    :func:`~sfapprox._threads.compiled_threads` threads (1 outside a fit; a
    fit's :class:`~sfapprox._threads.AdaptiveThreads` sets it from the free
    cores) and added in a fixed order (the same
    numbers for any thread count).  When numba is missing or fails to compile
    (a ``RuntimeWarning`` says so once), the numpy/torch kernel that
    :func:`select_kernel` would choose without it computes the same values.
    """
    module = _numba_module()
    if module:
        n = ws.shape[1]
        w = np.ascontiguousarray(ws.detach().numpy())
        target = np.ascontiguousarray(X.detach().numpy())
        width = numba_width(n, w.itemsize)
        groups = _block_groups(n, width, numba_groups(n, w.itemsize))
        grads = [np.empty_like(w) for _ in groups]
        loss = _run_groups(module, w, target, offsets, width, grads, groups, 0)
        if loss is not None:
            grad = grads[0]
            for extra in grads[1:]:
                grad += extra
            # from_numpy: a third of torch.tensor's cost, which counts at tens of microseconds per call
            return torch.from_numpy(np.array(loss, dtype=w.dtype)), torch.from_numpy(grad)
    fallback = loss_and_grad_dense if ws.shape[1] <= DENSE_MAX_N else loss_and_grad_panels
    return fallback(ws, offsets, X)


class CompiledObjective:
    """The objective ``fun(x) -> (loss, grad)`` of an in-memory fit on the compiled kernel
    (:func:`loss_and_grad_numba`), for the flat values ``x`` of factors of ``shape``.

    :meth:`compiled_plan` tells the L-BFGS loop how to call the kernel itself,
    so that whole iterations run in compiled code (:func:`._solver_numba.iterate`).

    Parameters
    ----------
    shape : tuple of int
        ``(M, N, K)``, the factors' values.
    offsets : sequence of int
        The support's offsets.
    target : torch.Tensor
        The ``N x N`` target (CPU), in the fit's dtype.
    """

    def __init__(self, shape: tuple[int, int, int], offsets: Sequence[int], target: torch.Tensor):
        self.shape = tuple(int(v) for v in shape)
        self.offsets = tuple(int(v) for v in offsets)
        self.target = target

    def __call__(self, x: torch.Tensor) -> tuple[float, torch.Tensor]:
        loss, grad = loss_and_grad_numba(x.view(self.shape), self.offsets, self.target)
        return float(loss), grad.view(-1)

    def compiled_plan(self) -> tuple | None:
        """``(target, fwd, bwd, width, starts, shape)``, the arguments of the kernel's one call per
        evaluation, where an evaluation is one call on one thread (``N`` below
        :data:`NUMBA_PARALLEL_MIN_N`) and the kernel compiled; else None."""
        n = self.shape[1]
        target = self.target.detach().numpy()
        if not _numba_module() or numba_groups(n, target.itemsize) != 1 or not target.flags.c_contiguous:
            return None
        fwd, bwd = _numba_plan(n, self.offsets)
        if fwd.shape[1] != self.shape[2] or target.shape[0] != n:  # (see _run_groups)
            raise ValueError(f"the kernel got {fwd.shape[1]} offsets for factors of shape {self.shape}")
        width = numba_width(n, target.itemsize)
        return target, fwd, bwd, width, _block_groups(n, width, 1)[0], self.shape


def _cached_signatures(function) -> list | None:
    """The signatures numba's on-disk cache index lists for a compiled ``function`` (its entries' keys,
    argument types first), or None where numba is missing or its cache cannot be told: the one place
    that reads numba's cache internals (:func:`kernels_cached`, :func:`compiled_for`)."""
    if not _numba_module():
        return None
    from .._compiled import cached_signatures

    return cached_signatures(function)


def kernels_cached() -> bool:
    """Whether numba's on-disk cache holds the compiled kernel and L-BFGS iterations (their indexes
    list compiled code): a fit's warm-up then loads them (a busy machine can make that last over the
    half second after which a display says so) rather than compiling them.  False where numba is
    missing or its cache cannot be told (an entry can also be stale: the display then says
    "loading" while numba compiles, never the reverse on a warm install).

    An index file alone says nothing: importing :mod:`._solver_numba` writes the iterations' empty
    one (:func:`._solver_numba._drop_stale_iterations` flushes it on a fresh install), and every
    first fit after installing said "loading compiled kernels" while it compiled them for 10 s."""
    if not _numba_module():
        return False
    kernels, solver = (import_compiled(f"{__package__}.{name}") for name in ("_kernels_numba", "_solver_numba"))
    return all(_cached_signatures(d) for d in (kernels.loss_and_grad, solver.iterate))


def compiled_for(name: str, dtype, argument: int = 0, module: str = "_kernels_numba") -> bool:
    """Whether numba's on-disk cache holds the compiled function ``name`` of :mod:`._kernels_numba` (or of
    ``module``) for an array of ``dtype`` as its ``argument``-th argument: what :func:`kernels_cached` tells of
    the in-memory fit's kernel, for one specialisation (the fit from column blocks runs the kernel in float32,
    which an in-memory fit below ``N = 4,096`` never compiled).  False where numba is missing or its cache
    cannot be told."""
    if not _numba_module():
        return False
    signatures = _cached_signatures(getattr(import_compiled(f"{__package__}.{module}"), name))
    wanted = np.dtype(dtype).name
    return any(len(types) > argument and str(getattr(types[argument], "dtype", "")) == wanted
               for types in signatures or [])


def warm_up_numba(dtype: torch.dtype) -> None:
    """Compile (or load from numba's cache) :func:`loss_and_grad_numba`'s kernel for ``dtype``, on an
    ``8 x 8`` problem (the same compiled specialisation as any ``N``'s).

    A fit calls this before it times its first evaluation: that time says what
    every later one costs (the race's affordability, the scoring's reserve),
    and on a fresh install it held ~5 s of compiling, so the README's first fit
    skipped its race on its first run and ended elsewhere (rel 0.1949 against
    0.1808 on the next runs).  Loaded from the cache it costs milliseconds.
    """
    if _numba_module():
        n, offsets = 8, (0, 1, 2, 4)
        ws = torch.full((3, n, len(offsets)), 1.0 / len(offsets), dtype=dtype)
        loss_and_grad_numba(ws, offsets, torch.eye(n, dtype=dtype))


def block_loss_and_grad(
    w: np.ndarray, offsets: Sequence[int], block: np.ndarray, start: int, grads: Sequence[np.ndarray],
    width: int, *, add: bool = True,
) -> float:
    """``0.5 ||X[:, S] - P[:, S]||_F^2`` for the columns ``S = start .. start + c - 1`` of ``block``
    (``X[:, S]``, shape ``(N, c)``), and its gradient in ``grads[0]``.

    What a fit from a source's column blocks (:mod:`._columns`) takes one
    step on: the product's columns ``S`` cost ``O(M K N c)`` and the matrix is
    never formed.  The columns are cut into blocks of ``width`` and the blocks
    into ``len(grads)`` fixed groups, computed on up to
    :func:`~sfapprox._threads.compiled_threads` threads, each into its own
    gradient buffer, then added in a fixed order (the same numbers on any
    number of threads).  Without numba the torch product and autograd give
    the same values.

    Parameters
    ----------
    w : numpy.ndarray, shape (M, N, K)
        Factor values, float64, C-contiguous.
    offsets : sequence of int
        The support's offsets ``d_k``.
    block : numpy.ndarray, shape (N, c)
        The target's columns ``start .. start + c - 1``, float64, C-contiguous.
    start : int
        The matrix column of ``block``'s first column (``start + c <= N``).
    grads : sequence of numpy.ndarray
        One gradient buffer of ``w``'s shape (and dtype) per group; ``grads[0]`` gets the sum.
    width : int
        Columns per block of the compiled kernel.
    add : bool, default=True
        Add the groups' gradients into ``grads[0]``; False: each buffer keeps its
        group's part (zero for a group with no block), for a caller that adds them
        itself (:func:`._columns.fit_columns`'s Adam step does, in the same pass).

    Returns
    -------
    float
        The loss on these columns.
    """
    n, cols = block.shape
    module = _numba_module()
    if module:
        starts = np.arange(start, start + cols, width, dtype=np.int64)
        groups = [g for g in np.array_split(starts, len(grads)) if g.size]
        loss = _run_groups(module, w, block, offsets, width, grads, groups, start)
        if loss is not None:  # else a failed compile, said once: the torch path below
            if add:
                for extra in grads[1:len(groups)]:
                    grads[0] += extra
            else:
                for empty in grads[len(groups):]:
                    empty[...] = 0.0
            return loss
    ws = torch.from_numpy(w).clone().requires_grad_(True)
    eye = torch.zeros((n, cols), dtype=ws.dtype)
    eye[torch.arange(start, start + cols), torch.arange(cols)] = 1.0  # the identity's columns S
    residual = apply_product(ws, [int(d) for d in offsets], eye) - torch.from_numpy(block)
    loss = 0.5 * (residual * residual).sum()
    loss.backward()
    grads[0][...] = ws.grad.numpy()
    for empty in grads[1:] if not add else ():
        empty[...] = 0.0
    return float(loss.detach())


_TRITON = CompiledModule("sfapprox.sf._kernels_triton", "GPU (Triton) SF fitting kernel",
                         "the torch shift kernel (same results, several times slower on large N)",
                         remedy="Install a triton that matches the installed torch to restore it.")


def loss_and_grad_triton(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same objective and gradient as :func:`loss_and_grad`, each pass one fused kernel (GPU tensors).

    :mod:`._kernels_triton` reads each ``N x N`` operand of a pass once
    instead of once per offset.  When triton is missing or its kernels fail
    to compile (a ``RuntimeWarning`` says so once), :func:`loss_and_grad`
    computes the same values.  Running out of GPU memory is not such a
    failure: it propagates.
    """
    module = _TRITON.get()
    if module:
        try:
            return module.loss_and_grad(ws, offsets, X)
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # a compile or launch failure: the torch path for the rest of the process
            _TRITON.failed(exc)
    return loss_and_grad(ws, offsets, X)


def _triton_module():
    """The GPU kernel module, or False when triton is missing or broken (imported once per process)."""
    return _TRITON.get()


def select_kernel(n: int, device_type: str):
    """The loss+gradient routine for an ``n x n`` fit on a device, and its name.

    CPU: the compiled kernel (:func:`loss_and_grad_numba`) when numba is
    available — 5-15x faster than the torch and numpy paths at every N
    measured (24 to 2048, ``benchmarks/results/speed-iteration.md``);
    without numba, dense factors (numpy BLAS) for small N and column panels
    above.  GPU: dense factors for small N; above, the fused Triton kernels
    (:func:`loss_and_grad_triton`) where triton imports, else whole-matrix
    shifted adds (large kernels keep the GPU busy).
    """
    if device_type == "cpu" and _numba_module():
        return loss_and_grad_numba, "numba"
    if n <= DENSE_MAX_N:
        return loss_and_grad_dense, "dense"
    if device_type == "cpu":
        return loss_and_grad_panels, "panels"
    if _triton_module():
        return loss_and_grad_triton, "triton"
    return loss_and_grad, "shifts"


def operation_numbers(n: int, kind: str) -> int:
    """Numbers one operation of the kernel ``kind`` touches (a block, or a whole ``N x N`` matrix).

    This is what decides whether more than one CPU thread pays (:mod:`sfapprox._threads`).
    """
    if kind == "panels":
        return n * panel_width(n)
    if kind == "numba":  # a group of column blocks (one per thread), or one block below the groups' N
        groups = numba_groups(n)
        return n * n // groups if groups > 1 else n * numba_width(n)
    return n * n


def workspace_numbers(n: int, n_factors: int, kind: str, reach: int | None = None,
                      n_offsets: int | None = None, itemsize: int = 8) -> int:
    """Numbers of scratch memory a kernel needs for one evaluation (beyond X and the parameters).

    Block buffers, plus the row-dot temporary of at most :data:`ROWDOT_TEMP_MAX` numbers.
    The panels' ``M + 1`` buffers have ``N + reach`` rows, ``reach`` the largest
    offset (default: the reference Chord's, the largest power of two below ``N``).
    The compiled kernel's groups of column blocks each hold a gradient of
    ``N * n_offsets * M`` numbers (default: the most an offset support has).

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    n_factors : int
        Number of factors ``M``.
    kind : {"numba", "panels", "dense", "triton", "shifts"}
        The kernel (:func:`select_kernel`'s name).
    reach : int, optional
        The largest offset.
    n_offsets : int, optional
        Values per row and factor ``K``.
    itemsize : int, default=8
        Bytes of a number (the compiled kernel's blocks are as wide in bytes for any dtype).

    Returns
    -------
    int
        Numbers (times the dtype's size: bytes).
    """
    if kind == "panels":
        if reach is None:
            reach = 1 << max(0, (n - 1).bit_length() - 1) if n > 1 else 0
        width = panel_width(n)
        block = (n + reach) * width
        return (n_factors + 1) * block + 2 * n * n_factors + min(n * width, ROWDOT_TEMP_MAX)
    if kind == "dense":
        return (3 * n_factors + 2) * n * n
    if kind == "numba":
        # Per group of column blocks: M + 1 blocks and the transposed values (N K M) while it runs,
        # and a gradient buffer; one group's values and gradient count among the solver's vectors.
        groups = numba_groups(n, itemsize)
        if n_offsets is None:
            n_offsets = 2 * max(1, (n - 1).bit_length()) + 1  # the most any offset support has
        return (groups * (n_factors + 1) * n * numba_width(n, itemsize)
                + (groups - 1) * 2 * n * n_offsets * n_factors)
    return (n_factors + 2) * n * n + min(n * n, ROWDOT_TEMP_MAX)


@functools.lru_cache(maxsize=32)
def _plan(n: int, offsets: tuple[int, ...], width: int, device: str) -> dict:
    """Index tensors of one ``(N, offsets, block width, device)``, made once and reused by every call.

    ``cols[i, k] = (i + d_k) mod N`` (where row ``i`` of a factor holds its
    value ``k``), ``rows_t[j, k] = (j - d_k) mod N`` (the row whose value
    ``k`` lands in column ``j``: ``W^T``'s row ``j`` reads them), and, per
    column block, the (row, k, local column) triples of the rightmost factor.
    """
    dev = torch.device(device)
    offs = torch.as_tensor(offsets, device=dev)
    ks = torch.arange(len(offsets), device=dev)
    i = torch.arange(n, device=dev)[:, None]
    blocks = []
    for j0 in range(0, n, width):
        j1 = min(n, j0 + width)
        cols = torch.arange(j0, j1, device=dev)
        rows = (cols[None, :] - offs[:, None]) % n  # (K, width): who holds column j via value k
        local = torch.arange(j1 - j0, device=dev).expand(len(offsets), -1)
        blocks.append((j0, j1, rows, ks[:, None].expand(-1, j1 - j0), local))
    return {
        "cols": (i + offs) % n,
        "rows_t": (i - offs) % n,
        "ks": ks.expand(n, -1),
        "blocks": blocks,
        "reach": max(offsets),
    }


def loss_and_grad_panels(
    ws: torch.Tensor, offsets: Sequence[int], X: torch.Tensor, panel: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same objective and gradient as :func:`loss_and_grad`, one block of columns at a time.

    Columns of the product are independent: ``P[:, J] = W1 (W2 (... WM[:, J]))``
    and the residual, the backward pass and each factor's gradient (a sum
    over columns) split the same way.  Working on ``N x panel`` blocks keeps
    the ``M`` partial products of a block in cache instead of streaming
    ``M`` dense ``N x N`` buffers through memory, and cuts the workspace from
    ``(M + 2) N^2`` to about ``(M + 2) 2N * panel`` numbers — what lets large
    ``N`` fit.  The buffers are allocated once per call and reused by every block.

    Fewer, larger operations than the plain path (their count, not their
    arithmetic, is what costs at N of a few hundred): each buffer carries a
    copy of its first rows after its last (``P``, for ``W P``) or of its last
    rows before its first (``G``, for ``W^T G``), so the cyclic shift by any
    offset is one contiguous view — one ``addcmul`` and one row dot per
    offset instead of two — and ``W^T G`` is computed as a gather
    (``sum_k w[(j - d_k) mod N, k] G[(j - d_k) mod N]``) with the values
    ``w[(j - d_k) mod N, k]`` of all factors gathered once per call.
    """
    n_factors, n, n_offsets = ws.shape
    width = panel_width(n) if panel is None else min(panel, n)
    plan = _plan(n, tuple(int(d) for d in offsets), width, str(ws.device))
    reach = plan["reach"]
    offs = [int(d) for d in offsets]
    # w_t[m, j, k] = w_m[(j - d_k) mod N, k]: the values W_m^T's row j reads.
    w_t = ws[:, plan["rows_t"], plan["ks"]]
    # Forward buffers: n rows + `reach` wrapped rows after them; backward: `reach` before.
    fwd = [torch.empty((n + reach, width), dtype=ws.dtype, device=ws.device) for _ in range(max(1, n_factors - 1))]
    bwd = [torch.empty((reach + n, width), dtype=ws.dtype, device=ws.device) for _ in range(2)]
    grad_t = torch.zeros((n_factors, n_offsets, n), dtype=ws.dtype, device=ws.device)  # grad[m, i, k] at [m, k, i]
    last = torch.zeros((n, n_offsets), dtype=ws.dtype, device=ws.device)
    loss = torch.zeros((), dtype=ws.dtype, device=ws.device)
    for j0, j1, rows, ks, local in plan["blocks"]:
        c = j1 - j0
        # ---- forward: partial products P_M, ..., P_2 (each with its wrapped rows), then P_1 into G
        P = fwd[0][:, :c]
        P[:n].zero_()
        P[:n].index_put_((rows, local), ws[-1][rows, ks], accumulate=True)
        partials = [P]
        for i, m in enumerate(range(n_factors - 2, 0, -1)):
            _wrap_tail(partials[-1], n, reach)
            nxt = fwd[i + 1][:, :c]
            _apply_wrapped(ws[m], offs, partials[-1], nxt, n)
            partials.append(nxt)
        _wrap_tail(partials[-1], n, reach)
        Gb = bwd[0][:, :c]
        G = _apply_wrapped(ws[0], offs, partials[-1], Gb[reach:], n) if n_factors > 1 else partials[-1][:n]
        G.sub_(X[:, j0:j1])
        flat = G.reshape(-1)
        loss += 0.5 * torch.dot(flat, flat)
        if n_factors == 1:
            last.index_put_((rows, ks), G[rows, local], accumulate=True)
            continue
        # ---- backward: G_{m+1} = W_m^T G_m, and factor m's gradient <G_m, shifted P_{m+1}>
        spare = bwd[1][:, :c]
        for m in range(n_factors - 1):
            right = partials.pop()
            for k, d in enumerate(offs):
                grad_t[m, k] += _rowdot(G, right[d : d + n])
            _wrap_head(Gb, n, reach)
            G = _apply_t_wrapped(w_t[m], offs, Gb, spare[reach:], n, reach)
            Gb, spare = spare, Gb
        last.index_put_((rows, ks), G[rows, local], accumulate=True)
    grad = grad_t.transpose(1, 2).contiguous()
    grad[-1] = last
    return loss, grad


def _wrap_tail(P: torch.Tensor, n: int, reach: int) -> None:
    """Rows ``n .. n + reach`` of ``P`` become copies of its rows ``0 .. reach``."""
    if reach:
        P[n : n + reach].copy_(P[:reach])


def _wrap_head(G: torch.Tensor, n: int, reach: int) -> None:
    """Rows ``0 .. reach`` of ``G`` become copies of its last ``reach`` rows."""
    if reach:
        G[:reach].copy_(G[n : n + reach])


def _apply_wrapped(w: torch.Tensor, offsets: list[int], P: torch.Tensor, out: torch.Tensor, n: int) -> torch.Tensor:
    """``W @ P`` into ``out[:n]``, from ``P`` with its first rows repeated after row ``n``."""
    out = out[:n]
    torch.mul(P[:n], w[:, :1], out=out)
    for k in range(1, len(offsets)):
        d = offsets[k]
        out.addcmul_(w[:, k : k + 1], P[d : d + n])
    return out


def _apply_t_wrapped(
    w_t: torch.Tensor, offsets: list[int], G: torch.Tensor, out: torch.Tensor, n: int, reach: int
) -> torch.Tensor:
    """``W^T @ G`` into ``out[:n]``, from ``G`` with its last rows repeated before row ``reach``.

    Row ``j`` of ``W^T G`` is ``sum_k w_t[j, k] G[(j - d_k) mod N]``.
    """
    out = out[:n]
    torch.mul(G[reach : reach + n], w_t[:, :1], out=out)
    for k in range(1, len(offsets)):
        start = reach - offsets[k]
        out.addcmul_(w_t[:, k : k + 1], G[start : start + n])
    return out
