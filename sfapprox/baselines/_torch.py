"""Small torch helpers shared by the iterative baselines (RPCA, NMF)."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

from .._threads import PARALLEL_MIN_WORK, AdaptiveThreads

__all__ = ["few_threads", "as_tensor", "SMALL_N"]

#: Up to this order the CPU work runs on one thread: the iterations are many
#: tiny kernels, and a second BLAS/OpenMP thread that the OS has descheduled
#: (any other busy process) can make each of them 100x slower than serial.
#: It is the order whose ``N x N`` operations reach :data:`sfapprox._threads.PARALLEL_MIN_WORK`.
SMALL_N = math.isqrt(PARALLEL_MIN_WORK)


@contextlib.contextmanager
def few_threads(n: int, device) -> Iterator[None]:
    """Run torch's (and the BLAS pools') CPU kernels on the threads the work of an ``n x n`` fit pays for.

    The rule is SF's (:class:`sfapprox._threads.AdaptiveThreads` with
    ``N x N`` operations): one thread up to :data:`SMALL_N`, above it one
    per free core (cores another process keeps busy are left alone), never
    more than torch's current setting; the settings are restored after.
    Nothing changes on a GPU.
    """
    with AdaptiveThreads(n * n, device_type=device.type):
        yield


def as_tensor(X, device, dtype):
    """A dense ndarray as a dense tensor, a scipy sparse matrix as a sparse-CSR tensor."""
    import torch

    if sp.issparse(X):
        A = sp.csr_array(X)
        with warnings.catch_warnings():
            # torch flags sparse CSR as "beta"; matmul with a dense block is all we use.
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return torch.sparse_csr_tensor(
                torch.as_tensor(A.indptr.astype(np.int64), device=device),
                torch.as_tensor(A.indices.astype(np.int64), device=device),
                torch.as_tensor(A.data, dtype=dtype, device=device),
                size=A.shape,
                check_invariants=False,  # scipy's canonical CSR is valid by construction
            )
    return torch.as_tensor(np.asarray(X), dtype=dtype, device=device)
