"""Seconds default SF needs to reach the paper's SF figure on the 8 reproducible Table 1 matrices.

Run by hand (not part of the tests), on a machine as quiet as you can get:

    python benchmarks/time_to_quality.py [--data-dir ../shared/realdata] [--horizon 15]
                                         [--methods sf,sf+lr,palm] [--only strike,world_trade]
                                         [--tag time_to_quality] [--before results/x.json]
    # the same measurement with another checkout of sfapprox (e.g. the code before a change):
    python benchmarks/time_to_quality.py --sfapprox /tmp/base --methods sf --tag time_to_quality-before

Each method runs once per matrix, for ``--horizon`` seconds of wall time, and its error is
recorded against the wall clock from the moment ``fit`` is called (setup included):

* ``sf``: ``ChordSF(device="cpu")`` with its defaults (``init="auto"``, ``time_limit=60``,
  ``max_iter=20000``, automatic threads); a ``callback`` records ``fro_error`` after every
  iteration (where they run compiled, after every run of them: about every 0.05 s, as the CLI's
  progress bar is called) and stops the fit at the horizon.  Time to quality = the first moment the error
  is at or below the paper's SF figure.
* ``sf+lr``: ``sfapprox.ChordLowRank(device="cpu")`` at SF's budget, each grid point given
  ``time_limit = horizon / 6`` (the grid has up to 6 points); its callback reports the error of
  the fit in progress, the curve is the best so far (each grid point is a valid surrogate at
  the budget).
* ``palm``: PALM4MSA (``benchmarks/palm4msa.py``, FAµST's algorithm in numpy on dense masked
  factors) from FAµST's start and from ChordSF's 1/K start, for the horizon; one sweep costs
  the same every time, so sweep ``i`` is placed at ``i * seconds / sweeps``.  The BLAS pool gets
  the thread count SF's rule gives the same matrix (one thread for all 8).

Writes benchmarks/results/<tag>.json (machine, settings, every curve) and <tag>.md (the table);
with matplotlib, benchmarks/results/<tag>.png: one panel per matrix, error against seconds.
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

from _common import DEFAULT_DATA_DIR, OUT, ROOT, machine, meta, write_results

# The 8 reproducible Table 1 matrices (the rows marked ✓ in realdata/README.md): name, file under the
# data folder, loader options, paper TSVD, paper SF — one list, paper_table1.py's.
from paper_table1 import CASES

#: The goal of issue 12: every matrix at the paper's SF figure within this many seconds.
GOAL_SECONDS = 5.0


class Timeline:
    """(seconds, error) points of one run, thinned: a point is kept when the best error falls
    by 1 % or 0.1 s have passed; the first point at or below ``target`` is kept exactly."""

    def __init__(self, target: float, t0: float):
        self.target, self.t0 = target, t0
        self.points: list[tuple[float, float]] = []
        self.best = math.inf
        self.hit: dict | None = None

    def add(self, seconds: float, error: float, iteration: int | None = None) -> None:
        new_best = error < self.best
        self.best = min(self.best, error)
        if self.hit is None and self.best <= self.target:
            self.hit = {"seconds": seconds, "iteration": iteration, "error": self.best}
            self.points.append((seconds, self.best))
            return
        last_t = self.points[-1][0] if self.points else -1.0
        last_e = self.points[-1][1] if self.points else math.inf
        if (new_best and self.best < last_e * 0.99) or seconds - last_t >= 0.1:
            self.points.append((seconds, self.best))

    def summary(self) -> dict:
        return {"hit": self.hit, "final_error": self.best,
                "points": [[round(t, 4), float(f"{e:.6g}")] for t, e in self.points]}


def run_sf(X, target: float, horizon: float) -> dict:
    import sfapprox

    t0 = time.perf_counter()
    line = Timeline(target, t0)

    def callback(info: dict) -> bool:
        now = time.perf_counter() - t0
        line.add(now, info["fro_error"], info["iteration"])
        return now >= horizon

    # A progress callback (as the CLI's): where the iterations run compiled it is called once per run
    # of them (about every 0.05 s) instead of after each one, which would cost a Python call each.
    callback.coarse = True
    sf = sfapprox.ChordSF(device="cpu", callback=callback).fit(X)
    out = line.summary()
    out.update({"iterations": int(sf.n_iter_), "init": sf.init_, "stop": sf.stop_reason_,
                "threads": getattr(sf, "threads_", None), "kernel": sf.kernel_,
                "fit_error": float(sf.fro_error_), "wall": time.perf_counter() - t0})
    return out


def run_sflr(X, target: float, horizon: float) -> dict:
    import sfapprox

    t0 = time.perf_counter()
    line = Timeline(target, t0)

    def callback(info: dict) -> bool:
        now = time.perf_counter() - t0
        line.add(now, info["fro_error"], info.get("iteration"))
        return now >= horizon

    est = sfapprox.ChordLowRank(device="cpu", sf_params={"time_limit": horizon / 6}, callback=callback).fit(X)
    line.add(time.perf_counter() - t0, float(est.fro_error_))
    out = line.summary()
    out.update({"rank": int(est.rank_), "fit_error": float(est.fro_error_), "wall": time.perf_counter() - t0,
                "split": est.params_.get("split")})
    return out


def run_palm(X, target: float, horizon: float, init: str) -> dict:
    import palm4msa as P

    from sfapprox._threads import available_cores, choose_threads, torch_threads
    from sfapprox.chord import default_n_factors

    n = X.shape[0]
    mask = P.chord_mask(n)
    t0 = time.perf_counter()
    with torch_threads(choose_threads(n * n, available_cores())):
        factors, lam = P.initial_point(init, X, default_n_factors(n))
        res = P.palm4msa(X, mask, factors, lam, time_limit=horizon)
    line = Timeline(target, t0)
    per_sweep = res.seconds / max(res.n_iter, 1)
    for i, err in enumerate(res.objective):
        line.add(i * per_sweep, err, i)
    out = line.summary()
    out.update({"sweeps": res.n_iter, "fit_error": res.fro_error, "wall": time.perf_counter() - t0})
    return out


def _seconds(entry: dict | None) -> str:
    if entry is None:
        return "–"
    hit = entry.get("hit")
    return f"{hit['seconds']:.2f}" if hit else f"> {entry['points'][-1][0]:.0f}" if entry["points"] else "–"


def render(rows: list[dict], meta: dict, before: dict | None) -> str:
    prior = {r["matrix"]: r for r in (before or {}).get("rows", [])}
    head = ["matrix", "N", "paper SF", "SF s to paper", "SF iterations", "SF start", "SF threads",
            f"SF error at {GOAL_SECONDS:g} s"]
    if prior:
        head.insert(4, "before: SF s to paper")
    head += ["sf+lr s to paper", "PALM (FAµST start) s", "PALM (1/K start) s", "PALM best error"]
    lines = [f"# Time to the paper's SF figure ({meta['date']})", "",
             f"Command: `{meta['command']}`", "",
             f"Machine: {meta['machine']}; "
             f"load average at start {meta['load_average_at_start']:.2f}, during the runs "
             f"{min(r['loadavg'] for r in rows):.2f}–{max(r['loadavg'] for r in rows):.2f}. "
             f"Horizon {meta['horizon']:g} s per method and matrix.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        sf = r.get("sf")
        at_goal = "–"
        if sf:
            pts = [e for t, e in sf["points"] if t <= GOAL_SECONDS]
            at_goal = f"{pts[-1]:.4g}" if pts else "–"
        cells = [r["matrix"], str(r["n"]), f"{r['paper_sf']:.3g}", _seconds(sf),
                 str(sf["hit"]["iteration"]) if sf and sf["hit"] else "–",
                 sf["init"] if sf else "–", str(sf["threads"]) if sf else "–", at_goal]
        if prior:
            cells.insert(4, _seconds(prior[r["matrix"]].get("sf")) if r["matrix"] in prior else "–")
        palms = [r.get("palm_faust"), r.get("palm_reference")]
        best = min((p["final_error"] for p in palms if p), default=None)
        cells += [_seconds(r.get("sf+lr")), _seconds(palms[0]), _seconds(palms[1]),
                  f"{best:.4g}" if best is not None else "–"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "\"> T\": not reached within the horizon T. Seconds are wall time from the `fit` call "
              "(setup included); SF's iterations count both starts of `init=\"auto\"`."]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 4
    fig, axes = plt.subplots(math.ceil(len(rows) / cols), cols, figsize=(4 * cols, 3.2 * math.ceil(len(rows) / cols)),
                             squeeze=False)
    styles = {"sf": ("SF (ChordSF defaults)", "C0", "-"), "sf+lr": ("sf+lr", "C1", "-"),
              "palm_faust": ("PALM4MSA, FAµST start", "C2", "--"), "palm_reference": ("PALM4MSA, 1/K start", "C3", ":")}
    for ax, r in zip(axes.flat, rows):
        for key, (label, color, ls) in styles.items():
            if r.get(key) and r[key]["points"]:
                t, e = zip(*r[key]["points"])
                ax.step(t, e, where="post", color=color, ls=ls, label=label)
        ax.axhline(r["paper_sf"], color="k", lw=0.8, ls="--", label="paper SF")
        ax.axvline(GOAL_SECONDS, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_xlim(0, r.get("horizon", None))
        ax.set_title(f"{r['matrix']} (N={r['n']})", fontsize=10)
        ax.set_xlabel("seconds")
        ax.set_ylabel("‖X − X̂‖_F")
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)


def _json(meta: dict, rows: list[dict]) -> str:
    """The results, one matrix per line (the curves make the rows long)."""
    body = ",\n".join("  " + json.dumps(r) for r in rows)
    return f'{{"meta": {json.dumps(meta)},\n "rows": [\n{body}\n ]}}\n'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--horizon", type=float, default=15.0, help="seconds per method and matrix")
    ap.add_argument("--methods", default="sf,sf+lr,palm")
    ap.add_argument("--only", default="")
    ap.add_argument("--tag", default="time_to_quality")
    ap.add_argument("--before", default="", help="a JSON of an earlier run (e.g. the code before a change)")
    ap.add_argument("--sfapprox", default=str(ROOT), help="checkout whose sfapprox package is measured")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.sfapprox).resolve()))
    import numpy as np
    import torch

    import sfapprox

    data = Path(args.data_dir).resolve()
    if not data.is_dir():
        print(f"{data} not found (--data-dir or SFAPPROX_REALDATA)", file=sys.stderr)
        return 1
    warnings.simplefilter("ignore")  # ConvergenceWarning when the horizon cuts a fit is expected
    methods = [m for m in args.methods.split(",") if m]
    only = {s for s in args.only.split(",") if s}
    info = meta(machine=machine(numpy=np.__version__, torch=torch.__version__),
                torch_threads_default=torch.get_num_threads(), horizon=args.horizon,
                sfapprox=str(Path(sfapprox.__file__).resolve().parent), methods=methods)
    rows = []
    for name, rel, opts, _, paper_sf in CASES:
        if only and name not in only:
            continue
        X = sfapprox.load_matrix(data / rel, **opts).to_dense()
        row = {"matrix": name, "n": X.shape[0], "paper_sf": paper_sf, "horizon": args.horizon,
               "loadavg": os.getloadavg()[0]}
        if "sf" in methods:
            row["sf"] = run_sf(X, paper_sf, args.horizon)
        if "sf+lr" in methods:
            row["sf+lr"] = run_sflr(X, paper_sf, args.horizon)
        if "palm" in methods:
            for init in ("faust", "reference"):
                row[f"palm_{init}"] = run_palm(X, paper_sf, args.horizon, init)
        rows.append(row)
        brief = {k: (_seconds(v) if isinstance(v, dict) else v) for k, v in row.items()}
        print(json.dumps(brief), flush=True)
    before = json.loads(Path(args.before).read_text()) if args.before else None
    write_results(args.tag, _json(info, rows), render(rows, info, before))
    try:
        plot(rows, OUT / f"{args.tag}.png")
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
