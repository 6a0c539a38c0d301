SELECT sex, COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people) GROUP BY sex
