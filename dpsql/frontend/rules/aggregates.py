"""Rules on aggregates: supported ones with well-formed arguments (each as its form says,
frontend/scope.py FORMS), quantiles with a literal q, numeric arguments with finite bounds, and
GoogleSQL's DP options and contribution bounds."""
from __future__ import annotations

from sqlglot import exp
from dpsql.errors import NeedsBounds
from dpsql.frontend.options import aggregate_bounds, number, query_options
from dpsql.sql.totality import family
from dpsql.frontend.scope import (AGGREGATES, FORMS, QUANTILES, Argument, Scope, argument_bounds, is_unit_count,
                                  name_of)


def quantile_arguments(select: exp.Select, scope: Scope) -> None:
    """MEDIAN(x) and QUANTILE_CONT/PERCENTILE_CONT(x, q): q a number literal in [0, 1] (DP312), no
    DISTINCT (DP303). Runs before the allowlist, so a list of quantiles gets DP312 too."""
    for agg in select.find_all(*QUANTILES):
        form = FORMS[type(agg)]
        fname = form.name
        if isinstance(agg.this, exp.Distinct):
            raise scope.refuse("DP303", f"{fname}(DISTINCT ...) is not supported: a quantile is of all values", agg)
        if form.q is not None:   # MEDIAN: its name fixes q
            continue
        if isinstance(agg.parent, exp.WithinGroup):
            raise scope.refuse("DP312", "PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x) is not supported",
                               agg.parent, hint="write PERCENTILE_CONT(x, q)")
        q = agg.expression
        value = number(q) if q is not None else None
        if value is None or not 0 <= value <= 1:
            raise scope.refuse("DP312", f"{fname}(x, q): q must be one number literal in [0, 1]", q or agg,
                               hint="write QUANTILE_CONT(x, 0.9); for several quantiles, one aggregate each")


def dp_options(select: exp.Select, scope: Scope) -> None:
    """GoogleSQL OPTIONS, contribution bounds and a quantile's ``mechanism =>`` are well formed and fit
    the table (DP308-DP310)."""
    options = query_options(select, scope.refuse)
    unit = options.privacy_unit
    if unit is not None and scope.table.row_level:
        raise scope.refuse("DP309", f"privacy_unit_column={unit}: table {scope.table.name!r} has no privacy unit "
                           "column (each row is a person)", select, hint="drop privacy_unit_column")
    if unit is not None and unit != scope.table.privacy_unit:
        raise scope.refuse("DP309", f"privacy_unit_column={unit} is not the policy's privacy unit of "
                           f"{scope.table.name!r}", select, hint=f"use privacy_unit_column={scope.table.privacy_unit}")
    if options.max_groups not in (None, 1) and scope.table.row_level:
        raise scope.refuse("DP308", "max_groups_contributed: each row is a person, so it is 1", select)
    L = scope.table.max_groups_per_unit
    automatic = any(kind == "groups" for _, kind in scope.table.auto_contributions)
    if options.max_groups is not None and options.max_groups > L and not automatic:
        # The owner's L bounds what one person may move; a query may tighten it, never loosen it
        # (unless the owner left L to the data: max_groups_per_unit: auto, api/auto_contributions.py).
        raise scope.refuse("DP308", f"max_groups_contributed = {options.max_groups} is above the policy's "
                           f"bound for {scope.table.name!r} (max_groups_per_unit: {L})", select,
                           hint=f"a query may only lower it: max_groups_contributed <= {L}, or leave it out")
    for agg in select.find_all(*AGGREGATES):
        bounds, form = aggregate_bounds(agg, scope.refuse), FORMS[type(agg)]
        fname = agg.sql_name()
        if bounds.per_row and not form.per_row:
            raise scope.refuse("DP310", f"{form.name} takes contribution_bounds_per_group, not _per_row"
                               if form.per_group else f"{form.name} takes no contribution bounds", agg)
        if bounds.per_group and scope.table.row_level:
            raise scope.refuse("DP310", f"{fname}: each row is a person in {scope.table.name!r}: "
                               "use contribution_bounds_per_row", agg)
        if bounds.per_group and form.whole and any(b != int(b) or b < 0 for b in bounds.per_group):
            raise scope.refuse("DP310", f"{form.name}'s contribution_bounds_per_group are whole numbers >= 0", agg)
        if bounds.mechanism is not None and not form.quantile:
            raise scope.refuse("DP308", f"{form.name} takes no mechanism => (only the quantiles MEDIAN, QUANTILE_CONT, "
                               "MIN and MAX do)", agg, hint="choose a query's noise with OPTIONS(mechanism = ...)")


