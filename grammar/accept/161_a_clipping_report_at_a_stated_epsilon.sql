SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, clipping_epsilon = 0.2) state, AVG(income) AS mean, COUNT_IF(income > 100) AS rich FROM people GROUP BY state
