"""What the benchmark scripts share: where they read and write, what they say about the run, how they write it.

Every script in this folder imports it as a sibling module (``from _common import ...``): run as
``python benchmarks/<name>.py``, Python puts the script's folder first on ``sys.path``, and a
benchmark imported by another one (``time_to_quality.py`` imports ``paper_table1.py``) finds it
the same way.  It imports nothing but the standard library, so that a script can still set the
BLAS thread variables before numpy is loaded (``palm4msa.py``, ``structured_table.py``).

Environment variables:

* ``SFAPPROX_BENCH_OUT``: the folder the results are written to (and read from, for the scripts'
  ``--merge`` / ``--render-only`` modes) instead of ``benchmarks/results``, e.g. for a trial run
  that must not overwrite the committed results.
* ``SFAPPROX_REALDATA``: the folder of the real matrices instead of ``../shared/realdata`` (the
  default of every ``--data-dir``).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

#: The repository root.
ROOT = Path(__file__).resolve().parents[1]
#: Where results are written: benchmarks/results, or $SFAPPROX_BENCH_OUT.
OUT = Path(os.environ.get("SFAPPROX_BENCH_OUT") or ROOT / "benchmarks" / "results").resolve()
#: The real matrices (the paper's Table 1 and the others): ../shared/realdata, or $SFAPPROX_REALDATA.
DEFAULT_DATA_DIR = Path(os.environ.get("SFAPPROX_REALDATA") or ROOT / ".." / "shared" / "realdata").resolve()


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


#: The 1-minute load average when the script started (this module is imported at its top).
LOAD_AVERAGE_AT_START = _load_average()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo when there is one, else ``platform.machine()``."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def machine(**extra: object) -> str:
    """What the numbers were measured on, in one line: CPU model, cores, Python, then ``extra``.

    Each extra reads ``name value`` (an underscore in the name reads as a space); ``None`` is left
    out.  Pass the versions of what the script measures, e.g. ::

        machine(numpy=np.__version__, torch=torch.__version__, default_threads=4)
        # 'AMD EPYC, 2 cores, Python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, default threads 4'
    """
    parts = [cpu_model(), f"{os.cpu_count()} cores", f"Python {platform.python_version()}"]
    parts += [f"{name.replace('_', ' ')} {value}" for name, value in extra.items() if value is not None]
    return ", ".join(parts)


def version(package: str) -> str | None:
    """An installed package's version without importing it (``None`` when it is not installed)."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def command_line() -> str:
    """How this script was run: ``python benchmarks/<name>.py`` and its arguments."""
    script = f"benchmarks/{Path(sys.argv[0]).name}"
    return " ".join(["python", script, *map(shlex.quote, sys.argv[1:])])


def meta(command: str | None = None, **extra: object) -> dict:
    """The run's description for the JSON: machine, date, load average at start, command, then ``extra``.

    ``command``: the command that reproduces the run (default: :func:`command_line`).  A
    ``machine=`` in ``extra`` replaces the bare :func:`machine` (to name the script's libraries).
    """
    out = {"machine": extra.pop("machine", None) or machine(), "date": time.strftime("%Y-%m-%d"),
           "load_average_at_start": LOAD_AVERAGE_AT_START, "command": command or command_line()}
    out.update(extra)
    return out


#: The heading under which a results file's findings are written by hand after a run.
FINDINGS = "## Findings (written by hand after the run)"


def findings_lines(data: dict, empty: str | None = None) -> list[str]:
    """The findings section of a results file: its heading and ``data["findings"]`` (kept across a rerun
    that merges into the file), or ``empty`` where there are none yet (None: no section)."""
    text = data.get("findings") or empty
    return [] if text is None else [FINDINGS, "", text, ""]


