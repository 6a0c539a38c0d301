"""Turns on one engine: one query at a time, shared fairly between analysts (issue 20, finding 4).

DuckDB runs one query at a time on a connection (its cursors would run several, but they do not see
the connection's TEMP tables, where dpsql keeps sources and key tables). A plain lock hands the engine
to whichever thread the OS wakes, so one analyst sending slow queries back to back could keep the
others waiting as long as they like. Here the waiters are served round robin by whom they work for (an
analyst's name; None for the owner): when a turn ends, the next goes to the waiting analyst served
least recently, and each analyst's own waiters go in arrival order. With a deadline on every turn
(the server's), a request waits at most one turn of each other analyst who has a request waiting,
whatever those analysts send.

Reentrant: the thread holding a turn may enter again (a query's bind, charge and run are one turn).
``with turns:`` takes a turn for the owner without a deadline.

>>> t = Turns()
>>> with t, t:   # reentrant
...     t.acquire("alice", timeout=0.01)   # another thread would wait; this one holds it already
True
>>> t.release()
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Hashable


class _Waiter:
    __slots__ = ("thread", "granted")

    def __init__(self, thread: int):
        self.thread = thread
        self.granted = False


class Turns:
    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._holder: int | None = None                       # the thread holding the turn
        self._depth = 0
        self._waiting: dict[Hashable, deque[_Waiter]] = {}    # by whom they work for, in arrival order
        self._served: dict[Hashable, int] = {}                # when each was last given a turn
        self._clock = 0

    def acquire(self, who: Hashable = None, timeout: float | None = None) -> bool:
        """Take a turn for ``who``, waiting at most ``timeout`` seconds (None: as long as it takes);
        False when the time ran out first."""
        me = threading.get_ident()
        with self._cond:
            if self._holder == me:
                self._depth += 1
                return True
            if self._holder is None and not self._waiting:
                self._give(me, who)
                return True
            waiter = _Waiter(me)
            self._waiting.setdefault(who, deque()).append(waiter)
            end = None if timeout is None else time.monotonic() + timeout
            while not waiter.granted:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    self._withdraw(who, waiter)
                    return False
                self._cond.wait(left)
            return True

    def release(self) -> None:
        with self._cond:
            if self._holder != threading.get_ident():
                raise RuntimeError("release of a turn this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._holder = None
                self._hand_over()

    def waiting(self) -> int:
        """How many requests wait for a turn."""
        with self._cond:
            return sum(len(q) for q in self._waiting.values())

    def __enter__(self) -> "Turns":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _give(self, thread: int, who: Hashable) -> None:
        self._holder, self._depth = thread, 1
        self._clock += 1
        self._served[who] = self._clock

    def _hand_over(self) -> None:
        """The next turn: the waiting analyst served least recently (never served: first), their
        oldest waiter."""
        if not self._waiting:
            return
        who = min(self._waiting, key=lambda w: self._served.get(w, 0))   # ties: the first to wait
        queue = self._waiting[who]
        waiter = queue.popleft()
        if not queue:
            del self._waiting[who]
        waiter.granted = True
        self._give(waiter.thread, who)
        self._cond.notify_all()

    def _withdraw(self, who: Hashable, waiter: _Waiter) -> None:
        queue = self._waiting[who]
        queue.remove(waiter)
        if not queue:
            del self._waiting[who]
