"""Tasks on an executor: results in the items' order, a bounded number in flight, the rest cancelled on a stop."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from _compat import cluster_lost_error, pickle_refusal
from sfapprox._executors import ordered_map, share, worker_count


def _slow_square(delay_of, x):
    time.sleep(delay_of[x])
    return x * x


def test_results_come_in_the_items_order_whatever_finishes_first():
    delays = {0: 0.05, 1: 0.0, 2: 0.03, 3: 0.0}
    with ThreadPoolExecutor(4) as pool:
        assert list(ordered_map(pool, _slow_square, range(4), (delays,))) == [0, 1, 4, 9]


class _Watching:
    """A pool that records how many of its tasks were submitted and not yet done, at most."""

    def __init__(self, workers):
        self.pool = ThreadPoolExecutor(workers)
        self._max_workers = workers
        self.lock = threading.Lock()
        self.live = self.most = self.submitted = 0

    def submit(self, fn, *args):
        with self.lock:
            self.live += 1
            self.submitted += 1
            self.most = max(self.most, self.live)
        future = self.pool.submit(fn, *args)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future):
        with self.lock:
            self.live -= 1


def test_at_most_a_window_of_tasks_is_in_flight_and_a_stop_cancels_the_rest():
    pool = _Watching(2)
    delays = dict.fromkeys(range(40), 0.002)
    assert list(ordered_map(pool, _slow_square, range(40), (delays,), window=3)) == [x * x for x in range(40)]
    assert pool.most <= 3
    stopped = _Watching(1)
    gen = ordered_map(stopped, _slow_square, range(40), (dict.fromkeys(range(40), 0.01),), window=4)
    assert next(gen) == 0
    gen.close()  # the caller stops early: nothing more is submitted, the queued tasks are cancelled
    stopped.pool.shutdown(wait=True)
    assert stopped.submitted <= 5


def test_errors_in_a_task_reach_the_caller():
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(KeyError):
            list(ordered_map(pool, _slow_square, [0, 7], ({0: 0.0},)))


def test_worker_count_and_share_for_a_plain_pool():
    with ThreadPoolExecutor(3) as pool:
        assert worker_count(pool) == 3
        objects = [object()]
        assert share(pool, objects) == objects  # a local pool takes the objects as they are


def test_a_dask_cluster_lost_under_a_pass_is_one_resource_error(monkeypatch):
    """A scheduler closed or killed (or a worker over its memory limit) during compare --scheduler ended in a
    traceback ("FutureCancelledError: ... scheduler-connection-lost") and exit 1."""
    pytest.importorskip("distributed")
    from sfapprox import ResourceError
    from sfapprox import _executors

    cluster = _failing_cluster(monkeypatch, cluster_lost_error)
    with pytest.raises(ResourceError, match="the Dask cluster was lost"):
        list(_executors.ordered_map(cluster, abs, [1, 2]))


def _failing_cluster(monkeypatch, failure):
    """A stand-in for a Dask client (what ``_executors._is_dask`` recognises) each of whose tasks' results
    raises ``failure()``; sharing and the worker count made plain."""
    from sfapprox import _executors

    class Failed:
        def result(self):
            raise failure()

        def cancel(self):
            pass

    class Cluster:
        scatter = scheduler_info = None

        def submit(self, fn, *args, **kw):
            return Failed()

    monkeypatch.setattr(_executors, "share", lambda executor, shared: list(shared))
    monkeypatch.setattr(_executors, "worker_count", lambda executor: 1)
    return Cluster()


def test_a_task_s_own_error_still_propagates_as_itself(monkeypatch):
    from sfapprox import _executors

    class Failed:
        def result(self):
            raise ZeroDivisionError("the task's own")

        def cancel(self):
            pass

    class Cluster:
        scatter = scheduler_info = None

        def submit(self, fn, *args, **kw):
            return Failed()

    monkeypatch.setattr(_executors, "share", lambda executor, shared: list(shared))
    monkeypatch.setattr(_executors, "worker_count", lambda executor: 1)
    with pytest.raises(ZeroDivisionError):
        list(_executors.ordered_map(Cluster(), abs, [1]))


def test_a_server_that_answers_but_is_no_scheduler_is_refused_in_time(monkeypatch):
    """A server that accepted and never replied kept compare --scheduler waiting past 100 s (it says 10 s);
    tls:// without certificates was a TypeError traceback."""
    pytest.importorskip("distributed")
    import socket
    import threading
    import time

    from sfapprox import ParameterError
    from sfapprox import _dask

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    monkeypatch.setattr(_dask, "CONNECT_SECONDS", 1)
    monkeypatch.setattr(_dask, "GRACE_SECONDS", 1)
    began = time.monotonic()
    with pytest.raises(ParameterError, match="nothing answered as a Dask scheduler"):
        _dask.connect(f"tcp://127.0.0.1:{server.getsockname()[1]}")
    assert time.monotonic() - began < 10
    server.close()
    with pytest.raises(ParameterError, match="no Dask scheduler answered at tls://127.0.0.1:1"):
        _dask.connect("tls://127.0.0.1:1")


