"""FitSettings and LoadOptions: one object each, checked at the boundary."""

import numpy as np
import pytest

from sfapprox import FitSettings, LoadOptions, ParameterError
from sfapprox._settings import parse_size
from sfapprox.baselines.nmf import NMF
from sfapprox.sf.model import ChordSF


def test_defaults_and_zero_time_limit():
    assert FitSettings().time_limit == "auto" and FitSettings(time_limit=0).time_limit is None
    # One method gets 60 s; the methods of a comparison share 120 s (60 s at most each).
    assert [FitSettings().per_method(k).time_limit for k in (1, 2, 3, 8)] == [60.0, 60.0, 40.0, 15.0]
    assert FitSettings(time_limit=7).per_method(8).time_limit == 7.0
    assert FitSettings().apply_to(ChordSF)["time_limit"] == 60.0
    assert FitSettings(device="CPU").device == "cpu"


@pytest.mark.parametrize("field,value", [("time_limit", -1), ("time_limit", float("nan")), ("time_limit", "soon"), ("max_iter", -2),
                                         ("seed", 1.5), ("threads", 0), ("device", "tpu"), ("dtype", "float16"),
                                         ("max_memory", True)])
def test_bad_values_are_refused(field, value):
    with pytest.raises(ParameterError, match=field):
        FitSettings(**{field: value})


def test_a_seed_torch_cannot_take_is_refused_by_the_settings_and_every_estimator():
    """A seed of 2**64 ran every method seeded by numpy, then failed rpca-pcp's (a torch generator) with a
    traceback, "Overflow when unpacking long long"; the largest seed is now said, in full."""
    from sfapprox.baselines.rpca import RobustPCA

    FitSettings(seed=2**64 - 1)
    with pytest.raises(ParameterError, match=r"\[0, 18446744073709551615\]. Got 18446744073709551616"):
        FitSettings(seed=2**64)
    for make in (lambda: ChordSF(random_state=2**64).fit(np.eye(4)), lambda: NMF(random_state=2**64).fit(np.eye(4)),
                 lambda: RobustPCA(budget=20, random_state=2**64).fit(np.eye(4))):
        with pytest.raises(ParameterError, match="random_state"):
            make()


def test_apply_to_maps_names_and_keeps_class_defaults():
    s = FitSettings(seed=3, time_limit=5, device="cpu")
    params = s.apply_to(ChordSF, n_factors=2)
    assert params["random_state"] == 3 and params["time_limit"] == 5 and params["n_factors"] == 2
    assert "max_iter" not in params  # None: ChordSF keeps its own default
    assert "max_iter" not in FitSettings(max_iter=7).apply_to(NMF, exclude=("max_iter",))
    assert FitSettings(max_iter=7).apply_to(ChordSF)["max_iter"] == 7


def test_load_options_keywords():
    kw = LoadOptions(var="A", extra={"relation": 2}).keywords()
    assert kw["var"] == "A" and kw["relation"] == 2 and "extra" not in kw


def test_a_reading_option_no_reader_takes_is_one_parameter_error_naming_it(tmp_path):
    """``LoadOptions(extra=...)`` with a misspelt keyword, or ``open_matrix`` given one, is refused
    before reading, naming it and the options there are (a bare TypeError from inside before)."""
    import numpy as np

    import sfapprox

    path = tmp_path / "x.csv"
    np.savetxt(path, np.eye(4), delimiter=",")
    calls = [lambda: sfapprox.compare(path, ["tsvd"], load=LoadOptions(extra={"relatoin": 2})),
             lambda: sfapprox.open_matrix(path, relatoin=2),
             lambda: sfapprox.open_matrix(path, kernel="rbf", relatoin=2)]
    for call in calls:
        with pytest.raises(ParameterError, match=r"unknown reading option 'relatoin'; the options are .*relation"):
            call()


