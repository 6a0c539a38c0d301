"""The typed, immutable Plan: what each output releases, with what sensitivity, noise and budget.

``build_plan`` turns a validated query into a Plan; ``rewrite`` later fills ``rewritten_sql`` with
``dataclasses.replace``. Noisy quantities are Measurements (each spends a share of epsilon);
outputs are keys or post-processing of measurements (free).

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> from dpsql.frontend.validate import validate
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 10}}}}})
>>> sql = "SELECT COUNT(*) AS n, AVG(x) FROM t"
>>> q = parse(sql); plan = build_plan(q, validate(q, sql, p), epsilon=1.0, delta=0.0)
>>> [(m.kind, m.epsilon) for m in plan.measurements]
[('count', 0.3333333333333333), ('sum', 0.3333333333333333), ('count_col', 0.3333333333333333)]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from sqlglot import exp

from dpsql.mechanisms import discrete_laplace as noise
from dpsql.errors import InternalError, InvalidParameter, PrivacyViolation
from dpsql.policy import TablePolicy
from dpsql.frontend.options import aggregate_bounds
from dpsql.plan.sensitivity import (count_sensitivity, distinct_sensitivity, granularity, grid_bound, quantile_tree_sensitivity,
                          selection_threshold, sum_sensitivity, unit_total_sensitivity)
from dpsql.frontend.validate import AGGREGATES, QUANTILES, Scope, argument_bounds, group_keys, is_key, name_of, quantile_of, unqualified

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Measurement:
    """One noisy quantity: an exact integer aggregate plus discrete Laplace noise on a grid.

    ``sensitivity`` and ``scale`` are in grid steps; multiply by ``granularity`` for output units.
    """
    name: str
    kind: str                     # "count" (COUNT(*)), "count_col" (COUNT(col)), "sum" (SUM(col)),
                                  # "count_units" (units with a value: AVG's denominator per group),
                                  # "quantile" (the node counts of a quantile tree over [lower, upper])
    column: str | None
    lower: float | None           # clamp bounds of what is summed: a row's value ("rows"),
    upper: float | None           # a unit's total or mean in one partition ("unit_total", "unit_mean")
    granularity: float
    sensitivity: int
    epsilon: float
    scale: float                  # the dyadic noise scale actually used, >= sensitivity / epsilon
    bounding: str = "rows"        # "rows": clamp rows, cap C per unit; else clamp per-unit aggregates
    row_lower: float | None = None  # optional per-row clamp before a per-unit aggregate
    row_upper: float | None = None
    argument: exp.Expression | None = None   # what is counted or summed per row (columns clamped)
    offset: float | None = None              # centred: sums (x - offset) ** moment
    moment: int = 1
    mechanism: str = "discrete Laplace"

    def __post_init__(self):
        if self.kind not in ("count", "count_col", "sum", "count_units", "units", "distinct", "quantile") or \
                self.bounding not in ("rows", "unit_total", "unit_mean"):
            raise InternalError("DP999", f"unknown measurement kind {self.kind!r}: this is probably a bug")
        if not (self.epsilon > 0 and self.sensitivity >= 0 and
                Fraction(self.scale) * Fraction(self.epsilon) >= self.sensitivity):
            raise InternalError("DP999", f"measurement {self.name} is under-noised: this is probably a bug")

    @property
    def error(self) -> float:
        """Half-width of the interval that holds the noise with probability CONFIDENCE, in output units."""
        return noise.discrete_laplace_bound(self.scale, CONFIDENCE) * self.granularity

    @property
    def label(self) -> str:
        label = {"count": "COUNT(*)", "count_col": f"COUNT({self.column})", "sum": f"SUM({self.column})",
                 "count_units": f"COUNT(units with {self.column})", "units": "COUNT(DISTINCT unit)",
                 "distinct": f"COUNT(DISTINCT {self.column})", "quantile": f"QUANTILE TREE({self.column})"}[self.kind]
        if self.bounding == "unit_mean":
            return f"SUM(per-unit AVG({self.column}))"
        if self.offset is not None:
            centred = f"{self.column} - {self.offset:g}"
            return f"SUM({centred})" if self.moment == 1 else f"SUM(({centred})^{self.moment})"
        return label


@dataclass(frozen=True)
class Output:
    """One released column: a group key, or post-processing of measurements."""
    name: str                     # the name the user sees
    kind: str                     # "key", "count", "count_col", "sum", "avg", "expr"
    column: str | None
    measurements: tuple[str, ...] = ()
    key_index: int | None = None  # kind "key": which GROUP BY item
    expression: exp.Expression | None = None  # kind "expr": over output slots o0, o1, ... and literals
    lower: float | None = None    # AVG is clamped back into these bounds
    upper: float | None = None
    hidden: bool = False          # needed by HAVING/ORDER BY but not selected
    per_row: tuple[float, float] | None = None    # GoogleSQL contribution_bounds_per_row
    per_group: tuple[float, float] | None = None  # GoogleSQL contribution_bounds_per_group
    argument: exp.Expression | None = None        # the aggregate's argument (unqualified)
    quantile: float | None = None                 # kind "quantile": q in [0, 1]


@dataclass(frozen=True)
class KeyColumn:
    """A column with public keys that a GROUP BY item reads."""
    name: str
    sql_type: str
    keys: tuple


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY item: a public-key column, or an expression whose groups are its values over the
    declared keys of the columns it reads (computed from those keys alone, never from the data)."""
    expression: exp.Expression
    columns: tuple[KeyColumn, ...]

    @property
    def column(self) -> str | None:
        return self.expression.name if isinstance(self.expression, exp.Column) else None

    @property
    def label(self) -> str:
        return self.column or self.expression.sql(dialect="duckdb")

    @property
    def public(self) -> bool:
        return all(c.keys is not None for c in self.columns)

    @property
    def domain_bound(self) -> int | None:
        """At most this many groups: one per combination of the columns' keys (None if private)."""
        return math.prod(len(c.keys) for c in self.columns) if self.public else None


