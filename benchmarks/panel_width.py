"""Column-block width of the compiled SF kernel: one evaluation's seconds for each width and dtype.

Run by hand (not part of the tests):

    python benchmarks/panel_width.py --sizes 4096,8192 --threads 1,2 --rounds 3

For each N, dtype (float64, float32) and thread count, :func:`sfapprox.sf._kernels.loss_and_grad_numba`
on a random target with each width in ``--widths`` (``NUMBA_PANEL``, the float64 width, set so that the
dtype's blocks are that many columns), the widths interleaved round by round so that a busy machine
slows them alike; the table gives the best of each width's rounds and its ratio to the width the
kernel now picks for that dtype (``numba_width(n, itemsize)``). Writes benchmarks/results/panel_width.json
and .md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import meta, write_results

NAME = "panel_width"


def measure(n: int, dtype: str, threads: int, widths: list[int], rounds: int) -> dict[int, float]:
    """Best seconds of one evaluation for each block width (in columns of ``dtype``)."""
    import torch

    import sfapprox._threads as th
    from sfapprox.budget import sf_structure
    from sfapprox.chord import support_offsets
    from sfapprox.sf import _kernels

    offsets = [int(d) for d in support_offsets(n, "chord", 2)]
    rng = np.random.default_rng(0)
    dt = getattr(torch, dtype)
    ws = torch.tensor(rng.standard_normal((sf_structure(n).n_factors, n, len(offsets))) / len(offsets) ** 0.5, dtype=dt)
    X = torch.tensor(rng.standard_normal((n, n)), dtype=dt)
    itemsize = ws.element_size()
    chosen, before = _kernels.NUMBA_PANEL, th._COMPILED_THREADS
    best = {w: float("inf") for w in widths}
    th._COMPILED_THREADS = threads  # as a fit's AdaptiveThreads sets it
    try:
        for _ in range(rounds):
            for w in widths:
                _kernels.NUMBA_PANEL = w * itemsize // 8  # the float64 width whose bytes make w columns
                _kernels.loss_and_grad_numba(ws, offsets, X)  # the blocks' buffers warm
                t0 = time.perf_counter()
                _kernels.loss_and_grad_numba(ws, offsets, X)
                best[w] = min(best[w], time.perf_counter() - t0)
    finally:
        _kernels.NUMBA_PANEL, th._COMPILED_THREADS = chosen, before
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--widths", default="32,64,128,256")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from sfapprox.sf._kernels import numba_width

    widths = [int(w) for w in args.widths.split(",")]
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for dtype, itemsize in (("float64", 8), ("float32", 4)):
            for threads in (int(t) for t in args.threads.split(",")):
                best = measure(n, dtype, threads, widths, args.rounds)
                rows.append({"n": n, "dtype": dtype, "threads": threads, "chosen": numba_width(n, itemsize),
                             "seconds": {str(w): s for w, s in best.items()}})
                print(rows[-1], flush=True)
    data = {"meta": meta(), "rows": rows}
    lines = ["# Column-block width of the compiled SF kernel", "", f"Command: `{data['meta']['command']}`", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']:.2f}.", "",
             "Seconds of one evaluation (best of the rounds), and in brackets its ratio to the width the kernel "
             "picks (**bold**).", "",
             "| N | dtype | threads | " + " | ".join(f"{w} columns" for w in widths) + " |",
             "|---|---|---|" + "---|" * len(widths)]
    for r in rows:
        base = r["seconds"][str(r["chosen"])] if str(r["chosen"]) in r["seconds"] else None
        cells = []
        for w in widths:
            s = r["seconds"][str(w)]
            cell = f"{s:.3f}" + (f" ({s / base:.2f})" if base else "")
            cells.append(f"**{cell}**" if w == r["chosen"] else cell)
        lines.append(f"| {r['n']:,} | {r['dtype']} | {r['threads']} | " + " | ".join(cells) + " |")
    write_results(NAME, data, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
