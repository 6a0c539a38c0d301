"""Frontend: SQL text to a checked query. The dpsql dialect (DuckDB's plus GoogleSQL's DP clause),
parsing with positions, DP options, flattening of CTEs and row-wise subqueries, joins turned into one
relation, the allowlist of validation rules, and interval arithmetic for argument bounds. The typing
that proves totality and the comparison builder are the SQL foundation's (``dpsql/sql/``)."""
