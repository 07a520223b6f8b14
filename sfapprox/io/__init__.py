"""Loading square matrices from files: one entry point, one reader per format.

:func:`load_matrix` picks a reader by extension (:func:`detect_format`, or
``format=``), reads headers before allocating, validates the result once with
:func:`~sfapprox._validation.check_square_matrix`, and returns a
:class:`LoadedMatrix` that records *how* the file became a matrix (``notes``)
and the file's SHA-256.  Every problem with the input is an
:class:`~sfapprox.InputError` whose one-line message starts with the path;
memory refusals are :class:`~sfapprox.ResourceError`; bad options are
:class:`~sfapprox.ParameterError`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .._errors import InputError, ParameterError, parameter
from .._params import MEMORY_LIMIT
from .._settings import check_text_marks, recorded_text_marks
from .._validation import check_memory, check_path, check_square_matrix, estimate_dense_bytes
from ..factors import FILE_SUFFIXES, is_factors_file
from ..formats import shell_command
from ._common import DEFAULTS, Options, ReadResult, Source, check_order, fail, strip_compression
from ._covariance import covariance_of, read_covariance
from ._hb import read_hb
from ._image import read_image
from ._linqs import companion, read_linqs
from ._matlab import read_mat
from ._mtx import read_mtx
from ._numpy import read_npy, read_npz
from ._pajek import read_pajek
from ._text import read_csv, read_ijv
from ._weights import list_weights, read_safetensors, read_torch

__all__ = ["LoadedMatrix", "load_matrix", "open_matrix", "read_points", "as_loaded", "detect_format",
           "available_formats", "format_extensions", "input_files"]


# ---------------------------------------------------------------------------
# format registry
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Format:
    #: One line for ``available_formats``; a function where it names reading options, called when the
    #: formats are listed so that they are named as the reader passes them (``var=`` to Python, ``--var``
    #: on ``sfapprox formats``): the line was written once, for one of them or a mix of both.
    description: str | Callable[[], str]
    extensions: tuple[str, ...]
    reader: Callable[[Source, Options], ReadResult] | None


def _needs_covariance(src: Source, opts: Options) -> ReadResult:
    raise src.fail(
        "LIBSVM files hold a samples x features table, not a square matrix",
        f"use {parameter('covariance', True)} for the feature covariance, or {parameter('kernel', 'rbf')} for the "
        "kernel matrix of its points",
    )


#: An attention file's arrays, named as a pattern (quoted for Python, as a string it stands for).
_QK = "'Q,K'"

_FORMATS: dict[str, _Format] = {
    "mtx": _Format(lambda: "Matrix Market (.mtx, .mtx.gz/.bz2/.xz); header-less 'i j value' files need "
                   f"{parameter('format', 'ijv')}", (".mtx",), read_mtx),
    "hb": _Format("Harwell-Boeing / Rutherford-Boeing, real assembled (.rb, .rua, .rsa, .rza, .hb)", (".rb", ".rua", ".rsa", ".rza", ".hb"), read_hb),
    "mat": _Format(lambda: f"MATLAB .mat v4-v7 and v7.3 (HDF5); {parameter('var')} picks a variable "
                   f"({parameter('var', 'Problem.A')} for fields)", (".mat",), read_mat),
    "pajek": _Format(lambda: f"Pajek network (.net, .paj); {parameter('network')} and {parameter('relation')} pick one, "
                     f"{parameter('two_mode', shown='rows|cols|bipartite')}", (".net", ".paj"), read_pajek),
    "npy": _Format("NumPy array (.npy), no pickles", (".npy",), read_npy),
    "npz": _Format(lambda: f"NumPy archive or scipy.sparse save_npz (.npz); {parameter('var')} picks an array", (".npz",),
                   read_npz),
    "safetensors": _Format(lambda: f"a network's weights (.safetensors); {parameter('var')} picks a square tensor",
                           (".safetensors",),
                           read_safetensors),
    "torch": _Format(lambda: "a PyTorch state dict (.pt, .pth) or Lightning checkpoint (.ckpt), loaded with "
                     "weights_only=True (no code unpickled, other objects left unbuilt); "
                     f"{parameter('var')} picks a square tensor", (".pt", ".pth", ".ckpt"), read_torch),
    "csv": _Format("dense text table (.csv ',' or ';' with decimal commas, .tsv tab, .txt/.dat whitespace); "
                   "header row skipped", (".csv", ".tsv", ".txt", ".dat"), read_csv),
    "ijv": _Format(lambda: f"header-less 'i j [value]' triplets (.ijv, .coo, .edges); {parameter('mirror', shown='auto|none|mirror')}",
                   (".ijv", ".coo", ".edges"), read_ijv),
    "linqs": _Format("LINQS citations (.cites with .content beside it)", (".cites", ".content"), read_linqs),
    "image": _Format(
        lambda: f"grayscale image in [0, 1] (.png, .jpg, .pgm, .tif, ...); {parameter('resize')}, "
                f"{parameter('square', shown='crop|resize')}, {parameter('gradient', True)}",
        (".png", ".jpg", ".jpeg", ".pgm", ".ppm", ".pbm", ".bmp", ".tif", ".tiff", ".gif", ".webp"),
        read_image,
    ),
    "libsvm": _Format("LIBSVM/svmlight table (.svm, .libsvm), not a square matrix itself", (".svm", ".libsvm"),
                      _needs_covariance),
    "covariance": _Format("features x features sample covariance of a table (.csv/.tsv/.txt/.dat, .npy, .libsvm)", (), None),
    "attention": _Format(lambda: "attention map softmax(Q K^T / sqrt(d)) of an .npz holding q and k "
                         f"({parameter('var', shown=_QK)} names others); read from columns, "
                         "never formed unless it fits", (), None),
}

#: Formats whose samples x features tables ``covariance=True`` accepts.
_TABLE_FORMATS = {"csv": "csv", "npy": "npy", "libsvm": "libsvm"}

#: Which options each format understands; others are refused, not ignored.
_OPTION_FORMATS = {
    "var": {"mat", "npz", "safetensors", "torch"},
    "network": {"pajek"},
    "relation": {"pajek"},
    "two_mode": {"pajek"},
    "gradient": {"image"},
    "resize": {"image"},
    "square": {"image"},
    # a text table's (a covariance's or a kernel's table too: read as format "csv") and triplets'
    "delimiter": {"csv", "ijv"},
    "decimal": {"csv", "ijv"},
}
#: How a refusal of an option names the files of a format, where its key would not say what they are
#: (a ".txt" table is format "csv": "applies to csv files" read as if a .txt did not take it).
_OPTION_FILES = {"csv": "text tables (.csv/.tsv/.txt/.dat)", "ijv": "triplet files (.ijv/.coo/.edges)"}


def available_formats() -> dict[str, str]:
    """Format keys accepted by ``load_matrix(format=...)`` with a description each.

    Returns
    -------
    dict of str to str
        Format key -> one-line description (used by ``--help``); a table format says it is read as
        points by a kernel and as samples by a covariance.

    Examples
    --------
    >>> "mtx" in available_formats()
    True
    """
    return {key: (f.description if isinstance(f.description, str) else f.description())
                 + (_table_uses() if key in _TABLE_FORMATS else "") for key, f in _FORMATS.items()}


def _table_uses() -> str:
    """What a table format (:data:`_TABLE_FORMATS`) is read as (LIBSVM's text said covariance only, though a
    kernel reads its points too), its options as the reader passes them (``kernel=`` or ``--kernel``)."""
    return (f"; with {parameter('kernel')} a table of points (one per row), with {parameter('covariance', True)} "
            "of samples x features")


def format_extensions(key: str) -> tuple[str, ...]:
    """The file extensions read as format ``key`` (none for options-only formats).

    Parameters
    ----------
    key : str
        A key of :func:`available_formats` (another is a KeyError).

    Returns
    -------
    tuple of str
        Extensions with their dot (``".mtx"``).

    Examples
    --------
    >>> format_extensions("pajek")
    ('.net', '.paj')
    """
    return _FORMATS[key].extensions


def _known_extensions() -> str:
    return ", ".join(e for f in _FORMATS.values() for e in f.extensions)


def _detect_input_format(path: str | os.PathLike) -> str:
    """:func:`detect_format`, and for a saved fit (an HDF5 factors file) what to do with it instead."""
    try:
        return detect_format(path)
    except InputError:
        if is_factors_file(path):
            raise fail(os.fspath(path), "is a saved fit, not a matrix",
                       f"compare it with the matrix it approximates: {shell_command('compare', 'MATRIX', '--with', os.fspath(path))} "
                       "(API: compare(matrix, include=[path]))") from None
        raise


def _folder_hint(path: str | os.PathLike) -> str:
    """What to do with a folder given as a matrix: name one of its matrix files, or run a batch."""
    known = {e for f in _FORMATS.values() for e in f.extensions}
    try:
        names = sorted(e.name for e in os.scandir(path) if e.is_file()
                       and os.path.splitext(strip_compression(e.name.lower()))[1] in known)
    except OSError:
        names = []
    if not names:
        return "name a matrix file (see 'sfapprox formats' for the types read)"
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"name one of its {len(names)} matrix file(s), e.g. {os.path.join(os.fspath(path), names[0])} ({shown}); "
            "for all of them, list them in a manifest and run 'sfapprox batch'")


def detect_format(path: str | os.PathLike) -> str:
    """Format key for ``path``, by extension (``.gz``, ``.bz2``, ``.xz`` looked through).

    Parameters
    ----------
    path : str or os.PathLike
        A file name; the file need not exist.

    Returns
    -------
    str
        One of the keys of :func:`available_formats`.

    Raises
    ------
    InputError
        For an unknown extension; the message lists the known ones and
        suggests ``format=``.

    Examples
    --------
    >>> detect_format("mesh.mtx.gz")
    'mtx'
    >>> detect_format("Sawmill.net")
    'pajek'
    """
    name = os.path.basename(os.fspath(path)).lower()
    inner = strip_compression(name)
    ext = os.path.splitext(inner)[1]
    for key, fmt in _FORMATS.items():
        if ext and ext in fmt.extensions:
            return key
    if ext in FILE_SUFFIXES:  # the endings factors.py takes for an HDF5 file's, .hdf too
        # sfapprox's own HDF5 files (saved factors) are told apart before this; here, one that is not one
        raise fail(os.fspath(path), "an HDF5 file that is not an sfapprox factors file, or one that cannot be "
                   "opened (truncated or damaged?)",
                   f"a matrix in HDF5 is read as MATLAB v7.3 (rename it .mat or pass {parameter('format', 'mat')})")
    shown = f"extension {ext!r}" if ext else "no extension"
    raise fail(
        os.fspath(path),
        f"unknown file type ({shown}); known extensions: {_known_extensions()}",
        f"pass {parameter('format')}: one of {', '.join(_FORMATS)}",
    )


def _stem(path: str | os.PathLike) -> str:
    """File name without its compressed suffix and without its format extension."""
    name = strip_compression(os.path.basename(os.fspath(path)))
    stem, ext = os.path.splitext(name)
    return stem if ext else name


# ---------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------


@dataclass
class LoadedMatrix:
    """A validated square matrix and a record of how it was loaded.

    Attributes
    ----------
    matrix : numpy.ndarray or scipy.sparse.csr_array
        Square, finite, float64 (dense C-contiguous or canonical CSR).
    name : str
        File stem (``"Sawmill"``; ``"foo"`` for ``foo.mtx.gz``, ``.bz2``, ``.xz``) or the given name.
    path : str or None
        The file as given, None for in-memory arrays.
    format : str
        The reader's format key (one of :func:`available_formats`: "mtx",
        "hb", "mat", "pajek", "npy", "npz", "safetensors", "torch", "csv",
        "ijv", "linqs", "image", "covariance"), or "array" for an in-memory
        array.
    notes : list of str
        Human-readable lines on how the file became this matrix.
    sha256 : str or None
        SHA-256 of the input file's bytes (for LINQS: of ``.cites`` then
        ``.content``); None for in-memory arrays.
    recipe : dict or None
        How the matrix was made from its file: a source's, formed
        (:attr:`~sfapprox.sources.MatrixSource.recipe`: a kernel, its
        bandwidth), or what selected or transformed it in the file, as it was
        read (``var``: the variable or array read, chosen or given; Pajek
        ``network``, ``relation``, ``two_mode``; an image's ``square``,
        ``resize``, ``gradient``; triplets' ``mirror``; a table's
        ``covariance``); None for a file that holds one matrix, read as is.
        A saved fit records it, so a fit of another matrix of the same file
        is told from a fit of this one.
    facts : dict or None
        What its origin knew of it (``symmetric``, ``psd``, ``nonnegative``: a formed source's
        :attr:`~sfapprox.sources.MatrixSource.psd`, say, that a kernel is positive semi-definite),
        which :meth:`summary` reports where its own checks leave a fact unknown (its ``psd`` is only
        ever False or None); None for a matrix read or given as is.

    Examples
    --------
    >>> import numpy as np
    >>> m = as_loaded(np.eye(3), name="I")  # what load_matrix returns for a file
    >>> m.name, m.n, m.format, m.path
    ('I', 3, 'array', None)
    """

    matrix: np.ndarray | sp.csr_array = field(repr=False)
    name: str
    path: str | None
    format: str
    notes: list[str] = field(default_factory=list)
    sha256: str | None = field(default=None, repr=False)
    recipe: dict | None = field(default=None, repr=False)
    facts: dict | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Matrix order N."""
        return int(self.matrix.shape[0])

    @property
    def is_sparse(self) -> bool:
        """True for a ``csr_array``."""
        return sp.issparse(self.matrix)

    @property
    def nnz(self) -> int:
        """Number of nonzero entries (sparse: stored entries, explicit zeros are dropped on load)."""
        if self.is_sparse:
            return int(self.matrix.nnz)
        return int(np.count_nonzero(self.matrix))

    def to_dense(self, *, max_memory: int | str | None = None) -> np.ndarray:
        """The matrix as a float64 C-contiguous ndarray (the stored array if already dense).

        Parameters
        ----------
        max_memory : int, str or None, default=None
            Memory limit in bytes for densifying a sparse matrix, or a size such as ``"4G"``
            (None: 80% of RAM).

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ResourceError
            If the dense copy would exceed ``max_memory``.
        """
        if not self.is_sparse:
            return self.matrix
        check_memory(estimate_dense_bytes(self.n), what=f"{self.name}: dense copy of {self.n:,} x {self.n:,} matrix",
                     limit=MEMORY_LIMIT.to_bytes(max_memory))
        return np.ascontiguousarray(self.matrix.toarray(), dtype=np.float64)

    def _symmetric(self) -> bool:
        A = self.matrix
        if self.is_sparse:
            return (A != A.T).nnz == 0
        return _dense_symmetric(A)

    def summary(self) -> dict:
        """Facts about the matrix, for reports and ``sfapprox info``.

        Returns
        -------
        dict
            Keys "name", "path" and "file" (its file, None for an array), "format", "n", "nnz", "density", "symmetric"
            (exact), "psd" (False where an entry shows the matrix is not positive
            semi-definite: a negative diagonal entry, or ``X_ij^2 > X_ii X_jj`` as
            in a graph without self-loops; else what :attr:`facts` says, a formed
            kernel's True, or None, unknown), "nonnegative",
            "fro_norm", "min", "max", "sha256", "notes".  Sparse matrices are
            never densified.
        """
        A = self.matrix
        n, nnz = self.n, self.nnz
        symmetric = self._symmetric()
        if self.is_sparse:
            values = A.data
            has_zero = nnz < n * n
            lo = float(min(values.min(), 0.0)) if values.size and has_zero else float(values.min()) if values.size else 0.0
            hi = float(max(values.max(), 0.0)) if values.size and has_zero else float(values.max()) if values.size else 0.0
        else:
            values = A
            lo, hi = float(A.min()), float(A.max())
        summary = {
            "name": self.name,
            "path": self.path,
            # the key a matrix source's summary has its file under: a comparison from columns writes
            # "path": "columns" (how it was fitted), and its input file is "file" alone
            "file": self.path,
            "format": self.format,
            "n": n,
            "nnz": nnz,
            "density": nnz / float(n * n),
            "symmetric": symmetric,
            "psd": False if symmetric and _breaks_psd_bound(A) else None,
            "nonnegative": lo >= 0.0,
            "fro_norm": float(np.linalg.norm(np.ravel(values))),
            "min": lo,
            "max": hi,
            "sha256": self.sha256,
            "notes": list(self.notes),
            **({"recipe": dict(self.recipe)} if self.recipe else {}),
        }
        # what the entries leave unknown (psd, short of a proof it is not), its origin may know
        for fact, value in (self.facts or {}).items():
            if summary.get(fact) is None:
                summary[fact] = value
        return summary


