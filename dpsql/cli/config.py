"""Where the CLI finds its database, policy and ledger when the options are not given.

In order: the command-line option, the environment (``DPSQL_DB``, ``DPSQL_POLICY``, ``DPSQL_LEDGER``),
a ``dpsql.toml`` beside the database, a ``dpsql.toml`` in the current directory. Paths in a
``dpsql.toml`` are read relative to the file::

    db = "people.duckdb"
    policy = "policy.yaml"
    ledger = "budget.sqlite"     # optional

These are the owner's settings for the local CLI; nothing here reaches a query.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

import click

from dpsql.cli.reporting import require_file

CONFIG_FILE = "dpsql.toml"
KEYS = ("db", "policy", "ledger")
ENV = {"db": "DPSQL_DB", "policy": "DPSQL_POLICY", "ledger": "DPSQL_LEDGER"}
KINDS = {"db": "database", "policy": "policy"}


def resolve(db: str | None, policy: str | None, ledger: str | None, *, cwd: str | Path | None = None,
            environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The settings, each from the first place that has it (see the module's docstring).

    >>> resolve("a.duckdb", None, None, environ={"DPSQL_POLICY": "p.yaml"}, cwd="/nonexistent")
    {'db': 'a.duckdb', 'policy': 'p.yaml', 'ledger': None}
    """
    environ = os.environ if environ is None else environ
    values: dict[str, str | None] = {"db": db, "policy": policy, "ledger": ledger}
    for key, var in ENV.items():
        if values[key] is None and environ.get(var):
            values[key] = environ[var]
    here = Path(cwd if cwd is not None else os.getcwd()) / CONFIG_FILE
    read: set[Path] = set()
    for _ in range(2):   # the file beside the database first; the current directory's may name the database
        for path in ([Path(values["db"]).parent / CONFIG_FILE] if values["db"] else []) + [here]:
            if path.resolve() not in read and path.is_file():
                read.add(path.resolve())
                for key, value in read_config(path).items():
                    if values[key] is None:
                        values[key] = value
    return values


def read_config(path: Path) -> dict[str, str]:
    """A dpsql.toml's settings, paths made relative to its directory; a bad file is a usage error."""
    toml = _toml_module()
    try:
        with open(path, "rb") as f:
            doc = toml.load(f)
    except (OSError, toml.TOMLDecodeError) as e:
        raise click.UsageError(f"{path}: cannot read it as TOML ({e})") from None
    unknown = sorted(set(doc) - set(KEYS))
    if unknown:
        raise click.UsageError(f"{path}: unknown setting {', '.join(map(repr, unknown))}; "
                               f"it may set {', '.join(KEYS)}")
    for key, value in doc.items():
        if not isinstance(value, str) or not value:
            raise click.UsageError(f"{path}: {key} must be a path in quotes, got {value!r}")
    return {key: str(path.parent / value) for key, value in doc.items()}


def required(values: Mapping[str, str | None], *keys: str) -> None:
    """A usage error naming every way to give a missing setting; a set-up error (exit 3) for a file
    named that does not exist."""
    for key in keys:
        if values.get(key) is None:
            raise click.UsageError(f"no {key}: pass --{key} FILE, set {ENV[key]}, or write {key} = \"FILE\" "
                                   f"in a {CONFIG_FILE} here or beside the database")
        require_file(KINDS[key], str(values[key]))


def _toml_module():
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    try:
        import tomli
    except ImportError:
        raise click.UsageError(f"reading {CONFIG_FILE} needs Python 3.11 or the tomli package "
                               "(pip install tomli)") from None
    return tomli
