"""sfapprox: Chord sparse factorization of square matrices, compared at equal budget.

The public API (imported lazily, so ``import sfapprox`` and ``sfapprox --help``
stay fast and do not load torch):

* loading: :func:`load_matrix`, :class:`LoadedMatrix`; matrices too big to form:
  :mod:`sfapprox.sources` (:class:`KernelMatrix`, :class:`AttentionMatrix`, ...) and
  :func:`open_matrix` (a file that holds or describes one)
* fitting: :class:`ChordSF`, :func:`fit_sf`, :func:`fit_matrix`
* the other methods, one module each: :mod:`sfapprox.baselines` (``tsvd``:
  :class:`TruncatedSVD`, ``rpca`` / ``rpca-pcp``: :class:`RobustPCA`, ``nmf``:
  :class:`NMF`, ``rsvd``: :class:`RandomizedSVD`, ``nystrom``: :class:`Nystrom`,
  ``sparse``: :class:`SparseApproximation`, ``monarch``: :class:`Monarch`, ``monarch+lr``,
  ``butterfly-hier``) and
  :mod:`sfapprox.hybrid` (``sf+lr``: :class:`ChordLowRank`, ``sf+s``:
  :class:`ChordSparse`); :func:`available_methods` lists all of them
* comparing: :func:`compare` (settings: :class:`FitSettings`, :class:`LoadOptions`);
  budget sweeps: :func:`sfapprox.sweep.sweep`
* using a fit: :mod:`sfapprox.operators` (every surrogate: :class:`ChordOperator`,
  :class:`HybridOperator`, ...), :func:`save_factors`, :func:`load_factors`
* collections: :mod:`sfapprox.datasets` (manifests, downloads, batch runs, reports)
* accounting: :mod:`sfapprox.budget`, :func:`frobenius_error`; the errors of a fit too big to score
  exactly, estimated from sampled columns: :func:`estimate_errors`
* errors and warnings, one family: :class:`SfapproxError` (:class:`InputError`, :class:`ParameterError`,
  :class:`BudgetError`, :class:`ResourceError`, :class:`DeviceError`, :class:`NotApplicableError`,
  :class:`NotFittedError`, :class:`OutputBusyError`) and :class:`ConvergenceWarning`
"""

# No ``from __future__ import annotations`` and the helpers imported under private names: every name
# this module holds is public (``__all__``), private (``_``) or a submodule, so ``sfapprox.Any``,
# ``sfapprox.importlib`` and ``sfapprox.annotations`` are not there for a notebook's completion to offer.
import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from . import _errors
# ``name as name``: re-exported for type checkers (mypy --strict refused ``sfapprox.ParameterError`` as "not
# explicitly exported": a checker does not read the computed __all__ below)
from ._errors import (  # noqa: F401  (the public error family, listed in _errors.__all__)
    BudgetError as BudgetError,
    ConvergenceWarning as ConvergenceWarning,
    DeviceError as DeviceError,
    InputError as InputError,
    NotApplicableError as NotApplicableError,
    NotFittedError as NotFittedError,
    ParameterError as ParameterError,
    ResourceError as ResourceError,
    SfapproxError as SfapproxError,
)

__version__ = "0.1.0"

