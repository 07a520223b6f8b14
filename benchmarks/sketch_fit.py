"""SF from column blocks with a sketched first part, against today's fit from columns, at equal seconds (issue 25, goal 2).

Run by hand (not part of the tests):

    python benchmarks/sketch_fit.py --sizes 16384 --seconds 300 --plans columns,rounds:2048

Each plan fits ``scale_fit``'s clustered RBF kernel (``--matrix sources``: ``scale_sources``' cloud; formed
here and read through a column function as a source's would be, or with ``--unformed`` never formed, its
columns computed from the points at each request) for ``--seconds`` on ``--threads`` threads from the
identity start:

- ``columns``: today's fit from column blocks (``_columns.fit_columns_auto``: Adam, then L-BFGS by passes);
- ``rounds:b[:history]``: rounds of sketches (``_sketch.fit_rounds``: each a new sketch of b columns and
  128 held out, L-BFGS on it, keeping ``history`` pairs, until the held-out columns stop improving);
- ``auto:P[:gain[:b]]``: ``fit_columns_auto`` as the model runs it, with ``sketch_max_passes = P`` (rounds
  of sketches of b columns under P passes left, then, where a round gains under ``gain`` of its held-out
  error, L-BFGS by passes for the rest); ``rounds``, ``rounds_seconds``, ``rounds_error``: the rounds' part;
- ``sketch:b:share``: the sketch ``Y = X S`` by one pass (``_sketch.sketch_target``), L-BFGS on
  ``0.5 ||Y - P S||^2`` (``_sketch.fit_sketch``) until ``share`` of the seconds, then L-BFGS by passes
  over the columns (``_columns.fit_columns_lbfgs``) for the rest.

The error is exact, by a pass after the fit (not counted). Peak RSS is the process's (all plans).
Writes benchmarks/results/sketch_fit.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from dataclasses import replace

import numpy as np
from _common import OUT, meta, run_tables, write_results

from sfapprox._threads import AdaptiveThreads
from sfapprox.chord import support_offsets
from sfapprox.sf import _columns, _sketch
from sfapprox.sf._multistart import start_values


#: The table's columns.
KEYS = ["n", "plan", "history", "seconds", "fit_seconds", "rel", "running_error", "rounds", "rounds_seconds",
        "rounds_error", "after_sketch", "sketch_error", "sketch_seconds",
        "sketch_iterations", "sketch_evaluations", "whole_iterations", "whole_passes", "optimizer", "steps", "passes",
        "sketch_columns",
        "peak_rss_gib"]


def _kernel(kind: str, n: int):
    """The kernel source of ``--matrix kind``: ``scale_fit``'s ordered cloud (bandwidth 1), or
    ``scale_sources``' cloud (32 clusters in 16 dimensions, bandwidth 2)."""
    from scale_fit import ordered_cloud
    from scale_sources import BANDWIDTH, cloud

    from sfapprox.sources import KernelMatrix

    return KernelMatrix(ordered_cloud(n), bandwidth=1.0) if kind == "ordered" else \
        KernelMatrix(cloud(n), bandwidth=BANDWIDTH)


def _target(kind: str, n: int, unformed: bool):
    """``(columns, scale)``: ``columns(a, b)`` gives ``X[:, a:b] / scale``, ``scale`` ``||X|| / sqrt(N)``:
    from the formed matrix, or (``unformed``) from the source's columns, never formed, the scale
    estimated from 512 random columns (it only sets the fit's units)."""
    source = _kernel(kind, n)
    if unformed:
        picked = np.sort(np.random.default_rng(5).choice(n, size=min(n, 512), replace=False))
        scale = math.sqrt(float(np.sum(source.columns(picked) ** 2)) / len(picked))
        return (lambda a, b: source.columns(np.arange(a, b)) / scale), scale
    X = source.to_dense()
    scale = float(np.linalg.norm(X)) / math.sqrt(n)
    return (lambda a, b: X[:, a:b] / scale), scale


def exact_error(columns, values: np.ndarray, offsets, width: int) -> float:
    """``||X - P|| / ||X||`` by one pass (float32 kernel)."""
    shape = values.shape
    objective = _columns._pass_objective(columns, offsets, shape, np.float32, width, 256, 4)
    import torch

    loss, _ = objective(torch.from_numpy(values.astype(np.float32).reshape(-1)))
    return math.sqrt(2.0 * loss / objective.norm2)


