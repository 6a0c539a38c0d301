-- expect: DP305
SELECT SUM(COUNT(*)) FROM people
