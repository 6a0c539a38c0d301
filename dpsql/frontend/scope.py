"""What validation knows about a query: its Scope (SQL text, policy, table, alias, options), the
aggregates dpsql supports (``FORMS``: how each is written, what its argument may be), names and
columns of a query, its GROUP BY keys, and argument bounds."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

from sqlglot import exp
from dpsql.errors import UnsupportedConstruct
from dpsql.frontend.derived import DerivedKeys, TooManyKeys, derive, literal_branches
from dpsql.frontend.intervals import interval
from dpsql.frontend.ranges import narrowed
from dpsql.frontend.options import QueryOptions, number
from dpsql.sql.positions import span
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy
from dpsql.policy.bounds import MAX_BOUND
from dpsql.sql.types import BOOLEAN, NUMBER


@dataclass(frozen=True)
class Argument:
    """What an aggregate's argument may be, beyond one expression: rules/aggregates.py checks it."""
    families: frozenset[str]   # the kinds of value it may yield (sql/totality.py family; a bare column
    what: str                  # of unknown type passes); ``what`` and ``hint`` are the refusal's words
    hint: str
    bounded: bool = False      # its values need a finite range: the policy's bounds, or per-row bounds


NUMBER_ARGUMENT = Argument(frozenset({NUMBER, BOOLEAN, "null"}), "a number", "aggregate a numeric column or expression",
                           bounded=True)


@dataclass(frozen=True)
class Form:
    """How one aggregate of the dialect is written and what its argument may be; the frontend's rules
    check it. What the aggregate releases is its spec in plan/aggregates.py (the plan sits above the
    frontend and reads these); tests/plan/test_specs.py keeps the two tables on the same nodes."""
    name: str                         # as refusals spell it
    argument: Argument | None = None  # None: any one expression (COUNT(x) counts where it is not NULL)
    star: bool = False                # COUNT(*)
    distinct: bool = False            # COUNT(DISTINCT unit), COUNT(DISTINCT a column)
    per_row: bool = True              # takes contribution_bounds_per_row
    per_group: bool = False           # takes contribution_bounds_per_group
    whole: bool = False               # ... whole numbers >= 0 (it counts)
    quantile: bool = False            # a quantile: q a literal in [0, 1] (rule quantile_arguments)
    q: float | None = None            # its q when its name fixes it (MEDIAN)
    listed: str = ""                  # how the list of supported aggregates writes it (default: name)


# The aggregates of the dialect, by the sqlglot node each is parsed as. VAR and STD (SmartNoise's names)
# parse as VARIANCE and STDDEV (frontend/dialect.py); QUANTILE_CONT as PERCENTILE_CONT.
FORMS: dict[type[exp.Func], Form] = {
    exp.Count: Form("COUNT", star=True, distinct=True, per_row=False, per_group=True, whole=True),
    exp.Sum: Form("SUM", NUMBER_ARGUMENT, per_group=True),
    exp.Avg: Form("AVG", NUMBER_ARGUMENT, per_group=True),
    exp.VariancePop: Form("VAR_POP", NUMBER_ARGUMENT),
    exp.Variance: Form("VAR_SAMP", NUMBER_ARGUMENT),
    exp.StddevPop: Form("STDDEV_POP", NUMBER_ARGUMENT),
    exp.Stddev: Form("STDDEV_SAMP", NUMBER_ARGUMENT),
    exp.StddevSamp: Form("STDDEV_SAMP", NUMBER_ARGUMENT),
    exp.CountIf: Form("COUNT_IF", Argument(frozenset({BOOLEAN}), "a condition",
                                           "count the rows where a condition holds: COUNT_IF(age > 30)"), per_row=False),
    exp.Median: Form("MEDIAN", NUMBER_ARGUMENT, quantile=True, q=0.5),
    exp.PercentileCont: Form("QUANTILE_CONT", NUMBER_ARGUMENT, quantile=True,
                             listed="QUANTILE_CONT/PERCENTILE_CONT(x, q)"),
    # The 0 and 1 quantiles of the clamped domain, by the exponential mechanism (plan/aggregates.py).
    exp.Min: Form("MIN", NUMBER_ARGUMENT, quantile=True, q=0.0),
    exp.Max: Form("MAX", NUMBER_ARGUMENT, quantile=True, q=1.0),
}
AGGREGATES = tuple(FORMS)                                          # every aggregate node of the dialect
QUANTILES = tuple(node for node, form in FORMS.items() if form.quantile)
SUPPORTED = ", ".join(dict.fromkeys(form.listed or form.name for form in FORMS.values()))


