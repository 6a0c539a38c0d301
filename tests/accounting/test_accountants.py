"""The accountants (issue 22, item 4): basic, zcdp and pld compose a ledger's history of releases.
Their conversions against published values and dp-accounting's own; the pld accountant against
dp-accounting's composition of mixed sequences; how many 0.01-epsilon counts fit (1, 1e-6) under each;
the ledger storing each charge's releases and composing through the privacy maps only."""
from __future__ import annotations

import ast
import json
import math
import shutil
import sqlite3
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

import dpsql
from dpsql import testing
from dpsql.accounting.accountants import ACCOUNTANTS
from dpsql.accounting.budget import Cost
from dpsql.accounting.composition import Charged
from dpsql.accounting.conversions import rho_for, zcdp_epsilon
from dpsql.accounting.ledger import Ledger
from dpsql.accounting.store import MEMORY
from dpsql.cli import commands as cli
from dpsql.errors import BudgetExceeded, PolicyError
from dpsql.mechanisms.base import MECHANISMS, PRIVACY_MAPS
from dpsql.mechanisms.releases import Release, Sensitivity
from dpsql.policy import load_policy
from tests.support.paths import DATA, ROOT
from tests.support.server import ThreadServer, call

TOTAL = Cost.of(1, 1e-6)
POLICY = {"budget": {"epsilon": 1.0, "delta": 1e-6},
          "tables": {"people": {"privacy_unit": "person_id",
                                "columns": {"sex": {"keys": ["F", "M"]}, "age": {"type": "int"}}}}}
COUNT = "SELECT COUNT(*) AS n FROM people"


def policy_doc(accountant: str, epsilon: float = 1.0, delta: float = 1e-6) -> dict:
    return {**POLICY, "budget": {"epsilon": epsilon, "delta": delta, "accountant": accountant}}


def policy(accountant: str, epsilon: float = 1.0, delta: float = 1e-6):
    return load_policy(policy_doc(accountant, epsilon, delta))


def laplace(scale, sensitivity=1) -> Release:
    mechanism = next(iter(MECHANISMS))   # the noise every plan draws today; the test names no mechanism either
    return Release(mechanism, Sensitivity(1, Fraction(sensitivity)), Fraction(scale))


def composed(name: str, charges) -> object:
    accountant = ACCOUNTANTS[name]
    return accountant, accountant.compose(accountant.empty(), charges)


# --- conversions -------------------------------------------------------------------------------------

def test_the_zcdp_conversion_is_dp_accountings_own_at_its_best_order():
    # dp-accounting's RDP accountant converts with the same bound (CKS 2020 Prop. 12, its
    # compute_epsilon); a rho-zCDP event is RDP rho * alpha at every order. Ours searches alpha
    # continuously, so it is at most theirs on a dense grid, and above it by no more than the grid misses.
    from dp_accounting.rdp import rdp_privacy_accountant as rdp
    orders = [1 + 10 ** (k / 100) for k in range(-300, 401)]
    for rho in (1e-4, 0.005, 0.0244, 0.5, 2.0):
        for delta in (1e-5, 1e-6, 1e-9):
            theirs, _ = rdp.compute_epsilon(orders, [rho * a for a in orders], delta)
            ours = zcdp_epsilon(rho, delta)
            assert theirs - 1e-4 * theirs <= ours <= theirs + 1e-9, (rho, delta, ours, theirs)


def test_the_zcdp_conversion_against_published_values_and_bun_steinke():
    # The figures (computed with dp-accounting): 100 (1,000) Gaussian counts of sensitivity 1
    # within (1, 1e-6) under zCDP need sd 45.3 (143); each is rho = 1 / (2 sd^2) of rho_for(1, 1e-6).
    rho = rho_for(1.0, 1e-6)
    assert round(math.sqrt(100 / (2 * rho)), 1) == 45.3
    assert round(math.sqrt(1000 / (2 * rho))) == 143
    assert zcdp_epsilon(rho, 1e-6) <= 1.0
    # Bun-Steinke 2016 Prop. 1.3, rho + 2 sqrt(rho ln(1/delta)), is looser everywhere; by this much.
    gains = {}
    for rho, delta in ((0.0244, 1e-6), (0.005, 1e-6), (0.5, 1e-5), (2.0, 1e-9)):
        classic = rho + 2 * math.sqrt(rho * math.log(1 / delta))
        gains[(rho, delta)] = round(classic / zcdp_epsilon(rho, delta), 3)
    assert gains == {(0.0244, 1e-6): 1.184, (0.005, 1e-6): 1.234, (0.5, 1e-5): 1.121, (2.0, 1e-9): 1.051}


