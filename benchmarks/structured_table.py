"""The structured-approximation comparison: every method at 0.5x, 1x and 2x SF's budget.

Methods: sf, sf-symmetric, sf-butterfly, tsvd, rpca, nmf, sf+lr, sf+s, and the plain and
structured competitors sparse (CSR storage of the largest entries), monarch (closed-form
Monarch projection), monarch+lr (Monarch plus a low-rank term) and butterfly-hier (hierarchical butterfly factorization).  Matrices: the
entries of the bundled manifest paper-table1 whose files are in ../shared/realdata (graphs,
meshes, the dense similarity, the image and its gradient) and every entry of
the bundled synthetic (random sparse, planted low rank + sparse, banded, circulant,
Chord products, covariances, edge images, attention over beta).

Run by hand (not part of the tests); about 25 minutes on 2 cores:

    python benchmarks/structured_table.py [--jobs 2] [--only strike,banded-128] [--factors 0.5,1,2]

Every (matrix, budget) cell is one ``sfapprox.compare`` call with every method, sharing one
``FitSettings``: CPU float64, seed 0, one torch thread per worker, ``count_indices=True``
(RPCA and sf+s pay 2 numbers per sparse entry; ``sparse`` always pays CSR's 2s + N + 1), the
methods' own iteration limits, and a per-fit time limit (``time_limit_for``: 2 s for N <= 64,
3 s for N <= 128, 5 s above) that ends the iterative fits.  Results cut by the clock depend on
the machine's speed and load; the closed-form methods (tsvd, sparse, monarch, butterfly-hier)
do not.

Writes benchmarks/results/structured.json (every comparison's JSON), structured.md (errors,
wins per category, where SF wins and where it does not) and structured.png (relative error
against budget per category).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

from _common import DEFAULT_DATA_DIR, FINDINGS, OUT, ROOT, machine, meta, run_parallel, version
from _common import write_markdown, write_results

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per worker process

REAL = DEFAULT_DATA_DIR  # --data-dir
MANIFESTS = [ROOT / "sfapprox" / "datasets" / "manifests" / "paper-table1.toml", ROOT / "sfapprox" / "datasets" / "manifests" / "synthetic.toml"]
METHODS = ["sf", "sf-symmetric", "sf-butterfly", "tsvd", "rpca", "nmf", "sf+lr", "sf+s",
           "sparse", "monarch", "monarch+lr", "butterfly-hier"]
SF_FAMILY = ("sf", "sf-symmetric", "sf-butterfly", "sf+lr", "sf+s")
FACTORS = (0.5, 1.0, 2.0)
TIE = 1e-9  # relative tolerance of a tie for the lowest error
FLOOR = 1e-12  # relative errors below this count as exact (0)
PLOT_FLOOR = 1e-6  # ... and are drawn at this height in the plot


def time_limit_for(n: int) -> float:
    """Wall-clock limit of each fit, in seconds, chosen so that the whole run stays near 30 minutes.

    SF and its supports, RPCA (its whole grid) and NMF (all its starts) get it once; sf+lr and
    sf+s get it for each point of their split grid (about 4 points).
    """
    return 2.0 if n <= 64 else 3.0 if n <= 128 else 5.0


# ----------------------------------------------------------------------------- the matrices
def entries() -> list:
    """Manifest entries that can be run here: generators, and files present under ../shared/realdata."""
    from sfapprox.datasets.manifest import load_manifest

    out = []
    for path in MANIFESTS:
        for e in load_manifest(path).entries:
            if e.generator or (e.file and (REAL / e.file).is_file()):
                out.append(e)
    return out


def load_entry(entry):
    """The entry's matrix as a LoadedMatrix (files) or an array (generators), and its description."""
    import sfapprox
    from sfapprox.datasets.synthetic import generate

    info = {"name": entry.name, "category": entry.category, "manifest": Path(entry.manifest).name}
    if entry.generator:
        g = generate(entry.generator, entry.params)
        if "mean_row_entropy" in g.info:
            info["mean_row_entropy"] = g.info["mean_row_entropy"]
        if entry.generator == "attention":
            info["beta"] = entry.params["beta"]
        return g.matrix, info
    info["file"] = entry.file
    return sfapprox.load_matrix(REAL / entry.file, **entry.load), info


