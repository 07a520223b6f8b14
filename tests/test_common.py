"""The method contract, run over every registered method (scikit-learn's common-tests habit).

A new method registers itself and is tested here without a line added.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from sfapprox import BudgetError, FitSettings, NotApplicableError, ParameterError
from sfapprox._base import Approximation, RunContext, methods, parse_methods
from sfapprox.budget import sf_count
from sfapprox.formats import jsonable

N = 16  # a power of two, so that the butterfly support applies too
CONTEXT = RunContext(FitSettings(max_iter=25, time_limit=10, device="cpu"))
pytestmark = pytest.mark.filterwarnings("ignore::sfapprox.ConvergenceWarning")


@pytest.fixture(scope="module")
def X():
    # Low rank plus noise, and symmetric PSD and non-negative: every method applies (Nyström needs
    # a PSD matrix, NMF a non-negative one).
    rng = np.random.default_rng(0)
    G, H = rng.random((N, 3)), rng.random((N, N))
    return G @ G.T + 0.1 * H @ H.T / N


@pytest.fixture(scope="module")
def fitted(X):
    out = {}
    for name, spec in methods().items():
        est = spec.make(N, sf_count(N), CONTEXT)
        out[name] = (est, est.fit(X))
    return out


NAMES = list(methods())


def test_registry_lists_the_known_methods():
    assert {"sf", "sf-symmetric", "sf-butterfly", "tsvd", "rpca", "rpca-pcp", "nmf", "sf+lr", "sf+s"} <= set(NAMES)
    for spec in methods().values():
        assert spec.summary and spec.stores and callable(spec.make) and callable(spec.min_budget)


@pytest.mark.parametrize("name", NAMES)
def test_fit_returns_self_with_the_contract_attributes(fitted, X, name):
    est, result = fitted[name]
    assert result is est and isinstance(est, Approximation)
    assert est.operator_.shape == (N, N)
    assert 0 < est.n_stored_ <= sf_count(N)
    assert est.operator_.n_stored == est.n_stored_
    assert isinstance(est.stop_reason_, str) and est.stop_reason_
    assert est.seconds_ >= 0
    json.dumps(jsonable(est.params_))  # plain JSON values


@pytest.mark.parametrize("name", NAMES)
def test_a_fit_is_an_operator_its_method_declares_and_saves_and_loads_as_it(fitted, tmp_path, name):
    # load_factors refuses a file whose method does not make its operator kind (an edited file); a method
    # that declared none, or not the one it makes, would write files it then refuses, or let edits through.
    from sfapprox import load_factors, save_factors

    est, _ = fitted[name]
    assert type(est.operator_).kind in methods()[name].operators
    save_factors(tmp_path / "fit.h5", est)
    saved = load_factors(tmp_path / "fit.h5")
    assert saved.kind == name and type(saved.operator) is type(est.operator_)


@pytest.mark.parametrize("name", NAMES)
def test_operator_matches_the_dense_surrogate(fitted, name):
    est, _ = fitted[name]
    D = est.to_dense()
    assert D.shape == (N, N) and np.allclose(est.operator_.to_dense(), D)
    x = np.random.default_rng(1).random(N)
    B = np.random.default_rng(2).random((N, 3))
    assert np.allclose(est.operator_ @ x, D @ x)
    assert np.allclose(est.operator_.matmat(B), D @ B)
    assert np.allclose(est.operator_.rmatvec(x), D.T @ x)


def _quick(est, iterations: int = 3):
    """``est`` held to a few iterations where it takes a limit of its own (SF, RPCA's GoDec and PCP, NMF,
    Monarch+LR): what these tests check shows in the first ones, and the defaults ran to the 5 s time limit
    (RPCA from 400 columns, twice a test) or 4 x 1,000 HALS steps (NMF: 2-8 s at N = 16)."""
    return est.set_params(max_iter=iterations) if "max_iter" in est.get_params() else est


@pytest.mark.parametrize("name", NAMES)
def test_check_input_false_gives_the_same_fit(X, name):
    spec = methods()[name]
    quick = RunContext(FitSettings(max_iter=5, time_limit=None, device="cpu"))
    a = _quick(spec.make(N, sf_count(N), quick), 5).fit(X)
    b = _quick(spec.make(N, sf_count(N), quick), 5).fit(X, check_input=False)
    assert np.allclose(a.to_dense(), b.to_dense())


@pytest.mark.parametrize("name", NAMES)
def test_constructor_only_stores_and_params_round_trip(name):
    est = methods()[name].make(N, sf_count(N), CONTEXT)
    assert not [k for k in vars(est) if k.endswith("_")]
    params = est.get_params()
    clone = type(est)(**params)
    assert clone.get_params() == params
    assert "object at" not in repr(est) and repr(est).startswith(type(est).__name__ + "(")
    with pytest.raises(ParameterError, match="has no parameter"):
        est.set_params(no_such_parameter=1)


@pytest.mark.parametrize("name", NAMES)
def test_smallest_budget_is_where_the_method_starts(X, name):
    spec = methods()[name]
    need = spec.min_budget(N, CONTEXT)
    assert need is not None
    est = spec.make(N, need, CONTEXT).fit(X)
    assert est.n_stored_ <= need
    if need > 1:
        with pytest.raises((BudgetError, NotApplicableError)):
            spec.make(N, need - 1, CONTEXT).fit(X)


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_is_refused_with_our_error(name):
    from sfapprox import InputError

    est = methods()[name].make(N, sf_count(N), CONTEXT)
    with pytest.raises(InputError):
        est.fit(np.ones((N, N + 1)))


def test_an_unknown_method_in_capitals_names_its_spelling():
    """compare(X, "TSVD") guessed nothing, where the CLI (which lowers --methods) takes it."""
    with pytest.raises(ParameterError, match=r"unknown method\(s\) 'TSVD' \(did you mean 'tsvd'\?\), 'Sf\+LR' "
                                             r"\(did you mean 'sf\+lr'\?\)"):
        parse_methods("TSVD,Sf+LR")


def test_parse_methods():
    assert parse_methods(" sf ,tsvd, sf") == ["sf", "tsvd"]
    with pytest.raises(ParameterError, match="no method given"):
        parse_methods(" , ")
    with pytest.raises(ParameterError, match="unknown method.*svd2"):
        parse_methods("sf,svd2")
    with pytest.raises(ParameterError, match=r"'tsdv' \(did you mean 'tsvd'\?\), 'zzz';"):
        parse_methods("sf,tsdv,zzz")
    assert parse_methods("sf,tsvd,") == ["sf", "tsvd"]  # a trailing comma is a list of two
    with pytest.raises(ParameterError, match="an item between two commas is empty"):
        parse_methods("sparse,,tsvd")  # a name left out: it was dropped without a word


def test_parse_methods_all_is_every_method_in_listing_order():
    # "--methods all" was refused as an unknown method: every method had to be typed out
    assert parse_methods("all") == list(methods())
    assert parse_methods(["all"]) == list(methods())
    assert parse_methods("tsvd, all") == ["tsvd", *[m for m in methods() if m != "tsvd"]]
    with pytest.raises(ParameterError, match="or 'all' for every one"):
        parse_methods("sf,svd2")


@pytest.mark.parametrize("name", NAMES)
def test_estimators_know_their_method_name(name):
    assert methods()[name].make(N, sf_count(N), CONTEXT).method_name == name


@pytest.mark.parametrize("name", NAMES)
def test_an_unfitted_estimator_says_so(name):
    from sfapprox import NotFittedError, save_factors

    est = methods()[name].make(N, sf_count(N), CONTEXT)
    assert not hasattr(est, "operator_")  # (an AttributeError too, as scikit-learn's)
    for use in (est.to_dense, est.to_operator, lambda: save_factors("never.h5", est)):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            use()


@pytest.mark.parametrize("name", NAMES)
def test_a_fitted_estimator_is_never_told_it_is_not_fitted(fitted, name):
    """A fitted estimator without an error of its own (only SF and the hybrids keep one) says where
    the error is, not "not fitted yet" (it said so); other missing names stay plain AttributeErrors."""
    from sfapprox import NotFittedError

    est = fitted[name][1]
    for attribute in ("fro_error_", "rel_error_", "no_such_"):
        try:
            getattr(est, attribute)
        except NotFittedError:
            pytest.fail(f"a fitted {name} said it was not fitted ({attribute})")
        except AttributeError as exc:
            assert attribute == "no_such_" or "frobenius_error(X)" in str(exc)


@pytest.mark.parametrize("name", NAMES)
def test_every_method_scores_itself_by_the_one_definition(fitted, X, name):
    """est.frobenius_error(X): the same number for every method as frobenius_error on its dense form
    (only SF and the hybrids had fro_error_)."""
    from sfapprox import frobenius_error
    from sfapprox.sources import ArraySource

    est, _ = fitted[name]
    fro, rel = est.frobenius_error(X)
    expected = frobenius_error(X, est.to_dense())
    assert fro == pytest.approx(expected[0], rel=1e-10) and rel == pytest.approx(expected[1], rel=1e-10)
    assert est.frobenius_error(ArraySource(X))[0] == pytest.approx(fro, rel=1e-10)  # from columns, exactly


# ------------------------------------------------------------------ fits from column blocks, through the API
COLUMN_METHODS = [name for name, spec in methods().items() if "columns" in spec.access and spec.columns_memory]


class _LoggedKernel:
    """A kernel matrix source that logs the width of every read (``reads``)."""

    @staticmethod
    def make(n=400, seed=4):
        from sfapprox.sources import KernelMatrix

        class Logged(KernelMatrix):
            def _columns(self, J):
                self.reads.append(J.size)
                return super()._columns(J)

        K = Logged(np.random.default_rng(seed).standard_normal((n, 3)), bandwidth=1.0)
        K.reads = []
        return K


def _column_fit(name, n, budget, max_memory):
    from sfapprox._base import get_method

    return get_method(name).make(n, budget, RunContext(FitSettings(device="cpu", time_limit=5,
                                                                    max_memory=max_memory)))


@pytest.mark.parametrize("name", COLUMN_METHODS)
def test_a_fit_from_columns_over_its_limit_is_refused_before_reading_a_column(name):
    """The estimators' own fits from a source were checked only inside a comparison: through the API a
    budget whose sketches and entries could not fit ran past the limit."""
    from sfapprox import ResourceError
    from sfapprox._base import get_method

    n, budget = 400, 60_000
    spec = get_method(name)
    limit = spec.columns_memory(n, budget)  # what it keeps alone: its blocks get nothing
    est = _column_fit(name, n, budget, limit)
    assert est.max_memory == limit  # the settings' limit reaches the estimator
    K = _LoggedKernel.make(n)
    with pytest.raises(ResourceError, match=rf"^{name}'s fit of kernel \(400 x 400\) from column blocks keeping "
                                            r"[\d,]+ numbers .* over the memory limit .* keep fewer numbers"):
        est.fit(K)
    assert K.reads == [] and K.max_memory is None  # nothing read; the source as it was given
    # with no limit of its own, the source's is the limit (a comparison sets it there)
    K.max_memory = limit
    with pytest.raises(ResourceError, match="over the memory limit"):
        _column_fit(name, n, budget, None).fit(K)
    assert K.reads == [] and K.max_memory == limit


@pytest.mark.parametrize("name", ["rsvd", "sparse", "rpca"])
def test_a_fit_from_columns_sizes_its_passes_by_its_own_limit(name):
    from sfapprox._base import get_method
    from sfapprox.sources import MIN_BLOCK

    n, budget = 400, 20_000
    K = _LoggedKernel.make(n)
    limit = 2 * get_method(name).columns_memory(n, budget) + (2 << 20)  # about 100 columns a block
    est = _quick(_column_fit(name, n, budget, limit)).fit(K)
    assert est.n_stored_ <= budget and K.max_memory is None  # restored after the fit
    widest = max(K.reads)
    assert MIN_BLOCK <= widest <= K.block_width(limit) < n  # the default limit would read all 400 at once
    K.reads.clear()
    _quick(_column_fit(name, n, budget, None)).fit(K)
    assert max(K.reads) == n


def test_a_matrix_in_memory_is_not_checked_as_a_fit_from_columns():
    """max_memory is the limit of a fit from a source's columns; a dense matrix goes its in-memory way."""
    from sfapprox.baselines.rsvd import RandomizedSVD

    X = np.random.default_rng(1).standard_normal((50, 50))
    assert RandomizedSVD(n_components=3, max_memory=1).fit(X).n_stored_ == 3 * 101


