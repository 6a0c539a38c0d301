"""GoogleSQL DP options, checked into typed values: the query's OPTIONS(...) and per-aggregate bounds.

>>> import sqlglot
>>> from dpsql.frontend.dialect import Dpsql
>>> q = sqlglot.parse_one("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, max_groups_contributed=3) COUNT(*) FROM t", read=Dpsql)
>>> literal_options(q.meta["dp"], lambda code, msg, node: ValueError(msg))
{'epsilon': 0.5, 'max_groups_contributed': 3}
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from dpsql.mechanisms.base import OPTIONS as MECHANISM_OPTIONS
from dpsql.mechanisms.quantile_rules import OPTIONS as QUANTILE_OPTIONS
from dpsql.policy.bounds import MAX_BOUND

NUMERIC_OPTIONS = ("epsilon", "delta", "max_groups_contributed", "clipping_epsilon")
OPTIONS = (*NUMERIC_OPTIONS, "privacy_unit_column", "mechanism", "top_k", "report_clipping")
# ORDER BY one aggregate ... LIMIT k: k groups chosen by the exponential mechanism (plan/top_k.py), or
# every candidate's noisy value released and the largest kept (the meaning before issue 23).
TOP_K = ("exponential", "noisy_values")
BOUND_NAMES = {"contribution_bounds_per_group": "per_group", "contribution_bounds_per_row": "per_row"}


@dataclass(frozen=True)
class QueryOptions:
    """What the query's WITH DIFFERENTIAL_PRIVACY clause asks for (None: not given)."""
    epsilon: float | None = None
    delta: float | None = None
    max_groups: int | None = None
    privacy_unit: str | None = None
    mechanism: str | None = None    # an option name of mechanisms/base.py OPTIONS, checked
    top_k: str | None = None        # one of TOP_K: how ORDER BY <aggregate> LIMIT k chooses its groups
    report_clipping: bool = False   # release the clipping report (plan/clipping.py); clipping_epsilon implies it
    clipping_epsilon: float | None = None   # the report's epsilon, taken from the query's (checked by the plan)


@dataclass(frozen=True)
class Bounds:
    """An aggregate's contribution bounds: per row (clamp each value), per group (clamp each unit's
    total in a partition; its mean, for AVG); and a quantile's ``mechanism => 'name'``."""
    per_row: tuple[float, float] | None = None
    per_group: tuple[float, float] | None = None
    mechanism: str | None = None    # a value of mechanisms/quantile_rules.py OPTIONS, checked


def number(node: exp.Expression) -> float | None:
    """The value of a numeric literal (possibly negated), else None."""
    sign = 1
    if isinstance(node, exp.Paren):
        node = node.unnest()
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = float(node.this)
        except ValueError:
            return None
        if math.isfinite(value):
            return sign * (int(value) if value == int(value) and "." not in node.this and "e" not in node.this.lower() else value)
    return None


def literal_options(clause, refuse) -> dict:
    """name -> value of each ``name = literal`` option; refuse(code, message, node) builds errors."""
    values = {}
    for option in clause.options():
        if not isinstance(option, exp.EQ) or not isinstance(option.this, exp.Column) or option.this.table:
            raise refuse("DP308", "DIFFERENTIAL_PRIVACY options are written name = value", option)
        name = option.this.name.lower()
        if name not in OPTIONS:
            raise refuse("DP308", f"unknown DIFFERENTIAL_PRIVACY option {option.this.name!r} "
                                  f"(known: {', '.join(OPTIONS)})", option.this)
        if name in values:
            raise refuse("DP308", f"option {name} is given twice", option)
        value = option.expression
        if name == "privacy_unit_column":
            if not isinstance(value, exp.Column) or value.table:
                raise refuse("DP308", "privacy_unit_column takes a column name", value)
            values[name] = value.name.lower()
            continue
        if name == "mechanism":
            values[name] = _mechanism(value, refuse)
            continue
        if name == "top_k":
            values[name] = _top_k(value, refuse)
            continue
        if name == "report_clipping":
            if not isinstance(value, exp.Boolean):
                raise refuse("DP308", "option report_clipping takes true or false", value,
                             hint="write report_clipping = true")
            values[name] = bool(value.this)
            continue
        values[name] = number(value)
        if values[name] is None:
            raise refuse("DP308", f"option {name} takes a finite number literal", value)
    return values


