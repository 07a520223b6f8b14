"""Result records: what ``compare`` and ``sweep`` return, and their tables.

:class:`MethodResult` / :class:`Comparison` carry each method's outcome (and
its fitted operator); ``to_dict()`` gives the documented JSON shape and
``tables()`` the table every output format renders
(:mod:`sfapprox.formats`).  Files are written by :mod:`sfapprox._atomic`
(JSON, text) and :mod:`sfapprox.factors` (fitted surrogates, HDF5).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .formats import Column, Table, fmt_number, fmt_seconds, jsonable

__all__ = ["MethodResult", "Comparison", "library_versions", "details"]

@dataclass
class MethodResult:
    """One method's outcome at a budget.

    ``status`` is ``"ok"``, ``"not applicable"`` (``reason`` says why),
    ``"failed"`` or ``"interrupted"``; errors are None unless there is an
    approximation to score.  ``operator`` is the fitted surrogate (a
    LinearOperator with ``to_dense()`` and ``n_stored``) and ``estimator`` the
    fitted method object; neither is part of :meth:`to_dict`.
    """

    method: str
    status: str
    nnz: int | None = None
    fro_error: float | None = None
    rel_error: float | None = None
    seconds: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    operator: Any = field(default=None, repr=False, compare=False)
    estimator: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (without the operator and estimator)."""
        skip = ("operator", "estimator")
        return jsonable({f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip})


@dataclass
class Comparison:
    """Every method's result on one matrix at one budget, and how they were run.

    ``settings`` holds the fit settings, the protocol and ``count_indices``;
    ``versions`` the library versions (both written to every JSON file).
    """

    matrix: dict[str, Any]
    budget: int
    budget_spec: str
    results: list[MethodResult]
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def winner(self) -> str | None:
        """The ``ok`` method with the smallest Frobenius error (None if none)."""
        scored = [r for r in self.results if r.status == "ok" and r.fro_error is not None]
        return min(scored, key=lambda r: r.fro_error).method if scored else None

    def result(self, method: str) -> MethodResult:
        """The row of ``method`` (KeyError when it was not run)."""
        for r in self.results:
            if r.method == method:
                return r
        raise KeyError(method)

    def to_dict(self) -> dict[str, Any]:
        return jsonable(
            {
                "matrix": self.matrix,
                "budget": self.budget,
                "budget_spec": self.budget_spec,
                "winner": self.winner(),
                "results": [r.to_dict() for r in self.results],
                "settings": self.settings,
                "versions": self.versions,
            }
        )

    def tables(self) -> list[Table]:
        """The comparison as one table: a row per method, the winner marked."""
        name, n = self.matrix.get("name", "matrix"), self.matrix.get("n")
        table = Table(
            f"{name}  (N={n}, budget {self.budget:,} stored numbers = {100 * self.budget / n**2:.2f}% of N²)",
            [Column("method", "method", "left"), Column("stored", "stored"), Column("of_budget", "of budget"),
             Column("fro_error", "‖X−X̂‖_F"), Column("rel_error", "relative"), Column("seconds", "seconds"),
             Column("status", "status", "left"), Column("details", "details", "left")],
        )
        winner = self.winner()
        for r in self.results:
            mark = r.method == winner
            table.add(
                {
                    "method": r.method + (" ★" if mark else ""),
                    "stored": "–" if r.nnz is None else f"{r.nnz:,}",
                    "of_budget": "–" if r.nnz is None else f"{100 * r.nnz / self.budget:.1f}%",
                    "fro_error": fmt_number(r.fro_error),
                    "rel_error": fmt_number(r.rel_error),
                    "seconds": fmt_seconds(r.seconds),
                    "status": r.status,
                    "details": r.reason or details(r.params),
                },
                best={"method", "fro_error", "rel_error"} if mark else set(),
            )
        if winner is not None:
            table.notes.append(f"★ smallest error at this budget: {winner}")
        return [table]


#: Short names of the fitted parameters shown in the details column.
_SHORT = {"rank": "r", "n_sparse": "s", "index_storage": "indices", "n_factors": "M", "base": "b",
          "init": "init", "iterations": "it", "stop_reason": "stop"}


def details(params: dict[str, Any]) -> str:
    """The fitted parameters worth a glance, e.g. ``M=6 b=2 it=812 stop=ftol``.

    Examples
    --------
    >>> details({"rank": 3, "stop_reason": "exact", "base": None})
    'r=3 stop=exact'
    """
    # None marks a part the method did not use (sf+s that kept no factors has no base)
    return " ".join(f"{short}={params[key]}" for key, short in _SHORT.items() if params.get(key) is not None)


def library_versions() -> dict[str, str]:
    """Versions of sfapprox and the libraries that shaped a result."""
    import h5py
    import scipy
    import torch

    from . import __version__

    return {
        "sfapprox": __version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
        "h5py": h5py.__version__,
    }


