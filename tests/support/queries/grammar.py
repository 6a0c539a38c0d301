"""The grammar fuzzer: queries from the grammar of grammar/dpsql.ebnf over the fixture tables (people at
row level, visits at user level), with a drawn share of choices past it (unknown and identifier
columns, forbidden functions, statements, comments, terminators, deep nesting, edge literals).
tests/properties/test_fuzz.py runs them through the whole pipeline; the leak and differential tests
run them on their own worlds, which extend the fixture tables."""
from __future__ import annotations

from hypothesis import strategies as st

# --------------------------------------------------------------------------------------------
# The SQL generator: the grammar of grammar/dpsql.ebnf over the fixture tables, and well past it
# --------------------------------------------------------------------------------------------
TABLES = {
    "people": {
        "bounded": ["age", "income"], "keys": ["sex", "state"], "string": ["sex", "state", "zip"],
        "number": ["age", "income"], "boolean": ["active"], "date": ["joined"],
        "identifiers": ["ssn", "id"], "unit": None, "private_keys": ["zip", "joined", "active"],
        "all": ["age", "income", "sex", "state", "zip", "joined", "active"],
    },
    "visits": {
        "bounded": ["cost"], "keys": ["clinic"], "string": ["clinic"], "number": ["cost"],
        "boolean": [], "date": [], "identifiers": ["person_id"], "unit": "person_id", "private_keys": [],
        "all": ["clinic", "cost"],
    },
}
KEY_VALUES = {"sex": ["F", "M", "X"], "state": ["CA", "NY", "TX", "WA"], "clinic": ["a", "b", "c", "z"]}
UNKNOWN_COLUMNS = ["height", "rowid", "people", "visits", "x", "n", "count", "_", "Age2", "ssn_", "Ssn",
                   "PERSON_ID", "iD"]

HUGE_NUMBERS = [
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "18446744073709551616",
    "170141183460469231731687303715884105727", "99999999999999999999999999999999999999999",
    "1e308", "1e309", "1e400", "-1e400", "2.2250738585072014e-308", "5e-324", "1e-400", "0.0", "-0.0",
    "0x7FFFFFFFFFFFFFFF", "1_000_000", ".5", "5.", "1e", "00000000000000000000001", "4294967296",
]
SPECIAL_VALUES = [
    "'nan'::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "CAST('nan' AS DOUBLE)", "'NaN'::FLOAT",
    "'infinity'::DOUBLE", "CAST('Infinity' AS REAL)", "NULL::DOUBLE", "'nan'", "'inf'", "1e309::DOUBLE",
    "(0.0 / 0.0)", "(1.0 / 0.0)", "(-1 / 0)", "'9223372036854775808'::HUGEINT", "'-0'::DOUBLE",
]
STRINGS = ["''", "'a'", "'F'", "'M'", "'CA'", "'00042'", "'ssn-1'", "'it''s'", "'%'", "'_'", "'\\'",
           "'ünïcödé ✓'", "'\x00'", "'--'", "'/*'", "';'", "'\"'", "E'\\x41'", "'2020-06-01'",
           "'not a date'", "'2020-13-45'", "'yes'", "'true'", "'nan'", "'1e400'", "' 42 '"]
FORBIDDEN_FUNCTIONS = [
    "random()", "setseed(0.5)", "read_csv('/etc/passwd')", "read_csv_auto('/etc/passwd')",
    "current_setting('threads')", "getenv('HOME')", "now()", "current_timestamp", "uuid()",
    "gen_random_uuid()", "nextval('s')", "currval('s')", "glob('*')", "regexp_matches(zip, '(')",
    "regexp_matches(ssn, '[')", "regexp_matches(zip, '(a*)*b')", "version()", "current_database()",
    "read_text('/etc/passwd')", "read_blob('/etc/passwd')", "read_parquet('x.parquet')",
    "query('SELECT 1')", "query_table('people')", "hash(ssn)", "md5(ssn)", "typeof(ssn)",
    "duckdb_settings()", "which_secret('s3://x', 's3')", "pragma_version()", "error('boom')",
    "sleep_ms(1)", "txid_current()", "current_query()", "list_value(ssn)", "struct_pack(a := ssn)",
    "system.main.random()", "main.random()", "dpsql_noise_000000000000(1, 1, 0)", "count_star()",
    "system.main.dpsql_noise(1, 1, 0)", "to_json(people)", "row(ssn)",
]
SCALAR_FUNCTIONS = ["abs", "round", "floor", "ceil", "sqrt", "ln", "log10", "exp", "sign", "lower",
                    "upper", "length", "trim", "coalesce", "least", "greatest", "year", "month",
                    "strlen", "reverse", "isnan", "isinf", "nullif", "ifnull", "power", "mod",
                    "date_part", "date_trunc", "strftime", "concat", "substr", "left", "hash"]
