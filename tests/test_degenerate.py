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
        if row["method"] == "tsvd" and data["budget"] < 2 * data["matrix"]["n"] + 1 and name not in ZERO:
            # N <= 2: SF's budget is below one rank (2N + 1 numbers); said, never a zero "fit" of a nonzero
            # matrix (the zero matrix is held by rank 0 in 0 numbers, within any budget)
            assert row["status"] == "not applicable" and "(one rank: " in row["reason"]
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


# ---------------------------------------------------------------------------
# Every method on odd but legitimate inputs (an audit: what must hold of each row)
# ---------------------------------------------------------------------------

ITERS_ALL = 3  # the audit checks what a row may say, not how good a fit is


def _all_methods() -> list[str]:
    from sfapprox import available_methods

    return list(available_methods())


def _check_rows(comparison, X) -> dict:
    """Every row fits within the budget with finite errors (none relative for the zero matrix: no
    division by zero), or says in one line why it does not apply; never failed."""
    zero = not (X.count_nonzero() if sp.issparse(X) else np.count_nonzero(X))
    rows = {}
    for row in comparison.results:
        rows[row.method] = row
        assert row.status in ("ok", "not applicable"), (row.method, row.status, row.reason)
        if row.status == "not applicable":
            assert row.reason and "\n" not in row.reason and "Traceback" not in row.reason, row
            continue
        assert 0 <= row.nnz <= comparison.budget, (row.method, row.nnz, comparison.budget)
        assert row.fro_error is not None and math.isfinite(row.fro_error) and row.fro_error >= 0, row
        if zero:
            assert row.fro_error == 0.0 and row.rel_error is None, row
        else:
            assert row.rel_error is not None and 0 <= row.rel_error < 2, row
    _no_nan(json.dumps(comparison.to_dict()))
    return rows


