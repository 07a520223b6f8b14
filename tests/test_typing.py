"""The package's type hints, as a user's type checker reads them (sfapprox ships py.typed).

Every hint of the public API resolves to something imported (a hint naming what its module never imports
is an error for ``typing.get_type_hints`` and an unknown name for mypy), what ``__getattr__`` hands out
lazily is visible to type checkers, and, where mypy is installed (it is not a test dependency), a user's
script written as README.md writes it type-checks and mypy reports the mistakes it holds.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import os
import pkgutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

import sfapprox

ROOT = Path(__file__).resolve().parents[1]
USER_SCRIPT = Path(__file__).with_name("typing_user.py")
STRICT_USER_SCRIPT = Path(__file__).with_name("typing_user_strict.py")


@functools.lru_cache(maxsize=None)
def _type_checking_names(module: Any) -> dict[str, Any]:
    """The names ``module`` imports under ``if TYPE_CHECKING:`` (for type checkers only), imported here.

    A hint may name them (torch, imported where a tensor is met; LoadedMatrix, to keep h5py out of an
    import): they exist for the checker, not at run time, so ``get_type_hints`` is given them.  An import
    that fails here is a stale one, and fails the test.
    """
    tree = ast.parse(inspect.getsource(module))
    names: dict[str, Any] = {"__name__": module.__name__, "__package__": module.__package__}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) \
                and not isinstance(node.test, ast.UnaryOp):
            imports = [s for s in node.body if isinstance(s, (ast.Import, ast.ImportFrom))]
            exec(compile(ast.Module(body=imports, type_ignores=[]), module.__file__, "exec"), names)
    return names


#: The matrix aliases and the modules whose TYPE_CHECKING names their strings need (``MatrixArray``'s
#: ``"torch.Tensor"``, ``MatrixInput``'s ``"LoadedMatrix"``): a string inside a ``Union`` alias is resolved
#: where the alias is used, not where it is defined, so a function whose hints name one is given those names.
ALIASES = {
    "MatrixArray": ("sfapprox._validation",),
    "MatrixLike": ("sfapprox._validation", "sfapprox.sources._base"),
    "MatrixInput": ("sfapprox._validation", "sfapprox.sources._base", "sfapprox.comparison"),
}


def _hinted(obj: Any) -> list[tuple[str, Any]]:
    """``obj`` itself (a function), or a class's ``__init__``, public methods and properties (its own and
    those it inherits from sfapprox's classes)."""
    if inspect.isfunction(obj):
        return [(obj.__name__, obj)]
    out = []
    for name in dir(obj):
        member = inspect.getattr_static(obj, name)
        if isinstance(member, property):
            member = member.fget
        elif isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member) and (name == "__init__" or not name.startswith("_")) \
                and member.__module__.startswith("sfapprox"):
            out.append((f"{obj.__name__}.{name}", member))
    return out


def _public_callables() -> list[tuple[str, Any]]:
    found = []
    for name in sfapprox.__all__:
        obj = getattr(sfapprox, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            found.extend(_hinted(obj))
    return found


def _hints(function: Any) -> dict[str, Any]:
    """``typing.get_type_hints(function)``, given the TYPE_CHECKING names its module and the aliases see."""
    text = " ".join(map(str, getattr(function, "__annotations__", {}).values()))
    homes = sorted({home for alias, modules in ALIASES.items() if alias in text or "ForwardRef(" in text
                    for home in modules})
    return typing.get_type_hints(function, localns=_localns((*homes, function.__module__)))


@functools.lru_cache(maxsize=None)
def _localns(module_names: tuple[str, ...]) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for name in module_names:
        names.update(_type_checking_names(importlib.import_module(name)))
    return names


def _unresolved(label_and_function: list[tuple[str, Any]]) -> list[str]:
    failures = []
    for label, function in label_and_function:
        try:
            _hints(function)
        except Exception as exc:  # NameError, AttributeError, TypeError: each a hint that does not resolve
            failures.append(f"{label} ({function.__module__}): {type(exc).__name__}: {exc}")
    return failures


def test_every_public_hint_resolves():
    functions = _public_callables()
    assert len(functions) > 100 and {"compare", "ChordSF.fit", "KernelMatrix.__init__"} <= {f for f, _ in functions}
    assert _unresolved(functions) == []


def _package_callables() -> list[tuple[str, Any]]:
    """Every function and class of every sfapprox module (triton's kernels where triton is installed)."""
    found = []
    for info in pkgutil.walk_packages(sfapprox.__path__, "sfapprox."):
        if info.name.endswith("__main__") or (info.name.endswith("_triton")
                                              and importlib.util.find_spec("triton") is None):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) == module.__name__ and (inspect.isfunction(obj) or inspect.isclass(obj)):
                found.extend(_hinted(obj))
    return found


def test_every_hint_in_the_package_resolves():
    """The private modules too: ``_device.resolve_dtype -> "torch.dtype"`` named torch, which its module never
    imported (a ``noqa: F821`` kept pyflakes quiet about it; mypy said 'Name "torch" is not defined')."""
    functions = _package_callables()
    assert len(functions) > 1000
    assert _unresolved(functions) == []


def test_a_hint_naming_what_its_module_does_not_import_is_found():
    namespace: dict[str, Any] = {"__name__": "sfapprox._validation"}  # a module whose TYPE_CHECKING has torch
    exec("def f(x: 'numpy.ndarray') -> int:\n    return 0", namespace)  # numpy: imported, but not as numpy
    failures = _unresolved([("f", namespace["f"])])
    assert len(failures) == 1 and "name 'numpy' is not defined" in failures[0]


