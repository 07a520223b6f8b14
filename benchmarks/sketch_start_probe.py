"""Rounds of Gaussian sketches as the start of SF's in-memory fit at N = 4,096? (issue 25, goal 1)

Run by hand (not part of the tests), one fit at a time:

    python benchmarks/sketch_start_probe.py work --matrices cloud,planted --evaluations 200 --plans 1024:60,1024:150
    python benchmarks/sketch_start_probe.py seconds --matrices cloud --seconds 300 --plans 1024:0.15 --repeats 1

``sketch_probe.md`` found L-BFGS on X from the end of one sketch fit 1.3-1.5x ahead of L-BFGS on X
alone at equal work (N = 4,096).  Here the sketches are :func:`sfapprox.sf._sketch.fit_rounds`' rounds
(each a new ``X S``, fitted by L-BFGS until its held-out columns stop improving; the columns come
from the in-memory array, so a round's pass is one product ``X S``), then the in-memory fit's L-BFGS on
the whole X from their end.

* ``work``: counted in whole evaluations, so the machine's load does not decide.  L-BFGS on X (the
  compiled kernel, float32, the fit's options: history 50, the gradient rule's first step) from the
  identity start, for ``--evaluations``; against rounds of sketches of ``b`` columns for at most ``R``
  iterations (plan ``b:R``; a sketched evaluation counts ``(b + held) / N``, a round's pass ``X S``
  its measured seconds over one whole evaluation's), then the same L-BFGS on X for the rest.
* ``seconds``: wall seconds, 2 threads: ``ChordSF(time_limit=T)``'s default fit (its start race
  included) against the rounds for a share ``s`` of ``T`` (plan ``b:s``), then
  ``ChordSF(init=<their end>, time_limit=the rest)``; the two alternate, ``--repeats`` times each.

The matrices are ``scale_fit``'s (``cloud``, ``planted``).  Writes
benchmarks/results/sketch_start_probe.json and .md (``--tag`` for another name).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import torch
from _common import findings_lines, meta, write_results
from scale_fit import matrix

from sfapprox._threads import AdaptiveThreads
from sfapprox.chord import support_offsets
from sfapprox.sf import _kernels
from sfapprox.sf._columns import ColumnSettings
from sfapprox.sf._kernels import CompiledObjective
from sfapprox.sf._multistart import start_values
from sfapprox.sf._sketch import fit_rounds, sketch_shape
from sfapprox.sf._solver import LBFGSOptions, lbfgs, new_state

#: Whole evaluations' work at which the ``work`` table reads the fits.
WORK_MARKS = (25, 50, 100, 150, 200, 250, 300)
#: Seconds at which the ``seconds`` table reads the fits.
SECOND_MARKS = (30, 60, 90, 120, 180, 240, 300)
THREADS = 2
WIDTH = 32


def _problem(kind: str, n: int):
    """The matrix, its support, the fit's scaled float32 target and the identity start (flat, float32)."""
    X = np.asarray(matrix(kind, n), dtype=np.float64)
    offsets = tuple(int(d) for d in support_offsets(n))
    shape = (math.ceil(math.log2(n)), n, len(offsets))
    fro = float(np.linalg.norm(X))
    scale = fro / math.sqrt(n)
    target = _kernels.scaled_target(X, scale, torch.float32)
    x0 = start_values(["identity"], 0, shape)["identity"]
    return X, offsets, shape, scale, target, x0


def _lbfgs_whole(whole, x0: np.ndarray, evaluations: int) -> tuple[list[tuple[int, float]], float]:
    """The fit's L-BFGS on X from ``x0`` for ``evaluations``: (evaluations, best loss) after each iteration, seconds."""
    state = new_state(torch.from_numpy(np.ascontiguousarray(x0, dtype=np.float32).reshape(-1)))
    curve: list[tuple[int, float]] = []
    options = LBFGSOptions(max_iter=10**6, max_evals=evaluations, ftol=0.0, gtol=0.0, history_size=50)
    t0 = time.perf_counter()
    lbfgs(whole, state, options, callback=lambda s: curve.append((int(s["func_evals"]), float(s["best_loss"]))))
    return curve, time.perf_counter() - t0


