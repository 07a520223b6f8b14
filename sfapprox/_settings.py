"""The settings that travel through every layer, declared once.

:class:`FitSettings` is how every method is fitted (iterations, time limit,
seed, device, dtype, threads, memory limit); :class:`LoadOptions` is how a
file becomes a matrix.  The CLI fills each from one option group, ``compare``,
``sweep`` and ``batch`` take them as they are, and each method's factory maps
a :class:`FitSettings` to its own parameters (:meth:`FitSettings.apply_to`).
No default is repeated anywhere else: the CLI's ``--help`` reads the defaults
from these classes, and ``max_iter=None`` means "the method's own default".
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._errors import ParameterError, parameter
from ._params import MEMORY_LIMIT, SEED, Interval, Options, check_params, parse_size

__all__ = ["FitSettings", "LoadOptions", "TimeShare", "DEFAULT_TIME_LIMIT", "DEFAULT_TOTAL_TIME", "DEFAULT_METHODS", "PROTOCOLS",
           "COUNT_INDICES", "DEFAULT_SEED", "SF_MAX_ITER", "SF_FTOL", "SF_GTOL", "SF_INIT", "SF_START_KINDS", "SF_NAMED_INITS", "SF_SUPPORT", "SF_BASE", "parse_size"]

#: Default wall-clock limit of one method's fit, in seconds.  Every method stays
#: within its limit as a whole (grids and multi-start searches share it).
DEFAULT_TIME_LIMIT = 60.0
#: Default wall-clock budget of a whole comparison (a compare, each point of a sweep,
#: each matrix of a batch): with ``time_limit="auto"`` its k methods get
#: ``min(DEFAULT_TIME_LIMIT, DEFAULT_TOTAL_TIME / k)`` seconds each, so that comparing
#: every method at the defaults takes about two minutes, whatever the matrix.
DEFAULT_TOTAL_TIME = 120.0

#: How a comparison sets its methods up: ``"default"``, or ``"paper"``, the SF paper's Table 1
#: settings (SF with the reference structure, TSVD at rank ``ceil(M^2 / 2)``, ``M = ceil(log2 N)``).
PROTOCOLS = ("default", "paper")

#: The methods a comparison (compare, sweep, batch) runs when none are named: SF, the best
#: low-rank surrogate, and plain sparse storage (exact and cheapest for many graphs).
DEFAULT_METHODS = ("sf", "tsvd", "sparse")

# SF's defaults (ChordSF's signature, the CLI's --help and the hybrids read them from here).
#: L-BFGS iterations of one SF fit.
SF_MAX_ITER = 20000
#: Stop when the loss falls by a relative amount below this over 20 iterations.
SF_FTOL = 1e-10
#: Stop when max |gradient| <= SF_GTOL * max(1, loss) (scale-free units).
SF_GTOL = 1e-12
#: The start: "auto" races the reference start (values 1/K) and the near-identity one.
SF_INIT = "auto"
#: The kinds of start "auto" races, in the order of their random streams (``sf._multistart.START_KINDS``;
#: here, where reading them loads no torch).
SF_START_KINDS = ("reference", "identity")
#: The starts ``init`` names (the rest are factors files or values): ChordSF's and the CLI's ``--init``.
SF_NAMED_INITS = ("auto", *SF_START_KINDS, "rank1")
#: From this N an SF fit on the CPU runs in float32 unless a dtype is asked for: twice the L-BFGS
#: iterations per second at N = 4,096, where it reached the old default's 10-minute error in 159 s
#: instead of 322 s (``benchmarks/results/scale_fit_f32.md``); smaller fits stay float64.
SF_FLOAT32_MIN_N = 4096
#: The support protocol and the Chord base of the reference structure.
SF_SUPPORT, SF_BASE = "chord", 2

#: The seed of every random start, randomized solver and sample when none is given: FitSettings'
#: ``seed``, each estimator's ``random_state``, a kernel's bandwidth sample (``KernelMatrix(seed=)``)
#: and the solvers under them take it from here, so one run's numbers do not depend on which layer
#: was left to its default.
DEFAULT_SEED = 0

#: Whether a sparse entry stored at a free position (RPCA's and sf+s's sparse parts) is charged its
#: position too (2 numbers: value and flat index).  A position is information the surrogate must
#: store, so it is charged by default; False is the SF paper's convention (values only).
COUNT_INDICES = True

_DEVICES = ("auto", "cpu", "cuda")


#: The most threads a fit may be forced to (``--threads``, ``threads=``): more than any machine this
#: runs on has, so a count above it is a typo (99999999999 was accepted, and reported as the threads used).
MAX_THREADS = 1024


@dataclass(frozen=True)
class FitSettings:
    """How every method of a run is fitted.

    Attributes
    ----------
    max_iter : int or None, default=None
        Iteration limit of the iterative methods that take one (SF and its
        hybrids: L-BFGS iterations); None: each method's own default.
    time_limit : float, None or "auto", default="auto"
        Wall-clock limit of each method as a whole, in seconds; None (or 0)
        for none, so that results depend on the iteration limits alone and
        are the same on every machine.  ``"auto"``: ``DEFAULT_TIME_LIMIT``
        for one method, and a share of ``DEFAULT_TOTAL_TIME`` for each of the
        methods compared together (:meth:`per_method`).
    seed : int, default=0
        Seed of every random start and randomized solver (``random_state``).
    device : str, default="auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    dtype : {"float64", "float32"} or None, default=None
        None: float64 on the CPU, float32 on a GPU.
    threads : int or None, default=None
        CPU threads of the torch kernels; None chooses from the work size.
    max_memory : int, str or None, default=None
        Bytes a fit may use; work estimated above it is refused before it
        starts.  A size as the command line's ``--max-memory`` takes it
        (``"4G"``, ``"500M"``: powers of 1024) is stored in bytes.  None: 80%
        of the physical memory, or of the process's cgroup memory limit (a
        container's, a job's) where lower (for SF on a GPU, 90% of the GPU's
        free memory).

    Examples
    --------
    >>> s = FitSettings(time_limit=5)
    >>> s.replace(seed=3).seed, s.time_limit
    (3, 5.0)
    >>> FitSettings().per_method(4).time_limit, FitSettings().per_method(1).time_limit
    (30.0, 60.0)
    >>> FitSettings(max_memory="4G").max_memory
    4294967296
    """

    max_iter: int | None = None
    time_limit: float | str | None = "auto"
    seed: int = DEFAULT_SEED
    device: str = "auto"
    dtype: str | None = None
    threads: int | None = None
    max_memory: int | str | None = None

    #: Checked at construction (the boundary), by the same declared constraints the
    #: estimators use, so a bad value fails before any loading or fitting.
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "max_iter": Interval(int, 0, None, allow_none=True),
        "time_limit": (Options(("auto",)), Interval(float, 0, None, allow_none=True)),
        "seed": SEED,
        "device": str,
        "dtype": (Options(("float64", "float32")), None),
        "threads": Interval(int, 1, MAX_THREADS, allow_none=True),
        "max_memory": MEMORY_LIMIT,
    }

    def __post_init__(self) -> None:
        checked = check_params(self, self._parameter_constraints)
        # stored in bytes: what every method and result file reads, whether "4G" or 4294967296 was given
        object.__setattr__(self, "max_memory", checked["max_memory"])
        if self.time_limit not in (None, "auto"):
            object.__setattr__(self, "time_limit", None if self.time_limit == 0 else float(self.time_limit))
        device = self.device.strip().lower()
        if device not in _DEVICES and not re.fullmatch(r"cuda:\d+", device):
            raise ParameterError(f"The 'device' parameter of FitSettings must be one of {', '.join(_DEVICES)} "
                                 f"or cuda:N. Got {self.device!r} instead.")
        object.__setattr__(self, "device", device)

    @property
    def max_memory_bytes(self) -> int | None:
        """``max_memory`` in bytes (None: the default limit), typed as the layers below take it.

        The field is typed ``int | str | None`` for the constructor, which also takes ``"4G"``; it holds bytes
        once made, and this reads it as such for a type checker (no cast at each of its readers).
        """
        return MEMORY_LIMIT.to_bytes(self.max_memory)

    def per_method(self, count: int) -> "FitSettings":
        """The settings of one of ``count`` methods fitted together ("auto" time limits resolved).

        Parameters
        ----------
        count : int
            How many methods share the run.

        Returns
        -------
        FitSettings
            ``self`` unless ``time_limit`` is ``"auto"``; then a copy with
            ``min(DEFAULT_TIME_LIMIT, DEFAULT_TOTAL_TIME / count)`` seconds.
        """
        if self.time_limit != "auto":
            return self
        return self.replace(time_limit=min(DEFAULT_TIME_LIMIT, DEFAULT_TOTAL_TIME / max(1, count)))

    def share_time(self, count: int) -> "TimeShare":
        """A :class:`TimeShare` handing each of ``count`` methods compared together its limit.

        Parameters
        ----------
        count : int
            How many methods are compared together.

        Returns
        -------
        TimeShare
            Hands out each method's limit as it starts (time a fast method leaves goes to the ones after it).
        """
        return TimeShare(self, count)

    def replace(self, **changes: Any) -> "FitSettings":
        """A copy with some fields changed (validated again).

        Parameters
        ----------
        **changes
            Field names and their new values.

        Returns
        -------
        FitSettings
            A new object; ``self`` is unchanged (frozen).

        Raises
        ------
        ParameterError
            For an invalid value; an unknown field name is a TypeError.
        """
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON values (recorded in every result file).

        Returns
        -------
        dict of str to Any
            Field name to value (``max_memory`` in bytes).
        """
        return dataclasses.asdict(self)

    def apply_to(self, cls: type, *, exclude: tuple[str, ...] = (), **params: Any) -> dict[str, Any]:
        """Constructor keywords of ``cls`` from these settings, plus ``params``.

        Each setting goes to the parameter of the same meaning that ``cls``
        accepts (``seed`` → ``random_state``), except the settings named in
        ``exclude`` (e.g. ``max_iter`` for a method whose iterations mean
        something else); ``max_iter=None`` is left out, so the class keeps its
        own default.  ``params`` win over the settings.

        Parameters
        ----------
        cls : type
            An estimator class (its constructor's parameter names decide what is passed).
        exclude : tuple of str, default=()
            Settings not to pass.
        **params
            Further constructor keywords; they override the settings.

        Returns
        -------
        dict
            Keywords for ``cls(**...)``; an ``"auto"`` time limit is resolved
            for one method (:meth:`per_method`).

        Examples
        --------
        >>> from sfapprox.baselines.tsvd import TruncatedSVD
        >>> FitSettings(seed=4).apply_to(TruncatedSVD, n_components=2)
        {'time_limit': 60.0, 'random_state': 4, 'max_memory': None, 'n_components': 2}
        """
        accepted = inspect.signature(cls).parameters
        resolved = self.per_method(1)
        out: dict[str, Any] = {}
        for setting, param in _PARAMETER_NAMES.items():
            value = getattr(resolved, setting)
            if setting in exclude:
                continue
            if param in accepted and not (setting == "max_iter" and value is None):
                out[param] = value
        out.update(params)
        return out


