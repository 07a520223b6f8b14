"""The apply kernels (sfapprox.operators._chord_apply): both backends, their plans, and the fallback when numba is missing."""

import doctest
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from sfapprox import ParameterError
from sfapprox.chord import default_n_factors, support_offsets
from sfapprox.operators import _chord_apply as _apply

ROOT = Path(__file__).resolve().parent.parent

# (support, N): odd N, N not a power of two, powers of two for the butterfly, the smallest sizes.
CASES = [
    ("chord", 1), ("chord", 2), ("chord", 7), ("chord", 24), ("chord", 100),
    ("symmetric", 5), ("symmetric", 13), ("symmetric", 64),
    ("butterfly", 2), ("butterfly", 16), ("butterfly", 64),
]


def _stack(support, n, rng, n_factors=None):
    """A random FactorStack and its dense matrix (built factor by factor, independently of the kernels)."""
    if support == "butterfly":
        m = n_factors or n.bit_length() - 1
        values = rng.standard_normal((m, n, 2))
        offsets = np.zeros(0, np.int64)
        cols = [np.stack([np.arange(n), np.arange(n) ^ (1 << f)], axis=1) for f in range(m)]
    else:
        offsets = support_offsets(n, support)
        m = n_factors if n_factors is not None else default_n_factors(n)
        values = rng.standard_normal((m, n, offsets.size))
        cols = [(np.arange(n)[:, None] + offsets[None, :]) % n] * m
    dense = np.eye(n)
    for f in range(m):
        W = np.zeros((n, n))
        np.add.at(W, (np.repeat(np.arange(n), cols[f].shape[1]), cols[f].ravel()), values[f].ravel())
        dense = dense @ W
    return _apply.FactorStack(_apply.pack(values), offsets % n), dense


