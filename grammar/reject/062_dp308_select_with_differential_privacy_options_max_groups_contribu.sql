-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 1.5) COUNT(*) FROM visits
