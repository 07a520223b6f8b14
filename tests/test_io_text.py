"""Tests for the text readers: header-less i j v triplets and dense tables (sfapprox/io/_text.py)."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest

from _io_helpers import MTX_GENERAL, input_error, write
from sfapprox._errors import InputError, ParameterError, ResourceError
from sfapprox.io import load_matrix


# ---------------------------------------------------------------------------
# header-less i j value triplets
# ---------------------------------------------------------------------------


class TestHeaderlessTriplets:
    LOWER = "1 1 4.0\n2 1 -1.0\n2 2 4.0\n3 2 -1.0\n3 3 4.0\n"

    def test_mtx_without_header_refused_with_the_ijv_hint(self, tmp_path):
        # A file named .mtx is Matrix Market: header-less lines are never guessed.
        msg = input_error(write(tmp_path / "mesh.mtx", self.LOWER), r"line 1: no %%MatrixMarket banner")
        assert "header-less 'i j value' lines" in msg and "read them as triplets with format='ijv'" in msg

    def test_format_ijv_reads_a_headerless_mtx_mirrored(self, tmp_path):
        m = load_matrix(write(tmp_path / "mesh.mtx", self.LOWER), format="ijv")
        assert m.format == "ijv" and m.n == 3 and m.nnz == 7 and m.summary()["symmetric"]
        assert any("entries only in the lower triangle: mirrored" in n for n in m.notes)

    def test_a_nan_value_is_named_by_its_line(self, tmp_path):
        input_error(write(tmp_path / "t.ijv", "# c\n1 1 1\n\n2 2 nan\n"),
                    r"line 4: value nan is not a finite number \(1 NaN/Inf value in the file\)")

    def test_semicolon_separated_triplets_are_read_with_their_decimal_commas(self, tmp_path):
        """'1;1;1' (a decimal-comma locale's spreadsheet) was refused as 'got 1 fields'."""
        m = load_matrix(write(tmp_path / "s.ijv", "1;1;1\n2;2;0,5;\n1;2;3\n"), mirror="none")
        np.testing.assert_array_equal(m.to_dense(), [[1, 3], [0, 0.5]])
        assert "semicolon-separated, 1 number written with a decimal comma (1,5) read as 1.5" in m.notes
        m = load_matrix(write(tmp_path / "p.ijv", "1;1;1\n2;2;2\n"))
        assert "fields separated by ';'" in m.notes and m.nnz == 2
        input_error(write(tmp_path / "m.ijv", "1;1;1\n2 2 3\n"),
                    r"line 2: .* got 1 field: '2 2 3'; the first line's fields are separated by ';'")  # (was '1 fields')
        input_error(write(tmp_path / "c.ijv", "1 1 1\n2 2 0,5\n"), r"got 4 fields.*pass decimal=',' where it is a "
                    r"decimal comma \(or separate the fields with ';'")

    def test_mirror_none_keeps_triangle(self, tmp_path):
        m = load_matrix(write(tmp_path / "mesh.mtx", self.LOWER), format="ijv", mirror="none")
        assert m.nnz == 5 and not m.summary()["symmetric"]

    def test_mirror_refused_for_matrix_market(self, tmp_path):
        with pytest.raises(ParameterError, match="mirror= applies to header-less triplet files"):
            load_matrix(write(tmp_path / "g.mtx", MTX_GENERAL), mirror="none")

    def test_mirror_forced_on_general(self, tmp_path):
        m = load_matrix(write(tmp_path / "g.ijv", "1 2 1\n3 1 2\n"), mirror="mirror")
        np.testing.assert_array_equal(m.to_dense(), [[0, 1, 2], [1, 0, 0], [2, 0, 0]])

    def test_mirror_auto_keeps_general(self, tmp_path):
        m = load_matrix(write(tmp_path / "g.ijv", "1 2 1\n3 1 2\n"))
        assert m.nnz == 2 and not any("mirrored" in n for n in m.notes)

    def test_upper_triangle_mirrored(self, tmp_path):
        m = load_matrix(write(tmp_path / "u.coo", "1 2 5\n1 3 6\n"))
        assert m.nnz == 4 and any("upper triangle" in n for n in m.notes)

    def test_pattern_zero_based_and_duplicates_summed(self, tmp_path):
        m = load_matrix(write(tmp_path / "e.edges", "# edge list\n0 1\n1 2\n0 1\n"), mirror="none")
        np.testing.assert_array_equal(m.to_dense(), [[0, 2, 0], [0, 0, 1], [0, 0, 0]])
        text = " ".join(m.notes)
        assert "0-based" in text and "pattern" in text and "1 repeated entry summed" in text

    @pytest.mark.parametrize(
        "text, match",
        [
            ("1 2 3\n1 2 3 4\n", "line 2: expected 'i j' or 'i j value'"),
            ("1 2 3\n2 1\n", "line 2 has 2 fields but line 1 has 3"),
            ("1 2\n2\n", "line 2: expected 'i j' or 'i j value', got 1 field: '2'"),  # (was '1 fields')
            ("1 2 3\n2 x 1\n", "line 2, column 2: non-numeric cell 'x'"),
            ("1.5 2 3\n", "line 1: indices must be non-negative integers"),
            ("-1 2 3\n", "indices must be non-negative"),
            ("% only comments\n", "no entries"),
        ],
    )
    def test_malformed_ijv_refused(self, tmp_path, text, match):
        input_error(write(tmp_path / "t.ijv", text), match)

    def test_lower_triangle_mesh_mirrored_nnz(self, tmp_path):
        # mesh2e1 is 1162 lower-triangle lines -> 2018 entries; a small analogue here.
        i, j = np.tril_indices(10)
        lines = "".join(f"{a + 1} {b + 1} {a + b + 1}\n" for a, b in zip(i, j))
        m = load_matrix(write(tmp_path / "m.mtx", lines), format="ijv")
        assert m.nnz == 100


def test_ijv_reads_a_matrix_market_file_as_what_it_declares(tmp_path):
    # Read as triplets, the size line "3 3 3" would become an entry.
    m = load_matrix(write(tmp_path / "m.ijv", MTX_GENERAL))
    assert m.format == "mtx" and m.nnz == 3 and "read as Matrix Market" in m.notes[0]
    assert load_matrix(write(tmp_path / "m.txt", MTX_GENERAL), format="ijv").nnz == 3


@pytest.mark.parametrize("banner", ["%%MatrixMarkt matrix coordinate real general", "% matrix market coordinate real"])
def test_ijv_refuses_a_damaged_matrix_market_banner(tmp_path, banner):
    input_error(write(tmp_path / "m.ijv", f"{banner}\n3 3 3\n1 1 1\n2 2 1\n3 3 1\n"),
                r"damaged Matrix Market banner .* its size line would become an entry")


def test_ijv_comment_mentioning_a_matrix_is_a_comment(tmp_path):
    m = load_matrix(write(tmp_path / "m.ijv", "% matrix of distances, general\n1 2 1.5\n2 1 1.5\n"))
    assert m.format == "ijv" and m.nnz == 2


# ---------------------------------------------------------------------------
# dense text
# ---------------------------------------------------------------------------


class TestDenseText:
    def test_csv_header_row_skipped(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", "a,b\n1,2\n3,4\n"))
        assert m.format == "csv" and isinstance(m.matrix, np.ndarray)
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])
        assert any("header" in n for n in m.notes)

    @pytest.mark.parametrize("first", ["NA,1,2", '"NA",1,2', "1,null,2", "1,2,N/A"])
    def test_first_row_with_a_missing_value_is_data_not_a_header(self, tmp_path, first):
        """A first row whose only non-numbers are missing values is data: the missing cell is named (it
        was dropped as a header, and the square table then said only "not square (2 x 3)")."""
        col = 1 + first.split(",").index(next(c for c in first.split(",") if not c.strip('"').isdigit()))
        msg = input_error(write(tmp_path / "m.csv", first + "\n3,4,5\n6,7,8\n"),
                          rf"line 1, column {col}: missing value")
        assert "fill the missing ones in" in msg

    def test_missing_value_in_a_later_row_named_as_such(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2\n3,NA\n"), r"line 2, column 2: missing value 'NA'")

    def test_header_that_leaves_one_row_short_says_so(self, tmp_path):
        """Dropping a first row read as a header left a table one row short of square: the message says
        which row went and what to do if it is data."""
        msg = input_error(write(tmp_path / "m.csv", "x,1,2\n3,4,5\n6,7,8\n"),
                          r"not square \(2 x 3\) once its first row \(x, 1, 2\) is read as a header")
        assert "write its cells as numbers" in msg

    def test_header_of_labels_with_a_missing_token_still_a_header(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", "Na,K\n1,2\n3,4\n"))  # sodium and potassium
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])

    def test_csv_row_and_column_labels_skipped(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", ",x,y\nx,1,0.5\ny,0.5,1\n"))
        np.testing.assert_array_equal(m.matrix, [[1, 0.5], [0.5, 1]])

    def test_tsv_and_whitespace_separated(self, tmp_path):
        assert load_matrix(write(tmp_path / "m.tsv", "1\t2\n3\t4\n")).n == 2
        m = load_matrix(write(tmp_path / "m.txt", "# comment\n1  2 \n\n 3 4\n"))
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])

    def test_gzipped_csv_loads(self, tmp_path):
        p = tmp_path / "m.csv.gz"
        p.write_bytes(gzip.compress(b"1,2\n3,4\n"))
        m = load_matrix(p)
        assert (m.name, m.n) == ("m", 2)

    def test_corrupt_gzipped_csv_refused(self, tmp_path):
        p = tmp_path / "m.csv.gz"
        p.write_bytes(b"\x1f\x8b\x08garbage")
        input_error(p, "not a valid gzip file")

    def test_non_numeric_cell_refused(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2,3\n4,five,6\n7,8,9\n"), r"line 2, column 2: non-numeric cell 'five'")

    def test_ragged_row_refused(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2,3\n4,5\n7,8,9\n"), r"line 2 has 2 fields, expected 3")
        input_error(write(tmp_path / "o.csv", "1,2,3\n4\n7,8,9\n"), r"line 2 has 1 field, expected 3")  # (was '1 fields')

    def test_empty_cell_refused(self, tmp_path):
        msg = input_error(write(tmp_path / "m.csv", "1,2\n3,\n"), r"line 2, column 2: missing value ''")
        assert "fill the missing ones in" in msg  # an empty cell is a missing value, as 'NA' is

    @pytest.mark.parametrize("name, text", [("m.csv", "1,2,\n3,4,\n"), ("m.tsv", "1\t2\t\n3\t4\t\n"),
                                            ("h.csv", "x,y,\n1,2,\n3,4,\n")])
    def test_a_trailing_delimiter_on_every_row_is_read(self, tmp_path, name, text):
        """Its empty last cell made the first row of data a header: a table written with a delimiter
        after each value was refused as "not square (1 x 2) once its first row (1, 2, ) is read as a
        header", though the rows drop that cell."""
        m = load_matrix(write(tmp_path / name, text))
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])
        assert any("header" in note for note in m.notes) == name.startswith("h")

    def test_an_empty_cell_in_the_first_row_is_named_not_read_as_a_header(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,,5\n3,4,5\n6,7,8\n"), r"line 1, column 2: missing value ''")

    @pytest.mark.parametrize("cell", ["10%", "0x1", "1st"])
    def test_a_first_row_taken_for_a_header_by_a_cell_that_is_no_number_says_which(self, tmp_path, cell):
        """Not "a word": the cell that made the first row a header is named, in the refusal and in the note."""
        msg = input_error(write(tmp_path / "m.csv", f"{cell},2\n3,4\n"),
                          rf"not square \(1 x 2\) once its first row \({cell}, 2\) is read as a header "
                          rf"\(a cell '{cell}' that is not a number made it one\)")
        assert "a word" not in msg and "plain numbers (0.1, not 10%; 1, not 0x1)" in msg
        m = load_matrix(write(tmp_path / "s.csv", f"x,{cell}\n1,2\n3,4\n"))  # a word too: the note is as it was
        assert m.notes == [f"first row is a header (skipped): x, {cell}"]
        m = load_matrix(write(tmp_path / "t.csv", f"{cell},2\n1,2\n3,4\n"))
        assert m.notes == [f"first row is a header (skipped): {cell}, 2; found a cell '{cell}' that is not a number"]
        input_error(write(tmp_path / "w.csv", "a,2\n3,4\n"), r"\(a, 2\) is read as a header; a first row with a word")

    def test_nan_cell_refused_with_its_position(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "1,2\nnan,4\n"),
                    r"line 2, column 1: 'nan' is not a finite number \(1 NaN/Inf cell in the table\)")

    @pytest.mark.parametrize("name, text, where", [
        # the file's line (past a comment, the header, a blank line) and 1-based column, as other cells are named
        ("h.csv", "# made by hand\na,b,c\n1,2,3\n\n4,nan,6\n7,8,9\n", "line 5, column 2: 'nan'"),
        ("p.txt", "% c\n1 2 3\n4 5 6\n7 8 1e999\n", "line 4, column 3: '1e999'"),  # slow path (a % comment)
        ("l.csv", ",a,b\nr1,1,2\n# c\nr2,-inf,4\n", "line 4, column 2: '-inf'"),  # its row label is column 1
        ("s.csv", "a;b\n1;2\n3;NaN\n", "line 3, column 2: 'NaN'"),
    ])
    def test_a_nan_or_inf_cell_is_named_by_its_line_and_column(self, tmp_path, name, text, where):
        input_error(write(tmp_path / name, text), re.escape(where) + " is not a finite number")
        if name == "h.csv":  # a table read for its covariance too
            input_error(tmp_path / name, re.escape(where), covariance=True)

    def test_not_square_suggests_covariance(self, tmp_path):
        msg = input_error(write(tmp_path / "m.csv", "1,2,3\n4,5,6\n"), r"not square \(2 x 3\)")
        assert "covariance" in msg

    def test_binary_file_refused(self, tmp_path):
        p = tmp_path / "m.csv"
        p.write_bytes(bytes(range(256)) * 4)
        input_error(p, "binary file")

    def test_latin1_header_decodes(self, tmp_path):
        p = tmp_path / "m.csv"
        p.write_bytes("caf\xe9,b\n1,2\n3,4\n".encode("latin-1"))
        assert load_matrix(p).n == 2

    def test_header_row_only_refused(self, tmp_path):
        input_error(write(tmp_path / "m.csv", "a,b\n"), "only a header row")


