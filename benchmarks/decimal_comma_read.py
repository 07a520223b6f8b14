"""Reading a table or triplets with ``decimal=','`` whose text holds no ',' or '.': this checkout against another.

Run by hand (not part of the tests):

    python benchmarks/decimal_comma_read.py --sfapprox /tmp/sep2-before [--rounds 2] [--n 1500] [--entries 1000000]

Writes, once, into ``--data`` (default ``<temp>/sfapprox-decimal-comma``), seeded: a tab-separated ``.tsv``
of ``--n`` x ``--n`` integers (-999..999) and blank-separated ``.ijv`` triplets (``--entries`` lines of
integer indices and values, order 3,000).  Each is read by ``sfapprox.io.load_matrix(path, decimal=",")``
in a fresh process (``run_child``), the two checkouts alternating, ``--rounds`` times.  Each child reports
its seconds, its peak RSS (``resource.getrusage(RUSAGE_SELF)``, the import included) and the SHA-256 of the
matrix's bytes; the two checkouts must agree to the bit (SystemExit otherwise).  Writes
benchmarks/results/decimal_comma_read.json and .md: per file, the median seconds and peak RSS of each
checkout and their ratios (after / before).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from _common import ROOT, checkout_env, findings_lines, machine, meta, run_child, version, write_results

DEFAULT_DATA = Path(tempfile.gettempdir()) / "sfapprox-decimal-comma"


def make_files(data: str, n: int, entries: int) -> list[str]:
    """The two files in ``data`` (written unless there already, seeded); their names."""
    import numpy as np

    rng = np.random.default_rng(0)
    data = Path(data)
    data.mkdir(parents=True, exist_ok=True)
    table, triplets = data / f"table_{n}.tsv", data / f"triplets_{entries}.ijv"
    if not table.exists():
        np.savetxt(table, rng.integers(-999, 1000, (n, n)), fmt="%d", delimiter="\t")
    if not triplets.exists():
        ij = rng.integers(1, 3001, (entries, 2))
        np.savetxt(triplets, np.column_stack([ij, rng.integers(-999, 1000, entries)]), fmt="%d")
    return [table.name, triplets.name]


def one(path: str) -> dict:
    """Read ``path`` with ``decimal=','`` in this (fresh) process: seconds, peak RSS (MiB), the matrix's SHA-256."""
    import hashlib
    import resource
    import time

    from sfapprox.io import load_matrix

    began = time.perf_counter()
    m = load_matrix(path, decimal=",", max_memory="8G")
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    A = m.matrix
    digest = hashlib.sha256(str(A.shape).encode())
    for part in ((A.indptr, A.indices, A.data) if hasattr(A, "indptr") else (A,)):
        digest.update(memoryview(part).cast("B"))
    return {"seconds": seconds, "peak_rss_mib": peak, "sha256": digest.hexdigest()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfapprox", required=True, help="the checkout to compare with (its sfapprox first on PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=1500, help="the table's order")
    ap.add_argument("--entries", type=int, default=1_000_000, help="the triplets' lines")
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="where the files are written and read")
    ap.add_argument("--tag", default="decimal_comma_read")
    args = ap.parse_args()
    data = Path(args.data)
    # in a child: getrusage's peak survives exec, so this process's arrays would count in every reader's peak
    names = run_child("decimal_comma_read", "make_files", [str(data), args.n, args.entries])
    envs = {"before": checkout_env(args.sfapprox), "after": checkout_env(str(ROOT))}
    rows = []
    for name in names:
        runs = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, env in envs.items():
                runs[label].append(run_child("decimal_comma_read", "one", [str(data / name)], env=env))
                r = runs[label][-1]
                print(f"{name} {label}: {r['seconds']:.2f} s, {r['peak_rss_mib']:.0f} MiB", flush=True)
        if len({r["sha256"] for rs in runs.values() for r in rs}) != 1:
            raise SystemExit(f"{name}: the two checkouts read different matrices")
        med = {label: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_rss_mib")}
               for label, rs in runs.items()}
        rows.append({"file": name, "mib": round(os.path.getsize(data / name) / 2**20, 1),
                     "sha256": runs["after"][0]["sha256"][:16], "before": med["before"], "after": med["after"],
                     "time_ratio": round(med["after"]["seconds"] / med["before"]["seconds"], 2),
                     "rss_ratio": round(med["after"]["peak_rss_mib"] / med["before"]["peak_rss_mib"], 2),
                     "runs": runs})
    out = {"meta": meta(machine=machine(numpy=version("numpy"), scipy=version("scipy")),
                        before=args.sfapprox, rounds=args.rounds), "rows": rows}
    lines = ["# Reading with decimal=',' a file with no ',' or '.': before / after", "",
             f"Machine: {out['meta']['machine']}", "",
             f"Command: `{out['meta']['command']}` (before: `{args.sfapprox}`; medians of {args.rounds} rounds, "
             "fresh processes alternating; peak RSS includes the import)", "",
             "| file | MiB | s before | s after | time after/before | peak MiB before | peak MiB after "
             "| RSS after/before | sha256 (both) |", "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['file']} | {r['mib']} | {r['before']['seconds']:.2f} | {r['after']['seconds']:.2f} | "
                     f"{r['time_ratio']:.2f} | {r['before']['peak_rss_mib']:.0f} | {r['after']['peak_rss_mib']:.0f} | "
                     f"{r['rss_ratio']:.2f} | {r['sha256']} |")
    lines += ["", *findings_lines(out, "(to be written)")]
    write_results(args.tag, out, lines)


if __name__ == "__main__":
    main()
