"""Options shared by several commands, declared once (Annotated Typer options)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

MatrixPath = Annotated[Path, typer.Argument(help="Matrix file (.mtx, .net/.paj, .mat, .npy, .csv, image, ...).", show_default=False)]
Format = Annotated[Optional[str], typer.Option("--format", help="Input format, overriding the file extension (see 'sfapprox formats').")]
Var = Annotated[Optional[str], typer.Option("--var", help="Variable to read from a .mat/.npz file (e.g. Problem.A).")]
Network = Annotated[Optional[int], typer.Option("--network", min=1, help="Which network of a multi-network Pajek .paj file (1-based).")]
TwoMode = Annotated[Optional[str], typer.Option("--two-mode", help="2-mode Pajek network: rows (B·Bᵀ), cols (BᵀB) or bipartite.")]
Gradient = Annotated[bool, typer.Option("--gradient", help="Image: use its gradient magnitude instead of the intensities.")]
Resize = Annotated[Optional[int], typer.Option("--resize", min=1, help="Image: resize to N x N.")]
Square = Annotated[Optional[str], typer.Option("--square", help="Non-square image: crop (center) or resize.")]
Covariance = Annotated[bool, typer.Option("--covariance", help="Input is a data table (rows = samples): use the features x features covariance.")]
Mirror = Annotated[str, typer.Option("--mirror", help="Header-less triplets: auto (mirror a one-triangle file), none or mirror.")]
MaxMemory = Annotated[Optional[str], typer.Option("--max-memory", help="Memory limit, e.g. 8G or 500M (default: 80% of RAM).")]

Device = Annotated[str, typer.Option("--device", help="auto (CUDA when available), cpu or cuda.")]
Dtype = Annotated[Optional[str], typer.Option("--dtype", help="float64 or float32 (default: float64 on CPU, float32 on GPU).")]
Seed = Annotated[int, typer.Option("--seed", min=0, help="Random seed (SF's initial noise, randomized solvers).")]
Iters = Annotated[int, typer.Option("--iters", min=0, help="SF: maximum L-BFGS iterations.")]
TimeLimit = Annotated[float, typer.Option("--time-limit", min=0, help="SF: optimizer wall-clock limit in seconds (sf+lr and sf+s: per point of their budget-split grid); 0 for none (the fit then depends on --iters alone: reproducible on any machine).")]
ITERS = 20000  # ChordSF's defaults, repeated here so --help can show them
TIME_LIMIT = 60.0


def time_limit_or_none(seconds: float | None) -> float | None:
    """``--time-limit 0`` means no limit."""
    return None if not seconds else seconds
Ftol = Annotated[float, typer.Option("--ftol", min=0, help="SF: stop when the loss falls by a relative amount below this over 20 iterations.")]
Gtol = Annotated[float, typer.Option("--gtol", min=0, help="SF: stop when max |gradient| falls below this (scale-free units).")]
Factors = Annotated[Optional[int], typer.Option("--factors", min=1, help="SF: number of factors M (default ceil(log2 N)).")]
Methods = Annotated[str, typer.Option("--methods", help="Comma-separated methods: sf, sf-symmetric, sf-butterfly (SF on the other supports, see fit --support), tsvd, rpca (GoDec sparse + low rank), rpca-pcp (Principal Component Pursuit), nmf (non-negative input only), sf+lr (SF + low rank), sf+s (SF + sparse).")]
Init = Annotated[str, typer.Option("--init", help="SF start: auto (try both, keep the better), reference (values 1/K) or identity (near-identity factors).")]
Support = Annotated[str, typer.Option("--support", help="SF support: chord (offsets 0, b^k; N·K·M numbers), symmetric (also -b^k) or butterfly (FAµST's: columns i and i XOR 2^m; N a power of two, M = log2 N, 2·N·M numbers).")]
Base = Annotated[int, typer.Option("--base", min=2, help="SF Chord base b: offsets {0} ∪ {b^k < N}.")]
Budget = Annotated[str, typer.Option("--budget", help="Stored numbers per method: 'sf' (SF's own count), an integer, or a fraction of N² (0.05).")]
JsonOut = Annotated[Optional[Path], typer.Option("--json", help="Also write the results as JSON to this file.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite existing output files.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]


def parse_size(text: str | None) -> int | None:
    """``"8G"``, ``"500M"``, ``"1.5g"``, ``"123456"`` → bytes."""
    from .._errors import ParameterError

    if text is None:
        return None
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    raw = text.strip().lower().removesuffix("b").removesuffix("i")
    scale = units.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        value = float(number)
    except ValueError:
        raise ParameterError(f"--max-memory: cannot read {text!r}; use e.g. 8G, 500M or a byte count") from None
    if value <= 0:
        raise ParameterError(f"--max-memory must be positive, got {text!r}")
    return int(value * scale)