def test_every_max_memory_takes_a_size_as_the_readme_says():
    """README: every ``max_memory=`` takes bytes or a size (``"4G"``); the estimators', load_factors' and
    estimate_errors' hints said ``int | None``, so a user's mypy refused ``max_memory="1G"``, which runs."""
    functions = [(label, f) for label, f in _public_callables() if "max_memory" in inspect.signature(f).parameters]
    assert len(functions) >= 15
    for label, function in functions:
        hint = _hints(function)["max_memory"]
        assert str in typing.get_args(hint), (label, hint)


def test_every_estimators_fit_is_hinted_to_return_the_estimator():
    """``fit`` returns ``self``: ChordLowRank's and ChordSparse's were hinted ``-> _ChordHybrid`` (their private
    base), so ``lr: ChordLowRank = ChordLowRank().fit(X)`` was an error for mypy."""
    estimators = [getattr(sfapprox, name) for name in sfapprox.__all__
                  if inspect.isclass(getattr(sfapprox, name)) and hasattr(getattr(sfapprox, name), "fit")]
    assert len(estimators) >= 10
    for cls in estimators:
        returned = _hints(cls.fit)["return"]
        assert returned is cls or returned is typing.Self, (cls.__name__, returned)


def test_the_lazy_names_are_imported_for_type_checkers():
    """``sfapprox.compare`` comes from a module ``__getattr__`` typed ``-> Any``: without imports under
    TYPE_CHECKING, mypy and pyright saw every lazy name as Any (no hint of the API checked a user's call)."""
    tree = ast.parse((ROOT / "sfapprox" / "__init__.py").read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    for alias in statement.names:
                        # ``name as name``: re-exported (a checker does not read the computed __all__)
                        assert alias.asname == alias.name, ast.unparse(statement)
                        parent = "sfapprox" + (f".{statement.module}" if statement.module else "")
                        seen[alias.name] = parent if statement.module else f"{parent}.{alias.name}"
    assert set(seen) == set(sfapprox._LAZY)
    # each from the module __getattr__ takes it from (a submodule: that module itself)
    assert {name: module for name, module in seen.items()} == sfapprox._LAZY


def test_fitted_attributes_that_may_be_none_are_declared_so():
    """ChordSF's fit sets ``fro_error_``/``rel_error_`` (and ``threads_``) to None on one branch first: a type
    checker took None as their type, so ``sf.rel_error_ < 1e-3`` (the class docstring's example) was an error."""
    hints = typing.get_type_hints(sfapprox.ChordSF)
    assert hints["rel_error_"] == hints["fro_error_"] == float | None and hints["threads_"] == int | None
    # the contract's attributes (sfapprox._base), for every estimator; annotations only: nothing before fit
    assert {"operator_", "n_stored_", "params_", "seconds_", "stop_reason_"} <= set(hints)
    assert "rel_error_" not in vars(sfapprox.ChordSF) and "operator_" not in dir(sfapprox.ChordSF)


def test_an_estimator_reaches_getattr_for_its_fitted_attributes_only_at_run_time():
    """``Approximation.__getattr__`` is hidden from type checkers (it made any misspelt attribute pass);
    at run time it still says that an estimator is not fitted."""
    with pytest.raises(sfapprox.NotFittedError, match="not fitted yet .no operator_"):
        sfapprox.TruncatedSVD(n_components=2).operator_


def _mypy(script: Path, cache: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """mypy on a user's ``script``, sfapprox read from this checkout (silent: errors in sfapprox's own
    modules are not the user's, the package is not mypy-clean)."""
    command = [sys.executable, "-m", "mypy", *options, "--follow-imports=silent", "--ignore-missing-imports",
               "--no-error-summary", "--cache-dir", str(cache), str(script)]
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=cache.parent, env=env)


def test_a_users_script_type_checks_and_its_mistakes_are_reported(tmp_path):
    """mypy on tests/typing_user.py: no error, with ``--warn-unused-ignores`` (so each line marked as a
    mistake must be one mypy reports, of the code it names).  Before py.typed and the lazy names'
    imports, sfapprox was Any to mypy: every mistake went through."""
    pytest.importorskip("mypy")
    text = USER_SCRIPT.read_text(encoding="utf-8")
    assert text.count("# type: ignore[") >= 8  # the mistakes are there to be found
    done = _mypy(USER_SCRIPT, tmp_path / "cache", "--warn-unused-ignores")
    assert (done.returncode, done.stdout) == (0, ""), done.stdout + done.stderr


def test_a_strict_users_script_type_checks(tmp_path):
    """mypy --strict on tests/typing_user_strict.py, the API used as README.md writes it (load, compare and
    its rows' fields, fit, save and load, apply, export, sources, sweeps), every line of it annotated.

    Each error there is a false one of sfapprox's hints.  It had: ``sfapprox.ParameterError`` "not explicitly
    exported" (the errors were imported without ``as``, and __all__ is computed), ``to_frame()``,
    ``op.matvec(x)`` and ``saved.aslinearoperator()`` "untyped" calls, and Any returned where ``op.T`` and
    ``saved.T`` (scipy's, unhinted) reached a typed return.
    """
    pytest.importorskip("mypy")
    done = _mypy(STRICT_USER_SCRIPT, tmp_path / "cache", "--strict", "--warn-unused-ignores")
    assert (done.returncode, done.stdout) == (0, ""), done.stdout + done.stderr
