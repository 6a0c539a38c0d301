-- expect: DP308
-- caret: top_k = 'exponential'
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') state, AVG(age) AS a FROM people GROUP BY state ORDER BY a DESC LIMIT 1
