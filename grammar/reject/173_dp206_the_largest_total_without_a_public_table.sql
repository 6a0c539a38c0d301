-- expect: DP206
WITH r (k, v) AS (SELECT clinic, COUNT(*) FROM visits GROUP BY clinic) SELECT k, v FROM r WHERE v = (SELECT MAX(v) FROM r)