GOOD_AGGREGATES = ["COUNT", "SUM", "AVG", "count", "Sum", "avg"]
BAD_AGGREGATES = ["MIN", "MAX", "MEDIAN", "STDDEV", "VARIANCE", "VAR_POP", "MODE", "FIRST", "LAST", "QUANTILE_DISC",
                  "ANY_VALUE", "ARBITRARY", "LIST", "STRING_AGG", "ARRAY_AGG", "HISTOGRAM", "BIT_OR",
                  "APPROX_COUNT_DISTINCT", "PRODUCT", "FSUM", "SUMKAHAN", "KAHAN_SUM", "ENTROPY",
                  "COUNT_IF", "BOOL_OR", "ARG_MAX", "QUANTILE_CONT", "GEOMEAN", "SUM_NO_OVERFLOW",
                  "FAVG", "MEAN", "COUNTIF", "REGR_COUNT", "COVAR_POP", "RESERVOIR_QUANTILE"]
STATEMENTS = [
    "PRAGMA database_list", "PRAGMA enable_profiling", "PRAGMA threads=1", "SET threads = 1",
    "SET enable_external_access = true", "SET lock_configuration = false", "RESET threads",
    "COPY people TO 'out.csv'", "COPY people FROM '/etc/passwd'", "ATTACH 'x.db' AS x",
    "ATTACH ':memory:' AS m", "DETACH x", "INSTALL httpfs", "LOAD httpfs", "FORCE INSTALL x",
    "CALL pragma_version()", "CALL duckdb_settings()", "EXPORT DATABASE '/tmp/x'",
    "IMPORT DATABASE '/tmp/x'", "CREATE TEMP MACRO random() AS 0.5",
    "CREATE TEMP MACRO dpsql_noise(a, b, c) AS a", "CREATE OR REPLACE TEMP MACRO count_star() AS 1",
    "CREATE TABLE t AS SELECT * FROM people", "CREATE VIEW v AS SELECT ssn FROM people",
    "CREATE SEQUENCE s", "DROP TABLE people", "DELETE FROM people", "UPDATE people SET age = 0",
    "INSERT INTO people SELECT * FROM people", "USE memory", "BEGIN", "COMMIT", "ROLLBACK",
    "CHECKPOINT", "VACUUM", "DESCRIBE people", "SHOW TABLES", "SUMMARIZE people",
    "EXPLAIN SELECT COUNT(*) FROM people", "EXPLAIN ANALYZE SELECT ssn FROM people",
    "SELECT ssn FROM people", "SELECT 1", "SELECT setseed(0.5)", "FROM people", "VALUES (1)",
    "TABLE people", "PIVOT people ON sex", "UNPIVOT people ON age INTO NAME k VALUE v",
    "SELECT * FROM duckdb_secrets()", "CREATE SECRET (TYPE s3)", "UPDATE EXTENSIONS",
]
TERMINATORS = [";", ";;", "; ", ";\n-- end", "; -- x", " ;", ";\x00", "; ;", ";\n\n"]
COMMENTS = ["-- comment\n", "/* c */", "/**/", "-- ; DROP TABLE people\n", "/* nested /* */ */",
            "/* unterminated", "--", "#", "\n", "\t", "  ", "\r\n", "\u00a0", "\u2028"]
DP_OPTION_NAMES = ["epsilon", "delta", "max_groups_contributed", "privacy_unit_column",
                   "max_rows_contributed", "EPSILON", "Delta", "epsilon", "bogus", "kappa",
                   "max_partitions_contributed", "min_privacy_units_per_group", "group_selection_strategy"]
DP_OPTION_VALUES = ["1", "1.0", "0.5", "10", "1e-6", "1e-9", "0", "-1", "1e-300", "5e-324", "1e300",
                    "1e400", "'nan'::DOUBLE", "'inf'::DOUBLE", "NULL", "'1'", "TRUE", "2.5", "0.999999",
                    "1", "9223372036854775807", "person_id", "ssn", "age", "id", "random()",
                    "(SELECT 1)", "-0.0", "1 + 1", "[1]", "'x'"]


