"""Batch runs: whole-line results, resume (even after kill -9), failure isolation, workers, Dask, Ctrl-C."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from sfapprox import FitSettings
from sfapprox.datasets.batch import BatchOptions, run_batch
from sfapprox.datasets.results_file import ResultsWriter, read_results, repair_results

ROOT = Path(__file__).resolve().parents[1]
REALDATA = (ROOT / ".." / "shared" / "realdata").resolve()
FAST = BatchOptions(methods=("sf", "tsvd"), settings=FitSettings(max_iter=15, device="cpu"))

pytestmark = pytest.mark.filterwarnings("ignore::sfapprox.ConvergenceWarning")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # Two threads on two busy cores are many times slower than one for these tiny fits.
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def gen_entry(name: str, generator: str = "banded", category: str = "synthetic", **params) -> str:
    params.setdefault("n", 16)
    body = ", ".join(f"{k} = {json.dumps(v)}" for k, v in params.items())
    return f'[[matrix]]\nname = "{name}"\ncategory = "{category}"\ngenerator = "{generator}"\nparams = {{{body}}}\n\n'


def write_manifest(path: Path, *entries: str) -> Path:
    path.write_text("".join(entries), encoding="utf-8")
    return path


def lines(out: Path) -> list[dict]:
    raw = (out / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.splitlines()]


def pairs(records: list[dict]) -> list[tuple[str, str]]:
    return sorted((r["matrix"], r["method"]) for r in records)


# ------------------------------------------------------------------ results file


def test_writer_appends_whole_lines_and_reader_skips_a_partial_tail(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as w:
        w.write({"matrix": "a", "method": "sf", "status": "ok", "fro_error": float("nan")})
        w.write({"matrix": "b", "method": "sf", "status": "ok", "fro_error": 1.0})
    with open(path, "ab") as f:
        f.write(b'{"matrix": "c", "meth')  # what a crash inside a write could leave
    parsed = read_results(path)
    assert [r["matrix"] for r in parsed.records] == ["a", "b"]
    assert parsed.records[0]["fro_error"] is None  # JSON has no NaN
    assert parsed.tail_bytes == len(b'{"matrix": "c", "meth')
    assert repair_results(path) == [f"cut an incomplete last line ({parsed.tail_bytes} B)"]
    assert path.read_bytes().endswith(b'"fro_error": 1.0}\n')
    assert read_results(path).tail_bytes == 0
    # a size as other messages say sizes (format_bytes): "1 bytes", "2000 bytes" before
    for tail, said in ((b"{", "1 B"), (b'{"matrix": "' + b"x" * 2000, "2.0 KiB")):
        with open(path, "ab") as f:
            f.write(tail)
        assert read_results(path).left_out()[3].startswith(f"{said} of an incomplete last line")
        assert repair_results(path) == [f"cut an incomplete last line ({said})"]


def test_a_whole_last_line_without_its_newline_is_kept_and_ended(tmp_path):
    """A file edited by hand and saved without a final newline: its valid last line was cut as
    "incomplete" (the result lost); it is a record, and a repair ends it so that the next line appended
    is not glued to it."""
    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as w:
        w.write({"matrix": "a", "method": "sf", "status": "ok", "fro_error": 2.0})
    with open(path, "ab") as f:
        f.write(b'{"matrix": "b", "method": "sf", "status": "ok", "fro_error": 1.0}')
    parsed = read_results(path)
    assert [r["matrix"] for r in parsed.records] == ["a", "b"] and parsed.tail_bytes == 0 and parsed.unterminated
    assert repair_results(path) == ["ended the last line, which had no newline"]
    with ResultsWriter(path) as w:
        w.write({"matrix": "c", "method": "sf", "status": "ok", "fro_error": 3.0})
    again = read_results(path)
    assert [r["matrix"] for r in again.records] == ["a", "b", "c"] and not again.unterminated
    assert repair_results(path) == []


def test_repair_drops_invalid_and_requested_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"matrix": "a", "method": "sf", "status": "failed"}\nnot json\n'
                     b'{"matrix": "b", "method": "sf", "status": "ok", "fro_error": 1.0}\n["x"]\n')
    assert read_results(path).bad_lines == [2, 4]
    repair_results(path, drop={("a", "sf")})
    assert [r["matrix"] for r in read_results(path).records] == ["b"]
    assert read_results(path).bad_lines == []


# ------------------------------------------------------------------ runs and resume


def test_batch_writes_records_and_factors_and_resumes(tmp_path):
    m = write_manifest(tmp_path / "m.toml", gen_entry("band", bandwidth=2),
                       gen_entry("att", "attention", "attention", beta=4.0))
    out = tmp_path / "out"
    s = run_batch(m, out, FAST)
    assert (s.written, s.skipped, dict(s.statuses)) == (4, 0, {"ok": 4})
    recs = lines(out)
    assert pairs(recs) == [("att", "sf"), ("att", "tsvd"), ("band", "sf"), ("band", "tsvd")]
    sf = next(r for r in recs if r["matrix"] == "att" and r["method"] == "sf")
    assert sf["factors"] == "factors/att.h5" and (out / "factors" / "att.h5").is_file()
    assert sf["nnz"] <= sf["budget"] and sf["params"]["iterations"] <= 15
    assert sf["matrix_info"]["mean_row_entropy"] > 0 and sf["matrix_info"]["beta"] == 4.0
    assert sf["settings"]["max_iter"] == 15 and sf["category"] == "attention"
    from sfapprox.factors import load_factors

    assert load_factors(out / "factors" / "att.h5").n == 16

    again = run_batch(m, out, FAST)
    assert (again.written, again.skipped) == (0, 4)
    forced = run_batch(m, out, FAST, force=True, only=["band"])
    assert (forced.written, forced.skipped) == (2, 0)
    assert pairs(lines(out)) == pairs(recs)  # each pair exactly once


def test_batch_options_default_to_the_methods_of_compare_and_the_cli(tmp_path):
    """BatchOptions() ran sf and tsvd, while `sfapprox batch` without --methods (DEFAULT_METHODS) also ran sparse."""
    from sfapprox._settings import DEFAULT_METHODS

    m = write_manifest(tmp_path / "m.toml", gen_entry("band", bandwidth=2))
    options = BatchOptions(settings=FitSettings(max_iter=5, device="cpu"))
    run_batch(m, tmp_path / "out", options)
    assert pairs(lines(tmp_path / "out")) == sorted(("band", name) for name in DEFAULT_METHODS)
    assert options.methods == DEFAULT_METHODS == ("sf", "tsvd", "sparse")


def test_failures_are_isolated_and_retried(tmp_path, monkeypatch):
    m = write_manifest(
        tmp_path / "m.toml",
        '[[matrix]]\nname = "gone"\ncategory = "network"\nfile = "nowhere/x.net"\n\n',
        gen_entry("boom", n=17),  # the only 17 x 17 matrix: its TSVD will raise
        gen_entry("fine", bandwidth=1),
        '[[matrix]]\nname = "broken"\ncategory = "network"\nfile = "broken.mtx"\n\n',
    )
    (tmp_path / "broken.mtx").write_text("%%MatrixMarket matrix coordinate real general\n3 4 1\n1 1 1\n")
    import sfapprox.comparison as comparison

    real = comparison.run_method

    def flaky(name, X, *args, **kwargs):
        if X.shape[0] == 17:
            raise RuntimeError("solver exploded")
        return real(name, X, *args, **kwargs)

    monkeypatch.setattr(comparison, "run_method", flaky)
    out = tmp_path / "out"
    s = run_batch(m, out, BatchOptions(methods=("tsvd",)), only=None)
    by = {r["matrix"]: r for r in lines(out)}
    assert by["gone"]["status"] == "unavailable"
    assert "entry 'gone': file 'nowhere/x.net' not found; put it at DATA_DIR/nowhere/x.net" in by["gone"]["error"]
    assert by["broken"]["status"] == "unavailable" and "broken.mtx" in by["broken"]["error"]
    assert by["boom"]["status"] == "failed" and by["boom"]["error"] == "RuntimeError: solver exploded"
    assert by["fine"]["status"] == "ok"
    assert s.statuses == {"unavailable": 2, "failed": 1, "ok": 1}

    # Fix the cause: a re-run retries only the unfinished pairs and replaces their lines.
    monkeypatch.setattr(comparison, "run_method", real)
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / "x.net").write_text("*Vertices 3\n*Edges\n1 2\n2 3\n")
    s2 = run_batch(m, out, BatchOptions(methods=("tsvd",)))
    assert (s2.skipped, s2.written) == (1, 3)
    by = {r["matrix"]: r for r in lines(out)}
    assert len(lines(out)) == 4
    assert by["gone"]["status"] == by["boom"]["status"] == "ok"
    assert by["broken"]["status"] == "unavailable"


def test_bad_options_are_refused_before_any_work(tmp_path):
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    from sfapprox import ParameterError
    from sfapprox.datasets import ManifestError

    with pytest.raises(ParameterError, match="unknown method.*svd"):
        run_batch(m, tmp_path / "o", BatchOptions(methods=("svd",)))
    # 'all' (a spelling of --methods, expanded by parse_methods) was "each method may be named once"
    with pytest.raises(ParameterError, match=r"'all' is a spelling of --methods; BatchOptions takes the names: "
                                             r"methods=tuple\(parse_methods\('all'\)\)"):
        run_batch(m, tmp_path / "o", BatchOptions(methods=("all",)))
    # run_batch's keywords, not the batch command's options (a Python caller was told "--scheduler")
    with pytest.raises(ParameterError, match="executor='dask' needs the cluster's scheduler, e.g. scheduler='tcp:"):
        run_batch(m, tmp_path / "o", executor="dask")
    with pytest.raises(ManifestError, match="no entry named 'b'"):
        run_batch(m, tmp_path / "o", only=["b"])
    with pytest.raises(ParameterError, match="scheduler='tcp://h:1' applies to executor='dask'; add executor='dask'"):
        run_batch(m, tmp_path / "o", scheduler="tcp://h:1")  # ran locally, silently, before
    assert not (tmp_path / "o").exists()


TSVD = BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu"))


def test_a_changed_generator_entry_is_redone_not_resumed(tmp_path):
    """A finished pair whose entry now says otherwise (n = 16 -> 24) is redone, and the summary says
    why; it was skipped and the report kept N = 16."""
    out = tmp_path / "out"
    run_batch(write_manifest(tmp_path / "m.toml", gen_entry("band", n=16)), out, TSVD)
    assert lines(out)[0]["source"]["params"] == {"n": 16}
    again = run_batch(write_manifest(tmp_path / "m.toml", gen_entry("band", n=24)), out, TSVD)
    assert (again.written, again.skipped) == (1, 0)
    assert again.changed == ["band: its manifest entry changed (params); its lines are redone"]
    assert [r["n"] for r in lines(out)] == [24]
    same = run_batch(tmp_path / "m.toml", out, TSVD)
    assert (same.written, same.skipped, same.changed) == (0, 1, [])


def test_a_changed_file_is_redone_and_a_touched_one_is_not(tmp_path):
    """A file whose content changed (another size, another hash) is recomputed; one only touched
    (another time, the same SHA-256) is not; a method not selected is named, not redone."""
    X = np.random.default_rng(0).standard_normal((12, 12))
    np.save(tmp_path / "a.npy", X)
    m = write_manifest(tmp_path / "m.toml", '[[matrix]]\nname = "a"\ncategory = "other"\nfile = "a.npy"\n')
    out = tmp_path / "out"
    run_batch(m, out, BatchOptions(methods=("tsvd", "sparse"), settings=FitSettings(device="cpu")))
    os.utime(tmp_path / "a.npy", ns=(0, 10**18))  # touched: another time, the same bytes
    touched = run_batch(m, out, TSVD)
    assert (touched.written, touched.skipped, touched.changed) == (0, 1, [])
    np.save(tmp_path / "a.npy", 2 * X)  # the same size, another content
    changed = run_batch(m, out, TSVD)
    assert (changed.written, changed.skipped) == (1, 0)
    assert changed.changed[0].startswith("a: its file") and "another SHA-256" in changed.changed[0]
    assert changed.changed[1] == "lines of sparse were made from matrices that changed since (methods=('sparse',) redoes them)"
    tsvd = next(r for r in lines(out) if r["method"] == "tsvd")
    assert tsvd["matrix_info"]["fro_norm"] == pytest.approx(2 * np.linalg.norm(X))


def test_a_pair_at_another_budget_is_redone_not_resumed(tmp_path):
    """A line made at another budget measured something else: it is redone (a resume with --budget 0.1
    over lines at 'sf' computed nothing, exited 0, and the report showed the old numbers)."""
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    again = run_batch(m, out, BatchOptions(methods=("tsvd",), budget="0.1", settings=FitSettings(device="cpu")))
    assert (again.written, again.skipped, again.warnings) == (1, 0, [])
    assert again.changed == ["a: its line was made with budget 'sf', now '0.1'; its lines are redone"]
    assert [r["settings"]["budget"] for r in lines(out)] == ["0.1"]
    same = run_batch(m, out, BatchOptions(methods=("tsvd",), budget="0.1", settings=FitSettings(device="cpu")))
    assert (same.written, same.skipped, same.changed) == (0, 1, [])
    # a method not asked for keeps its line made at another budget: said so, not "the matrix changed"
    run_batch(m, out, BatchOptions(methods=("tsvd", "sparse"), budget="0.1", settings=FitSettings(device="cpu")))
    fewer = run_batch(m, out, TSVD)
    assert fewer.changed[-1] == ("lines of sparse were made with other settings (budget, time limit, ...) "
                                 "(methods=('sparse',) redoes them)")


def test_a_method_not_applicable_under_a_memory_limit_is_redone_under_another(tmp_path):
    """TSVD needs the matrix formed: under 200 KB it is not applicable; a resume with room redoes it
    (a finished "not applicable" line was skipped for ever)."""
    np.save(tmp_path / "a.npy", np.random.default_rng(0).random((300, 300)))
    m = write_manifest(tmp_path / "m.toml", '[[matrix]]\nname = "a"\ncategory = "other"\nfile = "a.npy"\n')
    out = tmp_path / "out"
    tight = run_batch(m, out, BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu", max_memory=200_000)))
    assert tight.statuses["not applicable"] == 1
    roomy = run_batch(m, out, BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu", max_memory=10**9)))
    assert (roomy.written, roomy.skipped, roomy.statuses["ok"]) == (1, 0, 1)
    assert roomy.changed == ["a: its line was made with max_memory 200000, now 1000000000; its lines are redone"]


def test_lines_of_other_settings_are_said_even_when_nothing_was_skipped(tmp_path):
    """Other methods at another budget in the folder: the report ranks them together, so the batch
    says so (it did only when a pair of this run was skipped)."""
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    run_batch(m, out, BatchOptions(methods=("tsvd",), budget="0.9", settings=FitSettings(device="cpu")))
    s = run_batch(m, out, BatchOptions(methods=("sparse",), budget="0.3", settings=FitSettings(device="cpu")))
    assert s.skipped == 0 and s.warnings == ["budget: earlier lines used '0.9', this run '0.3'"]


def test_a_data_dir_that_is_no_folder_is_refused_before_any_work(tmp_path):
    from sfapprox import InputError
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    none = tmp_path / "shared" / "realdata"
    with pytest.raises(InputError, match=r"^data_dir='.*realdata': no such folder; point it at the folder that holds"):
        run_batch(m, tmp_path / "o", BatchOptions(methods=("tsvd",), data_dir=str(none)))
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(tmp_path / "o"), "--data-dir", str(none)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: --data-dir {none}: no such folder; point it at the folder that holds the manifest's files, "
        "or leave it out to download them into the cache"]
    assert not (tmp_path / "o").exists() and not none.exists()


def test_old_option_name_out_still_works_with_a_note(tmp_path):
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    old = CliRunner().invoke(app, ["batch", str(m), "--out", str(tmp_path / "o"), "--methods", "tsvd", "--quiet"])
    assert old.exit_code == 0, old.output
    assert "--out is deprecated" in old.output and "use --out-dir" in old.output
    assert pairs(lines(tmp_path / "o")) == [("a", "tsvd")]
    both = CliRunner().invoke(app, ["batch", str(m), "--out", "x", "--out-dir", "y"])
    assert both.exit_code == 2 and "give only --out-dir" in both.output
    neither = CliRunner().invoke(app, ["batch", str(m)])
    assert neither.exit_code == 2 and "--out-dir DIR" in neither.output


def test_old_option_name_force_still_redoes_the_pairs_with_a_note(tmp_path):
    """batch --force (recompute the finished pairs) was renamed --redo with no alias: "No such option"."""
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    args = ["batch", str(m), "--out-dir", str(tmp_path / "o"), "--methods", "tsvd", "--quiet"]
    assert CliRunner().invoke(app, args).exit_code == 0
    again = CliRunner().invoke(app, [*args, "--force"])
    assert again.exit_code == 0, again.output
    assert "batch --force is deprecated" in again.output and "use --redo" in again.output
    first = lines(tmp_path / "o")
    assert CliRunner().invoke(app, args).exit_code == 0 and lines(tmp_path / "o") == first  # skipped: finished
    assert CliRunner().invoke(app, [*args, "--force"]).exit_code == 0
    redone = lines(tmp_path / "o")  # redone, as --redo does: its line replaced by a new one
    assert pairs(redone) == [("a", "tsvd")] and redone[0]["finished"] >= first[0]["finished"]
    assert redone[0]["seconds"] != first[0]["seconds"]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed: "no network", as in test_fetch


def offline_manifest(path: Path) -> Path:
    """One generated matrix, three files to download from hosts that cannot be reached, one file without a URL."""
    port = _closed_port()
    urls = "".join(f'[[matrix]]\nname = "{name}"\ncategory = "network"\nfile = "{name}.paj"\n'
                   f'url = "http://{host}:{port}/{name}.paj"\n\n'
                   for name, host in (("a", "127.0.0.1"), ("b", "localhost"), ("c", "127.0.0.1")))
    return write_manifest(path, gen_entry("fine"), urls, '[[matrix]]\nname = "local"\ncategory = "network"\nfile = "l.net"\n')


def test_offline_batch_tries_one_host_and_still_writes_every_line(tmp_path, monkeypatch):
    from sfapprox.datasets import fetch

    monkeypatch.setenv("SFAPPROX_CACHE", str(tmp_path / "cache"))
    tried = []
    real = fetch._download
    monkeypatch.setattr(fetch, "_download", lambda e, *args: (tried.append(e.name), real(e, *args))[1])
    m = offline_manifest(tmp_path / "m.toml")
    out = tmp_path / "out"
    options = BatchOptions(methods=("tsvd", "sparse"))
    s = run_batch(m, out, options)
    assert tried == ["a"]  # the network was found unreachable: no other host tried
    assert s.no_network == "no network: could not reach 127.0.0.1 (connection refused)"
    assert s.downloads_skipped == ["b", "c"]
    recs = lines(out)
    assert pairs(recs) == [(name, method) for name in ("a", "b", "c", "fine", "local") for method in ("sparse", "tsvd")]
    gone = [r for r in recs if r["status"] == "unavailable"]
    assert sorted({r["matrix"] for r in gone}) == ["a", "b", "c", "local"] and len(gone) == 8
    assert all(r["reason"] == "file missing" and r["matrix_info"] == {"manifest": str(m), "data_dir": None} for r in gone)
    b = next(r for r in gone if r["matrix"] == "b")
    assert "file 'b.paj' not found; download not tried (no network: could not reach 127.0.0.1" in b["error"]
    again = run_batch(m, out, options)  # unavailable pairs are retried; a new run tries the network once again
    assert (again.skipped, again.written, tried) == (2, 8, ["a", "a"])
    assert pairs(lines(out)) == pairs(recs)


def test_cli_batch_offline_shows_what_ran_and_one_line_per_cause(tmp_path):
    from sfapprox.cli import app

    m = offline_manifest(tmp_path / "m.toml")
    with open(m, "a", encoding="utf-8") as f:
        f.write(f'\n[[matrix]]\nname = "wrong"\ncategory = "network"\nfile = "w.net"\nsha256 = "{"0" * 64}"\n')
    data = tmp_path / "data"
    data.mkdir()
    (data / "w.net").write_text("*Vertices 2\n*Edges\n1 2\n")
    out = tmp_path / "out"
    runner = CliRunner(env={"SFAPPROX_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"})
    result = runner.invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd,sparse",
                                 "--data-dir", str(data), "--quiet"])
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "│ fine " in result.output and "unavailable │" not in result.output  # the table shows what ran
    assert not any(f"│ {name} " in result.output for name in ("a", "b", "c", "local", "wrong"))
    assert (f"4 entries unavailable (files not in {data}): a, b, c, local — `sfapprox datasets list {m} "
            f"--data-dir {data} -v` says where to get each") in text
    assert "unavailable wrong: " in text and "SHA-256 mismatch" in text  # a wrong file: its own line
    assert text.count("no network") == 1
    assert "no network: could not reach 127.0.0.1 (connection refused); skipped the downloads of 2 more entries" in text
    assert "12 line(s) written (ok 2, unavailable 10)" in text
    assert "exit 1: 10 unavailable (see above); the next run tries them again" in text  # (a script can tell)
    assert len(result.output.strip().splitlines()) <= 16, result.output  # was 29: a row per entry and a line per failed download
    assert len(lines(out)) == 12  # every pair has its line

    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 0, report.output
    assert "unavailable │" not in report.output and "no network" not in report.output
    assert (f"4 entries unavailable (files not in {data}): a, b, c, local — `sfapprox datasets list {m} "
            f"--data-dir {data} -v` says where to get each") in " ".join(report.output.split())
    assert (out / "report.md").read_text().count("4 entries unavailable") == 1


def test_lines_record_their_entrys_position_so_reports_do_not_depend_on_jobs(tmp_path):
    from sfapprox.datasets import build_report

    # the first matrix is the slow one: with --jobs 2 the others' lines come first in results.jsonl
    m = write_manifest(tmp_path / "m.toml", gen_entry("big", "circulant", n=160, seed=0),
                       *(gen_entry(f"c{i}", "circulant", seed=i) for i in range(1, 3)))
    run_batch(m, tmp_path / "par", BatchOptions(methods=("tsvd", "sparse")), jobs=2)
    run_batch(m, tmp_path / "one", BatchOptions(methods=("tsvd", "sparse")))
    assert {(r["matrix"], r["position"]) for r in lines(tmp_path / "par")} == {("big", 0), ("c1", 1), ("c2", 2)}
    par, one = (build_report(lines(tmp_path / d)) for d in ("par", "one"))
    assert [(r["matrix"], r["method"]) for r in par.records] == [(r["matrix"], r["method"]) for r in one.records]
    assert [row.name for row in par.tables_by_category[0].rows] == ["big", "c1", "c2"]


def test_an_entry_run_alone_records_its_place_in_the_manifest_not_in_the_selection(tmp_path):
    """``--only c`` recorded c's place among the selected entries (0, beside the manifest's first): the
    report then listed a, c, b."""
    from sfapprox.datasets import build_report

    m = write_manifest(tmp_path / "m.toml", *(gen_entry(name, "circulant", seed=i) for i, name in enumerate("abc")))
    run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",)))
    run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",)), only=["c"], force=True)
    assert {(r["matrix"], r["position"]) for r in lines(tmp_path / "out")} == {("a", 0), ("b", 1), ("c", 2)}
    assert [row.name for row in build_report(lines(tmp_path / "out")).tables_by_category[0].rows] == ["a", "b", "c"]


def test_process_pool_gives_the_same_records(tmp_path):
    m = write_manifest(tmp_path / "m.toml", *(gen_entry(f"c{i}", "circulant", seed=i) for i in range(3)))
    out = tmp_path / "out"
    s = run_batch(m, out, BatchOptions(methods=("tsvd",)), jobs=2)
    assert s.written == 3 and not s.interrupted
    serial = tmp_path / "serial"
    run_batch(m, serial, BatchOptions(methods=("tsvd",)))
    key = lambda r: r["matrix"]  # noqa: E731
    for a, b in zip(sorted(lines(out), key=key), sorted(lines(serial), key=key)):
        assert a["fro_error"] == pytest.approx(b["fro_error"])


def test_a_process_worker_holds_the_blas_pools_to_its_share_of_the_cores(monkeypatch):
    # Nystrom and randomized SVD load no torch: their thread cap is the BLAS pools' own count, which the
    # worker's OMP_NUM_THREADS (set after numpy loaded its BLAS) never reached: each worker used every core
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from sfapprox import _threads
    from sfapprox.datasets.batch import _worker_init

    if _threads.available_cores() < 2:
        pytest.skip("one core: every pool holds one thread anyway")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # as a shell without them
        monkeypatch.delenv(var, raising=False)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                             initargs=(1,)) as pool:
        assert pool.submit(_threads._blas_threads).result(timeout=120) == 1


def _compiled_cache_folder():
    from sfapprox import _compiled

    return _compiled.CACHE_FOLDER


def test_a_process_worker_caches_the_kernels_in_the_parents_private_folder(tmp_path):
    """The private folder of numba's cache reached the workers through NUMBA_CACHE_DIR, which it no
    longer sets (sfapprox._compiled); the pool hands it on instead: one warning, one compile."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from sfapprox.datasets.batch import _worker_init

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                             initargs=(1, None, str(tmp_path))) as pool:
        assert pool.submit(_compiled_cache_folder).result(timeout=120) == str(tmp_path)


