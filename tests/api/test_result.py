"""A Result reads like a DuckDB relation (every verb), is materialised once, prints as a table and
renders in Jupyter with its intervals."""
import csv
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql import Result

SQL = "SELECT sex, COUNT(*) AS n, AVG(income) AS inc FROM people GROUP BY sex"


@pytest.fixture
def res(db):
    return db.sql(SQL, epsilon=1, ci=0.95)


def test_shape_columns_and_types(res):
    assert res.columns == ["sex", "n", "n_ci_low", "n_ci_high", "inc", "inc_ci_low", "inc_ci_high"]
    assert res.types == ["VARCHAR", "BIGINT", "BIGINT", "BIGINT", "DOUBLE", "DOUBLE", "DOUBLE"]
    assert res.dtypes == res.types
    assert res.shape == (2, 7) and len(res) == 2


def test_every_verb_reads_the_same_rows(res, tmp_path):
    rows = res.fetchall()
    assert [r[0] for r in rows] == ["F", "M"]
    assert list(res) == rows
    assert res.fetchall() == rows                       # materialised: reading again gives the same numbers
    assert res.arrow().to_pylist() == [dict(zip(res.columns, r)) for r in rows]
    assert res.df().values.tolist() == [list(r) for r in rows]
    arrays = res.fetchnumpy()
    assert list(arrays) == res.columns and arrays["n"].tolist() == [r[1] for r in rows]
    assert pa.table(res).to_pylist() == res.arrow().to_pylist()        # __arrow_c_stream__
    assert duckdb.sql("SELECT * FROM res").fetchall() == rows           # DuckDB reads it by its stream
    res.write_parquet(str(tmp_path / "r.parquet"))
    assert pq.read_table(tmp_path / "r.parquet").to_pylist() == res.arrow().to_pylist()
    res.write_csv(str(tmp_path / "r.csv"))
    with open(tmp_path / "r.csv") as f:
        written = list(csv.reader(f))
    assert written[0] == res.columns and [w[0] for w in written[1:]] == ["F", "M"]
    assert [int(w[1]) for w in written[1:]] == [r[1] for r in rows]


def test_polars(res):
    pl = pytest.importorskip("polars")
    frame = res.pl()
    assert isinstance(frame, pl.DataFrame) and frame.columns == res.columns
    assert frame.rows() == res.fetchall()


def test_pl_without_polars_says_how_to_get_it(res, monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)   # import polars now raises ImportError
    with pytest.raises(ImportError, match="pip install polars"):
        res.pl()


def test_fetchone_and_fetchmany_keep_a_cursor(res):
    everything = res.fetchall()
    assert res.fetchone() == everything[0]
    assert res.fetchmany(5) == everything[1:]
    assert res.fetchone() is None and res.fetchmany(3) == []
    assert res.fetchall() == []                          # nothing left after the cursor; then it starts over
    assert res.fetchall() == everything
    assert res.fetchone() == everything[0]
    assert res.fetchall() == everything[1:]              # the rest, as DuckDB's relation gives it
    assert list(res) == everything                       # iteration always starts at the first row
    with pytest.raises(ValueError):
        res.fetchmany(-1)


def test_prints_as_a_box_table_with_noisy_columns_marked(res):
    text = str(res)
    lines = text.splitlines()
    assert lines[0].startswith("┌") and "│   sex   │" in lines[1]
    assert "~ bigint" in lines[2] and "varchar" in lines[2] and "~ varchar" not in lines[2]
    n, low, high = res.fetchall()[0][1:4]
    assert f"{n} [{low}, {high}]" in text                # the interval beside its value, not two columns
    assert "n_ci_low" not in text
    assert "2 rows" in text and "~ noisy: differentially private (epsilon 1, delta 0)" in text
    assert "95% confidence intervals of the noise around the bounded value" in text   # not what bounding removed
    assert "they do not cover what bounding removed" in text
    assert repr(res) == text


def test_show_prints_first_and_last_rows(db, capsys):
    res = db.sql("SELECT zip, COUNT(*) AS n FROM people GROUP BY zip", epsilon=1, delta=1e-6)
    res.show(max_rows=4)
    out = capsys.readouterr().out
    zips = [r[0] for r in res.fetchall()]
    assert zips[0] in out and zips[1] in out and zips[-1] in out and zips[2] not in out
    assert f"{len(res)} rows (4 shown)" in out and "…" in out


def test_html_for_jupyter(res):
    page = res._repr_html_()
    n, low, high = res.fetchall()[0][1:4]
    assert page.startswith("<table") and f"{n} [{low}, {high}]" in page
    assert "<small>~ bigint</small>" in page and "95% confidence intervals" in page


def test_html_escapes_values(db):
    res = Result(pa.table({"k": ["<b>x</b>"]}), db.explain("SELECT COUNT(*) FROM clinics"))
    assert "<b>" not in res._repr_html_() and "&lt;b&gt;" in res._repr_html_()


def test_a_public_result_is_marked_exact(db):
    res = db.sql("SELECT region, COUNT(*) AS n FROM clinics GROUP BY region ORDER BY region")
    assert "~" not in str(res).splitlines()[2] and "exact: public tables only" in str(res)
    assert res.warnings == []


def test_fetchnumpy_masks_nulls():
    res = Result(pa.table({"x": pa.array([1.5, None])}), None)
    arrays = res.fetchnumpy()
    assert isinstance(arrays["x"], np.ma.MaskedArray) and arrays["x"].mask.tolist() == [False, True]


def test_empty_result(db):
    res = db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING COUNT(*) < 0", epsilon=1)
    assert len(res) == 0 and res.fetchall() == [] and res.fetchone() is None
    assert "0 rows" in str(res) and res.df().empty


def test_types_are_duckdbs_names():
    import datetime
    import decimal
    table = pa.table({
        "i8": pa.array([1], pa.int8()), "u64": pa.array([1], pa.uint64()), "f32": pa.array([1], pa.float32()),
        "b": [True], "s": pa.array(["x"], pa.large_string()), "bin": [b"x"], "d": [datetime.date(2020, 1, 1)],
        "ts": pa.array([datetime.datetime(2020, 1, 1)], pa.timestamp("ns")),
        "tz": pa.array([datetime.datetime(2020, 1, 1)], pa.timestamp("us", tz="UTC")),
        "dec": pa.array([decimal.Decimal("1.5")], pa.decimal128(10, 2)), "tm": [datetime.time(1, 2)],
        "lst": [[1]], "nul": pa.array([None], pa.null()), "dur": [datetime.timedelta(1)],
        "st": [{"a": 1, "b": "x"}], "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))})
    assert Result(table, None).types == [str(t) for t in duckdb.connect().from_arrow(table).types]
