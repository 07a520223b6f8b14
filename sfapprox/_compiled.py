"""Optional compiled (numba, triton) modules: imported on first use, given up for the process when they fail.

The compiled kernels (:mod:`sfapprox.operators._chord_apply_numba`, :mod:`sfapprox.sf._kernels_numba`,
the GPU's :mod:`sfapprox.sf._kernels_triton`) are an
optimisation, never a requirement: numba or triton may be missing, built against
another numpy or CUDA, or unable to compile (a broken llvmlite, an unwritable cache
folder).  Each user holds one :class:`CompiledModule`; a failure on import or
on the first call (when numba compiles) warns once and switches that user to
its pure numpy/torch/scipy path for the rest of the process.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType


def raise_interrupt(exc: BaseException) -> None:
    """Raise the ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM's handler) that ``exc`` stems from, if any.

    A signal that arrives while compiled code runs is delivered as the call
    returns, and numba's dispatcher then reports ``SystemError: ... returned
    a result with an exception set`` with the interrupt as its cause: taken
    for a broken compile, the stop was lost (the fit ran on to its time limit)
    and the process fell back to the slower code for good.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            raise cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__


def cached_signatures(function) -> list | None:
    """The signatures numba's on-disk cache index lists for a compiled ``function`` (its entries' keys,
    argument types first), or None where its cache cannot be told: the one place that reads numba's
    cache internals."""
    try:
        return [key[0] for key in function._cache._cache_file._load_index()]
    except Exception:  # noqa: BLE001 - numba's cache internals changed: say nothing of it
        return None


class CompiledModule:
    """One optional compiled module and the path its user falls back to.

    Parameters
    ----------
    name : str
        The module's import name.
    what : str
        What it computes, for the warning ("apply kernels").
    fallback : str
        What runs instead, for the warning ("scipy sparse factors (correct, 1.2-5x slower)").
    remedy : str, default="Reinstall numba to restore them."
        What the user can do, for the warning.

    Examples
    --------
    >>> missing = CompiledModule("sfapprox.no_such_module", "demo kernels", "numpy")
    >>> missing.get()
    False
    """

    def __init__(self, name: str, what: str, fallback: str, remedy: str = "Reinstall numba to restore them."):
        self.name = name
        self.what = what
        self.fallback = fallback
        self.remedy = remedy
        # None: not tried yet; False: unavailable; else the module (tests set False to force the fallback).
        self.module: ModuleType | bool | None = None

    def get(self) -> ModuleType | bool:
        """The module, or False when it is missing or broken (imported once per process)."""
        if self.module is None:
            try:
                self.module = importlib.import_module(self.name)
            except ImportError:  # numba (triton) not installed, or installed against another numpy
                self.module = False
            except Exception as exc:  # e.g. an llvmlite that does not load
                self.failed(exc)
        return self.module

    def failed(self, exc: Exception) -> None:
        """Give the module up for this process, with one warning saying what runs instead; an interrupt
        that surfaced as the failure (see :func:`raise_interrupt`) is raised instead, the module kept."""
        raise_interrupt(exc)
        self.module = False
        warnings.warn(
            f"sfapprox: the compiled {self.what} failed ({type(exc).__name__}: {exc}); "
            f"falling back to {self.fallback}. {self.remedy}",
            RuntimeWarning,
            stacklevel=4,
        )
