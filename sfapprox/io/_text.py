"""Text readers: dense tables (CSV/TSV/whitespace) and ``i j value`` triplets."""

from __future__ import annotations

import csv
import re
import warnings

import numpy as np
import scipy.sparse as sp

from .._errors import InputError, parameter
from .._settings import TEXT_DELIMITERS
from .._validation import check_memory
from ..formats import counted
from ._common import (MAX_DIM, Options, ReadResult, Source, as_float_table, check_order, fortran_float,
                      is_comma_number, is_missing_token, is_number_like, parse_float, repeated_keys, split_cost,
                      strip_compression, text_width)

_COMMENT = ("#", "%")

#: A Matrix Market banner (one or two percent signs, any case).
_BANNER = re.compile(r"%+[ \t]*matrixmarket\b", re.IGNORECASE)
#: A comment line that reads like a damaged banner ("%%MatrixMarkt matrix coordinate real general").
_DAMAGED_BANNER = re.compile(
    r"%.*\bmatrix.*\b(?:coordinate|array)\b.*\b(?:real|integer|pattern|complex|double)\b", re.IGNORECASE
)


# ---------------------------------------------------------------------------
# dense tables
# ---------------------------------------------------------------------------

#: Peak bytes a cell of a table numpy parses, beside the text and its lines held (:func:`split_cost`): its
#: float64 and the finite check's two boolean masks, 10 bytes measured (benchmarks/results/text_memory.md:
#: a 2,236 x 2,236 0/1 CSV peaked at 80.0 MB traced, its text and lines 30 MB), and 4 of margin.  numpy 2.5's
#: ``loadtxt`` holds its table twice at its peak (16.1-17.4 bytes a cell traced against 2.4's 8.1-9.5, for
#: 300 x 300 to 100,000 x 3 tables, on Python 3.12 alike: the numpy, not the Python), so 8 more there: at 14
#: a 300 x 300 0/1 CSV's read peaked 13% over its check, now 1.24 times under it as on 2.4.
_TABLE_CELL_BYTES = 22 if np.lib.NumpyVersion(np.__version__) >= "2.5.0" else 14
#: The same for a cell of the row-by-row path (:func:`_slow_table`): a Python string in a row's list, the
#: rows' copies and the float64 table, 75 bytes measured (a 1,000 x 1,000 CSV with one Fortran exponent
#: peaked at 103.0 MB traced, 107.9 MB RSS, its text and lines 27.6 MB), and 25 of margin.
_SLOW_CELL_BYTES = 100


#: Extensions of tables whose cells are separated by blanks, unless their data line shows ';' or ','.
_BLANK_SEPARATED = (".txt", ".dat")


def _delimiter(src: Source, text: str, opts: Options) -> str | None:
    """Delimiter: the one ``opts.delimiter`` names, else by extension: csv ',' (';' where its data line is so
    separated), tsv tab, txt and dat whitespace (None) unless their data line shows ';' or ','
    (:func:`_blank_table_delimiter`); with ``opts.decimal`` ',' never ',' (:func:`_comma_free_delimiter`).

    A file forced to format="csv" with another extension is sniffed from its
    first line instead.
    """
    if opts.delimiter is not None:
        return _given_delimiter(opts)
    name = strip_compression(src.path.name.lower())
    if name.endswith(".tsv"):
        return "\t"
    lines = _leading_lines(text, 2)
    if opts.decimal == ",":
        return _comma_free_delimiter(lines)
    if name.endswith(_BLANK_SEPARATED):
        return _blank_table_delimiter(src, text, lines, opts.decimal)
    first = lines[0] if lines else ""
    # ';' where the data is so separated: the second line decides where there is one (a header "x;y,z"
    # over comma-separated rows is a comma CSV with a ';' in a column's name)
    semicolons = _semicolons(lines[-1]) if lines else False
    if name.endswith(".csv"):
        return ";" if semicolons else ","
    return ";" if semicolons else "," if "," in first else "\t" if "\t" in first else None


def _comma_free_delimiter(lines: list[str]) -> str | None:
    """The delimiter of a table whose commas are decimal commas (``decimal=','``): ';' or a tab where its data
    line (the second non-comment line, as for a CSV) is so separated, else blanks (None)."""
    data = _uncommented(lines[-1]) if lines else ""
    return ";" if _semicolons(data) else "\t" if "\t" in data.strip() else None


#: A line that is one number written with a decimal comma, or two integers separated by a comma (``1,2``).
_ONE_COMMA = re.compile(r"[+-]?\d*,\d+(?:[eE][+-]?\d+)?")


