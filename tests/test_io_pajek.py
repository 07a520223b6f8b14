"""Tests for the Pajek (.net/.paj) and LINQS (.cites/.content) readers."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfapprox._errors import InputError, ParameterError, ResourceError
from sfapprox.io import load_matrix


def input_error(path, match, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    return msg


def write(path, text: str, encoding: str = "utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


VERTICES4 = '*Vertices 4\n1 "a" 0.1 0.2 0.5 box\n2 "b c" 0.3 0.4 0.5\n3 "d"\n4 "e"\n'


class TestPajek:
    def test_arcs_and_edges(self, tmp_path):
        p = write(tmp_path / "g.net", VERTICES4 + "*Arcs\n1 2 2.5\n*Edges\n3 4\n2 2 7\n")
        m = load_matrix(p)
        expected = np.zeros((4, 4))
        expected[0, 1] = 2.5
        expected[2, 3] = expected[3, 2] = 1.0
        expected[1, 1] = 7.0  # self-loop edge added once
        np.testing.assert_array_equal(m.to_dense(), expected)
        assert (m.format, m.name, m.is_sparse) == ("pajek", "g", True)

    def test_case_insensitive_comments_crlf_and_attributes(self, tmp_path):
        text = "% comment\r\n*network X\r\n*VERTICES 3\r\n*arcs\r\n1 2 3 c Red\r\n2 3 l \"lbl\"\r\n\r\n*EDGES\r\n1 3 [1-*]\r\n"
        m = load_matrix(write(tmp_path / "g.net", text))
        d = m.to_dense()
        assert d[0, 1] == 3 and d[1, 2] == 1 and d[0, 2] == d[2, 0] == 1

    def test_repeated_lines_summed_and_noted(self, tmp_path):
        p = write(tmp_path / "r.net", "*Vertices 3\n*Arcs\n1 2 5\n1 2 6\n*Edges\n2 3\n3 2\n")
        m = load_matrix(p)
        d = m.to_dense()
        assert d[0, 1] == 11 and d[1, 2] == d[2, 1] == 2
        assert "Pajek: 1 repeated arcs summed" in m.notes
        assert "Pajek: 1 repeated edges summed" in m.notes

    def test_relations_summed(self, tmp_path):
        p = write(tmp_path / "rel.net", '*Vertices 3\n*Arcs :1 "likes"\n1 2\n*Edges :2 "knows"\n1 2\n*Arcs :1 "likes"\n2 3 4\n')
        m = load_matrix(p)
        d = m.to_dense()
        assert d[0, 1] == 2 and d[1, 0] == 1 and d[1, 2] == 4
        assert any("2 relations summed: 1 'likes', 2 'knows'" in n for n in m.notes)
        assert not any("repeated" in n for n in m.notes)

    def test_lists(self, tmp_path):
        p = write(tmp_path / "l.net", "*Vertices 4\n*Arcslist\n1 2 3 4\n*Edgeslist\n2 4\n")
        d = load_matrix(p).to_dense()
        assert d[0, 1:].tolist() == [1, 1, 1] and d[1, 3] == d[3, 1] == 1 and d.sum() == 5

    def test_matrix_section(self, tmp_path):
        p = write(tmp_path / "m.net", "*Vertices 3\n*Matrix\n0 1 2\n1 0 0\n2 0 0.5\n")
        m = load_matrix(p)
        assert not m.is_sparse
        np.testing.assert_array_equal(m.matrix, [[0, 1, 2], [1, 0, 0], [2, 0, 0.5]])

    def test_matrix_section_wrong_size(self, tmp_path):
        input_error(write(tmp_path / "m.net", "*Vertices 3\n*Matrix\n0 1\n1 0\n"), r"line 2: \*Matrix section holds 4 values, expected 3 x 3")

    def test_partition_and_vector_sections_ignored(self, tmp_path):
        text = "*Network A\n*Vertices 2\n*Edges\n1 2\n*Partition p.clu\n*Vertices 2\n1\n2\n*Vector v\n*Vertices 2\n0.5\n0.7\n"
        m = load_matrix(write(tmp_path / "a.paj", text))
        assert m.n == 2 and m.nnz == 2 and not any("networks" in n for n in m.notes)

    def test_several_networks(self, tmp_path):
        text = "*Network one\n*Vertices 2\n*Edges\n1 2\n*Partition p\n*Vertices 2\n1\n1\n" \
               "*Network two\n*Vertices 3\n*Arcs\n1 3 9\n*Network three\n*Vertices 4\n"
        p = write(tmp_path / "multi.paj", text)
        m = load_matrix(p)
        assert m.n == 2
        assert "file holds 3 networks; loaded the first (network=K picks another)" in m.notes
        m2 = load_matrix(p, network=2)
        assert m2.n == 3 and m2.to_dense()[0, 2] == 9 and "loaded the second" in m2.notes[0]
        with pytest.raises(ParameterError, match="network=4 but the file holds 3 networks"):
            load_matrix(p, network=4)

    def test_network_counts_have_thousands_separators(self, tmp_path):
        """'file holds 1000 networks' (and 'holds 1000 networks' refusing network=) read as other counts do."""
        p = write(tmp_path / "many.paj", "".join(f"*Network n{k}\n*Vertices 1\n" for k in range(1000)))
        assert "file holds 1,000 networks; loaded the first (network=K picks another)" in load_matrix(p).notes
        with pytest.raises(ParameterError, match="network=1001 but the file holds 1,000 networks; use network=1..1000"):
            load_matrix(p, network=1001)
        one = write(tmp_path / "one.paj", "*Network n\n*Vertices 1\n")
        with pytest.raises(ParameterError, match="network=2 but the file holds 1 network; "):
            load_matrix(one, network=2)

    def test_vertex_out_of_range(self, tmp_path):
        input_error(write(tmp_path / "o.net", "*Vertices 3\n*Edges\n1 2\n2 4\n"), r"line 4: vertex id 4 is out of range 1\.\.3")
        input_error(write(tmp_path / "z.net", "*Vertices 3\n*Arcs\n0 1\n"), r"line 3: vertex id 0 is out of range")
        input_error(write(tmp_path / "v.net", "*Vertices 2\n1 \"a\"\n7 \"b\"\n"), r"line 3: vertex id 7 is out of range")

    def test_missing_vertices(self, tmp_path):
        input_error(write(tmp_path / "nv.net", "*Edges\n1 2\n"), r"line 1: \*Edges before '\*Vertices n'")
        input_error(write(tmp_path / "nothing.net", "% just a comment\n"), r"no '\*Vertices n' line")
        input_error(write(tmp_path / "text.net", "hello\n"), r"line 1: data before any section keyword")

    @pytest.mark.parametrize(
        "text, match",
        [
            ("*Vertices many\n", r"line 1: expected '\*Vertices n'"),
            ("*Vertices 3\n*Edges\n1\n", r"line 3: expected 'i j \[weight\]'"),
            ("*Vertices 3\n*Edges\n1 x\n", r"line 3: expected an integer vertex id, got 'x'"),
            ("*Vertices 3\n*Edges\n1 2 inf\n", r"line 3: weight 'inf' is not finite"),
            ("*Vertices 3 5\n", r"line 1: 2-mode"),
        ],
    )
    def test_malformed(self, tmp_path, text, match):
        input_error(write(tmp_path / "bad.net", text), match)

    def test_latin1_labels(self, tmp_path):
        p = write(tmp_path / "l1.net", '*Vertices 2\n1 "Müller"\n2 "Ørsted"\n*Edges\n1 2\n', encoding="latin-1")
        assert load_matrix(p).nnz == 2

    def test_sha256(self, tmp_path):
        p = write(tmp_path / "h.net", "*Vertices 2\n*Edges\n1 2\n")
        assert load_matrix(p).sha256 == hashlib.sha256(p.read_bytes()).hexdigest()


class TestTwoMode:
    # rows 1..2, columns 3..5: B = [[1,1,0],[0,1,2]]
    TEXT = "*Vertices 5 2\n*Edges\n1 3\n1 4\n2 4\n5 2 2\n"
    B = np.array([[1.0, 1, 0], [0, 1, 2]])

    def test_default_rows_projection_with_note(self, tmp_path):
        m = load_matrix(write(tmp_path / "t.net", self.TEXT))
        np.testing.assert_array_equal(m.to_dense(), self.B @ self.B.T)
        assert any("2-mode network 2x3 projected to rows (B·Bᵀ), as the file declares" in n for n in m.notes)

    def test_cols_and_bipartite(self, tmp_path):
        p = write(tmp_path / "t.net", self.TEXT)
        np.testing.assert_array_equal(load_matrix(p, two_mode="cols").to_dense(), self.B.T @ self.B)
        full = load_matrix(p, two_mode="bipartite").to_dense()
        assert full.shape == (5, 5)
        np.testing.assert_array_equal(full[:2, 2:], self.B)
        np.testing.assert_array_equal(full, full.T)

    def test_two_mode_header_infers_split(self, tmp_path):
        text = "*Network firms [2-Mode]\n*Vertices 5\n*Edges\n1 3\n1 4\n2 4\n5 2 2\n"
        m = load_matrix(write(tmp_path / "h.paj", text))
        np.testing.assert_array_equal(m.to_dense(), self.B @ self.B.T)
        assert any("split inferred from the lines: rows 1..2, columns 3..5" in n for n in m.notes)

    def test_undeclared_is_one_mode_with_hint(self, tmp_path):
        p = write(tmp_path / "u.net", "*Vertices 5\n*Edges\n1 3\n1 4\n2 4\n5 2 2\n")
        m = load_matrix(p)
        assert m.n == 5 and any("looks like a 2-mode network" in n for n in m.notes)
        rows = load_matrix(p, two_mode="rows")
        np.testing.assert_array_equal(rows.to_dense(), self.B @ self.B.T)
        assert any("file does not declare 2-mode" in n for n in rows.notes)

    def test_not_two_mode(self, tmp_path):
        p = write(tmp_path / "o.net", "*Vertices 3\n*Edges\n1 2\n2 3\n1 3\n")
        input_error(p, "two_mode='rows' needs a 2-mode network", two_mode="rows")
        assert load_matrix(p, two_mode="bipartite").n == 3

    def test_line_within_one_mode(self, tmp_path):
        input_error(write(tmp_path / "w.net", "*Vertices 5 2\n*Edges\n1 3\n1 2\n"), r"line 4: in a 2-mode network every line must join")

    def test_two_mode_matrix(self, tmp_path):
        p = write(tmp_path / "m.net", "*Vertices 5 2\n*Matrix\n1 1 0\n0 1 2\n")
        np.testing.assert_array_equal(load_matrix(p).to_dense(), self.B @ self.B.T)


class TestLinqs:
    CONTENT = "n1\t0\t1\tA\nn2\t1\t0\tB\nn3\t1\t1\tA\n"

    def test_order_and_direction(self, tmp_path):
        write(tmp_path / "w.content", self.CONTENT)
        p = write(tmp_path / "w.cites", "n1 n2\nn1 n3\nn2 n3\nn2 n3\nghost n1\n")
        m = load_matrix(p)
        expected = np.zeros((3, 3))
        expected[1, 0] = expected[2, 0] = expected[2, 1] = 1  # A[citing, cited]
        np.testing.assert_array_equal(m.to_dense(), expected)
        text = " ".join(m.notes)
        # one in the singular (it was '1 citations naming nodes missing', '1 repeated citations counted once')
        assert "LINQS: 3 nodes in the order of w.content" in text
        assert "LINQS: 1 citation naming nodes missing" in text and "LINQS: 1 repeated citation counted once" in text
        assert m.format == "linqs" and m.name == "w"
        assert m.sha256 == hashlib.sha256((tmp_path / "w.cites").read_bytes() + (tmp_path / "w.content").read_bytes()).hexdigest()

    def test_content_path_also_works(self, tmp_path):
        write(tmp_path / "w.cites", "n1 n2\n")
        assert load_matrix(write(tmp_path / "w.content", self.CONTENT)).nnz == 1

    def test_missing_content(self, tmp_path):
        input_error(write(tmp_path / "x.cites", "a b\n"), r"needs x.content beside it")

    def test_bad_cites_line(self, tmp_path):
        write(tmp_path / "w.content", self.CONTENT)
        input_error(write(tmp_path / "w.cites", "n1 n2 n3\n"), r"line 1: expected 'cited citing'")

    def test_duplicate_node(self, tmp_path):
        write(tmp_path / "d.content", "a 1\na 2\n")
        p = write(tmp_path / "d.cites", "a a\n")
        with pytest.raises(InputError, match=r"d.content: line 2: node 'a' appears twice"):
            load_matrix(p)


# ---------------------------------------------------------------------------
# weights are never guessed; multi-relational networks
# ---------------------------------------------------------------------------


class TestPajekWeights:
    def test_decimal_comma_read_with_a_note(self, tmp_path):
        # Before: '0,25' was taken for an attribute and the weight became 1.0.
        p = write(tmp_path / "c.net", "*Vertices 3\n*Arcs\n1 2 0,25\n2 3 -1,5 c Red\n*Edges\n1 3 12,0625\n")
        m = load_matrix(p)
        d = m.to_dense()
        assert d[0, 1] == 0.25 and d[1, 2] == -1.5 and d[0, 2] == d[2, 0] == 12.0625
        assert "Pajek: 3 numbers written with a decimal comma (0,25) read as 0.25" in m.notes

    @pytest.mark.parametrize("token", ["1,000", "-12,500"])
    def test_thousands_or_decimal_comma_refused(self, tmp_path, token):
        p = write(tmp_path / "c.net", f"*Vertices 2\n*Arcs\n1 2 {token}\n")
        input_error(p, rf"line 3: weight '{token}' is ambiguous: a decimal comma .* or a thousands separator")

    def test_leading_zero_three_decimals_is_not_ambiguous(self, tmp_path):
        p = write(tmp_path / "c.net", "*Vertices 2\n*Arcs\n1 2 0,125\n")
        assert load_matrix(p).to_dense()[0, 1] == 0.125

    @pytest.mark.parametrize("token", ["1.2.3", "0x10", "1/2", "5abc", "-", ".5e"])
    def test_number_like_token_that_is_no_number_refused(self, tmp_path, token):
        p = write(tmp_path / "c.net", f"*Vertices 2\n*Arcs\n1 2 {token}\n")
        input_error(p, rf"line 3: weight '{re.escape(token)}' is not a number")

    def test_attributes_still_mean_weight_one(self, tmp_path):
        p = write(tmp_path / "a.net", '*Vertices 2\n*Arcs\n1 2 c Red\n2 1 [1-*]\n*Edges\n1 1 "x"\n')
        assert load_matrix(p).to_dense().tolist() == [[1, 1], [1, 0]]

    def test_matrix_decimal_comma(self, tmp_path):
        p = write(tmp_path / "m.net", "*Vertices 2\n*Matrix\n0 0,5\n0,5 0\n")
        np.testing.assert_array_equal(load_matrix(p).matrix, [[0, 0.5], [0.5, 0]])


class TestPajekRelations:
    PREFIXED = '*Vertices 4\n*Arcs :1 "likes"\n*Arcs :2 "knows"\n*Arcs\n1: 1 2\n2: 1 2 3\n10: 3 4 5\n2:2 3\n'

    def test_relation_prefixed_lines_summed_by_default(self, tmp_path):
        # Before: '10: 263 264' was refused ("expected an integer vertex id").
        m = load_matrix(write(tmp_path / "p.net", self.PREFIXED))
        d = m.to_dense()
        assert d[0, 1] == 4 and d[2, 3] == 5 and d[1, 2] == 1
        assert any("3 relations summed: 1 'likes', 2 'knows', 10 (relation=K picks one)" in n for n in m.notes)

    @pytest.mark.parametrize("k, entries", [(1, {(0, 1): 1}), (2, {(0, 1): 3, (1, 2): 1}), (10, {(2, 3): 5})])
    def test_relation_picks_one(self, tmp_path, k, entries):
        m = load_matrix(write(tmp_path / "p.net", self.PREFIXED), relation=k)
        expected = np.zeros((4, 4))
        for (i, j), v in entries.items():
            expected[i, j] = v
        np.testing.assert_array_equal(m.to_dense(), expected)
        assert any(n.startswith(f"Pajek: relation {k}") and "of 3" in n for n in m.notes)

    def test_section_relations_pick_one(self, tmp_path):
        p = write(tmp_path / "rel.net", '*Vertices 3\n*Arcs :1 "likes"\n1 2\n*Edges :2 "knows"\n1 2\n*Arcs :1 "likes"\n2 3 4\n')
        d = load_matrix(p, relation=2).to_dense()
        assert d[0, 1] == d[1, 0] == 1 and d.sum() == 2

    def test_several_matrix_sections(self, tmp_path):
        # Before: "a second *Matrix section in one network is not supported".
        text = '*Vertices 2\n*Matrix :1 "a"\n0 1\n2 0\n*Matrix :2 "b"\n0 10\n0 0\n'
        p = write(tmp_path / "m.paj", text)
        m = load_matrix(p)
        np.testing.assert_array_equal(m.matrix, [[0, 11], [2, 0]])
        assert any("2 relations summed: 1 'a', 2 'b'" in n for n in m.notes)
        np.testing.assert_array_equal(load_matrix(p, relation=2).matrix, [[0, 10], [0, 0]])

    def test_matrix_and_arcs_of_one_relation(self, tmp_path):
        text = '*Vertices 2\n*Matrix :1\n0 1\n0 0\n*Arcs :1\n2 1 3\n*Arcs :2\n2 1 7\n'
        np.testing.assert_array_equal(load_matrix(write(tmp_path / "m.net", text), relation=1).to_dense(), [[0, 1], [3, 0]])

    def test_two_unnumbered_matrix_sections_refused(self, tmp_path):
        p = write(tmp_path / "m.net", "*Vertices 2\n*Matrix\n0 1\n1 0\n*Matrix\n0 1\n1 0\n")
        input_error(p, r"line 5: a second \*Matrix section without a relation number .* \(the first at line 2\)")

    def test_unknown_relation_lists_the_relations(self, tmp_path):
        with pytest.raises(ParameterError, match=r"relation=7 does not exist; the network's relations are 1 'likes', 2 'knows', 10"):
            load_matrix(write(tmp_path / "p.net", self.PREFIXED), relation=7)

    def test_relation_on_a_network_without_relations(self, tmp_path):
        with pytest.raises(ParameterError, match="relation=1 but the network has no numbered relations"):
            load_matrix(write(tmp_path / "g.net", "*Vertices 2\n*Arcs\n1 2\n"), relation=1)

    def test_unnumbered_lines_make_relation_ambiguous(self, tmp_path):
        p = write(tmp_path / "g.net", "*Vertices 3\n*Arcs :1\n1 2\n*Arcs\n2 3\n")
        input_error(p, r"line 5: relation=1 asked, but this line has no relation number", relation=1)
        assert load_matrix(p).nnz == 2  # summed without relation=

    @pytest.mark.parametrize("value", [0, -1, True, 1.5, "1"])
    def test_relation_value_validated(self, tmp_path, value):
        with pytest.raises(ParameterError, match="relation=.* must be a positive integer"):
            load_matrix(write(tmp_path / "p.net", self.PREFIXED), relation=value)

    def test_relation_refused_for_other_formats(self, tmp_path):
        p = tmp_path / "t.csv"
        p.write_text("1,2\n3,4\n")
        with pytest.raises(ParameterError, match="option relation=1 applies to pajek files"):
            load_matrix(p, relation=1)

    def test_bad_relation_numbers(self, tmp_path):
        input_error(write(tmp_path / "a.net", "*Vertices 2\n*Arcs :x\n1 2\n"), r"line 2: relation ':x' must be ':k'")
        input_error(write(tmp_path / "b.net", "*Vertices 2\n*Arcs\n0: 1 2\n"), r"line 3: relation number 0 must be a positive")

    def test_relation_in_a_manifest(self, tmp_path):
        from sfapprox.datasets.manifest import load_manifest

        (tmp_path / "p.net").write_text(self.PREFIXED)
        man = tmp_path / "m.toml"
        man.write_text('[[matrix]]\nname = "p"\ncategory = "network"\nfile = "p.net"\nload = {relation = 2}\n')
        assert load_manifest(man).entries[0].load == {"relation": 2}


class TestHardening:
    """Bounds checked before parsing."""

    def test_pajek_order_memory_from_header(self, tmp_path):
        p = write(tmp_path / "g.net", "*Vertices 50000000\n*Arcs\n1 2\n")
        with pytest.raises(ResourceError, match=r"network of order 50,000,000 \(its sparse row pointers alone\)"):
            load_matrix(p, max_memory=2**26)


def test_a_projection_that_overflows_is_one_error_not_a_warning(tmp_path):
    import warnings

    from sfapprox import InputError

    p = tmp_path / "big.paj"
    p.write_text('*Vertices 3 2\n1 "a"\n2 "b"\n3 "c"\n*Edges\n1 3 1e200\n2 3 1e200\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in matmul" reached the user
        with pytest.raises(InputError, match=r"big.paj: its B·Bᵀ projection overflows .*two_mode='bipartite'"):
            load_matrix(p)


class TestSectionKeywords:
    """A tab after a section keyword sent its relation's lines to an unknown section (dropped silently); a
    misspelt section ("*Edge") gave an all-zero matrix, and compare's verdict called it exact."""

    def test_a_tab_separates_a_keyword_as_a_space_does(self, tmp_path):
        p = write(tmp_path / "tab.net", '*Vertices\t3\n*Arcs\t:1 "likes"\n1 2 1\n2 3 1\n*Arcs :2 "hates"\n1 3 5\n')
        np.testing.assert_array_equal(load_matrix(p).matrix.toarray(), [[0, 1, 5], [0, 0, 1], [0, 0, 0]])

    def test_data_in_an_unknown_section_is_refused_naming_it(self, tmp_path):
        p = write(tmp_path / "typo.net", "*Vertices 3\n*Edge\n1 2 1\n2 3 1\n")
        with pytest.raises(InputError, match=r"line 3: data in section \*Edge \(line 2\)"):
            load_matrix(p)

    def test_known_auxiliary_sections_are_still_skipped(self, tmp_path):
        p = write(tmp_path / "aux.paj", "*Network n\n*Vertices 2\n*Arcs\n1 2 1\n*Partition p\n*Vertices 2\n1\n2\n")
        assert load_matrix(p).matrix.toarray().tolist() == [[0, 1], [0, 0]]


