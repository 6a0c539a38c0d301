"""dpsql.remote and the CLI's --server mode: the in-process interface, over HTTP, as an analyst.

The same Result type, the same errors (class, code, message, caret) rebuilt from the server's body,
the analyst's own budget; the analyst's process opens no database, policy or ledger.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet  # noqa: F401 - pa.parquet
import pytest
from click.testing import CliRunner

import dpsql
from dpsql import testing
from dpsql.cli import commands as cli
from dpsql.errors import AuthError, BudgetExceeded
from dpsql.client.remote import RemotePlan
from tests.support.server import ThreadServer, free_port, owner

COUNT = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    db, *_ = owner(tmp_path_factory.mktemp("remote"))
    token = testing.ledger(db).add_analyst("alice", 20)
    with ThreadServer(db) as server:
        yield db, token, server.url
    db.close()


def test_sql_returns_the_in_process_result_type(served):
    db, token, url = served
    remote = dpsql.remote(url, token)
    res = remote.sql("SELECT state, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY state", epsilon=0.5,
                     ci=0.9)
    local = db.sql("SELECT state, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY state", epsilon=0.5, ci=0.9)
    assert type(res) is type(local) is dpsql.Result
    assert res.arrow().schema == local.arrow().schema and res.columns == local.columns
    assert [r[0] for r in res.fetchall()] == ["CA", "NY", "TX"] and res.replayed is False
    assert isinstance(res.plan, RemotePlan) and res.plan.epsilon == 0.5
    assert str(res.plan) == str(local.plan)   # the same explain text (same server connection)
    assert res.fetchall() == res.fetchall()   # materialised once
    assert remote.sql("SELECT state, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY state", epsilon=0.5,
                      ci=0.9).replayed is True


def test_explain_matches_the_in_process_plan_and_spends_nothing(served):
    db, token, url = served
    remote = dpsql.remote(url, token)
    before = remote.budget.spent_epsilon
    plan = remote.explain("SELECT SUM(income) AS s FROM people WHERE age > 30", epsilon=0.25)
    mine = db.analyst(token=token)   # the analyst's explain: their own remaining budget in its text
    assert str(plan) == str(mine.explain("SELECT SUM(income) AS s FROM people WHERE age > 30", epsilon=0.25))
    assert f"remaining before this query: your epsilon {remote.budget.remaining_epsilon:.6g}" in str(plan)
    assert plan.outputs[0]["name"] == "s" and plan.outputs[0]["expected_error"] > 0
    assert remote.budget.spent_epsilon == before


@pytest.mark.parametrize("sql, kwargs", [
    ("SELECT ssn FROM people", {}),
    ("SELECT COUNT(*) FROM people\nWHERE zip = '1' GROUP BY zip", {}),
    ("SELEC COUNT(*) FROM people", {}),
    ("SELECT COUNT(*) FROM read_csv('/etc/passwd')", {}),
    ("SELECT COUNT(*) FROM people", {"epsilon": -1.0}),
    ("SELECT " + "(" * 10_000 + "COUNT(*)" + ")" * 10_000 + " FROM people", {}),
])
def test_refusals_are_the_same_errors_as_in_process(served, sql, kwargs):
    db, token, url = served
    with pytest.raises(dpsql.DpsqlError) as local:
        db.explain(sql, **kwargs)
    with pytest.raises(dpsql.DpsqlError) as remote:
        dpsql.remote(url, token).sql(sql, **kwargs)
    assert type(remote.value) is type(local.value)
    assert remote.value.code == local.value.code
    assert remote.value.format() == local.value.format()


def test_over_budget_is_BudgetExceeded_with_its_figures(served):
    _, token, url = served
    with pytest.raises(BudgetExceeded) as info:
        dpsql.remote(url, token).sql(COUNT, epsilon=1000)
    assert info.value.code == "DP402" and info.value.requested[0] == 1000 and info.value.remaining[0] <= 20


def test_an_unknown_token_is_AuthError(served):
    _, _, url = served
    with pytest.raises(AuthError) as info:
        dpsql.remote(url, "dpsql_not_a_token").sql(COUNT)
    assert info.value.code == "DP407" and "dpsql_not_a_token" not in info.value.format()


def test_budget_is_the_analysts_own_with_history_and_answers(served):
    _, token, url = served
    remote = dpsql.remote(url, token)
    res = remote.sql("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic", epsilon=0.125, fresh=True)
    state = remote.budget
    assert isinstance(state, dpsql.Budget) and state.total_epsilon == 20
    last = state.history[-1]
    assert last.sql == "SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic" and last.status == "released"
    again = remote.answer(last.id)
    assert again.replayed is True and again.fetchall() == res.fetchall()
    assert remote.budget.spent_epsilon == state.spent_epsilon
    assert "people" in remote.schema()["tables"]


def test_the_token_comes_from_the_environment_or_a_file(served, monkeypatch, tmp_path):
    _, token, url = served
    monkeypatch.setenv("DPSQL_TOKEN", token)
    assert dpsql.remote(url).budget.total_epsilon == 20
    monkeypatch.delenv("DPSQL_TOKEN")
    path = tmp_path / "token"
    path.write_text(token + "\n")
    monkeypatch.setenv("DPSQL_TOKEN_FILE", str(path))
    remote = dpsql.remote(url)
    assert remote.budget.total_epsilon == 20
    assert token not in repr(remote)
    monkeypatch.setenv("DPSQL_TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(AuthError):
        dpsql.remote(url)


def test_a_local_server_is_reached_without_the_environments_proxy(served, monkeypatch):
    _, token, url = served
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")   # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")
    assert dpsql.remote(url, token).budget.total_epsilon == 20


def test_an_unreachable_server_is_a_connection_error():
    with pytest.raises(ConnectionError):
        dpsql.remote(f"http://127.0.0.1:{free_port()}", "dpsql_x", timeout=5).sql(COUNT)
    with pytest.raises(dpsql.DpsqlError):
        dpsql.remote("file:///etc/passwd", "dpsql_x")


# --- the CLI's --server mode ---------------------------------------------------------------------

def run(*args, token: str | None = None, stdin: str | None = None):
    env = {"DPSQL_TOKEN": token} if token else {"DPSQL_TOKEN": "", "DPSQL_TOKEN_FILE": "/nonexistent"}
    return CliRunner().invoke(cli.main, list(args), env=env, input=stdin)


def test_cli_query_and_explain_with_server(served):
    _, token, url = served
    out = run("query", COUNT, "--server", url, "--epsilon", "0.125", "--format", "json", token=token)
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert [r["sex"] for r in rows] == ["F", "M"] and set(rows[0]) == {"sex", "n"}
    table = run("query", "-", "--server", url, "--epsilon", "0.125", token=token, stdin=COUNT)
    assert table.exit_code == 0 and "2 rows\n~ noisy: differentially private (epsilon 0.125" in table.stdout
    plan = run("explain", COUNT, "--server", url, "--epsilon", "0.125", token=token)
    assert plan.exit_code == 0 and plan.stdout.startswith("dpsql plan for:")


def test_cli_budget_with_server(served):
    _, token, url = served
    budget = run("budget", "--server", url, "--format", "json", token=token)
    assert budget.exit_code == 0 and json.loads(budget.stdout)["total"]["epsilon"] == 20
    text = run("budget", "--server", url, token=token)
    assert text.exit_code == 0 and "remaining" in text.stdout and "(analyst alice)" in text.stdout


def test_cli_server_refusals_exit_2_with_the_caret(served):
    _, token, url = served
    out = run("query", "SELECT ssn FROM people", "--server", url, token=token)
    assert out.exit_code == 2 and out.stdout == ""
    assert "error[DP203]" in out.stderr and "       ^^^" in out.stderr
    assert run("query", COUNT, "--server", url, token="dpsql_wrong").exit_code == 2
    missing = run("query", COUNT, "--server", url)
    assert missing.exit_code == 3 and "DP410" in missing.stderr   # the analyst's set-up: no token


def test_cli_server_mode_takes_none_of_the_owners_options(served, tmp_path):
    _, token, url = served
    out = run("query", COUNT, "--server", url, "--ledger", str(tmp_path / "fresh.sqlite"), token=token)
    assert out.exit_code == 1 and "--ledger cannot be used with --server" in out.stderr
    assert not (tmp_path / "fresh.sqlite").exists()
    unreachable = run("query", COUNT, "--server", f"http://127.0.0.1:{free_port()}", token=token)
    assert unreachable.exit_code == 1 and "cannot reach the dpsql server" in unreachable.stderr
    assert run("query", COUNT).exit_code == 1   # neither --db/--policy nor --server


def test_results_from_arrow_keep_exact_types(served):
    _, token, url = served
    table = dpsql.remote(url, token).sql("SELECT clinic, region, doctors FROM clinics ORDER BY clinic").arrow()
    assert table.schema.field("doctors").type == pa.int32() and table.num_rows == 3


def test_demo_serve_prepares_an_analyst_and_serves_the_demo_data(tmp_path, monkeypatch):
    import dpsql.server.run as run_module
    from dpsql.accounting.ledger import Ledger
    served_with = {}
    monkeypatch.setattr(run_module, "serve", lambda *args, **kwargs: served_with.update(args=args, **kwargs))
    out = CliRunner().invoke(cli.main, ["demo", "--rows", "300", "--dir", str(tmp_path), "--serve"])
    assert out.exit_code == 0, out.output
    db_path, policy_path = served_with["args"]
    assert (served_with["host"], served_with["port"]) == ("127.0.0.1", 8765)
    token = out.stdout.split("shown once:")[1].split()[0]
    book = Ledger(db_path + ".dpsql-ledger.sqlite")
    assert book.authenticate(token).startswith("demo-")
    book.close()


def test_the_mechanism_reaches_the_server(served):
    """mechanism= over the wire: the Gaussian's plan (the same text as in process), refused without a
    delta (DP401) and for an unknown name as in process."""
    db, token, url = served
    remote = dpsql.remote(url, token)
    plan = remote.explain(COUNT, epsilon=0.5, delta=1e-7, mechanism="gaussian")
    assert "mechanism discrete Gaussian" in str(plan)
    assert str(plan) == str(db.analyst(token=token).explain(COUNT, epsilon=0.5, delta=1e-7, mechanism="gaussian"))
    for kwargs in ({"mechanism": "gaussian"}, {"mechanism": "cauchy", "delta": 1e-7}):
        with pytest.raises(dpsql.DpsqlError) as refused:
            remote.sql(COUNT, epsilon=0.5, **kwargs)
        assert refused.value.code == "DP401"


def test_every_result_verb_works_on_a_remote_result(served, capsys, tmp_path):
    """A remote Result prints, shows and renders HTML as the in-process one does (issue 25 item 4: they
    raised AttributeError on the RemotePlan's dict outputs): the noisy marker, the epsilon footer, the
    interval line and the server's warnings; every reading verb gives the same rows."""
    db, token, url = served
    sql = "SELECT sex, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY sex"
    res = dpsql.remote(url, token).sql(sql, epsilon=0.5, ci=0.9, fresh=True)
    local = db.sql(sql, epsilon=0.5, ci=0.9, fresh=True)
    text = str(res)
    assert text == repr(res) and "~ bigint" in text and "~ double" in text and "│ varchar │" in text
    assert "~ noisy: differentially private (epsilon 0.5, delta 0)" in text
    assert "[low, high]: 90% confidence intervals" in text
    assert text.splitlines()[:4] == str(local).splitlines()[:4]   # the same names, types and marks
    res.show()
    assert "~ noisy" in capsys.readouterr().out
    assert "~ bigint" in res._repr_html_()
    assert isinstance(res.warnings, list)
    assert res.fetchall() == list(res) and len(res.df()) == len(res) == 2 and res.shape == (2, 7)
    assert res.types == local.types and res.arrow().num_rows == 2 and set(res.fetchnumpy()) == set(res.columns)
    first = res.fetchone()
    assert [first] + res.fetchall() == list(res)   # the cursor: one row, then the rest
    assert len(res.fetchmany(5)) == 2 and res.fetchmany(1) == []
    res.write_parquet(str(tmp_path / "r.parquet"))
    res.write_csv(str(tmp_path / "r.csv"))
    assert pa.parquet.read_table(tmp_path / "r.parquet").num_rows == 2
    assert (tmp_path / "r.csv").read_text().splitlines()[0].startswith("sex,n")
    assert pa.table(res).num_rows == 2 and res.pl().height == 2   # __arrow_c_stream__ and polars
    res.show(max_width=45)
    shown = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in shown if line[0] in "┌│├└") <= 45 and "│ … │" in shown[1]
    # A warning the plan alone decides: whether a noisy answer "cannot be told from 0" depends on the
    # draw (about 1 run in 10 drew past the interval), and a server's draws cannot be seeded.
    tiny = dpsql.remote(url, token).sql("SELECT COUNT(*) AS n FROM people WHERE age > 200", epsilon=1e-12,
                                        fresh=True)
    assert tiny.warnings and "the noise dwarfs any plausible answer" in tiny.warnings[0]
    assert "warning: " in str(tiny)


