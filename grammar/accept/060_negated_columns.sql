SELECT SUM(-age), AVG(-age), COUNT(-age) FROM people
