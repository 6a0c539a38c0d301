-- expect: DP303
SELECT MAX(age) FROM people
