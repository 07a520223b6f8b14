"""Resumable batch runs: every method on every matrix of a manifest, one JSON line each.

Results go to ``OUT/results.jsonl``, one line per (matrix, method).  A line is
built whole in memory (ending in ``"\\n"``) and written with a single
``os.write`` on a file opened with ``O_APPEND``, then fsync'ed, so even a
``kill -9`` never leaves half a line behind a complete one; a trailing
incomplete line (from a crash inside the write) is ignored when reading and
cut away when a run resumes.

Re-running the same command resumes: (matrix, method) pairs whose line says
``ok`` or ``not applicable`` are skipped; ``failed``, ``unavailable`` and
``interrupted`` pairs are tried again (their old lines are removed first, so
each pair has at most one line).  ``force=True`` recomputes everything
selected.

Matrices run one after the other, in parallel processes
(:class:`~concurrent.futures.ProcessPoolExecutor`, "spawn"), or on a Dask
cluster; the parent process does all the writing.  A matrix that cannot be
loaded gives ``unavailable`` lines, a method that raises gives a ``failed``
line; neither stops the batch.
"""

from __future__ import annotations

import json
import os
import signal
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._errors import ConvergenceWarning, ParameterError, SfapproxError
from ..comparison import SF_METHODS
from .manifest import Entry, load_manifest

__all__ = [
    "RESULTS_FILE",
    "DONE_STATUSES",
    "BatchOptions",
    "MatrixTask",
    "BatchSummary",
    "ResultsWriter",
    "ResultsFile",
    "read_results",
    "repair_results",
    "run_matrix",
    "run_batch",
]

RESULTS_FILE = "results.jsonl"
RECORD_FORMAT = "sfapprox-batch-record"
RECORD_VERSION = 1

#: Statuses that count as finished: resuming skips these pairs.
DONE_STATUSES = ("ok", "not applicable")

Event = Callable[..., None]


@dataclass(frozen=True)
class BatchOptions:
    """How every matrix of a batch is run.

    Attributes
    ----------
    methods : tuple of str
        Method names (``sfapprox.comparison.available_methods``).
    budget : str
        Budget spec for every method ("sf", a count, or a fraction of N²).
    protocol : {"default", "paper"}
        ``"paper"``: TSVD at rank ``ceil(M²/2)`` and SF's reference structure.
    iters : int or None
        SF's ``max_iter`` (None: ChordSF's default).
    time_limit : float or None, default=60.0
        SF's optimizer time limit per fit, in seconds (ChordSF's default);
        None: no limit, so results depend on ``iters`` alone.
    seed : int
    device : str
    data_dir : str or None
        Folder searched first for manifest files.
    save_factors : bool
        Write each SF fit to ``OUT/factors/<name>.h5`` (``sf+lr`` and ``sf+s``
        fits to ``OUT/factors/<name>.<method>.h5``).
    """

    methods: tuple[str, ...] = ("sf", "tsvd")
    budget: str = "sf"
    protocol: str = "default"
    iters: int | None = None
    time_limit: float | None = 60.0
    seed: int = 0
    device: str = "auto"
    data_dir: str | None = None
    save_factors: bool = True

    def settings(self) -> dict[str, Any]:
        """The options recorded in every line."""
        return {k: v for k, v in asdict(self).items() if k not in ("methods", "data_dir", "save_factors")}


@dataclass(frozen=True)
class MatrixTask:
    """One unit of work: the methods still to run on one entry (picklable)."""

    entry: Entry
    methods: tuple[str, ...]
    options: BatchOptions
    out_dir: str
    cache: str | None = None


@dataclass
class BatchSummary:
    """What a batch did: lines written, pairs skipped, statuses, whether it was cut short."""

    out_dir: str
    written: int = 0
    skipped: int = 0
    to_do: int = 0
    statuses: Counter = field(default_factory=Counter)
    interrupted: bool = False
    repaired: list[str] = field(default_factory=list)

    @property
    def results_path(self) -> Path:
        return Path(self.out_dir) / RESULTS_FILE


# ---------------------------------------------------------------------------
# the results file
# ---------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    from ..results import _jsonable as convert  # one definition of "plain JSON, NaN -> null"

    return convert(value)


