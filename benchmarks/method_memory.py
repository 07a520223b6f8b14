"""Every method in memory: its peak memory in a comparison against the estimate the memory limit is checked against.

Run by hand (not part of the tests):

    python benchmarks/method_memory.py [--sizes 1024,2048,3000] [--methods all] [--seconds 20]
        [--sfapprox PATH --tag method_memory-before]
    python benchmarks/method_memory.py --columns --limit-arrays 0.5 --budget 0.1 --sizes 4096
        --methods rsvd,nystrom,sparse,rpca,monarch --tag method_memory_columns
    python benchmarks/method_memory.py --columns --direct --limit-arrays 0 --budget 0.3 --sizes 4096
        --methods rsvd,nystrom,sparse,rpca,monarch --tag method_memory_direct

``--direct``: each method's estimator is fitted alone through the API, made from
``FitSettings(max_memory=...)`` as a comparison makes it, not inside a comparison (X its source with
``--columns``, else in memory).

``--sparse-input``: X in memory is a scipy CSR matrix, the kernel's largest 1 % of entries (a network-like
sparse matrix that Monarch forms for its projections, and top-s selects from its entries):

    python benchmarks/method_memory.py --direct --sparse-input --limit-arrays 1 --sizes 4096
        --methods monarch,sparse --tag method_memory_sparse_input

``--columns``: X is given as its source (a ``KernelMatrix`` of the same points): the comparison forms it
only where it and its scoring fit the limit, else the methods that work from columns run from its column
blocks; with ``--budget`` above SF's, what they keep grows with it.

"The memory limit is a limit": a comparison that ``--max-memory L`` lets run must not hold more than
``L``.  Each check before work is a call of ``sfapprox._validation.check_memory(need, ...)``; the
smallest limit a run passes is the largest ``need`` it checks.  So each cell runs, in a fresh
interpreter, ``sfapprox.compare(X, methods=[method], time_limit=...)`` with no limit, records every
``need`` checked (a spy on ``check_memory`` in each sfapprox module that imported it), and measures the
peak RSS over the RSS before X was made (Linux ``VmHWM``, reset once X is made, so that X counts once,
as every estimate counts it).  A cell whose peak is over its largest checked need is a limit that
would be overrun.  The libraries are warmed first by the same comparison on a 64 x 64 matrix.

X is the RBF kernel (median-heuristic bandwidth) of a seeded 32-cluster cloud in 16 dimensions:
symmetric, positive semi-definite and non-negative, so that every method applies (Nyström, NMF).
Writes benchmarks/results/<tag>.json and .md (tag default ``method_memory``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _common import ROOT, checkout_env, machine, meta, proc_status, reset_peak, run_child, write_results


def kernel(n: int, seed: int = 0, formed: bool = True):
    """The RBF kernel of ``n`` clustered points (float64, formed by column blocks, no N x N temporary;
    ``formed=False``: the source itself)."""
    import numpy as np

    import sfapprox

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((32, 16)) * 3
    points = centres[rng.integers(0, 32, n)] + rng.standard_normal((n, 16))
    source = sfapprox.KernelMatrix(points, kernel="rbf")
    return source.to_dense() if formed else source



def _spy_checks() -> list:
    """Record every ``check_memory(need, what=...)`` from now on (every sfapprox module's reference to it)."""
    from sfapprox import _validation

    checked: list = []
    original = _validation.check_memory

    def spy(n_bytes, *, what, limit=None, held=0, **more):
        checked.append((int(n_bytes) + int(held), what))  # the need with what a held matrix takes of the limit
        return original(n_bytes, what=what, limit=limit, held=held, **more)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("sfapprox") and getattr(module, "check_memory", None) is original:
            module.check_memory = spy
    return checked


def sparse_kernel(n: int, keep: float = 0.01):
    """The kernel's largest ``keep`` share of entries as a scipy CSR matrix (made by column blocks)."""
    import numpy as np
    import scipy.sparse as sp

    source = kernel(n, formed=False)
    sample = source.columns(np.arange(0, n, max(1, n // 64)))
    threshold = float(np.quantile(sample, 1.0 - keep))
    parts = []
    for J, block in source.blocks(256):
        block[block < threshold] = 0.0
        parts.append(sp.csc_array(block))
    return sp.hstack(parts, format="csr")


def one(n: int, method: str, seconds: float, limit_arrays: float | None = None, columns: bool = False,
        budget: str | None = None, direct: bool = False, sparse_input: bool = False) -> dict:
    """``compare`` of one method at order ``n`` in this process: its peak RSS over the start (X included)
    and the largest memory need it checked; with ``limit_arrays``, under ``max_memory`` = that many
    N x N arrays plus the libraries' and compiled kernels' working sets."""
    import warnings

    import numpy as np

    import sfapprox

    warnings.simplefilter("ignore")
    sfapprox.available_methods()  # every method module imported, so that the spy reaches them all
    sfapprox.compare(kernel(64), methods=[method], time_limit=2)  # the libraries' first working sets
    checked = _spy_checks()
    base = proc_status("VmRSS")
    X = sparse_kernel(n) if sparse_input else kernel(n, formed=not columns)
    checked.clear()  # the kernel's own check, when it formed X
    reset_peak()  # the peak from here on: X's making left out
    limit = None
    if limit_arrays is not None:
        from sfapprox._validation import LIBRARY_WORKING_SET

        try:
            from sfapprox._validation import COMPILED_WORKING_SET
        except ImportError:  # a checkout from before it moved there
            from sfapprox.sf.model import COMPILED_WORKING_SET

        limit = int(limit_arrays * 8 * n * n) + LIBRARY_WORKING_SET + COMPILED_WORKING_SET
    began = time.perf_counter()
    if direct:
        return _direct(X, n, method, seconds, limit, budget, base, checked, began)
    try:
        result = sfapprox.compare(X, methods=[method], time_limit=seconds, max_memory=limit, budget=budget)
    except sfapprox.ResourceError as exc:  # refused before any work: the whole comparison
        return {"n": n, "method": method, "refused": str(exc), "limit_bytes": limit, "array_bytes": 8 * n * n,
                "peak_over_bytes": proc_status("VmHWM") - base}
    elapsed = time.perf_counter() - began
    peak = proc_status("VmHWM") - base
    row = result.results[0]
    need, what = max(checked) if checked else (None, None)
    return {"n": n, "method": method, "seconds": elapsed, "peak_over_bytes": peak, "array_bytes": 8 * n * n,
            "checked_bytes": need, "checked_what": what, "checks": len(checked), "status": row.status,
            "rel_error": row.rel_error,
            # a row fitted from the columns of X in memory says so; a source never formed is columns throughout
            "path": (row.params or {}).get("path", "columns" if result.matrix.get("path") == "columns" else "memory"),
            "limit_bytes": limit,
            "reason": row.reason,
            "sfapprox": str(Path(sfapprox.__file__).parent), "numpy": np.__version__}


def _direct(X, n: int, method: str, seconds: float, limit: int | None, budget: str | None, base: int,
            checked: list, began: float) -> dict:
    """The method's estimator alone (the API, no comparison), made from the settings
    ``FitSettings(max_memory=limit)`` as a comparison makes it: a checkout whose estimator takes no
    ``max_memory`` is given none (its settings pass only what the constructor accepts)."""
    import numpy as np

    import sfapprox
    from sfapprox._base import RunContext, get_method
    from sfapprox.budget import resolve_budget

    value = resolve_budget(budget, n).value
    est = get_method(method).make(n, value, RunContext(sfapprox.FitSettings(device="cpu", time_limit=seconds,
                                                                            max_memory=limit)))
    row = {"n": n, "method": method, "limit_bytes": limit, "array_bytes": 8 * n * n, "direct": True,
           "given_limit": getattr(est, "max_memory", None) is not None,
           "sfapprox": str(Path(sfapprox.__file__).parent), "numpy": np.__version__}
    try:
        est.fit(X)
    except sfapprox.ResourceError as exc:
        return {**row, "refused": str(exc), "peak_over_bytes": proc_status("VmHWM") - base}
    need, what = max(checked) if checked else (None, None)
    return {**row, "seconds": time.perf_counter() - began, "peak_over_bytes": proc_status("VmHWM") - base,
            "checked_bytes": need, "checked_what": what, "checks": len(checked), "status": "ok",
            "rel_error": None, "reason": None,
            "path": "columns" if columns_source(X) or (getattr(est, "params_", None) or {}).get("from") == "columns"
            else "memory"}


def columns_source(X) -> bool:
    from sfapprox.sources import MatrixSource

    return isinstance(X, MatrixSource)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024,2048,3000")
    parser.add_argument("--methods", default="all", help="comma-separated, or all")
    parser.add_argument("--seconds", type=float, default=20.0, help="the comparison's time_limit")
    parser.add_argument("--sfapprox", default=None, help="run this checkout's sfapprox (its PYTHONPATH)")
    parser.add_argument("--limit-arrays", type=float, default=None,
                        help="run under max_memory = this many N x N arrays + the libraries' working sets "
                             "(methods over it fall back to columns or are refused); the table then compares "
                             "the peak with that limit")
    parser.add_argument("--columns", action="store_true", help="X given as a KernelMatrix source")
    parser.add_argument("--budget", default=None, help="the comparison's budget (default: SF's)")
    parser.add_argument("--direct", action="store_true",
                        help="fit each method's estimator alone through the API (made from FitSettings with "
                             "the limit), not in a comparison")
    parser.add_argument("--sparse-input", action="store_true",
                        help="X in memory as a scipy CSR matrix: the kernel's largest 1 %% of entries")
    parser.add_argument("--tag", default="method_memory")
    args = parser.parse_args()
    env = checkout_env(args.sfapprox)
    if args.methods == "all":
        sys.path.insert(0, str(ROOT))
        import sfapprox

        names = list(sfapprox.available_methods())
    else:
        names = args.methods.split(",")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for method in names:
            try:
                r = run_child("method_memory", "one", [n, method, args.seconds, args.limit_arrays, args.columns,
                                                       args.budget, args.direct, args.sparse_input], env=env)
            except RuntimeError as exc:  # a method that fails is a row, not the end of the run
                r = {"n": n, "method": method, "failed": str(exc).splitlines()[-1][:200]}
                print(f"N={n} {method}: failed: {r['failed']}", flush=True)
            else:
                if "refused" in r:
                    print(f"N={n} {method}: refused: {r['refused'][:120]}", flush=True)
                    rows.append(r)
                    continue
                print(f"N={n} {method}: peak {r['peak_over_bytes'] / r['array_bytes']:.2f} arrays, checked "
                      f"{(r['checked_bytes'] or 0) / r['array_bytes']:.2f} ({r['checked_what']}), "
                      f"{r['seconds']:.1f} s, {r['status']}", flush=True)
            rows.append(r)
    lines = render_limited(rows, args) if args.limit_arrays is not None else render(rows, args)
    write_results(args.tag, {**meta(machine=machine()), "rows": rows}, lines)


def render_limited(rows: list[dict], args) -> list[str]:
    """The table of a run under a limit: the peak against the limit, and the path each method took."""
    lines = [f"# Every method under a memory limit: peak against the limit ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine()}. Command: `{meta()['command']}`"
             + (f" (sfapprox from `{args.sfapprox}`)" if args.sfapprox else "") + ". X: the RBF kernel of a "
             f"32-cluster cloud (float64{_given(args)}); "
             + ("each method's estimator fitted alone through the API, made from `FitSettings(max_memory=...)` "
                "(an estimator without a `max_memory` of its own gets none)" if args.direct else "one `compare` per cell")
             + f", {'budget ' + args.budget if args.budget else 'SF' + chr(39) + 's budget'}, "
             f"`max_memory` = {args.limit_arrays:g} "
             "N x N float64 arrays + the libraries' and compiled kernels' working sets (192 MiB); peak RSS over "
             "the RSS before X was made (X included).", "",
             "| N | method | limit, arrays | peak, arrays | peak / limit | path | status | relative error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['n']:,} | {r['method']} | | failed: {r['failed']} | | | | |")
            continue
        a = r["array_bytes"]
        peak, limit = r["peak_over_bytes"] / a, r["limit_bytes"] / a
        flag = " **over**" if peak > limit else ""
        if "refused" in r:
            lines.append(f"| {r['n']:,} | {r['method']} | {limit:.2f} | {peak:.2f} | {peak / limit:.2f}{flag} | "
                         f"refused before any work | | |")
            continue
        rel = "" if r["rel_error"] is None else f"{r['rel_error']:.4g}"
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {(r.get('reason') or '')[:80]}"
        lines.append(f"| {r['n']:,} | {r['method']} | {limit:.2f} | {peak:.2f} | {peak / limit:.2f}{flag} | "
                     f"{r['path']} | {status} | {rel} |")
    return lines


def _given(args) -> str:
    """How X was given (the table's note)."""
    if getattr(args, "sparse_input", False):
        return ", its largest 1 % of entries, given as a scipy CSR matrix in memory"
    if not args.columns:
        return ""
    if args.direct:
        return ", given as its source"
    return ", given as its source: formed by the comparison only where it and its scoring fit the limit, else read by columns"


def render(rows: list[dict], args) -> list[str]:
    lines = [f"# Every method in memory: peak against the checked estimate ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine()}. Command: `{meta()['command']}`"
             + (f" (sfapprox from `{args.sfapprox}`)" if args.sfapprox else "") + ". X: the RBF kernel of a "
             "32-cluster cloud (float64); one `compare` per cell, SF's budget; peak RSS over the RSS before X "
             "was made, in N x N float64 arrays (X is one of them); checked: the largest need any memory "
             "check of the run asked for (the smallest `--max-memory` it passes).", "",
             "| N | method | peak, arrays | checked, arrays | peak / checked | what was checked | seconds | "
             "path | relative error |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r or "refused" in r:  # (refused: by the default limit, the machine's memory)
            why = f"failed: {r['failed']}" if "failed" in r else f"refused before any work: {r['refused'][:120]}"
            lines.append(f"| {r['n']:,} | {r['method']} | {why} | | | | | | |")
            continue
        a = r["array_bytes"]
        peak, need = r["peak_over_bytes"] / a, (r["checked_bytes"] or 0) / a
        ratio = f"{peak / need:.2f}" if need else "no check"
        flag = " **over**" if need and peak > need else ""
        rel = "" if r["rel_error"] is None else f"{r['rel_error']:.4g}"
        lines.append(f"| {r['n']:,} | {r['method']} | {peak:.2f} | {need:.2f} | {ratio}{flag} | "
                     f"{r['checked_what']} | {r['seconds']:.1f} | {r['path']} | {rel} |")
    return lines


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
