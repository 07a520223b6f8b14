"""A fit's progress line, drawn with rich: the CLI's bar, and ``progress=True`` of the Python API.

The events are the progress callbacks' (:mod:`sfapprox._progress`): a dict
per report (``iteration``, ``max_iter``, ``fro_error``, ``elapsed``,
``method``, ...), a phase's text before the first iteration, and a
comparison's ``on_result`` hooks (the method that starts, the budget that
starts).  :func:`fit_display` turns them into one line on a rich console; the
CLI draws it on its stderr (``sfapprox.cli._render.fit_progress``), and
:func:`shown_progress` on a console of its own for ``compare``, ``sweep``,
``fit_matrix`` and ``fit_sf`` called with ``progress=True``: a bar in a
terminal, a live display in a Jupyter notebook (rich's, through IPython),
nothing where stderr is piped or a file.

Displaying never stops a fit: a display that fails (a closed stream, a
notebook without ipywidgets) is dropped, with a warning, and the fit goes on.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ._errors import ParameterError, user_stacklevel
from ._global_state import python_random_kept

# rich draws from Python's global generator as it loads: this module is what loads it for the Python
# API (progress=True), inside the caller's process, whose random.seed must hold after the call.
with python_random_kept():
    from rich.cells import cell_len
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn
    from rich.table import Column as TableColumn
    from rich.text import Text

from ._progress import coarse_progress
from .formats import fmt_number, printable

__all__ = ["fit_display", "shown_progress", "display_label", "draws_bar", "on_terminal", "method_announcer", "progress_phase",
           "fit_progress_columns", "quiet_update"]


#: Below this many columns the progress line has no bar: the label and the phase give way first, the
#: numbers never.
NARROW_PROGRESS = 72
#: Below this width the progress line shows its numbers only (they take 32 columns with their gaps).
TINY_PROGRESS = 40


def plain_literal(text: str) -> str:
    """``text`` in rich markup as it is: ``[...]`` shown, not read as a style, and what a terminal would act
    on (an ESC in a file's name) written as its escape."""
    return escape(printable(text))


@contextlib.contextmanager
def fit_display(label: str, total: int | None, *, console: Console, time_limit: float | None = None,
                literal: Callable[[str], str] = plain_literal) -> Iterator[Any]:
    """A progress line on ``console`` with the current method, start and error; yields its callback.

    The bar fills with whichever limit is nearer: iterations (``total``, or a
    report's ``max_iter``) or the time limit.  The callback receives the
    iterative methods' progress dicts (``iteration``, ``max_iter``,
    ``fro_error``, ``elapsed`` and, when they are known, ``start``, ``method``
    and the method's own ``time_limit``); its ``describe(what)`` names what
    runs without reports (a closed-form method, "scoring"), its
    ``relabel(what)`` adds a sweep's budget to the label, its ``phase(text)``
    shows a phase beside the bar.  ``literal`` makes a name rich markup as it
    is.  The line is cleared when the block ends, however it ends.
    """
    label = literal(label)  # (a file's name)
    # the user's own prints go where their stdout goes: rich's default (redirect_stdout) drew them through the
    # display's console, stderr, out of a redirected stdout; only a terminal's are drawn above the line
    progress = _FitProgress(console=console, transient=True, redirect_stdout=_on_a_terminal(sys.stdout))
    with progress:
    # "what": the method (or "scoring") the description ends with, kept whole when the label is cut
        # iteration None: no fit reports yet (a stage: "scoring", a method before its first iteration), so
        # the line shows no "it 0 error –", numbers that meant nothing there; the label and the time say it
        task = progress.add_task(label, total=1.0, iteration=None, error=None, phase="", what="", stage="")
        shown = {"label": label}  # the label and what relabel() adds to it (a sweep's budget)

        def update(info: dict) -> None:
            limit = info.get("max_iter") or total
            done = info["iteration"] / max(limit or 1, 1)
            seconds = info.get("time_limit", time_limit)
            if seconds:
                done = max(done, info["elapsed"] / seconds)
            method = info.get("method")
            progress.update(task, completed=min(done, 1.0), iteration=info["iteration"],
                            error=info["fro_error"], phase=progress_phase(info), what=method or "",
                            description=f"{shown['label']} {method}" if method else shown["label"])

        def describe(what: str) -> None:
            progress.update(task, completed=0.0, iteration=None, error=None, phase="", what=what,
                            description=f"{shown['label']} {what}")

        def relabel(what: str) -> None:
            shown["label"] = f"{label} {literal(what)}"
            progress.update(task, completed=0.0, iteration=None, error=None, phase="", what="",
                            stage=what, description=shown["label"])

        update.describe = describe  # type: ignore[attr-defined]
        update.relabel = relabel  # type: ignore[attr-defined]
        update.phase = lambda text: progress.update(task, phase=text)  # type: ignore[attr-defined]
        update.failed = lambda: progress.failed  # type: ignore[attr-defined]
        update.coarse = True  # type: ignore[attr-defined]  # a bar needs no call per iteration (see ChordSF's callback)
        yield update


#: The narrowest phase a narrow progress line shows beside the label ("sta…" says little): with less room
#: the label takes it all.
MIN_PHASE = 6
#: The narrowest bar a wide progress line keeps beside a label cut to make room for it.
WIDE_BAR_MIN = 10


def fit_progress_columns(width: int, task: Any = None) -> list[Any]:
    """The progress line's columns for a window ``width`` columns wide, laid out for ``task`` (None: none
    yet).

    In a narrow window the label, the bar and the phase give way; the numbers
    are never cut (a line "it 7… error 6…" read as iteration 7 at iteration
    7,429).  The label goes before the phase: at 40 columns each had 4, and
    the line read "SF …" (the phase empty) or "mes…", the method never
    shown; the phase has what the label leaves, or no column at all.
    Chosen at each redraw: a window narrowed during the fit cut the error to
    "0." and lost the time, widened it kept a narrow line.
    """
    whole: dict[str, Any] = dict(no_wrap=True, overflow="ignore")
    narrow = width < NARROW_PROGRESS
    bar = [] if narrow else [BarColumn(table_column=TableColumn(ratio=1))]
    # a stage without iterations ("loading torch", "scoring") has no "it" or error: their columns, empty,
    # kept 24 blank cells while the phase beside them was cut ("SF mesh loading to…" at 50 columns)
    counted = not narrow or task is None or task.fields.get("iteration") is not None
    # the numbers' columns and the gaps take 32 (the time alone 9); in a narrow window the label and the
    # phase share the rest
    room = max(4, width - (32 if counted else 9))
    cut: dict[str, Any] = dict(no_wrap=True, overflow="ellipsis", ratio=1)
    phase = str(task.fields.get("phase") or "") if task is not None else ""
    label = Text.from_markup(task.description).cell_len if task is not None else room
    # beside a bar the label has what the numbers, a bar of WIDE_BAR_MIN and a phase of MIN_PHASE leave (each
    # with its gap): a 44-character name at 80 columns pushed the method, the error's last digits and the
    # time off the line ("a_very_long…progres… start ident… it 1234   error 3" at 72)
    label_room = min(label, room if narrow else max(4, room - WIDE_BAR_MIN - MIN_PHASE - 2))
    # beside a bar the phase has what the label and a bar of WIDE_BAR_MIN leave: a long one ("rank-one start
    # (a pass over the columns)") pushed the method, the bar and the time off a line of 72-80 columns
    phase_room = room - label_room if narrow else max(MIN_PHASE, room - min(label, label_room) - WIDE_BAR_MIN - 2)
    shows_phase = not narrow or (phase and phase_room >= MIN_PHASE)
    if narrow and not shows_phase:
        label_room = room + 1  # (the phase's gap too)
    # below TINY_PROGRESS columns the numbers alone fill the line: the label and phase go (rich shrank
    # the elapsed time to "0:0" to fit a label cut to "…"); a stage without them (loading, compiling,
    # scoring) keeps its label and phase: the line was 23 blank cells and the time, the method never named
    words = [] if width < TINY_PROGRESS and counted else [
        _LabelColumn(label_room, table_column=TableColumn(max_width=label_room, **cut)),
        *bar,
        *([TextColumn("{task.fields[phase]}", table_column=TableColumn(max_width=phase_room, **cut))]
          if shows_phase else [])]
    it_width, error_width, time_width = NUMBER_WIDTHS
    numbers = [_IterationColumn(table_column=TableColumn(min_width=it_width, **whole)),
               _ErrorColumn(numbers_room(width), table_column=TableColumn(min_width=error_width, **whole))]
    return [
        *words,
        *(numbers if counted or not words else []),
        _ElapsedColumn(table_column=TableColumn(min_width=time_width, **whole)),
    ]


class _LabelColumn(ProgressColumn):
    """The progress line's label (the matrix, then the method), in bold, cut to ``room`` cells (None: whole)
    before the method: "mesh_sm… sf", not "mesh_small…", where the method (the task's ``what``) fits."""

    def __init__(self, room: int | None, table_column: TableColumn | None = None) -> None:
        self.room = room
        super().__init__(table_column=table_column)

    def render(self, task: Any) -> Text:
        text = Text.from_markup(task.description, style="bold")
        what = str(task.fields.get("what") or "")
        if self.room is None or text.cell_len <= self.room or not what or not text.plain.endswith(f" {what}"):
            return text
        head = self.room - cell_len(what) - 1
        if head < 2:  # no room for a letter of the matrix's name and "…": the method, cut if it must be
            return Text(what, style="bold")
        start = text[:len(text.plain) - len(what) - 1]
        stage = str(task.fields.get("stage") or "")
        kept = _stage_kept(start.plain, stage, head)
        if kept:  # a sweep's "budget 1/5 (144,000)" kept whole (or its "budget 1/5"), the matrix's name cut
            start = start[:len(start.plain) - len(stage) - 1]
            start.truncate(head - cell_len(kept) - 1, overflow="ellipsis")
            return Text.assemble(start, " ", kept, " ", (what, "bold"), style="bold")
        start.truncate(head, overflow="ellipsis")
        return Text.assemble(start, " ", (what, "bold"), style="bold")


def _stage_kept(start: str, stage: str, head: int) -> str:
    """What of a sweep's stage (``"budget 1/5 (144,000)"``, after the matrix's name in ``start``) a label
    cut to ``head`` cells keeps whole: all of it, or without its budget ("budget 1/5") where that leaves
    the name 2 cells ("r…"), else nothing (the label cut at its end, as any).  Cut at its end, a 60-column
    sweep read "rbf3000 budget 1/5 (1… sparse": budget 1, not 144,000.

    Examples
    --------
    >>> _stage_kept("rbf3000 budget 1/5 (144,000)", "budget 1/5 (144,000)", 24)
    'budget 1/5 (144,000)'
    >>> _stage_kept("rbf3000 budget 1/5 (144,000)", "budget 1/5 (144,000)", 16)
    'budget 1/5'
    >>> _stage_kept("rbf3000 budget 1/5 (144,000)", "budget 1/5 (144,000)", 8)
    ''
    """
    if not stage or not start.endswith(f" {stage}"):
        return ""
    for kept in (stage, stage.split(" (")[0]):
        if cell_len(kept) + 1 + 2 <= head:
            return kept
    return ""


#: The least widths of the progress line's numbers, "it N", "error E" and the elapsed time: the line
#: keeps its layout as the iterations gain a digit.
NUMBER_WIDTHS = (9, 12, 7)


def numbers_room(width: int) -> int | None:
    """The columns a window ``width`` wide leaves the text of the progress line's three numbers (the gaps
    between its columns left out): all of it below :data:`TINY_PROGRESS`, what the label and phase leave
    below :data:`NARROW_PROGRESS` (:func:`fit_progress_columns`), None (what they need) beside a bar."""
    if width < TINY_PROGRESS:
        return width - 2
    if width < NARROW_PROGRESS:
        return width - max(4, width - 32) - 4
    return None


def error_text(value: float | None, room: int | None) -> str:
    """``error E``, E to 4 significant digits, or to fewer where ``room`` columns are fewer: at 30 columns
    "error 0.0001234" beside "it 12345" pushed the elapsed time off the line (cut to "0:00:0"); a
    shorter error is still the error, a cut time is not the time."""
    text = f"error {fmt_number(value)}"
    for digits in (3, 2, 1):
        if room is None or len(text) <= room:
            break
        text = f"error {fmt_number(value, digits)}"
    return text


def elapsed_text(task: Any) -> str:
    """The time since the task began, ``H:MM:SS``."""
    return str(datetime.timedelta(seconds=max(0, int(task.elapsed or 0))))


def iteration_text(task: Any) -> str:
    """``it N``, or nothing where no fit reports (a stage such as "scoring": "it 0" there counted nothing)."""
    iteration = task.fields["iteration"]
    return "" if iteration is None else f"it {iteration}"


class _IterationColumn(ProgressColumn):
    """The progress line's iteration (:func:`iteration_text`)."""

    def render(self, task: Any) -> Text:
        return Text(iteration_text(task))


class _ErrorColumn(ProgressColumn):
    """The progress line's error, to as many digits as the numbers' ``room`` leaves it (:func:`error_text`)."""

    def __init__(self, room: int | None, table_column: TableColumn | None = None) -> None:
        self.room = room
        super().__init__(table_column=table_column)

    def render(self, task: Any) -> Text:
        room = self.room
        if room is not None:
            it_width, error_width, time_width = NUMBER_WIDTHS
            room -= max(it_width, len(iteration_text(task))) + max(time_width, len(elapsed_text(task)))
        return Text(error_text(task.fields["error"], room) if task.fields["iteration"] is not None else "")


class _ElapsedColumn(ProgressColumn):
    """The time since the line began, going on after the bar is full: rich's column stops at the time the
    bar filled (``finished_time``), and a fit past its time limit's share (the limit leaves out the
    compiling; the scoring, the methods after) showed the same second for the rest of the run."""

    def render(self, task: Any) -> Text:
        return Text(elapsed_text(task), style="progress.elapsed")


def _on_a_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False where it cannot say: closed, None, a stream without isatty)."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _FitProgress(Progress):
    """A fit's progress line, laid out for the window's width at each redraw (:func:`fit_progress_columns`)."""

    def __init__(self, *, console: Console, **kwargs: Any) -> None:
        self._drawn_on = console  # (set before rich's __init__, which may draw)
        #: The first exception a redraw raised (None while they work): rich redraws from a thread of its own,
        #: where a failed write killed that thread with a traceback, out of reach of any caller's guard.
        self.failed: Exception | None = None
        super().__init__(console=console, **kwargs)
        redraw = self.live.refresh

        def refresh() -> None:  # (the refresh thread's, and every other redraw's)
            if self.failed is None:
                try:
                    redraw()
                except Exception as exc:  # noqa: BLE001 - kept for the caller to say (_SafeDisplay), redraws end
                    self.failed = exc

        self.live.refresh = refresh  # type: ignore[method-assign]

    def make_tasks_table(self, tasks):
        self.columns = tuple(fit_progress_columns(self._drawn_on.width, tasks[0] if tasks else None))
        return super().make_tasks_table(tasks)


