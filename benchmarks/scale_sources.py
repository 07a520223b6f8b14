"""Matrices too big to form: kernel matrices compared from their columns, and how far estimated errors can be trusted.

Run by hand (not part of the tests):

    python benchmarks/scale_sources.py --coverage --sizes 4096,8192 --repeats 100
    python benchmarks/scale_sources.py --coverage --cut --sizes 4096 --repeats 100
    python benchmarks/scale_sources.py --scale --sizes 16384,65536 --time-limit 600 --max-memory 4G
    python benchmarks/scale_sources.py --scale --sizes 8192 --time-limit 120 --max-memory 1G
    python benchmarks/scale_sources.py --scale --sizes 65536 --time-limit 1800 --methods sf,nystrom,rsvd
    python benchmarks/scale_sources.py --real
    python benchmarks/scale_sources.py --scale --sizes 65536 --points patches --time-limit 600 --max-memory 4G
    python benchmarks/scale_sources.py --scale --sizes 8192 --methods nystrom,rsvd,sparse --executor dask --workers 2
    python benchmarks/scale_sources.py --findings FILE   # the hand-written findings; re-renders only

``--coverage``: for the RBF kernel of a clustered point cloud at N = 4,096 and 8,192 (formable), the
exact error of each surrogate (nystrom, rsvd, sparse) against the 95 % intervals
:func:`sfapprox.estimate.estimate_errors` gives from random columns (seed 1..R), with the sampling
stopped by a time limit and by its tolerance, and of the estimator alone on 10,000 random samples of
256 and 1,024 columns: the share of repeats whose interval holds the exact error.

``--coverage --cut``: the same for fits whose one pass their time limit cut (randomized SVD's and sparse's
at 25 % and 50 % of the columns, Nyström at those shares of its pivots), each fitted per seed and
scored with that seed (the scoring's sample drawn from its own stream, ``sfapprox.estimate.scoring_order``),
and, for contrast, the seeded fits given the scoring's stream (their pass then reads the columns the
scoring samples first, as both did before).  The cut falls where a clock that moves only with the columns
read says, so it is the same on any machine (:class:`_PassClock`).

``--scale``: ``sfapprox.compare(KernelMatrix, ["nystrom", "rsvd", "sparse", "rpca"])`` (or ``--methods``;
``sf`` fits from column blocks there) at SF's budget
under ``--max-memory``, each size in a fresh process whose peak resident memory is read with
``resource.getrusage`` at its end; each method's time against its limit, the errors with their
intervals, the scoring time.  The point cloud is a seeded mixture of 32 Gaussian clusters in 16
dimensions (documented synthetic data: no real point set of 65,536 points installs offline here).

``--executor processes|dask --workers W``: the same comparison with its passes (scoring, top-s,
Nyström's columns, randomized SVD's and RPCA's products) on a local pool of W processes or a local Dask
cluster of W single-threaded worker processes (``compare(executor=)``); the row says which, and the
workers' peak resident memory (the largest child's) is shown beside this process's.

``--points patches``: the kernel (RBF, median-heuristic bandwidth) of a real point set of 65,536 points:
the 5 x 5 neighbourhoods of every pixel of the SF paper's 256 x 256 test image
(``../shared/realdata/sf_repo_images/skyscraper.png``), the patch space of non-local means and kernel
image methods; smaller square N take the image's centre crop.

``--real``: the same comparison on the largest real point set at hand offline, scikit-learn's
bundled digits (1,797 images of 8 x 8 pixels), formed and scored exactly.

Writes benchmarks/results/scale_sources.json and scale_sources.md (sections merge across runs; a
scale row is replaced by a run of the same N, points, ``--max-memory`` and methods).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from _common import DEFAULT_DATA_DIR, OUT, findings_lines, machine, meta, run_child, version

from sfapprox._settings import parse_size
from sfapprox import _timing

NAME = "scale_sources"
#: The RBF kernel's bandwidth: within a cluster (spread 0.5 in 16 dimensions, distances about 2.8)
#: entries are moderate, between clusters (centres about 3 apart per coordinate) nearly zero.
BANDWIDTH = 2.0
#: Columns per block of the coverage runs' sampling (small, so that a sample is many blocks).
BLOCK = 128
METHODS = ["nystrom", "rsvd", "sparse", "rpca"]
#: The real image whose pixels' neighbourhoods are the ``--points patches`` point set: the SF paper's
#: own test image (256 x 256, 8-bit grey; from the paper's public code), under the real-data folder.
IMAGE = DEFAULT_DATA_DIR / "sf_repo_images" / "skyscraper.png"
#: Patch side: each pixel's 5 x 5 neighbourhood (reflected at the borders), 25 numbers in [0, 1].
PATCH = 5


def cloud(n: int, dim: int = 16, clusters: int = 32, seed: int = 0) -> np.ndarray:
    """A seeded mixture of Gaussian clusters (the synthetic point set)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)) * 3.0
    labels = rng.integers(0, clusters, n)
    return centres[labels] + 0.5 * rng.standard_normal((n, dim))


