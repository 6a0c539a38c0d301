"""Plans of recently asked queries, kept per analyst.

Asking the same question again (a dashboard's refresh, ``fresh=True`` for new noise) skips parse,
validate, plan and rewrite: 10-35 ms of Python per TPC-H query, as much as the engine takes for a
small one. A plan is a function of the query text, the call's options and the connection's policy,
noise function and public keys (the engine reads a public column's values once per analyst:
engines/duckdb.py ``public_keys``). Planning never reads private data, so whether a plan is found
says nothing about a person.

One LRU per analyst (``None``: the owner in process): whether a query is found depends on that
analyst's own queries only, never on what, or how much, another analyst asked.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

PER_ANALYST = 32   # plans kept per analyst (a TPC-H plan holds 60-80 KB: 2.5 MB per analyst at most)


class Entry:
    """A plan and, once a query ran with it, its normalised text for the ledger (replay.normalise_sql)
    and its measurements' identities (accounting/measurements.py; one lowering each, so kept)."""

    __slots__ = ("plan", "normalised", "identities")

    def __init__(self, plan):
        self.plan = plan
        self.normalised: tuple[str, tuple[str, ...]] | None = None
        self.identities: tuple[tuple[str, str], tuple[str, ...]] | None = None   # (policy, data version), them


def key(sql: str, *options) -> tuple:
    """The call as typed: 1 and 1.0 are different keys (the plan records the value as given)."""
    return (sql, *((type(o).__name__, o) for o in options))


class PlanCache:
    def __init__(self, per_analyst: int = PER_ANALYST):
        self.per_analyst = per_analyst
        self._plans: dict[Hashable, OrderedDict[tuple, Entry]] = {}
        self._lock = threading.Lock()

    def get(self, analyst: str | None, call: tuple) -> Entry | None:
        with self._lock:
            plans = self._plans.get(analyst)
            entry = plans.get(call) if plans is not None else None
            if entry is not None:
                plans.move_to_end(call)
            return entry

    def put(self, analyst: str | None, call: tuple, entry: Entry) -> None:
        with self._lock:
            plans = self._plans.setdefault(analyst, OrderedDict())
            plans[call] = entry
            plans.move_to_end(call)
            while len(plans) > self.per_analyst:
                plans.popitem(last=False)

    def lookup(self, analyst: str | None, call: tuple, make: Callable[[], object]) -> Entry:
        """The kept entry, else a new one with ``make()``'s plan (an error is never kept: raised again)."""
        entry = self.get(analyst, call)
        if entry is None:
            entry = Entry(make())
            self.put(analyst, call, entry)
        return entry

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
