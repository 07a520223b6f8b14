"""One fitted RPCA split and what of it carries something: shared by the in-memory grid (:mod:`.rpca`) and the
grid from columns (:mod:`._rpca_columns`), neither of which imports the other for it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..budget import rpca_count
from .tsvd import reproduces, round_off


# --------------------------------------------------------------------------- what carries nothing
def carrying_entries(vals: np.ndarray, error: float, n: int, norm: float) -> tuple[np.ndarray, float]:
    """Which sparse values carry something (a mask), and the error of what they leave: ``X``'s residual
    ``error`` with the ``S`` of all of ``vals``, ``||X||_F = norm``.

    ``S`` holds the residual ``X - L`` at its positions, so leaving entries out adds their squares to
    the error's: ``sqrt(error^2 + ||left out||^2)``, at most ``error + ||left out||``.  The smallest
    ``|v|`` are left out (exact zeros always) as long as the norm of all that is left out stays within
    round-off, ``N eps ||X||_F`` (:func:`round_off`).  An exactly low-rank ``X`` left ``S`` nothing but
    its residual's round-off to select (a 5 x 5 ones matrix: rank 1 and 7 entries of 1e-16, 25 numbers,
    where rank 1 alone, 11, is as exact); the entries of an ordinary fit are many orders above it, and
    stay.
    """
    keep = vals != 0
    if vals.size and norm > 0:
        limit = round_off(n, norm)
        # only entries at most the limit can be left out: they alone are sorted (an ordinary fit's millions
        # of entries, every one above it, were sorted at each GoDec step)
        small = np.flatnonzero(np.abs(vals) <= limit)
        order = small[np.argsort(np.abs(vals[small]), kind="stable")]
        # (hypot: no square under- or overflows, whatever the scale of X)
        keep[order[np.hypot.accumulate(np.abs(vals[order])) <= limit]] = False
    if keep.all():
        return keep, error
    return keep, math.hypot(error, float(np.linalg.norm(vals[~keep])))


@dataclass
class _Candidate:
    """One fitted split, scored in float64: ``L = U diag(sig) Vt``, ``S`` at flat ``idx``."""

    error: float
    U: np.ndarray
    sig: np.ndarray
    Vt: np.ndarray
    idx: np.ndarray
    vals: np.ndarray
    n_iter: int = 0
    stop_reason: str = "exact"
    #: The ``(rank, n_sparse)`` split it fitted (None: not known, a start alone).
    split: tuple[int, int] | None = None

    def kept(self) -> tuple[int, int]:
        """The rank and sparse entries it stores (exact zeros are not stored)."""
        return int(np.count_nonzero(self.sig > 0)), int(np.count_nonzero(self.vals))

    def count(self, n: int, count_indices: bool) -> int:
        """The numbers it stores."""
        return rpca_count(n, *self.kept(), count_indices=count_indices)

    def record(self, split: tuple[int, int], n: int, count_indices: bool) -> dict:
        """The grid entry of ``params_`` for the split ``(rank, n_sparse)`` it fitted: its error and the
        numbers it stores (``count``); ``rank_kept`` and ``n_sparse_kept`` where it stores fewer than the
        split holds (singular values and entries that carry only round-off, exact zeros)."""
        rank, n_sparse = split
        kept = self.kept()
        return {
            "rank": int(rank),
            "n_sparse": int(n_sparse),
            "fro_error": self.error,
            "iterations": self.n_iter,
            "count": rpca_count(n, *kept, count_indices=count_indices),
            **({"rank_kept": kept[0], "n_sparse_kept": kept[1]} if kept != (rank, n_sparse) else {}),
        }


def settled_stop(error: float, norm: float, best_rank: bool = False) -> str:
    """The ``stop_reason`` of a split settled without GoDec (rank 0: ``X``'s largest entries; no sparse part: the
    start's ``L``): ``"exact"`` where it reproduces ``X`` (:func:`~.tsvd.reproduces`) or, with ``best_rank``, is
    LAPACK's best rank-r approximation (as TruncatedSVD says), else ``"closed_form"`` (README's stop for the
    largest entries and a randomized SVD).  A rank-0 split of a 2 x 2 matrix said ``exact`` at 0.24 of ``||X||``.

    Examples
    --------
    >>> settled_stop(0.0, 1.0), settled_stop(0.24, 1.0), settled_stop(0.24, 1.0, best_rank=True)
    ('exact', 'closed_form', 'exact')
    """
    return "exact" if best_rank or reproduces(error, norm) else "closed_form"


def skipped_record(split: tuple[int, int], why: str, **extra) -> dict:
    """The grid entry of ``params_`` for a split not fitted, and ``why`` (``"time_limit"``, ``"tol"``,
    ``"exact"``): no error, no iteration; ``extra`` (its ``start``) before the reason."""
    rank, n_sparse = split
    return {"rank": rank, "n_sparse": n_sparse, "fro_error": None, "iterations": 0, **extra, "skipped": why}


def split_stage(i: int, count: int, rank: int) -> str:
    """What a progress display says while the ``i``-th of ``count`` rank/sparse splits runs.

    Examples
    --------
    >>> split_stage(2, 5, 39)
    'split 2/5, rank 39'
    """
    return f"split {i}/{count}, rank {rank}"
