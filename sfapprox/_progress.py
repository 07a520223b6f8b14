"""Progress callbacks: which ones a fit may call once per run of iterations instead of after each,
and the phases a progress display may show before the first iteration.

A light module (no numpy): the CLI marks its callbacks at start-up.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["coarse_progress", "same_progress", "phase"]

#: Seconds a phase must last before it is shown: loading compiled code from numba's cache takes a
#: fraction of a second, and a display that flashed "compiling" on every run would say what is not so.
PHASE_DELAY = 0.5


def coarse_progress(callback: Callable[..., Any] | None) -> bool:
    """Whether ``callback`` is a progress callback content with one call per run of iterations
    (its attribute ``coarse`` is true; see :class:`~sfapprox.ChordSF`'s ``callback``)."""
    return callback is not None and getattr(callback, "coarse", False) is True


def same_progress(wrapper: Callable[..., Any], callback: Callable[..., Any] | None) -> Callable[..., Any]:
    """``wrapper`` (a callback that calls ``callback``) marked coarse as ``callback`` is, and showing
    the phases ``callback`` shows (its ``phase``); returns it."""
    wrapper.coarse = coarse_progress(callback)  # type: ignore[attr-defined]
    shows = getattr(callback, "phase", None)
    if callable(shows):
        wrapper.phase = shows  # type: ignore[attr-defined]
    return wrapper


@contextlib.contextmanager
def phase(callback: Callable[..., Any] | None, text: str, delay: float = PHASE_DELAY) -> Iterator[None]:
    """Show ``text`` on ``callback``'s display (its attribute ``phase``, a callable taking the text)
    while the block runs, if it runs longer than ``delay`` seconds; cleared (``""``) after.

    For work before a fit's first iteration that has no iterations to report
    (numba compiling the kernels on a fresh install: about 20 s at the README's
    first command), so that a bar at "it 0" is not taken for a hang.  The text
    is set from a timer thread (the block may hold the GIL for most of that
    time: it is set at the next switch).  Callbacks without ``phase`` (a
    user's) are never called.
    """
    shows = getattr(callback, "phase", None)
    if not callable(shows):
        yield
        return
    shown = threading.Event()
    lock = threading.Lock()
    cleared = False

    def show() -> None:
        with lock:
            if not cleared:
                shown.set()
                shows(text)

    timer = threading.Timer(delay, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            cleared = True
        timer.cancel()
        if shown.is_set():
            shows("")
