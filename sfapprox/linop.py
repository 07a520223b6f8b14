"""Deprecated first home of the SF operators (``sfapprox.linop``): they live in :mod:`sfapprox.operators`.

``from sfapprox.linop import ChordOperator`` keeps working for one release, with a
``DeprecationWarning``; import from :mod:`sfapprox.operators` (or ``sfapprox.ChordOperator``) instead.
"""

from __future__ import annotations

from ._moved import moved_names

__getattr__ = moved_names(__name__, {"ChordOperator": "sfapprox.operators", "HybridOperator": "sfapprox.operators"})
