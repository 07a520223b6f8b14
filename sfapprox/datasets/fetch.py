"""Finding, downloading and verifying the files of manifest entries.

Where a file is looked for, in order:

1. ``DATA_DIR/<file>`` when a data folder is given (``--data-dir``): used and
   verified, nothing is downloaded;
2. ``<manifest folder>/<file>``;
3. the download cache ``pooch.os_cache("sfapprox")/<manifest stem>/<file>``;
4. a download from ``url`` with pooch into that cache (a compressed copy is
   decompressed; an archive has its ``member`` extracted).

Every file with a ``sha256`` is verified wherever it came from.  Downloads
are atomic (pooch writes to a temporary file and moves it into place only
after its hash matched) and extraction is too (a temporary file in the
target folder, then ``os.replace``).  Archives are checked member by member
first: absolute names, ``..`` components and link members refuse the whole
archive, so nothing can be written outside the cache folder.

When nothing works the entry raises :class:`UnavailableError`, whose message
says where to put the file.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from .._atomic import atomic_path
from .._errors import InputError
from .manifest import COMPRESSED_SUFFIXES, Entry, is_archive

__all__ = [
    "UnavailableError",
    "ChecksumError",
    "Located",
    "cache_dir",
    "file_sha256",
    "locate",
    "fetch_entry",
    "verify_entry",
    "check_archive_members",
    "extract_member",
]

_CHUNK = 1 << 16


class UnavailableError(InputError):
    """An entry's file is neither present nor downloadable; the message says where to put it."""


class ChecksumError(InputError):
    """A file's SHA-256 differs from every hash its manifest entry accepts."""


@dataclass(frozen=True)
class Located:
    """Where an entry's file was found and whether its hash was checked.

    ``origin`` is ``"data-dir"``, ``"manifest-dir"``, ``"cache"`` or
    ``"download"``; ``verified`` is False when the entry has no ``sha256``.
    """

    path: Path
    origin: str
    verified: bool


def cache_dir() -> Path:
    """The download cache, ``pooch.os_cache("sfapprox")`` (``$SFAPPROX_CACHE`` overrides it)."""
    import pooch

    override = os.environ.get("SFAPPROX_CACHE")
    return Path(override) if override else Path(pooch.os_cache("sfapprox"))


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file, read in 64 KiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _entry_cache(entry: Entry, cache: Path | None) -> Path:
    return (cache or cache_dir()) / Path(entry.manifest).stem


def _verify(entry: Entry, path: Path) -> bool:
    """Check ``path`` against the entry's hashes; True if checked, False if it has none."""
    if not entry.sha256:
        return False
    got = file_sha256(path)
    if got not in entry.sha256:
        expected = entry.sha256[0] if len(entry.sha256) == 1 else " or ".join(entry.sha256)
        raise ChecksumError(
            f"{entry.where}: {path}: SHA-256 mismatch (expected {expected}, got {got}); "
            "the file is corrupted or a different version (or the manifest's hash is outdated)"
        )
    return True


def _present(entry: Entry, folder: Path) -> Path | None:
    """``folder/<file>`` when it and all companions exist."""
    path = folder / entry.file
    if path.is_file() and all((folder / c).is_file() for c in entry.companions):
        return path
    return None


def _candidates(entry: Entry, data_dir: Path | None, cache: Path | None) -> list[tuple[Path, str]]:
    folders = []
    if data_dir is not None:
        folders.append((Path(data_dir), "data-dir"))
    folders.append((Path(entry.manifest).parent, "manifest-dir"))
    folders.append((_entry_cache(entry, cache), "cache"))
    return folders


def locate(entry: Entry, *, data_dir: str | os.PathLike | None = None, cache: Path | None = None) -> Located | None:
    """Find an entry's file without downloading; verify it when found.

    Returns
    -------
    Located or None
        None when the file is in none of the folders.

    Raises
    ------
    ChecksumError
        When the file found does not match the entry's ``sha256``.
    """
    for folder, origin in _candidates(entry, Path(data_dir) if data_dir else None, cache):
        path = _present(entry, folder)
        if path is not None:
            return Located(path, origin, _verify(entry, path))
    return None


