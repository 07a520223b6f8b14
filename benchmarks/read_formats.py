"""Reading large files of every common format: this checkout against another one (``--sfapprox``).

Run by hand (not part of the tests):

    python benchmarks/read_formats.py --sfapprox /tmp/read-perf-before [--rounds 2] [--only npy,csv]

Writes, once, into ``--data`` (default ``<temp>/sfapprox-read-formats``), files of about 100-200 MB
each, seeded: a dense ``.npy`` (4,000 x 4,000), the same as an ``.npz`` stored and compressed, a
scipy.sparse ``.npz`` (8M entries), Matrix Market coordinate (5M entries, a few positions repeating), the
same with every value written with an exponent (``%.6e``: ``1.234568e+00``), its ``.mtx.gz`` and array format (2,500 x 2,500), a ``.csv`` and a whitespace ``.txt`` (3,000 x 3,000),
triplets ``.ijv`` (5M), a Pajek ``.net`` with ``*Arcs`` (2M) and a LIBSVM table (400,000 samples of
100 features, read for its covariance); the sparse ones are of order 30,000 (a matrix read
from them must fit dense under the default memory limit).  Each file is read by ``sfapprox.io.load_matrix`` in a fresh
process (``run_child``), the two checkouts alternating, ``--rounds`` times; a ``.npy`` over the
memory limit is also opened by ``sfapprox.open_matrix(max_memory="64M")`` (memory-mapped).  Each
child reports its seconds, its peak RSS (``resource.getrusage(RUSAGE_SELF)``, the import included)
and the SHA-256 of the matrix's bytes (CSR: ``indptr``, ``indices``, ``data``); the two checkouts
must agree to the bit (SystemExit otherwise).  Writes benchmarks/results/read_formats.json and .md:
per format, the median seconds and peak RSS of each checkout and their ratios (after / before).
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import tempfile
from pathlib import Path

from _common import ROOT, checkout_env, findings_lines, machine, meta, run_child, version, write_results

DEFAULT_DATA = Path(tempfile.gettempdir()) / "sfapprox-read-formats"

#: file name -> what the table calls it
FILES = {
    "dense.npy": "dense .npy 4000^2",
    "mmap.npy": "open_matrix .npy memory-mapped (max_memory 64M)",
    "dense.npz": "dense .npz stored",
    "dense_z.npz": "dense .npz compressed",
    "sparse.npz": "sparse .npz 8M entries",
    "coord.mtx": ".mtx coordinate 5M entries",
    "coord.mtx.gz": ".mtx.gz coordinate 5M entries",
    "coord_exp.mtx": ".mtx coordinate 5M entries, values '1.234568e+00'",
    "array.mtx": ".mtx array 2500^2",
    "table.csv": ".csv 3000^2",
    "table.txt": ".txt whitespace 3000^2",
    "triplets.ijv": ".ijv 5M triplets",
    "arcs.net": "Pajek .net 2M arcs",
    "points.libsvm": "LIBSVM 400k x 100 (covariance)",
}


def _coords(rng, n: int, nnz: int):
    import numpy as np

    return rng.integers(1, n + 1, nnz), rng.integers(1, n + 1, nnz), np.round(rng.standard_normal(nnz), 6)


def _write_lines(path: Path, header: str, fmt: str, columns) -> None:
    """``header`` then one line per row of ``columns`` formatted with ``fmt``, in blocks (fast enough)."""
    rows = len(columns[0])
    with open(path, "w", encoding="ascii") as out:
        out.write(header)
        for start in range(0, rows, 200_000):
            block = zip(*(c[start:start + 200_000].tolist() for c in columns))
            out.write("".join(fmt % t for t in block))


def make_files(data: str, names: list[str] | None = None) -> None:
    """The benchmark's files in ``data`` (those of ``names``; default all), each written unless it is there
    already (seeded: the same each time, whichever are written)."""
    import numpy as np
    import scipy.sparse as sp

    data = Path(data)
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    if names is not None and "coord.mtx.gz" in names:
        names = [*names, "coord.mtx"]  # the .gz is written from it

    def need(name: str) -> Path | None:
        path = data / name
        return None if path.exists() or (names is not None and name not in names) else path

    dense = np.round(rng.standard_normal((4000, 4000)), 4)
    if p := need("dense.npy"):
        np.save(p, dense)
    if p := need("mmap.npy"):
        np.save(p, dense)
    if p := need("dense.npz"):
        np.savez(p, A=dense)
    if p := need("dense_z.npz"):
        np.savez_compressed(p, A=dense)
    if p := need("sparse.npz"):
        i, j, v = _coords(rng, 30_000, 8_000_000)
        sp.save_npz(p, sp.csr_array((v, (i - 1, j - 1)), shape=(30_000, 30_000)), compressed=False)
    i, j, v = _coords(rng, 30_000, 5_000_000)
    if p := need("coord.mtx"):
        _write_lines(p, "%%MatrixMarket matrix coordinate real general\n30000 30000 5000000\n", "%d %d %.6g\n",
                     (i, j, v))
    if p := need("coord_exp.mtx"):  # every value with an exponent's '+' or '-': the '+' scan's worst case
        _write_lines(p, "%%MatrixMarket matrix coordinate real general\n30000 30000 5000000\n", "%d %d %.6e\n",
                     (i, j, v))
    if p := need("coord.mtx.gz"):
        with open(data / "coord.mtx", "rb") as src, gzip.open(p, "wb", compresslevel=1) as out:
            out.write(src.read())
    if p := need("triplets.ijv"):
        _write_lines(p, "", "%d %d %.6g\n", (i, j, v))
    if p := need("array.mtx"):
        a = np.round(rng.standard_normal(2500 * 2500), 6)
        _write_lines(p, "%%MatrixMarket matrix array real general\n2500 2500\n", "%.6g\n", (a,))
    table = np.round(rng.standard_normal((3000, 3000)), 5)
    if p := need("table.csv"):
        np.savetxt(p, table, fmt="%.5g", delimiter=",")
    if p := need("table.txt"):
        np.savetxt(p, table, fmt="%.5g", delimiter=" ")
    if p := need("arcs.net"):
        i, j, v = _coords(rng, 30_000, 2_000_000)
        _write_lines(p, "*Vertices 30000\n*Arcs\n", "%d %d %.6g\n", (i, j, v))
    if p := need("points.libsvm"):
        rows, feats, nz = 400_000, 100, 20
        idx = np.sort(rng.random((rows, feats)).argsort(axis=1)[:, :nz], axis=1) + 1
        vals = rng.integers(1, 1000, (rows, nz))
        with open(p, "w", encoding="ascii") as out:
            for start in range(0, rows, 20_000):
                out.write("".join(f"{r % 10} " + " ".join(f"{a}:{b}" for a, b in zip(ir, vr)) + "\n"
                                  for r, ir, vr in zip(range(start, start + 20_000), idx[start:start + 20_000].tolist(),
                                                       vals[start:start + 20_000].tolist())))


def one(path: str) -> dict:
    """Read ``path`` in this (fresh) process: seconds, peak RSS (MiB) and the SHA-256 of the matrix's bytes."""
    import hashlib
    import resource
    import time

    from sfapprox.io import load_matrix

    name = Path(path).name
    began = time.perf_counter()
    if name == "mmap.npy":
        from sfapprox import open_matrix

        m = open_matrix(path, max_memory="64M")
        seconds = time.perf_counter() - began
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        digest = hashlib.sha256(type(m).__name__.encode())
        digest.update(memoryview(m.diagonal()).cast("B"))  # after the timing: reads N values of the map
        return {"seconds": seconds, "peak_rss_mib": peak, "sha256": digest.hexdigest(), "kind": type(m).__name__}
    return timed_read(lambda: load_matrix(path, covariance=name.endswith(".libsvm")), began)


