"""One error definition for every method: Frobenius, absolute and relative."""

from __future__ import annotations

import numpy as np

__all__ = ["frobenius_error"]


def frobenius_error(X, approx: np.ndarray, fro_norm: float | None = None) -> tuple[float, float | None]:
    """Absolute ``||X - approx||_F`` and relative ``||X - approx||_F / ||X||_F``.

    Parameters
    ----------
    X : ndarray or scipy sparse array
        The target matrix.
    approx : ndarray
        The approximation, same shape.
    fro_norm : float, optional
        ``||X||_F`` when already known.

    Returns
    -------
    (float, float or None)
        The relative error is None for the zero matrix (0/0 has no meaning).

    Examples
    --------
    >>> import numpy as np
    >>> frobenius_error(np.eye(2), np.zeros((2, 2)))
    (1.4142135623730951, 1.0)
    """
    dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    if dense.shape != np.shape(approx):
        raise ValueError(f"shapes differ: {dense.shape} vs {np.shape(approx)}")
    err = float(np.linalg.norm(dense - approx))
    norm = float(np.linalg.norm(dense)) if fro_norm is None else float(fro_norm)
    return err, (err / norm if norm > 0 else None)
