"""Result records and the files they are written to.

* :class:`MethodResult` / :class:`Comparison`: what ``compare`` returns, with
  ``to_dict()`` giving the documented JSON shape.
* :func:`write_json`: atomic JSON output (temporary file in the destination
  folder, then ``os.replace``), so a reader never sees half a file.
* :func:`save_factors` / :func:`load_factors`: an SF fit in HDF5 (h5py), or a
  hybrid one (sf+lr, sf+s: the factors plus a low-rank or sparse part).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ._errors import InputError, SfapproxError
from .chord import SUPPORTS
from .linop import ChordOperator, HybridOperator

__all__ = [
    "MethodResult",
    "Comparison",
    "SavedFactors",
    "write_json",
    "atomic_path",
    "save_factors",
    "load_factors",
    "library_versions",
]

FACTORS_FORMAT = "sfapprox-chord-factors"
FACTORS_VERSION = 1
#: Files of hybrid fits (kind "sf+lr" / "sf+s") carry version 2: a version-1 reader
#: would see only their factors, so they say that they hold more.
HYBRID_VERSION = 2
#: Files of butterfly factors carry version 3: their ``values`` are not offset-based
#: (the ``support`` attribute says so), which no earlier reader knows.
BUTTERFLY_VERSION = 3


@dataclass
class MethodResult:
    """One method's outcome at a budget.

    ``status`` is ``"ok"``, ``"not applicable"`` (``reason`` says why),
    ``"failed"`` or ``"interrupted"``; errors are None unless there is an
    approximation to score.
    """

    method: str
    status: str
    nnz: int | None = None
    fro_error: float | None = None
    rel_error: float | None = None
    seconds: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


@dataclass
class Comparison:
    """Every method's result on one matrix at one budget."""

    matrix: dict[str, Any]
    budget: int
    budget_spec: str
    results: list[MethodResult]

    def winner(self) -> str | None:
        """The ``ok`` method with the smallest Frobenius error (None if none)."""
        scored = [r for r in self.results if r.status == "ok" and r.fro_error is not None]
        return min(scored, key=lambda r: r.fro_error).method if scored else None

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(
            {
                "matrix": self.matrix,
                "budget": self.budget,
                "budget_spec": self.budget_spec,
                "winner": self.winner(),
                "results": [r.to_dict() for r in self.results],
            }
        )


def _jsonable(value: Any) -> Any:
    """Plain JSON types; non-finite floats become None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    return value


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, force: bool = True) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it into place only on success.

    A crash or Ctrl-C while writing leaves the old file (or nothing) in
    place, never a partial one.  With ``force=False`` an existing file is an
    error raised before anything is written.
    """
    target = Path(path)
    if target.exists() and not force:
        raise SfapproxError(f"{target}: already exists; use --force to overwrite it")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise SfapproxError(f"{target}: folder {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp creates the file 0600; give it the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(tmp)  # the rename must not land before the data on a crash
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _umask() -> int:
    # Linux reports the umask without changing it (os.umask would, for a moment, in every thread).
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str | os.PathLike, data: Any, *, force: bool = True) -> None:
    """Write ``data`` as indented JSON, atomically."""
    text = json.dumps(_jsonable(data), indent=2) + "\n"
    with atomic_path(path, force=force) as tmp:
        tmp.write_text(text, encoding="utf-8")


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
                f.attrs[key] = json.dumps(_jsonable(value))


def _kind(operator: ChordOperator | HybridOperator) -> str:
    if not isinstance(operator, HybridOperator):
        return "sf"
    return "sf+s" if operator.sparse.nnz else "sf+lr"


def _write_corrections(f, op: HybridOperator) -> None:
    f.attrs["count_indices"] = op.count_indices
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
    return HybridOperator(n, chord=chord, low_rank=(f["lr_U"][()], f["lr_s"][()], f["lr_Vt"][()]),
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
