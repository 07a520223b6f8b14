"""The README's first command, on a fresh install (numba's cache empty) and after: time and result.

Run by hand (not part of the tests):

    python benchmarks/first_fit.py [--warm 2] [--sfapprox CHECKOUT] [--tag first_fit]
    python benchmarks/first_fit.py --before CHECKOUT [--rounds 2] [--warm 2] [--tag first_fit_compile]
    python benchmarks/first_fit.py --compile-parts [--rounds 2] [--sfapprox CHECKOUT] [--tag compile_parts]
    python benchmarks/first_fit.py --compile-work --before CHECKOUT [--rounds 2] [--tag compile_work]
    python benchmarks/first_fit.py --kernel-speed --before CHECKOUT [--rounds 5] [--tag kernel_speed]

``sfapprox compare examples/mesh_small.mtx --methods sf,tsvd -q --json OUT`` runs as a fresh process
(``python -m sfapprox`` of this checkout, or of ``--sfapprox`` through ``PYTHONPATH``): first with an
empty ``NUMBA_CACHE_DIR`` of its own (every compiled kernel compiles, as after ``pip install``), then
``--warm`` more times with that cache filled.  Each row: the whole command's wall seconds, SF's own
seconds, its relative error, iterations and evaluations.

What it checks (issue 25, goal 6): the first run's fit must end where the later ones do.  Before
2026-11-27 the first evaluation's timing held ~5 s of compiling, the race of the two starts looked
unaffordable, and the first run ended at rel 0.1949 where every later one ended at 0.1808.

``--before CHECKOUT``: this checkout and ``CHECKOUT`` alternating, ``--rounds`` times, each round a
first run (its own empty cache) and ``--warm`` warm ones: before/after ratios from one run of a shared,
noisy machine.  Each row also has the command's CPU seconds (user + system), which another process
busy beside it inflates less than the wall seconds.  numba's in-tree cache files (``__pycache__``)
of the checkout measured are removed before a first run: ``NUMBA_CACHE_DIR`` takes precedence over them
anyway, but a first run must find nothing.

``--compile-parts``: where a fresh install's first fit spends its compiling, each round a fresh
process with an empty cache: the host arithmetic of the L-BFGS loop (``_solver.warm_up``), the
kernel (``_kernels.warm_up_numba``'s), and the compiled iterations (``_solver.warm_up`` with the
objective), with numba's own timers of the last (``llvm_lock``: LLVM's share).

``--compile-work --before CHECKOUT``: the compiling of ``--compile-parts`` (the kernel, then the compiled
iterations), this checkout and ``CHECKOUT`` alternating, each in fresh processes with an empty cache: its
CPU seconds, and two counts that another process busy beside it does not change (on a shared 2-core
machine the seconds of the same code spread by +-20 %): the lines of LLVM IR that numba hands to LLVM's
module optimisation and to its machine-code generation (summed over every library it finalizes; a
function linked into a caller is optimised and translated again inside it), and the Python function
calls of numba's own front end (typing, lowering: cProfile's count, in a process of its own).

``--kernel-speed --before CHECKOUT``: what a change of the compiled kernel's code must not cost, its
per-evaluation time: ``loss_and_grad`` of :mod:`sfapprox.sf._kernels_numba` on the whole matrix, one
thread, at N = 256, 1,024 and 4,096 in float32 and float64 (a random start and target), both checkouts'
kernel modules loaded in one process and their calls alternating (``--rounds`` calls each at N = 4,096,
5x and 20x that at the smaller N; separate processes spread by +-30 % on a shared machine), the fastest
and median call, and whether both give the same loss and gradient to the bit.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import FINDINGS, ROOT, checkout_env, meta, write_results


def one(env: dict, cache: str, out: Path) -> dict:
    """One run of the README's command with numba's cache in ``cache``; its row."""
    command = [sys.executable, "-m", "sfapprox", "compare", str(ROOT / "examples" / "mesh_small.mtx"),
               "--methods", "sf,tsvd", "-q", "--json", str(out), "--force"]
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, env={**env, "NUMBA_CACHE_DIR": cache}, capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime
    if done.returncode != 0:
        raise RuntimeError(f"the command failed:\n{done.stderr[-2000:]}")
    sf = next(r for r in json.loads(out.read_text())["results"] if r["method"] == "sf")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu_s, 2), "sf_s": round(sf["params"].get("fit_seconds", sf["seconds"]), 2), "rel_error": sf["rel_error"],
            "iterations": sf["params"]["iterations"], "evaluations": sf["params"]["evaluations"]}


#: One round of --compile-parts, run as a fresh process: JSON of each part's seconds.
_PARTS = """
import json, time, torch
from sfapprox.sf import _kernels, _solver, _solver_numba
parts = {}
began = time.perf_counter(); _solver.warm_up(torch.float64); parts["host"] = time.perf_counter() - began
small = _kernels.CompiledObjective((3, 8, 4), (0, 1, 2, 4), torch.eye(8, dtype=torch.float64))
began = time.perf_counter(); _kernels.warm_up_numba(torch.float64); parts["kernel"] = time.perf_counter() - began
began = time.perf_counter(); _solver.warm_up(torch.float64, small); parts["iterations"] = time.perf_counter() - began
timers = [_solver_numba.iterate.get_metadata(sig)["timers"] for sig in _solver_numba.iterate.signatures]
parts["iterations_llvm"] = timers[0]["llvm_lock"] if timers else None
print(json.dumps(parts))
"""


def compile_parts(env: dict, rounds: int, tag: str, checkout: str | None) -> None:
    """``--compile-parts``: each round a fresh process with an empty numba cache."""
    rows = []
    for i in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, "-c", _PARTS], env={**env, "NUMBA_CACHE_DIR": cache},
                                  capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the round failed:\n{done.stderr[-2000:]}")
        rows.append({"round": i + 1, **{k: round(v, 2) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}})
        print(rows[-1], flush=True)
    data = {"meta": meta(checkout=checkout or "this checkout"), "rows": rows}
    lines = [f"# Where a fresh install's first fit spends its compiling ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}` ({data['meta']['checkout']}).", "",
             "| round | host arithmetic s | kernel s | compiled iterations s | of which LLVM s |", "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['host']} | {r['kernel']} | {r['iterations']} | {r['iterations_llvm']} |" for r in rows]
    write_results(tag, data, lines)


#: One process of --compile-work: the kernel's and the iterations' CPU seconds and the LLVM IR lines numba
#: optimises and translates (argv[1] == "calls": cProfile's count of Python calls instead, no seconds).
_WORK = """
import cProfile, io, json, pstats, sys, time, torch
from numba.core import codegen
lines = {"ir_optimised": 0, "ir_translated": 0, "libraries": 0}
def counted(key, method):
    def run(self):
        lines[key] += str(self._final_module).count("\\n")
        lines["libraries"] += key == "ir_optimised"
        return method(self)
    return run
