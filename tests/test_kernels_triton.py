"""The fused GPU kernels (sfapprox/sf/_kernels_triton.py): their choice, their fallback, and their numbers.

Machines without a GPU check the kernels' arithmetic through triton's interpreter
(``TRITON_INTERPRET=1``, in a child process: the variable is read when triton
decorates the kernels); without triton those tests skip.  The speed is measured on a
GPU by ``benchmarks/speed.py --device cuda`` (``benchmarks/results/speed-cuda.md``).
"""

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from sfapprox.sf import _kernels as K

has_triton = importlib.util.find_spec("triton") is not None


def test_cuda_takes_the_fused_kernel_where_triton_imports(monkeypatch):
    monkeypatch.setattr(K._TRITON, "module", object())  # any module: selection only asks whether it imported
    assert K.select_kernel(1000, "cuda") == (K.loss_and_grad_triton, "triton")
    assert K.select_kernel(K.DENSE_MAX_N, "cuda")[1] == "dense"  # small N: a few BLAS calls win
    monkeypatch.setattr(K._TRITON, "module", False)
    assert K.select_kernel(1000, "cuda") == (K.loss_and_grad, "shifts")
    # the CPU never takes it
    assert K.select_kernel(1000, "cpu")[1] in ("numba", "panels")


def test_workspace_of_the_fused_kernel_is_the_shift_kernels():
    """Its buffers are those of the shifts path (the partial products, the residual) plus parts far smaller."""
    assert K.workspace_numbers(16384, 14, "triton") == K.workspace_numbers(16384, 14, "shifts")


class _Broken:
    def __init__(self, exc):
        self.exc = exc
        self.calls = 0

    def loss_and_grad(self, ws, offsets, X):
        self.calls += 1
        raise self.exc


def _problem(n=40, seed=3):
    from sfapprox.chord import chord_offsets, default_n_factors

    offs = chord_offsets(n).tolist()
    g = torch.Generator().manual_seed(seed)
    ws = torch.randn(default_n_factors(n), n, len(offs), dtype=torch.float64, generator=g) / 2
    return ws, offs, torch.randn(n, n, dtype=torch.float64, generator=g)


def test_a_kernel_that_fails_to_compile_falls_back_once_with_a_warning(monkeypatch):
    ws, offs, X = _problem()
    broken = _Broken(RuntimeError("ptxas not found"))
    monkeypatch.setattr(K._TRITON, "module", broken)
    with pytest.warns(RuntimeWarning, match="GPU \\(Triton\\) SF fitting kernel failed .*ptxas not found.*torch shift"):
        loss, grad = K.loss_and_grad_triton(ws, offs, X)
    loss0, grad0 = K.loss_and_grad(ws, offs, X)
    assert torch.equal(loss, loss0) and torch.equal(grad, grad0)
    assert K._TRITON.module is False and K.select_kernel(1000, "cuda")[1] == "shifts"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: the next call goes straight to the torch path
        K.loss_and_grad_triton(ws, offs, X)
    assert broken.calls == 1


