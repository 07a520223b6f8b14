"""The SF methods' structure choice: the budget's largest structure, capped by what the time allows."""

import dataclasses

import numpy as np
import pytest

from sfapprox import FitSettings, compare
from sfapprox._base import RunContext
from sfapprox.budget import sf_config_for_budget, sf_count
from sfapprox.chord import min_full_factors, support_offsets
from sfapprox.sf import methods as M


def test_without_a_time_limit_the_budget_alone_decides():
    config = sf_config_for_budget(300, 2 * sf_count(300))
    assert M.affordable_structure(300, config, None) == config
    est = M.sf_estimator(300, 2 * sf_count(300), RunContext(FitSettings(time_limit=None, device="cpu")))
    assert est.n_factors == config.n_factors


def test_a_tight_time_limit_caps_the_factors(monkeypatch):
    config = sf_config_for_budget(300, 2 * sf_count(300))
    fewest = min_full_factors(300, support_offsets(300, "chord", config.base))
    monkeypatch.setattr(M, "_evaluation_seconds", lambda n, offsets, m, enough=None: 1e-3 * m)  # 1 ms per factor
    capped = M.affordable_structure(300, config, time_limit=1e-3 * M.MIN_EVALS * (fewest + 1))
    assert capped.n_factors == fewest + 1 < config.n_factors
    assert capped.count == 300 * config.n_offsets * capped.n_factors and capped.base == config.base
    never_below = M.affordable_structure(300, config, time_limit=1e-6)
    assert never_below.n_factors == fewest  # full support is kept, whatever the time
    roomy = M.affordable_structure(300, config, time_limit=1e6)
    assert roomy == config
    # A fit that --iters stops after 3 iterations needs no room for a thousand evaluations: its factors
    # were cut "for time" in a fit that took 0.2 s of its 10
    few = M.affordable_structure(300, config, time_limit=1e-3 * M.MIN_EVALS * (fewest + 1), max_iter=3)
    assert few == config


def test_the_cap_is_measured_and_within_budget():
    X = np.random.default_rng(0).random((200, 200))
    c = compare(X, ["sf"], budget=2 * sf_count(200), time_limit=0.05, device="cpu")
    row = c.results[0]
    assert row.status == "ok" and row.nnz <= c.budget
    full = sf_config_for_budget(200, 2 * sf_count(200))
    assert row.params["n_factors"] < full.n_factors
    # ... and said, never silent: the row, its details and a note under the table.
    assert row.params["n_factors_budget"] == full.n_factors and row.params["count_budget"] == full.count
    assert f"M={row.params['n_factors']}/{full.n_factors}" in c.tables()[0].rows[0]["details"]
    assert any(n.startswith(f"sf: {row.params['n_factors']} of the {full.n_factors} factors its budget allows")
               and "time_limit=0" in n for n in c.tables()[0].notes)
    uncapped = compare(X, ["sf"], budget=2 * sf_count(200), time_limit=None, max_iter=3, device="cpu").results[0]
    assert uncapped.params["n_factors"] == full.n_factors and "n_factors_budget" not in uncapped.params


@pytest.mark.parametrize("support", ["symmetric", "butterfly"])
def test_other_supports(support):
    n = 64
    config = sf_config_for_budget(n, 2 * sf_count(n), support=support)
    out = M.affordable_structure(n, config, 1e-9)
    assert out.support == support and out.n_factors <= config.n_factors


def test_the_timing_probe_takes_blocks_of_columns_not_a_dense_target():
    """It runs before any memory check: a dense N x N random target (two copies, up to N = 8,192) broke
    --max-memory.  Above 1,024 it now times a few blocks of columns, 16 MiB at most."""
    import tracemalloc

    from sfapprox.budget import sf_structure

    n = 3000
    offsets = support_offsets(n, "chord", 2)
    M._evaluation_seconds(n, offsets, sf_structure(n).n_factors)  # torch imported, the kernel compiled
    tracemalloc.start()
    try:
        seconds = M._evaluation_seconds(n, offsets, sf_structure(n).n_factors)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seconds > 0
    assert peak < n * n * 8  # the kernel's blocks; not the dense float64 target (and its float32 copy)


