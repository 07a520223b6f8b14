"""Feature covariance of a samples x features table (``covariance=True``).

Tables come from dense text (``.csv``/``.tsv``/``.txt``/``.dat``), ``.npy``
or LIBSVM/svmlight text (``label idx:val ...``, 1-based indices).  The
result is ``np.cov(table, rowvar=False)`` (ddof=1), features x features.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings
from array import array

import numpy as np

from .._validation import check_memory
from ..formats import counted, shape_text
from ._common import (MAX_DIM, Options, ReadResult, Source, is_int_token, parse_float, repeated_keys, split_cost,
                      text_width)
from ._numpy import read_table_npy
from ._text import read_table


#: The characters of a LIBSVM text's features that the whole-text reader (:func:`_libsvm_arrays`) takes:
#: digits, the colon, a decimal number's signs, point and exponent, and white space.  Any other (``qid``,
#: ``nan``, ``1_000``, hex) leaves the text to the line-by-line reader, which says what is wrong with it.
_LIBSVM_CHARS = b"0123456789:.eE+- \t\n"
#: What the whole-text reader leaves to the line-by-line one, beyond other characters: a token with two
#: colons, an index that is not digits alone (``+1:``, ``1.5:``, ``1e1:``), an empty index or value.
_LIBSVM_ODD = (re.compile(rb":[^\s:]*:"), re.compile(rb"[.eE+-][0-9]*:"))
_LIBSVM_EMPTY = (b" :", b"\t:", b"\n:", b": ", b":\t", b":\n")


def _libsvm_arrays(text: str) -> tuple[int, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(samples, rows, indices, values)`` of a LIBSVM text: its samples (non-blank lines) and each feature's
    row, index and value (each line's label dropped), parsed in C over the whole text; None where a line or
    token needs :func:`read_libsvm_table`'s own reading (a comment, ``qid``, what :data:`_LIBSVM_ODD` finds),
    which also says what is wrong.

    Line by line, each token a Python string (MNIST's 60,000 images: 9 million of them), took 58 s and
    1.3 GB for a file of 67 MB; this, about 6 s and the table's memory.  Each feature is two numbers once
    its colon is a space: with every token at most one colon and none empty on either side of it, the
    numbers are twice the colons only where every token is ``index:value`` (a token without a colon, or
    a value that reads as two numbers, adds one)."""
    if "#" in text or not text.isascii():
        return None
    lines = [line.split(None, 1) for line in text.splitlines()]
    if any(":" in parts[0] for parts in lines if parts):  # a line without its label: read line by line
        return None
    features = [parts[1] if len(parts) > 1 else "" for parts in lines if parts]
    del lines  # (each step lets the copy before it go: the text's copies were the reader's peak, text_memory)
    counts = np.fromiter((f.count(":") for f in features), dtype=np.int64, count=len(features))
    body = "\n".join(features).encode("ascii")
    del features
    if (not body or body.translate(None, _LIBSVM_CHARS) or body.startswith(b":") or body.endswith(b":")
            or any(empty in body for empty in _LIBSVM_EMPTY) or any(odd.search(body) for odd in _LIBSVM_ODD)):
        return None
    spaced = body.replace(b":", b" ")
    del body
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")  # a number numpy could not read: it stops there and warns, or raises
        try:
            numbers = np.fromstring(spaced, dtype=np.float64, sep=" ")
        except ValueError:
            return None
    del spaced
    if (said or numbers.size != 2 * counts.sum() or (numbers.size and numbers[0::2].max() > MAX_DIM)
            or not np.isfinite(numbers).all()):
        # (an index beyond MAX_DIM wraps around in int64: the line-by-line reader sizes it first; a value
        # beyond float64's range, 1e999, is named by its line there)
        return None
    return len(counts), np.repeat(np.arange(len(counts)), counts), numbers[0::2].astype(np.int64), numbers[1::2]


#: Peak bytes a LIBSVM line takes beside its text, its string and a copy of its characters (:func:`libsvm_cost`):
#: its label's and features' strings and list while split (benchmarks/results/text_memory.md), with margin.
_LIBSVM_LINE_BYTES = 200
#: Bytes a feature of the whole-text reader holds while its table is formed: its row, index and value
#: (8 each), the value's index as written (8), the 0-based one (8), and 16 of margin for ``np.add.at``'s
#: (benchmarks/results/text_memory.md: 40 with no margin was the traced peak to 0.1%, under RSS).
_FEATURE_BYTES = 56


def libsvm_cost(data: bytes, lines: int) -> int:
    """Peak bytes of reading LIBSVM text (:func:`_libsvm_arrays`): :func:`split_cost`, one more copy of the
    characters (each line's split and the features joined again) and :data:`_LIBSVM_LINE_BYTES` a line."""
    return split_cost(data, lines) + text_width(data) * len(data) + _LIBSVM_LINE_BYTES * lines


