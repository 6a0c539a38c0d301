"""The DP quantile tree in SQL: MEDIAN / QUANTILE_CONT / PERCENTILE_CONT as chained CTEs inside DuckDB.

Mechanism (Hay et al. 2010 hierarchical histograms; descent as Google's differential-privacy library's
QuantileTree, also GoogleSQL's and PipelineDP's): [lower, upper] is cut into a tree of branching
B = 16 and depth D = 4; a row adds 1 to the node holding its value on every level; each node count
gets discrete Laplace noise of scale D*L*C / epsilon (``sensitivity.quantile_tree_sensitivity``).
A quantile q descends from the root: at each level the B children's noisy counts are clamped at 0,
those below ALPHA of their total dropped, the child where the running count reaches rank * total
chosen, and the rank rescaled inside it; in the leaf (or a node whose children all read 0) the
answer is interpolated linearly, then clamped to the bounds.

Noise is drawn only for the children of visited nodes, once per node (several quantiles of one tree
share the draws). Nodes never visited are never read, so this releases a post-processing of the
fully noised tree, whose node noises are independent: privacy is that of the whole noisy tree.

CTEs per tree measurement ``m`` (``k..`` the group keys)::

    __m_leaf   (k.., leaf, n): values per leaf (user level: <= C per unit and partition, leaf_counts)
    __m_h<d>   (k.., node, n): counts of the nodes of level d, from the leaves
    __m_s0     (k.., qi, node, depth, rank): one descent per released group and quantile
    __m_c<d>   noisy counts of the children of the nodes reached at level d - 1 (MATERIALIZED)
    __m_w<d>, __m_a<d>   their clamped counts, totals and running sums per descent
    __m_s<d>   the child each descent picks (or stays, if every child reads 0)
    __m_out    (__m_k.., m_q0, m_q1, ...): the released quantiles of each group
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.plan.quantities import QUANTITIES, Stage
from dpsql.lower.noise import noise_call
from dpsql.lower.names import key_names, value_column
from dpsql.sql.build import alias, case_when, cast, col, fn, ident, num, select
from dpsql.plan.sensitivity import TREE_BRANCHING, TREE_DEPTH, TREE_LEAVES

# Google's QuantileTree drops children whose noisy count is below this fraction of their total:
# mostly noise on empty nodes, which would otherwise pull quantiles toward the middle of the range.
ALPHA = 0.0075
# CTEs to MATERIALIZE: the leaf counts (read by every level) and the noisy children (each draw made
# once, though the running sums and the pick read it several times).
MATERIALIZED_SUFFIXES = ("_leaf", *(f"_c{d}" for d in range(1, TREE_DEPTH + 1)))


def quantiles_of(plan: Plan, m: Measurement) -> list[float]:
    """The distinct q asked of one tree, in a fixed order (output column m_q<i> is the i-th)."""
    return sorted({o.quantile for o in plan.outputs if o.quantile is not None and o.measurements == (m.name,)})


def trees(plan: Plan) -> list[Measurement]:
    """The measurements that are quantile trees, lowered here (plan/quantities.py Stage.TREE)."""
    return [m for m in plan.measurements if QUANTITIES[m.kind].stage is Stage.TREE]


def output_column(m: Measurement, q: float, plan: Plan) -> str:
    return f"{m.name}_q{quantiles_of(plan, m).index(q)}"


def _keys(plan: Plan, table: str | None = None) -> list[exp.Column]:
    return [col(k, table) for k in key_names(plan)]


def _same_keys(plan: Plan, left: str, right: str) -> list[exp.Expression]:
    # Private keys may be NULL: a NULL group is a group.
    return [exp.NullSafeEQ(this=col(k, left), expression=col(k, right)) for k in key_names(plan)]


def _on(conditions: list[exp.Expression]) -> exp.Expression:
    return exp.and_(*conditions) if conditions else exp.true()


def _values(name: str, values: list) -> exp.Expression:
    """UNNEST([v0, v1, ...]) AS name: a column of literals."""
    return alias(exp.Unnest(expressions=[exp.Array(expressions=[num(v) for v in values])]), name)


def leaf_counts(plan: Plan, m: Measurement, bounded: str | None) -> exp.Select:
    """(k.., leaf, n): the values per leaf; at user level at most C per unit and partition, from the
    partitions ``bounded`` keeps (None: every partition is kept).

    A unit with n > C values keeps those at evenly spaced ranks of its sorted values (1-based),
    p_i = 1 + floor((2i + 1) n / 2C) for i < C: deterministic like SUM's C-row cap, and it keeps the
    shape of the unit's own distribution. No list of a unit's values is ever built: the rows are
    counted per (unit, partition, leaf) by a hash aggregate (DuckDB spills it), so what a unit holds
    in memory before its cap is at most one count per leaf it reaches, and ``_kept`` finds, leaf by
    leaf, how many of its kept ranks fall there.
    """
    v, last = col(value_column(m)), TREE_LEAVES - 1
    leaf = fn("LEAST", v, num(last))
    present = exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null()))
    if plan.table.row_level:
        return select(*_keys(plan), alias(leaf, "leaf"), alias(exp.Count(this=exp.Star()), "n"), source="__rows",
                      where=present, group=[*_keys(plan), leaf.copy()])
    unit = [col("__unit"), *_keys(plan)]
    cells = select(*unit, alias(leaf, "leaf"), alias(exp.Count(this=exp.Star()), "c"), source="__rows",
                   where=present, group=[*[c.copy() for c in unit], leaf.copy()])
    c, order = col("c", "__c"), exp.Order(expressions=[exp.Ordered(this=col("leaf", "__c"))])
    partition = [col("__unit", "__c"), *_keys(plan, "__c")]
    whole = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED",
                           end_side="FOLLOWING")
    ranked = exp.select(*_keys(plan, "__c"), col("leaf", "__c"), c,
                        alias(exp.Window(this=exp.Sum(this=c.copy()), partition_by=partition, order=order), "cum"),
                        alias(exp.Window(this=exp.Sum(this=c.copy()), partition_by=[p.copy() for p in partition],
                                         order=order.copy(), spec=whole), "total")).from_(
        exp.Subquery(this=cells, alias=exp.TableAlias(this=ident("__c"))))
    if bounded is not None:
        # Only the partitions the unit keeps (L of them, chosen in __bounded); NULL keys are keys.
        on = exp.and_(exp.EQ(this=col("__unit", "__c"), expression=col("__unit", "__b")),
                      *_same_keys(plan, "__c", "__b"))
        ranked = ranked.join(exp.Table(this=ident(bounded), alias=exp.TableAlias(this=ident("__b"))), on=on)
    kept = select(*_keys(plan), col("leaf"), alias(_kept(plan.max_rows, col("c"), col("cum"), col("total")), "kept"),
                  source=exp.Subquery(this=ranked, alias=exp.TableAlias(this=ident("__w"))))
    # Leaves where a unit keeps nothing are dropped (a leaf without a row reads 0 anyway): a third of
    # the rows at 1M events (benchmarks/per_person_lists.py), 15% of the stage.
    return select(*_keys(plan), col("leaf"), alias(cast(exp.Sum(this=col("kept")), "BIGINT"), "n"),
                  source=exp.Subquery(this=kept, alias=exp.TableAlias(this=ident("__k"))),
                  where=exp.GT(this=col("kept"), expression=num(0)), group=[*_keys(plan), col("leaf")])


def _kept(C: int, c: exp.Expression, cum: exp.Expression, n: exp.Expression) -> exp.Expression:
    """How many of a unit's kept ranks lie in a leaf holding its ranks R+1..R+c (cum = R + c, n values).

    With n <= C every value is kept: c. With n > C, let g(r) = (2Cr + n - 1) // 2n. Then g(r) is the
    number of kept ranks p_i <= r (r in 0..n): p_i <= r iff floor((2i + 1) n / 2C) <= r - 1 iff
    (2i + 1) n < 2Cr iff (integers) 2i + 1 <= (2Cr - 1) / n iff i <= (2Cr - 1 - n) / 2n, so the count
    of i >= 0 is floor((2Cr - 1 - n) / 2n) + 1 = g(r), and g(n) = C + floor((n - 1) / 2n) = C (every
    p_i <= n). So the leaf keeps g(R + c) - g(R) values, the kept ranks among R+1..R+c: which values
    of one leaf are kept does not matter, the tree only counts them per leaf. The leaves of one unit
    and partition sum to g(n) - g(0) = C. Counts are HUGEINT (window sums of BIGINTs): 2Cr cannot
    overflow.
    """
    def g(r: exp.Expression) -> exp.Expression:
        return exp.IntDiv(this=exp.Paren(this=exp.Add(this=exp.Mul(this=num(2 * C), expression=r), expression=exp.Sub(
            this=n.copy(), expression=num(1)))), expression=exp.Paren(this=exp.Mul(this=num(2), expression=n.copy())))
    spread = exp.Sub(this=g(cum), expression=g(exp.Paren(this=exp.Sub(this=cum.copy(), expression=c.copy()))))
    return case_when(exp.LTE(this=n.copy(), expression=num(C)), c.copy(), spread)


RANK_IN = "__rank_in"   # a descent's rank as it enters a level (_state's output is its next rank)


def _state(plan: Plan, d: int, prefix: str) -> exp.Select:
    """__m_s<d>: each active descent moves to the child holding its rank, or stops where every child
    reads 0; descents stopped before pass through."""
    a = f"{prefix}a{d}"
    moves = exp.GT(this=col("total"), expression=num(0))
    # The rank it arrives with is __rank_in (not rank, the name of its output): an engine that reads
    # select aliases in QUALIFY or a window would otherwise take the new rank for the old one.
    rank = fn("LEAST", fn("GREATEST", exp.Div(
        this=exp.Paren(this=exp.Sub(this=exp.Mul(this=col(RANK_IN), expression=col("total")),
                                    expression=exp.Paren(this=exp.Sub(this=col("cum"), expression=col("adj"))))),
        expression=col("adj")), num(0.0)), num(1.0))
    holds = exp.and_(exp.GT(this=col("adj"), expression=num(0)),
                     exp.GTE(this=col("cum"), expression=exp.Mul(this=col(RANK_IN), expression=col("total"))))
    first = exp.Window(this=exp.RowNumber(), partition_by=[*_keys(plan), col("qi")],
                       order=exp.Order(expressions=[exp.Ordered(this=exp.Paren(this=holds), desc=True),
                                                    exp.Ordered(this=col("child"))]))
    step = exp.select(*_keys(plan), col("qi"),
                      alias(exp.Case(ifs=[exp.If(this=moves, true=col("child"))], default=col("parent")), "node"),
                      alias(exp.Case(ifs=[exp.If(this=moves.copy(), true=num(d))], default=num(d - 1)), "depth"),
                      alias(exp.Case(ifs=[exp.If(this=moves.copy(), true=rank)], default=col(RANK_IN)), "rank")
                      ).from_(a).qualify(exp.EQ(this=first, expression=num(1)))
    stopped = exp.select(*_keys(plan), col("qi"), col("node"), col("depth"), col("rank")).from_(
        f"{prefix}s{d - 1}").where(exp.LT(this=col("depth"), expression=num(d - 1)))
    return exp.union(step, stopped, distinct=False)


def _level(plan: Plan, m: Measurement, d: int, prefix: str, function: str) -> list[tuple[str, exp.Expression]]:
    """The CTEs of one level of the descent: noisy children, their clamped totals, the pick."""
    s, h = f"{prefix}s{d - 1}", f"{prefix}h{d}"
    parents = exp.select(*_keys(plan), col("node")).from_(s).where(
        exp.EQ(this=col("depth"), expression=num(d - 1))).distinct()
    child = exp.Add(this=exp.Mul(this=col("node", "p"), expression=num(TREE_BRANCHING)), expression=col("c", "b"))
    # Every child gets noise, empty ones too (range(B) LEFT JOIN the counts): absent != zero would leak.
    children = exp.select(*_keys(plan, "p"), alias(col("node", "p"), "parent"), alias(child, "child"),
                          alias(noise_call(m, fn("COALESCE", col("n", "h"), num(0)), function), "noisy")).from_(
        exp.Subquery(this=parents, alias=exp.TableAlias(this=exp.to_identifier("p")))).join(
        exp.Subquery(this=exp.select(_values("c", list(range(TREE_BRANCHING)))),
                     alias=exp.TableAlias(this=exp.to_identifier("b"))), join_type="CROSS").join(
        exp.Table(this=exp.to_identifier(h), alias=exp.TableAlias(this=exp.to_identifier("h"))),
        on=_on(_same_keys(plan, "p", "h") + [exp.EQ(this=col("node", "h"), expression=child.copy())]),
        join_type="LEFT")
    descent = [*_keys(plan), col("qi")]
    clamped = fn("GREATEST", col("noisy", "c"), num(0))
    w = exp.select(*_keys(plan, "s"), col("qi", "s"), alias(col("rank", "s"), RANK_IN), col("parent", "c"), col("child", "c"),
                   alias(clamped, "nc"),
                   alias(exp.Window(this=exp.Sum(this=clamped.copy()), partition_by=[*_keys(plan, "s"), col("qi", "s")]),
                         "raw_total")).from_(exp.Table(this=exp.to_identifier(s), alias=exp.TableAlias(
                             this=exp.to_identifier("s")))).join(
        exp.Table(this=exp.to_identifier(f"{prefix}c{d}"), alias=exp.TableAlias(this=exp.to_identifier("c"))),
        on=_on(_same_keys(plan, "s", "c") + [exp.EQ(this=col("parent", "c"), expression=col("node", "s"))])).where(
        exp.EQ(this=col("depth", "s"), expression=num(d - 1)))
    adj = exp.Case(ifs=[exp.If(this=exp.GTE(this=col("nc"), expression=exp.Mul(this=num(ALPHA), expression=col("raw_total"))),
                               true=col("nc"))], default=num(0))
    a = exp.select(exp.Star(), alias(adj, "adj"),
                   alias(exp.Window(this=exp.Sum(this=adj.copy()), partition_by=descent), "total"),
                   alias(exp.Window(this=exp.Sum(this=adj.copy()), partition_by=[c.copy() for c in descent],
                                    order=exp.Order(expressions=[exp.Ordered(this=col("child"))])), "cum")
                   ).from_(f"{prefix}w{d}")
    return [(f"{prefix}c{d}", children), (f"{prefix}w{d}", w), (f"{prefix}a{d}", a), (f"{prefix}s{d}", _state(plan, d, prefix))]


def released_groups(plan: Plan) -> exp.Select:
    """The groups a quantile is answered for: every group of __noisy, or those partition selection keeps."""
    groups = exp.select(*(_keys(plan) or [alias(num(1), "__one")])).from_("__noisy")
    if plan.selection is not None:
        groups = groups.where(exp.GTE(this=col(plan.selection.measurement), expression=num(plan.selection.threshold)))
    return groups


def quantile_ctes(plan: Plan, m: Measurement, bounded: str | None, function: str) -> list[tuple[str, exp.Expression]]:
    """Every CTE of one tree measurement: its leaves counted from __rows (in the partitions that
    ``bounded`` keeps, if given), __noisy the released groups. Names ending in _leaf or _c<d> are to
    be MATERIALIZED."""
    prefix = f"__{m.name}_"
    ctes = [(f"{prefix}leaf", leaf_counts(plan, m, bounded))]
    for d in range(1, TREE_DEPTH + 1):
        node = exp.IntDiv(this=col("leaf"), expression=num(TREE_BRANCHING ** (TREE_DEPTH - d)))
        ctes.append((f"{prefix}h{d}", exp.select(*_keys(plan), alias(node, "node"), alias(exp.Sum(this=col("n")), "n"))
                     .from_(f"{prefix}leaf").group_by(*_keys(plan), node.copy())))
    qs = quantiles_of(plan, m)
    groups = released_groups(plan)
    start = exp.select(*_keys(plan, "g"), _values("qi", list(range(len(qs)))), alias(cast(num(0), "BIGINT"), "node"),
                       alias(num(0), "depth"), alias(cast(_values("rank", [float(q) for q in qs]).this, "DOUBLE"), "rank")
                       ).from_(exp.Subquery(this=groups, alias=exp.TableAlias(this=exp.to_identifier("g"))))
    ctes.append((f"{prefix}s0", start))
    for d in range(1, TREE_DEPTH + 1):
        ctes += _level(plan, m, d, prefix, function)
    width = exp.Div(this=num(float(m.upper - m.lower)), expression=fn("POW", num(float(TREE_BRANCHING)), col("depth")))
    value = exp.Add(this=num(float(m.lower)), expression=exp.Mul(
        this=exp.Paren(this=exp.Add(this=col("node"), expression=col("rank"))), expression=width))
    value = fn("LEAST", fn("GREATEST", value, num(float(m.lower))), num(float(m.upper)))
    pivot = [alias(exp.Max(this=exp.Case(ifs=[exp.If(this=exp.EQ(this=col("qi"), expression=num(i)), true=value.copy())])),
                   f"{m.name}_q{i}") for i in range(len(qs))]
    out = exp.select(*[alias(col(k), f"__{m.name}_{k}") for k in key_names(plan)], *pivot).from_(
        f"{prefix}s{TREE_DEPTH}")
    if plan.group_keys:
        out = out.group_by(*_keys(plan))
    ctes.append((f"{prefix}out", out))
    return ctes


def join_outputs(plan: Plan, query: exp.Select) -> exp.Select:
    """__out reads __noisy joined with every tree's released quantiles, group by group."""
    for m in trees(plan):
        on = [exp.NullSafeEQ(this=col(k, "__noisy"), expression=col(f"__{m.name}_{k}", f"__{m.name}_out"))
              for k in key_names(plan)]
        query = query.join(exp.Table(this=exp.to_identifier(f"__{m.name}_out")), on=_on(on), join_type="LEFT")
    return query
