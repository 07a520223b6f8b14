"""The Examples in the docstrings run, so the documentation cannot drift from the code."""

import doctest
import importlib
import inspect
import pkgutil
import typing

import pytest

import sfapprox

MODULES = sorted(m.name for m in pkgutil.walk_packages(sfapprox.__path__, "sfapprox."))
#: Modules of optional packages (not installed by the project): their examples run where the package is.
OPTIONAL = {"sfapprox.sf._kernels_triton": "triton"}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name])
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name, module=module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


# ------------------------------------------------------------------ the public API's docstrings
#: The modules whose ``__all__`` is the API a notebook user meets (README's Python API).
PUBLIC = ["sfapprox", "sfapprox.sources", "sfapprox.operators", "sfapprox.hybrid", "sfapprox.sweep", "sfapprox.describe",
          "sfapprox.io", "sfapprox.datasets"]


def _sections(doc):
    """The numpydoc section titles of ``doc`` (a title line over a line of dashes)."""
    lines = [line.strip() for line in inspect.cleandoc(doc).splitlines()]
    return {a for a, b in zip(lines, lines[1:]) if a and b and set(b) == {"-"}}


def _public_callables():
    """(dotted name, object, kind) for each function and class of PUBLIC's ``__all__`` and each public method
    a class has from sfapprox (inherited ones too: ``help()`` shows them)."""
    seen = set()
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not callable(obj) or id(obj) in seen:
                continue
            if typing.get_origin(obj) is not None:  # a type alias (sources.MatrixLike): callable to Python, no function
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            seen.add(id(obj))
            yield f"{module_name}.{name}", obj, "class" if inspect.isclass(obj) else "function"
            if inspect.isclass(obj):
                for attr in sorted(dir(obj)):
                    member = inspect.getattr_static(obj, attr)
                    owner = next(k for k in obj.__mro__ if attr in vars(k))
                    if attr.startswith("_") or not owner.__module__.startswith("sfapprox"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)) or inspect.isfunction(member):
                        yield f"{module_name}.{name}.{attr}", getattr(obj, attr), "method"


def test_every_public_callable_has_a_numpydoc_docstring():
    """Each public function, class and method says what it takes (Parameters) and gives (Returns); the top-level
    functions and classes also show an example (the estimators' get_params/set_params/to_dense, FitSettings'
    replace/to_dict, the operators' to_dense/to_arrays/from_arrays and the sources' columns/diagonal/summary had
    one line each)."""
    missing = []
    for name, obj, kind in _public_callables():
        doc = inspect.getdoc(obj)
        if not doc:
            missing.append(f"{name}: no docstring")
            continue
        sections = _sections(doc)
        signature = inspect.signature(obj)
        takes = [p for p in signature.parameters.values() if p.name not in ("self", "cls")]
        if takes and not sections & ({"Parameters", "Attributes"} if kind == "class" else {"Parameters"}):
            missing.append(f"{name}: Parameters")
        if kind != "class" and signature.return_annotation not in (None, "None") and not sections & {"Returns", "Yields"}:
            missing.append(f"{name}: Returns")
        if kind != "method" and name.count(".") == 1 and "Examples" not in sections:
            missing.append(f"{name}: Examples")
    assert missing == []
