"""The Chord sparsity protocol: which entries each sparse factor may hold.

Row ``i`` of every factor holds values only at columns ``(i + d) mod N`` for
``d`` in the offsets ``{0} ∪ {b^k : b^k < N}`` (``b = 2`` is the reference
protocol).  Positions are implied by the protocol, so only the values are
stored: ``N * K`` per factor and ``N * K * M`` in total.
"""

from __future__ import annotations

import math

import numpy as np

from ._errors import ParameterError

__all__ = [
    "SUPPORTS",
    "support_offsets",
    "min_full_factors",
    "chord_offsets",
    "default_n_factors",
    "chord_indices",
    "n_stored",
    "support_is_full",
]


def chord_offsets(n: int, base: int = 2) -> np.ndarray:
    """Offsets of the Chord protocol for an ``n x n`` matrix.

    Parameters
    ----------
    n : int
        Matrix size, at least 1.
    base : int, default=2
        Chord base ``b``; offsets are ``0`` and the powers ``b^k < n``.

    Returns
    -------
    numpy.ndarray of int64
        Sorted offsets, ``0`` first.  ``K = len(offsets)``.

    Examples
    --------
    >>> chord_offsets(8).tolist()
    [0, 1, 2, 4]
    """
    if n < 1:
        raise ParameterError(f"matrix size must be at least 1, got {n}")
    if base < 2:
        raise ParameterError(f"Chord base must be at least 2, got {base}")
    offsets = [0]
    power = 1
    while power < n:
        offsets.append(power)
        power *= base
    return np.asarray(offsets, dtype=np.int64)


def default_n_factors(n: int) -> int:
    """Number of factors of the reference protocol, ``M = ceil(log2 N)`` (at least 1).

    Examples
    --------
    >>> default_n_factors(24), default_n_factors(32), default_n_factors(33)
    (5, 5, 6)
    """
    if n < 1:
        raise ParameterError(f"matrix size must be at least 1, got {n}")
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def chord_indices(n: int, offsets: np.ndarray) -> np.ndarray:
    """Column index of every stored value: ``idx[i, k] = (i + offsets[k]) mod n``."""
    rows = np.arange(n, dtype=np.int64)[:, None]
    return (rows + np.asarray(offsets, dtype=np.int64)[None, :]) % n


def n_stored(n: int, n_factors: int, n_offsets: int) -> int:
    """Stored numbers of a Chord factorization: ``N * K * M``."""
    return int(n) * int(n_offsets) * int(n_factors)


def support_is_full(n: int, offsets: np.ndarray, n_factors: int) -> bool:
    """Whether the product of ``n_factors`` Chord factors can fill every entry.

    Works on the pattern only, with boolean reachability over shifts: entry
    ``(i, j)`` is in the support iff ``j - i (mod n)`` is a sum of
    ``n_factors`` offsets.  Costs ``O(M * K * N)``; no N x N mask is built.
    """
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    offs = np.asarray(offsets, dtype=np.int64) % n
    for _ in range(n_factors):
        nxt = np.zeros(n, dtype=bool)
        for d in offs:
            nxt |= np.roll(reach, int(d))
        reach = nxt
    return bool(reach.all())


#: Support protocols of the shift family, with the offsets each row holds.
SUPPORTS = {
    "chord": "offsets {0} ∪ {b^k < N} (the reference protocol with b = 2)",
    "symmetric": "offsets {0} ∪ {±b^k mod N}: each row also reaches back (about 2 log_b N + 1 per row)",
}


def support_offsets(n: int, support: str = "chord", base: int = 2) -> np.ndarray:
    """Offsets of a support protocol (see :data:`SUPPORTS`).

    Examples
    --------
    >>> support_offsets(8, "symmetric").tolist()
    [0, 1, 2, 4, 6, 7]
    """
    forward = chord_offsets(n, base)
    if support == "chord":
        return forward
    if support == "symmetric":
        return np.unique(np.concatenate([forward, (-forward) % n])).astype(np.int64)
    raise ParameterError(f"unknown support {support!r}; choose one of {', '.join(SUPPORTS)}")


def min_full_factors(n: int, offsets: np.ndarray, limit: int | None = None) -> int | None:
    """Fewest factors whose product covers every entry (None if more than ``limit``).

    Grows the reachable shift set one factor at a time: ``O(M K N)`` in all.
    """
    limit = n if limit is None else limit
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    offs = np.asarray(offsets, dtype=np.int64) % n
    for m in range(1, limit + 1):
        nxt = np.zeros(n, dtype=bool)
        for d in offs:
            nxt |= np.roll(reach, int(d))
        reach = nxt
        if reach.all():
            return m
    return None
