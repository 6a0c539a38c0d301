SELECT SUM(age + 1) FROM people
