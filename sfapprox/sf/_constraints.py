"""ChordSF's parameter constraints and its options' checks that need no matrix, importable without torch.

``sfapprox fit`` refuses SF's options before the matrix loads; importing the estimator's module for that
loaded torch (1-2 s) before the progress bar was up, a pause with nothing on the screen where the fit's
display now says "loading torch".
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from .._errors import ParameterError, parameter
from .._params import MEMORY_LIMIT, SEED, Interval, Options
from .._settings import MAX_THREADS, SF_NAMED_INITS
from ..chord import SUPPORTS

#: :class:`~sfapprox.sf.model.ChordSF`'s ``_parameter_constraints`` (see :func:`sfapprox._params.check_params`).
SF_CONSTRAINTS = {
    "n_factors": Interval(int, 1, None, allow_none=True),
    "base": Interval(int, 2, None),
    "support": Options(tuple(SUPPORTS)),
    "max_iter": Interval(int, 0, None),
    "time_limit": Interval(float, 0, None, allow_none=True),
    "ftol": Interval(float, 0, None),
    "gtol": Interval(float, 0, None),
    "history_size": Interval(int, 1, None),
    "init": (Options(SF_NAMED_INITS), str, os.PathLike, np.ndarray),
    "checkpoint": (str, os.PathLike, None),
    "callback": (Callable, None),
    "checkpoint_every": Interval(float, 0, None),
    "init_noise": Interval(float, 0, None, allow_none=True),
    "probe": Interval(float, 0, 1),
    "scale": (Options(("sqrt_n", "n", "fro")), Interval(float, 0, None, low_open=True)),
    "random_state": SEED,
    "device": str,
    "dtype": (Options(("float64", "float32", "auto")), None),
    "max_memory": MEMORY_LIMIT,
    "threads": Interval(int, 1, MAX_THREADS, allow_none=True),
}


def check_butterfly_base(base: int) -> None:
    """Refuse a base other than 2 with the butterfly support (checked without the matrix: the command
    line refuses it before loading one).

    Raises
    ------
    ParameterError
        For ``base`` other than 2.
    """
    if base != 2:
        raise ParameterError(
            f"{parameter('base', base)} does not apply to the butterfly support (its positions are i "
            f"and i XOR 2^m); leave {parameter('base')} out or use support 'chord' or 'symmetric'"
        )
