"""The analyst's client: ``dpsql.remote(url, token)`` speaks to ``dpsql serve`` over HTTP.

It has the in-process connection's ``sql()`` / ``explain()`` / ``budget`` and returns the same
``Result`` type (materialised once, read from the server's Arrow IPC stream, so types are exact).
Refusals raise the same ``DpsqlError`` subclasses with the same codes, messages, hints and caret
positions, rebuilt from the server's error body. What differs: ``result.plan`` and ``explain()``
are a ``RemotePlan`` (the plan's explain text, epsilon, delta and outputs with their expected error,
as the server sent them), not the server's ``Plan`` object; ``budget`` is this analyst's own.
The analyst's process never opens the data, the policy or the ledger; the token is the only secret.

The token: the ``token`` argument, else the ``DPSQL_TOKEN`` environment variable, else the first
line of the file ``$DPSQL_TOKEN_FILE`` (default ``~/.config/dpsql/token``).

>>> RemotePlan.from_doc({"epsilon": 0.5, "delta": 0, "text": "dpsql plan for: ...", "outputs": []}).epsilon
0.5
"""
from __future__ import annotations

import http.client
import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpsql import errors
from dpsql.accounting.budget import Budget, Charge
from dpsql.accounting.store import LedgerError
from dpsql.api.result import Result

ARROW_STREAM = "application/vnd.apache.arrow.stream"
TOKEN_FILE = Path("~/.config/dpsql/token")


@dataclass(frozen=True)
class RemotePlan:
    """A plan as the server described it: ``str(plan)`` is its explain text."""
    epsilon: float
    delta: float
    text: str
    outputs: tuple[dict, ...] = ()        # name, kind, expected_error, confidence
    public_only: bool = False
    rewritten_sql: str | None = field(default=None, compare=False)
    confidence: float | None = None       # the level of the answer's intervals, if asked for
    noisy: tuple[str, ...] | None = None  # the columns display marks noisy (None: not said, a stored answer)
    clipping: dict | None = None          # the clipping report's keys and errors (api/clipping.py Shape)

    @classmethod
    def from_doc(cls, doc: dict) -> "RemotePlan":
        noisy = doc.get("noisy")
        return cls(float(doc["epsilon"]), float(doc["delta"]), doc.get("text") or "",
                   tuple(doc.get("outputs") or ()), bool(doc.get("public_only")), doc.get("rewritten_sql"),
                   doc.get("ci"), None if noisy is None else tuple(noisy), doc.get("clipping"))

    def __str__(self) -> str:
        return self.text


def find_token(token: str | None = None) -> str:
    """The analyst's token: given, else $DPSQL_TOKEN, else the token file (see the module docstring)."""
    if token:
        return token
    if os.environ.get("DPSQL_TOKEN"):
        return os.environ["DPSQL_TOKEN"].strip()
    path = Path(os.environ.get("DPSQL_TOKEN_FILE") or TOKEN_FILE).expanduser()
    try:
        lines = path.read_text().split()
    except OSError:
        lines = []
    if not lines:
        raise errors.AuthError(
            "DP410", "no analyst token: pass token=, set DPSQL_TOKEN, or write it to " + str(path),
            hint="the data owner makes one with: dpsql analyst add NAME --epsilon E")
    return lines[0]