#: What a progress line calls each stage of a fit from column blocks (a progress dict's ``stage``).
COLUMN_STAGES = {"adam": "Adam steps", "lbfgs": "L-BFGS by passes", "sketch": "rounds of sketches"}


def progress_phase(info: dict) -> str:
    """The progress line's words beside the bar for a progress dict: the start that runs (``start
    identity``), or, from column blocks, the stage and the passes over the columns so far (``rounds of
    sketches, 3.5 passes``: it said ``start columns``, of no start of that name, through every stage).

    Examples
    --------
    >>> progress_phase({"start": "identity"}), progress_phase({"start": "columns", "stage": "lbfgs", "epochs": 12.5})
    ('start identity', 'L-BFGS by passes, 12 passes')
    """
    stage, start = info.get("stage"), info.get("start")
    if stage:
        epochs = info.get("epochs")
        if epochs is None:
            return COLUMN_STAGES.get(stage, stage)
        passes = f"{epochs:.1f}" if epochs < 10 else f"{epochs:,.0f}"
        return f"{COLUMN_STAGES.get(stage, stage)}, {passes} passes"
    return f"start {start}" if start else ""


def quiet_update(info: dict) -> None:
    """The progress callback when no bar is shown."""


quiet_update.describe = lambda what: None  # type: ignore[attr-defined]
quiet_update.relabel = lambda what: None  # type: ignore[attr-defined]
quiet_update.coarse = True  # type: ignore[attr-defined]


