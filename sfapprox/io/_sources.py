"""Files that become matrix sources: kernels over a point table, attention maps, ``.npy`` too big to load.

:func:`open_matrix` is what every command reads its matrix with: a
:class:`~sfapprox.sources.MatrixSource` when the file describes a matrix
without holding it (``kernel=``: the kernel matrix of a point table;
``format="attention"``: ``softmax(Q K^T / sqrt(d))`` from an ``.npz`` holding
``q`` and ``k``) or holds one too big to load (a ``.npy`` over the memory
limit: memory-mapped, never read whole), and otherwise what
:func:`~sfapprox.io.load_matrix` returns.
"""

from __future__ import annotations

import dataclasses
import io
import os
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import InputError, ParameterError, SfapproxError, parameter
from .._npy import read_npy_header
from .._params import MEMORY_LIMIT
from .._settings import TEXT_MARKS, recorded_text_marks
from .._validation import check_memory, format_bytes, held_bytes, memory_limit
from ..sources import (AttentionMatrix, CovarianceMatrix, KernelMatrix, MatrixSource, SparseSource, formable, formed_need,
                       open_npy)
from ..sources.kernels import check_bandwidth, check_kernel
from ._common import DEFAULTS, Options, Source, fail, one_line, strip_compression
from ._covariance import read_samples
from ._numpy import _load_npy

if TYPE_CHECKING:  # (the package imports this module at its end)
    from . import LoadedMatrix

__all__ = ["open_matrix", "read_points", "check_reading_options"]

#: Point-table formats a kernel reads, by extension.
_POINT_FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".dat": "csv", ".npy": "npy", ".svm": "libsvm",
                  ".libsvm": "libsvm"}


def _stem(path) -> str:
    name = strip_compression(os.path.basename(os.fspath(path)))
    return os.path.splitext(name)[0] or "matrix"


def read_points(path: str | os.PathLike, *, format: str | None = DEFAULTS.format,
                max_memory: int | str | None = DEFAULTS.max_memory, delimiter: str | None = DEFAULTS.delimiter,
                decimal: str | None = DEFAULTS.decimal) -> np.ndarray:
    """A samples x features table from a ``.csv``/``.tsv``/``.txt``/``.dat``, ``.npy`` or LIBSVM file.

    Parameters
    ----------
    path : str or os.PathLike
        The table: one point (sample) per row.
    format : {"csv", "npy", "libsvm"} or None, default=None
        The table's format; None: from the extension.
    max_memory : int, str or None, default=None
        Bytes the table may take, or a size such as ``"4G"`` (as ``--max-memory``
        reads it); None: 80% of physical RAM.
    delimiter, decimal : str or None, default=None
        A text table's delimiter and decimal mark, as :func:`~sfapprox.io.load_matrix` takes them.

    Returns
    -------
    numpy.ndarray, shape (samples, features)

    Raises
    ------
    InputError
        For a file that is not such a table (one line, starting with the path).
    ParameterError
        For a ``delimiter`` or ``decimal`` that is not one, or given for a table that is not text.
    """
    marks = {"delimiter": delimiter, "decimal": decimal}
    from . import _check_options  # the package's own (this module is imported at its end)

    _check_options(format, Options(**marks))
    return _read_table(path, format, MEMORY_LIMIT.to_bytes(max_memory), marks)[0]


def _text_marks(options: dict) -> dict:
    """The text-table options among ``options`` (:data:`~sfapprox._settings.TEXT_MARKS`: a kernel's and a
    covariance's too) that are given."""
    return {name: options[name] for name in TEXT_MARKS if options.get(name) is not None}


def _recorded_marks(options: dict) -> dict:
    """The text marks among ``options`` as a recipe records them (:func:`~sfapprox._settings.recorded_text_marks`)."""
    return recorded_text_marks(options.get("delimiter"), options.get("decimal"))


