-- expect: DP302
SELECT AVG(joined, contribution_bounds_per_row => (0, 1)) FROM people
