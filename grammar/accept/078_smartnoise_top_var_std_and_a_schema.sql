SELECT TOP 2 sex, VAR(age) AS v, STD(income) AS s, STDDEV(age) AS sd FROM census.people GROUP BY sex ORDER BY sex