def test_a_public_only_remote_result_says_it_is_exact(served):
    _, token, url = served
    res = dpsql.remote(url, token).sql("SELECT clinic, region FROM clinics ORDER BY clinic")
    assert "exact: public tables only, no budget spent" in str(res) and "~" not in str(res)
    assert res.warnings == []


def test_cli_explain_as_json_with_server(served):
    _, token, url = served
    out = run("explain", COUNT, "--server", url, "--epsilon", "0.125", "--format", "json", token=token)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["epsilon"] == 0.125 and doc["outputs"][1]["name"] == "n" and "rewritten_sql" not in doc


def test_the_clipping_report_reaches_the_server_and_back(served):
    """report_clipping over the wire and from the CLI (issue 25, item 2): the same columns as in process, the
    report taken off into Result.clipping by the client, its explain lines, the footer's line."""
    db, token, url = served
    sql = "SELECT clinic, COUNT(*) AS n, SUM(cost) AS s FROM visits GROUP BY clinic"
    remote = dpsql.remote(url, token)
    res = remote.sql(sql, epsilon=0.5, report_clipping=True)
    assert res.columns == ["clinic", "n", "s"] and "clipping report" in str(res)
    report = res.clipping.to_pylist()
    assert [r["clinic"] for r in report] == ["a", "b", "c"] and all(r["fraction"] is None or 0 <= r["fraction"] <= 1 for r in report)
    assert remote.sql(sql, epsilon=0.5).clipping is None
    assert "clipping report (report_clipping)" in str(remote.explain(sql, epsilon=0.5, report_clipping=True))
    out = run("query", sql, "--server", url, "--epsilon", "0.25", "--report-clipping", token=token)
    assert out.exit_code == 0 and "clipping report (people whose rows or values" in out.stdout, out.output