class Gen:
    """One query's draws: ``wildness`` is the percentage of choices that leave the grammar."""

    def __init__(self, draw, wildness: int):
        self.draw = draw
        self.wildness = wildness
        self.table = "people"
        self.info = TABLES["people"]
        self.alias: str | None = None
        self.aliases: list[str] = []
        self.private_keys: list[str] = []

    # ---- draw helpers -----------------------------------------------------------------------
    def wild(self, scale: int = 1) -> bool:
        return self.wildness > 0 and self.draw(st.integers(0, 99)) < min(95, self.wildness * scale)

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def maybe(self, percent: int = 50) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def ws(self) -> str:
        if self.wild():
            return self.pick([" ", "  ", "\n", "\t", " /* x */ ", " -- c\n", "\n\n  "])
        return " "

    # ---- names ------------------------------------------------------------------------------
    def spell(self, name: str) -> str:
        """A name as the user may write it: any case, quoted or not."""
        style = self.draw(st.integers(0, 5 if self.wildness else 3))
        if style == 0:
            return name
        if style == 1:
            return name.upper()
        if style == 2:
            return "".join(self.pick([c.lower(), c.upper()]) for c in name) if name else name
        if style == 3:
            return f'"{name}"'
        if style == 4:
            return f'"{name.upper()}"'
        return f'"{name} "' if self.maybe(30) else f'"{name}""x"'

    def column_name(self, kind: str = "all") -> str | None:
        candidates = self.info.get(kind) or []
        if self.wild():
            return self.pick(self.info["identifiers"] + UNKNOWN_COLUMNS + TABLES["visits" if self.table == "people"
                                                                                   else "people"]["all"])
        if not candidates:
            return None
        return self.pick(candidates)

    def column(self, kind: str = "all") -> str:
        name = self.column_name(kind)
        if name is None:
            return self.literal(kind)
        ref = self.spell(name)
        qualifier = self.draw(st.integers(0, 3))
        if self.wild():
            q = self.pick(["x", "main", "main.people", "memory.main.people", "visits", "people", "v", "p",
                           "system.main", '"people"', "PEOPLE"])
            return f"{q}.{ref}" if not self.wild() else self.pick([f"{q}.*", "*", f"{ref}.{ref}", f"({ref})"])
        if qualifier == 1:
            return f"{self.spell(self.alias or self.table)}.{ref}"
        return ref

    # ---- literals ---------------------------------------------------------------------------
    def literal(self, kind: str = "number") -> str:
        if self.wild():
            return self.pick(HUGE_NUMBERS + SPECIAL_VALUES + STRINGS + ["NULL", "TRUE", "FALSE", "DATE '2020-01-01'",
                                                                        "INTERVAL 1 DAY", "[1, 2]", "{'a': 1}",
                                                                        "$1", "?", "$x", "x'00'"])
        if kind in ("number", "bounded"):
            value = self.draw(st.one_of(st.integers(-5, 1200), st.floats(-10, 1500, allow_nan=False).map(
                lambda f: round(f, 3))))
            return str(value)
        if kind == "boolean":
            return self.pick(["TRUE", "FALSE", "true"])
        if kind == "date":
            return self.pick(["'2020-06-01'", "'2021-01-01'", "DATE '2020-03-04'", "'2019-12-31'"])
        if kind in ("string", "keys"):
            values = [f"'{v}'" for vs in KEY_VALUES.values() for v in vs] + ["'00042'", "'00000'", "''", "'x'"]
            return self.pick(values)
        return self.pick(["1", "'a'", "NULL"])

    # ---- expressions past the grammar ------------------------------------------------------------
    def wild_expression(self, depth: int) -> str:
        col = self.column("number")
        choice = self.draw(st.integers(0, 14))
        if depth <= 0:
            choice = self.pick([0, 1, 2, 12])
        if choice == 0:
            return self.pick(FORBIDDEN_FUNCTIONS)
        if choice == 1:
            return self.pick(SPECIAL_VALUES + HUGE_NUMBERS)
        if choice == 2:
            op = self.pick(["*", "/", "//", "%", "+", "-", "<<", ">>", "^", "**", "&", "|", "||", "::"])
            rhs = self.pick(["9223372036854775807", "0", "(age - age)", "age", "0.0", "-1", "1e308",
                             "9223372036854775808", "income", "'x'", "NULL", "INTEGER", "DOUBLE"])
            return f"{col} {op} {rhs}"
        if choice == 3:
            target = self.pick(["INT", "INTEGER", "BIGINT", "HUGEINT", "TINYINT", "DOUBLE", "DATE", "BOOLEAN",
                                "VARCHAR", "DECIMAL(2,1)", "UTINYINT", "BIT", "UUID", "INTERVAL"])
            inner = self.pick([col, "zip", "sex", "ssn", "state", "joined", "income", "clinic", "cost"])
            return self.pick([f"CAST({inner} AS {target})", f"{inner}::{target}", f"TRY_CAST({inner} AS {target})"])
        if choice == 4:
            fname = self.pick(SCALAR_FUNCTIONS)
            args = ", ".join(self.wild_expression(depth - 1) if self.maybe(30) else self.column()
                             for _ in range(self.draw(st.integers(0, 3))))
            return f"{fname}({args})"
        if choice == 5:
            return (f"CASE WHEN {self.condition(depth - 1)} THEN {self.operand('number', depth - 1)} "
                    f"ELSE {self.operand('number', depth - 1)} END")
        if choice == 6:
            return f"({self.select(depth - 1)})"
        if choice == 7:
            return f"EXISTS ({self.select(depth - 1)})"
        if choice == 8:
            return f"({self.wild_expression(depth - 1)})"
        if choice == 9:
            return self.pick(["list_transform([1, 2], x -> x + age)", "[age, income]", "{'k': ssn}",
                              "COLUMNS(*)", "COLUMNS('s.*')", "* EXCLUDE (ssn)", "people", "people.*",
                              "row_number() OVER ()", "lag(age) OVER (ORDER BY ssn)", "age IS DISTINCT FROM 1",
                              "age::VARCHAR LIKE '1%'", "ssn SIMILAR TO 'x'", "ssn GLOB '*'", "ssn ILIKE '%1'"])
        if choice == 10:
            return f"{self.column()} COLLATE nocase"
        if choice == 11:
            return f"-{self.operand('number', depth - 1)}"
        if choice == 12:
            return self.pick(["age * 9223372036854775807", "income * 1e308 * 1e308", "age // 0", "age % 0",
                              "income / (age - age)", "CAST(zip AS INT)", "zip::INTEGER", "1 / 0",
                              "'nan'::DOUBLE", "sqrt(-1)", "ln(0)", "age - 9223372036854775807 - 2",
                              "power(10, 400)", "abs(-9223372036854775808)", "exp(1000)"])
        if choice == 13:
            return f"{self.aggregate(depth - 1)}"
        return f"{self.column()} {self.pick(['+', '*', '-', '/'])} {self.column()}"

    def operand(self, kind: str, depth: int) -> str:
        if depth > 0 and self.wild():
            return self.wild_expression(depth)
        if self.maybe(60):
            return self.column(kind)
        return self.literal(kind)

    # ---- predicates -------------------------------------------------------------------------
    def predicate(self, depth: int) -> str:
        kinds = [k for k in ("number", "string", "date") if self.info.get(k)]
        kind = self.pick(kinds)
        choice = self.draw(st.integers(0, 8))
        if choice in (6, 8) and not self.info["boolean"]:
            choice = 7
        if depth > 0 and self.wild():
            choice = self.draw(st.integers(9, 14))
        if choice <= 2:
            op = self.pick(["=", "<>", "!=", "<", "<=", ">", ">="] + (["==", "<=>", "~", "LIKE", "^@"]
                                                                      if self.wild() else []))
            return f"{self.operand(kind, depth)} {op} {self.operand(kind, depth)}"
        if choice == 3:
            items = ", ".join(self.literal(kind) for _ in range(self.draw(st.integers(1, 4))))
            return f"{self.column(kind)} {self.pick(['IN', 'NOT IN'])} ({items})"
        if choice == 4:
            return (f"{self.operand(kind, depth)} {self.pick(['BETWEEN', 'NOT BETWEEN'])} "
                    f"{self.operand(kind, depth)} AND {self.operand(kind, depth)}")
        if choice == 5:
            return f"{self.column()} IS {self.pick(['NULL', 'NOT NULL'])}"
        if choice == 6:
            return self.column("boolean")
        if choice == 7:
            return self.pick(["TRUE", "FALSE"])
        if choice == 8:
            return f"{self.column('boolean')} = {self.literal('boolean')}"
        if choice == 9:
            return f"{self.column()} IN ({self.select(depth - 1)})"
        if choice == 10:
            return f"EXISTS ({self.select(depth - 1)})"
        if choice == 11:
            return f"{self.wild_expression(depth - 1)} {self.pick(['=', '>', '<', 'IS NOT', 'IN'])} {self.literal()}"
        if choice == 12:
            return self.pick(["ssn = '123'", "ssn != '123'", "ssn LIKE 'ssn-1%'", "person_id = 3", "id < 5",
                              "zip = 42", "age = '42'", "joined > 'not a date'", "joined = '2020-02-30'",
                              "active = 'yes'", "income > 1e400", "age > 9223372036854775808",
                              "age IN (1, 'a')", "age BETWEEN 'a' AND 'b'", "zip > 0", "regexp_matches(zip, '(')",
                              "state = sex", "age = income", "joined = 1", "income = 'nan'", "active",
                              "NOT active", "age", "zip", "'x'", "1", "NULL", "age IN ()", "COUNT(*) > 1",
                              "sex = 'F' COLLATE nocase", "zip IN ('1', NULL)", "income = 'nan'::DOUBLE"])
        if choice == 13:
            return f"{self.column()} {self.pick(['IS', 'IS NOT'])} {self.pick(['TRUE', 'FALSE', 'NULL', 'DISTINCT FROM 1'])}"
        return f"{self.pick(FORBIDDEN_FUNCTIONS)} {self.pick(['=', '>', 'IS NOT'])} {self.literal()}"

    def condition(self, depth: int) -> str:
        if depth <= 0 or self.maybe(45):
            pred = self.predicate(depth)
        else:
            pred = f" {self.pick(['AND', 'OR', 'and', 'or'])} ".join(
                self.condition(depth - 1) for _ in range(self.draw(st.integers(2, 3))))
        if self.maybe(15):
            pred = f"NOT {pred}" if not self.maybe(50) else f"NOT ({pred})"
        if self.maybe(20):
            pred = f"({pred})"
        return pred

    # ---- aggregates and outputs ---------------------------------------------------------------
    def bounds(self, whole: bool = False) -> str:
        if self.wild():
            lo, hi = self.pick(["0", "-1e308", "'x'", "NULL", "'nan'::DOUBLE", "1e400", "100", "-5", "age"]), \
                self.pick(["50", "1e308", "0", "-1", "'inf'::DOUBLE", "age", "NULL", "9223372036854775807"])
            return self.pick([f"({lo}, {hi})", f"({lo})", f"({lo}, {hi}, 3)", lo, "()", f"[{lo}, {hi}]"])
        lo = self.draw(st.integers(0 if whole else -10, 20))
        hi = lo + self.draw(st.integers(1, 200))
        if not whole and self.maybe(20):
            return f"({lo}.5, {hi}.25)"
        return f"({lo}, {hi})"

    def aggregate(self, depth: int = 2) -> str:
        if self.wild():
            fname = self.pick(BAD_AGGREGATES + GOOD_AGGREGATES)
            inner = self.pick([self.column(), "*", f"DISTINCT {self.column()}", "DISTINCT person_id",
                               "DISTINCT *", self.wild_expression(depth - 1) if depth > 0 else "age",
                               f"{self.column()}, {self.column()}", "", "ALL age", f"{self.column()} ORDER BY age"])
            agg = f"{fname}({inner})"
            return self.pick([agg, f"{agg} FILTER (WHERE {self.condition(0)})", f"{agg} OVER ()",
                              f"{agg} OVER (PARTITION BY ssn)", f"{agg} * 2", f"{agg} + 1", f"-{agg}",
                              f"{agg} / COUNT(*)", f"CAST({agg} AS INT)", f"ROUND({agg})",
                              f"COUNT(DISTINCT {self.pick(['person_id', 'ssn', 'id', 'age'])})",
                              f"SUM({agg})", agg])
        kind = self.draw(st.integers(0, 3))
        if kind == 0:
            agg, bounded = f"{self.pick(['COUNT', 'count'])}(*)", False
        elif kind == 1:
            agg, bounded = f"{self.pick(['COUNT', 'Count'])}({self.column()})", False
        else:
            fname = self.pick(["SUM", "AVG", "sum", "avg", "MEDIAN", "QUANTILE_CONT", "percentile_cont"])
            q = f", {self.pick(['0', '0.1', '0.5', '0.9', '1', '1.0'])}" if fname.lower().endswith("_cont") else ""
            agg, bounded = f"{fname}({self.column('bounded')}{q})", True
        if self.maybe(20):
            # GoogleSQL per-aggregate bounds: per group (a unit's total; whole numbers for COUNT) on a
            # user-level table, per row (clamp each value) for SUM/AVG
            user_level = self.info["unit"] is not None
            if self.wild():
                name = self.pick(["contribution_bounds_per_row", "contribution_bounds_per_group",
                                  "CONTRIBUTION_BOUNDS_PER_GROUP", "bounds", "x"])
            elif bounded:
                name = self.pick(["contribution_bounds_per_group", "contribution_bounds_per_row"]) if user_level \
                    else "contribution_bounds_per_row"
            else:
                name = "contribution_bounds_per_group" if user_level else None
            if name is not None:
                agg = f"{agg[:-1]}, {name} => {self.bounds(whole=not bounded)})"
        return agg

    def output(self, keys: list[str]) -> tuple[str, str | None, str | None]:
        """(text, the key it selects or None, alias) of one SELECT item."""
        if keys and self.maybe(30):
            key = self.pick(keys)
            text = self.spell(key) if not self.maybe(20) else f"{self.spell(self.alias or self.table)}.{self.spell(key)}"
            is_key = key
        elif self.wild():
            text = self.pick([self.column(), "*", f"{self.spell(self.alias or self.table)}.*", self.wild_expression(2),
                              self.literal(), "COLUMNS(*)", f"{self.column()} AS {self.column()}"])
            is_key = None
        else:
            text = self.aggregate()
            is_key = None
        alias = None
        if self.maybe(30):
            alias = self.pick(["n", "total", "s", "a", "x", "count", "sex", "age", '"my col"', "ssn", "N",
                               '"n"', "o0", "__agg", "k0", "m0", "__out", '"o1"', '"m0"', "v_m0"])
            if self.wild():
                alias = self.pick(["NULL", "select", "1", "'s'", '""', '"a.b"', "count(*)", alias])
            text = f"{text} {self.pick(['AS ', ''])}{alias}"
        return text, is_key, alias

    # ---- DP clause ------------------------------------------------------------------------------
    def dp_clause(self) -> str:
        if not self.wild():
            options = [f"epsilon = {self.pick(['1', '0.5', '1.0', '2', '0.1'])}"]
            if self.private_keys:   # GROUP BY a key without public keys: partition selection needs delta
                options.append(f"delta = {self.pick(['1e-6', '1e-5', '0.000001', '1e-9', '1e-3'])}")
            elif self.maybe(50):
                options.append(f"delta = {self.pick(['1e-6', '1e-5', '0.000001', '0'])}")
            if self.maybe(40):
                options.append(f"max_groups_contributed = {self.pick(['1', '2', '3'])}"
                               if self.info["unit"] else "max_groups_contributed = 1")
            if self.table == "visits" and self.maybe(50):
                options.append(f"privacy_unit_column = {self.spell('person_id')}")
            options = self.draw(st.permutations(options))
        else:
            options = [f"{self.pick(DP_OPTION_NAMES)} {self.pick(['=', '=>', ':=', ''])} {self.pick(DP_OPTION_VALUES)}"
                       for _ in range(self.draw(st.integers(0, 5)))]
        body = ", ".join(options)
        form = self.draw(st.integers(0, 5 if self.wildness else 0))
        return [f"WITH DIFFERENTIAL_PRIVACY OPTIONS({body})", f"WITH DIFFERENTIAL_PRIVACY OPTIONS ({body})",
                "WITH DIFFERENTIAL_PRIVACY", f"with differential_privacy options({body}",
                f"WITH DIFFERENTIAL_PRIVACY OPTIONS({body}) OPTIONS({body})",
                f"WITH ANONYMIZATION OPTIONS({body})"][form]

    # ---- FROM ---------------------------------------------------------------------------------
    def source(self, depth: int) -> str:
        table = self.spell(self.table)
        alias = ""
        if self.alias:
            alias = f" {self.pick(['AS ', ''])}{self.spell(self.alias)}"
        if self.wild():
            other = "visits" if self.table == "people" else "people"
            choice = self.draw(st.integers(0, 9))
            if choice == 0:
                return self.pick(["main.people", "memory.main.people", "main.visits", "information_schema.tables",
                                  "read_csv('/etc/passwd')", "'/etc/passwd'", "'people.csv'", "duckdb_settings()",
                                  "range(10)", "people TABLESAMPLE 10%", "people USING SAMPLE 5",
                                  "(VALUES (1), (2)) t(age)", "system.main.people", "temp.main.people",
                                  "pg_catalog.pg_class", "secrets", "people, visits", "people AT (VERSION => 1)",
                                  "unnest([1, 2, 3])", "generate_series(1, 10)", "sqlite_master",
                                  "glob('*')", "query_table('people')", "people*"]) + alias
            if choice == 1 and depth > 0:
                return f"({self.select(depth - 1)}){alias or ' AS s'}"
            if choice == 2:
                join = self.pick(["JOIN", "LEFT JOIN", "CROSS JOIN", "NATURAL JOIN", "POSITIONAL JOIN",
                                  "ASOF JOIN", ",", "INNER JOIN", "SEMI JOIN", "ANTI JOIN"])
                on = "" if join in (",", "CROSS JOIN", "NATURAL JOIN", "POSITIONAL JOIN") else \
                    self.pick([" ON TRUE", f" ON {table}.id = {other}.person_id", " USING (id)", " ON 1 = 1"])
                return f"{table}{alias} {join} {self.pick([other, table + ' q', '(SELECT 1) z'])}{on}"
            if choice == 3:
                return f"{other}{alias}"
            if choice == 4:
                return f"{table}{alias} WITH ORDINALITY"
        return f"{table}{alias}"

    # ---- the SELECT -----------------------------------------------------------------------------
    def select(self, depth: int = 2) -> str:
        self.table = self.pick(list(TABLES))
        self.info = TABLES[self.table]
        self.alias = self.pick(["p", "v", "t", "x", "people"]) if self.maybe(25) else None
        keys = list(self.draw(st.lists(st.sampled_from(self.info["keys"]), max_size=2, unique=True)))
        # private keys (no public domain): GROUP BY them releases only groups a DP selection step keeps
        self.private_keys = [k for k in self.info["private_keys"] if self.maybe(12)]
        keys += self.private_keys
        if self.wild(2):
            keys += self.draw(st.lists(st.sampled_from(["zip", "ssn", "age", "joined", "active", "person_id",
                                                        "id", "income", "cost", "height"]), max_size=2))
        n_out = self.draw(st.integers(1, 4))
        outputs = [self.output(keys) for _ in range(n_out)]
        if not any(is_key is None for _, is_key, _ in outputs) and not self.wild():
            outputs.append((self.aggregate(), None, None))
        if self.maybe(30):
            outputs = list(self.draw(st.permutations(outputs)))
        texts = [t for t, _, _ in outputs]
        self.aliases = [a for _, _, a in outputs if a is not None]
        parts = ["SELECT"]
        if self.private_keys or self.maybe(10) or (self.wildness and self.maybe(10)):
            parts.append(self.dp_clause())
        if self.wild():
            parts.append(self.pick(["DISTINCT", "ALL", "DISTINCT ON (sex)", "TOP 5"]))
        parts.append(", ".join(texts))
        if not (self.wild() and self.maybe(30)):
            parts.append(f"FROM {self.source(depth)}")
        if self.maybe(50):
            parts.append(f"WHERE {self.condition(self.draw(st.integers(0, 3)))}")
        if keys:
            items = []
            for key in keys:
                positions = [i + 1 for i, (_, k, _) in enumerate(outputs) if k == key]
                if positions and self.maybe(20):
                    items.append(str(positions[0]))
                else:
                    items.append(self.spell(key))
            if self.wild():
                items.append(self.pick(["0", "99", "-1", "ALL", "ROLLUP(sex)", "CUBE(state)", "age + 1", "COUNT(*)",
                                        "GROUPING SETS ((sex), ())", "()", "random()", "'sex'", "1.5"]))
            parts.append(f"GROUP BY {', '.join(items)}")
        elif self.wild():
            parts.append(f"GROUP BY {self.pick(['ALL', 'ssn', 'zip', '1', '()', 'age'])}")
        if self.maybe(20):
            parts.append(f"HAVING {self.post_condition(keys, texts)}")
        if self.maybe(25):
            parts.append(f"ORDER BY {', '.join(self.order_item(keys, texts) for _ in range(self.draw(st.integers(1, 2))))}")
        if self.maybe(20):
            parts.append(f"LIMIT {self.count_literal()}")
            if self.maybe(40):
                parts.append(f"OFFSET {self.count_literal()}")
        if self.wild():
            parts.append(self.pick(["QUALIFY row_number() OVER () = 1", "WINDOW w AS ()", "FOR UPDATE",
                                    "USING SAMPLE 10", "LIMIT 1 LIMIT 2", "FETCH FIRST 1 ROWS ONLY"]))
        return self.ws().join(parts)

    def count_literal(self) -> str:
        if self.wild():
            return self.pick(["-1", "age", "1e10", "'5'", "(SELECT 1)", "10%", "NULL", "ALL", "1.5",
                              "9223372036854775807", "99999999999999999999", "random()", "$1"])
        return str(self.draw(st.integers(0, 10)))

    def post_operand(self, keys: list[str], texts: list[str], literal: bool = True) -> str:
        aliases = self.aliases
        choice = self.draw(st.integers(0, 3 if literal else 2))
        if choice == 0 or (choice == 1 and not aliases) or (choice == 2 and not keys):
            return self.aggregate()
        if choice == 1:
            return self.pick(aliases)
        if choice == 2:
            return self.spell(self.pick(keys))
        return self.literal(self.pick(["number", "string"]))

    def post_condition(self, keys: list[str], texts: list[str]) -> str:
        if self.wild():
            return self.pick([self.condition(1), f"{self.column()} > 1", "ssn = 'x'", "random() > 0.5",
                              f"{self.aggregate()} > (SELECT COUNT(*) FROM people)", "COUNT(*) / 0 > 1",
                              "SUM(income) = 'nan'::DOUBLE", "COUNT(*) > 9223372036854775807"])
        preds = []
        for _ in range(self.draw(st.integers(1, 2))):
            op = self.pick(["=", "<>", "<", "<=", ">", ">="])
            preds.append(f"{self.post_operand(keys, texts)} {op} {self.post_operand(keys, texts)}")
        return f" {self.pick(['AND', 'OR'])} ".join(preds)

    def order_item(self, keys: list[str], texts: list[str]) -> str:
        if self.wild():
            item = self.pick([self.column(), "random()", "99", "0", "ALL", "ssn", "age + 1", "-1",
                              "(SELECT 1)", "'x'", self.wild_expression(1)])
        else:
            item = self.post_operand(keys, texts, literal=False) if self.maybe(70) else \
                str(self.draw(st.integers(1, len(texts))))
        return f"{item}{self.pick(['', ' ASC', ' DESC', ' desc'])}" + (
            self.pick([" NULLS FIRST", " NULLS LAST"]) if self.wild() else "")


