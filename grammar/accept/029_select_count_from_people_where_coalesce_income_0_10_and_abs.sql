SELECT COUNT(*) FROM people WHERE COALESCE(income, 0) > 10 AND abs(age - 50) < 10
