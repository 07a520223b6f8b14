"""SF, TSVD, RPCA, NMF and the hybrids sf+lr / sf+s at equal budgets, on real and planted matrices.

Run by hand (not part of the tests); about 10-15 minutes on 2 cores:

    python benchmarks/hybrid_table.py [--jobs 2] [--only strike,planted_lr] [--budgets sf,0.1,0.25]

Every (matrix, budget) cell is one ``sfapprox.compare`` call with the methods that
``available_methods()`` lists among sf, tsvd, rpca, nmf, sf+lr, sf+s, all sharing one
``FitSettings``: CPU, one torch thread per worker (many tiny kernels; a descheduled second
thread makes them far slower on a shared machine), ``count_indices=True`` (a sparse entry
costs its value and its position, for RPCA and sf+s alike), and an SF iteration cap that
shrinks with N so that the run fits in its time (no time limit, so every fit is deterministic
and the plain-SF end of each hybrid is exactly the ``sf`` row).  The planted matrices are
also run at the budget of their planted structure ("match"), once more with 4000 iterations
(``RECOVERY_ITERS``) to show how close to zero the hybrids get there.

Writes benchmarks/results/hybrid.json (every comparison's JSON, with each hybrid's grid)
and benchmarks/results/hybrid.md (errors, seconds, wins per category, the guarantee check).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np

from _common import DEFAULT_DATA_DIR as REAL
from _common import OUT, machine, meta, run_parallel, version, write_results

METHODS = ["sf", "tsvd", "rpca", "nmf", "sf+lr", "sf+s"]
TOLERANCE = 1e-3  # the guarantee: sf+lr <= min(SF, TSVD) * (1 + TOLERANCE)
RECOVERY_ITERS = 4000  # planted matrices at their own budget, fitted longer

# name, file, category
REAL_CASES = [
    ("strike", "pajek/strike.paj", "graph"),
    ("sawmill", "pajek/Sawmill.net", "graph"),
    ("mexican_power", "pajek/mexican_power.paj", "graph"),
    ("world_trade", "pajek/world_trade.paj", "graph"),
    ("a99m", "pajek/A99m.paj", "graph"),
    ("scotland", "pajek/Scotland.paj", "graph"),
    ("webkb_cornell", "linqs_webkb/cornell.cites", "graph"),
    ("mesh1e1", "suitesparse/mesh1e1_structural_48_48_177.mtx", "mesh"),
    ("mesh2e1", "suitesparse/mesh2e1.mtx", "mesh"),
    ("aural_sonar", "chen2009_similarity/aural_sonar.mat", "dense"),
    ("skyscraper", "sf_repo_images/skyscraper.png", "dense"),
]
#: Loader options by file: the local mesh2e1 copy is header-less 'i j value' lines.
LOAD_OPTIONS = {"suitesparse/mesh2e1.mtx": {"format": "ijv"}}
# name, generator parameters (n, n_factors, rank or spikes)
PLANTED_CASES = [
    ("planted_lr", {"n": 48, "n_factors": 4, "rank": 3}),
    ("planted_lr_full", {"n": 64, "n_factors": 6, "rank": 2}),
    ("planted_s", {"n": 48, "n_factors": 4, "spikes": 48}),
]


def max_iter_for(n: int) -> int:
    """SF iteration cap: modest, and smaller for large N so that the whole run stays ~15 minutes."""
    return 1000 if n <= 128 else 300 if n <= 200 else 150


def planted(n: int, n_factors: int, rank: int = 0, spikes: int = 0, seed: int = 0) -> tuple[np.ndarray, int]:
    """A product of near-identity Chord factors plus a rank-``r`` part (same norm) or ``spikes`` large entries.

    Returns the matrix and the stored-number count of the planted structure (``count_indices=True``).
    """
    import torch

    from sfapprox.budget import sf_lr_count, sf_s_count
    from sfapprox.chord import chord_offsets
    from sfapprox.sf._kernels import chord_product

    rng = np.random.default_rng(seed)
    offs = chord_offsets(n)
    w = 0.5 * rng.standard_normal((n_factors, n, len(offs))) / math.sqrt(len(offs))
    w[:, :, 0] += 1.0
    X = chord_product(torch.from_numpy(w), offs.tolist()).numpy()
    if rank:
        L = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, n))
        return X + L * np.linalg.norm(X) / np.linalg.norm(L), sf_lr_count(n, n_factors, len(offs), rank)
    flat = rng.choice(n * n, spikes, replace=False)
    X.ravel()[flat] += 5.0 * np.abs(X).max() * rng.choice([-1.0, 1.0], spikes)
    return X, sf_s_count(n, n_factors, len(offs), spikes, count_indices=True)


def load_case(name: str) -> tuple[np.ndarray, dict, int | None]:
    """The matrix, its description, and (planted only) the planted structure's count."""
    import sfapprox

    for case, rel, category in REAL_CASES:
        if case == name:
            m = sfapprox.load_matrix(REAL / rel, **LOAD_OPTIONS.get(rel, {}))
            info = {"name": name, "file": rel, "category": category, "n": m.n}
            return m.matrix, info, None
    params = dict(PLANTED_CASES)[name]
    X, count = planted(**params)
    return X, {"name": name, "category": "planted", "n": X.shape[0], "planted": params, "planted_count": count}, count


