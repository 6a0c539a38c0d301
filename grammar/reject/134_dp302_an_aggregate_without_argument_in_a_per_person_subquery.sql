-- expect: DP302
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) n, COUNT(*) AS people
FROM (SELECT person_id, COUNT(+) AS n FROM visits GROUP BY person_id) AS per GROUP BY n