def test_a_failed_cache_write_in_the_workers_is_said_once_by_the_parent(monkeypatch, tmp_path):
    """Each ``batch -j`` worker found numba's cache folder unwritable on its own and said so: the same note
    once per worker.  A worker passes its failed write to the parent, which says it once; a pool started
    after the parent's own write failed is given it, and its workers neither write the cache nor say so."""
    import errno
    import multiprocessing
    import warnings

    from sfapprox import _compiled
    from sfapprox.datasets import batch

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/cache/sfapprox/kernels.nbi")
    for name in ("CACHE_FOLDER", "CACHE_WRITE_ERROR", "CACHE_WRITE_REPORT", "CACHE_FOLDER_REPORT",
                 "CACHE_FOLDER_NOTE"):
        monkeypatch.setattr(_compiled, name, None, raising=False)
    monkeypatch.setattr(_compiled, "_FOLDER_NOTES_SAID", set(), raising=False)
    folders = iter(str(tmp_path / f"worker{i}") for i in range(3))  # (another user holds the usual folder:
    monkeypatch.setattr(_compiled, "_private_folder", lambda: (next(folders), False))  # each its own mkdtemp)
    pipe = batch._RecordPipe(multiprocessing.get_context("spawn"))
    monkeypatch.setattr(batch, "_to_parent", pipe.writer)
    written = []
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(3):  # three workers, each failing its own first write (no real compile)
                monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
                batch._share_compiled(None, None)
                _compiled._cache_in_private_folder()  # (where the parent had found no folder before)
                _compiled.cache_not_written(full)
            assert seen == []  # none said by the workers
            monkeypatch.setattr(_compiled, "CACHE_WRITE_REPORT", None)  # the parent, which says it
            monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
            pipe.receive(written.append)
        folder, warning = seen
        assert "no writable folder for its cache" in str(folder.message) and "worker0" in str(folder.message)
        assert "each process its own" in str(folder.message)  # (said once: the others only named other folders)
        assert "is full" in str(warning.message) and "compiles them again" in str(warning.message)
        assert written == [] and _compiled.CACHE_WRITE_ERROR.errno == errno.ENOSPC

        class Started(Exception):
            pass

        def pool(*args, initargs, **kwargs):
            raise Started(initargs)

        monkeypatch.setattr(batch, "ProcessPoolExecutor", pool)
        with pytest.raises(Started) as started:  # the parent's failure, handed to the next pool's workers
            batch._run_processes([None], 1, written.append, lambda *a, **k: None)
        monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
        batch._share_compiled(*started.value.args[0][2:])
        assert _compiled.CACHE_WRITE_ERROR is not None and _compiled.CACHE_WRITE_ERROR.errno == errno.ENOSPC
        _compiled.cache_not_written(full)
        assert not pipe.reader.poll()  # nothing more to say
    finally:
        pipe.close()


def test_a_worker_stops_when_its_parent_is_gone_on_a_system_that_keeps_the_parents_pid(monkeypatch):
    """Windows: os.getppid() still gives a killed parent's pid, so the workers fitted on (before: only a
    changed pid stopped them); the parent's sentinel tells on every system."""
    import multiprocessing
    import types

    from sfapprox.datasets import batch

    class Exited(Exception):
        pass

    def sleep(seconds, naps=[]):
        naps.append(seconds)
        if len(naps) > 5:
            raise AssertionError("the worker kept fitting after its parent was gone")

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(batch.os, "getppid", lambda: 4242)
    monkeypatch.setattr(batch.time, "sleep", sleep)
    monkeypatch.setattr(batch.os, "_exit", exit_)
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: types.SimpleNamespace(is_alive=lambda: False))
    with pytest.raises(Exited):
        batch._exit_with_parent(4242)


def test_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", "circulant"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        s = run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",)), executor="dask",
                      scheduler=cluster.scheduler_address)
    assert s.written == 2 and dict(s.statuses) == {"ok": 2}


def test_a_dask_batch_leaves_no_error_in_the_schedulers_log(tmp_path):
    """Each task's first look at its matrix's record of the methods sent (a ``distributed.Variable`` never
    set) made the scheduler log a TimeoutError as an ERROR with its traceback: one per matrix, every run."""
    import logging

    distributed = pytest.importorskip("dask.distributed")
    errors: list[str] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: errors.append(f"{record.name}: {record.getMessage()}")  # type: ignore[method-assign]
    logging.getLogger("distributed").addHandler(handler)  # (dask's loggers do not reach pytest's caplog)
    try:
        m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", "circulant"))
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                      dashboard_address=None) as cluster:
            s = run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",)), executor="dask",
                          scheduler=cluster.scheduler_address)
    finally:
        logging.getLogger("distributed").removeHandler(handler)
    assert dict(s.statuses) == {"ok": 2}
    assert not errors


