SELECT SUM(age, contribution_bounds_per_row => (0, 1)) FROM people
