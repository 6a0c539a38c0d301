SELECT COUNT(*) FROM (SELECT * FROM people WHERE age > 30) AS p WHERE p.income > 5
