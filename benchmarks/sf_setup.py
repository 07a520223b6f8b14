"""Does SF's row in a comparison of a large sparse graph keep to its time limit, setup included?

Run by hand (not part of the tests); about 5 minutes a round on 2 cores with the defaults:

    python benchmarks/sf_setup.py --sfapprox PATH [--n 100000] [--degree 10] [--limits 20,60]
                                  [--rounds 1] [--name sf_setup] [--case graph|lbfgs|rank1|saved] [--kill S]

The matrix: a seeded random symmetric 0/1 graph of order ``--n`` with about ``--degree`` non-zeros a
row (``scipy.sparse.random`` plus its transpose), written once as a Matrix Market file in a temporary
folder.  At N = 100,000 it is kept sparse (formed it would take 75 GiB): SF fits from column blocks.

Each run is ``sfapprox.compare(path, ["sf"], time_limit=LIMIT)`` in a fresh process (torch's loading
included, as on the command line), this checkout ("after") and ``--sfapprox``'s ("before") alternating,
limit by limit, after each checkout's kernels were compiled into its numba cache (:func:`warm`).  Reported: the row's seconds (its whole turn; the joint scoring from columns is not in
it, and is reported apart), its error, its steps, and the seconds of each phase of SF's setup, timed by
wrapping the functions (the wrappers are the only change to the code measured; a phase a checkout does
not have is left blank): the checks before the factory (``sf_check_first``, loading torch), the
kernels' loading (``_compiled_first``), the structure's timing (``_affordable``), the pilot columns
(``_pilot``), the first block's estimate (``first_block``, after only), the rank-one pass
(``_column_rank_one``) and the fit's steps (``fit_columns``); and the row's measured peak RSS (``VmHWM``,
reset as the row begins: the graph's reading apart).  The machine is shared: the 1-minute load
average is recorded before each run.  Writes benchmarks/results/NAME.json and NAME.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from _common import ROOT, checkout_env, findings_lines, meta, proc_status, reset_peak, run_child, write_results

#: The functions whose seconds are a phase of SF's row: (module, attribute, phase name).
PHASES = [
    ("sfapprox.sf.methods", "sf_check_first", "checks"),
    ("sfapprox.sf.methods", "_compiled_first", "kernels"),
    ("sfapprox.sf.methods", "_affordable", "structure timing"),
    ("sfapprox.sf.model", "_pilot", "pilot"),
    ("sfapprox.sf._columns", "first_block", "first block"),
    ("sfapprox.sf.model", "ChordSF._column_rank_one", "rank-one"),
    ("sfapprox.sf._columns", "fit_columns", "steps"),
    # what the row spent in no phase above (10 s of a 30 s row in sf_setup_guards_rank1.md): the input's
    # checks, the kernels' loading from numba's cache (outside the limit), the identity start's values and
    # the result's assembly (its operator's packing)
    ("sfapprox.sf.model", "ChordSF._validate", "input checks"),
    ("sfapprox.sf.model", "ChordSF._warm_up_columns", "kernels loaded"),
    ("sfapprox.sf.model", "start_values", "start values"),
    ("sfapprox.sf.model", "ChordSF._set_result", "result"),
    # (the values' packing for the result, made apart and before _set_result where a checkout has it: in
    # its "result"; and its cost timed on one factor, kept from the limit)
    ("sfapprox.sf.model", "_assembled", "result"),
    ("sfapprox.sf.model", "_assembly_seconds", "assembly timing"),
]


def graph(n: int, degree: int, folder: str) -> str:
    """A seeded random symmetric 0/1 graph of order ``n``, about ``degree`` non-zeros a row, as a .mtx file."""
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    path = os.path.join(folder, f"graph-{n}.mtx")
    A = sp.random(n, n, density=degree / 2 / n, random_state=np.random.default_rng(0), format="coo")
    A = (A + A.T).tocsr()
    A.data[:] = 1.0
    scipy.io.mmwrite(path, A, symmetry="symmetric")
    return path


def _timed(owner, name: str, phase: str, seconds: dict) -> None:
    """Wrap ``owner.name`` so that its calls add their seconds to ``seconds[phase]`` (nothing where absent)."""
    import functools

    f = getattr(owner, name, None)
    if f is None:
        return

    @functools.wraps(f)
    def timed(*args, **kwargs):
        began = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            seconds[phase] = seconds.get(phase, 0.0) + time.perf_counter() - began

    setattr(owner, name, timed)


def one(path: str, limit: float) -> dict:
    """One comparison of SF alone under ``limit`` seconds, in this process; its row and phases."""
    import importlib
    import warnings

    seconds: dict[str, float] = {}
    for module, attribute, phase in PHASES:
        owner_name, _, name = attribute.rpartition(".")
        module_object = importlib.import_module(module)
        _timed(getattr(module_object, owner_name) if owner_name else module_object, name, phase, seconds)
    import sfapprox

    base = _peak_from_now()
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = sfapprox.compare(path, ["sf"], time_limit=limit)
    total = time.perf_counter() - began
    memory = _peak_since(base)
    r = c.results[0]
    p = r.params or {}
    return {"limit": limit, "row_seconds": round(r.seconds, 2), "fit_seconds": round(p.get("fit_seconds", 0.0), 2),
            "call_seconds": round(total, 2), "rel_error": r.rel_error, "steps": p.get("iterations"),
            "kept_start": bool(p.get("kept_start")), "n_factors": p.get("n_factors"),
            "compile_seconds": p.get("compile_seconds"), "status": r.status, **memory,
            "phases": {k: round(v, 2) for k, v in seconds.items()}}


#: ``--case``: what SF's row is.  "graph": ``compare`` of the graph (above); "lbfgs": ChordSF with L-BFGS by
#: passes (``COLUMN_SETTINGS``, optimizer "lbfgs") on the sparse graph, 14 factors (compare's choice at
#: N = 100,000); "rank1": ChordSF from the rank-one start (its end compared with the start:
#: ``model._better_of``), 17 factors (what it needs); "saved": the same from a saved identity start
#: of 14 factors (written once beside the graph), no rank-one pass before the steps.  Both the API's column path (the graph kept sparse),
#: the fit's call timed (not the file's reading); a child still running after ``--kill`` seconds is killed.
CASES = ("graph", "lbfgs", "rank1", "saved")


def one_case(path: str, limit: float, case: str) -> dict:
    """ChordSF on the graph under ``limit`` seconds for ``case`` ("lbfgs" or "rank1"), in this process."""
    import importlib
    import warnings

    import scipy.io

    seconds: dict[str, float] = {}
    for module, attribute, phase in PHASES + [("sfapprox.sf.model", "_better_of", "comparison"),
                                              ("sfapprox.sf.model", "_compare_start", "comparison"),
                                              ("sfapprox.sf._columns", "fit_columns_lbfgs", "passes")]:
        owner_name, _, name = attribute.rpartition(".")
        module_object = importlib.import_module(module)
        _timed(getattr(module_object, owner_name) if owner_name else module_object, name, phase, seconds)
    from sfapprox import ChordSF
    from sfapprox.sf import _columns, model

    matrix = scipy.io.mmread(path).tocsc()
    if case == "lbfgs":
        model.COLUMN_SETTINGS = _columns.ColumnSettings(optimizer="lbfgs")
    # (the saved start made only for its case: written for every case, it took 25-30 s before each row)
    init = {"rank1": "rank1"}.get(case) or (_saved_identity(path, matrix.shape[0], 14) if case == "saved" else
                                            "identity")
    base = _peak_from_now()
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sf = ChordSF(n_factors=None if case == "rank1" else 14, time_limit=limit, init=init).fit(matrix)
    total = time.perf_counter() - began
    memory = _peak_since(base)
    p = sf.params_
    return {"limit": limit, "case": case, "row_seconds": round(total, 2), "fit_seconds": round(total, 2),
            "rel_error": None, "steps": sf.n_iter_, "kept_start": bool(p.get("kept_start")),
            "optimizer": p.get("optimizer"), "path": p.get("path"), "init": sf.init_,
            "start_compared_blocks": p.get("start_compared_blocks"), "stop_reason": sf.stop_reason_,
            **{k: p[k] for k in ("rank_one_skipped", "optimizer_note") if k in p}, **memory,
            "phases": {k: round(v, 2) for k, v in seconds.items()}}


def _peak_from_now() -> int:
    """The RSS now (bytes), from which the peak is measured again (Linux's ``VmHWM``, reset: the graph's
    reading and the imports before the row do not count)."""
    reset_peak()
    return proc_status("VmRSS")


def _peak_since(base: int) -> dict:
    """The row's measured peak RSS (``VmHWM`` since :func:`_peak_from_now`) and the RSS it began from, in MiB."""
    return {"peak_rss_mib": round(proc_status("VmHWM") / 2**20), "base_rss_mib": round(base / 2**20)}


