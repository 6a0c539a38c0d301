-- expect: DP201
WITH r (k, v) AS (SELECT clinic, COUNT(*) FROM visits GROUP BY clinic) SELECT region, v FROM clinics, r
WHERE clinics.clinic = k AND v = (SELECT MAX(v) FROM r) AND doctors > 2