@pytest.mark.parametrize("text,expected", [("8G", 8 << 30), ("500m", 500 << 20), ("1.5KiB", 1536), ("123", 123)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["nan", "inf", "1e400", "-5", "0", "lots", "1e30G", "0.5", "1e-300"])
def test_parse_size_refuses_nonsense(text):
    # "0.5" (a unit left out) was a limit of 1 byte, every matrix then refused as "over the limit of 1 B"
    from sfapprox._errors import spelled_for

    # the limit as its reader names it: max_memory to Python, --max-memory on the command line
    with pytest.raises(ParameterError, match="^max_memory"):
        parse_size(text)
    with spelled_for("cli"), pytest.raises(ParameterError, match="^--max-memory"):
        parse_size(text)


def test_time_share_passes_unused_time_on(monkeypatch):
    import sfapprox._settings as S

    clock = {"now": 1000.0}
    monkeypatch.setattr(S.time, "monotonic", lambda: clock["now"])
    share = FitSettings().share_time(4)  # 120 s for 4 methods
    assert share.next_limit() == 30.0
    clock["now"] += 0.5  # the first method took half a second of its 30
    assert share.next_limit() == pytest.approx(min(S.DEFAULT_TIME_LIMIT, 119.5 / 3))
    clock["now"] += 59.5
    assert share.next_limit() == pytest.approx(30.0)  # 60 s left for the last two
    clock["now"] += 200  # over the shared time: the last still gets a little, never "no limit"
    assert share.next_limit() == S.MIN_SHARE
    own = FitSettings(time_limit=7).share_time(3)
    assert [own.next_limit() for _ in range(3)] == [7.0, 7.0, 7.0]
    assert FitSettings(time_limit=0).share_time(2).next_limit() is None


@pytest.mark.parametrize("device, message", [("", "device is empty"), ("  ", "device is empty"),
                                             ("cuda:abc", "unknown device 'cuda:abc'"), ("cudax", "unknown device")])
def test_an_empty_or_malformed_device_is_refused_by_the_estimators_as_by_the_settings(device, message):
    """ChordSF, RobustPCA and NMF took device="" as auto (FitSettings refused it), and "cuda:abc" was
    "no CUDA GPU is available" instead of a malformed name."""
    import numpy as np

    from sfapprox import ChordSF, ParameterError
    from sfapprox._device import resolve_device

    with pytest.raises(ParameterError, match=message):
        resolve_device(device)
    with pytest.raises(ParameterError, match=message):
        ChordSF(device=device, max_iter=2).fit(np.eye(8))


def test_every_max_memory_takes_the_sizes_the_command_line_takes(tmp_path):
    """``--max-memory 4G`` in the README, ``max_memory="4G"`` in a notebook: each public entry point takes
    the size (as ``parse_size`` reads it), an estimator's ``get_params`` returns it as passed, and
    ``FitSettings`` (what result files record) holds it in bytes."""
    import numpy as np

    import sfapprox
    from sfapprox.describe import describe
    from sfapprox.estimate import estimate_errors
    from sfapprox.sources import ArraySource

    four_g = 4 << 30
    X = np.random.default_rng(0).random((12, 12))
    X = X + X.T
    path = tmp_path / "x.csv"
    np.savetxt(path, X, delimiter=",")

    sf = ChordSF(max_iter=3, max_memory="4G")
    assert sf.get_params()["max_memory"] == "4G"  # as passed, as scikit-learn returns it
    with pytest.warns(sfapprox.ConvergenceWarning):
        sf.fit(X)
    assert sfapprox.TruncatedSVD(n_components=2, max_memory="500M").fit(X).n_stored_ > 0
    assert FitSettings(max_memory="4G").max_memory == four_g
    assert FitSettings(max_memory="4G").to_dict()["max_memory"] == four_g  # what a result file records
    assert FitSettings().replace(max_memory="1.5g").max_memory == 3 << 29
    assert FitSettings(max_memory=np.int64(1 << 20)).max_memory == 1 << 20  # a numpy integer: the int it is
    assert sfapprox.compare(X, ["tsvd"], max_memory="4G").to_dict()["settings"]["max_memory"] == four_g
    assert sfapprox.load_matrix(path, max_memory="4G").n == 12
    assert sfapprox.load_matrix(path).to_dense(max_memory="1M").shape == (12, 12)
    assert sfapprox.open_matrix(path, kernel="rbf", max_memory="4G").n == 12
    assert describe(ArraySource(X), max_memory="4G").data["matrix"]["max_memory"] == four_g
    assert ArraySource(X).limited("4G").max_memory == four_g
    assert ArraySource(X).to_dense("1M").shape == (12, 12)
    assert estimate_errors(ArraySource(X), {"zero": np.zeros((12, 12))}, max_memory="1M")["zero"].exact


def test_max_memory_bytes_reads_the_limit_in_bytes_as_every_layer_takes_it():
    """``max_memory_bytes``: the limit typed ``int | None`` for the layers below (``max_memory`` is typed
    ``int | str | None`` for the constructors, so 46 of its readers were type errors); a LoadOptions, which
    stores a size as given, reads it as ``--max-memory`` does."""
    assert FitSettings(max_memory="4G").max_memory_bytes == 4 << 30
    assert FitSettings().max_memory_bytes is None
    assert LoadOptions(max_memory="500M").max_memory == "500M"  # stored as given, read by its reader
    assert LoadOptions(max_memory="500M").max_memory_bytes == 500 << 20
    assert LoadOptions(max_memory=1 << 20).max_memory_bytes == 1 << 20
    assert LoadOptions().max_memory_bytes is None


@pytest.mark.parametrize("bad", ["4X", "0G", "", "-1", "inf"])
def test_a_size_no_reader_reads_is_one_parameter_error_naming_max_memory(tmp_path, bad):
    """A size ``parse_size`` cannot read is refused by every entry point, naming ``max_memory`` as a
    Python caller passes it (never ``--max-memory``)."""
    import numpy as np

    import sfapprox

    X = np.eye(4)
    path = tmp_path / "x.csv"
    np.savetxt(path, X, delimiter=",")
    calls = [lambda: ChordSF(max_memory=bad).fit(X), lambda: FitSettings(max_memory=bad),
             lambda: sfapprox.compare(X, ["tsvd"], max_memory=bad), lambda: sfapprox.load_matrix(path, max_memory=bad),
             lambda: sfapprox.open_matrix(path, kernel="rbf", max_memory=bad)]
    for call in calls:
        with pytest.raises(ParameterError, match=r"max_memory.*a size such as '8G'") as info:
            call()
        assert "--max-memory" not in str(info.value) and repr(bad) in str(info.value)


def test_every_reading_default_is_the_one_load_options_declares():
    """LoadOptions' fields are the one place a reading default is written: ``load_matrix``'s and
    ``open_matrix``'s signatures, the command line's options and the options a kernel refuses when
    changed read them there (they were literals beside the dataclass's, free to drift from it)."""
    import dataclasses
    import inspect

    from sfapprox.cli._options import LOAD
    from sfapprox.io import covariance_of_table, load_matrix, open_matrix, read_points
    from sfapprox.io._sources import _FILE_OPTIONS, check_reading_options

    declared = {f.name: f.default for f in dataclasses.fields(LoadOptions) if f.name != "extra"}
    seen = set()
    for func in (load_matrix, open_matrix, read_points, check_reading_options, covariance_of_table):
        for name, param in inspect.signature(func).parameters.items():
            if name in declared:
                assert param.default == declared[name], (func.__name__, name, param.default)
                seen.add(name)
    for param in LOAD.params:  # --max-memory is a size as typed ("4G"), None alike
        assert param.default == declared[param.name], ("--" + param.name, param.default)
        seen.add(param.name)
    assert seen == set(declared)
    assert _FILE_OPTIONS == {name: declared[name] for name in _FILE_OPTIONS} and "mirror" in _FILE_OPTIONS


def test_every_seed_default_is_default_seed():
    """One default seed (``DEFAULT_SEED``): FitSettings' ``seed``, every estimator's ``random_state``, a
    kernel's bandwidth sample and the column solvers take it from ``_settings``, where ``random_state=0``
    and ``seed=0`` were literals in each (an estimator fitted alone and the same one in a comparison
    would part if one of them changed)."""
    import dataclasses
    import importlib
    import inspect

    from sfapprox._base import Approximation, methods
    from sfapprox._settings import DEFAULT_SEED

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for spec in methods().values():  # each method's module holds its estimator
        importlib.import_module(spec.make.__module__)
    importlib.import_module("sfapprox.sf.model")
    estimators = {cls for cls in subclasses(Approximation) if "random_state" in inspect.signature(cls).parameters}
    assert {"ChordSF", "TruncatedSVD", "RobustPCA", "NMF", "Nystrom", "RandomizedSVD", "ChordLowRank"} <= {
        cls.__name__ for cls in estimators}
    for cls in estimators:
        assert inspect.signature(cls).parameters["random_state"].default == DEFAULT_SEED, cls.__name__
    assert {f.name: f.default for f in dataclasses.fields(FitSettings)}["seed"] == DEFAULT_SEED
    from sfapprox.baselines.rsvd import source_svd
    from sfapprox.estimate import estimate_errors
    from sfapprox.sources import KernelMatrix
    from sfapprox.sources.kernels import median_bandwidth

    for func in (KernelMatrix, median_bandwidth, estimate_errors, source_svd):
        assert inspect.signature(func).parameters["seed"].default == DEFAULT_SEED, func.__name__


def test_load_options_built_by_position_keep_extra_in_its_place():
    # delimiter and decimal came after the older fields but before extra: a 14th positional argument
    # (extra) became the delimiter
    from sfapprox._settings import LoadOptions

    opts = LoadOptions(None, None, None, None, None, False, None, None, False, "auto", None, None, None, {"k": 1})
    assert opts.extra == {"k": 1} and opts.delimiter is None
    assert LoadOptions(delimiter=";", decimal=",").decimal == ","


@pytest.mark.parametrize("reader, delimiters, decimals", [
    ("api", "delimiter=',' (commas), delimiter=';' (semicolons), delimiter='tab' (tabs) or "
            "delimiter='whitespace' (blanks)", "decimal='.' (a point) or decimal=',' (a comma)"),
    ("cli", "--delimiter , (commas), --delimiter ';' (semicolons), --delimiter tab (tabs) or "
            "--delimiter whitespace (blanks)", "--decimal . (a point) or --decimal , (a comma)"),
])
def test_an_unknown_delimiter_or_decimal_names_the_choices_as_their_reader_gives_them(reader, delimiters, decimals):
    """On the command line the choices read "',', ';', 'tab'": Python's quoting, not what is typed
    (``--delimiter ,``; ``--delimiter ';'`` shell-quoted, as the value refused is)."""
    from sfapprox._errors import spelled_for
    from sfapprox._settings import check_text_marks

    with spelled_for(reader), pytest.raises(ParameterError) as delimiter:
        check_text_marks("|", None)
    with spelled_for(reader), pytest.raises(ParameterError) as decimal:
        check_text_marks(None, ";")
    assert str(delimiter.value).endswith(f"is not a delimiter sfapprox reads: one of {delimiters}"), delimiter.value
    assert str(decimal.value).endswith(f"is not a decimal mark: {decimals}"), decimal.value
