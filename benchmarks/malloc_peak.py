"""glibc's malloc and the memory checks: peak RSS and speed with its default (dynamic) mmap threshold and a fixed one.

Run by hand (not part of the tests):

    python benchmarks/malloc_peak.py [--sizes 1000,1500,2000] [--methods tsvd,rsvd,sparse,nmf,rpca,rpca-pcp,monarch,sf]
        [--modes default,fixed] [--rounds 2] [--seconds 5] [--budget 0.9] [--tag malloc_peak]

Why: glibc serves a request of at least its mmap threshold (128 KiB to start) by ``mmap`` and gives it
back to the OS on ``free``, but each time such a block is freed it raises the threshold to that block's
size (up to 32 MiB on 64-bit).  From then on, arrays up to that size come from the heap, and a freed one
stays in the process's RSS until the heap's top is trimmed, so at N <= ~2,000 (an N x N float64 array is
at most 32 MiB) the RSS can pass what is in use, and the estimate each memory check uses.

Each cell is ``method_memory.one``: one ``sfapprox.compare(X, methods=[method])`` in a fresh interpreter
(the libraries warmed on a 64 x 64 comparison first; X the RBF kernel of a 32-cluster cloud, float64),
every memory check's need recorded, the peak RSS over the RSS before X was made (Linux ``VmHWM``, reset
once X is made, so X counts once as the estimates count it).  Modes, alternating run by run:

* ``default``: glibc as it comes (sfapprox's own setting opted out of with ``SFAPPROX_MALLOC_DEFAULT=1``);
* ``fixed``: ``mallopt(M_MMAP_THRESHOLD, 65536)`` through ctypes before anything else is imported
  (which also stops the threshold's growth);
* ``env``: ``MALLOC_MMAP_THRESHOLD_=65536`` in the child's environment (the same, read by glibc at start).

Speed: each fit's seconds, and for an iterative method its iterations per second (SF: over its fit's
seconds less the compiling; RPCA, NMF: over its seconds); ``fixed`` / ``default`` of the medians.
Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _common import ROOT, checkout_env, findings_lines, machine, meta, run_child, write_results

#: The fixed threshold measured: 64 KiB (glibc's environment variable takes the same number).
THRESHOLD = 65536
#: glibc's mallopt parameter number of M_MMAP_THRESHOLD (malloc.h).
M_MMAP_THRESHOLD = -3


def one(n: int, method: str, seconds: float, budget: str | None, mode: str) -> dict:
    """One cell in this (fresh) process, as ``method_memory.one`` measures it, after the mode's malloc setting."""
    import ctypes
    import resource
    import warnings

    if mode == "fixed":  # before numpy or anything else allocates
        assert ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, THRESHOLD) == 1, "mallopt refused"
    import method_memory
    from _common import proc_status, reset_peak

    import sfapprox

    warnings.simplefilter("ignore")
    sfapprox.available_methods()  # every method module imported, so that the spy reaches them all
    sfapprox.compare(method_memory.kernel(64), methods=[method], time_limit=2)  # the libraries' working sets
    checked = method_memory._spy_checks()
    base = proc_status("VmRSS")
    X = method_memory.kernel(n)
    checked.clear()  # the kernel's own check
    reset_peak()  # the peak from here on: X's making left out
    began = time.perf_counter()
    row = sfapprox.compare(X, methods=[method], time_limit=seconds, budget=budget).results[0]
    elapsed = time.perf_counter() - began
    peak = proc_status("VmHWM") - base
    need, what = max(checked) if checked else (None, None)
    params = {k: v for k, v in (row.params or {}).items() if isinstance(v, (int, float, str, bool))}
    out = {"n": n, "method": method, "mode": mode, "seconds": elapsed, "fit_seconds": (row.params or {}).get("fit_seconds", row.seconds),
           "peak_over_bytes": peak, "checked_bytes": need, "checked_what": what, "status": row.status,
           "rel_error": row.rel_error, "params": params,
           "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "sfapprox": str(Path(sfapprox.__file__).parent)}
    out["rate"] = _rate(out)
    return out


def _rate(row: dict) -> float | None:
    """Iterations per second of an iterative fit (None for a one-shot method)."""
    params = row.get("params") or {}
    iters = params.get("iterations")
    if not iters:
        return None
    fit = row["fit_seconds"] - (params.get("compile_seconds") or 0.0)
    return iters / fit if fit > 0 else None


def child_env(mode: str) -> dict:
    env = checkout_env(str(ROOT))  # this checkout's sfapprox, whatever the environment has installed
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if mode == "env":
        env["MALLOC_MMAP_THRESHOLD_"] = str(THRESHOLD)
    if mode == "default":
        env["SFAPPROX_MALLOC_DEFAULT"] = "1"  # the opt-out of sfapprox's own setting (ignored where none)
    else:
        env.pop("SFAPPROX_MALLOC_DEFAULT", None)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,1500,2000")
    ap.add_argument("--methods", default="tsvd,rsvd,sparse,nmf,rpca,rpca-pcp,monarch,sf")
    ap.add_argument("--modes", default="default,fixed", help="comma-separated: default, fixed, env")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each mode per cell, alternating")
    ap.add_argument("--seconds", type=float, default=5.0, help="the comparison's time_limit")
    ap.add_argument("--budget", default=None, help="the comparison's budget (default: SF's)")
    ap.add_argument("--tag", default="malloc_peak")
    args = ap.parse_args()
    modes = args.modes.split(",")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for method in args.methods.split(","):
            for _ in range(args.rounds):
                for mode in modes:
                    r = run_child("malloc_peak", "one", [n, method, args.seconds, args.budget, mode],
                                  env=child_env(mode))
                    rows.append(r)
                    print(f"N={n} {method} {mode}: peak {r['peak_over_bytes'] / 2**20:.0f} MiB, checked "
                          f"{(r['checked_bytes'] or 0) / 2**20:.0f} MiB, maxrss {r['maxrss_bytes'] / 2**20:.0f} MiB, "
                          f"{r['seconds']:.2f} s, rate {r['rate']}", flush=True)
    import numpy as np

    data = {**meta(machine=machine(numpy=np.__version__)), "threshold": THRESHOLD, "modes": modes, "rows": rows}
    write_results(args.tag, data, render(data))


def _cells(rows: list[dict]) -> dict:
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["n"], r["method"]), {}).setdefault(r["mode"], []).append(r)
    return cells


