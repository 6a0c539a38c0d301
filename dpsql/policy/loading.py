"""Loading a policy: YAML or a dict read into the model (policy/model.py), validated whole (errors name
the bad entry's path). It is checked against the real DuckDB schema (and referenced keys against the
data) at connect time, by the engine. Links between tables (``privacy_unit: {via: ..., references:
...}``) are resolved in ``policy/links.py``, ``source:`` entries read in ``policy/sources.py``.

>>> p = load_policy({"version": 1, "budget": {"epsilon": 1.0},
...                  "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 1}}}}})
>>> p.tables["t"].columns["x"].upper
1.0
"""
from __future__ import annotations

import dataclasses
import datetime
import math
from pathlib import Path
from typing import Any, Mapping

import yaml

from dpsql.errors import PolicyError
from dpsql.mechanisms.base import OPTIONS
from dpsql.mechanisms.randomized_response import MAX_CATEGORIES
from dpsql.policy.bounds import MAX_BOUND, MAX_KEY_RANGE
from dpsql.policy.links import Declared, parse_link, resolve_links
from dpsql.policy.model import ACCOUNTANTS, BASIC, ROW, AutoBounds, ColumnPolicy, Link, Policy, TablePolicy, invalid as _fail
from dpsql.policy.sources import parse_source, rebase_sources
from dpsql.sql.literals import parse_date, parse_timestamp

def _number(value: Any, path: str, *, positive=False, nonnegative=False, integer=False,
            what: str = "a number") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, f"must be {what}")
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
    spec = _mapping(spec, path, {"identifier", "type", "lower", "upper", "keys", "bounds", "randomized"})
    auto = _auto(spec, path)
    identifier = spec.get("identifier", False)
    if not isinstance(identifier, bool):
        raise _fail(f"{path}.identifier", "must be true or false")
    ctype = spec.get("type")
    if ctype is not None and ctype not in ("int", "float"):
        raise _fail(f"{path}.type", "must be int or float")
    lower = upper = dates = None
    if "lower" in spec or "upper" in spec:
        if "lower" not in spec or "upper" not in spec:
            raise _fail(path, "lower and upper must be given together")
        dates = _date_bounds(spec["lower"], spec["upper"], path)
    if dates is None and "lower" in spec:
        what = "a number, or a date (1992-01-01) for a DATE or TIMESTAMP column"
        lower = _number(spec["lower"], f"{path}.lower", what=what)
        upper = _number(spec["upper"], f"{path}.upper", what=what)
        if lower > upper:
            raise _fail(f"{path}.lower", f"must be <= upper ({lower:g} > {upper:g})")
        if max(abs(lower), abs(upper)) > MAX_BOUND:
            raise _fail(path, f"bounds must lie within +-2**50 ({MAX_BOUND:g})")
    keys = _keys(spec.get("keys"), f"{path}.keys")
    randomized, keys = _randomized(spec.get("randomized"), keys, f"{path}.randomized")
    if identifier and (keys is not None or lower is not None or dates is not None or auto):
        raise _fail(path, "an identifier column cannot have keys, bounds or randomized values")
    return ColumnPolicy(name=name, identifier=identifier, type=ctype, lower=lower, upper=upper, keys=keys,
                        dates=dates, randomized=randomized, auto=("", name) if auto else None)


def _auto(spec: Mapping, path: str) -> bool:
    """``bounds: auto``: the column's bounds are chosen by a DP query (api/auto_bounds.py), not declared."""
    if "bounds" not in spec:
        return False
    if spec["bounds"] != "auto":
        raise _fail(f"{path}.bounds", "must be auto (declare fixed bounds with lower and upper)")
    if "lower" in spec or "upper" in spec:
        raise _fail(path, "bounds: auto and lower/upper exclude each other")
    return True


def _keys(keys: Any, path: str) -> tuple | None:
    """A key set: a non-empty list of distinct non-null scalars, or ``{range: [a, b], step: s}``."""
    if isinstance(keys, Mapping):
        keys = _key_range(keys, path)
    if keys is None:
        return None
    if not isinstance(keys, (list, tuple)) or not keys:
        raise _fail(path, "must be a non-empty list")
    for i, key in enumerate(keys):
        if key is None or isinstance(key, (dict, list)) or (isinstance(key, float) and not math.isfinite(key)):
            raise _fail(f"{path}[{i}]", "must be a non-null scalar")
    if len(set(keys)) != len(keys):
        raise _fail(path, "must not repeat a key")
    return tuple(keys)


