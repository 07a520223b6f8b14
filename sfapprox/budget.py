"""Stored-number accounting: every method's count, and the inverse (what fits a budget), live here.

Every method reports how many numbers it stores, and every method asked to
fit a budget ``B`` takes the largest configuration whose count is ``<= B``.
The operators (:mod:`sfapprox.operators`) count what they hold with these
same formulas, and the method modules choose their configurations with them.

==============  ======================================  ==================================
method          stored numbers                          notes
==============  ======================================  ==================================
sf              ``N * K * M``                           positions implied by Chord
sf-butterfly    ``2 * N * M``                           ``M = log2 N``, N a power of two
tsvd, rsvd      ``r * (2N + 1)``                        U, V and the singular values
nmf             ``2 * N * r``                           W and H
rpca            ``r * (2N + 1) + s * c``                ``c = 2`` with ``count_indices``
sf+lr, sf+s     ``N K M + r (2N + 1) + s * c``          :func:`hybrid_count`
sparse          ``2 * s + N + 1``                       CSR: values, columns, row pointers
                                                        (0 for ``s = 0``)
monarch         ``r * N' * (b1 + b2)``                  ``N' = b1 * b2 >= N`` (padding)
monarch+lr      Monarch's + ``k * (2N + 1)``
butterfly-hier  ``2 * N' * log2 N'``                    ``N'`` the power of two ``>= N``
nystrom         ``r * (N + r)``                         the pivots' columns and the core
==============  ======================================  ==================================

``c``, the numbers a sparse entry at a free position is charged: the functions here default to
``count_indices=False`` (``c = 1``, values only: the SF paper's convention), while :func:`~sfapprox.compare`,
:func:`~sfapprox.sweep.sweep`, the CLI and the estimators (``RobustPCA``, ``ChordSparse``) charge the
position too by default (``count_indices=True``, ``c = 2``): a count made here without
``count_indices=True`` is below what a comparison charges the same surrogate.  Their results say which
rule their count used (``params_["count_indices"]``, a row's ``params["count_indices"]``, the
operator's ``count_indices``).

A method applies to a budget that holds its smallest configuration (one rank, one entry, ...):
below it, a nonzero matrix's fit would store nothing and be no approximation, so it is refused.
The zero matrix is the exception: a method that holds it exactly in 0 numbers (a rank-0 low-rank
fit, a CSR of no entries) does so within any budget, at every N (:func:`rank_within`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ._errors import BudgetError, NotApplicableError, ParameterError
from ._params import Interval
from .formats import count_text
from .chord import (
    SUPPORTS,
    butterfly_n_factors,
    check_butterfly_size,
    chord_offsets,
    default_n_factors,
    min_full_factors,
    n_stored,
    support_offsets,
)

__all__ = [
    "below_smallest",
    "one_sparse_entry",
    "check_within",
    "rank_within",
    "sf_count",
    "butterfly_count",
    "tsvd_count",
    "nmf_count",
    "rpca_count",
    "tsvd_rank_for_budget",
    "paper_tsvd_rank",
    "nmf_rank_for_budget",
    "parse_budget",
    "resolve_budget",
    "Budget",
    "SFConfig",
    "sf_structure",
    "sf_config_for_budget",
    "sf_min_budget",
    "rpca_sparse_for_budget",
    "rpca_rank_for_budget",
    "hybrid_count",
    "sf_lr_count",
    "sf_s_count",
    "sparse_count",
    "sparse_entries_for_budget",
    "monarch_count",
    "monarch_shapes",
    "monarch_rank_for_budget",
    "monarch_min_budget",
    "monarch_lr_min_budget",
    "padded_size",
    "butterfly_hier_count",
    "nystrom_count",
    "nystrom_rank_for_budget",
]


def sf_count(n: int, n_factors: int | None = None, n_offsets: int | None = None) -> int:
    """Stored numbers of SF: ``N * K * M`` (defaults: the reference protocol).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_factors : int, optional
        Number of factors ``M``; None: the reference ``ceil(log2 N)``.
    n_offsets : int, optional
        Values per row ``K``; None: the number of base-2 Chord offsets for ``N``.

    Returns
    -------
    int
        ``N * K * M``.
    """
    m = default_n_factors(n) if n_factors is None else n_factors
    k = len(chord_offsets(n)) if n_offsets is None else n_offsets
    return n_stored(n, m, k)


def butterfly_count(n: int, n_factors: int | None = None) -> int:
    """Stored numbers of SF with the butterfly support: ``2 * N * M`` (default ``M = log2 N``).

    Two values per row and factor (columns ``i`` and ``i XOR 2^m``); the
    positions are implied by the protocol.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_factors : int, optional
        Number of factors ``M``; None: ``log2 N`` (then ``N`` must be a power of
        two, else :class:`~sfapprox.ParameterError`).

    Examples
    --------
    >>> butterfly_count(16)
    128
    """
    m = butterfly_n_factors(n) if n_factors is None else n_factors
    return 2 * int(n) * int(m)


def below_smallest(budget: int, n: int, smallest: str, need: int) -> str:
    """Why a budget is refused for a method whose smallest fit stores more: the one sentence every
    method gives, so that a comparison's rows (and a sweep's notes, which merge a reason given at
    several budgets) read alike whatever the method.

    Parameters
    ----------
    budget : int
        The budget refused.
    n : int
        Order ``N`` of the square matrix.
    smallest : str
        The method's smallest fit, as the message names it ("one rank", "one sparse entry with its
        position").
    need : int
        Its stored numbers: the method's smallest budget (its row's ``min_budget``).

    Returns
    -------
    str

    Examples
    --------
    >>> below_smallest(3, 16, "one rank", 33)
    'budget 3 is below the smallest fit of a 16 x 16 matrix (one rank: 33 stored numbers)'
    """
    return (f"budget {budget:,} is below the smallest fit of a {n:,} x {n:,} matrix "
            f"({smallest}: {need:,} stored number{'' if need == 1 else 's'})")


def one_sparse_entry(count_indices: bool) -> str:
    """The smallest fit of a method whose smallest part is one entry at a free position (RPCA, sf+s), as
    :func:`below_smallest` names it: with its position where that is charged (``count_indices``).

    Parameters
    ----------
    count_indices : bool
        Whether the entry's position is charged (2 numbers) or its value alone (1).

    Returns
    -------
    str

    Examples
    --------
    >>> one_sparse_entry(True), one_sparse_entry(False)
    ('one sparse entry with its position', 'one sparse entry, its value alone (count_indices=False)')
    """
    return "one sparse entry with its position" if count_indices else \
        "one sparse entry, its value alone (count_indices=False)"


def check_within(count: int, budget: int | None, what: str, advice: str) -> None:
    """Refuse a size asked for explicitly that stores more than the budget also given (never exceeded
    silently).

    Parameters
    ----------
    count : int
        Stored numbers of the size asked for.
    budget : int or None
        The budget; None: nothing to check.
    what : str
        The size asked for, as the message names it ("rank 3").
    advice : str
        What to do instead.

    Raises
    ------
    BudgetError
        When ``count > budget``.

    Examples
    --------
    >>> check_within(147, 200, "rank 3", "lower the rank")
    >>> check_within(147, 10, "rank 3", "lower the rank")
    Traceback (most recent call last):
    ...
    sfapprox._errors.BudgetError: rank 3 stores 147 numbers, over the budget of 10; lower the rank
    """
    if budget is not None and count > budget:
        raise BudgetError(f"{what} stores {count:,} numbers, over the budget of {budget:,}; {advice}")


def rank_within(n: int, n_components: int | None, budget: int | None, rank_for_budget, count, method: str,
                what: str = "rank", zero: Callable[[], bool] | None = None) -> int:
    """The rank of a low-rank fit: ``n_components`` when given (at most ``N``, and within ``budget``
    when both are given: never over it silently), else the largest that fits ``budget``.

    A budget below one unit is refused (for a nonzero matrix the fit would store nothing and be no
    approximation: never a zero "fit"), except for the zero matrix (``zero()`` True): rank 0 holds it
    exactly in 0 numbers, within any budget.  It was refused at N <= 2 (SF's budget there is below one
    rank) while at N = 5 the same method stored 0 numbers.

    Parameters
    ----------
    n : int
        Order of the matrix.
    n_components : int or None
        The rank asked for.
    budget : int or None
        Stored numbers allowed (None: only ``n_components`` decides).
    rank_for_budget : callable
        ``(n, budget) -> rank``: the largest that fits.
    count : callable
        ``(n, rank) -> numbers`` stored.
    method : str
        The method, as messages name it ("TSVD").
    what : str, default="rank"
        What a unit of the rank is called ("rank", "Nyström pivot").
    zero : callable or None, default=None
        ``zero() -> bool``: whether the matrix is the zero matrix, asked only where the budget is below
        one unit (None: not known, as for a matrix known by its columns).

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        Neither given, or ``n_components`` above ``N``.
    BudgetError
        The budget is below one unit, or ``n_components`` stores more than it.

    Examples
    --------
    >>> rank_within(10, None, 100, tsvd_rank_for_budget, tsvd_count, "TSVD")
    4
    >>> rank_within(10, 12, None, tsvd_rank_for_budget, tsvd_count, "TSVD")
    Traceback (most recent call last):
    ...
    sfapprox._errors.ParameterError: TSVD: n_components=12 is more than the matrix's order N = 10; choose at most 10
    """
    if n_components is None and budget is None:
        raise ParameterError(f"{method} needs n_components (the rank) or a budget")
    if n_components is None:
        rank = rank_for_budget(n, budget)
        if rank == 0 and zero is not None and zero():
            return 0  # the zero matrix: held exactly by storing nothing, whatever the budget
        if rank == 0:
            raise BudgetError(f"{method}: {below_smallest(budget, n, f'one {what}', count(n, 1))}")
        return rank
    if n_components > n:
        raise ParameterError(f"{method}: n_components={n_components} is more than the matrix's order N = {n:,}; "
                             f"choose at most {n}")
    fits = rank_for_budget(n, budget or 0)
    check_within(count(n, n_components), budget, f"{what} {n_components}" if what == "rank" else
                 f"{n_components} {what}s", f"choose n_components of at most {fits}" if fits else
                 "raise the budget, or give none")
    return n_components


#: What a part of a count (a rank, a number of entries) may be: the estimators' constraint of one.
_COUNT_PART = Interval(int, 0)


def _whole(value, what: str) -> int:
    """``value`` as a count: a whole number ``>= 0`` (a rank of -1 gave a count of -33 without a word).

    Examples
    --------
    >>> _whole(3, "rank"), _whole(0, "rank")
    (3, 0)
    """
    if not _COUNT_PART.accepts(value):
        raise ParameterError(f"{what} must be a whole number >= 0, got {value!r}")
    return int(value)


def tsvd_count(n: int, rank: int) -> int:
    """Stored numbers of a rank-``r`` truncated SVD: ``r * (2N + 1)``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    rank : int
        Rank ``r``.
    """
    return _whole(rank, "rank") * (2 * int(n) + 1)


def nmf_count(n: int, rank: int) -> int:
    """Stored numbers of a rank-``r`` NMF: ``2 * N * r``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    rank : int
        Rank ``r`` (the inner dimension of ``W H``).
    """
    return 2 * int(n) * _whole(rank, "rank")


def rpca_count(n: int, rank: int, n_sparse: int, *, count_indices: bool = False) -> int:
    """Stored numbers of low rank + sparse: ``r * (2N + 1) + s`` (``2s`` with indices).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    rank : int
        Rank ``r`` of the low-rank part.
    n_sparse : int
        Number ``s`` of sparse entries.
    count_indices : bool, default=False
        Charge each sparse entry for its position too (2 numbers instead of 1).  The default False is
        the SF paper's convention (values only); :func:`~sfapprox.compare`, :func:`~sfapprox.sweep.sweep`,
        the CLI and the estimators charge positions by default (True): pass True for their count.
    """
    per_entry = 2 if count_indices else 1
    return tsvd_count(n, rank) + per_entry * int(n_sparse)


def tsvd_rank_for_budget(n: int, budget: int) -> int:
    """Largest rank whose TSVD fits the budget, capped at ``N`` (0 if none fits).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.
    """
    return max(0, min(int(n), int(budget) // (2 * int(n) + 1)))  # (a negative budget: none fits, not -1)


def paper_tsvd_rank(n: int) -> int:
    """The SF paper's TSVD rank ``ceil(M^2 / 2)`` with ``M = ceil(log2 N)`` (Table 1's protocol).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.

    Examples
    --------
    >>> paper_tsvd_rank(36)
    18
    """
    m = default_n_factors(n)
    return -(-m * m // 2)


def nmf_rank_for_budget(n: int, budget: int) -> int:
    """Largest rank whose NMF fits the budget, capped at ``N`` (0 if none fits).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.
    """
    return max(0, min(int(n), int(budget) // (2 * int(n))))


@dataclass(frozen=True)
class Budget:
    """A resolved budget of stored numbers.

    Attributes
    ----------
    value : int
        Maximum number of stored numbers any method may use.
    spec : str
        What the user asked for (``"sf"``, ``"0.05"``, ``"12000"``); a budget
        clamped to ``N^2`` says so: ``"1e30 (clamped to N^2 = 256)"``.
    requested : int or None
        The count asked for when it was above ``N^2`` and clamped (else None).
    dense : int or None
        ``N^2`` where ``"sf"`` came to more (SF's own count is never clamped): the note says so.
    """

    value: int
    spec: str
    requested: int | None = None
    dense: int | None = field(default=None, repr=False)

    @property
    def note(self) -> str | None:
        """A sentence for the user when the budget was clamped, or when ``1`` was read as the fraction
        1 of ``N^2`` where that is more than one stored number (None otherwise: at N = 1 both readings are the
        matrix's one entry, and a sweep's own budget 1 there said so though no budget was typed)."""
        if self.dense is not None:  # README promised no budget above N^2: this one is, and said nowhere
            return (f"budget sf (SF's own count, {self.value:,} stored numbers) is above the {self.dense:,} entries "
                    "of the matrix: SF's structure needs it, so it is not capped, and a method may store more "
                    "than X's entries (the verdict says where a dense copy costs no more)")
        if self.requested is None:
            if _is_one(self.spec) and self.value > 1:
                return (f"budget {self.spec} is the fraction 1 of N²: all {self.value:,} entries (a count of "
                        "stored numbers is a whole number above 1)")
            return None
        return (f"budget {self.spec.split(' (')[0]} ({count_text(self.requested)} stored numbers) is above the "
                f"{self.value:,} entries of the matrix; using {self.value:,} (a dense copy costs no more)")


def _is_one(spec: str) -> bool:
    """Whether a budget's text is the number 1 (read as the fraction 1 of ``N^2``)."""
    try:
        return float(spec) == 1.0
    except ValueError:
        return False


def parse_budget(spec: str | int | float | None) -> str:
    """Normalise a budget specification to a string; validates its form only.

    Accepted: ``None`` or ``"sf"`` (SF's own count), a positive integer
    (stored numbers), or a fraction in ``(0, 1]`` of ``N**2``.

    Parameters
    ----------
    spec : str, int, float or None
        The budget as given (``"sf"``, ``12000``, ``"0.05"``, ...); the
        text is stripped and lower-cased.

    Returns
    -------
    str
        ``"sf"`` for None or ``"sf"``, else the normalised text (``"1"`` means
        the fraction 1, all of ``N**2``).

    Raises
    ------
    ParameterError
        For text that is not a number, a number that is not positive or not
        finite, a number above 1 that is not whole, or text above 1 written
        with a decimal point (``"2.0"``: a count of 2, or a mistyped fraction?).
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
            f"budget must be 'sf', a positive integer or a fraction of N² in (0, 1]; got {spec!r}"
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"budget must be a finite positive number ('sf', a count or a fraction of N² in "
                             f"(0, 1]), got {spec!r}")
    if value > 1 and value != int(value):
        raise ParameterError(
            f"budget {spec!r} is neither a fraction in (0, 1] nor a whole number of stored values"
        )
    if value > 1 and not isinstance(spec, str):
        return str(int(value))  # a float from code (600.0): the count, as text that parses back the same
    if value > 1 and "." in text and "e" not in text:
        # "2.0" typed would be a count of 2 stored numbers: more likely a fraction or a percentage mistyped.
        raise ParameterError(f"budget {spec!r} is above 1 with a decimal point: write a count of stored values "
                             f"as a whole number ({int(value)}), or a fraction of N² in (0, 1] (0.02 for 2%)")
    return text


def _least_fraction(n: int) -> float:
    """The smallest fraction of ``N**2``, to three digits, that is at least one stored number (1/9 shown
    as 0.111 would be 0.999 of a number): 1/N² rounded up."""
    exact = 1 / (int(n) * int(n))
    step = 10.0 ** (math.floor(math.log10(exact)) - 2)
    least = math.ceil(round(exact / step, 6)) * step
    return least if math.floor(least * n * n) >= 1 else least + step


def resolve_budget(spec: str | int | float | None, n: int) -> Budget:
    """Turn a budget specification into a number of stored values for an ``n x n`` matrix.

    A count above ``N^2`` is clamped to ``N^2``: the dense matrix itself
    stores that many numbers, so no compact surrogate has a use for more
    (and SF would otherwise grow its number of factors without bound).  The
    clamped budget keeps what was asked in ``requested`` and says so in its
    ``spec``.  ``"sf"`` is SF's own count, which for very small ``N`` can
    exceed ``N^2``; it is never clamped.

    Parameters
    ----------
    spec : str, int, float or None
        A budget specification, as :func:`parse_budget` accepts.
    n : int
        Order ``N`` of the square matrix.

    Returns
    -------
    Budget
        The count in ``value``, the specification in ``spec``.

    Raises
    ------
    ParameterError
        For a malformed specification (:func:`parse_budget`).
    BudgetError
        When the budget is less than one stored number for this ``N``.

    Examples
    --------
    >>> resolve_budget("sf", 36).value
    1512
    >>> resolve_budget(0.5, 10).value
    50
    >>> resolve_budget("100", 10).value
    100
    >>> resolve_budget(0.009, 3000).value
    81000
    >>> resolve_budget("1e30", 16)
    Budget(value=256, spec='1e30 (clamped to N^2 = 256)', requested=1000000000000000019884624838656)
    """
    text = parse_budget(spec)
    if text == "sf":
        count = sf_count(n)
        return Budget(count, text, dense=int(n) * int(n) if count > int(n) * int(n) else None)
    value = float(text)
    # "1" means the fraction 1.0 (all of N^2): a budget of one number is useless.
    if value <= 1:
        # the decimal as written, exactly: in floats 0.009 * 3000² is 80,999.99..., floored to 80,999
        count = math.floor(Fraction(text) * n * n)
    else:
        count = int(value)
    if count < 1:
        raise BudgetError(f"budget {spec!r} is less than one stored number for N={n:,}; give a fraction of N² of at "
                          f"least {_least_fraction(n):g}, a count above 1, or 'sf'")
    dense = int(n) * int(n)
    if count > dense:
        return Budget(dense, f"{text} (clamped to N^2 = {dense})", count)
    return Budget(count, text)


@dataclass(frozen=True)
class SFConfig:
    """An SF structure: base ``b``, ``M`` factors, ``K`` values per row, its count and its support.

    Attributes
    ----------
    base : int
        Chord base ``b`` (2 for the butterfly).
    n_factors : int
        Number of factors ``M``.
    n_offsets : int
        Values per row and factor ``K`` (2 for the butterfly).
    count : int
        Stored numbers, ``N * K * M``.
    support : str, default="chord"
        The support protocol: ``"chord"``, ``"symmetric"`` or ``"butterfly"``.
    """

    base: int
    n_factors: int
    n_offsets: int
    count: int
    support: str = "chord"


def sf_structure(n: int, *, support: str = "chord", base: int = 2, n_factors: int | None = None) -> SFConfig:
    """The structure :class:`~sfapprox.sf.model.ChordSF` fits for these parameters, and its count.

    Defaults as ChordSF's: the reference ``M = ceil(log2 N)`` for the Chord
    support with base 2, ``M = log2 N`` for the butterfly, otherwise the
    fewest factors whose product covers every entry.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol (:data:`~sfapprox.chord.SUPPORTS`).
    base : int, default=2
        Chord base ``b``; not used by the butterfly.
    n_factors : int, optional
        Number of factors ``M``; None: the default described above.

    Returns
    -------
    SFConfig

    Raises
    ------
    ParameterError
        For an unknown support, or the butterfly support when ``N`` is not a
        power of two.

    Examples
    --------
    >>> sf_structure(36)
    SFConfig(base=2, n_factors=6, n_offsets=7, count=1512, support='chord')
    >>> sf_structure(16, support="butterfly").count
    128
    """
    if support == "butterfly":
        m = butterfly_n_factors(n) if n_factors is None else int(n_factors)
        return SFConfig(2, m, 2, butterfly_count(n, m), support)
    offsets = support_offsets(n, support, base)
    k = len(offsets)
    if n_factors is None:
        reference = support == "chord" and base == 2
        n_factors = default_n_factors(n) if reference else (min_full_factors(n, offsets) or n)
    return SFConfig(int(base), int(n_factors), k, n_stored(n, int(n_factors), k), support)


def sf_config_for_budget(n: int, budget: int, *, max_base: int = 16, support: str = "chord") -> SFConfig:
    """The SF structure that fills ``budget`` as closely as possible without exceeding it.

    Rule (documented in the README), for the offset supports (``"chord"``,
    ``"symmetric"``): for each base ``b = 2 .. max_base`` (offsets
    ``{0} ∪ {b^k < N}``, and their negatives for ``"symmetric"``; ``K_b`` of
    them) take the fewest factors ``M_b`` whose product covers every entry,
    then as many factors as the budget allows, ``M = floor(B / (N K_b))``
    (more factors, more freedom); bases with ``M < M_b`` do not fit.  The
    structure with the largest count wins; ties go to the smaller base, then
    to fewer factors.  The reference structure (``b = 2``, ``M = ceil(log2 N)``)
    is chosen exactly when ``B`` equals its count.  The butterfly support has
    one structure (``M = log2 N``, ``2 N M`` numbers): it fits or it does not.
    At most ``max(N, M_b)`` factors are taken, whatever the budget, so a huge
    budget cannot ask for an endless structure (user budgets are clamped to
    ``N^2`` before they get here, :func:`resolve_budget`).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.
    max_base : int, default=16
        Largest base tried (offset supports only).
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol; an unknown one is a :class:`~sfapprox.ParameterError`.

    Returns
    -------
    SFConfig

    Raises
    ------
    BudgetError
        When no full-support structure fits in ``budget``.
    NotApplicableError
        For the butterfly support when ``N`` is not a power of two.

    Examples
    --------
    >>> sf_config_for_budget(36, 1512)
    SFConfig(base=2, n_factors=6, n_offsets=7, count=1512, support='chord')
    """
    if support not in SUPPORTS:
        raise ParameterError(f"unknown support {support!r}; choose one of {', '.join(SUPPORTS)}")
    if support == "butterfly":
        return _butterfly_for_budget(n, budget)
    best: SFConfig | None = None
    smallest: int | None = None
    for base, k, m_min in _full_structures(n, support, max_base):
        need = n * k * m_min
        smallest = need if smallest is None else min(smallest, need)
        m = min(int(budget) // (n * k), max(int(n), m_min))
        if m < m_min:
            continue
        cand = SFConfig(base, int(m), k, n * k * int(m), support)
        if best is None or cand.count > best.count:
            best = cand
    if best is None:
        kind = "Chord" if support == "chord" else f"{support} Chord"
        raise BudgetError(below_smallest(budget, n, f"a full-support {kind} factorization", smallest))
    return best


def _full_structures(n: int, support: str, max_base: int):
    """``(base, K, fewest factors with full support)`` for each base ``2 .. max_base`` that has one."""
    for base in range(2, max(2, min(max_base, n)) + 1):
        offsets = support_offsets(n, support, base)
        # Search only as far as any budget could reach (bounded: at most N factors).
        m_min = min_full_factors(n, offsets, limit=max(1, n))
        if m_min is not None:
            yield base, len(offsets), m_min


def sf_min_budget(n: int, *, support: str = "chord", max_base: int = 16) -> int | None:
    """The smallest budget at which SF with ``support`` applies to an ``n x n`` matrix.

    The smallest count of a full-support structure over the bases that
    :func:`sf_config_for_budget` considers; for the butterfly its one
    structure's count, or None when ``N`` is not a power of two.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    support : {"chord", "symmetric", "butterfly"}, default="chord"
        Support protocol.
    max_base : int, default=16
        Largest base considered (offset supports only).

    Returns
    -------
    int or None
        The smallest count; None when no structure applies.

    Examples
    --------
    >>> sf_min_budget(36), sf_min_budget(36, support="butterfly"), sf_min_budget(32, support="butterfly")
    (972, None, 320)
    """
    if support == "butterfly":
        try:
            check_butterfly_size(n)
        except ParameterError:
            return None
        return sf_structure(n, support="butterfly").count
    counts = [n * k * m for _, k, m in _full_structures(n, support, max_base)]
    return min(counts) if counts else None


def _butterfly_for_budget(n: int, budget: int) -> SFConfig:
    try:
        check_butterfly_size(n)
    except ParameterError as exc:  # in a comparison, a size the support cannot take is not a user error
        raise NotApplicableError(str(exc)) from None
    config = sf_structure(n, support="butterfly")
    if config.count > budget:
        raise BudgetError(below_smallest(budget, n, "the butterfly support's 2·N·log2 N", config.count))
    return config


def rpca_sparse_for_budget(n: int, budget: int, rank: int, *, count_indices: bool = False) -> int:
    """Most sparse entries that fit in ``budget`` next to a rank-``r`` part, capped at ``N^2``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.
    rank : int
        Rank ``r`` of the low-rank part (charged ``r (2N + 1)``).
    count_indices : bool, default=False
        Charge each sparse entry 2 numbers (value and position) instead of 1.  The default False is the
        SF paper's convention (values only); :func:`~sfapprox.compare`, :func:`~sfapprox.sweep.sweep`,
        the CLI and the estimators charge positions by default (True): pass True for their count.

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
    per_entry = 2 if count_indices else 1
    if left < 0:
        raise BudgetError(
            f"a rank-{rank} part of a {n:,} x {n:,} matrix stores {tsvd_count(n, rank):,} numbers, "
            f"over the budget of {int(budget):,}; {_rank_advice(n, int(budget), per_entry)}"
        )
    return min(int(n) * int(n), left // per_entry)


def _rank_advice(n: int, budget: int, per_entry: int) -> str:
    """What to choose where a rank is over ``budget``: a smaller rank where one fits, else what fits
    instead ("choose a rank of at most 0" named no rank to choose).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.
    per_entry : int
        Numbers stored per sparse entry (2 with its position).

    Returns
    -------
    str
    """
    fits = tsvd_rank_for_budget(n, budget)
    if fits:
        return f"choose a rank of at most {fits}"
    one_rank = tsvd_count(n, 1)
    entries = min(int(n) * int(n), max(0, budget) // per_entry)
    if entries:
        return (f"even rank 1 stores {one_rank:,} numbers: choose rank 0, the sparse part alone "
                f"({entries:,} entr{'y' if entries == 1 else 'ies'} fit)")
    return (f"even one sparse entry stores {per_entry} number{'s' if per_entry > 1 else ''}: "
            f"raise the budget (rank 1 needs {one_rank:,})")


def rpca_rank_for_budget(n: int, budget: int, n_sparse: int, *, count_indices: bool = False) -> int:
    """Largest rank that fits in ``budget`` next to ``n_sparse`` sparse entries, capped at ``N``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.
    n_sparse : int
        Number of sparse entries kept.
    count_indices : bool, default=False
        Charge each sparse entry 2 numbers (value and position) instead of 1.  The default False is the
        SF paper's convention (values only); :func:`~sfapprox.compare`, :func:`~sfapprox.sweep.sweep`,
        the CLI and the estimators charge positions by default (True): pass True for their count.

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
            f"{n_sparse:,} sparse entries store {rpca_count(n, 0, n_sparse, count_indices=count_indices):,} "
            f"numbers, over the budget of {int(budget):,}; choose fewer sparse entries"
        )
    return tsvd_rank_for_budget(n, left)


# --------------------------------------------------------------------------- hybrids
# sf+lr and sf+s store Chord factors plus a correction; their counts are the sums
# of the parts' counts, so the one formula per part above stays the only one.


def hybrid_count(
    n: int,
    n_factors: int,
    n_offsets: int,
    *,
    rank: int = 0,
    n_sparse: int = 0,
    count_indices: bool = False,
    singular_values: bool = True,
) -> int:
    """Stored numbers of Chord factors plus a rank-``r`` part plus ``s`` sparse entries.

    ``N K M + r (2N + 1) + s`` (``2s`` with ``count_indices``): each part is
    counted as its method alone is (SF, TSVD, the sparse part of RPCA).  A
    low-rank part without singular values (``U V^T``, NMF's ``W H``) stores
    ``2 N r`` instead of ``r (2N + 1)``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_factors : int
        Number of Chord factors ``M``.
    n_offsets : int
        Values per row and factor ``K``.
    rank : int, default=0
        Rank ``r`` of the low-rank part (0: none).
    n_sparse : int, default=0
        Number ``s`` of sparse entries (0: none).
    count_indices : bool, default=False
        Charge each sparse entry 2 numbers (value and position) instead of 1.  The default False is the
        SF paper's convention (values only); :func:`~sfapprox.compare`, :func:`~sfapprox.sweep.sweep`,
        the CLI and the estimators charge positions by default (True): pass True for their count.
    singular_values : bool, default=True
        Whether the low-rank part stores singular values (``r (2N + 1)``) or
        not (``2 N r``).

    Examples
    --------
    >>> hybrid_count(16, 3, 5, rank=2)
    306
    >>> hybrid_count(16, 3, 5, n_sparse=10, count_indices=True)
    260
    """
    low = tsvd_count(n, rank) if singular_values else nmf_count(n, rank)
    return n_stored(n, n_factors, n_offsets) + low + rpca_count(n, 0, n_sparse, count_indices=count_indices)


def sf_lr_count(n: int, n_factors: int, n_offsets: int, rank: int) -> int:
    """Stored numbers of sf+lr: ``N K M + r (2N + 1)`` (U, V and the singular values).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_factors : int
        Number of Chord factors ``M``.
    n_offsets : int
        Values per row and factor ``K``.
    rank : int
        Rank ``r`` of the low-rank correction.
    """
    return hybrid_count(n, n_factors, n_offsets, rank=rank)


def sf_s_count(n: int, n_factors: int, n_offsets: int, n_sparse: int, *, count_indices: bool = False) -> int:
    """Stored numbers of sf+s: ``N K M + s`` (``N K M + 2s`` with ``count_indices``).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_factors : int
        Number of Chord factors ``M``.
    n_offsets : int
        Values per row and factor ``K``.
    n_sparse : int
        Number ``s`` of sparse entries.
    count_indices : bool, default=False
        Charge each sparse entry 2 numbers (value and position) instead of 1.  The default False is the
        SF paper's convention (values only); :func:`~sfapprox.compare`, :func:`~sfapprox.sweep.sweep`,
        the CLI and the estimators charge positions by default (True): pass True for their count.
    """
    return hybrid_count(n, n_factors, n_offsets, n_sparse=n_sparse, count_indices=count_indices)


# =============================================================================== sparse storage
def sparse_count(n: int, n_sparse: int) -> int:
    """Stored numbers of ``s`` entries of an ``n x n`` matrix in CSR: ``2 s + N + 1``; none for no entries.

    The zero matrix's CSR is nothing but ``N + 1`` zero row pointers, implied by ``N`` as a rank-0
    TSVD's empty factors are: it stores 0 numbers (as a rank-0 fit does), and the sparse method holds
    the zero matrix within any budget.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    n_sparse : int
        Number ``s`` of stored entries.

    Examples
    --------
    >>> sparse_count(10, 4), sparse_count(10, 0)
    (19, 0)
    """
    s = _whole(n_sparse, "n_sparse")
    return 2 * s + int(n) + 1 if s else 0


def sparse_entries_for_budget(n: int, budget: int) -> int:
    """Most entries whose CSR storage fits ``budget``, capped at ``N^2`` (0 if none fits).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.

    Examples
    --------
    >>> sparse_entries_for_budget(10, 19), sparse_entries_for_budget(10, 12)
    (4, 0)
    """
    return max(0, min(int(n) * int(n), (int(budget) - int(n) - 1) // 2))


# =============================================================================== Monarch
def monarch_count(n: int, left_block: int, right_block: int, rank: int = 1) -> int:
    """Stored numbers of a block-rank-``r`` Monarch matrix: ``r · N' · (b1 + b2)``, ``N' = b1 · b2``.

    Parameters
    ----------
    n : int
        Order of the matrix; ``b1 · b2`` must be at least ``n`` (padding).
    left_block, right_block : int
        ``b1`` (size of ``L``'s blocks) and ``b2`` (size of ``R``'s blocks).
    rank : int, default=1
        Block rank ``r``.

    Raises
    ------
    ParameterError
        When a block size is below 1 or ``b1 · b2 < n``.

    Examples
    --------
    >>> monarch_count(64, 8, 8)  # the paper's 2 N sqrt(N)
    1024
    >>> monarch_count(36, 4, 9, rank=2)
    936
    """
    b1, b2 = int(left_block), int(right_block)
    if b1 < 1 or b2 < 1 or b1 * b2 < n:
        raise ParameterError(f"Monarch blocks {b1} x {b2} do not cover N = {n:,} (need b1·b2 >= N)")
    return int(rank) * b1 * b2 * (b1 + b2)


def monarch_shapes(n: int, first: int | None = None) -> list[tuple[int, int]]:
    """Every shape ``(b1, b2)`` with the least padding for its ``b1`` or for its ``b2``.

    ``(b1, ceil(N / b1))`` and ``(ceil(N / b2), b2)`` for ``b1, b2 = 1 .. N``,
    sorted most nearly square first (``|log(b1 / b2)|``), then by padding
    ``b1 b2 - N``, then by ``b1``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    first : int, optional
        Only the first this many shapes (all by default), without building the 2 N others' tuples.

    Returns
    -------
    list of (int, int)
        The shapes ``(b1, b2)``, each with ``b1 * b2 >= N``.

    Examples
    --------
    >>> monarch_shapes(16)[:3] == monarch_shapes(16, first=3) == [(4, 4), (4, 5), (5, 4)]
    True
    """
    if first is not None:
        b1, b2 = _shape_arrays(n)
        return list(zip(b1[:first].tolist(), b2[:first].tolist()))
    return list(_monarch_shapes(n))


@functools.lru_cache(maxsize=64)
def _monarch_shapes(n: int) -> tuple[tuple[int, int], ...]:
    """:func:`monarch_shapes`, remembered (a comparison asks it four times for one ``N``: its smallest
    budget, its memory, its candidates)."""
    b1, b2 = _shape_arrays(n)
    return tuple(zip(b1.tolist(), b2.tolist()))


@functools.lru_cache(maxsize=8)
def _shape_arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`monarch_shapes` as two int64 arrays ``b1, b2``, ordered by NumPy: 2 N shapes keyed in
    Python took 20 s of ``info``'s 53 s for a graph of N = 1,000,000 (0.4 s now)."""
    sizes = np.arange(1, max(1, n) + 1, dtype=np.int64)
    other = -(-n // sizes)
    # each shape once: (b, ceil(N / b)) and its transpose, coded as one integer b1 (N + 1) + b2
    codes = np.sort(np.concatenate([sizes * (n + 1) + other, other * (n + 1) + sizes]))
    codes = codes[np.concatenate([[True], codes[1:] != codes[:-1]])]  # np.unique: 6 s here at N = 10⁶
    b1, b2 = codes // (n + 1), codes % (n + 1)
    # a shape and its transpose get one key (b1 / b2 and b2 / b1 took different roundings of the log)
    skew = np.round(np.log(np.maximum(b1, b2) / np.minimum(b1, b2)), 12)
    order = np.lexsort((b1, b1 * b2 - n, skew))  # the last key sorts first
    return b1[order], b2[order]


def monarch_rank_for_budget(n: int, left_block: int, right_block: int, budget: int) -> int:
    """Largest block rank of shape ``(b1, b2)`` that fits ``budget``, at most ``min(b1, b2)`` (0: none).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    left_block, right_block : int
        ``b1`` and ``b2``; ``b1 * b2`` must be at least ``N``
        (:class:`~sfapprox.ParameterError` otherwise).
    budget : int
        Stored numbers allowed.

    Examples
    --------
    >>> monarch_rank_for_budget(64, 8, 8, 2100), monarch_rank_for_budget(64, 8, 8, 1000)
    (2, 0)
    """
    unit = monarch_count(n, left_block, right_block, 1)
    return max(0, min(min(left_block, right_block), int(budget) // unit))


def monarch_min_budget(n: int) -> int:
    """The smallest Monarch (rank 1, the cheapest shape) for an ``n x n`` matrix.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.

    Returns
    -------
    int
        The smallest rank-1 count over :func:`monarch_shapes`.

    Examples
    --------
    >>> monarch_min_budget(64), monarch_min_budget(36)
    (1024, 432)
    """
    b1, b2 = _shape_arrays(n)  # every shape's count at once: a Python loop over 2 N shapes took 8 s at N = 10⁶
    return int((b1 * b2 * (b1 + b2)).min())


def monarch_lr_min_budget(n: int) -> int:
    """The smallest ``monarch+lr`` fit: the cheaper of a rank-1 Monarch and a rank-1 matrix.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.

    Examples
    --------
    >>> monarch_lr_min_budget(64)  # rank one: 2 N + 1
    129
    """
    return min(monarch_min_budget(n), tsvd_count(n, 1))


# =============================================================================== hierarchical butterfly
def padded_size(n: int) -> int:
    """The power of two the butterfly works at: the smallest ``2^L >= max(N, 2)``.

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.

    Examples
    --------
    >>> padded_size(16), padded_size(17), padded_size(1)
    (16, 32, 2)
    """
    return 1 << max(1, (int(n) - 1).bit_length())


def butterfly_hier_count(n: int) -> int:
    """Stored numbers: ``2 N' log2 N'`` with ``N' = padded_size(N)`` (``2 N log2 N`` for a power of two).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.

    Examples
    --------
    >>> butterfly_hier_count(16), butterfly_hier_count(36)
    (128, 768)
    """
    big = padded_size(n)
    return 2 * big * (big.bit_length() - 1)


# =============================================================================== Nyström
def nystrom_count(n: int, rank: int) -> int:
    """Stored numbers of a rank-``r`` Nyström surrogate: ``r (N + r)`` (the pivots' columns and the core).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    rank : int
        Number ``r`` of pivot columns.

    Examples
    --------
    >>> nystrom_count(100, 5)
    525
    """
    rank = _whole(rank, "rank")
    return rank * (int(n) + rank)


def nystrom_rank_for_budget(n: int, budget: int) -> int:
    """Largest ``r`` with ``r (N + r) <= budget``, at most ``N`` (0: none fits).

    Parameters
    ----------
    n : int
        Order ``N`` of the square matrix.
    budget : int
        Stored numbers allowed.

    Examples
    --------
    >>> nystrom_rank_for_budget(100, 525), nystrom_rank_for_budget(100, 524)
    (5, 4)
    """
    n, budget = int(n), int(budget)
    r = int((-n + math.sqrt(n * n + 4.0 * max(budget, 0))) / 2)
    while r > 0 and nystrom_count(n, r) > budget:
        r -= 1
    while r < n and nystrom_count(n, r + 1) <= budget:
        r += 1
    return min(r, n)