def render(data: dict) -> list[str]:
    """The Markdown: per (N, method) each mode's peak over checked need (max over the rounds) and speed."""
    modes = data["modes"]
    mib = 2 ** 20
    lines = [f"# glibc's mmap threshold: peak RSS against the memory checks, and speed ({data['date']})", "",
             f"Machine: {data['machine']}. Command: `{data['command']}`. X: the RBF kernel of a 32-cluster "
             "cloud (float64); one `compare` per run, fresh process; peak: RSS peak over the RSS before X was "
             "made (X included), the largest of the rounds; checked: the largest need any memory check asked "
             "for; maxrss: the process's `ru_maxrss` (interpreter and libraries included). Modes: "
             f"{', '.join(modes)} (fixed: `mallopt(M_MMAP_THRESHOLD, {data['threshold']})`).", "",
             "| N | method | checked, MiB | " + " | ".join(f"{m} peak, MiB (/ checked)" for m in modes)
             + " | " + " | ".join(f"{m} maxrss, MiB" for m in modes)
             + " | " + " | ".join(f"{m} s (it/s)" for m in modes) + " | speed " + " / ".join(modes[:2][::-1]) + " |",
             "|" + "---|" * (3 + 3 * len(modes))]
    for (n, method), by in _cells(data["rows"]).items():
        first = by[modes[0]][0]
        need = first["checked_bytes"] or 0
        peaks = [max(r["peak_over_bytes"] for r in by[m]) for m in modes]
        cells = [f"{p / mib:.0f} ({p / need:.2f}{' **over**' if p > need else ''})" if need else f"{p / mib:.0f}"
                 for p in peaks]
        cells += [f"{max(r['maxrss_bytes'] for r in by[m]) / mib:.0f}" for m in modes]
        speed = []
        for m in modes:
            secs = statistics.median(r["seconds"] for r in by[m])
            rates = [r["rate"] for r in by[m] if r["rate"]]
            speed.append(f"{secs:.2f}" + (f" ({statistics.median(rates):.1f})" if rates else ""))
        ratio = _ratio(by, modes)
        lines.append(f"| {n:,} | {method} | {need / mib:.0f} | " + " | ".join(cells + speed) + f" | {ratio} |")
    return lines + ["", *findings_lines(data, "(to be written)")]


def _ratio(by: dict, modes: list[str]) -> str:
    """Speed of the second mode over the first's (> 1: faster): iterations per second where the fit
    iterates to a time limit, else the inverse ratio of seconds."""
    if len(modes) < 2:
        return ""
    a, b = by[modes[0]], by[modes[1]]
    ra, rb = [r["rate"] for r in a if r["rate"]], [r["rate"] for r in b if r["rate"]]
    if ra and rb:
        return f"{statistics.median(rb) / statistics.median(ra):.3f} (it/s)"
    return f"{statistics.median(r['seconds'] for r in a) / statistics.median(r['seconds'] for r in b):.3f}"


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