def _saved_identity(path: str, n: int, n_factors: int) -> str:
    """A factors file beside ``path`` holding the identity start of ``n_factors`` Chord factors (made once)."""
    from sfapprox import save_factors
    from sfapprox.chord import chord_offsets
    from sfapprox.operators import ChordOperator
    from sfapprox.sf._multistart import start_values

    saved = path + f".identity-{n_factors}.h5"
    if not os.path.exists(saved):
        offsets = chord_offsets(n)
        values = start_values(["identity"], 0, (n_factors, n, len(offsets)))["identity"]
        save_factors(saved, ChordOperator(values, offsets))
    return saved


def warm() -> bool:
    """Compile (or load) every kernel SF's row may call, in this checkout's numba cache: a checkout's first
    run would otherwise hold its compiling (said apart as compile_seconds, but in the row's seconds)."""
    import torch

    from sfapprox.sf import _columns, _kernels

    _kernels.warm_up_numba(torch.float32)
    _columns.warm_up(_columns.ColumnSettings(), adam=True, lbfgs=True, sketch=True, float64=True)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfapprox", required=True, help="the checkout measured as 'before'")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--degree", type=int, default=10)
    ap.add_argument("--limits", default="20,60")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--name", default="sf_setup")
    ap.add_argument("--case", default="graph", choices=CASES, help="SF's row: see CASES")
    ap.add_argument("--kill", type=float, default=None, help="kill a run still going after this many seconds")
    args = ap.parse_args()
    limits = [float(x) for x in args.limits.split(",")]
    envs = {"before": checkout_env(args.sfapprox), "after": checkout_env(str(ROOT))}
    rows = []
    for env in envs.values():
        run_child("sf_setup", "warm", [], env=env)
    with tempfile.TemporaryDirectory() as folder:
        path = graph(args.n, args.degree, folder)
        for limit in limits:
            for _ in range(args.rounds):
                for label, env in envs.items():
                    load = os.getloadavg()[0]
                    call = ("one", [path, limit]) if args.case == "graph" else ("one_case", [path, limit, args.case])
                    began = time.perf_counter()
                    result = run_child("sf_setup", *call, env=env, timeout=args.kill)
                    if "killed_after" in result:  # the row still running: its seconds a lower bound
                        result = {"limit": limit, "row_seconds": f">{time.perf_counter() - began:.0f} (killed)",
                                  "fit_seconds": "", "rel_error": None, "steps": "", "kept_start": "", "phases": {}}
                    row = {"checkout": label, "load_average": round(load, 2), **result}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    old = ROOT / "benchmarks" / "results" / f"{args.name}.json"
    findings = json.loads(old.read_text()).get("findings") if old.is_file() else None
    data = {"meta": meta(n=args.n, degree=args.degree, before=args.sfapprox, case=args.case), "rows": rows,
            "findings": findings}
    write_results(args.name, data, render(data))


