"""A bundled synthetic dataset and a guided tour of dpsql (``dpsql demo``).

Everything is generated locally with a fixed numpy seed: no download, and the same seed always
gives the same tables. Two private tables share one privacy unit, ``person_id``:

- ``people``: one row per person (person_id, ssn, age, sex, income, state, zip). Income is skewed
  (log-normal) so a few values lie above the policy's upper bound and get clamped; zip is a
  private category, some zips held by a single person.
- ``visits``: several rows per person (person_id, clinic, cost), for user-level privacy: one
  person's visits are bounded to 2 clinics and 3 visits per clinic before noise is added.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> db_path = build_dataset(d / "demo.duckdb", rows=100)
    >>> sorted(p.name for p in d.iterdir())
    ['demo.duckdb', 'policy.yaml']
"""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import yaml

import dpsql
from dpsql.cli.render import render_table
from dpsql.errors import DpsqlError

DB_NAME = "demo.duckdb"
POLICY_NAME = "policy.yaml"
DEFAULT_ROWS = 20_000
DEFAULT_SEED = 0

STATES = ("CA", "TX", "NY", "FL", "IL", "WA")
STATE_WEIGHTS = (0.30, 0.22, 0.18, 0.15, 0.08, 0.07)
# The leading zip digits of each state; the rest of a zip is drawn from a heavy-tailed
# distribution so that many zips are held by very few people (docs/architecture.md, threat model 4).
STATE_ZIP_PREFIX = {"CA": "9", "TX": "7", "NY": "1", "FL": "3", "IL": "6", "WA": "8"}
CLINICS = ("Central", "Northside", "Southside", "Eastside", "Westside")
INCOME_UPPER = 500_000
COST_UPPER = 2_000

_POLICY: dict[str, Any] = {
    "version": 1,
    "budget": {"epsilon": 10.0, "delta": 1.0e-6},
    "default_epsilon": 1.0,
    "tables": {
        "people": {
            "privacy_unit": "person_id",
            "max_groups_per_unit": 1,
            "max_rows_per_unit": 1,
            "columns": {
                "person_id": {"identifier": True},
                "ssn": {"identifier": True},
                "age": {"type": "int", "lower": 0, "upper": 100},
                "income": {"type": "float", "lower": 0, "upper": INCOME_UPPER},
                "sex": {"keys": ["F", "M"]},
                "state": {"keys": list(STATES)},
                "zip": {},
            },
        },
        "visits": {
            "privacy_unit": "person_id",
            "max_groups_per_unit": 2,
            "max_rows_per_unit": 3,
            "columns": {
                "person_id": {"identifier": True},
                "clinic": {"keys": list(CLINICS)},
                "cost": {"type": "float", "lower": 0, "upper": COST_UPPER},
            },
        },
    },
}


def demo_policy() -> dict[str, Any]:
    """The demo's policy, as a fresh dict in the policy format of the README.

    >>> demo_policy()["tables"]["visits"]["max_rows_per_unit"]
    3
    """
    return copy.deepcopy(_POLICY)


