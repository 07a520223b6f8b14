"""Small torch helpers shared by the iterative baselines (RPCA, NMF)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

from .._threads import AdaptiveThreads

__all__ = ["few_threads", "as_tensor", "SMALL_N"]

#: Up to this order the CPU work runs on one thread: the iterations are many
#: small kernels, and a second BLAS/OpenMP thread that the OS has descheduled
#: (any other busy process) can make each of them 100x slower than serial.
#: Measured on 2 idle cores, a second thread does not speed NMF or RPCA up
#: below it (NMF rank 20 at N = 200 / 300 / 512: 0.86x / 0.94x / 1.15x;
#: GoDec RPCA: 0.46x / 0.53x / 0.90x).
SMALL_N = 512


@contextlib.contextmanager
def few_threads(n: int, device) -> Iterator[None]:
    """Run torch's (and the BLAS pools') CPU kernels on the threads the work of an ``n x n`` fit pays for.

    The rule is SF's (:func:`sfapprox._threads.choose_threads` through
    :class:`~sfapprox._threads.AdaptiveThreads`, with ``N x N`` operations
    and these iterations' own threshold): one thread up to :data:`SMALL_N`,
    above it one per free core (cores another process keeps busy are left
    alone), never more than torch's current setting; the settings (torch's
    and the BLAS pools') are restored after.  Nothing changes on a GPU.
    """
    with AdaptiveThreads(n * n, device_type=device.type, min_work=SMALL_N * SMALL_N):
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
