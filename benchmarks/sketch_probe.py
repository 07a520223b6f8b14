"""Does a fit to a Gaussian sketch of X's columns make a cheap start for SF's L-BFGS? (issue 25, goals 1 and 2)

Run by hand (not part of the tests):

    python benchmarks/sketch_probe.py --runs 2048:512:100,2048:1024:60,4096:1024:120 --evaluations 200

The loss ``0.5 ||(X - P) S||_F^2`` with ``S`` an ``N x b`` Gaussian matrix (entries of variance
``1/b``, so that its expectation is the whole loss) needs only ``Y = X S``, made in one pass over X's
columns, and ``P S = W_1 (... (W_M S))``, ``O(M K N b)``: an evaluation costs ``b / N`` of one on the
whole matrix.  Every column of every factor gets a gradient (a random subset of the columns leaves the
last factor's other columns unfitted, ``scale_fit.md``), so a sketched fit might reach in a few whole
evaluations' worth of work what L-BFGS on all of X reaches in many; and at N = 65,536, where a pass
over the columns takes minutes (``column_fit.md``), its evaluations would cost seconds.  The catch is
overfitting: ``N b`` equations for ``N K M`` values.

Each run ``N:b:E``: L-BFGS (the project's, ``first_step="polyak"``, float32, the identity start of
``init="identity"``) on the sketch for E evaluations, then on the whole matrix (the compiled kernel)
until the work of ``--evaluations`` whole evaluations is spent (a sketched evaluation counted as
``b / N``); and the same fit on the whole matrix from the same start.  Counted in evaluations, so the
figures do not depend on the machine's load.  The matrix is ``scale_fit``'s clustered RBF kernel.
Writes benchmarks/results/sketch_probe.json and .md.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
from _common import meta, write_results
from scale_fit import matrix

from sfapprox.chord import support_offsets
from sfapprox.sf import _kernels
from sfapprox.sf._kernels import CompiledObjective, apply_factor, apply_factor_t, factor_grad
from sfapprox.sf._multistart import start_values
from sfapprox.sf._solver import LBFGSOptions, lbfgs, new_state

#: Whole evaluations' work at which the table reads both fits.
MARKS = (30, 50, 100, 150, 200)


class SketchObjective:
    """``x -> (0.5 ||Y - P(x) S||^2, gradient)`` with ``Y = X S``: the chain of :func:`_kernels.loss_and_grad`
    with the block ``S`` where that one has the identity."""

    def __init__(self, target: torch.Tensor, shape: tuple[int, int, int], offsets: tuple[int, ...], b: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.S = torch.randn((shape[1], b), generator=g, dtype=target.dtype) / math.sqrt(b)
        self.Y = target @ self.S
        self.shape, self.offsets = shape, offsets

    def __call__(self, x: torch.Tensor) -> tuple[float, torch.Tensor]:
        M = self.shape[0]
        ws = x.view(self.shape)
        partial = [None] * M + [self.S]  # partial[m] = W_m ... W_M S
        for m in range(M - 1, -1, -1):
            partial[m] = apply_factor(ws[m], self.offsets, partial[m + 1])
        G = partial[0] - self.Y
        loss = 0.5 * float(torch.sum(G.double() ** 2))
        grad = torch.empty(self.shape, dtype=x.dtype)
        for m in range(M):
            grad[m] = factor_grad(G, partial[m + 1], self.offsets)
            if m < M - 1:
                G = apply_factor_t(ws[m], self.offsets, G)
        return loss, grad.view(-1)


def _lbfgs(objective, x0: torch.Tensor, evaluations: int) -> tuple[torch.Tensor, list[tuple[int, float]]]:
    """L-BFGS from ``x0`` for ``evaluations`` evaluations: its best point and (evaluations, best loss) after each iteration."""
    state = new_state(x0.clone())
    curve: list[tuple[int, float]] = []
    options = LBFGSOptions(max_iter=10**6, max_evals=evaluations, ftol=0.0, gtol=0.0, first_step="polyak")
    lbfgs(objective, state, options, callback=lambda s: curve.append((int(s["func_evals"]), float(s["best_loss"]))))
    return state["best_x"], curve


def _at(curve: list[tuple[float, float]], work: float) -> float | None:
    """The best loss of ``curve`` (work, loss) within ``work``."""
    losses = [loss for spent, loss in curve if spent <= work]
    return min(losses) if losses else None


def one(n: int, b: int, sketch_evals: int, evaluations: int, seed: int = 1) -> dict:
    """One row: the sketched start then the whole matrix, and the whole matrix alone, from the same start."""
    X = np.asarray(matrix("cloud", n), dtype=np.float64)
    offsets = tuple(int(d) for d in support_offsets(n))
    shape = (math.ceil(math.log2(n)), n, len(offsets))
    target = _kernels.scaled_target(X, float(np.linalg.norm(X)) / math.sqrt(n), torch.float32)
    norm2 = float(torch.sum(target.double() ** 2))

    def rel(loss: float | None) -> float | None:
        return None if loss is None else round(math.sqrt(2.0 * max(loss, 0.0) / norm2), 4)

    whole = CompiledObjective(shape, offsets, target)
    x0 = torch.from_numpy(start_values(["identity"], 0, shape)["identity"].astype(np.float32).reshape(-1))
    _, alone = _lbfgs(whole, x0, evaluations)
    sketched, sketch_curve = _lbfgs(SketchObjective(target, shape, offsets, b, seed), x0, sketch_evals)
    spent = sketch_evals * b / n
    after = rel(whole(sketched)[0])
    _, rest = _lbfgs(whole, sketched, max(1, int(evaluations - spent)))
    rest = [(spent + e, loss) for e, loss in rest]
    return {"n": n, "b": b, "values_per_equation": round(shape[0] * shape[2] / b, 3),
            "sketch_evaluations": sketch_evals, "sketch_work": round(spent, 1),
            "sketch_rel": rel(sketch_curve[-1][1]) if sketch_curve else None,
            "after_sketch_rel": after, "whole_at_sketch_work": rel(_at(alone, spent)),
            "marks": {str(w): {"whole": rel(_at(alone, w)), "sketch_then_whole": rel(_at(rest, w))} for w in MARKS
                      if w <= evaluations}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="2048:512:100,2048:1024:60,4096:1024:120", help="N:b:sketch-evaluations, ...")
    parser.add_argument("--evaluations", type=int, default=200, help="whole evaluations' work per fit")
    args = parser.parse_args()
    rows = []
    for run in args.runs.split(","):
        n, b, e = (int(v) for v in run.split(":"))
        rows.append(one(n, b, e, args.evaluations))
        print(rows[-1], flush=True)
    data = {"meta": meta(), "rows": rows}
    lines = [f"# A fit to a Gaussian sketch of the columns as SF's start ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}. "
             f"Command: `{data['meta']['command']}`.", "",
             "Relative errors on the whole matrix (`scale_fit`'s clustered RBF kernel); work in whole evaluations "
             "(a sketched one counts b / N).", "",
             "| N | b | values per equation (K M / b) | sketch evaluations (work) | sketch's own error | whole error after "
             "the sketch | L-BFGS on X at that work | " + " | ".join(f"at {w}: on X / sketch, then X" for w in MARKS) + " |",
             "|" + "---|" * (7 + len(MARKS))]
    for r in rows:
        cells = [" / ".join("–" if v is None else str(v) for v in r["marks"][str(w)].values()) if str(w) in r["marks"]
                 else "" for w in MARKS]  # (–: that work is still the sketch's)
        lines.append(f"| {r['n']:,} | {r['b']:,} | {r['values_per_equation']} | {r['sketch_evaluations']} "
                     f"({r['sketch_work']}) | {r['sketch_rel']} | {r['after_sketch_rel']} | {r['whole_at_sketch_work']} | "
                     + " | ".join(cells) + " |")
    write_results("sketch_probe", data, lines)


if __name__ == "__main__":
    main()
