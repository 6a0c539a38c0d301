SELECT SUM(age * 2 + 1), SUM(CASE WHEN age > 60 THEN 1 ELSE 0 END) AS old FROM people
