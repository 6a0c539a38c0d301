"""A release spec: its budget and its named statistics, read from YAML or a dict and checked whole.

A spec that does not hold is refused before anything is planned or charged (DP524-DP527, naming the
entry): a broken spec spends nothing.

>>> spec = load_spec({"budget": {"epsilon": 1}, "statistics": [{"name": "n", "sql": "SELECT COUNT(*) FROM t"}]})
>>> spec.epsilon, spec.delta, [s.name for s in spec.statistics], spec.ci
(1.0, 0.0, ['n'], 0.95)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from dpsql.api.statements import Statement, allocate
from dpsql.errors import DpsqlError, ReleaseError

KEYS = {"title", "budget", "ci", "statistics"}
STATISTIC_KEYS = {"name", "sql", "weight", "epsilon", "delta"}
# A name is a file's (NAME.parquet) and a DuckDB table's: plain characters only, no path, no dot.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class Statistic:
    """One named statistic of a release: its SQL and its share (an explicit epsilon, or a weight)."""
    name: str
    sql: str
    weight: float | None = None
    epsilon: float | None = None
    delta: float | None = None

    def statement(self) -> Statement:
        return Statement(self.sql, self.name, self.epsilon, self.delta, self.weight)


@dataclass(frozen=True)
class ReleaseSpec:
    """A release: its title, its budget, the confidence level of its intervals (None: none) and its
    statistics, in order. ``shares()``: each statistic's (epsilon, delta), as the batch allocates them."""
    title: str
    epsilon: float
    delta: float
    ci: float | None
    statistics: tuple[Statistic, ...]

    def shares(self, exact: frozenset[str] = frozenset()) -> list[tuple[float, float]]:
        """The batch's split over the statistics not in ``exact``; (0, 0) for those (public tables only:
        they spend nothing, so they take no share of the budget)."""
        paying = [s for s in self.statistics if s.name not in exact]
        try:
            split = allocate([s.statement() for s in paying], self.epsilon, self.delta) if paying else []
        except DpsqlError as err:   # DP426: the same refusal, as the spec's
            raise ReleaseError("DP527", f"release spec: {err.message}") from None
        got = iter([(float(e or 0.0), float(d or 0.0)) for e, d in split])
        return [(0.0, 0.0) if s.name in exact else next(got) for s in self.statistics]


def _fail(code: str, where: str, message: str) -> ReleaseError:
    return ReleaseError(code, f"release spec: {where} {message}")


def _read(source: str | Path | Mapping) -> Any:
    if isinstance(source, Mapping):
        return source
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as e:
        raise ReleaseError("DP524", f"cannot read release spec {str(source)!r}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ReleaseError("DP524", f"release spec {str(source)!r} is not UTF-8 text") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ReleaseError("DP524", f"release spec {str(source)!r} is not valid YAML: {e}") from None


def _mapping(value: Any, code: str, where: str, keys: set[str]) -> Mapping:
    if not isinstance(value, Mapping):
        raise _fail(code, where, f"must be a mapping, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise _fail(code, where, f"has unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))})")
    return value


def _number(value: Any, code: str, where: str, *, low: float, high: float = math.inf,
            low_open: bool = True) -> float:
    """``value`` as a float in (low, high) (``low_open``) or [low, high), else DP52x naming ``where``."""
    fine = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) \
        and (value > low if low_open else value >= low) and value < high
    if not fine:
        shown = f"({low:g}, {high:g})" if low_open else f"[{low:g}, {high:g})"
        raise _fail(code, where, f"must be a finite number in {shown.replace('inf', 'infinity')}, got {value!r}")
    return float(value)


def _statistic(entry: Any, i: int) -> Statistic:
    where = f"statistics[{i}]"
    entry = _mapping(entry, "DP526", where, STATISTIC_KEYS)
    name = entry.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _fail("DP526", f"{where}.name", f"must be 1-64 letters, digits, _ or - (not starting with a digit "
                    f"or -; it names a file and a table), got {name!r}")
    where = f"statistic {name!r}"
    sql = entry.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise _fail("DP526", f"{where}: sql", "must be the statistic's SQL text")
    weight, epsilon, delta = (entry.get(k) for k in ("weight", "epsilon", "delta"))
    if weight is not None and epsilon is not None:
        raise _fail("DP526", where, "has both a weight and an epsilon: give it one of the two")
    return Statistic(name, sql,
                     None if weight is None else _number(weight, "DP526", f"{where}: weight", low=0),
                     None if epsilon is None else _number(epsilon, "DP526", f"{where}: epsilon", low=0),
                     None if delta is None else _number(delta, "DP526", f"{where}: delta", low=0, high=1,
                                                        low_open=False))


def _statistics(value: Any) -> tuple[Statistic, ...]:
    if not isinstance(value, list) or not value:
        raise _fail("DP526", "statistics", "must be a non-empty list of {name, sql} entries")
    found = tuple(_statistic(entry, i) for i, entry in enumerate(value))
    seen: dict[str, str] = {}
    for s in found:   # case aside: files on some systems and DuckDB's table names ignore it
        if s.name.lower() in seen:
            raise _fail("DP526", f"statistic {s.name!r}", f"is named twice (as {seen[s.name.lower()]!r} too)")
        seen[s.name.lower()] = s.name
    return found


def load_spec(source: str | Path | Mapping) -> ReleaseSpec:
    """The release spec at ``source`` (a YAML path or a dict), checked whole, its split made once.

    Raises:
        ReleaseError (DP524-DP527): naming the bad entry; nothing is spent.
    """
    raw = _mapping(_read(source), "DP524", "the spec", KEYS)
    if "budget" not in raw:
        raise _fail("DP525", "budget", "is required ({epsilon: E, delta: D})")
    budget = _mapping(raw["budget"], "DP525", "budget", {"epsilon", "delta"})
    if "epsilon" not in budget:
        raise _fail("DP525", "budget.epsilon", "is required")
    epsilon = _number(budget["epsilon"], "DP525", "budget.epsilon", low=0)
    delta = _number(budget.get("delta", 0.0), "DP525", "budget.delta", low=0, high=1, low_open=False)
    ci = raw.get("ci", 0.95)
    if ci is not None:
        ci = _number(ci, "DP524", "ci", low=0, high=1)
    title = raw.get("title", "dpsql release")
    if not isinstance(title, str):
        raise _fail("DP524", "title", f"must be text, got {type(title).__name__}")
    spec = ReleaseSpec(title, epsilon, delta, ci, _statistics(raw.get("statistics")))
    spec.shares()   # a split that cannot be made is the spec's refusal, before anything is planned
    return spec
