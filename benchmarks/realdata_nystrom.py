"""Nyström on the paper's real matrices: which it applies to, and what it reports where it does not.

Run by hand (not part of the tests):

    python benchmarks/realdata_nystrom.py [--data-dir ../shared/realdata] [--sfapprox CHECKOUT]
        [--label NAME] [--merge] [--tag realdata_nystrom]

Nyström approximates a symmetric positive semi-definite matrix.  An audit (2026-12-05) found it "ok,
stop=exact" at relative error 1 on Sawmill, a graph without self-loops: its zero diagonal drew no
pivot, and a surrogate of 0 numbers was called exact.  Each real matrix of ``--data-dir`` (the files
the tests read, where present) is run as a user runs it, ``compare FILE --methods nystrom,tsvd`` at
SF's budget in a fresh process of this checkout or of ``--sfapprox``, and ``info FILE --json -`` says
whether it lists Nyström as applicable.  Rows: the file, N, what info says, Nyström's status, stored
numbers, relative error, stop reason (or why not applicable), TSVD's relative error beside it.

Writes benchmarks/results/<tag>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import DEFAULT_DATA_DIR, add_checkout_options, checkout_env, run_tables, write_runs

#: The real matrices (relative to the data folder) Nyström is tried on, with their reading options: every
#: square one the tests read (mesh2e1.mtx holds header-less triplets).
FILES = {"pajek/Sawmill.net": [], "pajek/Scotland.net": [], "pajek/strike.paj": [], "pajek/mexican_power.paj": [],
         "pajek/A99m.paj": [], "pajek/world_trade.paj": [], "suitesparse/mesh1e1_structural_48_48_177.mtx": [],
         "suitesparse/mesh2e1.mtx": ["--format", "ijv"], "chen2009_similarity/aural_sonar.mat": []}


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfapprox", *args], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())


def one(path: Path, load: list[str], env: dict, time_limit: float) -> dict:
    """One file's row: info's word on Nyström, and a comparison's Nyström and TSVD rows."""
    row: dict = {"file": path.name}
    info = run(["info", str(path), *load, "--json", "-"], env)
    if info.returncode == 0:
        methods = json.loads(info.stdout).get("methods", {})
        said = methods.get("nystrom", {})
        row["info"] = said.get("not_applicable") or ("applies" if said else "–")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "c.json"
        done = run(["compare", str(path), *load, "--methods", "nystrom,tsvd", "--time-limit", str(time_limit),
                    "--json", str(out)], env)
        row["rc"] = done.returncode
        if done.returncode != 0:
            row["error"] = " ".join(done.stderr.split())[-300:]
            return row
        data = json.loads(out.read_text())
    row["n"] = data["matrix"]["n"]
    for r in data["results"]:
        if r["method"] == "nystrom":
            row.update(status=r["status"], stored=r["nnz"], rel_error=r["rel_error"],
                       stop=r.get("reason") or (r.get("params") or {}).get("stop_reason") or r.get("stop_reason"))
        elif r["method"] == "tsvd":
            row["tsvd_rel_error"] = r["rel_error"]
    return row


def render(data: dict) -> list[str]:
    def num(v, fmt):
        return "–" if v is None else format(v, fmt)

    lines = ["# Nyström on the paper's real matrices", "", f"Machine: {data['meta']['machine']}", "",
             "Commands: " + "; ".join(f"`{c}`" for c in data.get("commands", [])), ""]
    header = ["file", "N", "info", "status", "stored", "relative error", "stop / why", "TSVD relative error"]
    return lines + run_tables(data, header, lambda r: [
        r["file"], r.get("n", "–"), r.get("info", "–"), r.get("status", f"rc {r['rc']}"), num(r.get("stored"), ","),
        num(r.get("rel_error"), ".4g"), (r.get("stop") or r.get("error") or "").replace("|", "/")[:160],
        num(r.get("tsvd_rel_error"), ".4g")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--time-limit", type=float, default=10.0)
    add_checkout_options(ap, "realdata_nystrom")
    args = ap.parse_args()
    env = checkout_env(args.sfapprox)
    folder = Path(args.data_dir)
    rows = []
    for name, load in FILES.items():
        if (folder / name).is_file():
            rows.append(one(folder / name, load, env, args.time_limit))
            print(rows[-1], flush=True)
    write_runs(args, rows, {"data_dir": str(folder)}, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
