"""SF and TSVD on the paper's Table 1 matrices found in ../shared/realdata.

Run by hand (not part of the tests):

    python benchmarks/paper_table1.py [--iters N] [--time-limit S] [--only strike,sawmill] [--set key=value]
                                      [--data-dir ../shared/realdata]

Without options SF runs with ChordSF's defaults (the figures users get); --time-limit 0 removes
the time limit.

Writes benchmarks/results/paper_table1.json and benchmarks/results/paper_table1.md: our SF
and TSVD errors beside the paper's, SF's seconds, iterations and stop reason, and the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from _common import DEFAULT_DATA_DIR, machine, meta, write_results

# name, file, loader options, paper TSVD, paper SF
CASES = [
    ("strike", "pajek/strike.paj", {}, 2.73, 1.04),
    ("sawmill", "pajek/Sawmill.net", {}, 3.24, 1.03),
    ("mexican_power", "pajek/mexican_power.paj", {}, 3.85, 1.71),
    ("world_trade", "pajek/world_trade.paj", {}, 8.65e4, 4.47e4),
    ("mesh1e1", "suitesparse/mesh1e1_structural_48_48_177.mtx", {}, 18.7, 9.82),
    ("mesh2e1", "suitesparse/mesh2e1.mtx", {"format": "ijv"}, 248, 347),  # the local copy is header-less
    ("webkb_cornell", "linqs_webkb/cornell.cites", {}, 6.98, 4.80),
    ("aura_sonar", "chen2009_similarity/aural_sonar.mat", {}, 8.54, 8.68),
]


def main() -> int:
    import torch

    import sfapprox
    from sfapprox.baselines.tsvd import TruncatedSVD

    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=None, help="max_iter (default: ChordSF's)")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds, 0 for none (default: ChordSF's)")
    ap.add_argument("--only", default="")
    ap.add_argument("--tag", default="paper_table1")
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR), help="the real matrices (default ../shared/realdata, "
                    "or $SFAPPROX_REALDATA)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra ChordSF parameter, e.g. --set history_size=20 --set init=identity")
    args = ap.parse_args()
    real = Path(args.data_dir).resolve()
    if not real.is_dir():
        print(f"{real} not found", file=sys.stderr)
        return 1
    only = {s for s in args.only.split(",") if s}
    extra = {}
    if args.iters is not None:
        extra["max_iter"] = args.iters
    if args.time_limit is not None:
        extra["time_limit"] = args.time_limit or None
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            extra[key] = json.loads(value)
        except json.JSONDecodeError:
            extra[key] = value
    rows = []
    warnings.simplefilter("ignore")
    for name, rel, opts, paper_tsvd, paper_sf in CASES:
        if only and name not in only:
            continue
        m = sfapprox.load_matrix(real / rel, **opts)
        X = m.to_dense()
        n = X.shape[0]
        M = math.ceil(math.log2(n))
        tsvd = TruncatedSVD(n_components=math.ceil(M * M / 2)).fit(X)
        tsvd_err = float(np.linalg.norm(X - tsvd.to_dense()))
        t0 = time.perf_counter()
        sf = sfapprox.ChordSF(device="cpu", **extra).fit(X)
        wall = time.perf_counter() - t0
        row = {
            "matrix": name, "n": n, "nnz": int(np.count_nonzero(X)),
            "tsvd": tsvd_err, "paper_tsvd": paper_tsvd,
            "sf": sf.fro_error_, "paper_sf": paper_sf, "ratio": sf.fro_error_ / paper_sf,
            "seconds": sf.seconds_, "wall_seconds": wall, "iterations": sf.n_iter_,
            "stop_reason": sf.stop_reason_, "init": sf.init_, "threads": getattr(sf, "threads_", None),
            "loadavg": os.getloadavg()[0],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    defaults = sfapprox.ChordSF()
    command = ("python benchmarks/paper_table1.py"
               + (f" --iters {args.iters}" if args.iters is not None else "")
               + (f" --time-limit {args.time_limit:g}" if args.time_limit is not None else "")
               + "".join(f" --set {item}" for item in args.set)
               + (f" --tag {args.tag}" if args.tag != "paper_table1" else ""))
    info = meta(command, machine=machine(numpy=np.__version__,
                                         torch=f"{torch.__version__} ({torch.get_num_threads()} threads)"),
                max_iter=extra.get("max_iter", defaults.max_iter),
                time_limit=extra.get("time_limit", defaults.time_limit), extra=extra)
    lines = [f"# SF vs the paper's Table 1 ({info['date']})", "",
             f"Machine: {info['machine']}. Settings: ChordSF with max_iter={info['max_iter']}, "
             f"time_limit={info['time_limit']}, other parameters {extra or 'default'}. "
             f"Command: `{command}`. Load average (1 min) during the rows: "
             + (f"{min(r['loadavg'] for r in rows):.2f}–{max(r['loadavg'] for r in rows):.2f}" if rows else "–")
             + ".", "",
             "| matrix | N | TSVD (ours) | TSVD (paper) | SF (ours) | SF (paper) | ours/paper | seconds | iterations | stop | start |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['matrix']} | {r['n']} | {r['tsvd']:.4g} | {r['paper_tsvd']:.3g} | {r['sf']:.4g} | "
                     f"{r['paper_sf']:.3g} | {r['ratio']:.3f} | {r['seconds']:.1f} | {r['iterations']} | {r['stop_reason']} | {r['init']} |")
    write_results(args.tag, {"meta": info, "rows": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
