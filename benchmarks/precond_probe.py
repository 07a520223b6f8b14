"""Would a diagonal (Gauss-Newton) preconditioner make SF's L-BFGS reach its quality in fewer evaluations? (issue 25, goal 1)

Run by hand (not part of the tests):

    python benchmarks/precond_probe.py --size 1024 --evals 800 --every 100

The Gauss-Newton matrix of ``1/2 ||X - W1 ... WM||_F^2`` has, for the value of factor ``m`` at row ``i``
and offset ``d``, the diagonal ``||A_m[:, i]||^2 ||B_m[i + d, :]||^2`` with ``A_m = W1 ... W(m-1)`` and
``B_m = W(m+1) ... WM``: how strongly that one value moves the product.  L-BFGS starts each
direction from a scalar multiple of the identity; here it runs on ``z = D^(1/2) x`` instead (``D`` that
diagonal, recomputed every ``--every`` evaluations, the memory starting afresh each time), which scales
each value by its own curvature.  Both arms run ``scipy.optimize.minimize(method="L-BFGS-B")`` (history
50, no bounds) on the compiled kernel's loss and gradient, from ``ChordSF``'s identity start, on the
RBF kernel of ``scale_fit``'s clustered point cloud (scaled as ``ChordSF`` scales it).  The diagonal
comes from dense products (fine at N <= 2,048, which is what this probes).  Counted in evaluations,
so the figures do not depend on the machine's load.  Writes benchmarks/results/precond_probe.json and .md.
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.optimize
import torch
from _common import meta, write_results
from scale_fit import matrix

from sfapprox.chord import chord_offsets
from sfapprox.sf import _kernels
from sfapprox.sf._multistart import start_values

READ_AT = (25, 50, 100, 200, 400, 800, 1600)


def _dense_factor(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    n = values.shape[0]
    W, rows = np.zeros((n, n)), np.arange(n)
    for k, d in enumerate(offsets):
        W[rows, (rows + d) % n] += values[:, k]
    return W


def gauss_newton_diagonal(x: np.ndarray, shape: tuple[int, int, int], offsets: np.ndarray) -> np.ndarray:
    """``||A_m[:, i]||^2 ||B_m[i + d_k, :]||^2`` for every value, flat (dense products: a probe's)."""
    m_count, n, _ = shape
    factors = [_dense_factor(v, offsets) for v in x.reshape(shape)]
    cols, A = [], np.eye(n)
    for W in factors:
        cols.append((A ** 2).sum(0))
        A = A @ W
    rows, B = [None] * m_count, np.eye(n)
    for m in range(m_count - 1, -1, -1):
        rows[m] = (B ** 2).sum(1)
        B = factors[m] @ B
    at = np.arange(n)
    return np.stack([np.stack([cols[m] * rows[m][(at + d) % n] for d in offsets], 1) for m in range(m_count)]).ravel()


def run(n: int, evals: int, every: int, precondition: bool) -> list[float]:
    """Best relative error after each evaluation of one arm."""
    X = matrix("cloud", n).astype(np.float64)
    X = X / (np.linalg.norm(X) / np.sqrt(n))  # ChordSF's scaling: ||X||_F = sqrt(N)
    offsets = np.asarray(chord_offsets(n))
    shape = (int(np.ceil(np.log2(n))), n, len(offsets))
    target, norm2, offs = torch.tensor(X), float((X ** 2).sum()), tuple(int(d) for d in offsets)
    errors: list[float] = []

    def loss_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = _kernels.loss_and_grad_numba(torch.from_numpy(x.reshape(shape)), offs, target)
        errors.append(float(np.sqrt(2 * float(loss) / norm2)))
        return float(loss), grad.numpy().ravel().astype(np.float64)

    x = start_values(["identity"], 0, shape)["identity"].ravel()
    while len(errors) < evals:
        scale = np.ones_like(x)
        if precondition:
            D = gauss_newton_diagonal(x, shape, offsets)
            scale = 1.0 / np.sqrt(np.maximum(D, 1e-8 * D.mean()))
        chunk = min(every if precondition else evals, evals - len(errors))

        def scaled(z, scale=scale):
            loss, grad = loss_grad(scale * z)
            return loss, grad * scale

        before = len(errors)
        out = scipy.optimize.minimize(scaled, x / scale, jac=True, method="L-BFGS-B",
                                      options=dict(maxcor=50, maxfun=chunk, maxiter=10**6, ftol=0, gtol=0))
        x = scale * out.x
        if len(errors) == before:
            break
    return list(np.minimum.accumulate(errors))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--evals", type=int, default=800)
    parser.add_argument("--every", type=int, default=100, help="evaluations between recomputed diagonals")
    args = parser.parse_args()
    plain = run(args.size, args.evals, args.every, False)
    scaled = run(args.size, args.evals, args.every, True)
    rows = [{"evaluations": e, "plain": plain[e - 1], "gauss_newton_diagonal": scaled[e - 1]}
            for e in READ_AT if e <= min(len(plain), len(scaled))]
    data = {"meta": meta(), "size": args.size, "every": args.every, "rows": rows}
    lines = [f"# A diagonal Gauss-Newton preconditioner for SF's L-BFGS ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}. Command: `{data['meta']['command']}`.", "",
             f"Cloud RBF kernel, N = {args.size:,}; best relative error within so many evaluations.", "",
             "| evaluations | plain L-BFGS | L-BFGS on D^(1/2) x |", "|---|---|---|"]
    lines += [f"| {r['evaluations']} | {r['plain']:.4f} | {r['gauss_newton_diagonal']:.4f} |" for r in rows]
    print("\n".join(lines))
    write_results("precond_probe", data, lines)


if __name__ == "__main__":
    main()
