SELECT COUNT(*) FROM people WHERE lower(state) LIKE 'c%' AND length(zip) = 5
