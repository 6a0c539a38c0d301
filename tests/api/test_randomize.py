"""``dpsql.randomize`` (api/randomize.py): every kind of source in, a Parquet file or a DuckDB table out
with its parameters, the reports drawn from the mechanism's law, and what it refuses."""
import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpsql
from dpsql.api.randomize import SIDE_TABLE, read_parameters
from dpsql.errors import DpsqlError
from dpsql.mechanisms.randomized_response import RandomizedResponse
from tests.support.sources import SEEDED_ALPHA, binomial_pvalue

REGIONS = ["N", "S", "E", "W"]


def survey(rows: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"id": range(rows), "region": [REGIONS[i % 4] for i in range(rows)],
                         "smoker": [i % 3 == 0 for i in range(rows)], "age": [20 + i % 50 for i in range(rows)]})


def test_a_csv_becomes_a_parquet_file_with_its_parameters_in_the_metadata(tmp_path):
    survey().to_csv(tmp_path / "survey.csv", index=False)
    out = tmp_path / "survey_rr.parquet"
    done = dpsql.randomize(tmp_path / "survey.csv", ["region", "smoker"], {"region": 1.0, "smoker": 2.0}, out,
                           domains={"region": REGIONS}, rng=np.random.default_rng(1))
    written = pq.read_table(out).to_pandas()
    assert list(written.columns) == ["id", "region", "smoker", "age"]
    assert written["id"].tolist() == list(range(40)) and written["age"].equals(survey()["age"])
    assert set(written["region"]) <= set(REGIONS) and written["smoker"].dtype == bool
    params = read_parameters(out)
    assert params["region"] == {"mechanism": "4-ary randomized response", "epsilon": 1.0, "type": "VARCHAR",
                                "domain": REGIONS, "categories": 4, "p_keep": "{0.numerator}/{0.denominator}".format(
                                    RandomizedResponse(1.0, 4).p_keep)}
    assert params["smoker"]["domain"] == [False, True] and params["smoker"]["mechanism"].startswith("Warner")
    assert done["smoker"].p_keep == RandomizedResponse(2.0, 2).p_keep


def test_a_duckdb_table_becomes_a_table_with_a_row_of_parameters_per_column(tmp_path):
    source = tmp_path / "data.duckdb"
    con = duckdb.connect(str(source))
    con.register("df", survey())
    con.execute("CREATE TABLE people AS SELECT * FROM df")
    con.close()
    target = duckdb.connect(str(tmp_path / "out.duckdb"))
    dpsql.randomize(source, ["age"], 0.5, target, table="people", output_table="people_rr",
                    domains={"age": list(range(20, 70))})
    assert target.execute("SELECT count(*), min(age) >= 20, max(age) < 70 FROM people_rr").fetchall() == [(40, True, True)]
    assert read_parameters(target, "people_rr")["age"]["type"] == "BIGINT"
    assert target.execute(f"SELECT table_name, column_name FROM {SIDE_TABLE}").fetchall() == [("people_rr", "age")]


@pytest.mark.parametrize("make", [lambda df: df, pa.Table.from_pandas])
def test_dataframes_and_arrow_tables_are_read_and_the_policy_gives_the_domain(tmp_path, make):
    policy = {"budget": {"epsilon": 1}, "tables": {"data": {"privacy_unit": "id", "columns": {
        "region": {"keys": REGIONS}}}}}
    dpsql.randomize(make(survey()), ["region"], 1.0, tmp_path / "o.parquet", policy=policy)
    assert read_parameters(tmp_path / "o.parquet")["region"]["domain"] == REGIONS


