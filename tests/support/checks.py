"""Helpers every kind of test uses: a property test's example count, hypothesis's settings for the
property tests over whole queries, the refusal a query raises, and a document with one entry changed
(a broken policy or release spec)."""
from __future__ import annotations

import copy
import os

import pytest
from hypothesis import HealthCheck

import dpsql


def examples(n: int) -> int:
    """A property test's example count: ``n`` in the default run, times DPSQL_EXAMPLES for a thorough
    one (``DPSQL_EXAMPLES=10 python3 -m pytest tests/properties/test_sensitivity.py``)."""
    return max(1, round(n * float(os.environ.get("DPSQL_EXAMPLES", "1"))))


# Hypothesis settings of the property tests that run whole queries (leaks, differential): no deadline
# (a query may plan and run for seconds), no example database, and the health checks that large
# generated SQL trips switched off.
COMMON = dict(deadline=None, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.large_base_example])


def refusal(db, sql, **kw):
    """The DpsqlError a query raises (fails the test if it is answered)."""
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(sql, **kw)
    return info.value


def within_sensitivity(sensitivity, moves) -> str | None:
    """Why the moves of one measurement's partitions (one number per partition, grid steps) exceed
    its (L0, Linf) sensitivity and the norms it states, or None if they do not: at most L0 partitions
    move, none by more than Linf, their L1 total <= l1 and the sum of their squares <= l2_squared
    (the bound a Gaussian is calibrated to)."""
    moved = [abs(x) for x in moves if x]
    checks = [(len(moved), sensitivity.partitions, "L0"), (max(moved, default=0), sensitivity.per_partition, "Linf"),
              (sum(moved), sensitivity.l1, "L1"), (sum(x * x for x in moved), sensitivity.l2_squared, "L2^2")]
    broken = [f"{name} {value} > {bound}" for value, bound, name in checks if value > bound]
    return "; ".join(broken) or None


DELETE = object()   # ``edited``'s value that removes the entry


def edited(doc: dict, path: str, value) -> dict:
    """A copy of ``doc`` with the entry at the dotted ``path`` (a number indexes a list) set to ``value``,
    or removed when it is ``DELETE``."""
    changed = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = changed
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    key = int(last) if last.isdigit() else last
    if value is DELETE:
        del node[key]
    else:
        node[key] = value
    return changed


def one_by_default(values, default) -> list:
    """``values`` as pytest params, all but ``default`` marked slow: a process-heavy race (kills, many
    processes) runs under one accountant by default and under every one with ``-m slow``; the
    accountants share the ledger's locking path, and each one's composition has its own tests."""
    return [v if v == default else pytest.param(v, marks=pytest.mark.slow) for v in values]