def test_a_dask_workers_notes_on_numbas_cache_are_said_once_by_the_batch(tmp_path, monkeypatch):
    """Each Dask worker process that could not write numba's cache (or found no folder for it) said so into
    its own log, and the batch said nothing.  A task tells its batch, which says each note once; a worker
    that said them in an earlier batch tells each new batch too (its kernels are compiled by then)."""
    import errno
    import warnings

    distributed = pytest.importorskip("dask.distributed")
    from sfapprox import _compiled

    def fail_in_the_worker(temp: str) -> None:
        # (run in the worker process: its first fit finds no folder for numba's cache, then fails to write
        # it, as a read-only or full disk makes numba do while it compiles; no real compile, which is slow)
        import tempfile
        import warnings

        from sfapprox import _compiled
        from sfapprox.datasets import batch

        tempfile.tempdir = temp  # (an empty private folder under it: the folder note is said, not skipped)
        real, batch.worker_said = batch.run_matrix, []

        def run_matrix(task, **kwargs):
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                if _compiled.CACHE_WRITE_ERROR is None:
                    _compiled._cache_in_private_folder()
                    _compiled.cache_not_written(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/c/k.nbi"))
            batch.worker_said.extend(str(w.message) for w in said)
            return real(task, **kwargs)

        batch.run_matrix = run_matrix

    def worker_said() -> list[str]:
        from sfapprox.datasets import batch

        return batch.worker_said

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", "circulant"))
    (tmp_path / "temp").mkdir()
    heard = []
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        client.run(fail_in_the_worker, str(tmp_path / "temp"))
        for run in ("first", "second"):  # the parent's own notes forgotten: each batch is told
            monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
            monkeypatch.setattr(_compiled, "_FOLDER_NOTES_SAID", set(), raising=False)
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                s = run_batch(m, tmp_path / run, BatchOptions(methods=("tsvd",)), executor="dask",
                              scheduler=cluster.scheduler_address)
            assert dict(s.statuses) == {"ok": 2}
            heard.append(sorted(str(w.message) for w in said if "numba" in str(w.message)))
        (in_worker,) = client.run(worker_said).values()
    assert in_worker == []  # the worker said none of them itself
    for notes in heard:
        assert len(notes) == 2, notes
        assert "could not write its cache" in notes[0] and "is full" in notes[0]
        assert "no writable folder for its cache" in notes[1] and str(tmp_path / "temp") in notes[1]
    assert _compiled.CACHE_WRITE_ERROR is not None and _compiled.CACHE_WRITE_ERROR.errno == errno.ENOSPC


def test_a_dask_batch_on_threads_of_its_own_process_says_numbas_cache_notes_as_they_come(tmp_path, monkeypatch):
    """A cluster of threads (``processes=False``) runs the tasks in the batch's process, which knows of a
    failed write as it happens: put on the queue, the note came back to a process that had it already, and
    was never said."""
    import errno
    import warnings

    distributed = pytest.importorskip("dask.distributed")
    from sfapprox import _compiled
    from sfapprox.datasets import batch

    real = batch.run_matrix

    def run_matrix(task, **kwargs):
        _compiled.cache_not_written(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/c/k.nbi"))
        return real(task, **kwargs)

    monkeypatch.setattr(batch, "run_matrix", run_matrix)
    monkeypatch.setattr(_compiled, "CACHE_WRITE_ERROR", None)
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", "circulant"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        s = run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",)), executor="dask",
                      scheduler=c.scheduler_address)
    assert dict(s.statuses) == {"ok": 2}
    assert sum("could not write its cache" in str(w.message) and "is full" in str(w.message) for w in said) == 1


def test_dask_missing_is_a_clear_error(tmp_path, monkeypatch):
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    from sfapprox import ParameterError

    with pytest.raises(ParameterError, match=r"needs dask.distributed, an optional extra: pip install 'sfapprox\[dask\]'"):
        run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",)), executor="dask", scheduler="tcp://127.0.0.1:1")


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata not present")
def test_paper_protocol_reproduces_tsvd_within_one_percent(tmp_path):
    from sfapprox.datasets import load_manifest

    manifest = ROOT / "sfapprox" / "datasets" / "manifests" / "paper-table1.toml"
    reproducible = [e.name for e in load_manifest(manifest).entries if e.reproducible]
    opts = BatchOptions(methods=("tsvd",), protocol="paper", data_dir=str(REALDATA))
    run_batch(manifest, tmp_path / "out", opts, only=reproducible + ["protein"])
    by = {r["matrix"]: r for r in lines(tmp_path / "out")}
    assert len(reproducible) == 8
    for name in reproducible:
        r = by[name]
        assert r["status"] == "ok" and r["matrix_info"]["verified"] in (True, False)
        assert r["fro_error"] == pytest.approx(r["reference"]["tsvd"], rel=0.01), name
    assert by["protein"]["status"] == "unavailable"
    assert f"put it at {REALDATA / 'chen2009_similarity' / 'protein.mat'}" in by["protein"]["error"]


# ------------------------------------------------------------------ CLI, kill -9 and Ctrl-C


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from sfapprox.cli import main; sys.argv[0] = 'sfapprox'; main()", *args]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def wait_for_lines(path: Path, count: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            pytest.fail(f"batch ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {count} lines within {timeout} s")


