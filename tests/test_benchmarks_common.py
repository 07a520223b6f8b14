"""benchmarks/_common.py, the helpers the benchmark scripts share (run by hand, tested here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def common(tmp_path, monkeypatch):
    """benchmarks/_common.py as the scripts import it, writing to ``tmp_path``."""
    spec = importlib.util.spec_from_file_location("_bench_common", ROOT / "benchmarks" / "_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path)
    return module


TABLE = ["# A run", "", "| run | s |", "|---|---|", "| first | 1.0 |"]
WRITTEN = "- **Bit-identical**: every run ends at rel 0.1792.\n- Compiling takes 12 s of 18.\n"


@pytest.mark.parametrize("rerun_findings", [["", "(to be written)"], ["", "(none yet)", ""], [""], None])
def test_a_rerun_keeps_the_findings_written_by_hand(common, tmp_path, rerun_findings):
    common.write_results("first_fit_compile", {}, TABLE + ["", common.FINDINGS, "", WRITTEN])
    rerun = [line.replace("1.0", "2.0") for line in TABLE]
    if rerun_findings is not None:  # first_fit.py --before wrote "(to be written)" over them
        rerun += ["", common.FINDINGS, *rerun_findings]
    common.write_results("first_fit_compile", {}, rerun)
    text = (tmp_path / "first_fit_compile.md").read_text()
    assert "| first | 2.0 |" in text and "| first | 1.0 |" not in text
    assert text.count(common.FINDINGS) == 1 and text.endswith(common.FINDINGS + "\n\n" + WRITTEN + "\n")
    assert "(to be written)" not in text and "(none yet)" not in text


def test_findings_a_rerun_brings_replace_the_old_and_a_placeholder_stays_until_written(common, tmp_path):
    common.write_markdown("r", TABLE + ["", common.FINDINGS, "", "(to be written)"])
    assert (tmp_path / "r.md").read_text().endswith("(to be written)\n")
    common.write_markdown("r", TABLE + ["", common.FINDINGS, "", WRITTEN])
    common.write_markdown("r", TABLE + ["", common.FINDINGS, "", "New findings, from data['findings']."])
    text = (tmp_path / "r.md").read_text()
    assert "New findings" in text and "Bit-identical" not in text
