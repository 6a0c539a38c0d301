SELECT COUNT(*) FROM people WHERE age + 1 > 30 AND income * 2 < 1000
