"""Contribution bounding and exact aggregation: each row's values (evaluated once, clamped, on the
grid), per-unit caps (C rows per partition, L partitions per unit) and the exact per-group totals."""
from __future__ import annotations

from sqlglot import exp
from dpsql.lower import clipping, distinct
from dpsql.plan.exact import Reading
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.plan.quantities import QUANTITIES, Stage
from dpsql.sql.types import NUMBER, type_bounds
from dpsql.sql.build import alias, case_when, cast, clamp, col, conjunction, fn, ident, num, portable_hash, select
from dpsql.lower.names import SALT, columns, key_names, raw_column, value_column
from dpsql.lower.keys import declared, in_domain, join_key_tables, key_filter
from dpsql.lower.guard import column_types, condition, decimal_total, safe, user_where
from dpsql.sql.guard import quoted, try_cast
from dpsql.sql.totality import family
from dpsql.lower.noise import scalar_totals


def argument_value(plan: Plan, argument: exp.Expression) -> exp.Expression:
    """An aggregate's argument for one row, as DOUBLE: a column as read; in an expression, each
    operation that could fail guarded on its own (guard.safe; none where guard.decimal_total shows
    that nothing can: arithmetic of bounded DECIMAL columns), then every bounded column clamped to its
    bounds (what interval arithmetic assumed). Validation refused strings and dates: a number's cast
    to DOUBLE cannot fail (anything else is TRY_CAST)."""
    if isinstance(argument, exp.Column):
        return cast(col(argument.name), "DOUBLE")   # a numeric column: the cast cannot fail

    def clamped(node):
        if isinstance(node, exp.Column):
            policy = plan.table.columns.get(node.name.lower())
            value = col(node.name.lower())
            value.type = node.type   # as sql/guard.py annotated it: an engine prints by it (sql/number_types.py)
            if policy is not None and policy.bounded:
                return clamp_in_type(value, policy)
            return value
        return node
    written = quoted(argument)
    number = family(written, column_types(plan)) == NUMBER
    value = (written if decimal_total(written, plan) else safe(written, plan)).transform(clamped)
    return cast(value, "DOUBLE") if number else try_cast(value, "DOUBLE")


def clamp_in_type(value: exp.Expression, policy) -> exp.Expression:
    """A bounded column clamped to its bounds in its own type where the bounds fit it, so an
    expression over it keeps DuckDB's semantics (``CAST(i8 + 0.5 AS INT)`` rounds a DECIMAL, half
    away from zero); otherwise as DOUBLE. Never wider than the bounds (integers round inward)."""
    fitted = type_bounds(policy.sql_type, policy.lower, policy.upper)
    if fitted is None:
        return clamp(cast(value, "DOUBLE"), policy.lower, policy.upper)
    lo, hi = (cast(exp.Literal.string(b), policy.sql_type) for b in fitted)
    return clamp(value, lo, hi)


def row_arguments(plan: Plan) -> dict[str, exp.Expression]:
    """Label -> the value each row contributes, evaluated once in __rows: every count, sum and tree
    of one argument reads this one column, so a unit's count of values and its sum cannot disagree
    on which rows hold a value. Numeric (a SUM, AVG or quantile reads it): DOUBLE, with the columns
    of an expression clamped; counted only: the expression as written, guarded per operation."""
    shared = [m for m in plan.computed if m.argument is not None and QUANTITIES[m.kind].argument]
    numeric = {m.column for m in shared if QUANTITIES[m.kind].numeric}
    values = {}
    for m in shared:
        if m.column in values:
            continue
        argument = m.argument
        if m.column in numeric:
            values[m.column] = argument_value(plan, argument)
        else:
            values[m.column] = col(argument.name) if isinstance(argument, exp.Column) else safe(quoted(argument), plan)
    return values


def rows_from(plan: Plan) -> str | exp.Expression:
    """What __rows reads: the private table, or a derived table (a relation or a per-person table) as
    a subquery named like a table, so the rest of the query reads it as one."""
    if plan.table.source is None:
        return plan.table.name
    return exp.Subquery(this=plan.table.source.copy(), alias=exp.TableAlias(this=ident(plan.table.name)))


