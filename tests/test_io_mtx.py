"""Tests for the Matrix Market reader (sfapprox/io/_mtx.py)."""

from __future__ import annotations

import gzip
import hashlib
import os
import re

import numpy as np
import pytest
import scipy.sparse as sp

from _io_helpers import MTX_GENERAL, input_error, write
from sfapprox._errors import ResourceError
from sfapprox.io import load_matrix


class TestMatrixMarket:
    def test_general_stays_sparse(self, tmp_path):
        m = load_matrix(write(tmp_path / "g.mtx", MTX_GENERAL))
        assert isinstance(m.matrix, sp.csr_array) and m.notes == []

    def test_symmetric_expanded_with_note(self, tmp_path):
        p = write(tmp_path / "s.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 2\n2 1 -1\n3 2 -1\n")
        m = load_matrix(p)
        assert m.nnz == 5 and m.summary()["symmetric"]
        assert "symmetric storage expanded: 3 stored -> 5 entries" in m.notes

    def test_skew_symmetric_expanded_negated(self, tmp_path):
        p = write(tmp_path / "k.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n")
        np.testing.assert_array_equal(load_matrix(p).to_dense(), [[0, -3], [3, 0]])

    def test_pattern_read_as_ones_and_integer_as_float64(self, tmp_path):
        p = write(tmp_path / "p.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n")
        m = load_matrix(p)
        np.testing.assert_array_equal(m.to_dense(), [[0, 1], [1, 0]])
        assert any("pattern" in n for n in m.notes)
        q = write(tmp_path / "i.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 7\n")
        assert load_matrix(q).matrix.dtype == np.float64

    def test_array_format_read_column_major(self, tmp_path):
        p = write(tmp_path / "a.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n")
        m = load_matrix(p)
        assert isinstance(m.matrix, np.ndarray)
        np.testing.assert_array_equal(m.matrix, [[1, 3], [2, 4]])  # column-major

    def test_gzipped_mtx_named_without_suffix_hash_of_compressed_bytes(self, tmp_path):
        p = tmp_path / "foo.mtx.gz"
        p.write_bytes(gzip.compress(MTX_GENERAL.encode()))
        m = load_matrix(p)
        assert (m.name, m.format, m.nnz) == ("foo", "mtx", 3)
        assert m.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()

    def test_corrupt_gzipped_mtx_refused(self, tmp_path):
        p = tmp_path / "bad.mtx.gz"
        p.write_bytes(b"this is not gzip at all")
        input_error(p, "not a valid gzip file")

    def test_truncated_gzipped_mtx_refused(self, tmp_path):
        p = tmp_path / "trunc.mtx.gz"
        p.write_bytes(gzip.compress((MTX_GENERAL * 200).encode())[:60])
        input_error(p, "not a valid gzip file")

    def test_complex_field_refused(self, tmp_path):
        p = write(tmp_path / "c.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 2\n")
        input_error(p, "complex matrices are not supported")

    @pytest.mark.parametrize("symmetry", ["general", "hermitian"])
    def test_complex_field_refusal_says_what_to_do(self, tmp_path, symmetry):
        p = write(tmp_path / "h.mtx", f"%%MatrixMarket matrix coordinate complex {symmetry}\n2 2 1\n2 1 1 2\n")
        input_error(p, r"complex matrices are not supported \(only real, integer and pattern fields\); write its "
                       r"real part \(or its absolute values\) to a real Matrix Market file")

    def test_not_square_refused_from_header(self, tmp_path):
        p = write(tmp_path / "r.mtx", "%%MatrixMarket matrix coordinate real general\n3 5 1\n1 1 1\n")
        input_error(p, r"not square \(3 x 5\)")

    @pytest.mark.parametrize(
        "body, match",
        [
            ("3 3 2\n1 1 1.0\n4 2 2.0\n", "out of bounds"),
            ("3 3 3\n1 1 1.0\n2 2 2.0\n", "Truncated"),
            ("3 3 1\n1 1 1\n2 2 2\n", "Too many lines"),
            ("3 3 1\n1 1 abc\n", "Invalid"),
            ("3 3 1\n0 1 1\n", "out of bounds"),
        ],
    )
    def test_malformed_body_refused(self, tmp_path, body, match):
        p = write(tmp_path / "b.mtx", "%%MatrixMarket matrix coordinate real general\n" + body)
        input_error(p, match)

    @pytest.mark.parametrize(
        "text, said",
        [
            # header and body comment lines and a blank line counted; the first bad entry in the file's order
            ("%%MatrixMarket matrix coordinate real general\n% c\n3 3 3\n1 1 1\n\n% c\n3 2 nan\n2 2 inf\n",
             "line 7: the value 'nan' of the entry at row 3, column 2 is not a finite number (2 NaN/Inf values"),
            # CRLF line ends; a symmetric file's entry as written, not its mirror
            ("%%MatrixMarket matrix coordinate real symmetric\r\n4 4 3\r\n2 1 1\r\n4 2 2\r\n4 1 -inf\r\n",
             "line 5: the value '-inf' of the entry at row 4, column 1 is not a finite number (1 NaN/Inf value "),
            # array files, column by column: all of it, the lower triangle, below the diagonal
            ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n1e999\n",
             "line 6: the value '1e999' of the entry at row 2, column 2 "),
            ("%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\nnan % x\n6\n",
             "line 7: the value 'nan' of the entry at row 3, column 2 "),
            ("%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\nnan\n",
             "line 5: the value 'nan' of the entry at row 3, column 2 "),
        ],
    )
    def test_nan_entry_refused_by_its_line_and_position_as_written(self, tmp_path, text, said):
        """As the text readers name a bad cell: the file's line and 1-based row and column (it was numpy's
        0-based index, '[2, 1]', from the matrix's check)."""
        p = tmp_path / "n.mtx"
        p.write_bytes(text.encode())
        assert said in input_error(p, "is not a finite number")
        z = tmp_path / "n.mtx.gz"  # read from canonical bytes, not the file's map
        z.write_bytes(gzip.compress(text.encode()))
        assert said in input_error(z, "is not a finite number")

    def test_finite_file_never_looks_for_a_line(self, tmp_path, monkeypatch):
        """The line of a bad entry is found only to say it: a clean file is summed once, not scanned again."""
        from sfapprox.io import _mtx

        monkeypatch.setattr(_mtx, "_entry_line", lambda *a: pytest.fail("a line was looked for"))
        assert load_matrix(write(tmp_path / "g.mtx", MTX_GENERAL)).nnz == 3
        big = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1e308\n2 2 1e308\n"  # sum overflows
        input_error(write(tmp_path / "b.mtx", big), "values too large")  # (refused later, by the matrix's check)

    def test_array_over_memory_refused(self, tmp_path):
        p = write(tmp_path / "big.mtx", "%%MatrixMarket matrix array real general\n1000 1000\n1\n")
        with pytest.raises(ResourceError, match="max_memory= if"):
            load_matrix(p, max_memory=10**6)

    def test_huge_header_refused_before_reading(self, tmp_path):
        p = write(tmp_path / "huge.mtx", "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1\n1 1 1\n")
        with pytest.raises(ResourceError, match="beyond the supported maximum"):
            load_matrix(p)

    def test_big_coordinate_stays_sparse(self, tmp_path):
        # Dense would be 8e10 bytes; the coordinate file is tiny and stays sparse
        # when the limit leaves room for the dense form every method needs.
        p = write(tmp_path / "wide.mtx", "%%MatrixMarket matrix coordinate real general\n100000 100000 2\n1 1 1\n100000 5 2\n")
        m = load_matrix(p, max_memory=10**11)
        assert m.is_sparse and m.n == 100000 and m.nnz == 2

    def test_order_whose_dense_form_exceeds_the_limit_refused_from_header(self, tmp_path):
        p = write(tmp_path / "wide.mtx", "%%MatrixMarket matrix coordinate real general\n100000 100000 2\n1 1 1\n100000 5 2\n")
        with pytest.raises(ResourceError, match=r"wide.mtx: matrix of order 100,000 in its dense form \(a matrix read "
                                                r"from this format must fit dense; a .npy too big for that is read by "
                                                r"columns instead\) needs about 74.5 GiB, over the memory limit of 9.5 MiB"):
            load_matrix(p, max_memory=10**7)

    def test_garbage_first_line_refused_as_not_matrix_market(self, tmp_path):
        input_error(write(tmp_path / "junk.mtx", "hello world\n"), "not a Matrix Market file")


