"""Feature covariance of a samples x features table (``covariance=True``).

Tables come from dense text (``.csv``/``.tsv``/``.txt``/``.dat``), ``.npy``
or LIBSVM/svmlight text (``label idx:val ...``, 1-based indices).  The
result is ``np.cov(table, rowvar=False)`` (ddof=1), features x features.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_memory
from ._common import Options, ReadResult, Source, is_int_token, parse_float
from ._numpy import read_table_npy
from ._text import read_table


def read_libsvm_table(src: Source, opts: Options) -> tuple[np.ndarray, list[str]]:
    """Parse LIBSVM/svmlight lines into a dense samples x features table."""
    rows: list[tuple[list[int], list[float]]] = []
    for line_no, line in enumerate(src.read_text().splitlines(), start=1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        idx: list[int] = []
        val: list[float] = []
        for token in s.split()[1:]:  # the first token is the label
            key, sep, value = token.partition(":")
            number = parse_float(value) if sep else None
            if key == "qid":
                continue
            if not is_int_token(key) or number is None or int(key) < 0:
                raise src.fail(f"line {line_no}: expected 'index:value', got {token!r}")
            idx.append(int(key))
            val.append(number)
        rows.append((idx, val))
    if not rows:
        raise src.fail("no samples (only blank or comment lines)")
    all_idx = [i for r in rows for i in r[0]]
    if not all_idx:
        raise src.fail("no features: every sample is empty")
    zero_based = min(all_idx) == 0
    n_features = max(all_idx) + (1 if zero_based else 0)
    check_memory(8 * len(rows) * n_features, what=f"{src.display}: {len(rows)} x {n_features} table", limit=opts.max_memory)
    table = np.zeros((len(rows), n_features))
    for r, (idx, val) in enumerate(rows):
        cols = np.asarray(idx, dtype=np.int64) - (0 if zero_based else 1)
        np.add.at(table[r], cols, val)
    notes = ["LIBSVM: an index 0 appears, indices read as 0-based"] if zero_based else []
    return table, notes


def covariance_of(src: Source, table: np.ndarray, opts: Options, notes: list[str]) -> ReadResult:
    """Sample covariance (ddof=1) of a samples x features table."""
    table = np.asarray(table)
    if table.ndim != 2:
        raise src.fail(f"covariance needs a 2-D samples x features table, got shape {table.shape}")
    if table.dtype.kind not in "biuf":
        raise src.fail(f"covariance needs a real numeric table, got dtype {table.dtype}")
    n_samples, n_features = table.shape
    if n_samples < 2:
        raise src.fail(f"covariance needs at least 2 samples (rows), got {n_samples}")
    if n_features < 1:
        raise src.fail("covariance needs at least 1 feature (column)")
    if not np.isfinite(table).all():
        rows, cols = np.nonzero(~np.isfinite(table))
        raise src.fail(
            f"table has {rows.size} NaN/Inf cells (first at row {rows[0]}, col {cols[0]}; 0-based)",
            "covariance needs complete data",
        )
    check_memory(8 * n_features * n_features, what=f"{src.display}: {n_features} x {n_features} covariance", limit=opts.max_memory)
    C = np.atleast_2d(np.cov(table.astype(np.float64), rowvar=False, ddof=1))
    notes = notes + [f"sample covariance of {n_samples} samples x {n_features} features"]
    return ReadResult(C, "covariance", notes)


def read_samples(src: Source, opts: Options, source_format: str) -> tuple[np.ndarray, list[str]]:
    """The samples x features table in ``source_format`` ("csv", "npy", "libsvm") and what reading it noted."""
    if source_format == "libsvm":
        return read_libsvm_table(src, opts)
    if source_format == "npy":
        return read_table_npy(src, opts), []
    return read_table(src, opts)


def read_covariance(src: Source, opts: Options, source_format: str) -> ReadResult:
    """Load the table in ``source_format`` ("csv", "npy", "libsvm") and return its covariance."""
    table, notes = read_samples(src, opts, source_format)
    return covariance_of(src, table, opts, notes)
