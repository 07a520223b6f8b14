"""Forming an RBF kernel matrix (``KernelMatrix.to_dense``): this checkout against another, in one run.

Run by hand (not part of the tests):

    python benchmarks/kernel_form.py --sfapprox /tmp/WT-before [--sizes 4096,8192] [--rounds 2] [--dim 16]

Each cell runs in a fresh interpreter: the RBF kernel (bandwidth 2) of ``scale_sources``' seeded cloud of
32 clusters in ``--dim`` dimensions, formed under the default memory limit, timed, with the peak RSS over
the RSS before forming (``resource.getrusage``) and the SHA-256 of the formed matrix's bytes.  The two
checkouts alternate, ``--rounds`` times, so that a busy moment of the shared machine falls on both; the
run stops if their matrices differ in a single bit.  Writes benchmarks/results/kernel_form.json and .md.
"""

from __future__ import annotations

import argparse
import os

from _common import ROOT, alternating_rows, findings_lines, machine, meta, write_results


def one(n: int, dim: int) -> dict:
    """Form the kernel at order ``n`` in this (fresh) process: seconds, peak RSS over the start, digest."""
    import hashlib
    import resource
    import time
    from pathlib import Path

    import sfapprox
    from scale_sources import cloud
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(cloud(n, dim), bandwidth=2.0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    began = time.perf_counter()
    X = K.to_dense()
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"n": n, "seconds": seconds, "peak_over_mib": max(0, peak - base) / 2**20,
            "sha256": hashlib.sha256(X.tobytes()).hexdigest(), "sfapprox": str(Path(sfapprox.__file__).parent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--sfapprox", required=True, help="the other checkout (before), run by its PYTHONPATH")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = alternating_rows("kernel_form", sizes, args.rounds, [args.dim], args.sfapprox,
                            lambda r: f"{r['seconds']:.2f} s, {r['peak_over_mib']:,.0f} MiB over the start")
    import numpy as np

    data = {**meta(machine=machine(numpy=np.__version__), dim=args.dim, other=args.sfapprox), "rows": rows}
    lines = [f"# Forming an RBF kernel matrix, before and after ({data['date']})", "",
             f"Machine: {data['machine']}; load average at start {data['load_average_at_start']}. "
             f"Command: `{data['command']}`. Points: `scale_sources.cloud(N, {args.dim})`, bandwidth 2, the default "
             "memory limit; each cell a fresh process, the checkouts alternating. Before and after formed the "
             "same matrix at every N (the SHA-256 of its bytes).", "",
             "| N | checkout | seconds | peak RSS over the start (MiB) | sha256 (first 12) |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['checkout']} | {r['seconds']:.2f} | {r['peak_over_mib']:,.0f} | {r['sha256'][:12]} |"
              for r in rows]
    lines += ["", *findings_lines(data, "(to be written)")]
    write_results("kernel_form", data, lines)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
