"""One matrix of a batch: load or generate it, run the methods through the comparison engine,
turn every outcome into a results-file record, and save the fitted surrogates.

A matrix that cannot be loaded gives ``unavailable`` records, a method that
raises gives a ``failed`` record; neither stops the batch.  Everything here
is picklable and runs the same in the parent process, a spawned worker or a
Dask worker.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._atomic import check_named_file
from .._base import RunContext, get_method, parse_methods
from .._errors import ConvergenceWarning, SfapproxError, one_line, spelled_for
from .._settings import COUNT_INDICES, DEFAULT_METHODS, PROTOCOLS, FitSettings, parse_size
from ..budget import resolve_budget
from ..comparison import as_loaded_matrix, from_columns, matrix_record, run_all, score_from_columns, with_pass_norm
from ..factors import input_record, save_factors
from ..sources import MatrixSource
from .fetch import ChecksumError, UnavailableError, fetch_entry, file_sha256
from .manifest import Entry
from .results_file import FILE_MISSING, RECORD_FORMAT, RECORD_VERSION
from .synthetic import generate

__all__ = ["BatchOptions", "MatrixTask", "run_matrix", "base_record", "stamp", "unavailable_records"]

Event = Callable[..., None]


@dataclass(frozen=True)
class BatchOptions:
    """How every matrix of a batch is run.

    Attributes
    ----------
    methods : tuple of str, default=DEFAULT_METHODS
        Method names (:func:`sfapprox.available_methods`); by default SF, TSVD
        and plain sparse storage, as ``compare`` and the command line's ``batch``.
        One string is read as ``compare`` reads it (``"tsvd,sparse"``, ``"all"``).
    budget : str
        Budget spec for every method ("sf", a count, or a fraction of N²).
    protocol : {"default", "paper"}
        ``"paper"``: TSVD at rank ``ceil(M²/2)`` and SF's reference structure.
    settings : FitSettings
        Iterations, time limit, seed, device, dtype, threads, memory limit of every fit.
    count_indices : bool
        Charge sparse entries for their positions too.
    data_dir : str or None
        Folder searched first for manifest files.
    save_factors : bool
        Write each fitted surrogate to ``OUT/factors/<name>.<method>.h5``
        (plain SF: ``OUT/factors/<name>.h5``).
    """

    methods: tuple[str, ...] = DEFAULT_METHODS
    budget: str = "sf"
    protocol: str = PROTOCOLS[0]
    settings: FitSettings = field(default_factory=FitSettings)
    count_indices: bool = COUNT_INDICES
    data_dir: str | None = None
    save_factors: bool = True

    def __post_init__(self) -> None:
        # one string, as compare takes it: "tsvd,sparse" was kept as a string, and the check of the names
        # said "methods t, s, v, d, ,, ...: each method may be named once"
        if isinstance(self.methods, str):
            object.__setattr__(self, "methods", tuple(parse_methods(self.methods)))

    def recorded(self) -> dict[str, Any]:
        """The options recorded in every line (what makes two runs comparable).

        Returns
        -------
        dict of str to Any
            ``budget``, ``protocol``, ``count_indices`` and the :class:`~sfapprox.FitSettings` fields.
        """
        return {"budget": self.budget, "protocol": self.protocol, "count_indices": self.count_indices,
                **self.settings.to_dict()}


@dataclass(frozen=True)
class MatrixTask:
    """One unit of work: the methods still to run on one entry (picklable).

    Attributes
    ----------
    entry : Entry
        The manifest entry.
    methods : tuple of str
        The methods still to run on it (finished pairs are left out on resume).
    options : BatchOptions
        How every matrix of the batch is run.
    out_dir : str
        The batch's output folder (factors go to ``out_dir/factors``).
    cache : str or None, default=None
        The download cache; None: :func:`~sfapprox.datasets.fetch.cache_dir`.
    reader : {"api", "cli"}, default="api"
        How the run's messages spell the batch's own options, its caller's way (``--max-memory`` where they
        were typed, :func:`~sfapprox._errors.spelled_for`); the entry's reading options are always its
        manifest's keys (``var = "A"``).  Carried, as a worker process has its own setting.
    position : int or None, default=None
        The entry's place among the batch's entries (0-based), recorded in its lines: a report lists
        the matrices in this order, not in the order ``--jobs`` or a cluster happened to finish them.
    """

    entry: Entry
    methods: tuple[str, ...]
    options: BatchOptions
    out_dir: str
    cache: str | None = None
    reader: str = "api"
    position: int | None = None


def stamp(record: dict[str, Any]) -> dict[str, Any]:
    """Set the record's ``finished`` time (now).

    Parameters
    ----------
    record : dict
        A record; its ``finished`` field is set (UTC, ISO 8601, seconds) in place.

    Returns
    -------
    dict
        ``record`` itself.
    """
    record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return record


def entry_definition(entry: Entry) -> dict[str, Any]:
    """What makes an entry's matrix, as a record stores it (JSON types): a resumed batch redoes a
    finished pair whose entry now says otherwise (another generator parameter, file or load option).

    Parameters
    ----------
    entry : Entry
        A manifest entry.

    Returns
    -------
    dict
        ``file``, ``url``, ``member``, ``companions``, ``generator``, ``params`` and ``load``.
    """
    fields = {"file": entry.file, "url": entry.url, "member": entry.member, "companions": list(entry.companions),
              "generator": entry.generator, "params": entry.params, "load": entry.load}
    return json.loads(json.dumps(fields, sort_keys=True, default=str))


def file_stamp(path: str | os.PathLike) -> dict[str, int]:
    """A file's size and modification time (ns): what tells, without reading it, that it changed."""
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def base_record(task: MatrixTask, method: str) -> dict[str, Any]:
    """A record with every field present (the ones not yet known are None).

    Parameters
    ----------
    task : MatrixTask
        Its entry and options fill the matrix's and the run's fields.
    method : str
        The record's method.

    Returns
    -------
    dict
        ``status`` None, ``settings`` the options' recorded values.
    """
    entry = task.entry
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "matrix": entry.name,
        "position": task.position,
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
        "settings": task.options.recorded(),
        "reference": dict(entry.reference),
        "reproducible": entry.reproducible,
        "matrix_info": {},
        "factors": None,
        "reason": None,
        "error": None,
        "source": entry_definition(entry),
    }


