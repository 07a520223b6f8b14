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


def _compared(n, methods=("tsvd", "sparse", "monarch")):
    from sfapprox import compare

    X = np.random.default_rng(0).random((n, n))
    return X, compare(X, methods=list(methods), time_limit=2)


def test_a_large_matrixs_panels_show_sampled_entries_never_the_whole_matrix(monkeypatch, tmp_path):
    """--plot formed X and every surrogate N x N (and their residuals): 7.4 GB at N = 8,000 under a
    200 MB limit, after all the fitting. Above PANEL_MAX a panel holds every s-th row and column,
    computed from the surrogate's products with identity columns, a few at a time."""
    pytest.importorskip("matplotlib")
    import sfapprox.plotting as plotting
    from sfapprox.io import LoadedMatrix

    X, res = _compared(50)
    loaded = LoadedMatrix(X, "m", None, "npy")
    monkeypatch.setattr(plotting, "PANEL_MAX", 16)
    monkeypatch.setattr(plotting, "SAMPLE_COLUMNS", 5)
    seen = {}

    def record(X_, panels, path, *, title, scale, force, **rest):
        seen.update(X=X_, panels=panels, title=title)

    monkeypatch.setattr(plotting, "plot_approximations", record)
    for r in res.results:  # a whole surrogate is never formed
        monkeypatch.setattr(r.operator, "to_dense", lambda *a, **k: pytest.fail("formed a surrogate"), raising=False)
    plotting.plot_comparison(loaded, res, tmp_path / "p.png")
    rows = np.arange(0, 50, 4)
    assert "1 row and column in 4 shown" in seen["title"]
    np.testing.assert_array_equal(seen["X"], X[np.ix_(rows, rows)])
    for r in res.results:
        title = next(t for t in seen["panels"] if t.startswith(r.method + "\n"))
        dense = type(r.operator).to_dense(r.operator)
        np.testing.assert_allclose(seen["panels"][title], dense[np.ix_(rows, rows)], atol=1e-12)


def test_a_sampled_panel_of_a_source_reads_its_columns(monkeypatch):
    import sfapprox.plotting as plotting
    from sfapprox.sources import KernelMatrix

    points = np.random.default_rng(1).standard_normal((40, 3))
    K = KernelMatrix(points, bandwidth=1.0)
    monkeypatch.setattr(plotting, "PANEL_MAX", 10)
    rows = plotting.sampled_indices(40)
    np.testing.assert_allclose(plotting._matrix_entries(K, rows), K.to_dense()[np.ix_(rows, rows)], atol=1e-12)


