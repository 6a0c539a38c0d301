"""Queries over the leak world's typed columns (tests/support/leak_world.py): edge literals, casts,
CASE with strings, key expressions, private keys, per-row and per-group bounds, ORDER BY on constant
outputs, LIMIT; and queries over a per-person subquery of visits drawn the same way. The class of the
leak test's findings, and past it."""
from __future__ import annotations

from hypothesis import strategies as st

from tests.support.leak_world import TINY, TYPED_COLUMNS

NUMERIC = [name for name, _, bounds in TYPED_COLUMNS if bounds]
NUMBER_LITERALS = ["0", "1", "-1", "0.5", "2", "100", "-128", "127", "255", "32767", "2147483648", TINY, f"-{TINY}",
                   "1e300", "-1e300", "1e-300", "9223372036854775807", "-9223372036854775808",
                   "170141183460469231731687303715884105727", "18446744073709551615", "999999999999999.999",
                   "0.1", "1e15", "4611686018427387904",
                   # DECIMAL(18,3) against 35 digits runs bare, against 36 under TRY() (totality._decimal_with_literals)
                   "99999999999999999999999999999999999", "-999999999999999999999999999999999999"]
SPECIAL_NUMBERS = ["'nan'::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "NULL"]
STRING_LITERALS = ["''", "'ß'", "'SS'", "'x'", "'%ß%'", "'gold'", "'GOLD'", "'12'", "'1e400'", "'é'", "'ﬁ'",
                   "'alpha'", "'%a%'", "'_'", "' '", "'nan'", "'-9223372036854775809'"]
DATE_LITERALS = ["'2020-01-01'", "DATE '2000-01-01'", "'infinity'", "'-infinity'", "'2020-01-01 12:00:00'",
                 "'5881580-07-10'", "TIMESTAMP '2020-06-01 00:00:00'"]
CAST_TARGETS = ["TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINT",
                "UBIGINT", "FLOAT", "DOUBLE", "DECIMAL", "VARCHAR", "BOOLEAN", "DATE", "TIMESTAMP"]
PUBLIC_KEYS = {"people": ["sex", "state", "active", "grade", "tier", "flag"],
               "visits": ["clinic", "grade", "tier", "flag"]}
KEY_EXPRESSIONS = ["CASE WHEN flag = 1 THEN 'one' END", f"grade = {TINY}", "grade + 0.5", "upper(tier)",
                   "tier || 'x'", "grade > 3", "CASE WHEN tier = 'gold' THEN 1 WHEN tier = 'none' THEN NULL END",
                   "-grade", "CAST(grade AS TINYINT)", "grade * 9223372036854775807", "length(tier)", "NOT flag = 1",
                   "grade // 0", "COALESCE(CASE WHEN grade > 2 THEN grade END, 0)",
                   # derived from bounds
                   "year(day)", "EXTRACT(YEAR FROM day) - 2000", "date_trunc('month', ts)", "date_trunc('quarter', day)",
                   "FLOOR(f64 / 100) * 100", "i16 // 100", "FLOOR(dec / 250)", "FLOOR(i8 / 10)",
                   # a CASE of literals over columns without keys (issue 14)
                   "CASE WHEN i8 < 0 THEN 'neg' WHEN i8 < 10 THEN 'small' ELSE 'big' END", "IF(f64 > 0, 1.5, 2)",
                   "CASE WHEN txt = 'alpha' THEN 1 END"]
KEYED_NUMBERS = ["grade", "flag"]   # numeric columns with public keys: bounded by them (issue 14)
CLEAN_CASTS = ["TRUE", "'12'", "'-3'", "' 7 '"]   # literals a number column's comparison converts (issue 14)
PRIVATE_KEYS = ["zip", "txt", "i8", "day", "f64", "f32", "dec", "u64", "ok", "ts", f"age = {TINY}", f"i64 > {TINY}",
                "length(txt)", "upper(txt)", "i8 * 2", "CAST(f64 AS INT)", "year(day)", "isnan(f64)"]


class Typed:
    """One drawn query over people or visits, typed columns and all."""

    def __init__(self, draw, bounds: bool = True):
        self.draw = draw
        self.table = draw(st.sampled_from(["people", "visits"]))
        self.with_bounds = bounds    # GoogleSQL per-aggregate bounds and max_groups_contributed

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def number_literal(self) -> str:
        return self.pick(NUMBER_LITERALS + SPECIAL_NUMBERS) if self.chance(30) else self.pick(NUMBER_LITERALS)

    def number(self, depth: int = 2) -> str:
        """A numeric expression over the bounded columns."""
        choice = self.draw(st.integers(0, 12 if depth > 0 else 1))
        if choice <= 1:
            return self.pick(NUMERIC + KEYED_NUMBERS)
        if choice == 2:
            return f"-{self.number(depth - 1)}"
        if choice == 3:
            op = self.pick(["+", "-", "*", "/", "//", "%"])
            rhs = self.number(depth - 1) if self.chance(40) else self.number_literal()
            return f"{self.number(depth - 1)} {op} {rhs}"
        if choice == 4:
            return f"CAST({self.any(depth - 1)} AS {self.pick(CAST_TARGETS)})"
        if choice == 5:
            return f"TRY_CAST({self.any(depth - 1)} AS {self.pick(CAST_TARGETS)})"
        if choice == 6:
            fname = self.pick(["abs", "round", "floor", "ceil", "sign", "sqrt", "ln", "exp", "isnan", "isinf"])
            return f"{fname}({self.number(depth - 1)})"
        if choice == 7:
            fname = self.pick(["greatest", "least", "coalesce", "nullif", "power", "round"])
            return f"{fname}({self.number(depth - 1)}, {self.number_literal()})"
        if choice == 8:
            then = self.number(depth - 1) if self.chance(60) else self.pick(STRING_LITERALS)
            other = self.number_literal() if self.chance(60) else self.pick(STRING_LITERALS)
            return f"CASE WHEN {self.condition(depth - 1)} THEN {then} ELSE {other} END"
        if choice == 9:
            return self.pick(["length(txt)", "length(upper(txt))", "length(REPLACE(txt, 'ß', 'ss'))",
                              "length(trim(txt))", f"length(concat(txt, {self.text()}))", "length(left(txt, 3))"])
        if choice == 10:
            return self.pick(["year(day)", "month(ts)", "day(day)", "quarter(ts)", "date_part('year', ts)",
                              "EXTRACT(year FROM day)", "dayofweek(day)", "year(joined)" if self.table == "people"
                              else "year(ts)"])
        if choice == 11:
            return f"CAST({self.pick(['txt', 'zip', 'ok', 'day', 'ts'])} AS {self.pick(CAST_TARGETS)})"
        return f"({self.number(depth - 1)})"

    def text(self) -> str:
        """A string column of this table without public keys."""
        return "zip" if self.table == "people" else "txt"

    def any(self, depth: int) -> str:
        return self.pick([self.number(depth), self.pick(["txt", "ok", "day", "ts", self.text(),
                                                         self.pick(STRING_LITERALS)])])

    def condition(self, depth: int = 1) -> str:
        choice = self.draw(st.integers(0, 9 if depth > 0 else 7))
        if choice <= 1:
            op = self.pick(["=", "<>", "<", "<=", ">", ">="])
            return f"{self.pick(NUMERIC)} {op} {self.number_literal()}"
        if choice == 2:
            op = self.pick(["=", "<", ">="])
            return f"{self.number(depth)} {op} {self.number_literal()}"
        if choice == 3:
            return self.pick([f"txt {self.pick(['=', '<>', '>', 'LIKE', 'ILIKE'])} {self.pick(STRING_LITERALS)}",
                              f"txt IN ({self.pick(STRING_LITERALS)}, {self.pick(STRING_LITERALS)})",
                              f"starts_with(txt, {self.pick(STRING_LITERALS)})",
                              f"contains(txt, {self.pick(STRING_LITERALS)})",
                              f"regexp_matches(txt, {self.pick(['.ß', '^a', '[', '(a|b)+'])!r})",
                              f"lower(txt) = {self.pick(STRING_LITERALS)}"])
        if choice == 4:
            return self.pick([f"day {self.pick(['>', '<=', '='])} {self.pick(DATE_LITERALS)}",
                              f"ts {self.pick(['>', '<', '<>'])} {self.pick(DATE_LITERALS)}",
                              f"day BETWEEN {self.pick(DATE_LITERALS)} AND {self.pick(DATE_LITERALS)}",
                              f"date_trunc('month', ts) > {self.pick(DATE_LITERALS)}"])
        if choice == 5:
            return self.pick(["ok", "NOT ok", "ok = true", "isnan(f64)", "isinf(f32)", "f64 IS NULL",
                              "txt IS NOT NULL", "day IS NULL", "ok IS NULL",
                              # literals in the column's type, and conditions that prune public groups
                              f"{self.pick(NUMERIC)} = {self.pick(CLEAN_CASTS)}",
                              "ok = 1", "grade IN ('1', 4)", "tier = 'gold'", "flag = 1", "grade BETWEEN 2 AND 4"])
        if choice == 6:
            return f"{self.pick(NUMERIC)} BETWEEN {self.number_literal()} AND {self.number_literal()}"
        if choice == 7:
            return f"{self.pick(NUMERIC)} IN ({self.number_literal()}, {self.number_literal()})"
        return f"({self.condition(depth - 1)} {self.pick(['AND', 'OR'])} {self.condition(depth - 1)})"

    def bounds(self, whole: bool = False) -> str:
        pairs = [("0", "1"), ("-1", "1"), ("0", "10"), ("-5", "20"), ("0", "1000"), ("1", "1"), ("0", "0.5"),
                 ("-1e15", "1e15"), ("0", "1125899906842624"), ("1e15", "1e15"), ("-100", "-1")]
        lo, hi = self.pick([p for p in pairs if not whole or "." not in p[0] + p[1] and "-" not in p[0]])
        return f"({lo}, {hi})"

    def aggregate(self) -> str:
        user = self.table == "visits"
        kind = self.draw(st.integers(0, 11))
        if kind == 0:
            agg = "COUNT(*)"
            if user and self.with_bounds and self.chance(25):
                agg = f"COUNT(*, contribution_bounds_per_group => {self.bounds(whole=True)})"
            return agg
        if kind == 1:
            return f"COUNT({self.any(2)})" if self.chance(70) else f"COUNT_IF({self.condition(2)})"
        if kind == 2:
            per_table = ["COUNT(DISTINCT person_id)", "COUNT(DISTINCT clinic)", "COUNT(person_id)"] if user else \
                ["COUNT(DISTINCT sex)"]
            keyless = [f"COUNT(DISTINCT {c})" for c in ("txt", "f64", "day", "i8", "ok")]   # no keys: L*C (issue 23)
            return self.pick(["COUNT(DISTINCT tier)", "COUNT(DISTINCT grade)", "COUNT(DISTINCT flag)", *per_table,
                              *keyless])
        fname = self.pick(["SUM", "SUM", "AVG", "AVG", "VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP",
                           "MEDIAN", "QUANTILE_CONT", "MIN", "MAX"])
        q = f", {self.pick(['0', '0.1', '0.5', '0.9', '1'])}" if fname == "QUANTILE_CONT" else ""
        named = ""
        if fname in ("MEDIAN", "QUANTILE_CONT", "MIN", "MAX") and self.chance(40):
            # A quantile rule (ptr and smooth need delta: refused alike on both sides without it).
            named = f", mechanism => '{self.pick(['exponential', 'exponential', 'tree', 'ptr', 'smooth'])}'"
        if self.with_bounds and self.chance(30):
            per = "contribution_bounds_per_group" if user and fname in ("SUM", "AVG") and self.chance(50) \
                else "contribution_bounds_per_row"
            named += f", {per} => {self.bounds()}"
        return f"{fname}({self.number(2)}{q}{named})"

    def query(self) -> str:
        keys = list(self.draw(st.lists(st.sampled_from(PUBLIC_KEYS[self.table] + KEY_EXPRESSIONS), max_size=2,
                                       unique=True)))
        private = self.chance(15)
        if private:
            keys.append(self.pick([k for k in PRIVATE_KEYS if self.table == "people" or "zip" not in k]))
        outputs, names = [], []
        for i, key in enumerate(keys):
            if self.chance(80):
                outputs.append(f"{key} AS k{i}x")
                names.append(f"k{i}x")
        for i in range(self.draw(st.integers(1, 3))):
            agg = self.aggregate()
            if self.chance(15):
                agg = self.pick([f"{agg} * 0", f"ROUND({agg}, 1)", f"{agg} / 2", f"-{agg}", f"{agg} + 1"])
            outputs.append(f"{agg} AS a{i}")
            names.append(f"a{i}")
        if self.chance(25):
            outputs.append("COUNT(*) * 0 AS z")
            names.append("z")
        options = []
        if private:
            options.append(f"delta = {self.pick(['1e-6', '1e-3', '0.1'])}")
        if self.table == "visits" and self.with_bounds and self.chance(20):
            options.append(f"max_groups_contributed = {self.pick(['1', '2', '5'])}")
        if self.chance(10):   # a noisy top-k where the query's ORDER BY ... LIMIT has its shape (DP308 else)
            options.append("top_k = 'exponential'")
        dp = f"WITH DIFFERENTIAL_PRIVACY OPTIONS({', '.join(options)}) " if options else ""
        sql = f"SELECT {dp}{', '.join(outputs)} FROM {self.table}"
        if self.chance(60):
            sql += f" WHERE {self.condition(2)}"
        if keys:
            sql += f" GROUP BY {', '.join(keys)}"
            if self.chance(20):
                aggregates = [n for n in names if not n.startswith("k")]
                sql += f" HAVING {self.pick(aggregates)} {self.pick(['>', '<=', '<>'])} {self.pick(['0', '1', '0.5'])}"
        if self.chance(50):
            items = self.draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
            sql += " ORDER BY " + ", ".join(f"{i}{self.pick(['', ' DESC'])}" for i in items)
        if self.chance(15):
            sql += f" LIMIT {self.draw(st.integers(0, 4))}"
            if self.chance(30):
                sql += f" OFFSET {self.draw(st.integers(0, 3))}"
        return sql


class PerPerson(Typed):
    """A query over a per-person subquery of visits: its WHERE and its aggregates' arguments drawn
    like a typed query's (casts, edge literals, strings), the outer query over the per-person values."""

    def __init__(self, draw):
        super().__init__(draw)
        self.table = "visits"

    def query(self) -> str:
        inner = ["COUNT(*) AS n", f"SUM({self.number(2)}) AS s", f"COUNT({self.any(2)}) AS c",
                 f"AVG({self.number(1)}) AS a", f"MIN({self.pick(NUMERIC)}) AS lo"]
        where = f" WHERE {self.condition(2)}" if self.chance(80) else ""
        per = f"(SELECT person_id, {', '.join(inner)} FROM visits{where} GROUP BY person_id) AS per"
        outputs = [self.pick(["COUNT(*)", "COUNT(s)", "COUNT(a)"]) + " AS k"]
        for i in range(self.draw(st.integers(1, 3))):
            fname, column = self.pick(["SUM", "AVG", "MEDIAN"]), self.pick(["n", "s", "c", "a", "lo"])
            outputs.append(f"{fname}({column}, contribution_bounds_per_row => {self.bounds()}) AS a{i}")
        if self.chance(30):   # a private key: the groups by DP partition selection
            return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) n, {', '.join(outputs)} FROM {per} GROUP BY n"
        return f"SELECT {', '.join(outputs)} FROM {per}"


@st.composite
def per_person_queries(draw) -> str:
    """A query reading a per-person subquery with a drawn WHERE and drawn aggregate arguments."""
    return PerPerson(draw).query()


@st.composite
def typed_queries(draw, bounds: bool = True) -> str:
    """A query over the typed columns: edge literals, casts, CASE with strings, key expressions,
    private keys, per-row and per-group bounds (unless ``bounds=False``), ORDER BY on constant
    outputs, LIMIT."""
    return Typed(draw, bounds).query()

