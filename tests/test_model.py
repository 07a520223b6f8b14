import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

from sfapprox import ChordSF, ConvergenceWarning, DeviceError, ParameterError, ResourceError, fit_matrix, fit_sf
from sfapprox.chord import chord_offsets
from sfapprox.metrics import frobenius_error
from sfapprox.sf._kernels import chord_product


def _planted(n, seed=0):
    rng = np.random.default_rng(seed)
    offs = chord_offsets(n)
    m = int(np.ceil(np.log2(n)))
    ws = (1 + 0.3 * rng.standard_normal((m, n, len(offs)))) / len(offs)
    return chord_product(torch.from_numpy(ws), offs.tolist()).numpy()


def _one_second_evaluations(fake_clock, monkeypatch) -> None:
    """Every loss evaluation of SF's kernels "takes" one second on the fake clock."""
    from sfapprox.sf import _kernels

    real = _kernels.select_kernel

    def timed_select(n, device_type):
        kernel, name = real(n, device_type)

        def timed(*args):
            fake_clock.advance(1.0)
            return kernel(*args)

        return timed, name

    monkeypatch.setattr(_kernels, "select_kernel", timed_select)


def _grid_laplacian(side: int) -> np.ndarray:
    """The Laplacian of a side x side grid graph (a sparse graph where the identity start wins)."""
    n = side * side
    grid = np.zeros((n, n))
    for i in range(n):
        grid[i, i] = 4.0
        for j in (i + 1, i + side):
            if j < n and (j != i + 1 or (i + 1) % side):
                grid[i, j] = grid[j, i] = -1.0
    return grid


@pytest.mark.parametrize("n,tol", [(8, 1e-6), (12, 1e-3), (16, 1e-3)])
def test_exact_recovery_of_a_chord_product(n, tol):
    # Starting from rel. error ~0.3, the fit drives the error of a planted product to ~0
    # (N=12, 16 approach 0 slowly along nearly flat directions: 7e-5 after 3000 iterations).
    X = _planted(n)
    sf = ChordSF(max_iter=3000, device="cpu").fit(X)
    assert sf.rel_error_ < tol, sf.rel_error_
    assert sf.n_stored_ == sf.factors_.size
    assert np.allclose(sf.to_dense(), sf.operator_.to_dense())


def test_scale_invariance():
    """A matrix with entries ~1e5 fits as well as its normalised copy (relative error)."""
    rng = np.random.default_rng(1)
    X = (rng.random((24, 24)) < 0.15).astype(float)
    # No time limit: on a busy machine a clock-cut probe would make the two runs differ.
    small = ChordSF(max_iter=300, time_limit=None, device="cpu").fit(X)
    large = ChordSF(max_iter=300, time_limit=None, device="cpu").fit(X * 1e5)
    assert large.rel_error_ == pytest.approx(small.rel_error_, rel=1e-6)
    assert large.fro_error_ == pytest.approx(small.fro_error_ * 1e5, rel=1e-6)


def test_result_attributes_and_stop_reason():
    X = np.random.default_rng(2).random((20, 20))
    sf = ChordSF(max_iter=25, init="reference", device="cpu").fit(X)
    assert sf.stop_reason_ == "max_iter" and sf.n_iter_ == 25 and sf.init_ == "reference"
    assert len(sf.loss_curve_) == 26 and sf.loss_curve_[-1] <= sf.loss_curve_[0]
    assert sf.n_evals_ >= 25
    assert sf.device_ == "cpu" and sf.dtype_ == "float64"
    assert sf.fro_error_ == pytest.approx(np.linalg.norm(X - sf.to_dense()))
    assert sf.fro_error_ == pytest.approx(np.sqrt(2 * sf.loss_curve_[-1]), rel=1e-8)


def test_convergence_warning_names_the_knob():
    with pytest.warns(ConvergenceWarning, match="increase max_iter"):
        with warnings.catch_warnings():
            warnings.simplefilter("always", ConvergenceWarning)
            ChordSF(max_iter=2, device="cpu").fit(np.random.default_rng(0).random((10, 10)))


@pytest.mark.parametrize("fit", [lambda X: ChordSF(max_iter=2, device="cpu").fit(X),
                                 lambda X: fit_sf(X, max_iter=2, device="cpu"),
                                 # (progress=True calls fit_matrix again inside its display: api.py's line was named)
                                 lambda X: fit_matrix(X, max_iter=2, device="cpu", progress=True)],
                         ids=["ChordSF.fit", "fit_sf", "fit_matrix progress"])
def test_convergence_warning_points_at_the_callers_line(fit):
    # a notebook showed "sfapprox/sf/model.py:582: ConvergenceWarning" and sfapprox's line under the
    # cell; the README promises the user's own line, whatever the entry point's depth
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        fit(np.random.default_rng(0).random((10, 10)))
    said = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert said and all(w.filename == __file__ for w in said), [(w.filename, w.lineno) for w in said]


def test_seeded():
    X = np.random.default_rng(3).random((16, 16))
    a = ChordSF(max_iter=20, random_state=5, device="cpu").fit(X)
    b = ChordSF(max_iter=20, random_state=5, device="cpu").fit(X)
    c = ChordSF(max_iter=20, random_state=6, device="cpu").fit(X)
    assert np.array_equal(a.factors_, b.factors_)
    assert not np.array_equal(a.factors_, c.factors_)


def test_interrupt_keeps_best_factors():
    X = np.random.default_rng(4).random((16, 16))
    seen = []

    def stop_on_fifth(info):
        seen.append(info["fro_error"])
        if info["iteration"] == 5:
            raise KeyboardInterrupt

    sf = ChordSF(max_iter=100, device="cpu", callback=stop_on_fifth).fit(X)
    assert sf.stop_reason_ == "interrupted"
    assert sf.fro_error_ == pytest.approx(min(seen), rel=1e-8)


def test_zero_matrix_and_tiny_sizes():
    sf = ChordSF(device="cpu").fit(np.zeros((7, 7)))
    assert sf.fro_error_ == 0.0 and sf.rel_error_ is None and sf.stop_reason_ == "zero_matrix"
    assert not np.isnan(sf.factors_).any()
    one = ChordSF(device="cpu", max_iter=50).fit(np.array([[3.0]]))
    assert one.fro_error_ < 1e-8
    two = ChordSF(device="cpu", max_iter=200).fit(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert two.fro_error_ < 1e-6


def test_float32():
    X = _planted(16, seed=2)
    sf = ChordSF(max_iter=500, device="cpu", dtype="float32").fit(X)
    assert sf.dtype_ == "float32" and sf.rel_error_ < 1e-2


def test_bad_parameters_and_devices():
    X = np.eye(8)
    with pytest.raises(ParameterError, match="'max_iter' parameter of ChordSF must be an int"):
        ChordSF(max_iter=-1).fit(X)
    with pytest.raises(ParameterError, match="cannot cover every entry"):
        ChordSF(n_factors=1, device="cpu").fit(X)
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="no CUDA GPU"):
            ChordSF(device="cuda").fit(X)


def test_memory_guard_refuses_before_allocating():
    with pytest.raises(ResourceError, match="max_memory= if"):
        ChordSF(device="cpu", max_memory=10_000).fit(np.eye(64))


def test_fit_sf_function_form():
    sf = fit_sf(np.eye(8), max_iter=10, device="cpu")
    assert isinstance(sf, ChordSF) and sf.n_iter_ <= 10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu():
    X = _planted(32, seed=3)
    # A few iterations follow the same path to rounding; over 200 the rounding of another BLAS
    # moves L-BFGS's path (measured on an H100: 0.4 % apart, the GPU's the lower), not its quality.
    cpu = ChordSF(max_iter=10, device="cpu").fit(X)
    gpu = ChordSF(max_iter=10, device="cuda", dtype="float64").fit(X)
    assert gpu.fro_error_ == pytest.approx(cpu.fro_error_, rel=1e-6)
    cpu = ChordSF(max_iter=200, device="cpu").fit(X)
    gpu = ChordSF(max_iter=200, device="cuda", dtype="float64").fit(X)
    assert gpu.fro_error_ == pytest.approx(cpu.fro_error_, rel=0.05)


def test_symmetric_support_fits_with_fewer_factors():
    X = np.random.default_rng(7).random((24, 24))
    sf = ChordSF(support="symmetric", max_iter=50, device="cpu").fit(X)
    assert sf.factors_.shape == (3, 24, 9) and sf.n_stored_ == 3 * 24 * 9
    assert np.allclose(sf.to_dense(), sf.operator_.to_dense())
    with pytest.raises(ParameterError, match="'support' parameter"):
        ChordSF(support="hexagonal").fit(X)


def test_auto_init_probes_both_starts_within_the_iteration_budget():
    X = np.random.default_rng(7).random((24, 24))
    seen = []
    sf = ChordSF(max_iter=40, probe=0.25, device="cpu", callback=lambda info: seen.append(info["iteration"])).fit(X)
    # 10 iterations per probe, the winner continues: 40 in all, counted once each.
    assert sf.n_iter_ == 40 and sf.init_ in ("reference", "identity")
    assert seen == list(range(1, 41))
    alone = {
        name: ChordSF(max_iter=10, init=name, device="cpu").fit(X).fro_error_ for name in ("reference", "identity")
    }
    # The winner is the start that was better after its probe, and continuing only helps.
    assert sf.init_ == min(alone, key=alone.get)
    assert sf.fro_error_ <= min(alone.values()) + 1e-12


