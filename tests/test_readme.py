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
