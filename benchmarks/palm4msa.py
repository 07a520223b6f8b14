"""PALM4MSA (FAµST's algorithm) against ChordSF on the same Chord supports, at equal wall time.

PALM4MSA (Le Magoarou & Gribonval, "Flexible multi-layer sparse approximations
of matrices and applications", IEEE JSTSP 2016) fits ``X ≈ λ S_1 ⋯ S_M`` by
proximal alternating linearized minimization: one sweep updates every factor
once, left to right, by a gradient step of size ``1 / c_j`` with
``c_j = (1 + α) λ² ‖L‖₂² ‖R‖₂²`` followed by the projection onto its
constraint set (here: the Chord support, then unit Frobenius norm), and ends
with the closed-form update of ``λ``.  This file implements it in numpy
float64 with dense masked factors, following FAµST's C++ code: update order
left to right, ``α = 0.001`` (``LIPSCHITZ_MULTIPLICATOR = 1.001``), spectral
norms by power iteration (at most 100 iterations, threshold 1e-6) and, by
default, FAµST's start (first factor zero, the others identity, ``λ = 1``).

Run by hand (not part of the tests), on an otherwise idle machine:

    python benchmarks/palm4msa.py [--times 5,20] [--only strike,aura_sonar]
                                  [--inits faust,reference] [--threads 2] [--pyfaust]
    python benchmarks/palm4msa.py --selftest

``--pyfaust`` also runs FAµST's own ``pyfaust.fact.palm4msa`` (C++) with the
same supports as ``'supp'`` constraints; pyfaust is not a project dependency,
so run the script with an interpreter that has it (e.g. a virtual environment
made with ``--system-site-packages`` plus ``pip install pyfaust``).

Writes benchmarks/results/palm4msa.json (machine, settings, every row) and
benchmarks/results/palm4msa.md (the table and what was run); the "Findings"
section of the committed markdown was written by hand after the run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

from _common import DEFAULT_DATA_DIR as REAL
from _common import machine, meta, write_results


def _set_thread_env(threads: int) -> None:
    # BLAS reads these when it is loaded, so they are set before numpy/torch are imported.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def _threads_from_argv(default: int = 2) -> int:
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return default


_set_thread_env(_threads_from_argv())

import numpy as np  # noqa: E402  (after the thread environment)

#: The 8 matrices of the paper's Table 1 whose TSVD errors reproduce (✓ in realdata/README.md).
CASES = [
    ("strike", "pajek/strike.paj"),
    ("sawmill", "pajek/Sawmill.net"),
    ("mexican_power", "pajek/mexican_power.paj"),
    ("world_trade", "pajek/world_trade.paj"),
    ("mesh1e1", "suitesparse/mesh1e1_structural_48_48_177.mtx"),
    ("mesh2e1", "suitesparse/mesh2e1.mtx"),
    ("webkb_cornell", "linqs_webkb/cornell.cites"),
    ("aura_sonar", "chen2009_similarity/aural_sonar.mat"),
]
#: Loader options by file: the local mesh2e1 copy is header-less 'i j value' lines.
LOAD_OPTIONS = {"suitesparse/mesh2e1.mtx": {"format": "ijv"}}

#: FAµST's LIPSCHITZ_MULTIPLICATOR is 1.001, i.e. alpha = 0.001.
ALPHA = 1e-3
#: FAµST's power-iteration defaults (ParamsPalm4MSA.norm2_max_iter / norm2_threshold).
NORM2_MAX_ITER = 100
NORM2_THRESHOLD = 1e-6


# --------------------------------------------------------------------- supports
def chord_mask(n: int) -> np.ndarray:
    """Boolean ``n x n`` Chord support: row ``i`` may hold columns ``(i + d) mod n``."""
    from sfapprox.chord import chord_indices, chord_offsets

    mask = np.zeros((n, n), dtype=bool)
    mask[np.arange(n)[:, None], chord_indices(n, chord_offsets(n))] = True
    return mask


def values_to_dense(values: np.ndarray, n: int) -> np.ndarray:
    """Dense factor from ChordSF-style values ``(N, K)`` (row ``i``, offset ``k``)."""
    from sfapprox.chord import chord_indices, chord_offsets

    dense = np.zeros((n, n))
    dense[np.arange(n)[:, None], chord_indices(n, chord_offsets(n))] = values
    return dense


# --------------------------------------------------------------- PALM4MSA parts
def project(D: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Projection onto {support ⊆ mask, ‖S‖_F = 1}: keep the support, then normalize.

    This is the exact Euclidean projection onto that (non-convex) set, i.e.
    FAµST's ``'supp'`` constraint with ``normalized=True``.  A zero masked
    matrix has no nearest unit-norm point; it is returned as is (FAµST raises).
    """
    S = np.where(mask, D, 0.0)
    norm = np.linalg.norm(S)
    return S / norm if norm > 0 else S


