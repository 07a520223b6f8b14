"""Would eliminating one factor exactly (variable projection) make SF's fit reach its quality sooner? (issue 25, goal 1)

Run by hand (not part of the tests):

    python benchmarks/varpro_probe.py --size 1024 --matrix cloud --seconds 90

SF's objective ``1/2 ||X - W1 ... WM||_F^2`` is linear in each factor, and in the last one it splits by
columns: with ``A = W1 ... W(M-1)`` fixed, column ``j`` of ``A WM`` is ``sum_k A[:, j - d_k] WM[j - d_k, k]``,
so the best ``WM`` is ``N`` least-squares problems of ``K`` unknowns (Gram matrices from ``K^2`` column
products of ``A``: about a fifth of an evaluation's work).  Variable projection (Golub & Pereyra 1973;
for matrix factorisation, Hong & Fitzgibbon 2015) minimises the reduced objective ``f(W1..W(M-1))`` with
``WM`` solved at every point; its gradient is the partial gradient at the solved ``WM`` (the envelope
theorem), so one reduced evaluation is one forward and backward pass over ``M - 1`` factors plus the solve.

Both fits run ``torch.optim.LBFGS`` (history 50, strong-Wolfe line search) from ``ChordSF``'s identity
start, in one plain torch implementation (:mod:`gauss_newton_probe`'s; dense products by gathers), on one
machine in one run: the table gives the best relative error within so many evaluations and seconds. Writes
benchmarks/results/varpro_probe.json and .md (one run per matrix and size, merged across runs).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
from _common import OUT, meta, write_results
from gauss_newton_probe import _problem

NAME = "varpro_probe"
#: Shares of --seconds at which the table reads the curves.
READ_AT = (0.05, 0.1, 0.2, 0.4, 0.7, 1.0)
#: The solves' ridge, relative to each Gram matrix's mean diagonal (a column with no reach stays finite).
RIDGE = 1e-10


def _minimise(loss_grad, x0: torch.Tensor, seconds: float) -> list[tuple[float, float, int]]:
    """L-BFGS on ``loss_grad`` from ``x0`` until ``seconds``: ``(seconds, best loss, evaluations)`` per evaluation."""
    x = x0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([x], lr=1, max_iter=10**6, max_eval=10**6, history_size=50,
                            line_search_fn="strong_wolfe", tolerance_grad=0, tolerance_change=0)
    started, best, curve = time.perf_counter(), math.inf, []

    class OutOfTime(Exception):
        pass

    def closure():
        nonlocal best
        opt.zero_grad()
        f = loss_grad(x)
        f.backward()
        best = min(best, float(f.detach()))
        curve.append((time.perf_counter() - started, best, len(curve) + 1))
        if curve[-1][0] > seconds:
            raise OutOfTime
        return f

    try:
        opt.step(closure)
    except OutOfTime:
        pass
    return curve


def solve_last(A: torch.Tensor, X: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The last factor's values that minimise ``||X - A W||_F`` (``(N, K)``, row ``i`` at columns
    ``index[i]``), column by column of ``X``."""
    n, k = index.shape
    back = (torch.arange(n)[:, None] - (index - torch.arange(n)[:, None])) % n  # back[j, k] = j - d_k
    F = A[:, back]  # F[r, j, k] = A[r, j - d_k]
    gram = torch.einsum("rjk,rjl->jkl", F, F)
    rhs = torch.einsum("rjk,rj->jk", F, X)
    ridge = RIDGE * gram.diagonal(dim1=1, dim2=2).mean(1).clamp_min(1e-300)[:, None, None]
    u = torch.linalg.solve(gram + ridge * torch.eye(k, dtype=A.dtype), rhs)  # u[j, k] = W[j - d_k, k]
    return torch.gather(u, 0, index)  # W[i, k] = u[i + d_k, k]


def render(run: dict) -> list[str]:
    """One run's table: the best relative error (evaluations) by each moment."""
    shares, seconds = READ_AT, run["seconds"]
    lines = [f"## N = {run['size']:,}, matrix {run['matrix']} ({run['meta']['date']})", "",
             f"Command: `{run['meta']['command']}`", "", f"Machine: {run['meta']['machine']}.", "",
             "| method | " + " | ".join(f"{share * seconds:g} s" for share in shares) + " | s per evaluation |",
             "|---|" + "---|" * (len(shares) + 1)]
    for name, r in run["rows"].items():
        cells = ["–" if r["read"][str(s)] is None else f"{r['read'][str(s)]['rel']:.4f} ({r['read'][str(s)]['evaluations']})"
                 for s in shares]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['seconds_per_evaluation']:.3f} |")
    return lines + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--matrix", default="cloud", choices=("cloud", "planted"))
    ap.add_argument("--seconds", type=float, default=90.0, help="wall seconds per fit")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, product, V0 = _problem(args.size, args.matrix)
    norm0 = float((X * X).sum())

    def plain(V):
        R = product(V) - X
        return 0.5 * (R * R).sum()

    def reduced(V):
        with torch.no_grad():
            last = solve_last(product(V), X, product.index)
        R = product(torch.cat([V, last[None]])) - X  # the last factor held at its solved values
        return 0.5 * (R * R).sum()

    rows = {}
    for name, fun, x0 in (("L-BFGS", plain, V0), ("L-BFGS, last factor solved (VarPro)", reduced, V0[:-1])):
        curve = _minimise(fun, x0, args.seconds)
        read = {}
        for share in READ_AT:
            seen = [(b, e) for t, b, e in curve if t <= share * args.seconds]
            read[str(share)] = None if not seen else {"rel": math.sqrt(2 * seen[-1][0] / norm0), "evaluations": seen[-1][1]}
        rows[name] = {"curve": [(round(t, 3), math.sqrt(2 * b / norm0), e) for t, b, e in curve], "read": read,
                      "seconds_per_evaluation": curve[-1][0] / len(curve)}
        print(name, {k: v and round(v["rel"], 4) for k, v in read.items()}, flush=True)
    path = OUT / f"{NAME}.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else {}
    runs[f"{args.matrix}-{args.size}"] = {"meta": meta(), "size": args.size, "matrix": args.matrix,
                                          "seconds": args.seconds, "rows": rows}  # one run per matrix and size
    data = {"runs": dict(sorted(runs.items(), key=lambda kv: (kv[1]["matrix"], kv[1]["size"])))}
    lines = ["# Variable projection against plain L-BFGS on SF's objective", ""]
    for run in data["runs"].values():
        lines += render(run)
    write_results(NAME, data, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
