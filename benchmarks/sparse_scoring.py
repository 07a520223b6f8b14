"""Exact scoring of a sparse surrogate against a matrix held sparse: the old code against the merge of blocks.

Run by hand (not part of the tests):

    python benchmarks/sparse_scoring.py [--sizes 100000,1000000] [--rounds 2] [--cases sparse,hybrid]

The matrix: a random symmetric graph of order N, about 10 non-zeros a row (5 N random pairs, each
stored both ways, normal values), built with scipy.  The surrogates: ``sparse``, the top-s entries of
X at s = 90 % of its non-zeros (what the ``sparse`` method keeps, as a CSR array; a tenth of X's
entries left out); ``hybrid``, a rank-2 part plus that sparse part (RPCA's form).  Each is scored by
:func:`sfapprox.metrics.sparse_target_error` ("new") and by the code it replaced, kept below as
:func:`old_sparse_target_error` ("old", sfapprox 2d0aa2c); ``hybrid`` also by
:func:`before_sparse_target_error` ("before", sfapprox 3d3f69c: the blocks of ``X`` and ``S`` for
``<X, S>``, but ``<X, L R>`` and ``<S, L R>`` still from ``L`` and ``R`` gathered at every entry).  Each
runs in its own fresh process, the codes alternating (in turn, then the other way round),
``--rounds`` times per size and case: one process untraced (wall seconds of the scoring alone, the
peak RSS of the whole process by ``getrusage`` and its growth during the scoring by Linux's
``VmHWM``, reset before), one under tracemalloc (the peak numpy and Python allocate while scoring,
beyond X and S).  Writes benchmarks/results/sparse_scoring.json and .md (``--render-only``: the .md
again from the .json).
"""

from __future__ import annotations

import argparse
import json
import math
import os

from _common import (OUT, findings_lines, machine, meta, proc_status, reset_peak, run_child, version, write_markdown,
                     write_results)


# --------------------------------------------------------------------------- the code replaced (sfapprox 2d0aa2c)
def _old_summed_coo(S):
    import scipy.sparse as sp

    S = sp.coo_array(S)
    S.sum_duplicates()
    return S


def _old_entries_at(X, rows, cols, gather):
    import numpy as np

    for start in range(0, rows.size, gather):
        part = slice(start, start + gather)
        yield part, np.asarray(X[rows[part], cols[part]]).ravel()


def _old_entry_chunks(X, gather):
    import numpy as np

    ptr, idx, data = X.indptr, X.indices, X.data
    major = ptr.size - 1
    start = 0
    while start < major:
        stop = int(np.searchsorted(ptr, ptr[start] + gather, side="right")) - 1
        stop = min(major, max(stop, start + 1))
        lo, hi = int(ptr[start]), int(ptr[stop])
        outer = np.repeat(np.arange(start, stop), np.diff(ptr[start:stop + 1]))
        inner = idx[lo:hi].astype(np.int64)
        values = np.asarray(data[lo:hi], dtype=np.float64)
        yield (outer, inner, values) if X.format == "csr" else (inner, outer, values)
        start = stop


def _old_sparse_part_error(X, S, gather):
    import numpy as np

    n = X.shape[1]
    S = _old_summed_coo(S)
    flat_s = np.sort(S.row.astype(np.int64) * n + S.col)
    s = S.data.astype(np.float64)
    squared = uncovered = 0.0
    for rows, cols, v in _old_entry_chunks(X, gather):
        flat = rows * n + cols
        at = np.minimum(np.searchsorted(flat_s, flat), max(flat_s.size - 1, 0))
        out = flat_s[at] != flat if flat_s.size else np.ones(flat.size, dtype=bool)
        squared += float(np.dot(v, v))
        uncovered += float(np.dot(v[out], v[out]))
    covered = 0.0
    for part, x in _old_entries_at(X, S.row, S.col, gather):
        d = x - s[part]
        covered += float(np.dot(d, d))
    return math.sqrt(uncovered + covered), math.sqrt(squared)


