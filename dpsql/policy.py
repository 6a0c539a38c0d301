"""The data owner's policy: which tables hold people, how their rows reach a person, how to bound
them, which tables are public, and the total budget.

Loaded from YAML or a dict, validated whole (errors name the bad entry's path), then checked
against the real DuckDB schema (and referenced keys against the data) at connect time. Links between
tables (``privacy_unit: {via: ..., references: ...}``) are resolved in ``dpsql/policy_graph.py``.

>>> p = load_policy({"version": 1, "budget": {"epsilon": 1.0},
...                  "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 1}}}}})
>>> p.tables["t"].columns["x"].upper
1.0
"""
from __future__ import annotations

import dataclasses
import datetime
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from dpsql.errors import PolicyError
from dpsql.sql.literals import parse_date, parse_timestamp
from dpsql.plan.sensitivity import MAX_BOUND
from dpsql.policy_graph import Declared, Link, invalid as _fail, parse_link, resolve_links
from dpsql.policy_source import Source, parse_source, rebase_sources

ROW = "row"
MAX_KEY_RANGE = 1_000_000   # keys one `keys: {range: ...}` may declare


@dataclass(frozen=True)
class ColumnPolicy:
    """What the owner declared about one column.

    ``keys`` is the public key domain (every key appears in GROUP BY output); ``lower``/``upper`` are
    clamping bounds, required to SUM or AVG the column; identifiers may not be referenced at all.
    ``dates`` are the ``lower``/``upper`` of a DATE or TIMESTAMP column (dates, or datetimes): they
    make nothing summable, they bound the public keys derived from the column (``YEAR(d)``,
    ``date_trunc('month', d)``: frontend/derived.py).
    """
    name: str
    identifier: bool = False
    type: str | None = None
    lower: float | None = None
    upper: float | None = None
    keys: tuple | None = None
    sql_type: str = ""          # filled from the DuckDB schema at connect
    key_table: str | None = None  # set at connect for a large key set: the TEMP table holding it
    public_source: tuple[str, str] | None = None  # a joined public table's column: its values are its keys
    dates: tuple[datetime.date, datetime.date] | None = None   # date bounds (lower, upper), inclusive

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True)
class TablePolicy:
    """One table: its privacy unit and contribution bounds L and C, or ``public``.

    A root table defines its unit (``privacy_unit`` a column, or ``row``). A linked table reaches a
    root through ``path`` (its own link first); its ``privacy_unit`` is its ``via`` column, and
    ``unit_key`` says whether that column holds the unit's key itself (one link, to the root's unit
    column) or only a join along the path can find it (None). A public table holds no person's data:
    no unit (``privacy_unit`` is ``row``, so on its own it is treated as row-level, which is safe),
    every column readable and groupable, its distinct values public keys.
    """
    name: str
    privacy_unit: str                 # "row", or the (lower-cased) column identifying a person
    max_groups_per_unit: int = 1      # L
    max_rows_per_unit: int = 1        # C
    columns: Mapping[str, ColumnPolicy] = field(default_factory=dict)
    public: bool = False
    path: tuple[Link, ...] = ()       # the links to the root, this table's own first; () unless linked
    root_unit: str | None = None      # a linked table: its root's privacy unit column
    source: Any = None                # a joined relation (frontend/joins.py): the sqlglot SELECT it reads
    about: str | None = None          # a relation: how its rows were made and whose they are (explain)
    data_source: Source | None = None  # `source:` the files dpsql reads into this table (policy_source.py)
    one_row_per_unit: bool = False    # a relation grouped by its unit (frontend/per_person.py)
    lookups: tuple = ()               # a relation: its public tables' lookups, checked unique (frontend/lookups.py)

    @property
    def row_level(self) -> bool:
        return self.privacy_unit == ROW

    @property
    def link(self) -> Link | None:
        """This table's own ``via`` link, or None (a root or a public table)."""
        return self.path[0] if self.path else None

    @property
    def root(self) -> str | None:
        """The table that defines this table's privacy unit (itself unless linked; None when public)."""
        if self.public:
            return None
        return self.path[-1].references_table if self.path else self.name

    @property
    def root_column(self) -> str | None:
        """The root's privacy unit: a column, or ``row`` for a row-level root (None when public)."""
        if self.public:
            return None
        return self.root_unit if self.path else self.privacy_unit

    @property
    def unit_key(self) -> str | None:
        """The column of this table whose value is the unit's key, or None when there is none here:
        row level, public, or a linked table whose unit only a join along its path can find."""
        if self.public or self.row_level:
            return None
        if not self.path:
            return self.privacy_unit
        link = self.path[0]
        return link.column if len(self.path) == 1 and link.references_column == self.root_unit else None

    def is_identifier(self, column: str) -> bool:
        col = self.columns.get(column)
        return column == self.privacy_unit or (col is not None and col.identifier)

    def has_public_keys(self, column: str) -> bool:
        """May the column's values be released as group keys without DP selection? Declared keys, or
        any column of a public table (its distinct values are public)."""
        col = self.columns.get(column)
        return self.public or (col is not None and (col.keys is not None or col.public_source is not None))


