"""Tests for the Harwell-Boeing / Rutherford-Boeing reader (sfapprox/io/_hb.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from _io_helpers import input_error, write
from sfapprox._errors import ResourceError
from sfapprox.io import load_matrix


def _sym_fixture():
    A = sp.random(6, 6, density=0.4, random_state=np.random.default_rng(1), format="csc")
    return (A + A.T + sp.eye(6)).tocsc()


class TestHarwellBoeing:
    def test_rua_roundtrip_stays_sparse(self, tmp_path):
        A = sp.random(5, 5, density=0.5, random_state=np.random.default_rng(0), format="csc")
        p = tmp_path / "m.rua"
        scipy.io.hb_write(str(p), A)
        m = load_matrix(p)
        assert m.format == "hb" and m.is_sparse
        np.testing.assert_allclose(m.to_dense(), A.toarray())

    def test_rsa_lower_triangle_expanded(self, tmp_path):
        A = _sym_fixture()
        p = tmp_path / "s.rsa"
        scipy.io.hb_write(str(p), sp.tril(A).tocsc())
        text = p.read_text().splitlines(keepends=True)
        text[2] = "RSA" + text[2][3:]  # hb_write only writes RUA; symmetric files store one triangle
        p.write_text("".join(text))
        m = load_matrix(p)
        np.testing.assert_allclose(m.to_dense(), A.toarray())
        assert any("symmetric storage expanded" in n for n in m.notes)

    def test_rza_skew_symmetric_expanded(self, tmp_path):
        p = tmp_path / "k.rb"
        scipy.io.hb_write(str(p), sp.csc_matrix(np.array([[0, 0.0], [3.0, 0]])))
        text = p.read_text().splitlines(keepends=True)
        text[2] = "RZA" + text[2][3:]
        p.write_text("".join(text))
        np.testing.assert_allclose(load_matrix(p).to_dense(), [[0, -3], [3, 0]])

    @pytest.mark.parametrize("mxtype, match", [("CUA", "complex"), ("PUA", "pattern-only"), ("RUE", "elemental"), ("XYZ", "unknown matrix type")])
    def test_unsupported_matrix_types_refused(self, tmp_path, mxtype, match):
        p = tmp_path / "m.rua"
        scipy.io.hb_write(str(p), sp.csc_matrix(np.eye(3)))
        text = p.read_text().splitlines(keepends=True)
        text[2] = mxtype + text[2][3:]
        p.write_text("".join(text))
        input_error(p, match)

    def test_hb_not_square_refused(self, tmp_path):
        p = tmp_path / "r.rua"
        scipy.io.hb_write(str(p), sp.csc_matrix(np.ones((2, 3))))
        input_error(p, r"not square \(2 x 3\)")

    def test_hb_garbage_header_refused(self, tmp_path):
        input_error(write(tmp_path / "g.hb", "just\nsome\ntext here\nand more\n"), "not a Harwell-Boeing file")

    def test_truncated_body_refused(self, tmp_path):
        p = tmp_path / "t.rua"
        scipy.io.hb_write(str(p), sp.random(8, 8, density=0.5, random_state=np.random.default_rng(2), format="csc"))
        lines = p.read_text().splitlines(keepends=True)
        p.write_text("".join(lines[:-2]))
        input_error(p, r"file is truncated: it holds fewer row indices or values than line 3 declares nonzeros")


def _written(tmp_path) -> tuple[str, np.ndarray]:
    A = np.array([[1.5, 2.0], [0.0, -4.0]])
    path = tmp_path / "w.rua"
    scipy.io.hb_write(str(path), sp.csc_matrix(A))
    return path.read_text(), A


@pytest.mark.parametrize("where", ["format and values", "values"])
def test_fortran_d_exponents_are_read(tmp_path, where):
    """Fortran writes double precision as (3D25.16) and 1.5D+00: scipy's reader raised its
    BadFortranFormat (a SyntaxError) through as a traceback, or 'unmatched data' for the values."""
    text, A = _written(tmp_path)
    lines = text.splitlines(keepends=True)
    if where == "format and values":
        lines[3] = lines[3].replace("E25.16", "D25.16")
    text = "".join(lines[:4]) + "".join(lines[4:]).replace("E+00", "D+00")
    m = load_matrix(write(tmp_path / "d.rua", text))
    np.testing.assert_array_equal(m.to_dense(), A)
    assert any("Fortran 'D' exponent" in n for n in m.notes)


def test_an_unknown_fortran_format_is_one_line(tmp_path):
    text, _ = _written(tmp_path)
    lines = text.splitlines(keepends=True)
    lines[3] = lines[3].replace("(3E25.16)", "(3Z25.16)")
    input_error(write(tmp_path / "z.rua", "".join(lines)), r"z\.rua: line 4: unreadable Fortran format")


def test_crlf_line_ends_read_without_a_warning(tmp_path, recwarn):
    """A CR left on the fixed-width title line overflowed its key field: scipy's LineOverflow warning."""
    text, A = _written(tmp_path)
    np.testing.assert_array_equal(load_matrix(write(tmp_path / "c.rua", text.replace("\n", "\r\n"))).to_dense(), A)
    assert not [str(w.message) for w in recwarn]


