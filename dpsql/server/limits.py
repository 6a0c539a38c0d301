"""What keeps one client from hurting the others: body size, slow clients, requests in flight, free
requests per analyst, a deadline per request.

* ``read_json``: a request body read with a size limit (413, DP422) and a deadline (408, DP423),
  parsed as one JSON object whose fields are checked against a schema (400, DP408).
* ``InFlight``: at most ``max_in_flight`` API requests at once (running or waiting for a worker
  thread); past that, 429 (DP421) at once, without reading the body. ``PerAnalyst``: at most
  ``per_analyst`` of them for one analyst (429, DP421), so one analyst cannot hold every worker.
* ``FreeRate``: free requests (explain, public-only queries, refusals, budget and history reads:
  everything but an answer charged to the budget) per analyst, a token bucket of
  ``free_per_minute`` with bursts of ``free_burst``; past it, 429 (DP424) with ``Retry-After``.
* ``Limits.deadline``: seconds a query (or an explain's read of a public table's keys) may hold the
  engine from the start of its turn; DuckDB is interrupted when they pass (DP425, 503; DP901 when a
  DP query was already charged).
* ``GuardedH11``: uvicorn's h11 protocol with a deadline on each request's head. uvicorn times out
  idle keep-alive connections but not a client that sends half a request line and waits
  (slowloris); such a connection is closed after ``head_timeout`` seconds. It costs the event
  loop nothing while it waits, so other clients are served meanwhile.

>>> check_fields({"sql": "SELECT 1", "epsilon": 1}, QUERY_FIELDS)["epsilon"]
1.0
>>> check_fields({"sql": "SELECT 1", "rng": 7}, QUERY_FIELDS)
Traceback (most recent call last):
...
dpsql.errors.RequestError: error[DP408]: unknown field 'rng' in the request body...
"""
from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass

import anyio
from uvicorn.protocols.http.h11_impl import H11Protocol

from dpsql.errors import InvalidParameter, RequestError


@dataclass(frozen=True)
class Limits:
    """The server's limits (``dpsql serve`` options)."""
    max_body: int = 1 << 20         # bytes of a request body
    body_timeout: float = 10.0      # seconds to receive a body once its head arrived
    head_timeout: float = 10.0      # seconds to receive a request's head (line and headers)
    workers: int = 8                # worker threads planning and running queries (DuckDB runs one at a time)
    max_in_flight: int = 64         # API requests running or waiting; more get 429
    per_analyst: int = 3            # of those, one analyst's
    deadline: float = 30.0          # seconds a request may hold the engine, from its turn (DP425/DP901)
    free_per_minute: float = 120.0  # free requests per analyst per minute (charged answers are not counted)
    free_burst: int = 60            # free requests in a burst (the console explains as you type)


# Fields of a request body: name -> (kind, required). "number" accepts ints and floats, not booleans.
QUERY_FIELDS = {"sql": ("string", True), "epsilon": ("number", False), "delta": ("number", False),
                "ci": ("number", False), "fresh": ("boolean", False), "nonnegative": ("boolean", False),
                "mechanism": ("string", False), "report_clipping": ("boolean", False)}
EXPLAIN_FIELDS = {k: v for k, v in QUERY_FIELDS.items() if k != "fresh"}


def check_fields(doc, fields: dict) -> dict:
    """The body's fields, checked: an object, no unknown field (trusted knobs such as ``rng`` or a
    ledger do not exist over the wire), each of its kind; ``null`` is "not given"."""
    if not isinstance(doc, dict):
        raise RequestError("DP408", "the request body must be a JSON object",
                               hint='for example {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.5}')
    for name in doc:
        if name not in fields:
            raise RequestError("DP408", f"unknown field {str(name)[:40]!r} in the request body",
                                   hint=f"the fields are: {', '.join(fields)}")
    out = {}
    for name, (kind, required) in fields.items():
        value = doc.get(name)
        if value is None:
            if required:
                raise RequestError("DP408", f"the request body needs {name!r} ({kind})")
            continue
        ok = {"string": isinstance(value, str),
              "boolean": isinstance(value, bool),
              "number": isinstance(value, (int, float)) and not isinstance(value, bool)}[kind]
        if not ok:
            raise RequestError("DP408", f"{name!r} must be a {kind}, got {type(value).__name__}")
        if kind == "number":
            value = float(value)
            if not math.isfinite(value):   # Python's json reads NaN and Infinity
                raise InvalidParameter("DP401", f"{name} must be a finite number")
        out[name] = value
    return out