def _read_table(path, format: str | None, max_memory: int | None,
                marks: dict | None = None) -> tuple[np.ndarray, list[str], Source]:
    """:func:`read_points`'s table (a text table read with ``marks``: its ``delimiter`` and ``decimal``), what
    reading it noted, and the file as it was read (whose :meth:`~Source.sha256` is of that reading: the
    text's bytes, hashed and let go here, or a ``.npy`` hashed as it streamed)."""
    from . import _check_option_use  # the package's own (this module is imported at its end)

    marks = _text_marks(marks or {})
    src = Source(path, max_memory)
    src.check_exists()
    kind = _point_kind(path, format)
    if kind is None:
        raise fail(os.fspath(path), _not_points(path), "pass --format csv|npy|libsvm if it is one")
    # refused, not ignored (an .npy has no delimiter to set), as load_matrix refuses it
    _check_option_use(os.fspath(path), kind, Options(**marks), covariance=False, readers=frozenset({"csv"}))
    with src.guard():
        table, notes = read_samples(src, Options(max_memory=max_memory, **marks), kind)
    # the text's bytes (as large as the file) went on being held beside the table while a kernel, a
    # covariance source or a formed covariance was made from it
    src.release()
    return table, notes, src


def _extension(path) -> str:
    """``path``'s extension, lower case, a compression suffix looked through."""
    return os.path.splitext(strip_compression(os.path.basename(os.fspath(path)).lower()))[1]


def _point_kind(path, format: str | None) -> str | None:
    """How a point table named ``path`` is read ("csv", "npy", "libsvm"): by ``format``, else its
    extension; None for a name that is no such table."""
    from . import _TABLE_FORMATS  # the package's own (this module is imported at its end): covariance's tables

    return _TABLE_FORMATS.get(format or "", _POINT_FORMATS.get(_extension(path)))


def _not_points(path) -> str:
    ext = _extension(path)
    return (f"a kernel needs a table of points (.csv, .tsv, .txt, .dat, .npy, .libsvm), "
            f"not a {ext or 'file without extension'}")


def _attention(path, var: str | None, max_memory: int | None) -> tuple[AttentionMatrix, Source]:
    """The attention map of ``q`` and ``k`` (or the two arrays named ``var="Q,K"``) of an ``.npz``, and the
    file as it was read (hashed)."""
    src = Source(path, max_memory)
    src.check_exists()
    names = [v.strip() for v in var.split(",")] if var else ["q", "k"]
    if len(names) != 2:
        raise ParameterError(f"{parameter('var')} for an attention map names the query and key arrays: 'Q,K', got {var!r}")
    with src.hashed() as file:  # hashed as it is read: _from_file records its SHA-256
        arrays = _attention_arrays(src, file, names, max_memory)
    attention = AttentionMatrix(arrays[0], arrays[1], name=_stem(path), max_memory=max_memory)
    attention.reading = {"var": ",".join(names)}  # the arrays read (``q,k`` by default): another pair, another map
    return attention, src


def _attention_arrays(src: Source, file, names: list[str], max_memory: int | None) -> list[np.ndarray]:
    """The arrays ``names`` (queries and keys) of the ``.npz`` ``file``."""
    try:
        zf = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise src.fail(f"not a valid .npz (zip) file ({one_line(exc)})") from None
    arrays = []
    with zf:
        present = [info.filename[:-4] for info in zf.infolist() if info.filename.endswith(".npy")]
        for name in names:
            if name not in present:
                raise src.fail(f"no array {name!r} (arrays: {', '.join(present) or 'none'})",
                               f"an attention map needs the queries and keys: arrays q and k, or {parameter('var', 'Q,K')}")
            with zf.open(name + ".npy") as raw:
                arrays.append(_load_npy(src, io.BytesIO(raw.read()), f"array {name!r}", Options(max_memory=max_memory)))
    return arrays


def _big_npy(path, max_memory: int | None) -> bool:
    """A plain ``.npy`` of a square matrix that is mapped, not loaded: its float64 form is over half the
    memory limit, or a comparison could not hold it formed (:func:`~sfapprox.sources.formable`: the
    matrix and its scoring; read from its header).  Not only "over the limit": a matrix loaded just
    under it left its methods nothing, so a higher ``--max-memory`` refused what a lower one, mapping
    it, ran; mapped, a comparison forms it only where that helps
    (:func:`~sfapprox.comparison.better_from_columns`)."""
    name = os.fspath(path)
    if not name.lower().endswith(".npy") or not os.path.isfile(name):
        return False
    try:
        with open(name, "rb") as fh:
            header = read_npy_header(fh)
    except (ValueError, OSError, EOFError):
        return False  # load_matrix names what is wrong
    limit = memory_limit(max_memory)
    shape = header.shape
    square = len(shape) == 2 and shape[0] == shape[1]
    if not square or header.dtype.hasobject or limit is None:
        return False
    if 8 * header.count > limit // 2:  # held, it would leave less than itself: mapped, a comparison decides
        return True
    try:
        mapped = open_npy(path)
    except SfapproxError:
        return False  # load_matrix names what is wrong (a complex or text array, ...) in its own words
    return not formable(mapped, max_memory)