@pytest.mark.parametrize("kind", ["random", "zero"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_every_method_at_tiny_orders_fits_within_its_budget_or_says_why(n, kind):
    from sfapprox import compare

    X = np.random.default_rng(n).standard_normal((n, n)) if kind == "random" else np.zeros((n, n))
    rows = _check_rows(compare(X, _all_methods(), max_iter=ITERS_ALL, time_limit=10, device="cpu"), X)
    assert rows["sf"].status == "ok"  # SF's own budget always holds SF


#: The methods that hold the zero matrix exactly in 0 numbers (a rank 0, no entries).
NOTHING_STORED = ("tsvd", "rsvd", "nystrom", "sparse", "rpca", "rpca-pcp", "nmf")


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_the_zero_matrix_rows_are_the_same_at_every_order(n):
    """At N = 2 sparse, tsvd and rsvd were "not applicable" (SF's budget below one rank or entry) though 0
    numbers hold the zero matrix exactly, while at N = 5 they stored 0 (sparse 6, its row pointers, with
    "min budget 8").  At every N they now store 0, from a least budget of 0; a nonzero matrix is refused
    below one unit as before."""
    from sfapprox import compare

    rows = {r.method: r for r in compare(np.zeros((n, n)), list(NOTHING_STORED), max_iter=ITERS_ALL, time_limit=10,
                                          device="cpu").results}
    for name in NOTHING_STORED:
        row = rows[name]
        assert (row.status, row.nnz, row.fro_error, row.min_budget) == ("ok", 0, 0.0, 0), (name, row)
    if n <= 2:
        nonzero = {r.method: r for r in compare(np.eye(n), ["tsvd", "sparse"], time_limit=10, device="cpu").results}
        assert all(r.status == "not applicable" and "below the smallest fit" in r.reason for r in nonzero.values())


def _rank_one(n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.outer(rng.random(n) + 0.1, rng.random(n) + 0.1)


SPECIAL = {
    "constant": np.full((6, 6), 3.0),
    "identity": np.eye(6),
    "single_nonzero": _single(6),
    "rank_one": _rank_one(),
    "huge_1e150": np.abs(_BASE[:6, :6]) * 1e150,
    "tiny_1e-150": np.abs(_BASE[:6, :6]) * 1e-150,
    "negative": -np.abs(_BASE[:6, :6]),
}


@pytest.mark.parametrize("name", list(SPECIAL))
def test_every_method_on_special_matrices(name):
    from sfapprox import compare

    X = SPECIAL[name]
    rows = _check_rows(compare(X, _all_methods(), max_iter=ITERS_ALL, time_limit=10, device="cpu"), X)
    if name == "negative":  # refused, said, and told what to do
        assert rows["nmf"].status == "not applicable" and "X - X.min()" in rows["nmf"].reason
    if name in ("constant", "identity", "single_nonzero", "rank_one"):
        # exactly held by at least one method at SF's budget
        assert min(r.rel_error for r in rows.values() if r.status == "ok") < 1e-9


@pytest.mark.parametrize("scale, word, fix", [(1e300, "too large", "divide"), (1e-300, "too small", "multiply")])
def test_entries_beyond_float64_s_squares_are_refused_with_the_fix(scale, word, fix):
    from sfapprox import compare

    with pytest.raises(InputError, match=f"{word}.*; {fix} the matrix by a constant") as info:
        compare(np.abs(_BASE[:5, :5]) * scale, _all_methods(), max_iter=1, device="cpu")
    assert "\n" not in str(info.value)


def _readonly(X):
    X = X.copy()
    X.flags.writeable = False
    return X


def _memmap(tmp_path, X):
    np.save(tmp_path / "m.npy", X)
    return np.load(tmp_path / "m.npy", mmap_mode="r")


def _coo_with_duplicates_and_zeros(X):
    """``X`` as COO with an explicit zero and a duplicated entry (two halves that sum to it)."""
    r, c = np.nonzero(X)
    rows = np.r_[r, r[0], 0 if X[0, 0] == 0 else r[0]]
    cols = np.r_[c, c[0], 0 if X[0, 0] == 0 else c[0]]
    vals = np.r_[X[r, c], 0.0, 0.0]
    vals[0] /= 2
    vals[len(r)] = vals[0]  # the duplicate: half of the first entry, summed back
    return sp.coo_array((vals, (rows, cols)), shape=X.shape)


_SP = np.where(np.random.default_rng(5).random((6, 6)) < 0.5, np.round(np.abs(_BASE[:6, :6]) * 4), 0.0)
_SP[0, 0] = 0.0

CONTAINERS = {
    "int64": lambda tmp: _SP.astype(np.int64),
    "int8": lambda tmp: _SP.astype(np.int8),
    "uint8": lambda tmp: _SP.astype(np.uint8),
    "float16": lambda tmp: _SP.astype(np.float16),
    "float32": lambda tmp: _SP.astype(np.float32),
    "fortran": lambda tmp: np.asfortranarray(_SP),
    "strided_view": lambda tmp: np.repeat(np.repeat(_SP, 2, 0), 2, 1)[::2, ::2],
    "transposed_view": lambda tmp: np.ascontiguousarray(_SP.T).T,
    "read_only": lambda tmp: _readonly(_SP),
    "read_only_memmap": lambda tmp: _memmap(tmp, _SP),
    "numpy_matrix": lambda tmp: np.asmatrix(_SP),
    "nested_list": lambda tmp: _SP.tolist(),
    "torch_requires_grad": lambda tmp: pytest.importorskip("torch").tensor(_SP, requires_grad=True),
    "torch_float32": lambda tmp: pytest.importorskip("torch").tensor(_SP, dtype=pytest.importorskip("torch").float32),
    **{f"scipy_{fmt}": (lambda fmt: lambda tmp: _coo_with_duplicates_and_zeros(_SP).asformat(fmt))(fmt)
       for fmt in ("coo", "csr", "csc", "lil", "dok", "bsr", "dia")},
    "scipy_csr_matrix": lambda tmp: sp.csr_matrix(_coo_with_duplicates_and_zeros(_SP)),
}
_EXACT_METHODS = "tsvd,sparse,nmf,monarch"  # closed forms and a seeded NMF: the same numbers for the same matrix
_EXACT_BUDGET = 30  # every one of them applies; NMF's rank 2 converges in milliseconds (rank 6: 0.8 s)


@pytest.fixture(scope="module")
def reference_rows():
    from sfapprox import compare

    return compare(_SP, _EXACT_METHODS, budget=_EXACT_BUDGET, device="cpu")


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # numpy's own, on np.matrix: a user's container
@pytest.mark.parametrize("name", list(CONTAINERS))
def test_every_container_of_the_same_matrix_gives_the_same_rows(tmp_path, name, reference_rows):
    from sfapprox import compare

    X = CONTAINERS[name](tmp_path)
    before = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float64) if not hasattr(X, "detach") \
        else X.detach().numpy().copy()
    np.testing.assert_array_equal(before, _SP)  # the container holds exactly the matrix (duplicates summed)
    got, ref = compare(X, _EXACT_METHODS, budget=_EXACT_BUDGET, device="cpu"), reference_rows
    assert all(row.status == "ok" for row in ref.results)
    assert got.matrix["fro_norm"] == pytest.approx(ref.matrix["fro_norm"], rel=1e-12)
    for a, b in zip(_check_rows(got, _SP).values(), _check_rows(ref, _SP).values()):
        assert (a.method, a.status, a.nnz) == (b.method, b.status, b.nnz)
        if a.status == "ok":
            assert a.fro_error == pytest.approx(b.fro_error, rel=1e-6, abs=1e-9), a.method
    after = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float64) if not hasattr(X, "detach") \
        else X.detach().numpy()
    np.testing.assert_array_equal(after, before)  # never written to


REFUSED = {
    "complex": (lambda: np.eye(3) + 1j, r"complex matrices are not supported; pass the real part"),
    "complex_sparse": (lambda: sp.csr_array(np.eye(3) + 0j), r"complex matrices are not supported; pass the real part"),
    "complex_torch": (lambda: pytest.importorskip("torch").eye(3, dtype=pytest.importorskip("torch").complex64),
                      r"complex matrices are not supported; pass the real part"),
    "object": (lambda: np.array([[1, None], [3, 4]], dtype=object), r"None \(NoneType\), not a number \(object dtype\)"),
    "image_channel": (lambda: np.ones((3, 3, 1)), r"drop its axes of length 1"),
    "flattened": (lambda: np.ones(9), r"reshape it \(X.reshape\(3, 3\)\)"),
    "masked": (lambda: np.ma.masked_array(np.eye(3), mask=np.eye(3, dtype=bool)), r"fill them first"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_inputs_that_cannot_be_fitted_are_one_line_saying_what_to_do(name):
    from sfapprox import compare

    make, match = REFUSED[name]
    for fit in (lambda X: compare(X, "sf,tsvd", max_iter=1, device="cpu"), lambda X: TruncatedSVD(1).fit(X)):
        with pytest.raises(InputError, match=match) as info:
            fit(make())
        assert "\n" not in str(info.value)


def _npy(path, X, **kw):
    np.save(path, X, **kw)
    return path


FILES = {  # name: (write it, None (read) or what the one-line refusal says)
    "object.npy": (lambda p: _npy(p, np.array([[1, 2], [3, 4]], dtype=object), allow_pickle=True),
                   r"refusing to load untrusted pickles; save its numbers as a numeric array"),
    "channel.npy": (lambda p: _npy(p, np.ones((3, 3, 1))), r"3-D array of shape 3 x 3 x 1; drop its axes of length 1"),
    "vector.npy": (lambda p: _npy(p, np.ones(4)), r"1-D array of shape 4; if it holds a 2 x 2 matrix"),
    "empty.npy": (lambda p: p.write_bytes(b""), "file is empty"),
    "empty.mtx": (lambda p: p.write_text(""), "file is empty"),
    "header_only.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate real general\n"), "size line"),
    "header_only.npy": (lambda p: p.write_bytes(_npy_header(np.ones((3, 3)))), "truncated; copy or write it again"),
    "hermitian.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n2 1 1 1\n"),
                      "write its real part"),
    "pattern.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1\n"), None),
    "symmetric.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 1 2\n3 1 -1\n"),
                      None),
    "skew.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n3 1 -1\n"), None),
    "integer.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 3\n2 1 -4\n"),
                    None),
    "one.mtx": (lambda p: p.write_text("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 5\n"), None),
}


def _npy_header(X) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, X)
    data = buf.getvalue()
    return data[:data.index(b"\n") + 1]


@pytest.mark.parametrize("name", list(FILES))
def test_odd_files_are_read_or_refused_in_one_line_by_every_command(tmp_path, name):
    write, refusal = FILES[name]
    path = tmp_path / name
    write(path)
    for args in (["info", path], ["compare", path, "--methods", "sf,tsvd,sparse,nmf", "--iters", 2, "--device", "cpu"]):
        res = _run(*args)
        _no_nan(res.output)
        if refusal is None:
            assert res.exit_code == 0, res.output
            continue
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), res.output
        assert re.search(refusal, lines[0]), lines[0]