def run_tables(data: dict, header: list[str], cells) -> list[str]:
    """One Markdown table per run of ``data["runs"]`` (a heading with its name): ``header`` and, per row,
    ``cells(row)`` (its cells in the header's order), then the findings (:func:`findings_lines`)."""
    lines = []
    for name, rows in data["runs"].items():
        lines += [f"## {name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(c) for c in cells(r)) + " |" for r in rows]
        lines.append("")
    return lines + findings_lines(data)


def _unwritten(findings: str) -> bool:
    """Whether a findings section's text (what follows :data:`FINDINGS`) is empty or a one-line
    placeholder such as "(to be written)" or "(none yet)": nothing written by hand."""
    text = findings.strip()
    return not text or (text.startswith("(") and text.endswith(")") and "\n" not in text)


def keep_findings(text: str, path: Path) -> str:
    """``text`` with the hand-written findings of the results file at ``path`` where ``text`` has none
    of its own (no section, or an empty or placeholder one): a rerun wrote its "(to be written)" over
    them.  The section runs to the end of the file, as every script writes it."""
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    kept = old.split(FINDINGS, 1)[1] if FINDINGS in old else ""
    head, found, body = text.partition(FINDINGS)
    if _unwritten(kept) or (found and not _unwritten(body)):
        return text
    return head.rstrip("\n") + "\n\n" + FINDINGS + kept


def write_markdown(name: str, lines: list[str] | str) -> Path:
    """OUT/<name>.md: ``lines`` joined by newlines, with a final newline (a string is written as it is),
    keeping the file's hand-written findings where ``lines`` bring none (:func:`keep_findings`)."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.md"
    text = lines if isinstance(lines, str) else "\n".join(lines) + "\n"
    path.write_text(keep_findings(text, path), encoding="utf-8")
    return path


def write_results(name: str, data: dict | str, lines: list[str] | str) -> tuple[Path, Path]:
    """OUT/<name>.json (``data`` as JSON, indent 1, final newline) and OUT/<name>.md (:func:`write_markdown`).

    ``data`` may be JSON text already (a script that lays its file out one row per line).
    """
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path, write_markdown(name, lines)


#: What a child started by :func:`run_child` runs: the benchmark's function on the JSON arguments, its
#: JSON result on a line of its own.
_CHILD = ("import json, sys; sys.path.insert(0, sys.argv[1]); import importlib; "
          "f = getattr(importlib.import_module(sys.argv[2]), sys.argv[3]); "
          "print('RESULT', json.dumps(f(*json.loads(sys.argv[4]))))")


def proc_status(key: str) -> int:
    """Bytes of a memory line of Linux's ``/proc/self/status``: ``VmRSS`` (now) or ``VmHWM`` (the peak)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key + ":"))


def reset_peak() -> None:
    """Start ``VmHWM`` again from the RSS now (Linux), so that what came before does not count."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def checkout_env(checkout: str | None) -> dict:
    """This process's environment, with ``checkout``'s sfapprox first on ``PYTHONPATH`` when given: what
    :func:`run_child` needs to measure another checkout (a benchmark's ``--sfapprox``)."""
    env = dict(os.environ)
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(checkout).resolve()), env.get("PYTHONPATH", "")])
    return env


def run_child(module: str, function: str, args: list, env: dict | None = None, timeout: float | None = None):
    """``module.function(*args)`` in a fresh interpreter (its own peak memory, its own imports); its result.
    A child still running after ``timeout`` seconds is killed: ``{"killed_after": timeout}``.

    The child runs in this folder, so that ``-c``'s first path entry (the working directory) cannot put
    another checkout's sfapprox before the one its ``PYTHONPATH`` (``env``) asks for; ``args`` and the
    result travel as JSON.  A child that fails raises RuntimeError with the end of its stderr.
    """
    import subprocess

    here = str(Path(__file__).resolve().parent)
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, here, module, function, json.dumps(args)],
                              env=env, cwd=here, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"killed_after": timeout}
    line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"{module}.{function}{tuple(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def alternating_rows(module: str, sizes: list[int], rounds: int, extra: list, other: str, say) -> list[dict]:
    """``module.one(n, *extra)`` in a fresh process for each size, ``rounds`` times, this checkout and
    ``other`` (a benchmark's ``--sfapprox``) alternating: rows labelled ``checkout`` "before" / "after",
    each printed by ``say(row)`` as it comes.  Every row of one size must carry the same ``sha256`` (the
    matrix made, to the last bit): SystemExit otherwise."""
    envs = {"before": checkout_env(other), "after": checkout_env(str(ROOT))}
    rows: list[dict] = []
    for n in sizes:
        for _ in range(rounds):
            for label, env in envs.items():
                rows.append({"checkout": label, **run_child(module, "one", [n, *extra], env=env)})
                print(f"N={n} {label}: {say(rows[-1])}", flush=True)
        if len({r["sha256"] for r in rows if r["n"] == n}) != 1:
            raise SystemExit(f"N={n}: the two checkouts formed different matrices")
    return rows


