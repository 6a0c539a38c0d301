"""The accountants a policy may choose (``budget: {accountant: basic | zcdp | pld}``), by name; what
each is and does: accounting/composition.py.

>>> from decimal import Decimal
>>> from dpsql.accounting.budget import Cost
>>> c = Charged(Decimal("0.5"), Decimal(0), None)
>>> a = ACCOUNTANTS["basic"]
>>> a.fits(a.compose(a.empty(), [c, c]), Cost.of(1, 0)), a.fits(a.compose(a.empty(), [c, c, c]), Cost.of(1, 0))
(True, False)
"""
from __future__ import annotations

from dpsql.accounting.basic import BASIC
from dpsql.accounting.composition import Accountant, Charged, Report
from dpsql.accounting.pld import PLD
from dpsql.accounting.zcdp import ZCDP
from dpsql.policy.model import ACCOUNTANTS as NAMES

# The names the policy accepts (policy/model.py, below this layer), in its order.
_ALL: tuple[Accountant, ...] = (BASIC, ZCDP, PLD)
ACCOUNTANTS: dict[str, Accountant] = {a.name: a for a in sorted(_ALL, key=lambda a: NAMES.index(a.name))}

__all__ = ["ACCOUNTANTS", "Accountant", "Charged", "Report"]
