"""Seconds of chosen tests in this checkout and in another one (``--before``), alternating: before/after
ratios of a test-speed change from one run of a shared, noisy machine.

Run by hand (not part of the tests):

    python benchmarks/test_speed.py --before CHECKOUT [--rounds 1] [--tag test_speed] \\
        "tests/test_signals.py -k fresh_install" tests/test_distributed.py tests/test_common.py

Each selection runs as ``python -m pytest -q -p no:cacheprovider --durations=0 SELECTION`` in the checkout's
own folder (``PYTHONPATH`` set to it), first in ``CHECKOUT`` then in this one, ``--rounds`` times.  Each row:
the selection's wall seconds, the sum of its tests' call and setup seconds, its three slowest tests, the
outcome line and the load average when it started.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from _common import FINDINGS, ROOT, meta, write_results

DURATION = re.compile(r"^([0-9.]+)s (call|setup|teardown) +(\S+)$")


def run(checkout: Path, selection: str) -> dict:
    """One pytest run of ``selection`` in ``checkout``; its row."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
               *shlex.split(selection)]
    load = os.getloadavg()[0]
    start = time.monotonic()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    tests: dict[str, float] = {}
    for line in done.stdout.splitlines():
        found = DURATION.match(line.strip())
        if found:
            tests[found.group(3)] = tests.get(found.group(3), 0.0) + float(found.group(1))
    outcome = next((line.strip("= ") for line in reversed(done.stdout.splitlines()) if " in " in line), "")
    slowest = sorted(tests.items(), key=lambda item: -item[1])[:3]
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return {"selection": selection, "checkout": str(checkout), "wall_s": round(wall, 1),
            "tests_s": round(sum(tests.values()), 1), "slowest": [[name, round(s, 1)] for name, s in slowest],
            "outcome": outcome, "failed": failed, "returncode": done.returncode, "load_at_start": round(load, 2)}


def render(data: dict) -> list[str]:
    """The results file's Markdown: the run, a row per selection and checkout, the ratios, the findings."""
    lines = ["# Test speed: before / after", "", f"- machine: {data['machine']}", f"- date: {data['date']}",
             f"- command: `{data['command']}`", f"- before: {data['before']}", "",
             "| round | selection | checkout | wall s | tests s | load | outcome | slowest |",
             "|---|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        slowest = "; ".join(f"{name.split('::')[-1]} {s}" for name, s in row["slowest"])
        failed = "".join(f"; FAILED {name.split('::')[-1]}" for name in row.get("failed", []))
        lines.append(f"| {row['round']} | `{row['selection']}` | {row['side']} | {row['wall_s']} | {row['tests_s']} "
                     f"| {row['load_at_start']} | {row['outcome']}{failed} | {slowest} |")
    lines += ["", "| selection | tests s before | tests s after | after / before |", "|---|---|---|---|"]
    for selection in dict.fromkeys(row["selection"] for row in data["rows"]):
        sums = {side: sum(r["tests_s"] for r in data["rows"] if r["selection"] == selection and r["side"] == side)
                for side in ("before", "after")}
        ratio = sums["after"] / sums["before"] if sums["before"] else float("nan")
        lines.append(f"| `{selection}` | {sums['before']:.1f} | {sums['after']:.1f} | {ratio:.2f} |")
    return [*lines, "", FINDINGS, "", data.get("findings") or "(to be written)", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("selections", nargs="+", help="pytest arguments, one quoted string a selection")
    parser.add_argument("--before", required=True, help="the checkout to compare with (e.g. a worktree of main)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tag", default="test_speed")
    args = parser.parse_args()
    rows = []
    for round_ in range(1, args.rounds + 1):
        for selection in args.selections:
            for side, checkout in (("before", Path(args.before).resolve()), ("after", ROOT)):
                row = run(checkout, selection)
                rows.append({"round": round_, "side": side, **row})
                print(f"{side:6} {selection}: {row['tests_s']} s tests, {row['wall_s']} s wall, {row['outcome']}",
                      *row["failed"], flush=True)
    data = meta(before=args.before, rows=rows)
    write_results(args.tag, data, render(data))


if __name__ == "__main__":
    main()
