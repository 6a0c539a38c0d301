SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 10, delta = 1e-7)
    zip, MEDIAN(age * 12 + 6) AS median_months
FROM people GROUP BY zip
