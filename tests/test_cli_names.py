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