@pytest.mark.parametrize("token", ["NA", "null", "?"])
def test_a_missing_weight_token_is_refused_not_read_as_an_attribute(tmp_path, token):
    """'1 2 NA' was read as an arc of weight 1, 'NA' taken for an attribute keyword ('c Red')."""
    path = tmp_path / "g.net"
    path.write_text(f'*Vertices 2\n1 "a"\n2 "b"\n*Arcs\n1 2 {token}\n')
    with pytest.raises(InputError, match=rf"g\.net: line 5: weight '{re.escape(token)}' is a missing value; "
                                         "give the weight a number"):
        load_matrix(path)


@pytest.mark.parametrize("section", ["*Arcslist", "*Edgeslist"])
@pytest.mark.parametrize("weight", ["0.5", "2e3", "1,5", "NA"])
def test_a_weight_in_a_list_section_is_refused_not_dropped(tmp_path, section, weight):
    """Lists hold vertex ids only: '1 2 3 0.5' stored arcs 1-2 and 1-3 and dropped the 0.5 without a word."""
    path = tmp_path / "g.net"
    path.write_text(f"*Vertices 3\n{section}\n1 2 3 {weight}\n")
    with pytest.raises(InputError, match=rf"line 3: '{re.escape(weight)}' in a {re.escape(section)} line, which "
                                         r"lists vertex ids only \(no weights\); write weighted lines in \*(Arcs|Edges)"):
        load_matrix(path)


