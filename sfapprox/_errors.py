"""One family of errors for the whole project.

Every error that a user can cause (a bad file, a bad option, a budget that is
too small) is raised as a subclass of :class:`SfapproxError`.  The CLI turns
these into a one-line message and exit code 2; anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import os
import sys

__all__ = [
    "SfapproxError",
    "InputError",
    "ParameterError",
    "BudgetError",
    "ResourceError",
    "DeviceError",
    "NotApplicableError",
    "NotFittedError",
    "ConvergenceWarning",
    "one_line",
    "user_stacklevel",
]


class SfapproxError(Exception):
    """Base class of every error sfapprox raises on purpose."""


class InputError(SfapproxError, ValueError):
    """A matrix file or array cannot be used (unreadable, malformed, not square, ...)."""


class ParameterError(SfapproxError, ValueError):
    """An option or parameter has an invalid value."""


class BudgetError(SfapproxError, ValueError):
    """A budget of stored numbers is too small (or invalid) for a method."""


class ResourceError(SfapproxError, MemoryError):
    """The work would need more memory than allowed; raised before allocating."""


class DeviceError(SfapproxError, RuntimeError):
    """A requested compute device is not available."""


class NotApplicableError(SfapproxError, ValueError):
    """A method does not apply to this matrix (e.g. NMF on a matrix with negative entries).

    ``compare`` records such a method with status "not applicable" and the
    message as its reason; the run itself succeeds.
    """


class NotFittedError(SfapproxError, ValueError, AttributeError):
    """An estimator's fitted result was asked for before ``fit`` (an AttributeError too, as
    scikit-learn's: ``hasattr(estimator, "operator_")`` is False before the fit)."""


class ConvergenceWarning(UserWarning):
    """A fit stopped on its iteration or time limit before its tolerances were met."""


