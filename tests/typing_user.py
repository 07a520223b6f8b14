"""A user's script, as README.md and the docstrings write the public API: data for tests/test_typing.py.

mypy checks it (it is not run): every line type-checks except the ones marked ``# type: ignore[code]``,
the mistakes a user could make, which mypy must report (the test runs it with ``--warn-unused-ignores``,
so a mistake mypy lets through is an error too).
"""

from __future__ import annotations

import numpy as np

import sfapprox
from sfapprox.results import Comparison, MethodResult
from sfapprox.sweep import sweep


def compared(path: str) -> tuple[str | None, float | None]:
    m = sfapprox.load_matrix(path)                                   # LoadedMatrix
    c = sfapprox.compare(m, "sf,tsvd,rpca,sparse", time_limit=5, seed=1, progress=True)
    verdict = c.verdict()
    text: str = verdict["text"] if verdict is not None else ""
    row: MethodResult = c.result("sf")
    op = row.operator
    record: dict = c.to_dict()
    again = sfapprox.compare(m.matrix, ["sf", "tsvd"], budget=0.05, max_memory="1G",
                             include=["fit.h5"])                     # saved fits scored beside the methods
    assert isinstance(again, Comparison) and text is not None and op is not None and record
    return c.winner(), row.rel_error


def fitted(X: np.ndarray) -> float:
    sf = sfapprox.ChordSF(max_iter=300, device="cpu", max_memory="2G").fit(X)   # sizes as --max-memory takes them
    sf2 = sfapprox.fit_sf(X, max_iter=100, device="cpu")
    shapes: tuple[int, ...] = sf2.factors_.shape
    W = sf.to_scipy()
    sfapprox.save_factors("f.h5", sf)
    saved = sfapprox.load_factors("f.h5", max_memory="1G")
    y = saved.operator @ X[:, 0]
    tsvd = sfapprox.TruncatedSVD(n_components=5, max_memory="500M").fit(X)
    absolute, relative = tsvd.frobenius_error(X)
    assert shapes and W and y is not None and relative is not None
    return absolute + (sf.rel_error_ or 0.0)               # None where X is zero (no relative error)


def sources() -> int:
    rng = np.random.default_rng(0)
    points = rng.standard_normal((2_000, 8))
    K = sfapprox.KernelMatrix(points, kernel="rbf", max_memory="1G")
    block = K.columns(np.arange(4))
    ny = sfapprox.Nystrom(budget=200_000, max_memory=1 << 30).fit(K)
    estimates = sfapprox.estimate_errors(points @ points.T, {"nystrom": ny.operator_}, max_memory="1G")
    settings = sfapprox.FitSettings(time_limit=None, max_iter=200, seed=3, max_memory="2G")
    s = sweep(K, [0.05, 0.1], ["nystrom", "rsvd"], settings=settings)
    assert block.shape and estimates and s is not None
    return K.formed_bytes


def use_the_result(X: np.ndarray) -> np.ndarray:
    import scipy.sparse
    import torch

    sf = sfapprox.ChordSF(max_iter=100, device="cpu").fit(X)
    sf.fro_error_, sf.rel_error_, sf.stop_reason_, sf.n_stored_, sf.params_
    op = sfapprox.load_factors("f.h5").operator                      # ChordOperator: compiled apply
    y, z = op @ X[:, 0], op.T @ X[:, 0]
    saved = sfapprox.load_factors("f.h5")
    w = saved @ X[:, 0]
    factors = op.to_sparse_factors()
    layer = op.to_torch()
    out = layer(torch.randn(8, 64))
    S = scipy.sparse.random(2_000, 2_000, density=1e-3, format="csr", random_state=0)
    mo = sfapprox.Monarch(budget=600_000, max_memory=1 << 30).fit(S)
    q, k = np.random.default_rng(0).standard_normal((2, 512, 16))
    A = sfapprox.AttentionMatrix(q, k)
    m = sfapprox.open_matrix("points.csv", kernel="laplacian")
    ranked = sfapprox.compare(A, "rsvd,sparse", budget=0.05, progress=True)
    frame = ranked.to_frame()
    chord = sfapprox.ChordOperator(np.full((3, 8, 4), 0.25))
    lowrank: sfapprox.ChordLowRank = sfapprox.ChordLowRank(budget=5_000).fit(X)   # fit returns the estimator
    sparse: sfapprox.ChordSparse = sfapprox.ChordSparse(budget=5_000).fit(X)
    assert lowrank.operator_ is not None and sparse.n_stored_ <= 5_000
    assert factors and out is not None and mo.operator_ is not None and m is not None and frame is not None
    return np.asarray(y) + np.asarray(z) + np.asarray(w) + chord @ X[:8, 0]


def mistakes(X: np.ndarray) -> None:
    sfapprox.ChordSF(max_iter="300")                                 # type: ignore[arg-type]
    sfapprox.TruncatedSVD(n_components=5, random_state="0")          # type: ignore[arg-type]
    sfapprox.KernelMatrix(X, kernel=3)                               # type: ignore[arg-type]
    sfapprox.load_matrix(42)                                         # type: ignore[arg-type]
    c = sfapprox.compare(X, "sf,tsvd", budget=[100])                 # type: ignore[arg-type]
    c.result(0)                                                      # type: ignore[arg-type]
    c.verdict()["text"]                                              # type: ignore[index]
    row = c.result("sf")
    rel: float = row.rel_error                                       # type: ignore[assignment]
    sfapprox.fit_sf(X).no_such_attribute_                            # type: ignore[attr-defined]
    sfapprox.load_factors("f.h5").operator.to_dense(max_memory="1G")  # type: ignore[call-arg]
    assert rel
