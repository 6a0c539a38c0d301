-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 10) clinic, COUNT(*) AS n
FROM visits GROUP BY clinic