def aggregate_arguments(select: exp.Select, scope: Scope) -> None:
    """Aggregates take one argument, as their form says (frontend/scope.py FORMS: a number with finite
    bounds for SUM/AVG, ...), are not nested and not in WHERE/GROUP BY."""
    for agg in select.find_all(*AGGREGATES):
        fname, form = agg.sql_name(), FORMS[type(agg)]
        if agg.find_ancestor(exp.Where, exp.Group) is not None:
            raise scope.refuse("DP305", f"aggregate {fname} is not allowed in WHERE or GROUP BY", agg)
        inner = next((n for n in agg.this.find_all(*AGGREGATES)), None) if agg.this else None
        if inner is not None:
            raise scope.refuse("DP305", f"nested aggregate {inner.sql_name()} inside {fname}", inner)
        arg = agg.this
        if is_unit_count(agg, scope):
            continue
        if isinstance(arg, exp.Distinct):
            inner = arg.expressions[0] if len(arg.expressions) == 1 else None
            policy = scope.table.columns.get(name_of(inner)) if isinstance(inner, exp.Column) else None
            if form.distinct and policy is not None:
                continue   # COUNT(DISTINCT col): C values per unit and partition (L*C), |keys| at most if public
            if not form.distinct:
                raise scope.refuse("DP303", f"{fname}(DISTINCT ...) is not supported", agg,
                                   hint="only COUNT takes DISTINCT: of a column, or of the privacy unit")
            raise scope.refuse("DP303", f"{fname}(DISTINCT ...) takes one column, not "
                               f"{inner.sql(dialect='duckdb') if inner is not None else 'several'}", inner or agg,
                               hint="count the distinct values of a column: COUNT(DISTINCT zip)")
        if form.star and isinstance(arg, exp.Star):
            continue
        if arg is None or isinstance(arg, exp.Star) or agg.args.get("expressions") or _more_arguments(agg) or \
                (isinstance(arg, exp.Column) and isinstance(arg.this, exp.Star)):
            raise scope.refuse("DP302", f"{fname} takes one argument: a column or an expression of columns", agg)
        if form.argument is not None:
            _argument_kind(agg, form.argument, scope)


def _more_arguments(agg: exp.Func) -> bool:
    """A second argument its node keeps apart (COUNT_IF's ``zero_on_all_null``), which dpsql would not
    read: refused rather than dropped (a quantile's q is rule quantile_arguments')."""
    return any(isinstance(value, exp.Expression) for key, value in agg.args.items()
               if key not in ("this", "expression", "expressions"))


def _needs_automatic_bounds(agg: exp.Func, scope: Scope) -> None:
    """DP330 when the argument's unbounded columns are ``bounds: auto`` ones not chosen yet: the
    connection chooses them and plans again (api/auto_bounds.py). Columns of other kinds fall through
    to DP302."""
    columns = [scope.table.columns.get(name_of(c)) for c in agg.this.find_all(exp.Column)]
    waiting = tuple(dict.fromkeys(c.auto for c in columns if c is not None and c.auto and not c.bounded))
    if waiting:
        names = ", ".join(f"{t}.{c}" for t, c in waiting)
        err = scope.refuse("DP330", f"{agg.sql_name()}: the automatic bounds of {names} are not chosen yet", agg,
                           cls=NeedsBounds, rule="automatic_bounds",
                           hint="a query that needs them chooses them first (a DP histogram, charged once per "
                                "data version at the policy's auto_bounds epsilon); explain spends nothing")
        err.columns = waiting
        raise err


def _argument_kind(agg: exp.Func, argument: Argument, scope: Scope) -> None:
    """One argument of the kind its form asks for (DP302), with finite bounds where it needs them;
    per-group bounds only where the form takes them (DP310)."""
    fname, arg = agg.sql_name(), agg.this
    bounds = aggregate_bounds(agg, scope.refuse)
    if bounds.per_group and not FORMS[type(agg)].per_group:
        raise scope.refuse("DP310", f"{fname} takes contribution_bounds_per_row only", agg)
    kind = family(arg, scope.types)
    if kind not in argument.families and (kind is not None or not isinstance(arg, exp.Column)):
        # A string or a date would have to be cast to a number row by row, and that cast fails
        # (or not) depending on the data.
        what = f"column {arg.name!r}" if isinstance(arg, exp.Column) else arg.sql()
        raise scope.refuse("DP302", f"{fname}: {what} is {'a ' + kind + ', ' if kind else ''}not {argument.what}", agg,
                           hint=argument.hint)
    if argument.bounded and not (bounds.per_row or bounds.per_group or argument_bounds(arg, scope.table)):
        _needs_automatic_bounds(agg, scope)
        what = f"column {arg.name!r} has no bounds in the policy" if isinstance(arg, exp.Column) else \
            f"no finite bounds follow from the bounds of its columns for {arg.sql()}"
        raise scope.refuse("DP302", f"{fname}: {what}", agg,
                           hint="declare lower and upper for its columns in the policy, or pass "
                                "contribution_bounds_per_row => (lower, upper)")
