"""What one request may ask of dpsql: the size of its SQL, its outputs, its tables, its rows, its time.

Every request is work done for someone who may be untrusted, and much of it is free: an explain, a
query over public tables only, a refusal. So the work one request can cause is bounded before it
starts (README, "Limits"):

* the SQL text (DP314), its outputs and its table references (DP314): planning is linear in the
  size of the query (benchmarks/planning.py), so these bound planning's time;
* the rows of an answer (DP315): a DP query's groups are known at plan time, a public-only query's
  rows are counted as they stream;
* nesting: Python's recursion limit already refuses a query nested deeper than a few hundred levels
  (DP100 or DP102);
* a deadline on the engine: a request holds it for at most that many seconds from the start of its
  turn, then DuckDB is interrupted (DP425 before anything is spent, DP901 after: a DP query
  interrupted after its charge stays spent). Waiting for the turn does not count: turns go round
  robin between analysts (engines/turns.py), so a request waits at most one turn of each other
  analyst waiting.

>>> WorkLimits().max_outputs
256
>>> Deadline(None).remaining() is None, Deadline(60).remaining() > 59
(True, True)
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from dpsql.errors import InvalidParameter


@dataclass(frozen=True)
class WorkLimits:
    """The limits of one connection (``dpsql.connect(..., limits=WorkLimits(...))``)."""
    max_sql: int = 65_536          # characters of one query's SQL text
    max_outputs: int = 256         # SELECT items, GROUP BY items, ORDER BY terms and HAVING aggregates, every level
    max_tables: int = 16           # table references (FROM, joins, subqueries and CTEs), every level
    max_rows: int = 1_000_000      # rows of one answer (a DP query's groups; a public-only query's rows)
    deadline: float | None = None  # seconds a call may hold the engine when it names none (None: no limit)

    def __post_init__(self):
        for name in ("max_sql", "max_outputs", "max_tables", "max_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameter("DP401", f"WorkLimits.{name} must be a whole number >= 1, got {value!r}")
        if self.deadline is not None:
            check_seconds(self.deadline)


def check_seconds(seconds) -> float:
    """A deadline's seconds: a finite number > 0 (DP401 otherwise)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
        raise InvalidParameter("DP401", f"a deadline must be a finite number of seconds > 0, got {seconds!r}")
    return float(seconds)


class Deadline:
    """The moment (``time.monotonic``) by which a turn on the engine must end; ``Deadline(None)`` never
    ends."""

    __slots__ = ("seconds", "at")

    def __init__(self, seconds: float | None):
        self.seconds = None if seconds is None else check_seconds(seconds)
        self.at = None if seconds is None else time.monotonic() + self.seconds

    def remaining(self) -> float | None:
        """Seconds left (<= 0 once passed), or None without a deadline."""
        return None if self.at is None else self.at - time.monotonic()

    def passed(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


NO_DEADLINE = Deadline(None)

# Noisy top-k (plan/top_k.py): a choice peels k times over every candidate, each peel O(candidates)
# (mechanisms/exponential.py): at 1M candidates about 0.06-0.14 s a peel on this project's machine, so
# a top-k of at most MAX_TOP_K groups over at most TOP_K_CANDIDATES candidates runs in seconds. A larger
# LIMIT keeps the meaning of noisy values (every candidate's value released, the largest kept).
MAX_TOP_K = 100
TOP_K_CANDIDATES = 1_000_000
