"""Degenerate but valid inputs, end to end: the zero matrix, N = 1 and 2, diagonal,
a single nonzero, and magnitudes of 1e150 and 1e-150.

Each goes through the CLI (info, fit --json --out, compare --methods sf,tsvd
--json) and the API (ChordSF, TruncatedSVD).  Nothing may print or write NaN or
Infinity; the zero matrix has error 0 and a null relative error; a scaled
matrix has the relative errors of the unscaled one.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from typer.testing import CliRunner

from sfapprox import ChordSF, InputError, TruncatedSVD, load_factors, load_matrix
from sfapprox.cli import app
from sfapprox.metrics import frobenius_error

runner = CliRunner()
ITERS = 30

_BASE = np.random.default_rng(0).standard_normal((12, 12))


def _single(n: int = 7) -> np.ndarray:
    X = np.zeros((n, n))
    X[3, 5] = 2.5
    return X


CASES = {
    "zero": np.zeros((6, 6)),
    "zero_sparse": sp.csr_array((6, 6)),
    "one": np.array([[3.0]]),
    "one_zero": np.array([[0.0]]),
    "two": np.array([[1.0, 2.0], [3.0, 4.0]]),
    "diagonal": np.diag(np.arange(1.0, 9.0)),
    "single_nonzero": _single(),
    "huge": _BASE * 1e150,
    "tiny": _BASE * 1e-150,
}
ZERO = {"zero", "zero_sparse", "one_zero"}
NAN_TEXT = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)


def _write(tmp_path, name: str):
    X = CASES[name]
    if sp.issparse(X):
        path = tmp_path / f"{name}.mtx"
        scipy.io.mmwrite(path, X)
    else:
        path = tmp_path / f"{name}.npy"
        np.save(path, X)
    return path


def _dense(name: str) -> np.ndarray:
    X = CASES[name]
    return X.toarray() if sp.issparse(X) else X


def _run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


def _no_nan(text: str) -> None:
    assert "NaN" not in text and "Infinity" not in text, text
    assert not NAN_TEXT.search(text), text


def _check_errors(fro, rel, name: str) -> None:
    assert fro is not None and math.isfinite(fro) and fro >= 0
    if name in ZERO:
        assert fro == 0.0 and rel is None
    else:
        assert rel is not None and math.isfinite(rel) and 0 <= rel <= 1.0 + 1e-9


@pytest.mark.parametrize("name", list(CASES))
def test_cli_end_to_end(tmp_path, name):
    path = _write(tmp_path, name)
    info = _run("info", path)
    assert info.exit_code == 0, info.output
    assert f"{_dense(name).shape[0]} x {_dense(name).shape[0]}" in info.output
    _no_nan(info.output)

    fit_json, h5 = tmp_path / "fit.json", tmp_path / "fit.h5"
    fit = _run("fit", path, "--iters", ITERS, "--device", "cpu", "--json", fit_json, "--out", h5)
    assert fit.exit_code == 0, fit.output
    _no_nan(fit.output)
    text = fit_json.read_text()
    _no_nan(text)
    summary = json.loads(text)
    _check_errors(summary["fro_error"], summary["rel_error"], name)
    if name in ZERO:
        assert summary["stop_reason"] == "zero_matrix"
    saved = load_factors(h5)
    approx = saved.to_dense()
    assert np.isfinite(approx).all() and np.isfinite(saved.loss_history).all()
    assert frobenius_error(_dense(name), approx)[0] == pytest.approx(summary["fro_error"], rel=1e-9, abs=1e-300)

    cmp_json = tmp_path / "cmp.json"
    cmp = _run("compare", path, "--methods", "sf,tsvd", "--iters", ITERS, "--device", "cpu", "--json", cmp_json)
    assert cmp.exit_code == 0, cmp.output
    _no_nan(cmp.output)
    text = cmp_json.read_text()
    _no_nan(text)
    data = json.loads(text)
    assert [r["method"] for r in data["results"]] == ["sf", "tsvd"]
    for row in data["results"]:
        if row["method"] == "tsvd" and data["budget"] < 2 * data["matrix"]["n"] + 1:
            # N <= 2: SF's budget is below one rank (2N + 1 numbers); said, never a zero "fit"
            assert row["status"] == "not applicable" and "below one rank" in row["reason"]
            continue
        assert row["status"] == "ok" and row["nnz"] <= data["budget"]
        _check_errors(row["fro_error"], row["rel_error"], name)
    assert math.isfinite(data["matrix"]["fro_norm"])


@pytest.mark.parametrize("name", list(CASES))
def test_api_fits_are_finite(name):
    X = CASES[name]
    sf = ChordSF(max_iter=ITERS, device="cpu").fit(X)
    assert np.isfinite(sf.factors_).all() and np.isfinite(sf.loss_curve_).all()
    _check_errors(sf.fro_error_, sf.rel_error_, name)
    tsvd = TruncatedSVD(n_components=1).fit(X)
    assert np.isfinite(tsvd.to_dense()).all()
    _check_errors(*frobenius_error(X, tsvd.to_dense()), name)


def test_zero_matrix_details():
    sf = ChordSF(device="cpu").fit(np.zeros((5, 5)))
    assert sf.stop_reason_ == "zero_matrix" and sf.n_iter_ == 0 and not sf.to_dense().any()
    summary = load_matrix_summary(np.zeros((5, 5)))
    assert summary["fro_norm"] == 0.0 and summary["nnz"] == 0 and summary["symmetric"]


def load_matrix_summary(X):
    from sfapprox.io import as_loaded

    return as_loaded(X).summary()


def test_exact_cases():
    """N = 1, N = 2 and a diagonal matrix are within SF's reach: fitted almost exactly."""
    for name in ("one", "two", "diagonal"):
        sf = ChordSF(max_iter=150, device="cpu").fit(CASES[name])
        assert sf.rel_error_ < 1e-3, (name, sf.rel_error_)
    # A rank-1 single nonzero is exact for TSVD at rank 1.
    assert frobenius_error(CASES["single_nonzero"], TruncatedSVD(n_components=1).fit(CASES["single_nonzero"]).to_dense())[0] < 1e-12


