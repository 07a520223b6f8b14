"""Randomized SVD from products: TSVD's answer on low-rank matrices, from any source, within its time."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sfapprox import BudgetError, ConvergenceWarning, _timing
from sfapprox.baselines.rsvd import RandomizedSVD, one_pass_nystrom, randomized_svd
from sfapprox.baselines.tsvd import TruncatedSVD
from sfapprox.sources import MIN_BLOCK, KernelMatrix, MatrixSource


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
    with pytest.raises(BudgetError, match="budget 10 is below the smallest fit of a 20 x 20 matrix \\(one rank"):
        RandomizedSVD(budget=10).fit(np.eye(20))


def test_zero_components_is_the_zero_matrix_as_in_tsvd():
    """n_components=0 said "budget None is below one rank" (no budget was given); TruncatedSVD gives the zero
    matrix, and so does RandomizedSVD now, without a pass over X."""

    class Unread(MatrixSource):
        def _columns(self, J):
            raise AssertionError("a rank-0 fit read columns")

    X = np.random.default_rng(4).random((8, 8))
    tsvd = TruncatedSVD(n_components=0).fit(X)
    for given in (X, Unread(8)):
        est = RandomizedSVD(n_components=0).fit(given)
        assert (est.rank_, est.n_stored_, est.stop_reason_) == (tsvd.rank_, tsvd.n_stored_, tsvd.stop_reason_)
        assert est.params_["passes"] == 0 and not est.to_dense().any() and est.to_dense().shape == (8, 8)


def test_one_pass_nystrom_recovers_low_rank_and_a_zero_matrix():
    rng = np.random.default_rng(3)
    G = rng.standard_normal((60, 4))
    omega = rng.standard_normal((60, 9))
    psd = G @ G.T
    U, s, Vt = one_pass_nystrom(psd @ omega, omega, 4)
    assert np.allclose((U * s) @ Vt, psd, atol=1e-9) and np.all(s >= 0)
    # A zero sketch (a linear kernel of zero points): its Cholesky factorisation failed
    U, s, Vt = one_pass_nystrom(np.zeros((60, 9)), omega, 4)
    assert np.all(s == 0) and np.all(np.isfinite(U))


class _TimedKernel(KernelMatrix):
    """A kernel whose every pass over its columns takes one second of the fake clock."""

    def __init__(self, points, clock, **kw):
        super().__init__(points, **kw)
        self.clock = clock

    def _columns(self, J):
        self.clock.advance(J.size / self.n)
        return super()._columns(J)


def test_a_second_pass_that_does_not_fit_is_not_made_on_a_kernel(fake_clock):
    """At N = 65,536 a pass took 110 s and the fit made a second one under a 120 s limit (227.5 s in all);
    a symmetric source now ends from its sketch (Nystrom's single-pass form) within the limit."""
    points = np.random.default_rng(4).standard_normal((300, 3))
    K = _TimedKernel(points, fake_clock, bandwidth=1.5)
    est = RandomizedSVD(n_components=10, time_limit=1.5).fit(K)
    assert fake_clock.time <= 1.5 + 1e-9
    assert est.params_["passes"] == 1 and est.params_["one_pass"] == "nystrom"
    assert est.stop_reason_ == "time_limit" and est.n_stored_ == 10 * 601
    X = KernelMatrix(points, bandwidth=1.5).to_dense()
    one = np.linalg.norm(X - est.to_dense())
    best = np.linalg.norm(X - TruncatedSVD(n_components=10).fit(X).to_dense())
    assert best <= one <= 3 * best
    # With time for two passes the usual fit runs, and is better.
    fake_clock.time = 0.0
    two = RandomizedSVD(n_components=10, time_limit=2.5).fit(K)
    assert two.params_["passes"] == 2 and "one_pass" not in two.params_
    assert np.linalg.norm(X - two.to_dense()) < one


class _NarrowTimedKernel(_TimedKernel):
    """:class:`_TimedKernel` read in the narrowest blocks: several per pass."""

    def block_width(self, max_memory=None, *, extra_columns=0):
        return MIN_BLOCK


def test_a_kernel_whose_one_pass_does_not_fit_is_cut_within_the_limit(fake_clock):
    """At N = 20,000 rsvd's one pass (Nystrom's form) took 10 s of a 3 s limit: the pass now stops where
    the next block would not fit, the approximation made from the columns read, and it says so."""
    points = np.random.default_rng(4).standard_normal((600, 3))
    K = _NarrowTimedKernel(points, fake_clock, bandwidth=1.5)
    with pytest.warns(ConvergenceWarning, match=r"cut at 256 of 600 columns"):
        est = RandomizedSVD(n_components=10, time_limit=0.5).fit(K)
    assert fake_clock.time <= 0.5 + 1e-9  # a pass is 1 s
    assert est.stop_reason_ == "time_limit" and est.params_["columns_read"] == 256
    assert est.params_["one_pass"] == "nystrom" and est.n_stored_ == 10 * 1201
    X = KernelMatrix(points, bandwidth=1.5).to_dense()
    best = np.linalg.norm(X - TruncatedSVD(n_components=10).fit(X).to_dense())
    assert best <= np.linalg.norm(X - est.to_dense()) <= 5 * best


def test_a_matrix_not_known_symmetric_still_gets_its_second_pass(fake_clock):
    X = np.random.default_rng(5).random((50, 50))

    def slow(B):
        fake_clock.advance(1.0)
        return X @ B

    U, s, Vt, done = randomized_svd(slow, slow, 50, 3, n_iter=2, deadline=_timing.Deadline.after(1.5))
    assert done == 0 and fake_clock.time == 2.0  # one pass cannot give a non-symmetric matrix's row space
    fake_clock.time = 0.0
    S = X @ X.T
    U, s, Vt, done = randomized_svd(lambda B: (fake_clock.advance(1.0), S @ B)[1], None, 50, 3, n_iter=2,
                                    deadline=_timing.Deadline.after(1.5), psd=True)
    assert fake_clock.time == 1.0 and np.allclose(Vt, U.T)  # from the sketch alone


def test_a_symmetric_source_that_is_not_psd_takes_the_co_range_sketch(fake_clock):
    """Halko et al.'s one-pass core for a symmetric matrix gave 2.6 where two passes gave 0.008."""
    rng = np.random.default_rng(8)
    Q, _ = np.linalg.qr(rng.standard_normal((300, 300)))
    X = (Q * (0.9 ** np.arange(300) * (-1.0) ** np.arange(300))) @ Q.T
    source = _TimedArray(X, fake_clock)
    source.symmetric = True
    est = RandomizedSVD(n_components=20, time_limit=1.5).fit(source)
    assert est.params_["one_pass"] == "co-range"
    assert np.linalg.norm(X - est.to_dense()) / np.linalg.norm(X) < 0.5


def test_a_zero_kernel_ends_after_one_pass(fake_clock):
    K = _TimedKernel(np.zeros((40, 2)), fake_clock, kernel="linear")
    est = RandomizedSVD(n_components=2, time_limit=1.5).fit(K)
    assert est.params_["one_pass"] == "nystrom" and np.all(est.to_dense() == 0)


def test_sources_with_cheap_products_make_their_two_passes(fake_clock):
    from sfapprox.sources import CovarianceMatrix

    class Slow(CovarianceMatrix):  # each product a second of the fake clock
        def matmat(self, B):
            fake_clock.advance(1.0)
            return super().matmat(B)

        rmatmat = matmat

    C = Slow(np.random.default_rng(9).standard_normal((30, 80)))
    # past the limit, and it says so: the fewest passes it has did not fit
    with pytest.warns(ConvergenceWarning, match=r"took [\d.]+ s of time_limit=1.5 s: its fewest passes over X \(2: the "
                                                r"sketch and Q\^T X\) did not fit"):
        est = RandomizedSVD(n_components=3, time_limit=1.5).fit(C)
    assert est.params_["passes"] == 2 and "one_pass" not in est.params_


def test_a_fit_within_its_limit_does_not_warn(fake_clock):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = RandomizedSVD(n_components=3, time_limit=60.0).fit(_low_rank_plus_noise(n=60, r=3))
    assert est.n_iter_ == 2


class _TimedArray(MatrixSource):
    """A matrix of unknown symmetry read by columns, each pass one second of the fake clock."""

    def __init__(self, X, clock):
        super().__init__(X.shape[0], name="timed")
        self.X, self.clock = X, clock

    def block_width(self, max_memory=None, *, extra_columns=0):
        return MIN_BLOCK  # the narrowest blocks: several per pass

    def _columns(self, J):
        self.clock.advance(J.size / self.n)
        return self.X[:, J]


def _low_rank_plus_noise(n=300, r=6, seed=6):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, r)) @ rng.standard_normal((r, n)) + 0.01 * rng.standard_normal((n, n))