def spectral_norm(A: np.ndarray, v: np.ndarray | None = None, max_iter: int = NORM2_MAX_ITER,
                  threshold: float = NORM2_THRESHOLD) -> tuple[float, np.ndarray]:
    """‖A‖₂ by power iteration on ``AᵀA``, as FAµST does; returns the norm and the last vector.

    ``v`` warm-starts the iteration (the vector of the same factor position in
    the previous sweep): the estimate is the same to the threshold, reached in
    a few iterations instead of tens.  Stops when the eigenvalue estimate
    changes by less than ``threshold`` relative, or after ``max_iter``.
    Like every power iteration it can only underestimate the norm; the
    ``1 + α`` margin of the step covers that.
    """
    v = np.ones(A.shape[1]) if v is None else v
    v = v / np.linalg.norm(v)
    est = 0.0
    for _ in range(max_iter):
        w = A.T @ (A @ v)
        new = float(np.linalg.norm(w))
        if new == 0.0:
            return 0.0, np.ones(A.shape[1])
        v = w / new
        if abs(new - est) <= threshold * new:
            est = new
            break
        est = new
    return math.sqrt(est), v


def exact_spectral_norm(A: np.ndarray) -> float:
    """‖A‖₂ from the SVD (self-test only: it costs O(N³) with a large constant)."""
    return float(np.linalg.norm(A, 2))


@dataclass
class PalmResult:
    """Outcome of a PALM4MSA run.

    Attributes
    ----------
    factors : list of ndarray
        ``S_1 … S_M`` (dense, zero off the support, unit Frobenius norm once updated).
    lam : float
        The scale ``λ``.
    fro_error : float
        ``‖X − λ S_1 ⋯ S_M‖_F`` recomputed from the returned factors.
    n_iter : int
        Completed sweeps (FAµST's iterations: every factor updated once, then ``λ``).
    seconds : float
        Wall time of the sweeps.
    objective : list of float
        ``‖X − λ S_1 ⋯ S_M‖_F`` after each sweep (index 0: the start).
    steps : list of float
        With ``trace=True``: the objective after every single factor or ``λ`` update.
    """

    factors: list[np.ndarray]
    lam: float
    fro_error: float
    n_iter: int
    seconds: float
    objective: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)


def _suffixes(factors: list[np.ndarray]) -> list[np.ndarray | None]:
    """``T[j] = S_j ⋯ S_M`` for every ``j`` and ``T[M] = None`` (the identity)."""
    out: list[np.ndarray | None] = [None] * (len(factors) + 1)
    for j in range(len(factors) - 1, -1, -1):
        out[j] = factors[j] if out[j + 1] is None else factors[j] @ out[j + 1]
    return out


def _gradient(X: np.ndarray, lam: float, L: np.ndarray | None, SR: np.ndarray,
              R: np.ndarray | None) -> np.ndarray:
    """``∇_{S_j} ½‖X − λ L S_j R‖²  = λ Lᵀ (λ L S_j R − X) Rᵀ`` (``SR = S_j R`` given)."""
    E = lam * (SR if L is None else L @ SR) - X
    G = E if R is None else E @ R.T
    return lam * (G if L is None else L.T @ G)


