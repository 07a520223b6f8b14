"""A strict user's script: the public API as README.md and the docstrings use it, fully annotated.

Data for tests/test_typing.py: ``mypy --strict`` checks it (it is never run).  A user who types their own
code with ``--strict`` sees an error wherever sfapprox's hints are missing (a call to an unannotated
function, an ``Any`` returned where they declared a type) or wrong, so every error here is one in
sfapprox's hints, not in this script.  Each function covers one part of the API: loading and comparing,
the results' fields, fitting and saving, applying and exporting a fit, sources never formed, sweeps, batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse
import scipy.sparse.linalg
import torch

import sfapprox
from sfapprox.describe import MatrixDescription, describe
from sfapprox.estimate import ErrorEstimate
from sfapprox.factors import SavedFactors
from sfapprox.results import Comparison, MethodResult
from sfapprox.sweep import Sweep, sweep

Array = npt.NDArray[np.float64]


def loaded(path: Path) -> tuple[int, str, list[str], dict[str, Any]]:
    m: sfapprox.LoadedMatrix = sfapprox.load_matrix(path, max_memory="1G")
    dense: np.ndarray = m.to_dense()
    kept = sfapprox.load_matrix(str(path), keep_sparse=True)
    options = sfapprox.LoadOptions(format="mtx", max_memory="500M")
    again = sfapprox.compare(str(path), "sf,tsvd", load=options)
    assert dense.shape and kept.is_sparse in (True, False) and again.budget > 0
    return m.n, m.name, m.notes, m.summary()


def compared(X: Array) -> tuple[str | None, float | None, dict[str, Any]]:
    c: Comparison = sfapprox.compare(X, "sf,tsvd,rpca,sparse", time_limit=5, seed=1, progress=True)
    verdict = c.verdict()
    text: str = verdict["text"] if verdict is not None else ""
    row: MethodResult = c.result("sf")
    status: str = row.status
    errors: tuple[float | None, float | None] = (row.fro_error, row.rel_error)
    stored: int | None = row.nnz
    seconds: float | None = row.seconds
    stop: str | None = row.stop_reason
    estimate: dict[str, Any] | None = row.error_estimate
    ranked: list[MethodResult] = c.ranked()
    rows: list[MethodResult] = c.results
    record: dict[str, Any] = c.to_dict()
    back: Comparison = Comparison.from_dict(record)
    frame = c.to_frame()
    html: str = c._repr_html_()
    methods: dict[str, str] = sfapprox.available_methods()
    budget: int = c.budget
    assert text is not None and status and errors and stored is not None and seconds is not None
    assert stop is not None and estimate is None and ranked and rows and back and frame is not None
    assert html and methods and budget
    return c.winner(), row.rel_error, row.params


def fitted(X: Array, out: Path) -> float:
    sf: sfapprox.ChordSF = sfapprox.ChordSF(max_iter=300, device="cpu", max_memory="2G").fit(X)
    params: dict[str, Any] = sf.get_params()
    sf.set_params(max_iter=100)
    rel: float | None = sf.rel_error_
    fro: float | None = sf.fro_error_
    stop: str = sf.stop_reason_
    stored: int = sf.n_stored_
    factors: np.ndarray = sf.factors_
    W: list[scipy.sparse.csr_array] = sf.to_scipy()
    sf2: sfapprox.ChordSF = sfapprox.fit_sf(X, max_iter=100, device="cpu", progress=False)
    run = sfapprox.fit_matrix(X, budget="sf", out=out, max_iter=50)
    summary: dict[str, Any] = run.summary
    sfapprox.save_factors(out, sf)
    saved: SavedFactors = sfapprox.load_factors(out, max_memory="1G")
    history: np.ndarray = saved.loss_history
    n: int = saved.n
    tsvd = sfapprox.TruncatedSVD(n_components=5, max_memory="500M").fit(X)
    absolute, relative = tsvd.frobenius_error(X)
    also: tuple[float, float | None] = sfapprox.frobenius_error(X, tsvd.operator_.to_dense())
    settings = sfapprox.FitSettings(time_limit=None, max_iter=200, seed=3, max_memory="2G")
    assert params and rel is not None and fro is not None and stop and stored and factors.shape and W
    assert sf2 and summary and history is not None and n and relative is not None and also and settings
    return absolute


def applied(X: Array, path: Path) -> Array:
    op = sfapprox.load_factors(path).operator
    x: Array = X[:, 0]
    y: np.ndarray = op @ x
    z: np.ndarray = op.T @ x
    b: np.ndarray = op.matvec(x)
    r: np.ndarray = op.rmatvec(x)
    B: np.ndarray = op @ X
    dense: np.ndarray = op.to_dense()
    n_stored: int = op.n_stored
    saved = sfapprox.load_factors(path)
    w: np.ndarray = saved @ x
    solution, info = scipy.sparse.linalg.cg(saved, x)
    chord = sfapprox.ChordOperator(np.full((3, 8, 4), 0.25))
    c: np.ndarray = chord @ X[:8, 0]
    m: int = chord.n_factors
    assert B.shape and dense.shape and n_stored and info >= 0 and m
    return np.asarray(y + z + b + r + w + solution + c, dtype=np.float64)


def exported(path: Path) -> torch.Tensor:
    op = sfapprox.load_factors(path).operator
    factors: list[scipy.sparse.csr_array] = op.to_sparse_factors()
    layer: torch.nn.Module = op.to_torch()
    back_layer: torch.nn.Module = op.T.to_torch(dtype=torch.float32, device="cpu")
    out: torch.Tensor = layer(torch.randn(8, 64))
    assert factors and back_layer is not None
    return out


def sources() -> int:
    rng = np.random.default_rng(0)
    points = rng.standard_normal((2_000, 8))
    K = sfapprox.KernelMatrix(points, kernel="rbf", max_memory="1G")
    bandwidth: float | None = K.bandwidth_                  # None for the cosine and linear kernels
    shape: tuple[int, int] = K.shape
    block: np.ndarray = K.columns(np.arange(4))
    product: np.ndarray = K @ rng.standard_normal((2_000, 3))
    also: np.ndarray = K.matmat(rng.standard_normal((2_000, 3)))
    c = sfapprox.compare(K, "nystrom,rsvd,sparse", budget=0.01, max_memory="1G")
    interval: dict[str, Any] | None = c.result("nystrom").error_estimate
    q, k = rng.standard_normal((2, 512, 16))
    A = sfapprox.AttentionMatrix(q, k)
    m = sfapprox.open_matrix("points.csv", kernel="laplacian")
    ny = sfapprox.Nystrom(budget=200_000, max_memory=1 << 30).fit(K)
    estimates: dict[str, ErrorEstimate] = sfapprox.estimate_errors(K, {"nystrom": ny.operator_}, max_memory="1G")
    rel: float | None = estimates["nystrom"].rel_error
    S = scipy.sparse.random(2_000, 2_000, density=1e-3, format="csr", random_state=0)
    mo = sfapprox.Monarch(budget=600_000, max_memory=1 << 30).fit(S)
    shown: MatrixDescription = describe(K, max_memory="1G")
    assert bandwidth and shape and block.shape and product.shape and also.shape and interval is not None
    assert A.shape and m is not None and rel is not None and mo.operator_ is not None and shown.facts
    return K.formed_bytes


def swept(X: Array) -> dict[int, dict[str, MethodResult]]:
    settings = sfapprox.FitSettings(time_limit=None, max_iter=200, seed=3, max_memory="2G")
    s: Sweep = sweep(X, [0.05, 0.1, 0.2], ["sf", "tsvd"], settings=settings)
    points: list[Comparison] = s.points
    record: dict[str, Any] = s.to_dict()
    again: Sweep = Sweep.from_dict(record)
    frame = s.to_frame()
    module_sweep: Sweep = sfapprox.sweep.sweep(X, "0.1", "tsvd")
    assert points and again and frame is not None and module_sweep
    return s.table()


def estimators(X: Array) -> list[int]:
    stored: list[int] = []
    for estimator in (sfapprox.RobustPCA(budget=2_000), sfapprox.NMF(budget=2_000),
                      sfapprox.RandomizedSVD(budget=2_000), sfapprox.SparseApproximation(budget=2_000),
                      sfapprox.ChordLowRank(budget=5_000), sfapprox.ChordSparse(budget=5_000)):
        fitted = estimator.fit(np.abs(X))
        stored.append(fitted.n_stored_)
        assert fitted.operator_ is not None and fitted.seconds_ >= 0 and fitted.params_ is not None
    try:
        sfapprox.TruncatedSVD(n_components=0).fit(X)
    except sfapprox.ParameterError as exc:
        assert str(exc)
    except sfapprox.SfapproxError:
        pass
    return stored


def transposed(path: Path) -> int:
    saved = sfapprox.load_factors(path)
    x = np.ones(saved.n)
    t: np.ndarray = saved.T @ x                                      # the record's transpose, as scipy's
    layer: torch.nn.Module = saved.T.to_torch()                      # a surrogate's transpose is one too
    back: np.ndarray = saved.aslinearoperator().rmatvec(x)
    assert t.shape and layer is not None and back.shape
    return saved.operator.T.n_stored + saved.H.n_stored


def batch(out: Path) -> dict[str, Any]:
    from sfapprox.datasets import BatchOptions, build_report, load_manifest, read_results, run_batch

    manifest = load_manifest("synthetic")
    names: list[str] = [entry.name for entry in manifest.entries]
    options = BatchOptions(methods=("sf", "tsvd"), settings=sfapprox.FitSettings(time_limit=5, max_memory="1G"))
    summary = run_batch("synthetic", out, options, only=names[:2], jobs=1)
    report = build_report(read_results(out / "results.jsonl").records)
    frame = report.to_frame()
    wins = report.total_wins()
    assert summary.written >= 0 and frame is not None and wins is not None
    return report.to_dict()