@dataclass(frozen=True)
class Selection:
    """DP partition selection: a group is released iff its noisy unit count is >= threshold."""
    measurement: str
    threshold: int
    epsilon: float
    delta: float


@dataclass(frozen=True)
class Plan:
    """Everything a query releases and spends. ``str(plan)`` is the explain text."""
    sql: str
    table: TablePolicy
    where: exp.Expression | None
    group_keys: tuple[GroupKey, ...]
    measurements: tuple[Measurement, ...]
    outputs: tuple[Output, ...]
    having: exp.Expression | None      # over output slots o0, o1, ...
    order: tuple[tuple[str, bool], ...]  # (output slot, descending)
    limit: int | None
    offset: int | None
    epsilon: float
    delta: float
    max_groups_option: int | None = None   # GoogleSQL max_groups_contributed, overriding the policy's L
    selection: Selection | None = None     # for GROUP BY keys that are not public
    confidence: float | None = None        # add <output>_ci_low/_ci_high at this level (post-processing)
    nonnegative: bool = True               # counts (and sums of non-negative values) clamped at 0
    rewritten_sql: str = field(default="", compare=False)

    @property
    def partitions(self) -> int | None:
        """An upper bound on the number of GROUP BY partitions (None: private keys, not known)."""
        bounds = [k.domain_bound for k in self.group_keys]
        return None if None in bounds else math.prod(bounds)

    @property
    def max_groups(self) -> int:
        """L: partitions one unit may reach (never more than there are)."""
        if self.table.row_level:
            return 1
        L = self.max_groups_option or self.table.max_groups_per_unit
        return L if self.partitions is None else min(L, self.partitions)

    @property
    def max_rows(self) -> int:
        return 1 if self.table.row_level else self.table.max_rows_per_unit

    @property
    def visible_outputs(self) -> tuple[Output, ...]:
        return tuple(o for o in self.outputs if not o.hidden)

    def slot(self, output: Output) -> str:
        return f"o{self.outputs.index(output)}"

    def measurement(self, name: str) -> Measurement:
        return next(m for m in self.measurements if m.name == name)

    def __str__(self) -> str:
        from dpsql.plan.explain import explain_text
        return explain_text(self)


def slot_names(outputs: list) -> set[str]:
    return {f"o{i}" for i in range(len(outputs))}


