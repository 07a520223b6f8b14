"""Which singular values (and entries) of a surrogate carry something above round-off.

Shared by the low-rank methods (:mod:`.tsvd`, which has named them since before, :mod:`.rsvd` and those
that import them from :mod:`.tsvd`): here, so that :mod:`.tsvd` can fit by :mod:`.rsvd`'s randomized SVD
without the two importing each other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["round_off", "carrying_rank", "numerical_rank"]


def round_off(n: int, scale: float) -> float:
    """``N eps scale``: numpy's ``matrix_rank`` tolerance of an ``n x n`` matrix of that scale (its largest
    singular value, or ``||X||_F``), the round-off below which a part of a surrogate carries nothing (TSVD's
    singular values, RPCA's, RPCA's sparse entries, NMF's components)."""
    return n * np.finfo(np.float64).eps * scale


def carrying_rank(s: np.ndarray, n: int) -> np.ndarray:
    """Which singular values ``s`` of an ``n x n`` matrix carry something (a mask): those above
    ``round_off(n, max(s))``.  The others add nothing but round-off to the surrogate, yet each would be
    charged ``2N + 1`` numbers: a zero matrix kept rank 9 of zeros, 297 numbers at N = 16, where rank 0
    (no number) reproduces it as well."""
    if s.size == 0 or not s.max() > 0:
        return np.zeros(s.shape, dtype=bool)
    return s > round_off(n, s.max())


def numerical_rank(s: np.ndarray, n: int) -> int:
    """How many of the singular values ``s`` (largest first) carry something (:func:`carrying_rank`)."""
    return int(np.count_nonzero(carrying_rank(s, n)))
