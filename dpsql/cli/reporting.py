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
from typing import Iterator

import click

from dpsql.errors import DpsqlError

EXIT_FAILED = 1


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