def build_dataset(path: str | Path, rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> Path:
    """Write the synthetic ``people`` and ``visits`` tables to a new DuckDB file at ``path``.

    Any existing file at ``path`` is replaced. ``policy.yaml`` (:func:`demo_policy`) is written
    next to it. Same ``rows`` and ``seed`` give identical table contents.

    Args:
        path: the DuckDB file to create.
        rows: number of people.
        seed: numpy seed for the data (not for any noise: the data is the "truth").

    Returns:
        The database path.
    """
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in (path, path.with_name(path.name + ".wal")):
        stale.unlink(missing_ok=True)

    rng = np.random.default_rng(seed)
    people = _people(rng, rows)
    visits = _visits(rng, people["person_id"])

    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE people (person_id INTEGER, ssn VARCHAR, age INTEGER, "
                    "sex VARCHAR, income DOUBLE, state VARCHAR, zip VARCHAR)")
        con.execute("CREATE TABLE visits (person_id INTEGER, clinic VARCHAR, cost DOUBLE)")
        _insert(con, "people", people)
        _insert(con, "visits", visits)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    (path.parent / POLICY_NAME).write_text(yaml.safe_dump(demo_policy(), sort_keys=False))
    return path


def _people(rng: np.random.Generator, rows: int) -> dict[str, list]:
    person_id = np.arange(1, rows + 1)
    ssn_numbers = rng.choice(900_000_000, size=rows, replace=False) + 100_000_000
    ssn = [f"{n // 1_000_000:03d}-{n // 10_000 % 100:02d}-{n % 10_000:04d}" for n in ssn_numbers]
    age = np.clip(np.rint(rng.normal(42, 20, rows)), 0, 100).astype(int)
    sex = np.where(rng.random(rows) < 0.51, "F", "M")
    # Log-normal income that grows with working age; about 1 in 200 exceed INCOME_UPPER.
    working = np.clip((age - 16) / 30, 0, 1)
    income = np.where(age < 16, 0.0, rng.lognormal(10.3 + 0.6 * working, 0.9, rows))
    income = np.round(income, 2)
    state = rng.choice(STATES, size=rows, p=STATE_WEIGHTS)
    zip_tail = np.minimum(rng.zipf(1.6, rows), 9_999)
    zips = [f"{STATE_ZIP_PREFIX[s]}{t:04d}" for s, t in zip(state, zip_tail)]
    return {"person_id": person_id.tolist(), "ssn": ssn, "age": age.tolist(), "sex": sex.tolist(),
            "income": income.tolist(), "state": state.tolist(), "zip": zips}


def _visits(rng: np.random.Generator, person_ids: Sequence[int]) -> dict[str, list]:
    # Most people visit one home clinic; some also a second or third, and a few visit often,
    # more than the policy's 3 rows per clinic: contribution bounding has work to do.
    n = len(person_ids)
    counts = rng.poisson(2.0, n) + (rng.random(n) < 0.05) * rng.poisson(8.0, n)
    home = rng.integers(0, len(CLINICS), n)
    pid = np.repeat(np.asarray(person_ids), counts)
    home_rep = np.repeat(home, counts)
    elsewhere = rng.random(len(pid)) < 0.25
    clinic_idx = np.where(elsewhere, rng.integers(0, len(CLINICS), len(pid)), home_rep)
    cost = np.round(rng.lognormal(5.0, 1.0, len(pid)), 2)
    return {"person_id": pid.tolist(), "clinic": [CLINICS[i] for i in clinic_idx],
            "cost": cost.tolist()}


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, list]) -> None:

    staged = pa.table(columns)  # noqa: F841 - DuckDB scans the local Arrow table by name
    con.execute(f"INSERT INTO {table} SELECT {', '.join(columns)} FROM staged")


# --- the guided tour ------------------------------------------------------------------------------

# (title, SQL, epsilon, delta, number of leading group-key columns)
EXAMPLES: tuple[tuple[str, str, float, float | None, int], ...] = (
    ("How many people of each sex? (public keys: both appear, even if empty)",
     "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", 0.5, None, 1),
    ("Average income by state (income clamped to [0, 500000])",
     "SELECT state, AVG(income) AS avg_income FROM people GROUP BY state", 1.0, None, 1),
    ("Total income of people aged 65+, by sex (a WHERE clause)",
     "SELECT sex, COUNT(*) AS n, SUM(income) AS total_income\n"
     "FROM people WHERE age >= 65 GROUP BY sex", 1.0, None, 1),
    ("Visits and spend per clinic (user-level: each person's visits are bounded to 2 clinics and\n"
     "    3 visits per clinic, and costs clamped to [0, 2000], so dp sits below exact by design)",
     "SELECT clinic, COUNT(*) AS visits, SUM(cost) AS total_cost\n"
     "FROM visits GROUP BY clinic", 1.0, None, 1),
    ("Average age of high earners (no GROUP BY)",
     "SELECT COUNT(*) AS n, AVG(age) AS avg_age FROM people WHERE income > 100000", 0.5, None, 0),
)

# Queries dpsql must refuse, shown with their error messages.
REFUSALS: tuple[tuple[str, str], ...] = (
    ("Singling out one person by an identifier", "SELECT COUNT(*) AS n FROM people WHERE ssn = '123-45-6789'"),
    ("Grouping by a private category without delta", "SELECT zip, COUNT(*) AS n FROM people GROUP BY zip"),
)


