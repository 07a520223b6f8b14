"""Stop signals: SIGTERM and SIGHUP are handled like Ctrl-C, and no signal cuts an output in half.

``timeout``, systemd, Slurm and ``kill`` stop a program with SIGTERM, a
terminal with SIGINT (Ctrl-C), a closed terminal or ssh session with SIGHUP.
The command line installs :func:`install_stop_handlers`, which turns the
first of any into a ``KeyboardInterrupt`` in the main thread, so every path
that keeps partial work on Ctrl-C (the best SF factors, finished comparison
rows, finished batch lines) keeps it on SIGTERM and SIGHUP too;
:func:`stop_signal` tells the exit code (130 after SIGINT, 143 after SIGTERM,
129 after SIGHUP: 128 + the signal number).  After a hang-up, standard
output and error that were the closed terminal are sent to ``/dev/null``
(:func:`_leave_hung_up_terminal`): every write there fails, and a failed
message must not cost the outputs the stop saves.

While an output file is written and moved into place
(:func:`sfapprox._atomic.atomic_path`), :func:`deferred` holds the stop signals
back and delivers them once the file is complete, so a second Ctrl-C during
the save of a stopped fit does not throw the fit away.  A stop during torch's
import is sent again once the import has ended (:data:`_FRAGILE_IMPORTS`):
raised inside it, it aborted the process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["STOP_SIGNALS", "install_stop_handlers", "stop_requested", "caused_by_stop", "stop_signal", "stop_cause",
           "deferred", "held_back", "exit_code", "children_keep_hang_ups_blocked"]

#: SIGHUP where the platform has one (not on Windows): a closed terminal ends a fit as Ctrl-C does, with
#: its best factors saved, where its default action killed it with nothing written.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())

#: Signals received by the handlers of :func:`install_stop_handlers`, in order.
_received: list[int] = []
_depth = 0  # nesting of deferred() in the main thread
_held: list[int] = []  # the signals the current deferred() block holds back


#: Packages whose import runs Python code called from C++ (pybind11): a ``KeyboardInterrupt`` raised
#: there becomes a C++ exception that nothing catches, and the process aborts ("terminate called after
#: throwing an instance of 'pybind11::error_already_set'", killed by SIGABRT, nothing said), or the import
#: fails with an error of its own (a batch wrote the pair's "failed" line after its stop) -- a Ctrl-C in the
#: seconds a batch's first SF spends loading torch (1 abort in 80 stops timed at random there; in CI runs of
#: ``test_batch``, once a double free and once a line for the stopped pair, likely the same).  Such a stop
#: waits for the import's end, and says so
#: (``benchmarks/results/stop_timing.md``: seconds to exit 2.0 -> 7.7, median, on a machine at load 6).
_FRAGILE_IMPORTS = ("torch",)

#: How often the thread that waits for such an import to end looks at it (seconds).
_IMPORT_POLL_SECONDS = 0.01
#: Stops held over such an import before one more stops at once, inside it (its import may hang: a stuck
#: network folder), as a third stop abandons the save of a second: the user insists.
_IMPORT_PATIENCE = 2
#: The stops held over such an import (:func:`_after_import` sends the first again once it has ended).
_import_held: list[int] = []
#: The held stops not sent again: their kind still names the stop (:func:`stop_signal`: a SIGTERM after a
#: Ctrl-C during the import exits 143, as it does outside one).
_kinds_held: list[int] = []


def _on_stop(signum: int, frame) -> None:
    """First signal: stop (KeyboardInterrupt).  Second: say that the stop is under way.  Third: stop again.

    A first stop that comes while a package of :data:`_FRAGILE_IMPORTS` is being imported is sent again
    once that import has ended (:func:`_after_import`): raised inside it, it aborted the process.  A
    second such stop is noted; a third stops at once (:data:`_IMPORT_PATIENCE`).
    """
    importing = _importing_fragile() if not _received else None  # (a stop under way: as below)
    if importing is not None and len(_import_held) < _IMPORT_PATIENCE:
        _import_held.append(signum)
        if signum == getattr(signal, "SIGHUP", None):
            _leave_hung_up_terminal()  # at once (no Python runs there): the import's own output may fail
        if len(_import_held) == 1:
            _after_import(importing)
        again = "Ctrl-C" if signum == signal.SIGINT else "the signal"
        _note(f"sfapprox: stopping once {importing} has loaded; {again} twice more stops at once (which may "
              f"crash it)" if len(_import_held) == 1 else
              f"sfapprox: still loading {importing}; {again} once more stops at once (which may crash it)")
        return
    held = _import_held[:]  # a third stop during the import: all of them received now, this one raised
    _import_held.clear()  # (the waiting thread sends nothing then)
    _received.extend(held + [signum])
    if getattr(signal, "SIGHUP", None) in held + [signum]:
        _leave_hung_up_terminal()
    if held:
        raise KeyboardInterrupt
    if len(_received) == 2:
        # The first stop is still saving what was finished (a stopped fit's best
        # factors); a second impatient Ctrl-C must not throw that away.
        _note("sfapprox: already stopping, saving what was finished; send the signal once more to abandon that")
        return
    raise KeyboardInterrupt


def _note(text: str) -> None:
    """Write ``text`` as a line of standard error, from a stop handler.  A note that cannot be written
    (stderr's pipe closed) must not cost what the stop saves: raised there, its OSError surfaced wherever
    the save was."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _importing_fragile() -> str | None:
    """The package of :data:`_FRAGILE_IMPORTS` whose import is running now, or None.

    Python marks a module's spec ``_initializing`` while its code runs (importlib's own test for "a
    partially initialized module"); an interpreter without the mark gets None (a stop as before).
    """
    return next((name for name in _FRAGILE_IMPORTS if _initializing(name)), None)


def _initializing(name: str) -> bool:
    """Whether the import of module ``name`` is running now (its spec's ``_initializing`` mark)."""
    return getattr(getattr(sys.modules.get(name), "__spec__", None), "_initializing", False) is True


def _after_import(name: str) -> None:
    """Send the first stop held over the import of ``name`` (:data:`_import_held`) to the main thread
    again once that import has ended (finished or failed), from a thread that waits for it: its handler
    then runs there, after the import.  The stops held after it are not sent: a second one sent too
    would have abandoned the save of what the first stops (:func:`_on_stop`)."""
    main = threading.main_thread().ident

    def wait() -> None:
        while _initializing(name):
            if not _import_held:  # a third stop stopped it at once
                return
            time.sleep(_IMPORT_POLL_SECONDS)
        held = _import_held[:]
        _import_held.clear()
        if not held:
            return
        signum = held[0]
        _kinds_held.extend(held[1:])
        if hasattr(signal, "pthread_kill"):
            # to the main thread itself: raised in this one, a main thread asleep or waiting (for a lock, a
            # pipe) went on waiting, the stop not seen until that ended
            signal.pthread_kill(main, signum)
        else:  # (Windows: no thread is signalled, Python runs the handler in the main thread)
            signal.raise_signal(signum)

    threading.Thread(target=wait, name=f"sfapprox-stop-after-{name}", daemon=True).start()


def _leave_hung_up_terminal() -> None:
    """Point standard output and error at ``/dev/null`` where they are a terminal that hung up.

    A closed ssh session's terminal fails every write with EIO: the stop's
    message, the progress bar's last redraw, the tables shown before a
    comparison's files are written; an ``OSError`` from any of them ended the
    command without its outputs and with exit 2.  A terminal still there
    (``kill -HUP`` from another one), a pipe and a file are kept: a write of
    no bytes tells them apart (it fails only on the hung-up terminal).
    """
    for fd in (1, 2):
        try:
            os.write(fd, b"")
        except OSError as exc:
            if exc.errno != errno.EIO:
                continue
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)


