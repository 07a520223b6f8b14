"""TruncatedSVD's exact solver on a symmetric matrix: this checkout against another, in one run.

Run by hand (not part of the tests):

    python benchmarks/symmetric_svd.py --sfapprox /tmp/WT-before [--sizes 1000,2000] [--rounds 2] [--rank 65]

Each cell runs in a fresh interpreter on one BLAS thread (``OMP_NUM_THREADS=1``, as the tests and a
busy machine run): the RBF kernel (median bandwidth) of N seeded Gaussian points in 5 dimensions, as a
user's ``.npy`` would hold it, then ``TruncatedSVD(n_components=rank, solver="exact").fit`` timed, its
peak RSS over the RSS before the fit (``resource.getrusage``) and its Frobenius error.  The two checkouts
alternate, ``--rounds`` times, so that a busy moment of the shared machine falls on both; the run stops
if they were given different matrices (the SHA-256 of its bytes).  Writes
benchmarks/results/symmetric_svd.json and .md.
"""

from __future__ import annotations

import argparse
import os

from _common import ROOT, alternating_rows, findings_lines, machine, meta, write_results


def one(n: int, rank: int) -> dict:
    """Fit the exact TSVD at order ``n`` in this (fresh) process: seconds, peak RSS over the start, error."""
    import hashlib
    import resource
    import time
    from pathlib import Path

    import numpy as np

    import sfapprox
    from sfapprox import TruncatedSVD

    points = np.random.default_rng(0).standard_normal((n, 5))
    d2 = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    X = np.exp(-d2 / (2 * np.median(d2)))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    began = time.perf_counter()
    fit = TruncatedSVD(n_components=rank, solver="exact", time_limit=None).fit(X)
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"n": n, "rank": rank, "seconds": seconds, "peak_over_mib": max(0, peak - base) / 2**20,
            "fro_error": float(np.linalg.norm(X - fit.to_dense())),
            "sha256": hashlib.sha256(X.tobytes()).hexdigest(), "sfapprox": str(Path(sfapprox.__file__).parent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,2000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rank", type=int, default=65)
    parser.add_argument("--sfapprox", required=True, help="the other checkout (before), run by its PYTHONPATH")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # the children's BLAS: one thread, as on a busy machine
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = alternating_rows("symmetric_svd", sizes, args.rounds, [args.rank], args.sfapprox,
                            lambda r: f"{r['seconds']:.2f} s, {r['peak_over_mib']:,.0f} MiB over the start, "
                                      f"error {r['fro_error']:.10g}")
    import numpy as np

    data = {**meta(machine=machine(numpy=np.__version__), rank=args.rank, other=args.sfapprox), "rows": rows}
    lines = [f"# Exact TSVD of a symmetric matrix, before and after ({data['date']})", "",
             f"Machine: {data['machine']}; load average at start {data['load_average_at_start']}. "
             f"Command: `{data['command']}`. Matrix: the RBF kernel (median bandwidth) of N seeded Gaussian "
             f"points in 5 dimensions; `TruncatedSVD(n_components={args.rank}, solver='exact')`, one BLAS thread; "
             "each cell a fresh process, the checkouts alternating, the same matrix (SHA-256 of its bytes).", "",
             "| N | checkout | seconds | peak RSS over the start (MiB) | ‖X − X̂‖_F |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['checkout']} | {r['seconds']:.2f} | {r['peak_over_mib']:,.0f} | {r['fro_error']:.10g} |"
              for r in rows]
    lines += ["", *findings_lines(data, "(to be written)")]
    write_results("symmetric_svd", data, lines)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