def share(epsilon: float, parts: int) -> float:
    """epsilon / parts, rounded down to a float: the shares never add up to more than epsilon.

    >>> share(0.3, 3) * 3 <= 0.3
    True
    """
    exact = Fraction(epsilon) / parts
    try:
        value = float(exact)
    except OverflowError:
        return 0.0
    return value if Fraction(value) <= exact else math.nextafter(value, 0.0)


def check_budget_parameters(epsilon: float, delta: float) -> tuple[float, float]:
    """epsilon in (0, inf), delta in [0, 1): anything else is refused before planning (DP401)."""
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidParameter("DP401", f"{name} must be a finite number, got {value!r}")
    if epsilon <= 0:
        raise InvalidParameter("DP401", f"epsilon must be > 0, got {epsilon!r}")
    if not 0 <= delta < 1:
        raise InvalidParameter("DP401", f"delta must be in [0, 1), got {delta!r}")
    return float(epsilon), float(delta)


VARIANCES = {exp.VariancePop: "var_pop", exp.Variance: "var_samp", exp.StddevPop: "stddev_pop",
             exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp"}


def _aggregate_signature(agg: exp.Expression, table: TablePolicy) -> tuple[str, str | None, exp.Expression | None]:
    """(kind, label, argument): the label is the argument's SQL, the argument unqualified."""
    if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Distinct):
        column = unqualified(agg.this.expressions[0])
        if name_of(column) == table.privacy_unit:
            return ("units", name_of(column), None)
        return ("distinct", name_of(column), column)
    if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Star):
        return ("count", None, None)
    argument = unqualified(agg.this)
    label = argument.name.lower() if isinstance(argument, exp.Column) else argument.sql(dialect="duckdb")
    kind = "count_col" if isinstance(agg, exp.Count) else "sum" if isinstance(agg, exp.Sum) else \
        "avg" if isinstance(agg, exp.Avg) else "quantile" if isinstance(agg, QUANTILES) else VARIANCES[type(agg)]
    return (kind, label, argument)


def _default_name(kind: str, column: str | None, q: float | None = None) -> str:
    # DuckDB's own default names, so results read as they would from plain DuckDB.
    if kind == "quantile":
        return f"median({column})" if q is None else f"quantile_cont({column}, {q:g})"
    if kind == "count":
        return "count_star()"
    if kind in ("units", "distinct"):
        return f"count(DISTINCT {column})"
    return f"{'count' if kind == 'count_col' else kind}({column})"


@dataclass(frozen=True)
class Need:
    """A noisy quantity an output needs, before it gets a name and a share of epsilon."""
    kind: str
    column: str | None                      # label: the argument's SQL
    lower: float | None = None
    upper: float | None = None
    bounding: str = "rows"
    row_lower: float | None = None
    row_upper: float | None = None
    argument: exp.Expression | None = None  # what is counted or summed, per row
    offset: float | None = None             # sum (x - offset) ** moment instead of x
    moment: int = 1


def centre(o: Output) -> tuple[float, float]:
    """Midpoint and half-width of a variance's bounds: it is computed from centred values, whose
    squares lie in [0, r^2] instead of [0, max(lo^2, hi^2)], so their sum needs less noise."""
    return (o.lower + o.upper) / 2, (o.upper - o.lower) / 2


def needs(o: Output) -> list[Need]:
    """The measurements behind one output; identical ones are shared between outputs."""
    if o.kind == "units":
        return [Need("units", None)]
    if o.kind == "distinct":
        return [Need("distinct", o.column, argument=o.argument)]
    if o.kind == "quantile":
        # One tree per argument and bounds: several quantiles of it descend the same noisy tree.
        return [Need("quantile", o.column, *(o.per_row or (o.lower, o.upper)), argument=o.argument)]
    if o.kind == "count":
        return [Need("count", None)] if o.per_group is None else [Need("count", None, *o.per_group, "unit_total")]
    arg, label = o.argument, o.column
    if o.kind in VARIANCES.values():
        m, r = centre(o)
        return [Need("count_col", label, argument=arg),
                Need("sum", label, -r, r, argument=arg, offset=m),
                Need("sum", label, 0.0, r * r, argument=arg, offset=m, moment=2)]
    row = o.per_row or (o.lower, o.upper)
    if o.kind == "avg" and o.per_group is None:
        # AVG = m + sum(x - m) / n: the centred sum has sensitivity r = (hi - lo) / 2 instead of
        # max(|lo|, |hi|), and the count's noise moves the answer by |avg - m| <= r, not |avg|.
        m, r = centre(o)
        return [Need("sum", label, -r, r, argument=arg, offset=m), Need("count_col", label, argument=arg)]
    if o.per_group is None:
        return {"count_col": [Need("count_col", label, argument=arg)],
                "sum": [Need("sum", label, *row, argument=arg)]}[o.kind]
    pre = o.per_row or (None, None)
    if o.kind == "count_col":
        return [Need("count_col", label, *o.per_group, "unit_total", argument=arg)]
    if o.kind == "sum":
        return [Need("sum", label, *o.per_group, "unit_total", *pre, argument=arg)]
    return [Need("sum", label, *o.per_group, "unit_mean", *pre, argument=arg),
            Need("count_units", label, argument=arg)]


