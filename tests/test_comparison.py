import re

import numpy as np
import pytest
from scipy.sparse import eye_array, random_array

from sfapprox import FitSettings, ParameterError, RobustPCA, SfapproxError, TruncatedSVD, compare
from sfapprox._base import RunContext
from sfapprox.comparison import available_methods, run_method
from sfapprox.sources import KernelMatrix

CPU = FitSettings(device="cpu", max_iter=30)


def test_every_method_within_budget_and_scored_alike():
    X = np.random.default_rng(0).random((20, 20))
    for budget in ("sf", 0.3, 150):
        c = compare(X, ["sf", "tsvd"], budget=budget, settings=CPU)
        assert c.results[1].status == "ok"
        for r in c.results:
            assert r.status in ("ok", "not applicable")
            if r.status == "ok":
                assert r.nnz <= c.budget
                assert r.fro_error == pytest.approx(r.rel_error * np.linalg.norm(X))


def test_sf_too_small_budget_is_not_applicable():
    X = np.random.default_rng(1).random((40, 40))
    c = compare(X, ["sf", "tsvd"], budget=500, settings=CPU)
    sf, tsvd = c.results
    assert sf.status == "not applicable" and "below the smallest fit" in sf.reason and sf.fro_error is None
    assert tsvd.status == "ok" and c.winner() is None  # one method scored: no contest, no winner


def test_sf_adapts_to_larger_budget():
    X = np.random.default_rng(2).random((24, 24))
    c = compare(X, ["sf"], budget=0.9, settings=CPU)
    r = c.results[0]
    assert r.status == "ok" and int(0.9 * 24 * 24) * 0.9 <= r.nnz <= int(0.9 * 24 * 24)


def test_unknown_method():
    with pytest.raises(ParameterError, match="unknown method"):
        compare(np.eye(4), ["svd++"])
    with pytest.raises(ParameterError, match="unknown method"):
        run_method("nope", np.eye(4), 10, RunContext(CPU))
    assert {"sf", "tsvd"} <= set(available_methods())


def test_interrupted_sf_stops_the_comparison():
    def interrupt(info):
        raise KeyboardInterrupt

    seen = []
    c = compare(np.random.default_rng(3).random((16, 16)), ["sf", "tsvd", "nmf"], device="cpu", max_iter=50,
                callback=interrupt, on_result=seen.append)
    # tsvd (closed form) ran before sf; nmf, after sf, was never started.  Rows keep the asked order.
    assert [(r.method, r.status) for r in c.results] == [("sf", "interrupted"), ("tsvd", "ok")]
    assert [r.method for r in seen] == ["tsvd", "sf"]
    assert c.results[0].fro_error is not None


def test_paper_protocol_uses_reference_structure_and_paper_rank():
    from sfapprox.budget import paper_tsvd_rank

    assert [paper_tsvd_rank(n) for n in (24, 36, 80, 306)] == [13, 18, 25, 41]
    X = np.random.default_rng(5).random((24, 24))
    c = compare(X, ["sf", "tsvd"], budget="sf", device="cpu", max_iter=5, protocol="paper")
    assert c.results[1].params["rank"] == 13 and c.results[0].params["n_factors"] == 5
    with pytest.raises(ParameterError, match="protocol"):
        compare(X, ["tsvd"], protocol="fast")


def test_each_support_is_a_method_at_the_same_budget():
    X = np.random.default_rng(6).random((32, 32))
    c = compare(X, ["sf", "sf-symmetric", "sf-butterfly"], settings=CPU)
    assert [r.status for r in c.results] == ["ok"] * 3
    assert [r.params["support"] for r in c.results] == ["chord", "symmetric", "butterfly"]
    assert all(r.nnz <= c.budget for r in c.results)
    assert c.results[0].nnz == c.budget  # the reference structure is SF's own budget
    assert c.results[2].nnz == 2 * 32 * 5  # the butterfly has one structure: 2 N log2 N
    odd = compare(X[:30, :30], ["sf-butterfly", "tsvd"], settings=CPU)
    assert odd.results[0].status == "not applicable" and "power of two" in odd.results[0].reason
    small = compare(X, ["sf-butterfly", "sf-symmetric"], budget=200, settings=CPU)
    assert [r.status for r in small.results] == ["not applicable"] * 2


def test_fixed_structure_over_budget_is_not_applicable():
    X = np.random.default_rng(7).random((24, 24))
    r = compare(X, ["sf"], budget=0.5, device="cpu", max_iter=5, protocol="paper").results[0]
    assert r.status == "not applicable" and "over the budget 288" in r.reason
    r = compare(X, ["sf"], budget=0.5, device="cpu", max_iter=5, structure={"n_factors": 9}).results[0]
    assert r.status == "not applicable" and "9 factors" in r.reason


def test_a_method_whose_fit_would_pass_the_memory_limit_is_refused_before_it_runs(tmp_path):
    """The closed-form baselines declare their measured working memory; compare checks it first.
    A method that needs the matrix in memory is refused; one that works from columns runs from
    the formed matrix's column blocks instead, scored exactly like the others, and says so."""
    from sfapprox import FitSettings, compare

    from sfapprox._validation import LIBRARY_WORKING_SET

    X = np.random.default_rng(0).random((40, 40))
    libraries = LIBRARY_WORKING_SET  # counted in every check, besides the arrays
    # TSVD's X and exact SVD (X + 8 N^2) fit in 9; the hierarchical butterfly's 5 padded 64 x 64 (and
    # the compiled kernels its scoring loads) do not
    roomy = compare(X, ["tsvd", "butterfly-hier"],
                    settings=FitSettings(max_memory=9 * 8 * 40 * 40 + libraries, device="cpu"))
    tsvd, hier = roomy.results
    assert tsvd.status == "ok" and "path" not in tsvd.params
    # over the limit: "not applicable" under it (it was "failed", while tsvd from columns said n/a)
    assert hier.status == "not applicable" and "butterfly-hier: its fit of a 40 x 40 matrix" in hier.reason
    # X and the scoring's 2 dense copies fit; TSVD's 9, Monarch's 5 and sparse's 6 do not
    limit = 3 * 8 * 40 * 40 + libraries
    names = ["tsvd", "butterfly-hier", "monarch", "sparse"]
    c = compare(X, names, settings=FitSettings(max_memory=limit, device="cpu"))
    free = compare(X, names[2:], settings=FitSettings(device="cpu"))
    tsvd, hier, monarch, sparse = c.results
    assert tsvd.status == "not applicable" and "tsvd: its fit of a 40 x 40 matrix" in tsvd.reason
    assert hier.status == "not applicable"
    for row, alone in zip((monarch, sparse), free.results):
        assert row.status == "ok" and row.params["path"] == "columns" and "path" not in alone.params
        assert row.fro_error == pytest.approx(alone.fro_error, rel=1e-9) and row.nnz == alone.nnz
    assert any(n.startswith("monarch, sparse: fitted from the matrix's column blocks") for n in c.notes)
    assert not any("column blocks" in n for n in free.notes)
    # A saved fit made from columns elsewhere is scored here, not fitted: no such note for it.
    from sfapprox import save_factors

    save_factors(tmp_path / "sparse.h5", sparse.operator, kind="sparse", fit=sparse.params)
    again = compare(X, ["tsvd"], settings=FitSettings(device="cpu"), include=[tmp_path / "sparse.h5"])
    assert again.results[1].params["path"] == "columns"
    assert not any("column blocks" in n for n in again.notes)


def test_rpca_over_the_memory_limit_runs_godec_from_columns():
    """GoDec's dense work arrays over max_memory: the fit runs from X's column blocks (PCP refuses)."""
    from sfapprox import FitSettings, RobustPCA
    from sfapprox._errors import ResourceError

    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 4)) @ rng.standard_normal((4, 60))
    X[rng.integers(0, 60, 30), rng.integers(0, 60, 30)] += 5.0
    from sfapprox._validation import LIBRARY_WORKING_SET

    small = 5 * 8 * 60 * 60 + LIBRARY_WORKING_SET  # far below its dense work arrays (rpca.work_bytes)
    est = RobustPCA(budget=1500, max_memory=small, random_state=0).fit(X)
    assert est.params_["path"] == "columns" and est.n_stored_ <= 1500
    assert np.linalg.norm(X - est.to_dense()) < 0.5 * np.linalg.norm(X)
    with pytest.raises(ResourceError, match="dense work arrays"):
        RobustPCA(budget=1500, method="pcp", max_memory=small).fit(X)
    row = compare(X, ["rpca"], budget=1500, settings=FitSettings(max_memory=small, device="cpu")).results[0]
    assert row.status == "ok" and row.params["path"] == "columns"


def test_closed_form_methods_run_first_and_leave_their_time_to_the_others():
    seen = []
    X = np.random.default_rng(5).random((16, 16))
    c = compare(X, ["sf", "tsvd", "rpca", "sparse"], settings=FitSettings(device="cpu", max_iter=20),
                on_result=seen.append)
    assert [r.method for r in seen] == ["tsvd", "sparse", "sf", "rpca"]  # closed form first, then as asked
    assert [r.method for r in c.results] == ["sf", "tsvd", "rpca", "sparse"]  # rows in the order asked
    limits = {r.method: r.time_limit for r in c.results}
    # 120 s shared by 4: the closed-form pair took ~0 s of their 30 each, so sf gets the 60 s cap.
    assert limits["tsvd"] == pytest.approx(30.0, abs=0.5) and limits["sf"] == pytest.approx(60.0, abs=0.5)
    assert c.settings["time_limit"] == "auto"
    fixed = compare(X, ["sf", "tsvd"], settings=FitSettings(device="cpu", max_iter=20, time_limit=3))
    assert {r.time_limit for r in fixed.results} == {3.0}


