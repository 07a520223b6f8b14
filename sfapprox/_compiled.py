"""Optional compiled (numba, triton) modules: imported on first use, given up for the process when they fail.

The compiled kernels (:mod:`sfapprox.operators._chord_apply_numba`, :mod:`sfapprox.sf._kernels_numba`,
the GPU's :mod:`sfapprox.sf._kernels_triton`) are an
optimisation, never a requirement: numba or triton may be missing, built against
another numpy or CUDA, or unable to compile (a broken llvmlite, an unwritable cache
folder).  Each user holds one :class:`CompiledModule`; a failure on import or
on the first call (when numba compiles) warns once and switches that user to
its pure numpy/torch/scipy path for the rest of the process.

numba refuses ``cache=True`` at import where it finds no writable folder for
its cache (a read-only install, a read-only ``$HOME``, ``NUMBA_CACHE_DIR``
unset: containers, clusters); the kernels then cache in a private folder
under the system's temporary folder instead (:func:`import_compiled`), for
sfapprox's own kernels only: the environment and numba's configuration are
left as they were, so the user's own numba functions and the processes they
start cache where they would have.

Where numba finds its folder but then cannot write the cache into it (a full
disk, a file over ``ulimit -f``, a read-only or failing file system), the
kernels are compiled all the same, only not kept (:func:`_save_soft`): one
note says that the next run compiles them again, and why.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType

from . import _timing
from ._errors import user_stacklevel

#: Seconds of compiling (or loading numba and the cache of) a method's kernels, outside its time limit and
#: inside its seconds, from which its fit records them as ``params_["compile_seconds"]`` (SF's, the NMF's):
#: a fresh install's first row then says why its seconds are more than its fit's.
COMPILE_NOTE_SECONDS = 1.0

#: The folder numba caches in because it found no writable one of its own (see :func:`import_compiled`);
#: None while numba's own choice works.
CACHE_FOLDER: str | None = None

#: The error with which numba first failed to write the cache of sfapprox's kernels in this process (see
#: :func:`_save_soft`); None while its writes succeed.  Once set, no kernel's cache is written again.
CACHE_WRITE_ERROR: OSError | None = None

#: Where set (a ``batch -j`` pool worker's), called with the first failed write of the cache, which it
#: passes on (True) to be said elsewhere, not here: the batch's parent says it, once for all its workers,
#: where each said it on its own.
CACHE_WRITE_REPORT: Callable[[OSError], bool] | None = None

#: The note said where numba found no writable folder for its cache (:func:`_cache_in_private_folder`);
#: None where this process had no such note.  A Dask worker tells each later batch of it too.
CACHE_FOLDER_NOTE: str | None = None

#: As :data:`CACHE_WRITE_REPORT`, for that note: where set (a ``batch -j`` pool worker's), called with it.
CACHE_FOLDER_REPORT: Callable[[str], bool] | None = None

#: The notes of :func:`_cache_in_private_folder` said in this process, less their folder
#: (:func:`_folder_note_kind`): each once, whichever worker sent it.
_FOLDER_NOTES_SAID: set[str] = set()


class _ThreadReports(threading.local):
    """Per thread, what :data:`CACHE_WRITE_REPORT` and :data:`CACHE_FOLDER_REPORT` are per process: a Dask
    worker's threads run tasks of different batches side by side, each told to its own batch's queue."""

    write: Callable[[OSError], bool] | None = None
    folder: Callable[[str], bool] | None = None


_THREAD_REPORTS = _ThreadReports()


@contextlib.contextmanager
def reports_to(write: Callable[[OSError], bool], folder: Callable[[str], bool]) -> Iterator[None]:
    """While the block runs, this thread's notes about numba's cache are passed to ``write`` (a failed write,
    see :func:`cache_not_written`) and ``folder`` (no writable folder, see :func:`_cache_in_private_folder`),
    which say whether they passed them on (True: not said here).  For a Dask task, whose batch's process
    says them, once for all its workers (each worker process said them on its own, into its own log)."""
    before = _THREAD_REPORTS.write, _THREAD_REPORTS.folder
    _THREAD_REPORTS.write, _THREAD_REPORTS.folder = write, folder
    try:
        yield
    finally:
        _THREAD_REPORTS.write, _THREAD_REPORTS.folder = before


def _passed_on(note, thread_report: Callable | None, process_report: Callable | None) -> bool:
    """Whether ``note`` went to this thread's report (:func:`reports_to`), else to the process's."""
    report = thread_report or process_report
    return report is not None and bool(report(note))


def raise_interrupt(exc: BaseException) -> None:
    """Raise the ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM's handler) that ``exc`` stems from, if any.

    A signal that arrives while compiled code runs is delivered as the call
    returns, and numba's dispatcher then reports ``SystemError: ... returned
    a result with an exception set`` with the interrupt as its cause: taken
    for a broken compile, the stop was lost (the fit ran on to its time limit)
    and the process fell back to the slower code for good.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            raise cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__