def test_rho_for_inverts_the_conversion_rounded_down():
    for epsilon, delta in ((1.0, 1e-6), (0.3, 1e-5), (5.0, 1e-9), (0.01, 1e-3)):
        rho = rho_for(epsilon, delta)
        assert zcdp_epsilon(rho, delta) <= epsilon < zcdp_epsilon(rho * 1.001, delta)


# --- the accountants against dp-accounting -------------------------------------------------------------

class HandGaussian:
    """A Gaussian privacy map built by hand (the discrete Gaussian's is another engineer's): rho =
    Delta_2^2 / (2 sigma^2) (Bun-Steinke 2016 Prop. 1.6), its PLD dp-accounting's, pessimistic."""

    def rho(self, release):
        return release.sensitivity.l2_squared / (2 * release.scale ** 2), Fraction(0)

    def pld(self, release):
        from dp_accounting.pld import privacy_loss_distribution as pld
        return pld.from_gaussian_mechanism(float(release.scale), sensitivity=math.sqrt(release.sensitivity.l2_squared),
                                           value_discretization_interval=1e-4)


@pytest.fixture
def mixed(monkeypatch):
    """A mixed history: Laplace counts and sums, partition selection's (0, delta), an old charge kept as
    its (epsilon, delta), and Gaussian releases (a map added for the test)."""
    monkeypatch.setitem(PRIVACY_MAPS, "hand gaussian", HandGaussian())
    gauss = Release("hand gaussian", Sensitivity(2, Fraction(1)), Fraction(30))
    return ([Charged(Decimal("0.05"), Decimal(0), (laplace(20),))] * 7
            + [Charged(Decimal("0.1"), Decimal("1E-8"), (laplace(50, 5), Release.approximate(0, Fraction(1, 10**8))))] * 3
            + [Charged(Decimal("0.2"), Decimal("1E-7"), None)] * 2
            + [Charged(Decimal("0.1"), Decimal(0), (gauss,))] * 5)


def test_pld_is_dp_accountings_composition_of_every_release(mixed):
    from dp_accounting.pld import common, privacy_loss_distribution as pld
    accountant, state = composed("pld", mixed[:6] + mixed[6:9] + mixed[9:])   # in batches, as a ledger reads them
    # dp-accounting alone, one release after another, in reverse order.
    theirs = None
    for charge in reversed(mixed):
        for r in charge.releases or ():
            one = (HandGaussian().pld(r) if r.mechanism == "hand gaussian" else
                   pld.from_discrete_laplace_mechanism(float(1 / r.scale), sensitivity=int(r.sensitivity.l1),
                                                      value_discretization_interval=1e-4)
                   if r.mechanism in MECHANISMS else
                   pld.from_privacy_parameters(common.DifferentialPrivacyParameters(float(r.epsilon), float(r.delta)),
                                               value_discretization_interval=1e-4))
            theirs = one if theirs is None else theirs.compose(one)
        if charge.releases is None:   # recorded without releases: its own guarantee, nothing cheaper
            one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(float(charge.epsilon),
                                                                                   float(charge.delta)),
                                              value_discretization_interval=1e-4)
            theirs = one.compose(theirs)
    for delta in (1e-6, 1e-5, 1e-3):
        mine = state.tight.distribution.get_epsilon_for_delta(delta)
        assert mine == pytest.approx(theirs.get_epsilon_for_delta(delta), rel=1e-6, abs=1e-9)
    spent = accountant.tight.report(state.tight, TOTAL).spent[0]
    assert spent == pytest.approx(theirs.get_epsilon_for_delta(1e-6), rel=1e-6)
    assert accountant.tight.fits(state.tight, Cost.of(spent * 1.001, 1e-6))
    assert not accountant.tight.fits(state.tight, Cost.of(spent * 0.999, 1e-6))


