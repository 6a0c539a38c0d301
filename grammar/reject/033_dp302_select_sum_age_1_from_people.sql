-- expect: DP302
SELECT SUM(age + 1) FROM people
