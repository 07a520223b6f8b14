"""One family of errors for the whole project.

Every error that a user can cause (a bad file, a bad option, a budget that is
too small) is raised as a subclass of :class:`SfapproxError`.  The CLI turns
these into a one-line message and exit code 2; anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

__all__ = [
    "SfapproxError",
    "InputError",
    "ParameterError",
    "BudgetError",
    "ResourceError",
    "DeviceError",
    "NotApplicableError",
    "NotFittedError",
    "ConvergenceWarning",
    "one_line",
]


class SfapproxError(Exception):
    """Base class of every error sfapprox raises on purpose."""


class InputError(SfapproxError, ValueError):
    """A matrix file or array cannot be used (unreadable, malformed, not square, ...)."""


class ParameterError(SfapproxError, ValueError):
    """An option or parameter has an invalid value."""


class BudgetError(SfapproxError, ValueError):
    """A budget of stored numbers is too small (or invalid) for a method."""


class ResourceError(SfapproxError, MemoryError):
    """The work would need more memory than allowed; raised before allocating."""


class DeviceError(SfapproxError, RuntimeError):
    """A requested compute device is not available."""


class NotApplicableError(SfapproxError, ValueError):
    """A method does not apply to this matrix (e.g. NMF on a matrix with negative entries).

    ``compare`` records such a method with status "not applicable" and the
    message as its reason; the run itself succeeds.
    """


class NotFittedError(SfapproxError, ValueError, AttributeError):
    """An estimator's fitted result was asked for before ``fit`` (an AttributeError too, as
    scikit-learn's: ``hasattr(estimator, "operator_")`` is False before the fit)."""


class ConvergenceWarning(UserWarning):
    """A fit stopped on its iteration or time limit before its tolerances were met."""


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message, prefixed by its type when it is not one of ours
    (a foreign message alone, e.g. "4", would not say what happened)."""
    text = " ".join(str(exc).split())
    return text if isinstance(exc, SfapproxError) else f"{type(exc).__name__}: {text}"
