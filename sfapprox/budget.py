"""Stored-number accounting: the only place where the budget formulas live.

Every method reports how many numbers it stores, and every method asked to
fit a budget ``B`` takes the largest configuration whose count is ``<= B``.

========  ======================================  =============================
method    stored numbers                          notes
========  ======================================  =============================
sf        ``N * K * M``                           positions implied by Chord
tsvd      ``r * (2N + 1)``                        U, V and the singular values
nmf       ``2 * N * r``                           W and H
rpca      ``r * (2N + 1) + s * c``                ``c = 2`` with ``count_indices``
========  ======================================  =============================
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._errors import BudgetError, ParameterError
from .chord import chord_offsets, default_n_factors, n_stored

__all__ = [
    "sf_count",
    "tsvd_count",
    "nmf_count",
    "rpca_count",
    "tsvd_rank_for_budget",
    "nmf_rank_for_budget",
    "parse_budget",
    "resolve_budget",
    "Budget",
    "SFConfig",
    "sf_config_for_budget",
    "rpca_sparse_for_budget",
    "rpca_rank_for_budget",
]


def sf_count(n: int, n_factors: int | None = None, n_offsets: int | None = None) -> int:
    """Stored numbers of SF: ``N * K * M`` (defaults: the reference protocol)."""
    m = default_n_factors(n) if n_factors is None else n_factors
    k = len(chord_offsets(n)) if n_offsets is None else n_offsets
    return n_stored(n, m, k)


def tsvd_count(n: int, rank: int) -> int:
    """Stored numbers of a rank-``r`` truncated SVD: ``r * (2N + 1)``."""
    return int(rank) * (2 * int(n) + 1)


def nmf_count(n: int, rank: int) -> int:
    """Stored numbers of a rank-``r`` NMF: ``2 * N * r``."""
    return 2 * int(n) * int(rank)


def rpca_count(n: int, rank: int, n_sparse: int, *, count_indices: bool = False) -> int:
    """Stored numbers of low rank + sparse: ``r * (2N + 1) + s`` (``2s`` with indices)."""
    per_entry = 2 if count_indices else 1
    return tsvd_count(n, rank) + per_entry * int(n_sparse)


def tsvd_rank_for_budget(n: int, budget: int) -> int:
    """Largest rank whose TSVD fits the budget, capped at ``N`` (0 if none fits)."""
    return min(int(n), int(budget) // (2 * int(n) + 1))


def nmf_rank_for_budget(n: int, budget: int) -> int:
    """Largest rank whose NMF fits the budget, capped at ``N`` (0 if none fits)."""
    return min(int(n), int(budget) // (2 * int(n)))


@dataclass(frozen=True)
class Budget:
    """A resolved budget of stored numbers.

    Attributes
    ----------
    value : int
        Maximum number of stored numbers any method may use.
    spec : str
        What the user asked for (``"sf"``, ``"0.05"``, ``"12000"``).
    """

    value: int
    spec: str


def parse_budget(spec: str | int | float | None) -> str:
    """Normalise a budget specification to a string; validates its form only.

    Accepted: ``None`` or ``"sf"`` (SF's own count), a positive integer
    (stored numbers), or a fraction in ``(0, 1]`` of ``N**2``.
    """
    if spec is None:
        return "sf"
    text = str(spec).strip().lower()
    if text == "sf":
        return text
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(
            f"budget must be 'sf', a positive integer or a fraction of N^2 in (0, 1]; got {spec!r}"
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"budget must be positive, got {spec!r}")
    if value > 1 and value != int(value):
        raise ParameterError(
            f"budget {spec!r} is neither a fraction in (0, 1] nor a whole number of stored values"
        )
    return text


def resolve_budget(spec: str | int | float | None, n: int) -> Budget:
    """Turn a budget specification into a number of stored values for an ``n x n`` matrix.

    Examples
    --------
    >>> resolve_budget("sf", 36).value
    1512
    >>> resolve_budget(0.5, 10).value
    50
    >>> resolve_budget("100", 10).value
    100
    """
    text = parse_budget(spec)
    if text == "sf":
        return Budget(sf_count(n), text)
    value = float(text)
    # "1" means the fraction 1.0 (all of N^2): a budget of one number is useless.
    if value <= 1:
        count = int(math.floor(value * n * n))
    else:
        count = int(value)
    if count < 1:
        raise BudgetError(f"budget {spec!r} is less than one stored number for N={n}")
    return Budget(count, text)


@dataclass(frozen=True)
class SFConfig:
    """A Chord structure: base ``b``, ``M`` factors, ``K`` offsets per row, and its count."""

    base: int
    n_factors: int
    n_offsets: int
    count: int


def _min_full_factors(n: int, base: int, limit: int) -> int | None:
    """Fewest factors whose product has full support with base-``b`` offsets (None if > limit)."""
    from .chord import chord_offsets, min_full_factors

    return min_full_factors(n, chord_offsets(n, base), limit)


def sf_config_for_budget(n: int, budget: int, *, max_base: int = 16) -> SFConfig:
    """The Chord structure that fills ``budget`` as closely as possible without exceeding it.

    Rule (documented in the README): for each base ``b = 2 .. max_base``
    (offsets ``{0} ∪ {b^k < N}``, ``K_b`` of them) take the fewest factors
    ``M_b`` whose product covers every entry, then as many factors as the
    budget allows, ``M = floor(B / (N K_b))`` (more factors, more freedom);
    bases with ``M < M_b`` do not fit.  The structure with the largest count
    wins; ties go to the smaller base, then to fewer factors.  The reference
    structure (``b = 2``, ``M = ceil(log2 N)``) is chosen exactly when
    ``B`` equals its count.

    Raises
    ------
    BudgetError
        When no full-support structure fits in ``budget``.

    Examples
    --------
    >>> sf_config_for_budget(36, 1512)
    SFConfig(base=2, n_factors=6, n_offsets=7, count=1512)
    """
    from .chord import chord_offsets

    best: SFConfig | None = None
    smallest: int | None = None
    for base in range(2, max(2, min(max_base, n)) + 1):
        k = len(chord_offsets(n, base))
        # Search only as far as any budget could reach (bounded: at most N factors).
        m_min = _min_full_factors(n, base, limit=max(1, n))
        if m_min is None:
            continue
        need = n * k * m_min
        smallest = need if smallest is None else min(smallest, need)
        m = budget // (n * k)
        if m < m_min:
            continue
        cand = SFConfig(base, int(m), k, n * k * int(m))
        if best is None or cand.count > best.count:
            best = cand
    if best is None:
        raise BudgetError(
            f"budget {budget} is too small for any full-support Chord factorization of a "
            f"{n} x {n} matrix (the smallest needs {smallest} stored numbers)"
        )
    return best


def rpca_sparse_for_budget(n: int, budget: int, rank: int, *, count_indices: bool = False) -> int:
    """Most sparse entries that fit in ``budget`` next to a rank-``r`` part, capped at ``N^2``.

    Raises
    ------
    BudgetError
        When the rank-``r`` part alone is over the budget.

    Examples
    --------
    >>> rpca_sparse_for_budget(10, 100, 3)
    37
    >>> rpca_sparse_for_budget(10, 100, 3, count_indices=True)
    18
    """
    left = int(budget) - tsvd_count(n, rank)
    if left < 0:
        raise BudgetError(
            f"a rank-{rank} part of a {n} x {n} matrix stores {tsvd_count(n, rank)} numbers, "
            f"over the budget of {budget}; choose a rank of at most {tsvd_rank_for_budget(n, budget)}"
        )
    per_entry = 2 if count_indices else 1
    return min(int(n) * int(n), left // per_entry)


def rpca_rank_for_budget(n: int, budget: int, n_sparse: int, *, count_indices: bool = False) -> int:
    """Largest rank that fits in ``budget`` next to ``n_sparse`` sparse entries, capped at ``N``.

    Raises
    ------
    BudgetError
        When the sparse entries alone are over the budget.

    Examples
    --------
    >>> rpca_rank_for_budget(10, 100, 16)
    4
    """
    left = int(budget) - rpca_count(n, 0, n_sparse, count_indices=count_indices)
    if left < 0:
        raise BudgetError(
            f"{n_sparse} sparse entries store {rpca_count(n, 0, n_sparse, count_indices=count_indices)} "
            f"numbers, over the budget of {budget}; choose fewer sparse entries"
        )
    return tsvd_rank_for_budget(n, left)
