-- expect: DP302
SELECT MIN(age, 3) FROM people
