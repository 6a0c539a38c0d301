"""The plan of a local-model count (frontend/local.py): the reports of each category counted exactly, then
debiased (mechanisms/randomized_response.py ``estimate``); central epsilon 0.

>>> from dpsql.frontend.local import LocalQuery
>>> plan = LocalPlan("select smoker, count(*) as n from s group by smoker", LocalQuery("s", "smoker", ("smoker", "n"),
...                  True), (False, True), 1.0, 0.95, True, "SELECT 1")
>>> print(plan)   # doctest: +ELLIPSIS
dpsql plan for: select smoker, count(*) as n from s group by smoker
local model: epsilon 1 per respondent (Warner randomized response of s.smoker): answered from the reports, central epsilon 0
budget: epsilon 0, delta 0 of the central budget (each row's smoker is its respondent's randomized report, ...
n: each of the 2 categories' count, debiased: (reports - N q) / (p - q), p = 0.731059 ...
...
>>> plan.answer(pa.table({"c": [0, 1], "r": [30, 70]})).column("n").to_pylist()   # doctest: +ELLIPSIS
[6.72..., 93.27...]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from dpsql.frontend.local import LocalQuery
from dpsql.mechanisms.randomized_response import RandomizedResponse, estimate
from dpsql.plan.build import check_release_options
from dpsql.plan.text import CONFIDENCE, fmt, heading
from dpsql.policy.model import Policy
from dpsql.sql.build import alias, col, num, select
from dpsql.sql.literals import key_literal

CATEGORY, REPORTS = "__dpsql_category", "__dpsql_reports"   # the counting query's two columns


@dataclass(frozen=True)
class LocalPlan:
    """A count per category of a randomized column, answered from the reports: ``rewritten_sql`` counts
    them (the category's index in the domain, NULL outside it; its count), ``answer`` debiases them.
    ``str(plan)`` is the explain text; ``epsilon`` and ``delta`` are the central budget's: 0."""
    sql: str
    query: LocalQuery
    keys: tuple                    # the domain, in its declared order, in the column's type
    respondent_epsilon: float      # what each report already cost its respondent
    confidence: float
    nonnegative: bool
    rewritten_sql: str
    epsilon: float = 0.0
    delta: float = 0.0

    @property
    def mechanism(self) -> RandomizedResponse:
        return RandomizedResponse(self.respondent_epsilon, len(self.keys))

    @property
    def summary(self) -> str:
        """One line for the ledger's history (and explain's second line)."""
        return (f"local model: epsilon {fmt(self.respondent_epsilon)} per respondent ({self.mechanism.name} of "
                f"{self.query.table}.{self.query.column}): answered from the reports, central epsilon 0")

    def __str__(self) -> str:
        rr, q = self.mechanism, self.query
        count = q.names[1]
        lines = [heading(self.sql), self.summary,
                 f"budget: epsilon 0, delta 0 of the central budget (each row's {q.column} is its respondent's "
                 f"randomized report, epsilon {fmt(self.respondent_epsilon)}-DP already; the rows of {q.table} are "
                 "public: local_model)",
                 f"{count}: each of the {len(self.keys)} categories' count, debiased: (reports - N q) / (p - q), "
                 f"p = {float(rr.p_keep):.6g} the chance a report keeps its answer, q = {float(rr.q):.6g} each other "
                 f"category's, N the reports; unbiased" + (", then clamped at 0" if self.nonnegative else ""),
                 f"{count}_variance: N q (1 - q) / (p - q)^2 + {count} (1 - p - q) / (p - q); {count}_ci_low, "
                 f"{count}_ci_high: its {fmt(self.confidence * 100)}% normal interval",
                 "rows: every category of the domain, in its declared order", "rewritten SQL:"]
        pretty = sqlglot.transpile(self.rewritten_sql, read="duckdb", write="duckdb", pretty=True)[0]
        return "\n".join(lines + ["  " + line for line in pretty.splitlines()])

    def answer(self, observed: pa.Table) -> pa.Table:
        """The released rows from the counting query's (category index, reports): one per category."""
        counts = [0] * len(self.keys)
        for index, reports in zip(observed.column(0).to_pylist(), observed.column(1).to_pylist()):
            if index is not None:   # a value outside the domain (or NULL) is no report
                counts[index] = reports
        found = estimate(counts, self.respondent_epsilon)
        low, high = found.interval(self.confidence)
        values = (found.counts, low, high)
        if self.nonnegative:
            values = tuple(np.maximum(v, 0.0) for v in values)
        key, count = pa.array(list(self.keys)), pa.array(values[0])
        names = list(self.query.names) if self.query.key_first else list(reversed(self.query.names))
        first = [key, count] if self.query.key_first else [count, key]
        c = self.query.names[1]
        return pa.Table.from_arrays(first + [pa.array(found.variance), pa.array(values[1]), pa.array(values[2])],
                                    names=names + [f"{c}_variance", f"{c}_ci_low", f"{c}_ci_high"])


def local_plan(query: LocalQuery, sql: str, policy: Policy, confidence: float | None, nonnegative: bool) -> LocalPlan:
    """The plan of a query ``frontend.local.local_query`` matched, over the policy bound to the schema
    (its keys in the column's type). The counting query compares the column with each key written in
    the column's type, as declared keys are compared (one type: total)."""
    check_release_options(confidence, nonnegative)
    column = policy.tables[query.table].columns[query.column]
    assert column.keys is not None and column.randomized is not None
    category = exp.Case(ifs=[exp.If(this=exp.EQ(this=col(query.column), expression=key_literal(value, column.sql_type)),
                                    true=num(i)) for i, value in enumerate(column.keys)])
    counting = select(alias(category, CATEGORY), alias(exp.Count(this=exp.Star()), REPORTS), source=query.table,
                      group=[num(1)])
    return LocalPlan(sql, query, tuple(column.keys), column.randomized, CONFIDENCE if confidence is None else confidence,
                     nonnegative, counting.sql(dialect="duckdb"))
