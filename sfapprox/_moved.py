"""Names that moved to another module, kept at their old home for scripts (one release, with a warning).

A module whose names moved sets ``__getattr__ = moved_names(__name__, {"Name": "new.module", ...})``:
the old name then warns (a ``DeprecationWarning`` at the caller's line) and gives the object of its
new home, imported on first use.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, moved: Mapping[str, str], *, stacklevel: int = 2) -> Callable[[str], Any]:
    """A module ``__getattr__`` giving each name of ``moved`` from its new module, with a deprecation warning.

    Parameters
    ----------
    module : str
        The old module's name (its ``__name__``), for the messages.
    moved : mapping of str to str
        Name -> the module it lives in now.
    stacklevel : int, default=2
        Of the warning, from the returned function's frame: 2 when it is the module's
        ``__getattr__``, 3 when a ``__getattr__`` of the module's own calls it.

    Returns
    -------
    callable
        The module's ``__getattr__``; other names raise AttributeError as Python's own.

    Examples
    --------
    >>> import warnings
    >>> get = moved_names("old", {"sqrt": "math"})
    >>> with warnings.catch_warnings(record=True):
    ...     get("sqrt")(4.0)
    2.0
    """
    def __getattr__(name: str) -> Any:
        if name in moved:
            warnings.warn(f"{module}.{name} moved to {moved[name]}.{name}; the old name will be removed in a later "
                          "release", DeprecationWarning, stacklevel=stacklevel)
            return getattr(importlib.import_module(moved[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
