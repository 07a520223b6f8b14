"""Finding, downloading and verifying the files of manifest entries.

Where a file is looked for, in order:

1. ``DATA_DIR/<file>`` when a data folder is given (``--data-dir``): used and
   verified, nothing is downloaded;
2. ``<manifest folder>/<file>`` (then, for a manifest that is a link, beside its target);
3. the download cache ``pooch.os_cache("sfapprox")/<manifest name>/<file>`` (the name made safe,
   :func:`cache_folder_name`);
4. a download from ``url`` with pooch into that cache (a compressed copy is
   decompressed; an archive has its ``member`` extracted).  The download is
   the file the URL names: a ``.gz`` file that its server labels
   ``Content-Encoding: gzip`` is kept as sent (:func:`_body`).

Every file with a ``sha256`` is verified wherever it came from.  Downloads
are atomic (pooch writes to a temporary file and moves it into place only
after its hash matched) and extraction is too: the member is streamed into a
temporary file in the target folder while its SHA-256 is computed, and is
moved into place only when the hash matches, so a wrong file never appears
under the entry's name.  Archives are checked member by member first:
absolute names, ``..`` components and link members refuse the whole
archive, so nothing can be written outside the cache folder.  What is
downloaded, decompressed or extracted is bounded (:func:`size_limit`: the
free disk space less a reserve, and ``max_bytes``), so a small archive that
expands without end cannot fill the disk.  The cache folder of a manifest is
named after its file name, made safe (:func:`cache_folder_name`).

When nothing works the entry raises :class:`UnavailableError`, whose message
says where to put the file.  A run that fetches many entries passes one
:class:`NetworkState` to every call: once a download fails for want of a
network, no further host is tried in that run.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import hashlib
import itertools
import logging
import lzma
import os
import re
import shutil
import stat
import tarfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from .._atomic import NO_ROOM, OutputError, full_disk, new_temporary, os_cause, place_temporary, process_gone, write_advice
from .._errors import InputError, parameter
from .._global_state import logs_off
from .._validation import format_bytes
from .manifest import COMPRESSED_SUFFIXES, Entry, is_archive

__all__ = [
    "UnavailableError",
    "ChecksumError",
    "Located",
    "NetworkState",
    "cache_dir",
    "check_data_dir",
    "is_present",
    "file_sha256",
    "locate",
    "fetch_entry",
    "verify_entry",
    "check_archive_members",
    "extract_member",
    "cache_folder_name",
    "size_limit",
    "download_problem",
]

_CHUNK = 1 << 16


class UnavailableError(InputError):
    """An entry's file is neither present nor downloadable; the message says where to put it.

    Parameters
    ----------
    message : str
        One line: the entry, what was tried, and where to put the file.
    """


@dataclass
class NetworkState:
    """What one run learned about the network: after a download fails for want of one, no other host is tried.

    Pass the same object to every :func:`fetch_entry` of a run.  A failure
    that :func:`download_problem` calls "no network" (a name that does not
    resolve, a host that refuses or does not answer, an unreachable network)
    sets ``down`` to that problem; from then on downloads are not tried and
    their entries are named in ``skipped``, each once, and never one whose
    download was tried (``tried``): a run asks for a model file twice (its
    weights' names are listed before any work, then it is read).

    Attributes
    ----------
    down : str or None
        The "no network" problem met in this run (None: none yet).
    skipped : list of str
        Names of the entries whose download was not tried because of it.
    tried : set of str
        Names of the entries whose download was tried in this run.

    Examples
    --------
    >>> state = NetworkState()
    >>> state.down is None, state.skipped
    (True, [])
    """

    down: str | None = None
    skipped: list[str] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)


class ChecksumError(InputError):
    """A file's SHA-256 differs from every hash its manifest entry accepts.

    Parameters
    ----------
    message : str
        One line: the entry, the file, the expected and the actual hash.
    """


@dataclass(frozen=True)
class Located:
    """Where an entry's file was found and whether its hash was checked.

    ``origin`` is ``"data-dir"``, ``"manifest-dir"``, ``"cache"`` or
    ``"download"``; ``verified`` is False when the entry has no ``sha256``.

    Attributes
    ----------
    path : Path
        The file.
    origin : {"data-dir", "manifest-dir", "cache", "download"}
        Where it was found.
    verified : bool
        Whether its SHA-256 was checked (False when the entry gives none).
    """

    path: Path
    origin: str
    verified: bool


def cache_dir() -> Path:
    """The download cache, ``pooch.os_cache("sfapprox")`` (``$SFAPPROX_CACHE`` overrides it).

    Returns
    -------
    pathlib.Path
        The folder (not created here).
    """
    import pooch

    override = os.environ.get("SFAPPROX_CACHE")
    return Path(override) if override else Path(pooch.os_cache("sfapprox"))


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file, read in 64 KiB chunks.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_folder_name(manifest: str | os.PathLike) -> str:
    """The cache sub-folder of a manifest: its file name without ``.toml``, made a safe folder name.

    Only letters, digits, ``_``, ``-``, ``+`` and inner dots are kept, so the
    folder always lies inside the cache (a manifest named ``...toml`` would
    otherwise give ``..``).

    Parameters
    ----------
    manifest : str or os.PathLike
        The manifest's path (only its file name is used).

    Examples
    --------
    >>> cache_folder_name("data_manifests/paper-table1.toml"), cache_folder_name("...toml"), cache_folder_name("a b.toml")
    ('paper-table1', 'manifest', 'a_b')

    A bundled manifest given by its name keeps the folder its path had (files fetched stay fetched):

    >>> cache_folder_name("paper-table1")
    'paper-table1'
    """
    stem = Path(manifest).name
    if stem.lower().endswith(".toml"):
        stem = stem[: -len(".toml")]
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", stem).strip(".")
    return safe or "manifest"


def _entry_cache(entry: Entry, cache: Path | None) -> Path:
    return (cache or cache_dir()) / cache_folder_name(entry.manifest)


#: Space left free on the cache's file system (at most this, or 5% of a small one).
DISK_RESERVE = 256 * 1024**2


def size_limit(folder: str | os.PathLike, max_bytes: int | None = None) -> int:
    """The most bytes a file written to ``folder`` may have: the free space less a reserve, and ``max_bytes``.

    The reserve is ``min(DISK_RESERVE, 5% of the file system)``, so fetching
    never leaves the disk full for everything else.

    Parameters
    ----------
    folder : str or os.PathLike
        An existing folder on the file system that will hold the file.
    max_bytes : int, optional
        A further bound in bytes.

    Returns
    -------
    int
        Bytes, at least 0.
    """
    usage = shutil.disk_usage(folder)
    limit = usage.free - min(DISK_RESERVE, usage.total // 20)
    if max_bytes is not None:
        limit = min(limit, int(max_bytes))
    return max(0, limit)


def check_data_dir(data_dir: str | os.PathLike | None, *, name: str | None = None) -> Path | None:
    """``data_dir`` as a Path once it is known to be a folder (None stays None).

    A data folder holds files that are already there: nothing is downloaded
    into it (downloads go to :func:`cache_dir`), so a folder that does not
    exist is a mistyped path or a folder of another machine, refused before
    any work.  The message names the setting as its reader gives it
    (:func:`~sfapprox._errors.parameter`): ``data_dir='...'`` to a Python
    caller, ``--data-dir ...`` on the command line.

    Parameters
    ----------
    data_dir : str, os.PathLike or None
        The data folder given, if any.
    name : str, optional
        The setting's name in the message, instead of ``data_dir`` spelled for its reader (a caller of
        its own name for it).

    Returns
    -------
    Path or None

    Raises
    ------
    InputError
        When ``data_dir`` does not exist or is not a folder (one line saying what to do).

    Examples
    --------
    >>> check_data_dir("no/such/folder")
    Traceback (most recent call last):
    ...
    sfapprox._errors.InputError: data_dir='no/such/folder': no such folder; point it at the folder that holds the manifest's files, or leave it out to download them into the cache
    """
    if data_dir is None:
        return None
    path = Path(data_dir)
    if path.is_dir():
        return path
    what = "not a folder" if path.exists() else "no such folder"
    given = parameter("data_dir", os.fspath(data_dir)) if name is None else f"{name} {os.fspath(data_dir)}"
    raise InputError(f"{given}: {what}; point it at the folder that holds the manifest's files, "
                     "or leave it out to download them into the cache")


def _nearest_folder(path: Path) -> Path:
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def _verify(entry: Entry, path: Path, origin: str = "") -> bool:
    """Check ``path`` against the entry's hashes; True if checked, False if it has none.  ``origin``
    "cache": the file is a download of sfapprox's own, which the message says how to replace."""
    if not entry.sha256:
        return False
    got = file_sha256(path)
    if got not in entry.sha256:
        expected = entry.sha256[0] if len(entry.sha256) == 1 else " or ".join(entry.sha256)
        # a corrupted download in the cache failed every later run with no word of what to do
        redo = (f"; it is a download in sfapprox's cache: delete it ({path}) and fetch again"
                if origin == "cache" and entry.url else "")
        raise ChecksumError(
            f"{entry.where}: {path}: SHA-256 mismatch (expected {expected}, got {got}); "
            f"the file is corrupted or a different version (or the manifest's hash is outdated){redo}"
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
    # beside the manifest: its folder (absolute), and a linked manifest's target's (Entry.folders)
    folders += [(Path(folder), "manifest-dir") for folder in entry.folders or (Path(entry.manifest).parent,)]
    folders.append((_entry_cache(entry, cache), "cache"))
    return folders


def is_present(entry: Entry, *, data_dir: str | os.PathLike | None = None, cache: Path | None = None) -> bool:
    """Whether the entry's file (and its companions) lies in a folder :func:`locate` searches; reads nothing.

    A quick look before a run: an entry that is not present needs a download
    (:func:`fetch_entry`); one that is present is still verified when it is used.

    Parameters
    ----------
    entry : Entry
        A manifest entry (a generator entry gives False).
    data_dir : str or os.PathLike, optional
        Folder searched first (``--data-dir``).
    cache : Path, optional
        The download cache (default :func:`cache_dir`).
    """
    return local_path(entry, data_dir=data_dir, cache=cache) is not None


def local_path(entry: Entry, *, data_dir: str | os.PathLike | None = None, cache: Path | None = None) -> Path | None:
    """The entry's file where :func:`locate` would find it, without reading or verifying it; None when
    it is in none of the folders (or the entry is a generator's).

    Parameters
    ----------
    entry : Entry
        A manifest entry.
    data_dir : str or os.PathLike, optional
        Folder searched first (``--data-dir``).
    cache : Path, optional
        The download cache (default :func:`cache_dir`).
    """
    found = _find(entry, data_dir, cache)
    return None if found is None else found[0]


def _find(entry: Entry, data_dir: str | os.PathLike | None, cache: Path | None) -> tuple[Path, str] | None:
    """The entry's file and the origin of the first folder that holds it (and its companions), or None."""
    if entry.file is None:
        return None
    for folder, origin in _candidates(entry, Path(data_dir) if data_dir else None, cache):
        path = _present(entry, folder)
        if path is not None:
            return path, origin
    return None


def locate(entry: Entry, *, data_dir: str | os.PathLike | None = None, cache: Path | None = None) -> Located | None:
    """Find an entry's file without downloading; verify it when found.

    Parameters
    ----------
    entry : Entry
        A file entry of a manifest.
    data_dir : str or os.PathLike, optional
        Folder searched first (``--data-dir``).
    cache : Path, optional
        The download cache (default :func:`cache_dir`).

    Returns
    -------
    Located or None
        None when the file is in none of the folders.

    Raises
    ------
    ChecksumError
        When the file found does not match the entry's ``sha256``.
    """
    found = _find(entry, data_dir, cache)
    if found is None:
        return None
    path, origin = found
    return Located(path, origin, _verify(entry, path, origin))


def fetch_entry(
    entry: Entry,
    *,
    data_dir: str | os.PathLike | None = None,
    cache: Path | None = None,
    download: bool = True,
    max_bytes: int | None = None,
    network: NetworkState | None = None,
) -> Located:
    """The entry's file: found locally (and verified) or downloaded into the cache.

    Parameters
    ----------
    entry : Entry
        A file entry (not a generator).
    data_dir : str or os.PathLike, optional
        Folder searched first (``--data-dir``).
    cache : Path, optional
        Download cache (default :func:`cache_dir`).
    download : bool, default=True
        Allow downloading from the entry's ``url``.
    max_bytes : int, optional
        Largest download or extracted file accepted; the free disk space
        (less a reserve) bounds it in any case (:func:`size_limit`).
    network : NetworkState, optional
        Shared by the calls of one run: once a download has failed for want
        of a network, later calls do not try theirs (their message says so).

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
    if network is not None and network.down:
        # once each, and not one tried: "skipped the downloads of 3 more entries" counted a model file's
        # entry twice (asked for its weights' names, then for its file) and the entry whose download failed
        if entry.name not in network.skipped and entry.name not in network.tried:
            network.skipped.append(entry.name)
        raise UnavailableError(_missing_message(entry, data_dir, f"download not tried ({network.down}, earlier in this run)"))
    target = _entry_cache(entry, cache)
    if network is not None:
        network.tried.add(entry.name)
    try:
        path, verified = _download(entry, target, max_bytes)
    except (ChecksumError, UnavailableError):
        raise
    except InputError as exc:  # unsafe or oversized archive and similar: say so, keep the hint
        problem = str(exc).removeprefix(f"{entry.where}: ")  # the message starts with the entry already
        raise UnavailableError(_missing_message(entry, data_dir, problem)) from None
    except OutputError as exc:  # the cache, not the download: it read "download from URL failed (...)"
        raise UnavailableError(_missing_message(entry, data_dir, _cache_problem(exc, target))) from None
    except Exception as exc:  # network errors come in many types (requests, OSError, ...)
        problem = download_problem(exc, entry.url)
        if network is not None and problem.startswith("no network"):
            network.down = problem
        raise UnavailableError(_missing_message(entry, data_dir, problem)) from None
    return Located(path, "download", verified)


def _cache_problem(exc: OutputError, folder: Path) -> str:
    """Why the download cache (the entry's ``folder`` in it) could not be written, with what to do for that
    cause: a full disk needs room, or a cache on another disk ("a folder you can write" was said of a
    full disk too, where the folder could be written and the hint led nowhere); any other cause (a
    folder not writable, a file in the way), a folder that can be written; a file too large, a read-only
    or failing disk, what :func:`~sfapprox._atomic.write_advice` says (another folder there fails alike)."""
    what = f"the download cache cannot be written ({' '.join(str(exc).split())})"
    if exc.errno in NO_ROOM:
        return f"{what}: {full_disk(folder)}, or set SFAPPROX_CACHE to a folder on another disk"
    if exc.errno in _FOLDER_NO_HELP:  # a file too large, a read-only or failing disk: "a folder you can write" misled
        return f"{what}: {write_advice(exc.errno, folder)} (SFAPPROX_CACHE sets the cache's folder)"
    return f"{what}; set SFAPPROX_CACHE to a folder you can write"


#: errnos of a cache write that another folder you can write, on the same file system, would fail alike.
_FOLDER_NO_HELP = (errno.EFBIG, errno.EROFS, errno.EIO)


def download_problem(exc: BaseException, url: str) -> str:
    """A download failure in a few words: ``"no network: could not reach example.org"``, ``"HTTP 404 ..."``.

    requests wraps the cause in layers of urllib3 text (``HTTPSConnectionPool(host=...):
    Max retries exceeded ... NewConnectionError(...)``); the user needs the host and what went wrong.

    Parameters
    ----------
    exc : BaseException
        What the download raised.
    url : str
        The URL it was downloading.

    Returns
    -------
    str
        One line; it starts with ``"no network"`` when the host could not be
        reached (what :class:`NetworkState` records).
    """
    host = urlparse(url).hostname or url
    text = " ".join(str(exc).split())
    try:
        import requests  # pooch's HTTP library: loaded with pooch, here only to name the failure
    except ImportError:  # pragma: no cover - pooch depends on requests
        requests = None
    if requests is not None:
        if isinstance(exc, requests.HTTPError) and exc.response is not None:
            return f"download from {url} failed (HTTP {exc.response.status_code} {exc.response.reason or ''})".replace(" )", ")")
        if isinstance(exc, requests.ReadTimeout) or (isinstance(exc, requests.ConnectionError)
                                                     and not isinstance(exc, requests.ConnectTimeout)
                                                     and "read timed out" in text.lower()):
            # the host answered, then sent nothing for the read timeout: this download's problem, not the
            # network's (every later host was skipped as unreachable)
            return f"download from {url} stalled (no data within the read timeout); try again later"
        if isinstance(exc, requests.Timeout):
            return f"no network: {host} did not answer in time"
        if isinstance(exc, requests.ConnectionError):
            low = text.lower()
            if "name" in low and ("resolution" in low or "not known" in low or "resolve" in low):
                why = " (its name could not be resolved)"
            elif "refused" in low:
                why = " (connection refused)"
            elif "unreachable" in low:
                why = " (network unreachable)"
            else:
                why = ""
            return f"no network: could not reach {host}{why}"
        if isinstance(exc, (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)):
            # the body ended before its Content-Length (or its last chunk): was "failed (ChunkedEncodingError)"
            return f"download from {url} was cut short (the connection closed before the whole file came); try again"
        if isinstance(exc, requests.TooManyRedirects):
            return f"download from {url} failed (too many redirects; the URL may have moved: check it in a browser)"
        if isinstance(exc, requests.RequestException):  # e.g. a redirect to an ftp:// URL: say where
            return f"download from {url} failed ({type(exc).__name__}: {text})"
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"download from {url} failed ({where}{exc.strerror})"
    return f"download from {url} failed ({type(exc).__name__}: {text})"


def _missing_message(entry: Entry, data_dir, problem: str | None) -> str:
    # the setting as its reader gives it: data_dir='DATA_DIR' to a call, --data-dir DATA_DIR on the command line
    setting = parameter("data_dir", shown="'DATA_DIR'")
    where = f"{Path(data_dir) / entry.file}" if data_dir else f"DATA_DIR/{entry.file} and pass {setting}"
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


def _download(entry: Entry, target: Path, max_bytes: int | None) -> tuple[Path, bool]:
    """Download ``entry.url`` into ``target`` (the entry's cache folder); return the file path and whether it was verified."""
    import pooch

    # no "Downloading ..." chatter on stderr (pooch's own logger object: its name is not in logging's registry)
    with logs_off(pooch.get_logger(), below=logging.WARNING):
        return _downloaded(pooch, entry, target, max_bytes)


def _downloaded(pooch, entry: Entry, target: Path, max_bytes: int | None) -> tuple[Path, bool]:
    """:func:`_download`'s work, its pooch logger quieted by the caller (its level put back after: the
    caller's own setting of pooch's logger is the caller's)."""
    name = PurePosixPath(urlparse(entry.url).path).name or "download"
    direct = entry.member is None and not _needs_decompression(entry)
    known = f"sha256:{entry.sha256[0]}" if direct and len(entry.sha256) == 1 else None
    downloads = target / ".downloads"
    _make_folder(downloads)  # before any request: a read-only cache is no download's fault
    _sweep_stale(downloads)
    limit = size_limit(downloads, max_bytes)
    # The downloaded copy is this run's own (its process in the name) and removed once used: pooch
    # reuses a file already there, so a bad or truncated copy of an earlier run was "downloaded" again
    # on every retry without a request, and each good one was kept twice.
    spot = downloads / f"run{os.getpid()}-{entry.name}-{name}"
    spot.unlink(missing_ok=True)
    try:
        fetched = Path(pooch.retrieve(entry.url, known_hash=known, fname=spot.name, path=downloads,
                                      downloader=_bounded_downloader(entry, limit), progressbar=False))
    except ValueError as exc:  # pooch's hash mismatch (the temporary file is already gone)
        if "hash" in str(exc).lower():
            raise ChecksumError(f"{entry.where}: download from {entry.url}: {' '.join(str(exc).split())}") from None
        raise
    except OSError as exc:  # requests' errors are OSErrors too; any other is pooch's writing in .downloads
        import requests

        if isinstance(exc, requests.RequestException):
            raise
        # pooch's own check of the folder adds " | Pooch could not write to data cache folder ..."
        cause = exc.strerror or " ".join(str(exc).split(" | ")[0].split()) or type(exc).__name__
        raise OutputError(f"{exc.filename or downloads}: {cause}", downloads, exc.errno) from None
    try:
        return _place(entry, fetched, target, max_bytes)
    finally:
        fetched.unlink(missing_ok=True)


#: A file of pooch's own (``tmpXXXXXXXX``, the download before it is renamed) untouched for this long
#: belongs to no running download: a live one writes to it all along, or stalls and gives up (read timeout).
STALE_SECONDS = 3600.0


def _sweep_stale(downloads: Path) -> None:
    """Remove what downloads killed with ``kill -9`` (or a power cut) left in ``downloads``: a run's
    own copy (``runPID-ENTRY-FILE``) whose process is gone, and pooch's temporary files untouched for
    :data:`STALE_SECONDS`.  Each took disk space for good and counted against the next download's
    size limit.  A file another run is writing now is never one of them."""
    now = time.time()
    for path in downloads.iterdir():
        with contextlib.suppress(OSError):
            if _stale(path, now) and path.is_file() and not path.is_symlink():
                path.unlink()


def _stale(path: Path, now: float) -> bool:
    """Whether ``path`` in ``.downloads`` is left by a download that no longer runs (see :func:`_sweep_stale`)."""
    match = _OWN_COPY.fullmatch(path.name)
    if match is None:
        return path.name.startswith("tmp") and now - path.stat().st_mtime > STALE_SECONDS
    return process_gone(int(match.group(1)))  # as _atomic's temporaries


#: A run's own downloaded copy, ``run<pid>-<entry>-<file name>``: the process first, where no entry's or
#: file's name can be mistaken for it.
_OWN_COPY = re.compile(r"run(\d+)-.*", re.DOTALL)


def _place(entry: Entry, fetched: Path, target: Path, max_bytes: int | None) -> tuple[Path, bool]:
    """The entry's file from the downloaded ``fetched``: extracted, decompressed or copied, checked."""
    final = target / entry.file
    _make_folder(final.parent)
    _refuse_web_page(entry, fetched)
    if entry.member is not None:
        shown = f"download from {entry.url}"  # not this run's own copy, gone when the message is read
        files = _file_sizes(fetched, shown)  # refused before anything is extracted, and read once
        # Companions first: the entry's file appears last, once everything it needs is there.
        for companion in entry.companions:
            sibling = str(PurePosixPath(entry.member).parent / PurePosixPath(companion).name)
            _extract(fetched, sibling, target / companion, (), max_bytes, entry.where, shown, files)
        return final, _extract(fetched, entry.member, final, entry.sha256, max_bytes, entry.where, shown, files)
    sink = _Sink(entry.sha256, final, max_bytes, entry.where)
    # the URL, not the name of this run's own copy (run<pid>-...), which the user never sees
    source = f"download from {entry.url}"
    if _needs_decompression(entry):
        suffix = fetched.suffix.lower()
        opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
        with opener(fetched, "rb") as src:
            return final, sink.fill(src, f"decompressed {source}", f"{source}: not a complete, valid {suffix} file")
    with open(fetched, "rb") as src:
        return final, sink.fill(src, source)


#: The start of an HTML page (after a byte-order mark, blanks, an XML declaration or comments).
_WEB_PAGE = re.compile(rb"^(?:\xef\xbb\xbf)?(?:\s|<\?xml[^>]*>|<!--.*?-->)*<(?:!doctype\s+html|html|head|body)[\s>]",
                       re.IGNORECASE | re.DOTALL)
#: Files that are web pages on purpose.
_WEB_SUFFIXES = (".html", ".htm", ".xhtml")


def _refuse_web_page(entry: Entry, fetched: Path) -> None:
    """Refuse a download that is an HTML page: a server's error, sign-in or "moved" page sent with status
    200 was kept as the entry's file (without a sha256), and every later run read it as the matrix and
    failed on its first line, with no word that it was a download to replace."""
    if entry.file.lower().endswith(_WEB_SUFFIXES) or (entry.member or "").lower().endswith(_WEB_SUFFIXES):
        return
    with open(fetched, "rb") as f:
        head = f.read(4096)
    if _WEB_PAGE.match(head):
        raise InputError(f"download from {entry.url}: the server sent a web page (HTML), not the file (an error, "
                         "sign-in or moved page?); nothing was kept; open the URL in a browser, or fix the manifest's url")


class _Counting:
    """A file object for pooch's downloader that refuses to grow past ``limit`` bytes."""

    def __init__(self, f, limit: int, what: str):
        self._f, self._limit, self._what, self.size = f, limit, what, 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self._limit:
            raise InputError(f"{self._what}: larger than the {format_bytes(self._limit)} allowed "
                             "(free disk space less a reserve, or max_bytes); nothing was kept")
        return self._f.write(data)

    def __getattr__(self, name: str):
        return getattr(self._f, name)


def _bounded_downloader(entry: Entry, limit: int):
    import pooch

    base = pooch.HTTPDownloader(progressbar=False)

    def download(url, output_file, pooch_obj, check_only=False):
        if check_only:
            return base(url, output_file, pooch_obj, check_only=True)
        with open(output_file, "w+b") as f:
            return _get(url, _Counting(f, limit, f"{entry.where}: download from {url}"))

    return download


def _get(url: str, out) -> None:
    """Write the file ``url`` names into ``out`` (as pooch's HTTPDownloader does, but :func:`_body`'s bytes)."""
    import requests
    from pooch import downloaders

    # pooch's own timeout where it has one (1.8+); pooch 1.7, which pyproject allows, has no DEFAULT_TIMEOUT
    # (importing it made every download an ImportError) and 1.8 set it to 30 s
    timeout = getattr(downloaders, "DEFAULT_TIMEOUT", 30)
    with requests.get(url, timeout=timeout, stream=True) as response:
        response.raise_for_status()
        for chunk in _body(response, url):
            out.write(chunk)


#: URL endings of a gzip file (the compressed tar archives' too).
_GZIP_URLS = (".gz", ".tgz")
_GZIP_MAGIC = b"\x1f\x8b"


def _body(response, url: str):
    """The chunks of the file ``url`` names, from ``response`` (streamed).

    requests undoes a ``Content-Encoding: gzip``, right where the server compressed the file for the way.
    A server that labels a ``.gz`` file so (a common misconfiguration: Apache's ``AddEncoding x-gzip .gz``,
    an object store's metadata) sends the file as it is, and requests handed over its content: kept as the
    ``.gz`` file its sha256 was refused, to be decompressed it was "not a complete, valid .gz file".  So a
    URL that names a gzip file gets the body as sent, decoded only where that leaves gzip data (a server
    that compressed the file once more, as HTTP means it)."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("gzip", "x-gzip") or not urlparse(url).path.lower().endswith(_GZIP_URLS):
        return response.iter_content(_CHUNK)
    chunks = _as_sent(response)
    head, inside = b"", None
    for chunk in chunks:
        head += chunk
        if (inside := _gzip_inside(head)) is not None:
            break
    rest = itertools.chain([head], chunks)
    return _gunzip(rest) if inside else rest


def _gzip_inside(data: bytes) -> bool | None:
    """Whether the gzip ``data`` holds gzip data (its first two bytes decompressed); None: too few bytes to say."""
    try:
        start = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, len(_GZIP_MAGIC))
    except zlib.error:
        return False  # not gzip data: there is nothing to undo
    return start == _GZIP_MAGIC if len(start) == len(_GZIP_MAGIC) else None


def _as_sent(response):
    """``response``'s body as the server sent it (no Content-Encoding undone); urllib3's errors as
    requests' own (:meth:`requests.Response.iter_content`'s), which :func:`download_problem` words."""
    import requests
    from urllib3.exceptions import ProtocolError, ReadTimeoutError, SSLError

    try:
        yield from response.raw.stream(_CHUNK, decode_content=False)
    except ProtocolError as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from None
    except ReadTimeoutError as exc:
        raise requests.ConnectionError(exc) from None
    except SSLError as exc:
        raise requests.exceptions.SSLError(exc) from None


def _gunzip(chunks):
    """``chunks`` of gzip data decompressed, member after member (as urllib3 undoes a Content-Encoding)."""
    import requests

    member, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
    try:
        for chunk in chunks:
            while chunk:
                fed = True
                if data := member.decompress(chunk):
                    yield data
                chunk = member.unused_data
                if member.eof:
                    member, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
    except zlib.error as exc:
        raise requests.exceptions.ContentDecodingError(exc) from None
    if fed:
        raise requests.exceptions.ContentDecodingError("the gzip Content-Encoding ended before its end-of-stream marker")


class _Sink:
    """Streams data into ``final`` atomically: bounded in size, hashed, placed only when the hash matches."""

    def __init__(self, hashes: tuple[str, ...], final: Path, max_bytes: int | None, where: str = ""):
        self.hashes, self.final, self.max_bytes, self.where = tuple(hashes), Path(final), max_bytes, where

    def fill(self, src, what: str, damaged: str | None = None) -> bool:
        """Copy ``src`` into place; True when it was checked against a hash.

        The data goes to a temporary file of this process's own beside ``final``, named as
        :func:`atomic_path` names its own, and only the move into place holds Ctrl-C and SIGTERM back
        (:func:`place_temporary`): atomic_path holds them until its block ends, which held them through a
        whole decompression (seconds to minutes) and then placed the file.  ``damaged`` says what a read
        error of ``src`` means (default: ``what`` cannot be read).
        """
        prefix = f"{self.where}: " if self.where else ""
        with _own_temporary(self.final) as tmp:
            got = self._stream(src, tmp, f"{prefix}{what}", f"{prefix}{damaged or what + ': cannot be read'}")
            if self.hashes and got not in self.hashes:
                expected = self.hashes[0] if len(self.hashes) == 1 else " or ".join(self.hashes)
                raise ChecksumError(f"{prefix}{what}: SHA-256 mismatch (expected {expected}, got {got}); the file "
                                    "is corrupted or a different version (or the manifest's hash is outdated); nothing was kept")
            place_temporary(tmp, self.final)  # already on disk: the held-back part is a rename and an fsync
        return bool(self.hashes)

    def _stream(self, src, tmp: Path, what: str, damaged: str) -> str:
        """Copy ``src`` into ``tmp``, bounded, fsync'ed; its SHA-256 (hex)."""
        limit = size_limit(self.final.parent, self.max_bytes)
        digest = hashlib.sha256()
        size = 0
        with _writing(self.final), open(tmp, "wb") as out:
            while chunk := _read(src, damaged):
                size += len(chunk)
                if size > limit:
                    raise InputError(f"{what}: larger than the {format_bytes(limit)} allowed for {self.final.name} "
                                     "(free disk space less a reserve, or max_bytes); nothing was kept")
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        return digest.hexdigest()


#: What reading a damaged compressed file or archive member raises (bz2: OSError "Invalid data stream",
#: a cut-short one EOFError; gzip BadGzipFile, an OSError; zip a wrong CRC).
_DAMAGED = (OSError, EOFError, lzma.LZMAError, zlib.error, tarfile.TarError, zipfile.BadZipFile)


def _read(src, damaged: str) -> bytes:
    """The next chunk of ``src``; a read error is ``damaged`` in one line (it was an OutputError
    "<the cache file>: not written: Invalid data stream", or an EOFError's type name)."""
    try:
        return src.read(_CHUNK)
    except _DAMAGED as exc:
        cause = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"{damaged} ({cause}); nothing was kept") from None


@contextlib.contextmanager
def _writing(final: Path):
    """Turn an OSError of writing ``final`` (or a folder on its way) into :class:`OutputError`, one line."""
    try:
        yield
    except OSError as exc:
        cause = os_cause(exc)
        where = f" ({exc.filename})" if exc.filename and Path(exc.filename) != final else ""
        raise OutputError(f"{final}: not written: {cause}{where}; nothing was kept", final, exc.errno) from None


def _make_folder(folder: Path) -> None:
    """``folder`` and its parents; an OSError is an :class:`OutputError` naming the folder that could not be made."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{exc.filename or folder}: {os_cause(exc)}", folder, exc.errno) from None


@contextlib.contextmanager
def _own_temporary(final: Path):
    """A temporary file beside ``final``, named as :func:`atomic_path` names its own (:func:`new_temporary`: a
    later write of ``final`` removes one that ``kill -9`` left); removed when the block ends."""
    _make_folder(final.parent)
    with _writing(final):
        name = new_temporary(final)
    try:
        yield name
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _needs_decompression(entry: Entry) -> bool:
    url_path = urlparse(entry.url).path.lower()
    return url_path.endswith(COMPRESSED_SUFFIXES) and not is_archive(url_path) and not entry.file.lower().endswith(
        COMPRESSED_SUFFIXES
    )


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


def _members(archive: Path, shown: str | None = None) -> list[tuple[str, str, int]]:
    """``(name, kind, declared size)`` of every member; kind is ``"file"``, ``"dir"``, ``"link"`` or ``"other"``."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            out = []
            for info in z.infolist():
                mode = info.external_attr >> 16
                kind = "link" if stat.S_ISLNK(mode) else "dir" if info.is_dir() else "file"
                out.append((info.filename, kind, info.file_size))
            return out
    try:
        with tarfile.open(archive) as t:
            return [(m.name, "file" if m.isfile() else "dir" if m.isdir() else "link" if (m.issym() or m.islnk()) else "other",
                     m.size) for m in t.getmembers()]
    except (tarfile.TarError, EOFError, OSError, zlib_error()) as exc:
        cause = " ".join(str(exc).split())
        if "could not be opened successfully" in cause:  # tarfile's list of every method it tried
            cause = "neither zip nor tar, plain or compressed"
        raise InputError(f"{shown or archive}: not a readable zip or tar archive ({cause})") from None


def zlib_error() -> type[Exception]:
    return zlib.error


def check_archive_members(archive: str | os.PathLike, *, shown: str | None = None) -> list[str]:
    """Names of an archive's regular files, after refusing any unsafe member.

    Parameters
    ----------
    archive : str or os.PathLike
        A zip or tar file (compressed tar too).
    shown : str, optional
        How messages name the archive (default: its path), e.g. ``"download from URL"``.

    Returns
    -------
    list of str
        The names of its regular-file members.

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
    return [name for name, _ in _file_sizes(Path(archive), shown)]


def _file_sizes(archive: Path, shown: str | None = None) -> list[tuple[str, int]]:
    """``(name, declared size)`` of each regular file of ``archive``, in its order, after refusing any unsafe
    member (:func:`check_archive_members`): one reading of its members (a compressed tar's is a whole
    decompression) for the check, the names and the sizes."""
    files: list[tuple[str, int]] = []
    for name, kind, size in _members(archive, shown):
        why = _unsafe_name(name)
        if why is None and kind == "link":
            why = "is a link"
        if why is None and kind == "other":
            why = "is not a regular file or folder"
        if why is not None:
            raise InputError(f"{shown or archive}: member {name!r} {why}; refusing the archive (it could write outside the extraction folder)")
        if kind == "file":
            files.append((name, size))
    return files


def extract_member(
    archive: str | os.PathLike,
    member: str,
    final: str | os.PathLike,
    *,
    sha256: tuple[str, ...] | str = (),
    max_bytes: int | None = None,
    where: str = "",
) -> Path:
    """Extract one regular-file member of a zip/tar archive to ``final``, atomically, bounded and verified.

    The member is read as a stream into a temporary file beside ``final``
    (its own name never becomes a path), hashed on the way, and moved into
    place only when its SHA-256 is one of ``sha256`` (when given).  A member
    larger than :func:`size_limit` (free disk space less a reserve, and
    ``max_bytes``) is refused, by its declared size before anything is
    written and by the bytes actually read (an archive may lie).

    Parameters
    ----------
    archive : str or os.PathLike
        A zip or tar file.
    member : str
        The member's name in the archive.
    final : str or os.PathLike
        Where the file goes (its folder is created).
    sha256 : str or tuple of str, default=()
        Accepted SHA-256 digests (hex); empty: not checked.
    max_bytes : int, optional
        Largest size accepted, besides the free disk space.
    where : str, default=""
        Prefix of error messages (the entry).

    Returns
    -------
    Path
        ``final``.

    Raises
    ------
    InputError
        For an unsafe archive, a missing member or one too large.
    ChecksumError
        When the member's hash does not match (nothing is placed).
    """
    hashes = (sha256,) if isinstance(sha256, str) else tuple(sha256)
    _extract(Path(archive), member, Path(final), hashes, max_bytes, where)
    return Path(final)


def _extract(archive: Path, member: str, final: Path, hashes: tuple[str, ...], max_bytes: int | None, where: str,
             shown: str | None = None, files: list[tuple[str, int]] | None = None) -> bool:
    """:func:`extract_member`'s work; True when the member was checked against a hash.  ``files``: the
    archive's :func:`_file_sizes`, when read already (an entry's companions come from the same archive)."""
    files = _file_sizes(archive, shown) if files is None else files
    # of a name given twice the last is the one extracted (tarfile's getmember, zipfile's open): its size
    declared = dict(files).get(member)
    if declared is None:
        listed = ", ".join(name for name, _ in files[:10]) + (" ..." if len(files) > 10 else "")
        raise InputError(f"{shown or archive}: no file member {member!r} (files: {listed})")
    shown = shown or archive.name
    limit = size_limit(_nearest_folder(final.parent), max_bytes)
    if declared > limit:
        prefix = f"{where}: " if where else ""
        raise InputError(f"{prefix}{shown}: member {member!r} is {format_bytes(declared)}, more than the "
                         f"{format_bytes(limit)} allowed (free disk space less a reserve, or max_bytes); nothing was extracted")
    sink = _Sink(hashes, final, max_bytes, where)
    what = f"{shown}: member {member!r}"
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z, z.open(member) as src:
            return sink.fill(src, what)
    with tarfile.open(archive) as t:
        return sink.fill(t.extractfile(t.getmember(member)), what)


# ---------------------------------------------------------------------------
# verification (no downloads)
# ---------------------------------------------------------------------------


def verify_entry(entry: Entry, *, data_dir: str | os.PathLike | None = None, cache: Path | None = None) -> tuple[str, str]:
    """``(status, detail)`` for ``datasets verify``; never downloads.

    status is ``"ok"`` (present, hash matches), ``"unchecked"`` (present, no
    hash in the manifest), ``"mismatch"``, ``"missing"`` or ``"generated"``.

    Parameters
    ----------
    entry : Entry
        A manifest entry.
    data_dir : str or os.PathLike, optional
        Folder searched first (``--data-dir``).
    cache : Path, optional
        The download cache (default :func:`cache_dir`).

    Returns
    -------
    status : str
        One of the statuses above.
    detail : str
        The file and where it was found, the mismatch, or where to put the file.
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