def query_options(select: exp.Select, refuse) -> QueryOptions:
    """The checked OPTIONS of a query, or all None without a DIFFERENTIAL_PRIVACY clause."""
    clause = select.meta.get("dp")
    if clause is None:
        return QueryOptions()
    values = literal_options(clause, refuse)
    groups = values.get("max_groups_contributed")
    if groups is not None and (groups != int(groups) or groups < 1):
        raise refuse("DP308", f"max_groups_contributed must be a whole number >= 1, got {groups}", clause)
    return QueryOptions(epsilon=values.get("epsilon"), delta=values.get("delta"),
                        max_groups=int(groups) if groups is not None else None,
                        privacy_unit=values.get("privacy_unit_column"), mechanism=values.get("mechanism"),
                        top_k=values.get("top_k"), clipping_epsilon=values.get("clipping_epsilon"),
                        report_clipping=values.get("report_clipping", "clipping_epsilon" in values))


def _mechanism(value: exp.Expression, refuse) -> str:
    """mechanism = 'gaussian': a string literal naming a registered mechanism (DP308 otherwise)."""
    known = ", ".join(repr(name) for name in sorted(MECHANISM_OPTIONS))
    if not (isinstance(value, exp.Literal) and value.is_string):
        raise refuse("DP308", "option mechanism takes a string literal", value,
                     hint=f"write mechanism = 'name', a name among {known}")
    if value.this.lower() not in MECHANISM_OPTIONS:
        raise refuse("DP308", f"unknown mechanism {value.this!r}", value, hint=f"name one of {known}")
    return value.this.lower()


def _quantile_mechanism(value: exp.Expression, refuse) -> str:
    """mechanism => 'exponential': a string literal naming a quantile rule or the tree (DP308)."""
    known = ", ".join(repr(name) for name in QUANTILE_OPTIONS)
    if not (isinstance(value, exp.Literal) and value.is_string) or value.this.lower() not in QUANTILE_OPTIONS:
        raise refuse("DP308", f"a quantile's mechanism => takes one of {known}", value,
                     hint="write MEDIAN(x, mechanism => 'exponential')")
    return value.this.lower()


def _top_k(value: exp.Expression, refuse) -> str:
    """top_k = 'noisy_values': a string literal among TOP_K (DP308 otherwise)."""
    known = ", ".join(repr(name) for name in TOP_K)
    if not (isinstance(value, exp.Literal) and value.is_string and value.this.lower() in TOP_K):
        raise refuse("DP308", f"option top_k takes one of {known}", value,
                     hint="top_k = 'noisy_values' releases every group's noisy value and keeps the largest")
    return value.this.lower()


def aggregate_bounds(agg: exp.Expression, refuse) -> Bounds:
    """The checked ``contribution_bounds_per_group/_per_row => (lo, hi)`` and ``mechanism => 'name'`` of
    one aggregate (rules/aggregates.py ``dp_options`` checks which aggregates take which)."""
    found: dict = {}
    for name, value in agg.meta.get("named_args", []):
        if name == "mechanism":
            if "mechanism" in found:
                raise refuse("DP308", "mechanism is given twice", agg)
            found["mechanism"] = _quantile_mechanism(value, refuse)
            continue
        if name not in BOUND_NAMES:
            raise refuse("DP310", f"unknown named argument {name!r} (known: {', '.join(BOUND_NAMES)})", agg)
        key = BOUND_NAMES[name]
        if key in found:
            raise refuse("DP310", f"{name} is given twice", agg)
        pair = value.expressions if isinstance(value, exp.Tuple) else []
        bounds = [number(v) for v in pair]
        if len(bounds) != 2 or None in bounds:
            raise refuse("DP310", f"{name} takes two finite number literals: (lower, upper)", agg)
        if bounds[0] > bounds[1]:
            raise refuse("DP310", f"{name}: lower {bounds[0]} is above upper {bounds[1]}", agg)
        if max(abs(bounds[0]), abs(bounds[1])) > MAX_BOUND:
            raise refuse("DP310", f"{name}: bounds must lie within +-2**50", agg)
        found[key] = (float(bounds[0]), float(bounds[1]))
    return Bounds(**found)
