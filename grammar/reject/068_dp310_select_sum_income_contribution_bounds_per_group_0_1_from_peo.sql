-- expect: DP310
SELECT SUM(income, contribution_bounds_per_group => (0, 1)) FROM people
