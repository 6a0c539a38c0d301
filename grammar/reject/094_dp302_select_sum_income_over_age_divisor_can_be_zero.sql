-- expect: DP302
SELECT SUM(income / age) FROM people
