"""The typed, immutable Plan: what each output releases, with what sensitivity, noise and budget.

Noisy quantities are Measurements (each spends a share of epsilon); outputs are keys or
post-processing of measurements (free). ``plan.build`` makes a Plan; ``lower`` fills its
``rewritten_sql`` with ``dataclasses.replace``; ``str(plan)`` is the explain text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from sqlglot import exp
from dpsql.mechanisms.base import MECHANISMS, mechanism
from dpsql.errors import InternalError
from dpsql.plan.explain import explain_text
from dpsql.plan.kinds import Bounding, OutputKind, Quantity
from dpsql.plan.quantities import QUANTITIES
from dpsql.plan.text import CONFIDENCE
from dpsql.frontend.derived import DerivedKeys
from dpsql.policy import TablePolicy




@dataclass(frozen=True)
class Measurement:
    """One noisy quantity: an exact integer aggregate plus discrete Laplace noise on a grid.

    ``sensitivity`` and ``scale`` are in grid steps; multiply by ``granularity`` for output units.
    """
    name: str
    kind: Quantity
    column: str | None
    lower: float | None           # clamp bounds of what is summed: a row's value ("rows"),
    upper: float | None           # a unit's total or mean in one partition ("unit_total", "unit_mean")
    granularity: float
    sensitivity: int
    epsilon: float
    scale: float                  # the dyadic noise scale actually used, >= sensitivity / epsilon
    bounding: Bounding = Bounding.ROWS
    row_lower: float | None = None  # optional per-row clamp before a per-unit aggregate
    row_upper: float | None = None
    argument: exp.Expression | None = None   # what is counted or summed per row (columns clamped)
    offset: float | None = None              # centred: sums (x - offset) ** moment
    moment: int = 1
    mechanism: str = "discrete Laplace"

    def __post_init__(self):
        try:   # the enums, from their values too
            object.__setattr__(self, "kind", Quantity(self.kind))
            object.__setattr__(self, "bounding", Bounding(self.bounding))
        except ValueError:
            raise InternalError("DP999", f"unknown measurement kind {self.kind!r}: this is probably a bug") from None
        if self.mechanism not in MECHANISMS or not mechanism(self.mechanism).covers(
                self.sensitivity, self.scale, self.epsilon):
            raise InternalError("DP999", f"measurement {self.name} is under-noised: this is probably a bug")

    @property
    def error(self) -> float:
        """Half-width of the interval that holds the noise with probability CONFIDENCE, in output units."""
        return mechanism(self.mechanism).error_bound(self.scale, CONFIDENCE) * self.granularity

    @property
    def label(self) -> str:
        """How explain and the ledger name it (plan/quantities.py)."""
        return QUANTITIES[self.kind].label(self)


@dataclass(frozen=True)
class Output:
    """One released column: a group key, or post-processing of measurements."""
    name: str                     # the name the user sees
    kind: OutputKind
    column: str | None
    measurements: tuple[str, ...] = ()
    key_index: int | None = None  # kind "key": which GROUP BY item
    expression: exp.Expression | None = None  # kind "expr": over output slots o0, o1, ... and literals
    lower: float | None = None    # AVG is clamped back into these bounds
    upper: float | None = None
    hidden: bool = False          # needed by HAVING/ORDER BY but not selected
    per_row: tuple[float, float] | None = None    # GoogleSQL contribution_bounds_per_row
    per_group: tuple[float, float] | None = None  # GoogleSQL contribution_bounds_per_group
    argument: exp.Expression | None = None        # the aggregate's argument (unqualified)
    quantile: float | None = None                 # kind "quantile": q in [0, 1]


@dataclass(frozen=True)
class KeyColumn:
    """A column with public keys that a GROUP BY item reads: declared ones, or (``derived``) values
    standing for the groups its bounds give (frontend/derived.py)."""
    name: str
    sql_type: str
    keys: tuple
    derived: DerivedKeys | None = None


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY item: a public-key column, or an expression whose groups are its values over the
    declared keys of the columns it reads (computed from those keys alone, never from the data)."""
    expression: exp.Expression
    columns: tuple[KeyColumn, ...]
    branches: tuple[exp.Expression, ...] | None = None   # a CASE of literals: its groups are these values
    filters: tuple[exp.Expression, ...] = ()   # WHERE conjuncts over its declared-key columns only: prune its groups

    @property
    def column(self) -> str | None:
        return self.expression.name if isinstance(self.expression, exp.Column) else None

    @property
    def label(self) -> str:
        return self.column or self.expression.sql(dialect="duckdb")

    @property
    def public(self) -> bool:
        return self.branches is not None or all(c.keys is not None for c in self.columns)

    @property
    def domain_bound(self) -> int | None:
        """At most this many groups: one per combination of the columns' keys (None if private)."""
        if self.branches is not None:
            return len(self.branches)
        return math.prod(len(c.keys) for c in self.columns) if self.public else None


@dataclass(frozen=True)
class Selection:
    """DP partition selection: a group is released iff its noisy unit count is >= threshold."""
    measurement: str
    threshold: int
    epsilon: float
    delta: float


@dataclass(frozen=True)
class Plan:
    """Everything a query releases and spends. ``str(plan)`` is the explain text."""
    sql: str
    table: TablePolicy
    where: exp.Expression | None
    group_keys: tuple[GroupKey, ...]
    measurements: tuple[Measurement, ...]
    outputs: tuple[Output, ...]
    having: exp.Expression | None      # over output slots o0, o1, ...
    order: tuple[tuple[str, bool], ...]  # (output slot, descending)
    limit: int | None
    offset: int | None
    epsilon: float
    delta: float
    max_groups_option: int | None = None   # GoogleSQL max_groups_contributed, overriding the policy's L
    selection: Selection | None = None     # for GROUP BY keys that are not public
    confidence: float | None = None        # add <output>_ci_low/_ci_high at this level (post-processing)
    nonnegative: bool = True               # counts (and sums of non-negative values) clamped at 0
    rewritten_sql: str = field(default="", compare=False)

    @property
    def partitions(self) -> int | None:
        """An upper bound on the number of GROUP BY partitions (None: private keys, not known)."""
        bounds = [k.domain_bound for k in self.group_keys]
        return None if None in bounds else math.prod(bounds)

    @property
    def max_groups(self) -> int:
        """L: partitions one unit may reach (never more than there are)."""
        if self.table.row_level:
            return 1
        L = min(self.max_groups_option or self.table.max_groups_per_unit, self.table.max_groups_per_unit)
        return L if self.partitions is None else min(L, self.partitions)

    @property
    def max_rows(self) -> int:
        return 1 if self.table.row_level else self.table.max_rows_per_unit

    @property
    def visible_outputs(self) -> tuple[Output, ...]:
        return tuple(o for o in self.outputs if not o.hidden)

    def slot(self, output: Output | int) -> str:
        """The column of an output (its position, or the output itself) in the lowered query: o0, o1, ...
        By position, never by equality: two equal outputs (ORDER BY one expression twice) are two
        columns, and a lookup costs O(1), so planning stays linear in the number of outputs."""
        return f"o{output if isinstance(output, int) else self._positions[id(output)]}"

    def measurement(self, name: str) -> Measurement:
        return self._by_name[name]

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {id(o): i for i, o in enumerate(self.outputs)}

    @cached_property
    def _by_name(self) -> dict[str, Measurement]:
        return {m.name: m for m in self.measurements}

    def __str__(self) -> str:
        return explain_text(self)