def _old_low_rank_entries_dot(L, R, rows, cols, values) -> float:
    """``sum_k values[k] (L R)[rows[k], cols[k]]``, gathering the rows of ``L`` and columns of ``R`` a chunk
    of entries at a time (sfapprox up to 3d3f69c)."""
    import numpy as np

    from sfapprox.metrics import _GATHER_NUMBERS

    rank = L.shape[1]
    if rank == 0 or values.size == 0:
        return 0.0
    Rt = np.ascontiguousarray(R.T)
    chunk = max(1, _GATHER_NUMBERS // rank)
    total = 0.0
    for start in range(0, values.size, chunk):
        stop = start + chunk
        entries = np.einsum("kr,kr->k", L[rows[start:stop]], Rt[cols[start:stop]])
        total += float(np.dot(values[start:stop], entries))
    return total


def old_sparse_target_error(X, operator) -> tuple[float, float]:
    """``sparse_target_error``'s ``(||X - A||_F, ||X||_F)`` as sfapprox 2d0aa2c computed them (no round-off
    fallback: both cases here are far from it)."""
    import numpy as np

    from sfapprox.metrics import _GATHER_NUMBERS, _compressed

    _low_rank_entries_dot = _old_low_rank_entries_dot
    L, R, S = operator.factored_parts()
    X = _compressed(X)
    if L.shape[1] == 0:
        return _old_sparse_part_error(X, S, _GATHER_NUMBERS)
    squared = cross = 0.0
    for rows, cols, v in _old_entry_chunks(X, _GATHER_NUMBERS):
        squared += float(np.dot(v, v))
        cross += _low_rank_entries_dot(L, R, rows, cols, v)
    norms = float(np.sum((L.T @ L) * (R @ R.T)))
    S = _old_summed_coo(S)
    s = S.data.astype(np.float64)
    for part, x in _old_entries_at(X, S.row, S.col, _GATHER_NUMBERS):
        cross += float(np.dot(s[part], x))
    norms += 2 * _low_rank_entries_dot(L, R, S.row, S.col, s) + float(np.dot(s, s))
    return math.sqrt(squared - 2 * cross + norms), math.sqrt(squared)


def before_sparse_target_error(X, operator) -> tuple[float, float]:
    """``sparse_target_error``'s ``(||X - A||_F, ||X||_F)`` of a low-rank-plus-sparse surrogate as sfapprox
    3d3f69c computed them: ``<X, S>`` by blocks of rows, as now (``_block_pairs``, whose blocks are now
    bounded in rows too: no difference here), ``<X, L R>`` and ``<S, L R>`` from ``L`` and ``R`` gathered at
    every entry."""
    import numpy as np

    from sfapprox.metrics import _GATHER_NUMBERS, _block_pairs, _compressed, _compressed_like

    L, R, S = operator.factored_parts()
    X = _compressed(X)
    squared = cross = 0.0
    for rows, cols, v in _old_entry_chunks(X, _GATHER_NUMBERS):
        squared += float(np.dot(v, v))
        cross += _old_low_rank_entries_dot(L, R, rows, cols, v)
    norms = float(np.sum((L.T @ L) * (R @ R.T)))
    S = _compressed_like(S, X)
    for _, _, x, s in _block_pairs(X, S):
        cross += float(np.sum((x.multiply(s)).data, dtype=np.float64))
    for rows, cols, s in _old_entry_chunks(S, _GATHER_NUMBERS):
        norms += 2 * _old_low_rank_entries_dot(L, R, rows, cols, s) + float(np.dot(s, s))
    return math.sqrt(squared - 2 * cross + norms), math.sqrt(squared)


#: The codes each case is scored by ("before" differs from "new" in the low-rank part alone).
CODES = {"sparse": ("old", "new"), "hybrid": ("old", "before", "new")}


# --------------------------------------------------------------------------- one measurement, in a fresh process
def _case(n: int, case: str):
    """The graph X (CSR, canonical) and the surrogate of ``case``, the same to the bit for a given ``n``."""
    import numpy as np
    import scipy.sparse as sp

    from sfapprox.operators import HybridOperator, SparseOperator

    rng = np.random.default_rng(0)
    m = 5 * n
    r, c, v = rng.integers(0, n, m), rng.integers(0, n, m), rng.standard_normal(m)
    X = sp.csr_array((np.r_[v, v], (np.r_[r, c], np.r_[c, r])), shape=(n, n))
    X.sum_duplicates()
    s = int(0.9 * X.nnz)
    coo = X.tocoo()
    keep = np.argpartition(-np.abs(coo.data), s)[:s]
    S = sp.csr_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=(n, n))  # as the sparse method builds it
    del coo, keep
    if case == "sparse":
        return X, SparseOperator(S)
    U, V = rng.standard_normal((n, 2)) / math.sqrt(n), rng.standard_normal((2, n)) / math.sqrt(n)
    return X, HybridOperator(n, low_rank=(U, np.array([1.0, 0.5]), V), sparse=S)


