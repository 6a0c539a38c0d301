"""The query console (dpsql/server/static/) in a real headless Chromium against a real dpsql server.

An analyst logs in with a token, sees what a query would cost and how far off each output may be
before spending anything, runs it, reads the table with its intervals and the chart with its error
bars, watches the budget go down, opens a stored answer from the history, and reads a refusal with
its caret under the offending column. Server strings are shown as text, never as HTML.

Needs Debian's ``chromium`` (/usr/bin/chromium; ``.ci/run`` installs it) and Playwright for Python
(the ``dev`` extra), driven at that binary: Playwright's own browser downloads are never used.
The default run (about 25 s) keeps the main story, the refusal, HTML as text, a wrong token and
what a log out leaves for the next analyst; the rest is ``-m slow`` (an answer arriving after log out,
a stored answer in the editor, the history's entries, a column's decimals, chart text at three widths,
and axe-core's accessibility check: 0 violations).
"""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from dpsql import testing
from dpsql.server import encode
from tests.support.fixture import POLICY
from tests.support.server import ThreadServer, call, owner

CHROMIUM = os.environ.get("DPSQL_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BUDGET = 3.0
GROUPED = "SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex"
TIMEOUT_MS = 20_000
MIN_CHART_FONT_PX = 11   # chart text as drawn on the screen, at any width the page gives a chart

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server on a free loopback port over the test database; alice has a budget of 3."""
    db, *_ = owner(tmp_path_factory.mktemp("console"))
    alice = testing.ledger(db).add_analyst("alice", BUDGET)
    with ThreadServer(db) as server:
        yield db, alice, server.url
    db.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright   # the dev extra; a missing module is a failure

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh tab (its own sessionStorage) that fails the test on any script error (HTTP errors are
    expected: refusals come as 4xx answers, which Chromium also reports on the console)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text)
           if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    yield tab
    context.close()
    assert not errors, errors


@pytest.fixture
def console(served, page):
    """A tab logged in as alice, the console shown."""
    log_in(page, served[2], served[1])
    page.wait_for_selector("#console:not([hidden])")
    return page


def log_in(page, url: str, token: str) -> None:
    page.goto(url + "/")
    page.fill("#token", token)
    page.click("#login-form button[type=submit]")


def spent(db) -> float:
    return db.analyst("alice").budget.spent_epsilon


def meter(page) -> float:
    return page.eval_on_selector("#budget-meter", "m => m.value")


def number(text: str) -> float:
    return float(text.replace(",", ""))


def test_explain_run_table_chart_budget_and_history(served, page):
    db, alice, url = served
    log_in(page, url, alice)
    page.wait_for_selector("#analyst:text('alice')")
    start = BUDGET - spent(db)
    page.wait_for_function(f"document.getElementById('budget-meter').value === {start}")

    # Explain before spending: the cost and each output's expected error, as the user types.
    page.fill("#sql", GROUPED)
    page.wait_for_selector("#cost-value:text('ε 0.5, δ 0')")
    expected = {o["name"]: o for o in encode.plan_doc(db.explain(GROUPED, 0.5, ci=0.95))["outputs"]}
    rows = page.eval_on_selector_all("#outputs tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    shown = {name: error for name, _, error in rows}
    assert set(shown) == {"sex", "n", "avg_income"}
    assert shown["sex"] == "exact (group key)"
    error = re.fullmatch(r"± ([\d,.]+) at 95%", shown["n"])
    assert error and number(error[1]) == pytest.approx(expected["n"]["expected_error"], rel=1e-5)
    assert spent(db) == BUDGET - start, "explaining spent budget"

    # Run (Ctrl+Enter): the table with intervals beside the values.
    page.press("#sql", "Control+Enter")
    page.wait_for_selector("#result-table tbody tr")
    assert spent(db) == pytest.approx(BUDGET - start + 0.5)
    headers = page.eval_on_selector_all("#result-table th", "hs => hs.map(h => h.textContent)")
    assert headers == ["sex", "n [95% interval]", "avg_income [95% interval]"]
    covers = page.eval_on_selector_all("#result-table th .ci-head", "hs => hs.map(h => h.title)")
    assert covers and all("noise around the bounded value" in c and "not what bounding removed" in c for c in covers)
    charge = call(url, "GET", "/v1/history", token=alice)[1]["queries"][-1]
    answer = call(url, "GET", f"/v1/history/{charge['id']}", token=alice)[1]
    cells = page.eval_on_selector_all("#result-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert len(cells) == len(answer["rows"]) == 2
    for row, (sex, n, n_lo, n_hi, *_) in zip(cells, answer["rows"]):
        assert row[0] == sex and row[1] == f"{n:,} [{n_lo:,}, {n_hi:,}]"

    # The chart: one per numeric output, a bar per group, whiskers from the interval columns.
    assert page.locator("#chart svg.chart").count() == 2
    assert "interval, of the noise around the bounded value" in page.text_content("#chart-caption")
    assert page.locator("#chart rect.bar").count() == 4 and page.locator("#chart .errorbar").count() == 4
    widths = page.eval_on_selector_all("#chart svg.chart:first-child rect.bar", "bs => bs.map(b => b.width.baseVal.value)")
    counts = [row[1] for row in answer["rows"]]
    assert widths[1] / widths[0] == pytest.approx(counts[1] / counts[0], rel=0.02)

    # The budget meter went down by what was spent; the history lists the query.
    assert meter(page) == pytest.approx(start - 0.5)
    assert "ε 2.5 of 3 left" in page.text_content("#budget-text")
    page.wait_for_selector(f"#history .history-item:has-text('{GROUPED[:30]}')")

    # A stored answer from the history: the same rows again, nothing spent.
    before = spent(db)
    page.fill("#sql", "")
    page.click("#history .history-item")
    page.wait_for_selector(f"#result-note:text('Stored answer #{charge['id']}')")
    again = page.eval_on_selector_all("#result-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert [r[0] for r in again] == [r[0] for r in cells] and spent(db) == before

    # Logging out forgets the token and leaves nothing of this analyst's on the page.
    page.click("#logout")
    page.wait_for_selector("#login:not([hidden])")
    assert page.evaluate("sessionStorage.getItem('dpsql.token')") is None
    assert page.locator("#result-table tr, #history li, #chart svg").count() == 0


def test_a_refusal_shows_its_code_hint_and_caret_and_spends_nothing(served, console):
    db, page = served[0], console
    before = spent(db)
    page.fill("#sql", "SELECT sex,\n       name\nFROM people GROUP BY sex")

    # Explain already says it would be refused, with the caret.
    page.wait_for_selector("#explain-error .refusal .code:text('DP202')")
    page.click("#run-button")
    page.wait_for_selector("#result-error .refusal")
    assert page.text_content("#result-error .code") == "DP202"
    assert "unknown column 'name'" in page.text_content("#result-error .message")
    assert "did you mean" in page.text_content("#result-error .hint")
    excerpt = page.text_content("#result-error pre.excerpt").split("\n")
    source = next(line for line in excerpt if line.startswith("2 |"))
    caret = next(line for line in excerpt if "^" in line)
    assert caret.index("^") == source.index("name") and caret.count("^") == len("name")
    font = page.eval_on_selector("#result-error pre.excerpt", "e => getComputedStyle(e).fontFamily")
    assert "mono" in font.lower()
    assert spent(db) == before and meter(page) == pytest.approx(BUDGET - before)


def test_server_strings_are_text_never_html(console):
    page = console
    page.fill("#sql", 'SELECT COUNT(*) FROM "<img src=x id=injected>"')
    page.click("#run-button")
    page.wait_for_selector("#result-error .refusal")
    assert "<img src=x id=injected>" in page.text_content("#result-error .refusal")
    assert page.locator("#injected").count() == 0 and page.locator("#result-error img").count() == 0


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text and the login
def test_a_query_over_the_budget_is_flagged_before_and_refused_with_DP402(served, console):
    db, page = served[0], console
    before = spent(db)
    page.fill("#epsilon", "100")
    page.fill("#sql", "SELECT COUNT(*) AS n FROM people")
    page.wait_for_selector("#cost.over")
    page.click("#run-button")
    page.wait_for_selector("#result-error .code:text('DP402')")
    assert "exceeded" in page.text_content("#result-error .message") and spent(db) == before


def test_a_wrong_token_gets_a_clear_login_error(served, page):
    url = served[2]
    log_in(page, url, "dpsql_not-a-real-token")
    page.wait_for_selector("#login-error:text('DP407')")
    assert "not accepted" in page.text_content("#login-error")
    assert page.is_hidden("#console") and page.evaluate("sessionStorage.getItem('dpsql.token')") is None


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text and the login
def test_the_page_fits_a_narrow_window(served, browser):
    db, alice, url = served
    context = browser.new_context(viewport={"width": 360, "height": 740})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    try:
        log_in(tab, url, alice)
        tab.fill("#sql", "SELECT state, COUNT(*) AS n FROM people GROUP BY state")
        tab.click("#run-button")
        tab.wait_for_selector("#chart rect.bar")
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 360, f"the page scrolls sideways: {width}px wide"
    finally:
        context.close()


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text and the login
def test_the_tables_panel_shows_what_may_be_queried_and_inserts_names(console):
    page = console
    page.click("#tables summary:has-text('people')")
    columns = dict(line.split(" ", 1) for line in page.eval_on_selector_all(
        "#tables details[open] .columns li", "ls => ls.map(l => l.textContent)"))
    assert columns["income"] == "double · bounds [0, 1,000]" and columns["sex"].endswith("keys: F, M")
    assert "identifier" in columns["ssn"]
    assert "public" in page.text_content("#tables li:has(summary:has-text('clinics')) summary")
    page.fill("#sql", "SELECT COUNT(*) FROM ")
    page.click("#tables details[open] .insert-table button")
    assert page.input_value("#sql") == "SELECT COUNT(*) FROM people"
    page.wait_for_selector("#cost-value")   # inserting explains, like typing


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text and the login
def test_a_token_revoked_mid_session_returns_to_the_login(served, page):
    db, _, url = served
    carol = testing.ledger(db).add_analyst("carol", 1)
    log_in(page, url, carol)
    page.wait_for_selector("#analyst:text('carol')")
    page.fill("#sql", "SELECT COUNT(*) AS n FROM people")
    page.wait_for_selector("#cost-value")   # explained while the token was good
    testing.ledger(db).revoke_analyst("carol")
    page.click("#run-button")
    page.wait_for_selector("#login-error:text('no longer accepted')")
    assert page.is_hidden("#console") and page.evaluate("sessionStorage.getItem('dpsql.token')") is None
    assert db.analyst("carol").budget.spent_epsilon == 0


def test_the_budget_under_a_composing_accountant_is_an_epsilon_at_delta_and_its_terms(tmp_path, page):
    # Under pld the sum of costs no longer decides whether a query fits: the meter shows the epsilon
    # left at the total's delta and pld's own figure, and the cost line pld's own check (explain's).
    db, *_ = owner(tmp_path, {**POLICY, "budget": {**POLICY["budget"], "accountant": "pld"}})
    token = testing.ledger(db).add_analyst("carol", 1.0, 1e-6)
    with ThreadServer(db) as server:
        db.analyst("carol").sql(GROUPED, epsilon=0.5)
        log_in(page, server.url, token)
        page.wait_for_selector("#budget-text:has-text('pld accounting')")
        text = page.text_content("#budget-text")
        assert "ε 0.5 of 1 left at δ 0.000001 (pld accounting, delta at total epsilon 0)" in text, text
        assert meter(page) == pytest.approx(0.5)
        page.fill("#sql", GROUPED)
        page.wait_for_selector("#cost:has-text('at δ 0.000001 (pld accounting) left: it fits.')")
        assert "more than your budget" not in page.text_content("#cost")
        page.fill("#epsilon", "0.75")
        page.wait_for_selector("#cost.over")   # 0.5 + 0.75 composes past 1 under pld too
        assert "Run would be refused (DP402)" in page.text_content("#cost")
    db.close()


# --- issue 25, item 12: what one analyst leaves for the next, the history, precision, charts ------

def cells(page) -> list[list[str]]:
    return page.eval_on_selector_all("#result-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")


def headers(page) -> list[str]:
    return page.eval_on_selector_all("#result-table th", "hs => hs.map(h => h.textContent)")


def as_new_analyst(served, page, name: str) -> None:
    """``page`` logged in as a new analyst ``name`` with a budget of 2: a history of their own."""
    db, _, url = served
    log_in(page, url, testing.ledger(db).add_analyst(name, 2))
    page.wait_for_selector(f"#analyst:text('{name}')")


def test_after_log_out_nothing_of_the_analyst_is_shown_or_explained_for_the_next(served, page):
    db, _, url = served
    book = testing.ledger(db)
    first, second = book.add_analyst("jack", 2), book.add_analyst("kate", 2)
    mine = "SELECT state, COUNT(*) AS jacks_count FROM people GROUP BY state"
    log_in(page, url, first)
    page.wait_for_selector("#analyst:text('jack')")
    page.fill("#sql", mine)
    page.fill("#epsilon", "0.25")
    page.wait_for_selector("#cost-value")
    page.click("#run-button")
    page.wait_for_selector("#history .history-item")
    page.click("#logout")
    page.wait_for_selector("#login:not([hidden])")
    assert page.input_value("#sql") == "" and page.input_value("#epsilon") == "0.5"
    explained: list[str] = []
    page.on("request", lambda r: explained.append(r.post_data or "") if r.url.endswith("/v1/explain") else None)
    page.fill("#token", second)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#analyst:text('kate')")
    page.wait_for_selector("#history li.muted")   # kate's (empty) history has arrived
    assert page.input_value("#sql") == "" and page.is_hidden("#explain-body") and page.is_hidden("#result-body")
    assert "jacks_count" not in page.inner_text("body") and "jack" not in page.inner_text("body")
    assert not any("jacks_count" in body for body in explained), explained


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text, the login and log out
def test_an_answer_arriving_after_log_out_is_shown_to_no_one(served, page):
    db, _, url = served
    book = testing.ledger(db)
    first, second = book.add_analyst("liam", 2), book.add_analyst("mona", 2)
    held: list = []
    page.route("**/v1/query", lambda route: held.append(route))   # liam's answer waits until mona is in
    log_in(page, url, first)
    page.wait_for_selector("#analyst:text('liam')")
    page.fill("#sql", "SELECT COUNT(*) AS liams_count FROM people")
    page.click("#run-button")
    page.wait_for_selector("#status:text('Running…')")
    page.click("#logout")
    page.fill("#token", second)   # in the same page: liam's request is still open
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#analyst:text('mona')")
    assert not page.is_disabled("#run-button")
    with page.expect_response("**/v1/query") as answered:
        held[0].continue_()
    answered.value.finished()
    page.evaluate("new Promise(done => setTimeout(done, 300))")   # the page has read and dropped it
    assert page.is_hidden("#result-body") and "liams_count" not in page.inner_text("body")
    assert page.text_content("#analyst") == "mona"


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text, the login and log out
def test_a_stored_answer_shows_its_query_in_the_editor_with_the_labels_of_a_fresh_one(served, page):
    as_new_analyst(served, page, "nina")
    earlier = "SELECT sex, COUNT(*) AS n_earlier FROM people GROUP BY sex"
    page.fill("#sql", earlier)
    page.fill("#ci", "0.9")
    page.click("#run-button")
    page.wait_for_selector("#result-table th:has-text('n_earlier')")
    fresh = headers(page), cells(page)
    assert fresh[0] == ["sex", "n_earlier [90% interval]"]
    page.fill("#sql", "SELECT COUNT(*) AS n_later FROM people")
    page.fill("#ci", "0.95")
    page.click("#run-button")
    page.wait_for_selector("#result-table th:has-text('n_later')")
    page.click("#history .history-item:has-text('n_earlier')")
    page.wait_for_selector("#result-note:text('Stored answer #1 ')")
    assert (headers(page), cells(page)) == fresh
    assert page.input_value("#sql") == earlier and page.input_value("#ci") == "0.9"
    assert page.input_value("#epsilon") == "0.5"
    page.wait_for_selector("#plan-text:has-text('n_earlier')", state="attached")   # the preview is of that query


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text, the login and log out
def test_history_entries_show_their_number_time_and_enough_sql_to_tell_them_apart(served, page):
    as_new_analyst(served, page, "omar")
    common = "SELECT state, COUNT(*) AS n, AVG(income) AS avg_income, SUM(income) AS total FROM people WHERE age > "
    queries = [common + "30 GROUP BY state", common + "40 GROUP BY state"]
    for n, sql in enumerate(queries, 1):
        page.fill("#sql", sql)
        page.click("#run-button")
        page.wait_for_selector(f"#history li:nth-child({n}) .history-item")
    items = page.eval_on_selector_all("#history .history-item", """bs => bs.map(b => {
        const sql = b.querySelector('.sql');
        return {meta: b.querySelector('.meta').textContent, text: sql.textContent, title: sql.title,
                cut: sql.scrollHeight > sql.clientHeight + 1 || sql.scrollWidth > sql.clientWidth + 1};
    })""")
    assert [i["title"] for i in items] == queries[::-1]   # newest first; the whole SQL as the tooltip
    assert [i["cut"] for i in items] == [False, False], items   # shown whole: they differ on the page
    assert items[0]["meta"].startswith("#2 · ") and items[1]["meta"].startswith("#1 · ")
    assert all(re.search(r"\d{4}, \d\d:\d\d:\d\d", i["meta"]) for i in items), items   # date and time


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text, the login and log out
def test_numbers_in_a_column_have_the_same_decimals(console):
    page = console
    doc = {"columns": ["g", "v", "v_ci_low", "v_ci_high", "k"], "types": ["string", "double", "double", "double", "int64"],
           "rows": [["a", 1234.5678, 1200.25, 1300, 7], ["b", 2.5, -0.125, 5.0625, 1234567]],
           "plan": {"outputs": [{"name": "g", "kind": "key"}]}}
    shown = page.evaluate("""doc => import('/static/results.js').then(m => {
        const table = document.createElement('table');
        table.append(...m.tableParts(doc, m.layout(doc), '95% '));
        return [...table.tBodies[0].rows].map(r => [...r.cells].map(c => c.textContent));
    })""", doc)
    assert shown == [["a", "1,234.57 [1,200.25, 1,300.00]", "7"], ["b", "2.50 [-0.13, 5.06]", "1,234,567"]]
    # And a real answer: every number of a column (values and intervals) with one number of decimals.
    page.fill("#sql", "SELECT state, AVG(income) AS avg_income, COUNT(*) AS n FROM people GROUP BY state")
    page.click("#run-button")
    page.wait_for_selector("#result-table th:has-text('avg_income')")
    for column in zip(*cells(page)):
        numbers = re.findall(r"-?\d+(?:,\d{3})*(?:\.\d+)?", " ".join(column))
        decimals = {len(x.split(".")[1]) if "." in x else 0 for x in numbers}
        assert len(decimals) <= 1, column


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text, the login and log out
@pytest.mark.parametrize("width", [1400, 1200, 360])
def test_chart_text_is_readable_however_many_charts_stand_side_by_side(served, browser, width):
    db, alice, url = served
    context = browser.new_context(viewport={"width": width, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    try:
        log_in(tab, url, alice)
        tab.fill("#sql", "SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income, SUM(income) AS total "
                         "FROM people GROUP BY sex")
        tab.click("#run-button")
        tab.wait_for_selector("#chart svg.chart:nth-child(3)")
        sizes = tab.eval_on_selector_all("#chart svg.chart text", """ts => ts.map(t =>
            t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize))""")
        assert len(sizes) > 12 and min(sizes) >= MIN_CHART_FONT_PX, (width, min(sizes))
    finally:
        context.close()


@pytest.mark.slow   # the default run keeps the main story, the refusal, HTML as text, the login and log out
def test_axe_finds_no_accessibility_violations(served, console):
    axe = Path(importlib.util.find_spec("axe_playwright_python").origin).parent / "axe.min.js"   # the dev extra
    page = console
    page.fill("#sql", GROUPED)
    page.click("#run-button")
    page.wait_for_selector("#chart svg.chart")
    page.wait_for_selector("#history .history-item")
    page.click("#explain details summary")
    page.click("#tables summary")
    page.evaluate(axe.read_text())

    def violations(state: str) -> None:
        found = page.evaluate("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)")
        assert found == [], (state, [(v["id"], v["help"], [n["target"] for n in v["nodes"]]) for v in found])
    violations("the console with an answer, its chart, the full plan and a table open")
    page.click("#logout")
    page.wait_for_selector("#login:not([hidden])")
    violations("the login page after log out")