@dataclass(frozen=True)
class Policy:
    """The whole policy: total budget, default per-query epsilon/delta, the tables."""
    budget_epsilon: float
    budget_delta: float
    default_epsilon: float
    default_delta: float
    tables: Mapping[str, TablePolicy]
    version: int = 1

    @property
    def links(self) -> tuple[Link, ...]:
        """Every declared link, one per linked table."""
        return tuple(t.path[0] for t in self.tables.values() if t.path)

    @property
    def roots(self) -> tuple[str, ...]:
        """The tables that define a privacy unit (each private table reaches exactly one)."""
        return tuple(name for name, t in self.tables.items() if not t.public and not t.path)

    @property
    def public_tables(self) -> tuple[str, ...]:
        return tuple(name for name, t in self.tables.items() if t.public)


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
    spec = _mapping(spec, path, {"identifier", "type", "lower", "upper", "keys"})
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
    keys = spec.get("keys")
    if isinstance(keys, Mapping):
        keys = _key_range(keys, f"{path}.keys")
    if keys is not None:
        if not isinstance(keys, (list, tuple)) or not keys:
            raise _fail(f"{path}.keys", "must be a non-empty list")
        for i, key in enumerate(keys):
            if key is None or isinstance(key, (dict, list)) or (isinstance(key, float) and not math.isfinite(key)):
                raise _fail(f"{path}.keys[{i}]", "must be a non-null scalar")
        if len(set(keys)) != len(keys):
            raise _fail(f"{path}.keys", "must not repeat a key")
        keys = tuple(keys)
    if identifier and (keys is not None or lower is not None or dates is not None):
        raise _fail(path, "an identifier column cannot have keys or bounds")
    return ColumnPolicy(name=name, identifier=identifier, type=ctype, lower=lower, upper=upper, keys=keys,
                        dates=dates)


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
    for key in ("privacy_unit", "max_groups_per_unit", "max_rows_per_unit"):
        if key in spec:
            raise _fail(f"{path}.{key}", "a public table holds no person's data: it has no privacy unit and "
                                         "no contribution bounds (remove the entry, or `public: true`)")
    columns, paths = _columns(spec.get("columns"), f"{path}.columns")
    for cname, col in columns.items():
        if col.identifier:
            raise _fail(f"{paths[cname]}.identifier", "a public table holds no person's data: none of its "
                                                      "columns identifies a person")
    return TablePolicy(name=name, privacy_unit=ROW, columns=columns, public=True)


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
                                 "source"})
    public = spec.get("public", False)
    if not isinstance(public, bool):
        raise _fail(f"{path}.public", "must be true or false")
    origin = parse_source(spec["source"], f"{path}.source") if "source" in spec else None
    if public:
        return dataclasses.replace(_public_table(name, spec, path), data_source=origin), None
    unit, link = _unit(name, spec, path)
    L = _number(spec.get("max_groups_per_unit", 1), f"{path}.max_groups_per_unit", integer=True, positive=True)
    C = _number(spec.get("max_rows_per_unit", 1), f"{path}.max_rows_per_unit", integer=True, positive=True)
    if unit == ROW and (L != 1 or C != 1):
        raise _fail(f"{path}.privacy_unit", "with `row`, max_groups_per_unit and max_rows_per_unit must be 1")
    columns, paths = _columns(spec.get("columns", {}), f"{path}.columns")
    via = columns.get(unit)
    if link is not None and via is not None and (via.keys is not None or via.bounded or via.dates is not None):
        raise _fail(paths[unit], f"links {name} to its privacy unit ({path}.privacy_unit.via), so it identifies "
                                 "a person: it cannot have keys or bounds")
    if unit != ROW:
        # The privacy unit (or the link towards it) always identifies a person, declared so or not.
        columns[unit] = ColumnPolicy(name=unit, identifier=True)
    table = TablePolicy(name=name, privacy_unit=unit, max_groups_per_unit=L, max_rows_per_unit=C, columns=columns,
                        data_source=origin)
    return table, link


def _tables(raw: Any) -> dict[str, TablePolicy]:
    """Every table, its links resolved (policy_graph.py)."""
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
    tables = _tables(raw.get("tables"))
    if not isinstance(source, Mapping):
        tables = rebase_sources(tables, Path(source).parent)   # sources beside the policy file
    return Policy(budget_epsilon=total_eps, budget_delta=total_delta, default_epsilon=default_eps,
                  default_delta=default_delta, tables=tables, version=version)
