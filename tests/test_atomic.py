"""Atomic writes: whole files or none, never an overwrite without force, nothing left on a full disk."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sfapprox import SfapproxError
from sfapprox._atomic import OutputError, OutputExistsError, atomic_path, write_json, write_text, written_outputs

REPO = Path(__file__).resolve().parents[1]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_atomic_json_and_no_overwrite(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, {"a": float("nan"), "b": np.float64(2.5), "c": np.arange(2)})
    assert json.loads(path.read_text()) == {"a": None, "b": 2.5, "c": [0, 1]}
    assert written_outputs()[-1] == path
    with pytest.raises(SfapproxError, match="already exists, so it was left untouched; this result was saved as"):
        write_json(path, {"new": 1}, force=False)
    assert json.loads(path.read_text())["b"] == 2.5
    assert json.loads((tmp_path / f"r.{os.getpid()}.new.json").read_text()) == {"new": 1}


# ------------------------------------------------------------------ no clobbering at the final move


def test_a_file_created_during_the_write_is_kept_and_so_is_the_result(tmp_path):
    path = tmp_path / "f.json"
    with pytest.raises(OutputExistsError) as info:
        with atomic_path(path, force=False) as tmp:
            tmp.write_text("the finished result")
            path.write_text("the user's file")  # another program, while we worked
    assert path.read_text() == "the user's file"
    kept = info.value.kept
    assert kept == tmp_path / f"f.{os.getpid()}.new.json" and kept.read_text() == "the finished result"
    message = str(info.value)
    assert str(path) in message and str(kept) in message and "left untouched" in message and "\n" not in message
    assert leftovers(tmp_path) == []


def test_a_temporary_written_beforehand_is_placed_as_atomic_path_places_its_own(tmp_path):
    """place_temporary (a download's file, written outside atomic_path) moves it with the mode, the
    no-clobbering and the record of atomic_path, without a second temporary."""
    from sfapprox._atomic import new_temporary, place_temporary

    path = tmp_path / "f.txt"
    tmp = new_temporary(path)
    tmp.write_text("first")
    place_temporary(tmp, path)
    assert path.read_text() == "first" and not tmp.exists() and written_outputs()[-1] == path
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask_now()
    tmp = new_temporary(path)
    tmp.write_text("second")
    with pytest.raises(OutputExistsError):
        place_temporary(tmp, path, force=False)
    assert path.read_text() == "first" and (tmp_path / f"f.{os.getpid()}.new.txt").read_text() == "second"


def _umask_now() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_kept_result_never_replaces_an_earlier_one(tmp_path):
    path = tmp_path / "f.txt"
    earlier = tmp_path / f"f.{os.getpid()}.new.txt"
    earlier.write_text("kept by an earlier run")
    with pytest.raises(OutputExistsError) as info:
        with atomic_path(path, force=False) as tmp:
            tmp.write_text("result")
            path.write_text("theirs")
    assert info.value.kept == tmp_path / f"f.{os.getpid()}.1.new.txt" and info.value.kept.read_text() == "result"
    assert earlier.read_text() == "kept by an earlier run" and path.read_text() == "theirs"


@pytest.mark.parametrize("appears", [False, True])
@pytest.mark.parametrize("code", [errno.EPERM,  # Linux vfat / exfat: no link operation
                                  errno.ENOTSUP,  # macOS msdos
                                  errno.EINVAL])  # Windows FAT: ERROR_INVALID_FUNCTION, as Python maps it
def test_file_systems_without_hard_links(tmp_path, monkeypatch, appears, code):
    def no_links(src, dst, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(src))

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "f.txt"
    if not appears:
        write_text(path, "mine", force=False)
        assert path.read_text() == "mine"
    else:
        with pytest.raises(OutputExistsError) as info:
            with atomic_path(path, force=False) as tmp:
                tmp.write_text("mine")
                path.write_text("theirs")
        assert path.read_text() == "theirs" and info.value.kept.read_text() == "mine"
    assert leftovers(tmp_path) == []


def test_force_replaces(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")
    with atomic_path(path, force=True) as tmp:
        tmp.write_text("new")
        path.write_text("appeared")
    assert path.read_text() == "new"


# ------------------------------------------------------------------ write errors (full disk)


def test_full_disk_while_writing_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("previous")

    import sfapprox._atomic

    class Full:
        """A file that takes 10 bytes, then reports a full disk (as the OS does)."""

        def __init__(self, name, mode):
            self.f = open(name, mode)

        def write(self, data):
            self.f.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(sfapprox._atomic, "open", Full, raising=False)
    with pytest.raises(OutputError) as info:
        write_text(path, "x" * 1000)
    message = str(info.value)
    assert message.startswith(f"{path}: not written: No space left on device") and "is full" in message
    assert info.value.errno == errno.ENOSPC and info.value.path == path
    assert path.read_text() == "previous" and leftovers(tmp_path) == []


def test_failing_rename_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"

    def quota(src, dst):
        raise OSError(errno.EDQUOT, "Disk quota exceeded", str(src))

    monkeypatch.setattr(os, "replace", quota)
    with pytest.raises(OutputError, match=r"f\.txt: not written: Disk quota exceeded \(the file system .* is full"):
        write_text(path, "x")
    assert not path.exists() and leftovers(tmp_path) == []


@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs (needs root and a kernel that allows the mount; skipped elsewhere)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_real_full_file_system(tiny_fs):
    (tiny_fs / "small.json").write_text("{}")
    with pytest.raises(OutputError, match=r"big\.json: not written: No space left on device"):
        write_json(tiny_fs / "big.json", {"rows": list(range(100_000))})
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["small.json"]  # no partial file, the other kept


SAVE_ON_FULL_DISK = """
import sys
import numpy as np
import sfapprox.factors
from sfapprox._atomic import OutputError
from sfapprox.operators import ChordOperator

sfapprox.factors.library_versions = lambda: {"sfapprox": "test"}  # no torch import (seconds per start)
try:
    sfapprox.factors.save_factors(sys.argv[1], ChordOperator(np.random.default_rng(0).random((8, 256, 9))))
except OutputError as exc:
    print(exc)
    sys.exit(2)
"""


def test_factors_on_a_full_file_system_are_one_error(tiny_fs, tmp_path):
    script = tmp_path / "save.py"
    script.write_text(SAVE_ON_FULL_DISK)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), str(tiny_fs / "f.h5")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # -11: a segmentation fault
    [line] = done.stdout.strip().splitlines()
    assert line.startswith(f"{tiny_fs / 'f.h5'}: not written: No space left on device")
    assert done.stderr == "" and list(tiny_fs.iterdir()) == []


# ------------------------------------------------------------------ signals while writing


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_write_waits_for_the_file(tmp_path, signum):
    """Ctrl-C / SIGTERM (handled as Ctrl-C by the CLI) inside a write: the file is finished, then the stop comes."""
    from sfapprox import _signals

    previous = {s: signal.getsignal(s) for s in _signals.STOP_SIGNALS}
    _signals.install_stop_handlers()
    try:
        path = tmp_path / "f.txt"
        with pytest.raises(KeyboardInterrupt):
            with atomic_path(path) as tmp:
                tmp.write_text("first half, ")
                signal.raise_signal(signum)  # delivered now, acted on after the move
                with open(tmp, "a") as f:
                    f.write("second half")
        assert path.read_text() == "first half, second half" and leftovers(tmp_path) == []
        assert _signals.stop_signal() == signum
        assert _signals.exit_code(130) == (143 if signum == signal.SIGTERM else 130)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _signals._received.clear()


def test_fit_keeps_a_file_created_while_it_ran_and_its_own_result(tmp_path, monkeypatch):
    """`fit --json f.json`: f.json appears during the fit; it is kept, and so is the summary (beside it)."""
    from typer.testing import CliRunner

    import sfapprox.io
    from sfapprox.cli import app

    matrix, js = tmp_path / "m.npy", tmp_path / "f.json"
    np.save(matrix, np.random.default_rng(0).random((8, 8)))
    real = sfapprox.io.load_matrix

    def load_and_meanwhile(*args, **kwargs):
        js.write_text("the user's own file")  # after the start-up check, before the result is written
        return real(*args, **kwargs)

    monkeypatch.setattr(sfapprox.io, "load_matrix", load_and_meanwhile)
    result = CliRunner().invoke(app, ["fit", str(matrix), "--iters", "3", "--device", "cpu", "--json", str(js)])
    assert result.exit_code == 2, result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("error:")]
    kept = tmp_path / f"f.{os.getpid()}.new.json"
    assert js.read_text() == "the user's own file"
    assert json.loads(kept.read_text())["n"] == 8
    assert "left untouched" in " ".join(result.output.split()) and kept.name in " ".join(result.output.split())


@pytest.mark.skipif(os.name != "posix", reason="pids are checked with signal 0 on POSIX only")
def test_a_temporary_left_by_a_writer_killed_outright_is_removed_by_the_next_write(tmp_path):
    """kill -9 mid-write leaves a hidden temporary named for the writer's pid; the next write of that file
    removes it once no process has that pid, and keeps a live writer's and another file's."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    path = tmp_path / "out.json"
    stale = tmp_path / f".out.json.{dead}.abcd1234.tmp"
    live = tmp_path / f".out.json.{os.getppid()}.zzzz9999.tmp"  # this test's parent: running
    other = tmp_path / f".out.json.bak.{dead}.abcd1234.tmp"  # out.json.bak's, not out.json's
    for p in (stale, live, other):
        p.write_text("half")
    write_text(path, "done")
    assert path.read_text() == "done"
    assert not stale.exists() and live.exists() and other.exists()


def test_an_output_named_by_a_link_is_written_to_the_file_it_points_to(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_json(link, {"a": 1}, force=True)
    assert link.is_symlink() and os.readlink(link) == str(real)  # the link stays a link
    assert json.loads(real.read_text()) == {"a": 1}
    with pytest.raises(OutputExistsError):  # without force, the file it points to is not replaced either
        write_json(link, {"a": 2}, force=False)
    assert json.loads(real.read_text()) == {"a": 1}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_written_through_not_replaced(tmp_path):
    import threading

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_json(fifo, {"a": 1}, force=False)  # no force needed: nothing is overwritten
    reader.join(10)
    assert json.loads(got[0]) == {"a": 1}
    assert fifo.is_fifo()
    assert not [p for p in tmp_path.iterdir() if p != fifo]  # no temporary left beside it


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_a_character_device_is_written_through_and_passes_the_output_check():
    from sfapprox.cli._render import check_output

    check_output(Path("/dev/null"), force=False)  # not "already exists"
    write_text("/dev/null", "x", force=False)
    assert Path("/dev/null").is_char_device()


@pytest.mark.skipif(not hasattr(__import__("socket"), "AF_UNIX"), reason="needs Unix sockets")
def test_a_socket_is_refused_in_one_line(tmp_path):
    import socket

    from sfapprox.cli._render import check_output

    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(OutputError, match="is a socket"):
            check_output(path, force=True)
        with pytest.raises(OutputError, match="is a socket"):
            write_text(path, "x")


def test_when_the_factors_file_was_taken_meanwhile_the_summary_is_still_written(tmp_path, monkeypatch):
    """Two `fit --out same.h5 --json same.json` at once: the loser's factors are kept beside the winner's,
    and its summary is written too (it was silently dropped: the factors' error came first)."""
    from typer.testing import CliRunner

    import sfapprox.io
    from sfapprox.cli import app

    matrix, h5, js = tmp_path / "m.npy", tmp_path / "f.h5", tmp_path / "f.json"
    np.save(matrix, np.random.default_rng(0).random((8, 8)))
    real = sfapprox.io.load_matrix

    def load_and_meanwhile(*args, **kwargs):
        h5.write_bytes(b"the other run's factors")
        return real(*args, **kwargs)

    monkeypatch.setattr(sfapprox.io, "load_matrix", load_and_meanwhile)
    result = CliRunner().invoke(app, ["fit", str(matrix), "--iters", "3", "--device", "cpu", "--out", str(h5),
                                      "--json", str(js)])
    assert result.exit_code == 2, result.output
    assert h5.read_bytes() == b"the other run's factors"
    assert (tmp_path / f"f.{os.getpid()}.new.h5").exists()
    assert json.loads(js.read_text())["n"] == 8


def test_dev_stdout_is_written_through_to_a_pipe_and_to_a_redirected_file(tmp_path):
    """--out /dev/stdout: into a pipe it failed after the whole fit ("/proc/PID/fd/pipe:[N]: not
    written", its real path names nothing); redirected to a file it was refused as existing; and the
    summary table, printed to stdout, was mixed into the HDF5 bytes."""
    from sfapprox import load_factors

    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((16, 16)))
    cmd = [sys.executable, "-m", "sfapprox", "fit", str(tmp_path / "x.npy"), "--iters", "5", "--time-limit", "0",
           "--device", "cpu", "-q", "--out", "/dev/stdout"]
    piped = subprocess.run(cmd, capture_output=True, timeout=120)
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout.startswith(b"\x89HDF") and b"SF fit of" in piped.stderr
    (tmp_path / "piped.h5").write_bytes(piped.stdout)
    assert load_factors(tmp_path / "piped.h5").n == 16
    with open(tmp_path / "redirected.h5", "wb") as fh:
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert load_factors(tmp_path / "redirected.h5").n == 16


def test_names_descriptor():
    from sfapprox._atomic import names_descriptor

    assert names_descriptor("/dev/stdout") and names_descriptor("/dev/fd/1") and names_descriptor("/proc/self/fd/2")
    assert not names_descriptor("/dev/null") and not names_descriptor("out.h5")


def test_a_file_that_takes_the_checkpoints_name_during_a_fit_is_left_alone(tmp_path):
    """The checkpoints replaced whatever was at their path (force=True): a file another program put
    there while the fit ran was overwritten, and the final factors replaced it too.  Now the
    checkpoints go beside it (a RuntimeWarning says where) and the result is kept aside."""
    import threading

    from sfapprox import FitSettings
    from sfapprox.api import fit_matrix

    X = np.random.default_rng(0).standard_normal((32, 32))
    fit_matrix(X, settings=FitSettings(max_iter=2, device="cpu"))  # imports and compiling done: the fit starts at once
    out = tmp_path / "ck.h5"
    threading.Timer(0.8, lambda: out.write_text("mine\n")).start()
    with pytest.warns(RuntimeWarning, match="another file took its name during the fit"):
        with pytest.raises(OutputExistsError) as info:  # no tolerance stop: it runs its 2.5 s
            fit_matrix(X, settings=FitSettings(time_limit=2.5, max_iter=10**9, device="cpu"), out=out, force=True,
                       checkpoint=out, checkpoint_every=0.2, ftol=0.0, gtol=0.0)
    assert out.read_text() == "mine\n" and info.value.kept.is_file()
    # one file aside: the result replaced the last checkpoint there (it went to a second name beside them)
    assert list(tmp_path.glob("ck.*.new.h5")) == [info.value.kept]
    assert "the result was saved as" in str(info.value) and "with the checkpoints" in str(info.value)


def test_a_checkpoint_replaces_only_what_the_command_saw(tmp_path):
    """replaces=False (the CLI's without --force): a file there when the fit starts (put there while
    the matrix loaded, after the command checked --out) is not replaced; replaces=None (the API's
    default): the file there at the start is."""
    from sfapprox import FitSettings
    from sfapprox.api import fit_matrix

    X = np.random.default_rng(1).standard_normal((32, 32))
    out = tmp_path / "ck.h5"
    out.write_text("mine\n")
    with pytest.warns(RuntimeWarning, match="another file took its name"), pytest.raises(OutputExistsError):
        fit_matrix(X, settings=FitSettings(time_limit=1.0, device="cpu"), out=out, force=True,
                   checkpoint=out, checkpoint_every=0.1, replaces=False)
    assert out.read_text() == "mine\n"
    fit_matrix(X, settings=FitSettings(time_limit=1.0, device="cpu"), out=out, force=True,
               checkpoint=out, checkpoint_every=0.1)
    from sfapprox import load_factors

    assert load_factors(out).n == 32


def test_a_folder_in_the_way_is_named_as_one_not_as_a_file_to_force(tmp_path):
    """A folder took the output's name: --force cannot replace it, so the message does not offer it."""
    target = tmp_path / "out.json"
    target.mkdir()
    with pytest.raises(OutputExistsError, match=r"out.json: is a folder, so it was left untouched") as info:
        with atomic_path(target, force=False) as tmp:
            tmp.write_text("{}")
    assert "--force" not in str(info.value) and info.value.kept.read_text() == "{}"


def test_a_stamped_write_whose_file_was_removed_writes_it_again(tmp_path):
    """A checkpoint deleted during a fit: its next write said "another file took its place" and kept
    the result aside, with no file at the path at all (exit 2 from the CLI)."""
    from sfapprox._atomic import FileStamp

    out = tmp_path / "ck.h5"
    write_text(out, "first")
    stamp = FileStamp.of(out)
    out.unlink()
    write_text(out, "second", force=stamp)
    assert out.read_text() == "second" and sorted(p.name for p in tmp_path.iterdir()) == ["ck.h5"]
    out.write_text("someone else's")  # another file there: still left alone
    with pytest.raises(OutputExistsError):
        write_text(out, "third", force=stamp)
    assert out.read_text() == "someone else's"


@pytest.mark.skipif(os.name != "posix", reason="pids are checked with signal 0 on POSIX only")
def test_a_killed_writers_temporary_is_removed_before_the_next_write_needs_its_room(tmp_path):
    """On a nearly full disk the stale temporary held the room the write needed, and was removed only
    after a write that succeeded: never.  It goes first, whatever becomes of the write."""
    from sfapprox._atomic import OutputError, atomic_path

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    stale = tmp_path / f".out.json.{dead}.abcd1234.tmp"
    stale.write_text("half")
    seen = []
    with pytest.raises(OutputError, match="full"):
        with atomic_path(tmp_path / "out.json"):
            seen.append(stale.exists())
            raise OSError(28, "No space left on device")  # the write fails
    assert seen == [False] and not stale.exists()


def test_a_folder_removed_during_a_checkpointed_fit_is_warned_of_and_the_fit_goes_on(tmp_path, fake_clock):
    """A missing folder was a plain SfapproxError, not the OutputError a full disk is: a checkpoint's
    folder removed during a long fit ended the fit, its factors in memory lost, where a full disk warns."""
    import shutil

    from sfapprox import ChordSF

    with pytest.raises(OutputError, match="folder .*gone does not exist; create it first"):
        write_text(tmp_path / "gone" / "r.json", "{}")
    folder = tmp_path / "run"
    folder.mkdir()

    def tick(info):
        fake_clock.advance(1.0)  # one "second" per iteration: a checkpoint every 10 iterations
        if info["iteration"] == 15:
            shutil.rmtree(folder)

    X = np.random.default_rng(3).random((24, 24))
    with pytest.warns(RuntimeWarning, match="checkpoint not written: .*does not exist.*the fit goes on"):
        sf = ChordSF(max_iter=30, time_limit=None, checkpoint=folder / "ck.h5", checkpoint_every=10.0,
                     init="reference", callback=tick, ftol=0.0, gtol=0.0, device="cpu").fit(X)
    assert sf.n_iter_ == 30 and sf.factors_ is not None


def test_a_temporary_for_a_link_is_made_beside_the_file_it_points_to(tmp_path, monkeypatch):
    """fetch's download (new_temporary, then place_temporary) of a cache file that is a symbolic link to
    another disk made its temporary beside the link and moved it onto the link's file: across file systems
    that is "Invalid cross-device link", after the whole download, where atomic_path's own temporary is
    made beside the link's file.  The two folders stand for two file systems here."""
    from sfapprox import _atomic
    from sfapprox._atomic import new_temporary, place_temporary

    real_replace = os.replace

    def replace(src, dst, **kwargs):
        if Path(src).parent != Path(dst).parent:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src), None, str(dst))
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(_atomic.os, "replace", replace)
    (tmp_path / "cache").mkdir()
    (tmp_path / "disk").mkdir()
    link = tmp_path / "cache" / "m.mtx"
    link.symlink_to(tmp_path / "disk" / "m.mtx")  # dangling: the file is downloaded again
    tmp = new_temporary(link)
    tmp.write_text("downloaded")
    place_temporary(tmp, link)
    assert link.is_symlink() and (tmp_path / "disk" / "m.mtx").read_text() == "downloaded"
    assert leftovers(tmp_path / "cache") == leftovers(tmp_path / "disk") == []


