-- expect: DP307
SELECT COUNT(*) FROM people LIMIT age
