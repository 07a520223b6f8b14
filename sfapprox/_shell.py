"""Quoting a word for the shell a suggested command is typed into, and escaping what a terminal acts on.

The lowest layer of what messages show (standard library only): :func:`~sfapprox._errors.parameter` quotes an
option's value with it (``--delimiter ';'``), and :mod:`sfapprox.formats`, which re-exports
:func:`printable` and :func:`shell_quote`, writes tables and commands with it.
"""

from __future__ import annotations

import os
import re
import shlex
import sys

__all__ = ["printable", "shell_quote"]


def _raw_bytes(text: str) -> bytes:
    """The bytes ``text`` was read from, as a file's name (``os.fsencode``: a lone surrogate is the byte it
    stands for); a surrogate that stands for no byte as UTF-8 would write it."""
    try:
        return os.fsencode(text)
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


#: Characters a file may spell that a terminal would act on rather than show: C0 controls but the line break
#: (ESC starts a colour, a title, a cursor move; BEL rings), DEL, C1 controls (0x9b is a one-byte CSI) and
#: the bidirectional overrides that reorder what is shown.  Each is written as its escape instead.
_ESCAPED = {**{c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7f, 0xa0)] if c != 0x0a},
            **{c: f"\\u{c:04x}" for c in [*range(0x202a, 0x202f), *range(0x2066, 0x206a)]},
            # a byte of a file's name that is no UTF-8 (Linux allows any): Python reads it as a lone surrogate
            # (surrogateescape), which a UTF-8 file cannot hold (--markdown ended in a UnicodeEncodeError) and a
            # terminal shows as "?"; written as the byte's escape, the name is recognised and stays valid text
            **{c: f"\\x{c - 0xdc00:02x}" for c in range(0xdc80, 0xdd00)}}
#: :data:`_ESCAPED` as a shell's ``$'...'`` reads it back (:func:`shell_quote`): there ``\xNN`` is the byte NN,
#: right for a C0 control, DEL and a byte that is no UTF-8, while a C1 control is the character U+0080-U+009F,
#: two bytes in UTF-8, so ``\u00NN``.
_SHELL_ESCAPED = {**_ESCAPED, **{c: f"\\u{c:04x}" for c in range(0x80, 0xa0)}}


def printable(text: str) -> str:
    r"""``text`` with what a terminal would act on written as escapes (``a\x1b[31m``): names read from a
    file (a tensor's, a variable's, a file's own) reach tables, notes and error lines, and an ESC in one
    recoloured or cleared the user's terminal.

    Examples
    --------
    >>> printable("w\x1b[2J.weight"), printable("plain text"), printable(os.fsdecode(b"bad\xff.mtx"))
    ('w\\x1b[2J.weight', 'plain text', 'bad\\xff.mtx')
    """
    return text.translate(_ESCAPED)


def shell_quote(word: str, *, ascii: bool = False) -> str:
    r"""``word`` quoted for a POSIX shell (bash, zsh, ksh) to read back as the same bytes, for a command
    sfapprox suggests: :func:`shlex.quote`, or ``$'...'`` with escapes where ``word`` holds what
    :func:`printable` escapes (a control character, a byte of a file's name that is no UTF-8), which no
    plain quoting shows as itself: ``shlex.quote`` wrote such a name as ``'bad\udcff.mtx'``, a file that
    does not exist.

    With ``ascii`` (for a stream that writes ASCII only) a word that is not ASCII is written as its bytes in
    ``$'...'`` (``$'matrice_\xc3\xa9.mtx'``): it showed as ``'matrice_e.mtx'``, another file.  Bytes, not
    ``\u00e9``: a shell in the C locale (the usual reason for such a stream) keeps ``$'\u00e9'`` as it is.

    On Windows the word is written for cmd.exe and PowerShell instead (:func:`_windows_quote`): neither
    reads ``'...'`` quoting as POSIX shells do (cmd passes the quotes on) nor ``$'...'`` at all.

    Examples
    --------
    >>> shell_quote("a b.mtx"), shell_quote(os.fsdecode(b"bad\xff.mtx")), shell_quote("a\x1bb'c")
    ("'a b.mtx'", "$'bad\\xff.mtx'", "$'a\\x1bb\\'c'")
    >>> shell_quote("matrice_é.mtx"), shell_quote("matrice_é.mtx", ascii=True)
    ("'matrice_é.mtx'", "$'matrice_\\xc3\\xa9.mtx'")
    """
    if sys.platform == "win32":
        return _windows_quote(word)
    if ascii and not word.isascii():
        return "$'" + "".join(_SHELL_BYTES[byte] for byte in _raw_bytes(word)) + "'"
    if printable(word) == word:
        return shlex.quote(word)
    return "$'" + word.replace("\\", "\\\\").replace("'", "\\'").translate(_SHELL_ESCAPED) + "'"


