"""Probe (issue 25, goal 1): a coarse-to-fine start for SF — fit the 2 x 2-averaged matrix at N / 2
(recursively), then prolong its factors to N and go on there.

Run by hand (not part of the tests):

    python benchmarks/coarse_probe.py --size 4096 --seconds 120 --levels 1,2,3 --shares 0.5
    python benchmarks/coarse_probe.py --render-only

Prolongation.  At N / 2 the Chord offsets are ``{0, 1, 2, ..., N / 4}`` and there are ``M - 1``
factors; at N the offsets are ``{0, 1, 2, ..., N / 2}`` and ``M`` factors.  A coarse factor's value
at row ``i``, offset ``d`` goes to fine rows ``2i`` and ``2i + 1`` at offset ``2d`` (an offset of the
fine support), so the ``M - 1`` prolonged factors act on even and odd indices alike, as the coarse
product does on the pairs; the last fine factor holds ones at offsets 0 and 1 (it sums each pair of
columns into both).  The fine product is then the coarse one with every entry repeated in its 2 x 2
block (odd rows, even columns: the entry one coarse column to the left), which for the 2 x 2
averages ``X_c`` of ``X`` is the best such product: ``||X - up(P)||^2 = 4 ||X_c - P||^2 + const``.

Each run is a fresh process: the coarsest level from ``init="auto"`` (the default fit), every
finer one from the prolonged factors (``init=`` an array); the levels share ``--shares`` of the
seconds (the coarsest level's share split evenly over the coarse levels), the fine level the rest.
The curve is the fine level's error (relative, from the fit's own objective) against the wall
clock from the first fit call; the plain default fit at N is run the same way beside it.

Writes benchmarks/results/coarse_probe.json and .md.
"""

from __future__ import annotations

import argparse
import json
import time

from _common import OUT, findings_lines, meta, run_child, write_results

NAME = "coarse_probe"
MOMENTS = (15, 30, 60, 90, 120, 180, 300, 600)


def coarsen(X):
    """The 2 x 2 block averages of ``X`` (N even)."""
    n = X.shape[0] // 2
    return X.reshape(n, 2, n, 2).mean(axis=(1, 3))


def prolong(values, n_fine: int):
    """Factors at ``n_fine`` whose product repeats the coarse product's entries in 2 x 2 blocks
    (see the module docstring).  ``values``: ``(M - 1, N / 2, K - 1)`` at N / 2."""
    import numpy as np

    from sfapprox.budget import sf_structure
    from sfapprox.chord import support_offsets

    fine_offsets = support_offsets(n_fine, "chord", 2).tolist()
    coarse_offsets = support_offsets(n_fine // 2, "chord", 2).tolist()
    m_fine = sf_structure(n_fine).n_factors
    if values.shape[0] != m_fine - 1:
        raise SystemExit(f"{values.shape[0]} coarse factors, {m_fine - 1} expected")
    out = np.zeros((m_fine, n_fine, len(fine_offsets)))
    for k, d in enumerate(coarse_offsets):
        j = fine_offsets.index(2 * d)
        out[:-1, 0::2, j] = values[:, :, k]
        out[:-1, 1::2, j] = values[:, :, k]
    out[-1, :, fine_offsets.index(0)] = 1.0
    out[-1, :, fine_offsets.index(1)] = 1.0
    return out


def one(n: int, seconds: float, levels: int, share: float) -> dict:
    """A coarse-to-fine fit with ``levels`` coarse levels (0: the plain default fit), its curve."""
    import resource
    import warnings

    import numpy as np

    import sfapprox
    from scale_fit import matrix

    warnings.simplefilter("ignore")
    X = matrix("cloud", n)
    fro = float(np.linalg.norm(X))
    targets = [X]
    for _ in range(levels):
        targets.append(coarsen(targets[-1]))
    curve: list[tuple[float, float, int]] = []
    coarse_rows = []
    t0 = time.perf_counter()
    values = None
    for level in range(levels, -1, -1):
        T = targets[level]
        size = T.shape[0]
        limit = seconds * share / levels if level else seconds - (time.perf_counter() - t0)
        fine = level == 0

        def record(info: dict, fine=fine) -> None:
            if fine:
                curve.append((round(time.perf_counter() - t0, 3), info["fro_error"] / fro, int(info["iteration"])))

        init = "auto" if values is None else prolong(values, size)
        if values is not None and fine:
            from sfapprox.chord import support_offsets
            from sfapprox.sf import _kernels
            import torch

            P = _kernels.chord_product(torch.as_tensor(init), support_offsets(size, "chord", 2).tolist()).numpy()
            curve.append((round(time.perf_counter() - t0, 3), float(np.linalg.norm(X - P)) / fro, 0))
            del P
        sf = sfapprox.ChordSF(device="cpu", time_limit=max(1.0, limit), callback=record, init=init)
        sf.fit(T)
        values = sf.factors_
        coarse_rows.append({"n": size, "rel_error": float(sf.rel_error_), "iterations": int(sf.n_iter_),
                            "seconds": round(time.perf_counter() - t0, 2), "init": sf.init_})
    return {"n": n, "levels": levels, "share": share, "seconds": seconds, "curve": curve, "levels_run": coarse_rows,
            "rel_error": coarse_rows[-1]["rel_error"],
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def best_at(curve, t):
    seen = [e for s, e, *_ in curve if s <= t]
    return min(seen) if seen else None


def render(data: dict) -> list[str]:
    lines = [f"# Coarse-to-fine starts for SF ({data['meta']['date']})", "",
             f"Command: `{data['meta']['command']}`", "", f"Machine: {data['meta']['machine']}.", "",
             "Matrix: `scale_fit`'s ordered cloud (RBF kernel, bandwidth 1). Errors relative, of the fine "
             "level's best iterate so far (the fit's own objective), seconds from the first fit call.", ""]
    moments = [t for t in MOMENTS if any(r["seconds"] >= t for r in data["rows"])]
    head = ["N", "coarse levels", "share", *[f"at {t} s" for t in moments], "final", "levels (N: error, s)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in data["rows"]:
        cells = [f"{r['n']:,}", str(r["levels"]), f"{r['share']:.2f}" if r["levels"] else "—",
                 *[("—" if best_at(r["curve"], t) is None else f"{best_at(r['curve'], t):.4f}") for t in moments],
                 f"{r['rel_error']:.4f}",
                 "; ".join(f"{x['n']:,}: {x['rel_error']:.4f}, {x['seconds']:.0f} s" for x in r["levels_run"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""] + findings_lines(data)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--levels", default="0,1,2,3")
    p.add_argument("--shares", default="0.5")
    p.add_argument("--render-only", action="store_true")
    a = p.parse_args()
    path = OUT / f"{NAME}.json"
    if a.render_only:
        data = json.loads(path.read_text())
    else:
        rows = []
        for levels in [int(v) for v in a.levels.split(",")]:
            for share in ([0.0] if levels == 0 else [float(v) for v in a.shares.split(",")]):
                row = run_child("coarse_probe", "one", [a.size, a.seconds, levels, share])
                rows.append(row)
                print(f"N={a.size} levels={levels} share={share}: {row['rel_error']:.4f}", flush=True)
        data = {"meta": meta(), "rows": rows}
    write_results(NAME, data, render(data))


if __name__ == "__main__":
    main()
