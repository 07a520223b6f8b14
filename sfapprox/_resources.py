"""The resources this process may use: its memory and CPUs, as the host has them and a cgroup limits them.

In a container (Docker, Kubernetes), a CI runner or a Slurm job, the kernel
holds the process to its cgroup's limits, often far below the host's: a
container limited to 4 GB on a 64 GB host is killed by the OOM killer, with
nothing said or saved, once it passes 4 GB, yet ``os.sysconf`` tells 64 GB; and
a quota of 2 CPUs on a 32-core host throttles 32 threads to 2 CPUs' worth of
time, yet ``os.cpu_count()`` and the affinity mask tell 32.  So the memory
default (:func:`physical_memory`) and the thread counts
(:func:`sfapprox._threads.available_cores`) take the smallest of the host's
figure and the cgroup limits:

* cgroup v2: the process's cgroup is ``0::/path`` in ``/proc/self/cgroup``;
  ``memory.max``, ``memory.high`` and ``cpu.max`` are read in ``<root>/path``
  and every parent up to ``<root>`` (a parent's limit applies to its
  children).  ``memory.high`` is no kill but a throttle: above it the kernel
  reclaims so hard that the process crawls, so it is a limit as ``memory.max`` is;
* cgroup v1: ``memory.limit_in_bytes`` under the memory controller's
  hierarchy, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` under the cpu
  controller's, along the controller's path likewise.

Where each hierarchy is mounted is read from ``/proc/self/mountinfo``, as
systemd, psutil and the JVM find it: a v1 controller may be mounted anywhere
and co-mounted with others (``cpu,cpuacct``), v2 may sit beside v1 in
``/sys/fs/cgroup/unified``, and a mount may show only part of its hierarchy
(its root, ``/docker/abc`` in a container), which the process's path is then
read relative to.  Where mountinfo cannot be read or lists no cgroup mount, the
usual places under ``/sys/fs/cgroup`` are read instead.

Inside a container the cgroup file system is usually mounted at the
container's own cgroup while ``/proc/self/cgroup`` names the host's path, which
is then missing under the mount: the walk up to the root reads the
container's limit all the same.  Every read is guarded: a missing file, a
refused read or content that is not a limit counts as no limit, and the host's
figure stands.  Only Linux has cgroups; elsewhere there is nothing to read.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator

__all__ = ["CGROUP_ROOT", "PROC_CGROUP", "PROC_MOUNTINFO", "physical_memory", "host_memory", "cgroup_memory_limit",
           "cgroup_cpu_limit"]

#: Where the cgroup file systems are mounted (v2's alone, or v1's controllers as subfolders).  A module
#: constant so that tests can point it at a fake tree.
CGROUP_ROOT = "/sys/fs/cgroup"
#: Which cgroup this process is in (``hierarchy:controllers:path`` lines).
PROC_CGROUP = "/proc/self/cgroup"
#: This process's mounts, one a line (``proc(5)``): where each cgroup hierarchy is mounted, and which part of it.
PROC_MOUNTINFO = "/proc/self/mountinfo"
#: The most of mountinfo read (a node with thousands of mounts); a line cut at the end is dropped, never misread.
_MOUNTINFO_MAX = 1 << 22
#: v1 says "no limit" with a huge number (``2**63 - 4096`` on 4 KiB pages): at or above this, none.
_NO_LIMIT = 1 << 62
#: The folder names under :data:`CGROUP_ROOT` where v1 mounts a controller (cpu is often co-mounted
#: with cpuacct, and the plain name then a symbolic link to the pair's folder).
_V1_FOLDERS = {"memory": ("memory",), "cpu": ("cpu", "cpu,cpuacct", "cpuacct,cpu")}


def physical_memory() -> int | None:
    """Bytes of physical memory this process may use: the host's RAM, or its cgroup's limit where lower.

    Returns
    -------
    int or None
        The bytes; None where neither can be told.
    """
    return min((bytes_ for bytes_ in (host_memory(), cgroup_memory_limit()) if bytes_ is not None), default=None)


def host_memory() -> int | None:
    """Bytes of installed physical memory, or None where they cannot be told.

    No third-party package is needed: ``os.sysconf`` (installed pages times page size) on Linux,
    macOS and the BSDs; ``GlobalMemoryStatusEx`` on Windows, which has no ``os.sysconf``.

    Returns
    -------
    int or None
        The bytes; None on another system or when the call fails.
    """
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        pages = page_size = 0
    if pages > 0 and page_size > 0:
        return int(pages * page_size)
    if sys.platform == "win32":
        return _windows_physical_memory()
    return None


def _windows_physical_memory() -> int | None:
    import ctypes  # here: only Windows asks, and ctypes takes time to import

    class MemoryStatusEx(ctypes.Structure):  # MEMORYSTATUSEX of the Windows API
        _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong),
                    ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                    ("ullTotalPageFile", ctypes.c_ulonglong), ("ullAvailPageFile", ctypes.c_ulonglong),
                    ("ullTotalVirtual", ctypes.c_ulonglong), ("ullAvailVirtual", ctypes.c_ulonglong),
                    ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]

    status = MemoryStatusEx()
    status.dwLength = ctypes.sizeof(MemoryStatusEx)
    try:
        if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
            return None
    except (AttributeError, OSError):
        return None
    return int(status.ullTotalPhys) or None


def cgroup_memory_limit() -> int | None:
    """The smallest memory limit set on this process's cgroup or a parent (v2 and v1); None without one.

    v2's ``memory.high`` counts as a limit beside ``memory.max``: past it the kernel throttles the process
    with reclaim until it crawls (a run that never ends instead of one the OOM killer ends).

    Returns
    -------
    int or None
        Bytes; None where no limit is set ("max", v1's huge number) or none can be read.
    """
    files = _files("memory", ("memory.max", "memory.high"), ("memory.limit_in_bytes",))
    limits = [_bytes(_read(path)) for path in files]
    return min((limit for limit in limits if limit is not None), default=None)


def cgroup_cpu_limit() -> int | None:
    """CPUs' worth of the smallest CPU quota on this process's cgroup or a parent, rounded up; None without one.

    A quota of 200,000 µs per 100,000 µs period (v2 ``cpu.max`` "200000 100000", or v1's
    ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us``) is 2 CPUs; 150,000 per 100,000 rounds up to 2, and
    a quota below one period's is 1.

    Returns
    -------
    int or None
        At least 1; None where no quota is set ("max", v1's -1) or none can be read.
    """
    quotas = []
    for path in _files("cpu", ("cpu.max",), ("cpu.cfs_quota_us",)):
        if path.endswith("cpu.max"):
            fields = (_read(path) or "").split()
        else:  # v1: the period in a file of its own beside the quota
            fields = [_read(path) or "", _read(os.path.join(os.path.dirname(path), "cpu.cfs_period_us")) or ""]
        cpus = _cpus(fields)
        if cpus is not None:
            quotas.append(cpus)
    return min(quotas, default=None)


def _read(path: str) -> str | None:
    """The file's text, stripped; None where it cannot be read (missing, refused, not text)."""
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read(1 << 16).strip()  # (bounded: a limit file is a line)
    except (OSError, ValueError):  # (UnicodeDecodeError is a ValueError)
        return None


def _bytes(text: str | None) -> int | None:
    """A memory limit file's bytes; None for "max", v1's huge "no limit", or anything not a positive count."""
    try:
        value = int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if 0 < value < _NO_LIMIT else None


def _cpus(fields: list[str]) -> int | None:
    """CPUs of a quota and a period (in µs), rounded up; None for "max", -1 or anything malformed."""
    if len(fields) != 2:
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, -(-quota // period))


def _files(controller: str, v2_names: tuple[str, ...], v1_names: tuple[str, ...]) -> list[str]:
    """The limit files that apply to this process: v2's and the v1 ``controller``'s, along its cgroup path
    and every parent up to the root of each mount of the hierarchy."""
    if not sys.platform.startswith("linux"):
        return []
    paths = _cgroup_paths()
    mounts = _cgroup_mounts()
    files: list[str] = []
    for key, names in (("", v2_names), (controller, v1_names)):
        if key not in paths:
            continue
        for base, path in _bases(key, paths[key], mounts):
            files += [os.path.join(folder, name) for folder in _up(base, path) for name in names]
    return list(dict.fromkeys(files))  # (one hierarchy mounted twice, or found twice, is read once)


def _bases(controller: str, path: str, mounts: list[tuple[str, frozenset[str], str, str]]) -> list[tuple[str, str]]:
    """``(folder, path under it)`` for each mount of ``controller``'s hierarchy (``""``: v2's): the
    process's ``path`` made relative to the mount's root.  Without mountinfo, the usual folders."""
    if not mounts:
        if controller == "":
            return [(CGROUP_ROOT, path)]
        return [(os.path.join(CGROUP_ROOT, name), path) for name in _V1_FOLDERS[controller]]
    bases = []
    for kind, controllers, root, mount_point in mounts:
        if (kind == "cgroup2") if controller == "" else (kind == "cgroup" and controller in controllers):
            bases.append((mount_point, _under(path, root)))
    return bases


def _under(path: str, root: str) -> str:
    """``path`` relative to a mount's ``root`` (both in the hierarchy); ``"/"`` (the mount point alone)
    where the path is not under that root, as the JVM reads it: nothing outside the mount is guessed at."""
    root = root.rstrip("/")
    if path == root or path.startswith(root + "/"):
        return path[len(root):] or "/"
    return "/"


def _cgroup_mounts() -> list[tuple[str, frozenset[str], str, str]]:
    """The cgroup file systems in ``/proc/self/mountinfo``: ``(kind, v1 controllers, root, mount point)``,
    kind ``"cgroup"`` (v1) or ``"cgroup2"``; none where the file cannot be read.

    A line is ``ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS``; a
    v1 hierarchy's controllers are among its super options (``rw,cpu,cpuacct``).  A line that is not
    that shape is skipped.
    """
    mounts = []
    for line in _mountinfo_lines():
        fields = line.split(b" ")
        try:
            dash = fields.index(b"-", 6)
        except ValueError:
            continue
        if len(fields) < dash + 4 or fields[dash + 1] not in (b"cgroup", b"cgroup2"):
            continue
        kind = os.fsdecode(fields[dash + 1])
        controllers = frozenset(os.fsdecode(fields[dash + 3]).split(",")) if kind == "cgroup" else frozenset()
        root, mount_point = _unescaped(fields[3]), _unescaped(fields[4])
        if root.startswith("/") and mount_point.startswith("/"):
            mounts.append((kind, controllers, root, mount_point))
    return mounts


def _mountinfo_lines() -> list[bytes]:
    """The lines of :data:`PROC_MOUNTINFO` (bytes: a mount point may be any bytes); none if unreadable."""
    # line by line: a read of the whole limit at once allocated its 4 MiB for a file of a few KiB, on every
    # default memory limit asked for; a line that would pass the limit is not read ("rw,cpu" of "rw,cpuset")
    lines, size = [], 0
    try:
        with open(PROC_MOUNTINFO, "rb") as fh:
            for line in fh:
                size += len(line)
                if size > _MOUNTINFO_MAX:
                    break
                lines.append(line.rstrip(b"\n"))
    except OSError:
        return []
    return lines


def _unescaped(field: bytes) -> str:
    r"""A mountinfo path with the kernel's escapes undone (``\040`` a space, ``\011`` a tab, ``\012`` a
    line break, ``\134`` a backslash)."""
    return os.fsdecode(re.sub(rb"\\([0-3][0-7]{2})", lambda m: bytes([int(m.group(1), 8)]), field))


def _cgroup_paths() -> dict[str, str]:
    """``/proc/self/cgroup``: controller -> the process's cgroup path, ``""`` for v2's unified hierarchy."""
    paths: dict[str, str] = {}
    for line in (_read(PROC_CGROUP) or "").splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3 or not fields[2].startswith("/"):
            continue
        hierarchy, controllers, path = fields
        if hierarchy == "0" and controllers == "":
            paths[""] = path
        for controller in controllers.split(","):
            if controller:
                paths.setdefault(controller, path)
    return paths


def _up(base: str, path: str) -> Iterator[str]:
    """``base/path`` and each of its parents up to ``base``.

    A path with ``..`` (a cgroup outside this cgroup namespace's root) names no folder under ``base``:
    ``base`` alone is read then, never a folder outside it.
    """
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        parts = []
    for end in range(len(parts), -1, -1):
        yield os.path.join(base, *parts[:end])
