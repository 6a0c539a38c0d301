-- expect: DP308
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 2) COUNT(*) FROM people
