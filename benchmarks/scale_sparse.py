"""Sparse files whose dense form is over the memory limit: read kept sparse, compared from their columns.

Run by hand (not part of the tests):

    python benchmarks/scale_sparse.py [--n 60025] [--time-limit 30] [--max-memory 4G]
        [--methods sparse,rsvd,nystrom,rpca,sf] [--budget sf]
        [--sfapprox CHECKOUT] [--label NAME] [--merge] [--tag scale_sparse]

A SuiteSparse mesh or a network of 60,000 vertices is a few megabytes as a Matrix Market file and
26.8 GiB dense.  Until 2026-12-05 every file reader held the matrix to fit dense, so such a file was
refused from its header ("must fit dense"); now it is read kept sparse (a ``SparseSource``): the
methods that work from columns run on it, top-s selects from its non-zeros, and low-rank (+ sparse)
surrogates are scored exactly from its non-zeros.  Two matrices are written as ``.mtx`` (seeded, so the
run repeats): the 5-point Laplacian of a ``sqrt(n) x sqrt(n)`` grid (a mesh: symmetric positive definite)
and a random symmetric graph of about 5 edges per vertex (an adjacency: not PSD).  Each is run as a user
runs it, in a fresh process of this checkout or of ``--sfapprox``: ``info FILE`` and ``compare FILE
--methods sparse,rsvd,nystrom,rpca,sf`` at SF's budget (or ``--methods``, ``--budget``) under ``--time-limit``
and ``--max-memory``.  Rows:
the command's exit code, wall seconds and peak RSS (``getrusage`` of the child), and per method its
status, stored numbers, relative error (exact, or estimated with its 95 % interval) and seconds.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from _common import add_checkout_options, checkout_env, measure_command, run_tables, write_runs

METHODS = "sparse,rsvd,nystrom,rpca,sf"


def grid_laplacian(n: int) -> sp.coo_array:
    """The 5-point Laplacian of a ``m x m`` grid, ``m = floor(sqrt(n))`` (order ``m^2``)."""
    m = math.isqrt(n)
    T = sp.diags_array([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(m)
    return (sp.kron(T, eye) + sp.kron(eye, T)).tocoo()


def random_graph(n: int, degree: float = 5.0, seed: int = 0) -> sp.coo_array:
    """A symmetric 0/1 adjacency of about ``degree`` edges per vertex, no self-loops (seeded)."""
    rng = np.random.default_rng(seed)
    edges = int(degree * n / 2)
    i, j = rng.integers(0, n, edges), rng.integers(0, n, edges)
    keep = i != j
    A = sp.coo_array((np.ones(int(keep.sum())), (i[keep], j[keep])), shape=(n, n)).tocsr()
    A = ((A + A.T) > 0).astype(np.float64)
    return sp.tril(A, format="coo")  # written as a symmetric file: its lower triangle (what mmwrite keeps)


def write_inputs(folder: Path, n: int) -> dict[str, Path]:
    """The two ``.mtx`` files (symmetric storage, as SuiteSparse writes them)."""
    files = {"grid Laplacian": folder / "grid_laplacian.mtx", "random graph": folder / "random_graph.mtx"}
    scipy.io.mmwrite(files["grid Laplacian"], sp.tril(grid_laplacian(n), format="coo"), symmetry="symmetric")
    scipy.io.mmwrite(files["random graph"], random_graph(n), symmetry="symmetric")
    return files


def one(name: str, path: Path, env: dict, args) -> dict:
    """One matrix's row: its info and its comparison, each in a fresh process."""
    limits = ["--max-memory", args.max_memory]
    info = measure_command([sys.executable, "-m", "sfapprox", "info", str(path), *limits, "--json", "-"], env)
    row: dict = {"matrix": name, "file_mib": round(path.stat().st_size / 2**20, 2), "info_rc": info["rc"],
                 "info_seconds": round(info["seconds"], 2), "info_rss_mib": round(info["maxrss_kib"] / 1024)}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "c.json"
        done = measure_command([sys.executable, "-m", "sfapprox", "compare", str(path), "--methods", args.methods,
                                "--budget", args.budget, "--time-limit", str(args.time_limit), *limits,
                                "--json", str(out)], env)
        row.update(rc=done["rc"], seconds=round(done["seconds"], 1), rss_mib=round(done["maxrss_kib"] / 1024))
        if done["rc"] != 0 or not out.exists():
            row["error"] = " ".join(done.get("stderr", "").split())[-300:]
            return row
        data = json.loads(out.read_text())
    row["n"] = data["matrix"]["n"]
    row["path"] = data["matrix"].get("path", "formed")
    row["methods"] = [_method(r) for r in data["results"]]
    return row