def _blank_table_delimiter(src: Source, text: str, lines: list[str], decimal: str | None = None) -> str | None:
    """The delimiter of a .txt/.dat table: blanks (None), or ';' or ',' where its data line (the second
    non-comment line where there is one, as for a CSV) is so separated.  Read with blanks, a ';' or ','
    table was one cell a row: its first row a header, its second refused as "non-numeric cell '2;2;2'"
    (a ',' one's as a "number written with a comma"), with no word about the separator.

    A blank-separated table with decimal commas (``0,5 1``) stays one: its cells are refused as before.
    A data line that is one comma between digits (``1,2``) reads as well as two cells or as one number with
    a decimal comma: a header line separated by ',' over it tells, or ``decimal='.'`` (its comma is then no
    decimal comma), else it is refused."""
    if not lines:
        return None
    data = _uncommented(lines[-1])
    if _semicolons(data):
        return ";"
    if not _comma_cells(data):
        return None
    if _GROUPED.fullmatch(data.strip()) is not None and _ONE_COMMA.fullmatch(data.strip()) is None:
        header = _uncommented(lines[0])
        cells = len(_split_line(data, ","))
        if len(lines) > 1 and _GROUPED.fullmatch(header.strip()) is None and len(_split_line(header, ",")) == cells:
            return ","  # "x,y,z" over "1,000,000": cells named and separated by ','
        raise _grouped_error(src, text, lines[-1])
    if _ONE_COMMA.fullmatch(data.strip()) is None or decimal == ".":
        return ","
    header = _uncommented(lines[0])
    if len(lines) > 1 and _ONE_COMMA.fullmatch(header.strip()) is None and len(_split_line(header, ",")) == 2:
        return ","  # "x,y" over "1,2": cells named and separated by ','
    raise _one_comma_error(src, text, lines[0] if _ONE_COMMA.fullmatch(header.strip()) else lines[-1])


#: A line that is one number written with thousands separators (``1,000,000``), or integer cells separated by
#: ',' of which all but the first have three digits.
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _grouped_error(src: Source, text: str, line: str) -> InputError:
    """The refusal of a .txt/.dat table whose ``line`` reads as cells or as one number with thousands
    separators (``1,000,000``: three cells 1, 0, 0 or a million)."""
    cell = _uncommented(line).strip()
    return src.fail(f"line {_line_number(text, line)}: {cell!r} reads as cells separated by ',' or as one "
                    f"number with thousands separators ({cell.replace(',', '')}): which is it?",
                    f"where ',' separates the cells, pass {parameter('delimiter', ',')} (or name the file .csv, or "
                    "give the columns a header line); else write numbers without thousands separators")


def _one_comma_error(src: Source, text: str, line: str) -> InputError:
    """The refusal of a .txt/.dat table whose ``line`` is one comma between digits: two cells or one number?"""
    cell = _uncommented(line).strip()
    whole, frac = cell.split(",")
    suffix = "." + strip_compression(src.path.name.lower()).rpartition(".")[2]
    return src.fail(f"line {_line_number(text, line)}: {cell!r} reads as two cells separated by ',' or as one "
                    f"number with a decimal comma ({whole}.{frac}): which is it? (a {suffix} table's cells are "
                    "separated by blanks, unless its data lines show ';' or ',')",
                    f"pass {parameter('decimal', ',')} where it is a decimal comma; where ',' separates the cells, "
                    f"pass {parameter('delimiter', ',')} or name the file .csv")


def _uncommented(line: str) -> str:
    """A line without its trailing ``#`` comment, which numpy's parse skips (``1 2  # a, b`` is blank-separated)."""
    return line.partition("#")[0]


def _comma_cells(line: str) -> bool:
    """Whether a line of a .txt/.dat table is separated by commas: a comma outside quotes, and no cell
    holding blanks (``1,5 2,5`` is two cells with decimal commas, separated by a blank)."""
    if "," not in line:
        return False
    cells = next(csv.reader([line]))
    return len(cells) > 1 and all(len(cell.split()) <= 1 for cell in cells)


def _line_number(text: str, line: str) -> int:
    """1-based number of the first non-comment line equal to ``line`` (for a message: splits the text)."""
    lines = enumerate(text.splitlines(), start=1)
    return next(k for k, ln in lines if ln == line and not ln.lstrip().startswith(_COMMENT))


def _leading_lines(text: str, count: int) -> list[str]:
    """The first ``count`` non-blank, non-comment lines of ``text``, from as much of its start as they need
    (splitting a whole file's lines to find its first took 0.8 s of a 180 MB CSV's reading)."""
    size = 1 << 16
    while True:
        head = text[:size]
        lines = [ln for ln in head.splitlines() if ln.strip() and not ln.lstrip().startswith(_COMMENT)]
        if len(head) == len(text) or len(lines) > count:  # (the last line of a cut head may be partial)
            return lines[:count]
        size *= 4


def _semicolons(line: str) -> bool:
    """Whether a CSV line is separated by semicolons, as spreadsheets of decimal-comma locales write
    CSV (``1,5;2``): a semicolon outside quotes.  Read with commas, its cells were "non-numeric"
    (``'3;4'``) or its first row a header."""
    return ";" in line and len(next(csv.reader([line], delimiter=";"))) > 1


def _split_rows(text: str, delimiter: str | None) -> tuple[list[list[str]], list[int]]:
    """Non-blank, non-comment rows split into cells, with their 1-based line numbers."""
    lines = text.splitlines()
    keep = [(i, ln) for i, ln in enumerate(lines, start=1) if ln.strip() and not ln.lstrip().startswith(_COMMENT)]
    numbers = [i for i, _ in keep]
    if delimiter is None:
        rows = [ln.split() for _, ln in keep]
    else:
        # csv handles quoted cells ("1.5") and embedded delimiters in headers.
        rows = [[c.strip() for c in r] for r in csv.reader([ln for _, ln in keep], delimiter=delimiter)]
        # A trailing delimiter gives an empty last cell; drop it when every row has one.
        if rows and all(r and r[-1] == "" for r in rows):
            rows = [r[:-1] for r in rows]
    return rows, numbers


