"""A spinner on stderr for commands that take more than a second, only when stderr is a terminal
(scripts and pipes see nothing extra)."""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import IO, Iterator

DELAY = 1.0   # seconds before the spinner appears: quick queries never show it


@contextlib.contextmanager
def spinner(message: str, *, stream: IO[str] | None = None, delay: float = DELAY) -> Iterator[None]:
    """Show ``message`` with a spinner from ``delay`` seconds on, until the block ends."""
    stream = sys.stderr if stream is None else stream
    if not getattr(stream, "isatty", lambda: False)():
        yield
        return
    from rich.console import Console
    status = Console(file=stream, force_terminal=True).status(message)
    lock = threading.Lock()
    done: list[bool] = []   # the block ended: a late timer must not start the spinner

    def start() -> None:
        with lock:
            if not done:
                status.start()

    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            done.append(True)
            status.stop()