def _materialize(task: MatrixTask):
    """The entry's matrix plus extra info (generator facts, file origin): a LoadedMatrix, or a
    :class:`~sfapprox.sources.MatrixSource` (a kernel entry, a big ``.npy``) too big to form
    within the batch's memory limit, whose methods then run from its columns."""
    from ..io import as_loaded, open_matrix  # here: sfapprox.io loads h5py and Pillow

    entry = task.entry
    limit = task.options.settings.max_memory_bytes  # the batch's --max-memory holds for making the matrix too
    if entry.generator:
        generated = generate(entry.generator, entry.params, max_memory=limit)
        return as_loaded(generated.matrix, entry.name), generated.info
    cache = Path(task.cache) if task.cache else None
    found = fetch_entry(entry, data_dir=task.options.data_dir, cache=cache)
    options = dict(entry.load)
    own = parse_size(options.get("max_memory"), what=f"{entry.name}: max_memory")
    options["max_memory"] = own if limit is None else limit if own is None else min(own, limit)
    opened = open_matrix(found.path, **options)
    extra = {"origin": found.origin, "verified": found.verified, "file_stamp": file_stamp(found.path)}
    if not isinstance(opened, MatrixSource):
        return opened, extra
    opened.name = entry.name
    # the entry's own limit holds for making its matrix (formed or not), as it held for reading the file
    making = options["max_memory"]
    if from_columns(opened, task.methods, making):
        return opened, {**extra, "path": "columns"}
    # formed, with its file, hash and recipe, as a comparison forms it; a mapped .npy was not hashed when
    # opened: a saved fit names the data it came from, as a loaded file's does
    loaded = as_loaded_matrix(opened, None, making)
    return (loaded if loaded.sha256 else replace(loaded, sha256=file_sha256(found.path))), extra


