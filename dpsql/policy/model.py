"""The data owner's policy, as data: which tables hold people, how their rows reach a person (links),
how to bound them, which tables are public, where their rows come from, and the total budget.
Read by policy/loading.py (YAML or a dict, validated whole), bound to the real schema by the engine.

>>> t = TablePolicy(name="t", privacy_unit="id", columns={"x": ColumnPolicy(name="x", lower=0, upper=1)})
>>> t.columns["x"].bounded, t.unit_key, t.is_identifier("id")
(True, 'id', True)
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Mapping

from dpsql.errors import PolicyError

ROW = "row"


def invalid(path: str, problem: str) -> PolicyError:
    """The load-time refusal of a policy entry (DP501), naming its path."""
    return PolicyError("DP501", f"invalid policy: {path}: {problem}")


@dataclass(frozen=True)
class Link:
    """One step towards the privacy unit: ``table.column`` holds values of the unique key
    ``references_table.references_column``, so each row of ``table`` belongs to the one row it names."""
    table: str
    column: str
    references_table: str
    references_column: str

    def __str__(self) -> str:
        return f"{self.table}.{self.column} -> {self.references_table}.{self.references_column}"


@dataclass(frozen=True)
class Source:
    """Where a table's rows come from: ``path`` a file or glob read as ``format`` (``parquet``,
    ``csv``), or ``format == "duckdb"``: table ``table`` of the DuckDB database file ``path``.
    Options left None take DuckDB's own default (hive partitions and CSV dialect detected)."""
    path: str
    format: str
    hive_partitioning: bool | None = None
    union_by_name: bool | None = None
    header: bool | None = None
    delimiter: str | None = None
    types: tuple[tuple[str, str], ...] | None = None   # CSV: column -> DuckDB type, instead of sniffing
    table: str | None = None

    @property
    def is_glob(self) -> bool:
        return any(ch in self.path for ch in "*?[")

    def describe(self) -> str:
        return f"{self.path} (table {self.table})" if self.format == "duckdb" else self.path


@dataclass(frozen=True)
class ColumnPolicy:
    """What the owner declared about one column.

    ``keys`` is the public key domain (every key appears in GROUP BY output); ``lower``/``upper`` are
    clamping bounds, required to SUM or AVG the column; identifiers may not be referenced at all.
    ``dates`` are the ``lower``/``upper`` of a DATE or TIMESTAMP column (dates, or datetimes): they
    make nothing summable, they bound the public keys derived from the column (``YEAR(d)``,
    ``date_trunc('month', d)``: frontend/derived.py). ``randomized`` is the epsilon at which each row's
    value was randomized (``dpsql randomize``) over the domain ``keys``: its table is a local-model table.
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
    auto: tuple[str, str] | None = None   # ``bounds: auto``: (table, column) whose bounds a DP query chooses
    randomized: float | None = None   # randomized response's epsilon per respondent; its domain is ``keys``
    bounds_read: bool = False   # a joined public column's bounds read from its data (frontend/public_bounds.py)
    keys_where: str | None = None   # a joined public column's keys: only rows passing these conjuncts (frontend/key_pruning.py)

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True)
class JointKeys:
    """The groups of a GROUP BY of several columns of one joined public table: the distinct tuples of a
    read over public tables only (frontend/key_pruning.py ``joint_read``), not the product of the
    columns' key sets; ``count`` of them, read by the engine at planning (engines/duckdb.py)."""
    columns: tuple[str, ...]
    read: str          # DuckDB SQL over public tables only: one row per group
    count: int
    where: str = ""    # the public conditions the read applies (explain)


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
    source: Any = None                # a derived table (a relation or a per-person table): the SELECT of its rows
    about: str | None = None          # a derived table: how its rows were made and whose they are (explain)
    data_source: Source | None = None  # `source:` the files dpsql reads into this table (policy/sources.py)
    one_row_per_unit: bool = False    # a per-person table: one row per unit (frontend/per_person.py)
    lookups: tuple = ()               # a derived table: its public tables' lookups, checked unique (frontend/lookups.py)
    local_model: bool = False         # one row per respondent, the rows public, randomized columns (frontend/local.py)
    # ``max_rows_per_unit: auto`` / ``max_groups_per_unit: auto``, as (table, "rows" | "groups"); a
    # relation holds those of its tables. Chosen per query (api/auto_contributions.py); until then the
    # bound is 1, which is sound, and plan/build.py refuses to plan with it (DP330).
    auto_contributions: tuple[tuple[str, str], ...] = ()
    auto_chosen: bool = False   # a relation whose automatic C was chosen for the query (explain says so)
    # A table of a stage's released values (frontend/correlated.py): public to the plan, filled by the engine
    # only once its stage has run, so never read while planning (no key read, no uniqueness read).
    released: bool = False
    joint_keys: JointKeys | None = None   # a relation's GROUP BY of one public table's columns (JointKeys)

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


# How a ledger composes its charges into the total (accounting/accountants.py has one of each):
# basic (epsilons and deltas add: every ledger made before accountants), zcdp, pld.
BASIC = "basic"
ACCOUNTANTS = (BASIC, "zcdp", "pld")


@dataclass(frozen=True)
class AutoBounds:
    """``auto_bounds: {epsilon, for_epsilon}``: each ``bounds: auto`` column's bounds cost ``epsilon``
    once per data version (a DP histogram, api/auto_bounds.py), and are chosen to suit a SUM answered
    at ``for_epsilon``. Defaults: a tenth of the default epsilon, and the default epsilon."""
    epsilon: float
    for_epsilon: float


@dataclass(frozen=True)
class Policy:
    """The whole policy: total budget and its accountant, default per-query epsilon/delta, the tables."""
    budget_epsilon: float
    budget_delta: float
    default_epsilon: float
    default_delta: float
    tables: Mapping[str, TablePolicy]
    version: int = 1
    default_mechanism: str | None = None   # a query's mechanism when it names none (mechanisms/base.py OPTIONS)
    accountant: str = BASIC
    auto_bounds: "AutoBounds | None" = None   # how ``bounds: auto`` columns get theirs (api/auto_bounds.py)

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
