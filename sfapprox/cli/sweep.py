"""`sfapprox sweep`: every method at every budget (table, JSON/CSV/Markdown/LaTeX, plot)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .._display import method_announcer
from . import _options as o
from ._app import EXIT_INTERRUPTED, announce_start, app, error_boundary, read_matrix, show_notes, stop_cause
from ._render import advise_limits, check_outputs, check_plot, emit, fit_progress, note


@app.command()
@o.options(o.LOAD, o.FIT, o.OUTPUTS)
def sweep(
    path: o.MatrixPath,
    budgets: Annotated[Optional[str], typer.Option("--budgets", help="Comma-separated budgets: fractions of N², counts or 'sf' (default: 0.5 to 3 times the smallest budget at which every method applies).", metavar="LIST", show_default=False, callback=o.lowered)] = None,
    methods: o.Methods = o.DEFAULT_METHODS,
    plot: o.Plot = None,
    count_indices: o.CountIndices = o.COUNT_INDICES_DEFAULT,
    quiet: o.Quiet = False,
    *,
    load,
    settings,
    outputs,
) -> None:
    """Run every method at every budget: rows are budgets, columns methods (relative errors).

    Example: sfapprox sweep graph.net --methods sf,tsvd,rpca --plot sweep.png
    """
    with error_boundary():
        # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
        from .._base import parse_methods
        from ..results import matrix_label
        from ..sweep import beyond_dense, default_budgets, default_budgets_words, parse_budget_list
        from ..sweep import sweep as run_sweep

        names = parse_methods(methods)
        specs = None if budgets is None else parse_budget_list(budgets)
        check_outputs(outputs, inputs=[path])
        outputs = check_plot(plot, outputs.force, outputs, inputs=[path])
        loaded = read_matrix(path, load, quiet)
        show_notes(loaded)
        if specs is None:
            specs = default_budgets(loaded.n, names, count_indices=count_indices)
            listed = ", ".join(f"{int(s):,}" for s in specs)  # thousands separated, as the table's budget column
            note(f"budgets: {listed} ({default_budgets_words(loaded.n, names, count_indices=count_indices)})")
            over = beyond_dense(loaded.n, names, count_indices=count_indices)
            if over:  # capped at N^2, they run at none of them (the note above promised every method)
                needs = ", ".join(f"{m} {need:,}" for m, need in over.items())
                note(f"note: at N = {loaded.n:,} some methods need more stored numbers than the matrix's own "
                     f"{loaded.n ** 2:,} entries ({needs}); budgets are capped there, so they run at none "
                     "(--budgets sf runs SF at its own count)", style="yellow")
        _say_limits(names, len(specs), settings.time_limit)
        label = matrix_label(loaded.name, loaded.recipe)  # the weight --var picked, not the file alone
        with fit_progress(label, settings.max_iter, quiet) as progress:
            # each budget names itself (on_result.budget_starting) and starts the methods again, then "scoring"
            announce = method_announcer(progress, names)

            def on_result(budget: int, row) -> None:
                announce(row)

            on_result.starting = announce.starting  # type: ignore[attr-defined]
            on_result.budget_starting = announce.budget_starting  # type: ignore[attr-defined]
            result = run_sweep(loaded, specs, names, settings=settings, count_indices=count_indices,
                               callback=announce_start(progress, label, quiet), on_result=on_result)
        advise_limits([r for p in result.points for r in p.results],
                      scored_apart=any(p.from_columns for p in result.points))
        tables = result.tables()

        def write_plot() -> None:
            from ..plotting import plot_sweep

            plot_sweep(result, plot, force=outputs.force)
            note(f"wrote {plot}")

        emit(tables, result.to_dict(), outputs, then=[write_plot] if plot is not None else [])
        if any(r.status == "interrupted" for p in result.points for r in p.results):
            # named as fit's and compare's name it: Ctrl-C, or SIGTERM (a `timeout`, a job scheduler)
            note(_stopped_line(stop_cause(), result), style="bold yellow")
            raise typer.Exit(EXIT_INTERRUPTED)


def _say_limits(names: list[str], budgets: int, time_limit) -> None:
    """A note of what the time limits add up to: each budget gives the time limits again (5 default budgets
    at N = 3,000 took 4.7 minutes, and nothing said so before they began)."""
    from ..formats import limit_text
    from ..sweep import limits_seconds

    total = limits_seconds(names, budgets, time_limit)
    if total is None:
        return
    span = f"{limit_text(total / 60)} minutes" if total >= 120 else f"{limit_text(total)} s"
    per = f"{limit_text(total / budgets)} s at each of {budgets} budgets; " if budgets > 1 else ""
    # "add up to", not "take at most": a fit's setup and scoring are outside its limit (a 3 s limit at N = 3,000
    # took 8 s a budget), the closed forms are not cut
    note(f"note: the time limits add up to {span} ({per}"
         "the closed forms, the scoring and each fit's setup come on top; --time-limit SECONDS sets each method's)")


def _stopped_line(cause: str, result) -> str:
    """What a stop left out: the budgets not reached, or none when it came during the last one (it said
    "budgets not reached were skipped" there too, where every budget had its row)."""
    if result.skipped:
        from ..sweep import BUDGETS_LISTED, budgets_text

        every = [p.budget for p in result.points] + list(result.skipped)
        skipped = (", ".join(f"{b:,}" for b in result.skipped) if len(result.skipped) <= BUDGETS_LISTED
                   else budgets_text(result.skipped, every))  # 30 budgets of 40 by their ends, not four lines
        return f"interrupted ({cause}): budgets not reached were skipped ({skipped})"
    return (f"interrupted ({cause}) during the last budget ({result.points[-1].budget:,}): no budget was skipped; "
            "a row marked interrupted holds the best fit found before the stop")
