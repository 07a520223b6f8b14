"""Run several methods on one matrix at one budget of stored numbers.

``compare`` never prints: it returns a :class:`~sfapprox.results.Comparison`
whose rows the CLI (or a notebook) renders.  Every method is scored by the
same :func:`~sfapprox.metrics.frobenius_error`, and every method reports its
stored-number count, which is never above the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._errors import BudgetError, NotApplicableError, ParameterError
from .budget import resolve_budget, sf_config_for_budget, sf_structure
from .chord import default_n_factors
from .metrics import frobenius_error
from .results import Comparison, MethodResult

__all__ = ["compare", "available_methods", "RunOptions", "run_method", "paper_tsvd_rank"]


@dataclass
class RunOptions:
    """Settings shared by every method of a comparison.

    Attributes
    ----------
    random_state : int
    device : str
        ``"auto"``, ``"cpu"`` or ``"cuda"``.
    dtype : str or None
    count_indices : bool
        Charge sparse entries for their positions (RPCA, sf+s).
    sf : dict
        Extra :class:`~sfapprox.sf.model.ChordSF` parameters (``max_iter``, ``time_limit``, ...).
    callback : callable or None
        Progress callback passed to iterative methods (SF).
    protocol : {"default", "paper"}
        ``"paper"`` reproduces the SF paper's Table 1 settings: SF with the
        reference structure and TSVD at rank ``ceil(M^2 / 2)``,
        ``M = ceil(log2 N)`` (which fits SF's budget).
    """

    random_state: int = 0
    device: str = "auto"
    dtype: str | None = None
    count_indices: bool = False
    sf: dict[str, Any] = field(default_factory=dict)
    callback: Callable[[dict], bool | None] | None = None
    protocol: str = "default"


def paper_tsvd_rank(n: int) -> int:
    """The paper's TSVD rank ``ceil(M^2 / 2)`` with ``M = ceil(log2 N)``."""
    m = default_n_factors(n)
    return -(-m * m // 2)


def _make_sf(support: str):
    """SF with ``support``, in the largest structure of that support that fits the budget.

    ``"sf"`` under the paper protocol keeps the reference structure (its count
    is the paper budget); a structure fixed in ``opts.sf`` (``n_factors`` or
    ``base``) is kept as given, and refused when it stores more than the budget.
    """

    def make(n: int, budget: int, opts: RunOptions):
        from .sf.model import ChordSF

        params = dict(opts.sf)
        params["support"] = support
        fixed = "n_factors" in params or "base" in params
        if fixed or (opts.protocol == "paper" and support == "chord"):
            config = sf_structure(n, support=support, base=params.get("base", 2),
                                  n_factors=params.get("n_factors"))
            if config.count > budget:
                raise BudgetError(f"SF with {config.n_factors} factors of {config.n_offsets} values per row "
                                  f"stores {config.count} numbers, over the budget {budget}")
        else:
            config = sf_config_for_budget(n, budget, support=support)
            params.update(n_factors=config.n_factors, base=config.base)
        return ChordSF(random_state=opts.random_state, device=opts.device, dtype=opts.dtype,
                       callback=opts.callback, **params)

    return make


def _make_tsvd(n: int, budget: int, opts: RunOptions):
    from .baselines.tsvd import TruncatedSVD

    if opts.protocol == "paper":
        return TruncatedSVD(rank=min(paper_tsvd_rank(n), n), random_state=opts.random_state)
    return TruncatedSVD(budget=budget, random_state=opts.random_state)


def _make_rpca(method: str):
    def make(n: int, budget: int, opts: RunOptions):
        from .baselines.rpca import RobustPCA

        return RobustPCA(
            budget=budget,
            method=method,
            count_indices=opts.count_indices,
            random_state=opts.random_state,
            device=opts.device,
            dtype=opts.dtype,
        )

    return make


def _make_nmf(n: int, budget: int, opts: RunOptions):
    from .baselines.nmf import NMF

    return NMF(budget=budget, random_state=opts.random_state, device=opts.device, dtype=opts.dtype)


def _make_hybrid(kind: str):
    def make(n: int, budget: int, opts: RunOptions):
        from .hybrid import ChordLowRank, ChordSparse

        params = dict(opts.sf)
        if opts.protocol == "paper":
            params.setdefault("base", 2)  # its plain-SF end is then the paper's reference structure, as "sf"
        common = dict(budget=budget, sf_params=params, random_state=opts.random_state, device=opts.device,
                      dtype=opts.dtype, callback=opts.callback)
        if kind == "sf+s":
            return ChordSparse(count_indices=opts.count_indices, **common)
        return ChordLowRank(**common)

    return make


#: The plain-SF methods, one per support (their rows carry the fit's structure and stop reason).
SF_METHODS: dict[str, tuple[str, str]] = {
    "sf": ("chord", "Chord sparse factorization (L-BFGS)"),
    "sf-symmetric": ("symmetric", "SF on the symmetric Chord support (offsets 0, ±b^k)"),
    "sf-butterfly": ("butterfly", "SF on the butterfly support (FAµST's; N a power of two)"),
}

_METHODS: dict[str, tuple[Callable, str]] = {
    **{name: (_make_sf(support), desc) for name, (support, desc) in SF_METHODS.items()},
    "tsvd": (_make_tsvd, "truncated SVD (best rank r)"),
    "rpca": (_make_rpca("godec"), "Robust PCA: low rank + sparse, GoDec at fixed rank/cardinality"),
    "rpca-pcp": (_make_rpca("pcp"), "Robust PCA: Principal Component Pursuit, cut to the budget"),
    "nmf": (_make_nmf, "non-negative matrix factorization (HALS)"),
    "sf+lr": (_make_hybrid("sf+lr"), "Chord factors + low rank, budget split chosen on a grid (ends: sf, tsvd)"),
    "sf+s": (_make_hybrid("sf+s"), "Chord factors + sparse entries at free positions, split chosen on a grid"),
}


def available_methods() -> dict[str, str]:
    """Method names accepted by :func:`compare`, with one-line descriptions."""
    return {name: desc for name, (_, desc) in _METHODS.items() if _importable(name)}


def _importable(name: str) -> bool:
    module = {"rpca": "rpca", "rpca-pcp": "rpca", "nmf": "nmf"}.get(name)
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(f"sfapprox.baselines.{module}") is not None


def run_method(
    name: str,
    X,
    budget: int,
    opts: RunOptions,
    fro_norm: float | None = None,
    keep: dict[str, Any] | None = None,
) -> MethodResult:
    """Fit one method at ``budget`` and score it; soft failures become statuses.

    ``NotApplicableError`` (e.g. NMF on negative data) and ``BudgetError``
    (e.g. a budget below the smallest full-support SF) give a row with status
    ``"not applicable"`` and the reason; ``KeyboardInterrupt`` propagates.
    When ``keep`` is a dict, the fitted estimator is stored in
    ``keep["estimator"]`` (the batch runner saves SF's factors from it).
    """
    if name not in _METHODS:
        raise ParameterError(f"unknown method {name!r}; choose from {', '.join(available_methods())}")
    make, _ = _METHODS[name]
    n = X.shape[0]
    start = time.perf_counter()
    try:
        est = make(n, budget, opts).fit(X)
    except (NotApplicableError, BudgetError) as exc:
        return MethodResult(name, "not applicable", reason=str(exc), seconds=time.perf_counter() - start)
    if keep is not None:
        keep["estimator"] = est
    if est.n_stored_ > budget:  # a broken promise is a bug, never a silent excess
        raise AssertionError(f"{name} stored {est.n_stored_} numbers over the budget {budget}")
    fro, rel = frobenius_error(X, est.to_dense(), fro_norm)
    params = dict(getattr(est, "params_", {}))
    status = "ok"
    if name in SF_METHODS:
        params.update(_sf_params(est))
    if getattr(est, "stop_reason_", None) == "interrupted":  # sf and the hybrids
        status = "interrupted"
    return MethodResult(
        method=name,
        status=status,
        nnz=int(est.n_stored_),
        fro_error=fro,
        rel_error=rel,
        seconds=float(getattr(est, "seconds_", time.perf_counter() - start)),
        params=params,
    )


def _sf_params(est) -> dict[str, Any]:
    return {
        "support": est.support,
        "n_factors": int(est.factors_.shape[0]),
        "offsets": est.offsets_.tolist(),
        "base": None if est.support == "butterfly" else est.base,  # its positions use no base
        "iterations": est.n_iter_,
        "evaluations": est.n_evals_,
        "stop_reason": est.stop_reason_,
        "init": est.init_,
        "device": est.device_,
        "dtype": est.dtype_,
    }


def compare(
    X,
    methods: Sequence[str] = ("sf", "tsvd"),
    *,
    budget: str | int | float | None = "sf",
    matrix_info: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    on_result: Callable[[MethodResult], None] | None = None,
    approximations: dict[str, np.ndarray] | None = None,
) -> Comparison:
    """Fit every method in ``methods`` to ``X`` at the same budget and score them.

    Parameters
    ----------
    X : ndarray or scipy sparse array
        Square matrix.
    methods : sequence of str
        Names from :func:`available_methods`.
    budget : "sf", int or float, default="sf"
        Stored-number budget: SF's own reference count, a count, or a fraction of ``N**2``.
    matrix_info : dict, optional
        Description of the matrix for the report (e.g. ``LoadedMatrix.summary()``).
    options : RunOptions, optional
    on_result : callable, optional
        Called with each :class:`MethodResult` as soon as it is ready.
    approximations : dict, optional
        When given, filled with each fitted method's dense N x N approximation,
        keyed by method name (for figures; costs N² numbers per method).

    Returns
    -------
    Comparison
        With ``status == "interrupted"`` on the row that a Ctrl-C cut short
        (the remaining methods are not run; rows already finished are kept,
        and an interrupted SF keeps its best factors).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((16, 16))
    >>> c = compare(X, ["tsvd"], budget=200)
    >>> c.results[0].nnz <= 200
    True
    """
    from ._validation import check_square_matrix

    X = check_square_matrix(X, source=(matrix_info or {}).get("name", "X"))
    opts = options or RunOptions()
    if opts.protocol not in ("default", "paper"):
        raise ParameterError(f"unknown protocol {opts.protocol!r}; choose default or paper")
    unknown = [m for m in methods if m not in _METHODS]
    if unknown:
        raise ParameterError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(available_methods())}")
    n = X.shape[0]
    resolved = resolve_budget(budget, n)
    fro_norm = float(np.linalg.norm(X.data if hasattr(X, "data") and hasattr(X, "tocsr") else X))
    info = {"name": "array", "n": n, "fro_norm": fro_norm}
    info.update(matrix_info or {})
    results: list[MethodResult] = []
    for name in methods:
        keep: dict[str, Any] | None = {} if approximations is not None else None
        start = time.perf_counter()
        try:
            result = run_method(name, X, resolved.value, opts, fro_norm, keep=keep)
        except KeyboardInterrupt:
            # SF catches Ctrl-C itself and returns its best factors; any other
            # method has nothing worth keeping, but the finished rows are.
            result = MethodResult(name, "interrupted", reason="stopped by Ctrl-C before it finished",
                                  seconds=time.perf_counter() - start)
        if keep and result.fro_error is not None:
            approximations[name] = keep["estimator"].to_dense()
        results.append(result)
        if on_result is not None:
            on_result(result)
        if result.status == "interrupted":
            break
    return Comparison(info, resolved.value, resolved.spec, results)
