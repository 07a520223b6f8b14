"""sfapprox._progress_line: a call's progress line, its display imported only where one is asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_progress_false_never_imports_the_display():
    """``progress=False`` imported sfapprox._display all the same (rich's live display, about 60 ms of a
    fresh process) for a display it never drew: compare, sweep, fit_sf and fit_matrix import it only
    where progress is asked for (a fresh process, as a script's first call is)."""
    code = """
import sys, warnings
import numpy as np
import sfapprox
import sfapprox.sweep
warnings.simplefilter("ignore")
X, settings = np.eye(8), sfapprox.FitSettings(max_iter=5, device="cpu")
calls = {"compare": lambda p: sfapprox.compare(X, ["tsvd"], budget=0.5, progress=p),
         "sweep": lambda p: sfapprox.sweep.sweep(X, [0.5], ["tsvd"], progress=p),
         "fit_sf": lambda p: sfapprox.fit_sf(X, max_iter=5, device="cpu", progress=p),
         "fit_matrix": lambda p: sfapprox.fit_matrix(X, settings=settings, progress=p)}
for name, call in calls.items():
    call(False)
    print(name, "sfapprox._display" in sys.modules)
try:
    sfapprox.compare(X, ["tsvd"], budget=0.5, progress="no")
except sfapprox.ParameterError as exc:
    print("refused:", exc)
calls["compare"](True)  # (stderr a pipe: nothing drawn, the module imported to decide so)
print("True", "sfapprox._display" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["compare False", "sweep False", "fit_sf False", "fit_matrix False",
                                        "refused: progress must be True or False; got 'no'", "True True"]
