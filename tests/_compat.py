"""What the tests need that differs between the dependency versions pyproject allows; not a test module.

distributed 2024.6 (pyproject allows 2024.6.1) has no ``FutureCancelledError`` (it came in 2024.7.0):
:func:`cluster_lost_error`.
numpy 1.24 (pyproject allows it) has no ``numpy.exceptions``: :data:`ComplexWarning`.  Python's
words for an object that does not pickle changed in 3.12 (``cannot pickle '_io.TextIOWrapper' object``
became ``cannot pickle 'TextIOWrapper' instances``): :func:`pickle_refusal`.
"""

from __future__ import annotations

import pickle
import re

import numpy as np

#: numpy's ComplexWarning: ``numpy.exceptions`` came in numpy 1.25, and numpy 2 has it there only
#: (a ``filterwarnings("error::numpy.exceptions.ComplexWarning")`` mark is a pytest config error on 1.24)
ComplexWarning = getattr(np, "exceptions", np).ComplexWarning


def cluster_lost_error() -> Exception:
    """What a task's ``result()`` raises once its Dask scheduler is gone, in the installed distributed."""
    try:  # newer distributed: the reason said
        from distributed.client import FutureCancelledError
    except ImportError:  # distributed 2024.6 (pyproject allows 2024.6.1) has none: it came in 2024.7.0
        from distributed.client import CancelledError

        return CancelledError("k")
    return FutureCancelledError("k", "scheduler-connection-lost")


def pickle_refusal(obj) -> str:
    """A regex of the one line ``TypeError: ...`` that the running Python's pickle gives for ``obj`` (whose
    words differ between Python versions); fails where ``obj`` pickles."""
    try:
        pickle.dumps(obj)
    except TypeError as exc:
        return re.escape(f"TypeError: {exc}")
    raise AssertionError(f"{obj!r} pickles")
