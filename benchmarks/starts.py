"""Where an SF fit starts, and where it ends: the rank-one start against the usual two (issue 25, goals 1-2).

Run by hand (not part of the tests):

    python benchmarks/starts.py [--sizes 1024,4096] [--seconds 20,60] [--matrices patches,cloud,ordered,smooth]
                                [--inits auto,reference,identity,rank1] [--columns --max-memory 400M] [--tag starts]

For each matrix and N: the relative errors of the starts' products at their best multiples (the best
rank-one approximation, which ``init="rank1"`` starts from; the best constant, which the reference start
approximates; the identity), then a fit from each ``--inits`` within ``--seconds`` (the i-th size gets the
i-th), its exact relative error and the start ``init="auto"`` continued.  Matrices: ``patches``, the RBF
kernel (median bandwidth) of the 5 x 5 neighbourhoods of a square crop of the paper's test image (a real
point set, :mod:`scale_sources`); ``cloud``, the RBF kernel (bandwidth 2) of a seeded 32-cluster cloud in
16 dimensions in random order (scale_sources' synthetic set); ``ordered``, :mod:`scale_fit`'s cloud
(bandwidth 1, points in cluster order); ``smooth``, the RBF kernel (bandwidth 0.7) of ``N`` sorted points
on [0, 4].  ``--columns`` keeps each kernel a source and fits it from its column blocks under
``--max-memory`` (the path of a matrix too big to form; scored by a full pass).  Writes
benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from _common import machine, meta, write_results


def source(kind: str, n: int):
    """The matrix ``kind`` of order ``n``, as a source (never formed here)."""
    import scale_fit
    import scale_sources

    from sfapprox import KernelMatrix

    if kind == "patches":
        return KernelMatrix(scale_sources.patches(n), name=f"patches-{n}")
    if kind == "cloud":
        return KernelMatrix(scale_sources.cloud(n), bandwidth=scale_sources.BANDWIDTH, name=f"cloud-{n}")
    if kind == "ordered":
        return KernelMatrix(scale_fit.ordered_cloud(n), bandwidth=1.0, name=f"ordered-{n}")
    if kind == "smooth":
        return KernelMatrix(np.linspace(0.0, 4.0, n)[:, None], bandwidth=0.7, name=f"smooth-{n}")
    raise SystemExit(f"unknown matrix {kind!r}")


def start_errors(X: np.ndarray) -> dict:
    """The relative errors of the three starts' ideal products at their best multiples."""
    from sfapprox.sf._multistart import multiple_error, rank_one_error, top_pair

    n = X.shape[0]
    norm2 = float(np.vdot(X, X))
    _, _, top = top_pair(lambda B: X @ B, lambda B: X.T @ B, n, n_iter=4, seed=0)
    return {"rank1": rank_one_error(top, norm2, n), "constant": multiple_error(float(X.sum()), float(n * n), norm2),
            "identity": multiple_error(float(np.trace(X)), float(n), norm2)}


def one(kind: str, n: int, seconds: float, inits: list[str], columns: bool, max_memory: int | None) -> list[dict]:
    from sfapprox import ChordSF, estimate_errors

    src = source(kind, n)
    dense = src.to_dense()
    starts = start_errors(dense)
    rows = []
    for init in inits:
        X = src if columns else dense
        began = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sf = ChordSF(init=init, time_limit=seconds, max_memory=max_memory if columns else None).fit(X)
        wall = time.perf_counter() - began
        rel = sf.rel_error_
        if rel is None:  # from columns: a full pass
            rel = estimate_errors(src, {"sf": sf.operator_}, time_limit=None)["sf"].rel_error
        rows.append({"matrix": kind, "n": n, "seconds": seconds, "init": init, "started": sf.init_,
                     "raced": sorted(sf.starts_), "path": sf.params_.get("path", "memory"),
                     "rel_error": float(rel), "iterations": int(sf.n_iter_), "wall_s": round(wall, 1),
                     "start_errors": starts})
        print(rows[-1], flush=True)
    return rows


def render(rows: list[dict]) -> list[str]:
    lines = [f"# Where SF starts, and where it ends ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine()}. Command: `{meta()['command']}`.", "",
             "Start errors: relative errors at their best multiples of the best rank-one approximation (what "
             "`init=\"rank1\"` starts from), the best constant (what the reference start approximates) and the "
             "identity. Each fit's relative error is exact.", "",
             "| matrix | N | path | rank one / constant / identity | s | init | started from (raced) | "
             "relative error | iterations |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["start_errors"]
        best = min(x["rel_error"] for x in rows if (x["matrix"], x["n"], x["path"]) == (r["matrix"], r["n"], r["path"]))
        err = f"**{r['rel_error']:.4g}**" if r["rel_error"] == best else f"{r['rel_error']:.4g}"
        raced = ", ".join(r["raced"]) if len(r["raced"]) > 1 else ""
        lines.append(f"| {r['matrix']} | {r['n']:,} | {r['path']} | {s['rank1']:.3f} / {s['constant']:.3f} / "
                     f"{s['identity']:.3f} | {r['seconds']:g} | {r['init']} | {r['started']}"
                     f"{f' ({raced})' if raced else ''} | {err} | {r['iterations']} |")
    return lines


def main() -> None:
    from sfapprox._settings import parse_size

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024,4096")
    parser.add_argument("--seconds", default="20,60", help="the fits' time limit at each size")
    parser.add_argument("--matrices", default="patches,cloud,ordered,smooth")
    parser.add_argument("--inits", default="auto,reference,identity,rank1")
    parser.add_argument("--columns", action="store_true", help="fit the kernels from their column blocks")
    parser.add_argument("--max-memory", default="400M", help="the column fits' limit (with --columns)")
    parser.add_argument("--tag", default="starts")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    seconds = [float(s) for s in args.seconds.split(",")]
    if len(seconds) != len(sizes):
        raise SystemExit("--seconds needs one value per size")
    inits = args.inits.split(",")
    rows = []
    for n, secs in zip(sizes, seconds):
        for kind in args.matrices.split(","):
            rows.extend(one(kind, n, secs, inits, args.columns, parse_size(args.max_memory)))
    write_results(args.tag, {**meta(machine=machine()), "rows": rows}, render(rows))


if __name__ == "__main__":
    main()