#: What cmd.exe and PowerShell both take unquoted (a Windows path's separators and drive colon included).
# (no "," or a leading "@": PowerShell reads a,b as an array and @x as splatting; no "%": see _windows_percent)
_WINDOWS_PLAIN = re.compile(r"[\w+=:./\\-]+", re.ASCII)


def _windows_quote(word: str) -> str:
    r"""``word`` for cmd.exe and PowerShell: as it is where both take it so, else in double quotes (the
    quoting both read; a ``"`` in it is written ``""``: :func:`_double_quoted`).  A word with a ``%`` is
    written by :func:`_windows_percent`: cmd expands ``%NAME%`` even inside double quotes.  PowerShell's
    ``$`` is kept from naming a variable by :func:`_both_quoted`; such a word starts unquoted
    (:func:`_bare_then_quoted`: ``\\srv\share\cost"$"d"ata.mtx"``).  A word
    opening with ``-`` and holding a ``.`` is quoted: PowerShell reads ``-x.mtx`` as a parameter token,
    which its name ends at the ``.`` (its specification, 2.3.4: no *parameter-char* is a ``.``), and
    passes ``-x`` and ``.mtx`` to a native program as two arguments (PowerShell issue #6291, open for 5.1
    and 7.x).  A ``-`` word without a ``.`` reaches a native program as it is, ``-a:b`` too (a parameter
    with its argument, joined again).

    What stays ambiguous, written for the shell where the character is special: a backtick or a
    typographic double quote, a ``$`` that starts the word before a name (``$RECYCLE.BIN``) or comes
    before ``(``, ``{`` or ``^``, or a run of two or more ``$`` before a character that cannot stand
    bare (``run$$.mtx``: PowerShell reads ``$$`` as a variable, and only a letter, a digit, ``_``, ``?``
    or ``:`` stands bare after the quote closed: :func:`_stands_bare`; all PowerShell's, escaped with a
    backtick, which cmd passes on), a ``$`` before a name or a ``%`` in a word whose first character,
    after any backslashes, needs quotes (``é$x.mtx``, ``\$1 x.mtx``: no start stands bare, see
    :func:`_bare_then_quoted`; a ``$`` is PowerShell's, a ``%`` cmd's: see :func:`_windows_percent`),
    and backslashes before a ``"`` or at the end (the C runtime's: see :func:`_double_quoted`).  Which
    shell the user types into cannot be told reliably from here: ``PSModulePath`` is set machine-wide,
    in cmd too, and what PowerShell adds to it is inherited by a cmd started from it; the process's
    parent is the ``sfapprox.exe`` launcher or ``python.exe``, and the shell above it may be a terminal,
    an IDE or ``conda run``.  A cmd started with delayed expansion (``cmd /V:ON``, or the ``DelayedExpansion``
    registry value) also expands ``!NAME!``, inside quotes too, and drops a lone ``!``: left as it is,
    since that is off by default (``cmd /?``), and the escape it takes (``^``) would stay in the word
    for PowerShell and, inside quotes, for a cmd without it.

    Examples
    --------
    >>> print(_windows_quote(r"C:\data\a.mtx"), _windows_quote(r"C:\my data\a b.mtx"), _windows_quote(""))
    C:\data\a.mtx "C:\my data\a b.mtx" ""
    >>> print(_windows_quote("cost$data.mtx"), _windows_quote("a $1 b.mtx"), _windows_quote("$RECYCLE.BIN"))
    cost"$"d"ata.mtx" a" $"1" b.mtx" "`$RECYCLE.BIN"
    """
    if "%" in word:
        return _windows_percent(word)
    if word and _stands_plain(word):
        return word
    quoted = _both_quoted(word)
    if quoted == _both_quoted(word, bare=False):  # one quoted string: one word to both shells
        return quoted
    return _bare_then_quoted(word)


