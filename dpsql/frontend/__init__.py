"""Frontend: SQL text to a checked query. The dpsql dialect (DuckDB's plus GoogleSQL's DP clause),
parsing with positions, DP options, flattening of CTEs and row-wise subqueries, the allowlist of
validation rules, the typing that proves totality, and interval arithmetic for argument bounds."""
