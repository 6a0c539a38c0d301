-- expect: DP100
-- sqlglot reads 1e as a number, DuckDB fails converting it: refused at the parse with its position (the
-- slow differential test found it crashing the divisor rule with Python's ValueError)
SELECT COUNT(*) FROM people WHERE age // 1e = 1
