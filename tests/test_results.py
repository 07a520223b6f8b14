"""Result records: JSON shape, winner, tables."""

from sfapprox.results import Comparison, MethodResult


def test_comparison_shape_and_winner():
    c = Comparison({"name": "m", "n": 4}, 10, "sf", [
        MethodResult("sf", "ok", 10, 1.0, 0.1, 0.5),
        MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1}),
        MethodResult("nmf", "not applicable", reason="negative"),
    ])
    d = c.to_dict()
    assert d["winner"] == "sf" and d["budget"] == 10
    assert set(d["results"][0]) == {"method", "status", "nnz", "fro_error", "rel_error", "seconds", "params", "reason"}
    assert d["results"][2]["fro_error"] is None


def test_comparison_table_marks_the_winner():
    c = Comparison({"name": "m", "n": 4}, 10, "sf", [
        MethodResult("sf", "ok", 10, 1.0, 0.1, 0.5, {"n_factors": 2, "stop_reason": "ftol"}),
        MethodResult("tsvd", "ok", 9, 2.0, 0.2, 0.1, {"rank": 1}),
    ])
    (table,) = c.tables()
    assert table.rows[0]["method"] == "sf ★" and table.best[0] and not table.best[1]
    assert table.rows[0]["details"] == "M=2 stop=ftol" and table.rows[1]["seconds"] == "0.10"