def test_kill_9_part_way_then_resume_gives_every_pair_once(tmp_path):
    entries = [gen_entry(f"m{i}", "circulant" if i % 2 else "banded", n=24, seed=i) for i in range(6)]
    m = write_manifest(tmp_path / "m.toml", *entries)
    out = tmp_path / "out"
    args = cli("batch", str(m), "--out-dir", str(out), "--methods", "sf,tsvd", "--iters", "40", "--device", "cpu", "--quiet")
    proc = subprocess.Popen(args, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_lines(out / "results.jsonl", 3, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    killed = read_results(out / "results.jsonl")
    assert 3 <= len(killed.records) < 12
    with open(out / "results.jsonl", "ab") as f:  # as if killed inside a write
        f.write(b'{"matrix": "m5", "method": "s')
    done = subprocess.run(args, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "cut an incomplete last line" in done.stderr
    recs = lines(out)  # every line parses as JSON
    assert pairs(recs) == sorted((f"m{i}", meth) for i in range(6) for meth in ("sf", "tsvd"))
    assert all(r["status"] == "ok" for r in recs)
    assert (out / "report.md").is_file() and (out / "report.csv").is_file() and (out / "report.tex").is_file()


def test_ctrl_c_keeps_finished_lines_and_exits_130(tmp_path):
    m = write_manifest(tmp_path / "m.toml", gen_entry("big", "attention", "attention", n=96, beta=3.0), gen_entry("next"))
    out = tmp_path / "out"
    args = cli("batch", str(m), "--out-dir", str(out), "--methods", "tsvd,sf", "--iters", "100000", "--device", "cpu")
    proc = subprocess.Popen(args, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_lines(out / "results.jsonl", 1, proc)
    # SF has begun: most often it is loading torch now (1-2 s), where a stop raised inside torch's C++ aborted the
    # batch or failed the pair (its line written); the stop now waits for the import to end
    time.sleep(0.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - start < 10
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again to resume" in stderr
    assert pairs(lines(out)) == [("big", "tsvd")]


def test_a_stop_names_the_pairs_it_cut_short_and_counts_those_not_begun(tmp_path, monkeypatch):
    """A stopped batch said that every finished line was kept, not which pairs were lost: the one running (its
    work lost, redone) and those not begun (run by the next run)."""
    import threading

    from sfapprox.cli import app
    from sfapprox.datasets import runner

    m = write_manifest(tmp_path / "m.toml", *(gen_entry(name, seed=i) for i, name in enumerate("abc")))
    out = tmp_path / "out"
    real = runner.run_all

    def stopped_at_b_sf(names, *args, **kwargs):  # a Ctrl-C as b's second pair runs
        if names[0] == "sparse" and args[2].matrix_name == "b":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return real(names, *args, **kwargs)

    monkeypatch.setattr(runner, "run_all", stopped_at_b_sf)
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd,sparse", "--quiet"])
    text = " ".join(result.output.split())
    assert result.exit_code == 130, result.output
    assert "interrupted (Ctrl-C): b/sparse cut short, 2 pairs not begun; every finished line is kept in" in text
    assert pairs(lines(out)) == [("a", "sparse"), ("a", "tsvd"), ("b", "tsvd")]


def test_a_stop_that_a_library_turned_into_an_error_is_a_stop_not_a_failed_line(tmp_path, monkeypatch):
    """A Ctrl-C raised inside a library that turns it into an error of its own (torch's import: an ImportError;
    numba's compiler: a SystemError) failed the pair: its "failed" line was written, and the batch then
    stopped (exit 130) with a line for the pair it said was cut short, never to be redone as such."""
    from sfapprox import _signals, comparison
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", *(gen_entry(name, seed=i) for i, name in enumerate("ab")))
    out = tmp_path / "out"
    real = comparison.run_method

    def stopped_inside_a_library(name, X, *args, **kwargs):
        if name == "sparse" and X.shape[0] == 16 and len(lines(out)) == 3:  # b's second pair
            _signals._received.append(signal.SIGINT)  # received; its KeyboardInterrupt became this:
            raise ImportError("initialization failed: KeyboardInterrupt")
        return real(name, X, *args, **kwargs)

    monkeypatch.setattr(comparison, "run_method", stopped_inside_a_library)
    try:
        result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd,sparse", "--quiet"])
    finally:
        _signals._received.clear()
    assert result.exit_code == 130, result.output
    assert "b/sparse cut short" in " ".join(result.output.split())
    assert pairs(lines(out)) == [("a", "sparse"), ("a", "tsvd"), ("b", "tsvd")]


def test_the_closing_line_of_a_stop_shortens_a_long_list_of_pairs():
    from sfapprox.cli.batch import _unfinished
    from sfapprox.datasets.batch import BatchSummary

    summary = BatchSummary("out", interrupted=True, cut_short=[f"m{i}/sf" for i in range(8)], not_begun=1234)
    assert _unfinished(summary) == "m0/sf, m1/sf, m2/sf, m3/sf, m4/sf and 3 more cut short, 1,234 pairs not begun; "
    assert _unfinished(BatchSummary("out", interrupted=True)) == ""


def test_a_stop_of_a_parallel_batch_keeps_the_pairs_its_workers_had_finished(tmp_path):
    """With --jobs a worker sent its matrix's records when the last method was done: a stop during a long fit
    (SF, after TSVD had finished on every matrix) lost the finished pairs, to be run again, and 'every finished
    line is kept' said nothing of them.  Each pair's line is written as it finishes now."""
    m = write_manifest(tmp_path / "m.toml", *(gen_entry(name, "attention", "attention", n=96, beta=beta)
                                              for name, beta in (("a", 2.0), ("b", 3.0))))
    out = tmp_path / "out"
    # SF runs to its time limit (100 s): a batch that got this far unstopped has its TSVD lines only from the workers
    args = cli("batch", str(m), "--out-dir", str(out), "--methods", "tsvd,sf", "--iters", "100000000",
               "--time-limit", "100", "--device", "cpu", "--jobs", "2", "--quiet")
    proc = subprocess.Popen(args, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_lines(out / "results.jsonl", 2, proc, timeout=90)  # both TSVD lines, while SF fits
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, stderr
    assert "every finished line is kept" in stderr and "Traceback" not in stderr
    # the pairs the stop cut short are named (each worker's matrix, in a pipe's one line), and a line written as
    # the stop came is counted (it was not, and its pair was said to be cut short)
    text = " ".join(stderr.split())
    assert "2 line(s) written (ok 2)" in text
    assert "interrupted (SIGTERM): a/sf, b/sf cut short; every finished line is kept" in text
    assert sorted((r["matrix"], r["method"], r["status"]) for r in lines(out)) == [("a", "tsvd", "ok"),
                                                                                  ("b", "tsvd", "ok")]
    assert not [p.name for p in out.rglob("*.tmp")]


def test_cli_batch_and_report_in_process(tmp_path):
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), '[[matrix]]\nname = "gone"\ncategory = "network"\nfile = "x.net"\n')
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    assert result.exit_code == 1, result.output
    assert "synthetic" in result.output and "gone │" not in result.output
    assert "1 entry unavailable (files not found): gone — `sfapprox datasets list" in " ".join(result.output.split())
    assert "2 line(s) written (ok 1, unavailable 1)" in " ".join(result.output.split())
    bad = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--protocol", "papr"])
    assert bad.exit_code == 2 and "papr" in bad.output and "default" in bad.output


def test_a_stop_while_the_report_is_made_says_the_lines_are_kept(tmp_path, monkeypatch):
    """A SIGTERM after the pairs ran, while the report was made, said "no output was written" (the lines
    were), and no way to resume."""
    from sfapprox import datasets
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"

    def stopped(records, skipped=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets, "build_report", stopped)
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    text = " ".join(result.output.split())
    assert result.exit_code == 130 and "no output was written" not in text
    assert "while making the report: every finished line is kept in" in text and "(1 written by this run)" in text
    assert [r["matrix"] for r in lines(out)] == ["a"]


@pytest.mark.parametrize("method", ["sf+lr", "sf-butterfly"])
def test_non_reference_sf_fits_are_saved_under_their_method(tmp_path, method):
    from dataclasses import replace

    from sfapprox.factors import load_factors

    m = write_manifest(tmp_path / "m.toml", gen_entry("band", bandwidth=2))
    out = tmp_path / "out"
    run_batch(m, out, replace(FAST, methods=(method,)))
    rec = next(r for r in lines(out) if r["method"] == method)
    assert rec["status"] == "ok" and rec["factors"] == f"factors/band.{method}.h5"
    saved = load_factors(out / rec["factors"])
    assert saved.kind == method and saved.n == rec["n"] and saved.n_stored == rec["nnz"]
    if method == "sf-butterfly":
        assert saved.operator.support == "butterfly" and rec["nnz"] == 2 * 16 * 4
    # What was saved is what was scored.
    from sfapprox.datasets.synthetic import generate

    X = generate("banded", {"n": 16, "bandwidth": 2}).matrix
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    assert np.linalg.norm(X - saved.to_dense()) == pytest.approx(rec["fro_error"], rel=1e-9)


# ------------------------------------------------------------------ a full disk


def test_factors_that_cannot_be_written_fail_the_pair_and_a_rerun_redoes_it(tmp_path, monkeypatch):
    import errno

    import sfapprox._atomic as atomic

    real_fsync = atomic._fsync

    def full_for_factors(path):
        if ".h5." in Path(path).name:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(path)

    m = write_manifest(tmp_path / "m.toml", gen_entry("band", bandwidth=2))
    out = tmp_path / "out"
    monkeypatch.setattr(atomic, "_fsync", full_for_factors)
    s = run_batch(m, out, FAST)
    by = {r["method"]: r for r in lines(out)}
    assert by["sf"]["status"] == "failed" and by["sf"]["factors"] is None
    assert by["sf"]["error"].startswith("factors not saved: ") and "band.h5: not written: No space left" in by["sf"]["error"]
    assert by["tsvd"]["status"] == "failed" and s.statuses == {"failed": 2}
    assert list((out / "factors").iterdir()) == []  # no partial file, no temporary

    monkeypatch.setattr(atomic, "_fsync", real_fsync)  # space freed
    again = run_batch(m, out, FAST)
    assert (again.written, again.skipped, dict(again.statuses)) == (2, 0, {"ok": 2})
    assert pairs(lines(out)) == [("band", "sf"), ("band", "tsvd")]  # each pair once
    assert (out / "factors" / "band.h5").is_file()


def test_results_file_on_a_full_disk_stops_with_one_line_and_keeps_the_lines(tmp_path, monkeypatch):
    import errno

    import sfapprox.datasets.results_file as results_file
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", *(gen_entry(f"m{i}", seed=i) for i in range(3)))
    out = tmp_path / "out"
    real_write, calls = os.write, []

    def full_after_one(fd, data):
        calls.append(len(data))
        if len(calls) >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(results_file.os, "write", full_after_one)
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    assert result.exit_code == 2, result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert f"{out / 'results.jsonl'}: could not append a line (No space left on device; the file system holding " \
           f"{out} is full; free some space)" in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert [r["matrix"] for r in lines(out)] == ["m0"]  # the complete line is kept, nothing partial
    monkeypatch.setattr(results_file.os, "write", real_write)
    assert run_batch(m, out, BatchOptions(methods=("tsvd",))).written == 2  # resumes


APPEND_OVER_LIMIT = """
import resource, sys
from sfapprox._atomic import OutputError
from sfapprox.datasets.results_file import ResultsWriter

resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
with ResultsWriter(sys.argv[1]) as writer:
    try:
        for i in range(1000):
            writer.write({"matrix": f"m{i}", "method": "tsvd", "status": "ok", "note": "x" * 150})
    except OutputError as exc:
        print(exc)
        sys.exit(2)
"""


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_a_results_file_over_the_largest_file_says_so_not_a_full_disk(tmp_path):
    """The short write at the limit (``ulimit -f``; FAT32's 4 GiB) was said to be a full disk: the OS says
    why with the next write, File too large, and what to do is not to free space."""
    script, path = tmp_path / "append.py", tmp_path / "results.jsonl"
    script.write_text(APPEND_OVER_LIMIT)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    [line] = done.stdout.strip().splitlines()
    assert line.startswith(f"{path}: could not append a line (File too large (only ") and "full" not in line, line
    assert "this process's file size limit ('ulimit -f') is 4.0 KiB: raise it); the complete lines" in line, line
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and 0 < len(raw) <= 4096  # whole lines only: the cut one's start removed
    assert [json.loads(line)["matrix"] for line in raw.splitlines()] == [f"m{i}" for i in range(raw.count(b"\n"))]


def test_real_full_file_system_keeps_whole_lines(tmp_path):
    """A 16 KiB tmpfs (root only): the batch stops with one line; every line in the file is whole."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        from dataclasses import replace

        from sfapprox._atomic import OutputError

        m = write_manifest(tmp_path / "m.toml", *(gen_entry(f"m{i}", n=8, seed=i) for i in range(40)))
        with pytest.raises(OutputError, match=r"results\.jsonl: could not append a line \(No space left on device"):
            run_batch(m, mnt / "out", replace(BatchOptions(methods=("tsvd",)), save_factors=False))
        parsed = read_results(mnt / "out" / "results.jsonl")
        assert parsed.tail_bytes == 0 and parsed.bad_lines == [] and 1 <= len(parsed.records) < 40
        assert not list((mnt / "out").rglob("*.tmp"))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _kernel_manifest(tmp_path: Path, n: int = 120, load: str = 'kernel = "rbf", bandwidth = 1.5') -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    np.savetxt(data / "points.csv", np.random.default_rng(0).standard_normal((n, 3)), delimiter=",")
    entry = f'[[matrix]]\nname = "pts"\ncategory = "other"\nfile = "points.csv"\nload = {{{load}}}\n'
    return write_manifest(tmp_path / "k.toml", entry), data


def test_a_kernel_entry_is_formed_when_it_fits_and_its_fit_names_the_points_file(tmp_path):
    from sfapprox import KernelMatrix
    from sfapprox.datasets.fetch import file_sha256
    from sfapprox.factors import load_factors

    m, data = _kernel_manifest(tmp_path)
    out = tmp_path / "out"
    s = run_batch(m, out, BatchOptions(methods=("sf", "tsvd"), data_dir=str(data),
                                       settings=FitSettings(max_iter=15, device="cpu")))
    assert dict(s.statuses) == {"ok": 2}
    recs = {r["method"]: r for r in lines(out)}
    K = KernelMatrix(np.loadtxt(data / "points.csv", delimiter=","), bandwidth=1.5).to_dense()
    U, sv, Vt = np.linalg.svd(K)
    r = recs["tsvd"]["params"]["rank"]
    assert recs["tsvd"]["fro_error"] == pytest.approx(np.sqrt((sv[r:] ** 2).sum()), rel=1e-6)
    assert recs["sf"]["matrix_info"]["format"] == "kernel"
    saved = load_factors(out / "factors" / "pts.h5")
    assert saved.source["sha256"] == file_sha256(data / "points.csv")


def test_the_shipped_kernels_manifest_runs_on_a_local_copy_of_its_table(tmp_path):
    """The bundled kernels manifest's MNIST test entry, its LIBSVM file (here 40 rows of made-up pixels) found in
    --data-dir: the RBF kernel of its rows at the median heuristic's bandwidth, in the 'kernel' category."""
    from sfapprox import KernelMatrix

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (40, 12)) * (rng.random((40, 12)) < 0.5)
    text = "".join(f"{i % 10} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(row) if v) + "\n"
                   for i, row in enumerate(pixels))
    data = tmp_path / "data"
    (data / "kernels").mkdir(parents=True)
    (data / "kernels" / "mnist.t.libsvm").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    s = run_batch(ROOT / "sfapprox" / "datasets" / "manifests" / "kernels.toml", out, only=["mnist-test-rbf"],
                  options=BatchOptions(methods=("tsvd", "nystrom"), data_dir=str(data)))
    assert dict(s.statuses) == {"ok": 2}
    recs = {r["method"]: r for r in lines(out)}
    assert {r["category"] for r in recs.values()} == {"kernel"} and recs["tsvd"]["n"] == 40
    K = KernelMatrix(pixels.astype(float)).to_dense()  # (features absent from the file are zeros: the same distances)
    sv = np.linalg.svd(K, compute_uv=False)
    r = recs["tsvd"]["params"]["rank"]
    assert recs["tsvd"]["fro_error"] == pytest.approx(np.sqrt((sv[r:] ** 2).sum()), rel=1e-6)


def test_a_kernel_entry_too_big_for_the_limit_runs_from_columns(tmp_path):
    from sfapprox import KernelMatrix

    m, data = _kernel_manifest(tmp_path)
    out = tmp_path / "out"
    small = 32 << 20  # below what forming it and scoring need (the libraries' working set included)
    run_batch(m, out, BatchOptions(methods=("nystrom", "rsvd", "tsvd"), data_dir=str(data),
                                   settings=FitSettings(max_iter=15, device="cpu", max_memory=small)))
    recs = {r["method"]: r for r in lines(out)}
    assert recs["tsvd"]["status"] == "not applicable" and "from columns" in recs["tsvd"]["reason"]
    K = KernelMatrix(np.loadtxt(data / "points.csv", delimiter=","), bandwidth=1.5).to_dense()
    for method in ("nystrom", "rsvd"):
        rec = recs[method]
        assert rec["status"] == "ok" and rec["matrix_info"]["path"] == "columns"
        assert rec["error_estimate"]["exact"]  # one pass fits the scoring's time at this size
        from sfapprox.factors import load_factors

        A = load_factors(out / "factors" / f"pts.{method}.h5").operator.to_dense()
        assert rec["fro_error"] == pytest.approx(np.linalg.norm(K - A), rel=1e-9)
        # the matrix record of a comparison's, of a formed matrix's keys: "recipe" beside "source", ||X||_F
        # from the first exact scoring pass (it was absent), the facts no pass gives null with the reason
        from sfapprox.comparison import MATRIX_KEYS

        info = rec["matrix_info"]
        assert set(MATRIX_KEYS) <= set(info) and info["compared_from"] == "columns"
        assert info["recipe"] == info["source"] and info["recipe"]["bandwidth"] == 1.5
        assert info["fro_norm"] == pytest.approx(np.linalg.norm(K), rel=1e-12) and "nnz" in info["unknown"]


def test_a_matrix_run_in_another_current_folder_finds_its_files_and_writes_into_the_batch_folder(tmp_path,
                                                                                                 monkeypatch):
    """A Dask worker runs in a current folder of its own: with the manifest, --data-dir and --out-dir given
    relative, each entry's file was "not found" there (every line 'unavailable') and its factors would have
    gone into the worker's folder.  Here the matrices run (serially) after a move to another folder."""
    from sfapprox.datasets import batch as batch_module

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "beside").mkdir()
    np.savetxt(project / "data" / "points.csv", np.random.default_rng(0).standard_normal((30, 3)), delimiter=",")
    np.savetxt(project / "beside" / "table.csv", np.random.default_rng(1).standard_normal((12, 20)), delimiter=",")
    write_manifest(project / "beside" / "m.toml",
                   '[[matrix]]\nname = "pts"\ncategory = "kernel"\nfile = "points.csv"\nload = {kernel = "rbf"}\n\n'
                   '[[matrix]]\nname = "cov"\ncategory = "covariance"\nfile = "table.csv"\nload = {covariance = true}\n')
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    monkeypatch.chdir(project)
    run = batch_module.run_matrix

    def in_another_folder(task, **kwargs):
        os.chdir(elsewhere)
        return run(task, **kwargs)

    monkeypatch.setattr(batch_module, "run_matrix", in_another_folder)
    s = run_batch("beside/m.toml", "out", BatchOptions(methods=("tsvd",), data_dir="data",
                                                       settings=FitSettings(device="cpu")))
    assert dict(s.statuses) == {"ok": 2}, [r.get("error") for r in lines(project / "out")]
    assert {p.name for p in (project / "out" / "factors").iterdir()} == {"pts.tsvd.h5", "cov.tsvd.h5"}
    assert not list(elsewhere.iterdir())


@pytest.mark.parametrize("load,match", [
    ('kernel = "gauss"', "load options: unknown kernel 'gauss' \\(did you mean 'rbf'\\?\\); choose one of rbf"),
    ("bandwidth = 2.0", "load options: a bandwidth needs a kernel"),
    ('kernel = "rbf", bandwidth = -1.0', "load options: bandwidth must be a positive, finite number, got -1.0"),
    ('kernel = "rbf", bandwidth = nan', "load options: bandwidth must be a positive, finite number, got nan"),
    ('kernel = "linear", bandwidth = 1.0', "load options: the linear kernel takes no bandwidth"),
])
def test_bad_kernel_entries_are_refused_when_the_manifest_is_read(tmp_path, load, match):
    from sfapprox.datasets.manifest import ManifestError, load_manifest

    m, _ = _kernel_manifest(tmp_path, load=load)
    with pytest.raises(ManifestError, match=match):
        load_manifest(m)


def test_every_square_weight_of_a_model_is_one_entry(tmp_path):
    import torch

    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(1)
    weights = {"attn.q.weight": rng.standard_normal((12, 12)), "mlp.up.weight": rng.standard_normal((12, 20)),
               "attn.q.bias": rng.standard_normal(12), "attn.o.weight": rng.standard_normal((10, 10))}
    # beside them, an optimizer's moments of a square weight (a training checkpoint): square, not weights
    moments = {"optimizer.state.0.exp_avg": rng.standard_normal((12, 12))}
    torch.save({k: torch.from_numpy(v) for k, v in {**weights, **moments}.items()}, data / "model.pt")
    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "model"\ncategory = "other"\n'
                                            'file = "model.pt"\nload = {var = "*"}\n')
    out = tmp_path / "out"
    s = run_batch(m, out, BatchOptions(methods=("tsvd",), data_dir=str(data), budget="0.5",
                                       settings=FitSettings(device="cpu")))
    recs = {r["matrix"]: r for r in lines(out)}
    assert set(recs) == {"model.attn.q.weight", "model.attn.o.weight"} and dict(s.statuses) == {"ok": 2}
    for name, rec in recs.items():
        W = weights[name[len("model."):]]
        sv = np.linalg.svd(W, compute_uv=False)
        r = rec["params"]["rank"]
        assert rec["n"] == W.shape[0] and rec["fro_error"] == pytest.approx(np.sqrt((sv[r:] ** 2).sum()), rel=1e-6)
    again = run_batch(m, out, BatchOptions(methods=("tsvd",), data_dir=str(data), budget="0.5",
                                           settings=FitSettings(device="cpu")))
    assert (again.written, again.skipped) == (0, 2)  # resumes by the expanded names



def test_a_tied_weight_is_run_once_under_its_first_name(tmp_path):
    """Two names of one storage (tied weights, ALBERT's shared layers) were two entries: the one matrix
    fitted twice, and counted twice in the report's wins; a transpose of it is a matrix of its own."""
    import torch

    w = torch.randn(8, 8, dtype=torch.float64)
    torch.save({"layers.0.w": w, "layers.1.w": w, "head.w": w.t()}, tmp_path / "m.pt")
    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "m"\ncategory = "other"\n'
                                            'file = "m.pt"\nload = {var = "*"}\n')
    out = tmp_path / "out"
    run_batch(m, out, BatchOptions(methods=("tsvd",), data_dir=str(tmp_path), budget="0.5",
                                   settings=FitSettings(device="cpu")))
    assert sorted(r["matrix"] for r in lines(out)) == ["m.head.w", "m.layers.0.w"]

def test_every_square_weight_needs_a_weights_file(tmp_path):
    from sfapprox.datasets.manifest import ManifestError, load_manifest

    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "x"\ncategory = "other"\n'
                                            'file = "points.csv"\nload = {var = "*"}\n')
    with pytest.raises(ManifestError, match="every square weight"):
        load_manifest(m)