#: The least time a method of a comparison is given, even when the methods before it took the
#: whole shared time (a limit of 0 would mean "none").
MIN_SHARE = 1.0


class TimeShare:
    """The time limits of the methods of one comparison, handed out as they start.

    With ``time_limit="auto"`` the methods share ``DEFAULT_TOTAL_TIME`` from
    the moment this object is made: each gets ``min(DEFAULT_TIME_LIMIT, time
    left / methods left)`` (at least :data:`MIN_SHARE`), so time that a fast
    method leaves goes to the methods after it.  Any other ``time_limit`` is
    every method's own and is handed out unchanged.

    Parameters
    ----------
    settings : FitSettings
        The run's settings.
    count : int
        How many methods will ask for a limit (at least 1).

    Examples
    --------
    >>> share = FitSettings(time_limit=5).share_time(3)
    >>> share.next_limit(), share.next_limit()
    (5.0, 5.0)
    >>> round(FitSettings().share_time(4).next_limit(), 3)
    30.0
    """

    def __init__(self, settings: FitSettings, count: int) -> None:
        self.settings = settings
        self.left = max(1, int(count))
        self.deadline = time.monotonic() + DEFAULT_TOTAL_TIME

    def next_limit(self) -> float | None:
        """The limit of the next method to start (the methods left count down).

        Returns
        -------
        float or None
            Seconds; None: no limit.
        """
        limit = self.settings.time_limit
        if not isinstance(limit, str):  # seconds or None: "auto" is the one text a FitSettings holds
            return limit
        remaining = max(0.0, self.deadline - time.monotonic())
        limit = max(MIN_SHARE, min(DEFAULT_TIME_LIMIT, remaining / self.left))
        self.left = max(1, self.left - 1)
        return limit