def method_announcer(progress: Any, names: list[str]) -> Callable[[Any], None]:
    """An ``on_result`` hook that names, on the progress bar, the method a comparison fits next
    (in its fitting order: closed-form methods first), then "scoring" — so a closed-form method
    that reports no iterations, or the scoring pass of a matrix compared from its columns, is
    not shown as a bar stuck at "it 0".  Its ``starting`` (called by
    :func:`~sfapprox.comparison.run_all` as each method starts) names that method: the first
    is not named before it starts (a kernel of 8,000 points formed for 27 s under "tsvd").
    Its ``budget_starting``
    (called by :func:`~sfapprox.sweep.sweep` as each budget starts) puts "budget 2/10 (18,000)" before
    the method's name and starts the methods again: a sweep's bar named the method alone, the same at
    every budget, and a budget's scoring pass under the next budget's first method."""
    from ._base import run_order  # (the registry's; lazily: the CLI's start loads no numpy)

    order = run_order(names)
    done: set[str] = set()

    def on_result(result: Any) -> None:
        done.add(result.method)
        left = [m for m in order if m not in done]
        progress.describe(left[0] if left else "scoring")

    def starting(name: str) -> None:
        progress.describe(name)

    def budget_starting(value: int, index: int, count: int) -> None:
        done.clear()
        relabel = getattr(progress, "relabel", None)
        if callable(relabel):
            relabel(f"budget {index}/{count} ({value:,})")

    on_result.starting = starting  # type: ignore[attr-defined]
    on_result.budget_starting = budget_starting  # type: ignore[attr-defined]
    return on_result