def _split_line(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    return [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]


_HEADER_NOTE = "first row is a header (skipped): "
_ROW_LABELS_NOTE = "first column holds row labels (skipped)"
_PANDAS_INDEX_NOTE = "first column holds pandas' row index 0, 1, 2, ... (skipped; to_csv(index=False) leaves it out)"


#: What follows the header's cells in its note where a cell written as a number made the row a header.
_FOUND = "; found "
#: A cell that starts as a number does (``10%``, ``0x1``, ``1st``): no word, but not a number either.
_NUMBERISH = re.compile(r"[+-]?\.?\d")


def _header_note(header: list[str]) -> str:
    """The note of a first row read as a header: its cells, and, where no word made it one, the cell that
    did (``10%``: the refusal of a table "not square" once it was read as a header called it a word)."""
    shown = ", ".join(header[:4]) + (", ..." if len(header) > 4 else "")
    labels = [c for k, c in enumerate(header) if c and _is_label(k, c)]
    if labels and all(_NUMBERISH.match(c) for c in labels):
        shown += f"{_FOUND}a cell {labels[0]!r} that is not a number"
    return _HEADER_NOTE + shown


def _is_label(k: int, cell: str) -> bool:
    """Whether cell ``k`` of the first row marks it as a header: a word, or an empty corner cell (the
    row labels' column).  Another empty cell is no label: a trailing delimiter (``1,2,``, which
    :func:`_split_rows` drops) or a missing value made the first row of data a header, and the table
    "not square"."""
    if cell == "":
        return k == 0
    # a number written with a comma or a Fortran exponent is data, named by the parse (as a header it
    # left the table "not square once its first row (1,5, 2) is read as a header")
    return parse_float(cell) is None and not is_missing_token(cell) and not is_number_like(cell)


def _numpy_reads(text: str, opts: Options) -> bool:
    """Whether numpy's parse reads ``text``'s numbers as ``opts.decimal`` has them: always but for a decimal
    comma (numpy reads a cell '1.5' as 1.5, which the slow path refuses as a point where commas are the decimal
    mark, and no '1,5'), then only where ``text`` holds neither ',' nor '.': integers and exponents, read alike
    (the slow path was ~10x slower, and held to its larger memory check, for a table with no comma at all)."""
    return opts.decimal != "," or ("," not in text and "." not in text)


def _fast_table(lines: list[str], delimiter: str | None) -> np.ndarray | None:
    """numpy's C parser for well-formed tables; None sends us to the slow, precise path."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. "input contained no data"
            return np.loadtxt(lines, delimiter=delimiter, comments="#", ndmin=2, dtype=np.float64, quotechar='"')
    except (ValueError, TypeError, UserWarning):
        return None


def read_table(src: Source, opts: Options) -> tuple[np.ndarray, list[str]]:
    """Read a dense numeric table; returns (table, notes). Not necessarily square.

    Well-formed files go through ``numpy.loadtxt``; anything it rejects is
    re-parsed row by row to name the offending line and cell.
    """
    text = src.read_text()
    delimiter = _delimiter(src, text, opts)
    lines = text.splitlines()
    first = next((k for k, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith(_COMMENT)), None)
    if first is None:
        raise src.fail("no data rows (only blank or comment lines)")
    width = len(_split_line(lines[first], delimiter))
    # The first row's width bounds the table: refuse before parsing it all, with the text and lines held
    # (alone, the table's 8 bytes a cell let a 0/1 CSV peak at twice its check: text_memory)
    held = split_cost(src.read_bytes(), len(lines), text_width(text))
    check_memory(held + _TABLE_CELL_BYTES * width * len(lines),
                 what=f"{src.display}: dense {len(lines)} x {width} table", limit=opts.max_memory_bytes)
    notes = _marks_notes(opts)
    if (delimiter is not None and opts.delimiter is None
            and strip_compression(src.path.name.lower()).endswith(_BLANK_SEPARATED)):
        notes.append(f"cells separated by {delimiter!r}, as its data lines show (not by blanks)")
    header = _split_line(lines[first], delimiter)
    # A header has a label in it: a row whose only non-numbers are missing values ("NA") is data,
    # and the parse names the missing cell (as a header it was dropped, and a square table with it
    # was then "not square").
    has_header = any(_is_label(k, c) for k, c in enumerate(header))
    pandas_index = False
    if has_header and all(c == "" or not _is_label(k, c) for k, c in enumerate(header)):
        # its only label is an empty first cell: the corner of a table with row labels only where the
        # next row starts with one; else a missing value of the first row of data, named by the parse
        following = next((ln for ln in lines[first + 1:] if ln.strip() and not ln.lstrip().startswith(_COMMENT)), "")
        row = _split_line(following, delimiter) if following else []
        has_header = bool(row) and _is_label(1, row[0])
        # pandas' DataFrame.to_csv(): an empty corner over the column names 0, 1, ... and a first column of
        # row numbers (its index): read as a header and the index dropped, where it was "missing value ''"
        pandas_index = (not has_header and bool(row) and row[0] == "0"
                        and header[1:] == [str(k) for k in range(len(header) - 1)])
        has_header = has_header or pandas_index
    if has_header:
        notes.append(_header_note(header))
    table = _fast_table(lines[first + 1 :] if has_header else lines[first:], delimiter) if _numpy_reads(text, opts) \
        else None
    if table is None or not table.size:
        # Slow path: Python strings cost ~10x the float64 table.
        check_memory(held + _SLOW_CELL_BYTES * width * len(lines),
                     what=f"{src.display}: parsing a {len(lines)} x {width} table", limit=opts.max_memory_bytes)
        decimal = opts.decimal or ("," if delimiter == ";" else ".")
        table, notes = _slow_table(src, text, delimiter, has_header, notes, decimal, given=opts.decimal is not None,
                                   marks=opts)
    if pandas_index and table.shape[1] == len(header) and np.array_equal(table[:, 0], np.arange(len(table))):
        table = table[:, 1:]
        notes.append(_PANDAS_INDEX_NOTE)
    if delimiter == ";" and opts.decimal is None:  # (a decimal mark given says what '1.000' is)
        _refuse_ambiguous_points(src, lines[first + has_header:], first + has_header, notes, table)
    labels = _ROW_LABELS_NOTE in notes or _PANDAS_INDEX_NOTE in notes
    _refuse_nonfinite(src, table, lines[first + has_header:], first + has_header, delimiter, labels)
    return table, notes


_CELL_START, _CELL_END = r'(?:^|(?<=;))[ \t]*"?', r'"?[ \t]*(?=;|$)'
#: A cell of a semicolon-separated file that reads as well with a decimal point as with a thousands
#: separator: 1 to 3 digits, not all 0, a point, 3 digits (``1.000``, ``-12.500``).
_AMBIGUOUS_POINT = re.compile(_CELL_START + r"[+-]?0*[1-9]\d{0,2}\.\d{3}" + _CELL_END, re.MULTILINE)
#: A cell whose point can only be a decimal point: not 3 digits after it, a 0 or 4+ digits before it, an exponent.
_DECIMAL_POINT = re.compile(_CELL_START + r"[+-]?(?:\d*\.\d{0,2}|\d*\.\d{4,}|0+\.\d*|\d{4,}\.\d*|\d*\.\d*[eE][+-]?\d+)"
                            + _CELL_END, re.MULTILINE)


def _may_hold_ambiguous_points(table: np.ndarray) -> bool:
    """Whether a parsed table holds a value a cell like ``1.000`` could have written: 1 <= |v| < 1,000 and a
    whole number of thousandths.  Where none does, no cell is ambiguous, and the text need not be searched
    (a regular expression over every line: 1.0 of a 20 MB file's 1.5 s reading)."""
    v = np.abs(table[np.isfinite(table)])
    v = v[(v >= 1) & (v < 1000)] * 1000
    return bool(np.any(np.abs(v - np.round(v)) <= 1e-6))


def _refuse_ambiguous_points(src: Source, lines: list[str], skipped: int, notes: list[str],
                             table: np.ndarray | None = None) -> None:
    """Refuse a semicolon-separated file (a decimal-comma locale's CSV) whose numbers with a point all read as
    well with a thousands separator (``1.000``: 1.0 or 1000?), naming the first; it was read as 1.0 without a
    word.  A file of decimal commas refused its points already; one cell whose point can only be a decimal
    point (``0.5``, ``1.25``, ``1.5e3``) tells how the file writes numbers, and the others are read so.

    ``lines`` are the file's lines after the header (``skipped`` lines before them)."""
    if any(note.startswith("semicolon-separated, ") for note in notes):  # its decimal commas' note
        return
    if table is not None and not _may_hold_ambiguous_points(table):
        return
    data = [(k, ln) for k, ln in enumerate(lines, start=skipped + 1)
            if "." in ln and ln.strip() and not ln.lstrip().startswith(_COMMENT)]
    text = "\n".join(ln for _, ln in data)
    first = _AMBIGUOUS_POINT.search(text)
    if first is None:
        return
    decimal = _DECIMAL_POINT.search(text)
    if decimal is not None:  # read, and said: the reading of '1.000' rests on another cell
        notes.append(f"semicolon-separated: points read as decimal points ({_cell(first)!r} as "
                     f"{float(_cell(first)):g}, as {_cell(decimal)!r} writes one)")
        return
    row = text.count("\n", 0, first.start())
    line_no, line = data[row]
    start = first.start() - (text.rfind("\n", 0, first.start()) + 1)
    cell = _cell(first)
    raise src.fail(f"line {line_no}, column {line[:start].count(';') + 1}: {cell!r} is ambiguous in a semicolon-separated "
                   f"file: a decimal point ({float(cell):g}) or a thousands separator ({cell.replace('.', '')})? "
                   "No number in the file tells",
                   f"pass {parameter('decimal', '.')} where the points are decimal points; where they separate "
                   "thousands, write the numbers without them")


def _cell(match: re.Match) -> str:
    """The number a cell pattern matched, without its blanks and quotes."""
    return match.group().strip().strip('"').strip()


def _refuse_nonfinite(src: Source, table: np.ndarray, lines: list[str], skipped: int, delimiter: str | None,
                      labels: bool) -> None:
    """Refuse a table holding NaN or an infinity (``nan``, ``inf``, ``1e999``) by the file's line and column
    of its first such cell, as every other bad cell is named; the check of the matrix named them by 0-based
    row and column, which a reader of the file had to translate past header and comment lines.

    ``lines`` are the file's lines after the header (``skipped`` lines before them); ``labels``: the
    first column of each row was a label, dropped from ``table``."""
    bad = ~np.isfinite(table)
    if not bad.any():
        return
    row, col = (int(k) for k in np.argwhere(bad)[0])
    data = (k for k, ln in enumerate(lines, start=skipped + 1) if ln.strip() and not ln.lstrip().startswith(_COMMENT))
    line_no = next(k for r, k in enumerate(data) if r == row)
    col += labels
    cells = _split_line(lines[line_no - skipped - 1], delimiter)
    cell = cells[col] if col < len(cells) else ""
    raise src.fail(f"line {line_no}, column {col + 1}: {cell!r} is not a finite number "
                   f"({counted(int(bad.sum()), 'NaN/Inf cell')} in the table)",
                   "every entry needs a finite number: replace them (numpy.nan_to_num) or remove their rows and columns")


def _marks_notes(opts: Options) -> list[str]:
    """The notes of a table read with a delimiter or decimal mark given (what ``info`` shows: how the
    file became a matrix)."""
    notes = []
    if opts.delimiter is not None:
        given = _given_delimiter(opts)
        shown = {None: "blanks", "\t": "tabs"}.get(given, repr(given))
        notes.append(f"cells separated by {shown}, as {parameter('delimiter', opts.delimiter)} says (not detected)")
    if opts.decimal is not None:
        notes.append(f"numbers read with a decimal {'comma' if opts.decimal == ',' else 'point'}, as "
                     f"{parameter('decimal', opts.decimal)} says (not detected)")
    return notes


def _slow_table(src: Source, text: str, delimiter: str | None, has_header: bool, notes: list[str],
                decimal: str = ".", *, given: bool = False, marks: Options | None = None):
    rows, numbers = _split_rows(text, delimiter)
    if has_header:
        header = rows[0]
        rows, numbers = rows[1:], numbers[1:]
        if not rows:
            raise src.fail("only a header row, no data")
        # A header with an empty corner cell and a non-numeric first column:
        # row labels, as in labelled similarity tables.
        if header and header[0] == "" and all(r and parse_float(r[0]) is None for r in rows):
            rows = [r[1:] for r in rows]
            notes.append(_ROW_LABELS_NOTE)
    expected = len(rows[0])
    for row, line_no in zip(rows, numbers):
        if len(row) != expected:
            raise src.fail(
                f"line {line_no} has {counted(len(row), 'field')}, expected {expected:,} (ragged rows)",
                "every row of a dense table needs the same number of values",
            )
    rows = read_written_numbers(rows, numbers, src, notes, decimal_comma=decimal == ",", given=given)
    return as_float_table(rows, numbers, src, delimiter=None if marks is None else marks.delimiter,
                          decimal=None if marks is None else marks.decimal), notes


#: ``0,25``: a number written with a decimal comma (an exponent after it allowed).
_DECIMAL_COMMA = re.compile(r"([+-]?\d*),(\d+)((?:[eE][+-]?\d+)?)")


def read_written_numbers(rows: list[list[str]], numbers: list[int], src: Source, notes: list[str], *,
                         decimal_comma: bool, given: bool = False) -> list[list[str]]:
    """``rows`` with numbers written in the other ways a table's writer may use, as Python reads them,
    with a note each: Fortran's exponent (``1.0D+00``) and, in a semicolon-separated file (where a comma
    is no delimiter), a decimal comma (``1,5``).  A comma that could be a thousands separator (``1,000``;
    a decimal point in a file of decimal commas, ``1.000``) is refused, naming its line and column:
    either reading of it would be a guess.  Other cells are left as they are (the parse names them).

    ``given``: the decimal comma was asked for (``decimal=','``), not detected: ``1,000`` is 1.0, and a
    cell with a point is refused, whether or not another cell has a comma."""
    fortran = commas = 0
    point: tuple[int, int, str] | None = None  # the first cell with a decimal point, where a comma may be one
    out = []
    for row, line_no in zip(rows, numbers):
        new = row
        for col, cell in enumerate(row):
            if parse_float(cell) is not None:
                if decimal_comma and point is None and "." in cell:
                    point = (line_no, col + 1, cell)
                    if given:
                        raise _point_error(src, point)
                continue
            value = fortran_float(cell.strip())
            if value is not None:
                fortran += 1
            elif decimal_comma and (match := _DECIMAL_COMMA.fullmatch(cell.strip())) is not None:
                whole, frac, exponent = match.groups()
                if len(frac) == 3 and whole.lstrip("+-0") and not given:
                    raise src.fail(f"line {line_no}, column {col + 1}: {cell.strip()!r} is ambiguous: a decimal "
                                   f"comma ({whole}.{frac}) or a thousands separator ({whole}{frac})?",
                                   "write numbers with a decimal point and no thousands separators, or pass "
                                   f"{parameter('decimal', ',')} where the commas are decimal commas")
                value, commas = float(f"{whole}.{frac}{exponent}"), commas + 1
            else:
                continue
            new = new if new is not row else list(row)
            new[col] = repr(value)
        out.append(new)
    if commas and point is not None:
        line_no, col, cell = point
        raise src.fail(f"line {line_no}, column {col}: {cell!r} has a decimal point, but this semicolon-separated "
                       "file writes decimal commas (1,5): is the point a thousands separator?",
                       "write every number the same way, without thousands separators")
    if fortran:
        notes.append(f"{counted(fortran, 'number')} written with a Fortran exponent (1.0D+00) read as 1.0E+00")
    if commas:  # (asked for, the comma is no sign of a ';'-separated file: decimal=',' reads blank ones too)
        notes.append(f"{'' if given else 'semicolon-separated, '}{counted(commas, 'number')} written with a "
                     "decimal comma (1,5) read as 1.5")
    return out


def _point_error(src: Source, point: tuple[int, int, str]) -> InputError:
    """The refusal of a cell with a point in a table read with decimal commas as asked (``decimal=','``)."""
    line_no, col, cell = point
    return src.fail(f"line {line_no}, column {col}: {cell.strip()!r} has a point, but "
                    f"{parameter('decimal', ',')} says numbers are written with a decimal comma (1,5)",
                    f"pass {parameter('decimal', '.')} if the points are decimal points; numbers with thousands "
                    "separators are not read")


def read_csv(src: Source, opts: Options) -> ReadResult:
    """Reader for format "csv": a dense square table."""
    table, notes = read_table(src, opts)
    rows, cols = table.shape
    header = next((note[len(_HEADER_NOTE):] for note in notes if note.startswith(_HEADER_NOTE)), None)
    if header is not None and rows + 1 == cols:
        # square with its first row: say which row went, not only "not square"
        header, _, found = header.partition(_FOUND)
        why = f" ({found} made it one)" if found else ""
        raise src.fail(f"matrix is not square ({rows:,} x {cols:,}) once its first row ({header}) is read as a "
                       f"header{why}",
                       "a first row with a cell that is not a number in it is taken for column names; if it is data, "
                       "write its cells as plain numbers (0.1, not 10%; 1, not 0x1)" if found else
                       "a first row with a word in it is taken for column names; if it is data, "
                       "write its cells as numbers")
    return ReadResult(table, "csv", notes)


# ---------------------------------------------------------------------------
# i j value triplets
# ---------------------------------------------------------------------------

#: Peak bytes a triplet line takes beside its text and string (:func:`split_cost`): numpy's table of three
#: float64, the indices and keys, the mirrored half (benchmarks/results/text_memory.md: 104 bytes a line
#: and twice the file's bytes measured, 122 for a file mirrored, 140 in RSS; 140 estimated in all).
_TRIPLET_LINE_BYTES = 60


def triplets_cost(data: bytes, lines: int) -> int:
    """Peak bytes of reading ``i j v`` triplets: :func:`split_cost` and :data:`_TRIPLET_LINE_BYTES` a line.

    Examples
    --------
    >>> triplets_cost(b"1 2 0.5\\n", 2)
    304
    """
    return split_cost(data, lines) + _TRIPLET_LINE_BYTES * lines


def _parse_triplets(src: Source, text: str, opts: Options) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Parse ``i j [value]`` lines into index/value arrays (indices as written), their fields split at
    ``opts.delimiter`` and their numbers read with ``opts.decimal`` where given."""
    table = _fast_triplets(text, _given_delimiter(opts)) if _numpy_reads(text, opts) else None
    written: list[str] = _marks_notes(opts)
    if table is None:
        table = _slow_triplets(src, text, written, opts)
    elif opts.decimal is None and _given_delimiter(opts) == ";":  # (numpy read '1.000' as 1.0: said, as detected)
        _refuse_ambiguous_points(src, text.splitlines(), 0, written, table[:, 2:])
    idx = table[:, :2]
    bad = np.flatnonzero((~np.isfinite(idx) | (idx != np.round(idx)) | (idx < 0)).any(axis=1))
    if bad.size:
        k = int(bad[0])
        raise src.fail(
            f"line {_data_line_number(text, k)}: indices must be non-negative integers, got "
            f"{idx[k, 0]:g} {idx[k, 1]:g}"
        )
    largest = float(idx.max())
    if largest > MAX_DIM:  # refused before the int64 cast (1e20 would wrap around)
        check_order(int(largest), src, "largest index gives a matrix")
    values = table[:, 2] if table.shape[1] == 3 else np.ones(len(table))
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:  # named by its line here: the matrix's check gave a 0-based row and column
        raise src.fail(f"line {_data_line_number(text, int(bad[0]))}: value {values[bad[0]]:g} is not a finite number "
                       f"({counted(bad.size, 'NaN/Inf value')} in the file)",
                       "every entry needs a finite number: replace them or remove their lines")
    notes = written + ([] if table.shape[1] == 3 else ["two columns: pattern entries set to 1.0"])
    return idx[:, 0].astype(np.int64), idx[:, 1].astype(np.int64), values, notes


def _data_line_number(text: str, k: int) -> int:
    """1-based line number of the k-th (0-based) data line."""
    seen = -1
    for line_no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s and not s.startswith(_COMMENT):
            seen += 1
            if seen == k:
                return line_no
    return 0  # pragma: no cover - k is always a data line


def _given_delimiter(opts: Options) -> str | None:
    """The delimiter ``opts.delimiter`` names (None: blanks, or none given)."""
    return None if opts.delimiter is None else TEXT_DELIMITERS[opts.delimiter]


def _fast_triplets(text: str, delimiter: str | None = None) -> np.ndarray | None:
    """numpy's C parser for clean files (fields split at ``delimiter``, None: blanks); None sends us to the
    precise slow path."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            table = np.loadtxt(text.splitlines(), comments=_COMMENT, ndmin=2, dtype=np.float64, delimiter=delimiter)
    except (ValueError, TypeError, UserWarning):
        return None
    return table if table.shape[0] and table.shape[1] in (2, 3) else None


def _slow_triplets(src: Source, text: str, notes: list[str], opts: Options) -> np.ndarray:
    rows: list[list[str]] = []
    numbers: list[int] = []
    separator: str | None = _given_delimiter(opts)
    detected: bool | None = None if opts.delimiter is None else False  # decided by the first line, as a CSV's is
    for line_no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s or s.startswith(_COMMENT):
            continue
        if detected is None:
            # "1;1;0,5", as spreadsheets of decimal-comma locales write it: split at ';' only, so that a
            # comma is a decimal comma (it was "got 1 fields")
            detected, separator = True, ";" if ";" in s else None
        # blanks, and a comma unless it is the decimal mark given ("1,2,0.5")
        commas = separator is None and opts.delimiter is None and opts.decimal != ","
        parts = _split_fields(s, separator, commas)
        if len(parts) not in (2, 3):
            raise src.fail(
                f"line {line_no}: expected 'i j' or 'i j value', got {counted(len(parts), 'field')}: {s[:60]!r}",
                _triplet_hint(s, separator, opts),
            )
        if rows and len(parts) != len(rows[0]):
            raise src.fail(
                f"line {line_no} has {counted(len(parts), 'field')} but line {numbers[0]} has {len(rows[0])}",
                "use the same number of columns on every line",
            )
        rows.append(parts)
        numbers.append(line_no)
    if not rows:
        raise src.fail("no entries (only blank or comment lines)")
    # (without semicolons a comma separates the fields, unless it is the decimal mark given)
    decimal = opts.decimal or ("," if separator == ";" else ".")
    rows = read_written_numbers(rows, numbers, src, notes, decimal_comma=decimal == ",", given=opts.decimal is not None)
    table = as_float_table(rows, numbers, src, delimiter=opts.delimiter, decimal=opts.decimal)
    if separator == ";" and opts.decimal is None:  # (a decimal mark given says what '1.000' is)
        # (its values' column: indices are whole numbers, which would send every file to the search)
        _refuse_ambiguous_points(src, text.splitlines(), 0, notes, table[:, 2:] if table.ndim == 2 else None)
    if detected and separator == ";" and not any(note.startswith("semicolon-separated") for note in notes):
        notes.append("fields separated by ';'")
    return table


def _split_fields(line: str, separator: str | None, commas: bool = False) -> list[str]:
    """The fields of a triplet line split at ``separator`` (None: blanks; and commas too with ``commas``),
    stripped; a trailing ``separator`` adds none."""
    if separator is None:
        return (line.replace(",", " ") if commas else line).split()
    parts = [part.strip() for part in line.split(separator)]
    return parts[:-1] if len(parts) > 1 and parts[-1] == "" else parts


#: What may separate a triplet line's fields, as a hint names them.
_SEPARATORS = {";": "';'", "\t": "a tab", ",": "','", " ": "blanks"}


def _triplet_hint(line: str, separator: str | None, opts: Options) -> str | None:
    """What to do with a triplet line of the wrong number of fields, where the separator tells: the
    ``delimiter`` or ``decimal`` given where one split it so."""
    if opts.delimiter is not None:
        blank = separator in (None, " ")  # (blanks and tabs are one delimiter: 'whitespace')
        seen = next((said for mark, said in _SEPARATORS.items() if mark in line and mark != separator
                     and not (blank and mark in " \t") and not (mark == "," and opts.decimal == ",")), None)
        return (f"its fields are split at the {parameter('delimiter', opts.delimiter)} given"
                + (f", but it holds {seen}: is the file separated by {'tabs' if seen == 'a tab' else seen}?" if seen
                   else ""))
    if separator == ";" or ";" in line:
        return ("the first line's fields are separated by ';'" if separator == ";" else "the first line's fields are "
                "separated by blanks") + ": separate every line's fields the same way"
    if opts.decimal == "," and "," in line:
        return (f"a comma separates no fields with {parameter('decimal', ',')} (it is the decimal mark): where ',' "
                f"separates the fields, leave {parameter('decimal')} out")
    if any(is_comma_number(t) for t in line.split()):  # "1 2 0,5": a decimal comma, split in two
        if opts.decimal == ".":
            return (f"a comma separates fields here, as {parameter('decimal', '.')} has no decimal commas: separate "
                    "every line's fields the same way")
        return (f"a comma separates fields here: pass {parameter('decimal', ',')} where it is a decimal comma (or "
                "separate the fields with ';', 1;2;0,5, which reads decimal commas), else write numbers with a "
                "decimal point")
    return None


def _triangle(i: np.ndarray, j: np.ndarray) -> str | None:
    """"lower"/"upper" if all off-diagonal entries lie in one triangle, else None."""
    off = i != j
    if not off.any():
        return None
    if (i[off] > j[off]).all():
        return "lower"
    if (i[off] < j[off]).all():
        return "upper"
    return None


def triplets_to_matrix(i, j, v, n: int, mirror: str, notes: list[str], reading: dict | None = None) -> sp.csr_array:
    """Assemble 0-based triplets into an n x n csr_array, mirroring as asked; what was done in
    ``reading["mirror"]``: "mirror" or "none" (``"auto"`` is one of them: the same matrix as it)."""
    dup = repeated_keys(i * n + j)
    if dup:
        notes.append(f"{counted(dup, 'repeated entry', 'repeated entries')} summed")
    tri = _triangle(i, j)
    do_mirror = mirror == "mirror" or (mirror == "auto" and tri is not None)
    if reading is not None:
        reading["mirror"] = "mirror" if do_mirror else "none"
    if do_mirror:
        off = i != j
        i, j, v = np.concatenate([i, j[off]]), np.concatenate([j, i[off]]), np.concatenate([v, v[off]])
        if mirror == "auto":
            notes.append(
                f"entries only in the {tri} triangle: mirrored to a symmetric matrix "
                "(mirror='none' keeps it triangular)"
            )
        else:
            notes.append("mirror='mirror': every off-diagonal entry (i, j) also added at (j, i)")
    return sp.csr_array((v, (i, j)), shape=(n, n))


def _matrix_market_banner(src: Source, opts: Options, text: str) -> ReadResult | None:
    """A Matrix Market file given as triplets: read it as what it declares, or refuse a damaged one.

    Read as triplets, a Matrix Market file's size line ``3 3 3`` would become
    an entry (the banner and comments are comment lines here).  A valid
    banner declares the file's layout unambiguously, so it is honoured, with
    a note: a manifest entry may name a header-stripped local copy that needs
    format "ijv" and a download that keeps its header (SuiteSparse's mesh2e1).
    A line that looks like a damaged banner is refused.  None: no banner.
    """
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    valid = _BANNER.match(first) is not None
    if not valid and _DAMAGED_BANNER.match(first) is None:
        return None  # no banner; a comment such as "% matrix of distances" is fine
    if not valid:
        raise src.fail(
            f"the first line looks like a damaged Matrix Market banner ({first[:50]!r}): read as triplets, "
            "its size line would become an entry",
            "fix the banner (%%MatrixMarket matrix coordinate real general) and read it as format='mtx'",
        )
    if opts.mirror != "auto":
        raise src.fail(f"mirror={opts.mirror!r} applies to header-less triplets, but the file has a Matrix Market "
                       "banner, which declares its symmetry", "drop mirror=")
    given = next((name for name in ("delimiter", "decimal") if getattr(opts, name) is not None), None)
    if given is not None:  # refused, not ignored: Matrix Market fields are separated by blanks, with decimal points
        raise src.fail(f"{parameter(given, getattr(opts, given))} applies to header-less triplets, but the file has a "
                       "Matrix Market banner, which is read by its own rules (blanks, decimal points)",
                       f"leave {parameter(given)} out")
    from ._mtx import read_mtx  # here, not at the top: _mtx is the judge of its own header

    result = read_mtx(src, opts)
    result.notes.insert(0, "format 'ijv' asked, but the file starts with a Matrix Market banner: read as Matrix Market")
    return result


def read_ijv(src: Source, opts: Options) -> ReadResult:
    """Reader for format "ijv": header-less ``i j [value]`` lines, 1-based unless a 0 appears."""
    text = src.read_text(triplets_cost)
    banner = _matrix_market_banner(src, opts, text)
    if banner is not None:
        return banner
    check_memory(8 * len(text), what=f"{src.display}: triplets", limit=opts.max_memory_bytes)
    i, j, v, notes = _parse_triplets(src, text, opts)
    zero_based = min(i.min(), j.min()) == 0
    if zero_based:
        notes.append("an index 0 appears: indices read as 0-based")
    else:
        # said: a 0-based file whose first vertex has no entry reads shifted by one, with one row more
        notes.append("no index 0 appears: indices read as 1-based")
        i, j = i - 1, j - 1
    n = int(max(i.max(), j.max())) + 1
    check_order(n, src, "largest index gives a matrix", sparse=True)
    notes.insert(0, f"size {n:,} x {n:,} taken from the largest index")
    reading: dict = {}
    matrix = triplets_to_matrix(i, j, v, n, opts.mirror, notes, reading)
    return ReadResult(matrix, "ijv", notes, reading=reading)
