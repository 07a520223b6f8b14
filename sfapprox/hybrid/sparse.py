"""sf+s: Chord sparse factors plus s entries at free positions, fitted jointly at one budget."""

from __future__ import annotations

import math
import time
from itertools import pairwise
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .._base import MethodSpec, register
from .._settings import COUNT_INDICES, DEFAULT_SEED
from ..budget import SFConfig, below_smallest, one_sparse_entry, rpca_count
from ..baselines.sparse import STREAMED_MIN_N, dense_top_entries, selection_bytes
from ..operators import HybridOperator
from .base import (
    RESELECT_AT,
    _ChordHybrid,
    _largest,
    _Point,
    _Problem,
    _score,
    hybrid_estimator,
)
from .grid import HybridSplit, sf_s_splits
from .objectives import _cat, _sparse_objective

__all__ = ["ChordSparse"]


class ChordSparse(_ChordHybrid):
    """sf+s: Chord sparse factors plus ``s`` entries at free positions, at one budget.

    ``X ≈ W1 ... WM + S``: the positions of ``S`` are the largest entries of
    the factors' residual (re-chosen as the fit goes), and its values are
    fitted jointly with the factors.  The split of the budget is chosen on
    the grid of :func:`sfapprox.hybrid.grid.sf_s_splits`, whose ends are the ``sf``
    method's fit and the ``B / c`` largest entries of ``X``.  Stored:
    ``N K M + s`` (``N K M + 2s`` with ``count_indices``, as RPCA counts).

    Parameters
    ----------
    budget : int or None, default=None
        Stored-number budget; None is SF's reference count.
    count_indices : bool, default=True
        Charge each sparse entry for its position too (2 numbers), as :func:`~sfapprox.compare` does;
        False: values only, the SF paper's convention and the default of
        :func:`~sfapprox.budget.sf_s_count` (whose count is then lower).  ``params_["count_indices"]``
        says which rule ``n_stored_`` used.
    max_splits, sf_params, random_state, device, dtype, callback
        As :class:`ChordLowRank`'s.

    Attributes
    ----------
    operator_ : HybridOperator
    factors_, offsets_ : ndarray
    sparse_ : scipy.sparse.csr_array
        The sparse part (exact zeros are not stored).
    n_sparse_ : int
    index_storage_ : int
        Positions ``S`` needs (``n_sparse_``), reported whatever ``count_indices`` is.
    n_stored_, fro_error_, rel_error_, seconds_, n_iter_, stop_reason_, grid_
        As ChordLowRank's.
    params_ : dict
        ``split``, ``n_factors``, ``n_sparse``, ``sf_count``, ``sparse_count``,
        ``count_indices``, ``index_storage``, ``count`` and the ``grid``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(16) + np.eye(16, k=3)
    >>> h = ChordSparse(budget=64, count_indices=True, device="cpu").fit(X)
    >>> h.n_stored_, h.params_["index_storage"], h.rel_error_
    (58, 29, 0.0)
    """

    _method = "sf+s"
    #: The comparison rows whose fits are its grid's ends (its MethodSpec's ``reuses``).
    REUSES = ("sf",)
    _start_label = "largest(X - P)"
    _parameter_constraints = {**_ChordHybrid._parameter_constraints, "count_indices": bool}

    def __init__(
        self,
        *,
        budget: int | None = None,
        count_indices: bool = COUNT_INDICES,
        max_splits: int = 3,
        sf_params: dict[str, Any] | None = None,
        random_state: int = DEFAULT_SEED,
        device: str = "auto",
        dtype: str | None = None,
        callback: Callable[[dict], bool | None] | None = None,
    ):
        super().__init__(budget=budget, max_splits=max_splits, sf_params=sf_params, random_state=random_state,
                         device=device, dtype=dtype, callback=callback)
        self.count_indices = count_indices

    def _grid(self, n: int, budget: int, plain: SFConfig | None) -> list[HybridSplit]:
        return sf_s_splits(n, budget, plain, count_indices=self.count_indices, max_splits=self.max_splits)

    def _too_small(self, n: int, budget: int) -> str:
        ci = self.count_indices
        return below_smallest(budget, n, one_sparse_entry(ci), rpca_count(n, 0, 1, count_indices=ci))

    def _sparse(self, n: int, flat: np.ndarray, values: np.ndarray) -> sp.csr_array:
        keep = values != 0  # exact zeros add nothing: not stored, not counted
        rows, cols = np.divmod(np.asarray(flat, dtype=np.int64)[keep], n)
        return sp.csr_array((values[keep].astype(np.float64), (rows, cols)), shape=(n, n))

    def _fit_end(self, X, dense: np.ndarray, budget: int, split: HybridSplit, deadline=None) -> _Point:
        """The ``s`` largest entries of ``X``: the best ``s``-sparse approximation, exactly."""
        begin = time.perf_counter()
        n = dense.shape[0]
        if n > STREAMED_MIN_N:
            # one pass over row blocks, as sparse's selection: the same entries (ties aside) without
            # |X|, -|X| and argpartition's positions, three N x N arrays (N = 8,192: 2.6 GB peak, 25 s)
            flat, values = dense_top_entries(dense, split.n_sparse, selection_bytes(n))
        else:
            flat = _largest(dense, split.n_sparse)
            values = dense.ravel()[flat]
        op = HybridOperator(n, sparse=self._sparse(n, flat, values), count_indices=self.count_indices)
        return _score(dense, split, op, begin)

    @staticmethod
    def _end_stage(split: HybridSplit, budget: int) -> str:
        """What the progress display says while the sparse end selects its entries."""
        return f"sparse end: the {split.n_sparse:,} largest entries"

    def _begin(self, pb: _Problem, split: HybridSplit, x_w, shape, offsets):
        return self._on_largest(pb, x_w, shape, offsets, split.n_sparse)

    @staticmethod
    def _on_largest(pb: _Problem, x_w, shape, offsets, count: int):
        """Support: the ``count`` largest entries of ``X - P(W)``, holding the residual there."""
        import torch

        residual = pb.residual(x_w, shape, offsets).reshape(-1)
        flat = torch.topk(residual.abs(), count, sorted=False).indices.sort().values
        return flat, _cat(x_w, residual[flat])

    def _objective(self, pb: _Problem, flat, shape, offsets):
        return _sparse_objective(pb.kernel, offsets, pb.target, shape, flat)

    @staticmethod
    def _phases(used: float) -> list[float]:
        marks = [m for m in RESELECT_AT if m > used]
        edges = [used, *marks, 1.0]
        return [b - a for a, b in pairwise(edges)]

    def _refresh(self, pb: _Problem, flat, x, shape, offsets):
        # The new support holds the residual exactly, so the loss cannot rise.
        return self._on_largest(pb, x[: math.prod(shape)], shape, offsets, flat.numel())

    def _operator(self, pb: _Problem, flat, x, shape, offsets) -> HybridOperator:
        import torch

        values = x[math.prod(shape) :].to(torch.float64).cpu().numpy() * pb.scale
        return HybridOperator(pb.n, chord=pb.chord(x, shape, offsets),
                              sparse=self._sparse(pb.n, flat.cpu().numpy(), values),
                              count_indices=self.count_indices)

    def _record(self, p: _Point) -> dict[str, Any]:
        s = int(p.operator.sparse.nnz)
        return {**self._common_record(p), "n_sparse": s, "sparse_count": (2 if self.count_indices else 1) * s,
                "count_indices": self.count_indices, "index_storage": s}

    def _set_result(self, n, budget, points, seconds, stopped=False) -> None:
        super()._set_result(n, budget, points, seconds, stopped)
        self.sparse_ = self.operator_.sparse
        self.n_sparse_ = int(self.sparse_.nnz)
        self.index_storage_ = self.n_sparse_


# =============================================================================== registration
register(
    MethodSpec(
        name="sf+s",
        operators=("hybrid",),
        summary="Chord factors + sparse entries at free positions, budget split chosen on a grid",
        stores="N·K·M′ + s",
        make=lambda n, budget, context: hybrid_estimator(ChordSparse, budget, context,
                                                         count_indices=context.count_indices),
        min_budget=lambda n, context: rpca_count(n, 0, 1, count_indices=context.count_indices),
        order=51,
        label="SF + sparse",
        reuses=ChordSparse.REUSES,
    )
)
