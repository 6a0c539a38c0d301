SELECT sex, MIN(age) AS youngest, MAX(income) AS top FROM people GROUP BY sex
