-- a cast of a fraction to an integer rounds half away from zero on every engine (issue 27): ROUND, then the cast
SELECT sex, SUM(CAST(income / 4 AS INTEGER)) AS s, COUNT(*) AS n FROM people
WHERE CAST(income AS BIGINT) % 2 = 0 GROUP BY sex
