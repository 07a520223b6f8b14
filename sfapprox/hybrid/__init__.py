"""Hybrid surrogates at one budget: Chord factors plus a low-rank (sf+lr) or sparse (sf+s) correction.

``ChordLowRank`` fits ``X ≈ W1 ... WM + U V^T`` and ``ChordSparse`` fits
``X ≈ W1 ... WM + S`` (``s`` entries at free positions).  Each fit is joint:
one differentiable objective ``0.5 * ||X - P(W) - C||_F^2`` minimised by the
SF L-BFGS loop (:func:`sfapprox.sf._solver.lbfgs`) over the factor values and
the correction's numbers together.  The factor part goes through the SF
kernels (:func:`~sfapprox.sf._kernels.select_kernel`) with the target
``T = X - C``, so the kernel's residual ``G = P(W) - T`` is the joint one, and
the correction's gradient is read off the same residual: ``grad_U = G V``,
``grad_V = G^T U`` (thin products with the factors, no second ``N x N``
pass) and ``grad_S = G`` on the support.

How the budget ``B`` is split between factors and correction is chosen on a
small grid (:func:`sfapprox.hybrid.grid.sf_lr_splits`, :func:`~sfapprox.hybrid.grid.sf_s_splits`);
the split with the smallest Frobenius error wins.  The grid's ends are the
plain methods, computed exactly as :func:`sfapprox.compare` computes them:
``ChordSF`` with the structure of :func:`~sfapprox.budget.sf_config_for_budget`
and the ``sf`` method's settings and seed, and ``TruncatedSVD`` at ``B``
(sf+lr) or the ``B / c`` largest entries (sf+s).  So at an equal budget sf+lr
is never worse than the better of SF and TSVD, and sf+s never worse than the
better of SF and the largest entries.  Between the ends:

* ``"sf+rest"``: the plain SF structure plus what its count leaves, started
  from the plain fit and the TSVD (largest entries) of its residual;
* ``"split"``: the reference offsets with ``M' < M`` factors plus the rest.
  Two starts, ChordSF's own (:func:`sfapprox.sf._multistart.start_values`:
  every value ``1/K``, or each factor near ``I``, from the same seeds), each
  with the TSVD of ``X - P`` (the largest entries of ``X - P``), race as
  ChordSF's starts do (:func:`sfapprox.sf._multistart.race`) within
  ``PROBE_SHARE`` of the iterations and time; the better one continues.

sf+s re-chooses its support from the residual's largest entries at
``RESELECT_AT`` of the iterations (which never raises the loss: those entries
then hold the residual exactly).

The plain SF fit is deterministic for a given matrix and settings (without a
time limit), so the last few are memoised: ``compare(X, ["sf+lr", "sf+s"])``
fits it once.

Modules: :mod:`.objectives` (the joint objectives and their gradients),
:mod:`.grid` (the budget splits), :mod:`.base` (what both estimators share),
:mod:`.lowrank` (``ChordLowRank``, sf+lr) and :mod:`.sparse` (``ChordSparse``, sf+s).
"""

from .lowrank import ChordLowRank
from .sparse import ChordSparse

__all__ = ["ChordLowRank", "ChordSparse"]
