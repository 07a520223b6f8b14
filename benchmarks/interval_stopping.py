"""Does stopping the column sample at its tolerance cost the 95 % intervals coverage?  Thousands of repeats.

Run by hand (not part of the tests):

    python benchmarks/interval_stopping.py [--sizes 4096,8192] [--repeats 4000] [--tag interval_stopping]

:func:`sfapprox.estimate.estimate_errors` samples columns in random blocks and stops once every
interval's half-width is at most ``rtol`` of its estimate (:func:`sfapprox.estimate._narrow_enough`,
after :data:`~sfapprox.estimate.MIN_SAMPLE` columns and Cochran's ``25 g^2``).  A rule that looks at
the data to stop is optional stopping: samples whose spread came out small stop early, with intervals
too narrow.  ``benchmarks/scale_sources.py --coverage`` measures it on real passes (100–300 repeats:
+-1.3–2.2 %); here the squared column errors of each surrogate are computed once, exactly, and the
pass's own functions (:func:`~sfapprox.estimate._narrow_enough`, :func:`~sfapprox.estimate._estimate`)
are replayed on thousands of random block orders (+-0.35 % at 4,000), for two rules:

* **sequential** (what the pass does): stop at the first block where every interval is narrow enough;
  the intervals from every column seen.
* **two-stage** (Stein's, 1945; the alternative tried): a pilot stopped the same way at twice the
  tolerance, then a fresh sample as large as the pilot's spread asks for the tolerance (at least
  ``MIN_SAMPLE`` and Cochran's size); the pilot's columns counted exactly and the interval from the
  fresh sample alone (a sample whose size the data it is judged by did not choose).

The matrix and surrogates are ``--coverage``'s: the RBF kernel (bandwidth 2) of a seeded 32-cluster
cloud in 16 dimensions, and Nyström, randomized SVD and top-s fitted at SF's budget; blocks of 128
columns and ``rtol`` 0.03, as there.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _common import machine, meta, write_results
from scale_sources import BANDWIDTH, BLOCK, COVERAGE_RTOL, cloud


def column_errors(n: int) -> dict[str, np.ndarray]:
    """``||x_j||^2`` (key ``"x"``) and each surrogate's ``||x_j - a_j||^2``, every column, exactly."""
    import warnings

    from sfapprox._base import RunContext, get_method
    from sfapprox.budget import sf_count
    from sfapprox.estimate import block_errors
    from sfapprox.sources import KernelMatrix, block_columns

    warnings.simplefilter("ignore")
    K = KernelMatrix(cloud(n), bandwidth=BANDWIDTH)
    fits = {m: get_method(m).make(n, sf_count(n), RunContext()).fit(K).operator_ for m in ("nystrom", "rsvd", "sparse")}
    parts = [block_errors(K, fits, J) for J in block_columns(n, 512)]
    return {"x": np.concatenate([p[0] for p in parts]), **{m: np.concatenate([p[1][m] for p in parts]) for m in fits}}


def _stopped(cols: dict, order: np.ndarray, n: int, rtol: float) -> int:
    """Columns the sequential rule reads before it stops (blocks of :data:`BLOCK` in ``order``)."""
    from sfapprox.estimate import MIN_SAMPLE, _narrow_enough

    seen = 0
    while seen < n:
        seen = min(n, seen + BLOCK)
        J = order[:seen]
        if seen >= MIN_SAMPLE and _narrow_enough({m: [e[J]] for m, e in cols.items() if m != "x"}, [cols["x"][J]],
                                                 n, rtol, None):
            break
    return seen


def _stratified(e, x, n: int, known_e: float, known_x: float, known: int):
    """Intervals of ``||X - A||_F`` and the relative error from a simple random sample ``e, x`` of the
    ``n - known`` columns not in the pilot, whose ``known`` columns are counted exactly."""
    from sfapprox.estimate import _skewness, _studentized_quantiles

    rest, m = n - known, e.size
    shrink = math.sqrt(max(0.0, 1 - m / rest)) / math.sqrt(m)
    total = known_e + rest * e.mean()
    se = rest * e.std(ddof=1) * shrink
    lo, hi = _studentized_quantiles(_skewness(e), m)
    fro = (math.sqrt(max(0.0, total - hi * se)), math.sqrt(max(0.0, total - lo * se)))
    norm2 = known_x + rest * x.mean()
    ratio = total / norm2
    d = e - ratio * x
    se_ratio = rest * d.std(ddof=1) * shrink / norm2
    lo, hi = _studentized_quantiles(_skewness(d), m)
    return fro, (math.sqrt(max(0.0, ratio - hi * se_ratio)), math.sqrt(max(0.0, ratio - lo * se_ratio)))


