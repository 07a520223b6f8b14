"""Dataset manifests: TOML files listing matrices, where they come from, how to load them.

A manifest is a list of ``[[matrix]]`` tables (the schema is documented in
``data_manifests/README.md``); sfapprox ships some, given by their names
(:mod:`~sfapprox.datasets.bundled`).  :func:`load_manifest` parses and validates
it once; every problem is a :class:`ManifestError` whose one-line message names
the manifest file, the entry and the field, e.g.::

    paper-table1.toml: entry 'strike': unknown field 'catgory' (known: name, category, ...)

The result is plain frozen dataclasses (picklable, so batch workers get them
as they are).
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from .._atomic import resolved_path
from .._errors import InputError, ParameterError, user_stacklevel
from ..formats import counted, listed, printable
from ..io._common import missing_why
from .bundled import bundled_manifests, locate_manifest
from .synthetic import check_params, generator_params

__all__ = [
    "CATEGORIES",
    "ENTRY_FIELDS",
    "LOAD_OPTIONS",
    "ARCHIVE_SUFFIXES",
    "COMPRESSED_SUFFIXES",
    "ManifestError",
    "Entry",
    "Manifest",
    "load_manifest",
    "parse_manifest",
]


class ManifestError(InputError):
    """A manifest file is not valid TOML or does not follow the schema.

    Parameters
    ----------
    message : str
        One line naming the manifest file, the entry and the field.
    """


#: Categories an entry may have (reports group by them).
CATEGORIES = (
    "dense graph",
    "network",
    "surface mesh",
    "covariance",
    "image",
    "gradient image",
    "synthetic",
    "attention",
    "kernel",
    "other",
)

#: Fields of a ``[[matrix]]`` entry, with their meaning (README and error messages).
ENTRY_FIELDS = {
    "name": "unique name: letters, digits, '_', '-', '.', '+' (used for factors/<name>.h5)",
    "category": "one of the CATEGORIES",
    "description": "free text",
    "file": "relative path of the matrix file (under --data-dir, or in the download cache)",
    "companions": "other files the loader needs beside 'file' (e.g. LINQS .content)",
    "url": "http(s) URL of the file, of a compressed copy (.gz/.bz2/.xz) or of an archive",
    "member": "path of 'file' inside the archive at 'url' (companions are its siblings)",
    "sha256": "SHA-256 of 'file' (hex), or a list of accepted ones",
    "homepage": "where a person can find the data (shown when it cannot be fetched)",
    "generator": "name of a generator in sfapprox.datasets.synthetic (instead of a file)",
    "params": "table of the generator's parameters",
    "load": "table of load_matrix options (kernel = \"rbf\" and bandwidth: the kernel matrix of a table of points)",
    "reference": "table of published figures, e.g. {tsvd = 2.73, sf = 1.04}",
    "reproducible": "true when our loading is known to reproduce the reference figures",
    "note": "free text shown in listings",
}

#: ``load_matrix`` keyword arguments allowed in ``[matrix.load]`` and their types.
LOAD_OPTIONS: dict[str, tuple[type, ...]] = {
    "format": (str,),
    "var": (str,),
    "network": (int,),
    "relation": (int,),
    "two_mode": (str,),
    "gradient": (bool,),
    "resize": (int,),
    "square": (str,),
    "covariance": (bool,),
    "mirror": (str,),
    "max_memory": (int, str),
    "kernel": (str,),
    "bandwidth": (int, float),
    "delimiter": (str,),
    "decimal": (str,),
}

#: Weight files whose every square tensor an entry can list with ``load = {var = "*"}``.
WEIGHT_FORMATS = ("safetensors", "torch")
#: Their extensions: sfapprox.io's (format_extensions), spelled out here, where sfapprox.io is not loaded.
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt")

TOP_FIELDS = {"title", "description", "reference_source", "matrix"}

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass(frozen=True, repr=False)  # its own __repr__: one line, not every field (500-650 characters)
class Entry:
    """One matrix of a manifest.

    Exactly one source: ``generator`` (synthetic), or ``file`` (optionally with
    ``url`` to download it from).  ``load`` holds ``load_matrix`` options.

    Attributes
    ----------
    name : str
        Unique within the manifest (letters, digits, ``_ - . +``).
    category : str
        One of :data:`CATEGORIES`.
    manifest : str
        The manifest file it comes from (every message about it starts with it).
    file : str or None
        Relative path of the matrix file (under ``--data-dir`` or in the cache).
    url : str or None
        Where ``file`` is downloaded from (the file, a compressed copy or an archive).
    member : str or None
        Path of ``file`` inside the archive at ``url``.
    companions : tuple of str
        Other files the loader needs beside ``file``.
    sha256 : tuple of str
        Accepted SHA-256 digests of ``file`` (lower-case hex); empty: not checked.
    homepage : str or None
        Where a person can find the data.
    generator : str or None
        A generator of :mod:`sfapprox.datasets.synthetic` (instead of a file).
    params : dict
        The generator's parameters (``n`` required).
    load : dict
        :func:`~sfapprox.load_matrix` options.
    reference : dict of str to float
        Published figures, by method.
    reproducible : bool
        Whether our loading is known to reproduce the reference figures.
    description, note : str or None
        Free text.
    folders : tuple of str
        Where its ``file`` is looked for beside the manifest: the manifest's folder as an absolute path
        (a worker in another current folder finds the files a relative manifest path named), and, for a
        manifest that is a symbolic link, the folder of the file it leads to.  Empty (a manifest parsed
        from a dict): the folder of ``manifest``.
    """

    name: str
    category: str
    manifest: str
    file: str | None = None
    url: str | None = None
    member: str | None = None
    companions: tuple[str, ...] = ()
    sha256: tuple[str, ...] = ()
    homepage: str | None = None
    generator: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, float] = field(default_factory=dict)
    reproducible: bool = False
    description: str | None = None
    note: str | None = None
    folders: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """``"generator"``, ``"archive"``, ``"download"`` or ``"local"``."""
        if self.generator:
            return "generator"
        if self.url and self.member:
            return "archive"
        return "download" if self.url else "local"

    @property
    def where(self) -> str:
        """``"manifest.toml: entry 'name'"``, the prefix of every message about the entry."""
        return f"{self.manifest}: entry {self.name!r}"

    def __repr__(self) -> str:
        """One line: the name, the category, where the matrix comes from and the published figures.

        Examples
        --------
        >>> Entry("strike", "graph", "paper-table1", file="pajek/strike.paj", reference={"tsvd": 2.73, "sf": 1.04})
        <Entry strike (graph) of paper-table1: pajek/strike.paj; reference tsvd 2.73, sf 1.04>
        >>> Entry("blobs", "kernel", "kernels.toml", generator="clustered_rbf", params={"n": 512})
        <Entry blobs (kernel) of kernels.toml: generator clustered_rbf(n=512)>
        """
        if self.generator:
            given = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
            source = f"generator {self.generator}({given})"
        else:
            source = f"{self.file}{f' (from {self.member} in an archive)' if self.member else ''}"
        figures = ", ".join(f"{method} {value:g}" if isinstance(value, (int, float)) else f"{method} {value!r}"
                            for method, value in self.reference.items())
        return printable(f"<Entry {self.name} ({self.category}) of {self.manifest}: {source}"
                         f"{f'; reference {figures}' if figures else ''}>")


@dataclass(frozen=True, repr=False)  # its own __repr__: every entry's fields were 23,100 characters (paper-table1)
class Manifest:
    """A validated manifest: its path, header fields and entries in file order.

    Attributes
    ----------
    path : str
        The manifest as given (its messages name it so): a path, or a bundled manifest's name.
    title, description, reference_source : str or None
        Its header fields.
    entries : tuple of Entry
        In file order.
    file : str or None
        The file read (a bundled manifest's lies in the package); None: ``path`` (a manifest parsed
        from a dict).
    """

    path: str
    title: str | None
    description: str | None
    reference_source: str | None
    entries: tuple[Entry, ...]
    file: str | None = None

    def __repr__(self) -> str:
        """One line: the manifest, its title and its entries' names (the first few, the rest counted).

        Examples
        --------
        >>> Manifest("m.toml", "Graphs", None, None, tuple(Entry(f"g{i}", "graph", "m.toml", file=f"g{i}.net")
        ...                                                   for i in range(7)))
        <Manifest m.toml ('Graphs'): 7 entries: g0, g1, g2, g3, g4 and 2 more>
        """
        title = f" ({self.title!r})" if self.title else ""
        names = f": {listed(self.names())}" if self.entries else ""
        return printable(f"<Manifest {self.path}{title}: {counted(len(self.entries), 'entry', 'entries')}{names}>")

    @property
    def folder(self) -> Path:
        """The folder holding the manifest file."""
        return Path(self.file or self.path).parent

    def names(self) -> list[str]:
        """The entries' names, in file order.

        Returns
        -------
        list of str
            One name per entry.
        """
        return [e.name for e in self.entries]

    def select(self, only: list[str] | None) -> list[Entry]:
        """Entries named in ``only`` (all when None), in manifest order.

        Parameters
        ----------
        only : list of str or None
            Entry names; None or empty: every entry.

        Returns
        -------
        list of Entry

        Raises
        ------
        ManifestError
            For a name that is not in the manifest (the message lists them).
        """
        if not only:
            return list(self.entries)
        unknown = [n for n in only if n not in self.names()]
        if unknown:
            raise ManifestError(
                f"{self.path}: no entry named {', '.join(map(repr, unknown))} (entries: {', '.join(self.names())})"
            )
        return [e for e in self.entries if e.name in only]


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def load_manifest(path: str | os.PathLike) -> Manifest:
    """Read and validate a manifest file, or a bundled manifest by its name.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.toml`` manifest, or the name of one shipped with sfapprox (``"paper-table1"``,
        ``"synthetic"``, ``"kernels"``: :func:`~sfapprox.datasets.bundled.bundled_manifests`); a file
        at the path wins over a name.  A clone's old path ``data_manifests/<name>.toml`` still reads the
        bundled manifest, with a ``FutureWarning``.

    Returns
    -------
    Manifest

    Raises
    ------
    ManifestError
        If the file is missing, not TOML, or breaks the schema; the message
        names the file, the entry and the field.
    ParameterError
        If ``path`` is no path nor name (None, a number).

    Warns
    -----
    FutureWarning
        For an old ``data_manifests/<name>.toml`` path that no longer exists (the bundled manifest is read).

    Examples
    --------
    >>> load_manifest("synthetic").entries[0].kind
    'generator'
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.toml"
    >>> _ = p.write_text('[[matrix]]\\nname = "a"\\ncategory = "synthetic"\\n'
    ...                  'generator = "banded"\\nparams = {n = 8}\\n')
    >>> load_manifest(p).entries[0].kind
    'generator'
    """
    if not isinstance(path, (str, os.PathLike)):  # None was os.fspath's raw TypeError ("expected str, bytes ...")
        raise ParameterError(f"manifest must be a manifest file (a str or pathlib.Path) or the name of a bundled one "
                             f"({', '.join(bundled_manifests())}), got {type(path).__name__}")
    located = locate_manifest(path)
    if located.moved:
        # a FutureWarning, not a DeprecationWarning: the path is in users' scripts and command lines, and
        # Python hides a DeprecationWarning from both (the command line shows it as one "warning:" line)
        warnings.warn(located.moved, FutureWarning, stacklevel=user_stacklevel())
    display, p = located.shown, located.path
    if p.is_dir():
        raise ManifestError(f"{display}: is a folder; give the manifest file (.toml) in it")
    if not p.is_file():
        why = missing_why(p)  # (a loop of links, or a link whose file moved, said "no such manifest file")
        raise ManifestError(f"{display}: " + (f"no such manifest file (the bundled manifests, given by name: "
                                              f"{', '.join(bundled_manifests())})" if why == "no such file" else why))
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the TOML
        data = tomllib.loads(p.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{display}: not valid TOML ({exc})") from None
    manifest = parse_manifest(data, display)
    folders = tuple(dict.fromkeys(located.folders + manifest_folders(p)))
    return replace(manifest, file=os.fspath(p), entries=tuple(replace(e, folders=folders) for e in manifest.entries))


def manifest_folders(path: str | os.PathLike) -> tuple[str, ...]:
    """The folders a manifest's relative ``file`` paths are looked for in: the manifest's own, absolute (a
    relative one meant another folder to a Dask worker started elsewhere: its every file was "not found"),
    then, where the manifest is a symbolic link, the folder of the file it leads to (the data lie beside the
    real manifest; a link to it put in a run's folder found none of them).

    Parameters
    ----------
    path : str or os.PathLike
        The manifest file.

    Returns
    -------
    tuple of str
        One folder, or two for a link whose target lies in another folder.
    """
    here = Path(os.path.abspath(path)).parent
    # a loop of links is one line (3.11's resolve raised RuntimeError, 3.13's returned it unresolved)
    real = resolved_path(path).parent
    return (str(here),) if resolved_path(here) == real else (str(here), str(real))


def parse_manifest(data: dict[str, Any], path: str = "<manifest>") -> Manifest:
    """Validate the parsed TOML ``data`` of the manifest at ``path``.

    Parameters
    ----------
    data : dict
        The parsed TOML (``tomllib.loads``).
    path : str, default="<manifest>"
        The manifest's name in messages and in each entry's ``manifest``.

    Returns
    -------
    Manifest

    Raises
    ------
    ManifestError
        For anything that breaks the schema (the message names the file, the
        entry and the field).

    Examples
    --------
    >>> m = parse_manifest({"matrix": [{"name": "x", "category": "network", "file": "x.net"}]}, "m.toml")
    >>> m.entries[0].kind
    'local'
    """
    unknown = sorted(set(data) - TOP_FIELDS)
    if unknown:
        raise ManifestError(
            f"{path}: unknown top-level field {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(TOP_FIELDS))}; entries are [[matrix]] tables)"
        )
    raw = data.get("matrix", [])
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise ManifestError(f"{path}: 'matrix' must be an array of tables ([[matrix]])")
    if not raw:
        raise ManifestError(f"{path}: no [[matrix]] entries")
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    for index, item in enumerate(raw, start=1):
        entry = _parse_entry(item, path, index)
        if entry.name in seen.values():
            raise ManifestError(f"{path}: entry {entry.name!r}: duplicate name (entry #{index})")
        _check_portable_name(entry.name, seen, f"{path}: entry {entry.name!r} (#{index})")
        seen[_file_key(entry.name)] = entry.name
        entries.append(entry)
    header = {k: _optional_str(data, k, path) for k in ("title", "description", "reference_source")}
    return Manifest(path, entries=tuple(entries), **header)


#: Names Windows gives to devices, whatever the extension: ``factors/nul.h5`` is no file there.
_WINDOWS_DEVICES = re.compile(r"^(?:con|prn|aux|nul|com[0-9]|lpt[0-9])(?:\..*)?$", re.IGNORECASE)


def _case_blind() -> bool:
    """Whether this system's file systems tell names apart only by more than case (macOS' APFS and HFS+,
    Windows' NTFS by default): an entry's files (``factors/<name>.h5``) are then one file for two names."""
    return sys.platform in ("darwin", "win32")


def _file_key(name: str) -> str:
    return name.casefold() if _case_blind() else name


def _check_portable_name(name: str, seen: dict[str, str], where: str) -> None:
    """Refuse an entry name whose files this system cannot keep apart or cannot create at all."""
    if sys.platform == "win32" and _WINDOWS_DEVICES.match(name):
        raise ManifestError(f"{where}: {name.split('.')[0]!r} names a device on Windows, so its files could not "
                            "be written; rename the entry")
    other = seen.get(_file_key(name))
    if other is not None:
        raise ManifestError(f"{where}: differs from entry {other!r} only in case, and this system's file names "
                            "do not tell them apart (their factors would be one file); rename one")


def _optional_str(data: dict[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ManifestError(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def _parse_entry(item: dict[str, Any], path: str, index: int) -> Entry:
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        shown = "missing required field 'name'" if name is None else f"field 'name' = {name!r} is not a valid name"
        raise ManifestError(f"{path}: entry #{index}: {shown} ({ENTRY_FIELDS['name']})")
    where = f"{path}: entry {name!r}"
    unknown = sorted(set(item) - set(ENTRY_FIELDS))
    if unknown:
        raise ManifestError(f"{where}: unknown field {', '.join(map(repr, unknown))} (known: {', '.join(ENTRY_FIELDS)})")
    category = item.get("category")
    if category not in CATEGORIES:
        shown = "missing required field 'category'" if category is None else f"category {category!r} is not known"
        raise ManifestError(f"{where}: {shown} (known: {', '.join(CATEGORIES)})")
    strings = {k: _string(item, k, where) for k in ("file", "url", "member", "homepage", "generator", "description", "note")}
    entry = Entry(
        name=name,
        category=category,
        manifest=path,
        companions=_paths(item, "companions", where),
        sha256=_hashes(item, where),
        params=_table(item, "params", where),
        load=_load_options(item, where),
        reference=_reference(item, where),
        reproducible=_bool(item, "reproducible", where),
        **strings,
    )
    _check_source(entry, where)
    return entry


def _string(item: dict[str, Any], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ManifestError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _bool(item: dict[str, Any], key: str, where: str) -> bool:
    value = item.get(key, False)
    if not isinstance(value, bool):
        raise ManifestError(f"{where}: field {key!r} must be true or false, got {value!r}")
    return value


def _table(item: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = item.get(key, {})
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: field {key!r} must be a table, e.g. {key} = {{n = 64}}")
    return dict(value)


def _paths(item: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = item.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{where}: field {key!r} must be a list of relative paths")
    for v in value:
        _check_relative(v, key, where)
    return tuple(value)


def _hashes(item: dict[str, Any], where: str) -> tuple[str, ...]:
    value = item.get("sha256", [])
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and _SHA256.match(v) for v in values):
        raise ManifestError(f"{where}: field 'sha256' must be 64 hex digits (or a list of such), got {value!r}")
    return tuple(v.lower() for v in values)


def _load_options(item: dict[str, Any], where: str) -> dict[str, Any]:
    options = _table(item, "load", where)
    for key, value in options.items():
        if key not in LOAD_OPTIONS:
            raise ManifestError(f"{where}: unknown load option {key!r} (known: {', '.join(LOAD_OPTIONS)})")
        types = LOAD_OPTIONS[key]
        wrong_bool = isinstance(value, bool) and bool not in types
        if wrong_bool or not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise ManifestError(f"{where}: load option {key!r} must be {names}, got {value!r}")
    weights = options.get("format") in WEIGHT_FORMATS or str(item.get("file", "")).lower().endswith(WEIGHT_SUFFIXES)
    if options.get("var") == "*" and not weights:
        raise ManifestError(f"{where}: load option var = \"*\" (every square weight) applies to a model's weights "
                            f"file ({', '.join(WEIGHT_SUFFIXES)}, or format {' or '.join(WEIGHT_FORMATS)})")
    if options.get("kernel") is not None and weights:  # (its lines were "unavailable", naming a CLI flag)
        raise ManifestError(f"{where}: load option 'kernel' is the kernel matrix of a table of points "
                            "(.csv, .npy, .libsvm); a model's weights file holds matrices: leave 'kernel' out")
    _check_values(options, where, item.get("member") or item.get("file"))
    return options


def _check_values(options: dict[str, Any], where: str, file: str | None = None) -> None:
    """The load options' values, as the reading will check them but before any run (a format that is not
    one, network = 0, a linear kernel with a bandwidth, a kernel beside a covariance: the entry was
    "unavailable" at run time, exit 0, and tried again at every run)."""
    from .._errors import ParameterError, spelled_for
    from .._settings import parse_size
    from ..io._sources import check_reading_options  # numpy only

    try:
        # spelled as the manifest's keys (bandwidth = ...), as the entry's run spells them: read by the batch
        # command, the message named "(--bandwidth)", an option no manifest has
        with spelled_for("api"):
            limit = parse_size(options.get("max_memory"), what="max_memory")
            check_reading_options(**{**options, "max_memory": limit}, file=file)
    except ParameterError as exc:
        raise ManifestError(f"{where}: load options: {exc}") from None


def _reference(item: dict[str, Any], where: str) -> dict[str, float]:
    ref = _table(item, "reference", where)
    for key, value in ref.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ManifestError(f"{where}: reference figure {key!r} must be a number, got {value!r}")
    return {k: float(v) for k, v in ref.items()}


def _check_relative(value: str, key: str, where: str) -> None:
    if any(ord(c) < 32 for c in value):  # a NUL byte was refused only at download time ("embedded null byte")
        raise ManifestError(f"{where}: field {key!r} = {value!r} holds a control character; a file name has none")
    pure = PurePosixPath(value.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", value):
        raise ManifestError(f"{where}: field {key!r} = {value!r} must be a relative path without '..'")
    if not pure.parts or value.replace("\\", "/").endswith("/"):  # "." or "data/": a folder, not a file
        raise ManifestError(f"{where}: field {key!r} = {value!r} must name a file, not a folder")


def is_archive(url_or_name: str) -> bool:
    """True for names ending in an archive suffix (``.zip``, ``.tar.gz``, ``.tgz``, ...).

    Parameters
    ----------
    url_or_name : str
        A URL (its path is looked at) or a file name; case is ignored.
    """
    path = urlparse(url_or_name).path.lower() if "://" in url_or_name else url_or_name.lower()
    return path.endswith(ARCHIVE_SUFFIXES)


def _check_source(entry: Entry, where: str) -> None:
    if entry.generator is not None:
        _check_generator(entry, where)
        return
    if entry.params:
        raise ManifestError(f"{where}: field 'params' needs 'generator'")
    if entry.file is None:
        raise ManifestError(f"{where}: no source; give 'file' (with 'url' to download it) or 'generator'")
    _check_relative(entry.file, "file", where)
    if entry.url is not None:
        _check_url(entry, where)
    elif entry.member is not None:
        raise ManifestError(f"{where}: field 'member' needs 'url' (an archive)")


def _check_url(entry: Entry, where: str) -> None:
    # requests sent it percent-encoded and the server answered 404 (or the escape reached a log raw)
    if any(ord(c) < 32 or ord(c) == 127 for c in entry.url):
        raise ManifestError(f"{where}: field 'url' = {entry.url!r} holds a control character (a line break or tab "
                            "copied with it?); a URL has none")
    parsed = urlparse(entry.url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ManifestError(f"{where}: field 'url' = {entry.url!r} must be an http:// or https:// URL")
    if is_archive(entry.url) and entry.member is None:
        raise ManifestError(f"{where}: 'url' is an archive; name the file inside it with 'member'")
    if entry.member is not None:
        if not is_archive(entry.url):
            raise ManifestError(f"{where}: field 'member' needs an archive URL (ending in {', '.join(ARCHIVE_SUFFIXES)})")
        _check_relative(entry.member, "member", where)


def _check_generator(entry: Entry, where: str) -> None:
    clash = [k for k in ("file", "url", "member") if getattr(entry, k) is not None]
    if clash:
        raise ManifestError(f"{where}: 'generator' and {', '.join(map(repr, clash))} exclude each other; give one source")
    if entry.load:  # how to read a file: a generated matrix has none (kernel = "rbf" there was ignored)
        raise ManifestError(f"{where}: load options ({', '.join(entry.load)}) say how to read a 'file'; a "
                            "'generator' makes its matrix itself: leave 'load' out")
    try:
        generator_params(entry.generator)
    except ParameterError as exc:
        raise ManifestError(f"{where}: field 'generator': {exc}") from None
    try:  # names, the required n, and values (density = 2.0 gave "unavailable" lines)
        check_params(entry.generator, entry.params)
    except ParameterError as exc:
        raise ManifestError(f"{where}: field 'params': {exc}") from None