def palm_sweep(X: np.ndarray, mask: np.ndarray, factors: list[np.ndarray], lam: float,
               vectors: dict, alpha: float = ALPHA, exact_norms: bool = False,
               steps: list[float] | None = None) -> tuple[list[np.ndarray], float, float]:
    """One PALM4MSA iteration: update ``S_1 … S_M`` left to right, then ``λ``.

    For factor ``j``: ``L = S_1 ⋯ S_{j−1}`` (already updated), ``R = S_{j+1} ⋯ S_M``
    (not yet), ``c_j = (1 + α) λ² ‖L‖₂² ‖R‖₂²`` and
    ``S_j ← P(S_j − ∇_{S_j} / c_j)``.  Then ``λ ← ⟨X, Â⟩ / ‖Â‖²`` with
    ``Â = S_1 ⋯ S_M`` — the exact minimiser over ``λ``.

    ``vectors`` keeps the power-iteration vectors between sweeps.  With
    ``steps`` given, the objective after every update is appended (extra
    products: self-test only).  Returns the factors, ``λ`` and the objective.
    """
    factors = list(factors)
    suffix = _suffixes(factors)  # suffix[j] = S_j ⋯ S_M with the old values
    L: np.ndarray | None = None
    for j in range(len(factors)):
        R = suffix[j + 1]
        c = (1.0 + alpha) * lam**2 * _sq_norm(L, ("L", j), vectors, exact_norms) \
            * _sq_norm(R, ("R", j), vectors, exact_norms)
        grad = _gradient(X, lam, L, suffix[j], R)
        factors[j] = project(factors[j] - grad / c, mask)
        L = factors[j] if L is None else L @ factors[j]
        if steps is not None:
            steps.append(_objective(X, lam, L if R is None else L @ R))
    lam = float(np.vdot(X, L) / np.vdot(L, L))
    err = _objective(X, lam, L)
    if steps is not None:
        steps.append(err)
    return factors, lam, err


def _sq_norm(A: np.ndarray | None, key: tuple, vectors: dict, exact: bool) -> float:
    """‖A‖₂² (1 for the identity, ``A = None``), warm-started by position ``key``."""
    if A is None:
        return 1.0
    if exact:
        return exact_spectral_norm(A) ** 2
    norm, vectors[key] = spectral_norm(A, vectors.get(key))
    return norm**2


def _objective(X: np.ndarray, lam: float, P: np.ndarray) -> float:
    return float(np.linalg.norm(X - lam * P))


def product(factors: list[np.ndarray]) -> np.ndarray:
    """``S_1 ⋯ S_M`` as a dense matrix."""
    out = factors[-1]
    for S in reversed(factors[:-1]):
        out = S @ out
    return out


def palm4msa(X: np.ndarray, mask: np.ndarray, factors: list[np.ndarray], lam: float,
             time_limit: float | None = None, max_iter: int = 10**9, exact_norms: bool = False,
             trace: bool = False) -> PalmResult:
    """Run PALM4MSA sweeps from ``(factors, lam)`` until ``max_iter`` or ``time_limit`` seconds.

    The clock is read after every sweep (as ChordSF's L-BFGS reads it after
    every iteration), so a run may pass the limit by up to one sweep;
    ``seconds`` says by how much.
    """
    start = time.perf_counter()
    vectors: dict = {}
    steps: list[float] | None = [] if trace else None
    objective = [_objective(X, lam, product(factors))]
    n_iter = 0
    while n_iter < max_iter and (time_limit is None or time.perf_counter() - start < time_limit):
        factors, lam, err = palm_sweep(X, mask, factors, lam, vectors, exact_norms=exact_norms, steps=steps)
        objective.append(err)
        n_iter += 1
    seconds = time.perf_counter() - start
    fro = _objective(X, lam, product(factors))
    return PalmResult(factors, lam, fro, n_iter, seconds, objective, steps or [])