def test_callback_stop_during_a_probe_ends_the_fit():
    X = np.random.default_rng(8).random((16, 16))
    sf = ChordSF(max_iter=100, device="cpu", callback=lambda info: info["iteration"] >= 3).fit(X)
    assert sf.stop_reason_ == "callback" and sf.n_iter_ == 3


def test_auto_init_race_drops_a_clearly_worse_start_early():
    """On a 2-D grid Laplacian the identity start is far ahead after the first round: the
    reference start stops there instead of using its whole probe share (10% of max_iter)."""
    from sfapprox.sf._multistart import FIRST as PROBE_FIRST
    from sfapprox.sf._multistart import MARGIN as PROBE_MARGIN

    grid = _grid_laplacian(6)
    sf = ChordSF(max_iter=3000, time_limit=None, device="cpu").fit(grid)
    assert sf.init_ == "identity"
    assert sf.starts_["reference"]["iterations"] == PROBE_FIRST
    assert sf.starts_["identity"]["iterations"] == sf.n_iter_ - PROBE_FIRST
    assert sf.starts_["reference"]["fro_error"] > PROBE_MARGIN * sf.fro_error_
    # Where the starts stay within the margin, each gets its whole share (as test above).
    close = ChordSF(max_iter=40, probe=0.25, device="cpu").fit(np.random.default_rng(7).random((24, 24)))
    assert {v["iterations"] for v in close.starts_.values()} >= {10}


def test_a_race_of_slow_iterations_is_judged_by_time_but_never_before_its_least_iterations(fake_clock, monkeypatch):
    """When iterations are slow (large N), a round ends on its share of the probe time: with one
    "second" per evaluation and a 400 s limit (a 40 s probe share, rounds of 5 s, 10 s, ...) the
    worse start leaves after MIN_ITER iterations, not after 100."""
    from sfapprox.sf._multistart import MIN_ITER

    _one_second_evaluations(fake_clock, monkeypatch)
    grid = _grid_laplacian(6)
    sf = ChordSF(max_iter=10**6, time_limit=400.0, device="cpu").fit(grid)
    assert sf.init_ == "identity" and sf.starts_["reference"]["iterations"] == MIN_ITER
    assert sf.starts_["identity"]["iterations"] > 100  # the winner had the rest of the time


def test_a_race_that_cannot_be_judged_in_its_share_is_not_run(fake_clock, monkeypatch):
    """One "second" per evaluation and a 100 s limit: a start's 10 s probe share holds fewer than
    MIN_ITER iterations (plus the first line search's evaluations), so the starts cannot be judged;
    the identity start runs alone from the first evaluation on, and the other start never runs."""
    from sfapprox.sf._multistart import FIRST_SEARCH, MIN_ITER, PREFERRED

    from sfapprox.sf import _multistart

    _one_second_evaluations(fake_clock, monkeypatch)
    steps = []
    real = _multistart.lbfgs
    monkeypatch.setattr(_multistart, "lbfgs", lambda fun, st, opts, cb=None: steps.append(opts.first_step)
                        or real(fun, st, opts, cb))
    X = np.random.default_rng(3).random((20, 20))
    sf = ChordSF(max_iter=10**6, time_limit=100.0, device="cpu").fit(X)
    assert sf.init_ == PREFERRED == "identity" and list(sf.starts_) == ["identity"]
    assert sf.n_evals_ > 50 and sf.starts_["identity"]["iterations"] == sf.n_iter_
    assert steps == ["polyak"]  # evaluations are what it lacks: the first step that takes fewest
    steps.clear()
    # With a share that holds them (40 s), the race runs as before (both starts, MIN_ITER at least).
    assert (MIN_ITER + FIRST_SEARCH) * 1.0 < 0.1 * 400.0 - 10
    raced = ChordSF(max_iter=10**6, time_limit=400.0, device="cpu").fit(X)
    assert set(raced.starts_) == {"reference", "identity"}
    assert min(v["iterations"] for v in raced.starts_.values()) >= MIN_ITER
    assert set(steps) == {"gradient"}  # a race, and what follows it, keep torch's first step


def test_a_start_alone_with_no_time_for_a_step_is_scaled_to_its_best_multiple(fake_clock, monkeypatch):
    """One "second" per evaluation and 3.5 s: the start is evaluated, no step fits, and the fit
    returns the identity start scaled by its product's best multiple (lower than the start itself)."""
    from sfapprox.operators import ChordOperator
    from sfapprox.sf._multistart import start_values

    _one_second_evaluations(fake_clock, monkeypatch)
    X = np.random.default_rng(3).random((20, 20))
    sf = ChordSF(max_iter=10**6, time_limit=3.5, device="cpu").fit(X)
    assert sf.n_iter_ == 0 and sf.init_ == "identity"
    start = start_values(["identity"], sf.random_state, sf.factors_.shape)["identity"]
    P = ChordOperator(start, sf.offsets_).to_dense()
    c = float((X * P).sum() / (P * P).sum())
    assert sf.fro_error_ == pytest.approx(np.linalg.norm(X - c * P), rel=1e-9)
    assert sf.fro_error_ < np.linalg.norm(X - P)
    assert np.allclose(sf.factors_, start * c ** (1 / start.shape[0]))


@pytest.mark.parametrize("n", [64, 512])
def test_memory_estimate_covers_what_a_fit_allocates(tmp_path, n):
    """The estimate checked against max_memory is at least what the fit really allocates (peak RSS):
    at N = 64 the compiled iterations are compiled too, at 512 the kernel runs in groups."""
    import json
    import subprocess
    import sys

    code = (
        "import json, numpy as np, torch, sfapprox\n"
        "def st(k):\n"
        "    return next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith(k + ':'))\n"
        "from sfapprox.sf.model import estimate_fit_memory\n"
        "from sfapprox.chord import chord_offsets, default_n_factors\n"
        f"n = {n}\n"
        "base = st('VmRSS')\n"
        "X = np.random.default_rng(0).random((n, n))\n"
        "sfapprox.ChordSF(max_iter=3, time_limit=None, device='cpu').fit(X)\n"
        "est = estimate_fit_memory(n, default_n_factors(n), len(chord_offsets(n)), 8, 50, 'cpu',\n"
        "                          reach=int(chord_offsets(n).max()), n_starts=2, input_bytes=X.nbytes)\n"
        "print(json.dumps({'used': st('VmHWM') - base, 'estimate': est}))\n"
    )
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux) to read the peak resident memory")
    # An empty numba cache: the first fit after installing compiles the kernels, the costliest case.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 < out["used"] <= out["estimate"], out


def test_memory_estimate_counts_the_pairs_as_stored(monkeypatch):
    """The L-BFGS pairs count at the bytes the solver stores them in: float32 on the CPU where the
    compiled products run (PAIRS_DTYPE), the fit's dtype otherwise."""
    from sfapprox.sf import _solver
    from sfapprox.sf.model import estimate_fit_memory

    n, m, k = 1024, 10, 11

    def history_bytes(device: str) -> int:
        def est(h):
            return estimate_fit_memory(n, m, k, 8, h, device, n_starts=2)
        return est(50) - est(0)

    per_value = 2 * 2 * 50 * n * k * m  # two starts, 2 x 50 pairs of N K M values
    compiled = _solver._host_math() is not _solver._NumpyHost
    assert history_bytes("cpu") == per_value * (4 if compiled else 8)
    assert history_bytes("cuda") == per_value * 8
    monkeypatch.setattr(_solver, "PAIRS_DTYPE", None)
    assert history_bytes("cpu") == per_value * 8


def test_the_time_limit_covers_the_fit_and_leaves_its_scoring_time(fake_clock, monkeypatch):
    # Every loss evaluation "takes" 1 s on the fake clock.  The optimizer gets the limit less the
    # setup and SCORING_EVALS evaluations' worth, and starts no evaluation that would pass that.
    from sfapprox.sf.model import SCORING_EVALS, optimizer_time_limit

    _one_second_evaluations(fake_clock, monkeypatch)
    X = np.random.default_rng(0).random((24, 24))
    sf = ChordSF(time_limit=8.0, init="reference", max_iter=10**6, device="cpu").fit(X)
    assert sf.stop_reason_ == "time_limit" and sf.n_evals_ >= 2
    assert fake_clock.time <= 8.0 - SCORING_EVALS
    assert optimizer_time_limit(8.0, 1.0, 1.0) == 8.0 - 1.0 - SCORING_EVALS


