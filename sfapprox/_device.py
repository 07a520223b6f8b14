"""Choosing the torch device and dtype at run time (CI and most laptops have no GPU)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ._errors import DeviceError, ParameterError, parameter

if TYPE_CHECKING:  # torch is imported where a device is resolved (the hints below name it)
    import torch

__all__ = ["resolve_device", "resolve_dtype"]

_DTYPES = ("float64", "float32")


def resolve_device(device: str | None = "auto"):
    """Map ``"auto" | "cpu" | "cuda" | "cuda:N"`` to a :class:`torch.device`.

    ``"auto"`` picks CUDA when a GPU is available, else the CPU.  Asking for
    CUDA without one raises :class:`DeviceError` rather than failing later
    inside torch.
    """
    import torch

    if device is not None and not str(device).strip():  # (FitSettings refused it; the estimators took it as auto)
        raise ParameterError("device is empty; choose auto, cpu, cuda or cuda:N")
    name = (device or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if re.fullmatch(r"cuda(:\d+)?", name):  # a malformed "cuda:abc" is an unknown device, not a missing GPU
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {device!r} was requested but no CUDA GPU is available "
                f"(torch.cuda.is_available() is False); use {parameter('device', 'cpu')} or "
                f"{parameter('device', 'auto')}"
            )
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {device!r} does not exist: {torch.cuda.device_count()} GPU(s) visible"
            )
        return dev
    raise ParameterError(f"unknown device {device!r}; choose auto, cpu, cuda or cuda:N")


def check_device(device: str | None) -> None:
    """Refuse, before any work, a device this machine does not have (``"cuda"`` without a GPU): a
    comparison ran its other methods first, or recorded ``"cuda"`` for CPU-only ones, and a batch
    wrote a failed line per SF fit.  ``"auto"`` and ``"cpu"`` are not checked (torch stays unloaded).

    Raises
    ------
    DeviceError
        As :func:`resolve_device`.
    """
    if (device or "auto").strip().lower() not in ("auto", "cpu"):
        resolve_device(device)


def resolve_dtype(dtype: str | None, device, float32_from: int | None = None, n: int | None = None) -> torch.dtype:
    """Map ``"float64" | "float32" | None`` to a torch dtype.

    ``None`` (or ``"auto"``) means float32 on a GPU (where float64 throughput
    is a fraction of float32's), and on the CPU float64 (exact enough for
    every test) — or float32 when the caller says from which order
    ``float32_from`` its fits of an ``n x n`` matrix gain from it.
    """
    import torch

    if dtype is None or dtype == "auto":
        large = float32_from is not None and n is not None and n >= float32_from
        return torch.float64 if device.type == "cpu" and not large else torch.float32
    if dtype not in _DTYPES:
        raise ParameterError(f"unknown dtype {dtype!r}; choose one of {', '.join(_DTYPES)}")
    return getattr(torch, dtype)