def _rounds(target: torch.Tensor, x0: np.ndarray, offsets, b: int, *, max_iter: int = 10**6,
            time_limit: float | None = None):
    """:func:`fit_rounds` on the in-memory target (its columns sliced from the array)."""
    dense = target.numpy()
    settings = ColumnSettings(sketch_columns=b)
    seen: list[tuple[float, int, float]] = []
    t0 = time.perf_counter()

    def record(step: int, error: float, columns: int, values: np.ndarray) -> bool:
        seen.append((time.perf_counter() - t0, step, error))
        return False

    fit = fit_rounds(lambda a, c: dense[:, a:c], np.asarray(x0, dtype=np.float64), offsets, settings=settings,
                     width=WIDTH, max_iter=max_iter, time_limit=time_limit, callback=record)
    return fit, seen, time.perf_counter() - t0, settings


def work(kind: str, n: int, evaluations: int, plans: list[tuple[int, int]], say=print) -> dict:
    """The ``work`` rows of one matrix: L-BFGS on X alone, and each plan's rounds then L-BFGS on X."""
    X, offsets, shape, scale, target, x0 = _problem(kind, n)
    norm2 = float(torch.sum(target.double() ** 2))
    whole = CompiledObjective(shape, offsets, target)

    def rel(loss: float | None) -> float | None:
        return None if loss is None else round(math.sqrt(2.0 * max(loss, 0.0) / norm2), 4)

    def at(curve, w):
        losses = [loss for spent, loss in curve if spent <= w]
        return min(losses) if losses else None

    rows = []
    with AdaptiveThreads(float(n) ** 2 * shape[0] * shape[2], threads=THREADS, compiled=True):
        whole(torch.from_numpy(x0.astype(np.float32).reshape(-1)))  # compiled and warm
        t0 = time.perf_counter()
        for _ in range(3):
            whole(torch.from_numpy(x0.astype(np.float32).reshape(-1)))
        eval_seconds = (time.perf_counter() - t0) / 3
        alone, alone_seconds = _lbfgs_whole(whole, x0, evaluations)
        rows.append({"matrix": kind, "n": n, "plan": "L-BFGS on X", "eval_seconds": round(eval_seconds, 3),
                     "seconds": round(alone_seconds, 1),
                     "marks": {str(w): rel(at(alone, w)) for w in WORK_MARKS if w <= evaluations}})
        say(rows[-1])
        for b, max_iter in plans:
            fit, _, seconds, settings = _rounds(target, x0, offsets, b, max_iter=max_iter)
            fitted, held = sketch_shape(n, WIDTH, settings)
            rounds = fit.columns // n
            pass_seconds = _pass_seconds(target, fitted + held)
            spent = fit.evaluations * (fitted + held) / n + rounds * pass_seconds / eval_seconds
            after = rel(whole(torch.from_numpy(fit.values.astype(np.float32).reshape(-1)))[0])
            rest, _ = _lbfgs_whole(whole, fit.values, max(1, int(evaluations - spent)))
            rest = [(spent + e, loss) for e, loss in rest]
            rows.append({"matrix": kind, "n": n, "plan": f"rounds {fitted}+{held} cols, <= {max_iter} it",
                         "rounds": rounds, "round_iterations": fit.steps, "round_evaluations": fit.evaluations,
                         "pass_seconds": round(pass_seconds, 3), "rounds_seconds": round(seconds, 1),
                         "stop": str(fit.stop_reason), "work_of_rounds": round(spent, 1),
                         "holdout_error": round(fit.running_error, 4), "after_rounds": after,
                         "alone_at_that_work": rel(at(alone, spent)),
                         "marks": {str(w): rel(at(rest, w)) for w in WORK_MARKS if w <= evaluations}})
            say(rows[-1])
    return {"rows": rows}


