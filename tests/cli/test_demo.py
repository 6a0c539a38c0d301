"""The bundled demo dataset: deterministic, and consistent with its own policy."""
from __future__ import annotations

import duckdb
import pytest
import yaml

from dpsql.cli import demo as demo

ROWS = 2_000


def contents(db_path):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return {
            "people": con.execute("SELECT * FROM people ORDER BY person_id").fetchall(),
            "visits": con.execute("SELECT * FROM visits ORDER BY ALL").fetchall(),
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = demo.build_dataset(tmp_path_factory.mktemp("demo") / "demo.duckdb", rows=ROWS, seed=7)
    return path, contents(path)


def schema(db_path):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        rows = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                           "WHERE database_name = current_database() AND schema_name = 'main'").fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, str]] = {}
    for table, column, dtype in rows:
        out.setdefault(table, {})[column] = dtype
    return out


def test_same_seed_gives_identical_tables(built, tmp_path):
    path, first = built
    again = demo.build_dataset(tmp_path / "again.duckdb", rows=ROWS, seed=7)
    assert contents(again) == first


def test_different_seed_gives_different_tables(built, tmp_path):
    _, first = built
    other = demo.build_dataset(tmp_path / "other.duckdb", rows=ROWS, seed=8)
    assert contents(other)["people"] != first["people"]


def test_rebuilding_replaces_the_file(built, tmp_path):
    path = tmp_path / "d.duckdb"
    demo.build_dataset(path, rows=50, seed=1)
    demo.build_dataset(path, rows=ROWS, seed=7)
    assert contents(path) == built[1]


def test_one_row_per_person_with_unique_identifiers(built):
    _, data = built
    people = data["people"]
    assert len(people) == ROWS
    assert len({row[0] for row in people}) == ROWS
    assert len({row[1] for row in people}) == ROWS
    assert all(len(ssn) == 11 and ssn[3] == ssn[6] == "-" for _, ssn, *_ in people)


def test_policy_file_is_written_next_to_the_database(built):
    path, _ = built
    assert yaml.safe_load((path.parent / "policy.yaml").read_text()) == demo.demo_policy()


def test_policy_shape():
    policy = demo.demo_policy()
    assert policy["budget"] == {"epsilon": 10.0, "delta": 1e-6}
    assert policy["default_epsilon"] == 1.0
    people, visits = policy["tables"]["people"], policy["tables"]["visits"]
    assert (people["privacy_unit"], people["max_groups_per_unit"], people["max_rows_per_unit"]) == \
        ("person_id", 1, 1)
    assert (visits["privacy_unit"], visits["max_groups_per_unit"], visits["max_rows_per_unit"]) == \
        ("person_id", 2, 3)
    assert people["columns"]["ssn"] == {"identifier": True}
    assert people["columns"]["person_id"] == {"identifier": True}
    assert people["columns"]["zip"] == {}
    assert demo.demo_policy() is not demo.demo_policy()      # callers may mutate their copy


def test_policy_matches_schema(built):
    path, _ = built
    actual = schema(path)
    policy = demo.demo_policy()
    assert set(policy["tables"]) == set(actual)
    for table, spec in policy["tables"].items():
        # Every column is declared, so nothing in the data is left without a policy decision.
        assert set(spec["columns"]) == set(actual[table])
        assert spec["privacy_unit"] in actual[table]
        for column, col in spec["columns"].items():
            if "lower" in col:
                assert actual[table][column] in ("INTEGER", "BIGINT", "DOUBLE")
                assert col["lower"] < col["upper"]
            if col.get("type") == "int":
                assert actual[table][column] in ("INTEGER", "BIGINT")


def test_data_fits_the_policy_where_it_should(built):
    path, _ = built
    policy = demo.demo_policy()
    con = duckdb.connect(str(path), read_only=True)
    try:
        for table, spec in policy["tables"].items():
            for column, col in spec["columns"].items():
                if "keys" in col:
                    seen = {v for (v,) in con.execute(f"SELECT DISTINCT {column} FROM {table}").fetchall()}
                    assert seen == set(col["keys"]), (table, column)
        assert con.execute("SELECT min(age) >= 0 AND max(age) <= 100 FROM people").fetchone()[0]
    finally:
        con.close()


def test_data_exercises_clamping_and_contribution_bounds(built):
    """The demo is meant to show the machinery at work, so the data must need it."""
    path, _ = built
    policy = demo.demo_policy()
    income_upper = policy["tables"]["people"]["columns"]["income"]["upper"]
    cost_upper = policy["tables"]["visits"]["columns"]["cost"]["upper"]
    con = duckdb.connect(str(path), read_only=True)
    try:
        q = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
        assert q(f"SELECT count(*) FROM people WHERE income > {income_upper}") > 0
        assert q("SELECT min(income) FROM people") >= 0
        assert q(f"SELECT count(*) FROM visits WHERE cost > {cost_upper}") > 0
        # Some people visit one clinic more than max_rows_per_unit times, or more clinics than L.
        assert q("SELECT max(n) FROM (SELECT count(*) n FROM visits GROUP BY person_id, clinic)") > 3
        assert q("SELECT max(n) FROM (SELECT count(DISTINCT clinic) n FROM visits GROUP BY person_id)") > 2
        # zip is a private category: some zips are held by a single person.
        assert q("SELECT count(*) FROM (SELECT zip FROM people GROUP BY zip HAVING count(*) = 1)") > 0
        # Several visits per person on average: user-level privacy matters.
        assert q("SELECT count(*) FROM visits") > 1.5 * ROWS
    finally:
        con.close()


def test_side_by_side_joins_on_keys():
    columns, rows = demo.side_by_side(["sex", "n", "s"], [("M", 1.5, 2.5), ("F", 3.5, 4.5)],
                                      [("F", 3, 4), ("M", 1, 2)], 1)
    assert columns == ["sex", "n (dp)", "n (exact)", "s (dp)", "s (exact)"]
    assert rows == [("F", 3.5, 3, 4.5, 4), ("M", 1.5, 1, 2.5, 2)]


def test_side_by_side_without_keys():
    assert demo.side_by_side(["n"], [(9.5,)], [(10,)], 0) == (["n (dp)", "n (exact)"], [(9.5, 10)])


def test_policy_is_accepted_by_dpsql(built):
    import dpsql

    path, _ = built
    con = duckdb.connect(str(path), read_only=True)
    try:
        db = dpsql.connect(con, ledger=":memory:", policy=str(path.parent / "policy.yaml"))
        assert "visits" in str(db.explain("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic"))
        assert db.budget.spent_epsilon == 0
    finally:
        con.close()


def test_run_twice_in_one_directory_and_process(tmp_path):
    """The demo closes what it opens, so it can rebuild its own files."""
    for _ in range(2):
        assert len(demo.run(dir=tmp_path, out=lambda line: None, rows=300)) == len(demo.EXAMPLES)


def test_run_prints_every_example_and_the_exact_comparison(tmp_path):
    lines = []
    results = demo.run(dir=tmp_path, out=lines.append, rows=ROWS)
    text = "\n".join(lines)
    assert len(results) == len(demo.EXAMPLES)
    for _, sql, *_ in demo.EXAMPLES:
        assert sql.splitlines()[0] in text
    assert "exact (owner-only, for comparison)" in text
    assert text.count("error[DP") == len(demo.REFUSALS)
