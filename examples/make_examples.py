"""Write the small example inputs in ``examples/`` (deterministic, seeded).

Run from anywhere: ``python examples/make_examples.py [OUT_DIR]``.  Writes

- ``karate_like.net``  Pajek network, 34 vertices in two weighted communities
- ``mesh_small.mtx``   Matrix Market, 2-D 8 x 8 grid Laplacian (N=64, symmetric)
- ``shapes.png``       64 x 64 grayscale image with sharp edges
- ``features.csv``     120 samples x 40 features (for ``--covariance``)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp
from PIL import Image

HERE = Path(__file__).resolve().parent
SEED = 20240611


def write_pajek(path: Path, rng: np.random.Generator) -> None:
    """Two communities of 17 vertices, dense inside, sparse across; integer weights."""
    n, half = 34, 17
    lines = ["*Network karate_like", f"*Vertices {n}"]
    for v in range(1, n + 1):
        angle = 2 * np.pi * (v - 1) / n
        lines.append(f'{v:4d} "v{v}" {0.5 + 0.4 * np.cos(angle):.4f} {0.5 + 0.4 * np.sin(angle):.4f} 0.5000')
    lines.append("*Edges")
    for i in range(1, n + 1):
        for j in range(i + 1, n + 1):
            same = (i <= half) == (j <= half)
            if rng.random() < (0.3 if same else 0.03):
                lines.append(f"{i:4d} {j:4d} {int(rng.integers(1, 6))}")
    # A few directed arcs too (a leader's one-way ties), as Pajek allows both.
    lines.append("*Arcs")
    lines += [f"   1 {j:4d} 1" for j in (20, 25, 30)]
    lines.append("*Partition community")
    lines.append(f"*Vertices {n}")
    lines += ["1"] * half + ["2"] * (n - half)
    path.write_text("\n".join(lines) + "\n")


def write_mesh(path: Path, side: int = 8) -> None:
    """5-point Laplacian of a side x side grid (N = side², symmetric)."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(side, side))
    eye = sp.identity(side)
    L = sp.kron(t, eye) + sp.kron(eye, t)
    scipy.io.mmwrite(str(path), sp.coo_matrix(L), comment="5-point Laplacian of an 8 x 8 grid", symmetry="symmetric")


def write_shapes(path: Path, size: int = 64) -> None:
    """Rectangle, disk and stripes on a dark background; 8-bit grayscale PNG."""
    y, x = np.mgrid[0:size, 0:size]
    img = np.full((size, size), 0.1)
    img[8:28, 6:30] = 0.85  # rectangle
    img[(x - 44) ** 2 + (y - 18) ** 2 <= 12**2] = 0.55  # disk
    stripes = (y >= 38) & (y < 58) & (x >= 8) & (x < 56)
    img[stripes & ((x // 4) % 2 == 0)] = 1.0  # vertical stripes
    img[stripes & ((x // 4) % 2 == 1)] = 0.3
    Image.fromarray(np.round(img * 255).astype(np.uint8)).save(path, optimize=False)


def write_features(path: Path, rng: np.random.Generator, n_samples: int = 120, n_features: int = 40) -> None:
    """Low-rank-plus-noise table: 4 latent factors, so the covariance has structure."""
    factors = rng.standard_normal((n_samples, 4))
    loadings = rng.standard_normal((4, n_features))
    table = factors @ loadings + 0.3 * rng.standard_normal((n_samples, n_features))
    header = ",".join(f"f{k:02d}" for k in range(1, n_features + 1))
    rows = [",".join(f"{v:.3f}" for v in row) for row in table]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")


FILES = ("karate_like.net", "mesh_small.mtx", "shapes.png", "features.csv")


def main(out_dir: Path = HERE) -> None:
    """Write all example files into ``out_dir`` (default: next to this script)."""
    out_dir = Path(out_dir)
    rng = np.random.default_rng(SEED)
    write_pajek(out_dir / "karate_like.net", rng)
    write_mesh(out_dir / "mesh_small.mtx")
    write_shapes(out_dir / "shapes.png")
    write_features(out_dir / "features.csv", rng)
    for name in FILES:
        print(f"{name}: {(out_dir / name).stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