def test_csv_fast_and_slow_paths_agree(tmp_path):
    from sfapprox.io._text import _fast_table

    assert _fast_table(["1,2", "3,4"], ",").tolist() == [[1, 2], [3, 4]]
    assert _fast_table(["1,2", "3"], ",") is None  # ragged: the slow path names the line
    m = load_matrix(write(tmp_path / "q.csv", '"1",2\n3,"4"\n'))
    np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])


class TestHardening:
    """Bounds checked before parsing, and inputs scipy's readers would misread."""

    def test_text_parsing_cost_refused_before_splitting(self, tmp_path):
        p = write(tmp_path / "long.txt", "1\n" * 5000)
        with pytest.raises(ResourceError, match=r"parsing 5,001 lines of text .* max_memory= if"):
            load_matrix(p, max_memory=100_000)

    def test_ijv_index_beyond_int64_refused_before_cast(self, tmp_path):
        with pytest.raises(ResourceError, match="beyond the supported maximum"):
            load_matrix(write(tmp_path / "t.ijv", "1e20 1 1.0\n"))
        input_error(write(tmp_path / "u.ijv", "inf 1 1.0\n"), "non-negative integers")


def test_python_only_number_syntax_is_not_a_number(tmp_path):
    """``1_000`` read as 1000 and Arabic-Indic digits as numbers (Python's float() syntax); the Matrix Market
    reader refuses them, and a thousands separator is a guess, as ``1,000`` is."""
    from sfapprox._errors import InputError
    from sfapprox.io import load_matrix

    for text, cell in (("1,2\n3,1_000\n", "1_000"), ("1,2\n\u0663,4\n", "\u0663")):
        path = tmp_path / "t.csv"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=f"non-numeric cell '{cell}'"):
            load_matrix(path)