def rows_cte(plan: Plan) -> exp.Select:
    """__rows: the private table filtered, keys renamed k0.., each argument evaluated once (c_*),
    then clamped and quantised (v_*) from that one value."""
    names = key_names(plan)
    projections = [alias(safe(quoted(k.expression), plan), name) for k, name in zip(plan.group_keys, names)]
    passed = list(names)
    if not plan.table.row_level:
        projections.insert(0, alias(col(plan.table.privacy_unit), "__unit"))
        passed.insert(0, "__unit")
    for label, value in row_arguments(plan).items():
        projections.append(alias(value, raw_column(label)))
        passed.append(raw_column(label))
    reading = Reading(declared=lambda column: declared(plan, column) if plan.table.columns[column].keys is not None
                      else None, condition=lambda node: condition(plan, node))
    for m in plan.computed:
        read = QUANTITIES[m.kind].read
        if read is not None:   # a value of its own, read from the row (not from a shared argument)
            projections.append(alias(read(m, reading), value_column(m)))
            passed.append(value_column(m))
    derived = []
    for m in plan.computed:
        row = QUANTITIES[m.kind].row
        if row is not None:    # from the argument's one evaluation: clamped, on the grid, a leaf
            derived.append(alias(row(m, columns(m), plan.table.row_level), value_column(m)))
    if not projections:
        projections.append(alias(num(1), "__one"))
    conditions = [user_where(plan), *key_filter(plan)]
    if not plan.table.row_level and not units_alone(plan):
        conditions.append(exp.Not(this=exp.Is(this=col(plan.table.privacy_unit), expression=exp.Null())))
    rows = join_key_tables(select(*projections, source=rows_from(plan), where=conjunction(conditions)), plan)
    if not derived:
        return rows
    return exp.select(*[col(n) for n in passed], *derived).from_(
        exp.Subquery(this=rows, alias=exp.TableAlias(this=ident("__read"))))


def exact_aggregate(m: Measurement) -> exp.Expression:
    """The per-partition aggregate over __rows (row level: each row is a unit)."""
    return QUANTITIES[m.kind].exact(m, columns(m))


def unit_aggregate(plan: Plan, m: Measurement) -> exp.Expression:
    """A unit's contribution to one partition (user level), bounded as the measurement says; the
    clipping report's flag reads the plan's other measurements (lower/clipping.py)."""
    if clipping.clipped(m):
        return clipping.unit_flag(plan)
    return QUANTITIES[m.kind].unit(m, plan.max_rows, columns(m))


def unit_states(plan: Plan) -> list[Measurement]:
    """The measurements with a per-unit state in __units. Every one is of fixed size, so DuckDB's hash
    aggregate spills it. A quantile tree and COUNT(DISTINCT col) have none (plan/quantities.py Stage):
    quantile.leaf_counts counts a unit's leaves per (unit, partition, leaf) and keeps C of them in
    closed form; distinct.distinct_ctes keeps C of a unit's distinct values in the partitions
    __bounded keeps."""
    return [m for m in plan.computed if QUANTITIES[m.kind].stage is Stage.STATE]


def units_alone(plan: Plan) -> bool:
    """Whether rows without a unit are dropped in __units, as the group of the NULL unit (``HAVING
    MIN(__unit) IS NOT NULL``), instead of by __rows' WHERE: for a joined relation whose __rows only
    __units reads (every measurement a per-unit state). The same rows reach __bounded and __agg.
    Why: DuckDB pushes ``unit IS NOT NULL`` into the scan of the joined table the unit comes from and
    then builds the join's hash table on that table, where without it it builds on the filtered rows
    (TPC-H Q6 at SF 10: on orders' 15M rows instead of lineitem's 1.1M, 2x the floor's time); an
    aggregate's output is pushed into no scan. One table's WHERE prunes its own scan and stays; so do
    the plans whose distinct values, trees or histograms read __rows themselves."""
    joined = plan.table.source is not None and not plan.table.one_row_per_unit
    return joined and not plan.table.row_level and len(unit_states(plan)) == len(plan.computed)


