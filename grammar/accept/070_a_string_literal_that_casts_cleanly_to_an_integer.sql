SELECT COUNT(*) AS n FROM people WHERE age = '42'