# ------------------------------------------------------------------ loops of links


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="symbolic links made freely: POSIX")
@pytest.mark.parametrize("resolve", ["this Python's", "Python 3.13's"])
def test_a_loop_of_links_is_one_error_whatever_path_resolve_does(tmp_path, monkeypatch, resolve):
    """Python 3.11-3.12's ``Path.resolve`` raises RuntimeError on a loop of links; 3.13's returns the loop
    unresolved (it is ``os.path.realpath``'s, which leaves a loop as it is), and the loop was taken as an
    output: the comparison ran, and its write failed after it."""
    from sfapprox._atomic import resolved_path

    if resolve == "Python 3.13's":  # what pathlib's resolve is from 3.13 on
        monkeypatch.setattr(Path, "resolve", lambda self, strict=False: Path(os.path.realpath(self, strict=strict)))
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    (tmp_path / "self").symlink_to(tmp_path / "self")
    for looped in (tmp_path / "loopA", tmp_path / "self", tmp_path / "loopA" / "f.json"):
        with pytest.raises(SfapproxError, match=f"^{re.escape(str(looped))}: a symbolic link that leads back to itself \\(a loop\\); "):
            resolved_path(looped)
    (tmp_path / "to_new").symlink_to(tmp_path / "new.json")  # an output's usual cases: nothing there yet
    assert resolved_path(tmp_path / "to_new") == (tmp_path / "new.json").resolve()
    assert resolved_path(tmp_path / "sub" / "f.json") == tmp_path.resolve() / "sub" / "f.json"


