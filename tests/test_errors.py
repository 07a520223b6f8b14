"""The error family's helpers (sfapprox/_errors.py): an option named in a message as its reader types it."""

from __future__ import annotations

import shlex
import sys

import pytest

from sfapprox._errors import parameter, parameters, spelled_for


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
