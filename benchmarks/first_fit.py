"""The README's first command, on a fresh install (numba's cache empty) and after: time and result.

Run by hand (not part of the tests):

    python benchmarks/first_fit.py [--warm 2] [--sfapprox CHECKOUT] [--tag first_fit]

``sfapprox compare examples/mesh_small.mtx --methods sf,tsvd -q --json OUT`` runs as a fresh process
(``python -m sfapprox`` of this checkout, or of ``--sfapprox`` through ``PYTHONPATH``): first with an
empty ``NUMBA_CACHE_DIR`` of its own (every compiled kernel compiles, as after ``pip install``), then
``--warm`` more times with that cache filled.  Each row: the whole command's wall seconds, SF's own
seconds, its relative error, iterations and evaluations.

What it checks (issue 25, goal 6): the first run's fit must end where the later ones do.  Before
2026-11-27 the first evaluation's timing held ~5 s of compiling, the race of the two starts looked
unaffordable, and the first run ended at rel 0.1949 where every later one ended at 0.1808.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, checkout_env, meta, write_results


def one(env: dict, cache: str, out: Path) -> dict:
    """One run of the README's command with numba's cache in ``cache``; its row."""
    command = [sys.executable, "-m", "sfapprox", "compare", str(ROOT / "examples" / "mesh_small.mtx"),
               "--methods", "sf,tsvd", "-q", "--json", str(out), "--force"]
    began = time.perf_counter()
    done = subprocess.run(command, env={**env, "NUMBA_CACHE_DIR": cache}, capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"the command failed:\n{done.stderr[-2000:]}")
    sf = next(r for r in json.loads(out.read_text())["results"] if r["method"] == "sf")
    return {"wall_s": round(wall, 2), "sf_s": round(sf["seconds"], 2), "rel_error": sf["rel_error"],
            "iterations": sf["params"]["iterations"], "evaluations": sf["params"]["evaluations"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=2, help="runs after the first (cache filled)")
    parser.add_argument("--sfapprox", help="another checkout to measure (put first on PYTHONPATH)")
    parser.add_argument("--tag", default="first_fit")
    args = parser.parse_args()
    env = checkout_env(args.sfapprox)
    rows = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as scratch:
        for i in range(1 + args.warm):
            row = {"run": "first (cache empty)" if i == 0 else f"warm {i}", **one(env, cache, Path(scratch) / "o.json")}
            rows.append(row)
            print(row, flush=True)
    data = {"meta": meta(checkout=args.sfapprox or "this checkout"), "rows": rows}
    lines = [f"# The README's first command, on a fresh install and after ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}` ({data['meta']['checkout']}).", "",
             "| run | command s | SF fit s | SF rel error | iterations | evaluations |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['wall_s']} | {r['sf_s']} | {r['rel_error']:.4f} | {r['iterations']} | "
              f"{r['evaluations']} |" for r in rows]
    write_results(args.tag, data, lines)


if __name__ == "__main__":
    main()
