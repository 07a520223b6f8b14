"""Result records and the files they are written to.

* :class:`MethodResult` / :class:`Comparison`: what ``compare`` returns, with
  ``to_dict()`` giving the documented JSON shape.
* :func:`write_json`: atomic JSON output (temporary file in the destination
  folder, then ``os.replace``), so a reader never sees half a file.
* :func:`save_factors` / :func:`load_factors`: an SF fit in HDF5 (h5py).
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
from .linop import ChordOperator

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
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


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
    """An SF fit read back from HDF5: the operator plus how it was made.

    ``matvec``/``rmatvec``/``matmat``/``to_dense`` delegate to
    :attr:`operator`, a :class:`~sfapprox.linop.ChordOperator` (a scipy
    LinearOperator).
    """

    operator: ChordOperator
    loss_history: np.ndarray
    fit: dict[str, Any]
    settings: dict[str, Any]
    source: dict[str, Any]
    versions: dict[str, str]

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

    def aslinearoperator(self) -> ChordOperator:
        return self.operator


def save_factors(
    path: str | os.PathLike,
    operator: ChordOperator,
    *,
    loss_history: list[float] | np.ndarray = (),
    fit: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    force: bool = True,
) -> None:
    """Write an SF fit to an HDF5 file, atomically.

    Layout: datasets ``values`` (M, N, K) and ``offsets`` (K,) and
    ``loss_history``; attributes ``format``, ``format_version``, ``n``,
    ``n_factors`` and JSON strings ``fit``, ``settings``, ``source``,
    ``versions``.
    """
    import h5py

    with atomic_path(path, force=force) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FACTORS_FORMAT
            f.attrs["format_version"] = FACTORS_VERSION
            f.attrs["n"] = operator.shape[0]
            f.attrs["n_factors"] = operator.n_factors
            f.create_dataset("values", data=operator.values, compression="gzip")
            f.create_dataset("offsets", data=operator.offsets)
            f.create_dataset("loss_history", data=np.asarray(loss_history, dtype=np.float64))
            for key, value in (
                ("fit", fit or {}),
                ("settings", settings or {}),
                ("source", source or {}),
                ("versions", library_versions()),
            ):
                f.attrs[key] = json.dumps(_jsonable(value))


def load_factors(path: str | os.PathLike) -> SavedFactors:
    """Read an SF fit written by :func:`save_factors`.

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
            values = f["values"][()]
            offsets = f["offsets"][()]
            history = f["loss_history"][()]
            meta = {k: json.loads(f.attrs[k]) for k in ("fit", "settings", "source", "versions")}
    except InputError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"{path}: cannot read sfapprox factors ({exc})") from None
    return SavedFactors(ChordOperator(values, offsets), history, **meta)