# ---------------------------------------------------------------------------
# numbers as other tools write them
# ---------------------------------------------------------------------------


class TestWrittenNumbers:
    @pytest.mark.parametrize("name, text, where", [
        ("m.csv", "1.000;2\n3;4\n", "line 1, column 1: '1.000'"),
        ("h.csv", "# from a spreadsheet\na;b\n1;2\n3;-12.500\n", "line 4, column 2: '-12.500'"),
        ("q.csv", '"1.000";2\n3;4\n', "line 1, column 1: '1.000'"),
        ("t.ijv", "1;1;1\n2;2;2.250\n", "line 2, column 3: '2.250'"),
    ])
    def test_a_semicolon_file_whose_points_may_separate_thousands_is_refused(self, tmp_path, name, text, where):
        """In a ';' file (a decimal-comma locale's), '1.000' may be a thousand: it was read as 1.0 without a word."""
        msg = input_error(write(tmp_path / name, text),
                          re.escape(where) + r" is ambiguous in a semicolon-separated file: a decimal point \(")
        assert "or a thousands separator" in msg and "write the numbers without them" in msg

    @pytest.mark.parametrize("text, value, note", [
        ("1.000;2.5\n3;4\n", 1.0, "('1.000' as 1, as '2.5' writes one)"),
        ("1.000;0.500\n3;4\n", 1.0, "('1.000' as 1, as '0.500' writes one)"),
        ("1.000;2\n3;1.5e3\n", 1.0, "('1.000' as 1, as '1.5e3' writes one)"),
    ])
    def test_a_semicolon_file_with_a_decimal_point_elsewhere_is_read_with_a_note(self, tmp_path, text, value, note):
        m = load_matrix(write(tmp_path / "m.csv", text))
        assert m.matrix[0, 0] == value
        assert m.notes == [f"semicolon-separated: points read as decimal points {note}"]

    def test_points_of_a_comma_file_are_decimal_points_as_before(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", "1.000,2\n3,4\n"))
        assert m.matrix[0, 0] == 1.0 and m.notes == []

    @pytest.mark.parametrize("text, expected", [
        ("1;2\n3;4\n", [[1, 2], [3, 4]]),
        ("1,5;2\n3;-4,25\n", [[1.5, 2], [3, -4.25]]),
        ("a;b\r\n0,5;1,5E+01\r\n3;4\r\n", [[0.5, 15], [3, 4]]),
        ('"x";"y"\n"0,5";2\n3;4\n', [[0.5, 2], [3, 4]]),
    ])
    def test_a_semicolon_csv_is_read_with_its_decimal_commas(self, tmp_path, text, expected):
        """Spreadsheets of decimal-comma locales write CSV with ';' between cells: it was refused as
        "non-numeric cell '3;4'" (its first row taken for a header), the decimal commas unread."""
        m = load_matrix(write(tmp_path / "m.csv", text))
        np.testing.assert_array_equal(m.matrix, expected)
        assert any("decimal comma" in n for n in m.notes) == ("," in text)

    @pytest.mark.parametrize("text, match", [
        ("1,000;2\n3;4\n", r"line 1, column 1: '1,000' is ambiguous: a decimal comma \(1\.000\) or a thousands "
                           r"separator \(1000\)\?; write numbers with a decimal point"),
        ("1,5;2\n3;1.000\n", r"line 2, column 2: '1\.000' has a decimal point, but this semicolon-separated file "
                             r"writes decimal commas"),
    ])
    def test_a_semicolon_csv_comma_that_may_be_a_thousands_separator_is_refused(self, tmp_path, text, match):
        input_error(write(tmp_path / "m.csv", text), match)

    @pytest.mark.parametrize("text, cell", [('"1,5",2\n3,4\n', "1,5"), ('"1,000",2\n3,4\n', "1,000"),
                                            ('1,2\n"3,000.5",4\n', "3,000.5")])
    def test_a_comma_number_in_a_comma_csv_is_named_not_taken_for_a_header(self, tmp_path, text, cell):
        """A quoted "1,5" or "1,000" in the first row made it a header ("a first row with a word in it"),
        and the table "not square": the cell is named, with what to do."""
        msg = input_error(write(tmp_path / "m.csv", text), rf"line \d, column 1: number '{cell}' written with a comma")
        assert "header" not in msg and "write numbers with a decimal point and no thousands separators" in msg

    @pytest.mark.parametrize("name, text", [("m.csv", "1.0D+00,2\n3,4.0d0\n"), ("m.txt", "0.1D+01 2\n3 .4Q+01\n"),
                                            ("m.tsv", "x\ty\n1.0D0\t2\n3\t4\n")])
    def test_fortran_exponents_are_read(self, tmp_path, name, text):
        """Fortran writes 1.0D+00; its first row was taken for a header and the table refused as not square."""
        m = load_matrix(write(tmp_path / name, text))
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])
        assert any("Fortran exponent" in n for n in m.notes)

    def test_fortran_exponents_in_triplets_are_read(self, tmp_path):
        m = load_matrix(write(tmp_path / "t.ijv", "1 1 1.5D+00\n2 2 -2d-1\n"))
        np.testing.assert_array_equal(m.to_dense(), [[1.5, 0], [0, -0.2]])

    def test_a_decimal_comma_in_triplets_is_named(self, tmp_path):
        input_error(write(tmp_path / "t.ijv", "1 1 0,5\n2 2 1\n"),
                    r"line 1: expected 'i j' or 'i j value', got 4 fields: '1 1 0,5'; a comma separates fields here")

    def test_an_empty_first_cell_of_data_is_a_missing_value_not_a_header_corner(self, tmp_path):
        """The empty corner of a labelled table made a first row ',2' a header: "not square once its first
        row (, 2) is read as a header ... with a word in it", though it has none."""
        input_error(write(tmp_path / "m.csv", ",2\n3,4\n"), r"line 1, column 1: missing value ''")
        m = load_matrix(write(tmp_path / "l.csv", ",1,2\na,0.5,0.25\nb,3,4\n"))  # numbered columns, labelled rows
        np.testing.assert_array_equal(m.matrix, [[0.5, 0.25], [3, 4]])


