"""SF's time to quality at N = 4,096 and 8,192 (issue 25, goal 1): error against seconds, before and now.

Run by hand (not part of the tests), on a machine as quiet as you can get:

    python benchmarks/scale_fit.py [--sizes 4096,8192] [--matrices cloud,planted] [--seconds 600]
                                   [--tag scale_fit] [--settings '{"threads": 1}']
    # the same measurement with another checkout of sfapprox (e.g. main before a change):
    python benchmarks/scale_fit.py --sfapprox /tmp/base --tag scale_fit-before --seconds 600
    # then the table with both side by side:
    python benchmarks/scale_fit.py --render --before scale_fit-before --tag scale_fit

Matrices (dense, formed; seeded):

* ``cloud``: the RBF kernel (bandwidth 1) of a mixture of 32 Gaussian clusters in 16 dimensions,
  the points in cluster order (:func:`ordered_cloud`): high rank (at N = 1,024, TSVD at SF's
  budget keeps rel 0.88; the identity alone is 0.33; SF gets 0.23 in 20 s);
* ``planted``: a product of ``M`` random Chord factors (values standard normal / sqrt(K)) plus
  Gaussian noise of 1 % of its norm: SF's own model, so the error can go down to about 0.01.

Each (matrix, N) runs in a fresh process: ``ChordSF(device="cpu", time_limit=--seconds)`` with
its defaults and ``--settings``; a ``callback`` records the error after every iteration (the
loss of the iterate, from the fit's own objective: no extra pass) against the wall clock from
the ``fit`` call (setup included), and the process's peak resident memory
(``resource.getrusage``) beside the fit's own memory estimate.

Writes benchmarks/results/<tag>.json (machine, settings, every curve) and <tag>.md; with
``--before TAG``, the table shows the other run's curve at the same moments and how long the new
fit takes to reach the error the old one had at the end; with matplotlib, <tag>.png.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from _common import OUT, ROOT, checkout_env, machine, meta, run_child, write_results

NAME = "scale_fit"
#: Moments (seconds from the fit call) at which the table reads the curves.
MOMENTS = (30, 60, 120, 300, 600)
#: The goal's deadlines (issue 25, goal 1): the old fit's 10-minute error within these seconds.
GOAL_SECONDS = {4096: 60.0, 8192: 120.0}


def ordered_cloud(n: int, dim: int = 16, clusters: int = 32, seed: int = 0):
    """``scale_sources.cloud``'s kind of point set (Gaussian clusters, spread 0.5, centres 3 apart per
    coordinate), with the points in cluster order, as a user's table sorted by label would be."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)) * 3.0
    labels = np.sort(rng.integers(0, clusters, n))
    return centres[labels] + 0.5 * rng.standard_normal((n, dim))


def matrix(kind: str, n: int):
    """The dense ``n x n`` test matrix ``kind`` (see the module docstring)."""
    import numpy as np

    if kind == "cloud":
        try:
            from sfapprox.sources import KernelMatrix
        except ImportError:  # a checkout from before the sources (issue 25's own "before", 5328a55^)
            P = ordered_cloud(n)
            sq = (P * P).sum(axis=1)
            d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (P @ P.T), 0.0)
            np.fill_diagonal(d2, 0.0)
            return np.exp(-d2 / 2.0)  # rbf, bandwidth 1: exp(-|x - y|^2 / 2)
        return KernelMatrix(ordered_cloud(n), bandwidth=1.0).to_dense()
    if kind == "planted":
        import torch

        from sfapprox.budget import sf_structure
        from sfapprox.chord import support_offsets
        from sfapprox.sf import _kernels

        rng = np.random.default_rng(1)
        offsets = support_offsets(n, "chord", 2)
        values = rng.standard_normal((sf_structure(n).n_factors, n, len(offsets))) / math.sqrt(len(offsets))
        X = _kernels.chord_product(torch.as_tensor(values), offsets.tolist()).numpy()
        return X + 0.01 * np.linalg.norm(X) / n * rng.standard_normal((n, n))
    raise SystemExit(f"unknown matrix {kind!r}: cloud or planted")


def one(kind: str, n: int, seconds: float, settings: dict) -> dict:
    """One fit with its curve (run in a fresh process: its peak memory is the fit's)."""
    import resource
    import warnings

    import numpy as np

    import sfapprox

    warnings.simplefilter("ignore")  # the ConvergenceWarning on the time limit is expected
    X = matrix(kind, n)
    fro = float(np.linalg.norm(X))
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    curve: list[tuple[float, float, int, str]] = []

    def record(info: dict) -> None:
        curve.append((round(info["elapsed"], 3), info["fro_error"] / fro, int(info["iteration"]), info["start"]))

    options = {"device": "cpu", **settings}  # '{"device": "cuda"}' in --settings: the GPU's fit
    sf = sfapprox.ChordSF(time_limit=seconds, callback=record, **options)
    t0 = time.perf_counter()
    sf.fit(X)
    wall = time.perf_counter() - t0
    gpu_peak = None
    if str(options["device"]).startswith("cuda"):
        import torch

        gpu_peak = int(torch.cuda.max_memory_allocated())
    return {"matrix": kind, "n": n, "settings": settings, "sfapprox": sfapprox.__file__, "gpu_peak": gpu_peak,
            "kernel": sf.kernel_,
            "rel_error": float(sf.rel_error_), "iterations": int(sf.n_iter_), "init": sf.init_,
            "threads": sf.threads_, "stop_reason": sf.stop_reason_, "wall": wall, "optimizer_seconds": sf.seconds_,
            "params": {k: v for k, v in sf.params_.items() if k != "offsets"},
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "rss_before_fit": base_rss,
            "curve": curve}


