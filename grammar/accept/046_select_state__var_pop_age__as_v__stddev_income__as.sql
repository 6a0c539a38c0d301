SELECT state, VAR_POP(age) AS v, STDDEV(income) AS s FROM people GROUP BY state