def _deep(g: Gen, base: str) -> str:
    """Deep nesting and wide queries: the shapes that make recursive code fall over."""
    n = g.draw(st.sampled_from([2, 10, 50, 100, 200, 500, 1000, 3000]))
    choice = g.draw(st.integers(0, 10))
    if choice == 0:
        return f"SELECT COUNT(*) FROM people WHERE {'(' * n}age > 1{')' * n}"
    if choice == 1:
        return f"SELECT COUNT(*) FROM people WHERE {'NOT ' * n}active"
    if choice == 2:
        return f"SELECT COUNT(*) FROM people WHERE {' AND '.join(['age > 1'] * n)}"
    if choice == 3:
        return f"SELECT COUNT(*) FROM people WHERE {' OR '.join(f'age = {i}' for i in range(n))}"
    if choice == 4:
        return f"SELECT COUNT(*) FROM people WHERE age IN ({', '.join(str(i) for i in range(n))})"
    if choice == 5:
        return f"SELECT {', '.join(['COUNT(*)'] * min(n, 500))} FROM people"
    if choice == 6:
        inner = "SELECT COUNT(*) FROM people"
        for _ in range(min(n, 200)):
            inner = f"SELECT COUNT(*) FROM ({inner}) t"
        return inner
    if choice == 7:
        return f"SELECT COUNT(*) FROM people WHERE age > {'abs(' * n}1{')' * n}"
    if choice == 8:
        return f"SELECT COUNT(*) FROM people WHERE age > {' + '.join(['1'] * n)}"
    if choice == 9:
        return f"SELECT state, COUNT(*) FROM people GROUP BY state HAVING {' AND '.join(['COUNT(*) > 1'] * n)}"
    return f"{'(' * min(n, 300)}{base}{')' * min(n, 300)}"


