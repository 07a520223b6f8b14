"""SF from column blocks under a time limit, its setup priced (:mod:`sfapprox.sf._columns`, the column path of
:mod:`sfapprox.sf.model`): the rank-one start's pass, the first block's estimate on parallel groups, Adam's
steps where no L-BFGS pass fits, and the start's values made in place.

At N = 100,000 (``benchmarks/results/sf_setup_rankone.md``) these decided whether a row kept to its limit;
here at small N with the same code, the costs forced through the fake clock.
"""

import math
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from sfapprox import ChordSF
from sfapprox import _threads
from sfapprox.chord import chord_offsets
from sfapprox.operators import ChordOperator
from sfapprox.sf import _columns as C
from sfapprox.sf import model
from sfapprox.sf._multistart import start_values
from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET, estimate_fit_memory
from sfapprox.sources import ArraySource, KernelMatrix, MatrixSource, SparseSource
from test_columns import _slow_kernel  # (the fit from columns' own tests: one fake slow kernel)


def _column_limit(n: int, history: int | None = None, extra: int = 0) -> int:
    """A memory limit the column path fits and the in-memory fit does not (checked)."""
    offs = chord_offsets(n)
    m = math.ceil(math.log2(n))
    limit = C.column_fit_memory(n, m, len(offs), C.COLUMN_WIDTH, history=history) + LIBRARY_WORKING_SET \
        + COMPILED_WORKING_SET + extra + (1 << 20)
    in_memory = estimate_fit_memory(n, m, len(offs), 8, 50, "cpu", reach=int(offs.max()), n_starts=2,
                                    input_bytes=8 * n * n)
    assert in_memory > limit, "the test needs a limit between the two estimates"
    return limit


def _smooth(n: int) -> np.ndarray:
    """The RBF kernel of sorted points at a wide bandwidth: near rank one."""
    return KernelMatrix(np.linspace(0, 4, n)[:, None], bandwidth=1.5).to_dense()


class _Timed(MatrixSource):
    """The columns of ``array`` that "take" ``per_call`` seconds a request and ``per_column`` a column on the
    fake clock; ``reads`` lists each request's columns.  No product of its own (as a kernel's): the rank-one
    start's ``X^T u`` is a pass over its columns, which the time guards price (an array in memory, an
    ArraySource, gives it by one product)."""

    def __init__(self, array, clock, per_call: float = 0.0, per_column: float = 0.0):
        super().__init__(array.shape[0])
        self.array = array
        self._clock, self._call, self._column = clock, per_call, per_column
        self.reads: list[int] = []

    def _columns(self, J):
        return self.array[:, J]

    def columns(self, J):
        self.reads.append(len(J))
        self._clock.advance(self._call + self._column * len(J))
        return super().columns(J)


# ------------------------------------------------------------------------------ the rank-one start's pass
def test_a_rank_one_pass_that_cannot_fit_its_share_is_not_begun(fake_clock, monkeypatch):
    """"rank1" asked for: its pass had the whole limit, and ran until the limit cut it (18 s of 20 at
    N = 100,000, then the identity start).  Priced first at the pilot's columns' rate (each column "takes"
    0.1 s: 64 columns 6.4 s, a pass of 1,024 about 102 s), it does not fit half of the ~47 s left: never
    begun, the identity start, and the reason said and recorded."""
    def refused(*args, **kwargs):
        raise AssertionError("the rank-one start's pass was begun")

    monkeypatch.setattr(model, "_transposed_product", refused)
    source = _Timed(_smooth(1024), fake_clock, per_column=0.1)
    with pytest.warns(RuntimeWarning, match=r"did not fit the time limit; the fit starts from the identity"
                                            r": at the rate of its first 64 columns the pass would take about 102 s"):
        sf = ChordSF(init="rank1", max_iter=1, time_limit=60, max_memory=_column_limit(1024),
                     device="cpu").fit(source)
    assert sf.params_["path"] == "columns" and sf.init_ == "identity"
    assert "would take about 102 s" in sf.params_["rank_one_skipped"]