def run(dir: str | Path | None = None, out: Callable[[str], Any] = print,
        rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> list:
    """Build the demo dataset in ``dir`` (or a temporary directory) and run the examples.

    For each example prints the SQL, the plan that was charged, and the noisy answer next to the
    exact one; the exact answers are computed by the data owner with plain DuckDB, only so the
    demo can show how close the noisy answers are. An analyst never sees them.

    Returns:
        The dpsql results of the examples, in order.
    """
    if dir is None:
        with tempfile.TemporaryDirectory(prefix="dpsql-demo-") as tmp:
            return _tour(Path(tmp), out, rows, seed, directory_given=False)
    return _tour(Path(dir), out, rows, seed, directory_given=True)


def _tour(directory: Path, out: Callable[[str], Any], rows: int, seed: int,
          directory_given: bool) -> list:
    db_path = build_dataset(directory / DB_NAME, rows=rows, seed=seed)
    policy_path = directory / POLICY_NAME
    out(f"Built a synthetic dataset of {rows} people in {db_path}")
    out(f"Policy: {policy_path}")
    out("")
    out(policy_path.read_text().rstrip())
    out("")

    # The owner computes exact answers on a plain connection, then hands that same connection to
    # dpsql (which locks it down) and closes it at the end: one connection, so DuckDB never sees
    # the file opened twice with different configurations.
    owner = duckdb.connect(str(db_path), read_only=True)
    try:
        return _examples(owner, policy_path, db_path, directory_given, out)
    finally:
        owner.close()


def _examples(owner: duckdb.DuckDBPyConnection, policy_path: Path, db_path: Path,
              directory_given: bool, out: Callable[[str], Any]) -> list:

    exact = []
    for _, sql, *_ in EXAMPLES:
        cursor = owner.execute(sql)
        exact.append(cursor.fetchall())
    db = dpsql.connect(owner, ledger=":memory:", policy=str(policy_path))
    results = []
    for number, ((title, sql, epsilon, delta, n_keys), exact_rows) in enumerate(
            zip(EXAMPLES, exact), start=1):
        out(f"=== {number}. {title} ===")
        out(_indent(sql))
        res = db.sql(sql, epsilon=epsilon, delta=delta)
        results.append(res)
        out("")
        out("Plan:")
        out(_indent(str(res.plan)))
        out("")
        out("Answer: dp (noisy, what the analyst sees) vs exact (owner-only, for comparison):")
        columns, rows_ = side_by_side(list(res.columns), res.fetchall(), exact_rows, n_keys)
        out(_indent(render_table(columns, rows_).rstrip()))
        out("")

    out("=== Queries dpsql refuses (nothing is spent) ===")
    for title, sql in REFUSALS:
        out(f"--- {title}")
        out(_indent(sql))
        try:
            refused = db.sql(sql)
        except DpsqlError as err:
            out(_indent(err.format()))
        else:  # pragma: no cover - would be a dpsql bug; show it rather than hide it
            out(_indent("NOT REFUSED (this is a bug in dpsql):"))
            out(_indent(render_table(list(refused.columns), refused.fetchall()).rstrip()))
        out("")

    budget = db.budget
    out(f"Budget: spent epsilon={budget.spent_epsilon:g}, delta={budget.spent_delta:g}; "
        f"remaining epsilon={budget.remaining_epsilon:g}, delta={budget.remaining_delta:g} "
        f"of epsilon={budget.total_epsilon:g}, delta={budget.total_delta:g}")
    out("")
    if directory_given:
        out("Try it yourself, e.g.:")
        out(_indent(f'dpsql query "SELECT clinic, AVG(cost) AS avg_cost FROM visits GROUP BY clinic" '
                    f'--db {db_path} --policy {policy_path} --epsilon 0.5'))
    else:
        out("The data was in a temporary directory; keep it with: dpsql demo --dir ./dpsql-demo")
    return results


def side_by_side(columns: Sequence[str], noisy: Sequence[Sequence[Any]],
                 exact: Sequence[Sequence[Any]], n_keys: int) -> tuple[list[str], list[tuple]]:
    """Join noisy and exact rows on their first ``n_keys`` columns: ``c (dp)``, ``c (exact)``.

    >>> side_by_side(["sex", "n"], [("M", 9.6), ("F", 10.2)], [("F", 10), ("M", 9)], 1)
    (['sex', 'n (dp)', 'n (exact)'], [('F', 10.2, 10), ('M', 9.6, 9)])
    """
    exact_by_key = {tuple(row[:n_keys]): row[n_keys:] for row in exact}
    out_columns = list(columns[:n_keys])
    for name in columns[n_keys:]:
        out_columns += [f"{name} (dp)", f"{name} (exact)"]
    out_rows = []
    for row in sorted(noisy, key=lambda r: tuple(str(v) for v in r[:n_keys])):
        key = tuple(row[:n_keys])
        truth = exact_by_key.get(key, (None,) * (len(row) - n_keys))
        cells = list(key)
        for dp_value, exact_value in zip(row[n_keys:], truth):
            cells += [dp_value, exact_value]
        out_rows.append(tuple(cells))
    return out_columns, out_rows


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())