@pytest.mark.parametrize("file,load,said", [
    ("model.pt", 'var = "nope"', "model.pt: no tensor 'nope'; square weight matrices: attn.q.weight 6 x 6"),
    ("model.pt", 'var = "up.weight"', "model.pt: tensor 'up.weight' has shape 6 x 9, not a square matrix"),
    ("flat.pt", 'var = "*"', 'flat.pt: load option var = "*" (every square weight): the file holds no square weight '
                             "matrix (2 tensors: up.weight 6 x 9, bias 6); a matrix to approximate must be square"),
    ("moments.pt", 'var = "*"', "its square tensors are an optimizer's state (optimizer.state.0.exp_avg)"),
    ("qk.npz", 'format = "attention", var = "Q,K"', "qk.npz: no array 'Q' (arrays: q, k)"),
    ("qk.npz", 'var = "w"', "qk.npz: no array 'w'; arrays: q 6 x 4 float64, k 6 x 4 float64; pick one with var="),
])
def test_an_entry_naming_what_its_file_does_not_hold_is_refused_before_any_work(tmp_path, file, load, said):
    """A var its file (at hand) does not hold, a weights file with no square weight of the model: the manifest's
    mistake, found at run time only (the entry 'unavailable', tried again at every run, exit 1): refused in one
    line naming the manifest, the entry and the file, exit 2, nothing written."""
    import torch
    from typer.testing import CliRunner

    from sfapprox.cli import app

    rng = np.random.default_rng(0)
    t = lambda *shape: torch.from_numpy(rng.standard_normal(shape))  # noqa: E731
    torch.save({"attn.q.weight": t(6, 6), "up.weight": t(6, 9)}, tmp_path / "model.pt")
    torch.save({"up.weight": t(6, 9), "bias": t(6)}, tmp_path / "flat.pt")
    torch.save({"up.weight": t(6, 9), "optimizer.state.0.exp_avg": t(6, 6)}, tmp_path / "moments.pt")
    np.savez(tmp_path / "qk.npz", q=rng.standard_normal((6, 4)), k=rng.standard_normal((6, 4)))
    m = write_manifest(tmp_path / "m.toml", gen_entry("fine"),
                       f'[[matrix]]\nname = "bad"\ncategory = "other"\nfile = "{file}"\nload = {{{load}}}\n')
    out = tmp_path / "out"
    ran = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--device", "cpu"])
    assert ran.exit_code == 2, ran.output
    text = " ".join(ran.output.split())
    assert text.startswith(f"error: {m}: entry 'bad': {tmp_path / file}: ") and said in text, text
    assert "--var" not in text and not out.exists()
    # the other entries alone run as before (--only): the entry not selected is not looked at
    assert CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--device", "cpu",
                                    "--only", "fine", "-q"]).exit_code == 0


def test_the_batch_memory_limit_holds_for_making_and_loading_the_matrix(tmp_path):
    """--max-memory (settings.max_memory) bounds the generator and the file's loading too: a banded
    n = 8,000 under 200 MB is refused before anything is allocated (it took 2.3 GB before), and a
    32 MB .npy under 10 MB is not loaded whole (it was, with only each method's check after)."""
    import resource

    np.save(tmp_path / "big.npy", np.zeros((2000, 2000)))
    m = write_manifest(tmp_path / "m.toml", gen_entry("band", n=8000),
                       '[[matrix]]\nname = "b2"\ncategory = "other"\nfile = "big.npy"\n')
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s = run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu", max_memory=10 * 2**20)))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200 * 1024  # KiB: no 0.5-2 GB arrays
    b2, band = sorted(lines(tmp_path / "out"), key=lambda r: r["matrix"])
    assert band["status"] == "unavailable" and "generator 'banded' with n=8000 needs about" in band["error"]
    assert b2["status"] == "not applicable" and "over the memory limit of 10.0 MiB" in b2["reason"]
    assert dict(s.statuses) == {"unavailable": 1, "not applicable": 1}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_where_a_batch_writes_a_file_is_refused_not_waited_on(tmp_path, no_hang):
    """A named pipe at a report's name (or the reports' record) blocked the batch before it began, in
    the open that reads it; one at a pair's factors file, after the fit, writing through it."""
    from sfapprox.cli import app
    from sfapprox.datasets.batch import REPORTS_WRITTEN
    from sfapprox.datasets.runner import factors_name

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    for name in ("report.md", REPORTS_WRITTEN):
        out = tmp_path / name
        out.mkdir()
        os.mkfifo(out / name)
        res = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
        assert res.exit_code == 2 and f"{name}: not written by a batch" in " ".join(res.output.split())
        assert not (out / "results.jsonl").exists()
    out = tmp_path / "out"
    fifo = out / factors_name("a", "tsvd")
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    run_batch(m, out, dataclasses.replace(FAST, methods=("tsvd",)))
    (record,) = lines(out)
    assert record["status"] == "failed" and "is a named pipe, not a file" in record["error"]
    assert fifo.is_fifo()


def test_report_files_a_batch_did_not_write_are_never_overwritten(tmp_path):
    """A report.md of the user's own in --out-dir is refused before any work (it was replaced); the
    batch's own reports are rewritten on the next run, and one edited since is refused; a folder
    from before the record keeps working when its reports look like the batch's."""
    from sfapprox.cli import app
    from sfapprox.datasets.batch import REPORTS_WRITTEN, foreign_reports

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("MY IMPORTANT NOTES\n")
    run = lambda *extra: CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--quiet", *extra])
    first = run("--methods", "tsvd")
    assert first.exit_code == 2 and "report.md: not written by a batch, or edited since" in " ".join(first.output.split())
    assert (out / "report.md").read_text() == "MY IMPORTANT NOTES\n" and not (out / "results.jsonl").exists()
    (out / "report.md").unlink()
    assert run("--methods", "tsvd").exit_code == 0 and foreign_reports(out) == []
    assert run("--methods", "sparse").exit_code == 0 and "sparse" in (out / "report.csv").read_text()
    with open(out / "report.csv", "a") as fh:
        fh.write("my edit\n")
    assert foreign_reports(out) == [out / "report.csv"] and run("--methods", "tsvd").exit_code == 2
    (out / "report.csv").write_text((out / "report.csv").read_text().replace("my edit\n", ""))
    (out / REPORTS_WRITTEN).unlink()  # a folder from before the record
    assert foreign_reports(out) == [] and run("--methods", "tsvd").exit_code == 0
    (out / REPORTS_WRITTEN).unlink()  # ... of the first versions, whose report.md began "# Batch report"
    (out / "report.md").write_text("# Batch report\n\n## synthetic\n")
    assert foreign_reports(out) == [] and run("--methods", "tsvd").exit_code == 0


def test_an_out_dir_that_is_a_file_is_said_as_such(tmp_path):
    from sfapprox import ParameterError

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ParameterError, match="afile: the output folder is a file here, not a folder"):
        run_batch(m, tmp_path / "afile", TSVD)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "factors").write_text("x")
    with pytest.raises(ParameterError, match="factors: the folder of the saved factors is a file here"):
        run_batch(m, tmp_path / "out", TSVD)


def test_lines_of_matrices_the_manifest_no_longer_names_are_said(tmp_path):
    """An entry removed from the manifest kept its lines, and the report ranked them without a word."""
    out = tmp_path / "out"
    both = write_manifest(tmp_path / "m.toml", gen_entry("a") + gen_entry("b"))
    run_batch(both, out, TSVD)
    assert run_batch(both, out, TSVD, only=["a"]).orphans == []  # b is still the manifest's, only not selected
    one = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    assert run_batch(one, out, TSVD).orphans == ["b"]


def test_a_kernel_entry_s_own_memory_limit_holds_for_forming_it(tmp_path):
    """``load = {max_memory = ...}`` below what forming the kernel and scoring it take: it is not formed (the
    batch's larger limit was used for that), so tsvd is not applicable and the others run from columns."""
    m, data = _kernel_manifest(tmp_path, load='kernel = "rbf", bandwidth = 1.5, max_memory = "32M"')
    out = tmp_path / "out"
    run_batch(m, out, BatchOptions(methods=("nystrom", "tsvd"), data_dir=str(data),
                                   settings=FitSettings(max_iter=15, device="cpu", max_memory=8 << 30)))
    recs = {r["method"]: r for r in lines(out)}
    assert recs["tsvd"]["status"] == "not applicable"
    assert recs["nystrom"]["status"] == "ok" and recs["nystrom"]["matrix_info"]["path"] == "columns"


def test_an_interrupted_redo_keeps_the_lines_it_did_not_redo(tmp_path):
    """--redo (or a changed budget) removed every finished line before any work: stopped after one pair,
    the folder held that pair alone.  Now a line goes when its new line is written."""
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b"), gen_entry("c"))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    before = {r["matrix"]: r for r in lines(out)}
    seen = []

    def stop_after_one(kind, **info):
        if kind == "record":
            seen.append(info["record"]["matrix"])
            raise KeyboardInterrupt

    try:
        s = run_batch(m, out, TSVD, force=True, on_event=stop_after_one)
    except KeyboardInterrupt:
        s = None
    assert s is None or s.interrupted
    after = lines(out)
    assert sorted(r["matrix"] for r in after) == ["a", "b", "c"]  # one line each: the redone one replaced
    redone = seen[0]
    assert all((r is before[r["matrix"]]) or (r == before[r["matrix"]]) for r in after if r["matrix"] != redone)
    assert next(r for r in after if r["matrix"] == redone) != before[redone]
    again = run_batch(m, out, TSVD, force=True)  # the redo finished: every pair once, all new
    assert again.written == 3 and sorted(r["matrix"] for r in lines(out)) == ["a", "b", "c"]


def test_entries_whose_fits_would_share_a_factors_file_are_refused(tmp_path):
    from sfapprox.datasets import ManifestError

    """Entry ``a``'s tsvd fit and entry ``a.tsvd``'s SF fit were both ``factors/a.tsvd.h5``: the second
    overwrote the first.  Refused before any work, naming both."""
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("a.tsvd", n=20))
    with pytest.raises(ManifestError, match=r"entries 'a' \(tsvd\) and 'a.tsvd' \(sf\) would both save their "
                                            r"factors as factors/a.tsvd.h5"):
        run_batch(m, tmp_path / "out", TSVD)
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_weights_entry_unavailable_at_first_leaves_no_stale_line_once_its_file_is_there(tmp_path):
    """Its file missing, ``model`` (var = "*") got an "unavailable" line; once the file is there it is read
    as its weights, and that line goes (it stayed for good, and every report said "1 entry unavailable")."""
    import torch

    data = tmp_path / "data"
    data.mkdir()
    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "model"\ncategory = "other"\n'
                                            'file = "model.pt"\nload = {var = "*"}\n')
    out = tmp_path / "out"
    options = BatchOptions(methods=("tsvd",), data_dir=str(data), budget="0.5", settings=FitSettings(device="cpu"))
    run_batch(m, out, options)
    assert [(r["matrix"], r["status"]) for r in lines(out)] == [("model", "unavailable")]
    torch.save({"w": torch.randn(10, 10)}, data / "model.pt")
    s = run_batch(m, out, options)
    assert [(r["matrix"], r["status"]) for r in lines(out)] == [("model.w", "ok")]
    assert any("model: now read as its weights" in x for x in s.repaired)


def test_hand_edited_lines_with_an_unknown_status_or_an_ok_without_its_error_are_invalid(tmp_path):
    """An edited "OK" was shown as a status of its own; an ok line without its error was skipped by every
    resume and ranked nowhere.  Both are invalid lines now: said, and redone."""
    from sfapprox.datasets.results_file import record_problem

    assert "must be one of" in record_problem({"matrix": "a", "method": "sf", "status": "OK", "fro_error": 1.0})
    assert "must have its fro_error" in record_problem({"matrix": "a", "method": "sf", "status": "ok"})
    assert record_problem({"matrix": "a", "method": "sf", "status": "ok", "fro_error": None}) is None
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    line = lines(out)[0]
    del line["fro_error"]
    (out / "results.jsonl").write_text(json.dumps(line) + "\n")
    again = run_batch(m, out, TSVD)
    assert again.written == 1 and any("line(s) it cannot read" in x for x in again.repaired)
    assert lines(out)[0]["fro_error"] > 0


def test_with_only_the_entries_not_run_are_not_said_to_be_redone(tmp_path):
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b"))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    s = run_batch(m, out, BatchOptions(methods=("tsvd",), budget="0.3", settings=FitSettings(device="cpu")),
                  only=["a"])
    assert s.written == 1 and s.changed == ["a: its line was made with budget 'sf', now '0.3'; its lines are redone"]


def test_a_changed_category_or_reference_reaches_the_lines_a_resume_skips(tmp_path):
    """Editing an entry's category or its reference figures changes nothing measured: the pairs are not
    redone, but their lines (and so the report) say what the manifest now says; they kept the old."""
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    write_manifest(m, gen_entry("a", category="other").replace("params", "reference = {tsvd = 3.0}\nparams"))
    again = run_batch(m, out, TSVD)
    assert (again.written, again.skipped) == (0, 1) and any("category and reference" in x for x in again.repaired)
    line = lines(out)[0]
    assert line["category"] == "other" and line["reference"] == {"tsvd": 3.0}
    assert run_batch(m, out, TSVD).repaired == []  # nothing left to change


def test_lines_of_another_format_or_a_newer_version_or_with_control_characters_are_not_ours():
    """report read a line with "format": "other" or "version": 2 as its own, and printed a matrix name
    holding ESC to the terminal raw."""
    from sfapprox.datasets.results_file import RECORD_FORMAT, RECORD_VERSION, record_problem

    line = {"matrix": "a", "method": "sf", "status": "ok", "fro_error": 1.0}
    assert record_problem({**line, "format": RECORD_FORMAT, "version": RECORD_VERSION}) is None
    assert record_problem(line) is None  # lines written before the fields were recorded
    assert "field 'format' must be" in record_problem({**line, "format": "other"})
    assert "a newer sfapprox wrote it" in record_problem({**line, "version": RECORD_VERSION + 1})
    assert "field 'version'" in record_problem({**line, "version": "1"})
    for edited in (0, -1, "1", 1.0, True):  # each was said to be "a newer sfapprox"'s
        assert "newer" not in record_problem({**line, "version": edited})
        assert f"must be a whole number from 1 to {RECORD_VERSION}, got {edited!r}" in record_problem(
            {**line, "version": edited})
    assert "control character" in record_problem({**line, "matrix": "a\x1b[2Jb"})


def _without_a_scheduler(monkeypatch):
    """A fake Dask client's batch: its futures are done when asked, and nothing comes through the records'
    queue (each task's records come with its result)."""
    import dask.distributed

    from sfapprox.datasets import batch as B

    class NoQueue(B._DaskRecords):
        name = "no-queue"

        def __init__(self, client, begun=None):
            self.client, self.sent, self.unwritten, self.begun = client, {}, [], {} if begun is None else begun

        def expect(self, tasks):
            pass

        def receive(self, write):
            pass

        def close(self):
            pass

    monkeypatch.setattr(dask.distributed, "wait", lambda futures, **kwargs: None)
    monkeypatch.setattr(B, "_DaskRecords", NoQueue)


def test_a_dask_batch_connects_before_any_work_and_stops_when_its_cluster_is_lost(tmp_path, monkeypatch):
    """batch --executor dask connected after its downloads and lines ("--executor dask 'foo:bar' is not a
    scheduler address" once the cache was filled), and a scheduler killed mid-run wrote a "failed" line per
    pair that never ran, exit 0."""
    pytest.importorskip("distributed")
    from _compat import cluster_lost_error

    from sfapprox import ParameterError, ResourceError
    from sfapprox.datasets import batch as B

    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "band"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 16}\n')
    with pytest.raises(ParameterError, match="^scheduler 'foo:bar' is not a scheduler address"):
        B.run_batch(m, tmp_path / "out", B.BatchOptions(methods=("tsvd",)), executor="dask", scheduler="foo:bar")
    assert not (tmp_path / "out").exists()  # nothing made before the connection

    class Lost:
        key = "k"

        def done(self):
            return True

        def result(self):
            raise cluster_lost_error()

    class Client:
        closed = False

        def map(self, fn, tasks, pure):
            return [Lost() for _ in tasks]

        def cancel(self, futures):
            pass

        def close(self):
            Client.closed = True

    monkeypatch.setattr(B, "connect", lambda scheduler, what: Client())
    _without_a_scheduler(monkeypatch)
    with pytest.raises(ResourceError, match="the Dask cluster was lost during the batch"):
        B.run_batch(m, tmp_path / "out2", B.BatchOptions(methods=("tsvd",)), executor="dask", scheduler="tcp://h:1")
    assert Client.closed
    assert not (tmp_path / "out2" / B.RESULTS_FILE).exists() or "failed" not in (tmp_path / "out2" / B.RESULTS_FILE).read_text()


