import sys

import numpy as np
import pytest

from sfapprox import SfapproxError
from sfapprox.plotting import plot_approximations, plot_sweep
from sfapprox.sweep import sweep


def test_plot_sweep_and_images(tmp_path):
    pytest.importorskip("matplotlib")
    X = np.random.default_rng(0).random((12, 12))
    s = sweep(X, [0.3, 0.6], ["tsvd"])
    plot_sweep(s, tmp_path / "s.png")
    plot_approximations(X, {"tsvd": X * 0.5}, tmp_path / "a.pdf", title="t")
    assert (tmp_path / "s.png").stat().st_size > 1000
    assert (tmp_path / "a.pdf").read_bytes()[:4] == b"%PDF"


def test_missing_matplotlib_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    s = sweep(np.eye(4), [1.0], ["tsvd"])
    with pytest.raises(SfapproxError, match=r"pip install 'sfapprox\[plot\]'"):
        plot_sweep(s, tmp_path / "x.png")
