SELECT COUNT(income / 2), AVG(ABS(age - 50)) FROM people