def test_triplets_say_which_base_their_indices_were_read_in(tmp_path):
    """1-based unless an index 0 appears: a 0-based file whose vertex 0 has no entries reads shifted,
    which was said only for the 0-based reading."""
    one = load_matrix(write(tmp_path / "a.ijv", "1 2 1\n2 1 1\n"))
    assert "no index 0 appears: indices read as 1-based" in one.notes and one.n == 2
    zero = load_matrix(write(tmp_path / "b.ijv", "0 1 1\n1 0 1\n"))
    assert "an index 0 appears: indices read as 0-based" in zero.notes and zero.n == 2


@pytest.mark.parametrize("text", ["x;y,z\n1,2\n3,4\n", "x;y,z;w\n1,2\n3,4\n"])
def test_a_header_with_a_semicolon_over_comma_rows_is_a_comma_csv(tmp_path, text):
    """The delimiter was decided by the first line alone: one ';' in a column's name made the whole file
    ';'-separated ("matrix is not square (2 x 1)", "non-numeric cell 'r1,1,2'")."""
    np.testing.assert_array_equal(load_matrix(write(tmp_path / "h.csv", text)).to_dense(), [[1, 2], [3, 4]])


def test_the_delimiter_is_found_from_the_first_lines_only():
    """Finding the first line split every line of the file (0.8 s of a 180 MB CSV's reading)."""
    from sfapprox.io._text import _leading_lines

    class Counted(str):
        cut = 0

        def __getitem__(self, key):
            Counted.cut = max(Counted.cut, len(str.__getitem__(self, key)))
            return str.__getitem__(self, key)

    text = Counted("# a comment\n\n" + "1,2\n" * 1_000_000)
    assert _leading_lines(text, 2) == ["1,2", "1,2"]
    assert Counted.cut <= 1 << 16


# ---------------------------------------------------------------------------
# .txt/.dat tables separated by ';' or ','
# ---------------------------------------------------------------------------


class TestBlankTableSeparators:
    @pytest.mark.parametrize("name", ["m.txt", "m.dat", "m.txt.gz"])
    @pytest.mark.parametrize("text, expected", [
        ("1;1;1\n2;2;2\n3;3;3\n", [[1, 1, 1], [2, 2, 2], [3, 3, 3]]),
        ("a;b\n1,5;2\n3;-4,25\n", [[1.5, 2], [3, -4.25]]),
        ("1;2;\n3;4;\n", [[1, 2], [3, 4]]),
    ])
    def test_a_semicolon_txt_is_read_with_a_note(self, tmp_path, name, text, expected):
        """Read with blanks, '1;1;1' was a header and line 2 "non-numeric cell '2;2;2'", no word of the ';'."""
        path = tmp_path / name
        path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
        m = load_matrix(path)
        np.testing.assert_array_equal(m.matrix, expected)
        assert m.notes[0] == "cells separated by ';', as its data lines show (not by blanks)"
        assert any("decimal comma" in n for n in m.notes) == ("," in text)

    @pytest.mark.parametrize("text, expected", [
        ("1,2,3\n4,5,6\n7,8,9\n", [[1, 2, 3], [4, 5, 6], [7, 8, 9]]),
        ("0.5,2.5\n3.5,4.5\n", [[0.5, 2.5], [3.5, 4.5]]),
        ("1, 2\n3, 4\n", [[1, 2], [3, 4]]),
        ("x,y\n1,2\n3,4\n", [[1, 2], [3, 4]]),  # one comma a row: the header's ',' tells
        ('"point x","point y"\n1,2\n3,4\n', [[1, 2], [3, 4]]),
    ])
    @pytest.mark.parametrize("name", ["m.txt", "m.dat"])
    def test_a_comma_txt_is_read_as_a_csv_with_a_note(self, tmp_path, name, text, expected):
        """A comma-separated .txt was refused as "number '1,2,3' written with a comma (a decimal comma, or a
        thousands separator?)", or its second line as "non-numeric cell '3,'"."""
        m = load_matrix(write(tmp_path / name, text))
        np.testing.assert_array_equal(m.matrix, expected)
        assert m.notes[0] == "cells separated by ',', as its data lines show (not by blanks)"

    @pytest.mark.parametrize("text, where", [("1,2\n3,4\n", "line 1: '1,2'"), ("1\n0,5\n", "line 2: '0,5'")])
    def test_one_comma_between_digits_is_refused_as_two_readings(self, tmp_path, text, where):
        """'1,2' is two cells or one number with a decimal comma: it was refused as a "number written with a
        comma (a decimal comma, or a thousands separator?)", no word of a ',' separating cells."""
        msg = input_error(write(tmp_path / "m.txt", text), re.escape(where) + r" reads as two cells separated by ',' "
                          r"or as one number with a decimal comma \(\d\.\d\): which is it\?")
        assert msg.endswith("pass decimal=',' where it is a decimal comma; where ',' separates the cells, pass "
                            "delimiter=',' or name the file .csv")

    @pytest.mark.parametrize("text", ["0,5 0,25\n0,75 1\n", "1 2,5\n3\t4,5\n"])
    def test_a_blank_table_with_decimal_commas_is_refused_as_before(self, tmp_path, text):
        input_error(write(tmp_path / "m.txt", text),
                    r"line 1, column \d: number '\d,\d+' written with a comma \(a decimal comma, or a thousands "
                    r"separator\?\)")

    def test_a_blank_table_with_separators_in_a_comment_is_read_as_before(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.txt", "# a; b, c\n1 2\n3 4  # x; y, z\n"))
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])
        assert m.notes == []

    def test_a_semicolon_txt_whose_points_may_separate_thousands_is_refused_as_a_csv_is(self, tmp_path):
        input_error(write(tmp_path / "m.dat", "1.000;2\n3;4\n"),
                    r"line 1, column 1: '1\.000' is ambiguous in a semicolon-separated file")


