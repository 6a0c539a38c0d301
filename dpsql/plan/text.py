"""How the plan writes numbers and the query it is for, and the confidence level of every error bar it reports."""
from __future__ import annotations

import math
import re

CONFIDENCE = 0.95   # the level of every error bar explain reports (a measurement's ``error``)


def fmt(x: float) -> str:
    """Short, exact-enough numbers: integers as integers, powers of two as 2^k when tiny."""
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    if x > 0 and math.log2(x) == int(math.log2(x)) and x < 1e-3:
        return f"2^{int(math.log2(x))}"
    return f"{x:.6g}"


# Comments and blank space before the query's first word: a file's header ("-- monthly report").
_HEADER = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.S)


def heading(sql: str) -> str:
    """The first line of an explain: the query on one line, without the comments that open it.

    >>> heading("-- monthly report\\n/* by sex */ SELECT sex,\\n  COUNT(*) FROM people -- all")
    'dpsql plan for: SELECT sex, COUNT(*) FROM people -- all'
    """
    return f"dpsql plan for: {' '.join(_HEADER.sub('', sql).split())}"
