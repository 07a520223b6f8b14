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


def test_the_rest_of_a_pass_fits_at_the_rate_it_went(fake_clock):
    """A quarter of a pass in 2 s: the rest (6 s at that rate) ends at 8 s, within a deadline at 8 s, not 7."""
    began = fake_clock.time
    fake_clock.advance(2.0)
    assert Deadline.after(6.0).rest_fits(began, 25, 100) and not Deadline.after(5.0).rest_fits(began, 25, 100)
    assert Deadline.after(None).rest_fits(began, 1, 10**9)
