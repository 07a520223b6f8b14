"""One batch per output folder: a second one refuses (naming the first) or waits; kill -9 frees the folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sfapprox import FitSettings
from sfapprox.datasets.batch import BatchOptions, run_batch
from sfapprox.datasets.folder_lock import HOLDER_FILE, FolderBusyError, folder_lock, read_holder

REPO = Path(__file__).resolve().parents[1]
TSVD = BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu"))

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock and POSIX signals")


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def manifest(folder: Path, n: int = 16) -> Path:
    path = folder / "m.toml"
    path.write_text(f'[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "attention"\n'
                    f'params = {{n = {n}, beta = 3.0}}\n', encoding="utf-8")
    return path


HOLDER = textwrap.dedent("""
    import sys, time
    from sfapprox.datasets.folder_lock import folder_lock
    with folder_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
""")


@pytest.fixture
def holder(tmp_path):
    """Start a process that holds the lock of tmp_path/out for a while; yields (process, folder)."""
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "hold.py"
    script.write_text(HOLDER)
    procs = []

    def start(seconds: float = 60.0):
        proc = subprocess.Popen([sys.executable, str(script), str(out), str(seconds)], stdout=subprocess.PIPE,
                                text=True, env=env())
        procs.append(proc)
        assert proc.stdout.readline().strip() == "locked"
        return proc, out

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_second_batch_refuses_at_once_naming_the_holder(tmp_path, holder):
    proc, out = holder()
    info = read_holder(out)
    assert info["pid"] == proc.pid and info["host"] and info["started"].endswith("UTC")
    start = time.monotonic()
    with pytest.raises(FolderBusyError) as caught:
        run_batch(manifest(tmp_path), out, TSVD)
    assert time.monotonic() - start < 5
    message = str(caught.value)
    assert message.startswith(f"{out}: another batch is using this folder (pid {proc.pid} on ")
    assert "or pass wait=True to start when it does" in message and "\n" not in message  # run_batch's keyword
    assert not (out / "results.jsonl").exists()  # nothing was run or written


def test_waiting_with_a_timeout_gives_up_with_the_holder(tmp_path, holder):
    proc, out = holder()
    waited = []
    start = time.monotonic()
    with pytest.raises(FolderBusyError, match=rf"pid {proc.pid} .*still busy after waiting"):
        run_batch(manifest(tmp_path), out, TSVD, wait=0.6,
                  on_event=lambda kind, **info: waited.append(info.get("holder")) if kind == "waiting" else None)
    assert 0.5 < time.monotonic() - start < 10
    assert len(waited) == 1 and f"pid {proc.pid}" in waited[0]


def test_waiting_starts_when_the_holder_ends(tmp_path, holder):
    proc, out = holder(seconds=1.5)
    summary = run_batch(manifest(tmp_path), out, TSVD, wait=True)
    assert proc.wait(10) == 0
    assert summary.written == 1 and not (out / HOLDER_FILE).exists()


def test_kill_9_of_the_holder_frees_the_folder(tmp_path, holder):
    proc, out = holder()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert (out / HOLDER_FILE).exists()  # what it said about itself is stale now...
    summary = run_batch(manifest(tmp_path), out, TSVD)  # ...but the kernel released its lock
    assert summary.written == 1 and not (out / HOLDER_FILE).exists()


def test_the_same_process_nests_and_releases(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with folder_lock(out):
        assert read_holder(out)["pid"] == os.getpid()
        summary = run_batch(manifest(tmp_path), out, TSVD)  # run_batch takes it again: nests
        assert summary.written == 1
        assert read_holder(out)["pid"] == os.getpid()
    assert not (out / HOLDER_FILE).exists()
    with folder_lock(out):  # released: can be taken again
        pass


def test_bad_wait_is_refused(tmp_path):
    from sfapprox import ParameterError

    with pytest.raises(ParameterError, match="wait"):
        run_batch(manifest(tmp_path), tmp_path / "out", TSVD, wait=-1)


def test_stale_temporaries_of_a_killed_batch_are_removed(tmp_path):
    out = tmp_path / "out"
    (out / "factors").mkdir(parents=True)
    stale = [out / ".results.jsonl.x1y2.tmp", out / "factors" / ".a.h5.q9.tmp"]
    for path in stale:
        path.write_bytes(b"half")
    others = [out / ".notes.txt.zz.tmp", out / ".report.md.abc.tmp"]  # not written under the lock: left alone
    for path in others:
        path.write_bytes(b"x")
    run_batch(manifest(tmp_path), out, TSVD)
    assert not [p for p in stale if p.exists()] and all(p.exists() for p in others)


@pytest.fixture
def gated_file(tmp_path):
    """A local HTTP server whose one file is held back until the test says so.

    Yields ``(url, requested, release)``: ``requested`` is set when a client
    asks for the file; the body then trickles out a byte every half second (so
    the client's read timeout never fires) until ``release`` is set.
    """
    import http.server
    import io
    import threading

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.random.default_rng(0).standard_normal((32, 32)))
    body = buffer.getvalue()
    requested, release = threading.Event(), threading.Event()

    class Gate(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            requested.set()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            sent = 0
            while not release.wait(0.5) and sent < len(body) - 1:
                self.wfile.write(body[sent:sent + 1])
                self.wfile.flush()
                sent += 1
            self.wfile.write(body[sent:])

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gate)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/a.npy", requested, release
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


def _line_reader(stream):
    """A queue that receives the lines of ``stream`` as they come (None at its end)."""
    import queue
    import threading

    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_two_real_batches_on_one_folder(tmp_path, gated_file):
    """The user starts the same batch twice: the second refuses at once; a third with --wait runs after.

    The first batch holds the folder for as long as the test needs, whatever
    the machine's load: it downloads its matrix under the lock, from a server
    that holds the file back until the second has been refused and the third
    is seen waiting.  (Holding it for a fixed fit time instead was flaky: a
    new interpreter importing torch can take longer than the fit to reach the
    lock on a busy machine, and then found the folder free.)
    """
    url, requested, release = gated_file
    m = tmp_path / "m.toml"
    m.write_text(f'[[matrix]]\nname = "a"\ncategory = "other"\nfile = "a.npy"\nurl = "{url}"\n', encoding="utf-8")
    out = tmp_path / "out"
    args = [sys.executable, "-m", "sfapprox.cli", "batch", str(m), "--out-dir", str(out), "--methods", "sf,tsvd",
            "--iters", "200", "--time-limit", "0", "--device", "cpu", "--quiet"]
    environ = dict(env(), SFAPPROX_CACHE=str(tmp_path / "cache"))
    first = subprocess.Popen(args, cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    third = first
    try:
        deadline = time.monotonic() + 120
        while not requested.wait(0.05):  # the first holds the folder and waits for its file
            if first.poll() is not None:
                pytest.fail(f"the first batch ended before asking for its file: {first.communicate()[1]}")
            assert time.monotonic() < deadline, "the first batch did not ask for its file within 120 s"
        assert read_holder(out).get("pid") == first.pid
        third = subprocess.Popen([*args, "--wait"], cwd=REPO, env=environ, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        third_lines = _line_reader(third.stderr)
        start = time.monotonic()
        second = subprocess.run(args, cwd=REPO, env=environ, capture_output=True, text=True, timeout=120)
        print(f"second batch refused {time.monotonic() - start:.2f} s after it started (interpreter start included)")
        assert second.returncode == 2, second.stderr
        [line] = second.stderr.strip().splitlines()
        assert line.startswith(f"error: {out}: another batch is using this folder (pid {first.pid} on ")
        third_err = []
        while not third_err or not third_err[-1].startswith("waiting:"):
            third_err.append(third_lines.get(timeout=120))
            assert third_err[-1] is not None, "".join(third_err[:-1])
        release.set()  # the first gets its file, fits, and ends undisturbed (its exit code below)
        _, first_err = first.communicate(timeout=180)
        third.wait(timeout=180)
        while (line := third_lines.get(timeout=10)) is not None:
            third_err.append(line)
        third_err = "".join(third_err)
    finally:
        release.set()
        for proc in (first, third):
            if proc.poll() is None:
                proc.kill()
    assert first.returncode == 0, first_err
    assert third.returncode == 0, third_err
    assert f"waiting: {out} is in use by another batch (pid {first.pid}" in " ".join(third_err.split())
    assert "2 finished pair(s) skipped" in third_err
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["matrix"], r["method"], r["status"]) for r in lines) == [("a", "sf", "ok"), ("a", "tsvd", "ok")]


def test_a_report_made_while_a_batch_runs_says_so_and_a_killed_ones_holder_file_does_not(tmp_path, holder):
    """`report OUT` while a batch ran there said "no results.jsonl; run 'sfapprox batch ...' first" before its
    first line, and of a table with the lines so far nothing at all."""
    from typer.testing import CliRunner

    from sfapprox.cli import app

    done = tmp_path / "done"
    run_batch(manifest(tmp_path), done, TSVD)
    proc, out = holder()
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.startswith(f"error: {out}: no result lines yet: the batch using this folder (pid {proc.pid} on ")
    assert line.endswith("has finished no pair so far; run this again later")
    (out / "results.jsonl").write_bytes((done / "results.jsonl").read_bytes())  # its first line
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert f"note: a batch is still running in {out} (pid {proc.pid} on " in said
    assert "this report holds the 1 line(s) it had finished so far" in said
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert read_holder(out)["pid"] == proc.pid  # left behind by the kill: no batch runs there now
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 0 and "still running" not in res.output, res.output
    (out / "results.jsonl").unlink()
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 2 and "run 'sfapprox batch MANIFEST" in res.output, res.output


def test_a_killed_batchs_holder_file_is_never_named_as_the_holder(tmp_path):
    """A batch killed outright leaves its holder file; the next one takes the lock and only then writes its
    own.  A third refused in between named the dead process (pid, start time, command) as the holder."""
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / HOLDER_FILE).write_text(json.dumps({"pid": int(dead.stdout), "host": __import__("socket").gethostname(),
                                               "started": "2020-01-01 00:00:00 UTC", "command": "sfapprox batch old"}))
    script = "import sys, filelock; l = filelock.FileLock(sys.argv[1]); l.acquire(); print('locked', flush=True); " \
             "sys.stdin.read()"  # holds the lock, its holder file not written yet, until the test closes stdin
    taker = subprocess.Popen([sys.executable, "-c", script, str(out / ".sfapprox-batch.lock")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env())
    try:
        assert taker.stdout.readline().strip() == "locked"
        with pytest.raises(FolderBusyError) as caught:
            run_batch(manifest(tmp_path), out, TSVD)
        assert "(holder unknown)" in str(caught.value) and "sfapprox batch old" not in str(caught.value)
        assert "or pass wait=True to start when it does" in str(caught.value)  # run_batch's keyword to Python
        from sfapprox._errors import spelled_for

        with spelled_for("cli"), pytest.raises(FolderBusyError, match=r"or pass --wait to start when it does$"):
            run_batch(manifest(tmp_path), out, TSVD)  # the batch command's option on its command line
        with pytest.raises(FolderBusyError, match=r"\(holder unknown\); still busy after waiting"):
            run_batch(manifest(tmp_path), out, TSVD, wait=0.3)
    finally:
        taker.stdin.close()
        taker.wait(10)
        taker.stdout.close()


def test_a_loop_of_links_as_the_folder_to_lock_is_a_one_line_error(tmp_path):
    """folder.resolve() raised 3.11's RuntimeError "Symlink loop" (a traceback) and let 3.13 go on."""
    from sfapprox import ParameterError

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ParameterError, match=r"a: a symbolic link that leads back to itself \(a loop\)"):
        with folder_lock(tmp_path / "a"):
            pass


