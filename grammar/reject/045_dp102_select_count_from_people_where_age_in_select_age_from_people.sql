-- expect: DP102
SELECT COUNT(*) FROM people WHERE age IN (SELECT age FROM people)