def _dense_table(src: Source, opts: Options, text: str, n_rows: int, rows: np.ndarray, idx: np.ndarray,
                 vals: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The ``n_rows x features`` table of :func:`_libsvm_arrays`' features (of ``text``), read as the
    line-by-line reader does: 1-based indices unless an index 0 appears, a repeated index adding up."""
    zero_based = int(idx.min()) == 0
    n_features = int(idx.max()) + (1 if zero_based else 0)
    # with the file's bytes and text held, and the features' arrays (alone, the table's check let a read
    # peak at over twice it: text_memory)
    held = (1 + text_width(text)) * len(src.read_bytes()) + _FEATURE_BYTES * idx.size
    check_memory(held + 8 * n_rows * n_features, what=f"{src.display}: {n_rows:,} x {n_features:,} table",
                 limit=opts.max_memory_bytes)
    table = np.zeros((n_rows, n_features))
    with np.errstate(over="ignore"):  # repeats adding up beyond float64: refused below, by their line
        np.add.at(table, (rows, idx - (0 if zero_based else 1)), vals)
    notes = ["LIBSVM: an index 0 appears, indices read as 0-based"] if zero_based else []
    repeated = _repeated_features(rows, idx, n_features)
    _refuse_overflowing_sums(src, text, table, repeated, zero_based)
    return table, notes + _repeated_note(repeated)


def _repeated_features(rows: np.ndarray, idx: np.ndarray, n_features: int) -> int:
    """How many (sample, feature) pairs repeat one before them.  ``rows`` is non-decreasing (one sample's
    features follow each other): where each sample's indices increase, as LIBSVM writers write them, there is
    none, known from one comparison of neighbours; a sort of every pair (8M keys: 190 MB more than the
    pre-repeat reader, read_formats benchmark) only for the rest."""
    if not ((rows[1:] == rows[:-1]) & (idx[1:] <= idx[:-1])).any():
        return 0
    keys = rows.astype(np.int64) * (n_features + 1) + idx
    return repeated_keys(keys)


def _refuse_overflowing_sums(src: Source, text: str, table: np.ndarray, repeated: int, zero_based: bool) -> None:
    """Refuse a repeated feature whose values add up beyond float64 (each value was checked finite as read)
    by its sample's line and the feature's index as written, as a value that is not finite is named; the
    covariance's check named numpy's 0-based row and column.  Only a file with repeats can hold one."""
    if not repeated or np.isfinite(table).all():
        return
    row, col = (int(k) for k in np.argwhere(~np.isfinite(table))[0])
    samples = (n for n, line in enumerate(text.splitlines(), start=1) if line.split("#", 1)[0].strip())
    line_no = next(itertools.islice(samples, row, None))
    raise src.fail(f"line {line_no}: feature {col + (0 if zero_based else 1)}, given more than once, adds up to "
                   f"{table[row, col]:g}, not a finite number",
                   "give each feature once in a sample, or scale the values down")


def _repeated_note(repeated: int) -> list[str]:
    """The note of features given more than once in a sample (added up), as the sparse readers note theirs."""
    return [f"LIBSVM: {counted(repeated, 'repeated feature index', 'repeated feature indices')} summed (a feature "
            "given twice in one sample)"] \
        if repeated else []


#: Bytes a feature of the line-by-line reader (:func:`_libsvm_lines`) holds while it reads: its index and
#: value (8 each, in growing arrays: 1/16 more) and a margin; with its line's count (8), beside the text split
#: into lines.  Its lists of Python ints and floats held about 70 (a file of qid lines peaked at 1.25 times
#: read_text's check, benchmarks/results/read_memory.md).
_LINE_FEATURE_BYTES = 20


def _libsvm_lines(src: Source, text: str) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, int]:
    """``(samples, rows, indices, values, unlabelled)`` of a LIBSVM text read line by line, as
    :func:`_libsvm_arrays` gives the first four (each feature's row, index as written and value), with the
    number of lines written without a label; what is wrong with a line or token is said by its line."""
    counts, indices, values = array("q"), array("q"), array("d")  # 8 bytes a number (a list's were ~70)
    unlabelled = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        tokens = s.split()
        # the first token is the label; one with a colon is a feature of a line written without one
        # (it was dropped as the label: the sample lost its first feature, without a word)
        labelled = ":" not in tokens[0]
        unlabelled += not labelled
        before = len(indices)
        for token in tokens[labelled:]:
            key, sep, value = token.partition(":")
            number = parse_float(value) if sep else None
            if key == "qid":
                continue
            if not is_int_token(key) or number is None or int(key) < 0:
                raise src.fail(f"line {line_no}: expected 'index:value', got {token!r}")
            if int(key) > MAX_DIM:
                raise src.fail(f"line {line_no}: feature index {key} is beyond the largest supported, {MAX_DIM:,}",
                               "check the file")
            if not math.isfinite(number):  # named here: the covariance's check gave a 0-based row and column
                raise src.fail(f"line {line_no}: feature {token!r} is not a finite number",
                               "every feature needs a finite value: replace it or remove the feature")
            indices.append(int(key))
            values.append(number)
        counts.append(len(indices) - before)
    if not counts:
        raise src.fail("no samples (only blank or comment lines)")
    if not indices:
        raise src.fail("no features: every sample is empty")
    rows = np.repeat(np.arange(len(counts)), np.frombuffer(counts, dtype=np.int64))
    return (len(counts), rows, np.frombuffer(indices, dtype=np.int64), np.frombuffer(values, dtype=np.float64),
            unlabelled)


def read_libsvm_table(src: Source, opts: Options) -> tuple[np.ndarray, list[str]]:
    """Parse LIBSVM/svmlight lines into a dense samples x features table."""
    text = src.read_text(libsvm_cost)
    fast = _libsvm_arrays(text)
    if fast is not None and fast[2].size:  # (no feature at all: said below)
        return _dense_table(src, opts, text, *fast)
    # line by line: the file's bytes, its text, its lines and each feature's numbers (at most one a colon)
    lines = text.count("\n") + 1
    check_memory(split_cost(src.read_bytes(), lines) + _LINE_FEATURE_BYTES * text.count(":") + 8 * lines,
                 what=f"{src.display}: parsing {lines:,} lines of LIBSVM text one by one", limit=opts.max_memory_bytes)
    samples, rows, idx, vals, unlabelled = _libsvm_lines(src, text)
    table, notes = _dense_table(src, opts, text, samples, rows, idx, vals)
    if unlabelled:
        notes.append(f"LIBSVM: {unlabelled:,} of {counted(samples, 'line')} {'has' if unlabelled == 1 else 'have'} no "
                     f"label ({'its' if unlabelled == 1 else 'their'} first token is a feature)")
    return table, notes


#: Bytes numpy's reductions buffer beside their arrays (8,192 elements, 64 KiB: np.cov's mean peaked 67 KB
#: over the table, its copy and the covariance; read_memory).
_REDUCTION_BUFFERS = 1 << 17


def covariance_of(src: Source, table: np.ndarray, opts: Options, notes: list[str]) -> ReadResult:
    """Sample covariance (ddof=1) of a samples x features table."""
    table = np.asarray(table)
    if table.ndim != 2:
        raise src.fail(f"covariance needs a 2-D samples x features table, got shape {shape_text(table.shape)}")
    if table.dtype.kind not in "biuf":
        raise src.fail(f"covariance needs a real numeric table, got dtype {table.dtype}")
    n_samples, n_features = table.shape
    if n_samples < 2:
        raise src.fail(f"covariance needs at least 2 samples (rows), got {n_samples}")
    if n_features < 1:
        raise src.fail("covariance needs at least 1 feature (column)")
    if not np.isfinite(table).all():
        # A text table's cell is named by its line and column where it is read; what reaches here has no lines
        # (a .npy table): named as an array's entry is, by numpy's index, said to be 0-based.
        rows, cols = np.nonzero(~np.isfinite(table))
        one = rows.size == 1
        raise src.fail(
            f"table has {counted(int(rows.size), 'NaN/Inf cell')} (the first at [{rows[0]}, {cols[0]}]: 0-based, "
            "as numpy indexes)",
            f"covariance needs complete data: replace {'it' if one else 'them'} (numpy.nan_to_num) or remove "
            f"{'its sample (row)' if one else 'their samples (rows)'}",
        )
    # the table (held) and np.cov's copy of it beside the covariance: with the covariance alone, a tall
    # table's read peaked at far over its check (text_memory).  The copy is float64 whatever the table's
    # dtype: counted as the table's bytes twice, a uint8 .npy's peaked at 4.5 times the check, a float32
    # one's at 1.5 times (benchmarks/results/read_memory.md)
    check_memory(8 * n_features * n_features + table.nbytes + 8 * table.size + _REDUCTION_BUFFERS,
                 what=f"{src.display}: {n_features:,} x {n_features:,} covariance (with its table and np.cov's "
                      "float64 copy of it)", limit=opts.max_memory_bytes)
    # np.cov computes in float64 from its own copy of the table: an astype(float64) first was one more copy
    C = np.atleast_2d(np.cov(table, rowvar=False, ddof=1))
    notes = notes + [f"sample covariance of {counted(n_samples, 'sample')} x {counted(n_features, 'feature')}"]
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
    # the file's bytes (its SHA-256 kept) let go before the covariance: held beside the table and np.cov's
    # copy, a compressed .npy's decompressed bytes were a third table (read_memory)
    src.release()
    return covariance_of(src, table, opts, notes)
