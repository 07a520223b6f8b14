"""A ``.npy`` file's header, read without its data, and whether its data is all there.

What both ``.npy`` paths check before touching the values: the reader that
loads the array (:mod:`sfapprox.io._numpy`) and the memory map of a file too
big to load (:func:`sfapprox.sources.open_npy`).  The element count is taken
in Python integers, so a crafted header's shape cannot overflow the checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .formats import shape_text

__all__ = ["NpyHeader", "read_npy_header", "PICKLE_REFUSAL"]

#: Why an array of Python objects is not read, and what to do: both readers refuse it before any
#: ``np.load`` (always ``allow_pickle=False``: unpickling runs the file's code), in these words.
PICKLE_REFUSAL = ("contains Python objects (pickle); refusing to load untrusted pickles; save its numbers as a "
                  "numeric array (np.save(path, np.asarray(X, dtype=float)))")


@dataclass(frozen=True)
class NpyHeader:
    """Shape, dtype and data offset of a ``.npy`` stream.

    Examples
    --------
    >>> h = NpyHeader((30, 30), np.dtype(np.float64), 128)
    >>> h.count, h.data_bytes, h.truncation(128 + 7200), h.truncation(128 + 7192)[:40]
    (900, 7200, None, 'its header declares a 30 x 30 float64 ar')
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int  # where the data starts (the stream position after the header)

    @property
    def count(self) -> int:
        """Number of elements (a Python int: no overflow)."""
        return math.prod(self.shape)

    @property
    def data_bytes(self) -> int:
        """Bytes of the values the header declares."""
        return self.count * self.dtype.itemsize

    def truncation(self, file_size: int) -> str | None:
        """Why a file of ``file_size`` bytes cannot hold the declared data (one line), or None when it can."""
        held = file_size - self.offset
        if held >= self.data_bytes:
            return None
        return (f"its header declares a {shape_text(self.shape)} {self.dtype} array "
                f"({self.data_bytes:,} bytes of values) but the file holds {max(held, 0):,} bytes after the "
                "header; it is truncated")


def read_npy_header(fh) -> NpyHeader:
    """The header of the ``.npy`` stream ``fh`` (positioned at its start), leaving ``fh`` after it.

    Raises
    ------
    ValueError, OSError or EOFError
        What numpy raises for a stream that is not a ``.npy`` array.
    """
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    return NpyHeader(tuple(int(d) for d in shape), dtype, fh.tell())