def test_a_small_matrixs_panels_are_whole(tmp_path):
    pytest.importorskip("matplotlib")
    from sfapprox.io import LoadedMatrix
    from sfapprox.plotting import plot_comparison

    X, res = _compared(20)
    plot_comparison(LoadedMatrix(X, "m", None, "npy"), res, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_a_figure_type_matplotlib_cannot_write_is_a_parameter_error(tmp_path):
    """The library's plots let matplotlib's ValueError ("Format 'foo' is not supported") out; the CLI
    checked the suffix itself."""
    from sfapprox import ParameterError

    pytest.importorskip("matplotlib")
    s = sweep(np.random.default_rng(0).random((12, 12)), [0.3], ["tsvd"])
    with pytest.raises(ParameterError, match="cannot write a figure of type '.foo'"):
        plot_sweep(s, tmp_path / "x.foo")
    assert not (tmp_path / "x.foo").exists()


def test_a_zero_matrix_gets_its_panels_and_the_sweep_says_why_it_has_no_curve(monkeypatch, tmp_path):
    """A zero matrix's compare figure dropped every method's panel (no relative error: 0/0), and the sweep's
    empty axes said "tsvd: ok at every budget"."""
    pytest.importorskip("matplotlib")
    import sfapprox.plotting as plotting
    from sfapprox import compare
    from sfapprox.io import LoadedMatrix

    Z = np.zeros((16, 16))
    seen = {}
    monkeypatch.setattr(plotting, "plot_approximations",
                        lambda X, panels, path, **k: seen.update(panels=panels))
    plotting.plot_comparison(LoadedMatrix(Z, "z", None, "npy"), compare(Z, "tsvd,sparse", budget=100),
                             tmp_path / "p.png")
    assert sorted(t.split("\n")[0] for t in seen["panels"]) == ["sparse", "tsvd"]
    assert all("‖X−X̂‖_F 0" in t for t in seen["panels"])
    texts = []
    import matplotlib.axes

    monkeypatch.setattr(matplotlib.axes.Axes, "text", lambda self, x, y, s, **k: texts.append(s))
    plot_sweep(sweep(Z, [0.2, 0.5], ["tsvd"]), tmp_path / "s.png")
    assert "tsvd: no relative error (‖X‖_F = 0) at every budget" in texts


def test_a_file_s_name_is_a_plot_title_as_it_is_never_mathematics(tmp_path):
    """A matrix's name is its file's: ``$...$`` in one was read as matplotlib mathematics (drawn as a formula)
    and an unknown command in it (``$\\foo{$``) raised ParseFatalException, a traceback and no plot."""
    pytest.importorskip("matplotlib")
    from sfapprox import compare
    from sfapprox.plotting import plot_comparison

    X = np.random.default_rng(0).random((12, 12))
    np.save(tmp_path / "c$\\foo{$d.npy", X)
    res = compare(tmp_path / "c$\\foo{$d.npy", "tsvd")
    from sfapprox.io import load_matrix

    plot_comparison(load_matrix(tmp_path / "c$\\foo{$d.npy"), res, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000
    s = sweep(load_matrix(tmp_path / "c$\\foo{$d.npy"), [0.3, 0.6], ["tsvd"])
    plot_sweep(s, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
    from sfapprox.plotting import _plain

    assert _plain("a$x^{2}$b\x1b") == "a\\$x^{2}\\$b\\x1b"


def test_a_zero_matrix_is_drawn_on_a_linear_scale():
    """--plot-scale auto took log10 |x| of a zero matrix ("log: 0.0% of the entries are non-zero"): every
    panel at the floor of a colour bar of 4 decades down from 1, values the matrix does not have."""
    from sfapprox.plotting import choose_scale

    assert choose_scale(np.zeros((4, 4))) == (False, "linear: every entry is 0")
    assert choose_scale(np.zeros((4, 4)), "log") == (True, "log: as asked")


def test_the_compare_figure_names_the_rows_without_a_panel_and_marks_the_others(monkeypatch, tmp_path):
    """A method not applicable or failed vanished from the figure without a word; a fit stopped early
    (the table's "interrupted", not ranked) was drawn as a finished one; an error estimated from some
    columns lost its interval; a budget of 1 was "1 numbers"."""
    pytest.importorskip("matplotlib")
    import sfapprox.plotting as plotting
    from sfapprox import compare
    from sfapprox.io import LoadedMatrix

    X = np.random.default_rng(0).random((12, 12))
    res = compare(X, "tsvd,sparse,rsvd,monarch", budget=100)
    tsvd, sparse, rsvd, monarch = res.results
    sparse.status, sparse.reason, sparse.operator = "failed", "boom", None
    rsvd.status = "interrupted"
    monarch.error_estimate = {"exact": False, "rel_interval": (monarch.rel_error - 0.01, monarch.rel_error + 0.01)}
    seen = {}
    monkeypatch.setattr(plotting, "plot_approximations", lambda X_, panels, path, **k: seen.update(panels=panels, **k))
    plotting.plot_comparison(LoadedMatrix(X, "m", None, "npy"), res, tmp_path / "p.png")
    titles = list(seen["panels"])
    assert [t.split("\n")[0] for t in titles] == ["tsvd", "rsvd (stopped early)", "monarch"]
    assert titles[2].endswith(f"rel {monarch.rel_error:.3g} ± 0.01")
    assert seen["note"] == "not shown: sparse (failed)"

    one = compare(np.ones((1, 1)), "sf,tsvd")
    plotting.plot_comparison(LoadedMatrix(np.ones((1, 1)), "one", None, "npy"), one, tmp_path / "p.png")
    assert seen["title"].endswith("budget 1 number")
    assert seen["note"] == "not shown: tsvd (not applicable)"
    assert list(seen["panels"]) == ["sf\n1 number, rel 0"]


def _figures(monkeypatch):
    """The figures the plots would save (drawn, not written), to look at what they show."""
    import sfapprox.plotting as plotting

    figures = []

    def keep(fig, path, plt, force=True):
        fig.canvas.draw()
        figures.append(fig)

    monkeypatch.setattr(plotting, "_save", keep)
    return figures


def test_the_figure_title_clears_the_panel_titles_when_no_method_has_a_panel(monkeypatch, tmp_path):
    """With one row of panels (no method scored) the figure's title sat on the original's (half a pixel
    apart): the room above the panels was a share of the figure's height, which one row halves."""
    pytest.importorskip("matplotlib")
    from sfapprox.plotting import plot_approximations

    figures = _figures(monkeypatch)
    plot_approximations(np.eye(3), {}, tmp_path / "p.png", title="m (N=3), budget 2 numbers")
    fig = figures[0]
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    panel = fig.axes[0].title.get_window_extent(renderer)
    assert title.y0 - panel.y1 > 5 * fig.dpi / 72  # 5 points


def test_the_sweep_draws_estimated_errors_with_their_intervals_and_its_notes_under_the_axes(monkeypatch, tmp_path):
    """Errors estimated from some columns were drawn as bare points (read as exact); a fit stopped early
    as a finished one; the notes on methods without a point were written inside the axes, over the lines."""
    pytest.importorskip("matplotlib")
    from matplotlib.container import ErrorbarContainer

    X = np.random.default_rng(0).random((12, 12))
    s = sweep(X, [0.2, 0.4, 0.6], ["tsvd", "monarch"])
    for point in s.points:
        r = point.results[0]
        r.error_estimate = {"exact": False, "rel_interval": (r.rel_error * 0.9, r.rel_error * 1.2)}
    s.points[-1].results[0].status = "interrupted"
    figures = _figures(monkeypatch)
    plot_sweep(s, tmp_path / "s.png")
    ax = figures[0].axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    segments = bars.lines[2][0].get_segments()
    errors = [p.results[0].rel_error for p in s.points]
    np.testing.assert_allclose([seg[:, 1] for seg in segments], [(e * 0.9, e * 1.2) for e in errors])
    hollow = [line for line in ax.lines if line.get_markerfacecolor() == "white"]
    assert len(hollow) == 1 and hollow[0].get_ydata().tolist() == [errors[-1]]
    (note,) = ax.texts
    assert "tsvd: errors estimated from some columns (bars: 95% intervals)" in note.get_text()
    assert "tsvd: stopped early at 1 of 3 budgets (hollow: its best so far)" in note.get_text()
    assert "monarch: not applicable at 2 of 3 budgets" in note.get_text()
    renderer = figures[0].canvas.get_renderer()
    assert note.get_window_extent(renderer).y1 < ax.xaxis.label.get_window_extent(renderer).y0


def test_the_sweep_says_each_reason_at_the_budgets_it_holds_at(monkeypatch, tmp_path):
    """A zero matrix's sweep, its smallest budget below tsvd's one rank, said "tsvd: not applicable at every
    budget": the first budget's reason was said of all of them, though tsvd ran at the others (no relative
    error).  (tsvd now holds the zero matrix in 0 numbers at any budget: monarch's smallest matrix, 84
    numbers at N = 12, is the budget it is below.)"""
    pytest.importorskip("matplotlib")
    figures = _figures(monkeypatch)
    plot_sweep(sweep(np.zeros((12, 12)), [10, 0.6, 0.8], ["monarch"]), tmp_path / "s.png")
    assert ("monarch: not applicable at 1 of 3 budgets; no relative error (‖X‖_F = 0) at 2 of 3 budgets"
            in [t.get_text() for t in figures[0].axes[0].texts])


@pytest.mark.parametrize("X, budgets, says", [
    (np.zeros((12, 12)), [0.3, 0.5], "nothing to draw: X is all zeros (‖X‖_F = 0), so no relative error is "
                                     "defined;\nevery fit reproduces it exactly (‖X−X̂‖_F = 0)"),
    (np.eye(12), [10], "nothing to draw: no method has a relative error at any budget (why: under the axes)"),
])
def test_a_sweep_with_nothing_to_draw_says_why_in_its_axes(monkeypatch, tmp_path, X, budgets, says):
    """A zero matrix's sweep (or one where no method ran) drew empty axes, ticked 0 to 1, that said
    nothing of why; compare's figure of a zero matrix gives its absolute errors."""
    pytest.importorskip("matplotlib")
    figures = _figures(monkeypatch)
    plot_sweep(sweep(X, budgets, ["tsvd"]), tmp_path / "s.png")
    ax = figures[0].axes[0]
    assert says in [t.get_text() for t in ax.texts]
    assert not ax.lines and list(ax.get_xticks()) == list(ax.get_yticks()) == []


def test_the_sweep_draws_errors_and_budgets_over_decades_on_log_axes(monkeypatch, tmp_path):
    """The axes were always linear: an exact-to-round-off 1e-7 sat flat on 0 beside 0.9, and budgets over
    decades crowded into the left end.  Positive values that span two decades get a log axis (said)."""
    pytest.importorskip("matplotlib")
    X = np.random.default_rng(0).random((200, 200))
    s = sweep(X, [300, 0.1, 1.0], ["sparse"])  # budget shares 0.0075 to 1
    s.points[-1].results[0].rel_error = 1e-7  # (as a round-off floor would be)
    figures = _figures(monkeypatch)
    plot_sweep(s, tmp_path / "s.png")
    ax = figures[0].axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log" and "log scale" in ax.get_ylabel()
    close = sweep(X, [0.3, 0.5], ["sparse"])  # within a decade, both ways: linear as before
    plot_sweep(close, tmp_path / "t.png")
    assert figures[1].axes[0].get_yscale() == "linear" and figures[1].axes[0].get_xscale() == "linear"


def test_the_colour_bar_arrows_the_ends_an_approximation_passes(monkeypatch, tmp_path):
    """An approximation's negative entries of a non-negative X (or entries over X's largest) drew at the
    end colour without a sign; the colour bar now has an arrow at each end some panel passes."""
    pytest.importorskip("matplotlib")
    from sfapprox.plotting import plot_approximations

    X = np.random.default_rng(0).random((8, 8))
    figures = _figures(monkeypatch)
    plot_approximations(X, {"low": X - 0.3, "high": X * 1.5}, tmp_path / "a.png", scale="linear")
    plot_approximations(X, {"same": X.copy()}, tmp_path / "b.png", scale="linear")
    bars = [[ax for ax in fig.axes if ax.get_label() == "<colorbar>"] for fig in figures]
    assert bars[0][0]._colorbar.extend == "both" and bars[0][1]._colorbar.extend == "neither"  # (residuals: never)
    assert bars[1][0]._colorbar.extend == "neither"


def test_a_figure_keeps_to_the_memory_limit_by_showing_fewer_rows(monkeypatch, tmp_path):
    """A figure of five 1,024-row panels peaked near 150 MB whatever --max-memory said (40M: 4x over):
    under a limit its panels show every s-th row and column, as a large matrix's do, and the title says so."""
    pytest.importorskip("matplotlib")
    from sfapprox.comparison import compare
    from sfapprox.io import LoadedMatrix
    from sfapprox.plotting import FIGURE_BYTES_PER_ENTRY, FIGURE_FIXED_BYTES, panel_side, plot_comparison

    X = LoadedMatrix(np.random.default_rng(0).random((300, 300)), "m", None, "npy")
    c = compare(X, ["tsvd", "sparse"], budget=0.1)
    figures = _figures(monkeypatch)
    plot_comparison(X, c, tmp_path / "roomy.png")
    limit = 2 * (FIGURE_FIXED_BYTES + FIGURE_BYTES_PER_ENTRY * 5 * 100**2)  # 100 rows for five panels
    assert panel_side(5, limit) == 100
    plot_comparison(X, c, tmp_path / "tight.png", max_memory=limit)
    roomy, tight = ([im.get_array().shape for ax in fig.axes for im in ax.get_images()] for fig in figures)
    assert set(roomy) == {(300, 300)} and set(tight) == {(100, 100)}
    assert figures[1]._suptitle.get_text().endswith("; 1 row and column in 3 shown")


def test_a_log_error_axis_draws_an_interval_reaching_zero_to_its_bottom_and_says_so(monkeypatch, tmp_path):
    """On a log error axis an interval whose lower end is at or below 0 (none on that axis) was clipped by
    matplotlib: the bar ran off the axis' bottom, its end out of sight.  It is drawn to the axis' bottom,
    marked there with a downward triangle, and the note under the axes says so."""
    pytest.importorskip("matplotlib")
    from matplotlib.container import ErrorbarContainer

    X = np.random.default_rng(0).random((200, 200))
    s = sweep(X, [300, 0.1, 1.0], ["sparse"])
    r0, r1, r2 = (p.results[0] for p in s.points)
    r2.rel_error = 1e-7  # the errors span decades: a log axis
    r0.error_estimate = {"exact": False, "rel_interval": (r0.rel_error * 0.9, r0.rel_error * 1.1)}
    r2.error_estimate = {"exact": False, "rel_interval": (-1e-7, 3e-7)}  # its lower end below 0
    figures = _figures(monkeypatch)
    plot_sweep(s, tmp_path / "s.png")
    ax = figures[0].axes[0]
    assert ax.get_yscale() == "log"
    bottom = ax.get_ylim()[0]
    assert 0 < bottom < 1e-7  # every point above it
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    lows = sorted(seg[:, 1].min() for seg in bars.lines[2][0].get_segments())
    assert lows[0] == pytest.approx(bottom)  # drawn down to the axis' bottom, not to an end the axis lacks
    assert lows[1] == pytest.approx(r0.rel_error * 0.9)  # an interval above 0 as it is
    (marks,) = [line for line in ax.lines if line.get_marker() == "v"]
    assert marks.get_xdata().tolist() == [1.0] and marks.get_ydata().tolist() == pytest.approx([bottom])
    assert not marks.get_clip_on()  # the whole triangle shown, not its half above the axis' bottom
    (note,) = ax.texts
    assert "sparse: 1 interval reaches 0 or below" in note.get_text() and "drawn to the axis' bottom" in note.get_text()
    plain = sweep(X, [300, 0.1, 1.0], ["sparse"])
    plain.points[-1].results[0].rel_error = 1e-7
    plot_sweep(plain, tmp_path / "t.png")  # no interval reaches 0: the axis is matplotlib's, nothing marked
    assert not [line for line in figures[1].axes[0].lines if line.get_marker() == "v"]


def test_a_fit_stopped_early_at_the_only_budget_is_counted_in_the_singular(monkeypatch, tmp_path):
    """"stopped early at 1 of 1 budgets": counted (formats.counted), as other messages count."""
    pytest.importorskip("matplotlib")
    s = sweep(np.random.default_rng(0).random((12, 12)), [0.5], ["tsvd"])
    s.points[0].results[0].status = "interrupted"
    figures = _figures(monkeypatch)
    plot_sweep(s, tmp_path / "s.png")
    (note,) = figures[0].axes[0].texts
    assert "tsvd: stopped early at 1 of 1 budget (hollow: its best so far)" in note.get_text()
