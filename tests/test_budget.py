import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfapprox import BudgetError, NotApplicableError, ParameterError
from sfapprox.budget import (
    butterfly_count,
    nmf_count,
    nmf_rank_for_budget,
    resolve_budget,
    rpca_count,
    sf_config_for_budget,
    sf_count,
    sf_structure,
    tsvd_count,
    tsvd_rank_for_budget,
)
from sfapprox.chord import chord_offsets, min_full_factors, support_is_full, support_offsets


def test_formulas():
    assert sf_count(36) == 36 * 7 * 6
    assert tsvd_count(36, 18) == 18 * 73
    assert nmf_count(36, 4) == 288
    assert rpca_count(36, 2, 10) == 2 * 73 + 10
    assert rpca_count(36, 2, 10, count_indices=True) == 2 * 73 + 20


def test_paper_tsvd_rank_fits_sf_budget():
    # The paper's TSVD rank ceil(M^2/2) stores a little less than SF's N*K*M.
    for n, m in ((24, 5), (36, 6), (80, 7), (306, 9)):
        r = -(-m * m // 2)
        assert tsvd_count(n, r) <= sf_count(n)


@given(n=st.integers(1, 3000), budget=st.integers(0, 10**7))
def test_ranks_never_exceed_budget(n, budget):
    r = tsvd_rank_for_budget(n, budget)
    assert tsvd_count(n, r) <= budget and r <= n
    assert r == n or tsvd_count(n, r + 1) > budget
    q = nmf_rank_for_budget(n, budget)
    assert nmf_count(n, q) <= budget and (q == n or nmf_count(n, q + 1) > budget)


def test_resolve_budget_forms():
    assert resolve_budget("sf", 36).value == 1512
    assert resolve_budget(None, 36).value == 1512
    assert resolve_budget("0.05", 100).value == 500
    assert resolve_budget(1, 10).value == 100
    assert resolve_budget("9000", 100).value == 9000
    for bad in ("abc", "-3", "0", "2.5", "nan"):
        with pytest.raises(ParameterError):
            resolve_budget(bad, 10)
    with pytest.raises(BudgetError, match="less than one"):
        resolve_budget(0.001, 10)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 200), frac=st.floats(0.05, 1.0))
def test_sf_adapts_within_budget_with_full_support(n, frac):
    budget = int(frac * n * n)
    try:
        config = sf_config_for_budget(n, budget)
    except BudgetError:
        return
    assert config.count <= budget
    offsets = chord_offsets(n, config.base)
    assert len(offsets) == config.n_offsets
    assert support_is_full(n, offsets, config.n_factors)


def test_sf_reference_budget_gives_reference_structure():
    for n in (24, 36, 48, 80, 195, 306):
        c = sf_config_for_budget(n, sf_count(n))
        assert (c.base, c.count) == (2, sf_count(n))


def test_sf_budget_too_small_is_clear():
    with pytest.raises(BudgetError, match="below the smallest fit .* full-support Chord factorization: 16,200"):
        sf_config_for_budget(300, 4000)
    # counts read as the tables show them (it said "budget 127050 ... needs 288000" beside "127,050")
    with pytest.raises(BudgetError, match="budget 127,050 is below the smallest fit of a 3,000 x 3,000 .*: 288,000 stored"):
        sf_config_for_budget(3000, 127050)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 150), frac=st.floats(0.1, 1.0))
def test_symmetric_support_adapts_within_budget_with_full_support(n, frac):
    budget = int(frac * n * n)
    try:
        config = sf_config_for_budget(n, budget, support="symmetric")
    except BudgetError:
        # nothing fits: even the cheapest base's fewest factors are over the budget
        for base in range(2, min(16, n) + 1):
            offsets = support_offsets(n, "symmetric", base)
            m = min_full_factors(n, offsets)
            assert m is None or n * len(offsets) * m > budget
        return
    offsets = support_offsets(n, "symmetric", config.base)
    assert config.support == "symmetric" and config.count <= budget
    assert len(offsets) == config.n_offsets and config.count == n * config.n_offsets * config.n_factors
    assert support_is_full(n, offsets, config.n_factors)


