"""Dataset manifests, verified downloads, resumable batch runs and their reports.

* :mod:`~sfapprox.datasets.manifest`: the TOML schema and its validation;
* :mod:`~sfapprox.datasets.fetch`: finding files (``--data-dir``), pooch
  downloads into ``pooch.os_cache("sfapprox")``, SHA-256 checks, safe extraction;
* :mod:`~sfapprox.datasets.synthetic`: generated matrices (no download);
* :mod:`~sfapprox.datasets.batch`: the resumable runner and its JSONL results;
* :mod:`~sfapprox.datasets.report`: per-category tables to Markdown, CSV, LaTeX.
"""

from __future__ import annotations

from .batch import BatchOptions, BatchSummary, read_results, run_batch
from .fetch import ChecksumError, UnavailableError, cache_dir, fetch_entry, verify_entry
from .manifest import CATEGORIES, Entry, Manifest, ManifestError, load_manifest
from .report import ReportFormat, build_report
from .synthetic import GENERATORS, generate

__all__ = [
    "CATEGORIES",
    "Entry",
    "Manifest",
    "ManifestError",
    "load_manifest",
    "UnavailableError",
    "ChecksumError",
    "cache_dir",
    "fetch_entry",
    "verify_entry",
    "GENERATORS",
    "generate",
    "BatchOptions",
    "BatchSummary",
    "run_batch",
    "read_results",
    "ReportFormat",
    "build_report",
]
