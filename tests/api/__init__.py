"""Tests of dpsql/api/: the connection, the Result, the plan cache, what the analyst is told, work limits."""