def factors_name(entry_name: str, method: str) -> str:
    """The factors file of an entry's fit, relative to the batch folder: ``factors/<entry>[.<method>].h5``
    (plain SF keeps the historical name; the other methods get theirs in the file name)."""
    suffix = "" if method == "sf" else f".{method}"
    return f"factors/{entry_name}{suffix}.h5"


def _save(task: MatrixTask, result, record: dict[str, Any], loaded) -> str:
    relative = factors_name(task.entry.name, result.method)
    # a named pipe there was written through: the batch waited for a reader nobody would start
    check_named_file(Path(task.out_dir) / relative, "choose another output folder")
    save_factors(
        Path(task.out_dir) / relative,
        result.operator,
        kind=result.method,
        loss_history=getattr(result.estimator, "loss_curve_", ()),
        fit=record["params"] | {k: record[k] for k in ("fro_error", "rel_error", "seconds", "nnz", "n")},
        settings=task.options.recorded(),
        source={**input_record(loaded), "name": task.entry.name, "manifest": task.entry.manifest},
    )
    return relative


def _record(task: MatrixTask, result, loaded, info: dict[str, Any], budget) -> dict[str, Any]:
    record = base_record(task, result.method)
    record.update(n=loaded.n, budget=budget.value, budget_spec=budget.spec, matrix_info=info)
    record.update({k: v for k, v in result.to_dict().items() if k != "method"})
    if result.status == "failed":
        record["error"] = result.reason
    saves = get_method(result.method).saves
    if result.status == "ok" and abandoned():  # its batch was stopped: nothing of it goes into the folder now
        record.update(status="interrupted", reason="its batch was stopped before it finished")
        return stamp(record)
    if saves and result.status == "ok" and task.options.save_factors and result.operator is not None:
        try:
            record["factors"] = _save(task, result, record, loaded)
        except (OSError, SfapproxError) as exc:
            # Not "ok": a re-run must redo this pair, or its factors would never be written.
            record.update(status="failed", error=f"factors not saved: {one_line(exc)}")
    return stamp(record)


def abandoned() -> bool:
    """True in a Dask worker's task that its client cancelled: the batch that sent it was stopped (Ctrl-C,
    SIGTERM, a lost line) and no longer holds its folder.

    Dask cannot stop a task that runs: the worker ran the matrix's methods on and wrote their factors
    files into the folder after the batch had ended (and released its lock), under the next batch's feet.
    """
    if "distributed" not in sys.modules:
        return False
    try:
        from distributed.worker import get_worker, thread_state

        key = getattr(thread_state, "key", None)
        state = get_worker().state.tasks.get(key) if key is not None else None
    except (ImportError, ValueError, AttributeError):  # not on a worker (get_worker: ValueError), another dask
        return False
    return state is not None and getattr(state, "state", None) in ("cancelled", "released", "forgotten")


def stop_when_abandoned(every: float = 0.2) -> Event:
    """A progress handler for :func:`run_matrix` in a Dask task: it stops the running method (a
    ``KeyboardInterrupt``, as Ctrl-C stops it) once the task is :func:`abandoned`.

    Cancelling a task does not stop it: a batch stopped during a long SF fit left the fit running on
    the worker to its end, its thread busy (the next batch's matrices waited for it) and its result
    thrown away.  Checked at most every ``every`` seconds (each iteration and phase calls it).

    Parameters
    ----------
    every : float, default=0.2
        Seconds between two looks at the task's state.

    Returns
    -------
    callable
        ``on_event(kind, **info)``.
    """
    last = [time.monotonic()]

    def on_event(kind: str, **info: Any) -> None:
        # only inside a fit, whose run catches it as Ctrl-C: raised by another event (run_matrix's "method",
        # outside that guard) it reached the worker, which Dask closes on a task's KeyboardInterrupt
        now = time.monotonic()
        if kind != "iteration" or now - last[0] < every:
            return
        last[0] = now
        if abandoned():
            raise KeyboardInterrupt

    return on_event