IN_MEMORY_LIMITED = [name for name, spec in methods().items() if spec.working_memory is not None]


@pytest.mark.parametrize("name", IN_MEMORY_LIMITED)
def test_alone_a_matrix_in_memory_over_its_own_limit_is_read_by_columns_or_refused(X, name):
    """Every estimator whose in-memory fit declares its working memory keeps its own ``max_memory`` as a
    comparison keeps it: over it, one that works from columns reads them, any other is refused before
    any work (it ran, whatever the limit)."""
    from sfapprox import ResourceError
    from sfapprox._base import get_method

    spec = get_method(name)
    est = _column_fit(name, N, sf_count(N), 1 << 16)
    assert est.max_memory == 1 << 16  # the settings' limit reaches it
    if "columns" in spec.access:
        fitted = _quick(est).fit(X)
        assert fitted.params_["from"] == "columns" and fitted.n_stored_ <= sf_count(N)
    else:
        with pytest.raises(ResourceError, match=rf"^{name}: its fit of a {N} x {N} matrix needs about .* over the "
                                                "memory limit"):
            est.fit(X)
    assert _quick(_column_fit(name, N, sf_count(N), 1 << 40)).fit(X).n_stored_ <= sf_count(N)


def test_a_fit_with_its_own_limit_never_changes_the_source_given():
    """Two fits of one source in two threads with two limits each keep theirs: the passes read a copy
    sized for the estimator's limit (the shared source's limit was set and restored, out of order)."""
    from concurrent.futures import ThreadPoolExecutor

    from sfapprox.sources import DistributedSource, passes_within

    K = _LoggedKernel.make(300)
    limited = passes_within(K, 5 << 20)
    assert limited is not K and limited.max_memory == 5 << 20 and K.max_memory is None
    assert passes_within(K, None) is K
    with ThreadPoolExecutor(2) as pool:
        D = DistributedSource(K, pool)
        copy = passes_within(D, 5 << 20)
        assert isinstance(copy, DistributedSource) and copy.source is not K and K.max_memory is None
        assert copy.max_memory == 5 << 20


