SELECT COUNT(*) FROM people WHERE age // 0 = 1 OR age % 0 = 1