def test_a_dask_task_whose_workers_died_is_a_failed_line_and_the_batch_goes_on(tmp_path, monkeypatch):
    """A matrix whose Dask workers died running it (KilledWorker after the scheduler's retries: over its memory
    limit, or killed) stopped the whole batch with "the Dask cluster was lost", no line written, though the
    cluster ran the other matrices on.  Its pairs are "failed" lines saying why; the others run."""
    pytest.importorskip("distributed")
    from distributed.scheduler import KilledWorker

    from sfapprox.datasets import batch as B

    m = write_manifest(tmp_path / "m.toml", gen_entry("big"), gen_entry("a"), gen_entry("b", "circulant"))

    class Future:
        def __init__(self, task):
            self.key, self.task = task.entry.name, task

        def done(self):
            return True

        def result(self):
            if self.task.entry.name == "big":
                raise KilledWorker("run_matrix-1", type("WorkerState", (), {"address": "tcp://10.0.0.7:4000"})(), 3)
            return B.run_matrix(self.task)

    class Client:
        def map(self, fn, tasks, pure):
            return [Future(t) for t in tasks]

        def cancel(self, futures):
            pass

        def close(self):
            pass

    monkeypatch.setattr(B, "connect", lambda scheduler, what: Client())
    _without_a_scheduler(monkeypatch)
    s = B.run_batch(m, tmp_path / "out", B.BatchOptions(methods=("tsvd", "sparse")), executor="dask",
                    scheduler="tcp://h:1")
    assert not s.interrupted and dict(s.statuses) == {"failed": 2, "ok": 4}
    got = {(r["matrix"], r["method"]): r for r in lines(tmp_path / "out")}
    for method in ("tsvd", "sparse"):
        error = got[("big", method)]["error"]
        assert got[("big", method)]["status"] == "failed"
        assert error.startswith("worker died: the Dask worker running it died 4 times") and "memory limit" in error
        assert "tcp://10.0.0.7:4000" in error and "\n" not in error
        assert got[("a", method)]["status"] == got[("b", method)]["status"] == "ok"
        # the limit as run_batch's caller sets it (a Python caller was told "--max-memory")
        assert "(or set a lower max_memory=) and run again" in error
    from sfapprox._errors import spelled_for

    with spelled_for("cli"):  # the batch command's: its limit is typed
        B.run_batch(m, tmp_path / "typed", B.BatchOptions(methods=("tsvd",)), executor="dask", scheduler="tcp://h:1")
    typed = {r["matrix"]: r for r in lines(tmp_path / "typed")}["big"]["error"]
    assert "(or set a lower --max-memory) and run again" in typed


@dataclasses.dataclass(frozen=True)
class Logged(BatchOptions):
    """Options that carry a log file (which does not pickle)."""

    log: Any = None


def test_a_dask_batch_whose_options_do_not_pickle_is_one_parameter_error(tmp_path, capfd):
    """Options that carry an open file (a subclass with a log) sent to a Dask cluster: dask's TypeError
    ("Could not serialize object of type _MapExpr") came out, after three chained tracebacks it logged."""
    distributed = pytest.importorskip("dask.distributed")
    from _compat import pickle_refusal

    from sfapprox import ParameterError

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    with open(tmp_path / "log.txt", "w") as log, \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        capfd.readouterr()
        with pytest.raises(ParameterError, match=r"^the batch's matrices \(their manifest entries, the batch's options\) "
                           rf"cannot be sent to the executor's workers: it does not pickle \({pickle_refusal(log)}\)") as caught:
            run_batch(m, tmp_path / "out", Logged(methods=("tsvd",), log=log), executor="dask",
                      scheduler=c.scheduler_address)
        assert "\n" not in str(caught.value) and "Traceback" not in capfd.readouterr().err


_HELD: dict = {}  # the events of the test below (its task is pickled, and refers to them by name)


def _run_then_flag(task):
    from sfapprox.datasets.runner import run_matrix

    run_matrix(task)
    _HELD["done"].set()


def test_a_matrix_cancelled_on_a_dask_worker_writes_no_factors_into_the_folder(tmp_path, monkeypatch):
    """A Dask batch stopped (SIGTERM, Ctrl-C) cancels its tasks, but dask cannot stop one that runs: its
    worker ran the matrix on and wrote its factors files into the folder after the batch had ended and
    released its lock (seen 12 s after exit 143).  A cancelled task saves nothing and runs no further method."""
    distributed = pytest.importorskip("dask.distributed")
    import threading

    from sfapprox.datasets import runner
    from sfapprox.datasets.batch import MatrixTask
    from sfapprox.datasets.manifest import load_manifest

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    entry = load_manifest(m).select(None)[0]
    out = tmp_path / "out"
    (out / "factors").mkdir(parents=True)
    task = MatrixTask(entry, ("tsvd", "sparse"), BatchOptions(methods=("tsvd", "sparse")), str(out))
    started, go, done, ran = threading.Event(), threading.Event(), threading.Event(), []
    _HELD["done"] = done
    real = runner.run_all

    def held(*args, **kwargs):  # the first method waits until its task is cancelled
        ran.append(args[0][0])
        started.set()
        go.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_all", held)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        future = client.submit(_run_then_flag, task, pure=False)
        assert started.wait(10)
        client.cancel(future)
        worker = next(iter(c.workers.values()))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(ts.state != "cancelled" for ts in worker.state.tasks.values()):
            time.sleep(0.02)
        go.set()
        assert done.wait(10)
    assert ran == ["tsvd"] and list((out / "factors").iterdir()) == []
    # a task that is not cancelled saves its factors, as ever
    assert runner.run_matrix(task)[0]["factors"] == "factors/a.tsvd.h5" and (out / "factors" / "a.tsvd.h5").is_file()


def test_a_stop_of_a_dask_batch_keeps_the_pairs_of_a_matrix_that_had_finished(tmp_path, monkeypatch):
    """On Dask a matrix's records came back with its task, when its last method was done: a stop (Ctrl-C,
    SIGTERM) during a later method lost the lines of those that had finished, to be run again, while the batch
    said that every finished line was kept.  Each pair's record is sent as it finishes now; the next run redoes
    only the others."""
    distributed = pytest.importorskip("dask.distributed")
    import threading

    from sfapprox.datasets import runner

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    options = BatchOptions(methods=("tsvd", "sparse"))
    go, finished, ran = threading.Event(), threading.Event(), []
    real = runner.run_all

    def stopped_at_the_second(names, *args, **kwargs):  # the batch is stopped as the matrix's second pair starts
        ran.append(names[0])
        if names[0] != "sparse":
            return real(names, *args, **kwargs)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # (a Ctrl-C: the main thread's)
        go.wait(30)  # until the batch has ended (bounded: a batch that never ends fails below)
        try:
            return real(names, *args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(runner, "run_all", stopped_at_the_second)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        try:
            s = run_batch(m, out, options, executor="dask", scheduler=c.scheduler_address)
        finally:
            go.set()
        assert finished.wait(30)  # the cancelled task's method ends (and saves nothing) before the cluster does
        assert s.interrupted and dict(s.statuses) == {"ok": 1}
        assert s.cut_short == ["a/sparse"] and s.not_begun == 0  # (its worker said it began the matrix)
        assert [(r["matrix"], r["method"], r["status"]) for r in lines(out)] == [("a", "tsvd", "ok")]
        assert [p.name for p in (out / "factors").iterdir()] == ["a.tsvd.h5"]
        ran.clear()
        monkeypatch.setattr(runner, "run_all", lambda names, *a, **k: (ran.append(names[0]), real(names, *a, **k))[1])
        again = run_batch(m, out, options, executor="dask", scheduler=c.scheduler_address)
    assert ran == ["sparse"] and again.skipped == 1 and dict(again.statuses) == {"ok": 1}
    assert sorted((r["matrix"], r["method"], r["status"]) for r in lines(out)) == [("a", "sparse", "ok"),
                                                                                  ("a", "tsvd", "ok")]


def test_a_dask_task_retried_after_its_worker_was_lost_runs_only_the_pairs_not_sent(tmp_path):
    """A matrix's task that Dask runs again on another worker (its first one lost after some pairs were sent)
    runs only the others: their lines are written already, and a fit run again would write its factors file
    over the one its line describes.  The batch writes each pair's line once."""
    distributed = pytest.importorskip("dask.distributed")
    from sfapprox.datasets import batch as B
    from sfapprox.datasets.manifest import load_manifest

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    (out / "factors").mkdir(parents=True)
    task = B.MatrixTask(load_manifest(m).select(None)[0], ("tsvd", "sparse"), BatchOptions(methods=("tsvd", "sparse")),
                        str(out))
    written: list = []
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        channel = B._DaskRecords(client)
        first = client.submit(B._run_on_dask, channel.name, task, pure=False).result()
        saved = (out / "factors" / "a.tsvd.h5").stat().st_mtime_ns
        # Dask's retry of that task (the same task, the same queue)
        again = client.submit(B._run_on_dask, channel.name, task, pure=False).result()
        channel.receive(written.append)
        channel.close()
    assert [r["method"] for r in first] == ["tsvd", "sparse"] and again == []
    assert [(r["method"], r["status"]) for r in written] == [("tsvd", "ok"), ("sparse", "ok")]
    assert channel.rest(task, first) == [] and (out / "factors" / "a.tsvd.h5").stat().st_mtime_ns == saved


def test_reports_cut_short_by_a_stop_are_the_batchs_own_next_time(tmp_path, monkeypatch):
    """A stop (or a failure) while a batch wrote its reports left them unrecorded: the next batch refused
    its own reports as another's, for good.  Those written are recorded whatever happens."""
    import sfapprox.cli.batch as cli_batch
    from sfapprox.cli import app
    from sfapprox.datasets.batch import foreign_reports

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    run = lambda *extra: CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--quiet", *extra])
    assert run("--methods", "tsvd").exit_code == 0
    real = cli_batch.write_outputs

    def stopped_after_writing(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_batch, "write_outputs", stopped_after_writing)
    assert run("--methods", "sparse").exit_code == 130
    monkeypatch.setattr(cli_batch, "write_outputs", real)
    assert foreign_reports(out) == []
    again = run("--methods", "sparse")
    assert again.exit_code == 0, again.output


def test_reports_written_before_a_kill_are_the_batchs_own_next_time(tmp_path):
    """kill -9 between a report's write and its record: the record said "writing", so a report that
    begins as the batch's counts as its own; anything else stays foreign."""
    from sfapprox.datasets.batch import foreign_reports, remember_reports

    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("### old\n")
    remember_reports(out)
    (out / "report.md").write_text("### new, written before the kill\n")
    assert foreign_reports(out) == [out / "report.md"]  # recorded, finished: an edit is another's
    remember_reports(out, writing=True)
    (out / "report.md").write_text("### newer, written before the kill\n")
    (out / "report.csv").write_text("MY NOTES\n")
    assert foreign_reports(out) == [out / "report.csv"]


def test_a_batch_with_failed_pairs_exits_1_after_writing_what_ran(tmp_path):
    """A failed pair (its factors file cannot be written) left the exit code 0: a script or CI could
    not tell.  Exit 1, with the rest written; once it runs, 0."""
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b"))
    out = tmp_path / "out"
    (out / "factors" / "a.tsvd.h5").mkdir(parents=True)  # not a file: a.tsvd's factors cannot be saved
    run = lambda: CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    first = run()
    assert first.exit_code == 1, first.output
    assert "exit 1: 1 failed" in " ".join(first.output.split())
    assert {(r["matrix"], r["status"]) for r in lines(out)} == {("a", "failed"), ("b", "ok")}
    assert (out / "report.md").exists()
    (out / "factors" / "a.tsvd.h5").rmdir()
    assert run().exit_code == 0


def test_entry_names_no_factors_file_can_have_are_refused_before_anything_is_made(tmp_path):
    """A clash of factors files was refused after the folder, factors/ and the lock were made; a name too
    long for a file name ran every fit, each failing at its save."""
    from sfapprox.cli import app

    out = tmp_path / "out"
    for entries, said in (((gen_entry("a.tsvd"), gen_entry("a")), "would both save their factors as"),
                          ((gen_entry("x" * 260),), "bytes, over the 255")):
        m = write_manifest(tmp_path / "m.toml", *entries)
        done = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
        assert done.exit_code == 2 and said in " ".join(done.output.split()), done.output
        assert not out.exists()


def test_an_entry_name_is_held_to_the_file_name_limit_every_output_has(tmp_path):
    """The batch refused factors files of over 210 bytes with factors/ counted (its own limit, for the room
    a temporary adds) where result_path takes 255: one rule now, name_over_limit's.  At the boundary the
    longest method's file name is 255 bytes, and a fit under that name is saved."""
    from sfapprox._base import methods
    from sfapprox.cli import app
    from sfapprox.datasets.batch import check_factor_names
    from sfapprox.datasets.manifest import ManifestError
    from sfapprox.datasets.runner import factors_name

    longest = max(len(Path(factors_name("", m)).name) for m in methods())  # ".butterfly-hier.h5"
    fits = "x" * (255 - longest)
    assert max(len(Path(factors_name(fits, m)).name) for m in methods()) == 255
    check_factor_names([fits], "m.toml")
    with pytest.raises(ManifestError, match=r"would have a name of 256 bytes, over the 255 its file system takes"):
        check_factor_names([fits + "x"], "m.toml")
    m, out = write_manifest(tmp_path / "m.toml", gen_entry(fits)), tmp_path / "out"
    done = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    assert done.exit_code == 0, done.output
    assert (out / factors_name(fits, "tsvd")).is_file()


def test_a_batch_output_path_windows_refuses_is_refused_before_anything_is_made(tmp_path, monkeypatch):
    """The batch checked its outputs' file names only (name_over_limit), not Windows' limit on a whole path
    (path_over_limit, which every other output has): each fit ran, then failed at its save."""
    from sfapprox import _atomic
    from sfapprox._atomic import WINDOWS_MAX_PATH, _TEMPORARY_EXTRA
    from sfapprox._errors import ParameterError

    monkeypatch.setattr(sys, "platform", "win32")  # (as test_atomic's Windows checks do)
    monkeypatch.setattr(_atomic, "_long_paths_enabled", lambda: None)  # (unreadable: the limit holds)
    limit = WINDOWS_MAX_PATH - _TEMPORARY_EXTRA
    deep = tmp_path / ("d" * (limit - len(str(tmp_path)) - len("//results.jsonl")))  # results.jsonl fits exactly
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    # the folder: its record of the reports (and its lock file) have longer names than results.jsonl
    with pytest.raises(ParameterError, match=r"/\.sfapprox-reports\.json: its full path is .* over the "
                                             f"{limit} Windows takes .* choose a shorter out_dir"):
        run_batch(m, deep, BatchOptions(methods=("tsvd",)))
    # an entry whose factors file's path is too long there
    out = tmp_path / "o"
    name = "e" * (limit - len(str(out / "factors" / ".tsvd.h5")) + 1)
    m = write_manifest(tmp_path / "m.toml", gen_entry(name))
    with pytest.raises(ParameterError, match=rf"m\.toml: entry '{name}': .*/factors/{name}\.[a-z-]+\.h5: its full path "
                                             rf"is \d+ characters, over the {limit} Windows takes"):
        run_batch(m, out, BatchOptions(methods=("tsvd",)))
    assert not deep.exists() and not out.exists()


def test_each_factors_file_name_is_checked_once(monkeypatch):
    """check_factor_names checked each entry's name against its file system's limit twice (name_over_limit
    for the manifest's wording, then again inside check_name_length for Windows' limit on the path): once
    each now, and both refusals keep their words."""
    from sfapprox import _atomic
    from sfapprox._base import methods
    from sfapprox._errors import ParameterError
    from sfapprox.datasets import batch

    calls = []
    real = _atomic.name_over_limit

    def counted(target):
        calls.append(target)
        return real(target)

    monkeypatch.setattr(_atomic, "name_over_limit", counted)
    monkeypatch.setattr(batch, "name_over_limit", counted)
    batch.check_factor_names(["a", "b"], "m.toml")
    assert len(calls) == 2 * len(methods()) and len(set(calls)) == len(calls)
    monkeypatch.setattr(_atomic, "path_over_limit", lambda target: (300, 233))  # (Windows' limit, as if there)
    with pytest.raises(ParameterError, match=r"^m\.toml: entry 'a': factors/a\.h5: its full path is 300 "
                                             r"characters, over the 233 Windows takes .* shorten the entry's name"):
        batch.check_factor_names(["a"], "m.toml")


def test_a_batch_where_nothing_ran_names_every_unavailable_entry_in_its_reports(tmp_path):
    """Its report files were empty (report.csv 0 bytes, report.md a blank line); entries unavailable for
    another reason than a missing file were named nowhere in them."""
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", '[[matrix]]\nname = "x"\ncategory = "network"\nfile = "nope.net"\n\n')
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    assert done.exit_code == 1, done.output
    md, rows = (out / "report.md").read_text(), list(csv.DictReader(open(out / "report.csv")))
    assert "| x | network | " in md and "file 'nope.net' not found" in md
    assert [(r["matrix"], r["category"]) for r in rows] == [("x", "network")] and "not found" in rows[0]["why"]


def test_a_failed_line_behind_a_newer_ok_one_is_neither_reported_nor_kept(tmp_path):
    """A redo killed (kill -9) before its final rewrite left the old 'failed' line above the new 'ok' one:
    every later run skipped the pair, kept both lines and printed the old failure."""
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", seed=2))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    ok = (out / "results.jsonl").read_bytes()
    failed = {**lines(out)[0], "status": "failed", "error": "factors not saved: File too large", "factors": None}
    (out / "results.jsonl").write_bytes(json.dumps(failed).encode() + b"\n" + ok)  # as the killed redo left it
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "failed a/tsvd" not in result.output and "2 finished pair(s) skipped" in " ".join(result.output.split())
    assert (out / "results.jsonl").read_bytes() == ok  # the superseded line dropped, the others as they were


def test_a_full_disk_in_the_final_rewrite_keeps_the_new_lines_and_still_makes_the_report(tmp_path, monkeypatch):
    """The rewrite dropping superseded lines failed on a full disk: the command said "results.jsonl: not
    written ... no partial file was left" and showed no table, though this run's lines were appended."""
    import errno

    import sfapprox._atomic as atomic
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", seed=2))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    failed = {**lines(out)[1], "status": "failed", "error": "worker failed: x", "factors": None}
    with open(out / "results.jsonl", "ab") as f:  # b's latest line failed: this run redoes it
        f.write(json.dumps(failed).encode() + b"\n")
    real_fsync = atomic._fsync

    def full_for_results(path):
        if Path(path).name.startswith(".results.jsonl."):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(path)

    monkeypatch.setattr(atomic, "_fsync", full_for_results)
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "--quiet"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "no partial file was left" not in text and "synthetic" in text  # the table is shown
    assert "this run's lines are kept (appended to it)" in text and "No space left on device" in text
    assert "1 line(s) written (ok 1)" in text and (out / "report.md").is_file()
    assert [(r["matrix"], r["status"]) for r in lines(out)][-1] == ("b", "ok")  # appended, kept


class _PoolStoppedWhileShuttingDown:
    """A process pool that runs each task at once, here, and is stopped (Ctrl-C/SIGTERM) in its final shutdown."""

    def __init__(self, *args, **kwargs):
        pass

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, wait=True, cancel_futures=False):
        if wait:
            raise KeyboardInterrupt


