SELECT p.sex, COUNT(*) FROM people AS p GROUP BY p.sex