def test_zcdp_adds_each_release_rho_and_approximate_delta(mixed):
    accountant, state = composed("zcdp", mixed)
    rho = (7 * Fraction(1, 20) ** 2 / 2 + 3 * Fraction(1, 10) ** 2 / 2 + 2 * Fraction(1, 5) ** 2 / 2
           + 5 * Fraction(2, 2 * 30 ** 2))
    assert Fraction(state.tight.rho) >= rho > Fraction(state.tight.rho) - Fraction(1, 10**30)
    assert state.tight.delta == Decimal("2.3E-7")   # 3 selections' 1e-8 and 2 old charges' 1e-7
    report = accountant.tight.report(state.tight, TOTAL)
    assert report.spent[0] == pytest.approx(zcdp_epsilon(float(rho), 1e-6 - 2.3e-7), rel=1e-12)
    assert accountant.report(state, TOTAL).spent[0] == 1.55, "the sum, 1.55, is the smaller bound here"
    assert report.terms["rho"] == pytest.approx(float(rho), rel=1e-15)
    assert report.terms["approximate_delta"] == pytest.approx(2.3e-7, rel=1e-15)


@pytest.mark.parametrize("name", ["zcdp", "pld"])
def test_few_charges_fit_as_basic_sums_them_and_many_fit_more(name):
    # One 0.1 charge alone converts through zCDP to epsilon 0.53 at 1e-6; the sum of a few is the
    # tighter bound then, and both are valid, so the history fits when either does.
    accountant = ACCOUNTANTS[name]
    charge = Charged(Decimal("0.1"), Decimal(0), (laplace(10),))
    state, fitted = accountant.empty(), 0
    for _ in range(100):   # bounded: a broken accountant that fits everything fails, never hangs
        state = accountant.compose(state, [charge])
        if not accountant.fits(state, Cost.of(0.3, 1e-6)):
            break
        fitted += 1
    assert fitted == 3
    assert accountant.fits(accountant.compose(accountant.empty(), [charge] * 3), Cost.of(0.3, 0)), \
        "an analyst's budget without delta: basic's sum"


@pytest.mark.parametrize("name", ACCOUNTANTS)
def test_deltas_add_across_charges_under_every_accountant(name):
    book = Ledger(MEMORY, policy(name))
    for _ in range(2):
        book.reserve(Cost.of(0.1, 4e-7), sql="q", plan="p")    # kept between the two charges
    assert book.budget().spent_delta == (8e-7 if name == "basic" else 1e-6)
    with pytest.raises(BudgetExceeded):
        book.reserve(Cost.of(0.1, 4e-7), sql="q", plan="p")    # 1.2e-6 of delta: over 1e-6 whatever composes it


# --- how many 0.01-epsilon counts fit (1, 1e-6) ---------------------------------------------------------

@pytest.fixture(scope="module")
def people(tmp_path_factory):
    path = tmp_path_factory.mktemp("people") / "people.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT range AS person_id, "
                "CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex, range % 7 AS age FROM range(500)")
    con.close()
    return str(path)


def test_the_connection_stores_what_the_plan_releases(people, tmp_path):
    ledger, sql = str(tmp_path / "l.sqlite"), "SELECT age, COUNT(*) AS n FROM people GROUP BY age"
    db = dpsql.connect(people, policy=policy_doc("pld"), ledger=ledger)
    db.sql(sql, epsilon=0.2, delta=1e-7, fresh=True)    # private keys: partition selection's delta too
    plan = db.explain(sql, epsilon=0.2, delta=1e-7)
    db.close()
    with sqlite3.connect(ledger) as con:
        stored, epsilon, delta = con.execute("SELECT releases, epsilon, delta FROM charges").fetchone()
    assert [Release.from_json(doc) for doc in json.loads(stored)] == list(plan.releases())
    # Under pld a query with a delta gets the discrete Gaussian (what pld composes best), which keeps
    # part of the delta for itself: selection's share is a (0, delta') guarantee with delta' < 1e-7.
    selection = [r for r in plan.releases() if r.sensitivity is None]
    assert len(selection) == 1 and selection[0].epsilon == 0 and 0 < selection[0].delta < Fraction(1, 10 ** 7)
    assert {r.mechanism for r in plan.releases() if r.sensitivity is not None} == {"discrete Gaussian"}
    assert (Decimal(epsilon), Decimal(delta)) == (Decimal("0.2"), Decimal("1E-7")), "charged its own guarantee"


