"""Pajek ``.net`` / ``.paj`` reader (own parser; keywords case-insensitive).

Supported: ``*Network``, ``*Vertices n [n1]`` (vertex lines: only the id is
checked), ``*Arcs`` / ``*Edges`` with optional weight, ``*Arcslist`` /
``*Edgeslist``, dense ``*Matrix`` sections, several networks per ``.paj``
(``network=``), 2-mode networks (``two_mode=``), and multi-relational
networks: a relation is named by its section (``*Arcs :2 "label"``,
``*Matrix :2 "label"``) or by a line prefix (``2: 1 3``, which overrides the
section's).  Relations are summed unless ``relation=k`` picks one.
``*Partition``, ``*Vector``, ``*Permutation``, ``*Cluster`` and ``*Hierarchy``
end the network's edge sections and are skipped; an unknown section's data
lines are refused (a misspelt ``*Edge`` would otherwise leave its edges out).

Long sections of plain numbers (``i j [w]`` lines, a ``*Matrix``'s rows, the ids of vertex lines, the
ids of ``*Arcslist`` / ``*Edgeslist`` lines) are read in bulk (numpy); a section holding anything else
(comments, attributes, labels, relation prefixes, decimal commas, a blank line between data lines, a bad
number) is read line by line, which reads it as it always did and names the line of an error (only the
section's chunks of about :data:`_CHUNK_CHARS` characters, :data:`_MATRIX_CHUNK_CHARS` for a ``*Matrix``, that
hold such a line).

Weights are never guessed: a decimal comma (``0,25``, written by some
locales) is read as a decimal point when that is the only reading, a token
that is neither a number nor an attribute is refused, and so is ``1,000``
(a thousand, or one?).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._errors import ParameterError, parameter
from .._validation import check_memory, format_bytes
from ..formats import counted
from ._common import (Options, ReadResult, Source, check_order, fortran_float, is_int_token, is_missing_token,
                      is_number_like, parse_float, text_width as _width)

_EDGE_SECTIONS = {"*arcs": "arcs", "*edges": "edges", "*arcslist": "arcslist", "*edgeslist": "edgeslist"}
_AUX_SECTIONS = {"*partition", "*vector", "*permutation", "*cluster", "*hierarchy"}
_ORDINALS = {1: "first", 2: "second", 3: "third"}

#: ``10: 263 264``: a data line prefixed by its relation number.
_RELATION_PREFIX = re.compile(r"^(\d+)[ \t]*:[ \t]*(.*)$")
#: ``0,25``: a number written with a decimal comma.
_DECIMAL_COMMA = re.compile(r"^([+-]?)(\d+),(\d+)$")


#: The columns of a network's lines (:class:`_Network`), with their array types.
_COLUMNS = (("src_i", np.int64), ("src_j", np.int64), ("weight", np.float64), ("undirected", np.bool_),
            ("line_of", np.int64), ("relation_of", np.int64))


#: Line breaks of :meth:`str.splitlines` other than "\n" (and "\r\n", made "\n" first).
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: Sections shorter than this are read line by line (bulk reading pays off on long ones).
_BULK_MIN_CHARS = 4096
#: The characters of a section of plain numbers (:func:`_plain_table`): no comments, relation prefixes,
#: attributes, labels, decimal commas, Fortran exponents, inf/nan.
_PLAIN_CHARS = b"0123456789 \t\n.eE+-"
#: A section read in bulk is read this many characters at a time (about as many bytes of arrays).
_CHUNK_CHARS = 1 << 23
#: A ``*Matrix`` section is read this many characters at a time: a chunk's table is up to 4 bytes a
#: character (``0 1 0``: 8 bytes a value of 2 characters), and its values' array is the section's own.
_MATRIX_CHUNK_CHARS = 1 << 20
#: Peak bytes a character of a ``*Matrix`` section's chunk read in bulk takes (its text, bytes, table of up
#: to 4 bytes a character and its finite test), beside the values' array: ~6.5 traced for ``0 1 0`` rows
#: (benchmarks/results/read_memory_pajek2.md; ~10.5 while the chunk before's text and table were still held).
_MATRIX_CHUNK_COST = 10
#: The same for a chunk read line by line (its text and bytes, then its lines' strings): ~3 traced.
_MATRIX_SLOW_CHUNK_COST = 4
#: More bytes a line of a ``*Matrix`` chunk read line by line holds (its string object), beside its characters.
_MATRIX_SLOW_LINE_COST = 50
#: Bytes a character of a ``*Matrix`` chunk's longest line more: read line by line, its list of floats while
#: its values are parsed (32 bytes a value of ``1 ``'s 2 characters); in bulk, ``np.loadtxt``'s record of a
#: row's fields (~29 bytes a field traced for a matrix written on one line: 26 bytes a character in all).
_MATRIX_LINE_CHAR_COST = 32
#: A ``*Matrix`` line longer than this is checked before its values are parsed (a whole matrix may be one line).
_MATRIX_LONG_LINE = 1 << 16
_BLANKS = re.compile(r"[ \t\n]*")
#: The characters of a plain list section (:func:`_list_columns`): vertex ids, blanks and line ends only.
_LIST_CHARS = b"0123456789 \t\n"
#: Every digit as "0" (:func:`_list_columns`: an id of 19 digits or more, which int64 may not hold, is found
#: as 19 "0"s in a row, 10x faster than by a regular expression; the line reader names it, or reads it
#: when zero-padded).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")

#: Peak bytes a line of a read in bulk, with the file's bytes (benchmarks/results/pajek_memory.md: 111 a
#: labelled ``*Edges`` file's line traced, 126-139 before the repeat count and the COO held less, at the
#: matrix's assembly: the six columns, the mirrored COO and the CSR; ~10-15 more a line in the process's
#: RSS, the allocator's; kept at 150, not lowered with the peak).
_LINE_COST = 150
#: More a line read one by one: its string from ``splitlines`` and six Python objects in lists while its
#: section is parsed (256 a line of ``i j w`` traced, ~300 in RSS, against the bulk's 139).
_SLOW_LINE_COST = 150


def parse_cost(data: bytes, lines: int) -> int:
    """Peak bytes of reading a Pajek file of ``lines`` lines, ``data`` its bytes, in bulk: the bytes (held
    to the end) and the text (freed before the matrix is assembled), and :data:`_LINE_COST` a line; lines
    read one by one, and the arcs and edges of list lines beyond one a line, are checked as they come
    (:meth:`_Parser._check_slow`, :meth:`_Parser._check_lists`).

    Examples
    --------
    >>> parse_cost(b"*Vertices 2\\n1 2\\n", 3)
    482
    """
    return (1 + _width(data)) * len(data) + _LINE_COST * lines


def _keyword_lines(text: str):
    """(start, end) of each keyword line: a line whose first character other than blanks is '*'."""
    pos = text.find("*")
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if not text[start:pos].strip():  # else a '*' inside a line: a label's, or an interval's ('[1-*]')
            yield start, end
        pos = text.find("*", end)


def _data_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``text[start:end]`` less its leading and trailing blanks and blank lines, as (start, end); None if blank."""
    lead = _BLANKS.match(text, start, end).end()
    stop = end
    while stop > lead and text[stop - 1] in " \t\n":
        stop -= 1
    return (lead, stop) if lead < stop else None


