"""scipy's sparse-array constructors for the tests on every scipy that pyproject allows; not a test module.

``sp.random_array`` and ``sp.eye_array`` came in scipy 1.12, and pyproject allows scipy 1.10: on 1.10
and 1.11 every test drawing its sparse matrix with them was an AttributeError.  Where scipy has them
they are called as they are (the same matrices as before); on an older scipy ``sp.random`` and
``sp.eye`` give the same entries, wrapped in the sparse-array class of the format.
"""

from __future__ import annotations

import scipy.sparse as sp


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