def test_compiling_the_kernel_is_no_part_of_the_methods_time(monkeypatch):
    """The structure's timing is charged to SF's time limit, and on a fresh install its first kernel call
    held the compiling (seconds of a batch's first, short, SF fit). The kernel is compiled before."""
    import time

    from sfapprox.sf import _kernels

    calls = []
    monkeypatch.setattr(_kernels, "warm_up_numba", lambda dtype: (calls.append(dtype), time.sleep(1.0)))
    # compiling, not loading from numba's cache (which is charged: milliseconds)
    monkeypatch.setattr(_kernels, "compiled_for", lambda *args, **kwargs: False)
    est = M.sf_estimator(300, 2 * sf_count(300), RunContext(FitSettings(time_limit=5.0, device="cpu")))
    assert calls and est.time_limit > 4.5  # the second of "compiling" was not charged
    assert est._compiled_before >= 1.0  # ... and said: the fit adds it to its compile_seconds


def test_a_display_shows_the_compiling_before_the_structure_is_timed(monkeypatch):
    """In a comparison, SF's kernels were first compiled here (8 s on a fresh install, measured at N = 2,000)
    under a bar reading "sf it 0" with no word beside it; the fit's own warm-up said "compiling" only after."""
    import time

    from sfapprox.sf import _kernels

    if _kernels.select_kernel(300, "cpu")[1] != "numba":
        pytest.skip("no compiled kernel here (numba missing)")
    monkeypatch.setattr(_kernels, "warm_up_numba", lambda dtype: time.sleep(0.8))
    monkeypatch.setattr(_kernels, "compiled_for", lambda *args, **kwargs: False)
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    M.sf_estimator(300, 2 * sf_count(300), RunContext(FitSettings(time_limit=5.0, device="cpu"), callback=display))
    # (the structure's timing then says so too, where it takes over the phase's half second)
    assert phases[:2] == ["compiling kernels (first run)", ""]


def test_a_display_says_loading_where_the_warmed_kernel_is_cached(monkeypatch):
    """The warm-up compiles the kernel alone; a cache without the in-memory L-BFGS iterations (which a fit
    from columns never compiles) said "compiling kernels (first run)" on every comparison of a kernel too
    big to form."""
    import time

    from sfapprox.sf import _kernels

    if _kernels.select_kernel(300, "cpu")[1] != "numba":
        pytest.skip("no compiled kernel here (numba missing)")
    monkeypatch.setattr(_kernels, "warm_up_numba", lambda dtype: time.sleep(0.8))
    monkeypatch.setattr(_kernels, "kernels_cached", lambda: False)  # the iterations: never compiled
    asked = []
    monkeypatch.setattr(_kernels, "compiled_for", lambda name, dtype, *args: (asked.append(name), True)[1])
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    M.sf_estimator(300, 2 * sf_count(300), RunContext(FitSettings(time_limit=5.0, device="cpu"), callback=display))
    assert phases[:2] == ["loading compiled kernels", ""] and asked == ["loss_and_grad"]


def test_a_display_says_the_structure_is_being_timed(monkeypatch):
    """The structure's timing (seconds at N = 12,000 on a busy machine) ran under a bar with no word."""
    import time

    from sfapprox.sf import _kernels

    monkeypatch.setattr(_kernels, "warm_up_numba", lambda dtype: None)
    measure = M._evaluation_seconds
    monkeypatch.setattr(M, "_evaluation_seconds", lambda *args: (time.sleep(0.8), measure(*args))[1])
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    M.sf_estimator(300, 2 * sf_count(300), RunContext(FitSettings(time_limit=5.0, device="cpu"), callback=display))
    assert "timing the factors' evaluations" in phases and phases[-1] == ""


@pytest.mark.parametrize("formed", [True, False])
def test_a_memory_refusal_comes_before_the_kernels_and_the_timing(monkeypatch, formed):
    """SF from column blocks under a tiny --max-memory: its "not applicable" row showed about 5 s, the
    kernels' compiling and the structure's timing run by the factory before the fit's memory refusal."""
    from sfapprox.sf import _kernels
    from sfapprox.sources import ArraySource

    def forbidden(*args, **kwargs):
        raise AssertionError("work before the memory refusal")

    monkeypatch.setattr(_kernels, "warm_up_numba", forbidden)
    monkeypatch.setattr(M, "_compiled_first", forbidden)
    monkeypatch.setattr(M, "_evaluation_seconds", forbidden)
    X = np.random.default_rng(0).random((64, 64))
    # formed: its scoring fits 100 MiB, SF's fit (in memory or from columns) does not
    row = compare(X if formed else ArraySource(X, "X"), ["sf"], time_limit=5.0, device="cpu",
                  max_memory=(100 << 20) if formed else (64 << 10)).results[0]
    assert row.status == "not applicable" and "from its column blocks" in row.reason, row.reason


