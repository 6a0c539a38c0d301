WITH c AS (SELECT clinic AS k, COUNT(*) AS n FROM visits GROUP BY clinic)
SELECT region, doctors, n FROM clinics, c WHERE k = clinics.clinic AND n = (SELECT MIN(n) FROM c)
