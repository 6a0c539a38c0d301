"""dpsql: differentially private SQL over DuckDB.

>>> import duckdb, dpsql
>>> con = duckdb.connect(); _ = con.execute("CREATE TABLE people AS SELECT range AS id, range % 2 AS flag FROM range(100)")
>>> db = dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 1}, "tables": {"people": {"privacy_unit": "id",
...     "columns": {"flag": {"keys": [0, 1]}}}}})
>>> db.sql("SELECT flag, COUNT(*) AS n FROM people GROUP BY flag", epsilon=0.5).columns
['flag', 'n']
"""
from dpsql.accounting.budget import Budget
from dpsql.api.connection import Answers, PrivateConnection, Result, Statement, connect
from dpsql.errors import BudgetExceeded, DpsqlError
from dpsql.plan.model import Plan
from dpsql.client.remote import Remote, remote
from dpsql.api.randomize import randomize
# The function takes the package's name on the face: dpsql.publish(spec, ...) publishes; its modules are
# imported as ``from dpsql.publish.spec import ...`` (``import dpsql.publish.spec`` would find the function).
from dpsql.publish.release import publish

__all__ = ["connect", "remote", "randomize", "PrivateConnection", "Remote", "Result", "Plan", "Budget", "DpsqlError",
           "BudgetExceeded", "Statement", "Answers", "publish"]
__version__ = "0.1.0"
