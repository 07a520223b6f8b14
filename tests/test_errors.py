"""The error family's helpers (sfapprox/_errors.py): an option named in a message as its reader types it."""

from __future__ import annotations

import shlex
import sys

import pytest

from sfapprox._errors import parameter, parameters, spelled_for, user_stacklevel


@pytest.mark.parametrize("name, value, typed", [
    ("delimiter", ";", "--delimiter ';'"),
    ("delimiter", "\t", "--delimiter $'\\x09'"),
    ("var", "my var", "--var 'my var'"),
    ("var", "it's", "--var 'it'\"'\"'s'"),
])
def test_a_value_a_shell_would_not_read_back_is_quoted_on_the_command_line(name, value, typed):
    """``--delimiter ;`` pasted into a shell ended the command at the ';' (and ``--var my var`` gave two words):
    the value is quoted as the shell reads it back; to Python it is written as before."""
    with spelled_for("cli"):
        said = parameter(name, value)
    assert said == typed
    assert shlex.split(said.replace("$'\\x09'", "'\t'")) == [said.split()[0], value]
    assert parameter(name, value) == f"{name}={value!r}"


@pytest.mark.parametrize("name, value, typed", [
    ("delimiter", ",", "--delimiter ,"), ("decimal", ".", "--decimal ."), ("var", "Problem.A", "--var Problem.A"),
    ("scheduler", "tcp://h:1", "--scheduler tcp://h:1"), ("network", 2, "--network 2"),
    ("covariance", True, "--covariance"), ("two_mode", None, "--two-mode"),
])
def test_a_value_that_needs_no_quoting_is_written_as_typed(name, value, typed):
    with spelled_for("cli"):
        assert parameter(name, value) == typed


def test_patterns_and_typed_values():
    with spelled_for("cli"):
        # a pattern is written as it is: no word to type
        assert parameter("network", shown="1..2") == "--network 1..2"
        assert parameter("var", shown="'Problem.<field>'") == "--var Problem.<field>"
        assert parameter("methods", ("sf", "tsvd"), typed="sf,tsvd") == "--methods sf,tsvd"
        assert parameter("methods", ("sf", "my m"), typed="sf,my m") == "--methods 'sf,my m'"
        assert parameters(delimiter=";", decimal=",") == "--delimiter ';' --decimal ,"


def test_on_windows_a_value_is_quoted_for_cmd_and_powershell(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    with spelled_for("cli"):
        assert parameter("delimiter", ";") == '--delimiter ";"' and parameter("var", "A") == "--var A"


def test_user_stacklevel_names_the_first_frame_outside_sfapprox():
    import warnings

    from sfapprox import _errors

    def deep(depth):  # sfapprox's frames, as a fit's: the level must skip every one of them
        if depth:
            return deep(depth - 1)
        warnings.warn("said", UserWarning, stacklevel=user_stacklevel())

    # compile the helper as if it were sfapprox's own code (a file under the package folder)
    code = compile("def run(deep, n):\n    deep(n)\n", _errors._PACKAGE + "fake_module.py", "exec")
    inside: dict = {}
    exec(code, inside)
    for n in (0, 3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            deep.__code__ = deep.__code__.replace(co_filename=_errors._PACKAGE + "fake_deep.py")
            line = sys._getframe().f_lineno + 1
            inside["run"](deep, n)
        assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


def test_user_stacklevel_skips_the_folders_also_named(tmp_path):
    """A warning raised from sfapprox code that numba calls back while it compiles (a failed cache
    write) named numba's ``dispatcher.py`` line: the frames of the folders named are skipped too."""
    import warnings

    from sfapprox import _errors

    def warn(*also):
        warnings.warn("said", UserWarning, stacklevel=user_stacklevel(*also))

    warn.__code__ = warn.__code__.replace(co_filename=_errors._PACKAGE + "fake_warn.py")  # sfapprox's, as it were
    # a library's frame (numba's, when it compiles) between the user and sfapprox's warning
    code = compile("def run(warn, *also):\n    warn(*also)\n", str(tmp_path / "library" / "dispatcher.py"), "exec")
    outside: dict = {}
    exec(code, outside)
    for also, named in (((), str(tmp_path / "library" / "dispatcher.py")), ((str(tmp_path / "library"),), __file__)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outside["run"](warn, *also)
        assert [w.filename for w in caught] == [named]
