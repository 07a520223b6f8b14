"""Resumable batch runs: every method on every matrix of a manifest, one JSON line each.

Results go to ``OUT/results.jsonl`` (:mod:`~sfapprox.datasets.results_file`),
one line per (matrix, method).  Re-running the same command resumes:
(matrix, method) pairs whose line says ``ok`` or ``not applicable`` are
skipped; ``failed``, ``unavailable`` and ``interrupted`` pairs are tried again
(their old lines are removed first, so each pair has at most one line).
``force=True`` recomputes everything selected.  A finished line made at
another budget, protocol or ``count_indices`` measured something else and is
redone (:data:`MEASURES`); resuming with other settings (time limit,
iterations) than the lines already there is reported (``BatchSummary.warnings``).

Files that are not on this machine yet are downloaded first, by the parent
process, one after the other (a model's file read as its square weights,
``load = {var = "*"}``, before the output folder is made: the entries' names
come from it, and a clash is refused before anything is written); once a
download fails for want of a network, no further host is tried (``BatchSummary.no_network``, ``.downloads_skipped``),
and an entry whose file cannot be had gets its ``unavailable`` lines at once.
Matrices (:mod:`~sfapprox.datasets.runner`) then run one after the other, in
parallel processes (:class:`~concurrent.futures.ProcessPoolExecutor`,
"spawn"), or on a Dask cluster; the parent process does all the writing
(a process worker's or a Dask task's lines as each of its pairs finishes).

One batch at a time per output folder: :func:`run_batch` holds the folder's
lock (:mod:`~sfapprox.datasets.folder_lock`) while it runs; a second one
refuses at once, naming the holder, or waits (``wait``).  Holding it, a
batch also removes the hidden temporaries a killed run left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import math
import multiprocessing
import os
import pickle
import re
import select
import signal
import sys
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _compiled
from .._atomic import NAME_MAX, OutputError, check_name_length, check_path_length, name_over_limit
from .._base import ALL_METHODS, parse_methods
from .._dask import close, connect
from .._executors import cluster_lost, not_picklable, serialization_logs_off, worker_death
from .._errors import ParameterError, SfapproxError, one_line, parameter, reader, spelled_for
from .._settings import PROTOCOLS
from .._signals import children_keep_hang_ups_blocked, deferred
from .._threads import available_cores
from ..budget import parse_budget
from ..formats import shape_text
from .fetch import ChecksumError, NetworkState, cache_dir, check_data_dir, fetch_entry, file_sha256, is_present
from .folder_lock import HOLDER_FILE, folder_lock
from .manifest import Entry, ManifestError, load_manifest
from .results_file import (
    DONE_STATUSES,
    MEASURES,
    RESULTS_FILE,
    ResultsFile,
    ResultsWriter,
    read_results,
    repair_results,
    supersede_results,
)
from .runner import (BatchOptions, MatrixTask, base_record, factors_name, run_matrix, stamp, stop_when_abandoned,
                     unavailable_records)

__all__ = ["BatchOptions", "BatchSummary", "MatrixTask", "run_batch", "run_matrix", "plan", "expand_weights", "RESULTS_FILE",
           "REPORT_FILES", "foreign_reports", "remember_reports", "missing_factors"]

#: The report files a batch writes in its output folder (after its run).
REPORT_FILES = ("report.md", "report.csv", "report.tex", "report.json")
#: The SHA-256 of each report file as the last batch wrote it: a file that differs is not overwritten.
REPORTS_WRITTEN = ".sfapprox-reports.json"
_WRITING = "writing"  # the record's flag while a batch writes its reports (see remember_reports)
#: How each report file begins, for folders from before :data:`REPORTS_WRITTEN` was kept (report.md began
#: "# Batch report" in the first versions: a folder of theirs was refused as "not written by a batch").
_REPORT_STARTS = {"report.md": (b"### ", b"# Batch "), "report.csv": (b"table,", b"matrix,"), "report.tex": (b"% ",),
                  "report.json": (b"{",)}

Event = Callable[..., None]


@dataclass
class BatchSummary:
    """What a batch did: lines written, pairs skipped, statuses, whether it was cut short.

    Attributes
    ----------
    out_dir : str
        The output folder.
    written : int, default=0
        Lines written by this run.
    skipped : int, default=0
        Pairs skipped because a finished line was already there.
    to_do : int, default=0
        Pairs this run set out to compute.
    statuses : collections.Counter
        Lines written, by status.
    interrupted : bool, default=False
        True after a Ctrl-C (finished lines are kept).
    cut_short : list of str
        After a stop, the pairs that were running (``"matrix/method"``, in the manifest's order): their
        work is lost, and the next run redoes them.  A matrix still being read counts by its first pair
        to run; on Dask, a task whose worker could not reach the batch's queue is not known to have begun.
    not_begun : int, default=0
        After a stop, the pairs left that had not begun (the next run runs them).
    repaired : list of str
        What was repaired in the results file before starting (partial or
        invalid lines removed, lines to recompute dropped).
    warnings : list of str
        E.g. settings that differ from those of the lines already there.
    no_network : str or None
        The download failure that showed the network to be unreachable (None
        when downloads worked or none was needed).
    downloads_skipped : list of str
        Entries whose download was then not tried.
    orphans : list of str
        Matrices whose lines stay in the folder though the manifest no longer names them
        (:func:`orphan_lines`): the report ranks them too.
    changed : list of str
        Entries whose finished lines are redone because their matrix changed, and what changed (and
        the methods not selected whose lines were made from a changed matrix).
    rewrite_error : str or None
        Why the final rewrite of the results file (dropping the lines this run's lines supersede)
        failed, e.g. a full disk; None when it worked or was not needed.  The new lines were appended
        and are kept; a report counts only each pair's latest line, and the next run drops the rest.
    results_path : Path
        ``out_dir/results.jsonl`` (property).
    """

    out_dir: str
    written: int = 0
    skipped: int = 0
    to_do: int = 0
    statuses: Counter = field(default_factory=Counter)
    interrupted: bool = False
    cut_short: list[str] = field(default_factory=list)
    not_begun: int = 0
    repaired: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    no_network: str | None = None
    downloads_skipped: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    rewrite_error: str | None = None

    @property
    def results_path(self) -> Path:
        """The results file, ``out_dir/results.jsonl``."""
        return Path(self.out_dir) / RESULTS_FILE


# ---------------------------------------------------------------------------
# the batch
# ---------------------------------------------------------------------------


#: In a process-pool worker: the pipe through which it sends each pair's record as the pair finishes
#: (:func:`_run_in_worker`).
_to_parent = None
#: The largest message a worker sends through that pipe: a write of at most PIPE_BUF bytes goes in whole
#: or not at all, whatever becomes of its writer (killed meanwhile), so the workers need no lock between
#: them (a lock held by a worker that was killed would stop the others) and the parent never finds half a
#: message.  A larger record comes with the matrix's other records when its task ends.
_WHOLE_WRITE = getattr(select, "PIPE_BUF", 512) - 4  # (less the length that precedes each message)
#: The key of a worker's message that numba could not write its cache of the kernels (the failed write).
_CACHE_NOT_WRITTEN = "cache_not_written"
#: The key of a worker's message that numba found no writable folder for its cache (the note it would say).
_NO_CACHE_FOLDER = "no_cache_folder"
#: In a Dask worker: per batch (its queue's name), the notes about numba's cache told to it (each once).
_told: dict[str, set[str]] = {}
_told_lock = threading.Lock()
#: The queues of the Dask batches this process runs: a task that finds its own queue here runs in the batch's
#: process (a cluster of threads, ``processes=False``), where its notes are said as they come.
_own_queues: set[str] = set()


def _worker_init(threads: int, to_parent=None, cache_folder: str | None = None,
                 cache_error: OSError | None = None) -> None:
    """Process-pool workers: the parent handles Ctrl-C; share the cores; die with the parent; send each
    pair's record to the parent through ``to_parent`` (a pipe's writing end) as it finishes; cache the
    compiled kernels in the parent's private folder ``cache_folder`` where it has one
    (:data:`sfapprox._compiled.CACHE_FOLDER`: no longer passed on in the environment), or not at all
    where the parent's write of that cache failed (``cache_error``); a worker's own failed write is said
    by the parent, once for them all (:func:`_share_compiled`).

    SIGINT and SIGHUP (a terminal's Ctrl-C, and its hang-up, reach the whole
    process group) are ignored: the parent decides (a hung-up worker died at
    once, and its matrix's pairs were written as failed).  SIGTERM keeps its default (stop), which is how the
    parent stops its workers after a Ctrl-C or SIGTERM of its own; a factors
    file being written is finished first (sfapprox._atomic holds the signal).
    When the parent dies without stopping them (``kill -9``, Task Manager), the workers
    stop too: at once on Linux (``PR_SET_PDEATHSIG``), else within a second.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(max(1, threads))  # read by torch/BLAS when first imported
    if "torch" in sys.modules:  # a fork-like start that inherited torch
        sys.modules["torch"].set_num_threads(max(1, threads))
    # numpy's and scipy's BLAS were loaded (importing this module) before the variables were set: their
    # pools are limited here, or a fit that loads no torch (Nystrom, randomized SVD: their cap is the
    # pools' own count) ran on every core of the machine in each worker.  (Not _threads._limit_blas: its
    # controller, made and kept here, would miss a BLAS loaded later; the variables above reach that one.)
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=max(1, threads), user_api="blas")
    global _to_parent
    _to_parent = to_parent
    _share_compiled(cache_folder, cache_error)
    parent = os.getppid()
    _die_with_parent()
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _share_compiled(cache_folder: str | None, cache_error: OSError | None) -> None:
    """A pool worker's compiled kernels: cached in the parent's private folder ``cache_folder`` (found
    without a second warning, or, where it lasts one process, a recompile), not cached where the parent
    failed to write that cache (``cache_error``: said there already), and a failed write of the worker's
    own sent to the parent (:func:`_send`), which says it once: each of a ``-j 8`` batch's workers found
    the folder unwritable on its own, and said so, eight times the same note (so with the note that numba
    found no writable folder at all, where the parent had not found it first)."""
    if cache_folder is not None:
        _compiled.CACHE_FOLDER = cache_folder
    if cache_error is not None:
        _compiled.CACHE_WRITE_ERROR = cache_error
    _compiled.CACHE_WRITE_REPORT = lambda exc: _send({_CACHE_NOT_WRITTEN: exc})
    _compiled.CACHE_FOLDER_REPORT = lambda note: _send({_NO_CACHE_FOLDER: note})


def _send(message: dict[str, Any]) -> bool:
    """Send ``message`` (a pair's record, or a word to the parent) through :data:`_to_parent` where it goes
    whole (:data:`_WHOLE_WRITE`; a larger record comes with its task's result); whether it was sent."""
    data = pickle.dumps(message)
    if _to_parent is None or len(data) > _WHOLE_WRITE:
        return False
    _to_parent.send_bytes(data)
    return True


def _run_in_worker(task: MatrixTask) -> list[dict[str, Any]]:
    """:func:`run_matrix` in a pool worker, each finished pair's record sent to the parent at once: the
    parent writes it then, not when the matrix's last method is done (a stop during a long fit lost the
    lines of the matrix's methods that had finished before it)."""
    _send(_began(task))  # (the parent names the pairs a stop cuts short: the running ones, not those queued)
    return run_matrix(task, on_record=_send)


def _began(task: MatrixTask) -> dict[str, str]:
    """The message a worker sends as it begins ``task`` (told apart from a record by its one key)."""
    return {"begun": task.entry.name}


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM when the parent exits (a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent was killed (kill -9) stops within a second instead of fitting on.

    The parent's sentinel says so on every system; a changed parent pid (an orphan adopted by init)
    only on POSIX: Windows keeps the pid of a parent that has gone, and the workers fitted on.
    """
    watched = multiprocessing.parent_process()
    while True:
        time.sleep(1.0)
        if os.getppid() != parent or (watched is not None and not watched.is_alive()):
            os._exit(1)


def _check_options(options: BatchOptions, jobs: int, executor: str, scheduler: str | None,
                   wait: bool | float = False) -> None:
    if ALL_METHODS in options.methods:  # "each method may be named once" said nothing of it
        raise ParameterError(f"methods {', '.join(options.methods)}: {ALL_METHODS!r} is a spelling of --methods; "
                             f"BatchOptions takes the names: methods=tuple(parse_methods({ALL_METHODS!r}))")
    if list(parse_methods(options.methods)) != list(options.methods):
        raise ParameterError(f"methods {', '.join(options.methods)}: each method may be named once")
    parse_budget(options.budget)  # a bad budget is refused before any work
    if options.protocol not in PROTOCOLS:
        raise ParameterError(f"protocol {options.protocol!r} must be 'default' or 'paper'")
    # the run's options as its reader gives them: run_batch's keywords to Python, the batch command's
    # options on its command line (a Python caller was told "--jobs 4", "--executor dask")
    if jobs < 1:
        raise ParameterError(f"{parameter('jobs', jobs)} must be at least 1")
    if executor not in ("process", "dask"):
        raise ParameterError(f"executor {executor!r} must be 'process' or 'dask'")
    if executor == "dask" and not scheduler:
        raise ParameterError(f"{parameter('executor', 'dask')} needs the cluster's scheduler, e.g. "
                             f"{parameter('scheduler', 'tcp://127.0.0.1:8786')}")
    if executor == "dask" and jobs > 1:
        # the cluster's workers take the matrices as they come: --jobs was ignored without a word
        raise ParameterError(f"{parameter('jobs', jobs)} sets how many local processes "
                             f"{parameter('executor', 'process')} runs; on {parameter('executor', 'dask')} the "
                             f"cluster's workers run the matrices (leave {parameter('jobs')} out)")
    if executor != "dask" and scheduler:
        # the work would run here while the user believes it runs on the cluster
        raise ParameterError(f"{parameter('scheduler', scheduler)} applies to {parameter('executor', 'dask')}; "
                             f"add {parameter('executor', 'dask')} to run there")
    if not isinstance(wait, bool) and not (isinstance(wait, (int, float)) and math.isfinite(wait) and wait >= 0):
        raise ParameterError(f"wait={wait!r} must be True, False or a number of seconds >= 0")
    check_data_dir(options.data_dir)  # a mistyped --data-dir would make every file entry "unavailable"


def settings_changes(existing: ResultsFile, options: BatchOptions) -> list[str]:
    """How the finished lines' settings differ from ``options`` (one text per differing setting).

    Parameters
    ----------
    existing : ResultsFile
        The lines already in the results file.
    options : BatchOptions
        This run's options (:meth:`BatchOptions.recorded`).

    Returns
    -------
    list of str
        Empty when every line used this run's settings.
    """
    now = options.recorded()
    seen: dict[str, set[str]] = {}
    for record in existing.records:
        for key, value in (record.get("settings") or {}).items():
            if key in now and value != now[key]:
                seen.setdefault(key, set()).add(repr(value))
    return [f"{key}: earlier lines used {', '.join(sorted(values))}, this run {now[key]!r}"
            for key, values in sorted(seen.items())]


def changed_measures(existing: ResultsFile, options: BatchOptions) -> dict[tuple[str, str], str]:
    """Finished pairs whose line measured something else than this run asks (:data:`MEASURES`), or
    was found not applicable under another memory limit, and why.

    Parameters
    ----------
    existing : ResultsFile
        The lines already in the results file.
    options : BatchOptions
        This run's options.

    Returns
    -------
    dict of (str, str) to str
        ``(matrix, method)`` -> what differs, for finished pairs only.
    """
    now = options.recorded()
    stale: dict[tuple[str, str], str] = {}
    for key, record in existing.latest().items():
        settings = record.get("settings") or {}
        if record.get("status") not in DONE_STATUSES:
            continue
        # a method found not applicable under one memory limit (the matrix could not be formed for it)
        # may apply under another: such a line is redone when the limit changed
        names = MEASURES + (("max_memory",) if record.get("status") == "not applicable" else ())
        differ = [f"{name} {settings[name]!r}, now {now[name]!r}" for name in names
                  if name in settings and settings[name] != now[name]]
        if differ:
            stale[key] = f"its line was made with {'; '.join(differ)}"
    return stale


def changed_sources(entries: Iterable[Entry], existing: ResultsFile, data_dir: str | None,
                    cache: Path | None) -> dict[tuple[str, str], str]:
    """Finished pairs whose matrix is no longer the one their line was made from, and why.

    A line made from another definition of its entry (a generator parameter, a
    file name, a load option) or from a file whose size or modification time
    differ (and whose SHA-256, when the line has one, differs too: a copy or a
    ``touch`` is no change) is stale.  Lines from before the definition was
    recorded are compared by their file's hash alone.  A file not present now
    leaves its lines alone (nothing to compare with).

    Parameters
    ----------
    entries : iterable of Entry
        The selected entries.
    existing : ResultsFile
        The lines already in the results file.
    data_dir : str or None
        Folder searched first for the entries' files.
    cache : Path or None
        The download cache.

    Returns
    -------
    dict of (str, str) to str
        ``(matrix, method)`` -> what changed, for finished pairs only.
    """
    from .fetch import local_path
    from .runner import entry_definition, file_stamp

    latest = existing.latest()
    stale: dict[tuple[str, str], str] = {}
    for entry in entries:
        finished = [r for (name, _), r in latest.items() if name == entry.name and r.get("status") in DONE_STATUSES]
        if not finished:
            continue
        definition = entry_definition(entry)
        path = local_path(entry, data_dir=data_dir, cache=cache)
        now = file_stamp(path) if path is not None else None
        digest = functools.cache(lambda path=path: file_sha256(path))  # hashed once, when a line needs it
        for record in finished:
            why = _why_changed(record, definition, path, now, digest)
            if why:
                stale[(entry.name, record["method"])] = why
    return stale


def _why_changed(record: dict[str, Any], definition: dict[str, Any], path: Path | None,
                 now: dict[str, int] | None, digest: Callable[[], str]) -> str | None:
    """What differs between the matrix ``record`` was made from and the entry now (None: nothing);
    ``digest()`` gives the file's SHA-256 (hashed once, when a line needs it)."""
    saved = record.get("source")
    if saved is not None and saved != definition:
        keys = sorted(k for k in set(saved) | set(definition) if saved.get(k) != definition.get(k))
        return f"its manifest entry changed ({', '.join(keys)})"
    info = record.get("matrix_info") or {}
    if path is None or not isinstance(info, dict):
        return None
    if info.get("file_stamp") == now:
        return None
    if not info.get("sha256"):
        return None if "file_stamp" not in info else f"its file {path} changed (size or time)"
    return None if digest() == info["sha256"] else f"its file {path} changed (another SHA-256)"


def missing_factors(existing: ResultsFile, out_dir: str | os.PathLike) -> dict[tuple[str, str], str]:
    """Finished pairs whose line names a factors file that is no longer in ``out_dir``, and why.

    Parameters
    ----------
    existing : ResultsFile
        The lines in the folder (each pair's latest counts).
    out_dir : str or os.PathLike
        The batch's output folder (a line's ``factors`` is relative to it).

    Returns
    -------
    dict of (str, str) to str
        ``(matrix, method)`` -> what is missing.

    Examples
    --------
    >>> import tempfile
    >>> lines = ResultsFile([{"matrix": "a", "method": "sf", "status": "ok", "factors": "factors/a.h5"}], [], 0)
    >>> missing_factors(lines, tempfile.mkdtemp())
    {('a', 'sf'): 'its factors file factors/a.h5 is missing'}
    """
    out = Path(out_dir)
    return {key: f"its factors file {record['factors']} is missing" for key, record in existing.latest().items()
            if record.get("status") == "ok" and isinstance(record.get("factors"), str)
            and not (out / record["factors"]).is_file()}


def _kept(existing: ResultsFile, drop: set[tuple[str, str]]) -> ResultsFile:
    """``existing`` with only the latest lines that stay in the folder (not about to be redone)."""
    kept = [r for key, r in existing.latest().items() if key not in drop]
    return dataclasses.replace(existing, records=kept)


def plan(entries: Iterable[Entry], methods: tuple[str, ...], existing: ResultsFile, force: bool,
         stale: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()):
    """Pairs to run and stale lines to drop: ``(todo: dict[name, methods], drop, skipped)``.

    Parameters
    ----------
    entries : iterable of Entry
        The selected entries.
    methods : tuple of str
        The methods to run on each.
    existing : ResultsFile
        The lines already in the results file.
    force : bool
        Recompute pairs whose line says ``ok`` or ``not applicable``.
    stale : set of (str, str), optional
        Finished pairs to recompute all the same: their matrix changed (:func:`changed_sources`).

    Returns
    -------
    todo : dict of str to tuple of str
        Entry name -> its methods still to run.
    drop : set of (str, str)
        ``(matrix, method)`` pairs whose old lines go before they are redone.
    skipped : int
        Finished pairs left as they are.
    """
    latest = existing.latest()
    todo: dict[str, tuple[str, ...]] = {}
    drop: set[tuple[str, str]] = set()
    skipped = 0
    for entry in entries:
        pending = []
        for method in methods:
            key = (entry.name, method)
            old = latest.get(key)
            if old is not None and old.get("status") in DONE_STATUSES and not force and key not in stale:
                skipped += 1
                continue
            pending.append(method)
            if old is not None:
                drop.add(key)
        if pending:
            todo[entry.name] = tuple(pending)
    return todo, drop, skipped


def run_batch(
    manifest_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    options: BatchOptions = BatchOptions(),
    *,
    only: list[str] | None = None,
    force: bool = False,
    jobs: int = 1,
    executor: str = "process",
    scheduler: str | None = None,
    on_event: Event | None = None,
    wait: bool | float = False,
) -> BatchSummary:
    """Run ``options.methods`` on every selected matrix of a manifest, resumably.

    Parameters
    ----------
    manifest_path : str or os.PathLike
        A manifest (see :mod:`sfapprox.datasets.manifest`), or a bundled manifest's name
        (``"synthetic"``; :func:`~sfapprox.datasets.manifest.load_manifest` reads it).
    out_dir : str or os.PathLike
        Output folder: ``results.jsonl`` and ``factors/``; created if needed.
    options : BatchOptions, default=BatchOptions()
        Methods, budget, protocol, fit settings, data folder, factor saving.
    only : list of str, optional
        Entry names to run (default: all).
    force : bool, default=False
        Recompute pairs that already have a finished line.
    jobs : int, default=1
        Matrices run in parallel processes ("spawn") when > 1.
    executor : {"process", "dask"}, default="process"
        Where the matrices run when ``jobs > 1`` (process pool) or on Dask.
    scheduler : str, optional
        Dask scheduler address (``executor="dask"``).
    on_event : callable, optional
        Progress events: ``("waiting", holder=)`` (once, when ``wait`` lets it
        wait for another batch on the folder), ``("start", total=, skipped=, pairs=)``,
        ``("fetch", name=)`` (a download before the fits), ``("matrix", name=)``,
        ``("method", matrix=, method=)``,
        ``("iteration", ...)``, ``("record", record=)``, ``("matrix_done", name=)``.
    wait : bool or float, default=False
        When another batch holds ``out_dir``: False refuses at once, True
        waits for it to end, a number waits at most that many seconds.

    Returns
    -------
    BatchSummary
        ``interrupted`` is True after a Ctrl-C (finished lines are kept).

    Raises
    ------
    FolderBusyError
        When another process is running a batch on ``out_dir`` (one line
        naming it: pid, host, start time, command) and ``wait`` does not
        allow waiting (long enough).
    InputError
        When ``options.data_dir`` is not a folder (before any work).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "m.toml").write_text('[[matrix]]\\nname = "band"\\ncategory = "synthetic"\\n'
    ...                               'generator = "banded"\\nparams = {n = 16}\\n')
    >>> s = run_batch(d / "m.toml", d / "out", BatchOptions(methods=("tsvd",)))
    >>> s.written, dict(s.statuses)
    (1, {'ok': 1})
    """
    _check_options(options, jobs, executor, scheduler, wait)
    manifest = load_manifest(manifest_path)
    entries = manifest.select(only)
    out = Path(out_dir)
    # Connected before any work (the folders, the lock, downloads, lines), as compare connects: a wrong
    # address cost a batch its downloads and an 'unavailable' line before it was said.
    # its messages say "check --scheduler's address" on the command line, "check scheduler's address" to Python
    client = connect(scheduler, parameter("scheduler").rstrip("=")) if executor == "dask" else None
    try:
        # The entries' names, before anything is made (a clash left the folder, factors/ and the lock): a
        # model's square weights are named from its file's listing, so its file is downloaded (into the
        # cache) here, not under the lock; listed there, a clash left the folder, its lock and factors/
        network = NetworkState()
        with spelled_for("api"):  # the entries' files read as their manifest says (run_matrix's reason)
            expanded = expand_weights(entries, options.data_dir, cache_dir(), network)
        positions = _manifest_positions(manifest.names(), entries, expanded)
        check_named_vars(entries, options.data_dir, cache_dir())
        check_output_names(out)  # (first: an output folder too deep is said as such, not by an entry's name)
        check_factor_names([e.name for e in expanded], manifest.path, out)
        _check_outputs(out)
        _make_folder(out, "the output folder")
        emit = on_event or (lambda *a, **k: None)
        with folder_lock(out, wait=wait, on_wait=lambda holder: emit("waiting", holder=holder)):
            _check_outputs(out)  # again: the folder may have changed while this batch waited for it
            _make_folder(out / "factors", "the folder of the saved factors")
            _remove_stale_temporaries(out)
            return _run_locked(out, expanded, options, force, jobs, executor, client, on_event, manifest.names(),
                               [e.name for e in entries], network, positions)
    finally:
        if client is not None:
            close(client)


def _check_outputs(out: Path) -> None:
    """Refuse what lies where the batch writes its results file or its factors folder, before anything is made
    (refused once factors/ and the folder's lock file were made, they were left behind)."""
    check_results_file(out / RESULTS_FILE)
    factors = out / "factors"
    if os.path.lexists(factors) and not factors.is_dir():
        raise _not_made(factors, "the folder of the saved factors")


def _make_folder(path: Path, what: str) -> None:
    """Create ``path`` (and its parents); a file in its place is said as such, not as "File exists"."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _not_made(path, what) from None
    except OSError as exc:
        raise ParameterError(f"{path}: cannot create {what} ({exc.strerror or exc})") from None


def _not_made(path: Path, what: str) -> ParameterError:
    """The error for a folder of the batch's that cannot be made: something else is at ``path``."""
    return ParameterError(f"{path}: {what} {_not_a_folder(path)}; move it, or choose another {parameter('out_dir')}")


def _not_a_folder(path: Path) -> str:
    """What is at ``path`` in place of a folder: a file, or a symbolic link that leads nowhere (both were
    "a file here")."""
    if not path.is_symlink():
        return "is a file here, not a folder"
    target = os.readlink(path)
    try:
        path.resolve(strict=True)
    except FileNotFoundError:
        return f"is a symbolic link to {target}, which does not exist"
    except (OSError, RuntimeError):  # ELOOP (RuntimeError before Python 3.13)
        return f"is a symbolic link to {target} that leads back to itself (a loop)"
    return f"is a symbolic link to {target}, which is not a folder"


def check_results_file(results: Path) -> None:
    """Refuse a results file that is no regular file (a folder in its place read as "Is a directory")."""
    if os.path.lexists(results) and not results.is_file():
        kind = "folder" if results.is_dir() else "symbolic link that leads nowhere" if results.is_symlink() \
            else "special file"
        raise ParameterError(f"{results}: is a {kind}, not the batch's results file; move it away, or choose "
                             f"another {parameter('out_dir')}")


def foreign_reports(out_dir: str | os.PathLike) -> list[Path]:
    """The report files in ``out_dir`` that a batch would overwrite but did not write as they are now.

    A file counts as the batch's own when its SHA-256 is the one the last
    batch recorded (:func:`remember_reports`), or, in a folder that has no
    record yet or whose last batch was stopped while it wrote its reports
    (the record says ``"writing"``), when it begins as that report does.
    Anything else (a user's notes, an edited report) is foreign: the batch
    refuses it before any work.

    Parameters
    ----------
    out_dir : str or os.PathLike
        A batch's output folder.

    Returns
    -------
    list of Path
        Empty when every report file is absent or the batch's own.
    """
    import json

    from ..io._common import special_file

    out = Path(out_dir)
    record = out / REPORTS_WRITTEN
    if special_file(record):  # opened, a named pipe blocked the batch before it began; written, at its end
        return [record]
    try:
        written = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        written = None
    foreign = []
    for name in REPORT_FILES:
        path = out / name
        if not os.path.lexists(path):
            continue
        if special_file(path):  # never opened (a named pipe blocked): not a report the batch may replace
            foreign.append(path)
            continue
        try:
            own = isinstance(written, dict) and written.get(name) == file_sha256(path)
            if not own and (not isinstance(written, dict) or written.get(_WRITING)):
                with open(path, "rb") as fh:
                    own = fh.read(8).startswith(_REPORT_STARTS[name])
        except OSError:  # a folder, a dangling link, no permission: not a report the batch may replace
            own = False
        if not own:
            foreign.append(path)
    return foreign


def remember_reports(out_dir: str | os.PathLike, *, writing: bool = False) -> None:
    """Record the SHA-256 of the report files now in ``out_dir`` (just written by a batch).

    With ``writing``, before a batch writes them: the record then also says so, and until the
    batch records them again (written, or as far as a stop let it) a report that begins as the
    batch's does counts as its own (:func:`foreign_reports`): one written before a ``kill -9``
    that left the record behind is not refused as another's by the next batch.
    """
    from .._atomic import write_json

    out = Path(out_dir)
    digests: dict[str, object] = {name: file_sha256(out / name) for name in REPORT_FILES if (out / name).is_file()}
    if writing:
        digests[_WRITING] = True
    write_json(out / REPORTS_WRITTEN, digests, force=True)


def _remove_stale_temporaries(out: Path) -> None:
    """Hidden temporaries that a killed batch left of the files written under the lock (so none is in use now).

    The reports are written after the lock is released (a finishing batch may
    be writing them while this one starts): their temporaries are left alone.
    """
    names = (RESULTS_FILE, HOLDER_FILE)
    candidates = [p for name in names for p in out.glob(f".{name}.*.tmp")]
    candidates += list((out / "factors").glob(".*.h5.*.tmp"))
    for path in candidates:
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def orphan_lines(existing: ResultsFile, manifest_names: Iterable[str], selected: Iterable[str],
                 expanded: Iterable[str]) -> list[str]:
    """The matrices of a results file that its manifest no longer names, sorted.

    A matrix counts as named when it is one of the manifest's entries, one of
    this run's entries as expanded (a model's square weights, ``model.NAME``),
    or a weight of a model entry this run did not select (not read here).

    Parameters
    ----------
    existing : ResultsFile
        The lines in the folder.
    manifest_names : iterable of str
        All of the manifest's entries.
    selected : iterable of str
        This run's entries, before their expansion.
    expanded : iterable of str
        This run's entries, expanded.

    Returns
    -------
    list of str

    Examples
    --------
    >>> lines = ResultsFile([{"matrix": m, "method": "tsvd", "status": "ok"} for m in ("a", "b", "net.w1", "net.w2")], [], 0)
    >>> orphan_lines(lines, ["a", "net"], ["a", "net"], ["a", "net.w1"])
    ['b', 'net.w2']
    """
    named = set(manifest_names) | set(expanded)
    unread = tuple(f"{name}." for name in set(manifest_names) - set(selected))  # weights not listed this run
    return sorted(name for name in {key[0] for key in existing.latest()}
                  if name not in named and not name.startswith(unread or ("\0",)))


def _run_locked(out: Path, entries: list[Entry], options: BatchOptions, force: bool, jobs: int,
                executor: str, client, on_event: Event | None,
                manifest_names: list[str], selected: list[str], network: NetworkState,
                positions: dict[str, int]) -> BatchSummary:
    """The batch in its locked folder; ``entries`` as expanded (:func:`expand_weights`, its names checked),
    ``selected`` their names before; ``network`` the run's, shared with those downloads."""
    results = out / RESULTS_FILE
    existing = read_results(results)
    cache = os.path.abspath(cache_dir())  # (absolute: see the tasks below)
    sources = {} if force else changed_sources(entries, existing, options.data_dir, Path(cache))
    running = {e.name for e in entries}  # --only: the other entries' lines are neither redone nor said to be
    stale = {} if force else {key: why for key, why in {**changed_measures(existing, options), **sources}.items()
                              if key[0] in running}
    if not force and options.save_factors:
        # a line whose factors file was deleted (or moved) is redone: skipped, it counted as done and its
        # fit was in no file; only the selected pairs (the others' lines are not this run's to redo)
        stale.update({key: why for key, why in missing_factors(existing, out).items()
                      if key[0] in running and key[1] in options.methods and key not in stale})
    todo, drop, skipped = plan(entries, options.methods, existing, force, stale=set(stale))
    summary = BatchSummary(str(out), skipped=skipped, to_do=sum(len(m) for m in todo.values()))
    summary.changed = sorted({f"{name}: {why}; its lines are redone" for (name, method), why in stale.items()
                              if method in options.methods})
    # not selected, so not redone: their lines stay, made from the old matrix or with other settings
    for why, whose in (("were made from matrices that changed since", sources),
                       ("were made with other settings (budget, time limit, ...)",
                        {key: v for key, v in stale.items() if key not in sources})):
        others = sorted({method for (_, method) in whose if method not in options.methods})
        if others:
            redo = parameter("methods", tuple(others), typed=",".join(others))
            summary.changed.append(f"lines of {', '.join(others)} {why} ({redo} redoes them)")
    # Said whenever lines made with other settings stay in the folder (skipped here, or of other
    # methods or matrices): the report ranks them beside this run's (a budget of 0.9 against 0.3).
    summary.warnings = settings_changes(_kept(existing, drop), options)
    # the report ranks them too: a weight no longer in its file, an entry since removed
    summary.orphans = orphan_lines(_kept(existing, drop), manifest_names, selected, [e.name for e in entries])
    # An entry now read as its square weights (var = "*", its file there at last) is those weights: the
    # lines that said it was unavailable under its own name go (they were kept, and reported, for good).
    expanded = {e.name for e in entries}
    replaced = {key for key, record in existing.latest().items()
                if key[0] in selected and key[0] not in expanded and record.get("status") == "unavailable"}
    # lines to redo stay until their new lines are written (supersede_results, at the end); what the
    # manifest says of an entry without changing what was measured reaches the lines it skips
    summary.repaired = repair_results(results, drop=replaced,
                                      fields={e.name: {"category": e.category, "reference": dict(e.reference)}
                                              for e in entries})
    if replaced:
        summary.repaired.append(f"{', '.join(sorted({name for name, _ in replaced}))}: now read as its weights; "
                                "its 'unavailable' lines removed")
    # absolute: a Dask worker runs in a current folder of its own, where a relative --out-dir and --data-dir
    # named other folders (its factors went there, its files were "not found")
    where = dataclasses.replace(options, data_dir=os.path.abspath(options.data_dir)) if options.data_dir else options
    tasks = [MatrixTask(e, todo[e.name], where, os.path.abspath(out), cache, reader(), position=positions.get(e.name))
             for e in entries if e.name in todo]
    emit = on_event or (lambda *a, **k: None)
    emit("start", total=len(tasks), skipped=skipped, pairs=summary.to_do)
    # pairs with older lines behind their latest one (a redo killed before its rewrite left them): those
    # older lines go too, or a "failed" line superseded by an "ok" one stayed in the folder for good
    superseded = drop | superseded_pairs(existing)
    try:
        return _run_tasks(results, tasks, summary, Path(cache), network, jobs, executor, client, emit, on_event)
    finally:  # also after an interrupt: a redone pair's new line replaces its old one, an unredone keeps it
        if superseded:
            summary.rewrite_error = _supersede(results, superseded)


def _supersede(results: Path, keys: set[tuple[str, str]]) -> str | None:
    """Drop the lines superseded by newer ones of ``keys`` (:func:`supersede_results`); why it failed, or None.

    A failure (a full disk) is returned, not raised: the new lines are appended already and kept, the
    old ones only take room until the next run (each pair's latest line is the one counted), and the
    report must still be made from them.
    """
    try:
        supersede_results(results, keys)
    except OutputError as exc:
        return os.strerror(exc.errno) if exc.errno else str(exc)
    except OSError as exc:  # reading the file back, or keeping its unreadable lines aside
        return exc.strerror or str(exc)
    return None


def superseded_pairs(existing: ResultsFile) -> set[tuple[str, str]]:
    """The ``(matrix, method)`` pairs that have more than one line: all but their latest are superseded.

    Examples
    --------
    >>> lines = ResultsFile([{"matrix": "a", "method": "tsvd", "status": s} for s in ("failed", "ok")], [], 0)
    >>> superseded_pairs(lines)
    {('a', 'tsvd')}
    """
    counts = Counter((r["matrix"], r["method"]) for r in existing.records)
    return {key for key, count in counts.items() if count > 1}


def _run_tasks(results: Path, tasks: list, summary: BatchSummary, cache: Path, network, jobs: int, executor: str,
               client, emit: Event, on_event: Event | None) -> BatchSummary:
    """The tasks' records appended to ``results`` as they finish (serially, on processes or on Dask); after a
    stop, the pairs it cut short and those not begun (:func:`unfinished`)."""
    finished: set[tuple[str, str]] = set()
    begun: dict[str, None] = {}  # the matrices a runner began (ordered, as a set)
    with ResultsWriter(results) as writer:

        def write(record: dict[str, Any]) -> None:
            # a stop held until the line is counted: one that came during its fsync (a stop just after a pair
            # finished) left the line in the file, but out of "N line(s) written" and said to be cut short
            with deferred():
                writer.write(record)
                finished.add((record["matrix"], record["method"]))
                summary.written += 1
                summary.statuses[record["status"]] += 1
            emit("record", record=record)

        try:
            _run_fetched(tasks, cache, network, jobs, executor, client, write, emit, on_event, summary, begun)
        finally:
            if summary.interrupted:
                summary.cut_short, summary.not_begun = unfinished(tasks, begun, finished)
    return summary


def _run_fetched(tasks: list[MatrixTask], cache: Path, network, jobs: int, executor: str, client,
                 write: Callable[[dict], None], emit: Event, on_event: Event | None, summary: BatchSummary,
                 begun: dict[str, None]) -> None:
    """Download the files not here yet, then run the tasks (:func:`_run_tasks`); ``begun`` gets the matrices
    begun, ``summary.interrupted`` says whether a stop came."""
    try:
        tasks = _fetch_missing(tasks, cache, network, write, emit)
    except KeyboardInterrupt:
        summary.interrupted = True
        return
    finally:
        summary.no_network, summary.downloads_skipped = network.down, list(network.skipped)
    try:
        if executor == "dask":
            summary.interrupted = _run_dask(tasks, client, write, emit, begun)
        elif jobs > 1 and len(tasks) > 1:
            summary.interrupted = _run_processes(tasks, jobs, write, emit, begun)
        else:
            summary.interrupted = _run_serial(tasks, write, on_event, begun)
    except KeyboardInterrupt:  # a stop outside the runners' own handling: the lines written are kept all the same
        summary.interrupted = True


def unfinished(tasks: list[MatrixTask], begun: Iterable[str],
               finished: set[tuple[str, str]]) -> tuple[list[str], int]:
    """The pairs a stopped batch cut short (``"matrix/method"``) and how many more it had not begun.

    A matrix runs its methods one after the other, so a begun matrix's first pair
    without a line is the one that was running (or whose matrix was being read); its
    later pairs, like every pair of a matrix not begun, had not begun.

    Parameters
    ----------
    tasks : list of MatrixTask
        The batch's tasks.
    begun : iterable of str
        The matrices a runner began.
    finished : set of (str, str)
        The ``(matrix, method)`` pairs whose line was written.

    Returns
    -------
    cut_short : list of str
        In the tasks' order.
    not_begun : int

    Examples
    --------
    >>> from types import SimpleNamespace as N
    >>> tasks = [N(entry=N(name=n), methods=("tsvd", "sf", "nmf")) for n in ("a", "b", "c")]
    >>> unfinished(tasks, ["a", "b"], {("a", "tsvd"), ("b", "tsvd"), ("b", "sf"), ("b", "nmf")})
    (['a/sf'], 4)
    """
    started = set(begun)
    cut: list[str] = []
    left = 0
    for task in tasks:
        pending = [m for m in task.methods if (task.entry.name, m) not in finished]
        if pending and task.entry.name in started:
            cut.append(f"{task.entry.name}/{pending[0]}")
            pending = pending[1:]
        left += len(pending)
    return cut, left


def _manifest_positions(manifest_names: list[str], selected: list[Entry], expanded: list[Entry]) -> dict[str, int]:
    """Each expanded entry's place in the whole manifest (the ``position`` its lines record, by which a
    report orders its matrices): its own entry's index there, a model's square weights all at their
    entry's.  The place in the ``--only`` selection was recorded before: a rerun of one entry put it at
    0, beside the manifest's first, and the report listed it out of order."""
    index = {name: i for i, name in enumerate(manifest_names)}
    out: dict[str, int] = {}
    for e in expanded:
        owner = e.name if e.name in index else next(
            (s.name for s in selected if e.name.startswith(s.name + ".")), None)  # a model's weight
        if owner in index:
            out[e.name] = index[owner]
    return out


def expand_weights(entries: list[Entry], data_dir: str | None, cache: Path, network=None, *,
                   download: bool = True) -> list[Entry]:
    """Entries with ``load = {var = "*"}`` (a model's weights file) become one entry per square weight.

    The entry ``model`` of a file with square tensors ``a.weight`` and
    ``b.weight`` becomes ``model.a.weight`` and ``model.b.weight`` (characters
    a name may not hold become ``_``), each with ``var`` naming its tensor (a
    tied weight, another tensor's storage under a second name, once: by its
    first name); the file is fetched (or found) first.  An entry whose file cannot be had or
    listed is kept as it is: its run records why.

    Parameters
    ----------
    entries : list of Entry
        The selected entries, in manifest order.
    data_dir : str or None
        The batch's data folder.
    cache : Path
        The download cache.
    network : NetworkState, optional
        Shared with the batch's downloads (a failed host is tried once).
    download : bool, default=True
        Download a file that is not at hand; False keeps its entry as it is (a look at the files at hand
        only).  A batch downloads them before it makes its folder: the names they give are checked first.

    Returns
    -------
    list of Entry
        In order, each ``var = "*"`` entry replaced by its square weights.

    Raises
    ------
    ManifestError
        When an expanded name is another entry's.
    """
    from dataclasses import replace

    from ..io import detect_format, list_weights  # here: sfapprox.io loads h5py and Pillow

    out: list[Entry] = []
    for entry in entries:
        if entry.load.get("var") != "*":
            out.append(entry)
            continue
        try:
            found = fetch_entry(entry, data_dir=data_dir, cache=cache, network=network, download=download)
            fmt = entry.load.get("format") or detect_format(found.path)
            # the model's weights: an optimizer's moments in a training checkpoint are square too; a tied
            # weight (two names, one storage) is one matrix, run once under its first name
            listed = list_weights(found.path, fmt)
            square = [t["name"] for t in listed if t["square"] and not t.get("optimizer") and not t.get("same_as")]
        except Exception:  # as in run_matrix: the entry's own run says what is wrong with its file
            out.append(entry)
            continue
        named: dict[str, str] = {}
        for name in square:
            as_entry = f"{entry.name}.{_NAME_CHARS.sub('_', name)}"
            # Two tensors of the one file (a/b and a_b) would share an entry, and its lines: the manifest
            # cannot rename a tensor, but it can list each as an entry of its own.
            if as_entry in named:
                raise ManifestError(f"{entry.manifest}: entry {entry.name!r}: its tensors {named[as_entry]!r} and "
                                    f"{name!r} both become {as_entry!r} (characters a name may not hold become _); "
                                    "list them as entries of their own, each with its name and load = {var = \"...\"}")
            named[as_entry] = name
            out.append(replace(entry, name=as_entry, load={**entry.load, "var": name}))
        if not square:  # read, and nothing to run: the manifest's mistake (it ran as one 'unavailable' entry)
            raise _no_square_weights(entry, found.path, listed)
    names = [e.name for e in out]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ManifestError(f"{entries[0].manifest}: the square weights of an entry take the names "
                            f"{', '.join(clash)}, which other entries have; rename those entries")
    return out


_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.+-]")


def _no_square_weights(entry: Entry, path: Path, listed: list[dict[str, Any]], most: int = 5) -> ManifestError:
    """The refusal of a ``var = "*"`` entry whose weights file (read) holds no square weight of the model."""
    shown = ", ".join(f"{t['name']} {shape_text(t['shape'])}" for t in listed[:most])
    more = f" and {len(listed) - most} more" if len(listed) > most else ""
    moments = [t["name"] for t in listed if t["square"] and t.get("optimizer")]
    unread = [t["name"] for t in listed if t.get("unread")]
    why = (f"its square tensors are an optimizer's state ({', '.join(moments[:most])}), not the model's weights: "
           "name one with var = \"...\" to approximate it" if moments
           else f"its square tensors hold values sfapprox does not read ({', '.join(unread[:most])})" if unread
           else "a matrix to approximate must be square")
    return ManifestError(f"{entry.where}: {path}: load option var = \"*\" (every square weight): the file holds no "
                         f"square weight matrix ({len(listed)} tensor{'s' if len(listed) != 1 else ''}: {shown}{more}); "
                         f"{why}")


#: The formats whose names ``var`` picks from a listing read without the data (headers, a zip's members).
_NAMED_FORMATS = ("safetensors", "torch", "npz", "attention")


def check_named_vars(entries: Iterable[Entry], data_dir: str | None, cache: Path) -> None:
    """Refuse, before any work, an entry whose ``var`` names no matrix its file holds (no such tensor or
    array, or one that is not square): its file at hand, this is the manifest's mistake, found at run time
    only (the entry 'unavailable', tried again at every run, its batch exit 1).

    Only files already on this machine are looked at (a download is its run's business) and only formats
    whose names come from a listing (weights files, ``.npz``, an attention map's ``Q,K``); what is refused
    is what reading the entry says (:func:`~sfapprox.io.open_matrix`, spelled in the manifest's keys), and
    a file that does not match its ``sha256`` is left to its run, which says so.

    Raises
    ------
    ManifestError
        Naming the manifest, the entry, the file and what it holds.
    """
    from ..io import detect_format, list_weights, open_matrix  # here: sfapprox.io loads h5py and Pillow
    from .fetch import local_path, locate

    for entry in entries:
        var = entry.load.get("var")
        path = local_path(entry, data_dir=data_dir, cache=cache) if var not in (None, "*") else None
        if path is None:
            continue
        try:
            fmt = entry.load.get("format") or detect_format(path)
            if fmt not in _NAMED_FORMATS:
                continue
            if fmt in ("safetensors", "torch"):
                fine = any(t["name"] == var and t["square"] for t in list_weights(path, fmt))
            else:  # an .npz's arrays (an attention map's two, "Q,K"): a name not there is all that is looked at
                wanted = [v.strip() for v in var.split(",")] if fmt == "attention" else [var]
                with zipfile.ZipFile(path) as zf:
                    fine = set(wanted) <= {i.filename.removesuffix(".npy") for i in zf.infolist()}
            if fine:
                continue
            locate(entry, data_dir=data_dir, cache=cache)  # (a wrong file: its run says that, not this)
            with spelled_for("api"):
                open_matrix(path, **entry.load)  # (it fails at the name, before any data is read)
        except SfapproxError as exc:
            if isinstance(exc, ChecksumError):
                continue
            raise ManifestError(f"{entry.where}: {one_line(exc)}") from None
        except Exception:  # noqa: BLE001 - an unreadable file: its run records why, as for any file
            continue


#: The longest factors file name (bytes) a batch writes where its folder's file system does not say: the
#: one limit every output's name has (:func:`~sfapprox._atomic.name_over_limit`).  It was 210 (counting
#: ``factors/``) for the room a writer's temporary and a name kept aside add, but those are named by the
#: name's first bytes where the whole would be too long: a fit under a name of 203 to 255 bytes was refused
#: here that ``compare --save-factors`` saved.  Kept for scripts that read it.
FACTORS_NAME_MAX = NAME_MAX


def check_factor_names(names: list[str], manifest, out: str | os.PathLike | None = None) -> None:
    """Refuse entry names whose fits would write one factors file (:func:`~.runner.factors_name`): entry
    ``a``'s tsvd fit and entry ``a.tsvd``'s SF fit are both ``factors/a.tsvd.h5``, and the second
    overwrote the first, silently; and names whose factors file's name is longer than a file system takes,
    or whose full path is longer than Windows takes (:func:`~sfapprox._atomic.check_path_length`: each fit
    ran, then failed at its save).  Every registered method counts (a later run may add one).

    Parameters
    ----------
    names : list of str
        The entries' names.
    manifest : str or os.PathLike
        The manifest, named first in a refusal.
    out : str or os.PathLike, optional
        The output folder, whose file system's limit on a name counts where it says one (else 255 bytes).

    Raises
    ------
    ManifestError
        Naming the entries and the file they would share, or the entry and its name's length.
    ParameterError
        Naming the factors file whose full path is too long for Windows (a shorter name or output folder
        helps).
    """
    from .._base import methods

    owner: dict[str, tuple[str, str]] = {}
    for name in names:
        for method in methods():
            path = factors_name(name, method)
            target = Path(out or "") / path
            # each fit ran, then failed at its save; the name's limit in the manifest's words, then Windows'
            # on the whole path (check_name_length's two halves, each checked once: 5,000 entries' worth)
            over = name_over_limit(target)
            if over is not None:
                raise ManifestError(f"{manifest}: entry {name!r}: its factors file ({path[:40]}...) would have a "
                                    f"name of {over[0]:,} bytes, over the {over[1]:,} its file system takes; "
                                    "shorten the name")
            check_path_length(target, f"{manifest}: entry {name!r}: ",
                              f"shorten the entry's name or choose a shorter {parameter('out_dir')}")
            other = owner.setdefault(path, (name, method))
            if other[0] != name:
                raise ManifestError(f"{manifest}: entries {other[0]!r} ({other[1]}) and {name!r} ({method}) would "
                                    f"both save their factors as {path}; rename one of them")


def check_output_names(out: str | os.PathLike) -> None:
    """Refuse, before any work, an output folder where one of the files a batch writes there (its results,
    reports, lock) would have a path too long to write (:func:`~sfapprox._atomic.check_name_length`: on
    Windows, the whole path), found when written, after the fits.

    Raises
    ------
    ParameterError
        Naming the file, its path's length and the limit.
    """
    for name in (RESULTS_FILE, *REPORT_FILES, REPORTS_WRITTEN, HOLDER_FILE):
        check_name_length(Path(out) / name, hint=f"choose a shorter {parameter('out_dir')}")


def _fetch_missing(tasks: list[MatrixTask], cache: Path, network, write: Callable[[dict], None],
                   emit: Event) -> list[MatrixTask]:
    """Download, here and one after the other, the files not on this machine yet; return the tasks left to run.

    An entry whose file cannot be had (no URL, a failed download, a wrong
    hash) gets its ``unavailable`` lines here, with no worker started for
    it; once a download has failed for want of a network (``network``, a
    :class:`~sfapprox.datasets.fetch.NetworkState`), no other host is tried.
    Files already present are left to the runs, which verify them.
    """
    runnable = []
    for task in tasks:
        entry = task.entry
        data_dir = task.options.data_dir
        if entry.generator or is_present(entry, data_dir=data_dir, cache=cache):
            runnable.append(task)
            continue
        if entry.url is not None and not network.down:
            emit("fetch", name=entry.name)
        try:
            fetch_entry(entry, data_dir=data_dir, cache=cache, network=network)
        except Exception as exc:  # as in run_matrix: a file that cannot be had must not stop the batch
            for record in unavailable_records(task, exc):
                write(record)
            emit("matrix_done", name=entry.name)
            continue
        runnable.append(task)
    return runnable


def _run_serial(tasks: list[MatrixTask], write: Callable[[dict], None], on_event: Event | None,
                begun: dict[str, None]) -> bool:
    emit = on_event or (lambda *a, **k: None)
    try:
        for task in tasks:
            begun[task.entry.name] = None
            emit("matrix", name=task.entry.name)
            records = run_matrix(task, on_record=write, on_event=on_event)
            if any(r["status"] == "interrupted" for r in records):
                return True
            emit("matrix_done", name=task.entry.name)
    except KeyboardInterrupt:
        return True
    return False


def _worker_failure(task: MatrixTask, exc: BaseException) -> list[dict[str, Any]]:
    return _failed_records(task, f"worker failed: {one_line(exc)}")


def _failed_records(task: MatrixTask, error: str) -> list[dict[str, Any]]:
    """A ``failed`` record per method of ``task``, each with ``error``."""
    return [stamp({**base_record(task, method), "status": "failed", "error": error}) for method in task.methods]


def _worker_died(task: MatrixTask, exc: BaseException) -> list[dict[str, Any]]:
    """A ``failed`` record per method of a task whose Dask workers died running it (``KilledWorker``, after
    the scheduler's allowed retries): over their memory limit, or killed.  The batch goes on (it stopped
    with "the Dask cluster was lost", no line written, though the cluster ran the other tasks on).
    Said as a pass of ``compare --scheduler`` says it (:func:`~sfapprox._executors.worker_death`)."""
    error = (f"worker died: {worker_death(exc)}: over its memory limit, or killed, by this matrix or one beside "
             "it; see the worker's log, give the workers more memory (or set a lower "
             f"{parameter('max_memory')}) and run again")
    return _failed_records(task, error)


class _Received:
    """The pairs whose records came through as they finished (:class:`_RecordPipe`, :class:`_DaskRecords`),
    by matrix (entry names are unique in a batch), so that a task's result adds only the others."""

    def __init__(self, begun: dict[str, None] | None = None) -> None:
        self.sent: dict[str, set[str]] = {}
        self.begun = {} if begun is None else begun  # the matrices whose worker said it began them

    def take(self, message: dict[str, Any], write: Callable[[dict], None]) -> None:
        """Write a pair's record (once: :meth:`first`), or keep a worker's word that it began a matrix
        (:func:`_began`), or say its failed write of the kernels' cache, or that it found no folder for it
        (once for every worker: :func:`_share_compiled`, :func:`_cache_notes_told`)."""
        if "begun" in message:
            self.begun[message["begun"]] = None
        elif _CACHE_NOT_WRITTEN in message:
            _compiled.cache_not_written(message[_CACHE_NOT_WRITTEN])
        elif _NO_CACHE_FOLDER in message:
            _compiled.no_cache_folder(message[_NO_CACHE_FOLDER])
        elif self.first(message):
            write(message)

    def first(self, record: dict[str, Any]) -> bool:
        """Count ``record`` as come through; whether its pair is new (a Dask task retried on another worker,
        its first lost after a pair was sent, sends that pair again)."""
        sent = self.sent.setdefault(record["matrix"], set())
        new = record["method"] not in sent
        sent.add(record["method"])
        return new

    def rest(self, task: MatrixTask, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``task``'s records that did not come through (a failure's: those of the methods not run), less the
        interrupted ones (an interrupted pair is redone)."""
        sent = self.sent.get(task.entry.name, set())
        return [r for r in records if r["status"] != "interrupted" and r["method"] not in sent]


class _RecordPipe(_Received):
    """The pipe through which pool workers send each pair's record as it finishes (:func:`_run_in_worker`),
    read by the parent."""

    def __init__(self, context, begun: dict[str, None] | None = None) -> None:
        super().__init__(begun)
        self.reader, self.writer = context.Pipe(duplex=False)

    def receive(self, write: Callable[[dict], None]) -> None:
        """Write the records there now (each message is whole once there: see :data:`_WHOLE_WRITE`)."""
        while self.reader.poll():
            self.take(pickle.loads(self.reader.recv_bytes()), write)

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def _run_processes(tasks: list[MatrixTask], jobs: int, write: Callable[[dict], None], emit: Event,
                   begun: dict[str, None] | None = None) -> bool:
    jobs = min(jobs, len(tasks))
    # the cores this process may use, shared: os.cpu_count() is the host's, so under a container's CPU quota
    # each of 2 workers started 16 threads on 2 CPUs' worth of time on a 32-core host (throttled)
    threads = max(1, available_cores() // jobs)
    # spawn, not fork (Linux's default before Python 3.14): the parent may run threads by then (rich's
    # progress refresh, torch's and BLAS's pools once a fit ran here, a library caller's own), and a child
    # forked while one held a lock (stderr's, malloc's, libgomp's) waits for it forever; Python 3.12 warns
    # of it.  A fresh interpreter per worker costs its imports once per batch, not per matrix, and starts
    # the same way on Linux, macOS and Windows (tests/test_batch.py: spawned_not_forked)
    context = multiprocessing.get_context("spawn")
    pipe = _RecordPipe(context, begun)
    with children_keep_hang_ups_blocked():  # (the pool's queues start multiprocessing's resource tracker)
        pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_init,
                                   initargs=(threads, pipe.writer, _compiled.CACHE_FOLDER,
                                             _compiled.CACHE_WRITE_ERROR))
    interrupted = False
    finished = False
    try:
        with children_keep_hang_ups_blocked():  # the workers are started by the submits
            futures = {pool.submit(_run_in_worker, task): index for index, task in enumerate(tasks)}
        for task in tasks[:jobs]:
            emit("matrix", name=task.entry.name)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            pipe.receive(write)  # (a task's records are in the pipe before its result is back)
            for future in done:
                index = futures[future]
                try:
                    records = future.result()
                except Exception as exc:  # e.g. BrokenProcessPool when a worker was killed
                    records = _worker_failure(tasks[index], exc)
                for record in pipe.rest(tasks[index], records):
                    write(record)
                emit("matrix_done", name=tasks[index].entry.name)
        finished = True
    except KeyboardInterrupt:
        interrupted = True
    finally:
        try:
            if interrupted:  # the pairs finished before the stop: their lines, before the workers are stopped
                with contextlib.suppress(KeyboardInterrupt):
                    pipe.receive(write)
        finally:
            # After Ctrl-C/SIGTERM, or an error such as a full disk while writing a
            # line, stop the workers now instead of waiting for their fits.
            stopped = _stop_pool(pool, interrupted or not finished)
            pipe.close()
    return interrupted or stopped


def _stop_pool(pool, interrupted: bool) -> bool:
    """Shut the pool down: wait for it normally, terminate the workers (SIGTERM) when stopping early.

    Returns True when a stop signal (Ctrl-C, SIGTERM, SIGHUP) came while waiting for the pool: the workers are then
    terminated and the batch ends as interrupted, its lines written (the stop reached the CLI's
    last resort, which said that no output was written).
    """
    if not interrupted:
        try:
            pool.shutdown(wait=True)
            return False
        except KeyboardInterrupt:
            pass
    # ProcessPoolExecutor has no public "kill the workers": terminate them so
    # Ctrl-C returns within seconds instead of after the running fits.
    processes = list((getattr(pool, "_processes", None) or {}).values())  # (None once a shutdown ended)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + 2.0
    try:
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt:  # a second stop: the workers have their SIGTERM, stop waiting for them
        pass
    return not interrupted


def _run_on_dask(channel: str, task: MatrixTask) -> list[dict[str, Any]]:
    """:func:`run_matrix` in a Dask task, each finished pair's record put on the batch's queue ``channel`` at
    once (:class:`_DaskRecords`): the batch writes it then, not when the matrix's last method is done (a stop,
    or a worker lost, during a long fit lost the lines of the matrix's methods that had finished before it).

    The matrix stays one task: its methods share the matrix loaded (or its columns' source) and run one after
    the other on one worker, as on the other paths.  The methods whose records are on the queue are kept in a
    ``distributed.Variable`` of the matrix's (:func:`_sent_variable`): a task that Dask retries on another
    worker, its first one lost, runs only the others (their lines are written; a fit run again would write
    its factors file over the one its line describes)."""
    from distributed import Queue

    try:  # (the worker's client; released below: the queue counts its users)
        queue, sent = Queue(channel), _sent_variable(channel, task.entry.name)
        done = set(sent.get(timeout=0))
    except TimeoutError:  # unset (the batch sets it before the tasks start: see _DaskRecords.expect)
        done = set()
    except Exception:  # noqa: BLE001 - no queue, no stream: the records come with the task's result
        return run_matrix(task, on_event=stop_when_abandoned())

    def send(record: dict[str, Any]) -> None:
        # pickled (the queue takes msgpack's types only); put waits for the scheduler to hold it, so the record
        # is there before the next method starts, and before the task's end is known
        try:
            queue.put(pickle.dumps(record))
            done.add(record["method"])
            sent.set(sorted(done))  # (after the put: a method said sent is on the queue)
        except Exception:  # noqa: BLE001 - not sent: it comes with the task's result (_DaskRecords.rest)
            pass

    rest = tuple(m for m in task.methods if m not in done)
    with contextlib.suppress(Exception):  # (unsaid, the batch names none of this matrix's pairs as cut short)
        queue.put(pickle.dumps(_began(task)))
    try:
        with _cache_notes_told(queue, channel):
            # (stop_when_abandoned: a stopped batch's fit stops, where it kept the worker busy to its end)
            return run_matrix(dataclasses.replace(task, methods=rest), on_record=send,
                              on_event=stop_when_abandoned()) if rest else []
    finally:
        with contextlib.suppress(Exception):
            queue.close()


@contextlib.contextmanager
def _cache_notes_told(queue, channel: str) -> Iterator[None]:
    """A Dask task's notes about numba's cache (a failed write, no writable folder: :mod:`sfapprox._compiled`)
    put on its batch's queue ``channel``, whose process says them once (:meth:`_Received.take`): each worker
    process said them on its own, into its own log, and the batch said nothing.

    Those the worker said before (in an earlier batch, or in another thread's task) are told to this batch
    too, as the task begins and as it ends, once a batch.  Nothing is told in the batch's own process (a
    cluster of threads): the notes are said there as they come, once for the process."""
    if channel in _own_queues:
        yield
        return

    def tell(key: str, note) -> bool:
        return _tell(queue, channel, key, note)

    def said_before() -> None:
        if _compiled.CACHE_WRITE_ERROR is not None:
            tell(_CACHE_NOT_WRITTEN, _compiled.CACHE_WRITE_ERROR)
        if _compiled.CACHE_FOLDER_NOTE is not None:
            tell(_NO_CACHE_FOLDER, _compiled.CACHE_FOLDER_NOTE)

    said_before()
    try:
        with _compiled.reports_to(lambda exc: tell(_CACHE_NOT_WRITTEN, exc),
                                  lambda note: tell(_NO_CACHE_FOLDER, note)):
            yield
    finally:
        said_before()


def _tell(queue, channel: str, key: str, note) -> bool:
    """Put ``{key: note}`` on the batch's queue ``channel`` unless told it already; whether it is there (False:
    not sent, said by the worker instead)."""
    with _told_lock:
        told = _told.setdefault(channel, set())
        if key in told:
            return True
        told.add(key)
    try:
        queue.put(pickle.dumps({key: note}))
        return True
    except Exception:  # noqa: BLE001 - the queue is gone: said here, and a later task may tell it still
        with _told_lock:
            told.discard(key)
        return False


def _sent_variable(channel: str, matrix: str, client=None):
    """The ``distributed.Variable`` that holds the methods of ``matrix`` whose records are on ``channel``."""
    from distributed import Variable

    return Variable(f"{channel}/{matrix}", client=client)


class _DaskRecords(_Received):
    """The queue (``distributed.Queue``, on the scheduler) on which a Dask batch's tasks put each pair's record
    as it finishes (:func:`_run_on_dask`), read by the batch."""

    def __init__(self, client, begun: dict[str, None] | None = None) -> None:
        from distributed import Queue

        super().__init__(begun)
        self.client = client
        self.queue = _on_scheduler(Queue, f"sfapprox-batch-{os.getpid()}-{time.monotonic_ns()}", client=client)
        self.name = self.queue.name
        _own_queues.add(self.name)
        self.unwritten: list[dict[str, Any]] = []
        self.matrices: list[str] = []

    def expect(self, tasks: list[MatrixTask]) -> None:
        """Give each task's variable of the methods sent (:func:`_sent_variable`) its first value, none yet.

        Read unset, with no wait, the scheduler raised, and logged the TimeoutError as an ERROR with its
        traceback: one in the cluster's log for every matrix of every Dask batch.  The variables are set
        concurrently, in one wait: one after the other, a manifest of 5,000 matrices on a remote scheduler
        waited 5,000 round trips (25-50 s) before any task was sent, with nothing shown."""
        import asyncio

        names = [task.entry.name for task in tasks]
        variables = [_sent_variable(self.name, name, self.client) for name in names]

        async def set_all() -> None:  # (on the client's event loop: asynchronous=True gives each set's coroutine)
            await asyncio.gather(*(variable.set([], asynchronous=True) for variable in variables))

        self.matrices.extend(names)  # (first: a set that failed half-way leaves none behind, close deletes them all)
        _on_scheduler(self.client.sync, set_all)

    def receive(self, write: Callable[[dict], None]) -> None:
        """Write the records on the queue now; a pair's second one (its task retried by Dask on another worker,
        its first worker lost after the pair was sent) is not written again."""
        if getattr(self.client, "status", "running") == "running":  # (its scheduler gone: nothing to read)
            with deferred():  # taken off the scheduler's queue, a record is only here: a stop waits for it to be
                self.unwritten.extend(pickle.loads(data) for data in _on_scheduler(self.queue.get, batch=True))
        while self.unwritten:
            self.take(self.unwritten.pop(0), write)

    def close(self) -> None:
        """Release the queue, and the matrices' variables of what was sent (:func:`_run_on_dask`)."""
        _own_queues.discard(self.name)
        with contextlib.suppress(Exception):  # a scheduler gone took its queue with it
            for matrix in dict.fromkeys([*self.matrices, *self.sent]):
                _sent_variable(self.name, matrix, self.client).delete()
            self.queue.close()


