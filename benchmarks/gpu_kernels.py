"""SF's fused GPU kernels (issue 25, goal 7): right on the GPU, and how near the memory-traffic bound.

Run by hand on a machine with a CUDA GPU and triton (not part of the tests):

    python benchmarks/gpu_kernels.py [--size 16384] [--dtype float32] [--tiles 32x128x4,64x128x8,16x256x4]

1. **Right:** the fused kernel's loss and gradient (``sfapprox/sf/_kernels_triton.py``) against the
   torch shift kernel (``_kernels.loss_and_grad``) on the GPU in float64, at N = 1,000 and 4,096
   (relative differences; rounding is ~1e-15), and in ``--dtype`` against that float64 result.
2. **Fast:** one evaluation at ``--size`` (N x N, ``--dtype``), the median of CUDA-event timings
   after a warm-up, for each tile shape (rows x columns x warps) of ``--tiles`` and for the shift
   kernel, against the traffic bound of ``benchmarks/speed.py`` (``3 M`` passes each reading and
   writing ``N^2`` numbers) at the copy bandwidth measured in the same run.

Writes benchmarks/results/gpu_kernels.json and .md.
"""

from __future__ import annotations

import argparse
import sys

from _common import ROOT, machine, meta, write_results

NAME = "gpu_kernels"


def _problem(n: int, dtype, device, seed: int = 0):
    import torch

    from sfapprox.chord import chord_offsets, default_n_factors

    offs = chord_offsets(n).tolist()
    g = torch.Generator(device=device).manual_seed(seed)
    m = default_n_factors(n)
    # values near the identity start's (a product of norm ~N), random X: neither is zeros
    ws = torch.rand(m, n, len(offs), generator=g, device=device, dtype=torch.float64) * 0.2 - 0.1
    ws[:, :, 0] += 1.0
    X = torch.randn(n, n, generator=g, device=device, dtype=torch.float64)
    return ws.to(dtype), offs, X.to(dtype)


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def check(sizes: list[int], dtype) -> list[dict]:
    import torch

    from sfapprox.sf import _kernels as K
    from sfapprox.sf import _kernels_triton as T

    rows = []
    for n in sizes:
        ws, offs, X = _problem(n, torch.float64, "cuda", seed=n)
        loss0, grad0 = K.loss_and_grad(ws, offs, X)
        loss, grad = T.loss_and_grad(ws, offs, X)
        low, lowgrad = T.loss_and_grad(ws.to(dtype), offs, X.to(dtype))
        rows.append({"n": n, "loss_float64": _rel(loss, loss0), "grad_float64": _rel(grad, grad0),
                     "loss_low": _rel(low, loss0), "grad_low": _rel(lowgrad, grad0)})
        print(rows[-1], flush=True)
        del ws, X, grad0, grad, lowgrad
        torch.cuda.empty_cache()
    return rows


def _median_seconds(fn, warm: int = 2, reps: int = 5) -> float:
    import torch

    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def bandwidth() -> float:
    """Bytes per second of a 1 GiB device-to-device copy (read + write), median of five."""
    import torch

    a = torch.randn(2**28, device="cuda")
    b = torch.empty_like(a)
    return 2 * a.numel() * a.element_size() / _median_seconds(lambda: b.copy_(a))


def time_tiles(n: int, dtype, tiles: list[tuple[int, int, int]]) -> list[dict]:
    import torch

    from sfapprox.sf import _kernels as K
    from sfapprox.sf import _kernels_triton as T

    ws, offs, X = _problem(n, dtype, "cuda")
    rows = []
    for br, bc, warps in tiles:
        T.BLOCK_ROWS, T.BLOCK_COLS, T.NUM_WARPS = br, bc, warps
        torch.cuda.reset_peak_memory_stats()
        seconds = _median_seconds(lambda: T.loss_and_grad(ws, offs, X))
        rows.append({"kernel": "triton", "tile": f"{br}x{bc}x{warps}", "seconds": seconds,
                     "peak_bytes": int(torch.cuda.max_memory_allocated())})
        print(rows[-1], flush=True)
    torch.cuda.reset_peak_memory_stats()
    seconds = _median_seconds(lambda: K.loss_and_grad(ws, offs, X), warm=1, reps=3)
    rows.append({"kernel": "shifts", "tile": "", "seconds": seconds, "peak_bytes": int(torch.cuda.max_memory_allocated())})
    print(rows[-1], flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=16384)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--check-sizes", default="1000,4096")
    ap.add_argument("--tiles", default="32x128x4,64x128x8,16x256x4,32x64x2")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from sfapprox.chord import default_n_factors
    from speed import traffic_bound

    dtype = getattr(torch, args.dtype)
    checks = check([int(s) for s in args.check_sizes.split(",")], dtype)
    tiles = [tuple(int(v) for v in t.split("x")) for t in args.tiles.split(",")]
    timed = time_tiles(args.size, dtype, tiles)
    bw = bandwidth()
    m = default_n_factors(args.size)
    bound = traffic_bound(args.size, m, torch.empty(0, dtype=dtype).element_size(), bw)
    import triton

    info = meta(machine=machine(torch=torch.__version__, triton=triton.__version__), gpu=torch.cuda.get_device_name(),
                bandwidth_bytes_per_s=bw, size=args.size, dtype=args.dtype)
    lines = [f"# SF's fused GPU kernels ({info['date']})", "",
             f"Command: `{info['command']}`", "",
             f"Machine: {info['machine']}; GPU {info['gpu']}; device-to-device copy {bw / 1e12:.2f} TB/s "
             "(read + write).", "",
             "## Right: against the torch shift kernel in float64 (relative differences)", "",
             f"| N | loss, float64 | gradient, float64 | loss, {args.dtype} | gradient, {args.dtype} |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['loss_float64']:.1e} | {r['grad_float64']:.1e} | {r['loss_low']:.1e} | "
              f"{r['grad_low']:.1e} |" for r in checks]
    lines += ["", f"## Fast: one evaluation at N = {args.size:,}, {args.dtype} (M = {m}; median of 5 after 2 warm-ups)", "",
              f"Traffic bound (3 M passes of 2 N² numbers at the measured copy bandwidth): {bound * 1e3:.1f} ms.", "",
              "| kernel | tile (rows x columns x warps) | ms per evaluation | / bound | GPU peak GiB |",
              "|---|---|---|---|---|"]
    lines += [f"| {r['kernel']} | {r['tile']} | {r['seconds'] * 1e3:.1f} | {r['seconds'] / bound:.2f}x | "
              f"{r['peak_bytes'] / 2**30:.2f} |" for r in timed]
    write_results(NAME, {"meta": info, "checks": checks, "timed": timed, "bound_seconds": bound}, lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