# -------------------------------------------------------------------- starts
def initial_point(init: str, X: np.ndarray, n_factors: int, seed: int = 0) -> tuple[list[np.ndarray], float]:
    """Starting factors and ``λ``.

    ``"faust"``: FAµST's default (``ParamsPalm4MSA(init_facts=None)``, updates
    left to right): the first factor to be updated (``S_1``) zero, the others
    the identity, ``λ = 1``.
    ``"reference"`` / ``"identity"``: exactly ChordSF's starting point of that
    name (``sfapprox.sf._multistart.start_values`` with ChordSF's seeds and noise):
    ChordSF fits ``X / s`` with ``s = ‖X‖_F / √N``, so its start ``W_1 ⋯ W_M``
    is ``λ S_1 ⋯ S_M`` with ``S_j = W_j`` and ``λ = s``.
    """
    n = X.shape[0]
    if init == "faust":
        factors = [np.zeros((n, n))] + [np.eye(n) for _ in range(n_factors - 1)]
        return factors, 1.0
    from sfapprox.chord import chord_offsets
    from sfapprox.sf._multistart import start_values

    shape = (n_factors, n, len(chord_offsets(n)))
    values = start_values([init], seed, shape)[init]  # ChordSF's own start, seeds and noise
    scale = float(np.linalg.norm(X)) / math.sqrt(n)
    return [values_to_dense(v, n) for v in values], scale


# ------------------------------------------------------------------- pyfaust
def pyfaust_palm(X: np.ndarray, mask: np.ndarray, n_factors: int, time_limit: float,
                 backend: int = 2016) -> dict:
    """FAµST's ``pyfaust.fact.palm4msa`` with 'supp' constraints, run for about ``time_limit`` seconds.

    pyfaust stops on an iteration count, not a clock, so it runs in chunks:
    each call continues from the previous call's factors and λ
    (``init_facts``, ``init_lambda``), which is exactly the same iteration —
    PALM4MSA's state is (factors, λ) and FAµST's power iterations restart
    from the ones vector at every step anyway.  Chunks double while a call
    is short, so the per-call overhead stays small, and are cut to the time
    left.  The first call uses FAµST's default start (first factor zero,
    others identity, λ = 1); updates go left to right.
    """
    from pyfaust.fact import palm4msa as faust_palm4msa
    from pyfaust.factparams import ConstraintList, ConstraintMat, ParamsPalm4MSA, StoppingCriterion

    support = mask.astype(float)
    cons = ConstraintList(*[ConstraintMat("supp", support.copy(), normalized=True) for _ in range(n_factors)])
    facts: list[np.ndarray] | None = None
    lam, its, spent, chunk = 1.0, 0, 0.0, 1
    while spent < time_limit:
        params = ParamsPalm4MSA(cons, StoppingCriterion(num_its=chunk), init_facts=facts, init_lambda=lam)
        t0 = time.perf_counter()
        F, lam = faust_palm4msa(X, params, ret_lambda=True, backend=backend)
        took = time.perf_counter() - t0
        spent += took
        its += chunk
        lam = float(lam)
        facts = [_dense(F.factors(i)) for i in range(n_factors)]
        facts[0] = facts[0] / lam  # the returned Faust carries λ in its first factor
        left = time_limit - spent
        chunk = max(1, min(2 * chunk, int(left / (took / chunk)))) if left > 0 else chunk
    err = float(np.linalg.norm(X - lam * product(facts)))
    return {"fro_error": err, "iterations": its, "seconds": spent, "lambda": lam, "backend": backend}


def _dense(A) -> np.ndarray:
    """A pyfaust factor (numpy array or scipy sparse matrix) as a Fortran-ordered float64 array."""
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A)
    return np.asfortranarray(A, dtype=np.float64)


