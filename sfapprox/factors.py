"""Fitted surrogates in HDF5 files: :func:`save_factors` and :func:`load_factors`.

An SF fit (its factors) or a hybrid one (sf+lr, sf+s: the factors plus a
low-rank or sparse part) is written atomically with h5py and read back as
a fast operator.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import atomic_path
from ._errors import InputError
from .chord import SUPPORTS
from .formats import jsonable
from .linop import ChordOperator, HybridOperator
from .results import library_versions

__all__ = ["SavedFactors", "save_factors", "load_factors", "FACTORS_FORMAT"]

FACTORS_FORMAT = "sfapprox-chord-factors"
FACTORS_VERSION = 1
#: Files of hybrid fits (kind "sf+lr" / "sf+s") carry version 2: a version-1 reader
#: would see only their factors, so they say that they hold more.
HYBRID_VERSION = 2
#: Files of butterfly factors carry version 3: their ``values`` are not offset-based
#: (the ``support`` attribute says so), which no earlier reader knows.
BUTTERFLY_VERSION = 3


@dataclass
class SavedFactors:
    """An SF (or hybrid) fit read back from HDF5: the operator plus how it was made.

    ``matvec``/``rmatvec``/``matmat``/``to_dense`` delegate to
    :attr:`operator`, a scipy LinearOperator: a
    :class:`~sfapprox.linop.ChordOperator` for ``kind == "sf"`` (its
    ``support`` says which support protocol the factors have), a
    :class:`~sfapprox.linop.HybridOperator` (factors plus low-rank / sparse
    part) for ``"sf+lr"`` and ``"sf+s"``.
    """

    operator: ChordOperator | HybridOperator
    loss_history: np.ndarray
    fit: dict[str, Any]
    settings: dict[str, Any]
    source: dict[str, Any]
    versions: dict[str, str]
    kind: str = "sf"

    @property
    def n(self) -> int:
        return self.operator.shape[0]

    @property
    def n_stored(self) -> int:
        return self.operator.n_stored

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.operator.matvec(x)

    def rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self.operator.rmatvec(x)

    def matmat(self, B: np.ndarray) -> np.ndarray:
        return self.operator.matmat(B)

    def to_dense(self) -> np.ndarray:
        return self.operator.to_dense()

    def aslinearoperator(self) -> ChordOperator | HybridOperator:
        return self.operator


def save_factors(
    path: str | os.PathLike,
    operator: ChordOperator | HybridOperator,
    *,
    kind: str | None = None,
    loss_history: list[float] | np.ndarray = (),
    fit: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    force: bool = True,
) -> None:
    """Write an SF (or hybrid) fit to an HDF5 file, atomically.

    Layout: datasets ``values`` (M, N, K) and ``offsets`` (K,) and
    ``loss_history``; attributes ``format``, ``format_version``, ``n``,
    ``n_factors``, ``kind``, ``support`` and JSON strings ``fit``,
    ``settings``, ``source``, ``versions``.  ``support`` is the factors'
    support protocol (:data:`sfapprox.chord.SUPPORTS`): for ``"chord"`` and
    ``"symmetric"`` the ``offsets`` give the positions; for ``"butterfly"``
    ``values`` is (M, N, 2), ``values[m, i, 0]`` at column ``i`` and
    ``values[m, i, 1]`` at column ``i XOR 2^m``, ``offsets`` is empty and
    ``format_version`` is 3.  Files without ``support`` (written before it
    existed) are offset-based and read as ``"chord"``.  A :class:`~sfapprox.linop.HybridOperator`
    (``kind`` "sf+lr" or "sf+s", ``format_version`` 2) adds ``lr_U`` (N, r),
    ``lr_s`` (r,), ``lr_Vt`` (r, N), ``sparse_rows``, ``sparse_cols``,
    ``sparse_vals`` and the attribute ``count_indices``; its ``values`` has
    ``M = 0`` rows when it has no factors.  ``kind`` names the method (default:
    ``"sf"`` for a ChordOperator; for a HybridOperator ``"sf+s"`` when it has
    sparse entries, else ``"sf+lr"``).
    """
    import h5py

    hybrid = isinstance(operator, HybridOperator)
    chord = operator.chord if hybrid else operator
    n = operator.shape[0]
    with atomic_path(path, force=force) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FACTORS_FORMAT
            support = "chord" if chord is None else chord.support
            f.attrs["format_version"] = (
                BUTTERFLY_VERSION if support == "butterfly" else HYBRID_VERSION if hybrid else FACTORS_VERSION
            )
            f.attrs["kind"] = kind or _kind(operator)
            f.attrs["support"] = support
            f.attrs["n"] = n
            f.attrs["n_factors"] = 0 if chord is None else chord.n_factors
            values = np.zeros((0, n, 0)) if chord is None else chord.values
            # gzip needs chunks, which an empty dataset cannot have.
            f.create_dataset("values", data=values, compression="gzip" if values.size else None)
            f.create_dataset("offsets", data=np.zeros(0, np.int64) if chord is None else chord.offsets)
            f.create_dataset("loss_history", data=np.asarray(loss_history, dtype=np.float64))
            if hybrid:
                _write_corrections(f, operator)
            for key, value in (
                ("fit", fit or {}),
                ("settings", settings or {}),
                ("source", source or {}),
                ("versions", library_versions()),
            ):
                f.attrs[key] = json.dumps(jsonable(value))


def _kind(operator: ChordOperator | HybridOperator) -> str:
    if not isinstance(operator, HybridOperator):
        return "sf"
    return "sf+s" if operator.sparse.nnz else "sf+lr"


def _write_corrections(f, op: HybridOperator) -> None:
    f.attrs["count_indices"] = op.count_indices
    # False: the low-rank part is U V^T (NMF's W H, 2 N r numbers), lr_s holds ones.
    f.attrs["lr_singular_values"] = op.singular_values
    f.create_dataset("lr_U", data=op.U)
    f.create_dataset("lr_s", data=op.s)
    f.create_dataset("lr_Vt", data=op.Vt)
    coo = op.sparse.tocoo()
    f.create_dataset("sparse_rows", data=coo.row.astype(np.int64))
    f.create_dataset("sparse_cols", data=coo.col.astype(np.int64))
    f.create_dataset("sparse_vals", data=coo.data.astype(np.float64))


def _read_operator(f, path: Path) -> ChordOperator | HybridOperator:
    """The operator in an open factors file: plain SF factors, or their sum with the corrections."""
    import scipy.sparse as sp

    values, offsets = f["values"][()], f["offsets"][()]
    # Files written before the attribute existed hold offset-based (Chord) factors.
    support = str(f.attrs.get("support", "chord"))
    if support not in SUPPORTS:
        raise InputError(
            f"{path}: unknown factor support {support!r} (known: {', '.join(SUPPORTS)}); "
            "the file may come from a newer sfapprox"
        )

    def factors() -> ChordOperator:
        if support == "butterfly":
            return ChordOperator(values, support="butterfly")
        return ChordOperator(values, offsets, support=support)

    if "lr_U" not in f:  # version-1 files and plain SF fits
        return factors()
    n = int(f.attrs["n"])
    chord = factors() if values.shape[0] else None
    rows, cols, vals = (f[k][()] for k in ("sparse_rows", "sparse_cols", "sparse_vals"))
    sparse = sp.csr_array((vals, (rows, cols)), shape=(n, n))
    s = f["lr_s"][()] if bool(f.attrs.get("lr_singular_values", True)) else None
    return HybridOperator(n, chord=chord, low_rank=(f["lr_U"][()], s, f["lr_Vt"][()]),
                          sparse=sparse, count_indices=bool(f.attrs.get("count_indices", False)))


def load_factors(path: str | os.PathLike) -> SavedFactors:
    """Read an SF (or hybrid) fit written by :func:`save_factors`.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from sfapprox.linop import ChordOperator
    >>> op = ChordOperator(np.full((3, 8, 4), 0.25))
    >>> p = os.path.join(tempfile.mkdtemp(), "f.h5")
    >>> save_factors(p, op)
    >>> load_factors(p).n_stored
    96
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != FACTORS_FORMAT:
                raise InputError(f"{path}: not an sfapprox factors file (written by 'sfapprox fit --out')")
            operator = _read_operator(f, path)
            kind = str(f.attrs.get("kind", "sf"))
            history = f["loss_history"][()]
            meta = {k: json.loads(f.attrs[k]) for k in ("fit", "settings", "source", "versions")}
    except InputError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"{path}: cannot read sfapprox factors ({exc})") from None
    return SavedFactors(operator, history, **meta, kind=kind)


def save_results(comparison, folder: str | os.PathLike, *, source=None, force: bool = False) -> list[Path]:
    """Write every fitted row of a comparison to ``folder/<matrix>.<method>.h5``.

    Rows without an operator (not applicable, failed) are skipped.  The
    folder is created.  ``source`` (a LoadedMatrix) is recorded in each file.
    Returns the files written.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = comparison.matrix.get("name", "matrix")
    origin = {} if source is None else {"name": source.name, "path": source.path, "sha256": source.sha256,
                                       "format": source.format}
    written = []
    for r in comparison.results:
        if r.operator is None or not isinstance(r.operator, (ChordOperator, HybridOperator)):
            continue
        target = folder / f"{name}.{r.method}.h5"
        fit = {"method": r.method, "status": r.status, "nnz": r.nnz, "fro_error": r.fro_error,
               "rel_error": r.rel_error, "seconds": r.seconds, **r.params}
        history = getattr(r.estimator, "loss_curve_", ())
        save_factors(target, r.operator, kind=r.method, loss_history=history, fit=fit,
                     settings=comparison.settings, source=origin, force=force)
        written.append(target)
    return written
