"""File and folder names a user really has, through the commands: spaces, quotes, markup, non-ASCII, a
leading dash, undecodable bytes, names near the file system's 255 bytes, links that loop."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from sfapprox.cli import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [os.fspath(a) if isinstance(a, Path) else str(a) for a in args])


def one_line(res) -> str:
    return " ".join(res.output.split())


def small_npy(path: Path) -> Path:
    np.save(path, np.random.default_rng(0).standard_normal((12, 12)))
    return path


def test_save_factors_names_over_255_bytes_are_refused_before_any_fit(tmp_path):
    """``--save-factors`` names each fit ``<matrix>.<method>.h5``: a matrix named with 250 bytes ran every
    method, then each file failed ("File name too long") and every fit was lost."""
    matrix = small_npy(tmp_path / ("m" * 250 + ".npy"))  # 254 bytes: a name the user has
    res = invoke("compare", matrix, "--methods", "tsvd", "--save-factors", tmp_path / "fits", "--json", tmp_path / "r.json")
    text = one_line(res)
    assert res.exit_code == 2 and "m.tsvd.h5: its file name is 258 bytes, over the 255" in text, res.output
    assert "FOLDER/<matrix>.<method>.h5; give the matrix file a shorter name" in text
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "fits").exists()


def test_an_output_name_over_255_bytes_is_refused_naming_its_length(tmp_path):
    res = invoke("compare", small_npy(tmp_path / "m.npy"), "--methods", "tsvd", "--json", tmp_path / ("j" * 300 + ".json"))
    assert res.exit_code == 2 and "its file name is 305 bytes, over the 255" in one_line(res), res.output


class _Suggesting:
    """A comparison whose verdict suggests running sparse too (what suggest_next reads of one)."""

    def verdict(self):
        return {"suggest": ["sparse"]}


def _suggested(capsys, path, argv=None) -> str:
    from sfapprox.cli.compare import suggest_next

    suggest_next(_Suggesting(), Path(path), ["tsvd"], argv=argv)
    return next(line for line in capsys.readouterr().err.splitlines() if line.startswith("next: "))


def test_the_next_command_keeps_its_options_before_a_double_dash(capsys):
    """``compare -- -m.mtx`` was told ``compare -- -m.mtx --methods tsvd,sparse``: after ``--`` those are
    file names ("Got unexpected extra argument(s)"); nor may a file named ``--methods`` be taken for one."""
    said = _suggested(capsys, "-m.mtx", ["compare", "--", "-m.mtx"])
    assert said == "next: sfapprox compare --methods tsvd,sparse -- -m.mtx"
    said = _suggested(capsys, "--methods", ["compare", "--methods", "tsvd", "--", "--methods"])
    assert said == "next: sfapprox compare --methods tsvd,sparse -- --methods"
    # the plain form (not run from the command line) of a name that starts with a dash
    assert _suggested(capsys, "-m.mtx") == "next: sfapprox compare --methods tsvd,sparse -- -m.mtx"


def test_the_next_command_names_an_undecodable_file_as_the_shell_reads_it(capsys, tmp_path):
    r"""A name with a byte that is no UTF-8 was written ``'bad\udcff.mtx'``: pasted, no such file."""
    name = os.fsdecode(b"bad\xff [x].mtx")
    said = _suggested(capsys, name, ["compare", name, "--methods", "tsvd", "--json", "r [1].json"])
    assert said == r"next: sfapprox compare $'bad\xff [x].mtx' --json 'r [1].json' --methods tsvd,sparse --force"


def test_an_undecodable_name_is_shown_as_its_bytes_and_written_into_markdown(tmp_path, monkeypatch):
    r"""``compare bad\xff.mtx --markdown r.md`` ended in a traceback (UnicodeEncodeError) after the work."""
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"bad\xff.npy")
    small_npy(Path(name))
    res = invoke("compare", name, "--methods", "tsvd", "--markdown", "r.md", "--latex", "r.tex")
    assert res.exit_code == 0, res.output
    assert "bad\\xff" in Path("r.md").read_text(encoding="utf-8") and "bad\\xff" in res.output


def test_report_names_a_folder_with_spaces_quoted_in_the_command_it_suggests(tmp_path):
    """``report "my runs"`` said "run 'sfapprox batch MANIFEST --out-dir my runs' first": two words to a shell."""
    folder = tmp_path / "my runs [1]"
    folder.mkdir()
    res = invoke("report", folder)
    assert res.exit_code == 2 and f"run first: sfapprox batch MANIFEST --out-dir '{folder}'" in one_line(res), res.output


def _ascii_run(args, cwd):
    """``python -m sfapprox ARGS`` writing to pipes under ``PYTHONIOENCODING=ascii`` (a log of an old system)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "sfapprox", *args], capture_output=True, cwd=cwd, env=env, timeout=120)