def test_a_failed_connection_leaves_no_dask_client_behind(monkeypatch):
    """dask leaves a Client that failed to connect half made, its event loop running; collected later, by chance
    in the thread of the next client's event loop as it started, it waited there for the lock that start held,
    and the next connection failed after 10 s: "no Dask scheduler answered at inproc://... (AssertionError)",
    in a test of test_batch.py run after test_cli.py (whose wrong addresses left such clients)."""
    distributed = pytest.importorskip("dask.distributed")
    import gc
    import socket

    from sfapprox import ParameterError
    from sfapprox import _dask

    def clients() -> list:  # those that failed to connect too (dask lists only the connected ones)
        # by type: isinstance() asks every object its __class__, and torch's deprecated aliases warn when asked
        return [c for c in gc.get_objects() if issubclass(type(c), distributed.Client)]

    monkeypatch.setattr(_dask, "CONNECT_SECONDS", 1)  # the refused port: dask tries again until then
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    earlier = set(map(id, clients()))
    failures = []  # kept: each one's traceback holds its client
    for address in ("garbage", "tcp://[::1", refused):
        with pytest.raises(ParameterError) as caught:
            _dask.connect(address)
        failures.append(caught.value)
    made = [c for c in clients() if id(c) not in earlier]
    assert made and {c.status for c in made} == {"closed"}  # (closing stops its event loop)
    monkeypatch.setattr(_dask, "CONNECT_SECONDS", 10)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        _dask.close(_dask.connect(c.scheduler_address))


def test_a_dask_cluster_lost_before_a_pass_sends_its_tasks_is_one_resource_error():
    """A scheduler killed during compare --scheduler: the next pass's scatter (now: its shared objects'
    tasks) raised dask's
    "CommClosedError: ConnectionPool closing." as a traceback (CLI: "error: ConnectionPool closing."), and
    once the client had given up reconnecting, "AttributeError: 'NoneType' object has no attribute 'scatter'"."""
    from sfapprox import ResourceError
    from sfapprox import _executors

    class CommClosedError(OSError):  # dask's, by name (dask is optional)
        pass

    class Cluster:  # what _is_dask recognises
        status = "running"

        def scheduler_info(self):
            return {"workers": {"w": {"nthreads": 1}}}

        def scatter(self, objects, **kw):
            raise CommClosedError("ConnectionPool closing.")

        def submit(self, fn, *args, **kw):  # (the shared objects are sent as tasks of their own)
            return self.scatter([fn])

    with pytest.raises(ResourceError, match="the Dask cluster was lost"):
        list(_executors.ordered_map(Cluster(), abs, [1, 2], shared=[3]))

    class Closed(Cluster):
        status = "closed"

        def scatter(self, objects, **kw):
            return None.scatter  # what a client that closed itself does

    with pytest.raises(ResourceError, match="the Dask cluster was lost.*its client closed itself"):
        list(_executors.ordered_map(Closed(), abs, [1, 2], shared=[3]))

    class Bug(Cluster):  # a running client's own error is not a lost cluster
        def scatter(self, objects, **kw):
            raise TypeError("a task's argument")

    with pytest.raises(TypeError):
        list(_executors.ordered_map(Bug(), abs, [1, 2], shared=[3]))


def test_closing_a_client_whose_scheduler_was_killed_logs_no_traceback():
    """batch --executor dask with its scheduler killed mid-run: closing the client cancelled its reconnection,
    which dask logged as an ERROR with three chained tracebacks, above the run's one-line error."""
    pytest.importorskip("distributed")
    import logging
    import socket
    import subprocess
    import sys

    from sfapprox._dask import close, connect

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = connect(f"tcp://127.0.0.1:{port}")
    finally:
        scheduler.kill()
        scheduler.wait()
    time.sleep(0.5)  # the client notices, and starts reconnecting
    logged = []

    class Kept(logging.Handler):
        def emit(self, record):
            logged.append(record)

    handler = Kept()
    logging.getLogger("distributed.client").addHandler(handler)  # (dask's own handler writes to stderr)
    try:
        close(client)
    finally:
        logging.getLogger("distributed.client").removeHandler(handler)
    assert not [r for r in logged if r.levelno >= logging.ERROR]


