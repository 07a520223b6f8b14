"""Does every method stay within its time limit as a whole?  And how long does a default compare of
every method take?

Run by hand (not part of the tests); about 4 minutes on 2 cores:

    python benchmarks/time_limits.py [--limit 5] [--data-dir ../shared/realdata]

On a 300 x 300-class matrix (mesh2e1, N = 306, when the shared real data is present; otherwise a
random 300 x 300 matrix with a planted low-rank + sparse structure), each registered method runs
alone through ``sfapprox.compare`` with ``time_limit=LIMIT``: its wall time (the whole call: setup,
fit and scoring; loading excluded) against the limit.  Then ``sfapprox.compare`` of every method with
the default settings (``time_limit="auto"``: the methods share 120 s, at most 60 s each), timed as a
whole.  Writes benchmarks/results/time_limits.json and time_limits.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"


def matrix(data_dir: Path):
    import sfapprox

    path = data_dir / "suitesparse" / "mesh2e1.mtx"
    if path.is_file():
        return sfapprox.load_matrix(path, format="ijv"), "mesh2e1 (N = 306, SuiteSparse)"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 300))
    X[rng.random((300, 300)) < 0.01] += 5.0
    return sfapprox.io.as_loaded(np.abs(X), "planted-300"), "planted low rank + sparse, N = 300 (no real data found)"


def main() -> int:
    import sfapprox

    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=5.0)
    ap.add_argument("--data-dir", default=str(ROOT / ".." / "shared" / "realdata"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    loaded, what = matrix(Path(args.data_dir))
    names = list(sfapprox.available_methods())
    rows = []
    load = os.getloadavg()[0]
    for name in names:
        start = time.perf_counter()
        c = sfapprox.compare(loaded, [name], time_limit=args.limit, device="cpu")
        wall = time.perf_counter() - start
        r = c.results[0]
        rows.append({"method": name, "status": r.status, "wall": wall, "ratio": wall / args.limit,
                     "method_seconds": r.seconds, "stop_reason": r.params.get("stop_reason"),
                     "rel_error": r.rel_error})
        print(json.dumps(rows[-1]), flush=True)
    start = time.perf_counter()
    full = sfapprox.compare(loaded, names, device="cpu")
    total = time.perf_counter() - start
    per_method = {r.method: r.seconds for r in full.results}
    print(json.dumps({"all_methods_default_seconds": total, "per_method": per_method}), flush=True)
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d"),
            "matrix": what, "limit": args.limit, "load_average_at_start": load,
            "command": "python benchmarks/time_limits.py" + (f" --limit {args.limit:g}" if args.limit != 5 else "")}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "time_limits.json").write_text(json.dumps({"meta": meta, "rows": rows, "all_methods": {
        "seconds": total, "time_limit_per_method": full.settings["time_limit"], "per_method": per_method,
        "verdict": full.verdict()}}, indent=1) + "\n")
    lines = [f"# Time limits bound whole methods ({meta['date']})", "",
             f"Machine: {meta['machine']}; load average at start {load:.2f}. Command: `{meta['command']}`. "
             f"Matrix: {what}.", "",
             f"## Each method alone, `time_limit={args.limit:g}`", "",
             "| method | status | wall seconds (whole compare call) | / limit | method's own seconds | stop | relative error |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        err = "–" if r["rel_error"] is None else f"{r['rel_error']:.4g}"
        own = "–" if r["method_seconds"] is None else f"{r['method_seconds']:.2f}"
        lines.append(f"| {r['method']} | {r['status']} | {r['wall']:.2f} | {r['ratio']:.2f} | {own} | "
                     f"{r['stop_reason'] or '–'} | {err} |")
    lines += ["", "## Every method together, default settings", "",
              f"`compare(matrix, [{', '.join(names)}])` with `time_limit=\"auto\"` "
              f"({full.settings['time_limit']:g} s per method): **{total:.1f} s** in all.", "",
              "| method | seconds |", "|---|---|"]
    lines += [f"| {m} | {'–' if s is None else f'{s:.2f}'} |" for m, s in per_method.items()]
    lines += ["", f"Verdict: {full.verdict()['text'] if full.verdict() else '–'}", "",
              "## Findings (written by hand after the run)", ""]
    (OUT / "time_limits.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
