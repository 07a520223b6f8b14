"""Helpers shared by the tests of sfapprox.io (tests/test_io*.py); not a test module."""

from __future__ import annotations

import pytest

from sfapprox._errors import InputError
from sfapprox.io import load_matrix


def input_error(path, match, **kwargs) -> str:
    """Load ``path`` expecting an InputError; check it is one line starting with the path."""
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(str(path)), msg
    return msg


def write(path, text: str):
    path.write_text(text)
    return path


MTX_GENERAL = "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.5\n2 3 -2\n3 1 4\n"


def count_opens(monkeypatch, path) -> list:
    """Record every opening of ``path`` (by ``open``, ``io.open`` or ``os.open``: pathlib, zipfile and the
    codecs open files by one or the other) in the list returned, until ``monkeypatch.undo()``."""
    import builtins
    import io
    import os

    opened = []
    target = os.fspath(path)
    for module, name in ((builtins, "open"), (io, "open"), (os, "open")):
        real = getattr(module, name)

        def counting(file, *args, _real=real, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.fspath(file) == target:
                opened.append(file)
            return _real(file, *args, **kwargs)

        monkeypatch.setattr(module, name, counting)
    return opened