# ------------------------------------------------------------------ names as long as a file system takes


def test_a_name_of_250_bytes_is_written_and_kept_aside_within_the_limit(tmp_path):
    """Its temporary (``.<name>.<pid>.<random>.tmp``) was over 255 bytes: "File name too long" after the
    whole fit; so was the name a result is kept under beside an existing file, and the result was lost."""
    path = tmp_path / ("é" * 100 + "x" * 42 + ".json")  # 247 bytes, two of them each é
    write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1} and leftovers(tmp_path) == []
    with pytest.raises(OutputExistsError) as caught:
        write_json(path, {"b": 2}, force=False)
    kept = caught.value.kept
    assert json.loads(kept.read_text()) == {"b": 2} and len(os.fsencode(kept.name)) <= 255
    assert kept.name.endswith(".new.json") and kept.name.startswith("é" * 100)
    assert json.loads(path.read_text()) == {"a": 1} and leftovers(tmp_path) == []


def test_a_long_names_stale_temporary_is_removed(tmp_path):
    """A killed writer's temporary of a long name is named by the name's first bytes, and found again."""
    from sfapprox._atomic import new_temporary

    path = tmp_path / ("y" * 240 + ".json")
    tmp = new_temporary(path)
    assert len(os.fsencode(tmp.name)) <= 255
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    stale = tmp.with_name(tmp.name.replace(f".{os.getpid()}.", f".{dead}."))
    tmp.rename(stale)
    write_json(path, [1])
    assert not stale.exists() and leftovers(tmp_path) == []


