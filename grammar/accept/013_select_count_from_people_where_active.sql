SELECT COUNT(*) FROM people WHERE active