def open_matrix(
    path: str | os.PathLike,
    *,
    kernel: str | None = DEFAULTS.kernel,
    bandwidth: float | None = DEFAULTS.bandwidth,
    format: str | None = DEFAULTS.format,
    var: str | None = DEFAULTS.var,
    max_memory: int | str | None = DEFAULTS.max_memory,
    **options: Any,
) -> MatrixSource | LoadedMatrix:
    """The matrix a file holds or describes: a :class:`~sfapprox.sources.MatrixSource` or a LoadedMatrix.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    kernel : str or None, default=None
        The file is a table of points (one per row); the matrix is their
        kernel matrix (:class:`~sfapprox.sources.KernelMatrix`: rbf,
        laplacian, matern32, matern52, cosine, linear), never formed unless
        it fits.
    bandwidth : float or None, default=None
        The kernel's bandwidth (default: the median heuristic); only with ``kernel``.
    format : str or None, default=None
        ``"attention"``: an ``.npz`` of queries ``q`` and keys ``k`` (``var="Q,K"``
        names others); other keys as :func:`~sfapprox.io.load_matrix`.
    var, max_memory, **options
        As :func:`~sfapprox.io.load_matrix`.  A ``.npy`` of a square matrix
        whose float64 form is over half of ``max_memory`` (None: 80% of
        physical RAM), or that a comparison could not hold formed, is
        memory-mapped (:func:`~sfapprox.sources.open_npy`), not loaded.

    Returns
    -------
    MatrixSource or LoadedMatrix
        A :class:`~sfapprox.sources.KernelMatrix`,
        :class:`~sfapprox.sources.AttentionMatrix` or memory-mapped
        :class:`~sfapprox.sources.ArraySource`; otherwise what
        :func:`~sfapprox.io.load_matrix` returns.

    Raises
    ------
    ParameterError
        For a ``bandwidth`` without ``kernel``, a kernel with
        ``format="attention"`` or ``covariance``, or a ``var`` that does not
        name two arrays for an attention map.
    InputError
        For any problem with the file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "points.csv"
    >>> _ = p.write_text("0,0\\n1,0\\n0,2\\n")
    >>> K = open_matrix(p, kernel="rbf", bandwidth=1.0)
    >>> K.n, K.name, round(float(K.columns([0])[1, 0]), 4)
    (3, 'points', 0.6065)
    """
    from . import check_path, load_matrix  # the package's own functions (this module is imported at its end)

    check_path(path)
    max_memory = MEMORY_LIMIT.to_bytes(max_memory)  # "4G" as the command line's --max-memory 4G, in bytes
    check_reading_options(kernel=kernel, bandwidth=bandwidth, format=format, var=var, max_memory=max_memory,
                          **options)
    if options.get("covariance") and kernel is None and format != "attention":
        read = _covariance_table(path, format, max_memory, options)
        if read is not None:
            return _covariance(path, *read, format=format, var=var, max_memory=max_memory, **options)
    if kernel is not None:
        points, _, read = _read_table(path, format, max_memory, options)
        kernel_matrix = _by_path(path, lambda: KernelMatrix(points, kernel, bandwidth, name=_stem(path),
                                                             max_memory=max_memory))
        kernel_matrix.reading = _recorded_marks(options) or None  # its points read with --delimiter, --decimal
        return _from_file(kernel_matrix, path, read=read)
    if format == "attention":
        attention, read = _by_path(path, lambda: _attention(path, var, max_memory))
        return _from_file(attention, path, read=read)
    if format in (None, "npy") and var is None and not _text_marks(options) and _big_npy(path, max_memory):
        mapped = _from_file(open_npy(path), path, hashed=False)
        mapped.reading = {"covariance": False}  # the matrix itself, as a loaded .npy records it
        return mapped
    loaded = load_matrix(path, format=format, var=var, max_memory=max_memory, keep_sparse=True, **options)
    return kept_sparse(loaded, max_memory)