def test_butterfly_for_budget_fits_or_says_why():
    config = sf_config_for_budget(64, 5000, support="butterfly")
    assert (config.n_factors, config.n_offsets, config.count) == (6, 2, butterfly_count(64)) == (6, 2, 768)
    with pytest.raises(BudgetError, match="below the smallest fit of a 64 x 64 matrix \\(the butterfly support's 2·N·log2 N: 768 stored "):
        sf_config_for_budget(64, 767, support="butterfly")
    with pytest.raises(NotApplicableError, match="power of two"):
        sf_config_for_budget(48, 10**6, support="butterfly")
    with pytest.raises(ParameterError, match="unknown support"):
        sf_config_for_budget(48, 10**6, support="hexagonal")


def test_sf_structure_is_what_chordsf_fits():
    import numpy as np

    from sfapprox.sf.model import ChordSF

    X = np.random.default_rng(0).random((16, 16))
    for params in ({}, {"support": "symmetric"}, {"support": "butterfly"}, {"base": 3}, {"n_factors": 6}):
        config = sf_structure(16, **params)
        est = ChordSF(max_iter=2, device="cpu", **params).fit(X)
        assert (est.n_stored_, est.factors_.shape[0]) == (config.count, config.n_factors), params
    assert sf_structure(36) == sf_config_for_budget(36, sf_count(36))


# --------------------------------------------------------------------------- budgets above N^2


def test_budgets_above_n_squared_are_clamped_and_say_so():
    b = resolve_budget("1e30", 16)
    assert b.value == 256 and b.requested == int(1e30)
    assert b.spec == "1e30 (clamped to N^2 = 256)"
    assert "above the 256 entries" in b.note
    assert resolve_budget("256", 16).value == resolve_budget(1.0, 16).value == 256  # exactly N^2: untouched
    assert resolve_budget("256", 16).note is None and resolve_budget("257", 16).value == 256
    assert resolve_budget("sf", 16).value == sf_count(16) > 256  # SF's own count is never clamped


def test_a_clamped_budget_says_its_count_with_thousands_separators():
    """The note wrote a budget of 1,230,000 on a 1,000 x 1,000 matrix as "1.23e+06 stored numbers" (``.3g``),
    where every other count in a message is written out; a count read from a float beyond its exact digits
    (``1e30``) keeps three significant digits, not the float's 31."""
    assert "budget 1230000 (1,230,000 stored numbers) is above the 1,000,000 entries" in \
        resolve_budget("1230000", 1000).note
    assert "budget 1e30 (1e+30 stored numbers)" in resolve_budget("1e30", 16).note


def test_huge_budgets_give_bounded_structures_at_once():
    import time

    from sfapprox.hybrid.grid import sf_lr_splits, sf_s_splits

    start = time.perf_counter()
    for n in (4, 16, 100):
        config = sf_config_for_budget(n, 10**30)
        assert config.n_factors <= max(n, 1) and config.count <= n * n * len(chord_offsets(n))
        for splits in (sf_lr_splits(n, 10**30, config), sf_s_splits(n, 10**30, config, count_indices=True)):
            assert all(s.count <= 10**30 and s.rank <= n and s.n_sparse <= n * n for s in splits)
    assert time.perf_counter() - start < 5


@pytest.fixture
def small(tmp_path):
    import numpy as np

    path = tmp_path / "m.npy"
    np.save(path, np.random.default_rng(0).random((16, 16)))
    return path


