"""SF's support protocols side by side at an equal budget: chord, symmetric, butterfly (and TSVD).

Run by hand (not part of the tests):

    python benchmarks/supports.py [--time-limit S] [--only strike,sawmill]

Every method gets the budget of the reference Chord structure (``--budget sf``), on the paper's
Table 1 matrices in ../shared/realdata and the 256 x 256 test image (the only power-of-two size,
so the only one where the butterfly applies). Each SF variant takes the largest structure of its
support that fits (``sfapprox.budget.sf_config_for_budget``).

Writes benchmarks/results/supports.json and benchmarks/results/supports.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

from _common import DEFAULT_DATA_DIR as REAL
from _common import machine, meta, write_results
from paper_table1 import CASES  # the same matrices and loaders

METHODS = ("sf", "sf-symmetric", "sf-butterfly", "tsvd")
EXTRA = [("skyscraper_256", "sf_repo_images/skyscraper.png", {})]


def _cell(row: dict | None) -> str:
    if row is None or row["status"] != "ok":
        return "n/a"
    p = row["params"]
    if "n_factors" not in p:
        structure = f"r={p.get('rank')}"
    elif p.get("support") == "butterfly":  # one structure, no base
        structure = f"M={p['n_factors']}"
    else:
        structure = f"M={p['n_factors']} b={p['base']}"
    return f"{row['fro_error']:.4g} ({row['nnz']:,}; {structure})"


def main() -> int:
    import torch

    import sfapprox

    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=30.0, help="seconds per SF fit")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    if not REAL.is_dir():
        print(f"{REAL} not found", file=sys.stderr)
        return 1
    only = {s for s in args.only.split(",") if s}
    settings = sfapprox.FitSettings(device="cpu", time_limit=args.time_limit)
    warnings.simplefilter("ignore")
    rows = []
    for name, rel, load_opts, *_ in [*CASES, *EXTRA]:
        if only and name not in only:
            continue
        loaded = sfapprox.load_matrix(REAL / rel, **load_opts)
        start = time.perf_counter()
        c = sfapprox.compare(loaded, METHODS, budget="sf", settings=settings)
        record = {"matrix": name, "n": loaded.n, "budget": c.budget, "wall_seconds": time.perf_counter() - start,
                  "results": [r.to_dict() for r in c.results]}
        rows.append(record)
        print(json.dumps({"matrix": name, **{r.method: r.fro_error for r in c.results}}), flush=True)
    command = "python benchmarks/supports.py" + (f" --time-limit {args.time_limit:g}" if args.time_limit != 30 else "")
    info = meta(command,
                machine=machine(torch=f"{torch.__version__} ({torch.get_num_threads()} threads)"),
                time_limit=args.time_limit)
    lines = [f"# SF supports at an equal budget ({info['date']})", "",
             f"Machine: {info['machine']}. Command: `{info['command']}` (each SF fit ≤ {args.time_limit:g} s).", "",
             "Budget: the reference Chord structure's N·K·M. Cells: ‖X − X̂‖_F (stored numbers; structure). "
             "n/a: the support does not apply (butterfly: N not a power of two).", "",
             "| matrix | N | budget | " + " | ".join(METHODS) + " | best |",
             "|---|---|---|" + "---|" * (len(METHODS) + 1)]
    for rec in rows:
        by = {r["method"]: r for r in rec["results"]}
        ok = {m: r["fro_error"] for m, r in by.items() if r["status"] == "ok"}
        best = min(ok, key=ok.get) if ok else "–"
        lines.append(f"| {rec['matrix']} | {rec['n']} | {rec['budget']:,} | "
                     + " | ".join(_cell(by.get(m)) for m in METHODS) + f" | {best} |")
    write_results("supports", {"meta": info, "rows": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