def patches(n: int) -> np.ndarray:
    """The ``PATCH x PATCH`` neighbourhoods of the ``sqrt(n) x sqrt(n)`` centre of :data:`IMAGE` (all of it
    at n = 65,536), one point per pixel in row-major order: a real point set of 65,536 points at hand
    offline, the patch space that non-local means and kernel image methods work in."""
    from PIL import Image

    side = int(round(n ** 0.5))
    if side * side != n:
        raise SystemExit(f"--points patches needs a square N (a square crop of the image), got {n}")
    image = np.asarray(Image.open(IMAGE).convert("L"), dtype=np.float64) / 255.0
    if side > min(image.shape):
        raise SystemExit(f"--points patches: the image is {image.shape[0]} x {image.shape[1]}; N = {n} is larger")
    top, left = (image.shape[0] - side) // 2, (image.shape[1] - side) // 2
    half = PATCH // 2
    padded = np.pad(image, half, mode="reflect")[top:top + side + 2 * half, left:left + side + 2 * half]
    windows = np.lib.stride_tricks.sliding_window_view(padded, (PATCH, PATCH))
    return windows.reshape(n, PATCH * PATCH).copy()


# ------------------------------------------------------------------------------------------------ coverage
#: Repeats of the estimator alone on samples of fixed size (cheap: the squared column errors are known),
#: enough that a coverage is known to +-0.2 %.
SAMPLED_REPEATS = 10_000
#: Sample sizes of the estimator-alone check.
SAMPLE_SIZES = (256, 1024)
#: The tolerance of the tolerance-stopped runs (wide enough that they stop before a full pass).
COVERAGE_RTOL = 0.03


def coverage(n: int, repeats: int, time_limit: float) -> dict:
    """How often the 95 % intervals hold the exact error, three ways: the sampling pass stopped by its
    time limit and by its tolerance (``repeats`` runs each), and the estimator alone on
    :data:`SAMPLED_REPEATS` simple random samples of each of :data:`SAMPLE_SIZES` columns."""
    import warnings

    from sfapprox._base import RunContext, get_method
    from sfapprox.budget import sf_count
    from sfapprox.estimate import _skewness, block_errors, estimate_errors
    from sfapprox.sources import KernelMatrix, block_columns

    warnings.simplefilter("ignore")
    K = KernelMatrix(cloud(n), bandwidth=BANDWIDTH)
    budget = sf_count(n)
    fits = {m: get_method(m).make(n, budget, RunContext()).fit(K).operator_ for m in ("nystrom", "rsvd", "sparse")}
    parts = [block_errors(K, fits, J) for J in block_columns(n, 512)]  # every column: the exact errors
    x = np.concatenate([p[0] for p in parts])
    errors = {m: np.concatenate([p[1][m] for p in parts]) for m in fits}
    exact = {m: (float(np.sqrt(e.sum())), float(np.sqrt(e.sum() / x.sum()))) for m, e in errors.items()}
    rows = {m: {"exact_fro": exact[m][0], "exact_rel": exact[m][1], "skewness": _skewness(e)}
            for m, e in errors.items()}
    started = time.perf_counter()
    memory = int(BLOCK * 16 * n / 0.125)  # blocks of BLOCK columns (of X and of one surrogate)
    timed = [estimate_errors(K, fits, time_limit=time_limit, seed=seed, max_memory=memory)
             for seed in range(1, repeats + 1)]
    with _block_clock():  # a "second" per block: sampling is forced, and only the tolerance stops it
        stopped = [estimate_errors(K, fits, time_limit=n / BLOCK - 1, rtol=COVERAGE_RTOL, seed=seed,
                                   max_memory=memory) for seed in range(1, repeats + 1)]
    for m, r in rows.items():
        r["timed"] = _covered([run[m] for run in timed], exact[m])
        r["tolerance"] = _covered([run[m] for run in stopped], exact[m])
        r["sampled"] = {str(size): _sampled_coverage(errors[m], x, size, exact[m]) for size in SAMPLE_SIZES if size < n}
    return {"n": n, "repeats": repeats, "time_limit": time_limit, "rtol": COVERAGE_RTOL,
            "sampled_repeats": SAMPLED_REPEATS, "seconds": time.perf_counter() - started, "methods": rows}


