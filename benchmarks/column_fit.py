"""SF fitted from column blocks (issue 25, goal 3): measured peak memory against the estimate, and seconds per pass.

Run by hand (not part of the tests); about 3 minutes on 2 cores:

    python benchmarks/column_fit.py [--sizes 8192,16384,32768,65536] [--steps 8] [--max-memory 4G]

For each N, in a fresh process: the RBF kernel (bandwidth 2) of ``scale_sources``' seeded 32-cluster
cloud in 16 dimensions as a :class:`~sfapprox.sources.KernelMatrix` (never formed); the
process's resident memory after the points are made (VmRSS) is the baseline; then
``ChordSF(max_iter=--steps, time_limit=None, max_memory=--max-memory).fit(K)``, whose in-memory
fit is over the limit at these sizes, so it runs from column blocks.  Reported: the peak resident
memory (``resource.getrusage``) less the baseline against the estimate the fit checked
(:func:`sfapprox.sf._columns.column_fit_memory` plus the libraries' working sets), what the
in-memory fit would need (:func:`sfapprox.sf.model.estimate_fit_memory`), the seconds of a
step after the first (median) and of a pass over all N columns.

``--versus N --seconds S``: at a formable N, the same kernel fitted for S seconds by the in-memory
L-BFGS (identity start, as the column path starts) and from column blocks (forced by a memory
limit between the two estimates), both scored exactly: what the column path's passes buy.

``--versus`` runs three fits: in memory, from column blocks as the defaults choose (``optimizer="auto"``:
Adam's first steps, then L-BFGS by passes where the time left allows ``LBFGS_MIN_PASSES`` passes), and
from column blocks with Adam alone.

``--lbfgs-memory N --seconds S``: the memory of one such fit under a time limit long enough for the
hand-over to L-BFGS by passes (its history counted in the estimate).

``--rounds-memory N,... --seconds S``: the same for a fit whose time leaves few passes, so that it hands
over to rounds of sketches (``_sketch.rounds_memory``, the estimate it checked).

``--passes N --counts 3,6,12,24``: the two column optimizers given the same number of passes over the
columns (Adam: that many epochs of 256-column steps; L-BFGS: iterations until that many evaluations),
each scored exactly: where L-BFGS by passes starts to pay (``_columns.LBFGS_MIN_PASSES``).

Writes benchmarks/results/column_fit.json and column_fit.md (a run of one mode keeps the others' rows).
"""

from __future__ import annotations

import argparse
import json
import math
import time

from _common import OUT, command_line, machine, meta, proc_status, run_child, write_results

NAME = "column_fit"


def one(n: int, steps: int, max_memory: str, seconds: float | None = None, rounds: bool = False) -> dict:
    """One fit from columns in this (fresh) process: memory and step times (``seconds``: a fit under that
    time limit instead of ``steps`` steps, so that it hands over to L-BFGS by passes; ``rounds``: to rounds
    of sketches, which the defaults do not choose yet)."""
    import resource

    import numpy as np
    from scale_sources import BANDWIDTH, cloud

    from sfapprox import ChordSF
    from sfapprox._settings import parse_size
    from sfapprox.sf._columns import column_fit_memory
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET, estimate_fit_memory
    from sfapprox.sources import KernelMatrix

    if rounds:
        from sfapprox.sf import model
        from sfapprox.sf._columns import ColumnSettings

        model.COLUMN_SETTINGS = ColumnSettings(sketch_max_passes=1e9)
    K = KernelMatrix(cloud(n), bandwidth=BANDWIDTH)
    base = proc_status("VmRSS")
    stamps = [time.perf_counter()]
    sf = ChordSF(max_iter=steps if seconds is None else 10**6, time_limit=seconds, max_memory=parse_size(max_memory),
                 device="cpu", callback=lambda info: stamps.append(time.perf_counter()))
    sf.fit(K)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    m, k = sf.factors_.shape[0], sf.factors_.shape[2]
    width, batch = sf.params_["block_width"], sf.params_["batch"]
    if "sketch" in (sf.params_.get("optimizer") or ""):  # rounds of sketches: their own estimate, as the fit's check
        from dataclasses import replace

        from sfapprox.sf._columns import ColumnSettings
        from sfapprox.sf._sketch import rounds_memory

        settings = replace(ColumnSettings(), sketch_columns=sf.params_["sketch_columns"])
        estimate = rounds_memory(n, m, k, width, settings)
    else:
        estimate = column_fit_memory(n, m, k, width, history=sf.params_.get("history"))
    estimate += LIBRARY_WORKING_SET + COMPILED_WORKING_SET
    step = float(np.median(np.diff(stamps)[1:]))  # the first includes the scale's pilot columns
    return {"n": n, "n_factors": m, "n_offsets": k, "stored": int(sf.n_stored_), "path": sf.params_["path"],
            "block_width": width, "batch": batch, "steps": sf.n_iter_, "rss_before": base, "peak_rss": peak,
            "allocated": peak - base, "estimate": estimate,
            "in_memory_estimate": estimate_fit_memory(n, m, k, 8, 50, "cpu", reach=n // 2, n_starts=2,
                                                      input_bytes=8 * n * n),
            "step_seconds": step, "pass_seconds": step * math.ceil(n / batch), "threads": sf.threads_,
            "optimizer": sf.params_.get("optimizer"), "epochs": sf.params_.get("epochs"),
            "sketch_columns": sf.params_.get("sketch_columns"), "max_memory": max_memory}


