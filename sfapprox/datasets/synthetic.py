"""Generated test matrices: no download, fixed by their parameters and seed.

Every generator is a pure function ``gen(n, ..., seed=0) -> Generated``: the
matrix (dense ndarray or scipy CSR) plus an ``info`` dict of facts about how
it was made (planted rank, bandwidth, the attention matrix's mean row
entropy, ...).  The batch runner copies ``info`` into the record's matrix
description, so a report can show e.g. entropy against SF's error.

:data:`GENERATORS` maps the names used in manifests (``generator = "..."``)
to the functions; :func:`generate` checks a manifest's ``params`` against the
function's signature before calling it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._errors import ParameterError
from .._validation import check_memory
from ..chord import chord_offsets, default_n_factors

__all__ = [
    "Generated",
    "GENERATORS",
    "generate",
    "generator_params",
    "check_params",
    "random_sparse",
    "low_rank_plus_sparse",
    "banded",
    "circulant",
    "chord_product",
    "covariance",
    "edge_image",
    "attention",
    "row_entropy",
]


@dataclass
class Generated:
    """A generated matrix and facts about how it was made.

    Attributes
    ----------
    matrix : numpy.ndarray or scipy.sparse.csr_array
        The square matrix.
    info : dict
        Facts about how it was made (the generator's own; :func:`generate`
        adds the generator's name and parameters).
    """

    matrix: np.ndarray | sp.csr_array
    info: dict[str, Any] = field(default_factory=dict)


def _check_n(n: int, minimum: int = 2) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ParameterError(f"n={n!r} must be an integer >= {minimum}")


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 < float(value) <= 1.0:
        raise ParameterError(f"{name}={value!r} must be in (0, 1]")


# ---------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------


def random_sparse(n: int, density: float = 0.05, *, symmetric: bool = False, seed: int = 0) -> Generated:
    """Sparse matrix with Gaussian values at uniformly random positions.

    Parameters
    ----------
    n : int
        Order of the matrix.
    density : float, default=0.05
        Fraction of stored entries, in (0, 1]; at least one entry is stored, whatever ``N``.
    symmetric : bool, default=False
        Return ``(A + A.T) / 2`` (about twice the density off the diagonal).
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        CSR matrix; ``info`` has ``density``.

    Examples
    --------
    >>> g = random_sparse(32, 0.1)
    >>> g.matrix.shape, g.matrix.nnz > 0
    ((32, 32), True)
    >>> random_sparse(2).matrix.nnz  # round(0.05 * 4) = 0 entries: one at least
    1
    """
    _check_n(n)
    _check_fraction("density", density)
    rng = np.random.default_rng(seed)
    # random_state=, not rng=: random_array's rng= keyword came in scipy 1.15 (pyproject allows 1.12)
    # at least one entry: random_array stores round(density * N^2), none at N = 2 and the default 0.05 (an
    # all-zero "sparse" matrix, which no method has anything to approximate in)
    density = max(density, 1.0 / (n * n))
    A = sp.random_array((n, n), density=density, random_state=rng, data_sampler=rng.standard_normal, format="csr")
    if symmetric:
        A = ((A + A.T) * 0.5).tocsr()
    return Generated(A, {"density": A.nnz / float(n * n)})


def low_rank_plus_sparse(
    n: int,
    rank: int = 4,
    density: float = 0.02,
    *,
    sparse_scale: float = 5.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Generated:
    """Planted low rank plus sparse spikes: ``L + S (+ noise)``.

    ``L = U Vᵀ / sqrt(rank)`` with Gaussian ``U, V`` (rank exactly ``rank``);
    ``S`` has ``density * n²`` entries of size ``±sparse_scale``.

    Parameters
    ----------
    n : int
        Order of the matrix, at least 2.
    rank : int, default=4
        Rank of ``L``, between 1 and ``n``.
    density : float, default=0.02
        Fraction of entries in the sparse part, in [0, 1].
    sparse_scale : float, default=5.0
        Magnitude of the spikes.
    noise : float, default=0.0
        Standard deviation of added Gaussian noise.
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Dense matrix; ``info`` has ``rank``, ``n_sparse``, ``low_rank_norm``,
        ``sparse_norm``.

    Examples
    --------
    >>> g = low_rank_plus_sparse(32, rank=3, density=0.0 + 1e-9)
    >>> int(np.linalg.matrix_rank(g.matrix))
    3
    """
    _check_n(n)
    if not 1 <= rank <= n:
        raise ParameterError(f"rank={rank!r} must be between 1 and n={n}")
    if not 0.0 <= density <= 1.0:
        raise ParameterError(f"density={density!r} must be in [0, 1]")
    rng = np.random.default_rng(seed)
    low = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, n)) / math.sqrt(rank)
    n_sparse = int(round(density * n * n))
    spikes = np.zeros((n, n))
    positions = rng.choice(n * n, size=n_sparse, replace=False)
    spikes.flat[positions] = sparse_scale * rng.choice([-1.0, 1.0], size=n_sparse)
    X = low + spikes + (noise * rng.standard_normal((n, n)) if noise else 0.0)
    info = {
        "rank": rank,
        "n_sparse": n_sparse,
        "low_rank_norm": float(np.linalg.norm(low)),
        "sparse_norm": float(np.linalg.norm(spikes)),
    }
    return Generated(np.ascontiguousarray(X), info)


def banded(n: int, bandwidth: int = 3, *, seed: int = 0) -> Generated:
    """Random banded matrix: Gaussian values where ``|i - j| <= bandwidth``.

    Parameters
    ----------
    n : int
        Order of the matrix, at least 2.
    bandwidth : int, default=3
        Half-width of the band, between 0 and ``n - 1``.
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Dense matrix; ``info`` has ``bandwidth``.

    Examples
    --------
    >>> g = banded(16, 2)
    >>> bool(g.matrix[0, 5] == 0 and g.matrix[0, 2] != 0)
    True
    """
    _check_n(n)
    if not 0 <= bandwidth < n:
        raise ParameterError(f"bandwidth={bandwidth!r} must be between 0 and n-1={n - 1}")
    rng = np.random.default_rng(seed)
    i, j = np.indices((n, n))
    X = np.where(np.abs(i - j) <= bandwidth, rng.standard_normal((n, n)), 0.0)
    return Generated(X, {"bandwidth": bandwidth})


def circulant(n: int, decay: float = 1.0, *, seed: int = 0) -> Generated:
    """Circulant matrix ``X[i, j] = c[(j - i) mod n]`` with ``c[k] ~ N(0, 1) / (1 + k)^decay``.

    Parameters
    ----------
    n : int
        Order of the matrix, at least 2.
    decay : float, default=1.0
        How fast the diagonals' scale falls off with ``k``.
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Dense matrix; ``info`` has ``decay``.

    Examples
    --------
    >>> g = circulant(8)
    >>> bool(np.allclose(g.matrix[1], np.roll(g.matrix[0], 1)))
    True
    """
    _check_n(n)
    rng = np.random.default_rng(seed)
    c = rng.standard_normal(n) / (1.0 + np.arange(n)) ** float(decay)
    idx = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n
    return Generated(c[idx], {"decay": float(decay)})


def chord_product(
    n: int, n_factors: int | None = None, *, base: int = 2, noise: float = 0.0, seed: int = 0
) -> Generated:
    """Product of ``M`` random Chord factors: a matrix SF can represent exactly.

    Factor values are Gaussian with standard deviation ``1/sqrt(K)``, so the
    product neither explodes nor vanishes; ``noise`` adds Gaussian noise of
    that standard deviation relative to the product's RMS entry.

    Parameters
    ----------
    n : int
        Order of the matrix, at least 2.
    n_factors : int or None, default=None
        ``M``; None is the reference ``ceil(log2 n)``.
    base : int, default=2
        Chord base of the offsets.
    noise : float, default=0.0
        Noise level relative to the product's RMS entry (0: none).
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Dense matrix; ``info`` has ``n_factors``, ``offsets``, ``noise``.

    Examples
    --------
    >>> chord_product(16).matrix.shape
    (16, 16)
    """
    import torch

    from ..sf._kernels import chord_product as product

    _check_n(n)
    offsets = chord_offsets(n, base)
    m = default_n_factors(n) if n_factors is None else int(n_factors)
    if m < 1:
        raise ParameterError(f"n_factors={n_factors!r} must be at least 1")
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((m, n, len(offsets))) / math.sqrt(len(offsets))
    X = product(torch.as_tensor(values), offsets.tolist()).numpy()
    if noise:
        rms = float(np.sqrt(np.mean(X**2)))
        X = X + noise * rms * rng.standard_normal((n, n))
    info = {"n_factors": m, "offsets": offsets.tolist(), "noise": float(noise)}
    return Generated(np.ascontiguousarray(X), info)


def covariance(n: int, n_samples: int = 500, n_latent: int = 4, *, noise: float = 0.5, seed: int = 0) -> Generated:
    """Sample covariance (features x features) of synthetic data from a factor model.

    Samples are ``z Wᵀ + noise * e`` with ``n_latent`` Gaussian factors ``z``,
    so the covariance is close to rank ``n_latent`` plus a diagonal.

    Parameters
    ----------
    n : int
        Number of features (the order), at least 2.
    n_samples : int, default=500
        Samples drawn, at least 2.
    n_latent : int, default=4
        Latent factors, at least 1.
    noise : float, default=0.5
        Standard deviation of the independent noise per feature.
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Dense symmetric matrix (``ddof=1``); ``info`` has ``n_samples``,
        ``n_latent``, ``noise``.

    Examples
    --------
    >>> g = covariance(20, n_samples=100)
    >>> bool(np.allclose(g.matrix, g.matrix.T))
    True
    """
    _check_n(n)
    if n_samples < 2 or n_latent < 1:
        raise ParameterError(f"n_samples={n_samples!r} must be >= 2 and n_latent={n_latent!r} >= 1")
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, n_latent))
    data = rng.standard_normal((n_samples, n_latent)) @ W.T + noise * rng.standard_normal((n_samples, n))
    C = np.cov(data, rowvar=False, ddof=1)
    return Generated(np.ascontiguousarray(C), {"n_samples": n_samples, "n_latent": n_latent, "noise": float(noise)})


def _edge_shapes(n: int, n_shapes: int, rng: np.random.Generator) -> np.ndarray:
    """Piecewise-constant image in [0, 1]: rectangles and disks of random gray levels."""
    img = np.full((n, n), rng.uniform(0.0, 0.3))
    rows, cols = np.indices((n, n))
    for k in range(n_shapes):
        level = rng.uniform(0.2, 1.0)
        if k % 2 == 0:
            r0, c0 = rng.integers(0, n - 2, size=2)
            h, w = rng.integers(2, max(3, n // 2), size=2)
            img[r0 : r0 + h, c0 : c0 + w] = level
        else:
            cy, cx = rng.uniform(0, n, size=2)
            radius = rng.uniform(n / 10, n / 4)
            img[(rows - cy) ** 2 + (cols - cx) ** 2 <= radius**2] = level
    return img


def edge_image(n: int, n_shapes: int = 8, *, gradient: bool = False, seed: int = 0) -> Generated:
    """Grayscale image with sharp edges (rectangles and disks), or its gradient magnitude.

    Parameters
    ----------
    n : int
        Image side, at least 4.
    n_shapes : int, default=8
        Rectangles and disks drawn (alternately).
    gradient : bool, default=False
        Return ``sqrt(gx² + gy²)`` (``numpy.gradient``, as ``load_matrix(gradient=True)``):
        a sparse-ish matrix concentrated on the edges.
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Dense matrix in [0, 1] (the gradient: non-negative); ``info`` has
        ``n_shapes``, ``gradient``, ``edge_fraction``.

    Examples
    --------
    >>> g = edge_image(32, gradient=True)
    >>> bool(g.matrix.min() >= 0 and g.info["edge_fraction"] < 0.5)
    True
    """
    _check_n(n, 4)
    rng = np.random.default_rng(seed)
    img = _edge_shapes(n, int(n_shapes), rng)
    if gradient:
        gy, gx = np.gradient(img)
        img = np.sqrt(gx**2 + gy**2)
    info = {"n_shapes": int(n_shapes), "gradient": bool(gradient),
            "edge_fraction": float(np.mean(np.abs(np.diff(img, axis=1)) > 1e-12))}
    return Generated(np.ascontiguousarray(img), info)


def row_entropy(P: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) of each row of a row-stochastic matrix.

    Parameters
    ----------
    P : numpy.ndarray, shape (n, m)
        Rows of probabilities (zeros count as 0).

    Returns
    -------
    numpy.ndarray, shape (n,)

    Examples
    --------
    >>> row_entropy(np.full((2, 4), 0.25)).round(4).tolist()
    [1.3863, 1.3863]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(P > 0, -P * np.log(P), 0.0)
    return terms.sum(axis=1)


def attention(
    n: int,
    beta: float = 1.0,
    *,
    dim: int = 16,
    n_clusters: int = 4,
    spread: float = 0.5,
    seed: int = 0,
) -> Generated:
    """Attention matrix ``softmax(beta * Q Kᵀ / sqrt(dim))`` over clustered tokens.

    Scatterbrain's generative process: ``n_clusters`` centres on the sphere,
    each token a centre plus Gaussian noise of size ``spread``; queries and
    keys are the same tokens.  Small ``beta`` gives nearly uniform rows
    (close to rank one), large ``beta`` nearly one-hot rows (sparse, high
    rank); the mean row entropy records where a matrix sits in between.

    Parameters
    ----------
    n : int
        Number of tokens.
    beta : float, default=1.0
        Inverse temperature (> 0).
    dim : int, default=16
        Embedding dimension ``d``.
    n_clusters : int, default=4
        Number of cluster centres.
    spread : float, default=0.5
        Standard deviation of each token's noise around its centre.
    seed : int, default=0
        Seed of the random values.

    Returns
    -------
    Generated
        Row-stochastic dense matrix; ``info`` has ``beta``, ``mean_row_entropy``
        (nats) and ``max_entropy`` (``log n``).

    Examples
    --------
    >>> lo, hi = attention(64, 0.5), attention(64, 8.0)
    >>> lo.info["mean_row_entropy"] > hi.info["mean_row_entropy"]
    True
    """
    _check_n(n)
    if not beta > 0:
        raise ParameterError(f"beta={beta!r} must be positive")
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_clusters, dim))
    centres *= math.sqrt(dim) / np.linalg.norm(centres, axis=1, keepdims=True)
    tokens = centres[rng.integers(0, n_clusters, size=n)] + spread * rng.standard_normal((n, dim))
    logits = float(beta) * (tokens @ tokens.T) / math.sqrt(dim)
    logits -= logits.max(axis=1, keepdims=True)
    P = np.exp(logits)
    P /= P.sum(axis=1, keepdims=True)
    info = {
        "beta": float(beta),
        "dim": dim,
        "n_clusters": n_clusters,
        "mean_row_entropy": float(row_entropy(P).mean()),
        "max_entropy": math.log(n),
    }
    return Generated(np.ascontiguousarray(P), info)


#: Generator names usable in manifests.
GENERATORS: dict[str, Callable[..., Generated]] = {
    "random_sparse": random_sparse,
    "low_rank_plus_sparse": low_rank_plus_sparse,
    "banded": banded,
    "circulant": circulant,
    "chord_product": chord_product,
    "covariance": covariance,
    "edge_image": edge_image,
    "attention": attention,
}


def generator_params(name: str) -> list[str]:
    """Parameter names accepted by generator ``name`` (raises ParameterError if unknown).

    Parameters
    ----------
    name : str
        A key of :data:`GENERATORS`.

    Returns
    -------
    list of str
        In signature order (``n`` first).
    """
    if name not in GENERATORS:
        raise ParameterError(f"unknown generator {name!r}; known: {', '.join(GENERATORS)}")
    return list(inspect.signature(GENERATORS[name]).parameters)


#: The values each generator parameter takes, by name (the generators name their parameters alike):
#: ``(kind, least, most)``, where ``"n"`` and ``"n-1"`` in a bound stand for the matrix order.  Checked
#: for a whole parameter set by :func:`check_params` before anything is generated, so a manifest
#: with ``density = 2.0`` or ``seed = -1`` is refused when it is read (it gave "unavailable" lines).
_RULES: dict[str, tuple[str, Any, Any]] = {
    "seed": ("int", 0, None), "rank": ("int", 1, "n"), "bandwidth": ("int", 0, "n-1"),
    "n_samples": ("int", 2, None), "n_latent": ("int", 1, None), "dim": ("int", 1, None),
    "n_clusters": ("int", 1, None), "n_shapes": ("int", 0, None), "base": ("int", 2, None),
    "n_factors": ("int", 1, None), "density": ("float", 0.0, 1.0), "noise": ("float", 0.0, None),
    # scales bounded where float64 stays finite through the matrix's making and its norm (1e308 overflowed
    # to inf; the softmax of logits of 1e300 was NaN): far beyond any value that changes the matrix's kind
    "sparse_scale": ("float", -1e100, 1e100), "decay": ("float", None, None), "spread": ("float", 0.0, 1e6),
    "beta": ("float", 0.0, 1e6), "symmetric": ("bool", None, None), "gradient": ("bool", None, None),
}

#: ``|decay| * ln(n)`` at most this: circulant's entries ``/ (1 + k)^decay`` stay within 1e±130 (decay = -200
#: at n = 64 overflowed to inf, "1856 NaN/Inf entries").
DECAY_LOG_MAX = 300.0
#: edge_image paints each shape over its whole ``n x n`` grid, one Python step each: ``n_shapes * n^2`` at
#: most EDGE_PAINT_MAX and ``n_shapes`` at most EDGE_SHAPES_MAX (a billion shapes ran for minutes, before
#: any time limit, which does not cover making a matrix).
EDGE_PAINT_MAX, EDGE_SHAPES_MAX = 1 << 32, 100_000


def _check_value(name: str, value: Any, n: int) -> None:
    """Refuse ``value`` for parameter ``name`` unless it is of the rule's kind and within its bounds."""
    kind, least, most = _RULES.get(name, ("any", None, None))
    if value is None and name in ("n_factors", "seed"):  # None: the default structure's; a fresh seed
        return
    if kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise ParameterError(f"{name}={value!r} must be true or false")
        return
    if kind == "any":
        return
    whole = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    real = whole or (isinstance(value, (float, np.floating)) and math.isfinite(value))
    if (kind == "int" and not whole) or not real:
        raise ParameterError(f"{name}={value!r} must be {'an integer' if kind == 'int' else 'a finite number'}")
    bounds = {"n": (n, f"n={n}"), "n-1": (n - 1, f"n-1={n - 1}")}
    lo, lo_text = bounds.get(least, (least, str(least)))
    hi, hi_text = bounds.get(most, (most, str(most)))
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = (f"between {lo_text} and {hi_text}" if lo is not None and hi is not None
                else f">= {lo_text}" if lo is not None else f"<= {hi_text}")
        raise ParameterError(f"{name}={value!r} must be {span}")


def check_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Check a generator's parameters without generating anything; returns them with the defaults filled in.

    Parameters
    ----------
    name : str
        A key of :data:`GENERATORS`.
    params : dict
        Its keyword arguments (``n`` required).

    Returns
    -------
    dict
        Every parameter of the generator, the missing ones at their defaults.

    Raises
    ------
    ParameterError
        For an unknown generator or parameter, a missing ``n``, or a value of
        the wrong type or out of its range.

    Examples
    --------
    >>> check_params("banded", {"n": 8})["bandwidth"]
    3
    """
    known = generator_params(name)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ParameterError(f"generator {name!r}: unknown parameter {', '.join(map(repr, unknown))} "
                             f"(known: {', '.join(known)})")
    if "n" not in params:
        raise ParameterError(f"generator {name!r}: parameter 'n' (the matrix order) is required")
    bound = inspect.signature(GENERATORS[name]).bind(**params)
    bound.apply_defaults()
    values = dict(bound.arguments)
    try:
        _check_n(values["n"], 4 if name == "edge_image" else 2)
        for key, value in values.items():
            if key != "n":
                _check_value(key, value, int(values["n"]))
        if name == "random_sparse" and values["density"] == 0:
            raise ParameterError(f"density={values['density']!r} must be in (0, 1]")
        if name == "attention" and values["beta"] == 0:
            raise ParameterError(f"beta={values['beta']!r} must be positive")
        if name == "circulant" and abs(values["decay"]) * math.log(values["n"]) > DECAY_LOG_MAX:
            raise ParameterError(f"decay={values['decay']!r} makes entries (1 + k)^{-values['decay']:g} beyond "
                                 f"float64's range; |decay| * ln(n) must be at most {DECAY_LOG_MAX:g}")
        most = min(EDGE_SHAPES_MAX, EDGE_PAINT_MAX // values["n"] ** 2) if name == "edge_image" else None
        if most is not None and values["n_shapes"] > most:
            raise ParameterError(f"n_shapes={values['n_shapes']!r} must be <= {most:,} at n={values['n']} (each "
                                 "shape is painted over the whole image)")
    except ParameterError as exc:
        raise ParameterError(f"generator {name!r}: {exc}") from None
    return values


#: Dense ``n x n`` float64 arrays a generator holds at its peak (a bound, from its code: e.g. banded's
#: index grid, its normal draws and the result).
_PEAK_ARRAYS = {"low_rank_plus_sparse": 4, "banded": 4, "circulant": 3, "chord_product": 3, "covariance": 2,
                "edge_image": 4, "attention": 4}


def generator_peak_bytes(name: str, params: dict[str, Any]) -> int:
    """Bytes generator ``name`` holds at its peak with ``params`` (an upper estimate, before it runs).

    Parameters
    ----------
    name : str
        A key of :data:`GENERATORS`.
    params : dict
        Its parameters (``n`` checked).

    Returns
    -------
    int
    """
    n = params.get("n")
    _check_n(n)
    n = int(n)
    if name == "random_sparse":  # about 3 copies of (value, column) pairs while scipy builds the matrix
        density = float(params.get("density", 0.05))
        return int(48 * max(0.0, min(density, 1.0)) * n * n) + 16 * n
    return _PEAK_ARRAYS.get(name, 4) * 8 * n * n + _side_bytes(name, n, params)


def _side_bytes(name: str, n: int, params: dict[str, Any]) -> int:
    """A generator's arrays besides its ``n x n`` ones, from the parameters that size them (a covariance of
    a billion latent factors, attention of a billion dimensions and chord_product of 1e8 factors were
    numpy's MemoryError, past any --max-memory, where they are refused first)."""
    def get(key: str, default: int) -> int:
        value = params.get(key, default)
        return default if value is None else int(value)

    if name == "covariance":  # the samples (and their noise), the latent draws and the loadings
        samples, latent = get("n_samples", 500), get("n_latent", 4)
        return 8 * (2 * samples * n + latent * (samples + n))
    if name == "attention":  # centres, the tokens and their noise
        dim = get("dim", 16)
        return 8 * dim * (get("n_clusters", 4) + 2 * n)
    if name == "chord_product":  # the factors' values
        offsets = len(chord_offsets(n, get("base", 2)))
        return 8 * get("n_factors", default_n_factors(n)) * n * offsets
    return 0


def generate(name: str, params: dict[str, Any], max_memory: int | None = None) -> Generated:
    """Run generator ``name`` with ``params`` (checked against its signature).

    Parameters
    ----------
    name : str
        A key of :data:`GENERATORS`.
    params : dict
        The generator's keyword arguments; ``n`` is required.
    max_memory : int or None, default=None
        Memory limit in bytes (None: :func:`~sfapprox._validation.default_memory_limit`):
        a matrix whose making would need more (:func:`generator_peak_bytes`) is
        refused before anything is allocated.

    Returns
    -------
    Generated
        With ``info`` holding ``generator``, the parameters and the generator's
        own facts.

    Raises
    ------
    ParameterError
        For an unknown generator or parameter, a missing ``n``, or a value the
        generator refuses.

    Examples
    --------
    >>> generate("banded", {"n": 8, "bandwidth": 1}).matrix.shape
    (8, 8)
    """
    check_params(name, params)
    need = generator_peak_bytes(name, params)
    check_memory(need, what=f"generator {name!r} with n={params['n']}", limit=max_memory)
    try:
        result = GENERATORS[name](**params)
    except TypeError as exc:  # wrong value types reach numpy as TypeErrors
        raise ParameterError(f"generator {name!r}: {exc}") from None
    info = {"generator": name, **{k: v for k, v in params.items()}, **result.info}
    return Generated(result.matrix, info)
