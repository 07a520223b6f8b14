"""The `sparse` method's selection of the k largest entries of a dense X in memory: at once, or by
column blocks (the pass a source gets, which a dense X above ``STREAMED_MIN_N`` now takes too).

Run by hand (not part of the tests):

    python benchmarks/sparse_selection.py [--sizes 4096,8192,16384] [--sfapprox PATH --tag sparse_selection-before]

Each cell runs in a fresh interpreter: a random float64 X (seeded), ``k = N K M / 2`` (about the
entries SF's budget buys), then ``SparseApproximation(n_sparse=k).fit(X)`` — the code path the
checkout takes — timed, with the peak RSS over the RSS after X was made (``resource.getrusage``).
Writes benchmarks/results/<tag>.json and .md (tag default ``sparse_selection``).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from _common import ROOT, checkout_env, machine, meta, run_child, write_results


def one(n: int) -> dict:
    """The selection at order ``n`` in this process: seconds, peak RSS over the start, a checksum."""
    import numpy as np

    import sfapprox
    from sfapprox.baselines.sparse import SparseApproximation
    from sfapprox.chord import default_n_factors, support_offsets

    X = np.random.default_rng(0).standard_normal((n, n))
    k = n * support_offsets(n, "chord").size * default_n_factors(n) // 2
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    began = time.perf_counter()
    fit = SparseApproximation(n_sparse=k).fit(X, check_input=False)
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"n": n, "k": k, "seconds": seconds, "peak_over_bytes": max(0, peak - base),
            "kept_abs_sum": float(np.abs(fit.S_.data).sum()), "sfapprox": str(Path(sfapprox.__file__).parent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4096,8192,16384")
    parser.add_argument("--sfapprox", default=None, help="run this checkout's sfapprox (its PYTHONPATH)")
    parser.add_argument("--tag", default="sparse_selection")
    args = parser.parse_args()
    env = checkout_env(args.sfapprox)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.append(run_child("sparse_selection", "one", [n], env=env))
        print(f"N={n}: {rows[-1]['seconds']:.2f} s, {rows[-1]['peak_over_bytes'] / 2**20:,.0f} MiB", flush=True)
    import numpy as np

    lines = [f"# sparse: the k largest entries of a dense X in memory ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine(numpy=np.__version__)}. Command: `{meta()['command']}`"
             + (f" (sfapprox from `{args.sfapprox}`)" if args.sfapprox else "") + ".", "",
             "| N | k | seconds | peak RSS over X (MiB) | sum of the kept magnitudes |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['k']:,} | {r['seconds']:.2f} | {r['peak_over_bytes'] / 2**20:,.0f} | "
              f"{r['kept_abs_sum']:.6f} |" for r in rows]
    write_results(args.tag, {**meta(machine=machine(numpy=np.__version__)), "rows": rows}, lines)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