def cached_signatures(function) -> list | None:
    """The signatures numba's on-disk cache index lists for a compiled ``function`` (its entries' keys,
    argument types first), or None where its cache cannot be told: the one place that reads numba's
    cache internals."""
    try:
        return [key[0] for key in function._cache._cache_file._load_index()]
    except Exception:  # noqa: BLE001 - numba's cache internals changed: say nothing of it
        return None


def _no_cache_folder(exc: BaseException) -> bool:
    """Whether ``exc`` is numba refusing ``cache=True`` because no folder for its cache is writable."""
    return isinstance(exc, RuntimeError) and "no locator available" in str(exc)


def _cache_write_advice(exc: BaseException) -> str | None:
    """What a failed write of numba's cache ``exc`` says of its cause and what to do (a file over
    ``ulimit -f``, a full or read-only disk: :func:`sfapprox._atomic.write_advice`); None for any other
    failure."""
    from ._atomic import write_advice  # here: _atomic loads more than this module needs

    if not isinstance(exc, OSError):
        return None
    folder = os.path.dirname(exc.filename) if isinstance(exc.filename, str) else "numba's cache folder"
    return write_advice(exc.errno, folder or ".")


def _cache_write_remedy(exc: BaseException) -> str | None:
    """What to do where numba failed to write its cache of the kernels (a file over ``ulimit -f``, a full or
    read-only disk): "Reinstall numba" was said of it, and would not help.  None for any other failure."""
    advice = _cache_write_advice(exc)
    if advice is None:
        return None
    return f"numba could not write its cache of them: {advice} (NUMBA_CACHE_DIR sets its folder)."


def cache_not_written(exc: OSError) -> None:
    """Stop writing the kernels' cache for this process after its first failed write ``exc``, saying
    once that the kernels are compiled all the same but will compile again next run, and why (or, in a
    batch's worker, telling its parent, which says it: :data:`CACHE_WRITE_REPORT`)."""
    global CACHE_WRITE_ERROR
    if CACHE_WRITE_ERROR is not None:
        return
    CACHE_WRITE_ERROR = exc
    if _passed_on(exc, _THREAD_REPORTS.write, CACHE_WRITE_REPORT):
        return
    why = _cache_write_advice(exc) or f"{type(exc).__name__}: {exc}"
    warnings.warn(
        f"sfapprox: numba could not write its cache of the compiled kernels ({why}); they run compiled "
        "all the same, but are not kept: the next run compiles them again, as a first run does. "
        "NUMBA_CACHE_DIR sets the cache's folder.",
        RuntimeWarning,
        stacklevel=user_stacklevel(*_numba_folder()),  # numba's compile calls the save, under sfapprox's kernel call
    )


def _numba_folder() -> list[str]:
    """numba's package folder, where numba is imported (a warning skips its frames to name the user's line)."""
    numba = sys.modules.get("numba")
    return [os.path.dirname(numba.__file__)] if getattr(numba, "__file__", None) else []


def _save_soft(module: ModuleType) -> ModuleType:
    """``module``'s numba functions with a cache whose writes fail soft: the failure said once
    (:func:`cache_not_written`) and the compiled code used, not given up for the process.

    numba (as read in 0.68.1) adds a freshly compiled overload to its dispatcher and then saves it
    (``Dispatcher.compile``: ``add_overload``, then ``_cache.save_overload``); a save's ``OSError``
    reached the caller, who took it for a broken compile and ran the numpy/torch fallback, several
    times slower, for the rest of the process.  Only saving is wrapped: loading what an earlier run
    wrote still works.  Helpers a kernel calls are module functions too, so wrapped as well (their
    compile, and save, happens inside the kernel's).
    """
    dispatcher = sys.modules.get("numba.core.dispatcher")
    kind = getattr(dispatcher, "Dispatcher", None)
    if kind is None:  # a module that compiles with numba has imported it; any other has nothing to wrap
        return module
    for function in vars(module).values():
        cache = getattr(function, "_cache", None) if isinstance(function, kind) else None
        save = getattr(cache, "save_overload", None)
        if save is not None and not getattr(save, "fails_soft", False):
            cache.save_overload = _soft(save)
    return module