def test_a_list_line_with_attributes_after_its_ids_still_reads(tmp_path):
    path = tmp_path / "g.net"
    path.write_text("*Vertices 3\n*Arcslist\n1 2 3 c Red\n")
    np.testing.assert_array_equal(load_matrix(path).to_dense(), [[0, 1, 1], [0, 0, 0], [0, 0, 0]])


def test_a_fortran_exponent_weight_is_read(tmp_path):
    path = tmp_path / "g.net"
    path.write_text("*Vertices 2\r\n*Edges\r\n1 2 1.5D+00\r\n*Matrix :2\r\n0 2.5d0\r\n0 0\r\n")
    m = load_matrix(path)
    np.testing.assert_array_equal(m.to_dense(), [[0, 4], [1.5, 0]])
    assert any("Fortran exponent" in n for n in m.notes)


def test_counts_in_notes_and_messages_separate_thousands(tmp_path):
    """"1200 numbers written with a decimal comma", "holds 1200 values, expected 35 x 35 = 1225": thousands
    separated as tables write them, one number in the singular."""
    arcs = "".join(f"{i} {i % 1200 + 1} 0,5\n" for i in range(1, 1201))
    m = load_matrix(write(tmp_path / "c.net", f"*Vertices 1200\n*Arcs\n{arcs}"))
    assert "Pajek: 1,200 numbers written with a decimal comma (0,25) read as 0.25" in m.notes, m.notes
    one = load_matrix(write(tmp_path / "one.net", "*Vertices 2\n*Arcs\n1 2 0,5\n"))
    assert "Pajek: 1 number written with a decimal comma (0,25) read as 0.25" in one.notes, one.notes
    values = " ".join(["1"] * 1200)
    input_error(write(tmp_path / "m.net", f"*Vertices 35\n*Matrix\n{values}\n"),
                r"\*Matrix section holds 1,200 values, expected 35 x 35 = 1,225")