def _table_dtype(first_line: bytes, matrix: bool) -> np.dtype | None:
    """A table's dtype as its first line shows it: a matrix's floats; ``i j [w]``: integer ids, a float weight."""
    if matrix:
        return np.dtype(np.float64)
    width = len(first_line.split())
    return np.dtype([("i", np.int64), ("j", np.int64), ("w", np.float64)][:width]) if width in (2, 3) else None


def _chunks(text: str, start: int, stop: int, size: int | None = None):
    """``text[start:stop]`` as (start, end) spans of whole lines, about ``size`` characters each
    (:data:`_CHUNK_CHARS` if None)."""
    size = _CHUNK_CHARS if size is None else size
    while start < stop:
        end = text.find("\n", min(start + size, stop), stop)
        end = stop if end < 0 else end + 1
        yield start, end
        start = end


def _ascii(chunk: str) -> bytes:
    """``chunk``'s bytes if it is ASCII, else b"" (read line by line)."""
    return chunk.encode("ascii") if chunk.isascii() else b""


def _plain_table(data: bytes, matrix: bool) -> np.ndarray | None:
    """The numbers of lines ``data``, one row a line (``i j [w]`` as wide as its first line); None where
    it holds a character that is not a digit, a blank or part of a plain number, a blank line, a number
    that is none, or a line of another width than its first."""
    if not data or data.translate(None, _PLAIN_CHARS):
        return None
    newline = data.find(b"\n")
    dtype = _table_dtype(data if newline < 0 else data[:newline], matrix)
    if dtype is None:
        return None
    try:
        table = np.loadtxt(io.BytesIO(data), dtype=dtype, comments=None, ndmin=1 if dtype.names else 2,
                           encoding="latin1")
    except ValueError:  # a number that is none (1.2.3, an id 1.0 or 1e3), or a line of another width
        return None
    if len(table) != data.count(b"\n") + (not data.endswith(b"\n")):
        return None  # a blank line (loadtxt skips it) would shift the line numbers
    return table


def _matrix_values(data: bytes) -> np.ndarray | None:
    """The values of ``*Matrix`` lines ``data``, row by row, if they are a plain table (:func:`_plain_table`)
    of finite numbers (else None: the slow path names the line)."""
    table = _plain_table(data, True)
    values = None if table is None else table.ravel()
    return values if values is not None and np.isfinite(values).all() else None


def _longest_line(data: bytes) -> int:
    """The length of the longest line of ``data``, its line end included.

    Examples
    --------
    >>> _longest_line(b"0 1\\n0 1 0 1\\n1")
    8
    """
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    return int(np.diff(ends, prepend=-1, append=len(data) - 1).max()) if len(data) else 0


