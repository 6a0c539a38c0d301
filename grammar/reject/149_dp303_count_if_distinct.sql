-- expect: DP303
SELECT COUNT_IF(DISTINCT active) FROM people
