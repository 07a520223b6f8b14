"""Peak memory of `sfapprox fit` against `--max-memory`, at N = 1024, 2048, 4096.

Run by hand (not part of the tests); about 2 minutes on 2 cores:

    python benchmarks/memory.py [--sizes 1024,2048,4096]

For each N a random dense N x N matrix is written as .npy; then, in a fresh
process each, `sfapprox fit FILE --iters 3 --time-limit 0` runs with:

* no `--max-memory`: the fit's peak resident memory (VmHWM) and the
  interpreter's own (VmRSS after importing sfapprox, torch, numpy and scipy,
  before loading anything) are measured; their difference is what the tool
  allocated for this fit, against the estimate it checks before loading
  (:func:`sfapprox.sf.model.estimate_fit_memory` plus the input and scoring
  copies, as `fit` counts them);
* `--max-memory` set to the estimate and to 0.9 of it: the first must run in
  memory; the second must either run from column blocks (what ChordSF does when
  its in-memory fit is over the limit; the note says so) or be refused (exit 2)
  before anything large is allocated.

Writes benchmarks/results/memory.json and memory.md (``--tag NAME``: NAME.json and NAME.md); ``--sfapprox
DIR`` measures another checkout (e.g. a worktree of main before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import FINDINGS, ROOT, machine, meta, version, write_results

CHILD = r"""
import json, sys
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
import numpy, scipy, torch, h5py
import sfapprox.cli
from sfapprox.cli import _load_app
_load_app()
base = status("VmRSS")
sys.argv = ["sfapprox", *sys.argv[1:]]
code = 0
try:
    sfapprox.cli.main()
except SystemExit as exc:
    code = exc.code or 0
print(json.dumps({"base": base, "peak": status("VmHWM"), "code": code}), file=sys.stderr)
"""


def run(args: list[str], checkout: str | None = None) -> dict:
    # An empty numba cache for every run: the first fit after installing compiles the kernels, which
    # is the costliest case the limit must cover.
    cache = tempfile.mkdtemp(prefix="sfapprox-numba-")
    env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve() if checkout else ROOT), "OMP_NUM_THREADS": "1",
           "NUMBA_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, timeout=900)
    last = done.stderr.strip().splitlines()[-1]
    out = json.loads(last)
    said = " ".join(done.stderr.strip().splitlines()[:-1])
    out["stderr"] = said[-300:]
    out["from_columns"] = "from column blocks" in said  # (the note's words; the tail kept may have lost them)
    shutil.rmtree(cache, ignore_errors=True)
    return out


def estimate(n: int) -> int:
    """What `fit` checks against --max-memory for a dense N x N float64 input (bytes), in the fit's own
    dtype (float32 on the CPU from ``SF_FLOAT32_MIN_N``; this counted float64 at every N)."""
    import torch

    from sfapprox._device import resolve_dtype
    from sfapprox._settings import SF_FLOAT32_MIN_N
    from sfapprox.chord import chord_offsets, default_n_factors
    from sfapprox.sf.model import estimate_fit_memory

    itemsize = resolve_dtype(None, torch.device("cpu"), SF_FLOAT32_MIN_N, n).itemsize
    # init="auto" races two starts; the input is the dense N x N float64 array itself.
    return estimate_fit_memory(n, default_n_factors(n), len(chord_offsets(n)), itemsize, 50, "cpu",
                               reach=int(chord_offsets(n).max()), n_starts=2, input_bytes=8 * n * n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--iters", type=int, default=3,
                    help="iterations per fit; 150 or more fills both racing starts' L-BFGS histories (the "
                         "CPU loop writes its pair buffer as it goes, so a short fit touches only part of it)")
    ap.add_argument("--sfapprox", help="another checkout to measure (e.g. main before a change, a worktree)")
    ap.add_argument("--tag", default="memory", help="results name (default: memory)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"x{n}.npy"
            np.save(path, np.random.default_rng(n).random((n, n)))
            est = estimate(n)
            common = ["fit", str(path), "--iters", str(args.iters), "--time-limit", "0", "--device", "cpu", "--quiet"]
            t0 = time.perf_counter()
            free = run(common, args.sfapprox)
            seconds = time.perf_counter() - t0
            at = run([*common, "--max-memory", str(est)], args.sfapprox)
            below = run([*common, "--max-memory", str(int(0.9 * est))], args.sfapprox)
            used = free["peak"] - free["base"]
            rows.append({"n": n, "estimate": est, "peak": free["peak"], "base": free["base"], "used": used,
                         "used_over_estimate": used / est, "seconds": seconds,
                         "at_estimate_exit": at["code"], "below_estimate_exit": below["code"],
                         "below_estimate_peak_over_base": below["peak"] - below["base"],
                         "below_from_columns": below["from_columns"],
                         "below_message": below["stderr"]})
            print(json.dumps(rows[-1]), flush=True)
    info = meta("python benchmarks/memory.py" + ("" if args.sizes == "1024,2048,4096" else f" --sizes {args.sizes}")
                + ("" if args.iters == 3 else f" --iters {args.iters}")
                + (f" --sfapprox {args.sfapprox}" if args.sfapprox else "") + ("" if args.tag == "memory" else f" --tag {args.tag}"),
                machine=machine(numpy=np.__version__, torch=version("torch")), iters=args.iters,
                checkout=args.sfapprox or "this checkout")
    mb = lambda b: f"{b / 2**20:,.0f} MB"  # noqa: E731
    lines = [f"# Peak memory of `sfapprox fit` against `--max-memory` ({info['date']})", "",
             f"Machine: {info['machine']}. Command: `{info['command']}`. Input: a random dense N x N float64 "
             f"`.npy`; `fit --iters {args.iters} --time-limit 0 --device cpu`, one fresh process per row, each with an "
             "empty numba cache (it compiles the kernels, as the first run after installing does).", "",
             "| N | estimate (what --max-memory is checked against) | allocated by the fit (peak − interpreter) "
             "| allocated / estimate | interpreter + libraries | `--max-memory` = estimate | = 0.9 × estimate |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        below = ("from column blocks" if r.get("below_from_columns", "column blocks" in r["below_message"]) else "in memory"
                 ) if r["below_estimate_exit"] == 0 else "refused"
        lines.append(f"| {r['n']:,} | {mb(r['estimate'])} | {mb(r['used'])} | {r['used_over_estimate']:.2f} | "
                     f"{mb(r['base'])} | exit {r['at_estimate_exit']} | exit {r['below_estimate_exit']}, {below} "
                     f"(allocated {mb(r['below_estimate_peak_over_base'])}) |")
    lines += ["", FINDINGS, ""]
    write_results(args.tag, {"meta": info, "rows": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
