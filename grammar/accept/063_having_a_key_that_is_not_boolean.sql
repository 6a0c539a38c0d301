SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING sex
