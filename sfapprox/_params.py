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

from ._errors import ParameterError, parameter

__all__ = ["Interval", "Options", "MemorySize", "MEMORY_LIMIT", "SEED", "MAX_SEED", "check_params", "check_values",
           "parse_size"]


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
        if not isinstance(value, numbers.Real) or not self._finite(value):
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        return above and (self.high is None or value <= self.high)

    def _finite(self, value: numbers.Real) -> bool:
        """Whether ``value`` is finite as this kind: an int past a float's range (10**400) is a whole number
        still, judged by the bounds, but no float (``float()`` raised OverflowError, a traceback from
        every check)."""
        try:
            return math.isfinite(float(value))
        except OverflowError:
            return self.kind is int

    def describe(self) -> str:
        kind = "an int" if self.kind is int else "a float"
        # an open end is written open: infinities are refused (a "range [0, inf]" that refused inf read wrong)
        low = "(-inf" if self.low is None else f"{'(' if self.low_open else '['}{self._bound(self.low)}"
        high = "inf)" if self.high is None else f"{self._bound(self.high)}]"
        text = f"{kind} in the range {low}, {high}"
        return text + " or None" if self.allow_none else text

    def _bound(self, value: float) -> str:
        """A bound as written: an int's exactly (the largest seed read "1.84467e+19" as a float's)."""
        if self.kind is int and float(value).is_integer():
            return str(int(value))
        return f"{value:g}"


#: The largest seed: torch's generators take 64 bits (a seed of 2**64 ran every method seeded by numpy,
#: then failed rpca-pcp's with a traceback, "Overflow when unpacking long long").
MAX_SEED = 2**64 - 1
#: Every ``seed`` / ``random_state`` parameter's constraint.
SEED = Interval(int, 0, MAX_SEED)


@dataclass(frozen=True)
class MemorySize:
    """A memory limit as every entry point takes it: bytes (an int, at least 1), a size as the command
    line's ``--max-memory`` reads it (``"4G"``, ``"500M"``, ``"1.5g"``: :func:`parse_size`), or None
    (the default limit).

    One check for every ``max_memory``: a notebook user who read ``--max-memory 4G`` and passed
    ``max_memory="4G"`` was refused by the estimators, the settings and the readers alike, each in
    its own words.  :meth:`to_bytes` is what the value means; a constraint's owner keeps what it was
    given where scikit-learn would (an estimator's ``get_params``) and converts where it uses it.

    Examples
    --------
    >>> MEMORY_LIMIT.to_bytes("4G"), MEMORY_LIMIT.to_bytes(1024), MEMORY_LIMIT.to_bytes(None)
    (4294967296, 1024, None)
    >>> MEMORY_LIMIT.accepts("4 GiB"), MEMORY_LIMIT.accepts("lots"), MEMORY_LIMIT.accepts(0)
    (True, False, False)
    """

    def accepts(self, value: Any) -> bool:
        try:
            self.to_bytes(value)
        except ParameterError:
            return False
        return True

    def describe(self) -> str:
        return "an int in the range [1, inf) (bytes), a size such as '8G' or '500M', or None"

    def to_bytes(self, value: Any, name: str = "max_memory") -> int | None:
        """``value`` in bytes (None stays None).

        Parameters
        ----------
        value : int, str or None
            A byte count, or a size :func:`parse_size` reads.
        name : str, default="max_memory"
            The keyword named in the message, as its reader passes it (:func:`~sfapprox._errors.parameter`).

        Raises
        ------
        ParameterError
            ``max_memory='4X' must be an int in the range [1, inf) (bytes), a size such as ...``.
        """
        if value is None:
            return None
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
            return int(value)  # a numpy integer too, stored as the int it is
        if isinstance(value, str):
            try:
                return parse_size(value, what=name)
            except ParameterError:
                pass  # said below, in the words of every other refused value
        raise ParameterError(f"{parameter(name, value)} must be {self.describe()}")


