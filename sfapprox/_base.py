"""The method contract every approximation implements, and the registry of methods.

**Contract** (checked over every registered method by ``tests/test_common.py``,
as scikit-learn's common tests do).  An approximation is a class whose
constructor only stores its keyword parameters, and whose
``fit(X, *, check_input=True)`` returns ``self`` with

* ``operator_``: the surrogate as a :class:`scipy.sparse.linalg.LinearOperator`
  with ``to_dense()`` and ``n_stored``;
* ``n_stored_``: the stored numbers (never above the budget it was given);
* ``params_``: what was fitted (rank, structure, ...), plain JSON values;
* ``seconds_``: the fit's wall time;
* ``stop_reason_``: why it stopped (``"converged"``, ``"exact"``,
  ``"max_iter"``, ``"time_limit"``, ``"interrupted"``, ...).

``check_input=False`` skips validating ``X`` for callers that already did
(:func:`sfapprox.compare` validates once for all methods).  :class:`Approximation`
gives every method scikit-learn's ``get_params`` / ``set_params`` / ``repr``
and the shared ``to_dense`` / ``to_operator``.

**Registry.**  Each method module declares its method once, at import, with
:func:`register` (name, one-line summary, the stored-number formula, the
factory that builds the estimator for an ``N x N`` matrix at a budget — the
budget's inverse — and the smallest budget at which it applies).  The
modules are found by walking :data:`METHOD_PACKAGES`, so a new method is one
new file there: ``--methods`` help, ``compare``, ``sweep``, ``batch``,
``info`` and factor saving all derive from :func:`methods`.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import pkgutil
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
from scipy.sparse import issparse
from scipy.sparse.linalg import LinearOperator

from ._errors import NotFittedError, ParameterError, ResourceError, parameter
from ._params import MEMORY_LIMIT, check_params, split_items
from ._settings import COUNT_INDICES, PROTOCOLS, FitSettings
from ._validation import LIBRARY_WORKING_SET, check_memory, check_square_matrix, format_bytes, memory_limit
from .sources import BLOCK_SHARE, MatrixLike, MatrixSource, as_source, columns_within, passes_within

__all__ = [
    "Approximation",
    "RunContext",
    "MethodSpec",
    "register",
    "methods",
    "get_method",
    "parse_methods",
    "run_order",
    "METHOD_PACKAGES",
]

#: Packages (or modules) whose public modules (or the ``METHOD_MODULES`` a package lists) declare methods
#: with :func:`register`.
METHOD_PACKAGES = ("sfapprox.sf", "sfapprox.baselines", "sfapprox.hybrid")


# =============================================================================== the contract
class Approximation:
    """Base of every approximation method: parameters, validation, the shared results.

    Subclasses list their keyword parameters in ``__init__`` (which only
    stores them), declare ``_parameter_constraints`` and implement ``fit``;
    :meth:`_validate` checks both the parameters and ``X`` once.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {}
    #: The registry name of the method this estimator is (``"tsvd"``, ...).
    _method: ClassVar[str] = ""
    #: The fit works from a :class:`~sfapprox.sources.MatrixSource`'s columns (never forming it); other
    #: methods given a source form it first, within their ``max_memory``.
    _accepts_sources: ClassVar[bool] = False

    # The contract's fitted attributes (module docstring), declared for type checkers only: annotations
    # without a value create no class attribute, so before ``fit`` they still reach ``__getattr__``.
    operator_: Any
    n_stored_: int
    params_: dict[str, Any]
    seconds_: float
    stop_reason_: str
    # The matrix's name, set by a comparison or fit_matrix before ``fit`` for what the fit says ("fitting SF to
    # X"); read through ``__dict__`` with a default, so an estimator fitted alone goes without it.
    _matrix_name: str

    @property
    def _max_memory_bytes(self) -> int | None:
        """The estimator's ``max_memory`` in bytes (None: none given).  The parameter stays as it was
        passed (``"4G"``: ``get_params`` returns it, as scikit-learn does); the fit reads this."""
        return MEMORY_LIMIT.to_bytes(getattr(self, "max_memory", None))

    @property
    def method_name(self) -> str:
        """The method's registry name (what ``--methods`` and result files call it)."""
        return self._method or type(self).__name__.lower()

    # ------------------------------------------------------------------ parameters
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters and their current values (scikit-learn's API).

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn's API; the parameters hold no estimators, so it changes nothing.

        Returns
        -------
        dict of str to Any
            Each constructor parameter's name and value, as given (``max_memory`` as passed).

        Examples
        --------
        >>> from sfapprox.baselines.tsvd import TruncatedSVD
        >>> TruncatedSVD(n_components=3).get_params()["n_components"]
        3
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def _take_renamed(self, given: dict[str, Any], renamed: dict[str, str]) -> None:
        """Old names of constructor parameters, kept for scripts (``TruncatedSVD(rank=5)``): each sets its
        new name, with a DeprecationWarning at the caller's line; a name neither old nor new is the
        TypeError Python gives, and an old name beside its new one a ParameterError."""
        for old, value in given.items():
            if old not in renamed:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument {old!r}")
            new = renamed[old]
            signature = inspect.signature(type(self).__init__)
            if not _same(getattr(self, new), signature.parameters[new].default):
                raise ParameterError(f"{type(self).__name__}: {old}= is the old name of {new}=; give only {new}=")
            warnings.warn(f"{type(self).__name__}({old}=) is deprecated and will be removed in a later release; "
                          f"use {new}=", DeprecationWarning, stacklevel=3)
            setattr(self, new, value)

    def set_params(self, **params: Any) -> "Approximation":
        """Change parameters (checked when ``fit`` runs); unknown names are an error.

        Parameters
        ----------
        **params
            Constructor parameters and their new values.

        Returns
        -------
        Approximation
            ``self``, for chaining.

        Raises
        ------
        ParameterError
            For a name that is not a constructor parameter (the value is checked by ``fit``).
        """
        self.check_param_names(params)
        for name, value in params.items():
            setattr(self, name, value)
        return self

    @classmethod
    def check_param_names(cls, params: Any, where: str = "") -> None:
        """Refuse names in ``params`` (a mapping) that are not this class's parameters, listing them.

        Parameters
        ----------
        params : mapping
            Parameters for the class (``sf_params=``, a comparison's ``structure=``).
        where : str, default=""
            Where they were given, for the message ("sf_params").

        Raises
        ------
        ParameterError
            For an unknown name (not a ``TypeError`` from the constructor, at fit time).
        """
        known = cls._param_names()
        for name in params:
            if name not in known:
                given = f" (in {where})" if where else ""
                raise ParameterError(
                    f"{cls.__name__} has no parameter {name!r}{given}; its parameters are {', '.join(known)}"
                )

    def __repr__(self) -> str:
        # Like scikit-learn: only the parameters that differ from their defaults.
        sig = inspect.signature(type(self).__init__)
        shown = []
        for name in self._param_names():
            default = sig.parameters[name].default
            value = getattr(self, name, default)
            if not _same(value, default):
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    # ------------------------------------------------------------------ fitting
    #: The fits of other methods a comparison handed over for this fit (see :meth:`_handed_over`).
    _reusing: dict[str, Any] = {}

    def _handed_over(self) -> dict[str, Any]:
        """The fits of the same matrix a comparison handed over (``est._reuse``: its rows named in the
        class's ``REUSES``), taken for this fit only: a later ``fit`` of another matrix must not
        reuse them (a hybrid refitted to a new matrix kept the old one's ends and reported their errors)."""
        return self.__dict__.pop("_reuse", None) or {}

    def _validate(self, X, check_input: bool = True):
        """Check the parameters, and ``X`` unless the caller already did; returns ``X``.

        A :class:`~sfapprox.sources.MatrixSource` (or a ``LinearOperator``, read
        by its products) is returned as it is to a method that works from
        columns, and formed (within ``max_memory``) for the others.
        """
        check_params(self, self._parameter_constraints)
        if isinstance(X, LinearOperator):  # known by its products only: its columns, as a source's
            X = as_source(X)
        if isinstance(X, MatrixSource):
            return X if self._accepts_sources else self._formed(X)
        # within the estimator's max_memory: a GPU tensor's copy in host memory was checked against the default
        return check_square_matrix(X, source="X", max_memory=self._max_memory_bytes) if check_input else X

    def _formed(self, source: MatrixSource):
        """``source`` formed for a method that needs the matrix in memory (within its ``max_memory``)."""
        try:
            return source.to_dense(self._max_memory_bytes)
        except ResourceError as exc:
            able = ", ".join(name for name, spec in methods().items() if "columns" in spec.access)
            raise ResourceError(f"{exc}; {self.method_name} needs the matrix in memory, while {able} work from "
                                f"its columns (compare's {parameter('methods')})") from None

    def _from_columns(self, source: Any, stored: int) -> Any:
        """The source a fit from ``source``'s column blocks keeping ``stored`` numbers reads: refused
        before any pass where what it keeps (:attr:`MethodSpec.columns_memory`) and its passes' blocks
        are over the limit (:func:`check_columns_memory`), as a comparison refuses its row; else
        ``source``, or a copy of it whose passes are sized for that limit
        (:func:`~sfapprox.sources.passes_within`: the source given is never changed).  The limit is
        the estimator's ``max_memory``, else the source's own (:attr:`MatrixSource.max_memory`;
        during a comparison, the comparison's), else the default (80% of RAM).  ``source`` not a
        :class:`~sfapprox.sources.MatrixSource` (a matrix in memory, which ``max_memory`` does not
        limit here): ``source`` itself."""
        if not isinstance(source, MatrixSource):
            return source
        own = self._max_memory_bytes
        # a source made from a matrix held in memory has the rest of the limit as its own
        limit = own if own is not None else (None if source.max_memory is None
                                             else source.max_memory + source.held_bytes)
        check_columns_memory(self.method_name, source, stored, limit, subject=f"{self.method_name}'s",
                             counted="keeping", advice="keep fewer numbers (a lower budget or rank)")
        return passes_within(source, own)

    def _within_limit(self, X: Any) -> Any:
        """What a fit of ``X`` reads within the memory limit: ``X`` itself, or, a matrix in memory whose
        in-memory fit is over the limit (:func:`method_need`), its column blocks, as a comparison decides
        (:func:`in_memory_or_columns`; a method that needs it in memory is refused there).  The limit is
        the estimator's ``max_memory``, else the default (80% of RAM).  A source, or a method that
        declares no working memory, is returned as it is (:meth:`_from_columns` checks a fit from
        columns)."""
        spec = get_method(self.method_name)
        if isinstance(X, MatrixSource) or spec.working_memory is None:
            return X
        return in_memory_or_columns(self.method_name, spec, X, self._max_memory_bytes)

    def fit(self, X: MatrixLike, *, check_input: bool = True) -> Self:  # pragma: no cover - abstract
        raise NotImplementedError

    if not TYPE_CHECKING:  # hidden from type checkers: a ``__getattr__`` typed ``-> Any`` made every
        # attribute of every estimator pass, a misspelt one too (``sf.rel_eror_``)
        def __getattr__(self, name: str) -> Any:
            # Only for names not found: a fitted attribute (``operator_``, ``U_``) asked for before fit.
            fitted = "operator_" in self.__dict__
            if name.endswith("_") and not name.startswith("_") and not fitted:
                raise NotFittedError(f"this {type(self).__name__} is not fitted yet (no {name}); call fit(X) first")
            if fitted and name in ("fro_error_", "rel_error_"):
                # a fitted estimator told "not fitted yet": only the methods whose fit scores its result (SF, the
                # hybrids, Monarch, RPCA in memory, top-s from columns) keep their error from the fit
                raise AttributeError(f"{type(self).__name__} keeps no {name} (its fit does not score it): "
                                     f"frobenius_error(X) gives the absolute and relative errors")
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------ using the fit
    def frobenius_error(self, X: MatrixLike, fro_norm: float | None = None) -> tuple[float, float | None]:
        """The fitted surrogate's error against ``X``, absolute ``||X - A||_F`` and relative, by the one
        definition every method's row uses (:func:`~sfapprox.metrics.operator_error`; a
        :class:`~sfapprox.sources.MatrixSource` by an exact pass over its columns).

        Parameters
        ----------
        X : numpy.ndarray, scipy sparse matrix, MatrixSource or LinearOperator, shape (N, N)
            The matrix (usually the one fitted).
        fro_norm : float, optional
            ``||X||_F`` when already known.

        Returns
        -------
        (float, float or None)
            The relative error is None for the zero matrix.

        Examples
        --------
        >>> from sfapprox import TruncatedSVD
        >>> X = np.diag([3.0, 4.0, 0.0])
        >>> TruncatedSVD(n_components=1).fit(X).frobenius_error(X)
        (3.0, 0.6)
        """
        from .metrics import operator_error

        if isinstance(X, LinearOperator):  # known by its products: its columns, as a source's
            X = as_source(X)
        if isinstance(X, MatrixSource):
            from .estimate import estimate_errors

            scored = estimate_errors(X, {"a": self.operator_}, fro_norm=fro_norm)["a"]
            return scored.fro_error, scored.rel_error
        return operator_error(check_square_matrix(X, source="X", max_memory=self._max_memory_bytes), self.operator_,
                              fro_norm)

    def to_dense(self) -> np.ndarray:
        """The fitted surrogate as a dense ``N x N`` array.

        Returns
        -------
        numpy.ndarray
            The fitted surrogate, of shape ``(N, N)``.
        """
        return self.operator_.to_dense()

    def to_operator(self):
        """The fitted surrogate as a LinearOperator (the same object as ``operator_``).

        Returns
        -------
        SurrogateOperator
            ``operator_`` (a :class:`~sfapprox.operators.SurrogateOperator`).
        """
        return self.operator_

    def to_scipy(self) -> list:
        """The fitted factors as ``scipy.sparse.csr_array`` matrices whose product is the surrogate.

        For SF (and the butterfly methods) the M Chord factors, ``W1 @ ... @ WM``,
        one stored entry per value; for a padded butterfly, factors of the padded order
        ``N'``, for Monarch two of inner order ``r N'``, the first cropped to ``N`` rows
        and the last to ``N`` columns.
        Methods whose surrogate is not a product of sparse factors (low rank, sums of
        parts) raise ParameterError: use ``operator_`` (or ``to_dense()``) instead.

        Returns
        -------
        list of scipy.sparse.csr_array
            ``[W1, ..., WM]`` (each ``N x N`` for Chord factors); ``W1 @ ... @ WM`` is the surrogate.

        Raises
        ------
        ParameterError
            For a surrogate that is not a product of sparse factors.

        Examples
        --------
        >>> import numpy as np
        >>> from sfapprox import ChordSF
        >>> W = ChordSF(max_iter=5, device="cpu").fit(np.eye(8)).to_scipy()
        >>> len(W), W[0].shape, sum(w.nnz for w in W)
        (3, (8, 8), 96)
        """
        export = getattr(self.operator_, "to_sparse_factors", None)
        if export is None:
            raise ParameterError(f"{type(self).__name__}'s surrogate ({type(self.operator_).__name__}) is not a "
                                 "product of sparse factors; use operator_ or to_dense()")
        return export()


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except (TypeError, ValueError):  # arrays and the like: shown whenever given
        return False


# =============================================================================== the registry
@dataclass(frozen=True)
class RunContext:
    """What a method's factory needs besides ``N`` and the budget.

    Attributes
    ----------
    settings : FitSettings
    count_indices : bool
        Charge each sparse entry for its position too (2 numbers).
    protocol : {"default", "paper"}
        ``"paper"``: the SF paper's Table 1 settings (SF's reference
        structure, TSVD at rank ``ceil(M^2 / 2)``).
    callback : callable or None
        Progress callback for iterative methods (a dict per iteration).
    structure : mapping
        An SF structure fixed by hand (``n_factors``, ``base``) and other
        extra ChordSF parameters, for the SF methods and the hybrids.
    fitted : mapping
        The estimators the methods run before this one in the same
        comparison fitted, by method name (what ``MethodSpec.reuses`` draws on).
    matrix_name : str
        What the matrix is called (a fit's messages name it: "fitting SF to X" named an array the user
        never saw).
    started : float or None
        The :func:`~sfapprox._timing.work_now` at which the method's turn began (:func:`~sfapprox.comparison.run_method`
        sets it): a factory that works before its fit (SF times its structure) charges that work, and the
        checks before it, to the time limit from there, once-per-process work apart.  None: from the factory's
        own start.
    """

    settings: FitSettings = field(default_factory=FitSettings)
    count_indices: bool = COUNT_INDICES
    protocol: str = PROTOCOLS[0]
    callback: Callable[[dict], bool | None] | None = None
    structure: Mapping[str, Any] = field(default_factory=dict)
    fitted: Mapping[str, Any] = field(default_factory=dict)
    matrix_name: str = "X"
    started: float | None = None


@dataclass(frozen=True)
class MethodSpec:
    """One method's declaration.

    Attributes
    ----------
    name : str
        The name used in ``--methods``, tables and result files.
    summary : str
        One line for help texts.
    stores : str
        The stored-number formula, e.g. ``"r·(2N + 1)"``.
    make : callable
        ``make(n, budget, context) -> Approximation``: the estimator that fits
        the largest configuration of this method within ``budget`` numbers
        for an ``n x n`` matrix.  It raises :class:`~sfapprox.BudgetError`
        (or :class:`~sfapprox.NotApplicableError`) when none fits.
    min_budget : callable
        ``min_budget(n, context) -> int | None``: the smallest budget at which
        the method applies to an ``n x n`` matrix (None: at none).
    saves : bool
        Its ``operator_`` can be written to a factors file.
    order : int
        Position in listings (then by name).
    label : str
        What the method is, in a verdict ("low rank (TSVD)"); default: its name.
        Labels starting with "SF" mark the Chord family.
    access : tuple of str
        What the method needs of the matrix: ``("dense",)`` (the matrix in
        memory, dense or sparse) or also ``"columns"`` (it works from a
        :class:`~sfapprox.sources.MatrixSource`'s column blocks, so it runs on
        matrices too big to form).
    reuses : tuple of str
        Methods whose fits, when they run in the same comparison, this one
        starts from (the hybrids' grid ends: ``sf`` and ``tsvd``); a
        comparison runs them first and hands their estimators over in
        ``RunContext.fitted``.
    iterative : bool
        The fit improves until its time limit or its tolerances (SF, RPCA,
        NMF, the hybrids).  False: it finishes in closed form, usually in a
        small part of its time (TSVD, sparse, Monarch, butterfly-hier); a
        comparison runs those first, so that the time they leave goes to the
        iterative methods.
    working_memory : callable or None
        ``working_memory(n) -> bytes``: the peak memory its fit allocates for an
        ``n x n`` matrix (measured), which :func:`sfapprox.compare` checks against
        the memory limit before the fit.  None: the method checks its own (SF,
        the hybrids, RPCA, monarch+lr) or needs little.
    columns_memory : callable or None
        ``columns_memory(n, budget) -> bytes``: what its fit from column blocks
        keeps beside the pass's blocks (sketches, factors, the entries kept;
        measured), which :func:`sfapprox.compare` checks against the half of
        the memory limit that the passes' blocks leave, before a fit from
        columns (:func:`sfapprox.comparison.columns_need`).  None: the method
        checks its own (SF) or does not work from columns.
    columns_kept : callable or None
        ``columns_kept(n, nnz) -> numbers``: the most numbers its fit from the
        columns of a matrix held sparse, of ``nnz`` stored entries, keeps
        whatever the budget (top-s: every non-zero in CSR, ``2·nnz + N + 1``);
        ``columns_memory`` is charged for no more (:func:`kept_budget`).  None:
        what it keeps grows with the budget alone.
    needs : tuple of str
        Properties the matrix must have for the method to apply (among
        ``"symmetric"``, ``"psd"`` and ``"nonnegative"``: Nyström's and NMF's); ``info``
        says "never" where the matrix's facts rule it out (the fit refuses it
        with the reason).
    sparse_memory : callable or None
        ``sparse_memory(n, nnz) -> bytes``: the peak memory its fit allocates
        for an ``n x n`` scipy sparse matrix of ``nnz`` stored entries, X
        included (measured), where the fit works on the entries and never
        forms the matrix (top-s: its selection).  None: a sparse matrix costs
        what ``working_memory`` says (the fit forms it).
    operators : tuple of str
        The operator kinds its fits are (:func:`sfapprox.operators.operator_kinds`, a factors file's
        ``operator`` attribute): a file that names this method and holds another kind was edited, and
        :func:`~sfapprox.load_factors` refuses it.  Empty: any kind.
    check_first : callable or None
        ``check_first(X, budget, context)``: raises what the fit of the matrix ``X`` (an array, a
        scipy sparse matrix or a source) would raise on its limits, before ``make`` does any work of
        its own (SF's factory times its structure, compiling its kernels first: seconds before a
        memory refusal).  None: ``make`` does no such work.
    """

    name: str
    summary: str
    stores: str
    make: Callable[[int, int, RunContext], Approximation]
    min_budget: Callable[[int, RunContext], int | None]
    saves: bool = True
    order: int = 100
    label: str = ""
    iterative: bool = True
    reuses: tuple[str, ...] = ()
    access: tuple[str, ...] = ("dense",)
    working_memory: Callable[[int], int] | None = None
    columns_memory: Callable[[int, int], int] | None = None
    columns_kept: Callable[[int, int], int] | None = None
    sparse_memory: Callable[[int, int], int] | None = None
    needs: tuple[str, ...] = ()
    operators: tuple[str, ...] = ()
    check_first: Callable[[Any, int, RunContext], None] | None = None


_REGISTRY: dict[str, MethodSpec] = {}
_DISCOVERED = False


def register(spec: MethodSpec) -> MethodSpec:
    """Declare a method (called once, at import of the module that defines it)."""
    known = _REGISTRY.get(spec.name)
    if known is not None and known.make.__module__ != spec.make.__module__:
        raise RuntimeError(f"method {spec.name!r} is declared twice ({known.make.__module__}, {spec.make.__module__})")
    _REGISTRY[spec.name] = spec
    return spec


def _discover() -> None:
    """Import every public module of :data:`METHOD_PACKAGES` (each registers its methods), or those a
    package names in its ``METHOD_MODULES`` (the SF package: its other modules load torch)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    for name in METHOD_PACKAGES:
        package = importlib.import_module(name)
        modules = getattr(package, "METHOD_MODULES", None)
        if modules is None:
            modules = [info.name for info in pkgutil.iter_modules(getattr(package, "__path__", []))
                       if not info.name.startswith("_")]
        for module in modules:
            importlib.import_module(f"{name}.{module}")
    _DISCOVERED = True


def methods() -> dict[str, MethodSpec]:
    """Every registered method, in listing order.

    Examples
    --------
    >>> {"sf", "tsvd", "nmf"} <= set(methods())
    True
    """
    _discover()
    return dict(sorted(_REGISTRY.items(), key=lambda item: (item[1].order, item[0])))


def get_method(name: str) -> MethodSpec:
    """The method called ``name``; :class:`~sfapprox.ParameterError` listing the choices otherwise."""
    known = methods()
    if name not in known:
        raise ParameterError(f"unknown method {name!r}; choose from {', '.join(known)}")
    return known[name]


#: The name that stands for every registered method in a list of methods (``--methods all``).
ALL_METHODS = "all"


def parse_methods(spec: str | Iterable[str]) -> list[str]:
    """``"sf, tsvd"`` or ``["sf", "tsvd"]`` → validated names, in order, without repeats.

    ``"all"`` (:data:`ALL_METHODS`) stands for every registered method, in listing order: the
    README's "every method" was otherwise a list of fifteen names to type, and ``--methods all``
    was refused as an unknown method.

    Raises
    ------
    ParameterError
        For an empty list, an unknown name (all unknown names are listed), or a ``spec`` that is neither a
        string nor a list of names (None, a number).

    Examples
    --------
    >>> parse_methods("sf, tsvd,sf")
    ['sf', 'tsvd']
    >>> parse_methods("all") == list(methods())
    True
    """
    if not isinstance(spec, (str, Iterable)):  # None was list(None)'s raw TypeError
        raise ParameterError(f"methods must be a name, comma-separated names or a list of names, got {spec!r}; "
                             f"choose from {', '.join(methods())}")
    items = split_items(spec, "methods") if isinstance(spec, str) else list(spec)
    given = [str(m).strip() for m in items if str(m).strip()]
    names = list(dict.fromkeys(n for m in given for n in (methods() if m == ALL_METHODS else [m])))
    if not names:
        raise ParameterError(f"no method given (got {spec!r}); choose from {', '.join(methods())}")
    unknown = [m for m in names if m not in methods()]
    if unknown:
        # the guess is case-blind: 'TSVD' (as the CLI takes it, lowered) guessed nothing
        guesses = [f"{m!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(m.lower(), methods(), n=1))
                   else repr(m) for m in unknown]
        raise ParameterError(f"unknown method(s) {', '.join(guesses)}; choose from {', '.join(methods())} "
                             f"or {ALL_METHODS!r} for every one ('sfapprox methods' says what each one stores)")
    return names


def method_need(spec, n: int, nnz: int | None = None) -> int:
    """The bytes checked before ``spec``'s fit of an ``n x n`` matrix in memory (by a comparison, and by
    an estimator alone: :meth:`Approximation._within_limit`): its measured
    :attr:`~sfapprox._base.MethodSpec.working_memory` (X included; for a scipy sparse matrix of ``nnz``
    entries, its :attr:`~sfapprox._base.MethodSpec.sparse_memory` where it has one) and the libraries'
    own working set (:data:`~sfapprox._validation.LIBRARY_WORKING_SET`: BLAS and LAPACK buffers, the
    allocator's slack), which every fit's estimate counts.

    Parameters
    ----------
    spec : MethodSpec
        A method with a ``working_memory``.
    n : int
        Order of the matrix.
    nnz : int or None, default=None
        Stored entries of a scipy sparse matrix; None: a dense one.

    Returns
    -------
    int
    """
    if nnz is not None and spec.sparse_memory is not None:
        return spec.sparse_memory(n, nnz) + LIBRARY_WORKING_SET
    return spec.working_memory(n) + LIBRARY_WORKING_SET


def in_memory_or_columns(name: str, spec, X, max_memory: int | None):
    """What ``name`` fits on: ``X`` itself, or, when its in-memory fit (:func:`method_need`) is over the
    memory limit and it works from columns, ``X``'s column blocks (in bounded memory; a comparison's row
    then says ``path=columns``).

    Parameters
    ----------
    name : str
        The method's name (for the message).
    spec : MethodSpec
        The method, with a ``working_memory``.
    X : numpy.ndarray or scipy sparse matrix
        The matrix, in memory.
    max_memory : int or None
        Memory limit in bytes; None: the default limit (80% of RAM).

    Returns
    -------
    numpy.ndarray, scipy sparse matrix or MatrixSource

    Raises
    ------
    ResourceError
        When the in-memory fit is over the limit and the method needs the matrix in memory.
    """
    n = X.shape[0]
    nnz = int(X.nnz) if issparse(X) else None
    what = f"{name}: its fit of a {n:,} x {n:,} {'sparse ' if nnz is not None else ''}matrix"
    try:
        check_memory(method_need(spec, n, nnz), what=what, limit=max_memory)
    except ResourceError:
        if "columns" not in spec.access:
            raise
        return columns_within(X, max_memory)  # X stays held: the passes get what it leaves
    return X


def check_columns_memory(name: str, source: MatrixSource, budget: int, max_memory: int | None, *,
                         subject: str = "its", counted: str = "at a budget of",
                         advice: str = "lower the budget") -> None:
    """Refuse ``name``'s fit from ``source``'s column blocks when what it keeps
    (:attr:`~sfapprox._base.MethodSpec.columns_memory`: sketches, factors, entries; measured) and a
    matrix held beside it (:attr:`~sfapprox.sources.MatrixSource.held_bytes`) do not fit in what the
    passes' blocks leave of the limit: they take :data:`~sfapprox.sources.BLOCK_SHARE` (half) of it
    (:meth:`~sfapprox.sources.MatrixSource.block_width`), so the check is :func:`columns_need`.

    Parameters
    ----------
    name : str
        A method name; one without ``columns_memory`` (SF checks its own) passes.
    source : MatrixSource
        The matrix known by its columns.
    budget : int
        Stored numbers allowed.
    max_memory : int or None
        Memory limit in bytes; None: the default limit (80% of RAM).
    subject : str, default="its"
        Whose fit the message names ("its": a comparison's row names the method; an estimator's
        own check names it: "rpca's").
    counted : str, default="at a budget of"
        What ``budget`` is, in the message (an estimator's own check: "keeping", its stored count).  The
        count said is the one the bytes are of (:func:`kept_budget`): "keeping" says that one alone, any
        other says the budget and what is kept of it where they differ.
    advice : str, default="lower the budget"
        What to do besides raising the limit.

    Raises
    ------
    ResourceError
        Saying what the fit needs and the limit.
    """
    spec = get_method(name)
    if spec.columns_memory is None:
        return
    kept = kept_memory(spec, source, budget)
    check_memory(columns_need(spec, source, budget, max_memory), limit=max_memory, held=source.held_bytes,
                 advice=advice,
                 what=f"{subject} fit of {source.name} ({source.n:,} x {source.n:,}) from column blocks "
                      f"{_counted_numbers(spec, source, budget, counted)} ({format_bytes(kept)} kept, beside its "
                      f"passes' blocks, half the limit: it runs from a limit of "
                      f"{format_bytes(least_columns_limit(spec, source, budget), up=True)})")


def _counted_numbers(spec, source: MatrixSource, budget: int, counted: str) -> str:
    """The numbers :func:`check_columns_memory` says the fit keeps: the count its bytes are of
    (:func:`kept_budget`), the budget beside it where they differ (``counted`` not "keeping").

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from sfapprox.sources import SparseSource
    >>> eye = SparseSource(sp.eye(100))
    >>> _counted_numbers(get_method("sparse"), eye, 10_000, "keeping")
    "keeping 301 numbers (the most the matrix's 100 non-zeros take)"
    >>> _counted_numbers(get_method("sparse"), eye, 10_000, "at a budget of")
    "at a budget of 10,000 numbers, keeping 301 (the most the matrix's 100 non-zeros take)"
    """
    kept = kept_budget(spec, source, budget)
    if kept == budget:
        return f"{counted} {budget:,} numbers"
    # top-s of a sparse matrix keeps at most its entries: "keeping 10,000 numbers (3.5 KiB kept)" was said of
    # the 301 numbers those bytes are of
    why = f"the most the matrix's {int(source.sparse_matrix.nnz):,} non-zeros take"
    if counted == "keeping":
        return f"keeping {kept:,} numbers ({why})"
    return f"{counted} {budget:,} numbers, keeping {kept:,} ({why})"


def lacking(spec, facts: Mapping[str, Any]) -> list[str]:
    """The properties ``spec`` needs (:attr:`MethodSpec.needs`) that ``facts`` (a matrix's summary: its
    ``symmetric``, ``psd``, ``nonnegative``) say the matrix lacks; one not known (None) is not lacking.
    A method that lacks one is refused whatever the budget and the memory.

    Examples
    --------
    >>> lacking(get_method("nystrom"), {"symmetric": True, "psd": False}), lacking(get_method("rsvd"), {})
    (['psd'], [])
    """
    return [fact for fact in spec.needs if facts.get(fact) is False]


def known_facts(source: MatrixSource) -> dict[str, bool | None]:
    """The properties a method may need (:attr:`MethodSpec.needs`), as ``source`` knows them without a pass:
    for :func:`lacking`, at no cost (``source.summary()`` also takes statistics of a sparse matrix's entries,
    O(nnz), for each method of a comparison)."""
    return {"symmetric": source.symmetric, "psd": source.psd, "nonnegative": source.nonnegative}


def kept_budget(spec, source: MatrixSource, budget: int) -> int:
    """The numbers ``spec``'s fit from ``source``'s columns keeps at most at ``budget``: the budget, or
    less where the source holds the matrix sparse and the method keeps no more than its entries
    (:attr:`MethodSpec.columns_kept`: top-s of a graph of 10,000,000 non-zeros was charged for SF's
    budget of 420,000,000 numbers, 37.7 GiB, where all of it is 21,000,000 numbers).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from sfapprox.sources import SparseSource
    >>> kept_budget(get_method("sparse"), SparseSource(sp.eye(100)), 10_000)
    301
    """
    held = source.sparse_matrix
    if spec.columns_kept is None or held is None:
        return budget
    return min(budget, spec.columns_kept(source.n, int(held.nnz)))


def kept_memory(spec, source: MatrixSource, budget: int) -> int:
    """What ``spec``'s fit from ``source``'s columns keeps beside its passes' blocks at ``budget``, in bytes:
    :attr:`MethodSpec.columns_memory` of :func:`kept_budget`."""
    return spec.columns_memory(source.n, kept_budget(spec, source, budget))


def least_columns_limit(spec, source: MatrixSource, budget: int) -> int:
    """The smallest memory limit under which ``spec``'s fit from ``source``'s columns passes
    :func:`columns_need`'s check: what it keeps and the held matrix, with the blocks' share of the
    limit on top.  A refusal's "needs about X" grows with the limit given (the blocks take half of it),
    so raising the limit to X was refused again; this is the figure to raise it to.  ``spec``,
    ``source`` and ``budget`` are :func:`columns_need`'s; returns bytes.
    """
    held = source.held_bytes
    return math.ceil((kept_memory(spec, source, budget) + (1.0 - BLOCK_SHARE) * held) / (1.0 - BLOCK_SHARE))


def columns_need(spec, source: MatrixSource, budget: int, max_memory: int | None) -> int:
    """What ``spec``'s fit from ``source``'s columns is checked for: what it keeps
    (:attr:`~sfapprox._base.MethodSpec.columns_memory`) and the passes' blocks
    (:data:`~sfapprox.sources.BLOCK_SHARE` of what a matrix held beside them leaves of the limit, as
    :func:`~sfapprox.sources.columns_within` sizes them); the held matrix comes on top.

    Parameters
    ----------
    spec : MethodSpec
        A method with a ``columns_memory``.
    source : MatrixSource
        The matrix known by its columns.
    budget : int
        Stored numbers allowed.
    max_memory : int or None
        Memory limit in bytes; None: the default limit (80% of RAM).

    Returns
    -------
    int
    """
    limit = memory_limit(max_memory)
    return kept_memory(spec, source, budget) + int(BLOCK_SHARE * max(0, (limit or 0) - source.held_bytes))


def run_order(names: Sequence[str]) -> list[str]:
    """The order a comparison fits its methods in (its rows keep the order asked).

    Closed-form methods first, so that the time they leave of a shared limit
    goes to the iterative ones; then the iterative ones as asked, each after
    the methods whose fits it reuses (``MethodSpec.reuses``).

    Parameters
    ----------
    names : sequence of str
        Method names, each known to the registry.

    Returns
    -------
    list of str

    Examples
    --------
    >>> run_order(["sf+lr", "nmf", "tsvd", "sf"])
    ['tsvd', 'sf', 'sf+lr', 'nmf']
    """
    order = sorted(names, key=lambda m: get_method(m).iterative)
    placed: list[str] = []
    for name in order:
        if name not in placed:
            placed.extend(m for m in get_method(name).reuses if m in names and m not in placed)
            placed.append(name)
    # a reused method moved forward keeps its own place among its kind otherwise
    return [m for m in placed if not get_method(m).iterative] + [m for m in placed if get_method(m).iterative]