def kept_sparse(loaded, max_memory: int | None):
    """``loaded``, or where it is sparse and could not be formed for a comparison (its dense form and
    scoring over the memory limit, :func:`~sfapprox.sources.formable`), a
    :class:`~sfapprox.sources.SparseSource` of it: the methods that work from columns run on it, as on a
    ``.npy`` too big to load (it was refused from its header: "must fit dense")."""
    if not loaded.is_sparse:
        return loaded
    if formable(MatrixSource(loaded.n, loaded.name), max_memory):  # (formed, any source's need is the same)
        return loaded
    limit = memory_limit(max_memory)
    # its CSC copy beside the CSR read (the CSR then dropped): refused where the two are over the limit
    check_memory(2 * held_bytes(loaded.matrix), limit=limit,
                 what=f"{loaded.path or loaded.name}: kept sparse ({loaded.nnz:,} non-zeros), its row and column copies")
    source = SparseSource(loaded.matrix, loaded.name, file_format=loaded.format)
    from . import _breaks_psd_bound  # the package's own (this module is imported at its end)

    # False where an entry rules it out (Nyström is then not applicable); the loaded matrix's summary
    # would compare it with its transpose again
    source.psd = False if source.symmetric and _breaks_psd_bound(loaded.matrix) else None
    source.notes.extend(loaded.notes)
    source.notes.append(f"kept sparse ({source.matrix.nnz:,} non-zeros): formed, it and its scoring would take "
                        f"{format_bytes(formed_need(source))}, over the memory limit"
                        f"{f' of {format_bytes(limit)}' if limit else ''}; the methods that work from columns run on it")
    source.file, source.file_sha256 = loaded.path, loaded.sha256
    source.reading = dict(loaded.recipe) if loaded.recipe else None  # what picked it in the file (var=, network=)
    return source


def check_reading_options(*, kernel: str | None = DEFAULTS.kernel, bandwidth: float | None = DEFAULTS.bandwidth,
                          format: str | None = DEFAULTS.format, var: str | None = DEFAULTS.var,
                          file: str | os.PathLike | None = None, **options: Any) -> None:
    """The checks of :func:`open_matrix`'s options that need no file: made before it reads one, and by a
    manifest when it is read (a bad value there was found at run time only, its entry "unavailable").

    Parameters
    ----------
    kernel, bandwidth, format, var, **options
        As :func:`open_matrix` takes them (``max_memory`` in bytes).
    file : str or os.PathLike, optional
        The file's name, where known before it is read: a kernel over a file that is no table of
        points (a ``.mtx``) is refused by its name.

    Raises
    ------
    ParameterError
        For a value no file makes right: an unknown kernel or format, a bandwidth without a kernel or
        with one that takes none, a kernel with an attention map or a covariance, a matrix file's
        options beside a kernel or an attention map, or a value :func:`~sfapprox.io.load_matrix`
        refuses whatever the file (a network below 1, a two_mode that is not one, ...).
    """
    from . import _check_options  # the package's own (this module is imported at its end)

    _refuse_unknown(options)
    if kernel is not None:
        check_kernel(kernel)
    if bandwidth is not None and kernel is None:
        raise ParameterError(f"a bandwidth needs a kernel: give {parameter('kernel')} too")
    if kernel is not None:
        check_bandwidth(kernel, bandwidth)
        if format == "attention" or options.get("covariance"):
            raise ParameterError("a kernel reads a table of points; it does not combine with an attention map "
                                 "or a covariance")
        _refuse_unused(options, f"{parameter('kernel')} reads a table of points", var=var)
        if file is not None and _point_kind(file, format) is None:
            raise ParameterError(f"{os.fspath(file)}: {_not_points(file)}; pass format csv|npy|libsvm if it is one")
    if format == "attention":
        _refuse_unused(options, f"an attention map ({parameter('format', 'attention')}) reads Q and K from an .npz",
                       also=TEXT_MARKS)
    if format != "attention":  # (load_matrix's own formats; an attention map is not one of them)
        _check_options(format, Options(format=format, var=var, **options))