@pytest.mark.parametrize("text", ["1,000,000\n2,000,000\n", "1,250,375\n4,500,600\n7,800,900\n"])
def test_a_txt_line_that_reads_as_one_number_with_thousands_separators_is_refused(tmp_path, text):
    """A .txt whose lines are '1,000,000' was read as three cells a row (1, 0, 0), silently: a one-column
    table of thousands-separated numbers became a table of three columns."""
    msg = input_error(write(tmp_path / "g.txt", text), r"reads as cells separated by ',' or as one number with "
                                                      r"thousands separators")
    assert "name the file .csv" in msg


def test_a_header_over_grouped_looking_cells_says_they_are_cells(tmp_path):
    """With a header of as many ','-separated names, '1,000,000' is three cells."""
    path = write(tmp_path / "h.txt", "x,y,z\n1,000,000\n2,000,000\n3,000,000\n")
    np.testing.assert_array_equal(load_matrix(path).to_dense(), [[1, 0, 0], [2, 0, 0], [3, 0, 0]])


def test_counts_in_notes_separate_thousands(tmp_path):
    """"size 1499 x 1499", "1200 repeated entries summed" and "1 numbers written with a decimal comma" beside
    tables printing 1,499: thousands separated, one number in the singular."""
    body = "".join(f"{i} {i} 1\n" for i in range(1, 1500)) + "1 1 1\n" * 1200
    m = load_matrix(write(tmp_path / "m.ijv", body))
    assert "size 1,499 x 1,499 taken from the largest index" in m.notes, m.notes
    assert "1,200 repeated entries summed" in m.notes, m.notes
    comma = load_matrix(write(tmp_path / "c.csv", "1;2,5\n3;4\n"))
    assert "semicolon-separated, 1 number written with a decimal comma (1,5) read as 1.5" in comma.notes, comma.notes


def test_a_semicolon_table_without_a_value_a_thousands_point_could_write_is_not_searched(tmp_path, monkeypatch):
    """Every ';' file's lines were joined and searched for '1.000'-like cells (1.0 s of a 20 MB table's
    1.5 s reading); a parsed table with no value 1 <= |v| < 1,000 in whole thousandths holds none."""
    from sfapprox.io import _text

    class Watched:
        searched = 0

        def __init__(self, pattern):
            self.pattern = pattern

        def search(self, text):
            Watched.searched += 1
            return self.pattern.search(text)

    monkeypatch.setattr(_text, "_AMBIGUOUS_POINT", Watched(_text._AMBIGUOUS_POINT))
    np.testing.assert_array_equal(load_matrix(write(tmp_path / "a.csv", "0.125;1.500001\n3.257143;0\n")).matrix,
                                  [[0.125, 1.500001], [3.257143, 0]])
    assert Watched.searched == 0
    with pytest.raises(InputError, match="'2.000' is ambiguous"):  # a value it may have written: searched
        load_matrix(write(tmp_path / "b.csv", "2.000;1\n1;2.000\n"))
    assert Watched.searched == 1


def test_pandas_default_csv_is_read_without_its_index(tmp_path):
    """pandas' DataFrame.to_csv() writes an empty corner, column names 0, 1, ... and its index: the header
    was taken for data and refused as "missing value ''" (advice to fill a cell that is a corner)."""
    m = load_matrix(write(tmp_path / "p.csv", ",0,1,2\n0,1,2,3\n1,2,1,0\n2,3,0,1\n"))
    np.testing.assert_array_equal(m.matrix, [[1, 2, 3], [2, 1, 0], [3, 0, 1]])
    assert any("pandas' row index" in note for note in m.notes)
    input_error(write(tmp_path / "n.csv", ",0,1\n0,1,nan\n1,2,1\n"), r"line 2, column 3: 'nan'")


