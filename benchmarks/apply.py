"""Applying a fitted surrogate: Chord operators against the dense matrix they replace.

Run by hand (not part of the tests):

    python benchmarks/apply.py [--sizes 256,1024,4096,16384,65536] [--repeats 30]

For every support (chord, symmetric, butterfly) and for a hybrid (chord +
rank-8 low-rank + 2N sparse entries), random values, N in --sizes: the
best-of-k time of ``op @ x``, ``op.T @ x``, ``op.rmatvec(x)``, ``op @ B``
(64 columns) and ``op.T @ B`` with each apply backend (numba kernels, the
scipy CSR fallback), and of ``D @ x`` / ``D @ B`` with ``D = op.to_dense()``
where it fits (N <= 4096).  Candidates are timed in interleaved rounds, so
a busy machine slows them alike; the minimum over rounds is kept.  For the
sizes without a dense comparison, the time to stream the values once
through one core (a numba sum over an array of the same size, measured in
the same run) is the memory-bandwidth bound the kernel is compared with.
Also: the first-call compile time of the numba kernels (fresh cache) and
their load time from numba's cache, in subprocesses; and the torch module
(``to_torch``) against ``nn.Linear`` on a batch of 64.

Writes benchmarks/results/apply.json and benchmarks/results/apply.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from _common import OUT, ROOT, machine, meta, version, write_markdown, write_results

COLUMNS = 64


def make_operator(kind: str, n: int, rng):
    """A random operator of a support (values scaled so that products stay O(1))."""
    import scipy.sparse as sp

    from sfapprox.chord import default_n_factors, support_offsets
    from sfapprox.operators import ChordOperator, HybridOperator

    if kind == "butterfly":
        m = n.bit_length() - 1
        return ChordOperator(rng.standard_normal((m, n, 2)) / np.sqrt(2), support="butterfly")
    support = "symmetric" if kind == "symmetric" else "chord"
    offsets = support_offsets(n, support)
    values = rng.standard_normal((default_n_factors(n), n, offsets.size)) / np.sqrt(offsets.size)
    chord = ChordOperator(values, offsets, support=support)
    if kind != "hybrid":
        return chord
    U = np.linalg.qr(rng.standard_normal((n, 8)))[0]
    V = np.linalg.qr(rng.standard_normal((n, 8)))[0]
    rows, cols = rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n)
    S = sp.csr_array((rng.standard_normal(2 * n), (rows, cols)), shape=(n, n))
    return HybridOperator(n, chord=chord, low_rank=(U, np.linspace(1, 8, 8), V.T), sparse=S)


def timed_rounds(candidates: dict, repeats: int, cold: dict | None = None) -> dict:
    """Best-of-``repeats`` seconds per candidate, timed in interleaved rounds.

    Each round calls a candidate twice in a row and keeps the second call
    (a repeated application, as in an iterative solver: what fits in cache
    is there).  The first call's best goes into ``cold`` when given: it
    follows the other candidates, e.g. a dense product that streamed
    ``N^2`` numbers through the caches.
    """
    for f in candidates.values():  # warm-up: compile, build caches
        f()
    best = dict.fromkeys(candidates, float("inf"))
    first = dict.fromkeys(candidates, float("inf"))
    for _ in range(repeats):
        for name, f in candidates.items():
            t0 = time.perf_counter()
            f()
            t1 = time.perf_counter()
            f()
            t2 = time.perf_counter()
            first[name] = min(first[name], t1 - t0)
            best[name] = min(best[name], t2 - t1)
    if cold is not None:
        cold.update(first)
    return best


def stream_seconds(nbytes: int, repeats: int) -> float:
    """Seconds for one core to read ``nbytes`` once (numba sum): the bandwidth bound of a kernel."""
    import numba

    @numba.njit(fastmath=True, boundscheck=False)
    def total(a):
        t = 0.0
        for i in range(a.shape[0]):
            t += a[i]
        return t

    a = np.random.default_rng(0).random(nbytes // 8)
    return timed_rounds({"sum": lambda: total(a)}, repeats)["sum"]


def measure(kind: str, n: int, repeats: int, rng) -> dict:
    from sfapprox.operators import _chord_apply as _apply

    op = make_operator(kind, n, rng)
    x = rng.standard_normal(n)
    B = rng.standard_normal((n, COLUMNS))

    def with_backend(name, f):
        def run():
            _apply.BACKEND = name
            return f()
        return run

    cands = {}
    for be in ("numba", "scipy"):
        cands[f"{be}:x"] = with_backend(be, lambda: op @ x)
        cands[f"{be}:Tx"] = with_backend(be, lambda: op.T @ x)
        cands[f"{be}:rmatvec"] = with_backend(be, lambda: op.rmatvec(x))
    dense = n <= 4096
    if dense:
        D = op.to_dense()
        cands["dense:x"] = lambda: D @ x
        cands["dense:Tx"] = lambda: D.T @ x
    cold = {}
    vec = timed_rounds(cands, repeats, cold)
    # Blocks: fewer rounds at large N (a 65536 x 64 product takes ~0.3 s).
    block_repeats = max(2, min(repeats, int(1e8 // (n * COLUMNS * 20))))
    cands = {}
    for be in ("numba", "scipy"):
        cands[f"{be}:B"] = with_backend(be, lambda: op @ B)
        cands[f"{be}:TB"] = with_backend(be, lambda: op.T @ B)
    if dense:
        cands["dense:B"] = lambda: D @ B
        cands["dense:TB"] = lambda: D.T @ B
    blk = timed_rounds(cands, block_repeats)
    _apply.BACKEND = "auto"
    chord = op.chord if kind == "hybrid" else op
    # Exactness check of what was timed (relative to the largest entry of the result).
    if dense:
        err = max(np.abs(op @ x - D @ x).max() / np.abs(D @ x).max(), np.abs(op @ B - D @ B).max() / np.abs(D @ B).max())
    else:
        err = None
    record = {
        "kind": kind, "n": n, "n_stored": int(op.n_stored), "stored_fraction": op.n_stored / n**2,
        "value_bytes": int(chord.values.nbytes), "seconds": {**vec, **blk}, "block_repeats": block_repeats,
        "cold_seconds": cold,
        "max_rel_error": err,
    }
    if not dense:
        record["stream_seconds"] = stream_seconds(chord.values.nbytes, min(repeats, 10))
    return record


COMPILE_SCRIPT = r"""
import json, time, numpy as np
t0 = time.perf_counter()
from sfapprox.operators import ChordOperator
from sfapprox.operators import _chord_apply as _apply
_apply._numba_kernels()
out = {"import_numba_kernels": time.perf_counter() - t0}
rng = np.random.default_rng(0)
for kind in ("chord", "butterfly"):
    op = ChordOperator(rng.standard_normal((5, 32, 6 if kind == "chord" else 2)), support=kind)
    for name, f in (("vector", lambda: op @ np.ones(32)), ("block", lambda: op @ np.ones((32, 8)))):
        t0 = time.perf_counter(); f(); out[f"{kind}_{name}"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def compile_times() -> dict:
    """First-call seconds per kernel with an empty numba cache, then with the cache filled."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        runs = {}
        for label in ("empty cache (first run)", "filled cache (later runs)"):
            res = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], env=env, capture_output=True, text=True,
                                 check=True)
            runs[label] = json.loads(res.stdout.strip().splitlines()[-1])
    return runs


def torch_times(sizes, repeats: int) -> list[dict]:
    """Forward (and forward + backward) of the torch module against nn.Linear, batch 64, float32."""
    import torch

    rows = []
    rng = np.random.default_rng(1)
    for n in sizes:
        layer = make_operator("chord", n, rng).to_torch()
        dense = torch.nn.Linear(n, n, bias=False)
        x = torch.randn(COLUMNS, n)

        def step(module):
            def run():
                module.zero_grad(set_to_none=True)
                module(x).sum().backward()
            return run

        with torch.no_grad():
            fwd = timed_rounds({"chord": lambda: layer(x), "linear": lambda: dense(x)}, repeats)
        both = timed_rounds({"chord": step(layer), "linear": step(dense)}, max(3, repeats // 3))
        rows.append({"n": n, "forward": fwd, "forward_backward": both, "threads": torch.get_num_threads()})
    return rows


def _us(s: float) -> str:
    return f"{s * 1e6:,.0f} µs" if s < 1e-2 else f"{s * 1e3:,.1f} ms"


def render(meta: dict, rows: list[dict], compile_: dict, torch_rows: list[dict]) -> str:
    lines = [
        f"# Applying a surrogate: Chord operators against the dense product ({meta['date']})", "",
        f"Machine: {meta['machine']}. Command: `{meta['command']}`. "
        f"Best of {meta['repeats']} interleaved rounds (blocks: fewer at large N, see the JSON)"
        + (f", and of {meta['runs']} runs (`--merge`)" if meta.get("runs", 1) > 1 else "")
        + "; random values; "
        f"x one vector, B {COLUMNS} columns; dense = numpy/OpenBLAS `D @ x` with `D = op.to_dense()` "
        "(OpenBLAS may use both cores; the apply kernels use one; best over the supports of one N, whose dense "
        "products cost the same). Each round calls every candidate twice "
        "and keeps the second call (repeated application); *cold*: the first call, right after the other "
        "candidates (for N ≤ 4096 after a dense product that evicted the values from cache).", "",
        "Backends: **numba** (the default; compiled loops over the values stored `(M, K, N)`), **scipy** "
        "(fallback: one CSR matrix per factor). Hybrid: chord + rank 8 + 2N sparse entries.", "",
        "| N | support | stored / N² | A x: numba | cold | scipy | dense | dense / numba | Aᵀx: numba | dense "
        f"| A B ({COLUMNS}): numba | scipy | dense | dense / numba | AᵀB: numba | bandwidth |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    # D @ x costs the same for any values of an N x N matrix: each size's dense time is the best
    # over its supports' dense matrices (four measurements of one cost on a shared machine).
    dense_best = {}
    for r in rows:
        for key, sec in r["seconds"].items():
            if key.startswith("dense:"):
                dense_best[(r["n"], key)] = min(sec, dense_best.get((r["n"], key), float("inf")))
    for r in rows:
        s = {**r["seconds"], **{k: v for (n, k), v in dense_best.items() if n == r["n"]}}
        dense = "dense:x" in s

        def ratio(key):
            return f"{s['dense:' + key] / s['numba:' + key]:.1f}×" if dense else "–"

        def dense_time(key):
            return _us(s["dense:" + key]) if dense else "–"

        bw = "–"
        if "stream_seconds" in r:
            bw = f"{r['stream_seconds'] / s['numba:x'] * 100:.0f} % of 1-core read ({r['value_bytes'] / 1e6:,.0f} MB)"
        cells = [f"{r['n']:,}", r["kind"], f"{r['stored_fraction'] * 100:.2g} %",
                 _us(s["numba:x"]), _us(r["cold_seconds"]["numba:x"]), _us(s["scipy:x"]), dense_time("x"), ratio("x"),
                 _us(s["numba:Tx"]), dense_time("Tx"),
                 _us(s["numba:B"]), _us(s["scipy:B"]), dense_time("B"), ratio("B"),
                 _us(s["numba:TB"]), bw]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "First call of each numba kernel (a fresh process; seconds):", "",
              "| | import kernels | chord vector | chord block | butterfly vector | butterfly block |",
              "|---|---|---|---|---|---|"]
    for label, c in compile_.items():
        lines.append(f"| {label} | {c['import_numba_kernels']:.2f} | {c['chord_vector']:.2f} | "
                     f"{c['chord_block']:.2f} | {c['butterfly_vector']:.2f} | {c['butterfly_block']:.2f} |")
    lines += ["", f"Torch module (`op.to_torch()`, float32, batch {COLUMNS}) against `nn.Linear(N, N, bias=False)`:", "",
              "| N | forward: module | nn.Linear | forward + backward: module | nn.Linear |", "|---|---|---|---|---|"]
    for t in torch_rows:
        f, b = t["forward"], t["forward_backward"]
        lines.append(f"| {t['n']:,} | {_us(f['chord'])} | {_us(f['linear'])} | {_us(b['chord'])} | {_us(b['linear'])} |")
    return "\n".join(lines) + "\n"


def _best(old, new):
    """Per-key minimum of two timing records (nested dicts of seconds)."""
    if isinstance(new, dict):
        return {k: _best(old.get(k), v) if isinstance(old, dict) and k in old else v for k, v in new.items()}
    if isinstance(new, float) and isinstance(old, float):
        return min(old, new)
    return new


def merge(saved: dict, meta: dict, compile_: dict, rows: list, torch_rows: list):
    """This run's timings combined with a saved run's: the best of each (same machine and sizes)."""
    if saved["meta"]["machine"] != meta["machine"]:
        raise SystemExit("--merge: results/apply.json comes from another machine")
    old_rows = {(r["kind"], r["n"]): r for r in saved["rows"]}
    rows = [_best(old_rows.get((r["kind"], r["n"]), {}), r) for r in rows]
    old_torch = {t["n"]: t for t in saved["torch"]}
    torch_rows = [_best(old_torch.get(t["n"], {}), t) for t in torch_rows]
    meta = {**meta, "runs": saved["meta"].get("runs", 1) + 1}
    # Compile times too: the best first call over the runs' fresh processes.
    return meta, _best(saved.get("compile", {}), compile_), rows, torch_rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,1024,4096,16384,65536")
    ap.add_argument("--kinds", default="chord,symmetric,butterfly,hybrid")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--torch-sizes", default="1024,4096")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--merge", action="store_true",
                    help="keep, per timing, the best of this run and the one in results/apply.json "
                         "(best-of-k across runs, for a shared machine)")
    ap.add_argument("--render-only", action="store_true", help="rewrite apply.md from apply.json, measure nothing")
    args = ap.parse_args()
    if args.render_only:
        saved = json.loads((OUT / "apply.json").read_text())
        text = render(saved["meta"], saved["rows"], saved["compile"], saved["torch"])
        write_markdown("apply", text)
        print(text)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rng = np.random.default_rng(0)
    compile_ = compile_times()
    print(json.dumps({"compile": compile_}), flush=True)
    rows = []
    for n in sizes:
        for kind in args.kinds.split(","):
            rec = measure(kind, n, args.repeats, rng)
            rows.append(rec)
            print(json.dumps({k: rec[k] for k in ("kind", "n")} | {k: round(v * 1e6, 1) for k, v in rec["seconds"].items()}),
                  flush=True)
    torch_rows = torch_times([int(s) for s in args.torch_sizes.split(",") if s], args.repeats)
    print(json.dumps(torch_rows), flush=True)
    command = "python benchmarks/apply.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
        if k not in ("no_write", "merge", "render_only") and v != ap.get_default(k))
    info = meta(command, machine=machine(**{p: version(p) for p in ("numpy", "scipy", "numba", "torch")}),
                repeats=args.repeats, runs=1)
    if args.merge and (OUT / "apply.json").exists():
        info, compile_, rows, torch_rows = merge(json.loads((OUT / "apply.json").read_text()), info, compile_, rows,
                                                 torch_rows)
    text = render(info, rows, compile_, torch_rows)
    print(text)
    if not args.no_write:
        write_results("apply", {"meta": info, "compile": compile_, "rows": rows, "torch": torch_rows}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