def _refuse_unknown(options: dict) -> None:
    """A keyword no reader takes (a misspelling, or ``LoadOptions(extra=...)`` naming one) is refused in
    one line naming the keywords there are: ``Options(**options)`` raised a bare TypeError from inside."""
    known = [f.name for f in dataclasses.fields(Options) if f.name != "extra"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ParameterError(f"unknown reading option{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; the options are {', '.join(known)}")


#: The reading options of a matrix file (:func:`~sfapprox.io.load_matrix`'s) and their defaults: none of
#: them shapes a kernel's point table or an attention map's Q and K.
_FILE_OPTIONS = {name: getattr(DEFAULTS, name)
                 for name in ("network", "relation", "two_mode", "gradient", "resize", "square", "mirror")}


def _refuse_unused(options: dict, reads: str, *, var: str | None = None, also: tuple[str, ...] = ()) -> None:
    """Refuse reading options given where they shape nothing (an option that parses but is ignored would
    let a user believe it applied): one line naming them; ``also``: more of them, None by default (a
    text table's, which shape a kernel's table but no attention map)."""
    defaults = {**_FILE_OPTIONS, **{name: None for name in also}}
    given = [parameter(name, options[name]) for name, default in defaults.items()
             if name in options and options[name] != default]
    if var is not None:
        given.insert(0, parameter("var", var))
    if given:
        raise ParameterError(f"{reads}: {', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to it "
                             "(the options of a matrix file: leave them out)")


def _by_path(path, build):
    """``build()``, whose errors about the source (named by the file's stem, as its tables name it) name
    the file's path: "nan: point 3 has a non-finite coordinate" said which file only by its stem."""
    try:
        return build()
    except InputError as exc:
        stem, text = _stem(path), str(exc)
        if text.startswith(f"{stem}: "):
            raise InputError(f"{os.fspath(path)}: {text[len(stem) + 2:]}") from None
        raise


def _from_file(source: MatrixSource, path, *, hashed: bool = True, read: Source | None = None) -> MatrixSource:
    """``source`` with the file it was read from recorded (:attr:`~sfapprox.sources.MatrixSource.file`), and
    the file's SHA-256 where the whole file was read anyway (a point table, Q and K; not a memory-mapped
    matrix too big to load, whose hash would be a pass over it): from the reading of ``read`` where it
    hashed the file (:meth:`~sfapprox.io._common.Source.sha256`), else of a second read."""
    source.file = os.fspath(path)
    if hashed:
        source.file_sha256 = (read or Source(path)).sha256()
    return source


def _covariance_table(path, format: str | None, max_memory: int | None,
                      options: dict) -> tuple[np.ndarray, list[str], Source] | None:
    """The samples x features table of ``covariance=True``, its reading's notes and the file as read, read once; None when
    it is not a table this path reads (``load_matrix`` then reports the file in its own words)."""
    if format not in (None, "csv", "npy", "libsvm"):
        return None  # load_matrix says what covariance=True accepts
    try:
        return _read_table(path, format, max_memory, options)
    except InputError:
        return None


def _covariance(path, table: np.ndarray, notes: list[str], read: Source, *, format: str | None,
                max_memory: int | None, **options):
    """A :class:`~sfapprox.sources.CovarianceMatrix` (computed by columns) when the covariance formed
    and scored would not fit the memory limit (:func:`~sfapprox.sources.formable`, as for every source);
    else formed, as ``load_matrix`` forms it — from the table already read.  Deciding by the matrix's
    own ``8 N^2`` bytes alone formed one whose scoring was then refused: 40M ran, 100M did not."""
    from . import covariance_of_table

    features = table.shape[1] if table.ndim == 2 else 0
    if features and memory_limit(max_memory) is not None:
        source = CovarianceMatrix(table, name=_stem(path), max_memory=max_memory)
        if not formable(source, max_memory):
            # as the formed covariance records it (the table itself: False), with its table's text marks
            source.reading = {"covariance": True, **_recorded_marks(options)}
            return _from_file(source, path, read=read)
        del source  # its centred copy of the table was held while the covariance was formed
    return covariance_of_table(path, table, notes, format=format, max_memory=max_memory, sha256=read.sha256(),
                               **options)


def is_source(matrix) -> bool:
    """Whether :func:`open_matrix` gave a source (not a loaded matrix).

    Parameters
    ----------
    matrix : object
        What :func:`open_matrix` returned.
    """
    return isinstance(matrix, MatrixSource)
