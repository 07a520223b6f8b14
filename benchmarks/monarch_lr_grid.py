"""monarch+lr's grid without a time limit: seconds and the error of the point kept, against another checkout.

Run by hand (not part of the tests; ``tests/test_monarch_lr.py`` checks that a point behind the best stops
alternating and that the kept fit is the same); about 4 minutes with a "before" that runs every point to its
1,000 alternations:

    python benchmarks/monarch_lr_grid.py [--before CHECKOUT] [--data-dir ../shared/realdata]

Each case is ``MonarchLowRank(budget=B, time_limit=None).fit(X)`` in a fresh process (its own imports and
peak RSS), this checkout and ``--before`` alternated case by case so both share the machine's moments.
The cases: real matrices of ``--data-dir`` where present (mesh2e1, AuralSonar, strike), and seeded
synthetic ones (an RBF kernel of 200 points in 3-D, Gaussian noise of order 144, a rank-3 matrix plus 10 %
noise, a planted low rank + sparse matrix of order 300), at SF's budget and at 0.3 of N^2.
Writes benchmarks/results/monarch_lr_grid.json and .md.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from _common import ROOT, checkout_env, meta, run_child, write_results

SYNTHETIC = ("rbf200", "noise144", "lowrank144", "planted300")
REAL = {"mesh2e1": ("suitesparse/mesh2e1.mtx", {"format": "ijv"}),
        "aural_sonar": ("chen2009_similarity/aural_sonar.mat", {}),
        "strike": ("pajek/strike.paj", {})}


def _synthetic(name: str) -> np.ndarray:
    rng = np.random.default_rng(1)
    if name == "rbf200":
        points = rng.normal(size=(200, 3))
        return np.exp(-((points[:, None] - points[None]) ** 2).sum(-1) / 2)
    if name == "noise144":
        return rng.normal(size=(144, 144))
    if name == "lowrank144":
        U = rng.normal(size=(144, 3))
        return U @ U.T + 0.1 * rng.normal(size=(144, 144))
    rng = np.random.default_rng(0)  # planted300: time_limits.py's matrix without the real data
    X = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 300))
    X[rng.random((300, 300)) < 0.01] += 5.0
    return np.abs(X)


def fit_case(case: str, data_dir: str, budget: str) -> dict:
    """One fit in this (child) process: seconds, the kept point, the grid's alternations, peak RSS."""
    import warnings

    import sfapprox
    from sfapprox.baselines.monarch_lr import MonarchLowRank
    from sfapprox.budget import resolve_budget

    if case in REAL:
        path, options = REAL[case]
        X = sfapprox.load_matrix(Path(data_dir) / path, **options).matrix
    else:
        X = _synthetic(case)
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    n = X.shape[0]
    count = resolve_budget(budget, n).value
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = MonarchLowRank(budget=count, time_limit=None).fit(X)
    seconds = time.perf_counter() - start
    alternating = [g["iterations"] for g in fit.params_["grid"] if g["blocks"] is not None and g["rank"] > 0]
    return {"n": n, "budget": count, "seconds": seconds,
            "rel_error": float(np.linalg.norm(X - fit.to_dense()) / np.linalg.norm(X)),
            "kept": {k: fit.params_[k] for k in ("left_block", "right_block", "monarch_rank", "rank")},
            "alternations": alternating, "stored": int(fit.n_stored_),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=None, help="another checkout to run alternately (a 'before')")
    ap.add_argument("--data-dir", default=str(ROOT / ".." / "shared" / "realdata"))
    ap.add_argument("--budgets", default="sf,0.3")
    args = ap.parse_args()
    cases = [c for c, (path, _) in REAL.items() if (Path(args.data_dir) / path).is_file()] + list(SYNTHETIC)
    checkouts = {"now": None, **({"before": args.before} if args.before else {})}
    rows = []
    for budget in args.budgets.split(","):
        for case in cases:
            row = {"case": case, "budget_spec": budget}
            for label, checkout in checkouts.items():
                row[label] = run_child("monarch_lr_grid", "fit_case", [case, args.data_dir, budget],
                                       env=checkout_env(checkout))
            rows.append(row)
            print(row["case"], budget, {k: round(row[k]["seconds"], 2) for k in checkouts}, flush=True)
    data = {**meta(before=args.before), "rows": rows}
    lines = ["# monarch+lr's grid without a time limit", "", f"Command: `{data['command']}`", "",
             f"Machine: {data['machine']}; load average at start {data['load_average_at_start']}.", "",
             "| matrix | N | budget | seconds now | seconds before | rel. error now | rel. error before | "
             "kept (blocks, Monarch rank, rank) | alternations of the mixed points now / before | peak RSS now |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        now, before = r["now"], r.get("before")
        kept = now["kept"]
        lines.append(
            f"| {r['case']} | {now['n']:,} | {now['budget']:,} | {now['seconds']:.2f} | "
            f"{before['seconds']:.2f} | " if before else f"| {r['case']} | {now['n']:,} | {now['budget']:,} | "
            f"{now['seconds']:.2f} | – | ")
        lines[-1] += (f"{now['rel_error']:.6g} | {before['rel_error']:.6g} | " if before else
                      f"{now['rel_error']:.6g} | – | ")
        lines[-1] += (f"{kept['left_block']}, {kept['right_block']}, {kept['monarch_rank']}, {kept['rank']} | "
                      f"{now['alternations']} / {before['alternations'] if before else '–'} | "
                      f"{now['peak_rss_mib']:.0f} MiB |")
    lines += ["", "## Findings (written by hand after the run)", "", "(none yet)", ""]
    write_results("monarch_lr_grid", data, lines)


if __name__ == "__main__":
    main()