def render(data: dict) -> list[str]:
    """The results file: one table of rows, a column per phase."""
    phases = list(dict.fromkeys(name for _, _, name in PHASES))  # (a phase of two functions: one column)
    phases += sorted({k for r in data["rows"] for k in r["phases"]} - set(phases))  # a --case's own
    m = data["meta"]
    lines = [f"# SF's row and its setup under a time limit (N = {m['n']:,}, random graph, ~{m['degree']} a row)", "",
             f"{m['machine']}; {m['date']}; load average at start {m['load_average_at_start']}", "",
             f"Command: `{m['command']}`", "",
             ("Row: the row's seconds (its whole turn, the joint scoring from columns apart)"
              if m.get("case", "graph") == "graph" else f"Row (--case {m['case']}): the seconds of ChordSF's fit of "
              "the graph (its reading apart, no scoring)") + "; phases: seconds inside the row (blank: none in "
             "that checkout); peak RSS: the row's measured peak (``VmHWM``, reset as it began), from the RSS it began "
             "at (the graph read, the libraries loaded).", "",
             "| checkout | limit s | load | row s | fit s | rel. error | steps | kept start | peak RSS MiB | "
             + " | ".join(phases) + " |",
             "|" + "---|" * (9 + len(phases))]
    for r in data["rows"]:
        cells = [r["checkout"], f"{r['limit']:g}", r["load_average"], r["row_seconds"], r["fit_seconds"],
                 "" if r["rel_error"] is None else f"{r['rel_error']:.6f}", r["steps"], r["kept_start"],
                 "" if "peak_rss_mib" not in r else f"{r['peak_rss_mib']:,} (from {r['base_rss_mib']:,})"]
        cells += [r["phases"].get(p, "") for p in phases]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines + [""] + findings_lines(data, "(to be written)")


if __name__ == "__main__":
    sys.exit(main())
