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


class _Counting:
    """A file whose reads add the bytes they give to ``counts`` (everything else is the file's)."""

    def __init__(self, file, counts: list) -> None:
        self._file, self._counts = file, counts

    def read(self, *args):
        data = self._file.read(*args)
        self._counts.append(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def count_opens(monkeypatch, path, read: list | None = None) -> list:
    """Record every opening of ``path`` (by ``open``, ``io.open`` or ``os.open``: pathlib, zipfile and the
    codecs open files by one or the other) in the list returned, until ``monkeypatch.undo()``; with
    ``read``, a binary file opened by ``open`` adds the bytes each read gives to it."""
    import builtins
    import io
    import os

    opened = []
    target = os.fspath(path)
    for module, name in ((builtins, "open"), (io, "open"), (os, "open")):
        real = getattr(module, name)

        def counting(file, *args, _real=real, _name=name, **kwargs):
            if not (isinstance(file, (str, os.PathLike)) and os.fspath(file) == target):
                return _real(file, *args, **kwargs)
            opened.append(file)
            handle = _real(file, *args, **kwargs)
            binary = _name == "open" and "b" in (args[0] if args else kwargs.get("mode", "r"))
            return _Counting(handle, read) if read is not None and binary else handle

        monkeypatch.setattr(module, name, counting)
    return opened


def peak_and_checks(monkeypatch, read, *args) -> tuple[int, int, int]:
    """``read(*args)`` (a reader on a :class:`~sfapprox.io._common.Source`) under tracemalloc: its peak, the
    estimate ``Source.read_text`` checked (the largest, for a reader of two files) and the largest of all
    the memory checks it made (each refuses alone: what a limit holds the read to)."""
    import tracemalloc

    import sys

    import sfapprox._validation as validation

    checks: list[tuple[str, int]] = []
    real = validation.check_memory

    def check_memory(n_bytes, *, what, held=0, **kwargs):
        checks.append((what, n_bytes + held))
        return real(n_bytes, what=what, held=held, **kwargs)

    # every module that checks (the .npy reader's, the covariance's, the text readers'...), not a list of them
    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", None) or "").startswith("sfapprox") and \
                getattr(module, "check_memory", None) is real:
            monkeypatch.setattr(module, "check_memory", check_memory)
    tracemalloc.start()
    try:
        read(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # (read_bytes' own check, of the file's size, is no estimate of the parse)
    estimate = max((n for what, n in checks if " lines of text " in what), default=0)
    return peak, estimate, max(n for what, n in checks if not what.endswith("reading the file"))
