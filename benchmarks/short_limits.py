"""What a short ``--time-limit`` leaves SF in a fresh process, and how long ``info`` of a sparse file of a
large order takes: the user audit's findings (h_audit), before and after.

Run by hand (not part of the tests); about 2 minutes alone, twice that with ``--sfapprox``:

    python benchmarks/short_limits.py [--rounds 3] [--limits 0.1,0.3,1] [--order 4000000]
                                      [--sfapprox CHECKOUT] [--tag short_limits]

Each command runs as a fresh process (``python -m sfapprox ...``), so numba's start (0.3-0.5 s, once a
process) falls inside it as it does for a user: ``fit X.npy --time-limit T --json -`` and ``compare X.npy
--methods sf --time-limit T --json -`` on a 30 x 30 Gaussian matrix (seed 0), for each limit ``T``, record
SF's iterations, relative error and fit seconds; ``info`` of a Matrix Market file of order ``--order`` with two
entries (kept sparse) records its wall seconds.  ``--sfapprox`` runs every command from another checkout too
(``PYTHONPATH``), alternating with this one round by round, so that both share the machine's moments.
Writes benchmarks/results/<tag>.json and <tag>.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import checkout_env, findings_lines, meta, write_results


def _inputs(folder: Path, order: int) -> tuple[Path, Path]:
    """The 30 x 30 matrix and the sparse file of order ``order``, written in ``folder``."""
    dense = folder / "gauss30.npy"
    np.save(dense, np.random.default_rng(0).standard_normal((30, 30)))
    sparse = folder / f"order{order}.mtx"
    sparse.write_text(f"%%MatrixMarket matrix coordinate real general\n{order} {order} 2\n1 1 1\n2 2 1\n")
    return dense, sparse


def _sf_row(argv: list[str], env: dict) -> dict:
    """SF's iterations, relative error and fit seconds from a ``fit``'s or a ``compare``'s JSON."""
    # (from a folder of no checkout: `python -m` puts the working folder first on sys.path)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    data = json.loads(done.stdout)
    if "results" in data:  # compare
        row = data["results"][0]
        return {"iterations": row["params"]["iterations"], "rel_error": row["rel_error"],
                "fit_seconds": row["params"]["fit_seconds"]}
    return {"iterations": data["iterations"], "rel_error": data["rel_error"], "fit_seconds": data["fit_seconds"]}


def _wall(argv: list[str], env: dict) -> float:
    """Wall seconds of a command (its output dropped)."""
    began = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True, cwd=tempfile.gettempdir())
    return time.perf_counter() - began


def measure(checkouts: dict[str, str | None], limits: list[float], order: int, rounds: int) -> dict:
    """Every command of every checkout, ``rounds`` times, the checkouts alternating within each round."""
    py = [sys.executable, "-m", "sfapprox"]
    out: dict[str, dict[str, list]] = {label: {} for label in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        dense, sparse = _inputs(Path(tmp), order)
        for r in range(rounds):
            for label, checkout in checkouts.items():
                env = checkout_env(checkout)
                for limit in limits:
                    for command in ("fit", "compare"):
                        argv = py + [command, str(dense), "--time-limit", str(limit), "--json", "-"]
                        argv += ["--methods", "sf"] if command == "compare" else []
                        row = _sf_row(argv, env)
                        out[label].setdefault(f"{command} --time-limit {limit}", []).append(row)
                        print(f"round {r + 1} {label}: {command} {limit} s: {row}", flush=True)
                seconds = _wall(py + ["info", str(sparse)], env)
                out[label].setdefault(f"info (order {order:,})", []).append({"seconds": seconds})
                print(f"round {r + 1} {label}: info {seconds:.2f} s", flush=True)
    return out


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def render(data: dict) -> list[str]:
    """The Markdown: the run's meta, then per checkout one table of medians over the rounds."""
    lines = ["# Short time limits and info of a large sparse order (user audit)", "",
             f"- machine: {data['meta']['machine']}", f"- date: {data['meta']['date']}",
             f"- load average at start: {data['meta']['load_average_at_start']}",
             f"- command: `{data['meta']['command']}`", f"- rounds: {data['rounds']} (medians shown)", ""]
    for label, commands in data["runs"].items():
        lines += [f"## {label}", "", "| command | SF iterations | SF relative error | SF fit seconds | wall seconds |",
                  "|---|---:|---:|---:|---:|"]
        for command, rows in commands.items():
            if "seconds" in rows[0]:
                lines.append(f"| {command} | | | | {_median(rows, 'seconds'):.2f} |")
            else:
                lines.append(f"| {command} | {_median(rows, 'iterations'):.0f} | {_median(rows, 'rel_error'):.4f} "
                             f"| {_median(rows, 'fit_seconds'):.3f} | |")
        lines.append("")
    return lines + findings_lines(data, "(to be written)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limits", default="0.1,0.3,1", help="comma-separated time limits in seconds")
    ap.add_argument("--order", type=int, default=4_000_000, help="order of the sparse file info reads")
    ap.add_argument("--sfapprox", help="another checkout to measure too (its sfapprox first on PYTHONPATH)")
    ap.add_argument("--tag", default="short_limits")
    args = ap.parse_args()
    checkouts: dict[str, str | None] = {"now": None}
    if args.sfapprox:
        checkouts[f"before ({args.sfapprox})"] = args.sfapprox
    limits = [float(t) for t in args.limits.split(",")]
    data = {"meta": meta(), "rounds": args.rounds, "runs": measure(checkouts, limits, args.order, args.rounds)}
    write_results(args.tag, data, render(data))


if __name__ == "__main__":
    main()
