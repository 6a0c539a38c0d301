"""Tests of dpsql/engines/: the locked-down DuckDB, data read before the lock-down, key tables, links
checked in their compared form."""