async def read_json(receive_body, limits: Limits, content_type: str | None, length: str | None):
    """The request body as JSON, within the size limit and the deadline."""
    if content_type is None or content_type.split(";")[0].strip().lower() != "application/json":
        raise RequestError("DP408", "the request body must be JSON (Content-Type: application/json)")
    if length is not None and (not length.isdigit() or int(length) > limits.max_body):
        raise RequestError("DP422", f"the request body is larger than {limits.max_body} bytes")
    chunks, size = [], 0
    try:
        with anyio.fail_after(limits.body_timeout):
            async for chunk in receive_body():
                size += len(chunk)
                if size > limits.max_body:
                    raise RequestError("DP422", f"the request body is larger than {limits.max_body} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise RequestError("DP423", f"the request body did not arrive within {limits.body_timeout:g} s") from None
    try:
        return json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestError("DP408", f"the request body is not valid JSON: {str(e)[:80]}") from None
    except RecursionError:
        raise RequestError("DP408", "the request body is nested too deeply") from None


class InFlight:
    """A count of API requests being served; ``enter`` refuses past the limit (DP421)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.count = 0

    def enter(self) -> None:
        if self.count >= self.limit:
            raise RequestError("DP421", f"the server is busy ({self.limit} requests in flight)",
                               hint="retry in a moment; nothing was spent")
        self.count += 1   # one event loop: no lock needed

    def leave(self) -> None:
        self.count -= 1


class PerAnalyst:
    """A count of each analyst's requests in flight; ``enter`` refuses past the limit (DP421)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.count: dict[str, int] = {}

    def enter(self, analyst: str) -> None:
        if self.count.get(analyst, 0) >= self.limit:
            raise RequestError("DP421", f"you have {self.limit} request(s) in flight already",
                               hint="wait for an answer before sending more; nothing was spent")
        self.count[analyst] = self.count.get(analyst, 0) + 1   # one event loop: no lock needed

    def leave(self, analyst: str) -> None:
        self.count[analyst] -= 1
        if not self.count[analyst]:
            del self.count[analyst]


class FreeRate:
    """A token bucket per analyst: ``take`` one for each request (DP424 when none is left), ``refund``
    it when the request was an answer charged to the budget (which the budget limits already).

    >>> rate = FreeRate(per_minute=60, burst=2, clock=lambda: 0.0)
    >>> rate.take("a"); rate.take("a"); rate.take("a")
    Traceback (most recent call last):
    ...
    dpsql.errors.RequestError: error[DP424]: too many free requests (explain, public tables, refusals, reads): 60 a minute, bursts of 2...
    >>> rate.refund("a"); rate.take("a")
    """

    def __init__(self, per_minute: float, burst: int, clock=time.monotonic):
        self.rate, self.burst, self.clock = per_minute / 60.0, burst, clock
        self.buckets: dict[str, tuple[float, float]] = {}   # analyst -> (tokens, when)

    def _tokens(self, analyst: str) -> float:
        tokens, when = self.buckets.get(analyst, (float(self.burst), self.clock()))
        return min(float(self.burst), tokens + (self.clock() - when) * self.rate)

    def take(self, analyst: str) -> None:
        tokens = self._tokens(analyst)
        if tokens < 1:
            err = RequestError("DP424", f"too many free requests (explain, public tables, refusals, reads): "
                               f"{self.rate * 60:g} a minute, bursts of {self.burst}",
                               hint="retry after the Retry-After seconds; answers charged to your budget do not count")
            err.retry_after = max(1, math.ceil((1 - tokens) / self.rate))   # type: ignore[attr-defined]
            raise err
        self.buckets[analyst] = (tokens - 1, self.clock())

    def refund(self, analyst: str) -> None:
        self.buckets[analyst] = (min(float(self.burst), self._tokens(analyst) + 1), self.clock())


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head has not arrived in time."""
    head_timeout = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:   # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:   # a request's head arrived: the app has it now
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()   # the next request on this connection has its own deadline
        super().on_response_complete()   # (a pipelined request handled here disarms it again)

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()


def protocol(head_timeout: float) -> type[GuardedH11]:
    """The protocol class for uvicorn's ``http=`` with this deadline."""
    return type("GuardedH11", (GuardedH11,), {"head_timeout": head_timeout})
