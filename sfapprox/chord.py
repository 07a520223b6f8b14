"""Support protocols: which entries each sparse factor may hold.

Chord (the reference): row ``i`` of every factor holds values only at
columns ``(i + d) mod N`` for ``d`` in the offsets ``{0} ∪ {b^k : b^k < N}``
(``b = 2`` is the reference protocol).  Positions are implied by the
protocol, so only the values are stored: ``N * K`` per factor and
``N * K * M`` in total.  ``"symmetric"`` adds the offsets ``-b^k``.

Butterfly (the FAµST toolbox's structure): ``N`` is a power of two and there
are ``M = log2 N`` factors; row ``i`` of factor ``m`` (``m = 0`` the leftmost)
holds values at columns ``i`` and ``i XOR 2^m`` only: ``2 N`` values per
factor, ``2 N M`` in total.  It is not a shift pattern, so it has no offsets.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._errors import ParameterError, parameter

__all__ = [
    "SUPPORTS",
    "OFFSET_SUPPORTS",
    "support_offsets",
    "min_full_factors",
    "chord_offsets",
    "default_n_factors",
    "chord_indices",
    "n_stored",
    "support_is_full",
    "is_power_of_two",
    "check_butterfly_size",
    "butterfly_n_factors",
    "butterfly_columns",
    "butterfly_is_full",
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

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix. At least 1 (:class:`~sfapprox.ParameterError` otherwise).

    Examples
    --------
    >>> default_n_factors(24), default_n_factors(32), default_n_factors(33)
    (5, 5, 6)
    """
    if n < 1:
        raise ParameterError(f"matrix size must be at least 1, got {n}")
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def chord_indices(n: int, offsets: np.ndarray) -> np.ndarray:
    """Column index of every stored value: ``idx[i, k] = (i + offsets[k]) mod n``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    offsets : array_like of int
        The ``K`` offsets (e.g. :func:`chord_offsets`).

    Returns
    -------
    numpy.ndarray of int64, shape (n, K)
    """
    rows = np.arange(n, dtype=np.int64)[:, None]
    return (rows + np.asarray(offsets, dtype=np.int64)[None, :]) % n


def n_stored(n: int, n_factors: int, n_offsets: int) -> int:
    """Stored numbers of a Chord factorization: ``N * K * M``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_factors : int
        Number of factors ``M``.
    n_offsets : int
        Values per row and factor ``K``.
    """
    return int(n) * int(n_offsets) * int(n_factors)


def support_is_full(n: int, offsets: np.ndarray, n_factors: int) -> bool:
    """Whether the product of ``n_factors`` Chord factors can fill every entry.

    Works on the pattern only, with boolean reachability over shifts: entry
    ``(i, j)`` is in the support iff ``j - i (mod n)`` is a sum of
    ``n_factors`` offsets.  Costs ``O(M * K * N)``; no N x N mask is built.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    offsets : array_like of int
        The offsets every factor holds (taken mod ``n``).
    n_factors : int
        Number of factors ``M``.
    """
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    offs = np.asarray(offsets, dtype=np.int64) % n
    grows = bool((offs == 0).any())  # with the offset 0 every factor keeps what the ones before reached
    for _ in range(n_factors):
        nxt = np.zeros(n, dtype=bool)
        for d in offs:
            nxt |= np.roll(reach, int(d))
        if grows and np.array_equal(nxt, reach):  # nothing new: no further factor adds any (--factors 10**6 hung)
            break
        reach = nxt
    return bool(reach.all())


#: Support protocols: two of the shift family (with the offsets each row holds) and butterfly.
SUPPORTS = {
    "chord": "offsets {0} ∪ {b^k < N} (the reference protocol with b = 2)",
    "symmetric": "offsets {0} ∪ {±b^k mod N}: each row also reaches back (about 2 log_b N + 1 per row)",
    "butterfly": "columns i and i XOR 2^m in factor m; N a power of two, M = log2 N, 2 N M stored",
}
#: The supports whose positions are cyclic offsets (:func:`support_offsets` applies to them).
OFFSET_SUPPORTS = ("chord", "symmetric")