#: The package's folder: frames whose file is under it are sfapprox's own (see :func:`user_stacklevel`).
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel(*also: str) -> int:
    """The ``stacklevel`` for :func:`warnings.warn` that names the first caller outside sfapprox.

    A warning issued deep in a fit with a fixed ``stacklevel`` named a line of
    sfapprox (``sf/model.py:582: ConvergenceWarning ...`` under a notebook cell
    that called ``ChordSF(...).fit(X)``, ``fit_sf`` one more level away), where
    the README promises the user's own line.  The depth between the user and
    the warning differs by entry point (``fit``, ``fit_sf``, a hybrid's inner
    fit), so it is counted, not guessed (Python 3.12's ``skip_file_prefixes``
    does the same; 3.11 is supported).  Called in the ``warnings.warn(...)``
    call itself: level 1 is that call's frame.  Where every frame is
    sfapprox's, the outermost one is named.  The folders ``also`` are skipped too (numba's, for a warning
    raised from sfapprox code that numba calls back while it compiles).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("x", UserWarning, stacklevel=user_stacklevel())
    >>> w[0].filename.startswith(_PACKAGE)
    False
    """
    frame = sys._getframe(1)  # the frame that calls warnings.warn: stacklevel 1
    level = 1
    skipped = (_PACKAGE, *(os.path.join(os.path.abspath(folder), "") for folder in also))
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(skipped):
        frame = frame.f_back
        level += 1
    return level


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message, prefixed by its type when it is not one of ours
    (a foreign message alone, e.g. "4", would not say what happened)."""
    text = " ".join(str(exc).split())
    return text if isinstance(exc, SfapproxError) else f"{type(exc).__name__}: {text}"


#: Who reads the messages of this process: "api" (a Python caller, who passes ``var="A"``) or "cli" (a
#: command-line user, who types ``--var A``); the CLI sets it for its commands (:func:`spelled_for`).
_READER = {"now": "api"}

#: The keywords whose command-line option is not their own name with ``-`` for ``_`` (the rest are).
_OPTIONS = {"n_factors": "--factors", "max_iter": "--iters"}


def parameter(name: str, value: object = None, *, shown: str | None = None, typed: str | None = None) -> str:
    """A reading option named in a message, as its reader passes it: ``var='A'`` to a Python caller,
    ``--var A`` on the command line (one message for both: a CLI user told "pick one with var=" had
    no such thing to type, and a Python caller told "(--bandwidth)" none either).

    Parameters
    ----------
    name : str
        The keyword (``var``, ``two_mode``); its option is ``--`` and the keyword with ``-`` for ``_``.
    value : object, optional
        Its value, shown as Python writes it (``var='A'``) or as typed (``--var A``, quoted for the shell
        where it needs it: ``--delimiter ';'``, ``--var 'my var'``); ``True`` is the flag alone on the
        command line (``--covariance``); None: the name alone (``var=``, ``--var``).
    shown : str, optional
        A value written the same to both, instead of ``value``: a pattern such as ``1..3`` or
        ``Problem.<field>`` (quoted for Python where it stands for a string, as ``'Problem.<field>'``).
    typed : str, optional
        ``value`` as typed on the command line, where that is not its ``str``: a tuple of methods
        ``('sf', 'tsvd')`` is ``--methods sf,tsvd`` (to Python, ``value`` as written).

    Returns
    -------
    str
        The option as this process's reader writes it.

    Examples
    --------
    >>> parameter("var", "Problem.A"), parameter("network", shown="1..2"), parameter("covariance", True)
    ("var='Problem.A'", 'network=1..2', 'covariance=True')
    >>> with spelled_for("cli"):
    ...     parameter("var", "Problem.A"), parameter("two_mode"), parameter("covariance", True)
    ('--var Problem.A', '--two-mode', '--covariance')
    >>> with spelled_for("cli"):
    ...     parameter("delimiter", ";"), parameter("var", "my var"), parameter("network", shown="1..2")
    ("--delimiter ';'", "--var 'my var'", '--network 1..2')
    >>> methods = ("sf", "tsvd")
    >>> parameter("methods", methods, typed=",".join(methods))
    "methods=('sf', 'tsvd')"
    >>> with spelled_for("cli"):
    ...     parameter("methods", methods, typed=",".join(methods))
    '--methods sf,tsvd'
    """
    if _READER["now"] == "api":
        return f"{name}={shown if shown is not None else '' if value is None else repr(value)}"
    from ._shell import shell_quote  # here: `import sfapprox` loads this module alone (test_layout)

    flag = _OPTIONS.get(name, "--" + name.replace("_", "-"))
    if shown is not None:  # a pattern, not a word to type: as written, without Python's quotes
        return f"{flag} {shown.strip(chr(39))}"
    text = typed if typed is not None else None if value is None or value is True else str(value)
    # quoted where a shell would not read it back (--delimiter ';': pasted, a bare ';' ended the command)
    return flag if text is None else f"{flag} {shell_quote(text)}"


def parameters(**values: object) -> str:
    """Several options with their values, as their reader passes them (:func:`parameter`): a command
    line's ``--support chord --base 2`` (options part with spaces), a call's ``support='chord', base=2``.

    Parameters
    ----------
    **values : object
        Each keyword and its value, in the order written.

    Returns
    -------
    str
        The options as this process's reader writes them together.

    Examples
    --------
    >>> parameters(support="chord", n_factors=6)
    "support='chord', n_factors=6"
    >>> with spelled_for("cli"):
    ...     parameters(support="chord", n_factors=6)
    '--support chord --factors 6'
    """
    return (", " if _READER["now"] == "api" else " ").join(parameter(k, v) for k, v in values.items())


def reader() -> str:
    """Who reads this process's messages now: ``"api"`` or ``"cli"`` (:func:`spelled_for`), for a hint
    that is more than one option: a command to type (``sfapprox compare FILE --var NAME``) or a call
    (``sfapprox.load_matrix(FILE, var='NAME')``).

    Examples
    --------
    >>> reader()
    'api'
    >>> with spelled_for("cli"):
    ...     reader()
    'cli'
    """
    return _READER["now"]


def spelled_for(reader: str):
    """A context in which :func:`parameter` writes options for ``reader`` ("cli" or "api"), as before after it.

    The CLI's commands whose options are typed (``fit``, ``compare``, ``info``, ``sweep``, ``batch``) run in
    one; a batch entry's reading options are a manifest's keys (``var = "A"``), the keywords' own names, and
    the entry is read and fitted in an "api" one.  A setting of the
    process, not of a thread: a message raised in a worker thread of the command is read by the same user.
    """
    import contextlib

    if reader not in ("api", "cli"):
        raise ValueError(f"reader must be 'api' or 'cli', got {reader!r}")

    @contextlib.contextmanager
    def spelled():
        before, _READER["now"] = _READER["now"], reader
        try:
            yield
        finally:
            _READER["now"] = before

    return spelled()
