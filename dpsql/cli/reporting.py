"""The CLI's one place for exit codes: library errors turned into a message on stderr and an exit
code (``DpsqlError.exit_code``; 1 for anything else), shared by every command group.

>>> try:
...     with reporting_errors():
...         raise ValueError("not a DpsqlError")
... except SystemExit as e:
...     e.code
1
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

import click

from dpsql.errors import DpsqlError, PolicyError

EXIT_FAILED = 1
MEMORY_DB = ":memory:"   # --db :memory: (or no --db): every table from its policy's source:

# A missing file is the set-up error the library raises for it (exit 3), not a usage error (exit 1).
_MISSING = {"database": ("DP503", "database file {!r} does not exist",
                         "pass --db an existing DuckDB, Parquet or CSV file; with no --db every table is read "
                         "from its policy's source:"),
            "policy": ("DP501", "policy file {!r} does not exist", "pass --policy the data owner's policy YAML"),
            "metadata": ("DP501", "SmartNoise metadata file {!r} does not exist", "pass the metadata's YAML file"),
            "source": ("DP505", "source file {!r} does not exist", "pass an existing Parquet, CSV or DuckDB file")}


class SetupFailure(click.ClickException):
    """A set-up error found while the options are read, shown as the library shows it, with its exit code."""

    def __init__(self, err: DpsqlError):
        super().__init__(err.message)
        self.err, self.exit_code = err, err.exit_code

    def show(self, file=None) -> None:
        click.echo(self.err.format(), err=True)


def require_file(kind: str, path: str) -> str:
    """``path``, which must exist: a database or a policy; else a set-up error (exit 3) naming it."""
    if kind == "database" and path == MEMORY_DB:
        return path
    if not os.path.isfile(path):
        code, message, hint = _MISSING[kind]
        raise SetupFailure(PolicyError(code, message.format(path), hint=hint))
    return path


class SetupFile(click.ParamType):
    """A --db or --policy option: an existing file, else a set-up error (exit 3), as dpsql.connect says."""
    name = "file"

    def __init__(self, kind: str):
        self.kind = kind

    def convert(self, value, param, ctx):
        return None if value is None else require_file(self.kind, str(value))


@contextlib.contextmanager
def reporting_errors(*, show_details: bool = True) -> Iterator[None]:
    """Turn library errors into exit codes.

    ``show_details=False`` withholds the text of unexpected (non-dpsql) exceptions: once a query
    reaches the engine, a raw engine message could quote a row value, and the analyst must only
    see what dpsql deliberately releases.
    """
    try:
        yield
    except DpsqlError as err:
        click.echo(err.format(), err=True)
        raise SystemExit(err.exit_code) from None
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as err:  # noqa: BLE001 - the CLI's job is a clean message, not a traceback
        if show_details:
            click.echo(f"error: {_one_line(err)}", err=True)
        else:
            click.echo(f"error: the query failed unexpectedly ({type(err).__name__}); "
                       "details are withheld; this is probably a bug in dpsql", err=True)
        raise SystemExit(EXIT_FAILED) from None


def _one_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    name = type(err).__name__
    return f"{name}: {text}" if text else name
