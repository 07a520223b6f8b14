"""Declared parameter constraints, checked once when ``fit`` runs (sklearn's habit).

A class lists ``_parameter_constraints = {"max_iter": Interval(int, 1, None), ...}``
and calls :func:`check_params` at the top of ``fit``; every violation gets the
same message shape: "The 'max_iter' parameter of ChordSF must be an int in the
range [1, inf). Got 0 instead."
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import ParameterError

__all__ = ["Interval", "Options", "MEMORY_LIMIT", "check_params", "check_values"]


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (int or float) in ``[low, high]``; ``None`` bounds are open-ended, and
    ``low_open`` leaves ``low`` itself out (``(low, high]``: a scale of 0 is no scale)."""

    kind: type
    low: float | None = None
    high: float | None = None
    allow_none: bool = False
    low_open: bool = False

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.allow_none
        if isinstance(value, bool):
            return False
        if self.kind is int and not isinstance(value, numbers.Integral):
            return False
        if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        return above and (self.high is None or value <= self.high)

    def describe(self) -> str:
        kind = "an int" if self.kind is int else "a float"
        # an open end is written open: infinities are refused (a "range [0, inf]" that refused inf read wrong)
        low = "(-inf" if self.low is None else f"{'(' if self.low_open else '['}{self.low:g}"
        high = "inf)" if self.high is None else f"{self.high:g}]"
        text = f"{kind} in the range {low}, {high}"
        return text + " or None" if self.allow_none else text


#: Every ``max_memory`` parameter's constraint: bytes, at least one; None for the default limit.
MEMORY_LIMIT = Interval(int, 1, None, allow_none=True)


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        try:
            return bool(value in self.values)
        except (TypeError, ValueError):  # an array compared with the options: not one of them
            return False

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


def check_params(owner: object, constraints: dict[str, Any]) -> None:
    """Check ``owner``'s attributes against ``constraints``; raise :class:`ParameterError`.

    A constraint is an :class:`Interval`, :class:`Options`, a type, or a
    tuple of those (any may match).
    """
    check_values({name: getattr(owner, name) for name in constraints}, constraints, type(owner).__name__)


def check_values(values: dict[str, Any], constraints: dict[str, Any], owner: str) -> None:
    """Check ``values`` (name -> value: a function's arguments) against ``constraints``, as
    :func:`check_params` checks an object's; ``owner`` names the function in the message.

    Raises
    ------
    ParameterError
        ``The 'name' parameter of owner must be ... Got ... instead.``
    """
    for name, constraint in constraints.items():
        value = values[name]
        options = constraint if isinstance(constraint, tuple) else (constraint,)
        if any(_accepts(c, value) for c in options):
            continue
        wanted = " or ".join(_describe(c) for c in options)
        raise ParameterError(f"The {name!r} parameter of {owner} must be {wanted}. Got {value!r} instead.")


def _accepts(constraint: Any, value: Any) -> bool:
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    if constraint is None:
        return value is None
    return constraint.accepts(value)


def _describe(constraint: Any) -> str:
    if constraint is Callable:
        return "a callable"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__name__}"
    if constraint is None:
        return "None"
    return constraint.describe()


def split_items(text: str, what: str) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]``: a comma-separated list, a trailing comma allowed.

    An empty item between two commas (``"sparse,,tsvd"``) is refused: it is
    a name left out or a typo, and dropping it said nothing.

    Parameters
    ----------
    text : str
        The list as typed.
    what : str
        What the list is, for the message (``"--methods"``).

    Raises
    ------
    ParameterError
        For an empty item other than after a trailing comma.

    Examples
    --------
    >>> split_items("sf, tsvd,", "--methods")
    ['sf', 'tsvd']
    """
    items = [part.strip() for part in text.split(",")]
    if len(items) > 1 and not items[-1]:
        items.pop()  # "sf,tsvd," is a list of two
    if len(items) > 1 and not all(items):
        raise ParameterError(f"{what} {text!r}: an item between two commas is empty; remove the extra comma "
                             "or name what goes there")
    return [item for item in items if item]
