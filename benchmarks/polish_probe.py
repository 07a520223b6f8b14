"""Does solving SF's first and last factors exactly, part-way through an L-BFGS fit, move it ahead? (issue 25, goal 1)

Run by hand (not part of the tests):

    python benchmarks/polish_probe.py --sizes 512,2048 --iterations 50,100,200

With every other factor held, the product is linear in the last factor ``W_M`` and splits by columns:
``P[:, j] = sum_k A[:, j - d_k] W_M[j - d_k, j]`` with ``A = W_1 ... W_(M-1)``, ``K`` unknowns per
column, a ``K x K`` least-squares problem whose Gram entries are dot products of ``A``'s columns
(``O(K^2 N^2)`` in all, about a fifth of an evaluation).  The first factor splits by rows the same way.
An exact solve is a block-coordinate step that can only lower the loss: if L-BFGS left the outer
factors far from their optimum, a "polish" every so often would be cheap progress.  Each row: the
project's own fit (``ChordSF``, identity start, float64, ``max_iter`` iterations, no time limit) on
``scale_fit``'s clustered RBF kernel, then last, first and last factors solved again, against the same
fit's curve a few iterations later (read from one longer fit's callback: the fit is deterministic).
Counted in iterations, so the figures do not depend on the machine's load; the solve's seconds are
beside one evaluation's.  Writes benchmarks/results/polish_probe.json and .md.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from _common import meta, write_results
from scale_fit import matrix

import sfapprox
from sfapprox.sf import _kernels


def _product(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return _kernels.chord_product(torch.as_tensor(values), offsets.tolist()).numpy()


def _solve_end(values: np.ndarray, offsets: np.ndarray, X: np.ndarray, last: bool) -> np.ndarray:
    """``values`` with the last (or first) factor the least-squares optimum for the others held."""
    M, n, K = values.shape
    if last:  # X ~ A W_M: column j uses A's columns j - d_k
        A = _product(values[:-1], offsets)
        idx = [(np.arange(n) - d) % n for d in offsets]
        part = [A[:, i] for i in idx]
        target = X
    else:  # X ~ W_1 B: row i uses B's rows i + d_k; transpose to the same column form
        B = _product(values[1:], offsets)
        idx = [(np.arange(n) + d) % n for d in offsets]
        part = [B[i].T for i in idx]
        target = X.T
    G = np.empty((n, K, K))
    b = np.empty((n, K))
    for k in range(K):
        b[:, k] = np.einsum("rj,rj->j", part[k], target)
        for l in range(k, K):
            G[:, k, l] = G[:, l, k] = np.einsum("rj,rj->j", part[k], part[l])
    ridge = 1e-12 * np.trace(G, axis1=1, axis2=2)[:, None, None] / K  # a spent column stays solvable
    c = np.linalg.solve(G + ridge * np.eye(K), b[..., None])[..., 0]
    out = values.copy()
    if last:
        for k in range(K):
            out[-1, idx[k], k] = c[:, k]
    else:
        out[0] = c
    return out


def _rel(values: np.ndarray, offsets: np.ndarray, X: np.ndarray, fro: float) -> float:
    return float(np.linalg.norm(X - _product(values, offsets)) / fro)


def _fit(X: np.ndarray, iterations: int, callback=None) -> sfapprox.ChordSF:
    return sfapprox.ChordSF(max_iter=iterations, time_limit=None, init="identity", device="cpu",
                            dtype="float64", callback=callback).fit(X)


def probe(n: int, iterations: list[int]) -> list[dict]:
    X = matrix("cloud", n)
    fro = float(np.linalg.norm(X))
    curve: dict[int, float] = {}
    longest = _fit(X, 3 * max(iterations), lambda info: curve.__setitem__(int(info["iteration"]),
                                                                        info["fro_error"] / fro))
    per_eval = longest.seconds_ / max(1, longest.n_evals_)
    rows = []
    for it in iterations:
        fit = _fit(X, it)
        v, offsets = np.asarray(fit.factors_, dtype=np.float64), np.asarray(fit.offsets_)
        began = time.perf_counter()
        last = _solve_end(v, offsets, X, last=True)
        solve_s = time.perf_counter() - began
        first = _solve_end(last, offsets, X, last=False)
        again = _solve_end(first, offsets, X, last=True)
        ahead = {f"lbfgs +{p}%": curve.get(int(round(it * (1 + p / 100)))) for p in (5, 10, 50, 100)}
        rows.append({"n": n, "iterations": it, "lbfgs": _rel(v, offsets, X, fro),
                     "last solved": _rel(last, offsets, X, fro), "then first": _rel(first, offsets, X, fro),
                     "then last": _rel(again, offsets, X, fro), **ahead,
                     "solve s": round(solve_s, 2), "evaluation s": round(per_eval, 4)})
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,2048")
    parser.add_argument("--iterations", default="50,100,200")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    its = [int(s) for s in args.iterations.split(",")]
    rows = [r for n in (int(s) for s in args.sizes.split(",")) for r in probe(n, its)]
    info = meta()
    keys = list(rows[0])
    lines = ["# Solving SF's outer factors exactly part-way through L-BFGS (" + info["date"] + ")", "",
             f"Machine: {info['machine']}. Command: `{info['command']}`.", "",
             "Cloud RBF kernel (`scale_fit`), identity start, float64; relative errors. \"lbfgs +p%\": the "
             "same fit p % more iterations on.", "",
             "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[k]:,}" if k in ("n", "iterations") else
                                        ("—" if r[k] is None else f"{r[k]:.4f}" if k[0] in "lt" else str(r[k]))
                                        for k in keys) + " |")
    write_results("polish_probe", {"meta": info, "rows": rows}, lines)


if __name__ == "__main__":
    main()
