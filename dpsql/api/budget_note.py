"""What explain says about the budget (issue 22): the budget remaining before the query, in the
accountant's own terms (rho for zcdp, the delta at the total epsilon for pld) and as (epsilon, delta),
and whether the query would fit: the accountant's own check of the history with the query's releases
(``Ledger.preview``), never a subtraction, since under zcdp and pld remaining budgets do not add.

An analyst's note is about their own budget only; the total, shared by every analyst, is checked
when a query runs (what it has left is other analysts' business). A ledger that cannot be read now
(another policy's, locked, corrupt) leaves the plan as it is and says so with the error's code and a
reason without its path (what the server may show an analyst, as its error bodies do).

>>> from dpsql.accounting.budget import Budget
>>> print("\\n".join(BudgetNote(Budget(1.0, 1e-6, 0.25, 0.0), True).lines()))
  remaining before this query: epsilon 0.75, delta 1e-06 (basic: the total less the sum spent)
  this query would fit: yes
"""
from __future__ import annotations

from dataclasses import dataclass

from dpsql.accounting.budget import Budget
from dpsql.accounting.ledger import LedgerError
from dpsql.errors import AuthError, DpsqlError

# Why a ledger could not be read, by code: no path or file name (an analyst may see it).
REASONS = {"DP404": "the ledger belongs to another policy's privacy units",
           "DP405": "the ledger is locked by another process",
           "DP406": "the ledger is corrupt or not a dpsql ledger",
           "DP407": "no such analyst in the ledger"}


def _num(x: float) -> str:
    return f"{x:.6g}"


@dataclass(frozen=True)
class BudgetNote:
    """The budget before a query and whether the query would fit it; or why the ledger could not be read."""
    budget: Budget | None
    fits: bool | None
    problem: str | None = None    # the error's code and reason, when the ledger could not be read
    own: bool = False             # an analyst's own budget (the total is checked when the query runs)
    replay: tuple[str, ...] = ()  # which measurements replay free and what is charged (api/accountant.py)

    @classmethod
    def unreadable(cls, err: DpsqlError) -> "BudgetNote":
        return cls(None, None, f"{err.code}: {REASONS.get(err.code, 'the ledger cannot be read')}")

    def lines(self) -> list[str]:
        """Explain's lines, after the plan's own budget line."""
        if self.budget is None:
            return [f"  remaining budget: could not be read now ({self.problem}); the plan is unaffected"]
        b, whose = self.budget, "your " if self.own else ""
        if not b.at_delta:
            head = (f"  remaining before this query: {whose}epsilon {_num(b.remaining_epsilon)}, delta "
                    f"{_num(b.remaining_delta)} ({b.accountant}: the total less the sum spent)")
        else:
            terms = ", ".join(f"{k.replace('_', ' ')} {_num(v)}" for k, v in b.terms.items())
            head = (f"  remaining before this query: {whose}epsilon {_num(b.remaining_epsilon)} at delta "
                    f"{_num(b.total_delta)} (accountant {b.accountant}, its own terms: {terms})")
        verdict = "yes" if self.fits else ("no: running it would be refused (DP402, nothing spent) unless it "
                                           "repeats an answered query (replays are free)")
        scope = " (your own budget; the total shared by every analyst is checked when it runs)" if self.own else ""
        return [head, *self.replay, f"  this query would fit: {verdict}{scope}"]

    def as_dict(self) -> dict:
        """For the server's explain body: the figures (as ``budget_doc``'s), fits, or the problem."""
        if self.budget is None:
            return {"readable": False, "problem": self.problem}
        return {"readable": True, **self.budget.figures(), "fits": self.fits, "own": self.own}


def budget_note(ledger, plan, analyst: str | None, replay=None) -> BudgetNote:
    """What ``ledger`` says of ``plan``'s cost now, for ``analyst`` (None: the total); ``replay()``: the
    cost, releases and lines of its measurements released before (api/accountant.py ``replay_note``)."""
    try:
        priced = None if replay is None else replay()
        cost, releases, lines = priced if priced is not None else (ledger.cost(plan), plan.releases(), [])
        budget, fits = ledger.preview(cost, releases, analyst)
    except (LedgerError, AuthError) as err:
        return BudgetNote.unreadable(err)
    return BudgetNote(budget, fits, own=analyst is not None, replay=tuple(lines))
