"""The rank-one start's ``X^T u`` from columns: by a pass over the columns, or by the source's own product.

Run by hand (not part of the tests); about a minute on 2 cores with the defaults:

    python benchmarks/rank_one_product.py [--n 4096] [--samples 500] [--rounds 3] [--name rank_one_product]

SF's rank-one start from column blocks needs ``v = X^T u`` (``u`` the pilot columns' top left vector).
Before 4acd50a every source but a sparse one made it by a pass over its columns
(``sfapprox.sf.model._transposed_product``, ``chunk`` 256 at a time in pieces of 32, as the fit reads
them); a source with a product of its own (``products_by_columns`` False) now gives it by that product
(``_rank_one_product``).  Both are timed in this one process, alternating, on the same ``u``, for:
the sample covariance of a seeded ``--samples x --n`` Gaussian table (``CovarianceMatrix``: a column
costs ``O(m N)``, the product ``O(m N)`` in all), that covariance formed as a float64 array in memory
(``ArraySource``) and as a LinearOperator over it (``OperatorSource(aslinearoperator(C))``).  Each
time is the least of ``--rounds``; the vectors are checked equal (``allclose``).  The machine is shared:
its 1-minute load average is recorded.  Writes benchmarks/results/NAME.json and NAME.md.
"""

from __future__ import annotations

import argparse
import math
import time

from _common import findings_lines, meta, write_results


def measure(n: int, samples: int, rounds: int) -> list[dict]:
    """One row per source: the pass's and the own product's least seconds over ``rounds``, alternating."""
    import numpy as np
    from scipy.sparse.linalg import aslinearoperator

    from sfapprox import _timing
    from sfapprox.sf import model
    from sfapprox.sources import ArraySource, CovarianceMatrix, OperatorSource

    rng = np.random.default_rng(0)
    table = rng.standard_normal((samples, n))
    formed = np.cov(table, rowvar=False)
    u = rng.standard_normal(n)
    u /= np.linalg.norm(u)
    pilot = model._Pilot(fro=1.0, trace=0.0, top=1.0, left=u, seconds=0.0, columns=n)
    sources = {"covariance (never formed)": CovarianceMatrix(table), "array in memory": ArraySource(formed),
               "LinearOperator": OperatorSource(aslinearoperator(formed))}
    rows = []
    for name, source in sources.items():
        passes, owns, same = [], [], True
        for _ in range(rounds):
            began = time.perf_counter()
            by_pass = model._transposed_product(source, u, 256, 32, _timing.Deadline.after(None))[0]
            passes.append(time.perf_counter() - began)
            began = time.perf_counter()
            own, why = model._rank_one_product(source, pilot, 256, 32, math.inf, 0.5)
            owns.append(time.perf_counter() - began)
            same = same and why is None and bool(np.allclose(own, by_pass, rtol=1e-9, atol=1e-12))
        rows.append({"source": name, "n": n, "pass_s": min(passes), "own_s": min(owns),
                     "ratio": min(passes) / max(min(owns), 1e-9), "same": same})
        print(f"{name}: pass {min(passes):.3f} s, own product {min(owns):.4f} s, same {same}", flush=True)
    return rows


def render(data: dict) -> list[str]:
    lines = ["# The rank-one start's X^T u: a pass over the columns against the source's own product", "",
             f"Machine: {data['machine']}; load average at start {data['load_average_at_start']}", "",
             f"Command: `{data['command']}`", "",
             f"N = {data['n']:,}, covariance of {data['samples']:,} samples; least of {data['rounds']} rounds, "
             "alternating, in one process", "",
             "| source | pass (s) | own product (s) | pass / own | same vector |", "|---|---|---|---|---|"]
    lines += [f"| {r['source']} | {r['pass_s']:.3f} | {r['own_s']:.4f} | {r['ratio']:.0f} | {r['same']} |"
              for r in data["rows"]]
    return lines + [""] + findings_lines(data, "(to be written)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--name", default="rank_one_product")
    args = ap.parse_args()
    data = meta(n=args.n, samples=args.samples, rounds=args.rounds)
    data["rows"] = measure(args.n, args.samples, args.rounds)
    write_results(args.name, data, render(data))


if __name__ == "__main__":
    main()
