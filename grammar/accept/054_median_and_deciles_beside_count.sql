SELECT sex, COUNT(*) AS n, MEDIAN(age) AS median_age, QUANTILE_CONT(income, 0.1) AS p10, QUANTILE_CONT(income, 0.9) AS p90
FROM people GROUP BY sex
