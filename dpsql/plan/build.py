"""Building the Plan of a validated query: its outputs, one measurement per distinct noisy quantity
with its sensitivity and share of epsilon, partition selection, and HAVING/ORDER BY over outputs.

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> from dpsql.frontend.validate import validate
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 10}}}}})
>>> sql = "SELECT COUNT(*) AS n, AVG(x) FROM t"
>>> q = parse(sql); plan = build_plan(q, validate(q, sql, p), epsilon=1.0, delta=0.0)
>>> [(m.kind.value, m.epsilon, m.mechanism) for m in plan.measurements]
[('count', 0.3333333333333333, 'discrete Laplace'), ('sum', 0.3333333333333333, 'discrete Laplace'), ('count_col', 0.3333333333333333, 'discrete Laplace')]
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from sqlglot import exp

from dpsql.errors import InvalidParameter, NeedsBounds, PrivacyViolation
from dpsql.policy.model import TablePolicy
from dpsql.frontend.options import aggregate_bounds
from dpsql.mechanisms.base import OPTIONS, Mechanism, choose, mechanism
from dpsql.mechanisms.losses import PURE, Loss
from dpsql.mechanisms.releases import Sensitivity
from dpsql.frontend.relation import conjuncts
from dpsql.frontend.scope import AGGREGATES as AGGREGATE_NODES, Scope, argument_bounds, columns_in, group_keys, key_position, name_of, quantile_of
from dpsql.frontend.derived import MAX_DERIVED_KEYS, DerivedKeys, TooManyKeys
from dpsql.plan.model import Plan
from dpsql.plan.parts import GroupKey, KeyColumn, Measurement, Output, Selection, partition_bound
from dpsql.plan import top_k
from dpsql.plan.allocation import check_budget_parameters, split, top_k_split
from dpsql.plan.clipping import ClippingReport, report_budgets
from dpsql.mechanisms.quantile_rules import rule
from dpsql.plan.aggregates import AGGREGATES, Sharing, signature
from dpsql.plan.quantities import QUANTITIES, Need
from dpsql.plan.kinds import OutputKind, Quantity


def slot_names(outputs: list) -> set[str]:
    return {f"o{i}" for i in range(len(outputs))}


def _calibration(need: Need, L: int, C: int, table: TablePolicy) -> tuple[float, Sensitivity]:
    """(grid step, (L0, Linf) in steps) of one noisy quantity: plan/sensitivity.py proves each bound."""
    return QUANTITIES[need.kind].calibrate(need, L, C, table)


def _measurement(name: str, need: Need, g: float, sens: Sensitivity, loss: Loss, chosen) -> Measurement:
    """The measurement of one quantity, its noise the smallest scale ``chosen`` (the query's noise
    mechanism, or the need's quantile rule) proves within ``loss``."""
    if not (loss.epsilon > 0 or loss.rho > 0):
        raise InvalidParameter("DP401", "epsilon is too small to share between this query's aggregates")
    try:
        scale = chosen.calibrate(sens, loss)
    except (ValueError, OverflowError, ZeroDivisionError):
        raise InvalidParameter("DP401", f"the budget share {loss} is too small: the noise would exceed what the "
                               "sampler supports (scale < 2**50)") from None
    return Measurement(name=name, kind=need.kind, column=need.column, lower=need.lower, upper=need.upper,
                       granularity=g, sensitivity=sens, loss=loss, scale=scale, mechanism=chosen.name,
                       bounding=need.bounding, row_lower=need.row_lower, row_upper=need.row_upper,
                       argument=need.argument, offset=need.offset, moment=need.moment, quantile=need.quantile)


class _Outputs:
    """Collects outputs while planning: SELECT's in order, then hidden ones HAVING/ORDER BY need, and
    a slot (o0, o1, ...) for every GROUP BY key; expressions over released values refer to slots."""

    def __init__(self, scope: Scope, specs: list, keys: list[GroupKey], names: Sequence[str | None]):
        self.scope = scope
        self.names = names
        self.specs, self.keys = specs, keys
        self.items: list[Output] = []
        self.by_alias: dict[str, int] = {}
        self.key_slot: dict[int, int] = {}
        self.by_signature: dict[tuple, int] = {}   # an aggregate's first output, by what it computes

    def add(self, output: Output) -> int:
        self.items.append(output)
        return len(self.items) - 1

    def aggregate(self, agg: exp.Expression, name: str | None, hidden: bool) -> int:
        spec, column, argument = signature(agg, self.scope.table)
        bounds = aggregate_bounds(agg, self.scope.refuse)
        q = quantile_of(agg) if spec.quantile else None
        same = (spec.kind, column, bounds.per_row, bounds.per_group, q, bounds.mechanism)
        if hidden and same in self.by_signature:   # HAVING/ORDER BY reuse an output of the same aggregate
            return self.by_signature[same]
        derived = argument_bounds(argument, self.scope.table) if argument is not None else None
        lower, upper = bounds.per_group or bounds.per_row or derived or (None, None)
        default = spec.name(agg, column, q)
        index = self.add(Output(name=name or default, kind=spec.kind, column=column, lower=lower, upper=upper,
                                hidden=hidden, argument=argument, per_row=bounds.per_row,
                                per_group=bounds.per_group, quantile=q, mechanism=bounds.mechanism))
        self.by_signature.setdefault(same, index)
        return index

    def key_index(self, node: exp.Expression) -> int | None:
        return key_position(node, self.specs)

    def to_slot(self, node: exp.Expression) -> exp.Expression:
        """An expression over released outputs only: aggregates, keys and aliases become slots."""
        if isinstance(node, AGGREGATE_NODES):
            return exp.column(f"o{self.aggregate(node, None, hidden=True)}")
        index = self.key_index(node)
        if index is not None:
            if index not in self.key_slot:
                key = self.keys[index]
                self.key_slot[index] = self.add(Output(name=key.label, kind=OutputKind.KEY, column=key.column,
                                                       key_index=index, hidden=True))
            return exp.column(f"o{self.key_slot[index]}")
        if isinstance(node, exp.Column) and not node.table and name_of(node) in self.by_alias:
            return exp.column(f"o{self.by_alias[name_of(node)]}")
        return node

    def select(self, select: exp.Select) -> list[int]:
        """The SELECT list's outputs, in order, then a slot for every key; the visible slots."""
        for position, item in enumerate(select.expressions):
            node = item.unalias()
            alias = item.alias if isinstance(item, exp.Alias) else None
            named = (self.names[position] if self.names else None) or alias
            index = self.key_index(node)
            if isinstance(node, AGGREGATE_NODES):
                slot = self.aggregate(node, named, hidden=False)
            elif index is not None:
                slot = self.add(Output(name=named or (node.name if isinstance(node, exp.Column) else node.sql()),
                                       kind=OutputKind.KEY, column=self.keys[index].column, key_index=index))
                self.key_slot.setdefault(index, slot)
            else:
                slot = len(self.items)
                self.items.append(None)  # keep SELECT order: hidden slots go after it
                self.items[slot] = Output(name=named or node.sql(), kind=OutputKind.EXPR, column=None,
                                          expression=node.copy().transform(self.to_slot))
            if alias:
                self.by_alias[alias.lower()] = slot
        visible = [i for i, o in enumerate(self.items) if not o.hidden]
        for spec in self.specs:
            self.to_slot(spec.expression)   # every key gets a slot: the output is every group
        return visible

    def order(self, select: exp.Select, visible: list[int]) -> list[tuple[str, bool]]:
        """ORDER BY as (slot, descending), the group keys appended as the final tie-breakers: the
        order of the rows is then a function of the released values alone, never of which groups
        hold data (the engine's hash order would be)."""
        order = []
        clause = select.args.get("order")
        for ordered in (clause.expressions if clause else []):
            target = ordered.this
            if isinstance(target, exp.Literal) and not target.is_string and target.this.isdigit():
                index = int(target.this)   # in range: rule order_by_outputs
                slot = f"o{visible[index - 1]}"
            else:
                slot_expr = target.copy().transform(self.to_slot)
                if isinstance(slot_expr, exp.Column) and slot_expr.name in slot_names(self.items):
                    slot = slot_expr.name
                else:   # an expression of released values (validated: no raw column): a hidden output
                    slot = f"o{self.add(Output(name=target.sql(), kind=OutputKind.EXPR, column=None, expression=slot_expr, hidden=True))}"
            order.append((slot, bool(ordered.args.get("desc"))))
        keys = [f"o{self.key_slot[i]}" for i in range(len(self.keys))]
        return order + [(slot, False) for slot in keys if slot not in {s for s, _ in order}]


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


def _measurements(outputs: list[Output], L: int, C: int, budget: tuple[float, float], selecting: bool,
                  table: TablePolicy, chosen: Mechanism, alone: bool = False
                  ) -> tuple[list[Measurement], list[Output], float, dict[Need, str]]:
    """One measurement per distinct noisy quantity (and its name, by Need), and partition selection's
    delta: the mechanism splits the query's (epsilon, delta) over them (``Mechanism.split``: composed,
    they meet it). ``alone``: a top-k choice releases something, so none is no refusal.

    Partition selection adds the noisy unit count, shared with COUNT(DISTINCT unit) if asked for;
    an aggregate may reuse what others measure anyway (``Sharing``: its spec says how).
    """
    aggregates = [o for o in outputs if o.kind.aggregate]
    planned = frozenset(n for o in aggregates for n in AGGREGATES[o.kind].needs(o, Sharing()))
    sharing = Sharing(selecting=selecting, row_level=table.row_level, planned=planned)

    def needs_of(o: Output) -> list[Need]:
        return AGGREGATES[o.kind].needs(o, sharing)

    needed = list(dict.fromkeys(need for o in aggregates for need in needs_of(o)))
    if selecting and Need(Quantity.UNITS, None) not in needed:
        needed.append(Need(Quantity.UNITS, None))
    if not needed and alone:
        return [], outputs, 0.0, {}
    if not needed:
        raise InvalidParameter("DP301", "the query releases no aggregate", rule="releases_an_aggregate")
    names = {need: f"m{i}" for i, need in enumerate(needed)}
    calibrations = [_calibration(need, L, C, table) for need in needed]
    rules = [rule(need.rule) if need.rule is not None else None for need in needed]
    losses, selection_delta = split(chosen, *budget, [s for _, s in calibrations], rules, selecting)
    measurements = [_measurement(names[need], need, g, sens, loss, measuring or chosen)
                    for need, (g, sens), loss, measuring in zip(needed, calibrations, losses, rules)]
    outputs = [Output(**{**o.__dict__, "measurements": tuple(names[n] for n in needs_of(o))})
               if o.kind.aggregate else o for o in outputs]
    return measurements, outputs, selection_delta, names


def _planned(select: exp.Select, scope: Scope, outputs: list[Output], order: list, keys: list[GroupKey],
             limits: tuple[int | None, int | None], budget: tuple[float, float], private: bool, chosen: Mechanism
             ) -> tuple[list[Measurement], list[Output], float, top_k.TopK | None]:
    """The measurements and outputs, and the top-k the query asks for (plan/top_k.py): its choice
    takes its share of epsilon (plan/allocation.py top_k_split), the measurements the rest. Unless
    OPTIONS(top_k = 'exponential') asks for it, a top-k is planned only where its choice is less noisy
    than the noisy value every group would get instead (top_k.better): a function of the plan alone."""
    table, (epsilon, delta) = scope.table, budget
    L, C = _contribution_limits(scope, keys)
    ask = top_k.asked(select, scope, outputs, order, limits, partition_bound(keys, table.joint_keys),
                      Sharing(selecting=private, row_level=table.row_level))
    values = _measurements(outputs, L, C, budget, private, table, chosen)
    if ask is None:
        return (*values[:3], None)
    ordering = next(m for m in values[0] if m.name == values[1][ask.output].measurements[0])
    outputs = top_k.ranked(outputs, ask)
    choice, rest = top_k_split(epsilon, private or any(o.kind.aggregate for o in outputs))
    measurements, outputs, selection_delta, names = _measurements(outputs, L, C, (rest, delta), private, table,
                                                                  chosen, alone=True)
    if not ask.by_rank:
        utility = next(m for m in measurements if m.name == outputs[ask.output].measurements[0])
    elif ask.need in names:
        utility = next(m for m in measurements if m.name == names[ask.need])
    else:   # never noised (Plan.computed): any loss of the mechanism calibrates its description
        g, sens = _calibration(ask.need, L, C, table)
        losses, _ = chosen.split(epsilon, delta, [sens], False)
        utility = _measurement(f"m{len(measurements)}", ask.need, g, sens, losses[0], chosen)
    top = top_k.chosen(ask, utility, choice, math.sqrt(mechanism(ordering.mechanism).variance(ordering.release)))
    if scope.options.top_k is None and not top.better:
        return (*values[:3], None)
    return measurements, outputs, selection_delta, top


def _mechanism(scope: Scope, asked: str | None, delta: float) -> Mechanism:
    """The one rule (mechanisms/base.py ``choose``): the query's option (the caller's or its OPTIONS:
    two different ones conflict), else the policy's default, else what its accountant composes best."""
    query = scope.options.mechanism
    if asked is not None and not isinstance(asked, str):
        raise InvalidParameter("DP401", f"mechanism must be a mechanism's name, got {asked!r}",
                               hint=f"ask for one of {', '.join(sorted(OPTIONS))}")
    if asked is not None and query is not None and asked.lower() != query.lower():
        raise InvalidParameter("DP401", f"mechanism is given twice: {asked!r} by the caller and {query!r} in OPTIONS")
    try:
        return choose(asked or query, scope.policy.default_mechanism, scope.policy.accountant, delta)
    except KeyError:
        raise InvalidParameter("DP401", f"unknown mechanism {asked or query!r}",
                               hint=f"ask for one of {', '.join(sorted(OPTIONS))}") from None


def build_plan(select: exp.Select, scope: Scope, *, epsilon: float, delta: float,
               confidence: float | None = None, nonnegative: bool = True, mechanism: str | None = None,
               names: Sequence[str | None] = (), report_clipping: bool = False) -> Plan:
    """Plan a validated query: outputs, measurements with sensitivities and noise, post-processing.
    ``mechanism``: the caller's choice (an option name in mechanisms/base.py ``OPTIONS``); ``names``: the
    SELECT items' output names as plain DuckDB gives them for the query as written (None: the plan's own);
    ``report_clipping``: the caller asks for the clipping report (as OPTIONS(report_clipping = true) does)."""
    epsilon, delta = check_budget_parameters(epsilon, delta)
    chosen = _mechanism(scope, mechanism, delta)
    if not isinstance(report_clipping, bool):
        raise InvalidParameter("DP401", f"report_clipping must be True or False, got {report_clipping!r}")
    reporting = report_clipping or scope.options.report_clipping
    refuse = (lambda code, message, hint: scope.refuse(code, message, select.meta.get("dp"), hint=hint,
                                                        cls=InvalidParameter, rule="clipping_report"))
    budget, report_budget = (report_budgets(scope.options.clipping_epsilon, epsilon, delta, chosen, refuse)
                             if reporting else ((epsilon, delta), None))
    check_release_options(confidence, nonnegative)
    table = scope.table
    specs = group_keys(select, scope)
    keys = [_pruned(GroupKey(k.expression, tuple(_key_column(c, k) for c in k.columns), k.branches), select)
            for k in specs]
    collected = _Outputs(scope, specs, keys, names if len(names) == len(select.expressions) else ())
    visible = collected.select(select)
    having = select.args.get("having")
    having = having.this.copy().transform(collected.to_slot) if having is not None else None
    order = collected.order(select, visible)
    L, C = _contribution_limits(scope, keys)
    private = [(spec, c) for spec, key in zip(specs, keys) if not key.public for c in key.columns if c.keys is None]
    if private and delta == 0:
        _refuse_private(scope, *private[0])
    limit, offset = (int(select.args[k].expression.this) if select.args.get(k) else None for k in ("limit", "offset"))
    measurements, outputs, selection_delta, top = _planned(select, scope, _unique_names(collected.items), order, keys,
                                                           (limit, offset), budget, bool(private), chosen)
    selection = _selection(measurements, L, selection_delta) if private else None
    clipping = None
    if report_budget is not None:
        measurements, clipping = _report(measurements, top, (L, C), table, chosen, report_budget,
                                         scope.options.clipping_epsilon is not None)
    where = select.args.get("where")
    return Plan(sql=scope.sql, table=table, where=where.this.copy() if where is not None else None,
                group_keys=tuple(keys), measurements=tuple(measurements), outputs=tuple(outputs),
                having=having, order=tuple(order), limit=limit, offset=offset,
                epsilon=epsilon, delta=delta if selection or chosen.measure != PURE or _spends_delta(measurements) else 0.0,
                max_groups_option=scope.options.max_groups,
                selection=selection, confidence=confidence, nonnegative=nonnegative, top_k=top, clipping=clipping)


def _report(measurements: list[Measurement], top: top_k.TopK | None, limits: tuple[int, int], table: TablePolicy,
            chosen: Mechanism, budget: tuple[float, float], asked: bool) -> tuple[list[Measurement], ClippingReport]:
    """The clipping report's measurements after the query's (plan/clipping.py): the count of cut people,
    and of the group's people unless the query counts them already (partition selection, COUNT(DISTINCT
    unit)); at the report's own (epsilon, delta), split by the query's mechanism. Named after every
    quantity the plan computes (a top-k's utility may hold the next name)."""
    people = next((m for m in measurements if m.kind == Quantity.UNITS), None)
    needs = [Need(Quantity.CLIPPED, None)] + ([] if people is not None else [Need(Quantity.UNITS, None)])
    first = len(measurements) + (1 if top is not None else 0)
    calibrations = [_calibration(need, *limits, table) for need in needs]
    losses, _ = chosen.split(*budget, [s for _, s in calibrations], False)
    added = [_measurement(f"m{first + i}", need, g, sens, loss, chosen)
             for i, (need, (g, sens), loss) in enumerate(zip(needs, calibrations, losses))]
    report = ClippingReport(clipped=added[0].name, people=people.name if people is not None else added[1].name,
                            epsilon=budget[0], delta=budget[1], shared=people is not None, asked=asked)
    return measurements + added, report


def _spends_delta(measurements: list[Measurement]) -> bool:
    """A measurement whose own loss has a delta (a quantile rule's: PTR, smooth sensitivity)."""
    return any(m.loss.delta > 0 for m in measurements)


def _key_column(column, spec) -> KeyColumn:
    """A GROUP BY item's column: its declared keys, or the values standing for the groups its bounds
    give (frontend/derived.py), or no keys (private: DP partition selection)."""
    derived = spec.derived_for(column.name)
    if isinstance(derived, DerivedKeys):
        return KeyColumn(column.name, column.sql_type, derived.values, derived=derived)
    return KeyColumn(column.name, column.sql_type, column.keys, where=column.keys_where)


def _pruned(key: GroupKey, select: exp.Select) -> GroupKey:
    """The key with the WHERE conjuncts that read only its declared-key columns (``educ IN (2, 3)``):
    a group whose keys fail them holds no row, so it is not released. Evaluated on the keys alone
    (lower/keys.py key_domain), never on the data: the groups released stay a function of the policy
    and the query."""
    declared = {c.name for c in key.columns if c.keys is not None and c.derived is None}
    where = select.args.get("where")
    if key.branches is not None or not declared or where is None:
        return key
    filters = tuple(c for c in conjuncts(where.this) if not c.find(exp.Subquery, exp.Exists, exp.Select)
                    and (names := {name_of(x) for x in columns_in(c)}) and names <= declared)
    return dataclasses.replace(key, filters=filters) if filters else key


def _refuse_private(scope: Scope, spec, column: KeyColumn):
    """DP304: a GROUP BY column without public keys, and no delta for partition selection."""
    too_many = spec.derived_for(column.name)
    if isinstance(too_many, TooManyKeys):
        raise scope.refuse("DP304", f"GROUP BY {spec.expression.sql(dialect='duckdb')}: the bounds of {column.name} "
                           f"give {too_many.count} groups ({too_many.description}), more than the "
                           f"{MAX_DERIVED_KEYS} dpsql derives", spec.node, cls=PrivacyViolation,
                           rule="partition_selection",
                           hint=f"group by wider bins or longer periods, narrow the bounds of {column.name!r} in "
                                "the policy, or pass delta > 0 for DP partition selection")
    raise scope.refuse("DP304", f"GROUP BY {column.name}: keys are not public, so the groups themselves "
                       "could reveal a person", spec.node, cls=PrivacyViolation, rule="partition_selection",
                       hint=f"declare `keys` for {column.name!r} in the policy, or pass delta > 0 for DP "
                            "partition selection")


def check_release_options(confidence, nonnegative) -> None:
    """ci in (0, 1) or None; nonnegative a bool (DP401)."""
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))
                                   or not 0 < confidence < 1):
        raise InvalidParameter("DP401", f"ci must be a confidence level in (0, 1), got {confidence!r}")
    if not isinstance(nonnegative, bool):
        raise InvalidParameter("DP401", f"nonnegative must be True or False, got {nonnegative!r}")