class TestDelimiterAndDecimal:
    """``delimiter=`` and ``decimal=`` settle what detection refuses as two readings (pandas' ``sep=`` and
    ``decimal=``): a spreadsheet's ``1.000;2.500`` could only be rewritten, a ``.txt`` ``1,2`` renamed."""

    def test_decimal_point_reads_a_semicolon_file_refused_as_ambiguous(self, tmp_path):
        path = write(tmp_path / "m.csv", "1.000;2.500\n2.500;1.000\n")
        msg = input_error(path, r"'1\.000' is ambiguous in a semicolon-separated file")
        assert "pass decimal='.' where the points are decimal points" in msg
        m = load_matrix(path, decimal=".")
        np.testing.assert_array_equal(m.matrix, [[1.0, 2.5], [2.5, 1.0]])
        assert m.notes == ["numbers read with a decimal point, as decimal='.' says (not detected)"]

    def test_decimal_comma_reads_a_comma_refused_as_a_thousands_separator(self, tmp_path):
        path = write(tmp_path / "m.csv", "1,000;2,5\n2,5;1,000\n")
        assert "pass decimal=','" in input_error(path, r"'1,000' is ambiguous: a decimal comma")
        np.testing.assert_array_equal(load_matrix(path, decimal=",").matrix, [[1.0, 2.5], [2.5, 1.0]])

    def test_decimal_comma_refuses_a_cell_with_a_point_it_would_have_read(self, tmp_path):
        """numpy's fast parse read '1.000' as 1.0 whatever the decimal mark said."""
        with pytest.raises(InputError, match=r"line 1, column 1: '1\.000' has a point, but decimal=',' says"):
            load_matrix(write(tmp_path / "m.csv", "1.000;2\n2;1\n"), decimal=",")

    @pytest.mark.parametrize("options, expected", [
        ({"delimiter": ","}, [[1, 2], [2, 1]]),
        ({"decimal": "."}, [[1, 2], [2, 1]]),
    ])
    def test_a_txt_one_comma_line_reads_as_cells_when_told(self, tmp_path, options, expected):
        path = write(tmp_path / "m.txt", "1,2\n2,1\n")
        input_error(path, r"reads as two cells separated by ',' or as one number with a decimal comma")
        np.testing.assert_array_equal(load_matrix(path, **options).matrix, expected)

    def test_a_blank_txt_of_decimal_commas_reads_with_decimal_comma(self, tmp_path):
        path = write(tmp_path / "m.txt", "0,5 1\n1 0,25\n")
        m = load_matrix(path, decimal=",")
        np.testing.assert_array_equal(m.matrix, [[0.5, 1], [1, 0.25]])
        assert "2 numbers written with a decimal comma (1,5) read as 1.5" in m.notes  # (not "semicolon-separated")

    @pytest.mark.parametrize("delimiter", ["\t", "tab", "\\t"])
    def test_a_given_delimiter_splits_the_cells(self, tmp_path, delimiter):
        m = load_matrix(write(tmp_path / "m.csv", "1\t2\n3\t4\n"), delimiter=delimiter)
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])
        assert m.notes == [f"cells separated by tabs, as delimiter={delimiter!r} says (not detected)"]

    def test_whitespace_delimiter_reads_a_csv_of_blanks(self, tmp_path):
        m = load_matrix(write(tmp_path / "m.csv", "1 2\n3 4\n"), delimiter="whitespace")
        np.testing.assert_array_equal(m.matrix, [[1, 2], [3, 4]])

    @pytest.mark.parametrize("options, match", [
        ({"delimiter": "|"}, r"delimiter='\|' is not a delimiter sfapprox reads"),
        ({"decimal": ";"}, r"decimal=';' is not a decimal mark: decimal='\.' \(a point\) or decimal=',' \(a comma\)"),
        ({"delimiter": ",", "decimal": ","}, r"decimal=',' and delimiter=',' name the same character"),
        ({"delimiter": 1}, r"delimiter=1 is not a delimiter"),
    ])
    def test_nonsense_is_refused_before_the_file_is_read(self, tmp_path, options, match):
        with pytest.raises(ParameterError, match=match):
            load_matrix(tmp_path / "absent.csv", **options)

    def test_a_format_without_delimiter_refuses_it(self, tmp_path):
        path = write(tmp_path / "m.mtx", MTX_GENERAL)
        for option in ({"delimiter": ","}, {"decimal": "."}):
            (name, value), = option.items()
            with pytest.raises(ParameterError, match=re.escape(f"option {name}={value!r} applies to text tables "
                                                               "(.csv/.tsv/.txt/.dat) and triplet files (.ijv/.coo/"
                                                               ".edges), not 'mtx'")):
                load_matrix(path, **option)

    @pytest.mark.parametrize("text, options, said", [
        ("a;b\n1;2\n2;1\n", {"delimiter": ","}, "non-numeric cell '1;2' holds ';': the file may be separated by "
                                                  "';', not the delimiter=',' given"),
        ("1\t2\n2\t1\n", {"delimiter": ";"}, "non-numeric cell '2\\t1' holds a tab: the file may be separated "
                                              "by tabs, not the delimiter=';' given"),
        ("1;2\n2;1x\n", {"delimiter": "tab"}, "non-numeric cell '2;1x' holds ';': the file may be separated by "
                                             "';', not the delimiter='tab' given"),
        ("1,2,3\n2,1,3\n3,2,1\n", {"delimiter": ";"}, "no thousands separators (holds ',': the file may be "
                                                      "separated by ',', not the delimiter=';' given)"),
    ])
    def test_a_cell_holding_another_delimiter_says_the_given_one_may_be_wrong(self, tmp_path, text, options, said):
        """``delimiter=','`` forced on a ';'-separated file said "non-numeric cell '2;1'": right, but silent
        about its cause, the delimiter given."""
        with pytest.raises(InputError) as caught:
            load_matrix(write(tmp_path / "m.csv", text), **options)
        assert said in str(caught.value), caught.value

    @pytest.mark.parametrize("delimiter", ["tab", "whitespace"])
    def test_a_decimal_comma_under_a_delimiter_given_suggests_decimal_comma(self, tmp_path, delimiter):
        """``delimiter='tab'`` on a ``1,5`` cell said "write numbers with a decimal point" and that the file
        may be separated by ',', but not the likely fix: ``decimal=','``."""
        marks = {"tab": "\t", "whitespace": " "}[delimiter]
        with pytest.raises(InputError) as caught:
            load_matrix(write(tmp_path / "m.csv", f"1{marks}2\n2{marks}1,5\n"), delimiter=delimiter)
        assert ("number '1,5' written with a comma (a decimal comma, or a thousands separator?); pass decimal=',' "
                "if the commas are decimal commas, or write numbers with a decimal point") in str(caught.value), \
            caught.value

    def test_a_cell_holding_a_delimiter_is_not_blamed_on_a_detected_one_nor_on_a_decimal_comma(self, tmp_path):
        with pytest.raises(InputError) as caught:
            load_matrix(write(tmp_path / "m.tsv", "1\t2\n2\t1;x\n"))
        assert str(caught.value).endswith("non-numeric cell '1;x'"), caught.value
        with pytest.raises(InputError) as caught:  # (its comma is the decimal comma given)
            load_matrix(write(tmp_path / "m.csv", "1;2\n2;1,5x\n"), delimiter=";", decimal=",")
        assert str(caught.value).endswith("non-numeric cell '1,5x'"), caught.value

    @pytest.mark.parametrize("read", ["load_matrix", "read_points"])
    @pytest.mark.parametrize("text, options, said, unsaid", [
        # a comma-separated file read with decimal commas: its cells are one '1.5,2' each
        ("1.5,2\n3,4\n", {"decimal": ","}, "line 1, column 1: '1.5,2' has a point, but decimal=',' says numbers are "
         "written with a decimal comma (1,5); where ',' separates the cells, leave decimal= out", "decimal point"),
        ("1,2,3\n2,1,3\n3,2,1\n", {"decimal": ","}, "'1,2,3' has more than one comma, but decimal=','", "decimal point"),
        ("1,2,3\n2,1,3\n3,2,1\n", {"decimal": ",", "delimiter": ";"}, "where ',' separates the cells, pass "
         "delimiter=',' and leave decimal= out", "decimal point"),
        # a ';' file of decimal commas read with decimal points
        ("1,5;2\n3;4,5\n", {"decimal": "."}, "line 1, column 1: number '1,5' has a comma, but decimal='.' says "
         "numbers are written with a decimal point; pass decimal=',' if the commas are decimal commas", "write numbers"),
    ])
    def test_a_refused_number_names_the_decimal_mark_given_not_advice_against_it(self, tmp_path, read, text, options,
                                                                                 said, unsaid):
        """``decimal=','`` on ``1.5,2`` was told "write numbers with a decimal point": advice against the option
        given, silent about it; as was ``decimal='.'`` on a ';' file of ``1,5``."""
        from sfapprox.io import read_points

        with pytest.raises(InputError) as caught:
            {"load_matrix": load_matrix, "read_points": read_points}[read](write(tmp_path / "m.csv", text), **options)
        assert said in str(caught.value) and unsaid not in str(caught.value), caught.value

    @pytest.mark.parametrize("name, text", [
        ("m.tsv", "1\t2e3\n-3\t4\n"),
        ("m.txt", "# a comment\n1 2e3\n-3 4\n"),
        ("m.ijv", "1 1 1\n1 2 2e3\n2 1 -3\n2 2 4\n"),
    ])
    def test_decimal_comma_on_a_table_without_comma_or_point_takes_numpy_s_parse(self, tmp_path, monkeypatch, name,
                                                                                   text):
        """decimal=',' sent every table to the slow path (~10x slower, and held to its larger memory check),
        though numpy reads a table with no ',' (and no '.', which it would read where a point is refused) alike."""
        from sfapprox.io import _text

        path = write(tmp_path / name, text)
        detected = load_matrix(path, mirror="none") if name.endswith(".ijv") else load_matrix(path)
        fast = {"_fast_table": 0, "_fast_triplets": 0}
        for spied in fast:
            def spy(*args, _parse=getattr(_text, spied), _name=spied, **kwargs):
                result = _parse(*args, **kwargs)
                fast[_name] += result is not None
                return result
            monkeypatch.setattr(_text, spied, spy)
        monkeypatch.setattr(_text, "_slow_table", None)  # (not called: a call is a TypeError)
        monkeypatch.setattr(_text, "_slow_triplets", None)
        given = load_matrix(path, decimal=",", **({"mirror": "none"} if name.endswith(".ijv") else {}))
        np.testing.assert_array_equal(given.to_dense(), detected.to_dense())
        assert sum(fast.values()) == 1
        assert "numbers read with a decimal comma, as decimal=',' says (not detected)" in given.notes

    def test_decimal_comma_on_a_table_with_a_point_is_still_refused_by_the_slow_path(self, tmp_path):
        input_error(write(tmp_path / "m.tsv", "1\t2.5\n3\t4\n"), r"'2\.5' has a point, but decimal=','",
                    decimal=",")

    def test_without_the_options_detection_is_unchanged(self, tmp_path):
        path = write(tmp_path / "m.csv", "1,5;2\n2;1\n")
        assert load_matrix(path).matrix.tolist() == load_matrix(path, decimal=",", delimiter=";").matrix.tolist()


