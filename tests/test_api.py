"""fit_matrix: the fit-and-save entry point (its writing is tested in test_atomic.py)."""

import warnings

import numpy as np
import pytest

from sfapprox import ConvergenceWarning, FitSettings, ParameterError, fit_matrix


def test_unknown_sf_parameters_are_refused_before_the_fit():
    with pytest.raises(ParameterError, match=r"ChordSF has no parameter 'bogus' \(in fit_matrix's keyword arguments\)"):
        fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), bogus=3)


def test_its_convergence_warning_points_at_the_callers_line():
    X = np.random.default_rng(0).standard_normal((32, 32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_matrix(X, settings=FitSettings(max_iter=20, time_limit=None, device="cpu"))
    found = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert found and all(w.filename == __file__ for w in found), [(w.filename, w.lineno) for w in found]


def test_the_methods_that_work_from_columns_are_importable_from_the_package():
    import sfapprox
    from sfapprox._base import methods

    for name in ("RandomizedSVD", "Nystrom", "SparseApproximation", "Monarch"):
        cls = getattr(sfapprox, name)
        assert name in sfapprox.__all__ and methods()[cls._method].access == ("dense", "columns")