@st.composite
def grammar_queries(draw) -> str:
    """A query from the grammar, with a drawn share of choices (0-60%) past it, then wrapped."""
    g = Gen(draw, draw(st.sampled_from([0, 0, 3, 10, 25, 60])))
    sql = g.select(depth=2)
    if g.wild():
        wrap = draw(st.integers(0, 12))
        if wrap == 0:
            sql = f"WITH t AS ({sql}) SELECT COUNT(*) FROM t"
        elif wrap == 1:
            sql = f"WITH people AS (SELECT * FROM people WHERE ssn = 'ssn-1') {sql}"
        elif wrap == 2:
            sql = f"{sql} {draw(st.sampled_from(['UNION', 'UNION ALL', 'EXCEPT', 'INTERSECT', 'UNION BY NAME']))} {g.select(1)}"
        elif wrap == 3:
            sql = f"{sql}; {draw(st.sampled_from(STATEMENTS))}"
        elif wrap == 4:
            sql = f"{draw(st.sampled_from(STATEMENTS))}; {sql}"
        elif wrap == 5:
            sql = draw(st.sampled_from(STATEMENTS))
        elif wrap == 6:
            sql += draw(st.sampled_from(TERMINATORS))
        elif wrap == 7:
            sql = f"{draw(st.sampled_from(COMMENTS))}{sql}{draw(st.sampled_from(COMMENTS))}"
        elif wrap == 8:
            sql = _deep(g, sql)
        elif wrap == 9:
            sql = f"({sql})"
        elif wrap == 10:
            sql = draw(st.sampled_from(["EXPLAIN ", "DESCRIBE ", "SUMMARIZE ", "FROM people ", "WITH RECURSIVE "])) + sql
        elif wrap == 11:
            sql = f"WITH t AS MATERIALIZED ({sql}) SELECT COUNT(*) FROM t"
        else:
            sql = f"SELECT COUNT(*) FROM ({sql}) AS sub"
    elif draw(st.integers(0, 9)) == 0:
        sql += ";"
    return sql
