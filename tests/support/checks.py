"""Helpers every kind of test uses: a property test's example count, hypothesis's settings for the
property tests over whole queries, and the refusal a query raises."""
from __future__ import annotations

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
