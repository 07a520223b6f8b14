"""Fitted surrogates in HDF5 files: :func:`save_factors`, :func:`load_factors`, :func:`save_results`.

Any fitted method's operator can be saved: every surrogate of :mod:`sfapprox.operators` (SF's
factors, hybrids, sparse, Monarch, butterfly, ...) through one registry: each operator class
supplies its ``kind``, ``layout``, ``description`` and ``to_arrays()`` / ``from_arrays()``, and this
module writes and reads them all the same way.

**The file** (format ``sfapprox-factors``, version 4) describes itself: the root
attribute ``description`` says, in words, how to rebuild the matrix from the
datasets, and every dataset has a ``description`` attribute.  Root attributes:
``format``, ``format_version``, ``kind`` (the method, e.g. ``"sf"``), ``operator``
(``"chord"``, ``"hybrid"``, ``"csr"``, ... : a registered kind), ``n``, ``n_stored`` and the JSON
strings ``fit`` (what was fitted, its errors), ``settings``, ``source`` (the
input's name, path and SHA-256) and ``versions``.  For SF factors the datasets
are ``values`` (M, N, K) and ``offsets`` (K,) with the attributes ``support`` and
``n_factors``: factor ``m`` holds ``values[m, i, k]`` at row ``i``, column
``(i + offsets[k]) mod N``, and the matrix is ``W[0] @ W[1] @ ... @ W[M-1]``
(the butterfly support: ``values[m, i, 0]`` at column ``i`` and ``values[m, i, 1]``
at column ``i XOR 2**m``).  A hybrid adds ``lr_U`` (N, r), ``lr_s`` (r,), ``lr_Vt``
(r, N) (``U diag(s) V^T``; with the attribute ``lr_singular_values`` false the
part is ``U V^T`` and ``lr_s`` holds ones) and ``sparse_rows``, ``sparse_cols``,
``sparse_vals`` (COO entries).  Other kinds keep their arrays in the group ``parts`` (their
layout is in the file's description).  ``loss_history`` is ``0.5 ||X - A||_F^2`` after
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

import contextlib
import functools
import inspect
import io
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from ._atomic import FileStamp, OutputError, check_name_length, check_named_file, resolved_path, write_bytes
from ._errors import InputError, NotFittedError, ParameterError, SfapproxError, parameter
from ._params import MEMORY_LIMIT, check_values
from ._validation import check_memory, check_path
from .formats import counted, jsonable, printable, shape_text
from .operators import ChordOperator, HybridOperator, SurrogateOperator, operator_class, operator_kinds
from .operators._base import operator_words
from .operators import register_operator as _register_operator
from .results import library_versions

__all__ = [
    "SavedFactors",
    "save_factors",
    "load_factors",
    "save_results",
    "result_writers",
    "register_operator",
    "is_factors_file",
    "result_path",
    "check_results_folder",
    "FACTORS_FORMAT",
    "FACTORS_VERSION",
]

FACTORS_FORMAT = "sfapprox-factors"
FACTORS_VERSION = 4
#: Versions 1-3 were written under this name (1: SF factors, 2: hybrids, 3: butterfly factors).
LEGACY_FORMAT = "sfapprox-chord-factors"


def register_operator(cls: type) -> type:
    """Deprecated: use :func:`sfapprox.operators.register_operator` (the registry moved there).

    Kept so that scripts that registered their own operator class keep working
    for one release; it warns and registers ``cls``.
    """
    warnings.warn("sfapprox.factors.register_operator moved to sfapprox.operators.register_operator; "
                  "the old name will be removed in a later release", DeprecationWarning, stacklevel=2)
    # The old contract: ``kind``, ``to_arrays``/``from_arrays`` and the layout told by the docstring's first
    # paragraph; what the registry asks for now is filled from it (an AttributeError on 'layout' before).
    defaults = {"layout": "parts", "dataset_descriptions": {},
                "description": " ".join((inspect.getdoc(cls) or cls.__name__).split("\n\n")[0].split()),
                # what it stores, where it does not say: its arrays' entries
                "n_stored": property(lambda self: int(sum(np.asarray(a).size for a in self.to_arrays()[0].values()))),
                "array_names": lambda self: tuple(self.to_arrays()[0])}
    for name, value in defaults.items():
        if not getattr(cls, name, None):
            setattr(cls, name, value)
    if not issubclass(cls, SurrogateOperator):
        _LEGACY_CLASSES.add(cls)
    return _register_operator(cls)


#: Operator classes registered by the old contract (plain LinearOperators): saved and read as the others.
_LEGACY_CLASSES: set[type] = set()


# =============================================================================== the record
@dataclass(repr=False)  # its own __repr__: one line, not every loss and setting
class SavedFactors:
    """A fit read back from HDF5: the operator plus how it was made.

    ``matvec``/``rmatvec``/``matmat``/``to_dense`` and ``@`` delegate to :attr:`operator`.

    Attributes
    ----------
    operator : SurrogateOperator
        The surrogate (a :class:`~sfapprox.operators.ChordOperator` for SF
        factors, a :class:`~sfapprox.operators.HybridOperator` for sums of
        parts, ...).
    loss_history : numpy.ndarray
        ``0.5 ||X - A||_F^2`` after each optimizer iteration (empty when the
        method recorded none).
    fit : dict
        What was fitted and reached (method, errors, seconds, stop reason, ...).
    settings : dict
        The parameters it was fitted with.
    source : dict
        The input's name, path, SHA-256 and format (empty for an array).
    versions : dict of str to str
        The library versions that wrote the file.
    kind : str, default="sf"
        The method that made it (``"sf"``, ``"tsvd"``, ...).
    n : int
        Order of the matrix (property).
    n_stored : int
        Stored numbers of the operator (property).
    """

    operator: SurrogateOperator
    loss_history: np.ndarray
    fit: dict[str, Any]
    settings: dict[str, Any]
    source: dict[str, Any]
    versions: dict[str, str]
    kind: str = "sf"

    @property
    def n(self) -> int:
        """Order ``N`` of the matrix."""
        return self.operator.shape[0]

    @property
    def n_stored(self) -> int:
        """Stored numbers of the operator."""
        return self.operator.n_stored

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``operator @ x``.

        Parameters
        ----------
        x : numpy.ndarray, shape (n,)
        """
        return self.operator.matvec(x)

    def rmatvec(self, x: np.ndarray) -> np.ndarray:
        """``operator.T @ x``.

        Parameters
        ----------
        x : numpy.ndarray, shape (n,)
        """
        return self.operator.rmatvec(x)

    def matmat(self, B: np.ndarray) -> np.ndarray:
        """``operator @ B``.

        Parameters
        ----------
        B : numpy.ndarray, shape (n, k)
        """
        return self.operator.matmat(B)

    # ``saved @ x`` as ``matvec`` does: numpy read the record as a 0-d object array ("matmul: Input operand 0
    # does not have enough dimensions"); None makes numpy leave ``x @ saved`` to __rmatmul__ as well.
    __array_ufunc__ = None

    @overload
    def __matmul__(self, x: np.ndarray) -> np.ndarray: ...

    @overload
    def __matmul__(self, x: Any) -> Any: ...

    def __matmul__(self, x: Any) -> Any:
        """``operator @ x`` (a vector, a block or another operator)."""
        return self.operator @ x

    def __rmatmul__(self, x: Any) -> Any:
        """``x @ operator``."""
        return x @ self.operator

    def to_dense(self) -> np.ndarray:
        """The dense ``n x n`` matrix of the operator."""
        return self.operator.to_dense()

    def aslinearoperator(self) -> SurrogateOperator:
        """The operator itself (a scipy ``LinearOperator``)."""
        return self.operator

    # What scipy reads an object by (aslinearoperator's duck typing: shape, matvec, rmatvec, rmatmat, dtype),
    # so that a record goes to cg / eigsh / gmres as it is: it had no shape, and they raised "type not
    # understood"; and the transpose, which `saved.T @ x` asked for (an AttributeError).
    @property
    def shape(self) -> tuple[int, int]:
        """``(n, n)``, the operator's shape."""
        return self.operator.shape

    @property
    def dtype(self) -> np.dtype:
        """The operator's dtype (float64)."""
        return self.operator.dtype

    @property
    def T(self) -> SurrogateOperator:
        """The transpose of the operator (an operator: ``saved.T @ x``, ``saved.T @ B``)."""
        return self.operator.T

    @property
    def H(self) -> SurrogateOperator:
        """The adjoint of the operator: its transpose (it is real)."""
        return self.operator.H

    def rmatmat(self, B: np.ndarray) -> np.ndarray:
        """``operator.T @ B``.

        Parameters
        ----------
        B : numpy.ndarray, shape (n, k)
        """
        return self.operator.rmatmat(B)

    def __repr__(self) -> str:
        """One line: the method, the operator's own line, and the fit's error where the file records it
        (a dataclass's repr held every loss of the history and every setting).

        Examples
        --------
        >>> SavedFactors(ChordOperator(np.full((3, 8, 4), 0.25)), np.zeros(3), {"rel_error": 0.125}, {}, {}, {})
        <SavedFactors sf: <ChordOperator 8 x 8: 3 factors, chord support, K = 4 values a row; stores 96 numbers (150% of N²)>, rel_error 0.125, 3 losses recorded>
        >>> SavedFactors(ChordOperator(np.full((3, 8, 4), 0.25)), np.zeros(1), {}, {}, {}, {})
        <SavedFactors sf: <ChordOperator 8 x 8: 3 factors, chord support, K = 4 values a row; stores 96 numbers (150% of N²)>, 1 loss recorded>
        """
        said = [repr(self.operator)]
        error = self.fit.get("rel_error")
        if isinstance(error, (int, float)) and not isinstance(error, bool):
            said.append(f"rel_error {error:.4g}")
        if len(self.loss_history):
            said.append(f"{counted(len(self.loss_history), 'loss', 'losses')} recorded")  # "1 losses" said it of one
        if isinstance(self.source.get("name"), str):
            said.append(f"of {self.source['name']}")
        return printable(f"<SavedFactors {self.kind}: {', '.join(said)}>")


