-- a bound past the doubles' range (1e400) narrows no derived key (the slow fuzz test found an OverflowError)
SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM people WHERE age >= -1e400 AND age < 60
GROUP BY FLOOR(age / 10) * 10
