"""Atomic writes: whole files or none, never an overwrite without force."""

import json

import numpy as np
import pytest

from sfapprox import SfapproxError
from sfapprox._atomic import write_json


def test_atomic_json_and_no_overwrite(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, {"a": float("nan"), "b": np.float64(2.5), "c": np.arange(2)})
    assert json.loads(path.read_text()) == {"a": None, "b": 2.5, "c": [0, 1]}
    with pytest.raises(SfapproxError, match="already exists"):
        write_json(path, {}, force=False)
    assert json.loads(path.read_text())["b"] == 2.5