@pytest.mark.parametrize("name, fits", [("basic", 100), ("zcdp", 487), ("pld", 562)])
def test_how_many_001_counts_fit_a_total_of_1_and_1e6(people, name, fits):
    db = dpsql.connect(people, policy=policy_doc(name), ledger=MEMORY)
    plan = db.explain(COUNT, epsilon=0.01)
    db.close()
    book = Ledger(MEMORY, policy(name))
    answered = 0
    with pytest.raises(BudgetExceeded) as refused:
        while answered <= 1000:
            book.reserve(book.cost(plan), sql=COUNT, plan="p", releases=plan.releases())
            answered += 1
    assert answered == fits
    budget = book.budget()
    assert budget.accountant == name and budget.queries == fits and budget.remaining_epsilon >= 0
    if name != "basic":
        assert f"under {name} accounting" in refused.value.message and budget.at_delta


# --- policies ----------------------------------------------------------------------------------------

def test_the_policy_names_its_accountant_basic_when_absent():
    assert load_policy(POLICY).accountant == "basic" and policy("pld").accountant == "pld"
    with pytest.raises(PolicyError, match="budget.accountant"):
        policy("renyi")
    with pytest.raises(PolicyError, match="needs budget.delta > 0"):
        policy("zcdp", delta=0)


# --- the accounting layer names no mechanism --------------------------------------------------------------