def support_offsets(n: int, support: str = "chord", base: int = 2) -> np.ndarray:
    """Offsets of a support protocol (see :data:`SUPPORTS`).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    support : {"chord", "symmetric"}, default="chord"
        Support protocol; ``"butterfly"`` (no offsets) and unknown names are a
        :class:`~sfapprox.ParameterError`.
    base : int, default=2
        Chord base ``b``.

    Returns
    -------
    numpy.ndarray of int64
        Sorted offsets in ``[0, n)``, ``0`` first.

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
    if support == "butterfly":
        raise ParameterError(
            "the butterfly support has no offsets: row i of factor m holds columns i and i XOR 2^m "
            "(see butterfly_columns)"
        )
    raise ParameterError(f"unknown support {support!r}; choose one of {', '.join(SUPPORTS)}")


def min_full_factors(n: int, offsets: np.ndarray, limit: int | None = None) -> int | None:
    """Fewest factors whose product covers every entry (None if more than ``limit``).

    Grows the reachable shift set one factor at a time: ``O(M K N)`` in all.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    offsets : array_like of int
        The offsets every factor holds (taken mod ``n``).
    limit : int, optional
        Most factors tried; None: ``n``.

    Returns
    -------
    int or None
    """
    limit = n if limit is None else limit
    offs = np.asarray(offsets, dtype=np.int64) % n
    return _min_full_factors(int(n), tuple(int(d) for d in offs), int(limit))


@functools.lru_cache(maxsize=256)
def _min_full_factors(n: int, offsets: tuple[int, ...], limit: int) -> int | None:
    """:func:`min_full_factors` of offsets already reduced mod ``n``, remembered: ``info`` and a comparison
    ask it for the same ``N`` again and again (SF's smallest budget for each base, for each SF method;
    0.2 s of np.roll at N = 8,192 in each ``info``)."""
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    nxt = np.empty(n, dtype=bool)
    for m in range(1, limit + 1):
        nxt[:] = False
        for d in offsets:
            # shifted in place, two slices: np.roll's copy of each shift was 4-5x slower (info of a sparse file of
            # order 20,000,000 spent 84 of its 108 s here)
            np.logical_or(nxt[d:], reach[:n - d], out=nxt[d:])
            np.logical_or(nxt[:d], reach[n - d:], out=nxt[:d])
        reach, nxt = nxt, reach
        if reach.all():
            return m
    return None


# --------------------------------------------------------------------------- butterfly


def is_power_of_two(n: int) -> bool:
    """Whether ``n`` is ``2^k`` for some ``k >= 0``.

    Parameters
    ----------
    n : int

    Examples
    --------
    >>> is_power_of_two(64), is_power_of_two(48), is_power_of_two(1)
    (True, False, True)
    """
    n = int(n)
    return n >= 1 and n & (n - 1) == 0


def check_butterfly_size(n: int) -> None:
    """Raise :class:`ParameterError` unless an ``n x n`` matrix can take butterfly factors.

    The butterfly pairs row ``i`` with row ``i XOR 2^m``, so ``N`` must be a
    power of two, at least 2.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.

    Examples
    --------
    >>> check_butterfly_size(16)
    >>> check_butterfly_size(12)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sfapprox._errors.ParameterError: the butterfly support needs N to be a power of two ..., got N = 12; ...
    """
    if n >= 2 and is_power_of_two(n):
        return
    lower = 1 << max(1, int(n).bit_length() - 1)
    upper = max(2, 1 << int(n - 1).bit_length()) if n > 1 else 2
    sizes = f"{lower} or {upper}" if lower != upper else f"{upper}"
    raise ParameterError(
        f"the butterfly support needs N to be a power of two (at least 2), got N = {n:,}; resize the "
        f"input to {sizes} ({parameter('resize')} for images, or zero-pad the matrix), or use support 'chord' or "
        "'symmetric', which take any N"
    )


def butterfly_n_factors(n: int) -> int:
    """Number of butterfly factors of an ``n x n`` matrix: ``M = log2 N``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix. A power of two, at least 2 (:func:`check_butterfly_size`).

    Examples
    --------
    >>> butterfly_n_factors(1024)
    10
    """
    check_butterfly_size(n)
    return int(n).bit_length() - 1


def butterfly_columns(n: int, m: int) -> np.ndarray:
    """Column of every stored value of butterfly factor ``m``: ``idx[i] = [i, i XOR 2^m]``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    m : int
        Factor index, ``0`` the leftmost.

    Returns
    -------
    numpy.ndarray of int64, shape (n, 2)

    Examples
    --------
    >>> butterfly_columns(4, 1).tolist()
    [[0, 2], [1, 3], [2, 0], [3, 1]]
    """
    rows = np.arange(n, dtype=np.int64)
    return np.stack([rows, rows ^ (1 << int(m))], axis=1)


def butterfly_is_full(n: int, n_factors: int) -> bool:
    """Whether the product of the first ``n_factors`` butterfly factors can fill every entry.

    Pattern only, as :func:`support_is_full`: entry ``(i, j)`` is in the
    support iff ``i XOR j`` is a sum of distinct ``2^m``, ``m < n_factors``;
    reachability over XOR differences costs ``O(M N)``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix. Not a power of two: False.
    n_factors : int
        Number of leading factors ``M``.

    Examples
    --------
    >>> butterfly_is_full(16, 4), butterfly_is_full(16, 3)
    (True, False)
    """
    if not is_power_of_two(n):
        return False
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    diffs = np.arange(n)
    for m in range(min(int(n_factors), max(0, int(n).bit_length() - 1))):
        reach = reach | reach[diffs ^ (1 << m)]
    return bool(reach.all())