def _pass_seconds(target: torch.Tensor, b: int) -> float:
    """Seconds of one ``X S`` of ``b`` columns, as :func:`._sketch.sketch_target` makes it (the median of 3)."""
    from sfapprox.sf._sketch import sketch_target

    dense = target.numpy()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        sketch_target(lambda a, c: dense[:, a:c], dense.shape[0], b, np.float32, piece=WIDTH)
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def seconds_one(kind: str, n: int, seconds: float, plan: str) -> dict:
    """One timed fit: ``default`` (ChordSF's) or ``b:share`` (rounds for ``share * seconds``, then ChordSF)."""
    import warnings

    import sfapprox

    warnings.simplefilter("ignore")  # the ConvergenceWarning on the time limit is expected
    X, offsets, shape, scale, target, x0 = _problem(kind, n)
    fro = float(np.linalg.norm(X))
    curve: list[tuple[float, float, str]] = []
    load = os.getloadavg()[0]
    shift = [0.0]

    def record(info: dict) -> None:
        curve.append((round(shift[0] + info["elapsed"], 2), info["fro_error"] / fro, "whole"))

    row: dict = {"matrix": kind, "n": n, "plan": plan, "load_average": round(load, 2)}
    _warm_up()
    t0 = time.perf_counter()
    if plan != "default":
        b, share = plan.split(":")
        with AdaptiveThreads(float(n) ** 2 * shape[0] * shape[2], threads=THREADS, compiled=True):
            fit, seen, spent, _ = _rounds(target, x0, offsets, int(b), time_limit=float(share) * seconds)
        curve += [(round(t, 2), e, "held-out") for t, _, e in seen]
        row.update(rounds=fit.columns // n, round_iterations=fit.steps, rounds_seconds=round(spent, 1),
                   stop=str(fit.stop_reason), holdout_error=round(fit.running_error, 4))
        init = fit.values * scale ** (1.0 / shape[0])  # in X's units: the model's own split of the scale
        shift[0] = time.perf_counter() - t0
        sf = sfapprox.ChordSF(time_limit=seconds - shift[0], callback=record, threads=THREADS, init=init, device="cpu")
    else:
        sf = sfapprox.ChordSF(time_limit=seconds, callback=record, threads=THREADS, device="cpu")
    sf.fit(X)
    row.update(wall=round(time.perf_counter() - t0, 1), rel_error=round(float(sf.rel_error_), 4),
               iterations=int(sf.n_iter_), init=sf.init_, curve=curve)
    return row


def _warm_up() -> None:
    """Both fits' compiled kernels loaded (or compiled) before a timed fit, by a small one of each: the
    first fit in a process paid seconds there, inside its curve's clock."""
    import warnings

    import sfapprox

    warnings.simplefilter("ignore")
    small = np.asarray(matrix("cloud", 256), dtype=np.float64)
    sfapprox.ChordSF(max_iter=5, threads=THREADS, device="cpu").fit(small)
    _, offsets, _, _, target, x0 = _problem("cloud", 256)
    with AdaptiveThreads(1e9, threads=THREADS, compiled=True):
        _rounds(target, x0, offsets, 64, max_iter=5)


def _best_at(curve, t: float) -> float | None:
    seen = [e for s, e, kind in curve if s <= t and kind == "whole"]
    return round(min(seen), 4) if seen else None


def _time_to(curve, target: float) -> float | None:
    return next((s for s, e, kind in curve if kind == "whole" and e <= target), None)