def on_terminal(console: Console) -> bool:
    """Whether ``console`` writes to a terminal: rich's ``is_terminal``, and its stream a terminal indeed.

    ``FORCE_COLOR`` (set for colours in CI logs) makes rich take a pipe for a
    terminal: a progress bar was drawn into the log, a line per refresh with
    the cursor hidden, and the tables were cut to 80 columns there.
    """
    isatty = getattr(console.file, "isatty", None)
    try:
        return console.is_terminal and isatty is not None and isatty()
    except ValueError:  # closed
        return False


def stderr_console() -> Console:
    """The console :func:`shown_progress` draws on by default: rich's on stderr (in a notebook, rich's
    display through IPython)."""
    return Console(stderr=True)


#: The warning where a notebook has no ipywidgets, in the library's words (:func:`draws_bar`).
NO_WIDGETS = ("progress=True draws its bar in a notebook with ipywidgets: pip install ipywidgets "
              "(the fit runs without a bar)")


def draws_bar(console: Console, *, no_widgets: str = NO_WIDGETS) -> bool:
    """Whether a progress line can be drawn on ``console``: a Jupyter notebook's output (rich draws it
    there through IPython, in an ipywidgets output), or a terminal it can redraw its line on (not a
    dumb one, not a pipe or a file: a log got a line per redraw).

    Parameters
    ----------
    console : Console
        Where the line would be drawn.
    no_widgets : str, default NO_WIDGETS
        The warning in a notebook without ipywidgets, in the words of who asked: the library's names
        ``progress=True``, which a CLI user never typed.
    """
    if console.is_jupyter:
        return _has_widgets(no_widgets)
    return console.is_interactive and on_terminal(console)


