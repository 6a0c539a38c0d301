"""The lowered query as a program of stages (lower/program.py, issue 27 items 1 and 5), without Spark: each
CTE placed by what it does (a draw, or reading one, is the driver's; reading private rows is the exact
stage's), the exact CTEs the driver reads collected (at most one row per partition and leaf), and the
program, run stage by stage on DuckDB itself, gives the one query's rows for the whole accept corpus."""
import pytest
import sqlglot
from hypothesis import given, settings
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql.lower.program import DRIVER, EXACT, draws, split
from dpsql.plan.model import Plan
from tests.support.checks import COMMON, examples
from tests.support.fixture import POLICY, make_database
from tests.support.leak_world import LEAK_POLICY, make_base_database
from tests.support.paths import GRAMMAR
from tests.support.queries.grammar import grammar_queries
from tests.support.queries.typed import typed_queries

ACCEPT = sorted((GRAMMAR / "accept").glob("*.sql"))
PRIVATE = {name for name, table in POLICY["tables"].items() if not table.get("public")}


@pytest.fixture(scope="module")
def db():
    return dpsql.connect(make_database(), ledger=":memory:", policy=POLICY)


def lowered(db, sql: str) -> exp.Select:
    plan = testing.lower(db, sql)
    assert isinstance(plan, Plan) and plan.lowered is not None
    return plan.lowered


def collected(program) -> list[str]:
    return [name for name, _ in program.collected]


def test_a_median_collects_its_leaves_and_descends_on_the_driver(db):
    program = split(lowered(db, "SELECT COUNT(*) AS n, MEDIAN(age) AS m FROM people"), PRIVATE)
    tree = {name: place for name, place in program.places.items() if name.startswith("__m1_")}
    assert tree["__m1_leaf"] == EXACT
    # the levels above the leaves are sums of collected leaves, and the descent draws between levels
    assert {place for name, place in tree.items() if name != "__m1_leaf"} == {DRIVER}
    assert collected(program) == ["__agg", "__m1_leaf"]


def test_the_bounding_two_collected_stages_read_is_shared_once(db, leak_db):
    """A user-level median beside a count: __agg and the tree's leaves both read __bounded, which the
    lowering computes once (MATERIALIZED); the program names it, outermost only (not __units inside it),
    so an engine of stages computes it once per run too. One collected stage shares nothing."""
    program = split(lowered(db, "SELECT clinic, COUNT(*) AS n, MEDIAN(cost) AS m FROM visits GROUP BY clinic"), PRIVATE)
    assert collected(program) == ["__agg", "__m1_leaf"]
    assert [name for name, _ in program.shared] == ["__bounded"]
    assert split(lowered(db, "SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic"), PRIVATE).shared == ()
    private_keys = lowered(leak_db, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) txt, COUNT(*) AS n, "
                                    "MEDIAN(cost) AS m FROM visits GROUP BY txt")
    assert {c.alias for c in private_keys.find_all(exp.CTE) if c.args.get("materialized")} >= {"__units", "__bounded"}
    assert [name for name, _ in split(private_keys, PRIVATE).shared] == ["__bounded"]


def test_a_count_distinct_keeps_its_per_unit_values_on_the_exact_stage(db):
    program = split(lowered(db, "SELECT COUNT(DISTINCT clinic) AS c FROM visits"), PRIVATE)
    assert program.places["__m0_values"] == program.places["__m0_agg"] == EXACT
    assert collected(program) == ["__agg"]   # one row per partition: __m0_values (per unit) stays on Spark


def test_min_and_max_by_the_exponential_mechanism_choose_on_the_driver(db):
    program = split(lowered(db, "SELECT MIN(age) AS lo, MAX(age) AS hi FROM people"), PRIVATE)
    assert [program.places[f"__m0_{s}"] for s in ("leaf", "hist", "cell", "out")] == [EXACT, DRIVER, DRIVER, DRIVER]
    assert collected(program) == ["__m0_leaf", "__m1_leaf"]


def test_the_row_of_a_largest_total_reads_its_public_row_on_the_driver(db):
    sql = (GRAMMAR / "accept" / "117_the_row_of_the_largest_private_total.sql").read_text()
    program = split(lowered(db, sql), PRIVATE)
    assert collected(program) == ["__agg"]
    assert "clinics" in {t.name for t in program.driver.find_all(exp.Table)}   # public, held by the driver


def test_places_follow_what_a_stage_does_not_its_name(db):
    """Every CTE renamed (as the next mechanism's would be): the same places, the same collected stages."""
    tree = lowered(db, "SELECT sex, COUNT(*) AS n, QUANTILE_CONT(income, 0.9) AS q FROM people GROUP BY sex")
    names = {cte.alias: f"stage_{i}" for i, cte in enumerate(tree.find_all(exp.CTE))}
    renamed = tree.transform(lambda n: exp.to_identifier(names[n.name], quoted=n.quoted)
                             if isinstance(n, exp.Identifier) and n.name in names else n)
    before, after = split(tree, PRIVATE), split(renamed, PRIVATE)
    assert {names[k]: v for k, v in before.places.items()} == after.places
    assert [names[n] for n in collected(before)] == collected(after)