def _soft(save):
    """``save`` (a numba cache's ``save_overload``) made to say a failed write once and go on."""
    def save_overload(sig, data) -> None:
        if CACHE_WRITE_ERROR is not None:
            return  # one failure is enough: the folder takes no cache in this process
        try:
            save(sig, data)
        except OSError as exc:
            cache_not_written(exc)

    save_overload.fails_soft = True  # type: ignore[attr-defined]
    return save_overload


def _private_folder() -> tuple[str, bool]:
    """A folder for numba's cache that only this user can write, and whether it lasts beyond this process.

    ``<temp>/sfapprox-numba-<uid>``, kept between runs (later runs load what the first compiled).  numba's
    cache files are pickles, which run code as they load: where that name is taken by something that is
    not a folder of this user's alone (made in advance by another user), a fresh folder serves this
    process instead and is removed at exit (every run then compiles again).
    """
    owner = os.getuid() if hasattr(os, "getuid") else None
    path = os.path.join(tempfile.gettempdir(), f"sfapprox-numba-{owner if owner is not None else 'user'}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o022 and owner in (None, info.st_uid):
            return path, True
    except OSError:
        pass
    path = tempfile.mkdtemp(prefix="sfapprox-numba-")
    atexit.register(shutil.rmtree, path, True)
    return path, False


def _cache_in_private_folder() -> None:
    """Choose :func:`_private_folder` as the folder of sfapprox's compiled kernels for this process
    (:data:`CACHE_FOLDER`, which :func:`import_compiled` puts in force while it imports them), saying so
    once: where the folder holds no cache yet (the run that compiles), or lasts only this process (every
    run compiles); in a batch's worker, told to the batch, which says it (:data:`CACHE_FOLDER_REPORT`,
    :func:`reports_to`)."""
    global CACHE_FOLDER, CACHE_FOLDER_NOTE
    given = os.environ.get("NUMBA_CACHE_DIR")
    path, lasting = _private_folder()
    CACHE_FOLDER = path
    if lasting and os.listdir(path):
        return  # said when it was filled; later runs load from it quietly
    why = f"NUMBA_CACHE_DIR ({given}) is not writable" if given else "NUMBA_CACHE_DIR is unset"
    CACHE_FOLDER_NOTE = (
        f"sfapprox: numba found no writable folder for its cache of compiled kernels ({why}; the "
        f"installed package's and the user's cache folders are read-only){_IN}{path} "
        f"({_KEPT[lasting]}){_CHOOSE}")
    if not _passed_on(CACHE_FOLDER_NOTE, _THREAD_REPORTS.folder, CACHE_FOLDER_REPORT):
        no_cache_folder(CACHE_FOLDER_NOTE)


#: The parts of :func:`_cache_in_private_folder`'s note around its folder, which :func:`_folder_note_kind`
#: cuts out; and what becomes of the folder (:data:`_KEPT`, by whether it lasts).
_IN = "; caching them in "
_CHOOSE = ". Set NUMBA_CACHE_DIR to choose the folder."
_KEPT = {True: "kept for later runs",
         False: "removed at exit, each process its own: another user holds the usual folder"}


def _folder_note_kind(note: str) -> str:
    """``note`` (:func:`_cache_in_private_folder`'s) less its folder: the same for every worker of a batch.

    Where another user holds the usual folder, each process makes a folder of its own (``mkdtemp``), so
    each of a batch's workers sends the note with a different folder: told apart by their text, the batch
    said it once per worker.  (The folder is cut at the note's last ``_IN``: NUMBA_CACHE_DIR, named before
    it, is the user's.)"""
    head, found, rest = note.rpartition(_IN)
    if not found:
        return note
    for kept in _KEPT.values():
        if rest.endswith(f" ({kept}){_CHOOSE}"):
            return f"{head}{_IN}({kept}){_CHOOSE}"
    return note


def no_cache_folder(note: str) -> None:
    """Say ``note`` (numba found no writable folder for its cache: :func:`_cache_in_private_folder`), once
    in this process, whatever its folder: a batch's workers, each of which found it on its own (each with a
    folder of its own where another user holds the usual one), send it to the batch's process."""
    kind = _folder_note_kind(note)
    if kind in _FOLDER_NOTES_SAID:
        return
    _FOLDER_NOTES_SAID.add(kind)
    warnings.warn(note, RuntimeWarning, stacklevel=user_stacklevel())


@contextlib.contextmanager
def _numba_cache_folder(path: str) -> Iterator[None]:
    """numba's cache folder set to ``path`` (``numba.config.CACHE_DIR``) while the block runs, then put back.

    A function compiled with ``cache=True`` finds its cache folder once, when its decorator runs (as its
    module is imported): the kernels imported here keep ``path`` for good, while the user's own numba
    functions and the processes the user starts keep theirs.  (Setting ``NUMBA_CACHE_DIR`` in the
    environment, as this did, moved the cache of every numba function of the process and its children.)
    """
    from numba.core import config

    before = config.CACHE_DIR
    config.CACHE_DIR = path
    try:
        yield
    finally:
        config.CACHE_DIR = before


def import_compiled(name: str) -> ModuleType:
    """``importlib.import_module(name)``, again with numba's cache in a private folder where numba found
    no writable folder for it (:func:`_cache_in_private_folder`): the kernels work, only their cache moved.

    Every compiled module of sfapprox is imported through here (the L-BFGS module and the apply kernels
    too): once the private folder is chosen, each is imported with it in force
    (:func:`_numba_cache_folder`), numba's configuration put back after.  Their cache writes fail soft
    (:func:`_save_soft`): a kernel whose cache cannot be written still runs compiled.
    """
    if CACHE_FOLDER is None:
        try:
            return _save_soft(importlib.import_module(name))
        except RuntimeError as exc:
            if not _no_cache_folder(exc):
                raise
        _cache_in_private_folder()
    with _numba_cache_folder(CACHE_FOLDER):
        return _save_soft(importlib.import_module(name))


class CompiledModule:
    """One optional compiled module and the path its user falls back to.

    Parameters
    ----------
    name : str
        The module's import name.
    what : str
        What it computes, for the warning ("apply kernels").
    fallback : str
        What runs instead, for the warning ("scipy sparse factors (correct, 1.2-5x slower)").
    remedy : str, default="Reinstall numba to restore them."
        What the user can do, for the warning.

    Examples
    --------
    >>> missing = CompiledModule("sfapprox.no_such_module", "demo kernels", "numpy")
    >>> missing.get()
    False
    """

    def __init__(self, name: str, what: str, fallback: str, remedy: str = "Reinstall numba to restore them."):
        self.name = name
        self.what = what
        self.fallback = fallback
        self.remedy = remedy
        # None: not tried yet; False: unavailable; else the module (tests set False to force the fallback).
        self.module: ModuleType | bool | None = None

    def get(self) -> ModuleType | bool:
        """The module, or False when it is missing or broken (imported once per process)."""
        if self.module is None:
            try:
                # once a process (numba's start: 0.3-0.5 s), so no method's time limit is charged for it: a
                # comparison's SF row under --time-limit 0.3 spent it in its memory check and made no iteration
                with _timing.one_time():
                    self.module = import_compiled(self.name)
            except ImportError:  # numba (triton) not installed, or installed against another numpy
                self.module = False
            except Exception as exc:  # e.g. an llvmlite that does not load
                self.failed(exc)
        return self.module

    def failed(self, exc: Exception) -> None:
        """Give the module up for this process, with one warning saying what runs instead; an interrupt
        that surfaced as the failure (see :func:`raise_interrupt`) is raised instead, the module kept."""
        raise_interrupt(exc)
        self.module = False
        # numba works where it only found no folder to cache in (and no temporary folder either)
        remedy = "Set NUMBA_CACHE_DIR to a writable folder to restore them." if _no_cache_folder(exc) else \
            _cache_write_remedy(exc) or self.remedy
        warnings.warn(
            f"sfapprox: the compiled {self.what} failed ({type(exc).__name__}: {exc}); "
            f"falling back to {self.fallback}. {remedy}",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
