"""The memory and CPUs this process may use: the host's, and a cgroup's limits (fake trees under tmp_path)."""

from __future__ import annotations

import sys

import pytest

from sfapprox import _resources as R

GIB = 1 << 30
#: What cgroup v1 writes for "no limit" (LONG_MAX rounded down to a 4 KiB page).
V1_NONE = "9223372036854771712"


@pytest.fixture
def host_64g(monkeypatch):
    monkeypatch.setattr(R, "host_memory", lambda: 64 * GIB)


# ------------------------------------------------------------------------------------------------- memory
def test_a_v2_containers_memory_limit_is_the_physical_memory(fake_cgroup, host_64g):
    """docker run --memory 4g on a 64 GB host: 4 GB, not the host's 64 (the OOM killer's limit)."""
    fake_cgroup("0::/system.slice/docker-abc.scope\n",
                {"system.slice/docker-abc.scope/memory.max": str(4 * GIB), "system.slice/memory.max": "max"})
    assert R.cgroup_memory_limit() == 4 * GIB
    assert R.physical_memory() == 4 * GIB


def test_a_parents_limit_applies_and_the_smallest_wins(fake_cgroup, host_64g):
    fake_cgroup("0::/job_7/step_0/task_0\n", {"job_7/memory.max": str(2 * GIB),
                                               "job_7/step_0/memory.max": "max",
                                               "job_7/step_0/task_0/memory.max": "max"})
    assert R.cgroup_memory_limit() == 2 * GIB
    fake_cgroup("0::/job_7/step_0/task_0\n", {"job_7/step_0/task_0/memory.max": str(GIB)})
    assert R.cgroup_memory_limit() == GIB


def test_max_everywhere_or_no_cgroup_is_the_hosts_ram(fake_cgroup, host_64g):
    fake_cgroup("0::/a/b\n", {"a/b/memory.max": "max", "a/memory.max": "max\n"})
    assert R.cgroup_memory_limit() is None and R.physical_memory() == 64 * GIB
    fake_cgroup("0::/\n")  # the files are there no longer read: the process is in the root
    assert R.cgroup_memory_limit() is None
    fake_cgroup("")
    assert R.cgroup_memory_limit() is None and R.physical_memory() == 64 * GIB


def test_a_limit_above_the_hosts_ram_leaves_the_ram(fake_cgroup, host_64g):
    fake_cgroup("0::/big\n", {"big/memory.max": str(128 * GIB)})
    assert R.physical_memory() == 64 * GIB


@pytest.mark.parametrize("content", ["lots", "", "-5", "0", "4G", "12 34", b"\xff\xfe\x00", "1e9"])
def test_garbage_in_a_limit_file_is_no_limit(fake_cgroup, host_64g, content):
    fake_cgroup("0::/c\n", {"c/memory.max": content})
    assert R.cgroup_memory_limit() is None and R.physical_memory() == 64 * GIB


@pytest.mark.parametrize("proc", ["nonsense", "0::relative/path", "::::", "\x00\x01", "0:/x\n", "7"])
def test_a_malformed_proc_self_cgroup_is_no_cgroup(fake_cgroup, host_64g, proc):
    fake_cgroup(proc, {"x/memory.max": str(GIB), "relative/path/memory.max": str(GIB)})
    assert R.cgroup_memory_limit() is None


