"""The clock and deadlines every time-limit decision reads (sfapprox/_timing.py)."""

import math

from sfapprox._timing import Deadline


def test_a_step_fits_only_when_it_ends_by_the_deadline(fake_clock):
    d = Deadline.after(10.0)  # from now: 0 on the fake clock
    assert d.fits(10.0) and not d.fits(10.5) and d.left() == 10.0 and d.limit() == 10.0
    fake_clock.advance(7.5)
    assert d.fits(2.5) and not d.fits(2.6) and not d.passed() and d.left() == 2.5
    fake_clock.advance(3.0)
    assert d.passed() and d.left() == 0.0 and d.fits(0.0) is False
    assert Deadline.after(5.0, start=1.0).end == 6.0 and Deadline.after(-1.0).end == fake_clock.time


def test_no_limit_fits_everything(fake_clock):
    d = Deadline.after(None)
    fake_clock.advance(1e9)
    assert d.fits(1e12) and not d.passed() and d.left() == math.inf and d.limit() is None