def test_a_matrix_of_unknown_symmetry_ends_after_one_pass_with_its_co_range_sketch(fake_clock):
    """The first block's time says two passes would not fit: the pass takes the co-range sketch too."""
    import tracemalloc

    from sfapprox._base import get_method

    X = _low_rank_plus_noise()
    source = _TimedArray(X, fake_clock)
    tracemalloc.start()
    try:
        est = RandomizedSVD(n_components=6, time_limit=1.5).fit(source)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.params_["passes"] == 1 and est.params_["one_pass"] == "co-range"
    block = source.block_width() * 8 * 300 * source.column_copies
    assert peak <= get_method("rsvd").columns_memory(300, est.n_stored_) + block  # what a comparison checks
    assert fake_clock.time <= 1.5  # one pass and its first block read again
    best = np.linalg.norm(X - TruncatedSVD(n_components=6).fit(X).to_dense())
    assert np.linalg.norm(X - est.to_dense()) <= 2 * best  # one pass pays for it (1.7x here)
    # With time for two passes: the usual fit, the same numbers as without any limit.
    fake_clock.time = 0.0
    two = RandomizedSVD(n_components=6, time_limit=10.0).fit(_TimedArray(X, fake_clock))
    fake_clock.time = 0.0
    free = RandomizedSVD(n_components=6, time_limit=None).fit(_TimedArray(X, fake_clock))
    assert "one_pass" not in two.params_ and two.params_["passes"] == 6
    np.testing.assert_array_equal(two.to_dense(), free.to_dense())