RANKS = 2 ** 53   # a partition's random rank lies in [0, RANKS); an undeclared one's in [RANKS, 2 * RANKS)


def needs_partition_sampling(plan: Plan) -> bool:
    """A unit can only exceed L partitions when there are more than L of them (unknown: private keys),
    and never when it has one row (a per-person table, grouped by the unit: one partition each)."""
    if plan.table.one_row_per_unit:
        return False
    return plan.partitions is None or plan.partitions > plan.max_groups


def user_level_ctes(plan: Plan, sampling: str = "keyed") -> list[tuple[str, exp.Select]]:
    """__units and __bounded: contribution bounding per unit, C within and L across partitions.

    A unit's partitions are ranked by a keyed hash of (unit, key, salt), the salt a query parameter
    (``names.SALT``) the executor binds fresh from the OS CSPRNG on every run: the L bound holds for any
    choice that reads the unit's own rows only (a hash of its own unit and keys does), the ranks are a
    function of the row, not a volatile draw (stable if the engine recomputes or retries a part of the
    plan, and the same in every CTE that reads them), and a fresh salt keeps which partitions a unit
    loses independent across queries. ``sampling="hash"`` (trusted test seam only) drops the salt: a
    fixed rule that couples neighbours; ``sampling="portable"`` (the same seam) a fixed rule that every
    engine computes alike (sql/build.py ``portable_hash``), so engines' exact answers compare under an L
    that binds.
    """
    keys = [col(k) for k in key_names(plan)]
    projections = [col("__unit"), *keys] + [alias(unit_aggregate(plan, m), value_column(m)) for m in unit_states(plan)]
    sampled = needs_partition_sampling(plan)
    domain = in_domain(plan) if sampled else None
    if sampled:
        # The rank key is an aggregate's output column: a window's ORDER BY reads it, not the hash.
        salt = [exp.Placeholder(this=SALT)] if sampling == "keyed" else []
        ranked = [col("__unit"), *[k.copy() for k in keys]]
        hashed = portable_hash(*ranked) if sampling == "portable" else fn("HASH", *ranked, *salt)
        rank_key = exp.Mod(this=hashed, expression=num(RANKS))
        if domain is not None:
            # Undeclared partitions (keys.partition_keys) rank after every declared one: one integer
            # sort key, and __bounded's filter an integer comparison that DuckDB cannot push back
            # down to the rows (__r is an aggregate's output).
            rank_key = exp.Add(this=rank_key, expression=case_when(domain, num(0), num(RANKS)))
        projections.append(alias(rank_key, "__r"))
    units = select(*projections, source="__rows", group=[col("__unit"), *[k.copy() for k in keys]])
    if units_alone(plan):
        units = units.having(exp.Not(this=exp.Is(this=exp.Min(this=col("__unit")), expression=exp.Null())), copy=False)
    return [("__units", units), *bounded_ctes(plan, domain)] if sampled else [("__units", units)]


# The most partitions of one unit that __bounded's window may number at once. DuckDB's window holds a
# partition (here: all of one unit's partitions) in memory: a person with millions of partitions ran
# out of memory at 64 MB where everyone else's query ran (tests/properties/test_heavy_target.py).
WINDOW_PARTITIONS = 65536


def cuts_ranks_first(plan: Plan) -> bool:
    """Whether a unit may have more partitions than WINDOW_PARTITIONS (private keys, or a domain of
    public keys that large): then __bounded reads __units three times (rewrite makes it MATERIALIZED:
    one draw of the random ranks)."""
    return plan.partitions is None or plan.partitions > WINDOW_PARTITIONS


