"""How long the CLI takes to answer when it does no work (--help, --version, a usage error), and
for small work that needs no torch (``info`` of a small file, a comparison of baselines alone).

Run by hand (not part of the tests; the tests check instead that these commands import neither torch,
numba, numpy nor scipy, and that the small work imports no torch); about 40 s alone, 2 min with
``--sfapprox`` and ``--importtime``:

    python benchmarks/startup.py [--repeats 7] [--sfapprox CHECKOUT] [--importtime 5] [--tag startup]

Each command runs ``--repeats`` times as a fresh process (``python -m sfapprox ...``, as the console
script does); the median and the best wall times are reported, with ``import sfapprox`` and a bare
``python -c pass`` as references.  ``--sfapprox`` (or its older name ``--before``) runs each command
from another checkout too (``PYTHONPATH``), alternating with this one, so both share the machine's
moments; each command's ratio this/other is then the median of the rounds' ratios, which a busy
machine moves less than the times.  ``--importtime N`` also runs ``import sfapprox`` and the work
commands N times under ``python -X importtime`` in both checkouts, alternated: how many modules each
loads, which of the libraries kept lazy (torch, numba, scipy's submodules, rich, h5py, pooch...) it
loads, the modules only one checkout loads, and the modules whose own import time grew most.
Writes benchmarks/results/<tag>.json and <tag>.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from _common import FINDINGS, ROOT, meta, write_results

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
    "sfapprox methods": [sys.executable, "-m", "sfapprox", "methods"],
    "sfapprox formats": [sys.executable, "-m", "sfapprox", "formats"],
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


#: Libraries that commands doing no fit must not load, or only where they did: a slow import each.
WATCHED = ("torch", "numba", "triton", "scipy.linalg", "scipy.sparse.linalg", "scipy.optimize", "scipy.special",
           "scipy.stats", "scipy.io", "rich", "h5py", "pooch", "matplotlib", "PIL", "numpy", "scipy")

#: What ``--importtime`` looks at: the package's import and the work commands.
IMPORTTIME = {"import sfapprox": [sys.executable, "-c", "import sfapprox"], **WORK}


def import_times(argv: list[str], path: str | None) -> dict[str, int]:
    """Each module a fresh ``argv`` imports and its own import time in microseconds (``-X importtime``)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = path
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True,
                          cwd=path or ROOT, timeout=120, env=env)
    out = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and not line.endswith("imported package"):
            own, _, name = line[len("import time:"):].split("|")
            out[name.strip()] = int(own)
    return out


