"""What the loaders' safety checks cost, and what they save (issue 18).

Run by hand (not part of the tests):

    python benchmarks/io_safety.py [--entries 1800000] [--repeat 3]

1. Refusing a huge header: files declaring an order of 90,000,000 with two
   entries (Matrix Market size line, Pajek ``*Vertices``, header-less triplets,
   a scipy.sparse ``.npz`` shape, a MATLAB v7.3 fill-value-only variable) go
   through ``sfapprox info`` in a fresh process; its wall time and peak RSS are
   recorded beside those of ``sfapprox info`` on a 3 x 3 file (the cost of
   starting Python and importing).
2. Checking a Matrix Market body: ``load_matrix`` on a random coordinate file
   against ``scipy.io.mmread`` of the same file, best of ``--repeat``.

Writes benchmarks/results/io_safety.json and benchmarks/results/io_safety.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import ROOT, machine, meta, version, write_results

ORDER = 90_000_000

#: Before this check (commit 8202e8f, the loaders of issue 18's report), measured by hand on the
#: same 2-core machine with `/usr/bin/time -f "%e s %M KB" python -m sfapprox.cli info FILE`
#: (the same files): the matrix was loaded as CSR, and only fit refused it.
BEFORE = {
    "huge.mtx": "4.1 s, 1.1 GB (fit: 15.7 s, 1.2 GB, then refused)",
    "huge.net": "17.9 s, 2.2 GB",
    "huge.ijv": "11.3 s, 2.2 GB",
    "huge.npz": "9.5 s, 2.2 GB",
    "huge_fill.mat": "1.4 s, 81 MB (already refused from the dataset's shape)",
}
MM = "%%MatrixMarket matrix coordinate real general\n"


def _write_files(folder: Path) -> dict[str, Path]:
    import h5py
    import scipy.sparse as sp

    files = {
        "small.mtx": MM + "3 3 3\n1 1 1\n2 2 1\n3 3 1\n",
        "huge.mtx": MM + f"{ORDER} {ORDER} 2\n1 1 1.0\n2 2 1.0\n",
        "huge.net": f"*Vertices {ORDER}\n*Arcs\n1 2\n2 1\n",
        "huge.ijv": f"1 1 1.0\n{ORDER} {ORDER} 1.0\n",
    }
    paths = {}
    for name, text in files.items():
        paths[name] = folder / name
        paths[name].write_text(text)
    paths["huge.npz"] = folder / "huge.npz"
    sp.save_npz(paths["huge.npz"], sp.coo_array(([1.0, 1.0], ([0, 1], [0, 1])), shape=(ORDER, ORDER)))
    paths["huge_fill.mat"] = folder / "huge_fill.mat"
    with h5py.File(paths["huge_fill.mat"], "w", userblock_size=512) as f:
        d = f.create_dataset("A", shape=(10**6, 10**6), dtype="f8", chunks=(64, 64))
        d.attrs["MATLAB_class"] = np.bytes_("double")
    return paths


def _run_info(path: Path) -> dict:
    """``sfapprox info path`` in a fresh process: exit code, seconds, its peak RSS, first stderr line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "sfapprox.cli", "info", str(path)], env=env,
                                stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource usage
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        line = (err.read().decode().strip().splitlines() or [""])[0]
    return {"exit": proc.returncode, "seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "message": line[:200]}


def _body_check(entries: int, repeat: int, folder: Path) -> dict:
    import scipy.io
    import scipy.sparse as sp

    from sfapprox.io import load_matrix

    n = int(np.sqrt(entries / 0.2))
    A = sp.random(n, n, density=entries / n**2, random_state=0, format="coo")
    path = folder / "body.mtx"
    scipy.io.mmwrite(path, A)
    ours, theirs = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        scipy.io.mmread(path)
        theirs.append(time.perf_counter() - t)
        t = time.perf_counter()
        load_matrix(path, max_memory=2**40)
        ours.append(time.perf_counter() - t)
    return {"n": n, "entries": int(A.nnz), "file_mb": round(path.stat().st_size / 2**20, 1),
            "scipy_mmread_s": round(min(theirs), 3), "load_matrix_s": round(min(ours), 3),
            "ratio": round(min(ours) / min(theirs), 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_800_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = _write_files(folder)
        # The 3 x 3 file gives the cost of starting Python and importing.
        refusals = {name: _run_info(path) for name, path in paths.items()}
        body = _body_check(args.entries, args.repeat, folder)
    # The run's description at the top level, beside the results (this file has no "meta").
    result = {
        **meta(machine=machine(numpy=np.__version__, scipy=version("scipy"))),
        "header_refusals": refusals,
        "before": BEFORE,
        "body_check": body,
    }
    lines = [
        "# Loader safety: refusing huge headers, checking Matrix Market bodies",
        "",
        f"Machine: {result['machine']}. Command: `{result['command']}`.",
        "",
        "## `sfapprox info` on files declaring an order of 90,000,000",
        "",
        "| file | exit | seconds | peak RSS (MB) | before (commit 8202e8f) | message |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in refusals.items():
        lines.append(f"| {name} | {r['exit']} | {r['seconds']} | {r['peak_rss_mb']} | {BEFORE.get(name, '')} | "
                     f"{r['message'][:90]} |")
    lines += [
        "",
        "## Matrix Market body check",
        "",
        f"{body['entries']:,} entries ({body['file_mb']} MB, n = {body['n']}): scipy.io.mmread {body['scipy_mmread_s']} s, "
        f"load_matrix {body['load_matrix_s']} s (x{body['ratio']}, best of {args.repeat}).",
        "",
        "## Findings",
        "",
        "* Every huge header is refused from the header: the refusal costs what starting Python and",
        "  importing cost (compare small.mtx), where the matrix used to be built first (seconds and GB).",
        "* load_matrix's time includes the body check (one regex pass over a memory map, 2-3x",
        "  scipy's parse), float64 conversion, canonical CSR and SHA-256; scipy's mmread only parses.",
        "  Interleaved runs on this file, same machine: 0.57 s before this change, 1.30 s after",
        "  (best of 3 each); the regex is the difference (profiled), small beside any fit.",
    ]
    write_results("io_safety", result, lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
