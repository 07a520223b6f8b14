"""Reading a large LIBSVM point table as a kernel source: the whole-text reader against the line-by-line one.

Run by hand (not part of the tests):

    python benchmarks/libsvm_read.py [--rows 60000] [--features 780] [--nonzeros 150] [--rounds 2]

Writes an MNIST-like table (``--rows`` samples of ``--features`` pixels 1-255, ``--nonzeros`` of them
non-zero per row, seeded) as LIBSVM text into a temporary folder, then opens it as
``sfapprox.open_matrix(path, kernel="rbf")`` in fresh processes, alternating: the reader as shipped
(``io._covariance._libsvm_arrays``, the features parsed in C over the whole text) and the line-by-line
reader it falls back to (one Python string per token), each with its seconds and peak RSS
(``resource.getrusage``).  The two tables are checked equal.  Writes
benchmarks/results/libsvm_read.json and .md.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import meta, run_child, write_results


def write_table(path: str, rows: int, features: int, nonzeros: int, seed: int = 0) -> None:
    """An MNIST-like LIBSVM table: a digit label, then ``nonzeros`` sorted ``index:value`` pairs a row."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="ascii") as out:
        for i in range(rows):
            idx = np.sort(rng.choice(features, nonzeros, replace=False)) + 1
            vals = rng.integers(1, 256, nonzeros)
            out.write(f"{i % 10} " + " ".join(f"{a}:{b}" for a, b in zip(idx, vals)) + "\n")


def one(path: str, whole: bool) -> dict:
    """Open ``path`` as a kernel source in this (fresh) process: seconds, peak RSS and a digest of the table."""
    import hashlib
    import resource
    import time

    import sfapprox
    from sfapprox.io import _covariance

    if not whole:
        _covariance._libsvm_arrays = lambda text: None  # the line-by-line reader
    began = time.perf_counter()
    source = sfapprox.open_matrix(path, kernel="rbf", max_memory=4 << 30)
    seconds = time.perf_counter() - began
    points = source.points
    return {"reader": "whole text" if whole else "line by line", "seconds": round(seconds, 2),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "shape": list(points.shape), "digest": hashlib.sha256(points.tobytes()).hexdigest()[:16]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--features", type=int, default=780)
    parser.add_argument("--nonzeros", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        path = str(Path(scratch) / "table.libsvm")
        write_table(path, args.rows, args.features, args.nonzeros)
        size = Path(path).stat().st_size
        for _ in range(args.rounds):
            for whole in (True, False):
                rows.append(run_child("libsvm_read", "one", [path, whole]))
                print(rows[-1], flush=True)
    if len({r["digest"] for r in rows}) != 1:
        raise SystemExit("the two readers gave different tables")
    data = {"meta": meta(file_mib=round(size / 2**20, 1)), "rows": rows}
    lines = [f"# Reading a LIBSVM point table as a kernel source ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}`. Table: {args.rows:,} x {args.features} ({args.nonzeros} "
             f"non-zeros a row, {data['meta']['file_mib']} MiB of text); the same table from both readers.", "",
             "| reader | seconds | peak RSS (MiB) |", "|---|---|---|"]
    lines += [f"| {r['reader']} | {r['seconds']} | {r['peak_rss_mib']:,} |" for r in rows]
    write_results("libsvm_read", data, lines)


if __name__ == "__main__":
    main()
