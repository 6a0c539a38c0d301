-- expect: DP317
SELECT c.region, COUNT(*) AS n, MAX((SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic)) AS m FROM visits v, clinics c WHERE v.clinic = c.clinic GROUP BY c.region
