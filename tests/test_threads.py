import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from sfapprox import ChordSF, ParameterError
from sfapprox import _threads as T
from sfapprox.baselines._torch import SMALL_N, few_threads


def test_small_work_runs_on_one_thread():
    assert T.choose_threads(64 * 64, cores=2) == 1
    assert T.choose_threads(T.PARALLEL_MIN_WORK, cores=16) == 1
    assert T.choose_threads(10**9, cores=1) == 1


def test_large_work_uses_free_cores_only():
    big = 64 * T.WORK_PER_THREAD
    assert T.choose_threads(big, cores=8) == 8
    assert T.choose_threads(big, cores=8, cap=3) == 3
    # Cores that other processes keep busy are left alone (with a quarter core of slack).
    assert T.choose_threads(big, cores=8, free=2.9) == 3
    assert T.choose_threads(big, cores=8, free=2.7) == 2
    assert T.choose_threads(big, cores=2, free=0.2) == 1
    # One thread per WORK_PER_THREAD numbers, never fewer than one.
    assert T.choose_threads(T.PARALLEL_MIN_WORK + 1, cores=8) == (T.PARALLEL_MIN_WORK + 1) // T.WORK_PER_THREAD
    # SF's panels on 2 cores: one thread up to N = 181 (torch's grain), two from N = 195 when free.
    assert T.choose_threads(160 * 160, cores=2) == 1 and T.choose_threads(195 * 195, cores=2) == 2


def test_available_cores_respects_the_affinity_mask():
    cores = T.available_cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert cores <= len(os.sched_getaffinity(0))


def test_torch_threads_sets_and_restores():
    before = torch.get_num_threads()
    with T.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError):
        with T.torch_threads(1):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with T.torch_threads(None):
        assert torch.get_num_threads() == before


def test_adaptive_threads_small_work_and_forced_count():
    before = torch.get_num_threads()
    with T.AdaptiveThreads(100) as gov:
        assert torch.get_num_threads() == 1 and gov.poll() == 1
    assert gov.used == 1 and torch.get_num_threads() == before
    with T.AdaptiveThreads(100, threads=2) as gov:
        assert torch.get_num_threads() == 2
    assert gov.used == 2 and torch.get_num_threads() == before
    with T.AdaptiveThreads(100, device_type="cuda") as gov:
        assert torch.get_num_threads() == before
    assert gov.used is None


def test_adaptive_threads_for_the_compiled_kernel():
    """compiled=True: the count goes to the compiled kernel, torch stays at one thread; both restored."""
    before = torch.get_num_threads()
    with T.AdaptiveThreads(10**9, threads=2, compiled=True) as gov:
        assert T.compiled_threads() == 2 and torch.get_num_threads() == 1
    assert gov.used == 2 and T.compiled_threads() == 1 and torch.get_num_threads() == before
    with T.AdaptiveThreads(100, compiled=True):  # small work: one thread for the kernel too
        assert T.compiled_threads() == 1


def test_forced_threads_give_the_same_compiled_fit(monkeypatch):
    """From NUMBA_PARALLEL_MIN_N (made small here) the compiled kernel's groups run on the fit's threads;
    the fit is the same, number for number, on one thread or two."""
    from sfapprox.sf import _kernels

    if _kernels.select_kernel(64, "cpu")[1] != "numba":
        pytest.skip("needs numba")
    monkeypatch.setattr(_kernels, "NUMBA_SINGLE_BLOCK_MAX_N", 16)
    monkeypatch.setattr(_kernels, "NUMBA_PANEL", 8)
    monkeypatch.setattr(_kernels, "NUMBA_PARALLEL_MIN_N", 32)
    X = np.random.default_rng(2).random((64, 64))
    fits = [ChordSF(max_iter=40, device="cpu", threads=t, time_limit=None).fit(X) for t in (1, 2)]
    assert fits[1].threads_ == 2 and fits[0].kernel_ == "numba"
    assert np.array_equal(fits[0].factors_, fits[1].factors_)


def test_adaptive_threads_never_exceed_the_current_setting():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # a user (or a batch worker) asked for one thread
        with T.AdaptiveThreads(10**9) as gov:
            assert torch.get_num_threads() == 1
        assert gov.used == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs Linux /proc")
