"""NMF (HALS) speed on the CPU: a comparison's whole NMF and one half-step's sweeps, this checkout and another.

Run by hand (not part of the tests):

    python benchmarks/nmf_speed.py --before CHECKOUT [--sizes 16 64 256 1024 2048] \\
        [--dtypes float64 float32] [--real FILE ...] [--rounds 1] [--tag nmf_speed] [--render-only]

For each size and dtype, a fresh process of ``CHECKOUT`` (before) and one of this checkout (after), in
turn, each fits ``|N(0, 1)|`` (an ``N x N`` matrix, seed 0):

* float64: ``sfapprox.compare(X, "nmf")`` (the defaults: every start of ``init="auto"``, 1,000
  iterations each at most, the 60 s time limit), its seconds, the kept start, iterations and error;
* float32: ``NMF(budget=<the comparison's budget>, dtype="float32", device="cpu").fit(X)``, the same fit
  in float32 (a comparison fits NMF in float64 on the CPU);
* one half-step's inner sweeps (``nmf._hals_sweeps`` at the comparison's rank and sweep count, random
  factors), milliseconds a call, best of three batches.

Each process first fits an 8 x 8 matrix, so that imports and compiling (or loading) the kernels are not
timed.  Then the first fit's cost with an empty ``NUMBA_CACHE_DIR``: a fresh process fitting 16 x 16 with
a new empty cache folder, and a second process with that folder filled (seconds of the fit alone).

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

from _common import OUT, ROOT, checkout_env, findings_lines, meta, run_child, write_markdown, write_results


def _matrix(n: int):
    import numpy as np

    return np.abs(np.random.default_rng(0).standard_normal((n, n)))


def _sweep_ms(n: int, rank: int, dtype: str) -> tuple[float, int]:
    """Milliseconds of one ``_hals_sweeps`` call at ``n``, ``rank`` (best of three batches) and its sweeps."""
    import numpy as np
    import torch

    from sfapprox.baselines import nmf

    kind = getattr(torch, dtype)
    rng = np.random.default_rng(1)
    W = torch.as_tensor(np.abs(rng.standard_normal((n, rank))), dtype=kind)
    H = torch.as_tensor(np.abs(rng.standard_normal((rank, n))), dtype=kind)
    X = torch.as_tensor(_matrix(n), dtype=kind)
    Ht = H.T.contiguous()
    XG, GG = X @ Ht, H @ Ht
    sweeps = nmf._max_sweeps(n, rank)
    ran = nmf._hals_sweeps(W.clone(), XG, GG, sweeps)
    reps = max(3, min(500, int(3e6 / (n * rank * rank * sweeps) + 1)))
    best = float("inf")
    for _ in range(3):
        copies = [W.clone() for _ in range(reps)]
        start = time.perf_counter()
        for F in copies:
            nmf._hals_sweeps(F, XG, GG, sweeps)
        best = min(best, (time.perf_counter() - start) / reps)
    return best * 1e3, ran


def one(size: int | str, dtype: str) -> dict:
    """One size (or a real matrix's file) and dtype in this process's sfapprox (the child of
    :func:`run_child`): the fit's row."""
    import numpy as np

    import sfapprox
    from sfapprox.baselines.nmf import NMF
    from sfapprox.budget import nmf_rank_for_budget, resolve_budget

    warnings.simplefilter("ignore")
    sfapprox.compare(np.abs(np.random.default_rng(1).standard_normal((8, 8))), "nmf")  # imports, compiles
    X = _matrix(size) if isinstance(size, int) else sfapprox.load_matrix(size).matrix  # (as loaded: sparse)
    n = X.shape[0]
    budget = resolve_budget("sf", n).value
    rank = nmf_rank_for_budget(n, budget)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    if dtype == "float64":
        result = sfapprox.compare(X, "nmf").results[0]
        seconds = time.perf_counter() - start
        params, rel = result.params, float(result.rel_error)
        reason = params.get("stop_reason")
    else:
        est = NMF(budget=budget, dtype=dtype, device="cpu").fit(X)
        seconds = time.perf_counter() - start
        params, reason = est.params_, est.stop_reason_
        rel = float(np.linalg.norm(X - est.to_dense()) / np.linalg.norm(X))
    sweep_ms, sweeps = _sweep_ms(n, rank, dtype)
    name = "|N(0, 1)|" if isinstance(size, int) else Path(size).name
    return {"n": n, "matrix": name, "dtype": dtype, "rank": rank, "seconds": round(seconds, 3), "init": params["init"],
            "iterations": params["iterations"], "stop": reason, "rel_error": rel,
            "errors": params.get("errors"), "sweep_ms": round(sweep_ms, 4), "sweeps": sweeps,
            "load": round(load, 2), "sfapprox": os.path.dirname(os.path.dirname(sfapprox.__file__))}


def first_fit(n: int) -> dict:
    """Seconds of this process's first NMF fit of an ``n x n`` matrix (imports done first, not timed)."""
    import numpy as np
    import torch  # noqa: F401 - imported before the clock starts, as the fit's own imports are not the point

    import sfapprox
    from sfapprox.baselines.nmf import NMF

    warnings.simplefilter("ignore")
    X = _matrix(n)
    start = time.perf_counter()
    NMF(n_components=4, device="cpu", max_iter=20, init="nndsvda").fit(X)
    return {"seconds": round(time.perf_counter() - start, 3), "sfapprox": os.path.dirname(
        os.path.dirname(sfapprox.__file__)), "numpy": np.__version__}


def compile_cost(checkout: str | None) -> dict:
    """The first fit with an empty numba cache and the next process's, with it filled."""
    with tempfile.TemporaryDirectory(prefix="nmf-speed-cache-") as folder:
        env = dict(checkout_env(checkout), NUMBA_CACHE_DIR=folder)
        cold = run_child("nmf_speed", "first_fit", [16], env=env)
        warm = run_child("nmf_speed", "first_fit", [16], env=env)
    return {"cold_s": cold["seconds"], "warm_s": warm["seconds"], "sfapprox": cold["sfapprox"]}


def _cell(text: str) -> str:
    """``text`` as a Markdown table cell (its pipes escaped: the matrix "|N(0, 1)|")."""
    return text.replace("|", "\\|")


def _starts(row: dict) -> int:
    """Starts a fit ran to their end and scored (``errors``: one per start, none where only one ran)."""
    return len(row["errors"]) if row["errors"] else 1


def render(data: dict) -> list[str]:
    """The results file's Markdown."""
    lines = ["# NMF (HALS) speed on the CPU: before / after", "", f"- machine: {data['machine']}",
             f"- date: {data['date']}", f"- command: `{data['command']}`", f"- before: {data['before']}",
             f"- load average at start: {data['load_average_at_start']}", "",
             "Whole fit: float64 is `compare(X, \"nmf\")` (every start of `init=\"auto\"`, 60 s limit); float32 is "
             "`NMF(budget=..., dtype=\"float32\")`.  Sweep: one half-step's inner sweeps (`_hals_sweeps`).", "",
             "| matrix | N | dtype | rank | fit s before | fit s after | ratio | sweep ms before | sweep ms after "
             "| ratio "
             "| starts run b/a | iterations b/a | stop b/a | start kept b/a | rel error before | rel error after "
             "| load b/a |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = data["rows"]
    for before in (r for r in rows if r["checkout"] == "before"):
        after = next(r for r in rows if r["checkout"] == "after" and r["matrix"] == before["matrix"]
                     and r["n"] == before["n"] and r["dtype"] == before["dtype"] and r["round"] == before["round"])
        lines.append(
            f"| {_cell(before['matrix'])} | {before['n']:,} | {before['dtype']} | {before['rank']} | "
            f"{before['seconds']:.2f} | "
            f"{after['seconds']:.2f} | {before['seconds'] / after['seconds']:.1f}x | {before['sweep_ms']:.3f} | "
            f"{after['sweep_ms']:.3f} | {before['sweep_ms'] / after['sweep_ms']:.1f}x | "
            f"{_starts(before)} / {_starts(after)} | {before['iterations']} / {after['iterations']} | "
            f"{before['stop']} / {after['stop']} | "
            f"{before['init']} / {after['init']} | {before['rel_error']:.10g} | {after['rel_error']:.10g} | "
            f"{before['load']} / {after['load']} |")
    lines += ["", "First NMF fit of a process (16 x 16, rank 4, 20 iterations; imports not timed), "
              "an empty `NUMBA_CACHE_DIR` then the same folder filled:", "",
              "| checkout | first process s | second process s |", "|---|---|---|"]
    for label, cost in data["compile"].items():
        lines.append(f"| {label} | {cost['cold_s']:.2f} | {cost['warm_s']:.2f} |")
    return lines + [""] + findings_lines(data, "(to be written)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="checkout of the code before (its sfapprox is measured); required to run")
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024, 2048])
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    ap.add_argument("--real", nargs="*", default=[], metavar="FILE",
                    help="real non-negative matrices fitted too, float64 (e.g. ../shared/realdata/pajek/*.net)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tag", default="nmf_speed")
    ap.add_argument("--render-only", action="store_true", help="rewrite the .md from the .json (findings kept)")
    args = ap.parse_args()
    if args.render_only:
        data = json.loads((OUT / f"{args.tag}.json").read_text(encoding="utf-8"))
        write_markdown(args.tag, render(data))
        return
    if not args.before:
        ap.error("--before CHECKOUT is required (except with --render-only)")
    checkouts = {"before": str(Path(args.before).resolve()), "after": str(ROOT)}
    rows = []
    for round_ in range(1, args.rounds + 1):
        cases = [(n, dtype) for n in args.sizes for dtype in args.dtypes]
        cases += [(str(Path(f).resolve()), "float64") for f in args.real]
        for size, dtype in cases:
            for label, checkout in checkouts.items():
                row = run_child("nmf_speed", "one", [size, dtype], env=checkout_env(checkout))
                row.update(checkout=label, round=round_)
                print(f"round {round_} {row['matrix']} N={row['n']} {dtype} {label}: {row['seconds']:.2f} s, sweep "
                      f"{row['sweep_ms']:.3f} ms, {row['iterations']} it {row['stop']}, rel {row['rel_error']:.6g}",
                      flush=True)
                rows.append(row)
    compile_ = {label: compile_cost(checkout) for label, checkout in checkouts.items()}
    data = meta(before=checkouts["before"], rows=rows, compile=compile_)
    write_results(args.tag, data, render(data))


if __name__ == "__main__":
    main()