def run_cell(name: str, budget: str, max_iter: int | None = None) -> dict:
    """One ``compare`` call in a worker process (one torch thread); ``max_iter`` None: :func:`max_iter_for`."""
    import torch

    import sfapprox
    from sfapprox.comparison import available_methods

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X, info, count = load_case(name)
    n = X.shape[0]
    spec = str(count) if budget == "match" else budget
    methods = [m for m in METHODS if m in available_methods()]
    max_iter = max_iter or max_iter_for(n)
    settings = sfapprox.FitSettings(device="cpu", max_iter=max_iter, time_limit=None)
    start = time.perf_counter()
    c = sfapprox.compare(X, methods, budget=spec, matrix_info=info, settings=settings, count_indices=True)
    out = c.to_dict()
    out["budget_label"] = budget
    out["wall_seconds"] = time.perf_counter() - start
    out["max_iter"] = max_iter
    out["recovery"] = max_iter != max_iter_for(n)
    return out


# ----------------------------------------------------------------------------- report
def _errors(cell: dict) -> dict[str, float | None]:
    return {r["method"]: (r["rel_error"] if r["status"] == "ok" else None) for r in cell["results"]}


def guarantee(cell: dict) -> tuple[bool | None, float | None]:
    """Whether sf+lr <= min(SF, TSVD) * (1 + tol), and sf+lr / min(SF, TSVD)."""
    e = _errors(cell)
    ends = [e.get(m) for m in ("sf", "tsvd") if e.get(m) is not None]
    if e.get("sf+lr") is None or not ends:
        return None, None
    best = min(ends)
    return e["sf+lr"] <= best * (1 + TOLERANCE) + 1e-15, (e["sf+lr"] / best if best > 0 else None)


def winner(cell: dict) -> list[str]:
    e = {m: v for m, v in _errors(cell).items() if v is not None}
    if not e:
        return []
    best = min(e.values())
    return [m for m, v in e.items() if v <= best * (1 + 1e-9) + 1e-15]


def fit_seconds(row: dict) -> float | None:
    """A row's fit's own seconds (``params["fit_seconds"]``, what this table has always shown); a row of a
    checkout from before rows had it: its ``seconds``, which were the fit's then."""
    return (row.get("params") or {}).get("fit_seconds", row.get("seconds"))


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}" if v >= 1e-3 else f"{v:.1e}"


def _split(cell: dict, method: str) -> str:
    r = next((r for r in cell["results"] if r["method"] == method), None)
    if r is None or r["status"] != "ok":
        return "—"
    p = r["params"]
    extra = f"r={p['rank']}" if "rank" in p else f"s={p['n_sparse']}"
    return f"{p['split']}: M={p['n_factors']}, {extra}"


def _error_row(c: dict, methods: list[str]) -> str:
    e = _errors(c)
    ok, ratio = guarantee(c)
    check = "—" if ok is None else ("ok" if ok else "FAIL") + (f" ({ratio:.3f})" if ratio is not None else "")
    best = set(winner(c))
    vals = [(f"**{_fmt(e.get(m))}**" if m in best else _fmt(e.get(m))) for m in methods]
    return (f"| {c['matrix']['name']} | {c['matrix']['n']} | {c['budget_label']} ({c['budget']}) | "
            + " | ".join(vals) + f" | {_split(c, 'sf+lr')} | {_split(c, 'sf+s')} | {check} |")


