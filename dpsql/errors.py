"""One error hierarchy: every refusal has a stable code and, when it came from the SQL, a position.

>>> err = UnsupportedConstruct("DP102", "window functions are not supported", sql="SELECT 1", start=0, end=5)
>>> err.code, err.line, err.col
('DP102', 1, 1)
"""
from __future__ import annotations

from dpsql.hints import HINTS

EXIT_CODES = {"refused": 2, "setup": 3, "failed": 1}   # the CLI's exit codes; 0 is an answer
_SETUP_CODES = ("DP403", "DP404", "DP405", "DP406", "DP410")


def first_line(err: BaseException) -> str:
    """An exception's message, its first line only (an engine's error), or its type's name when it has none."""
    text = str(err)
    return text.splitlines()[0] if text else type(err).__name__


def error_kind(code: str) -> str:
    """What an error code means for whoever runs dpsql: the one mapping from codes to exit codes.

    >>> error_kind("DP304"), error_kind("DP402"), error_kind("DP502"), error_kind("DP405"), error_kind("DP900")
    ('refused', 'refused', 'setup', 'setup', 'failed')
    """
    if code.startswith("DP5") or code in _SETUP_CODES:
        return "setup"
    return "failed" if code.startswith("DP9") else "refused"


class DpsqlError(Exception):
    """Base class of every error dpsql raises on purpose.

    Attributes:
        code: stable identifier such as ``DP304``; documented in ``grammar/README.md``.
        message: what was refused and why, naming the offending column or function.
        hint: what the user can do instead: the site's own, else the code's (``dpsql/hints.py``).
        sql, start, end: the SQL text and the 0-based inclusive character span of the offending node.
    """

    code = "DP999"
    default_rule: str | None = None   # the rule a refusal of this class names unless told another
    statement: str | None = None      # the statement of a batch it refused (api/batch.py), if any

    def __init__(self, code: str | None = None, message: str = "", *, hint: str = "",
                 sql: str | None = None, start: int | None = None, end: int | None = None,
                 rule: str | None = None):
        self.code = code or type(self).code
        self.message = message
        self.hint = hint or HINTS.get(self.code, "")
        self.sql = sql
        if sql is not None and start is not None:
            # Never past the text (a parser may point just after the last character).
            last = max(len(sql.rstrip()) - 1, 0)
            start = min(start, last)
            end = min(end if end is not None else start, last)
        self.start = start
        self.end = end if end is not None else start
        self.rule: str | None = rule or type(self).default_rule   # the rule that refused
        super().__init__(f"[{self.code}] {message}")

    @property
    def kind(self) -> str:
        """``refused`` (the query is not allowed, or over budget), ``setup`` (policy, database or
        ledger: DP5xx, DP403-DP406; the analyst's missing token, DP410) or ``failed`` (DP9xx); the CLI's exit code follows it."""
        return error_kind(self.code)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.kind]

    @property
    def line(self) -> int | None:
        if self.sql is None or self.start is None:
            return None
        return self.sql.count("\n", 0, self.start) + 1

    @property
    def col(self) -> int | None:
        if self.sql is None or self.start is None:
            return None
        return self.start - (self.sql.rfind("\n", 0, self.start) + 1) + 1

    def excerpt(self) -> list[str]:
        """The caret lines under the offending SQL (none when the error is not about a place in it)."""
        if self.line is None or self.sql is None or self.start is None or self.col is None:
            return []
        lines = self.sql.splitlines() or [""]
        text = lines[self.line - 1] if self.line - 1 < len(lines) else ""
        width = max(1, min(self.end if self.end is not None else self.start, self.start + len(text)) - self.start + 1)
        gutter = " " * len(str(self.line))
        return [f"{gutter}--> line {self.line}, column {self.col}", f"{gutter} |", f"{self.line} | {text}",
                f"{gutter} | {' ' * (self.col - 1)}{'^' * width}"]

    def __str__(self) -> str:
        """The whole refusal, as ``format`` gives it: a notebook's traceback shows only ``str(e)``."""
        return self.format()

    def format(self) -> str:
        """Render as ``error[DP###]: message`` plus a caret excerpt under the offending SQL."""
        out = [f"error[{self.code}]: {self.message}"] + self.excerpt()
        if self.rule:
            out.append(f"rule: {self.rule}")
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)


class SqlSyntaxError(DpsqlError):
    """The SQL does not parse (DP100)."""
    code = "DP100"
    default_rule = "parses"


class UnsupportedConstruct(DpsqlError):
    """The SQL parses but uses something outside the dpsql dialect (DP1xx, DP2xx, DP3xx)."""
    code = "DP102"


class PrivacyViolation(UnsupportedConstruct):
    """The query would single out a person: identifier columns, raw values, private keys."""
    code = "DP203"


