"""A real dpsql server on the loopback address for the server and remote tests: in a thread of this
process (uvicorn.Server), or as a ``dpsql serve`` subprocess that a test may SIGKILL; plus the
fixture database as a file and a tiny HTTP client."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import uvicorn
import yaml

import dpsql
from dpsql.server.limits import Limits
from dpsql.server.run import config
from tests.support.fixture import POLICY, make_database
from tests.support.paths import ROOT


def database_files(directory: Path, policy: dict | None = None) -> tuple[Path, Path, Path]:
    """The fixture database (tests/support/fixture.py) written to a file, its policy as YAML, and a ledger path beside them."""
    db_path, policy_path = directory / "data.duckdb", directory / "policy.yaml"
    con = make_database()
    con.execute(f"ATTACH '{db_path}' AS f")
    con.execute("COPY FROM DATABASE memory TO f")
    con.close()
    policy_path.write_text(yaml.safe_dump(policy or POLICY))
    return db_path, policy_path, directory / "ledger.sqlite"


def owner(directory: Path, policy: dict | None = None):
    """The owner's connection over the files (for adding analysts and reading the ledger)."""
    db_path, policy_path, ledger = database_files(directory, policy)
    return dpsql.connect(str(db_path), policy=str(policy_path), ledger=str(ledger)), db_path, policy_path, ledger


class ThreadServer:
    """uvicorn serving ``db`` in a thread of this process, on a free loopback port."""

    def __init__(self, db, limits: Limits | None = None, **kwargs):
        self.server = uvicorn.Server(config(db, port=0, limits=limits, log_level="warning", **kwargs))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "ThreadServer":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProcessServer:
    """``dpsql serve`` as a subprocess (its output, the access log included, kept for the log tests)."""

    def __init__(self, db_path: Path, policy_path: Path, ledger: Path, *extra: str, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-c", "from dpsql.cli import main; main()", "serve", "--db", str(db_path),
                     "--policy", str(policy_path), "--ledger", str(ledger), "--port", str(self.port), *extra]
        self.stderr_path = Path(str(ledger) + f".{self.port}.log")

    def start(self) -> "ProcessServer":
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(self.args, cwd=ROOT, env=env, stdout=self.stderr, stderr=self.stderr)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.log()
            with contextlib.suppress(OSError):
                if call(self.url, "GET", "/v1/budget", token="x")[0] == 401:
                    return self
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.stderr.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()

    def log(self) -> str:
        self.stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def __enter__(self) -> "ProcessServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def call(url: str, method: str, path: str, body=None, *, token: str | None = None, headers: dict | None = None,
         raw: bytes | None = None, timeout: float = 60) -> tuple[int, dict | bytes]:
    """(status, JSON body or bytes) of one request; HTTP errors are returned, not raised."""
    head = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        head.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(url + path, data=data, method=method, headers=head)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, payload, kind = response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        status, payload, kind = e.code, e.read(), e.headers.get("content-type", "")
    return status, json.loads(payload) if kind.startswith("application/json") else payload


__all__ = ["database_files", "owner", "ThreadServer", "ProcessServer", "call", "free_port"]