def _bare_then_quoted(word: str) -> str:
    r"""``word`` as one word to PowerShell, which reads ``"a"b`` as two: its longest :data:`_WINDOWS_PLAIN`
    start bare, the rest by :func:`_both_quoted`, or all of it quoted where no such start stands bare.

    The bare start leaves its trailing backslashes to the quoted rest: the C runtime reads ``\"`` as an
    escaped quote, so ``\data\run`` bare then ``"$"1`` kept the quoting open over what followed
    (``--out o.json`` joined the name).  A ``-`` word keeps only its ``-`` bare: PowerShell would read a
    longer bare start as a parameter token, split at a ``.`` (:func:`_stands_plain`).
    """
    plain = _WINDOWS_PLAIN.match(word)
    head = "-" if word.startswith("-") else plain.group().rstrip("\\") if plain else ""
    if not head:
        return _both_quoted(word, bare=False)
    return head + _both_quoted(word[len(head):])


def _stands_plain(word: str) -> bool:
    """Whether cmd, PowerShell and the C runtime all read ``word`` unquoted as it is: :data:`_WINDOWS_PLAIN`,
    but a ``-`` word with a ``.``, which PowerShell splits at the ``.`` (see :func:`_windows_quote`; any
    such word: a wider set than the specification's parameters only quotes more)."""
    return bool(_WINDOWS_PLAIN.fullmatch(word)) and not (word.startswith("-") and "." in word)


#: PowerShell's double quotes: the typographic ones open and close its strings as '"' does (its language
#: specification, section 2.3.5.2, double-quote-character).
_PS_DOUBLE_QUOTES = '"\u201c\u201d\u201e'


def _starts_variable(char: str) -> bool:
    """Whether PowerShell reads ``$`` then ``char`` inside double quotes as a variable or a sub-expression
    (its specification, 2.3.2: ``$$``, ``$?``, ``$^``, a name of letters and digits, classes Lu Ll Lt Lm Lo
    Nd, ``_`` and ``?``; ``${...}``; ``$(...)``).  ``isalnum`` holds those classes and a few more, and
    ``:`` is counted too: a wider set only quotes more."""
    return char.isalnum() or char in "_?$^({:"


def _stands_bare(char: str) -> bool:
    """Whether ``char`` means itself unquoted to cmd, PowerShell and the C runtime alike (a letter,
    a digit, ``_``, ``?``, ``:``): none of cmd's ``^&|<>()``, PowerShell's ``$`{}();,|&`` and quotes."""
    return char.isalnum() or char in "_?:"


#: A run of ``$`` (:func:`_both_quoted` measures one at each character).
_DOLLARS = re.compile(r"\$*")


def _both_quoted(text: str, *, bare: bool = True) -> str:
    """``text`` in double quotes as the C runtime and PowerShell both read it back, where they can.

    Inside double quotes PowerShell reads ``$name`` (``$1``, ``$_``, ``$$``...) as a variable and
    ``$(``/``${`` as code, but a ``$`` run right before the closing quote as itself (its specification's
    ``dollars``, 2.3.5.2): so the quoted string ends after such a run, the character that follows stands
    bare (with ``bare``, where it can: :func:`_stands_bare`), and the quote opens again
    (``"cost$"d"ata.mtx"``; both shells join the pieces into one word where the word starts bare: the
    caller's part).  Otherwise, and for a backtick or a typographic double quote, PowerShell's escape,
    a backtick, is written (cmd passes it on: no common spelling).
    """
    pieces, quoted, i = [], "", 0
    while i < len(text):
        char = text[i]
        run = _DOLLARS.match(text, i).end() - i  # (a match at i: slicing text[i:] each time was quadratic)
        after = text[i + run:i + run + 1]
        if not run:
            quoted += "`" + char if char in "`" + _PS_DOUBLE_QUOTES[1:] else char
        elif not after or (run == 1 and not _starts_variable(after)):
            quoted += "$" * run  # PowerShell's literal $: before the closing quote, or before no name
        elif bare and _stands_bare(after):
            pieces += [_double_quoted(quoted + "$" * run), after]
            quoted, run = "", run + 1
        else:
            quoted += "`$" * run
        i += max(run, 1)
    return "".join(pieces) + (_double_quoted(quoted) if quoted or not pieces else "")


