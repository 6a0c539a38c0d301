SELECT COUNT(*) AS n FROM people WHERE active = 1 AND age > FALSE AND income < '250.5' AND age IN ('30', 31)
