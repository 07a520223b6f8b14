"""Declared parameter constraints (``sfapprox._params``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sfapprox._errors import ParameterError
from sfapprox._params import SEED, Interval, Options, check_values


def test_an_int_past_a_floats_range_is_judged_by_the_bounds_not_a_traceback():
    """``Interval.accepts`` tested finiteness by ``float(value)``: an int past a float's range (10**400) raised
    OverflowError from every check, where the budget's counts (``budget._whole``) took it as the whole
    number it is.  An int constraint judges it by its bounds; a float one refuses it (it is no float)."""
    huge = 10**400
    assert Interval(int, 0).accepts(huge) and not SEED.accepts(huge)
    assert not Interval(float, 0).accepts(huge) and not Interval(int, 0).accepts(-huge)
    with pytest.raises(ParameterError, match=r"The 'seed' parameter of f must be an int in the range \[0, "):
        check_values({"seed": huge}, {"seed": SEED}, "f")



def test_an_array_is_no_option_and_says_nothing_else():
    """An array given for an options parameter: numpy 1.24 (pyproject allows it) compared it with each
    option and warned "FutureWarning: elementwise comparison failed" before the refusal; a 0-d array of an
    option is the option."""
    options = Options(("sf", "tsvd"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not options.accepts(np.array(["sf", "tsvd"])) and not options.accepts(np.zeros(3))
        assert options.accepts("sf") and Options((1, 2)).accepts(np.array(2)) and not Options((1, 2)).accepts(np.array(3))