def one_repeat(cols: dict, n: int, seed: int, rule: str, rtol: float) -> tuple[int, dict]:
    """The columns read and each surrogate's two intervals, for one random block order."""
    from sfapprox.estimate import MIN_SAMPLE, _cochran, _estimate, _skewness, scoring_order

    order = scoring_order(n, seed)  # the estimator's own order
    names = [m for m in cols if m != "x"]
    if rule == "sequential":
        seen = _stopped(cols, order, n, rtol)
        J = order[:seen]
        ests = {m: _estimate(cols[m][J], cols["x"][J], n, None) for m in names}
        return seen, {m: (e.fro_interval, e.rel_interval) for m, e in ests.items()}
    pilot = _stopped(cols, order, n, 2 * rtol)
    J1 = order[:pilot]
    widest = max(_estimate(cols[m][J1], cols["x"][J1], n, None).half_width(relative=True)
                 / _estimate(cols[m][J1], cols["x"][J1], n, None).rel_error for m in names)
    fresh = max(math.ceil(pilot * (widest / rtol) ** 2), MIN_SAMPLE, *(_cochran(_skewness(cols[m][J1]), n) for m in names))
    J2 = order[pilot:pilot + BLOCK * math.ceil(fresh / BLOCK)]
    if J2.size == 0:
        return pilot, {m: ((0.0, math.inf), (0.0, math.inf)) for m in names}
    return pilot + J2.size, {m: _stratified(cols[m][J2], cols["x"][J2], n, float(cols[m][J1].sum()),
                                            float(cols["x"][J1].sum()), pilot) for m in names}


def coverage(n: int, repeats: int, rtol: float) -> dict:
    cols = column_errors(n)
    exact = {m: (math.sqrt(cols[m].sum()), math.sqrt(cols[m].sum() / cols["x"].sum())) for m in cols if m != "x"}
    out = {"n": n, "repeats": repeats, "rtol": rtol, "block": BLOCK, "rules": {}}
    for rule in ("sequential", "two-stage"):
        began = time.perf_counter()
        held = {m: [0, 0] for m in exact}
        columns = []
        for seed in range(repeats):
            seen, intervals = one_repeat(cols, n, seed, rule, rtol)
            columns.append(seen)
            for m, (fro, rel) in intervals.items():
                held[m][0] += fro[0] <= exact[m][0] <= fro[1]
                held[m][1] += rel[0] <= exact[m][1] <= rel[1]
        out["rules"][rule] = {"mean_columns": float(np.mean(columns)), "seconds": time.perf_counter() - began,
                              "coverage": {m: [h[0] / repeats, h[1] / repeats] for m, h in held.items()}}
        print(n, rule, out["rules"][rule], flush=True)
    return out


def render(rows: list[dict], args) -> list[str]:
    lines = [f"# Stopping the column sample at its tolerance: coverage of the 95 % intervals ({time.strftime('%Y-%m-%d')})",
             "", f"Machine: {machine()}. Command: `{meta()['command']}`.", "",
             "Each cell: the share of repeats whose interval holds the exact ||X - A||_F / relative error "
             f"(+-{1.96 * math.sqrt(0.05 * 0.95 / args.repeats):.3f} at 95 % for a true 0.95), and the mean columns read.",
             "", "| N | rule | columns | nystrom | rsvd | sparse |", "|---|---|---|---|---|---|"]
    for r in rows:
        for rule, v in r["rules"].items():
            cells = [f"{v['coverage'][m][0]:.4f} / {v['coverage'][m][1]:.4f}" for m in ("nystrom", "rsvd", "sparse")]
            lines.append(f"| {r['n']:,} | {rule} | {v['mean_columns']:.0f} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--repeats", type=int, default=4000)
    ap.add_argument("--rtol", type=float, default=COVERAGE_RTOL)
    ap.add_argument("--tag", default="interval_stopping")
    args = ap.parse_args()
    rows = [coverage(int(n), args.repeats, args.rtol) for n in args.sizes.split(",")]
    write_results(args.tag, {**meta(machine=machine()), "rows": rows}, render(rows, args))


if __name__ == "__main__":
    main()