def _covered(estimates: list, exact: tuple[float, float]) -> dict:
    """The share of ``estimates`` whose intervals hold the exact errors, their mean half-width and columns."""
    fro = [e.exact or e.fro_interval[0] <= exact[0] <= e.fro_interval[1] for e in estimates]
    rel = [e.exact or e.rel_interval[0] <= exact[1] <= e.rel_interval[1] for e in estimates]
    return {"coverage": float(np.mean(fro)), "coverage_rel": float(np.mean(rel)),
            "mean_relative_half_width": float(np.mean([(e.half_width() or 0.0) / e.fro_error for e in estimates])),
            "mean_columns": float(np.mean([e.columns for e in estimates]))}


def _sampled_coverage(e: np.ndarray, x: np.ndarray, size: int, exact: tuple[float, float]) -> dict:
    """The estimator alone (the function the pass calls) on :data:`SAMPLED_REPEATS` samples of ``size``."""
    from sfapprox.estimate import _estimate

    rng = np.random.default_rng(size)
    runs = []
    for _ in range(SAMPLED_REPEATS):
        J = rng.choice(e.size, size, replace=False)
        runs.append(_estimate(e[J], x[J], e.size, None))
    return _covered(runs, exact)


class _block_clock:
    """Within it, the sampling pass's clock advances one "second" per reading (one per block): a time
    limit of (blocks - 1) seconds forces sampling and never stops it before the last block."""

    def __enter__(self):
        import types

        import sfapprox.estimate as estimate

        self.module, self.real = estimate, estimate._timing
        ticks = iter(range(10**12))
        estimate._timing = types.SimpleNamespace(now=lambda: float(next(ticks)))

    def __exit__(self, *exc):
        self.module._timing = self.real


# ------------------------------------------------------------------------------------------------ cut passes
#: The shares of a whole pass at which ``--cut``'s fits stop: of the columns read (rsvd's one pass, sparse's
#: top-s pass), of the pivots its budget holds (Nyström, whose columns are its pivots).
CUT_SHARES = (0.25, 0.5)
#: The share of the columns ``--cut``'s time-stopped scoring samples (a quarter: about the existing
#: *timed* column's 913 of 4,096).
CUT_SCORED = 0.25
#: ``--cut``'s time-stopped scoring's tolerance: none met (only its time limit stops it, at a fixed sample).
TIME_ONLY = 1e-9
#: ``--cut``'s methods: each stops its pass at a time limit.
CUT_METHODS = ("rsvd", "nystrom", "sparse")
#: The methods whose fit takes the run's seed: only their fits can be given the scoring's stream (``--cut``'s
#: *same stream* columns; sparse's cut pass took stream SPARSE_ORDER of seed 0 whatever the run's seed when the
#: committed table ran: it takes ``random_state`` since a8ef67f).
SEEDED = ("rsvd", "nystrom")


#: The clock every time-limit decision reads while :func:`cut_coverage` runs: it moves only when
#: :func:`_paced_kernel`'s source reads columns, one "second" per whole pass, so a cut falls where the limit says
#: whatever the machine's load (the tests' fake clock too).
_PassClock = _timing.ManualClock


