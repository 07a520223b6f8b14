"""Time limits that hold at every size: the clock, the deadline, and whether a step still fits.

A method under a time limit must end within it whatever ``N`` is.  Checking
the clock only *after* each step is not enough once single steps cost
seconds (a full SVD, a dense ``N x N`` product, a line search at
``N = 3000``): the last step overruns by its whole cost.  So every fit checks
*before* each expensive step whether the step, at its estimated cost, still
ends before the deadline (:meth:`Deadline.fits`), and skips it, or takes a
cheaper one, when it would not; what was found so far is kept.  Estimates
come from the measured cost of the previous step of the same kind (the
first one of a kind is estimated from ``N`` or simply run).

:data:`clock` is the one clock every check reads (``time.perf_counter``);
tests replace it with a fake one to test the decisions without timing.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["clock", "now", "work_now", "one_time", "Deadline", "ManualClock"]

#: The clock every time-limit decision reads (seconds, monotonic).  Tests replace it.
clock: Callable[[], float] = time.perf_counter


def now() -> float:
    """The current value of :data:`clock`."""
    return clock()


#: Seconds this process has spent on work done once per process (:func:`one_time`).
_one_time_seconds = [0.0]


@contextlib.contextmanager
def one_time() -> Iterator[None]:
    """Count the block's seconds as once-per-process work (importing torch, loading or compiling the
    compiled kernels), which no method's time limit is charged for (:func:`work_now`): charged, a
    comparison's first SF row under ``--time-limit 2`` spent it loading torch and made no iteration."""
    began = now()
    try:
        yield
    finally:
        _one_time_seconds[0] += now() - began


def work_now() -> float:
    """:func:`now` less the seconds of :func:`one_time` work so far: the clock a method's whole turn is
    charged on (``RunContext.started``)."""
    return now() - _one_time_seconds[0]


class ManualClock:
    """A clock that moves only when told (:meth:`advance`): time-limit decisions made the same on any
    machine, whatever its load (the tests' ``fake_clock``; a benchmark's cut at a fixed share of a pass).

    Used as a context manager it is :data:`clock` inside the block.

    Examples
    --------
    >>> with ManualClock() as fake:
    ...     fake.advance(2.5)
    ...     now()
    2.5
    """

    def __init__(self) -> None:
        self.time = 0.0

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` on."""
        self.time += seconds

    def __enter__(self) -> "ManualClock":
        global clock
        self._replaced, clock = clock, self
        return self

    def __exit__(self, *exc) -> None:
        global clock
        clock = self._replaced


@dataclass(frozen=True)
class Deadline:
    """When a fit (or one part of it) must end: a :data:`clock` value, or None for no limit.

    Examples
    --------
    >>> d = Deadline.after(None)
    >>> d.fits(1e9), d.left(), d.limit()
    (True, inf, None)
    >>> Deadline.after(0.0).fits(1.0)
    False
    """

    end: float | None

    @classmethod
    def after(cls, seconds: float | None, start: float | None = None) -> "Deadline":
        """The deadline ``seconds`` after ``start`` (default: now); None seconds: no limit."""
        if seconds is None:
            return cls(None)
        return cls((now() if start is None else start) + max(0.0, float(seconds)))

    def left(self) -> float:
        """Seconds until the deadline (0 once passed; ``inf`` without a limit)."""
        return math.inf if self.end is None else max(0.0, self.end - now())

    def fits(self, cost: float) -> bool:
        """Whether a step of ``cost`` seconds started now ends by the deadline."""
        return self.end is None or now() + max(0.0, cost) <= self.end

    def rest_fits(self, began: float, done: int, total: int) -> bool:
        """Whether a pass begun at ``began`` (this module's clock) that has done ``done`` of its ``total``
        items (``done`` > 0) ends by the deadline at the rate it went so far: the whole pass priced, not only
        its next piece (a pass cut at the deadline had spent it for nothing)."""
        return self.fits((now() - began) / done * (total - done))

    def passed(self) -> bool:
        """Whether the deadline has come."""
        return self.end is not None and now() >= self.end

    def limit(self) -> float | None:
        """The time left as a ``time_limit`` for a callee (None without a limit)."""
        return None if self.end is None else self.left()