def test_a_stop_while_the_worker_pool_shuts_down_says_the_lines_are_kept(tmp_path, monkeypatch):
    """batch -j 2: a SIGTERM while the pool shut down reached the CLI's last resort, which said "no output
    was written" though every line was."""
    import sfapprox.datasets.batch as batch
    from sfapprox.cli import app

    monkeypatch.setattr(batch, "ProcessPoolExecutor", _PoolStoppedWhileShuttingDown)
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", seed=2))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(out), "--methods", "tsvd", "-j", "2", "--quiet"])
    text = " ".join(result.output.split())
    assert result.exit_code == 130, result.output
    assert "no output was written" not in text
    assert "interrupted (Ctrl-C): every finished line is kept in" in text and "run the same command again to resume" in text
    assert pairs(lines(out)) == [("a", "tsvd"), ("b", "tsvd")]


def test_a_line_whose_factors_file_was_deleted_is_redone_and_report_warns_of_it(tmp_path):
    """`rm out/factors/b.tsvd.h5`: the next run skipped b/tsvd as finished and the report counted its win,
    though its fit was in no file."""
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", seed=2))
    out = tmp_path / "out"
    run_batch(m, out, TSVD)
    (out / "factors" / "b.tsvd.h5").unlink()
    shown = CliRunner().invoke(app, ["report", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "warning: b/tsvd: its factors file factors/b.tsvd.h5 is missing" in " ".join(shown.output.split())
    again = run_batch(m, out, TSVD)
    assert (again.written, again.skipped) == (1, 1)
    assert again.changed == ["b: its factors file factors/b.tsvd.h5 is missing; its lines are redone"]
    assert (out / "factors" / "b.tsvd.h5").is_file() and pairs(lines(out)) == [("a", "tsvd"), ("b", "tsvd")]


def test_an_out_dir_that_is_a_broken_link_or_holds_a_folder_as_its_results_is_said_as_such(tmp_path):
    """A dangling link or a link loop as --out-dir was "a file here"; a folder named results.jsonl a bare
    "Is a directory", in batch and report."""
    from sfapprox import ParameterError
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ParameterError, match=r"dangling: the output folder is a symbolic link to .*nowhere, which "
                                             "does not exist"):
        run_batch(m, tmp_path / "dangling", TSVD)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(ParameterError, match="loop: the output folder is a symbolic link to .*loop that leads back"):
        run_batch(m, tmp_path / "loop", TSVD)
    (tmp_path / "out" / "results.jsonl").mkdir(parents=True)
    with pytest.raises(ParameterError, match=r"results\.jsonl: is a folder, not the batch's results file; move it"):
        run_batch(m, tmp_path / "out", TSVD)
    shown = CliRunner().invoke(app, ["report", str(tmp_path / "out")])
    assert shown.exit_code == 2 and "results.jsonl: is a folder, not the batch's results file" in shown.output


def test_jobs_with_the_dask_executor_is_refused_before_any_work(tmp_path, monkeypatch):
    """--executor dask --jobs 4 ran on the cluster's workers, the --jobs ignored without a word."""
    import sfapprox.datasets.batch as batch
    from sfapprox import ParameterError

    monkeypatch.setattr(batch, "load_manifest", lambda *a, **k: pytest.fail("the manifest was read"))
    with pytest.raises(ParameterError, match=r"jobs=4 sets how many local processes executor='process' runs; on "
                                             r"executor='dask' .* \(leave jobs= out\)"):
        run_batch(tmp_path / "m.toml", tmp_path / "out", BatchOptions(methods=("tsvd",)), jobs=4,
                  executor="dask", scheduler="tcp://127.0.0.1:1")
    assert not (tmp_path / "out").exists()


def test_the_batch_command_names_its_options_as_typed_and_an_entrys_as_its_manifest_keys(tmp_path):
    """The batch command's own options are typed (--jobs 4), an entry's reading options are its manifest's
    keys (var = "..."): the command ran as a Python caller, and said "jobs=4", "executor='dask'" to its user;
    an entry read in its run says "var=" there still, as its manifest writes it."""
    from typer.testing import CliRunner

    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    jobs = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(tmp_path / "o"), "--jobs", "4", "--executor",
                                    "dask", "--scheduler", "tcp://127.0.0.1:1"])
    assert jobs.exit_code == 2, jobs.output
    said = " ".join(jobs.output.split())
    assert "--jobs 4 sets how many local processes --executor process runs; on --executor dask" in said
    assert "(leave --jobs out)" in said and "jobs=" not in said
    alone = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(tmp_path / "o"), "--scheduler", "tcp://h:1"])
    assert alone.exit_code == 2 and "--scheduler tcp://h:1 applies to --executor dask; add --executor dask" in \
        " ".join(alone.output.split())
    # an entry with two arrays and no var: its own run says so in its manifest's key
    np.savez(tmp_path / "two.npz", p=np.eye(8), q=np.eye(8))
    two = write_manifest(tmp_path / "two.toml", '[[matrix]]\nname = "two"\ncategory = "other"\nfile = "two.npz"\n')
    ran = CliRunner().invoke(app, ["batch", str(two), "--out-dir", str(tmp_path / "o2"), "--methods", "tsvd",
                                   "--device", "cpu", "-q"])
    assert ran.exit_code == 1, ran.output
    (record,) = lines(tmp_path / "o2")
    assert record["status"] == "unavailable" and "pick one with var=" in record["error"], record
    assert "--var" not in record["error"]


def test_two_tensors_of_one_model_that_would_share_an_entry_name_say_so(tmp_path):
    """'a/b' and 'a_b' both become entry m.a_b: the message said the name was "other entries'" and to
    rename those, where there was no other entry and a tensor is not the manifest's to rename."""
    import torch

    from sfapprox.datasets.manifest import ManifestError

    torch.save({"a/b": torch.eye(3), "a_b": torch.ones(3, 3)}, tmp_path / "m.pt")
    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "m"\ncategory = "other"\n'
                                            'file = "m.pt"\nload = {var = "*"}\n')
    with pytest.raises(ManifestError, match=r"entry 'm': its tensors 'a/b' and 'a_b' both become 'm.a_b' .*; "
                                            r"list them as entries of their own"):
        run_batch(m, tmp_path / "out", BatchOptions(methods=("tsvd",), data_dir=str(tmp_path),
                                                    settings=FitSettings(device="cpu")))
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_a_weights_name_clash_is_refused_before_the_output_folder_is_made(tmp_path):
    """The names of a model's square weights were checked once its file was read under the lock: a clash
    (two tensors, or a tensor and another entry) failed the batch and left an empty folder, factors/ in it."""
    import torch

    from sfapprox.datasets.manifest import ManifestError

    torch.save({"a": torch.eye(3), "b": torch.ones(3, 3)}, tmp_path / "m.pt")
    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "m"\ncategory = "other"\n'
                                            'file = "m.pt"\nload = {var = "*"}\n', gen_entry("m.b"))
    out = tmp_path / "out" / "run"
    with pytest.raises(ManifestError, match=r"the square weights of an entry take the names m.b, which other "
                                            r"entries have"):
        run_batch(m, out, BatchOptions(methods=("tsvd",), data_dir=str(tmp_path), settings=FitSettings(device="cpu")))
    assert not (tmp_path / "out").exists()


def test_a_weights_name_clash_found_once_the_file_is_downloaded_leaves_nothing_new(tmp_path, monkeypatch):
    """A model's file still to download was listed under the lock: a clash of its square weights' names with
    another entry was refused after the folder, its lock file and factors/ were made, and left them behind."""
    import functools
    import http.server
    import threading

    import torch

    from sfapprox.datasets.manifest import ManifestError

    www = tmp_path / "www"
    www.mkdir()
    torch.save({"a": torch.eye(3), "b": torch.ones(3, 3)}, www / "m.pt")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(www)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    monkeypatch.setenv("SFAPPROX_CACHE", str(tmp_path / "cache"))
    m = write_manifest(tmp_path / "w.toml", '[[matrix]]\nname = "m"\ncategory = "other"\nfile = "m.pt"\n'
                                            f'url = "http://127.0.0.1:{httpd.server_address[1]}/m.pt"\n'
                                            'load = {var = "*"}\n', gen_entry("m.b"))
    out = tmp_path / "out" / "run"
    try:
        with pytest.raises(ManifestError, match=r"the square weights of an entry take the names m\.b, which other "
                                                r"entries have"):
            run_batch(m, out, BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu")))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not (tmp_path / "out").exists()
    assert (tmp_path / "cache" / "w" / "m.pt").is_file()  # the download is kept in the cache, for the next run


@pytest.mark.parametrize("taken", ["results-a-folder", "factors-a-file"])
def test_an_output_name_taken_by_something_else_is_refused_leaving_nothing_new(tmp_path, taken):
    """results.jsonl a folder (or factors a file) was refused under the lock: after factors/ and the lock file
    had been made in the folder, and they were left behind."""
    from sfapprox import ParameterError

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"))
    out = tmp_path / "out"
    if taken == "results-a-folder":
        (out / "results.jsonl").mkdir(parents=True)
        said = r"results\.jsonl: is a folder, not the batch's results file"
    else:
        out.mkdir()
        (out / "factors").write_text("mine")
        said = r"factors: the folder of the saved factors is a file here, not a folder"
    before = sorted(out.rglob("*"))
    with pytest.raises(ParameterError, match=said):
        run_batch(m, out, BatchOptions(methods=("tsvd",)))
    assert sorted(out.rglob("*")) == before


def test_a_line_in_another_encoding_is_said_to_be_so_not_invalid_json(tmp_path):
    """A line an editor saved as Latin-1 ("café") was "not valid JSON", which sent the user looking for a
    missing comma."""
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"matrix": "a", "method": "sf", "status": "ok", "fro_error": 1.0}\n'
                     b'{"matrix": "caf\xe9", "method": "sf", "status": "ok", "fro_error": 1.0}\n')
    parsed = read_results(path)
    assert len(parsed.records) == 1 and parsed.problems[2].startswith("not UTF-8 text")


