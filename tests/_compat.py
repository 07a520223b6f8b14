"""What the tests need that differs between the dependency versions pyproject allows; not a test module.

``sp.random_array`` and ``sp.eye_array`` came in scipy 1.12, and pyproject allows scipy 1.10: on 1.10
and 1.11 every test drawing its sparse matrix with them was an AttributeError.  Where scipy has them
they are called as they are (the same matrices as before); on an older scipy ``sp.random`` and
``sp.eye`` give the same entries, wrapped in the sparse-array class of the format.  distributed 2023.1
(pyproject allows dask 2023.1) has no ``FutureCancelledError``: :func:`cluster_lost_error`.
numpy 1.24 (pyproject allows it) has no ``numpy.exceptions``: :data:`ComplexWarning`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: numpy's ComplexWarning: ``numpy.exceptions`` came in numpy 1.25, and numpy 2 has it there only
#: (a ``filterwarnings("error::numpy.exceptions.ComplexWarning")`` mark is a pytest config error on 1.24)
ComplexWarning = getattr(np, "exceptions", np).ComplexWarning


def _as_array(matrix):
    return getattr(sp, f"{matrix.format}_array")(matrix)


def random_array(shape, *, density=0.01, format="coo", dtype=None, random_state=None, data_sampler=None):
    """``sp.random_array(shape, density=, format=, dtype=, random_state=, data_sampler=)``, on scipy 1.10 too."""
    if hasattr(sp, "random_array"):
        return sp.random_array(shape, density=density, format=format, dtype=dtype, random_state=random_state,
                               data_sampler=data_sampler)
    return _as_array(sp.random(*shape, density=density, format=format, dtype=dtype, random_state=random_state,
                               data_rvs=data_sampler))


def eye_array(n, *, dtype=float, format=None):
    """``sp.eye_array(n, dtype=, format=)``, on scipy 1.10 too."""
    if hasattr(sp, "eye_array"):
        return sp.eye_array(n, dtype=dtype, format=format)
    return _as_array(sp.eye(n, dtype=dtype, format=format))


def cluster_lost_error() -> Exception:
    """What a task's ``result()`` raises once its Dask scheduler is gone, in the installed distributed."""
    try:  # newer distributed: the reason said
        from distributed.client import FutureCancelledError
    except ImportError:  # distributed 2023.1 (pyproject allows dask 2023.1) has no FutureCancelledError
        from distributed.client import CancelledError

        return CancelledError("k")
    return FutureCancelledError("k", "scheduler-connection-lost")
