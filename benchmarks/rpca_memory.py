"""Robust PCA in memory: its peak memory against the estimate its memory check uses.

Run by hand (not part of the tests):

    python benchmarks/rpca_memory.py [--sizes 1024,2048,3000,4096] [--methods godec,pcp]
        [--seconds 60] [--sfapprox PATH --tag rpca_memory-before]

Each cell runs in a fresh interpreter: the libraries warmed on a small fit first, then a seeded X
(rank 20 plus 2 % spikes plus noise, float64), then ``RobustPCA(budget=N K M, method=...,
time_limit=...)`` — SF's budget, the comparison's setting — on the CPU.  Measured from Linux's
``/proc/self/status``: the peak RSS (``VmHWM``, reset once X is made, so that making it does not
count) over the RSS before X was made, so X is counted, as the estimate counts it (what
``RobustPCA.fit`` checks against ``max_memory``).  Writes benchmarks/results/<tag>.json and .md (tag default ``rpca_memory``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _common import ROOT, checkout_env, machine, meta, proc_status, reset_peak, run_child, write_results


def planted(n: int, seed: int = 0):
    """Rank 20, plus 2 % of the entries spiked, plus Gaussian noise of 1e-3 (float64), made in place
    (row blocks, no N x N temporary)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((n, 20)) / np.sqrt(20), rng.standard_normal((20, n))
    X = np.empty((n, n))
    for r in range(0, n, 256):
        X[r:r + 256] = A[r:r + 256] @ B
        X[r:r + 256] += 1e-3 * rng.standard_normal((min(256, n - r), n))
    flat = X.reshape(-1)
    spikes = rng.choice(flat.size, size=flat.size // 50, replace=False)
    flat[spikes] += rng.choice([-5.0, 5.0], size=spikes.size)
    return X



def one(n: int, method: str, seconds: float) -> dict:
    """RobustPCA at order ``n`` in this process: seconds, peak RSS over the start (X included), the error."""
    import numpy as np

    import sfapprox
    from sfapprox import RobustPCA
    from sfapprox.baselines import rpca
    from sfapprox.chord import default_n_factors, support_offsets

    RobustPCA(budget=4000, method=method, device="cpu").fit(planted(64))  # libraries' first working sets
    base = proc_status("VmRSS")
    X = planted(n)
    reset_peak()  # the peak from here on: X's making left out
    budget = n * support_offsets(n, "chord").size * default_n_factors(n)
    est = RobustPCA(budget=budget, method=method, device="cpu", time_limit=seconds)
    array = 8 * n * n
    if hasattr(rpca, "work_bytes"):  # what the fit checks max_memory against
        estimate = rpca.work_bytes(n, method, [rank for rank, _ in est._splits(n)])
    else:  # the checkouts before it: a fixed count of arrays
        estimate = rpca._WORK_ARRAYS * array
    began = time.perf_counter()
    fit = est.fit(X, check_input=False)
    elapsed = time.perf_counter() - began
    peak = proc_status("VmHWM")
    return {"n": n, "method": method, "seconds": elapsed, "budget": budget, "peak_over_bytes": peak - base,
            "arrays": (peak - base) / array, "estimate_bytes": estimate, "estimate_arrays": estimate / array,
            "rel_error": float(np.linalg.norm(X - fit.to_dense()) / np.linalg.norm(X)),
            "rank": fit.rank_, "n_sparse": fit.n_sparse_, "stop_reason": fit.stop_reason_,
            "iterations": fit.params_["iterations"], "sfapprox": str(Path(sfapprox.__file__).parent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024,2048,3000,4096")
    parser.add_argument("--methods", default="godec,pcp")
    parser.add_argument("--seconds", type=float, default=60.0, help="RobustPCA's time_limit")
    parser.add_argument("--sfapprox", default=None, help="run this checkout's sfapprox (its PYTHONPATH)")
    parser.add_argument("--tag", default="rpca_memory")
    args = parser.parse_args()
    env = checkout_env(args.sfapprox)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for method in args.methods.split(","):
            rows.append(run_child("rpca_memory", "one", [n, method, args.seconds], env=env))
            r = rows[-1]
            print(f"N={n} {method}: {r['seconds']:.1f} s, {r['arrays']:.2f} arrays of N x N "
                  f"(estimate {r['estimate_arrays']:.2f}), rel {r['rel_error']:.4g}", flush=True)
    import numpy as np

    lines = [f"# Robust PCA in memory: peak memory against its estimate ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine(numpy=np.__version__)}. Command: `{meta()['command']}`"
             + (f" (sfapprox from `{args.sfapprox}`)" if args.sfapprox else "") + ". X: rank 20 + 2 % spikes "
             "+ noise 1e-3, float64; budget N K M (SF's); peak RSS over the RSS before X was made, in "
             "N x N float64 arrays (X is one of them, as in the estimate).", "",
             "| N | method | peak, arrays of N x N | estimate, arrays | peak / estimate | seconds | rank | "
             "sparse entries | relative error | stop |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        est = r["estimate_arrays"]
        lines.append(f"| {r['n']:,} | {r['method']} | {r['arrays']:.2f} | {est:.2f} | "
                     f"{r['arrays'] / est:.2f} | {r['seconds']:.1f} | {r['rank']} | {r['n_sparse']:,} | "
                     f"{r['rel_error']:.4g} | {r['stop_reason']} |")
    write_results(args.tag, {**meta(machine=machine(numpy=np.__version__)), "rows": rows}, lines)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
