"""A scheduled release job: the nightly statistics of the demo data, published by ``dpsql.publish``.

Written as a scheduler's task (plain Python, no Airflow or Dagster import): one function,
``publish_release``, that takes its paths as arguments, returns a small JSON-ready summary (what Airflow
keeps as the task's XCom, what Dagster logs as an op's output) and raises when the scheduler should mark
the run failed. Run it by hand on the demo data (``dpsql demo --dir .`` writes demo.duckdb and
policy.yaml)::

    python3 examples/nightly_release.py --db demo.duckdb --policy policy.yaml --out release/

In Airflow, a ``PythonOperator(task_id="dp_release", python_callable=publish_release, op_kwargs={"db":
..., "policy": ..., "out": "/data/releases/{{ ds }}"})``; in Dagster, an ``@op`` whose body calls
``publish_release``. Either way:

- Retrying is safe. The task is idempotent: a run of a release that was already published replays the
  ledger's answers and writes the same files byte for byte, spending nothing; a run that stopped half-way
  (killed, a statistic failed) resumes: what was released replays free, what was not is charged again
  (``dpsql/publish/release.py`` says why). So let the scheduler retry ``ReleaseIncomplete``.
- Do not retry ``dpsql.BudgetExceeded`` (the release does not fit what is left: nothing was spent; the
  owner must top up or shrink it) or another ``DpsqlError`` (a statistic refused, a broken spec: fix the
  spec). The command line gives the same split as exit codes: 4 retry, 2 or 3 fix, 0 done.
- One directory per release date: a new date is a new release (new noise, a new charge); the same date
  is the same release (a replay), as long as the data and the policy are unchanged.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import dpsql

# The release: a total and the tables of it that analysts use, under one budget split by weight.
SPEC = {
    "title": "Nightly demo release",
    "budget": {"epsilon": 1.0, "delta": 1.0e-6},
    "statistics": [
        {"name": "people_by_state", "sql": "SELECT state, COUNT(*) AS n FROM people GROUP BY state", "weight": 2},
        {"name": "people_by_state_sex",
         "sql": "SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex", "weight": 2},
        {"name": "income_by_state", "sql": "SELECT state, AVG(income) AS avg_income FROM people GROUP BY state"},
        {"name": "visits_by_clinic", "sql": "SELECT clinic, COUNT(*) AS visits FROM visits GROUP BY clinic"},
    ],
}


class ReleaseIncomplete(RuntimeError):
    """Some statistics failed after their charge: they stay spent; running the task again resumes."""


def publish_release(db: str, policy: str, out: str, spec=SPEC, ledger: str | None = None) -> dict:
    """The task: publish ``spec`` from ``db`` under ``policy`` into ``out``; a summary for the scheduler.

    Raises:
        ReleaseIncomplete: retry (a resume); dpsql.DpsqlError: do not retry, fix it (see the module).
    """
    release = dpsql.publish(spec, db=db, policy=policy, ledger=ledger, out=out, progress=None)
    if not release.complete:
        raise ReleaseIncomplete(f"{sorted(release.failed)} failed after their charge; run again to resume")
    return {"out": str(Path(out)), "spent_epsilon": release.spent[0], "spent_delta": release.spent[1],
            "replayed": release.replayed, "files": sorted(release.written.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Publish the nightly release of the demo data.")
    parser.add_argument("--db", required=True)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ledger", default=None)
    args = parser.parse_args(argv)
    try:
        summary = publish_release(args.db, args.policy, args.out, ledger=args.ledger)
    except ReleaseIncomplete as err:
        print(err, file=sys.stderr)
        return 4
    except dpsql.DpsqlError as err:
        print(err.format(), file=sys.stderr)
        return err.exit_code
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