def versus(n: int, seconds: float) -> dict:
    """In-memory L-BFGS against the column path on the same formed kernel, ``seconds`` each."""
    import warnings

    import numpy as np
    from scale_sources import BANDWIDTH, cloud

    from sfapprox import ChordSF
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET
    from sfapprox.sf._columns import COLUMN_WIDTH, ColumnSettings, column_fit_memory
    from sfapprox.sources import KernelMatrix

    warnings.simplefilter("ignore")
    X = KernelMatrix(cloud(n), bandwidth=BANDWIDTH).to_dense()
    m = math.ceil(math.log2(n))
    limit = column_fit_memory(n, m, m + 1, COLUMN_WIDTH, history=ColumnSettings().history) + LIBRARY_WORKING_SET \
        + COMPILED_WORKING_SET + (64 << 20)
    from sfapprox.sf import model
    from sfapprox.sf._columns import ColumnSettings

    rows = []
    runs = (("L-BFGS in memory", {"init": "identity"}, None),
            ("from column blocks (defaults: Adam, then L-BFGS by passes)", {"max_memory": limit}, ColumnSettings()),
            ("from column blocks, Adam (256-column steps)", {"max_memory": limit}, ColumnSettings(optimizer="adam")))
    for label, params, settings in runs:
        model.COLUMN_SETTINGS = settings
        sf = ChordSF(time_limit=seconds, device="cpu", **params).fit(X)
        rows.append({"run": label, "rel_error": float(sf.rel_error_), "iterations": int(sf.n_iter_),
                     "passes": sf.params_.get("epochs", sf.n_evals_), "path": sf.params_.get("path", "in memory"),
                     "seconds": sf.seconds_})
    return {"n": n, "seconds": seconds, "rows": rows}