#: Side of the tiles :func:`_dense_symmetric` compares (two 32 KiB float64 tiles: both in cache).
_SYMMETRY_TILE = 64


def _dense_symmetric(A: np.ndarray) -> bool:
    """Whether the dense square ``A`` equals its transpose exactly (``np.array_equal(A, A.T)``'s answer),
    tile by tile: each tile of the upper triangle against its mirror tile, stopping at the first that
    differs.  ``np.array_equal(A, A.T)`` made an ``N x N`` boolean temporary and read ``A.T`` a column at
    a time across the whole matrix (1.4 to 3.5 s at N = 8,192 in every ``info`` and ``compare``, where the
    tiles take 0.15 s, and stop at once for a matrix that is not symmetric).

    Examples
    --------
    >>> _dense_symmetric(np.array([[1.0, 2.0], [2.0, 3.0]])), _dense_symmetric(np.array([[1.0, 2.0], [0.0, 3.0]]))
    (True, False)
    """
    n, tile = A.shape[0], _SYMMETRY_TILE
    for i0 in range(0, n, tile):
        i1 = min(n, i0 + tile)
        for j0 in range(i0, n, tile):
            j1 = min(n, j0 + tile)
            if not np.array_equal(A[i0:i1, j0:j1], A[j0:j1, i0:i1].T):
                return False
    return True


