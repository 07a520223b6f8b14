"""Figures (matplotlib, an optional extra: ``pip install 'sfapprox[plot]'``).

* :func:`plot_comparison`: the original, each method's approximation and,
  below it, its residual ``X - X̂``; each panel titled with the method, its
  stored numbers and its relative error, each row with a colorbar; the
  methods without a panel (not applicable, failed) are named under them.
* :func:`plot_sweep`: relative error against budget, one line per method
  (95 % error bars on errors estimated from some columns, hollow markers on
  fits stopped early); methods without a result at some budgets are named
  under the axes.

Colors: signed matrices use a diverging map centred on 0; non-negative ones
a sequential map; residuals are always diverging.  ``scale="log"`` shows
``log10 |x|`` (sparse graphs, whose few non-zeros vanish on a linear scale);
``"auto"`` picks it for matrices with fewer than 10% non-zeros.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np

from ._atomic import atomic_path
from ._errors import ParameterError, SfapproxError
from .formats import PLOT_SUFFIXES, counted, fmt_with_interval

__all__ = ["plot_sweep", "plot_comparison", "plot_approximations", "choose_scale", "SCALES"]

SCALES = ("auto", "linear", "log")
#: Below this share of non-zeros, ``scale="auto"`` shows magnitudes on a log scale.
SPARSE_DENSITY = 0.1
#: ``--plot-scale auto`` also takes the log scale when half of the non-zeros are below this share
#: of the largest |value| (a few values dominate: a linear scale shows a few bright pixels).
DOMINATED = 0.02
#: A panel shows at most this many rows and columns: of a larger matrix, every ``s``-th row and column
#: (said in the title).  A figure's memory then stays bounded whatever N is — about 30 MB per panel
#: at the cap, its 8 MiB of values and matplotlib's image buffers (a peak of about 150 MB for five
#: panels, measured with tracemalloc) — where at N = 8,000 the full panels took 7.4 GB under a 200 MB
#: --max-memory, after all the fitting.
PANEL_MAX = 1024
#: Columns of a surrogate or a source computed at a time for a sampled panel (``N`` values each).
SAMPLE_COLUMNS = 64


def _new_figure(**kwargs):
    """A matplotlib ``Figure`` on an Agg canvas of its own, or the one-line advice to install matplotlib.

    A bare ``Figure`` (matplotlib's object-oriented API), not pyplot: a figure made by pyplot needs a
    backend, and ``matplotlib.use("Agg")``, which this called for one, changed the caller's backend for
    the rest of the process (a notebook's inline figures stopped showing after a plot function).  This
    figure draws on its own canvas (``savefig`` takes the file format's), and pyplot's list of open
    figures never holds it (nothing to close: the figure, its canvas and axes refer to each other, and
    Python's cycle collector frees them once nothing else does).
    """
    try:
        # (``import a.b``, not ``from a.b import``: it asks for ``matplotlib`` itself first, so a missing one
        # fails here even where its submodules are still cached)
        import matplotlib.backends.backend_agg
        import matplotlib.figure
    except ImportError:
        raise SfapproxError(
            "plotting needs matplotlib: pip install 'sfapprox[plot]' (or pip install matplotlib)"
        ) from None
    fig = matplotlib.figure.Figure(**kwargs)
    matplotlib.backends.backend_agg.FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | os.PathLike, force: bool = True) -> None:
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix and suffix not in PLOT_SUFFIXES:  # matplotlib's ValueError ("Format 'foo' is not supported")
        raise ParameterError(f"{path}: cannot write a figure of type {suffix!r}; use one of {', '.join(PLOT_SUFFIXES)}")
    suffix = suffix.lstrip(".") or "png"  # (a device or a pipe without a suffix: PNG)
    with atomic_path(path, force=force) as tmp:
        fig.savefig(tmp, format=suffix, dpi=120, bbox_inches="tight")


def _display(A: np.ndarray, log: bool, floor: float) -> np.ndarray:
    """What a panel shows: the values, or ``log10 |x|`` clipped at ``floor`` (zeros at the floor)."""
    if not log:
        return A
    with np.errstate(divide="ignore"):
        return np.maximum(np.log10(np.abs(A)), floor)


def _clipped(shown: list[np.ndarray], style: dict, log: bool) -> str:
    """The colour bar's ``extend``: an arrow at each end some panel's values pass (an approximation's
    negative entries of a non-negative X, or entries over X's largest, drew at the end colour without a
    sign).  A log scale's floor is its definition (zeros sit there), not a clipping: never arrowed.

    Examples
    --------
    >>> style = {"vmin": 0.0, "vmax": 1.0}
    >>> _clipped([np.array([0.0, 1.0]), np.array([-0.1, 0.5])], style, False), _clipped([np.ones(2)], style, False)
    ('min', 'neither')
    """
    values = [a for a in shown if a.size]
    low = not log and any(float(np.nanmin(a)) < style["vmin"] for a in values)
    high = any(float(np.nanmax(a)) > style["vmax"] for a in values)
    return {(False, False): "neither", (True, False): "min", (False, True): "max", (True, True): "both"}[(low, high)]


def choose_scale(X: np.ndarray, scale: str = "auto") -> tuple[bool, str]:
    """Whether X's panels use a log colour scale, and why (said on the figure and by the CLI).

    ``"auto"`` takes the log scale when a linear one would show almost
    nothing: below :data:`SPARSE_DENSITY` non-zeros, or when one value
    dominates (half of the non-zeros are below :data:`DOMINATED` of the largest);
    never for a matrix of zeros (there is no magnitude to show).

    Parameters
    ----------
    X : numpy.ndarray
        The original matrix (dense).
    scale : {"auto", "linear", "log"}, default="auto"
        ``"linear"`` and ``"log"`` are taken as asked.

    Returns
    -------
    log : bool
        Whether the scale is ``log10 |x|``.
    why : str
        One line, e.g. ``"log: 3.1% of the entries are non-zero"``.

    Raises
    ------
    ParameterError
        For an unknown ``scale``.

    Examples
    --------
    >>> X = np.ones((4, 4)); X[0, 0] = 1e4; X[1, :2] = 2e3
    >>> choose_scale(X)
    (True, 'log: half of the non-zeros are below 2% of the largest')
    >>> choose_scale(np.ones((4, 4)))[0]
    False
    """
    if scale not in SCALES:
        raise ParameterError(f"scale={scale!r}; choose one of {', '.join(SCALES)}")
    if scale != "auto":
        return scale == "log", f"{scale}: as asked"
    magnitudes = np.abs(X[X != 0])
    if not magnitudes.size:  # nothing to take the log of: a log scale drew the zeros as 4 decades of nothing
        return False, "linear: every entry is 0"
    if magnitudes.size < SPARSE_DENSITY * max(X.size, 1):
        return True, f"log: {100 * magnitudes.size / max(X.size, 1):.1f}% of the entries are non-zero"
    if magnitudes.size and np.median(magnitudes) < DOMINATED * magnitudes.max():
        return True, f"log: half of the non-zeros are below {100 * DOMINATED:g}% of the largest"
    return False, "linear: the values spread over their range"


def _value_style(X: np.ndarray, scale: str) -> tuple[dict, bool, float, str]:
    """``imshow`` keywords for X and its approximations, whether the scale is log, its floor, the colorbar label."""
    log, _ = choose_scale(X, scale)
    big = float(np.max(np.abs(X))) if X.size else 0.0
    if log:
        top = np.log10(big) if big > 0 else 0.0
        floor = top - 4.0  # four decades below the largest entry
        return {"cmap": "magma", "vmin": floor, "vmax": top}, True, floor, "log10 |value| (4 decades)"
    if float(np.min(X)) < 0:
        return {"cmap": "RdBu_r", "vmin": -big, "vmax": big}, False, 0.0, "value"
    return {"cmap": "viridis", "vmin": 0.0, "vmax": big or 1.0}, False, 0.0, "value"


def plot_approximations(
    X: np.ndarray,
    approximations: Mapping[str, np.ndarray],
    path: str | os.PathLike,
    *,
    title: str = "",
    scale: str = "auto",
    force: bool = True,
    note: str = "",
) -> None:
    """The original and each approximation side by side, and each residual below it.

    Parameters
    ----------
    X : ndarray
        The original (dense).
    approximations : mapping
        Panel title -> dense approximation.
    path : path
        PNG, PDF, SVG, ... (by its suffix), written atomically.
    title : str, default=""
        The figure's title (none when empty).
    scale : {"auto", "linear", "log"}, default="auto"
        The colour scale of the values (:func:`choose_scale`); residuals are
        always linear.
    force : bool, default=True
        Overwrite an existing file.
    note : str, default=""
        A line under the panels (e.g. the methods that have none).
    """
    style, log, floor, label = _value_style(X, scale)
    panels = [("original", X), *approximations.items()]
    residuals = {name: X - np.asarray(A) for name, A in approximations.items()}
    worst = max((float(np.max(np.abs(R))) for R in residuals.values()), default=0.0) or 1.0
    rows = 2 if residuals else 1
    height = 2.9 * rows
    # room above the panels for their two-line titles and the figure's title, in inches: as a share of the
    # height (matplotlib's 12%) it was too little for one row (no method had a panel), and the two overlapped
    fig = _new_figure(figsize=(2.7 * len(panels) + 0.8, height))
    axes = fig.subplots(rows, len(panels), squeeze=False, gridspec_kw={"top": 1 - 0.7 / height})
    image = None
    shown = [_display(np.asarray(A), log, floor) for _, A in panels]
    for ax, (name, _), values in zip(axes[0], panels, shown):
        image = ax.imshow(values, interpolation="nearest", **style)
        ax.set_title(_plain(name), fontsize=8)  # (an included fit's row is named by its file)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.85, label=label, extend=_clipped(shown, style, log))
    if residuals:
        axes[1][0].axis("off")
        axes[1][0].text(0.5, 0.5, "residual\nX − X̂", ha="center", va="center", fontsize=9)
        residual_image = None
        for ax, (name, R) in zip(axes[1][1:], residuals.items()):
            residual_image = ax.imshow(R, cmap="RdBu_r", vmin=-worst, vmax=worst, interpolation="nearest")
            ax.set_title(_plain(f"{name.split()[0]}: residual"), fontsize=8)
        fig.colorbar(residual_image, ax=list(axes[1]), shrink=0.85, label="X − X̂")
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(_plain(title), fontsize=10)
    if note:  # below the panels (the saved figure's tight box grows to hold it)
        fig.text(0.01, 0.0, _plain(note), fontsize=8, va="top", color="0.3", wrap=True)
    _save(fig, path, force)


def _plain(text: str) -> str:
    """A title as matplotlib shows it literally: a matrix's name is its file's, and a ``$...$`` in one was
    read as mathematics (``a$x^{2}$b`` drawn as a x squared b; ``$\\foo{$`` a ParseFatalException, the
    plot not written, a traceback); its control characters escaped (:func:`~sfapprox.formats.printable`)."""
    from .formats import printable

    return printable(text).replace("$", r"\$")


def plot_comparison(loaded, comparison, path: str | os.PathLike, *, scale: str = "auto", force: bool = True,
                    max_memory: int | None = None) -> str:
    """:func:`plot_approximations` of a :class:`~sfapprox.results.Comparison`'s fitted rows.

    Each panel's title gives the method, its stored numbers and its relative
    error (with its 95 % interval where it was estimated from some columns;
    "stopped early" for an interrupted fit).  The rows without a panel (not
    applicable, failed) are named under the panels.  Returns the colour scale
    used and why (:func:`choose_scale`).

    Parameters
    ----------
    loaded : LoadedMatrix or MatrixSource
        The matrix compared.  A panel shows all of an ``N x N`` matrix up to
        :data:`PANEL_MAX`, else every ``s``-th row and column (its entries,
        never the whole matrix or a surrogate formed).
    comparison : Comparison
        Its rows; those with an operator and a relative error get a panel.
    path : str or os.PathLike
        PNG, PDF, SVG, ... (by its suffix), written atomically.
    scale : {"auto", "linear", "log"}, default="auto"
        The colour scale of the values (:func:`choose_scale`).
    force : bool, default=True
        Overwrite an existing file.
    max_memory : int, optional
        Bytes the figure keeps to half of: fewer rows and columns shown per panel where the
        :data:`PANEL_MAX` ones would not fit (:func:`panel_side`, said in the title as any sampling is).

    Returns
    -------
    str
        The colour scale used and why.

    Raises
    ------
    SfapproxError
        When matplotlib is not installed.
    """
    n = loaded.n
    shown = sum(_has_panel(r) for r in comparison.results)
    rows = sampled_indices(n, panel_side(1 + 2 * shown, max_memory))  # X, and each row's values and residual
    panels = {}
    for r in comparison.results:
        if _has_panel(r):
            panels[_panel_title(r)] = _operator_entries(r.operator, rows)
    from .results import counted, record_label

    title = f"{record_label(comparison.matrix)} (N={n:,}), budget {counted(comparison.budget, 'number')}"
    if rows.size < n:
        title += f"; 1 row and column in {rows[1]} shown"
    # the rows without a panel are named: a method that did not apply (or failed) vanished without a word
    absent = [f"{r.method} ({_no_panel_reason(r)})" for r in comparison.results if not _has_panel(r)]
    X = _matrix_entries(loaded, rows)
    plot_approximations(X, panels, path, title=title, scale=scale, force=force,
                        note=f"not shown: {', '.join(absent)}" if absent else "")
    return choose_scale(X, scale)[1]


def _has_panel(r) -> bool:
    """Whether a comparison's row gets a panel: a surrogate kept, and scored."""
    return r.operator is not None and (r.rel_error is not None or r.fro_error is not None)


def _panel_title(r) -> str:
    """A panel's title: the method, its stored numbers and its error (with its 95 % interval where it was
    estimated from some columns, as the table gives it; "stopped early" for a fit cut short)."""
    from .results import counted

    estimate = r.error_estimate or {}
    # a zero matrix has no relative error (0/0): its panels show the absolute one, not nothing (3 digits,
    # to fit a panel's width)
    if r.rel_error is not None:
        error = f"rel {fmt_with_interval(r.rel_error, estimate.get('rel_interval'), digits=3)}"
    else:
        error = f"‖X−X̂‖_F {fmt_with_interval(r.fro_error, estimate.get('fro_interval'), digits=3)}"
    stopped = " (stopped early)" if r.status == "interrupted" else ""  # (the table's "interrupted": its best so far)
    return f"{r.method}{stopped}\n{counted(r.nnz, 'number')}, {error}"


def _no_panel_reason(r) -> str:
    """Why a row has no panel, in a few words: its status, or what it lacks."""
    if r.status not in ("ok", "interrupted"):
        return r.status  # "not applicable", "failed": the table says why
    if r.operator is None:
        return f"{r.status}, no surrogate kept" if r.status == "interrupted" else "no surrogate kept"
    return "stopped before it was scored" if r.status == "interrupted" else "not scored"


def sampled_indices(n: int, most: int = PANEL_MAX) -> np.ndarray:
    """The rows (and columns) a panel of an ``n x n`` matrix shows: all, or every ``s``-th where
    ``n > most`` (``s = ceil(n / most)``).

    Examples
    --------
    >>> sampled_indices(5).tolist(), sampled_indices(2050)[:3].tolist(), sampled_indices(2050).size
    ([0, 1, 2, 3, 4], [0, 3, 6], 684)
    """
    return np.arange(0, n, -(-n // max(1, most)), dtype=np.int64)


#: Bytes a figure takes per entry shown, per panel (values, residuals), and its fixed part: measured
#: peak RSS of nine panels (plot_approximations, Agg) at 256, 512 and 1,024 rows: 25, 63 and 189 MiB.
FIGURE_BYTES_PER_ENTRY = 20
FIGURE_FIXED_BYTES = 25 << 20
#: The share of the memory limit a figure may take (drawn after the fits, beside the matrix and the fits).
FIGURE_MEMORY_SHARE = 0.5
#: The fewest rows and columns a panel shows, whatever the limit.
PANEL_MIN = 64


def panel_side(panels: int, max_memory: int | None) -> int:
    """The most rows and columns each of ``panels`` panels shows within :data:`FIGURE_MEMORY_SHARE` of
    ``max_memory`` (bytes; None: :data:`PANEL_MAX`): a figure of five 1,024-row panels peaked near 150 MB,
    over a --max-memory of 40M.

    Examples
    --------
    >>> panel_side(9, None), panel_side(9, 4 << 30), panel_side(9, 200 << 20), panel_side(9, 40 << 20)
    (1024, 1024, 660, 64)
    """
    if max_memory is None:
        return PANEL_MAX
    room = FIGURE_MEMORY_SHARE * max_memory - FIGURE_FIXED_BYTES
    fits = int(math.sqrt(max(room, 0.0) / (FIGURE_BYTES_PER_ENTRY * max(1, panels))))
    return max(PANEL_MIN, min(PANEL_MAX, fits))


def _matrix_entries(loaded, rows: np.ndarray) -> np.ndarray:
    """``X[rows][:, rows]`` of a loaded matrix (dense or sparse) or a source (by its columns), float64."""
    from .sources import MatrixSource

    if isinstance(loaded, MatrixSource):
        return _by_columns(rows, loaded.columns)
    X = loaded.matrix
    if hasattr(X, "toarray"):
        return np.asarray(X[rows][:, rows].toarray(), dtype=np.float64)
    return np.asarray(X[np.ix_(rows, rows)], dtype=np.float64)


def _operator_entries(operator, rows: np.ndarray) -> np.ndarray:
    """``A[rows][:, rows]`` of a surrogate, from its products with the identity's columns ``rows``
    (:data:`SAMPLE_COLUMNS` at a time: never ``N x N``)."""
    n = operator.shape[0]

    def columns(cols: np.ndarray) -> np.ndarray:
        E = np.zeros((n, cols.size))
        E[cols, np.arange(cols.size)] = 1.0
        return np.asarray(operator @ E, dtype=np.float64)

    return _by_columns(rows, columns)


def _by_columns(rows: np.ndarray, columns) -> np.ndarray:
    """``A[rows][:, rows]`` from ``columns(J)`` (``A[:, J]``), :data:`SAMPLE_COLUMNS` columns at a time."""
    out = np.empty((rows.size, rows.size))
    for lo in range(0, rows.size, SAMPLE_COLUMNS):
        cols = rows[lo:lo + SAMPLE_COLUMNS]
        out[:, lo:lo + cols.size] = columns(cols)[rows]
    return out


def plot_sweep(sweep, path: str | os.PathLike, *, force: bool = True) -> None:
    """Relative error against budget (fraction of N²), one line per method, by increasing budget.

    Methods without a result at some budgets are named under the axes with
    why (e.g. "sf: not applicable at 2 of 5 budgets").  An error estimated from
    some columns gets its 95 % interval as an error bar; a fit stopped early
    (``"interrupted"``: its best so far) a hollow marker.

    Parameters
    ----------
    sweep : Sweep
        What :func:`sfapprox.sweep.sweep` returned.
    path : str or os.PathLike
        PNG, PDF, SVG, ... (by its suffix), written atomically.
    force : bool, default=True
        Overwrite an existing file.

    Raises
    ------
    SfapproxError
        When matplotlib is not installed.
    """
    n = sweep.matrix["n"]
    fig = _new_figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    missing = []
    drawn: list[tuple[float, float]] = []  # (budget share, relative error) of every point drawn
    lines = []  # (method, its points, why it has none at some budgets) to draw, once the axes' scales are known
    for method in sweep.methods:
        points, reasons = [], []
        for point in sorted(sweep.points, key=lambda p: p.budget):
            for r in point.results:
                if r.method != method:
                    continue
                if r.status in ("ok", "interrupted") and r.rel_error is not None:  # (interrupted: its best so far)
                    points.append((point.budget / n**2, r))
                elif r.status in ("ok", "interrupted"):  # ("ok at every budget" said a zero matrix's gap)
                    reasons.append("no relative error (‖X‖_F = 0)" if r.fro_error is not None else "not scored")
                else:
                    reasons.append(r.status)
        drawn.extend((x, r.rel_error) for x, r in points)
        why = f"{method}: {_reasons_by_budget(reasons, len(sweep.points))}" if reasons else None
        lines.append((method, points, why))
    xlog, ylog = _log_axes(drawn)
    # a log axis has no 0: an interval's lower end at or below it is drawn at the axis' bottom, marked
    floor = _log_floor([r for _, points, _ in lines for _, r in points]) if ylog else None
    for method, points, why in lines:
        if points:
            missing.extend(_draw_method(ax, method, points, floor))
        if why:
            missing.append(why)
    ax.set_xscale("log" if xlog else "linear")
    ax.set_yscale("log" if ylog else "linear")
    if floor is not None:
        ax.set_ylim(bottom=floor)
    ax.set_xlabel("budget (stored numbers / N²)" + (", log scale" if xlog else ""))
    ax.set_ylabel("relative Frobenius error" + (", log scale" if ylog else ""))
    from .results import record_label

    ax.set_title(_plain(f"{record_label(sweep.matrix)} (N={n:,})"))
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend()
    if not drawn:  # empty axes, ticks from 0 to 1, said nothing of why: said in them, the ticks dropped
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, _plain(_nothing_drawn(sweep)), transform=ax.transAxes, ha="center", va="center",
                fontsize=9, color="0.3", wrap=True)
    if missing:  # under the axes: drawn inside them, the lines ran through the words
        from matplotlib.transforms import offset_copy

        below = offset_copy(ax.transAxes, fig=fig, y=-36, units="points")  # (under the ticks and the label)
        ax.text(0.0, 0.0, _plain("\n".join(missing)), transform=below, fontsize=7, va="top", color="0.3")
    _save(fig, path, force)


def _nothing_drawn(sweep) -> str:
    """Why a sweep's figure has no point: a zero matrix has no relative error (0/0), and its fits' absolute
    errors are said instead (as the table gives them, and compare's panels); else no method had one.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> point = NS(results=[NS(status="ok", fro_error=0.0)])
    >>> print(_nothing_drawn(NS(matrix={"fro_norm": 0.0}, points=[point])))
    nothing to draw: X is all zeros (‖X‖_F = 0), so no relative error is defined;
    every fit reproduces it exactly (‖X−X̂‖_F = 0)
    """
    if sweep.matrix.get("fro_norm") != 0:
        return "nothing to draw: no method has a relative error at any budget (why: under the axes)"
    errors = [r.fro_error for p in sweep.points for r in p.results
              if r.status in ("ok", "interrupted") and r.fro_error is not None]
    if not errors:
        fits = "no method ran at any budget (why: under the axes)"
    elif max(errors) == 0:
        fits = "every fit reproduces it exactly (‖X−X̂‖_F = 0)"
    else:
        fits = f"the fits' ‖X−X̂‖_F are at most {max(errors):.3g} (the table gives each)"
    return f"nothing to draw: X is all zeros (‖X‖_F = 0), so no relative error is defined;\n{fits}"


#: How many times its smallest value an axis's largest must be for a log scale (two decades).
LOG_SPAN = 100.0


def _log_axes(points: list[tuple[float, float]]) -> tuple[bool, bool]:
    """Whether a sweep's budget and error axes are drawn on a log scale: where their values are all
    positive and span :data:`LOG_SPAN` or more (a linear axis drew an error of 1e-7 flat on 0 beside 0.9,
    and budgets over decades crowded into its left end).

    Examples
    --------
    >>> _log_axes([(0.01, 0.9), (0.02, 1e-7)]), _log_axes([(0.001, 0.5), (0.5, 0.1)]), _log_axes([(0.1, 0.0)])
    ((False, True), (True, False), (False, False))
    """
    def spans(values: list[float]) -> bool:
        return bool(values) and min(values) > 0 and max(values) >= LOG_SPAN * min(values)

    return spans([x for x, _ in points]), spans([y for _, y in points])


def _reasons_by_budget(reasons: list[str], budgets: int) -> str:
    """Each distinct reason with the number of budgets it holds at: its first alone was said of them all
    (a zero matrix's sweep, not applicable at its smallest budget, "not applicable at every budget").

    Examples
    --------
    >>> _reasons_by_budget(["not applicable", "not scored", "not scored"], 3)
    'not applicable at 1 of 3 budgets; not scored at 2 of 3 budgets'
    >>> _reasons_by_budget(["failed", "failed"], 2)
    'failed at every budget'
    """
    counts = dict.fromkeys(reasons, 0)  # (in the order met: by increasing budget)
    for reason in reasons:
        counts[reason] += 1
    return "; ".join(f"{reason} at every budget" if count == budgets else f"{reason} at {count} of {budgets} budgets"
                     for reason, count in counts.items())


def _interval(r) -> tuple | None:
    """A row's 95 % interval of its relative error, where it was estimated from some columns."""
    return (r.error_estimate or {}).get("rel_interval")


def _reaches_zero(r) -> bool:
    """Whether a row's interval has its lower end at or below 0 (none on a log axis)."""
    i = _interval(r)
    return bool(i) and i[0] is not None and i[0] <= 0


def _log_floor(rows: list) -> float | None:
    """The bottom of a log error axis where some interval reaches 0 or below (None where none does): a
    :data:`LOG_FLOOR` of the smallest positive value drawn (an error, an interval's lower end), so that
    every other point and bar end is above it.  matplotlib clipped such an end out of sight, the bar
    running off the axis as if cut.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> _log_floor([NS(rel_error=0.1, error_estimate={"rel_interval": (-0.05, 0.2)}),
    ...             NS(rel_error=0.02, error_estimate=None)])
    0.01
    """
    if not any(_reaches_zero(r) for r in rows):
        return None
    values = [r.rel_error for r in rows] + [i[0] for i in map(_interval, rows) if i and i[0] is not None]
    positive = [v for v in values if v > 0]
    return LOG_FLOOR * min(positive) if positive else None


#: Where a log error axis' bottom is when an interval reaches 0 or below: this share of the smallest
#: positive value drawn (a third of a decade below it, room for the mark of the ends drawn there).
LOG_FLOOR = 0.5


def _draw_method(ax, method: str, points: list, floor: float | None = None) -> list[str]:
    """One method's line: its points (budget share, row), a 95 % error bar on each error estimated from
    some columns (drawn as a bare point, it read as exact), a hollow marker on each fit stopped early.
    ``floor``: a log axis' bottom, where an interval's lower end at or below 0 is drawn, with a downward
    triangle (the axis has no 0: matplotlib clipped it out of sight).  Returns the lines to say under the
    axes about them."""
    xs = [x for x, _ in points]
    ys = [r.rel_error for _, r in points]
    intervals = [_interval(r) for _, r in points]
    notes = []
    if any(intervals):
        # (y - low, high - y); an interval open above (high None or infinite) is drawn below only
        # (never negative: matplotlib refuses a negative bar, and a rounded interval may miss its estimate)
        ends = [floor if floor is not None and _reaches_zero(r) else i[0] if i else None
                for (_, r), i in zip(points, intervals)]
        low = [max(0.0, y - end) if end is not None else 0.0 for y, end in zip(ys, ends)]
        high = [max(0.0, i[1] - y) if i and i[1] is not None and np.isfinite(i[1]) else 0.0
                for y, i in zip(ys, intervals)]
        line = ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=_plain(method)).lines[0]
        opened = sum(1 for i in intervals if i and (i[1] is None or not np.isfinite(i[1])))
        notes.append(f"{method}: errors estimated from some columns (bars: 95% intervals"
                     + (f"; {opened} open above)" if opened else ")"))
        cut = [x for (x, r) in points if floor is not None and _reaches_zero(r)]
        if cut:
            # clip_on=False: centred on the axis' bottom, half of the mark was cut off
            ax.plot(cut, [floor] * len(cut), linestyle="none", marker="v", color=line.get_color(), clip_on=False)
            notes.append(f"{method}: {len(cut)} interval{' reaches' if len(cut) == 1 else 's reach'} 0 or below, "
                         "which a log axis has not (▼: drawn to the axis' bottom)")
    else:
        (line,) = ax.plot(xs, ys, marker="o", label=_plain(method))
    stopped = [(x, r.rel_error) for x, r in points if r.status == "interrupted"]
    if stopped:
        ax.plot(*zip(*stopped), linestyle="none", marker="o", markerfacecolor="white",
                markeredgecolor=line.get_color())
        notes.append(f"{method}: stopped early at {len(stopped):,} of {counted(len(points), 'budget')} "
                     "(hollow: its best so far)")
    return notes