# -- bulk reading of plain sections --------------------------------------------------------------------


def _random_pajek(rng: np.random.Generator, n: int) -> str:
    """A Pajek network with most of what a file may hold: long plain sections (read in bulk) and
    sections with attributes, comments, blank lines, relation numbers and a matrix (read line by line)."""
    out = [f"*Network seed\n*Vertices {n}\n"]
    out += [f'{v} "v {v}" 0.1 0.2\n' if v % 3 else f"{v}\n" for v in range(1, n + 1)]
    for k in range(int(rng.integers(4, 8))):
        kind = str(rng.choice(["Arcs", "Edges"]))
        relation = f" :{int(rng.integers(1, 3))}" if rng.random() < 0.3 else ""
        out.append(f"*{kind}{relation}\n" + ("\n  \n" if rng.random() < 0.3 else ""))
        rows = int(rng.integers(1, 3000))
        i, j = rng.integers(1, n + 1, rows), rng.integers(1, n + 1, rows)
        w = np.round(rng.standard_normal(rows), int(rng.integers(0, 7)))
        weighted, odd = rng.random() < 0.6, rng.random() < 0.4  # odd: one line that only the slow path reads
        lines = [f"{a} {b} {c!r}\n" if weighted else f"\t{a}  {b}\n" for a, b, c in zip(i, j, w.tolist())]
        if odd:
            spot = int(rng.integers(0, rows))
            lines[spot] = str(rng.choice([f"{i[spot]} {j[spot]} 2 c Red\n", "% a comment\n", "\n",
                                          f"{i[spot]} {j[spot]} 1,5\n", f"{i[spot]} {j[spot]}\n",
                                          f"2: {i[spot]} {j[spot]}\n", f"{i[spot]} {j[spot]} 1.5D+00\n"]))
        out += lines + (["\n\n"] if rng.random() < 0.5 else [])
    if rng.random() < 0.5:
        out.append("*Matrix :3\n" + "".join(" ".join(str(x) for x in rng.integers(0, 3, n)) + "\n" for _ in range(n)))
    out.append("*Partition p\n*Vertices 2\n1\n2\n")
    text = "".join(out)
    return text.replace("\n", "\r\n") if rng.random() < 0.3 else text


