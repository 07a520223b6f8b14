"""LINQS citation data (``name.cites`` + ``name.content``, e.g. WebKB, Cora).

Nodes are ordered as the rows of ``.content`` (first token of each line is
the node id); each ``.cites`` line ``cited citing`` sets A[citing, cited] = 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..formats import counted
from ._common import COMPRESSIONS, Options, ReadResult, Source, split_cost, strip_compression


def companion_candidates(path: Path) -> tuple[str, str, list[Path]]:
    """``(stem, other, candidates)``: the other LINQS file's extension and the paths it may have beside
    ``path`` (a ``.cites`` or ``.content`` file, compressed or not)."""
    stem, _, ext = strip_compression(path.name).rpartition(".")
    other = "content" if ext.lower() == "cites" else "cites"
    return stem, other, [path.with_name(f"{stem}.{other}{suffix}") for suffix in ("", *COMPRESSIONS)]


def companion(src: Source) -> tuple[Source, Source]:
    """(cites, content) sources for a path naming either file (compressed allowed)."""
    stem, other, candidates = companion_candidates(src.path)
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise src.fail(
            f"LINQS data needs {stem}.{other} beside it (not found in {src.path.parent or Path('.')})",
            "keep the .cites and .content files together",
        )
    partner = Source(found, src.max_memory)
    partner.check_exists()
    return (src, partner) if other == "content" else (partner, src)


#: Peak bytes a ``.cites`` line takes beside its text and string (:func:`split_cost`): its two tokens while
#: split, and the row and column lists' pointers (benchmarks/results/text_memory.md), with margin.
_CITE_LINE_BYTES = 40
#: Bytes a node of ``.content`` holds while ``.cites`` is read: its id's string and its entry in the index.
_NODE_BYTES = 150


def _node_order(content: Source) -> dict[str, int]:
    index: dict[str, int] = {}
    for line_no, line in enumerate(content.read_text(split_cost).splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] in index:
            raise content.fail(f"line {line_no}: node {tokens[0]!r} appears twice")
        index[tokens[0]] = len(index)
    if not index:
        raise content.fail("no nodes (no non-blank lines)")
    return index


def read_linqs(src: Source, opts: Options) -> ReadResult:
    """Reader for format "linqs"."""
    cites, content = companion(src)
    index = _node_order(content)
    rows: list[int] = []
    cols: list[int] = []
    unknown = 0
    # checked with what .content left held: its bytes (its Source's) and the node index
    held = len(content.read_bytes()) + _NODE_BYTES * len(index)
    cost = lambda data, lines: split_cost(data, lines) + _CITE_LINE_BYTES * lines + held  # noqa: E731
    for line_no, line in enumerate(cites.read_text(cost).splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 2:
            raise cites.fail(f"line {line_no}: expected 'cited citing', got {counted(len(tokens), 'field')}")
        cited, citing = tokens
        if cited not in index or citing not in index:
            unknown += 1
            continue
        rows.append(index[citing])
        cols.append(index[cited])
    n = len(index)
    notes = [f"LINQS: {counted(n, 'node')} in the order of {content.path.name}; A[citing, cited] = 1"]
    if unknown:
        notes.append(f"LINQS: {counted(unknown, 'citation')} naming nodes missing from {content.path.name} skipped")
    A = sp.csr_array((np.ones(len(rows)), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))), shape=(n, n))
    A.sum_duplicates()
    repeated = len(rows) - A.nnz
    if repeated:
        A.data[:] = 1.0
        notes.append(f"LINQS: {counted(repeated, 'repeated citation')} counted once")
    return ReadResult(A, "linqs", notes)
