"""Peak memory of the read paths text_memory left out, against what the read is checked for.

Run by hand (not part of the tests):

    python benchmarks/read_memory.py [--sizes 1 10 50] [--cases gz_csv cov_npy ...] [--data-dir DIR]

Per case and size (MB of data: the text decompressed, the ``.npy``'s array), a file is written (seed 0)
and read in two fresh processes, as ``benchmarks/text_memory.py`` does: one under tracemalloc (its
peak), one without it (the growth of the peak RSS, ``VmHWM`` reset before the read, over the RSS then; getrusage's
``ru_maxrss`` growth beside it), which also records
every ``check_memory`` the read makes (every sfapprox module's, ``n_bytes + held``).  "checked" is the
largest of them: each refuses alone, so it is what a ``--max-memory`` holds the read to.

The cases:

* ``gz_csv``, ``bz2_csv``, ``xz_csv``: a square CSV matrix (``%.6g`` normals) compressed, read by
  ``Source`` + ``read_csv`` (the decompressed copy beside the codec's);
* ``gz_cov_npy``: a tall float64 ``.npy`` table (200 columns) gzipped, read for its covariance
  (``read_covariance``);
* ``cov_npy``, ``cov_npy_f32``, ``cov_npy_u8``: a tall ``.npy`` table (200 columns) of float64,
  float32 and uint8 (pixels), read for its covariance;
* ``load_cov_csv``, ``open_cov_csv``: a CSV table of ``m = 2 N`` samples, read by
  ``load_matrix(covariance=True)`` and ``open_matrix(covariance=True)`` (which forms it where it fits);
* ``open_cov_csv_cols``: the same by ``open_matrix`` with the covariance kept by its columns
  (``formable`` answered False: what a limit under the formed covariance's scoring gives);
* ``open_cov_npy_u8``: the uint8 table by ``open_matrix(covariance=True)`` (formed);
* ``cov_libsvm_slow``: LIBSVM lines with a ``qid:`` token (label, qid, 100 of 500 features), which
  the whole-text reader leaves to the line-by-line one, read for the covariance;
* ``npz``, ``npz_z``: a square float64 array in an ``.npz`` (``np.savez``: stored; ``np.savez_compressed``:
  deflated), read by ``read_npz`` (the member read from the zip);
* ``bz2_npy``, ``xz_npy``: the square float64 array as a ``.npy`` compressed, read by ``read_npy`` (the codec's
  C buffers beside the decompressed bytes and the array);
* ``pajek_edges``: a 1-mode Pajek file, ``*Vertices N`` (ids alone) then ``*Edges`` lines ``i j`` (10 a
  vertex), read by ``read_pajek`` in bulk;
* ``pajek_2mode``: a 2-mode one (``*Vertices N N/2``, every edge joins the two halves), read with
  ``two_mode="bipartite"`` (``_bipartite_block``, then the bipartite adjacency);
* ``pajek_2mode_rows``: the 2-mode file read with ``two_mode="rows"`` (its projection B·Bᵀ);
* ``pajek_matrix``: a ``*Matrix`` section of 0/1 values (one in ten a 1), read in bulk;
* ``pajek_matrix_slow``: the same with a comment as the section's first line (read line by line);
* ``bz2_head``: the ``.csv.bz2``'s first 4 KiB (``Source.head``, a format's sniffing: bzip2's decoder);
* ``xz9e_head``, ``xz9e_csv``: the CSV as ``.xz`` of preset ``9 | PRESET_EXTREME`` (a 64 MiB dictionary),
  its first 4 KiB and its full read by ``read_csv``;
* ``xzbig_head``, ``xzbig_csv``: the same with a 1 GiB dictionary declared (written with 1 MiB, its block
  header's dictionary size then made 1 GiB: the encoder of a real one needs ~10 GiB; the decoder allocates
  what the header says).

``--sfapprox CHECKOUT`` measures that checkout's sfapprox too, each file read by it and by this one in
turn (rows labelled ``before`` / ``after``).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import lzma
import os
from pathlib import Path

from _common import (ROOT, add_file_options, checkout_env, file_rows, file_rows_heading, findings_lines, proc_status,
                     reset_peak, run_child, write_results)

CASES = ("gz_csv", "bz2_csv", "xz_csv", "gz_cov_npy", "cov_npy", "cov_npy_f32", "cov_npy_u8", "load_cov_csv",
         "open_cov_csv", "open_cov_csv_cols", "open_cov_npy_u8", "cov_libsvm_slow", "npz", "npz_z", "bz2_npy",
         "xz_npy", "pajek_edges", "pajek_2mode", "pajek_2mode_rows", "pajek_matrix", "pajek_matrix_slow", "bz2_head",
         "xz9e_head", "xz9e_csv", "xzbig_head", "xzbig_csv")

#: The columns of the tall ``.npy`` tables.
NPY_COLUMNS = 200


# -- the files -------------------------------------------------------------------------------------------


def _csv(path: Path, rows: int, cols: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        for _ in range(rows):
            fh.write(",".join(f"{x:.6g}" for x in rng.standard_normal(cols)) + "\n")


def _compress(plain: Path, suffix: str) -> Path:
    out = plain.with_name(plain.name + suffix)
    opener = {".gz": lambda p: gzip.open(p, "wb", compresslevel=6), ".bz2": lambda p: bz2.open(p, "wb"),
              ".xz": lambda p: lzma.open(p, "wb", preset=1)}[suffix]
    with open(plain, "rb") as src, opener(out) as dst:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            dst.write(chunk)
    return out


def _xz(plain: Path, out: Path, big: bool) -> Path:
    """``plain`` as ``.xz``: preset 9 | extreme (64 MiB dictionary), or ``big``: a 1 GiB dictionary declared
    in its block header (written with 1 MiB, the header's LZMA2 property byte and CRC32 rewritten)."""
    import struct
    import zlib

    data = plain.read_bytes()
    if not big:
        out.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
        return out
    xz = bytearray(lzma.compress(data, filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 20}]))
    size = (xz[12] + 1) * 4  # the block header, from byte 12: its flags, then LZMA2's id 0x21, 1, the property
    prop = xz.index(b"\x21\x01", 14, 12 + size) + 2
    xz[prop] = 36  # (2 | 0) << (36 // 2 + 11): 1 GiB
    xz[12 + size - 4:12 + size] = struct.pack("<I", zlib.crc32(bytes(xz[12:12 + size - 4])))
    out.write_bytes(bytes(xz))
    return out


