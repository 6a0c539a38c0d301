"""Screenshots of the query console for docs/: a real server on the demo data, driven in headless Chromium.

    python3 tools/screenshots.py [--out docs] [--chromium /usr/bin/chromium]

Builds the demo dataset (``dpsql demo``'s) in a temporary directory, adds an analyst, serves it on a
free loopback port, and drives the console as an analyst would: log in, a few queries, then a
refusal. Writes ``console.png`` (explain, result table, chart, budget, history) and
``console-refusal.png``. Needs Debian's chromium and Playwright for Python (the ``dev`` extra).
The noise is real, so the numbers differ from one run to the next.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # the working tree's dpsql (and its static files), not an installed copy

import dpsql  # noqa: E402
from dpsql.accounting.ledger import Ledger  # noqa: E402
from dpsql.cli.demo import POLICY_NAME, build_dataset  # noqa: E402
from dpsql.policy import load_policy  # noqa: E402
from dpsql.server.run import config  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EARLIER = ["SELECT sex, COUNT(*) AS n FROM people GROUP BY sex",
           "SELECT clinic, AVG(cost) AS avg_cost FROM visits GROUP BY clinic"]
SHOWN = "SELECT state,\n       COUNT(*) AS n,\n       AVG(income) AS avg_income\nFROM people\nGROUP BY state"
REFUSED = "SELECT state, ssn, COUNT(*) AS n\nFROM people\nGROUP BY state"


def serve(db) -> tuple[uvicorn.Server, str]:
    server = uvicorn.Server(config(db, port=0, log_level="warning", access_log=False))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


def run_query(page, sql: str, epsilon: str = "0.5") -> None:
    page.fill("#epsilon", epsilon)
    page.fill("#sql", sql)
    page.wait_for_selector("#cost-value")
    page.click("#run-button")
    page.wait_for_selector("#status:text('Done.')")


def shoot(url: str, token: str, out: Path, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
        page.set_default_timeout(30_000)
        page.goto(url + "/")
        page.fill("#token", token)
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#console:not([hidden])")
        for sql in EARLIER:
            run_query(page, sql)
        run_query(page, SHOWN, "1")
        page.click("#tables summary:has-text('people')")
        page.fill("#sql", SHOWN)              # explain again: the panel shows this query's cost
        page.wait_for_selector("#cost-value")
        page.wait_for_timeout(800)
        page.screenshot(path=str(out / "console.png"), full_page=True)

        page.fill("#sql", REFUSED)
        page.click("#run-button")
        page.wait_for_selector("#result-error .refusal")
        page.wait_for_selector("#explain-error .refusal")
        page.set_viewport_size({"width": 1000, "height": 900})
        page.locator(".work").screenshot(path=str(out / "console-refusal.png"))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db_path = build_dataset(Path(tmp) / "demo.duckdb")
        ledger, policy = Path(tmp) / "ledger.sqlite", Path(tmp) / POLICY_NAME
        token = Ledger(str(ledger), load_policy(str(policy))).add_analyst("alice", 5)   # `dpsql analyst add`
        db = dpsql.connect(str(db_path), policy=str(policy), ledger=str(ledger))
        server, url = serve(db)
        try:
            shoot(url, token, args.out, args.chromium)
        finally:
            server.should_exit = True
            db.close()
    print(f"wrote {args.out / 'console.png'} and {args.out / 'console-refusal.png'}")


if __name__ == "__main__":
    main()
