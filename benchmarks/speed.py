"""Per-evaluation speed of SF's loss+gradient: our kernels against the dense-masked formulation.

Run by hand (not part of the tests):

    python benchmarks/speed.py [--sizes 256,512,1024,2048,4096] [--dense-max 2048] [--device cpu]
    python benchmarks/speed.py --iteration [--sizes 64,128,256] [--readme-runs 5]

``--iteration`` compares one L-BFGS iteration of a real fit with one bare evaluation of the
loss and gradient (the cheapest of the kernels, each timed alone), on one thread, and times
the README's first command (``sfapprox compare examples/mesh_small.mtx --methods sf,tsvd``:
SF's fit seconds and relative error, a few runs, the first with an empty numba cache so that
it includes compiling the kernels); it writes benchmarks/results/speed-iteration.json and .md.

Each (N, kernel) runs in its own subprocess so that its peak memory (max RSS on CPU,
torch.cuda.max_memory_allocated on GPU) is its own. Writes benchmarks/results/speed-<device>.json
and .md. "dense" is the reference code's formulation: M masked N x N factors multiplied as
dense matrices, gradient by autograd (O(M N^3)).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _common import ROOT, machine, meta, version, write_results


def _one(n: int, kind: str, device: str, dtype: str, reps: int) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from sfapprox.chord import chord_offsets, default_n_factors
    from sfapprox.sf import _kernels as K

    dt = getattr(torch, dtype)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the interpreter + torch
    offs = chord_offsets(n).tolist()
    m = default_n_factors(n)
    g = torch.Generator().manual_seed(0)
    ws = (torch.rand(m, n, len(offs), generator=g, dtype=dt) / len(offs)).to(device)
    X = torch.randn(n, n, generator=g, dtype=dt).to(device)
    if kind == "dense-masked":
        idx = K._column_index(n, offs, ws.device)
        mask = torch.zeros(n, n, dtype=dt, device=ws.device).scatter_(1, idx, 1.0)

        def run():
            W = torch.zeros(m, n, n, dtype=dt, device=ws.device)
            W.scatter_(2, idx.expand(m, n, len(offs)), ws)
            W.requires_grad_(True)
            P = W[0] * mask
            for j in range(1, m):
                P = P @ (W[j] * mask)
            loss = 0.5 * ((P - X) ** 2).sum()
            loss.backward()
            return loss, torch.gather(W.grad, 2, idx.expand(m, n, len(offs)))
    else:
        fn = {"panels": K.loss_and_grad_panels, "shifts": K.loss_and_grad, "dense": K.loss_and_grad_dense,
              "numba": K.loss_and_grad_numba, "triton": K.loss_and_grad_triton}[kind]

        def run():
            return fn(ws, offs, X)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    t = time.perf_counter()
    run()
    sync()
    # The minimum over repeats is the figure: on a shared machine other tenants only ever add
    # time, so short evaluations are repeated for about 3 s (up to 20 times) to find it.
    reps = max(reps, min(20, int(3.0 / max(time.perf_counter() - t, 1e-3))))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - t)
    if device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline
    return {"n": n, "kernel": kind, "seconds": min(times), "peak_bytes": int(peak), "M": m, "K": len(offs)}


def _bandwidth(device: str) -> float:
    """Bytes per second moved by a large tensor copy (read + write), the best of 5."""
    import torch

    a = torch.ones(2**25, dtype=torch.float64, device=device)  # 256 MiB
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(5):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        b.copy_(a)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * a.numel() * a.element_size() / best


def traffic_bound(n: int, m: int, itemsize: int, bandwidth: float) -> float:
    """Seconds to stream the evaluation's unavoidable memory traffic.

    Forward: each of the M factor passes reads and writes an N x N block; the
    backward pass makes two such passes per factor (the adjoint product and
    the gradient's row sums): 3·M passes of 2·N²·itemsize bytes.
    """
    return 3 * m * 2 * n * n * itemsize / bandwidth


def _clock_best(fn, budget: float, clock) -> float:
    """Least time of one call of ``fn`` over about ``budget`` seconds of repeats (at least 5)."""
    fn()
    t = clock()
    fn()
    one = max(clock() - t, 1e-6)
    best = float("inf")
    for _ in range(max(5, int(budget / one))):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def _iteration_row(n: int, budget: float) -> dict:
    """One bare evaluation by every kernel, and one iteration of a ChordSF fit, wall and CPU time."""
    import warnings

    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT))
    import sfapprox
    from sfapprox.chord import chord_offsets, default_n_factors
    from sfapprox.sf import _kernels as K

    torch.set_num_threads(1)
    offs = chord_offsets(n).tolist()
    m = default_n_factors(n)
    g = torch.Generator().manual_seed(0)
    ws = torch.rand(m, n, len(offs), generator=g, dtype=torch.float64) / len(offs)
    X = np.random.default_rng(n).standard_normal((n, n))
    Xt = torch.as_tensor(X)
    _, selected = K.select_kernel(n, "cpu")
    kernels = {"numba (compiled)": K.loss_and_grad_numba,
               "dense (numpy BLAS)": K.loss_and_grad_dense,
               "dense (torch BLAS)": _torch_dense,
               "panels": K.loss_and_grad_panels, "shifts": K.loss_and_grad}
    if not K._numba_module():
        del kernels["numba (compiled)"]
    evals = {}
    for name, fn in kernels.items():
        if name.startswith("dense") and n > 256:
            continue
        def call(fn=fn):
            return fn(ws, offs, Xt)

        evals[name] = {"wall": _clock_best(call, budget, time.perf_counter),
                       "cpu": _clock_best(call, budget, time.process_time)}
    cheapest = min(evals, key=lambda k: evals[k]["cpu"])
    iters = max(50, int(2.0 / evals[cheapest]["wall"]))
    warnings.simplefilter("ignore")
    best = {"wall": float("inf"), "cpu": float("inf")}
    for _ in range(3):
        c0 = time.process_time()
        sf = sfapprox.ChordSF(device="cpu", init="identity", max_iter=iters, time_limit=None, threads=1).fit(X)
        cpu = (time.process_time() - c0) / sf.n_iter_
        best = {"wall": min(best["wall"], sf.seconds_ / sf.n_iter_), "cpu": min(best["cpu"], cpu)}
    return {"n": n, "M": m, "K": len(offs), "selected": selected, "evals": evals, "cheapest": cheapest,
            "iteration": best, "evals_per_iteration": sf.n_evals_ / sf.n_iter_, "iterations": iters,
            "ratio_wall": best["wall"] / evals[cheapest]["wall"], "ratio_cpu": best["cpu"] / evals[cheapest]["cpu"],
            "loadavg": os.getloadavg()[0]}


def _torch_dense(ws, offs, X):
    """The dense-factor evaluation in torch (the path a GPU takes), for comparison on the CPU."""
    from sfapprox.sf import _kernels as K

    plan = K._dense_plan(ws.shape[0], ws.shape[1], tuple(offs), "cpu")
    return K._dense_torch(ws, plan["flat"], X)


README_COMMAND = ["compare", "examples/mesh_small.mtx", "--methods", "sf,tsvd"]


def _readme_run(cache_dir: str | None) -> dict:
    """The README's first command in a fresh process: SF's fit seconds, relative error, the process's wall time.

    ``cache_dir``: a numba cache folder for this run only (empty: the run compiles the kernels).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    load = os.getloadavg()[0]
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "sfapprox", *README_COMMAND, "--json", "-"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    sf = next(r for r in json.loads(res.stdout)["results"] if r["method"] == "sf")
    return {"seconds": sf["params"].get("fit_seconds", sf["seconds"]), "rel_error": sf["rel_error"], "iterations": sf["params"]["iterations"],
            "wall": wall, "loadavg_before": load, "loadavg_after": os.getloadavg()[0],
            "cold_numba_cache": cache_dir is not None}


def readme_runs(runs: int) -> list[dict]:
    """One run with an empty numba cache (what the first run after installing pays), then ``runs`` warm ones."""
    import tempfile

    out = []
    with tempfile.TemporaryDirectory() as cold:
        out.append(_readme_run(cold))
    for _ in range(runs):
        out.append(_readme_run(None))
    for row in out:
        print(json.dumps(row), flush=True)
    return out


def iteration_main(sizes: list[int], budget: float, runs: int = 5) -> int:
    import torch

    sys.path.insert(0, str(ROOT))
    from sfapprox._threads import torch_threads

    rows = []
    for n in sizes:
        with torch_threads(1):  # torch and the BLAS pools (numpy's) on one thread
            row = _iteration_row(n, budget)
        rows.append(row)
        print(json.dumps(row), flush=True)
    readme = readme_runs(runs) if runs else []
    info = meta("python benchmarks/speed.py --iteration --sizes " + ",".join(str(n) for n in sizes),
                machine=machine(numpy=version("numpy"), torch=f"{torch.__version__}, one thread"))
    names = list(rows[0]["evals"])
    lines = [f"# One L-BFGS iteration against one bare loss+gradient evaluation ({info['date']})", "",
             f"Machine: {info['machine']}. Command: `{info['command']}`. Load average during the rows: "
             f"{min(r['loadavg'] for r in rows):.2f}–{max(r['loadavg'] for r in rows):.2f}.", "",
             "Bare evaluation: each kernel called alone on the same factors, the least time over repeats. "
             "Iteration: a ChordSF fit (`init=\"identity\"`, `threads=1`, no time limit), seconds / iterations, "
             "the best of 3 fits; it includes the line search's extra evaluations, the L-BFGS update and "
             "direction, and the per-iteration callback. Times in microseconds, CPU time of the process "
             "(wall time in parentheses; on a shared machine the CPU time is the steadier figure).", "",
             "| N | M | K | " + " | ".join(f"{k} eval" for k in names) + " | cheapest | iteration | "
             "evals / iteration | iteration / cheapest eval |",
             "|---|---|---|" + "---|" * len(names) + "---|---|---|---|"]
    for r in rows:
        cells = [f"{r['evals'][k]['cpu'] * 1e6:.0f} ({r['evals'][k]['wall'] * 1e6:.0f})" if k in r["evals"] else "–"
                 for k in names]
        lines.append(f"| {r['n']} | {r['M']} | {r['K']} | " + " | ".join(cells) + f" | {r['cheapest']} | "
                     f"{r['iteration']['cpu'] * 1e6:.0f} ({r['iteration']['wall'] * 1e6:.0f}) | "
                     f"{r['evals_per_iteration']:.2f} | {r['ratio_cpu']:.2f}x ({r['ratio_wall']:.2f}x) |")
    if readme:
        warm = [r for r in readme if not r["cold_numba_cache"]]
        cold = [r for r in readme if r["cold_numba_cache"]]
        lines += ["", f"README first command (`sfapprox {' '.join(README_COMMAND)}`), each run a fresh process: "
                  "SF's fit seconds (the `seconds` column), its relative error, and the whole command's wall "
                  "time; the first run with an empty numba cache (it compiles the kernels, as the first run "
                  "after installing does), then warm runs.", "",
                  "| run | numba cache | SF fit s | SF rel. error | iterations | command wall s | load average (1 min) |",
                  "|---|---|---|---|---|---|---|"]
        for i, r in enumerate(readme, 1):
            lines.append(f"| {i} | {'empty' if r['cold_numba_cache'] else 'warm'} | {r['seconds']:.2f} | "
                         f"{r['rel_error']:.4f} | {r['iterations']} | {r['wall']:.2f} | "
                         f"{r['loadavg_before']:.2f}–{r['loadavg_after']:.2f} |")
        if warm:
            secs = sorted(r["seconds"] for r in warm)
            lines += ["", f"Warm runs: SF fit {secs[0]:.2f}–{secs[-1]:.2f} s (median {secs[len(secs) // 2]:.2f} s), "
                      f"relative error {warm[0]['rel_error']:.4f}"
                      + (f"; with an empty cache {cold[0]['seconds']:.2f} s." if cold else ".")]
    write_results("speed-iteration", {"meta": info, "rows": rows, "readme": readme}, lines)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--dense-max", type=int, default=2048, help="largest N for the dense-masked formulation")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--reps", type=int, default=3, help="fewest timed repeats (short evaluations get more)")
    ap.add_argument("--kernels", default="")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)
    ap.add_argument("--iteration", action="store_true", help="iteration against bare evaluation (one thread)")
    ap.add_argument("--budget", type=float, default=2.0, help="--iteration: seconds of repeats per kernel")
    ap.add_argument("--readme-runs", type=int, default=5,
                    help="--iteration: warm runs of the README's first command (0: none)")
    args = ap.parse_args()
    if args.iteration:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes != ap.get_default("sizes") else [64, 128, 256]
        return iteration_main(sizes, args.budget, args.readme_runs)
    if args.one:
        n, kind = args.one.split(":")
        print(json.dumps(_one(int(n), kind, args.device, args.dtype, args.reps)))
        return 0
    sys.path.insert(0, str(ROOT))
    from sfapprox.sf import _kernels as K

    ours = K.select_kernel(args.sizes and int(args.sizes.split(",")[-1]), args.device)[1]
    kernels = args.kernels.split(",") if args.kernels else [ours, "dense-masked"]
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        for kind in kernels:
            if kind == "dense-masked" and n > args.dense_max:
                continue
            cmd = [sys.executable, __file__, "--one", f"{n}:{kind}", "--device", args.device,
                   "--dtype", args.dtype, "--reps", str(args.reps)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                row = {"n": n, "kernel": kind, "error": res.stderr.strip().splitlines()[-1:]}
            else:
                row = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    import torch

    bandwidth = _bandwidth(args.device)
    itemsize = torch.empty(0, dtype=getattr(torch, args.dtype)).element_size()
    command = f"python benchmarks/speed.py --sizes {args.sizes} --device {args.device}"
    command += f" --dtype {args.dtype}" if args.dtype != ap.get_default("dtype") else ""
    command += f" --kernels {args.kernels}" if args.kernels else ""
    info = meta(command, machine=machine(torch=f"{torch.__version__} ({torch.get_num_threads()} threads)"),
                bandwidth_bytes_per_s=bandwidth, device=args.device, dtype=args.dtype)
    if args.device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    tag = f"speed-{args.device.split(':')[0]}"
    by = {(r["n"], r["kernel"]): r for r in rows if "seconds" in r}
    lines = [f"# SF loss+gradient per evaluation ({info['date']}, {args.device}, {args.dtype})", "",
             f"Machine: {info['machine']}{', ' + info['gpu'] if 'gpu' in info else ''}. "
             f"Command: `{info['command']}`", "",
             f"Memory-traffic bound: 3·M passes (forward, adjoint, gradient) each reading and writing "
             f"N² values, at the measured copy bandwidth {bandwidth / 1e9:.1f} GB/s.", "",
             "| N | M | K | kernel | s/eval | peak MiB | traffic bound s | s/eval / bound | "
             "dense-masked s/eval | dense peak MiB | speed-up |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({r["n"] for r in rows}):
        b = by.get((n, "dense-masked"))
        for kind in [k for k in kernels if k != "dense-masked"]:
            a = by.get((n, kind))
            if a is None:
                continue
            speed = f"{b['seconds'] / a['seconds']:.1f}x" if b else "–"
            bound = traffic_bound(n, a["M"], itemsize, bandwidth)
            # N above --dense-max: the dense-masked formulation is not run (minutes per evaluation)
            dense = f"{b['seconds']:.3f} | {b['peak_bytes'] / 2**20:.0f}" if b else "not run | –"
            lines.append(f"| {n} | {a['M']} | {a['K']} | {kind} | {a['seconds']:.4f} | {a['peak_bytes'] / 2**20:.0f} | "
                         f"{bound:.4f} | {a['seconds'] / bound:.1f}x | {dense} | {speed} |")
    write_results(tag, {"meta": info, "rows": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