def refusal(sql: str) -> str:
    with pytest.raises(dpsql.DpsqlError) as info:
        split(sqlglot.parse_one(sql, read="duckdb"), {"t"})
    assert info.value.code == "DP440"
    return info.value.message


def test_a_driver_stage_that_would_read_rows_is_refused():
    rows = "WITH __rows AS (SELECT u AS __unit, x FROM t), "
    assert "row by row" in refusal(rows + "__n AS (SELECT system.main.f(x) AS y FROM __rows) SELECT y FROM __n")
    per_unit = rows + "__u AS (SELECT __unit, COUNT(*) AS c FROM __rows GROUP BY __unit) SELECT c FROM __u"
    assert "__u row by row" in refusal(per_unit)
    assert "private table 't'" in refusal("WITH __a AS (SELECT COUNT(*) AS c FROM t) "
                                          "SELECT system.main.f(c) FROM __a, t")


def test_a_draw_over_private_rows_is_refused_not_placed_on_the_exact_stage():
    """A draw is the driver's whatever it reads: one straight over a private table's totals (one row per
    key, which a collected stage could hold) would otherwise be computed, noise and all, by Spark."""
    assert "private table 't'" in refusal("WITH __n AS (SELECT k, system.main.f(COUNT(*)) AS y FROM t GROUP BY k) "
                                          "SELECT y FROM __n")


def test_a_draw_is_never_in_an_exact_stage_and_what_is_collected_is_grouped(db):
    """Over the whole accept corpus: no exact stage calls a registered function or a random one."""
    for path in ACCEPT:
        plan = testing.lower(db, path.read_text())
        if not isinstance(plan, Plan) or plan.lowered is None:
            continue
        program = split(plan.lowered, PRIVATE)
        assert not any(draws(stage) for _, stage in program.collected), path.stem
        assert program.collected, path.stem


def stage_by_stage(db, sql: str, private) -> tuple[list, list] | None:
    """(the program's rows, run stage by stage on DuckDB itself: each collected stage's rows handed to the
    driver stage as a table; the one query's rows), noise off; None for a query without a private stage."""
    plan = testing.lower(db, sql)
    if not isinstance(plan, Plan) or plan.lowered is None:
        return None
    con, params = testing.duckdb_connection(db), testing.params(plan.rewritten_sql)
    program = split(plan.lowered, private)
    tables = {name: con.sql(stage.sql(dialect="duckdb"), params=params if "$" in stage.sql() else None).to_arrow_table()
              for name, stage in program.collected}
    for name, rows in tables.items():
        con.register(name, rows)
    try:
        driver = program.driver.sql(dialect="duckdb")
        got = con.execute(driver, params if "$" in driver else None).fetchall()
    finally:
        for name in tables:
            con.unregister(name)
    return got, con.execute(plan.rewritten_sql, params).fetchall()


@pytest.mark.parametrize("path", ACCEPT, ids=lambda p: p.stem)
def test_the_program_run_stage_by_stage_gives_the_one_querys_rows(db, path):
    """The cut loses and reorders nothing (rows in the query's own order) over the whole accept corpus."""
    ran = stage_by_stage(db, path.read_text(), PRIVATE)
    if ran is None:
        pytest.skip("no private stage (a public last stage)")
    assert ran[0] == ran[1]


@pytest.fixture(scope="module")
def leak_db():
    return dpsql.connect(make_base_database(), ledger=":memory:", policy=LEAK_POLICY)


def generated(db, sql: str, private) -> None:
    """A generated query dpsql plans splits (no refusal: today's lowering never hands the driver rows), and
    its program gives the one query's rows (as multisets: a query without ORDER BY has no order)."""
    try:
        ran = stage_by_stage(db, sql, private)
    except dpsql.DpsqlError as e:
        assert e.code != "DP440", (sql, e.format())
        return
    if ran is not None:
        assert sorted(map(repr, ran[0])) == sorted(map(repr, ran[1])), sql


@settings(max_examples=examples(40), derandomize=True, **COMMON)
@given(sql=grammar_queries())
def test_generated_queries_split_into_programs_that_give_their_rows(db, sql):
    generated(db, sql, PRIVATE)


@settings(max_examples=examples(40), derandomize=True, **COMMON)
@given(sql=typed_queries())
def test_typed_queries_split_into_programs_that_give_their_rows(leak_db, sql):
    generated(leak_db, sql, {n for n, t in LEAK_POLICY["tables"].items() if not t.get("public")})