def _npy(path: Path, size: int, dtype: str) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    itemsize = np.dtype(dtype).itemsize
    rows = max(size // (itemsize * NPY_COLUMNS), 2)
    if dtype == "uint8":
        table = rng.integers(0, 256, (rows, NPY_COLUMNS), dtype=np.uint8)
    else:
        table = rng.standard_normal((rows, NPY_COLUMNS)).astype(dtype)
    np.save(path, table)


def _libsvm_qid(path: Path, size: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        while fh.tell() < size:
            idx = np.sort(rng.choice(500, 100, replace=False)) + 1
            fh.write(f"{rng.integers(0, 10)} qid:{rng.integers(1, 100)} "
                     + " ".join(f"{i}:{v:.4g}" for i, v in zip(idx, rng.random(100))) + "\n")


def _square(size: int):
    import numpy as np

    n = max(int((size / 8) ** 0.5), 2)
    return np.random.default_rng(0).standard_normal((n, n))


def _pajek_edges(path: Path, size: int, two_mode: bool) -> None:
    """``*Vertices N`` (ids alone, N/2 rows of a 2-mode network), then 10 ``*Edges`` lines ``i j`` a vertex."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = max(size // 130, 4)  # a vertex line (~6 bytes) and ten edge lines (~12 each)
    with open(path, "w") as fh:
        fh.write(f"*Vertices {n}{f' {n // 2}' if two_mode else ''}\n")
        fh.write("\n".join(map(str, range(1, n + 1))) + "\n*Edges\n")
        for _ in range(10):
            if two_mode:
                i, j = rng.integers(1, n // 2 + 1, n), rng.integers(n // 2 + 1, n + 1, n)
            else:
                i, j = rng.integers(1, n + 1, n), rng.integers(1, n + 1, n)
            fh.write("\n".join(f"{a} {b}" for a, b in zip(i.tolist(), j.tolist())) + "\n")


def _pajek_matrix(path: Path, size: int, comment: bool) -> None:
    """``*Vertices n`` then a ``*Matrix`` of n rows of n 0/1 values (one in ten a 1): ``size`` bytes."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = max(int((size / 2) ** 0.5), 2)
    with open(path, "w") as fh:
        fh.write(f"*Vertices {n}\n*Matrix\n" + ("% a comment: the section is read line by line\n" if comment else ""))
        for _ in range(n):
            fh.write(" ".join("1" if x else "0" for x in (rng.random(n) < 0.1).tolist()) + "\n")


def make(case: str, mb: int, folder: Path) -> Path:
    """The file of ``case``, about ``mb`` MB (10^6 bytes) of data, in ``folder`` (written once)."""
    size = mb * 10**6
    if case in ("bz2_head", "xz9e_head", "xz9e_csv", "xzbig_head", "xzbig_csv"):
        plain = make("gz_csv", mb, folder).with_suffix("")
        if case == "bz2_head":
            return make("bz2_csv", mb, folder)
        out = plain.with_name(plain.name + (".9e.xz" if "9e" in case else ".big.xz"))
        return out if out.exists() else _xz(plain, out, "big" in case)
    if case in ("gz_csv", "bz2_csv", "xz_csv"):
        plain = folder / f"square_{mb}mb.csv"
        if not plain.exists():
            n = int((size / 10) ** 0.5)  # "-0.123456," is about 10 bytes
            _csv(plain, n, n)
        out = plain.with_name(plain.name + "." + case.split("_")[0])
        return out if out.exists() else _compress(plain, out.suffix)
    if case in ("load_cov_csv", "open_cov_csv", "open_cov_csv_cols"):
        path = folder / f"wide_{mb}mb.csv"
        if not path.exists():
            n = int((size / 10 / 2) ** 0.5)
            _csv(path, 2 * n, n)
        return path
    if case in ("npz", "npz_z"):
        import numpy as np

        path = folder / f"square_{mb}mb{'_z' if case == 'npz_z' else ''}.npz"
        if not path.exists():
            (np.savez_compressed if case == "npz_z" else np.savez)(path, X=_square(size))
        return path
    if case in ("bz2_npy", "xz_npy"):
        import numpy as np

        plain = folder / f"square_{mb}mb.npy"
        if not plain.exists():
            np.save(plain, _square(size))
        out = plain.with_name(plain.name + "." + case.split("_")[0])
        return out if out.exists() else _compress(plain, out.suffix)
    if case.startswith("pajek_"):
        path = folder / f"{case.removesuffix('_rows')}_{mb}mb.net"
        if not path.exists():
            if "matrix" in case:
                _pajek_matrix(path, size, case.endswith("_slow"))
            else:
                _pajek_edges(path, size, case.startswith("pajek_2mode"))
        return path
    if case == "cov_libsvm_slow":
        path = folder / f"qid_{mb}mb.libsvm"
        if not path.exists():
            _libsvm_qid(path, size)
        return path
    dtype = {"cov_npy_f32": "float32", "cov_npy_u8": "uint8", "open_cov_npy_u8": "uint8"}.get(case, "float64")
    path = folder / f"tall_{dtype}_{mb}mb.npy"
    if not path.exists():
        _npy(path, size, dtype)
    if case == "gz_cov_npy":
        out = path.with_name(path.name + ".gz")
        return out if out.exists() else _compress(path, ".gz")
    return path


# -- the measurement (in a fresh process) ------------------------------------------------------------------


def _read(case: str, path: str):
    big = 1 << 50
    if case in ("load_cov_csv",):
        from sfapprox.io import load_matrix

        return load_matrix(path, covariance=True, max_memory=big)
    if case in ("open_cov_csv", "open_cov_csv_cols", "open_cov_npy_u8"):
        from sfapprox.io import open_matrix

        return open_matrix(path, covariance=True, max_memory=big)
    from sfapprox.io._common import DEFAULTS, Source

    src = Source(path, max_memory=big, keep_sparse=case.startswith("pajek_"))
    if case.endswith("_head"):
        return src.head()
    if case in ("npz", "npz_z"):
        from sfapprox.io._numpy import read_npz

        return read_npz(src, DEFAULTS)
    if case in ("bz2_npy", "xz_npy"):
        from sfapprox.io._numpy import read_npy

        return read_npy(src, DEFAULTS)
    if case.startswith("pajek_"):
        import dataclasses

        from sfapprox.io._pajek import read_pajek

        mode = {"pajek_2mode": "bipartite", "pajek_2mode_rows": "rows"}.get(case)
        return read_pajek(src, dataclasses.replace(DEFAULTS, two_mode=mode) if mode else DEFAULTS)
    if case.endswith("_csv"):
        from sfapprox.io._text import read_csv

        return read_csv(src, DEFAULTS)
    from sfapprox.io._covariance import read_covariance

    return read_covariance(src, DEFAULTS, "libsvm" if "libsvm" in case else "npy")


def _patch_checks(checks: list) -> None:
    """Every sfapprox module's ``check_memory`` records its ``n_bytes + held`` in ``checks`` (and checks)."""
    import sys

    import sfapprox._validation as validation

    real = validation.check_memory

    def check_memory(n_bytes, *, what, held=0, **kwargs):
        checks.append((what, int(n_bytes) + int(held)))
        return real(n_bytes, what=what, held=held, **kwargs)

    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "") or "").startswith("sfapprox") and \
                getattr(module, "check_memory", None) is real:
            module.check_memory = check_memory