def _contribution_limits(scope: Scope, keys: list[GroupKey]) -> tuple[int, int]:
    """(L, C): partitions per unit and rows per unit and partition (row level: 1 and 1)."""
    table = scope.table
    L = 1 if table.row_level else (scope.options.max_groups or table.max_groups_per_unit)
    partitions = partition_bound(keys, table.joint_keys)
    if partitions is not None:
        # A unit can only reach as many partitions as there are: a global aggregate has L = 1.
        L = min(L, partitions)
    C = 1 if table.row_level else table.max_rows_per_unit
    _needs_contribution_bounds(scope, bool(keys) and not scope.options.max_groups and partitions != 1,
                               partitions, (L, C))
    return L, C


def _needs_contribution_bounds(scope: Scope, grouped: bool, partitions: int | None, limits: tuple[int, int]) -> None:
    """DP330 while a table's ``auto`` L or C is not chosen: C always, L where the query's
    grouping (unless OPTIONS(max_groups_contributed) gives it, or it cannot matter). The connection
    chooses them for the query by a DP query and plans again (api/auto_contributions.py). Every plan
    reads L and C here, so none is ever built on the placeholder 1."""
    waiting = tuple(a for a in scope.table.auto_contributions if a[1] == "rows" or grouped)
    if not waiting:
        return
    names = ", ".join(f"{t}.{'max_rows_per_unit' if k == 'rows' else 'max_groups_per_unit'}" for t, k in waiting)
    err = scope.refuse("DP330", f"the automatic contribution bounds {names} are not chosen yet", None,
                       cls=NeedsBounds, rule="automatic_bounds",
                       hint="a query that needs them chooses them first (a DP histogram of each person's rows "
                            "or groups, charged at the policy's auto_bounds epsilon); explain spends nothing")
    err.contributions, err.partitions, err.unit, err.limits = waiting, partitions, scope.table.privacy_unit, limits
    raise err


def _selection(measurements: list[Measurement], L: int, delta: float) -> Selection:
    """DP partition selection on the noisy unit count, thresholded by its mechanism for delta."""
    # Selection thresholds the noisy count of units, whichever output asked for it (kind, not aggregate).
    units = next(m for m in measurements if m.kind == Quantity.UNITS)
    try:
        threshold = mechanism(units.mechanism).selection_threshold(units.release, L, delta)
    except (ValueError, OverflowError):
        raise InvalidParameter("DP401", f"delta {delta:g} is too small for partition selection") from None
    return Selection(measurement=units.name, loss=units.loss, delta=delta, threshold=threshold)
