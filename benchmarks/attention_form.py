"""Opening and forming an attention map (``AttentionMatrix``, then ``to_dense``): this checkout against another, in one run.

Run by hand (not part of the tests):

    python benchmarks/attention_form.py --sfapprox /tmp/attention-form-before [--sizes 4096,8192] [--rounds 2] [--dim 64]

Each cell runs in a fresh interpreter: ``softmax(Q K^T / sqrt(d))`` of seeded standard normal queries and
keys (``N x --dim``), under the default memory limit.  Timed apart: opening it (the row maxima and sums, one
streamed pass over column blocks) and forming it; each with its peak RSS over the RSS before it (Linux's
``VmHWM``, reset before each part), and the SHA-256 of the formed matrix's bytes.  The two checkouts
alternate, ``--rounds`` times, so that a busy moment of the shared machine falls on both; the run stops if
their matrices differ in a single bit.  Writes benchmarks/results/attention_form.json and .md.
"""

from __future__ import annotations

import argparse
import os

from _common import ROOT, alternating_rows, findings_lines, machine, meta, proc_status, reset_peak, write_results


def one(n: int, dim: int) -> dict:
    """Open and form the attention map of order ``n`` in this (fresh) process: seconds and peak RSS over the
    start of each part, the formed matrix's digest."""
    import hashlib
    import time
    from pathlib import Path

    import numpy as np

    import sfapprox
    from sfapprox.sources import AttentionMatrix

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((n, dim)), rng.standard_normal((n, dim))
    row = {"n": n, "sfapprox": str(Path(sfapprox.__file__).parent)}
    base = proc_status("VmRSS")
    reset_peak()
    began = time.perf_counter()
    A = AttentionMatrix(q, k)
    row["open_seconds"] = time.perf_counter() - began
    row["open_peak_over_mib"] = max(0, proc_status("VmHWM") - base) / 2**20
    base = proc_status("VmRSS")
    reset_peak()
    began = time.perf_counter()
    X = A.to_dense()
    row["form_seconds"] = time.perf_counter() - began
    row["form_peak_over_mib"] = max(0, proc_status("VmHWM") - base) / 2**20
    row["sha256"] = hashlib.sha256(X.tobytes()).hexdigest()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--sfapprox", required=True, help="the other checkout (before), run by its PYTHONPATH")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = alternating_rows("attention_form", sizes, args.rounds, [args.dim], args.sfapprox,
                            lambda r: (f"open {r['open_seconds']:.2f} s ({r['open_peak_over_mib']:,.0f} MiB), "
                                       f"form {r['form_seconds']:.2f} s ({r['form_peak_over_mib']:,.0f} MiB)"))
    import numpy as np

    data = {**meta(machine=machine(numpy=np.__version__), dim=args.dim, other=args.sfapprox), "rows": rows}
    lines = [f"# Opening and forming an attention map, before and after ({data['date']})", "",
             f"Machine: {data['machine']}; load average at start {data['load_average_at_start']}. "
             f"Command: `{data['command']}`. Queries and keys: seeded standard normal, N x {args.dim}, scale "
             f"1/sqrt({args.dim}); the default memory limit; each cell a fresh process, the checkouts alternating. "
             "Opening is the row maxima and sums' pass; peak RSS is over the RSS before each part (VmHWM reset). "
             "Before and after formed the same matrix at every N (the SHA-256 of its bytes).", "",
             "| N | checkout | open (s) | open peak RSS over (MiB) | form (s) | form peak RSS over (MiB) | sha256 (first 12) |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['checkout']} | {r['open_seconds']:.2f} | {r['open_peak_over_mib']:,.0f} | "
              f"{r['form_seconds']:.2f} | {r['form_peak_over_mib']:,.0f} | {r['sha256'][:12]} |" for r in rows]
    lines += ["", *findings_lines(data, "(to be written)")]
    write_results("attention_form", data, lines)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