_LAZY = {
    "load_matrix": "sfapprox.io",
    "open_matrix": "sfapprox.io",
    "KernelMatrix": "sfapprox.sources",
    "AttentionMatrix": "sfapprox.sources",
    "sources": "sfapprox.sources",
    "LoadedMatrix": "sfapprox.io",
    "ChordSF": "sfapprox.sf.model",
    "fit_sf": "sfapprox.sf.model",
    "fit_matrix": "sfapprox.api",
    "OutputBusyError": "sfapprox._output_lock",  # fit_matrix's and ChordSF's, where another run writes the file
    "compare": "sfapprox.comparison",
    "available_methods": "sfapprox.comparison",
    "FitSettings": "sfapprox._settings",
    "LoadOptions": "sfapprox._settings",
    "TruncatedSVD": "sfapprox.baselines.tsvd",
    "RobustPCA": "sfapprox.baselines.rpca",
    "NMF": "sfapprox.baselines.nmf",
    "RandomizedSVD": "sfapprox.baselines.rsvd",
    "Nystrom": "sfapprox.baselines.nystrom",
    "SparseApproximation": "sfapprox.baselines.sparse",
    "Monarch": "sfapprox.baselines.monarch",
    "ChordLowRank": "sfapprox.hybrid",
    "ChordSparse": "sfapprox.hybrid",
    "ChordOperator": "sfapprox.operators",
    "HybridOperator": "sfapprox.operators",
    "operators": "sfapprox.operators",
    # modules the docstring names (``sfapprox.sweep.sweep`` after ``import sfapprox`` was an AttributeError)
    "sweep": "sfapprox.sweep",
    "datasets": "sfapprox.datasets",
    "budget": "sfapprox.budget",
    "save_factors": "sfapprox.factors",
    "load_factors": "sfapprox.factors",
    "frobenius_error": "sfapprox.metrics",
    "estimate_errors": "sfapprox.estimate",
}

if _TYPE_CHECKING:  # what __getattr__ returns, for type checkers: without it every lazy name was Any to them
    # (``name as name``: re-exported, which a type checker does not read from the computed __all__)
    from . import budget as budget, datasets as datasets, operators as operators, sources as sources  # noqa: F401
    from . import sweep as sweep  # noqa: F401
    from ._settings import FitSettings as FitSettings, LoadOptions as LoadOptions  # noqa: F401
    from .api import fit_matrix as fit_matrix  # noqa: F401
    from ._output_lock import OutputBusyError as OutputBusyError  # noqa: F401
    from .baselines.monarch import Monarch as Monarch  # noqa: F401
    from .baselines.nmf import NMF as NMF  # noqa: F401
    from .baselines.nystrom import Nystrom as Nystrom  # noqa: F401
    from .baselines.rpca import RobustPCA as RobustPCA  # noqa: F401
    from .baselines.rsvd import RandomizedSVD as RandomizedSVD  # noqa: F401
    from .baselines.sparse import SparseApproximation as SparseApproximation  # noqa: F401
    from .baselines.tsvd import TruncatedSVD as TruncatedSVD  # noqa: F401
    from .comparison import available_methods as available_methods, compare as compare  # noqa: F401
    from .estimate import estimate_errors as estimate_errors  # noqa: F401
    from .factors import load_factors as load_factors, save_factors as save_factors  # noqa: F401
    from .hybrid import ChordLowRank as ChordLowRank, ChordSparse as ChordSparse  # noqa: F401
    from .io import LoadedMatrix as LoadedMatrix, load_matrix as load_matrix, open_matrix as open_matrix  # noqa: F401
    from .metrics import frobenius_error as frobenius_error  # noqa: F401
    from .operators import ChordOperator as ChordOperator, HybridOperator as HybridOperator  # noqa: F401
    from .sf.model import ChordSF as ChordSF, fit_sf as fit_sf  # noqa: F401
    from .sources import AttentionMatrix as AttentionMatrix, KernelMatrix as KernelMatrix  # noqa: F401

#: Old names, kept for scripts (each warns when used; not in ``__all__``).
_OLD = {
    "compare_matrix": "sfapprox.api",
    "RunOptions": "sfapprox._old_api",
}

__all__ = sorted([*_LAZY, *(name for name in _errors.__all__ if name not in ("one_line", "user_stacklevel")), "__version__"])


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        module = _importlib.import_module(_LAZY[name])
        return module if module.__name__ == f"sfapprox.{name}" else getattr(module, name)
    if name in _OLD:
        return getattr(_importlib.import_module(_OLD[name]), name)
    raise AttributeError(f"module 'sfapprox' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
