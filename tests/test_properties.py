"""Property tests for the text readers (Matrix Market, Pajek, CSV).

Whatever the bytes, ``load_matrix`` either returns a finite, square float64
matrix (a C-contiguous ndarray or a canonical ``csr_array``) or raises
:class:`sfapprox.SfapproxError`; never another exception, never a crash.
Inputs are both raw garbage and near-valid files (a valid header with a random
body, random headers with plausible bodies), which reach deeper into the parsers.
A 64 MiB memory limit keeps random headers from asking for real allocations;
refusing them is itself part of the contract (ResourceError is an SfapproxError).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sfapprox import SfapproxError, load_matrix

LIMIT = 64 * 2**20

#: Examples per property; raise it for a longer hunt (SFAPPROX_PROPERTY_EXAMPLES=5000).
MAX_EXAMPLES = int(os.environ.get("SFAPPROX_PROPERTY_EXAMPLES", "150"))

SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("properties")


def load_or_refuse(path, data: bytes | str, format: str):
    """Write ``data`` to ``path`` and load it; check the contract either way."""
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(data)
    try:
        loaded = load_matrix(path, format=format, max_memory=LIMIT)
    except SfapproxError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(str(path)), message
        return None
    A = loaded.matrix
    assert A.ndim == 2 and A.shape[0] == A.shape[1] >= 1
    assert A.dtype == np.float64
    if sp.issparse(A):
        assert isinstance(A, sp.csr_array) and A.has_canonical_format
        assert np.isfinite(A.data).all()
    else:
        assert isinstance(A, np.ndarray) and A.flags.c_contiguous
        assert np.isfinite(A).all()
    return loaded


# ---------------------------------------------------------------------------
# token strategies shared by the structured generators
# ---------------------------------------------------------------------------

small_int = st.integers(min_value=-3, max_value=12)
any_int = st.one_of(small_int, st.integers(min_value=-(2**40), max_value=2**63 + 5))
number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    small_int.map(str),
    st.sampled_from(["1e308", "1e309", "-1e-320", "1e200", "1e-170", "0x10", "1_000", "+.5", "-0", "nan", "inf"]),
)
junk = st.sampled_from(["", "abc", "*", "%", "#", ",", "\t", '"', "[1-*]", "\x00", "é", "1,2", ":1", "ic Red"])
token = st.one_of(number, small_int.map(str), any_int.map(str), junk)


def lines_of(tokens, max_lines: int = 12, max_tokens: int = 5):
    return st.lists(st.lists(tokens, max_size=max_tokens).map(" ".join), max_size=max_lines)


# ---------------------------------------------------------------------------
# Matrix Market
# ---------------------------------------------------------------------------

banner = st.builds(
    lambda obj, fmt, field, sym: f"%%MatrixMarket {obj} {fmt} {field} {sym}",
    st.sampled_from(["matrix", "matrix", "vector", "tensor"]),
    st.sampled_from(["coordinate", "coordinate", "array", "sparse"]),
    st.sampled_from(["real", "integer", "pattern", "complex", "double", "real"]),
    st.sampled_from(["general", "symmetric", "skew-symmetric", "hermitian", "upper"]),
)


@st.composite
def matrix_market(draw):
    """A header (mostly valid), a size line (mostly plausible) and a random body."""
    n = draw(st.integers(min_value=0, max_value=6))
    size = draw(st.one_of(
        st.just(f"{n} {n} {draw(st.integers(0, 10))}"),
        st.just(f"{n} {n}"),
        st.lists(any_int.map(str), min_size=0, max_size=4).map(" ".join),
    ))
    entry = st.builds(
        lambda i, j, v: f"{i} {j} {v}",
        st.integers(-1, n + 2), st.integers(-1, n + 2), number,
    )
    body = draw(st.lists(st.one_of(entry, entry, number, lines_of(token, 1).map("".join)), max_size=12))
    comments = draw(st.lists(st.just("% a comment"), max_size=2))
    return "\n".join([draw(banner), *comments, size, *body]) + draw(st.sampled_from(["\n", "", "\r\n"]))


@SETTINGS
@given(data=st.binary(max_size=400))
def test_mtx_garbage_bytes(workdir, data):
    load_or_refuse(workdir / "bytes.mtx", data, "mtx")


@SETTINGS
@given(data=st.text(max_size=300))
def test_mtx_garbage_text_after_banner(workdir, data):
    load_or_refuse(workdir / "text.mtx", "%%MatrixMarket matrix coordinate real general\n" + data, "mtx")


@SETTINGS
@given(text=matrix_market())
def test_mtx_structured(workdir, text):
    load_or_refuse(workdir / "structured.mtx", text, "mtx")


@SETTINGS
@given(body=lines_of(st.one_of(small_int.map(str), number), max_lines=15, max_tokens=4))
def test_mtx_headerless_triplets(workdir, body):
    # Without a banner, a .mtx is refused (never guessed to be triplets); format="ijv" reads them.
    assert load_or_refuse(workdir / "triplets.mtx", "\n".join(body), "mtx") is None
    load_or_refuse(workdir / "triplets.mtx", "\n".join(body), "ijv")


finite = st.floats(min_value=-1e100, max_value=1e100, allow_nan=False, allow_infinity=False, width=64)
spelling = st.sampled_from([repr, lambda v: f"{v:.17e}", lambda v: f"{v:.17E}", lambda v: f"{v:.17g}"])
line_end = st.sampled_from(["\n", "\r\n", "\r"])


@SETTINGS
@given(
    n=st.integers(1, 5),
    entries=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), finite, spelling), max_size=10),
    end=line_end,
    bom=st.booleans(),
    banner=st.sampled_from(["%%MatrixMarket", "%MatrixMarket", "%%matrixmarket", "  %%MatrixMarket"]),
)
def test_mtx_values_are_never_silently_wrong(workdir, n, entries, end, bom, banner):
    """Whatever the spelling and line ends, each entry is float(token), duplicates summed in float64."""
    entries = [(i % n, j % n, v, spell) for i, j, v, spell in entries]
    lines = [f"{banner} matrix coordinate real general", "% comment", f"{n} {n} {len(entries)}"]
    lines += [f"{i + 1} {j + 1} {spell(v)}" for i, j, v, spell in entries]
    text = ("\ufeff" if bom else "") + end.join(lines) + end
    expected = np.zeros((n, n))
    for i, j, v, spell in entries:
        expected[i, j] += float(spell(v))
    path = workdir / "values.mtx"
    path.write_bytes(text.encode())
    try:
        loaded = load_matrix(path, max_memory=LIMIT)
    except SfapproxError as exc:  # only the documented refusals of tiny or huge norms
        assert "values too" in str(exc) or "NaN/Inf" in str(exc), str(exc)
        return
    np.testing.assert_array_equal(loaded.to_dense(), expected)


@SETTINGS
@given(
    weights=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4),
                               st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 4))), max_size=8),
    comma=st.booleans(),
)
def test_pajek_weights_are_never_silently_wrong(workdir, weights, comma):
    """Weights written with a decimal point or a decimal comma load as written, or are refused."""
    def spell(v: float) -> str:
        text = f"{v:.4f}"
        return text.replace(".", ",") if comma else text

    lines = ["*Vertices 4", "*Arcs"] + [f"{i} {j} {spell(w)}" for i, j, w in weights]
    path = workdir / "weights.net"
    path.write_text("\n".join(lines) + "\n")
    expected = np.zeros((4, 4))
    for i, j, w in weights:
        expected[i - 1, j - 1] += float(f"{w:.4f}")
    try:
        loaded = load_matrix(path, max_memory=LIMIT)
    except SfapproxError as exc:
        assert comma and "ambiguous" in str(exc) or "values too" in str(exc), str(exc)
        return
    np.testing.assert_array_equal(loaded.to_dense(), expected)


# ---------------------------------------------------------------------------
# Pajek
# ---------------------------------------------------------------------------

keyword = st.sampled_from([
    "*Vertices", "*vertices", "*Arcs", "*Edges", "*Arcslist", "*Edgeslist", "*Matrix", "*Network x",
    "*Network [2-mode]", "*Partition p", "*Vector v", "*Arcs :2 \"rel\"", "*Unknown",
])


@st.composite
def pajek(draw):
    """'*Vertices n [n1]' then random sections and lines of vertex ids, weights and junk."""
    n = draw(st.integers(min_value=-1, max_value=6))
    first = f"*Vertices {n}" + draw(st.sampled_from(["", f" {draw(st.integers(-1, 7))}"]))
    vid = st.integers(-1, n + 2).map(str)
    line = st.one_of(
        st.builds(lambda i, j, w: f"{i} {j} {w}", vid, vid, number),
        st.builds(lambda i, j: f"{i} {j}", vid, vid),
        st.lists(vid, min_size=1, max_size=5).map(" ".join),
        st.builds(lambda i, label: f'{i} "{label}" 0.1 0.2', vid, st.text(max_size=5)),
        lines_of(token, 1).map("".join),
        keyword,
        st.builds(lambda k, m: f"{k} {m}", st.sampled_from(["*Vertices", "*Network"]), any_int),
    )
    body = draw(st.lists(line, max_size=15))
    return "\n".join([first, *body]) + "\n"


@SETTINGS
@given(data=st.binary(max_size=400))
def test_pajek_garbage_bytes(workdir, data):
    load_or_refuse(workdir / "bytes.net", data, "pajek")


@SETTINGS
@given(text=pajek())
def test_pajek_structured(workdir, text):
    load_or_refuse(workdir / "structured.net", text, "pajek")


@SETTINGS
@given(text=pajek(), two_mode=st.sampled_from(["rows", "cols", "bipartite"]))
def test_pajek_structured_two_mode(workdir, text, two_mode):
    path = workdir / "two_mode.paj"
    path.write_text(text)
    try:
        loaded = load_matrix(path, two_mode=two_mode, max_memory=LIMIT)
    except SfapproxError:
        return
    assert loaded.matrix.shape[0] == loaded.matrix.shape[1] and loaded.matrix.dtype == np.float64


# ---------------------------------------------------------------------------
# CSV / dense text
# ---------------------------------------------------------------------------


@st.composite
def table(draw):
    """Rows of random cells: mostly numbers, sometimes a header, junk, or ragged widths."""
    width = draw(st.integers(min_value=1, max_value=5))
    cell = st.one_of(number, number, number, junk, st.just('"1.5"'))
    rows = draw(st.lists(
        st.lists(cell, min_size=max(0, width - 1), max_size=width + 1), min_size=0, max_size=width + 2
    ))
    sep = draw(st.sampled_from([",", ", ", ";", "\t"]))
    header = draw(st.sampled_from([[], ["a" + sep + "b"], ["# comment"]]))
    return "\n".join(header + [sep.join(r) for r in rows]) + draw(st.sampled_from(["\n", "", "\r\n", ",\n"]))


@SETTINGS
@given(data=st.binary(max_size=300))
def test_csv_garbage_bytes(workdir, data):
    load_or_refuse(workdir / "bytes.csv", data, "csv")


@SETTINGS
@given(text=table())
def test_csv_structured(workdir, text):
    load_or_refuse(workdir / "structured.csv", text, "csv")


@SETTINGS
@given(text=table())
def test_whitespace_table_structured(workdir, text):
    load_or_refuse(workdir / "structured.txt", text.replace(",", " "), "csv")


@SETTINGS
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=16))
def test_csv_valid_square_roundtrip(workdir, values):
    """A well-formed square table loads to exactly its values (or is refused for its magnitude)."""
    n = int(np.sqrt(len(values)))
    X = np.asarray(values[: n * n]).reshape(n, n)
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in X) + "\n"
    loaded = load_or_refuse(workdir / "valid.csv", text, "csv")
    if loaded is None:
        # Only the magnitude check may refuse a well-formed table: ||X||_F**2
        # (exact, in rational arithmetic) near or outside float64's range.
        from fractions import Fraction

        squares = sum(Fraction(float(v)) ** 2 for v in X.ravel())
        assert not Fraction(1e-307) <= squares <= Fraction(4e307), X
    else:
        np.testing.assert_array_equal(loaded.matrix, X)
