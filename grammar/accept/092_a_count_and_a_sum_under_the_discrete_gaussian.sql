SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, mechanism = 'gaussian') clinic, COUNT(*) AS n, SUM(cost) AS s FROM visits GROUP BY clinic