def test_a_matrix_held_beside_the_passes_takes_its_share_of_an_estimators_own_limit():
    from sfapprox.sources import DistributedSource, columns_within, passes_within

    X = np.eye(400)
    held = X.nbytes
    source = columns_within(X, 64 << 20)
    assert source.held_bytes == held and source.max_memory == (64 << 20) - held
    # a smaller limit of the estimator's: its passes get that limit less the held matrix
    assert passes_within(source, 8 << 20).max_memory == (8 << 20) - held
    with ThreadPoolExecutor(1) as pool:
        wrapped = DistributedSource(source, pool)
    assert wrapped.held_bytes == held  # a wrapped source's held matrix is counted too


def test_rsvd_counts_its_oversampling_in_its_memory_check():
    from sfapprox import ResourceError
    from sfapprox.baselines.rsvd import RandomizedSVD

    K = _LoggedKernel.make(400)
    limit = 16 << 20
    RandomizedSVD(n_components=5, max_memory=limit, time_limit=None).fit(K)
    with pytest.raises(ResourceError, match="over the memory limit"):
        RandomizedSVD(n_components=5, n_oversamples=1500, max_memory=limit, time_limit=None).fit(K)


# ---- sizes asked for beside a budget, and sizes above N (audit, 2026-11-27)

