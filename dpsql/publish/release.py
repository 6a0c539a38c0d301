"""``dpsql.publish``: a release of named statistics under one budget, written as files with a manifest
and a report, run through the batch path (``db.sql_batch``: planned together, the whole release
reserved in one ledger transaction, all or nothing).

Re-running and resuming. A release is re-run by calling ``publish`` again with the same spec, data and
policy: every statistic whose answer the ledger holds as released replays it (today's replay: the
same SQL, share, plan, policy and data version, per analyst; the owner here), free, and its files are
written again byte for byte. A run that crashed half-way is resumed the same way, and the ledger says
what it owes. The batch reserved every charge before the first statistic ran; a crash (SIGKILL, power)
leaves each charge whose statistic had not been released ``reserved``, and an interruption the process
survives marks them ``failed``. Both count as spent and neither holds an answer, so the re-run charges
those statistics again, with new noise. The privacy argument for paying twice: a charge that is not
released may have drawn its noise (the engine draws it inside the run, and a kill can land after the
draw and before the release), and whether the process died can depend on that run; reusing the charge
for a second draw would release a value chosen among two draws under one payment, which the
composition of the ledger does not account for. So a resume never spends less than a fresh release
of what was not released; it never pays again for what was (those replay). The statistics that had
not started are paid twice too (their charges could only be reused through the accountant, and which
statistics run together is the batch's business). Before its batch a run leaves a pending note
(``manifest.PENDING``: the keyed replay keys and the ledger's newest charge), removed once the manifest
is written, so that ``--dry-run`` after a crash tells which statistics the batch released (they replay)
and what the resume will cost.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import pyarrow as pa

from dpsql.api.connection import PrivateConnection, connect
from dpsql.api.result import Result
from dpsql.errors import DpsqlError, ReleaseError
from dpsql.publish import files, manifest, report
from dpsql.publish.keys import keyed, release_key
from dpsql.publish.preview import Preview, plan_all, preview
from dpsql.publish.spec import ReleaseSpec, load_spec

Progress = Callable[[str, str], None]   # (phase, statistic or ""): a terminal's progress display


@dataclass
class Release:
    """What one ``publish`` call did: the preview it ran from, the files it wrote (by statistic), the
    statistics that replayed free, those that failed after their charge (spent; a re-run pays again),
    what this run spent, and the manifest (None for a dry run)."""
    preview: Preview
    directory: Path | None
    written: dict[str, str] = field(default_factory=dict)
    replayed: list[str] = field(default_factory=list)
    failed: dict[str, DpsqlError] = field(default_factory=dict)
    spent: tuple[float, float] = (0.0, 0.0)
    manifest: dict | None = None

    @property
    def complete(self) -> bool:
        return self.manifest is not None and not self.failed


def _connection(db, policy, ledger) -> PrivateConnection:
    if isinstance(db, PrivateConnection):
        if policy is not None or ledger is not None:
            raise ReleaseError("DP524", "pass policy= and ledger= with a database path, not with a connection "
                                        "(it has its own)")
        return db
    if policy is None:
        raise ReleaseError("DP524", "publish needs policy= (the data owner's policy) to open db=")
    return connect(db, policy=policy, ledger=ledger)


def _key(db: PrivateConnection, dry_run: bool) -> bytes | None:
    try:
        return release_key(db.ledger.path, make=not dry_run)
    except OSError as e:
        raise ReleaseError("DP528", f"cannot read or make the release key beside the ledger: {e}") from None


def publish(spec: str | os.PathLike | Mapping, db=None, out: str | os.PathLike = "release", *, policy=None,
            ledger=None, format: str = "parquet", dry_run: bool = False, progress: Progress | None = None,
            reports: bool = True) -> Release:
    """Publish a release: each statistic of ``spec`` answered under the release's budget and written
    to ``out`` (``NAME.parquet``, ``NAME.csv``, or a table of ``release.duckdb``), with ``manifest.json``
    and the reports ``report.html`` and ``report.md``.

    Args:
        spec: the release spec, a YAML path or a dict: ``budget: {epsilon, delta}``, ``statistics:``
            a list of ``{name, sql}`` with an optional ``weight`` or ``epsilon`` (README, "Publishing a release").
        db: a ``dpsql.connect`` connection, or what ``connect`` opens (then ``policy=``, ``ledger=``).
        out: the release's directory (made if missing).
        format: ``parquet`` (default), ``csv`` or ``duckdb``.
        dry_run: plan only: costs, expected errors, what replays, whether it fits; nothing is spent
            or written.
        progress: called with (phase, statistic name) as the run goes: a terminal's display.
    Returns:
        Release: what was written, replayed, spent; ``release.complete``; ``release.failed``.
    Raises:
        ReleaseError (DP524-DP528): the spec or the output is not valid; nothing is spent.
        DpsqlError: a statistic refused (named), or BudgetExceeded: the release does not fit (nothing
        is spent, the ledger as it was); set-up errors of ``connect``.
    Example:
        >>> dpsql.publish("release.yaml", db="people.duckdb", policy="policy.yaml", out="out")  # doctest: +SKIP
    """
    checked = load_spec(spec)
    directory = None if dry_run else files.output_dir(out, format)
    files.check_format(format)
    con = _connection(db, policy, ledger)
    key = _key(con, dry_run)
    tell = progress or (lambda phase, name: None)
    planned = plan_all(con, checked, key, lambda name: tell("plan", name))
    history = con.budget.history
    before = manifest.released_before(Path(out), planned, history)
    planned = [dataclasses.replace(p, replays=p.statistic.name in before) for p in planned]
    found = preview(con, checked, planned)
    if dry_run:
        return Release(found, None)
    assert directory is not None and key is not None
    files.atomic_bytes(directory / manifest.PENDING, manifest.pending(planned, history))
    tell("run", "")
    try:
        # Each at the share it was planned at (explicit): the split is the spec's, made once (spec.py).
        answers = con.sql_batch([p.statement() for p in planned], None, None, ci=checked.ci)
    except DpsqlError:   # refused or over budget: nothing was charged, so nothing is pending
        (directory / manifest.PENDING).unlink(missing_ok=True)
        raise
    got: dict[str, Result | DpsqlError] = {}
    for name in answers:
        try:
            got[name] = answers[name]
        except DpsqlError as err:
            got[name] = err
    after = max((c.id for c in history), default=0)   # the charges of this run come after it
    return _write(con, checked, found, got, directory, format, keyed(key, con.data_version), tell, reports, after)


def _write(db: PrivateConnection, spec: ReleaseSpec, found: Preview, got: dict[str, Result | DpsqlError],
           directory: Path, fmt: str, data: str, tell: Callable[[str, str], None], reports: bool,
           after: int) -> Release:
    """The released tables written, then the reports, then the manifest last: a manifest names a
    release whose files are all in place."""
    tables: dict[str, pa.Table] = {n: r.arrow() for n, r in got.items() if isinstance(r, Result)}
    tell("write", "")
    previous = manifest.read(directory)
    written = files.write_tables(directory, fmt, tables)
    history = db.budget.history
    entries = []
    for p in found.planned:
        name, answer = p.statistic.name, got[p.statistic.name]
        charge = manifest.charge_of(db.ledger, history, p, answer, after)
        entries.append(manifest.entry(p, spec.epsilon, answer, written.get(name), charge))
    doc = manifest.manifest(spec.title, (spec.epsilon, spec.delta), spec.ci, db.ledger.identity, data, entries)
    if reports:
        tell("report", "")
        files.atomic_bytes(directory / report.HTML, report.html(doc, tables).encode())
        files.atomic_bytes(directory / report.MARKDOWN, report.markdown(doc, tables).encode())
    files.atomic_bytes(directory / manifest.NAME, manifest.dumps(doc))
    (directory / manifest.PENDING).unlink(missing_ok=True)
    files.remove_stale(directory, previous, set(written.values()))
    paid = [p for p in found.planned if isinstance(got[p.statistic.name], Result)
            and not got[p.statistic.name].replayed and p.charged]   # type: ignore[union-attr]
    failed = {n: e for n, e in got.items() if isinstance(e, DpsqlError)}
    spent_failed = [p for p in found.planned if p.statistic.name in failed]
    spent = (math.fsum(p.epsilon for p in paid + spent_failed), math.fsum(p.delta for p in paid + spent_failed))
    replayed = [n for n, r in got.items() if isinstance(r, Result) and r.replayed]
    return Release(found, directory, written, replayed, failed, spent, doc)

