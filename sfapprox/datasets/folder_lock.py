"""One batch per output folder: an exclusive lock that says who holds it.

Two batches writing to one folder (a command started twice, two cluster jobs)
would both run every pair and append duplicate lines.  :func:`folder_lock`
takes an exclusive lock on ``OUT/.sfapprox-batch.lock`` (``flock`` through
the ``filelock`` package: the kernel releases it when the holder dies, even
by ``kill -9``, so a lock is never stale) and writes who holds it
(pid, host, start time, command) to ``OUT/.sfapprox-batch.holder.json``.  A
second batch refuses at once, naming the holder, or waits for it.  The lock itself is
:func:`sfapprox._output_lock.held_lock`, which a fit's lock on its output file shares.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._atomic import resolved_path
from .._errors import SfapproxError, parameter, user_stacklevel
from .._output_lock import describe_holder, held_if_possible, read_holder_file, running_holder_of

__all__ = ["LOCK_FILE", "HOLDER_FILE", "FolderBusyError", "folder_lock", "read_holder", "running_holder",
           "describe_holder"]

LOCK_FILE = ".sfapprox-batch.lock"
HOLDER_FILE = ".sfapprox-batch.holder.json"


class FolderBusyError(SfapproxError):
    """Another process holds a batch folder's lock.

    Parameters
    ----------
    message : str
        One line: the folder and who holds it.
    folder : Path
        The folder.
    holder : dict
        What the holder wrote about itself.

    Attributes
    ----------
    folder : Path
        The batch output folder.
    holder : dict
        What the holder wrote about itself (``pid``, ``host``, ``started``,
        ``command``); empty when it could not be read.
    """

    def __init__(self, message: str, folder: Path, holder: dict[str, Any]):
        super().__init__(message)
        self.folder = folder
        self.holder = holder


def read_holder(folder: str | os.PathLike) -> dict[str, Any]:
    """What the lock's holder wrote about itself (empty when absent or unreadable).

    Parameters
    ----------
    folder : str or os.PathLike
        The batch output folder.

    Returns
    -------
    dict
        ``pid``, ``host``, ``started``, ``command`` as written.
    """
    return read_holder_file(Path(folder) / HOLDER_FILE)


def running_holder(folder: str | os.PathLike) -> dict[str, Any]:
    """What the batch using ``folder`` now wrote about itself; empty when none is.

    For a reader of the folder (``report``), which must not take the lock even for a moment (a batch
    starting then would be refused).  The holder file alone is no proof: a batch killed outright
    leaves it behind, so one whose process no longer runs on this host is none.  One on another host
    cannot be checked from here and counts as running.

    Parameters
    ----------
    folder : str or os.PathLike
        The batch output folder.

    Returns
    -------
    dict
        As :func:`read_holder`.
    """
    return running_holder_of(Path(folder) / HOLDER_FILE)


@contextlib.contextmanager
def folder_lock(
    folder: str | os.PathLike,
    *,
    wait: bool | float = False,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the exclusive lock of a batch output folder (which must exist) for the block.

    Parameters
    ----------
    folder : path
        The batch output folder.
    wait : bool or float, default=False
        False: refuse at once when another process holds the lock; True: wait
        as long as it takes; a number: wait at most that many seconds.
    on_wait : callable, optional
        Called once with a description of the holder when this call has to
        wait (for a "waiting for ..." message).

    Where the lock cannot be made (a file system without locks, a lock file
    not ours) the batch runs unlocked, as it did before there were locks,
    with a RuntimeWarning that says so: refusing every batch on such a
    cluster file system would be worse.

    Raises
    ------
    FolderBusyError
        When the lock is held elsewhere and ``wait`` does not allow waiting
        (long enough).  One line naming the folder and the holder.
    """
    folder = Path(folder)
    # one key however the folder is spelled; a loop of links: one line, not 3.11's RuntimeError
    resolved = resolved_path(folder)
    with held_if_possible(resolved / LOCK_FILE, folder / HOLDER_FILE,
                          lambda holder, waited: _busy(folder, holder, waited), wait=wait, on_wait=on_wait) as why:
        if why is not None:  # said: a batch appends to results.jsonl, which no rename keeps apart
            warnings.warn(f"{folder}: no lock could be taken here ({why.strerror or why}); a second batch "
                          "in this folder would not be refused", RuntimeWarning, stacklevel=user_stacklevel())
        yield


def _busy(folder: Path, holder: dict[str, Any], waited: float | None) -> FolderBusyError:
    if waited is None:
        hint = f"wait for it to end, or pass {parameter('wait', True)} to start when it does"  # (run_batch's, the CLI's)
    else:
        hint = f"still busy after waiting {waited:.0f} s"
    return FolderBusyError(f"{folder}: another batch is using this folder ({describe_holder(holder)}); {hint}",
                           folder, holder)
