"""sf+lr: Chord sparse factors plus a rank-r correction, fitted jointly at one budget."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .._base import MethodSpec, register
from ..baselines.tsvd import TruncatedSVD
from ..budget import SFConfig, below_smallest, sf_min_budget, tsvd_count
from ..operators import HybridOperator
from .base import _ChordHybrid, _orthonormal, _Point, _Problem, _score, hybrid_estimator
from .grid import HybridSplit, sf_lr_splits
from .objectives import _cat, _lr_objective

__all__ = ["ChordLowRank"]


class ChordLowRank(_ChordHybrid):
    """sf+lr: Chord sparse factors plus a rank-``r`` correction, at one budget of stored numbers.

    ``X ≈ W1 ... WM + U diag(s) V^T``, fitted jointly; the split of the budget
    between the factors and the rank is chosen on the grid of
    :func:`sfapprox.hybrid.grid.sf_lr_splits`, whose ends are the ``sf`` method's
    fit and TSVD at the same budget, so the result is never worse than the
    better of the two.  Stored: ``N K M + r (2N + 1)``.

    Parameters
    ----------
    budget : int or None, default=None
        Stored-number budget; None is SF's reference count ``N K ceil(log2 N)``.
    max_splits : int, default=3
        Most ``"split"`` points (fewer factors, larger rank) tried besides the
        two ends and ``"sf+rest"``; 0 tries only those.
    sf_params : dict or None, default=None
        Extra :class:`~sfapprox.sf.model.ChordSF` parameters (``max_iter``,
        ``time_limit``, ``init``, ``ftol``, ...): the plain SF point gets them
        as the ``sf`` method does, and every joint fit stops by the same
        rules (``max_iter`` applies to each grid point).  ``time_limit``
        bounds the whole fit: the plain SF point gets ``PLAIN_SHARE`` of it
        and the joint fits share the rest equally, less ``CONTINUE_SHARE``
        of it, in which the best point goes on from its fit where it stopped
        on its time limit (none beside a comparison's ``sf`` row, whose fit
        is the plain point; with ``time_limit=None``
        the plain point is exactly the ``sf`` method's fit).  A joint point
        whose least work (:func:`~sfapprox.hybrid.base.split_starts`, at the
        measured cost of its steps) the time left cannot pay for is skipped,
        and its grid record says so.
    random_state : int, default=0
        Seed of the factors' starts and of the randomized SVDs.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the joint fits run; ``"auto"``: a CUDA GPU when available.
    dtype : {"float64", "float32"} or None, default=None
        None: float64 on the CPU, float32 on a GPU.
    callback : callable or None
        Progress callback, as ChordSF's (called by every iterative fit);
        ``iteration`` counts over the whole fit (every grid point's, one after
        another), ``max_iter`` is the most it may take (lowered as the grid's
        points end, never raised) and ``elapsed`` runs from its start.

    Attributes
    ----------
    operator_ : HybridOperator
        The surrogate (Chord part, ``U``, ``s``, ``Vt``).
    factors_ : ndarray of shape (M, N, K)
        The Chord part (``M = 0`` when TSVD alone won).
    offsets_ : ndarray of shape (K,)
    low_rank_ : tuple of ndarray
        ``(U, s, Vt)``, ``U`` and ``V`` with orthonormal columns.
    rank_ : int
    n_stored_ : int
        ``sf_lr_count(N, M, K, r)``, never above the budget.
    fro_error_, rel_error_ : float
    seconds_ : float
        Compute time of the whole grid (each point's own time; a reused plain
        SF fit counts its original time).
    wall_seconds_ : float
        Wall time of this ``fit`` call.
    n_iter_ : int
        L-BFGS iterations of the whole grid.
    stop_reason_ : str
        The chosen point's (``"exact"`` for TSVD; ``"interrupted"`` after a
        Ctrl-C; ``"time_limit"`` when grid points were skipped for time).
    grid_ : list of dict
        Every point tried: split, counts, error, seconds, iterations, start.
    params_ : dict
        The chosen split (``split``, ``n_factors``, ``base``, ``rank``,
        ``sf_count``, ``lr_count``, ``count``, ...) and the ``grid``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((16, 16))
    >>> h = ChordLowRank(budget=200, sf_params={"max_iter": 50}, device="cpu").fit(X)
    >>> h.n_stored_ <= 200, [p["split"] for p in h.params_["grid"]]
    (True, ['lr', 'split', 'split'])
    """

    _method = "sf+lr"
    #: The comparison rows whose fits are its grid's ends (its MethodSpec's ``reuses``).
    REUSES = ("sf", "tsvd")
    _start_label = "tsvd(X - P)"

    def _grid(self, n: int, budget: int, plain: SFConfig | None) -> list[HybridSplit]:
        return sf_lr_splits(n, budget, plain, max_splits=self.max_splits)

    @staticmethod
    def _too_small(n: int, budget: int) -> str:
        # the cheaper of its two ends, as its row's smallest budget (its MethodSpec's min_budget) says
        factors, rank = sf_min_budget(n), tsvd_count(n, 1)
        if factors is not None and factors < rank:
            return below_smallest(budget, n, "a full-support Chord factorization", factors)
        return below_smallest(budget, n, "one rank", rank)

    def _fit_end(self, X, dense: np.ndarray, budget: int, split: HybridSplit, deadline=None) -> _Point:
        """TSVD at the budget, exactly as the ``tsvd`` method fits it (its fit, when a comparison ran it),
        within the time ``deadline`` leaves (its randomized SVD ran all its power iterations whatever the
        limit: sf+lr at N = 8,192 took 26 s of a 10 s limit)."""
        begin = time.perf_counter()
        t = self._reusing.get("tsvd")
        if t is None or t.n_stored_ > budget:
            limit = None if deadline is None else deadline.limit()
            t = TruncatedSVD(budget=budget, random_state=self.random_state, time_limit=limit).fit(X, check_input=False)
        return _score(dense, split, HybridOperator(dense.shape[0], low_rank=(t.U_, t.s_, t.Vt_)), begin)

    def _end_stage(self, split: HybridSplit, budget: int) -> str:
        """What the progress display says while the low-rank end runs (or, a comparison's tsvd fit reused
        as :meth:`_fit_end` reuses it, is scored)."""
        reused = self._reusing.get("tsvd")
        if reused is not None and reused.n_stored_ <= budget:
            return f"low-rank end: scoring tsvd's fit (rank {reused.rank_})"
        return f"low-rank end: TSVD, rank {split.rank}"

    def _begin(self, pb: _Problem, split: HybridSplit, x_w, shape, offsets):
        """``U, V`` from the TSVD of ``X - P(W)`` (balanced: each takes ``sqrt(s)``)."""
        residual = pb.residual(x_w, shape, offsets).double().cpu().numpy()
        t = TruncatedSVD(n_components=split.rank, random_state=self.random_state).fit(residual, check_input=False)
        # the split's rank is optimized: the directions of a residual of lower rank start at zero (what its
        # zero singular values gave before TSVD kept only the rank that carries something)
        pad = np.zeros((pb.n, split.rank - t.rank_))
        root = np.sqrt(t.s_)
        return split.rank, _cat(x_w, pb.tensor(np.hstack([t.U_ * root, pad])), pb.tensor(np.hstack([t.Vt_.T * root, pad])))

    def _objective(self, pb: _Problem, rank: int, shape, offsets):
        return _lr_objective(pb.kernel, offsets, pb.target, shape, rank)

    def _operator(self, pb: _Problem, rank: int, x, shape, offsets) -> HybridOperator:
        import torch

        tail = x[math.prod(shape) :].to(torch.float64).cpu().numpy()
        U = tail[: pb.n * rank].reshape(pb.n, rank) * pb.scale
        V = tail[pb.n * rank :].reshape(pb.n, rank)
        return HybridOperator(pb.n, chord=pb.chord(x, shape, offsets), low_rank=_orthonormal(U, V))

    def _record(self, p: _Point) -> dict[str, Any]:
        rank = p.operator.rank
        return {**self._common_record(p), "rank": rank, "lr_count": tsvd_count(p.operator.shape[0], rank)}

    def _set_result(self, n, budget, points, seconds, stopped=False) -> None:
        super()._set_result(n, budget, points, seconds, stopped)
        self.low_rank_ = (self.operator_.U, self.operator_.s, self.operator_.Vt)
        self.rank_ = self.operator_.rank


# =============================================================================== registration
register(
    MethodSpec(
        name="sf+lr",
        operators=("hybrid",),
        summary="Chord factors + low rank, budget split chosen on a grid (ends: sf, tsvd)",
        stores="N·K·M′ + r·(2N + 1)",
        make=lambda n, budget, context: hybrid_estimator(ChordLowRank, budget, context),
        min_budget=lambda n, context: min(b for b in (sf_min_budget(n), tsvd_count(n, 1)) if b is not None),
        order=50,
        label="SF + low rank",
        reuses=ChordLowRank.REUSES,
    )
)
