"""Run the server: the owner's connection opened once, uvicorn on 127.0.0.1 unless told otherwise.

uvicorn's access log names the method, path and status of each request (never a header, so never
a token, nor a body); dpsql's own log (``dpsql.server``) names codes and error types only.
"""
from __future__ import annotations

import uvicorn

from dpsql.api.connection import connect
from dpsql.server.app import create_app
from dpsql.server.limits import Limits, protocol

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def config(db, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, limits: Limits | None = None,
           cors_origins: tuple[str, ...] = (), log_level: str = "info", access_log: bool = True) -> uvicorn.Config:
    """The uvicorn configuration serving ``db`` (an open ``dpsql.connect`` connection)."""
    limits = limits or Limits()
    app = create_app(db, limits=limits, cors_origins=cors_origins)
    return uvicorn.Config(app, host=host, port=port, http=protocol(limits.head_timeout), lifespan="off",
                          log_level=log_level, access_log=access_log, server_header=False,
                          proxy_headers=False, timeout_keep_alive=5, limit_concurrency=4 * limits.max_in_flight)


def serve(data, policy: str, ledger: str | None = None, *, host: str = DEFAULT_HOST,
          port: int = DEFAULT_PORT, limits: Limits | None = None, cors_origins: tuple[str, ...] = (),
          log_level: str = "info") -> None:
    """Open the data (a database path opened read-only, None for the policy's sources, or a Spark session:
    what ``dpsql.connect`` takes), the policy and the ledger, and serve until interrupted."""
    db = connect(data, policy=policy, ledger=ledger)
    try:
        uvicorn.Server(config(db, host=host, port=port, limits=limits, cors_origins=cors_origins,
                              log_level=log_level)).run()
    finally:
        db.close()