def test_positions_are_charged_by_default():
    X = np.zeros((12, 12))
    X[np.arange(12), (np.arange(12) * 5) % 12] = np.arange(1, 13)
    charged = compare(X, ["rpca"], budget=60, settings=CPU).results[0]
    free = compare(X, ["rpca"], budget=60, settings=CPU, count_indices=False).results[0]
    assert charged.params["count_indices"] is True and charged.nnz == 2 * charged.params["n_sparse"]
    assert free.params["count_indices"] is False and free.nnz == free.params["n_sparse"] + free.params["rank"] * 25


def test_a_source_too_big_for_the_memory_limit_is_compared_from_columns():
    """The streaming path at small N, forced by a small memory limit, against the in-memory path."""
    from sfapprox.sources import KernelMatrix

    rng = np.random.default_rng(7)
    P = np.concatenate([rng.standard_normal((100, 3)) * 0.5 + rng.standard_normal(3) * 3 for _ in range(4)])
    K = KernelMatrix(P, bandwidth=0.8)
    settings = FitSettings(device="cpu", max_iter=20, time_limit=None)
    small = 3 * K.formed_bytes - 1  # forming it and scoring would pass this limit
    streamed = compare(K, ["nystrom", "rsvd", "tsvd"], budget=0.1, settings=settings.replace(max_memory=small))
    formed = compare(K, ["nystrom", "rsvd", "tsvd"], budget=0.1, settings=settings)
    s, f = ({r.method: r for r in c.results} for c in (streamed, formed))
    assert streamed.matrix["path"] == "columns" and "formed" in formed.notes[-1]
    assert s["tsvd"].status == "not applicable" and "the methods that work from columns: sf, sf-symmetric, rsvd, nystrom" in s["tsvd"].reason
    for m in ("nystrom", "rsvd"):
        assert s[m].error_estimate["exact"] and s[m].fro_error == pytest.approx(f[m].fro_error, rel=1e-9)
        assert s[m].nnz == f[m].nnz <= streamed.budget
    assert streamed.winner() == min(("nystrom", "rsvd"), key=lambda m: f[m].fro_error)
    assert formed.winner() == "tsvd"  # the exact SVD, which needs the matrix formed


def test_a_comparison_from_columns_where_no_method_ran_does_not_claim_scoring():
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(3).standard_normal((400, 3)), bandwidth=0.8)
    settings = FitSettings(device="cpu", max_iter=20, time_limit=None, max_memory=3 * K.formed_bytes - 1)
    c = compare(K, ["tsvd"], budget=0.1, settings=settings)  # tsvd needs X formed: it cannot run
    note = next(n for n in c.notes if "not formed" in n)
    assert "no method gave a surrogate to score" in note and "random columns" not in note


def test_estimated_errors_overlapping_intervals_declare_no_winner():
    from sfapprox.results import Comparison, MethodResult

    rows = [MethodResult("nystrom", "ok", 10, 1.00, 0.10, 1.0, error_estimate={"fro_interval": [0.95, 1.05]}),
            MethodResult("rsvd", "ok", 10, 1.02, 0.102, 1.0, error_estimate={"fro_interval": [0.97, 1.07]}),
            MethodResult("sf", "ok", 10, 2.0, 0.2, 1.0, error_estimate={"fro_interval": [1.9, 2.1]})]
    c = Comparison({"name": "k", "n": 100}, 100, "sf", rows)
    assert c.winner() is None and c.verdict()["winner"] is None and "no clear winner" in c.verdict()["text"]
    assert not any("★" in row["method"] for row in c.tables()[0].rows)
    assert c.tables()[0].rows[0]["fro_error"] == "1 ± 0.05"
    apart = Comparison({"name": "k", "n": 100}, 100, "sf", rows[::2])
    assert apart.winner() == "nystrom"


@pytest.mark.parametrize("blocks", [False, True])
def test_sf_and_hybrid_rows_keep_their_own_exact_score_and_the_others_are_scored_once(monkeypatch, blocks):
    # SF and the hybrids score themselves with operator_error against X; the comparison takes that
    # number instead of a second pass, and scores every other method itself, once.
    from sfapprox import comparison, metrics

    if blocks:  # the column-block scoring at small N (the path of N > 2,048)
        monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 8)
        monkeypatch.setattr(metrics, "SCORING_BLOCK", 7)
    scored = []
    real = comparison.operator_error
    monkeypatch.setattr(comparison, "operator_error", lambda X, op, *a, **k: scored.append(op) or real(X, op, *a, **k))
    X = np.random.default_rng(3).random((30, 30))
    c = compare(X, ["sf", "sf+lr", "tsvd", "sparse"], settings=CPU)
    rows = {r.method: r for r in c.results}
    assert [type(op).__name__ for op in scored] == [type(rows["tsvd"].operator).__name__,
                                                    type(rows["sparse"].operator).__name__]
    for name in ("sf", "sf+lr", "tsvd", "sparse"):
        want = metrics.frobenius_error(X, rows[name].operator.to_dense())
        assert rows[name].fro_error == pytest.approx(want[0], rel=1e-12), name
        assert rows[name].rel_error == pytest.approx(want[1], rel=1e-12), name