def test_a_busy_process_is_seen_and_avoided():
    """A CPU-bound competitor is counted by runnable_others and takes the core it uses away."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        others = T.runnable_others(samples=5, pause=0.002)
        assert others is not None and others >= 1
        monitor = T.CpuMonitor()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.4:  # this process busy on one core meanwhile
            pass
        free = monitor.free_cores()
        cores = T.available_cores()
        # The competitor uses about a core: what is left for us is at most cores - 0.5.
        assert free is not None and free <= cores - 0.5
    finally:
        proc.kill()
        proc.wait()


def test_cpu_monitor_needs_an_interval():
    monitor = T.CpuMonitor()
    assert monitor.free_cores() is None  # too short to tell (ticks of 10 ms)


def test_chordsf_threads_parameter_and_attribute():
    X = np.random.default_rng(0).random((16, 16))
    before = torch.get_num_threads()
    sf = ChordSF(max_iter=20, device="cpu").fit(X)
    assert sf.threads_ == 1  # small work: one thread
    # The work that decides threads is one kernel operation: a 256-column panel at N = 1024, the
    # whole matrix at N = 64 (whichever kernel runs: compiled, dense or panels).
    from sfapprox.sf import _kernels

    assert _kernels.operation_numbers(1024, "panels") == 1024 * 256 and ChordSF()._work(64, 6) == 64 * 64
    assert ChordSF()._work(1024, 10) == _kernels.operation_numbers(1024, _kernels.select_kernel(1024, "cpu")[1])
    sf = ChordSF(max_iter=20, device="cpu", threads=2).fit(X)
    assert sf.threads_ == 2
    assert torch.get_num_threads() == before
    with pytest.raises(ParameterError, match="'threads' parameter"):
        ChordSF(threads=0).fit(X)


def test_forced_thread_counts_give_the_same_fit():
    X = np.random.default_rng(1).random((20, 20))
    one = ChordSF(max_iter=60, device="cpu", threads=1).fit(X)
    two = ChordSF(max_iter=60, device="cpu", threads=2).fit(X)
    assert two.fro_error_ == pytest.approx(one.fro_error_, rel=1e-6)


def test_baselines_share_the_rule():
    before = torch.get_num_threads()
    with few_threads(SMALL_N, torch.device("cpu")):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with few_threads(SMALL_N, torch.device("cuda")):
        assert torch.get_num_threads() == before
    # Their own threshold: more than one thread only above SMALL_N (when cores are free).
    assert T.choose_threads(SMALL_N * SMALL_N, cores=2, min_work=SMALL_N * SMALL_N) == 1
    assert T.choose_threads((SMALL_N + 1) ** 2, cores=2, min_work=SMALL_N * SMALL_N) == 2


def test_a_forced_count_is_at_most_the_cores(monkeypatch):
    """--threads 1000 on 2 cores started 1,000 torch threads and reported 1000."""
    monkeypatch.setattr(T, "available_cores", lambda: 2)
    before = torch.get_num_threads()
    with T.AdaptiveThreads(10**9, threads=1000) as gov:
        assert torch.get_num_threads() == 2
    assert gov.used == 2 and torch.get_num_threads() == before


def _in_fresh_process(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_blas_controller_made_before_numpy_loaded_finds_its_blas_later():
    # One made before numpy loaded OpenBLAS held no library and was kept: the pools went unlimited for the
    # rest of the process.
    code = ("import sys\nfrom sfapprox import _threads as T\nassert 'numpy' not in sys.modules\n"
            "first = T._blas()\nimport numpy\nprint(first is None, T._blas() is not None)")
    assert _in_fresh_process(code) == "True True"


def test_a_block_of_numpy_alone_limits_the_blas_pools_and_imports_no_torch():
    code = ("import sys\nimport numpy\nfrom sfapprox import _threads as T\nbefore = T._blas_threads()\n"
            "with T.AdaptiveThreads(10**9, threads=1, torch=False) as gov:\n    inside = T._blas_threads()\n"
            "print(inside, T._blas_threads() == before, gov.used, 'torch' in sys.modules)")
    assert _in_fresh_process(code) == "1 True 1 False"


def test_a_numpy_block_is_capped_at_the_physical_cores_as_torch_s_default_is(tmp_path):
    """Without torch loaded, the cap of a numpy-only block (Nystrom, rsvd) was the BLAS pools' count:
    OpenBLAS's one thread per logical CPU, every hyper-thread, where torch's default count (the cap when it
    was loaded) is the physical cores.  Two CPUs that are one core's two threads: a cap of 1."""
    for cpu in (0, 1):
        (tmp_path / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text("0-1\n")
    code = ("import os, sys\nimport numpy\nfrom sfapprox import _threads as T\n"
            "os.sched_setaffinity(0, {0, 1})\nT.available_cores = lambda: 2\n"
            "T._blas_threads = lambda: 2\nT._limit_blas = lambda n: None\n"
            f"T._CPU_TOPOLOGY = {str(tmp_path)!r}\n"
            "with T.AdaptiveThreads(10**12, torch=False) as gov:\n    pass\n"
            "os.environ['OMP_NUM_THREADS'] = '2'\n"
            "with T.AdaptiveThreads(10**12, torch=False) as set_by_user:\n    pass\n"
            "print(T.physical_cores(), gov._cap, set_by_user._cap, 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "2", "False"]


def test_a_cpu_quota_on_the_processs_own_cgroup_or_a_parent_caps_the_cores(fake_cgroup, monkeypatch):
    """A Kubernetes pod or a Slurm job without a cgroup namespace: the quota is on its own cgroup or a parent,
    where only the mount's root was read, so a fit started a thread per host core on 2 CPUs' worth of time."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)), raising=False)
    fake_cgroup("0::/kubepods/pod1/ctr\n", {"kubepods/pod1/cpu.max": "200000 100000",
                                            "kubepods/pod1/ctr/cpu.max": "max 100000"})
    assert T.available_cores() == 2
    before = torch.get_num_threads()
    with T.AdaptiveThreads(10**9, threads=8) as gov:  # --threads forces a count, within the quota
        assert torch.get_num_threads() == 2
    assert gov.used == 2 and torch.get_num_threads() == before
    fake_cgroup("4:cpu,cpuacct:/slurm/uid_1/job_9\n", {"cpu,cpuacct/slurm/uid_1/job_9/cpu.cfs_quota_us": "300000",
                                                       "cpu,cpuacct/slurm/uid_1/job_9/cpu.cfs_period_us": "100000"})
    assert T.available_cores() == 3
    fake_cgroup("0::/kubepods/pod1/ctr\n", {"kubepods/pod1/cpu.max": "max 100000"})
    assert T.available_cores() == 32