def _randomized(spec: Any, keys: tuple | None, path: str) -> tuple[float | None, tuple | None]:
    """``randomized: {epsilon: 1, domain: [...]}``: the column's values were randomized at that epsilon per
    respondent over that domain (api/randomize.py), which becomes its keys: (epsilon, keys)."""
    if spec is None:
        return None, keys
    spec = _mapping(spec, path, {"epsilon", "domain"})
    if "epsilon" not in spec:
        raise _fail(f"{path}.epsilon", "is required: the epsilon each respondent's value was randomized at")
    epsilon = _number(spec["epsilon"], f"{path}.epsilon", positive=True)
    domain = _keys(spec.get("domain"), f"{path}.domain")
    if domain is not None:
        if keys is not None and set(domain) != set(keys):
            raise _fail(f"{path}.domain", "differs from the column's keys (declare one of them)")
        keys = domain
    if keys is None or not 2 <= len(keys) <= MAX_CATEGORIES:
        raise _fail(f"{path}.domain", f"must list the 2 to {MAX_CATEGORIES} categories the values were randomized over")
    return epsilon, keys


def _key_range(spec: Mapping, path: str) -> list[int]:
    """``keys: {range: [0, 120]}`` (both ends included), or ``{range: [0, 120], step: 5}``: integers."""
    spec = _mapping(spec, path, {"range", "step"})
    ends = spec.get("range")
    if not isinstance(ends, (list, tuple)) or len(ends) != 2:
        raise _fail(f"{path}.range", "must be [first, last], two whole numbers")
    first, last = (int(_number(v, f"{path}.range[{i}]", integer=True, what="a whole number"))
                   for i, v in enumerate(ends))
    step = int(_number(spec.get("step", 1), f"{path}.step", integer=True, positive=True, what="a whole number"))
    if first > last:
        raise _fail(f"{path}.range", f"first must be <= last ({first} > {last})")
    if (last - first) // step + 1 > MAX_KEY_RANGE:
        raise _fail(f"{path}.range", f"gives {(last - first) // step + 1} keys, more than {MAX_KEY_RANGE}")
    return list(range(first, last + 1, step))


def _moment(value: Any) -> datetime.date | None:
    """A YAML date or timestamp, or an ISO text (``1992-01-01``, ``1992-01-01 12:00:00``), else None."""
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        text = value.strip()
        return parse_date(text) or parse_timestamp(text.replace("T", " ", 1))
    return None


def _date_bounds(lower: Any, upper: Any, path: str) -> tuple[datetime.date, datetime.date] | None:
    """(lower, upper) when both are dates or timestamps (a date beside a timestamp is its midnight);
    None when neither is (numbers, checked by the caller)."""
    lo, hi = _moment(lower), _moment(upper)
    if lo is None and hi is None:
        return None
    if lo is None or hi is None:
        wrong = "lower" if lo is None else "upper"
        raise _fail(f"{path}.{wrong}", "must be a date (1992-01-01) like the other bound, or both numbers")
    for key, value in (("lower", lo), ("upper", hi)):
        if isinstance(value, datetime.datetime) and value.tzinfo is not None:
            raise _fail(f"{path}.{key}", "a timestamp bound takes no time zone")
    if isinstance(lo, datetime.datetime) != isinstance(hi, datetime.datetime):
        lo, hi = (datetime.datetime.combine(v, datetime.time()) if not isinstance(v, datetime.datetime) else v
                  for v in (lo, hi))
    if lo > hi:
        raise _fail(f"{path}.lower", f"must be <= upper ({lo} > {hi})")
    return lo, hi


def _columns(spec: Any, path: str) -> tuple[dict[str, ColumnPolicy], dict[str, str]]:
    """The declared columns by lower-cased name, and the path of each entry as written."""
    raw_columns = _mapping(spec or {}, path, set(spec or {}))
    columns, paths = {}, {}
    for cname, cspec in raw_columns.items():
        if not isinstance(cname, str) or not cname:
            raise _fail(path, f"column name {cname!r} must be a string")
        key = cname.lower()
        if key in columns:
            raise _fail(f"{path}.{cname}", "declared twice (names are case-insensitive)")
        paths[key] = f"{path}.{cname}"
        columns[key] = _column(key, cspec, paths[key])
    return columns, paths