def test_a_batch_leaves_no_lock_file_behind(tmp_path):
    out = tmp_path / "out"
    run_batch(manifest(tmp_path), out, TSVD)
    assert not (out / ".sfapprox-batch.lock").exists() and not (out / HOLDER_FILE).exists()


def test_an_outputs_lock_makes_no_folder_and_is_gone_after(tmp_path):
    from sfapprox._output_lock import output_lock

    with output_lock(tmp_path / "missing" / "f.h5"):  # its write will say the folder is missing
        assert not (tmp_path / "missing").exists()
    with output_lock(tmp_path / "f.h5"):
        assert sorted(p.name for p in tmp_path.iterdir()) == [".f.h5.sfapprox-lock", ".f.h5.sfapprox-lock.json"]
        assert read_holder(tmp_path) == {}  # (a file's holder is not the folder's)
    assert list(tmp_path.iterdir()) == []


def test_an_output_whose_lock_cannot_be_made_is_written_unlocked(tmp_path, monkeypatch):
    """A folder where the lock file cannot be created (another user's lock file, a read-only folder whose
    output's own write fails anyway): the lock never makes a fit impossible that could write its file."""
    import filelock
    import numpy as np

    from sfapprox import fit_matrix

    tried = []

    def refused(self, *args, **kwargs):
        tried.append(self.lock_file)
        raise PermissionError(13, "Permission denied", self.lock_file)

    monkeypatch.setattr(filelock.FileLock, "acquire", refused)
    path = tmp_path / "f.h5"
    fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), out=path)
    assert tried == [str(tmp_path / ".f.h5.sfapprox-lock")]  # the fit asked for its lock, and went on without it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.h5"]


