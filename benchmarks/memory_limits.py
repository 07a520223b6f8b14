"""Does a higher ``--max-memory`` ever do worse?  SF on a large ``.npy``, one CLI run per limit.

Run by hand (not part of the tests):

    python benchmarks/memory_limits.py [--n 7000] [--limits 100M,200M,300M,400M,600M,1G]
        [--methods sf] [--time-limit 2] [--plot] [--sfapprox CHECKOUT] [--tag memory_limits]

A square ``.npy`` of order ``--n`` (the identity, float64, written through a memory map) is compared
with ``sfapprox compare FILE --methods sf[,...] --time-limit T --max-memory L -q --json OUT`` for every
limit ``L``, each run a fresh process (``python -m sfapprox`` of this checkout, or of ``--sfapprox``
through ``PYTHONPATH``).  Each row: the exit code, SF's status and error, the run's wall seconds
and its peak RSS (``ru_maxrss`` of the child, measured by a wrapper process of its own; it counts
the file's pages the run read through its map) and whether the matrix was formed or read by columns.

What it checks (found by an adversarial audit, 2026-11-27): SF's timing probe made a random dense
``N x N`` target (two copies) before any memory check, at any ``N`` up to 8,192; a ``.npy`` just
under the limit was loaded whole and left its methods nothing, so 400M refused what 300M ran.
With ``--methods sf,tsvd`` (2026-11-27): the matrix was formed for TSVD, whose own fit needed more
than the limit, and SF's fit from columns was then refused beside it.  With ``--plot`` (2026-11-27):
the panels formed X and every surrogate N x N after the fitting, whatever the limit.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _common import add_checkout_options, checkout_env, measure_command, run_tables, write_runs

def make_matrix(path: Path, n: int) -> None:
    """The identity of order ``n``, float64, written through a memory map (never held whole)."""
    import numpy as np

    a = np.lib.format.open_memmap(path, mode="w+", dtype="f8", shape=(n, n))
    a[np.arange(n), np.arange(n)] = 1.0
    a.flush()
    del a


def one(path: Path, limit: str, time_limit: float, env: dict, out: Path, methods: str = "sf",
        plot: Path | None = None) -> dict:
    """One ``compare`` run under ``limit`` (with ``--plot plot`` where given); its row."""
    command = [sys.executable, "-m", "sfapprox", "compare", str(path), "--methods", methods, "--time-limit",
               f"{time_limit:g}", "--max-memory", limit, "-q", "--json", str(out), "--force"]
    if plot is not None:
        command += ["--plot", str(plot)]
    run = measure_command(command, env)
    row = {"limit": limit, "rc": run["rc"], "seconds": round(run["seconds"], 2),
           "peak_rss_mib": round(run["maxrss_kib"] / 1024, 1)}
    if run["rc"] == 0 and out.exists():
        data = json.loads(out.read_text())
        sf = next(r for r in data["results"] if r["method"] == "sf")
        row.update(status=sf["status"], rel_error=sf.get("rel_error"), reason=(sf.get("reason") or "")[:160],
                   path="columns" if (data.get("matrix") or {}).get("path") == "columns" else "formed",
                   others="; ".join(f"{r['method']} {r['status']}" for r in data["results"] if r["method"] != "sf"))
        if plot is not None:
            row["others"] = "; ".join(filter(None, [row["others"], f"plot {'written' if plot.exists() else 'missing'}"]))
    else:
        row.update(status="refused", reason=" ".join(run["stderr"].split())[-160:])
    out.unlink(missing_ok=True)
    if plot is not None:
        plot.unlink(missing_ok=True)
    return row


def render(data: dict) -> list[str]:
    """The Markdown table of each run (checkout) in ``data``."""
    lines = ["# A higher --max-memory never does worse: SF on a large memory-mapped .npy", "",
             f"Machine: {data['meta']['machine']}. Commands: "
             + ", ".join(f"`{c}`" for c in data.get("commands") or [data["meta"]["command"]]) + ".", "",
             f"N = {data['n']:,} (the identity, {data['n'] ** 2 * 8 / 2**20:.1f} MiB as float64), "
             f"`--methods {data.get('methods', 'sf')}`, "
             f"`--time-limit {data['time_limit']:g}`{' `--plot PANEL.png`' if data.get('plot') else ''}; "
             "one fresh process per row; peak RSS is the child's "
             "`ru_maxrss` (it includes the file's pages read through the map).", ""]
    header = ["--max-memory", "exit", "SF", "relative error", "path", "other methods", "seconds", "peak RSS MiB",
              "why"]
    return lines + run_tables(data, header, lambda r: [
        r["limit"], r["rc"], r["status"], "" if r.get("rel_error") is None else f"{r['rel_error']:.4g}",
        r.get("path") or "", r.get("others") or "", r["seconds"], r["peak_rss_mib"],
        r.get("reason", "") if r["status"] != "ok" else ""])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=7000)
    ap.add_argument("--limits", default="100M,200M,300M,400M,600M,1G")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--methods", default="sf", help="the methods compared (SF first in the table)")
    ap.add_argument("--plot", action="store_true", help="each run also draws --plot (its memory counted)")
    add_checkout_options(ap, "memory_limits")
    args = ap.parse_args()
    env = checkout_env(args.sfapprox)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "identity.npy"
        make_matrix(path, args.n)
        rows = []
        for limit in args.limits.split(","):
            rows.append(one(path, limit, args.time_limit, env, Path(tmp) / "out.json", args.methods,
                            Path(tmp) / "panel.png" if args.plot else None))
            print(rows[-1], flush=True)
            time.sleep(0.5)
    write_runs(args, rows, {"n": args.n, "time_limit": args.time_limit, "methods": args.methods, "plot": args.plot},
               render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