def test_an_estimator_that_left_its_error_unknown_is_scored():
    from sfapprox.comparison import row_error
    from sfapprox.metrics import frobenius_error

    X = np.random.default_rng(4).random((12, 12))
    sf = compare(X, ["sf"], settings=CPU).results[0].estimator
    sf.fro_error_ = None  # as a fit from columns of a source it cannot pass over leaves it
    assert row_error(sf, X) == pytest.approx(frobenius_error(X, sf.to_dense()), rel=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_scoring_memory_is_checked_for_the_path_that_will_run(monkeypatch, sparse):

    from sfapprox import ResourceError, metrics
    from sfapprox.comparison import check_scoring_memory
    from sfapprox.io import as_loaded

    X = random_array((300, 300), density=0.01, random_state=0, format="csr") if sparse else np.eye(300)
    loaded = as_loaded(X, "X")
    from sfapprox._validation import LIBRARY_WORKING_SET

    held = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if sparse else X.nbytes  # X counts: it is held
    held += LIBRARY_WORKING_SET  # and so do the libraries
    dense_need = held + metrics.scoring_bytes(300) + (300 * 300 * 8 if sparse else 0)
    check_scoring_memory(loaded, dense_need)
    with pytest.raises(ResourceError, match="dense arrays"):
        check_scoring_memory(loaded, dense_need - 1)
    monkeypatch.setattr(metrics, "DENSE_SCORING_MAX_N", 100)  # now scored by column blocks
    monkeypatch.setattr("sfapprox.comparison.DENSE_SCORING_MAX_N", 100)
    monkeypatch.setattr(metrics, "SCORING_BLOCK", 16)
    block_need = held + metrics.scoring_bytes(300) + (held - LIBRARY_WORKING_SET if sparse else 0)
    assert block_need < dense_need
    check_scoring_memory(loaded, block_need)
    with pytest.raises(ResourceError, match="column blocks"):
        check_scoring_memory(loaded, block_need - 1)


def test_methods_memory_refuses_only_when_nothing_could_run():

    from sfapprox import ResourceError
    from sfapprox.comparison import check_methods_memory
    from sfapprox.io import as_loaded

    # TSVD's fit: 3 N^2 float64 = 600 MB, and the libraries' working set (64 MiB)
    loaded = as_loaded(eye_array(5000, format="csr"), "big")
    with pytest.raises(ResourceError, match=r"big: no method asked for .* \(tsvd needs about 636\.2 MiB, nmf needs"):
        check_methods_memory(["tsvd", "nmf"], loaded, 100 << 20)
    check_methods_memory(["tsvd"], loaded, 1 << 30)  # it fits
    # one that works from columns (sparse) or checks its own memory (sf) keeps the comparison going
    check_methods_memory(["tsvd", "sparse"], loaded, 100 << 20)
    check_methods_memory(["tsvd", "sf"], loaded, 100 << 20)


def test_a_method_fitted_from_the_columns_of_the_matrix_in_memory_gets_the_rest_of_the_limit(monkeypatch):
    """X stays held while a method over its limit reads X's columns: the source it gets sizes its passes
    for the limit less X (it was sized for the machine's default limit)."""
    from sfapprox import FitSettings
    from sfapprox._validation import LIBRARY_WORKING_SET
    from sfapprox.baselines import sparse

    seen = []
    real = sparse.SparseApproximation.fit
    monkeypatch.setattr(sparse.SparseApproximation, "fit", lambda self, X, **k: seen.append(X) or real(self, X, **k))
    X = np.random.default_rng(0).random((40, 40))
    limit = 3 * X.nbytes + LIBRARY_WORKING_SET  # scoring fits; sparse's 6 arrays do not
    row = compare(X, ["sparse"], settings=FitSettings(max_memory=limit, device="cpu")).results[0]
    assert row.params["path"] == "columns" and seen[0].max_memory == limit - X.nbytes



def test_a_source_is_formed_when_it_and_its_scoring_fit_and_forming_it_stays_within_the_limit(monkeypatch):
    """Formed when the matrix and its scoring fit (what check_scoring_memory checks once it is formed; it
    took three dense copies): above DENSE_SCORING_MAX_N that is X and column blocks.  Forming it gives its
    blocks half of what X leaves of the limit, so the formation stays within it too."""
    import tracemalloc

    from sfapprox import comparison, metrics
    from sfapprox.comparison import formable, formed_need
    from sfapprox.sources import KernelMatrix

    for module in (metrics, comparison):
        monkeypatch.setattr(module, "DENSE_SCORING_MAX_N", 50)
    monkeypatch.setattr(metrics, "SCORING_BLOCK", 16)
    from sfapprox import _base
    from sfapprox.sources import _base as source_base

    for module in (_base, source_base):  # the arrays decide, at this small N
        monkeypatch.setattr(module, "LIBRARY_WORKING_SET", 1 << 16)
    K = KernelMatrix(np.random.default_rng(0).standard_normal((1000, 3)))
    limit = formed_need(K)
    assert K.formed_bytes < limit < 2 * K.formed_bytes
    assert formable(K, limit) and not formable(K, limit - 1)
    tracemalloc.start()
    try:
        X = K.to_dense(limit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= limit and np.allclose(X, X.T)
    import torch  # noqa: F401  (imported before measuring: its import's own objects are not the comparison's)

    tracemalloc.start()
    try:
        c = compare(K, ["rsvd"], budget=0.1, max_memory=limit, device="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert c.results[0].status == "ok" and not any("not formed" in note for note in c.notes)
    # The comparison forms it within its limit too: formed under the default limit, one block was the
    # whole matrix and its temporaries, 5 arrays.  (Validating the formed matrix adds half an array here,
    # where the libraries' share of the limit is patched away.)
    assert peak < 2 * K.formed_bytes, (peak / K.formed_bytes, limit / K.formed_bytes)


def test_a_source_whose_methods_all_work_from_columns_is_not_formed_where_formed_it_would_starve_them(tmp_path):
    """Formed, a matrix over half the limit left SF's fit from columns the rest, under its need: a
    higher --max-memory refused what a lower one, comparing from columns, ran."""
    from sfapprox.comparison import better_from_columns
    from sfapprox.sources import open_npy

    path = tmp_path / "x.npy"
    np.save(path, np.eye(300))
    source = open_npy(path)
    tight = 2 * source.formed_bytes - 1  # formed, it would take over half of it
    assert better_from_columns(source, ["sf", "rsvd"], tight)
    assert not better_from_columns(source, ["rsvd", "sparse"], tight)  # their needs are known, and fit
    assert not better_from_columns(source, ["sf", "rsvd"], 1 << 30)  # SF's in-memory fit of it fits
    # under half the limit, but SF's in-memory fit would not fit beside it: SF runs from columns either
    # way, with that much less formed (a kernel of 2,000 points: 255M ran from columns, 260M refused SF)
    assert better_from_columns(source, ["sf", "rsvd"], 10 * source.formed_bytes)
    # tsvd needs it formed, but beside it would not fit either (its need is several copies): forming
    # it would help no method and starve SF
    assert better_from_columns(source, ["sf", "tsvd"], tight)


def test_a_source_is_formed_for_a_method_that_needs_it_and_fits_beside_it(tmp_path, monkeypatch):
    from sfapprox import comparison
    from sfapprox.sources import open_npy

    path = tmp_path / "x.npy"
    np.save(path, np.eye(300))
    source = open_npy(path)
    tight = 2 * source.formed_bytes - 1
    monkeypatch.setattr(comparison, "method_need", lambda spec, n: tight)  # as if tsvd fitted beside it
    assert not comparison.better_from_columns(source, ["sf", "tsvd"], tight)


@pytest.mark.parametrize("changes, named", [({"bogus": 1}, "'bogus'"), ({"time_limt": 1}, "did you mean 'time_limit'"),
                                            ({"a": 1, "seed": 2, "b": 3}, "'a', 'b'")])
def test_an_unknown_setting_keyword_names_compare_and_the_valid_settings(changes, named):
    # not "FitSettings.__init__() got an unexpected keyword argument": the user called compare
    X = np.random.default_rng(0).random((8, 8))
    with pytest.raises(TypeError, match=r"^compare\(\) got .*unexpected keyword") as caught:
        compare(X, "tsvd", **changes)
    assert named in str(caught.value)
    assert "max_iter, time_limit, seed" in str(caught.value)


def test_setting_keywords_still_change_the_settings():
    X = np.random.default_rng(0).random((8, 8))
    assert compare(X, "tsvd", budget=20, seed=2).settings["seed"] == 2


def test_a_method_left_out_of_a_matrix_that_could_be_formed_says_its_own_need(tmp_path):
    """Not formed because forming it would help no method (better_from_columns), TSVD's row says what
    its own fit needs; it said "holds it and its scoring (547 MiB), over the memory limit of 600 MiB"."""
    from sfapprox._base import get_method
    from sfapprox._validation import format_bytes
    from sfapprox.comparison import method_need, needs_formed
    from sfapprox.sources import open_npy

    path = tmp_path / "x.npy"
    np.save(path, np.eye(300))
    source = open_npy(path)
    tsvd = get_method("tsvd")
    formable = needs_formed(source, 10 * source.formed_bytes + (256 << 20), tsvd)
    assert f"its fit there needs about {format_bytes(method_need(tsvd, 300))}, over the memory limit" in formable
    assert "holds it and its scoring" in needs_formed(source, 1 << 10, tsvd)  # could not be formed at all


def test_an_unknown_structure_name_is_refused_before_any_method_runs():
    ran = []
    with pytest.raises(ParameterError, match=r"ChordSF has no parameter 'bogus' \(in structure\)"):
        compare(np.eye(16), ["tsvd", "sf"], structure={"bogus": 0}, on_result=ran.append, device="cpu")
    assert ran == []  # it was a TypeError when SF's turn came, after the others had run


def test_a_stop_names_its_signal_and_the_methods_it_left_unrun(monkeypatch):
    import signal

    from sfapprox import _signals, comparison

    real = comparison.run_method

    def stopped_in_sf(name, *args, **kwargs):
        if name == "sf":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(comparison, "run_method", stopped_in_sf)
    monkeypatch.setattr(_signals, "stop_signal", lambda: signal.SIGTERM)
    c = compare(np.eye(16), ["tsvd", "sf", "sparse", "rpca"], device="cpu")
    rows = {r.method: r for r in c.results}
    assert rows["sf"].reason == "stopped by SIGTERM before it finished"  # "Ctrl-C" whatever the signal before
    left = [m for m in ("sparse", "rpca") if m not in rows]
    assert left and f"not run, the comparison was stopped first: {', '.join(left)}" in c.notes


def _columns_methods():
    from sfapprox._base import methods

    return [name for name, spec in methods().items() if "columns" in spec.access and spec.columns_memory is not None]


def test_every_method_that_works_from_columns_declares_what_it_keeps_there():
    from sfapprox._base import methods

    for name, spec in methods().items():
        if "columns" in spec.access:  # SF's fits check their own need
            assert spec.columns_memory is not None or name.startswith("sf"), name
    assert {"rsvd", "nystrom", "sparse", "rpca", "monarch"} <= set(_columns_methods())


@pytest.mark.parametrize("fraction", [0.02, 0.3])
def test_what_a_fit_from_columns_keeps_is_within_its_declared_need(fraction):
    """The declared need (checked against --max-memory) covers the fit's measured peak beside its blocks."""
    import tracemalloc
    import warnings

    from sfapprox._base import get_method
    from sfapprox.sources import KernelMatrix

    from sfapprox.sources import BLOCK_SHARE

    n = 600
    K = KernelMatrix(np.random.default_rng(3).standard_normal((n, 3)), bandwidth=1.0)
    K.max_memory = 12 << 20  # blocks of about 100 columns with the most temporaries a pass adds (sparse's 8)
    blocks = BLOCK_SHARE * K.max_memory  # what the check counts for them, as block_width sizes them
    budget = int(fraction * n * n)
    context = RunContext(settings=FitSettings(device="cpu", time_limit=3, max_memory=1 << 40))
    for name in _columns_methods():
        spec = get_method(name)
        if spec.min_budget(n, context) > budget:
            continue
        est = spec.make(n, budget, context)
        tracemalloc.start()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(K, check_input=False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= spec.columns_memory(n, budget) + blocks, (name, peak, spec.columns_memory(n, budget))


def test_a_method_that_would_keep_more_than_the_limit_from_columns_is_refused_before_its_fit():
    """At a large budget a fit from columns keeps sketches and entries far over the limit: it ran anyway."""
    from sfapprox._base import get_method
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(4).standard_normal((400, 3)), bandwidth=1.0)
    budget = 80_000
    keeps = {m: get_method(m).columns_memory(400, budget) for m in ("rsvd", "sparse")}
    limit = 2 * keeps["rsvd"] + (1 << 20)  # rsvd's passes get the half it leaves; sparse's would not fit
    c = compare(K, ["rsvd", "sparse"], budget=budget, settings=FitSettings(device="cpu", max_memory=limit,
                                                                            time_limit=None))
    rows = {r.method: r for r in c.results}
    assert c.matrix["path"] == "columns" and rows["rsvd"].status == "ok"
    assert rows["sparse"].status == "not applicable" and rows["sparse"].seconds < 0.5
    assert rows["sparse"].reason.startswith("its fit of kernel (400 x 400) from column blocks at a budget of 80,000")
    assert "over the memory limit" in rows["sparse"].reason
    import tracemalloc

    tracemalloc.start()  # what it would have held: over the limit indeed
    try:
        get_method("sparse").make(400, budget, RunContext(settings=FitSettings(device="cpu"))).fit(K)
        assert tracemalloc.get_traced_memory()[1] > limit
    finally:
        tracemalloc.stop()


def test_a_comparison_from_columns_where_no_method_fits_the_limit_is_refused_before_any_work():
    from sfapprox import ResourceError
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(5).standard_normal((300, 3)), bandwidth=1.0)
    seen = []
    with pytest.raises(ResourceError, match=r"kernel: no method asked for fits the memory limit of 1 B from the "
                                            r"columns .* rsvd about .* sparse about"):
        compare(K, ["rsvd", "sparse", "tsvd"], budget=0.1, max_memory=1, device="cpu", callback=seen.append)
    assert seen == []


def test_a_comparison_from_columns_never_changes_the_source_given():
    """Its passes are sized for its limit on a copy: the source's own limit stays as it was, during the
    comparison too (it used to be set for the run and restored after)."""
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(6).standard_normal((200, 3)), bandwidth=1.0)
    K.max_memory = 1 << 40
    seen = []
    c = compare(K, ["rsvd", "sparse"], budget=4_000, settings=FitSettings(device="cpu", max_memory=64 << 20),
                on_result=lambda row: seen.append(K.max_memory))
    assert c.matrix["path"] == "columns" and seen == [1 << 40, 1 << 40] and K.max_memory == 1 << 40


@pytest.mark.parametrize("given", ["linear_operator", "array", "estimator", "count"])
def test_include_without_a_stored_count_is_refused_before_any_fit(given):
    """An array or a plain LinearOperator has no n_stored: an AttributeError once every method had been fitted."""
    import scipy.sparse.linalg as spla

    from sfapprox import TruncatedSVD
    from sfapprox.sources import ArraySource

    X = np.eye(50)
    fitted = TruncatedSVD(n_components=2).fit(X)
    bad = {"linear_operator": spla.aslinearoperator(X), "array": X, "estimator": fitted,
           "count": type("Counted", (), {"n_stored": -1, "shape": (50, 50)})()}[given]
    ran = []
    for matrix in (X, ArraySource(X)):
        with pytest.raises(ParameterError, match=r"include: 'mine' is a \w+, which does not say how many numbers "
                                                 r"it stores.*operator_"):
            compare(matrix, "tsvd", budget=500, include={"mine": bad}, on_result=ran.append)
    assert ran == []
    # a surrogate operator (an estimator's operator_) is scored like a method
    row = compare(X, "tsvd", budget=500, include={"mine": fitted.operator_}).results[1]
    assert (row.method, row.status, row.nnz) == ("mine", "ok", fitted.n_stored_)


def test_a_device_this_machine_lacks_is_refused_before_any_method(monkeypatch):
    """--device cuda on a CPU-only machine ran tsvd first (and, with tsvd and sparse alone, recorded
    "device": "cuda" and exited 0); a batch wrote a failed line per SF fit."""
    import torch
    from typer.testing import CliRunner

    from sfapprox import DeviceError, compare
    from sfapprox.cli import app

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ran = []
    import sfapprox.comparison as comparison

    monkeypatch.setattr(comparison, "run_method", lambda *a, **k: ran.append(a) or pytest.fail("a method ran"))
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        compare(np.eye(8), "tsvd,sparse", device="cuda")
    result = CliRunner().invoke(app, ["compare", "missing.npy", "--methods", "tsvd", "--device", "cuda"])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output and "missing.npy" not in result.output
    assert not ran


@pytest.mark.filterwarnings("ignore::sfapprox.ConvergenceWarning")
def test_an_included_fit_is_charged_as_this_comparison_charges_its_own(tmp_path):
    """A hybrid saved by a comparison that did not charge its sparse part's positions was held to a
    comparison that does by its own rule: 614 numbers, "ok" and the winner, for 1,098 charged."""
    from sfapprox.factors import save_results
    from sfapprox.sources import ArraySource

    X = np.random.default_rng(0).standard_normal((32, 32))
    save_results(compare(X, "rpca", budget=0.6, time_limit=2, count_indices=False), tmp_path)
    saved = tmp_path / "X.rpca.h5"
    for limit in (None, 20_000):  # in memory, and from columns
        settings = FitSettings(max_memory=limit)
        comparison = compare(ArraySource(X), "tsvd", budget=0.6, include=[saved], settings=settings)
        assert comparison.matrix.get("path") == ("columns" if limit else None)
        assert (comparison.results[-1].nnz, comparison.results[-1].status) == (1098, "not applicable")
        row = compare(ArraySource(X), "tsvd", budget=0.6, include=[saved], count_indices=False,
                      settings=settings).results[-1]
        assert (row.nnz, row.status) == (614, "ok")


def test_a_saved_fit_given_twice_is_one_row(tmp_path, monkeypatch):
    """compare --with k.h5 --with ./k.h5 scored the file twice (saved:w.k and saved:w.k-2), and the
    verdict found no winner between the fit and itself."""
    from sfapprox.factors import save_results

    X = np.random.default_rng(0).standard_normal((16, 16))
    save_results(compare(X, "tsvd", budget=0.5), tmp_path)
    monkeypatch.chdir(tmp_path)
    comparison = compare(X, "sparse", budget=0.5, include=["X.tsvd.h5", tmp_path / "X.tsvd.h5", "./X.tsvd.h5"])
    assert [r.method for r in comparison.results] == ["sparse", "saved:X.tsvd"]


def test_saved_fits_keep_their_order_when_one_is_given_twice(tmp_path, monkeypatch):
    """The rows of --with files are in the order given, a repeat dropped where it comes again."""
    from sfapprox.factors import save_results

    X = np.random.default_rng(0).standard_normal((16, 16))
    save_results(compare(X, "tsvd,sparse", budget=0.5), tmp_path)
    monkeypatch.chdir(tmp_path)
    comparison = compare(X, "tsvd", budget=0.5, include=["X.tsvd.h5", "X.sparse.h5", "./X.tsvd.h5"])
    assert [r.method for r in comparison.results] == ["tsvd", "saved:X.tsvd", "saved:X.sparse"]


def test_a_refusal_from_columns_names_the_limit_that_runs_and_that_limit_runs():
    """The refusal's "needs about X" grows with the limit given (the blocks take half of it): raising
    the limit to X was refused again (28.6 MiB asked at 25M, 30.6 MiB at 29M). It names the least limit
    that runs a method, rounded up, and that limit runs."""
    import re

    from sfapprox import ResourceError
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(0).standard_normal((600, 3)), kernel="rbf", bandwidth=1.5)
    with pytest.raises(ResourceError, match=r"to at least [\d.]+ MiB \(where rsvd runs\)") as info:
        compare(K, "rsvd", budget=0.5, settings=FitSettings(time_limit=2, max_memory=4 << 20))
    least = float(re.search(r"to at least ([\d.]+) MiB", str(info.value)).group(1))
    row = compare(K, "rsvd", budget=0.5, settings=FitSettings(time_limit=2, max_memory=int(least * 2**20))).results[0]
    assert row.status == "ok"
    with pytest.raises(ResourceError):  # a little below it: refused
        compare(K, "rsvd", budget=0.5, settings=FitSettings(time_limit=2, max_memory=int((least - 0.2) * 2**20)))


