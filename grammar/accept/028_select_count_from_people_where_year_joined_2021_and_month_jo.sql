SELECT COUNT(*) FROM people WHERE year(joined) = 2021 AND month(joined) BETWEEN 1 AND 6