def test_a_memory_refusal_names_the_least_budget_where_it_fits():
    """A graph of N = 1,000,000 from column blocks: SF at the default budget (base 2) needed 21.4 GiB over an
    18.8 GiB limit, and the row said "raise the limit or use a smaller input", while SF's least budget
    (base 7, fewer values per row) needs 15.7 GiB.  Here N = 20,000 (467 MiB and 402 MiB): a 450 MiB limit
    names the least budget, a 380 MiB one (where that does not fit either) does not."""
    import scipy.sparse as sp

    from sfapprox.budget import sf_min_budget

    X = sp.csr_array(([1.0, 2.0, 1.5], ([0, 1, 6], [0, 1, 2])), shape=(20_000, 20_000))
    least = sf_min_budget(20_000)
    fits = compare(X, ["sf"], time_limit=5.0, device="cpu", max_memory=450 << 20).results[0]
    assert fits.status == "not applicable" and f"or lower the budget to SF's least, budget={least}, which fits" in fits.reason
    short = compare(X, ["sf"], time_limit=5.0, device="cpu", max_memory=380 << 20).results[0]
    assert short.status == "not applicable" and "from its column blocks" in short.reason
    assert "least budget" not in short.reason, short.reason


def test_the_early_check_leaves_a_fit_that_fits_to_its_factory(monkeypatch):
    """Checked for the fewest factors a time limit may keep: a limit that fits them is no refusal."""
    calls = []
    monkeypatch.setattr(M, "_compiled_first", lambda n, callback=None: calls.append(n))
    context = RunContext(FitSettings(time_limit=5.0, device="cpu", max_memory=1 << 30))
    M.sf_check_first(np.random.default_rng(0).random((64, 64)), 2 * sf_count(64), context)
    assert not calls  # the check itself does none of the factory's work


def test_the_reason_says_what_the_fewest_factors_get_when_they_too_get_fewer(monkeypatch):
    """"12 would get fewer than 1000 loss evaluations in the 60 s limit (10 is the fewest that reach every
    entry)" read as if 10 got them, beside a row of 48 evaluations (an RBF kernel at N = 3,000)."""
    config = sf_config_for_budget(300, 2 * sf_count(300))
    fewest = min_full_factors(300, support_offsets(300, "chord", config.base))
    monkeypatch.setattr(M, "_compiled_first", lambda n, callback: None)
    monkeypatch.setattr(M, "_evaluation_seconds", lambda n, offsets, m, enough=None: 1e-3 * m)  # 1 ms per factor
    limit = 1e-3 * fewest * 50  # 50 evaluations of the fewest factors
    est = M.sf_estimator(300, config.count, RunContext(FitSettings(time_limit=limit, device="cpu")))
    assert est.n_factors == fewest
    reason = est._structure_choice["structure_reason"]
    assert f"{config.n_factors} would get fewer than {M.MIN_EVALS:,} loss evaluations" in reason  # (was "1000")
    assert f"and {fewest}, the fewest that reach every entry, about 50;" in reason
    # where the fewest get what a fit wants, nothing more is said of them
    roomy = M.structure_reason(300, config, dataclasses.replace(config, n_factors=fewest), 10.0,
                               evaluation_seconds=1e-3 * config.n_factors)
    assert f"({fewest} is the fewest that reach every entry)" in roomy and "about" not in roomy


def test_a_hand_fixed_structure_over_the_budget_is_counted_as_other_messages_count():
    """"SF with 1 factors of 11 values per row stores 11000 numbers": one in the singular, thousands
    separated (formats.counted)."""
    from sfapprox import BudgetError

    context = RunContext(FitSettings(time_limit=None, device="cpu"), structure={"n_factors": 1})
    with pytest.raises(BudgetError, match=r"^SF with 1 factor of 11 values per row stores 11,000 numbers, over the "
                                          r"budget 10$"):
        M._planned(1000, 10, context, "chord")


