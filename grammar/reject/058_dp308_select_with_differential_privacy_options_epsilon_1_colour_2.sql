-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, colour = 2) COUNT(*) FROM people