def one(n: int, case: str, which: str, trace: bool) -> dict:
    """Score the case once in this (fresh) process by the ``old``, ``before`` or ``new`` code: seconds and error untraced,
    or the tracemalloc peak of the scoring alone."""
    import resource
    import time
    import tracemalloc

    from sfapprox.metrics import sparse_target_error

    X, op = _case(n, case)
    score = {"old": old_sparse_target_error, "before": before_sparse_target_error,
             "new": lambda X, op: sparse_target_error(X, op)[:2]}[which]
    if trace:
        tracemalloc.start()
        score(X, op)
        return {"traced_peak": tracemalloc.get_traced_memory()[1]}
    before = proc_status("VmRSS")
    reset_peak()
    start = time.perf_counter()
    got = score(X, op)
    seconds = time.perf_counter() - start
    err = got[0]
    return {"seconds": seconds, "error": err, "nnz_x": int(X.nnz), "rss_before": before,
            "rss_growth": proc_status("VmHWM") - before,
            "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "load": os.getloadavg()[0]}


def measure(n: int, case: str, rounds: int) -> list[dict]:
    """``rounds`` times the case's codes in turn, every other round the other way round (a fresh process each,
    untraced then traced)."""
    rows = []
    for k in range(rounds):
        for which in CODES[case] if k % 2 == 0 else CODES[case][::-1]:
            row = {"n": n, "case": case, "code": which, "round": k + 1,
                   **run_child("sparse_scoring", "one", [n, case, which, False]),
                   **run_child("sparse_scoring", "one", [n, case, which, True])}
            print(row, flush=True)
            rows.append(row)
    return rows


def _summary(rows: list[dict]) -> list[str]:
    """Per size and case: the medians' ratios old / new and before / new, and the errors' relative differences
    from new's ("-" where a case has no ``before``)."""
    import statistics

    out = ["| N | case | old s (median) | before s (median) | new s (median) | old / new | before / new | "
           "traced peak MB old / before / new | errors' difference from new, relative: old, before |",
           "|" + "---|" * 9]
    for key in dict.fromkeys((r["n"], r["case"]) for r in rows):
        pick = {w: [r for r in rows if (r["n"], r["case"]) == key and r["code"] == w] for w in CODES[key[1]]}
        sec = {w: statistics.median(r["seconds"] for r in pick[w]) for w in pick}
        new_s, new_err = sec["new"], pick["new"][0]["error"]
        cells = {w: ("-",) * 4 for w in ("old", "before")}
        for w in set(pick) - {"new"}:
            cells[w] = (f"{sec[w]:.2f}", f"{sec[w] / new_s:.1f}", f"{max(r['traced_peak'] for r in pick[w]) / 1e6:.1f}",
                        f"{abs(pick[w][0]['error'] - new_err) / new_err:.1e}")
        new_peak = f"{max(r['traced_peak'] for r in pick['new']) / 1e6:.1f}"
        old, before = cells["old"], cells["before"]
        out.append(f"| {key[0]:,} | {key[1]} | {old[0]} | {before[0]} | {new_s:.2f} | {old[1]} | {before[1]} | "
                   f"{old[2]} / {before[2]} / {new_peak} | {old[3]}, {before[3]} |")
    return out


def render(out: dict) -> list[str]:
    """The Markdown of a run's results (``out``: what the JSON holds)."""
    rows = out["rows"]
    mb = 1e6
    lines = ["# Exact scoring of a sparse surrogate against a matrix held sparse: old code and new", "",
             f"Machine: {out['meta']['machine']}", "",
             f"Command: `{out['meta']['command']}` (load average at start {out['meta']['load_average_at_start']}, "
             f"at the end {out['meta']['load_average_at_end']:.2f}; MB = 10^6 bytes)", "",
             "X: a random symmetric graph, about 10 non-zeros a row; S: its top-s entries at s = 90 % of them "
             "(CSR); `hybrid`: rank 2 plus S.  Codes: old (sfapprox 2d0aa2c), before (3d3f69c: hybrid only, "
             "its low-rank terms gathered at every entry), new.  Seconds: the scoring alone; RSS: the whole process (X, S and their "
             "making included) by getrusage, and its growth during the scoring (VmHWM); traced: tracemalloc's "
             "peak while scoring, in a second process.", "",
             "## Summary", "", *_summary(rows), "",
             "## Runs", "",
             "| N | nnz(X) | case | code | round | seconds | error | traced peak MB | RSS growth MB | "
             "max RSS MB | load |", "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['n']:,} | {r['nnz_x']:,} | {r['case']} | {r['code']} | {r['round']} | "
                     f"{r['seconds']:.2f} | {r['error']!r} | {r['traced_peak'] / mb:.1f} | "
                     f"{r['rss_growth'] / mb:.0f} | {r['maxrss'] / mb:.0f} | {r['load']:.2f} |")
    return lines + ["", *findings_lines(out, "(to be written)")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default="sparse,hybrid")
    ap.add_argument("--render-only", action="store_true", help="write the .md again from the .json (findings kept)")
    args = ap.parse_args()
    if args.render_only:
        out = json.loads((OUT / "sparse_scoring.json").read_text())
        write_markdown("sparse_scoring", render(out))
        return
    rows = [row for n in map(int, args.sizes.split(",")) for case in args.cases.split(",")
            for row in measure(n, case, args.rounds)]
    out = {"meta": meta(machine=machine(numpy=version("numpy"), scipy=version("scipy")),
                        load_average_at_end=os.getloadavg()[0]), "rows": rows}
    write_results("sparse_scoring", out, render(out))


if __name__ == "__main__":
    main()
