-- expect: DP101
ATTACH 'other.duckdb' AS o