def _double_quoted(text: str) -> str:
    r"""``text`` in double quotes as the C runtime reads them back (the argument parsing of every program).

    A ``"`` in ``text`` is written ``""``, which the C runtime (the UCRT Python uses) reads inside quotes
    as one ``"``, PowerShell inside its double-quoted string as one ``"`` (its specification, 2.3.5.2),
    and cmd as a quote closed and opened again, so that what follows stays quoted to it (``\"`` left it
    unquoted there, and read to PowerShell as a backslash and the string's end: ``"say \"hi\""`` was
    the words ``say \`` and ``hi\``).  PowerShell 7.3 and later (``$PSNativeCommandArgumentPassing``
    ``Windows``, its default there, or ``Standard``) passes the ``"`` on escaped, so the program reads
    the word; Windows PowerShell 5.1 and PowerShell 6 to 7.2 (and ``Legacy``) pass it on bare and the
    program drops it: no spelling reads the same there and in cmd (those take ``\"`` inside a
    PowerShell string, which 7.3 passes on as a backslash and a quote).

    Backslashes before a ``"`` (an embedded one, or the closing quote after a folder's ``C:\my runs\``)
    are doubled, as the C runtime needs; PowerShell keeps them doubled.  Windows PowerShell 5.1 passes
    ``C:\my runs\\`` on in quotes as it is, which the program reads as the folder; PowerShell 6 and
    later double them again, and the program reads ``C:\my runs\\``, the same folder to Windows.
    Written after the closing quote instead (``C":\my runs"\``), 7.x would pass the folder exactly,
    but 5.1 would pass ``"C:\my runs\"`` and the program read ``C:\my runs"`` with the rest of the line
    (PowerShell issues #4965, #26432).
    """
    quoted = re.sub(r'(\\*)"', lambda m: m.group(1) * 2 + '""', text)
    return '"' + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, quoted) + '"'


def _windows_percent(word: str) -> str:
    r"""A word with ``%`` written so that cmd.exe expands no ``%NAME%`` in it and PowerShell reads one word.

    cmd expands ``%NAME%`` before anything else, inside double quotes too, and an interactive cmd has no
    escape for ``%`` (``%%`` is for batch files); but there it leaves ``%NAME%`` as typed where no
    variable has that name.  So each ``%`` stands outside quotes and what follows it is quoted
    (``100%"x"%".mtx"``): every name cmd could look up then starts with ``"``, which no variable's does,
    and the C runtime drops the quotes (``100%x%.mtx``).  PowerShell joins the pieces into one word only
    where the word starts unquoted (``"a"%"b"`` is two words to it), so the first piece stays unquoted,
    or its longest plain start does, the rest quoted (:func:`_bare_then_quoted`; a ``-`` word with a ``.``
    anywhere keeps only its ``-`` bare: :func:`_stands_bare_before_percent`).  Where no start can
    stand bare (``é%x%``, ``\ %x%``) no spelling reads the same in both shells: this one is cmd's (the
    shell where ``%`` is special), and PowerShell splits it.  Each quoted piece keeps PowerShell's ``$``
    literal (:func:`_both_quoted`).  Backslashes that end a quoted piece are doubled for the C runtime
    (:func:`_double_quoted`), before a ``%`` in the middle of the word too (``a b\%x%`` is
    ``a" b\\"%"x"%``): PowerShell reads them doubled there as at the end.

    Examples
    --------
    >>> print(_windows_percent("100%x%.mtx"), _windows_percent(r"C:\my runs\%USERNAME%.json"))
    100%"x"%".mtx" C:\my" runs\\"%"USERNAME"%".json"
    """
    first, *rest = word.split("%")
    head = first if _stands_bare_before_percent(first, word) else _bare_then_quoted(first)
    return head + "".join("%" + _both_quoted(piece) for piece in rest)


def _stands_bare_before_percent(first: str, word: str) -> bool:
    """Whether ``first``, the part of ``word`` before its first ``%``, stands bare (:func:`_windows_percent`).

    A ``-`` word with a ``.`` anywhere keeps only its ``-`` bare, as :func:`_stands_plain` has it: a ``%``
    can be a *parameter-char* (PowerShell's specification, 2.3.4), so ``-x%"A"%".mtx"`` may open with a
    parameter token, which a ``.`` ends, and be split like ``-x.mtx``; ``-"x"%"A"%".mtx"`` opens with none
    (checking only ``first``, the ``.`` after the ``%`` went unseen; quoting more is always safe)."""
    if first in ("", "-"):
        return True  # (no parameter token: none starts with "-" then "%")
    return _stands_plain(first) and not (first.startswith("-") and "." in word)


#: Each byte as ``$'...'`` holds it (:func:`shell_quote` with ``ascii``): printable ASCII as it is, the rest ``\xNN``.
_SHELL_BYTES = [{0x5c: "\\\\", 0x27: "\\'"}.get(b, chr(b)) if 0x20 <= b < 0x7f else f"\\x{b:02x}" for b in range(256)]