def encode_record(record: dict[str, Any]) -> bytes:
    """One complete line: compact JSON (no NaN) plus ``"\\n"``, UTF-8."""
    return (json.dumps(_jsonable(record), allow_nan=False, ensure_ascii=False) + "\n").encode("utf-8")


class ResultsWriter:
    """Appends whole lines to a results file: one ``os.write`` per line, then fsync.

    ``O_APPEND`` puts every write at the current end of the file, and a line
    is never split over two writes, so a killed process leaves complete lines
    plus at most one partial tail (which :func:`read_results` ignores).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        data = encode_record(record)
        written = os.write(self._fd, data)
        if written != len(data):  # disk full: a short write; cut it back off
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
            raise OSError(f"{self.path}: short write ({written} of {len(data)} bytes); is the disk full?")
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class ResultsFile:
    """Parsed results: complete valid records, numbers of bad complete lines, partial tail bytes."""

    records: list[dict[str, Any]]
    bad_lines: list[int]
    tail_bytes: int

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The last record of each (matrix, method)."""
        return {(r["matrix"], r["method"]): r for r in self.records}


def read_results(path: str | os.PathLike) -> ResultsFile:
    """Read a results file, skipping a trailing incomplete line and invalid lines.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = p.write_bytes(b'{"matrix": "a", "method": "sf", "status": "ok"}\\n{"matrix": "b", "me')
    >>> r = read_results(p)
    >>> len(r.records), r.tail_bytes
    (1, 19)
    """
    path = Path(path)
    if not path.exists():
        return ResultsFile([], [], 0)
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n")
    records, bad = [], []
    if complete or data.startswith(b"\n"):
        for number, line in enumerate(complete.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                bad.append(number)
                continue
            if isinstance(record, dict) and {"matrix", "method", "status"} <= set(record):
                records.append(record)
            else:
                bad.append(number)
    return ResultsFile(records, bad, len(tail))


def repair_results(path: str | os.PathLike, drop: set[tuple[str, str]] = frozenset()) -> list[str]:
    """Make the results file hold only complete, valid lines not in ``drop``.

    A partial tail alone is truncated in place; invalid lines or lines to
    drop make the file be rewritten atomically.  Returns what was done, for
    the user.
    """
    from ..results import atomic_path

    path = Path(path)
    parsed = read_results(path)
    keep = [r for r in parsed.records if (r["matrix"], r["method"]) not in drop]
    done: list[str] = []
    if parsed.tail_bytes:
        done.append(f"cut an incomplete last line ({parsed.tail_bytes} bytes)")
    if parsed.bad_lines:
        done.append(f"removed {len(parsed.bad_lines)} invalid line(s): {parsed.bad_lines[:5]}")
    if len(keep) != len(parsed.records):
        done.append(f"removed {len(parsed.records) - len(keep)} line(s) to recompute")
    if parsed.bad_lines or len(keep) != len(parsed.records):
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"".join(encode_record(r) for r in keep))
    elif parsed.tail_bytes:
        os.truncate(path, path.stat().st_size - parsed.tail_bytes)
    return done


# ---------------------------------------------------------------------------
# one matrix
# ---------------------------------------------------------------------------


def _bytes(value: int | str | None) -> int | None:
    """``max_memory`` from a manifest: bytes, or text like "8G"."""
    if value is None or isinstance(value, int):
        return value
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = value.strip().lower().removesuffix("b").removesuffix("i")
    scale = units.get(text[-1:], 1)
    try:
        return int(float(text[:-1] if text[-1:] in units else text) * scale)
    except ValueError:
        raise ParameterError(f"max_memory={value!r}: use e.g. 8G, 500M or a byte count") from None


def _materialize(task: MatrixTask):
    """The entry's matrix as a LoadedMatrix plus extra info (generator facts)."""
    from ..io import as_loaded, load_matrix
    from .fetch import fetch_entry
    from .synthetic import generate

    entry = task.entry
    if entry.generator:
        generated = generate(entry.generator, entry.params)
        return as_loaded(generated.matrix, entry.name), generated.info
    cache = Path(task.cache) if task.cache else None
    found = fetch_entry(entry, data_dir=task.options.data_dir, cache=cache)
    options = dict(entry.load)
    options["max_memory"] = _bytes(options.get("max_memory"))
    loaded = load_matrix(found.path, **options)
    return loaded, {"origin": found.origin, "verified": found.verified}


