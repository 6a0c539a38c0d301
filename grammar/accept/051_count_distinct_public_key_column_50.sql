SELECT sex, COUNT(DISTINCT state) AS states FROM people GROUP BY sex
