SELECT sex, COUNT_IF(age >= 65 OR CAST(zip AS INTEGER) > 40) AS n FROM people GROUP BY sex ORDER BY sex
