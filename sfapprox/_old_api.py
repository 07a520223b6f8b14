"""The comparison API of before one settings object (7ce4959), kept for scripts (one release, with a warning).

:class:`RunOptions` (the settings of every method of a comparison) and the keywords ``X=``,
``options=`` and ``approximations=`` of :func:`~sfapprox.compare` (``X=`` and ``options=`` of
:func:`~sfapprox.sweep.sweep`) each become today's spelling: a :class:`~sfapprox.FitSettings`
and ``compare``'s keywords ``count_indices``, ``protocol``, ``structure`` and ``callback``;
``approximations`` is filled from each row's fitted ``operator``.  Each use warns (a
``DeprecationWarning`` at the caller's line, naming the new spelling); an old spelling given
beside its new one is a :class:`~sfapprox.ParameterError`.  ``sfapprox.compare_matrix`` is in
:mod:`sfapprox.api`, its old home.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ._errors import ParameterError
from ._settings import _PARAMETER_NAMES, COUNT_INDICES, PROTOCOLS, FitSettings

__all__ = ["RunOptions", "REQUIRED", "take_old_keywords", "options_keywords", "fill_approximations"]

#: FitSettings' defaults, the one place they are declared (RunOptions repeats none of them).
_FIT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(FitSettings)}
#: An estimator parameter (a key of the old ``RunOptions.sf``) -> the FitSettings field that means it now.
_SETTING_OF = {param: setting for setting, param in _PARAMETER_NAMES.items()}
#: The old RunOptions fields that are FitSettings fields now (old name -> new name).
_OPTION_SETTINGS = {"random_state": "seed", "device": "device", "dtype": "dtype"}


def _deprecated(message: str, stacklevel: int) -> None:
    warnings.warn(f"{message} (the old spelling will be removed in a later release)", DeprecationWarning,
                  stacklevel=stacklevel + 1)


@dataclass
class RunOptions:
    """Deprecated: the settings of every method of a comparison, before :class:`~sfapprox.FitSettings`.

    Making one warns; ``compare(options=)`` and ``sweep(options=)`` turn it into
    today's keywords (:func:`options_keywords`).  Its defaults are today's:
    FitSettings' and :data:`~sfapprox._settings.COUNT_INDICES`.

    Attributes
    ----------
    random_state : int
        Now ``FitSettings.seed``.
    device : str
        Now ``FitSettings.device``.
    dtype : str or None
        Now ``FitSettings.dtype``.
    count_indices : bool
        Now ``compare(count_indices=)``.
    sf : dict
        Extra :class:`~sfapprox.ChordSF` parameters: ``max_iter``, ``time_limit``,
        ``threads`` and ``max_memory`` are FitSettings fields now; the others
        (``n_factors``, ``base``, ``ftol``, ...) are ``compare(structure=)``.
    callback : callable or None
        Now ``compare(callback=)``.
    protocol : {"default", "paper"}
        Now ``compare(protocol=)``.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True):
    ...     warnings.simplefilter("always")
    ...     options = RunOptions(random_state=3, sf={"max_iter": 50, "n_factors": 2})
    >>> kw = options_keywords(options, "compare")
    >>> kw["settings"].seed, kw["settings"].max_iter, kw["structure"]
    (3, 50, {'n_factors': 2})
    """

    random_state: int = _FIT_DEFAULTS["seed"]
    device: str = _FIT_DEFAULTS["device"]
    dtype: str | None = _FIT_DEFAULTS["dtype"]
    count_indices: bool = COUNT_INDICES
    sf: dict[str, Any] = field(default_factory=dict)
    callback: Callable[[dict], bool | None] | None = None
    protocol: str = PROTOCOLS[0]

    def __post_init__(self) -> None:
        # __post_init__ <- the generated __init__ <- the caller's line
        _deprecated("RunOptions is deprecated; use settings=FitSettings(seed=, device=, dtype=, max_iter=, "
                    "time_limit=, ...) and compare's keywords count_indices=, protocol=, structure=, callback=", 3)


def options_keywords(options: RunOptions, caller: str) -> dict[str, Any]:
    """``options`` as today's keywords of ``caller``: ``settings``, ``count_indices``, ``protocol``,
    ``callback`` and, when ``options.sf`` holds ChordSF parameters that are no FitSettings field,
    ``structure``.

    Parameters
    ----------
    options : RunOptions
    caller : str
        The function given it (``"compare"``), named in errors.

    Raises
    ------
    ParameterError
        For something else than a RunOptions, an ``sf`` entry that repeats one of its
        fields (``sf={"device": ...}``: a TypeError of the old code too), or an invalid value.
    """
    if not isinstance(options, RunOptions):
        raise ParameterError(f"{caller}: options= takes a RunOptions (deprecated; use settings=FitSettings(...)), "
                             f"got {type(options).__name__}")
    sf = dict(options.sf or {})
    changes = {new: getattr(options, old) for old, new in _OPTION_SETTINGS.items()}
    repeated = [p for p in sf if p in _OPTION_SETTINGS or p == "callback"]
    if repeated:
        raise ParameterError(f"{caller}: options.sf sets {', '.join(repeated)}, which RunOptions has a field for; "
                             f"give it once (now: settings=FitSettings(...), callback=)")
    for param in [p for p in sf if p in _SETTING_OF]:
        changes[_SETTING_OF[param]] = sf.pop(param)
    out: dict[str, Any] = {"settings": FitSettings(**changes), "count_indices": options.count_indices,
                           "protocol": options.protocol, "callback": options.callback}
    if sf:
        out["structure"] = sf
    return out


class _Required:
    """The default of a parameter that must be given but may come under its old name (``compare(X=...)``)."""

    def __repr__(self) -> str:
        return "<required>"


# Any: the default of parameters of every type (a checker read ``budgets: str | ... = REQUIRED`` as a wrong
# default); a caller never passes it, and the signature still shows the parameter as one to give
REQUIRED: Any = _Required()


def take_old_keywords(caller: str, matrix: Any, changes: dict[str, Any], given: Mapping[str, tuple[Any, Any]], *,
                      structure: bool = True, approximations: bool = True
                      ) -> tuple[Any, dict[str, Any], MutableMapping[str, Any] | None]:
    """Take the old keywords ``X``, ``options`` (and ``approximations``) out of ``caller``'s ``**changes``.

    Called first thing by ``caller`` (:func:`~sfapprox.compare`, :func:`~sfapprox.sweep.sweep`), so that
    the warnings point at the line that called it.

    Parameters
    ----------
    caller : str
        ``"compare"`` or ``"sweep"``.
    matrix : Any
        Its ``matrix`` argument (:data:`REQUIRED` when not given).
    changes : dict
        Its ``**setting_changes``; the old keywords are removed from it.
    given : mapping
        Today's keywords that ``options=`` stands for, as given: name -> (value, default).
    structure : bool, default=True
        Whether ``caller`` takes ``structure=`` (a sweep fixes no SF structure).
    approximations : bool, default=True
        Whether ``caller`` took ``approximations=``.

    Returns
    -------
    matrix : Any
    replaced : dict
        The keywords that replace ``given``'s (empty without ``options=``).
    approximations : mutable mapping or None
        The dict to fill with each row's dense approximation (:func:`fill_approximations`).

    Raises
    ------
    ParameterError
        An old keyword beside its new spelling, or a value of the wrong kind.
    TypeError
        No matrix under either name.
    """
    if "X" in changes:
        X = changes.pop("X")
        if matrix is not REQUIRED:
            raise ParameterError(f"{caller}: X= is the old name of matrix=; give only matrix=")
        _deprecated(f"{caller}(X=) is deprecated; use matrix= (or pass the matrix first)", 3)
        matrix = X
    if matrix is REQUIRED:
        raise TypeError(f"{caller}() missing 1 required positional argument: 'matrix'")
    kept = None
    if approximations and "approximations" in changes:
        kept = changes.pop("approximations")
        _deprecated(f"{caller}(approximations=) is deprecated; every row carries its fitted operator: "
                    "c.result(name).operator.to_dense()", 3)
        if kept is not None and not isinstance(kept, MutableMapping):
            raise ParameterError(f"{caller}: approximations= takes a dict to fill, got {type(kept).__name__}")
    replaced: dict[str, Any] = {}
    if "options" in changes:
        options = changes.pop("options")
        _deprecated(f"{caller}(options=) is deprecated; use settings=FitSettings(seed=, device=, dtype=, max_iter=, "
                    f"time_limit=, ...) and the keywords count_indices=, protocol=, "
                    f"{'structure=, ' if structure else ''}callback=", 3)
        if options is not None:
            both = [name for name, (value, default) in given.items() if not (value is default or value == default)]
            both += list(changes)
            if both:
                spelled = ", ".join(f"{name}=" for name in given)
                raise ParameterError(f"{caller}: options= (a RunOptions) is the old spelling of {spelled} and the "
                                     f"FitSettings keywords; give one or the other (got options= with "
                                     f"{', '.join(f'{name}=' for name in both)})")
            replaced = options_keywords(options, caller)
            if "structure" in replaced and not structure:
                raise ParameterError(f"{caller}: options.sf holds {', '.join(replaced['structure'])}, an SF structure "
                                     f"fixed by hand, which {caller} takes no more; give only FitSettings fields "
                                     "there, or use compare(structure=) at each budget")
    return matrix, replaced, kept


def fill_approximations(approximations: MutableMapping[str, Any] | None, comparison: Any) -> None:
    """Fill ``approximations`` (the old ``compare(approximations=)``) with each scored row's dense approximation.

    Parameters
    ----------
    approximations : mutable mapping or None
        None: nothing to do.
    comparison : Comparison
        Its rows with an operator and an error get ``approximations[row.method] = row.operator.to_dense()``.
    """
    if approximations is None:
        return
    for row in comparison.results:
        if row.operator is not None and row.fro_error is not None:
            approximations[row.method] = row.operator.to_dense()
