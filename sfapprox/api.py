"""Task-level functions: what a CLI command does, callable from Python.

``fit_matrix`` fits SF to a loaded matrix and writes its outputs;
``compare_matrix`` compares methods on a loaded matrix.  Both accept a
:class:`~sfapprox.io.LoadedMatrix` or a plain array.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ._errors import ParameterError
from .budget import resolve_budget, sf_config_for_budget
from .comparison import RunOptions, compare
from .results import Comparison, save_factors, write_json

__all__ = ["FitRun", "fit_matrix", "compare_matrix"]


@dataclass
class FitRun:
    """An SF fit and the summary written by ``fit --json``."""

    model: Any  # ChordSF
    summary: dict[str, Any]


def _as_loaded(matrix):
    from .io import LoadedMatrix, as_loaded

    return matrix if isinstance(matrix, LoadedMatrix) else as_loaded(matrix)


def fit_matrix(
    matrix,
    *,
    budget: str | int | float | None = None,
    out: str | os.PathLike | None = None,
    json_path: str | os.PathLike | None = None,
    force: bool = True,
    **sf_params: Any,
) -> FitRun:
    """Fit SF to ``matrix`` and optionally save the factors (HDF5) and a JSON summary.

    Parameters
    ----------
    matrix : LoadedMatrix or array
    budget : optional
        When given, the Chord structure that best fills this budget
        (:func:`~sfapprox.budget.sf_config_for_budget`); otherwise the
        reference structure (or ``n_factors``/``base`` from ``sf_params``).
    out, json_path : path, optional
        Output files (written atomically, even after a Ctrl-C that stopped
        the fit: the best factors found are saved).
    **sf_params
        :class:`~sfapprox.sf.model.ChordSF` parameters.

    Returns
    -------
    FitRun

    Examples
    --------
    >>> import numpy as np
    >>> run = fit_matrix(np.eye(8), max_iter=50, device="cpu")
    >>> sorted(run.summary)[:3]
    ['device', 'dtype', 'evaluations']
    """
    from .sf.model import ChordSF

    loaded = _as_loaded(matrix)
    if budget is not None:
        chosen = [k for k, default in (("n_factors", None), ("base", 2), ("support", "chord"))
                  if sf_params.get(k, default) != default]
        if chosen:
            raise ParameterError(f"a budget chooses SF's structure itself; leave out {', '.join(chosen)} "
                                 "(or drop the budget)")
        config = sf_config_for_budget(loaded.n, resolve_budget(budget, loaded.n).value)
        sf_params.update(n_factors=config.n_factors, base=config.base)
    model = ChordSF(**sf_params).fit(loaded.matrix)
    summary = {
        "fro_error": model.fro_error_,
        "rel_error": model.rel_error_,
        "iterations": model.n_iter_,
        "evaluations": model.n_evals_,
        "seconds": model.seconds_,
        "stop_reason": model.stop_reason_,
        "init": model.init_,
        "kernel": model.kernel_,
        "device": model.device_,
        "dtype": model.dtype_,
        "nnz": model.n_stored_,
        "matrix": loaded.name,
        "n": loaded.n,
        "support": model.support,
        "base": model.base,
        "n_factors": int(model.factors_.shape[0]),
        # butterfly positions are i and i XOR 2^m, not offsets: the list is empty there
        "offsets": model.offsets_.tolist(),
    }
    if out is not None:
        settings = {k: v for k, v in model.__dict__.items() if not k.endswith("_") and k != "callback"}
        save_factors(
            out,
            model.operator_,
            loss_history=model.loss_curve_,
            fit=summary,
            settings=settings,
            source={"name": loaded.name, "path": loaded.path, "sha256": loaded.sha256, "format": loaded.format},
            force=force,
        )
    if json_path is not None:
        write_json(json_path, summary, force=force)
    return FitRun(model, summary)


def compare_matrix(
    matrix,
    methods=("sf", "tsvd"),
    *,
    budget: str | int | float | None = "sf",
    options: RunOptions | None = None,
    on_result=None,
    approximations: dict | None = None,
) -> Comparison:
    """:func:`~sfapprox.comparison.compare` on a loaded matrix, with its summary as the report header.

    ``matrix`` is an array, a sparse matrix, a :class:`~sfapprox.io.LoadedMatrix`
    or a path; the other arguments are :func:`~sfapprox.comparison.compare`'s.

    Examples
    --------
    >>> import numpy as np
    >>> c = compare_matrix(np.eye(6), ["tsvd"], budget=13)
    >>> c.results[0].params["rank"]
    1
    """
    loaded = _as_loaded(matrix)
    return compare(loaded.matrix, methods, budget=budget, matrix_info=loaded.summary(),
                   options=options, on_result=on_result, approximations=approximations)
