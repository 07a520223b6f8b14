"""Deprecated home of the SF operators: they live in :mod:`sfapprox.operators` now.

``from sfapprox.sf.linop import ChordOperator`` keeps working for one release,
with a ``DeprecationWarning``; import from :mod:`sfapprox.operators` (or
``sfapprox.ChordOperator``) instead.
"""

from __future__ import annotations

from .._moved import moved_names

__getattr__ = moved_names(__name__, {"ChordOperator": "sfapprox.operators", "HybridOperator": "sfapprox.operators",
                                     "TORCH_DENSE_MAX_N": "sfapprox.operators.chord"})
