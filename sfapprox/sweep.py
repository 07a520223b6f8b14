"""Every method at every budget: error-versus-budget curves for one matrix."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .comparison import RunOptions, compare
from .results import Comparison, MethodResult, _jsonable

__all__ = ["Sweep", "sweep", "parse_budget_list"]


def parse_budget_list(text: str) -> list[str]:
    """``"0.01,0.02,sf,5000"`` → ``["0.01", "0.02", "sf", "5000"]`` (each validated later)."""
    from ._errors import ParameterError

    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if not items:
        raise ParameterError("--budgets needs at least one budget, e.g. 0.01,0.02,0.05")
    return items


@dataclass
class Sweep:
    """One :class:`~sfapprox.results.Comparison` per budget, in the order asked."""

    matrix: dict[str, Any]
    methods: list[str]
    points: list[Comparison]

    def table(self) -> dict[int, dict[str, MethodResult]]:
        """``{budget: {method: result}}``."""
        return {p.budget: {r.method: r for r in p.results} for p in self.points}

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(
            {
                "matrix": self.matrix,
                "methods": self.methods,
                "points": [
                    {k: v for k, v in p.to_dict().items() if k != "matrix"} for p in self.points
                ],
            }
        )


def sweep(
    X,
    budgets: Sequence[str | int | float],
    methods: Sequence[str] = ("sf", "tsvd"),
    *,
    matrix_info: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    on_result: Callable[[int, MethodResult], None] | None = None,
) -> Sweep:
    """Run :func:`~sfapprox.comparison.compare` at each budget.

    A Ctrl-C that interrupts SF ends the sweep after that point (the point
    is kept, with its interrupted row); other exceptions propagate.

    Examples
    --------
    >>> import numpy as np
    >>> s = sweep(np.random.default_rng(0).random((10, 10)), [0.5, 1.0], ["tsvd"])
    >>> [p.budget for p in s.points]
    [50, 100]
    """
    points: list[Comparison] = []
    info = dict(matrix_info or {})
    for spec in budgets:
        point = compare(
            X,
            methods,
            budget=spec,
            matrix_info=info,
            options=options,
            on_result=(lambda r, b=spec: on_result(b, r)) if on_result else None,
        )
        points.append(point)
        info = point.matrix
        if any(r.status == "interrupted" for r in point.results):
            break
    return Sweep(info, list(methods), points)
