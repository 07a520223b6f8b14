"""The package's layout holds: no import cycles, one home for every surrogate, no heavy import on `import sfapprox`."""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sfapprox"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the sfapprox modules it imports, top-level and function-local imports alike.

    An import of a module's own package (``from . import _options``) is left
    out: a package is always initialised before its submodules.
    """
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            deps.update(t for t in targets if t in modules)
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = deps - ancestors - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 80 and "sfapprox.operators" in graph["sfapprox.sf.model"]
    assert "sfapprox.operators.chord" in graph["sfapprox.operators"]
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_operators_do_not_depend_on_the_methods():
    """Surrogates are used without the code that fits them: operators import no method package."""
    graph = import_graph()
    for name, deps in graph.items():
        if name.startswith("sfapprox.operators"):
            fitting = {d for d in deps if d.startswith(("sfapprox.baselines", "sfapprox.hybrid", "sfapprox.comparison"))}
            assert not fitting, (name, fitting)


def test_every_method_returns_a_registered_operator():
    from sfapprox._base import RunContext, methods
    from sfapprox._settings import FitSettings
    from sfapprox.operators import operator_class

    G = np.random.default_rng(0).random((16, 16))
    X = G @ G.T  # symmetric PSD and non-negative: every method applies (Nyström, NMF)
    context = RunContext(FitSettings(device="cpu", max_iter=5, time_limit=2))
    for name, spec in methods().items():
        est = spec.make(16, 16 * 16, context).fit(X)
        op = est.operator_
        assert operator_class(type(op).kind) is type(op), name


#: Libraries of a second or a tenth of one each to import: loaded where a command uses them, never by
#: ``import sfapprox`` (benchmarks/startup.py times it).
HEAVY = {"torch", "numba", "triton", "numpy", "scipy", "h5py", "rich", "typer", "click", "pydantic", "pooch",
         "matplotlib", "PIL", "requests"}


def _loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_importing_the_package_loads_no_heavy_library():
    loaded = _loaded_by("import sfapprox")
    assert not HEAVY & loaded, sorted(HEAVY & loaded)
    # nor any of its own modules beyond the error family (the rest load when an attribute is asked for)
    assert {m for m in loaded if m.startswith("sfapprox")} == {"sfapprox", "sfapprox._errors"}


@pytest.mark.parametrize("module", ["sfapprox._compiled", "sfapprox._atomic", "sfapprox._progress",
                                    "sfapprox.cli._render", "sfapprox.cli.report", "sfapprox.cli"])
def test_the_startup_modules_load_no_compiler_and_no_numerics(module):
    # numba's cache-folder fallback is worked out where a kernel is first imported, not when the module
    # that holds it loads; the CLI's modules load before any command runs, for --help too
    loaded = _loaded_by(f"import {module}")
    assert not {"torch", "numba", "triton", "numpy", "scipy", "h5py", "pooch", "matplotlib"} & loaded


def test_the_modules_the_package_docstring_names_are_attributes_after_a_plain_import():
    """``import sfapprox; sfapprox.sweep.sweep(...)`` (the package docstring's spelling) was an AttributeError."""
    code = ("import sfapprox; print(sfapprox.sweep.sweep.__name__, sfapprox.datasets.__name__, "
            "sfapprox.budget.parse_budget.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["sweep", "sfapprox.datasets", "parse_budget"], done.stderr


@pytest.mark.parametrize("old, new, home", [
    ("sfapprox.sf.linop", "ChordOperator", "sfapprox.operators"),
    ("sfapprox.sf.linop", "HybridOperator", "sfapprox.operators"),
    # the first homes (sfapprox.linop; results held the saved fits and the atomic writes): no shim was left
    ("sfapprox.linop", "ChordOperator", "sfapprox.operators"),
    ("sfapprox.linop", "HybridOperator", "sfapprox.operators"),
    ("sfapprox.results", "load_factors", "sfapprox.factors"),
    ("sfapprox.results", "save_factors", "sfapprox.factors"),
    ("sfapprox.results", "SavedFactors", "sfapprox.factors"),
    ("sfapprox.results", "write_json", "sfapprox._atomic"),
    ("sfapprox.results", "atomic_path", "sfapprox._atomic"),
    # comparison's, until 7ce4959 (no shim was left)
    ("sfapprox.comparison", "paper_tsvd_rank", "sfapprox.budget"),
])
def test_old_paths_still_work_with_a_deprecation_note_at_the_callers_line(old, new, home):
    import importlib

    with pytest.warns(DeprecationWarning, match=f"moved to {home}.{new}") as caught:
        cls = getattr(importlib.import_module(old), new)
    assert cls is getattr(importlib.import_module(home), new)
    assert caught[0].filename == __file__
    with pytest.raises(AttributeError, match=f"module '{old}' has no attribute 'nope'"):
        importlib.import_module(old).nope


@pytest.mark.parametrize("cls", ["TruncatedSVD", "NMF"])
def test_the_old_rank_parameter_still_works_with_a_deprecation_note(cls):
    """TruncatedSVD(rank=5), the name before scikit-learn's n_components, was a TypeError."""
    import sfapprox

    with pytest.warns(DeprecationWarning, match=rf"{cls}\(rank=\) is deprecated .* use n_components=") as caught:
        est = getattr(sfapprox, cls)(rank=3)
    assert caught[0].filename == __file__ and est.n_components == 3 and "rank" not in est.get_params()
    with pytest.raises(sfapprox.ParameterError, match="rank= is the old name of n_components=; give only"):
        getattr(sfapprox, cls)(rank=3, n_components=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'ranks'"):
        getattr(sfapprox, cls)(ranks=3)


def test_the_distribution_names_its_license_by_spdx_expression_and_ships_its_text():
    # PEP 639: setuptools deprecated the `license = { text = ... }` table and refuses it from
    # 2027-02-18; the expression form writes License-Expression and the license file beside it
    # (the installed metadata: an editable install made before pyproject.toml changed still has the old one)
    metadata = importlib.metadata.metadata("sfapprox")
    stale = "the installed metadata is stale: pip install -e . again"
    # .get: from Python 3.12 a missing field read by [] warns (DeprecationWarning, to become a KeyError), which
    # took the place of the message saying why it was missing
    assert metadata.get("License-Expression") == "MIT", stale
    assert "LICENSE" in (metadata.get_all("License-File") or []), stale
    assert (PACKAGE.parent / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_a_build_of_the_package_ships_every_file_it_reads(tmp_path):
    """A wheel held no data_manifests/ (a clone's folder), so `sfapprox batch synthetic ...` had no manifest:
    what setuptools builds from pyproject.toml (a wheel's files) holds the bundled manifests and the py.typed marker, and no file
    outside the sources but them: a file the code reads beside its modules that is not package data
    is missing from every install but a clone's."""
    from sfapprox.datasets.bundled import bundled_manifests

    source = tmp_path / "source"  # a copy: the build writes its egg-info beside pyproject.toml
    shutil.copytree(PACKAGE, source / "sfapprox", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(PACKAGE.parent / name, source)
    built = tmp_path / "lib"
    done = subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py",
                           "--build-lib", str(built)], cwd=source, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shipped = {p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file() and p.suffix != ".py"}
    # py.typed (PEP 561): without it a user's type checker ignores the package's hints
    assert shipped == {f"sfapprox/datasets/manifests/{name}.toml" for name in bundled_manifests()} | {"sfapprox/py.typed"}
    sources = {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert sources - {p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file()} == set()
