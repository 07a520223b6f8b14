"""Two fits on one --out started together: when the second learns of the first, and what each leaves.

A job started twice (a cluster re-submission while the first still runs): ``sfapprox fit X.npy --out f.h5
--checkpoint-every 1 --time-limit T`` is started, and the same command again ``--delay`` seconds later, in
one folder, with ``--force`` on both or on neither.  For this checkout and another (``--sfapprox``,
labelled "before"), alternating: the second's exit code, its wall seconds and its last line of stderr, and
the files in the folder once both ended.  Then what the lock costs a fit: ``output_lock`` taken and
released in this process (median of ``--reps``).  Usage::

    python benchmarks/output_lock.py --sfapprox /path/to/old/checkout [--n 300] [--seconds 8]
        [--delay 4] [--rounds 2] [--reps 200]

Writes ``benchmarks/results/output_lock.{json,md}`` (``--tag`` another name).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, checkout_env, findings_lines, meta, write_results


def pair(env: dict, n: int, seconds: float, delay: float, force: bool) -> dict:
    """The first fit started, the second ``delay`` seconds later; what the second did, and the folder after."""
    import numpy as np

    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "x.npy", np.random.default_rng(0).standard_normal((n, n)))
        command = [sys.executable, "-m", "sfapprox", "fit", "x.npy", "--out", "f.h5", "--checkpoint-every", "1",
                   "--time-limit", str(seconds), "--iters", "100000000", "--device", "cpu", "--quiet",
                   *(["--force"] if force else [])]
        first = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
        time.sleep(delay)
        began = time.perf_counter()
        second = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - began
        _, first_err = first.communicate()
        files = sorted(name for name in os.listdir(folder) if name != "x.npy")
    last = (second.stderr.strip().splitlines() or [""])[-1]
    return {"force": force, "second_rc": second.returncode, "second_seconds": round(wall, 2),
            "second_said": last[:300], "first_rc": first.returncode, "files_after": files}


def lock_cost(reps: int) -> dict:
    """Seconds to take and release an output's lock (this checkout), median and max of ``reps``."""
    sys.path.insert(0, str(ROOT))
    from sfapprox._output_lock import output_lock

    times = []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(reps):
            began = time.perf_counter()
            with output_lock(Path(folder) / "f.h5"):
                pass
            times.append(time.perf_counter() - began)
    return {"reps": reps, "median_ms": round(1e3 * statistics.median(times), 3), "max_ms": round(1e3 * max(times), 3)}


def render(data: dict) -> list[str]:
    m = data["meta"]
    lines = ["# Two fits on one --out started together", "", f"Command: `{m['command']}`  ",
             f"Machine: {m['machine']}, {m['date']}, load average at start {m['load_average_at_start']}  ",
             f"N = {m['n']}, each fit `--checkpoint-every 1 --time-limit {m['seconds']:g}`, the second started "
             f"{m['delay']:g} s after the first, in the same folder", "",
             "| checkout | --force | first's exit | second's exit | second's wall (s) | second's last line | files after both |",
             "|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        said = r["second_said"].replace("|", "\\|") or "(nothing)"
        lines.append(f"| {r['checkout']} | {'yes' if r['force'] else 'no'} | {r['first_rc']} | {r['second_rc']} | "
                     f"{r['second_seconds']:.2f} | {said} | {', '.join(r['files_after'])} |")
    cost = data["lock_cost"]
    lines += ["", f"Taking and releasing an output's lock (this checkout, {cost['reps']} times): median "
              f"{cost['median_ms']:.3f} ms, at most {cost['max_ms']:.3f} ms.", ""]
    return lines + findings_lines(data, "(to be written)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfapprox", required=True, help="the checkout to compare with (labelled 'before')")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=8.0, help="each fit's time limit")
    ap.add_argument("--delay", type=float, default=4.0, help="seconds between the two starts")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--tag", default="output_lock")
    args = ap.parse_args()
    envs = {"before": checkout_env(args.sfapprox), "after": checkout_env(str(ROOT))}
    rows = []
    for _ in range(args.rounds):
        for force in (True, False):
            for label, env in envs.items():
                rows.append({"checkout": label, **pair(env, args.n, args.seconds, args.delay, force)})
                r = rows[-1]
                print(f"{label} force={force}: second rc {r['second_rc']} after {r['second_seconds']} s; "
                      f"{r['files_after']}", file=sys.stderr, flush=True)
    info = meta(n=args.n, seconds=args.seconds, delay=args.delay)
    data = {"meta": info, "rows": rows, "lock_cost": lock_cost(args.reps)}
    write_results(args.tag, data, render(data))


if __name__ == "__main__":
    main()
