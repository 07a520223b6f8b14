"""What the tests of the result objects' ``to_frame()`` share."""

from __future__ import annotations

import csv
import io
import math


def assert_frame_is_the_csv(frame, tables) -> None:
    """Every value of ``frame`` is the one the CSV of ``tables`` writes (:func:`~sfapprox.formats.render_csv`):
    the same columns, a number equal to the one written (all its digits), a missing one where the cell is
    empty, the text or flag where it is written as such."""
    from sfapprox.formats import render_csv

    header, *written = list(csv.reader(io.StringIO(render_csv(tables))))
    assert list(frame.columns) == header and len(frame) == len(written)
    for values, cells in zip(frame.itertuples(index=False), written):
        for title, value, cell in zip(header, values, cells):
            if cell == "":
                assert value is None or (isinstance(value, float) and math.isnan(value)), (title, value)
            elif isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
                assert str(value) == cell, (title, value, cell)
            else:
                assert value == float(cell), (title, value, cell)