def _base_record(task: MatrixTask, method: str) -> dict[str, Any]:
    entry = task.entry
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "matrix": entry.name,
        "category": entry.category,
        "method": method,
        "status": None,
        "n": None,
        "nnz": None,
        "budget": None,
        "fro_error": None,
        "rel_error": None,
        "seconds": None,
        "params": {},
        "settings": task.options.settings(),
        "reference": dict(entry.reference),
        "reproducible": entry.reproducible,
        "matrix_info": {},
        "factors": None,
        "reason": None,
        "error": None,
    }


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if isinstance(exc, SfapproxError) else f"{type(exc).__name__}: {text}"


def _stamp(record: dict[str, Any]) -> dict[str, Any]:
    record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return record


def _unavailable(task: MatrixTask, exc: BaseException) -> list[dict[str, Any]]:
    out = []
    for method in task.methods:
        record = _base_record(task, method)
        record.update(status="unavailable", error=_one_line(exc))
        out.append(_stamp(record))
    return out


def _matrix_info(loaded, extra: dict[str, Any]) -> dict[str, Any]:
    info = loaded.summary()
    info.update(extra)
    return info


#: Methods whose fits are saved to ``factors/`` (HDF5, loadable with :func:`~sfapprox.results.load_factors`).
SAVED_METHODS = (*SF_METHODS, "sf+lr", "sf+s")


def _save_sf(task: MatrixTask, est, record: dict[str, Any], loaded, method: str = "sf") -> str:
    from ..results import save_factors

    # Plain SF keeps the historical name; the other supports and the hybrids get the method in theirs.
    suffix = "" if method == "sf" else f".{method}"
    relative = f"factors/{task.entry.name}{suffix}.h5"
    save_factors(
        Path(task.out_dir) / relative,
        est.operator_,
        kind=method,
        loss_history=getattr(est, "loss_curve_", ()),
        fit={k: record[k] for k in ("fro_error", "rel_error", "seconds", "nnz", "n")} | record["params"],
        settings=task.options.settings(),
        source={"name": task.entry.name, "manifest": task.entry.manifest, "path": loaded.path,
                "sha256": loaded.sha256, "format": loaded.format},
    )
    return relative


def _run_one(task: MatrixTask, method: str, loaded, info: dict[str, Any], budget, fro_norm: float, callback) -> dict[str, Any]:
    from ..comparison import RunOptions, run_method

    opts = task.options
    sf: dict[str, Any] = {}
    if opts.iters is not None:
        sf["max_iter"] = opts.iters
    sf["time_limit"] = opts.time_limit
    run_opts = RunOptions(random_state=opts.seed, device=opts.device, sf=sf, callback=callback, protocol=opts.protocol)
    record = _base_record(task, method)
    record.update(n=loaded.n, budget=budget.value, budget_spec=budget.spec, matrix_info=info)
    keep: dict[str, Any] = {}
    try:
        result = run_method(method, loaded.matrix, budget.value, run_opts, fro_norm, keep=keep)
    except SfapproxError as exc:
        record.update(status="failed", error=_one_line(exc))
        return _stamp(record)
    except Exception as exc:  # isolate the failure to this (matrix, method) pair
        record.update(status="failed", error=_one_line(exc))
        return _stamp(record)
    record.update({k: v for k, v in result.to_dict().items() if k != "method"})
    if method in SAVED_METHODS and result.status == "ok" and opts.save_factors and "estimator" in keep:
        try:
            record["factors"] = _save_sf(task, keep["estimator"], record, loaded, method)
        except (OSError, SfapproxError) as exc:
            record["error"] = f"factors not saved: {_one_line(exc)}"
    return _stamp(record)


def run_matrix(task: MatrixTask, on_record: Callable[[dict], None] | None = None, on_event: Event | None = None) -> list[dict[str, Any]]:
    """Run the task's methods on its matrix; every outcome becomes a record.

    Parameters
    ----------
    task : MatrixTask
    on_record : callable, optional
        Called with each record as soon as it is ready (the serial runner
        writes it at once).
    on_event : callable, optional
        Progress events ``on_event("method", matrix=..., method=...)`` and
        ``on_event("iteration", ...)`` from SF.

    Returns
    -------
    list of dict
        One record per method run.  A ``KeyboardInterrupt`` outside SF
        propagates; inside SF it gives an ``"interrupted"`` record and stops.
    """
    from ..budget import resolve_budget

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # stop_reason is in the record
        try:
            loaded, extra = _materialize(task)
            budget = resolve_budget(task.options.budget, loaded.n)
        except Exception as exc:  # a missing or bad file (or a loader bug) must not stop the batch
            records = _unavailable(task, exc)
            for record in records:
                if on_record is not None:
                    on_record(record)
            return records
        return _run_methods(task, loaded, extra, budget, on_record, on_event)


