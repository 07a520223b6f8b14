"""Kernel matrices of a point set, ``K[i, j] = k(x_i, x_j)``, computed a column block at a time.

The motivating example of the SF paper: the double-precision RBF kernel
matrix of MNIST's 70,000 images needs 36.5 GB; its columns need ``N`` numbers
each.  :class:`KernelMatrix` never forms more than a block (unless asked to,
and then only within the memory limit).

Kernels (``h`` the bandwidth, ``d = ||x - y||``):

==============  ===========================================  ==========
``rbf``         ``exp(-d^2 / (2 h^2))``                      PSD
``laplacian``   ``exp(-d / h)``                              PSD
``matern32``    ``(1 + sqrt(3) d / h) exp(-sqrt(3) d / h)``  PSD
``matern52``    ``(1 + sqrt(5) d / h + 5 d^2 / (3 h^2)) exp(-sqrt(5) d / h)``  PSD
``cosine``      ``x.y / (||x|| ||y||)`` (0 for a zero point)  PSD, no bandwidth
``linear``      ``x.y``                                      PSD, no bandwidth
==============  ===========================================  ==========

**Bandwidth.** By default the median heuristic: ``h`` is the median distance
between pairs of points (of a seeded sample of :data:`MEDIAN_SAMPLE` points
when there are more), the usual default of kernel methods; the chosen value
is recorded (``bandwidth_`` and the summary) and printed by the CLI.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._errors import InputError, ParameterError, ResourceError, parameter
from ..formats import shape_phrase
from .._params import MEMORY_LIMIT, SEED, Interval, check_values
from .._settings import DEFAULT_SEED
from .._validation import array_of, check_memory, first_nonfinite, float64_table, held_bytes
from ._base import MatrixSource, form_cells, kept_stop

__all__ = ["KernelMatrix", "KERNELS", "median_bandwidth", "MEDIAN_SAMPLE", "check_kernel"]

#: The kernels and whether each takes a bandwidth.
KERNELS = {"rbf": True, "laplacian": True, "matern32": True, "matern52": True, "cosine": False, "linear": False}
#: Other names of the kernels, which a typo check cannot reach by spelling ("gaussian" is rbf): only
#: suggested, never taken, so that a recorded run names its kernel one way.
KERNEL_SYNONYMS = {"gaussian": "rbf", "gauss": "rbf", "squared_exponential": "rbf", "se": "rbf", "exponential": "laplacian",
                   "laplace": "laplacian", "matern": "matern32 or matern52", "dot": "linear", "cos": "cosine"}
#: Points the median heuristic looks at, at most (a seeded sample of them).
MEDIAN_SAMPLE = 2000


#: Where a Matérn kernel's ``exp(-s)`` is 0 in float64 (below 2**-1074 from s = 745): its entries are 0 beyond.
MATERN_FAR = 1000.0

#: Rows of the sample whose distances :func:`median_bandwidth` computes at a time.
MEDIAN_BLOCK = 256


def median_bytes(n: int, d: int, sample: int = MEDIAN_SAMPLE, *, dtype=np.float64, contiguous: bool = True) -> int:
    """Bytes :func:`median_bandwidth` takes beside the points: the sample (the index its draw takes, its
    rows in the points' dtype) and its float64 copy, their squared norms, the ``m(m-1)/2`` distances, then
    a row block of inner products (and a row's) or the zeros' mask, whichever is larger.

    Parameters
    ----------
    n, d : int
        The points' count and features.
    sample : int, default=MEDIAN_SAMPLE
        Points looked at, at most (``m``).
    dtype : numpy dtype, default=float64
        The points' type.
    contiguous : bool, default=True
        Whether the points are C-contiguous (else copied where they are not sampled).

    Returns
    -------
    int
        The bytes, an upper bound.

    Examples
    --------
    >>> median_bytes(2000, 5) // 2**20  # the pairs' 15.3 MiB, a block's 3.9 MiB
    19
    """
    m = min(n, sample)
    pairs = m * (m - 1) // 2
    dtype = np.dtype(dtype)
    sampled = n > sample
    copy = 8 * n + m * d * dtype.itemsize if sampled else 0  # (the draw: a permutation at most)
    if dtype != np.float64 or not (contiguous or sampled):
        copy += 8 * m * d
    return copy + 8 * m + 8 * pairs + max(8 * min(m, MEDIAN_BLOCK) * m + 8 * m, pairs)


def median_bandwidth(points: np.ndarray, *, seed: int = DEFAULT_SEED, sample: int = MEDIAN_SAMPLE,
                     max_memory: int | str | None = None) -> float:
    """The median distance between distinct pairs of points (of a seeded sample of ``sample`` points).

    Parameters
    ----------
    points : array_like, shape (N, d)
        One point per row.
    seed : int, default=0
        Seed of the sample drawn when there are more than ``sample`` points.
    sample : int, default=MEDIAN_SAMPLE
        Points looked at, at most.
    max_memory : int, str or None, default=None
        Memory limit in bytes (or a size such as ``"4G"``) for what is computed here beside the points
        (:func:`median_bytes`: 16 MiB at the default sample); None: the default limit.

    Returns
    -------
    float
        The median of the positive pairwise distances; 1.0 when every point
        is the same.

    Raises
    ------
    ResourceError
        Where that and the points are over ``max_memory``, before any of it is made.

    Examples
    --------
    >>> median_bandwidth(np.array([[0.0], [1.0], [3.0]]))
    2.0
    """
    # the limit in bytes, named apart from the parameter (which takes "4G" too): its readers take an int
    limit: int | None = check_values({"seed": seed, "sample": sample, "max_memory": max_memory},
                                     {"seed": SEED, "sample": Interval(int, 2, None), "max_memory": MEMORY_LIMIT},
                                     "median_bandwidth")["max_memory"]  # (seed -1 was numpy's ValueError, None an unseeded sample)
    raw = array_of(points, "median_bandwidth", "the points", limit)
    n = raw.shape[0]
    _check_median_memory(raw, sample, limit)
    if n > sample:  # the sample's rows, then float64: not a float64 copy of all the points first
        raw = raw[np.random.default_rng(seed).choice(n, sample, replace=False)]
    pts = np.ascontiguousarray(raw, dtype=np.float64)
    del raw
    return _median_distance(pts)


def _check_median_memory(raw: np.ndarray, sample: int, max_memory: int | None) -> None:
    """ResourceError where :func:`median_bandwidth`'s work and the points ``raw`` are over ``max_memory``."""
    # the distances were made whatever --max-memory said (16 MiB at the default sample; the sample of
    # many features its own copy): refused before, counted with the points they are made from
    n = raw.shape[0]
    sampled = f"{sample:,} sampled" if n > sample else f"{n:,}"
    need = median_bytes(n, int(np.prod(raw.shape[1:])), sample, dtype=raw.dtype, contiguous=raw.flags.c_contiguous)
    check_memory(held_bytes(raw) + need, limit=max_memory, advice=f"give the bandwidth ({parameter('bandwidth')})",
                 what=f"the median heuristic's bandwidth (the distances between {sampled} points, and the points)")


def _median_distance(pts: np.ndarray) -> float:
    """The median of the positive distances between the rows of ``pts`` (float64), 1.0 where none is."""
    # The distinct pairs' distances (i < j) filled a row block at a time into one array of m(m-1)/2:
    # the whole m x m matrix, its temporaries and triu_indices' two index arrays took 76 MiB at the
    # default sample whatever --max-memory said; this takes 16 MiB and a block of MEDIAN_BLOCK rows.
    m = pts.shape[0]
    sq = np.einsum("ij,ij->i", pts, pts)
    upper = np.empty(m * (m - 1) // 2)
    at = 0
    for start in range(0, m, MEDIAN_BLOCK):
        stop = min(m, start + MEDIAN_BLOCK)
        inner = pts[start:stop] @ pts[start:].T
        for i in range(stop - start):  # row r = start + i: its pairs with the points after it
            r = start + i
            # (sq_r + sq_j) - 2 <x_r, x_j>, the whole block's expression's numbers, written in place a row
            # at a time: the block's three temporaries took two blocks more than median_bytes counts
            row = upper[at:at + m - r - 1]
            np.add(sq[r], sq[r + 1:], out=row)
            row -= 2.0 * inner[i, i + 1:]
            at += row.size
        del inner
    np.sqrt(np.maximum(upper, 0.0, out=upper), out=upper)
    # the median of the positive ones, in place (a copy of the positives and np.median's took 32 MiB more)
    zeros = int(np.count_nonzero(upper == 0.0))
    positive = upper.size - zeros
    if positive == 0:
        return 1.0
    low, high = zeros + (positive - 1) // 2, zeros + positive // 2
    upper.partition((low, high))
    return float((upper[low] + upper[high]) / 2)


def _check_computable(kernel: str, h: float, points: np.ndarray, seed: int, max_memory: int | None) -> None:
    """Refuse a bandwidth whose scale factor (``1 / 2h^2`` for rbf, ``1 / h`` for the others) is not a
    finite number: ``h^2`` or ``h`` underflows, and every entry off the diagonal would be 0/0 or a crash."""
    denominator = 2.0 * h * h if kernel == "rbf" else h
    if denominator > 0 and math.isfinite(1.0 / denominator):
        return
    try:  # the heuristic's value as a suggestion, where it fits in the memory limit
        hint = f"; the median heuristic gives {median_bandwidth(points, seed=seed, max_memory=max_memory):.4g} for these points"
    except ResourceError:
        hint = ""
    raise ParameterError(f"bandwidth {h:g} is too small to compute the {kernel} kernel with (h{'^2' if kernel == 'rbf' else ''} "
                         f"underflows){hint} ({parameter('bandwidth')})")


def check_kernel(kernel: Any) -> None:
    """ParameterError unless ``kernel`` is one of :data:`KERNELS`, naming the one it may mean.

    Examples
    --------
    >>> check_kernel("rbf")
    >>> check_kernel("gaussian")
    Traceback (most recent call last):
    ...
    sfapprox._errors.ParameterError: unknown kernel 'gaussian' (did you mean 'rbf'?); choose one of rbf, ... (kernel=)
    """
    if isinstance(kernel, str) and kernel in KERNELS:
        return
    # (a typo was told only the list: "rbff", "laplace" and "gaussian" alike)
    meant = None
    if isinstance(kernel, str):
        key = kernel.strip().lower().replace("-", "_").replace(" ", "_")
        close = difflib.get_close_matches(key, list(KERNELS), n=1)
        meant = KERNEL_SYNONYMS.get(key) or (close[0] if close else None)
    hint = "" if meant is None else f" (did you mean {' or '.join(map(repr, meant.split(' or ')))}?)"
    raise ParameterError(f"unknown kernel {kernel!r}{hint}; choose one of {', '.join(KERNELS)} ({parameter('kernel')})")


def check_bandwidth(kernel: str, bandwidth) -> None:
    """ParameterError unless ``bandwidth`` is None, or a positive finite number for a kernel that takes one
    (what a KernelMatrix, the command line's options and a manifest's load options all check).

    Examples
    --------
    >>> check_bandwidth("rbf", 0.5), check_bandwidth("linear", None)
    (None, None)
    """
    if bandwidth is None:
        return
    if not KERNELS[kernel]:
        raise ParameterError(f"the {kernel} kernel takes no bandwidth; leave {parameter('bandwidth')} out")
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(bandwidth)) or float(bandwidth) <= 0:
        raise ParameterError(f"bandwidth must be a positive, finite number, got {bandwidth!r} ({parameter('bandwidth')})")


class KernelMatrix(MatrixSource):
    """The kernel matrix of a point set, as a :class:`~sfapprox.sources.MatrixSource` (never formed unless it fits).

    Parameters
    ----------
    points : array of shape (N, d)
        One point per row (a data table: samples x features).
    kernel : {"rbf", "laplacian", "matern32", "matern52", "cosine", "linear"}, default="rbf"
        The kernel (:data:`KERNELS`; formulas in the module docstring).
    bandwidth : float or None, default=None
        ``h``; None: the median heuristic (:func:`median_bandwidth`).  Refused
        for ``cosine`` and ``linear``, which have none.
    name : str, default="kernel"
        What the matrix is called in tables and messages.
    seed : int or None, default=0
        Seed of the median heuristic's sample (drawn above :data:`MEDIAN_SAMPLE`
        points), an int >= 0; None is the default seed 0, so that the same
        points always get the same bandwidth.
    max_memory : int, str or None, default=None
        Memory limit in bytes (or a size such as ``"4G"``, stored in bytes) for the points' copies made here
        (their float64 copy, a sparse table's dense one), and the source's :attr:`max_memory` afterwards
        (None: the default limit).

    Attributes
    ----------
    points : numpy.ndarray, shape (N, d)
        The points, as a C-contiguous float64 array.
    kernel : str
        The kernel's name.
    bandwidth_ : float or None
        The bandwidth in use (the heuristic's value when none was given).
    bandwidth_rule_ : str
        ``"given"``, ``"median heuristic"`` or ``"none"``.

    Examples
    --------
    >>> K = KernelMatrix(np.array([[0.0], [1.0], [3.0]]), bandwidth=1.0)
    >>> np.round(K.columns([0]).ravel(), 4).tolist()
    [1.0, 0.6065, 0.0111]
    >>> KernelMatrix(np.eye(3), kernel="linear").to_dense().tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """

    kind = "kernel"
    symmetric = True
    psd = True
    column_copies = 5  # inner products, squared distances, the profile's temporaries, the block

    def __init__(self, points: ArrayLike, kernel: str = "rbf", bandwidth: float | None = None, *, name: str = "kernel",
                 seed: int | None = DEFAULT_SEED, max_memory: int | str | None = None) -> None:
        # None is the documented default: an unseeded sample gave another bandwidth at each call above
        # MEDIAN_SAMPLE points (and another matrix for the same points).
        seed = DEFAULT_SEED if seed is None else seed
        # the limit in bytes, named apart from the parameter (which takes "4G" too): its readers take an int
        limit: int | None = check_values({"seed": seed, "max_memory": max_memory}, {"seed": SEED, "max_memory": MEMORY_LIMIT},
                                         "KernelMatrix")["max_memory"]
        check_kernel(kernel)  # (["rbf"] was a raw "unhashable" TypeError)
        pts = array_of(points, name, "the points", limit)
        if pts.ndim != 2 or pts.shape[0] < 1 or pts.shape[1] < 1:
            raise InputError(f"{name}: the points must be a table of shape (N, d), got {shape_phrase(pts.shape)}")
        if not np.issubdtype(pts.dtype, np.number) or np.iscomplexobj(pts):
            raise InputError(f"{name}: the points must be real numbers, got {pts.dtype}")
        pts = float64_table(pts, name, "the points", limit)  # (float32 points were copied unchecked)
        bad = first_nonfinite(pts)  # (a mask of every point's coordinates was made whatever the memory limit said)
        if bad is not None:
            i, j = bad
            # named as an array's entry is (the covariance reader's words): "point 5 ... column 3" counted from 0
            # was read beside a text table's "line 7, column 4" counted from 1
            raise InputError(f"{name}: the points hold a non-finite coordinate ({pts[i, j]}; the first at [{i}, {j}]: "
                             "0-based, as numpy indexes); remove or impute it first")
        check_bandwidth(kernel, bandwidth)
        self.points, self.kernel = pts, kernel
        self._sq = np.einsum("ij,ij->i", pts, pts)
        if not math.isfinite(4.0 * float(self._sq.max())):  # ||x - y||^2 <= 4 max ||x||^2 must be a number
            raise InputError(f"{name}: the points' coordinates are too large (up to {np.abs(pts).max():.3g}): "
                             "their squared distances overflow; rescale the table first")
        if not KERNELS[kernel]:
            self.bandwidth_, self.bandwidth_rule_ = None, "none"
        elif bandwidth is None:
            self.bandwidth_ = median_bandwidth(pts, seed=seed, max_memory=limit)
            self.bandwidth_rule_ = "median heuristic"
        else:
            self.bandwidth_, self.bandwidth_rule_ = float(bandwidth), "given"
            _check_computable(kernel, self.bandwidth_, pts, seed, limit)
        super().__init__(pts.shape[0], name)
        self.max_memory = limit
        self.nonnegative = True if KERNELS[kernel] else bool((pts >= 0).all())
        how = "" if self.bandwidth_ is None else f"; bandwidth {self.bandwidth_:.4g} ({self.bandwidth_rule_})"
        self.notes.append(f"{kernel} kernel matrix of {pts.shape[0]:,} point{'s' if pts.shape[0] != 1 else ''} x {pts.shape[1]} "
                          f"feature{'s' if pts.shape[1] != 1 else ''}{how}")

    def _columns(self, J: np.ndarray) -> np.ndarray:
        inner = self.points @ self.points[J].T
        return inner if self.kernel == "linear" else self._entries(inner, J, 0, J.size, self.n)

    def _kept_rows(self, J: np.ndarray, step: int) -> np.ndarray:
        """The kept entries of a symmetric formation (:meth:`MatrixSource._kept_rows`): the block's inner
        products as :meth:`_columns` makes them (the same BLAS product: a product of fewer rows may differ in
        its last bits), then the kernel of each cell's kept rows only, entry by entry as there."""
        stop = kept_stop(int(J[-1]), step, self.n)
        inner = self.points @ self.points[J].T
        if self.kernel == "linear":
            return inner[:stop]
        out = np.empty((stop, J.size))
        j0 = int(J[0])
        for c0, c1 in form_cells(j0, j0 + J.size, step):
            rows = kept_stop(c0, step, self.n)
            out[:rows, c0 - j0:c1 - j0] = self._entries(inner, J, c0 - j0, c1 - j0, rows)
        return out

    def _entries(self, inner: np.ndarray, J: np.ndarray, a: int, b: int, rows: int) -> np.ndarray:
        """``K[:rows, J[a:b]]`` from the block's inner products ``inner = X X[J]^T``."""
        inner, J, sq = inner[:rows, a:b], J[a:b], self._sq
        if self.kernel == "cosine":
            norms = np.sqrt(sq)
            scale = np.outer(norms[:rows], norms[J])
            return np.divide(inner, scale, out=np.zeros(scale.shape), where=scale > 0)
        # (sq_i + sq_j) - 2 <x_i, x_j>, clipped at 0, as one whole expression gave it, in place: the whole
        # expression's temporaries took the formation past its limit (its blocks are sized for 5 arrays)
        d2 = np.add(sq[:rows, None], sq[J][None, :])
        twice = np.multiply(inner, 2.0)
        np.subtract(d2, twice, out=d2)
        del twice
        np.maximum(d2, 0.0, out=d2)
        on = J < rows  # the columns whose diagonal entry is among these rows
        d2[J[on], np.flatnonzero(on)] = 0.0  # exact zeros on the diagonal (round-off would leave ~1e-16)
        return self._profile(d2)

    def _profile(self, d2: np.ndarray) -> np.ndarray:
        h = self.bandwidth_
        if self.kernel == "rbf":  # in place: d2 is this call's own
            return np.exp(np.multiply(d2, -0.5 / (h * h), out=d2), out=d2)
        with np.errstate(over="ignore"):  # a tiny bandwidth: r (and s) inf, and the entry 0 (below)
            r = np.sqrt(d2) / h
            if self.kernel == "laplacian":
                return np.exp(-r)
            # Beyond s = MATERN_FAR, exp(-s) is 0 in float64 and so is the entry; without the cap a tiny
            # bandwidth made s (or s*s) inf and the entry inf * 0 = NaN (an SVD that "did not converge").
            if self.kernel == "matern32":
                s = np.minimum(math.sqrt(3.0) * r, MATERN_FAR)
                return (1.0 + s) * np.exp(-s)
            s = np.minimum(math.sqrt(5.0) * r, MATERN_FAR)  # matern52
        return (1.0 + s + s * s / 3.0) * np.exp(-s)

    def diagonal(self) -> np.ndarray:
        if self.kernel == "linear":
            return self._sq.copy()
        if self.kernel == "cosine":
            return (self._sq > 0).astype(np.float64)
        return np.ones(self.n)

    @property
    def bounded_columns(self) -> bool:
        """Entries in [-1, 1] (and the points checked when it was made), except the linear kernel's
        inner products, whose squares may overflow."""
        return self.kernel != "linear"

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "kernel": self.kernel, "bandwidth": self.bandwidth_,
                "bandwidth_rule": self.bandwidth_rule_, "points": list(self.points.shape)}
