"""Randomized SVD from products: TSVD's answer on low-rank matrices, from any source, within its time."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sfapprox import BudgetError
from sfapprox.baselines.rsvd import RandomizedSVD, randomized_svd
from sfapprox.baselines.tsvd import TruncatedSVD
from sfapprox.sources import KernelMatrix


def test_exact_rank_is_recovered():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 5)) @ rng.standard_normal((5, 80))
    est = RandomizedSVD(n_components=5).fit(X)
    assert np.allclose(est.to_dense(), X, atol=1e-9) and est.n_stored_ == 5 * 161


def test_close_to_tsvd_on_a_kernel_and_the_same_from_columns():
    K = KernelMatrix(np.random.default_rng(1).standard_normal((400, 3)), bandwidth=0.6)
    X = K.to_dense()
    exact = TruncatedSVD(n_components=20).fit(X)
    from_columns = RandomizedSVD(n_components=20, n_iter=3).fit(K)
    in_memory = RandomizedSVD(n_components=20, n_iter=3).fit(X)
    e_exact = np.linalg.norm(X - exact.to_dense())
    assert np.linalg.norm(X - from_columns.to_dense()) <= 1.05 * e_exact
    assert np.allclose(from_columns.to_dense(), in_memory.to_dense(), atol=1e-8)
    assert RandomizedSVD(n_components=3).fit(sp.csr_array(X)).n_stored_ == 3 * 801


def test_power_iterations_that_do_not_fit_are_skipped(fake_clock, monkeypatch):
    X = np.random.default_rng(2).random((50, 50))

    def slow(B):
        fake_clock.advance(1.0)  # one "second" per pass over X
        return X @ B

    from sfapprox import _timing

    U, s, Vt, done = randomized_svd(slow, slow, 50, 3, n_iter=5, deadline=_timing.Deadline.after(4.5))
    assert done == 1 and fake_clock.time <= 4.5  # sketch + 2 passes + the final pass
    assert U.shape == (50, 3)


def test_budget_refused():
    with pytest.raises(BudgetError, match="below one rank"):
        RandomizedSVD(budget=10).fit(np.eye(20))