def test_a_kernels_manifest_entry_downloads_decompresses_and_scores_as_compare_does(tmp_path, monkeypatch):
    """The bundled kernels manifest's path end to end, from a local server: a LIBSVM .bz2 is downloaded and
    decompressed by `datasets fetch` (once: a second fetch makes no request), and `batch` on its RBF kernel
    gives the numbers `compare FILE --kernel rbf` gives on the decompressed file."""
    import bz2
    import functools
    import http.server
    import threading

    from sfapprox.cli import app

    rng = np.random.default_rng(0)
    points = rng.normal(size=(150, 5))
    text = "".join(f"{i % 3} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row) if abs(v) > 0.3) + "\n"
                   for i, row in enumerate(points)).encode()
    www = tmp_path / "www"
    www.mkdir()
    (www / "pts.bz2").write_bytes(bz2.compress(text))
    (tmp_path / "pts.libsvm").write_bytes(text)
    asked: list[str] = []

    class Logged(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Logged, directory=str(www)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    m = tmp_path / "kernels.toml"
    m.write_text(f'[[matrix]]\nname = "pts-rbf"\ncategory = "kernel"\nfile = "kernels/pts.libsvm"\n'
                 f'url = "http://127.0.0.1:{httpd.server_address[1]}/pts.bz2"\nload = {{kernel = "rbf"}}\n')
    monkeypatch.setenv("SFAPPROX_CACHE", str(tmp_path / "cache"))
    try:
        for _ in range(2):
            fetched = CliRunner().invoke(app, ["datasets", "fetch", str(m)])
            assert fetched.exit_code == 0 and "1 present, 0 missing" in fetched.output, fetched.output
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert asked == ["/pts.bz2"]
    assert (tmp_path / "cache" / "kernels" / "kernels" / "pts.libsvm").read_bytes() == text
    methods = ["--methods", "nystrom,rsvd,sparse", "--max-memory", "256M", "--seed", "0"]
    ran = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(tmp_path / "o"), "--quiet", *methods])
    assert ran.exit_code == 0, ran.output
    compared = CliRunner().invoke(app, ["compare", str(tmp_path / "pts.libsvm"), "--kernel", "rbf", *methods,
                                        "--json", str(tmp_path / "c.json")])
    assert compared.exit_code == 0, compared.output
    direct = {r["method"]: r for r in json.loads((tmp_path / "c.json").read_text())["results"]}
    records = lines(tmp_path / "o")
    assert sorted(r["method"] for r in records) == ["nystrom", "rsvd", "sparse"]
    for r in records:
        assert r["status"] == "ok" and r["matrix_info"]["recipe"]["kernel"] == "rbf", r
        assert r["fro_error"] == pytest.approx(direct[r["method"]]["fro_error"], rel=1e-9), r["method"]
        assert r["params"]["rank" if r["method"] != "sparse" else "n_sparse"] == \
            direct[r["method"]]["params"]["rank" if r["method"] != "sparse" else "n_sparse"]


def test_a_batch_typed_on_the_command_line_names_its_memory_limit_as_typed(tmp_path):
    """A method refused for memory in `sfapprox batch ... --max-memory 12M` said "raise the limit with
    max_memory=", a keyword the user never typed (the whole entry's run was spelled as its manifest's keys);
    a Python caller's batch still names the keyword."""
    from sfapprox._errors import spelled_for

    m = write_manifest(tmp_path / "m.toml", gen_entry("a", n=600))
    options = BatchOptions(methods=("tsvd",), settings=FitSettings(device="cpu", max_memory="12M"))
    with spelled_for("cli"):  # the batch command's
        run_batch(m, tmp_path / "typed", options)
    typed = lines(tmp_path / "typed")[0]
    assert typed["status"] == "not applicable" and "raise the limit with --max-memory if" in typed["reason"]
    run_batch(m, tmp_path / "api", options)
    assert "raise the limit with max_memory= if" in lines(tmp_path / "api")[0]["reason"]


def test_cli_batch_in_a_log_says_each_matrix_as_it_ends(tmp_path):
    """In a pipe or a CI log (no progress bar) a batch said nothing until its report: three small matrices
    were 15 s of silence, a manifest of large ones hours.  Each matrix now gets a line as it ends;
    --quiet leaves them out."""
    from sfapprox.cli import app

    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b"))
    said = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(tmp_path / "o"), "--methods", "tsvd"])
    assert said.exit_code == 0, said.output
    done = [line for line in said.output.splitlines() if ": done (" in line]
    assert [line.split(" (")[0] for line in done] == ["a: done", "b: done"]
    assert "(1 of 2 matrices, 0:00:" in done[0] and "(2 of 2 matrices, 0:00:" in done[1]
    quiet = CliRunner().invoke(app, ["batch", str(m), "--out-dir", str(tmp_path / "q"), "--methods", "tsvd", "--quiet"])
    assert quiet.exit_code == 0 and ": done (" not in quiet.output


def test_batch_options_take_methods_as_one_string_as_compare_does():
    """``BatchOptions(methods="tsvd,sparse")`` kept the string, and the run's check said "methods t, s, v, d,
    ,, ...: each method may be named once"; compare takes "tsvd,sparse" and "all"."""
    from sfapprox.comparison import available_methods
    from sfapprox.datasets import BatchOptions

    assert BatchOptions(methods="tsvd,sparse").methods == ("tsvd", "sparse")
    assert BatchOptions(methods="all").methods == tuple(available_methods())
    assert BatchOptions(methods=("tsvd",)).methods == ("tsvd",)


class _PoolRecordingItsSettings(_PoolStoppedWhileShuttingDown):
    """A process pool that runs each task at once, here, and records what its workers would be set up with."""

    made: list[dict] = []

    def __init__(self, *args, **kwargs):
        self.made.append(kwargs)

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def test_process_workers_share_the_cores_this_process_may_use(tmp_path, monkeypatch):
    """batch -j 2 split os.cpu_count(), the host's cores, between its workers: each started 16 threads where
    the process may use 2 cores (a container's CPU quota, an affinity mask)."""
    import sfapprox.datasets.batch as batch

    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(batch, "ProcessPoolExecutor", _PoolRecordingItsSettings)
    monkeypatch.setattr(_PoolRecordingItsSettings, "made", [])
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", seed=2))
    summary = run_batch(m, tmp_path / "out", TSVD, jobs=2)
    assert summary.written == 2
    (settings,) = _PoolRecordingItsSettings.made
    assert settings["initargs"][0] == 1  # threads per worker: 2 cores, 2 workers


def test_process_workers_are_spawned_not_forked(tmp_path, monkeypatch):
    """batch -j 2's workers start in a fresh interpreter: a fork (the default start on Linux before Python
    3.14) copied a parent running threads (the kernels' helpers, torch's OpenMP pool, the signal waiter), and
    a child forked while one of them held a lock waited for it forever (Python 3.12 warns of it)."""
    import sfapprox.datasets.batch as batch

    monkeypatch.setattr(batch, "ProcessPoolExecutor", _PoolRecordingItsSettings)
    monkeypatch.setattr(_PoolRecordingItsSettings, "made", [])
    m = write_manifest(tmp_path / "m.toml", gen_entry("a"), gen_entry("b", seed=2))
    assert run_batch(m, tmp_path / "out", TSVD, jobs=2).written == 2
    (settings,) = _PoolRecordingItsSettings.made
    assert settings["mp_context"].get_start_method() == "spawn"


def test_a_long_number_in_a_refusal_counts_its_digits_as_other_messages_count():
    """"(1000 digits)": thousands separated (formats.counted), as the tables write counts."""
    from sfapprox.datasets.results_file import record_problem

    assert record_problem({"matrix": "a", "method": "sf", "status": "ok", "fro_error": 10**999}) == (
        "field 'fro_error' must be a finite number >= 0, got 100000000000... (1,000 digits)")


def test_a_short_write_that_the_next_write_completes_is_no_error(tmp_path, monkeypatch):
    """A short write without a cause (a signal, a pipe-like file system) was taken for a full disk: the
    rest is written, and the line is whole."""
    path, write = tmp_path / "results.jsonl", os.write
    with ResultsWriter(path) as w:
        monkeypatch.setattr(os, "write", lambda fd, data: write(fd, data[:100] if fd == w._fd else data))
        w.write({"matrix": "a" * 2000, "method": "sf", "status": "ok", "fro_error": 1.0})
    monkeypatch.undo()
    assert [json.loads(line)["matrix"] for line in path.read_bytes().splitlines()] == ["a" * 2000]


def test_a_short_write_says_its_sizes_as_other_messages_say_sizes(tmp_path, monkeypatch):
    """A full disk's short write said "only 1 of 69 bytes written"; sizes are format_bytes's ("1 B")."""
    import errno

    from sfapprox._atomic import OutputError

    path, write, calls = tmp_path / "results.jsonl", os.write, []

    def full_after_one_byte(fd, data):  # as the OS does: what fits, then the cause with the next write
        if fd != w._fd:
            return write(fd, data)
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(fd, data[:1])

    with ResultsWriter(path) as w:
        monkeypatch.setattr(os, "write", full_after_one_byte)
        with pytest.raises(OutputError, match=r"\(No space left on device \(only 1 B of 2\.0 KiB written\); the file "):
            w.write({"matrix": "a" * 2000, "method": "sf", "status": "ok", "fro_error": 1.0})
    assert path.read_bytes() == b""  # the short write was cut back off


def test_a_text_entry_records_the_marks_it_was_read_with_and_its_report_shows_them(tmp_path):
    """A manifest entry read with delimiter and decimal: its records' matrix_info and saved fit named how
    the matrix was selected but not these marks, and the report did not show them.  Resumed with other
    marks, its finished pair is redone (the entry changed), its new line recording the new marks."""
    from sfapprox.datasets import build_report
    from sfapprox.datasets.report import table_cells
    from sfapprox.factors import load_factors

    data = tmp_path / "data"
    data.mkdir()
    rows = np.random.default_rng(0).random((10, 10))
    (data / "t.csv").write_text("\n".join(";".join(f"{v:.4f}".replace(".", ",") for v in row) for row in rows),
                                encoding="utf-8")
    entry = '[[matrix]]\nname = "t"\ncategory = "other"\nfile = "t.csv"\nload = {{{}}}\n'
    m = write_manifest(tmp_path / "m.toml", entry.format('delimiter = ";", decimal = ","'))
    out = tmp_path / "out"
    assert dict(run_batch(m, out, BatchOptions(methods=("tsvd",), data_dir=str(data))).statuses) == {"ok": 1}
    marks = {"delimiter": ";", "decimal": ","}
    record, = lines(out)
    assert record["matrix_info"]["recipe"] == {"covariance": False, **marks}
    assert load_factors(out / "factors" / "t.tsvd.h5").source["recipe"] == {"covariance": False, **marks}
    header, cells = table_cells(build_report(lines(out)).tables_by_category[0])
    assert cells[0][header.index("source")] == "delimiter ';', decimal ','"
    write_manifest(m, entry.format('delimiter = ";"'))
    run_batch(m, out, BatchOptions(methods=("tsvd",), data_dir=str(data)))
    assert lines(out)[-1]["matrix_info"]["recipe"] == {"covariance": False, "delimiter": ";"}


def test_an_abandoned_dask_task_is_stopped_only_inside_a_fit(monkeypatch):
    """stop_when_abandoned raises Ctrl-C's KeyboardInterrupt on a fit's iteration (its run catches it and
    keeps the pair unwritten), never on run_matrix's "method" event: that one is outside the guard, and a
    worker whose task raises KeyboardInterrupt is closed by Dask."""
    from sfapprox.datasets import runner

    monkeypatch.setattr(runner, "abandoned", lambda: True)
    on_event = runner.stop_when_abandoned(every=0.0)
    try:
        on_event("method", matrix="a", method="sf")
    except KeyboardInterrupt:
        pytest.fail("raised on the method event, outside a fit")
    with pytest.raises(KeyboardInterrupt):
        on_event("iteration", matrix="a", it=3)


def test_a_dask_batch_sets_its_matrices_variables_in_one_wait_not_one_round_trip_each(tmp_path):
    """``_DaskRecords.expect`` set each matrix's variable of the methods sent one after the other: a manifest of
    5,000 matrices on a remote scheduler waited 5,000 round trips before any task started.  Here every set takes
    0.1 s on the scheduler: 20 of them one after the other are 2 s, concurrently about 0.1 s."""
    import asyncio

    distributed = pytest.importorskip("dask.distributed")
    from sfapprox.datasets import batch as B
    from sfapprox.datasets.manifest import load_manifest

    names = [f"m{i}" for i in range(20)]
    m = write_manifest(tmp_path / "m.toml", *(gen_entry(name) for name in names))
    tasks = [B.MatrixTask(entry, ("tsvd",), BatchOptions(methods=("tsvd",)), str(tmp_path / "out"))
             for entry in load_manifest(m).select(None)]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        handlers = c.scheduler.handlers
        plain = handlers["variable_set"]

        async def slow_set(*args, **kwargs):  # a distant scheduler's round trip
            await asyncio.sleep(0.1)
            return await plain(*args, **kwargs)

        handlers["variable_set"] = slow_set
        channel = B._DaskRecords(client)
        began = time.monotonic()
        channel.expect(tasks)
        took = time.monotonic() - began
        handlers["variable_set"] = plain
        values = [B._sent_variable(channel.name, name, client).get(timeout=5) for name in names]
        channel.close()
    assert values == [[]] * len(names) and channel.matrices == names
    assert took < 1.0, f"20 variables set in {took:.2f} s"


def test_batch_takes_a_bundled_manifest_s_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no clone here: a wheel's user
    run_batch("synthetic", tmp_path / "out", BatchOptions(methods=("tsvd",)), only=["random-sparse-64"])
    assert pairs(lines(tmp_path / "out")) == [("random-sparse-64", "tsvd")]


def test_run_batch_on_an_old_clone_path_warns_at_the_caller_s_line(tmp_path):
    """The FutureWarning of an old ``data_manifests/`` path names the script's line that called run_batch,
    not sfapprox's own (``batch.py:599``), so a script's author finds the line to change."""
    with pytest.warns(FutureWarning, match="give the name synthetic") as said:
        run_batch(tmp_path / "data_manifests" / "synthetic.toml", tmp_path / "out", BatchOptions(methods=("tsvd",)),
                  only=["random-sparse-64"])
    assert [w.filename for w in said if issubclass(w.category, FutureWarning)] == [__file__]


def test_batch_on_an_old_clone_path_says_one_line_and_runs(tmp_path):
    """README's `sfapprox batch data_manifests/synthetic.toml ...`, in users' scripts: the manifests moved into
    the package; the run goes on with the bundled one, after one line on stderr."""
    args = ["batch", "data_manifests/synthetic.toml", "--out-dir", "out", "--methods", "tsvd",
            "--only", "random-sparse-64", "--quiet"]
    done = subprocess.run(cli(*args), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "data_manifests" in line]
    assert said == ["warning: data_manifests/synthetic.toml: the dataset manifests moved into the sfapprox package; "
                    "this path is deprecated and will stop working in a later release: give the name synthetic (the "
                    "bundled manifest, used now)"], done.stderr
    assert pairs(lines(tmp_path / "out")) == [("random-sparse-64", "tsvd")]