def _has_widgets(no_widgets: str) -> bool:
    """Whether ipywidgets, rich's live display in a notebook, can be imported; the warning ``no_widgets``
    says what to install where not (rich itself warned at every redraw, and drew nothing)."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is None:
        warnings.warn(no_widgets, stacklevel=user_stacklevel())
        return False
    return True


class _SafeDisplay:
    """A :func:`fit_display` whose every call is guarded: the first failure (a closed stream, a widget
    gone) warns once and closes the display; the fit goes on without it.  Only ``Exception`` is
    caught: a Ctrl-C inside a redraw stops the fit, as anywhere else."""

    def __init__(self, label: str, total: int | None, console: Console, time_limit: float | None) -> None:
        self._context: contextlib.AbstractContextManager | None = fit_display(label, total, console=console,
                                                                              time_limit=time_limit)
        self._update: Any = None
        try:
            self._update = self._context.__enter__()
        except Exception as exc:
            self._context = None
            self._dropped(exc)

    def _dropped(self, exc: Exception) -> None:
        warnings.warn(f"progress display stopped ({type(exc).__name__}: {exc}); the fit goes on without it",
                      RuntimeWarning, stacklevel=user_stacklevel())

    def _call(self, name: str | None, *args: Any) -> None:
        update = self._update
        if update is None:
            return
        try:
            (update if name is None else getattr(update, name))(*args)
            failed = update.failed()  # (a redraw on rich's own thread that failed since)
            if failed is not None:
                raise failed
        except Exception as exc:
            self._update = None
            self._dropped(exc)
            self.close()

    def __call__(self, info: dict) -> None:
        self._call(None, info)

    def describe(self, what: str) -> None:
        self._call("describe", what)

    def relabel(self, what: str) -> None:
        self._call("relabel", what)

    def phase(self, text: str) -> None:
        self._call("phase", text)

    def close(self) -> None:
        """Clear the line (once; a failure there is dropped too: the fit's own exception, if any, is the
        one that propagates)."""
        context, self._context, update, self._update = self._context, None, self._update, None
        failed = None if update is None else update.failed()  # (a redraw on rich's thread after the last call)
        if failed is not None:
            self._dropped(failed)
        if context is not None:
            with contextlib.suppress(Exception):
                context.__exit__(None, None, None)


class _ShownCallback:
    """The progress callback of a call with ``progress=True``: each report drawn on the display, then
    given to the caller's own ``callback`` (whose return value, a request to stop, is returned).

    Coarse (one call per run of iterations) only where the caller's callback is
    too, or there is none.  A fit keeps its callback; pickled, this one keeps
    the caller's callback alone (``display`` None: a live display does not
    pickle, and a fit unpickled elsewhere has no line to draw on).
    """

    def __init__(self, display: _SafeDisplay | None, callback: Callable[[dict], Any] | None) -> None:
        self.display, self.callback = display, callback
        self.coarse = callback is None or coarse_progress(callback)

    def __call__(self, info: dict) -> Any:
        if self.display is not None:
            self.display(info)
        return None if self.callback is None else self.callback(info)

    def phase(self, text: str) -> None:
        if self.display is not None:
            self.display.phase(text)
        shows = getattr(self.callback, "phase", None)
        if callable(shows):
            shows(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return _ShownCallback, (None, self.callback)


def _shown_on_result(display: _SafeDisplay, names: list[str], on_result: Callable[..., Any] | None) -> Callable[..., Any]:
    """The ``on_result`` of a call with ``progress=True``: the display names the method that runs
    (:func:`method_announcer`), then the caller's ``on_result`` has the row; the hooks
    (``starting``, ``budget_starting``) reach both."""
    announce = method_announcer(display, names)

    def shown(*args: Any) -> Any:
        announce(args[-1])  # (a sweep's on_result has the budget first)
        return None if on_result is None else on_result(*args)

    for hook in ("starting", "budget_starting"):
        own = getattr(on_result, hook, None)
        setattr(shown, hook, _both(getattr(announce, hook), own if callable(own) else None))
    return shown


def _both(first: Callable[..., Any], then: Callable[..., Any] | None) -> Callable[..., None]:
    def both(*args: Any) -> None:
        first(*args)
        if then is not None:
            then(*args)
    return both


def display_label(matrix: Any) -> str:
    """What a progress line calls ``matrix``: its ``name`` (a loaded matrix, a source), a file's name,
    or "matrix" (an array has none).

    Examples
    --------
    >>> display_label("data/mesh.mtx"), display_label(object())
    ('mesh.mtx', 'matrix')
    """
    name = getattr(matrix, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(matrix, (str, os.PathLike)):
        return os.path.basename(os.fspath(matrix)) or "matrix"
    return "matrix"


@contextlib.contextmanager
def shown_progress(progress: bool, label: str, total: int | None, *, callback: Callable[[dict], Any] | None = None,
                   on_result: Callable[..., Any] | None = None, names: list[str] | None = None,
                   time_limit: float | None = None, console: Console | None = None) -> Iterator[tuple[Any, Any]]:
    """The ``callback`` and ``on_result`` a call with ``progress`` runs with: the caller's own, and, with
    ``progress`` true, a progress line drawn from them on stderr, cleared when the block ends (an
    exception or a Ctrl-C included).

    Parameters
    ----------
    progress : bool
        Whether to draw the line.  False yields ``callback`` and ``on_result``
        unchanged (no display started).
    label : str
        What the line begins with (the matrix's name; the method's is added).
    total : int or None
        The iterations that fill the bar (``FitSettings.max_iter``).
    callback, on_result : callable or None
        The caller's own; each report and row reaches them after the display.
    names : list of str or None
        The methods a comparison runs, in the order given (the line names
        each as it starts, closed-form ones included); None: ``on_result`` is
        not wrapped (a fit of SF alone).
    time_limit : float or None
        Seconds that fill the bar, where they come before ``total``.
    console : rich Console, optional
        Where to draw; by default a console on stderr.  Where it is neither a
        terminal nor a notebook (a pipe, a file) nothing is drawn.

    Yields
    ------
    (callback, on_result)
        What the call passes on to its fits.
    """
    if not isinstance(progress, bool):  # progress="no" drew a bar
        raise ParameterError(f"progress must be True or False; got {progress!r}")
    if not progress:
        yield callback, on_result
        return
    console = stderr_console() if console is None else console
    if not draws_bar(console):
        yield callback, on_result
        return
    display = _SafeDisplay(label, total, console, time_limit)
    try:
        yield (_ShownCallback(display, callback),
               on_result if names is None else _shown_on_result(display, names, on_result))
    finally:
        display.close()