def _edge_columns(table: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """i, j, w of an ``i j [w]`` table whose ids are in 1..n and weights finite, else None."""
    i, j = np.ascontiguousarray(table["i"]), np.ascontiguousarray(table["j"])
    if not (i.min() >= 1 and j.min() >= 1 and i.max() <= n and j.max() <= n):
        return None
    w = np.ascontiguousarray(table["w"]) if "w" in table.dtype.names else np.ones(len(table))
    return (i, j, w) if np.isfinite(w).all() else None


def _plain_edges(data: bytes, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The arcs or edges of ``i j [w]`` lines ``data`` (:func:`_edge_columns` of :func:`_plain_table`), or None
    where they are no plain table of ids in range and finite weights."""
    table = _plain_table(data, False)
    return None if table is None else _edge_columns(table, n)


def _list_columns(data: bytes, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The arcs or edges of ``*Arcslist`` / ``*Edgeslist`` lines ``data`` (a source id, then its targets'
    ids): each one's source, target and line (0 for the first of ``data``), in the order written; None
    unless ``data`` holds only ids in 1..n, blanks and line ends.  Blank lines and lines of a source
    alone, which give nothing, may be anywhere: a line's number is counted from the line ends before it."""
    if not data or data.translate(None, _LIST_CHARS) or b"0" * 19 in data.translate(_DIGITS_AS_ZERO):
        return None
    # The numbers in C by fromstring's text mode (any blanks and line ends between them), each line end
    # read as a -1 first (no id has a sign), and one more at the end: a parse cut short would lack it.
    # (Token positions found in numpy and the ids read by a digit loop took 5x as long.)
    values = np.fromstring(data.replace(b"\n", b" -1 ") + b" -1", dtype=np.int64, sep=" ")
    ends = values == -1
    lines = np.count_nonzero(ends)
    if lines != data.count(b"\n") + 1 or not ends[-1]:
        return None
    if lines == len(values):  # blank lines only
        none = np.zeros(0, dtype=np.int64)
        return none, none, none
    line = np.cumsum(ends)[~ends]  # the line ends before each id: its line
    ids = values[~ends]
    del values, ends
    if ids.min() < 1 or ids.max() > n:
        return None
    first = np.flatnonzero(np.diff(line, prepend=-1))  # each line's first id: its source
    target = np.ones(len(ids), dtype=bool)
    target[first] = False
    return np.repeat(ids[first], np.diff(first, append=len(ids)) - 1), ids[target], line[target]


def _vertex_ids_fit(body: str, n: int) -> bool:
    """True when every line of ``body`` is blank or starts with digits, then a blank or its end, that
    make a vertex id in 1..n (the only check a vertex line gets); False where the lines must be read
    one by one (to name a bad line, or for anything else: leading blanks, comments, signs)."""
    data = np.frombuffer(body.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    starts = np.concatenate([[0], np.flatnonzero(data == 10) + 1])
    starts = starts[starts < len(data)]
    starts = starts[data[starts] != 10]  # blank lines
    value = np.zeros(len(starts), dtype=np.int64)
    running = np.ones(len(starts), dtype=bool)  # the lines whose id goes on
    padded = np.concatenate([data, np.array([10], dtype=np.uint8)])  # (a list would make it int64: 8x the bytes)
    for k in range(19):
        byte = padded[np.minimum(starts + k, len(data))]
        digit = running & (byte >= 48) & (byte <= 57)
        if k == 0 and not digit.all():
            return False
        ended = running & ~digit
        if not np.isin(byte[ended], (9, 10, 32)).all():  # '12a', '1.5', '3,': the slow path's error
            return False
        running = digit
        if not running.any():
            return bool(((value >= 1) & (value <= n)).all())
        value[running] = value[running] * 10 + (byte[running] - 48)
    return False


@dataclass
class _MatrixBlock:
    """One ``*Matrix`` section: its relation, first line and values (row by row), written into one array
    of the matrix's size as they are read (a list of floats took 32 bytes a value, the pieces read in bulk
    were joined in a second array); ``count``: the values read, stored or not (more than the array holds
    are counted, for the error that names the count)."""

    relation: int | None
    line_no: int
    values: np.ndarray
    count: int = 0

    def add(self, values) -> None:
        """Store ``values`` (an array, or a line's list of floats) after those read before."""
        end = self.count + len(values)
        if end <= len(self.values):
            self.values[self.count:end] = values
        self.count = end


@dataclass
class _Network:
    """One network block as parsed (1-based vertex ids, as written)."""

    name: str
    line_no: int
    index: int
    two_mode_header: bool = False
    n: int | None = None
    n1: int | None = None
    src_i: list[int] = field(default_factory=list)
    src_j: list[int] = field(default_factory=list)
    weight: list[float] = field(default_factory=list)
    undirected: list[bool] = field(default_factory=list)
    line_of: list[int] = field(default_factory=list)
    relation_of: list[int] = field(default_factory=list)  # 0: no relation number
    relations: dict[int, str] = field(default_factory=dict)  # number -> label ("" if none)
    unnumbered_line: int | None = None  # first data line without a relation number
    repeats: Counter = field(default_factory=Counter)
    matrices: list[_MatrixBlock] = field(default_factory=list)
    #: the lines read so far, in file order: column arrays of bulk-read sections and of the lines
    #: added one by one (flushed from the lists above), joined by :meth:`finish`
    _parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def add(self, i: int, j: int, w: float, undirected: bool, line_no: int, relation: int | None) -> None:
        self.src_i.append(i)
        self.src_j.append(j)
        self.weight.append(w)
        self.undirected.append(undirected)
        self.line_of.append(line_no)
        self.relation_of.append(relation or 0)

    def add_block(self, i: np.ndarray, j: np.ndarray, w: np.ndarray, undirected: bool, line_of: np.ndarray,
                  relation: int | None) -> None:
        """Arcs or edges of one section read in bulk, ``line_of``: the line of each."""
        self._flush()
        count = len(i)
        self._parts.append((i, j, w, np.full(count, undirected), line_of, np.full(count, relation or 0)))

    def _flush(self) -> None:
        if self.src_i:
            self._parts.append(tuple(np.asarray(getattr(self, name), dtype=dtype) for name, dtype in _COLUMNS))
            for name, _ in _COLUMNS:
                setattr(self, name, [])

    def finish(self) -> None:
        """Join the lines read into one array per column (in file order, the order repeated lines are
        summed in) and count the repeated arcs and edges."""
        self._flush()
        parts = [list(p) for p in self._parts]
        self._parts = []
        for k, (name, dtype) in enumerate(_COLUMNS):
            column = np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dtype=dtype)
            setattr(self, name, column.astype(dtype, copy=False))
            for p in parts:  # a column's parts go once it is joined: the peak is one column more, not all
                p[k] = None
        self.repeats = _repeats(self)

    def note_relation(self, relation: int | None, line_no: int, label: str = "") -> None:
        if relation is None:
            if self.unnumbered_line is None:
                self.unnumbered_line = line_no
        elif label or relation not in self.relations:
            self.relations[relation] = label or self.relations.get(relation, "")

    def describe_relations(self) -> str:
        return ", ".join(f"{k} {v!r}" if v else str(k) for k, v in sorted(self.relations.items()))


def _repeats(net: _Network) -> Counter:
    """How many lines repeat an arc or edge of an earlier line (same relation; an edge either way round),
    edges and arcs apart: one sort, in place, of one int64 key a line (:func:`_line_keys`; a set of tuples
    held ~130 bytes a line), or by columns where such keys would overflow."""
    und = net.undirected
    if len(und) < 2:
        return Counter()
    keys = _line_keys(net)
    if keys is None:
        return _repeats_by_columns(net)
    keys.sort()
    same = keys[1:] == keys[:-1]
    if und.all() or not und.any():  # one kind of line (the usual file): no kind bit in the keys
        count = int(np.count_nonzero(same))
        return Counter({"edges": count, "arcs": 0} if und[0] else {"edges": 0, "arcs": count})
    kind = keys[1:][same] & 1  # the repeats' kind bits: 1 an edge
    edges = int(np.count_nonzero(kind))
    return Counter({"edges": edges, "arcs": len(kind) - edges})


def _line_keys(net: _Network) -> np.ndarray | None:
    """One int64 a line, the same for the same arc or edge: ``(relation, a, b, kind)`` as one number, ``a,
    b`` an arc's source and target or an edge's ends in order, the relation only where lines differ in it,
    the kind bit only where both kinds are there; None where such keys could overflow int64.  Made in
    place (one array: the per-line ``np.where`` of both ends took 2-3 s for 10M lines)."""
    i, j, und, relation = net.src_i, net.src_j, net.undirected, net.relation_of
    base = net.n + 1  # (ids 1..n)
    mixed = bool(und.any()) and not und.all()
    relations = int(relation.max()) + 1 if int(relation.min()) != int(relation.max()) else 1
    if relations * base * base * (2 if mixed else 1) >= 2 ** 63:
        return None
    keys = i.copy()  # a: an arc's source, an edge's smaller end
    if mixed:
        np.minimum(i, j, out=keys, where=und)
    elif und[0]:
        np.minimum(i, j, out=keys)
    keys *= base - 1
    keys += i
    keys += j  # a * base + b, as b = i + j - a
    if relations > 1:
        keys += relation * (base * base)
    if mixed:
        keys <<= 1
        keys += und
    return keys


def _repeats_by_columns(net: _Network) -> Counter:
    """:func:`_repeats` by a sort of the columns (relation, kind, a, b): for keys too large for int64."""
    und = net.undirected
    i, j = net.src_i, net.src_j
    a, b = np.where(und, np.minimum(i, j), i), np.where(und, np.maximum(i, j), j)
    order = np.lexsort((b, a, und, net.relation_of))
    cols = [c[order] for c in (net.relation_of, und, a, b)]
    repeated = np.logical_and.reduce([c[1:] == c[:-1] for c in cols])
    kind = cols[1][1:][repeated]
    edges = int(np.count_nonzero(kind))
    return Counter({"edges": edges, "arcs": len(kind) - edges})


class _Parser:
    """Line-by-line state machine over a Pajek file."""

    def __init__(self, src: Source, opts: Options) -> None:
        self.src = src
        self.opts = opts
        self.networks: list[_Network] = []
        self.state: str | None = None
        self.relation: int | None = None
        self.in_aux = False
        self.comma_weights = 0
        self.fortran_weights = 0
        self.unknown: tuple[str, int] = ("", 0)  # the unknown section's keyword and line
        self.slow_lines = 0  # lines read one by one so far, and their bytes over the bulk's (:meth:`_check_slow`)
        self.slow = 0
        self.list_edges = 0  # arcs and edges of list lines beyond one a line (:meth:`_check_lists`)
        self.matrix_bytes = 0  # the *Matrix sections' arrays (:meth:`_start_matrix`)
        self.transient = 0  # the reading of the *Matrix chunk being read (:meth:`_matrix_chunks`)
        self.checked: int | None = None  # the peak read_text checked (:func:`parse_cost`)

    @property
    def net(self) -> _Network | None:
        return self.networks[-1] if self.networks else None

    def parse(self, text: str) -> list[_Network]:
        if "\r" in text:  # a Windows line end is one line break, as splitlines() has it
            text = text.replace("\r\n", "\n")
        if any(c in text for c in _OTHER_BREAKS):  # line breaks the section scan does not know: line by line
            self._lines(text, 1)
        else:
            self._sections(text)
        if not self.networks or all(n.n is None for n in self.networks):
            raise self.src.fail("no '*Vertices n' line: not a Pajek network file", f"check the file or pass {parameter('format')}")
        for net in self.networks:
            net.finish()
        return [n for n in self.networks if n.n is not None]

    def _sections(self, text: str) -> None:
        """Each keyword line, and the lines up to the next one (a section's data, read in bulk where it can be)."""
        pos, line_no = 0, 1
        for start, end in _keyword_lines(text):
            self._data(text, pos, start, line_no)
            line_no += text.count("\n", pos, start)
            self._keyword(text[start:end].strip(), line_no)
            pos, line_no = end + 1, line_no + 1
        self._data(text, pos, len(text), line_no)

    def _data(self, text: str, start: int, end: int, first_line: int) -> None:
        """The data lines of one section, ``text[start:end]`` (``first_line``: the number of the first)."""
        if end - start >= _BULK_MIN_CHARS:
            if self.state in ("arcs", "edges", "matrix") and self._bulk(text, start, end, first_line):
                return
            if self.state in ("arcslist", "edgeslist"):
                n = self.net.n
                self._by_chunks(text, start, end, first_line, lambda data: _list_columns(data, n), self._add_lists)
                return
            if self.state == "vertices" and _vertex_ids_fit(text[start:end], self.net.n):
                return
        self._lines(text[start:end], first_line)

    def _lines(self, text: str, first_line: int) -> None:
        self._check_slow(text)
        self._read_lines(text, first_line)

    def _read_lines(self, text: str, first_line: int) -> None:
        """Read the lines ``text`` one by one (their cost checked by the caller), the first numbered ``first_line``."""
        listed = self.list_edges
        for line_no, raw in enumerate(text.splitlines(), start=first_line):
            s = raw.strip()
            if not s or s.startswith("%"):
                continue
            if s.startswith("*"):
                self._keyword(s, line_no)
            elif self.state in ("arcs", "edges"):
                self._edge_line(s, line_no)
            elif self.state in ("arcslist", "edgeslist"):
                self._list_line(s, line_no)
            elif self.state == "vertices":
                self._vertex_line(s, line_no)
            elif self.state == "matrix":
                self._matrix_line(s, line_no)
            elif self.state == "unknown":
                name, where = self.unknown
                raise self.src.fail(
                    f"line {line_no}: data in section {name} (line {where}), which is not a Pajek section sfapprox "
                    "reads", "its sections are *Network, *Vertices, *Arcs, *Edges, *Arcslist, *Edgeslist, *Matrix, "
                    "and the skipped *Partition, *Vector, *Permutation, *Cluster, *Hierarchy; check the keyword's spelling")
            elif self.state is None:
                raise self.src.fail(
                    f"line {line_no}: data before any section keyword: {s[:50]!r}",
                    "a Pajek network starts with '*Vertices n'",
                )
        if self.list_edges > listed:
            self._check_lists()

    def _check_slow(self, text: str) -> None:
        """Refuse, over the memory limit, the file's read with the lines of ``text`` read one by one too:
        :data:`_SLOW_LINE_COST` a line and a copy of their characters more than :meth:`Source.read_text`
        checked (:func:`parse_cost`), for all the lines read so."""
        lines = text.count("\n") + 1
        self.slow_lines += lines
        self.slow += _SLOW_LINE_COST * lines + _width(text) * len(text)
        check_memory(self._estimate(), limit=self.src.max_memory,
                     what=f"{self.src.display}: parsing {self.slow_lines:,} lines one by one")

    def _check_lists(self) -> None:
        """Refuse, over the memory limit, the file's read with the arcs and edges of list lines beyond
        one a line (:func:`parse_cost` counts one a line) at :data:`_LINE_COST` each: checked as each
        chunk of a list section is read, before the matrix is assembled from them all."""
        check_memory(self._estimate(), limit=self.src.max_memory,
                     what=f"{self.src.display}: parsing list lines that hold {self.list_edges:,} arcs or edges beyond one a line")

    def _estimate(self) -> int:
        """The peak the file's read is checked for so far: read_text's, and what lines read one by one,
        list lines of several arcs or edges and ``*Matrix`` sections add."""
        if self.checked is None:  # what read_text checked, once (a count of the file's lines)
            data = self.src.read_bytes()
            self.checked = parse_cost(data, data.count(b"\n") + 1)
        return self.checked + self.slow + _LINE_COST * self.list_edges + self.matrix_bytes + self.transient

    def _by_chunks(self, text: str, start: int, stop: int, first_line: int, parse, add) -> None:
        """Read the lines ``text[start:stop]`` of an edge or list section a chunk of :func:`_chunks` at a time:
        in bulk where ``parse`` (of the chunk's bytes) gives its columns, stored by ``add(chunk, columns,
        first_line)``; else line by line (comments, attributes, relation prefixes, a bad line: :meth:`_lines`
        names the line of an error).  The chunks are read in file order, so the arcs and edges are stored as
        the line reader stores them (a ``*Matrix``'s values: :meth:`_matrix_chunks`, each chunk checked first)."""
        for begin, end in _chunks(text, start, stop):
            chunk = text[begin:end]
            columns = parse(_ascii(chunk))
            if columns is None:
                self._lines(chunk, first_line)
            else:
                add(chunk, columns, first_line)
            first_line += chunk.count("\n")
            del chunk, columns  # (not held while the next chunk is parsed)

    # Two loops, not _by_chunks with hooks (merged, it would take a chunk size, a check before each chunk's parse
    # and another slow reader as parameters: half its lines each caller's): a *Matrix chunk's reading is priced
    # by itself before it is parsed, its size and path known only then (self.transient, reset after the
    # section), and read line by line it is that price (_read_lines); an edge or list chunk's was priced with the
    # whole file by read_text (parse_cost), and read line by line it adds to the section's running count (_lines).
    def _matrix_chunks(self, text: str, start: int, stop: int, first_line: int) -> None:
        """Read the lines ``text[start:stop]`` of a ``*Matrix`` section a chunk of :data:`_MATRIX_CHUNK_CHARS`
        at a time into its array: in bulk where the chunk is plain numbers (:func:`_matrix_values`), else line
        by line; each chunk's reading checked first with its own size and path (a chunk is longer than
        :data:`_MATRIX_CHUNK_CHARS` where a line is), beside what the read holds (:meth:`_estimate`)."""
        block = self.net.matrices[-1]
        for begin, end in _chunks(text, start, stop, _MATRIX_CHUNK_CHARS):
            chunk = text[begin:end]
            data = _ascii(chunk)
            plain = bool(data) and not data.translate(None, _PLAIN_CHARS)  # (what _plain_table reads in bulk)
            breaks = chunk.count("\n")
            lines = breaks + (not chunk.endswith("\n"))
            if plain:
                self.transient = _MATRIX_CHUNK_COST * len(chunk) + _MATRIX_LINE_CHAR_COST * _longest_line(data)
            else:  # (a long line's floats checked by _matrix_line)
                self.transient = _MATRIX_SLOW_CHUNK_COST * _width(chunk) * len(chunk) + _MATRIX_SLOW_LINE_COST * lines
            check_memory(self._estimate(), limit=self.src.max_memory,
                         what=f"{self.src.display}: *Matrix lines {first_line:,}-{first_line + lines - 1:,} "
                              f"read {'in bulk' if plain else 'one by one'}")
            values = _matrix_values(data) if plain else None
            del data
            if values is None:
                self._read_lines(chunk, first_line)
            else:
                block.add(values)
            first_line += breaks
            del chunk, values  # (not held while the next chunk is read)
        self.transient = 0

    def _add_lists(self, chunk: str, columns: tuple[np.ndarray, np.ndarray, np.ndarray], first_line: int) -> None:
        """Store the arcs or edges of list lines ``chunk`` read in bulk (``columns``: :func:`_list_columns`'s),
        its first line numbered ``first_line``, as :meth:`_list_line` stores them one by one."""
        lead = _BLANKS.match(chunk).end()  # the first line with an id is noted, a source alone too
        if lead < len(chunk):
            self.net.note_relation(self.relation, first_line + chunk.count("\n", 0, lead))
        i, j, line = columns
        if len(i):
            line += first_line
            self.net.add_block(i, j, np.ones(len(i)), self.state == "edgeslist", line, self.relation)
            self.list_edges += len(i) - 1 - int(np.count_nonzero(line[1:] != line[:-1]))  # less one a line
            self._check_lists()

    def _bulk(self, text: str, start: int, end: int, first_line: int) -> bool:
        """Read a section of ``i j [w]`` lines a chunk of :func:`_chunks` at a time: in bulk where the chunk
        holds plain numbers only, ids in range and finite weights, else line by line (comments, attributes,
        relation prefixes, a bad line: :meth:`_lines` names the line of an error), in file order, so the
        arcs, edges and a ``*Matrix``'s values are stored as the line reader stores them.  False, with
        nothing read, where :meth:`_lines` reads the whole section (a blank one)."""
        span = _data_span(text, start, end)
        if span is None:
            return False
        first_line += text.count("\n", start, span[0])
        if self.state == "matrix":
            self._matrix_chunks(text, *span, first_line)
            return True
        n = self.net.n
        self._by_chunks(text, *span, first_line, lambda data: _plain_edges(data, n), self._add_edges)
        return True

    def _add_edges(self, chunk: str, columns: tuple[np.ndarray, np.ndarray, np.ndarray], first_line: int) -> None:
        """Store the arcs or edges of ``i j [w]`` lines ``chunk`` read in bulk (:func:`_plain_edges`), one a line
        from line ``first_line`` on."""
        i, j, w = columns
        self.net.note_relation(self.relation, first_line)
        self.net.add_block(i, j, w, self.state == "edges", np.arange(first_line, first_line + len(i)), self.relation)

    # -- keywords ------------------------------------------------------------
    def _keyword(self, s: str, line_no: int) -> None:
        parts = s.split(None, 1)  # any whitespace: a tab after "*Arcs" sent the relation's data to an unknown section
        kw, rest = parts[0].lower(), parts[1] if len(parts) > 1 else ""
        if kw == "*network":
            self.networks.append(_Network(rest.strip(), line_no, self._next_index(), "[2-mode]" in rest.lower()))
            self.in_aux, self.state = False, None
        elif kw == "*vertices":
            self._vertices(rest, line_no)
        elif kw in _EDGE_SECTIONS or kw == "*matrix":
            if self.in_aux or self.net is None or self.net.n is None:
                raise self.src.fail(
                    f"line {line_no}: {s.split()[0]} before '*Vertices n'", "a Pajek network needs '*Vertices n' first"
                )
            self.state = _EDGE_SECTIONS.get(kw, "matrix")
            self.relation = self._relation(rest, line_no)
            if kw == "*matrix":
                self._start_matrix(line_no)
        elif kw in _AUX_SECTIONS:
            self.in_aux, self.state = True, "skip"
        else:  # unknown: ends the edge sections; its data lines are refused (a typo such as "*Edge"
            # gave an all-zero matrix, without a word)
            self.state, self.unknown = "unknown", (s.split()[0], line_no)

    def _next_index(self) -> int:
        """1-based index of the next network that has vertices (as ``network=`` counts them)."""
        return sum(1 for n in self.networks if n.n is not None) + 1

    def _vertices(self, rest: str, line_no: int) -> None:
        if self.in_aux:  # the vertex count of a *Partition / *Vector
            self.state = "skip"
            return
        tokens = rest.split()
        if not tokens or not all(is_int_token(t) for t in tokens[:2]):
            raise self.src.fail(f"line {line_no}: expected '*Vertices n' with an integer n, got {rest.strip()[:60]!r}")
        if self.net is None or self.net.n is not None:
            # A second *Vertices without *Network starts a new network.
            self.networks.append(_Network("", line_no, self._next_index()))
        net = self.net
        net.n = int(tokens[0])
        if net.n < 1:
            raise self.src.fail(f"line {line_no}: '*Vertices {net.n}' needs at least one vertex")
        if len(tokens) > 1:
            net.n1 = int(tokens[1])
            if not 0 < net.n1 < net.n:
                raise self.src.fail(f"line {line_no}: 2-mode '*Vertices {net.n} {net.n1}' needs 0 < n1 < n")
        self._check_order(net)
        self.state = "vertices"

    def _check_order(self, net: _Network) -> None:
        """Refuse from '*Vertices n' what could not be loaded, before any line is stored.

        The dense form is checked for the network that will be loaded when its
        order is the matrix's: a 1-mode network, or 2-mode as written
        (bipartite).  Projections of 2-mode networks are checked once their
        size is known.
        """
        selected = net.index == (self.opts.network or 1)
        mode = self.opts.two_mode
        one_mode = net.n1 is None and not net.two_mode_header and mode not in ("rows", "cols")
        final = net.n if (one_mode or mode == "bipartite") else None
        if final is None and net.n1 is not None:
            final = {"cols": net.n - net.n1}.get(mode or "rows", net.n1)
        check_order(net.n, self.src, "network", dense=False)
        if selected and final is not None:
            check_order(final, self.src, "network matrix", sparse=True)  # a *Matrix section checks its own size

    def _relation(self, rest: str, line_no: int) -> int | None:
        """The relation number of a section (``*Arcs :2 "label"``), or None."""
        rest = rest.strip()
        if not rest.startswith(":"):
            return None
        head = rest.split(None, 1)
        number = head[0][1:]
        if not number.isdigit() or int(number) < 1:
            raise self.src.fail(f"line {line_no}: relation {head[0]!r} must be ':k' with a positive integer k")
        label = head[1].strip().strip('"') if len(head) > 1 else ""
        self.net.note_relation(int(number), line_no, label)
        return int(number)

    def _start_matrix(self, line_no: int) -> None:
        """Check the read with the section's array beside what it holds (:meth:`_estimate`: the file's bytes
        and text, the arrays of the sections before), then allocate the array; each chunk's reading is
        checked as it comes (:meth:`_matrix_chunks`: counted here at the most, 16 bytes a character of a 1 MiB
        chunk, it put a 1 MB file's check at 1.8-2.6 times its peak)."""
        net = self.net
        rows, cols = (net.n, net.n) if net.n1 is None else (net.n1, net.n - net.n1)
        self.matrix_bytes += 8 * rows * cols
        check_memory(self._estimate(), what=f"{self.src.display}: *Matrix {rows:,} x {cols:,} (with the file's text)",
                     limit=self.opts.max_memory_bytes)
        for block in net.matrices:
            if block.relation == self.relation:
                which = "without a relation number" if self.relation is None else f"for relation {self.relation}"
                raise self.src.fail(
                    f"line {line_no}: a second *Matrix section {which} in one network (the first at line {block.line_no})",
                    "number the relations: '*Matrix :1', '*Matrix :2', ...",
                )
        net.note_relation(self.relation, line_no)
        net.matrices.append(_MatrixBlock(self.relation, line_no, np.empty(rows * cols)))

    # -- data lines ----------------------------------------------------------
    def _number(self, token: str, line_no: int, what: str) -> float | None:
        """``token`` as a finite number, None if it is not number-like (an attribute); refuses the rest."""
        value = parse_float(token)
        if value is None and is_missing_token(token):
            # "NA" is no attribute keyword: read as one, the line's weight silently became 1
            raise self.src.fail(f"line {line_no}: {what} {token[:60]!r} is a missing value",
                                "give the weight a number, or leave it out for 1")
        if value is None and fortran_float(token) is not None:
            value = fortran_float(token)
            self.fortran_weights += 1
        if value is None:
            comma = _DECIMAL_COMMA.match(token)
            if comma is not None:
                sign, whole, frac = comma.groups()
                if len(frac) == 3 and whole.lstrip("0"):
                    raise self.src.fail(
                        f"line {line_no}: {what} {token!r} is ambiguous: a decimal comma ({sign}{whole}.{frac}) "
                        f"or a thousands separator ({sign}{whole}{frac})?",
                        "write numbers with a decimal point",
                    )
                self.comma_weights += 1
                value = float(f"{sign}{whole}.{frac}")
            elif token[:1].isdigit() or token[:1] in ("+", "-", "."):
                # Attributes are keywords ('c Red'), quoted labels or '[1-*]' intervals:
                # a token starting like a number was meant as one.
                raise self.src.fail(f"line {line_no}: {what} {token[:60]!r} is not a number", "write numbers like 0.25 or 1e-3")
            else:
                return None
        if not np.isfinite(value):
            raise self.src.fail(f"line {line_no}: {what} {token[:60]!r} is not finite")
        return value

    def _vertex_id(self, token: str, line_no: int, what: str = "vertex id") -> int:
        if not is_int_token(token):
            raise self.src.fail(f"line {line_no}: expected an integer {what}, got {token[:60]!r}")
        v = int(token)
        if not 1 <= v <= self.net.n:
            raise self.src.fail(f"line {line_no}: {what} {v} is out of range 1..{self.net.n}", "check '*Vertices n'")
        return v

    def _vertex_line(self, s: str, line_no: int) -> None:
        self._vertex_id(s.split(None, 1)[0], line_no)

    def _line_relation(self, s: str, line_no: int) -> tuple[str, int | None]:
        """Split a ``k: ...`` relation prefix off a data line; else the section's relation."""
        match = _RELATION_PREFIX.match(s)
        if match is None:
            self.net.note_relation(self.relation, line_no)
            return s, self.relation
        number = int(match.group(1))
        if number < 1:
            raise self.src.fail(f"line {line_no}: relation number {number} must be a positive integer")
        self.net.note_relation(number, line_no)
        return match.group(2), number

    def _edge_line(self, s: str, line_no: int) -> None:
        s, relation = self._line_relation(s, line_no)
        tokens = s.split()
        if len(tokens) < 2:
            raise self.src.fail(f"line {line_no}: expected 'i j [weight]', got {s[:50]!r}")
        i, j = self._vertex_id(tokens[0], line_no), self._vertex_id(tokens[1], line_no)
        w = 1.0
        if len(tokens) > 2:
            value = self._number(tokens[2], line_no, "weight")
            if value is not None:  # else an attribute such as 'c Red' or '[1-*]'
                w = value
        self.net.add(i, j, w, self.state == "edges", line_no, relation)

    def _list_line(self, s: str, line_no: int) -> None:
        s, relation = self._line_relation(s, line_no)
        tokens = s.split()
        if not tokens:
            raise self.src.fail(f"line {line_no}: expected 'i j k ...', got nothing after the relation number")
        i = self._vertex_id(tokens[0], line_no)
        for count, t in enumerate(tokens[1:]):
            if not is_int_token(t):
                if parse_float(t) is not None or is_missing_token(t) or is_number_like(t):
                    # a weight: lists hold none, and it was dropped without a word
                    raise self.src.fail(f"line {line_no}: {t[:60]!r} in a *{self.state.capitalize()} line, which lists "
                                        "vertex ids only (no weights)",
                                        f"write weighted lines in *{'Edges' if self.state == 'edgeslist' else 'Arcs'} "
                                        "sections ('i j weight')")
                break
            self.net.add(i, self._vertex_id(t, line_no), 1.0, self.state == "edgeslist", line_no, relation)
            self.list_edges += int(count > 0)  # (parse_cost counts one a line)

    def _matrix_line(self, s: str, line_no: int) -> None:
        if len(s) > _MATRIX_LONG_LINE:  # its list of floats, 32 bytes a value (a whole matrix may be one line)
            check_memory(self._estimate() + _MATRIX_LINE_CHAR_COST * len(s), limit=self.src.max_memory,
                         what=f"{self.src.display}: line {line_no}: a *Matrix line of {len(s):,} characters")
        values = []
        for t in s.split():
            value = self._number(t, line_no, "*Matrix value")
            if value is None:
                raise self.src.fail(f"line {line_no}: *Matrix value {t[:60]!r} is not a finite number")
            values.append(value)
        self.net.matrices[-1].add(values)


# ---------------------------------------------------------------------------
# assembling the matrix
# ---------------------------------------------------------------------------


def _select_relation(src: Source, net: _Network, relation: int | None, notes: list[str]) -> None:
    """Keep only relation ``relation`` of ``net`` (None: all, summed), with notes."""
    if relation is None:
        if len(net.relations) > 1:
            notes.append(f"Pajek: {counted(len(net.relations), 'relation')} summed: {net.describe_relations()} "
                         f"({parameter('relation', shown='K')} picks one)")
        elif net.relations:
            notes.append(f"Pajek: relation {net.describe_relations()}")
        return
    if not net.relations:
        raise ParameterError(
            f"{src.display}: {parameter('relation', relation)} but the network has no numbered relations "
            f"('*Arcs :k', '*Edges :k', '*Matrix :k' or 'k: i j' lines); drop {parameter('relation')}"
        )
    if relation not in net.relations:
        raise ParameterError(
            f"{src.display}: {parameter('relation', relation)} does not exist; the network's relations are "
            f"{net.describe_relations()}"
        )
    if net.unnumbered_line is not None:
        raise src.fail(
            f"line {net.unnumbered_line}: {parameter('relation', relation)} asked, but this line has no relation number "
            "(neither '*Arcs :k' nor a 'k:' prefix), so it belongs to no known relation",
            f"drop {parameter('relation')} to sum all lines",
        )
    keep = np.asarray(net.relation_of) == relation
    for name, _ in _COLUMNS:
        setattr(net, name, getattr(net, name)[keep])
    net.matrices = [b for b in net.matrices if b.relation == relation]
    label = net.relations[relation]
    notes.append(f"Pajek: relation {relation}{f' {label!r}' if label else ''} of {len(net.relations)} "
                 f"({net.describe_relations()})")


def _matrix_sum(src: Source, net: _Network, rows: int, cols: int) -> np.ndarray | None:
    """The sum of the network's ``*Matrix`` sections (one per relation), or None.

    The first section's array is the sum (the others added into it in place: nothing allocated beside the
    arrays :meth:`_Parser._start_matrix` checked)."""
    total = None
    for block in net.matrices:
        if block.count != rows * cols:
            raise src.fail(
                f"line {block.line_no}: *Matrix section holds {counted(block.count, 'value')}, "
                f"expected {rows:,} x {cols:,} = {rows * cols:,}"
            )
        values = block.values[:block.count].reshape(rows, cols)
        if total is None:
            total = values
        else:
            total += values
    return total


def _plus_sparse(dense: np.ndarray, A: sp.csr_array) -> np.ndarray:
    """``dense + A`` written into ``dense`` (``A`` with its repeated entries summed: one value a position),
    as ``A.toarray() + dense`` sums it without its two dense copies."""
    coo = A.tocoo()
    dense[coo.row, coo.col] += coo.data
    return dense


def _ids_from_zero(ids: np.ndarray, more: np.ndarray) -> np.ndarray:
    """``ids`` then ``more`` (1-based), less one, in one new array (not a copy less one, then joined)."""
    out = np.empty(len(ids) + len(more), dtype=np.int64)
    np.subtract(ids, 1, out=out[:len(ids)])
    np.subtract(more, 1, out=out[len(ids):])
    return out


def _adjacency(src: Source, net: _Network) -> sp.csr_array | np.ndarray:
    """The n x n adjacency as written: arcs i->j, edges both ways (self-loops once)."""
    n = net.n
    i, j, w = net.src_i, net.src_j, net.weight
    mirror = net.undirected & (i != j)
    rows, cols = _ids_from_zero(i, j[mirror]), _ids_from_zero(j, i[mirror])  # (int64: scipy keeps them so)
    vals = np.concatenate([w, w[mirror]]) if mirror.any() else w
    del mirror
    A = sp.csr_array((vals, (rows, cols)), shape=(n, n))
    A.sum_duplicates()
    dense = _matrix_sum(src, net, n, n)
    return A if dense is None else _plus_sparse(dense, A)


def _infer_split(net: _Network) -> int | None:
    """n1 such that every line joins 1..n1 to n1+1..n, or None."""
    if not len(net.src_i):
        return None
    i, j = np.asarray(net.src_i), np.asarray(net.src_j)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    n1 = int(lo.max())
    return n1 if int(hi.min()) > n1 else None


def _bipartite_block(src: Source, net: _Network, n1: int) -> sp.csr_array | np.ndarray:
    """B (n1 x n2): rows are vertices 1..n1, columns n1+1..n."""
    n2 = net.n - n1
    i, j = np.asarray(net.src_i, dtype=np.int64), np.asarray(net.src_j, dtype=np.int64)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    bad = np.flatnonzero((lo > n1) | (hi <= n1))
    if bad.size:
        k = int(bad[0])
        raise src.fail(
            f"line {net.line_of[k]}: in a 2-mode network every line must join a row vertex (1..{n1}) "
            f"and a column vertex ({n1 + 1}..{net.n}), got {i[k]} {j[k]}"
        )
    del bad
    lo -= 1  # in place: the 0-based row and column indices (two copies less a line at the peak)
    hi -= 1 + n1
    B = sp.csr_array((np.asarray(net.weight, dtype=np.float64), (lo, hi)), shape=(n1, n2))
    del lo, hi
    B.sum_duplicates()
    dense = _matrix_sum(src, net, n1, n2)
    return B if dense is None else _plus_sparse(dense, B)


def _check_projection_memory(src: Source, B, mode: str, limit: int | None, held: int = 0) -> None:
    """Bound the projection's stored entries before multiplying, beside ``held``: the bytes the read holds
    at that moment, B's included (:func:`_read_bytes_held`).

    Entry (a, b) of B·Bᵀ is nonzero only if rows a and b share a column, so
    the sum over columns of (column count)² bounds its entries (and
    symmetrically for BᵀB); hubs can make this huge.
    """
    pattern = sp.csr_array(B) if sp.issparse(B) else sp.csr_array(np.asarray(B))
    counts = np.diff(pattern.tocsc().indptr) if mode == "rows" else np.diff(pattern.indptr)
    del pattern
    bound = int(np.sum(counts.astype(np.int64) ** 2))
    side = B.shape[0] if mode == "rows" else B.shape[1]
    product = min(16 * bound, 8 * side * side) * 2
    # the product alone was checked: B, the lines' arrays and the file's bytes, all held while it is made,
    # were left out of the limit
    check_memory(product + held, limit=limit,
                 what=f"{src.display}: 2-mode projection ({mode}), {format_bytes(product)}, beside the "
                      f"{format_bytes(held)} the read holds (B, the lines' arrays, the file's bytes)")


def _array_bytes(B) -> int:
    """The bytes of a dense or scipy sparse array (its values and index arrays)."""
    if sp.issparse(B):
        return sum(getattr(B, name).nbytes for name in ("data", "indices", "indptr", "row", "col") if hasattr(B, name))
    return np.asarray(B).nbytes


def _read_bytes_held(src: Source, networks: list[_Network]) -> int:
    """What a Pajek read holds once parsed: the file's bytes (its :class:`Source`'s) and every network's
    column arrays and ``*Matrix`` arrays (a dense B is its first section's array, counted here)."""
    arrays = [getattr(net, name) for net in networks for name, _ in _COLUMNS]
    arrays += [block.values for net in networks for block in net.matrices]
    return src.held + sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


def _resolve_split(src: Source, net: _Network, mode: str | None, notes: list[str]) -> int | None:
    """n1 of a 2-mode network (declared, or inferred when needed); None for 1-mode."""
    declared = net.n1 is not None or net.two_mode_header
    if net.n1 is not None or not (declared or mode in ("rows", "cols")):
        return net.n1
    n1 = _infer_split(net)
    if n1 is None and declared:
        raise src.fail(
            "network is declared 2-mode but '*Vertices n' gives no n1 and the lines do not split into two modes",
            "write '*Vertices n n1'",
        )
    if n1 is None:
        raise src.fail(
            f"{parameter('two_mode', mode)} needs a 2-mode network ('*Vertices n n1'), and the lines do not split "
            f"into two vertex ranges", f"drop {parameter('two_mode')}",
        )
    how = "declared 2-mode" if declared else "file does not declare 2-mode"
    notes.append(f"{how}; split inferred from the lines: rows 1..{n1}, columns {n1 + 1}..{net.n}")
    return n1


def _one_mode(src: Source, net: _Network, mode: str | None, notes: list[str]):
    """The adjacency as written, with a hint when the lines look 2-mode."""
    if mode == "bipartite":
        notes.append(f"network is 1-mode: {parameter('two_mode', 'bipartite')} loads it as written")
    else:
        guess = _infer_split(net)
        if guess is not None and guess >= 2 and net.n - guess >= 2:
            notes.append(
                f"every line joins 1..{guess} to {guess + 1}..{net.n}: this looks like a 2-mode network; "
                f"{parameter('two_mode', 'rows')} or {parameter('two_mode', 'cols')} projects it"
            )
    return _adjacency(src, net)


def _two_mode(src: Source, net: _Network, mode: str | None, notes: list[str], limit: int | None = None,
              reading: dict | None = None, held: int = 0):
    """The matrix for ``two_mode=mode``: 1-mode adjacency, B·Bᵀ, BᵀB or the bipartite adjacency; the mode
    used goes in ``reading["two_mode"]`` (None: a 1-mode adjacency as written, as ``"bipartite"`` gives it).
    ``held``: the bytes the read holds before B is made (:func:`_read_bytes_held`), checked with a projection."""
    reading = {} if reading is None else reading
    n1 = _resolve_split(src, net, mode, notes)
    if n1 is None:
        reading["two_mode"] = None
        return _one_mode(src, net, mode, notes)
    B = _bipartite_block(src, net, n1)
    n2 = net.n - n1
    reading["two_mode"] = mode or "rows"
    if mode is None:
        mode = "rows"
        notes.append(
            f"2-mode network {n1}x{n2} projected to rows (B·Bᵀ), as the file declares; "
            f"change with {parameter('two_mode')}: 'rows', 'cols' or 'bipartite'"
        )
    else:
        notes.append(f"2-mode network {n1}x{n2}: {parameter('two_mode', mode)}")
    if mode in ("rows", "cols"):
        # B beside what the read held before it (a dense B is its first *Matrix section's array, counted there)
        _check_projection_memory(src, B, mode, limit, held + (_array_bytes(B) if sp.issparse(B) else 0))
        with np.errstate(over="ignore", invalid="ignore"):  # said below, as one line, not as a warning
            product = B @ B.T if mode == "rows" else B.T @ B
        values = product.data if sp.issparse(product) else product
        if not np.isfinite(values).all():
            raise src.fail(f"its {'B·Bᵀ' if mode == 'rows' else 'BᵀB'} projection overflows (weights too large to "
                           "multiply in float64)", f"scale the weights down, or use {parameter('two_mode', 'bipartite')}")
        return product
    if sp.issparse(B):
        return sp.csr_array(sp.bmat([[None, B], [B.T, None]], format="csr"))
    return np.block([[np.zeros((n1, n1)), B], [B.T, np.zeros((n2, n2))]])


def read_pajek(src: Source, opts: Options) -> ReadResult:
    """Reader for format "pajek" (``.net``, ``.paj``)."""
    parser = _Parser(src, opts)
    networks = parser.parse(src.read_text(parse_cost))
    which = opts.network or 1
    if which > len(networks):
        count = len(networks)
        raise ParameterError(
            f"{src.display}: {parameter('network', which)} but the file holds {counted(count, 'network')}; "
            f"use {parameter('network', shown=f'1..{count}')}"
        )
    net = networks[which - 1]
    notes: list[str] = []
    if len(networks) > 1:
        ordinal = _ORDINALS.get(which, f"number {which}")
        notes.append(f"file holds {counted(len(networks), 'network')}; loaded the {ordinal} "
                     f"({parameter('network', shown='K')} picks another)")
    if net.name:
        notes.append(f"Pajek network {net.name!r}")
    _select_relation(src, net, opts.relation, notes)
    if parser.fortran_weights:
        notes.append(f"Pajek: {counted(parser.fortran_weights, 'number')} written with a Fortran exponent (1.0D+00) read as 1.0E+00")
    if parser.comma_weights:
        notes.append(f"Pajek: {counted(parser.comma_weights, 'number')} written with a decimal comma (0,25) read as 0.25")
    for kind in ("arcs", "edges"):
        if net.repeats[kind]:
            notes.append(f"Pajek: {net.repeats[kind]} repeated {kind} summed")
    # what picked the matrix, as read: network 1 and a relation or two_mode given as the file's default
    # are the matrix read without them
    reading = {"network": which, "relation": _relation_read(net, opts.relation)}
    matrix = _two_mode(src, net, opts.two_mode, notes, opts.max_memory_bytes, reading, _read_bytes_held(src, networks))
    return ReadResult(matrix, "pajek", notes, reading=reading)


def _relation_read(net: _Network, relation: int | None) -> int | None:
    """The relation ``net`` was read as: the one picked, the network's only one (every line numbered
    with it: all lines summed are it), or None (all relations summed, or none numbered)."""
    if relation is None and len(net.relations) == 1 and net.unnumbered_line is None:
        return next(iter(net.relations))
    return relation
