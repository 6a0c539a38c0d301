-- expect: DP102
SELECT DISTINCT sex FROM people
