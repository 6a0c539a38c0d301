-- expect: DP308
-- caret: 'gumbel'
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'gumbel') state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC LIMIT 1