@pytest.mark.parametrize("budget", ["1e30", "1e7"])
def test_every_entry_point_clamps_a_huge_budget(tmp_path, small, budget):
    import json

    from typer.testing import CliRunner

    from sfapprox.cli import app

    run = CliRunner().invoke
    common = ["--iters", "3", "--device", "cpu", "--quiet"]
    res = run(app, ["compare", str(small), "--methods", "sf,tsvd,sf+lr", "--budget", budget, *common,
                    "--json", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["budget"] == 256 and data["budget_spec"] == f"{budget} (clamped to N^2 = 256)"
    assert all(r["nnz"] <= 256 for r in data["results"] if r["status"] == "ok")

    res = run(app, ["sweep", str(small), "--budgets", f"{budget},0.9", *common, "--json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    assert "256" in res.output

    res = run(app, ["fit", str(small), "--budget", budget, *common, "--json", str(tmp_path / "f.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "f.json").read_text())["nnz"] <= 256

    manifest = tmp_path / "m.toml"
    manifest.write_text('[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 16}\n')
    res = run(app, ["batch", str(manifest), "--out-dir", str(tmp_path / "out"), "--methods", "tsvd",
                    "--budget", budget, *common])
    assert res.exit_code == 0, res.output
    record = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[0])
    assert record["status"] == "ok" and record["budget"] == 256 and "clamped" in record["budget_spec"]


def test_a_budget_of_1_says_it_is_all_of_n2():
    from sfapprox.budget import resolve_budget

    one = resolve_budget(1, 10)
    assert one.value == 100 and one.note.startswith("budget 1 is the fraction 1 of N²: all 100 entries")
    assert resolve_budget(0.5, 10).note is None and resolve_budget(2, 10).note is None


def test_a_budget_of_1_at_n_1_needs_no_note():
    """At N = 1 the fraction 1 and the count 1 are the same one entry: a sweep's own budget 1 there said
    "budget 1 is the fraction 1 of N^2" though no budget was typed."""
    from sfapprox.budget import resolve_budget

    one = resolve_budget("1", 1)
    assert one.value == 1 and one.note is None


def test_budget_messages_write_n_squared_as_the_others_do():
    """Budget messages wrote N^2 in UTF-8 output where every other message writes N² (spelled N^2 where the
    stream cannot write it, formats.to_ascii)."""
    from sfapprox.budget import parse_budget

    for bad, says in (("abc", "a fraction of N² in (0, 1]"), ("-3", "a fraction of N² in"),
                      ("2.0", "a fraction of N² in (0, 1] (0.02 for 2%)")):
        with pytest.raises(ParameterError, match=re.escape(says)):
            parse_budget(bad)


def test_sfs_own_count_above_n_squared_stands_and_says_so():
    """README promised no budget above N^2; "sf" on a small matrix is one (SF's structure needs it), and
    nothing said so."""
    big = resolve_budget("sf", 34)
    assert big.value == 1428 > 34 * 34 and big.dense == 1156
    assert "above the 1,156 entries of the matrix" in big.note and "not capped" in big.note
    assert resolve_budget("sf", 100).note is None and resolve_budget("sf", 100).dense is None


def test_counts_refuse_a_negative_or_fractional_part_and_ranks_for_a_negative_budget_are_zero():
    """tsvd_count(16, -1) was -33 and tsvd_rank_for_budget(16, -5) was -1 (its docstring: 0 if none fits)."""
    from sfapprox.budget import nmf_count, nmf_rank_for_budget, nystrom_count, sparse_count, tsvd_count, tsvd_rank_for_budget

    assert tsvd_rank_for_budget(16, -5) == 0 and nmf_rank_for_budget(16, -5) == 0
    # (no entries store nothing: the zero matrix's CSR, its row pointers all 0, as a rank-0 TSVD)
    assert tsvd_count(16, np.int64(2)) == 66 and sparse_count(16, 1) == 19 and sparse_count(16, 0) == 0
    for count, value in ((tsvd_count, -1), (nmf_count, 1.5), (nystrom_count, -2), (sparse_count, True)):
        with pytest.raises(ParameterError, match="must be a whole number >= 0"):
            count(16, value)


def test_the_budgets_counts_take_a_part_as_the_int_constraint_does():
    """A count's part (``budget._whole``) is what ``Interval(int, 0)`` accepts: a whole number >= 0, a numpy
    int or one past a float's range included, never a bool, a float or None."""
    from sfapprox.budget import tsvd_count

    assert tsvd_count(4, 10**400) == 10**400 * 9 and tsvd_count(4, np.int32(2)) == 18
    for value in (-1, 1.0, True, None, np.float64(2.0)):
        with pytest.raises(ParameterError, match="rank must be a whole number >= 0"):
            tsvd_count(4, value)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 4097])
def test_a_budget_under_one_number_names_the_least_fraction_that_is_one(n):
    """The refusal said only 'less than one stored number' (at N = 1, '--budget 0.5' had no way out
    named); the fraction it names now is one number at least, to the digits shown; N thousands separated."""
    with pytest.raises(BudgetError, match=r"less than one stored number for N=\d{1,3}(,\d{3})*; give a fraction of N² of at least "
                                          r"(\S+), a count above 1, or 'sf'") as info:
        resolve_budget(0.5 / (n * n), n)
    least = re.search(r"at least (\S+),", str(info.value)).group(1)
    assert resolve_budget(least, n).value >= 1


@pytest.mark.parametrize("fraction, n, count", [(0.009, 3000, 81_000), ("0.009", 3000, 81_000), (0.07, 100, 700),
                                                ("1e-3", 3000, 9_000), (0.3, 10, 30), ("0.0001", 3000, 900)])
def test_a_fraction_of_n_squared_is_the_count_it_names_not_one_less(fraction, n, count):
    """0.009 of 3,000² is 81,000; in floats 0.009 * 9e6 is 80,999.99999999999, and a sweep's row read
    "80,999" between 72,000 and 90,000."""
    assert resolve_budget(fraction, n).value == count


def test_the_zero_matrix_is_held_in_no_numbers_within_any_budget():
    """A budget below one rank was refused for the zero matrix at N <= 2 (SF's budget there), while at
    N = 5 the same methods stored 0 numbers: rank 0 holds it exactly, within any budget.  A nonzero
    matrix is refused as before (a fit storing nothing is no approximation)."""
    from sfapprox.budget import rank_within, tsvd_count, tsvd_rank_for_budget

    asked = []

    def zero():
        asked.append(True)
        return True

    assert rank_within(2, None, 4, tsvd_rank_for_budget, tsvd_count, "TSVD", zero=zero) == 0
    assert rank_within(5, None, 60, tsvd_rank_for_budget, tsvd_count, "TSVD", zero=zero) == 5  # (then 0 kept)
    assert len(asked) == 1  # asked only below one rank
    for not_zero in (None, lambda: False):
        with pytest.raises(BudgetError, match="budget 4 is below the smallest fit of a 2 x 2 matrix \\(one rank: 5 "):
            rank_within(2, None, 4, tsvd_rank_for_budget, tsvd_count, "TSVD", zero=not_zero)


#: The one sentence every method gives for a budget below its smallest fit (budget.below_smallest).
BELOW_SMALLEST = re.compile(r"^budget ([0-9,]+) is below the smallest fit of a ([0-9,]+) x \2 matrix "
                            r"\((.+): ([0-9,]+) stored numbers?\)$")


def _below(reason: str, budget: int, n: int, need: int) -> bool:
    """Whether ``reason`` is :data:`BELOW_SMALLEST`'s sentence for ``budget``, ``n`` and ``need``."""
    match = BELOW_SMALLEST.match(reason or "")
    return bool(match) and (int(match[1].replace(",", "")), int(match[2].replace(",", "")),
                            int(match[4].replace(",", ""))) == (budget, n, need)


@pytest.mark.parametrize("n", [16, 12])
def test_every_method_refuses_a_budget_below_its_smallest_fit_in_one_sentence(n):
    """Each method said its own sentence ("is too small for any full-support Chord factorization", "is below
    one rank", "the budget 1 holds no sparse entry ..."), so a sweep's notes, which merge a reason given at
    several budgets, could not merge RPCA's; now one sentence, naming the smallest fit and its stored numbers,
    which are the row's smallest budget."""
    from sfapprox._base import RunContext, get_method
    from sfapprox._settings import FitSettings
    from sfapprox.comparison import available_methods, run_method

    A = np.random.default_rng(0).random((n, n))
    X = A @ A.T  # symmetric PSD and non-negative: every method applies, so the budget is the one reason
    for count_indices in (True, False):
        context = RunContext(FitSettings(device="cpu", time_limit=1), count_indices=count_indices)
        for name in available_methods():
            need = get_method(name).min_budget(n, context)
            if need is None:  # never applies (the butterfly support at N = 12)
                continue
            for budget in sorted({0, need - 1}):
                row = run_method(name, X, budget, context)
                assert row.status == "not applicable" and _below(row.reason, budget, n, need), (name, row.reason)


def test_a_budget_below_the_smallest_fit_is_said_before_the_memory_limit_from_columns():
    """From columns under a small memory limit, rsvd at budget 15 of a 16 x 16 matrix said that its 11 KiB
    were over the limit (at budget 2: that one rank is 33 numbers): no limit would make it fit."""
    from sfapprox import compare
    from sfapprox.sources import ArraySource

    A = np.random.default_rng(0).random((16, 16))
    X = A @ A.T  # symmetric PSD: Nyström applies, so its reason is the budget's
    names = ["sf", "rsvd", "nystrom", "sparse", "monarch"]  # every method from columns whose smallest fit is > 15
    c = compare(ArraySource(X), names, budget=15, max_memory=1024, time_limit=1)
    assert c.matrix["path"] == "columns"
    for r in c.results:
        assert r.status == "not applicable" and _below(r.reason, 15, 16, r.min_budget), (r.method, r.reason)


def test_an_estimator_says_a_budget_below_its_smallest_fit_before_its_memory_limit():
    """TruncatedSVD, NMF, the hierarchical butterfly and the hybrids checked the memory limit first: at
    budget 1 under a 1-byte limit they said their working arrays were over it, where no limit makes that
    budget fit."""
    from sfapprox import NMF, ChordLowRank, ChordSparse, TruncatedSVD
    from sfapprox.baselines.butterfly_hier import HierarchicalButterfly

    X = np.random.default_rng(0).random((16, 16))
    for est in (TruncatedSVD(budget=1, max_memory=1), NMF(budget=1, max_memory=1),
                HierarchicalButterfly(budget=1, max_memory=1),
                ChordLowRank(budget=1, sf_params={"max_memory": 1}, device="cpu"),
                ChordSparse(budget=1, sf_params={"max_memory": 1}, device="cpu")):
        with pytest.raises(BudgetError, match="budget 1 is below the smallest fit of a 16 x 16 matrix"):
            est.fit(X)


def test_the_rows_and_fits_say_which_rule_counted_their_sparse_entries():
    """budget.rpca_count and hybrid_count count values only by default (the paper's rule) where compare charges
    positions too: each row with free-position entries, its fit and its operator say which rule its count used,
    and the count is that rule's."""
    from sfapprox import compare

    X = np.random.default_rng(0).random((16, 16))
    for ci in (True, False):
        for r in compare(X, ["rpca", "rpca-pcp", "sf+s"], budget=100, count_indices=ci, time_limit=1,
                         device="cpu").results:
            assert r.status == "ok" and r.params["count_indices"] is ci and r.operator.count_indices is ci
            assert r.estimator.params_["count_indices"] is ci, r.method
            op = r.operator
            assert r.nnz == (op.chord.values.size if op.chord is not None else 0) + rpca_count(
                16, op.rank, op.sparse.nnz, count_indices=ci) <= 100, r.method


def test_over_the_budget_separates_thousands():
    """"stores 12345 numbers, over the budget of 10000" beside tables printing 12,345; a rank to choose
    stays as it is typed back (--rank)."""
    from sfapprox.budget import check_within, rpca_sparse_for_budget

    with pytest.raises(BudgetError, match="stores 12,345 numbers, over the budget of 10,000; lower"):
        check_within(12_345, 10_000, "rank 3", "lower the rank")
    with pytest.raises(BudgetError, match=r"1,000 x 1,000 matrix stores 40,020 numbers, over the budget of 25,000; "
                                          r"choose a rank of at most 12$"):
        rpca_sparse_for_budget(1_000, 25_000, 20)


def test_rank_advice_names_what_fits_where_no_rank_does():
    """Below one rank's count the advice was "choose a rank of at most 0": it names rank 0 with the
    sparse entries that fit, or, where not even one entry fits, to raise the budget."""
    from sfapprox.budget import rpca_sparse_for_budget

    with pytest.raises(BudgetError, match=r"over the budget of 15; even rank 1 stores 21 numbers: choose rank 0, "
                                          r"the sparse part alone \(7 entries fit\)$"):
        rpca_sparse_for_budget(10, 15, 3, count_indices=True)
    with pytest.raises(BudgetError, match=r"over the budget of 1; even one sparse entry stores 2 numbers: "
                                          r"raise the budget \(rank 1 needs 21\)$"):
        rpca_sparse_for_budget(10, 1, 3, count_indices=True)
    with pytest.raises(BudgetError) as info:
        rpca_sparse_for_budget(10, 20, 1)
    assert "at most 0" not in str(info.value) and "(20 entries fit)" in str(info.value)
