"""Tables in every output format: one table model, one renderer per format.

``compare``, ``sweep``, ``info`` and ``report`` each describe their output as
:class:`Table` objects (already formatted cells) plus a JSON-ready dict; the
:class:`OutputFormat` enum turns them into text (CSV, Markdown, LaTeX, JSON)
or into rich tables for a terminal.  So every command offers the same
outputs, and a new format is one new renderer here.  Formatters are pure:
they return strings; the CLI decides where they go.
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import html
import io
import json
import math
import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# (their home is the stdlib-only _shell, which _errors.parameter quotes with: here they stay formats' own)
from ._shell import _ESCAPED, _raw_bytes, printable, shell_quote

if TYPE_CHECKING:  # (rich is imported where a terminal's text is made: the file writers need none)
    from rich.text import Text

__all__ = ["Column", "Table", "OutputFormat", "Layout", "layout", "render_rich", "render_html", "render_frame",
           "list_heading", "listed_item",
           "ShownAsTables", "fmt_number", "fmt_seconds", "limit_text", "fact_text", "counted", "count_text", "listed", "shape_text", "shape_phrase", "jsonable", "json_text", "RAW_BYTES_SUFFIX", "PLOT_SUFFIXES",
           "printable",
           "to_ascii", "ascii_in_context", "ascii_table", "GLYPHS", "encodes_glyphs"]

#: Figure formats matplotlib writes without extra packages (the plots' files; a stream gets a PNG).
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class Column:
    """A column: its key in the rows, its title, its alignment, and how it gives way to a narrow window.

    Attributes
    ----------
    key : str
        The cell's key in each row.
    title : str
        The column's heading.
    align : {"right", "left", "center"}, default="right"
        How its cells are aligned.
    wrap : bool or None, default=None
        Free text (details, descriptions) that may wrap onto several lines;
        other cells are never cut or wrapped (their titles may wrap at
        spaces), except that a left-aligned cell (a name, a path) too wide
        for the window folds onto more lines.  None: a left-aligned column
        other than the first whose cells hold spaces is free text.
    priority : int or None, default=None
        Columns that may be left out of a terminal table too narrow for all
        of them, lowest priority first (the table's notes then name them;
        every other format keeps them).  None: never left out.
    """

    key: str
    title: str
    align: str = "right"
    wrap: bool | None = None
    priority: int | None = None


@dataclass
class Table:
    """A titled table of formatted cells.

    Attributes
    ----------
    title : str
        Shown above the table (a comment in LaTeX, the ``table`` column of a
        several-table CSV).
    columns : list of Column
        The columns, in order.
    rows : list of dict
        Cell text by column key (missing keys render as "–").
    best : list of set of str
        Per row, the column keys to emphasise (the winner).
    notes : list of str
        Lines printed under the table (not part of CSV).
    data : list of dict
        Per row, the values behind its cells by column key, for CSV (full
        precision, no separators or marks; None as an empty cell); a key a
        row lacks is written as its text.  Keys that are no column's are
        CSV columns of their own, after the others (``data_titles``).
    data_titles : dict of str to str
        Titles of those CSV-only columns, by key, in order.
    hidden_notes : dict of str to list of str
        Lines a terminal table shows under its notes when the column of that
        key is left out to fit the window: what its cells said that matters
        (why a row of a comparison has no result, when ``details`` gives way).
    terminal_rows : list of int or None
        The rows (by index) a terminal table shows, None: every row.  A long
        listing (a model's 10,000 tensors) is shown by the rows that matter;
        every other format keeps every row.
    terminal_notes : list of str
        Lines a terminal table shows under its notes when it leaves rows out
        (``terminal_rows``): how many, and where they all are.
    """

    title: str
    columns: list[Column]
    rows: list[dict[str, str]] = field(default_factory=list)
    best: list[set[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)
    data_titles: dict[str, str] = field(default_factory=dict)
    hidden_notes: dict[str, list[str]] = field(default_factory=dict)
    terminal_rows: list[int] | None = None
    terminal_notes: list[str] = field(default_factory=list)

    def add(self, row: dict[str, str], best: set[str] | None = None, data: dict[str, Any] | None = None) -> None:
        """Append a row of cells.

        Parameters
        ----------
        row : dict of str to str
            Cell text by column key.
        best : set of str, optional
            The row's column keys to emphasise; None: none.
        data : dict, optional
            The values behind the cells, for CSV (see :attr:`data`).
        """
        self.rows.append({k: printable(v) if isinstance(v, str) else v for k, v in row.items()})
        self.best.append(best or set())
        self.data.append(data or {})

    def records(self, missing: Any = "") -> tuple[list[str], list[list[Any]]]:
        """CSV's view: the titles (the columns', then :attr:`data_titles`) and each row's values, its
        data where given, else its text; a missing value (None, NaN, a cell of "–" or none) is empty.

        Parameters
        ----------
        missing : object, default=""
            What a missing value is: CSV's empty cell, or None for a DataFrame (:func:`render_frame`).
        """
        keys = [c.key for c in self.columns] + list(self.data_titles)
        titles = [c.title for c in self.columns] + list(self.data_titles.values())
        rows = []
        for i, row in enumerate(self.rows):
            data = self.data[i] if i < len(self.data) else {}
            rows.append([_csv_value(data[k] if k in data else row.get(k), missing) for k in keys])
        return titles, rows

    def cells(self) -> list[list[str]]:
        """The cell text of every row, in column order (missing cells as "–")."""
        return [[row.get(c.key, "–") for c in self.columns] for row in self.rows]


#: What a table's cell says for a missing value (:func:`fmt_number` of None).
MISSING = "–"


def _csv_value(value: Any, missing: Any = "") -> Any:
    """A CSV cell's value: an empty cell (``missing``) for a missing one (None, NaN, the "–" a table shows
    for it), so that a reader (``pandas.read_csv``) finds a number column's gaps empty, not text ("–" made
    it a column of strings, and ``nan`` is no spelling every reader takes)."""
    # an empty cell ("" where a row has no paper figure) is as missing in a DataFrame as in the CSV
    if value is None or (isinstance(value, str) and value in (MISSING, "")) or \
            (isinstance(value, float) and math.isnan(value)):
        return missing
    return value


def jsonable(value: Any) -> Any:
    """Plain JSON types; non-finite floats become None (JSON has no NaN).

    Parameters
    ----------
    value : object
        Dicts (keys made strings), lists, tuples, numpy scalars and arrays,
        paths and plain values, nested.

    Returns
    -------
    object
        The same structure of dicts, lists, str, int, float, bool and None;
        anything else is returned as it is.
    """
    if isinstance(value, dict):
        return _jsonable_dict(value)
    if isinstance(value, str):
        return json_text(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return json_text(os.fspath(value))
    # numpy as loaded, never imported here: a value is a numpy one only where numpy is loaded already, and a
    # fixed table's JSON (`sfapprox methods --json -`) waited 0.8 s for importing it to find none
    np = sys.modules.get("numpy")
    if np is None:
        return (float(value) if math.isfinite(value) else None) if isinstance(value, float) else value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    return value


#: Where a text in a dict had bytes that are no UTF-8 (:func:`json_text`), its exact bytes are written beside it
#: under its key plus this ending, in hexadecimal: ``"path": "bad\\xff.mtx", "path_bytes": "626164ff2e6d7478"``.
RAW_BYTES_SUFFIX = "_bytes"


def _jsonable_dict(value: dict) -> dict:
    """A dict as :func:`jsonable` writes it: keys as text, and beside each text that had bytes that are no
    UTF-8 (a file's name) those exact bytes (:data:`RAW_BYTES_SUFFIX`): the escaped text is a spelling,
    which a name holding a real backslash would spell alike."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        key = json_text(str(key))
        out[key] = jsonable(item)
        text = os.fspath(item) if isinstance(item, os.PathLike) else item
        if isinstance(text, str) and out[key] != text:
            out[key + RAW_BYTES_SUFFIX] = _raw_bytes(text).hex()
    return out


#: Lone surrogates as their escapes (:func:`json_text`): ``\xNN`` for a byte that is no UTF-8 (as every table and
#: error line writes it, :data:`_UNDECODABLE`), ``\uNNNN`` for any other.
_SURROGATES = {**{c: f"\\u{c:04x}" for c in range(0xd800, 0xe000)},
               **{c: f"\\x{c - 0xdc00:02x}" for c in range(0xdc80, 0xdd00)}}


def json_text(text: str) -> str:
    r"""``text`` as a strict JSON reader takes it.  A file's name with a byte that is no UTF-8 (Linux allows
    any) is read by Python as a lone surrogate (surrogateescape), which ``json.dumps`` wrote as ``"\udcff"``,
    refused by strict readers (jq, serde, any UTF-8 encoder); it is written as the byte's escape instead, as
    tables and messages show it (:func:`printable`), its exact bytes beside it in a dict
    (:data:`RAW_BYTES_SUFFIX`).  Any other text is returned as it is.

    Examples
    --------
    >>> json_text(os.fsdecode(b"bad\xff.mtx")), json_text("matrice_é.mtx")
    ('bad\\xff.mtx', 'matrice_é.mtx')
    >>> jsonable({"path": os.fsdecode(b"bad\xff.mtx")})
    {'path': 'bad\\xff.mtx', 'path_bytes': '626164ff2e6d7478'}
    """
    if text.isascii() or not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    return text.translate(_SURROGATES)


#: The note under a table whose errors carry "±" (estimated from random columns of a matrix never formed).
ESTIMATED_NOTE = ("± : half-width of a 95% interval; those errors are estimated from random columns (the matrix was "
                  "not formed)")


def interval_columns(method: str, interval=None) -> dict[str, Any]:
    """The CSV-only columns of ``method``'s 95 % interval (``"<method> 95% low"``, ``"... high"``): their values
    from ``interval`` (None: empty, an exact error); as titles, ``interval_columns(m, None).keys()``."""
    low, high = interval or (None, None)
    return {f"{method} 95% low": low, f"{method} 95% high": high}


def fmt_with_interval(value: float | None, interval, digits: int = 4) -> str:
    """An error with its 95 % interval: ``0.312 ± 0.004`` (the interval's half-width about ``value``), ``0.312 ± ?``
    where its upper end is unbounded (every sampled column alike: nothing bounds the others), the value alone
    without an interval (an exact error).

    Parameters
    ----------
    value : float or None
        The error.
    interval : (float, float) or None
        Its 95 % interval (``(low, high)``; ``high`` None or infinite when unbounded).
    digits : int, default=4
        Significant digits of the error (the half-width gets 2).

    Examples
    --------
    >>> fmt_with_interval(0.3124, (0.3084, 0.3164)), fmt_with_interval(0.5, (0.4, None)), fmt_with_interval(0.5, None)
    ('0.3124 ± 0.004', '0.5 ± ?', '0.5')
    """
    if value is None or not interval:
        return fmt_number(value, digits)
    low, high = interval
    if high is None or not math.isfinite(high):
        return f"{fmt_number(value, digits)} ± ?"
    return f"{fmt_number(value, digits)} ± {fmt_number(max(high - value, value - low), 2)}"


#: The escapes of a name's bytes that are no UTF-8 alone (:func:`to_ascii` writes them so, too).
_UNDECODABLE = {c: _ESCAPED[c] for c in range(0xdc80, 0xdd00)}


def shell_join(words: list[str], *, ascii: bool = False) -> str:
    """A command line of ``words``, each quoted by :func:`shell_quote` (as :func:`shlex.join` quotes)."""
    return " ".join(shell_quote(word, ascii=ascii) for word in words)


def shell_command(*words: str, ascii: bool = False) -> str:
    r"""``sfapprox`` and ``words``, quoted by :func:`shell_quote`: each command a message tells the user to
    type is written by this one function (a placeholder such as ``MANIFEST`` or an option is a word that
    needs no quoting).

    A message is quoted for a UTF-8 stream unless told otherwise (``ascii``): an exception's or a
    report's text cannot know where it will be printed.  The CLI re-quotes the commands of what it prints
    on a stream that writes ASCII only (:func:`ascii_commands`): there ``'matrice_é.npy'`` showed as
    ``'matrice_\u00e9.npy'``, which no shell reads as the file.

    Examples
    --------
    >>> shell_command("report", "my runs"), shell_command("report", "é", ascii=True)
    ("sfapprox report 'my runs'", "sfapprox report $'\\xc3\\xa9'")
    """
    return shell_join(["sfapprox", *words], ascii=ascii)


#: One word of a command :func:`shell_command` wrote: unquoted characters, ``'...'`` (and its ``"'"``
#: for a quote, as :func:`shlex.quote` writes one) or ``$'...'`` with escapes.
_SHELL_WORD = r"""(?:[A-Za-z0-9_@%+=:,./-]|'[^']*'|"'"|\$'(?:[^'\\]|\\.)*')+"""
#: The CLI's commands (tests/test_formats.py holds it to the app's): ``sfapprox`` and another word is prose
#: ("sfapprox does 'é'"), not a command whose words are re-quoted.
CLI_COMMANDS = ("batch", "compare", "datasets", "fit", "formats", "info", "methods", "report", "sweep")
#: A command in a message: ``sfapprox``, one of its commands, and the words after it, one space apart.
_COMMAND = re.compile(rf"\bsfapprox (?:{'|'.join(CLI_COMMANDS)})(?: {_SHELL_WORD})*")
#: The pieces of one word, as :func:`_unquoted` reads them back.
_WORD_PIECE = re.compile(r"""'([^']*)'|"(')"|\$'((?:[^'\\]|\\.)*)'|([^'"$]+)""")
#: The escapes :func:`shell_quote` writes in ``$'...'``: a character, or (``\xNN`` above 0x7f) a byte
#: that is no UTF-8, read back as Python reads such a byte of a name (surrogateescape).
_SHELL_ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|.)")


