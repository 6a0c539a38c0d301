"""SmartNoise SQL's table metadata converted into a dpsql policy (``dpsql policy import``).

SmartNoise (OpenDP's ``smartnoise-sql``) describes a collection of tables in YAML: collection ->
schema -> table -> options and columns (its ``sql/docs/source/metadata.rst``)::

    PUMS:                      # the collection (ignored: dpsql reads one database)
      PUMS:                    # a schema: queries may write PUMS.PUMS, dpsql's parser drops it
        PUMS:                  # the table
          row_privacy: True    # or a column with private_id: True
          max_ids: 1
          age: {type: int, lower: 0, upper: 100}
          sex: {type: string}

What maps, and how:

* ``row_privacy: True`` -> ``privacy_unit: row``; a column with ``private_id: True`` -> the table's
  ``privacy_unit`` (an identifier). A table with neither allows no query in SmartNoise: it is left
  out (never made public). Several private_id columns (a compound id) cannot be expressed: refused.
* ``max_ids: n`` (a person's rows, at most, across the whole query) -> ``max_groups_per_unit: n`` and
  ``max_rows_per_unit: n``: the same answers, a sensitivity that covers them (n * n for counts where
  SmartNoise's reservoir sampling gives n, so more noise when n > 1).
* ``type: int|float`` with ``lower``/``upper`` -> the same bounds; other types -> a declared column;
  ``type: unknown`` (ignored by SmartNoise) -> left out, so unknown to queries as there.
* ``censor_dims: False`` says the table's group keys are public. dpsql needs them written down: with
  a database (``keys_from``), each column without bounds gets ``keys`` read from its distinct values
  (the owner's decision, reviewed in the file), and each bounded integer column ``keys: {range: ...}``;
  without one, a note says which columns need keys. With ``censor_dims: True`` (the default) groups
  of columns without keys go through DP partition selection, which needs delta (default_delta).
* ``clamp_counts``, ``clamp_columns``, ``sample_max_ids``, ``use_dpsu``, ``rows``, ``nullable``,
  ``cardinality``: nothing to convert (dpsql always clamps and bounds); ``sensitivity`` and
  ``missing_value`` have no dpsql equivalent: a note says so.

SmartNoise has no total budget in its metadata; the policy gets ``budget`` from the caller.

>>> policy, notes = convert({"PUMS": {"PUMS": {"PUMS": {"row_privacy": True, "age": {"type": "int", "lower": 0,
...     "upper": 100}, "sex": {"type": "string"}}}}})
>>> policy["tables"]["pums"]
{'privacy_unit': 'row', 'columns': {'age': {'type': 'int', 'lower': 0, 'upper': 100}, 'sex': {}}}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import duckdb
import yaml

from dpsql.errors import PolicyError
from dpsql.policy.loading import load_policy
from dpsql.sql.schemas import ENGINE_SCHEMAS

TABLE_OPTIONS = {"rows", "rows_exact", "row_privacy", "max_ids", "sample_max_ids", "clamp_counts", "clamp_columns",
                 "use_dpsu", "censor_dims"}
COLUMN_OPTIONS = {"type", "private_id", "lower", "upper", "nullable", "missing_value", "sensitivity", "cardinality",
                  "name"}
TYPES = {"int", "float", "string", "boolean", "datetime", "unknown"}
MAX_RANGE_KEYS = 10_000     # a bounded integer column with censor_dims: False gets keys {range: ...} up to this
MAX_READ_KEYS = 100_000     # distinct values read as keys, at most (more: a note, no keys)
DEFAULTS = {"epsilon": 10.0, "delta": 1e-4, "default_epsilon": 1.0, "default_delta": 1e-6}

KeysFrom = Callable[[str, str], "list | None"]   # (table, column) -> its distinct values, None if too many


def _fail(path: str, message: str) -> PolicyError:
    return PolicyError("DP501", f"invalid SmartNoise metadata: {path}: {message}")


def _name(text: Any, path: str) -> str:
    """An object name as dpsql writes it: unquoted ("Sale-Amount", `x`, [x] -> the name), lower-cased."""
    if not isinstance(text, str) or not text.strip():
        raise _fail(path, f"name {text!r} must be a non-empty string")
    text = text.strip()
    if len(text) > 1 and (text[0], text[-1]) in (('"', '"'), ("`", "`"), ("[", "]")):
        text = text[1:-1]
    return text.lower()


def load_metadata(path: str | Path) -> Mapping:
    """The metadata YAML file as a mapping (DP501 when unreadable or not YAML)."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise PolicyError("DP501", f"cannot read SmartNoise metadata {path}: {e.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise PolicyError("DP501", f"SmartNoise metadata {path} is not valid YAML: {e}") from None
    if not isinstance(raw, Mapping):
        raise PolicyError("DP501", f"SmartNoise metadata {path} must be a mapping: collection -> schema -> table")
    return raw


def _tables(metadata: Mapping, notes: list[str]) -> list[tuple[str, str, Mapping]]:
    """(path, table name, spec) of every table: one collection (beside an optional ``engine``). A schema
    that is one of DuckDB's own (``main``) gets a note: queries name its tables bare (sql/schemas.py)."""
    collections = [k for k in metadata if k != "engine"]
    if len(collections) != 1:
        raise _fail("(root)", f"expected one collection (beside `engine`), found {len(collections)}")
    collection = collections[0]
    found = []
    schemas = metadata[collection]
    if not isinstance(schemas, Mapping):
        raise _fail(str(collection), "must map schemas to tables")
    for schema, tables in schemas.items():
        if not isinstance(tables, Mapping):
            raise _fail(f"{collection}.{schema}", "must map table names to tables")
        if str(schema).lower() in ENGINE_SCHEMAS:
            notes.append(f"{collection}.{schema}: {schema} is one of DuckDB's own schemas, which dpsql does not "
                         f"accept in a query: write FROM {next(iter(tables), 'table')}, not FROM {schema}."
                         f"{next(iter(tables), 'table')}")
        for table, spec in tables.items():
            path = ".".join(str(p) for p in (collection, schema, table) if p != "")
            if not isinstance(spec, Mapping):
                raise _fail(path, "must be a mapping of options and columns")
            found.append((path, _name(table, path), spec))
    return found


def _column(spec: Any, path: str, notes: list[str]) -> tuple[dict | None, bool]:
    """(the dpsql column, is it the private id); None: left out (``type: unknown``)."""
    if not isinstance(spec, Mapping):
        raise _fail(path, "a column must be a mapping with a `type`")
    unknown = set(spec) - COLUMN_OPTIONS
    if unknown:
        notes.append(f"{path}: ignored unknown entries {sorted(unknown)}")
    kind = spec.get("type")
    if kind not in TYPES:
        raise _fail(f"{path}.type", f"must be one of {sorted(TYPES)}, not {kind!r}")
    if spec.get("private_id"):
        return {"identifier": True}, True
    if kind == "unknown":
        notes.append(f"{path}: type unknown, ignored by SmartNoise: not declared (queries cannot use it)")
        return None, False
    column: dict = {}
    if kind in ("int", "float"):
        column["type"] = kind
        if "lower" in spec or "upper" in spec:
            if "lower" not in spec or "upper" not in spec:
                raise _fail(path, "lower and upper must be given together")
            cast = int if kind == "int" else float
            column["lower"], column["upper"] = cast(spec["lower"]), cast(spec["upper"])
    for option in ("sensitivity", "missing_value"):
        if spec.get(option) is not None:
            notes.append(f"{path}: {option} has no dpsql equivalent and is ignored (dpsql derives sensitivity "
                         "from bounds and leaves NULLs as NULLs)")
    return column, False


def _table(path: str, name: str, spec: Mapping, keys_from: KeysFrom | None,
           notes: list[str]) -> dict | None:
    options = {k: spec[k] for k in TABLE_OPTIONS if k in spec}
    columns, ids = {}, []
    for cname, cspec in spec.items():
        if cname in TABLE_OPTIONS:
            continue
        cpath = f"{path}.{cname}"
        column, private = _column(cspec, cpath, notes)
        if column is not None:
            columns[_name(cname, cpath)] = column
        if private:
            ids.append(_name(cname, cpath))
    if len(ids) > 1:
        raise _fail(path, f"a compound private_id ({', '.join(ids)}) has no dpsql equivalent: one column must "
                          "identify a person")
    max_ids = options.get("max_ids", 1)
    if isinstance(max_ids, bool) or not isinstance(max_ids, int) or max_ids < 1:
        raise _fail(f"{path}.max_ids", "must be a whole number >= 1")
    if options.get("row_privacy"):
        if max_ids != 1:
            raise _fail(f"{path}.max_ids", "must be 1 (or absent) with row_privacy")
        table: dict = {"privacy_unit": "row"}
    elif ids:
        table = {"privacy_unit": ids[0]}
        if max_ids != 1:
            table["max_groups_per_unit"] = table["max_rows_per_unit"] = max_ids
            notes.append(f"{path}: max_ids {max_ids} -> max_groups_per_unit and max_rows_per_unit {max_ids}")
    else:
        notes.append(f"{path}: neither private_id nor row_privacy: SmartNoise allows no query on it; left out")
        return None
    if options.get("censor_dims") is False:
        _public_dimensions(path, name, columns, keys_from, notes)
    table["columns"] = columns
    return table


def _public_dimensions(path: str, table: str, columns: dict, keys_from: KeysFrom | None,
                       notes: list[str]) -> None:
    """censor_dims: False: the table's dimensions are public; write their keys down."""
    missing = []
    for cname, column in columns.items():
        if column.get("identifier") or column.get("type") == "float":
            continue
        if column.get("type") == "int" and "lower" in column:
            if column["upper"] - column["lower"] + 1 <= MAX_RANGE_KEYS:
                column["keys"] = {"range": [column["lower"], column["upper"]]}
            continue
        values = keys_from(table, cname) if keys_from is not None else None
        if values:
            column["keys"] = values
            notes.append(f"{path}.{cname}: censor_dims false: {len(values)} keys read from the data, "
                         "now public: review them")
        else:
            missing.append(cname)
    if missing:
        notes.append(f"{path}: censor_dims false, but no keys for {', '.join(missing)}: declare `keys` (or pass "
                     "a database to read them); until then their groups need delta")


def convert(metadata: Mapping, *, keys_from: KeysFrom | None = None, epsilon: float = DEFAULTS["epsilon"],
            delta: float = DEFAULTS["delta"]) -> tuple[dict, list[str]]:
    """A dpsql policy (a dict, validated by ``load_policy``) and notes on what did not carry over.

    Raises:
        PolicyError (DP501): metadata that is malformed or has no dpsql equivalent, naming its path.
    """
    notes: list[str] = []
    tables: dict = {}
    for path, name, spec in _tables(metadata, notes):
        if name in tables:
            raise _fail(path, f"a second table named {name!r}: dpsql names tables without their schema")
        table = _table(path, name, spec, keys_from, notes)
        if table is not None:
            tables[name] = table
    if not tables:
        raise _fail("(root)", "no table has a private_id column or row_privacy: nothing can be queried")
    policy = {"version": 1, "budget": {"epsilon": epsilon, "delta": delta},
              "default_epsilon": min(DEFAULTS["default_epsilon"], epsilon),
              "default_delta": min(DEFAULTS["default_delta"], delta), "tables": tables}
    load_policy(policy)   # anything dpsql would refuse is refused here, naming the entry
    return policy, notes


def distinct_values(con) -> KeysFrom:
    """Keys read from a DuckDB connection: a column's distinct non-NULL values, sorted (None: too many)."""
    def read(table: str, column: str) -> list | None:
        quoted = [name.replace('"', '""') for name in (column, table)]
        try:
            rows = con.execute(f'SELECT DISTINCT "{quoted[0]}" FROM "{quoted[1]}" WHERE "{quoted[0]}" IS NOT NULL '
                               f"ORDER BY 1 LIMIT {MAX_READ_KEYS + 1}").fetchall()
        except duckdb.Error as e:
            raise PolicyError("DP502", f"cannot read the keys of {table}.{column}: {str(e).splitlines()[0]}") from None
        if len(rows) > MAX_READ_KEYS:
            return None
        return [v if isinstance(v, (bool, int, float, str)) else str(v) for (v,) in rows]
    return read


def dump(policy: dict, notes: list[str], source: str) -> str:
    """The policy as YAML, headed by comments: where it came from and each note."""
    header = [f"# dpsql policy converted from SmartNoise metadata {source} (dpsql policy import).",
              "# Review the budget (SmartNoise's metadata has none) and every note below."]
    header += [f"# note: {n}" for n in notes]
    return "\n".join(header) + "\n" + yaml.safe_dump(policy, sort_keys=False, allow_unicode=True,
                                                      default_flow_style=None)   # a column a line