def run(plan: str, columns, n: int, offsets, shape, seconds: float, threads: int) -> dict:
    """One plan's fit: its exact error and what each part took."""
    start = start_values(["identity"], 0, shape)["identity"]
    width = _columns.COLUMN_WIDTH
    settings = _columns.ColumnSettings()
    row: dict = {"n": n, "plan": plan, "seconds": seconds}
    began = time.perf_counter()
    with AdaptiveThreads(n * n // settings.groups, threads=threads, compiled=True):
        if plan == "columns":
            fit = _columns.fit_columns_auto(columns, start, offsets, settings=settings, width=width, max_iter=10**6,
                                            time_limit=seconds)
            values = fit.values
            row.update(optimizer=fit.optimizer, steps=fit.steps, passes=round(fit.columns / n, 2))
        elif plan.startswith("auto"):
            passes, *rest = (float(v) for v in plan.split(":")[1:])
            chosen = replace(settings, sketch_max_passes=passes, **dict(zip(("sketch_min_gain", "sketch_columns"),
                                                                          (*rest[:1], *(int(v) for v in rest[1:])))))
            kept = {}

            def rounds(*a, **k):
                t0 = time.perf_counter()
                out = kept["fit"] = _sketch.fit_rounds(*a, **k)
                kept["seconds"] = time.perf_counter() - t0
                return out

            fit = _columns.fit_columns_auto(columns, start, offsets, settings=chosen, width=width, max_iter=10**6,
                                            time_limit=seconds, rounds=rounds)
            values = fit.values
            row.update(optimizer=fit.optimizer, steps=fit.steps, passes=round(fit.columns / n, 2),
                       history=chosen.sketch_history, sketch_columns=chosen.sketch_columns)
            if "fit" in kept:
                row.update(rounds=kept["fit"].columns // n, rounds_seconds=round(kept["seconds"], 1),
                           rounds_error=round(kept["fit"].running_error, 4))
        elif plan.startswith("rounds"):
            b, *history = (int(v) for v in plan.split(":")[1:])
            chosen = replace(settings, sketch_columns=b, **({"sketch_history": history[0]} if history else {}))
            fit = _sketch.fit_rounds(columns, start, offsets, settings=chosen, width=width, time_limit=seconds)
            values = fit.values
            row.update(optimizer=fit.optimizer, steps=fit.steps, passes=round(fit.columns / n, 2),
                       running_error=round(fit.running_error, 4), history=chosen.sketch_history)
        else:
            _, b, share = plan.split(":")
            b, share = int(b), float(share)
            Y, S, _ = _sketch.sketch_target(columns, n, b, np.float32, seed=0)
            row["sketch_seconds"] = round(time.perf_counter() - began, 1)
            left = share * seconds - (time.perf_counter() - began)
            one = _sketch.fit_sketch(Y, S, start, offsets, width=width, groups=settings.groups,
                                     time_limit=max(0.0, left))
            values = one.values
            row.update(sketch_iterations=one.iterations, sketch_evaluations=one.evaluations,
                       sketch_error=round(one.sketch_error, 4), fit_sketch_seconds=round(time.perf_counter() - began, 1))
            del Y, S
            mark = time.perf_counter()
            row["after_sketch"] = round(exact_error(columns, values, offsets, width), 4)
            began += time.perf_counter() - mark  # (that pass not counted)
            left = seconds - (time.perf_counter() - began)
            rest = _columns.fit_columns_lbfgs(columns, values, offsets, settings=settings, width=width,
                                              history=settings.history, max_iter=10**6, time_limit=max(0.0, left))
            values = rest.values
            row.update(whole_iterations=rest.steps, whole_passes=round(rest.columns / n, 2))
    row["fit_seconds"] = round(time.perf_counter() - began, 1)
    row["rel"] = round(exact_error(columns, values, offsets, width), 4)
    row["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16384")
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--plans", default="columns,rounds:2048")
    parser.add_argument("--matrix", choices=("ordered", "sources"), default="ordered",
                        help="scale_fit's ordered cloud (bandwidth 1), or scale_sources' 16-dimensional one (bandwidth 2)")
    parser.add_argument("--unformed", action="store_true",
                        help="read the kernel's columns from its points, never formed (N = 65,536: 16 GiB in float32)")
    parser.add_argument("--render-only", action="store_true", help="rewrite the .md from the .json")
    args = parser.parse_args()
    previous = OUT / "sketch_fit.json"  # each command's rows kept beside the earlier commands'
    old = json.loads(previous.read_text()) if previous.exists() else {}
    if args.render_only:
        write_results("sketch_fit", old, render(old))
        return
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        columns, _ = _target(args.matrix, n, args.unformed)
        offsets = tuple(int(d) for d in support_offsets(n))
        shape = (math.ceil(math.log2(n)), n, len(offsets))
        for plan in args.plans.split(","):
            rows.append(run(plan, columns, n, offsets, shape, args.seconds, args.threads))
            print(rows[-1], flush=True)

    data = {"meta": meta(), "runs": {**old.get("runs", {}), meta()["command"]: rows}, "findings": old.get("findings")}
    write_results("sketch_fit", data, render(data))


def render(data: dict) -> list[str]:
    """The results file: a table per command, then the findings."""
    lines = [f"# SF from columns by sketches ({data['meta']['date']})", "",
             f"Machine: {data['meta']['machine']}; load average at start {data['meta']['load_average_at_start']}.",
             "Exact relative errors after the fit (a pass, not counted in its seconds); the clustered RBF kernel of "
             "`scale_fit`; 2 threads.", ""]
    return lines + run_tables(data, KEYS, lambda r: ["" if r.get(k) is None else f"{r[k]:,}" if isinstance(r[k], int)
                                                     else r[k] for k in KEYS])


if __name__ == "__main__":
    main()
