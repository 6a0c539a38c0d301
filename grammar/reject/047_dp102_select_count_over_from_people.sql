-- expect: DP102
SELECT COUNT(*) OVER () FROM people
