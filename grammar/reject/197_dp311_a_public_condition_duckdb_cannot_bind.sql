-- expect: DP311
-- A condition on a joined public table that DuckDB cannot bind (no LIKE of an INTEGER): the read of its
-- keys refuses it, free (the slow fuzz test found DuckDB's BinderException escaping from that read)
SELECT region, COUNT(*) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic WHERE doctors LIKE 4 GROUP BY region