@pytest.mark.parametrize("runner", ["fit", "batch"])
def test_a_file_system_without_locks_runs_unlocked(tmp_path, monkeypatch, runner):
    """filelock 3.12-3.24 (pyproject allows 3.12) raises NotImplementedError where the file system has no
    flock (a cluster's NFS or Lustre mounted without it): ``fit --out`` then ended in that traceback before
    reading its matrix, and a batch too.  Both run unlocked there, as before there were locks."""
    import filelock
    import numpy as np

    from sfapprox import fit_matrix

    def no_flock(self, *args, **kwargs):
        raise NotImplementedError("FileSystem does not appear to support flock; use SoftFileLock instead")

    monkeypatch.setattr(filelock.FileLock, "acquire", no_flock)
    if runner == "fit":
        fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), out=tmp_path / "f.h5")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["f.h5"]
    else:
        with pytest.warns(RuntimeWarning, match="no lock could be taken here .*a second batch in this folder"):
            summary = run_batch(manifest(tmp_path), tmp_path / "out", TSVD)
        assert (tmp_path / "out" / "results.jsonl").is_file(), summary


def test_filelocks_file_on_a_file_system_without_locks_is_not_left(tmp_path, monkeypatch):
    """filelock 3.12 opens (creates) the lock file, then raises NotImplementedError where flock says ENOSYS:
    every run on such a file system left a .f.h5.sfapprox-lock beside its output."""
    import errno
    import fcntl

    import numpy as np

    from sfapprox import fit_matrix

    def no_flock(fd, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    def as_filelock_3_12(self, *args, **kwargs):  # its _acquire: open with O_CREAT, flock, ENOSYS: NotImplemented
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            no_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise NotImplementedError("FileSystem does not appear to support flock; use SoftFileLock instead")

    import filelock

    monkeypatch.setattr(filelock.FileLock, "acquire", as_filelock_3_12)
    fit_matrix(np.eye(8), settings=FitSettings(max_iter=5, device="cpu"), out=tmp_path / "f.h5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.h5"]


def test_a_long_outputs_name_gets_a_lock_file_name_that_fits(tmp_path):
    from sfapprox._atomic import NAME_MAX
    from sfapprox._output_lock import output_lock, output_lock_files

    long = tmp_path / ("é" * 120 + ".h5")  # 243 bytes: its lock file's full name would be over NAME_MAX
    lock_file, holder_file = output_lock_files(long)
    assert len(os.fsencode(holder_file.name)) <= NAME_MAX and lock_file.name.endswith(".sfapprox-lock")
    with output_lock(long):
        assert holder_file.exists()


CHURN = textwrap.dedent("""
    import os, sys
    from sfapprox._output_lock import output_lock, OutputBusyError
    out, inside = sys.argv[1], sys.argv[1] + ".inside"
    got = overlaps = 0
    for _ in range(int(sys.argv[2])):
        try:
            with output_lock(out):
                try:
                    os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    overlaps += 1
                    continue
                got += 1
                os.unlink(inside)
        except OutputBusyError:
            pass
    print(got, overlaps)
""")


def test_an_outputs_lock_removed_at_each_end_never_has_two_holders(tmp_path):
    """Each holder removes the lock file as it ends: one who opened that file just before must not take it
    (it would hold a lock no longer named, beside the next holder of a new file).  Three processes taking
    and releasing one output's lock in a loop: never two inside at once, and no file left."""
    out = tmp_path / "f.h5"
    procs = [subprocess.Popen([sys.executable, "-c", CHURN, str(out), "400"], stdout=subprocess.PIPE, text=True,
                              env=env()) for _ in range(3)]
    results = [tuple(map(int, proc.communicate(timeout=120)[0].split())) for proc in procs]
    assert all(overlaps == 0 for _, overlaps in results) and sum(got for got, _ in results) >= 400, results
    assert list(tmp_path.iterdir()) == []