# =============================================================================== writing
_LOSS_HISTORY = "0.5 ||X - A||_F^2 after each iteration of the optimizer run that was kept (index 0: its start)"


def _operator_kind(operator) -> str:
    kind = getattr(type(operator), "kind", None)
    if (isinstance(operator, SurrogateOperator) or type(operator) in _LEGACY_CLASSES) \
            and operator_class(kind) is type(operator):
        return kind
    raise SfapproxError(f"cannot save {operator_words(operator)}: it is not an operator sfapprox knows how to "
                        f"write (registered kinds: {', '.join(operator_kinds())}); save the surrogate itself")


def _default_method(operator) -> str:
    if isinstance(operator, ChordOperator):
        return "sf"
    if isinstance(operator, HybridOperator):
        if operator.chord is None:  # no Chord factors: a baseline's sum, not sf+s / sf+lr (as files said)
            if operator.sparse.nnz:
                return "rpca"
            return "tsvd" if operator.singular_values else "nmf"
        return "sf+s" if operator.sparse.nnz else "sf+lr"
    return _operator_method(_operator_kind(operator))


def _operator_method(op_kind: str) -> str:
    """The method that names a fit of the operator kind ``op_kind``: the one method that makes it (``"csr"``:
    ``"sparse"``, as a comparison's row says; ``"butterfly-padded"``: ``"butterfly-hier"``), else the kind
    itself.  (A SparseOperator saved on its own was a "csr" fit in ``info``, a "sparse" one in a comparison.)"""
    from ._base import methods

    makers = [name for name, spec in methods().items() if op_kind in (spec.operators or ())]
    return makers[0] if len(makers) == 1 else op_kind


