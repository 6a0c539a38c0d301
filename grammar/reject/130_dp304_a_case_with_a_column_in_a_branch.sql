-- expect: DP304
SELECT CASE WHEN age < 18 THEN zip ELSE 'adult' END AS z, COUNT(*) FROM people GROUP BY z
