"""What the tests need that differs between the dependency versions pyproject allows; not a test module.

distributed 2023.1 (pyproject allows dask 2023.1) has no ``FutureCancelledError``: :func:`cluster_lost_error`.
numpy 1.24 (pyproject allows it) has no ``numpy.exceptions``: :data:`ComplexWarning`.
"""

from __future__ import annotations

import numpy as np

#: numpy's ComplexWarning: ``numpy.exceptions`` came in numpy 1.25, and numpy 2 has it there only
#: (a ``filterwarnings("error::numpy.exceptions.ComplexWarning")`` mark is a pytest config error on 1.24)
ComplexWarning = getattr(np, "exceptions", np).ComplexWarning


def cluster_lost_error() -> Exception:
    """What a task's ``result()`` raises once its Dask scheduler is gone, in the installed distributed."""
    try:  # newer distributed: the reason said
        from distributed.client import FutureCancelledError
    except ImportError:  # distributed 2023.1 (pyproject allows dask 2023.1) has no FutureCancelledError
        from distributed.client import CancelledError

        return CancelledError("k")
    return FutureCancelledError("k", "scheduler-connection-lost")
