"""A Ctrl-C at a random moment of a batch's first SF row: how many stops end as they should.

Each run starts ``sfapprox batch`` on two generated matrices (an attention map of N = 96, whose SF fit
runs to its 60-s limit, then a small banded one) with ``--methods tsvd,sf``, waits for TSVD's line,
sleeps a random delay (uniform in ``[0, --max-delay]``: torch's import, numba's cache, the timing
probe, the first iterations), sends SIGINT, and sorts what happened:

* ``ok``: exit 130, TSVD's line alone kept (the stopped pair is redone by the next run);
* ``aborted``: killed by a signal (a C++ ``terminate`` while torch loaded: SIGABRT);
* ``lost``: still running 30 s after the stop;
* ``wrong lines``: exit 130 with a line for the stopped pair, or another exit code.

and the seconds from the signal to the exit (median and largest of the ``ok`` stops).

With ``--sfapprox OTHER`` the runs alternate between this checkout and ``OTHER`` (labelled "before"
and "after"), each with the same delays.  The machine is shared: the delays are random, so compare
counts over many runs, not single runs.

Usage::

    python benchmarks/stop_timing.py --runs 60 [--max-delay 0.8] [--sfapprox /path/to/old/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import ROOT, checkout_env, findings_lines, meta, write_results

MANIFEST = """\
[[matrix]]
name = "big"
category = "attention"
generator = "attention"
params = {n = 96, beta = 3.0}

[[matrix]]
name = "next"
category = "synthetic"
generator = "banded"
params = {n = 16}
"""
OUTCOMES = ("ok", "aborted", "lost", "wrong lines")


def one(env: dict, folder: Path, delay: float) -> dict:
    """One batch stopped ``delay`` seconds after its first line; its outcome."""
    manifest = folder / "m.toml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "sfapprox", "batch", str(manifest), "--out-dir", str(out),
               "--methods", "tsvd,sf", "--iters", "100000", "--device", "cpu"]
    # a shell's background job has SIGINT ignored, and children inherit that: this one must take it
    proc = subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    results = out / "results.jsonl"
    while not (results.exists() and results.read_bytes().count(b"\n") >= 1):
        if proc.poll() is not None:
            return {"delay": delay, "outcome": "wrong lines", "rc": proc.returncode,
                    "stderr": proc.communicate()[1][-400:]}
        time.sleep(0.01)
    time.sleep(delay)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"delay": delay, "outcome": "lost", "rc": None, "stderr": ""}
    seconds = time.monotonic() - sent
    pairs = sorted((r["matrix"], r["method"]) for r in map(json.loads, results.read_text().splitlines()))
    if proc.returncode < 0:
        outcome = "aborted"
    elif proc.returncode != 130 or pairs != [("big", "tsvd")]:
        outcome = "wrong lines"
    else:
        outcome = "ok"
    return {"delay": round(delay, 3), "outcome": outcome, "rc": proc.returncode, "seconds": round(seconds, 2),
            "stderr": "" if outcome == "ok" else stderr[-400:]}


def render(data: dict) -> list[str]:
    lines = ["# A Ctrl-C at a random moment of a batch's first SF row", "",
             f"{data['meta']['machine']}; {data['meta']['date']}; load average at start "
             f"{data['meta']['load_average_at_start']}", "", f"Command: `{data['meta']['command']}`", "",
             f"{data['runs']} stops per checkout, each {data['max_delay']} s at most after TSVD's line.", "",
             "| checkout | " + " | ".join(OUTCOMES) + " | seconds to exit (ok: median, largest) |",
             "|---|" + "---|" * (len(OUTCOMES) + 1)]
    for label, rows in data["rows"].items():
        counts = Counter(r["outcome"] for r in rows)
        seconds = sorted(r["seconds"] for r in rows if r["outcome"] == "ok")
        spread = f"{statistics.median(seconds):.2f}, {seconds[-1]:.2f}" if seconds else "-"
        lines.append(f"| {label} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + f" | {spread} |")
    lines.append("")
    for label, rows in data["rows"].items():
        for r in rows:
            if r["outcome"] != "ok":
                lines.append(f"- {label}, delay {r['delay']} s: {r['outcome']} (exit {r['rc']}): "
                             f"`{' '.join(r['stderr'].split())[:240]}`")
    return lines + [""] + findings_lines(data, "(to be written)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--max-delay", type=float, default=0.8)
    ap.add_argument("--sfapprox", help="another checkout, run alternately (labelled 'before')")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    envs = {"after": checkout_env(str(ROOT))} if not args.sfapprox else \
        {"before": checkout_env(args.sfapprox), "after": checkout_env(str(ROOT))}
    for env in envs.values():
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    rng = random.Random(args.seed)
    rows: dict[str, list[dict]] = {label: [] for label in envs}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            delay = rng.uniform(0.0, args.max_delay)
            for label, env in envs.items():
                folder = Path(tmp) / label
                folder.mkdir(exist_ok=True)
                rows[label].append(one(env, folder, delay))
                print(f"{i} {label} {rows[label][-1]['outcome']} delay {delay:.3f}", flush=True)
    data = {"meta": meta(load_average_at_end=os.getloadavg()[0]), "runs": args.runs, "max_delay": args.max_delay,
            "rows": rows}
    write_results("stop_timing", data, render(data))


if __name__ == "__main__":
    main()