@pytest.mark.parametrize(("support", "n"), CASES)
def test_apply_matches_dense(backend, support, n):
    rng = np.random.default_rng(n)
    stack, D = _stack(support, n, rng)
    x, B, wide = rng.standard_normal(n), rng.standard_normal((n, 3)), rng.standard_normal((n, 30))
    assert 3 < _apply.vector_columns_max(n) <= 30  # narrow blocks column by column, wide ones at once
    for transpose, R in ((False, D), (True, D.T)):
        np.testing.assert_allclose(stack.apply(x, transpose), R @ x, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(stack.apply(B, transpose), R @ B, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(stack.apply(wide, transpose), R @ wide, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(stack.apply(B[:, :1], transpose), R @ B[:, :1], rtol=1e-10, atol=1e-10)


def test_input_kinds(backend):
    rng = np.random.default_rng(3)
    stack, D = _stack("chord", 24, rng)
    x = rng.standard_normal(24)
    B = np.asfortranarray(rng.standard_normal((24, 4)))  # a column-major block (e.g. from eigsh)
    out = stack.apply(x.astype(np.float32))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, D @ x.astype(np.float32), rtol=1e-10)
    np.testing.assert_allclose(stack.apply(B), D @ B, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(stack.apply(np.arange(24)), D @ np.arange(24.0), rtol=1e-10)
    z = x + 1j * rng.standard_normal(24)
    np.testing.assert_allclose(stack.apply(z, transpose=True), D.T @ z, rtol=1e-10, atol=1e-10)
    before = x.copy()
    stack.apply(x)
    np.testing.assert_array_equal(x, before)  # the input is never written


def test_no_factors_is_identity(backend):
    stack = _apply.FactorStack(_apply.pack(np.zeros((0, 6, 3))), np.array([0, 1, 2]))
    x = np.arange(6.0)
    out = stack.apply(x)
    np.testing.assert_array_equal(out, x)
    assert out is not x


def test_hand_made_offsets(backend):
    """Offsets without 0 first, out of [0, N), and coinciding mod N are all summed as positions."""
    rng = np.random.default_rng(4)
    n, offsets = 11, np.array([3, -1, 12, 1, 5])  # 12 = 1 (mod 11): two values at the same position
    values = rng.standard_normal((3, n, offsets.size))
    stack = _apply.FactorStack(_apply.pack(values), offsets % n)
    dense = np.eye(n)
    for f in range(3):
        W = np.zeros((n, n))
        for k, d in enumerate(offsets):
            W[np.arange(n), (np.arange(n) + d) % n] += values[f, :, k]
        dense = dense @ W
    x = rng.standard_normal(n)
    np.testing.assert_allclose(stack.apply(x), dense @ x, rtol=1e-10)
    np.testing.assert_allclose(stack.apply(x, transpose=True), dense.T @ x, rtol=1e-10)
    factors = stack.sparse_factors()
    assert sum(f.nnz for f in factors) == values.size


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("n", [5, 8, 37])
def test_offset_plan_covers_every_term_once(n, transpose):
    offsets = support_offsets(n, "symmetric")
    plan = _apply.offset_plan(n, offsets, transpose)
    hits = np.zeros((offsets.size, n), dtype=int)
    for k0, count, s0, s1, *shifts in plan:
        assert 0 <= s0 < s1 <= n
        for t in range(count):
            rows = np.arange(s0, s1)
            src = rows + shifts[t]
            assert src.min() >= 0 and src.max() < n  # a plain slice: no wrap inside a segment
            d = offsets[k0 + t]
            expected = (rows - d) % n if transpose else (rows + d) % n
            np.testing.assert_array_equal(src, expected)
            hits[k0 + t, rows] += 1
    np.testing.assert_array_equal(hits, 1)


def test_sparse_factors_layout():
    stack, D = _stack("symmetric", 13, np.random.default_rng(5))
    factors = stack.sparse_factors()
    assert len(factors) == default_n_factors(13)
    for f in factors:
        assert f.format == "csr" and f.has_sorted_indices and f.nnz == 13 * support_offsets(13, "symmetric").size
    product = factors[0]
    for f in factors[1:]:
        product = product @ f
    np.testing.assert_allclose(product.toarray(), D, rtol=1e-10, atol=1e-12)


def test_unknown_backend(monkeypatch):
    monkeypatch.setattr(_apply, "BACKEND", "fortran")
    with pytest.raises(ParameterError, match="unknown apply backend 'fortran'"):
        _apply.backend()


def test_numba_requested_but_missing(monkeypatch):
    monkeypatch.setattr(_apply._COMPILED, "module", False)
    monkeypatch.setattr(_apply, "BACKEND", "numba")
    with pytest.raises(ParameterError, match="numba is not available"):
        _apply.backend()
    monkeypatch.setattr(_apply, "BACKEND", "auto")
    assert _apply.backend() == "scipy"


@pytest.mark.parametrize("cached, compiles", [([], True), (None, True), ([("float64[:, :]",)], False)])
def test_block_kernel_compiles_reads_the_kernels_signatures_not_the_phase_text(monkeypatch, cached, compiles):
    """Whether a stopped fit's scoring would compile was told by comparing :func:`block_kernel_phase`'s display
    text with the compiling one: a rewording that gave loading and compiling one text (or changed one of
    them) changed the answer.  It reads the kernel's signatures and numba's cache index now."""
    import types

    from sfapprox import _compiled, _progress

    fresh = types.SimpleNamespace(signatures=[])
    monkeypatch.setattr(_apply, "backend", lambda: "numba")
    monkeypatch.setattr(_apply, "_block_kernel", lambda butterfly: fresh)
    monkeypatch.setattr(_compiled, "cached_signatures", lambda kernel: cached)
    monkeypatch.setattr(_progress, "kernel_phase", lambda cached: "making kernels ready")  # one text for both
    assert _apply.block_kernel_compiles() is compiles
    fresh.signatures = ["compiled here"]  # compiled or loaded by this process: nothing to make
    assert _apply.block_kernel_compiles() is False and _apply.block_kernel_phase() is None
    monkeypatch.setattr(_apply, "backend", lambda: "scipy")
    fresh.signatures = []
    assert _apply.block_kernel_compiles() is False


def test_failed_compile_falls_back_with_a_warning(monkeypatch):
    class Broken:
        def __getattr__(self, name):
            def kernel(*args):
                raise RuntimeError("LLVM exploded")
            return kernel

    monkeypatch.setattr(_apply._COMPILED, "module", Broken())
    monkeypatch.setattr(_apply, "BACKEND", "auto")
    stack, D = _stack("chord", 9, np.random.default_rng(6))
    x = np.ones(9)
    with pytest.warns(RuntimeWarning, match="LLVM exploded.*falling back to scipy"):
        y = stack.apply(x)
    np.testing.assert_allclose(y, D @ x, rtol=1e-10)
    assert _apply.backend() == "scipy"  # remembered: no second warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stack.apply(x)


def test_numba_missing_in_a_fresh_process():
    """With numba unimportable, everything still works through scipy (and nothing warns)."""
    code = (
        "import sys, warnings; sys.modules['numba'] = None; warnings.simplefilter('error')\n"
        "import numpy as np\n"
        "from sfapprox.operators import ChordOperator\n"
        "from sfapprox.operators import _chord_apply as _apply\n"
        "op = ChordOperator(np.random.default_rng(0).standard_normal((4, 12, 5)))\n"
        "D = op.to_dense(); x = np.arange(12.0)\n"
        "assert _apply.backend() == 'scipy'\n"
        "assert np.allclose(op @ x, D @ x) and np.allclose(op.T @ x, D.T @ x)\n"
        "assert np.allclose(op @ np.eye(12)[:, :3], D[:, :3])\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SFAPPROX_APPLY_BACKEND": "auto"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_import_does_not_load_numba():
    code = "import sys; import sfapprox.operators; print('numba' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


@pytest.mark.parametrize("module", ["sfapprox.operators._chord_apply", "sfapprox.operators._torch", "sfapprox.operators.chord",
                                    "sfapprox.operators.hybrid", "sfapprox.operators.sparse", "sfapprox.operators.monarch",
                                    "sfapprox.operators.butterfly", "sfapprox.operators._base"])
def test_docstring_examples_run(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_threaded_blocks_match(monkeypatch):
    if not _apply._numba_kernels():
        pytest.skip("numba is not available")
    monkeypatch.setattr(_apply, "BACKEND", "numba")
    monkeypatch.setattr(_apply, "THREADS", 2)
    monkeypatch.setattr(_apply, "PARALLEL_MIN_WORK", 0)
    assert _apply._threads_for(1, np.ones(5)) == 1  # a vector never goes to threads
    for support, n in (("chord", 40), ("butterfly", 32)):
        stack, D = _stack(support, n, np.random.default_rng(n))
        B = np.random.default_rng(1).standard_normal((n, 70))
        assert _apply._threads_for(1, B) == 2
        np.testing.assert_allclose(stack.apply(B), D @ B, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(stack.apply(B, transpose=True), D.T @ B, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("support", "n"), [("chord", 40), ("symmetric", 13), ("butterfly", 32)])
def test_wide_blocks_go_in_chunks(monkeypatch, support, n):
    # A block wider than CHUNK_COLUMNS goes through the kernels a chunk at a time (the last one
    # narrower, down to the vector kernel's width): the same product as in one piece.
    if not _apply._numba_kernels():
        pytest.skip("numba is not available")
    monkeypatch.setattr(_apply, "BACKEND", "numba")
    monkeypatch.setattr(_apply, "CHUNK_COLUMNS", 8)
    widths = []
    kernels = _apply._numba_kernels()
    # Columns of each kernel call: (N, c) blocks for the block kernels, (c, N) for the column-wise one.
    for name, columns in (("offset_mat", lambda x: x.shape[1]), ("butterfly_mat", lambda x: x.shape[1]),
                          ("offset_cols", lambda x: x.shape[0])):
        real = getattr(kernels, name)
        monkeypatch.setattr(kernels, name,
                            lambda *a, _real=real, _columns=columns: widths.append(_columns(a[-2])) or _real(*a))
    stack, D = _stack(support, n, np.random.default_rng(n))
    B = np.random.default_rng(2).standard_normal((n, 19))
    for transpose, R in ((False, D), (True, D.T)):
        widths.clear()
        np.testing.assert_allclose(stack.apply(B, transpose), R @ B, rtol=1e-10, atol=1e-10)
        assert widths == [8, 8, 3]