def _paced_kernel(points: np.ndarray, dense: np.ndarray, clock: _PassClock):
    """The RBF kernel of ``points`` read in blocks of :data:`BLOCK` columns, each read moving ``clock`` by
    its share of a pass; its columns copied from ``dense`` (the same numbers, formed once, not recomputed
    in every repeat)."""
    from sfapprox.sources import KernelMatrix

    class Paced(KernelMatrix):
        def block_width(self, max_memory=None, *, extra_columns=0):
            return BLOCK

        def _columns(self, J):
            clock.advance(J.size / self.n)
            return dense[:, J]

    return Paced(points, bandwidth=BANDWIDTH)


def cut_coverage(n: int, repeats: int) -> dict:
    """How often the 95 % intervals hold the exact error of a fit whose one pass was cut, at each of
    :data:`CUT_SHARES`: per seed 1..``repeats``, each method fitted (that seed) under a time limit that cuts
    it there, scored by ``estimate_errors`` (that seed) forced to sample by a time limit (a quarter of the
    columns) and stopped by its tolerance alone, against the exact error from every column.  *Same stream*:
    the seeded fits again with the seed whose stream is the scoring's sample (``seed + SCORING * 2**32``:
    numpy takes an int's 32-bit words as its entropy, so ``default_rng`` of it is ``default_rng([seed,
    SCORING])``): the fit reads its columns in the order the scoring samples them, as both did before."""
    import warnings

    from sfapprox import _streams
    from sfapprox.budget import sf_count
    from sfapprox.estimate import _skewness, estimate_errors, scoring_order
    from sfapprox.sources import KernelMatrix

    warnings.simplefilter("ignore")
    started = time.perf_counter()
    points = cloud(n)
    dense = KernelMatrix(points, bandwidth=BANDWIDTH).to_dense()
    x = np.einsum("ij,ij->j", dense, dense)
    budget = sf_count(n)
    memory = int(BLOCK * 16 * n / 0.125)
    blocks = n // BLOCK
    scored = CUT_SCORED + 0.5 / blocks  # a limit that ends the sampling pass after a quarter's blocks
    # the same-stream fits' seed: its stream is the scoring's (numpy's SeedSequence takes an int's 32-bit words)
    same_seed = lambda seed: seed + (_streams.SCORING << 32)
    assert np.array_equal(np.random.default_rng(same_seed(7)).permutation(n), scoring_order(n, 7))
    rows = []
    with _PassClock() as clock:
        paced = _paced_kernel(points, dense, clock)
        for share in CUT_SHARES:
            for method in CUT_METHODS:
                for same in (False, True) if method in SEEDED else (False,):
                    runs, fitted, alone = [], None, None
                    for seed in range(1, repeats + 1):
                        if fitted is None or method in SEEDED:  # (sparse takes no seed: one fit for every seed)
                            op, read = _cut_fit(method, paced, n, budget, share, same_seed(seed) if same else seed, clock)
                            e = _column_errors(dense, op)
                            fitted = (op, read, (float(np.sqrt(e.sum())), float(np.sqrt(e.sum() / x.sum()))))
                        op, read, exact = fitted
                        if alone is None:  # the first seed's fit: the estimator alone, on many samples
                            alone = {"skewness": _skewness(e), **{str(size): _sampled_coverage(e, x, size, exact)
                                                                  for size in SAMPLE_SIZES}}
                        clock.time = 0.0
                        timed = estimate_errors(paced, {method: op}, time_limit=scored, rtol=TIME_ONLY, seed=seed,
                                                max_memory=memory)[method]
                        clock.time = 0.0
                        stopped = estimate_errors(paced, {method: op}, time_limit=(blocks - 1) / blocks,
                                                  rtol=COVERAGE_RTOL, seed=seed, max_memory=memory)[method]
                        overlap = float(np.isin(scoring_order(n, seed)[:timed.columns], read).mean())
                        runs.append((timed, stopped, exact, read.size, overlap))
                    rows.append({**_cut_row(method, share, same, runs), "sampled": alone})
                    print(json.dumps(rows[-1]), flush=True)
    return {"n": n, "repeats": repeats, "rtol": COVERAGE_RTOL, "scored": CUT_SCORED,
            "seconds": time.perf_counter() - started, "rows": rows}