def _measurement(name: str, need: Need, L: int, C: int, epsilon: float, table: TablePolicy) -> Measurement:
    if need.kind == "sum":
        g = granularity(need.lower, need.upper)
        bound = grid_bound(need.lower, need.upper, g)
        sens = sum_sensitivity(L, C, bound) if need.bounding == "rows" else unit_total_sensitivity(L, bound)
    elif need.kind in ("count_units", "units"):
        g, sens = 1.0, count_sensitivity(L, 1)   # one unit counts once in each of <= L partitions
    elif need.kind == "distinct":
        g, sens = 1.0, distinct_sensitivity(L, C, len(table.columns[need.column].keys))
    elif need.kind == "quantile":
        g, sens = 1.0, quantile_tree_sensitivity(L, C)
    elif need.bounding == "unit_total":
        g, sens = 1.0, unit_total_sensitivity(L, grid_bound(need.lower, need.upper, 1.0))
    else:
        g, sens = 1.0, count_sensitivity(L, C)
    # Exact: the scale is the dyadic rational just above sensitivity / epsilon, computed in fractions.
    if epsilon <= 0:
        raise InvalidParameter("DP401", "epsilon is too small to share between this query's aggregates")
    try:
        scale = float(noise.dyadic_scale(Fraction(sens) / Fraction(epsilon)))
    except (ValueError, OverflowError, ZeroDivisionError):
        raise InvalidParameter("DP401", f"epsilon {epsilon:g} is too small: the noise would exceed what the "
                               "sampler supports (scale < 2**50)") from None
    return Measurement(name=name, kind=need.kind, column=need.column, lower=need.lower, upper=need.upper,
                       granularity=g, sensitivity=sens, epsilon=epsilon, scale=scale, bounding=need.bounding,
                       row_lower=need.row_lower, row_upper=need.row_upper, argument=need.argument,
                       offset=need.offset, moment=need.moment)


class _Outputs:
    """Collects outputs while planning; HAVING/ORDER BY may add hidden aggregate outputs."""

    def __init__(self, scope: Scope):
        self.scope = scope
        self.items: list[Output] = []

    def add(self, output: Output) -> int:
        self.items.append(output)
        return len(self.items) - 1

    def aggregate(self, agg: exp.Expression, name: str | None, hidden: bool) -> int:
        kind, column, argument = _aggregate_signature(agg, self.scope.table)
        bounds = aggregate_bounds(agg, self.scope.refuse)
        q = quantile_of(agg) if kind == "quantile" else None
        if hidden:
            for i, o in enumerate(self.items):
                if o is not None and (o.kind, o.column, o.per_row, o.per_group, o.quantile) == \
                        (kind, column, bounds.per_row, bounds.per_group, q):
                    return i
        derived = argument_bounds(argument, self.scope.table) if argument is not None else None
        lower, upper = bounds.per_group or bounds.per_row or derived or (None, None)
        default = _default_name(kind, column, None if isinstance(agg, exp.Median) else q)
        return self.add(Output(name=name or default, kind=kind, column=column, lower=lower, upper=upper,
                               hidden=hidden, argument=argument, per_row=bounds.per_row,
                               per_group=bounds.per_group, quantile=q))