def run_cell(name: str, factor: float, data_dir: str | None = None) -> dict:
    """One ``compare`` call (every method) in a worker process."""
    import torch

    import sfapprox
    from sfapprox.budget import sf_count

    global REAL
    if data_dir is not None:
        REAL = Path(data_dir)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    entry = next(e for e in entries() if e.name == name)
    matrix, info = load_entry(entry)
    n = matrix.n if hasattr(matrix, "n") else matrix.shape[0]
    budget = int(factor * sf_count(n))
    settings = sfapprox.FitSettings(device="cpu", threads=1, time_limit=time_limit_for(n))
    start = time.perf_counter()
    c = sfapprox.compare(matrix, METHODS, budget=str(budget), settings=settings, count_indices=True,
                         matrix_info=info)
    out = c.to_dict()
    out["factor"] = factor
    out["wall_seconds"] = time.perf_counter() - start
    return out


# ----------------------------------------------------------------------------- the report
def errors(cell: dict) -> dict[str, float | None]:
    return {r["method"]: (r["rel_error"] if r["status"] == "ok" else None) for r in cell["results"]}


def winners(cell: dict) -> list[str]:
    e = {m: v for m, v in errors(cell).items() if v is not None}
    if not e:
        return []
    best = min(e.values())
    return [m for m, v in e.items() if v <= best * (1 + TIE) + FLOOR]


def _fmt(v: float | None) -> str:
    if v is None:
        return "—"
    if v < FLOOR:
        return "0"
    return f"{v:.3g}" if v >= 1e-3 else f"{v:.1e}"


def _row(cell: dict) -> str:
    e, best = errors(cell), set(winners(cell))
    vals = [(f"**{_fmt(e.get(m))}**" if m in best else _fmt(e.get(m))) for m in METHODS]
    return (f"| {cell['matrix']['name']} | {cell['matrix']['n']} | {cell['factor']:g}× ({cell['budget']}) | "
            + " | ".join(vals) + " |")


def _category(cell: dict) -> str:
    return cell["matrix"]["category"]


def _sf_rank(cell: dict) -> int | None:
    """1-based rank of plain SF among the scored methods (ties share the better rank)."""
    e = {m: v for m, v in errors(cell).items() if v is not None}
    if e.get("sf") is None:
        return None
    return 1 + sum(v < e["sf"] * (1 - TIE) - FLOOR for v in e.values())