def _cut_fit(method: str, source, n: int, budget: int, share: float, seed: int, clock: _PassClock):
    """``method`` fitted (``seed``) to ``source`` under the time limit that cuts it at ``share``; its
    operator and the columns it read (Nyström: its pivots)."""
    from sfapprox import FitSettings, _streams
    from sfapprox._base import RunContext, get_method
    from sfapprox.budget import nystrom_rank_for_budget

    if method == "nystrom":  # its columns are its pivots, read a few at a time: the limit a share of them
        limit = (share * nystrom_rank_for_budget(n, budget) + 0.5) / n
    else:  # half a block past the share: the pass stops after its share's blocks
        limit = share + 0.5 * BLOCK / n
    clock.time = 0.0
    fitted = get_method(method).make(n, budget, RunContext(FitSettings(time_limit=limit, seed=seed))).fit(source)
    if method == "nystrom":
        return fitted.operator_, np.asarray(fitted.pivots_)
    read = fitted.params_.get("columns_read", n)
    stream = seed if method == "rsvd" else [0, _streams.SPARSE_ORDER]  # the pass's order (_streams)
    return fitted.operator_, np.random.default_rng(stream).permutation(n)[:read]


def _column_errors(dense: np.ndarray, op) -> np.ndarray:
    """``op``'s squared error in every column of the formed ``dense`` (in contiguous blocks: views of
    ``dense``, not copies, the residual formed in place)."""
    from sfapprox.metrics import surrogate_columns

    n, parts = dense.shape[0], []
    for j in range(0, n, 512):
        R = surrogate_columns(op, np.arange(j, min(n, j + 512)), n)
        R -= dense[:, j:j + 512]
        parts.append(np.einsum("ij,ij->j", R, R))
    return np.concatenate(parts)


def _cut_row(method: str, share: float, same: bool, runs: list) -> dict:
    """One row of ``--cut``: coverage of the timed and the tolerance-stopped intervals, and what explains it."""
    timed = [r[0] for r in runs]
    exact = [r[2] for r in runs]
    fro = lambda ests: float(np.mean([e.exact or e.fro_interval[0] <= ex[0] <= e.fro_interval[1]
                                      for e, ex in zip(ests, exact)]))
    rel = lambda ests: float(np.mean([e.exact or e.rel_interval[0] <= ex[1] <= e.rel_interval[1]
                                      for e, ex in zip(ests, exact)]))
    out = {"method": method, "share": share, "same_stream": same, "read": float(np.mean([r[3] for r in runs])),
           "exact_rel": float(np.mean([ex[1] for ex in exact])),
           "exact_rel_spread": float(np.std([ex[1] for ex in exact])),
           "overlap": float(np.mean([r[4] for r in runs]))}
    for name, ests in (("timed", timed), ("tolerance", [r[1] for r in runs])):
        out[name] = {"coverage": fro(ests), "coverage_rel": rel(ests),
                     "mean_columns": float(np.mean([e.columns for e in ests])),
                     "bias": float(np.mean([e.rel_error / ex[1] - 1 for e, ex in zip(ests, exact)])),
                     "mean_relative_half_width": float(np.mean([(e.half_width() or 0.0) / e.fro_error for e in ests]))}
    return out


# ------------------------------------------------------------------------------------------------ scale
def _executor(kind: str, workers: int):
    """A context manager giving the executor of ``--executor`` (None: local)."""
    import contextlib
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if kind == "local":
        return contextlib.nullcontext(None)
    if kind == "processes":
        return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    from dask.distributed import Client, LocalCluster

    stack = contextlib.ExitStack()
    cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None))
    client = stack.enter_context(Client(cluster))

    @contextlib.contextmanager
    def held():
        with stack:
            yield client
    return held()


