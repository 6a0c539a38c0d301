-- expect: DP302
SELECT SUM(zip) FROM people
