-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 0) COUNT(*) FROM visits
