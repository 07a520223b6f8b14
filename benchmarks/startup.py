"""How long the CLI takes to answer when it does no work (--help, --version, a usage error), and
for small work that needs no torch (``info`` of a small file, a comparison of baselines alone).

Run by hand (not part of the tests; the tests check instead that these commands import neither torch,
numba, numpy nor scipy, and that the small work imports no torch); about 40 s:

    python benchmarks/startup.py [--repeats 7] [--before CHECKOUT]

Each command runs ``--repeats`` times as a fresh process (``python -m sfapprox ...``, as the console
script does); the median and the best wall times are reported, with ``import sfapprox`` and a bare
``python -c pass`` as references.  ``--before`` runs each command from another checkout too
(``PYTHONPATH``), alternating with this one, so both share the machine's moments.
Writes benchmarks/results/startup.json and startup.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from _common import ROOT, meta, write_results

GOAL = 0.5  # seconds (issue: --help, --version and a usage error in <= 0.5 s)

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import sfapprox": [sys.executable, "-c", "import sfapprox"],
    "sfapprox --version": [sys.executable, "-m", "sfapprox", "--version"],
    "sfapprox --help": [sys.executable, "-m", "sfapprox", "--help"],
    "sfapprox compare --help": [sys.executable, "-m", "sfapprox", "compare", "--help"],
    "sfapprox compar (typo)": [sys.executable, "-m", "sfapprox", "compar"],
    "sfapprox compare (no file)": [sys.executable, "-m", "sfapprox", "compare"],
}

#: Small work that needs no torch: these are timed, not held to :data:`GOAL`.
WORK = {
    "sfapprox info examples/mesh_small.mtx": [sys.executable, "-m", "sfapprox", "info", "examples/mesh_small.mtx"],
    "sfapprox compare examples/mesh_small.mtx --methods tsvd,sparse": [
        sys.executable, "-m", "sfapprox", "compare", "examples/mesh_small.mtx", "--methods", "tsvd,sparse"],
    "sfapprox compare examples/mesh_small.mtx --methods rsvd,nystrom": [
        sys.executable, "-m", "sfapprox", "compare", "examples/mesh_small.mtx", "--methods", "rsvd,nystrom"],
}


def timed(argv: list[str], repeats: int, checkouts: dict[str, str | None]) -> dict[str, list[float]]:
    """Wall seconds of ``repeats`` fresh runs of ``argv`` from each checkout (None: this one), alternated.
    Each runs in its checkout's folder: ``python -m`` puts the working folder first on the path."""
    times: dict[str, list[float]] = {label: [] for label in checkouts}
    for _ in range(repeats):
        for label, path in checkouts.items():
            env = dict(os.environ)
            if path is not None:
                env["PYTHONPATH"] = path
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, cwd=path or ROOT, timeout=120, env=env)
            times[label].append(time.perf_counter() - start)
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--before", help="another checkout to time beside this one (PYTHONPATH)")
    args = ap.parse_args()
    checkouts = {"now": None, **({"before": args.before} if args.before else {})}
    rows = []
    for group, commands in (("start", COMMANDS), ("work", WORK)):
        for label, argv in commands.items():
            for run, times in timed(argv, args.repeats, checkouts).items():
                rows.append({"command": label, "group": group, "run": run, "median": statistics.median(times),
                             "best": min(times)})
                print(json.dumps(rows[-1]), flush=True)
    command = "python benchmarks/startup.py" + (f" --repeats {args.repeats}" if args.repeats != 7 else "") + \
        (f" --before {args.before}" if args.before else "")
    info = meta(command, python=platform.python_version())
    lines = [f"# CLI start-up ({info['date']})", "",
             f"Machine: {info['machine']}, load average at start {info['load_average_at_start']:.2f}. "
             f"Command: `{info['command']}`; each line is {args.repeats} fresh processes"
             + (", the two checkouts alternated." if args.before else "."), "",
             f"| command | run | median s | best s | within {GOAL:g} s |", "|---|---|---|---|---|"]
    for r in rows:
        ok = "" if r["group"] != "start" or not r["command"].startswith("sfapprox") else \
            ("yes" if r["median"] <= GOAL else "**no**")
        lines.append(f"| `{r['command']}` | {r['run']} | {r['median']:.3f} | {r['best']:.3f} | {ok} |")
    lines += ["", "Before an earlier change every command imported torch through the option declarations "
              "(on this machine, the same day, from commit efee82b: `--help` 1.59-2.22 s, `--version` 1.88-2.31 s with "
              "warm caches; about 4 s cold); the tests check that these commands load no torch, "
              "numba, numpy or scipy (`tests/test_cli_terminal.py`), and that `info` and a comparison of "
              "baselines alone load no torch."]
    write_results("startup", {"meta": info, "goal_seconds": GOAL, "rows": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
