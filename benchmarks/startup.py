"""How long the CLI takes to answer when it does no work: --help, --version, a usage error.

Run by hand (not part of the tests; the tests check instead that these commands import neither torch,
numba, numpy nor scipy); about 20 s:

    python benchmarks/startup.py [--repeats 7]

Each command runs ``--repeats`` times as a fresh process (``python -m sfapprox ...``, as the console
script does); the median and the best wall times are reported, with ``import sfapprox`` and a bare
``python -c pass`` as references.  Writes benchmarks/results/startup.json and startup.md.
"""

from __future__ import annotations

import argparse
import json
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


def timed(argv: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, cwd=ROOT, timeout=120)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    rows = []
    for label, argv in COMMANDS.items():
        times = timed(argv, args.repeats)
        rows.append({"command": label, "median": statistics.median(times), "best": min(times)})
        print(json.dumps(rows[-1]), flush=True)
    info = meta("python benchmarks/startup.py" + (f" --repeats {args.repeats}" if args.repeats != 7 else ""),
                python=platform.python_version())
    lines = [f"# CLI start-up ({info['date']})", "",
             f"Machine: {info['machine']}, load average at start {info['load_average_at_start']:.2f}. "
             f"Command: `{info['command']}`; each line is {args.repeats} fresh processes.", "",
             f"| command | median s | best s | within {GOAL:g} s |", "|---|---|---|---|"]
    for r in rows:
        ok = "" if not r["command"].startswith("sfapprox") else ("yes" if r["median"] <= GOAL else "**no**")
        lines.append(f"| `{r['command']}` | {r['median']:.3f} | {r['best']:.3f} | {ok} |")
    lines += ["", "Before this change every command imported torch through the option declarations "
              "(on this machine, the same day, from commit efee82b: `--help` 1.59-2.22 s, `--version` 1.88-2.31 s with warm caches; about 4 s cold); the tests check that these commands load no torch, "
              "numba, numpy or scipy (`tests/test_cli_terminal.py`)."]
    write_results("startup", {"meta": info, "goal_seconds": GOAL, "rows": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