def _unique_names(outputs: list[Output]) -> list[Output]:
    seen: dict[str, int] = {}
    result = []
    for o in outputs:
        name = o.name
        if not o.hidden and name.lower() in seen:
            seen[name.lower()] += 1
            name = f"{o.name}_{seen[o.name.lower()]}"
        seen.setdefault(name.lower(), 0)
        result.append(Output(**{**o.__dict__, "name": name}))
    return result


def _measurements(outputs: list[Output], L: int, C: int, epsilon: float, selecting: bool,
                  table: TablePolicy) -> tuple[list[Measurement], list[Output]]:
    """One measurement per distinct noisy quantity; epsilon split equally (sequential composition).

    Partition selection adds the noisy unit count, shared with COUNT(DISTINCT unit) if asked for.
    """
    plain = {(n.column, n.lower, n.upper) for o in outputs if o.kind == "sum" for n in needs(o)
             if n.bounding == "rows"}

    def needs_of(o: Output) -> list[Need]:
        if o.kind == "count" and o.per_group is None and selecting and table.row_level:
            # At row level COUNT(*) is the unit count partition selection measures anyway: release
            # that one noisy count (as GoogleSQL and SmartNoise do) instead of splitting epsilon
            # for a second. Counts of groups just above the threshold then lean high.
            return [Need("units", None)]
        # An AVG beside a plain SUM of the same values reuses it: with that sum released anyway,
        # centring gains nothing (m + (S - m*n)/n = S/n) and a second sum would split epsilon further.
        if o.kind == "avg" and o.per_group is None and (o.column, *(o.per_row or (o.lower, o.upper))) in plain:
            row = o.per_row or (o.lower, o.upper)
            return [Need("sum", o.column, *row, argument=o.argument), Need("count_col", o.column, argument=o.argument)]
        return needs(o)

    needed = list(dict.fromkeys(need for o in outputs if o.kind not in ("key", "expr") for need in needs_of(o)))
    if selecting and Need("units", None) not in needed:
        needed.append(Need("units", None))
    if not needed:
        raise InvalidParameter("DP301", "the query releases no aggregate", rule="releases_an_aggregate")
    names = {need: f"m{i}" for i, need in enumerate(needed)}
    measurements = [_measurement(names[need], need, L, C, share(epsilon, len(needed)), table) for need in needed]
    outputs = [Output(**{**o.__dict__, "measurements": tuple(names[n] for n in needs_of(o))})
               if o.kind not in ("key", "expr") else o for o in outputs]
    return measurements, outputs


