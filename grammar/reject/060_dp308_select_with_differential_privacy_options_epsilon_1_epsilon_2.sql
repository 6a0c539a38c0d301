-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, epsilon = 2) COUNT(*) FROM people
