"""Free work is bounded (issue 20, finding 4): planning is linear in the size of the query, and the
work one query may ask for has limits with codes. Planning's linearity is shown by
benchmarks/planning.py (its numbers in benchmarks/README.md), not timed here."""
from __future__ import annotations

from dpsql import testing


def test_an_expression_ordered_by_twice_is_two_outputs(db):
    """Outputs are found by position, not equality: two equal hidden outputs once shared one slot, so
    the second ORDER BY term named a column that did not exist (DP311)."""
    sql = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY COUNT(*) + 1, COUNT(*) + 1"
    assert testing.run(db, sql).rows == testing.run(db, "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex").rows