@pytest.mark.parametrize("scale", [1e150, 1e-150])
def test_scaled_matrix_has_the_same_relative_errors(scale):
    ref_sf = ChordSF(max_iter=ITERS, device="cpu").fit(_BASE)
    sf = ChordSF(max_iter=ITERS, device="cpu").fit(_BASE * scale)
    # SF fits X / (||X||_F / sqrt(N)): the same problem up to rounding.
    assert sf.rel_error_ == pytest.approx(ref_sf.rel_error_, rel=1e-6)
    assert sf.fro_error_ == pytest.approx(ref_sf.fro_error_ * scale, rel=1e-6)
    assert np.isfinite(sf.loss_curve_).all() and sf.loss_curve_[-1] > 0
    ref_rel = frobenius_error(_BASE, TruncatedSVD(n_components=3).fit(_BASE).to_dense())[1]
    rel = frobenius_error(_BASE * scale, TruncatedSVD(n_components=3).fit(_BASE * scale).to_dense())[1]
    assert rel == pytest.approx(ref_rel, rel=1e-9)


@pytest.mark.parametrize("scale, word", [(1e160, "too large"), (1e-170, "too small")])
def test_beyond_float64_range_is_refused_not_nan(tmp_path, scale, word):
    """Past ~1e154 (||X||_F**2 overflows) or ~1e-154 (it underflows) the errors are not computable."""
    X = _BASE * scale
    for fit in (lambda: ChordSF(max_iter=5, device="cpu").fit(X), lambda: TruncatedSVD(n_components=1).fit(X)):
        with pytest.raises(InputError, match=word):
            fit()
    path = tmp_path / "scaled.npy"
    np.save(path, X)
    res = _run("fit", path, "--iters", 5)
    assert res.exit_code == 2 and word in res.output and "divide" in res.output or "multiply" in res.output
    with pytest.raises(InputError, match=word):
        load_matrix(path)


def test_sparse_single_nonzero_stays_sparse(tmp_path):
    path = tmp_path / "one_entry.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n5 5 1\n2 4 -7.5\n")
    loaded = load_matrix(path)
    assert loaded.is_sparse and loaded.nnz == 1
    summary = loaded.summary()
    assert summary["min"] == -7.5 and summary["max"] == 0.0 and summary["fro_norm"] == 7.5
