"""Seed streams: which draws of a run take which numpy stream of its ``seed``, so that the scoring's are its own.

``np.random.default_rng([seed, k])`` is stream ``k`` of ``seed``; stream 0 is ``default_rng(seed)``
itself (numpy's ``SeedSequence`` pads its entropy with zeros: ``[seed, 0]`` and ``seed`` give the same
numbers).  A fit's own draws take stream 0 (:data:`FIT`: the randomized SVD's test matrix and its cut
pass's column order, Nyström's pivots, NMF's start, ...), or the stream named here for their use.

**Why the scoring has a stream of its own.**  A matrix known by its columns is scored on a random
sample of them (:func:`~sfapprox.estimate_errors`).  A fit whose one pass over the columns is cut by its
time limit has read some of them, where its error is lowest; when it read them in the order the scoring
samples them (both ``default_rng(seed).permutation(N)``), the scoring sampled only the columns read and
gave an error too low with a confident interval (sparse at N = 12,000: 0.9695 +- 0.0024 where the exact
error is 0.9910; rsvd's cut pass at N = 600, ``tests/test_estimate.py``: 0.9130 +- 0.0024 where it is
0.9616).  :data:`SCORING` is a number no fit's draws take, so the scoring's sample is independent of
every fit's draws, whatever stream a fit takes.

Numbers shared below are older fits' own, kept so that their results stay, and none is the scoring's:
SF's start kinds take streams 0 and 1 by their index (:data:`FIT`'s and :data:`SF_BATCHES`'),
:data:`CO_RANGE` is :data:`SF_BATCHES`' (another method's), and :data:`SF_SKETCH` is :data:`SF_PILOT`'s
(the sketch's seed is ``seed * 7919 + round``: the two meet at seed 0's first round).
"""

from __future__ import annotations

__all__ = ["FIT", "SF_BATCHES", "CO_RANGE", "SF_PILOT", "SF_SKETCH", "SPARSE_ORDER", "SCORING", "fit_streams"]

#: A fit's own draws: ``default_rng(seed)``.  Also SF's first start kind (:mod:`~sfapprox.sf._multistart`
#: takes stream ``i`` for its ``i``-th kind of start) and the randomized SVD's cut pass's column order.
FIT = 0
#: SF from columns: the order of its column batches (:func:`~sfapprox.sf._columns.fit_columns`); also
#: SF's second start kind.
SF_BATCHES = 1
#: The randomized SVD's co-range test matrix ``psi`` (:func:`~sfapprox.baselines.rsvd.sketch_pass`).
CO_RANGE = 1
#: SF's pilot columns (its scale; :func:`~sfapprox.sf.model._pilot`).
SF_PILOT = 2
#: SF's Gaussian sketch (:func:`~sfapprox.sf._sketch.sketch_target`, its seed mixed with its round).
SF_SKETCH = 2
#: sparse's cut pass's column order (:func:`~sfapprox.baselines.sparse.timed_top`).
SPARSE_ORDER = 3
#: The scoring's sample of columns (:func:`~sfapprox.estimate.scoring_order`): far above the small
#: numbers of streams taken by index (SF's start kinds), and no fit's.
SCORING = 1000


def fit_streams() -> dict[str, int]:
    """Every stream named here that a fit takes, by name (all but :data:`SCORING`).

    Examples
    --------
    >>> SCORING in fit_streams().values()
    False
    """
    return {name: value for name, value in globals().items()
            if name.isupper() and isinstance(value, int) and name != "SCORING"}
