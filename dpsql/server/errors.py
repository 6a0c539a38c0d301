"""The server's own refusals: a request that is malformed, unauthenticated, not found, too many,
too large or too slow (DP407, DP408, DP420-DP423). Nothing is spent; the body says which.

>>> RequestError("DP422", "the request body is larger than 1048576 bytes").code
'DP422'
"""
from __future__ import annotations

from dpsql.errors import DpsqlError


class RequestError(DpsqlError):
    """An HTTP request the server refuses before any query runs (see README, "The HTTP API")."""
    code = "DP408"
