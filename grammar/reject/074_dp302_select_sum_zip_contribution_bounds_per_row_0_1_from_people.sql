-- expect: DP302
SELECT SUM(zip, contribution_bounds_per_row => (0, 1)) FROM people
