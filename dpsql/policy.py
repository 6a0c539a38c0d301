"""The data owner's policy: which table holds people, how to bound them, and the total budget.

Loaded from YAML or a dict, validated whole (errors name the bad entry's path), then checked
against the real DuckDB schema at connect time.

>>> p = load_policy({"version": 1, "budget": {"epsilon": 1.0},
...                  "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 1}}}}})
>>> p.tables["t"].columns["x"].upper
1.0
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from dpsql.errors import PolicyError
from dpsql.plan.sensitivity import MAX_BOUND

ROW = "row"


@dataclass(frozen=True)
class ColumnPolicy:
    """What the owner declared about one column.

    ``keys`` is the public key domain (every key appears in GROUP BY output); ``lower``/``upper`` are
    clamping bounds, required to SUM or AVG the column; identifiers may not be referenced at all.
    """
    name: str
    identifier: bool = False
    type: str | None = None
    lower: float | None = None
    upper: float | None = None
    keys: tuple | None = None
    sql_type: str = ""          # filled from the DuckDB schema at connect
    key_table: str | None = None  # set at connect for a large key set: the TEMP table holding it

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True)
class TablePolicy:
    """One private table: its privacy unit and contribution bounds L and C."""
    name: str
    privacy_unit: str                 # "row", or the (lower-cased) column identifying a person
    max_groups_per_unit: int = 1      # L
    max_rows_per_unit: int = 1        # C
    columns: Mapping[str, ColumnPolicy] = field(default_factory=dict)

    @property
    def row_level(self) -> bool:
        return self.privacy_unit == ROW

    def is_identifier(self, column: str) -> bool:
        col = self.columns.get(column)
        return column == self.privacy_unit or (col is not None and col.identifier)


@dataclass(frozen=True)
class Policy:
    """The whole policy: total budget, default per-query epsilon/delta, private tables."""
    budget_epsilon: float
    budget_delta: float
    default_epsilon: float
    default_delta: float
    tables: Mapping[str, TablePolicy]
    version: int = 1


def _fail(path: str, problem: str) -> PolicyError:
    return PolicyError("DP501", f"invalid policy: {path}: {problem}")


def _number(value: Any, path: str, *, positive=False, nonnegative=False, integer=False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, "must be a number")
    if not math.isfinite(value):
        raise _fail(path, "must be finite")
    if integer and value != int(value):
        raise _fail(path, "must be a whole number")
    if positive and value <= 0:
        raise _fail(path, "must be > 0")
    if nonnegative and value < 0:
        raise _fail(path, "must be >= 0")
    return int(value) if integer else float(value)


def _mapping(value: Any, path: str, allowed: set[str]) -> Mapping:
    if not isinstance(value, Mapping):
        raise _fail(path, "must be a mapping")
    for key in value:
        if key not in allowed:
            raise _fail(f"{path}.{key}" if path else str(key),
                        f"unknown entry (expected one of: {', '.join(sorted(allowed))})")
    return value


def _column(name: str, spec: Any, path: str) -> ColumnPolicy:
    spec = {} if spec is None else spec
    spec = _mapping(spec, path, {"identifier", "type", "lower", "upper", "keys"})
    identifier = spec.get("identifier", False)
    if not isinstance(identifier, bool):
        raise _fail(f"{path}.identifier", "must be true or false")
    ctype = spec.get("type")
    if ctype is not None and ctype not in ("int", "float"):
        raise _fail(f"{path}.type", "must be int or float")
    lower = upper = None
    if "lower" in spec or "upper" in spec:
        if "lower" not in spec or "upper" not in spec:
            raise _fail(path, "lower and upper must be given together")
        lower = _number(spec["lower"], f"{path}.lower")
        upper = _number(spec["upper"], f"{path}.upper")
        if lower > upper:
            raise _fail(f"{path}.lower", f"must be <= upper ({lower:g} > {upper:g})")
        if max(abs(lower), abs(upper)) > MAX_BOUND:
            raise _fail(path, f"bounds must lie within +-2**50 ({MAX_BOUND:g})")
    keys = spec.get("keys")
    if keys is not None:
        if not isinstance(keys, (list, tuple)) or not keys:
            raise _fail(f"{path}.keys", "must be a non-empty list")
        for i, key in enumerate(keys):
            if key is None or isinstance(key, (dict, list)) or (isinstance(key, float) and not math.isfinite(key)):
                raise _fail(f"{path}.keys[{i}]", "must be a non-null scalar")
        if len(set(keys)) != len(keys):
            raise _fail(f"{path}.keys", "must not repeat a key")
        keys = tuple(keys)
    if identifier and (keys is not None or lower is not None):
        raise _fail(path, "an identifier column cannot have keys or bounds")
    return ColumnPolicy(name=name, identifier=identifier, type=ctype, lower=lower, upper=upper, keys=keys)


def _table(name: str, spec: Any, path: str) -> TablePolicy:
    spec = _mapping(spec, path, {"privacy_unit", "max_groups_per_unit", "max_rows_per_unit", "columns"})
    if "privacy_unit" not in spec:
        raise _fail(f"{path}.privacy_unit", "is required (a column name, or `row`)")
    unit = spec["privacy_unit"]
    if not isinstance(unit, str) or not unit:
        raise _fail(f"{path}.privacy_unit", "must be a column name or `row`")
    unit = unit.lower()
    L = _number(spec.get("max_groups_per_unit", 1), f"{path}.max_groups_per_unit", integer=True, positive=True)
    C = _number(spec.get("max_rows_per_unit", 1), f"{path}.max_rows_per_unit", integer=True, positive=True)
    if unit == ROW and (L != 1 or C != 1):
        raise _fail(f"{path}.privacy_unit", "with `row`, max_groups_per_unit and max_rows_per_unit must be 1")
    raw_columns = _mapping(spec.get("columns", {}) or {}, f"{path}.columns", set(spec.get("columns", {}) or {}))
    columns = {}
    for cname, cspec in raw_columns.items():
        if not isinstance(cname, str) or not cname:
            raise _fail(f"{path}.columns", f"column name {cname!r} must be a string")
        key = cname.lower()
        if key in columns:
            raise _fail(f"{path}.columns.{cname}", "declared twice (names are case-insensitive)")
        columns[key] = _column(key, cspec, f"{path}.columns.{cname}")
    if unit != ROW:
        # The privacy unit always identifies a person, declared so or not.
        columns[unit] = ColumnPolicy(name=unit, identifier=True)
    return TablePolicy(name=name, privacy_unit=unit, max_groups_per_unit=L, max_rows_per_unit=C, columns=columns)


def load_policy(source: str | Path | Mapping) -> Policy:
    """Load and validate a policy from a YAML path or a dict.

    Raises:
        PolicyError (DP501): naming the path of the first bad entry.
    """
    if isinstance(source, Mapping):
        raw = source
    else:
        try:
            text = Path(source).read_text()
        except OSError as e:
            raise PolicyError("DP501", f"cannot read policy file {source}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise PolicyError("DP501", f"policy file {source} is not UTF-8 text") from None
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise PolicyError("DP501", f"policy file {source} is not valid YAML: {e}") from None
    raw = _mapping(raw, "", {"version", "budget", "default_epsilon", "default_delta", "tables"})
    version = raw.get("version", 1)
    if version != 1:
        raise _fail("version", "must be 1")
    if "budget" not in raw:
        raise _fail("budget", "is required ({epsilon: ..., delta: ...})")
    budget = _mapping(raw["budget"], "budget", {"epsilon", "delta"})
    if "epsilon" not in budget:
        raise _fail("budget.epsilon", "is required")
    total_eps = _number(budget["epsilon"], "budget.epsilon", positive=True)
    total_delta = _number(budget.get("delta", 0.0), "budget.delta", nonnegative=True)
    if total_delta >= 1:
        raise _fail("budget.delta", "must be < 1")
    default_eps = _number(raw.get("default_epsilon", min(1.0, total_eps)), "default_epsilon", positive=True)
    default_delta = _number(raw.get("default_delta", 0.0), "default_delta", nonnegative=True)
    tables_raw = raw.get("tables")
    if not tables_raw:
        raise _fail("tables", "at least one private table is required")
    tables_raw = _mapping(tables_raw, "tables", set(tables_raw))
    tables = {}
    for tname, tspec in tables_raw.items():
        if not isinstance(tname, str) or not tname:
            raise _fail("tables", f"table name {tname!r} must be a string")
        tables[tname.lower()] = _table(tname.lower(), tspec, f"tables.{tname}")
    return Policy(budget_epsilon=total_eps, budget_delta=total_delta, default_epsilon=default_eps,
                  default_delta=default_delta, tables=tables, version=version)