#: FitSettings field -> the estimator parameter that means the same.
_PARAMETER_NAMES = {
    "max_iter": "max_iter",
    "time_limit": "time_limit",
    "seed": "random_state",
    "device": "device",
    "dtype": "dtype",
    "threads": "threads",
    "max_memory": "max_memory",
}


#: The delimiters ``LoadOptions.delimiter`` (``--delimiter``) names, as a text table's cells are split: None
#: is blanks.  ``tab`` and the two characters ``\t`` are a tab, which a command line cannot type as one.
TEXT_DELIMITERS = {",": ",", ";": ";", "\t": "\t", "tab": "\t", "\\t": "\t", "whitespace": None}
#: The decimal marks ``LoadOptions.decimal`` (``--decimal``) names.
DECIMAL_MARKS = (".", ",")


def check_text_marks(delimiter: object, decimal: object) -> None:
    """Refuse a text table's ``delimiter`` or ``decimal`` that no file makes right, before any file is read.

    Parameters
    ----------
    delimiter : object
        None, or a key of :data:`TEXT_DELIMITERS`.
    decimal : object
        None, or one of :data:`DECIMAL_MARKS`.

    Raises
    ------
    ParameterError
        For an unknown one (a typed ``--delimiter '|'``), or a comma that would be both (no cell of
        ``1,5,2`` could be told from a number's decimals).

    Examples
    --------
    >>> check_text_marks("tab", ",")
    >>> check_text_marks(",", ",")
    Traceback (most recent call last):
    ...
    sfapprox._errors.ParameterError: decimal=',' and delimiter=',' name the same character: a cell could not be told from a number's decimals; give another delimiter
    """
    if delimiter is not None and (not isinstance(delimiter, str) or delimiter not in TEXT_DELIMITERS):
        # the choices as their reader gives them (--delimiter ';' typed; Python's "';'" was none to type)
        raise ParameterError(f"{parameter('delimiter', delimiter)} is not a delimiter sfapprox reads: one of "
                             f"{parameter('delimiter', ',')} (commas), {parameter('delimiter', ';')} (semicolons), "
                             f"{parameter('delimiter', 'tab')} (tabs) or {parameter('delimiter', 'whitespace')} (blanks)")
    if decimal is not None and (not isinstance(decimal, str) or decimal not in DECIMAL_MARKS):
        raise ParameterError(f"{parameter('decimal', decimal)} is not a decimal mark: {parameter('decimal', '.')} "
                             f"(a point) or {parameter('decimal', ',')} (a comma)")
    if decimal is not None and delimiter is not None and TEXT_DELIMITERS[delimiter] == decimal:
        raise ParameterError(f"{parameter('decimal', decimal)} and {parameter('delimiter', delimiter)} name the same "
                             "character: a cell could not be told from a number's decimals; give another delimiter")


