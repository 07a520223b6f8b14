"""Figures (matplotlib, an optional extra: ``pip install 'sfapprox[plot]'``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from ._errors import SfapproxError
from .results import atomic_path

__all__ = ["plot_sweep", "plot_approximations"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        raise SfapproxError(
            "plotting needs matplotlib: pip install 'sfapprox[plot]' (or pip install matplotlib)"
        ) from None
    return plt


def _save(fig, path: str | os.PathLike, plt) -> None:
    suffix = os.path.splitext(str(path))[1].lstrip(".") or "png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=suffix, dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_sweep(sweep, path: str | os.PathLike) -> None:
    """Relative error against budget (fraction of N²), one line per method."""
    plt = _pyplot()
    n = sweep.matrix["n"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in sweep.methods:
        xs, ys = [], []
        for point in sweep.points:
            for r in point.results:
                if r.method == method and r.status == "ok" and r.rel_error is not None:
                    xs.append(point.budget / n**2)
                    ys.append(r.rel_error)
        if xs:
            ax.plot(xs, ys, marker="o", label=method)
    ax.set_xlabel("budget (stored numbers / N²)")
    ax.set_ylabel("relative Frobenius error")
    ax.set_title(f"{sweep.matrix.get('name', 'matrix')} (N={n})")
    ax.grid(True, alpha=0.3)
    ax.legend()
    _save(fig, path, plt)


def plot_approximations(X: np.ndarray, approximations: Mapping[str, np.ndarray], path: str | os.PathLike,
                        title: str = "") -> None:
    """The original and each method's approximation side by side, on one gray scale."""
    plt = _pyplot()
    panels = [("original", X), *approximations.items()]
    fig, axes = plt.subplots(1, len(panels), figsize=(2.6 * len(panels), 2.9), squeeze=False)
    lo, hi = float(np.min(X)), float(np.max(X))
    for ax, (label, img) in zip(axes[0], panels):
        ax.imshow(np.asarray(img), cmap="gray", vmin=lo, vmax=hi, interpolation="nearest")
        ax.set_title(label, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=10)
    _save(fig, path, plt)
