-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, mechanism = 'cauchy') COUNT(*) FROM people