class TestHardening:
    """Bounds checked before parsing, and inputs scipy's readers would misread."""

    def test_file_size_checked_before_reading(self, tmp_path):
        text = "%%MatrixMarket matrix coordinate real general\n" + "%" * 300 + "\n2 2 1\n1 1 1.0"  # no final newline
        with pytest.raises(ResourceError, match="reading the file"):
            load_matrix(write(tmp_path / "big.mtx", text), max_memory=200)

    def test_no_final_newline_loads(self, tmp_path):
        p = write(tmp_path / "m.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1")
        np.testing.assert_array_equal(load_matrix(p).to_dense(), [[0, 1, 0], [0, 0, 0], [1, 0, 0]])

    def test_value_in_a_pattern_file_refused(self, tmp_path):
        # scipy drops the 7; the file contradicts its banner.
        p = write(tmp_path / "m.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1 7")
        input_error(p, r"line 4: expected 'i j' \(a pattern file has no values\), got '3 1 7'; declare the field 'real'")

    def test_integer_field_with_fraction_refused(self, tmp_path):
        p = write(tmp_path / "i.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 3\n2 2 2.5\n")
        input_error(p, r"line 4: the header declares an integer field .* '2 2 2.5'")

    def test_array_two_values_on_a_line_refused(self, tmp_path):
        p = write(tmp_path / "a.mtx", "%%MatrixMarket matrix array real general\n% two\n2 2\n1\n2\n3 4\n")
        input_error(p, r"line 6: an array-format Matrix Market file holds one value per line, got '3 4'")

    def test_empty_array_refused_from_header(self, tmp_path):
        input_error(write(tmp_path / "e.mtx", "%%MatrixMarket matrix array real general\n0 0\n"), r"empty \(0 x 0\)")

    def test_file_name_that_is_not_utf8_loads(self, tmp_path):
        """scipy got the path and passed it on as UTF-8 text, which a Latin-1 byte in the name cannot
        be: "cannot parse file (TypeError: open_read_file(): incompatible function arguments ...)"."""
        name = tmp_path / os.fsdecode(b"ok_caf\xe9.mtx")
        try:
            name.write_text(MTX_GENERAL)
        except (OSError, UnicodeError):
            pytest.skip("this file system refuses a file name that is not UTF-8")
        expected = load_matrix(write(tmp_path / "ok.mtx", MTX_GENERAL)).to_dense()
        np.testing.assert_array_equal(load_matrix(name).to_dense(), expected)
        gz = tmp_path / os.fsdecode(b"ok_caf\xe9.mtx.gz")
        gz.write_bytes(gzip.compress(MTX_GENERAL.encode()))
        np.testing.assert_array_equal(load_matrix(gz).to_dense(), expected)
        with pytest.raises(ResourceError):  # the checks before scipy reads it still apply
            load_matrix(name, max_memory=100)
        input_error(write(name, MTX_GENERAL.replace("-2", "-2x")), r"line 4: Invalid floating-point value")

    def test_size_line_beyond_int64_refused(self, tmp_path):
        p = write(tmp_path / "o.mtx", "%%MatrixMarket matrix coordinate real general\n9223372036854775808\n")
        input_error(p, r"line 2: Invalid integer size line '9223372036854775808'")


