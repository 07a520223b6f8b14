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
import tempfile
from pathlib import Path

from _common import run_child
from read_formats import alternate_reads, timed_read, write_table

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
    import time

    from sfapprox.io import load_matrix

    began = time.perf_counter()
    return timed_read(lambda: load_matrix(path, decimal=",", max_memory="8G"), began)


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
    rows = alternate_reads("decimal_comma_read", data, names, args.sfapprox, args.rounds)
    write_table(args, rows, "# Reading with decimal=',' a file with no ',' or '.': before / after")


if __name__ == "__main__":
    main()
