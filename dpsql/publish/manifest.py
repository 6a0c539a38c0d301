"""A release's manifest (``DIR/manifest.json``): per statistic its plan, its spend, its outputs with
their expected errors and interval columns, its rows and its ledger charge; the dpsql version, the
policy's identity, the data's version (keyed: publish/keys.py) and the charges' times.

Everything in it is a function of the spec, the plans and the ledger's record of the release, never
of the moment it is written: a re-run that replays the release writes the same bytes. What a run did
(what it spent, what replayed) is the ``Release`` that ``dpsql.publish`` returns, not the manifest.
"""
from __future__ import annotations

import importlib.metadata
import json
import math
from pathlib import Path
from typing import Sequence

from dpsql.accounting.budget import Charge
from dpsql.accounting.ledger import Ledger, recorded
from dpsql.api import replay
from dpsql.api.result import Result
from dpsql.errors import DpsqlError
from dpsql.publish.preview import Planned

FORMAT = "dpsql-release/1"
NAME = "manifest.json"
PENDING = ".dpsql-pending.json"   # a run in progress (manifest.pending)


def version() -> str:
    try:
        return importlib.metadata.version("dpsql")
    except importlib.metadata.PackageNotFoundError:   # a checkout on PYTHONPATH, not installed
        return "unknown"


def read(directory: Path, name: str = NAME) -> dict | None:
    """The manifest (or ``PENDING`` note) an earlier run left in ``directory`` (None: none, or not ours)."""
    try:
        doc = json.loads((directory / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def pending(planned: Sequence[Planned], history: Sequence[Charge]) -> bytes:
    """The note a run leaves before its batch (removed once the manifest is written): each statistic's
    keyed replay key and the ledger's newest charge before it, so that after a crash the dry run can
    tell which statistics the batch released (they replay) from those it did not."""
    doc = {"format": FORMAT, "after": max((c.id for c in history), default=0),
           "statistics": [{"name": p.statistic.name, "replay": p.replay} for p in planned]}
    return dumps(doc)


def _same(charge: Charge, planned: Planned, status: str = "released") -> bool:
    """Whether ``charge`` is the owner's ``status`` charge for ``planned`` as the history records it (its
    normalised SQL, plan summary, epsilon and delta; the replay key itself is not in the history)."""
    return (charge.status, charge.analyst, charge.sql, charge.plan, charge.epsilon, charge.delta) == (
        status, None, recorded(replay.normalise_sql(planned.statistic.sql)[0]),
        recorded(replay.plan_summary(planned.plan)), planned.epsilon, planned.delta)


def released_before(directory: Path, planned: Sequence[Planned], history: Sequence[Charge]) -> set[str]:
    """The statistics an earlier run of this release released under the same replay key (same SQL, plan,
    share, policy and data: keyed, publish/keys.py), as the ledger still records: they replay free. The
    manifest names each one's charge; a run that crashed left its pending note instead, and a charge of
    the batch is one after the note's ``after`` whose record matches. Without either nothing is claimed
    free (the run may still replay: the dry run errs high, never low)."""
    done, note = read(directory) or {}, read(directory, PENDING) or {}
    by_id = {c.id: c for c in history}
    after = note.get("after")
    free = set()
    for p in planned:
        named, noted = _entry(done, p.statistic.name), _entry(note, p.statistic.name)
        if p.replay is None:
            continue
        if named.get("replay") == p.replay and named.get("charge") in by_id and _same(by_id[named["charge"]], p):
            free.add(p.statistic.name)
        if noted.get("replay") == p.replay and isinstance(after, int) \
                and any(c.id > after and _same(c, p) for c in history):
            free.add(p.statistic.name)
    return free


def _entry(doc: dict, name: str) -> dict:
    """The statistic called ``name`` in a manifest or a pending note ({} if none)."""
    found = [s for s in doc.get("statistics", []) if isinstance(s, dict) and s.get("name") == name]
    return found[0] if found else {}


def charge_of(ledger: Ledger, history: Sequence[Charge], planned: Planned, got: Result | DpsqlError,
              after: int) -> Charge | None:
    """The owner's charge behind ``got``: for an answer, the newest released one with its SQL, plan,
    epsilon and delta whose stored answer equals it (a replay returns the newest identical answer); for a
    statistic that failed after its charge, its failed charge, one made after ``after`` (this run's)."""
    if not planned.charged:
        return None   # public tables only: recorded at 0 anew by every run, nothing to replay
    for charge in sorted(history, key=lambda c: -c.id):
        if isinstance(got, DpsqlError):
            if charge.id > after and _same(charge, planned, "failed"):
                return charge
        elif _same(charge, planned):
            stored = ledger.answer(charge.id)
            if stored is not None and replay.unstored(stored)[0].equals(got.arrow()):
                return charge
    return None


def _outputs(planned: Planned, columns: list[str]) -> list[dict]:
    found = []
    for o in planned.outputs:
        ci = [f"{o['name']}_ci_low", f"{o['name']}_ci_high"]
        found.append({**o, "ci": ci if all(c in columns for c in ci) else None})
    return found


def entry(planned: Planned, release_epsilon: float, got: Result | DpsqlError, file: str | None,
          charge: Charge | None) -> dict:
    """One statistic's part of the manifest."""
    doc = {"name": planned.statistic.name, "sql": planned.statistic.sql, "epsilon": planned.epsilon,
           "delta": planned.delta, "share": planned.epsilon / release_epsilon, "plan": planned.summary(),
           "replay": planned.replay, "charge": None if charge is None else charge.id,
           "charged_at": None if charge is None else charge.time}
    if isinstance(got, DpsqlError):   # failed after its charge: spent, not released; a re-run pays again
        return {**doc, "status": "failed", "error": {"code": got.code, "message": got.message},
                "outputs": [dict(o) for o in planned.outputs], "columns": None, "rows": None, "file": None}
    return {**doc, "status": "released", "outputs": _outputs(planned, got.columns), "columns": got.columns,
            "rows": len(got), "file": file}


def manifest(title: str, budget: tuple[float, float], ci: float | None, identity: str, data: str,
             statistics: list[dict]) -> dict:
    """The whole manifest: the release's figures and each statistic's entry, in the spec's order."""
    released = [s for s in statistics if s["status"] == "released"]
    times = sorted(s["charged_at"] for s in statistics if s["charged_at"] is not None)
    return {"format": FORMAT, "title": title, "status": "complete" if len(released) == len(statistics)
            else "incomplete", "dpsql_version": version(), "policy": identity, "data_version": data,
            "budget": {"epsilon": budget[0], "delta": budget[1]}, "ci": ci,
            # Released or failed after its charge: both spent (a failed one is charged again by a resume).
            "spent": {"epsilon": math.fsum(s["epsilon"] for s in statistics),
                      "delta": math.fsum(s["delta"] for s in statistics)},
            "charges": sorted(s["charge"] for s in statistics if s["charge"] is not None),
            "times": {"first_charge": times[0] if times else None, "last_charge": times[-1] if times else None},
            "statistics": statistics}


def dumps(doc: dict) -> bytes:
    return (json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n").encode()
