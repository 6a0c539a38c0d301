-- expect: DP305
SELECT COUNT(*) FROM people WHERE COUNT(*) > 1