@pytest.mark.parametrize("spec", [None, 3])
def test_methods_that_are_not_names_are_refused(spec):
    with pytest.raises(ParameterError, match=r"methods must be a name, comma-separated names or a list of names"):
        compare(np.eye(4), spec)


def test_a_linear_operator_is_compared_as_a_source_of_columns():
    from scipy.sparse.linalg import aslinearoperator

    X = np.random.default_rng(4).random((16, 16))
    by_operator = compare(aslinearoperator(X), "tsvd", budget=100)  # "matrix has object dtype" before
    by_array = compare(X, "tsvd", budget=100)
    assert by_operator.results[0].status == "ok"
    assert by_operator.results[0].fro_error == pytest.approx(by_array.results[0].fro_error, rel=1e-10)


def test_load_options_with_a_matrix_already_read_are_refused_everywhere():
    """compare, sweep and fit_matrix ignored load= without a word for a loaded matrix, a source or a
    LinearOperator (an array's was refused)."""
    import scipy.sparse.linalg as spla

    from sfapprox import KernelMatrix, LoadOptions, fit_matrix
    from sfapprox.io import as_loaded
    from sfapprox.sweep import sweep

    X = np.random.default_rng(0).random((12, 12))
    load = LoadOptions(gradient=True)
    for matrix in (X, as_loaded(X, "X"), KernelMatrix(X[:, :3]), spla.aslinearoperator(X)):
        for run in (lambda m: compare(m, "tsvd", load=load), lambda m: sweep(m, [0.5], "tsvd", load=load),
                    lambda m: fit_matrix(m, load=load)):
            with pytest.raises(ParameterError, match="load options apply to a file path"):
                run(matrix)


@pytest.mark.parametrize("columns", [False, True])
def test_a_saved_fit_of_another_size_is_refused_before_any_fit(tmp_path, columns):
    """`compare --with` a fit of a 12 x 12 matrix on a 20 x 20 one fitted every method, then failed."""
    from sfapprox import save_factors
    from sfapprox.baselines.tsvd import TruncatedSVD
    from sfapprox.sources import ArraySource

    rng = np.random.default_rng(0)
    saved = tmp_path / "small.h5"
    save_factors(saved, TruncatedSVD(n_components=2).fit(rng.standard_normal((12, 12))).operator_)
    X = rng.standard_normal((20, 20))
    ran = []
    with pytest.raises(ParameterError, match=r"saved:small: a 12 x 12 surrogate cannot approximate this 20 x 20"):
        compare(ArraySource(X) if columns else X, "tsvd" if not columns else "rsvd", budget=200, include=[saved],
                on_result=ran.append)
    assert ran == []


def test_two_saved_fits_of_one_file_name_are_two_rows(tmp_path):
    """--with a/fit.h5 --with b/fit.h5 gave one row 'saved:fit': the other fit was dropped without a word."""
    from sfapprox import save_factors
    from sfapprox.baselines.tsvd import TruncatedSVD

    X = np.random.default_rng(0).standard_normal((12, 12))
    for folder, rank in (("a", 1), ("b", 2)):
        (tmp_path / folder).mkdir()
        save_factors(tmp_path / folder / "fit.h5", TruncatedSVD(n_components=rank).fit(X).operator_)
    rows = compare(X, "tsvd", budget=100, include=[tmp_path / "a" / "fit.h5", tmp_path / "b" / "fit.h5"]).results
    saved = {r.method: r.nnz for r in rows if r.method.startswith("saved:")}
    assert saved == {"saved:a.fit": 25, "saved:b.fit": 50}