def test_running_out_of_gpu_memory_is_not_a_kernel_failure(monkeypatch):
    ws, offs, X = _problem()
    broken = _Broken(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    monkeypatch.setattr(K._TRITON, "module", broken)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        K.loss_and_grad_triton(ws, offs, X)
    assert K._TRITON.module is broken  # still the kernel for the next (smaller) fit


_INTERPRETED = textwrap.dedent(
    """
    import torch
    from sfapprox.chord import support_offsets
    from sfapprox.sf import _kernels as K
    from sfapprox.sf import _kernels_triton as T

    g = torch.Generator().manual_seed(11)
    worst = {}
    # N below, at and above a tile's 32 rows and 128 columns; M = 1 (the last factor alone) and 3
    for support, n, m in [("chord", 24, 3), ("chord", 45, 1), ("chord", 100, 3), ("symmetric", 45, 3)]:
        offs = support_offsets(n, support).tolist()
        for dtype in (torch.float64, torch.float32):
            ws = (torch.randn(m, n, len(offs), generator=g, dtype=torch.float64) / 2).to(dtype)
            X = torch.randn(n, n, generator=g, dtype=torch.float64).to(dtype)
            loss, grad = T.loss_and_grad(ws, offs, X)
            loss0, grad0 = K.loss_and_grad(ws.double(), offs, X.double())
            key = (support, n, m, str(dtype))
            worst[key] = max(abs(float(loss) - float(loss0)) / float(loss0),
                             float((grad.double() - grad0).norm() / grad0.norm()))
    # the passes alone, on a block of 37 columns (not a whole matrix), each output poisoned first
    n, c = 70, 37
    offs = support_offsets(n, "chord").tolist()
    shift = torch.tensor(offs, dtype=torch.int32)
    w = torch.randn(n, len(offs), generator=g, dtype=torch.float64)
    B = torch.randn(n, c, generator=g, dtype=torch.float64)
    out = torch.full((n, c), float("nan"), dtype=torch.float64)
    T.combine(w, shift, B, 1, out=out)
    worst["W B"] = float((out - K.apply_factor(w, offs, B)).abs().max())
    rows_t = (torch.arange(n)[:, None] - torch.tensor(offs)[None, :]) % n
    out = torch.full((n, c), float("nan"), dtype=torch.float64)
    T.combine(torch.gather(w, 0, rows_t), shift, B, -1, out=out)
    worst["W^T B"] = float((out - K.apply_factor_t(w, offs, B)).abs().max())
    G = torch.randn(n, c, generator=g, dtype=torch.float64)
    worst["row dots"] = float((T.row_dots(G, B, shift) - K.factor_grad(G, B, offs)).abs().max())
    for key, value in worst.items():
        print(key, value)
    """
)


@pytest.mark.skipif(not has_triton, reason="triton is not installed")
def test_fused_kernels_compute_the_shift_kernels_numbers_in_the_interpreter():
    """Loss and gradient against the torch kernel: float64 to 1e-12, float32 to 1e-5 (relative);
    each pass on a ragged block, every output entry written (NaN-poisoned before)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, "-c", _INTERPRETED], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    errors = {}
    for line in run.stdout.strip().splitlines():
        key, value = line.rsplit(" ", 1)
        errors[key] = float(value)
    assert len(errors) == 11
    for key, value in errors.items():
        tol = 1e-5 if "float32" in key else 1e-12
        assert value <= tol, (key, value)  # NaN fails too


needs_gpu = pytest.mark.skipif(not (has_triton and torch.cuda.is_available()), reason="needs a CUDA GPU and triton")


@needs_gpu
@pytest.mark.parametrize("n", [113, 300, 1000])
def test_fused_kernels_on_the_gpu_match_the_shift_kernel(n):
    ws, offs, X = _problem(n, seed=n)
    ws, X = ws.cuda(), X.cuda()
    loss0, grad0 = K.loss_and_grad(ws, offs, X)
    loss, grad = K.loss_and_grad_triton(ws, offs, X)
    assert float(abs(loss - loss0) / loss0) < 1e-12
    assert float((grad - grad0).norm() / grad0.norm()) < 1e-12


@needs_gpu
def test_a_gpu_fit_takes_the_fused_kernel_and_lands_where_the_cpu_fit_does():
    import numpy as np

    from sfapprox import ChordSF

    X = np.random.default_rng(5).standard_normal((200, 200))
    cpu = ChordSF(max_iter=30, init="identity", device="cpu", dtype="float64").fit(X)
    gpu = ChordSF(max_iter=30, init="identity", device="cuda", dtype="float64").fit(X)
    assert gpu.kernel_ == "triton"
    assert gpu.rel_error_ == pytest.approx(cpu.rel_error_, rel=1e-4)