def render(data: dict) -> list[str]:
    info = data["meta"]
    lines = [f"# Rounds of sketches as the start of SF's in-memory fit ({info['date']})", "",
             f"Machine: {info['machine']}; load average at start {info['load_average_at_start']}. "
             f"Command: `{info['command']}`.", ""]
    if data["mode"] == "work":
        lines += ["Relative errors on the whole matrix after equal work, counted in whole evaluations (a sketched "
                  "evaluation counts (b + held) / N, a round's pass `X S` its seconds over a whole evaluation's, "
                  "measured in the same process); both from the identity start, 2 threads.", "",
                  "| matrix | N | plan | rounds (iterations, evaluations) | work of the rounds | held-out error at "
                  "their end | whole error at their end | L-BFGS on X alone at that work | "
                  + " | ".join(f"at {w}" for w in WORK_MARKS) + " |", "|" + "---|" * (8 + len(WORK_MARKS))]
        for r in data["rows"]:
            marks = [str(r["marks"].get(str(w), "")) if r["marks"].get(str(w)) is not None else
                     ("–" if str(w) in r["marks"] else "") for w in WORK_MARKS]
            rounds = f"{r['rounds']} ({r['round_iterations']}, {r['round_evaluations']})" if "rounds" in r else ""
            lines.append(f"| {r['matrix']} | {r['n']:,} | {r['plan']} | {rounds} | {r.get('work_of_rounds', '')} | "
                         f"{r.get('holdout_error', '')} | {r.get('after_rounds', '')} | "
                         f"{r.get('alone_at_that_work', '')} | " + " | ".join(marks) + " |")
        lines += ["", "(–: that work is still the rounds'.)  Whole evaluation seconds (2 threads): "
                  + ", ".join(f"{r['matrix']} {r['eval_seconds']} s" for r in data["rows"] if "eval_seconds" in r)
                  + "; a round's pass: " + ", ".join(f"{r['matrix']} {r['pass_seconds']} s" for r in data["rows"]
                                                     if "pass_seconds" in r) + "."]
    else:
        lines += ["Relative errors (the best so far, from the fit's own objective) against wall seconds from the start "
                  "(rounds included; the rounds' own figures are held-out estimates and not in the table), 2 threads; "
                  "the fits alternated, one at a time.", "",
                  "| matrix | N | plan | load average at its start | rounds (iterations, s) | "
                  + " | ".join(f"at {t} s" for t in SECOND_MARKS) + " | final | s to the default's final error |",
                  "|" + "---|" * (7 + len(SECOND_MARKS))]
        finals = {}
        for r in data["rows"]:
            if r["plan"] == "default":
                finals.setdefault(r["matrix"], []).append(min(e for _, e, k in r["curve"] if k == "whole"))
        for r in data["rows"]:
            goal = max(finals.get(r["matrix"], [math.nan]))  # the worse of the defaults' ends
            reach = _time_to(r["curve"], goal)
            rounds = f"{r['rounds']} ({r['round_iterations']}, {r['rounds_seconds']} s)" if "rounds" in r else ""
            lines.append(f"| {r['matrix']} | {r['n']:,} | {r['plan']} | {r['load_average']} | {rounds} | "
                         + " | ".join(str(_best_at(r["curve"], t)) for t in SECOND_MARKS)
                         + f" | {r['rel_error']} | {'never' if reach is None else f'{reach:.0f} s'} |")
    return lines + ["", *findings_lines(data, "(to be written)")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["work", "seconds"])
    parser.add_argument("--matrices", default="cloud")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--evaluations", type=int, default=250, help="work: whole evaluations' work per fit")
    parser.add_argument("--seconds", type=float, default=300.0, help="seconds: each fit's time limit")
    parser.add_argument("--plans", default="1024:60,1024:150,512:150",
                        help="work: b:max-iterations, ...; seconds: b:share, ...")
    parser.add_argument("--repeats", type=int, default=1, help="seconds: each plan's fits, alternated with the default")
    parser.add_argument("--tag", default="sketch_start_probe")
    args = parser.parse_args()
    data = {"meta": meta(), "mode": args.mode, "rows": []}

    def say(row: dict) -> None:
        """Keep ``row`` and write the results so far (a run stopped part-way keeps its finished rows)."""
        data["rows"].append(row)
        print({k: v for k, v in row.items() if k != "curve"}, flush=True)
        write_results(args.tag, data, render(data))

    for kind in args.matrices.split(","):
        if args.mode == "work":
            plans = [tuple(int(v) for v in p.split(":")) for p in args.plans.split(",")]
            work(kind, args.size, args.evaluations, plans, say)
        else:
            for _ in range(args.repeats):
                for plan in ["default", *args.plans.split(",")]:
                    say(seconds_one(kind, args.size, args.seconds, plan))


if __name__ == "__main__":
    main()
