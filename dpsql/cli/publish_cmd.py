"""``dpsql publish``'s display: progress while a release runs (rich on a terminal, one line a step
otherwise, nothing with ``--quiet``), the summary after it, and its exit code.

Exit codes an orchestrator acts on: 0 the release is complete (or a dry run that fits); 2 refused (a
statistic refused, or the release does not fit the budget: nothing was spent); 3 a set-up error (the
spec, DP524-DP528, the policy, the database, the ledger: fix and re-run); 4 incomplete (a statistic
failed after its charge: spent; the others are written; re-running resumes, paying again only for what
was not released); 1 any other failure.
"""
from __future__ import annotations

import contextlib
import sys
from typing import IO, Callable, Iterator

import click

from dpsql.publish.release import Release

EXIT_INCOMPLETE = 4
PHASES = {"plan": "planned", "run": "running the release (reserved at once)", "write": "writing the tables",
          "report": "writing the reports"}


@contextlib.contextmanager
def progress(total: int, quiet: bool, stream: IO[str] | None = None) -> Iterator[Callable[[str, str], None]]:
    """A ``dpsql.publish`` progress callback for ``total`` statistics, shown on ``stream`` (stderr)."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        yield lambda phase, name: None
        return
    if not getattr(stream, "isatty", lambda: False)():
        def line(phase: str, name: str) -> None:
            click.echo(f"{PHASES.get(phase, phase)}{' ' + name if name else ''}", file=stream)
        yield line
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=Console(file=stream, force_terminal=True), transient=True,
                  redirect_stdout=False, redirect_stderr=False) as shown:
        planning = shown.add_task("planning", total=total)
        current: list = []

        def step(phase: str, name: str) -> None:
            if phase == "plan":
                shown.update(planning, advance=1, description=f"planned {name}")
                return
            if current:
                shown.update(current[-1], completed=1)
            current.append(shown.add_task(PHASES.get(phase, phase), total=1))
        yield step


def summary(release: Release) -> str:
    """What the run did, for stdout: where, what was charged, what replayed, what failed."""
    found = release.preview
    paid = [p.statistic.name for p in found.planned if p.charged and p.statistic.name not in release.replayed
            and p.statistic.name not in release.failed]
    lines = [f"published {len(release.written)} of {len(found.planned)} statistics to {release.directory}: "
             f"spent epsilon={release.spent[0]:g}, delta={release.spent[1]:g}"
             f" ({len(paid)} charged, {len(release.replayed)} replayed free)"]
    for name, err in release.failed.items():
        lines.append(f"failed after its charge (spent): {name}: {err.code} {err.message}")
    if release.failed:
        lines.append("re-run the same command to resume: what was released replays free, the rest is charged again")
    return "\n".join(lines) + "\n"


def exit_code(release: Release) -> int:
    if release.manifest is None:   # a dry run
        return 0 if release.preview.fits else 2
    return 0 if release.complete else EXIT_INCOMPLETE