def _write_arrays(f, operator) -> None:
    """The operator's arrays and attributes, at the root or in the group ``parts`` (its ``layout``)."""
    arrays, attrs = operator.to_arrays()
    where = f if operator.layout == "root" else f.create_group("parts")
    for name, value in attrs.items():
        where.attrs[name] = value
    for name, array in arrays.items():
        array = np.asarray(array)
        # gzip needs chunks, which an empty dataset cannot have.
        dataset = where.create_dataset(name, data=array, compression="gzip" if array.size > 1024 else None)
        if name in operator.dataset_descriptions:
            dataset.attrs["description"] = operator.dataset_descriptions[name]


def save_factors(
    path: str | os.PathLike,
    operator,
    *,
    kind: str | None = None,
    loss_history: Sequence[float] | np.ndarray = (),
    fit: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    force: bool | FileStamp = True,
) -> None:
    """Write a fitted surrogate to an HDF5 file, atomically (layout: the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The HDF5 file to write (its folder must exist).
    operator : fitted estimator, ChordOperator, HybridOperator or a registered operator
        A fitted estimator (e.g. ``ChordSF().fit(X)``) records its fit, settings and
        loss history itself.
    kind : str, optional
        The method that made it (default: ``"sf"`` for a ChordOperator; for a
        HybridOperator ``"sf+s"`` or ``"sf+lr"`` with Chord factors, and without
        them ``"rpca"`` (a sparse part), ``"nmf"`` (``U V^T``) or ``"tsvd"``
        (``U diag(s) V^T``; a randomized SVD's too: name it here); the operator's
        kind otherwise).  A fitted estimator records its own method.
    loss_history : sequence of float, default=()
        The loss after each iteration (empty: the estimator's ``loss_curve_``, if any).
    fit, settings, source : dict, optional
        What was fitted, how, and from which input (recorded as JSON).
    force : bool or FileStamp, default=True
        Overwrite an existing file; False: an existing file is left alone and
        the fit is kept beside it (:class:`~sfapprox._atomic.OutputExistsError`);
        a :class:`~sfapprox._atomic.FileStamp`: overwrite only that file (a
        checkpoint this run wrote), else as False.

    Raises
    ------
    SfapproxError
        For an operator that is not a registered kind.
    OutputError
        When the file cannot be written (one line; no partial file is left).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f.h5")
    >>> save_factors(p, ChordOperator(np.full((3, 8, 4), 0.25)))
    >>> load_factors(p).n_stored
    96
    """
    import h5py

    check_path(path)
    if callable(getattr(operator, "fit", None)) and not hasattr(operator, "operator_"):
        raise NotFittedError(f"this {type(operator).__name__} is not fitted yet; call fit(X) before saving it")
    if hasattr(operator, "operator_"):  # a fitted estimator: record what it is and how it was made
        estimator = operator
        operator = estimator.operator_
        kind = kind or estimator.method_name
        loss_history = loss_history if len(loss_history) else getattr(estimator, "loss_curve_", ())
        fit = fit or _fit_record(estimator)
        settings = settings or {k: v for k, v in estimator.get_params().items() if not callable(v)}
    op_kind = _operator_kind(operator)  # first: None or a list has no shape (an AttributeError below)
    n = operator.shape[0]
    chord = operator if isinstance(operator, ChordOperator) else getattr(operator, "chord", None)
    if isinstance(chord, ChordOperator) and chord.n_factors == 0:
        # the empty product (the identity) has no values to write, and a file without factors reads as damaged
        # (a hybrid came back without its identity term: another matrix with the same count)
        raise ParameterError("a Chord part of no factors (the identity) cannot be saved; give it at least one factor")
    history = _loss_history(loss_history)
    records = {key: _json_record(key, value) for key, value in
               (("fit", fit or {}), ("settings", settings or {}), ("source", source or {}),
                ("versions", library_versions()))}
    if kind is not None and not (isinstance(kind, str) and kind.strip()):
        raise ParameterError(f"kind={kind!r} must be the name of the method that made the fit (a string)")
    mismatch = kind and _method_mismatch(kind, op_kind)
    if mismatch:  # a file load_factors would refuse as edited
        raise ParameterError(f"kind={kind!r} does not fit this {type(operator).__name__}: {mismatch}")
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
        _write_arrays(f, operator)
        where = "" if operator.layout == "root" else " (arrays in the group 'parts')"
        f.attrs["description"] = f"An sfapprox fit of a {n:,} x {n:,} matrix A{where}. {operator.description}"
        f.create_dataset("loss_history", data=history).attrs["description"] = _LOSS_HISTORY
        for key, text in records.items():
            f.attrs[key] = text
    # The view released on the way out, an error's too: a failed write's traceback keeps it alive with the
    # buffer, and the garbage collector then met a BytesIO with its data still exported (Python 3.13: an
    # "Exception ignored ... BufferError" printed; 3.12.1: a segmentation fault)
    with buffer.getbuffer() as view:
        write_bytes(path, view, force=force)


