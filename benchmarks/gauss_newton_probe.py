"""Would a Gauss-Newton fit reach SF's quality in fewer passes than L-BFGS? (issue 25, goal 1: an idea measured)

Run by hand (not part of the tests):

    python benchmarks/gauss_newton_probe.py --size 512 --matrix cloud --budget 200

SF's objective ``1/2 ||X - W1 ... WM||_F^2`` (Chord supports, the identity start with noise 0.1,
the target scaled to ``||X||_F = sqrt(N)`` as ``ChordSF`` does) minimised two ways in one plain torch
implementation (dense products by gathers; slow, but the same for both):

* L-BFGS: ``torch.optim.LBFGS`` (history 50, strong-Wolfe line search) — what ``ChordSF`` runs;
* Gauss-Newton / Levenberg-Marquardt: each step solves ``(J^T J + lambda I) p = -g`` by up to 20
  conjugate-gradient steps (``J^T J v`` by a forward-mode and a reverse-mode product, ``torch.func``),
  ``lambda`` divided by 3 after a step that lowers the loss and multiplied by 4 otherwise.

Both are counted in evaluation-equivalents: one loss and gradient is 1, one ``J^T J v`` is 1 (it is a
pass forward with tangents and one back: at least the cost of an evaluation, and measured beside it).
The table gives the best relative error within 50, 100, 200, ... of them. Writes
benchmarks/results/gauss_newton_probe.json and .md.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
from _common import meta, write_results
from scale_fit import matrix

NAME = "gauss_newton_probe"
READ_AT = (25, 50, 100, 200, 400)
CG_STEPS = 20


def _problem(n: int, kind: str):
    X = torch.tensor(matrix(kind, n))
    X = X / (float(X.norm()) / math.sqrt(n))
    m = math.ceil(math.log2(n))
    offsets = [0] + [2 ** k for k in range(m) if 2 ** k < n]
    idx = torch.stack([(torch.arange(n) + d) % n for d in offsets], 1)
    eye = torch.eye(n, dtype=torch.float64)

    def product(V):
        P = eye
        for f in reversed(range(V.shape[0])):  # (W P)[i] = sum_k w[i, k] P[i + d_k]
            P = (V[f].unsqueeze(-1) * P[idx]).sum(1)
        return P

    rng = np.random.default_rng([0, 1])  # ChordSF's identity start: offset 0 at 1, the rest noise 0.1
    V0 = torch.tensor(0.1 * rng.uniform(-1.0, 1.0, size=(m, n, len(offsets))))
    V0[:, :, 0] += 1.0
    product.offsets, product.index = offsets, idx  # for probes that need the structure (varpro_probe)
    return X, product, V0


def lbfgs(X, product, V0, budget: int) -> list[tuple[float, float]]:
    norm0 = float((X * X).sum())
    V = V0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([V], lr=1, max_iter=budget, max_eval=budget, history_size=50,
                            line_search_fn="strong_wolfe", tolerance_grad=0, tolerance_change=0)
    curve: list[tuple[float, float]] = []

    def closure():
        opt.zero_grad()
        R = product(V) - X
        f = 0.5 * (R * R).sum()
        f.backward()
        curve.append((len(curve) + 1.0, math.sqrt(2 * float(f.detach()) / norm0)))
        return f

    opt.step(closure)
    return curve


def gauss_newton(X, product, V0, budget: int) -> list[tuple[float, float]]:
    from torch.func import jvp, vjp

    norm0 = float((X * X).sum())

    def loss_grad(V):
        V = V.detach().requires_grad_(True)
        R = product(V) - X
        f = 0.5 * (R * R).sum()
        return float(f.detach()), torch.autograd.grad(f, V)[0]

    V, lam, used = V0.clone(), 1e-2, 1.0
    f, g = loss_grad(V)
    curve = [(used, math.sqrt(2 * f / norm0))]
    while used < budget:
        _, pull = vjp(product, V)
        p, r = torch.zeros_like(V), -g.clone()
        d, rr = r.clone(), float((r * r).sum())
        for _ in range(CG_STEPS):
            Ad = pull(jvp(product, (V,), (d,))[1])[0] + lam * d
            used += 1
            a = rr / float((d * Ad).sum())
            p, r = p + a * d, r - a * Ad
            rr_new = float((r * r).sum())
            if rr_new < 1e-8 * float((g * g).sum()):
                break
            d, rr = r + (rr_new / rr) * d, rr_new
        f_new, g_new = loss_grad(V + p)
        used += 1
        if f_new < f:
            V, f, g, lam = V + p, f_new, g_new, max(lam / 3, 1e-8)
        else:
            lam *= 4
        curve.append((used, math.sqrt(2 * f / norm0)))
    return curve


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--matrix", default="cloud", choices=("cloud", "planted"))
    ap.add_argument("--budget", type=int, default=200, help="evaluation-equivalents per method")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, product, V0 = _problem(args.size, args.matrix)
    rows = {}
    for name, run in (("L-BFGS", lbfgs), ("Gauss-Newton-CG", gauss_newton)):
        started = time.perf_counter()
        curve = run(X, product, V0, args.budget)
        rows[name] = {"seconds": time.perf_counter() - started, "curve": curve,
                      "best_within": {str(b): min((e for u, e in curve if u <= b), default=None) if b <= args.budget
                                      else None for b in READ_AT}}
        print(name, rows[name]["best_within"], flush=True)
    data = {"meta": meta(), "size": args.size, "matrix": args.matrix, "budget": args.budget, "rows": rows}
    lines = [f"# Gauss-Newton against L-BFGS on SF's objective ({data['meta']['date']})", "",
             f"Command: `{data['meta']['command']}`", "", f"Machine: {data['meta']['machine']}.", "",
             f"N = {args.size:,}, matrix {args.matrix}; best relative error within so many evaluation-equivalents:",
             "", "| method | " + " | ".join(str(b) for b in READ_AT) + " | wall s |",
             "|---|" + "---|" * (len(READ_AT) + 1)]
    for name, r in rows.items():
        cells = ["–" if r["best_within"][str(b)] is None else f"{r['best_within'][str(b)]:.4f}" for b in READ_AT]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['seconds']:.0f} |")
    write_results(NAME, data, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