@pytest.mark.parametrize("cut", ["lines", "characters"])
def test_a_truncated_file_is_said_to_be_one(tmp_path, cut):
    """scipy said "indices and data should have the same size" of a file cut short."""
    text, _ = _written(tmp_path)
    short = "".join(text.splitlines(keepends=True)[:-1]) if cut == "lines" else text[:-30]
    msg = input_error(write(tmp_path / "t.rua", short), r"t\.rua: file is truncated")
    assert "copy or write it again" in msg


def test_a_header_that_declares_more_value_lines_than_the_file_has_is_read_when_every_value_is_there(tmp_path):
    """A check added with the Fortran exponents refused every file whose line 2 (VALCRD) declared more
    lines than it has, though scipy reads such a file whole when its values are all there."""
    text, A = _written(tmp_path)
    lines = text.splitlines(keepends=True)
    valcrd = int(lines[1][42:56])
    lines[1] = lines[1][:42] + f"{valcrd + 2:14d}" + lines[1][56:]
    np.testing.assert_array_equal(load_matrix(write(tmp_path / "over.rua", "".join(lines))).to_dense(), A)


def test_a_memory_refusal_separates_thousands(tmp_path):
    """"sparse 2000 x 2000 matrix with 1234567 stored entries" beside tables printing 1,234,567 (refused
    from the header's counts, before the values are read)."""
    p = tmp_path / "m.rua"
    scipy.io.hb_write(str(p), sp.csc_array(np.eye(3)))
    lines = p.read_text().splitlines(keepends=True)
    lines[2] = f"RUA{2000:>25}{2000:>14}{1234567:>14}{0:>14}\n"
    p.write_text("".join(lines))
    with pytest.raises(ResourceError, match=r"sparse 2,000 x 2,000 matrix with 1,234,567 stored entries needs"):
        load_matrix(p, max_memory=32 * 2**20)  # the dense form fits (30.5 MiB), the entries not


# -- the memory a read is checked for (benchmarks/results/text_memory.md) ----------------------------------


@pytest.mark.parametrize("kind", ["RUA", "RSA"])
def test_a_read_is_checked_for_its_peak(tmp_path, monkeypatch, kind):
    """scipy's reader was handed the text in an io.StringIO (4 bytes a character) after two more copies of
    it: 9.8 times the file's bytes, over read_text's 4 a byte and 300 a line; the lines are now joined once,
    the text let go first, and read by slices (about 4 times), within the estimate (:func:`hb_cost`)."""
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._hb import read_hb

    A = sp.random(2000, 2000, density=0.01, random_state=np.random.default_rng(0), format="csc")
    if kind == "RSA":
        A = sp.csc_matrix(sp.tril(A + A.T))
    path = tmp_path / f"a.{kind.lower()}"
    scipy.io.hb_write(str(path), sp.csc_matrix(A))
    if kind == "RSA":
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join([*lines[:2], "RSA" + lines[2][3:], *lines[3:]]))
    peak, estimate, _ = peak_and_checks(monkeypatch, lambda p: read_hb(Source(p), DEFAULTS), path)
    assert peak <= estimate < 1.6 * peak, (peak, estimate)
    M = load_matrix(path).matrix  # the same matrix as scipy reads (the triangle expanded)
    full = A + sp.tril(A, -1).T if kind == "RSA" else A
    assert abs(sp.csr_array(M) - sp.csr_array(full)).max() < 1e-12


def test_a_file_over_its_estimate_is_refused_before_parsing(tmp_path):
    A = sp.random(300, 300, density=0.05, random_state=np.random.default_rng(1), format="csc")
    path = tmp_path / "a.rua"
    scipy.io.hb_write(str(path), A)
    with pytest.raises(ResourceError, match=r"^\S+a\.rua: parsing [\d,]+ lines of text .* needs about"):
        load_matrix(path, max_memory=2 * path.stat().st_size)