class TestTripletDelimiterAndDecimal:
    """Triplet files take ``delimiter=`` and ``decimal=`` as text tables do: they were refused ("applies to csv
    files"), and a blank-separated ``1 2 0,5`` could not be read at all."""

    @pytest.mark.parametrize("text, options", [
        ("1 1 1\n1 2 0,5\n", {"decimal": ","}),
        ("1\t1\t1\n1\t2\t0,5\n", {"delimiter": "tab", "decimal": ","}),
        ("1 1 1\n1 2 0,5\n", {"delimiter": "whitespace", "decimal": ","}),
        ("1,1,1\n1,2,0.5\n", {"delimiter": ","}),
        ("1;1;1\n1;2;0,5\n", {"delimiter": ";"}),
        ("1;1;1\n1;2;0.5\n", {"delimiter": ";", "decimal": "."}),
    ])
    def test_the_given_marks_read_them(self, tmp_path, text, options):
        m = load_matrix(write(tmp_path / "t.ijv", text), mirror="none", **options)
        np.testing.assert_array_equal(m.to_dense(), [[1, 0.5], [0, 0]])
        for name, value in options.items():
            assert any(f"as {name}={value!r} says (not detected)" in note for note in m.notes), m.notes

    @pytest.mark.parametrize("text, options, said", [
        ("1 1 1\n1 2 0.5\n", {"decimal": ","}, "line 2, column 3: '0.5' has a point, but decimal=',' says"),
        ("1,1,1\n1,2,0.5\n", {"decimal": ","}, "got 1 field: '1,1,1'; a comma separates no fields with decimal=',' "
                                              "(it is the decimal mark): where ',' separates the fields, leave decimal= out"),
        ("1 1 1\n1 2 0,5\n", {"decimal": "."}, "got 4 fields: '1 2 0,5'; a comma separates fields here, as "
                                              "decimal='.' has no decimal commas"),
        ("1;1;1\n1;2;1,5\n", {"decimal": "."}, "line 2, column 3: number '1,5' has a comma, but decimal='.' says"),
        ("1,1,1\n1,2,0.5\n", {"delimiter": ";"}, "got 1 field: '1,1,1'; its fields are split at the delimiter=';' "
                                                "given, but it holds ',': is the file separated by ','?"),
        ("1 1 1\n", {"delimiter": ","}, "its fields are split at the delimiter=',' given, but it holds blanks"),
        # numpy's parse of a ';' file read '1.000' as 1.0: refused as where ';' is detected
        ("1;1;1\n1;2;1.000\n", {"delimiter": ";"}, "'1.000' is ambiguous in a semicolon-separated file"),
        ("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n", {"decimal": "."},
         "decimal='.' applies to header-less triplets, but the file has a Matrix Market banner"),
    ])
    def test_a_refusal_names_the_marks_given(self, tmp_path, text, options, said):
        with pytest.raises(InputError) as caught:
            load_matrix(write(tmp_path / "t.ijv", text), **options)
        assert said in str(caught.value), caught.value

    def test_a_decimal_comma_split_in_two_names_the_decimal_option(self, tmp_path):
        """'1 2 0,5' was told to separate its fields with ';', as there was no option to say what ',' is."""
        input_error(write(tmp_path / "t.ijv", "1 1 1\n1 2 0,5\n"), r"got 4 fields: '1 2 0,5'; a comma separates fields "
                    r"here: pass decimal=',' where it is a decimal comma")

    def test_a_decimal_point_given_reads_what_a_semicolon_file_refuses(self, tmp_path):
        path = write(tmp_path / "t.ijv", "1;1;1\n1;2;1.000\n")
        input_error(path, r"'1\.000' is ambiguous")
        assert load_matrix(path, decimal=".", mirror="none").to_dense().tolist() == [[1, 1], [0, 0]]


def test_a_text_option_for_a_covariance_npy_names_only_the_tables_a_covariance_reads(tmp_path):
    # the refusal named triplet files, which a samples x features table never is (a kernel's refusal did not)
    import numpy as np

    from sfapprox import ParameterError
    from sfapprox.io import load_matrix

    path = tmp_path / "samples.npy"
    np.save(path, np.random.default_rng(0).standard_normal((6, 3)))
    with pytest.raises(ParameterError, match=r"applies to text tables \(\.csv/\.tsv/\.txt/\.dat\), not 'npy'") as err:
        load_matrix(path, covariance=True, decimal=",")
    assert "triplet" not in str(err.value)


# ---------------------------------------------------------------------------
# the text marks a matrix's recipe records
# ---------------------------------------------------------------------------


def test_a_table_read_with_text_marks_records_them_in_its_recipe_and_reads_again_by_them(tmp_path):
    """A result of a ';'-separated decimal-comma table recorded its recipe without the --delimiter and
    --decimal it was read with: it could not say how to read its matrix again.  The marks given are
    recorded (a tab under one name) and read the same matrix again; marks left to detection are not, so a
    file read as before records what it recorded before."""
    from sfapprox._settings import TEXT_MARKS

    table = write(tmp_path / "t.txt", "1,5;2\n3;4,25\n")
    loaded = load_matrix(table, delimiter=";", decimal=",")
    assert loaded.recipe == loaded.summary()["recipe"] == {"covariance": False, "delimiter": ";", "decimal": ","}
    again = load_matrix(table, **{k: loaded.recipe[k] for k in TEXT_MARKS})
    assert np.array_equal(again.matrix, loaded.matrix) and again.matrix[0, 0] == 1.5
    tabbed = write(tmp_path / "t.tsv", "1\t2\n3\t4\n")
    assert load_matrix(tabbed, delimiter="\t").recipe == load_matrix(tabbed, delimiter="tab").recipe == {
        "covariance": False, "delimiter": "tab"}
    assert load_matrix(tabbed).recipe == {"covariance": False}  # detected: as before
    assert load_matrix(write(tmp_path / "s.csv", "1,5;2\n3;4\n")).recipe == {"covariance": False}
    triplets = write(tmp_path / "t.ijv", "1;1;0,5\n2;2;2\n")
    assert load_matrix(triplets, delimiter=";", decimal=",").recipe == {"mirror": "none", "delimiter": ";",
                                                                        "decimal": ","}
    samples = write(tmp_path / "p.csv", "1,5;2\n3;4\n5;7\n")
    assert load_matrix(samples, covariance=True, decimal=",").recipe == {"covariance": True, "decimal": ","}


