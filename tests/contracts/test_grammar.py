"""The dialect's corpora: every grammar/accept file is answered, every grammar/reject file is refused
with the code on its `-- expect:` line (and, where a `-- caret:` line says so, underlines that text)."""
import copy
import math
import re

import numpy as np
import pytest

import dpsql
from tests.support.fixture import POLICY, make_database
from tests.support.paths import GRAMMAR

ACCEPT = sorted((GRAMMAR / "accept").glob("*.sql"))
REJECT = sorted((GRAMMAR / "reject").glob("*.sql"))


@pytest.fixture(scope="module")
def db():
    """One private connection for the whole corpus (a fresh one per file cost 20x the query), its
    budget large enough for every accepted file."""
    policy = copy.deepcopy(POLICY)
    policy["budget"] = {"epsilon": 1e6, "delta": 0.5}
    con = dpsql.connect(make_database(), ledger=":memory:", policy=policy, rng=np.random.default_rng(20261125))
    yield con
    con.close()


def test_the_corpora_are_large_enough():
    assert len(ACCEPT) >= 40 and len(REJECT) >= 60


@pytest.mark.parametrize("path", ACCEPT, ids=lambda p: p.stem)
def test_accepted(db, path):
    res = db.sql(path.read_text())
    rows = res.fetchall()
    assert rows or res.plan.limit is not None or res.plan.having is not None or res.plan.selection is not None
    # By name: a lookup after a top-1 (frontend/arg_max.py) puts public columns between the outputs.
    # A public last stage's rows are its own (plan/model.py PublicStage): no released aggregate among them.
    outputs = res.plan.visible_outputs if res.plan.then is None else ()
    aggregates = [res.columns.index(o.name) for o in outputs if o.kind not in ("key", "expr")]
    for row in rows:
        for i in aggregates:
            assert row[i] is not None and math.isfinite(row[i]), (path.name, row)


@pytest.mark.parametrize("path", REJECT, ids=lambda p: p.stem)
def test_rejected(db, path):
    sql = path.read_text()
    expect = re.search(r"^-- expect: (DP\d{3})$", sql, re.M)
    assert expect, f"{path.name} must start with `-- expect: DP###`"
    caret = re.search(r"^-- caret: (.+)$", sql, re.M)
    before = db.budget.spent_epsilon
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(sql)
    err = info.value
    assert err.code == expect.group(1), err.format()
    assert db.budget.spent_epsilon == before, "a refused query spends nothing"
    assert err.format().startswith(f"error[{err.code}]")
    assert err.rule and f"rule: {err.rule}" in err.format(), "every refusal names its rule"
    assert err.hint.strip() and f"hint: {err.hint}" in err.format(), "every refusal says what to do (issue 25)"
    assert str(err) == err.format(), "a notebook's traceback shows str(e): the caret and the hint with it"
    if caret:
        assert sql[err.start:err.end + 1] == caret.group(1), err.format()
