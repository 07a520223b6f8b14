"""The text readers' peak memory against the estimate ``Source.read_text`` checks before parsing.

Run by hand (not part of the tests):

    python benchmarks/text_memory.py [--sizes 1 10 100] [--readers csv cov_csv ...] [--data-dir DIR]

Per reader and size (MB of text), a file of a shape typical of the format is written (seed 0) and
read by the reader alone (``Source`` + its ``read_*``, no limit) in two fresh processes: one under
tracemalloc (its peak: what Python and numpy allocate, the file's bytes included), one without it
(the growth of the peak RSS, ``resource.getrusage``'s ``ru_maxrss`` after the read, over the RSS
before it, the peak having been reset to it: allocator overhead and untraced C buffers too).  Beside
them, the estimate ``read_text`` checked (the largest of its checks where a reader reads two files),
and what the read was checked for in all: the largest of that and the reader's own later checks (the
dense table's, the slow table path's, the covariance's), each of which refuses alone.  Writes benchmarks/results/text_memory.json and .md.

The readers (shapes):

* ``csv``: a square CSV matrix (``%.6g`` normals), read as format "csv";
* ``csv_01``: a square 0/1 CSV matrix (an adjacency matrix: 2 bytes a cell, the table 4 times the text);
* ``csv_slow``: the same with one cell written ``1.0D+00``, which sends the table down the
  row-by-row path (its own check, ``80`` bytes a cell, beside read_text's);
* ``cov_csv``: a tall CSV table, 20 columns, read for its covariance;
* ``cov_libsvm``: LIBSVM lines (label, 100 of 500 features ``i:v``), read for their covariance;
* ``ijv``: ``i j v`` triplets (N = lines / 10);
* ``ijv_tri``: the same with ``i >= j`` on every line (one triangle: mirrored on reading);
* ``hb``: a Harwell-Boeing ``RUA`` file of a random sparse matrix (scipy's ``hb_write``, 20 entries a column);
* ``hb_rsa``: its lower triangle as ``RSA`` (one triangle stored, expanded on reading);
* ``linqs``: a ``.content`` (200 binary features a node) and a ``.cites`` (random pairs), half the size each.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _common import (add_file_options, file_rows, file_rows_heading, findings_lines, proc_status, reset_peak,
                     run_child, write_results)

READERS = ("csv", "csv_01", "csv_slow", "cov_csv", "cov_libsvm", "ijv", "ijv_tri", "hb", "hb_rsa", "linqs")


# -- the files -------------------------------------------------------------------------------------------


def _cells(rng, count: int) -> list[str]:
    return [f"{x:.6g}" for x in rng.standard_normal(count)]


def _table(path: Path, rows: int, cols: int, slow: bool = False, binary: bool = False) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        for r in range(rows):
            cells = list(map(str, rng.integers(0, 2, cols))) if binary else _cells(rng, cols)
            if slow and r == rows // 2:
                cells[0] = "1.0D+00"
            fh.write(",".join(cells) + "\n")


def _libsvm(path: Path, size: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        while fh.tell() < size:
            idx = np.sort(rng.choice(500, 100, replace=False)) + 1
            fh.write(f"{rng.integers(0, 10)} " + " ".join(f"{i}:{v:.4g}" for i, v in zip(idx, rng.random(100)))
                     + "\n")


def _ijv(path: Path, size: int, triangle: bool = False) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    lines = size // 18  # "12345 67890 0.123456\n" is about 18 bytes at these orders
    n = max(lines // 10, 10)
    i, j, v = rng.integers(1, n + 1, lines), rng.integers(1, n + 1, lines), rng.random(lines)
    if triangle:
        i, j = np.maximum(i, j), np.minimum(i, j)
    with open(path, "w") as fh:
        fh.writelines(f"{a} {b} {w:.6g}\n" for a, b, w in zip(i, j, v))


def _hb(path: Path, size: int, symmetric: bool) -> None:
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    # hb_write's default formats: about 40 bytes an entry (a 24-character value, a 10-character index)
    nnz = size // 40
    n = max(nnz // 20, 10)
    A = sp.random(n, n, density=nnz / n / n, random_state=np.random.default_rng(0), format="csc")
    if symmetric:
        A = sp.csc_matrix(sp.tril(A + A.T))
    scipy.io.hb_write(str(path), sp.csc_matrix(A))
    if symmetric:  # hb_write writes RUA; one triangle stored as RSA is what the reader expands
        text = path.read_text().splitlines(keepends=True)
        text[2] = "RSA" + text[2][3:]
        path.write_text("".join(text))


def _linqs(path: Path, size: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    nodes = max(size // 2 // 410, 10)  # "id" + 200 "\t0" + "\tlabel": about 410 bytes a line
    ids = rng.choice(10**7, nodes, replace=False)
    with open(path.with_suffix(".content"), "w") as fh:
        for node in ids:
            fh.write(f"{node}\t" + "\t".join(map(str, rng.integers(0, 2, 200))) + f"\tlabel{node % 7}\n")
    cites = size // 2 // 16
    a, b = ids[rng.integers(0, nodes, cites)], ids[rng.integers(0, nodes, cites)]
    with open(path, "w") as fh:
        fh.writelines(f"{x}\t{y}\n" for x, y in zip(a, b))


def make(reader: str, mb: int, folder: Path) -> Path:
    """The file of ``reader``'s shape, about ``mb`` MB (10^6 bytes) of text, in ``folder`` (written once)."""
    size = mb * 10**6
    ext = {"cov_libsvm": "libsvm", "ijv": "ijv", "ijv_tri": "ijv", "hb": "rua", "hb_rsa": "rsa", "linqs": "cites"}.get(reader, "csv")
    path = folder / f"{reader}_{mb}mb.{ext}"
    if path.exists():
        return path
    if reader in ("csv", "csv_slow", "csv_01"):
        n = int((size / (2 if reader == "csv_01" else 10)) ** 0.5)  # "-0.123456," is about 10 bytes
        _table(path, n, n, slow=reader == "csv_slow", binary=reader == "csv_01")
    elif reader == "cov_csv":
        _table(path, size // 200, 20)
    elif reader == "cov_libsvm":
        _libsvm(path, size)
    elif reader in ("ijv", "ijv_tri"):
        _ijv(path, size, reader == "ijv_tri")
    elif reader in ("hb", "hb_rsa"):
        _hb(path, size, reader == "hb_rsa")
    else:
        _linqs(path, size)
    return path


# -- the measurement (in a fresh process) ------------------------------------------------------------------


def _read(reader: str, path: str):
    from sfapprox.io._common import DEFAULTS, Source

    src = Source(path, max_memory=1 << 50)
    if reader in ("cov_csv", "cov_libsvm"):
        from sfapprox.io._covariance import read_covariance

        return read_covariance(src, DEFAULTS, reader[4:])
    if reader in ("csv", "csv_slow", "csv_01"):
        from sfapprox.io._text import read_csv

        return read_csv(src, DEFAULTS)
    if reader in ("ijv", "ijv_tri"):
        from sfapprox.io._text import read_ijv

        return read_ijv(src, DEFAULTS)
    if reader in ("hb", "hb_rsa"):
        from sfapprox.io._hb import read_hb

        return read_hb(src, DEFAULTS)
    from sfapprox.io._linqs import read_linqs

    return read_linqs(src, DEFAULTS)


def one(reader: str, path: str, trace: bool) -> dict:
    """The reader on ``path`` in this (fresh) process: its tracemalloc peak, or its RSS peak's growth and
    the estimates it was checked for."""
    import resource
    import tracemalloc

    import importlib

    # every reader's module imported before the read (not counted in it)
    common, covariance, text = (importlib.import_module(f"sfapprox.io.{name}") for name in ("_common", "_covariance",
                                                                                            "_text"))
    importlib.import_module("sfapprox.io._hb")
    importlib.import_module("sfapprox.io._linqs")

    if trace:
        tracemalloc.start()
        _read(reader, path)
        return {"peak": tracemalloc.get_traced_memory()[1]}
    checks: dict[str, int] = {"text": 0, "slow": 0, "after": 0}
    real = common.check_memory

    def check_memory(n_bytes, *, what, **kwargs):
        if " lines of text " in what:  # read_text's (twice for LINQS: the largest)
            checks["text"] = max(checks["text"], n_bytes)
        elif ": parsing a " in what:  # the slow table path's own
            checks["slow"] = max(checks["slow"], n_bytes)
        elif what.endswith(" table") or "covariance" in what:  # the table's and the covariance's checks
            checks["after"] = max(checks["after"], n_bytes)
        return real(n_bytes, what=what, **kwargs)

    common.check_memory = text.check_memory = covariance.check_memory = check_memory
    reset_peak()
    before = proc_status("VmRSS")
    _read(reader, path)
    return {"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before, **checks}


def measure(reader: str, path: Path) -> dict:
    """The file's size and lines, the old estimate, the checks, and both peaks."""
    files = [path, path.with_suffix(".content")] if reader == "linqs" else [path]
    sizes = [f.stat().st_size for f in files]
    lines = [f.read_bytes().count(b"\n") + 1 for f in files]
    row = {"reader": reader, "file": path.name, "bytes": sum(sizes), "lines": sum(lines),
           "old_estimate": max(4 * s + 300 * n for s, n in zip(sizes, lines))}
    row["traced"] = run_child("text_memory", "one", [reader, str(path), True])["peak"]
    untraced = run_child("text_memory", "one", [reader, str(path), False])
    row.update(rss=untraced["peak"], estimate=untraced["text"], slow=untraced["slow"], after=untraced["after"])
    # what a limit holds the read to: the largest of its checks (each of which refuses alone)
    row["checked"] = max(row["estimate"], row["slow"], row["after"])
    print({k: (f"{v / 1e6:.1f}M" if isinstance(v, int) and k not in ("lines",) else v) for k, v in row.items()},
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_file_options(ap, "text_memory", [1, 10, 100], "text")
    ap.add_argument("--readers", nargs="+", default=list(READERS), choices=READERS)
    args = ap.parse_args()
    out = file_rows(args, args.readers, make, measure)
    mb = 1e6
    lines = file_rows_heading("The text readers' peak memory against the estimate they are checked for", out,
                              "MB = 10^6 bytes")
    lines += ["| reader | file | MB | lines | traced peak MB | RSS growth MB | read_text's estimate MB | checked MB | "
              "checked / traced | checked / RSS | old estimate MB | old / traced |", "|" + "---|" * 12]
    for r in out["rows"]:
        lines.append(f"| {r['reader']} | {r['file']} | {r['bytes'] / mb:.1f} | {r['lines']:,} | {r['traced'] / mb:.1f} | "
                     f"{r['rss'] / mb:.1f} | {r['estimate'] / mb:.1f} | {r['checked'] / mb:.1f} | "
                     f"{r['checked'] / r['traced']:.2f} | {r['checked'] / max(r['rss'], 1):.2f} | "
                     f"{r['old_estimate'] / mb:.1f} | {r['old_estimate'] / r['traced']:.2f} |")
    lines += ["", *findings_lines(out, "(to be written)")]
    write_results(args.name, out, lines)


if __name__ == "__main__":
    main()