#: Every ``max_memory`` parameter's constraint: bytes, at least one, or a size string; None for the default limit.
MEMORY_LIMIT = MemorySize()


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        if getattr(value, "ndim", 0):  # an array is no option; numpy 1.24 warned comparing it with a string
            return False
        try:
            return bool(value in self.values)
        except (TypeError, ValueError):  # an array compared with the options: not one of them
            return False

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


def check_params(owner: object, constraints: dict[str, Any]) -> dict[str, Any]:
    """Check ``owner``'s attributes against ``constraints``; raise :class:`ParameterError`.

    A constraint is an :class:`Interval`, :class:`Options`, :class:`MemorySize`, a type, or a
    tuple of those (any may match).

    Returns
    -------
    dict
        The values as :func:`check_values` returns them (a memory limit in bytes); the attributes
        themselves are left as they were given (``get_params`` returns them).
    """
    return check_values({name: getattr(owner, name) for name in constraints}, constraints, type(owner).__name__)


def check_values(values: dict[str, Any], constraints: dict[str, Any], owner: str) -> dict[str, Any]:
    """Check ``values`` (name -> value: a function's arguments) against ``constraints``, as
    :func:`check_params` checks an object's; ``owner`` names the function in the message.

    Returns
    -------
    dict
        name -> value, a :class:`MemorySize`'s in bytes (``"4G"`` -> ``4294967296``), the others as given.

    Raises
    ------
    ParameterError
        ``The 'name' parameter of owner must be ... Got ... instead.``
    """
    out: dict[str, Any] = {}
    for name, constraint in constraints.items():
        value = values[name]
        options = constraint if isinstance(constraint, tuple) else (constraint,)
        taken = next((c for c in options if _accepts(c, value)), _REFUSED)
        if taken is not _REFUSED:
            out[name] = taken.to_bytes(value, name) if isinstance(taken, MemorySize) else value
            continue
        wanted = " or ".join(_describe(c) for c in options)
        raise ParameterError(f"The {name!r} parameter of {owner} must be {wanted}. Got {value!r} instead.")
    return out


#: No constraint took the value (None is a constraint: it takes None).
_REFUSED = object()


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


def parse_size(text: str | int | None, *, what: str | None = None) -> int | None:
    """``"8G"``, ``"500M"``, ``"1.5g"``, ``"123456"`` (or an int) → bytes; None stays None.

    Parameters
    ----------
    text : str, int or None
        A size with an optional unit ``K``, ``M``, ``G``, ``T`` or ``P`` (powers
        of 1024; a trailing ``B`` or ``iB`` is allowed), or a byte count.
    what : str, optional
        The option named in error messages; by default the memory limit as its reader names it
        (``--max-memory`` on the command line, ``max_memory`` to Python: :func:`sfapprox._errors.parameter`).

    Returns
    -------
    int or None
        Bytes, at least 1.

    Raises
    ------
    ParameterError
        For text that is not a size, a size that is not positive and finite,
        or one above ``2**62`` bytes.

    Examples
    --------
    >>> parse_size("1.5K"), parse_size("2G"), parse_size(None)
    (1536, 2147483648, None)
    """
    if text is None:
        return None
    if what is None:
        # a Python caller was told "--max-memory must be ...", an option it has no way to type
        what = parameter("max_memory").rstrip("=")
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise ParameterError(f"{what} must be positive, got {text}")
        return text
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
    raw = str(text).strip().lower().removesuffix("b").removesuffix("i")
    scale = units.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        value = float(number)
    except ValueError:
        raise ParameterError(f"{what}: cannot read {text!r}; use e.g. 8G, 500M or a byte count") from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{what} must be a positive, finite size such as 8G, got {text!r}")
    size = value * scale
    if size > 1 << 62:
        raise ParameterError(f"{what} {text!r} is beyond any machine's memory; use e.g. 8G")
    if size < 1:  # '0.5' (a unit left out) was a limit of 1 byte, refused for every matrix as "over 1 B"
        raise ParameterError(f"{what} {text!r} is less than one byte; give a size with a unit, such as 8G or 500M")
    return int(size)