def one(case: str, path: str, trace: bool) -> dict:
    """The read of ``path`` in this (fresh) process: its tracemalloc peak, or its RSS peak's growth and the
    checks it made."""
    import resource
    import tracemalloc

    import importlib

    importlib.import_module("sfapprox.io")  # every reader imported before the read (not counted in it)
    sources = importlib.import_module("sfapprox.io._sources")

    if case == "open_cov_csv_cols":
        sources.formable = lambda source, max_memory: False  # kept by its columns, as a low limit keeps it
    checks: list = []
    _patch_checks(checks)
    if trace:
        tracemalloc.start()
        _read(case, path)
        return {"peak": tracemalloc.get_traced_memory()[1]}
    import gc

    gc.collect()
    reset_peak()
    before = proc_status("VmRSS")
    _read(case, path)
    # VmHWM, reset above: getrusage's ru_maxrss keeps the peak of the process before its exec (the forked
    # copy of this script's parent, which wrote the files: up to 100 MB more than a small read's peak)
    return {"peak": proc_status("VmHWM") - before,
            "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before,
            "checks": sorted(checks, key=lambda c: -c[1])}


def measure(case: str, path: Path, checkout: str | None = None, label: str = "") -> dict:
    """The file's size, the largest check and both peaks (``checkout``'s sfapprox, else this one's)."""
    env = checkout_env(checkout)
    row = {"case": case, "file": path.name, "bytes": path.stat().st_size, **({"checkout": label} if label else {})}
    row["traced"] = run_child("read_memory", "one", [case, str(path), True], env=env)["peak"]
    untraced = run_child("read_memory", "one", [case, str(path), False], env=env)
    row.update(rss=untraced["peak"], maxrss=untraced["maxrss"], checks=untraced["checks"])
    row["checked"] = max((n for _, n in untraced["checks"]), default=0)
    row["checked_what"] = next((what for what, n in untraced["checks"] if n == row["checked"]), "")
    print({k: (f"{v / 1e6:.1f}M" if isinstance(v, int) else v) for k, v in row.items() if k != "checks"},
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_file_options(ap, "read_memory", [1, 10, 50], "data")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--sfapprox", help="another checkout (the code before a change): each file read by it, then by "
                                       "this one")
    args = ap.parse_args()
    if args.sfapprox:  # before and after in turn, file by file (a shared machine's drift falls on both)
        def measure_both(case: str, path: Path) -> list[dict]:
            return [measure(case, path, args.sfapprox, "before"), measure(case, path, str(ROOT), "after")]

        out = file_rows(args, args.cases, make, measure_both)
        out["rows"] = [row for pair in out["rows"] for row in pair]
    else:
        out = file_rows(args, args.cases, make, measure)
    mb = 1e6
    lines = file_rows_heading("Peak memory of the reads text_memory left out (compressed, covariance, LIBSVM line by "
                              "line, .npz, Pajek) against their checks", out, "MB = 10^6 bytes; file MB as stored, compressed where it is")
    lines += ["| case | file | file MB | traced peak MB | RSS growth MB | maxrss growth MB | checked MB | "
              "checked / traced | checked / RSS | largest check |", "|" + "---|" * 10]
    for r in out["rows"]:
        case = f"{r['case']} ({r['checkout']})" if "checkout" in r else r["case"]
        lines.append(f"| {case} | {r['file']} | {r['bytes'] / mb:.1f} | {r['traced'] / mb:.1f} | "
                     f"{r['rss'] / mb:.1f} | {r['maxrss'] / mb:.1f} | {r['checked'] / mb:.1f} | "
                     f"{r['checked'] / max(r['traced'], 1):.2f} | {r['checked'] / max(r['rss'], 1):.2f} | "
                     f"{r['checked_what'].split(': ', 1)[-1][:90]} |")
    lines += ["", *findings_lines(out, "(to be written)")]
    write_results(args.name, out, lines)


if __name__ == "__main__":
    main()
