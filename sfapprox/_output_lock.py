"""One writer per output: an exclusive lock that says who holds it.

Two runs writing one output (a command started twice, a cluster job
re-submitted while the first still runs) each ran for minutes and found out
only when they wrote: the second's file kept aside, or with ``--force`` each
replacing the other's checkpoints.  A lock taken before any work refuses the
second at once, naming the first.

The lock is ``flock`` through the ``filelock`` package: the kernel releases it
when its holder dies, even by ``kill -9``, so a lock is never stale.  Who holds
it (pid, host, start time, command) is written to a JSON file beside it, for
the refusal's message; a holder file a killed process left names no one
(:func:`running_holder_of`).  Both files are removed at a clean end.

:func:`output_lock` locks one output file (``fit --out F``: ``.F.sfapprox-lock``
beside ``F``); :func:`held_lock` is the core that
:func:`sfapprox.datasets.folder_lock.folder_lock` (one batch per output folder)
shares.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ._atomic import NAME_MAX, names_descriptor, output_target, process_gone, resolved_path, shortened, stream_kind
from ._errors import SfapproxError, parameter

__all__ = ["OutputBusyError", "output_lock", "output_lock_files", "held_lock", "held_if_possible", "read_holder_file",
           "running_holder_of", "describe_holder"]

#: What an output's lock file and its holder file add to the output's name (``.F`` + these).
LOCK_SUFFIX = ".sfapprox-lock"
HOLDER_SUFFIX = ".sfapprox-lock.json"

#: Locks this process holds, by lock file: taking one again (fit_matrix inside the CLI's hold) nests.
_held: dict[str, Any] = {}

#: What the holder file's temporary adds to its name: a dot, and ".<pid>.tmp" (pids have at most 7 digits).
_TMP_ROOM = 1 + 1 + 7 + 4

#: How many times a lock whose file another holder removed meanwhile is taken again (see _acquire).
_RETRIES = 20


class OutputBusyError(SfapproxError):
    """Another process is writing an output (it holds the output's lock).

    Parameters
    ----------
    message : str
        One line: the output and who holds it.
    path : Path
        The output.
    holder : dict
        What the holder wrote about itself.

    Attributes
    ----------
    path : Path
        The output, as given.
    holder : dict
        What the holder wrote about itself (``pid``, ``host``, ``started``,
        ``command``); empty when it could not be read.
    """

    def __init__(self, message: str, path: Path, holder: dict[str, Any]):
        super().__init__(message)
        self.path = path
        self.holder = holder


def read_holder_file(holder_file: str | os.PathLike) -> dict[str, Any]:
    """What a lock's holder wrote about itself in ``holder_file`` (empty when absent or unreadable).

    Parameters
    ----------
    holder_file : str or os.PathLike

    Returns
    -------
    dict
        ``pid``, ``host``, ``started``, ``command`` as written.
    """
    try:
        data = json.loads(Path(holder_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def running_holder_of(holder_file: str | os.PathLike) -> dict[str, Any]:
    """What the process holding a lock now wrote about itself in ``holder_file``; empty when none does.

    The holder file alone is no proof: a holder killed outright leaves it behind, so one whose process no
    longer runs on this host is none (nor is this process itself).  One on another host cannot be checked
    from here and counts as running.

    Parameters
    ----------
    holder_file : str or os.PathLike

    Returns
    -------
    dict
        As :func:`read_holder_file`.
    """
    holder = read_holder_file(holder_file)
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname() and os.name == "posix":
        if not isinstance(pid, int) or pid == os.getpid() or process_gone(pid):
            return {}
    return holder


def describe_holder(holder: dict[str, Any]) -> str:
    """``"pid 4242 on node07, started 2026-01-02 10:00:00 UTC: sfapprox batch m.toml --out-dir runs/t1"``.

    Parameters
    ----------
    holder : dict
        What :func:`read_holder_file` returned; empty gives ``"holder unknown"``.

    Examples
    --------
    >>> describe_holder({"pid": 4242, "host": "node07", "command": "sfapprox fit x.mtx --out f.h5"})
    'pid 4242 on node07: sfapprox fit x.mtx --out f.h5'
    >>> describe_holder({})
    'holder unknown'
    """
    if not holder:
        return "holder unknown"
    text = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
    if holder.get("started"):
        text += f", started {holder['started']}"
    if holder.get("command"):
        text += f": {holder['command']}"
    return text


def _me() -> dict[str, Any]:
    command = " ".join(["sfapprox" if i == 0 and a.endswith(("sfapprox", "__main__.py")) else a
                        for i, a in enumerate(sys.argv)])
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": command[:300],
    }


@contextlib.contextmanager
def held_lock(
    lock_file: Path,
    holder_file: Path,
    busy: Callable[[dict[str, Any], float | None], Exception],
    *,
    wait: bool | float = False,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the exclusive lock ``lock_file`` for the block, saying who holds it in ``holder_file``.

    Parameters
    ----------
    lock_file, holder_file : Path
        The lock and the holder's JSON (their folder must exist).  Both are
        removed when the block ends (a kill leaves them: the next holder takes
        the lock all the same, and its holder file replaces the stale one).
    busy : callable
        ``busy(holder, waited)``: the error to raise when another process holds
        the lock; ``waited`` is None for a refusal at once, else the seconds waited.
    wait : bool or float, default=False
        False: refuse at once; True: wait as long as it takes; a number: wait
        at most that many seconds.
    on_wait : callable, optional
        Called once with a description of the holder when this call has to wait.

    Raises
    ------
    Exception
        ``busy``'s, when the lock is held elsewhere and ``wait`` does not allow
        waiting (long enough).
    OSError
        When the lock file cannot be created or opened (a read-only folder, a
        folder that does not exist: never created here), or the file system
        has no locks (``ENOSYS``).
    """
    key = os.fspath(lock_file)
    if key in _held:  # this process holds it already: nest
        yield
        return
    if not lock_file.parent.is_dir():  # filelock would create it: a lock makes no folder
        raise FileNotFoundError(errno.ENOENT, "no such folder", os.fspath(lock_file.parent))
    try:
        lock = _acquire(lock_file, holder_file, busy, wait, on_wait)
    except NotImplementedError as exc:  # filelock 3.12-3.24 on a file system without flock (NFS, Lustre)
        # its os.open made the file: no one can hold it here, so an empty one is no one's (left, one per run)
        with contextlib.suppress(OSError):
            if lock_file.stat().st_size == 0:
                lock_file.unlink()
        raise OSError(errno.ENOSYS, f"no file locks here ({exc})", os.fspath(lock_file)) from None
    _held[key] = lock
    try:
        _write_holder(holder_file)
        yield
    finally:
        del _held[key]
        with contextlib.suppress(OSError):
            holder_file.unlink()
        if _fd(lock) is not None:  # removed while held: a taker of the old file sees it gone (_acquire)
            with contextlib.suppress(OSError):
                lock_file.unlink()
        lock.release()


def _acquire(lock_file: Path, holder_file: Path, busy, wait: bool | float, on_wait):
    from filelock import FileLock, Timeout

    start: float | None = None
    for _ in range(_RETRIES):
        lock = FileLock(os.fspath(lock_file))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if not os.path.lexists(lock_file):  # its holder ended and removed it as we tried: try the new one
                continue
            # who holds it, never a holder killed outright before it (its file stays until the next writes its own)
            holder = running_holder_of(holder_file)
            if wait is False or (wait is not True and float(wait) <= 0):
                raise busy(holder, None) from None
            if start is None:
                start = time.monotonic()
                if on_wait is not None:
                    on_wait(describe_holder(holder))
            left = -1 if wait is True else max(0.0, float(wait) - (time.monotonic() - start))
            try:
                lock.acquire(timeout=left, poll_interval=0.2)
            except Timeout:
                raise busy(running_holder_of(holder_file), time.monotonic() - start) from None
        if _still_named(lock, lock_file):
            return lock
        lock.release()  # its holder removed the file between our open and our lock: take the new one
    raise busy({}, None if start is None else time.monotonic() - start)


def _fd(lock) -> int | None:
    """The descriptor of a held ``FileLock`` where filelock says it (a private attribute of its context);
    None elsewhere, and then the lock file is never removed: without the descriptor, a taker could not
    tell its file from the one that replaced it."""
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    return fd if isinstance(fd, int) else None


def _still_named(lock, lock_file: Path) -> bool:
    """Whether the file ``lock`` holds is still the one named ``lock_file``: a holder that ends removes its
    file while it holds it, so one opened just before is no longer the lock (two would hold "the" lock)."""
    fd = _fd(lock)
    if fd is None:
        return True
    try:
        return os.path.samestat(os.fstat(fd), os.stat(lock_file))
    except OSError:
        return False


def _write_holder(holder_file: Path) -> None:
    # Who holds the lock is information, not a condition: a failure to say it is no error.
    tmp = holder_file.with_name(f".{holder_file.name}.{os.getpid()}.tmp")  # (the name batch's sweep knows)
    try:
        tmp.write_text(json.dumps(_me()) + "\n", encoding="utf-8")
        os.replace(tmp, holder_file)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def output_lock_files(path: str | os.PathLike) -> tuple[Path, Path] | None:
    """The lock file and the holder file of the output ``path``; None for one written through (a pipe,
    a device, standard output), which no second writer can clobber.

    Named from the file the output is written to, as its writer resolves it (a link's target; folders'
    links and relative paths followed): two spellings of one file are one lock.  Hidden, beside it.

    Examples
    --------
    >>> output_lock_files("/tmp/f.h5")
    (PosixPath('/tmp/.f.h5.sfapprox-lock'), PosixPath('/tmp/.f.h5.sfapprox-lock.json'))
    >>> output_lock_files("/dev/stdout") is None
    True
    """
    if names_descriptor(path):
        return None
    target = resolved_path(output_target(path))  # (a loop of links: a one-line ParameterError)
    if stream_kind(target) is not None:
        return None
    # cut where the name is long: the same cut in every process, so it is still one lock (room left for
    # the holder file's temporary, ".<holder>.<pid>.tmp")
    stem = "." + shortened(target.name, NAME_MAX - 1 - len(os.fsencode(HOLDER_SUFFIX)) - _TMP_ROOM)
    return target.with_name(stem + LOCK_SUFFIX), target.with_name(stem + HOLDER_SUFFIX)


@contextlib.contextmanager
def output_lock(path: str | os.PathLike | None, *, option: str = "out") -> Iterator[None]:
    """Hold the exclusive lock of the output file ``path`` for the block: a second run writing it refuses.

    Taken before any work, held until the output's final write; nests within
    this process (a fit resuming from its own checkpoint reads it under the
    lock).  Nothing is locked for ``path`` None or an output written through
    (standard output, a pipe, a device).  Where the lock file cannot be
    created (a read-only folder, another user's lock file) the block runs
    unlocked: the output's own write says whether it can be written, and one
    whose name is taken meanwhile is still kept aside, never lost.

    Parameters
    ----------
    path : path or None
        The output file.
    option : str, default="out"
        The keyword (``--out`` on the command line) the refusal asks to change.

    Raises
    ------
    OutputBusyError
        When another process holds the lock: one line naming the output and the
        holder.
    """
    files = None if path is None else output_lock_files(path)
    if files is None:
        yield
        return
    lock_file, holder_file = files

    def busy(holder: dict[str, Any], waited: float | None) -> OutputBusyError:
        return OutputBusyError(f"{os.fspath(path)}: is being written by another run ({describe_holder(holder)}); "
                               f"wait for it to end or choose another {parameter(option)}", Path(path), holder)

    with held_if_possible(lock_file, holder_file, busy):
        yield


@contextlib.contextmanager
def held_if_possible(lock_file: Path, holder_file: Path, busy: Callable[[dict[str, Any], float | None], Exception],
                     **kwargs: Any) -> Iterator[OSError | None]:
    """:func:`held_lock`, or the block run unlocked where the lock cannot be made (its ``OSError``: a
    read-only folder, another user's lock file, a file system without locks); yields None where it is
    held, else that error (for the caller to say).

    An output's own write still says whether it can be written, and one whose name was taken meanwhile
    is kept aside, never lost: a run goes on there as it did before there were locks.
    """
    hold = held_lock(lock_file, holder_file, busy, **kwargs)
    try:
        hold.__enter__()
    except OSError as exc:
        yield exc
        return
    with contextlib.ExitStack() as stack:
        stack.push(hold)
        yield None