class Remote:
    """An analyst's connection to a dpsql server (see the module docstring)."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 300.0):
        if not url.startswith(("http://", "https://")):
            raise errors.InvalidParameter("DP401", f"the server URL must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self._token = find_token(token)
        self.timeout = timeout
        # A server on this machine is reached directly, never through an HTTP proxy from the environment.
        host = urllib.parse.urlsplit(self.url).hostname or ""
        direct = host in ("localhost", "127.0.0.1", "::1")
        self._opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if direct else []))

    def __repr__(self) -> str:   # never the token
        return f"<dpsql.Remote {self.url}>"

    def sql(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
            fresh: bool = False, ci: float | None = None, nonnegative: bool = True,
            mechanism: str | None = None, report_clipping: bool = False) -> Result:
        """Answer one query on the server, charged to this analyst's budget (``PrivateConnection.sql``)."""
        body = {"sql": sql, "epsilon": epsilon, "delta": delta, "ci": ci, "fresh": fresh, "nonnegative": nonnegative,
                **_mechanism(mechanism), **_report(report_clipping)}
        return self._result(self._call("POST", "/v1/query", body, sql=sql, arrow=True))

    def explain(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
                ci: float | None = None, nonnegative: bool = True, mechanism: str | None = None,
                report_clipping: bool = False) -> RemotePlan:
        """The plan the server would run, with its cost and expected errors; spends nothing."""
        body = {"sql": sql, "epsilon": epsilon, "delta": delta, "ci": ci, "nonnegative": nonnegative,
                **_mechanism(mechanism), **_report(report_clipping)}
        return RemotePlan.from_doc(json.loads(self._call("POST", "/v1/explain", body, sql=sql))["plan"])

    @property
    def budget(self) -> Budget:
        """This analyst's total, spent and remaining budget and their own history."""
        state = json.loads(self._call("GET", "/v1/budget"))
        history = json.loads(self._call("GET", "/v1/history"))["queries"]
        charges = tuple(Charge(id=q["id"], time=q["time"], sql=q["sql"], plan=q.get("plan") or "",
                               epsilon=q["epsilon"], delta=q["delta"], status=q["status"],
                               replays=q.get("replays") or 0) for q in history)
        def epsilon(pair: dict) -> float:   # null: no epsilon bounds it at that delta
            return math.inf if pair["epsilon"] is None else pair["epsilon"]
        at_delta = bool(state.get("at_delta"))
        return Budget(total_epsilon=state["total"]["epsilon"], total_delta=state["total"]["delta"],
                      spent_epsilon=epsilon(state["spent"]), spent_delta=state["spent"]["delta"],
                      queries=state["queries"], history=charges,
                      ledger=f"{self.url} (analyst {state['analyst']})", accountant=state.get("accountant", "basic"),
                      terms={k: math.inf if v is None else v for k, v in (state.get("terms") or {}).items()},
                      remaining=(epsilon(state["remaining"]), state["remaining"]["delta"]) if at_delta else None)

    def schema(self) -> dict:
        """The analyst-visible part of the policy: tables, columns, types, bounds, public keys, L, C."""
        return json.loads(self._call("GET", "/v1/schema"))

    def answer(self, charge_id: int) -> Result:
        """An answer released earlier to this analyst, again, at no cost, by its number in their own
        history (``budget.history[i].id``: 1, 2, 3 ..., not the ledger's id)."""
        return self._result(self._call("GET", f"/v1/history/{int(charge_id)}", arrow=True))

    def _result(self, data: bytes) -> Result:
        table = pa.ipc.open_stream(data).read_all()
        meta = table.schema.metadata or {}
        plan = RemotePlan.from_doc(json.loads(meta[b"dpsql.plan"]))
        # The server's warnings, made from its Plan: a RemotePlan has none of the Plan's parts to make them.
        return Result(table.replace_schema_metadata(None), plan, replayed=json.loads(meta[b"dpsql.replayed"]),
                      warnings=list(json.loads(meta.get(b"dpsql.warnings", b"[]"))))

    def _call(self, method: str, path: str, body: dict | None = None, *, sql: str | None = None,
              arrow: bool = False) -> bytes:
        headers = {"Authorization": f"Bearer {self._token}",
                   "Accept": ARROW_STREAM if arrow else "application/json"}
        data = None
        if body is not None:
            data = json.dumps({k: v for k, v in body.items() if v is not None}).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as e:
            raise rebuild_error(e.code, e.read(), sql) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:   # refused, reset, cut short
            reason = getattr(e, "reason", e)
            if data is not None and len(data) > 1 << 20:   # the server hangs up on a body past its limit
                reason = f"{reason} (while sending {len(data)} bytes; the server refuses bodies over its limit)"
            raise ConnectionError(f"cannot reach the dpsql server at {self.url}: {reason}") from None


def _class_of(doc: dict) -> type[errors.DpsqlError]:
    """The error's class: by the name the server sent, among dpsql's own; else by its code."""
    known = {c.__name__: c for c in vars(errors).values()
             if isinstance(c, type) and issubclass(c, errors.DpsqlError)}
    known.update(LedgerError=LedgerError)
    code = str(doc.get("code", "DP999"))
    if doc.get("type") in known:
        return known[doc["type"]]
    if code in ("DP403", "DP404", "DP405", "DP406"):
        return LedgerError
    if code == "DP402":
        return errors.BudgetExceeded
    return {"DP1": errors.UnsupportedConstruct, "DP2": errors.UnsupportedConstruct,
            "DP3": errors.UnsupportedConstruct, "DP5": errors.PolicyError, "DP9": errors.ExecutionError,
            "DP4": errors.InvalidParameter if code <= "DP401" else errors.RequestError}.get(code[:3], errors.DpsqlError)


def rebuild_error(status: int, body: bytes, sql: str | None) -> Exception:
    """The DpsqlError the server raised, from its error body (same class, code, message, hint, caret)."""
    try:
        doc: Any = json.loads(body)["error"]
        code, message = str(doc["code"]), str(doc["message"])
    except (ValueError, KeyError, TypeError):
        return ConnectionError(f"the dpsql server answered HTTP {status} without a dpsql error")
    cls = _class_of(doc)
    err = cls.__new__(cls)
    start, end = doc.get("start"), doc.get("end")
    located = sql is not None and isinstance(start, int) and start < len(sql)
    errors.DpsqlError.__init__(err, code, message, hint=doc.get("hint") or "", rule=doc.get("rule"),
                               sql=sql if located else None, start=start if located else None,
                               end=end if located else None)
    if isinstance(err, errors.BudgetExceeded):
        requested, remaining = doc.get("requested") or {}, doc.get("remaining")
        err.requested = (requested.get("epsilon", 0.0), requested.get("delta", 0.0))
        err.remaining = err.difference = None   # none: the shared total's figures are not the analyst's
        if isinstance(remaining, dict):
            err.remaining = (remaining.get("epsilon", 0.0), remaining.get("delta", 0.0))
            err.difference = (err.requested[0] - err.remaining[0], err.requested[1] - err.remaining[1])
    return err


def remote(url: str, token: str | None = None, *, timeout: float = 300.0) -> Remote:
    """Connect to a dpsql server as an analyst.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8765``.
        token: the analyst's token (default: ``$DPSQL_TOKEN``, else the token file).
        timeout: seconds to wait for one answer.
    Example:
        >>> an = dpsql.remote("http://127.0.0.1:8765", token="...")  # doctest: +SKIP
        >>> an.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=0.5).fetchall()  # doctest: +SKIP
    """
    return Remote(url, token, timeout=timeout)


def _report(report_clipping: bool) -> dict:
    """The body's ``report_clipping`` field, sent only when asked for (a server before issue 25 knows none)."""
    return {"report_clipping": True} if report_clipping else {}


def _mechanism(mechanism: str | None) -> dict:
    """The body's ``mechanism`` field, sent only when asked for (a server before issue 22 knows none)."""
    return {} if mechanism is None else {"mechanism": mechanism}
