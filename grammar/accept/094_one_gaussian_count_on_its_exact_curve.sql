SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 1e-6, mechanism = 'Gaussian') COUNT(*) AS n FROM people