def timed_read(read, began: float) -> dict:
    """``read()``'s matrix, read in this (fresh) process from ``began``: seconds, peak RSS (MiB), the SHA-256 of
    the matrix's bytes (CSR: ``indptr``, ``indices``, ``data``) and its type."""
    import hashlib
    import resource
    import time

    A = read().matrix
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    digest = hashlib.sha256(str(A.shape).encode())
    for part in ((A.indptr, A.indices, A.data) if hasattr(A, "indptr") else (A,)):
        digest.update(memoryview(part).cast("B"))
    return {"seconds": seconds, "peak_rss_mib": peak, "sha256": digest.hexdigest(), "kind": type(A).__name__}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfapprox", required=True, help="the checkout to compare with (its sfapprox first on PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="where the files are written and read")
    ap.add_argument("--only", help="comma-separated file names of the table (default: all)")
    ap.add_argument("--tag", default="read_formats")
    args = ap.parse_args()
    data = Path(args.data)
    # in a child: getrusage's peak survives exec, so this process's arrays would count in every reader's peak
    names = args.only.split(",") if args.only else list(FILES)
    run_child("read_formats", "make_files", [str(data), names])
    rows = alternate_reads("read_formats", data, names, args.sfapprox, args.rounds)
    for row in rows:
        row["what"] = FILES.get(row["file"], row["file"])
    write_table(args, rows, "# Reading large files: before / after")


