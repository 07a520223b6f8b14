"""Randomized SVD under a time limit shorter than two passes: one pass, and what it costs in error.

Run by hand (not part of the tests):

    python benchmarks/one_pass.py [--sizes 8192,16384] [--share 1.5] [--tag one_pass]
    python benchmarks/one_pass.py --memmap DIR [--cold] --sizes 8192 --tag one_pass_disk

A randomized SVD needs two passes over a matrix it reads by columns (the sketch ``X Omega``, then
``Q^T X``); under a limit shorter than that it ran past it by a whole pass.  Now a symmetric source
ends from its sketch (the single-pass Nyström form) and any other takes its co-range sketch in the
same pass when the first block's time says so.  For each size and matrix (softmax attention of seeded
Gaussian queries and keys, d = 64, not symmetric; an RBF kernel of a seeded clustered cloud,
symmetric), one pass is timed first (``X @ Omega`` by blocks); then ``RandomizedSVD`` at SF's budget
runs with ``time_limit`` = ``--share`` passes and with no limit (its two passes and two power
iterations). Each row: the fit's seconds, passes, how it ended, and its exact relative error (a pass
over every column).  Writes benchmarks/results/<tag>.json and .md.

``--memmap DIR``: the attention matrix is written to ``DIR/attention-N.npy`` (float64, C order) and read
back memory-mapped (``sfapprox.sources.open_npy``), the case the co-range sketch is for: reading its
columns, not computing them, is the cost.  ``--cold``: a thread evicts the file's pages from the page
cache every 50 ms (``posix_fadvise(DONTNEED)``), so that every pass reads the disk, as for a file larger
than the machine's memory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from pathlib import Path

import numpy as np

from _common import machine, meta, write_results


def matrices(n: int, seed: int = 0) -> dict:
    """The two sources of order ``n``: attention (not symmetric) and an RBF kernel (symmetric PSD)."""
    from sfapprox.sources import AttentionMatrix, KernelMatrix

    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((n, 64)), rng.standard_normal((n, 64))
    centres = rng.standard_normal((32, 16)) * 3
    points = centres[rng.integers(0, 32, n)] + rng.standard_normal((n, 16))
    return {"attention": AttentionMatrix(q, k, name=f"attention-{n}"),
            "kernel": KernelMatrix(points, name=f"kernel-{n}")}


def on_disk(source, folder: Path):
    """``source`` written to ``folder`` as a ``.npy`` (by column blocks) and opened memory-mapped."""
    from sfapprox.sources import block_columns, open_npy

    path = folder / f"{source.name}.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(source.n, source.n))
    for J in block_columns(source.n, 1024):
        out[:, J] = source.columns(J)
    out.flush()
    del out
    return open_npy(path, name=f"{source.name} (.npy on disk)")


def evict(path: str) -> None:
    """Drop the file's clean pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@contextlib.contextmanager
def kept_cold(path: str | None):
    """Evict ``path``'s pages every 50 ms while the block runs (None: nothing)."""
    if path is None:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.05):
            evict(path)

    evict(path)
    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


def one(source, budget: int, share: float, cold: str | None = None) -> list[dict]:
    """The pass's time, then the fit under ``share`` passes and without a limit; one row each."""
    from sfapprox import estimate_errors
    from sfapprox.baselines.rsvd import RandomizedSVD

    rank = budget // (2 * source.n + 1)
    with kept_cold(cold):
        began = time.perf_counter()
        source.matmat(np.random.default_rng(1).standard_normal((source.n, rank + 10)))
        per_pass = time.perf_counter() - began
    rows = []
    for limit in (share * per_pass, None):
        with kept_cold(cold):
            est = RandomizedSVD(budget=budget, time_limit=limit).fit(source)
        error = estimate_errors(source, {"rsvd": est.operator_}, time_limit=None)["rsvd"]
        rows.append({"matrix": source.name, "n": source.n, "pass_s": round(per_pass, 2),
                     "time_limit": None if limit is None else round(limit, 2), "seconds": round(est.seconds_, 2),
                     "passes": est.params_["passes"], "one_pass": est.params_.get("one_pass"),
                     "rel_error": error.rel_error, "rank": est.rank_})
        print(rows[-1], flush=True)
    return rows


def render(rows: list[dict], share: float) -> list[str]:
    lines = [f"# Randomized SVD under a limit shorter than two passes ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine()}. Command: `{meta()['command']}`. Budget: SF's at each N; the limit: {share:g} "
             "times one pass, measured just before; errors exact (a pass over every column).", "",
             "| matrix | N | one pass s | time limit s | seconds | passes | ended | relative error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        limit = "none" if r["time_limit"] is None else f"{r['time_limit']:.1f}"
        over = " **over**" if r["time_limit"] is not None and r["seconds"] > r["time_limit"] else ""
        ended = r["one_pass"] or ("all passes" if r["time_limit"] is None else "two passes")
        lines.append(f"| {r['matrix']} | {r['n']:,} | {r['pass_s']:.1f} | {limit} | {r['seconds']:.1f}{over} | "
                     f"{r['passes']} | {ended} | {r['rel_error']:.4g} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8192,16384")
    parser.add_argument("--share", type=float, default=1.5, help="the time limit, in passes")
    parser.add_argument("--tag", default="one_pass")
    parser.add_argument("--memmap", default=None, help="a folder: attention written there as .npy, read mapped")
    parser.add_argument("--cold", action="store_true", help="with --memmap: keep its pages out of the page cache")
    args = parser.parse_args()
    from sfapprox.budget import sf_count

    from sfapprox.baselines.rsvd import RandomizedSVD

    for source in matrices(64).values():  # torch's import and the thread pools: not in the first fit's limit
        RandomizedSVD(n_components=2, time_limit=None).fit(source)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        budget = sf_count(n)
        if args.memmap is None:
            for source in matrices(n).values():
                rows.extend(one(source, budget, args.share))
            continue
        source = on_disk(matrices(n)["attention"], Path(args.memmap))
        path = os.fspath(source.array.filename)
        try:
            rows.extend(one(source, budget, args.share, path if args.cold else None))
        finally:
            del source
            os.unlink(path)
    write_results(args.tag, {**meta(machine=machine()), "rows": rows, "share": args.share},
                  render(rows, args.share))


if __name__ == "__main__":
    main()
