"""Where and how ``dpsql query`` writes a result: stdout or ``-o FILE``, in one of FORMATS (by default
the one ``-o``'s suffix names, else a table)."""
from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click
import pyarrow.parquet as pq

from dpsql.api import display
from dpsql.api.result import Result
from dpsql.cli.render import render_csv, render_json, render_markdown, render_ndjson, render_table, render_tsv

RENDERERS = {"table": render_table, "csv": render_csv, "tsv": render_tsv, "json": render_json,
             "ndjson": render_ndjson, "markdown": render_markdown}
FORMATS = ("table", "csv", "tsv", "json", "ndjson", "parquet", "markdown")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson",
            ".parquet": "parquet", ".md": "markdown", ".txt": "table"}


def output_format(fmt: str | None, path: str | None) -> str:
    """The format asked for, else the one the output file's suffix names, else ``table``.

    >>> output_format(None, "out.parquet"), output_format("csv", "out.txt"), output_format(None, None)
    ('parquet', 'csv', 'table')
    """
    if fmt is None:
        fmt = SUFFIXES.get(Path(path).suffix.lower(), "table") if path else "table"
    if fmt == "parquet" and path is None:
        raise click.UsageError("--format parquet is a binary file: pass -o FILE.parquet")
    return fmt


def check_destination(path: str | None) -> None:
    """Before anything is spent: ``-o FILE`` can be written (its folder exists and takes a new file), so
    a query is not charged for an answer that then has nowhere to go. A usage error otherwise."""
    if path is None:
        return
    folder = Path(path).parent
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{Path(path).name}.", dir=str(folder))
    except OSError as err:
        raise click.UsageError(f"-o {path}: cannot write a file in {str(folder)!r} ({err.strerror}); nothing was "
                               "spent") from None
    os.close(fd)
    os.unlink(probe)


def write_after_charge(data: bytes, path: str | None) -> None:
    """``write``, for an answer already paid for: a failure says so, and that a rerun replays it free."""
    try:
        write(data, path)
    except OSError as err:
        raise click.ClickException(f"cannot write {path}: {err.strerror}; the answer was charged, and the same "
                                   "query run again returns it at no cost (unless --fresh)") from None


def render(res, fmt: str, max_width: int | None = None) -> bytes:
    """The whole output, made before anything is written (a failure leaves no partial file or stdout). A
    table is Python's display of the Result (noisy columns marked ~, intervals beside values, the epsilon
    footer; warnings go to stderr), no wider than ``max_width``."""
    if fmt == "parquet":
        buffer = io.BytesIO()
        pq.write_table(res.arrow(), buffer)
        return buffer.getvalue()
    if fmt == "table" and isinstance(res, Result):
        shown = display.Released(res.arrow(), res.plan, res.replayed, (), getattr(res, "clipping", None))
        return (display.box_table(shown, max_rows=None, max_width=max_width) + "\n").encode()
    text = RENDERERS[fmt](list(res.columns), res.fetchall())
    return (text if text.endswith("\n") else text + "\n").encode()


def terminal_width(path: str | None) -> int | None:
    """The width a table printed to stdout should fit: the terminal's (or $COLUMNS); none for a file or a pipe."""
    if path is not None or not (sys.stdout.isatty() or os.environ.get("COLUMNS")):
        return None
    return max(shutil.get_terminal_size().columns, 40)


def write(data: bytes, path: str | None) -> None:
    """To stdout, or to ``path`` whole: written beside it, then renamed over it."""
    if path is None:
        click.echo(data.decode(), nl=False)
        return
    target = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)   # as open() would make it, not mkstemp's 0600
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