def install_stop_handlers() -> None:
    """Make SIGINT, SIGTERM and SIGHUP stop the program the way Ctrl-C does (main thread only).

    A signal ignored when the program started (``nohup``, a shell's background
    job) stays ignored, as Python does for SIGINT.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    _received.clear()
    _import_held.clear()
    _kinds_held.clear()
    for signum in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, _on_stop)


def stop_requested() -> bool:
    """Whether a stop signal has been received (by the handlers of :func:`install_stop_handlers`).

    The handler's ``KeyboardInterrupt`` is raised wherever the main thread
    is; when that is Python code run from C — an import made while numba
    compiles a kernel or torch loads a submodule — the C caller may print the
    exception and carry on, and the stop would be lost.  Long loops (every SF
    iteration, every method of a comparison) check this flag so that a stop
    is acted on even then.  Always False where the handlers are not
    installed (the library used from Python).
    """
    return bool(_received)


def caused_by_stop(exc: BaseException) -> bool:
    """Whether ``exc`` was raised because of a Ctrl-C or SIGTERM's KeyboardInterrupt (its cause, or its
    context where not suppressed).  Python 3.11 wraps one raised in a class's making (a stop while scipy is
    imported: ``__set_name__``) in a RuntimeError: a traceback and exit 1 instead of an interruption."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return False


