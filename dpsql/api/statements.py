"""A batch's statements and how its budget is split between them (api/batch.py runs them).

A statement has an explicit epsilon (and delta) or a weight; the batch's budget goes first to the
explicit amounts, the rest by weight, never more than the batch's in all (exact decimals: the floats
the plans get add up to at most the budget). Every refusal here is DP426 and spends nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Sequence

from dpsql.errors import InvalidParameter
from dpsql.plan.allocation import check_budget_parameters


@dataclass(frozen=True)
class Statement:
    """One statement of a batch: its SQL, a name (default: its place, ``"1"``, ``"2"``, ...), and an
    explicit ``epsilon`` (and ``delta``) or a ``weight`` (default 1) for its share of the batch's budget."""
    sql: str
    name: str | None = None
    epsilon: float | None = None
    delta: float | None = None
    weight: float | None = None


def refusal(message: str, hint: str) -> InvalidParameter:
    return InvalidParameter("DP426", message, hint=hint)


def statements(given: Sequence[str | Statement]) -> list[Statement]:
    """The batch as Statements, each named (its place when unnamed), names unique (DP426)."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence) or not given:
        raise refusal("a batch is a non-empty list of statements (SQL strings or dpsql.Statement)",
                      "pass [\"SELECT ...\", dpsql.Statement(\"SELECT ...\", name=\"n\", weight=2)]")
    out = []
    for i, s in enumerate(given, 1):
        if isinstance(s, str):
            s = Statement(s)
        if not isinstance(s, Statement) or not isinstance(s.sql, str):
            raise refusal(f"statement {i} of the batch is {type(s).__name__}, not SQL text or a Statement",
                          "pass SQL strings or dpsql.Statement(sql, name=..., epsilon=... or weight=...)")
        out.append(Statement(s.sql, str(i) if s.name is None else s.name, s.epsilon, s.delta, s.weight))
    names = [s.name for s in out]
    twice = sorted({n for n in names if names.count(n) > 1}, key=str)
    if twice:
        raise refusal(f"the batch names statement {twice[0]!r} twice", "give every statement its own name")
    return out


def allocate(batch: Sequence[Statement], epsilon: float | None,
             delta: float | None) -> list[tuple[float | None, float | None]]:
    """Each statement's (epsilon, delta). Without a batch budget, each its own (None: its OPTIONS or the
    policy's default, as ``sql``). With one, explicit amounts are taken first and the rest is split by
    weight (default 1) between the statements without one; all together never exceed the batch's.

    >>> allocate([Statement("a"), Statement("b", weight=3)], 1.0, 1e-6)
    [(0.25, 2.5e-07), (0.75, 7.5e-07)]
    >>> allocate([Statement("a", epsilon=0.5), Statement("b")], 2.0, None)
    [(0.5, 0.0), (1.5, 0.0)]
    """
    for s in batch:
        if s.weight is not None and (isinstance(s.weight, bool) or not isinstance(s.weight, (int, float))
                                     or not math.isfinite(s.weight) or s.weight <= 0):
            raise refusal(f"statement {s.name!r} has weight {s.weight!r}; a weight is a finite number > 0",
                          "give it a weight such as 1 or 2.5, or an explicit epsilon")
        if s.weight is not None and s.epsilon is not None:
            raise refusal(f"statement {s.name!r} has both a weight and an epsilon", "give it one of the two")
        if s.epsilon is not None or s.delta is not None:   # each explicit amount as a query's (DP401)
            check_budget_parameters(1.0 if s.epsilon is None else s.epsilon, s.delta or 0.0)
    if epsilon is None:
        if delta is not None or any(s.weight is not None for s in batch):
            raise refusal("weights and a batch delta share the batch's epsilon, and none was given",
                          "pass epsilon= for the whole batch, or an epsilon for each statement")
        return [(s.epsilon, s.delta) for s in batch]
    epsilon, delta = check_budget_parameters(epsilon, 0.0 if delta is None else delta)
    epsilons = _split(batch, epsilon, [s.epsilon for s in batch], "epsilon")
    return list(zip(epsilons, _split(batch, delta, [s.delta for s in batch], "delta")))


def _split(batch: Sequence[Statement], total: float, explicit: list[float | None], what: str) -> list[float]:
    """``total`` over the statements: explicit amounts first, the rest by weight. Exact: the shares are
    rounded to floats and, where rounding took their sum past ``total``, the largest is lowered a step."""
    whole = Decimal(repr(total))
    fixed = sum((Decimal(repr(x)) for x in explicit if x is not None), Decimal(0))
    if fixed > whole:
        raise refusal(f"the statements' own {what}s add up to {fixed}, more than the batch's {total!r}",
                      f"lower them, or raise the batch's {what}")
    weights = {i: Decimal(repr(s.weight if s.weight is not None else 1))
               for i, (s, x) in enumerate(zip(batch, explicit)) if x is None}
    rest = whole - fixed
    if what == "epsilon" and weights and rest <= 0:
        names = ", ".join(repr(batch[i].name) for i in weights)
        raise refusal(f"nothing of the batch's epsilon is left for {names}", "give them a share: lower the "
                      "explicit epsilons or raise the batch's")
    shares = [x if x is not None else float(rest * weights[i] / sum(weights.values()))
              for i, x in enumerate(explicit)]
    while weights and sum(Decimal(repr(x)) for x in shares) > whole:
        largest = max(weights, key=lambda i: shares[i])
        shares[largest] = math.nextafter(shares[largest], 0.0)
    return shares
