"""A Dask client from a scheduler address, with the project's one-line errors (dask is optional)."""

from __future__ import annotations

import logging
import threading

from ._errors import ParameterError, one_line

__all__ = ["connect", "close", "CONNECT_SECONDS"]

#: Seconds a scheduler has to answer; a connection attempt is abandoned this much later still.
CONNECT_SECONDS, GRACE_SECONDS = 10, 5


def connect(scheduler: str, what: str = "--scheduler"):
    """A ``dask.distributed.Client`` connected to ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``).

    Parameters
    ----------
    scheduler : str
        The scheduler's address.
    what : str, default="--scheduler"
        The option that asked for it, for the messages.

    Returns
    -------
    dask.distributed.Client

    Raises
    ------
    ParameterError
        When dask.distributed is not installed, the address is not one, or the scheduler cannot be
        reached within 10 s.
    """
    try:
        from dask.distributed import Client
    except ImportError:
        raise ParameterError(f"{what} needs dask.distributed, an optional extra: pip install 'sfapprox[dask]'") from None
    if not scheduler.strip():
        raise ParameterError(f"{what} needs the scheduler's address (such as tcp://10.0.0.5:8786), got an empty one")
    # On a thread, to hold the 10 s whatever answers: a server that accepts and never replies kept
    # Client's handshake waiting past its own timeout (100 s and more).
    outcome: dict = {}
    decided, answered = threading.Lock(), threading.Event()

    def attempt() -> None:
        # made apart from its __init__, to be closed when that fails: dask leaves such a client half made,
        # its event loop running, and its finalizer, run by a garbage collection at some later moment, could
        # wait in the thread of another client's event loop as it started, for the lock that start held
        # (a later connection failed after 10 s: "no Dask scheduler answered ... (AssertionError)")
        client = Client.__new__(Client)
        try:
            client.__init__(scheduler, timeout=f"{CONNECT_SECONDS}s")
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            with decided:
                outcome["error"] = exc
            answered.set()
            _discard(client)
            return
        with decided:
            outcome["client"] = client
            late = outcome.get("abandoned", False)
        answered.set()
        if late:  # the caller gave up on it: nobody else would close it
            _discard(client)

    threading.Thread(target=attempt, name="sfapprox-dask-connect", daemon=True).start()
    answered.wait(CONNECT_SECONDS + GRACE_SECONDS)
    with decided:
        outcome["abandoned"] = not ("client" in outcome or "error" in outcome)
    if outcome["abandoned"]:
        raise _no_answer(scheduler, what)
    exc = outcome.get("error")
    if exc is None:
        return outcome["client"]
    if not isinstance(exc, Exception):
        raise exc  # (KeyboardInterrupt and the like)
    if isinstance(exc, ValueError):  # an address dask cannot parse ("missing port number", a broken IPv6 bracket)
        raise ParameterError(f"{what} {scheduler!r} is not a scheduler address ({one_line(exc)}); give one such "
                             "as tcp://10.0.0.5:8786") from None
    if isinstance(exc, (OSError, TimeoutError)):
        raise ParameterError(f"cannot connect to the Dask scheduler at {scheduler} ({one_line(exc)})") from None
    # Anything else came from what answered: a server that is no Dask scheduler (its reply read as a
    # message of exabytes: "out of memory"), a scheme this install cannot use (tls:// without
    # certificates, ucx:// without its package).
    raise ParameterError(f"no Dask scheduler answered at {scheduler} ({type(exc).__name__}: {one_line(exc)}); "
                         f"check {what}'s address and its scheme (tcp://)") from None


def _no_answer(scheduler: str, what: str) -> ParameterError:
    """The error for an address where something accepted the connection and no Dask scheduler replied."""
    return ParameterError(f"nothing answered as a Dask scheduler at {scheduler} within {CONNECT_SECONDS} s; "
                          f"check {what}'s address (such as tcp://10.0.0.5:8786)")


def _discard(client) -> None:
    """Close a client that failed to connect, or connected after :func:`connect` gave up on it; what that
    raises is of no use to anyone (the failure is said already)."""
    try:
        close(client)
    except Exception:  # noqa: BLE001 - e.g. one that failed before it had an event loop to close
        pass


def close(client) -> None:
    """Close ``client`` without dask's log of a reconnection cut short.

    A client whose scheduler went away (killed mid-run) is trying to reconnect; closing it cancels
    that, and dask logged the cancellation as an ERROR with three chained tracebacks on stderr,
    printed above the run's own one-line error ("the Dask cluster was lost ...").

    Parameters
    ----------
    client : dask.distributed.Client
    """
    from ._global_state import logs_off

    with logs_off("distributed.client", below=logging.CRITICAL):
        client.close()
