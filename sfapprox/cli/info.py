"""`sfapprox info`: what was loaded, SF's structure and budget, and where each method applies."""

from __future__ import annotations

from .._errors import ParameterError
from ..formats import fact_text
from . import _options as o
from ._app import app, error_boundary, read_matrix, show_notes
from ._render import check_outputs, emit, human_console, show_key_values, write_outputs, writes_glyphs


@app.command()
@o.options(o.LOAD, o.output_group("description as JSON (what the summary and the table show)"))
def info(
    path: o.MatrixPath,
    *,
    load,
    outputs,
) -> None:
    """Show a matrix's shape, entries, symmetry, sign, SF's budget and where each method applies.

    Given a saved fit (a factors file from fit --out), show what it holds and how it was made.

    Example: sfapprox info graph.net --json -
    """
    with error_boundary():
        # here, not at the top: --help loads no numpy (tests/test_cli_terminal.py)
        from ..describe import describe, describe_factors, describe_weights
        from ..factors import is_factors_file

        check_outputs(outputs, inputs=[path])
        weights = load.format or _weights_format(path)
        if is_factors_file(path):
            _no_load_options(load, path)
            report, title, loaded = describe_factors(path), path.name, None
        elif weights in ("safetensors", "torch") and load.var is None:
            _no_load_options(load, path, "a model's weights file lists its tensors as they are (--var NAME "
                                         "reads one as a matrix)")
            report, title, loaded = describe_weights(path, weights), path.name, None
        else:
            loaded = read_matrix(path, load)
            report, title = describe(loaded, max_memory=load.max_memory), loaded.name
        # the summary goes where the tables go: stderr when stdout carries --json - (it was left out)
        console = human_console(outputs)
        show_key_values(console, title, [(k, fact_text(v)) for k, v in report.facts], ascii=not writes_glyphs(console))
        if loaded is not None:
            show_notes(loaded)
        if loaded is None and weights not in ("safetensors", "torch"):
            # a saved fit: its facts table is for the files (--csv, ...); the summary above shows them
            write_outputs(report.tables, report.data, outputs)
        else:
            emit(report.tables, report.data, outputs)


def _weights_format(path) -> str | None:
    """``"safetensors"`` or ``"torch"`` for a weights file (by its extension, as a matrix file's format is
    detected: a Lightning ``.ckpt`` was read as a matrix, with ``--var``, and refused without), else None."""
    from ..io import format_extensions

    suffix = path.suffix.lower()
    return next((key for key in ("safetensors", "torch") if suffix in format_extensions(key)), None)


def _no_load_options(load, path, what: str = "a saved fit is read as it is") -> None:
    """Refuse the options that say how to read a matrix for a file that is described as it is: a saved
    fit, a model's weights file (``info fit.h5 --kernel rbf`` ran and ignored the kernel)."""
    from .._settings import LoadOptions

    default = LoadOptions()
    given = [name for name in vars(default) if name not in ("max_memory", "extra", "format")
             and getattr(load, name) != getattr(default, name)]
    if given or load.extra:
        names = ", ".join("--" + name.replace("_", "-") for name in [*given, *load.extra])
        raise ParameterError(f"{path}: {what}; {names} appl{'ies' if len(given) + len(load.extra) == 1 else 'y'} "
                             "to matrix files (leave it out)")
