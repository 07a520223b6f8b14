"""SF fitted from column blocks (issue 25, goal 3): measured peak memory against the estimate, and seconds per pass.

Run by hand (not part of the tests); about 3 minutes on 2 cores:

    python benchmarks/column_fit.py [--sizes 8192,16384,32768,65536] [--steps 8] [--max-memory 4G]

For each N, in a fresh process: the RBF kernel (bandwidth 2) of ``scale_sources``' seeded 32-cluster
cloud in 16 dimensions as a :class:`~sfapprox.sources.KernelMatrix` (never formed); the
process's resident memory after the points are made (VmRSS) is the baseline; then
``ChordSF(max_iter=--steps, time_limit=None, max_memory=--max-memory).fit(K)``, whose in-memory
fit is over the limit at these sizes, so it runs from column blocks.  Reported: the peak resident
memory (``resource.getrusage``) less the baseline against the estimate the fit checked
(:func:`sfapprox.sf._columns.column_fit_memory` plus the libraries' working sets), what the
in-memory fit would need (:func:`sfapprox.sf.model.estimate_fit_memory`), the seconds of a
step after the first (median) and of a pass over all N columns.

``--versus N --seconds S``: at a formable N, the same kernel fitted for S seconds by the in-memory
L-BFGS (identity start, as the column path starts) and from column blocks (forced by a memory
limit between the two estimates), both scored exactly: what the column path's passes buy.

Writes benchmarks/results/column_fit.json and column_fit.md (a run of one mode keeps the other's rows).
"""

from __future__ import annotations

import argparse
import json
import math
import time

from _common import OUT, command_line, machine, meta, run_child, write_results

NAME = "column_fit"


def one(n: int, steps: int, max_memory: str) -> dict:
    """One fit from columns in this (fresh) process: memory and step times."""
    import resource

    import numpy as np
    from scale_sources import BANDWIDTH, cloud

    from sfapprox import ChordSF
    from sfapprox._settings import parse_size
    from sfapprox.sf._columns import column_fit_memory
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET, estimate_fit_memory
    from sfapprox.sources import KernelMatrix

    def rss() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))

    K = KernelMatrix(cloud(n), bandwidth=BANDWIDTH)
    base = rss()
    stamps = [time.perf_counter()]
    sf = ChordSF(max_iter=steps, time_limit=None, max_memory=parse_size(max_memory), device="cpu",
                 callback=lambda info: stamps.append(time.perf_counter()))
    sf.fit(K)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    m, k = sf.factors_.shape[0], sf.factors_.shape[2]
    width, batch = sf.params_["block_width"], sf.params_["batch"]
    estimate = column_fit_memory(n, m, k, width) + LIBRARY_WORKING_SET + COMPILED_WORKING_SET
    step = float(np.median(np.diff(stamps)[1:]))  # the first includes the scale's pilot columns
    return {"n": n, "n_factors": m, "n_offsets": k, "stored": int(sf.n_stored_), "path": sf.params_["path"],
            "block_width": width, "batch": batch, "steps": sf.n_iter_, "rss_before": base, "peak_rss": peak,
            "allocated": peak - base, "estimate": estimate,
            "in_memory_estimate": estimate_fit_memory(n, m, k, 8, 50, "cpu", reach=n // 2, n_starts=2,
                                                      input_bytes=8 * n * n),
            "step_seconds": step, "pass_seconds": step * math.ceil(n / batch), "threads": sf.threads_,
            "max_memory": max_memory}


def versus(n: int, seconds: float) -> dict:
    """In-memory L-BFGS against the column path on the same formed kernel, ``seconds`` each."""
    import warnings

    import numpy as np
    from scale_sources import BANDWIDTH, cloud

    from sfapprox import ChordSF
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET
    from sfapprox.sf._columns import COLUMN_WIDTH, column_fit_memory
    from sfapprox.sources import KernelMatrix

    warnings.simplefilter("ignore")
    X = KernelMatrix(cloud(n), bandwidth=BANDWIDTH).to_dense()
    m = math.ceil(math.log2(n))
    limit = column_fit_memory(n, m, m + 1, COLUMN_WIDTH) + LIBRARY_WORKING_SET + COMPILED_WORKING_SET + (64 << 20)
    rows = []
    for label, params in (("L-BFGS in memory", {"init": "identity"}), ("from column blocks", {"max_memory": limit})):
        sf = ChordSF(time_limit=seconds, device="cpu", **params).fit(X)
        rows.append({"run": label, "rel_error": float(sf.rel_error_), "iterations": int(sf.n_iter_),
                     "passes": sf.params_.get("epochs", sf.n_evals_), "path": sf.params_.get("path", "in memory"),
                     "seconds": sf.seconds_})
    return {"n": n, "seconds": seconds, "rows": rows}


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def render(data: dict) -> list[str]:
    info = data["meta"]
    lines = [f"# SF from column blocks: memory and seconds per pass ({info['date']})", "",
             f"Command: `{info['command']}`", "",
             f"Machine: {info['machine']}; load average at start {info['load_average_at_start']}.", "",
             "| N | M × K | stored | in-memory fit would need | estimate (checked) | allocated (peak − before) | "
             "peak RSS | allocated / estimate | block width | s per step (256 columns) | s per pass over N columns | threads |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['n']:,} | {r['n_factors']} × {r['n_offsets']} | {r['stored']:,} | "
                     f"{_gib(r['in_memory_estimate'])} | {_gib(r['estimate'])} | {_gib(r['allocated'])} | "
                     f"{_gib(r['peak_rss'])} | {r['allocated'] / r['estimate']:.2f} | {r['block_width']} | "
                     f"{r['step_seconds']:.3f} | {r['pass_seconds']:.0f} | {r['threads']} |")
    lines += ["", "Goal (issue 25, goal 3): the fit's own state O(N K M) plus O(N b) workspace, and measured "
              "peak ≤ estimate at N = 8,192 … 65,536."]
    if data.get("versus"):
        v = data["versus"]
        lines += ["", f"## What the passes buy: N = {v['n']:,}, {v['seconds']:g} s each (`{v['command']}`)", "",
                  "| run | relative error (exact) | iterations / steps | passes over the columns | seconds |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['run']} | {r['rel_error']:.4f} | {r['iterations']} | {r['passes']} | {r['seconds']:.1f} |"
                  for r in v["rows"]]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8192,16384,32768,65536")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--max-memory", default="4G")
    ap.add_argument("--versus", type=int, default=None, metavar="N", help="only the L-BFGS / column path comparison")
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    path = OUT / f"{NAME}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    if args.versus:
        data["versus"] = {**run_child(NAME, "versus", [args.versus, args.seconds]), "command": command_line()}
        print(json.dumps(data["versus"], indent=1), flush=True)
    else:
        rows = []
        for n in [int(s) for s in args.sizes.split(",") if s]:
            rows.append(run_child(NAME, "one", [n, args.steps, args.max_memory]))
            r = rows[-1]
            print(f"N={n}: allocated {_gib(r['allocated'])} of estimate {_gib(r['estimate'])}; "
                  f"{r['step_seconds']:.3f} s per step, {r['pass_seconds']:.0f} s per pass", flush=True)
        data.update(meta=meta(machine=machine(), steps=args.steps, max_memory=args.max_memory), rows=rows)
    write_results(NAME, data, render(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
