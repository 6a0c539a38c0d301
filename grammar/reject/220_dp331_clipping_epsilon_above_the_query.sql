-- expect: DP331
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, clipping_epsilon = 0.5) clinic, COUNT(*) FROM visits GROUP BY clinic
