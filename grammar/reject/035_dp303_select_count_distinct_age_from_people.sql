-- expect: DP303
SELECT COUNT(DISTINCT age) FROM people
