"""The SF methods of a comparison: ``sf``, ``sf-symmetric`` and ``sf-butterfly``.

Each fits :class:`~sfapprox.sf.model.ChordSF` on its support in the largest
structure of that support that fits the budget
(:func:`~sfapprox.budget.sf_config_for_budget`).  ``sf`` under the paper
protocol keeps the reference structure (its count is the paper's budget); a
structure fixed by hand (``n_factors`` or ``base`` in the run's
``structure``) is kept as given, and refused when it stores more than the
budget — a "not applicable" row, never a run over budget.
"""

from __future__ import annotations

from .._base import MethodSpec, RunContext, register
from .._errors import BudgetError
from ..budget import sf_config_for_budget, sf_min_budget, sf_structure
from .model import ChordSF

__all__ = ["SF_METHODS", "sf_estimator"]

#: The plain-SF methods, one per support: name -> (support, summary, stored numbers).
SF_METHODS: dict[str, tuple[str, str, str]] = {
    "sf": ("chord", "Chord sparse factorization (L-BFGS; this project's core)", "N·K·M"),
    "sf-symmetric": ("symmetric", "SF on the symmetric Chord support (offsets 0, ±b^k)", "N·K′·M"),
    "sf-butterfly": ("butterfly", "SF on the butterfly support (FAµST's; N a power of two)", "2·N·log₂N"),
}


def sf_estimator(n: int, budget: int, context: RunContext, *, support: str = "chord") -> ChordSF:
    """The ChordSF that the SF method of ``support`` fits for an ``n x n`` matrix at ``budget``.

    Raises
    ------
    BudgetError
        When no structure of the support fits, or a structure fixed in
        ``context.structure`` stores more than the budget.
    """
    params = dict(context.structure)
    params["support"] = support
    fixed = "n_factors" in params or "base" in params
    if fixed or (context.protocol == "paper" and support == "chord"):
        config = sf_structure(n, support=support, base=params.get("base", 2), n_factors=params.get("n_factors"))
        if config.count > budget:
            raise BudgetError(f"SF with {config.n_factors} factors of {config.n_offsets} values per row "
                              f"stores {config.count} numbers, over the budget {budget}")
    else:
        config = sf_config_for_budget(n, budget, support=support)
        params.update(n_factors=config.n_factors, base=config.base)
    return ChordSF(**context.settings.apply_to(ChordSF, callback=context.callback, **params))


def _register(name: str, support: str, summary: str, stores: str, order: int) -> None:
    register(
        MethodSpec(
            name=name,
            summary=summary,
            stores=stores,
            make=lambda n, budget, context: sf_estimator(n, budget, context, support=support),
            min_budget=lambda n, context: sf_min_budget(n, support=support),
            order=order,
            label="SF" if support == "chord" else f"SF ({support})",
        )
    )


for _order, (_name, (_support, _summary, _stores)) in enumerate(SF_METHODS.items()):
    _register(_name, _support, _summary, _stores, _order)
