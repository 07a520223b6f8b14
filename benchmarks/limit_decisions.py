"""What the memory limit decides for a source: formed or read by columns, refused, or a point of "not applicable".

Run by hand (not part of the tests):

    python benchmarks/limit_decisions.py [--time-limit 5] [--sfapprox CHECKOUT] [--label NAME]
        [--merge] [--tag limit_decisions]

Three decisions that an audit found wrong (2026-12-05) and that were fixed, each run as the command a
user types, one fresh process per row (``python -m sfapprox`` of this checkout, or of ``--sfapprox``
through ``PYTHONPATH``), with its exit code, wall seconds and measured peak RSS (the child's
``ru_maxrss``: it counts the ~280 MiB of the interpreter and its libraries):

- ``covariance``: ``compare TABLE.npy --covariance`` (3,000 samples x 1,500 features; the covariance
  17.2 MiB) at limits from 40M: a covariance was formed by its own size alone, and its scoring then
  refused what a smaller limit ran from columns;
- ``sf-kernel``: ``compare POINTS.npy --kernel rbf --methods sf`` (2,000 points) around 255M-260M:
  the kernel was formed where it fitted beside nothing, and SF's fit beside it refused;
- ``sweep``: ``sweep POINTS.npy --kernel rbf --budgets 0.01,0.05,0.5`` (4,000 points) under 60M, the
  last budget over the limit for every method: the sweep ended whole; now that budget is a point of
  "not applicable" rows;
- ``sparse-npy``: ``compare SPARSE.npy --methods sparse,rsvd --budget 0.02`` (6,000 x 6,000, 0.1 %
  non-zeros, stored dense: mapped) under 150M: top-s keeps every non-zero, and its row was sampled
  ("0 ± ?"); its own pass now scores it exactly;
- ``sparse-kernel``: ``compare POINTS.npy --kernel rbf --methods sparse,nystrom --budget 0.0005`` (40,000
  points) under 400M: one scoring pass does not fit the time, the rows are sampled; top-s's is exact now.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from _common import add_checkout_options, checkout_env, measure_command, run_tables, write_runs

#: Each case: its input (written once), the command's arguments after the file, and the limits tried.
CASES = {
    "covariance": ("table.npy", ["compare", "--covariance", "--methods", "rsvd,sparse,nystrom"],
                   ["40M", "80M", "150M", "400M"]),
    "sf-kernel": ("pts2000.npy", ["compare", "--kernel", "rbf", "--methods", "sf"], ["255M", "260M", "400M", "1G"]),
    "sweep": ("pts4000.npy", ["sweep", "--kernel", "rbf", "--methods", "nystrom,sparse", "--budgets",
                              "0.01,0.05,0.5"], ["60M"]),
    # a sparse matrix stored dense in a .npy too big to load: mapped, compared from columns
    "sparse-npy": ("sparse6000.npy", ["compare", "--methods", "sparse,rsvd", "--budget", "0.02"], ["150M"]),
    # a kernel too big for one scoring pass in the time: the rows are sampled, but top-s is scored by its own pass
    "sparse-kernel": ("pts40000.npy", ["compare", "--kernel", "rbf", "--methods", "sparse,nystrom", "--budget",
                                       "0.0005"], ["400M"]),
}


def make_inputs(folder: Path, cases: list[str]) -> None:
    """The inputs of ``cases``: a correlated data table, three point clouds, a sparse 6,000 x 6,000 matrix with
    0.1 % non-zeros stored dense (seeded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    makers = {
        "table.npy": lambda: rng.standard_normal((3000, 1500)) @ rng.standard_normal((1500, 1500)) * 0.1,
        "pts2000.npy": lambda: rng.standard_normal((2000, 3)),
        "pts4000.npy": lambda: rng.standard_normal((4000, 3)),
        "sparse6000.npy": lambda: rng.standard_normal((6000, 6000)) * (rng.random((6000, 6000)) < 0.001),
        "pts40000.npy": lambda: rng.standard_normal((40000, 3)),
    }
    for file in dict.fromkeys(CASES[case][0] for case in cases):
        np.save(folder / file, makers[file]())


def rows_of(data: dict) -> list[dict]:
    """A comparison's rows, or every point's rows of a sweep (each with its budget)."""
    if "points" in data:
        return [{**r, "budget": p["budget"]} for p in data["points"] for r in p["results"]]
    return data["results"]


def one(case: str, limit: str, folder: Path, time_limit: float, env: dict) -> dict:
    """One run of ``case`` under ``limit``: its row."""
    file, args, _ = CASES[case]
    out = folder / "out.json"
    command = [sys.executable, "-m", "sfapprox", args[0], str(folder / file), *args[1:], "--time-limit",
               f"{time_limit:g}", "--max-memory", limit, "-q", "--json", str(out), "--force"]
    run = measure_command(command, env, cwd=str(folder))
    row = {"case": case, "limit": limit, "rc": run["rc"], "seconds": round(run["seconds"], 2),
           "peak_rss_mib": round(run["maxrss_kib"] / 1024, 1)}
    if run["rc"] == 0 and out.exists():
        data = json.loads(out.read_text())
        row["path"] = "columns" if (data.get("matrix") or {}).get("path") == "columns" else "formed"
        row["methods"] = "; ".join(_described(r) for r in rows_of(data))
    else:
        row["why"] = " ".join(run["stderr"].split())[-200:]
    out.unlink(missing_ok=True)
    return row


def _described(r: dict) -> str:
    """``[budget: ]method status [relative error [± half-width | (exact)]]``."""
    at = "" if r.get("budget") is None else f"{r['budget']:,}: "
    error = "" if r.get("rel_error") is None else f" {r['rel_error']:.4g}"
    estimate = r.get("error_estimate") or {}
    if error and estimate.get("rel_interval"):
        low, high = estimate["rel_interval"]
        error += " ± ?" if high is None else f" ± {(high - low) / 2:.2g}"
    elif error and estimate.get("exact"):
        error += " (exact)"
    return f"{at}{r['method']} {r['status']}{error}"


def render(data: dict) -> list[str]:
    lines = ["# What the memory limit decides for a source", "",
             f"Machine: {data['meta']['machine']}. Commands: "
             + ", ".join(f"`{c}`" for c in data.get("commands") or [data["meta"]["command"]]) + ".", "",
             f"`--time-limit {data['time_limit']:g}`; one fresh process per row; peak RSS is the child's "
             "`ru_maxrss` (with the ~280 MiB of the interpreter and its libraries). Cases: see the script's "
             "docstring.", ""]
    header = ["case", "--max-memory", "exit", "path", "rows (relative error)", "seconds", "peak RSS MiB", "why"]
    return lines + run_tables(data, header, lambda r: [r["case"], r["limit"], r["rc"], r.get("path", ""),
                                                       r.get("methods", ""), r["seconds"], r["peak_rss_mib"],
                                                       r.get("why", "")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--cases", default=",".join(CASES))
    add_checkout_options(ap, "limit_decisions")
    args = ap.parse_args()
    env = checkout_env(args.sfapprox)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = args.cases.split(",")
        make_inputs(folder, cases)
        for case in cases:
            for limit in CASES[case][2]:
                rows.append(one(case, limit, folder, args.time_limit, env))
                print(rows[-1], flush=True)
    write_runs(args, rows, {"time_limit": args.time_limit}, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
