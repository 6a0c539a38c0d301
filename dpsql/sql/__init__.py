"""The SQL foundation that frontend, plan, lower and engines all build on, and that imports nothing of
dpsql but its errors: sqlglot node builders (``build``), DuckDB's type names and predicates
(``types``), DATE/TIMESTAMP literals (``literals``), positions of nodes in the SQL text
(``positions``), DuckDB's own schemas that a query may not name (``schemas``), the one comparison builder (``compare``), the totality typing (``totality``) and the
guards that make a user expression total (``guard``)."""
