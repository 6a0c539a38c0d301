"""ORDER BY reads the released outputs, whatever the analyst's aliases are called: DuckDB's ORDER BY
reads an output alias before an input column, and an alias may be a slot's own name (``COUNT(*) AS
o0``; the slow differential test found the keys ordered by the count)."""
import pytest


@pytest.mark.parametrize("alias", ["o0", "o1", "o2", "n"])
def test_the_keys_are_ordered_as_written(db, alias):
    rows = db.sql(f"SELECT clinic, clinic AS c2, COUNT(*) AS {alias} FROM visits GROUP BY clinic ORDER BY clinic",
                  epsilon=1.0).fetchall()
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    rows = db.sql(f"SELECT clinic, COUNT(*) AS {alias} FROM visits GROUP BY clinic ORDER BY clinic DESC",
                  epsilon=1.0).fetchall()
    assert [r[0] for r in rows] == sorted((r[0] for r in rows), reverse=True)