@dataclass(frozen=True)
class Scope:
    """What a rule needs to know: the SQL text (for positions), the policy, and the queried table."""
    sql: str
    policy: Policy
    table: TablePolicy | None = None
    alias: str | None = None
    options: QueryOptions = QueryOptions()

    def types(self, name: str) -> str | None:
        """The DuckDB type of a column of the queried table (None: unknown)."""
        column = self.table.columns.get(name) if self.table is not None else None
        return column.sql_type if column is not None else None

    def refuse(self, code: str, message: str, node: exp.Expression | None, hint: str = "",
               cls=UnsupportedConstruct, rule: str | None = None):
        start, end = span(node, self.sql)
        err = cls(code, message, hint=hint, sql=self.sql, start=start, end=end)
        err.rule = rule
        return err


def name_of(node: exp.Expression) -> str:
    """Lower-cased name of a column or table (DuckDB names are case-insensitive, quoted or not)."""
    return node.name.lower()


def output_aliases(select: exp.Select) -> set[str]:
    return {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}


def columns_in(node: exp.Expression):
    return [c for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star)]


def quantile_of(agg: exp.Expression) -> float:
    """q of a validated MEDIAN (0.5) or QUANTILE_CONT/PERCENTILE_CONT(x, q)."""
    fixed = FORMS[type(agg)].q
    return fixed if fixed is not None else float(number(agg.expression))


def is_unit_count(agg: exp.Expression, scope: Scope) -> bool:
    """COUNT(DISTINCT <privacy unit>): a noisy count of people, the one allowed use of the unit column
    (rules/privacy.py: an exemption, so it names COUNT itself rather than a form's flag)."""
    arg = agg.this
    return (isinstance(agg, exp.Count) and isinstance(arg, exp.Distinct) and len(arg.expressions) == 1
            and isinstance(arg.expressions[0], exp.Column) and not scope.table.row_level
            and name_of(arg.expressions[0]) == scope.table.privacy_unit)


@dataclass(frozen=True)
class KeySpec:
    """One GROUP BY item: a column or an expression over columns, all with public keys."""
    node: exp.Expression            # where it was written (for errors)
    expression: exp.Expression      # the column or expression grouped on
    columns: tuple[ColumnPolicy, ...]
    derived: tuple[DerivedKeys | TooManyKeys, ...] = ()   # keys of columns without declared ones, from bounds
    branches: tuple[exp.Expression, ...] | None = None      # a CASE of literals over other columns: its values

    @cached_property
    def text(self) -> str:
        """The key as SQL, printed once (is_key compares it with every node of an expression)."""
        return self.expression.sql()

    @cached_property
    def size(self) -> int:
        return _size(self.expression)

    def derived_for(self, column: str) -> DerivedKeys | TooManyKeys | None:
        return next((d for d in self.derived if d.column == column), None)


def unqualified(node: exp.Expression) -> exp.Expression:
    """A copy of ``node`` with every column unqualified and lower-cased (``transform`` copies it once)."""
    return node.transform(lambda n: exp.column(name_of(n)) if isinstance(n, exp.Column) else n)


def argument_bounds(argument: exp.Expression, table) -> tuple[float, float] | None:
    """The finite range of an aggregate's argument, by interval arithmetic over the columns' bounds
    (columns are looked up by lower-cased name, qualified or not: the argument needs no copy)."""
    def column_bounds(name: str):
        col = table.columns.get(name)
        return (col.lower, col.upper) if col is not None and col.bounded else None
    derived = interval(argument, column_bounds)
    if derived is None or max(abs(derived[0]), abs(derived[1])) > MAX_BOUND:
        return None
    return derived


