"""A spinner on stderr for commands that take more than a second, only when stderr is a terminal
(scripts and pipes see nothing extra; stdout is never touched)."""
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
    from rich.live import Live
    from rich.spinner import Spinner
    # No redirection: rich would otherwise send what the command prints to stdout into stderr.
    live = Live(Spinner("dots", text=message), console=Console(file=stream, force_terminal=True), transient=True,
                redirect_stdout=False, redirect_stderr=False, refresh_per_second=12.5)
    lock = threading.Lock()
    done: list[bool] = []   # the block ended: a late timer must not start the spinner

    def start() -> None:
        with lock:
            if not done:
                live.start()

    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            done.append(True)
            live.stop()
