"""The process-wide state a library call may touch only for the time of a block, and puts back after.

sfapprox runs inside its caller's process (a notebook, a script, a service): what it leaves changed
there — a generator's state, a logger's level — changes the caller's program.  The rule (checked call by
call in ``tests/test_side_effects.py``): a global is not touched, or it is touched inside one of the
blocks here, which restore it however the block ends.  The command line owns its process and sets
what it likes there (:func:`sfapprox.cli.main`).
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator

__all__ = ["python_random_kept", "logs_off"]


@contextlib.contextmanager
def python_random_kept() -> Iterator[None]:
    """Python's global generator (:mod:`random`) in the state it had before the block, after it.

    For imports of libraries that draw from it as they load: rich draws its first style id with
    ``random.getrandbits`` (``rich.style``, rich 13 to 15), so the first ``progress=True`` call shifted
    every number a caller's ``random.seed(0)`` had fixed.
    """
    state = random.getstate()
    try:
        yield
    finally:
        random.setstate(state)


@contextlib.contextmanager
def logs_off(*names: str | logging.Logger, below: int = logging.CRITICAL + 1) -> Iterator[None]:
    """The loggers ``names`` silenced below ``below`` for the block, their levels restored after.

    A logger already set above ``below`` keeps its level (silencing never makes one say more).  Used
    for dask's own ERROR logs of a failure sfapprox raises and says in one line, and for pooch's
    "Downloading ..." notes, which the caller's own settings of these loggers outlast.  A logger is
    given by its name or as the object itself: pooch's is ``logging.Logger("pooch")``, made outside
    :mod:`logging`'s registry, so ``logging.getLogger("pooch")`` is another logger, and quieting that
    one left pooch's notes on stderr.
    """
    logs = [name if isinstance(name, logging.Logger) else logging.getLogger(name) for name in names]
    levels = [log.level for log in logs]
    for log, level in zip(logs, levels):
        log.setLevel(max(level, below))
    try:
        yield
    finally:
        for log, level in zip(logs, levels):
            log.setLevel(level)
