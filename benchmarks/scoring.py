"""Scoring a fitted SF product: formed (``frobenius_error(X, op.to_dense())``) against column blocks
(:func:`sfapprox.metrics.operator_error`), next to one fit evaluation at the same N.

Run by hand (not part of the tests):

    python benchmarks/scoring.py [--sizes 4096,8192,16384] [--sfapprox PATH --tag scoring-before]

Each cell runs in a fresh interpreter (its own peak memory): a random Chord product of the default
structure (seeded) and a random float64 X, then one of

* ``formed``: ``frobenius_error(X, op.to_dense())``, the scoring before column blocks (with
  ``--sfapprox`` an older checkout's ``to_dense``);
* ``blocks-1`` / ``blocks``: ``operator_error(X, op)`` on one worker / on the free cores;
* ``eval32`` / ``eval64``: one loss-and-gradient evaluation of the fit's compiled kernel (the second
  call, as the fit times it) in float32 / float64, on the threads a fit would use — what the fit's
  scoring reserve (``SCORING_EVALS`` evaluations) is counted in.

Reported: seconds, the error (the paths must agree), and the peak RSS over the RSS before the
step (``resource.getrusage``: measured, not estimated) against :func:`sfapprox.metrics.scoring_bytes`.
Writes benchmarks/results/<tag>.json and .md (tag default ``scoring``).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from _common import ROOT, checkout_env, machine, meta, run_child, write_results

STEPS = ("formed", "blocks-1", "blocks", "eval32", "eval64")


def _rss() -> int:
    """Peak resident bytes of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _current_rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one(n: int, step: str) -> dict:
    """One step at order ``n`` in this process; seconds, error, peak RSS over the RSS before it."""
    import numpy as np

    import sfapprox
    from sfapprox.chord import default_n_factors, support_offsets
    from sfapprox.operators import ChordOperator

    rng = np.random.default_rng(0)
    offsets = support_offsets(n, "chord")
    values = 1.0 / offsets.size + 0.01 * rng.standard_normal((default_n_factors(n), n, offsets.size))
    op = ChordOperator(values, offsets)
    X = rng.standard_normal((n, n))
    op @ np.zeros((n, 64))  # the apply kernels loaded (numba's cache) before the timed part
    row: dict = {"n": n, "step": step, "sfapprox": str(Path(sfapprox.__file__).parent)}
    if step.startswith("eval"):
        row.update(_evaluation(values, offsets, X, np.float32 if step == "eval32" else np.float64))
        return row
    from sfapprox.metrics import frobenius_error

    before = _current_rss()
    began = time.perf_counter()
    if step == "formed":
        err = frobenius_error(X, op.to_dense())[0]
    else:
        from sfapprox.metrics import operator_error, scoring_bytes

        threads = 1 if step == "blocks-1" else None
        err = operator_error(X, op, threads=threads)[0]
        row["estimate_bytes"] = scoring_bytes(n, workers=threads)
    row.update(seconds=time.perf_counter() - began, error=err, peak_over_bytes=max(0, _rss() - before))
    return row


def _evaluation(values, offsets, X, dtype) -> dict:
    import torch

    from sfapprox._threads import AdaptiveThreads
    from sfapprox.sf import _kernels

    n = X.shape[0]
    kernel, kind = _kernels.select_kernel(n, "cpu")
    ws = torch.as_tensor(values, dtype=getattr(torch, dtype.__name__))
    target = torch.as_tensor(X, dtype=ws.dtype)
    offs = [int(d) for d in offsets]
    with AdaptiveThreads(_kernels.operation_numbers(n, kind), compiled=kind == "numba") as governor:
        kernel(ws, offs, target)  # the first call (compiles or loads the kernel), as the fit's first start
        began = time.perf_counter()
        kernel(ws, offs, target)
        seconds = time.perf_counter() - began
        threads = governor.current
    return {"seconds": seconds, "kernel": kind, "threads": threads}


def _mib(b: int | None) -> str:
    return "—" if b is None else f"{b / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4096,8192,16384")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--sfapprox", default=None, help="run this checkout's sfapprox (its PYTHONPATH)")
    parser.add_argument("--tag", default="scoring")
    args = parser.parse_args()
    env = checkout_env(args.sfapprox)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for step in args.steps.split(","):
            row = run_child("scoring", "one", [n, step], env=env)
            rows.append(row)
            print(f"N={n} {step}: {row['seconds']:.2f} s", flush=True)
    import numpy as np

    lines = [f"# Scoring an SF product: formed or by column blocks ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine(numpy=np.__version__)}. Command: `{meta()['command']}`"
             + (f" (sfapprox from `{args.sfapprox}`)" if args.sfapprox else "") + ".", "",
             "| N | step | seconds | error | peak RSS over the step's start (MiB) | scoring_bytes (MiB) | threads |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r['n']:,}", r["step"], f"{r['seconds']:.2f}",
                 f"{r['error']:.12g}" if "error" in r else "—", _mib(r.get("peak_over_bytes")),
                 _mib(r.get("estimate_bytes")), str(r.get("threads") or "—")]
        lines.append("| " + " | ".join(cells) + " |")
    write_results(args.tag, {**meta(machine=machine(numpy=np.__version__)), "rows": rows}, lines)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
