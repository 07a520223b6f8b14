"""The butterfly support (FAµST's structure): coverage, exact gradient, recovery, operator, files, CLI."""

import h5py
import numpy as np
import pytest
import scipy.io
import scipy.linalg
import torch

from sfapprox import ChordOperator, ChordSF, ParameterError, ResourceError, load_factors, save_factors
from sfapprox.budget import butterfly_count
from sfapprox.chord import (
    SUPPORTS,
    butterfly_columns,
    butterfly_is_full,
    butterfly_n_factors,
    check_butterfly_size,
    is_power_of_two,
    support_offsets,
)
from sfapprox.sf import _butterfly as B
from sfapprox.sf.model import estimate_fit_memory

POWERS = [2, 4, 8, 16, 32, 64, 128, 256]


def _dense_factors(ws: torch.Tensor) -> list[torch.Tensor]:
    """The factors as dense matrices, built from the definition (differentiable in ``ws``)."""
    n_factors, n, _ = ws.shape
    rows = torch.arange(n)
    out = []
    for m in range(n_factors):
        D = torch.zeros((n, n), dtype=ws.dtype)
        D = D.index_put((rows, rows), ws[m, :, 0]).index_put((rows, rows ^ (1 << m)), ws[m, :, 1])
        out.append(D)
    return out


def _dense_product(ws: torch.Tensor) -> torch.Tensor:
    P = None
    for D in _dense_factors(ws):
        P = D if P is None else P @ D
    return P


def _random_stack(n: int, seed: int = 0) -> torch.Tensor:
    # Values of size ~1/sqrt(2): the product stays O(1) whatever M is.
    g = torch.Generator().manual_seed(seed)
    return torch.randn((butterfly_n_factors(n), n, 2), generator=g, dtype=torch.float64) / np.sqrt(2)


# ---------------------------------------------------------------- the protocol


def test_factor_layout_matches_the_definition():
    # Factor m, row i: values[m, i, 0] at column i and values[m, i, 1] at column i XOR 2^m.
    ws = _random_stack(16, seed=3)
    for m, D in enumerate(_dense_factors(ws)):
        assert torch.equal(B.factor_to_dense(ws[m], m), D)
        idx = butterfly_columns(16, m)
        assert np.array_equal(idx[:, 1], np.arange(16) ^ (1 << m))
        assert int((D != 0).sum()) == 2 * 16  # exactly two entries per row


@pytest.mark.parametrize("n", POWERS)
def test_all_ones_product_covers_every_entry_and_fewer_factors_do_not(n):
    m = butterfly_n_factors(n)
    assert m == int(np.log2(n))
    ones = torch.ones((m, n, 2), dtype=torch.float64)
    full = B.butterfly_product(ones)
    # Exactly one path i -> j through the factors: every entry is 1, none is 0.
    assert torch.equal(full, torch.ones((n, n), dtype=torch.float64))
    assert butterfly_is_full(n, m)
    assert not butterfly_is_full(n, m - 1)
    # Any log2 N - 1 of the factors (one left out, the rest in order) leave entries empty.
    for skip in range(m):
        P = torch.eye(n, dtype=torch.float64)
        for k in range(m - 1, -1, -1):
            if k != skip:
                P = B.apply_factor(ones[k], k, P)
        assert int((P == 0).sum()) == n * n // 2


def test_power_of_two_rule_and_counts():
    assert [k for k in range(1, 40) if is_power_of_two(k)] == [1, 2, 4, 8, 16, 32]
    assert butterfly_count(1024) == 2 * 1024 * 10
    assert butterfly_count(16, 2) == 64
    with pytest.raises(ParameterError, match=r"power of two.*N = 12.*8 or 16.*resize= for images.*'chord'"):
        check_butterfly_size(12)
    with pytest.raises(ParameterError, match="power of two"):
        check_butterfly_size(1)
    with pytest.raises(ParameterError, match="no offsets"):
        support_offsets(16, "butterfly")
    assert "butterfly" in SUPPORTS


# ------------------------------------------------------------ loss and gradient