def _public_table(name: str, spec: Mapping, path: str) -> TablePolicy:
    """A table that holds no person's data: no unit, no bounds L and C, no identifier columns."""
    for key in ("privacy_unit", "max_groups_per_unit", "max_rows_per_unit", "local_model"):
        if key in spec:
            raise _fail(f"{path}.{key}", "a public table holds no person's data: it has no privacy unit and "
                                         "no contribution bounds (remove the entry, or `public: true`)")
    columns, paths = _columns(spec.get("columns"), f"{path}.columns")
    for cname, col in columns.items():
        if col.identifier or col.randomized is not None:
            entry = "identifier" if col.identifier else "randomized"
            raise _fail(f"{paths[cname]}.{entry}", "a public table holds no person's data: none of its "
                                                   "columns identifies a person or holds randomized answers")
    return TablePolicy(name=name, privacy_unit=ROW, columns=columns, public=True)


def _contribution_bounds(name: str, spec: Mapping, path: str) -> tuple[int, int, tuple[tuple[str, str], ...]]:
    """L and C, each a whole number >= 1 or ``auto`` (chosen by a DP query: api/auto_contributions.py;
    1 until then, which is sound)."""
    bounds, auto = [], []
    for key, kind in (("max_groups_per_unit", "groups"), ("max_rows_per_unit", "rows")):
        value = spec.get(key, 1)
        if value == "auto":
            auto.append((name, kind))
            value = 1
        bounds.append(int(_number(value, f"{path}.{key}", integer=True, positive=True,
                                  what="a whole number or auto")))
    return bounds[0], bounds[1], tuple(auto)


def _unit(name: str, spec: Mapping, path: str) -> tuple[str, Link | None]:
    """The privacy unit entry: a column or `row` (a root), or a link towards the root."""
    if "privacy_unit" not in spec:
        raise _fail(f"{path}.privacy_unit", "is required (a column name, or `row`, or {via: column, "
                                            "references: table.column}; or declare the table `public: true`)")
    unit = spec["privacy_unit"]
    if isinstance(unit, Mapping):
        link = parse_link(name, unit, f"{path}.privacy_unit")
        return link.column, link
    if not isinstance(unit, str) or not unit:
        raise _fail(f"{path}.privacy_unit", "must be a column name or `row`")
    return unit.lower(), None


def _table(name: str, spec: Any, path: str) -> tuple[TablePolicy, Link | None]:
    spec = _mapping(spec, path, {"public", "privacy_unit", "max_groups_per_unit", "max_rows_per_unit", "columns",
                                 "source", "local_model"})
    public = spec.get("public", False)
    if not isinstance(public, bool):
        raise _fail(f"{path}.public", "must be true or false")
    origin = parse_source(spec["source"], f"{path}.source") if "source" in spec else None
    if public:
        return dataclasses.replace(_public_table(name, spec, path), data_source=origin), None
    unit, link = _unit(name, spec, path)
    L, C, auto = _contribution_bounds(name, spec, path)
    if unit == ROW and (L != 1 or C != 1 or auto):
        raise _fail(f"{path}.privacy_unit", "with `row`, max_groups_per_unit and max_rows_per_unit must be 1")
    columns, paths = _columns(spec.get("columns", {}), f"{path}.columns")
    columns = {k: dataclasses.replace(c, auto=(name, c.name)) if c.auto else c for k, c in columns.items()}
    via = columns.get(unit)
    if link is not None and via is not None and (via.keys is not None or via.bounded or via.dates is not None):
        raise _fail(paths[unit], f"links {name} to its privacy unit ({path}.privacy_unit.via), so it identifies "
                                 "a person: it cannot have keys or bounds")
    if unit != ROW:
        # The privacy unit (or the link towards it) always identifies a person, declared so or not.
        columns[unit] = ColumnPolicy(name=unit, identifier=True)
    table = TablePolicy(name=name, privacy_unit=unit, max_groups_per_unit=L, max_rows_per_unit=C, columns=columns,
                        auto_contributions=auto,
                        data_source=origin, local_model=_local_model(spec.get("local_model", False), columns, paths,
                                                                     path))
    return table, link


def _local_model(local: Any, columns: Mapping[str, ColumnPolicy], paths: Mapping[str, str], path: str) -> bool:
    """``local_model: true``: each row is one respondent's, the rows (who answered, how many) are public,
    and the randomized columns hold their randomized answers; it needs one randomized column at least,
    and a randomized column needs it (the local model's answers release the number of rows exactly)."""
    if not isinstance(local, bool):
        raise _fail(f"{path}.local_model", "must be true or false")
    randomized = [name for name, c in columns.items() if c.randomized is not None]
    if randomized and not local:
        raise _fail(f"{paths[randomized[0]]}.randomized", "needs `local_model: true` on its table: answers over "
                    "randomized columns release the number of rows, so the owner declares the rows public")
    if local and not randomized:
        raise _fail(f"{path}.local_model", "needs a randomized column (randomized: {epsilon: ..., domain: [...]})")
    return local


