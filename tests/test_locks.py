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
    assert "--wait" in message and "\n" not in message
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


def test_two_real_batches_on_one_folder(tmp_path):
    """The user starts the same batch twice: the second refuses at once; a third with --wait runs after."""
    m = manifest(tmp_path, n=64)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "sfapprox.cli", "batch", str(m), "--out-dir", str(out), "--methods", "sf,tsvd",
            "--iters", "100000", "--time-limit", "6", "--device", "cpu", "--quiet"]
    first = subprocess.Popen(args, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    third = first
    try:
        deadline = time.monotonic() + 120
        while read_holder(out).get("pid") != first.pid:
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1]
            time.sleep(0.05)
        # Started together, while the first fits for its 6 s.
        third = subprocess.Popen([*args, "--wait"], cwd=REPO, env=env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        second = subprocess.run(args, cwd=REPO, env=env(), capture_output=True, text=True, timeout=120)
        refused_after = time.monotonic() - start
        print(f"second batch refused {refused_after:.2f} s after it started (interpreter start included)")
        assert second.returncode == 2, second.stderr
        [line] = second.stderr.strip().splitlines()
        assert line.startswith(f"error: {out}: another batch is using this folder (pid {first.pid} on ")
        # (The refusal itself shows the overlap; the first one runs on undisturbed: its exit code below.)
        _, first_err = first.communicate(timeout=180)
        _, third_err = third.communicate(timeout=180)
    finally:
        for proc in (first, third):
            if proc.poll() is None:
                proc.kill()
    assert first.returncode == 0, first_err
    assert third.returncode == 0, third_err
    assert f"waiting: {out} is in use by another batch (pid {first.pid}" in " ".join(third_err.split())
    assert "2 finished pair(s) skipped" in third_err
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["matrix"], r["method"]) for r in lines) == [("a", "sf"), ("a", "tsvd")]  # each pair once