def test_the_co_range_pass_on_an_executor_gives_the_local_numbers(fake_clock):
    from concurrent.futures import ThreadPoolExecutor

    from sfapprox.sources import DistributedSource

    X = _low_rank_plus_noise(seed=7)
    local = RandomizedSVD(n_components=6, time_limit=1.5).fit(_TimedArray(X, fake_clock))
    fake_clock.time = 0.0
    with ThreadPoolExecutor(2) as pool:
        remote = RandomizedSVD(n_components=6, time_limit=1.5).fit(DistributedSource(_TimedArray(X, fake_clock), pool))
    assert remote.params_["one_pass"] == local.params_["one_pass"] == "co-range"
    np.testing.assert_array_equal(remote.to_dense(), local.to_dense())


def test_sources_with_products_of_their_own_are_not_read_by_columns():
    from sfapprox.sources import ArraySource, SparseSource

    assert not ArraySource(np.eye(4)).products_by_columns and not SparseSource(sp.eye(4, format="csr")).products_by_columns
    assert KernelMatrix(np.eye(4)).products_by_columns


def test_a_co_range_sketch_taken_ends_the_fit_after_its_pass(fake_clock):
    """The first block looked slow (a cold cache): the co-range was taken, and the pass then fitted twice
    over; the fit went on to a second pass, slower than before and with fewer power iterations."""
    X = _low_rank_plus_noise(seed=10)
    source = _TimedArray(X, fake_clock)
    first = [True]
    read = source._columns

    def slow_first(J):
        if first[0]:
            first[0] = False
            fake_clock.advance(3.0)
        return read(J)

    source._columns = slow_first
    est = RandomizedSVD(n_components=6, time_limit=6.0).fit(source)
    assert est.params_["one_pass"] == "co-range" and est.params_["passes"] == 1
    assert fake_clock.time <= 6.0


def test_on_an_executor_the_passes_give_the_local_numbers_with_a_time_limit():
    from concurrent.futures import ThreadPoolExecutor

    from sfapprox.sources import AttentionMatrix, DistributedSource

    rng = np.random.default_rng(11)
    A = AttentionMatrix(rng.standard_normal((300, 8)), rng.standard_normal((300, 8)))
    A.max_memory = 1 << 20  # several blocks (of 109 columns), and room for what the fit keeps
    local = RandomizedSVD(n_components=5, time_limit=None).fit(A)
    with ThreadPoolExecutor(2) as pool:
        remote = RandomizedSVD(n_components=5, time_limit=600.0).fit(DistributedSource(A, pool))
    np.testing.assert_array_equal(remote.to_dense(), local.to_dense())