def ascii_commands(text: str) -> str:
    r"""``text`` with each command :func:`shell_command` wrote in it quoted for a stream that writes ASCII
    only: a word that is not ASCII as its bytes (``$'matrice_\xc3\xa9.npy'``), which a shell reads back
    as the file in any locale.  The rest of ``text`` is left as it is (:func:`to_ascii` spells it).

    Examples
    --------
    >>> print(ascii_commands(f"run first: {shell_command('batch', 'M', '--out-dir', 'runs é')}; then"))
    run first: sfapprox batch M --out-dir $'runs \xc3\xa9'; then
    """
    if text.isascii() or "sfapprox " not in text:
        return text
    return _COMMAND.sub(lambda command: re.sub(_SHELL_WORD, _ascii_word, command.group()), text)


def _ascii_word(word: re.Match) -> str:
    """One word of a command, quoted as :func:`shell_quote` quotes for an ASCII stream."""
    return word.group() if word.group().isascii() else shell_quote(_unquoted(word.group()), ascii=True)


def _unquoted(word: str) -> str:
    """The text a shell reads from ``word`` as :func:`shell_quote` quoted it."""
    return "".join(piece[0] or piece[1] or piece[3] or _SHELL_ESCAPE.sub(_unescaped, piece[2])
                   for piece in _WORD_PIECE.findall(word))


def _unescaped(escape: re.Match) -> str:
    code = escape.group(1)
    if code[0] in "xu" and len(code) > 1:
        value = int(code[1:], 16)
        return chr(0xdc00 + value if code[0] == "x" and value > 0x7f else value)
    return code


#: ASCII spellings of the glyphs sfapprox writes (tables, notes, help), for a terminal or a log that cannot show
#: them (``PYTHONIOENCODING=ascii``, a Latin-1 locale).  Box drawing is rich's to replace (it draws ASCII boxes
#: for such a stream).  Only in sfapprox's own words: a name's characters are escapes (:func:`to_ascii`).
_ASCII = str.maketrans({
    "±": "+/-", "×": "x", "→": "->", "←": "<-", "≥": ">=", "≤": "<=", "≈": "~", "…": "...", "√": "sqrt",
    "‖": "||", "−": "-", "–": "-", "—": "-", "·": "*", "★": "*", "′": "'", "µ": "u", "²": "^2", "³": "^3",
    "ᵀ": "^T", "⁺": "^+", "⌈": "ceil(", "⌉": ")", "⌊": "floor(", "⌋": ")", "━": "-", "─": "-", "│": "|",
    # a set's union (``--base``'s help) and the marks of datasets' lines and tables, which were "?"
    "∪": "U", "✓": "+", "✔": "+", "✗": "x", "✘": "x",
    "\u0302": "^",  # the hat of X̂ (a combining circumflex)
    # the subscripts of the methods' formulas (log₂N, b₁) and a batch report's deviation columns ("Δ tsvd")
    "₁": "1", "₂": "2", "Δ": "delta", "β": "beta",  # (β: the batch report's column)
})
#: sfapprox's own words with a letter beyond :data:`_ASCII` (a method's name): spelled without the accent.
_OWN_WORDS = re.compile("Nyström")
#: A word (between spaces) with a character that is not ASCII.
_NOT_ASCII_WORD = re.compile(r"\S*[^\x00-\x7f]\S*")


