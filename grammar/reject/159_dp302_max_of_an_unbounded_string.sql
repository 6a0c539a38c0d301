-- expect: DP302
SELECT MAX(zip) FROM people
