"""Tests of dpsql/client/: dpsql.remote and the CLI's --server mode against a real server."""