def _run_methods(task: MatrixTask, loaded, extra: dict[str, Any], budget, on_record, on_event) -> list[dict[str, Any]]:
    """Every method of the task on the loaded matrix, stopping after an interrupted one."""
    import numpy as np

    emit = on_event or (lambda *a, **k: None)
    info = _matrix_info(loaded, extra)
    M = loaded.matrix
    fro_norm = float(np.linalg.norm(M.data if hasattr(M, "tocsr") else M))
    records = []
    for method in task.methods:
        emit("method", matrix=task.entry.name, method=method)
        callback = (lambda it: emit("iteration", matrix=task.entry.name, **it)) if on_event else None
        record = _run_one(task, method, loaded, info, budget, fro_norm, callback)
        records.append(record)
        if record["status"] == "interrupted":
            break
        if on_record is not None:
            on_record(record)
    return records


# ---------------------------------------------------------------------------
# the batch
# ---------------------------------------------------------------------------


def _worker_init(threads: int) -> None:
    """Process-pool workers: the parent handles Ctrl-C; share the cores; die with the parent."""
    import sys
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(max(1, threads))  # read by torch/BLAS when first imported
    if "torch" in sys.modules:  # a fork-like start that inherited torch
        sys.modules["torch"].set_num_threads(max(1, threads))
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent was killed (kill -9) stops within a second instead of fitting on."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def _check_options(options: BatchOptions, jobs: int, executor: str, scheduler: str | None) -> None:
    from ..comparison import available_methods

    known = available_methods()
    unknown = [m for m in options.methods if m not in known]
    if not options.methods or unknown:
        raise ParameterError(f"unknown method(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}")
    if len(set(options.methods)) != len(options.methods):
        raise ParameterError(f"methods {', '.join(options.methods)}: each method may be named once")
    from ..budget import parse_budget

    parse_budget(options.budget)  # a bad budget is refused before any work
    if options.protocol not in ("default", "paper"):
        raise ParameterError(f"protocol {options.protocol!r} must be 'default' or 'paper'")
    if jobs < 1:
        raise ParameterError(f"jobs={jobs} must be at least 1")
    if executor not in ("process", "dask"):
        raise ParameterError(f"executor {executor!r} must be 'process' or 'dask'")
    if executor == "dask" and not scheduler:
        raise ParameterError("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")


