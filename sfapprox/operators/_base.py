"""The contract every surrogate operator follows, and the registry that saves and loads them.

A surrogate operator is what a fit returns (``est.operator_``): a
:class:`scipy.sparse.linalg.LinearOperator` that never forms the ``N x N``
matrix unless asked.  Each class derives from :class:`SurrogateOperator` and
supplies

* ``_apply(B, transpose)``: ``A @ B`` or ``A.T @ B`` for a vector or a block
  (every product — ``op @ x``, ``op @ B``, ``op.T @ x``, ``matvec``, scipy's
  solvers — lands there);
* ``n_stored``: the stored numbers, by :mod:`sfapprox.budget`'s formula;
* ``to_dense()``;
* its saved layout: the class attributes ``kind`` (the file's ``operator``
  attribute), ``layout`` (``"parts"``: its arrays in the group ``parts``;
  ``"root"``: at the file's root, as SF factors and hybrids have been written
  since format version 1), ``description`` (how to rebuild the matrix with
  numpy, written into every file) and ``dataset_descriptions``, and the
  methods ``to_arrays() -> (arrays, attrs)`` and ``from_arrays(arrays,
  attrs)``, which checks its parts and raises ``ValueError`` naming what is
  inconsistent (and, to spare a copy, ``array_names()``: the names of
  ``to_arrays``'s arrays);
* optionally ``to_torch()`` and ``to_sparse_factors()``.

:func:`register_operator` (a class decorator) makes a class known to
:func:`sfapprox.save_factors` and :func:`sfapprox.load_factors`: a new kind of
surrogate is one new module in this package.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, ClassVar, overload

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .._errors import ParameterError
from .._validation import apply_real_parts, check_operand, readable_operand
from ..formats import counted

if TYPE_CHECKING:  # torch is imported by to_torch itself, never with the surrogates
    import torch

__all__ = ["SurrogateOperator", "register_operator", "operator_class", "operator_kinds"]


def _column_kept(product, x):
    """``product(x)`` (scipy's ``matvec`` or ``rmatvec``), an ``(N, 1)`` column given as its vector and the
    result made an ``(N, 1)`` column again, as scipy documents: scipy 1.18 warns on a 2-D operand
    (FutureWarning) and 1.20 refuses it.  An ``np.matrix`` column gives one, as scipy's did."""
    if np.ndim(x) != 2:
        return product(x)
    y = np.asarray(product(np.asarray(x).reshape(-1))).reshape(-1, 1)
    return np.asmatrix(y) if isinstance(x, np.matrix) else y


class SurrogateOperator(LinearOperator):
    """Base of every surrogate: fast products, exports and the saved layout (see the module docstring).

    Products go through one ``_apply(B, transpose)`` call, without scipy's
    per-call checks for arrays: for a 1-D or 2-D ndarray of the right length
    ``@`` and ``dot`` call it directly (scipy's checks are a third of a
    product at N = 256); anything else follows scipy's rules (scalars
    refused, operators composed).  The transpose is made once and shares
    the values.

    Parameters
    ----------
    n : int
        Order ``N`` of the (square, float64) operator.

    Attributes
    ----------
    kind : str
        The registry key and a factors file's ``operator`` attribute (class attribute).
    layout : {"parts", "root"}
        Where a factors file holds its arrays (class attribute).
    description : str
        How to rebuild the matrix from the saved arrays, in words (class attribute).
    dataset_descriptions : dict of str to str
        A description per saved array (class attribute).
    n_stored : int
        Stored numbers (property; each subclass by its :mod:`sfapprox.budget` formula).
    """

    #: The registry key and the factor file's ``operator`` attribute.
    kind: ClassVar[str] = ""
    #: Where a factors file holds its arrays: ``"parts"`` (a group) or ``"root"`` (legacy kinds).
    layout: ClassVar[str] = "parts"
    #: How to rebuild the matrix from the saved arrays, in words (written into every file).
    description: ClassVar[str] = ""
    #: A description per saved array (written as each dataset's ``description`` attribute).
    dataset_descriptions: ClassVar[dict[str, str]] = {}

    _transposed: SurrogateOperator | None = None

    def __init__(self, n: int) -> None:
        super().__init__(dtype=np.float64, shape=(int(n), int(n)))

    # ------------------------------------------------------------------ products (operands checked)
    # Each operand is read first (readable_operand): scipy's own methods refused a sparse block and a torch
    # tensor that requires grad with a raw TypeError or RuntimeError before any check here.
    def matvec(self, x: Any) -> np.ndarray:
        x = readable_operand(x)
        self._check_operand(x, "a vector", 1)
        return _column_kept(super().matvec, x)

    def rmatvec(self, x: Any) -> np.ndarray:
        x = readable_operand(x)
        self._check_operand(x, "a vector", 1)
        return _column_kept(super().rmatvec, x)

    def matmat(self, X: Any) -> np.ndarray:
        X = readable_operand(X)
        self._check_operand(X, "a matrix", 2)
        return super().matmat(X)

    def rmatmat(self, X: Any) -> np.ndarray:
        X = readable_operand(X)
        self._check_operand(X, "a matrix", 2)
        return super().rmatmat(X)

    def _check_operand(self, x, what: str, ndim: int) -> None:
        """:class:`~sfapprox.ParameterError` for an operand of another length than ``N`` (scipy's own
        check says only "dimension mismatch")."""
        check_operand(x, self.shape[0], owner=self._named, what=what, ndim=ndim)

    @property
    def _named(self) -> str:
        """What a message calls this operator: its class (a transpose: ``ChordOperator.T``, not ``_Transposed``)."""
        return type(self).__name__

    def __repr__(self) -> str:
        """One line: the class, the order, what it holds and what it stores.

        scipy's ``<64x64 ChordOperator with dtype=float64>`` said neither the structure nor the
        storage, which is what one compares surrogates by.

        Examples
        --------
        >>> from sfapprox.operators import ChordOperator
        >>> ChordOperator(np.full((3, 8, 4), 0.25))
        <ChordOperator 8 x 8: 3 factors, chord support, K = 4 values a row; stores 96 numbers (150% of N²)>
        """
        n = self.shape[0]
        held = self._holds()
        share = f"{100 * self.n_stored / n ** 2:.3g}%" if n else "-"
        return f"<{self._named} {n} x {n}: {held + '; ' if held else ''}stores {self.n_stored:,} numbers ({share} of N²)>"

    def _holds(self) -> str:
        """What the surrogate holds, in a few words, for its repr (each kind says it; "" says nothing)."""
        return ""

    # ------------------------------------------------------------------ what a subclass supplies
    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def n_stored(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dense(self) -> np.ndarray:
        """The ``N x N`` matrix (the operator applied to the identity; subclasses do it faster).

        Returns
        -------
        numpy.ndarray
            The operator's matrix, of shape ``(N, N)``.
        """
        return self._apply(np.eye(self.shape[0]), False)

    def factored_parts(self) -> tuple[np.ndarray, np.ndarray, Any] | None:
        """``(L, R, S)`` with ``A = L @ R + S`` (``L`` of shape ``(N, r)``, ``R`` ``(r, N)``, ``S`` a scipy
        sparse array or None), where the surrogate is low rank plus sparse; None for any other form.

        What scores it against a matrix held sparse from the non-zeros alone
        (:func:`~sfapprox.metrics.sparse_target_error`), where a pass over its ``N^2`` entries took
        minutes at N = 60,000.

        Returns
        -------
        tuple or None
            ``(L, R, S)``: ``L`` of shape ``(N, r)``, ``R`` of shape ``(r, N)``, ``S`` a scipy sparse
            array or None; None where the surrogate is not low rank plus sparse.
        """
        return None

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:  # pragma: no cover - abstract
        """The arrays and attributes a factors file holds (each subclass implements it).

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The datasets of a factors file, by name.
        attrs : dict of str to Any
            Its attributes (plain values).
        """
        raise NotImplementedError

    def array_names(self) -> tuple[str, ...]:
        """The names of the arrays :meth:`to_arrays` returns, in its order, without making them.

        A reader checks a file's datasets against them (:func:`sfapprox.load_factors`): ``to_arrays``
        copies some parts (a hybrid's sparse part as COO), only for their names to be read.  This
        default asks ``to_arrays`` (no copy for a kind whose arrays it holds as they are saved); the
        kinds that copy (hybrid, sparse) name their own.

        Returns
        -------
        tuple of str
            The dataset names a factors file of this kind holds.
        """
        return tuple(self.to_arrays()[0])

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> "SurrogateOperator":  # pragma: no cover
        """Rebuild an operator from what :meth:`to_arrays` returned (each subclass implements it).

        Parameters
        ----------
        arrays : dict of str to numpy.ndarray
            The saved arrays (the first item of :meth:`to_arrays`).
        attrs : dict
            The saved attributes (the second item of :meth:`to_arrays`).

        Returns
        -------
        SurrogateOperator

        Raises
        ------
        ValueError
            For parts that are inconsistent (shapes, non-finite values, positions
            out of range), missing or unreadable.
        """
        raise NotImplementedError

    # ------------------------------------------------------------------ exports
    def to_sparse_factors(self) -> list:
        """Sparse factors whose product is the operator (the surrogates that are such a product: Chord
        factors, the padded butterfly and Monarch).

        Returns
        -------
        list of scipy.sparse.csr_array
            ``[W1, ..., WM]`` whose product ``W1 @ ... @ WM`` is the ``N x N`` operator: each ``N x N`` for
            Chord factors; a padded butterfly's inner factors are of its padded order ``N'``, Monarch's two
            ``N' x r N'`` and ``r N' x N'``, the first cropped to ``N`` rows and the last to ``N`` columns.

        Raises
        ------
        ParameterError
            Here, in the base class: this surrogate is not such a product.
        """
        raise ParameterError(f"a {self._named} is not a product of sparse factors; "
                             "use the operator itself, or to_dense()")

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying the surrogate in what it stores (every kind has one, and
        so has a transpose ``op.T``).

        Parameters
        ----------
        dtype : torch.dtype, optional
            The parameters' dtype (default: ``torch.get_default_dtype()``).
        device : torch.device or str, optional
            Where the parameters live (default: CPU).

        Returns
        -------
        torch.nn.Module
            ``module(x)`` is ``x @ A.T`` over the last dimension of ``x``; its values are parameters,
            and gradients reach them and ``x``.

        Raises
        ------
        ParameterError
            Here, in the base class: this surrogate has no torch export.
        """
        raise ParameterError(f"{operator_words(self)} has no torch export yet; "
                             "torch.from_numpy(op.to_dense()) gives its dense matrix")

    # ------------------------------------------------------------------ products
    def _applied(self, B, transpose: bool) -> np.ndarray:
        """``A @ B`` (``A.T @ B`` with ``transpose``) by the subclass's real :meth:`_apply`; a complex
        operand as its real and imaginary parts (five kinds dropped the imaginary part, reading the
        operand as float64 with only numpy's ComplexWarning)."""
        return apply_real_parts(lambda part: self._apply(part, transpose), B, owner=self._named)

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._applied(np.reshape(x, -1), False)

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._applied(np.reshape(x, -1), True)

    def _matmat(self, B: np.ndarray) -> np.ndarray:
        return self._applied(B, False)

    def _rmatmat(self, B: np.ndarray) -> np.ndarray:
        return self._applied(B, True)

    def _fast(self, x) -> bool:
        """True for a vector or block of N rows (applied here); an array of more dimensions, or a 0-d one,
        is refused (scipy's ValueError held the whole array and named no shape); anything else goes to
        scipy (operator products, and a Python scalar, which scipy refuses for ``@`` and scales by in
        ``dot``)."""
        if not isinstance(x, LinearOperator) and (np.ndim(x) > 2 or (isinstance(x, np.ndarray) and x.ndim == 0)):
            self._check_operand(x, "a vector or a matrix", 2)
        self._check_length(x, axis=0)
        return type(x) is np.ndarray and x.ndim in (1, 2)

    def _check_length(self, x, axis: int) -> None:
        """:class:`~sfapprox.ParameterError` for a vector or block of another length than ``N`` along
        ``axis`` (0 for ``A @ x``, -1 for ``x @ A``): any array-like, not only an ndarray (a list, a memmap,
        an ``np.matrix``), since scipy 1.18's ``dot`` and ``rdot`` refuse it themselves ("Dimension
        mismatch", a ValueError) before it reaches matvec's check.  An operator or a scalar is scipy's."""
        if isinstance(x, LinearOperator):
            return
        ndim = np.ndim(x)
        if ndim in (1, 2) and np.shape(x)[axis] != self.shape[0]:
            what = ("a vector", "a matrix")[ndim - 1]
            if axis == 0:
                self._check_operand(x, what, ndim)
            else:  # x @ A is A.T @ x.T: the message names the transpose, as matvec's check did
                self.T._check_operand(np.transpose(x), what, ndim)

    # An array in, an array of its shape out (what a user's type checker should know of ``op @ x``); anything
    # else (an operator to compose with, a scalar) is scipy's, whose LinearOperator has no hints: Any.
    @overload
    def rdot(self, x: np.ndarray) -> np.ndarray: ...

    @overload
    def rdot(self, x: Any) -> Any: ...

    def rdot(self, x: Any) -> Any:
        """``x @ A`` (scipy's rules; a vector or block of another length than ``N``: one error, naming it).

        Parameters
        ----------
        x : array_like or LinearOperator
            A vector of length ``N``, a ``(k, N)`` block, or an operator to compose with.

        Returns
        -------
        numpy.ndarray or LinearOperator
            ``x @ A``.
        """
        x = x if isinstance(x, LinearOperator) else readable_operand(x)
        self._check_length(x, axis=-1)
        # scipy's public rdot came in 1.18; 1.12-1.17 (which pyproject allows) have it as _rdot
        scipy_rdot = getattr(super(), "rdot", None) or super()._rdot
        return scipy_rdot(x)

    # scipy 1.12-1.17's `x @ A` and `x * A` call _rdot: through rdot's check too, so that a wrong length
    # is refused in the same words on every scipy (their matvec's check named a (1, k) block a vector)
    _rdot = rdot

    @overload
    def dot(self, x: np.ndarray) -> np.ndarray: ...

    @overload
    def dot(self, x: Any) -> Any: ...

    def dot(self, x: Any) -> Any:
        """``A @ x`` for a vector or block (anything else: scipy's rules, e.g. operator products).

        Parameters
        ----------
        x : array_like or LinearOperator
            A vector of length ``N``, an ``(N, k)`` block, or an operator to compose with.

        Returns
        -------
        numpy.ndarray or LinearOperator
            ``A @ x``: an array of ``x``'s shape, or the composed operator.
        """
        x = x if isinstance(x, LinearOperator) else readable_operand(x)
        return self._applied(x, False) if self._fast(x) else super().dot(x)

    @overload
    def __matmul__(self, x: np.ndarray) -> np.ndarray: ...

    @overload
    def __matmul__(self, x: Any) -> Any: ...

    def __matmul__(self, x: Any) -> Any:
        x = x if isinstance(x, LinearOperator) else readable_operand(x)
        self._refuse_no_operand(x, "op @ x")
        return self._applied(x, False) if self._fast(x) else super().__matmul__(x)

    def __rmatmul__(self, x: Any) -> Any:
        self._refuse_no_operand(x, "x @ op")
        return super().__rmatmul__(x)

    def _refuse_no_operand(self, x, product: str) -> None:
        """:class:`~sfapprox.ParameterError` for an operand of ``@`` that is no array and no operator (None,
        a number, a string): scipy's raw ValueError said "expected 1-d or 2-d array or matrix, got
        array(None, dtype=object)", or for a number "use '*' instead", naming neither operator nor operand."""
        if isinstance(x, LinearOperator) or np.ndim(x) > 0:
            return
        if isinstance(x, np.ndarray):  # a 0-d array, by its shape ("got a scalar"), as _fast's check says it
            self._check_operand(x, "a vector or a matrix", 2)
        number = isinstance(x, numbers.Number) and not isinstance(x, bool)
        # (scipy's "Scalar operands" said so); a numpy number as Python writes its value ("np.float64(2.0)" read
        # badly), exactly: a Fraction or a complex keeps its own repr
        value = x.item() if isinstance(x, np.generic) else x
        scale = f"; a scalar, which scales by *: op * {value!r}" if number else ""
        side = "row" if product == "op @ x" else "column"  # x @ op: x's columns meet the operator's rows
        raise ParameterError(f"{self._named} is {self.shape[0]:,} x {self.shape[0]:,}: {product} takes a vector or a "
                             f"matrix of {counted(self.shape[0], side)}, or an operator, got {x!r:.40} "
                             f"({type(x).__name__}){scale}")

    # scipy's T and H, typed (its own are unhinted: Any to a user's type checker): the transpose of a
    # surrogate is a surrogate, with its to_torch(), n_stored and products
    @property
    def T(self) -> SurrogateOperator:
        return self._adjoint()

    @property
    def H(self) -> SurrogateOperator:
        return self._adjoint()

    def _adjoint(self) -> SurrogateOperator:
        if self._transposed is None:  # made once: `op.T @ x` in a loop should not rebuild it
            self._transposed = _Transposed(self)
        return self._transposed

    # Real: the transpose is the adjoint (scipy's default would conjugate twice per product).
    _transpose = _adjoint


def operator_words(op) -> str:
    """An operator as a message names it: ``"a ChordOperator"``, ``"the transpose (.T) of a ChordOperator"``;
    scipy's combinations by what they are, not by their private classes (``_ScaledLinearOperator``).

    Examples
    --------
    >>> from scipy.sparse.linalg import aslinearoperator
    >>> operator_words(2 * aslinearoperator(np.eye(2)))
    'a multiple, sum, product or power of scipy LinearOperators'
    """
    if isinstance(op, _Transposed):
        return f"the transpose (.T) of {operator_words(op._op)}"
    name = type(op).__name__
    if name.startswith("_") and isinstance(op, LinearOperator):
        return "a multiple, sum, product or power of scipy LinearOperators"
    return f"a {name}"


class _Transposed(SurrogateOperator):
    """``A.T`` of a surrogate, sharing its values (not a saved kind)."""

    def __init__(self, op: SurrogateOperator):
        self._op = op
        super().__init__(op.shape[0])

    def _apply(self, B: np.ndarray, transpose: bool) -> np.ndarray:
        return self._op._applied(B, not transpose)

    @property
    def _named(self) -> str:
        return f"{self._op._named}.T"

    def _holds(self) -> str:
        return self._op._holds()

    @property
    def n_stored(self) -> int:
        return self._op.n_stored

    def _adjoint(self) -> SurrogateOperator:
        return self._op

    _transpose = _adjoint

    def to_sparse_factors(self) -> list:
        """The transposed factors of the operator's :meth:`~SurrogateOperator.to_sparse_factors`, in reverse
        order: ``(W1 ... WM)^T = WM^T ... W1^T`` (it named the private class ``_Transposed`` as no product).

        Returns
        -------
        list of scipy.sparse.csr_array
            ``[WM^T, ..., W1^T]``.

        Raises
        ------
        ParameterError
            Where the operator itself is no product of sparse factors.
        """
        try:
            factors = self._op.to_sparse_factors()
        except ParameterError:
            raise ParameterError(f"a {self._named} is not a product of sparse factors; use the operator itself, "
                                 "or to_dense()") from None
        return [sp.csr_array(factor.T) for factor in reversed(factors)]

    def to_dense(self) -> np.ndarray:
        return self._op.to_dense().T

    def to_torch(self, dtype: torch.dtype | str | None = None,
                 device: torch.device | str | None = None) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` applying ``A.T``: ``module(x)`` is ``x @ A`` over the last
        dimension of ``x``.

        The surrogate's own module (its values copied from the operator, as every ``to_torch`` copies)
        wrapped in a :class:`~sfapprox.operators._torch.TransposedLinear`, which shares that module's
        parameters and applies their transpose at the same cost; gradients reach them and ``x``.

        Parameters
        ----------
        dtype : torch.dtype, optional
            The parameters' dtype (default: ``torch.get_default_dtype()``).
        device : torch.device or str, optional
            Where the parameters live (default: CPU).

        Returns
        -------
        sfapprox.operators._torch.TransposedLinear
            ``.transposed()`` is the surrogate's module (``x @ A.T``); ``.to_operator()`` is ``op.T``
            with the current values.

        Raises
        ------
        ParameterError
            Where the surrogate itself has no torch export.

        Examples
        --------
        >>> import torch
        >>> from sfapprox.operators import ChordOperator
        >>> op = ChordOperator(np.random.default_rng(0).standard_normal((3, 8, 4)))
        >>> x = torch.randn(5, 8, dtype=torch.float64)
        >>> bool(torch.allclose(op.T.to_torch(dtype=torch.float64)(x), x @ torch.from_numpy(op.to_dense())))
        True
        """
        # Through the surrogate's module: this module imports no torch code (_torch imports it).
        return self._op.to_torch(dtype=dtype, device=device).transposed()

    def factored_parts(self) -> tuple[np.ndarray, np.ndarray, Any] | None:
        parts = self._op.factored_parts()
        if parts is None:
            return None
        L, R, S = parts
        return R.T, L.T, None if S is None else S.T


def padded_rows(B: np.ndarray, rows: int) -> np.ndarray:
    """``B`` (a vector or a block, ``n`` rows) with zero rows below, up to ``rows`` (float64)."""
    B = np.asarray(B, dtype=np.float64)
    out = np.zeros((rows,) + B.shape[1:])
    out[: B.shape[0]] = B
    return out


def check_finite(name: str, what: str, *arrays: np.ndarray) -> None:
    """:class:`~sfapprox.ParameterError` (a ValueError) unless every array holds finite real numbers."""
    for a in arrays:
        if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a) or not np.all(np.isfinite(a)):
            raise ParameterError(f"{what}: {name} must hold finite real numbers")


# =============================================================================== the registry
_KINDS: dict[str, type[SurrogateOperator]] = {}


def register_operator(cls: type[SurrogateOperator]) -> type[SurrogateOperator]:
    """Make ``cls`` known to :func:`sfapprox.save_factors` and :func:`sfapprox.load_factors` (a class decorator).

    Parameters
    ----------
    cls : type
        A :class:`SurrogateOperator` subclass with ``kind``, ``layout`` and ``description`` set.

    Returns
    -------
    type
        ``cls`` itself.

    Raises
    ------
    TypeError
        For a class without a kind, layout or description, or a kind already
        registered by another class.
    """
    if not cls.kind or cls.layout not in ("parts", "root") or not cls.description:
        raise TypeError(f"{cls.__name__} needs a kind, a layout ('parts' or 'root') and a description")
    known = _KINDS.get(cls.kind)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise TypeError(f"operator kind {cls.kind!r} is registered twice ({known.__name__}, {cls.__name__})")
    _KINDS[cls.kind] = cls
    return cls


def operator_kinds() -> dict[str, type[SurrogateOperator]]:
    """Every registered operator class, by kind.

    Returns
    -------
    dict of str to type
        Kind (a factors file's ``operator`` attribute) to its :class:`SurrogateOperator` subclass.

    Examples
    --------
    >>> from sfapprox import operators
    >>> sorted(operators.operator_kinds())[:3]
    ['butterfly-padded', 'chord', 'csr']
    """
    return dict(_KINDS)


def operator_class(kind: str) -> type[SurrogateOperator] | None:
    """The class registered for ``kind`` (None when there is none).

    Parameters
    ----------
    kind : str
        A factors file's ``operator`` attribute (``"chord"``, ``"hybrid"``, ``"csr"``, ...).

    Returns
    -------
    type or None
        The :class:`SurrogateOperator` subclass, or None for an unknown kind.

    Examples
    --------
    >>> from sfapprox.operators import ChordOperator
    >>> operator_class("chord") is ChordOperator, operator_class("nope")
    (True, None)
    """
    return _KINDS.get(kind)
