"""How many CPU threads torch uses: chosen from the size of the work and the cores that are free.

torch splits a CPU operation across its intra-op threads (OpenMP), and every
operation waits for its slowest thread.  When another process keeps a core
busy, the OS deschedules one of those threads and each operation waits for a
scheduler time slice — milliseconds instead of microseconds.  With torch's
default of one thread per core, a fit of a 24 x 24 matrix on a 2-core machine
beside one CPU-bound process made 11 iterations in 3 s instead of 2,611 on one
thread.  So:

* one thread where the operations are small: splitting them cannot pay for
  the synchronisation (:func:`choose_threads`, a pure function of the work
  size and the cores);
* more threads only on cores that are free now — cores this process may use
  (affinity mask and cgroup CPU quota, :func:`available_cores`) that the rest
  of the machine leaves idle (:class:`CpuMonitor`, from ``/proc/stat``);
* and, during a long fit, the choice is revisited every second or so
  (:class:`AdaptiveThreads`), since competing work comes and goes.

:func:`torch_threads` sets torch's intra-op thread count and restores it.  Both
also limit the BLAS pools of numpy and scipy (through threadpoolctl), which run
inside the fits too (SF's dense small-N kernel, the baselines' SVDs) and
collapse in the same way.
Everything here is a no-op off Linux's ``/proc`` (the monitor then reports
nothing and the work-size rule alone decides).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator

from ._resources import cgroup_cpu_limit

__all__ = [
    "PARALLEL_MIN_WORK",
    "WORK_PER_THREAD",
    "available_cores",
    "choose_threads",
    "threads_free_now",
    "torch_threads",
    "runnable_others",
    "CpuMonitor",
    "AdaptiveThreads",
    "compiled_threads",
]

#: Operations on at most this many numbers run on one thread: torch does not
#: split a CPU operation below 32768 elements (its grain size), so a second
#: thread gains nothing there even on an idle machine, and costs a time slice
#: per parallel operation on a busy one.  Measured with SF's column panels on
#: 2 cores: 1.0x at N = 113..160, 1.3x at N = 195..256, 1.5x at 512..1024,
#: 1.75x at 2048 (``N x N`` blocks up to N = 448, ``N x 256`` above).
PARALLEL_MIN_WORK = 1 << 15
#: Numbers per operation each further thread needs to pay for itself.
WORK_PER_THREAD = 1 << 14


def available_cores() -> int:
    """Cores this process may run on: its affinity mask, capped by its cgroup's CPU quota.

    ``os.cpu_count()`` counts the machine's cores, which a container or
    ``taskset`` may not grant; a quota (a container's ``--cpus 2``, a job's
    CPU limit) grants their time only in part, rounded up here
    (:func:`~sfapprox._resources.cgroup_cpu_limit`): more threads than that are throttled.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_limit()
    if quota is not None:
        cores = min(cores, quota)
    return max(1, cores)