def test_a_fit_checkpointing_to_a_file_another_process_fits_to_refuses_before_any_work(tmp_path, monkeypatch):
    """ChordSF(checkpoint=F) from Python took no lock (the CLI and fit_matrix(out=F) do): two notebook
    kernels checkpointing to one file each replaced the other's checkpoints.  A fit whose checkpoint another
    process holds refuses before reading X, naming the holder; where this process holds it already
    (fit_matrix's out=) the fit nests in that hold; alone, it holds the lock for the fit and leaves no file."""
    import subprocess
    import sys
    import textwrap

    from sfapprox._output_lock import OutputBusyError, output_lock, output_lock_files
    from sfapprox.sf import model

    X = np.random.default_rng(3).random((24, 24))
    path = tmp_path / "ck.h5"
    lock_file, holder_file = output_lock_files(path)
    hold = textwrap.dedent("""
        import sys, time
        from sfapprox._output_lock import output_lock
        with output_lock(sys.argv[1]):
            print("locked", flush=True)
            time.sleep(60)
    """)
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    holder = subprocess.Popen([sys.executable, "-c", hold, str(path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "locked"
        read = []
        real = model.ChordSF._validate
        monkeypatch.setattr(model.ChordSF, "_validate", lambda self, *a: read.append(1) or real(self, *a))
        with pytest.raises(OutputBusyError, match=rf"ck\.h5: is being written by another run \(pid {holder.pid}\b"):
            ChordSF(max_iter=5, checkpoint=path, checkpoint_every=0.0, device="cpu").fit(X)
        assert not read and not path.exists()  # X not even looked at, nothing written
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    with output_lock(path):  # the caller's hold (fit_matrix's): the fit nests in it, and leaves it held
        ChordSF(max_iter=5, checkpoint=path, checkpoint_every=0.0, device="cpu").fit(X)
        assert path.exists() and lock_file.exists() and holder_file.exists()
    assert not lock_file.exists() and not holder_file.exists()
    seen = []
    ChordSF(max_iter=5, checkpoint=path, checkpoint_every=0.0, device="cpu",
            callback=lambda info: seen.append(lock_file.exists())).fit(X)
    assert seen and all(seen) and not lock_file.exists()  # held while it ran, removed at its end


def test_checkpoints_and_resuming_from_them(tmp_path, fake_clock):
    """Every checkpoint_every seconds the best factors are saved; init=<file> starts exactly there."""
    from sfapprox import load_factors

    X = np.random.default_rng(3).random((24, 24))
    path = tmp_path / "ck.h5"
    ticks = []

    def tick(info):
        fake_clock.advance(1.0)  # one "second" per iteration
        ticks.append(info["iteration"])

    first = ChordSF(max_iter=30, time_limit=None, checkpoint=path, checkpoint_every=10.0, callback=tick,
                    init="reference", device="cpu").fit(X)
    saved = load_factors(path)
    assert saved.fit["checkpoint"] and saved.fit["iterations"] in (10, 20, 30)  # the last one written
    assert saved.fit["fro_error"] >= first.fro_error_ - 1e-9
    resumed = ChordSF(max_iter=3, time_limit=None, init=path, device="cpu").fit(X)
    assert resumed.init_ == "saved" and resumed.starts_["saved"]["iterations"] == 3
    start_error = np.sqrt(2 * resumed.loss_curve_[0])
    assert start_error == pytest.approx(saved.fit["fro_error"], rel=1e-9)  # it starts where the file left off
    assert resumed.fro_error_ <= start_error
    with pytest.raises(ParameterError, match="factors; this fit.s are .* and 6; fit with support='chord', base=2, n_factors=5$"):
        ChordSF(n_factors=6, init=path, device="cpu").fit(X)
    with pytest.raises(ParameterError, match=r"init: factor values of shape 2 x 24 x 6"):
        ChordSF(init=np.ones((2, 24, 6)), device="cpu").fit(X)


def test_large_fits_on_the_cpu_run_in_float32_unless_asked(monkeypatch):
    """From SF_FLOAT32_MIN_N (4,096; lowered here) a default fit runs in float32; below it, or with a
    dtype asked for, as asked; the factors and the error stay float64."""
    from sfapprox.sf import model

    monkeypatch.setattr(model, "SF_FLOAT32_MIN_N", 30)
    X = np.random.default_rng(4).random((32, 32))
    large = ChordSF(max_iter=20, time_limit=None, device="cpu").fit(X)
    assert large.dtype_ == "float32" and large.factors_.dtype == np.float64
    asked = ChordSF(max_iter=20, time_limit=None, device="cpu", dtype="float64").fit(X)
    small = ChordSF(max_iter=20, time_limit=None, device="cpu").fit(X[:24, :24])
    assert asked.dtype_ == "float64" and small.dtype_ == "float64"
    assert large.rel_error_ == pytest.approx(asked.rel_error_, rel=1e-3)


@pytest.mark.parametrize("support", ["chord", "symmetric"])
def test_product_error_is_frobenius_error_of_the_product(support):
    """What a GPU fit scores itself with (the product formed on its device), here on the CPU's torch."""
    from sfapprox.sf.model import product_error_and_multiple

    sf = ChordSF(support=support, max_iter=20, device="cpu").fit(_planted(48, seed=4))
    X = _planted(48, seed=5)
    fro = float(np.linalg.norm(X))
    err, rel = product_error_and_multiple(sf.factors_, sf.offsets_, X, fro, torch.device("cpu"))[:2]
    ref = frobenius_error(X, sf.to_dense(), fro)
    assert err == pytest.approx(ref[0], rel=1e-12) and rel == pytest.approx(ref[1], rel=1e-12)
    sparse_err = product_error_and_multiple(sf.factors_, sf.offsets_, scipy.sparse.csr_array(X), fro,
                                            torch.device("cpu"))[0]
    assert sparse_err == pytest.approx(err, rel=1e-12)
    # and the best multiple's sums, from the same product (a GPU fit's multiple needs no second one)
    *errors, inner, square = product_error_and_multiple(sf.factors_, sf.offsets_, X, fro, torch.device("cpu"))
    P = sf.to_dense()
    assert errors == [err, rel] and inner == pytest.approx(np.vdot(X, P), rel=1e-12)
    assert square == pytest.approx(np.vdot(P, P), rel=1e-12)


def test_a_kernel_that_compiles_on_its_first_launch_is_timed_on_its_second(monkeypatch):
    """The fused GPU kernel compiles when first launched: the time kept back for scoring is
    two evaluations' worth, not two compiles' worth (here a CPU stand-in named "triton")."""
    import time as _time

    from sfapprox.sf import _kernels
    from sfapprox.sf import model as model_module

    calls = []

    def compiling(ws, offsets, X):
        if not calls:
            _time.sleep(1.0)  # the compile
        calls.append(1)
        return _kernels.loss_and_grad(ws, offsets, X)

    seen = []
    real_limit = model_module.optimizer_time_limit
    monkeypatch.setattr(_kernels, "select_kernel", lambda n, device_type: (compiling, "triton"))
    monkeypatch.setattr(model_module, "optimizer_time_limit",
                        lambda limit, spent, eval_seconds: seen.append(eval_seconds) or real_limit(limit, spent, eval_seconds))
    sf = ChordSF(max_iter=3, init="identity", time_limit=60, device="cpu", dtype="float64").fit(_planted(40, seed=2))
    assert sf.kernel_ == "triton" and seen and seen[0] < 0.5


def test_first_timed_evaluation_holds_no_compiling(monkeypatch):
    """The compiled kernel's first call (seconds of compiling on a fresh install, a sleep here) is made
    before the fit times its first evaluation, which decides whether the starts can race: the race
    still runs.  Timed with the compiling in it, the evaluation looked too slow to race and the README's
    first fit ran the preferred start alone on its first run (rel 0.1949 against 0.1808 after)."""
    import time

    from sfapprox.sf import _kernels

    if _kernels.select_kernel(32, "cpu")[1] != "numba":
        pytest.skip("needs numba")
    real, calls = _kernels.loss_and_grad_numba, []

    def compiling_first(*args):
        if not calls:
            time.sleep(0.5)
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_kernels, "loss_and_grad_numba", compiling_first)
    X = np.random.default_rng(5).random((32, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sf = ChordSF(time_limit=10, max_iter=300, device="cpu").fit(X)
    # (the kernel's later calls are made from the compiled iterations, not through this name)
    assert set(sf.starts_) == {"reference", "identity"} and calls and sf.n_iter_ > 50


def test_compiling_on_first_use_is_not_the_fits_time(monkeypatch):
    """The kernels' compiling (once per install: seconds, a sleep here) is not counted in the time
    limit: with time_limit=1 a first fit ended at its start (0 iterations), the compiling had taken it."""
    import time

    from sfapprox.sf import _kernels

    if _kernels.select_kernel(32, "cpu")[1] != "numba":
        pytest.skip("needs numba")
    real = _kernels.warm_up_numba
    monkeypatch.setattr(_kernels, "warm_up_numba", lambda dtype: (time.sleep(1.2), real(dtype)))
    X = np.random.default_rng(6).random((32, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sf = ChordSF(time_limit=1.0, device="cpu").fit(X)
    assert sf.n_iter_ > 10 and sf.rel_error_ < 0.9


@pytest.mark.parametrize("init", ["bogus", "Auto", Path("no/such/fit.h5")])
def test_an_init_that_is_neither_a_named_start_nor_a_file_lists_the_valid_ones(init):
    # not "bogus: no such file" from reading it as a factors file: say what init may be
    X = np.random.default_rng(0).random((16, 16))
    with pytest.raises(ParameterError, match=r"^init must be 'auto', 'reference', 'identity' or 'rank1', an array of factor "
                       r"values or an existing factors file \(\.h5\); '.*' is neither \(no such file\)$"):
        ChordSF(init=init, device="cpu").fit(X)


def test_an_init_directory_is_refused_as_one(tmp_path):
    with pytest.raises(ParameterError, match=r"is neither \(a directory\)"):
        ChordSF(init=tmp_path, device="cpu").fit(np.eye(16))


def test_an_init_file_that_exists_is_still_read_as_factors(tmp_path):
    from sfapprox import InputError

    path = tmp_path / "not_factors.h5"
    path.write_text("not hdf5")
    with pytest.raises(InputError, match="not_factors.h5: not an HDF5 file"):  # load_factors's words
        ChordSF(init=path, max_iter=1, device="cpu").fit(np.random.default_rng(0).random((16, 16)))


def test_max_iter_0_makes_no_iteration_even_with_two_starts():
    """--iters 0 with init auto raced the starts all the same (2 iterations, 6 evaluations, other factors)."""
    X = np.random.default_rng(7).standard_normal((32, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sf = ChordSF(max_iter=0, time_limit=None, device="cpu").fit(X)
        ref = ChordSF(max_iter=0, time_limit=None, device="cpu", init="reference").fit(X)
        ident = ChordSF(max_iter=0, time_limit=None, device="cpu", init="identity").fit(X)
    assert sf.n_iter_ == 0 and sf.n_evals_ == 2
    assert sf.rel_error_ == pytest.approx(min(ref.rel_error_, ident.rel_error_), rel=1e-12)


@pytest.mark.parametrize("max_iter", [1, 2, 3, 7, 25])
def test_two_starts_make_no_more_iterations_than_max_iter(max_iter):
    """max_iter=1 with init auto made two iterations (one per start of the race)."""
    X = np.random.default_rng(7).standard_normal((24, 24))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sf = ChordSF(max_iter=max_iter, time_limit=None, device="cpu").fit(X)
    assert sf.n_iter_ == max_iter
    if max_iter < 2:  # no race: the better start as evaluated took the iteration
        assert set(sf.starts_) == {"reference", "identity"} and sum(v["iterations"] for v in sf.starts_.values()) == 1


def test_a_callback_sees_every_iteration_unless_it_is_coarse():
    """Small CPU fits iterate in compiled code: a user's callback is still called after every iteration
    (its ``iteration`` goes up by one); one marked ``coarse`` (a progress display, as the CLI's) is
    called once per compiled run of iterations.  The fit is the same to the bit."""
    X = np.random.default_rng(11).random((24, 24))
    every = []
    a = ChordSF(max_iter=120, device="cpu", random_state=0, callback=lambda info: every.append(info["iteration"])).fit(X)
    assert every == list(range(1, a.n_iter_ + 1))

    def coarse(info):
        coarse.seen.append(info["iteration"])

    coarse.seen, coarse.coarse = [], True
    b = ChordSF(max_iter=120, device="cpu", random_state=0, callback=coarse).fit(X)
    assert np.array_equal(a.factors_, b.factors_) and b.n_iter_ == a.n_iter_
    if a.kernel_ == "numba":
        assert len(coarse.seen) < len(every) / 4 and coarse.seen[-1] == b.n_iter_


def test_parameters_that_would_fail_mid_fit_are_refused_before_it(tmp_path):
    X = np.random.default_rng(0).standard_normal((16, 16))
    calls = []
    with pytest.raises(ParameterError, match=r"range \(0, inf\)"):
        ChordSF(scale=0, max_iter=5, device="cpu").fit(X)  # a ZeroDivisionError before
    with pytest.raises(ParameterError, match="must be a callable or None"):
        ChordSF(callback=3, max_iter=5, device="cpu").fit(X)  # a TypeError at the first iteration before
    # a checkpoint that could never be written: the first one came after checkpoint_every seconds and
    # failed there, or a short fit wrote none and said nothing
    with pytest.raises(ParameterError, match="folder .*missing does not exist"):
        ChordSF(max_iter=5, device="cpu", checkpoint=tmp_path / "missing" / "x.h5", callback=calls.append).fit(X)
    with pytest.raises(ParameterError, match="is a folder"):
        ChordSF(max_iter=5, device="cpu", checkpoint=tmp_path, callback=calls.append).fit(X)
    assert calls == []


def test_a_memory_message_names_the_matrix_held_beside_the_fit():
    X = np.random.default_rng(0).standard_normal((32, 32))
    with pytest.raises(ResourceError, match=r"beside the matrix held in memory \(8\.0 KiB\), over the memory "
                                            r"limit of 1000 B"):
        ChordSF(max_iter=5, device="cpu", max_memory=1000).fit(X)  # it said "(999 B)": the limit less one byte


# ------------------------------------------------------------------------------ the rank-one start
def _near_rank_one(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.outer(1 + rng.random(n), 1 + rng.random(n)) + 0.05 * rng.standard_normal((n, n))


def test_the_named_starts_are_the_cli_s():
    from sfapprox._settings import SF_NAMED_INITS
    from sfapprox.sf._multistart import RANK_ONE, START_KINDS
    from sfapprox.sf.model import NAMED_INITS

    assert NAMED_INITS == SF_NAMED_INITS == ("auto", *START_KINDS, RANK_ONE)


def test_a_rank_one_fit_with_no_time_returns_the_best_rank_one_approximation():
    """max_iter=0 returns the start: for N a power of two its product is s1 u1 v1^T exactly."""
    X = _near_rank_one(64)
    with pytest.warns(ConvergenceWarning):
        sf = ChordSF(init="rank1", max_iter=0, time_limit=None, device="cpu").fit(X)
    U, s, Vt = np.linalg.svd(X)
    assert sf.init_ == "rank1" and sf.n_iter_ == 0
    np.testing.assert_allclose(sf.to_dense(), s[0] * np.outer(U[:, 0], Vt[0]), atol=1e-9 * s[0])
    assert sf.rel_error_ == pytest.approx(np.sqrt(1 - s[0] ** 2 / (s ** 2).sum()), rel=1e-6)
    # with no time at all its top pair has no power iteration: near, not exact
    quick = ChordSF(init="rank1", time_limit=0, device="cpu").fit(X)
    assert quick.n_iter_ == 0 and sf.rel_error_ <= quick.rel_error_ < 1.5 * sf.rel_error_


def test_auto_races_the_rank_one_start_as_a_third_where_it_is_far_ahead():
    near = ChordSF(max_iter=300, time_limit=None, device="cpu").fit(_near_rank_one(64))
    assert set(near.starts_) == {"reference", "identity", "rank1"} and near.init_ == "rank1"
    # a sparse graph is hardly nearer rank one than constant: the usual race
    graph = (np.random.default_rng(1).random((64, 64)) < 0.05).astype(float)
    usual = ChordSF(max_iter=300, time_limit=None, device="cpu").fit(graph)
    assert set(usual.starts_) == {"reference", "identity"}


def test_the_rank_one_start_asked_for_beats_the_usual_starts_on_a_smooth_kernel():
    """The RBF kernel of sorted points: its rank-one error (0.67) is hardly a constant's (0.70), so
    auto does not race it, yet the fit from it ends several times lower: init="rank1" is there for that."""
    from sfapprox import KernelMatrix

    X = KernelMatrix(np.linspace(0, 4, 128)[:, None], bandwidth=0.7).to_dense()
    ranked = ChordSF(init="rank1", max_iter=400, time_limit=None, device="cpu").fit(X)
    usual = ChordSF(max_iter=400, time_limit=None, device="cpu").fit(X)
    assert set(usual.starts_) == {"reference", "identity"}
    assert ranked.rel_error_ < 0.5 * usual.rel_error_


def test_no_room_for_a_third_state_races_the_usual_two(monkeypatch):
    from sfapprox.sf import model

    real = model.estimate_fit_memory
    monkeypatch.setattr(model, "estimate_fit_memory",
                        lambda *a, n_starts=1, **k: real(*a, n_starts=n_starts, **k) * (100 if n_starts > 2 else 1))
    limit = real(64, 6, 7, 8, 50, "cpu", n_starts=2, input_bytes=64 * 64 * 8) * 10
    sf = ChordSF(max_iter=50, time_limit=None, device="cpu", max_memory=limit).fit(_near_rank_one(64))
    assert set(sf.starts_) == {"reference", "identity"}


@pytest.mark.parametrize("params", [{"support": "butterfly"}, {"base": 3}])
def test_rank1_where_the_support_cannot_hold_it_is_refused_before_the_fit(params):
    with pytest.raises(ParameterError, match="init='rank1' needs the offsets 1, 2, 4") as refused:
        ChordSF(init="rank1", device="cpu", **params).fit(_near_rank_one(64))
    # the alternatives as a Python caller passes them, not as typed (--init auto)
    assert str(refused.value).endswith("use init='auto', init='reference' or init='identity'")
    # auto races the usual starts there
    assert set(ChordSF(max_iter=20, time_limit=None, device="cpu", **params).fit(_near_rank_one(64)).starts_) <= \
        {"reference", "identity"}


def test_a_zero_matrix_with_the_rank_one_start_is_zero_factors():
    sf = ChordSF(init="rank1", device="cpu").fit(np.zeros((16, 16)))
    assert sf.stop_reason_ == "zero_matrix" and not sf.factors_.any()


def test_where_no_race_can_be_afforded_the_rank_one_start_let_in_runs_alone(fake_clock, monkeypatch):
    """One "second" per evaluation: the race is not affordable, and the start let in far ahead of the
    others runs alone (the identity start ran alone instead: 0.86 against 0.05 at N = 1,024 in 1 s)."""
    _one_second_evaluations(fake_clock, monkeypatch)
    sf = ChordSF(max_iter=10**6, time_limit=20, device="cpu").fit(_near_rank_one(64))
    assert sf.init_ == "rank1" and sf.starts_["rank1"]["iterations"] > 0
    assert sf.starts_.get("identity", {"iterations": 0})["iterations"] == 0  # evaluated once, to time it
    plain = ChordSF(max_iter=10**6, time_limit=20, device="cpu").fit(
        (np.random.default_rng(1).random((64, 64)) < 0.05).astype(float))
    assert plain.init_ == "identity"  # where it was not let in: the preferred start, as before


def test_a_saved_start_whose_product_overflows_is_refused(tmp_path):
    """Finite values of 1e300 whose product overflows: the fit ended at once, "ok" with an infinite error,
    exit 0.  Refused before any work."""
    from sfapprox import ParameterError, save_factors
    from sfapprox.chord import chord_offsets
    from sfapprox.operators import ChordOperator

    offs = chord_offsets(16, 2)
    X = np.random.default_rng(0).random((16, 16))
    path = tmp_path / "huge.h5"
    save_factors(path, ChordOperator(np.full((4, 16, offs.size), 1e300), offs))
    with pytest.raises(ParameterError, match=r"the factors' product overflows .* not a start"):
        ChordSF(init=path, max_iter=5, device="cpu").fit(X)
    save_factors(tmp_path / "fine.h5", ChordOperator(np.full((4, 16, offs.size), 0.3), offs))
    assert ChordSF(init=tmp_path / "fine.h5", max_iter=5, device="cpu").fit(X).init_ == "saved"


def test_a_saved_start_whose_product_is_zero_is_refused(tmp_path):
    """The saved fit of a zero matrix (zero factors) as a start: its gradient is zero, and the fit stopped at
    once, "gtol" with relative error 1, exit 0, in memory and from columns alike.  Refused before any work."""
    from sfapprox import save_factors

    X = np.random.default_rng(0).random((16, 16))
    zero = ChordSF(device="cpu").fit(np.zeros((16, 16)))
    path = tmp_path / "zero.h5"
    save_factors(path, zero)
    with pytest.raises(ParameterError, match=r"zero\.h5'.*product is the zero matrix.* not a start"):
        ChordSF(init=path, max_iter=5, device="cpu").fit(X)
    with pytest.raises(ParameterError, match=r"product is the zero matrix"):
        ChordSF(init=np.zeros_like(zero.factors_), max_iter=5, device="cpu").fit(X)


def test_a_fit_ending_further_from_x_than_zero_is_handed_back_at_its_best_multiple():
    """Stopped at its start (no iteration), a product far from X (rel 1.53 was recorded "ok"): handed back
    at its best multiple, never worse than storing nothing, as a fit from columns is."""
    from sfapprox.operators import ChordOperator

    X = -np.random.default_rng(0).random((16, 16)) - 1.0  # every entry negative
    values = np.abs(ChordSF(max_iter=0, device="cpu", init="identity").fit(X).factors_) * 3.0
    start = ChordOperator(values, ChordSF(device="cpu").fit(X).offsets_).to_dense()
    assert np.linalg.norm(X - start) > 1.2 * np.linalg.norm(X)  # the start: further than zero
    est = ChordSF(max_iter=0, time_limit=None, device="cpu", init=values).fit(X)
    assert est.params_["best_multiple"] < 0 and est.n_iter_ == 0
    assert est.rel_error_ <= 1.0 and est.rel_error_ == pytest.approx(np.linalg.norm(X - est.to_dense()) / np.linalg.norm(X))


def _product_passes(monkeypatch) -> list[float]:
    """Passes over the fitted product (each over X beside it) that the scoring makes, counted in a list of one
    number: a whole ``to_dense`` counts 1, columns read by the block scoring count their share of ``N``."""
    from sfapprox import metrics
    from sfapprox.operators import ChordOperator

    passes = [0.0]
    formed, columns = ChordOperator.to_dense, metrics._identity_columns

    def counted_dense(self, *args, **kwargs):
        passes[0] += 1.0
        return formed(self, *args, **kwargs)

    def counted_columns(operator, J, n):
        passes[0] += J.size / n
        return columns(operator, J, n)

    monkeypatch.setattr(ChordOperator, "to_dense", counted_dense)
    monkeypatch.setattr(metrics, "_identity_columns", counted_columns)
    return passes


@pytest.mark.parametrize("support", ["chord", "symmetric"])
@pytest.mark.parametrize("blocks", [False, True])
def test_a_fit_handed_back_at_its_best_multiple_makes_no_second_pass(support, blocks, monkeypatch):
    """The best multiple and its error come from the scoring's own pass (<X, P> and ||P||^2 beside ||X - P||):
    at N = 8,192 two more passes (4.4-4.7 s, no time kept for them) made sf-symmetric's call 1.5 times its
    10-s limit.  The same passes as a fit that needs no multiple, in memory and by column blocks alike."""
    from sfapprox import metrics

    if blocks:  # the block scoring of N > 2,048, at N = 16
        monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 8)
    rng = np.random.default_rng(0)
    X = -rng.random((16, 16)) - 1.0  # every entry negative: a positive product is further than zero
    offsets = ChordSF(support=support, device="cpu").fit(X).offsets_
    values = np.abs(ChordSF(support=support, max_iter=0, device="cpu", init="identity").fit(X).factors_) * 3.0
    from sfapprox.operators import ChordOperator

    product = ChordOperator(values, offsets, support=support).to_dense()
    passes = _product_passes(monkeypatch)
    near = ChordSF(support=support, max_iter=0, time_limit=None, device="cpu", init=values).fit(1.01 * product)
    plain = passes[0]
    passes[0] = 0.0
    est = ChordSF(support=support, max_iter=0, time_limit=None, device="cpu", init=values).fit(X)
    assert "best_multiple" not in near.params_ and est.params_["best_multiple"] < 0
    assert plain >= 1 and passes[0] == plain  # (the old code: 2 more)
    monkeypatch.undo()
    direct = np.linalg.norm(X - ChordOperator(est.factors_, offsets, support=support).to_dense())
    assert est.fro_error_ == pytest.approx(direct, rel=1e-9)
    assert est.rel_error_ == pytest.approx(direct / np.linalg.norm(X), rel=1e-9) and est.rel_error_ <= 1.0


def test_a_best_multiple_near_x_is_scored_by_a_pass(monkeypatch):
    """Where the best multiple is nearly X its error from the sums (a difference of near-equal squares) has
    lost its digits: that one is scored by a pass, its error the product's own."""
    from sfapprox.operators import ChordOperator

    X = _planted(16, seed=3)
    offsets = ChordSF(device="cpu").fit(X).offsets_
    # the planted product itself, its first factor tripled: 3 X, exactly 3 times too large
    rng = np.random.default_rng(3)
    m = int(np.ceil(np.log2(16)))
    values = (1 + 0.3 * rng.standard_normal((m, 16, len(offsets)))) / len(offsets)
    assert np.allclose(ChordOperator(values, offsets).to_dense(), X)
    values[0] *= 3.0
    passes = _product_passes(monkeypatch)
    est = ChordSF(max_iter=0, time_limit=None, device="cpu", init=values).fit(X)
    assert est.params_["best_multiple"] == pytest.approx(1 / 3, abs=1e-6) and passes[0] == 2
    monkeypatch.undo()
    direct = np.linalg.norm(X - ChordOperator(est.factors_, offsets).to_dense())
    assert est.fro_error_ == pytest.approx(direct, rel=1e-6, abs=1e-14)


def test_a_saved_start_of_another_structure_says_which_options_give_it(tmp_path):
    from sfapprox import ParameterError, save_factors

    X = np.random.default_rng(0).random((40, 40))
    saved = ChordSF(base=3, max_iter=2, device="cpu").fit(X)
    path = tmp_path / "b3.h5"
    save_factors(path, saved.operator_)
    with pytest.raises(ParameterError, match=r"^init='.*b3.h5' has .*; fit with support='chord', base=3, "
                                             r"n_factors=\d+$"):
        ChordSF(max_iter=2, device="cpu", init=path).fit(X)
    assert ChordSF(base=3, max_iter=2, device="cpu", init=path).fit(X).init_ == "saved"


def test_a_saved_start_refused_under_a_budget_says_what_its_reader_can_run(tmp_path):
    """``fit --budget 255 --init s6.h5`` (a 6-factor fit, the budget's structure 5 factors) said "init='s6.h5'
    ...; fit with --support chord --base 2 --factors 6 (support='chord', base=2, n_factors=6)": both spellings
    to each reader, and options that --budget refuses beside it.  Each reader now gets its own spelling, and
    under a budget the hint drops it first; the Python hint, followed, fits."""
    from sfapprox import FitSettings, ParameterError, fit_matrix, save_factors
    from sfapprox._errors import spelled_for

    X = np.random.default_rng(0).standard_normal((16, 16))
    path = tmp_path / "s6.h5"
    save_factors(path, ChordSF(n_factors=6, max_iter=2, device="cpu").fit(X).operator_)
    settings = FitSettings(max_iter=2, device="cpu")
    with pytest.raises(ParameterError) as api:
        fit_matrix(X, settings=settings, budget=255, init=path)
    assert str(api.value).startswith(f"init={str(path)!r} has support chord")
    assert "this fit's, chosen by budget=255, are" in str(api.value)
    assert str(api.value).endswith("; drop budget=255 and fit with support='chord', base=2, n_factors=6")
    assert "--" not in str(api.value)
    with spelled_for("cli"), pytest.raises(ParameterError) as cli:
        fit_matrix(X, settings=settings, budget="255", init=path)
    assert str(cli.value).startswith(f"--init {path} has support chord")
    assert "this fit's, chosen by --budget 255, are" in str(cli.value)
    assert str(cli.value).endswith("; drop --budget 255 and fit with --support chord --base 2 --factors 6")
    assert not re.search(r"\b[a-z_]+=", str(cli.value))
    # what the hint says runs
    assert fit_matrix(X, settings=settings, init=path, support="chord", base=2, n_factors=6).summary["init"] == "saved"


def _stopped_scoring(*args, **kwargs):
    raise KeyboardInterrupt  # a Ctrl-C (or SIGTERM's handler) during the final scoring


def test_a_stop_during_the_final_scoring_keeps_the_finished_fit(monkeypatch):
    """The fit had ended when the stop came: its factors are kept, with the optimizer's own error,
    as a stop during the fit keeps its best (the KeyboardInterrupt escaped fit() and lost them)."""
    import sfapprox.sf.model as model

    X = np.random.default_rng(4).random((16, 16))
    plain = ChordSF(max_iter=30, device="cpu", random_state=2).fit(X)
    monkeypatch.setattr(model, "operator_error_and_multiple", _stopped_scoring)
    sf = ChordSF(max_iter=30, device="cpu", random_state=2).fit(X)
    np.testing.assert_array_equal(sf.factors_, plain.factors_)
    assert sf.stop_reason_ == sf.params_["stop_reason"] == "interrupted"
    assert sf.params_["scoring"] == "interrupted" and "scoring" not in plain.params_
    # the optimizer's figure of the same factors, in the fit's dtype
    assert sf.fro_error_ == pytest.approx(plain.fro_error_, rel=1e-6)
    assert sf.rel_error_ == pytest.approx(plain.rel_error_, rel=1e-6)


def test_a_stop_while_scaling_a_fit_worse_than_zero_keeps_it_consistent(monkeypatch):
    """The best multiple's scoring cut short (a pass only where the multiple is nearly X: its error from the
    sums has lost its digits): the unscaled product with its own (scored) error, never the scaled factors
    beside the unscaled one's error."""
    import sfapprox.sf.model as model

    X = _planted(16, seed=3)
    sf = ChordSF(max_iter=1, device="cpu").fit(X)
    rng = np.random.default_rng(3)  # the planted product's own factors, the first tripled: 3 X
    values = (1 + 0.3 * rng.standard_normal(sf.factors_.shape)) / sf.factors_.shape[2]
    values[0] *= 3.0
    monkeypatch.setattr(model, "operator_error", _stopped_scoring)
    sf._set_result(values, X, float(np.linalg.norm(X)))
    assert sf.stop_reason_ == "interrupted" and "best_multiple" not in sf.params_
    np.testing.assert_array_equal(sf.factors_, values)
    fro = np.linalg.norm(X - sf.to_dense())
    assert sf.fro_error_ == pytest.approx(fro, rel=1e-9) and sf.rel_error_ > 1


def test_a_checkpoint_that_cannot_be_written_mid_fit_does_not_end_the_fit(tmp_path, fake_clock, monkeypatch):
    """A full disk at the second checkpoint ended the fit with an error, its factors in memory lost: it
    warns, the fit goes on, the first checkpoint stays as it was, and the next one is written."""
    import sfapprox.factors as factors
    from sfapprox import load_factors
    from sfapprox._atomic import OutputError

    X = np.random.default_rng(3).random((24, 24))
    path = tmp_path / "ck.h5"
    real, calls = factors.save_factors, []

    def disk_full_once(*args, **kwargs):
        calls.append(kwargs["fit"]["iterations"])
        if len(calls) == 2:
            raise OutputError(f"{path}: not written: No space left on device", path)
        return real(*args, **kwargs)

    monkeypatch.setattr(factors, "save_factors", disk_full_once)
    with pytest.warns(RuntimeWarning, match="checkpoint not written: .*No space left.*the fit goes on"):
        sf = ChordSF(max_iter=30, time_limit=None, checkpoint=path, checkpoint_every=10.0, init="reference",
                     callback=lambda info: fake_clock.advance(1.0), device="cpu").fit(X)
    assert sf.n_iter_ == 30 and len(calls) >= 3
    assert load_factors(path).fit["iterations"] == calls[-1]  # a later checkpoint replaced the first


def test_checkpoints_take_at_most_a_tenth_of_the_fit(tmp_path, fake_clock, monkeypatch):
    """A checkpoint_every shorter than a write (0.001 s; a write at N = 30 takes ~50 ms) wrote after every
    iteration, a fifth of the fit spent writing: the next checkpoint now waits ten times the last write's
    seconds at least, from its start, and the checkpoints still come."""
    import sfapprox.factors as factors

    X = np.random.default_rng(3).random((24, 24))
    real, writes = factors.save_factors, []

    def slow_write(*args, **kwargs):
        writes.append(kwargs["fit"]["iterations"])
        fake_clock.advance(5.0)  # each write "takes" 5 s, an iteration 1 s
        return real(*args, **kwargs)

    monkeypatch.setattr(factors, "save_factors", slow_write)
    ChordSF(max_iter=100, time_limit=None, checkpoint=tmp_path / "ck.h5", checkpoint_every=0.001, init="reference",
            callback=lambda info: fake_clock.advance(1.0), device="cpu").fit(X)
    assert 2 <= len(writes) <= 4  # every 50 s: 5 s of writing, 45 iterations (it was one a step)
    assert all(b - a >= 40 for a, b in zip(writes, writes[1:]))


def test_a_resumed_fit_counts_the_iterations_before_its_resume(tmp_path, fake_clock):
    """A fit resumed from a saved fit (or a checkpoint) said only its own run's iterations: 20 after 30
    and 20 more read as 20 in all.  The ones before are said apart, through resumes of resumes."""
    from sfapprox import FitSettings, fit_matrix, load_factors

    X = np.random.default_rng(3).random((24, 24))
    settings = FitSettings(device="cpu", max_iter=30, time_limit=None)
    first = fit_matrix(X, settings=settings, out=tmp_path / "a.h5")
    assert first.summary["iterations_before"] == 0 and "iterations_before" not in first.model.params_
    second = fit_matrix(X, settings=settings.replace(max_iter=20), out=tmp_path / "b.h5", init=str(tmp_path / "a.h5"))
    assert second.summary["iterations_before"] == first.summary["iterations"]
    ck = tmp_path / "ck.h5"
    third = ChordSF(max_iter=20, time_limit=None, init=str(tmp_path / "b.h5"), checkpoint=ck, checkpoint_every=5.0,
                    callback=lambda info: fake_clock.advance(1.0), device="cpu").fit(X)
    before = first.summary["iterations"] + second.summary["iterations"]
    assert third.params_["iterations_before"] == before
    assert load_factors(ck).fit["iterations_before"] == before  # a checkpoint of a resume says it too
    fourth = ChordSF(max_iter=5, time_limit=None, init=str(ck), device="cpu").fit(X)
    assert fourth.params_["iterations_before"] == before + load_factors(ck).fit["iterations"]


def test_an_in_memory_fit_records_what_one_evaluation_took():
    """What a note names when the time limit leaves a fit with few iterations (the limit to ask for)."""
    X = np.random.default_rng(3).standard_normal((20, 20))
    fit = ChordSF(max_iter=5, time_limit=None, device="cpu").fit(X)
    assert 0 < fit.params_["evaluation_seconds"] < 5


def _column_path_limit(n: int) -> int:
    """A memory limit that SF's column path fits and its in-memory fit does not (checked): a fit from
    column blocks at small N, the path whose runs keep their start when they end worse."""
    import math

    from sfapprox.sf import _columns
    from sfapprox.sf.model import COMPILED_WORKING_SET, LIBRARY_WORKING_SET, estimate_fit_memory

    offs = chord_offsets(n)
    m = math.ceil(math.log2(n))
    limit = (_columns.column_fit_memory(n, m, len(offs), _columns.COLUMN_WIDTH) + LIBRARY_WORKING_SET
             + COMPILED_WORKING_SET + (1 << 20))
    assert estimate_fit_memory(n, m, len(offs), 8, 50, "cpu", reach=int(offs.max()), n_starts=2,
                               input_bytes=8 * n * n) > limit, "the test needs a limit between the two estimates"
    return limit


def test_a_kept_start_credits_its_resume_only_the_iterations_that_made_its_factors(tmp_path, fake_clock):
    """A run that ended worse than its start keeps the start: its own steps made nothing that was saved.
    Its checkpoints and its final file counted them all the same, and a resume of either said
    "(+ 3,341 before the resume)" of factors that 300 iterations had made."""
    import math

    from sfapprox import FitSettings, fit_matrix, load_factors, save_factors
    from sfapprox.operators import ChordOperator

    n = 128
    offs = chord_offsets(n)
    exact = ChordOperator(np.random.default_rng(3).standard_normal((7, n, len(offs))) / math.sqrt(len(offs)), offs)
    X = exact.to_dense()
    start, out, ck = tmp_path / "start.h5", tmp_path / "out.h5", tmp_path / "ck.h5"
    save_factors(start, exact, fit={"iterations": 300})  # exact factors: any step of the resume can only lose
    limit = _column_path_limit(n)
    run = fit_matrix(X, settings=FitSettings(device="cpu", max_iter=30, time_limit=None, max_memory=limit),
                     out=out, init=str(start), checkpoint=ck, checkpoint_every=5.0,
                     callback=lambda info: fake_clock.advance(1.0))
    assert run.summary["kept_start"] and run.summary["iterations"] == 30 and run.summary["iterations_before"] == 300
    assert load_factors(ck).fit["kept_start"] and load_factors(ck).fit["iterations"] > 0  # a kept-start checkpoint
    for saved in (out, ck):
        resumed = ChordSF(max_iter=1, time_limit=None, init=str(saved), device="cpu").fit(X)
        assert resumed.params_["iterations_before"] == 300, saved  # the start's, not the discarded steps too


def test_a_resume_of_a_fit_started_from_another_matrix_credits_only_this_matrix_s_iterations(tmp_path):
    """fit X --init A.h5 (A a fit of Y) says "20 (+ 40 of the start's fit, of another matrix)"; a resume of
    that fit of X said "5 (+ 60 before the resume)": Y's 40 counted as this matrix's fit, without a word."""
    import warnings

    from sfapprox import FitSettings, fit_matrix

    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.random((32, 32)))
    np.save(tmp_path / "y.npy", rng.random((32, 32)))
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    settings = FitSettings(device="cpu", max_iter=40, time_limit=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_matrix(tmp_path / "y.npy", settings=settings, out=a, ftol=0.0, gtol=0.0)
        second = fit_matrix(tmp_path / "x.npy", settings=settings.replace(max_iter=20), out=b, init=str(a),
                            ftol=0.0, gtol=0.0)
        third = fit_matrix(tmp_path / "x.npy", settings=settings.replace(max_iter=5), init=str(b))
    assert second.summary["init_note"] and second.summary["iterations_before"] == 40  # said as Y's, in its table
    assert third.summary["init_note"] is None and third.summary["iterations_before"] == 20  # X's own alone


@pytest.mark.parametrize("record", ['{"iterations": 5, "iterations_before": Infinity}', '{"iterations": NaN}',
                                    '{"iterations": 1e308}', '{"iterations": true, "iterations_before": "7"}'])
def test_a_saved_fit_whose_iteration_counts_were_edited_is_still_a_start(tmp_path, record):
    """The counts of a saved fit's record only word the resume's table: Infinity or NaN there (JSON that
    Python reads) ended init=<file> in an OverflowError traceback; 1e308 was said as a 309-digit count."""
    import h5py

    from sfapprox import save_factors

    X = np.random.default_rng(3).random((16, 16))
    path = tmp_path / "start.h5"
    save_factors(path, ChordSF(max_iter=3, time_limit=None, device="cpu").fit(X))
    with h5py.File(path, "a") as f:
        f.attrs["fit"] = record
    resumed = ChordSF(max_iter=2, time_limit=None, init=str(path), device="cpu").fit(X)
    assert resumed.init_ == "saved" and resumed.params_.get("iterations_before", 0) in (0, 5)


def test_a_saved_start_that_cannot_be_one_says_what_to_do(tmp_path):
    """A fit of another size, or another method's file, as init: the message named the mismatch and
    stopped there ("holds a tsvd fit, not SF factors"), with nothing to do about it."""
    from sfapprox import save_factors
    from sfapprox import TruncatedSVD

    X = np.random.default_rng(3).random((16, 16))
    sf, tsvd = tmp_path / "sf.h5", tmp_path / "tsvd.h5"
    save_factors(sf, ChordSF(max_iter=2, time_limit=None, device="cpu").fit(X))
    save_factors(tsvd, TruncatedSVD(n_components=2).fit(X))
    with pytest.raises(ParameterError, match=r"16 x 16 matrix; this one is 20 x 20: give a fit of a matrix of this "
                                             r"size, or fit without init=$"):
        ChordSF(max_iter=2, time_limit=None, init=str(sf), device="cpu").fit(np.eye(20) + 0.1)
    with pytest.raises(ParameterError, match=r"holds a tsvd fit, not SF factors: give a file SF's fit wrote .*, or "
                                             r"fit without init=$"):
        ChordSF(max_iter=2, time_limit=None, init=str(tsvd), device="cpu").fit(X)


def test_a_file_that_takes_the_checkpoints_name_is_said_without_advising_force(tmp_path, fake_clock):
    """Two `fit --out ck.h5 --checkpoint-every S --force` at once: the one whose checkpoint found the other's
    file there warned "(use --force to overwrite)", to a user who had given --force (it allows replacing
    the file there at the start, never one that came during the fit)."""
    from sfapprox import load_factors

    X = np.random.default_rng(3).random((24, 24))
    path = tmp_path / "ck.h5"

    def tick(info):
        fake_clock.advance(1.0)
        if info["iteration"] == 5:
            path.write_bytes(b"the other run's checkpoint")

    with pytest.warns(RuntimeWarning) as caught:
        ChordSF(max_iter=30, time_limit=None, checkpoint=path, checkpoint_every=10.0, callback=tick,
                init="reference", device="cpu").fit(X)
    [said] = [str(w.message) for w in caught if "took its name" in str(w.message)]
    kept = tmp_path / f"ck.{os.getpid()}.new.h5"
    assert said == (f"{path}: another file took its name during the fit, so it was left untouched; this checkpoint "
                    f"was saved as {kept} instead, and the next checkpoints go there too")
    assert path.read_bytes() == b"the other run's checkpoint" and load_factors(kept).fit["checkpoint"]


def test_product_error_still_answers_with_a_deprecation_warning():
    """product_error was folded into product_error_and_multiple: the old name keeps working for a release."""
    from sfapprox.sf.model import product_error, product_error_and_multiple

    sf = ChordSF(max_iter=5, device="cpu").fit(_planted(32, seed=1))
    X = _planted(32, seed=2)
    fro = float(np.linalg.norm(X))
    with pytest.warns(DeprecationWarning, match="product_error_and_multiple"):
        old = product_error(sf.factors_, sf.offsets_, X, fro, torch.device("cpu"))
    assert old == product_error_and_multiple(sf.factors_, sf.offsets_, X, fro, torch.device("cpu"))[:2]


def test_convergence_warning_separates_thousands_as_the_tables_do():
    """"SF stopped on its max iter (5188 iterations)" beside tables printing 5,267."""
    with pytest.warns(ConvergenceWarning, match=r"\(1,000 iterations\)"):
        with warnings.catch_warnings():
            warnings.simplefilter("always", ConvergenceWarning)
            # (16 x 16: at 8 x 8 the fit stalls, "no_progress", after 554 iterations with numba 0.61 / numpy 1.24)
            ChordSF(max_iter=1000, ftol=0, gtol=0, device="cpu").fit(np.random.default_rng(0).random((16, 16)))


def test_convergence_warning_of_one_iteration_says_iteration():
    """"SF stopped on its max iter (1 iterations)": one in the singular, as the verdict says it (formats.counted)."""
    with pytest.warns(ConvergenceWarning, match=r"\(1 iteration\) before"):
        with warnings.catch_warnings():
            warnings.simplefilter("always", ConvergenceWarning)
            ChordSF(max_iter=1, ftol=0, gtol=0, device="cpu").fit(np.random.default_rng(0).random((16, 16)))


def test_too_few_factors_are_counted_as_other_messages_count():
    """"1 factors with offsets [...] cannot cover every entry": one in the singular (formats.counted)."""
    with pytest.raises(ParameterError, match=r"^1 factor with offsets \[0, 1, 2, 4\] cannot cover every entry of a "
                                             r"8 x 8 matrix; use at least 3 factors$"):
        ChordSF(n_factors=1, device="cpu").fit(np.eye(8))


@pytest.mark.parametrize("n, n_factors, said", [
    (2, 2, "a 2 x 2 matrix has exactly log2 N = 1 factor, got n_factors=2"),
    (1024, 3, "a 1,024 x 1,024 matrix has exactly log2 N = 10 factors, got n_factors=3"),
])
def test_the_butterfly_factor_count_is_said_as_other_messages_count(n, n_factors, said):
    """"exactly log2 N = 1 factors" for N = 2, and N without separators: counted (formats.counted), N as
    the other messages write it; the n_factors typed stays plain."""
    with pytest.raises(ParameterError, match=re.escape(said)):
        ChordSF(support="butterfly", n_factors=n_factors, device="cpu").fit(np.eye(n))


@pytest.mark.parametrize("text, counted", [("compiling kernels (first run)", True), ("loading compiled kernels", False)])
def test_the_scoring_s_compiling_is_recorded_apart_from_the_fit_s(monkeypatch, text, counted):
    """On a fresh install SF's scoring compiled the apply kernels (~4 s) in no figure of its result
    (compile_seconds None): the row's seconds could not be accounted for.  Its compiling is
    ``scoring_compile_seconds`` now, a part of ``scoring_seconds``; loading them from the cache is not counted."""
    from sfapprox import _timing
    from sfapprox.operators import _chord_apply, chord

    monkeypatch.setattr(chord, "TORCH_DENSE_MAX_N", 8)  # the scoring of N = 16 then runs the apply kernels
    # the apply kernels not ready, as in a fresh process; their making takes 2.5 s on the fit's clock
    clock = {"now": 0.0}
    real_now = _timing.now
    monkeypatch.setattr(_timing, "now", lambda: real_now() + clock["now"])
    monkeypatch.setattr(_chord_apply, "block_kernel_phase", lambda butterfly=False: text)
    monkeypatch.setattr(_chord_apply, "warm_up_block_kernel", lambda butterfly=False: clock.update(now=clock["now"] + 2.5))
    est = ChordSF(max_iter=5, device="cpu").fit(np.random.default_rng(0).random((16, 16)))
    if counted:
        assert 2.5 <= est.params_["scoring_compile_seconds"] <= est.params_["scoring_seconds"]
    else:
        assert "scoring_compile_seconds" not in est.params_ and est.params_["scoring_seconds"] >= 2.5


# ---------------------------------------------------------------------------
# A stop on a fresh install: no compiling after it, and one during the compiling
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stopped_fits_scoring_does_not_compile_the_apply_kernels(monkeypatch, stopped):
    """Ctrl-C or SIGTERM during a fit on a fresh install: the scoring of the best factors compiled the apply
    kernels first (9-17 s on 2 cores), and the stop waited for it.  Stopped, it scores on scipy's sparse factors,
    to the same error; a fit not stopped still compiles them (the products users make next need them)."""
    import types

    from sfapprox import _compiled, _signals
    from sfapprox.operators import _chord_apply

    n = 1100  # above TORCH_DENSE_MAX_N: the scoring's products are the apply kernels'
    X = np.random.default_rng(0).standard_normal((n, n))
    compiled, warmed = [], []
    real = _chord_apply.FactorStack._apply_numba
    # a fresh install: the block kernel neither compiled here nor in numba's cache
    fresh, real_cached = types.SimpleNamespace(signatures=[]), _compiled.cached_signatures
    monkeypatch.setattr(_chord_apply, "_block_kernel", lambda butterfly=False: fresh)
    monkeypatch.setattr(_compiled, "cached_signatures", lambda f: [] if f is fresh else real_cached(f))
    monkeypatch.setattr(_chord_apply, "warm_up_block_kernel", lambda butterfly=False: warmed.append(butterfly))
    monkeypatch.setattr(_chord_apply.FactorStack, "_apply_numba",
                        lambda self, B, t: (compiled.append(B.shape), real(self, B, t))[1])
    # the stop as the CLI's handler records it (its KeyboardInterrupt swallowed: the loop acts on the flag)
    monkeypatch.setattr(_signals, "_received", [2] if stopped else [])
    sf = ChordSF(max_iter=2, device="cpu").fit(X)
    assert (sf.stop_reason_ == "interrupted") == stopped
    assert bool(compiled or warmed) != stopped, (compiled, warmed)
    monkeypatch.setattr(_signals, "_received", [])
    dense = sf.operator_.to_dense()
    assert sf.fro_error_ == pytest.approx(np.linalg.norm(X - dense), rel=1e-9)


def test_the_scorings_choice_of_products_is_not_left_on_the_estimator(monkeypatch):
    """Whether the final scoring ran on scipy's sparse factors was an attribute (``_uncompiled``) the fit left
    set on the estimator: it is the scoring's own now, stopped fit or not, exact scoring or not."""
    from sfapprox import _signals

    X = np.random.default_rng(0).random((16, 16))
    for stopped in ([2], []):
        monkeypatch.setattr(_signals, "_received", stopped)
        est = ChordSF(max_iter=2, device="cpu").fit(X)
        monkeypatch.setattr(_signals, "_received", [])
        assert est.fro_error_ == pytest.approx(np.linalg.norm(X - est.operator_.to_dense()), rel=1e-9)
        assert not [name for name in vars(est) if "uncompiled" in name]


INTERRUPTED_COMPILE = """
import json, os, signal, sys
import numpy as np
import numba.core.compiler as compiler
from sfapprox import ChordSF

real, calls = compiler.compile_extra, []

def compile_extra(*args, **kwargs):  # numba compiling a kernel: the stop arrives inside it
    calls.append(1)
    if len(calls) == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)

compiler.compile_extra = compile_extra
X = np.random.default_rng(0).standard_normal((48, 48))
sf = ChordSF(max_iter=50, device="cpu").fit(X)
print(json.dumps({"stop": sf.stop_reason_, "iterations": sf.n_iter_, "rel": sf.rel_error_,
                  "exact": float(np.linalg.norm(X - sf.operator_.to_dense()) / np.linalg.norm(X)),
                  "compiles": len(calls)}))
if len(sys.argv) > 2:  # a notebook's next fit, in the same process
    again = ChordSF(max_iter=50, device="cpu").fit(X)
    print(json.dumps({"stop": again.stop_reason_, "iterations": again.n_iter_, "rel": again.rel_error_}))
"""


def _interrupted_compile(tmp_path, *args) -> list[dict]:
    import json
    import subprocess
    import sys

    script = tmp_path / "interrupted_compile.py"
    script.write_text(INTERRUPTED_COMPILE)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_stop_while_the_kernels_compile_returns_the_fit_as_a_stop_in_its_iterations(tmp_path):
    """A KeyboardInterrupt in the first fit's compiling (an empty numba cache) surfaced from numba's compiler
    internals, where one in the iterations returns the fit, stop_reason_ "interrupted", its best factors kept.
    Now the same: the start kept, no iteration, its error scored."""
    (first,) = _interrupted_compile(tmp_path, 1)
    assert first["stop"] == "interrupted" and first["iterations"] == 0 and first["compiles"] == 1
    assert 0 < first["rel"] == pytest.approx(first["exact"], rel=1e-9)


@pytest.mark.slow
def test_after_a_stop_while_the_kernels_compile_the_next_fits_compile_and_cache_them(tmp_path):
    """Cut short in its compiling (the third function compiled: some cached, some not), a fit leaves numba's
    cache usable: the next fit in the same process compiles the rest and fits; a later process loads them all."""
    first, again = _interrupted_compile(tmp_path, 3, "again")
    assert first["stop"] == "interrupted" and first["iterations"] == 0
    assert again["stop"] != "interrupted" and again["iterations"] > 0 and again["rel"] < 1
    import subprocess
    import sys

    probe = ("from sfapprox.sf import _kernels; import torch; before = _kernels.kernels_cached(); "
             "_kernels.warm_up_numba(torch.float64); print(before, _kernels.kernels_cached())")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=env)
    assert done.stdout.split() == ["True", "True"], done.stderr[-3000:]


def test_a_column_fit_refused_names_fewer_factors_where_they_reach_every_entry():
    """The refusal of SF from column blocks said "raise the limit or use a smaller input", where fewer factors
    (the fewest that still reach every entry) need less: N = 20,000, 15 factors need 523 MiB, 12 need 468."""
    X = scipy.sparse.csr_array(([1.0], ([0], [0])), shape=(20_000, 20_000))
    with pytest.raises(ResourceError, match=r"fit fewer factors \(n_factors=12, the fewest that reach every entry, "
                                            r"needs about 467\.5 MiB"):
        ChordSF(max_memory="500M").check_memory_first(X)
    ChordSF(n_factors=12, max_memory="500M").check_memory_first(X)  # (and they do fit)
    for factors, limit in [(None, "300M"), (12, "400M")]:  # the fewest over the limit too; already the fewest
        with pytest.raises(ResourceError) as refused:
            ChordSF(n_factors=factors, max_memory=limit).check_memory_first(X)
        assert "fewer factors" not in str(refused.value) and "use a smaller input" in str(refused.value)


def test_numbas_start_is_outside_the_time_limit(monkeypatch):
    """Importing the compiled kernels' module (numba's start, 0.3-0.5 s once a process) comes before the
    limit's clock, as their compile does: inside it, time_limit=0.3 at N = 30 ran 0 iterations."""
    import time as _time

    from sfapprox.sf import _kernels

    real = _kernels._numba_module
    slow = {"first": True}

    def numba_module():  # a fresh process's first import, made slow
        if slow.pop("first", False):
            _time.sleep(1.0)
        return real()

    monkeypatch.setattr(_kernels, "_numba_module", numba_module)
    X = np.random.default_rng(0).standard_normal((30, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sf = ChordSF(time_limit=0.5, device="cpu", init="identity").fit(X)
    assert not slow  # the slow import ran
    assert sf.n_iter_ > 10, (sf.n_iter_, sf.stop_reason_)