def test_a_mapped_array_on_an_executor_is_read_by_columns_here(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from sfapprox.sources import DistributedSource, open_npy

    np.save(tmp_path / "x.npy", np.random.default_rng(12).random((50, 50)))
    mapped = open_npy(tmp_path / "x.npy")
    with ThreadPoolExecutor(1) as pool:
        wrapped = DistributedSource(mapped, pool)
        assert mapped.products_by_columns and wrapped.products_by_columns and wrapped.pass_source is mapped


def test_a_cut_pass_reads_columns_from_all_of_the_matrix(fake_clock):
    """Cut by the time limit, the pass read the first columns in their order: on points sorted by position,
    one end of the matrix alone (its approximation knew nothing of the other).  Its blocks are taken in a
    seeded random order under a deadline, so the columns read spread over the whole matrix."""
    from sfapprox.baselines.rsvd import nystrom_pass

    points = np.sort(np.random.default_rng(6).uniform(0, 30, 600))[:, None]
    K = _NarrowTimedKernel(points, fake_clock, bandwidth=1.0)
    omega = np.random.default_rng(0).standard_normal((600, 20))
    kept, cut_omega = omega.copy(), omega.copy()
    Y, read = nystrom_pass(K, cut_omega, _timing.Deadline.after(0.5), seed=3)
    assert read == 256
    columns = np.flatnonzero(np.any(cut_omega != 0, axis=1))
    assert columns.size == 256 and columns.min() < 150 and columns.max() > 450  # from both ends
    assert np.allclose(Y, K.to_dense() @ cut_omega)  # still exactly X @ omega for the rows kept
    whole, read = nystrom_pass(K, kept, None)
    assert read == 600 and np.array_equal(kept, omega)  # no deadline: the whole pass, in order


def test_singular_values_that_carry_nothing_are_not_stored():
    """As TruncatedSVD: a zero matrix stored rank 9 of zeros (297 numbers at N = 16), a rank-one matrix its
    round-off singular values; only the rank that carries something is kept and charged."""
    n = 16
    zero = RandomizedSVD(budget=320).fit(np.zeros((n, n)))
    assert (zero.rank_, zero.n_stored_, zero.operator_.n_stored, zero.params_["rank_budget"]) == (0, 0, 0, 9)
    X = np.outer(np.arange(1.0, n + 1), np.ones(n))
    one = RandomizedSVD(n_components=4).fit(X)
    assert (one.rank_, one.n_stored_, one.operator_.n_stored) == (1, 2 * n + 1, 2 * n + 1)
    assert np.linalg.norm(X - one.operator_.to_dense()) < 1e-12 * np.linalg.norm(X)


@pytest.mark.parametrize("given", [False, True])
def test_the_sketch_is_let_go_before_the_power_iterations(given):
    """The sketch ``Y = X Omega`` (N x (r + 10)) was held by the tuple it came in through every power
    iteration and the final pass: every randomized SVD (rsvd, tsvd above N = 2,048, NMF's, RPCA's and
    Monarch+LR's starts) peaked N (r + 10) numbers higher (7 MB at N = 1,500, rank 600)."""
    import weakref

    from sfapprox.baselines.rsvd import _passes

    X = np.random.default_rng(0).standard_normal((60, 60))
    sketches, alive = [], []

    def apply(B):
        out = X @ B
        if not sketches:  # the first product is the sketch (no first_pass given)
            sketches.append(weakref.ref(out))
        return out

    def apply_t(B):
        alive.append(any(ref() is not None for ref in sketches))
        return X.T @ B

    def first_pass(omega):
        Y = X @ omega
        sketches.append(weakref.ref(Y))
        return Y, None, None

    U, s, Vt, done, passes = _passes(apply, apply_t, 60, 5, n_oversamples=10, n_iter=2, seed=0, deadline=None,
                                     psd=False, first_pass=first_pass if given else None)
    assert done == 2 and alive and not any(alive)


def test_a_long_overrun_is_said_in_whole_seconds(fake_clock, monkeypatch):
    """The warning wrote 1,200 s with ``.3g``: "took 1.2e+03 s of time_limit=900 s"."""
    import types

    from sfapprox.baselines import rsvd
    from sfapprox.sources import CovarianceMatrix

    # the fit's own seconds (seconds_) are read from time.perf_counter: its two reads 1,200 s apart
    reads = iter([0.0, 1200.0])
    monkeypatch.setattr(rsvd, "time", types.SimpleNamespace(perf_counter=lambda: next(reads)))

    class Slow(CovarianceMatrix):  # each product ten minutes of the fake clock
        def matmat(self, B):
            fake_clock.advance(600.0)
            return super().matmat(B)

        rmatmat = matmat

    C = Slow(np.random.default_rng(9).standard_normal((30, 80)))
    with pytest.warns(ConvergenceWarning, match=r"took 1,200 s of time_limit=900 s: its fewest passes"):
        RandomizedSVD(n_components=3, time_limit=900).fit(C)
