"""The HTTP API over one owner's connection: analysts send SQL with a token, get noisy answers.

The server holds the data, the policy and the ledger; an analyst's request names only SQL and the
query's own parameters (``epsilon``, ``delta``, ``ci``, ``fresh``, ``nonnegative``, ``mechanism``): the trusted
knobs (a seeded generator, another ledger) do not exist here. Every ``/v1/`` request authenticates
its bearer token against the ledger (which keeps hashes only) and runs as that analyst, charged to
their budget and the total in one ledger transaction. Planning and DuckDB run in worker threads,
so the event loop keeps serving other clients; each analyst has a few requests in flight at most and a
rate of free requests, each turn on the engine a deadline (server/limits.py), and the engine's turns
go round robin between analysts (engines/turns.py): one analyst cannot starve another. Errors are ``{"error": {...}}`` bodies with a dpsql
code (``encode.error_body``); an unexpected exception is logged by type and place only (its message
could quote a row) and answered 500 DP999. Nothing here logs a token, an SQL text or a result.
Endpoints and shapes: README, "The HTTP API".
"""
from __future__ import annotations

import contextlib
import logging
import traceback
from functools import partial
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dpsql.errors import AuthError, DpsqlError, InternalError, RequestError
from dpsql.plan.model import Plan
from dpsql.server import encode
from dpsql.server.limits import EXPLAIN_FIELDS, QUERY_FIELDS, FreeRate, InFlight, Limits, PerAnalyst, check_fields, \
    read_json

log = logging.getLogger("dpsql.server")
STATIC = Path(__file__).parent / "static"
# The console is plain files from /static: no inline script, nothing from elsewhere, never framed.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                               "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
}
NO_CONSOLE = "<!doctype html><title>dpsql</title><p>dpsql server: the console is not installed; the API is at /v1/."


class _Server:
    """The state behind the endpoints: the owner's connection, the limits, the worker threads."""

    def __init__(self, db, limits: Limits):
        self.db = db
        self.limits = limits
        self.workers = anyio.CapacityLimiter(limits.workers)
        self.in_flight = InFlight(limits.max_in_flight)
        self.per_analyst = PerAnalyst(limits.per_analyst)
        self.free = FreeRate(limits.free_per_minute, limits.free_burst)
        # Built now, not at the first request: a kept answer the first asker waited for would tell the
        # next that someone asked (issue 20, finding 6). The policy never changes while serving.
        self.schema = encode.schema_doc(db.policy)

    async def work(self, fn: Callable, *args, **kwargs):
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self.workers)

    @contextlib.asynccontextmanager
    async def analyst(self, request: Request) -> AsyncIterator:
        """The analyst whose bearer token the request carries (401 DP407 otherwise; the same for a
        missing, malformed, unknown or revoked token), with one of their requests in flight (DP421)
        and one of their free requests taken (DP424; a handler refunds it for a charged answer)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > 512:
            raise AuthError("DP407", "a valid analyst token is needed (Authorization: Bearer <token>)",
                            hint="ask the data owner for a token: dpsql analyst add NAME --epsilon E")
        analyst = await self.work(self.db.analyst, token=token)
        self.per_analyst.enter(analyst.name)
        try:
            self.free.take(analyst.name)
            yield analyst
        finally:
            self.per_analyst.leave(analyst.name)



def _error(err: DpsqlError, status: int | None = None) -> Response:
    default, body = encode.error_body(err)
    status = status or default
    if err.code in ("DP900", "DP999") or status >= 500:
        log.warning("refused with %s (%s)", err.code, type(err).__name__)   # owner's log: no message (data)
    headers = {"Cache-Control": "no-store"}
    # DP422/DP423: no "Connection: close": uvicorn drains and drops the rest of the body, so the client
    # reads this answer (closing on unread data would reset the connection and lose it); the
    # protocol's head deadline ends a drain that never finishes (limits.GuardedH11).
    if err.code == "DP407":
        headers["WWW-Authenticate"] = "Bearer"
    if status in (429, 503):
        headers["Retry-After"] = str(getattr(err, "retry_after", 1))
    return Response(encode.dumps(body), status, headers, media_type="application/json")


def _json(doc, headers: dict | None = None) -> Response:
    return Response(encode.dumps(doc), 200, {"Cache-Control": "no-store", **(headers or {})},
                    media_type="application/json")


def endpoint(handler: Callable[[_Server, Request], Awaitable[Response]]):
    """An API endpoint: counted in flight, every error as a dpsql error body, nothing else escapes."""
    async def serve(request: Request) -> Response:
        server: _Server = request.app.state.server
        try:
            server.in_flight.enter()
        except DpsqlError as err:
            return _error(err)
        try:
            return await handler(server, request)
        except DpsqlError as err:
            return _error(err)
        except Exception as err:  # noqa: BLE001 - a bug: answer generically, log the place, not the message
            where = traceback.extract_tb(err.__traceback__)[-1]
            log.error("internal error %s at %s:%s", type(err).__name__, Path(where.filename).name, where.lineno)
            return _error(InternalError("DP999", "internal error"))
        finally:
            server.in_flight.leave()
    return serve


async def _body(server: _Server, request: Request, fields: dict) -> dict:
    doc = await read_json(request.stream, server.limits, request.headers.get("content-type"),
                          request.headers.get("content-length"))
    return check_fields(doc, fields)


def _answer(request: Request, table, plan: dict, budget: dict, replayed: bool, warnings: list[str]) -> Response:
    """JSON, or an Arrow IPC stream when the client asks for it."""
    if encode.ARROW_STREAM in request.headers.get("accept", ""):
        data, headers = encode.arrow_answer(table, plan, budget, replayed, warnings)
        return Response(data, 200, {"Cache-Control": "no-store", **headers}, media_type=encode.ARROW_STREAM)
    return _json(encode.answer_doc(table, plan, budget, replayed, warnings))


@endpoint
async def query(server: _Server, request: Request) -> Response:
    async with server.analyst(request) as analyst:
        args = await _body(server, request, QUERY_FIELDS)

        def run():
            result = analyst.sql(args.pop("sql"), **args, deadline=server.limits.deadline)
            return result, encode.plan_doc(result.plan), encode.budget_doc(analyst.totals, analyst.name)
        result, plan, budget = await server.work(run)
        if isinstance(result.plan, Plan) and not result.replayed:
            server.free.refund(analyst.name)   # charged to the budget: not free work
        # Encoded in a worker too: a public-only answer of a million rows takes seconds of Python.
        return await server.work(_answer, request, result.released(), plan, budget, result.replayed, result.warnings)


@endpoint
async def explain(server: _Server, request: Request) -> Response:
    async with server.analyst(request) as analyst:
        args = await _body(server, request, EXPLAIN_FIELDS)
        return _json({"plan": await server.work(
            lambda: encode.plan_doc(analyst.explain(args.pop("sql"), **args, deadline=server.limits.deadline)))})


@endpoint
async def budget(server: _Server, request: Request) -> Response:
    async with server.analyst(request) as analyst:
        return _json(await server.work(lambda: encode.budget_doc(analyst.totals, analyst.name)))


@endpoint
async def history(server: _Server, request: Request) -> Response:
    async with server.analyst(request) as analyst:
        return _json(await server.work(lambda: encode.history_doc(analyst.budget)))


@endpoint
async def history_item(server: _Server, request: Request) -> Response:
    """A released answer of this analyst's, again, free, by its number in their own history (1, 2, 3 ...:
    never the ledger's id, encode.numbered); a number they do not have is unknown (404)."""
    number = request.path_params["id"]
    async with server.analyst(request) as analyst:
        def find():
            state = analyst.budget
            charge = encode.numbered(state.history, number)
            found = None if charge is None else analyst.stored(charge.id)
            if found is None:
                raise RequestError("DP420", f"no released answer {number} in your history")
            table, level = found   # the intervals' level as the fresh answer had it: the same labels
            plan = {"epsilon": charge.epsilon, "delta": charge.delta, "text": charge.plan, "public_only": False,
                    "ci": level, "sql": charge.sql,
                    "outputs": [{"name": n, "kind": None, "expected_error": None, "confidence": None}
                                for n in table.column_names]}
            return _answer(request, table, plan, encode.budget_doc(state, analyst.name), True, [])
        return await server.work(find)