def summary_lines(cells: list[dict]) -> list[str]:
    """Wins per category, and the SF-vs-the-rest facts the findings are written from."""
    cats = sorted({_category(c) for c in cells})
    lines = ["## Wins per category", "",
             "Cells where the method has the lowest relative error (ties within 1e-9 relative count for each;"
             " errors below 1e-12 count as 0).", "",
             "| category | cells | " + " | ".join(METHODS) + " | any SF-family |",
             "|---|---|" + "---|" * (len(METHODS) + 1)]
    for cat in cats:
        group = [c for c in cells if _category(c) == cat]
        wins = {m: sum(m in winners(c) for c in group) for m in METHODS}
        fam = sum(any(m in winners(c) for m in SF_FAMILY) for c in group)
        lines.append(f"| {cat} | {len(group)} | " + " | ".join(str(wins[m]) for m in METHODS) + f" | {fam} |")
    total = {m: sum(m in winners(c) for c in cells) for m in METHODS}
    fam = sum(any(m in winners(c) for m in SF_FAMILY) for c in cells)
    lines.append(f"| **all** | {len(cells)} | " + " | ".join(str(total[m]) for m in METHODS) + f" | {fam} |")
    lines += ["", "## Plain SF against the rest", "",
              "| category | cells | SF scored | SF best (incl. ties) | SF rank (median) | "
              "SF / best other (median) | best other (most often) |",
              "|---|---|---|---|---|---|---|"]
    for cat in cats + ["all"]:
        group = [c for c in cells if cat == "all" or _category(c) == cat]
        scored = [c for c in group if errors(c).get("sf") is not None]
        ranks = sorted(r for r in (_sf_rank(c) for c in scored) if r is not None)
        ratios, others = [], {}
        for c in scored:
            e = {m: v for m, v in errors(c).items() if v is not None and m != "sf"}
            if not e:
                continue
            m_best = min(e, key=e.get)
            others[m_best] = others.get(m_best, 0) + 1
            ratios.append(errors(c)["sf"] / max(e[m_best], FLOOR * 1e-3))
        med_rank = ranks[len(ranks) // 2] if ranks else None
        med_ratio = sorted(ratios)[len(ratios) // 2] if ratios else None
        top = max(others, key=others.get) if others else "—"
        ratio = "—" if med_ratio is None else ("∞ (others exact)" if med_ratio > 1e6 else f"{med_ratio:.3g}")
        lines.append(f"| {cat} | {len(group)} | {len(scored)} | {sum('sf' in winners(c) for c in scored)} | "
                     f"{med_rank if med_rank is not None else '—'} | {ratio} | {top} ({others.get(top, 0)}) |")
    lines += ["", "## Plain SF head to head", "",
              "Cells where plain SF's error is lower than the other method's (beyond a 1e-9 tie) / cells "
              "where both were scored.", "",
              "| category | " + " | ".join(m for m in METHODS if m != "sf") + " |",
              "|---|" + "---|" * (len(METHODS) - 1)]
    for cat in cats + ["all"]:
        group = [c for c in cells if cat == "all" or _category(c) == cat]
        row = []
        for m in METHODS:
            if m == "sf":
                continue
            both = [errors(c) for c in group if errors(c).get("sf") is not None and errors(c).get(m) is not None]
            better = sum(e["sf"] < e[m] * (1 - TIE) - FLOOR for e in both)
            row.append(f"{better}/{len(both)}")
        lines.append(f"| {cat} | " + " | ".join(row) + " |")
    lines += ["", "## The closed-form structured methods", ""]
    pairs = [("monarch", "tsvd"), ("monarch", "sf"), ("butterfly-hier", "sf-butterfly")]
    for a, b in pairs:
        ratios = sorted(errors(c)[a] / errors(c)[b] for c in cells
                        if errors(c).get(a) is not None and errors(c).get(b) is not None and errors(c)[b] > FLOOR)
        wins = sum(r < 1 - TIE for r in ratios)
        if ratios:
            lines.append(f"- {a} / {b} error ratio over {len(ratios)} cells (both scored, {b} not exact): "
                         f"median {ratios[len(ratios) // 2]:.3g}, range {ratios[0]:.3g} – {ratios[-1]:.3g}; "
                         f"{a} lower in {wins}.")
    return lines


def render(cells: list[dict], meta: dict) -> str:
    lines = [f"# Structured approximations at equal budget ({meta['date']})", "",
             f"Machine: {meta['machine']}; {meta['jobs']} worker(s), one torch/BLAS thread each; whole run "
             f"{meta['seconds']:.0f} s. Command: `{meta['command']}`.", "",
             "Settings: CPU float64, seed 0, `count_indices=True` (RPCA and sf+s pay 2 numbers per sparse "
             "entry; `sparse` pays CSR's 2s + N + 1). Budgets: 0.5×, 1× and 2× SF's reference count N·K·M "
             "(`sfapprox.budget.sf_count`). Time limit per fit: 2 s (N ≤ 64), 3 s (N ≤ 128), 5 s (larger), for "
             "SF, sf-symmetric, sf-butterfly, RPCA (its whole rank grid) and NMF (all its starts), and for each "
             "point of the sf+lr / sf+s split grids; the methods' own iteration limits otherwise. "
             "tsvd, sparse, monarch and butterfly-hier are closed-form. Relative Frobenius errors "
             "‖X − X̂‖_F / ‖X‖_F, the same function for every method; bold: the lowest in the row "
             "(ties within 1e-9); 0: below 1e-12; —: not applicable (SF below its smallest full-support "
             "structure, sf-butterfly when N is not a power of two, NMF on negative data, a method below its "
             "smallest budget).", ""]
    for cat in sorted({_category(c) for c in cells}):
        group = [c for c in cells if _category(c) == cat]
        lines += [f"## {cat}", "", "| matrix | N | budget | " + " | ".join(METHODS) + " |",
                  "|---|---|---|" + "---|" * len(METHODS)]
        lines += [_row(c) for c in group]
        lines.append("")
    lines += summary_lines(cells)
    lines += ["", "## Seconds per method (sum over all cells)", "",
              "| " + " | ".join(METHODS) + " |", "|" + "---|" * len(METHODS)]
    secs = {m: sum(r["seconds"] or 0 for c in cells for r in c["results"] if r["method"] == m) for m in METHODS}
    lines.append("| " + " | ".join(f"{secs[m]:.0f}" for m in METHODS) + " |")
    lines += ["", "Plot: `structured.png` (median relative error per category against the budget factor; "
              f"log scale, errors below {PLOT_FLOOR:g}, exact fits included, drawn at {PLOT_FLOOR:g}).", ""]
    return "\n".join(lines) + "\n"


def plot(cells: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = sorted({_category(c) for c in cells})
    cols = 3
    rows = -(-len(cats) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    colors = plt.get_cmap("tab20").colors
    styles = {m: ("-" if m in SF_FAMILY else "--") for m in METHODS}
    markers = dict(zip(METHODS, "ovs^<>DPX*ph"))
    for ax, cat in zip(axes.flat, cats):
        group = [c for c in cells if _category(c) == cat]
        factors = sorted({c["factor"] for c in group})
        for m in METHODS:
            ys = []
            for f in factors:
                vals = sorted(max(errors(c).get(m), PLOT_FLOOR) for c in group
                              if c["factor"] == f and errors(c).get(m) is not None)
                ys.append(vals[len(vals) // 2] if vals else math.nan)
            if not all(math.isnan(y) for y in ys):
                ax.plot(factors, ys, styles[m], marker=markers[m], ms=4, label=m,
                        color=colors[(2 * METHODS.index(m)) % 20 + ((2 * METHODS.index(m)) // 20) % 2])
        n_mat = len({c["matrix"]["name"] for c in group})
        ax.set(title=f"{cat} ({n_mat} matrices)", xlabel="budget / SF's", ylabel="median rel. error",
               yscale="log", xscale="log")
        ax.set_xticks(factors, [f"{f:g}×" for f in factors])
        ax.set_xticks([], minor=True)
        if ax.get_ylim()[0] <= PLOT_FLOOR:  # some medians are exact fits: mark where they are drawn
            ax.axhline(PLOT_FLOOR, color="0.6", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(cats):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> int:
    global REAL
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated entry names")
    ap.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    ap.add_argument("--tag", default="structured")
    ap.add_argument("--data-dir", default=str(REAL), help="folder of the real matrices (../shared/realdata)")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite the .md and .png from the .json (keeping the hand-written findings)")
    args = ap.parse_args()
    REAL = Path(args.data_dir).resolve()
    if args.render_only:
        saved = json.loads((OUT / f"{args.tag}.json").read_text())
        write_markdown(args.tag, report(saved["cells"], saved["meta"], args.tag))
        plot(saved["cells"], OUT / f"{args.tag}.png")
        return 0
    only = {s for s in args.only.split(",") if s}
    factors = [float(f) for f in args.factors.split(",") if f]
    names = [e.name for e in entries() if not only or e.name in only]
    order = {n: i for i, n in enumerate(names)}
    # Largest matrices first, so that the workers finish together.
    sizes = {}
    for e in entries():
        if e.name in order:
            matrix, _ = load_entry(e)
            sizes[e.name] = matrix.n if hasattr(matrix, "n") else matrix.shape[0]
    tasks = sorted(((n, f, str(REAL)) for n in names for f in factors), key=lambda t: (-sizes[t[0]], -t[1]))
    start = time.perf_counter()
    cells = run_parallel(run_cell, tasks, args.jobs,
                         lambda cell: f"{cell['matrix']['name']} {cell['factor']:g}x "
                                      f"({cell['wall_seconds']:.0f} s): best {winners(cell)}")
    cells.sort(key=lambda c: (order[c["matrix"]["name"]], c["factor"]))
    info = meta("python benchmarks/structured_table.py" + "".join(
                f" --{k} {v}" for k, v in (("jobs", args.jobs), ("only", args.only), ("factors", args.factors))
                if v and not (k == "jobs" and v == 2) and not (k == "factors" and v == "0.5,1,2")),
                machine=machine(numpy=version("numpy"), torch=version("torch")), jobs=args.jobs,
                seconds=time.perf_counter() - start, methods=METHODS, factors=factors, data_dir=str(REAL),
                time_limits={"N <= 64": 2.0, "N <= 128": 3.0, "N > 128": 5.0})
    # One line per cell: small, and a re-run diffs cell by cell.
    data = "{\"meta\": " + json.dumps(info) + ", \"cells\": [\n" + ",\n".join(json.dumps(c) for c in cells) + "\n]}\n"
    write_results(args.tag, data, report(cells, info, args.tag))
    plot(cells, OUT / f"{args.tag}.png")
    print(f"wrote {OUT / args.tag}.json, .md and .png in {info['seconds']:.0f} s", file=sys.stderr)
    return 0


def report(cells: list[dict], meta: dict, tag: str) -> str:
    """The .md's text, keeping a hand-written findings section already in OUT/<tag>.md."""
    md = OUT / f"{tag}.md"
    text = render(cells, meta)
    if md.is_file() and FINDINGS in md.read_text():
        text += "\n" + FINDINGS + md.read_text().split(FINDINGS, 1)[1]
    return text


if __name__ == "__main__":
    raise SystemExit(main())
