"""Engines: where the exact stage runs. DuckDB today: the policy bound to the real schema, public key
sets in TEMP tables, the connection opened read-only and locked down."""
