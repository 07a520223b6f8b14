"""Every surrogate a fit returns, in one place: applied fast, exported, saved and loaded the same way.

A fitted method's ``operator_`` is one of these: a
:class:`scipy.sparse.linalg.LinearOperator` (so ``op @ x``, ``op.T @ x``,
``op @ B`` and scipy's solvers work) with ``n_stored``, ``to_dense()``, its
saved layout, ``to_torch()`` (a trainable module applying it in what it
stores) and, for the products of sparse factors (Chord, padded butterfly,
Monarch), ``to_sparse_factors()`` (:class:`SurrogateOperator` states the contract).

================================  ====================  ========================================================
class                             kind                  made by
================================  ====================  ========================================================
:class:`ChordOperator`            ``chord``             sf, sf-symmetric, sf-butterfly, butterfly-hier (N = 2^k)
:class:`HybridOperator`           ``hybrid``            sf+lr, sf+s, tsvd, rsvd, rpca, rpca-pcp, nmf
:class:`SparseOperator`           ``csr``               sparse
:class:`MonarchOperator`          ``monarch``           monarch
:class:`MonarchLowRankOperator`   ``monarch+lr``        monarch+lr
:class:`PaddedButterflyOperator`  ``butterfly-padded``  butterfly-hier (other N)
:class:`NystromOperator`          ``nystrom``           nystrom
================================  ====================  ========================================================

Fitting stays with the methods (:mod:`sfapprox.sf`, :mod:`sfapprox.baselines`,
:mod:`sfapprox.hybrid`); :func:`sfapprox.save_factors` and
:func:`sfapprox.load_factors` handle every registered kind.  A new kind of
surrogate is one new module here: a :class:`SurrogateOperator` subclass
decorated with :func:`register_operator` (every public module of this package
is imported, so it registers itself; list it below only to export it).
"""

from __future__ import annotations

import importlib
import pkgutil

from ._base import SurrogateOperator, operator_class, operator_kinds, register_operator
from .butterfly import PaddedButterflyOperator
from .chord import ChordOperator
from .hybrid import HybridOperator
from .monarch import MonarchLowRankOperator, MonarchOperator
from .nystrom import NystromOperator
from .sparse import SparseOperator

# Every public module registers its operator kinds on import: a new kind is one new file.
for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "SurrogateOperator",
    "register_operator",
    "operator_class",
    "operator_kinds",
    "ChordOperator",
    "HybridOperator",
    "SparseOperator",
    "MonarchOperator",
    "MonarchLowRankOperator",
    "PaddedButterflyOperator",
    "NystromOperator",
]
