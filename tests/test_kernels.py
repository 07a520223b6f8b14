import math
import os
import time

import numpy as np
import pytest
import torch

from sfapprox.chord import chord_offsets, default_n_factors, support_offsets
from sfapprox._threads import AdaptiveThreads, compiled_threads
from sfapprox.sf import _kernels as K


def _stack(n, seed=0, m=None):
    offs = chord_offsets(n).tolist()
    m = m or default_n_factors(n)
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, n, len(offs), dtype=torch.float64, generator=g), offs


def _dense_product(ws, offs):
    P = K.factor_to_dense(ws[0], offs)
    for m in range(1, ws.shape[0]):
        P = P @ K.factor_to_dense(ws[m], offs)
    return P


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 24, 33])
def test_product_matches_dense_factors(n):
    ws, offs = _stack(n)
    assert torch.allclose(K.chord_product(ws, offs), _dense_product(ws, offs), atol=1e-12)


def test_factor_to_dense_positions():
    w = torch.arange(1.0, 1 + 5 * 4, dtype=torch.float64).reshape(5, 4)
    D = K.factor_to_dense(w, [0, 1, 2, 4])
    assert D[4, 4] == w[4, 0] and D[4, 0] == w[4, 1] and D[4, 1] == w[4, 2] and D[4, 3] == w[4, 3]
    assert int((D != 0).sum()) == 20