def test_a_rank_one_pass_is_stopped_once_its_own_columns_say_it_cannot_fit(fake_clock):
    """The pilot's one request of 512 columns "took" 1 s (a pass at that rate: 1 s), but the pass's requests
    take 1 s each (8 a chunk of 256): after its first chunk, at 8 s, the rest would end at 16 s, past half
    of the ~29 s left.  It stops there (it ran on to 16 s and a rank-one start before: within the limit,
    but the fit's steps got what the pass left)."""
    source = _Timed(_smooth(512), fake_clock, per_call=1.0)
    with pytest.warns(RuntimeWarning, match=r"stopped after 256 columns of 512: at their rate it would take "
                                            r"about 16 s"):
        sf = ChordSF(init="rank1", max_iter=1, time_limit=30, max_memory=_column_limit(512),
                     device="cpu").fit(source)
    assert sf.init_ == "identity" and "stopped after 256 columns" in sf.params_["rank_one_skipped"]
    assert source.reads[:9] == [512] + [32] * 8  # the pilot's one request, then the pass's first chunk


def test_auto_skips_a_pass_that_does_not_fit_its_share_quietly_but_records_why(fake_clock):
    """The same pass under "auto" (a quarter of the time left): no warning (auto chooses), the reason in
    params_."""
    import warnings

    source = _Timed(_smooth(512), fake_clock, per_call=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sf = ChordSF(max_iter=1, time_limit=50, max_memory=_column_limit(512), device="cpu").fit(source)
    assert sf.init_ == "identity" and "25% of the time left" in sf.params_["rank_one_skipped"]


def test_a_sparse_source_gives_the_rank_one_start_by_its_sparse_product(monkeypatch):
    """A source held sparse: X^T u by the sparse product, O(nnz), not a pass over dense column blocks (at
    N = 100,000, 800 KB a column read for 10 non-zeros: 18 s of a 20 s limit, then cut).  The same vector."""
    rng = np.random.default_rng(0)
    A = sp.random(512, 512, density=0.02, random_state=rng, format="csc") + sp.eye(512) * 3
    u = rng.standard_normal(512)
    u /= np.linalg.norm(u)
    pilot = model._Pilot(fro=1.0, trace=0.0, top=1.0, left=u, seconds=0.0, columns=512)
    by_columns, why = model._rank_one_product(ArraySource(A.toarray()), pilot, 256, 32, math.inf, 0.5)
    sparse, _ = model._rank_one_product(SparseSource(A), pilot, 256, 32, math.inf, 0.5)
    assert why is None and np.allclose(sparse, by_columns, rtol=1e-12, atol=1e-12)

    def refused(*args, **kwargs):
        raise AssertionError("the rank-one start read dense column blocks")

    monkeypatch.setattr(model, "_transposed_product", refused)
    sf = ChordSF(init="rank1", max_iter=2, time_limit=None, max_memory=_column_limit(512),
                 device="cpu").fit(sp.csr_matrix(A))
    assert sf.params_["path"] == "columns" and sf.init_ == "rank1"


def test_a_source_with_a_product_of_its_own_gives_the_rank_one_start_by_it(monkeypatch):
    """X^T u by the source's own product where it has one (an array in memory, a covariance's factored form,
    a LinearOperator's rmatvec), not a pass over its columns: a covariance's columns cost O(m N) each, its
    product O(m N) in all. The same vector; an operator without rmatvec still makes the pass."""
    from scipy.sparse.linalg import LinearOperator, aslinearoperator

    from sfapprox.sources import CovarianceMatrix, OperatorSource

    rng = np.random.default_rng(0)
    A = _smooth(256)
    table = rng.standard_normal((40, 256))
    u = rng.standard_normal(256)
    u /= np.linalg.norm(u)
    pilot = model._Pilot(fro=1.0, trace=0.0, top=1.0, left=u, seconds=0.0, columns=256)
    made = []
    real = model._transposed_product
    monkeypatch.setattr(model, "_transposed_product", lambda src, *a: made.append(src) or real(src, *a))
    for src, exact in ((ArraySource(A), A.T @ u), (CovarianceMatrix(table), np.cov(table, rowvar=False) @ u),
                       (OperatorSource(aslinearoperator(A)), A.T @ u)):
        v, why = model._rank_one_product(src, pilot, 256, 32, math.inf, 0.5)
        assert why is None and np.allclose(v, exact, rtol=1e-10, atol=1e-12), src
    assert made == []
    no_transpose = OperatorSource(LinearOperator((256, 256), matvec=lambda b: A @ b, matmat=lambda B: A @ B,
                                                 dtype=float))
    v, why = model._rank_one_product(no_transpose, pilot, 256, 32, math.inf, 0.5)
    assert why is None and made == [no_transpose] and np.allclose(v, A.T @ u)

    class MatmatOnly(MatrixSource):  # a user's source with X @ B of its own, and no X^T @ B
        def _columns(self, J):
            return A[:, J]

        def matmat(self, B):
            return A @ B

    mine = MatmatOnly(256)  # its rmatmat is the base class's pass by blocks: the priced pass, not that one
    v, why = model._rank_one_product(mine, pilot, 256, 32, math.inf, 0.5)
    assert why is None and made == [no_transpose, mine] and np.allclose(v, A.T @ u)

    def refused(*args, **kwargs):
        raise AssertionError("the rank-one start read the columns")

    monkeypatch.setattr(model, "_transposed_product", refused)
    sf = ChordSF(init="rank1", max_iter=2, time_limit=None, max_memory=_column_limit(256),
                 device="cpu").fit(CovarianceMatrix(table))
    assert sf.params_["path"] == "columns" and sf.init_ == "rank1"


# ------------------------------------------------------------------------------ the first block's estimate


def _start(n: int) -> tuple[np.ndarray, np.ndarray]:
    offs = chord_offsets(n)
    return start_values(["identity"], 0, (math.ceil(math.log2(n)), n, len(offs)))["identity"], offs


@pytest.mark.parametrize("batch, threads, columns, seconds",
                         [(64, 1, 8, 8.0), (64, 2, 16, 4.0), (64, 4, 32, 2.0), (40, 1, 8, 5.0), (40, 2, 16, 3.0)])
def test_the_first_block_prices_a_step_on_the_threads_its_groups_run_on(fake_clock, monkeypatch, batch, threads,
                                                                         columns, seconds):
    """A step of 64 columns is 8 blocks of 8 in 4 groups: on one thread 8 blocks one after another, on two 4
    (two at a time), on four 2; one of 40 is 5 blocks in groups of 2, 1, 1 and 1: 5 on one thread, 3 on two
    (the free thread takes the next group).  The first block evaluated one block on one thread and called a
    step all of them whatever the threads: twice the step's time on two.  Now it evaluates as many blocks
    as run at once (each call "takes" 1 s here, its groups in parallel), and its sums are those of the
    columns it read."""
    X = np.random.default_rng(1).standard_normal((96, 96))
    calls = _slow_kernel(monkeypatch, fake_clock, 96)
    start, offs = _start(96)
    monkeypatch.setattr(_threads, "_COMPILED_THREADS", threads)
    probe = C.first_block(lambda a, b: X[:, a:b], start, offs, settings=C.ColumnSettings(batch=batch), width=8)
    assert calls == [columns] and probe.step_seconds == pytest.approx(seconds)
    P = ChordOperator(start, offs).to_dense()[:, :columns]
    S = X[:, :columns]
    np.testing.assert_allclose(probe.sums, (np.sum(S * S), np.sum(S * P), np.sum(P * P)), rtol=1e-4)


# ------------------------------------------------------------------------------ Adam where no pass fits
def test_lbfgs_by_passes_takes_adam_s_steps_where_no_pass_fits_and_a_step_does(fake_clock, monkeypatch):
    """L-BFGS by passes asked for, its pass (12 "s": 6 steps of 2) over the 10 s limit: it handed back its
    start, having taken nothing, where a step of 2 s (and the end's measure) fitted five times.  Adam's
    steps take the time now, within the limit, and the fit says so; where not even a step fits, the start."""
    X = -np.eye(96) + 0.05 * np.random.default_rng(3).standard_normal((96, 96))
    calls = _slow_kernel(monkeypatch, fake_clock, 96)
    start, offs = _start(96)
    settings = C.ColumnSettings(batch=16, optimizer="lbfgs")
    columns = lambda a, b: X[:, a:b]  # noqa: E731
    probe = C.first_block(columns, start, offs, settings=settings, width=8)
    calls.clear()
    began = fake_clock.time
    fit = C.fit_columns_lbfgs(columns, start, offs, settings=settings, width=8, max_iter=50, time_limit=10.0,
                              probe=probe)
    assert fit.optimizer == "adam" and fit.steps >= 1 and fake_clock.time - began <= 10.0
    assert "a pass (about 12 s by the first block) did not fit" in fit.note and "Adam's steps" in fit.note
    short = C.fit_columns_lbfgs(columns, start, offs, settings=settings, width=8, max_iter=50, time_limit=3.0,
                                probe=probe)
    assert short.optimizer == "lbfgs" and short.steps == 0 and short.kept_start and not short.note


def test_from_columns_lbfgs_by_passes_records_the_adam_steps_it_took_instead(fake_clock, monkeypatch):
    """Through ChordSF: a pass of 16 "s" (8 chunks of 64 columns, 2 blocks each) under a 10 s limit, a step
    of 2 s: Adam's steps, said in params_["optimizer_note"], and the fit's clock within its limit."""
    n = 512
    X = np.abs(np.random.default_rng(0).standard_normal((n, n)))
    _slow_kernel(monkeypatch, fake_clock, n)
    by_passes = C.ColumnSettings(optimizer="lbfgs", batch=64)
    monkeypatch.setattr(model, "COLUMN_SETTINGS", by_passes)
    limit = _column_limit(n, history=by_passes.history, extra=X.nbytes)
    began = fake_clock.time
    # (one thread: on two, a step's blocks take half the rounds (first_block), the pass 8 "s", and it fits)
    sf = ChordSF(init="identity", max_iter=50, time_limit=10, max_memory=limit, device="cpu", threads=1).fit(X)
    assert sf.params_["path"] == "columns" and sf.params_["optimizer"] == "adam" and sf.n_iter_ >= 1
    assert "did not fit" in sf.params_["optimizer_note"] and fake_clock.time - began <= 10


# ------------------------------------------------------------------------------ the start's values
def test_the_identity_start_is_made_in_one_array():
    """At N = 100,000 each (M, N, K) array is 245 MB, and the start took three (its draw, the noise, the
    sum): 2-6 s on a busy machine.  Made in place: one array at its peak, the same numbers."""
    shape = (8, 4096, 13)
    tracemalloc.start()
    try:
        values = start_values(["identity"], 0, shape)["identity"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.2 * values.nbytes
    drawn = np.random.default_rng([0, 1]).uniform(-1.0, 1.0, size=shape)
    expected = 0.1 * drawn
    expected[:, :, 0] += 1.0
    np.testing.assert_array_equal(values, expected)


# ------------------------------------------------------------------------------ the first sketch's pass
def test_the_first_sketch_pass_is_priced_by_its_first_chunk(fake_clock):
    """optimizer="sketch": a round's pass was priced by the last one's, and the first was taken whatever it
    cost (at N = 100,000 a whole pass over the columns).  Each column "takes" 0.01 s: a pass of 2,048 is
    20 s, past a 10 s limit; its first chunk of 256 says so, and no more is read.  The start comes back
    at its best multiple on that chunk, as Adam's where no step fits."""
    from sfapprox.sf import _sketch

    n = 2048
    X = _smooth(n)
    read = []

    def columns(a, b):
        read.append(b - a)
        fake_clock.advance(0.01 * (b - a))
        return X[:, a:b]

    values, offs = _start(n)
    fit = _sketch.fit_rounds(columns, values, offs, width=32, time_limit=10.0)
    assert sum(read) == 256 and fake_clock.time <= 10.0
    assert fit.steps == 0 and fit.stop_reason == "time_limit" and fit.kept_start and fit.multiple > 0
    np.testing.assert_allclose(fit.values, values * fit.multiple ** (1 / len(values)), rtol=1e-12)


# ------------------------------------------------------------------------------ the result's assembly
def test_the_result_s_assembly_is_kept_from_the_limit(fake_clock, monkeypatch):
    """The values packed as the result's operator holds them "take" 0.5 s a factor (4.5 s for 9; at
    N = 100,000, 1.5-2.9 s after the fit's last decision, which nothing reserved): timed on one factor
    before the steps, kept from the limit, so the fit with its assembly ends within it.  The packing is
    one copy, not two (the values scaled, then packed)."""
    from sfapprox.operators import chord

    n = 512
    X = np.abs(np.random.default_rng(0).standard_normal((n, n)))
    _slow_kernel(monkeypatch, fake_clock, n)
    real, copies = chord.pack, []

    def slow(values, factor=None):
        out = real(values) if factor is None else real(values, factor)
        if not np.shares_memory(out, values):
            copies.append(out.shape[0])
            fake_clock.advance(0.5 * out.shape[0])
        return out

    monkeypatch.setattr(chord, "pack", slow)
    monkeypatch.setattr(model, "pack", slow, raising=False)
    began = fake_clock.time
    sf = ChordSF(init="identity", max_iter=50, time_limit=30, max_memory=_column_limit(n, extra=X.nbytes),
                 device="cpu").fit(X)
    assert sf.params_["path"] == "columns" and sf.n_iter_ >= 1
    assert fake_clock.time - began <= 30, fake_clock.time - began
    assert copies[-1] == sf.factors_.shape[0] == 9 and copies.count(9) == 1
    np.testing.assert_array_equal(sf.operator_.values, sf.factors_)


# ------------------------------------------------------------------------------ the pilot's share
class _GramTimed(np.ndarray):
    """A block whose matrix products "take" ``rate[0]`` seconds a column pair of their result on the fake
    clock, the rate tripled after the first (the machine got busy after the pilot timed its Gram)."""

    clock = None
    rate = [1e-4]

    def __matmul__(self, other):
        out = np.asarray(self) @ np.asarray(other)
        if out.ndim == 2:
            self.clock.advance(self.rate[0] * out.size)
            self.rate[0] = 3e-4
        return out


def test_the_pilot_s_gram_is_priced_against_its_share(fake_clock, monkeypatch):
    """The pilot's share of 3 s: its first 64 columns' read (0.13 s) and Gram (0.41 s) planned 147 columns;
    their Gram, in one piece, then took three times the rate (6.5 s: the share overran as at
    N = 100,000, 6-10 s of 3).  Made a row chunk at a time, each priced by the last one's rate, it stops
    within the share, its top pair from the columns it holds (a good one still)."""
    monkeypatch.setattr(_GramTimed, "clock", fake_clock)
    monkeypatch.setattr(_GramTimed, "rate", [1e-4])
    X = _smooth(1024)

    class Source(ArraySource):
        def columns(self, J):
            fake_clock.advance(0.002 * len(J))
            return super().columns(J).view(_GramTimed)

    pilot = model._pilot(Source(X), 0, top=True, seconds=3.0)
    assert pilot.columns == 147 and fake_clock.time <= 3.0, fake_clock.time
    U, s, _ = np.linalg.svd(X)
    assert abs(float(pilot.left @ U[:, 0])) > 0.99 and pilot.top == pytest.approx(s[0], rel=0.1)

