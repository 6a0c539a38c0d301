"""Warnings when the noise dominates a choice or most rows (issue 25, item 3; api/advice.py rules 7 and
8): post-processing of the plan and the released rows, free. Seeded connections: the noise is drawn as
an analyst's would be, the same on every run."""
import duckdb
import numpy as np
import pytest

import dpsql

# 1,000 public suppliers with about 2 rows each (TPC-H Q21's shape: small counts among many
# candidates), and 8 regions holding rows in only 2 of them, one in ten thousand (Q5, Q7: most
# released groups empty), besides a few large bands.
SUPPLIERS, REGIONS = 1000, 8
POLICY = {"budget": {"epsilon": 100}, "tables": {"t": {"privacy_unit": "row", "columns": {
    "s": {"keys": list(range(SUPPLIERS))}, "r": {"keys": list(range(REGIONS))}, "band": {"keys": [0, 1, 2, 3]}}}}}


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT range % {SUPPLIERS} AS s, CASE WHEN range % 10000 = 0 THEN 1 ELSE 0 END * "
                "(range % 2 + 1) AS r, CASE WHEN range % 10 < 6 THEN 0 WHEN range % 10 < 9 THEN 1 ELSE 2 END AS band "
                "FROM range(20000)")
    return con


def warnings(con, sql: str, seed: int, epsilon: float = 1.0) -> list[str]:
    db = dpsql.connect(con, policy=POLICY, ledger=":memory:", rng=np.random.default_rng(seed))
    return db.sql(sql, epsilon=epsilon).warnings


CHOICES = ["SELECT s, COUNT(*) AS n FROM t GROUP BY s ORDER BY n DESC LIMIT 10",
           "SELECT s, COUNT(*) AS n FROM t GROUP BY s HAVING n > 25"]


@pytest.mark.parametrize("sql", CHOICES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_choice_among_values_the_noise_exceeds_warns(con, sql, seed):
    """Counts of 20 among 1,000 candidates at epsilon 0.1: noise +-30 each, +-138 for all of them."""
    found = [w for w in warnings(con, sql, seed, epsilon=0.1) if "whose noise exceeds the spread" in w]
    assert len(found) == 1 and "by n," in found[0] and "1000 candidate group(s)" in found[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_choice_the_noise_cannot_change_warns_nothing(con, seed):
    """Bands of 12,000, 6,000, 2,000 and 0 rows at epsilon 1: noise +-3."""
    found = warnings(con, "SELECT band, COUNT(*) AS n FROM t GROUP BY band ORDER BY n DESC LIMIT 2", seed)
    assert found == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_most_groups_within_their_noise_of_zero_warn(con, seed):
    """Regions 1 and 2 hold a row each, region 0 the rest, 5 regions nothing: 5 of 8 near 0."""
    found = warnings(con, "SELECT r, COUNT(*) AS n FROM t GROUP BY r", seed)
    assert [w for w in found if "most released groups cannot be told from empty" in w and "of 8 rows" in w]
    assert not [w for w in found if "every value released" in w]   # not all: rule 2 is not it


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_groups_that_hold_data_warn_nothing(con, seed):
    assert warnings(con, "SELECT band, s % 2 AS odd, COUNT(*) AS n FROM t WHERE band < 3 GROUP BY band, odd", seed) == []
