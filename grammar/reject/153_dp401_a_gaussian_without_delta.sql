-- expect: DP401
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, mechanism = 'gaussian') COUNT(*) FROM people