def group_keys(select: exp.Select, scope: Scope) -> list[KeySpec]:
    """The GROUP BY items; an ordinal or an output alias stands for that SELECT expression."""
    group = select.args.get("group")
    if group is None:
        return []
    where = select.args["where"].this if select.args.get("where") is not None else None
    keys = []
    for item in group.expressions:
        node = grouped_by(select, item, scope.table.columns)
        if node is None:
            raise scope.refuse("DP102", f"GROUP BY {item.this}: there is no output column {item.this}", item)
        if isinstance(node, exp.Literal) or not list(columns_in(node)):
            raise scope.refuse("DP304", "GROUP BY takes columns, or expressions of columns, with public keys", item)
        cols = tuple(dict.fromkeys(scope.table.columns[name_of(c)] for c in columns_in(node)))
        expression = unqualified(node)
        derived = tuple(d for d in (_derived(expression, c, where) for c in cols
                                    if c.keys is None and c.public_source is None) if d is not None)
        public = {d.column for d in derived if isinstance(d, DerivedKeys)}
        private = [c for c in cols if c.keys is None and c.public_source is None and c.name not in public]
        branches = literal_branches(expression) if private else None
        keys.append(KeySpec(node=item, expression=expression, columns=cols, derived=derived, branches=branches))
    return keys


def grouped_by(select: exp.Select, item: exp.Expression, columns) -> exp.Expression | None:
    """What a GROUP BY item groups by: an ordinal's SELECT expression (None: no such output), an
    output alias's expression unless ``columns`` holds the name (a column wins, as in DuckDB), else
    the item itself."""
    if isinstance(item, exp.Literal) and not item.is_string and item.this.isdigit():
        index = int(item.this)
        return select.expressions[index - 1].unalias() if 1 <= index <= len(select.expressions) else None
    if isinstance(item, exp.Column) and not item.table and name_of(item) not in columns:
        aliases = {e.alias.lower(): e.unalias() for e in select.expressions if isinstance(e, exp.Alias)}
        return aliases.get(name_of(item), item)
    return item


def _derived(expression: exp.Expression, column: ColumnPolicy, where: exp.Expression | None
             ) -> DerivedKeys | TooManyKeys | None:
    """The groups a column contributes to a GROUP BY item, derived from its bounds as the WHERE's
    range conjuncts narrow them (frontend/ranges.py: still a function of the policy and the query)."""
    narrow = narrowed(column, where)
    derived = derive(expression, narrow)
    if derived is None or narrow is column:
        return derived
    policy = f"{column.dates[0]}..{column.dates[1]}" if column.dates is not None else \
        f"{column.lower:g}..{column.upper:g}"
    return dataclasses.replace(derived, description=f"{derived.description}, the policy's {policy} narrowed by the WHERE")


def is_key(node: exp.Expression, keys: Sequence[KeySpec]) -> bool:
    """Whether ``node`` (outside any aggregate) is one of the GROUP BY keys, written the same way."""
    return key_position(node, keys) is not None


def key_position(node: exp.Expression, keys: Sequence[KeySpec]) -> int | None:
    """The index of the first GROUP BY key ``node`` is written as, else None."""
    # Callers ask this of every node of an expression: compare only nodes that could match (same
    # root type, not much larger), and print the node once, not once per key, or planning grows
    # with (nodes x keys) printed copies.
    candidates = [i for i, k in enumerate(keys) if type(k.expression) is type(node)]
    if not candidates or not _at_most(node, 3 * max(keys[i].size for i in candidates) + 3):
        return None
    text = unqualified(node).sql(copy=False)   # our own copy: printing it needs no second one
    return next((i for i in candidates if keys[i].text == text), None)


def _size(node: exp.Expression) -> int:
    return sum(1 for _ in node.walk())


def _at_most(node: exp.Expression, limit: int) -> bool:
    return next((False for i, _ in enumerate(node.walk()) if i >= limit), True)
