"""Fitted surrogates in HDF5 files: :func:`save_factors`, :func:`load_factors`, :func:`save_results`.

Any fitted method's operator can be saved: SF's factors (:class:`~sfapprox.sf.linop.ChordOperator`),
a sum of factors, low-rank and sparse parts (:class:`~sfapprox.sf.linop.HybridOperator`:
sf+lr, sf+s, TSVD, RPCA, NMF), or an operator class a method module registers with
:func:`register_operator` (it supplies ``kind``, ``to_arrays()`` and ``from_arrays()``).

**The file** (format ``sfapprox-factors``, version 4) describes itself: the root
attribute ``description`` says, in words, how to rebuild the matrix from the
datasets, and every dataset has a ``description`` attribute.  Root attributes:
``format``, ``format_version``, ``kind`` (the method, e.g. ``"sf"``), ``operator``
(``"chord"``, ``"hybrid"`` or a registered kind), ``n``, ``n_stored`` and the JSON
strings ``fit`` (what was fitted, its errors), ``settings``, ``source`` (the
input's name, path and SHA-256) and ``versions``.  For SF factors the datasets
are ``values`` (M, N, K) and ``offsets`` (K,) with the attributes ``support`` and
``n_factors``: factor ``m`` holds ``values[m, i, k]`` at row ``i``, column
``(i + offsets[k]) mod N``, and the matrix is ``W[0] @ W[1] @ ... @ W[M-1]``
(the butterfly support: ``values[m, i, 0]`` at column ``i`` and ``values[m, i, 1]``
at column ``i XOR 2**m``).  A hybrid adds ``lr_U`` (N, r), ``lr_s`` (r,), ``lr_Vt``
(r, N) (``U diag(s) V^T``; with the attribute ``lr_singular_values`` false the
part is ``U V^T`` and ``lr_s`` holds ones) and ``sparse_rows``, ``sparse_cols``,
``sparse_vals`` (COO entries).  ``loss_history`` is ``0.5 ||X - A||_F^2`` after
each optimizer iteration of the run that was kept (SF with ``init="auto"`` also
spent iterations probing the start it did not keep, which ``fit["iterations"]``
counts and the history does not).  Files of versions 1-3 (format
``sfapprox-chord-factors``) are read too.

**Reading is validated** like any input: the version, the shapes against
``n``, offsets and sparse positions inside the matrix, finite values, the
stored count, the size against the memory limit before anything is read, and
only data stored in the file itself (no external storage, external links or
virtual datasets).  Anything else is an :class:`~sfapprox.InputError`.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import write_bytes
from ._errors import InputError, SfapproxError
from .chord import SUPPORTS
from .formats import jsonable
from .sf.linop import ChordOperator, HybridOperator
from .results import library_versions

__all__ = [
    "SavedFactors",
    "save_factors",
    "load_factors",
    "save_results",
    "register_operator",
    "is_factors_file",
    "FACTORS_FORMAT",
    "FACTORS_VERSION",
]

FACTORS_FORMAT = "sfapprox-factors"
FACTORS_VERSION = 4
#: Versions 1-3 were written under this name (1: SF factors, 2: hybrids, 3: butterfly factors).
LEGACY_FORMAT = "sfapprox-chord-factors"

#: Operator classes that method modules registered (kind -> class with to_arrays/from_arrays).
_OPERATORS: dict[str, type] = {}


def register_operator(cls: type) -> type:
    """Let :func:`save_factors` / :func:`load_factors` handle ``cls`` (a method module calls this once).

    ``cls`` has a class attribute ``kind`` (str), a method ``to_arrays() ->
    (datasets: dict[str, ndarray], attrs: dict)`` and a classmethod
    ``from_arrays(datasets, attrs)`` that validates and rebuilds it; its
    docstring's first paragraph describes the layout (written to the file).
    """
    _OPERATORS[cls.kind] = cls
    return cls


# =============================================================================== the record
@dataclass
class SavedFactors:
    """A fit read back from HDF5: the operator plus how it was made.

    ``matvec``/``rmatvec``/``matmat``/``to_dense`` delegate to :attr:`operator`,
    a scipy LinearOperator (a :class:`~sfapprox.sf.linop.ChordOperator` for SF
    factors, a :class:`~sfapprox.sf.linop.HybridOperator` for sums of parts, or a
    registered operator).
    """

    operator: Any
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

    def aslinearoperator(self):
        return self.operator


# =============================================================================== descriptions
_CHORD_TEXT = (
    "A = W[0] @ W[1] @ ... @ W[M-1] (M = n_factors); factor m holds values[m, i, k] at row i, column "
    "(i + offsets[k]) mod n; with support 'butterfly' it holds values[m, i, 0] at column i and "
    "values[m, i, 1] at column i XOR 2**m (offsets empty)."
)
_HYBRID_TEXT = (
    "A = P + U diag(s) V^T + S: P the Chord factor product of 'values'/'offsets' (absent when "
    "n_factors is 0; " + _CHORD_TEXT + "), U = lr_U, s = lr_s, V^T = lr_Vt (when lr_singular_values "
    "is false the part is U V^T and lr_s holds ones), S the sparse matrix with S[sparse_rows[j], "
    "sparse_cols[j]] = sparse_vals[j]."
)
_DATASET_TEXT = {
    "values": "factor values, shape (M, n, K): values[m, i, k] sits in row i of factor m (see the file's description)",
    "offsets": "column offsets: values[m, i, k] sits at column (i + offsets[k]) mod n",
    "loss_history": "0.5 ||X - A||_F^2 after each iteration of the optimizer run that was kept (index 0: its start)",
    "lr_U": "left factor U, shape (n, r)",
    "lr_s": "singular values s, shape (r,) (ones when the file's lr_singular_values is false)",
    "lr_Vt": "right factor V^T, shape (r, n)",
    "sparse_rows": "row of each sparse entry (0-based)",
    "sparse_cols": "column of each sparse entry (0-based)",
    "sparse_vals": "value of each sparse entry",
}


def _describe(datasets) -> None:
    for name, dataset in datasets:
        text = _DATASET_TEXT.get(name)
        if text:
            dataset.attrs["description"] = text


# =============================================================================== writing
def _write_chord(f, chord: ChordOperator | None, n: int) -> None:
    values = np.zeros((0, n, 0)) if chord is None else chord.values
    f.attrs["support"] = "chord" if chord is None else chord.support
    f.attrs["n_factors"] = 0 if chord is None else chord.n_factors
    # gzip needs chunks, which an empty dataset cannot have.
    f.create_dataset("values", data=values, compression="gzip" if values.size else None)
    f.create_dataset("offsets", data=np.zeros(0, np.int64) if chord is None else chord.offsets)


def _write_hybrid(f, op: HybridOperator) -> None:
    _write_chord(f, op.chord, op.shape[0])
    f.attrs["count_indices"] = op.count_indices
    f.attrs["lr_singular_values"] = op.singular_values
    f.create_dataset("lr_U", data=op.U)
    f.create_dataset("lr_s", data=op.s)
    f.create_dataset("lr_Vt", data=op.Vt)
    coo = op.sparse.tocoo()
    f.create_dataset("sparse_rows", data=coo.row.astype(np.int64))
    f.create_dataset("sparse_cols", data=coo.col.astype(np.int64))
    f.create_dataset("sparse_vals", data=coo.data.astype(np.float64))


def _operator_kind(operator) -> str:
    if isinstance(operator, ChordOperator):
        return "chord"
    if isinstance(operator, HybridOperator):
        return "hybrid"
    kind = getattr(type(operator), "kind", None)
    if kind in _OPERATORS and isinstance(operator, _OPERATORS[kind]):
        return kind
    raise SfapproxError(f"cannot save a {type(operator).__name__}: it is not an operator sfapprox knows how to write")


def _default_method(operator) -> str:
    if isinstance(operator, ChordOperator):
        return "sf"
    if isinstance(operator, HybridOperator):
        return "sf+s" if operator.sparse.nnz else "sf+lr"
    return _operator_kind(operator)


def save_factors(
    path: str | os.PathLike,
    operator,
    *,
    kind: str | None = None,
    loss_history: list[float] | np.ndarray = (),
    fit: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    force: bool = True,
) -> None:
    """Write a fitted surrogate to an HDF5 file, atomically (layout: the module docstring).

    Parameters
    ----------
    path : path
    operator : fitted estimator, ChordOperator, HybridOperator or a registered operator
        A fitted estimator (e.g. ``ChordSF().fit(X)``) records its fit, settings and
        loss history itself.
    kind : str, optional
        The method that made it (default: ``"sf"`` for a ChordOperator, ``"sf+s"``
        or ``"sf+lr"`` for a HybridOperator, the operator's kind otherwise).
    loss_history : sequence of float
    fit, settings, source : dict, optional
        What was fitted, how, and from which input (recorded as JSON).
    force : bool, default=True
        Overwrite an existing file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f.h5")
    >>> save_factors(p, ChordOperator(np.full((3, 8, 4), 0.25)))
    >>> load_factors(p).n_stored
    96
    """
    import h5py

    if hasattr(operator, "operator_"):  # a fitted estimator: record what it is and how it was made
        estimator = operator
        operator = estimator.operator_
        kind = kind or estimator.method_name
        loss_history = loss_history if len(loss_history) else getattr(estimator, "loss_curve_", ())
        fit = fit or _fit_record(estimator)
        settings = settings or {k: v for k, v in estimator.get_params().items() if not callable(v)}
    n = operator.shape[0]
    op_kind = _operator_kind(operator)
    # Built in memory, then written by one checked write: HDF5 writing straight to a full disk
    # can crash inside the library; a full disk must be one error line, with no partial file.
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        f.attrs["format"] = FACTORS_FORMAT
        f.attrs["format_version"] = FACTORS_VERSION
        f.attrs["kind"] = kind or _default_method(operator)
        f.attrs["operator"] = op_kind
        f.attrs["n"] = n
        f.attrs["n_stored"] = int(operator.n_stored)
        if op_kind == "chord":
            _write_chord(f, operator, n)
            f.attrs["description"] = f"An sfapprox fit of a {n} x {n} matrix A. " + _CHORD_TEXT
        elif op_kind == "hybrid":
            _write_hybrid(f, operator)
            f.attrs["description"] = f"An sfapprox fit of a {n} x {n} matrix A. " + _HYBRID_TEXT
        else:
            arrays, attrs = operator.to_arrays()
            group = f.create_group("parts")
            for name, value in attrs.items():
                group.attrs[name] = value
            for name, array in arrays.items():
                group.create_dataset(name, data=np.asarray(array))
            layout = " ".join((type(operator).__doc__ or "").strip().split("\n\n")[0].split())
            f.attrs["description"] = f"An sfapprox fit of a {n} x {n} matrix A (group 'parts'): {layout}"
        f.create_dataset("loss_history", data=np.asarray(loss_history, dtype=np.float64))
        _describe(f.items())
        for key, value in (("fit", fit or {}), ("settings", settings or {}), ("source", source or {}),
                           ("versions", library_versions())):
            f.attrs[key] = json.dumps(jsonable(value))
    write_bytes(path, buffer.getbuffer(), force=force)


def _fit_record(est) -> dict[str, Any]:
    """What a fitted estimator reached: its stored count, errors, time, stop reason and parameters."""
    record = {"method": est.method_name, "nnz": int(est.n_stored_), "seconds": float(est.seconds_),
              "stop_reason": est.stop_reason_}
    for name in ("fro_error_", "rel_error_", "n_iter_"):
        if getattr(est, name, None) is not None:
            record[name.rstrip("_")] = getattr(est, name)
    return {**record, **est.params_}


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
        if r.operator is None:
            continue
        target = folder / f"{name}.{r.method}.h5"
        fit = {"method": r.method, "status": r.status, "nnz": r.nnz, "fro_error": r.fro_error,
               "rel_error": r.rel_error, "seconds": r.seconds, **r.params}
        history = getattr(r.estimator, "loss_curve_", ())
        save_factors(target, r.operator, kind=r.method, loss_history=history, fit=fit,
                     settings=comparison.settings, source=origin, force=force)
        written.append(target)
    return written


# =============================================================================== reading
def is_factors_file(path: str | os.PathLike) -> bool:
    """True for an HDF5 file that sfapprox wrote with :func:`save_factors` (any version)."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("format") in (FACTORS_FORMAT, LEGACY_FORMAT)
    except (OSError, ValueError):
        return False


class _Reader:
    """Checked reads from an open factors file: self-contained, sized, typed, finite."""

    def __init__(self, f, path: Path, max_memory: int | None):
        self.f, self.path, self.max_memory = f, path, max_memory
        self.budget = 0

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.path}: {what}; the file is damaged or was edited after sfapprox wrote it")

    def array(self, name: str, *, ndim: int, kind: str = "f", shape: tuple | None = None, where=None) -> np.ndarray:
        from ._validation import check_memory

        import h5py

        from .io._hdf5 import check_dataset

        node = (where or self.f).get(name)
        if node is None:
            raise self.fail(f"dataset {name!r} is missing")
        if not isinstance(node, h5py.Dataset):
            raise self.fail(f"{name!r} is not a dataset")
        check_dataset(node, self.path, name)
        if len(node.shape) != ndim or (shape is not None and any(s is not None and s != d for s, d in zip(shape, node.shape))):
            raise self.fail(f"dataset {name!r} has shape {node.shape}, expected {shape or f'{ndim} dimensions'}")
        if node.dtype.kind not in ("f", "i", "u") or (kind == "i" and node.dtype.kind == "f"):
            raise self.fail(f"dataset {name!r} holds {node.dtype} values, expected {'integers' if kind == 'i' else 'numbers'}")
        # Before reading: a dataset declared huge (even one with no storage, only a fill value) is refused.
        self.budget += int(np.prod(node.shape, dtype=np.int64)) * 8
        check_memory(self.budget, what=f"{self.path}: reading its datasets", limit=self.max_memory)
        data = node[()]
        if kind == "f":
            data = np.asarray(data, dtype=np.float64)
            if not np.isfinite(data).all():
                raise self.fail(f"dataset {name!r} holds NaN or infinite values")
        else:
            data = np.asarray(data, dtype=np.int64)
        return data