def test_non_ascii_names_on_an_ascii_stream_are_escaped_apart_and_the_next_command_finds_the_file(tmp_path):
    r"""Under ``PYTHONIOENCODING=ascii`` ``maillage_é.mtx`` was shown as ``maillage_e`` and ``行列.mtx`` as ``??``:
    two names alike, and ``next: sfapprox compare 'maillage_e.mtx' ...`` named another file.  A name's
    characters are escapes now, the command's name its bytes (``$'\xc3\xa9'``, read so by a shell in any
    locale); sfapprox's own glyphs are still spelled (``||X-X^||_F``)."""
    import shutil
    import subprocess

    mesh = Path(__file__).resolve().parents[1] / "examples" / "mesh_small.mtx"
    shown = {}
    for name in ("maillage_é.mtx", "maillage_e.mtx", "行列.mtx", "列行.mtx"):
        shutil.copy(mesh, tmp_path / name)
        done = _ascii_run(["compare", name, "--methods", "tsvd"], tmp_path)
        assert done.returncode == 0 and done.stdout.isascii() and done.stderr.isascii(), done.stderr
        shown[name] = (done.stdout + done.stderr).decode("ascii")
        assert "||X-X^||_F" in shown[name]
    assert shown["maillage_é.mtx"].startswith("maillage_\\u00e9 ") and shown["行列.mtx"].startswith("\\u884c\\u5217 ")
    assert len({text.splitlines()[0] for text in shown.values()}) == 4  # four names, four titles
    command = next(line for line in shown["maillage_é.mtx"].splitlines() if line.startswith("next: "))
    assert command == "next: sfapprox compare $'maillage_\\xc3\\xa9.mtx' --methods tsvd,sparse", command
    # the shell of such a system (the C locale) reads it back as the file's name
    said = subprocess.run(["bash", "-c", command.replace("next: sfapprox compare", "printf %s").split(" --")[0]],
                          capture_output=True, check=True, env={**os.environ, "LC_ALL": "C"}).stdout
    assert said == "maillage_é.mtx".encode()


def _typed_back(command: str, cwd) -> list[bytes]:
    """The words bash reads from ``command`` (``sfapprox`` dropped) in the C locale, as such a system's shell."""
    import subprocess

    script = command.replace("sfapprox ", "printf '%s\\0' ", 1)
    said = subprocess.run(["bash", "-c", script], capture_output=True, check=True, cwd=cwd,
                          env={**os.environ, "LC_ALL": "C"}).stdout
    return said.split(b"\0")[:-1]


def _command_in(text: str, after: str) -> str:
    """The command that follows ``after`` in ``text``, up to its closing backtick or " (API:"."""
    return text.split(after, 1)[1].split("`")[0].split(" (API:")[0].split("), or")[0]