def test_the_structure_reason_rounds_a_shared_time_limit():
    """A comparison's shared limit (the time left over the methods left) read "in the 10.9578 s limit" in
    the table's note, beside "sf 11 s" in the time-limit note above it."""
    from sfapprox.sf.methods import SFConfig, structure_reason

    full, fewest = SFConfig(2, 12, 13, 468_000, "chord"), SFConfig(2, 10, 13, 390_000, "chord")
    why = structure_reason(3000, full, fewest, 10.957783274000072, evaluation_seconds=0.9336)
    assert "fewer than 1,000 loss evaluations in the 11 s limit on this machine" in why, why
    assert "in the 1,200 s limit" in structure_reason(3000, full, fewest, 1200.0, evaluation_seconds=9.0)


@pytest.mark.parametrize("step", ["check_first", "make"])
def test_a_display_says_torch_is_loading_before_sfs_first_phase(slow_import, step):
    """In a fresh process SF's first seconds (torch imported with its estimator's module) showed only "sf"
    and the clock on the bar, before any phase was announced."""
    slow_import("model", "sfapprox.sf.methods")
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    context = RunContext(FitSettings(time_limit=None, device="cpu"), callback=display)
    if step == "check_first":
        M.sf_check_first(np.eye(16), 2 * sf_count(16), context)
    else:
        M.sf_estimator(16, 2 * sf_count(16), context)
    assert phases == ["loading torch", ""]


def test_a_display_says_the_kernels_modules_are_loading(monkeypatch):
    """Before the structure's timing, torch's and numba's imports and the look into numba's cache ran under
    a bar with no word beside it (the compiling's phase began only after them)."""
    import time

    from sfapprox.sf import _kernels

    choose = _kernels.select_kernel
    monkeypatch.setattr(_kernels, "select_kernel", lambda *a, **k: (time.sleep(0.8), choose(*a, **k))[1])
    monkeypatch.setattr(_kernels, "warm_up_numba", lambda dtype: None)
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    M._compiled_first(300, display)
    assert phases == ["loading kernels", ""]


@pytest.mark.parametrize("wrapped", [True, False])
def test_a_stop_while_the_structures_kernel_compiles_ends_the_row_interrupted(monkeypatch, wrapped):
    """A stop while SF's kernel compiled for its structure's timing (a fresh install, seconds) reached the
    comparison as numba may wrap it, a SystemError: compare raised it, and a batch wrote a failed row and went
    on.  Taken as the fit's own warm-ups take it (model._warmed_unless_stopped): the row is "interrupted",
    stopped before it finished, and the comparison stops there."""
    from sfapprox.sf import _kernels

    def stopped(dtype):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            if not wrapped:
                raise
            raise SystemError("<built-in function x> returned a result with an exception set") from stop

    monkeypatch.setattr(_kernels, "_numba_module", lambda: True)  # (the kernel is numba's, with or without it)
    monkeypatch.setattr(_kernels, "compiled_for", lambda *args: False)
    monkeypatch.setattr(_kernels, "warm_up_numba", stopped)
    from sfapprox.comparison import run_order

    X = np.random.default_rng(0).random((64, 64))
    names = ["sf", "tsvd", "rsvd"]
    order = run_order(names)
    rows = {r.method: r for r in compare(X, names, time_limit=60.0, device="cpu").results}
    assert rows["sf"].status == "interrupted" and "before it finished" in rows["sf"].reason, rows["sf"]
    assert list(rows) == [m for m in names if m in order[:order.index("sf") + 1]]  # nothing run after it


# ------------------------------------------------------------------ the setup, within the limit
def test_the_checks_before_the_factory_are_charged_to_the_time_limit(fake_clock, monkeypatch):
    """The row's time runs from its start (RunContext.started): SF's checks (loading torch, 1-4 s in a fresh
    process) and its structure's timing came out of the fit's limit only from after the kernels were
    loaded, and at N = 100,000 the row took 74-99 s of a 20 s limit.  Here the checks "take" 3 s of 5."""
    check = M.sf_check_first

    def slow_check(*args, **kwargs):
        check(*args, **kwargs)
        fake_clock.advance(3.0)

    monkeypatch.setattr(M, "sf_check_first", slow_check)
    X = np.random.default_rng(0).random((300, 300))
    row = compare(X, ["sf"], time_limit=5, max_iter=3, device="cpu").results[0]
    assert row.status == "ok" and row.estimator.time_limit <= 2.0