def _attr_int(f, name: str, path: Path, low: int = 0) -> int:
    value = f.attrs.get(name)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{path}: attribute {name!r} is {value!r}, not a whole number") from None
    if number < low or number != value:
        raise InputError(f"{path}: attribute {name!r} is {value!r}, expected a whole number >= {low}")
    return number


def _read_chord(r: _Reader, n: int) -> ChordOperator | None:
    f, path = r.f, r.path
    support = str(f.attrs.get("support", "chord"))  # files older than the attribute are offset-based
    if support not in SUPPORTS:
        raise InputError(f"{path}: unknown factor support {support!r} (known: {', '.join(SUPPORTS)}); "
                         "the file may come from a newer sfapprox")
    values = r.array("values", ndim=3, shape=(None, n, None))
    offsets = r.array("offsets", ndim=1, kind="i")
    if values.shape[0] == 0:
        return None
    if support == "butterfly":
        if offsets.size:
            raise r.fail("butterfly factors have offsets")
        try:
            return ChordOperator(values, support="butterfly")
        except ValueError as exc:
            raise r.fail(str(exc)) from None
    if offsets.shape != (values.shape[2],):
        raise r.fail(f"{offsets.size} offsets for {values.shape[2]} values per row")
    if offsets.size and (offsets.min() < 0 or offsets.max() >= n or len(set(offsets.tolist())) != offsets.size):
        raise r.fail(f"offsets {offsets.tolist()} are not distinct positions in 0..{n - 1}")
    return ChordOperator(values, offsets, support=support)