def build_plan(select: exp.Select, scope: Scope, *, epsilon: float, delta: float,
               confidence: float | None = None, nonnegative: bool = True) -> Plan:
    """Plan a validated query: outputs, measurements with sensitivities and noise, post-processing."""
    epsilon, delta = check_budget_parameters(epsilon, delta)
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))
                                   or not 0 < confidence < 1):
        raise InvalidParameter("DP401", f"ci must be a confidence level in (0, 1), got {confidence!r}")
    if not isinstance(nonnegative, bool):
        raise InvalidParameter("DP401", f"nonnegative must be True or False, got {nonnegative!r}")
    table = scope.table
    specs = group_keys(select, scope)
    keys = [GroupKey(k.expression, tuple(KeyColumn(c.name, c.sql_type, c.keys) for c in k.columns)) for k in specs]
    collected = _Outputs(scope)
    by_alias: dict[str, int] = {}
    key_slot: dict[int, int] = {}

    def key_index(node: exp.Expression) -> int | None:
        return next((i for i, k in enumerate(specs) if is_key(node, [k])), None)

    def to_slot(node: exp.Expression) -> exp.Expression:
        """Rewrite an expression over released outputs only: aggregates, keys, aliases become slots."""
        if isinstance(node, AGGREGATES):
            return exp.column(f"o{collected.aggregate(node, None, hidden=True)}")
        index = key_index(node)
        if index is not None:
            if index not in key_slot:
                key_slot[index] = collected.add(Output(name=keys[index].label, kind="key", column=keys[index].column,
                                                       key_index=index, hidden=True))
            return exp.column(f"o{key_slot[index]}")
        if isinstance(node, exp.Column) and not node.table and name_of(node) in by_alias:
            return exp.column(f"o{by_alias[name_of(node)]}")
        return node

    for item in select.expressions:
        node = item.unalias()
        alias = item.alias if isinstance(item, exp.Alias) else None
        index = key_index(node)
        if isinstance(node, AGGREGATES):
            slot = collected.aggregate(node, alias, hidden=False)
        elif index is not None:
            slot = collected.add(Output(name=alias or (node.name if isinstance(node, exp.Column) else node.sql()),
                                        kind="key", column=keys[index].column, key_index=index))
            key_slot.setdefault(index, slot)
        else:
            slot = len(collected.items)
            collected.items.append(None)  # keep SELECT order: hidden slots go after it
            collected.items[slot] = Output(name=alias or node.sql(), kind="expr", column=None,
                                           expression=node.copy().transform(to_slot))
        if alias:
            by_alias[alias.lower()] = slot
    visible = [i for i, o in enumerate(collected.items) if not o.hidden]
    for index in range(len(keys)):
        to_slot(specs[index].expression)   # every key gets a slot: the output is every group

    having = select.args.get("having")
    having = having.this.copy().transform(to_slot) if having is not None else None
    order = []
    order_clause = select.args.get("order")
    for ordered in (order_clause.expressions if order_clause else []):
        target = ordered.this
        if isinstance(target, exp.Literal) and not target.is_string and target.this.isdigit():
            index = int(target.this)
            if not 1 <= index <= len(visible):
                raise scope.refuse("DP307", f"ORDER BY {index}: there is no output column {index}", target,
                                   rule="order_by_outputs")
            slot = f"o{visible[index - 1]}"
        else:
            slot_expr = target.copy().transform(to_slot)
            if isinstance(slot_expr, exp.Column) and slot_expr.name in slot_names(collected.items):
                slot = slot_expr.name
            else:
                # An expression of released values (validated: no raw column): a hidden output.
                slot = f"o{collected.add(Output(name=target.sql(), kind='expr', column=None, expression=slot_expr, hidden=True))}"
        order.append((slot, bool(ordered.args.get("desc"))))
    # The group keys break every tie, in order: the order of the rows is then a function of the
    # released values alone, never of which groups hold data (the engine's hash order would be).
    order += [(f"o{key_slot[i]}", False) for i in range(len(keys)) if f"o{key_slot[i]}" not in {s for s, _ in order}]

    outputs = _unique_names(collected.items)
    L = 1 if table.row_level else (scope.options.max_groups or table.max_groups_per_unit)
    C = 1 if table.row_level else table.max_rows_per_unit
    bounds = [k.domain_bound for k in keys]
    if None not in bounds:
        # A unit can only reach as many partitions as there are: a global aggregate has L = 1.
        L = min(L, math.prod(bounds))
    private = [(k, c) for k in specs for c in k.columns if c.keys is None]
    if private and delta == 0:
        key, column = private[0]
        raise scope.refuse("DP304", f"GROUP BY {column.name}: keys are not public, so the groups themselves "
                           "could reveal a person", key.node, cls=PrivacyViolation, rule="partition_selection",
                           hint=f"declare `keys` for {column.name!r} in the policy, or pass delta > 0 for DP "
                                "partition selection")
    measurements, outputs = _measurements(outputs, L, C, epsilon, selecting=bool(private), table=table)
    selection = None
    if private:
        units = next(m for m in measurements if m.kind == "units")
        try:
            threshold = selection_threshold(units.scale, L, delta)
        except (ValueError, OverflowError):
            raise InvalidParameter("DP401", f"delta {delta:g} is too small for partition selection") from None
        selection = Selection(measurement=units.name, epsilon=units.epsilon, delta=delta, threshold=threshold)
    where = select.args.get("where")
    limit, offset = (int(select.args[k].expression.this) if select.args.get(k) else None for k in ("limit", "offset"))
    return Plan(sql=scope.sql, table=table, where=where.this.copy() if where is not None else None,
                group_keys=tuple(keys), measurements=tuple(measurements), outputs=tuple(outputs),
                having=having, order=tuple(order), limit=limit, offset=offset,
                epsilon=epsilon, delta=delta if selection else 0.0, max_groups_option=scope.options.max_groups,
                selection=selection, confidence=confidence, nonnegative=nonnegative)
