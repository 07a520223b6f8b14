"""Tests for covariance tables from csv, npy and libsvm files (sfapprox/io/_covariance.py)."""

from __future__ import annotations

import numpy as np
import pytest

from _io_helpers import input_error, write
from sfapprox.io import load_matrix


class TestCovariance:
    def test_covariance_of_a_csv_table(self, tmp_path):
        rng = np.random.default_rng(0)
        T = rng.standard_normal((30, 5))
        p = tmp_path / "t.csv"
        p.write_text("a,b,c,d,e\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in T) + "\n")
        m = load_matrix(p, covariance=True)
        assert m.format == "covariance" and m.n == 5
        np.testing.assert_allclose(m.matrix, np.cov(T, rowvar=False, ddof=1))
        assert "sample covariance of 30 samples x 5 features" in m.notes

    def test_format_covariance_reads_a_text_table(self, tmp_path):
        p = write(tmp_path / "t.txt", "1 2 3\n2 4 7\n")
        assert load_matrix(p, format="covariance").n == 3

    def test_covariance_of_an_npy_table(self, tmp_path):
        p = tmp_path / "t.npy"
        T = np.arange(12.0).reshape(4, 3) ** 2
        np.save(p, T)
        np.testing.assert_allclose(load_matrix(p, covariance=True).matrix, np.cov(T, rowvar=False))

    def test_covariance_of_a_libsvm_file(self, tmp_path):
        p = write(tmp_path / "d.libsvm", "+1 1:0.5 3:2\n-1 2:1 # comment\n1 qid:3 1:1 2:2 3:3\n")
        T = np.array([[0.5, 0, 2], [0, 1, 0], [1, 2, 3]])
        m = load_matrix(p, covariance=True)
        np.testing.assert_allclose(m.matrix, np.cov(T, rowvar=False))

    def test_libsvm_without_covariance_refused(self, tmp_path):
        input_error(write(tmp_path / "d.svm", "1 1:2\n"), "covariance=True")

    def test_libsvm_bad_token_refused(self, tmp_path):
        input_error(write(tmp_path / "d.svm", "1 1:2\n1 x:3\n"), r"line 2: expected 'index:value'", covariance=True)

    def test_one_sample_refused(self, tmp_path):
        input_error(write(tmp_path / "t.csv", "a,b\n1,2\n"), "at least 2 samples", covariance=True)

    def test_nan_in_table_refused(self, tmp_path):
        input_error(write(tmp_path / "t.csv", "1,2\nnan,3\n4,5\n"), "NaN/Inf", covariance=True)

    def test_nan_in_an_npy_table_named_as_an_arrays_entry(self, tmp_path):
        """A table without lines (.npy) names its cell as an array's entry is named ('[i, j]: 0-based, as numpy
        indexes'), one cell in the singular; it was '1 NaN/Inf cells (first at row 1, col 0; 0-based)'."""
        p = tmp_path / "t.npy"
        np.save(p, np.array([[1.0, 2.0], [np.nan, 3.0], [4.0, 5.0]]))
        input_error(p, r"table has 1 NaN/Inf cell \(the first at \[1, 0\]: 0-based, as numpy indexes\); covariance "
                       r"needs complete data: replace it .* its sample \(row\)$", covariance=True)
        np.save(p, np.full((3, 1000), np.inf))
        input_error(p, r"table has 3,000 NaN/Inf cells \(the first at \[0, 0\]", covariance=True)


def test_a_wide_table_whose_covariance_is_over_the_limit_is_a_source(tmp_path):
    """open_matrix(covariance=True): formed as before when it fits, a CovarianceMatrix (by columns)
    when its N x N is over max_memory; compare then runs the column methods, scored exactly."""
    import json

    from typer.testing import CliRunner

    from sfapprox.cli import app
    from sfapprox.io import LoadedMatrix, open_matrix
    from sfapprox.sources import CovarianceMatrix

    T = np.random.default_rng(1).standard_normal((10, 400))
    p = tmp_path / "wide.csv"
    np.savetxt(p, T, delimiter=",")
    limit = 8 * 400 * 400 - 1
    assert isinstance(open_matrix(p, covariance=True), LoadedMatrix)
    source = open_matrix(p, covariance=True, max_memory=limit)
    assert isinstance(source, CovarianceMatrix) and source.name == "wide"
    np.testing.assert_allclose(source.to_dense(), np.cov(T, rowvar=False), atol=1e-12)
    res = CliRunner().invoke(app, ["compare", str(p), "--covariance", "--max-memory", str(limit),
                                   "--methods", "rsvd,nystrom", "--budget", "0.02", "--json", "-"])
    # (at SF's budget, what rsvd and Nyström keep would not fit beside their passes' blocks: refused)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{"):])
    assert out["matrix"]["path"] == "columns" and out["matrix"]["format"] == "covariance"
    assert all(r["status"] == "ok" and r["error_estimate"]["exact"] for r in out["results"])


def test_a_covariance_that_fits_is_read_once_and_is_load_matrix_s(tmp_path, monkeypatch):
    """open_matrix(covariance=True) reads the table once to size its covariance and forms it from that
    read: the same matrix, notes and provenance as load_matrix, with one read of the file."""
    import sfapprox.io._covariance as covariance_module
    from sfapprox.io import open_matrix

    p = tmp_path / "t.csv"
    p.write_text("x,y,z\n" + "\n".join(f"{i},{i * i % 7},{(3 * i) % 5}" for i in range(12)) + "\n")
    expected = load_matrix(p, covariance=True)
    reads = []
    original = covariance_module.read_table  # every table read goes through read_samples there
    monkeypatch.setattr(covariance_module, "read_table", lambda *a, **k: reads.append(1) or original(*a, **k))
    loaded = open_matrix(p, covariance=True)
    assert len(reads) == 1
    np.testing.assert_array_equal(loaded.matrix, expected.matrix)
    assert (loaded.notes, loaded.format, loaded.sha256, loaded.name) == \
        (expected.notes, expected.format, expected.sha256, expected.name)


def test_a_higher_limit_never_refuses_a_covariance_a_lower_one_runs(tmp_path):
    """The covariance was formed whenever its own 8 N^2 bytes fit the limit, and its scoring (twice more)
    then refused the run: 25M ran from columns, 40M to 150M were refused. It is formed now where it and
    its scoring fit (sources.formable, as for every source), else read by columns."""
    from sfapprox.io import open_matrix
    from sfapprox.sources import CovarianceMatrix, formable

    T = np.random.default_rng(0).standard_normal((20, 600))
    p = tmp_path / "wide.npy"
    np.save(p, T)
    own = 8 * 600 * 600
    for limit in (own // 2, own + 1, 2 * own, 3 * own, 1 << 30):
        opened = open_matrix(p, covariance=True, max_memory=limit)
        formed = not isinstance(opened, CovarianceMatrix)
        assert formed == formable(CovarianceMatrix(T), limit), limit


def _libsvm_both_ways(tmp_path, text: str, monkeypatch) -> tuple:
    """The table (or the refusal) of a LIBSVM file read whole (its features parsed in C) and line by line."""
    from sfapprox import InputError
    from sfapprox.io import _covariance
    from sfapprox.io._common import Options, Source

    path = tmp_path / "d.libsvm"
    path.write_text(text, encoding="ascii")
    said = []
    for whole in (True, False):
        with monkeypatch.context() as m:
            if not whole:
                m.setattr(_covariance, "_libsvm_arrays", lambda text: None)
            try:
                table, notes = _covariance.read_libsvm_table(Source(path), Options())
                said.append((table.shape, table.tobytes(), notes))  # (bits: a NaN equals itself)
            except InputError as exc:
                said.append(str(exc))
    return tuple(said)


def test_a_libsvm_file_read_whole_is_the_table_read_line_by_line(tmp_path, monkeypatch):
    """Features parsed in C over the whole text (MNIST's 60,000 images: 58 s and 1.3 GB line by line, one Python
    string per token) give the line-by-line reader's table, notes and refusals, whatever the file holds: index 0
    (0-based), repeated indices (added), empty samples, tabs, signs, exponents, and every odd token (qid, nan,
    hex, '1:2:3', '1.5:2', '+1:2', ':3', '4:', a token with no colon, a value of two numbers)."""
    rng = np.random.default_rng(3)
    values = ["1", "-2.5", ".5", "3.", "1e-3", "+4", "7E2", "0"]
    odd = ["qid:3", "1:nan", "1:0x10", "1:2:3", "1.5:2", "+1:2", ":3", "4:", "5", "1:1.5.5", "1:1e", "1:--1", "1e1:2"]
    for trial in range(300):
        lines = []
        for _ in range(rng.integers(1, 5)):
            tokens = [f"{rng.integers(0 if trial % 3 == 0 else 1, 7)}:{rng.choice(values)}"
                      for _ in range(rng.integers(0, 5))]
            if trial % 4 == 0 and tokens:
                tokens[rng.integers(len(tokens))] = str(rng.choice(odd))
            lines.append(("\t" if trial % 5 == 0 else " ").join([str(rng.choice(["+1", "-1", "3"]))] + tokens))
        text = "\n".join(lines + ([""] if trial % 7 == 0 else [])) + ("\n" if trial % 2 else "")
        whole, by_lines = _libsvm_both_ways(tmp_path, text, monkeypatch)
        assert whole == by_lines, text


def test_a_plain_libsvm_file_is_parsed_whole_not_token_by_token(tmp_path, monkeypatch):
    """A file of plain 'index:value' tokens never reaches the line-by-line reader's per-token parsing."""
    from sfapprox.io import _covariance

    rng = np.random.default_rng(0)
    table = rng.integers(0, 256, (50, 30)) * (rng.random((50, 30)) < 0.3)
    text = "".join(f"{i % 10} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(row) if v) + "\n"
                   for i, row in enumerate(table))
    p = write(tmp_path / "d.libsvm", text)

    def per_token(token):
        raise AssertionError(f"token {token!r} parsed on its own")

    monkeypatch.setattr(_covariance, "parse_float", per_token)
    last = int(np.nonzero(table.any(axis=0))[0].max()) + 1  # the file's last index present
    np.testing.assert_allclose(load_matrix(p, covariance=True).matrix, np.cov(table[:, :last], rowvar=False))


def test_libsvm_lines_without_a_label_keep_their_first_feature(tmp_path):
    """'1:1 2:2' has no label: its first feature was dropped as one, and the covariance was of other
    numbers, without a word."""
    table = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    m = load_matrix(write(tmp_path / "t.svm", "1:1\n+1 2:2\n1:3 2:1\n"), covariance=True)
    np.testing.assert_allclose(m.matrix, np.cov(table, rowvar=False))
    assert "LIBSVM: 2 of 3 lines have no label (their first token is a feature)" in m.notes
    m = load_matrix(write(tmp_path / "o.svm", "1:1\n+1 1:2\n"), covariance=True)  # one: in the singular
    assert "LIBSVM: 1 of 2 lines has no label (its first token is a feature)" in m.notes


def test_covariance_note_counts_with_separators_and_in_the_singular(tmp_path):
    """'sample covariance of 1000 samples x 1 features' said a count without its thousands separator and one
    feature in the plural."""
    m = load_matrix(write(tmp_path / "t.csv", "".join(f"{k % 7}\n" for k in range(1000))), covariance=True)
    assert "sample covariance of 1,000 samples x 1 feature" in m.notes


def test_libsvm_index_beyond_int64_refused_by_its_line(tmp_path, recwarn):
    """An index of 1e20 wrapped around in the int64 cast: a RuntimeWarning, then 'cannot parse file
    (ValueError: negative dimensions are not allowed)'."""
    input_error(write(tmp_path / "t.svm", "1 1:1\n0 99999999999999999999:1\n"),
                r"t\.svm: line 2: feature index 99999999999999999999 is beyond the largest supported", covariance=True)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_libsvm_repeated_feature_indices_are_summed_with_a_note(tmp_path, monkeypatch):
    """A feature given twice in one sample adds up, as before, and now says so, read whole or line by line."""
    text = "1 1:1 1:2 2:3\n0 1:4 2:5\n2 1:1 2:1\n"
    whole, by_lines = _libsvm_both_ways(tmp_path, text, monkeypatch)
    assert whole == by_lines
    note = "LIBSVM: 1 repeated feature index summed (a feature given twice in one sample)"
    assert note in whole[2]
    m = load_matrix(write(tmp_path / "d.svm", text), covariance=True)
    assert note in m.notes
    _, by_lines = _libsvm_both_ways(tmp_path, "# c\n" + text, monkeypatch)  # a comment: line by line only
    assert note in by_lines[2]


def test_a_libsvm_value_that_is_not_finite_is_named_by_its_line(tmp_path, monkeypatch):
    """nan, inf or a value beyond float64 (1e999, which the whole-text reader parses) is refused by its line,
    read whole or line by line (the covariance's check named a 0-based row and column)."""
    for value in ("nan", "inf", "1e999"):
        text = f"1 1:1 2:3\n\n0 1:4 2:{value}\n2 1:1 2:1\n"
        whole, by_lines = _libsvm_both_ways(tmp_path, text, monkeypatch)
        assert whole == by_lines and f"line 3: feature '2:{value}' is not a finite number" in whole
        input_error(write(tmp_path / "d.svm", text), "line 3: feature", covariance=True)


def test_a_libsvm_feature_whose_repeats_add_up_beyond_float64_is_named_by_its_line(tmp_path, monkeypatch):
    """Each value finite, their sum not: named by the sample's line (blank lines counted) and the feature's
    index as written, read whole or line by line (the covariance's check named a 0-based row and column)."""
    text = "1 1:1 2:3\n\n0 1:4 2:1e308 2:1e308\n2 1:1 2:1\n"
    whole, by_lines = _libsvm_both_ways(tmp_path, text, monkeypatch)
    said = "line 3: feature 2, given more than once, adds up to inf, not a finite number"
    assert whole == by_lines and said in whole
    assert said in input_error(write(tmp_path / "d.svm", "# c\n" + text.replace("\n\n", "\n")), "line 3: feature 2",
                               covariance=True)  # a comment line: read line by line


def test_libsvm_sorted_features_are_not_sorted_again_for_repeats(tmp_path, monkeypatch):
    """Samples whose indices increase (as LIBSVM writers write them) have no repeat, known without a sort
    of every (sample, feature) pair: that sort cost 1 s and 190 MB on an 8M-feature file.  Unsorted ones
    are still counted: one repeat in '3:1 1:2 3:4'."""
    from sfapprox.io import _covariance

    calls = []
    real = _covariance.repeated_keys
    monkeypatch.setattr(_covariance, "repeated_keys", lambda *a, **k: calls.append(1) or real(*a, **k))
    rows, idx = np.array([0, 0, 0, 1, 1]), np.array([1, 2, 5, 1, 3])
    assert _covariance._repeated_features(rows, idx, 5) == 0
    assert not calls
    assert _covariance._repeated_features(np.array([0, 0, 0, 1]), np.array([3, 1, 3, 1]), 3) == 1
    m = load_matrix(write(tmp_path / "s.svm", "1 1:1 2:3\n0 1:4 2:5\n2 1:1 2:2\n"), covariance=True)
    assert not any("repeated" in note for note in m.notes)


# -- the memory a read is checked for (benchmarks/results/text_memory.md) ----------------------------------


def test_a_libsvm_read_is_checked_for_its_peak(tmp_path, monkeypatch):
    """The whole-text LIBSVM reader held six copies of the text at once (its lines, their split, the features
    joined, encoded, spaced, decoded) against read_text's 4 bytes a byte; now fewer, within
    :func:`libsvm_cost`, and the table's check counts what is held beside the table."""
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._covariance import read_libsvm_table

    rng = np.random.default_rng(0)
    path = write(tmp_path / "a.libsvm", "".join(f"{k % 2} " + " ".join(f"{f}:{v:.6g}" for f, v in
                                                                          zip(range(1, 6), rng.random(5))) + "\n"
                                                for k in range(20_000)))
    peak, estimate, checked = peak_and_checks(monkeypatch, lambda p: read_libsvm_table(Source(p), DEFAULTS), path)
    assert peak <= checked < 1.6 * peak, (peak, estimate, checked)


def test_a_tall_table_is_checked_for_its_peak_and_its_covariance(tmp_path, monkeypatch):
    """A tall table read for its covariance: the table's check counts the text held, the covariance's its
    table and np.cov's copy of it."""
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._covariance import read_covariance

    rng = np.random.default_rng(0)
    path = write(tmp_path / "t.csv", "".join(",".join(f"{x:.6g}" for x in row) + "\n"
                                             for row in rng.standard_normal((10_000, 20))))
    peak, _, checked = peak_and_checks(monkeypatch, lambda p: read_covariance(Source(p), DEFAULTS, "csv"), path)
    assert peak <= checked < 1.6 * peak, (peak, checked)


def test_a_libsvm_file_over_its_estimate_is_refused_before_parsing(tmp_path):
    import pytest

    from sfapprox._errors import ResourceError

    text = "1 1:0.5 2:0.25\n" * 3000
    path = write(tmp_path / "a.libsvm", text)
    with pytest.raises(ResourceError, match=r"^\S+a\.libsvm: parsing 3,001 lines of text .* needs about"):
        load_matrix(path, covariance=True, max_memory=2 * len(text))


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_a_npy_table_s_covariance_is_checked_for_np_cov_s_float64_copy(tmp_path, monkeypatch, dtype):
    """np.cov copies the table to float64 whatever its dtype: counted as the table's own bytes twice, a uint8
    table's read peaked at 4.5 times its check, a float32 one's at 1.5 times (benchmarks/results/read_memory.md)."""
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._covariance import read_covariance

    path = tmp_path / "t.npy"
    np.save(path, np.random.default_rng(0).integers(0, 256, (20_000, 20)).astype(dtype))
    peak, _, checked = peak_and_checks(monkeypatch, lambda p: read_covariance(Source(p), DEFAULTS, "npy"), path)
    assert peak <= checked < 1.6 * peak, (peak, checked)


def test_a_uint8_table_whose_float64_copy_is_over_the_limit_is_refused_before_np_cov(tmp_path, monkeypatch):
    """A limit the uint8 table fits, but not np.cov's float64 copy of it beside it, is refused in one line
    before np.cov runs (it was let through: 8.8 bytes a cell against a peak of 9)."""
    from sfapprox._errors import ResourceError
    from sfapprox.io import _covariance

    path = tmp_path / "t.npy"
    np.save(path, np.random.default_rng(0).integers(0, 256, (100_000, 20), dtype=np.uint8))
    monkeypatch.setattr(_covariance.np, "cov", lambda *a, **k: pytest.fail("np.cov ran"))
    with pytest.raises(ResourceError, match=r"^\S+t\.npy: 20 x 20 covariance \(with its table and np\.cov's float64 "
                                            r"copy of it\) needs about [^\n]*over the memory limit") as info:
        load_matrix(path, covariance=True, max_memory=int(8.8 * 100_000 * 20))
    assert "\n" not in str(info.value)


def test_a_compressed_npy_table_s_covariance_is_checked_beside_its_decompressed_bytes(tmp_path, monkeypatch):
    """A .npy.gz's decompressed bytes were held beside its array and through the covariance: a third table
    past the checks (150 MB for a 50 MB table checked for 100 MB); now they are let go before the covariance,
    and counted while the array is read from them."""
    import gzip
    import io

    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source
    from sfapprox.io._covariance import read_covariance

    buffer = io.BytesIO()
    np.save(buffer, np.random.default_rng(0).standard_normal((20_000, 20)))
    path = tmp_path / "t.npy.gz"
    path.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=1))
    peak, _, checked = peak_and_checks(monkeypatch, lambda p: read_covariance(Source(p), DEFAULTS, "npy"), path)
    assert peak <= checked < 1.6 * peak, (peak, checked)


