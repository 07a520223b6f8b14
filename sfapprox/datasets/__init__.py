"""Dataset manifests, verified downloads, resumable batch runs and their reports.

* :mod:`~sfapprox.datasets.manifest`: the TOML schema and its validation;
* :mod:`~sfapprox.datasets.fetch`: finding files (``--data-dir``), pooch
  downloads into ``pooch.os_cache("sfapprox")``, SHA-256 checks, safe extraction;
* :mod:`~sfapprox.datasets.synthetic`: generated matrices (no download);
* :mod:`~sfapprox.datasets.batch`: resumable batch runs (executors), with
  :mod:`~sfapprox.datasets.runner` (one matrix) and
  :mod:`~sfapprox.datasets.results_file` (the JSONL results);
* :mod:`~sfapprox.datasets.report`: per-category tables (every output format).
"""

from __future__ import annotations

from .batch import BatchOptions, BatchSummary, run_batch
from .fetch import ChecksumError, UnavailableError, cache_dir, fetch_entry, verify_entry
from .manifest import CATEGORIES, Entry, Manifest, ManifestError, load_manifest
from .report import build_report
from .results_file import read_results
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
    "build_report",
]
