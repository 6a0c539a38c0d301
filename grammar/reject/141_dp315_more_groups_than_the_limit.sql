-- expect: DP315
-- 1001 x 101 x 501 groups, every one released (WorkLimits.max_rows)
SELECT FLOOR(income / 1) AS b, FLOOR(age / 1) AS a, FLOOR(income / 2) AS c, COUNT(*) AS n
FROM people
GROUP BY FLOOR(income / 1), FLOOR(age / 1), FLOOR(income / 2)