def test_commands_in_messages_on_an_ascii_stream_name_the_files_as_bash_reads_them(tmp_path):
    r"""Besides ``next:``, the commands in messages were quoted for a UTF-8 terminal whatever the stream:
    under ``PYTHONIOENCODING=ascii`` ``--out-dir 'runs_\u00e9'``, a folder no shell finds.  Each is now
    ``$'runs_\xc3\xa9'``: bash in the C locale reads back the name."""
    import warnings

    from sfapprox import ChordSF, save_factors

    runs = tmp_path / "runs_é"
    runs.mkdir()
    done = _ascii_run(["report", runs.name], tmp_path)
    text = done.stderr.decode("ascii")
    assert done.returncode == 2 and "run first: sfapprox batch MANIFEST --out-dir $'runs_\\xc3\\xa9'" in text, text
    assert _typed_back(_command_in(text, "run first: "), tmp_path)[-1] == runs.name.encode()

    (runs / "results.jsonl").write_text("")
    text = _ascii_run(["report", f"{runs.name}/results.jsonl"], tmp_path).stderr.decode("ascii")
    assert _typed_back(_command_in(text, "holds results.jsonl ("), tmp_path) == [b"report", runs.name.encode()], text

    with warnings.catch_warnings():  # a saved fit given as the matrix: an error raised by the API
        warnings.simplefilter("ignore")
        save_factors(tmp_path / "fit_é.h5", ChordSF(max_iter=2, device="cpu").fit(np.eye(8)))
    text = _ascii_run(["compare", "fit_é.h5"], tmp_path).stderr.decode("ascii")
    assert _typed_back(_command_in(text, "approximates: "), tmp_path) == [b"compare", b"MATRIX", b"--with",
                                                                          "fit_é.h5".encode()], text

    # a batch's files missing: its unavailable line's `sfapprox datasets list` names the manifest and folder
    (tmp_path / "m_é.toml").write_text('[[matrix]]\nname = "local"\ncategory = "network"\nfile = "l.net"\n',
                                       encoding="utf-8")
    (tmp_path / "données").mkdir()
    done = _ascii_run(["batch", "m_é.toml", "--data-dir", "données", "--out-dir", "out", "--methods", "tsvd"], tmp_path)
    text = " ".join(done.stderr.decode("ascii").split())
    assert done.returncode == 1 and "`sfapprox datasets list $'m_\\xc3\\xa9.toml' --data-dir $'" in text, text
    words = _typed_back(_command_in(text, "local - `"), tmp_path)
    assert words == [b"datasets", b"list", "m_é.toml".encode(), b"--data-dir", os.fsencode(tmp_path / "données"), b"-v"]
    # the report written to a file is UTF-8: its command as a UTF-8 terminal reads it
    assert "`sfapprox datasets list 'm_é.toml' --data-dir '" in (tmp_path / "out" / "report.md").read_text("utf-8")


def test_a_batch_whose_reports_changed_names_its_folder_quoted_in_the_report_command(tmp_path, capsys):
    """At the end of a run whose report.md was edited meanwhile, "`sfapprox report my runs` writes them
    elsewhere": two words to a shell, the folder's name unquoted."""
    from sfapprox.cli.batch import _check_reports

    out = tmp_path / "my runs"
    out.mkdir()
    (out / "report.md").write_text("mine\n")
    assert _check_reports(out, at_end=True) is False
    text = " ".join(capsys.readouterr().err.split())
    assert f"(`sfapprox report '{out}'` writes them elsewhere)" in text, text


def test_a_command_in_a_warning_on_an_ascii_stream_names_the_file_as_bash_reads_it(tmp_path):
    r"""A warning's command was written by the stream's own spelling under ``PYTHONIOENCODING=ascii``
    (``'fit_\u00e9.h5'``, a file no shell finds), where the notes' commands are quoted as their bytes; the
    CLI's warnings (its ``showwarning``, as :func:`sfapprox.cli.main` sets it) quote them so too."""
    import subprocess
    import sys

    script = ("import warnings, sfapprox.cli as cli\n"
              "from sfapprox.formats import shell_command\n"
              "cli._spell_glyphs_in_ascii(); warnings.showwarning = cli._one_line_warning\n"
              "warnings.warn(f'fit_\u00e9.h5 is old: rewrite it with `{shell_command(\"fit\", \"A.mtx\", \"--init\", "
              "\"fit_\u00e9.h5\")}` ± soon')\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, cwd=tmp_path, env=env, timeout=60)
    text = done.stderr.decode("ascii")
    assert done.returncode == 0 and text.startswith("warning: fit_\\u00e9.h5 is old"), text
    assert "`sfapprox fit A.mtx --init $'fit_\\xc3\\xa9.h5'` +/- soon" in text, text
    assert _typed_back(_command_in(text, "rewrite it with `"), tmp_path) == [b"fit", b"A.mtx", b"--init",
                                                                               "fit_é.h5".encode()]
