"""Progress callbacks: which ones a fit may call once per run of iterations instead of after each.

A light module (no numpy): the CLI marks its callbacks at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["coarse_progress", "same_progress"]


def coarse_progress(callback: Callable[..., Any] | None) -> bool:
    """Whether ``callback`` is a progress callback content with one call per run of iterations
    (its attribute ``coarse`` is true; see :class:`~sfapprox.ChordSF`'s ``callback``)."""
    return callback is not None and getattr(callback, "coarse", False) is True


def same_progress(wrapper: Callable[..., Any], callback: Callable[..., Any] | None) -> Callable[..., Any]:
    """``wrapper`` (a callback that calls ``callback``) marked coarse as ``callback`` is; returns it."""
    wrapper.coarse = coarse_progress(callback)  # type: ignore[attr-defined]
    return wrapper