def test_a_sparse_matrix_that_cannot_be_formed_is_compared_from_its_columns_with_exact_errors():
    """compare(scipy sparse) under a limit its dense form and scoring pass is compared from its columns (as
    such a file is read), its low-rank rows scored exactly from its non-zeros: the same errors as the
    comparison that forms it."""

    from sfapprox.sources import SparseSource, formable

    n = 400
    X = random_array((n, n), density=0.02, random_state=5, format="csr")
    limit = 2 << 20
    assert not formable(SparseSource(X), limit)
    streamed = compare(X, ["sparse", "rsvd"], budget=20_000, max_memory=limit, seed=0)
    formed = compare(X, ["sparse", "rsvd"], budget=20_000, seed=0)
    assert streamed.matrix["path"] == "columns" and formed.matrix.get("path") != "columns"
    for a, b in zip(streamed.results, formed.results):
        assert a.status == b.status == "ok" and a.nnz == b.nnz
        assert a.error_estimate["exact"] and a.fro_error == pytest.approx(b.fro_error, rel=1e-6)
    assert streamed.results[1].error_estimate["by_nonzeros"]
    assert any("exactly (rsvd: from X's non-zeros; sparse: by its own pass)" in note for note in streamed.notes)


def test_monarch_from_columns_is_scored_exactly_by_its_own_projection():
    """Monarch's projection from columns gives its error exactly (the slabs' dropped singular values): the
    row keeps it rather than being sampled ("194.4 +- 3.8" for an exact 192.1 at N = 20,000), from a sparse
    matrix's non-zeros and from a dense source's column blocks alike, and the note says how."""

    from sfapprox.sources import ArraySource

    n = 400
    X = random_array((n, n), density=0.02, random_state=6, format="csr")
    streamed = compare(X, ["monarch", "rsvd"], budget=20_000, max_memory=2 << 20, seed=0, time_limit=20)  # (room on a loaded machine)
    formed = compare(X, ["monarch", "rsvd"], budget=20_000, seed=0)
    monarch = streamed.results[0]
    assert streamed.matrix["path"] == "columns" and monarch.params["from"] == "non-zeros"
    assert monarch.error_estimate["exact"] and monarch.params["error_from_pass"]
    assert monarch.fro_error == pytest.approx(formed.results[0].fro_error, rel=1e-9)
    assert monarch.fro_error == pytest.approx(np.linalg.norm(X.toarray() - monarch.operator.to_dense()), rel=1e-9)
    assert any("(rsvd: from X's non-zeros; monarch: by its own pass)" in note for note in streamed.notes)
    dense = np.random.default_rng(1).standard_normal((n, n))
    source = compare(ArraySource(dense), ["monarch"], budget=20_000, max_memory=2 << 20, time_limit=10)
    row = source.results[0]
    assert row.params["from"] == "columns" and row.error_estimate["exact"]
    assert row.fro_error == pytest.approx(np.linalg.norm(dense - row.operator.to_dense()), rel=1e-9)
    assert any("exactly (monarch: by its own pass)" in note for note in source.notes)


def test_a_file_is_opened_under_the_settings_memory_limit(tmp_path):
    """compare(path, max_memory=...) opened the file under the default limit (80% of RAM): a .npy the command
    line maps under --max-memory was loaded whole, and compared formed."""
    X = np.random.default_rng(2).random((300, 300))
    np.save(tmp_path / "x.npy", X)
    c = compare(tmp_path / "x.npy", ["rsvd"], budget=20_000, max_memory=2 << 20, seed=0, time_limit=None)
    assert c.matrix["path"] == "columns" and c.results[0].status == "ok"


def test_sf_scored_exactly_by_its_own_fit_is_not_scored_again(monkeypatch):
    """Without a time limit SF's fit from a sparse matrix's columns scores itself by a pass over them, and its
    row says so (the comparison's scoring then leaves it); under a time limit that pass is not made (it took
    263 s after a 10 s fit at N = 60,025, and the comparison scored the row again)."""

    from sfapprox.comparison import _scored_by_own_pass
    from sfapprox.sf.model import ChordSF
    from sfapprox.sources import SparseSource

    monkeypatch.setattr(ChordSF, "_fits_in_memory", lambda self, X: False)  # its fit from columns, at a small N
    n = 96
    X = random_array((n, n), density=0.1, random_state=1, format="csr")
    source = SparseSource(X)
    untimed = RunContext(FitSettings(time_limit=None, max_iter=5, seed=0, device="cpu"))
    row = run_method("sf", source, 20_000, untimed)
    assert row.params["path"] == "columns" and row.status == "ok"
    assert _scored_by_own_pass(row) and row.error_estimate["exact"]
    assert row.fro_error == pytest.approx(np.linalg.norm(X.toarray() - row.operator.to_dense()), rel=1e-9)
    row = run_method("sf", source, 20_000, RunContext(FitSettings(time_limit=30.0, max_iter=5, seed=0, device="cpu")))
    assert row.status == "ok" and not _scored_by_own_pass(row) and row.fro_error is None


def test_a_loaded_matrix_kept_sparse_is_compared_as_its_file_is(tmp_path):
    """compare(load_matrix(path, keep_sparse=True)) refused what compare(path) ran: the dense scoring of a
    LoadedMatrix held sparse (155.8 MiB under 60 MiB at N = 2,000); it is made a SparseSource as its file is."""
    import scipy.io
    import scipy.sparse as sp

    from sfapprox import load_matrix

    path = tmp_path / "r.mtx"
    scipy.io.mmwrite(path, sp.random(2000, 2000, density=0.005, random_state=0, format="coo"))
    limit = 60 << 20
    loaded = load_matrix(path, keep_sparse=True, max_memory=limit)
    from_file = compare(path, ["sparse", "rsvd"], budget=20_000, max_memory=limit, seed=0)
    from_loaded = compare(loaded, ["sparse", "rsvd"], budget=20_000, max_memory=limit, seed=0)
    assert from_loaded.matrix["path"] == from_file.matrix["path"] == "columns"
    assert from_loaded.matrix["format"] == "mtx" and from_loaded.matrix["path"] == "columns"
    assert [r.fro_error for r in from_loaded.results] == [r.fro_error for r in from_file.results]


# ---------------------------------------------------------------- the API before FitSettings (7ce4959), kept
def _old(record):
    """The deprecation notes of ``record``: each at this file's line, as (message, line)."""
    notes = [w for w in record if w.category is DeprecationWarning]
    assert notes and all(w.filename == __file__ for w in notes), [(w.filename, str(w.message)) for w in record]
    return [str(w.message) for w in notes]