def render(all_cells: list[dict], meta: dict) -> str:
    cells = [c for c in all_cells if not c.get("recovery")]
    longer = [c for c in all_cells if c.get("recovery")]
    methods = [m for m in METHODS if any(m == r["method"] for c in cells for r in c["results"])]
    lines = [f"# Hybrids at equal budget ({meta['date']})", "",
             f"Machine: {meta['machine']}; {meta['jobs']} worker(s), one torch thread each; whole run "
             f"{meta['seconds']:.0f} s. Command: `{meta['command']}`.", "",
             "Settings: CPU float64, seed 0, `count_indices=True` (RPCA and sf+s pay 2 numbers per sparse "
             "entry), SF iterations capped at 1000 (N <= 128), 300 (N <= 200), 150 (larger) for every "
             "iterative fit (SF and each hybrid grid point), no time limit. Budgets: SF's reference count "
             "(`sf`), 0.1 N^2, 0.25 N^2, and for planted matrices the planted structure's count (`match`). "
             "Relative Frobenius errors; — = not applicable (e.g. SF below its smallest full-support "
             "structure, NMF on negative data).", "",
             "## Relative error", "",
             "| matrix | N | budget | " + " | ".join(methods) + " | sf+lr split | sf+s split | guarantee |",
             "|---|---|---|" + "---|" * len(methods) + "---|---|---|"]
    lines += [_error_row(c, methods) for c in cells]
    lines += ["", "guarantee: sf+lr ≤ min(SF, TSVD) × 1.001 at the same budget (ratio sf+lr / min in brackets).",
              "", "## Seconds (each fit's own, params.fit_seconds; a hybrid's is the sum over its grid)", "",
              "| matrix | budget | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for c in cells:
        secs = {r["method"]: fit_seconds(r) for r in c["results"]}
        lines.append(f"| {c['matrix']['name']} | {c['budget_label']} | "
                     + " | ".join("—" if secs.get(m) is None else f"{secs[m]:.2f}" for m in methods) + " |")
    lines += ["", "## Wins per category (cells where the method has the lowest error; ties count for each)", "",
              "| category | cells | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for cat in sorted({c["matrix"]["category"] for c in cells}):
        group = [c for c in cells if c["matrix"]["category"] == cat]
        wins = {m: sum(m in winner(c) for c in group) for m in methods}
        lines.append(f"| {cat} | {len(group)} | " + " | ".join(str(wins[m]) for m in methods) + " |")
    if longer:
        lines += ["", f"## Planted matrices at their own budget, {RECOVERY_ITERS} iterations", "",
                  "| matrix | N | budget | " + " | ".join(methods) + " | sf+lr split | sf+s split | guarantee |",
                  "|---|---|---|" + "---|" * len(methods) + "---|---|---|"]
        lines += [_error_row(c, methods) for c in longer]
        lines += ["", "seconds: " + "; ".join(
            f"{c['matrix']['name']}: " + ", ".join(f"{r['method']} {fit_seconds(r):.1f}" for r in c["results"]
                                                   if fit_seconds(r) is not None) for c in longer)]
    checks = [guarantee(c)[0] for c in all_cells]
    lines += ["", f"Guarantee held in {sum(1 for x in checks if x)} of {sum(1 for x in checks if x is not None)} "
              "cells where sf+lr and SF or TSVD were scored."]
    return "\n".join(lines) + "\n"


def _progress(cell: dict) -> str:
    ok, ratio = guarantee(cell)
    return f"{cell['matrix']['name']} {cell['budget_label']}: winner {winner(cell)} guarantee {ok} {ratio}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--budgets", default="sf,0.1,0.25")
    ap.add_argument("--tag", default="hybrid")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    budgets = [b for b in args.budgets.split(",") if b]
    names = [c[0] for c in REAL_CASES if REAL.is_dir()] + [c[0] for c in PLANTED_CASES]
    names = [n for n in names if not only or n in only]
    tasks = [(n, b, None) for n in names for b in budgets + (["match"] if n.startswith("planted") else [])]
    tasks += [(n, "match", RECOVERY_ITERS) for n in names if n.startswith("planted")]
    order = {n: i for i, n in enumerate(names)}
    start = time.perf_counter()
    cells = run_parallel(run_cell, tasks, args.jobs, _progress)
    labels = budgets + ["match"]
    cells.sort(key=lambda c: (c["recovery"], order[c["matrix"]["name"]], labels.index(c["budget_label"])))
    info = meta("python benchmarks/hybrid_table.py" + "".join(
                f" --{k} {v}" for k, v in (("jobs", args.jobs), ("only", args.only), ("budgets", args.budgets))
                if v and not (k == "jobs" and v == 2) and not (k == "budgets" and v == "sf,0.1,0.25")),
                machine=machine(numpy=np.__version__, torch=version("torch")), jobs=args.jobs,
                seconds=time.perf_counter() - start, tolerance=TOLERANCE)
    write_results(args.tag, {"meta": info, "cells": cells}, render(cells, info))
    print(f"wrote {OUT / args.tag}.json and .md in {info['seconds']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
