SELECT COUNT(income), SUM(income), AVG(income) FROM people