def test_shortened_never_splits_a_character():
    from sfapprox._atomic import shortened

    assert [shortened("中文中文", n) for n in (3, 4, 5, 6, 7)] == ["中", "中", "中", "中文", "中文"]
    assert shortened("😀a", 3) == "" and shortened("a😀", 5) == "a😀" and shortened("abc", 2) == "ab"
    # a name's undecodable bytes (surrogate escapes) are bytes alone, kept as they are
    assert [os.fsencode(shortened(os.fsdecode(b"bad\xff\xfe" * 10), n)) for n in (5, 6)] == [b"bad\xff\xfe", b"bad\xff\xfeb"]


# --- other systems (simulated here: CI runs Linux) -------------------------------------------------


@pytest.fixture
def windows_fsync(monkeypatch):
    """``os.fsync`` as Windows' (FlushFileBuffers): a descriptor open for reading only is refused (EBADF)."""
    fcntl = pytest.importorskip("fcntl")
    real = os.fsync

    def fsync(fd):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF, "Bad file descriptor")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_outputs_are_synced_through_a_descriptor_windows_takes(tmp_path, windows_fsync):
    # (before: every output, saved factors included, was "OutputError: ... Bad file descriptor" on Windows)
    write_text(tmp_path / "t.txt", "kept\n")
    assert (tmp_path / "t.txt").read_text() == "kept\n"
    from sfapprox import load_factors, save_factors
    from sfapprox.operators import ChordOperator

    op = ChordOperator(np.random.default_rng(0).random((3, 8, 4)))
    save_factors(tmp_path / "f.h5", op)
    np.testing.assert_array_equal(load_factors(tmp_path / "f.h5").operator.to_dense(), op.to_dense())


