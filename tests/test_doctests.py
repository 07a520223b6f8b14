"""The Examples in the docstrings run, so the documentation cannot drift from the code."""

import doctest
import importlib
import pkgutil

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