def _one_compare(n: int, time_limit: float, max_memory: str, points: str, methods: list | None = None,
                 executor: str = "local", workers: int = 0) -> dict:
    """Run in a fresh process: the comparison and this process's peak resident memory."""
    import resource
    import warnings

    import sfapprox
    from sfapprox.sources import KernelMatrix

    warnings.simplefilter("ignore")
    started = time.perf_counter()
    if points == "digits":
        from sklearn.datasets import load_digits

        P = load_digits().data.astype(np.float64)
        K = KernelMatrix(P, name="digits")
    elif points == "patches":  # the median heuristic's bandwidth (the default a user gets)
        K = KernelMatrix(patches(n), name=f"patches-{n}")
    else:
        K = KernelMatrix(cloud(n), bandwidth=BANDWIDTH, name=f"cloud-{n}")
    with _executor(executor, workers) as pool:
        c = sfapprox.compare(K, methods or METHODS, executor=pool,
                             settings=sfapprox.FitSettings(time_limit=time_limit, max_memory=parse_size(max_memory)))
    total = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 if executor != "local" else None
    return {"executor": executor, "workers": workers, "workers_peak_rss": workers_peak, "n": K.n, "points": points, "bandwidth": K.bandwidth_, "path": c.matrix.get("path", "formed"),
            "seconds": total, "peak_rss": peak, "time_limit": time_limit, "max_memory": max_memory,
            "methods": methods or METHODS, "budget": c.budget, "notes": c.notes, "verdict": c.verdict()["text"] if c.verdict() else None,
            "rows": [{"method": r.method, "status": r.status, "nnz": r.nnz, "rel_error": r.rel_error,
                      "fro_error": r.fro_error, "estimate": r.error_estimate, "seconds": r.seconds,
                      "time_limit": r.time_limit, "reason": r.reason,
                      "params": {k: v for k, v in r.params.items() if k not in ("grid",)}} for r in c.results]}


def in_process(n: int, time_limit: float, max_memory: str, points: str, methods: list | None = None,
               executor: str = "local", workers: int = 0) -> dict:
    """One comparison in a fresh process (its peak RSS is the comparison's)."""
    return run_child("scale_sources", "_one_compare", [n, time_limit, max_memory, points, methods or METHODS,
                                                       executor, workers])


def _where(run: dict) -> str:
    """The path, and where the passes ran when not here."""
    if run.get("executor", "local") == "local":
        return run["path"]
    return f"{run['path']}, {run['executor']} x {run['workers']}"


def _peaks(run: dict) -> str:
    peak = _gib(run["peak_rss"])
    return peak if not run.get("workers_peak_rss") else f"{peak} (+ workers ≤ {_gib(run['workers_peak_rss'])})"


# ------------------------------------------------------------------------------------------------ report
def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def _coverage_cell(r: dict | None) -> str:
    if r is None:
        return "–"
    return f"{r['coverage']:.3f} / {r['coverage_rel']:.3f} ({r['mean_columns']:.0f})"


