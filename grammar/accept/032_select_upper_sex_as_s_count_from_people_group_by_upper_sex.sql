SELECT upper(sex) AS s, COUNT(*) FROM people GROUP BY upper(sex)
