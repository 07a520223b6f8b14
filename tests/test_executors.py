"""Tasks on an executor: results in the items' order, a bounded number in flight, the rest cancelled on a stop."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

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