def test_the_accounting_layer_composes_through_the_privacy_maps_only():
    for path in sorted((ROOT / "dpsql" / "accounting").glob("*.py")):
        tree = ast.parse(Path(path).read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                assert not any(name.lower() in node.value.lower() for name in MECHANISMS), (path.name, node.value)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpsql.mechanisms"):
                assert node.module in ("dpsql.mechanisms.base", "dpsql.mechanisms.releases"), path.name
                assert {a.name for a in node.names} <= {"PRIVACY_MAPS", "Release"}, path.name


# --- old ledgers, and a change of accountant ----------------------------------------------------------

V2_LEDGER, V2_POLICY = DATA / "ledger_v2.sqlite", DATA / "ledger_v2_policy.yaml"
# tests/data/ledger_v2.sqlite's charges (made by format 2 code, before accountants): the owner's 0.25,
# (0.1, 1e-7), a public query at 0 and a reserved 0.0625; analyst alice's 0.125 and a failed 0.05.
V2_CHARGES = [("0.25", "0"), ("0.1", "1E-7"), ("0", "0"), ("0.125", "0"), ("0.05", "0"), ("0.0625", "0")]


def v2_under(tmp_path, accountant: str | None) -> Ledger:
    path = tmp_path / "v2.sqlite"
    shutil.copy(V2_LEDGER, path)
    doc = yaml.safe_load(V2_POLICY.read_text())
    if accountant is not None:
        doc["budget"]["accountant"] = accountant
    return Ledger(str(path), load_policy(doc))


@pytest.mark.parametrize("name", [None, *ACCOUNTANTS])
def test_a_format_2_ledger_keeps_its_meaning_under_each_accountant(tmp_path, name):
    book = v2_under(tmp_path, name)
    budget, alice = book.budget(), book.budget("alice")
    history = book.policy_history()
    book.close()
    # Each old charge composes as the (epsilon, delta) it was charged at: its releases were not recorded.
    accountant = ACCOUNTANTS[name or "basic"]
    old = [Charged(Decimal(e), Decimal(d), None) for e, d in V2_CHARGES]
    expected = accountant.report(accountant.compose(accountant.empty(), old), Cost.of(1, 1e-6))
    assert (budget.spent_epsilon, budget.spent_delta) == expected.spent and budget.accountant == (name or "basic")
    assert [c.epsilon for c in budget.history] == [float(e) for e, _ in V2_CHARGES]
    # A few charges: their sum (0.5875; alice's 0.175) is the tightest bound but under pld, which
    # composes the same guarantees a hair tighter (it spends some of the total's delta slack).
    for spent, summed in ((budget.spent_epsilon, 0.5875), (alice.spent_epsilon, 0.175)):
        assert summed * (1 - 1e-4) < spent <= summed if name == "pld" else spent == summed
    assert alice.total_delta == 1e-6
    with sqlite3.connect(tmp_path / "v2.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM charges WHERE releases IS NULL").fetchone()[0] == 6
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == "dpsql-ledger/4"
        for statement in ("UPDATE charges SET releases = '[]'", "UPDATE policies SET accountant = 'pld'"):
            with pytest.raises(sqlite3.IntegrityError):   # what a charge released, and the accountant, never change
                con.execute(statement)
    # Under its own policy nothing is recorded; another accountant is a recorded change of policy.
    assert [p.accountant for p in history] == ["basic"] + ([name] if name not in (None, "basic") else [])


def test_an_old_charge_is_never_composed_as_anything_cheaper_than_its_guarantee():
    from dp_accounting.pld import privacy_loss_distribution as pld
    guarantee = PRIVACY_MAPS[Release.approximate(Fraction(1, 10), 0).mechanism].pld(Release.approximate(Fraction(1, 10), 0))
    # Epsilon-0.1 noise of sensitivity 2 (its loss takes the values -0.1, 0 and 0.1), known to cost less:
    # an old charge of epsilon 0.1 composes as the worst case any 0.1-DP release could be, not as this.
    noise = pld.from_discrete_laplace_mechanism(0.05, sensitivity=2, value_discretization_interval=1e-4)
    for epsilon in (0.0, 0.05, 0.09):
        assert guarantee.get_delta_for_epsilon(epsilon) > noise.get_delta_for_epsilon(epsilon)


def test_basic_to_pld_recomposes_the_history_and_never_undercuts_it(people, tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    db = dpsql.connect(people, policy=policy_doc("basic"), ledger=ledger)
    for _ in range(20):
        db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=0.05, fresh=True)
    with pytest.raises(BudgetExceeded):
        db.sql(COUNT, epsilon=0.05, fresh=True)
    releases = db.explain("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=0.05).releases()
    db.close()
    book = Ledger(ledger, policy("pld"))
    budget = book.budget()
    pld = ACCOUNTANTS["pld"]
    prefixes = [pld.compose(pld.empty(), [Charged(Decimal("0.05"), Decimal(0), releases)] * n) for n in range(1, 21)]
    # Recomposed from what each charge released, stored at the time, as dp-accounting composes it.
    assert (budget.spent_epsilon, budget.spent_delta) == pld.report(prefixes[-1], TOTAL).spent
    assert budget.accountant == "pld" and 0.5 < budget.spent_epsilon < 1.0, budget
    # No history is stated cheaper than any of its parts, nor any prefix cheaper than a shorter one.
    spent = [pld.report(p, TOTAL).spent[0] for p in prefixes]
    assert spent == sorted(spent) and spent[0] >= 0.05 * (1 - 1e-3)
    book.reserve(Cost.of(0.05, 0), sql=COUNT, plan="p", releases=releases)   # room again, by the tighter bound
    assert [p.accountant for p in book.policy_history()] == ["basic", "pld"]
    book.close()


# --- where the budget shows: dpsql budget, db.budget, the server and its client ----------------------------

def test_the_budget_shows_in_the_accountants_terms_and_as_epsilon_at_delta(people, tmp_path):
    ledger, policy_file = str(tmp_path / "l.sqlite"), tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(policy_doc("zcdp")))
    db = dpsql.connect(people, policy=str(policy_file), ledger=ledger)
    for _ in range(40):
        db.sql(COUNT, epsilon=0.02, fresh=True)
    budget = db.budget
    # 40 x 0.02: rho 0.008 (a hair less: each scale is rounded up), epsilon 0.6 at 1e-6 by CKS 2020,
    # under their sum 0.8: the figure stated.
    assert budget.accountant == "zcdp" and budget.at_delta and 0.00799 < budget.terms["rho"] <= 0.008
    assert budget.spent_epsilon == zcdp_epsilon(budget.terms["rho"], 1e-6) < 0.8 and budget.spent_delta == 1e-6
    assert budget.remaining_epsilon == pytest.approx(1 - budget.spent_epsilon, abs=1e-15)
    runner = CliRunner()
    text = runner.invoke(cli.main, ["budget", "--ledger", ledger])
    assert text.exit_code == 0, text.output
    assert "accountant zcdp: spent and remaining above are epsilons at delta 1e-06" in text.stdout
    assert f"rho {budget.terms['rho']:.12g}" in text.stdout
    doc = json.loads(runner.invoke(cli.main, ["budget", "--ledger", ledger, "--format", "json"]).stdout)
    assert (doc["accountant"], doc["at_delta"], doc["spent"]["epsilon"]) == ("zcdp", True, budget.spent_epsilon)
    assert set(doc["terms"]) == {"rho", "rho_total", "rho_remaining", "approximate_delta"}
    token = testing.ledger(db).add_analyst("alice", 1.0, 1e-6)
    with ThreadServer(db) as server:
        remote = dpsql.remote(server.url, token)
        remote.sql(COUNT, epsilon=0.05)
        status, body = call(server.url, "GET", "/v1/budget", token=token)
        mine = remote.budget
    db.close()
    assert status == 200 and (body["accountant"], body["at_delta"]) == ("zcdp", True)
    assert body["spent"]["epsilon"] == 0.05 and body["terms"]["rho"] == pytest.approx(0.00125, rel=1e-3)
    assert (mine.accountant, mine.spent_epsilon, mine.remaining_epsilon) == ("zcdp", 0.05, body["remaining"]["epsilon"])


def test_a_move_to_a_looser_accountant_finds_the_history_past_the_total_and_charges_nothing_more(people, tmp_path):
    db = dpsql.connect(people, policy=policy_doc("pld"), ledger=MEMORY)
    releases = db.explain(COUNT, epsilon=0.01).releases()
    db.close()
    path = str(tmp_path / "l.sqlite")
    first = Ledger(path, policy("pld"))
    for _ in range(150):    # past basic's 100, within pld's 562
        first.reserve(Cost.of(0.01, 0), sql=COUNT, plan="p", releases=releases)
    book = Ledger(path, policy("basic"))     # records the change: basic is in force for every writer
    budget = book.budget()
    assert (budget.accountant, budget.spent_epsilon, budget.remaining_epsilon) == ("basic", 1.5, -0.5)
    for writer in (book, first):   # first kept its pld composition: it composes again under basic
        with pytest.raises(BudgetExceeded):
            writer.reserve(Cost.of(0.01, 0), sql=COUNT, plan="p", releases=releases)
    assert book.budget().queries == 150 and [p.accountant for p in book.policy_history()] == ["pld", "basic"]
    book.close()
    first.close()
    shown = CliRunner().invoke(cli.main, ["ledger", "history", "--ledger", path]).stdout.splitlines()
    assert shown[0].split()[:7] == ["#", "time", "kind", "epsilon", "delta", "accountant", "changes"]
    assert [line.split()[5:7] for line in shown[2:4]] == [["pld", "(created)"], ["basic", "budget.accountant"]]


@pytest.mark.parametrize("name, largest", [("zcdp", 0.5), ("pld", 0.7)])
def test_preview_is_the_accountants_own_check_not_a_subtraction(tmp_path, name, largest):
    """What explain asks (``Ledger.preview``): after 20 Gaussian counts at (0.2, 1e-8) the remaining
    epsilon at the total's delta is 0.15 (zcdp) or 0.22 (pld), yet a query of epsilon 0.5 (0.7) fits,
    because its rho (its curve) adds, not its epsilon; the charge agrees, and preview writes nothing."""
    from dpsql.mechanisms.base import DISCRETE_GAUSSIAN
    from dpsql.mechanisms.losses import Loss
    one = Sensitivity(1, Fraction(1))

    def count(epsilon):
        return (Release(DISCRETE_GAUSSIAN.name, one, DISCRETE_GAUSSIAN.calibrate(one, Loss.approximate(epsilon, 1e-8))),)
    path = tmp_path / "ledger.sqlite"
    book = Ledger(path, policy(name))
    assert book.preview(Cost.of(0.2, 1e-8), count(0.2)) == (book.totals(), True) and not path.exists()
    for _ in range(20):
        book.reserve(Cost.of(0.2, 1e-8), sql="q", plan="p", releases=count(0.2))
    left = book.totals().remaining_epsilon
    before = path.read_bytes()
    answers = {e: book.preview(Cost.of(e, 1e-8), count(e)) for e in (largest, largest + 0.1)}
    assert path.read_bytes() == before and book.totals().queries == 20
    assert answers[largest][0] == book.totals() and left < largest - 0.25
    assert answers[largest][1] is True and answers[largest + 0.1][1] is False
    with pytest.raises(BudgetExceeded):
        book.reserve(Cost.of(largest + 0.1, 1e-8), sql="q", plan="p", releases=count(largest + 0.1))
    book.reserve(Cost.of(largest, 1e-8), sql="q", plan="p", releases=count(largest))
    book.close()
