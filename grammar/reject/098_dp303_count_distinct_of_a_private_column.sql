-- expect: DP303
SELECT COUNT(DISTINCT zip) FROM people