# -- the memory a read is checked for (benchmarks/results/text_memory.md) ----------------------------------


def _read_csv(path):
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._text import read_csv

    return read_csv(Source(path), DEFAULTS)


def _square_csv(path, n: int, cell, odd: str | None = None):
    rng = np.random.default_rng(0)
    rows = [[cell(rng) for _ in range(n)] for _ in range(n)]
    if odd is not None:
        rows[n // 2][0] = odd
    return write(path, "".join(",".join(row) + "\n" for row in rows))


def test_a_0_1_table_is_checked_for_its_peak(tmp_path, monkeypatch):
    """A 0/1 CSV's table is 4 times its text: each check alone (read_text's 4 bytes a byte, the table's 8 a
    cell) was about half the read's peak, which a limit between them let through."""
    from _io_helpers import peak_and_checks

    path = _square_csv(tmp_path / "a.csv", 300, lambda rng: str(rng.integers(0, 2)))
    peak, _, checked = peak_and_checks(monkeypatch, _read_csv, path)
    assert peak <= checked < 1.5 * peak, (peak, checked)


def test_numpy_s_parse_of_a_table_is_within_its_cells_count():
    """numpy 2.5's loadtxt holds its table twice at its peak (2.4's once): counted 14 bytes a cell, a 0/1
    CSV's read peaked over its check on Python 3.12 and 3.13 (numpy 2.5 there).  The parse's own peak a
    cell is within the count on the numpy at hand."""
    import tracemalloc

    from sfapprox.io._text import _TABLE_CELL_BYTES, _fast_table

    lines = [",".join("01"[(i + j) % 2] for j in range(200)) for i in range(500)]
    tracemalloc.start()
    try:
        table = _fast_table(lines, ",")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert table.shape == (500, 200)
    assert peak <= _TABLE_CELL_BYTES * table.size, peak / table.size


@pytest.mark.parametrize("comment, wider", [("# caf\u00e9", False), ("# 5 \u20ac", True), ("# \U0001f600", True)])
def test_a_latin_1_character_is_checked_as_the_one_byte_a_str_holds(tmp_path, monkeypatch, comment, wider):
    """One non-ASCII byte counted 4 bytes a character for the whole text: a 0/1 CSV with "café" in a comment
    was refused at 1.6 times its peak (a str of Latin-1 text holds 1 a character).  Wider characters (the
    euro sign: 2; an emoji: 4) are still counted as such."""
    from _io_helpers import peak_and_checks

    cells = _square_csv(tmp_path / "plain.csv", 200, lambda rng: str(rng.integers(0, 2))).read_text()
    plain = peak_and_checks(monkeypatch, _read_csv, tmp_path / "plain.csv")
    marked = peak_and_checks(monkeypatch, _read_csv, write(tmp_path / "marked.csv", comment + "\n" + cells))
    assert marked[0] <= marked[2], marked  # the peak within the check
    assert (marked[1] > 1.3 * plain[1]) == wider, (plain, marked)  # read_text's estimate


def test_a_latin_1_file_s_table_is_checked_for_the_one_byte_a_character_its_str_holds(tmp_path, monkeypatch):
    """A file that is not UTF-8 is read as Latin-1, 1 byte a character in its str; the table's check counted
    its text again from the bytes, whose lead bytes (\xe9 of "é") said 2, where read_text's own check had
    counted it before decoding: the same check as an ASCII text of as many bytes now."""
    import sfapprox.io._text as text_reader

    checks = {}
    real = text_reader.check_memory

    def check_memory(n_bytes, *, what, **kwargs):
        checks.setdefault(name, []).append(n_bytes)
        return real(n_bytes, what=what, **kwargs)

    monkeypatch.setattr(text_reader, "check_memory", check_memory)
    table = "1,2\n3,4\n"
    for name, comment in (("ascii", b"e"), ("latin-1", b"\xe9")):
        path = tmp_path / f"{name}.csv"
        path.write_bytes(b"# caf" + comment * 10_000 + b"\n" + table.encode())
        _read_csv(path)
    assert checks["latin-1"] == checks["ascii"], checks


def test_a_table_read_row_by_row_is_checked_for_its_peak(tmp_path, monkeypatch):
    """A cell the row-by-row path reads (a Fortran exponent) sends the whole table there: its check of 80
    bytes a cell left out the text and lines held, about a quarter of its peak."""
    from _io_helpers import peak_and_checks

    path = _square_csv(tmp_path / "a.csv", 200, lambda rng: f"{rng.standard_normal():.6g}", odd="1.0D+00")
    peak, _, checked = peak_and_checks(monkeypatch, _read_csv, path)
    assert peak <= checked < 1.5 * peak, (peak, checked)


def test_triplets_are_checked_for_their_peak_not_four_times_their_text(tmp_path, monkeypatch):
    """read_text's old estimate (4 bytes a byte, 300 a line) was 2.6 times a triplet file's peak; the
    triplets' own (:func:`triplets_cost`) covers it, mirrored or not, within a margin."""
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._text import read_ijv

    rng = np.random.default_rng(0)
    i, j = rng.integers(1, 2001, 20_000), rng.integers(1, 2001, 20_000)
    for name, (a, b) in {"t.ijv": (i, j), "lower.ijv": (np.maximum(i, j), np.minimum(i, j))}.items():
        path = write(tmp_path / name, "".join(f"{x} {y} {w:.6g}\n" for x, y, w in zip(a, b, rng.random(20_000))))
        peak, estimate, _ = peak_and_checks(monkeypatch, lambda p: read_ijv(Source(p), DEFAULTS), path)
        assert peak <= estimate < 1.6 * peak, (name, peak, estimate)


@pytest.mark.parametrize("name, text", [("a.csv", "0.25,1\n" * 3000), ("a.ijv", "1 2 0.5\n" * 3000)])
def test_a_text_over_its_estimate_is_refused_before_parsing(tmp_path, name, text):
    """A limit over the file but under its parse's estimate: refused by read_text, in one line."""
    path = write(tmp_path / name, text)
    with pytest.raises(ResourceError, match=r"^\S+: parsing 3,001 lines of text \(\d+\.\d KiB\) needs about") as refused:
        load_matrix(path, max_memory=2 * len(text))
    assert "\n" not in str(refused.value)
