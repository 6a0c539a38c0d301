-- FLOOR of a DOUBLE stays a DOUBLE on Spark too; a DATE BETWEEN a TIMESTAMP at midnight compares days (issue 27)
SELECT FLOOR(income / 100) AS band, COUNT(*) AS n FROM people
WHERE income >= 0 AND joined BETWEEN DATE '2020-01-31' + INTERVAL 1 MONTH AND DATE '2020-12-31' GROUP BY band