def bounded_ctes(plan: Plan, domain: exp.Expression | None) -> list[tuple[str, exp.Select]]:
    """__bounded: each unit's L partitions of smallest rank (__r); what a window numbers per unit is
    bounded before the L cap.

    Public keys: a window per unit numbers its declared partitions, at most ``plan.partitions``;
    undeclared ones (``domain``: ranked last, never kept) are dropped before it, which chooses the
    same ones (they only ever followed the declared ones). Otherwise (``cuts_ranks_first``), __cut
    holds each unit's number of partitions and L-th smallest rank, from MIN(__r, L): a bounded heap
    per unit in a hash aggregate. A unit with at most L partitions keeps them all, without a window;
    a unit with more keeps those ranked at or below its cut (L of them, more only where ranks tie),
    and the window over those keeps L whatever ties.
    """
    L = plan.max_groups
    rank = exp.Window(this=exp.RowNumber(), partition_by=[col("__unit", "__units")],
                      order=exp.Order(expressions=[exp.Ordered(this=col("__r", "__units"))]))

    def kept(*conditions: exp.Expression, numbered: bool) -> exp.Select:
        query = exp.select(exp.Column(this=exp.Star(), table=ident("__units")), *_over(plan, rank)).from_(
            exp.Table(this=ident("__units")))
        if cuts_ranks_first(plan):
            query = query.join(exp.Table(this=ident("__cut")),
                               on=exp.EQ(this=col("__unit", "__units"), expression=col("__unit", "__cut")))
        undeclared = None if domain is None else exp.LT(this=col("__r", "__units"), expression=num(RANKS))
        where = conjunction([undeclared, *conditions])
        query = query if where is None else query.where(where, copy=False)
        return query.qualify(exp.LTE(this=rank.copy(), expression=num(L)), copy=False) if numbered else query
    if not cuts_ranks_first(plan):
        return [("__bounded", kept(numbered=True))]
    cut = select(col("__unit"), alias(exp.Count(this=exp.Star()), "__n"),
                 alias(fn("LIST_MAX", exp.Min(this=col("__r"), count=num(L))), "__cut"), *_declared(plan, domain),
                 source="__units", group=[col("__unit")])
    few = kept(exp.LTE(this=col("__n", "__cut"), expression=num(L)), numbered=False)
    many = kept(exp.GT(this=col("__n", "__cut"), expression=num(L)),
                exp.LTE(this=col("__r", "__units"), expression=col("__cut", "__cut")), numbered=True)
    return [("__cut", cut), ("__bounded", exp.union(few, many, distinct=False))]


def _over(plan: Plan, rank: exp.Window) -> list[exp.Expression]:
    """The clipping report's __over (lower/clipping.py): whether the unit has more declared partitions
    than L, from __cut, or from the window's own partition of the unit (its rows are the unit's declared
    partitions: undeclared ones are dropped before it)."""
    if plan.clipping is None:
        return []
    if cuts_ranks_first(plan):
        return [alias(clipping.over_limit(plan, col("__declared", "__cut")), clipping.OVER)]
    count = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[p.copy() for p in rank.args["partition_by"]])
    return [alias(clipping.over_limit(plan, count), clipping.OVER)]


def _declared(plan: Plan, domain: exp.Expression | None) -> list[exp.Expression]:
    """__cut's count of a unit's declared partitions (ranked below RANKS), for the clipping report."""
    if plan.clipping is None:
        return []
    declared = exp.Count(this=exp.Star()) if domain is None else exp.Sum(
        this=case_when(exp.LT(this=col("__r"), expression=num(RANKS)), num(1), num(0)))
    return [alias(declared, "__declared")]


def agg_cte(plan: Plan, source: str) -> exp.Select:
    """__agg: each group's exact totals (row level: each row a unit), COUNT(DISTINCT)'s from its CTEs."""
    keys = [col(k) for k in key_names(plan)]
    if plan.table.row_level:
        values = [alias(clipping.row_count(plan) if clipping.clipped(m) else exact_aggregate(m), value_column(m))
                  for m in scalar_totals(plan)]
        return select(*keys, *values, source=source, group=[k.copy() for k in keys])
    sampled = source == "__bounded"
    values = [alias(clipping.bounded_total(plan, m, sampled) if clipping.clipped(m) else
                    exp.Sum(this=col(value_column(m))), value_column(m)) for m in unit_states(plan)]
    totals = select(*keys, *(values or [alias(exp.Count(this=exp.Star()), "__n")]), source=source,
                    group=[k.copy() for k in keys])
    return distinct.join_counts(plan, totals) if distinct.measurements(plan) else totals