def test_a_umask_without_write_permission_still_gives_a_synced_read_only_file(tmp_path):
    old = os.umask(0o277)
    try:
        write_text(tmp_path / "r.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "r.txt").stat().st_mode & 0o777 == 0o400


def test_a_device_is_written_where_os_has_no_nonblocking_flag(monkeypatch):
    # Windows: no os.O_NONBLOCK (before: `--json NUL` ended in an AttributeError traceback)
    monkeypatch.delattr(os, "O_NONBLOCK")
    write_text(os.devnull, "thrown away\n")


def test_a_device_is_opened_binary_where_os_has_that_flag(monkeypatch):
    # Windows opens in text mode unless told: each "\n" written became "\r\n" (a pipe's HDF5 file corrupted)
    import sfapprox._atomic as atomic

    monkeypatch.setattr(os, "O_BINARY", 1 << 30, raising=False)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, flags, *a: opened.append(flags) or real_open(path, flags & ~(1 << 30), *a))
    atomic._copy_into(Path(__file__), Path(os.devnull))
    assert opened and opened[0] & (1 << 30)


# ------------------------------------------------------------- Windows' MAX_PATH, checked before any work
@pytest.fixture
def on_windows(monkeypatch):
    """Windows as far as the checks can tell, with LongPathsEnabled as ``set_long(value)`` says (None:
    unreadable)."""
    from sfapprox import _atomic

    monkeypatch.setattr(sys, "platform", "win32")

    def set_long(value):
        monkeypatch.setattr(_atomic, "_long_paths_enabled", lambda: value)

    set_long(None)
    return set_long