def _read_hybrid(r: _Reader, n: int) -> HybridOperator:
    import scipy.sparse as sp

    chord = _read_chord(r, n)
    U = r.array("lr_U", ndim=2, shape=(n, None))
    rank = U.shape[1]
    s = r.array("lr_s", ndim=1, shape=(rank,))
    Vt = r.array("lr_Vt", ndim=2, shape=(rank, n))
    rows = r.array("sparse_rows", ndim=1, kind="i")
    cols = r.array("sparse_cols", ndim=1, kind="i", shape=rows.shape)
    vals = r.array("sparse_vals", ndim=1, shape=rows.shape)
    for name, index in (("sparse_rows", rows), ("sparse_cols", cols)):
        if index.size and (index.min() < 0 or index.max() >= n):
            raise r.fail(f"{name} holds positions outside 0..{n - 1}")
    sparse = sp.csr_array((vals, (rows, cols)), shape=(n, n))
    if sparse.nnz != rows.size:
        raise r.fail("sparse entries repeat a position")
    singular = bool(r.f.attrs.get("lr_singular_values", True))
    return HybridOperator(n, chord=chord, low_rank=(U, s if singular else None, Vt), sparse=sparse,
                          count_indices=bool(r.f.attrs.get("count_indices", False)))


def _read_registered(r: _Reader, kind: str, n: int):
    from ._base import methods

    methods()  # importing the method modules registers their operators
    cls = _OPERATORS.get(kind)
    if cls is None:
        raise InputError(f"{r.path}: unknown operator kind {kind!r} (known: chord, hybrid, "
                         f"{', '.join(_OPERATORS) or 'none registered'}); the file may come from a newer sfapprox")
    group = r.f.get("parts")
    if group is None:
        raise r.fail("group 'parts' is missing")
    arrays = {name: r.array(name, ndim=len(group[name].shape), where=group,
                            kind="i" if group[name].dtype.kind in "iu" else "f") for name in group}
    op = cls.from_arrays(arrays, dict(group.attrs))
    if op.shape != (n, n):
        raise r.fail(f"its parts make a {op.shape} operator, but the file says n = {n}")
    return op


