"""Synthetic generators: shapes, finiteness, planted structure, entropy against beta."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sfapprox import ParameterError
from sfapprox.chord import chord_offsets
from sfapprox.datasets import synthetic as syn
from sfapprox.datasets.manifest import load_manifest

SMALL = {
    "random_sparse": {"n": 24, "density": 0.1},
    "low_rank_plus_sparse": {"n": 24, "rank": 3},
    "banded": {"n": 24, "bandwidth": 2},
    "circulant": {"n": 24},
    "chord_product": {"n": 24},
    "covariance": {"n": 24, "n_samples": 50},
    "edge_image": {"n": 24},
    "attention": {"n": 24, "beta": 2.0},
}


def dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


@pytest.mark.parametrize("name", sorted(syn.GENERATORS))
def test_every_generator_square_finite_and_deterministic(name):
    a = syn.generate(name, SMALL[name])
    b = syn.generate(name, SMALL[name])
    A = dense(a.matrix)
    assert A.shape == (24, 24)
    assert np.all(np.isfinite(A))
    assert np.array_equal(A, dense(b.matrix))
    assert a.info["generator"] == name and a.info["n"] == 24


def test_every_generator_has_a_small_parameter_set():
    assert set(SMALL) == set(syn.GENERATORS)


def test_random_sparse_draws_the_matrix_sp_random_drew():
    """``random_sparse`` moved from ``sp.random`` to ``sp.random_array`` (scipy 1.12, which pyproject now
    requires): a seed still gives the matrix it gave before."""
    rng = np.random.default_rng(5)
    before = sp.random(30, 30, density=0.2, random_state=rng, data_rvs=rng.standard_normal, format="csr")
    g = syn.random_sparse(30, 0.2, seed=5)
    assert isinstance(g.matrix, sp.csr_array) and g.matrix.nnz == 180
    np.testing.assert_array_equal(g.matrix.toarray(), before.toarray())


@pytest.mark.parametrize("symmetric", [False, True])
def test_random_sparse_holds_an_entry_at_the_smallest_n(symmetric):
    """At n = 2 and the default density 0.05, round(0.05 * 4) = 0 entries: an all-zero matrix."""
    for n in (2, 3, 4):
        A = syn.random_sparse(n, symmetric=symmetric).matrix
        assert A.count_nonzero() >= 1, n
    assert syn.random_sparse(30, 0.2, seed=5).matrix.nnz == round(0.2 * 900)  # a density that stores some: as asked


def test_seed_changes_the_matrix():
    assert not np.array_equal(syn.banded(16, seed=0).matrix, syn.banded(16, seed=1).matrix)


def test_low_rank_plus_sparse_plants_rank_and_spikes():
    g = syn.low_rank_plus_sparse(40, rank=3, density=0.02, sparse_scale=10.0, seed=1)
    assert g.info["n_sparse"] == 32
    # Without the spikes the matrix has exactly the planted rank.
    clean = syn.low_rank_plus_sparse(40, rank=3, density=0.0, seed=1).matrix
    assert np.linalg.matrix_rank(clean) == 3
    spikes = g.matrix - clean
    assert np.count_nonzero(np.abs(spikes) > 1e-12) == 32
    assert np.allclose(np.abs(spikes[np.abs(spikes) > 1e-12]), 10.0)


def test_banded_and_circulant_structure():
    B = syn.banded(20, bandwidth=2).matrix
    i, j = np.indices(B.shape)
    assert np.all(B[np.abs(i - j) > 2] == 0) and np.all(B[np.abs(i - j) <= 2] != 0)
    C = syn.circulant(12).matrix
    for r in range(1, 12):
        assert np.allclose(C[r], np.roll(C[0], r))


def test_single_chord_factor_has_chord_support():
    g = syn.chord_product(32, n_factors=1, seed=2)
    offsets = chord_offsets(32)
    support = np.zeros((32, 32), bool)
    for d in offsets:
        support[np.arange(32), (np.arange(32) + d) % 32] = True
    assert np.all(g.matrix[~support] == 0)
    assert np.all(g.matrix[support] != 0)
    assert g.info["offsets"] == offsets.tolist()


def test_chord_product_is_reproduced_by_its_factors():
    import torch

    from sfapprox.sf._kernels import chord_product

    n, m = 16, 4
    offsets = chord_offsets(n)
    rng = np.random.default_rng(5)
    values = rng.standard_normal((m, n, len(offsets))) / np.sqrt(len(offsets))
    expected = chord_product(torch.as_tensor(values), offsets.tolist()).numpy()
    assert np.allclose(syn.chord_product(n, m, seed=5).matrix, expected)


def test_covariance_is_symmetric_positive_semidefinite():
    C = syn.covariance(30, n_samples=100, n_latent=3).matrix
    assert np.allclose(C, C.T)
    assert np.linalg.eigvalsh(C).min() > -1e-9


def test_edge_image_is_piecewise_constant_and_gradient_sits_on_edges():
    img = syn.edge_image(48, seed=3).matrix
    assert 0.0 <= img.min() and img.max() <= 1.0
    assert len(np.unique(img)) <= 9  # background + 8 shapes
    grad = syn.edge_image(48, gradient=True, seed=3).matrix
    assert grad.min() >= 0.0
    assert 0.0 < np.mean(grad > 0) < 0.6  # zero inside the shapes


def test_attention_is_row_stochastic_with_entropy_recorded():
    g = syn.attention(40, beta=3.0)
    assert np.allclose(g.matrix.sum(axis=1), 1.0)
    assert g.matrix.min() > 0
    assert g.info["mean_row_entropy"] == pytest.approx(syn.row_entropy(g.matrix).mean())
    assert 0 < g.info["mean_row_entropy"] < np.log(40)


def test_attention_entropy_decreases_with_beta():
    betas = [0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32]
    entropies = [syn.attention(64, b, seed=4).info["mean_row_entropy"] for b in betas]
    assert all(a > b for a, b in zip(entropies, entropies[1:]))
    assert entropies[0] > 0.9 * np.log(64)  # nearly uniform rows
    assert entropies[-1] < 0.5  # nearly one-hot rows


@settings(max_examples=15, deadline=None)
@given(beta=st.floats(0.01, 50.0), n=st.integers(2, 40), seed=st.integers(0, 1000))
def test_attention_rows_sum_to_one_for_any_beta(beta, n, seed):
    P = syn.attention(n, beta, seed=seed).matrix
    assert np.all(np.isfinite(P))
    assert np.allclose(P.sum(axis=1), 1.0)


def test_synthetic_manifest_attention_entropy_decreases():
    m = load_manifest(Path(__file__).resolve().parents[1] / "sfapprox" / "datasets" / "manifests" / "synthetic.toml")
    att = sorted((e.params["beta"], syn.generate(e.generator, e.params).info["mean_row_entropy"])
                 for e in m.entries if e.generator == "attention")
    assert len(att) >= 5
    assert all(a[1] > b[1] for a, b in zip(att, att[1:]))
    assert all(16 <= e.params["n"] <= 256 for e in m.entries)


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("banded", {"bandwidth": 2}, "parameter 'n'"),
        ("banded", {"n": 8, "width": 2}, r"unknown parameter 'width' \(known: n, bandwidth, seed\)"),
        ("nope", {"n": 8}, "unknown generator 'nope'; known: random_sparse"),
        ("attention", {"n": 8, "beta": 0.0}, "beta=0.0 must be positive"),
        ("low_rank_plus_sparse", {"n": 8, "rank": 9}, "rank=9 must be between 1 and n=8"),
        ("random_sparse", {"n": 1}, r"n=1 must be an integer >= 2"),
        # made NaN/inf entries ("unavailable", retried every run) or ran for minutes
        ("circulant", {"n": 64, "decay": -200.0}, r"decay=-200.0 makes entries .* must be at most 300"),
        ("attention", {"n": 16, "spread": 1e300}, r"spread=1e\+300 must be between 0.0 and 1000000.0"),
        ("attention", {"n": 16, "beta": 1e300}, r"beta=1e\+300 must be between"),
        ("low_rank_plus_sparse", {"n": 16, "sparse_scale": 1e308}, r"sparse_scale=1e\+308 must be between"),
        ("edge_image", {"n": 16, "n_shapes": 10**9}, r"n_shapes=1000000000 must be <= 100,000 at n=16"),
    ],
)
def test_generate_rejects_bad_parameters(name, params, match):
    with pytest.raises(ParameterError, match=match):
        syn.generate(name, params)


def test_generate_refuses_a_matrix_over_the_memory_limit_before_making_it():
    from sfapprox import ResourceError
    from sfapprox.datasets.synthetic import generate, generator_peak_bytes

    assert generator_peak_bytes("banded", {"n": 1000}) == 4 * 8 * 1000 * 1000
    assert generator_peak_bytes("random_sparse", {"n": 1000, "density": 0.01}) < 10**6
    with pytest.raises(ResourceError, match=r"generator 'banded' with n=10000000 needs about .* over the memory limit of 1.0 MiB"):
        generate("banded", {"n": 10_000_000}, max_memory=2**20)  # 1.4 PiB of index grid before
    assert generate("banded", {"n": 64}, max_memory=2**20).matrix.shape == (64, 64)
    # the parameters that size a generator's other arrays count too: numpy's MemoryError came first
    for name, params in (("attention", {"n": 16, "dim": 10**9}), ("covariance", {"n": 16, "n_latent": 10**9}),
                         ("chord_product", {"n": 16, "n_factors": 10**8})):
        assert generator_peak_bytes(name, params) > 10**10
        with pytest.raises(ResourceError, match=rf"generator '{name}' with n=16 needs about"):
            generate(name, params, max_memory=2**30)
    for name in ("attention", "covariance", "chord_product"):  # the defaults still fit a small limit
        assert generate(name, {"n": 32}, max_memory=2**22).matrix.shape == (32, 32)