class NeedsBounds(UnsupportedConstruct):
    """The query needs the bounds of ``bounds: auto`` columns, or the automatic contribution bounds of
    its tables, not chosen yet (DP330). A query asked
    through the connection never shows it: the connection chooses them (a DP query, charged) and
    plans again (api/auto_bounds.py); explain, which spends nothing, says so with it."""
    code = "DP330"
    default_rule = "automatic_bounds"
    columns: tuple[tuple[str, str], ...] = ()   # (table, column) of each, in the policy's names
    # ``max_rows_per_unit: auto`` / ``max_groups_per_unit: auto`` not chosen yet: (table, "rows" | "groups")
    contributions: tuple[tuple[str, str], ...] = ()
    partitions: int | None = None   # the query's partitions when its keys are public (for choosing L)
    unit: str | None = None         # the name the query's person is read by (its relation's unit column)
    limits: tuple[int, int] = (1, 1)   # the query's L and C where they are not automatic


class InvalidParameter(DpsqlError):
    """epsilon, delta or another caller-supplied parameter is out of range (DP401)."""
    code = "DP401"
    default_rule = "parameter_ranges"


class BudgetExceeded(DpsqlError):
    """The query asks for more privacy budget than remains (DP402). Nothing was spent."""
    code = "DP402"
    default_rule = "budget_fits"

    def __init__(self, requested, remaining, *, budget: str | None = None, composed: str = "", **kw):
        self.requested = requested
        # Which budget: None for a ledger's only one (the owner's), else "the total, ..." or "analyst 'x'".
        self.budget = budget
        which = "" if budget is None else f" of {budget}"
        if remaining is None:   # the total shared by analysts: what is left of it is not theirs to know
            self.remaining = self.difference = None
            kw["hint"] = kw.get("hint") or ("nothing was spent; repeat an identical earlier query (replayed at no "
                                            "cost), or ask the data owner to raise the total budget")
            super().__init__("DP402", f"privacy budget{which} exceeded: requested epsilon={requested[0]:g}, "
                             f"delta={requested[1]:g}; what is left of it is not shown (it would tell how much "
                             "the other analysts spent)", **kw)
            return
        self.remaining = remaining
        self.difference = (requested[0] - remaining[0], requested[1] - remaining[1])
        kw["hint"] = kw.get("hint") or _budget_hint(remaining)
        # An accountant that composes more tightly than a sum (zcdp, pld) says what the history with this
        # query would be instead of a difference: its remaining epsilon is stated at the total's delta.
        short = (f"; {composed}" if composed else
                 f"; short by epsilon={max(self.difference[0], 0):g}, delta={max(self.difference[1], 0):g}")
        super().__init__(
            "DP402",
            f"privacy budget{which} exceeded: requested epsilon={requested[0]:g}, delta={requested[1]:g}; "
            f"remaining epsilon={remaining[0]:g}, delta={remaining[1]:g}{short}",
            **kw)


def _budget_hint(remaining) -> str:
    """DP402 always says what to do next, whoever raises it."""
    if remaining[0] <= 0:
        return ("nothing was spent; the budget is used up: only an identical earlier query (replayed at no "
                "cost) can still be answered; the data owner can raise the total budget")
    return (f"nothing was spent; ask for at most the remaining budget (epsilon <= {remaining[0]:g}, "
            f"delta <= {remaining[1]:g}), repeat an identical earlier query (replayed at no cost), "
            "or ask the data owner to raise the total budget")


class AuthError(DpsqlError):
    """An unknown or revoked analyst token or name (DP407); one message for both, never the token. Also
    no token at all on the analyst's side (DP410, a set-up error: nothing was sent)."""
    code = "DP407"


class PolicyError(DpsqlError):
    """The policy is malformed or does not match the database (DP501, DP502)."""
    code = "DP501"


class ExecutionError(DpsqlError):
    """The engine failed after the spend was recorded; no data-dependent detail is shown (DP900)."""
    code = "DP900"


class DeadlineExceeded(DpsqlError):
    """The request ran past its deadline and was stopped: DP425 before anything was spent, DP901 when a
    DP query's charge was already recorded (it stays spent)."""
    code = "DP425"
    default_rule = "bounded_work"


class InternalError(DpsqlError):
    """An invariant broke inside dpsql: this is probably a bug (DP999)."""
    code = "DP999"


class RequestError(DpsqlError):
    """An HTTP request the server refuses before any query runs: malformed, unauthenticated, not
    found, too many, too large or too slow (DP408, DP420-DP424; README, "The HTTP API"). Nothing is
    spent. Here, not in the server, because the analyst's client rebuilds it from the server's body.

    >>> RequestError("DP422", "the request body is larger than 1048576 bytes").code
    'DP422'
    """
    code = "DP408"


class RandomizeError(DpsqlError):
    """``dpsql randomize`` cannot randomize the table as asked (DP510-DP513): an unknown column, a column
    without a public domain, a value outside it, an output that exists. Nothing is written."""
    code = "DP510"


class ConsistencyError(DpsqlError):
    """Released tables that ``dpsql/publish/consistency.py`` cannot make consistent (DP520-DP523): a
    malformed table, a cell twice, keys that are not subsets of one table's, an output whose noise
    variance the plan does not give. Released values only: nothing is spent, nothing private shown."""
    code = "DP520"


class ReleaseError(DpsqlError):
    """A release (``dpsql.publish``, ``dpsql publish``) that cannot start as given (DP524-DP528): a spec
    that cannot be read, a budget or a statistic that is not valid, a split that cannot be made, an
    output that cannot be written. Raised before anything is charged: nothing is spent."""
    code = "DP524"