#: The glyphs a stream is tried on (:func:`encodes_glyphs`): one that cannot write all of them gets every text of
#: sfapprox in ASCII (the combining hat of X̂ is missing from Shift-JIS and GBK, which have ‖ and ━).
GLYPHS = "‖−X̂±★━"


def encodes_glyphs(encoding: str) -> bool:
    """Whether a stream in ``encoding`` can write sfapprox's glyphs (:data:`GLYPHS`); not with
    ``PYTHONIOENCODING=ascii``, a Latin-1 or a Shift-JIS locale, where they are spelled in ASCII
    (:func:`to_ascii`).  One test for the tables' layout and for the streams' error handler.

    Raises
    ------
    LookupError
        For an encoding Python does not know (each caller has its own answer to that).

    Examples
    --------
    >>> encodes_glyphs("utf-8"), encodes_glyphs("latin-1"), encodes_glyphs("shift_jis")
    (True, False, False)
    """
    try:
        GLYPHS.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def to_ascii(text: str) -> str:
    r"""``text`` in ASCII, for a stream whose encoding cannot write it (printing raised UnicodeEncodeError).

    sfapprox's glyphs are spelled out (``±`` as ``+/-``, ``‖X−X̂‖_F`` as ``||X-X^||_F``, ``Nyström`` as
    ``Nystrom``); a word (between spaces) with any other character is someone's name (a file's, a tensor's)
    and each of its characters that is not ASCII is written as its escape (``matrice_\u00e9.mtx``, a byte
    that is no UTF-8 as ``\xff``), its glyphs too: two names that differ there showed alike
    (``matrice_e``, ``??.mtx``), and alike a name that has the letters spelled.  A command to type is
    quoted as its bytes instead (:func:`ascii_commands`), as a shell reads it back.

    Examples
    --------
    >>> to_ascii("‖X−X̂‖_F ± 2·N²"), to_ascii("Nyström ★")
    ('||X-X^||_F +/- 2*N^2', 'Nystrom *')
    >>> print(to_ascii("行列.mtx: N² = 144"), to_ascii("a×é.mtx"))
    \u884c\u5217.mtx: N^2 = 144 a\u00d7\u00e9.mtx
    """
    text = ascii_commands(text)
    if text.isascii():
        return text
    return _NOT_ASCII_WORD.sub(lambda word: _ascii_part(word.group(), _own_word(word.group())), text)


def ascii_in_context(text: str, start: int, end: int) -> str:
    """``text[start:end]`` in ASCII as :func:`to_ascii` writes it within ``text``: spelled where the word around
    it is sfapprox's own, escaped where it is a name (for a stream's error handler, which gets such a part).

    Examples
    --------
    >>> ascii_in_context("Nyström needs", 5, 6), ascii_in_context("Schröder.mtx", 4, 5)
    ('o', '\\\\u00f6')
    """
    first, last = start, end
    while first > 0 and not text[first - 1].isspace():
        first -= 1
    while last < len(text) and not text[last].isspace():
        last += 1
    return _ascii_part(text[start:end], _own_word(text[first:last]))


def _own_word(word: str) -> bool:
    """Whether ``word`` is sfapprox's own text: beyond ASCII only its glyphs (:data:`_ASCII`) and its own words,
    and no file's name (``a×b.mtx``: its ``×`` spelled, it read as ``axb.mtx``)."""
    return all(c.isascii() or ord(c) in _ASCII for c in _OWN_WORDS.sub("", word)) and not _FILE_NAME.search(word)


#: The end of a word that names a file: a suffix (``.mtx``, ``.h5``), then any closing quotes or punctuation.
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}[\"'),;:\]]*$")


def _ascii_part(text: str, own: bool) -> str:
    """``text`` in ASCII: spelled (``own``: glyphs, accents dropped), else each character that is not ASCII as
    its escape (a byte that is no UTF-8 as ``\\xNN``, as :func:`printable` writes it)."""
    if not own:
        return "".join(c if c.isascii() else _escape(c) for c in text)
    text = text.translate(_ASCII)
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c if c.isascii() else "" if unicodedata.combining(c) else _escape(c) for c in decomposed)


def _escape(char: str) -> str:
    """One character as Python writes it escaped: ``\\xNN`` (a byte that is no UTF-8), ``\\uNNNN``, ``\\UNNNNNNNN``."""
    code = ord(char)
    if code in _UNDECODABLE:
        return _UNDECODABLE[code]
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def ascii_table(table: Table) -> Table:
    """``table`` with every text a terminal shows in ASCII (:func:`to_ascii`), so that it is laid out
    on the text it prints (a glyph spelled out after the layout would push its column out of line)."""
    def lines(items: list[str]) -> list[str]:
        return [to_ascii(item) for item in items]

    return dataclasses.replace(
        table, title=to_ascii(table.title),
        columns=[dataclasses.replace(c, title=to_ascii(c.title)) for c in table.columns],
        rows=[{k: to_ascii(v) if isinstance(v, str) else v for k, v in row.items()} for row in table.rows],
        notes=lines(table.notes), terminal_notes=lines(table.terminal_notes),
        hidden_notes={k: lines(v) for k, v in table.hidden_notes.items()})