library = codegen.CPUCodeLibrary
library._optimize_final_module = counted("ir_optimised", library._optimize_final_module)
library._finalize_final_module = counted("ir_translated", library._finalize_final_module)
from sfapprox.sf import _kernels, _solver
small = _kernels.CompiledObjective((3, 8, 4), (0, 1, 2, 4), torch.eye(8, dtype=torch.float64))
profile = cProfile.Profile() if sys.argv[1:] == ["calls"] else None
if profile:
    profile.enable()
began = time.process_time(); _kernels.warm_up_numba(torch.float64); kernel = time.process_time() - began
began = time.process_time(); _solver.warm_up(torch.float64, small); iterations = time.process_time() - began
if profile:
    profile.disable()
    print(json.dumps({"python_calls": pstats.Stats(profile, stream=io.StringIO()).total_calls}))
else:
    print(json.dumps({"kernel_cpu_s": round(kernel, 2), "iterations_cpu_s": round(iterations, 2), **lines}))
"""


def _work_round(env: dict) -> dict:
    """One --compile-work row for a checkout (``env``): two fresh processes, each with an empty cache."""
    row = {}
    for mode in ("seconds", "calls"):
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, "-c", _WORK, mode], env={**env, "NUMBA_CACHE_DIR": cache},
                                  capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the round failed:\n{done.stderr[-2000:]}")
        row.update(json.loads(done.stdout.splitlines()[-1]))
    return row


def compile_work(before: str, rounds: int, tag: str) -> None:
    """``--compile-work``: this checkout and ``before`` alternating, ``rounds`` times."""
    rows = []
    for r in range(rounds):
        for label, checkout in (("before", before), ("after", str(ROOT))):
            _clear_in_tree_cache(Path(checkout))
            rows.append({"round": r + 1, "checkout": label, **_work_round(checkout_env(checkout))})
            print(rows[-1], flush=True)
    data = {"meta": meta(before=before), "rows": rows}
    lines = [f"# A fresh install's compiling, this checkout against another, alternating ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}` (before: {before}).", "",
             "| round | checkout | kernel CPU s | iterations CPU s | LLVM IR lines optimised | translated | "
             "libraries | numba Python calls |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['checkout']} | {r['kernel_cpu_s']} | {r['iterations_cpu_s']} | "
              f"{r['ir_optimised']:,} | {r['ir_translated']:,} | {r['libraries']} | {r['python_calls']:,} |" for r in rows]
    lines += ["", FINDINGS, "", "(to be written)"]
    write_results(tag, data, lines)


#: --kernel-speed, in one process: both checkouts' kernel modules loaded side by side (the module imports
#: numba and numpy only), their calls alternating; per (N, dtype) each one's fastest and median call and a
#: digest of its loss and gradient.  argv: before's and this checkout's paths, the rounds.
_KERNEL_SPEED = """
import hashlib, importlib.util, json, statistics, sys, time
import numpy as np
from sfapprox.chord import chord_offsets, default_n_factors
from sfapprox.sf import _kernels as K
def load(name, checkout):
    spec = importlib.util.spec_from_file_location(name, checkout + "/sfapprox/sf/_kernels_numba.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
modules = {"before": load("kernels_before", sys.argv[1]), "after": load("kernels_after", sys.argv[2])}
rounds = int(sys.argv[3])
rows = []
for n, reps in ((256, 20 * rounds), (1024, 5 * rounds), (4096, rounds)):
    offsets = tuple(int(v) for v in chord_offsets(n))
    fwd, bwd = K._numba_plan(n, offsets)
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(0)
        ws = (rng.standard_normal((default_n_factors(n), n, len(offsets))) / np.sqrt(len(offsets))).astype(dtype)
        X = rng.standard_normal((n, n)).astype(dtype)
        width = K.numba_width(n, ws.itemsize)
        starts = np.arange(0, n, width, dtype=np.int64)
        grad = np.empty_like(ws)
        times, digests = {k: [] for k in modules}, {}
        for label, module in modules.items():
            f = module.loss_and_grad(ws, X, fwd, bwd, width, grad, starts, 0)
            digests[label] = hashlib.sha256(np.float64(f).tobytes() + grad.tobytes()).hexdigest()[:12]
        for _ in range(reps):
            for label, module in modules.items():
                began = time.perf_counter()
                module.loss_and_grad(ws, X, fwd, bwd, width, grad, starts, 0)
                times[label].append(time.perf_counter() - began)
        for label in modules:
            rows.append({"case": f"{n} {np.dtype(dtype).name}", "checkout": label, "calls": reps,
                         "fastest_ms": round(min(times[label]) * 1e3, 3),
                         "median_ms": round(statistics.median(times[label]) * 1e3, 3), "digest": digests[label]})
print(json.dumps(rows))
"""


def kernel_speed(before: str, rounds: int, tag: str) -> None:
    """``--kernel-speed``: both checkouts' kernels in one process, alternating (``rounds``: calls at N = 4,096)."""
    with tempfile.TemporaryDirectory() as cache:
        command = [sys.executable, "-c", _KERNEL_SPEED, str(Path(before).resolve()), str(ROOT), str(rounds)]
        done = subprocess.run(command, env={**checkout_env(str(ROOT)), "NUMBA_CACHE_DIR": cache},
                              capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the run failed:\n{done.stderr[-2000:]}")
    rows = json.loads(done.stdout.splitlines()[-1])
    by = {(r["case"], r["checkout"]): r for r in rows}
    cases = list(dict.fromkeys(r["case"] for r in rows))
    data = {"meta": meta(before=before), "rows": rows}
    lines = [f"# The compiled kernel's per-evaluation time, this checkout against another, alternating "
             f"({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}` (before: {before}).", "",
             "| N, dtype | calls each | before fastest / median ms | after fastest / median ms | after / before "
             "(fastest, median) | same loss and gradient |", "|---|---|---|---|---|---|"]
    for case in cases:
        b, a = by[(case, "before")], by[(case, "after")]
        lines.append(f"| {case} | {a['calls']} | {b['fastest_ms']} / {b['median_ms']} | "
                     f"{a['fastest_ms']} / {a['median_ms']} | "
                     f"{a['fastest_ms'] / b['fastest_ms']:.3f}, {a['median_ms'] / b['median_ms']:.3f} | "
                     f"{'yes' if a['digest'] == b['digest'] else 'NO'} |")
    lines += ["", FINDINGS, "", "(to be written)"]
    write_results(tag, data, lines)


def _clear_in_tree_cache(checkout: Path) -> None:
    """Remove numba's cache files from ``checkout``'s ``sfapprox/**/__pycache__`` (see ``--before``)."""
    for pattern in ("*.nbi", "*.nbc", "*.kernel-sha256"):
        for path in (checkout / "sfapprox").rglob(f"__pycache__/{pattern}"):
            path.unlink()


def alternating(before: str, rounds: int, warm: int, tag: str) -> None:
    """``--before``: this checkout and ``before`` alternating, each round a first run and ``warm`` warm ones."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(rounds):
            for label, checkout in (("before", Path(before)), ("after", ROOT)):
                env = checkout_env(str(checkout))
                _clear_in_tree_cache(checkout)
                with tempfile.TemporaryDirectory() as cache:
                    for i in range(1 + warm):
                        run = "first (cache empty)" if i == 0 else f"warm {i}"
                        rows.append({"round": r + 1, "checkout": label, "run": run,
                                     **one(env, cache, Path(scratch) / "o.json")})
                        print(rows[-1], flush=True)
    data = {"meta": meta(before=before), "rows": rows}
    lines = [f"# The README's first command, this checkout against another, alternating ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}` (before: {before}).", "",
             "| round | checkout | run | command s | command CPU s | SF fit s | SF rel error | iterations | evaluations |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['checkout']} | {r['run']} | {r['wall_s']} | {r['cpu_s']} | {r['sf_s']} | "
              f"{r['rel_error']:.4f} | {r['iterations']} | {r['evaluations']} |" for r in rows]
    lines += ["", FINDINGS, "", "(to be written)"]  # (a rerun keeps those written: _common.keep_findings)
    write_results(tag, data, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=2, help="runs after the first (cache filled)")
    parser.add_argument("--sfapprox", help="another checkout to measure (put first on PYTHONPATH)")
    parser.add_argument("--tag", default=None, help="results name (default: first_fit, or compile_parts)")
    parser.add_argument("--compile-parts", action="store_true", help="time each part of a fresh install's compiling")
    parser.add_argument("--rounds", type=int, default=2,
                        help="--compile-parts: fresh processes to time; --before: rounds of the alternation")
    parser.add_argument("--before", help="another checkout, run alternating with this one (before/after)")
    parser.add_argument("--compile-work", action="store_true",
                        help="with --before: the compiling's CPU seconds, LLVM IR lines and numba's Python calls")
    parser.add_argument("--kernel-speed", action="store_true",
                        help="with --before: the compiled kernel's per-evaluation time at N = 1,024 and 4,096")
    args = parser.parse_args()
    if args.kernel_speed:
        if not args.before:
            parser.error("--kernel-speed needs --before CHECKOUT")
        kernel_speed(args.before, args.rounds, args.tag or "kernel_speed")
        return
    if args.compile_work:
        if not args.before:
            parser.error("--compile-work needs --before CHECKOUT")
        compile_work(args.before, args.rounds, args.tag or "compile_work")
        return
    if args.before:
        alternating(args.before, args.rounds, args.warm, args.tag or "first_fit_compile")
        return
    env = checkout_env(args.sfapprox)
    if args.compile_parts:
        compile_parts(env, args.rounds, args.tag or "compile_parts", args.sfapprox)
        return
    args.tag = args.tag or "first_fit"
    rows = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as scratch:
        for i in range(1 + args.warm):
            row = {"run": "first (cache empty)" if i == 0 else f"warm {i}", **one(env, cache, Path(scratch) / "o.json")}
            rows.append(row)
            print(row, flush=True)
    data = {"meta": meta(checkout=args.sfapprox or "this checkout"), "rows": rows}
    lines = [f"# The README's first command, on a fresh install and after ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}` ({data['meta']['checkout']}).", "",
             "| run | command s | SF fit s | SF rel error | iterations | evaluations |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['wall_s']} | {r['sf_s']} | {r['rel_error']:.4f} | {r['iterations']} | "
              f"{r['evaluations']} |" for r in rows]
    write_results(args.tag, data, lines)


if __name__ == "__main__":
    main()