def _long_target(tmp_path, total: int) -> Path:
    """A file path under tmp_path whose absolute path is ``total`` characters, its folder made."""
    folder = tmp_path / ("d" * 100)
    folder.mkdir(exist_ok=True)
    name_length = total - len(str(folder)) - 1
    return folder / ("f" * (name_length - len(".json")) + ".json")


@pytest.mark.parametrize("long_paths", [None, False])
def test_a_path_windows_refuses_is_refused_before_any_work(tmp_path, on_windows, long_paths):
    """Over MAX_PATH (less its temporary's room) the write failed, after the whole fit."""
    from sfapprox._atomic import WINDOWS_MAX_PATH, _TEMPORARY_EXTRA, check_name_length, check_writable
    from sfapprox._errors import ParameterError

    on_windows(long_paths)
    limit = WINDOWS_MAX_PATH - _TEMPORARY_EXTRA
    check_writable(_long_target(tmp_path, limit))  # at the limit: taken
    target = _long_target(tmp_path, limit + 1)
    with pytest.raises(ParameterError, match=rf"its full path is {limit + 1:,} characters, over the {limit:,} "
                                             r"Windows takes .*LongPathsEnabled.*\\\\\?\\ prefix"):
        check_writable(target)
    with pytest.raises(ParameterError, match="^checkpoint .*shorter name, or use a shorter folder"):
        check_name_length(target, "checkpoint ")


