"""Matrix sources: exact columns, passes, forming, and bad input refused in one line."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import eye_array, random_array
from scipy.sparse.linalg import aslinearoperator

from sfapprox import InputError, ParameterError, ResourceError
from sfapprox.io import open_matrix
from sfapprox.sources import (
    KERNELS,
    MIN_BLOCK,
    ArraySource,
    AttentionMatrix,
    CovarianceMatrix,
    KernelMatrix,
    OperatorSource,
    SparseSource,
    as_source,
    block_columns,
    median_bandwidth,
    open_npy,
)


def _points(n=40, d=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


def _dense_kernel(P, kernel, h):
    d = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    inner = P @ P.T
    if kernel == "rbf":
        return np.exp(-d**2 / (2 * h * h))
    if kernel == "laplacian":
        return np.exp(-d / h)
    if kernel == "matern32":
        s = np.sqrt(3) * d / h
        return (1 + s) * np.exp(-s)
    if kernel == "matern52":
        s = np.sqrt(5) * d / h
        return (1 + s + s * s / 3) * np.exp(-s)
    if kernel == "cosine":
        norms = np.linalg.norm(P, axis=1)
        return inner / np.outer(norms, norms)
    return inner


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_kernel_columns_match_the_definition(kernel):
    P = _points()
    h = 1.3 if KERNELS[kernel] else None
    K = KernelMatrix(P, kernel=kernel, bandwidth=h)
    expected = _dense_kernel(P, kernel, h)
    J = np.array([5, 0, 39, 5])
    assert np.allclose(K.columns(J), expected[:, J], atol=1e-12)
    assert np.allclose(K.to_dense(), expected, atol=1e-12)
    assert np.allclose(K.diagonal(), np.diag(expected), atol=1e-12)
    assert K.symmetric and K.psd and np.linalg.eigvalsh(K.to_dense()).min() > -1e-9


def test_median_heuristic_is_recorded():
    P = _points(200)
    K = KernelMatrix(P)
    d = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))[np.triu_indices(200, 1)]
    assert K.bandwidth_ == pytest.approx(np.median(d)) and K.bandwidth_rule_ == "median heuristic"
    assert K.summary()["source"]["bandwidth"] == K.bandwidth_
    big = _points(5000, 2)
    assert median_bandwidth(big) == median_bandwidth(big)  # seeded sample
    assert KernelMatrix(P, bandwidth=2.0).bandwidth_rule_ == "given"


@pytest.mark.parametrize("points, kwargs, error, match", [
    (np.array([[0.0, np.nan], [1.0, 2.0]]), {}, InputError, r"non-finite coordinate \(nan; the first at \[0, 1\]: 0-based, as numpy indexes\)"),
    (np.array([[0.0, np.inf]]), {}, InputError, "non-finite"),
    (np.zeros((3, 2)), {"bandwidth": 0.0}, ParameterError, "positive, finite"),
    (np.zeros((3, 2)), {"bandwidth": float("nan")}, ParameterError, "positive, finite"),
    (np.zeros((3, 2)), {"bandwidth": -1}, ParameterError, "positive, finite"),
    (np.zeros((3, 2)), {"kernel": "linear", "bandwidth": 1.0}, ParameterError, "takes no bandwidth"),
    (np.zeros((3, 2)), {"kernel": "gauss"}, ParameterError, "unknown kernel 'gauss'"),
    (np.zeros(3), {}, InputError, r"shape \(N, d\)"),
    (np.zeros((3, 2)), {"kernel": ["rbf"]}, ParameterError, r"unknown kernel \['rbf'\]"),
    (np.zeros((3, 2)), {"seed": -1}, ParameterError, r"'seed' parameter of KernelMatrix must be an int in the range"),
    (np.zeros((3, 2)), {"seed": 1.5}, ParameterError, r"'seed' parameter of KernelMatrix must be an int in the range"),
    (np.zeros((3, 2)), {"seed": "0"}, ParameterError, r"'seed' parameter of KernelMatrix must be an int in the range"),
    (np.array([[0.0, None]], dtype=object), {}, InputError,
     r"entry \[\d+, \d+\] of the points is None \(NoneType\), not a number \(object dtype\); a missing value"),
])
def test_bad_kernel_input_is_one_line(points, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        KernelMatrix(points, **kwargs)
    assert "\n" not in str(info.value)


def test_kernel_points_of_object_dtype_holding_numbers_are_read_as_numbers():
    """What numpy makes of a pandas frame of nullable dtypes ("Float64"): "got object" refused it."""
    P = np.random.default_rng(0).standard_normal((5, 2))
    got = KernelMatrix(P.astype(object), bandwidth=1.0).columns(np.arange(5))
    np.testing.assert_array_equal(got, KernelMatrix(P, bandwidth=1.0).columns(np.arange(5)))


@pytest.mark.parametrize("kernel, meant", [
    ("rbff", "'rbf'"), ("gaussian", "'rbf'"), ("laplace", "'laplacian'"), ("Matern", "'matern32' or 'matern52'"),
])
def test_a_kernel_typo_names_the_kernel_it_may_mean(kernel, meant, tmp_path):
    # what a user mistyping --kernel was told: only the list, for "rbff" as for "gaussian"
    with pytest.raises(ParameterError, match=re.escape(f"unknown kernel {kernel!r} (did you mean {meant}?); choose one of rbf")):
        KernelMatrix(np.zeros((3, 2)), kernel=kernel)
    np.save(tmp_path / "points.npy", np.zeros((3, 2)))
    with pytest.raises(ParameterError, match=re.escape(f"(did you mean {meant}?)")):
        open_matrix(tmp_path / "points.npy", kernel=kernel)


def test_an_unknown_kernel_like_none_names_no_guess():
    with pytest.raises(ParameterError, match=r"unknown kernel 'xyz'; choose one of rbf"):
        KernelMatrix(np.zeros((3, 2)), kernel="xyz")


def test_attention_rows_are_a_softmax():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((50, 8)), rng.standard_normal((50, 8))
    A = AttentionMatrix(q, k)
    logits = q @ k.T / np.sqrt(8)
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    assert np.allclose(A.to_dense(), expected) and np.allclose(A.columns([3, 7]), expected[:, [3, 7]])
    assert not A.symmetric and A.nonnegative
    with pytest.raises(InputError, match="same shape"):
        AttentionMatrix(q, k[:, :4])
    with pytest.raises(InputError, match="must be finite"):
        AttentionMatrix(np.full((2, 2), np.nan), np.zeros((2, 2)))


def test_sources_over_existing_matrices_agree(tmp_path):
    X = np.random.default_rng(2).standard_normal((30, 30))
    path = tmp_path / "x.npy"
    np.save(path, X)
    sources = [ArraySource(X), open_npy(path), SparseSource(sp.csr_array(X)), OperatorSource(aslinearoperator(X)),
               as_source(X), as_source(sp.csr_array(X)), as_source(aslinearoperator(X))]
    B = np.random.default_rng(3).standard_normal((30, 4))
    for src in sources:
        assert np.allclose(src.to_dense(), X) and np.allclose(src.matmat(B), X @ B) and np.allclose(src.rmatmat(B), X.T @ B)
        assert np.allclose(src.entries([1, 2], [3, 0]), X[[1, 2], [3, 0]]) and np.allclose(src.diagonal(), np.diag(X))
    assert open_npy(path).describe()["memory_mapped"]


def test_passes_use_blocks_of_the_memory_limit():
    src = ArraySource(np.random.default_rng(4).random((500, 500)))
    width = src.block_width(max_memory=500 * 8 * 64 * 4)  # half the limit, 2 copies a column: 64 columns
    assert width == 64 and sum(J.size for J, _ in src.blocks(width)) == 500
    assert [J.tolist() for J in block_columns(5, 2, order=np.array([4, 3, 2, 1, 0]))] == [[4, 3], [2, 1], [0]]
    with pytest.raises(ResourceError, match="forming the 500 x 500 matrix"):
        src.to_dense(max_memory=1000)


def test_memory_mapped_files_that_are_damaged_are_refused(tmp_path):
    path = tmp_path / "cut.npy"
    np.save(path, np.ones((100, 100)))
    path.write_bytes(path.read_bytes()[:4000])  # truncated
    with pytest.raises(InputError, match=r"cut.npy: its header declares a 100 x 100 float64 array \(80,000 bytes of "
                                         r"values\) but the file holds 3,872 bytes after the header; it is truncated; "
                                         r"copy or write it again"):
        open_npy(path)
    bad = tmp_path / "nan.npy"
    X = np.ones((10, 10))
    X[3, 4] = np.nan
    np.save(bad, X)
    with pytest.raises(InputError, match=r"entry \(3, 4\) is nan"):
        open_npy(bad).columns([4])
    with pytest.raises(InputError, match="square"):
        ArraySource(np.ones((3, 4)))
    with pytest.raises(ParameterError, match="cannot read columns"):
        as_source([[1.0]])


def test_covariance_source_is_numpys_covariance_by_columns_and_products():
    from sfapprox.sources import CovarianceMatrix

    rng = np.random.default_rng(5)
    T = rng.standard_normal((7, 40)) * rng.random(40) + rng.random(40)
    C = CovarianceMatrix(T, name="wide")
    ref = np.cov(T, rowvar=False)
    assert C.n == 40 and C.symmetric and C.psd
    np.testing.assert_allclose(C.to_dense(), ref, atol=1e-12)
    np.testing.assert_allclose(C.columns([3, 0, 39]), ref[:, [3, 0, 39]], atol=1e-12)
    np.testing.assert_allclose(C.diagonal(), np.diag(ref), atol=1e-12)
    B = rng.standard_normal((40, 3))
    np.testing.assert_allclose(C.matmat(B), ref @ B, atol=1e-11)
    np.testing.assert_allclose(C.rmatmat(B[:, 0]), ref.T @ B[:, 0], atol=1e-11)
    assert C.describe() == {"kind": "covariance", "samples": 7, "features": 40}


@pytest.mark.parametrize("table,match", [
    (np.ones((1, 4)), "at least 2 samples"),
    (np.array([[1.0, np.nan], [2.0, 3.0]]), "complete data"),
    (np.ones(5), "samples x features table"),
])
def test_covariance_source_refuses_bad_tables(table, match):
    from sfapprox import InputError
    from sfapprox.sources import CovarianceMatrix

    with pytest.raises(InputError, match=match):
        CovarianceMatrix(table)


def test_a_covariance_checks_its_table_is_finite_without_a_mask_of_the_whole_table():
    """np.isfinite(table).all() made a bool copy of the whole table (np.argwhere of its negation two more
    where a cell was not finite) whatever the memory limit said: a limit that held the table but not the
    mask beside it was passed, and the mask made, before the table's float64 copy was refused."""
    import tracemalloc

    from sfapprox import InputError, ResourceError
    from sfapprox.sources import CovarianceMatrix

    table = np.random.default_rng(0).standard_normal((2000, 300))  # 4.8 MB; its mask 600 KB
    holes = table.copy()
    holes[1500, 7] = np.inf
    for given, limit, error in ((table, table.nbytes + table.size // 2, ResourceError), (holes, None, InputError)):
        tracemalloc.start()
        try:
            with pytest.raises(error, match="float64 copy" if error is ResourceError else r"cell \[1500, 7\] is inf"):
                CovarianceMatrix(given, max_memory=limit)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < table.size // 4  # a block's mask, not the table's
    assert bool(np.allclose(CovarianceMatrix(table, max_memory=3 * table.nbytes).to_dense(), np.cov(table, rowvar=False)))


@pytest.mark.parametrize("source", ["kernel", "attention"])
def test_kernel_points_and_attention_queries_are_checked_finite_without_a_whole_mask(source):
    """Their finiteness was told by a bool mask of the whole table (and np.argwhere's of it), as a
    covariance's was (first_nonfinite now, a block at a time); the same cell is named."""
    import tracemalloc

    from sfapprox import InputError
    from sfapprox.sources import AttentionMatrix

    points = np.random.default_rng(0).standard_normal((2000, 300))
    points[1500, 7] = np.nan
    make = {"kernel": lambda: KernelMatrix(points, bandwidth=1.0),
            "attention": lambda: AttentionMatrix(points, np.zeros((4, 300)))}[source]
    said = {"kernel": r"non-finite coordinate \(nan; the first at \[1500, 7\]: 0-based", "attention": r"q\[1500, 7\] is nan"}
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=said[source]):
            make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < points.size // 4  # a block's mask, not the table's


def test_an_array_in_memory_multiplies_without_copying_its_blocks(tmp_path):
    """A float64 array in memory is one BLAS product (a pass by blocks copied up to 4,096 columns at a
    time: the whole matrix again); the same numbers as the memory-mapped file's pass by blocks, and a
    non-finite entry still named."""
    import tracemalloc

    X = np.random.default_rng(5).standard_normal((300, 300))
    np.save(tmp_path / "x.npy", X)
    mapped = ArraySource(np.load(tmp_path / "x.npy", mmap_mode="r"))
    B = np.random.default_rng(6).standard_normal((300, 4))
    src = ArraySource(X)
    tracemalloc.start()
    try:
        product, transposed = src.matmat(B), src.rmatmat(B)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.1 * X.nbytes
    np.testing.assert_allclose(product, mapped.matmat(B), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(transposed, mapped.rmatmat(B), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(src.matmat(B[:, 0]), X @ B[:, 0], rtol=1e-12)
    X[3, 4] = np.nan
    for product in (src.matmat, src.rmatmat):
        with pytest.raises(InputError, match=r"entry \(3, 4\) is nan"):
            product(B)


@pytest.mark.parametrize("kernel, h", [("rbf", 1e-170), ("rbf", 1e-320), ("matern32", 1e-320), ("laplacian", 1e-320)])
def test_a_bandwidth_too_small_to_compute_with_is_one_line(kernel, h):
    pts = np.random.default_rng(0).standard_normal((20, 3))
    with pytest.raises(ParameterError, match="too small to compute .* median heuristic gives"):
        KernelMatrix(pts, kernel=kernel, bandwidth=h)
    KernelMatrix(pts, kernel="matern32", bandwidth=1e-170).columns(np.arange(3))  # 1/h is a number: it runs


@pytest.mark.parametrize("kernel", ["rbf", "cosine", "linear"])
def test_coordinates_whose_squares_overflow_are_refused(kernel):
    pts = np.array([[1e300, 0.0], [0.0, 1.0], [1.0, 1.0]])
    with pytest.raises(InputError, match="too large .* rescale"):
        KernelMatrix(pts, kernel=kernel)


def test_attention_s_row_sums_are_a_pass_within_its_memory_limit(tmp_path):
    """Its row normalisers' pass, made when it is opened, was sized before any limit was known: blocks of
    up to 4,096 columns of N-long logits and exponentials (1.2 GB at 12,000 tokens, --max-memory 64M)."""
    import tracemalloc

    from sfapprox.io import open_matrix

    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2000, 8)), rng.standard_normal((2000, 8))
    limit = 16 << 20
    tracemalloc.start()
    try:
        A = AttentionMatrix(q, k, max_memory=limit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit  # blocks of 262 columns, about 4 MiB (unlimited: 2,000 columns, 31 MiB)
    # kept for its later passes; 262 columns of two N-long arrays each (the block, the keys' rows: was 4, 131)
    assert A.max_memory == limit and A.block_width() == 262
    unlimited = AttentionMatrix(q, k)
    np.testing.assert_allclose(A._row_sum, unlimited._row_sum, rtol=1e-12)
    # not equal bits: the logits' BLAS products of 262 and of 2,000 columns differ in the last bit of some
    # entries (9 row maxima here, as the whole-block expressions give them; 131 columns happened to give none)
    np.testing.assert_allclose(A._row_max, unlimited._row_max, rtol=1e-14, atol=0)
    path = tmp_path / "att.npz"
    np.savez(path, q=q[:100], k=k[:100])
    assert open_matrix(path, format="attention", max_memory=limit).max_memory == limit  # the CLI's way in
    with pytest.raises(ParameterError, match=r"'max_memory' parameter of AttentionMatrix must be"):
        AttentionMatrix(q, k, max_memory=0)


def _attention_before(q, k, scale, width):
    """The attention source's numbers as its whole-block expressions made them (before its blocks were
    computed in place): each row's largest logit and sum, and the columns of a block."""
    peak, total = np.full(len(q), -np.inf), np.zeros(len(q))
    for J in block_columns(len(q), width):
        logits = (q @ k[J].T) * scale
        new_peak = np.maximum(peak, logits.max(axis=1))
        total = total * np.exp(peak - new_peak) + np.exp(logits - new_peak[:, None]).sum(axis=1)
        peak = new_peak
    return peak, total, lambda J: np.exp((q @ k[J].T) * scale - peak[:, None]) / total[:, None]


@pytest.mark.parametrize("n, d, temperature, scale", [(7, 3, 1.0, None), (130, 8, 4.0, None), (257, 64, 0.1, None),
                                                      (300, 5, 1.0, 3.0), (1100, 16, 2.0, 0.05)])
def test_attention_s_in_place_blocks_keep_every_bit(n, d, temperature, scale):
    """Its blocks are scaled, shifted, exponentiated and normalised in place, slab by slab (of 65,536
    entries: several at N >= 257), and formed straight into the matrix: the row maxima and sums, the
    columns (consecutive or not) and the formed matrix are those of the whole-block expressions, to the
    last bit, for any block width."""
    rng = np.random.default_rng(n)
    q, k = rng.standard_normal((n, d)) * temperature, rng.standard_normal((n, d))
    for limit in (None, 8 * n * 64 * 4):  # one block of every column (unlimited) or of 64 and more
        A = AttentionMatrix(q, k, scale, max_memory=limit)
        peak, total, columns = _attention_before(q, k, A.scale, A.block_width())
        np.testing.assert_array_equal(A._row_max, peak)
        np.testing.assert_array_equal(A._row_sum, total)
        for J in (np.arange(n), np.arange(n // 3, n), rng.permutation(n)[:max(1, n // 2)], np.array([n - 1, 0, n - 1])):
            np.testing.assert_array_equal(A.columns(J), columns(J))
        formed = np.hstack([columns(J) for J in block_columns(n, A.block_width(max(1, memory_left(A))))])
        np.testing.assert_array_equal(A.to_dense(), formed)


def memory_left(A):
    """What to_dense's blocks are sized by: the limit less the formed matrix (None: no limit given)."""
    from sfapprox._validation import memory_limit

    limit = memory_limit(A.max_memory)
    return None if limit is None else limit - A.formed_bytes


def test_attention_blocks_allocate_one_block_sized_array():
    """A block held its logits, their shifted copy, their exponentials and the result (numpy's elision
    saved some): 2 block-sized arrays a column for its columns, 3 for the row sums' pass, counted as 4
    (column_copies).  Now a block is one array (and the keys' rows k[J]), as block_width counts it;
    forming writes each block into the matrix (it held the matrix and a whole block of every column
    besides, and copied it: 3 matrices' worth under no limit)."""
    import tracemalloc

    rng = np.random.default_rng(5)
    n, d, b = 2000, 8, 400
    q, k = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    block = 8 * n * b
    A = AttentionMatrix(q, k, max_memory=4 * block)  # blocks of b columns: 2 copies a column, half the limit
    width = A.block_width()
    peaks = {}
    for what, run in {"columns": lambda: A.columns(np.arange(b)), "row sums": A._normalisers,
                      "formed": lambda: A.to_dense(max_memory=8 << 30)}.items():
        tracemalloc.start()
        try:
            run()
            peaks[what] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert block <= peaks["columns"] < 1.05 * block  # was 2.0 blocks
    assert 8 * n * width <= peaks["row sums"] < 1.05 * 8 * n * width  # was 3.0
    # as block_width counts a column: the block and the keys' rows k[J] (d numbers, rounded up to N's)
    assert A.column_copies == 2 and width == b
    assert AttentionMatrix(q[:3], k[:3]).column_copies == 1 + 3  # 8 features of 3 tokens: 3 arrays of 3
    assert block * (A.column_copies - 1) <= peaks["columns"] <= block * A.column_copies
    assert peaks["formed"] < 1.02 * A.formed_bytes  # was 2.0-3.0 (the matrix, a block of every column, its temporaries)


@pytest.mark.parametrize("n, d", [(600, 16), (300, 64)])
def test_attention_s_formed_need_counts_what_forming_allocates(n, d, monkeypatch):
    """formed_need counted forming an attention map as the matrix and a whole block of the narrowest width
    (column_copies N-long arrays a column), but the block is computed in the matrix itself: besides it,
    forming allocates the keys' rows k[J] and numpy's buffers, which it now counts (the old count was
    3.0x and 1.5x what forming allocates besides the matrix here)."""
    import tracemalloc

    import sfapprox.sources._base as base
    from sfapprox._validation import LIBRARY_WORKING_SET
    from sfapprox.sources import formed_need

    rng = np.random.default_rng(3)
    A = AttentionMatrix(rng.standard_normal((n, d)), rng.standard_normal((n, d)))
    tracemalloc.start()
    try:
        held = tracemalloc.get_traced_memory()[0]
        A.to_dense(max_memory=A.formed_bytes + 1)  # blocks of the narrowest width, MIN_BLOCK columns
        measured = tracemalloc.get_traced_memory()[1] - held - A.formed_bytes
    finally:
        tracemalloc.stop()
    monkeypatch.setattr(base, "scoring_need", lambda *args: 0)  # its forming term alone (scoring is a max with it)
    estimate = formed_need(A) - A.formed_bytes - LIBRARY_WORKING_SET
    assert measured <= estimate <= 1.25 * measured
    assert estimate == A.forming_bytes(MIN_BLOCK)


def test_attention_needs_a_feature_and_finite_logits():
    with pytest.raises(InputError, match="at least one token .* one feature"):
        AttentionMatrix(np.zeros((5, 0)), np.zeros((5, 0)))
    q = np.ones((4, 2))
    with pytest.raises(InputError, match="overflow"):
        AttentionMatrix(q * 1e300, q * 1e10)
    A = AttentionMatrix(q * 1e100, q)  # huge but finite logits: a one-hot softmax, fine
    assert np.isfinite(A.to_dense()).all()


@pytest.mark.parametrize("scale", ["x", "2", [1.0], 0, -1.0, float("nan"), float("inf"), True])
def test_attention_scale_must_be_a_positive_number(scale):
    """A string was a raw ValueError from float() ("x") or taken for a number ("2")."""
    q = np.random.default_rng(0).standard_normal((4, 2))
    with pytest.raises(ParameterError, match=r"^attention: scale must be a positive, finite number .* got "):
        AttentionMatrix(q, q, scale=scale)
    assert AttentionMatrix(q, q, scale=np.float32(0.5)).scale == 0.5 and AttentionMatrix(q, q, scale=2).scale == 2.0


def test_a_npy_a_comparison_could_not_hold_formed_is_memory_mapped_not_loaded(tmp_path):
    """Loaded just under the limit, the matrix left its methods nothing (a higher --max-memory refused
    what a lower one, mapping it, ran): it is mapped unless it and its scoring fit."""
    from sfapprox.comparison import formed_need
    from sfapprox.io import open_matrix

    path = tmp_path / "x.npy"
    np.save(path, np.eye(300))
    need = formed_need(open_npy(path))
    just_fits = 300 * 300 * 8 + 1  # its float64 form fits; a comparison beside it does not
    assert just_fits < need
    mapped = open_matrix(path, max_memory=just_fits)
    assert isinstance(mapped, ArraySource) and mapped.describe()["memory_mapped"]
    loaded = open_matrix(path, max_memory=need)
    assert not isinstance(loaded, ArraySource)  # a LoadedMatrix, formed as before


def test_column_indices_must_be_whole_numbers():
    from sfapprox import KernelMatrix, ParameterError

    K = KernelMatrix(np.random.default_rng(0).random((10, 2)))
    for bad in (np.array([1.5]), np.array([True])):
        with pytest.raises(ParameterError, match="column indices must be whole numbers"):
            K.columns(bad)  # 1.5 was read as column 1
    np.testing.assert_array_equal(K.columns(np.array([1.0, 2.0])), K.columns([1, 2]))


def test_a_sparse_source_checks_its_matrix_as_a_matrix_given_directly_is_checked():
    """A corrupt index (scipy would read out of bounds: a segfault), complex values (their imaginary part
    would be dropped) or values whose squares overflow: refused when the source is made, in one line."""
    n = 50
    corrupt = sp.csr_matrix((np.ones(3), np.array([0, 1, 10**6]), np.array([0, 1, 2] + [3] * (n - 2))), shape=(n, n))
    with pytest.raises(InputError, match="column index 1000000 out of range"):
        SparseSource(corrupt)
    with pytest.raises(InputError, match="column index 1000000 out of range"):
        as_source(corrupt)
    with pytest.raises(InputError, match="complex"):
        SparseSource(sp.eye(4, format="csr", dtype=complex))
    with pytest.raises(InputError, match="values too large"):
        SparseSource(sp.csr_matrix(np.full((5, 5), 1e200)))


def test_every_source_refuses_a_column_block_that_is_not_finite_or_overflows():
    """Whatever makes the columns, a NaN, an infinity or values whose squares overflow are refused when
    their block is read (the errors could not be computed), as a matrix in memory is refused."""
    X = np.ones((6, 6))
    X[4, 2] = np.nan
    with pytest.raises(InputError, match=r"entry \(4, 2\) is nan"):
        ArraySource(X).columns([0, 2])
    assert ArraySource(X).columns([0, 1]).shape == (6, 2)  # a block without it is read
    with pytest.raises(InputError, match="values too large"):
        ArraySource(np.full((6, 6), 1e200)).columns([1])


def test_an_operator_must_be_real_and_its_products_finite():
    """An operator's entries cannot be looked at: a complex dtype is refused when the source is made, and a
    product (a column block, ``X @ B``, ``X.T @ B``) holding NaN or infinite values when it is made."""
    from sfapprox import RandomizedSVD, SparseApproximation

    Z = np.eye(5) * (1 + 1j)
    with pytest.raises(InputError, match="complex"):
        OperatorSource(aslinearoperator(Z))
    A = np.random.default_rng(0).standard_normal((20, 20))
    A[3, 7] = np.nan
    source = OperatorSource(aslinearoperator(A))
    for read in (lambda: source.columns([0]), lambda: source.matmat(np.ones((20, 2))),
                 lambda: source.rmatmat(np.ones(20))):
        with pytest.raises(InputError, match="product with the operator holds NaN"):
            read()
    for est in (RandomizedSVD(n_components=3), SparseApproximation(n_sparse=3)):
        with pytest.raises(InputError, match="NaN"):
            est.fit(aslinearoperator(A))


def test_a_method_that_needs_the_matrix_in_memory_forms_an_operator_and_scores_against_one():
    """A LinearOperator given to TSVD (which needs X in memory) is formed, as a source is; its error
    against the operator is the error against the matrix."""
    from sfapprox import TruncatedSVD

    B = np.random.default_rng(1).random((30, 30))
    fitted = TruncatedSVD(n_components=3).fit(aslinearoperator(B))
    direct = TruncatedSVD(n_components=3).fit(B)
    assert fitted.frobenius_error(aslinearoperator(B)) == pytest.approx(direct.frobenius_error(B), rel=1e-12)


def test_a_symmetric_source_is_formed_exactly_symmetric():
    """A kernel's columns, computed block by block, differ from its rows by rounding: formed, its lower
    triangle is the upper's mirror (a formed kernel read as not symmetric)."""
    K = KernelMatrix(np.random.default_rng(0).standard_normal((300, 5)) * 3)
    K.max_memory = 300 * 8 * 64 * 12  # several blocks
    X = K.to_dense()
    assert np.array_equal(X, X.T)
    assert np.allclose(X, np.concatenate([K.columns(np.arange(j, min(300, j + 50))) for j in range(0, 300, 50)], axis=1),
                       rtol=0, atol=1e-14)


def test_a_points_file_s_errors_name_its_path(tmp_path):
    """"nan: point 3 has a non-finite coordinate" named the file by its stem only (the tables' name)."""
    from sfapprox import InputError
    from sfapprox.io import open_matrix

    path = tmp_path / "pts.csv"
    path.write_text("1,2\n3,nan\n5,6\n")
    # (the table's reader names the cell by its line and column, before the kernel sees a point)
    with pytest.raises(InputError, match=re.escape(f"{path}: line 2, column 2: 'nan' is not a finite number")):
        open_matrix(path, kernel="rbf")
    qk = tmp_path / "att.npz"
    np.savez(qk, q=np.ones((4, 3)), k=np.ones((4, 2)))
    with pytest.raises(InputError, match=re.escape(f"{qk}: ")):
        open_matrix(qk, format="attention")


def test_the_median_heuristic_is_the_median_pairwise_distance_in_bounded_memory():
    """It formed the sample's m x m distances, their temporaries and triu_indices' index arrays (76 MiB
    at the default 2,000 points, whatever --max-memory said); now one array of the m(m-1)/2 pairs."""
    import tracemalloc

    from scipy.spatial.distance import pdist

    from sfapprox.sources.kernels import MEDIAN_SAMPLE, median_bandwidth

    rng = np.random.default_rng(0)
    points = rng.standard_normal((MEDIAN_SAMPLE + 500, 5))
    sample = points[np.random.default_rng(0).choice(points.shape[0], MEDIAN_SAMPLE, replace=False)]
    tracemalloc.start()
    try:
        h = median_bandwidth(points)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert h == pytest.approx(np.median(pdist(sample)), rel=1e-12)
    pairs = MEDIAN_SAMPLE * (MEDIAN_SAMPLE - 1) // 2
    assert peak < 8 * pairs * 1.8  # the pairs' array and a few row blocks (it was about 5 of them)
    duplicates = np.repeat(rng.standard_normal((4, 2)), 3, axis=0)  # zero distances are left out
    assert median_bandwidth(duplicates) == pytest.approx(np.median(pdist(duplicates)[pdist(duplicates) > 0]))


def test_the_median_heuristic_is_refused_over_the_memory_limit_before_it_is_computed():
    """Its m(m-1)/2 distances (16 MiB at the default sample) and, with many features, the sample's own
    copy were made whatever the memory limit said: a KernelMatrix of 2,100 points in 4 MB took 20 MB."""
    import tracemalloc

    rng = np.random.default_rng(0)
    points = rng.standard_normal((2100, 2))  # 34 KB: its float64 copy is no copy at all
    with pytest.raises(ResourceError, match=r"median heuristic's bandwidth \(the distances between 2,000 sampled "
                                            r"points, and the points\) needs about 1\d\.\d MiB.*bandwidth="):
        KernelMatrix(points, max_memory="4M")
    assert KernelMatrix(points, bandwidth=1.0, max_memory="4M").bandwidth_ == 1.0  # a given one needs none
    from sfapprox.sources.kernels import median_bandwidth, median_bytes

    wide = rng.standard_normal((500, 3000)).astype(np.float32)  # the sample's float64 copy outweighs its pairs
    need = wide.nbytes + median_bytes(*wide.shape, sample=300, dtype=wide.dtype)
    with pytest.raises(ResourceError, match="300 sampled points"):
        median_bandwidth(wide, sample=300, max_memory=need - 1)
    tracemalloc.start()
    try:
        h = median_bandwidth(wide, sample=300, max_memory=need)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert h == median_bandwidth(wide, sample=300) and peak <= need - wide.nbytes  # what it counted, at most


@pytest.mark.parametrize("kernel", ["matern32", "matern52"])
@pytest.mark.parametrize("bandwidth", [1e-154, 1e-308])
def test_a_matern_kernel_of_a_tiny_bandwidth_is_finite(kernel, bandwidth):
    """(1 + s + s^2/3) exp(-s) with s (or s^2) overflowing was inf * 0 = NaN: an SVD that "did not
    converge" (a traceback, exit 1) from columns, "NaN/Inf entries" in memory. Every entry off the
    diagonal is 0 there, as exp(-s) is."""
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(0).standard_normal((40, 3)), kernel=kernel, bandwidth=bandwidth)
    assert np.array_equal(K.to_dense(), np.eye(40))
    ordinary = KernelMatrix(np.random.default_rng(0).standard_normal((40, 3)), kernel=kernel, bandwidth=0.7)
    assert np.all(np.isfinite(ordinary.to_dense())) and np.all(ordinary.to_dense() > 0)


def _every_kind_of_source(D):
    from sfapprox.sources import CovarianceMatrix
    P = _points()
    T = np.random.default_rng(1).standard_normal((7, 40))
    return [(KernelMatrix(P), KernelMatrix(P).to_dense()), (ArraySource(D), D), (SparseSource(sp.csr_array(D)), D),
            (OperatorSource(aslinearoperator(D)), D), (CovarianceMatrix(T), np.cov(T, rowvar=False))]


@pytest.mark.parametrize("shape", [(80,), (20, 4), (40, 2, 3), (39, 2), ()])
def test_a_product_with_an_operand_of_the_wrong_shape_is_refused(shape):
    D = _dense_kernel(_points(), "rbf", 1.0)
    B = np.ones(shape)
    for src, _ in _every_kind_of_source(D):
        for product in (src.matmat, src.rmatmat):
            with pytest.raises(ParameterError, match=r"40 x 40: it applies to a vector or a matrix of 40 rows"):
                product(B)


def test_a_complex_operand_keeps_its_imaginary_part():
    D = _dense_kernel(_points(), "rbf", 1.0)
    B = np.random.default_rng(2).standard_normal((40, 2)) + 1j * np.random.default_rng(3).standard_normal((40, 2))
    for src, X in _every_kind_of_source(D):
        np.testing.assert_allclose(src.matmat(B), X @ B, atol=1e-12)
        np.testing.assert_allclose(src.rmatmat(B), X.T @ B, atol=1e-12)
        np.testing.assert_allclose(src.matmat(B[:, 0]), X @ B[:, 0], atol=1e-12)


@pytest.mark.parametrize("max_memory", [0, -1, True, "1 lots", 1.5e9])
def test_to_dense_refuses_a_memory_limit_that_is_not_a_positive_int(max_memory):
    K = KernelMatrix(_points())
    with pytest.raises(ParameterError, match=r"The 'max_memory' parameter of KernelMatrix.to_dense must be an int"):
        K.to_dense(max_memory=max_memory)
    assert K.to_dense(max_memory=np.int64(1 << 30)).shape == (40, 40)


def test_no_seed_is_the_default_seed_so_the_median_heuristic_is_reproducible():
    from sfapprox.sources.kernels import MEDIAN_SAMPLE
    P = _points(MEDIAN_SAMPLE + 100, 2)  # above MEDIAN_SAMPLE the heuristic looks at a sample
    first = KernelMatrix(P, seed=None).bandwidth_
    assert KernelMatrix(P, seed=None).bandwidth_ == first == KernelMatrix(P).bandwidth_


def test_every_memory_limit_of_a_source_and_the_median_seed_are_checked():
    """block_width(-5) was 40 columns, limited(-5) a source sized by it; median_bandwidth's seed=-1
    numpy's ValueError (above its sample's size)."""
    from sfapprox.sources import KernelMatrix, median_bandwidth

    K = KernelMatrix(np.random.default_rng(0).standard_normal((40, 3)))
    for bad in (-5, 0, "lots", True, 1.5):
        with pytest.raises(ParameterError, match="'max_memory' parameter of KernelMatrix.block_width"):
            K.block_width(bad)
        with pytest.raises(ParameterError, match="'max_memory' parameter of KernelMatrix.limited"):
            K.limited(bad)
    assert K.limited(1 << 30).block_width() == 40
    assert K.limited("1G").max_memory == 1 << 30  # a size as --max-memory reads it, held in bytes
    points = np.random.default_rng(0).standard_normal((30, 2))
    for bad in (-1, 1.5, None):
        with pytest.raises(ParameterError, match="'seed' parameter of median_bandwidth"):
            median_bandwidth(points, seed=bad, sample=10)
    assert median_bandwidth(points, seed=3, sample=10) == median_bandwidth(points, seed=3, sample=10)


def test_a_sources_product_takes_a_sparse_operand():
    """numpy's "setting an array element with a sequence" came out of K.matmat(csr)."""
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(0).standard_normal((40, 3)))
    B = sp.random(40, 3, density=0.3, random_state=1, format="csr")
    np.testing.assert_allclose(K.matmat(B), K.to_dense() @ B.toarray(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.rmatmat(B), K.to_dense().T @ B.toarray(), rtol=1e-12, atol=1e-12)


@pytest.mark.filterwarnings("error")
def test_a_mapped_float32_file_s_signalling_nan_is_one_error_and_no_warning(tmp_path):
    """A block's cast to float64 of a signalling NaN (other programs write them; numpy's NaN is quiet)
    printed "warning: invalid value encountered in cast" before the error naming the entry."""
    X = np.ones((80, 80), dtype=np.float32)
    X.view(np.uint32)[5, 7] = 0x7FA00000  # a signalling NaN
    np.save(tmp_path / "x.npy", X)
    src = ArraySource(np.load(tmp_path / "x.npy", mmap_mode="r"), name="x")
    with pytest.raises(InputError, match=r"^x: entry \(5, 7\) is nan; the matrix must be finite$"):
        src.columns(np.arange(10))


def test_a_sparse_source_counts_what_it_holds_and_knows_its_symmetry_without_a_transposed_copy():
    """Its CSC arrays are held beside every pass (held_bytes: the passes were sized as if it held
    nothing, and a kept-sparse comparison of 9.5 million non-zeros peaked at 2.3 times its limit); its
    symmetry from the given CSR's arrays where it is one (X != X.T held three more copies)."""
    from sfapprox._validation import held_bytes

    A = random_array((40, 40), density=0.2, random_state=2, format="csr")
    S = (A + A.T).tocsr()
    for given, symmetric in [(A, False), (S, True), (S.tocoo(), True), (S.tocsc(), True), (sp.csr_matrix(S), True),
                             ((10 * A).astype(np.int64) + eye_array(40, dtype=np.int64), False)]:
        source = SparseSource(given)
        assert source.symmetric is symmetric
        assert source.held_bytes == held_bytes(source.matrix) > 0
    duplicated = sp.csr_array((np.ones(3), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
    assert not duplicated.has_canonical_format
    held = SparseSource(duplicated)
    assert held.matrix.has_canonical_format and held.matrix[0, 0] == 2.0


def test_a_sources_product_takes_a_torch_tensor_that_requires_grad():
    """numpy's RuntimeError ("Can't call numpy() on Tensor that requires grad") came out of K.matmat(t)."""
    torch = pytest.importorskip("torch")
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(0).standard_normal((40, 3)))
    B = np.random.default_rng(1).standard_normal((40, 2))
    T = torch.tensor(B, requires_grad=True)
    np.testing.assert_allclose(K.matmat(T), K.to_dense() @ B, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.rmatmat(T.to(torch.bfloat16)), K.to_dense().T @ T.detach().to(torch.bfloat16).double().numpy(),
                               rtol=1e-12, atol=1e-12)
    assert T.requires_grad


def test_points_queries_keys_and_tables_are_read_from_tensors_sparse_tables_and_lists():
    """q and k of a model (tensors that require grad, often bfloat16) were numpy's RuntimeError or
    "unsupported ScalarType" TypeError; a scipy sparse table was read as a 0-d object array ("got shape
    ()"); a ragged list was numpy's ValueError."""
    torch = pytest.importorskip("torch")
    from sfapprox.sources import AttentionMatrix, CovarianceMatrix, KernelMatrix, median_bandwidth

    P = np.random.default_rng(0).standard_normal((12, 3))
    makers = {"kernel": lambda a: KernelMatrix(a, bandwidth=1.0), "median": lambda a: KernelMatrix(a),
              "attention": lambda a: AttentionMatrix(a, a), "covariance": lambda a: CovarianceMatrix(a)}
    half = torch.tensor(P).to(torch.bfloat16)
    for name, make in makers.items():
        want = make(P).to_dense()
        grad = torch.tensor(P, requires_grad=True)
        np.testing.assert_array_equal(make(grad).to_dense(), want, err_msg=name)
        np.testing.assert_array_equal(make(sp.csr_array(P)).to_dense(), want, err_msg=name)
        np.testing.assert_array_equal(make(half).to_dense(), make(half.double().numpy()).to_dense(), err_msg=name)
        assert grad.requires_grad
        with pytest.raises(InputError, match="cannot read .* as an array"):
            make([[1.0, 2.0], [3.0]])
    assert median_bandwidth(torch.tensor(P, requires_grad=True)) == median_bandwidth(P)


def test_a_source_takes_the_matmul_operator_on_either_side():
    """``K @ v`` was a TypeError (a source had no ``@``) and ``v @ K`` numpy's "does not support ufuncs":
    the products a notebook user writes first, by one pass over the columns as matmat and rmatmat."""
    rng = np.random.default_rng(0)
    K = KernelMatrix(rng.standard_normal((40, 3)), kernel="laplacian")
    A = AttentionMatrix(rng.standard_normal((40, 4)), rng.standard_normal((40, 4)))  # not symmetric
    v, B = rng.standard_normal(40), rng.standard_normal((40, 3))
    for source in (K, A):
        D = source.to_dense()
        assert np.allclose(source @ v, D @ v) and np.allclose(source @ B, D @ B)
        assert np.allclose(v @ source, v @ D) and np.allclose(B.T @ source, B.T @ D)
        assert (v @ source).shape == (40,) and (B.T @ source).shape == (3, 40)
    with pytest.raises(ParameterError, match="40 x 40: it applies to a vector or a matrix of 40 rows"):
        K @ np.ones(3)
    with pytest.raises(ParameterError, match=r"B @ it takes a vector of 40 or a matrix of 40 columns, got shape 2 x 3"):
        np.ones((2, 3)) @ K


def _formed_whole_then_mirrored(source, width):
    """The formation before: every column block in full, then the lower triangle overwritten by the upper
    one's mirror (what to_dense did): the numbers a symmetric source's formed matrix must keep."""
    from sfapprox.sources._base import _mirror_upper

    out = np.empty((source.n, source.n))
    for J in block_columns(source.n, width):
        out[:, J] = source.columns(J)
    _mirror_upper(out, width)
    return out


def _symmetric_sources(n):
    """Every kind of source that is symmetric: each kernel, a covariance, a symmetric sparse matrix
    (attention is not symmetric)."""
    from sfapprox.sources import CovarianceMatrix

    rng = np.random.default_rng(3)
    P = rng.standard_normal((n, 5)) * 2
    S = sp.random(n, n, density=0.05, random_state=4, format="csr")
    sources = [KernelMatrix(P, kernel) for kernel in KERNELS]
    sources += [CovarianceMatrix(rng.standard_normal((7, n))), SparseSource(S + S.T)]
    assert all(source.symmetric for source in sources)
    return sources


class _TalliedKernel(KernelMatrix):
    """A kernel that notes the size of each block of entries it evaluates (its profile of the distances)."""

    def _profile(self, d2):
        self.evaluated.append(d2.size)
        return super()._profile(d2)


def _kept(n, step):
    """Entries a symmetric formation by cells of ``step`` columns keeps: rows [0, c1) of each cell [c0, c1)."""
    return sum(min(n, c0 + step) * min(step, n - c0) for c0 in range(0, n, step))


@pytest.mark.parametrize("n", [130, 257])
def test_a_symmetric_source_is_formed_with_the_numbers_of_its_whole_columns_mirrored(n, monkeypatch):
    """Formed, every symmetric source is the matrix its whole column blocks gave, mirrored, to the last bit:
    in the narrowest blocks a limit allows, and in one block cut in cells of fewer columns."""
    from sfapprox.sources import _base

    for source in _symmetric_sources(n):
        limited = source.limited(source.formed_bytes + 1)  # nothing left beside the matrix: the narrowest blocks
        np.testing.assert_array_equal(limited.to_dense(), _formed_whole_then_mirrored(source, MIN_BLOCK),
                                      err_msg=repr(source))
    monkeypatch.setattr(_base, "FORM_CELL", 48, raising=False)
    for source in _symmetric_sources(n):
        X = source.to_dense()  # no limit of its own: one block of every column
        np.testing.assert_array_equal(X, _formed_whole_then_mirrored(source, n), err_msg=repr(source))
        assert np.array_equal(X, X.T)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "matern32", "matern52"])
def test_a_kernel_formed_evaluates_only_the_entries_it_keeps(kernel, monkeypatch):
    """Of each cell of columns [c0, c1) a kernel formed evaluates the rows [0, c1) only (about half of the
    entries; the rest is the mirror), where its whole columns evaluated every row."""
    from sfapprox.sources import _base

    monkeypatch.setattr(_base, "FORM_CELL", 64, raising=False)
    n = 300
    K = _TalliedKernel(np.random.default_rng(0).standard_normal((n, 4)), kernel)
    for limit in (None, K.formed_bytes + 1):  # one block of every column; blocks of MIN_BLOCK
        K.evaluated = []
        K.limited(limit).to_dense()
        assert sum(K.evaluated) == _kept(n, 64) < 0.62 * n * n


def test_a_symmetric_source_formed_refuses_a_block_that_overflows_as_its_columns_do():
    """Blocks not bounded by construction (a linear kernel's inner products) are checked formed, as each
    column block was when read whole."""
    K = KernelMatrix(np.full((100, 2), 1e100), kernel="linear")
    K.max_memory = K.formed_bytes + 1
    with pytest.raises(InputError, match="values too large"):
        K.to_dense()


def test_the_public_entry_points_hint_their_matrix_by_the_one_alias():
    """Every estimator's ``fit(X)`` and ``frobenius_error(X)``, ``fit_sf``, ``compare``, ``sweep``,
    ``describe``, ``fit_matrix``, ``frobenius_error``, ``executor=``, ``KernelMatrix(points)``, ``AttentionMatrix(q, k)``
    and ``to_torch(dtype, device)`` had no type hint: each now names the one alias of what it takes
    (:data:`sfapprox.sources.MatrixLike`, defined once; a file or a LoadedMatrix too for ``compare``)."""
    import importlib
    import inspect

    import torch
    from numpy.typing import ArrayLike

    import sfapprox
    from sfapprox._base import Approximation, methods
    from sfapprox._executors import Executor
    from sfapprox._validation import MatrixArray
    from sfapprox.comparison import MatrixInput
    from sfapprox.describe import describe
    from sfapprox.operators import ChordOperator, HybridOperator, SurrogateOperator
    from sfapprox.sources import AttentionMatrix, DistributedSource, KernelMatrix, MatrixLike, MatrixSource

    def hint(func, name):
        """The hint of ``func``'s parameter ``name``, evaluated where ``func`` is defined (torch named)."""
        annotation = inspect.signature(func).parameters[name].annotation
        assert annotation is not inspect.Parameter.empty, (func.__qualname__, name)
        where = (func.__init__ if isinstance(func, type) else func).__globals__
        return eval(annotation, {**where, "torch": torch}) if isinstance(annotation, str) else annotation

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for spec in methods().values():
        importlib.import_module(spec.make.__module__)
    importlib.import_module("sfapprox.sf.model")
    estimators = list(subclasses(Approximation))
    assert len(estimators) >= 10
    for cls in [Approximation, *estimators]:
        assert hint(cls.fit, "X") == MatrixLike, cls.__name__
    assert hint(Approximation.frobenius_error, "X") == MatrixLike
    assert MatrixLike.__args__[-1] is MatrixSource and set(MatrixArray.__args__) < set(MatrixLike.__args__)
    assert set(MatrixLike.__args__) < set(MatrixInput.__args__)
    assert hint(sfapprox.fit_sf, "X") == MatrixLike
    for func in (sfapprox.compare, sfapprox.sweep.sweep, describe, sfapprox.fit_matrix):
        assert hint(func, "matrix") == MatrixInput, func.__name__
    assert hint(sfapprox.frobenius_error, "X") == hint(sfapprox.frobenius_error, "approx") == MatrixArray
    for func in (sfapprox.compare, sfapprox.estimate_errors, DistributedSource):
        assert Executor in (hint(func, "executor"), *getattr(hint(func, "executor"), "__args__", ())), func.__name__
    assert hint(KernelMatrix, "points") == hint(AttentionMatrix, "q") == hint(AttentionMatrix, "k") == ArrayLike
    for cls in (SurrogateOperator, ChordOperator, HybridOperator):
        assert hint(cls.to_torch, "dtype") == torch.dtype | str | None, cls.__name__
        assert hint(cls.to_torch, "device") == torch.device | str | None, cls.__name__


def test_a_sparse_matrix_read_by_its_columns_is_copied_within_the_limit():
    """columns_within made a sparse matrix's CSC copy first and gave its passes what was left (1 byte
    where the copy was over the limit); the copy is refused before it is made."""
    from sfapprox.sources import columns_within

    X = sp.csr_array(sp.random(64, 64, density=0.2, random_state=0))  # 819 entries: about 10 KiB, canonical
    with pytest.raises(ResourceError, match=r"^X: reading the 64 x 64 sparse matrix \(819 stored entries\)"):
        columns_within(X, 15_000)
    src = columns_within(X, 30_000)
    assert isinstance(src, SparseSource) and src.max_memory == 30_000 - src.held_bytes


def test_attention_copies_gpu_queries_and_keys_within_its_max_memory():
    """AttentionMatrix copied a GPU tensor of queries or keys to host memory within the default limit (80 %
    of RAM), not its own max_memory: refused before the copy, in one line naming it."""
    torch = pytest.importorskip("torch")
    from test_validation import TestTorch

    rng = np.random.default_rng(0)
    q = TestTorch._gpu_tensor(torch, rng.standard_normal((16, 4)))  # float32: 256 B, 512 B more as float64
    with pytest.raises(ResourceError, match=r"^attention: the copy in host memory of the 16 x 4 float32 tensor on "
                                            r"cuda:0 \(and its float64 copy\)") as info:
        AttentionMatrix(q, rng.standard_normal((16, 4)), max_memory=512)
    assert "\n" not in str(info.value) and type(q).copies == 0
    A = AttentionMatrix(q, rng.standard_normal((16, 4)), max_memory="1M")
    assert type(q).copies == 1 and np.allclose(A.to_dense().sum(axis=1), 1.0)


@pytest.mark.parametrize("make", [
    lambda t, limit: KernelMatrix(t, max_memory=limit),
    lambda t, limit: CovarianceMatrix(t, max_memory=limit),
    lambda t, limit: AttentionMatrix(t, t, max_memory=limit),
], ids=["kernel", "covariance", "attention"])
def test_a_table_s_float64_copy_is_refused_before_it_is_made_where_it_is_over_max_memory(make):
    # float32 points, queries and keys (and any covariance table) are copied to float64: 8 bytes a cell
    # beside the 4 of the table, refused under a limit they pass unconverted (it was made unchecked)
    table = np.random.default_rng(0).standard_normal((200, 50)).astype(np.float32)
    with pytest.raises(ResourceError, match=r"the float64 copy of .*\(200 x 50 float32.* over the memory limit"):
        make(table, 100_000)
    source = make(table, "1M")  # within the limit: made, and the limit is the source's
    assert source.max_memory == 1 << 20


def test_the_keys_copy_counts_the_queries_held_beside_it():
    q = np.random.default_rng(1).standard_normal((100, 20)).astype(np.float32)
    alone = q.nbytes + 8 * q.size  # the keys' copy alone fits; the queries' float64 copy is held beside it
    with pytest.raises(ResourceError, match=r"the float64 copy of k .* beside the matrix held in memory"):
        AttentionMatrix(q, q, max_memory=alone + 1000)


def test_open_matrix_gives_its_kernel_source_its_limit(tmp_path):
    path = tmp_path / "points.csv"
    np.savetxt(path, np.random.default_rng(2).standard_normal((30, 3)), delimiter=",")
    assert open_matrix(path, kernel="rbf", max_memory="1M").max_memory == 1 << 20


@pytest.mark.parametrize("fmt", ["dok", "lil"])
def test_a_dok_or_lil_matrix_read_by_its_columns_is_counted_by_its_entries(fmt):
    """``sparse_source_within`` counted entries by ``np.size(matrix.data)``: a DOK has no ``data``
    (AttributeError from compare of a DOK too big to form), a LIL's holds one list a row (its copies
    counted 15 times too small, accepted where the same matrix as COO was refused)."""
    import scipy.sparse as sp

    from sfapprox import ResourceError, compare
    from sfapprox.sources import sparse_source_within
    from sfapprox.sources.arrays import sparse_copies_bytes

    M = sp.random(600, 600, density=0.05, format="coo", random_state=0)
    M = M + M.T
    other = getattr(sp, f"{fmt}_array")(M)
    assert sparse_copies_bytes(other) >= sparse_copies_bytes(sp.coo_array(M))  # (its indices may be wider)
    with pytest.raises(ResourceError):
        sparse_source_within(other, sparse_copies_bytes(sp.coo_array(M)) // 2)
    row = compare(other, ["sparse"], budget=2_000, max_memory=2_000_000).results[0]
    assert row.status == "ok", row


def test_a_kernel_and_a_covariance_read_their_text_table_with_its_delimiter(tmp_path):
    """A .txt of points '1,2' was refused (two cells or a decimal comma?) with no option to say which."""
    from sfapprox.io import open_matrix, read_points

    path = tmp_path / "p.txt"
    path.write_text("0,0\n1,0\n0,2\n")
    np.testing.assert_array_equal(read_points(path, delimiter=","), [[0, 0], [1, 0], [0, 2]])
    K = open_matrix(path, kernel="rbf", bandwidth=1.0, delimiter=",")
    assert K.n == 3 and round(float(K.columns([0])[1, 0]), 4) == 0.6065
    C = open_matrix(path, covariance=True, decimal=".")
    np.testing.assert_allclose(C.to_dense() if hasattr(C, "to_dense") else C.matrix, np.cov([[0, 0], [1, 0], [0, 2]], rowvar=False))


def test_text_options_for_a_table_that_is_not_text_or_an_attention_map_are_refused(tmp_path):
    from sfapprox._errors import ParameterError
    from sfapprox.io import open_matrix

    path = tmp_path / "p.npy"
    np.save(path, np.eye(3))
    with pytest.raises(ParameterError, match=r"option delimiter=',' applies to text tables \(\.csv/\.tsv/\.txt/\.dat\)"):
        open_matrix(path, kernel="rbf", delimiter=",")
    with pytest.raises(ParameterError, match=r"decimal=',' does not apply to it"):
        open_matrix(tmp_path / "qk.npz", format="attention", decimal=",")
    with pytest.raises(ParameterError, match=r"option decimal='\.' applies to text tables \(\.csv/\.tsv/\.txt/\.dat\)"):
        open_matrix(path, decimal=".")  # (a .npy otherwise mapped, where the option went unread)


def test_a_text_option_for_a_table_that_is_not_text_is_refused_in_one_wording_however_it_is_read(tmp_path):
    """``open_matrix`` said "option decimal= applies to csv files" and ``read_points`` "applies to text tables
    (.csv/.tsv/.txt/.dat)" of one option given for one .npy: one wording now, naming the files that take the
    option where it was given (a kernel's points are never triplets)."""
    from sfapprox._errors import ParameterError, spelled_for
    from sfapprox.io import open_matrix, read_points

    path = tmp_path / "p.npy"
    np.save(path, np.eye(3))
    said = []
    for read in (lambda: open_matrix(path, decimal="."), lambda: open_matrix(path, kernel="rbf", decimal="."),
                 lambda: read_points(path, decimal=".")):
        with pytest.raises(ParameterError) as caught:
            read()
        said.append(str(caught.value))
    # one wording; a kernel's points are never triplets, so its refusal names the text tables alone
    assert said == [f"{path}: option decimal='.' applies to text tables (.csv/.tsv/.txt/.dat) and triplet files "
                    "(.ijv/.coo/.edges), not 'npy'"] + [f"{path}: option decimal='.' applies to text tables "
                                                      "(.csv/.tsv/.txt/.dat), not 'npy'"] * 2
    with spelled_for("cli"), pytest.raises(ParameterError, match=r"option --delimiter , applies to text tables"):
        read_points(path, delimiter=",")


def test_a_memory_mapped_source_pickles_by_its_file_not_its_data(tmp_path):
    """Sent to a process pool's or a Dask cluster's workers (or joblib.dump-ed), a mapped .npy (opened so
    because it is over the memory limit) was pickled as an ndarray: the whole file read into the pickle,
    and the copy no longer memory-mapped, with no path or fingerprint in its record."""
    import copy
    import os
    import pickle

    X = np.random.default_rng(5).random((64, 64))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "f.npy", np.asfortranarray(X))
    np.save(tmp_path / "tall.npy", np.vstack([X, X[:9]]))
    tall = np.load(tmp_path / "tall.npy", mmap_mode="r")
    for source in (open_npy(tmp_path / "x.npy"), open_npy(tmp_path / "f.npy"), ArraySource(tall[5:69], name="rows")):
        said = source.describe()
        data = pickle.dumps(source, protocol=5)
        assert len(data) < X.nbytes / 4
        for back in (pickle.loads(data), copy.deepcopy(source)):
            assert isinstance(back.array, np.memmap) and back.describe() == said and back.notes == source.notes
            assert np.array_equal(back.columns(np.arange(64)), np.asarray(source.array))
        assert copy.copy(source).array is source.array  # limited()'s copy shares the map
    # a strided view is no part of the file in one piece: pickled with its data, as before
    strided = ArraySource(np.load(tmp_path / "x.npy", mmap_mode="r")[::2, ::2])
    assert np.array_equal(pickle.loads(pickle.dumps(strided)).array, X[::2, ::2])
    # unpickled where the file is another now: one line, not numpy's error or other numbers
    data = pickle.dumps(open_npy(tmp_path / "x.npy"))
    os.truncate(tmp_path / "x.npy", 1000)
    with pytest.raises(InputError, match=r"^x: cannot map .*x\.npy again where the source was unpickled \(it is 1,000 bytes"):
        pickle.loads(data)


@pytest.mark.parametrize("n, said", [(1, "a vector of 1 or a matrix of 1 column"),
                                     (1024, "a vector of 1,024 or a matrix of 1,024 columns")])
def test_a_product_from_the_left_says_the_order_as_other_messages_say_counts(n, said):
    """"B @ it takes a vector of 1024 or a matrix of 1 columns": N thousands separated, counted
    (formats.counted), as the tables write counts."""
    source = ArraySource(np.eye(n))
    with pytest.raises(ParameterError, match=rf"is {n:,} x {n:,}: B @ it takes {said}, got shape 2 x 3$"):
        np.ones((2, 3)) @ source


def test_a_points_npy_s_nan_is_named_by_its_numpy_index_never_as_a_line_and_column(tmp_path):
    """A .npy's NaN was "point 5 ... in column 3" counted from 0, beside a .csv's "line 7, column 4" counted
    from 1: the array's is named as the covariance reader names one, by numpy's index, said 0-based."""
    from sfapprox import InputError
    from sfapprox.io import open_matrix

    points = np.random.default_rng(0).standard_normal((8, 4))
    points[5, 3] = np.nan
    np.save(tmp_path / "pts.npy", points)
    with pytest.raises(InputError, match=re.escape("the first at [5, 3]: 0-based, as numpy indexes")) as caught:
        open_matrix(tmp_path / "pts.npy", kernel="rbf")
    assert "point 5" not in str(caught.value) and "column" not in str(caught.value)


def test_a_text_option_for_a_points_npy_names_only_the_tables_a_kernel_reads(tmp_path):
    # the refusal pointed a kernel's user at triplet files, which a table of points never is
    from sfapprox.io import read_points

    path = tmp_path / "pts.npy"
    np.save(path, np.random.default_rng(0).standard_normal((5, 2)))
    with pytest.raises(ParameterError, match=r"applies to text tables \(\.csv/\.tsv/\.txt/\.dat\), not 'npy'") as err:
        read_points(path, delimiter=",")
    assert "triplet" not in str(err.value)


def test_a_kernel_or_covariance_of_a_text_table_records_the_marks_it_was_read_with(tmp_path):
    """A kernel's or a covariance's recipe named the kernel and its bandwidth but not the --decimal its
    points were read with: '1,5' is one coordinate with decimal=',' and two with the file's commas, two
    kernels of one file.  The marks given are in the recipe; none given, none recorded (as before)."""
    points = tmp_path / "p.csv"
    points.write_text("1,5\n2,5\n3,25\n", encoding="utf-8")
    K = open_matrix(points, kernel="rbf", bandwidth=1.0, decimal=",")
    assert K.recipe["points"] == [3, 1] and K.recipe["decimal"] == "," and "delimiter" not in K.recipe
    assert "decimal" not in open_matrix(points, kernel="rbf", bandwidth=1.0).recipe
    wide = tmp_path / "w.csv"
    wide.write_text("\n".join(";".join(f"{i * j % 7},5" for j in range(400)) for i in range(50)), encoding="utf-8")
    C = open_matrix(wide, covariance=True, delimiter=";", decimal=",", max_memory=3_000_000)
    assert C.kind == "covariance"  # (not formed: its recipe is the source's own)
    assert C.recipe == {"kind": "covariance", "samples": 50, "features": 400, "covariance": True,
                        "delimiter": ";", "decimal": ","}


@pytest.mark.parametrize("make, message", [
    (lambda: KernelMatrix(np.float64(3)), "kernel: the points must be a table of shape (N, d), got a scalar"),
    (lambda: KernelMatrix(np.ones(3)), "kernel: the points must be a table of shape (N, d), got shape 3"),
    (lambda: CovarianceMatrix(np.float64(3)),
     "covariance: a covariance needs a real samples x features table, got a scalar of float64"),
    (lambda: ArraySource(np.ones((2, 3))), "X: a square matrix is needed, got shape 2 x 3"),
    (lambda: ArraySource([[1.0]]), "X: a square matrix is needed, got a list"),
])
def test_a_wrong_shape_is_written_as_every_message_writes_one(make, message):
    """``shape scalar`` (and ArraySource's tuple, or ``None`` for a list) read as no English: a scalar is
    "a scalar", a shape ``2 x 3``, as :func:`~sfapprox._validation.check_operand` writes them."""
    with pytest.raises(InputError) as info:
        make()
    assert str(info.value) == message