async def index(request: Request) -> Response:
    page = STATIC / "index.html"
    if page.is_file():
        return FileResponse(page, headers={"Cache-Control": "no-cache"})
    return HTMLResponse(NO_CONSOLE)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (unknown path or method) as dpsql error bodies."""
    status = getattr(exc, "status_code", 500)
    if status == 404:
        return _error(RequestError("DP420", f"no such endpoint or file: {request.url.path[:100]}"))
    return _error(RequestError("DP408", f"{request.method} is not allowed here"), 405)


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every response that does not set them itself."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                            if k.lower().encode() not in names]
                message = {**message, "headers": headers}
            await send(message)
        await self.app(scope, receive, with_headers)


@endpoint
async def schema(server: _Server, request: Request) -> Response:
    async with server.analyst(request):
        return _json(server.schema)


def create_app(db, *, limits: Limits | None = None, cors_origins: tuple[str, ...] = (),
               static_dir: Path = STATIC) -> Starlette:
    """The ASGI app over ``db`` (a ``dpsql.connect`` connection the server owns).

    Args:
        limits: body size, deadlines, worker threads, requests in flight (``Limits()`` by default).
        cors_origins: browser origins allowed to call the API from other pages; none by default
            (the console is served by the same origin and needs none).
    """
    routes = [Route("/v1/query", query, methods=["POST"]), Route("/v1/explain", explain, methods=["POST"]),
              Route("/v1/budget", budget), Route("/v1/schema", schema), Route("/v1/history", history),
              Route("/v1/history/{id:int}", history_item), Route("/", index)]
    if static_dir.is_dir():   # the console's files (none installed: / says so, /static/... is 404)
        routes.append(Mount("/static", StaticFiles(directory=static_dir), name="static"))
    middleware = [Middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                             allow_headers=["Authorization", "Content-Type", "Accept"])] if cors_origins else []
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: _http_error})
    app.state.server = _Server(db, limits or Limits())
    app.add_middleware(SecurityHeaders)
    return app

