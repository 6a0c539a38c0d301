SELECT COUNT(*) FROM people WHERE income / (age - age) > 1
