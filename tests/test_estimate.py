"""Streamed and estimated errors: exact when every column is seen, honest intervals otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import random_array

from sfapprox import InputError
from sfapprox.estimate import MIN_SAMPLE, _estimate, estimate_errors
from sfapprox.sources import ArraySource, KernelMatrix


def _kernel_and_rank(n=800, rank=10, seed=0):
    rng = np.random.default_rng(seed)
    P = np.concatenate([rng.standard_normal((n // 5, 4)) * 0.6 + rng.standard_normal(4) * 3 for _ in range(5)])
    K = KernelMatrix(P, bandwidth=1.0)
    X = K.to_dense()
    U, s, Vt = np.linalg.svd(X)
    return K, X, (U[:, :rank] * s[:rank]) @ Vt[:rank]


def test_a_full_pass_is_exact():
    K, X, A = _kernel_and_rank(400)
    est = estimate_errors(K, {"a": A, "zero": np.zeros_like(X)}, time_limit=None, max_memory=400 * 8 * 64 * 16)
    assert est["a"].exact and est["a"].columns == 400 and est["a"].fro_interval is None
    assert est["a"].fro_error == pytest.approx(np.linalg.norm(X - A), rel=1e-12)
    assert est["a"].rel_error == pytest.approx(np.linalg.norm(X - A) / np.linalg.norm(X), rel=1e-12)
    assert est["zero"].rel_error == pytest.approx(1.0)


@pytest.mark.parametrize("scale, word", [(1e-300, "too small"), (1e-160, "too small")])
def test_a_pass_over_a_matrix_whose_squares_underflow_refuses_it(scale, word):
    """A matrix never formed is not refused when opened, as one in memory is: its squares underflowed to 0
    in the pass, which scored it as the zero matrix fitted exactly (0.0, None)."""
    X = np.random.default_rng(0).standard_normal((40, 40)) * scale
    with pytest.raises(InputError, match=word):
        estimate_errors(ArraySource(X), {"zero": np.zeros_like(X)})
    # an accepted scale is scored, and the zero matrix still is what it is
    est = estimate_errors(ArraySource(X / scale * 1e-150), {"zero": np.zeros_like(X)})
    assert est["zero"].rel_error == pytest.approx(1.0)
    zero = estimate_errors(ArraySource(np.zeros((40, 40))), {"zero": np.zeros((40, 40))})["zero"]
    assert (zero.fro_error, zero.rel_error) == (0.0, None)


def test_sampling_stops_at_the_time_limit_or_the_tolerance(fake_clock, monkeypatch):
    K, X, A = _kernel_and_rank()
    import sfapprox.sources._base as base

    real = base.MatrixSource.columns

    def one_second_per_block(self, J):
        fake_clock.advance(1.0)
        return real(self, J)

    monkeypatch.setattr(base.MatrixSource, "columns", one_second_per_block)
    memory = 800 * 8 * 64 * 16  # blocks of 64 columns: a full pass would take 12.5 "seconds"
    timed = estimate_errors(K, {"a": A}, time_limit=11.0, rtol=1e-9, max_memory=memory, seed=3)["a"]
    assert not timed.exact and timed.columns == 11 * 64  # the 12th block would have ended after the limit
    lo, hi = timed.fro_interval
    assert lo <= timed.fro_error <= hi and lo <= np.linalg.norm(X - A) <= hi
    loose = estimate_errors(K, {"a": A}, time_limit=11.0, rtol=1.0, max_memory=memory, seed=3)["a"]
    assert loose.columns == MIN_SAMPLE  # narrow enough once the least sample is in
    full = estimate_errors(K, {"a": A}, time_limit=13.0, max_memory=memory)["a"]
    assert full.exact and full.columns == 800


def test_the_first_block_times_the_pass_before_it_overruns_the_limit(fake_clock, monkeypatch):
    """Blocks sized by the memory limit alone: the first (2,527 columns of a graph of N = 100,000, SF's 14
    factors) took 99 s of a 30 s scoring limit before the pass looked at the clock.  Here each column "takes"
    1 s and the memory allows all 800 in one block: the first block is a short one, the rest are cut to the
    time left, and the pass ends within the limit."""
    K, X, A = _kernel_and_rank()
    import sfapprox.sources._base as base

    real = base.MatrixSource.columns

    def one_second_per_column(self, J):
        fake_clock.advance(float(len(J)))
        return real(self, J)

    monkeypatch.setattr(base.MatrixSource, "columns", one_second_per_column)
    timed = estimate_errors(K, {"a": A}, time_limit=100.0, rtol=1e-9, max_memory=1 << 30, seed=3)["a"]
    assert not timed.exact and timed.columns == 100 and fake_clock() <= 100.0
    lo, hi = timed.fro_interval
    assert lo <= timed.fro_error <= hi


def test_the_intervals_hold_the_exact_error_about_95_percent_of_the_time():
    K, X, A = _kernel_and_rank()
    E = X - A
    e, x = (E**2).sum(0), (X**2).sum(0)
    fro, rel = np.sqrt(e.sum()), np.sqrt(e.sum() / x.sum())
    rng = np.random.default_rng(0)
    cover_f = cover_r = 0
    repeats = 300
    for _ in range(repeats):
        J = rng.choice(e.size, 256, replace=False)
        est = _estimate(e[J], x[J], e.size, None)
        cover_f += est.fro_interval[0] <= fro <= est.fro_interval[1]
        cover_r += est.rel_interval[0] <= rel <= est.rel_interval[1]
    # 95 % nominal; a test that can fail: a broken standard error gives far less (or 100 %).
    assert 0.90 <= cover_f / repeats <= 0.99 and 0.90 <= cover_r / repeats <= 0.99


def test_a_known_norm_only_carries_the_errors_uncertainty():
    e, x = np.tile([3.0, 5.0], 50), np.full(100, 16.0)
    est = _estimate(e[:50], x[:50], 100, fro_norm=40.0)
    assert est.fro_error == pytest.approx(20.0) and est.rel_error == pytest.approx(0.5)
    assert est.rel_interval == pytest.approx((est.fro_interval[0] / 40.0, est.fro_interval[1] / 40.0))
    assert _estimate(e, x, 100, None).exact


@pytest.mark.parametrize("value", [0.0, 4.0])
def test_columns_all_alike_bound_nothing_about_the_others(value):
    """Every sampled column exact (a sparse surrogate that missed 4 of 20,006 entries) made "0 ± 0", and
    the verdict said the surrogate reproduced X exactly (its relative error 0.014): a sample without
    spread says nothing of the columns not seen, so no upper end, and every column is advised."""
    est = _estimate(np.full(300, value), np.ones(300), 20_000, None)
    assert est.fro_interval[1] == np.inf and est.rel_interval[1] == np.inf and not est.exact
    assert est.columns_advised == 20_000 and est.too_few_columns


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_an_exact_pass_on_an_executor_gives_the_local_numbers(pool):
    """The blocks of an exact pass computed elsewhere (a thread or process pool here; a Dask
    cluster has the same submit/result) add up to exactly the local run's numbers."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    from sfapprox.operators import HybridOperator

    rng = np.random.default_rng(2)
    K = KernelMatrix(rng.standard_normal((300, 3)), bandwidth=1.0)
    U, s, Vt = np.linalg.svd(K.to_dense())
    ops = {"r5": HybridOperator(300, low_rank=(U[:, :5], s[:5], Vt[:5])), "zero": np.zeros((300, 300))}
    memory = 300 * 8 * 64 * 10  # several blocks
    local = estimate_errors(K, ops, time_limit=None, max_memory=memory)
    make = (lambda: ThreadPoolExecutor(2)) if pool == "threads" else \
        (lambda: ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")))
    with make() as executor:
        remote = estimate_errors(K, ops, time_limit=None, max_memory=memory, executor=executor)
    for name in ops:
        assert remote[name] == local[name] and remote[name].exact


def test_an_exact_pass_on_a_dask_cluster():
    distributed = pytest.importorskip("dask.distributed")
    rng = np.random.default_rng(3)
    K = KernelMatrix(rng.standard_normal((200, 2)), bandwidth=1.0)
    ops = {"zero": np.zeros((200, 200))}
    local = estimate_errors(K, ops, time_limit=None, max_memory=200 * 8 * 64 * 10)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = estimate_errors(K, ops, time_limit=None, max_memory=200 * 8 * 64 * 10, executor=client)
    assert remote["zero"] == local["zero"]


def test_a_skewed_sample_gets_an_interval_reaching_further_up():
    """Squared column errors are right-skewed; the interval of their mean is moved up by the studentized
    mean's second-order quantiles (a symmetric sample keeps Student's +-t)."""
    from sfapprox.estimate import Z95, _skewness, _studentized_quantiles, _t95

    def quantiles(values):
        return _studentized_quantiles(_skewness(values), values.size)

    assert quantiles(np.array([1.0, 2.0, 3.0, 4.0, 5.0])) == pytest.approx((-_t95(5), _t95(5)))
    assert quantiles(np.full(10, 2.0)) == (-_t95(10), _t95(10))  # no spread
    e = np.random.default_rng(0).exponential(size=400) ** 2  # skewed
    low, high = quantiles(e)
    assert low < -Z95 and high < Z95
    # Hall's transformation at those points is +-t, and to first order they are the Edgeworth points
    g, m = _skewness(e), e.size
    a = g / (6 * np.sqrt(m))
    hall = lambda t: t + a * (1 + 2 * t * t) + 4 / 3 * a * a * t**3  # noqa: E731
    assert (hall(low), hall(high)) == pytest.approx((-_t95(m), _t95(m)), abs=1e-12)
    mild = np.random.default_rng(1).exponential(size=2000)  # skewness about 2: a about 0.007
    b = _skewness(mild) / (6 * np.sqrt(mild.size))
    z = _t95(mild.size)
    edgeworth = (-z - b * (2 * z**2 + 1), z - b * (2 * z**2 + 1))
    assert quantiles(mild) == pytest.approx(edgeworth, abs=100 * b * b) and quantiles(mild) != pytest.approx(edgeworth)
    # a sample far too small for the expansion: still monotone, points beyond 1.96 below
    assert _studentized_quantiles(40.0, 16)[0] < -Z95 < Z95 and _studentized_quantiles(40.0, 16)[1] < Z95
    est = _estimate(e, np.full(400, 10.0), 4000, fro_norm=None)
    lo, hi = est.fro_interval
    assert hi ** 2 - est.fro_error ** 2 > est.fro_error ** 2 - lo ** 2  # further above than below


def test_a_skewed_sample_is_not_trusted_before_cochrans_size():
    """However narrow it looks, a sample with skewness g is trusted only from 25 g^2 columns on."""
    from sfapprox.estimate import _narrow_enough, _skewness

    e = np.ones(300)
    e[:3] = 60.0  # three heavy columns in 300: skewness about 10
    x = np.full(300, 1e6)
    assert _skewness(e) > 9
    assert not _narrow_enough({"a": [e]}, [x], 10**6, 10.0, None)  # a tolerance met at once, too few columns
    est = _estimate(e, x, 10**6, None)
    assert est.too_few_columns and est.columns_advised >= 25 * 9**2 and est.to_dict()["columns_advised"] > 300
    assert not _narrow_enough({"a": [e]}, [x], 10**6, 10.0, fro_norm=1e6)
    big = np.tile(e, 10)  # the same skewness, 3,000 columns: enough
    assert _narrow_enough({"a": [big]}, [np.tile(x, 10)], 10**6, 10.0, None)
    flat = np.random.default_rng(0).uniform(1, 2, 300)
    assert _narrow_enough({"a": [flat]}, [x], 10**6, 10.0, None)
    assert not _estimate(flat, x, 10**6, None).too_few_columns and not _estimate(e, x, 300, None).too_few_columns
    assert _estimate(e, x, 1000, None).columns_advised == 1000  # never more than the columns there are


def test_an_array_is_read_as_a_source_and_a_surrogate_of_another_shape_is_refused():
    from sfapprox import ParameterError, TruncatedSVD

    X = np.random.default_rng(0).standard_normal((64, 64))
    op = TruncatedSVD(n_components=5).fit(X).operator_
    est = estimate_errors(X, {"t": op})["t"]  # an AttributeError ('no attribute n') before
    assert est.exact and est.fro_error == pytest.approx(np.linalg.norm(X - op.to_dense()), rel=1e-12)
    small = TruncatedSVD(n_components=1).fit(np.eye(8)).operator_
    with pytest.raises(ParameterError, match="surrogate 'a' is 8 x 8, the matrix 64 x 64"):
        estimate_errors(ArraySource(X), {"a": small})



def test_surrogates_in_a_list_are_refused_asking_for_names():
    from sfapprox import ParameterError

    with pytest.raises(ParameterError, match=r"operators must be a mapping of name -> surrogate operator .* got a list"):
        estimate_errors(np.eye(8), [np.zeros((8, 8))])  # an AttributeError ('no attribute items') before

@pytest.mark.parametrize("argument, value, wanted", [
    ("seed", -1, r"an int in the range \[0, 18446744073709551615\]"),  # numpy's raw ValueError before
    ("seed", 1.5, r"an int in the range \[0, 18446744073709551615\]"),  # (torch's generators: 64 bits)
    ("time_limit", -1, r"a float in the range \(0, inf\) or None"),  # taken before, as were the next four
    ("time_limit", 0, r"a float in the range \(0, inf\) or None"),
    ("max_memory", 0, r"an int in the range \[1, inf\) \(bytes\), a size such as '8G' or '500M', or None"),
    ("fro_norm", -1.0, r"a float in the range \[0, inf\) or None"),
    ("fro_norm", float("nan"), r"a float in the range \[0, inf\) or None"),
    ("rtol", float("nan"), r"a float in the range \(0, inf\)"),
])
def test_arguments_are_checked_before_any_work(argument, value, wanted):
    from sfapprox import ParameterError
    from sfapprox.sources import MatrixSource

    class Unread(MatrixSource):
        def _columns(self, J):
            raise AssertionError("a column was read before the arguments were checked")

    with pytest.raises(ParameterError, match=rf"^The '{argument}' parameter of estimate_errors must be {wanted}\. "
                                             rf"Got {value!r} instead\.$"):
        estimate_errors(Unread(8), {"zero": np.zeros((8, 8))}, **{argument: value})


def test_arguments_at_their_bounds_are_taken():
    X = np.random.default_rng(5).random((16, 16))
    est = estimate_errors(X, {"zero": np.zeros((16, 16))}, time_limit=None, seed=np.int64(3), max_memory=1 << 20,
                          fro_norm=float(np.linalg.norm(X)))["zero"]
    assert est.exact and est.rel_error == pytest.approx(1.0, rel=1e-12)
    assert estimate_errors(np.zeros((4, 4)), {"zero": np.zeros((4, 4))}, fro_norm=0.0)["zero"].fro_error == 0.0


def test_a_matrix_held_sparse_gives_its_low_rank_surrogates_exact_errors_from_its_non_zeros(monkeypatch):
    """No column is sampled for a low-rank-plus-sparse surrogate of a SparseSource (at N = 60,000 a sample of
    4,096 columns took 23 s and gave 0.997 +- 1.2e-05); a Chord product still goes by the pass, on the
    same columns as before."""

    from sfapprox.operators import ChordOperator, HybridOperator
    from sfapprox.sources import SparseSource

    n = 64
    rng = np.random.default_rng(3)
    X = random_array((n, n), density=0.1, random_state=3, format="csr")
    low = HybridOperator(n, low_rank=(rng.standard_normal((n, 3)), rng.random(3), rng.standard_normal((3, n))))
    chord = ChordOperator(np.full((6, n, 7), 1 / 7))
    dense = X.toarray()
    got = estimate_errors(SparseSource(X), {"lr": low, "sf": chord}, time_limit=None)
    assert list(got) == ["lr", "sf"]
    assert got["lr"].exact and got["lr"].by_nonzeros and got["lr"].to_dict()["by_nonzeros"] is True
    assert got["lr"].fro_error == pytest.approx(np.linalg.norm(dense - low @ np.eye(n)), rel=1e-12)
    assert got["sf"].exact and not got["sf"].by_nonzeros and "by_nonzeros" not in got["sf"].to_dict()
    assert got["sf"].fro_error == pytest.approx(np.linalg.norm(dense - chord.to_dense()), rel=1e-12)
    monkeypatch.setattr(SparseSource, "_columns", lambda self, J: pytest.fail("a column was read"))
    alone = estimate_errors(SparseSource(X), {"lr": low}, time_limit=1e-9)  # no time for a pass: none is made
    assert alone["lr"].exact and alone["lr"].fro_error == got["lr"].fro_error


def test_a_small_sample_interval_uses_students_quantile():
    """The studentized mean's spread is uncertain too: its 95 % points are Student's at ``m - 1`` degrees
    of freedom (2.26 at 10 values), and a seeded replay of 10-column samples of symmetric column errors
    holds the exact error about 95 % of the time.  With the normal's 1.96 it held 0.91 (below 0.93)."""
    from sfapprox.estimate import Z95, _studentized_quantiles, _t95

    assert _t95(10) == pytest.approx(2.2621571628, abs=1e-9) and _t95(100_000) == pytest.approx(Z95, abs=1e-4)
    assert _studentized_quantiles(0.0, 10) == pytest.approx((-2.2621571628, 2.2621571628), abs=1e-9)
    rng = np.random.default_rng(3)
    n = 20_000
    e = 1.0 + 0.2 * rng.standard_normal(n)  # squared column errors, symmetric (Hall's shift about 0)
    x = np.full(n, 10.0)
    exact = float(np.sqrt(e.sum()))
    held = 0
    for _ in range(2000):
        J = rng.choice(n, 10, replace=False)
        lo, hi = _estimate(e[J], x[J], n, fro_norm=None).fro_interval
        held += lo <= exact <= hi
    assert held / 2000 > 0.93


class _SlowKernel(KernelMatrix):
    """A kernel read in blocks of 64 columns, each whole pass 10 s of the fake clock ``clock``."""

    def __init__(self, points, clock, **kw):
        super().__init__(points, **kw)
        self.clock = clock

    def block_width(self, max_memory=None, *, extra_columns=0):
        from sfapprox.sources import MIN_BLOCK

        return MIN_BLOCK

    def _columns(self, J):
        self.clock.advance(10.0 * J.size / self.n)
        return super()._columns(J)


def test_a_fit_whose_pass_was_cut_is_scored_on_columns_it_did_not_choose(fake_clock):
    """rsvd's one pass over a kernel, cut by its time limit, took its columns in ``default_rng(seed)``'s
    order, the scoring's too: the comparison's sampled scoring then looked only at the columns the fit had
    read, where its error is lowest (rel 0.9130, interval 0.9104-0.9152, where the exact error is 0.9616)."""
    from sfapprox import compare
    from sfapprox.estimate import scoring_order

    n, bandwidth = 600, 0.6
    points = np.random.default_rng(4).standard_normal((n, 8))
    source = _SlowKernel(points, fake_clock, bandwidth=bandwidth)
    with pytest.warns(Warning, match="cut at 256 of 600"):  # (forced onto its columns by the memory limit)
        row = compare(source, ["rsvd"], budget=40 * (2 * n + 1), time_limit=5.0, max_memory="4M").results[0]
    assert row.params["columns_read"] == 256 and not row.error_estimate["exact"]
    X = KernelMatrix(points, bandwidth=bandwidth).to_dense()
    exact = np.linalg.norm(X - row.operator @ np.eye(n)) / np.linalg.norm(X)
    low, high = row.error_estimate["rel_interval"]
    assert low <= exact <= high and row.rel_error == pytest.approx(exact, rel=0.02)
    # the pass's columns (its first 256 in its own order) are not the scoring's first
    read = np.random.default_rng(0).permutation(n)[:256]
    sampled = scoring_order(n)[: row.error_estimate["columns"]]
    assert np.intersect1d(read, sampled).size < 0.6 * sampled.size