def run_parallel(fn, tasks: list[tuple], jobs: int, describe) -> list:
    """``fn(*task)`` for every task in ``jobs`` worker processes; the results in the order they finish.

    Each result is reported on stderr as it comes, after the seconds since the start:
    ``[    12s] <describe(result)>``.
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed

    start = time.perf_counter()
    results = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for fut in as_completed([pool.submit(fn, *t) for t in tasks]):
            results.append(fut.result())
            print(f"[{time.perf_counter() - start:6.0f}s] {describe(results[-1])}", file=sys.stderr, flush=True)
    return results


#: Runs one command and prints its exit code, seconds and peak RSS (KiB) as JSON: a fresh wrapper per
#: run, so that ``RUSAGE_CHILDREN`` is that run's alone.
_WRAPPER = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(json.dumps({'rc': r.returncode, 'seconds': time.perf_counter() - t, "
            "'maxrss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'stderr': r.stderr[-600:]}))")


def measure_command(command: list[str], env: dict | None = None, cwd: str | None = None) -> dict:
    """Run ``command`` in a fresh wrapper process; its ``rc``, wall ``seconds``, peak RSS
    ``maxrss_kib`` (measured: ``getrusage(RUSAGE_CHILDREN).ru_maxrss``) and the end of its ``stderr``."""
    import subprocess
    import tempfile

    done = subprocess.run([sys.executable, "-c", _WRAPPER, *command], env=env, capture_output=True, text=True,
                          cwd=cwd or tempfile.gettempdir(), check=True)
    return json.loads(done.stdout)


def add_checkout_options(ap, tag: str) -> None:
    """The options of a benchmark that measures this checkout or another one, table by table:
    ``--sfapprox``, ``--label``, ``--merge`` and ``--tag``."""
    ap.add_argument("--sfapprox", help="another checkout to measure (its sfapprox first on PYTHONPATH)")
    ap.add_argument("--label", help="the heading of this checkout's table (default: 'now', or the checkout)")
    ap.add_argument("--merge", action="store_true", help="add this run's table to the tag's existing results")
    ap.add_argument("--tag", default=tag)


def checkout_label(args) -> str:
    """The heading of this run's table (:func:`add_checkout_options`)."""
    return args.label or (f"before ({args.sfapprox})" if args.sfapprox else "now")


def write_runs(args, rows: list, fresh: dict, render) -> None:
    """Write ``rows`` as the run ``checkout_label(args)`` of OUT/<tag>: added to the tag's results with
    ``--merge`` (else a new file of ``fresh``'s keys and the run's meta), each command that made a run
    listed once; ``render(data)`` gives the Markdown lines."""
    path = OUT / f"{args.tag}.json"
    old = json.loads(path.read_text()) if args.merge and path.exists() else None
    data = old or {"meta": meta(), **fresh, "runs": {}}
    data["runs"][checkout_label(args)] = rows
    data["commands"] = [c for c in data.get("commands", []) if c != meta()["command"]] + [meta()["command"]]
    write_results(args.tag, data, render(data))


def add_file_options(ap, name: str, sizes: list[int], what: str) -> None:
    """The options of a benchmark that writes files of given sizes and measures each: ``--sizes`` (MB of
    ``what`` per file), ``--data-dir`` (where they are written, kept for a rerun) and ``--name`` (the
    results file's)."""
    import tempfile

    ap.add_argument("--sizes", type=int, nargs="+", default=sizes, help=f"MB of {what} per file")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), f"{name}_data"),
                    help="where the files are written (kept for a rerun)")
    ap.add_argument("--name", default=name, help="results file name (benchmarks/results/NAME.md/.json)")


def file_rows(args, items: list[str], make, measure) -> dict:
    """``measure(item, make(item, mb, folder))`` for each item and size of :func:`add_file_options`' ``args``,
    in ``args.data_dir``; the run's results (meta with numpy's and scipy's versions, the load at its end,
    and the rows)."""
    folder = Path(args.data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [measure(item, make(item, mb, folder)) for item in items for mb in args.sizes]
    return {"meta": meta(machine=machine(numpy=version("numpy"), scipy=version("scipy")),
                         load_average_at_end=os.getloadavg()[0]), "rows": rows}


def file_rows_heading(title: str, out: dict, note: str) -> list[str]:
    """The head of a :func:`file_rows` results file: its title, machine, and command with the load at its
    start and end, and ``note`` (the units)."""
    m = out["meta"]
    return [f"# {title}", "", f"Machine: {m['machine']}", "",
            f"Command: `{m['command']}` (load average at start {m.get('load_average_at_start', '?')}, at end "
            f"{m['load_average_at_end']:.2f}; {note})", ""]
