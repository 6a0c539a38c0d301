"""The SQL of each aggregate's output over its released measurements, and of its confidence interval
(plan/aggregates.py gives each aggregate its own): post-processing only, free. Lowering hands in the
released values (``Released``); lower/post.py places the results in __out.

>>> from sqlglot import exp
>>> r = Released((), lambda i: exp.column("m0"), nonnegative=True)
>>> count_value(None, r).sql("duckdb")
'GREATEST(m0, 0)'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from sqlglot import exp

from dpsql.sql.build import case_when, cast, fn, num
from dpsql.mechanisms.base import mechanism


@dataclass(frozen=True)
class Released:
    """What an output's SQL reads: its measurements, each one's released value in output units (a
    fresh node per call: a noisy total, or the column of a tree's quantile; lowering names them), and
    the release options."""
    measurements: tuple[Any, ...]
    value: Callable[[int], exp.Expression]
    nonnegative: bool
    confidence: float | None = None


# The divisions of an expression over released values (``a / b``, ``a // b``, ``a % b``).
DIVISIONS = (exp.Div, exp.IntDiv, exp.Mod)


def ratios(expression: exp.Expression, never_negative: Callable[[exp.Expression], bool]) -> exp.Expression:
    """The rule for divisions of released values (grammar/README.md, "Ratios of released values"):
    a division is NULL where its divisor's released value is 0, and, where the divisor's exact value
    can never be negative (``never_negative``: a count, a sum of values >= 0), where it is <= 0 too:
    noise alone took it there, and a ratio by it would be NaN, an infinity or of the wrong sign. Never
    NaN nor infinite. A number literal divisor other than 0 is left as it is. Post-processing: free.

    >>> r = ratios(exp.maybe_parse("o0 / o1 + o2 / 4"), lambda n: n.name == "o1")
    >>> r.sql("duckdb")
    'o0 / CASE WHEN o1 > 0 THEN o1 END + o2 / 4'
    >>> ratios(exp.maybe_parse("o0 % (o1 - o2)"), lambda n: False).sql("duckdb")
    'o0 % NULLIF((o1 - o2), 0)'
    """
    def guarded(node: exp.Expression) -> exp.Expression:
        divisor = node.args.get("expression") if isinstance(node, DIVISIONS) else None
        if divisor is None or _nonzero_literal(divisor):
            return node
        if never_negative(divisor):
            kept = exp.Case(ifs=[exp.If(this=exp.GT(this=divisor.copy(), expression=num(0)), true=divisor.copy())])
        else:
            kept = exp.Nullif(this=divisor.copy(), expression=num(0))
        return node.__class__(**{**node.args, "expression": kept})
    return expression.transform(guarded)


def has_ratio(expression: exp.Expression | None) -> bool:
    """Whether ``ratios`` may make the expression NULL (it divides by something but a literal)."""
    return expression is not None and any(not _nonzero_literal(d.args["expression"])
                                          for d in expression.find_all(*DIVISIONS))


def _nonzero_literal(node: exp.Expression) -> bool:
    node = node.unnest()
    if isinstance(node, exp.Neg):
        node = node.this
    try:
        return isinstance(node, exp.Literal) and not node.is_string and float(node.this) != 0
    except ValueError:
        return False


def sign_clamp(value: exp.Expression, lower: float | None, upper: float | None, nonnegative: bool) -> exp.Expression:
    """With ``nonnegative``, a count or a sum of values >= 0 is never released below 0 (and a sum of
    values <= 0 never above): post-processing, free, and it only moves answers toward the truth."""
    if not nonnegative or lower is None:
        return value
    if lower >= 0:
        return fn("GREATEST", value, num(0))
    if upper <= 0:
        return fn("LEAST", value, num(0))
    return value


def half_width(m, confidence: float) -> float:
    """The exact half-width of the noise's central interval at ``confidence``, in output units."""
    return mechanism(m.mechanism).error_bound(m.release, confidence) * m.granularity


def count_value(o, r: Released) -> exp.Expression:
    return sign_clamp(r.value(0), 0.0, None, r.nonnegative)


def sum_value(o, r: Released) -> exp.Expression:
    m = r.measurements[0]
    return sign_clamp(r.value(0), m.lower, m.upper, r.nonnegative)


def avg_value(o, r: Released) -> exp.Expression:
    """AVG = midpoint + noisy centred sum / noisy count (per-group bounds: noisy sum of per-unit means
    / noisy unit count), never dividing by <= 0, clamped back into the bounds."""
    total = r.measurements[0]
    mean = exp.Div(this=r.value(0), expression=fn("GREATEST", r.value(1), num(1)))
    if total.offset is not None:
        mean = exp.Add(this=num(float(total.offset)), expression=mean)
    return fn("LEAST", fn("GREATEST", mean, num(float(o.lower))), num(float(o.upper)))


def variance(sample: bool, root: bool) -> Callable[[Any, Released], exp.Expression]:
    """VAR/STDDEV from noisy n, sum(x - m) and sum((x - m)^2) (m the bounds' midpoint, r the half-width):
    var = S2/n - (S1/n)^2, clamped to [0, r^2], the most a variable within the bounds can have;
    never dividing by <= 0. Sample versions scale by n/(n-1)."""
    def value(o, r: Released) -> exp.Expression:
        n = cast(fn("GREATEST", r.value(0), num(1)), "DOUBLE")
        mean = exp.Div(this=r.value(1), expression=n)
        value = exp.Sub(this=exp.Div(this=r.value(2), expression=n.copy()),
                        expression=exp.Mul(this=exp.Paren(this=mean), expression=exp.Paren(this=mean.copy())))
        half = (o.upper - o.lower) / 2
        if sample:
            value = exp.Div(this=exp.Mul(this=exp.Paren(this=value), expression=n.copy()),
                            expression=fn("GREATEST", exp.Sub(this=n.copy(), expression=num(1)), num(1)))
        value = fn("LEAST", fn("GREATEST", value, num(0.0)), num(float(half * half) * (2 if sample else 1)))
        return fn("SQRT", value) if root else value
    return value


def quantile_value(o, r: Released) -> exp.Expression:
    return r.value(0)   # the tree's descent for this output's q (lower/quantile.py)


def count_interval(o, r: Released) -> tuple[exp.Expression, exp.Expression]:
    """A count's interval: exact for the discrete Laplace noise (coverage >= ci, the smallest such
    width), whole numbers, never below 0 with ``nonnegative``."""
    return _around(r, 0.0, None)


def sum_interval(o, r: Released) -> tuple[exp.Expression, exp.Expression]:
    """A sum's interval: exact for its noise, clamped as the sum is (``sign_clamp``)."""
    m = r.measurements[0]
    return _around(r, m.lower, m.upper)


def _around(r: Released, lower: float | None, upper: float | None) -> tuple[exp.Expression, exp.Expression]:
    m = r.measurements[0]
    a = half_width(m, r.confidence)
    a = int(a) if m.granularity == 1 else a   # counts stay integers
    low, high = (sign_clamp(op(this=r.value(0), expression=num(a)), lower, upper, r.nonnegative)
                 for op in (exp.Sub, exp.Add))
    return low, high


def avg_interval(o, r: Released) -> tuple[exp.Expression, exp.Expression]:
    """AVG's interval: from a (1+ci)/2 interval for each of its sum and count (union bound): coverage
    >= ci; its whole bounds where the count's interval reaches 0."""
    level = (1 + r.confidence) / 2
    total, count = r.measurements
    a, b = half_width(total, level), half_width(count, level)
    s, n = r.value(0), cast(r.value(1), "DOUBLE")
    midpoint = total.offset or 0.0   # centred sums
    corners = [exp.Add(this=num(midpoint), expression=exp.Div(
                   this=exp.Paren(this=op_s(this=s.copy(), expression=num(a))),
                   expression=exp.Paren(this=op_n(this=n.copy(), expression=num(b)))))
               for op_s in (exp.Sub, exp.Add) for op_n in (exp.Sub, exp.Add)]
    unknown = exp.LTE(this=exp.Sub(this=n.copy(), expression=num(b)), expression=num(0))

    def bounded(value):
        return fn("LEAST", fn("GREATEST", value, num(float(o.lower))), num(float(o.upper)))
    low = case_when(unknown, num(float(o.lower)), bounded(fn("LEAST", *corners)))
    high = case_when(unknown.copy(), num(float(o.upper)), bounded(fn("GREATEST", *[c.copy() for c in corners])))
    return low, high