def test_the_reports_keep_each_answer_with_p_keep():
    """20,000 answers "N" over four regions at epsilon 1 (seeded): the kept fraction against p_keep
    (binomial test, p > 0.001); the others spread over S, E and W alike."""
    rows = pd.DataFrame({"region": ["N"] * 20_000})
    con = duckdb.connect()
    dpsql.randomize(rows, ["region"], 1.0, con, output_table="t", domains={"region": REGIONS},
                    rng=np.random.default_rng(3))
    counts = dict(con.execute("SELECT region, count(*) FROM t GROUP BY region").fetchall())
    p = float(RandomizedResponse(1.0, 4).p_keep)
    assert binomial_pvalue(counts["N"], 20_000, p) > SEEDED_ALPHA
    moved = [counts[r] for r in "SEW"]
    assert binomial_pvalue(moved[0], sum(moved), 1 / 3) > SEEDED_ALPHA


def refused(tmp_path, **kwargs) -> DpsqlError:
    args = {"source": survey(), "columns": ["region"], "epsilon": 1.0, "output": tmp_path / "o.parquet",
            "domains": {"region": REGIONS}, **kwargs}
    with pytest.raises(DpsqlError) as info:
        dpsql.randomize(**args)
    assert not (tmp_path / "o.parquet").exists() or kwargs.get("output") == tmp_path / "o.parquet"
    return info.value


@pytest.mark.parametrize("kwargs, code, words", [
    ({"columns": ["height"]}, "DP510", "no column 'height'"),
    ({"columns": ["region", "REGION"]}, "DP510", "twice"),
    ({"columns": []}, "DP510", "name the columns"),
    ({"columns": ["age"]}, "DP511", "no public domain"),
    ({"domains": {"region": ["N", "S"]}}, "DP512", "'E', outside its domain"),
    ({"domains": {"region": ["N"]}}, "DP511", "1 categories"),
    ({"columns": ["age"], "domains": {"age": ["a", "b"]}}, "DP511", "does not convert to its type BIGINT"),
    ({"columns": ["age"], "domains": {"age": [1, "01"]}}, "DP511", "repeats"),
    ({"epsilon": 0.0}, "DP401", "epsilon > 0"),
    ({"epsilon": {"smoker": 1.0}}, "DP510", "no epsilon for column 'region'"),
    ({"output": "o.csv"}, "DP510", "cannot hold the parameters"),
    ({"policy": {"budget": {"epsilon": 1}, "tables": {"other": {"privacy_unit": "id"}}}}, "DP510", "no table 'data'"),
])
def test_what_it_cannot_do_is_refused_with_a_code_and_nothing_is_written(tmp_path, kwargs, code, words):
    error = refused(tmp_path, **kwargs)
    assert error.code == code and words in error.message, error.message
    assert error.hint


def test_null_is_not_a_category():
    rows = survey().astype({"region": object})
    rows.loc[5, "region"] = None
    with pytest.raises(DpsqlError) as info:
        dpsql.randomize(rows, ["region"], 1.0, duckdb.connect(), domains={"region": REGIONS})
    assert info.value.code == "DP512" and "NULL" in info.value.message and "COALESCE" in info.value.hint


def test_an_existing_output_is_not_replaced(tmp_path):
    out = tmp_path / "o.parquet"
    out.write_bytes(b"earlier")
    assert refused(tmp_path, output=out).code == "DP513"
    assert out.read_bytes() == b"earlier"
    con = duckdb.connect()
    con.execute("CREATE TABLE data (x INTEGER)")
    with pytest.raises(DpsqlError) as info:
        dpsql.randomize(survey(), ["smoker"], 1.0, con)
    assert info.value.code == "DP513" and con.execute("SELECT count(*) FROM data").fetchall() == [(0,)]


def test_a_table_of_a_duckdb_connection_in_and_out_and_its_name_quoted():
    source, target = duckdb.connect(), duckdb.connect()
    source.execute('CREATE TABLE "My Survey" AS SELECT range AS id, range % 2 = 0 AS smoker FROM range(10)')
    dpsql.randomize(source, ["smoker"], 1.0, target, table="My Survey")
    assert target.execute('SELECT count(*) FROM "My Survey"').fetchall() == [(10,)]
    assert read_parameters(target, "My Survey")["smoker"]["mechanism"] == "Warner randomized response"
