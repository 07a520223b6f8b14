"""Reading large Pajek networks: ``sfapprox info FILE`` and ``load_matrix``, this checkout against another one.

Run by hand (not part of the tests):

    python benchmarks/pajek_read.py --sfapprox /tmp/pajekfast_old FILE.net [FILE.net ...] [--rounds 1]
    python benchmarks/pajek_read.py --sfapprox /tmp/old --arcslist 100000 1000000 --data /tmp/lists

The files are given (random graphs of N vertices, ten lines a vertex, ``*Edges`` or ``*Arcs``, with or
without weights, each vertex listed with a label; none are in the repository), or written first with
``--arcslist N ...`` into ``--data`` (:func:`write_arcslist`: N labelled vertices, then one ``*Arcslist``
line a vertex, ten random targets each, seed 0), reused there when present.  Per file and round, the
two checkouts alternate, each: ``sfapprox info FILE`` (wall seconds and peak RSS of the command line,
as a user sees it, by ``getrusage``), then ``load_matrix(FILE, keep_sparse=True)`` in a fresh process
(``run_child``: its seconds, peak RSS and the SHA-256 of the CSR's ``indptr``, ``indices``, ``data``;
the two checkouts must agree to the bit, SystemExit otherwise).  Writes
benchmarks/results/pajek_read.json and .md.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from _common import (ROOT, checkout_env, findings_lines, machine, measure_command, meta, run_child, version,
                     write_results)


def write_arcslist(folder: str, n: int, seed: int = 0) -> str:
    """``folder/g{n // 1000}k_arcslist.net``: n vertices (``v "vv"``), then ``*Arcslist`` with one line a
    vertex, ``v`` and ten random targets (repeats and self-loops as they fall); kept if already there."""
    import numpy as np

    path = Path(folder) / f"g{n // 1000}k_arcslist.net"
    if path.exists():
        return str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    part = path.with_suffix(".part")
    with open(part, "w") as out:
        out.write(f"*Network g{n}\n*Vertices {n}\n")
        out.writelines(f'{v} "v{v}"\n' for v in range(1, n + 1))
        out.write("*Arcslist\n")
        for begin in range(1, n + 1, 100_000):  # (the targets a block of vertices at a time)
            rows = rng.integers(1, n + 1, (min(100_000, n + 1 - begin), 10))
            out.writelines(f"{v} {' '.join(map(str, row))}\n" for v, row in enumerate(rows.tolist(), begin))
    part.replace(path)
    return str(path)


def one(path: str) -> dict:
    """``load_matrix(path, keep_sparse=True)`` in this (fresh) process: seconds, peak RSS, SHA-256."""
    import time

    from read_formats import timed_read
    from sfapprox.io import load_matrix

    began = time.perf_counter()
    return timed_read(lambda: load_matrix(path, keep_sparse=True), began)


def info_run(path: str, env: dict) -> dict:
    """``sfapprox info path`` in a fresh process (:func:`measure_command`): wall seconds and peak RSS (MiB)."""
    done = measure_command(["sfapprox", "info", path], env=env)
    if done["rc"] != 0:
        raise RuntimeError(f"sfapprox info {path} failed:\n{done['stderr']}")
    return {"seconds": done["seconds"], "peak_rss_mib": done["maxrss_kib"] / 1024}


def measure(path: str, envs: dict, rounds: int) -> dict:
    """Both checkouts, alternating, ``rounds`` times: the medians of ``info`` and of the read, and every run."""
    runs = {label: {"info": [], "read": []} for label in envs}
    for _ in range(rounds):
        for label, env in envs.items():
            runs[label]["info"].append(info_run(path, env))
            runs[label]["read"].append(run_child("pajek_read", "one", [path], env=env))
            i, r = runs[label]["info"][-1], runs[label]["read"][-1]
            print(f"{Path(path).name} {label}: info {i['seconds']:.1f} s {i['peak_rss_mib']:.0f} MiB; "
                  f"read {r['seconds']:.1f} s {r['peak_rss_mib']:.0f} MiB; load {os.getloadavg()[0]:.1f}", flush=True)
    if len({r["sha256"] for label in runs for r in runs[label]["read"]}) != 1:
        raise SystemExit(f"{path}: the two checkouts read different matrices")
    med = {label: {what: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_rss_mib")}
                   for what, rs in parts.items()} for label, parts in runs.items()}
    return {"file": Path(path).name, "mib": round(os.path.getsize(path) / 2**20, 1),
            "sha256": runs["after"]["read"][0]["sha256"][:16], "before": med["before"], "after": med["after"],
            "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--arcslist", type=int, nargs="+", default=[], metavar="N",
                    help="also an *Arcslist file of N vertices, ten targets each (written into --data)")
    ap.add_argument("--data", default="/tmp/pajek_read_data", help="the folder of the --arcslist files")
    ap.add_argument("--sfapprox", required=True, help="the checkout to compare with (its sfapprox first on PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tag", default="pajek_read")
    args = ap.parse_args()
    envs = {"before": checkout_env(args.sfapprox), "after": checkout_env(str(ROOT))}
    files = [*args.files, *(write_arcslist(args.data, n) for n in args.arcslist)]
    if not files:
        ap.error("give FILE.net or --arcslist N")
    rows = [measure(str(Path(f).resolve()), envs, args.rounds) for f in files]
    out = {"meta": meta(machine=machine(numpy=version("numpy"), scipy=version("scipy")),
                        before=args.sfapprox, rounds=args.rounds), "rows": rows}
    lines = ["# Reading large Pajek networks: before / after", "", f"Machine: {out['meta']['machine']}", "",
             f"Command: `{out['meta']['command']}` (before: `{args.sfapprox}`; medians of {args.rounds} round(s), "
             "fresh processes alternating; load average at start "
             f"{out['meta'].get('load_average_at_start', '?')}; peak RSS includes the import)", "",
             "| file | MiB | info s before | info s after | after/before | info peak MiB before | after | "
             "read s before | read s after | after/before | read peak MiB before | after | sha256 (both) |",
             "|" + "---|" * 13]
    for r in rows:
        b, a = r["before"], r["after"]
        lines.append(
            f"| {r['file']} | {r['mib']:g} | {b['info']['seconds']:.1f} | {a['info']['seconds']:.1f} | "
            f"{a['info']['seconds'] / b['info']['seconds']:.2f} | {b['info']['peak_rss_mib']:.0f} | "
            f"{a['info']['peak_rss_mib']:.0f} | {b['read']['seconds']:.1f} | {a['read']['seconds']:.1f} | "
            f"{a['read']['seconds'] / b['read']['seconds']:.2f} | {b['read']['peak_rss_mib']:.0f} | "
            f"{a['read']['peak_rss_mib']:.0f} | {r['sha256']} |")
    lines += ["", *findings_lines(out, "(to be written)")]
    write_results(args.tag, out, lines)


if __name__ == "__main__":
    main()