#: The reading options of a text table, as a matrix's recipe records them (:func:`recorded_text_marks`).
TEXT_MARKS = ("delimiter", "decimal")


def recorded_text_marks(delimiter: str | None, decimal: str | None) -> dict[str, str]:
    """The text marks a table was read with, as its recipe records them: those given (a result file then
    says how to read its matrix again), a tab under its one name ``"tab"`` (``"\\t"`` and a typed tab read
    the same).  One left to detection is left out: a file read as before records what it recorded before.

    Parameters
    ----------
    delimiter : str or None
        A key of :data:`TEXT_DELIMITERS`, or None (not given).
    decimal : str or None
        One of :data:`DECIMAL_MARKS`, or None (not given).

    Returns
    -------
    dict of str to str
        ``delimiter`` and ``decimal``, each where given.

    Examples
    --------
    >>> recorded_text_marks("\\t", ","), recorded_text_marks(None, None)
    ({'delimiter': 'tab', 'decimal': ','}, {})
    """
    given = {"delimiter": "tab" if delimiter is not None and TEXT_DELIMITERS.get(delimiter) == "\t" else delimiter,
             "decimal": decimal}
    return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class LoadOptions:
    """How a file becomes a square matrix (the keywords of :func:`sfapprox.load_matrix`).

    Attributes
    ----------
    format : str or None
        Reader key overriding the extension (see ``sfapprox formats``).
    var : str or None
        MATLAB / npz variable (``Problem.A`` for a struct field).
    network : int or None
        Which network of a multi-network Pajek file (1-based).
    relation : int or None
        Pajek: only this relation (``*Arcs :k``, ``k: i j``, ``*Matrix :k``); default: all, summed.
    two_mode : {"rows", "cols", "bipartite"} or None
        How a 2-mode Pajek network becomes square.
    gradient : bool, default=False
        Image: its gradient magnitude instead of the intensities.
    resize : int or None
        Image: resize to N x N.
    square : {"crop", "resize"} or None
        Non-square image: crop (center) or resize.
    covariance : bool, default=False
        The file is a samples x features table; use its feature covariance.
    mirror : {"auto", "none", "mirror"}, default="auto"
        Header-less triplets: mirror a one-triangle file?
    kernel : str or None
        The file is a table of points; the matrix is their kernel matrix
        (rbf, laplacian, matern32, matern52, cosine, linear), computed from
        columns and formed only when it fits.
    bandwidth : float or None
        The kernel's bandwidth; None: the median heuristic.
    max_memory : int, str or None
        Bytes the loaded matrix (and its dense copy) may take, or a size such as
        ``"4G"`` (read by the reader it is passed to); None: 80% of the physical memory.
    delimiter : {",", ";", "\\t", "whitespace"} or None
        Text tables (.csv/.tsv/.txt/.dat) and triplets (.ijv/.coo/.edges): what separates the cells
        (``"tab"`` is ``"\\t"``); None: detected from the extension and the data lines.
    decimal : {".", ","} or None
        Text tables and triplets: the decimal mark of their numbers; None: detected (a ``;``-separated file's
        decimal commas read, a number that reads both ways refused).
    extra : dict
        Further reader keywords (e.g. ones a newer reader adds).

    Examples
    --------
    >>> LoadOptions(var="Problem.A").keywords()["var"]
    'Problem.A'
    """

    format: str | None = None
    var: str | None = None
    network: int | None = None
    relation: int | None = None
    two_mode: str | None = None
    gradient: bool = False
    resize: int | None = None
    square: str | None = None
    covariance: bool = False
    mirror: str = "auto"
    kernel: str | None = None
    bandwidth: float | None = None
    max_memory: int | str | None = None
    # keyword-only: a LoadOptions built by position keeps its meaning (``extra`` stays the 14th)
    delimiter: str | None = field(default=None, kw_only=True)
    decimal: str | None = field(default=None, kw_only=True)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def max_memory_bytes(self) -> int | None:
        """``max_memory`` in bytes (None: the default limit): a size such as ``"4G"`` read as ``--max-memory``
        reads it, the byte count that the readers' own options already hold unchanged."""
        return MEMORY_LIMIT.to_bytes(self.max_memory)

    def keywords(self) -> dict[str, Any]:
        """The options as :func:`~sfapprox.io.open_matrix` keywords (:func:`~sfapprox.io.load_matrix`'s,
        and ``kernel``/``bandwidth`` when set).

        Returns
        -------
        dict of str to Any
            Keyword to value; ``extra``'s items merged in.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for name in ("kernel", "bandwidth"):
            if out[name] is None:
                del out[name]
        out.update(self.extra)
        return out
