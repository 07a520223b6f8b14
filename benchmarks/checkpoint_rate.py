"""What checkpoints cost a time-limited SF fit: iterations and the share of the fit spent writing.

A fit with ``checkpoint_every`` far below a write's own seconds (``--checkpoint-every 0.001``) wrote after
every check; this measures, for each N, a fit without checkpoints and one with ``checkpoint_every=EVERY``,
in fresh processes, this checkout and another (``--sfapprox``, labelled "before") alternating: the
iterations made within the time limit, how many checkpoints were written and the seconds they took
(``save_factors`` timed where the fit calls it).  Usage::

    python benchmarks/checkpoint_rate.py --sfapprox /path/to/old/checkout [--sizes 30,300,3000]
        [--seconds 3,3,15] [--every 0.001] [--rounds 2]

Writes ``benchmarks/results/checkpoint_rate.{json,md}`` (``--tag`` another name).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, checkout_env, findings_lines, meta, run_child, write_results


def _matrix(n: int):
    """An RBF kernel of ``n`` points of the plane (bandwidth 0.3): high rank at small bandwidth."""
    import numpy as np

    points = np.random.default_rng(0).standard_normal((n, 2))
    d2 = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * 0.3**2))


def one(n: int, seconds: float, every: float | None) -> dict:
    """One fit of ``seconds`` (None for ``every``: no checkpoints), in this process; what it made."""
    import warnings

    import sfapprox.factors as factors
    from sfapprox import ChordSF

    X = _matrix(n)
    real, writes = factors.save_factors, []

    def timed(*args, **kwargs):
        began = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            writes.append(time.perf_counter() - began)

    factors.save_factors = timed  # ChordSF imports it from the module at each checkpoint
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extra = {} if every is None else {"checkpoint": Path(folder) / "ck.h5", "checkpoint_every": every}
        began = time.perf_counter()
        sf = ChordSF(time_limit=seconds, device="cpu", **extra).fit(X)
        wall = time.perf_counter() - began
    return {"n": n, "every": every, "seconds": seconds, "iterations": int(sf.n_iter_), "writes": len(writes),
            "write_seconds": round(sum(writes), 3), "fit_wall": round(wall, 3),
            "write_share": round(sum(writes) / wall, 4), "rel_error": float(sf.rel_error_),
            "sha256": hashlib.sha256(X.tobytes()).hexdigest()}


def render(data: dict) -> list[str]:
    m = data["meta"]
    lines = ["# What checkpoints cost a time-limited SF fit", "", f"Command: `{m['command']}`  ",
             f"Machine: {m['machine']}, {m['date']}, load average at start {m['load_average_at_start']}", "",
             "| N | checkout | checkpoint_every | time limit (s) | iterations | writes | writing (s) | share of the fit | rel error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['n']:,} | {r['checkout']} | {'none' if r['every'] is None else r['every']} | "
                     f"{r['seconds']:g} | {r['iterations']:,} | {r['writes']:,} | {r['write_seconds']:.3f} | "
                     f"{100 * r['write_share']:.1f} % | {r['rel_error']:.4f} |")
    return lines + [""] + findings_lines(data, "(to be written)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfapprox", required=True, help="the checkout to compare with (labelled 'before')")
    ap.add_argument("--sizes", default="30,300,3000")
    ap.add_argument("--seconds", default="3,3,15", help="each size's time limit")
    ap.add_argument("--every", type=float, default=0.001)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tag", default="checkpoint_rate")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    seconds = [float(s) for s in args.seconds.split(",")]
    envs = {"before": checkout_env(args.sfapprox), "after": checkout_env(str(ROOT))}
    rows = []
    for n, limit in zip(sizes, seconds):
        for _ in range(args.rounds):
            for every in (None, args.every):
                for label, env in envs.items():
                    rows.append({"checkout": label, **run_child("checkpoint_rate", "one", [n, limit, every], env=env)})
                    r = rows[-1]
                    print(f"N={n} {label} every={every}: {r['iterations']} it, {r['writes']} writes, "
                          f"{100 * r['write_share']:.1f} %", file=sys.stderr, flush=True)
    write_results(args.tag, {"meta": meta(), "rows": rows}, render({"meta": meta(), "rows": rows}))


if __name__ == "__main__":
    main()