def best_at(curve: list, t: float) -> float | None:
    """The lowest error the curve reached by ``t`` seconds (None before its first point)."""
    seen = [e for s, e, *_ in curve if s <= t]
    return min(seen) if seen else None


def time_to(curve: list, target: float) -> float | None:
    """Seconds until the curve first reached ``target`` (None: never)."""
    return next((s for s, e, *_ in curve if e <= target), None)


def _run_child(kind: str, n: int, seconds: float, settings: dict, sfapprox_path: str | None) -> dict:
    row = run_child("scale_fit", "one", [kind, n, seconds, settings], env=checkout_env(sfapprox_path))
    if sfapprox_path and not Path(row["sfapprox"]).resolve().is_relative_to(Path(sfapprox_path).resolve()):
        raise SystemExit(f"measured {row['sfapprox']}, not the checkout in {sfapprox_path}")
    return row


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4f}"


def _secs(v: float | None) -> str:
    return "never" if v is None else f"{v:.0f} s"


def render(data: dict, before: dict | None) -> list[str]:
    info = data["meta"]
    lines = [f"# SF's time to quality at large N ({info['date']})", "",
             f"Command: `{info['command']}`", "",
             f"Machine: {info['machine']}; load average at start {info['load_average_at_start']}.", ""]
    if before is not None:
        lines += [f"Before: `{before['meta']['command']}` ({before['meta']['date']}, "
                  f"{before['meta'].get('sfapprox') or 'this checkout'}).", ""]
    head = ["matrix", "N", "run", *[f"error at {t} s" for t in MOMENTS], "iterations", "threads", "peak RSS"]
    if before is not None:
        head += ["s to before's final error"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    old_rows = {(r["matrix"], r["n"]): r for r in (before or {}).get("rows", [])}
    for r in data["rows"]:
        pairs = [("before", old_rows.get((r["matrix"], r["n"]))), ("now", r)] if before is not None else [("", r)]
        for label, row in pairs:
            if row is None:
                continue
            cells = [row["matrix"], f"{row['n']:,}", label or "now",
                     *[_fmt(best_at(row["curve"], t)) for t in MOMENTS],
                     str(row["iterations"]), str(row["threads"] or "—"), f"{row['peak_rss'] / 2**30:.2f} GiB"
                     + (f" (GPU {row['gpu_peak'] / 2**30:.2f} GiB)" if row.get("gpu_peak") else "")]
            if before is not None:
                old = old_rows.get((r["matrix"], r["n"]))
                target = None if old is None else min((e for _, e, *_ in old["curve"]), default=None)
                cells.append(_secs(time_to(row["curve"], target)) if target is not None and label == "now" else "")
            lines.append("| " + " | ".join(cells) + " |")
    if before is not None:
        lines += ["", "Goal (issue 25, goal 1): the error the old default fit reaches in 10 minutes within "
                  + ", ".join(f"{s:.0f} s at N = {n:,}" for n, s in GOAL_SECONDS.items()) + "."]
    lines += ["", "Errors are relative Frobenius errors of the iterate (the best so far at each moment), from "
              "the fit's own objective; seconds are wall time from the `fit` call, setup included."]
    return lines


def plot(data: dict, before: dict | None, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = data["rows"]
    old_rows = {(r["matrix"], r["n"]): r for r in (before or {}).get("rows", [])}
    fig, axes = plt.subplots(1, len(rows), figsize=(4.5 * len(rows), 3.6), squeeze=False)
    for ax, r in zip(axes[0], rows):
        for label, row in (("before", old_rows.get((r["matrix"], r["n"]))), ("now", r)):
            if row is None:
                continue
            t = [p[0] for p in row["curve"]]
            e = [min(p[1] for p in row["curve"][: i + 1]) for i in range(len(row["curve"]))]
            ax.plot(t, e, label=label)
        ax.set_title(f"{r['matrix']}, N = {r['n']:,}")
        ax.set_xlabel("seconds")
        ax.set_ylabel("relative error")
        ax.set_yscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--matrices", default="cloud,planted")
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--settings", default="{}", help="ChordSF keyword arguments, as JSON")
    ap.add_argument("--sfapprox", default=None, help="a checkout whose sfapprox is measured instead of this one")
    ap.add_argument("--tag", default=NAME)
    ap.add_argument("--before", default=None, help="the tag of a run to show beside this one")
    ap.add_argument("--render", action="store_true", help="re-render <tag>.md from <tag>.json only")
    args = ap.parse_args()
    before = json.loads((OUT / f"{args.before}.json").read_text()) if args.before else None
    if args.render:
        data = json.loads((OUT / f"{args.tag}.json").read_text())
    else:
        settings = json.loads(args.settings)
        rows = []
        for kind in [m for m in args.matrices.split(",") if m]:
            for n in [int(s) for s in args.sizes.split(",") if s]:
                row = _run_child(kind, n, args.seconds, settings, args.sfapprox)
                rows.append(row)
                print(f"{kind} N={n}: rel {row['rel_error']:.4f} after {row['wall']:.0f} s, "
                      f"{row['iterations']} iterations, peak {row['peak_rss'] / 2**30:.2f} GiB", flush=True)
        data = {"meta": meta(machine=machine(), seconds=args.seconds, settings=settings,
                             sfapprox=args.sfapprox, root=str(ROOT)), "rows": rows}
    write_results(args.tag, data, render(data, before))
    plot(data, before, OUT / f"{args.tag}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
