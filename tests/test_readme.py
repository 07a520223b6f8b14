from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands():
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```bash\n")[1:3]
    return [b.split("\n```")[0].strip() for b in blocks]


def test_readme_starts_with_two_commands_and_ci_runs_the_test_one():
    run_cmd, test_cmd = _commands()
    assert "sfapprox" in run_cmd and "examples/" in run_cmd
    assert "pytest" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci
    assert any("torch==2.13.0" in line for line in ci[: ci.index(test_cmd)])


def test_example_in_readme_exists():
    run_cmd, _ = _commands()
    example = next(tok for tok in run_cmd.split() if tok.startswith("examples/"))
    assert (ROOT / example).is_file()


def _python_blocks():
    text = (ROOT / "README.md").read_text()
    return [b.split("\n```")[0] for b in text.split("```python\n")[1:]]


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """The API examples run as written (graph.net: the example network; files land in a temporary folder)."""
    import shutil
    import warnings

    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "examples" / "karate_like.net", tmp_path / "graph.net")
    blocks = [b for b in _python_blocks() if "import sfapprox" in b or "import numpy as np, torch, sfapprox" in b]
    assert len(blocks) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "f.h5").is_file()


def test_readme_input_formats_table_names_every_extension():
    """Every extension a reader is chosen by is in README's table of input formats (.safetensors and
    .pt/.pth were missing)."""
    from sfapprox.io import available_formats, format_extensions

    section = (ROOT / "README.md").read_text().split("## Input formats")[1].split("\n## ")[0]
    missing = {key: [ext for ext in format_extensions(key) if f"`{ext}`" not in section]
               for key in available_formats()}
    assert not {key: exts for key, exts in missing.items() if exts}


def test_safety_says_a_mapped_file_s_pages_count_in_rss():
    """A pass over a memory-mapped .npy brings the file's pages into RSS (651 MiB peak at --max-memory 100M
    for a 275 MiB file): the limit covers what sfapprox holds, and the README says so."""
    safety = (ROOT / "README.md").read_text().split("## Safety", 1)[1].split("\n## ", 1)[0]
    text = " ".join(safety.split())
    assert "memory-mapped `.npy`'s pages" in text and "RSS can pass `--max-memory` by up to the file's size" in text
