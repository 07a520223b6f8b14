"""Deprecated home of the SF operators: they live in :mod:`sfapprox.operators` now.

``from sfapprox.sf.linop import ChordOperator`` keeps working for one release,
with a ``DeprecationWarning``; import from :mod:`sfapprox.operators` (or
``sfapprox.ChordOperator``) instead.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MOVED = {"ChordOperator": "sfapprox.operators", "HybridOperator": "sfapprox.operators",
          "TORCH_DENSE_MAX_N": "sfapprox.operators.chord"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(f"sfapprox.sf.linop.{name} moved to {_MOVED[name]}.{name}; the old name will be removed "
                      "in a later release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'sfapprox.sf.linop' has no attribute {name!r}")
