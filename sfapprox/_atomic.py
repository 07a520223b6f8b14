"""Writing files so that a reader never sees half of one, and no file is replaced unasked.

Every file sfapprox writes (JSON, tables, factors, plots, downloads) goes
through :func:`atomic_path` (pooch's habit): the data is written to a hidden
temporary file in the destination folder, flushed to disk, and only then
moved onto the target.  A crash, Ctrl-C, SIGTERM or full disk while writing
leaves the old file (or nothing) in place and no temporary behind (only a
``kill -9`` can leave a hidden ``.<name>.<pid>.*.tmp``; the next write of that
file removes it, once no process of that pid runs).

Without ``force`` the move itself refuses to replace a file: the target is
created with a hard link (or an exclusive create where the file system has no
hard links), so a file that appeared while a long fit ran is never
overwritten; the finished result is then kept beside it under a new name
(:class:`OutputExistsError` says which), never lost.  SIGINT and SIGTERM are held back
while an output is written and delivered once it is complete
(:func:`sfapprox._signals.deferred`).

An output named by a symbolic link is written to the file the link points to
(the link stays a link).  A character device (``/dev/null``, ``/dev/stdout``) or
a named pipe is written through, in one piece once the result is complete,
never replaced by a file (and needs no ``force``: nothing is overwritten); a
block device or a socket is refused.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import functools
import json
import os
import re
import select
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._errors import ParameterError, SfapproxError, parameter
from ._signals import deferred, held_back
from .formats import jsonable

__all__ = ["atomic_path", "write_text", "write_json", "write_bytes", "OutputError", "OutputExistsError",
           "written_outputs", "output_target", "stream_kind", "special_kind", "names_descriptor", "FileStamp", "resolved_path",
           "check_writable", "check_named_file", "NO_ROOM", "full_disk", "write_advice", "NAME_MAX", "shortened", "check_name_length",
           "check_path_length", "name_over_limit", "path_over_limit", "WINDOWS_MAX_PATH"]

#: errnos of a write that found no room: the disk is full, or the user's quota on it is used up.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def full_disk(folder: str | os.PathLike) -> str:
    """What a write that found no room (:data:`NO_ROOM`) in ``folder`` says of its cause and what to do.

    Parameters
    ----------
    folder : str or os.PathLike
        Where the file was being written.

    Returns
    -------
    str
        ``"the file system holding FOLDER is full; free some space"``.
    """
    return f"the file system holding {os.fspath(folder) or '.'} is full; free some space"


def write_advice(code: int | None, folder: str | os.PathLike) -> str | None:
    """What a write into ``folder`` that failed with errno ``code`` says of its cause and what to do; None
    where the error's own words are all there is to say.

    A write may fail for many reasons besides a full disk (:func:`full_disk`): a file larger than its file
    system takes (FAT32, the usual USB drive's, stops at 4 GiB) or than this process may write
    (``ulimit -f``), a file system mounted read-only (or remounted so after an error), a failing disk,
    a permission withdrawn while the work ran.  The operating system's words ("File too large") name
    none of these, nor what to do.

    Parameters
    ----------
    code : int or None
        The error number (``OSError.errno``).
    folder : str or os.PathLike
        Where the file was being written.

    Returns
    -------
    str or None

    Examples
    --------
    >>> write_advice(errno.EROFS, "/mnt/usb")
    'the file system holding /mnt/usb is read-only; choose a folder on another one'
    >>> write_advice(errno.ENOENT, "out") is None
    True
    """
    where = os.fspath(folder) or "."
    if code in NO_ROOM:
        return full_disk(folder)
    if code == errno.EFBIG:
        return _too_large(where)
    if code == errno.EROFS:
        return f"the file system holding {where} is read-only; choose a folder on another one"
    if code == errno.EIO:
        return (f"the disk holding {where} failed to write (a failing or removed drive, a lost network share); "
                "check it, or choose a folder on another disk")
    if code in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {where}; choose a folder you can write, or change its permissions"
    return None


#: FAT32's largest file (4 GiB less a byte): a file-size limit of this process at least this large may not be
#: what stopped the write (:func:`_too_large`).
_FAT32_LARGEST = (1 << 32) - 1


def _too_large(folder: str) -> str:
    """Why a file was too large (EFBIG), and what to do: this process's own limit where one is set below
    FAT32's largest file (``ulimit -f``: no folder escapes it), the file system's largest file where none is,
    both where a larger one is (a scheduler's limit of 100 GiB did not stop a write to a USB drive's FAT32)."""
    file_system = (f"larger than the file system holding {folder} takes (FAT32, usual on USB drives, takes at most "
                   "4 GiB); choose a folder on another file system")
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource  # here: POSIX only

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY:
            from ._validation import format_bytes

            own = f"this process's file size limit ('ulimit -f') is {format_bytes(limit)}: raise it"
            return own if limit < _FAT32_LARGEST else f"{own}, or the file is {file_system}"
    return file_system


#: errnos of a file system that cannot make hard links (FAT, exFAT, some FUSE and SMB mounts): Linux says
#: EPERM for one with no link operation (vfat, exfat), macOS ENOTSUP (msdos), and Windows on FAT
#: ERROR_INVALID_FUNCTION, which Python reads as EINVAL (as it reads a Windows error it has no errno
#: for): without EINVAL an output not forced failed there after the work.  Any of them only leads to the
#: exclusive create, which never replaces a file either, so a wider net costs nothing.
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV,
                  errno.EINVAL}

#: Outputs this process has finished writing, the latest last (for "what exists" after an interruption).
_written: collections.deque[Path] = collections.deque(maxlen=1000)
#: Outputs into a pipe or a device a stop cut short after part of them went through: (target, bytes sent,
#: bytes in all), the latest last.  Their reader got an incomplete file: "no output was written" hid it.
_cut_short: collections.deque[tuple[Path, int, int]] = collections.deque(maxlen=1000)


@dataclasses.dataclass(frozen=True)
class FileStamp:
    """Which file is at a path now: device, inode, size and modification time.

    Given as an atomic write's ``force``, the write replaces the file at its
    path only while it is still this one: how a long run that rewrites its
    output (checkpoints) leaves alone a file someone else put there meanwhile.
    """

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike) -> "FileStamp | None":
        """The stamp of the file at ``path`` (links followed), or None when there is none."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class OutputError(SfapproxError):
    """An output file could not be written (full disk, no permission, ...); nothing partial was left.

    Attributes
    ----------
    path : Path
        The output file.
    errno : int or None
        The operating system's error number (``errno.ENOSPC`` for a full disk).
    """

    def __init__(self, message: str, path: Path, errno_: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno = errno_


class OutputExistsError(SfapproxError):
    """An output's name was taken (e.g. by a file created while a fit ran); the result was kept elsewhere.

    Attributes
    ----------
    path : Path
        The output name, left untouched.
    kept : Path
        Where the finished result was saved instead.
    """

    def __init__(self, message: str, path: Path, kept: Path):
        super().__init__(message)
        self.path = path
        self.kept = kept


def written_outputs() -> list[Path]:
    """The files :func:`atomic_path` has put in place in this process (the last 1000), oldest first."""
    return list(_written)


def cut_short_outputs() -> list[tuple[Path, int, int]]:
    """The outputs into a pipe or a device that a stop cut short after part of them went through, as
    ``(target, bytes sent, bytes in all)``, oldest first (the last 1000)."""
    return list(_cut_short)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, force: bool | FileStamp = True, make_parents: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it into place only on success.

    Parameters
    ----------
    path : path
        The output file.
    force : bool, default=True
        Replace an existing file.  With False an existing file is never
        replaced: the check is the final move itself (atomic, so a file that
        appeared while the result was computed counts too), and the finished
        result is then kept as ``<stem>.<pid>.new<suffix>`` beside it
        (:class:`OutputExistsError` says where).  Commands refuse existing
        outputs before they start work (``check_output``); this is the last
        line of defence, and it never loses a result.  A :class:`FileStamp`:
        replace the file at ``path`` only while it is that one (the one this
        run wrote last), or write it where none is left; another is kept,
        and the result goes beside it as with False.
    make_parents : bool, default=False
        Create the destination folder (caches).

    Raises
    ------
    OutputError
        When the file cannot be written (full disk, permissions): one line
        naming ``path`` and the cause; no temporary is left behind.
    """
    target = output_target(path)
    kind = stream_kind(target)
    if kind is not None:
        with _through(target, kind) as tmp:
            yield tmp
        return
    parent = target.parent if str(target.parent) else Path(".")
    if make_parents:
        parent.mkdir(parents=True, exist_ok=True)
    if not parent.is_dir():
        # an OutputError, as a full disk is: a checkpoint whose folder was removed during a long fit is
        # warned of and the fit goes on (this ended it, its factors in memory lost with it)
        raise OutputError(f"{target}: folder {parent} does not exist; create it first", target, errno.ENOENT)
    # before this write, not after it: on a nearly full disk a killed writer's temporary took the room it needs
    _remove_stale(target)
    try:
        tmp = new_temporary(target, parent)
    except OSError as exc:
        raise _output_error(target, exc) from exc
    try:
        # A Ctrl-C or SIGTERM while the file is written waits until it is complete.
        with deferred():
            try:
                yield Path(tmp)
            except OSError as exc:  # the caller's writing (a full disk): one line, as the move's
                raise _output_error(target, exc) from exc
            _finish(Path(tmp), target, force)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def place_temporary(tmp: Path, path: str | os.PathLike, *, force: bool | FileStamp = True) -> None:
    """Move ``tmp``, a finished file beside ``path`` (:func:`new_temporary`), into place as :func:`atomic_path`
    places its own when its block ends (``force`` as there), a Ctrl-C or SIGTERM held back for that move
    alone.  For a file whose writing may take long (a download's decompression: atomic_path would hold a
    stop back through all of it); ``tmp`` is left for the caller to remove where it was not moved.

    Raises
    ------
    OutputError
        When it cannot be placed: one line naming ``path`` and the cause.
    """
    target = output_target(path)
    kind = stream_kind(target)
    if kind is not None:  # a device or a pipe: copied into it
        with _through(target, kind) as through:
            os.replace(tmp, through)
        return
    _remove_stale(target)
    with deferred():
        _finish(Path(tmp), target, force)


def _finish(tmp: Path, target: Path, force: bool | FileStamp) -> None:
    """Give the finished ``tmp`` its mode, sync it and move it onto ``target`` as ``force`` says (see
    :func:`atomic_path`); an OSError is an :class:`OutputError`.  The caller holds stops back."""
    try:
        _fsync(tmp)  # the rename must not land before the data on a crash
        # mkstemp creates the file 0600; give it the mode a plain open() would have (after the sync: a
        # umask without write permission would leave the file nothing to open it for writing with).
        os.chmod(tmp, 0o666 & ~_umask())
        if force is True:
            os.replace(tmp, target)
        elif force is False:
            _place_new(tmp, target)
        elif (now := FileStamp.of(target)) == force:
            os.replace(tmp, target)  # still the file this run wrote last
        elif now is None:  # removed meanwhile: nothing to protect (placed as a new file would be)
            _place_new(tmp, target)
        else:
            kept = _keep_aside(tmp, target)
            raise OutputExistsError(
                f"{target}: another file took its place since this run last wrote it, so it was left "
                f"untouched; this result was saved as {kept} instead", target, kept)
    except OSError as exc:
        raise _output_error(target, exc) from exc
    _written.append(target)


def new_temporary(target: Path, parent: Path | None = None) -> Path:
    """An empty temporary file beside ``target`` (in ``parent``, default its folder), named as this module
    names its own, ``.<name>.<pid>.<random>.tmp``: one that ``kill -9`` left is removed by the next write
    of ``target`` (:func:`_remove_stale` knows the name).

    A ``target`` that is a symbolic link gets it beside the file the link points to, where
    :func:`place_temporary` moves it (:func:`output_target`): beside the link, on another file system than
    that file (a download cache whose large files are links to another disk), the move failed
    ("Invalid cross-device link") after the whole download."""
    if parent is None:
        target = output_target(target)
        parent = target.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{_temporary_stem(target.name)}.{os.getpid()}.", suffix=".tmp", dir=parent)
    os.close(fd)
    return Path(tmp)


#: The longest name of one file, in bytes, that the usual file systems take (ext4, XFS, btrfs, tmpfs, APFS).
NAME_MAX = 255

#: What a temporary's name adds to its file's: ``.`` before it, ``.<pid>.`` (room for 10 digits, whatever this
#: pid's length, so that every writer of a file names its temporaries alike), mkstemp's 8 letters and ``.tmp``.
_TEMPORARY_ROOM = NAME_MAX - len(".") - len("..") - 10 - 8 - len(".tmp")


def shortened(name: str, room: int) -> str:
    """``name`` cut to at most ``room`` bytes as the file system stores it, never inside a UTF-8 character.

    Examples
    --------
    >>> shortened("été.json", 4), shortened("plain", 10)
    ('ét', 'plain')
    """
    raw = os.fsencode(name)
    if len(raw) <= room:
        return name
    cut = raw[:room]
    # a character the cut split loses its first bytes too: alone they are no character, and would show as such
    for back in range(1, min(4, len(cut)) + 1):
        byte = cut[-back]
        if byte & 0xC0 != 0x80:  # the first byte of a character (an ASCII one; 0xF8-0xFF: a byte alone)
            length = 1 if byte < 0xC0 or byte >= 0xF8 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            cut = cut[:-back] if length > back else cut
            break
    return os.fsdecode(cut)


def _temporary_stem(name: str) -> str:
    """The part of ``name`` a temporary of it is named by: the whole name, or its first bytes where the
    temporary's name would be over :data:`NAME_MAX` (a 250-byte name could be written by no one: its
    temporary's name was refused with "File name too long", after the whole fit)."""
    return shortened(name, _TEMPORARY_ROOM)


def os_cause(exc: OSError) -> str:
    """What went wrong in an OSError, in one line: its ``strerror``, else its text, else its type's name."""
    return exc.strerror or " ".join(str(exc).split()) or type(exc).__name__


def _remove_stale(target: Path) -> None:
    """Remove the temporaries of ``target`` that writers killed outright (``kill -9``) left: those named
    for a pid no process has now.  A live writer's (another run on the same output) is kept; so is
    every temporary where a pid cannot be checked without harm (Windows, where ``os.kill(pid, 0)``
    would end the process)."""
    if os.name != "posix":
        return
    stale = re.compile(rf"^\.{re.escape(_temporary_stem(target.name))}\.(\d+)\.[A-Za-z0-9_]+\.tmp$")
    try:
        names = os.listdir(target.parent if str(target.parent) else ".")
    except OSError:
        return
    for name in names:
        match = stale.match(name)
        if match and process_gone(int(match.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(target.parent / name)


def process_gone(pid: int) -> bool:
    """Whether the process ``pid`` that named something it left (a temporary, a download's own copy, a
    batch folder's holder file) is gone, so that what it left belongs to no one: never this process,
    and never where a pid cannot be checked without harm (not POSIX: see :func:`process_running`).
    The one test of :func:`_remove_stale`, the downloads' sweep and the batch folder's holder."""
    return os.name == "posix" and pid != os.getpid() and not process_running(pid)


def process_running(pid: int) -> bool:
    """Whether a process ``pid`` exists (POSIX only: signal 0 checks without sending anything; on
    Windows ``os.kill(pid, 0)`` would end the process, so callers check ``os.name`` first).  A pid too
    large for the system (a name edited by hand) counts as running: what is named for it is kept."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # it exists, and belongs to someone else; or no pid can be that large
        return True
    return True


#: Paths that name a descriptor this process has open (``/dev/stdout`` is a link to ``/proc/self/fd/1``).
_DESCRIPTOR = re.compile(r"^/(?:dev/(?:stdout|stderr|fd/\d+)|proc/(?:self|thread-self|\d+)/fd/\d+)$")


def names_descriptor(path: str | os.PathLike) -> bool:
    """Whether ``path`` (or a link on the way to its file) names an open descriptor, e.g. ``/dev/stdout``.

    Such a path is written through, whatever the descriptor is: a pipe, a
    terminal, or the file a shell redirected it to (``> out.h5``), which the
    output neither replaces nor refuses as existing.  Its real path is no use:
    a pipe's is ``pipe:[N]``, which names nothing.
    """
    current = os.path.abspath(os.fspath(path))
    for _ in range(40):  # the kernel's own limit on links followed is 40
        if _DESCRIPTOR.match(current):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.join(os.path.dirname(current), os.readlink(current))
        current = os.path.abspath(current)
    return False


def check_writable(target: Path, label: str = "") -> None:
    """Refuse a file path no output could be written to: a folder, or a file in a folder that is
    missing or not writable (the checks of a command's outputs and of a fit's checkpoint, made
    before any work).  ``label`` starts the message ("checkpoint ").

    Raises
    ------
    ParameterError
        One line naming ``target`` and what to do.
    """
    check_name_length(target, label)
    if target.is_dir():
        raise ParameterError(f"{label}{target}: is a folder; give a file name for the output")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise ParameterError(f"{label}{target}: folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        if _read_only(parent):  # "not writable" alone sent users to chmod, which a read-only mount refuses too
            raise ParameterError(f"{label}{target}: folder {parent} is not writable: "
                                 f"{write_advice(errno.EROFS, parent)}")
        raise ParameterError(f"{label}{target}: folder {parent} is not writable")


def _read_only(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (False where that cannot be told)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):  # (Windows has no statvfs)
        return False


def check_name_length(target: Path, label: str = "", hint: str = "give a shorter name") -> None:
    """Refuse, before any work, an output whose file name (the last part of ``target``) is longer than its
    folder's file system takes (:func:`name_over_limit`), or whose whole path is longer than Windows takes
    (:func:`path_over_limit`): it could only fail when written, after the work ("File name too long",
    "No such file or directory").  ``label`` starts the message, ``hint`` ends it.

    Raises
    ------
    ParameterError
        Naming ``target``, the name's length in bytes and the limit.
    """
    over = name_over_limit(target)
    if over is not None:
        raise ParameterError(f"{label}{target}: its file name is {over[0]:,} bytes, over the {over[1]:,} its file "
                             f"system takes; {hint}")
    check_path_length(target, label, hint)


def check_path_length(target: Path, label: str = "", hint: str = "give a shorter name") -> None:
    """Refuse, before any work, an output whose whole path is longer than Windows takes
    (:func:`path_over_limit`): the second half of :func:`check_name_length`, for a caller that has checked
    the file name with its own wording (a batch's entries, named in a manifest's error).

    Raises
    ------
    ParameterError
        Naming ``target``, its path's length in characters and the limit.
    """
    over = path_over_limit(target)
    if over is not None:
        raise ParameterError(
            f"{label}{target}: its full path is {over[0]:,} characters, over the {over[1]:,} Windows takes for an "
            f"output (MAX_PATH, 260, less the room of the temporary it is written to first) while long paths are "
            f"not enabled; {hint}, or use a shorter folder, or enable long paths (set LongPathsEnabled to 1 in "
            r"HKLM\SYSTEM\CurrentControlSet\Control\FileSystem, then run again), or give the "
            r"full path with the \\?\ prefix")


def name_over_limit(target: Path) -> tuple[int, int] | None:
    """``(length, limit)`` in bytes where the file name (the last part of ``target``) is longer than its
    folder's file system takes (:data:`NAME_MAX` where the folder does not say), else None.  The one rule
    for every output's name: a temporary or a result kept aside never needs a shorter one, as both are
    named by the name's first bytes where the whole would be too long (:func:`shortened`).

    Examples
    --------
    >>> name_over_limit(Path("x" * NAME_MAX)), name_over_limit(Path("x" * (NAME_MAX + 1)))
    (None, (256, 255))
    """
    size = len(os.fsencode(target.name))
    if size <= NAME_MAX:
        return None
    limit = NAME_MAX
    with contextlib.suppress(OSError, ValueError):  # (a folder that does not exist yet: the usual limit)
        limit = os.pathconf(target.parent if str(target.parent) else ".", "PC_NAME_MAX")
    return (size, limit) if size > limit else None


#: The longest path Windows' file functions take where long paths are not enabled: MAX_PATH (260) less
#: the terminating NUL.
WINDOWS_MAX_PATH = 259
#: What the temporary an output is written to first (:func:`new_temporary`) adds to the output's path:
#: ``.`` before its name, ``.<pid>.`` (room for 10 digits), mkstemp's 8 letters and ``.tmp``.  A result
#: kept aside (``<stem>.<pid>.<n>.new<suffix>``) adds less.
_TEMPORARY_EXTRA = len(".") + len("..") + 10 + 8 + len(".tmp")


def path_over_limit(target: Path) -> tuple[int, int] | None:
    r"""``(length, limit)`` in UTF-16 characters where ``target``'s full path is longer than Windows takes
    for an output, else None (on every other system, and where the limit is off).

    Windows refuses a path over :data:`WINDOWS_MAX_PATH` characters unless long paths are enabled
    (``LongPathsEnabled`` in the registry; Python's own programs declare they can use them) or the path
    starts with ``\\?\``; the output's temporary is longer than the output, so the limit for the
    output is that less :data:`_TEMPORARY_EXTRA`.  Where the registry cannot be read, the limit holds.
    """
    if sys.platform != "win32":
        return None
    if os.fspath(target).startswith(("\\\\?\\", "//?/")) or _long_paths_enabled():
        return None
    full = os.path.abspath(os.fspath(target))
    size = len(full.encode("utf-16-le", "surrogatepass")) // 2  # (Windows counts UTF-16 units)
    limit = WINDOWS_MAX_PATH - _TEMPORARY_EXTRA
    return (size, limit) if size > limit else None


@functools.cache
def _long_paths_enabled() -> bool | None:
    """Windows' ``LongPathsEnabled`` setting; None where it cannot be read (not Windows, no such value).

    Read once per process (a machine-wide setting): :func:`path_over_limit` runs for every output
    checked, each line of a batch among them, and opened the registry each time.
    """
    try:
        import winreg  # here: Windows only

        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SYSTEM\CurrentControlSet\Control\FileSystem") as key:
            value, _ = winreg.QueryValueEx(key, "LongPathsEnabled")
    except (ImportError, OSError):
        return None
    return bool(value) if isinstance(value, int) else None


def resolved_path(path: str | os.PathLike) -> Path:
    """``path`` with its links followed; a loop of links is a one-line error (Python 3.11's
    ``Path.resolve`` raises RuntimeError "Symlink loop": a traceback and exit 1, as an output or a
    results folder; Python 3.13's returns the loop unresolved, and the run went on to fail where it wrote).

    Raises
    ------
    ParameterError
        Naming ``path``, for a loop of symbolic links.
    """
    try:
        resolved = Path(path).resolve()
    except (RuntimeError, OSError):  # Python 3.11-3.12: RuntimeError "Symlink loop from ..."
        raise _link_loop(path) from None
    try:
        os.stat(resolved)
    except OSError as exc:  # (a path not there yet is an output's usual case: no error)
        if exc.errno == errno.ELOOP:  # Python 3.13+: the loop left in the path, as os.path.realpath leaves it
            raise _link_loop(path) from None
    return resolved


def _link_loop(path: str | os.PathLike) -> ParameterError:
    return ParameterError(f"{path}: a symbolic link that leads back to itself (a loop); remove it or give another path")


def output_target(path: str | os.PathLike) -> Path:
    """The file an output named ``path`` is written to: ``path``, or what it points to when it is a
    symbolic link (replacing the link by a file would leave its target stale); a path naming an open
    descriptor (``/dev/stdout``) is kept as it is (see :func:`names_descriptor`)."""
    if names_descriptor(path):
        return Path(path)
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


#: What :func:`stream_kind` calls each kind of non-regular file, and whether an output may go there.
_STREAMS = {stat.S_ISCHR: ("character device", True), stat.S_ISFIFO: ("named pipe", True),
            stat.S_ISBLK: ("block device", False), stat.S_ISSOCK: ("socket", False)}


def special_kind(mode: int) -> str | None:
    """What kind of non-regular file an ``st_mode`` says (``"character device"``, ``"named pipe"``,
    ``"block device"``, ``"socket"``); None for a regular file or a folder."""
    return next((kind for test, (kind, _) in _STREAMS.items() if test(mode)), None)


def special_file(path: str | os.PathLike) -> str | None:
    """What kind of non-regular file ``path`` is (following links): ``"named pipe"``,
    ``"character device"``, ``"block device"`` or ``"socket"``; None for a regular file, a folder
    or a missing path.  Such a file is never opened as input: opening a named pipe blocks until
    a writer comes (``info fifo.mtx`` hung), and ``/dev/zero`` has no end.

    Examples
    --------
    >>> special_file(os.devnull), special_file(__file__)
    ('character device', None)
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return special_kind(mode)


def check_named_file(path: str | os.PathLike, instead: str) -> None:
    """Refuse an output whose name sfapprox chose (a fit's file in ``--save-factors``' folder, a batch's
    factors and reports) where a named pipe, a device or a socket has that name.

    An output the user names is written through a pipe or a device (:func:`stream_kind`): they set it up,
    and someone reads it.  A file sfapprox names inside a folder is never meant as one: written through,
    a named pipe there waited for a reader that nobody would start (``compare --save-factors DIR
    --force`` hung once its fits were done).  ``instead`` says what to do ("choose another folder").

    Raises
    ------
    OutputError
        One line naming the file, what it is and ``instead``.
    """
    kind = special_file(path)  # (None where missing or unreadable: the write says why)
    if kind is not None:
        raise OutputError(f"{path}: is a {kind}, not a file; sfapprox writes a file of this name here: "
                          f"remove it, or {instead}", Path(path))


def stream_kind(path: str | os.PathLike) -> str | None:
    """``"character device"`` or ``"named pipe"`` for an existing output that is written through, not
    replaced; None for a regular file, a folder or a missing path.

    Raises
    ------
    OutputError
        For a block device or a socket (no output goes there).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if names_descriptor(path) and stat.S_ISREG(mode):
        return "redirected output"  # /dev/stdout after `> file`: appended to, as the shell set it up
    for test, (kind, allowed) in _STREAMS.items():
        if test(mode):
            if not allowed:
                raise OutputError(f"{path}: is a {kind}; outputs go to files, character devices "
                                  "(such as /dev/null) or named pipes; name a file", Path(path))
            return kind
    return None


@contextlib.contextmanager
def _through(target: Path, kind: str) -> Iterator[Path]:
    """Yield a temporary file; on success copy it into the device or pipe ``target`` (never replaced)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sfapprox.", suffix=".tmp")
    except OSError as exc:
        raise _output_error(target, exc) from exc
    os.close(fd)
    try:
        with deferred():
            yield Path(tmp)
            try:
                _copy_into(Path(tmp), target)
            except OSError as exc:
                raise OutputError(f"{target}: not written to this {kind}: {exc.strerror or exc}", target,
                                  exc.errno) from exc
            except _Abandoned as stop:
                if stop.sent:  # its reader has part of it: said as such, never "not written"
                    _cut_short.append((target, stop.sent, stop.total))
                    raise OutputError(f"{target}: cut short by a stop after {stop.sent:,} of {stop.total:,} bytes: "
                                      f"its reader got an incomplete output", target) from None
                raise OutputError(f"{target}: not written to this {kind}: stopped while waiting for its reader",
                                  target) from None
            _written.append(target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


#: How often a write into a pipe that cannot take it yet looks for a stop signal held back (seconds).
_WAIT_STEP = 0.05


class _Abandoned(Exception):
    """A stop signal came while an output waited for its pipe's reader; ``sent`` of its ``total`` bytes
    had gone through."""

    def __init__(self, sent: int = 0, total: int = 0):
        super().__init__(sent, total)
        self.sent, self.total = sent, total


def _copy_into(tmp: Path, target: Path) -> None:
    """Append ``tmp`` to the pipe or device ``target``, waiting for it only while no stop is held back.

    Append: a FIFO or a device takes it the same, and /dev/stdout redirected with ``>>`` keeps what
    the shell's file held (with ``>``, the shell emptied it already).  A named pipe with no reader
    blocks a plain open until one comes, and a pipe whose reader does not read blocks a write: the
    signals :func:`~sfapprox._signals.deferred` holds back were then held for good.  Here the open
    and the writes do not block; between tries a stop held back ends the wait (:class:`_Abandoned`).
    """
    while True:
        try:
            fd = os.open(target, _stream_flags())
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: a named pipe that has no reader yet
                raise
        _stop_waiting()
        time.sleep(_WAIT_STEP)
    sent, total = 0, os.path.getsize(tmp)
    try:
        with open(tmp, "rb") as src:
            while chunk := src.read(1 << 16):
                view = memoryview(chunk)
                while view:
                    try:
                        done = os.write(fd, view)
                    except BlockingIOError:  # the pipe is full: its reader has not read yet
                        if held_back():
                            raise _Abandoned(sent, total) from None
                        select.select([], [fd], [], _WAIT_STEP)
                    else:
                        view, sent = view[done:], sent + done
    finally:
        os.close(fd)


def _stream_flags() -> int:
    """How :func:`_copy_into` opens a pipe or device.  Windows has no O_NONBLOCK (its writes then block;
    writing to ``NUL`` was an AttributeError) and needs O_BINARY (else each newline written became CR LF:
    a factors file sent through a pipe was corrupted)."""
    return os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _stop_waiting() -> None:
    if held_back():
        raise _Abandoned


def _output_error(target: Path, exc: OSError) -> OutputError:
    cause = os_cause(exc)
    advice = write_advice(exc.errno, target.parent)
    if advice is not None:
        cause += f" ({advice})"
    return OutputError(f"{target}: not written: {cause}; no partial file was left", target, exc.errno)


def _place_new(tmp: Path, target: Path) -> None:
    """Move ``tmp`` onto ``target`` only if ``target`` does not exist, atomically; never replace."""
    try:
        os.link(tmp, target)  # fails with EEXIST if the name was taken meanwhile, whoever took it
        return
    except FileExistsError:
        pass
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # No hard links here: reserve the name with an exclusive create, then
        # rename over our own empty reservation.
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            pass
        else:
            os.replace(tmp, target)
            return
    kept = _keep_aside(tmp, target)
    if target.is_dir():  # --force replaces a file, never a folder
        raise OutputExistsError(f"{target}: is a folder, so it was left untouched; this result was saved as {kept} "
                                "instead", target, kept)
    raise OutputExistsError(
        f"{target}: already exists, so it was left untouched; this result was saved as {kept} instead "
        f"(use {parameter('force', True)} to overwrite)", target, kept)  # save_factors(force=True) / --force


def _keep_aside(tmp: Path, target: Path) -> Path:
    """Give the finished temporary a visible, unused name beside ``target``."""
    for attempt in range(100):
        extra = f".{attempt}" if attempt else ""
        suffix = target.suffix if len(os.fsencode(target.suffix)) <= 32 else ""  # (a "suffix" of 250 bytes)
        tail = f".{os.getpid()}{extra}.new{suffix}"
        # the stem cut where the whole is over NAME_MAX: that name was refused, and the result lost with it
        kept = target.with_name(shortened(target.stem, NAME_MAX - len(os.fsencode(tail))) + tail)
        try:
            os.link(tmp, kept)
            return kept
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            if not os.path.lexists(kept):
                os.replace(tmp, kept)
                return kept
    raise FileExistsError(errno.EEXIST, "no free name to keep the result", str(target))


def _umask() -> int:
    # Linux reports the umask without changing it (os.umask would, for a moment, in every thread).
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: str | os.PathLike) -> None:
    # Open for writing: Windows' fsync (FlushFileBuffers) refuses a read-only descriptor (EBADF), which
    # made every output an error there.  The temporary is this process's own, still 0600.
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: str | os.PathLike, data: bytes | memoryview, *, force: bool | FileStamp = True) -> None:
    """Write ``data``, atomically (a full disk is a clean :class:`OutputError`, never a partial file)."""
    with atomic_path(path, force=force) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def write_text(path: str | os.PathLike, text: str, *, force: bool | FileStamp = True) -> None:
    """Write ``text`` (UTF-8), atomically."""
    write_bytes(path, text.encode("utf-8"), force=force)


def write_json(path: str | os.PathLike, data: Any, *, force: bool | FileStamp = True) -> None:
    """Write ``data`` as indented JSON (NaN as null), atomically."""
    write_text(path, json.dumps(jsonable(data), indent=2) + "\n", force=force)