def _tables(raw: Any) -> dict[str, TablePolicy]:
    """Every table, its links resolved (policy/links.py)."""
    if not raw:
        raise _fail("tables", "at least one private table is required")
    raw = _mapping(raw, "tables", set(raw))
    tables: dict[str, TablePolicy] = {}
    links: dict[str, Declared] = {}
    paths: dict[str, str] = {}
    for tname, tspec in raw.items():
        if not isinstance(tname, str) or not tname:
            raise _fail("tables", f"table name {tname!r} must be a string")
        name = tname.lower()
        if name in tables:
            raise _fail(f"tables.{tname}", "declared twice (names are case-insensitive)")
        paths[name] = f"tables.{tname}"
        tables[name], link = _table(name, tspec, paths[name])
        if link is not None:
            links[name] = Declared(link, f"{paths[name]}.privacy_unit", paths)
    if all(t.public for t in tables.values()):
        raise _fail("tables", "at least one private table is required (every table is public)")
    return resolve_links(tables, links, lambda name: ColumnPolicy(name=name, identifier=True)) if links else tables


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
    raw = _mapping(raw, "", {"version", "budget", "default_epsilon", "default_delta", "mechanism", "tables",
                             "auto_bounds"})
    version = raw.get("version", 1)
    if version != 1:
        raise _fail("version", "must be 1")
    if "budget" not in raw:
        raise _fail("budget", "is required ({epsilon: ..., delta: ...})")
    budget = _mapping(raw["budget"], "budget", {"epsilon", "delta", "accountant"})
    if "epsilon" not in budget:
        raise _fail("budget.epsilon", "is required")
    total_eps = _number(budget["epsilon"], "budget.epsilon", positive=True)
    total_delta = _number(budget.get("delta", 0.0), "budget.delta", nonnegative=True)
    if total_delta >= 1:
        raise _fail("budget.delta", "must be < 1")
    accountant = _accountant(budget.get("accountant", BASIC), total_delta)
    default_eps = _number(raw.get("default_epsilon", min(1.0, total_eps)), "default_epsilon", positive=True)
    default_delta = _number(raw.get("default_delta", 0.0), "default_delta", nonnegative=True)
    tables = _tables(raw.get("tables"))
    if not isinstance(source, Mapping):
        tables = rebase_sources(tables, Path(source).parent)   # sources beside the policy file
    return Policy(budget_epsilon=total_eps, budget_delta=total_delta, default_epsilon=default_eps,
                  default_delta=default_delta, tables=tables, version=version,
                  default_mechanism=_mechanism(raw.get("mechanism")), accountant=accountant,
                  auto_bounds=_auto_bounds(raw.get("auto_bounds"), default_eps, total_eps))


def _auto_bounds(spec: Any, default_eps: float, total_eps: float) -> AutoBounds:
    """``auto_bounds: {epsilon, for_epsilon}`` (module ``AutoBounds``), defaults filled in."""
    spec = _mapping({} if spec is None else spec, "auto_bounds", {"epsilon", "for_epsilon"})
    eps = _number(spec.get("epsilon", default_eps / 10), "auto_bounds.epsilon", positive=True)
    if eps > total_eps:
        raise _fail("auto_bounds.epsilon", f"must be at most the total budget ({total_eps:g})")
    return AutoBounds(epsilon=eps, for_epsilon=_number(spec.get("for_epsilon", default_eps),
                                                       "auto_bounds.for_epsilon", positive=True))


def _mechanism(value: Any) -> str | None:
    """The policy's default mechanism for queries (``mechanism: gaussian``), checked against the
    registry here, so planning never meets an unknown name."""
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in OPTIONS:
        raise _fail("mechanism", f"must be one of {', '.join(sorted(OPTIONS))}, got {value!r}")
    return value.lower()


def _accountant(name: Any, total_delta: float) -> str:
    """How the ledger composes the total (accounting/accountants.py). zcdp and pld state the history's
    loss as an epsilon at the total's delta, so a total without delta leaves them nothing to spend."""
    if name not in ACCOUNTANTS:
        raise _fail("budget.accountant", f"must be one of: {', '.join(ACCOUNTANTS)}")
    if name != BASIC and total_delta == 0:
        raise _fail("budget.accountant", f"{name} needs budget.delta > 0 (it converts the history to an "
                                         "epsilon at that delta); use basic for a pure epsilon budget")
    return name