def stop_signal() -> int | None:
    """SIGTERM if one was received by the stop handlers, else SIGHUP if one was, else SIGINT if one
    was, else None."""
    for signum in STOP_SIGNALS[1:]:
        if signum in _received or signum in _kinds_held:
            return signum
    return signal.SIGINT if _received else None


def stop_cause() -> str:
    """``"SIGTERM"`` or ``"SIGHUP"`` where that signal was received, else ``"Ctrl-C"`` (SIGINT, or
    Python's own KeyboardInterrupt): what stopped the work, for messages."""
    signum = stop_signal()
    return "Ctrl-C" if signum in (None, signal.SIGINT) else signal.Signals(signum).name


def exit_code(code: int) -> int:
    """The process exit code: an interruption (130) caused by SIGTERM becomes 143 (128 + 15), one
    caused by SIGHUP 129 (128 + 1).

    After a stop signal, further ones are ignored from here on: the program
    is exiting, and one arriving during interpreter shutdown (when Python
    has put the default actions back) would otherwise end it with a signal
    instead of this code.
    """
    if stop_signal() is not None and threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, signal.SIG_IGN)
        _forget_escaped_interrupt()
    if code == 130 and stop_signal() not in (None, signal.SIGINT):
        return 128 + stop_signal()
    return code


def _forget_escaped_interrupt() -> None:
    """Clear CPython's note that a KeyboardInterrupt escaped code it ran through ``PyRun_String`` (a
    compiled extension's start-up code, while a stop arrived during an import).

    ``python -m sfapprox`` ends, after its SystemExit, by killing itself with SIGINT where that note is
    set: a stop during the imports then ended it as "killed by SIGINT" (a parent's ``returncode`` -2, and
    130 for a SIGTERM) whatever :func:`exit_code` said.  ``PyRun_String`` clears the note as it starts,
    and a statement that raises nothing leaves it clear.  Not CPython (no ``pythonapi``): nothing to do.
    """
    with contextlib.suppress(Exception):
        import ctypes  # here: only an interrupted run needs it

        run = ctypes.pythonapi.PyRun_String
        run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]
        run.restype = ctypes.py_object
        run(b"None", _EVAL_INPUT, {}, {})


#: ``Py_eval_input``, the start symbol of an expression for ``PyRun_String``.
_EVAL_INPUT = 258


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold the stop signals (SIGINT, SIGTERM, SIGHUP) back inside the block; deliver them, in order,
    when it ends.

    Delivery calls the handler that was in place (a ``KeyboardInterrupt``
    after the block for Ctrl-C, the default action for an unhandled SIGTERM),
    also when the block raised.  Outside the main thread (where no Python
    handler runs) and in nested blocks this is a no-op.
    """
    global _depth
    if threading.current_thread() is not threading.main_thread() or _depth:
        yield
        return
    pending = _held
    pending.clear()
    previous: dict[int, object] = {}

    def hold(signum: int, frame) -> None:
        pending.append(signum)

    for signum in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            handler = signal.getsignal(signum)
            if handler in (signal.SIG_IGN, None):  # ignored, or a handler not set from Python
                continue
            signal.signal(signum, hold)
            previous[signum] = handler
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        delivered = list(pending)
        pending.clear()
        for signum in delivered:
            signal.raise_signal(signum)  # runs the restored handler now


def held_back() -> bool:
    """Whether the current :func:`deferred` block holds a stop signal back (to deliver when it ends).

    A block that waits on something outside the program (a named pipe's reader) looks at this
    so that the stop ends the wait instead of waiting for it.
    """
    return bool(_held)


@contextlib.contextmanager
def children_keep_hang_ups_blocked() -> Iterator[None]:
    """Start processes inside the block with SIGHUP blocked: a hang-up of the terminal reaches the whole
    process group, and the parent, not its helpers, decides what it stops.

    A signal mask is inherited through ``fork`` and ``exec``, so it covers a child's start-up, before it
    can set a handler of its own (a batch worker's imports), and helpers that never set one
    (multiprocessing's resource tracker blocks SIGINT and SIGTERM alone: killed by the hang-up, it was
    started again with a traceback and a warning that resources might leak).  This process receives the
    signal all the same: its other threads take it, or the main thread when the block ends.  A no-op
    where there is no SIGHUP or no signal mask (Windows), and outside the main thread.
    """
    hup = getattr(signal, "SIGHUP", None)
    if hup is None or not hasattr(signal, "pthread_sigmask") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [hup])
    try:
        yield
    finally:
        # the caller's mask as it was (a program that had SIGHUP blocked keeps it blocked)
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
