"""Progress callbacks: which ones a fit may call once per run of iterations instead of after each,
and the phases a progress display may show before the first iteration.

A light module (no numpy): the CLI marks its callbacks at start-up.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["coarse_progress", "same_progress", "phase", "kernel_phase", "Reporter"]

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


def kernel_phase(cached: bool) -> str:
    """What making compiled kernels ready is called on a progress display: loading them from numba's
    on-disk cache (``cached``), or compiling them, once after an install.

    Examples
    --------
    >>> kernel_phase(True), kernel_phase(False)
    ('loading compiled kernels', 'compiling kernels (first run)')
    """
    return "loading compiled kernels" if cached else "compiling kernels (first run)"


#: The phases shown on each display, in the order they began (the last one's text is on it), and the lock
#: their timers and ends share.
_shown: dict[tuple[int, int], list[tuple[int, str, bool]]] = {}
_lock = threading.Lock()
_order = itertools.count()


class _Phase:
    """What :func:`phase` yields: :meth:`end` ends the phase before its block does."""

    def __init__(self, end: Callable[[], None]) -> None:
        self.end = end


@contextlib.contextmanager
def phase(callback: Callable[..., Any] | None, text: str, delay: float = PHASE_DELAY, *,
          gives_way: bool = False) -> Iterator[_Phase]:
    """Show ``text`` on ``callback``'s display (its attribute ``phase``, a callable taking the text)
    while the block runs, if it runs longer than ``delay`` seconds; cleared (``""``) after.

    For work before a fit's first iteration that has no iterations to report
    (numba compiling the kernels on a fresh install: about 20 s at the README's
    first command), so that a bar at "it 0" is not taken for a hang.  The text
    is set from a timer thread (the block may hold the GIL for most of that
    time: it is set at the next switch).  Callbacks without ``phase`` (a
    user's) are never called.  It yields a handle whose ``end()`` ends the
    phase early, where the block goes on past the work it names (a fit's
    setup, ended at its first iteration, inside a block that holds the early
    returns).

    With ``gives_way`` an outer phase ends for good once a phase inside it is
    shown: a comparison's "reading columns" around a whole method came back
    after SF's own "scoring" ended, over the finished fit.
    """
    shows = getattr(callback, "phase", None)
    if not callable(shows):
        yield _Phase(lambda: None)
        return
    shown = threading.Event()
    cleared = False
    # a phase inside another (the kernels compiled during the scoring) hands the display back to the
    # outer one's text when it ends, not a blank
    key = (id(getattr(shows, "__func__", shows)), id(getattr(shows, "__self__", None)))
    entry = (next(_order), text, gives_way)

    def show() -> None:
        with _lock:
            if not cleared:
                shown.set()
                stack = _shown.setdefault(key, [])
                stack.append(entry)
                stack.sort()
                # an outer phase that gives way is not handed the display back once an inner one was shown
                stack[:-1] = [e for e in stack[:-1] if not e[2]]
                if stack[-1] is entry:
                    shows(text)

    def end() -> None:
        nonlocal cleared
        with _lock:
            if cleared:
                return
            cleared = True
            timer.cancel()
            if not shown.is_set():
                return
            stack = _shown.get(key, [])
            was_top = bool(stack) and stack[-1] is entry
            if entry not in stack:  # given way to an inner phase, which holds the display now
                return
            stack.remove(entry)
            if not stack:
                _shown.pop(key, None)
            if was_top:
                shows(stack[-1][1] if stack else "")

    timer = threading.Timer(delay, show)
    timer.daemon = True
    timer.start()
    try:
        yield _Phase(end)
    finally:
        end()


class Reporter:
    """An iterative fit's reports to a progress ``callback``, in ChordSF's dict: ``iteration`` (counted
    over the whole fit: a grid's splits and starts one after another), ``max_iter`` (the most it may
    take, every split's included), ``fro_error`` (``||X - X̂||_F`` of the current iterate, in ``X``'s
    units, where the fit knows it without an extra pass; else the last known, or None), ``elapsed``
    (seconds since the reporter was made) and, where the fit says what it runs, ``stage``.

    The baselines' fits (RPCA, NMF, Monarch, ...) took no callback, and a progress bar stood at "it 0
    error –" through the whole of their time.  Without a callback every call is a no-op; what the
    callback returns is not read (a stop is Ctrl-C's, which these fits handle).

    Parameters
    ----------
    callback : callable or None
        ChordSF's ``callback``.
    max_iter : int or None, default=None
        The most iterations the fit takes.
    began : float or None, default=None
        When the fit began (``time.perf_counter()``); None: now.  A part of a
        fit reported on its own (a hybrid's closed-form end) gives its whole
        fit's start, so that the time reported goes on from the fit's.

    Attributes
    ----------
    scale : float
        What the errors given are multiplied by, 1.0 until the fit sets it (a fit of ``X / c`` reports in
        ``X``'s units with ``c``).

    Examples
    --------
    >>> seen = []
    >>> report = Reporter(seen.append, max_iter=10)
    >>> report.stage = "rank 3"
    >>> report(2.5)
    >>> report(steps=0)  # a new stage shown, no iteration done
    >>> [(i["iteration"], i["fro_error"], i["stage"]) for i in seen]
    [(1, 2.5, 'rank 3'), (1, 2.5, 'rank 3')]
    """

    def __init__(self, callback: Callable[..., Any] | None, max_iter: int | None = None,
                 began: float | None = None) -> None:
        self.callback = callback
        self.max_iter = max_iter
        self.scale = 1.0
        self.iteration = 0
        self.error: float | None = None
        self.stage: str | None = None
        self.began = time.perf_counter() if began is None else began

    def __call__(self, error: float | None = None, *, steps: int = 1) -> None:
        """Report ``steps`` more iterations done (0: only a new stage or error), ``error`` the current
        ``||X - X̂||_F`` where known."""
        self.iteration += steps
        if error is not None:
            self.error = float(error) * self.scale
        if self.callback is None:
            return
        info = {"iteration": self.iteration, "max_iter": self.max_iter, "fro_error": self.error,
                "elapsed": time.perf_counter() - self.began}
        if self.stage:
            info["stage"] = self.stage
        self.callback(info)

    def at(self, stage: str | None, error: float | None = None) -> None:
        """Say that the fit now runs ``stage`` (reported at once, no iteration counted)."""
        self.stage = stage
        self(error, steps=0)
