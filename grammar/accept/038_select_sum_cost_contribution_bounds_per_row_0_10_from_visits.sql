SELECT SUM(cost, contribution_bounds_per_row => (0, 10)) FROM visits
