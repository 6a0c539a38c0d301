-- expect: DP206
SELECT COUNT(*) FROM (SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic) AS s