def test_a_refused_or_unreadable_file_is_no_limit(fake_cgroup, host_64g, monkeypatch):
    root = fake_cgroup("0::/c/d\n", {"c/memory.max": str(2 * GIB), "c/d/memory.max/inner": "a folder, not a file"})
    assert R.cgroup_memory_limit() == 2 * GIB  # the folder named memory.max is skipped, the parent read
    real_open = open

    def refuse(path, *args, **kwargs):
        if str(path) == str(root / "c" / "memory.max"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(R, "open", refuse, raising=False)
    assert R.cgroup_memory_limit() is None and R.physical_memory() == 64 * GIB

    def refuse_all(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(R, "open", refuse_all, raising=False)  # /proc/self/cgroup too
    assert R.cgroup_memory_limit() is None and R.physical_memory() == 64 * GIB


def test_v1_memory_limit_under_the_controllers_mount(fake_cgroup, host_64g):
    """Docker on cgroup v1: /proc/self/cgroup names the host's path, the mount is the container's own cgroup."""
    proc = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"
    fake_cgroup(proc, {"memory/memory.limit_in_bytes": str(3 * GIB)})
    assert R.cgroup_memory_limit() == 3 * GIB and R.physical_memory() == 3 * GIB
    # where the path is there (a host's view), a parent's limit applies too
    fake_cgroup(proc, {"memory/docker/abc/memory.limit_in_bytes": V1_NONE,
                       "memory/docker/memory.limit_in_bytes": str(GIB), "memory/memory.limit_in_bytes": V1_NONE})
    assert R.cgroup_memory_limit() == GIB


def test_v1_no_limit_is_its_huge_number(fake_cgroup, host_64g):
    fake_cgroup("9:memory:/user/1000\n", {"memory/user/1000/memory.limit_in_bytes": V1_NONE,
                                          "memory/memory.limit_in_bytes": V1_NONE})
    assert R.cgroup_memory_limit() is None and R.physical_memory() == 64 * GIB


def test_a_path_outside_the_namespace_reads_the_root_alone(fake_cgroup, host_64g, tmp_path):
    """A cgroup namespace shows a cgroup outside its root as /../..: no folder outside the mount is read."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "memory.max").write_text(str(GIB))
    fake_cgroup("0::/../elsewhere\n", {"memory.max": str(3 * GIB)})
    assert R.cgroup_memory_limit() == 3 * GIB


def test_off_linux_no_cgroup_is_read(fake_cgroup, host_64g, monkeypatch):
    fake_cgroup("0::/c\n", {"c/memory.max": str(GIB), "c/cpu.max": "100000 100000"})
    monkeypatch.setattr(sys, "platform", "darwin")
    assert R.cgroup_memory_limit() is None and R.cgroup_cpu_limit() is None and R.physical_memory() == 64 * GIB


def test_a_limit_alone_where_the_host_does_not_tell_its_ram(fake_cgroup, monkeypatch):
    monkeypatch.setattr(R, "host_memory", lambda: None)
    fake_cgroup("0::/c\n", {"c/memory.max": str(GIB)})
    assert R.physical_memory() == GIB
    fake_cgroup("0::/c\n", {"c/memory.max": "max"})
    assert R.physical_memory() is None


# --------------------------------------------------------------------------------------------------- CPUs
@pytest.mark.parametrize("cpu_max, cpus", [("200000 100000", 2), ("150000 100000", 2), ("50000 100000", 1),
                                           ("400000 100000\n", 4), ("100000 50000", 2)])
def test_a_v2_cpu_quota_in_cpus_rounded_up(fake_cgroup, cpu_max, cpus):
    fake_cgroup("0::/kubepods/pod1/ctr\n", {"kubepods/pod1/ctr/cpu.max": cpu_max})
    assert R.cgroup_cpu_limit() == cpus


def test_the_smallest_quota_along_the_path(fake_cgroup):
    fake_cgroup("0::/kubepods/pod1/ctr\n", {"kubepods/pod1/ctr/cpu.max": "max 100000",
                                            "kubepods/pod1/cpu.max": "300000 100000",
                                            "kubepods/cpu.max": "800000 100000"})
    assert R.cgroup_cpu_limit() == 3


@pytest.mark.parametrize("cpu_max", ["max 100000", "max", "200000", "a b", "0 100000", "200000 0",
                                     "-1 100000", "1 2 3", "", b"\xff"])
def test_no_or_a_malformed_cpu_quota_is_none(fake_cgroup, cpu_max):
    fake_cgroup("0::/c\n", {"c/cpu.max": cpu_max})
    assert R.cgroup_cpu_limit() is None


def test_a_v1_cfs_quota(fake_cgroup):
    proc = "5:cpu,cpuacct:/docker/abc\n9:memory:/docker/abc\n"
    fake_cgroup(proc, {"cpu,cpuacct/cpu.cfs_quota_us": "300000", "cpu,cpuacct/cpu.cfs_period_us": "100000"})
    assert R.cgroup_cpu_limit() == 3


@pytest.mark.parametrize("quota, period", [("-1", "100000"), ("200000", None), ("200000", "x"), ("", "100000")])
def test_v1_no_quota_or_a_missing_period_is_none(fake_cgroup, quota, period):
    files = {"cpu/cpu.cfs_quota_us": quota}
    if period is not None:
        files["cpu/cpu.cfs_period_us"] = period
    fake_cgroup("3:cpu:/\n", files)
    assert R.cgroup_cpu_limit() is None


# ------------------------------------------------------------------------------------- v2's memory.high
def test_v2_memory_high_is_a_limit_and_the_smaller_wins(fake_cgroup, host_64g):
    """memory.high is the throttle point: past it the kernel reclaims until the process crawls."""
    fake_cgroup("0::/user.slice/run-1.scope\n", {"user.slice/run-1.scope/memory.max": "max",
                                                 "user.slice/run-1.scope/memory.high": str(3 * GIB)})
    assert R.cgroup_memory_limit() == 3 * GIB and R.physical_memory() == 3 * GIB
    fake_cgroup("0::/user.slice/run-1.scope\n", {"user.slice/run-1.scope/memory.max": str(2 * GIB)})
    assert R.cgroup_memory_limit() == 2 * GIB  # max below high: max
    fake_cgroup("0::/user.slice/run-1.scope\n", {"user.slice/memory.high": str(GIB)})
    assert R.cgroup_memory_limit() == GIB  # a parent's high applies as its max does


@pytest.mark.parametrize("high", ["max", "junk", ""])
def test_no_memory_high_leaves_memory_max(fake_cgroup, host_64g, high):
    fake_cgroup("0::/c\n", {"c/memory.max": str(5 * GIB), "c/memory.high": high})
    assert R.cgroup_memory_limit() == 5 * GIB


# ------------------------------------------------------------------ where mountinfo says hierarchies are
#: mountinfo lines as the kernel writes them: v1 controllers mounted in folders of their own names under
#: {root} (the fake tree), co-mounted cpu,cpuacct, and a named (controller-less) hierarchy.
def _mountinfo(*lines: str) -> str:
    head = "25 30 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n"  # not a cgroup: skipped
    return head + "".join(f"{30 + i} 25 0:{40 + i} {line}\n" for i, line in enumerate(lines))


def test_a_v1_controller_mounted_elsewhere_is_found_by_mountinfo(fake_cgroup, host_64g):
    """Controllers mounted under other names (here /cgroup/mem and a co-mounted /cgroup/cpu_acct): the usual
    /sys/fs/cgroup/memory and /sys/fs/cgroup/cpu hold nothing, and the limits were missed."""
    info = _mountinfo("/ {root}/cgroup/mem rw,relatime shared:9 - cgroup cgroup rw,memory",
                      "/ {root}/cgroup/cpu_acct rw,relatime - cgroup cgroup rw,cpuacct,cpu",
                      "/ {root}/cgroup/sd rw - cgroup cgroup rw,xattr,name=systemd")
    proc = "9:memory:/slurm/job_5\n4:cpu,cpuacct:/slurm/job_5\n1:name=systemd:/x\n"
    fake_cgroup(proc, {"cgroup/mem/slurm/job_5/memory.limit_in_bytes": str(6 * GIB),
                       "cgroup/cpu_acct/slurm/cpu.cfs_quota_us": "400000",
                       "cgroup/cpu_acct/slurm/cpu.cfs_period_us": "100000",
                       # where the old code looked: mountinfo says no hierarchy is mounted there, so never read
                       "memory/slurm/job_5/memory.limit_in_bytes": str(GIB)}, mountinfo=info)
    assert R.cgroup_memory_limit() == 6 * GIB and R.physical_memory() == 6 * GIB
    assert R.cgroup_cpu_limit() == 4


def test_a_mounts_root_is_taken_off_the_cgroup_path(fake_cgroup, host_64g):
    """Docker on v1 without a cgroup namespace: the mount shows the container's cgroup (root /docker/abc) at
    the mount point, while /proc/self/cgroup names /docker/abc/sub: read <mount>/sub, then <mount>."""
    info = _mountinfo("/docker/abc {root}/memory ro,nosuid master:12 - cgroup cgroup rw,memory",
                      "/docker/abc {root}/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct")
    fake_cgroup("12:memory:/docker/abc/sub\n4:cpu,cpuacct:/docker/abc/sub\n",
                {"memory/sub/memory.limit_in_bytes": V1_NONE, "memory/memory.limit_in_bytes": str(3 * GIB),
                 "memory/docker/abc/sub/memory.limit_in_bytes": str(GIB),  # (a folder of that name: not this cgroup)
                 "cpu,cpuacct/cpu.cfs_quota_us": "200000", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
                mountinfo=info)
    assert R.cgroup_memory_limit() == 3 * GIB
    assert R.cgroup_cpu_limit() == 2


def test_v2_beside_v1_in_its_unified_folder_and_an_escaped_mount_point(fake_cgroup, host_64g):
    """A hybrid host mounts v2 at /sys/fs/cgroup/unified; a mount point's space is written as \\040."""
    info = _mountinfo("/ {root}/uni\\040fied rw - cgroup2 cgroup2 rw,nsdelegate",
                      "/ {root}/memory rw - cgroup cgroup rw,memory")
    fake_cgroup("0::/app.slice/x.service\n9:memory:/\n",
                {"uni fied/app.slice/x.service/memory.max": str(2 * GIB), "uni fied/app.slice/cpu.max": "100000 100000",
                 "memory.max": str(GIB)},  # the tree's top is no hierarchy here: never read
                mountinfo=info)
    assert R.cgroup_memory_limit() == 2 * GIB and R.cgroup_cpu_limit() == 1


@pytest.mark.parametrize("info", [b"garbage\n", b"1 2 3\n- - -\n", b"\xff\xfe\x00 - cgroup2\n",
                                  b"30 25 0:40 / /x rw - cgroup2\n",  # cut before its source and options
                                  b"30 25 0:40 relative relative rw - cgroup2 cgroup2 rw\n", b""])
def test_a_malformed_mountinfo_falls_back_to_the_usual_folders(fake_cgroup, host_64g, info):
    fake_cgroup("0::/c\n", {"c/memory.max": str(GIB)}, mountinfo=info)
    assert R.cgroup_memory_limit() == GIB


def test_an_unreadable_mountinfo_falls_back_to_the_usual_folders(fake_cgroup, host_64g, monkeypatch, tmp_path):
    fake_cgroup("0::/c\n", {"c/memory.max": str(GIB)})
    monkeypatch.setattr(R, "PROC_MOUNTINFO", str(tmp_path / "missing"))
    assert R.cgroup_memory_limit() == GIB
    monkeypatch.setattr(R, "PROC_MOUNTINFO", str(tmp_path))  # a folder: IsADirectoryError
    assert R.cgroup_memory_limit() == GIB


def test_a_mountinfo_cut_at_the_read_limit_drops_its_last_line(fake_cgroup, host_64g, monkeypatch):
    """Its last line, cut at "rw,cpu" of "rw,cpuset", would have read the cpuset hierarchy as the cpu one."""
    line = "/ {root}/cpuset rw - cgroup cgroup rw,cpuset\n"
    info = _mountinfo("/ {root}/cpu rw - cgroup cgroup rw,cpu", "/ {root}/memory rw - cgroup cgroup rw,memory",
                      line.rstrip("\n"))
    root = fake_cgroup("3:cpu:/\n", {"cpuset/cpu.cfs_quota_us": "100000", "cpuset/cpu.cfs_period_us": "100000"},
                       mountinfo=info)
    data = info.replace("{root}", str(root)).encode()
    monkeypatch.setattr(R, "_MOUNTINFO_MAX", len(data) - len("set"))  # ends "... rw,cpu"
    assert R.cgroup_cpu_limit() is None
    monkeypatch.setattr(R, "_MOUNTINFO_MAX", 1 << 22)
    assert R.cgroup_cpu_limit() is None  # whole: cpuset is not cpu either


def test_reading_mountinfo_holds_about_the_file_not_its_read_limit(fake_cgroup, host_64g):
    """A read of the whole limit at once allocated its 4 MiB for a file of a few hundred bytes, on every
    default memory limit asked for (a sparse selection's traced peak, checked against its working memory,
    grew by it)."""
    import tracemalloc

    fake_cgroup("0::/\n", {"memory.max": str(GIB)}, mountinfo=_mountinfo("/ {root} rw - cgroup2 cgroup2 rw"))
    tracemalloc.start()
    try:
        assert R.cgroup_memory_limit() == GIB
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < R._MOUNTINFO_MAX // 16
