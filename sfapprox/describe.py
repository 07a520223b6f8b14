"""What a matrix is and what each method can do with it (``sfapprox info``, as a library call)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from scipy.sparse.linalg import LinearOperator

from ._base import RunContext, lacking, least_columns_limit, methods
from ._errors import parameter, reader
from ._params import MEMORY_LIMIT
from ._settings import COUNT_INDICES, FitSettings
from ._validation import format_bytes, memory_limit
from .budget import sf_count, sf_structure, sparse_count, tsvd_count, tsvd_rank_for_budget
from .comparison import MatrixInput, as_loaded_matrix, formable, formed_need, opened_input, recipe_text
from .factors import load_factors
from .formats import (Column, OutputFormat, ShownAsTables, Table, counted, fact_text, fmt_seconds, printable, render_html,
                      shape_text)
from .sources import MatrixSource, as_source

__all__ = ["MatrixDescription", "describe", "describe_factors", "describe_weights", "describe_methods",
           "describe_formats"]


@dataclass(repr=False)  # its own __repr__: every cell of every table was 8,000 characters
class MatrixDescription(ShownAsTables):
    """Facts about a matrix (or a file), its tables and the same as a JSON dict.

    In a notebook it shows as ``sfapprox info`` does (``_repr_html_``: the facts, then the tables);
    its ``repr`` gives the tables' titles and the main facts in a few lines; :meth:`to_frame` gives the
    tables' rows as a pandas DataFrame, the values of ``sfapprox info --csv``: for :func:`describe`, a
    row per method (its smallest budget, the share of N², why it never applies); for
    :func:`describe_factors`, a row per fact; a leading ``table`` column (the title) where there are
    several tables (:func:`describe_formats`).

    Attributes
    ----------
    facts : list of (str, object)
        Label/value pairs, shown one a line by ``sfapprox info``.
    tables : list of Table
        The tables shown under the facts (e.g. where each method applies).
    data : dict
        The JSON record (``--json``).
    """

    facts: list[tuple[str, Any]]
    tables: list[Table]
    data: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        """A few lines: each table's title and rows, then the main facts (:data:`HEADLINE_FACTS`, else the
        first :data:`REPR_FACTS`) and how many there are.

        Examples
        --------
        >>> import numpy as np
        >>> describe(np.eye(36))  # doctest: +ELLIPSIS
        MatrixDescription: X: where each method applies (N² = 1,296) (... rows)
          size 36 x 36; stored entries 36 (2.78% of N²); symmetric yes; sign non-negative;
          SF stored numbers N·K·M 1,512 (116.67% of N²) (13 facts)
        """
        lines = [f"MatrixDescription: {t.title} ({len(t.rows):,} row{'' if len(t.rows) == 1 else 's'})"
                 for t in self.tables] or ["MatrixDescription"]
        headline = [(k, v) for k, v in self.facts if k in HEADLINE_FACTS] or self.facts[:REPR_FACTS]
        if headline:
            lines.append("  " + "; ".join(f"{k} {fact_text(v)}" for k, v in headline)
                         + f" ({len(self.facts)} fact{'' if len(self.facts) == 1 else 's'})")
        return printable("\n".join(lines))

    def _repr_html_(self) -> str:  # its own: the facts come first, and a saved fit's only once
        """As ``sfapprox info`` shows it, in HTML for a notebook (:func:`~sfapprox.formats.render_html`):
        the facts, then the tables (a saved fit's facts once: its table of them is for the files)."""
        facts = [(k, fact_text(v)) for k, v in self.facts]
        return render_html([t for t in self.tables if not _repeats_facts(t, self.facts)], facts)

    def _shown_tables(self) -> list[Table]:
        """The tables :meth:`to_frame` flattens: those of ``sfapprox info --csv``."""
        return self.tables


#: The facts a description's ``repr`` gives, where it has them (a matrix's, a saved fit's, a source's);
#: the others are in ``facts`` and its HTML.
HEADLINE_FACTS = ("size", "stored entries", "symmetric", "sign", "SF stored numbers N·K·M", "holds", "stored numbers",
                  "relative error", "source", "in a comparison")
#: The facts a description's ``repr`` gives where it has none of :data:`HEADLINE_FACTS`.
REPR_FACTS = 4


def _repeats_facts(table: Table, facts: list[tuple[str, Any]]) -> bool:
    """Whether ``table`` is the facts again (a saved fit's, for its files: ``info`` shows them once)."""
    return bool(facts) and [row.get("what") for row in table.rows] == [k for k, _ in facts]


#: How a matrix property a method needs (:attr:`~sfapprox._base.MethodSpec.needs`) reads in a sentence.
def _never_why(method: str, n: int) -> str | None:
    """Why ``method``, whatever the matrix's properties, applies at no budget at this ``n`` (its smallest budget
    None), in a few words beside "never"; None where that is not known.  The butterfly support's size is the one
    such rule (its row said "never" alone where Nyström's said "never (X is not symmetric)").

    Examples
    --------
    >>> _never_why("sf-butterfly", 30), _never_why("sf-butterfly", 1), _never_why("sf", 30)
    ('N is not a power of two', 'N is below 2', None)
    """
    from .chord import check_butterfly_size
    from ._errors import ParameterError
    from .sf.methods import SF_METHODS

    if SF_METHODS.get(method, ("",))[0] != "butterfly":
        return None
    try:
        check_butterfly_size(n)
    except ParameterError:
        return "N is not a power of two" if n >= 2 else "N is below 2"
    return None


_FACT_WORDS = {"nonnegative": "non-negative", "psd": "positive semi-definite"}

#: A saved fit's record keys that are seconds: shown as every table shows seconds (:func:`fmt_seconds`).
_SECONDS = ("seconds", "fit_seconds")


def describe(matrix: MatrixInput, *, count_indices: bool = COUNT_INDICES,
             max_memory: int | str | None = None) -> MatrixDescription:
    """Describe a matrix: shape, storage, symmetry, sign, SF's reference structure and budget,
    and the smallest budget at which each registered method applies.

    Parameters
    ----------
    matrix : LoadedMatrix, MatrixSource, path or array
        The square matrix; a path is opened as ``sfapprox info`` opens it
        (:func:`~sfapprox.io.open_matrix` with the default reading options,
        within ``max_memory``: a sparse file whose dense form is over it is kept
        sparse, a ``.npy`` too big to load is mapped).  A source is not formed
        to be described.
    count_indices : bool, default=True
        Charge sparse entries for their positions (changes RPCA's and sf+s's smallest budget).
    max_memory : int, str or None, default=None
        The memory limit in bytes (or a size such as ``"4G"``, as ``--max-memory``
        reads it) a comparison would run under (decides
        whether a matrix source would be formed or compared from columns), and the
        limit of the copies made here (a file read, an array's float64 copy);
        None: the default limit (80% of RAM).

    Returns
    -------
    MatrixDescription
        The facts, the table of methods, and ``data`` with keys ``"matrix"``,
        ``"sf"``, ``"tsvd_rank_at_sf_budget"``, ``"methods"`` and ``"notes"``.

    Examples
    --------
    >>> import numpy as np
    >>> d = describe(np.eye(36))
    >>> d.data["sf"]["count"], d.data["methods"]["tsvd"]["min_budget"]
    (1512, 73)
    """
    max_memory = MEMORY_LIMIT.to_bytes(max_memory)  # bytes: the limit is compared and reported below
    if isinstance(matrix, (str, os.PathLike)):
        # opened as info opens it, within the limit given: read under the default limit, a file over the
        # given one was formed whole; load_matrix under it refused a sparse file whose dense form is over it
        matrix = opened_input(matrix, None, max_memory)
    if isinstance(matrix, LinearOperator):  # known by its products, as compare reads it (it was "object dtype")
        matrix = as_source(matrix)
    if isinstance(matrix, MatrixSource):
        loaded, summary = None, matrix.summary()
        facts: list[tuple[str, Any]] = _source_facts(matrix, max_memory)
    else:
        loaded = as_loaded_matrix(matrix, None, max_memory)  # its copies within the limit given
        summary = loaded.summary()
        facts = [
            ("file", summary.get("path") or "(array)"),
            ("format", summary["format"]),
            ("size", f"{summary['n']:,} x {summary['n']:,}"),  # as a source's: 1,200 x 1,200
            ("stored entries", f"{summary['nnz']:,} ({100 * summary['density']:.2f}% of N²)"),
            ("storage", "sparse" if loaded.is_sparse else "dense"),
            ("symmetric", "yes" if summary["symmetric"] else "no"),
            ("sign", "non-negative" if summary["nonnegative"] else "has negative entries"),
            ("values", f"min {summary['min']:.4g}, max {summary['max']:.4g}, ‖X‖_F {summary['fro_norm']:.4g}"),
            ("sha256", summary.get("sha256") or "–"),
        ]
    name = matrix.name if loaded is None else loaded.name
    n = summary["n"]
    ref = sf_structure(n)
    count = sf_count(n)
    dense = n * n
    rank = tsvd_rank_for_budget(n, count)
    facts += [
        ("SF factors M", ref.n_factors),
        ("SF offsets (K)", f"{ref.n_offsets} per row"),
        ("SF stored numbers N·K·M", f"{count:,} ({100 * count / dense:.2f}% of N²)"),
        ("TSVD rank at that budget", f"{rank} ({tsvd_count(n, rank):,} numbers)"),
    ]
    context = RunContext(count_indices=count_indices)
    streamed = loaded is None and not formable(matrix, max_memory)
    columns = [Column("method", "method", "left"), Column("stores", "stores", "left", wrap=True),
               # wraps: "never (X is not non-negative)" kept whole took 29 columns of a 40-column window, and
               # the method names folded ("butterfly" over "-hier", read as the method butterfly)
               Column("min_budget", "smallest budget", wrap=True), Column("share", "% of N²", priority=10)]
    if loaded is None:
        # for a matrix not formed, whether each method runs is the point of the table: never left out
        columns.append(Column("runs", "runs" if streamed else "from columns", "left", wrap=True if streamed else None,
                              priority=None if streamed else 20))
    table = Table(f"{name}: where each method applies (N² = {dense:,})",
                  columns + [Column("summary", "what", "left")])
    per_method: dict[str, Any] = {}
    above_default = False
    for method, spec in methods().items():
        need = spec.min_budget(n, context)
        # a property the matrix lacks rules the method out whatever the budget (Nyström, NMF)
        # (the first one it lacks: a matrix that is not symmetric is not PSD either, and the cell stays short)
        lacks = [_FACT_WORDS.get(fact, fact) for fact in lacking(spec, summary)][:1]
        if lacks:
            need = None
        runs = _runs(spec, matrix, need, count, lacks, max_memory, streamed=streamed) if loaded is None else None
        why = f"X is not {' and '.join(lacks)}" if lacks else _never_why(method, n) if need is None else None
        above_default = above_default or (streamed and need is not None and need > count)
        per_method[method] = {"stores": spec.stores, "min_budget": need, "summary": spec.summary,
                              "from_columns": "columns" in spec.access,
                              **({"from_columns_under_limit": runs == "yes"} if streamed else {}),
                              # the table's "runs" / "from columns" cell: why not, and what it would need
                              **({"runs": runs} if loaded is None else {}),
                              **({"not_applicable": why} if why else {})}
        table.add({"method": method, "stores": formula_cell(spec.stores),
                   "min_budget": f"never ({why})" if why else "never" if need is None else f"{need:,}",
                   "share": "–" if need is None else f"{100 * need / dense:.1f}%",
                   "runs": runs, "summary": spec.summary},
                  # CSV's values: the count without separators, the share unrounded, and why a method never
                  # applies in a column of its own (its budget's cell said "1,512", "93.8%", "never (...)")
                  data={"min_budget": need, "share": None if need is None else 100 * need / dense,
                        "not_applicable": per_method[method].get("not_applicable")})
    table.data_titles = {"not_applicable": "not applicable"}
    if above_default:
        # the option as its reader passes it: a Python caller has no --budget to type (budget= is compare's)
        table.notes.append(f"runs: at the budget a comparison takes by default, SF's {count:,} "
                           f"({parameter('budget')} sets another)")
    if count > dense:
        table.notes.append(f"SF's reference structure stores {count:,} numbers, more than the dense "
                           f"matrix's {dense:,}: at this size storing X itself is cheaper")
    nnz = summary.get("nnz")
    # the count compare's verdict quotes, CSR's row pointers charged: info's "values + positions ... 152
    # numbers" sat beside compare's "holds it exactly in 177 numbers" for the same matrix
    if nnz is not None and sparse_count(n, nnz) < count:
        table.notes.append(f"X has {nnz:,} non-zeros: plain sparse storage ('sparse', CSR: a value and a column "
                           f"index each, and N + 1 row pointers) holds it exactly in {sparse_count(n, nnz):,} "
                           "numbers, less than SF's budget")
    if loaded is None:  # the table's "in a comparison" row: formed, or from columns (and what forming needs)
        summary = {**summary, "in_a_comparison": "columns" if streamed else "formed",
                   "formed_need": formed_need(matrix), "max_memory": memory_limit(max_memory)}
    data = {"matrix": summary, "sf": {"n_factors": ref.n_factors, "n_offsets": ref.n_offsets, "count": count,
                                      "share_of_dense": count / dense},
            "tsvd_rank_at_sf_budget": rank, "methods": per_method, "notes": table.notes}
    return MatrixDescription(facts, [table], data)


def _runs(spec, source: MatrixSource, need: int | None, default: int, lacks: list[str], max_memory: int | None, *,
          streamed: bool) -> str:
    """``info``'s word on a method for a matrix source: its "runs" cell where a comparison fits from columns
    (``streamed``), its "from columns" cell where a comparison forms the matrix.

    What a comparison at its default budget (SF's, ``default``) does: "yes", or "no: ..." with why. The
    cell said "yes" from memory alone, where the comparison then refused Nyström for a matrix that is not
    symmetric, or Monarch for a budget below its least (``need``). A method's memory is looked at for a
    matrix not formed only (one formed is fitted in memory), at ``max(need, default)``: the least budget
    it runs at.
    """
    if lacks:  # refused whatever the budget and the memory ("not applicable")
        return f"no: X is not {' and '.join(lacks)}"
    if "columns" not in spec.access:
        return "no: needs it formed" if streamed else "–"
    if not streamed:
        return "yes"
    if need is None:
        return "no: at no budget"
    wants = [f"a budget ≥ {need:,}"] if need > default else []
    limit = memory_limit(max_memory)
    least = None if limit is None else _least_columns_memory(spec, source, max(need, default))
    if least is not None and least > limit:  # as a comparison would refuse it (:func:`least_columns_limit`)
        # a size either reader can pass: --max-memory '11.2 MiB' (quoted for the shell), or max_memory='11.2 MiB'
        wants.append(parameter("max_memory", format_bytes(least, up=True)))
    return f"no: needs {' and '.join(wants)}" if wants else "yes"


def _least_columns_memory(spec, source: MatrixSource, budget: int) -> int:
    """The smallest memory limit under which ``spec`` (a method that works from columns) fits from
    ``source``'s columns at ``budget``."""
    if spec.columns_memory is not None:
        return least_columns_limit(spec, source, budget)
    # SF sizes its own fit from columns: the budget's whole structure (with no time limit to fit it in,
    # nothing is compiled or timed to choose fewer factors)
    untimed = RunContext(FitSettings(time_limit=None))
    return spec.make(source.n, budget, untimed).least_columns_limit(source)


def _source_facts(source: MatrixSource, max_memory: int | None) -> list[tuple[str, Any]]:
    """What ``info`` says of a source: what it is, its size formed, whether it fits, its parameters."""
    limit = memory_limit(max_memory)
    facts: list[tuple[str, Any]] = [("source", source.kind), ("size", f"{source.n:,} x {source.n:,}"),
                                    ("formed", f"{format_bytes(source.formed_bytes)} dense float64"),
                                    ("in a comparison", "formed in memory" if formable(source, max_memory) else
                                     f"from columns (it and its scoring, {format_bytes(formed_need(source))}, "
                                     f"would pass the memory limit"
                                     f"{f' of {format_bytes(limit)}' if limit else ''})")]
    summary = source.summary()
    if summary.get("nnz") is not None:  # a matrix held sparse: its stored entries and values, as a loaded one's
        facts += [("stored entries", f"{summary['nnz']:,} ({100 * summary['density']:.2g}% of N²)"),
                  ("values", f"min {summary['min']:.4g}, max {summary['max']:.4g}, ‖X‖_F {summary['fro_norm']:.4g}")]
    for key, value in source.recipe.items():
        if key not in ("kind", "nnz"):
            facts.append((key.replace("_", " "), _shape_text(value)))
    for key in ("symmetric", "psd", "nonnegative"):
        value = getattr(source, key)
        facts.append(({"psd": "positive semi-definite", "nonnegative": "non-negative"}.get(key, key),
                      "unknown" if value is None else "yes" if value else "no"))
    return facts


def _shape_text(value: Any) -> Any:
    """A recipe's shape (a kernel's points, ``[12000, 8]``) as the size is shown, ``12,000 x 8``; anything else
    as it is.

    Examples
    --------
    >>> _shape_text([12000, 8]), _shape_text("rbf"), _shape_text([True, 2])
    ('12,000 x 8', 'rbf', [True, 2])
    """
    if isinstance(value, (list, tuple)) and value and all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        return " x ".join(f"{d:,}" for d in value)
    return value


def describe_weights(path, fmt: str) -> MatrixDescription:
    """The tensors of a network's weights file (``.safetensors``, ``.pt``), the square ones marked.

    Parameters
    ----------
    path : str or os.PathLike
        The weights file.
    fmt : {"safetensors", "torch"}
        Its format key.

    Returns
    -------
    MatrixDescription
        One table row per tensor (name, shape, dtype, square); ``data["tensors"]``.

    Examples
    --------
    >>> import tempfile, os, torch
    >>> p = os.path.join(tempfile.mkdtemp(), "w.pt")
    >>> torch.save({"attn.q": torch.ones(4, 4), "bias": torch.ones(4)}, p)
    >>> [row["name"] for row in describe_weights(p, "torch").tables[0].rows]
    ['attn.q', 'bias']
    """
    from .io import list_weights  # here: sfapprox.io loads h5py and Pillow

    tensors = list_weights(path, fmt)
    # dtype gives way first in a narrow window: a model's long names (language_model.model.layers.31.
    # self_attn.q_proj.weight) with all four columns split the table in two parts, the square marks
    # a whole listing below their names
    # the options as the reader passes them: describe_weights is a library call too (var='NAME', not --var NAME)
    table = Table(f"{os.path.basename(os.fspath(path))}: its tensors ({parameter('var', shown=_NAME)} picks a square one)",
                  [Column("name", "name", "left"), Column("shape", "shape"),
                   Column("dtype", "dtype", "left", priority=10), Column("square", "square", "left")])
    for t in tensors:
        table.add({"name": t["name"], "shape": shape_text(t["shape"]), "dtype": t["dtype"],
                   "square": "✓" if t["square"] else ""})
    square = sum(t["square"] for t in tensors)
    counted = f"{len(tensors):,} tensor{'' if len(tensors) == 1 else 's'}, {square:,} square"
    table.terminal_rows, table.terminal_notes = _listed_tensors(tensors)
    # a command to type, or a call: each is more than the option alone
    use = "sfapprox compare FILE --var NAME" if reader() == "cli" else f"sfapprox.load_matrix(FILE, var={_NAME})"
    unread = [t for t in tensors if t.get("unread")]
    needs = "a square one" + (" of values it reads" if unread else "")
    table.notes.append(f"{counted}: each one is a matrix sfapprox can approximate ({use})"
                       if square else f"{counted}: no matrix here that sfapprox can approximate (it needs {needs})")
    if unread:  # square, but not counted: said, so that a missing mark is not taken for a wrong shape
        shown = "; ".join(f"{t['name']} {t['unread']}" for t in unread[:5])
        table.notes.append(f"not counted, square but not read as a matrix: {shown}"
                           + (f"; and {len(unread) - 5} more" if len(unread) > 5 else ""))
    moments = [t["name"] for t in tensors if t["square"] and t.get("optimizer")]
    if moments:  # square and read, but a training run's optimizer state: not taken for the model's weights
        table.notes.append(f"{len(moments)} of the square ones {'is' if len(moments) == 1 else 'are'} an optimizer's "
                           f"state ({', '.join(moments[:3])}{', ...' if len(moments) > 3 else ''}): not among the "
                           f"weights a manifest's var = \"*\" runs; {parameter('var', shown=_NAME)} reads one all the same")
    tied = [t for t in tensors if t.get("same_as")]
    if tied:
        table.notes.append(_tied_note(tied))
    facts = [("file", os.fspath(path)), ("format", fmt), ("tensors", len(tensors)), ("square matrices", square)]
    return MatrixDescription(facts, [table], {"tensors": tensors})


def _tied_note(tied: list[dict[str, Any]], most: int = 3) -> str:
    """The note on tensors that are another under a second name (tied weights): one matrix, listed twice."""
    shown = "; ".join(f"{t['name']} is {t['same_as']}" for t in tied[:most])
    more = f"; and {len(tied) - most:,} more" if len(tied) > most else ""
    return (f"tied: {counted(len(tied), 'tensor')} {'is' if len(tied) == 1 else 'are'} another one's values under a "
            f"second name (one storage): {shown}{more}; a manifest's var = \"*\" runs each matrix once")


#: A weights file of more tensors than this is listed on a terminal by its square ones, at most this many:
#: a model's 10,000 tensors drawn took 4 s and scrolled the summary away (every other format lists all).
TENSORS_SHOWN = 100


def _listed_tensors(tensors: list[dict[str, Any]]) -> tuple[list[int] | None, list[str]]:
    """The rows a terminal lists of a weights file's ``tensors`` (None: every one, up to
    :data:`TENSORS_SHOWN`), and the note that says what it leaves out and where every tensor is."""
    if len(tensors) <= TENSORS_SHOWN:
        return None, []
    square = [i for i, t in enumerate(tensors) if t["square"]]
    rows = (square or list(range(len(tensors))))[:TENSORS_SHOWN]
    if not square:
        shown, left = f"the first {len(rows):,} tensors (none is square)", f"{len(tensors) - len(rows):,} more"
    else:
        shown = (f"the {len(square):,} square tensors" if len(rows) == len(square) else
                 f"the first {len(rows):,} of the {len(square):,} square tensors")
        others = len(tensors) - len(square)
        left = " and ".join([*([f"{len(square) - len(rows):,} more square"] if len(square) > len(rows) else []),
                             *([f"{others:,} that {'is' if others == 1 else 'are'} not square"] if others else [])])
    everything = (f"--json - (or --csv FILE) lists all {len(tensors):,}" if reader() == "cli"
                  else f"the table's rows and data['tensors'] hold all {len(tensors):,}")
    return rows, [f"listed: {shown}; not listed: {left}; {everything}"]


#: A name to give an option, quoted for Python (``var='NAME'``), bare on the command line (``--var NAME``).
_NAME = "'NAME'"
_KEY = "'KEY'"
#: A list of methods as compare takes it: ``methods='NAME,NAME,...'``, ``--methods NAME,NAME,...``.
_NAMES = "'NAME,NAME,...'"


def _resume(path) -> str:
    """How its reader resumes the checkpoint at ``path``: a command (``fit --init f.h5``) or a call."""
    if reader() == "cli":
        return f"`fit --init {path}`"
    return f"`ChordSF(init={os.fspath(path)!r}).fit(X)`"


def describe_factors(path) -> MatrixDescription:
    """Describe a saved fit (:func:`~sfapprox.load_factors` validates it first).

    Parameters
    ----------
    path : str or os.PathLike
        A factors file written by :func:`~sfapprox.save_factors`.

    Returns
    -------
    MatrixDescription
        Its facts as a table; ``data`` holds the kind (``kind``, also as ``method``), operator class, ``n``,
        ``n_stored`` (also as ``nnz``), the recorded fit, source, settings and versions.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from sfapprox import ChordOperator, save_factors
    >>> p = os.path.join(tempfile.mkdtemp(), "f.h5")
    >>> save_factors(p, ChordOperator(np.full((3, 8, 4), 0.25)))
    >>> describe_factors(p).data["n_stored"]
    96
    """
    saved = load_factors(path)
    n, stored = saved.n, saved.n_stored
    fit, source = saved.fit, saved.source
    op = saved.operator
    facts: list[tuple[str, Any]] = [
        ("file", str(path)),
        ("holds", f"a checkpoint of an unfinished {saved.kind} fit ({type(op).__name__}): {_resume(path)} "
                  "resumes it" if fit.get("checkpoint") else f"a saved {saved.kind} fit ({type(op).__name__})"),
        ("size", f"{n:,} x {n:,}"),
        ("stored numbers", f"{stored:,} ({100 * stored / (n * n):.2f}% of N²)"),
    ]
    counted = getattr(op, "count_indices", None)
    sparse = getattr(op, "sparse", None)
    # said where it counts: a tsvd fit's hybrid operator has no sparse entries and the rule's default (False),
    # which info --json gave beside settings that said true
    if not (isinstance(counted, bool) and sparse is not None and sparse.nnz):
        counted = None
    if counted is not None:
        # the count above depends on the rule: compare charges positions, budget.rpca_count by default not
        facts.append(("sparse entries", f"{sparse.nnz:,}, each counted as " + (
            "2 numbers (value and position)" if counted else "1 number (its value alone: count_indices=False)")))
    # the numbers behind the facts shown rounded, by label: a CSV's values (full precision, no separators)
    numbers: dict[str, Any] = {"stored numbers": stored}
    for key, label in (("fro_error", "‖X−X̂‖_F"), ("rel_error", "relative error"),
                       ("running_fro_error", "‖X−X̂‖_F, running estimate (of the last steps' blocks)"),
                       ("iterations", "iterations"), ("stop_reason", "stop reason"), ("seconds", "seconds"),
                       # the fit's whole turn above, the estimator's own clock here (files since fit_seconds)
                       ("fit_seconds", "fit seconds")):
        if fit.get(key) is not None:
            # seconds as fit's table and compare's show them (two decimals: "3.64", where this said "3.64137")
            shown = fmt_seconds(fit[key]) if key in _SECONDS else f"{fit[key]:.6g}" if isinstance(fit[key], float) \
                else fit[key]
            facts.append((label, shown))
            if isinstance(fit[key], float):
                numbers[label] = fit[key]
            if key == "iterations" and _count(fit[key]) is not None and \
                    (_count(fit.get("iterations_before")) or fit.get("kept_start") is True):
                facts[-1] = (label, iterations_words(fit))  # a resume's, or a run that kept its start
    if fit.get("path") == "columns":  # (info said nothing of it: a fit of a matrix too big to form, or limited)
        passes = fit.get("epochs")
        facts.append(("fitted", "from column blocks" + (f" ({passes:.3g} passes over the columns)"
                                                         if isinstance(passes, (int, float)) else "")))
    estimate = fit.get("error_estimate")
    if isinstance(estimate, dict) and isinstance(estimate.get("columns"), int) and not estimate.get("exact"):
        # its errors above are estimates, not exact: said as compare and fit say them
        facts.append(("errors", f"estimated from {estimate['columns']:,} random columns (95% intervals in "
                                "the file's record)"))
    if fit.get("kept_start"):
        facts.append(("note", "the run had not beaten the factors it started from: these are they"))
    if source:
        facts.append(("fitted to", f"{source.get('name', '?')} ({source.get('path') or 'array'})"))
        if source.get("recipe") and ("kind" in source["recipe"] or recipe_text(source["recipe"])):
            # a matrix made from the file (a kernel of its points), or read from it by options: not its table
            recipe = source["recipe"]
            # one the file holds, picked or transformed as it was read (var=, network=): no kind
            facts.append(("the matrix", f"{recipe['kind']} of the file: {recipe_text(recipe)}" if "kind" in recipe
                          else f"read from the file with {recipe_text(recipe)}"))
        if source.get("sha256"):
            facts.append(("its sha256", source["sha256"]))
    if saved.versions:
        facts.append(("written by", ", ".join(f"{k} {v}" for k, v in saved.versions.items())))
    # "method" and "nnz" beside the file's own names ("kind", "n_stored"): what a comparison's rows, a batch's
    # lines and fit --json call the method and its stored numbers
    data = {"kind": saved.kind, "method": saved.kind, "operator": type(op).__name__, "n": n, "n_stored": stored,
            "nnz": stored, "fit": fit, **({"count_indices": counted} if isinstance(counted, bool) else {}),
            "source": source, "settings": saved.settings, "versions": saved.versions,
            "loss_history_length": int(saved.loss_history.size)}
    # the facts as a table of their own, for --csv/--markdown/--latex (those files were empty, "wrote" said)
    table = Table(f"{os.path.basename(os.fspath(path))}: a saved fit",
                  [Column("what", "what", "left"), Column("value", "value", "left")])
    for label, value in facts:
        table.add({"what": label, "value": str(value)}, data={"value": numbers[label]} if label in numbers else None)
    return MatrixDescription(facts, [table], data)


def iterations_words(fit: dict[str, Any]) -> str:
    """A fit's iterations as its table and ``info`` say them (``fit`` its record: ``iterations``, and
    ``iterations_before``, ``init_note`` and ``kept_start`` where they apply).

    A resume's (or its checkpoint's) run counts its own iterations: those it built on are said beside them
    ("1,044" alone read as the whole fit's, of 3,748).  A run that kept its start (it ended worse) made
    none of the factors: its steps are said discarded, and the factors the start's ("30 (+ 300 before the
    resume)" read as 330 iterations behind factors that 300 had made).

    Parameters
    ----------
    fit : dict
        The fit's record: the summary of ``fit --json``, or a saved file's ``fit``.

    Returns
    -------
    str
        E.g. ``"1,044 (+ 2,704 before the resume)"``.
    """
    own, before = fit["iterations"], _count(fit.get("iterations_before"))
    where = "of the start's fit, of another matrix" if fit.get("init_note") else "before the resume"
    if fit.get("kept_start") is True:
        made = f", of {before:,} iterations {where}" if before else ""
        return f"{own:,} (discarded: these factors are the start's{made})"
    return f"{own:,} (+ {before:,} {where})" if before else f"{own:,}"


def _count(value) -> int | None:
    """``value`` where it is a count (a whole number >= 0, not a bool: a record edited by hand may hold
    anything), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def describe_methods() -> MatrixDescription:
    """Every registered method: its name, stored-number formula and what it fits (``sfapprox methods``).

    ``data`` has ``"methods"`` (name -> what it fits), ``"stores"`` (name -> stored-number formula) and
    ``"from_columns"`` (name -> whether it works from column blocks of a matrix never formed).

    Returns
    -------
    MatrixDescription
        Its tables and ``data``, as ``sfapprox methods`` shows them.

    Examples
    --------
    >>> d = describe_methods()
    >>> d.tables[0].rows[0]["name"], "tsvd" in d.data["methods"]
    ('sf', True)
    """
    table = Table(f"methods ({parameter('methods', shown=_NAMES)})", [Column("name", "name", "left"),
                                                        Column("stores", "stores", "left", wrap=True),
                                                        Column("summary", "what", "left")])
    registered = methods()
    for name, spec in registered.items():
        table.add({"name": name, "stores": formula_cell(spec.stores), "summary": spec.summary})
    # "methods" stays name -> summary (scripts read it); the formulas and access beside it
    return MatrixDescription([], [table], {"methods": {name: spec.summary for name, spec in registered.items()},
                                           "stores": {name: spec.stores for name, spec in registered.items()},
                                           "from_columns": {name: "columns" in spec.access
                                                            for name, spec in registered.items()}})


def formula_cell(formula: str) -> str:
    """A stored-number formula as a table shows it: no space around an operator inside parentheses nor around
    a relation, so that a narrow window wraps it between its terms and clauses, never inside one (at 80
    columns ``sfapprox methods`` showed monarch+lr's ``k·(2N +`` over ``1)``).  The JSON keeps the formula as
    the method gives it.

    Examples
    --------
    >>> formula_cell("r·N′·(b₁ + b₂) + k·(2N + 1)")
    'r·N′·(b₁+b₂) + k·(2N+1)'
    >>> formula_cell("r·N′·(b₁ + b₂), N′ = b₁·b₂ ≥ N (2·N·√N at rank 1, b₁ = b₂ = √N)")
    'r·N′·(b₁+b₂), N′=b₁·b₂≥N (2·N·√N at rank 1, b₁=b₂=√N)'
    """
    grouped = re.sub(r"\([^()]*\)", lambda group: re.sub(r"\s*([+−·])\s*", r"\1", group.group(0)), formula)
    return re.sub(r"\s*([=≥≤])\s*", r"\1", grouped)


def describe_formats() -> MatrixDescription:
    """The input formats (``--format`` keys, extensions) and the output formats (``sfapprox formats``).

    Returns
    -------
    MatrixDescription
        ``data`` has ``"inputs"`` (format key -> description and extensions) and
        ``"outputs"`` (the output format names).

    Examples
    --------
    >>> d = describe_formats()
    >>> "mtx" in d.data["inputs"], d.data["outputs"][0]
    (True, 'json')
    """
    from .io import available_formats, format_extensions  # here: sfapprox.io loads h5py and Pillow

    descriptions = available_formats()
    inputs = Table(f"input formats ({parameter('format', shown=_KEY)} overrides the extension)",
                   [Column("key", "key", "left"), Column("extensions", "extensions", "left"),
                    Column("what", "what", "left")])
    for key, text in descriptions.items():
        inputs.add({"key": key, "extensions": " ".join(format_extensions(key)) or "–", "what": text})
    # every table-producing command takes them (tests/test_readme.py checks this list against the CLI)
    outputs = Table("output formats (compare, sweep, info, report, methods, formats, datasets list|verify: "
                    "--json/--csv/--markdown/--latex FILE, '-' for stdout)",
                    [Column("key", "option", "left"), Column("suffix", "suffix", "left")])
    for fmt in OutputFormat:
        outputs.add({"key": f"--{fmt.value}", "suffix": fmt.suffix})
    data = {"inputs": {k: {"extensions": format_extensions(k), "description": d} for k, d in descriptions.items()},
            "outputs": [f.value for f in OutputFormat]}
    return MatrixDescription([], [inputs, outputs], data)

