"""The largest bounds a policy, or a query's own contribution bounds, may declare.

>>> MAX_BOUND == 2 ** 50, MAX_KEY_RANGE
(True, 1000000)
"""
from __future__ import annotations

# Bounds beyond 2**50 in magnitude are refused (policy columns, derived keys, a query's
# contribution_bounds): then the grid step g of plan/sensitivity.py's granularity is below 2**31, and a
# released sum, (steps + noise) * g with |steps + noise| < 2**63, stays far below the largest double:
# never an infinity.
MAX_BOUND = 2.0 ** 50
MAX_KEY_RANGE = 1_000_000   # keys one `keys: {range: ...}` may declare