@pytest.mark.parametrize("seed", range(6))
def test_bulk_and_line_by_line_reading_give_the_same_matrix(tmp_path, monkeypatch, seed):
    import sfapprox.io._pajek as pajek

    rng = np.random.default_rng(seed)
    path = write(tmp_path / "g.net", _random_pajek(rng, int(rng.integers(40, 120))))
    bulk = []
    chunks = pajek._chunks
    monkeypatch.setattr(pajek, "_chunks", lambda *a: (bulk.append(1), *chunks(*a))[1:])
    read = {}
    for name, least in (("lines", 1 << 62), ("bulk", 0)):
        monkeypatch.setattr(pajek, "_BULK_MIN_CHARS", least)
        m = load_matrix(path)
        read[name] = (m.to_dense(), m.notes)
        assert bool(bulk) == (name == "bulk")
    np.testing.assert_array_equal(read["bulk"][0], read["lines"][0])  # to the bit: summed in the same order
    assert read["bulk"][1] == read["lines"][1]


@pytest.mark.parametrize("bad, message", [
    ("5 100001", r"line 25004: vertex id 100001 is out of range 1\.\.100000"),
    ("5 6 1.2.3", r"line 25004: weight '1\.2\.3' is not a number"),
    ("5.0 6", r"line 25004: expected an integer vertex id, got '5\.0'"),
    ("5 6 1e999", r"line 25004: weight '1e999' is not finite"),
    ("5", r"line 25004: expected 'i j \[weight\]', got '5'"),
])
def test_a_bad_line_deep_in_a_long_plain_section_is_named(tmp_path, monkeypatch, bad, message):
    import sfapprox.io._pajek as pajek

    monkeypatch.setattr(pajek, "_CHUNK_CHARS", 4096)  # the bad line in a later chunk than the first
    lines = [f"{k % 100000 + 1} {(7 * k) % 100000 + 1} 0.5\n" for k in range(50000)]
    lines[25000] = bad + "\n"
    path = write(tmp_path / "big.net", "*Network big\n*Vertices 100000\n*Arcs\n" + "".join(lines))
    input_error(path, message, keep_sparse=True)


def _no_line_read_one_by_one(monkeypatch) -> None:
    """Make a data line read one by one fail the test (blank text may still go that way)."""
    import sfapprox.io._pajek as pajek

    lines_read = pajek._Parser._lines

    def one_by_one(self, text, first):
        assert not text.strip(), f"line {first} on read line by line"
        lines_read(self, text, first)

    monkeypatch.setattr(pajek._Parser, "_lines", one_by_one)


def test_a_long_plain_section_is_read_in_bulk(tmp_path, monkeypatch):
    lines = "".join(f"{k % 500 + 1} {(3 * k) % 500 + 1} {k / 7!r}\n" for k in range(20000))
    path = write(tmp_path / "big.net", "*Vertices 500\n*Edges\n" + lines)
    _no_line_read_one_by_one(monkeypatch)
    d = load_matrix(path).to_dense()
    expected = sum(k / 7 for k in range(20000) if {k % 500 + 1, (3 * k) % 500 + 1} == {2, 4})
    assert d[1, 3] == d[3, 1] == pytest.approx(expected, rel=1e-12) and expected > 0