def test_loading_torch_and_the_kernels_is_charged_to_no_time_limit(fake_clock, monkeypatch):
    """Once-per-process work is no method's: charged from the row's start, a comparison's first SF row under
    ``--time-limit 2`` spent its limit loading torch (several seconds on a busy machine) and made no
    iteration.  Here loading "takes" 4 s of a 5 s limit, and the fit keeps its 5 s."""
    from sfapprox import _timing

    real = M._chord_sf

    def slow_load(*args, **kwargs):
        with _timing.one_time():
            fake_clock.advance(4.0)  # (as _chord_sf's own import of torch, the first in a process)
        return real(*args, **kwargs)

    monkeypatch.setattr(M, "_chord_sf", slow_load)
    X = np.random.default_rng(0).random((300, 300))
    row = compare(X, ["sf"], time_limit=5, max_iter=3, device="cpu").results[0]
    assert row.status == "ok" and row.estimator.time_limit > 4.5, row.estimator.time_limit


def test_the_structure_timing_stops_once_it_leaves_no_factor_to_spare(fake_clock, monkeypatch):
    """At N = 100,000 the timing took 50 s (a 128-column block of 17 factors: 8-20 s a call on a busy machine)
    where its first call already showed the fewest factors were all the limit allowed.  A first narrow call,
    and any call, that takes as long as that ends it: its seconds a lower bound, said as such."""
    from sfapprox.sf import _kernels

    n = 3000
    if _kernels.select_kernel(n, "cpu")[1] != "numba":
        pytest.skip("no compiled kernel here (numba missing)")
    calls = []
    real = _kernels.block_loss_and_grad

    def slow(w, offsets, block, *args, **kwargs):  # a column "takes" 10 ms
        calls.append(block.shape[1])
        fake_clock.advance(0.01 * block.shape[1])
        return real(w, offsets, block, *args, **kwargs)

    monkeypatch.setattr(_kernels, "block_loss_and_grad", slow)
    offsets = support_offsets(n, "chord", 2)
    seconds = M._evaluation_seconds(n, offsets, 12, 0.05)
    assert calls == [M.PROBE_FIRST_COLUMNS] and isinstance(seconds, M._AtLeast) and seconds >= 0.05
    calls.clear()
    whole = M._evaluation_seconds(n, offsets, 12)  # no bound: the blocks, as before (none narrow)
    assert M.PROBE_FIRST_COLUMNS not in calls and len(calls) == 4 and not isinstance(whole, M._AtLeast)
    config = sf_config_for_budget(n, 3 * sf_count(n))
    fewest = min_full_factors(n, support_offsets(n, "chord", config.base))
    calls.clear()
    chosen, seconds = M._affordable(n, config, 1.0)
    assert chosen.n_factors == fewest < config.n_factors and isinstance(seconds, M._AtLeast) and len(calls) == 1
    reason = M.structure_reason(n, config, chosen, 1.0, evaluation_seconds=seconds)
    assert f"{fewest}, the fewest that reach every entry, at most " in reason


def test_a_large_structure_is_chosen_without_a_timing_where_its_arithmetic_alone_says(monkeypatch):
    """At N = 100,000 a whole evaluation is 8.6e12 multiply-adds: 0.086 s even at 1e14 a second, more than
    the 0.068 s from which the 60 s limit leaves no factor to spare; no kernel runs."""
    def forbidden(*args, **kwargs):
        raise AssertionError("timed")

    monkeypatch.setattr(M, "_evaluation_seconds", forbidden)
    n = 100_000
    config = sf_config_for_budget(n, 2 * sf_count(n))
    fewest = min_full_factors(n, support_offsets(n, "chord", config.base))
    chosen, seconds = M._affordable(n, config, 60.0)
    assert chosen.n_factors == fewest < config.n_factors and isinstance(seconds, M._AtLeast)
    assert seconds == M.least_evaluation_seconds(n, config.n_offsets, config.n_factors)
    # said as a bound in the row's reason: the fewest factors get "at most" so many evaluations
    reason = M.structure_reason(n, config, chosen, 60.0, evaluation_seconds=seconds)
    assert f"{fewest}, the fewest that reach every entry, at most " in reason
