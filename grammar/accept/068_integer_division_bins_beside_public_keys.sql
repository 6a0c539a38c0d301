SELECT age // 25 AS quarter_century, sex, COUNT(*) AS n FROM people WHERE joined < DATE '2021-01-01' GROUP BY 1, 2
