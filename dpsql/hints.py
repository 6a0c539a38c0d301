"""Every error code's hint: the fix, or the documented reason, for an error whose site says none.

A site that knows more (the column, the closest name, the budget left) gives its own hint; these are
what the rest say (``DpsqlError`` falls back on them). Each code of ``grammar/README.md``'s table has
one, and a test walks the reject corpus for a hint on every refusal.

>>> HINTS["DP203"].startswith("leave identifier columns out")
True
"""
from __future__ import annotations

DIALECT = "the dialect: grammar/dpsql.ebnf and grammar/README.md"

HINTS = {
    # Refusals of the SQL.
    "DP100": f"check the SQL at the caret; dpsql reads DuckDB's SQL with GoogleSQL's DP clause ({DIALECT})",
    "DP101": "send one SELECT; dpsql answers queries and changes nothing (no DDL, DML, PRAGMA, SET, COPY, ATTACH); "
             "ask the parts of a UNION as queries of their own",
    "DP102": f"rewrite without it: a construct outside {DIALECT} has no bounded effect of one person on the answer",
    "DP103": "use a deterministic function of the allowlist (grammar/README.md): a function that reads files, "
             "settings, the clock or randomness could reveal data or cancel the noise",
    "DP201": "FROM names one table of the policy, unqualified (the policy's tables are the only data a query reads)",
    "DP202": "use a column the policy declares for this table, qualified, if at all, by the table or its alias",
    "DP203": "leave identifier columns out: they single out a person; count people with COUNT(DISTINCT <privacy "
             "unit>), group by a column with public keys",
    "DP204": "join along the policy's links with INNER or LEFT JOIN ... ON equalities of columns, or filter with "
             "[NOT] EXISTS/IN over one table (README, 'Using it'); otherwise ask the parts as queries of their own",
    "DP205": "join the table to the tables its link references, up to the one holding the privacy unit",
    "DP206": "join private tables only along their declared links (via/references), so each joined row is one "
             "person's; group a FROM-subquery by the person",
    "DP207": "join a public table on an equality with columns unique in it (a key) reached from the private tables",
    "DP301": "release aggregates (COUNT, SUM, AVG, ...) and GROUP BY keys only: a raw value is one person's",
    "DP302": "give the aggregate one column (or an expression of columns) whose bounds the policy declares "
             "(lower/upper), or a condition for COUNT_IF",
    "DP303": "use a supported aggregate (COUNT, COUNT_IF, SUM, AVG, VAR_*, STDDEV_*, MEDIAN, QUANTILE_CONT, MIN, "
             "MAX, MODE: README, 'What you can ask'), DISTINCT only in COUNT",
    "DP304": "group by a column with public keys (keys: in the policy), an expression derived from bounds "
             "(YEAR(d), FLOOR(x / w)), or pass delta > 0 for DP partition selection",
    "DP305": "aggregates go in SELECT, HAVING and ORDER BY: filter rows in WHERE, groups in HAVING",
    "DP306": "compare values of one kind, with literals that cast exactly to the column's type (int_col = 4, "
             "varchar_col = '5')",
    "DP307": "LIMIT and OFFSET take a whole-number literal; ORDER BY takes outputs (a name, a position) and "
             "expressions of them",
    "DP308": "see the options, named arguments and their values in grammar/README.md, DP308",
    "DP309": "privacy_unit_column names the table's privacy unit as the policy declares it",
    "DP310": "write contribution_bounds_per_group => (lower, upper) or _per_row, two number literals with "
             "lower <= upper, as the aggregate takes them",
    "DP311": "cast the operands of the expression at the caret to one type; nothing was spent",
    "DP312": "write QUANTILE_CONT(x, q) with q one number literal in [0, 1]",
    "DP313": "use REPLACE with literal pattern and replacement, and do not nest it to build long strings",
    "DP314": "split the query, or shorten it (README, 'Limits')",
    "DP315": "group by fewer or coarser keys, or keep fewer keys with a WHERE on them",
    "DP316": "the data owner declares lower/upper bounds for the column in the policy",
    "DP317": "ask the subquery as a query of its own, then use its released value as a literal",
    "DP318": "make the query around the subquery run on every row of its public tables (cast its operands to "
             "one type); nothing was spent",
    "DP330": "ask the query through the connection (db.sql), which chooses the bounds first, or declare them",
    "DP331": "give clipping_epsilon below the query's epsilon, or leave it out for 10% of it",
    # Parameters and budgets.
    "DP401": "epsilon > 0 and finite; 0 <= delta < 1; a deadline > 0 seconds",
    "DP402": "ask with a smaller epsilon, or ask the data owner for more budget; nothing was spent",
    "DP403": "pass a ledger: ledger=\"budget.sqlite\" (--ledger FILE), or \":memory:\" for this connection only",
    "DP404": "use the ledger's units, record the change with dpsql ledger rebind, or use a new ledger path",
    "DP405": "retry when the other process is done; nothing was spent",
    "DP406": "point at the right ledger file or restore it from a backup; dpsql never recreates one",
    "DP407": "ask the data owner for a token (dpsql analyst add)",
    "DP408": "send one JSON object with the documented fields (README, 'The HTTP API')",
    "DP409": "choose another name, or a budget within the ledger's total (dpsql analyst list)",
    "DP410": "pass token=, set DPSQL_TOKEN, or write it to ~/.config/dpsql/token",
    "DP420": "your own history (GET /v1/history) lists the answers you can read",
    "DP421": "retry in a moment: too many requests in flight; nothing was spent",
    "DP422": "send a smaller request body; nothing was spent",
    "DP423": "send the request body at once; nothing was spent",
    "DP424": "retry after the Retry-After seconds: free requests are rate-limited per analyst",
    "DP425": "retry later, or ask a cheaper query; nothing was spent",
    "DP440": "nothing was spent; run it on DuckDB, or ask for COUNT, SUM, AVG, VAR or STDDEV only on Spark",
    "DP426": "give the batch an epsilon to split, weights > 0 or explicit epsilons within it, and each statement "
             "its own name; nothing was spent",
    # The data owner's set-up.
    "DP501": "fix the policy entry that the message names",
    "DP502": "make the policy and the data agree on the table and column that the message names",
    "DP503": "check the database path, and read files through a policy's source: rather than a view",
    "DP504": "link to a key that is unique in the data (or make it unique)",
    "DP505": "fix the source and connect again; nothing was spent",
    "DP510": "name columns the table has, each once, with an epsilon each (dpsql randomize --help)",
    "DP511": "give the column a public domain: --domain col=a,b,c, the policy's keys, or a BOOLEAN column",
    "DP512": "map every value into the domain first (COALESCE(col, 'unknown'))",
    "DP513": "write to a new output: two randomizations kept cost both epsilons",
    "DP520": "give each marginal its key columns, a value column of finite numbers and its noise variance > 0 "
             "(the square of the noise's standard deviation; explain shows each measurement's noise)",
    "DP521": "release each group once per table: merge or drop the repeated cell",
    "DP522": "pass tables whose keys are subsets of one table's keys, and that table (the finest) with them",
    "DP523": "pass a COUNT or SUM output, or build the Marginal with its variance yourself",
    "DP524": "write the release spec as YAML (or a dict) with budget: and statistics: (README, 'Publishing a release')",
    "DP525": "give the release a budget: {epsilon: E, delta: D} with E > 0 and 0 <= D < 1",
    "DP526": "give each statistic a name (letters, digits, _ or -) of its own and its sql, and at most one of "
             "weight (> 0) or epsilon (> 0)",
    "DP527": "keep the statistics' own epsilons (deltas) within the release's budget, and leave some for the "
             "weighted ones",
    "DP528": "write the release to a directory you can write to, as parquet, csv or duckdb",
    # Failures.
    "DP900": "the budget stays spent; the owner's log has the cause",
    "DP901": "the budget stays spent; ask a cheaper query, or for a longer deadline",
    "DP999": "this is probably a bug in dpsql: please report it with the query",
}