@pytest.mark.parametrize("kernel", ["shifts", "numba"])
@pytest.mark.parametrize("n", [3, 6, 9])
def test_gradcheck(n, kernel):
    """The hand-written gradients (torch shifts, compiled) against finite differences (torch.autograd.gradcheck)."""
    if kernel == "numba" and not K._numba_module():
        pytest.skip("numba is not available")
    fn = K.loss_and_grad_numba if kernel == "numba" else K.loss_and_grad
    ws, offs = _stack(n, seed=1)
    X = torch.randn(n, n, dtype=torch.float64)

    class Loss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            loss, grad = fn(w, offs, X)
            ctx.save_for_backward(grad)
            return loss

        @staticmethod
        def backward(ctx, out):
            (grad,) = ctx.saved_tensors
            return out * grad

    assert torch.autograd.gradcheck(Loss.apply, (ws.clone().requires_grad_(True),), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("n", [2, 7, 24, 40, 64])
def test_gradient_matches_autograd_and_dense_path(n):
    ws, offs = _stack(n, seed=2)
    X = torch.randn(n, n, dtype=torch.float64)
    w = ws.clone().requires_grad_(True)
    P = K.chord_product(w, offs)
    ref = 0.5 * ((P - X) ** 2).sum()
    ref.backward()
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss_d, grad_d = K.loss_and_grad_dense(ws, offs, X)
    assert torch.allclose(loss, ref, rtol=1e-12)
    assert torch.allclose(grad, w.grad, rtol=1e-10, atol=1e-10)
    # The small-N dense path gives the same loss and gradient to 1e-10.
    assert torch.allclose(loss_d, loss, rtol=1e-12)
    assert torch.allclose(grad_d, grad, rtol=1e-10, atol=1e-10)


def test_transpose_and_block_products():
    n = 20
    ws, offs = _stack(n, seed=3)
    P = _dense_product(ws, offs)
    B = torch.randn(n, 4, dtype=torch.float64)
    assert torch.allclose(K.apply_product(ws, offs, B), P @ B)
    assert torch.allclose(K.apply_product_t(ws, offs, B), P.T @ B)


def test_no_dense_masks_in_large_apply():
    # A factor applied to a thin block costs O(K N c): works for N far beyond dense reach.
    n = 200_000
    offs = chord_offsets(n).tolist()
    w = torch.full((n, len(offs)), 1.0 / len(offs), dtype=torch.float64)
    y = K.apply_factor(w, offs, torch.ones(n, 1, dtype=torch.float64))
    assert torch.allclose(y, torch.ones_like(y))


@pytest.mark.parametrize("n,panel", [(2, 1), (5, 2), (24, 7), (100, 64), (300, 256), (257, 256), (600, None)])
def test_panel_path_matches_plain_path(n, panel):
    """Column panels give the same loss and gradient as whole-matrix passes (1e-10, float64)."""
    ws, offs = _stack(n, seed=4)
    X = torch.randn(n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss_p, grad_p = K.loss_and_grad_panels(ws, offs, X, panel=panel)
    assert torch.allclose(loss_p, loss, rtol=1e-12)
    assert torch.allclose(grad_p, grad, rtol=1e-10, atol=1e-10)


def test_panel_width_covers_n_in_equal_blocks():
    for n in range(1, 5000, 7):
        width = K.panel_width(n)
        count = -(-n // width)
        assert 1 <= width <= n
        if n <= K.SINGLE_PANEL_MAX_N:
            assert width == n
        else:
            assert width <= K.PANEL and n - (count - 1) * width > width - count  # last block nearly full


@pytest.mark.parametrize("n,m", [(2, 1), (24, 5), (64, 6), (33, 1)])
def test_dense_cpu_path_matches_the_torch_path(n, m):
    """The CPU's numpy arithmetic and the torch arithmetic (a GPU's) give the same loss and gradient."""
    ws, offs = _stack(n, seed=6, m=m)
    X = torch.randn(n, n, dtype=torch.float64)
    loss, grad = K.loss_and_grad_dense(ws, offs, X)
    plan = K._dense_plan(ws.shape[0], n, tuple(offs), "cpu")
    loss_t, grad_t = K._dense_torch(ws, plan["flat"], X)
    ref_loss, ref_grad = K.loss_and_grad(ws, offs, X)
    assert loss.dtype == grad.dtype == torch.float64 and grad.shape == ws.shape
    assert torch.allclose(loss, loss_t, rtol=1e-12) and torch.allclose(loss, ref_loss, rtol=1e-12)
    assert torch.allclose(grad, grad_t, rtol=1e-10, atol=1e-10)
    assert torch.allclose(grad, ref_grad, rtol=1e-10, atol=1e-10)


def test_dense_path_keeps_float32():
    ws, offs = _stack(16, seed=7)
    loss, grad = K.loss_and_grad_dense(ws.float(), offs, torch.randn(16, 16))
    assert loss.dtype == grad.dtype == torch.float32


@pytest.mark.parametrize("support", ["chord", "symmetric"])
@pytest.mark.parametrize("n,panel", [(40, None), (40, 16), (130, 50)])
def test_panels_with_any_offsets(support, n, panel):
    """The wrapped buffers handle offsets up to N - 1 (the symmetric support's -b^k mod N)."""
    from sfapprox.chord import support_offsets

    offs = support_offsets(n, support, 2).tolist()
    g = torch.Generator().manual_seed(8)
    ws = torch.randn(3, n, len(offs), dtype=torch.float64, generator=g)
    X = torch.randn(n, n, dtype=torch.float64, generator=g)
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss_p, grad_p = K.loss_and_grad_panels(ws, offs, X, panel=panel)
    assert torch.allclose(loss_p, loss, rtol=1e-12)
    assert torch.allclose(grad_p, grad, rtol=1e-10, atol=1e-10)


def test_kernel_selection(monkeypatch):
    # Without numba (or with a broken one): dense factors for small N, panels above, on the CPU.
    monkeypatch.setattr(K._COMPILED, "module", False)
    monkeypatch.setattr(K._TRITON, "module", False)  # and no triton: shifted adds on a GPU
    assert K.select_kernel(100, "cpu")[1] == "dense"
    assert K.select_kernel(K.DENSE_MAX_N + 1, "cpu")[1] == "panels"
    assert K.select_kernel(1000, "cpu")[1] == "panels"
    assert K.select_kernel(1000, "cuda")[1] == "shifts"
    assert K.select_kernel(64, "cuda")[1] == "dense"
    assert K.workspace_numbers(4096, 12, "panels") < K.workspace_numbers(4096, 12, "shifts") / 10
    # Buffers of N + reach rows: the symmetric support's offsets reach N - 1.
    assert K.workspace_numbers(4096, 12, "panels", reach=4095) > K.workspace_numbers(4096, 12, "panels")
    assert K.operation_numbers(4096, "panels") == 4096 * K.panel_width(4096)
    assert K.operation_numbers(64, "dense") == 64 * 64
    # four groups of column blocks from NUMBA_PARALLEL_MIN_N: each its blocks and (but the first) a gradient
    assert K.workspace_numbers(4096, 12, "numba", n_offsets=13) == 4 * 13 * 4096 * K.NUMBA_PANEL + 3 * 2 * 4096 * 13 * 12
    assert K.workspace_numbers(300, 9, "numba") == 10 * 300 * 300
    assert K.operation_numbers(64, "numba") == 64 * 64
    assert K.operation_numbers(4096, "numba") == 4096 * 4096 // 4


# ---------------------------------------------------------------- the compiled (numba) kernel
needs_numba = pytest.mark.skipif(not K._numba_module(), reason="numba is not available")


@needs_numba
def test_numba_kernel_is_chosen_on_the_cpu_only():
    for n in (2, 64, 113, 1000, 5000):
        assert K.select_kernel(n, "cpu") == (K.loss_and_grad_numba, "numba")
    assert K.select_kernel(1000, "cuda")[1] in ("triton", "shifts")


@needs_numba
@pytest.mark.parametrize("support", ["chord", "symmetric"])
@pytest.mark.parametrize("n,m", [(2, 1), (3, 2), (7, 3), (24, 5), (33, 1), (45, 6), (64, 6), (100, 4)])
def test_numba_kernel_matches_the_torch_kernel(support, n, m):
    """Same loss and gradient as loss_and_grad (float64, 1e-12): odd N, N not a power of two, M = 1."""
    from sfapprox.chord import support_offsets

    offs = support_offsets(n, support, 2).tolist()
    g = torch.Generator().manual_seed(n + m)
    ws = torch.randn(m, n, len(offs), dtype=torch.float64, generator=g)
    X = torch.randn(n, n, dtype=torch.float64, generator=g)
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss_n, grad_n = K.loss_and_grad_numba(ws, offs, X)
    assert loss_n.dtype == grad_n.dtype == torch.float64 and grad_n.shape == ws.shape
    assert torch.allclose(loss_n, loss, rtol=1e-12)
    assert torch.allclose(grad_n, grad, rtol=1e-11, atol=1e-11 * float(grad.abs().max()))


@needs_numba
@pytest.mark.parametrize("n,width", [(5, 1), (24, 7), (40, 16), (130, 64), (130, 50)])
def test_numba_column_blocks_match_one_block(n, width):
    """Blocks of columns (large N) sum to the same gradient as one block, narrow last block included."""
    from sfapprox.chord import support_offsets

    offs = support_offsets(n, "symmetric", 2).tolist()
    g = torch.Generator().manual_seed(9)
    ws = torch.randn(3, n, len(offs), dtype=torch.float64, generator=g)
    X = torch.randn(n, n, dtype=torch.float64, generator=g)
    fwd, bwd = K._numba_plan(n, tuple(offs))
    kern = K._numba_module().loss_and_grad
    grad_one, grad_blocks = np.empty(ws.shape), np.empty(ws.shape)
    loss_one = kern(ws.numpy(), X.numpy(), fwd, bwd, n, grad_one, np.zeros(1, dtype=np.int64), 0)
    loss_blocks = kern(ws.numpy(), X.numpy(), fwd, bwd, width, grad_blocks, np.arange(0, n, width), 0)
    assert loss_blocks == pytest.approx(loss_one, rel=1e-12)
    assert np.allclose(grad_blocks, grad_one, rtol=1e-11, atol=1e-11 * np.abs(grad_one).max())


@needs_numba
def test_numba_kernel_blocks_for_large_n(monkeypatch):
    """The blocked path as select_kernel runs it beyond NUMBA_SINGLE_BLOCK_MAX_N (made small here)."""
    monkeypatch.setattr(K, "NUMBA_SINGLE_BLOCK_MAX_N", 16)
    monkeypatch.setattr(K, "NUMBA_PANEL", 8)
    ws, offs = _stack(50, seed=10)
    # seeded, as the file's other targets are: drawn from torch's global stream, X depended on what the tests
    # before it had drawn, and one such draw in a full run put a gradient entry just past the tolerance
    X = torch.randn(50, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(10))
    assert K.numba_width(50) == 8
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss_n, grad_n = K.loss_and_grad_numba(ws, offs, X)
    assert torch.allclose(loss_n, loss, rtol=1e-12)
    assert torch.allclose(grad_n, grad, rtol=1e-11, atol=1e-11)


@needs_numba
def test_numba_blocks_are_as_wide_in_bytes_for_float32(monkeypatch):
    """float32 blocks take twice the columns (the same bytes in cache), the workspace the same bytes;
    the values are the float64 kernel's to float32 rounding."""
    assert K.numba_width(4096, itemsize=4) == 2 * K.numba_width(4096) == 2 * K.NUMBA_PANEL
    assert K.workspace_numbers(4096, 12, "numba", n_offsets=13, itemsize=4) * 4 == \
        K.workspace_numbers(4096, 12, "numba", n_offsets=13) * 8 - 3 * 2 * 4096 * 13 * 12 * 4
    monkeypatch.setattr(K, "NUMBA_SINGLE_BLOCK_MAX_N", 16)
    monkeypatch.setattr(K, "NUMBA_PANEL", 8)
    ws, offs = _stack(50, seed=12)
    X = torch.randn(50, 50, dtype=torch.float64)
    seen = []
    real = K._block_groups
    monkeypatch.setattr(K, "_block_groups", lambda n, width, groups: seen.append(width) or real(n, width, groups))
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss32, grad32 = K.loss_and_grad_numba(ws.float(), offs, X.float())
    assert seen == [16] and grad32.dtype == torch.float32
    assert torch.allclose(loss32.double(), loss, rtol=1e-5)
    assert torch.allclose(grad32.double(), grad, rtol=1e-4, atol=1e-4 * float(grad.abs().max()))


@needs_numba
def test_numba_groups_give_the_same_numbers_on_any_thread_count(monkeypatch):
    """Column blocks split into fixed groups (large N, made small here): the torch kernel's values,
    the loss and gradient bit for bit the same on one thread or three (the groups add up in a fixed
    order; see test_residual_sum_does_not_depend_on_where_memory_lies for the loss)."""
    import sfapprox._threads

    monkeypatch.setattr(sfapprox._threads, "available_cores", lambda: 8)  # three threads even on two cores
    monkeypatch.setattr(K, "NUMBA_SINGLE_BLOCK_MAX_N", 16)
    monkeypatch.setattr(K, "NUMBA_PANEL", 8)
    monkeypatch.setattr(K, "NUMBA_PARALLEL_MIN_N", 32)
    ws, offs = _stack(50, seed=11)
    X = torch.randn(50, 50, dtype=torch.float64)
    assert K.numba_groups(50) == K.NUMBA_GROUPS == 4 and K.numba_groups(31) == 1
    loss, grad = K.loss_and_grad(ws, offs, X)
    results = []
    for threads in (1, 3):
        with AdaptiveThreads(1e9, threads=threads, compiled=True):  # as a fit sets them
            assert compiled_threads() == threads
            results.append(K.loss_and_grad_numba(ws, offs, X))
    assert compiled_threads() == 1
    (loss1, grad1), (loss3, grad3) = results
    assert torch.equal(grad1, grad3)
    assert float(loss1) == float(loss3)
    assert torch.allclose(loss1, loss, rtol=1e-12)
    assert torch.allclose(grad1, grad, rtol=1e-11, atol=1e-11)


@needs_numba
def test_the_kernel_s_helpers_are_compiled_once_not_copied_into_each_call_site():
    """The kernels' helpers are plain compiled functions, each taking every row of a product: numba's IR
    inlining (``inline="always"``) copied and typed each again at every call site (a fresh install's
    kernel: 9.4 M -> 6.1 M Python calls of numba's compiling it), and a helper called once per row that
    LLVM does not inline costs a call per row."""
    import dis

    from sfapprox.sf import _kernels_numba as KN

    for name in ("_combine", "_row_dots", "_residual", "_transposed"):
        assert getattr(KN, name).targetoptions.get("inline", "never") == "never", name
    for kernel in (KN.loss_and_grad, KN.sketch_loss_and_grad):
        called = {i.argval for i in dis.get_instructions(kernel.py_func) if i.opname == "LOAD_GLOBAL"}
        assert {"_combine", "_row_dots", "_residual", "_transposed"} <= called
    assert KN._combine.py_func.__code__.co_varnames[:5] == ("out", "coef", "rows", "src", "c")  # every row
    assert KN._row_dots.py_func.__code__.co_varnames[:5] == ("grad", "G", "rows", "P", "c")


@needs_numba
def test_residual_sum_does_not_depend_on_where_memory_lies():
    """The kernel's residual row and its sum of squares, with the workspace row at every place around
    the target (as malloc may put it, another place on a helper thread): the same sum to the bit.
    Summed in the loop that stored the residual, 2 of these placements gave another sum (a vectorised
    loop behind a run-time overlap check, or the scalar one): the loss of a fit on two threads
    differed from one thread's by 1-2 ulp about 1 call in 50, and the fit drifted (a CI failure)."""
    from sfapprox.sf._kernels_numba import _residual

    rng = np.random.default_rng(0)
    n, width, col = 64, 8, 8
    g, x = rng.standard_normal((n, width)), rng.standard_normal((n, n))
    want = _residual(g.copy(), x, col, width)
    buf = np.zeros(6 * n * n)
    target = buf[2 * n * n:3 * n * n].reshape(n, n)
    target[:] = x
    placements = [lo for lo in range(n * n - n * width - 64, 4 * n * n + 64, 7)
                  if not (lo < 3 * n * n and lo + n * width > 2 * n * n)]  # never overlapping the target
    got = set()
    for lo in placements:
        work = buf[lo:lo + n * width].reshape(n, width)
        work[:] = g
        got.add(_residual(work, target, col, width))
    assert got == {want} and len(placements) > 500


@needs_numba
def test_numba_kernel_on_some_column_blocks():
    """Given some blocks' starts, the kernel's loss is that of those columns alone, and disjoint sets add up."""
    n, width = 40, 8
    ws, offs = _stack(n, seed=16)
    X = torch.randn(n, n, dtype=torch.float64)
    fwd, bwd = K._numba_plan(n, tuple(offs))
    kern = K._numba_module().loss_and_grad
    some, rest, whole = (np.empty(ws.shape) for _ in range(3))
    loss_some = kern(ws.numpy(), X.numpy(), fwd, bwd, width, some, np.array([8, 24]), 0)
    loss_rest = kern(ws.numpy(), X.numpy(), fwd, bwd, width, rest, np.array([0, 16, 32]), 0)
    loss_whole = kern(ws.numpy(), X.numpy(), fwd, bwd, width, whole, np.arange(0, n, width), 0)
    columns = np.r_[8:16, 24:32]
    residual = _dense_product(ws, offs)[:, columns] - X[:, columns]
    assert loss_some == pytest.approx(0.5 * float((residual**2).sum()), rel=1e-12)
    assert loss_some + loss_rest == pytest.approx(loss_whole, rel=1e-12)
    assert np.allclose(some + rest, whole, rtol=1e-11, atol=1e-11)


def test_run_tasks_keeps_order_and_reraises():
    assert K._run_tasks([lambda i=i: i * i for i in range(7)], threads=3) == [i * i for i in range(7)]

    def boom():
        raise ValueError("in a helper")

    with pytest.raises(ValueError, match="in a helper"):
        K._run_tasks([lambda: 1, boom, lambda: 2, lambda: 3], threads=2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
# the fork of a process running threads is the case under test (Python 3.12+ warns of it); the child is
# bounded below (30 s), so a lock it inherited held ends in a failure, not a hang
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_run_tasks_in_a_forked_child():
    """A child forked after the helper threads started (a batch worker) gets helpers of its own, not a hang."""
    K._run_tasks([lambda: 1, lambda: 2], threads=2)  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the tasks ran on threads
        ok = False
        try:
            ok = K._run_tasks([lambda i=i: i for i in range(4)], threads=2) == [0, 1, 2, 3]
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's tasks did not finish in 30 s")


@needs_numba
def test_numba_kernel_float32_and_strided_input():
    ws, offs = _stack(20, seed=12)
    X = torch.randn(40, 40, dtype=torch.float64)[::2, ::2]  # not contiguous
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss32, grad32 = K.loss_and_grad_numba(ws.float(), offs, X.float())
    assert loss32.dtype == grad32.dtype == torch.float32
    assert torch.allclose(loss32.double(), loss, rtol=1e-5)
    assert torch.allclose(grad32.double(), grad, rtol=1e-4, atol=1e-4 * float(grad.abs().max()))
    loss64, _ = K.loss_and_grad_numba(ws, offs, X)
    assert torch.allclose(loss64, loss, rtol=1e-12)


@needs_numba
def test_numba_kernel_returns_non_finite_loss():
    ws, offs = _stack(8, seed=13)
    ws[1, 3, 2] = float("nan")
    loss, _ = K.loss_and_grad_numba(ws, offs, torch.zeros(8, 8, dtype=torch.float64))
    assert not torch.isfinite(loss)


def test_numba_kernel_falls_back_when_numba_is_missing(monkeypatch):
    monkeypatch.setattr(K._COMPILED, "module", False)
    ws, offs = _stack(24, seed=14)
    X = torch.randn(24, 24, dtype=torch.float64)
    loss, grad = K.loss_and_grad(ws, offs, X)
    loss_n, grad_n = K.loss_and_grad_numba(ws, offs, X)
    assert torch.allclose(loss_n, loss, rtol=1e-12) and torch.allclose(grad_n, grad, rtol=1e-10, atol=1e-10)


def test_numba_kernel_falls_back_when_it_fails_to_compile(monkeypatch):
    """A failed compile warns once and the numpy/torch kernels take over (same values)."""

    class Broken:
        @staticmethod
        def loss_and_grad(*args):
            raise RuntimeError("LLVM ERROR: simulated")

    monkeypatch.setattr(K._COMPILED, "module", Broken)
    ws, offs = _stack(130, seed=15, m=3)
    X = torch.randn(130, 130, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="compiled SF fitting kernel failed"):
        loss_n, grad_n = K.loss_and_grad_numba(ws, offs, X)
    assert K._COMPILED.module is False and K.select_kernel(130, "cpu")[1] == "panels"
    loss, grad = K.loss_and_grad(ws, offs, X)
    assert torch.allclose(loss_n, loss, rtol=1e-12) and torch.allclose(grad_n, grad, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("compiled", [True, False])
def test_column_blocks_of_a_target_add_up_to_the_whole_loss_and_gradient(compiled, monkeypatch):
    """block_loss_and_grad on a target's column blocks (uneven, not aligned to the width): their
    losses and gradients add up to the whole matrix's (compiled kernel, and the torch fallback)."""
    n = 40
    offs = support_offsets(n, "chord", 2)
    rng = np.random.default_rng(4)
    w = rng.standard_normal((4, n, len(offs))) / len(offs)
    X = rng.standard_normal((n, n))
    whole_loss, whole_grad = K.loss_and_grad(torch.from_numpy(w), offs.tolist(), torch.from_numpy(X))
    if not compiled:
        monkeypatch.setattr(K, "_numba_module", lambda: False)
    total, grad = 0.0, np.zeros_like(w)
    for a, b in [(0, 7), (7, 30), (30, 31), (31, 40)]:
        grads = [np.full_like(w, np.nan) for _ in range(3)]
        total += K.block_loss_and_grad(w, offs, np.ascontiguousarray(X[:, a:b]), a, grads, 8)
        grad += grads[0]
    assert total == pytest.approx(float(whole_loss), rel=1e-12)
    np.testing.assert_allclose(grad, whole_grad.numpy(), rtol=1e-10, atol=1e-12)


def test_column_block_groups_kept_apart_and_in_float32():
    n = 40
    offs = support_offsets(n, "chord", 2)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, n, len(offs))) / len(offs)
    block = np.ascontiguousarray(rng.standard_normal((n, 20)))
    added = [np.empty_like(w) for _ in range(4)]
    loss = K.block_loss_and_grad(w, offs, block, 10, added, 4)
    apart = [np.full_like(w, np.nan) for _ in range(8)]  # more groups than the 5 blocks: the rest zero
    assert K.block_loss_and_grad(w, offs, block, 10, apart, 4, add=False) == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(sum(apart), added[0], rtol=1e-10, atol=1e-13)
    low = [np.empty(w.shape, np.float32) for _ in range(2)]
    loss32 = K.block_loss_and_grad(w.astype(np.float32), offs, block.astype(np.float32), 10, low, 4)
    assert loss32 == pytest.approx(loss, rel=1e-4)
    np.testing.assert_allclose(low[0], added[0], rtol=1e-3, atol=1e-4 * np.abs(added[0]).max())


def test_an_interrupt_in_the_compiled_kernel_is_raised_and_the_kernel_kept():
    from sfapprox._compiled import CompiledModule

    module = CompiledModule("json", "test module", "nothing")
    assert module.get()
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as cause:
        wrapped = SystemError("returned a result with an exception set")
        wrapped.__cause__ = cause
    with pytest.raises(KeyboardInterrupt):
        module.failed(wrapped)
    assert module.get()  # not given up for the process


def test_warm_up_compiles_the_compiled_iterations_a_fit_runs():
    """After warm_up_numba, a float64 fit compiles nothing more (no specialisation of the kernel, the
    compiled iterations or what they call): on a fresh install the compiling happens before the first
    evaluation is timed, not inside a race's round."""
    if not K._numba_module():
        pytest.skip("needs numba")
    from sfapprox import ChordSF
    from sfapprox.sf import _kernels_numba, _solver_numba

    def compiled() -> dict:
        return {f"{mod.__name__}.{name}": len(getattr(mod, name).signatures)
                for mod in (_kernels_numba, _solver_numba) for name in dir(mod)
                if hasattr(getattr(mod, name), "signatures")}

    from sfapprox.sf import _solver

    K.warm_up_numba(torch.float64)
    offsets = chord_offsets(40)
    fits = K.CompiledObjective((6, 40, len(offsets)), offsets, torch.zeros(40, 40, dtype=torch.float64))
    _solver.warm_up(torch.float64, fits)  # (both, as a fit of this size calls them)
    before = compiled()
    assert before["sfapprox.sf._solver_numba.iterate"] and before["sfapprox.sf._kernels_numba.loss_and_grad"]
    X = np.random.default_rng(0).random((40, 40))
    sf = ChordSF(max_iter=80, time_limit=None, device="cpu", random_state=1).fit(X)
    assert sf.kernel_ == "numba" and compiled() == before


def test_compiled_plan_only_where_one_call_is_an_evaluation():
    if not K._numba_module():
        pytest.skip("needs numba")
    offsets = chord_offsets(64)
    small = K.CompiledObjective((6, 64, len(offsets)), offsets, torch.rand(64, 64, dtype=torch.float64))
    target, fwd, bwd, width, starts, shape = small.compiled_plan()
    assert shape == (6, 64, len(offsets)) and target.shape == (64, 64) and list(starts) == [0]
    n = K.NUMBA_PARALLEL_MIN_N * 2  # evaluated in groups, on threads: the Python loop
    big = chord_offsets(n)
    assert K.CompiledObjective((10, n, len(big)), big, torch.zeros(n, n, dtype=torch.float64)).compiled_plan() is None


def test_the_compiled_kernel_refuses_offsets_that_do_not_match_the_factors():
    """A hybrid once handed the butterfly's empty offset list with factors of 2 values per row to the
    compiled kernel, which indexes without bounds checks: a segmentation fault. Refused in Python now."""
    import torch

    from sfapprox.sf import _kernels

    ws = torch.full((4, 16, 2), 0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match="0 offsets for factors of shape"):
        _kernels.loss_and_grad_numba(ws, [], torch.eye(16, dtype=torch.float64))


@pytest.mark.parametrize("source", [np.float64, np.float32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaled_target_is_the_quotient_to_the_bit_without_a_float64_copy(source, dtype):
    """A fit's target ``X / s`` in its dtype: the same numbers as ``torch.as_tensor(X / s, dtype=...)``,
    which made a float64 quotient first, an ``N x N`` array a float32 fit never keeps (2 GiB and
    seconds of fresh pages at N = 16,384)."""
    import tracemalloc

    X = np.random.default_rng(0).standard_normal((300, 300)).astype(source) * 7.0
    X = np.asfortranarray(X) if source is np.float32 else X  # any layout in, a C-ordered target out
    expected = torch.as_tensor(X / 3.3, dtype=dtype)
    tracemalloc.start()
    try:
        got = K.scaled_target(X, 3.3, dtype)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.dtype == dtype and got.is_contiguous() and torch.equal(got, expected)
    assert peak < X.size * 8 // 4  # no N x N numpy array of its own (torch's target is not traced)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("n, b, width", [(40, 23, 8), (37, 5, 16), (2, 3, 1)])
def test_sketch_loss_and_gradient_are_those_of_the_product_applied_to_the_test_matrix(compiled, n, b, width, monkeypatch):
    """sketch_loss_and_grad: 0.5 ||Y - P S||^2 and its gradient, as torch's product and autograd give them
    (compiled, in groups of blocks not aligned to b, and the torch fallback); every factor, the last
    one too, gets a gradient."""
    offs = support_offsets(n, "chord", 2)
    n_factors = max(1, math.ceil(math.log2(n)))
    rng = np.random.default_rng(n + b)
    w = rng.standard_normal((n_factors, n, len(offs))) / len(offs)
    S, Y = rng.standard_normal((n, b)), rng.standard_normal((n, b))
    ws = torch.from_numpy(w.copy()).requires_grad_(True)
    residual = K.apply_product(ws, offs.tolist(), torch.from_numpy(S)) - torch.from_numpy(Y)
    expected = 0.5 * (residual**2).sum()
    expected.backward()
    if not compiled:
        monkeypatch.setattr(K, "_numba_module", lambda: False)
    grads = [np.full_like(w, np.nan) for _ in range(3)]
    loss = K.sketch_loss_and_grad(w, offs, Y, S, grads, width)
    assert loss == pytest.approx(float(expected.detach()), rel=1e-12)
    np.testing.assert_allclose(grads[0], ws.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert np.abs(grads[0][-1]).max() > 0


def test_sketch_loss_in_float32_and_a_mismatched_test_matrix_refused():
    n, b = 64, 20
    offs = support_offsets(n, "chord", 2)
    rng = np.random.default_rng(9)
    w = rng.standard_normal((6, n, len(offs))) / len(offs)
    S, Y = rng.standard_normal((n, b)), rng.standard_normal((n, b))
    grads = [np.empty_like(w)]
    loss = K.sketch_loss_and_grad(w, offs, Y, S, grads, 8)
    low = [np.empty(w.shape, np.float32) for _ in range(2)]
    loss32 = K.sketch_loss_and_grad(w.astype(np.float32), offs, Y.astype(np.float32), S.astype(np.float32), low, 8)
    assert loss32 == pytest.approx(loss, rel=1e-4)
    np.testing.assert_allclose(low[0], grads[0], rtol=1e-3, atol=1e-4 * np.abs(grads[0]).max())
    with pytest.raises(ValueError, match="test matrix"):
        K.sketch_loss_and_grad(w, offs, Y, S[:, :-1].copy(), grads, 8)
    with pytest.raises(ValueError, match="offsets"):
        K.sketch_loss_and_grad(w, offs[:-1], Y, S, grads, 8)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_sketch_loss_over_some_of_its_columns_is_that_of_those_columns(compiled, monkeypatch):
    """columns=(a, b): the loss and gradient of the sketch's columns a..b-1 alone (a fit's part and a
    held-out part of one sketch); ranges that a block would cross are refused."""
    n = 40
    offs = support_offsets(n, "chord", 2)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, n, len(offs))) / len(offs)
    S, Y = rng.standard_normal((n, 28)), rng.standard_normal((n, 28))
    if not compiled:
        monkeypatch.setattr(K, "_numba_module", lambda: False)
    whole = [np.empty_like(w)]
    alone = [np.empty_like(w), np.empty_like(w)]
    for first, stop in [(0, 16), (16, 28), (8, 24)]:
        loss = K.sketch_loss_and_grad(w, offs, Y, S, alone, 8, columns=(first, stop))
        expected = K.sketch_loss_and_grad(w, offs, np.ascontiguousarray(Y[:, first:stop]),
                                          np.ascontiguousarray(S[:, first:stop]), whole, 8)
        assert loss == pytest.approx(expected, rel=1e-12)
        np.testing.assert_allclose(alone[0], whole[0], rtol=1e-10, atol=1e-12)
    for bad in [(0, 12), (20, 20), (4, 40)]:
        with pytest.raises(ValueError, match="columns"):
            K.sketch_loss_and_grad(w, offs, Y, S, alone, 8, columns=bad)
