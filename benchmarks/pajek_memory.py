"""The Pajek reader's peak memory against the estimate it is checked for (``Source.read_text``).

Run by hand (not part of the tests):

    python benchmarks/pajek_memory.py FILE.net [FILE.net ...]

Per file, two fresh processes each run ``read_pajek`` (the reader alone, no limit): one under
tracemalloc (its peak: what Python and numpy allocate, the file's bytes included), one without it (the
growth of the peak RSS over the RSS before the read: allocator overhead and untraced C buffers too).
Beside them: the old estimate (4 bytes a byte and 300 a line, for the line-by-line reader) and
:func:`sfapprox.io._pajek.parse_cost`, the bulk reader's, and the largest estimate the read was
checked for (more where lines are read one by one).  Writes benchmarks/results/pajek_memory.json
and .md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _common import machine, meta, proc_status, reset_peak, run_child, version, write_results, findings_lines


def one(path: str, trace: bool) -> dict:
    """``read_pajek(path)`` in this (fresh) process: its tracemalloc peak, or its RSS peak's growth."""
    import tracemalloc

    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._pajek import read_pajek

    src = Source(path, keep_sparse=True, max_memory=1 << 50)
    if trace:
        tracemalloc.start()
        read_pajek(src, DEFAULTS)
        return {"peak": tracemalloc.get_traced_memory()[1]}
    import sfapprox.io._common as common
    import sfapprox.io._pajek as pajek

    checked = [0]

    def check_memory(n_bytes, *, what, **kwargs):  # the parse's checks: read_text's, and the lines read one by one
        if ": parsing " in what:
            checked[0] = max(checked[0], n_bytes)

    common.check_memory = pajek.check_memory = check_memory  # (limit 2**50: nothing refused here anyway)
    reset_peak()
    before = proc_status("VmRSS")
    read_pajek(src, DEFAULTS)
    return {"peak": proc_status("VmHWM") - before, "checked": checked[0]}


def measure(path: str) -> dict:
    """The file's size, lines, both estimates and both peaks."""
    from sfapprox.io._pajek import parse_cost

    data = Path(path).read_bytes()
    lines = data.count(b"\n") + 1
    row = {"file": Path(path).name, "bytes": len(data), "lines": lines, "old_estimate": 4 * len(data) + 300 * lines,
           "estimate": parse_cost(data, lines)}
    del data
    row["traced"] = run_child("pajek_memory", "one", [path, True])["peak"]
    untraced = run_child("pajek_memory", "one", [path, False])
    row["rss"], row["checked"] = untraced["peak"], untraced["checked"]
    print(row, f"load {os.getloadavg()[0]:.1f}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    rows = [measure(str(Path(f).resolve())) for f in args.files]
    out = {"meta": meta(machine=machine(numpy=version("numpy"), scipy=version("scipy"))), "rows": rows}
    mb = 1e6
    lines = ["# The Pajek reader's peak memory against its estimate", "", f"Machine: {out['meta']['machine']}", "",
             f"Command: `{out['meta']['command']}` (load average at start "
             f"{out['meta'].get('load_average_at_start', '?')}; MB = 10^6 bytes)", "",
             "| file | MB | lines | traced peak MB | RSS growth MB | bytes a line (traced, less the file) | "
             "estimate MB | checked MB | checked / traced | old estimate MB | old / traced |", "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['file']} | {r['bytes'] / mb:.1f} | {r['lines']:,} | {r['traced'] / mb:.1f} | "
                     f"{r['rss'] / mb:.1f} | {(r['traced'] - r['bytes']) / r['lines']:.0f} | "
                     f"{r['estimate'] / mb:.1f} | {r['checked'] / mb:.1f} | {r['checked'] / r['traced']:.2f} | "
                     f"{r['old_estimate'] / mb:.1f} | "
                     f"{r['old_estimate'] / r['traced']:.2f} |")
    lines += ["", *findings_lines(out, "(to be written)")]
    write_results("pajek_memory", out, lines)


if __name__ == "__main__":
    main()
