SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, mechanism = 'gaussian') zip, AVG(age) AS a, MEDIAN(income) AS m FROM people GROUP BY zip