def test_the_bulk_vertex_check_holds_the_section_about_once_not_eight_times():
    """The vertex ids' bulk check copied the section's bytes as int64 (a list appended to a uint8 array):
    8 bytes a character, over what the line-by-line path holds and outside the memory limit's estimate."""
    import tracemalloc

    import sfapprox.io._pajek as pajek

    n = 50_000
    body = "".join(f'{i} "vertex label number {i}"\n' for i in range(1, n + 1))
    tracemalloc.start()
    try:
        assert pajek._vertex_ids_fit(body, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(body), f"{peak / len(body):.1f} bytes a character"


def test_a_huge_bad_token_is_shown_cut(tmp_path):
    """A weight of 100,000 characters was printed whole in its one-line error."""
    p = tmp_path / "long.net"
    p.write_text("*Vertices 2\n*Edges\n1 2 1e" + "9" * 100_000 + "\n")
    with pytest.raises(InputError, match=r"line 3: weight '1e9+' is not finite") as refused:
        load_matrix(p)
    assert len(str(refused.value)) < 300


# -- the memory the reader is checked for ---------------------------------------------------------------


def _peak_of_load(path, **kwargs) -> int:
    """tracemalloc's peak over ``load_matrix(path, keep_sparse=True, **kwargs)`` (numpy's arrays included)."""
    import tracemalloc

    tracemalloc.start()
    try:
        load_matrix(path, keep_sparse=True, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _plain_edges(tmp_path, n: int = 20_000, comment: bool = False):
    """n labelled vertices and 10 n random ``*Edges`` lines (a comment first: the section read line by line)."""
    rng = np.random.default_rng(0)
    i, j = rng.integers(1, n + 1, 10 * n), rng.integers(1, n + 1, 10 * n)
    text = (f"*Vertices {n}\n" + "".join(f'{v} "v{v}"\n' for v in range(1, n + 1)) + "*Edges\n"
            + ("% read line by line\n" if comment else "") + "".join(f"{a} {b}\n" for a, b in zip(i, j)))
    return write(tmp_path / "g.net", text)


def test_a_plain_file_is_checked_for_the_bulk_readers_peak_not_the_line_readers(tmp_path):
    """read_text checked every Pajek file for 4 bytes a byte and 300 a line (the old reader's Python
    objects): a file read in bulk peaks at about half that, and was refused under limits it fits in."""
    path = _plain_edges(tmp_path)
    data = path.read_bytes()
    lines = data.count(b"\n") + 1
    limit = 2 * len(data) + 200 * lines  # (refused with the old estimate: "parsing ... lines of text")
    peak = _peak_of_load(path, max_memory=limit)
    from sfapprox.io._pajek import parse_cost

    estimate = parse_cost(data, lines)
    assert peak <= estimate <= limit < 4 * len(data) + 300 * lines, (peak, estimate, limit)
    assert estimate < 1.5 * peak, f"the estimate {estimate:,} is wildly over the peak {peak:,}"


def test_lines_read_one_by_one_are_checked_for_their_python_objects(tmp_path):
    """A section read line by line holds a string and six Python objects a line while parsed: over the
    bulk reader's estimate, checked as the lines are read."""
    path = _plain_edges(tmp_path, comment=True)
    peak = _peak_of_load(path)
    with pytest.raises(ResourceError, match=r"g\.net: parsing [\d,]+ lines one by one needs about"):
        load_matrix(path, keep_sparse=True, max_memory=peak)  # the estimate holds: at least the peak
    assert _peak_of_load(path, max_memory=int(1.5 * peak)) == pytest.approx(peak, rel=0.05)  # and is not wild
    from sfapprox.io._pajek import parse_cost

    data = path.read_bytes()
    assert parse_cost(data, data.count(b"\n") + 1) < peak, "the section was read in bulk after all"


def test_repeats_are_counted_per_kind_and_relation(tmp_path):
    """An arc and an edge between the same vertices, or lines of two relations, are no repeats."""
    text = ("*Vertices 4\n*Arcs :1\n1 2\n2 1\n1 2\n*Edges :1\n1 2\n2 1\n*Arcs :2\n1 2\n1 2\n3 4\n"
            "*Edges :2\n4 3\n")
    m = load_matrix(write(tmp_path / "r.net", text))
    assert "Pajek: 2 repeated arcs summed" in m.notes and "Pajek: 1 repeated edges summed" in m.notes


def test_repeats_count_the_same_with_keys_too_large_for_int64():
    """Over 3e9 vertices a line's key overflows int64: the fallback (a sort by columns) counts as the keys do."""
    import sfapprox.io._pajek as pajek

    rng = np.random.default_rng(1)
    count = 2000
    lines = {"src_i": rng.integers(1, 6, count), "src_j": rng.integers(1, 6, count),
             "undirected": rng.random(count) < 0.5, "relation_of": rng.integers(0, 3, count)}
    counts = []
    for n in (5, 4_000_000_000):
        net = pajek._Network("", 1, 1, n=n)
        for name, column in lines.items():
            setattr(net, name, column)
        counts.append(pajek._repeats(net))
    assert counts[0] == counts[1] and counts[0]["edges"] > 0 and counts[0]["arcs"] > 0
    pairs = {(r, u, min(i, j) if u else i, max(i, j) if u else j)
             for i, j, u, r in zip(*(lines[k].tolist() for k in ("src_i", "src_j", "undirected", "relation_of")))}
    assert counts[0]["edges"] + counts[0]["arcs"] == count - len(pairs)
    assert counts[0]["edges"] == int(lines["undirected"].sum()) - sum(1 for p in pairs if p[1])


@pytest.mark.parametrize("kinds", ["arcs", "edges", "both"])
@pytest.mark.parametrize("relations", [(0,), (2,), (0, 1, 3)])
def test_repeats_count_each_arc_and_edge_past_its_first_line(kinds, relations):
    """One int64 key a line (a relation part only where lines differ in it, a kind bit only where both
    kinds are there) counts what a set of the lines' (relation, kind, ends) counts."""
    import sfapprox.io._pajek as pajek

    rng = np.random.default_rng(len(kinds) + 7 * len(relations) + relations[0])
    count, n = 3000, 9
    undirected = {"arcs": np.zeros(count, bool), "edges": np.ones(count, bool)}.get(kinds, rng.random(count) < 0.5)
    lines = {"src_i": rng.integers(1, n + 1, count), "src_j": rng.integers(1, n + 1, count),
             "undirected": undirected, "relation_of": rng.choice(relations, count)}
    net = pajek._Network("", 1, 1, n=n)
    for name, column in lines.items():
        setattr(net, name, column.copy())
    seen, expected = set(), {"arcs": 0, "edges": 0}
    for i, j, u, r in zip(*(lines[k].tolist() for k in ("src_i", "src_j", "undirected", "relation_of"))):
        key = (r, u, min(i, j) if u else i, max(i, j) if u else j)
        expected["edges" if u else "arcs"] += key in seen
        seen.add(key)
    assert pajek._repeats(net) == expected and sum(expected.values()) > 0
    for name, column in lines.items():  # the columns are left as they were
        np.testing.assert_array_equal(getattr(net, name), column)


def test_repeats_hold_about_one_key_a_line():
    """The repeat count made eight arrays a line (the ids less one, both ends' minimum and maximum, two
    np.where's, the keys and their sorted copy; 2-4 s of the 12 s read of 10M arcs): one key a line,
    sorted in place, is enough."""
    import tracemalloc

    import sfapprox.io._pajek as pajek

    rng = np.random.default_rng(0)
    count, n = 200_000, 50_000
    net = pajek._Network("", 1, 1, n=n)
    net.src_i, net.src_j = rng.integers(1, n + 1, count), rng.integers(1, n + 1, count)
    net.undirected, net.relation_of = np.ones(count, bool), np.zeros(count, np.int64)
    tracemalloc.start()
    try:
        repeats = pajek._repeats(net)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert repeats["edges"] > 0 and peak < 12 * count, f"{peak / count:.1f} bytes a line"


# -- bulk reading of list sections ----------------------------------------------------------------------


def _parse_both(path, chunk: int) -> dict:
    """The networks of ``path`` as parsed line by line and in bulk (edge and list sections in chunks of
    about ``chunk`` characters): per reading, each network's columns, relations, first unnumbered line
    and repeats, or the message of the one error; and how many edge and list chunks were read in bulk."""
    from unittest import mock

    import sfapprox.io._pajek as pajek
    from sfapprox.io._common import DEFAULTS, Source

    read, bulk = {}, []

    def counted(columns):
        def counted_columns(*args):
            found = columns(*args)
            bulk.append(found is not None)
            return found
        return counted_columns

    for name, least in (("lines", 1 << 62), ("bulk", 0)):
        with mock.patch.object(pajek, "_BULK_MIN_CHARS", least), mock.patch.object(pajek, "_CHUNK_CHARS", chunk), \
                mock.patch.object(pajek, "_list_columns", counted(pajek._list_columns)), \
                mock.patch.object(pajek, "_edge_columns", counted(pajek._edge_columns)):
            src = Source(path, keep_sparse=True)
            try:
                nets = pajek._Parser(src, DEFAULTS).parse(src.read_text(pajek.parse_cost))
            except InputError as exc:
                read[name] = str(exc)
                continue
        read[name] = [({c: getattr(net, c).tolist() for c, _ in pajek._COLUMNS}, net.relations,
                       net.unnumbered_line, net.repeats) for net in nets]
    return {**read, "bulk_chunks": sum(bulk)}


def _bulk_agrees(text: str, chunk: int) -> None:
    """Check that ``text`` as a Pajek file reads the same in bulk (chunks of about ``chunk`` characters) as
    line by line (:func:`_parse_both`)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        read = _parse_both(write(Path(folder) / "g.net", text), chunk)
    assert read["bulk"] == read["lines"]


_SPACES = st.sampled_from([" ", "  ", "\t", " \t ", "\t\t"])
_ODD_LINES = ["% a comment", "", "   ", "\t"]
_BAD_TOKENS = ["0", "{big}", "1.5", "NA", "1,5", "2e3", "1" * 25, "-1"]


@st.composite
def _list_file(draw) -> str:
    """A Pajek network of list sections: random ids with random blanks, repeated targets, self-loops,
    sources alone, blank and comment lines, relation prefixes and attributes now and then, and maybe one
    bad token (a line's last)."""
    n = draw(st.integers(1, 30))
    ids = st.integers(1, n).map(str)
    out = [f"*Vertices {n}"]
    for _ in range(draw(st.integers(1, 3))):
        relation = draw(st.sampled_from(["", " :1", ' :2 "likes"']))
        out.append(f"*{draw(st.sampled_from(['Arcslist', 'Edgeslist', 'arcslist']))}{relation}")
        for _ in range(draw(st.integers(0, 40))):
            if draw(st.integers(0, 9)) == 0:
                out.append(draw(st.sampled_from(_ODD_LINES)))
                continue
            tokens = [draw(ids)] + draw(st.lists(ids, max_size=8))
            line = "".join(draw(_SPACES) + t for t in tokens)[1:] if len(tokens) > 1 else tokens[0]
            lead, trail = draw(st.sampled_from(["", " ", "\t"])), draw(st.sampled_from(["", " ", "\t "]))
            extra = draw(st.integers(0, 19))
            prefix = f"{extra}: " if extra in (1, 2) else ""  # a relation prefix (or "0: ", refused)
            prefix = "0: " if extra == 3 else prefix
            suffix = " c Red" if extra == 4 else ""
            out.append(f"{lead}{prefix}{line}{suffix}{trail}")
    if draw(st.integers(0, 3)) == 0:
        where = draw(st.integers(1, len(out) - 1))
        if not out[where].lstrip().startswith("*"):
            out[where] += " " + draw(st.sampled_from(_BAD_TOKENS)).format(big=n + 1)
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(out) + draw(st.sampled_from(["", end, end * 3]))


@settings(max_examples=100, deadline=None)  # (300 added 20-50 s to a run; seeds 1-8 at 300 passed)
@given(text=_list_file(), chunk=st.sampled_from([1, 16, 64, 1 << 23]))
def test_list_sections_read_in_bulk_as_line_by_line(text, chunk):
    """Any list section, read in bulk a chunk at a time (the chunks with anything but ids and blanks line
    by line): the same arcs and edges, in the same order, from the same lines, or the same error."""
    _bulk_agrees(text, chunk)


_ODD_EDGE_LINES = ["% a comment", "", "   ", "{i} {j} 2 c Red", "{i} {j} 1,5", "{i} {j} 1.5D+00", "2: {i} {j}",
                    "1:{i} {j} 3", "{i}\t{j}\t0.25", "  {i} {j}  ", "{i} {j} 1 2", "{i} {j} ic Blue"]
_BAD_EDGE_LINES = ["{i} {big}", "0 {j}", "{i}.0 {j}", "{i} {j} 1.2.3", "{i} {j} NA", "{i} {j} 1,000", "{i} {j} inf",
                   "{i} {j} 1e999", "{i}", "0: {i} {j}", "-1 {j}"]


@st.composite
def _edge_file(draw) -> str:
    """A Pajek network of ``*Arcs`` / ``*Edges`` sections: random ``i j`` or ``i j w`` lines (both widths in
    a section now and then) with random blanks, and now and then an odd line (comments, blank lines,
    attributes, decimal commas, Fortran exponents, relation prefixes, more tokens), and maybe one bad line."""
    n = draw(st.integers(1, 30))
    ids = st.integers(1, n)
    weights = st.sampled_from(["1", "0.5", "-2", "1e-3", "3.25", "7", "+1.5", ".5", "1E2"])
    out = [f"*Vertices {n}"]
    for _ in range(draw(st.integers(1, 3))):
        relation = draw(st.sampled_from(["", " :1", ' :2 "likes"']))
        out.append(f"*{draw(st.sampled_from(['Arcs', 'Edges', 'edges']))}{relation}")
        weighted = draw(st.sampled_from([True, False, None]))  # None: both widths
        for _ in range(draw(st.integers(0, 40))):
            i, j = draw(ids), draw(ids)
            if draw(st.integers(0, 9)) == 0:
                out.append(draw(st.sampled_from(_ODD_EDGE_LINES)).format(i=i, j=j))
                continue
            line = f"{i}{draw(_SPACES)}{j}"
            if weighted or (weighted is None and draw(st.booleans())):
                line += draw(_SPACES) + draw(weights)
            out.append(draw(st.sampled_from(["", " ", "\t"])) + line + draw(st.sampled_from(["", " ", "\t "])))
    if draw(st.integers(0, 3)) == 0:
        where = draw(st.integers(1, len(out) - 1))
        if not out[where].lstrip().startswith("*"):
            out[where] = draw(st.sampled_from(_BAD_EDGE_LINES)).format(i=draw(ids), j=draw(ids), big=n + 1)
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(out) + draw(st.sampled_from(["", end, end * 3]))


@settings(max_examples=100, deadline=None)
@given(text=_edge_file(), chunk=st.sampled_from([1, 16, 64, 1 << 23]))
def test_edge_sections_read_in_bulk_as_line_by_line(text, chunk):
    """Any ``*Arcs`` / ``*Edges`` section, read in bulk a chunk at a time (the chunks with an odd line line
    by line): the same arcs and edges, in the same order, from the same lines, or the same error."""
    _bulk_agrees(text, chunk)


@pytest.mark.parametrize("section", ["*Arcs", "*Edges"])
def test_an_odd_line_in_a_long_edge_section_leaves_the_other_chunks_in_bulk(tmp_path, section):
    """One comment or relation prefix in an ``*Arcs`` / ``*Edges`` section sent all of it line by line (a
    Python object a number, 2x the bulk's peak); now only its chunk, with the same result."""
    lines = [f"{k % 100000 + 1} {(7 * k) % 100000 + 1} {k % 5}.5\n" for k in range(50000)]
    lines[20000], lines[30000] = "% a comment\n", "1: 5 6 0,25\n"
    path = write(tmp_path / "big.net", f"*Network big\n*Vertices 100000\n{section}\n" + "".join(lines))
    read = _parse_both(path, 4096)
    assert read["bulk"] == read["lines"] and isinstance(read["bulk"], list)
    chunks = len(range(0, path.stat().st_size, 4096))
    assert read["bulk_chunks"] >= chunks - 3, (read["bulk_chunks"], chunks)  # all but the two odd lines' chunks


@pytest.mark.parametrize("section", ["*Arcslist", "*Edgeslist"])
@pytest.mark.parametrize("bad, message", [
    ("5 6 100001", r"line 25004: vertex id 100001 is out of range 1\.\.100000"),
    ("100001 6", r"line 25004: vertex id 100001 is out of range 1\.\.100000"),
    ("5 0 6", r"line 25004: vertex id 0 is out of range 1\.\.100000"),
    ("5 " + "9" * 25, r"line 25004: vertex id 9{25} is out of range 1\.\.100000"),
    ("5.0 6", r"line 25004: expected an integer vertex id, got '5\.0'"),
    ("5 6 0.5", r"line 25004: '0\.5' in a \*(Arcs|Edges)list line, which lists vertex ids only \(no weights\)"),
    ("5 6 NA", r"line 25004: 'NA' in a \*(Arcs|Edges)list line"),
    ("5 6 1,5", r"line 25004: '1,5' in a \*(Arcs|Edges)list line"),
    ("0: 5 6", r"line 25004: relation number 0 must be a positive integer"),
    ("2:", r"line 25004: expected 'i j k \.\.\.', got nothing after the relation number"),
])
def test_a_bad_line_deep_in_a_long_list_section_is_named_as_line_by_line(tmp_path, section, bad, message):
    lines = [f"{k % 100000 + 1} {(7 * k) % 100000 + 1} {(3 * k) % 100000 + 1}\n" for k in range(50000)]
    lines[25000] = bad + "\n"
    path = write(tmp_path / "big.net", f"*Network big\n*Vertices 100000\n{section}\n" + "".join(lines))
    read = _parse_both(path, 4096)  # the bad line in a later chunk than the first
    assert read["bulk"] == read["lines"] and re.search(message, read["bulk"]), read["bulk"]
    assert read["bulk_chunks"] > 2  # the chunks before the bad line's were read in bulk
    input_error(path, message, keep_sparse=True)


def test_a_long_plain_list_section_is_read_in_bulk(tmp_path, monkeypatch):
    """A list section of ids and blanks only was read line by line (a Python object an id)."""
    rng = np.random.default_rng(0)
    n = 500
    targets = [rng.integers(1, n + 1, int(rng.integers(0, 12))) for _ in range(n)]
    lines = "".join(f"{v}\t{' '.join(map(str, t))}\n" for v, t in enumerate(targets, 1))
    path = write(tmp_path / "big.net", f"*Vertices {n}\n*Edgeslist\n\n{lines}\n")
    _no_line_read_one_by_one(monkeypatch)
    d = load_matrix(path).to_dense()
    expected = np.zeros((n, n))
    for v, t in enumerate(targets):
        for u in t - 1:
            expected[v, u] += 1
            expected[u, v] += u != v
    np.testing.assert_array_equal(d, expected)


def test_a_list_file_is_checked_for_its_arcs_not_its_lines(tmp_path):
    """A list line holds ~10 arcs, each as costly as an *Arcs line, but the estimate counted lines: a
    list file's read peaked at twice what it was checked for, and was read under limits below its peak."""
    n = 20_000
    rng = np.random.default_rng(0)
    lines = "".join(f"{v} {' '.join(map(str, rng.integers(1, n + 1, 10)))}\n" for v in range(1, n + 1))
    for comment in ("", "% read line by line\n"):
        path = write(tmp_path / "g.net", f"*Vertices {n}\n*Arcslist\n{comment}{lines}")
        peak = _peak_of_load(path)
        with pytest.raises(ResourceError, match=r"g\.net: parsing ([\d,]+ lines one by one|list lines that hold [\d,]+ "
                                                r"arcs or edges beyond one a line) needs about"):
            load_matrix(path, keep_sparse=True, max_memory=peak)
        # not wild: 1.8x the peak before the matrix's assembly took less (_repeats, _adjacency: ~2x since,
        # with the check kept)
        assert _peak_of_load(path, max_memory=int(2.3 * peak)) == pytest.approx(peak, rel=0.05)


@pytest.mark.parametrize("comment", [False, True], ids=["bulk", "line by line"])
def test_a_matrix_section_is_read_within_its_check(tmp_path, monkeypatch, comment):
    """A ``*Matrix`` section's values are written into one array of the matrix's size, a chunk of its text
    at a time, and checked with the file's text: read in bulk, its chunks were joined in a second array and
    the sum and the dense adjacency made two more (13 MB traced for a 1 MB file checked for 8); with a
    comment, the whole section was read line by line into a list of floats, 32 bytes a value (25 MB)."""
    import sfapprox.io._pajek as pajek
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source

    monkeypatch.setattr(pajek, "_MATRIX_CHUNK_CHARS", 1 << 14)  # (the chunk's own cost as small as the test)
    n = 400
    X = (np.random.default_rng(0).random((n, n)) < 0.1).astype(float)
    rows = "".join(" ".join("1" if x else "0" for x in row) + "\n" for row in X)
    path = write(tmp_path / "m.net", f"*Vertices {n}\n*Matrix\n" + ("% a comment\n" if comment else "") + rows)
    read = []
    peak, _, checked = peak_and_checks(monkeypatch, lambda p: read.append(pajek.read_pajek(Source(p), DEFAULTS)),
                                       path)
    np.testing.assert_array_equal(read[0].matrix, X)
    assert peak <= checked, (peak, checked)


def _matrix_peak_and_check(monkeypatch, path, n: int) -> tuple[int, int]:
    """The traced peak of reading the ``*Matrix`` file ``path`` (n x n) and the largest check the read made."""
    import sfapprox.io._pajek as pajek
    from _io_helpers import peak_and_checks
    from sfapprox.io._common import DEFAULTS, Source

    read = []
    peak, _, checked = peak_and_checks(monkeypatch, lambda p: read.append(pajek.read_pajek(Source(p), DEFAULTS)),
                                       path)
    assert read[0].matrix.shape == (n, n)
    return peak, checked


@pytest.mark.parametrize("comment", [False, True], ids=["bulk", "line by line"])
def test_a_small_matrix_file_is_checked_near_its_peak(tmp_path, monkeypatch, comment):
    """A chunk's reading was counted at 16 bytes a character of a whole 1 MiB chunk (~6.5 traced in bulk),
    and a chunk read line by line was counted again as lines read one by one: a small file's check was
    1.8 (bulk) and 2.6 (line by line) times its peak. Now each chunk is checked with its own size and path."""
    n = 400  # 320 KB of text: one chunk
    rows = "".join(" ".join("1" if x else "0" for x in row) + "\n"
                   for row in np.random.default_rng(0).random((n, n)) < 0.1)
    path = write(tmp_path / "m.net", f"*Vertices {n}\n*Matrix\n" + ("% a comment\n" if comment else "") + rows)
    peak, checked = _matrix_peak_and_check(monkeypatch, path, n)
    assert peak <= checked <= 1.5 * peak, checked / peak


@pytest.mark.parametrize("comment", [False, True], ids=["bulk", "line by line"])
def test_a_matrix_on_one_line_is_checked_for_its_length(tmp_path, monkeypatch, comment):
    """A chunk ends at a line's end, so a matrix written on one line is one chunk however long: it was
    counted as a chunk of :data:`_MATRIX_CHUNK_CHARS` characters (its table, 4 bytes a character, or its
    list of floats, 32 bytes a value, read under the limit)."""
    import sfapprox.io._pajek as pajek

    monkeypatch.setattr(pajek, "_MATRIX_CHUNK_CHARS", 1 << 14)
    n = 300  # 180 KB on one line
    values = " ".join("1" if x else "0" for x in (np.random.default_rng(0).random(n * n) < 0.1))
    path = write(tmp_path / "m.net", f"*Vertices {n}\n*Matrix\n" + ("% a comment\n" if comment else "") + values + "\n")
    peak, checked = _matrix_peak_and_check(monkeypatch, path, n)
    assert peak <= checked, (peak, checked)


def test_a_2_mode_projection_is_checked_beside_what_the_read_holds(tmp_path):
    """B·Bᵀ's check counted the product alone: B, the lines' arrays and the file's bytes (12.8 MiB here), held
    while it is made, were left out.  Under a --max-memory between the product's figure and the product with
    them, the read is refused, naming both; above the two it loads."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n1, n2, lines = 1500, 40_000, 200_000
    i, j = rng.integers(1, n1 + 1, lines), rng.integers(n1 + 1, n1 + n2 + 1, lines)
    path = tmp_path / "two_mode.net"
    write(path, f"*Vertices {n1 + n2} {n1}\n*Edges\n" + "".join(f"{a} {b}\n" for a, b in zip(i, j)))
    B = sp.csr_array((np.ones(lines), (i - 1, j - n1 - 1)), shape=(n1, n2))
    B.sum_duplicates()
    counts = np.diff(B.tocsc().indptr).astype(np.int64)
    product = min(16 * int(np.sum(counts ** 2)), 8 * n1 * n1) * 2  # the projection's own figure
    held = 8 * 5 * lines + lines + B.data.nbytes + B.indices.nbytes  # the lines' columns, B: a floor of what is held
    assert held > 8 << 20
    with pytest.raises(ResourceError, match=r"2-mode projection \(rows\), 34\.3 MiB, beside the 1\d\.\d MiB the read "
                                            r"holds \(B, the lines' arrays, the file's bytes\) needs about"):
        load_matrix(path, max_memory=product + (held // 2))
    assert load_matrix(path, max_memory=product + held + (8 << 20)).n == n1