#: Relative tolerance of :func:`_breaks_psd_bound` (of the largest diagonal entry; Nyström's own checks').
_PSD_RTOL = 1e-8
#: Entries of a dense matrix's row block in :func:`_breaks_psd_bound` (2 MiB float64 temporaries, and at most a
#: 16th of the matrix: the summary adds no matrix-sized memory to a comparison held to its limit).
_PSD_BLOCK = 1 << 18


def _breaks_psd_bound(A) -> bool:
    """Whether an entry of the symmetric ``A`` rules out positive semi-definiteness: a diagonal entry below
    zero, or ``|A_ij| > sqrt(A_ii A_jj)`` (a zero diagonal with a non-zero in its row: a graph's adjacency).
    By row blocks for a dense ``A`` (no N x N temporary); a sparse one's stored entries.

    Examples
    --------
    >>> _breaks_psd_bound(np.array([[0.0, 1.0], [1.0, 0.0]])), _breaks_psd_bound(np.ones((2, 2)))
    (True, False)
    """
    d = A.diagonal().astype(np.float64)
    atol = _PSD_RTOL * float(np.abs(d).max(initial=0.0))
    if d.size and d.min() < -atol:
        return True
    root = np.sqrt(np.maximum(d, 0.0))
    if sp.issparse(A):  # the stored entries, by blocks of rows (no nnz-sized row index beside A)
        A = A if A.format == "csr" else A.tocsr()
        rows_per_block = max(1, _PSD_BLOCK * d.size // max(1, A.nnz))
        for start in range(0, d.size, rows_per_block):
            lo, hi = A.indptr[start], A.indptr[min(start + rows_per_block, d.size)]
            rows = np.repeat(np.arange(start, min(start + rows_per_block, d.size)),
                             np.diff(A.indptr[start:start + rows_per_block + 1]))
            if np.any(np.abs(A.data[lo:hi]) > root[rows] * root[A.indices[lo:hi]] * (1 + _PSD_RTOL) + atol):
                return True
        return False
    step = max(1, min(_PSD_BLOCK, d.size * d.size // 16) // max(1, d.size))  # temporaries well below A's size
    for start in range(0, d.size, step):
        rows = np.abs(A[start:start + step])
        if np.any(rows > np.outer(root[start:start + step], root) * (1 + _PSD_RTOL) + atol):
            return True
    return False


def as_loaded(X, name: str = "array", max_memory: int | None = None) -> LoadedMatrix:
    """Wrap an in-memory numpy array or scipy sparse matrix as a LoadedMatrix.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix/array
        A square, finite, real matrix.
    name : str, default="array"
        Name used in messages and reports.
    max_memory : int or None, default=None
        Memory limit in bytes for the copies validating it makes (a GPU tensor's in host memory, the
        float64 or canonical CSR copy: :func:`~sfapprox._validation.check_square_matrix`); None: the
        default limit.

    Returns
    -------
    LoadedMatrix
        With ``format="array"``, ``path=None``, ``sha256=None``.

    Raises
    ------
    InputError
        If ``X`` fails :func:`~sfapprox._validation.check_square_matrix`.
    ResourceError
        If a copy of it would be over ``max_memory``.

    Examples
    --------
    >>> as_loaded([[1.0, 2.0], [2.0, 1.0]]).summary()["symmetric"]
    True
    """
    return LoadedMatrix(check_square_matrix(X, source=name, max_memory=max_memory), name, None, "array", [], None)


# ---------------------------------------------------------------------------
# load_matrix
# ---------------------------------------------------------------------------


def _check_options(format: str | None, opts: Options) -> None:
    """ParameterError for option values that are wrong whatever the file."""
    if format is not None and format not in _FORMATS:
        raise ParameterError(f"{parameter('format', format)} is not one of: {', '.join(_FORMATS)}")
    if opts.two_mode not in (None, "rows", "cols", "bipartite"):
        raise ParameterError(f"two_mode={opts.two_mode!r} must be 'rows', 'cols' or 'bipartite'")
    if opts.square not in (None, "crop", "resize"):
        raise ParameterError(f"square={opts.square!r} must be 'crop' or 'resize'")
    if opts.mirror not in ("auto", "none", "mirror"):
        raise ParameterError(f"mirror={opts.mirror!r} must be 'auto', 'none' or 'mirror'")
    check_text_marks(opts.delimiter, opts.decimal)
    # the memory limit as every entry point checks it (bytes, or a size such as "4G", as --max-memory reads it)
    MEMORY_LIMIT.to_bytes(opts.max_memory)
    for name in ("network", "relation", "resize"):
        value = getattr(opts, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ParameterError(f"{name}={value!r} must be a positive integer")
    if opts.var is not None and not isinstance(opts.var, str):
        raise ParameterError(f"var={opts.var!r} must be a string")
    for name in ("gradient", "covariance"):
        value = getattr(opts, name)
        if not isinstance(value, (bool, np.bool_)):  # "no" and "false" are truthy: they read as True
            raise ParameterError(f"{name}={value!r} must be True or False")


def _check_option_use(path: str, fmt: str, opts: Options, covariance: bool,
                      readers: frozenset[str] | None = None) -> None:
    """Refuse options that the chosen format would silently ignore; ``readers``: the formats this caller can
    read at all (a kernel's points are never triplets: the refusal names only those that apply; a covariance's
    table neither)."""
    if readers is None and covariance:
        readers = frozenset(_TABLE_FORMATS)
    for name, formats in _OPTION_FORMATS.items():
        value = getattr(opts, name)
        if value != getattr(DEFAULTS, name) and fmt not in formats:
            raise _option_refusal(path, name, value, fmt, readers)
    if opts.mirror != DEFAULTS.mirror and fmt != "ijv":
        raise ParameterError(f"{path}: option {parameter('mirror')} applies to header-less triplet files (format 'ijv'), not {fmt!r}")
    if covariance and fmt not in _TABLE_FORMATS:
        raise ParameterError(
            f"{path}: {parameter('covariance', True)} needs a samples x features table (.csv/.tsv/.txt/.dat, .npy, .libsvm), not {fmt!r}"
        )


def _option_refusal(path: str, name: str, value: object, fmt: str,
                    readers: frozenset[str] | None = None) -> ParameterError:
    """The refusal of option ``name`` (given as ``value``) for a file of format ``fmt``, which does not read it:
    one message wherever it is refused (a kernel's table too, :func:`~sfapprox.io.read_points`, whose
    ``readers`` leave out the triplet files a table of points never is)."""
    formats = sorted(f for f in _OPTION_FORMATS[name] if readers is None or f in readers)
    named = [_OPTION_FILES[f] for f in formats if f in _OPTION_FILES]
    others = [f for f in formats if f not in _OPTION_FILES]
    files = " and ".join(named + ([f"{'/'.join(others)} files"] if others else []))
    return ParameterError(f"{path}: option {parameter(name, value)} applies to {files}, not {fmt!r}")


def _sha256(src: Source, fmt: str) -> str:
    if fmt != "linqs":
        return src.sha256()
    # A LINQS matrix depends on both files (node order comes from .content).
    cites, content = companion(src)
    digest = hashlib.sha256()
    for part in (cites, content):
        digest.update(part.path.read_bytes())
    return digest.hexdigest()


def load_matrix(
    path: str | os.PathLike,
    *,
    format: str | None = DEFAULTS.format,
    var: str | None = DEFAULTS.var,
    network: int | None = DEFAULTS.network,
    two_mode: str | None = DEFAULTS.two_mode,
    gradient: bool = DEFAULTS.gradient,
    resize: int | None = DEFAULTS.resize,
    square: str | None = DEFAULTS.square,
    covariance: bool = DEFAULTS.covariance,
    mirror: str = DEFAULTS.mirror,
    max_memory: int | str | None = DEFAULTS.max_memory,
    relation: int | None = DEFAULTS.relation,
    keep_sparse: bool = False,
    delimiter: str | None = DEFAULTS.delimiter,
    decimal: str | None = DEFAULTS.decimal,
) -> LoadedMatrix:
    """Load a square matrix from a file.

    Parameters
    ----------
    path : str or os.PathLike
        The file.  ``.gz``, ``.bz2`` and ``.xz`` files are decompressed
        (standard library codecs, under the memory limit).
    format : str or None, default=None
        Format key (see :func:`available_formats`); None detects it from the
        extension.  ``"covariance"`` is the same as ``covariance=True``.  A
        ``.mtx`` is always Matrix Market; header-less ``i j value`` lines in
        a ``.mtx`` need ``format="ijv"``.
    var : str or None, default=None
        MATLAB variable (``"Problem.A"`` for a struct field) or ``.npz`` array.
        Default: the only square numeric one (SuiteSparse ``Problem.A``).
    network : int or None, default=None
        Pajek: which network of a multi-network ``.paj`` (1-based; default 1).
    relation : int or None, default=None
        Pajek: which relation of a multi-relational network (the ``k`` of
        ``*Arcs :k``, ``*Edges :k``, ``*Matrix :k`` or of ``k: i j`` lines).
        None sums all relations (noted).
    two_mode : {"rows", "cols", "bipartite"} or None, default=None
        Pajek 2-mode networks (B is n1 x n2): ``"rows"`` gives B·Bᵀ,
        ``"cols"`` BᵀB, ``"bipartite"`` the n x n adjacency as written.
        None: a declared 2-mode network is projected to rows (noted).
    gradient : bool, default=False
        Image: use the gradient magnitude sqrt(gx² + gy²) (numpy.gradient).
    resize : int or None, default=None
        Image: resample to ``resize x resize`` (LANCZOS).
    square : {"crop", "resize"} or None, default=None
        Image: make a non-square image square by a centre crop to the shorter
        side, or by resampling to the shorter side.
    covariance : bool, default=False
        Treat the file as a samples x features table (rows are samples) and
        load the features x features sample covariance (ddof=1).
    mirror : {"auto", "none", "mirror"}, default="auto"
        Triplet files: ``"auto"`` mirrors entries that all lie in one
        triangle, ``"none"`` keeps them, ``"mirror"`` adds (j, i) for every
        off-diagonal (i, j).
    max_memory : int, str or None, default=None
        Memory limit in bytes, or a size as the command line's ``--max-memory``
        takes it (``"4G"``, ``"500M"``: powers of 1024); None: 80% of
        physical RAM.  Larger inputs are
        refused before they are allocated.  A comparison forms a loaded matrix
        for the methods that need it dense, so a matrix whose dense form exceeds
        the limit is refused from its header (size line, ``*Vertices``, shapes),
        even when it is stored sparse, unless ``keep_sparse``.
    keep_sparse : bool, default=False
        Read a sparse matrix whose dense form exceeds ``max_memory`` (it is
        refused otherwise): returned sparse, for the methods that work from
        its columns (:func:`~sfapprox.io.open_matrix` reads with it and makes
        it a :class:`~sfapprox.sources.SparseSource`).  A surrogate at SF's
        budget must still fit the limit.
    delimiter : {",", ";", "\\t", "tab", "whitespace"} or None, default=None
        Text tables (format ``"csv"``) and triplets (``"ijv"``): what separates
        the cells, as pandas' ``sep=``; None detects it (``.csv`` ``,`` or
        ``;``, ``.tsv`` tab, ``.txt``/``.dat`` blanks unless their data lines
        show ``;`` or ``,``; triplets ``;`` where their first line shows one,
        else blanks and commas).
        A ``.txt`` line ``1,2`` (two cells, or one number with a decimal
        comma) is refused unless this or ``decimal`` says which.
    decimal : {".", ","} or None, default=None
        Text tables and triplets: the decimal mark, as pandas' ``decimal=``
        (``","``: a comma separates no triplet's fields); None detects
        it (decimal commas in a ``;``-separated file).  ``"."`` reads a
        ``;``-separated ``1.000`` as 1.0 (refused as a possible thousands
        separator otherwise); ``","`` reads ``1,000`` as 1.0 and refuses a
        cell with a point.  Never the delimiter's character.

    Returns
    -------
    LoadedMatrix
        Sparse inputs as ``csr_array``, dense ones as ``ndarray``.

    Raises
    ------
    InputError
        For any problem with the file (one line, starting with the path),
        including HDF5 data stored outside the file itself (external storage,
        external links, virtual datasets), which is never read.
    ResourceError
        If the matrix, or its dense form, would exceed ``max_memory``.
    ParameterError
        For invalid options or options that do not apply to the format.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.csv"
    >>> _ = p.write_text("2,1\\n1,2\\n")
    >>> m = load_matrix(p)
    >>> (m.n, m.format, m.summary()["symmetric"])
    (2, 'csv', True)
    """
    if format == "attention":
        raise ParameterError("an attention map is computed from its queries and keys, not loaded: use "
                             "sfapprox.io.open_matrix(path, format='attention') (the CLI does)")
    check_path(path)
    max_memory = MEMORY_LIMIT.to_bytes(max_memory)  # "4G" as the command line's --max-memory 4G, in bytes
    opts = Options(format=format, var=var, network=network, relation=relation, two_mode=two_mode, gradient=gradient,
                   resize=resize, square=square, covariance=covariance, mirror=mirror, max_memory=max_memory,
                   delimiter=delimiter, decimal=decimal)
    if not isinstance(keep_sparse, (bool, np.bool_)):
        raise ParameterError(f"keep_sparse={keep_sparse!r} must be True or False")
    src, fmt, covariance = _open_checked(path, format, opts, keep_sparse=bool(keep_sparse))
    with src.guard():
        if covariance:
            result = read_covariance(src, opts, _TABLE_FORMATS[fmt])
        else:
            result = _FORMATS[fmt].reader(src, opts)
    return _loaded(path, src, fmt, result, max_memory, opts)


def input_files(path: str | os.PathLike) -> list[Path]:
    """The files reading ``path`` opens: the file, and beside a LINQS ``.cites`` (``.content``) file the
    other one; what no output of the command may replace (``--json t.content --force`` overwrote the
    node list a ``t.cites`` comparison had just read).

    Parameters
    ----------
    path : str or os.PathLike
        The file a command reads.

    Returns
    -------
    list of pathlib.Path
        ``path`` first, then the companion file where there is one.

    Examples
    --------
    >>> [p.name for p in input_files("graph.mtx")]
    ['graph.mtx']
    """
    from ._linqs import companion_candidates

    path = Path(path)
    files = [path]
    if strip_compression(path.name).rpartition(".")[2].lower() in ("cites", "content"):
        files += [p for p in companion_candidates(path)[2] if p.exists()]
    return files


def _open_checked(path, format: str | None, opts: Options, *, keep_sparse: bool = False) -> tuple[Source, str, bool]:
    """The file's :class:`Source` (``keep_sparse`` as :func:`load_matrix`'s), its format and whether its
    covariance is asked, after every check of the options and the path that comes before reading."""
    _check_options(format, opts)
    display = os.fspath(path)
    if os.path.isdir(path):
        raise fail(display, "is a folder, not a matrix file", _folder_hint(path))
    src = Source(path, opts.max_memory_bytes, keep_sparse=keep_sparse)
    src.check_exists()
    fmt = format or _detect_input_format(path)
    covariance = opts.covariance
    if fmt == "covariance":
        covariance, fmt = True, detect_format(path)
    _check_option_use(display, fmt, opts, covariance)
    return src, fmt, covariance


def covariance_of_table(path: str | os.PathLike, table: np.ndarray, notes: list[str], *,
                        format: str | None = DEFAULTS.format, max_memory: int | str | None = DEFAULTS.max_memory,
                        sha256: str | None = None, **options) -> LoadedMatrix:
    """What ``load_matrix(path, covariance=True, ...)`` returns, from the table already read from ``path``
    (:func:`~sfapprox.io.open_matrix` reads a table once to size its covariance).

    Parameters
    ----------
    path : str or os.PathLike
        The table's file (named in messages, hashed for the result's provenance).
    table : numpy.ndarray, shape (samples, features)
        Its values, as :func:`read_points` gives them.
    notes : list of str
        What reading it noted.
    format, max_memory, **options
        As :func:`load_matrix` (``covariance`` is implied).
    sha256 : str or None, default=None
        The file's SHA-256 where the reading of the table took it; None: the file is read to hash it.

    Returns
    -------
    LoadedMatrix
    """
    max_memory = MEMORY_LIMIT.to_bytes(max_memory)
    opts = Options(format=format, max_memory=max_memory, **{**options, "covariance": True})
    src, fmt, _ = _open_checked(path, format, opts)
    with src.guard():
        result = covariance_of(src, table, opts, notes)
    return _loaded(path, src, fmt, result, max_memory, opts, sha256=sha256)


def _loaded(path, src: Source, fmt: str, result: ReadResult, max_memory: int | None, opts: Options, *,
            sha256: str | None = None) -> LoadedMatrix:
    """The checked square matrix of a reader's result, with its provenance (``opts``: how it was read, its
    text marks recorded in its recipe; ``sha256``: the file's, where already known)."""
    display = os.fspath(path)
    shape = getattr(result.matrix, "shape", ())
    if sp.issparse(result.matrix) and len(shape) == 2 and shape[0] == shape[1]:
        # Readers refuse from their headers; this catches the matrices whose
        # order is known only now (projections, LINQS), before the CSR copies.
        check_order(int(shape[0]), src, sparse=True)
    matrix = check_square_matrix(result.matrix, source=result.source or display, max_memory=max_memory)
    reading = dict(result.reading or {})
    if fmt in ("csv", "npy"):  # a table read as the matrix or as samples: two matrices of one file
        reading = {"covariance": result.format == "covariance", **reading}
    # a table read with --delimiter ';' --decimal ',' says so: read without them, the file may read otherwise
    reading.update(recorded_text_marks(opts.delimiter, opts.decimal))
    return LoadedMatrix(matrix, _stem(path), display, result.format, result.notes, sha256 or _sha256(src, fmt),
                        recipe=reading or None)


from ._sources import open_matrix, read_points  # noqa: E402  (they read through load_matrix above)