def unavailable_records(task: MatrixTask, exc: BaseException) -> list[dict[str, Any]]:
    """One ``unavailable`` record per method of the task: its matrix could not be had (``exc`` says why).

    ``reason`` is :data:`FILE_MISSING` when the file is neither present nor
    downloadable, ``"checksum mismatch"`` for a file that differs from the
    manifest, None otherwise (a file that does not load: ``error`` says why).
    A file entry's records also keep, in ``matrix_info``, the manifest and the
    data folder looked in, so a report can say where to get the file.

    Parameters
    ----------
    task : MatrixTask
        Whose methods get a record each.
    exc : BaseException
        Why the matrix could not be had (its one-line message becomes ``error``).

    Returns
    -------
    list of dict
    """
    entry = task.entry
    reason = None
    if isinstance(exc, UnavailableError):
        reason = FILE_MISSING
    elif isinstance(exc, ChecksumError):
        reason = "checksum mismatch"
    info = {"manifest": entry.manifest, "data_dir": task.options.data_dir} if entry.file else {}
    out = []
    for method in task.methods:
        record = base_record(task, method)
        record.update(status="unavailable", error=one_line(exc), reason=reason, matrix_info=dict(info))
        out.append(stamp(record))
    return out


def run_matrix(task: MatrixTask, on_record: Callable[[dict], None] | None = None,
               on_event: Event | None = None) -> list[dict[str, Any]]:
    """Run the task's methods on its matrix; every outcome becomes a record.

    Parameters
    ----------
    task : MatrixTask
        The entry, the methods to run on it and the batch's options.
    on_record : callable, optional
        Called with each record as soon as it is ready (the serial runner
        writes it at once).
    on_event : callable, optional
        Progress events ``on_event("method", matrix=..., method=...)`` and
        ``on_event("iteration", ...)`` from the iterative methods.

    Returns
    -------
    list of dict
        One record per method run.  A ``KeyboardInterrupt`` inside a method
        gives an ``"interrupted"`` record and stops (that record is returned
        but not passed to ``on_record``: an interrupted pair is redone).
    """
    # the entry's reading options are its manifest's keys (var = "A"), the keywords' own names: its
    # messages name them so, also where the batch command's own options are spelled as typed (--jobs 2);
    # the methods' messages name the batch's own options (its limit) as its caller typed them: a batch
    # run from the command line said "raise the limit with max_memory=" of a --max-memory
    with warnings.catch_warnings(), spelled_for(task.reader):
        warnings.simplefilter("ignore", ConvergenceWarning)  # stop_reason is in the record
        try:
            with spelled_for("api"):
                loaded, extra = _materialize(task)
            budget = resolve_budget(task.options.budget, loaded.n)
        except Exception as exc:  # a missing or bad file (or a loader bug) must not stop the batch
            records = unavailable_records(task, exc)
            for record in records:
                if on_record is not None:
                    on_record(record)
            return records
        emit = on_event or (lambda *a, **k: None)
        name = task.entry.name
        streamed = isinstance(loaded, MatrixSource)
        # the record of a comparison's matrix, of the same keys formed or from columns (its ||X||_F from the
        # first exact scoring pass there)
        info = {**matrix_record(loaded.summary(), columns=streamed), **extra}
        options = task.options
        callback = (lambda it: emit("iteration", matrix=name, **it)) if on_event else None
        settings = options.settings.per_method(len(options.methods))
        context = RunContext(settings, options.count_indices, options.protocol, callback, matrix_name=name)
        records: list[dict[str, Any]] = []

        def done(result) -> None:
            nonlocal info
            if streamed:  # fitted on columns: scored from them too, as compare's rows
                estimates = score_from_columns(loaded, [result], settings)
                info = with_pass_norm(info, estimates, None)  # a new dict: the records written keep theirs
            record = _record(task, result, loaded, info, budget)
            records.append(record)
            if on_record is not None and record["status"] != "interrupted":
                on_record(record)

        for method in task.methods:
            if abandoned():  # (see abandoned: the rest of a cancelled task's methods are not run)
                break
            emit("method", matrix=name, method=method)
            matrix = loaded if isinstance(loaded, MatrixSource) else loaded.matrix
            results = run_all([method], matrix, budget, context, info.get("fro_norm"), done, isolate=True)
            if results and results[-1].status == "interrupted":
                break
        return records

