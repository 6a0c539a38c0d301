SELECT 1 AS one, COUNT(*) FROM people
