"""The budget splits the hybrids try: how a budget is shared between Chord factors and a correction.

sf+lr and sf+s store Chord factors plus a correction; their counts are the sums
of the parts' counts (:func:`sfapprox.budget.hybrid_count`), so the one formula
per part stays the only one.  The grid's ends are the plain methods (SF alone,
TSVD or the largest entries alone), so the best split is never worse than
either.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import SFConfig, rpca_count, tsvd_count, tsvd_rank_for_budget
from ..chord import chord_offsets, default_n_factors, n_stored

__all__ = ["HybridSplit", "sf_lr_splits", "sf_s_splits"]


@dataclass(frozen=True)
class HybridSplit:
    """One point of a hybrid's grid: how the budget is split between factors and correction.

    Attributes
    ----------
    role : str
        ``"sf"``: the plain SF structure alone (the ``sf`` method's fit);
        ``"lr"`` / ``"sparse"``: no factors, the correction alone (TSVD, or
        the largest entries); ``"sf+rest"``: the plain SF structure plus what
        its count leaves; ``"split"``: reference offsets with fewer factors.
    base, n_factors, n_offsets : int
        The Chord part (``n_factors = 0``: none).
    rank, n_sparse : int
        The correction.
    count : int
        Stored numbers, never above the budget.
    """

    role: str
    base: int
    n_factors: int
    n_offsets: int
    rank: int
    n_sparse: int
    count: int


def _thin(values: list[int], keep: int) -> list[int]:
    """At most ``keep`` of ``values``, evenly spread, the first kept first (and the last when ``keep >= 2``)."""
    if keep <= 0 or not values:
        return []
    if len(values) <= keep:
        return list(values)
    picks = {round(i * (len(values) - 1) / max(1, keep - 1)) for i in range(keep)} if keep > 1 else {0}
    return [values[i] for i in sorted(picks)]


def _hybrid_splits(
    n: int,
    budget: int,
    plain: SFConfig | None,
    *,
    unit: int,
    fill,
    other_end: HybridSplit | None,
    max_splits: int,
) -> list[HybridSplit]:
    """The grid shared by sf+lr and sf+s; ``fill(left)`` is the correction that fits ``left`` numbers."""
    splits: list[HybridSplit] = []
    if plain is not None and plain.count <= budget:
        splits.append(HybridSplit("sf", plain.base, plain.n_factors, plain.n_offsets, 0, 0, plain.count))
    if other_end is not None:
        splits.append(other_end)
    # The plain structure plus what its count leaves: warm-started from the plain fit.
    if plain is not None and budget - plain.count >= unit:
        rest = fill(budget - plain.count)
        splits.append(_with_fill(plain.base, plain.n_factors, plain.n_offsets, n, "sf+rest", rest))
    # Reference offsets with fewer factors (support need not be full: the correction covers).
    k = len(chord_offsets(n))
    top = min(default_n_factors(n), (budget - unit) // (n * k)) if budget >= unit else 0
    same = plain is not None and plain.base == 2 and plain.n_offsets == k and budget - plain.count >= unit
    depths = [m for m in range(top, 0, -1) if not (same and m == plain.n_factors)]
    for m in _thin(depths, max_splits):
        splits.append(_with_fill(2, m, k, n, "split", fill(budget - n * k * m)))
    return splits


def _with_fill(base: int, m: int, k: int, n: int, role: str, correction: tuple[int, int, int]) -> HybridSplit:
    rank, n_sparse, count = correction
    return HybridSplit(role, base, m, k, rank, n_sparse, n_stored(n, m, k) + count)


def sf_lr_splits(n: int, budget: int, plain: SFConfig | None, *, max_splits: int = 3) -> list[HybridSplit]:
    """The budget splits sf+lr tries: plain SF, TSVD, and Chord factors plus the largest rank left.

    Rule, in the order returned:

    1. ``"sf"``: the plain SF structure ``plain`` (what the ``sf`` method fits
       at this budget, :func:`~sfapprox.budget.sf_config_for_budget`), rank 0 — omitted when
       ``plain`` is None (no full-support structure fits);
    2. ``"lr"``: no factors, the largest TSVD rank
       (:func:`~sfapprox.budget.tsvd_rank_for_budget`) — omitted when it is 0;
    3. ``"sf+rest"``: ``plain`` plus the largest rank its count leaves, when
       that is at least 1;
    4. ``"split"``: the reference offsets (base 2) with ``M' = M_top, ..., 1``
       factors, ``M_top = min(ceil(log2 N), floor((B - (2N + 1)) / (N K)))``,
       each with the largest rank that fits the rest; at most ``max_splits``
       depths, evenly spread from ``M_top`` down to 1.

    Every count is ``<= budget``.

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    budget : int
        Stored numbers allowed, ``B``.
    plain : SFConfig or None
        The plain SF structure at this budget; None when none fits.
    max_splits : int, default=3
        Most ``"split"`` depths.

    Returns
    -------
    list of HybridSplit

    Examples
    --------
    >>> from sfapprox.budget import sf_config_for_budget
    >>> plain = sf_config_for_budget(16, 320)
    >>> [(s.role, s.n_factors, s.rank, s.count) for s in sf_lr_splits(16, 320, plain)]
    [('sf', 4, 0, 320), ('lr', 0, 9, 297), ('split', 3, 2, 306), ('split', 2, 4, 292), ('split', 1, 7, 311)]
    """
    unit = tsvd_count(n, 1)

    def fill(left: int) -> tuple[int, int, int]:
        rank = tsvd_rank_for_budget(n, left)
        return rank, 0, tsvd_count(n, rank)

    rank = tsvd_rank_for_budget(n, budget)
    end = HybridSplit("lr", 0, 0, 0, rank, 0, tsvd_count(n, rank)) if rank >= 1 else None
    return _hybrid_splits(n, budget, plain, unit=unit, fill=fill, other_end=end, max_splits=max_splits)


def sf_s_splits(
    n: int, budget: int, plain: SFConfig | None, *, count_indices: bool = False, max_splits: int = 3
) -> list[HybridSplit]:
    """The budget splits sf+s tries: plain SF, the largest entries alone, and factors plus entries.

    Same rule as :func:`sf_lr_splits` with ``s`` sparse entries (each costing
    1 number, 2 with ``count_indices``) in place of the rank: ``"sparse"`` is
    the ``min(N^2, B / c)`` largest entries alone, and each split takes as
    many entries as the rest of the budget pays for (at most ``N^2``).

    Parameters
    ----------
    n : int
        Order ``N`` of the matrix.
    budget : int
        Stored numbers allowed, ``B``.
    plain : SFConfig or None
        The plain SF structure at this budget; None when none fits.
    count_indices : bool, default=False
        Charge each sparse entry 2 numbers (value and position) instead of 1.
    max_splits : int, default=3
        Most ``"split"`` depths.

    Returns
    -------
    list of HybridSplit

    Examples
    --------
    >>> from sfapprox.budget import sf_config_for_budget
    >>> plain = sf_config_for_budget(16, 320)
    >>> [(s.role, s.n_factors, s.n_sparse) for s in sf_s_splits(16, 320, plain, count_indices=True)]
    [('sf', 4, 0), ('sparse', 0, 160), ('split', 3, 40), ('split', 2, 80), ('split', 1, 120)]
    """
    per_entry = 2 if count_indices else 1

    def fill(left: int) -> tuple[int, int, int]:
        s = min(n * n, left // per_entry)
        return 0, s, rpca_count(n, 0, s, count_indices=count_indices)

    _, s_max, count = fill(budget)
    end = HybridSplit("sparse", 0, 0, 0, 0, s_max, count) if s_max >= 1 else None
    return _hybrid_splits(n, budget, plain, unit=per_entry, fill=fill, other_end=end, max_splits=max_splits)