def fmt_number(value: float | None, digits: int = 4) -> str:
    """``0.08742`` / ``3.52e+04``; "–" for missing values.

    Parameters
    ----------
    value : float or None
        The number; None, NaN and infinities give "–".
    digits : int, default=4
        Significant digits (``"g"`` format).

    Examples
    --------
    >>> fmt_number(0.087423), fmt_number(35213.9), fmt_number(None)
    ('0.08742', '3.521e+04', '–')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}g}"


def counted(value: int | None, noun: str, plural: str | None = None) -> str:
    """``value`` and ``noun`` in the singular or plural ("1 number", "2,688 numbers"; a verdict's, a figure's,
    a report's "3 matrices"), "–" for a missing value.

    Examples
    --------
    >>> counted(1, "number"), counted(2688, "number"), counted(3, "entry", "entries")
    ('1 number', '2,688 numbers', '3 entries')
    """
    return f"{MISSING if value is None else f'{value:,}'} {noun if value == 1 else plural or noun + 's'}"


def and_listed(words: list[str]) -> str:
    """``words`` as a sentence names them: "a", "a and b", "a, b and c" (rows, methods, parts of a note).

    Examples
    --------
    >>> and_listed(["sf"]), and_listed(["sf", "sf+lr"]), and_listed(["sf", "sf+lr", "sf+s"])
    ('sf', 'sf and sf+lr', 'sf, sf+lr and sf+s')
    """
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def listed(items: list[str], most: int = 5) -> str:
    """Up to ``most`` of ``items`` joined by commas, the rest counted ("a, b and 1,204 more"): a message that
    names them stays one line however many there are.

    Examples
    --------
    >>> listed(["a/sf", "b/sf"]), listed([f"m{i}" for i in range(1206)], most=2)
    ('a/sf, b/sf', 'm0, m1 and 1,204 more')
    """
    left = len(items) - most
    return ", ".join(items[:most]) + (f" and {count_text(left)} more" if left > 0 else "")


def shape_text(shape: tuple[int, ...] | Any) -> str:
    """An array's shape as messages write a matrix's (``60,025 x 60,025``): each dimension thousands-separated,
    ``x`` between them (a tuple's ``(60025, 60025)`` read as one number of ten digits), "scalar" for none.

    Examples
    --------
    >>> shape_text((60025, 60025)), shape_text((3,)), shape_text(())
    ('60,025 x 60,025', '3', 'scalar')
    """
    return " x ".join(f"{int(s):,}" for s in shape) if len(shape) else "scalar"


def shape_phrase(shape: tuple[int, ...] | Any) -> str:
    """What a message says an array it got was: ``shape 3 x 4`` (:func:`shape_text`), or ``a scalar``
    (not "shape scalar").

    Examples
    --------
    >>> shape_phrase((3, 4)), shape_phrase(())
    ('shape 3 x 4', 'a scalar')
    """
    return f"shape {shape_text(shape)}" if len(shape) else "a scalar"


#: The largest count a float holds exactly (2**53): beyond it a count read from ``1e30`` has digits that are
#: the float's, not the user's, and :func:`count_text` writes three significant digits.
_EXACT_FLOAT = 2 ** 53


def count_text(value: int) -> str:
    """A count as messages write one: thousands-separated (``1,230,000``), three significant digits beyond
    what a float holds exactly (``1e+30``: a count read from the float ``1e30`` is 1,000,000,000,000,000,019,884,
    624,838,656, digits nobody asked for).

    Examples
    --------
    >>> count_text(1230000), count_text(10 ** 30), count_text(7)
    ('1,230,000', '1e+30', '7')
    """
    return f"{value:,}" if abs(value) < _EXACT_FLOAT else f"{value:.3g}"


def fact_text(value: Any) -> str:
    """A fact's value as ``info``'s summary shows it: a float to 6 significant digits (a bandwidth's 17
    digits wrapped over two lines at 40 columns), an integer with thousands separators (as ``compare``'s
    table writes counts), None as "–", anything else as its text.

    Examples
    --------
    >>> fact_text(0.123456789), fact_text(27000), fact_text(None), fact_text(True)
    ('0.123457', '27,000', '–', 'True')
    """
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "–" if value is None else str(value)


def fmt_seconds(value: float | None) -> str:
    """Seconds in one format everywhere: two decimals (``0.03``, ``12.40``, ``61.02``).

    Parameters
    ----------
    value : float or None
        Seconds; None gives "–".

    Examples
    --------
    >>> fmt_seconds(0.0312), fmt_seconds(61.019)
    ('0.03', '61.02')
    """
    return "–" if value is None else f"{value:.2f}"


def limit_text(seconds: float) -> str:
    """A time limit (or a sum of them) as a sentence says it: three significant digits below 100 s, whole
    seconds thousands-separated from there (``.3g`` alone wrote 1,200 s as "1.2e+03").

    Examples
    --------
    >>> limit_text(10.9578), limit_text(1200.0), limit_text(36000.0)
    ('11', '1,200', '36,000')
    """
    return f"{seconds:.3g}" if seconds < 100 else f"{seconds:,.0f}"


# ----------------------------------------------------------------------------- renderers
def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


#: LaTeX's special characters, and the non-ASCII symbols sfapprox's own text uses (method
#: formulas such as "2·N·log₂N" and "C W⁺ Cᵀ", titles, cells).  pdflatex without a Unicode setup
#: stops at any character it has no definition for, so each maps to plain ASCII LaTeX that needs no
#: package: a math symbol in ``$...$``, typography as its text-mode ligature or command.
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "X̂": r"$\hat X$",  # a two-code-point symbol (X + combining circumflex), kept whole
                  # typography
                  "–": "--", "—": "---", "…": r"\ldots{}", "‘": "`", "’": "'", "“": "``", "”": "''",
                  "\u00a0": "~", "\u2009": r"\,", "\u202f": r"\,", "\u00ad": r"\-", "§": r"\S{}", "¶": r"\P{}",
                  "†": r"\dag{}", "‡": r"\ddag{}", "©": r"\copyright{}", "£": r"\pounds{}", "•": r"$\bullet$",
                  "ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "œ": r"\oe{}", "Œ": r"\OE{}", "ø": r"\o{}",
                  "Ø": r"\O{}", "ł": r"\l{}", "Ł": r"\L{}", "ı": r"\i{}", "ȷ": r"\j{}",
                  # operators and relations (all in LaTeX's own math fonts: no amssymb)
                  "·": r"$\cdot$", "⋅": r"$\cdot$", "∙": r"$\bullet$", "×": r"$\times$", "÷": r"$\div$",
                  "−": r"$-$", "±": r"$\pm$", "∓": r"$\mp$", "∗": r"$\ast$", "∘": r"$\circ$", "°": r"$^\circ$",
                  "√": r"$\surd$", "∞": r"$\infty$", "∑": r"$\sum$", "∏": r"$\prod$", "∂": r"$\partial$",
                  "∇": r"$\nabla$", "⊙": r"$\odot$", "⊗": r"$\otimes$", "⊕": r"$\oplus$", "ℓ": r"$\ell$",
                  "≥": r"$\geq$", "≤": r"$\leq$", "≠": r"$\neq$", "≈": r"$\approx$", "≡": r"$\equiv$",
                  "∼": r"$\sim$", "≪": r"$\ll$", "≫": r"$\gg$", "∝": r"$\propto$", "∈": r"$\in$",
                  "∉": r"$\notin$", "∪": r"$\cup$", "∩": r"$\cap$", "⊂": r"$\subset$", "⊆": r"$\subseteq$",
                  "∅": r"$\emptyset$", "∀": r"$\forall$", "∃": r"$\exists$", "¬": r"$\neg$", "∧": r"$\wedge$",
                  "∨": r"$\vee$", "⊥": r"$\perp$", "→": r"$\to$", "←": r"$\leftarrow$", "↔": r"$\leftrightarrow$",
                  "⇒": r"$\Rightarrow$", "⇐": r"$\Leftarrow$", "⇔": r"$\Leftrightarrow$", "↑": r"$\uparrow$",
                  "↓": r"$\downarrow$", "‖": r"$\|$", "⌈": r"$\lceil$", "⌉": r"$\rceil$", "⌊": r"$\lfloor$",
                  "⌋": r"$\rfloor$", "⟨": r"$\langle$", "⟩": r"$\rangle$", "′": r"$'$", "″": r"$''$",
                  "⁄": "/", "ᵀ": r"$^\top$", "µ": r"$\mu$", "★": r"$\star$", "☆": r"$\star$",
                  # marks of tables (✓ has no symbol in plain LaTeX: \checkmark is amssymb's; \surd is its
                  # classic stand-in)
                  "✓": r"$\surd$", "✔": r"$\surd$", "✗": r"$\times$", "✘": r"$\times$"}

#: Greek letters by their Unicode name's last word; the capitals LaTeX has no command for look like
#: Latin ones ("Α" is "A").
_LATEX_GREEK = {"alpha": r"\alpha", "beta": r"\beta", "gamma": r"\gamma", "delta": r"\delta",
                "epsilon": r"\epsilon", "zeta": r"\zeta", "eta": r"\eta", "theta": r"\theta", "iota": r"\iota",
                "kappa": r"\kappa", "lamda": r"\lambda", "mu": r"\mu", "nu": r"\nu", "xi": r"\xi", "omicron": "o",
                "pi": r"\pi", "rho": r"\rho", "sigma": r"\sigma", "final sigma": r"\varsigma", "tau": r"\tau",
                "upsilon": r"\upsilon", "phi": r"\phi", "chi": r"\chi", "psi": r"\psi", "omega": r"\omega"}
_LATEX_GREEK_CAPITAL = {"gamma", "delta", "theta", "lamda", "xi", "pi", "sigma", "upsilon", "phi", "psi", "omega"}
_LATEX_GREEK_LATIN = {"alpha": "A", "beta": "B", "epsilon": "E", "zeta": "Z", "eta": "H", "iota": "I", "kappa": "K",
                      "mu": "M", "nu": "N", "omicron": "O", "rho": "P", "tau": "T", "chi": "X"}

#: Combining accents and the text-mode accent command that puts each on a letter ("ö" is o + U+0308).
_LATEX_ACCENTS = {"\u0300": "\\`", "\u0301": "\\'", "\u0302": "\\^", "\u0303": "\\~", "\u0304": "\\=",
                  "\u0306": "\\u", "\u0307": "\\.", "\u0308": '\\"', "\u030a": "\\r", "\u030b": "\\H",
                  "\u030c": "\\v", "\u0327": "\\c", "\u0328": "\\k", "\u0323": "\\d", "\u0331": "\\b"}


def _latex_escape(text: str) -> str:
    """``text`` as LaTeX that plain pdflatex typesets: special characters escaped, and no character
    outside ASCII left.

    Parameters
    ----------
    text : str
        A title or a cell, as shown in a terminal (it may hold "·", "₂", "ᵀ", "≥", "ö", ...).

    Returns
    -------
    str
        Pure ASCII: every non-ASCII character is mapped to LaTeX (math symbols in ``$...$``,
        sub- and superscripts as ``$_2$``/``$^+$``, accented letters as ``\\"{o}``); one that has
        no LaTeX equivalent becomes ``\\texttt{[U+XXXX]}``, never the character itself.

    Examples
    --------
    >>> _latex_escape("2·N·log₂N, C W⁺ Cᵀ, Nyström")
    '2$\\\\cdot$N$\\\\cdot$log$_2$N, C W$^+$ C$^\\\\top$, Nystr\\\\"{o}m'
    """
    # Compose first so that "o" + U+0308 and "ö" read alike; then each base character with the
    # combining marks that follow it is one cluster (the marks are accents on that base).
    text = unicodedata.normalize("NFC", text)
    out, start = [], 0
    while start < len(text):
        end = start + 1
        while end < len(text) and unicodedata.combining(text[end]):
            end += 1
        out.append(_latex_cluster(text[start:end]))
        start = end
    return "".join(out)


def _latex_cluster(cluster: str, compatible: bool = True) -> str:
    """One character (and the combining marks on it) as ASCII LaTeX; see :func:`_latex_escape`."""
    if cluster in _LATEX_SPECIAL:
        return _LATEX_SPECIAL[cluster]
    if cluster.isascii():
        return cluster
    decomposed = unicodedata.normalize("NFD", cluster)
    base, marks = decomposed[0], decomposed[1:]
    if marks:
        shown = _latex_cluster(base)
        if base.isascii() and base.isalpha() or base in "ıȷ":
            for mark in marks:  # innermost first: U+0323 then U+0302 on "a" is \^{\d{a}}
                shown = f"{_LATEX_ACCENTS[mark]}{{{shown}}}" if mark in _LATEX_ACCENTS else shown
        # a mark LaTeX has no text accent for, or one on a symbol, is dropped: the base stays readable
        return shown
    name = unicodedata.name(cluster, "")
    if name.startswith("GREEK ") and " LETTER " in name:
        letter = name.split(" LETTER ", 1)[1].lower()
        capital = name.startswith("GREEK CAPITAL")
        if capital and letter in _LATEX_GREEK_LATIN:
            return _LATEX_GREEK_LATIN[letter]
        if letter in _LATEX_GREEK:
            command = _LATEX_GREEK[letter]
            command = "\\" + command[1].upper() + command[2:] if capital and letter in _LATEX_GREEK_CAPITAL else command
            return f"${command}$" if command.startswith("\\") else command
    # sub- and superscript forms ("₂", "⁺", "ⁿ") are their character, lowered or raised
    tag, _, _ = unicodedata.decomposition(cluster).partition(" ")
    plain = unicodedata.normalize("NFKC", cluster)
    if tag in ("<sub>", "<super>") and len(plain) == 1 and (plain.isalnum() and plain.isascii() or plain in "+-=()"):
        return f"${'_' if tag == '<sub>' else '^'}{plain}$"
    category = unicodedata.category(cluster)
    if category == "Zs":  # any other space (en, em, figure space...): a space
        return " "
    if category == "Cf":  # zero-width joiners, byte-order marks: nothing to typeset
        return ""
    # compatibility forms ("ﬁ" is "fi", "½" is "1⁄2", full-width letters): their plain spelling, once
    if compatible and plain != cluster:
        return "".join(_latex_cluster(ch, compatible=False) for ch in plain)
    # The fallback for anything else (emoji, CJK, rare symbols): its code point, so the LaTeX stays
    # ASCII (pdflatex would stop at the character) and the reader still sees that something was there.
    return "".join(rf"\texttt{{[U+{ord(ch):04X}]}}" for ch in cluster)


def render_csv(tables: list[Table]) -> str:
    """All tables as one CSV: one header (the union of the tables' columns, by title), with a
    leading ``table`` column when there are several tables; cells a table lacks are empty.  A
    table's values are written as data where it has them (:attr:`Table.data`: full precision, no
    thousands separators, no marks), else as their text.

    Parameters
    ----------
    tables : list of Table
        The tables, in order.

    Returns
    -------
    str
        The CSV text ("" when no table has a column); notes are left out.
    """
    titles, rows = _flat_records(tables)
    if not titles:
        return ""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(titles)
    writer.writerows(rows)
    return buffer.getvalue()


def _flat_records(tables: list[Table], missing: Any = "") -> tuple[list[str], list[list[Any]]]:
    """The tables' rows under one header, as CSV has them (:func:`render_csv`) and a DataFrame
    (:func:`render_frame`): the union of their titles, a leading ``table`` column (the title) when there
    are several, ``missing`` where a value is missing or a table lacks the column."""
    several = len(tables) > 1
    views = [table.records(missing) for table in tables]
    titles = list(dict.fromkeys(t for own, _ in views for t in own))
    if not titles:
        return [], []
    out = []
    for table, (own, rows) in zip(tables, views):
        for values in rows:
            by_title = dict(zip(own, values))
            out.append(([printable(table.title)] if several else []) + [by_title.get(t, missing) for t in titles])
    return (["table"] if several else []) + titles, out


def render_frame(tables: list[Table]) -> Any:
    """All tables as one pandas DataFrame: CSV's columns and values (:func:`render_csv`: full precision,
    no separators or marks, the winner as a column of its own), a missing value as None (NaN in a column
    of numbers).  For the ``to_frame()`` of the result objects.

    Parameters
    ----------
    tables : list of Table
        The tables, in order.

    Returns
    -------
    pandas.DataFrame
        A row per table row; a leading ``table`` column (the title) when there are several tables.

    Raises
    ------
    SfapproxError
        When pandas is not installed (sfapprox does not depend on it).
    """
    try:
        import pandas  # here, and only here: pandas is no dependency of sfapprox
    except ImportError:
        from ._errors import SfapproxError

        raise SfapproxError("to_frame() needs pandas, which sfapprox does not install: pip install pandas") from None
    titles, rows = _flat_records(tables, missing=None)
    # by column: one with no value at all (an interval's ends where every error is exact) is a column of
    # NaN, as pandas.read_csv reads the CSV's, not one of None objects
    columns = [pandas.Series([row[i] for row in rows], dtype=float if rows and all(row[i] is None for row in rows)
                             else None) for i in range(len(titles))]
    frame = pandas.DataFrame(dict(enumerate(columns)))
    frame.columns = titles  # by position: two tables may share no title, but a title may repeat
    return frame


def _html_text(text: str) -> str:
    """``text`` as HTML: escaped (a matrix's name is its file's: ``<b>x&y</b>.mtx`` is text, not markup),
    what a terminal would act on written as escapes (:func:`printable`), a line break as ``<br>``."""
    return html.escape(printable(text), quote=True).replace("\n", "<br>")


_HTML_ALIGN = {"left": "left", "right": "right", "center": "center"}


def render_html(tables: list[Table], facts: list[tuple[str, str]] | None = None) -> str:
    """The tables as HTML, as a terminal shows them (:func:`render_rich`): each title, the table with its
    columns' alignment and the winner in bold, its notes under it; a long listing is shown by the rows a
    terminal shows (:attr:`Table.terminal_rows`, said in its ``terminal_notes``).  Every text is escaped.
    For a notebook (the ``_repr_html_`` of the result objects).

    Parameters
    ----------
    tables : list of Table
        The tables, in order.
    facts : list of (str, str), optional
        Label/value pairs shown first, as a two-column table (``sfapprox info``'s summary).

    Returns
    -------
    str
        One ``<div>`` holding everything.

    Examples
    --------
    >>> t = Table("<b>x&y</b>", [Column("method", "method", "left"), Column("error", "error")])
    >>> t.add({"method": "sf", "error": "0.1"}, best={"error"})
    >>> print(render_html([t]))  # doctest: +ELLIPSIS
    <div>
    <p><i>&lt;b&gt;x&amp;y&lt;/b&gt;</i></p>
    ...<td style="text-align: right"><b>0.1</b></td>...
    """
    out = ["<div>"]
    if facts:
        out.append("<table>")
        out.extend(f'<tr><th style="text-align: left">{_html_text(str(k))}</th>'
                   f'<td style="text-align: left">{_html_text(str(v))}</td></tr>' for k, v in facts)
        out.append("</table>")
    for whole in tables:
        table = _terminal_view(whole)
        out.append(f"<p><i>{_html_text(table.title)}</i></p>")
        out.append("<table>")
        align = [f' style="text-align: {_HTML_ALIGN.get(c.align, "left")}"' for c in table.columns]
        out.append("<thead><tr>" + "".join(f"<th{a}>{_html_text(c.title)}</th>" for c, a in zip(table.columns, align))
                   + "</tr></thead>")
        out.append("<tbody>")
        for cells, best in zip(table.cells(), table.best):
            shown = [f"<b>{_html_text(v)}</b>" if c.key in best else _html_text(v)
                     for c, v in zip(table.columns, cells)]
            out.append("<tr>" + "".join(f"<td{a}>{v}</td>" for a, v in zip(align, shown)) + "</tr>")
        out.append("</tbody></table>")
        if table.notes:
            out.append("<p>" + "<br>".join(_html_text(n) for n in table.notes) + "</p>")
    out.append("</div>")
    return "\n".join(out)


class ShownAsTables:
    """A result that a notebook shows as its command's tables (``_repr_html_``, :func:`render_html`) and that
    :meth:`to_frame` gives as a pandas DataFrame (:func:`render_frame`): one pair for every result class.

    A subclass names its tables in :meth:`_shown_tables` (default: its ``tables()``); the columns of its
    DataFrame are those of its command's ``--csv``, said in its own docstring.
    """

    def _shown_tables(self) -> list[Table]:
        """The tables a notebook shows and :meth:`to_frame` flattens: the command's ``--csv`` tables."""
        return self.tables()

    def _repr_html_(self) -> str:
        """The tables as HTML, for a notebook (:func:`render_html`)."""
        return render_html(self._shown_tables())

    def to_frame(self) -> Any:  # pandas.DataFrame: Any, since pandas is optional (not imported here)
        """The tables' rows as a pandas DataFrame: the values of the command's ``--csv`` (full precision,
        marks such as the winner as columns of their own; the class's docstring names the columns).

        Returns
        -------
        pandas.DataFrame
            A row per table row; a missing value is NaN (None in a column of text); a leading ``table``
            column (the table's title) where there are several tables.

        Raises
        ------
        SfapproxError
            When pandas is not installed (sfapprox does not depend on it: ``pip install pandas``).
        """
        return render_frame(self._shown_tables())


def render_markdown(tables: list[Table]) -> str:
    """All tables as Markdown (the winner in bold), each under its title.

    Parameters
    ----------
    tables : list of Table
        The tables, in order.

    Returns
    -------
    str
    """
    out = []
    for table in tables:
        out.append(f"### {_md_escape(printable(table.title))}\n")
        out.append("| " + " | ".join(_md_escape(c.title) for c in table.columns) + " |")
        out.append("|" + "|".join("---:" if c.align == "right" else "---" for c in table.columns) + "|")
        for cells, best in zip(table.cells(), table.best):
            shown = [f"**{_md_escape(v)}**" if c.key in best else _md_escape(v) for c, v in zip(table.columns, cells)]
            out.append("| " + " | ".join(shown) + " |")
        out.extend(["", *(f"{_md_escape(printable(n))}  " for n in table.notes), ""] if table.notes else [""])
    return "\n".join(out).rstrip() + "\n"


def render_latex(tables: list[Table]) -> str:
    """All tables as LaTeX ``tabular`` environments (booktabs), the winner in bold.

    Parameters
    ----------
    tables : list of Table
        The tables, in order.

    Returns
    -------
    str
        One ``tabular`` per table, each after a ``%`` comment with its title;
        a table of more than :data:`LATEX_PAGE_ROWS` rows is a ``longtable``
        instead (it breaks across pages, its heading repeated on each);
        notes are left out.
    """
    out = []
    for table in tables:
        spec = "".join("r" if c.align == "right" else "l" for c in table.columns)
        heading = " & ".join(_latex_escape(c.title) for c in table.columns) + r" \\"
        out.append(f"% {_latex_escape(printable(table.title))}")
        # a tabular never breaks across pages: a report's 500 matrices ran off the first one
        long = len(table.rows) > LATEX_PAGE_ROWS
        if long:
            out.append(f"% a longtable: it needs \\usepackage{{longtable}} beside booktabs\n\\begin{{longtable}}{{{spec}}}")
            out.append(f"\\toprule\n{heading}\n\\midrule\n\\endhead\n\\bottomrule\n\\endlastfoot")
        else:
            out.append(f"\\begin{{tabular}}{{{spec}}}\n\\toprule\n{heading}\n\\midrule")
        for cells, best in zip(table.cells(), table.best):
            shown = [f"\\textbf{{{_latex_escape(v)}}}" if c.key in best else _latex_escape(v)
                     for c, v in zip(table.columns, cells)]
            out.append(" & ".join(shown) + r" \\")
        out.append("\\end{longtable}\n" if long else "\\bottomrule\n\\end{tabular}\n")
    return "\n".join(out)


#: Rows a LaTeX table holds before it is a ``longtable`` (a page of a tabular holds about 45).
LATEX_PAGE_ROWS = 40


def render_json(data: Any) -> str:
    """``data`` as indented JSON.

    Parameters
    ----------
    data : object
        A JSON-ready structure (passed through :func:`jsonable`).

    Returns
    -------
    str
        Indented JSON (non-finite numbers as null) and a final newline.
    """
    return json.dumps(jsonable(data), indent=2) + "\n"


#: Text columns wrap, in a narrow window, down to this width (a longer word is folded).
WRAP_MIN_WIDTH = 16
#: The most lines a free-text cell takes in a terminal table: a longer one (a method's reason for no result,
#: 19 lines at 16 columns) is a numbered note under the table, its cell the note's number.
NOTE_LINES = 4
#: The least width a name or a path folds to before a number column gives way.
FOLD_MIN_WIDTH = 4
#: The compact table style's gap between columns, and the boxed style's cost per column
#: (two padding spaces and a rule) plus its closing rule.
_GAP, _BOX_PER_COLUMN = 2, 3


def _words(text: str) -> list[str]:
    return text.split() or [""]


def _wraps(table: Table, index: int) -> bool:
    column = table.columns[index]
    if column.wrap is not None:
        return column.wrap
    return index > 0 and column.align == "left" and any(" " in row.get(column.key, "") for row in table.rows)


def _is_text(table: Table, index: int) -> bool:
    """Left-aligned: names, paths, statuses, free text, which may fold; the other columns hold numbers."""
    return table.columns[index].align == "left"


def _fold(widths: list[int], columns: list[int], excess: int, floor: int) -> int:
    """Take ``excess`` character cells from ``columns`` (in ``widths``, in place), one at a time from the
    widest, none below ``floor``; returns how many are still over."""
    while excess > 0:
        widest = max((i for i in columns if widths[i] > floor), key=lambda i: widths[i], default=None)
        if widest is None:
            break
        widths[widest] -= 1
        excess -= 1
    return excess


def _lines(text: str, width: int) -> int:
    """How many lines ``text`` takes wrapped at spaces to ``width`` cells (a longer word folded), as rich
    wraps a cell."""
    from rich.cells import cell_len  # here: only terminal tables need rich, not the file writers

    count = 0
    for line in text.splitlines() or [""]:
        used = 0
        count += 1
        for word in line.split():
            size = cell_len(word)
            if used and used + 1 + size > width:
                count, used = count + 1, 0
            if size > width:  # folded: the pieces before the last fill lines of their own
                count, used = count + (size - 1) // width, (size - 1) % width + 1
            else:
                used += size + (1 if used else 0)
    return count


def _long_cells_as_notes(table: Table, width: int | None) -> tuple[Table, Layout, list[str]]:
    """``table`` laid out for ``width``, each free-text cell longer than :data:`NOTE_LINES` lines at its
    column's width replaced by a number (``[1]``), and the notes those numbers stand for (``[1] nystrom:
    the reason``).

    At 100 columns a comparison of every method gave its details 16 cells and a reason ran 19 lines;
    leaving optional columns out for it would drop numbers that every row has.  Laid out again after each
    change: the column's natural width shrinks with its longest cells.
    """
    notes: list[str] = []
    while True:
        plan = layout(table, width)
        shown = {i for part in plan.parts for i in part}
        rows = [dict(row) for row in table.rows]
        for i in sorted(shown):
            if i == 0 or plan.boxed or not _wraps(table, i):
                continue
            key = table.columns[i].key
            for row in rows:
                text = row.get(key, "")
                if _lines(text, plan.widths[i]) > NOTE_LINES:
                    notes.append(f"[{len(notes) + 1}] {row.get(table.columns[0].key, '')}: {' '.join(text.split())}")
                    row[key] = f"[{len(notes)}]"
        if rows == table.rows:
            return table, plan, notes
        table = dataclasses.replace(table, rows=rows)


def _spare_first_column(widths: list[int], first: int, text: list[int], excess: int, floor: int,
                        folded: bool) -> int:
    """Take ``excess`` from the text columns ``text`` other than ``first`` (in ``widths``, in place, none
    below ``floor``) where they can give it all, so that ``first`` stays whole; returns what is still over.

    The first column holds the rows' names, repeated in every part at one width: a path beside it in one
    part ("file" in ``datasets list``) broke "lowrank-sparse-noisy-128" in every part at 40 columns.
    Where it must fold anyway, or is ``folded`` already (in an earlier part), nothing is taken here: the
    widest text folds first (:func:`_fold`).
    """
    others = [i for i in text if i != first]
    if folded or sum(max(0, widths[i] - floor) for i in others) < excess:
        return excess
    return _fold(widths, others, excess, floor)


def _column_widths(table: Table, index: int) -> tuple[int, int]:
    """(natural, minimum) width of a column: its widest cell or title line, and the least it can take.

    A cell that is not free text is never cut (its minimum is its width); a
    title may wrap at spaces; free text wraps down to :data:`WRAP_MIN_WIDTH`.
    """
    from rich.cells import cell_len  # here: only terminal tables need rich, not the file writers

    column = table.columns[index]
    cells = [row.get(column.key, "–") for row in table.rows]
    widest_cell = max((cell_len(line) for c in cells for line in (c.splitlines() or [""])), default=0)
    natural = max(widest_cell, cell_len(column.title))
    title_min = max(cell_len(w) for w in _words(column.title))
    if _wraps(table, index):
        return natural, max(title_min, min(natural, WRAP_MIN_WIDTH))
    return natural, max(title_min, widest_cell)


@dataclass
class Layout:
    """How one table is shown in a window: which columns, how wide, in which style.

    ``parts`` are lists of column indices: one part when the table fits,
    several (each repeating the first column) when even its essential
    columns do not; ``hidden`` are the optional columns left out.  A
    column's width below its widest cell means that its cells fold onto
    more lines.

    Attributes
    ----------
    parts : list of list of int
        The column indices shown in each part.
    widths : list of int
        The width of every column (by index), in character cells.
    boxed : bool
        The boxed style (the table fits at natural widths) or the compact one.
    hidden : list of str
        Titles of the optional columns left out.
    """

    parts: list[list[int]]
    widths: list[int]
    boxed: bool
    hidden: list[str]


def layout(table: Table, width: int | None) -> Layout:
    """Choose the columns and widths that show ``table`` within ``width`` characters (None: unbounded).

    In order: every column at its natural width in the boxed style; the
    compact style with free text wrapped; optional columns left out, lowest
    priority first; then the remaining columns split into several parts,
    each repeating the first column.  A part still too wide (a long name or
    path beside one other column) folds its text columns onto more lines,
    the widest first, down to :data:`FOLD_MIN_WIDTH`; numbers give way only
    in a window too narrow for them and that much text, and then fold too:
    nothing is ever cut.

    Parameters
    ----------
    table : Table
        The table to show.
    width : int or None
        The window's width in characters; None: unbounded.

    Returns
    -------
    Layout
    """
    sizes = [_column_widths(table, i) for i in range(len(table.columns))]
    wraps = [_wraps(table, i) for i in range(len(table.columns))]
    natural = [n for n, _ in sizes]
    every = list(range(len(table.columns)))
    if width is None or sum(natural) + _BOX_PER_COLUMN * len(every) + 1 <= width:
        return Layout([every], natural, True, [])
    least = [m for _, m in sizes]

    def need(cols: list[int]) -> int:
        return sum(least[i] for i in cols) + _GAP * (len(cols) - 1)

    shown = list(every)
    optional = sorted((i for i, c in enumerate(table.columns) if c.priority is not None and i != 0),
                      key=lambda i: table.columns[i].priority)
    hidden: list[str] = []
    while need(shown) > width and optional:
        drop = optional.pop(0)
        shown.remove(drop)
        hidden.append(table.columns[drop].title)
    parts = [shown]
    if need(shown) > width and len(shown) > 2:
        parts, current = [], [shown[0]]
        for i in shown[1:]:
            if len(current) > 1 and need(current + [i]) > width:
                parts.append(current)
                current = [shown[0]]
            current.append(i)
        parts.append(current)
    widths = list(least)
    for part in parts:
        # Measured on the widths so far: the first column, in every part, may have folded in an earlier one.
        spare = width - sum(widths[i] for i in part) - _GAP * (len(part) - 1)
        if spare < 0:  # even one column beside the first is too wide: text folds, numbers stay whole if they can
            text = [i for i in part if _is_text(table, i)]
            over = _spare_first_column(widths, part[0], text, -spare, max(FOLD_MIN_WIDTH, width // 3),
                                       folded=widths[part[0]] < least[part[0]])
            over = _fold(widths, text, over, FOLD_MIN_WIDTH)
            _fold(widths, part, over, 1)
        free = [i for i in part if wraps[i]]
        short = sum(natural[i] - least[i] for i in free)
        for i in free:  # free text shares what is left of the window, by how much each lacks
            widths[i] += min(natural[i] - least[i], max(0, spare) * (natural[i] - least[i]) // max(short, 1))
    return Layout(parts, widths, False, hidden)


#: A word of a message, as :func:`at_spaces` breaks it: a number and its unit are one ("8.73 s", "68.7 MiB":
#: "rpca 8.73" at a line's end and "s of 5 s" under it read as two figures), any other run of non-blanks one.
_WORD = re.compile(r"[(\[]?\d[\d,.]*\s(?:ms|s|[KMGT]i?B|B)(?!\w)\S*\s*|\S+\s*")


def at_spaces(text: Text, width: int) -> Text:
    """``text`` broken at spaces into lines of at most ``width`` cells, each line's trailing spaces dropped;
    a word wider than ``width`` (a path) has a line of its own, whole; a number stays beside its unit.

    Examples
    --------
    >>> from rich.text import Text
    >>> at_spaces(Text("wrote /a/rather/long/path.json and more"), 12).plain
    'wrote\\n/a/rather/long/path.json\\nand more'
    >>> at_spaces(Text("rpca ran 8.73 s of 5 s"), 13).plain
    'rpca ran\\n8.73 s of 5 s'
    """
    from rich.cells import cell_len
    from rich.text import Text

    lines: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        starts, used = [], 0
        for word in _WORD.finditer(line.plain):
            size = cell_len(word.group().rstrip())
            if used and used + size > width:
                starts.append(word.start())
                used = 0
            used += cell_len(word.group())
        for piece in line.divide(starts):
            piece.rstrip()
            lines.append(piece)
    return Text("\n").join(lines)


def list_heading(heading: str, width: int | None) -> Any:
    """A list's heading (a table's title, or the facts' where they are a list): in italic, broken at spaces
    to ``width`` cells (None: as it is), a word wider than that whole (:func:`at_spaces`)."""
    from rich.text import Text

    text = Text(heading, style="italic")
    return text if width is None else at_spaces(text, width)


def listed_item(key: str, lines: Sequence[str], width: int | None, indent: str = "  ", hang: str = "",
                style: str = "") -> list[Any]:
    """One item of a list that stands for a table too narrow for its window: ``key:`` in bold on a line of its
    own, then each of ``lines`` under it, indented and broken at spaces to ``width`` (None: as they are), a
    word wider than the room (a digest, a path) whole on a line of its own (printed with ``soft_wrap``, as
    ``info``'s facts are, the terminal wraps it and a copy is one piece; a table's list, printed as tables
    are, has rich fold it).

    ``info``'s facts at 20 columns (a value of words, "min -1, max 4, ‖X‖_F 35.33", was left to the terminal,
    which cut it mid-word), and a table whose rows' names a window cannot hold whole
    (:func:`render_rich`: "sf-s" / "ymme" / "tric" at 20 columns) are both listed so.

    Parameters
    ----------
    key : str
        The fact's key, or the row's name.
    lines : sequence of str
        Its value, or the row's other cells as ``"title: value"``.
    width : int or None
        The window's width in character cells.
    indent : str, default="  "
        What each of ``lines`` begins with.
    hang : str, default=""
        Added to ``indent`` on a line's continuations (a row's ``title: value`` broken: its words under the
        value's, not under the titles).
    style : str, default=""
        A rich style for ``lines`` (the winner's bold green).

    Returns
    -------
    list of rich.text.Text
        The key's line, then one Text per entry of ``lines``.
    """
    from rich.text import Text

    head = Text(f"{key}:", style="bold")
    return [head if width is None else at_spaces(head, width),
            *(_indented(value, width, indent, hang, style) for value in lines)]


def _indented(value: str, width: int | None, indent: str = "  ", hang: str = "", style: str = "") -> Any:
    """``value`` as :func:`listed_item` puts it under its key: ``indent`` before each line, ``indent + hang``
    before its continuations, broken at spaces to ``width`` (None: as it is)."""
    from rich.text import Text

    room = None if width is None else max(1, width - len(indent) - len(hang))
    text = Text(value, style=style)
    pieces = (text if room is None else at_spaces(text, room)).split("\n", allow_blank=True)
    return Text("\n").join(Text(indent + (hang if n else "")) + piece for n, piece in enumerate(pieces))


def _names_broken(table: Table, plan: Layout) -> bool:
    """Whether ``plan`` breaks most rows' names (``table``'s first column, repeated in every part) inside a
    word: at 20 columns ``info``'s methods read "sf-s" / "ymme" / "tric", 13 of 17 names in pieces, in each
    of three parts.  One long name among short ones (a report's 40-character matrix name) folds as before:
    the table still reads as one."""
    from rich.cells import cell_len

    if plan.boxed or not table.columns or not table.rows:
        return False
    key = table.columns[0].key
    broken = sum(any(cell_len(word) > plan.widths[0] for word in _words(row.get(key, ""))) for row in table.rows)
    return 2 * broken > len(table.rows)


def _as_list(table: Table, width: int | None) -> list[Any]:
    """``table`` as a list (:func:`listed_item`), for a window that cannot hold its rows' names whole: its
    title, then each row's name and under it every other cell as ``title: value`` (none left out, none
    made a numbered note: a list has the room), the winner's cells in bold green; then its notes."""
    from rich.text import Text

    out = [list_heading(printable(table.title), width)]
    for cells, best in zip(table.cells(), table.best):
        out.extend(listed_item(printable(cells[0]), [], width))
        for column, cell in zip(table.columns[1:], cells[1:]):
            line = f"{' '.join(column.title.split())}: {printable(cell)}"
            out.append(_indented(line, width, hang="  ", style="bold green" if column.key in best else ""))
    out.extend(Text(printable(n)) if width is None else at_spaces(Text(printable(n)), width) for n in table.notes)
    return out


def render_rich(tables: list[Table], width: int | None = None, *, capped: bool = True) -> list[Any]:
    """Rich tables for a terminal ``width`` characters wide (None: as wide as their content).

    The winner is in bold green; nothing is ever cut: a narrow window wraps
    free text (a cell longer than :data:`NOTE_LINES` lines becomes a numbered
    note under the table), then leaves out optional columns (said in a note), then splits
    the table into parts that each repeat the first column, and a name or a
    path still too wide folds onto more lines (:func:`layout`); a table whose
    rows' names would break for most rows is a list instead, each name on a
    line of its own and its cells under it (:func:`listed_item`).  Where
    ``capped``, a table that names the rows a terminal shows
    (:attr:`Table.terminal_rows`) is drawn with those only, its
    ``terminal_notes`` saying what was left out.

    Parameters
    ----------
    tables : list of Table
        The tables, in order.
    width : int or None, default=None
        The terminal's width in characters.
    capped : bool, default=True
        Draw the rows a terminal shows (:attr:`Table.terminal_rows`) only; False: every row (a pipe,
        whose reader may be ``grep``).

    Returns
    -------
    list of rich renderables
        For each table: its title (a ``Text``), one ``rich.table.Table`` per
        part, then its notes (``Text`` each).
    """
    from ._global_state import python_random_kept

    # here: only terminal tables need rich, not the file writers (imported with the caller's random state
    # put back: rich draws from it as it loads)
    with python_random_kept():
        from rich import box
        from rich.table import Table as RichTable
        from rich.text import Text

    out: list[Any] = []
    for whole in tables:
        table = _terminal_view(whole) if capped else whole  # measured and drawn on the rows shown: ~0.4 ms a row
        shown, plan, numbered = _long_cells_as_notes(table, width)
        if _names_broken(table, plan):  # the rows' names whole, each row's cells under its name
            out.extend(_as_list(table, width))
            continue
        table = shown
        for number, part in enumerate(plan.parts):
            title = table.title if number == 0 else f"{table.title} (continued)"
            style = (dict(box=box.HEAVY_HEAD) if plan.boxed else
                     dict(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True))
            # The title on a line of its own: wrapped at the window, not at a narrow table's width.
            out.append(Text(printable(title), style="italic"))
            rich = RichTable(**style)
            for i in part:
                c = table.columns[i]
                rich.add_column(Text(c.title, overflow="fold"), justify=c.align if c.align in ("left", "right", "center") else "left",
                                width=plan.widths[i], overflow="fold", no_wrap=False)
            # No cell is cropped (rich's no_wrap would cut one wider than its column, silently): the layout
            # gives a number its whole width, and a name or path it narrows folds onto the next lines.
            for cells, best in zip(table.cells(), table.best):
                rich.add_row(*[Text(cells[i], style="bold green" if table.columns[i].key in best else "",
                                    no_wrap=False, overflow="fold") for i in part])
            out.append(rich)
        notes = [*numbered, *table.notes]
        # what a column left out said that the reader must not lose; a line that a longer one repeats whole
        # ("sf: failed" beside "sf: failed: why", both columns left out) is said once
        hidden = [line for c in table.columns if c.title in plan.hidden for line in table.hidden_notes.get(c.key, [])]
        notes.extend(line for line in hidden if not any(other.startswith(f"{line}: ") for other in hidden))
        if plan.hidden:
            notes.append(f"(left out to fit the window: {', '.join(plan.hidden)}; a wider window, "
                         "--json or --csv shows every column)")
        # broken as the messages on stderr are (a number beside its unit), where a window bounds them
        out.extend(Text(printable(n)) if width is None else at_spaces(Text(printable(n)), width) for n in notes)
    return out


def _terminal_view(table: Table) -> Table:
    """``table`` with the rows a terminal shows (:attr:`Table.terminal_rows`) only, and under its notes
    the :attr:`Table.terminal_notes` that say so: the one view :func:`render_rich` and :func:`render_html`
    draw."""
    if table.terminal_rows is None:
        return table
    keep = table.terminal_rows
    return dataclasses.replace(table, rows=[table.rows[i] for i in keep], best=[table.best[i] for i in keep],
                               data=[table.data[i] for i in keep if i < len(table.data)],
                               notes=[*table.notes, *table.terminal_notes], terminal_rows=None, terminal_notes=[])


class OutputFormat(str, enum.Enum):
    """The output formats every table-producing command offers.

    Attributes
    ----------
    value : str
        The format's key: ``"json"``, ``"csv"``, ``"markdown"`` or ``"latex"``
        (the ``--json`` ... options).
    suffix : str
        Its file suffix: ``.json``, ``.csv``, ``.md``, ``.tex`` (property).
    """

    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"
    LATEX = "latex"

    @property
    def suffix(self) -> str:
        """The file suffix of this format (``.json``, ``.csv``, ``.md``, ``.tex``)."""
        return {"json": ".json", "csv": ".csv", "markdown": ".md", "latex": ".tex"}[self.value]

    def render(self, tables: list[Table], data: Any) -> str:
        """Text of this format: ``data`` for JSON, ``tables`` for the others.

        Parameters
        ----------
        tables : list of Table
            What CSV, Markdown and LaTeX render.
        data : object
            What JSON renders (a JSON-ready dict).

        Returns
        -------
        str
        """
        if self is OutputFormat.JSON:
            return render_json(data)
        if self is OutputFormat.CSV:
            return render_csv(tables)
        if self is OutputFormat.MARKDOWN:
            return render_markdown(tables)
        if self is OutputFormat.LATEX:
            return render_latex(tables)
        raise AssertionError(f"unhandled format {self}")  # pragma: no cover - every member is handled
