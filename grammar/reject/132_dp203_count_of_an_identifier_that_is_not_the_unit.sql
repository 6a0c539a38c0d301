-- expect: DP203
SELECT COUNT(ssn) FROM people
