"""Manifest schema: the shipped manifests load, and every mistake gets a clear one-line error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sfapprox import InputError
from sfapprox.datasets.fetch import file_sha256
from sfapprox.datasets.manifest import CATEGORIES, ManifestError, load_manifest, parse_manifest

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "sfapprox" / "datasets" / "manifests" / "paper-table1.toml"
SYNTHETIC = ROOT / "sfapprox" / "datasets" / "manifests" / "synthetic.toml"
KERNELS = ROOT / "sfapprox" / "datasets" / "manifests" / "kernels.toml"
REALDATA = (ROOT / ".." / "shared" / "realdata").resolve()

# The paper's figures that realdata/README.md states (name: (TSVD, SF)).
KNOWN = {
    "strike": (2.73, 1.04), "sawmill": (3.24, 1.03), "mexican-power": (3.85, 1.71), "worldtrade": (8.65e4, 4.47e4),
    "mesh1e1": (18.7, 9.82), "mesh2e1": (248, 347), "webkb-cornell": (6.98, 4.80), "aurasonar": (8.54, 8.68),
    "a99m": (14.7, 10.1), "scotland": (5.90, 3.76),
}


def write(tmp_path: Path, text: str, name: str = "paper-table1.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


ENTRY = '[[matrix]]\nname = "strike"\ncategory = "network"\nfile = "pajek/strike.paj"\n'


# ------------------------------------------------------------------ shipped manifests


def test_paper_manifest_lists_the_table_with_its_reference_figures():
    m = load_manifest(PAPER)
    names = m.names()
    assert len(names) == len(set(names)) == 45
    cats = {c: sum(e.category == c for e in m.entries) for c in CATEGORIES}
    assert cats["dense graph"] == 3 and cats["network"] == 7 and cats["surface mesh"] == 3
    assert cats["covariance"] == 8 and cats["image"] == 12 and cats["gradient image"] == 12
    refs = {e.name: (e.reference["tsvd"], e.reference["sf"]) for e in m.entries if e.reference}
    # pytest.approx compares flat mappings only (pytest >= 9 refuses nested tuples in dicts)
    assert refs.keys() == KNOWN.keys()
    for name, figures in KNOWN.items():
        assert refs[name] == pytest.approx(figures), name
    assert {e.name for e in m.entries if e.reproducible} == set(KNOWN) - {"a99m", "scotland"}
    for e in m.entries:
        assert e.file and (e.url or e.homepage), e.name
        if e.url:
            assert e.url.startswith(("http://", "https://"))
    archives = {e.name: e.member for e in m.entries if e.kind == "archive"}
    assert archives["mesh1e1"] == "mesh1e1/mesh1e1.mtx"
    assert "suitesparse-collection-website.herokuapp.com/MM/Pothen/mesh2e1.tar.gz" in m.entries[names.index("mesh2e1")].url


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata not present")
def test_paper_manifest_files_and_hashes_match_the_local_copies():
    m = load_manifest(PAPER)
    present = [e for e in m.entries if (REALDATA / e.file).is_file()]
    assert {e.name for e in present} >= set(KNOWN)
    for e in present:
        if e.sha256:
            assert file_sha256(REALDATA / e.file) in e.sha256, e.name
        for c in e.companions:
            assert (REALDATA / c).is_file()


def test_kernels_manifest_is_rbf_kernels_of_downloadable_point_tables():
    """The seed paper's MNIST example (and smaller sets): each entry a kernel of a LIBSVM table downloaded
    from its url, in the 'kernel' category (a report's table of its own)."""
    m = load_manifest(KERNELS)
    assert m.names() == ["pendigits-rbf", "mnist-test-rbf", "ijcnn1-rbf", "mnist-rbf"]
    for e in m.entries:
        assert e.category == "kernel" and e.kind == "download", e.name
        assert e.url.startswith("https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"), e.name
        assert e.file.startswith("kernels/") and e.file.endswith(".libsvm"), e.name
        assert e.load == {"kernel": "rbf"}, e.name  # the median heuristic's bandwidth


def test_synthetic_manifest_is_all_generators():
    m = load_manifest(SYNTHETIC)
    assert all(e.kind == "generator" for e in m.entries)
    assert {"attention", "synthetic", "covariance", "image", "gradient image"} <= {e.category for e in m.entries}
    generators = {e.generator for e in m.entries}
    assert {"random_sparse", "low_rank_plus_sparse", "banded", "circulant", "chord_product", "covariance",
            "edge_image", "attention"} <= generators


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "text, match",
    [
        (ENTRY.replace("category", "catgory"),
         "paper-table1.toml: entry 'strike': unknown field 'catgory' (known: name, category, "),
        (ENTRY.replace('"network"', '"netwrk"'),
         "entry 'strike': category 'netwrk' is not known (known: dense graph, network, "),
        (ENTRY.replace('category = "network"\n', ""), "entry 'strike': missing required field 'category'"),
        (ENTRY + ENTRY, "entry 'strike': duplicate name (entry #2)"),
        (ENTRY + '[[matrix]]\ncategory = "network"\n', "entry #2: missing required field 'name'"),
        (ENTRY.replace('"strike"', '"a b"'), "entry #1: field 'name' = 'a b' is not a valid name"),
        ('[[matrix]]\nname = "x"\ncategory = "network"\n', "entry 'x': no source; give 'file'"),
        (ENTRY + 'url = "file:///etc/passwd"\n', "entry 'strike': field 'url' = 'file:///etc/passwd' must be an http:// or https:// URL"),
        (ENTRY + 'url = "ftp://h/x.paj"\n', "must be an http:// or https:// URL"),
        (ENTRY + 'url = "https://h/x.tar.gz"\n', "'url' is an archive; name the file inside it with 'member'"),
        (ENTRY + 'member = "x.paj"\n', "field 'member' needs 'url'"),
        (ENTRY + 'url = "https://h/x.paj"\nmember = "x.paj"\n', "field 'member' needs an archive URL"),
        (ENTRY + 'url = "https://h/x.zip"\nmember = "../x.paj"\n', "field 'member' = '../x.paj' must be a relative path without '..'"),
        (ENTRY.replace("pajek/strike.paj", "/etc/passwd"), "field 'file' = '/etc/passwd' must be a relative path"),
        (ENTRY.replace("pajek/strike.paj", "../../x.paj"), "must be a relative path without '..'"),
        (ENTRY + 'sha256 = "abc"\n', "field 'sha256' must be 64 hex digits"),
        (ENTRY + "load = {netwrk = 1}\n", "entry 'strike': unknown load option 'netwrk' (known: format, var, network, "),
        (ENTRY + 'load = {network = "1"}\n', "load option 'network' must be int, got '1'"),
        (ENTRY + "load = {gradient = 1}\n", "load option 'gradient' must be bool, got 1"),
        (ENTRY + 'reference = {tsvd = "2.73"}\n', "reference figure 'tsvd' must be a number"),
        (ENTRY + 'reproducible = "yes"\n', "field 'reproducible' must be true or false"),
        (ENTRY + 'generator = "banded"\nparams = {n = 8}\n', "'generator' and 'file' exclude each other"),
        ('[[matrix]]\nname = "g"\ncategory = "synthetic"\ngenerator = "bandd"\nparams = {n = 8}\n',
         "entry 'g': field 'generator': unknown generator 'bandd'; known: random_sparse"),
        ('[[matrix]]\nname = "g"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8, width = 1}\n',
         "entry 'g': field 'params': generator 'banded': unknown parameter 'width' (known: n, bandwidth, seed)"),
        ('[[matrix]]\nname = "g"\ncategory = "synthetic"\ngenerator = "banded"\n',
         "field 'params': generator 'banded': parameter 'n' (the matrix order) is required"),
        (ENTRY + "params = {n = 8}\n", "field 'params' needs 'generator'"),
        ('[[matrix]]\nname = "g"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 8}\n'
         'load = {kernel = "rbf"}\n', "entry 'g': load options (kernel) say how to read a 'file'"),  # was ignored
        ('[[matrix]]\nname = "w"\ncategory = "other"\nfile = "m.pt"\nload = {var = "*", kernel = "rbf"}\n',
         "entry 'w': load option 'kernel' is the kernel matrix of a table of points"),  # "unavailable" lines
        ('titel = "x"\n' + ENTRY, "unknown top-level field 'titel' (known: description, matrix, reference_source, title"),
        ("", "no [[matrix]] entries"),
        ('matrix = "x"\n', "'matrix' must be an array of tables"),
    ],
)
def test_schema_errors_name_file_entry_and_field(tmp_path, text, match):
    path = write(tmp_path, text)
    with pytest.raises(ManifestError, match=re.escape(match)) as info:
        load_manifest(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_invalid_toml_names_the_line(tmp_path):
    path = write(tmp_path, ENTRY + "note = unquoted text\n")
    with pytest.raises(ManifestError, match=r"paper-table1.toml: not valid TOML \(.*line 5"):
        load_manifest(path)


def test_missing_manifest_file(tmp_path):
    with pytest.raises(ManifestError, match="nope.toml: no such manifest file"):
        load_manifest(tmp_path / "nope.toml")


def test_a_manifest_link_named_as_a_bundled_one_is_still_that_link(tmp_path, monkeypatch):
    """A link ``synthetic.toml`` whose file moved is said to be one, not replaced by the bundled manifest
    of that name (a file at the path given is that manifest, a dangling link too)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "synthetic.toml").symlink_to(tmp_path / "gone.toml")
    with pytest.raises(ManifestError, match=r"^synthetic.toml: a symbolic link to .*gone.toml, which does not exist"):
        load_manifest("synthetic.toml")


def test_a_manifest_link_that_loops_or_dangles_is_said_to(tmp_path):
    """A loop of links, or a link whose file was moved, is named as one (it was "no such manifest file" of a
    name ``ls`` lists), as every other input says it."""
    (tmp_path / "a.toml").symlink_to(tmp_path / "b.toml")
    (tmp_path / "b.toml").symlink_to(tmp_path / "a.toml")
    with pytest.raises(ManifestError, match=r"a.toml: a symbolic link that leads back to itself \(a loop\)"):
        load_manifest(tmp_path / "a.toml")
    (tmp_path / "c.toml").symlink_to(tmp_path / "moved.toml")
    with pytest.raises(ManifestError, match=r"c.toml: a symbolic link to .*moved.toml, which does not exist"):
        load_manifest(tmp_path / "c.toml")


def test_manifest_errors_are_input_errors():
    assert issubclass(ManifestError, InputError)


def test_select_by_name_and_unknown_names(tmp_path):
    path = write(tmp_path, ENTRY + ENTRY.replace("strike", "other"))
    m = load_manifest(path)
    assert [e.name for e in m.select(["other"])] == ["other"]
    assert len(m.select(None)) == 2
    with pytest.raises(ManifestError, match=r"no entry named 'strik' \(entries: strike, other\)"):
        m.select(["strik"])


def test_entry_fields_are_parsed(tmp_path):
    text = ENTRY + ('url = "https://h/a.tgz"\nmember = "a/strike.paj"\ncompanions = ["pajek/x.clu"]\n'
                    'sha256 = ["' + "a" * 64 + '", "' + "B" * 64 + '"]\nload = {network = 2, max_memory = "1G"}\n'
                    "reference = {tsvd = 3, sf = 1.5}\nreproducible = true\n")
    e = load_manifest(write(tmp_path, text)).entries[0]
    assert e.kind == "archive" and e.companions == ("pajek/x.clu",)
    assert e.sha256 == ("a" * 64, "b" * 64)
    assert e.load == {"network": 2, "max_memory": "1G"}
    assert e.reference == {"tsvd": 3.0, "sf": 1.5} and e.reproducible
    assert e.where == f"{tmp_path / 'paper-table1.toml'}: entry 'strike'"


def test_parse_manifest_from_a_dict():
    m = parse_manifest({"title": "t", "matrix": [{"name": "g", "category": "attention", "generator": "attention",
                                                  "params": {"n": 16, "beta": 2.0}}]}, "x.toml")
    assert m.title == "t" and m.entries[0].kind == "generator"


def test_a_folder_a_byte_order_mark_and_a_file_that_is_a_folder(tmp_path):
    """A folder given as the manifest is said to be one (it was "no such manifest file"); a manifest
    saved with a UTF-8 byte-order mark is read (it was "not valid TOML"); file = "." or "data/"
    is refused as a folder when the manifest is read (it was "not found; put it at DATA_DIR/.")."""
    with pytest.raises(ManifestError, match="is a folder; give the manifest file"):
        load_manifest(tmp_path)
    entry = '[[matrix]]\nname = "a"\ncategory = "other"\nfile = "a.npy"\n'
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + entry.encode())
    assert load_manifest(tmp_path / "bom.toml").entries[0].file == "a.npy"
    for folder in (".", "data/", "./"):
        (tmp_path / "m.toml").write_text(entry.replace('"a.npy"', f'"{folder}"'))
        with pytest.raises(ManifestError, match=f"field 'file' = '{re.escape(folder)}' must name a file, not a folder"):
            load_manifest(tmp_path / "m.toml")


@pytest.mark.parametrize("params, match", [
    ("{n = 16, density = 2.0}", r"density=2\.0 must be between 0\.0 and 1\.0"),
    ("{n = 16, density = nan}", r"density=nan must be a finite number"),
    ("{n = 16, seed = -1}", r"seed=-1 must be >= 0"),
    ("{n = 0}", r"n=0 must be an integer >= 2"),
    ("{n = 16, density = \"lots\"}", r"density='lots' must be a finite number"),
    ("{n = 16, symmetric = 1}", r"symmetric=1 must be true or false"),
])
def test_bad_generator_values_are_refused_when_the_manifest_is_read(tmp_path, params, match):
    """Values, not only names: each of these gave an 'unavailable' line per method, exit 0, on every run."""
    (tmp_path / "m.toml").write_text(f'[[matrix]]\nname = "a"\ncategory = "synthetic"\n'
                                     f'generator = "random_sparse"\nparams = {params}\n')
    with pytest.raises(ManifestError, match=r"entry 'a': field 'params': generator 'random_sparse': " + match):
        load_manifest(tmp_path / "m.toml")


def test_generator_bounds_that_depend_on_n_are_checked_against_its_n(tmp_path):
    ok = '[[matrix]]\nname = "a"\ncategory = "synthetic"\ngenerator = "banded"\nparams = {n = 100, bandwidth = 10}\n'
    (tmp_path / "m.toml").write_text(ok)
    assert load_manifest(tmp_path / "m.toml").entries[0].params["bandwidth"] == 10
    (tmp_path / "m.toml").write_text(ok.replace("n = 100", "n = 8"))
    with pytest.raises(ManifestError, match=r"bandwidth=10 must be between 0 and n-1=7"):
        load_manifest(tmp_path / "m.toml")


def test_a_control_character_in_a_file_name_is_refused_when_the_manifest_is_read(tmp_path):
    """A NUL byte in ``file`` passed the manifest's checks and failed at download ("embedded null byte")."""
    from sfapprox.datasets.manifest import ManifestError, load_manifest

    m = tmp_path / "m.toml"
    m.write_text('[[matrix]]\nname = "x"\ncategory = "network"\nfile = "x\\u0000.mtx"\nurl = "http://h/x.mtx"\n')
    with pytest.raises(ManifestError, match="holds a control character"):
        load_manifest(m)


@pytest.mark.parametrize("url", ["http://h/x.mtx\\n", "http://h/x\\u001b[31m.mtx", "http://h/x.mtx\\t"])
def test_a_control_character_in_a_url_is_refused_when_the_manifest_is_read(tmp_path, url):
    """A line break or an escape in ``url`` was requested percent-encoded (a 404 at download time)."""
    from sfapprox.datasets.manifest import ManifestError, load_manifest

    m = tmp_path / "m.toml"
    m.write_text(f'[[matrix]]\nname = "x"\ncategory = "network"\nfile = "x.mtx"\nurl = "{url}"\n')
    with pytest.raises(ManifestError, match=r"m\.toml: entry 'x': field 'url' = .* holds a control character"):
        load_manifest(m)


@pytest.mark.parametrize("load, message", [
    ({"format": "nope"}, "format='nope' is not one of"),
    ({"network": 0}, "network=0 must be a positive integer"),
    ({"two_mode": "x"}, "two_mode='x' must be"),
    ({"max_memory": "-5G"}, "max_memory must be a positive, finite size"),
    ({"kernel": "linear", "bandwidth": 3.0}, "the linear kernel takes no bandwidth"),
    ({"kernel": "rbf", "covariance": True}, "does not combine with an attention map or a covariance"),
    ({"kernel": "cosine", "resize": 10, "gradient": True}, "gradient=True, resize=10 do not apply to it"),
    ({"kernel": "rbf"}, "karate_like.net: a kernel needs a table of points"),  # (found at run time)
])
def test_load_values_no_file_makes_right_are_refused_when_the_manifest_is_read(load, message):
    """They passed the manifest's type checks and were found at run time: the entry "unavailable", exit 0,
    tried again at every run."""
    entry = {"name": "a", "category": "network", "file": "karate_like.net", "load": load}
    with pytest.raises(ManifestError, match=rf"entry 'a': load options: .*{re.escape(message)}"):
        parse_manifest({"title": "t", "matrix": [entry]})
    fine = parse_manifest({"title": "t", "matrix": [{**entry, "load": {"max_memory": "1G", "network": 1}}]})
    assert fine.entries[0].load["network"] == 1


@pytest.mark.parametrize("load,key", [
    ({"kernel": "rbf", "bandwidth": -1.0}, "bandwidth"),
    ({"kernel": "gauss"}, "kernel"),
    ({"network": 0}, "network"),
])
def test_load_value_errors_name_the_manifest_s_keys_when_the_batch_command_reads_it(load, key):
    """Read by `sfapprox batch` (options spelled as typed), a bad load value said "(--bandwidth)": an option of
    `compare`, which no manifest has; the entry's key is ``bandwidth``, as its run at run time says it."""
    from sfapprox._errors import spelled_for

    entry = {"name": "a", "category": "network", "file": "pts.csv", "load": load}
    with spelled_for("cli"), pytest.raises(ManifestError, match=r"entry 'a': load options: ") as caught:
        parse_manifest({"matrix": [entry]}, "m.toml")
    assert f"--{key}" not in str(caught.value) and key in str(caught.value)


def test_a_manifest_entry_reads_a_text_table_with_its_delimiter_and_decimal():
    entry = {"name": "a", "category": "other", "file": "t.csv", "load": {"delimiter": ";", "decimal": "."}}
    assert parse_manifest({"title": "t", "matrix": [entry]}).entries[0].load == {"delimiter": ";", "decimal": "."}
    entry["load"] = {"delimiter": ",", "decimal": ","}
    with pytest.raises(ManifestError, match=r"entry 'a': load options: .*name the same character"):
        parse_manifest({"title": "t", "matrix": [entry]})


def _generated(*names):
    return {"matrix": [{"name": n, "category": "synthetic", "generator": "circulant", "params": {"n": 8}} for n in names]}


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_names_that_differ_only_in_case_are_refused_where_file_names_ignore_case(monkeypatch, platform):
    # (before: accepted, and on macOS or Windows both entries' factors went to one file, the last one kept)
    monkeypatch.setattr("sys.platform", platform)
    with pytest.raises(ManifestError, match=r"entry 'a' \(#2\): differs from entry 'A' only in case"):
        parse_manifest(_generated("A", "a"))


def test_names_that_differ_only_in_case_are_two_entries_on_linux(monkeypatch):
    monkeypatch.setattr("sys.platform", "linux")
    assert [e.name for e in parse_manifest(_generated("A", "a")).entries] == ["A", "a"]


def test_a_windows_device_name_is_refused_on_windows(monkeypatch):
    monkeypatch.setattr("sys.platform", "win32")
    with pytest.raises(ManifestError, match=r"'nul' names a device on Windows"):
        parse_manifest(_generated("ok", "nul.2"))
    assert [e.name for e in parse_manifest(_generated("console", "nullify")).entries] == ["console", "nullify"]


def test_a_loop_of_links_as_a_manifest_path_is_a_one_line_error(tmp_path):
    """Path.resolve() raised 3.11's RuntimeError "Symlink loop" (a traceback); 3.13's passed it silently."""
    from sfapprox import ParameterError
    from sfapprox.datasets.manifest import manifest_folders

    (tmp_path / "m.toml").symlink_to(tmp_path / "n.toml")
    (tmp_path / "n.toml").symlink_to(tmp_path / "m.toml")
    with pytest.raises(ParameterError, match=r"m.toml: a symbolic link that leads back to itself \(a loop\)"):
        manifest_folders(tmp_path / "m.toml")


# ------------------------------------------------------------------ bundled manifests, by name and by old path


def test_a_bundled_manifest_is_read_by_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anywhere: a wheel's user has no clone
    by_name = load_manifest("paper-table1")
    assert by_name.path == "paper-table1" and by_name.file == str(PAPER) and by_name.folder == PAPER.parent
    assert by_name.names() == load_manifest(PAPER).names() and by_name.entries[0].manifest == "paper-table1"
    with pytest.raises(ManifestError, match=r"^nosuch: no such manifest file \(the bundled manifests, given by "
                                            r"name: kernels, paper-table1, synthetic\)$"):
        load_manifest("nosuch")


def test_an_old_clone_path_reads_the_bundled_manifest_with_a_future_warning(tmp_path):
    old = tmp_path / "data_manifests" / "synthetic.toml"
    with pytest.warns(FutureWarning, match=rf"^{re.escape(str(old))}: .* deprecated .* give the name synthetic") \
            as said:
        m = load_manifest(old)
    assert said[0].filename == __file__  # the caller's line, not sfapprox's (so a script's author finds it)
    assert m.file == str(SYNTHETIC) and m.path == "synthetic" and m.names() == load_manifest(SYNTHETIC).names()


def test_a_moved_manifest_finds_its_files_where_it_did(tmp_path, monkeypatch):
    """Files fetched before the move stay fetched: the cache folder is named after the manifest's file name,
    which every spelling of a bundled manifest keeps; and a clone's user who put a file beside the old
    data_manifests/paper-table1.toml (a `file` is relative to its manifest's folder) still has it found."""
    from sfapprox.datasets.fetch import cache_folder_name, local_path

    monkeypatch.chdir(tmp_path)
    cache, old = tmp_path / "cache", tmp_path / "data_manifests"
    fetched = cache / "paper-table1" / "pajek" / "Scotland.paj"  # `scotland` has a url: it was downloaded here
    fetched.parent.mkdir(parents=True)
    fetched.write_text("*Vertices 1\n")
    beside = old / "pajek" / "strike.paj"  # `strike` has none: a clone's user put it beside the manifest
    beside.parent.mkdir(parents=True)
    beside.write_text("*Vertices 1\n")
    with pytest.warns(FutureWarning):
        by_old_path = load_manifest("data_manifests/paper-table1.toml")
    for m in (by_old_path, load_manifest("paper-table1"), load_manifest(PAPER)):
        entries = {e.name: e for e in m.entries}
        assert cache_folder_name(entries["scotland"].manifest) == "paper-table1"
        assert local_path(entries["scotland"], cache=cache) == fetched
    entries = {e.name: e for e in by_old_path.entries}
    assert local_path(entries["strike"], cache=cache) == old.resolve() / "pajek" / "strike.paj"


def test_a_manifest_and_its_entries_show_as_one_short_line():
    """In a notebook, load_manifest("paper-table1") showed every field of its 45 entries: 23,100 characters
    (an entry alone 470-650)."""
    from sfapprox.datasets import load_manifest

    manifest = load_manifest("paper-table1")
    said = repr(manifest)
    assert said == ("<Manifest paper-table1 ('Sparse Factorization paper, Table 1'): 45 entries: aurasonar, protein, "
                    "yeast, sawmill, scotland and 40 more>")
    first = manifest.entries[0]
    assert repr(first) == ("<Entry aurasonar (dense graph) of paper-table1: chen2009_similarity/aural_sonar.mat; "
                           "reference tsvd 8.54, sf 8.68>")
    assert all(len(repr(e)) < 200 and "\n" not in repr(e) for e in manifest.entries)
    assert repr(load_manifest("synthetic").entries[0]).startswith("<Entry random-sparse-64 (synthetic) of synthetic: "
                                                                  "generator random_sparse(n=64, ")


@pytest.mark.parametrize("given", [None, 5])
def test_a_manifest_that_is_no_path_is_one_parameter_error(given):
    """load_manifest(None) was os.fspath's raw TypeError ("expected str, bytes or os.PathLike object")."""
    from sfapprox import ParameterError
    from sfapprox.datasets import load_manifest

    with pytest.raises(ParameterError, match=rf"manifest must be a manifest file .* or the name of a bundled one "
                                             rf"\(kernels, paper-table1, synthetic\), got {type(given).__name__}$"):
        load_manifest(given)
