"""Tasks on an executor: a ``concurrent.futures`` pool or a ``dask.distributed.Client``, results in order.

Every streamed pass that can run elsewhere (the exact scoring pass, the top-s
pass, the columns and products of :class:`~sfapprox.sources.DistributedSource`)
submits its blocks through :func:`ordered_map`: the results come back in the
order of the blocks, so they are added up as the local pass adds them and the
numbers do not depend on which worker computed what.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from ._errors import ParameterError, one_line
from ._global_state import logs_off  # (its home; still importable from here)

__all__ = ["Executor", "worker_count", "share", "send_shared", "ordered_map", "not_picklable", "worker_died", "worker_death",
           "serialization_logs_off", "logs_off"]


class Executor(Protocol):
    """Where a pass's blocks run: a ``concurrent.futures`` pool or a ``dask.distributed.Client``, both of which
    submit a call and return its future (a protocol, not a union: naming Dask's client would import it)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` there; its future."""


#: Tasks kept in flight per worker: one running and one queued, so a worker never waits for the
#: caller, while results not yet consumed stay bounded (a top-s task's result is O(k) numbers).
IN_FLIGHT_PER_WORKER = 2


def check_executor(executor: Any) -> None:
    """Refuse an ``executor=`` that cannot run tasks, before any work: a pass over the columns met it as
    ``'int' object has no attribute 'submit'`` (an AttributeError from deep inside), and a formed matrix
    ignored it.

    Parameters
    ----------
    executor : Executor or None
        A ``concurrent.futures`` pool, a ``dask.distributed.Client`` or anything with ``submit``; None: none.

    Raises
    ------
    ParameterError
        For anything without a callable ``submit`` (a number, a string such as ``"process"``).

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> check_executor(None), check_executor(ThreadPoolExecutor(1))
    (None, None)
    """
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ParameterError(f"executor must be a concurrent.futures pool (ThreadPoolExecutor, ProcessPoolExecutor) "
                             f"or a dask.distributed Client, got {type(executor).__name__}"
                             f"{f' {executor!r}' if isinstance(executor, str) else ''}")


def _is_dask(executor) -> bool:
    return hasattr(executor, "scatter") and hasattr(executor, "scheduler_info")


def worker_count(executor) -> int:
    """How many tasks ``executor`` runs at once (at least 1).

    Parameters
    ----------
    executor : Executor
        A ``concurrent.futures`` pool (its ``_max_workers``) or a Dask client (its workers' threads).

    Returns
    -------
    int
    """
    if _is_dask(executor):
        workers = executor.scheduler_info().get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
    return max(1, int(getattr(executor, "_max_workers", None) or os.cpu_count() or 1))


def share(executor, objects: Sequence[Any]) -> list[Any]:
    """``objects`` as the tasks should receive them: sent once to a Dask cluster, or as they are.

    On Dask each object is a task of its own (:func:`_held`), its result
    kept by the cluster while the futures returned are held: the tasks that
    take it fetch it from the worker that has it.  Not ``scatter``: scattered
    data is lost for good with the last worker that held it (a worker killed
    by a task that kills the next one too, over its memory limit), and every
    task of the pass was then cancelled ("already forgotten", said as a lost
    cluster) where Dask retries a task whose worker died on another one
    (``distributed.scheduler.allowed-failures``) and recomputes what it
    needs.

    Parameters
    ----------
    executor : Executor
    objects : sequence
        Arguments every task takes (a source, surrogates).

    Returns
    -------
    list
        Futures of the objects (Dask), or the objects.
    """
    if not _is_dask(executor):
        return list(objects)
    with warnings.catch_warnings():
        # dask's advice on a big task argument ("Sending large graph ... consider futures"): this is the future
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        # a future is shared already (for all of a source's passes); fresh keys (pure=False): a pass sharing what
        # the previous one released, under the same content-derived key, would find it being forgotten
        return [obj if _is_future(obj) else executor.submit(_held, obj, pure=False) for obj in objects]


def send_shared(executor, objects: Sequence[Any]) -> list[Any]:
    """:func:`share`, with a lost cluster or an object that does not pickle said in one line (:func:`_sent`)."""
    return _sent(executor, share, executor, objects)


def _is_future(obj: Any) -> bool:
    """Whether ``obj`` is a Dask future (by name: dask is optional): a task takes its result."""
    return type(obj).__name__ == "Future" and hasattr(obj, "key") and hasattr(obj, "client")


def _held(obj: Any) -> Any:
    """``obj`` itself: the task whose result is an object the tasks of a pass share (:func:`share`)."""
    return obj


#: Exceptions (by name: dask is optional) that say a Dask cluster went away under a task, not that
#: the task failed: its scheduler stopped or was killed.  (A worker that died running the task, each
#: time Dask tried it, is ``KilledWorker``: :func:`worker_died`.)
_LOST = ("FutureCancelledError", "CancelledError", "CommClosedError")


def is_kind(exc: BaseException, *names: str) -> bool:
    """Whether ``exc`` is of a class named one of ``names`` (by name: dask is optional, never imported here)."""
    return any(k.__name__ in names for k in type(exc).__mro__)


def cluster_lost(exc: BaseException, during: str = "a pass over the columns"):
    """The :class:`~sfapprox.ResourceError` to raise where ``exc`` (a task's ``result()``) says that its Dask
    cluster went away (:data:`_LOST`), else None (the task's own failure)."""
    if not is_kind(exc, *_LOST):
        return None
    return _lost(during, f"{type(exc).__name__}: {one_line(exc)}")


def worker_death(exc: BaseException) -> str | None:
    """What a ``KilledWorker`` says, in words (the ``allowed-failures`` retries it used up, the last worker),
    else None: the Dask workers that ran a task died each time, the scheduler's retries used up.

    Shared by :func:`worker_died` (a pass of ``compare --scheduler``) and the batch's failed lines.

    Examples
    --------
    >>> class KilledWorker(Exception):
    ...     allowed_failures, last_worker = 3, None
    >>> worker_death(KilledWorker())
    "the Dask worker running it died 4 times, the scheduler's retries used up (KilledWorker; \
distributed.scheduler.allowed-failures: 3)"
    """
    if not is_kind(exc, "KilledWorker"):
        return None
    tries = getattr(exc, "allowed_failures", None)
    times = ("once" if tries == 0 else f"{tries + 1} times") if isinstance(tries, int) else "each time"
    last = getattr(getattr(exc, "last_worker", None), "address", None)
    where = f", the last one {last}" if isinstance(last, str) else ""
    setting = f"; distributed.scheduler.allowed-failures: {tries}" if isinstance(tries, int) else ""
    return f"the Dask worker running it died {times}, the scheduler's retries used up (KilledWorker{where}{setting})"


def worker_died(exc: BaseException, during: str = "a pass over the columns"):
    """The :class:`~sfapprox.ResourceError` to raise where ``exc`` (a task's ``result()``) says that the
    workers running it died, each time Dask tried it (``KilledWorker``), else None.

    Not a lost cluster (:func:`cluster_lost`): the scheduler runs, and so do the other workers; the task
    killed its workers, over their memory limit (a nanny restarts such a worker) or killed by the system."""
    death = worker_death(exc)
    if death is None:
        return None
    from ._errors import ResourceError, parameter

    # the limit in its reader's spelling (a command line's --max-memory, a call's max_memory=)
    died = ResourceError(f"a Dask worker died during {during}: {death}: over its memory limit, or killed; see the "
                         "worker's log, give the workers more memory (dask worker --memory-limit) or set a lower "
                         f"{parameter('max_memory')} (smaller blocks), and run again")
    died.transient = True  # (run_all: "failed", not "not applicable" under the limit)
    return died


def _lost(during: str, detail: str):
    from ._errors import ResourceError

    lost = ResourceError(f"the Dask cluster was lost during {during} ({detail}); "
                         "check that its scheduler runs and its workers have the memory (a worker over its limit "
                         "is restarted), then run again")
    lost.transient = True  # a failure of the moment, not of the method under the limit (run_all: "failed")
    return lost


def _result(future, executor) -> Any:
    """``future.result()``; a Dask cluster lost under it is one :class:`ResourceError` (it was a
    traceback ending in ``FutureCancelledError: ... scheduler-connection-lost``, exit 1)."""
    try:
        return future.result()
    except Exception as exc:
        # a process pool pickles a task's arguments on its own thread: their failure comes with the result
        said = _said(exc, executor, sent=False)
        if said is None:
            raise
        raise said from None


def not_picklable(exc: BaseException, what: str = "the matrix source"):
    """The :class:`~sfapprox.ParameterError` to raise where ``exc`` says that what was sent to an executor's
    workers does not pickle (dask's ``TypeError('Could not serialize object of type ...')``, a process
    pool's ``cannot pickle '_io.BufferedReader' object``), else None.

    It was that TypeError's traceback (dask's: above three chained ones it logged), for a source that
    holds an open file, a lock or a connection."""
    from ._errors import ParameterError

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    texts = [str(e.args[0]) if e.args else str(e) for e in chain
             if isinstance(e, (TypeError, AttributeError, pickle.PicklingError))]
    if not any(t.startswith(("Could not serialize object", "cannot pickle", "Can't pickle", "Can't get local"))
               for t in texts):
        return None
    # the object dask names (a source's class), not the graph holding a task's arguments: its expression
    # ("_MapExpr"), or on older distributed (2024.6.1, which pyproject allows) the graph ("HighLevelGraph")
    objects = [str(e.args[0]) for e in chain if e.args and str(e.args[0]).startswith("Could not serialize object")
               and not str(e.args[0]).endswith(("Expr", "HighLevelGraph"))]
    why = next((one_line(e) for e in reversed(chain) if isinstance(e, (TypeError, AttributeError, pickle.PicklingError))
                and not str(e.args[0] if e.args else e).startswith("Could not serialize object")), one_line(exc))
    whose = f" ({objects[0][len('Could not serialize '):]})" if objects else ""
    return ParameterError(f"{what} cannot be sent to the executor's workers{whose}: it does not pickle ({why}); "
                          "an object that holds an open file, a lock or a connection must reopen it when unpickled "
                          "(__reduce__), or run it without an executor")


def serialization_logs_off(executor):
    """Dask's ERROR log of an object it cannot serialize (three chained tracebacks, each time) is off: the
    failure is raised, and said in one line (:func:`not_picklable`)."""
    if not _is_dask(executor):
        return contextlib.nullcontext()
    return logs_off("distributed.protocol.pickle", "distributed.protocol.core", "distributed.comm.utils")


def _sent(executor, call: Callable, *args, **kwargs) -> Any:
    """``call(*args, **kwargs)``, a call to the executor (scatter, submit, its workers); a Dask cluster
    lost before it is one :class:`ResourceError`, as under :func:`_result` (a scatter to a scheduler that
    had gone was a traceback ending in ``CommClosedError: ConnectionPool closing.``); an argument that
    does not pickle is one :class:`ParameterError` (:func:`not_picklable`)."""
    try:
        with serialization_logs_off(executor):
            return call(*args, **kwargs)
    except Exception as exc:
        said = _said(exc, executor, sent=True)
        if said is None:
            raise
        raise said from None


def _said(exc: Exception, executor, *, sent: bool) -> Exception | None:
    """The one-line error to raise for ``exc`` from a call to ``executor`` (``sent``: sending to it, else a
    task's result), or None (raise ``exc`` itself): what did not pickle (:func:`not_picklable`; a Dask task's
    result never says that, its arguments were sent already), the workers that ran a task dead each time
    (:func:`worker_died`), a Dask cluster lost (:func:`cluster_lost`), or, sending, a Dask client that
    closed itself."""
    dask = _is_dask(executor)
    unsent = not_picklable(exc) if sent or not dask else None
    if unsent is not None or not dask:
        return unsent
    lost = worker_died(exc) or cluster_lost(exc)
    if lost is None and sent and getattr(executor, "status", None) in ("closing", "closed"):
        # a client that gave up reconnecting closed itself: its calls fail on what it let go
        # ("'NoneType' object has no attribute 'scatter'")
        lost = _lost("a pass over the columns", f"its client closed itself: {one_line(exc)}")
    return lost


def ordered_map(executor, fn: Callable, items: Iterable[Any], shared: Sequence[Any] = (),
                window: int | None = None) -> Iterator[Any]:
    """``fn(*shared, item)`` for each item on ``executor``, yielded in the items' order.

    At most ``window`` tasks are in flight (submitted and not yet consumed); the
    ones still pending are cancelled when the caller stops early.

    Parameters
    ----------
    executor : Executor
        Anything with ``submit(fn, *args)`` returning futures with ``result()`` and ``cancel()``.
    fn : callable
        A module-level function (it travels pickled to other processes).
    items : iterable
        One task each (e.g. column blocks).
    shared : sequence, default=()
        Leading arguments of every task, sent once (:func:`share`).
    window : int or None, default=None
        Tasks in flight; None: :data:`IN_FLIGHT_PER_WORKER` per worker.

    Yields
    ------
    Any
        Each task's result, in order.
    """
    args = send_shared(executor, shared)
    options = {"pure": False} if _is_dask(executor) else {}  # fresh task keys too, for the same reason
    window = max(1, window or IN_FLIGHT_PER_WORKER * _sent(executor, worker_count, executor))
    pending: deque = deque()
    try:
        for item in items:
            pending.append(_sent(executor, executor.submit, fn, *args, item, **options))
            if len(pending) >= window:
                yield _result(pending.popleft(), executor)
        while pending:
            yield _result(pending.popleft(), executor)
    finally:
        for future in pending:
            future.cancel()
