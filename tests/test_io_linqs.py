"""LINQS citation data (sfapprox.io._linqs): the memory a read is checked for."""

from __future__ import annotations

import numpy as np
import pytest

from _io_helpers import peak_and_checks, write
from sfapprox._errors import ResourceError
from sfapprox.io import load_matrix
from sfapprox.io._common import DEFAULTS, Source
from sfapprox.io._linqs import read_linqs


def _linqs(tmp_path, nodes: int = 1000, cites: int = 20_000):
    rng = np.random.default_rng(0)
    ids = rng.choice(10**6, nodes, replace=False)
    write(tmp_path / "g.content", "".join(f"{v}\t" + "\t".join(map(str, rng.integers(0, 2, 50))) + "\tlabel\n"
                                          for v in ids))
    pairs = ids[rng.integers(0, nodes, (cites, 2))]
    return write(tmp_path / "g.cites", "".join(f"{a}\t{b}\n" for a, b in pairs))


def test_a_read_is_checked_for_its_peak_not_three_times_it(tmp_path, monkeypatch):
    """read_text's old estimate (4 bytes a byte, 300 a line) was 2.9 times the read's peak: a limit the read
    fits in twice over refused it.  The ``.cites`` check counts what ``.content`` left held."""
    path = _linqs(tmp_path)
    peak, estimate, checked = peak_and_checks(monkeypatch, lambda p: read_linqs(Source(p), DEFAULTS), path)
    assert estimate == checked and peak <= estimate < 2 * peak, (peak, estimate)


def test_a_file_over_its_estimate_is_refused_before_parsing(tmp_path):
    path = _linqs(tmp_path, nodes=100, cites=3000)
    with pytest.raises(ResourceError, match=r"^\S+g\.cites: parsing 3,001 lines of text .* needs about") as refused:
        load_matrix(path, max_memory=4 * path.stat().st_size + (tmp_path / "g.content").stat().st_size)
    assert "\n" not in str(refused.value)