def test_long_paths_enabled_or_the_prefix_lift_windows_limit(tmp_path, on_windows):
    from sfapprox._atomic import check_name_length, path_over_limit

    target = _long_target(tmp_path, 400)
    assert path_over_limit(target) is not None
    assert path_over_limit(Path("\\\\?\\C:\\" + "x" * 400)) is None
    on_windows(True)
    assert path_over_limit(target) is None
    check_name_length(target)


def test_windows_registry_is_read_once_per_process(tmp_path, monkeypatch):
    """LongPathsEnabled was read from the registry on every check, once per output (each line of a batch):
    it is read once, whatever the number of paths checked."""
    import types

    from sfapprox import _atomic

    reads = []

    class Key:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def query(key, name):
        reads.append(name)
        return 0, 4  # (REG_DWORD 0: long paths off)

    winreg = types.SimpleNamespace(HKEY_LOCAL_MACHINE=object(), OpenKey=lambda *a: Key(), QueryValueEx=query)
    monkeypatch.setitem(sys.modules, "winreg", winreg)
    monkeypatch.setattr(sys, "platform", "win32")
    _atomic._long_paths_enabled.cache_clear()
    try:
        for total in (100, 400, 500):
            _atomic.path_over_limit(_long_target(tmp_path, total))
        assert _atomic.path_over_limit(_long_target(tmp_path, 400)) is not None  # (off, as read)
    finally:
        _atomic._long_paths_enabled.cache_clear()  # (the next test reads the real setting, none here)
    assert reads == ["LongPathsEnabled"]


def test_no_path_limit_off_windows(tmp_path):
    from sfapprox._atomic import path_over_limit

    assert path_over_limit(_long_target(tmp_path, 400)) is None


# ------------------------------------------------------------------ write errors other than a full disk