def plan(entries: Iterable[Entry], methods: tuple[str, ...], existing: ResultsFile, force: bool):
    """Pairs to run and stale lines to drop: ``(todo: dict[name, methods], drop, skipped)``."""
    latest = existing.latest()
    todo: dict[str, tuple[str, ...]] = {}
    drop: set[tuple[str, str]] = set()
    skipped = 0
    for entry in entries:
        pending = []
        for method in methods:
            key = (entry.name, method)
            old = latest.get(key)
            if old is not None and old.get("status") in DONE_STATUSES and not force:
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
) -> BatchSummary:
    """Run ``options.methods`` on every selected matrix of a manifest, resumably.

    Parameters
    ----------
    manifest_path : path
        A manifest (see :mod:`sfapprox.datasets.manifest`).
    out_dir : path
        Output folder: ``results.jsonl`` and ``factors/``; created if needed.
    options : BatchOptions
    only : list of str, optional
        Entry names to run (default: all).
    force : bool, default=False
        Recompute pairs that already have a finished line.
    jobs : int, default=1
        Matrices run in parallel processes ("spawn") when > 1.
    executor : {"process", "dask"}, default="process"
    scheduler : str, optional
        Dask scheduler address (``executor="dask"``).
    on_event : callable, optional
        Progress events: ``("start", total=, skipped=, pairs=)``,
        ``("matrix", name=)``, ``("method", matrix=, method=)``,
        ``("iteration", ...)``, ``("record", record=)``, ``("matrix_done", name=)``.

    Returns
    -------
    BatchSummary
        ``interrupted`` is True after a Ctrl-C (finished lines are kept).

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
    _check_options(options, jobs, executor, scheduler)
    manifest = load_manifest(manifest_path)
    entries = manifest.select(only)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "factors").mkdir(exist_ok=True)
    results = out / RESULTS_FILE
    todo, drop, skipped = plan(entries, options.methods, read_results(results), force)
    summary = BatchSummary(str(out), skipped=skipped, to_do=sum(len(m) for m in todo.values()))
    summary.repaired = repair_results(results, drop)
    from .fetch import cache_dir

    cache = str(cache_dir())
    tasks = [MatrixTask(e, todo[e.name], options, str(out), cache) for e in entries if e.name in todo]
    emit = on_event or (lambda *a, **k: None)
    emit("start", total=len(tasks), skipped=skipped, pairs=summary.to_do)
    with ResultsWriter(results) as writer:

        def write(record: dict[str, Any]) -> None:
            writer.write(record)
            summary.written += 1
            summary.statuses[record["status"]] += 1
            emit("record", record=record)

        if executor == "dask":
            summary.interrupted = _run_dask(tasks, scheduler, write, emit)
        elif jobs > 1 and len(tasks) > 1:
            summary.interrupted = _run_processes(tasks, jobs, write, emit)
        else:
            summary.interrupted = _run_serial(tasks, write, on_event)
    return summary


def _run_serial(tasks: list[MatrixTask], write: Callable[[dict], None], on_event: Event | None) -> bool:
    emit = on_event or (lambda *a, **k: None)
    try:
        for task in tasks:
            emit("matrix", name=task.entry.name)
            records = run_matrix(task, on_record=write, on_event=on_event)
            if any(r["status"] == "interrupted" for r in records):
                return True
            emit("matrix_done", name=task.entry.name)
    except KeyboardInterrupt:
        return True
    return False


def _worker_failure(task: MatrixTask, exc: BaseException) -> list[dict[str, Any]]:
    out = []
    for method in task.methods:
        record = _base_record(task, method)
        record.update(status="failed", error=f"worker failed: {_one_line(exc)}")
        out.append(_stamp(record))
    return out


def _run_processes(tasks: list[MatrixTask], jobs: int, write: Callable[[dict], None], emit: Event) -> bool:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    jobs = min(jobs, len(tasks))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=(threads,))
    interrupted = False
    try:
        futures = {pool.submit(run_matrix, task): task for task in tasks}
        for task in tasks[:jobs]:
            emit("matrix", name=task.entry.name)
        for future in as_completed(futures):
            task = futures[future]
            try:
                records = future.result()
            except Exception as exc:  # e.g. BrokenProcessPool when a worker was killed
                records = _worker_failure(task, exc)
            for record in records:
                if record["status"] != "interrupted":
                    write(record)
            emit("matrix_done", name=task.entry.name)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _stop_pool(pool, interrupted)
    return interrupted


def _stop_pool(pool, interrupted: bool) -> None:
    if not interrupted:
        pool.shutdown(wait=True)
        return
    # ProcessPoolExecutor has no public "kill the workers": terminate them so
    # Ctrl-C returns within seconds instead of after the running fits.
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + 2.0
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))


def _run_dask(tasks: list[MatrixTask], scheduler: str, write: Callable[[dict], None], emit: Event) -> bool:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise ParameterError(
            "--executor dask needs dask.distributed, an optional extra: pip install 'sfapprox[dask]'"
        ) from None
    try:
        client = Client(scheduler, timeout="10s")  # as_completed looks up the default client
    except (OSError, TimeoutError) as exc:
        raise ParameterError(f"cannot connect to the Dask scheduler at {scheduler} ({_one_line(exc)})") from None
    futures = []
    try:
        futures = client.map(run_matrix, tasks, pure=False)
        owner = {f.key: t for f, t in zip(futures, tasks)}
        for task in tasks:
            emit("matrix", name=task.entry.name)
        for future in as_completed(futures):
            task = owner[future.key]
            try:
                records = future.result()
            except Exception as exc:
                records = _worker_failure(task, exc)
            for record in records:
                if record["status"] != "interrupted":
                    write(record)
            emit("matrix_done", name=task.entry.name)
    except KeyboardInterrupt:
        client.cancel(futures)
        return True
    finally:
        client.close()
    return False