def _low_rank_estimators():
    from sfapprox import NMF, Nystrom, RandomizedSVD, TruncatedSVD

    return [TruncatedSVD, RandomizedSVD, NMF, Nystrom]


@pytest.mark.parametrize("index", range(4))
def test_a_rank_asked_for_over_the_budget_also_given_is_refused(index):
    """RandomizedSVD(n_components=3, budget=20) stored 99 numbers (and Nystrom 105): never over a budget given."""
    cls = _low_rank_estimators()[index]
    X = np.random.default_rng(0).random((16, 16))
    with pytest.raises(BudgetError, match="over the budget of 20"):
        cls(n_components=3, budget=20).fit(X @ X.T)


@pytest.mark.parametrize("index", range(4))
def test_a_rank_above_the_order_is_refused_not_clipped(index):
    """n_components=100 on a 16 x 16 matrix gave rank 16 and 528 stored numbers (more than N^2) silently."""
    cls = _low_rank_estimators()[index]
    X = np.random.default_rng(0).random((16, 16))
    with pytest.raises(ParameterError, match="n_components=100 is more than the matrix's order N = 16"):
        cls(n_components=100).fit(X @ X.T)
    assert cls(n_components=16).fit(X @ X.T).n_stored_ > 0  # N itself is a rank


def test_sparse_entries_asked_for_over_the_budget_also_given_are_refused():
    from sfapprox import SparseApproximation

    X = np.random.default_rng(0).random((16, 16))
    with pytest.raises(BudgetError, match="50 entries stores 117 numbers, over the budget of 20"):
        SparseApproximation(n_sparse=50, budget=20).fit(X)
    assert SparseApproximation(n_sparse=5, budget=100).fit(X).n_stored_ <= 100


@pytest.mark.parametrize("name", NAMES)
def test_a_fit_and_its_operators_survive_pickle_and_deepcopy_and_clone_is_unfitted(fitted, X, name):
    # What a user who keeps or shares a surrogate does (joblib.dump is pickle underneath); audited with
    # threads, spawn workers and read-only values too (all fine then): this keeps the cheap part checked.
    import copy
    import pickle

    est, _ = fitted[name]
    x = np.random.default_rng(3).random(N)
    for back in (pickle.loads(pickle.dumps(est, protocol=5)), copy.deepcopy(est)):
        assert back.get_params().keys() == est.get_params().keys()
        for a, b in ((est.operator_, back.operator_), (est.operator_.T, pickle.loads(pickle.dumps(est.operator_.T)))):
            assert np.allclose(a @ x, b @ x) and np.allclose(a.T @ x, b.T @ x)
        assert np.allclose(back.frobenius_error(X), est.frobenius_error(X))
    sklearn_base = pytest.importorskip("sklearn.base")
    unfitted = sklearn_base.clone(est)
    assert type(unfitted) is type(est) and "operator_" not in vars(unfitted)