@pytest.mark.parametrize("n,panel", [(2, None), (8, None), (16, 4), (32, 256), (64, 24), (128, None)])
def test_loss_and_grad_equal_autograd(n, panel):
    ws = _random_stack(n, seed=n)
    X = torch.randn((n, n), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    w = ws.clone().requires_grad_(True)
    ref = 0.5 * ((X - _dense_product(w)) ** 2).sum()
    ref.backward()
    loss, grad = B.loss_and_grad(ws, X, panel=panel)
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(grad, w.grad, rtol=1e-10, atol=1e-10)


def test_gradient_matches_finite_differences():
    n = 16
    ws = _random_stack(n, seed=5)
    X = torch.randn((n, n), generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    _, grad = B.loss_and_grad(ws, X, panel=8)
    rng = np.random.default_rng(0)
    h = 1e-6
    for _ in range(12):
        idx = tuple(int(rng.integers(s)) for s in ws.shape)
        plus, minus = ws.clone(), ws.clone()
        plus[idx] += h
        minus[idx] -= h
        fd = (float(B.loss_and_grad(plus, X)[0]) - float(B.loss_and_grad(minus, X)[0])) / (2 * h)
        assert fd == pytest.approx(float(grad[idx]), rel=1e-6, abs=1e-7)


def test_apply_and_adjoint_match_dense():
    n = 32
    ws = _random_stack(n, seed=2)
    D = _dense_product(ws)
    Bk = torch.randn((n, 5), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    torch.testing.assert_close(B.apply_product(ws, Bk), D @ Bk, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(B.apply_product_t(ws, Bk), D.T @ Bk, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(B.butterfly_product(ws), D, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ the model


@pytest.mark.parametrize("n", [8, 16, 32])
def test_walsh_hadamard_is_recovered_exactly(n):
    # H_N = H_2 ⊗ ... ⊗ H_2 is a product of log2 N butterfly factors.
    H = scipy.linalg.hadamard(n).astype(float)
    sf = ChordSF(support="butterfly", max_iter=300, time_limit=None, device="cpu").fit(H)
    assert sf.rel_error_ < 1e-6, sf.rel_error_
    assert sf.factors_.shape == (int(np.log2(n)), n, 2)
    assert sf.n_stored_ == butterfly_count(n) == 2 * n * int(np.log2(n))
    assert sf.offsets_.size == 0 and sf.kernel_ == "butterfly-panels"
    assert sf.operator_.support == "butterfly"
    assert np.allclose(sf.to_dense(), H, atol=1e-5)


@pytest.mark.parametrize("init", ["reference", "identity"])
def test_inits(init):
    sf = ChordSF(support="butterfly", init=init, max_iter=0, init_noise=0.0, device="cpu").fit(np.eye(8))
    start = sf.factors_ / sf.factors_.flat[0]  # undo the scale: the start has one value everywhere
    if init == "reference":
        assert np.allclose(start, 1.0)
    else:
        assert np.allclose(sf.factors_[:, :, 1], 0.0) and np.allclose(start[:, :, 0], 1.0)
    assert sf.init_ == init


def test_bad_sizes_and_parameters_are_parameter_errors():
    with pytest.raises(ParameterError, match=r"power of two.*N = 12.*resize= for images"):
        ChordSF(support="butterfly", device="cpu").fit(np.eye(12))
    with pytest.raises(ParameterError, match="exactly log2 N = 4 factors"):
        ChordSF(support="butterfly", n_factors=3, device="cpu").fit(np.eye(16))
    with pytest.raises(ParameterError, match="base=3 does not apply"):
        ChordSF(support="butterfly", base=3, device="cpu").fit(np.eye(16))
    with pytest.raises(ParameterError, match="'butterfly'"):
        ChordSF(support="butterfy").fit(np.eye(16))


def test_memory_estimate_and_guard():
    # O(N^2) plus panel buffers: far below the Chord estimate at the same N.
    bf = estimate_fit_memory(4096, 12, 2, 8, 50, "cpu", support="butterfly")
    chord = estimate_fit_memory(4096, 12, 13, 8, 50, "cpu")
    assert 4096**2 * 8 < bf < chord
    gpu = estimate_fit_memory(4096, 12, 2, 4, 50, "cuda", support="butterfly")
    assert gpu >= 14 * 4096**2 * 4  # whole-matrix buffers on a GPU
    with pytest.raises(ResourceError, match="memory limit"):
        ChordSF(support="butterfly", max_memory=10_000, device="cpu").fit(np.eye(32))


def test_zero_matrix():
    sf = ChordSF(support="butterfly", device="cpu").fit(np.zeros((8, 8)))
    assert sf.stop_reason_ == "zero_matrix" and sf.fro_error_ == 0.0
    assert np.array_equal(sf.to_dense(), np.zeros((8, 8)))


# ---------------------------------------------------------- operator and files


def test_operator_matvec_rmatvec_against_dense():
    n = 64
    ws = _random_stack(n, seed=7)
    op = ChordOperator(ws.numpy(), support="butterfly")
    D = _dense_product(ws).numpy()
    x = np.random.default_rng(1).standard_normal(n)
    Bk = np.random.default_rng(2).standard_normal((n, 3))
    assert np.allclose(op.matvec(x), D @ x) and np.allclose(op.rmatvec(x), D.T @ x)
    assert np.allclose(op @ Bk, D @ Bk) and np.allclose(op.T @ Bk, D.T @ Bk)
    assert np.allclose(op.to_dense(), D)
    assert op.n_stored == butterfly_count(n) and op.offsets.size == 0


def test_operator_rejects_bad_butterfly_values():
    with pytest.raises(ValueError, match="power of two"):
        ChordOperator(np.ones((3, 12, 2)), support="butterfly")
    with pytest.raises(ValueError, match=r"\(M, 8, 2\)"):
        ChordOperator(np.ones((4, 8, 2)), support="butterfly")
    with pytest.raises(ValueError, match="no offsets"):
        ChordOperator(np.ones((3, 8, 2)), np.array([0, 1]), support="butterfly")
    with pytest.raises(ValueError, match="unknown support"):
        ChordOperator(np.ones((3, 8, 2)), support="hexagonal")


def test_h5_round_trip(tmp_path):
    X = np.random.default_rng(0).random((16, 16))
    sf = ChordSF(support="butterfly", max_iter=20, device="cpu").fit(X)
    path = tmp_path / "bf.h5"
    save_factors(path, sf.operator_, loss_history=sf.loss_curve_)
    with h5py.File(path, "r") as f:
        assert f.attrs["support"] == "butterfly" and f.attrs["format_version"] == 4
    saved = load_factors(path)
    assert saved.operator.support == "butterfly"
    assert np.array_equal(saved.operator.values, sf.factors_)
    assert saved.n_stored == sf.n_stored_ == 128
    x = np.random.default_rng(1).random(16)
    D = sf.to_dense()
    assert np.allclose(saved.matvec(x), D @ x) and np.allclose(saved.rmatvec(x), D.T @ x)
    assert np.allclose(saved.to_dense(), D)


def test_unknown_support_in_a_file_is_an_input_error(tmp_path):
    from sfapprox import InputError

    path = tmp_path / "f.h5"
    save_factors(path, ChordOperator(np.full((3, 8, 2), 0.5), support="butterfly"))
    with h5py.File(path, "a") as f:
        f.attrs["support"] = "hexagonal"
    with pytest.raises(InputError, match="unknown factor support 'hexagonal'"):
        load_factors(path)


def test_cli_fit_butterfly_writes_a_loadable_file(tmp_path):
    import json

    from typer.testing import CliRunner

    from sfapprox.cli import app

    A = np.random.default_rng(0).random((16, 16))
    src, out, js = tmp_path / "m.mtx", tmp_path / "m.h5", tmp_path / "m.json"
    scipy.io.mmwrite(src, A)
    res = CliRunner().invoke(app, ["fit", str(src), "--support", "butterfly", "--iters", "20", "--device", "cpu",
                                   "--out", str(out), "--json", str(js), "-q"])
    assert res.exit_code == 0, res.output
    saved = load_factors(out)
    assert saved.operator.support == "butterfly" and saved.operator.values.shape == (4, 16, 2)
    summary = json.loads(js.read_text())
    assert saved.n_stored == 128 == summary["nnz"] and summary["support"] == "butterfly"
    assert saved.settings["support"] == "butterfly"
    bad = tmp_path / "odd.mtx"
    scipy.io.mmwrite(bad, np.random.default_rng(0).random((12, 12)))
    res = CliRunner().invoke(app, ["fit", str(bad), "--support", "butterfly", "--device", "cpu", "-q"])
    assert res.exit_code == 2 and "power of two" in res.output