def _method(r: dict) -> dict:
    """A result row's status, stored count, error (exact or with its interval) and seconds."""
    est = r.get("error_estimate") or {}
    interval = est.get("rel_interval")
    return {"method": r["method"], "status": r["status"], "stored": r.get("nnz"), "rel_error": r.get("rel_error"),
            "exact": est.get("exact", r.get("rel_error") is not None),
            "by_nonzeros": bool(est.get("by_nonzeros")),
            "half_width": None if not interval else math.inf if None in interval else (interval[1] - interval[0]) / 2,
            "seconds": r.get("seconds"), "stop": (r.get("params") or {}).get("stop_reason") or r.get("reason")}


def render(data: dict) -> list[str]:
    def num(v, fmt):
        return "–" if v is None else format(v, fmt)

    def error(m: dict) -> str:
        if m["rel_error"] is None:
            return "–"
        how = "exact (non-zeros)" if m["by_nonzeros"] else "exact" if m["exact"] else f"± {m['half_width']:.2g}"
        return f"{m['rel_error']:.4g} {how}"

    lines = ["# Sparse files whose dense form is over the memory limit", "", f"Machine: {data['meta']['machine']}",
             "", "Commands: " + "; ".join(f"`{c}`" for c in data.get("commands", [])), "",
             f"`compare FILE --methods {data.get('methods', METHODS)} --budget {data.get('budget', 'sf')} --time-limit "
             f"{data['time_limit']} --max-memory {data['max_memory']}`, each in a fresh process; seconds and peak RSS "
             "of the whole command (getrusage).", ""]
    header = ["matrix", "N", "file MiB", "info rc / s / MiB", "compare rc", "path", "seconds", "peak RSS MiB",
              "method", "status", "stored", "relative error", "method s", "stop / why"]

    def cells(line):
        r, m, first = line
        head = [r["matrix"], num(r.get("n"), ","), r["file_mib"], f"{r['info_rc']} / {r['info_seconds']} / "
                f"{r['info_rss_mib']}", r["rc"], r.get("path", "–"), r["seconds"], r["rss_mib"]]
        head = head if first else [""] * len(head)
        if m is None:
            return head + ["–", "–", "–", "–", "–", (r.get("error") or "")[:200].replace("|", "/")]
        return head + [m["method"], m["status"], num(m["stored"], ","), error(m), num(m["seconds"], ".1f"),
                       (m["stop"] or "").replace("|", "/")[:120]]

    # one table line per method, the command's own cells on its first
    flat = {**data, "runs": {name: [(r, m, k == 0) for r in rows for k, m in enumerate(r.get("methods") or [None])]
                             for name, rows in data["runs"].items()}}
    return lines + run_tables(flat, header, cells)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60_025, help="order (the grid's is the square below it)")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--max-memory", default="4G")
    ap.add_argument("--methods", default=METHODS, help="compare's --methods")
    ap.add_argument("--budget", default="sf", help="compare's --budget (default: SF's)")
    add_checkout_options(ap, "scale_sparse")
    args = ap.parse_args()
    env = checkout_env(args.sfapprox)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in write_inputs(Path(tmp), args.n).items():
            rows.append(one(name, path, env, args))
            print(json.dumps(rows[-1]), flush=True)
    write_runs(args, rows, {"time_limit": args.time_limit, "max_memory": args.max_memory, "methods": args.methods,
                            "budget": args.budget}, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