def fetch_entry(
    entry: Entry,
    *,
    data_dir: str | os.PathLike | None = None,
    cache: Path | None = None,
    download: bool = True,
) -> Located:
    """The entry's file: found locally (and verified) or downloaded into the cache.

    Parameters
    ----------
    entry : Entry
        A file entry (not a generator).
    data_dir : path, optional
        Folder searched first (``--data-dir``).
    cache : Path, optional
        Download cache (default :func:`cache_dir`).
    download : bool, default=True
        Allow downloading from the entry's ``url``.

    Returns
    -------
    Located

    Raises
    ------
    UnavailableError
        When the file is nowhere and cannot be downloaded (message: where to put it).
    ChecksumError
        When a file found or downloaded has the wrong SHA-256.
    """
    found = locate(entry, data_dir=data_dir, cache=cache)
    if found is not None:
        return found
    if not download or entry.url is None:
        raise UnavailableError(_missing_message(entry, data_dir, None))
    target = _entry_cache(entry, cache)
    try:
        path = _download(entry, target)
    except (ChecksumError, UnavailableError):
        raise
    except InputError as exc:  # unsafe archive and similar: say so, keep the hint
        raise UnavailableError(_missing_message(entry, data_dir, str(exc))) from None
    except Exception as exc:  # network errors come in many types (requests, OSError, ...)
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UnavailableError(_missing_message(entry, data_dir, f"download from {entry.url} failed ({reason})")) from None
    return Located(path, "download", _verify_or_remove(entry, path))


def _verify_or_remove(entry: Entry, path: Path) -> bool:
    try:
        return _verify(entry, path)
    except ChecksumError:
        path.unlink(missing_ok=True)  # never leave a bad file where the next run would trust it
        raise


def _missing_message(entry: Entry, data_dir, problem: str | None) -> str:
    where = f"{Path(data_dir) / entry.file}" if data_dir else f"DATA_DIR/{entry.file} and pass --data-dir DATA_DIR"
    parts = [f"{entry.where}: file {entry.file!r} not found"]
    if problem:
        parts.append(problem)
    parts.append(f"put it at {where}")
    if entry.companions:
        parts.append(f"with {', '.join(entry.companions)} beside it")
    if entry.url is None and entry.homepage:
        parts.append(f"it is available from {entry.homepage}")
    elif entry.url is None:
        parts.append("the manifest gives no download URL")
    return "; ".join(parts)


# ---------------------------------------------------------------------------
# downloading
# ---------------------------------------------------------------------------


def _download(entry: Entry, target: Path) -> Path:
    """Download ``entry.url`` into ``target`` (the entry's cache folder); return the file path."""
    import pooch

    pooch.get_logger().setLevel("WARNING")  # no "Downloading ..." chatter on stderr
    name = PurePosixPath(urlparse(entry.url).path).name or "download"
    direct = entry.member is None and not _needs_decompression(entry)
    known = f"sha256:{entry.sha256[0]}" if direct and len(entry.sha256) == 1 else None
    downloads = target / ".downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    try:
        fetched = Path(pooch.retrieve(entry.url, known_hash=known, fname=f"{entry.name}-{name}", path=downloads, progressbar=False))
    except ValueError as exc:  # pooch's hash mismatch (the temporary file is already gone)
        if "hash" in str(exc).lower():
            raise ChecksumError(f"{entry.where}: download from {entry.url}: {' '.join(str(exc).split())}") from None
        raise
    final = target / entry.file
    final.parent.mkdir(parents=True, exist_ok=True)
    if entry.member is not None:
        check_archive_members(fetched)
        extract_member(fetched, entry.member, final)
        for companion in entry.companions:
            sibling = str(PurePosixPath(entry.member).parent / PurePosixPath(companion).name)
            extract_member(fetched, sibling, target / companion)
    elif _needs_decompression(entry):
        _decompress(fetched, final)
    else:
        _atomic_copy(fetched, final)
    return final


def _needs_decompression(entry: Entry) -> bool:
    url_path = urlparse(entry.url).path.lower()
    return url_path.endswith(COMPRESSED_SUFFIXES) and not is_archive(url_path) and not entry.file.lower().endswith(
        COMPRESSED_SUFFIXES
    )


def _temporary_beside(final: Path):
    """A temporary file in ``final``'s folder, fsync'ed and moved onto ``final`` on success (pooch's way)."""
    return atomic_path(final, make_parents=True)


def _atomic_copy(src: Path, final: Path) -> None:
    with _temporary_beside(final) as tmp:
        shutil.copyfile(src, tmp)