def alternate_reads(script: str, data: Path, names: list[str], sfapprox: str, rounds: int) -> list[dict]:
    """Each file in ``names`` read by ``script``'s ``one`` in fresh processes, this checkout and ``sfapprox``
    alternating ``rounds`` times: per file its medians, their ratios (after / before) and every run
    (SystemExit where the two checkouts read different matrices).  ``decimal_comma_read.py`` uses it too."""
    envs = {"before": checkout_env(sfapprox), "after": checkout_env(str(ROOT))}
    rows = []
    for name in names:
        runs = {"before": [], "after": []}
        for _ in range(rounds):
            for label, env in envs.items():
                runs[label].append(run_child(script, "one", [str(data / name)], env=env))
                r = runs[label][-1]
                print(f"{name} {label}: {r['seconds']:.2f} s, {r['peak_rss_mib']:.0f} MiB", flush=True)
        if len({r["sha256"] for rs in runs.values() for r in rs}) != 1:
            raise SystemExit(f"{name}: the two checkouts read different matrices")
        med = {label: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_rss_mib")}
               for label, rs in runs.items()}
        rows.append({"file": name, "mib": round(os.path.getsize(data / name) / 2**20, 1),
                     "kind": runs["after"][0].get("kind"), "sha256": runs["after"][0]["sha256"][:16],
                     "before": med["before"], "after": med["after"],
                     "time_ratio": round(med["after"]["seconds"] / med["before"]["seconds"], 2),
                     "rss_ratio": round(med["after"]["peak_rss_mib"] / med["before"]["peak_rss_mib"], 2),
                     "runs": runs})
    return rows


def write_table(args, rows: list[dict], title: str) -> None:
    """``rows`` of :func:`alternate_reads` as ``args.tag``'s JSON and Markdown (with what each file became)."""
    out = {"meta": meta(machine=machine(numpy=version("numpy"), scipy=version("scipy")),
                        before=args.sfapprox, rounds=args.rounds), "rows": rows}
    lines = [title, "", f"Machine: {out['meta']['machine']}", "",
             f"Command: `{out['meta']['command']}` (before: `{args.sfapprox}`; medians of {args.rounds} rounds, "
             "fresh processes alternating; peak RSS includes the import)", "",
             "| file | MiB | read as | s before | s after | time after/before | peak MiB before | peak MiB after "
             "| RSS after/before | sha256 (both) |", "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r.get('what', r['file'])} | {r['mib']:g} | {r['kind']} | "
                     f"{r['before']['seconds']:.2f} | {r['after']['seconds']:.2f} | {r['time_ratio']:.2f} | "
                     f"{r['before']['peak_rss_mib']:.0f} | {r['after']['peak_rss_mib']:.0f} | {r['rss_ratio']:.2f} | "
                     f"{r['sha256']} |")
    lines += ["", *findings_lines(out, "(to be written)")]
    write_results(args.tag, out, lines)


if __name__ == "__main__":
    main()