def _loss_history(values) -> np.ndarray:
    """``save_factors``'s ``loss_history`` as the file holds it: finite floats, one per iteration (None:
    none).  Checked here: a file written with NaN, a scalar or a table in it read back as damaged."""
    try:
        history = np.asarray(() if values is None else values, dtype=np.float64)
    except (TypeError, ValueError):
        history = None
    if history is None or history.ndim != 1 or not np.isfinite(history).all():
        raise ParameterError(f"loss_history must be a sequence of finite numbers, one per iteration; got {values!r:.80}")
    return history


def _json_record(key: str, value) -> str:
    """One of the file's JSON records (``fit``, ``settings``, ``source``): a value JSON cannot hold is
    refused by name, not as json's TypeError."""
    try:
        return json.dumps(jsonable(value), allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{key}= must hold numbers, strings, lists and dicts only (written as JSON): {exc}") from None


def _fit_record(est) -> dict[str, Any]:
    """What a fitted estimator reached: its stored count, errors, time, stop reason and parameters."""
    record = {"method": est.method_name, "nnz": int(est.n_stored_), "seconds": float(est.seconds_),
              "stop_reason": est.stop_reason_}
    for name in ("fro_error_", "rel_error_", "n_iter_"):
        if getattr(est, name, None) is not None:
            record[name.rstrip("_")] = getattr(est, name)
    # the record's own keys win: a method's parameter of the same name (sparse's "nnz", X's non-zeros)
    # replaced the stored count (1,024 recorded for 613 stored, over a budget of 614)
    return {**est.params_, **record}


def result_path(folder: str | os.PathLike, matrix: str, method: str) -> Path:
    """Where :func:`save_results` writes ``method``'s fit of ``matrix``: ``folder/<matrix>.<method>.h5``.

    Parameters
    ----------
    folder : str or os.PathLike
        The results folder.
    matrix : str
        The matrix's name.
    method : str
        The method's name.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ParameterError
        Where the file's name is longer than the folder's file system takes (255 bytes, usually): a matrix
        named with 250 bytes was fitted, and its file then failed ("File name too long"), the fit lost.
        Refused, not shortened: the name is how a fit is found again (``compare --with``, a later
        ``--save-factors --force`` replacing it), and ``compare --save-factors`` refuses it the same way.
    """
    path = Path(folder) / f"{matrix}.{method}.h5"
    check_name_length(path, hint=RESULT_NAME_HINT)
    return path


#: How a fit's file name too long (:func:`result_path`) is put right.
RESULT_NAME_HINT = ("each fit is named FOLDER/<matrix>.<method>.h5; give the matrix file a shorter name (a symbolic "
                    "link to it will do)")


#: Endings of an HDF5 file's name: a folder for the fits (:func:`check_results_folder`) that does not exist yet
#: and ends so is taken for a file's name.
FILE_SUFFIXES = (".h5", ".hdf5", ".he5", ".hdf")


def check_results_folder(folder: str | os.PathLike, matrix: str, methods, *, force: bool = False,
                         inputs=(), reading: dict[str, Any] | None = None) -> list[Path]:
    """Refuse, before any fitting, a :func:`save_results` folder that could not take the fits.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder :func:`save_results` will write to (need not exist).
    matrix : str
        The matrix's name.
    methods : iterable of str
        The rows whose fits will be written (the methods, and the names of included fits).
    force : bool, default=False
        Allow existing fit files (they will be overwritten).
    inputs : iterable of path, default=()
        Files the run reads (the matrix, included fits): never overwritten, not even with ``force``.
    reading : dict, optional
        What picked the matrix in its file (a loaded matrix's ``recipe``: ``{"var": ...}``): a fit of
        another variable of the file (a model's other weight) in the folder is said to be one.

    Returns
    -------
    list of pathlib.Path
        The files the fits will be written to (for a check that no other output names them).

    Raises
    ------
    ParameterError
        When ``folder`` is a file, names one (a new folder whose name ends in ``.h5``), cannot be written
        to (or created), or a fit's file exists already
        (without ``force``), is one of ``inputs``, a loop of symbolic links, or a named pipe, a device
        or a socket (even with ``force``).
    """
    folder = Path(folder)
    resolved_path(folder)  # a loop of links: one error line
    if folder.exists() and not folder.is_dir():
        raise ParameterError(f"{folder}: the fits need a folder, and this is a file")
    if not folder.exists() and folder.suffix.lower() in FILE_SUFFIXES:
        # `--save-factors fits.h5` made a folder named fits.h5, each fit a file in it: not what was asked
        raise ParameterError(f"{folder}: the fits need a folder (one file per method, FOLDER/<matrix>.<method>.h5), "
                             f"and this names a file; give a folder (such as {folder.with_suffix('')}), or "
                             "'sfapprox fit --out FILE.h5' for one SF fit")
    # Writable (or creatable) now, not after the fitting: an unwritable folder lost every fit's file.
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ParameterError(f"{folder}: cannot be created, {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "folder is not writable" if existing == folder else f"cannot be created, {existing} is not writable"
        raise ParameterError(f"{folder}: {what}; choose another folder for the fits")
    targets = [result_path(folder, matrix, method) for method in methods]
    for target in targets:
        resolved_path(target)
        for source in inputs:
            with contextlib.suppress(OSError):
                if os.path.samefile(target, source):  # the fit it scored would be replaced by its own row's
                    raise ParameterError(f"{target}: is this run's input; choose another folder for the fits")
        try:  # before "already exists": --force would not make it a file
            check_named_file(target, "choose another folder for the fits")
        except OutputError as exc:
            raise ParameterError(str(exc)) from None
        if target.exists() and not force:
            other = _other_variable(target, reading)
            if other is not None:  # the fits of a file's variables share its name: --var b after --var a
                raise ParameterError(f"{target}: already holds the fit of {other} (this run reads "
                                     f"{(reading or {}).get('var')!r}); save to another folder, or use "
                                     f"{parameter('force', True)} to overwrite it")
            raise ParameterError(f"{target}: already exists; use {parameter('force', True)} to overwrite it")
    return targets


def _other_variable(target: Path, reading: dict[str, Any] | None) -> str | None:
    """The variable a saved fit at ``target`` was made from (``'a.weight' of model.pt``), where it is another
    than ``reading``'s (None where it is the same, not recorded, or the file is not a readable saved fit)."""
    import h5py

    from .io._common import refuse_special

    try:
        refuse_special(target)  # (a FIFO there would block the open)
        with h5py.File(target, "r") as f:  # its attribute alone: load_factors would read the factors too
            source = json.loads(f.attrs.get("source", "{}"))
        source = source if isinstance(source, dict) else {}
    except Exception:  # noqa: BLE001 - any file there is refused as existing; this only words the message
        return None
    recipe = source.get("recipe")
    old, new = (recipe.get("var") if isinstance(recipe, dict) else None), (reading or {}).get("var")
    if not isinstance(old, str) or old == new:
        return None
    return f"{old!r} of {source['path']}" if source.get("path") else repr(old)


def input_record(source) -> dict[str, Any]:
    """What a saved fit records of its input: a loaded file's name, path, SHA-256 and format, or a
    source's (the file it was read from, when it was, and how it made the matrix: its ``recipe``).

    Parameters
    ----------
    source : LoadedMatrix or MatrixSource
        The input.

    Returns
    -------
    dict
    """
    from .sources import MatrixSource

    if isinstance(source, MatrixSource):
        return {"name": source.name, "path": source.file, "sha256": source.file_sha256, "format": source.kind,
                "recipe": source.recipe}
    record = {"name": source.name, "path": source.path, "sha256": source.sha256, "format": source.format}
    recipe = getattr(source, "recipe", None)
    return {**record, "recipe": dict(recipe)} if recipe else record


def save_results(comparison, folder: str | os.PathLike, *, source=None, force: bool = False) -> list[Path]:
    """Write every fitted row of a comparison to ``folder/<matrix>.<method>.h5`` (:func:`result_path`).

    Rows without an operator (not applicable, failed) are skipped.  The
    folder is created.  A file that cannot be written (taken meanwhile, a
    full disk) costs that file alone: every other row is still written.

    Parameters
    ----------
    comparison : Comparison
        What :func:`~sfapprox.compare` returned; its ``settings`` are recorded
        in each file.
    folder : str or os.PathLike
        The folder to write to.
    source : LoadedMatrix, optional
        The input, recorded in each file (name, path, SHA-256, format).
    force : bool, default=False
        Overwrite existing files; without it an existing file is left alone
        and the fit is kept beside it (:class:`~sfapprox._atomic.OutputExistsError`).

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    OutputExistsError or OutputError
        The first file that could not be put in place, once every row was tried; the others' messages
        are its notes.  A fit's file that is a named pipe, a device or a socket is one of them (written
        through, a pipe waited for a reader; :func:`check_results_folder` refuses it before any work).
    """
    from ._atomic import OutputError, OutputExistsError

    writers = result_writers(comparison, folder, source=source, force=force)  # (a name too long: no folder made)
    Path(folder).mkdir(parents=True, exist_ok=True)
    written, failures = [], []
    for write in writers:
        try:
            written.append(write())
        except (OutputExistsError, OutputError) as exc:
            failures.append(exc)
    if failures:
        for other in failures[1:]:
            failures[0].add_note(str(other))
        raise failures[0]
    return written


def result_writers(comparison, folder: str | os.PathLike, *, source=None,
                   force: bool = False) -> list[Callable[[], Path]]:
    """One step per fitted row of a comparison, each writing that row's file as :func:`save_results` does
    and returning its path.

    Steps, not one call: a command runs each whatever became of the others and says each failure in a
    line of its own (two runs saving into one folder at once: the first file found taken had stopped
    the rest, whose fits were neither written nor kept, and nothing said so).  Each step creates the
    folder where it is missing.

    Parameters
    ----------
    comparison, folder, source, force
        As for :func:`save_results`.

    Returns
    -------
    list of callable
    """
    name = comparison.matrix.get("name", "matrix")
    origin = {} if source is None else input_record(source)
    return [functools.partial(_save_row, comparison, r, result_path(folder, name, r.method), origin, force)
            for r in comparison.results if r.operator is not None]


def _save_row(comparison, r, target: Path, origin: dict[str, Any], force: bool) -> Path:
    fit = {**r.params, "method": r.method, "status": r.status, "nnz": r.nnz, "fro_error": r.fro_error,
           "rel_error": r.rel_error, "seconds": r.seconds}  # the row's own keys win (see _fit_record)
    history = getattr(r.estimator, "loss_curve_", ())
    target.parent.mkdir(parents=True, exist_ok=True)
    check_named_file(target, "choose another folder for the fits")  # (one put there during the run)
    save_factors(target, r.operator, kind=r.method, loss_history=history, fit=fit,
                 settings=comparison.settings, source=origin, force=force)
    return target


# =============================================================================== reading
def is_factors_file(path: str | os.PathLike) -> bool:
    """True for an HDF5 file that sfapprox wrote with :func:`save_factors` (any version).

    Parameters
    ----------
    path : str or os.PathLike
        Any file; one that cannot be opened as HDF5 gives False.

    Raises
    ------
    InputError
        For an HDF5 file another program holds open for writing (HDF5's file lock): what it is cannot
        be told now, and "not a saved fit" had its user write again a fit that was whole.
    """
    import h5py

    from .io._common import special_file

    if special_file(path) is not None:  # h5py's open of a named pipe blocks until a writer comes
        return False
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("format") in (FACTORS_FORMAT, LEGACY_FORMAT)
    except (OSError, ValueError) as exc:
        if _locked(exc):
            raise _locked_error(path) from None
        return False


def _locked(exc: BaseException) -> bool:
    """Whether h5py's open failed on HDF5's file lock: another program has the file open for writing."""
    return isinstance(exc, OSError) and "unable to lock file" in str(exc).lower()


def _locked_error(path: str | os.PathLike) -> InputError:
    return InputError(f"{os.fspath(path)}: another program holds it open for writing (HDF5's file lock), so it "
                      "cannot be read now; close it there (or let that program finish), then run this again")


def _expected_shape(shape: tuple | None, ndim: int) -> str:
    """The shape a factors file's dataset should have, as messages write one (``3 x any``; None in ``shape``:
    any length), or its dimensions alone (``2 dimensions``) where only they are checked."""
    if shape is None:
        return f"{ndim} dimensions"
    return " x ".join("any" if s is None else f"{s:,}" for s in shape)


class _Reader:
    """Checked reads from an open factors file: self-contained, sized, typed, finite."""

    def __init__(self, f, path: Path, max_memory: int | None):
        self.f, self.path, self.max_memory = f, path, max_memory
        self.budget = 0

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.path}: {what}; the file is damaged or was edited after sfapprox wrote it")

    def array(self, name: str, *, ndim: int, kind: str = "f", shape: tuple | None = None, where=None) -> np.ndarray:
        import h5py

        from .io._hdf5 import check_dataset

        node = (where or self.f).get(name)
        if node is None:
            raise self.fail(f"dataset {name!r} is missing")
        if not isinstance(node, h5py.Dataset):
            raise self.fail(f"{name!r} is not a dataset")
        check_dataset(node, self.path, name)
        if len(node.shape) != ndim or (shape is not None and any(s is not None and s != d for s, d in zip(shape, node.shape))):
            raise self.fail(f"dataset {name!r} has shape {shape_text(node.shape)}, expected {_expected_shape(shape, ndim)}")
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
            data = np.asarray(self._fits_int64(name, data), dtype=np.int64)
        return data

    def _fits_int64(self, name: str, data: np.ndarray) -> np.ndarray:
        """``data``, refused where it holds unsigned integers beyond int64: numpy's cast wraps them, and
        an edited file's 2^64 - 1 was read as -1 without a word (a value, not only a position)."""
        data = np.asarray(data)
        if data.dtype.kind == "u" and data.size and int(data.max()) > np.iinfo(np.int64).max:
            raise self.fail(f"dataset {name!r} holds {int(data.max())}, beyond the largest 64-bit signed "
                            f"integer ({np.iinfo(np.int64).max}) it is read as")
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


def _read_operator(r: _Reader, kind: str, n: int):
    """The registered operator of ``kind``, from its arrays (checked by the reader, then by the class)."""
    cls = operator_class(kind)
    if cls is None:
        raise InputError(f"{r.path}: unknown operator kind {kind!r} (known: {', '.join(operator_kinds())}); "
                         "the file may come from a newer sfapprox")
    import h5py

    where = r.f if cls.layout == "root" else r.f.get("parts")
    if where is None:
        raise r.fail("group 'parts' is missing")
    if not isinstance(where, h5py.Group):  # a dataset (or link) where the group belongs
        raise r.fail("'parts' is not a group")

    names = [name for name, node in where.items() if isinstance(node, h5py.Dataset) and name != "loss_history"]
    arrays = {name: r.array(name, ndim=len(where[name].shape), where=where,
                            kind="i" if where[name].dtype.kind in "iu" else "f") for name in names}
    try:
        op = cls.from_arrays(arrays, dict(where.attrs))
    except (KeyError, ValueError, TypeError) as exc:
        what = f"dataset {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else str(exc)
        raise r.fail(what) from None
    if op.shape != (n, n):
        raise r.fail(f"its parts make a {shape_text(op.shape)} operator, but the file says n = {n:,}")
    if isinstance(op, (ChordOperator, HybridOperator)) and "n_factors" in where.attrs:
        # 'values' cut to fewer factors with h5py (n_stored set to match) loaded as a fit of fewer factors
        stated = _attr_int(where, "n_factors", r.path)
        if stated != op.n_factors:
            raise r.fail(f"it says it has {counted(stated, 'factor')} but holds {op.n_factors:,}")
    # Parts this kind does not read are another kind's: a monarch+lr file edited to say 'monarch' loaded as
    # its Monarch part alone, its low-rank part dropped without a word.
    # (by name: to_arrays copied a hybrid's sparse part to learn them)
    unread = sorted(set(names) - set(op.array_names()))
    if unread:
        raise r.fail(f"it holds {', '.join(map(repr, unread))}, which a {kind!r} operator does not have")
    return op


def _method_mismatch(method: str, op_kind: str) -> str | None:
    """Why a fit of ``method`` cannot be an operator of ``op_kind`` (None where it can, or where ``method``
    is no method sfapprox knows: a name a user gave, ``saved:fit``), from the method's declared operators."""
    from ._base import methods

    spec = methods().get(method)
    if spec is None or not spec.operators or op_kind in spec.operators:
        return None
    return (f"a {method} fit is a {' or '.join(repr(k) for k in spec.operators)} operator, not a {op_kind!r} "
            "one")


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
    if op_kind == "chord" and "values" in f and getattr(f["values"], "shape", (None,))[:1] == (0,):
        raise r.fail("it holds no factors")  # (a group where the dataset belongs: the reader below says so)
    operator = _read_operator(r, op_kind, n)
    # The method it names must make this kind: an SF file edited to say 'tsvd' was described by info as
    # "a saved tsvd fit (ChordOperator)".
    method = str(f.attrs.get("kind", "sf"))
    if method == op_kind:  # an operator saved alone by an sfapprox that named its fit by its kind ("csr")
        method = _operator_method(op_kind)
    mismatch = _method_mismatch(method, op_kind)
    if mismatch:
        raise r.fail(f"it names the method {method!r}, but {mismatch}")
    if "n_stored" in f.attrs and _attr_int(f, "n_stored", path) != operator.n_stored:
        raise r.fail(f"it says it stores {int(f.attrs['n_stored']):,} numbers but holds {operator.n_stored:,}")
    history = r.array("loss_history", ndim=1) if "loss_history" in f else np.zeros(0)
    return operator, history, method


def _check_source(source: dict, path: Path) -> None:
    """The ``source`` record as :func:`input_record` writes it: text fields (or null) and a ``recipe``
    object.  What reads it (``compare --with``'s notes) slices the SHA-256 and walks the recipe: a
    number there was a TypeError traceback."""
    for field in ("name", "path", "sha256", "format"):
        value = source.get(field)
        if value is not None and not isinstance(value, str):
            raise InputError(f"{path}: attribute 'source' has {field} = {value!r:.60}, not text; the file was edited "
                             "(write the fit again)")
    recipe = source.get("recipe")
    if recipe is not None and not isinstance(recipe, dict):
        raise InputError(f"{path}: attribute 'source' has recipe = {recipe!r:.60}, not a JSON object; the file was "
                         "edited (write the fit again)")


def load_factors(path: str | os.PathLike, *, max_memory: int | str | None = None) -> SavedFactors:
    """Read a fit written by :func:`save_factors`, validating it as an input.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save_factors` (any format version 1-4).
    max_memory : int or str, optional
        Bytes (or a size such as ``"4G"``, as ``--max-memory`` reads it) the datasets may take once read (default: 80% of the
        physical memory); checked from the header, before reading.

    Returns
    -------
    SavedFactors
        The operator, its loss history and the recorded fit, settings,
        source, versions and kind.

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

    check_path(path)
    max_memory = check_values({"max_memory": max_memory}, {"max_memory": MEMORY_LIMIT}, "load_factors")["max_memory"]
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a factors file (.h5)")
    from .io._common import refuse_special

    refuse_special(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except PermissionError:
        raise InputError(f"{path}: cannot be read (permission denied); check its permissions") from None
    except OSError as exc:
        if _locked(exc):  # a whole fit, said to be damaged: "write it again"
            raise _locked_error(path) from None
        # h5py's own words ("file signature not found", "truncated file: eof = ...") said neither what the
        # file is nor what to do
        what = "truncated (cut short while written or copied)" if "truncated" in str(exc) else \
            "not an HDF5 file, or a damaged one"
        raise InputError(f"{path}: {what}; give a factors file written by 'sfapprox fit --out', "
                         "'compare --save-factors' or save_factors, or write it again") from None
    try:
        with f:
            operator, history, kind = _read(f, path, max_memory)
            meta = {}
            for key in ("fit", "settings", "source", "versions"):
                try:
                    meta[key] = json.loads(f.attrs.get(key, "{}"))
                except (TypeError, ValueError):
                    raise InputError(f"{path}: attribute {key!r} is not valid JSON; the file was edited") from None
                if not isinstance(meta[key], dict):
                    raise InputError(f"{path}: attribute {key!r} is not a JSON object; the file was edited")
            _check_source(meta["source"], path)
    except SfapproxError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: cannot read sfapprox factors ({' '.join(str(exc).split())})") from None
    return SavedFactors(operator, history, **meta, kind=kind)