def test_a_compressed_dense_file_is_refused_when_its_text_copies_and_parse_are_over_the_limit(tmp_path):
    """A compressed (or non-canonical) file is parsed from canonical bytes rewritten from its text: the
    text, its copies and the array are checked once the text's size is known (the header's check counts
    only the array; a 3,000 x 3,000 .mtx.gz peaked at 6.6 arrays against it)."""
    import io

    import scipy.io

    # (large enough that decompressing it, 1.125 its text and 2 MB of buffers, fits the limit below)
    X = np.random.default_rng(0).random((600, 600))
    buffer = io.BytesIO()
    scipy.io.mmwrite(buffer, X)
    text = buffer.getvalue()
    path = tmp_path / "x.mtx.gz"
    path.write_bytes(gzip.compress(text))
    array = X.nbytes
    need = 3 * len(text) + 2 * array
    assert 2 * array < need // 2  # the header's own check passes the limit below
    with pytest.raises(ResourceError, match=r"x\.mtx\.gz: parsing .* of text into a 600 x 600 matrix"):
        load_matrix(path, max_memory=need // 2)
    np.testing.assert_allclose(load_matrix(path, max_memory=need).to_dense(), X, rtol=1e-12)
    plain = tmp_path / "x.mtx"
    plain.write_bytes(text)  # read by scipy from the open file: no copy of the text
    np.testing.assert_allclose(load_matrix(plain, max_memory=need // 2).to_dense(), X, rtol=1e-12)


def test_an_integer_beyond_64_bits_is_told_to_be_read_as_real(tmp_path):
    """scipy refuses it ('Integer out of range'); the integer field is what to change, and as real
    the same file reads."""
    text = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 100000000000000000000\n2 2 3\n"
    input_error(write(tmp_path / "big.mtx", text), r"invalid Matrix Market file \(.*\); where it is a value beyond 64 "
                                                   r"bits \(not an index\), declare the field 'real' in the first line")
    m = load_matrix(write(tmp_path / "big.mtx", text.replace("integer", "real")))
    assert m.matrix.toarray()[0, 0] == 1e20
    # a real file's values are never beyond range: no such hint
    msg = input_error(write(tmp_path / "idx.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n"
                                                  "100000000000000000000 1 3\n"), "invalid Matrix Market file|out of")
    assert "field 'real'" not in msg


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le"])
def test_utf16_matrix_market_is_refused_as_such(tmp_path, codec):
    """scipy reads a Matrix Market file's bytes, and UTF-16's are half NUL: refused as UTF-16 with what to
    do (it was "looks like a binary file, not text", which sends the user looking for the wrong problem)."""
    path = tmp_path / "u.mtx"
    path.write_bytes(MTX_GENERAL.encode(codec))
    msg = input_error(path, r"u\.mtx: is UTF-16(-LE)? text .*Matrix Market files are ASCII; save it as UTF-8")
    assert "binary" not in msg


def test_a_compressed_file_empty_inside_is_said_to_be_empty(tmp_path):
    path = tmp_path / "e.mtx.gz"
    path.write_bytes(gzip.compress(b""))
    input_error(path, r"e\.mtx\.gz: file is empty after decompression$")


@pytest.mark.parametrize("name, text, expected", [
    ("p.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 +7\n2 2 +1.5e+02\n", [[7, 0], [0, 150]]),
    ("i.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 +7\n2\t2\t-3\n", [[7, 0], [0, -3]]),
    ("a.mtx", "%%MatrixMarket matrix array real general\n2 2\n+7\n-1\n  +2\n0.5\n", [[7, 2], [-1, 0.5]]),
    ("c.mtx", "%%MatrixMarket matrix coordinate real general\r\n2 2 1\r\n1 1 +7\r\n", [[7, 0], [0, 0]]),
])
def test_a_value_with_a_plus_sign_is_read(tmp_path, name, text, expected):
    """C's strtod (the format's reference reading) and printf("%+g") take '+7': scipy refused it as an
    "Invalid floating-point value", as a plain file and rewritten alike."""
    np.testing.assert_array_equal(load_matrix(write(tmp_path / name, text)).to_dense(), expected)
    packed = tmp_path / (name + ".gz")
    packed.write_bytes(gzip.compress(text.encode()))
    np.testing.assert_array_equal(load_matrix(packed).to_dense(), expected)


@pytest.mark.parametrize("value", ["++7", "+-7", "+ 7", "+"])
def test_a_value_of_two_signs_is_refused_by_its_line_not_read(tmp_path, value):
    """Only a plus sign before a number is dropped for scipy: '+-7' was read as -7 (its '+' dropped, without a
    word) and '++7' left scipy's bare "Invalid floating-point value"; both are refused by the file's line."""
    text = f"%%MatrixMarket matrix coordinate real general\n% made by hand\n2 2 2\n1 1 1\n2 2 {value}\n"
    input_error(write(tmp_path / "s.mtx", text), rf"s\.mtx: line 5: .*, got '2 2 {re.escape(value)}'")
    packed = tmp_path / "s.mtx.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    input_error(packed, rf"line 5: .*, got '2 2 {re.escape(value)}'")


@pytest.mark.parametrize("entry", ["0 1 1.0", "3 1 1.0"])
def test_an_index_out_of_range_says_indices_are_one_based(tmp_path, entry):
    """scipy says only "Row index out of bounds": a 0-based file, or a size line that lies."""
    msg = input_error(write(tmp_path / "o.mtx", f"%%MatrixMarket matrix coordinate real general\n2 2 1\n{entry}\n"),
                      r"o\.mtx: invalid Matrix Market file \(Line 3: Row index out of bounds\); Matrix Market indices "
                      r"run from 1 to the size line's rows and columns")
    assert "add 1 to every index" in msg


@pytest.mark.parametrize("kind, size", [("coordinate", "0 0 0"), ("array", "0 0")])
def test_an_empty_matrix_says_what_to_do(tmp_path, kind, size):
    input_error(write(tmp_path / "z.mtx", f"%%MatrixMarket matrix {kind} real general\n{size}\n"),
                r"z\.mtx: matrix is empty \(0 x 0\); there is nothing to approximate: give a matrix of at least 1 x 1")


def test_counts_in_messages_and_notes_separate_thousands(tmp_path):
    """"1234567 stored entries" and "1200 repeated entries summed" beside tables printing 1,234,567;
    one repeated entry is said in the singular."""
    big = write(tmp_path / "big.mtx", "%%MatrixMarket matrix coordinate real general\n2000 2000 1234567\n1 1 1\n")
    with pytest.raises(ResourceError, match=r"sparse 2,000 x 2,000 matrix with 1,234,567 stored entries needs"):
        load_matrix(big, max_memory=40 * 2**20)
    body = "".join(f"{i} {i} 1\n" for i in range(1, 1101)) + "1 1 1\n" * 1200
    m = load_matrix(write(tmp_path / "r.mtx", f"%%MatrixMarket matrix coordinate real symmetric\n1100 1100 2300\n{body}"))
    assert "1,200 repeated entries summed" in m.notes, m.notes
    assert "symmetric storage expanded: 2,300 stored -> 1,100 entries" in m.notes, m.notes
    one = load_matrix(write(tmp_path / "one.mtx", MTX_GENERAL.replace("3 3 3", "3 3 4") + "1 1 1\n"))
    assert "1 repeated entry summed" in one.notes, one.notes


class _FindSpy(bytes):
    """Bytes that record the needles of their ``find`` calls."""

    def find(self, sub, *args):
        self.needles.append(bytes(sub))
        return super().find(sub, *args)


def test_plus_sign_scan_is_one_byte_scan_without_a_plus():
    """A body without '+' is passed by one scan for '+': the three scans for ' +', '\\t+', '\\n+' (two-byte
    needles starting with a blank, ten times slower) added 0.8 s, 20 %, to a 100 MB file's reading."""
    from sfapprox.io._mtx import _plus_signs

    data = _FindSpy(b"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.5\n2 2 1e-02\n")
    data.needles = []
    assert not _plus_signs(data, 0)
    assert data.needles == [b"+"]
    # what it finds is as before: a sign before a number, not an exponent's
    assert _plus_signs(b"1 1 +7\n", 0) and _plus_signs(b"1 1\t+.5\n", 0) and _plus_signs(b"x\n+1 1 2\n", 0)
    assert not _plus_signs(b"1 1 1e+02\n", 0)


def test_plus_sign_scan_with_exponents_is_one_find_and_one_pass(monkeypatch):
    """Exponents written '1.5e+02' put a '+' in every value: the three scans for ' +', '\\t+', '\\n+' that
    followed (0.5 s of a 124 MB file) are one pass over pairs of bytes, in blocks, from the first '+'; a sign
    is found wherever it falls against the blocks' ends, and not before ``start``."""
    from sfapprox.io import _mtx

    data = _FindSpy(b"2 2 2\n1 1 1.5e+02\n2 2 -1e+02\n")
    data.needles = []
    assert not _mtx._plus_signs(data, 5)
    assert data.needles == [b"+"]
    monkeypatch.setattr(_mtx, "_PAIR_BLOCK", 4)
    body = b"1 1 1.5e+02\n" * 3
    for at in range(len(body) + 1):
        for blank in (b" ", b"\t", b"\n"):
            signed = body[:at] + blank + b"+7" + body[at:]
            assert _mtx._plus_signs(signed, 0), (at, blank)
            assert not _mtx._plus_signs(signed, at + 1), (at, blank)  # (its blank before start)
        assert not _mtx._plus_signs(body[:at] + b"e+7" + body[at:], 0)


def test_a_matrix_market_file_reads_without_a_warning_from_scipy(tmp_path):
    """scipy 1.18's mmread warns on every read that does not say which sparse type it wants ("The default
    value for `spmatrix` is changing to `False` in v1.20"): asked for an array, where it takes the keyword."""
    import warnings

    path = tmp_path / "m.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.5\n3 2 -2\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_matrix(path)
    assert loaded.matrix.toarray().tolist() == [[1.5, 0, 0], [0, 0, 0], [0, -2, 0]]
