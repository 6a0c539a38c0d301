"""What keeps one client from hurting the others: body size, slow clients, requests in flight.

* ``read_json``: a request body read with a size limit (413, DP422) and a deadline (408, DP423),
  parsed as one JSON object whose fields are checked against a schema (400, DP408).
* ``InFlight``: at most ``max_in_flight`` API requests at once (running or waiting for a worker
  thread); past that, 429 (DP421) at once, without reading the body.
* ``GuardedH11``: uvicorn's h11 protocol with a deadline on each request's head. uvicorn times out
  idle keep-alive connections but not a client that sends half a request line and waits
  (slowloris); such a connection is closed after ``head_timeout`` seconds. It costs the event
  loop nothing while it waits, so other clients are served meanwhile.

>>> check_fields({"sql": "SELECT 1", "epsilon": 1}, QUERY_FIELDS)["epsilon"]
1.0
>>> check_fields({"sql": "SELECT 1", "rng": 7}, QUERY_FIELDS)
Traceback (most recent call last):
...
dpsql.server.errors.RequestError: [DP408] unknown field 'rng' in the request body
"""
from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass

import anyio
from uvicorn.protocols.http.h11_impl import H11Protocol

from dpsql.errors import InvalidParameter
from dpsql.server.errors import RequestError


@dataclass(frozen=True)
class Limits:
    """The server's limits (``dpsql serve`` options)."""
    max_body: int = 1 << 20         # bytes of a request body
    body_timeout: float = 10.0      # seconds to receive a body once its head arrived
    head_timeout: float = 10.0      # seconds to receive a request's head (line and headers)
    workers: int = 4                # worker threads running queries (DuckDB runs one at a time anyway)
    max_in_flight: int = 64         # API requests running or waiting; more get 429


# Fields of a request body: name -> (kind, required). "number" accepts ints and floats, not booleans.
QUERY_FIELDS = {"sql": ("string", True), "epsilon": ("number", False), "delta": ("number", False),
                "ci": ("number", False), "fresh": ("boolean", False), "nonnegative": ("boolean", False)}
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
