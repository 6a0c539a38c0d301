-- expect: DP303
SELECT MIN(DISTINCT age) FROM people
