"""The progress line of a call with ``progress=`` (``compare``, ``sweep``, ``fit_sf``), its display's module
imported only where one is asked for.

Not in :mod:`sfapprox._progress`, which :mod:`sfapprox._display` imports: a module of its own keeps the
import graph without a cycle.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["progress_shown"]


def progress_shown(progress: bool, matrix: Any, total: int | None, *, prefix: str = "",
                   **display: Any) -> contextlib.AbstractContextManager[tuple[Any, Any]]:
    """:func:`sfapprox._display.shown_progress` for a call on ``matrix`` (its line's label ``prefix`` and
    :func:`~sfapprox._display.display_label`), the display's module imported only where ``progress`` is
    not False: it loads rich's live display (about 60 ms), which ``progress=False`` never draws.

    Parameters
    ----------
    progress : bool
        The call's ``progress``; anything but False goes to ``shown_progress``, which checks it.
    matrix : object
        What the call fits or compares (the line names it).
    total : int or None
        The iterations that fill the bar.
    prefix : str, default=""
        Words before the matrix's name ("SF ").
    **display
        ``shown_progress``'s keywords (``callback``, ``on_result``, ``names``, ``time_limit``).

    Returns
    -------
    context manager
        Yielding ``(callback, on_result)``: the caller's own where ``progress`` is False.
    """
    if progress is False:
        return contextlib.nullcontext((display.get("callback"), display.get("on_result")))
    from ._display import display_label, shown_progress

    return shown_progress(progress, prefix + display_label(matrix), total, **display)