def _decompress(src: Path, final: Path) -> None:
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[src.suffix.lower()]
    with _temporary_beside(final) as tmp, opener(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, _CHUNK)


# ---------------------------------------------------------------------------
# archives
# ---------------------------------------------------------------------------


def _unsafe_name(name: str) -> str | None:
    """Why a member name could escape the extraction folder (None if it cannot)."""
    normal = name.replace("\\", "/")
    pure = PurePosixPath(normal)
    if pure.is_absolute() or (len(normal) > 1 and normal[1] == ":"):
        return "is an absolute path"
    if ".." in pure.parts:
        return "contains '..'"
    return None


def _members(archive: Path) -> list[tuple[str, str]]:
    """``(name, kind)`` of every member; kind is ``"file"``, ``"dir"``, ``"link"`` or ``"other"``."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            out = []
            for info in z.infolist():
                mode = info.external_attr >> 16
                kind = "link" if stat.S_ISLNK(mode) else "dir" if info.is_dir() else "file"
                out.append((info.filename, kind))
            return out
    try:
        with tarfile.open(archive) as t:
            return [(m.name, "file" if m.isfile() else "dir" if m.isdir() else "link" if (m.issym() or m.islnk()) else "other")
                    for m in t.getmembers()]
    except tarfile.TarError as exc:
        raise InputError(f"{archive}: not a readable zip or tar archive ({exc})") from None


def check_archive_members(archive: str | os.PathLike) -> list[str]:
    """Names of an archive's regular files, after refusing any unsafe member.

    Raises
    ------
    InputError
        When a member has an absolute name, a ``..`` component, or is a link
        whose target could lie outside the folder (links are refused outright).

    Examples
    --------
    >>> import io, tarfile, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.tar"
    >>> with tarfile.open(p, "w") as t:
    ...     info = tarfile.TarInfo("../evil.txt"); info.size = 0
    ...     t.addfile(info, io.BytesIO(b""))
    >>> check_archive_members(p)
    Traceback (most recent call last):
    ...
    sfapprox._errors.InputError: ...a.tar: member '../evil.txt' contains '..'; refusing the archive (it could write outside the extraction folder)
    """
    archive = Path(archive)
    files = []
    for name, kind in _members(archive):
        why = _unsafe_name(name)
        if why is None and kind == "link":
            why = "is a link"
        if why is None and kind == "other":
            why = "is not a regular file or folder"
        if why is not None:
            raise InputError(f"{archive}: member {name!r} {why}; refusing the archive (it could write outside the extraction folder)")
        if kind == "file":
            files.append(name)
    return files


def extract_member(archive: str | os.PathLike, member: str, final: str | os.PathLike) -> Path:
    """Extract one regular-file member of a zip/tar archive to ``final``, atomically.

    The member is read as a stream and written to a temporary file beside
    ``final``; the member's own name never becomes a path.
    """
    archive, final = Path(archive), Path(final)
    files = check_archive_members(archive)
    if member not in files:
        shown = ", ".join(files[:10]) + (" ..." if len(files) > 10 else "")
        raise InputError(f"{archive}: no file member {member!r} (files: {shown})")
    with _temporary_beside(final) as tmp, open(tmp, "wb") as out:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z, z.open(member) as src:
                shutil.copyfileobj(src, out, _CHUNK)
        else:
            with tarfile.open(archive) as t:
                src = t.extractfile(t.getmember(member))
                shutil.copyfileobj(src, out, _CHUNK)
    return final


# ---------------------------------------------------------------------------
# verification (no downloads)
# ---------------------------------------------------------------------------


def verify_entry(entry: Entry, *, data_dir: str | os.PathLike | None = None, cache: Path | None = None) -> tuple[str, str]:
    """``(status, detail)`` for ``datasets verify``; never downloads.

    status is ``"ok"`` (present, hash matches), ``"unchecked"`` (present, no
    hash in the manifest), ``"mismatch"``, ``"missing"`` or ``"generated"``.
    """
    if entry.generator:
        return "generated", f"generator {entry.generator}"
    try:
        found = locate(entry, data_dir=data_dir, cache=cache)
    except ChecksumError as exc:
        return "mismatch", str(exc)
    if found is None:
        return "missing", _missing_message(entry, data_dir, None)
    return ("ok" if found.verified else "unchecked"), f"{found.path} ({found.origin})"
