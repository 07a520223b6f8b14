"""A source's passes on an executor (thread and process pools here; a Dask cluster when dask is installed):
the same numbers as the local passes."""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import sfapprox
from sfapprox.baselines.nystrom import Nystrom
from sfapprox.baselines.rsvd import RandomizedSVD
from sfapprox.baselines.sparse import streamed_top_entries
from sfapprox.sources import MIN_BLOCK, ArraySource, DistributedSource, KernelMatrix
from sfapprox.sources.distributed import MIN_REMOTE_COLUMNS


def _kernel(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return KernelMatrix(rng.standard_normal((n, 3)), bandwidth=1.0)


class _Counting:
    """A thread pool that counts the tasks it was given (to see that work went there)."""

    def __init__(self, workers=2):
        self.pool = ThreadPoolExecutor(workers)
        self._max_workers = workers
        self.tasks = 0

    def submit(self, fn, *args):
        self.tasks += 1
        return self.pool.submit(fn, *args)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.pool.shutdown()


def test_products_are_the_local_ones_bit_for_bit():
    K = _kernel()
    K.max_memory = 300 * 8 * 2 * 40  # the smallest blocks (MIN_BLOCK columns): several tasks
    blocks = -(-300 // K.block_width())
    assert blocks >= 2
    B = np.random.default_rng(1).standard_normal((300, 4))
    with _Counting() as pool:
        D = DistributedSource(K, pool)
        assert np.array_equal(D.matmat(B), K.matmat(B))
        assert np.array_equal(D.rmatmat(B), K.rmatmat(B))
        assert np.array_equal(D.matmat(B[:, 0]), K.matmat(B[:, 0]))
        assert pool.tasks == 3 * blocks


def test_columns_go_to_the_workers_above_a_few_and_stay_here_below():
    X = np.random.default_rng(2).standard_normal((200, 200))
    A = ArraySource(X)
    with _Counting() as pool:
        D = DistributedSource(A, pool)
        J = np.arange(3, 3 + MIN_REMOTE_COLUMNS + 10)[::-1]
        assert np.array_equal(D.columns(J), X[:, J])
        remote = pool.tasks
        assert remote >= 2
        assert np.array_equal(D.columns([5, 7]), X[:, [5, 7]])
        assert pool.tasks == remote  # two columns: computed here


def test_it_describes_itself_as_the_wrapped_source_and_travels_as_it():
    K = _kernel(50)
    with ThreadPoolExecutor(1) as pool:
        D = DistributedSource(K, pool)
        assert D.summary() == K.summary() and D.psd == K.psd and D.name == K.name
        D.max_memory = 12345  # a comparison sets the limit on the source it runs on
        assert K.max_memory == 12345
        copy = pickle.loads(pickle.dumps(D))  # never with the executor
    assert type(copy) is KernelMatrix and np.array_equal(copy.columns([0, 1]), K.columns([0, 1]))


def test_the_top_entries_are_the_local_ones_ties_included():
    """Each worker keeps the top k of its range; merged, they are the local pass's entries (integer
    values: many ties, which go to the earlier row-major positions in both)."""
    rng = np.random.default_rng(3)
    X = rng.integers(-4, 5, size=(400, 400)).astype(float)  # 7 blocks of 64 columns: 6 ranges of whole blocks
    A = ArraySource(X)
    for k in (1, 57, 800, 400 * 400):
        local = streamed_top_entries(A, k, max_memory=400 * 8 * 10 * 7)
        with _Counting(3) as pool:
            remote = streamed_top_entries(DistributedSource(A, pool), k, max_memory=400 * 8 * 10 * 7)
            assert pool.tasks == 6  # two ranges per worker
        for a, b in zip(local, remote):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_column_methods_on_a_pool_give_the_local_fits(pool):
    K = _kernel(260, seed=4)
    K.max_memory = 2 * MIN_BLOCK * 8 * 260 * K.column_copies  # blocks of MIN_BLOCK columns, room for the fits
    make = (lambda: ThreadPoolExecutor(2)) if pool == "threads" else \
        (lambda: ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")))
    local_nys = Nystrom(n_components=70, pivots="uniform").fit(K)
    local_rsvd = RandomizedSVD(n_components=8).fit(K)
    with make() as executor:
        D = DistributedSource(K, executor)
        nys = Nystrom(n_components=70, pivots="uniform").fit(D)
        rsvd = RandomizedSVD(n_components=8).fit(D)
    assert np.array_equal(nys.pivots_, local_nys.pivots_)
    np.testing.assert_allclose(nys.to_dense(), local_nys.to_dense(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(rsvd.to_dense(), local_rsvd.to_dense())


def test_rpca_from_columns_on_a_pool_gives_the_local_fit():
    """GoDec from columns: its products and its residual's top-s passes (each worker a range of the
    residual's columns, the squares summed by range) give the local splits' errors."""
    from sfapprox.baselines.rpca import RobustPCA

    K = _kernel(220, seed=7)
    K.max_memory = 2 << 20  # blocks of about 100 columns, room for what GoDec keeps
    # 20 GoDec iterations for each rank of the grid (200 took 13 s a fit): the ranges' last bits show in the first
    local = RobustPCA(budget=20_000, time_limit=None, max_iter=20).fit(K)
    with _Counting() as pool:
        remote = RobustPCA(budget=20_000, time_limit=None, max_iter=20).fit(DistributedSource(K, pool))
        assert pool.tasks > 0
    assert remote.params_["rank"] == local.params_["rank"] and remote.params_["n_sparse"] == local.params_["n_sparse"]
    # to the last bit, as the README says: the residual's ranges start where the local pass's blocks do
    # (a block's U @ Vt[:, J] changed in the last bits with its width), and ||X - L||^2 is summed once
    assert [g["fro_error"] for g in remote.params_["grid"]] == [g["fro_error"] for g in local.params_["grid"]]
    np.testing.assert_array_equal(remote.to_dense(), local.to_dense())


def test_ranges_start_at_multiples_of_the_block_width():
    from sfapprox.sources.distributed import _ranges

    assert [(int(J[0]), int(J[-1])) for J in _ranges(300, 4, 64)] == [(0, 127), (128, 191), (192, 255), (256, 299)]
    assert [J.size for J in _ranges(300, 4, 400)] == [300]  # one block: one range
    assert np.array_equal(np.concatenate(_ranges(300, 6, None)), np.arange(300))


def test_the_squares_of_a_pass_come_with_its_top_entries():
    from sfapprox.baselines.sparse import streamed_top

    X = np.random.default_rng(8).standard_normal((90, 90))
    for k in (0, 10):
        with _Counting(2) as pool:
            *_, squared = streamed_top(DistributedSource(ArraySource(X), pool), k, max_memory=90 * 8 * 10 * 7)
        assert squared == pytest.approx(float((X * X).sum()), rel=1e-12)


def test_compare_on_an_executor_gives_the_local_table():
    K = _kernel(240, seed=5)
    settings = dict(methods=["nystrom", "rsvd", "sparse"], max_memory=32 << 20, time_limit=None)  # not formable
    local = sfapprox.compare(K, **settings)
    with _Counting() as pool:
        remote = sfapprox.compare(K, executor=pool, **settings)
        assert pool.tasks > 0
    assert local.matrix["path"] == remote.matrix["path"] == "columns"
    for a, b in zip(local.results, remote.results):
        assert (a.method, a.status, a.nnz) == (b.method, b.status, b.nnz)
        assert (a.fro_error, a.rel_error) == (b.fro_error, b.rel_error)  # "the numbers of a local run"


def test_compare_of_a_matrix_formed_here_says_the_executor_went_unused():
    """compare --scheduler ADDRESS on a matrix that fits in memory ran every method here and said nothing:
    the user believed the cluster did the work."""
    K = _kernel(60, seed=5)
    with _Counting() as pool:
        formed = sfapprox.compare(K, executor=pool, methods=["tsvd"], time_limit=None)
        assert pool.tasks == 0
    assert formed.matrix.get("path") != "columns"
    assert any("every method ran in this process" in n for n in formed.notes)
    assert not any("ran in this process" in n for n in sfapprox.compare(K, methods=["tsvd"], time_limit=None).notes)


def test_compare_on_a_dask_cluster_gives_the_local_table():
    distributed = pytest.importorskip("dask.distributed")
    K = _kernel(200, seed=6)
    settings = dict(methods=["nystrom", "sparse"], max_memory=32 << 20, time_limit=None)
    local = sfapprox.compare(K, **settings)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = sfapprox.compare(K, executor=client, **settings)
    for a, b in zip(local.results, remote.results):
        assert (a.method, a.status, a.nnz) == (b.method, b.status, b.nnz)
        assert a.rel_error == pytest.approx(b.rel_error, rel=1e-12, abs=1e-15)


def test_a_source_is_sent_to_a_dask_cluster_once_for_all_its_passes():
    """RPCA from columns on a process cluster ran several times slower than here: each of a GoDec step's
    ``2 + 2q`` product passes (and each column request) sent the source to every worker again."""
    distributed = pytest.importorskip("dask.distributed")
    K = _kernel(200, seed=6)
    K.max_memory = 200 * 8 * 5 * 40  # blocks of 40 columns: several tasks a pass
    B = np.random.default_rng(1).standard_normal((200, 3))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        sends = []
        for name in ("scatter", "submit"):  # whichever way the source goes to the workers
            def counted(*args, _call=getattr(client, name), **kw):
                sends.extend(a for a in args if a is K or (isinstance(a, list) and any(x is K for x in a)))
                return _call(*args, **kw)
            setattr(client, name, counted)
        D = DistributedSource(K, client)
        products = [D.matmat(B), D.rmatmat(B), D.matmat(B), D.columns(np.arange(150))]
        assert len(sends) == 1
        D.max_memory = K.max_memory * 2  # blocks sized anew: the copy the workers hold is sent again
        assert np.array_equal(D.matmat(B), products[0]) and len(sends) == 2
    assert np.array_equal(products[0], K.matmat(B)) and np.array_equal(products[1], K.rmatmat(B))
    np.testing.assert_allclose(products[3], K.columns(np.arange(150)), rtol=1e-13, atol=1e-15)


class _TalliedKernel(KernelMatrix):
    """An rbf kernel that notes the size of each block of entries it evaluates (on whichever thread)."""

    def _profile(self, d2):
        self.evaluated.append(d2.size)
        return super()._profile(d2)


def test_a_symmetric_source_formed_on_a_pool_computes_the_rows_it_keeps_there():
    """Formed on an executor, each column block's pieces compute on the workers only the rows the formed
    matrix keeps (the rest is the mirror), and the matrix is the one whole columns there gave, mirrored."""
    from sfapprox.sources._base import _mirror_upper

    n = 300
    K = _TalliedKernel(np.random.default_rng(0).standard_normal((n, 3)), bandwidth=1.0)
    K.max_memory = K.formed_bytes + 1  # the narrowest blocks: MIN_BLOCK columns, sent in pieces
    width = MIN_BLOCK
    with _Counting() as pool:
        D = DistributedSource(K, pool)
        K.evaluated = []
        X = D.to_dense()
        assert pool.tasks > 0
        assert sum(K.evaluated) == sum(min(n, j0 + width) * min(width, n - j0) for j0 in range(0, n, width))  # cells of width
        before = np.empty((n, n))  # the formation before: whole columns, in the same pieces, mirrored
        for j0 in range(0, n, width):
            before[:, j0:j0 + width] = D.columns(np.arange(j0, min(n, j0 + width)))
        _mirror_upper(before, width)
    np.testing.assert_array_equal(X, before)
