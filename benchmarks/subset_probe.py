"""Would a fit on a subset of the columns, then the last factor solved for all of them, make SF's fit
reach its quality in fewer full passes? (issue 25, goal 1)

Run by hand (not part of the tests):

    python benchmarks/subset_probe.py --sizes 1024,2048 --share 0.125 --subset-evals 400 --passes 250

One step on ``b`` of the ``N`` columns costs ``b / N`` of a full evaluation (the product's columns
``S`` cost ``O(M K N |S|)``).  The subset fit gives the last factor's values only for the columns it
sees, so after it the last factor is solved exactly for every column (column ``j`` of ``A WM`` with
``A = W1 ... W(M-1)`` is ``sum_k A[:, j - d_k] WM[j - d_k, k]``: ``N`` least-squares problems of ``K``
unknowns, counted as 3 evaluations), then L-BFGS goes on over all columns.  The reference is L-BFGS
over all columns from the same start.

Both runs use scipy's L-BFGS-B (history 50) on the compiled kernel
(:func:`sfapprox.sf._kernels.block_loss_and_grad`), from an identity start with noise 0.1, on the
``cloud`` matrix of :mod:`scale_fit` (``X`` scaled to ``||X||_F^2 = N``, as the fit does).  The cost is
counted in full evaluations, not seconds, so a busy machine does not change the table.  Writes
benchmarks/results/subset_probe.json and .md.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
from _common import meta, write_results
from scale_fit import matrix
from scipy.optimize import minimize

from sfapprox.chord import chord_offsets
from sfapprox.sf import _kernels

NAME = "subset_probe"
#: Full-evaluation counts at which the table reads the curves.
READ_AT = (25, 50, 100, 200, 400)
SOLVE_COST = 3.0


class _Problem:
    """The scaled target, the support and a cost counter with the best error so far per evaluation."""

    def __init__(self, n: int, seed: int) -> None:
        X = np.ascontiguousarray(matrix("cloud", n))
        self.X = X / math.sqrt(float((X * X).sum()) / n)
        self.n = n
        self.offsets = np.asarray(chord_offsets(n))
        self.shape = (int(math.ceil(math.log2(n))), n, len(self.offsets))
        self.width = _kernels.numba_width(n, 8)
        rng = np.random.default_rng(seed)
        w = np.zeros(self.shape)
        w[:, :, 0] = 1.0
        self.start = (w + 0.1 * rng.standard_normal(self.shape) / math.sqrt(self.shape[2])).ravel()
        self.rng = rng
        self.cost = 0.0
        self.curve: list[tuple[float, float]] = []

    def loss(self, v: np.ndarray, blocks: list[int] | None = None, width: int = 0) -> tuple[float, np.ndarray]:
        """The loss and gradient on all columns, or on ``blocks`` of ``width`` columns scaled to all."""
        w = v.reshape(self.shape)
        if blocks is None:
            g = np.zeros(self.shape)
            f = _kernels.block_loss_and_grad(w, self.offsets, self.X, 0, [g], self.width)
            self.cost += 1.0
            self.curve.append((self.cost, self.rel(f)))
            return f, g.ravel()
        f, total = 0.0, np.zeros(self.shape)
        for lo in blocks:
            g = np.zeros(self.shape)
            f += _kernels.block_loss_and_grad(w, self.offsets, np.ascontiguousarray(self.X[:, lo:lo + width]),
                                              lo, [g], self.width)
            total += g
        self.cost += len(blocks) * width / self.n
        scale = self.n / (len(blocks) * width)
        return f * scale, total.ravel() * scale

    def rel(self, loss: float) -> float:
        return math.sqrt(2.0 * max(loss, 0.0) / self.n)

    def solve_last(self, v: np.ndarray) -> np.ndarray:
        """The last factor solved by least squares for every column, the others kept."""
        w = v.reshape(self.shape).copy()
        m, n, k = self.shape
        A = _kernels.apply_product(torch.from_numpy(w[:m - 1]), [int(d) for d in self.offsets],
                                   torch.eye(n, dtype=torch.float64)).numpy()
        for j in range(n):
            rows = (j - self.offsets) % n
            w[m - 1, rows, np.arange(k)] = np.linalg.lstsq(A[:, rows], self.X[:, j], rcond=None)[0]
        self.cost += SOLVE_COST
        return w.ravel()


def _lbfgs(fun, v: np.ndarray, evals: int) -> np.ndarray:
    options = dict(maxcor=50, maxfun=max(1, evals), maxiter=10**6, ftol=0.0, gtol=0.0)
    return minimize(fun, v, jac=True, method="L-BFGS-B", options=options).x


def run(n: int, share: float, subset_evals: int, passes: int, seed: int) -> dict:
    rows = {}
    for arm in ("all columns", "subset, solve, all columns"):
        p = _Problem(n, seed)
        v = p.start
        after = {}
        if arm != "all columns":
            width = max(8, int(n * share) // 8)
            count = max(1, int(round(n * share / width)))
            blocks = sorted(p.rng.choice(np.arange(0, n - width + 1, width), size=count, replace=False).tolist())
            v = _lbfgs(lambda x: p.loss(x, blocks, width), v, subset_evals)
            after["after the subset"] = (p.cost, p.loss(v)[0])
            p.cost -= 1.0  # (that look is not part of the method)
            v = p.solve_last(v)
            f = p.loss(v)[0]
            after["after the solve"] = (p.cost, f)
        _lbfgs(p.loss, v, int(passes - p.cost))
        best, curve = math.inf, []
        for cost, err in p.curve:
            best = min(best, err)
            curve.append((cost, best))
        rows[arm] = {"read": {str(c): next((e for x, e in reversed(curve) if x <= c), None) for c in READ_AT},
                     "stages": {k: {"cost": c, "rel": p.rel(f)} for k, (c, f) in after.items()}}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--share", type=float, default=0.125, help="share of the columns in the subset")
    ap.add_argument("--subset-evals", type=int, default=400, help="L-BFGS evaluations on the subset")
    ap.add_argument("--passes", type=int, default=250, help="full evaluations in all")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = {"meta": meta(), "runs": {}}
    lines = [f"# Subset fit, last factor solved, then all columns ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}. Command: `{data['meta']['command']}`.", "",
             "Best relative error of the iterate within so many full evaluations (a subset step counts its "
             "share of the columns; the solve counts 3).", "",
             "| N | run | " + " | ".join(f"≤ {c} evaluations" for c in READ_AT) + " | stages |",
             "|---|---|" + "---|" * (len(READ_AT) + 1)]
    for n in [int(s) for s in args.sizes.split(",")]:
        rows = run(n, args.share, args.subset_evals, args.passes, args.seed)
        data["runs"][str(n)] = rows
        for arm, row in rows.items():
            cells = [("—" if v is None else f"{v:.4f}") for v in row["read"].values()]
            stages = "; ".join(f"{k}: {s['rel']:.4f} at {s['cost']:.1f}" for k, s in row["stages"].items())
            lines.append(f"| {n:,} | {arm} | " + " | ".join(cells) + f" | {stages} |")
    write_results(NAME, data, lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