WRITE_OVER_LIMIT = """
import resource, sys
from sfapprox._atomic import OutputError, write_bytes

resource.setrlimit(resource.RLIMIT_FSIZE, (16384, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write_bytes(sys.argv[1], b"x" * 65536)
except OutputError as exc:
    print(exc)
    sys.exit(2)
"""


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_a_file_over_the_largest_the_process_may_write_is_one_line_with_what_to_do(tmp_path):
    """EFBIG (a file over ``ulimit -f``, or FAT32's 4 GiB) said only "File too large", nor what to do."""
    path = tmp_path / "r.json"
    path.write_text("previous")
    script = tmp_path / "write.py"
    script.write_text(WRITE_OVER_LIMIT)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # (SIGXFSZ is ignored by Python)
    [line] = done.stdout.strip().splitlines()
    assert line == (f"{path}: not written: File too large (this process's file size limit ('ulimit -f') is "
                    "16.0 KiB: raise it); no partial file was left"), line
    assert path.read_text() == "previous" and leftovers(tmp_path) == []


class _Failing:
    """A file that takes 10 bytes, then fails with ``code`` (as a disk does mid-write)."""

    code = errno.EIO

    def __init__(self, name, mode):
        self.f = open(name, mode)

    def write(self, data):
        self.f.write(data[:10])
        raise OSError(self.code, os.strerror(self.code))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


@pytest.mark.parametrize("code, advice", [
    ("EFBIG", "larger than the file system holding {folder} takes (FAT32, usual on USB drives, takes at most "
              "4 GiB); choose a folder on another file system"),
    ("EROFS", "the file system holding {folder} is read-only; choose a folder on another one"),
    ("EIO", "the disk holding {folder} failed to write (a failing or removed drive, a lost network share); check "
            "it, or choose a folder on another disk"),
    ("EACCES", "no permission to write in {folder}; choose a folder you can write, or change its permissions"),
])
def test_a_write_that_fails_mid_way_says_why_and_what_to_do(tmp_path, monkeypatch, code, advice):
    """Each cause besides a full disk gave the OS's words alone ("Read-only file system"), nor what to do."""
    import resource

    import sfapprox._atomic

    path = tmp_path / "r.json"
    path.write_text("previous")
    monkeypatch.setattr(_Failing, "code", getattr(errno, code))
    monkeypatch.setattr(sfapprox._atomic, "open", _Failing, raising=False)
    # no 'ulimit -f' in force: the file system's largest file is the cause
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    with pytest.raises(OutputError) as info:
        write_text(path, "x" * 1000)
    strerror = os.strerror(getattr(errno, code))
    assert str(info.value) == (f"{path}: not written: {strerror} ({advice.format(folder=tmp_path)}); "
                               "no partial file was left")
    assert info.value.errno == getattr(errno, code)
    assert path.read_text() == "previous" and leftovers(tmp_path) == []


def test_a_file_size_limit_above_fat32s_largest_file_is_not_blamed_alone(monkeypatch):
    """A scheduler's 'ulimit -f' of 100 GiB was named as the cause of a write to a USB drive's FAT32 (4 GiB):
    below FAT32's largest file the limit is the cause, above it either may be."""
    import resource

    from sfapprox._atomic import write_advice

    monkeypatch.setattr(resource, "getrlimit", lambda which: (100 << 30, resource.RLIM_INFINITY))
    said = write_advice(errno.EFBIG, "/mnt/usb")
    assert "('ulimit -f') is 100.0 GiB: raise it, or the file is larger than the file system holding /mnt/usb" in said
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1 << 20, resource.RLIM_INFINITY))
    assert write_advice(errno.EFBIG, "/mnt/usb") == "this process's file size limit ('ulimit -f') is 1.0 MiB: raise it"


@pytest.fixture
def read_only_fs(tmp_path):
    """A small tmpfs holding a file, then remounted read-only (needs root; skipped elsewhere)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        (mnt / "r.json").write_text("previous")
        done = subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True)
        assert done.returncode == 0, done.stderr
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_real_read_only_file_system_is_named_as_one(read_only_fs):
    """A disk remounted read-only during a run (as ext4 does after an error): its write says so, the file
    there stays; before any work, a read-only folder was "not writable" alone (chmod cannot fix it)."""
    from sfapprox._atomic import check_writable
    from sfapprox._errors import ParameterError

    path = read_only_fs / "r.json"
    with pytest.raises(OutputError, match=r"r\.json: not written: Read-only file system \(the file system "
                                          r"holding .*ro is read-only; choose a folder on another one\)"):
        write_text(path, "x" * 1000)
    assert path.read_text() == "previous" and os.listdir(read_only_fs) == ["r.json"]
    with pytest.raises(ParameterError, match=r"is not writable: the file system holding .*ro is read-only"):
        check_writable(read_only_fs / "new.json")