def passes(n: int, counts: list[int]) -> dict:
    """Adam and L-BFGS by passes, each given ``count`` passes over the columns of the formed kernel."""
    import warnings

    import numpy as np
    from scale_sources import BANDWIDTH, cloud

    from sfapprox.chord import chord_offsets, default_n_factors
    from sfapprox.operators import ChordOperator
    from sfapprox.sf import _columns as C
    from sfapprox.sf._multistart import start_values
    from sfapprox.sources import KernelMatrix
    from sfapprox._threads import AdaptiveThreads

    warnings.simplefilter("ignore")
    X = KernelMatrix(cloud(n), bandwidth=BANDWIDTH).to_dense()
    fro = float(np.linalg.norm(X))
    scale = fro / math.sqrt(n)  # the fit's units, as ChordSF's
    offs, m = chord_offsets(n), default_n_factors(n)
    start = start_values(["identity"], 0, (m, n, len(offs)))["identity"]

    def exact(values) -> float:
        return float(np.linalg.norm(X - ChordOperator(values * scale ** (1 / m), offs).to_dense()) / fro)

    rows = []
    with AdaptiveThreads(n * n // C.NUMBA_GROUPS, compiled=True):
        for count in counts:
            t = time.perf_counter()
            evals = [0]

            def enough(step, running, columns, values):
                evals[0] = columns // n
                return evals[0] >= count  # checked after each iteration: the line search may pass it

            lbfgs = C.fit_columns_lbfgs(lambda a, b: X[:, a:b] / scale, start, offs, max_iter=10**6,
                                        history=C.ColumnSettings().history, callback=enough)
            lbfgs_s = time.perf_counter() - t
            t = time.perf_counter()
            adam = C.fit_columns(lambda a, b: X[:, a:b] / scale, start, offs, max_iter=count * math.ceil(n / 256))
            adam_s = time.perf_counter() - t
            rows.append({"passes": count, "lbfgs_error": exact(lbfgs.values), "lbfgs_passes": lbfgs.columns / n,
                         "lbfgs_iterations": lbfgs.steps, "lbfgs_seconds": lbfgs_s, "adam_error": exact(adam.values),
                         "adam_passes": adam.columns / n, "adam_seconds": adam_s})
            print(rows[-1], flush=True)
    return {"n": n, "rows": rows}


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def render(data: dict) -> list[str]:
    info = data["meta"]
    lines = [f"# SF from column blocks: memory and seconds per pass ({info['date']})", "",
             f"Command: `{info['command']}`", "",
             f"Machine: {info['machine']}; load average at start {info['load_average_at_start']}.", "",
             "| N | M × K | stored | in-memory fit would need | estimate (checked) | allocated (peak − before) | "
             "peak RSS | allocated / estimate | block width | s per step (256 columns) | s per pass over N columns | threads |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['n']:,} | {r['n_factors']} × {r['n_offsets']} | {r['stored']:,} | "
                     f"{_gib(r['in_memory_estimate'])} | {_gib(r['estimate'])} | {_gib(r['allocated'])} | "
                     f"{_gib(r['peak_rss'])} | {r['allocated'] / r['estimate']:.2f} | {r['block_width']} | "
                     f"{r['step_seconds']:.3f} | {r['pass_seconds']:.0f} | {r['threads']} |")
    lines += ["", "Goal (issue 25, goal 3): the fit's own state O(N K M) plus O(N b) workspace, and measured "
              "peak ≤ estimate at N = 8,192 … 65,536."]
    if data.get("versus"):
        v = data["versus"]
        lines += ["", f"## What the passes buy: N = {v['n']:,}, {v['seconds']:g} s each (`{v['command']}`)", "",
                  "| run | relative error (exact) | iterations / steps | passes over the columns | seconds |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['run']} | {r['rel_error']:.4f} | {r['iterations']} | {r['passes']} | {r['seconds']:.1f} |"
                  for r in v["rows"]]
    for key, what in (("lbfgs_memory", "L-BFGS by passes"), ("rounds_memory", "rounds of sketches")):
        if not data.get(key):
            continue
        rows = data[key] if isinstance(data[key], list) else [data[key]]
        lines += ["", f"## Memory when the fit hands over to {what}", "",
                  "| N | optimizer | passes | sketch columns | estimate (checked) | allocated (peak − before) | peak RSS | "
                  "allocated / estimate | command |", "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['n']:,} | {r['optimizer']} | {r['epochs']} | {r.get('sketch_columns') or '–'} | "
                  f"{_gib(r['estimate'])} | {_gib(r['allocated'])} | {_gib(r['peak_rss'])} | "
                  f"{r['allocated'] / r['estimate']:.2f} | `{r['command']}` |" for r in rows]
    if data.get("passes"):
        p = data["passes"]
        lines += ["", f"## The column optimizers at equal passes: N = {p['n']:,} (`{p['command']}`)", "",
                  "| passes asked | L-BFGS: relative error (exact) | passes made | iterations | seconds | "
                  "Adam: relative error (exact) | passes made | seconds |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['passes']} | {r['lbfgs_error']:.4f} | {r['lbfgs_passes']:.0f} | {r['lbfgs_iterations']} | "
                  f"{r['lbfgs_seconds']:.0f} | {r['adam_error']:.4f} | {r['adam_passes']:.1f} | {r['adam_seconds']:.0f} |"
                  for r in p["rows"]]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8192,16384,32768,65536")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--max-memory", default="4G")
    ap.add_argument("--versus", type=int, default=None, metavar="N", help="only the L-BFGS / column path comparison")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--passes", type=int, default=None, metavar="N", help="only the two column optimizers at equal passes")
    ap.add_argument("--lbfgs-memory", type=int, default=None, metavar="N",
                    help="only the memory of one fit of --seconds that hands over to L-BFGS by passes")
    ap.add_argument("--rounds-memory", default=None, metavar="N,...",
                    help="only the memory of one fit of --seconds at each N that hands over to rounds of sketches")
    ap.add_argument("--counts", default="3,6,12,24", help="--passes: the numbers of passes")
    args = ap.parse_args()
    path = OUT / f"{NAME}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    if args.versus:
        data["versus"] = {**run_child(NAME, "versus", [args.versus, args.seconds]), "command": command_line()}
        print(json.dumps(data["versus"], indent=1), flush=True)
    elif args.lbfgs_memory:
        data["lbfgs_memory"] = {**run_child(NAME, "one", [args.lbfgs_memory, 0, args.max_memory, args.seconds]),
                                "command": command_line()}
        print(json.dumps(data["lbfgs_memory"], indent=1), flush=True)
    elif args.rounds_memory:
        data["rounds_memory"] = [{**run_child(NAME, "one", [int(n), 0, args.max_memory, args.seconds, True]),
                                  "command": command_line()} for n in args.rounds_memory.split(",")]
        print(json.dumps(data["rounds_memory"], indent=1), flush=True)
    elif args.passes:
        counts = [int(c) for c in args.counts.split(",")]
        data["passes"] = {**run_child(NAME, "passes", [args.passes, counts]), "command": command_line()}
    else:
        rows = []
        for n in [int(s) for s in args.sizes.split(",") if s]:
            rows.append(run_child(NAME, "one", [n, args.steps, args.max_memory]))
            r = rows[-1]
            print(f"N={n}: allocated {_gib(r['allocated'])} of estimate {_gib(r['estimate'])}; "
                  f"{r['step_seconds']:.3f} s per step, {r['pass_seconds']:.0f} s per pass", flush=True)
        data.update(meta=meta(machine=machine(), steps=args.steps, max_memory=args.max_memory), rows=rows)
    write_results(NAME, data, render(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