# --------------------------------------------------------------------- self-test
def selftest(seed: int = 0) -> int:
    """Check PALM4MSA on a tiny planted product of Chord factors.

    1. With exact spectral norms, the objective must not increase after any
       single factor update nor after the λ update (PALM's sufficient-decrease
       lemma with ``c_j`` above the block Lipschitz constant, plus an exact
       projection; λ's update is an exact minimisation).  The lemma needs the
       current factor to be feasible, so the check starts once every factor
       has been projected (the last update of the first sweep): before that,
       the identity / 1/K factors have norms other than 1 and the first
       projections may raise the objective.
    2. The same with FAµST's power-iteration norms (what the benchmark uses).
    3. From the planted product's own factors (normalized, with the right λ)
       the error starts at 0 and stays 0.
    4. If pyfaust is importable: 30 sweeps from FAµST's start must match
       pyfaust.fact.palm4msa to 1e-3 relative.  (They agree to 1e-16 up to
       the first step whose ``c_j`` uses an estimated spectral norm; after
       that the two power iterations' estimates differ in the ~6th digit, and
       so do the iterates.)
    Returns 0 on success.
    """
    rng = np.random.default_rng(seed)
    n, M = 12, 4
    mask = chord_mask(n)
    truth = [project(rng.standard_normal((n, n)), mask) for _ in range(M)]
    X = 3.0 * product(truth)
    targets = {"planted": X, "gaussian": rng.standard_normal((n, n))}
    ok = True
    for (label, target), exact, init in itertools.product(targets.items(), (True, False), ("faust", "reference")):
        ok &= _check_descent(label, target, mask, M, init, exact, seed)
    res = palm4msa(X, mask, truth, 3.0, max_iter=5)
    good = res.fro_error <= 1e-10 * np.linalg.norm(X)
    ok &= good
    print(f"[selftest] planted start stays exact: error {res.fro_error:.2e}  {'ok' if good else 'FAIL'}")
    ok &= _selftest_pyfaust(X, mask, M)
    print("[selftest] " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def _check_descent(label: str, X: np.ndarray, mask: np.ndarray, n_factors: int, init: str,
                   exact: bool, seed: int, sweeps: int = 200) -> bool:
    """Whether the objective never rises once every factor is feasible (see :func:`selftest`)."""
    factors, lam = initial_point(init, X, n_factors, seed)
    res = palm4msa(X, mask, factors, lam, max_iter=sweeps, exact_norms=exact, trace=True)
    # From the last update of sweep 1 on, every factor is feasible (in the
    # support, unit norm): only then does the descent lemma apply.
    rises = np.diff(res.steps[n_factors - 1:])
    worst = float(rises.max()) if rises.size else 0.0
    good = worst <= 1e-12 * max(1.0, res.steps[0])
    print(f"[selftest] {label} target, {'exact' if exact else 'power'} norms, init={init}: "
          f"{len(res.steps)} updates, largest change up {worst:.2e}, "
          f"error {res.steps[0]:.4g} -> {res.fro_error:.4g}  {'ok' if good else 'FAIL'}")
    return good


def _selftest_pyfaust(X: np.ndarray, mask: np.ndarray, n_factors: int, its: int = 30) -> bool:
    try:
        from pyfaust.fact import palm4msa as faust_palm4msa
        from pyfaust.factparams import ConstraintList, ConstraintMat, ParamsPalm4MSA, StoppingCriterion
    except ImportError:
        print("[selftest] pyfaust not importable: comparison with FAµST skipped")
        return True
    cons = ConstraintList(*[ConstraintMat("supp", mask.astype(float), normalized=True) for _ in range(n_factors)])
    F, lam = faust_palm4msa(X, ParamsPalm4MSA(cons, StoppingCriterion(num_its=its)), ret_lambda=True)
    theirs = float(np.linalg.norm(X - F.toarray()))
    factors, lam0 = initial_point("faust", X, n_factors)
    ours = palm4msa(X, mask, factors, lam0, max_iter=its)
    rel = abs(ours.fro_error - theirs) / max(theirs, 1e-300)
    good = rel <= 1e-3
    print(f"[selftest] vs pyfaust.fact.palm4msa, {its} iterations: ours {ours.fro_error:.10g}, "
          f"FAµST {theirs:.10g} (λ {ours.lam:.6g} vs {float(lam):.6g}), "
          f"rel. diff {rel:.1e}  {'ok' if good else 'FAIL'}")
    return good


# ---------------------------------------------------------------- benchmark
def bench_matrix(name: str, X: np.ndarray, seconds: float, inits: list[str], use_pyfaust: bool) -> dict:
    """One row: PALM4MSA from each start, optionally pyfaust, and ChordSF, each for ``seconds``."""
    import sfapprox
    from sfapprox.chord import default_n_factors

    n = X.shape[0]
    M = default_n_factors(n)
    mask = chord_mask(n)
    row: dict = {"matrix": name, "n": n, "n_factors": M, "n_offsets": int(mask[0].sum()), "T": seconds}
    for init in inits:
        factors, lam = initial_point(init, X, M)
        res = palm4msa(X, mask, factors, lam, time_limit=seconds)
        row[f"palm_{init}"] = {"fro_error": res.fro_error, "iterations": res.n_iter,
                               "seconds": res.seconds, "lambda": res.lam}
    if use_pyfaust:
        row["pyfaust"] = pyfaust_palm(X, mask, M, seconds)
    sf = sfapprox.ChordSF(device="cpu", time_limit=seconds, max_iter=10**7).fit(X)
    row["chordsf"] = {"fro_error": float(sf.fro_error_), "iterations": int(sf.n_iter_),
                      "evaluations": int(sf.n_evals_), "seconds": float(sf.seconds_),
                      "init": sf.init_, "stop": sf.stop_reason_}
    row["loadavg_after"] = os.getloadavg()[0]  # a busy machine shows here (see the notes)
    for key in [k for k in row if k.startswith("palm_") or k == "pyfaust"]:
        row[key]["ratio"] = row[key]["fro_error"] / row["chordsf"]["fro_error"]
    return row


def render_markdown(rows: list[dict], meta: dict) -> str:
    """Table of errors, iterations and ratios; the notes are added by hand below the marker."""
    solvers = [k for k in rows[0] if k.startswith("palm_") or k == "pyfaust"] if rows else []
    head = ["matrix", "N", "M", "T (s)"]
    for key in solvers:
        label = _label(key)
        head += [f"{label} error", f"{label} iters", f"{label} / ChordSF"]
    head += ["ChordSF error", "ChordSF iters", "ChordSF start"]
    lines = [f"# PALM4MSA vs ChordSF on the Chord supports, equal wall time ({meta['date']})", "",
             f"Command: `{meta['command']}`", "",
             f"Machine: {meta['machine']}; {meta['threads']} threads for BLAS and torch; "
             f"load average at start {meta['load_average_at_start']:.2f}. "
             f"Total wall time {meta['total_seconds']:.0f} s.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["matrix"], str(r["n"]), str(r["n_factors"]), f"{r['T']:g}"]
        for key in solvers:
            s = r[key]
            cells += [f"{s['fro_error']:.4g}", str(s["iterations"]), f"{s['ratio']:.2f}"]
        c = r["chordsf"]
        cells += [f"{c['fro_error']:.4g}", str(c["iterations"]), c["init"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + _method_notes(meta)) + "\n"


def _method_notes(meta: dict) -> list[str]:
    """What was run, written next to the table so the numbers can be read alone."""
    notes = [
        "## What was run", "",
        "- Problem: X ≈ λ·S_1⋯S_M with every S_j on the Chord support of ChordSF "
        "(row i holds columns (i+d) mod N, d ∈ {0} ∪ {2^k < N}; `sfapprox.chord.chord_offsets`), "
        "M = ⌈log₂N⌉ (`default_n_factors`): the same supports and the same number of stored values for both methods.",
        "- PALM4MSA (this script, numpy float64, dense masked N×N factors): FAµST's Palm4MSA "
        "(Le Magoarou & Gribonval, IEEE JSTSP 2016; FAµST C++ `Palm4MSA.hpp`). One iteration = one sweep "
        "updating S_1 … S_M left to right (FAµST's default `is_update_way_R2L=False`), with L = S_1⋯S_{j−1} "
        "(already updated) and R = S_{j+1}⋯S_M (previous values): "
        "S_j ← P(S_j − λ Lᵀ(λ L S_j R − X)Rᵀ / c_j), "
        f"c_j = (1+α) λ² ‖L‖₂² ‖R‖₂² with α = {meta['alpha']:g} (FAµST's `lipschitz_multiplicator` 1.001); "
        "P keeps the support and normalizes to ‖S_j‖_F = 1 (FAµST's 'supp' constraint, normalized); then "
        "λ ← ⟨X, Â⟩/‖Â‖²_F with Â = S_1⋯S_M. Spectral norms by power iteration on AᵀA "
        f"(≤ {meta['norm2']['max_iter']} iterations, threshold {meta['norm2']['threshold']:g}, as FAµST), "
        "warm-started from the previous sweep's vector. Stopped on the clock, read after each sweep.",
        "- Starts: **FAµST start** = pyfaust's default (`init_facts=None`): S_1 = 0, S_2…S_M = I, λ = 1. "
        "**1/K start** = exactly ChordSF's `init=\"reference\"` start (every value (1 + 0.01·u)/K, its seed), "
        "with λ = ‖X‖_F/√N, so that λ·S_1⋯S_M equals ChordSF's starting product.",
        "- ChordSF: `ChordSF(device=\"cpu\", time_limit=T, max_iter=10**7).fit(X)`, other parameters default "
        "(`init=\"auto\"`: reference and identity starts probed for 0.1·T each, the better continued; L-BFGS). "
        "Error = `fro_error_`, iterations = `n_iter_` (both probes included).",
        "- Ratio = PALM4MSA error / ChordSF error (> 1: ChordSF closer at the same wall time). "
        "Errors are ‖X − λS_1⋯S_M‖_F in X's units, recomputed from the returned factors.",
    ]
    if meta.get("pyfaust"):
        notes.append(
            f"- pyfaust {meta['pyfaust']} (FAµST's C++ implementation, `pyfaust.fact.palm4msa`, backend 2016, "
            "`ConstraintMat('supp', mask)` per factor, default start and step rule), run in chunks of iterations "
            "continued through `init_facts`/`init_lambda` until T seconds of its calls had passed "
            "(chunked and single runs give the same iterates). Installed outside the project "
            f"(interpreter `{meta['interpreter']}`); not a project dependency.")
    return notes


def _label(key: str) -> str:
    return {"palm_faust": "PALM (FAµST start)", "palm_reference": "PALM (1/K start)",
            "palm_identity": "PALM (identity start)", "pyfaust": "pyfaust"}[key]


def _pyfaust_version() -> str:
    import pyfaust

    return pyfaust.version()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--times", default="5,20", help="wall-time budgets in seconds, comma-separated")
    ap.add_argument("--only", default="", help="comma-separated matrix names (default: all 8)")
    ap.add_argument("--inits", default="faust,reference", help="PALM4MSA starts: faust, reference, identity")
    ap.add_argument("--threads", type=int, default=2, help="BLAS and torch threads")
    ap.add_argument("--pyfaust", action="store_true", help="also run pyfaust.fact.palm4msa")
    ap.add_argument("--selftest", action="store_true", help="check the implementation and exit")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.selftest:
        return selftest()
    if not REAL.is_dir():
        print(f"{REAL} not found", file=sys.stderr)
        return 1
    import sfapprox

    warnings.simplefilter("ignore")  # ChordSF's ConvergenceWarning on its time limit is expected here
    only = {s for s in args.only.split(",") if s}
    times = [float(t) for t in args.times.split(",") if t]
    inits = [s for s in args.inits.split(",") if s]
    info = meta(machine=machine(numpy=np.__version__, torch=torch.__version__), threads=args.threads,
                torch_threads=torch.get_num_threads(),
                blas_env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
                interpreter=sys.executable, pyfaust=_pyfaust_version() if args.pyfaust else None,
                times=times, inits=inits, alpha=ALPHA,
                norm2={"max_iter": NORM2_MAX_ITER, "threshold": NORM2_THRESHOLD, "warm_start": True},
                chordsf="ChordSF(device='cpu', time_limit=T, max_iter=10**7), other parameters default")
    rows = []
    begin = time.perf_counter()
    for name, rel in CASES:
        if only and name not in only:
            continue
        X = np.asarray(sfapprox.load_matrix(REAL / rel, **LOAD_OPTIONS.get(rel, {})).to_dense(), dtype=np.float64)
        for seconds in times:
            row = bench_matrix(name, X, seconds, inits, args.pyfaust)
            rows.append(row)
            print(json.dumps(row), flush=True)
    info["total_seconds"] = time.perf_counter() - begin
    write_results("palm4msa", {"meta": info, "rows": rows}, render_markdown(rows, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
