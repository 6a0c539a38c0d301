"""Tests of dpsql/server/: the HTTP API, its limits, load and SIGKILL, the browser console."""