def choose_threads(work: float, cores: int, free: float | None = None, cap: int | None = None,
                   min_work: float = PARALLEL_MIN_WORK) -> int:
    """Intra-op threads for operations on ``work`` numbers each.

    Parameters
    ----------
    work : float
        Numbers one operation touches (an SF kernel's block: ``N x`` block width).
    cores : int
        Cores this process may use (:func:`available_cores`).
    free : float or None
        Cores the rest of the machine leaves to this process right now (its own
        use plus the idle ones, :meth:`CpuMonitor.free_cores`); None: unknown,
        the work size alone decides.
    cap : int or None
        Never more than this (e.g. the thread count a user or a batch worker set).
    min_work : float
        Work up to which one thread is used (:data:`PARALLEL_MIN_WORK`; a
        caller whose operations gain from threads only when larger, like the
        baselines' iterations, passes its own measured figure).

    Returns
    -------
    int
        1 for small work; otherwise one thread per :data:`WORK_PER_THREAD`
        numbers, at most ``cores``, ``cap`` and the free cores (rounded down,
        with a quarter-core slack for measurement noise).

    Examples
    --------
    >>> choose_threads(64 * 64, cores=2)
    1
    >>> choose_threads(2048 * 256, cores=2)
    2
    >>> choose_threads(2048 * 256, cores=2, free=1.1)
    1
    """
    if work <= min_work or cores <= 1:
        return 1
    threads = min(cores, max(1, int(work // WORK_PER_THREAD)))
    if cap is not None:
        threads = min(threads, cap)
    if free is not None:
        threads = min(threads, math.floor(free + 0.25))
    return max(1, threads)


def threads_free_now(work: float, cores: int, cap: int | None = None, min_work: float = PARALLEL_MIN_WORK) -> int:
    """:func:`choose_threads` on the cores free right now: more than one only on cores that no
    other process wants (:func:`runnable_others`, asked only when the work is worth a second thread).

    Examples
    --------
    >>> threads_free_now(64 * 64, cores=2)
    1
    """
    threads = choose_threads(work, cores, cap=cap, min_work=min_work)
    if threads > 1:
        others = runnable_others()
        threads = choose_threads(work, cores, None if others is None else float(cores - others), cap, min_work)
    return threads


_CONTROLLER: object = None

#: Threads the compiled (numba) fitting kernel may use now: set by an :class:`AdaptiveThreads`
#: with ``compiled=True`` for the time of a fit, 1 anywhere else.
_COMPILED_THREADS = 1


def compiled_threads() -> int:
    """Threads the compiled fitting kernel may use now (see :class:`AdaptiveThreads`'s ``compiled``).

    Returns
    -------
    int
        At least 1.
    """
    return _COMPILED_THREADS


def _blas():
    """threadpoolctl's controller of the BLAS libraries loaded (numpy's, scipy's), made once; None without it."""
    global _CONTROLLER
    # (made again while it finds no library: one made before numpy loaded its BLAS is empty, and was kept,
    # so the pools went unlimited for the rest of the process)
    if _CONTROLLER is None or (_CONTROLLER is not False and not _CONTROLLER.lib_controllers):
        try:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER = ThreadpoolController()
        except (ImportError, OSError, RuntimeError, ValueError):  # not installed or an unusual platform
            _CONTROLLER = False
    return _CONTROLLER or None


def _torch_module():
    """torch (imported here, not at the top: this module is imported by commands that never run it)."""
    import torch

    return torch


def _blas_threads() -> int:
    """The BLAS pools' thread count (the largest of them: an ``OMP_NUM_THREADS`` or a batch worker's
    setting), or the cores this process may use where threadpoolctl cannot tell."""
    controller = _blas()
    counts = [lib.num_threads for lib in controller.select(user_api="blas").lib_controllers] if controller else []
    return max(counts) if counts else available_cores()


#: Where Linux tells which logical CPUs share a core (hyper-threads).
_CPU_TOPOLOGY = "/sys/devices/system/cpu"


def physical_cores() -> int:
    """Cores (not hyper-threads) among the CPUs this process may run on: distinct sibling sets of
    Linux's CPU topology; :func:`available_cores` where it cannot be read (another system)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        siblings = set()
        for cpu in cpus:
            with open(f"{_CPU_TOPOLOGY}/cpu{cpu}/topology/thread_siblings_list") as fh:
                siblings.add(fh.read().strip())
    except (AttributeError, OSError):
        return available_cores()
    return max(1, min(len(siblings), available_cores()))


def _numpy_cap(blas: int) -> int:
    """The most threads a numpy-only block (no torch loaded) may use: the BLAS pools' count, and, where
    no ``OMP_NUM_THREADS`` set it, at most the physical cores, as torch's own default count is (OpenBLAS
    starts one thread per logical CPU: with torch no longer loaded for Nystrom and rsvd, their cap was
    every hyper-thread where it had been the cores)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return blas
    return min(blas, physical_cores())


def _limit_blas(threads: int):
    """Limit the BLAS pools (numpy's OpenBLAS, ...) to ``threads``; returns an object that restores them."""
    controller = _blas()
    if controller is None:
        return None
    return controller.limit(limits=threads, user_api="blas")


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` threads for torch's kernels and the BLAS pools; restore them after.

    The BLAS pools (numpy's and scipy's OpenBLAS, through threadpoolctl) are
    limited too: numpy's matrix products and solves run inside the fits and
    collapse in the same way.  ``None`` leaves the settings alone.
    """
    import torch

    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    blas = _limit_blas(threads)
    try:
        yield
    finally:
        if blas is not None:
            blas.restore_original_limits()
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def runnable_others(samples: int = 5, pause: float = 0.002) -> int | None:
    """Processes (threads) of others that want a CPU right now; None where ``/proc`` is absent.

    ``/proc/loadavg``'s runnable count minus this process's own running
    threads, the least over a few samples ``pause`` seconds apart: a CPU-bound
    competitor is runnable in every sample, a short-lived one is not.
    """
    least: int | None = None
    for i in range(samples):
        if i:
            time.sleep(pause)
        try:
            with open("/proc/loadavg") as fh:
                runnable = int(fh.read().split()[3].split("/")[0])
            own = 0
            for tid in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{tid}/stat") as fh:
                    stat = fh.read()
                own += stat[stat.rfind(")") + 2] == "R"
        except (OSError, ValueError, IndexError):
            return None
        others = max(0, runnable - own)
        least = others if least is None else min(least, others)
    return least


class CpuMonitor:
    """Free cores over the last interval: this process's CPU use plus the idle time of its cores.

    Reads ``/proc/stat`` (idle time of each CPU in the affinity mask) and
    ``os.times()`` (this process's CPU time) at each :meth:`free_cores` call;
    the figure is the average since the previous call.  A CPU-bound competitor
    shows as a core neither idle nor used by us.
    """

    def __init__(self) -> None:
        try:
            self._cpus: set[str] | None = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        except (AttributeError, OSError):
            self._cpus = None
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as fh:
                lines = fh.readlines()
        except OSError:
            return None
        idle = 0.0
        for line in lines:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            fields = line.split()
            if self._cpus is not None and fields[0] not in self._cpus:
                continue
            idle += float(fields[4]) + float(fields[5])  # idle + iowait, in clock ticks
        t = os.times()
        return time.perf_counter(), idle / self._ticks, t.user + t.system

    def free_cores(self) -> float | None:
        """Cores this process could use since the previous call (its own use + idle); None if unknown."""
        now = self._sample()
        last, self._last = self._last, now
        if now is None or last is None:
            return None
        wall = now[0] - last[0]
        if wall < 0.2:  # /proc/stat counts in ticks of 10 ms: too short to tell
            return None
        return max(0.0, (now[1] - last[1]) + (now[2] - last[2])) / wall


class AdaptiveThreads:
    """Context manager: torch's thread count from the work size and the free cores, revisited while it runs.

    ``threads`` forces a count (no adaptation).  Otherwise the block starts
    on ``choose_threads(work, cores, free, cap)`` threads, with ``cap`` torch's
    current setting (a user's or a batch worker's choice is never exceeded)
    and ``free`` the cores not wanted by other processes right now
    (:func:`runnable_others`); :meth:`poll` (a clock read unless ``interval``
    seconds have passed) re-measures the free cores over the last interval
    (:class:`CpuMonitor`) and changes the count: a fit drops to one thread
    when another process starts, and goes back up when it ends.  ``used`` is
    the count that ran longest; the previous setting is restored on exit.

    With ``compiled=True`` the count goes to the compiled fitting kernel
    (:func:`compiled_threads`) and torch and the BLAS pools are held at one
    thread: between the kernel's calls they run only the optimizer's vector
    work, and their idle threads would spin on the cores the kernel's threads
    need (measured at N = 1,024: 26 iterations/s with both at 2 threads, 34 with
    everything on one).

    Parameters
    ----------
    work : float
        Numbers one kernel operation touches (see :func:`choose_threads`).
    threads : int or None, default=None
        Force this count (no adaptation), at most :func:`available_cores`.
    interval : float, default=1.0
        Seconds between re-measurements of the free cores.
    device_type : str, default="cpu"
        Off the CPU nothing is changed.
    min_work : float, default=PARALLEL_MIN_WORK
        Work up to which one thread is used.
    compiled : bool, default=False
        The count is the compiled kernel's, not torch's (see above).
    torch : bool, default=True
        The block runs torch: it is imported, and its count set.  False (numpy's
        BLAS alone: randomized SVD, Nyström, a scoring pass): torch's count is
        set only where torch is loaded already; importing it for the block cost
        a small comparison a second or more.  Without torch the cap is the BLAS
        pools' own setting.
    """

    def __init__(self, work: float, *, threads: int | None = None, interval: float = 1.0,
                 device_type: str = "cpu", min_work: float = PARALLEL_MIN_WORK, compiled: bool = False,
                 torch: bool = True) -> None:
        self.work = work
        self.compiled = compiled
        self.uses_torch = torch
        self._torch = None  # the torch module where the block's count goes to it too (on entry)
        self._compiled_before = 1
        self.min_work = min_work
        self.forced = threads
        self.interval = interval
        self.active = device_type == "cpu"
        self.current: int | None = None
        self.seconds: dict[int, float] = {}
        self._before: int | None = None
        self._since = 0.0
        self._checked = 0.0
        self._monitor: CpuMonitor | None = None
        self._cores = 1
        self._cap: int | None = None
        self._blas_restore = None

    # ---------------------------------------------------------------- context
    def __enter__(self) -> "AdaptiveThreads":
        if not self.active:
            return self
        self._torch = _torch_module() if self.uses_torch or "torch" in sys.modules else None
        self._before = self._torch.get_num_threads() if self._torch is not None else _blas_threads()
        self._compiled_before = _COMPILED_THREADS
        if self.forced is not None:
            # at most the cores this process may run on: more threads only wait for each other (torch
            # would start all 1,000 of --threads 1000 on 2 cores)
            self._set(min(self.forced, available_cores()))
            return self
        self._cores = available_cores()
        self._cap = self._before if self._torch is not None else _numpy_cap(self._before)
        if self._choose() > 1:  # worth more than one thread: watched, and only on cores nobody else wants now
            self._monitor = CpuMonitor()
        self._set(threads_free_now(self.work, self._cores, self._cap, self.min_work))
        return self

    def __exit__(self, *exc) -> None:
        torch = self._torch
        if not self.active or self._before is None:
            return
        global _COMPILED_THREADS
        self._account()
        _COMPILED_THREADS = self._compiled_before
        if self._blas_restore is not None:
            self._blas_restore.restore_original_limits()
            self._blas_restore = None
        if torch is not None and torch.get_num_threads() != self._before:
            torch.set_num_threads(self._before)

    # ------------------------------------------------------------------ use
    def poll(self) -> int | None:
        """Revisit the thread count if ``interval`` seconds have passed; returns the count in use."""
        if self._monitor is None:
            return self.current
        now = time.perf_counter()
        if now - self._checked < self.interval:
            return self.current
        self._checked = now
        free = self._monitor.free_cores()
        if free is not None:
            want = self._choose(free)
            if want != self.current:
                self._set(want)
        return self.current

    @property
    def used(self) -> int | None:
        """The thread count that ran longest (None off the CPU)."""
        if not self.active:
            return None
        self._account()
        return max(self.seconds, key=self.seconds.get) if self.seconds else self.current

    # ------------------------------------------------------------- helpers
    def _choose(self, free: float | None = None) -> int:
        return choose_threads(self.work, self._cores, free=free, cap=self._cap, min_work=self.min_work)

    def _set(self, threads: int) -> None:
        global _COMPILED_THREADS
        torch = self._torch
        self._account()
        if self.compiled:
            _COMPILED_THREADS = threads
            library = 1  # torch and BLAS: one thread beside the kernel's (see the class docstring)
        else:
            library = threads
        if torch is not None and torch.get_num_threads() != library:
            torch.set_num_threads(library)
        if self.current is None or (not self.compiled and threads != self.current):
            limiter = _limit_blas(library)
            if self._blas_restore is None:
                self._blas_restore = limiter  # restores the settings found on entry
        self.current = threads
        self._checked = time.perf_counter()

    def _account(self) -> None:
        now = time.perf_counter()
        if self.current is not None:
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self._since
        self._since = now
