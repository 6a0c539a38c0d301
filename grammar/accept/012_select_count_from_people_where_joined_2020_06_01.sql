SELECT COUNT(*) FROM people WHERE joined > '2020-06-01'
