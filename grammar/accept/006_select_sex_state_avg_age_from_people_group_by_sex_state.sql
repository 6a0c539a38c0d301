SELECT sex, state, AVG(age) FROM people GROUP BY sex, state