def _on_scheduler(call: Callable, *args, **kwargs) -> Any:
    """``call(*args, **kwargs)``, a call to the scheduler (the records' queue); its loss is one
    :class:`~sfapprox.ResourceError`, as a task's (:func:`~sfapprox._executors.cluster_lost`)."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        lost = cluster_lost(exc, "the batch")
        if lost is None:
            raise
        raise lost from None


def _run_dask(tasks: list[MatrixTask], client, write: Callable[[dict], None], emit: Event,
              begun: dict[str, None] | None = None) -> bool:
    from dask.distributed import wait as wait_for  # (it looks up the futures' client: ``client``)

    futures: list = []
    channel = None
    finished = interrupted = False
    try:
        channel = _DaskRecords(client, begun)
        channel.expect(tasks)
        futures = _map_on_dask(client, functools.partial(_run_on_dask, channel.name), tasks)
        owner = {f.key: t for f, t in zip(futures, tasks)}
        for task in tasks:
            emit("matrix", name=task.entry.name)
        pending = list(futures)
        while pending:
            with contextlib.suppress(Exception):  # a timeout, or futures cancelled: their result() says which
                wait_for(pending, timeout=0.2, return_when="FIRST_COMPLETED")
            done = [f for f in pending if f.done()]
            pending = [f for f in pending if f not in done]
            channel.receive(write)  # after done was taken: a task's records are on the queue before its end
            for future in done:
                task = owner[future.key]
                for record in channel.rest(task, _dask_records(future, task)):
                    write(record)
                emit("matrix_done", name=task.entry.name)
        finished = True
    except KeyboardInterrupt:
        interrupted = True
        if channel is not None:  # the pairs finished before the stop: their lines, before the tasks are cancelled
            with contextlib.suppress(KeyboardInterrupt):
                channel.receive(write)
    finally:
        if not finished:  # a stop, or e.g. a full disk while writing a line: stop the cluster's work too
            client.cancel(futures)
        if channel is not None:
            channel.close()
    return interrupted


def _map_on_dask(client, fn: Callable, tasks: list[MatrixTask]) -> list:
    """``fn`` on each task on the cluster (its futures); tasks that do not pickle are said in one line."""
    try:
        with serialization_logs_off(client):
            return client.map(fn, tasks, pure=False)
    except Exception as exc:
        unsent = not_picklable(exc, "the batch's matrices (their manifest entries, the batch's options)")
        if unsent is None:
            raise
        raise unsent from None


def _dask_records(future, task: MatrixTask) -> list[dict[str, Any]]:
    """A finished Dask task's records: its result, or its pairs' ``failed`` lines (its workers died, it
    failed); a cluster lost stops the batch (no "failed" line for pairs that never ran)."""
    try:
        return future.result()
    except Exception as exc:
        if worker_death(exc) is not None:  # its workers died: this task's own end, not the cluster's
            return _worker_died(task, exc)
        lost = cluster_lost(exc, "the batch")
        if lost is not None:
            raise lost from None
        return _worker_failure(task, exc)