_READERS: dict[str, Callable] = {"chord": _read_chord, "hybrid": _read_hybrid}


def _read(f, path: Path, max_memory: int | None) -> tuple[Any, np.ndarray, str]:
    fmt = f.attrs.get("format")
    if fmt not in (FACTORS_FORMAT, LEGACY_FORMAT):
        raise InputError(f"{path}: not an sfapprox factors file (written by 'sfapprox fit --out' or save_factors)")
    version = _attr_int(f, "format_version", path, low=1)
    if version > FACTORS_VERSION:
        raise InputError(f"{path}: written by a newer sfapprox (format version {version}; this one reads "
                         f"up to {FACTORS_VERSION}); upgrade sfapprox to read it")
    from .io._hdf5 import check_self_contained

    check_self_contained(f, path)  # no data from outside the file: external storage, links, virtual datasets
    n = _attr_int(f, "n", path, low=1)
    r = _Reader(f, path, max_memory)
    if fmt == LEGACY_FORMAT:
        op_kind = "hybrid" if "lr_U" in f else "chord"
    else:
        op_kind = str(f.attrs.get("operator", ""))
    if op_kind in _READERS:
        operator = _READERS[op_kind](r, n)
        if operator is None:
            raise r.fail("it holds no factors")
    else:
        operator = _read_registered(r, op_kind, n)
    if "n_stored" in f.attrs and _attr_int(f, "n_stored", path) != operator.n_stored:
        raise r.fail(f"it says it stores {f.attrs['n_stored']} numbers but holds {operator.n_stored}")
    history = r.array("loss_history", ndim=1) if "loss_history" in f else np.zeros(0)
    return operator, history, str(f.attrs.get("kind", "sf"))


def load_factors(path: str | os.PathLike, *, max_memory: int | None = None) -> SavedFactors:
    """Read a fit written by :func:`save_factors`, validating it as an input.

    Parameters
    ----------
    path : path
    max_memory : int, optional
        Bytes the datasets may take once read (default: a share of the
        physical memory); checked from the header, before reading.

    Raises
    ------
    InputError
        For anything but a valid, self-contained factors file (one line naming the file).

    Examples
    --------
    >>> import numpy as np, tempfile, os
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
            operator, history, kind = _read(f, path, max_memory)
            meta = {}
            for key in ("fit", "settings", "source", "versions"):
                try:
                    meta[key] = json.loads(f.attrs.get(key, "{}"))
                except (TypeError, ValueError):
                    raise InputError(f"{path}: attribute {key!r} is not valid JSON; the file was edited") from None
                if not isinstance(meta[key], dict):
                    raise InputError(f"{path}: attribute {key!r} is not a JSON object; the file was edited")
    except SfapproxError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: cannot read sfapprox factors ({' '.join(str(exc).split())})") from None
    return SavedFactors(operator, history, **meta, kind=kind)
