"""Tests of dpsql/sql/: the comparison builder and the totality typing, against DuckDB itself."""
