"""Tests of dpsql/frontend/: the dialect, joins and lookups, folding, intervals, keys derived from the
policy, public-only queries, validation."""
