SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, mechanism = 'gaussian') zip, MIN(age) AS lo, MAX(age) AS hi
FROM people GROUP BY zip HAVING MAX(age) > 10