class _HoldsAFile:
    """What a source holding an open file is to pickle (``cannot pickle '_io.BufferedReader' object``; Python
    3.12+: ``cannot pickle 'BufferedReader' instances``)."""

    def __init__(self, path):
        self.fh = open(path, "rb")

    def __repr__(self):
        return "FileSource(n=8)"


def _first(source, x):
    return x


def test_a_shared_object_that_does_not_pickle_is_one_parameter_error(tmp_path, caplog):
    """A source whose attributes hold an open file, run on a Dask cluster or a process pool: a TypeError's
    traceback (dask's "Could not serialize object of type FileSource", above three chained tracebacks it
    logged as an ERROR), not a line saying what could not be sent, and why."""
    import logging
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from sfapprox import ParameterError

    (tmp_path / "x").write_bytes(b"x")
    held = _HoldsAFile(tmp_path / "x")
    refusal = pickle_refusal(held)  # "cannot pickle '_io.BufferedReader' object" before Python 3.12
    try:
        # spawn, as the batch's pool: the default on Linux before Python 3.14 forks this process, whose earlier
        # tests left threads running (a Dask cluster's, the kernels' helpers), and a child forked while one of
        # them held a lock waited for it forever (seen once in three runs of test_kernels + this file, 3.12)
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            with pytest.raises(ParameterError, match=r"^the matrix source cannot be sent to the executor's workers: "
                               rf"it does not pickle \({refusal}\); .*__reduce__"):
                list(ordered_map(pool, _first, [1, 2], shared=[held]))

        class Cluster:  # what _is_dask recognises; its scatter fails as dask's does, logging as it does
            status = "running"

            def scheduler_info(self):
                return {"workers": {"w": {"nthreads": 1}}}

            def scatter(self, objects, **kw):
                import pickle

                try:
                    pickle.dumps(objects[0])
                except TypeError as exc:
                    logging.getLogger("distributed.protocol.pickle").error("Failed to serialize %r.", objects[0],
                                                                          exc_info=True)
                    raise TypeError("Could not serialize object of type _HoldsAFile", repr(objects[0])) from exc

            def submit(self, fn, *args, **kw):  # (the shared objects are sent as tasks of their own)
                return self.scatter(list(args))

        caplog.set_level(logging.DEBUG)
        with pytest.raises(ParameterError, match=r"^the matrix source cannot be sent to the executor's workers "
                           rf"\(object of type _HoldsAFile\): it does not pickle \({refusal}\)") as caught:
            list(ordered_map(Cluster(), _first, [1, 2], shared=[held]))
        assert "\n" not in str(caught.value)
        assert not [r for r in caplog.records if r.name.startswith("distributed")]  # no logged tracebacks
        assert logging.getLogger("distributed.protocol.pickle").level == logging.NOTSET  # as it was
    finally:
        held.fh.close()


def test_a_worker_that_died_under_a_pass_is_said_so_not_a_lost_cluster(monkeypatch):
    """A task that killed its Dask workers each time the scheduler tried it (KilledWorker: over their memory
    limit, or killed) ended compare --scheduler's row with "the Dask cluster was lost ... check that its
    scheduler runs", though the scheduler and the other workers ran on."""
    pytest.importorskip("distributed")
    from distributed.scheduler import KilledWorker

    from sfapprox import ResourceError
    from sfapprox import _executors

    worker = type("WorkerState", (), {"address": "tcp://10.0.0.7:4000"})()
    cluster = _failing_cluster(monkeypatch, lambda: KilledWorker("_product_part-1", worker, 3))
    with pytest.raises(ResourceError) as raised:
        list(_executors.ordered_map(cluster, abs, [1, 2]))
    said = str(raised.value)
    assert said.startswith("a Dask worker died during a pass over the columns: the Dask worker running it died 4 "
                           "times") and "memory" in said and "allowed-failures: 3" in said
    assert "cluster was lost" not in said and "tcp://10.0.0.7:4000" in said
    assert raised.value.transient  # a failed row, not "not applicable" under the memory limit
    # the memory limit in its reader's spelling: a call's max_memory=, a command line's --max-memory (it
    # said "--max-memory (max_memory=: smaller blocks)" to both)
    assert "set a lower max_memory= (smaller blocks)" in said and "--max-memory" not in said
    from sfapprox._errors import spelled_for

    with spelled_for("cli"), pytest.raises(ResourceError) as raised:
        list(_executors.ordered_map(cluster, abs, [1, 2]))
    assert "set a lower --max-memory (smaller blocks)" in str(raised.value)