def test_old_compare_keywords_map_to_todays_with_a_note_at_the_callers_line():
    """compare(X=, options=RunOptions(...), approximations=) was a TypeError once RunOptions was removed."""
    import warnings

    import sfapprox

    X = np.random.default_rng(0).random((32, 32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = sfapprox.RunOptions(random_state=2, device="cpu", count_indices=False, protocol="paper",
                                      sf={"max_iter": 20, "time_limit": None, "n_factors": 5, "ftol": 1e-9})
        approximations = {}
        old = compare(X=X, methods=["sf", "tsvd"], budget=1000, options=options, approximations=approximations)
    notes = _old(caught)
    assert [n.split(" is deprecated")[0] for n in notes] == [
        "RunOptions", "compare(X=)", "compare(approximations=)", "compare(options=)"]
    assert "use matrix=" in notes[1] and "operator.to_dense()" in notes[2] and "settings=FitSettings(" in notes[3]
    new = compare(X, ["sf", "tsvd"], budget=1000, settings=FitSettings(seed=2, device="cpu", max_iter=20, time_limit=None),
                  count_indices=False, protocol="paper", structure={"n_factors": 5, "ftol": 1e-9})
    assert old.settings == new.settings and old.settings["structure"] == {"n_factors": 5, "ftol": 1e-9}
    assert [(r.method, r.status, r.nnz, r.fro_error) for r in old.results] == \
        [(r.method, r.status, r.nnz, r.fro_error) for r in new.results]
    assert sorted(approximations) == ["sf", "tsvd"]
    for r in old.results:
        np.testing.assert_array_equal(approximations[r.method], r.operator.to_dense())


def test_run_options_defaults_are_todays():
    """RunOptions declares no default of its own: FitSettings' and COUNT_INDICES (count_indices was False)."""
    import warnings

    import sfapprox
    from sfapprox._old_api import options_keywords
    from sfapprox._settings import COUNT_INDICES

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = sfapprox.RunOptions()
    assert _old(caught)[0].startswith("RunOptions is deprecated; use settings=FitSettings(")
    assert sfapprox.comparison.RunOptions is sfapprox.RunOptions and "RunOptions" not in sfapprox.__all__
    keywords = options_keywords(options, "compare")
    assert keywords == {"settings": FitSettings(), "count_indices": COUNT_INDICES, "protocol": "default",
                        "callback": None}


@pytest.mark.parametrize("given, match", [
    (dict(settings=FitSettings()), r"options= \(a RunOptions\) is the old spelling of settings=, .* \(got options= with settings=\)$"),
    (dict(seed=3), r"give one or the other \(got options= with seed=\)$"),
    (dict(count_indices=False, structure={"base": 3}), r"\(got options= with count_indices=, structure=\)$"),
    (dict(X=np.eye(4)), r"^compare: X= is the old name of matrix=; give only matrix=$"),
    (dict(options_sf={"device": "cpu"}), r"options.sf sets device, which RunOptions has a field for; give it once"),
])
def test_an_old_spelling_beside_its_new_one_is_a_parameter_error(given, match):
    import warnings

    import sfapprox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        options = sfapprox.RunOptions(sf=given.pop("options_sf", {}))
        with pytest.raises(ParameterError, match=match):
            compare(np.eye(4), ["tsvd"], budget=9, options=options, **given)


def test_a_saved_fit_of_another_variable_of_the_same_file_is_noted(tmp_path):
    """compare two.npz --var B --with a fit of its --var A said nothing: the record named the file and its
    SHA-256 only.  The variable read is recorded and compared; the same one, the file's only one given
    explicitly, or a record written before it was kept, is not another matrix."""
    import json

    import h5py

    from sfapprox import LoadOptions, load_matrix, save_factors
    from sfapprox.factors import input_record

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "two.npz", A=rng.random((12, 12)), B=rng.random((12, 12)))
    np.savez(tmp_path / "one.npz", A=rng.random((12, 12)))

    def saved(path, name, **load):
        row = compare(path, "tsvd", budget=40, load=LoadOptions(**load) if load else None).results[0]
        save_factors(tmp_path / name, row.operator, source=input_record(load_matrix(path, **load)))
        return tmp_path / name

    def notes(path, fit, **load):
        return " ".join(compare(path, "sparse", budget=40, load=LoadOptions(**load) if load else None,
                                include=[fit]).notes)

    a = saved(tmp_path / "two.npz", "a.h5", var="A")
    assert "saved:a was fitted to another matrix of this file (var=A; this one: var=B)" in notes(
        tmp_path / "two.npz", a, var="B")
    assert "another matrix" not in notes(tmp_path / "two.npz", a, var="A")
    only = saved(tmp_path / "one.npz", "only.h5")  # --var left out: the file's one square array, A
    assert "another matrix" not in notes(tmp_path / "one.npz", only, var="A")
    with h5py.File(a, "a") as f:  # a fit saved before the variable was recorded
        record = json.loads(f.attrs["source"])
        del record["recipe"]
        f.attrs["source"] = json.dumps(record)
    assert "another matrix" not in notes(tmp_path / "two.npz", a, var="B")


def test_a_saved_fit_of_another_variable_is_noted_where_the_matrix_is_kept_sparse(tmp_path):
    """A sparse variable too big to form is compared from its columns (a SparseSource): its record and the
    comparison's notes carry the variable read as a formed one's do."""
    import scipy.io
    import scipy.sparse as sp

    from sfapprox import LoadOptions
    from sfapprox.factors import load_factors, save_results
    from sfapprox.io import open_matrix

    n = 1500
    A = sp.random(n, n, density=2e-3, random_state=0, format="csc") + sp.eye(n)
    scipy.io.savemat(tmp_path / "s.mat", {"A": A, "B": (A * 2).tocsc()})
    settings = FitSettings(max_memory=8 << 20, device="cpu")
    source = open_matrix(tmp_path / "s.mat", var="A", max_memory=8 << 20)
    assert source.kind == "sparse" and source.recipe["var"] == "A" and source.summary()["source"]["var"] == "A"
    first = compare(source, "rsvd", budget=0.01, settings=settings)
    fit = save_results(first, tmp_path / "fits", source=source)[0]
    assert load_factors(fit).source["recipe"]["var"] == "A"
    for var, other in (("B", True), ("A", False)):
        said = " ".join(compare(tmp_path / "s.mat", "rsvd", budget=0.01, settings=settings,
                                load=LoadOptions(var=var), include=[fit]).notes)
        assert ("another matrix of this file" in said and "this one: " in said and "var=B" in said) is other, said


@pytest.mark.parametrize("bad, match", [
    (dict(settings={"seed": 1}), r"^settings must be a FitSettings, got dict"),
    (dict(count_indices="no"), r"^count_indices must be True or False, got 'no'"),
    (dict(on_result="print"), r"^on_result must be a function"),
    (dict(callback=5), r"^callback must be a function"),
    (dict(matrix_info=5), r"^matrix_info must be a mapping"),
    (dict(include=5), r"^include must be a factors file"),
])
def test_arguments_of_the_wrong_type_are_refused_before_any_fit(bad, match):
    """A settings dict was an AttributeError; count_indices="no" counted the indices (a string is true);
    on_result="print" and matrix_info=5 were TypeErrors after the fits, include=5 one from list(5)."""
    fitted = []
    with pytest.raises(ParameterError, match=match):
        compare(np.eye(8), "tsvd", **{"on_result": fitted.append, **bad})
    assert not fitted


def test_a_display_says_the_matrix_is_formed_and_names_each_method_as_it_starts(monkeypatch):
    """compare on a kernel of 8,000 points formed its matrix for 27 s under a bar naming "tsvd" (named at
    once, before any method started) with no word beside it. The forming is a phase now, and each method is
    named by the ``starting`` hook of ``on_result`` as it starts."""
    import time

    from sfapprox.sources import KernelMatrix

    source = KernelMatrix(np.random.default_rng(0).random((40, 3)), "rbf", 0.5)
    forming = type(source).to_dense
    monkeypatch.setattr(type(source), "to_dense", lambda self, *a, **kw: (time.sleep(0.8), forming(self, *a, **kw))[1])
    events = []

    def display(info):
        events.append(("report", info.get("method")))

    display.phase = lambda text: events.append(("phase", text))

    def on_result(row):
        events.append(("result", row.method))

    on_result.starting = lambda name: events.append(("starting", name))
    compare(source, ["tsvd", "sparse"], budget=200, callback=display, on_result=on_result, device="cpu")
    assert events == [("phase", "forming the matrix"), ("phase", ""), ("starting", "tsvd"), ("result", "tsvd"),
                      ("starting", "sparse"), ("result", "sparse")]


def test_run_all_calls_no_starting_hook_where_there_is_none():
    rows = []
    X = np.random.default_rng(0).random((16, 16))
    compare(X, ["tsvd"], budget=100, on_result=rows.append)
    assert [r.method for r in rows] == ["tsvd"]


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_torch_sparse_tensor_is_compared_as_its_scipy_matrix(layout):
    """compare(torch.sparse_coo_tensor(...)) was refused with torch's "Use Tensor.to_dense() first" (a
    dense tensor was taken); it is the scipy sparse matrix of its entries, kept sparse (compared from its
    columns) where the limit cannot hold it formed, as such a scipy matrix is."""
    torch = pytest.importorskip("torch")
    import scipy.sparse as sp

    A = sp.random(40, 40, density=0.1, random_state=0, format="coo")
    T = torch.sparse_coo_tensor(np.vstack([A.row, A.col]), A.data, A.shape)
    T = T if layout == "coo" else T.to_sparse_csr()
    for limit in (None, 200 << 10):
        got = compare(T, ["sparse"], time_limit=None, max_memory=limit)
        want = compare(A.tocsr(), ["sparse"], time_limit=None, max_memory=limit)
        assert got.results[0].status == "ok" and got.results[0].rel_error == want.results[0].rel_error
        assert got.notes == want.notes
    assert any("not formed" in note for note in got.notes)  # the small limit: kept sparse, from its columns


def _kernel(n=300):
    from sfapprox.sources import KernelMatrix

    return KernelMatrix(np.random.default_rng(7).standard_normal((n, 3)), bandwidth=0.8)


def test_a_matrix_compared_from_its_columns_has_the_record_of_one_formed():
    """From columns the matrix record had "source" for "recipe", no "fro_norm" nor "nnz", and "path":
    "columns": the same keys now, ||X||_F from the exact scoring pass (the formed matrix's to round-off), the
    facts no pass gives null with the reason, and the old keys kept."""
    from sfapprox.comparison import MATRIX_KEYS

    K = _kernel()
    settings = FitSettings(device="cpu", max_iter=20, time_limit=None)
    streamed = compare(K, ["rsvd"], budget=0.1, settings=settings.replace(max_memory=3 * K.formed_bytes - 1))
    formed = compare(K, ["rsvd"], budget=0.1, settings=settings)
    s, f = streamed.to_dict()["matrix"], formed.to_dict()["matrix"]
    assert set(s) == set(f) == set(MATRIX_KEYS)
    assert s["path"] == "columns" and s["compared_from"] == "columns" and f["compared_from"] == "memory"
    assert s["recipe"] == s["source"] == f["recipe"] == f["source"] == K.recipe  # "source": the old key, kept
    assert s["fro_norm"] == pytest.approx(f["fro_norm"], rel=1e-12) and "fro_norm" not in s["unknown"]
    assert s["nnz"] is None and "never formed" in s["unknown"]["nnz"] and f["unknown"] == {}
    assert s["formed_bytes"] == f["formed_bytes"] == K.formed_bytes and s["formed"] == f["formed"]


def test_a_sampled_scoring_leaves_the_norm_unknown_with_the_reason(monkeypatch):
    from sfapprox import comparison

    K = _kernel()
    real = comparison.estimate_errors
    monkeypatch.setattr(comparison, "estimate_errors", lambda *a, **k: real(*a, **{**k, "time_limit": 1e-9}))
    c = compare(K, ["rsvd"], budget=0.1, settings=FitSettings(device="cpu", time_limit=None,
                                                               max_memory=3 * K.formed_bytes - 1))
    assert not c.results[0].error_estimate["exact"]
    assert c.matrix["fro_norm"] is None and "sampled" in c.matrix["unknown"]["fro_norm"]


def test_a_sparse_matrix_from_its_columns_keeps_the_facts_its_entries_give():

    X = random_array((400, 400), density=0.02, random_state=5, format="csr")
    streamed = compare(X, ["sparse"], budget=20_000, max_memory=2 << 20, seed=0)
    formed = compare(X, ["sparse"], budget=20_000, seed=0)
    assert streamed.matrix["compared_from"] == "columns" and streamed.matrix["unknown"] == {}
    for key in ("nnz", "density", "min", "max"):
        assert streamed.matrix[key] == formed.matrix[key], key
    assert streamed.matrix["fro_norm"] == pytest.approx(formed.matrix["fro_norm"], rel=1e-12)


def test_a_formed_source_keeps_the_facts_it_knew():
    """A kernel compared from its columns recorded psd: true, the same kernel formed psd: null (a check of
    the entries proves only a psd: false): the formed record keeps what the source knew."""
    from sfapprox.comparison import as_loaded_matrix
    from sfapprox.sources import KernelMatrix

    K = KernelMatrix(np.random.default_rng(3).standard_normal((40, 2)), bandwidth=0.8)
    streamed = compare(K, ["tsvd"], budget=0.2, max_memory=3 * K.formed_bytes - 1, time_limit=None)
    formed = compare(K, ["tsvd"], budget=0.2, time_limit=None)
    assert streamed.matrix["compared_from"] == "columns" and formed.matrix["compared_from"] == "memory"
    for fact in ("psd", "symmetric", "nonnegative"):
        assert formed.matrix[fact] == streamed.matrix[fact] == getattr(K, fact) is True, fact
    # what the entries prove stands over what the origin says (a matrix not psd by its entries)
    loaded = as_loaded_matrix(K, None)
    loaded.matrix[0, 1] = loaded.matrix[1, 0] = 2.0  # |X_01| > sqrt(X_00 X_11) = 1
    assert loaded.facts["psd"] is True and loaded.summary()["psd"] is False


def test_a_rows_reason_names_its_method_once():
    """A row too small for one rank said "Nystrom: budget 3 is below ...", shown as "nystrom: Nystrom: ..."."""
    A = np.random.default_rng(0).random((16, 16))
    X = A @ A.T  # symmetric PSD: Nyström applies, so its reason is the budget's (a non-symmetric X's is not)
    c = compare(X, ["nystrom", "tsvd", "rsvd", "nmf"], budget=3, time_limit=None)
    for r in c.results:
        assert r.status == "not applicable" and r.reason.startswith("budget 3 is below the smallest fit "), (r.method, r.reason)
    # an estimator fitted alone still names itself
    from sfapprox import BudgetError
    from sfapprox.baselines.nystrom import Nystrom

    with pytest.raises(BudgetError, match="^Nystrom: budget 3 "):
        Nystrom(budget=3).fit(X)


def test_a_sparse_matrix_compared_from_its_columns_is_copied_within_max_memory(monkeypatch):
    """A sparse matrix too big to form was copied to the SparseSource of its columns (float64 CSC, and a
    CSR to compare with) before any check: refused first, naming the copy, where it is over max_memory."""
    import scipy.sparse as sp

    from sfapprox import ResourceError
    from sfapprox.sources import SparseSource

    made = []
    real_init = SparseSource.__init__
    monkeypatch.setattr(SparseSource, "__init__", lambda self, *a, **k: (made.append(1), real_init(self, *a, **k))[1])
    X = sp.random(64, 64, density=0.2, format="coo", random_state=0)  # 819 entries: about 10 KiB held
    with pytest.raises(ResourceError, match=r"float64 column copy needs about .* beside the matrix held") as info:
        compare(X, ["sparse"], budget=400, max_memory=2000)
    assert "\n" not in str(info.value) and str(info.value).startswith("X: reading the 64 x 64 sparse matrix")
    assert not made


def test_a_saved_fit_row_leaves_unsaid_what_a_fitted_row_does(tmp_path):
    """A `fit --out` file's row read "path=in memory kept_start=False" in its details, beside the sf row's
    plain "M=... b=... it=... stop=...": the summary's defaults, which a fitted row never shows."""
    from sfapprox.api import fit_matrix
    from sfapprox.results import details

    X = np.random.default_rng(0).standard_normal((16, 16))
    fit_matrix(X, settings=FitSettings(max_iter=5, device="cpu"), out=tmp_path / "f.h5")
    row = compare(X, "tsvd", include=[tmp_path / "f.h5"]).results[-1]
    assert row.method == "saved:f" and row.status == "ok"
    assert "path" not in row.params and "kept_start" not in row.params
    assert details(row.params).startswith("M=4 b=2 init=") and "path=" not in details(row.params)


def test_the_api_prints_nothing_and_its_results_show_in_a_notebook(capfd):
    """A notebook user's compare/fit/sweep/describe under a time limit that stops fits early: nothing on
    stdout or stderr (what there is to say is a warning of the project's classes or a result's note),
    and the results with "not applicable" rows have a repr of a few lines and an HTML view."""
    import warnings

    from sfapprox import ChordSF, ConvergenceWarning, SfapproxError, fit_matrix
    from sfapprox.describe import describe
    from sfapprox.sweep import sweep

    X = np.random.default_rng(0).random((24, 24)) - 0.5  # negative entries: NMF is not applicable
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = [compare(X, ["sf", "tsvd", "nmf"], budget=0.3, time_limit=0.01, device="cpu"),
                sweep(X, [0.2, 0.4], ["tsvd", "nmf"], time_limit=0.01, device="cpu"),
                describe(X)]
        fit_matrix(X, settings=FitSettings(max_iter=3, time_limit=0.01, device="cpu"))
        ChordSF(max_iter=3, device="cpu").fit(X)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert all(issubclass(w.category, (ConvergenceWarning, SfapproxError)) for w in caught), \
        [f"{w.category.__name__}: {w.message}" for w in caught]
    comparison = made[0]
    assert comparison.results[2].status == "not applicable"
    for shown in [*made, *comparison.results]:
        text = repr(shown)
        assert 0 < len(text.splitlines()) <= 25 and "Traceback" not in text, text
        if hasattr(shown, "_repr_html_"):
            assert "<table" in shown._repr_html_()


def test_sparse_source_is_still_importable_from_comparison_with_a_deprecation_warning():
    """``sfapprox.comparison.SparseSource`` (imported there until today) keeps working a release."""
    from sfapprox import comparison
    from sfapprox.sources import SparseSource

    with pytest.warns(DeprecationWarning, match="sfapprox.sources.SparseSource"):
        assert comparison.SparseSource is SparseSource


def _progress_seen(info):  # module-level: a callback that pickles (a lambda would not, whatever sfapprox does)
    _progress_seen.reports.append((info["method"], info["time_limit"]))


_progress_seen.reports = []


def test_a_comparison_run_with_a_callback_pickles_and_its_estimators_still_report():
    # Each row's estimator keeps the comparison's progress callback, tagged with the method: a local lambda
    # there made such a Comparison (and a Sweep) fail pickle.dumps and joblib.dump.
    import pickle

    X = np.random.default_rng(4).random((16, 16))
    c = compare(X, ["sf", "tsvd", "nmf"], settings=FitSettings(device="cpu", max_iter=5), callback=_progress_seen)
    back = pickle.loads(pickle.dumps(c, protocol=5))
    assert [r.method for r in back.results] == ["sf", "tsvd", "nmf"] and back.winner() == c.winner()
    x = np.ones(16)
    for r, s in zip(c.results, back.results):
        assert np.allclose(s.operator @ x, r.operator @ x) and np.allclose(s.operator.T @ x, r.operator.T @ x)
    _progress_seen.reports.clear()
    back.result("nmf").estimator.fit(X)  # the copy's callback is still the tagged one, the module-level function
    assert _progress_seen.reports and {m for m, _ in _progress_seen.reports} == {"nmf"}


def test_a_method_over_its_budget_is_a_bug_said_with_its_counts(monkeypatch):
    """A broken promise said "stored 1234 numbers over the budget 1000"; counted as other messages count."""
    from sfapprox.baselines.tsvd import TruncatedSVD

    fit = TruncatedSVD.fit
    monkeypatch.setattr(TruncatedSVD, "fit", lambda self, *a, **k: setattr(fit(self, *a, **k), "n_stored_", 1234) or self)
    with pytest.raises(AssertionError, match=r"^tsvd stored 1,234 numbers, over the budget 1,000$"):
        run_method("tsvd", np.random.default_rng(0).random((30, 30)), 1000,
                   RunContext(FitSettings(time_limit=None, device="cpu")))


class _SlowKernel(KernelMatrix):
    """A kernel whose columns take time, as a large one's do."""

    def _columns(self, J):
        import time

        time.sleep(0.3)
        return super()._columns(J)


def test_a_display_says_a_method_reads_columns_of_a_matrix_not_formed():
    """rsvd's and sparse's passes over a kernel never formed (15-30 s at N = 12,000) showed a bar with
    no word beside it: neither method has steps or phases of its own."""
    points = np.random.default_rng(0).standard_normal((200, 3))
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    # 200 KB: under the formed matrix's 320 KB, so read by columns
    row = compare(_SlowKernel(points, "rbf", bandwidth=1.0), ["sparse"], budget=2_000, max_memory=200_000,
                  callback=display).results[0]
    assert row.status == "ok" and row.params.get("from") == "columns", row.reason
    assert phases[:2] == ["reading columns (the matrix is not formed)", ""]


def test_reading_columns_does_not_come_back_after_a_methods_own_phase(monkeypatch):
    """"reading columns (the matrix is not formed)" is the phase around a whole method's turn on a source: it
    came back on the bar after SF's own "scoring" ended, over a finished fit. A method's own phase ends it."""
    import time

    from sfapprox import comparison
    from sfapprox._progress import phase

    run = comparison.run_method

    def scored_at_the_end(name, X, budget, context, fro_norm=None):
        time.sleep(0.7)  # past the outer phase's half second: it is shown
        with phase(context.callback, "scoring", delay=0.0):
            time.sleep(0.1)
        time.sleep(0.7)  # the rest of the turn: the outer phase's timer has long run
        return run(name, X, budget, context, fro_norm)

    monkeypatch.setattr(comparison, "run_method", scored_at_the_end)
    points = np.random.default_rng(0).standard_normal((60, 3))
    phases = []

    def display(info):
        pass

    display.phase = phases.append
    compare(KernelMatrix(points, "rbf", bandwidth=1.0), ["sparse"], budget=200, max_memory=20_000, callback=display)
    assert phases == ["reading columns (the matrix is not formed)", "scoring", ""], phases


#: Seconds each slowed step below sleeps: far above a 16 x 16 fit's own, far below a test's patience.
SLOW = 0.3


def _slowed(monkeypatch, name: str) -> None:
    """Method ``name``'s checks (where it has them) and factory each made :data:`SLOW` seconds slower."""
    import dataclasses
    import time

    from sfapprox import _base

    spec = _base.get_method(name)

    def slow(step):
        return lambda *a, **k: (time.sleep(SLOW), step(*a, **k))[1]

    changes = {"make": slow(spec.make)}
    if spec.check_first is not None:
        changes["check_first"] = slow(spec.check_first)
    monkeypatch.setitem(_base._REGISTRY, name, dataclasses.replace(spec, **changes))


@pytest.mark.parametrize("name", ["sf", "tsvd"])
def test_a_rows_seconds_hold_its_setting_up_and_scoring_and_fit_seconds_its_fit_alone(monkeypatch, name):
    """A row's seconds were the estimator's own clock, which each method starts where it likes: SF's left out
    its structure's timing (the factory's), its starts and its scoring, so at N = 3,000 its row said 1.76 s of
    a 5.9 s comparison. Now the comparison times every method's whole turn alike; the fit's own time is
    ``params["fit_seconds"]``."""
    from sfapprox import comparison

    _slowed(monkeypatch, name)
    scoring = comparison.row_error
    monkeypatch.setattr(comparison, "row_error",
                        lambda *a, **k: (__import__("time").sleep(SLOW), scoring(*a, **k))[1])
    X = np.random.default_rng(0).random((16, 16))
    row = compare(X, [name], settings=CPU).results[0]  # (budget: SF's own count)
    assert row.status == "ok"
    slowed = 3 if name == "sf" else 2  # sf: its checks, its factory and its scoring; tsvd has no checks first
    assert row.seconds >= slowed * SLOW
    assert row.seconds - row.params["fit_seconds"] >= slowed * SLOW * 0.99
    assert row.params["fit_seconds"] == pytest.approx(row.estimator.seconds_)
    assert comparison.MethodResult.from_dict(row.to_dict()).params["fit_seconds"] == row.params["fit_seconds"]


def test_a_comparison_from_columns_says_its_joint_scoring_is_in_no_rows_seconds():
    """From columns every row is scored together afterwards, by one pass over the same columns: no row's
    share of it can be told, so the note that gives its seconds says no row's seconds hold it."""
    K = KernelMatrix(np.random.default_rng(3).standard_normal((150, 3)), bandwidth=1.0, name="k")
    c = compare(K, ["nystrom"], budget=0.05, settings=FitSettings(max_memory=2 * K.formed_bytes))
    row = c.results[0]
    assert row.status == "ok" and row.params["fit_seconds"] <= row.seconds
    (scored,) = [n for n in c.notes if "not formed" in n]
    assert "ran (a row's seconds leave out the joint scoring), and every row was scored exactly" in scored, scored


@pytest.mark.parametrize("run, error, match", [
    (lambda X: compare(X, budget=5000, methods=["tsvd"], max_memory=10**6), "ResourceError",
     r"scoring each method \(dense arrays of the 1,000 x 1,000 matrix\)"),
    (lambda X: RobustPCA(budget=5000, method="pcp", max_memory=10**6).fit(X), "ResourceError",
     r"RobustPCA \(pcp\) on a 1,000 x 1,000 matrix"),
    # the order is said thousands separated; the value to type back stays plain
    (lambda X: TruncatedSVD(n_components=1001).fit(X), "ParameterError",
     r"the matrix's order N = 1,000; choose at most 1000$"),
])
def test_a_refusal_writes_the_order_n_thousands_separated(run, error, match):
    """A memory refusal said "a 1000 x 1000 matrix" beside "needs about 163.3 MiB" and the tables'
    "1,000": N is written as the counts are."""
    with pytest.raises(SfapproxError) as info:
        run(np.eye(1000))
    assert type(info.value).__name__ == error and re.search(match, str(info.value)), info.value


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stopped_sf_row_is_scored_without_compiling_the_apply_kernels(monkeypatch, stopped):
    """SF fitted from the columns of a sparse matrix under a time limit leaves its error to the comparison's
    scoring; stopped on a fresh install, that scoring compiled the apply kernels first (19 s from the SIGINT
    to the exit of `sfapprox compare` at N = 1,100 on 2 busy cores).  Stopped, it runs on scipy's sparse
    factors, to the same error; not stopped, on the compiled kernels as before."""
    from sfapprox import _signals
    from sfapprox.operators import _chord_apply
    from sfapprox.sf import model

    n = 1100  # above TORCH_DENSE_MAX_N: the scoring's products are the apply kernels'
    X = random_array((n, n), density=0.02, random_state=0, format="csr")
    compiled = []
    real = _chord_apply.FactorStack._apply_numba
    monkeypatch.setattr(_chord_apply, "block_kernel_compiles", lambda butterfly=False: True)  # a fresh install
    monkeypatch.setattr(_chord_apply.FactorStack, "_apply_numba",
                        lambda self, B, t: (compiled.append(B.shape), real(self, B, t))[1])
    # the stop as the CLI's handler records it, once the fit's kernels are ready: it acts on it at its first step
    warmed = model._warmed_unless_stopped
    monkeypatch.setattr(model, "_warmed_unless_stopped",
                        lambda *warm_ups: (warmed(*warm_ups), _signals._received.extend([2] if stopped else []))[0])
    monkeypatch.setattr(_signals, "_received", [])
    settings = FitSettings(device="cpu", max_iter=2, time_limit=60, max_memory=300 << 20)
    (row,) = compare(X, ["sf"], settings=settings).results
    assert row.params["path"] == "columns" and (row.status == "interrupted") == stopped
    assert bool(compiled) != stopped, compiled
    monkeypatch.setattr(_signals, "_received", [])
    exact = np.linalg.norm(X.toarray() - row.operator.to_dense())
    assert row.fro_error == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stopped_row_scored_from_columns_is_scored_without_compiling_the_apply_kernels(monkeypatch, stopped):
    """A compare of a matrix too big to form scores its rows from columns (score_from_columns, through
    estimate_errors), which compiled the apply kernels after a stop on a fresh install, as row_error did
    (test_a_stopped_sf_row_is_scored_without_compiling_the_apply_kernels).  A stopped row's products now run
    on scipy's sparse factors, to the same error; a row not stopped runs on the compiled kernels as before."""
    from sfapprox import _signals
    from sfapprox.comparison import score_from_columns
    from sfapprox.operators import ChordOperator, _chord_apply
    from sfapprox.results import MethodResult
    from sfapprox.sources import as_source

    n = 256
    X = random_array((n, n), density=0.02, random_state=0, format="csc")
    operator = ChordOperator(np.random.default_rng(0).standard_normal((4, n, 3)), np.array([0, 1, 5]))
    compiled = []
    real = _chord_apply.FactorStack._apply_numba
    monkeypatch.setattr(_chord_apply, "block_kernel_compiles", lambda butterfly=False: True)  # a fresh install
    monkeypatch.setattr(_chord_apply.FactorStack, "_apply_numba",
                        lambda self, B, t: (compiled.append(B.shape), real(self, B, t))[1])
    monkeypatch.setattr(_signals, "_received", [])
    row = MethodResult("sf", "interrupted" if stopped else "ok", nnz=operator.n_stored, operator=operator)
    score_from_columns(as_source(X), [row], FitSettings(device="cpu", time_limit=60, seed=0))
    assert bool(compiled) != stopped, compiled
    assert row.fro_error == pytest.approx(np.linalg.norm(X.toarray() - operator.to_dense()), rel=1e-9)


@pytest.mark.parametrize("symmetric", [True, False])
def test_a_refusal_from_columns_names_the_limit_of_a_method_that_applies(symmetric):
    """The refusal's "raise the limit to X (where M runs)" named the method of the least limit, Nyström, for
    a graph that is not positive semi-definite (or not symmetric), which it never runs on at any limit."""
    from scipy import sparse as sp

    from sfapprox import ResourceError
    from sfapprox.sources import SparseSource

    A = sp.random(300, 300, density=0.02, random_state=0, format="csr")
    source = SparseSource(A + A.T if symmetric else A)
    if symmetric:
        source.psd = False  # as the file opener says of a graph: a zero diagonal under non-zeros
    assert source.symmetric is symmetric
    with pytest.raises(ResourceError, match=r"to at least [\d.]+ MiB \(where rsvd runs\)") as info:
        compare(source, "nystrom,rsvd", budget=0.5, max_memory=1 << 20)
    # weighed are the methods that apply: Nyström's need was listed as if a higher limit would run it
    assert "nystrom about" not in str(info.value) and "where nystrom" not in str(info.value)
    assert "nystrom not applicable to it at any limit" in str(info.value)


@pytest.mark.parametrize("symmetric", [True, False])
def test_a_method_the_matrix_rules_out_is_said_not_to_apply_before_any_memory_advice(symmetric):
    """``compare graph --methods nystrom --max-memory 1MB`` on a graph that is not positive semi-definite
    said to raise the limit, which would not make Nyström run: at any limit it is not applicable, in the
    words its row gives where memory is not the issue."""
    from scipy import sparse as sp

    from sfapprox.sources import SparseSource

    A = sp.random(300, 300, density=0.02, random_state=0, format="csr")
    source = SparseSource(A + A.T if symmetric else A)
    if symmetric:
        source.psd = False  # as the file opener says of a graph: a zero diagonal under non-zeros
    # a limit that forces the column path and that Nyström's budget is over (its need, 2.5 MiB, refused it)
    row, = compare(source, "nystrom", budget=0.5, max_memory=1 << 20, device="cpu").results
    assert row.status == "not applicable"
    assert row.reason.startswith("X is not positive semi-definite (its source says so); " if symmetric else
                                 "X is not symmetric; Nyström needs")
    assert "memory" not in row.reason


def test_a_method_s_error_caused_by_a_stop_is_the_stop_also_outside_a_batch(monkeypatch):
    """A stop that a library wrapped in an error of its own (numba's compiler: a SystemError whose cause is the
    KeyboardInterrupt) ended ``compare`` with that error, a traceback in the CLI; a batch's isolated run alone
    took it for the stop.  Both give the method's row "interrupted" now, the rows before it kept."""
    from sfapprox import comparison

    real = comparison.run_method

    def wrapped_stop(name, *args, **kwargs):
        if name == "sparse":
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as stop:
                raise SystemError("<built-in function> returned a result with an exception set") from stop
        return real(name, *args, **kwargs)

    monkeypatch.setattr(comparison, "run_method", wrapped_stop)
    X = np.random.default_rng(0).standard_normal((16, 16))
    result = comparison.compare(X, ["tsvd", "sparse", "rsvd"], device="cpu")
    assert [(r.method, r.status) for r in result.results] == [("tsvd", "ok"), ("sparse", "interrupted")]
