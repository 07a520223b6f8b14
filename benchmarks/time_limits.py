"""Does every method stay within its time limit as a whole, at N = 300 and at N = 3,000?  And how
long does a default compare of every method take?

Run by hand (not part of the tests); about 12 minutes on 2 cores with the defaults:

    python benchmarks/time_limits.py [--sizes 300,3000] [--limit 5,30] [--methods sf,tsvd]
                                     [--no-together] [--data-dir ../shared/realdata]
                                     [--sfapprox PATH] [--name time_limits] [--busy 1]

For each size, each registered method (or those of ``--methods``) runs alone through
``sfapprox.compare(X, [name], time_limit=LIMIT, device="cpu")``: its wall time (the whole call:
setup, fit and scoring; building the matrix excluded) against the limit.  ``--limit`` gives one
limit for every size or one per size (default: 5 s at N = 300, 30 s at N = 3,000).

The matrices: at N = 300, the 300 x 300-class matrix the benchmark always used (mesh2e1, N = 306,
when the shared real data is present; otherwise a random 300 x 300 matrix with a planted low-rank +
sparse structure); at any other N, a dense RBF kernel matrix ``exp(-|x_i - x_j|^2 / 2)`` of a
seeded cloud of N points in 3-D around 8 cluster centres (:func:`rbf_matrix`).

Before the timed calls, one warm-up ``compare`` of every method on a 32 x 32 matrix loads what a
process loads once (numba's compiled kernels from its on-disk cache, torch's and LAPACK's first
calls); its seconds are reported.  Then (unless ``--no-together``) ``sfapprox.compare`` of every
method with the default settings on the smallest size (``time_limit="auto"``: the methods share
120 s, at most 60 s each), timed as a whole.  ``--sfapprox PATH`` imports sfapprox from another
checkout (to measure a "before"); ``--busy K`` runs K CPU-bound competitor processes throughout (a
busy machine, as when tests run beside).  Writes benchmarks/results/NAME.json and NAME.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"


def small_matrix(data_dir: Path):
    """The ~300 x 300 matrix of the original benchmark: mesh2e1 when present, else a planted one."""
    import sfapprox

    path = data_dir / "suitesparse" / "mesh2e1.mtx"
    if path.is_file():
        return sfapprox.load_matrix(path, format="ijv"), "mesh2e1 (N = 306, SuiteSparse)"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 300))
    X[rng.random((300, 300)) < 0.01] += 5.0
    return sfapprox.io.as_loaded(np.abs(X), "planted-300"), "planted low rank + sparse, N = 300 (no real data found)"


def rbf_matrix(n: int, seed: int = 0, clusters: int = 8, dim: int = 3) -> np.ndarray:
    """A dense RBF kernel ``exp(-|x_i - x_j|^2 / 2)`` of ``n`` seeded points around ``clusters`` centres.

    The centres are uniform in ``[-5, 5]^dim``, each point a centre plus a standard normal offset.
    """
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-5.0, 5.0, (clusters, dim))
    points = centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, dim))
    sq = np.einsum("ij,ij->i", points, points)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * points @ points.T, 0.0)
    K = np.exp(-0.5 * d2)
    return (K + K.T) / 2  # exactly symmetric


def matrix(n: int, data_dir: Path):
    import sfapprox

    if n == 300:
        return small_matrix(data_dir)
    return (sfapprox.io.as_loaded(rbf_matrix(n), f"rbf-{n}"),
            f"RBF kernel of {n} seeded points in 3-D around 8 centres (dense, N = {n})")


def warm_up(names: list[str]) -> float:
    """Seconds of one compare of every method on a 32 x 32 matrix (loads what a process loads once)."""
    import sfapprox

    X = rbf_matrix(32, seed=1)
    start = time.perf_counter()
    sfapprox.compare(X, names, time_limit=1, device="cpu")
    return time.perf_counter() - start


def time_method(loaded, name: str, limit: float) -> dict:
    import sfapprox

    start = time.perf_counter()
    c = sfapprox.compare(loaded, [name], time_limit=limit, device="cpu")
    wall = time.perf_counter() - start
    r = c.results[0]
    return {"method": name, "n": loaded.n, "limit": limit, "status": r.status, "wall": wall,
            "ratio": wall / limit, "method_seconds": r.params.get("fit_seconds", r.seconds), "row_seconds": r.seconds, "stop_reason": r.params.get("stop_reason"),
            "rel_error": r.rel_error, "nnz": r.nnz, "budget": c.budget}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="300,3000", help="comma-separated N (300: the original matrix)")
    ap.add_argument("--limit", default="5,30", help="seconds: one for every size, or one per size")
    ap.add_argument("--methods", default=None, help="comma-separated methods (default: every method)")
    ap.add_argument("--no-together", action="store_true", help="skip the compare of every method at the defaults")
    ap.add_argument("--data-dir", default=str(ROOT / ".." / "shared" / "realdata"))
    ap.add_argument("--sfapprox", default=None, help="import sfapprox from this checkout (a 'before')")
    ap.add_argument("--name", default="time_limits", help="result file name (without extension)")
    ap.add_argument("--busy", type=int, default=0,
                    help="run this many CPU-bound competitor processes throughout (a busy machine)")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    limits = [float(s) for s in args.limit.split(",") if s.strip()]
    if len(limits) == 1:
        limits = limits * len(args.sizes)
    if len(limits) != len(args.sizes):
        ap.error(f"--limit gives {len(limits)} limits for {len(args.sizes)} sizes; give one, or one per size")
    args.limits = limits
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # This checkout's sfapprox (or --sfapprox's), not whichever one the environment installed.
    sys.path.insert(0, str(Path(args.sfapprox).resolve() if args.sfapprox else ROOT))
    import sfapprox

    warnings.simplefilter("ignore")
    names = list(sfapprox.available_methods())
    chosen = names if args.methods is None else [m.strip() for m in args.methods.split(",") if m.strip()]
    given = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python benchmarks/time_limits.py", *given])
    load = os.getloadavg()[0]
    # Competitors (a busy machine): plain CPU-bound loops, ended (by their own ids) at the end.
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        return run(args, names, chosen, command, load)
    finally:
        for proc in busy:
            proc.terminate()
            proc.wait()


def run(args, names: list[str], chosen: list[str], command: str, load: float) -> int:
    import sfapprox

    warm = warm_up(names)
    print(json.dumps({"warm_up_seconds": warm, "sfapprox": sfapprox.__file__}), flush=True)
    rows, matrices = [], {}
    for n, limit in zip(args.sizes, args.limits):
        loaded, what = matrix(n, Path(args.data_dir))
        matrices[str(loaded.n)] = what
        for name in chosen:
            rows.append(time_method(loaded, name, limit))
            print(json.dumps(rows[-1]), flush=True)
    together = None
    if not args.no_together:
        loaded, what = matrix(min(args.sizes), Path(args.data_dir))
        start = time.perf_counter()
        full = sfapprox.compare(loaded, names, device="cpu")
        total = time.perf_counter() - start
        together = {"n": loaded.n, "seconds": total, "time_limit": full.settings["time_limit"],
                    "per_method": {r.method: r.seconds for r in full.results},
                    "limits": {r.method: r.time_limit for r in full.results}, "verdict": full.verdict()}
        print(json.dumps({"all_methods_default_seconds": total, "per_method": together["per_method"]}), flush=True)
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d"),
            "matrices": matrices, "sizes": args.sizes, "limits": args.limits, "load_average_at_start": load,
            "load_average_at_end": os.getloadavg()[0], "warm_up_seconds": warm, "command": command,
            "competitors": args.busy}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows, "all_methods": together},
                                                      indent=1) + "\n")
    (OUT / f"{args.name}.md").write_text(render(meta, rows, together, names))
    return 0


def render(meta: dict, rows: list[dict], together: dict | None, names: list[str]) -> str:
    lines = [f"# Time limits bound whole methods ({meta['date']})", "",
             f"Machine: {meta['machine']}; load average {meta['load_average_at_start']:.2f} at start, "
             f"{meta['load_average_at_end']:.2f} at the end"
             + (f", beside {meta['competitors']} CPU-bound competitor process(es) (`--busy`)"
                if meta["competitors"] else "")
             + f". Command: `{meta['command']}`.", "",
             "Matrices: " + "; ".join(f"N = {n}: {what}" for n, what in meta["matrices"].items()) + ".", "",
             f"Warm-up (one compare of every method on a 32 x 32 matrix first, loading what a process loads "
             f"once): {meta['warm_up_seconds']:.1f} s.", ""]
    for n in dict.fromkeys(r["n"] for r in rows):
        sized = [r for r in rows if r["n"] == n]
        limit = sized[0]["limit"]
        worst = max(r["ratio"] for r in sized)
        lines += [f"## N = {n}, each method alone, `time_limit={limit:g}` (worst: {worst:.2f} x the limit)", "",
                  "| method | status | wall seconds (whole compare call) | / limit | method's own seconds | stop "
                  "| stored / budget | relative error |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in sized:
            err = "–" if r["rel_error"] is None else f"{r['rel_error']:.4g}"
            own = "–" if r["method_seconds"] is None else f"{r['method_seconds']:.2f}"
            stored = "–" if r["nnz"] is None else f"{r['nnz']:,} / {r['budget']:,}"
            lines.append(f"| {r['method']} | {r['status']} | {r['wall']:.2f} | {r['ratio']:.2f} | {own} | "
                         f"{r['stop_reason'] or '–'} | {stored} | {err} |")
        lines.append("")
    if together is not None:
        lines += [f"## Every method together, default settings (N = {together['n']})", "",
                  f"`compare(matrix, [{', '.join(names)}])` with `time_limit=\"auto\"` (the methods share 120 s, "
                  f"at most 60 s each, closed-form ones first): **{together['seconds']:.1f} s** in all.", "",
                  "| method | seconds | its limit |", "|---|---|---|"]
        lines += [f"| {m} | {'–' if s is None else f'{s:.2f}'} | "
                  f"{'–' if together['limits'].get(m) is None else format(together['limits'][m], '.1f')} |"
                  for m, s in together["per_method"].items()]
        verdict = together["verdict"]
        lines += ["", f"Verdict: {verdict['text'] if verdict else '–'}", ""]
    lines += ["## Findings (written by hand after the run)", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