def _kills_its_workers(X, marker, deaths, home):
    """``ArraySource(X)`` whose first ``deaths`` column reads away from the process ``home`` kill the worker
    reading them (SIGKILL, as the system kills a process over its memory), counted in the file ``marker``."""
    from sfapprox.sources import ArraySource

    class KillsItsWorkers(ArraySource):
        def _columns(self, J):
            import os
            import signal
            from pathlib import Path

            counted = Path(marker)
            died = int(counted.read_text()) if counted.exists() else 0
            if os.getpid() != home and died < deaths:
                counted.write_text(str(died + 1))
                os.kill(os.getpid(), signal.SIGKILL)
            return super()._columns(J)

    return KillsItsWorkers(X)


def _within(seconds: float, call, what: str):
    """``call()``'s result, or the test failed with ``what`` when it has not returned within ``seconds`` (it goes
    on in a daemon thread: a Dask wait ends once its client is closed)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"{what}: not done within {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def test_a_pass_whose_worker_died_is_retried_on_another_worker(tmp_path):
    """A worker killed under a column block (its memory), then the one the block was retried on: the pass was
    cancelled ("the Dask cluster was lost ... already forgotten") after two deaths of the three retries Dask
    allows, for the source had been scattered, and scattered data is lost with the last worker holding it."""
    distributed = pytest.importorskip("distributed")
    import os

    from sfapprox.sources import ArraySource
    from sfapprox.sources._base import _product_part

    X = np.random.default_rng(0).standard_normal((120, 120))
    B = np.random.default_rng(1).standard_normal((120, 3))
    local = ArraySource(X)
    source = _kills_its_workers(X, tmp_path / "deaths", 2, os.getpid())
    tasks = [(J, B[J]) for J in np.array_split(np.arange(120), 4)]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        # distributed before 2024.6.1 (pyproject's dask extra asks for it) waited here for good, now and then:
        # blocks queued behind the shared source stayed queued once its data was lost with its worker
        # (dask/distributed#8703); a failure, not a hung run, where an older one is installed
        parts = _within(120, lambda: list(ordered_map(client, _product_part, tasks, (source,))),
                        f"the pass still waited after its workers died, with distributed {distributed.__version__}")
    assert (tmp_path / "deaths").read_text() == "2"
    assert np.array_equal(sum(parts), sum(_product_part(local, task) for task in tasks))


@pytest.mark.parametrize("graph", ["_MapExpr", "HighLevelGraph"])
def test_a_refusal_to_pickle_names_no_graph_of_dask(graph):
    """dask names what it could not serialize: the graph that holds a task's arguments, where the user's object
    inside it is what refused.  distributed 2024.6.1 (the lowest pyproject allows) names a ``HighLevelGraph``,
    which the batch's one-line error said as the object that does not pickle; later ones a ``_MapExpr``."""
    from sfapprox._executors import not_picklable

    try:
        try:
            raise TypeError("cannot pickle '_io.TextIOWrapper' object")
        except TypeError as refused:
            raise TypeError(f"Could not serialize object of type {graph}") from refused
    except TypeError as exc:
        said = str(not_picklable(exc, "the batch's matrices"))
    assert said.startswith("the batch's matrices cannot be sent to the executor's workers: it does not pickle "
                           "(TypeError: cannot pickle '_io.TextIOWrapper' object)"), said


@pytest.mark.parametrize("executor, said", [(5, "got int"), ("process", "got str 'process'"), (object(), "got object")])
def test_an_executor_that_cannot_run_tasks_is_refused_before_any_work(executor, said):
    """compare(K, ..., executor=5) of a matrix compared from its columns was "'int' object has no attribute
    'submit'" from deep inside a pass (a formed matrix ignored it); estimate_errors and DistributedSource alike."""
    import sfapprox
    from sfapprox import ParameterError
    from sfapprox.sources import DistributedSource

    K = sfapprox.KernelMatrix(np.random.default_rng(0).standard_normal((3000, 3)))
    match = rf"^executor must be a concurrent.futures pool .* or a dask.distributed Client, {said}$"
    for call in (lambda: sfapprox.compare(K, "nystrom,sparse", max_memory="60M", executor=executor, budget=0.01),
                 lambda: sfapprox.compare(np.eye(4), "tsvd", executor=executor),
                 lambda: sfapprox.estimate_errors(K, {}, executor=executor),
                 lambda: DistributedSource(K, executor)):
        with pytest.raises(ParameterError, match=match):
            call()


def test_a_distributed_source_needs_a_source_and_an_executor():
    from sfapprox import ParameterError
    from sfapprox.sources import ArraySource, DistributedSource

    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(ParameterError, match=r"source must be a MatrixSource .*as_source\(X\)\), got ndarray"):
            DistributedSource(np.eye(3), pool)
    with pytest.raises(ParameterError, match="executor must be .*, got None"):
        DistributedSource(ArraySource(np.eye(3)), None)
