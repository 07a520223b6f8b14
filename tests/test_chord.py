import numpy as np
import pytest
import scipy.sparse as sp

from sfapprox import ParameterError
from sfapprox.chord import chord_indices, chord_offsets, default_n_factors, n_stored, support_is_full


def test_offsets_reference_protocol():
    assert chord_offsets(1).tolist() == [0]
    assert chord_offsets(2).tolist() == [0, 1]
    assert chord_offsets(24).tolist() == [0, 1, 2, 4, 8, 16]
    assert chord_offsets(32).tolist() == [0, 1, 2, 4, 8, 16]
    assert chord_offsets(33).tolist() == [0, 1, 2, 4, 8, 16, 32]
    assert chord_offsets(100, base=3).tolist() == [0, 1, 3, 9, 27, 81]


def test_default_factors():
    assert [default_n_factors(n) for n in (1, 2, 3, 4, 5, 24, 36, 1024, 1025)] == [1, 1, 2, 2, 3, 5, 6, 10, 11]


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_size(bad):
    with pytest.raises(ParameterError, match="at least 1"):
        chord_offsets(bad)


def test_full_support_for_every_n_up_to_600():
    """The reference structure covers every entry, for N = 2..600 (shift reachability)."""
    for n in range(2, 601):
        assert support_is_full(n, chord_offsets(n), default_n_factors(n)), n


def test_one_factor_fewer_is_not_full_for_powers_of_two():
    for n in (8, 64, 512):
        assert not support_is_full(n, chord_offsets(n), default_n_factors(n) - 1)


@pytest.mark.parametrize("n", [2, 3, 7, 24, 36, 48, 80, 129])
def test_support_matches_sparse_pattern_product(n):
    """Cross-check reachability against an explicit sparse boolean product."""
    offsets = chord_offsets(n)
    idx = chord_indices(n, offsets)
    rows = np.repeat(np.arange(n), len(offsets))
    W = sp.csr_array((np.ones(idx.size), (rows, idx.ravel())), shape=(n, n))
    P = W.copy()
    for _ in range(default_n_factors(n) - 1):
        P = (P @ W).astype(bool).astype(float)
    assert P.nnz == n * n


def test_indices_and_count():
    idx = chord_indices(5, chord_offsets(5))
    assert idx[4].tolist() == [4, 0, 1, 3]
    assert n_stored(36, 6, 7) == 1512


def test_symmetric_support_coverage_and_fewest_factors():
    from sfapprox.chord import min_full_factors, support_offsets

    assert support_offsets(8, "symmetric").tolist() == [0, 1, 2, 4, 6, 7]
    for n in range(2, 300):
        offs = support_offsets(n, "symmetric")
        m = min_full_factors(n, offs)
        assert support_is_full(n, offs, m) and (m == 1 or not support_is_full(n, offs, m - 1))
        assert m <= default_n_factors(n)
    with pytest.raises(ParameterError, match="unknown support"):
        support_offsets(8, "hexagonal")


def test_base_b_coverage():
    from sfapprox.chord import min_full_factors

    for base in (3, 4, 5):
        for n in (10, 50, 123):
            m = min_full_factors(n, chord_offsets(n, base))
            assert m is not None and support_is_full(n, chord_offsets(n, base), m)


def test_min_full_factors_is_computed_once_per_structure():
    """info and a comparison ask for the same N's structures again and again (0.2 s of np.roll at
    N = 8,192 in each info): the answer for ``(N, offsets mod N, limit)`` is remembered."""
    from sfapprox.chord import _min_full_factors, min_full_factors

    n = 1031  # an order no other test asks for
    offsets = chord_offsets(n, 3)
    misses = _min_full_factors.cache_info().misses
    first = min_full_factors(n, offsets)
    assert first is not None and _min_full_factors.cache_info().misses == misses + 1
    assert min_full_factors(n, np.asarray(offsets) + n) == first  # the same offsets mod N
    assert min_full_factors(n, offsets, limit=1) is None  # another limit: its own answer
    assert min_full_factors(n, offsets) == first and _min_full_factors.cache_info().misses == misses + 2


def test_min_full_factors_shifts_in_place():
    """The reachable shifts are grown in place: a copy of the N-vector for each offset of each factor (np.roll)
    made ``info`` of a sparse file of order 20,000,000 spend 84 of its 108 s here; two N-vectors in all now."""
    import tracemalloc

    from sfapprox.chord import min_full_factors

    n = 1_000_003  # an order no other test asks for
    offsets = chord_offsets(n, 2)
    tracemalloc.start()
    try:
        assert min_full_factors(n, offsets) == 15  # (as np.roll grew it)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * n, peak