def _cut_lines(runs: list) -> list[str]:
    """The ``--coverage --cut`` section."""
    lines = ["## Do the 95 % intervals hold the exact error of a fit whose pass was cut?", "",
             f"The kernel of the section above; each method fitted at SF's budget with its one pass cut by its time "
             f"limit at a share of it (rsvd's one pass and sparse's top-s pass: of the columns, in blocks of {BLOCK}; "
             "Nyström: of the pivots its budget holds), on a clock that moves only with the columns read (a whole "
             "pass one \"second\"), so the cut is the same on any machine. Per seed 1..R the fit takes that seed and "
             "`estimate_errors` the same seed, as `compare` gives both; the exact error from every column. *Timed*: "
             f"the scoring forced to sample by a time limit, {CUT_SCORED:.0%} of the columns (no tolerance). "
             f"*Tolerance*: stopped by `rtol` {COVERAGE_RTOL:g} alone. Each: coverage of ‖X−X̂‖_F / of the relative "
             "error (mean columns), and the relative error's mean bias. *Fit's stream*: `own` as today; `scoring's` "
             "the fit given the seed whose stream is the scoring's sample (`seed + 1000·2³²`: numpy takes an int's "
             "32-bit words as its entropy), so its pass reads columns in the order the scoring samples them, as "
             "before `scoring_order` (sparse's cut pass takes no seed: not reproducible that way). *Sample read*: "
             "the share of the timed sample's columns the fit had read. *Skewness*, *alone m*: of the first seed's "
             f"fit, the skewness of its squared column errors and the estimator alone on {SAMPLED_REPEATS:,} random "
             "samples of m columns (±0.2 %).", "",
             "| N | R | method | cut at | columns read | exact relative error (mean ± sd) | fit's stream | timed | "
             "bias | tolerance | bias | sample read | skewness | "
             + " | ".join(f"alone m = {m}" for m in SAMPLE_SIZES) + " |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(SAMPLE_SIZES)]
    for run in runs:
        for r in run["rows"]:
            cells = []
            for way in ("timed", "tolerance"):
                c = r[way]
                cells += [f"{c['coverage']:.2f} / {c['coverage_rel']:.2f} ({c['mean_columns']:.0f})", f"{c['bias']:+.2%}"]
            lines.append(f"| {run['n']:,} | {run['repeats']} | {r['method']} | {r['share']:.0%} | {r['read']:,.0f} | "
                         f"{r['exact_rel']:.4f} ± {r['exact_rel_spread']:.4f} | "
                         f"{'scoring' + chr(39) + 's' if r['same_stream'] else 'own'} | {' | '.join(cells)} | "
                         f"{r['overlap']:.2f} | {r['sampled']['skewness']:.1f} | "
                         + " | ".join(_coverage_cell(r["sampled"][str(m)]) for m in SAMPLE_SIZES) + " |")
    return lines + [""]


def _commands_text(data: dict) -> list[str]:
    """The commands whose rows the sections hold, each with the machine and date it last ran on where
    recorded (runs before 2026-12-07 recorded none: their findings name their machine)."""
    ran_on = data.get("ran_on", {})
    known = [f"`{c}` ({ran_on[c]})" for c in data.get("commands", []) if c in ran_on]
    unknown = [f"`{c}`" for c in data.get("commands", []) if c not in ran_on]
    lines = [f"Commands: {', '.join(known)}."] if known else []
    if unknown:
        lines.append(f"Earlier commands (machine not recorded; the findings name it, mostly an AMD EPYC of 2 cores): "
                     f"{', '.join(unknown)}.")
    return lines


def render(data: dict) -> list[str]:
    lines = [f"# Matrices too big to form ({data['meta']['date']})", "",
             f"Latest run's machine: {data['meta']['machine']}; load average at start "
             f"{data['meta']['load_average_at_start']}.", "", *_commands_text(data), ""]
    if "coverage" in data:
        lines += ["## Do the 95 % intervals hold the exact error?", "",
                  f"RBF kernel (bandwidth {BANDWIDTH:g}) of a seeded 32-cluster cloud in 16 dimensions; each surrogate fitted at "
                  "SF's budget; the exact errors from a full pass. *Timed*: `estimate_errors` forced to sample by a time "
                  "limit below a full pass, once per seed. *Tolerance*: sampling that only the tolerance "
                  f"(`rtol` {COVERAGE_RTOL:g}, every method's interval) stops, once per seed. *Sampled m*: the estimator "
                  f"alone on {SAMPLED_REPEATS:,} random samples of m columns (±0.2 %). Each cell: coverage of "
                  "‖X−X̂‖_F / of the relative error (mean columns).", "",
                  "| N | method | exact relative error | skewness of the squared column errors | timed | tolerance | "
                  + " | ".join(f"sampled m = {m}" for m in SAMPLE_SIZES) + " |",
                  "|---|---|---|---|---|---|" + "---|" * len(SAMPLE_SIZES)]
        for run in data["coverage"]:
            for m, r in run["methods"].items():
                if "timed" not in r:  # a run of the earlier layout (one timed column)
                    r = {**r, "timed": r, "tolerance": None, "sampled": {}, "skewness": None}
                cells = [_coverage_cell(r["timed"]), _coverage_cell(r["tolerance"]),
                         *[_coverage_cell(r["sampled"].get(str(size))) for size in SAMPLE_SIZES]]
                skew = "–" if r["skewness"] is None else f"{r['skewness']:.1f}"
                lines.append(f"| {run['n']:,} | {m} | {r['exact_rel']:.4g} | {skew} | " + " | ".join(cells) + " |")
        lines.append("")
    if "cut_coverage" in data:
        lines += _cut_lines(data["cut_coverage"])
    if "scale" in data:
        lines += ["## Compared from columns", "",
                  "| N | points | path | peak RSS / --max-memory | whole run s | method | status | stored | relative error | interval | seconds / limit |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for run in data["scale"]:
            for r in run["rows"]:
                est = r["estimate"] or {}
                interval = est.get("rel_interval")
                shown = f"[{interval[0]:.4g}, {interval[1]:.4g}]" if interval else ("exact" if est else "exact (formed)")
                rel = "–" if r["rel_error"] is None else f"{r['rel_error']:.4g}"
                secs = "–" if r["seconds"] is None else f"{r['seconds']:.1f}"
                limit = "–" if r["time_limit"] is None else f"{r['time_limit']:.0f}"
                lines.append(f"| {run['n']:,} | {run['points']} | {_where(run)} | {_peaks(run)} / {run['max_memory']} | "
                             f"{run['seconds']:.0f} | {r['method']} | {r['status']} | {r['nnz'] or '–'} | {rel} | "
                             f"{shown} | {secs} / {limit} |")
            lines += ["", *[f"N = {run['n']:,}: {note}" for note in run["notes"]],
                      f"N = {run['n']:,}: verdict: {run['verdict']}", ""]
    return lines + findings_lines(data, "(none yet)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--coverage", action="store_true")
    ap.add_argument("--cut", action="store_true",
                    help="--coverage: of fits whose one pass was cut by their time limit (at a quarter and half of it)")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--sample-seconds", type=float, default=0.3,
                    help="--coverage: the sampling pass's time limit (below a full pass: it samples)")
    ap.add_argument("--max-memory", default="4G")
    ap.add_argument("--methods", default=",".join(METHODS), help="--scale, --real: the methods compared")
    ap.add_argument("--points", choices=("cloud", "patches"), default="cloud",
                    help="--scale: the synthetic cluster cloud, or the 5 x 5 patches of the paper's 256 x 256 image "
                    "(real; N a square up to 65,536)")
    ap.add_argument("--executor", choices=("local", "processes", "dask"), default="local",
                    help="--scale: where the comparison's passes run")
    ap.add_argument("--workers", type=int, default=2, help="--executor: worker processes")
    ap.add_argument("--findings", metavar="FILE", help="text for the report's hand-written findings section "
                    "(with no other option: only re-render the report)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    path = OUT / f"{NAME}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    if args.coverage or args.scale or args.real:  # only a run changes the machine line and the commands
        command = "python benchmarks/scale_sources.py " + " ".join(sys.argv[1:])
        data["meta"] = meta(command, machine_line=machine(numpy=np.__version__, scipy=version("scipy")))
        data["meta"]["machine"] = data["meta"].pop("machine_line", data["meta"].get("machine"))
        data.setdefault("commands", [])
        if command not in data["commands"]:
            data["commands"].append(command)
        # each command beside the machine it last ran on: sections merge across runs, and the one machine
        # line (the latest run's) read as every section's
        data.setdefault("ran_on", {})[command] = f"{data['meta']['machine']}, {data['meta']['date']}"
    if args.coverage and args.cut:  # its own section, a size's run replacing that size's
        runs = [r for r in data.get("cut_coverage", []) if r["n"] not in sizes]
        data["cut_coverage"] = sorted(runs + [cut_coverage(n, args.repeats) for n in sizes], key=lambda r: r["n"])
    elif args.coverage:
        data["coverage"] = [coverage(n, args.repeats, args.sample_seconds) for n in sizes]
        print(json.dumps(data["coverage"], indent=1), flush=True)
    if args.scale or args.real:
        workers = args.workers if args.executor != "local" else 0
        runs = [r for r in data.get("scale", []) if not (args.real and r["points"] == "digits")
                and not (args.scale and r["n"] in sizes and r["points"] == args.points
                         and r["max_memory"] == args.max_memory and r.get("methods", METHODS) == methods
                         and r.get("executor", "local") == args.executor and r.get("workers", 0) == workers)]
        if args.real:
            runs.append(in_process(0, args.time_limit, args.max_memory, "digits", methods))
        if args.scale:
            for n in sizes:
                runs.append(in_process(n, args.time_limit, args.max_memory, args.points, methods, args.executor, workers))
                print(json.dumps(runs[-1], indent=1), flush=True)
        data["scale"] = sorted(runs, key=lambda r: (r["n"], r["points"], parse_size(r["max_memory"]),
                                                    len(r.get("methods", METHODS)), r.get("executor", "local")))
    if args.findings:
        data["findings"] = Path(args.findings).read_text().strip()
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    (OUT / f"{NAME}.md").write_text("\n".join(render(data)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
