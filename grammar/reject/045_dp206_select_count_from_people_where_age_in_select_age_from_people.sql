-- expect: DP206
SELECT COUNT(*) FROM people WHERE age IN (SELECT age FROM people)