def importtime_rows(repeats: int, checkouts: dict[str, str | None]) -> list[dict]:
    """Per command of :data:`IMPORTTIME`: the modules each checkout loads (the same every round) and the
    median of each module's own import time over ``repeats`` rounds, the checkouts alternated."""
    rows = []
    for label, argv in IMPORTTIME.items():
        own = {run: collections.defaultdict(list) for run in checkouts}
        totals: dict[str, list[float]] = {run: [] for run in checkouts}
        for _ in range(repeats):
            for run, path in checkouts.items():
                times = import_times(argv, path)
                for name, us in times.items():
                    own[run][name].append(us)
                totals[run].append(sum(times.values()) / 1e6)
        row = {"command": label, "modules": {run: len(own[run]) for run in checkouts},
               "import_seconds": {run: statistics.median(t) for run, t in totals.items()},
               "watched": {run: [m for m in WATCHED if m in own[run]] for run in checkouts}}
        if len(checkouts) == 2:
            now, other = (own[run] for run in checkouts)
            row["only_now"], row["only_other"] = sorted(set(now) - set(other)), sorted(set(other) - set(now))
            grown = sorted(((statistics.median(now[m]) - statistics.median(other[m])) / 1e3, m)
                           for m in set(now) & set(other))
            row["grown_ms"] = {m: round(d, 1) for d, m in reversed(grown[-5:])}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def importtime_lines(rows: list[dict], runs: list[str]) -> list[str]:
    """The ``--importtime`` table of the Markdown file."""
    lines = ["", "## Imports (`python -X importtime`, median own import times)", "",
             "| command | run | modules | import s | lazy libraries loaded |", "|---|---|---|---|---|"]
    for r in rows:
        for run in runs:
            lines.append(f"| `{r['command']}` | {run} | {r['modules'][run]} | {r['import_seconds'][run]:.3f} | "
                         f"{', '.join(r['watched'][run]) or 'none'} |")
    if len(runs) == 2:
        lines += ["", "| command | modules only now | modules only before | own import time grown most (ms) |",
                  "|---|---|---|---|"]
        for r in rows:
            grown = ", ".join(f"{m} {d:+.1f}" for m, d in r["grown_ms"].items())
            lines.append(f"| `{r['command']}` | {', '.join(r['only_now']) or 'none'} | "
                         f"{', '.join(r['only_other']) or 'none'} | {grown} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sfapprox", "--before", dest="before",
                    help="another checkout to time beside this one (PYTHONPATH); --before is its older name")
    ap.add_argument("--importtime", type=int, default=0, metavar="N",
                    help="also N rounds of python -X importtime of the package and the work commands")
    ap.add_argument("--tag", default="startup", help="the results' name (benchmarks/results/TAG.md, .json)")
    args = ap.parse_args()
    checkouts = {"now": None, **({"before": args.before} if args.before else {})}
    rows = []
    for group, commands in (("start", COMMANDS), ("work", WORK)):
        for label, argv in commands.items():
            times = timed(argv, args.repeats, checkouts)
            for run, seconds in times.items():
                rows.append({"command": label, "group": group, "run": run, "median": statistics.median(seconds),
                             "best": min(seconds), "seconds": seconds})
                if args.before and run == "now":
                    # each round's two runs shared the machine's moment: their ratio is what it moved least
                    rows[-1]["ratio"] = statistics.median(n / b for n, b in zip(times["now"], times["before"]))
                print(json.dumps(rows[-1]), flush=True)
    imports = importtime_rows(args.importtime, checkouts) if args.importtime else []
    command = "python benchmarks/startup.py" + (f" --repeats {args.repeats}" if args.repeats != 7 else "") + \
        (f" --sfapprox {args.before}" if args.before else "") + \
        (f" --importtime {args.importtime}" if args.importtime else "") + \
        (f" --tag {args.tag}" if args.tag != "startup" else "")
    info = meta(command, python=platform.python_version())
    ratio = " now/before (median of the rounds' ratios) |" if args.before else ""
    lines = [f"# CLI start-up ({info['date']})", "",
             f"Machine: {info['machine']}, load average at start {info['load_average_at_start']:.2f}. "
             f"Command: `{info['command']}`; each line is {args.repeats} fresh processes"
             + (", the two checkouts alternated." if args.before else "."), "",
             f"| command | run | median s | best s | within {GOAL:g} s |{ratio}",
             "|---|---|---|---|---|" + ("---|" if args.before else "")]
    for r in rows:
        ok = "" if r["group"] != "start" or not r["command"].startswith("sfapprox") else \
            ("yes" if r["median"] <= GOAL else "**no**")
        cells = f"| `{r['command']}` | {r['run']} | {r['median']:.3f} | {r['best']:.3f} | {ok} |"
        lines.append(cells + (f" {r['ratio']:.3f} |" if "ratio" in r and r["run"] == "now" else
                              " |" if args.before else ""))
    lines += importtime_lines(imports, list(checkouts))
    lines += ["", "Before an earlier change every command imported torch through the option declarations "
              "(on this machine, the same day, from commit efee82b: `--help` 1.59-2.22 s, `--version` 1.88-2.31 s with "
              "warm caches; about 4 s cold); the tests check that these commands load no torch, "
              "numba, numpy or scipy (`tests/test_cli_terminal.py`), and that `info` and a comparison of "
              "baselines alone load no torch.", "", FINDINGS, "", "(to be written)"]
    write_results(args.tag, {"meta": info, "goal_seconds": GOAL, "rows": rows, "imports": imports}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
