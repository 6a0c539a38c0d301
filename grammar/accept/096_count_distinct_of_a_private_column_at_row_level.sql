SELECT sex, COUNT(DISTINCT zip) AS zips, COUNT(DISTINCT age) AS ages FROM people GROUP BY sex