def _qid_libsvm(path, lines: int = 3000):
    """LIBSVM lines with a ``qid:`` token (learning-to-rank files), which the whole-text reader leaves to
    the line-by-line one."""
    rng = np.random.default_rng(0)
    return write(path, "".join(f"{k % 3} qid:{k // 10} " + " ".join(f"{f}:{v:.4g}" for f, v in
                                                                  zip(range(1, 41), rng.random(40))) + "\n"
                               for k in range(lines)))


def test_a_libsvm_file_read_line_by_line_is_checked_for_its_peak(tmp_path, monkeypatch):
    """The line-by-line LIBSVM reader held a Python int and float and two list slots a feature (about 70
    bytes) beside the text and its lines, past read_text's check (1.25 times it at 1 MB); now 16 bytes a
    feature in arrays, checked before the lines are read."""
    from _io_helpers import peak_and_checks
    from sfapprox.io import _covariance
    from sfapprox.io._common import DEFAULTS, Source

    path = _qid_libsvm(tmp_path / "q.libsvm")
    assert _covariance._libsvm_arrays(path.read_text()) is None  # (read line by line)
    peak, _, checked = peak_and_checks(monkeypatch, lambda p: _covariance.read_covariance(Source(p), DEFAULTS,
                                                                                          "libsvm"), path)
    assert peak <= checked < 1.6 * peak, (peak, checked)


def test_a_libsvm_file_read_line_by_line_over_the_limit_is_refused_before_its_lines(tmp_path, monkeypatch):
    """A limit under the line-by-line reader's need is refused in one line before a line is parsed."""
    from sfapprox._errors import ResourceError
    from sfapprox.io import _covariance
    from sfapprox.io._common import split_cost

    path = _qid_libsvm(tmp_path / "q.libsvm")
    data = path.read_bytes()
    lines = data.count(b"\n") + 1
    need = split_cost(data, lines) + 16 * data.count(b":")  # (its arrays alone, without margin)
    assert need > _covariance.libsvm_cost(data, lines)  # over read_text's check: only the reader's own refuses
    monkeypatch.setattr(_covariance, "parse_float", lambda token: pytest.fail("a line was parsed"))
    with pytest.raises(ResourceError, match=r"^\S+q\.libsvm: parsing 3,001 lines of LIBSVM text one by one "
                                            r"needs about [^\n]*over the memory limit"):
        load_matrix(path, covariance=True, max_memory=need)
